//! SSH public keys: accept the OpenSSH one-line format, refuse private keys without echoing them.

use base64::Engine as _;

const ALGORITHMS: [&str; 7] = [
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// Why a key was refused. Messages never contain the key text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::manifest) enum KeyError {
    /// The text is a private key.
    Private,
    /// The text is not an OpenSSH public key.
    NotAKey(String),
}

/// Check one public key and return it trimmed (a trailing newline from `file()` is dropped).
pub(in crate::manifest) fn check(text: &str) -> Result<String, KeyError> {
    if text.contains("PRIVATE KEY") {
        return Err(KeyError::Private);
    }
    let key = text.trim();
    if key.lines().count() > 1 {
        return Err(KeyError::NotAKey(
            "it spans several lines; give one key per entry (use a list for several)".to_owned(),
        ));
    }
    let mut fields = key.split_whitespace();
    let algorithm = fields.next().unwrap_or_default();
    if !ALGORITHMS.contains(&algorithm) {
        return Err(KeyError::NotAKey(
            "it does not start with a key type such as `ssh-ed25519` or `ssh-rsa`".to_owned(),
        ));
    }
    let blob = fields.next().unwrap_or_default();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map_err(|_| {
            KeyError::NotAKey("the key data after the type is not valid base64".to_owned())
        })?;
    // The blob starts with the algorithm name as a length-prefixed string; a mismatch means the
    // text was mangled (copied partly, or two keys glued together).
    let name_len = decoded
        .get(..4)
        .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let name = decoded.get(4..4 + name_len).unwrap_or_default();
    if name != algorithm.as_bytes() {
        return Err(KeyError::NotAKey(
            "the key data does not match its type; copy the whole line of the .pub file".to_owned(),
        ));
    }
    Ok(key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra\n";

    #[test]
    fn accepts_public_keys_and_trims_them() {
        assert_eq!(check(ED25519), Ok(ED25519.trim().to_owned()));
    }

    #[test]
    fn refuses_private_keys_and_garbage() {
        assert_eq!(
            check(
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n"
            ),
            Err(KeyError::Private)
        );
        assert!(matches!(check("hello"), Err(KeyError::NotAKey(_))));
        assert!(matches!(check("ssh-rsa !!!"), Err(KeyError::NotAKey(_))));
        assert!(matches!(
            check("ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIHkDVRXl7W0uZJ4OXdKhh0xP1v3s2Xgp3u2YjW9u8F0x"),
            Err(KeyError::NotAKey(_))
        ));
    }
}
