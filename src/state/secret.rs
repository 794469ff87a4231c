//! The identity of a secret, which is all the state ever records about one.
//!
//! dsinfra signs SAS tokens locally and reads storage keys from ARM when it needs them. The state
//! must let the planner decide "this SAS expires tomorrow: sign it again" and "the SAS changed"
//! without holding the SAS itself. [`SecretIdentity`] therefore has no field that can hold a secret:
//! its kind, scope, permissions and expiry are public facts, and the fingerprint is a keyed hash
//! that reveals nothing about a high-entropy secret but changes whenever the secret does.
//!
//! A second guard, [`secret_like`], lets every save refuse attribute values that look like secrets
//! in case a bug ever routes one into `attrs`.

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// What sort of secret an identity describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    /// A shared access signature signed locally from a storage account key.
    Sas,
    /// A storage account key (recorded only as which key was used, e.g. scope `key1`).
    AccountKey,
    /// An SSH private key dsinfra generated (e.g. for a cluster's SSH mesh).
    SshPrivateKey,
}

/// Everything about a secret except the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretIdentity {
    /// What it is.
    pub kind: SecretKind,
    /// What it grants access to (`account data01`, `container data01/raw`).
    pub scope: String,
    /// Granted permissions as Azure spells them (`rl` for read+list).
    pub permissions: String,
    /// When it stops working, if it expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<DateTime<Utc>>,
    /// When it was issued (for a SAS: the signing time its start is derived from). Needed to
    /// sign the same token again for `output --show-secrets` when the manifest gives an absolute
    /// `expiry`. `None` in states written before it was recorded, and for secrets dsinfra did
    /// not issue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_at: Option<DateTime<Utc>>,
    /// [`SecretIdentity::fingerprint`] of the secret: equal fingerprints mean the same secret.
    pub fingerprint: String,
}

impl SecretIdentity {
    /// The keyed fingerprint of a secret: `hmac-sha256:` and the first 16 bytes of
    /// HMAC-SHA256(key, secret) in hex. The key is the state's lineage, so the same secret in two
    /// experiments' states cannot be correlated. The fingerprint is for detecting change, not for
    /// secrecy of low-entropy values: dsinfra only fingerprints signatures and keys.
    ///
    /// # Panics
    ///
    /// Never: HMAC accepts keys of any length.
    pub fn fingerprint(key: &[u8], secret: &[u8]) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(key).expect("HMAC-SHA256 accepts keys of any length");
        mac.update(secret);
        let digest = mac.finalize().into_bytes();
        format!("hmac-sha256:{}", hex::encode(&digest[..16]))
    }
}

/// What a value looks like if it looks like a secret (`"a SAS token"`), or `None`. Used to refuse
/// saving a state that would hold one; the patterns are the secrets dsinfra itself handles.
pub fn secret_like(value: &str) -> Option<&'static str> {
    if value.contains("sig=") && (value.contains("sv=") || value.contains("se=")) {
        Some("a SAS token")
    } else if value.contains("AccountKey=") || value.contains("SharedAccessSignature=") {
        Some("a storage connection string")
    } else if value.contains("PRIVATE KEY-----") {
        Some("a private key")
    } else if value.starts_with("eyJ") && value.matches('.').count() == 2 && value.len() > 40 {
        Some("an access token")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_keyed_and_stable() {
        let a = SecretIdentity::fingerprint(b"lineage-1", b"sig=abc");
        assert_eq!(a, SecretIdentity::fingerprint(b"lineage-1", b"sig=abc"));
        assert_ne!(a, SecretIdentity::fingerprint(b"lineage-2", b"sig=abc"));
        assert_ne!(a, SecretIdentity::fingerprint(b"lineage-1", b"sig=abd"));
        assert!(a.starts_with("hmac-sha256:"));
        assert_eq!(a.len(), "hmac-sha256:".len() + 32);
        assert!(!a.contains("abc"));
    }

    #[test]
    fn recognises_the_secrets_dsinfra_handles() {
        assert_eq!(
            secret_like("sv=2022-11-02&ss=b&srt=co&sp=rl&se=2026-01-01T00:00:00Z&sig=AbC%3D"),
            Some("a SAS token")
        );
        assert_eq!(
            secret_like("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=xyz=="),
            Some("a storage connection string")
        );
        assert_eq!(
            secret_like("-----BEGIN OPENSSH PRIVATE KEY-----\nabc"),
            Some("a private key")
        );
        assert_eq!(
            secret_like("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXZhbHVl"),
            Some("an access token")
        );
        for harmless in [
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB user@host",
            "Standard_NC6s_v3",
            "network.main.vnet",
            "design=sig",
        ] {
            assert_eq!(secret_like(harmless), None, "{harmless}");
        }
    }
}
