//! A string that must never be printed: tokens, storage keys, customData.
//!
//! Secrets travel through the client in request and response bodies, so the type has to be
//! serialisable, but `Debug` and `Display` print a fixed placeholder. Reading the value takes an
//! explicit call to [`Secret::expose`], which makes every use easy to find in review.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What `Debug` and `Display` print instead of the value.
pub const REDACTED: &str = "<redacted>";

/// A secret string (token, key, base64 customData) that redacts itself when printed.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself. Call this only where the secret is sent or stored on purpose.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?}"), "<redacted>");
        assert_eq!(format!("{secret}"), "<redacted>");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some(<redacted>)");
        assert_eq!(secret.expose(), "hunter2");
    }

    #[test]
    fn serde_carries_the_value_because_bodies_must() {
        let json = serde_json::to_string(&Secret::new("k1")).expect("a string serialises");
        assert_eq!(json, "\"k1\"");
        let back: Secret = serde_json::from_str("\"k2\"").expect("a string deserialises");
        assert_eq!(back.expose(), "k2");
    }
}
