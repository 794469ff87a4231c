//! A value that must never reach a log, an error message, Debug output or state.
//!
//! Private keys, SAS tokens and account keys travel through this type only. It has no `Display`
//! and its `Debug` prints a placeholder, so a `{:?}` on a struct that holds one stays safe; the
//! value comes out only through [`Secret::expose`], which makes every use greppable.
//!
//! Every value wrapped here is also remembered, so that the crate's redaction registry
//! (`crate::secret`, which redacts logs) can read it with [`Secret::remembered_since`]: this
//! module imports nothing from the rest of dsinfra, so the registry pulls rather than being
//! pushed to.

use std::fmt;
use std::sync::Mutex;

/// Values shorter than this are not remembered for redaction: real keys and tokens are far
/// longer, and redacting every short word in a log would protect nothing.
const MIN_REMEMBERED_LEN: usize = 8;

/// Every distinct value wrapped in this process, in order. It only grows: the registry keeps
/// every secret for the life of the process anyway, and a run handles a few dozen at most.
static REMEMBERED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A secret string (a private key in PEM, a token, a password).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value and remembers it for the redaction registry.
    pub fn new(value: impl Into<String>) -> Self {
        let value = value.into();
        if value.len() >= MIN_REMEMBERED_LEN {
            let mut remembered = REMEMBERED
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // The same value is wrapped again and again (a client per command, a token per
            // request): remembering it once keeps the list as small as the set of secrets.
            if !remembered.contains(&value) {
                remembered.push(value.clone());
            }
        }
        Self(value)
    }

    /// The values wrapped (by [`Secret::new`]) in this process, from the `from`-th on: the
    /// crate's redaction registry passes how many it has already read.
    pub fn remembered_since(from: usize) -> Vec<String> {
        let remembered = REMEMBERED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        remembered
            .get(from..)
            .map(<[String]>::to_vec)
            .unwrap_or_default()
    }

    /// The value itself. Call only where it is written to its destination (a file on the node,
    /// the customData payload), never to show it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("sv=2026&sig=abc");
        assert_eq!(format!("{secret:?}"), "Secret([redacted])");
        assert_eq!(secret.expose(), "sv=2026&sig=abc");
    }

    #[test]
    fn wrapped_values_are_remembered_for_the_registry() {
        let key = Secret::new("ssh-made-private-key-0001");
        let _short = Secret::new("pw");
        let all = Secret::remembered_since(0);
        assert!(all.iter().any(|v| v == key.expose()));
        assert!(!all.iter().any(|v| v == "pw"), "short values are not kept");
        assert!(Secret::remembered_since(usize::MAX).is_empty());
    }
}
