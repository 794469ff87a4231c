//! Host keys: pinning, trust on first use, and generating a VM's key before it exists.
//!
//! dsinfra knows a VM's host key before the first connection: at creation it generates an
//! ed25519 key pair ([`HostKeyPair::generate`]), hands the private half to the VM through
//! cloud-init customData ([`HostKeyPair::cloud_config`]) and records the public half in state.
//! Connections then use [`HostKeyPolicy::Pinned`] and refuse any other key. Only adopted VMs,
//! whose key dsinfra never generated, fall back to [`HostKeyPolicy::TrustOnFirstUse`], which
//! warns and hands the key to a callback so the caller can pin it from then on.

use std::fmt;
use std::sync::Arc;

use russh::keys::ssh_key::LineEnding;
use russh::keys::{Algorithm, HashAlg, PrivateKey, PublicKey};

use super::secret::Secret;

/// A server's public host key.
#[derive(Clone, PartialEq, Eq)]
pub struct HostKey(PublicKey);

impl HostKey {
    /// Parses an OpenSSH public key line (`ssh-ed25519 AAAA... [comment]`), as stored in state.
    pub fn from_openssh(line: &str) -> Result<Self, String> {
        PublicKey::from_openssh(line.trim())
            .map(Self)
            .map_err(|e| format!("not an OpenSSH public key: {e}"))
    }

    /// The key as an OpenSSH public key line, without comment.
    ///
    /// # Panics
    /// Never in practice: encoding fails only for key types this crate cannot parse or generate.
    pub fn to_openssh(&self) -> String {
        let mut key = self.0.clone();
        key.set_comment("");
        key.to_openssh()
            .expect("a key that was parsed or generated always encodes")
    }

    /// The SHA-256 fingerprint as OpenSSH prints it (`SHA256:...`).
    pub fn fingerprint(&self) -> String {
        self.0.fingerprint(HashAlg::Sha256).to_string()
    }

    /// Whether two keys are the same key (comments do not count).
    pub fn same_key(&self, other: &HostKey) -> bool {
        self.0.key_data() == other.0.key_data()
    }

    pub(crate) fn from_russh(key: PublicKey) -> Self {
        Self(key)
    }
}

impl fmt::Debug for HostKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostKey({})", self.fingerprint())
    }
}

/// Called with the key a node presented when trusting it on first use.
pub type RecordHostKey = Arc<dyn Fn(&str, &HostKey) + Send + Sync>;

/// How a connection decides whether to trust the server's host key.
#[derive(Clone)]
pub enum HostKeyPolicy {
    /// Accept exactly this key and refuse any other (the default for VMs dsinfra created).
    Pinned(HostKey),
    /// Accept whatever key the server presents, log a warning, and call `record(node, key)` so
    /// the caller can store it and pin it next time. Only for adopted VMs without a known key.
    TrustOnFirstUse {
        /// Receives the node name and the presented key.
        record: RecordHostKey,
    },
}

impl fmt::Debug for HostKeyPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pinned(key) => f.debug_tuple("Pinned").field(key).finish(),
            Self::TrustOnFirstUse { .. } => f.write_str("TrustOnFirstUse"),
        }
    }
}

/// The outcome of checking a presented key against a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyVerdict {
    /// The key is trusted.
    Accept,
    /// The key differs from the pinned one.
    Mismatch { expected: String, actual: String },
}

impl HostKeyPolicy {
    /// Checks a presented key; a TOFU acceptance warns and records the key.
    pub(crate) fn check(&self, node: &str, presented: &HostKey) -> KeyVerdict {
        match self {
            Self::Pinned(expected) if expected.same_key(presented) => KeyVerdict::Accept,
            Self::Pinned(expected) => KeyVerdict::Mismatch {
                expected: expected.fingerprint(),
                actual: presented.fingerprint(),
            },
            Self::TrustOnFirstUse { record } => {
                tracing::warn!(
                    "node {node}: no pinned host key; trusting {} on first use",
                    presented.fingerprint()
                );
                record(node, presented);
                KeyVerdict::Accept
            }
        }
    }
}

/// A freshly generated ed25519 host key pair for a VM that does not exist yet.
///
/// Deliberately neither `Debug` nor `Display`: the private half is a secret and must only
/// leave through [`HostKeyPair::cloud_config`] or [`HostKeyPair::private_openssh`].
pub struct HostKeyPair {
    public: HostKey,
    private: Secret,
}

impl HostKeyPair {
    /// Generates a new ed25519 key pair from the operating system's random source.
    pub fn generate() -> Result<Self, String> {
        let mut rng = russh::keys::key::safe_rng();
        let private = PrivateKey::random(&mut rng, Algorithm::Ed25519)
            .map_err(|e| format!("cannot generate an ed25519 key: {e}"))?;
        let pem = private
            .to_openssh(LineEnding::LF)
            .map_err(|e| format!("cannot encode the ed25519 key: {e}"))?;
        Ok(Self {
            public: HostKey(private.public_key().clone()),
            private: Secret::new(pem.as_str()),
        })
    }

    /// The public half, to record in state and pin.
    pub fn public(&self) -> &HostKey {
        &self.public
    }

    /// The private half in OpenSSH PEM format.
    pub fn private_openssh(&self) -> &Secret {
        &self.private
    }

    /// A `#cloud-config` document that installs this pair as the VM's only host key.
    ///
    /// `ssh_genkeytypes: [ed25519]` stops cloud-init from generating rsa/ecdsa keys next to it,
    /// so the server has no other key to offer; cloud-init never regenerates a key file that
    /// exists, so the ed25519 entry keeps the key written from `ssh_keys`. An empty list would
    /// say the same, but cloud-init's schema requires at least one item and logs the whole user
    /// data as invalid (`ssh_genkeytypes: [] is too short`). The result contains the private key,
    /// hence [`Secret`].
    pub fn cloud_config(&self) -> Secret {
        let mut doc = String::from(
            "#cloud-config\nssh_deletekeys: true\nssh_genkeytypes: [ed25519]\nssh_keys:\n  ed25519_private: |\n",
        );
        for line in self.private.expose().lines() {
            doc.push_str("    ");
            doc.push_str(line);
            doc.push('\n');
        }
        doc.push_str("  ed25519_public: ");
        doc.push_str(&self.public.to_openssh());
        doc.push('\n');
        Secret::new(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn generated_pair_round_trips_and_cloud_config_has_both_halves() {
        let pair = HostKeyPair::generate().expect("generation works");
        let line = pair.public().to_openssh();
        assert!(line.starts_with("ssh-ed25519 "), "{line}");
        let parsed = HostKey::from_openssh(&line).expect("own output parses");
        assert!(parsed.same_key(pair.public()));
        assert!(pair.public().fingerprint().starts_with("SHA256:"));

        let doc = pair.cloud_config();
        let doc = doc.expose();
        assert!(doc.starts_with("#cloud-config\n"));
        assert!(doc.contains("  ed25519_private: |\n    -----BEGIN OPENSSH PRIVATE KEY-----\n"));
        assert!(doc.contains(&format!("  ed25519_public: {line}\n")));
        // The private key parses back from the indented block.
        let mut pem = String::new();
        for line in doc.lines().filter_map(|l| l.strip_prefix("    ")) {
            pem.push_str(line);
            pem.push('\n');
        }
        let back = PrivateKey::from_openssh(pem).expect("pem in cloud-config parses");
        assert!(HostKey(back.public_key().clone()).same_key(pair.public()));
    }

    #[test]
    fn pinned_policy_accepts_only_its_key() {
        let a = HostKeyPair::generate().expect("generation works");
        let b = HostKeyPair::generate().expect("generation works");
        let policy = HostKeyPolicy::Pinned(a.public().clone());
        assert_eq!(policy.check("n", a.public()), KeyVerdict::Accept);
        assert_eq!(
            policy.check("n", b.public()),
            KeyVerdict::Mismatch {
                expected: a.public().fingerprint(),
                actual: b.public().fingerprint()
            }
        );
    }

    #[test]
    fn tofu_records_the_presented_key() {
        let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let sink = Arc::clone(&seen);
        let policy = HostKeyPolicy::TrustOnFirstUse {
            record: Arc::new(move |node, key| {
                sink.lock()
                    .expect("test mutex not poisoned")
                    .push((node.to_owned(), key.to_openssh()));
            }),
        };
        let a = HostKeyPair::generate().expect("generation works");
        assert_eq!(policy.check("vm.old", a.public()), KeyVerdict::Accept);
        assert_eq!(
            *seen.lock().expect("test mutex not poisoned"),
            vec![("vm.old".to_owned(), a.public().to_openssh())]
        );
    }

    #[test]
    fn debug_of_policy_shows_fingerprint_only() {
        let a = HostKeyPair::generate().expect("generation works");
        let text = format!("{:?}", HostKeyPolicy::Pinned(a.public().clone()));
        assert_eq!(
            text,
            format!("Pinned(HostKey({}))", a.public().fingerprint())
        );
    }
}
