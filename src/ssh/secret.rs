//! A value that must never reach a log, an error message, Debug output or state.
//!
//! Private keys, SAS tokens and account keys travel through this type only. It has no `Display`
//! and its `Debug` prints a placeholder, so a `{:?}` on a struct that holds one stays safe; the
//! value comes out only through [`Secret::expose`], which makes every use greppable.

use std::fmt;

/// A secret string (a private key in PEM, a token, a password).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
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
}
