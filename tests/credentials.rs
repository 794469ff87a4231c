//! The credential chain with azure_identity's real credential types, against local stand-ins of
//! what they talk to: an Entra ID token endpoint over TLS on 127.0.0.1 (azure_identity refuses an
//! http authority host, so it gets `https://localhost:PORT` and an HTTP client that trusts the
//! test CA in tests/fixtures/credentials), the VM's IMDS (reached through an HTTP proxy, since
//! azure_identity's IMDS address is fixed), and fake `az`/`azd` scripts on a PATH of their own.
//!
//! The stand-ins check what the real services check (the form fields, the client assertion's
//! signature and thumbprint, the Metadata header) and answer in the real services' shapes, which
//! azure_identity then parses. Nothing here sets a process environment variable: the chain reads
//! an env map, and the CLIs run with their own PATH.
//!
//! The last tests run the real binary's `state pull` with a remote backend, which signs in to Blob
//! storage with the same chain: its environment is given to the child process only, and its TLS
//! trusts the test CA through `SSL_CERT_FILE`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use azure_core::http::Transport;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use dsinfra::azure::TokenCredential as _;
use dsinfra::azure::identity::{
    ChainOptions, CredentialEnv, CredentialSource, DefaultCredentialChain,
};
use sha2::Digest as _;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

const SCOPE: &str = "https://management.azure.com/.default";
const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const CLIENT: &str = "00000000-0000-0000-0000-0000000000c1";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/credentials")
        .join(name)
}

/// A request as a stand-in received it.
struct Received {
    /// The request target: a path, or an absolute URL when it came through the proxy.
    target: String,
    headers: HashMap<String, String>,
    /// The form fields of a POST body.
    form: HashMap<String, String>,
}

type Handler = Arc<dyn Fn(&Received) -> (u16, String) + Send + Sync>;

/// Answers one HTTP/1.1 request on `stream` and closes it.
async fn answer(stream: impl AsyncRead + AsyncWrite + Unpin, handler: &Handler) -> io::Result<()> {
    let mut stream = BufReader::new(stream);
    let mut line = String::new();
    stream.read_line(&mut line).await?;
    let target = line.split(' ').nth(1).unwrap_or_default().to_owned();
    let mut headers = HashMap::new();
    loop {
        line.clear();
        stream.read_line(&mut line).await?;
        let Some((name, value)) = line.trim_end().split_once(':') else {
            break;
        };
        headers.insert(name.to_ascii_lowercase(), value.trim().to_owned());
    }
    let length = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await?;
    let form = url::form_urlencoded::parse(&body).into_owned().collect();
    let (status, body) = handler(&Received {
        target,
        headers,
        form,
    });
    let response = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// An HTTP stand-in on 127.0.0.1; with `tls`, it presents the fixture's `localhost` certificate.
async fn stand_in(tls: bool, handler: Handler) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let acceptor = tls.then(|| {
        let certs = CertificateDer::pem_file_iter(fixture("localhost.pem"))
            .expect("cert")
            .collect::<Result<Vec<_>, _>>()
            .expect("cert");
        let key = PrivateKeyDer::from_pem_file(fixture("localhost.key")).expect("key");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (handler, acceptor) = (handler.clone(), acceptor.clone());
            tokio::spawn(async move {
                let _ = match acceptor {
                    Some(acceptor) => match acceptor.accept(socket).await {
                        Ok(stream) => answer(stream, &handler).await,
                        Err(e) => Err(e),
                    },
                    None => answer(socket, &handler).await,
                };
            });
        }
    });
    address
}

/// Entra ID's token answer.
fn entra_token(token: &str) -> (u16, String) {
    let body = serde_json::json!({
        "token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token,
    });
    (200, body.to_string())
}

/// Entra ID's error answer.
fn entra_error(code: u32, description: &str) -> (u16, String) {
    let body = serde_json::json!({
        "error": "invalid_client",
        "error_description": format!("AADSTS{code}: {description}"),
        "error_codes": [code],
    });
    (401, body.to_string())
}

/// A token endpoint for ARM's scope (see [`token_endpoint_for`]).
async fn token_endpoint(
    check: impl Fn(&HashMap<String, String>) -> Result<&'static str, (u32, String)>
    + Send
    + Sync
    + 'static,
) -> String {
    token_endpoint_for(SCOPE, check).await
}

/// The token endpoint: checks the path and the fields every client-credentials request carries,
/// `scope` among them, then hands the form to `check`, which returns the token or Entra's error.
async fn token_endpoint_for(
    scope: &'static str,
    check: impl Fn(&HashMap<String, String>) -> Result<&'static str, (u32, String)>
    + Send
    + Sync
    + 'static,
) -> String {
    let address = stand_in(
        true,
        Arc::new(move |request: &Received| {
            let form = &request.form;
            if request.target != format!("/{TENANT}/oauth2/v2.0/token") {
                return (404, format!("unexpected path {}", request.target));
            }
            if form.get("grant_type").map(String::as_str) != Some("client_credentials")
                || form.get("client_id").map(String::as_str) != Some(CLIENT)
                || form.get("scope").map(String::as_str) != Some(scope)
            {
                return entra_error(900_144, &format!("bad request {form:?}"));
            }
            match check(form) {
                Ok(token) => entra_token(token),
                Err((code, why)) => entra_error(code, &why),
            }
        }),
    )
    .await;
    format!("https://localhost:{}", address.port())
}

/// IMDS on a VM with two user-assigned identities, `uai-1` and `uai-2`, and no system-assigned
/// one. It answers as IMDS does: the token for the identity asked for; without one, the
/// "several identities" error; for an unknown one, "Identity not found".
async fn imds_with_two_identities() -> SocketAddr {
    stand_in(
        false,
        Arc::new(|request: &Received| {
            let Some(query) = request
                .target
                .strip_prefix("http://169.254.169.254/metadata/identity/oauth2/token?")
            else {
                return (404, format!("unexpected target {}", request.target));
            };
            if request.headers.get("metadata").map(String::as_str) != Some("true") {
                return (400, r#"{"error":"invalid_request","error_description":"Required metadata header not specified"}"#.to_owned());
            }
            let query: HashMap<String, String> =
                url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
            let error = |description: &str| {
                let body = serde_json::json!({"error": "invalid_request", "error_description": description});
                (400, body.to_string())
            };
            match query.get("client_id").map(String::as_str) {
                None => error("Multiple user assigned identities exist, please specify the clientId / resourceId of the identity in the token request"),
                Some(id @ ("uai-1" | "uai-2")) => {
                    let expires_on = chrono::Utc::now().timestamp() + 86_399;
                    let body = serde_json::json!({
                        "access_token": format!("imds-token-{id}"),
                        "client_id": id,
                        "expires_in": "86399",
                        "expires_on": expires_on.to_string(),
                        "ext_expires_in": "86399",
                        "not_before": (expires_on - 86_399).to_string(),
                        "resource": query.get("resource"),
                        "token_type": "Bearer",
                    });
                    (200, body.to_string())
                }
                Some(_) => error("Identity not found"),
            }
        }),
    )
    .await
}

/// Runs `az`/`azd` with PATH set to one directory, so only the fake CLIs placed there exist.
#[derive(Debug)]
struct OwnPath(PathBuf);

#[async_trait::async_trait]
impl azure_identity::Executor for OwnPath {
    async fn run(&self, program: &OsStr, args: &[&OsStr]) -> io::Result<Output> {
        tokio::process::Command::new(program)
            .args(args)
            .env("PATH", &self.0)
            .output()
            .await
    }
}

/// A directory for fake CLIs, and a way to add one.
struct FakeClis(tempfile::TempDir);

impl FakeClis {
    fn new() -> Self {
        Self(tempfile::tempdir().expect("tempdir"))
    }

    /// Adds `name` as a shell script with `body`.
    fn add(&self, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        let path = self.0.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}

/// The chain for `vars`, its HTTP going to the stand-ins (IMDS through the proxy, the token
/// endpoint over TLS trusted through the test CA) and its CLIs to `clis`.
fn chain(vars: &[(&str, &str)], imds: SocketAddr, clis: &FakeClis) -> DefaultCredentialChain {
    let ca =
        reqwest::Certificate::from_pem(&std::fs::read(fixture("ca.pem")).expect("ca")).expect("ca");
    let http = reqwest::Client::builder()
        .tls_certs_only([ca])
        .proxy(reqwest::Proxy::http(format!("http://{imds}")).expect("proxy"))
        .build()
        .expect("client");
    let env = CredentialEnv::from_vars(|name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| (*v).to_owned())
    });
    DefaultCredentialChain::new(
        &env,
        ChainOptions {
            transport: Some(Transport::new(Arc::new(http))),
            executor: Some(Arc::new(OwnPath(clis.0.path().to_path_buf()))),
        },
    )
}

/// Fetches a token; returns it and the source that gave it.
async fn token(chain: &DefaultCredentialChain) -> (String, Option<CredentialSource>) {
    let token = chain.get_token(SCOPE).await.expect("token");
    (token.token.expose().to_owned(), chain.selected_source())
}

#[tokio::test]
async fn a_client_secret_from_the_environment_gets_a_token() {
    let authority = token_endpoint(|form| match form.get("client_secret") {
        Some(s) if s == "s3cret" => Ok("token-for-the-secret"),
        _ => Err((7_000_215, "Invalid client secret provided.".to_owned())),
    })
    .await;
    let imds = imds_with_two_identities().await;
    let vars = [
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_CLIENT_SECRET", "s3cret"),
        ("AZURE_AUTHORITY_HOST", &authority),
    ];
    assert_eq!(
        token(&chain(&vars, imds, &FakeClis::new())).await,
        (
            "token-for-the-secret".to_owned(),
            Some(CredentialSource::ClientSecret)
        )
    );
}

/// What Entra checks of a certificate assertion: the PS256 signature by the registered
/// certificate's key, its SHA-256 thumbprint, the audience and the application.
fn check_assertion(assertion: &str, audience: &str) -> Result<(), String> {
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|e| e.to_string());
    let parts: Vec<&str> = assertion.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(format!("not a JWT: {assertion}"));
    };
    let public =
        std::fs::read(fixture("service-principal-public.der")).map_err(|e| e.to_string())?;
    aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::RSA_PSS_2048_8192_SHA256,
        public,
    )
    .verify(format!("{header}.{claims}").as_bytes(), &decode(signature)?)
    .map_err(|_| "the signature does not verify with the certificate's key".to_owned())?;
    let pem =
        std::fs::read_to_string(fixture("service-principal.pem")).map_err(|e| e.to_string())?;
    let der = CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| e.to_string())?;
    let header: serde_json::Value =
        serde_json::from_slice(&decode(header)?).map_err(|e| e.to_string())?;
    let claims: serde_json::Value =
        serde_json::from_slice(&decode(claims)?).map_err(|e| e.to_string())?;
    let thumbprint = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&der));
    let now = chrono::Utc::now().timestamp();
    let expected = (
        Some("PS256"),
        Some(thumbprint.as_str()),
        Some(audience),
        Some(CLIENT),
        Some(CLIENT),
    );
    let got = (
        header["alg"].as_str(),
        header["x5t#S256"].as_str(),
        claims["aud"].as_str(),
        claims["iss"].as_str(),
        claims["sub"].as_str(),
    );
    if got != expected {
        return Err(format!("expected {expected:?}, got {got:?}"));
    }
    match (claims["nbf"].as_i64(), claims["exp"].as_i64()) {
        (Some(nbf), Some(exp)) if nbf <= now && now < exp => Ok(()),
        other => Err(format!("not valid now: {other:?}")),
    }
}

#[tokio::test]
async fn a_certificate_from_the_environment_signs_an_assertion_entra_accepts() {
    let audience = Arc::new(std::sync::OnceLock::<String>::new());
    let expected = audience.clone();
    let authority = token_endpoint(move |form| {
        if form.get("client_assertion_type").map(String::as_str)
            != Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        {
            return Err((700_025, "client assertion type missing".to_owned()));
        }
        let audience = expected.get().map(String::as_str).unwrap_or_default();
        check_assertion(
            form.get("client_assertion").map_or("", String::as_str),
            audience,
        )
        .map(|()| "token-for-the-certificate")
        .map_err(|why| (700_027, why))
    })
    .await;
    audience
        .set(format!("{authority}/{TENANT}/oauth2/v2.0/token"))
        .expect("once");
    let imds = imds_with_two_identities().await;
    let certificate = fixture("service-principal-encrypted.pem");
    let vars = [
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        (
            "AZURE_CLIENT_CERTIFICATE_PATH",
            certificate.to_str().expect("utf-8"),
        ),
        ("AZURE_CLIENT_CERTIFICATE_PASSWORD", "test-only-password"),
        ("AZURE_AUTHORITY_HOST", &authority),
    ];
    assert_eq!(
        token(&chain(&vars, imds, &FakeClis::new())).await,
        (
            "token-for-the-certificate".to_owned(),
            Some(CredentialSource::ClientCertificate)
        )
    );
}

/// What GitHub Actions' OIDC provider or AKS writes: a JWT the application trusts.
const FEDERATED: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXBvOmRzaW5mcmEifQ.c2lnbmF0dXJl";

/// Entra's check of a workload identity's request: the federated token as a client assertion.
fn exchange_federated(form: &HashMap<String, String>) -> Result<&'static str, (u32, String)> {
    let assertion = form.get("client_assertion").map(String::as_str);
    let kind = form.get("client_assertion_type").map(String::as_str);
    if assertion == Some(FEDERATED)
        && kind == Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    {
        Ok("token-for-the-workload")
    } else {
        Err((
            700_211,
            format!("No matching federated identity record for {assertion:?}"),
        ))
    }
}

/// A federated token file in a temporary directory (kept while the directory lives).
fn federated_token_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("azure-identity-token");
    std::fs::write(&file, FEDERATED).expect("write");
    (dir, file)
}

#[tokio::test]
async fn a_federated_token_file_is_exchanged_by_workload_identity() {
    let authority = token_endpoint(exchange_federated).await;
    let imds = imds_with_two_identities().await;
    let (_dir, file) = federated_token_file();
    let vars = [
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_FEDERATED_TOKEN_FILE", file.to_str().expect("utf-8")),
        ("AZURE_AUTHORITY_HOST", &authority),
    ];
    assert_eq!(
        token(&chain(&vars, imds, &FakeClis::new())).await,
        (
            "token-for-the-workload".to_owned(),
            Some(CredentialSource::WorkloadIdentity)
        )
    );
}

#[tokio::test]
async fn azure_client_id_picks_one_of_several_user_assigned_identities() {
    let imds = imds_with_two_identities().await;
    let vars = [("AZURE_CLIENT_ID", "uai-2")];
    assert_eq!(
        token(&chain(&vars, imds, &FakeClis::new())).await,
        (
            "imds-token-uai-2".to_owned(),
            Some(CredentialSource::ManagedIdentity)
        )
    );
}

#[tokio::test]
async fn the_cli_stand_ins_are_tried_last_az_then_azd() {
    let imds = imds_with_two_identities().await;
    let clis = FakeClis::new();
    clis.add(
        "az",
        r#"case "$*" in
  "account get-access-token -o json --scope https://management.azure.com/.default") ;;
  *) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
echo '{"accessToken":"az-token","expiresOn":"2099-01-01 00:00:00.000000","expires_on":4070908800,"subscription":"00000000-0000-0000-0000-000000000000","tenant":"72f988bf-86f1-41af-91ab-2d7cd011db47","tokenType":"Bearer"}'"#,
    );
    // With several identities and no AZURE_CLIENT_ID, managed identity fails and az answers.
    assert_eq!(
        token(&chain(&[], imds, &clis)).await,
        ("az-token".to_owned(), Some(CredentialSource::AzureCli))
    );
    clis.add(
        "az",
        r#"echo "ERROR: Please run 'az login' to setup account." >&2; exit 1"#,
    );
    clis.add(
        "azd",
        r#"case "$*" in
  "auth token -o json --no-prompt --scope https://management.azure.com/.default") ;;
  *) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
echo '{"token":"azd-token","expiresOn":"2099-01-01T00:00:00Z"}'"#,
    );
    assert_eq!(
        token(&chain(&[], imds, &clis)).await,
        (
            "azd-token".to_owned(),
            Some(CredentialSource::AzureDeveloperCli)
        )
    );
}

/// The chain's message when the secret is refused, workload identity is not configured, IMDS
/// does not know `AZURE_CLIENT_ID`, `az` is not logged in and `azd` is missing.
const EVERY_SOURCE_FAILED: &str = "no credential worked. Tried, in the order of the other Azure \
SDKs' DefaultAzureCredential:
  - environment (client secret): ClientSecretCredential authentication failed. AADSTS7000215: \
Invalid client secret provided.
  - workload identity: not configured (AZURE_FEDERATED_TOKEN_FILE not set)
  - managed identity: ManagedIdentityCredential authentication failed. The requested identity \
has not been assigned to this resource (IMDS: Identity not found); \
AZURE_CLIENT_ID=00000000-0000-0000-0000-0000000000c1 chose a user-assigned identity: is it \
assigned to this machine?
  - Azure CLI: AzureCliCredential authentication failed. ERROR: Please run 'az login' to setup \
account.
  - Azure Developer CLI: AzureDeveloperCliCredential authentication failed. azd not found on PATH
Sign in with `az login` (or `azd auth login`), or set the variables of one of the sources above \
(see docs/azure-client.md)";

#[tokio::test]
async fn when_every_source_fails_one_message_says_why_for_each() {
    let authority =
        token_endpoint(|_| Err((7_000_215, "Invalid client secret provided.".to_owned()))).await;
    let imds = imds_with_two_identities().await;
    let clis = FakeClis::new();
    clis.add(
        "az",
        r#"echo "ERROR: Please run 'az login' to setup account." >&2; exit 1"#,
    );
    let vars = [
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_CLIENT_SECRET", "wrong-s3cret"),
        ("AZURE_AUTHORITY_HOST", &authority),
    ];
    let err = chain(&vars, imds, &clis)
        .get_token(SCOPE)
        .await
        .expect_err("nothing works");
    let message = err.to_string();
    assert!(!message.contains("wrong-s3cret"), "{message}");
    assert_eq!(
        message,
        format!("could not get an Azure access token: {EVERY_SOURCE_FAILED}")
    );

    // Without AZURE_CLIENT_ID, the several identities are named with what to do.
    let err = chain(&[], imds, &clis)
        .get_token(SCOPE)
        .await
        .expect_err("nothing works");
    let message = err.to_string();
    assert!(
        message.contains(
            "\n  - managed identity: this machine has several user-assigned identities and \
             nothing says which to use: set AZURE_CLIENT_ID to the client id of one of them\n"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn an_unusable_certificate_is_reported_in_the_chains_message() {
    let imds = imds_with_two_identities().await;
    let certificate = fixture("service-principal-encrypted.pem");
    let path = certificate.to_str().expect("utf-8");
    let vars = [
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", "uai-9"),
        ("AZURE_CLIENT_CERTIFICATE_PATH", path),
    ];
    let err = chain(&vars, imds, &FakeClis::new())
        .get_token(SCOPE)
        .await
        .expect_err("no password, no other source");
    let message = err.to_string();
    let expected = format!(
        "\n  - environment (client certificate): AZURE_CLIENT_CERTIFICATE_PATH: {path}: the private \
         key is encrypted: set AZURE_CLIENT_CERTIFICATE_PASSWORD\n"
    );
    assert!(message.contains(&expected), "{message}");
}

// ---- The remote state's Blob client, through the real binary --------------------------------

/// The scope azure_storage_blob asks tokens for.
const STORAGE_SCOPE: &str = "https://storage.azure.com/.default";

/// What the Blob stand-in saw: each request's target and `Authorization` header.
type BlobRequests = Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// A Blob endpoint over TLS that records every request and answers that the blob does not exist
/// (as Azure does: 404 `BlobNotFound`), so `state pull` ends with "no state yet". Azurite cannot
/// stand in here: the Blob client (and dsinfra) send a bearer token only over https.
async fn blob_endpoint() -> (String, BlobRequests) {
    let requests = BlobRequests::default();
    let seen = requests.clone();
    let address = stand_in(
        true,
        Arc::new(move |request: &Received| {
            seen.lock().expect("not poisoned").push((
                request.target.clone(),
                request.headers.get("authorization").cloned(),
            ));
            (
                404,
                r#"{"error":{"code":"BlobNotFound","message":"The specified blob does not exist."}}"#
                    .to_owned(),
            )
        }),
    )
    .await;
    (format!("https://localhost:{}", address.port()), requests)
}

/// `dsinfra state SUBCOMMAND` (`pull` reads the blob; `push` of a new state takes the lock
/// first) on a manifest whose `backend "azureblob"` (no `sas_env`, so Azure AD) is
/// `tfstate/exp.json` behind `blob`. The binary gets only `vars` and what it needs besides: its
/// PATH is the fake CLIs' directory, plain http (IMDS) goes through the IMDS stand-in as a proxy,
/// and TLS trusts the test CA (`SSL_CERT_FILE`, read by the platform verifier on Linux).
fn dsinfra_state(
    subcommand: &str,
    blob: &str,
    vars: &[(&str, &str)],
    imds: SocketAddr,
    clis: &FakeClis,
) -> std::process::Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("exp.hcl");
    std::fs::write(
        &manifest,
        format!(
            "azure {{ location = \"eastus\" }}\n\nbackend \"azureblob\" {{\n  account   = \
             \"devstoreaccount1\"\n  container = \"tfstate\"\n  key       = \"exp.json\"\n  \
             endpoint  = \"{blob}/devstoreaccount1\"\n}}\n"
        ),
    )
    .expect("write");
    let state_file = dir.path().join("pushed.json");
    std::fs::write(&state_file, dsinfra::state::State::new("exp").to_json()).expect("write");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dsinfra"));
    command
        .env_clear()
        .envs(vars.iter().copied())
        .env("PATH", clis.0.path())
        .env("HOME", dir.path())
        .env("NO_COLOR", "1")
        .env("http_proxy", format!("http://{imds}"))
        .env("SSL_CERT_FILE", fixture("ca.pem"))
        .args(["state", subcommand])
        .arg(&manifest);
    if subcommand == "push" {
        command.arg(&state_file);
    }
    command.output().expect("dsinfra runs")
}

/// Guards the remote state's credential: it used to be its own (environment secret, else `az`),
/// so a CI job on workload identity (GitHub Actions OIDC) could apply but not read its state.
#[tokio::test(flavor = "multi_thread")]
async fn the_remote_state_signs_in_with_workload_identity_for_the_storage_scope() {
    // The token endpoint refuses any scope but storage's.
    let authority = token_endpoint_for(STORAGE_SCOPE, exchange_federated).await;
    let (blob, requests) = blob_endpoint().await;
    let imds = imds_with_two_identities().await;
    let (_token_dir, file) = federated_token_file();
    let vars = [
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_FEDERATED_TOKEN_FILE", file.to_str().expect("utf-8")),
        ("AZURE_AUTHORITY_HOST", &authority),
    ];
    let clis = FakeClis::new();
    // The stand-ins run on this runtime's other workers while the binary runs.
    let output = tokio::task::block_in_place(|| dsinfra_state("pull", &blob, &vars, imds, &clis));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("there is no state at https://localhost:")
            && stderr.contains("/devstoreaccount1/tfstate/exp.json yet: nothing to pull"),
        "{stderr}"
    );
    let requests = requests.lock().expect("not poisoned");
    assert_eq!(
        *requests,
        [(
            "/devstoreaccount1/tfstate/exp.json".to_owned(),
            Some("Bearer token-for-the-workload".to_owned())
        )]
    );
}

/// When nothing works for the state, the message is the chain's, as for ARM.
#[tokio::test(flavor = "multi_thread")]
async fn the_remote_state_says_why_each_source_failed_in_the_chains_message() {
    let authority = token_endpoint_for(STORAGE_SCOPE, |_| {
        Err((7_000_215, "Invalid client secret provided.".to_owned()))
    })
    .await;
    let (blob, requests) = blob_endpoint().await;
    let imds = imds_with_two_identities().await;
    let clis = FakeClis::new();
    clis.add(
        "az",
        r#"echo "ERROR: Please run 'az login' to setup account." >&2; exit 1"#,
    );
    let vars = [
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_CLIENT_SECRET", "wrong-s3cret"),
        ("AZURE_AUTHORITY_HOST", &authority),
    ];
    let url = format!("{blob}/devstoreaccount1/tfstate/exp.json");
    // Reading (pull) and locking (push) report it the same way.
    for subcommand in ["pull", "push"] {
        // The stand-ins run on this runtime's other workers while the binary runs.
        let output =
            tokio::task::block_in_place(|| dsinfra_state(subcommand, &blob, &vars, imds, &clis));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "cannot authenticate to the state {url}: could not get an Azure access token: \
                 {EVERY_SOURCE_FAILED}"
            )),
            "{subcommand}: {stderr}"
        );
        assert!(!stderr.contains("wrong-s3cret"), "{stderr}");
        assert_eq!(output.status.code(), Some(1), "{subcommand}: {stderr}");
    }
    assert!(requests.lock().expect("not poisoned").is_empty());
}
