//! The real credential chain, backed by azure_identity, in the order and with the variables of
//! `DefaultAzureCredential` in the other Azure SDKs (.NET, Python, Java, JavaScript, Go):
//! environment (client secret, else certificate), workload identity, managed identity, Azure
//! CLI, Azure Developer CLI.
//!
//! Matching them means a CI job, an AKS pod, a VM or a laptop set up for any Azure SDK works with
//! dsinfra unchanged: the environment wins when it names a service principal; a federated token
//! file (GitHub Actions OIDC, AKS) comes next; a VM's identity needs no setup (`AZURE_CLIENT_ID`
//! picks among several user-assigned ones, as in the other SDKs); a laptop falls through to
//! `az login` or `azd auth login`. The sources the other SDKs add for IDEs and brokers (Visual
//! Studio, VS Code, PowerShell, interactive browser) are left out: dsinfra is a CLI.
//!
//! Which sources are tried is a pure decision over the environment ([`chain_sources`], tested
//! below); the first source that produces a token is remembered so later calls go straight to it;
//! when none does, one message says, per source, why.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use azure_core::cloud::{CloudConfiguration, CustomConfiguration};
use azure_core::credentials::TokenCredential as AzureTokenCredential;
use azure_core::http::{ClientOptions, Transport, Url};
use azure_identity::Executor;
use chrono::DateTime;

use super::certificate::CertificateAssertion;
use super::credential::{AccessToken, TokenCredential, TokenFuture};
use super::error::ArmError;
use super::secret::Secret;

/// A place a token can come from, in chain order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialSource {
    /// AZURE_TENANT_ID + AZURE_CLIENT_ID + AZURE_CLIENT_SECRET.
    ClientSecret,
    /// AZURE_TENANT_ID + AZURE_CLIENT_ID + AZURE_CLIENT_CERTIFICATE_PATH
    /// (+ AZURE_CLIENT_CERTIFICATE_PASSWORD).
    ClientCertificate,
    /// AZURE_FEDERATED_TOKEN_FILE + AZURE_CLIENT_ID + AZURE_TENANT_ID.
    WorkloadIdentity,
    /// The VM's or App Service's managed identity; AZURE_CLIENT_ID picks a user-assigned one.
    ManagedIdentity,
    /// `az login`.
    AzureCli,
    /// `azd auth login`.
    AzureDeveloperCli,
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ClientSecret => "environment (client secret)",
            Self::ClientCertificate => "environment (client certificate)",
            Self::WorkloadIdentity => "workload identity",
            Self::ManagedIdentity => "managed identity",
            Self::AzureCli => "Azure CLI",
            Self::AzureDeveloperCli => "Azure Developer CLI",
        })
    }
}

/// One step of the chain: a source to try, or a source the environment does not configure (and
/// which variables it lacks), kept so the final message can say so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainStep {
    /// Try this source.
    Try(CredentialSource),
    /// `source` (a name for messages) is not configured: `missing` says which variables are unset.
    NotConfigured {
        /// "environment" or "workload identity".
        source: &'static str,
        /// The unset variables, e.g. "AZURE_FEDERATED_TOKEN_FILE not set".
        missing: String,
    },
}

/// The environment variables the chain reads. A value that is set but empty counts as unset.
#[derive(Clone, Default)]
pub struct CredentialEnv {
    /// AZURE_TENANT_ID.
    pub tenant_id: Option<String>,
    /// AZURE_CLIENT_ID: the service principal, the workload identity's application, or the
    /// user-assigned managed identity.
    pub client_id: Option<String>,
    /// AZURE_CLIENT_SECRET.
    pub client_secret: Option<Secret>,
    /// AZURE_CLIENT_CERTIFICATE_PATH: a PEM file with the certificate and its private key.
    pub client_certificate_path: Option<PathBuf>,
    /// AZURE_CLIENT_CERTIFICATE_PASSWORD: opens an encrypted private key.
    pub client_certificate_password: Option<Secret>,
    /// AZURE_FEDERATED_TOKEN_FILE: a file holding a federated (OIDC) token.
    pub federated_token_file: Option<PathBuf>,
    /// AZURE_AUTHORITY_HOST: the Entra ID host, e.g. https://login.microsoftonline.us.
    pub authority_host: Option<String>,
}

impl fmt::Debug for CredentialEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialEnv")
            .field("tenant_id", &self.tenant_id)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("client_certificate_path", &self.client_certificate_path)
            .field(
                "client_certificate_password",
                &self.client_certificate_password,
            )
            .field("federated_token_file", &self.federated_token_file)
            .field("authority_host", &self.authority_host)
            .finish()
    }
}

impl CredentialEnv {
    /// Reads the process environment.
    pub fn from_process() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `var` (a map in tests, so no test touches the process
    /// environment).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name| var(name).filter(|v| !v.is_empty());
        Self {
            tenant_id: var("AZURE_TENANT_ID"),
            client_id: var("AZURE_CLIENT_ID"),
            client_secret: var("AZURE_CLIENT_SECRET").map(Secret::new),
            client_certificate_path: var("AZURE_CLIENT_CERTIFICATE_PATH").map(PathBuf::from),
            client_certificate_password: var("AZURE_CLIENT_CERTIFICATE_PASSWORD").map(Secret::new),
            federated_token_file: var("AZURE_FEDERATED_TOKEN_FILE").map(PathBuf::from),
            authority_host: var("AZURE_AUTHORITY_HOST"),
        }
    }
}

/// The chain's steps, in order. The environment source joins when it names a tenant, a client
/// and a secret (which wins, as in the other SDKs' EnvironmentCredential) or a certificate;
/// workload identity when the token file, client and tenant are all set. A half-configured source
/// falls through to the next one, as in the other SDKs, and the final message says what it lacked.
pub fn chain_sources(env: &CredentialEnv) -> Vec<ChainStep> {
    let unset = |pairs: &[(bool, &str)]| {
        let names: Vec<&str> = pairs
            .iter()
            .filter(|(set, _)| !set)
            .map(|(_, n)| *n)
            .collect();
        format!("{} not set", names.join(", "))
    };
    let (tenant, client) = (env.tenant_id.is_some(), env.client_id.is_some());
    let mut steps = Vec::with_capacity(5);
    let secret = env.client_secret.is_some();
    let certificate = env.client_certificate_path.is_some();
    steps.push(match (tenant && client, secret, certificate) {
        (true, true, _) => ChainStep::Try(CredentialSource::ClientSecret),
        (true, false, true) => ChainStep::Try(CredentialSource::ClientCertificate),
        _ => ChainStep::NotConfigured {
            source: "environment",
            missing: unset(&[
                (tenant, "AZURE_TENANT_ID"),
                (client, "AZURE_CLIENT_ID"),
                (
                    secret || certificate,
                    "AZURE_CLIENT_SECRET or AZURE_CLIENT_CERTIFICATE_PATH",
                ),
            ]),
        },
    });
    let token_file = env.federated_token_file.is_some();
    steps.push(if token_file && client && tenant {
        ChainStep::Try(CredentialSource::WorkloadIdentity)
    } else {
        ChainStep::NotConfigured {
            source: "workload identity",
            missing: unset(&[
                (token_file, "AZURE_FEDERATED_TOKEN_FILE"),
                (client, "AZURE_CLIENT_ID"),
                (tenant, "AZURE_TENANT_ID"),
            ]),
        }
    });
    steps.extend(
        [
            CredentialSource::ManagedIdentity,
            CredentialSource::AzureCli,
            CredentialSource::AzureDeveloperCli,
        ]
        .map(ChainStep::Try),
    );
    steps
}

/// How long the managed-identity probe may take while the chain is still choosing a source. Off
/// Azure the IMDS endpoint does not answer, and azure_identity's own retries would stall every
/// laptop run before it reaches the CLI (the other SDKs probe with a short timeout too).
const MANAGED_IDENTITY_PROBE: Duration = Duration::from_secs(3);

/// How the chain's credentials reach the network and run the CLIs. The defaults are
/// azure_identity's; tests point them at local stand-ins.
#[derive(Clone, Default)]
pub struct ChainOptions {
    /// The HTTP client every credential uses (token endpoint, IMDS).
    pub transport: Option<Transport>,
    /// Runs `az` and `azd`.
    pub executor: Option<Arc<dyn Executor>>,
}

impl fmt::Debug for ChainOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChainOptions")
            .field("transport", &self.transport.is_some())
            .field("executor", &self.executor.is_some())
            .finish()
    }
}

/// A step as built: a credential ready to ask, or why there is none.
enum Entry {
    Ready(CredentialSource, Arc<dyn AzureTokenCredential>),
    Unavailable(String, String),
}

/// The default credential chain (see the module documentation for the order).
pub struct DefaultCredentialChain {
    entries: Vec<Entry>,
    client_id: Option<String>,
    selected: Mutex<Option<usize>>,
}

impl fmt::Debug for DefaultCredentialChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sources: Vec<_> = self
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::Ready(source, _) => Some(*source),
                Entry::Unavailable(..) => None,
            })
            .collect();
        f.debug_struct("DefaultCredentialChain")
            .field("sources", &sources)
            .finish_non_exhaustive()
    }
}

impl DefaultCredentialChain {
    /// The chain for this process's environment.
    pub fn from_process_env() -> Self {
        Self::new(&CredentialEnv::from_process(), ChainOptions::default())
    }

    /// The chain for `env`.
    pub fn new(env: &CredentialEnv, options: ChainOptions) -> Self {
        let ChainOptions {
            transport,
            executor,
        } = options;
        let mut client_options = ClientOptions {
            transport,
            ..ClientOptions::default()
        };
        if let Some(host) = &env.authority_host {
            let mut cloud = CustomConfiguration::default();
            cloud.authority_host.clone_from(host);
            client_options.cloud = Some(Arc::new(CloudConfiguration::Custom(cloud)));
        }
        let entries = chain_sources(env)
            .into_iter()
            .map(|step| match step {
                ChainStep::Try(source) => {
                    match build(source, env, executor.as_ref(), client_options.clone()) {
                        Ok(credential) => Entry::Ready(source, credential),
                        Err(e) => Entry::Unavailable(source.to_string(), one_line(&e)),
                    }
                }
                ChainStep::NotConfigured { source, missing } => {
                    Entry::Unavailable(source.to_owned(), format!("not configured ({missing})"))
                }
            })
            .collect();
        Self {
            entries,
            client_id: env.client_id.clone(),
            selected: Mutex::new(None),
        }
    }

    /// The source that produced the last token, once one has.
    pub fn selected_source(&self) -> Option<CredentialSource> {
        let selected = *self
            .selected
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match self.entries.get(selected?) {
            Some(Entry::Ready(source, _)) => Some(*source),
            _ => None,
        }
    }

    async fn try_source(
        &self,
        source: CredentialSource,
        credential: &dyn AzureTokenCredential,
        scope: &str,
        probing: bool,
    ) -> Result<AccessToken, String> {
        let scopes = [scope];
        let fetch = credential.get_token(&scopes, None);
        let result = if probing && source == CredentialSource::ManagedIdentity {
            tokio::time::timeout(MANAGED_IDENTITY_PROBE, fetch)
                .await
                .map_err(|_| {
                    format!(
                        "no answer from the managed identity endpoint within {}s (not an Azure VM?)",
                        MANAGED_IDENTITY_PROBE.as_secs()
                    )
                })?
        } else {
            fetch.await
        };
        let token = result.map_err(|e| match source {
            CredentialSource::ManagedIdentity => {
                managed_identity_failure(&e, self.client_id.as_deref())
            }
            _ => one_line(&e),
        })?;
        Ok(AccessToken {
            token: Secret::new(token.token.secret().to_string()),
            expires_on: DateTime::from_timestamp(token.expires_on.unix_timestamp(), 0),
        })
    }

    async fn fetch(&self, scope: &str) -> Result<AccessToken, ArmError> {
        let selected = *self
            .selected
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(Entry::Ready(source, credential)) = selected.and_then(|i| self.entries.get(i)) {
            return self
                .try_source(*source, credential.as_ref(), scope, false)
                .await
                .map_err(|e| ArmError::credential(format!("{source}: {e}")));
        }
        let mut failures = Vec::with_capacity(self.entries.len());
        for (index, entry) in self.entries.iter().enumerate() {
            match entry {
                Entry::Unavailable(source, why) => failures.push(format!("{source}: {why}")),
                Entry::Ready(source, credential) => {
                    match self
                        .try_source(*source, credential.as_ref(), scope, true)
                        .await
                    {
                        Ok(token) => {
                            tracing::debug!(%source, "using Azure credential");
                            *self
                                .selected
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(index);
                            return Ok(token);
                        }
                        Err(e) => failures.push(format!("{source}: {e}")),
                    }
                }
            }
        }
        Err(ArmError::credential(all_failed_message(&failures)))
    }
}

impl TokenCredential for DefaultCredentialChain {
    fn get_token<'a>(&'a self, scope: &'a str) -> TokenFuture<'a> {
        Box::pin(self.fetch(scope))
    }
}

/// The one message when every source failed: each source and why, then what to do.
fn all_failed_message(failures: &[String]) -> String {
    let mut message = String::from(
        "no credential worked. Tried, in the order of the other Azure SDKs' DefaultAzureCredential:",
    );
    for failure in failures {
        message.push_str("\n  - ");
        message.push_str(failure);
    }
    message.push_str(
        "\nSign in with `az login` (or `azd auth login`), or set the variables of one of the \
         sources above (see docs/azure-client.md)",
    );
    message
}

/// Builds the azure_identity credential for `source`.
fn build(
    source: CredentialSource,
    env: &CredentialEnv,
    executor: Option<&Arc<dyn Executor>>,
    client_options: ClientOptions,
) -> Result<Arc<dyn AzureTokenCredential>, String> {
    // chain_sources only asks for a source whose variables are set; these are never hit.
    let missing = || format!("{source}: variables missing");
    let tenant = env.tenant_id.clone().ok_or_else(missing);
    let client = env.client_id.clone().ok_or_else(missing);
    let credential: Arc<dyn AzureTokenCredential> = match source {
        CredentialSource::ClientSecret => {
            let secret = env.client_secret.as_ref().ok_or_else(missing)?;
            azure_identity::ClientSecretCredential::new(
                &tenant?,
                client?,
                azure_core::credentials::Secret::new(secret.expose().to_owned()),
                Some(azure_identity::ClientSecretCredentialOptions { client_options }),
            )
            .map_err(|e| e.to_string())?
        }
        CredentialSource::ClientCertificate => {
            let (tenant, client) = (tenant?, client?);
            let path = env.client_certificate_path.as_ref().ok_or_else(missing)?;
            // The assertion's audience is the token endpoint azure_identity posts to, which it
            // derives the same way from the authority host.
            let authority = env
                .authority_host
                .as_deref()
                .unwrap_or("https://login.microsoftonline.com");
            let audience = Url::parse(authority)
                .and_then(|host| host.join(&format!("/{tenant}/oauth2/v2.0/token")))
                .map_err(|e| format!("AZURE_AUTHORITY_HOST={authority}: {e}"))?;
            let assertion = CertificateAssertion::from_file(
                path,
                env.client_certificate_password.as_ref(),
                &client,
                audience.as_str(),
            )
            .map_err(|e| format!("AZURE_CLIENT_CERTIFICATE_PATH: {e}"))?;
            azure_identity::ClientAssertionCredential::new(
                tenant,
                client,
                assertion,
                Some(azure_identity::ClientAssertionCredentialOptions { client_options }),
            )
            .map_err(|e| e.to_string())?
        }
        CredentialSource::WorkloadIdentity => azure_identity::WorkloadIdentityCredential::new(
            Some(azure_identity::WorkloadIdentityCredentialOptions {
                credential_options: azure_identity::ClientAssertionCredentialOptions {
                    client_options,
                },
                client_id: Some(client?),
                tenant_id: Some(tenant?),
                token_file_path: env.federated_token_file.clone(),
            }),
        )
        .map_err(|e| e.to_string())?,
        CredentialSource::ManagedIdentity => azure_identity::ManagedIdentityCredential::new(Some(
            azure_identity::ManagedIdentityCredentialOptions {
                user_assigned_id: env
                    .client_id
                    .clone()
                    .map(azure_identity::UserAssignedId::ClientId),
                client_options,
            },
        ))
        .map_err(|e| e.to_string())?,
        CredentialSource::AzureCli => azure_identity::AzureCliCredential::new(Some(
            azure_identity::AzureCliCredentialOptions {
                executor: executor.cloned(),
                ..Default::default()
            },
        ))
        .map_err(|e| e.to_string())?,
        CredentialSource::AzureDeveloperCli => azure_identity::AzureDeveloperCliCredential::new(
            Some(azure_identity::AzureDeveloperCliCredentialOptions {
                executor: executor.cloned(),
                ..Default::default()
            }),
        )
        .map_err(|e| e.to_string())?,
    };
    Ok(credential)
}

/// What IMDS says when a VM has several user-assigned identities and the request names none.
const SEVERAL_IDENTITIES: &str = "Multiple user assigned identities exist";

/// A managed-identity failure in words. azure_identity reports every IMDS 400 as "the requested
/// identity has not been assigned"; IMDS's own answer says more (several identities, or none
/// with that client id), so it is read from the response kept in the error.
fn managed_identity_failure(err: &azure_core::Error, client_id: Option<&str>) -> String {
    let answer = imds_answer(err);
    if answer
        .as_deref()
        .is_some_and(|a| a.contains(SEVERAL_IDENTITIES))
        && client_id.is_none()
    {
        return "this machine has several user-assigned identities and nothing says which to \
                use: set AZURE_CLIENT_ID to the client id of one of them"
            .to_owned();
    }
    let mut message = one_line(err);
    if let Some(answer) = answer {
        message = format!("{message} (IMDS: {answer})");
    }
    if let Some(id) = client_id {
        message = format!(
            "{message}; AZURE_CLIENT_ID={id} chose a user-assigned identity: is it assigned to \
             this machine?"
        );
    }
    message
}

/// The `error_description` of an IMDS error answer inside `err`, if there is one. IMDS error
/// bodies hold no token, only the reason.
fn imds_answer(err: &azure_core::Error) -> Option<String> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(azure) = e.downcast_ref::<azure_core::Error>()
            && let azure_core::error::ErrorKind::HttpResponse {
                raw_response: Some(response),
                ..
            } = azure.kind()
        {
            let body: serde_json::Value = serde_json::from_slice(response.body()).ok()?;
            return body["error_description"].as_str().map(str::to_owned);
        }
        current = e.source();
    }
    None
}

/// azure_identity's message on one line, without its troubleshooting link (docs/azure-client.md
/// gives the advice for each source).
fn one_line(err: &impl fmt::Display) -> String {
    err.to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("To troubleshoot, visit"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use CredentialSource::{
        AzureCli, AzureDeveloperCli, ClientCertificate, ClientSecret, ManagedIdentity,
        WorkloadIdentity,
    };

    fn env(vars: &[(&str, &str)]) -> CredentialEnv {
        CredentialEnv::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    fn tried(env: &CredentialEnv) -> Vec<CredentialSource> {
        chain_sources(env)
            .into_iter()
            .filter_map(|s| match s {
                ChainStep::Try(source) => Some(source),
                ChainStep::NotConfigured { .. } => None,
            })
            .collect()
    }

    const TENANT: (&str, &str) = ("AZURE_TENANT_ID", "72f988bf-86f1-41af-91ab-2d7cd011db47");
    const CLIENT: (&str, &str) = ("AZURE_CLIENT_ID", "00000000-0000-0000-0000-000000000001");
    const SECRET: (&str, &str) = ("AZURE_CLIENT_SECRET", "s3cret");
    const CERTIFICATE: (&str, &str) = ("AZURE_CLIENT_CERTIFICATE_PATH", "/etc/sp.pem");
    const TOKEN_FILE: (&str, &str) = ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/token");

    #[test]
    fn the_order_is_the_other_sdks_default_azure_credential() {
        assert_eq!(
            tried(&env(&[TENANT, CLIENT, SECRET, TOKEN_FILE])),
            [
                ClientSecret,
                WorkloadIdentity,
                ManagedIdentity,
                AzureCli,
                AzureDeveloperCli
            ]
        );
        assert_eq!(
            tried(&env(&[])),
            [ManagedIdentity, AzureCli, AzureDeveloperCli]
        );
    }

    #[test]
    fn a_secret_wins_over_a_certificate_and_half_a_principal_falls_through() {
        assert_eq!(
            tried(&env(&[TENANT, CLIENT, SECRET, CERTIFICATE]))[0],
            ClientSecret
        );
        assert_eq!(
            tried(&env(&[TENANT, CLIENT, CERTIFICATE]))[0],
            ClientCertificate
        );
        assert_eq!(
            chain_sources(&env(&[TENANT, SECRET, ("AZURE_CLIENT_ID", "")]))[0],
            ChainStep::NotConfigured {
                source: "environment",
                missing: "AZURE_CLIENT_ID not set".to_owned()
            }
        );
    }

    #[test]
    fn workload_identity_needs_the_file_the_client_and_the_tenant() {
        assert_eq!(
            tried(&env(&[TENANT, CLIENT, TOKEN_FILE]))[0],
            WorkloadIdentity
        );
        assert_eq!(
            chain_sources(&env(&[CLIENT, TOKEN_FILE]))[1],
            ChainStep::NotConfigured {
                source: "workload identity",
                missing: "AZURE_TENANT_ID not set".to_owned()
            }
        );
        assert_eq!(
            chain_sources(&env(&[]))[..2],
            [
                ChainStep::NotConfigured {
                    source: "environment",
                    missing: "AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET or \
                              AZURE_CLIENT_CERTIFICATE_PATH not set"
                        .to_owned()
                },
                ChainStep::NotConfigured {
                    source: "workload identity",
                    missing: "AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID not set"
                        .to_owned()
                },
            ]
        );
    }

    #[test]
    fn secrets_never_print() {
        let vars = [
            TENANT,
            CLIENT,
            SECRET,
            ("AZURE_CLIENT_CERTIFICATE_PASSWORD", "p4ssword"),
        ];
        let shown = format!("{:?}", env(&vars));
        assert!(
            !shown.contains("s3cret") && !shown.contains("p4ssword"),
            "{shown}"
        );
        let chain = DefaultCredentialChain::new(&env(&vars), ChainOptions::default());
        let shown = format!("{chain:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(
            shown,
            "DefaultCredentialChain { sources: [ClientSecret, ManagedIdentity, AzureCli, \
             AzureDeveloperCli], .. }"
        );
    }
}
