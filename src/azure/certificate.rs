//! A service principal's certificate (`AZURE_CLIENT_CERTIFICATE_PATH`) turned into the signed
//! client assertion Entra ID accepts in place of a secret.
//!
//! azure_identity 1.0 has a `ClientCertificateCredential`, but only behind its
//! `client_certificate` feature, which links OpenSSL and reads PKCS#12 only; dsinfra's TLS and
//! crypto are rustls and aws-lc, and the other SDKs read PEM from that variable. The flow itself
//! is small (OpenID Connect's `private_key_jwt`): a JWT naming the application, signed with the
//! certificate's RSA key, posted instead of `client_secret`. azure_identity's
//! `ClientAssertionCredential` already does the post and the token cache, so this module only
//! reads the PEM file and signs the assertion, in the format Entra's "certificate credentials"
//! page gives: header `alg: PS256`, `typ: JWT`, `x5t#S256` (the base64url SHA-256 thumbprint of
//! the certificate's DER); claims `aud` (the token endpoint), `iss` = `sub` = client id, `jti`,
//! `nbf`, `iat`, `exp`.

use std::fmt;
use std::path::{Path, PathBuf};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PSS_SHA256, RsaKeyPair};
use azure_core::http::ClientMethodOptions;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

use super::secret::Secret;

/// How long a signed assertion is valid. Entra advises minutes; each token request signs anew.
const ASSERTION_LIFETIME_SECS: i64 = 600;

/// Why a certificate file could not be used. Messages name the file and never its contents.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// The file could not be read.
    #[error("could not read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not PEM (most likely PKCS#12, `.pfx`).
    #[error(
        "{path} is not a PEM file; PKCS#12 (.pfx) is not supported. Convert it with \
         `openssl pkcs12 -in {path} -out cert.pem -noenc` (keep the result private) and point \
         AZURE_CLIENT_CERTIFICATE_PATH at cert.pem"
    )]
    NotPem {
        /// The file.
        path: PathBuf,
    },
    /// Something the file must hold is missing or unusable.
    #[error("{path}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        problem: String,
    },
}

/// Signs client assertions with a certificate's key; plugs into azure_identity's
/// `ClientAssertionCredential`.
pub struct CertificateAssertion {
    key: RsaKeyPair,
    /// The JWT header, already base64url-encoded: it is the same for every assertion.
    header: String,
    client_id: String,
    audience: String,
}

impl fmt::Debug for CertificateAssertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAssertion")
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl CertificateAssertion {
    /// Reads the PEM file at `path`: the first `CERTIFICATE` block is the one registered with
    /// the application; the key is `PRIVATE KEY` (PKCS#8), `RSA PRIVATE KEY` (PKCS#1) or
    /// `ENCRYPTED PRIVATE KEY` (PKCS#8, opened with `password`). `audience` is the token
    /// endpoint the assertion is for.
    pub fn from_file(
        path: &Path,
        password: Option<&Secret>,
        client_id: &str,
        audience: &str,
    ) -> Result<Self, CertificateError> {
        let text = std::fs::read(path).map_err(|source| CertificateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |problem: &str| CertificateError::Invalid {
            path: path.to_path_buf(),
            problem: problem.to_owned(),
        };
        let text = String::from_utf8(text).map_err(|_| CertificateError::NotPem {
            path: path.to_path_buf(),
        })?;
        let blocks = pem_blocks(&text).map_err(|problem| invalid(&problem))?;
        if blocks.is_empty() {
            return Err(CertificateError::NotPem {
                path: path.to_path_buf(),
            });
        }
        let certificate = blocks
            .iter()
            .find(|b| b.label == "CERTIFICATE")
            .ok_or_else(|| {
                invalid(
                    "no CERTIFICATE block; the file must hold the certificate and its private key",
                )
            })?;
        let key = blocks
            .iter()
            .find_map(|b| read_key(b, password).transpose())
            .ok_or_else(|| invalid("no private key block (PRIVATE KEY, RSA PRIVATE KEY or ENCRYPTED PRIVATE KEY); the file must hold the certificate and its private key"))?
            .map_err(|problem| invalid(&problem))?;
        let header = serde_json::json!({
            "alg": "PS256",
            "typ": "JWT",
            "x5t#S256": URL_SAFE_NO_PAD.encode(Sha256::digest(&certificate.der)),
        });
        Ok(Self {
            key,
            header: URL_SAFE_NO_PAD.encode(header.to_string()),
            client_id: client_id.to_owned(),
            audience: audience.to_owned(),
        })
    }

    /// A signed assertion valid from `now` (Unix seconds).
    pub fn sign(&self, now: i64) -> Result<String, String> {
        let claims = serde_json::json!({
            "aud": self.audience,
            "iss": self.client_id,
            "sub": self.client_id,
            "jti": uuid::Uuid::new_v4().to_string(),
            "nbf": now,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME_SECS,
        });
        let signed = format!(
            "{}.{}",
            self.header,
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(
                &RSA_PSS_SHA256,
                &SystemRandom::new(),
                signed.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "signing the client assertion failed".to_owned())?;
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

#[async_trait::async_trait]
impl azure_identity::ClientAssertion for CertificateAssertion {
    async fn secret(&self, _: Option<ClientMethodOptions<'_>>) -> azure_core::Result<String> {
        self.sign(chrono::Utc::now().timestamp())
            .map_err(|message| {
                azure_core::Error::with_message(azure_core::error::ErrorKind::Credential, message)
            })
    }
}

/// One PEM block: its label and decoded bytes.
struct PemBlock {
    label: String,
    der: Vec<u8>,
}

/// The PEM blocks in `text`, in order. Text between blocks (openssl's "Bag Attributes") is
/// ignored; a block with headers is a legacy OpenSSL-encrypted key, which is refused with advice.
fn pem_blocks(text: &str) -> Result<Vec<PemBlock>, String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        loop {
            let Some(line) = lines.next() else {
                return Err(format!("the {label} block has no END line"));
            };
            if line == end {
                break;
            }
            if line.contains(':') {
                return Err(format!(
                    "the {label} block is encrypted the legacy OpenSSL way; convert it to PKCS#8 \
                     with `openssl pkcs8 -topk8 -in KEY -out key.pem`"
                ));
            }
            body.push_str(line);
        }
        let der = STANDARD
            .decode(&body)
            .map_err(|_| format!("the {label} block is not valid base64"))?;
        blocks.push(PemBlock {
            label: label.to_owned(),
            der,
        });
    }
    Ok(blocks)
}

/// The RSA key in `block`, `None` if the block is not a private key.
fn read_key(block: &PemBlock, password: Option<&Secret>) -> Result<Option<RsaKeyPair>, String> {
    const RSA_ONLY: &str = "the private key is not an RSA key of 2048 bits or more (Entra ID \
                            certificate credentials are RSA)";
    let key = match block.label.as_str() {
        "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&block.der).map_err(|_| RSA_ONLY.to_owned())?,
        "RSA PRIVATE KEY" => RsaKeyPair::from_der(&block.der).map_err(|_| RSA_ONLY.to_owned())?,
        "ENCRYPTED PRIVATE KEY" => {
            let Some(password) = password else {
                return Err(
                    "the private key is encrypted: set AZURE_CLIENT_CERTIFICATE_PASSWORD"
                        .to_owned(),
                );
            };
            let encrypted = pkcs8::EncryptedPrivateKeyInfoRef::try_from(block.der.as_slice())
                .map_err(|_| "the encrypted private key is not valid PKCS#8".to_owned())?;
            let plain = encrypted.decrypt(password.expose()).map_err(|_| {
                "the private key could not be decrypted: check AZURE_CLIENT_CERTIFICATE_PASSWORD"
                    .to_owned()
            })?;
            RsaKeyPair::from_pkcs8(plain.as_bytes()).map_err(|_| RSA_ONLY.to_owned())?
        }
        _ => return Ok(None),
    };
    Ok(Some(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/credentials")
            .join(name)
    }

    #[test]
    fn an_assertion_has_entras_shape() {
        let assertion = CertificateAssertion::from_file(
            &fixture("service-principal.pem"),
            None,
            "app",
            "https://login.example/t/oauth2/v2.0/token",
        )
        .expect("certificate");
        let signed = assertion.sign(1_700_000_000).expect("sign");
        let parts: Vec<_> = signed.split('.').collect();
        assert_eq!(parts.len(), 3, "{signed}");
        let decode = |part: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64url")).expect("json")
        };
        let header = decode(parts[0]);
        assert_eq!(
            (header["alg"].as_str(), header["typ"].as_str()),
            (Some("PS256"), Some("JWT"))
        );
        assert_eq!(header["x5t#S256"].as_str().map(str::len), Some(43));
        let claims = decode(parts[1]);
        assert_eq!(claims["aud"], "https://login.example/t/oauth2/v2.0/token");
        assert_eq!(
            (claims["iss"].as_str(), claims["sub"].as_str()),
            (Some("app"), Some("app"))
        );
        assert_eq!(claims["exp"], 1_700_000_600);
        assert!(!format!("{assertion:?}").contains("PRIVATE"));
    }

    #[test]
    fn encrypted_keys_need_the_right_password() {
        let path = fixture("service-principal-encrypted.pem");
        let open = |password: Option<&str>| {
            CertificateAssertion::from_file(&path, password.map(Secret::new).as_ref(), "a", "b")
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert!(open(Some("test-only-password")).is_ok());
        let missing = open(None).expect_err("no password");
        assert!(
            missing
                .ends_with("the private key is encrypted: set AZURE_CLIENT_CERTIFICATE_PASSWORD"),
            "{missing}"
        );
        let wrong = open(Some("wrong")).expect_err("wrong password");
        assert!(wrong.contains("could not be decrypted"), "{wrong}");
        assert!(
            !wrong.contains("wrong"),
            "the password must not print: {wrong}"
        );
    }

    #[test]
    fn pkcs12_is_refused_with_the_conversion() {
        let path = fixture("service-principal.pfx");
        let err = CertificateAssertion::from_file(&path, None, "a", "b").expect_err("pfx");
        assert!(
            err.to_string()
                .contains("is not a PEM file; PKCS#12 (.pfx) is not supported"),
            "{err}"
        );
    }
}
