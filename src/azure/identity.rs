//! The real credential chain, backed by azure_identity: service principal from the environment,
//! then managed identity, then the Azure CLI.
//!
//! The order is the one users know from `DefaultAzureCredential` in the other Azure SDKs: CI
//! sets the three environment variables and expects them to win; a VM with an identity needs no
//! setup; a laptop falls through to `az login`. Which sources are tried is a pure decision
//! ([`chain_sources`]) over the environment, tested below; the first source that produces a token
//! is remembered so later calls go straight to it.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use azure_core::credentials::TokenCredential as AzureTokenCredential;
use chrono::DateTime;

use super::credential::{AccessToken, TokenCredential, TokenFuture};
use super::error::ArmError;
use super::secret::Secret;

/// A place a token can come from, in chain order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialSource {
    /// AZURE_TENANT_ID + AZURE_CLIENT_ID + AZURE_CLIENT_SECRET.
    EnvironmentServicePrincipal,
    /// The VM's or App Service's managed identity.
    ManagedIdentity,
    /// `az login`.
    AzureCli,
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::EnvironmentServicePrincipal => "environment service principal",
            Self::ManagedIdentity => "managed identity",
            Self::AzureCli => "Azure CLI",
        })
    }
}

/// The environment variables the chain reads. A value that is set but empty counts as unset.
#[derive(Clone, Default)]
pub struct CredentialEnv {
    /// AZURE_TENANT_ID.
    pub tenant_id: Option<String>,
    /// AZURE_CLIENT_ID.
    pub client_id: Option<String>,
    /// AZURE_CLIENT_SECRET.
    pub client_secret: Option<Secret>,
}

impl fmt::Debug for CredentialEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialEnv")
            .field("tenant_id", &self.tenant_id)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .finish()
    }
}

impl CredentialEnv {
    /// Reads the process environment.
    pub fn from_process() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self {
            tenant_id: var("AZURE_TENANT_ID"),
            client_id: var("AZURE_CLIENT_ID"),
            client_secret: var("AZURE_CLIENT_SECRET").map(Secret::new),
        }
    }
}

/// Which sources the chain tries, in order. The service principal joins only when all three of
/// its variables are set: a half-configured principal falls through to the next source, as in
/// the other SDKs.
pub fn chain_sources(env: &CredentialEnv) -> Vec<CredentialSource> {
    let mut sources = Vec::with_capacity(3);
    if env.tenant_id.is_some() && env.client_id.is_some() && env.client_secret.is_some() {
        sources.push(CredentialSource::EnvironmentServicePrincipal);
    }
    sources.push(CredentialSource::ManagedIdentity);
    sources.push(CredentialSource::AzureCli);
    sources
}

/// How long the managed-identity probe may take while the chain is still choosing a source. Off
/// Azure the IMDS endpoint does not answer, and azure_identity's own retries would stall every
/// laptop run before it reaches the CLI.
const MANAGED_IDENTITY_PROBE: Duration = Duration::from_secs(3);

/// The default credential chain: environment service principal, managed identity, Azure CLI.
pub struct DefaultCredentialChain {
    sources: Vec<(CredentialSource, Arc<dyn AzureTokenCredential>)>,
    /// Creation failures (e.g. an invalid tenant id), reported if nothing else works.
    skipped: Vec<(CredentialSource, String)>,
    selected: Mutex<Option<usize>>,
}

impl fmt::Debug for DefaultCredentialChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sources: Vec<_> = self.sources.iter().map(|(s, _)| *s).collect();
        f.debug_struct("DefaultCredentialChain")
            .field("sources", &sources)
            .finish_non_exhaustive()
    }
}

impl DefaultCredentialChain {
    /// The chain for this process's environment.
    pub fn from_process_env() -> Self {
        Self::new(&CredentialEnv::from_process())
    }

    /// The chain for `env`.
    pub fn new(env: &CredentialEnv) -> Self {
        let mut sources: Vec<(CredentialSource, Arc<dyn AzureTokenCredential>)> = Vec::new();
        let mut skipped = Vec::new();
        for source in chain_sources(env) {
            let built: azure_core::Result<Arc<dyn AzureTokenCredential>> = match source {
                CredentialSource::EnvironmentServicePrincipal => {
                    let (Some(tenant), Some(client), Some(secret)) =
                        (&env.tenant_id, &env.client_id, &env.client_secret)
                    else {
                        continue;
                    };
                    azure_identity::ClientSecretCredential::new(
                        tenant,
                        client.clone(),
                        azure_core::credentials::Secret::new(secret.expose().to_string()),
                        None,
                    )
                    .map(|c| c as Arc<dyn AzureTokenCredential>)
                }
                CredentialSource::ManagedIdentity => {
                    azure_identity::ManagedIdentityCredential::new(None)
                        .map(|c| c as Arc<dyn AzureTokenCredential>)
                }
                CredentialSource::AzureCli => azure_identity::AzureCliCredential::new(None)
                    .map(|c| c as Arc<dyn AzureTokenCredential>),
            };
            match built {
                Ok(credential) => sources.push((source, credential)),
                Err(e) => skipped.push((source, e.to_string())),
            }
        }
        Self {
            sources,
            skipped,
            selected: Mutex::new(None),
        }
    }

    async fn try_source(
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
                .map_err(|_| format!("no answer within {}s", MANAGED_IDENTITY_PROBE.as_secs()))?
        } else {
            fetch.await
        };
        let token = result.map_err(|e| e.to_string())?;
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
        if let Some(index) = selected {
            let (source, credential) = &self.sources[index];
            return Self::try_source(*source, credential.as_ref(), scope, false)
                .await
                .map_err(|e| ArmError::credential(format!("{source}: {e}")));
        }
        let mut failures: Vec<String> = self
            .skipped
            .iter()
            .map(|(source, e)| format!("{source}: {e}"))
            .collect();
        for (index, (source, credential)) in self.sources.iter().enumerate() {
            match Self::try_source(*source, credential.as_ref(), scope, true).await {
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
        Err(ArmError::credential(format!(
            "no credential worked ({}). Run `az login`, or set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET",
            failures.join("; ")
        )))
    }
}

impl TokenCredential for DefaultCredentialChain {
    fn get_token<'a>(&'a self, scope: &'a str) -> TokenFuture<'a> {
        Box::pin(self.fetch(scope))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(tenant: bool, client: bool, secret: bool) -> CredentialEnv {
        CredentialEnv {
            tenant_id: tenant.then(|| "72f988bf-86f1-41af-91ab-2d7cd011db47".to_string()),
            client_id: client.then(|| "00000000-0000-0000-0000-000000000001".to_string()),
            client_secret: secret.then(|| Secret::new("s3cret")),
        }
    }

    #[test]
    fn service_principal_first_when_fully_configured() {
        use CredentialSource::{AzureCli, EnvironmentServicePrincipal, ManagedIdentity};
        assert_eq!(
            chain_sources(&env(true, true, true)),
            [EnvironmentServicePrincipal, ManagedIdentity, AzureCli]
        );
        assert_eq!(
            chain_sources(&env(true, true, false)),
            [ManagedIdentity, AzureCli]
        );
        assert_eq!(
            chain_sources(&env(false, false, false)),
            [ManagedIdentity, AzureCli]
        );
    }

    #[test]
    fn the_client_secret_never_prints() {
        let shown = format!("{:?}", env(true, true, true));
        assert!(!shown.contains("s3cret"), "{shown}");
        let chain = DefaultCredentialChain::new(&env(true, true, true));
        let shown = format!("{chain:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        // Every azure_identity credential was constructed (none skipped).
        assert!(chain.skipped.is_empty(), "{:?}", chain.skipped);
        assert_eq!(
            shown,
            "DefaultCredentialChain { sources: [EnvironmentServicePrincipal, ManagedIdentity, AzureCli], .. }"
        );
    }
}
