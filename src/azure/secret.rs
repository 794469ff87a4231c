//! A string that must never be printed: tokens, storage keys, customData.
//!
//! Secrets travel through the client in request and response bodies, so the type has to be
//! serialisable, but `Debug` and `Display` print a fixed placeholder. Reading the value takes an
//! explicit call to [`Secret::expose`], which makes every use easy to find in review.
//!
//! Every value wrapped here is also remembered, so that the crate's redaction registry
//! (`crate::secret`, which redacts logs) can read it with [`Secret::remembered_since`]. The
//! registry pulls rather than this module pushing, because this module imports nothing from the
//! rest of dsinfra and so has no registry to push to.

use std::fmt;
use std::sync::Mutex;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What `Debug` and `Display` print instead of the value.
pub const REDACTED: &str = "<redacted>";

/// Values shorter than this are not remembered for redaction: real tokens, keys and customData
/// are far longer, and redacting every short word in a log would protect nothing.
const MIN_REMEMBERED_LEN: usize = 8;

/// Every distinct value wrapped in this process, in order. It only grows: the registry keeps
/// every secret for the life of the process anyway, and a run handles a few dozen at most.
static REMEMBERED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A secret string (token, key, base64 customData) that redacts itself when printed.
#[derive(Clone, PartialEq, Eq, Default)]
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

    /// The values wrapped (by [`Secret::new`] or deserialisation) in this process, from the `from`-th on: the
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
        String::deserialize(deserializer).map(Self::new)
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

    #[test]
    fn wrapped_and_deserialised_values_are_remembered_for_the_registry() {
        let made = Secret::new("azure-made-value-0001");
        let read: Secret =
            serde_json::from_str("\"azure-read-value-0002\"").expect("a string deserialises");
        let _short = Secret::new("k3");
        let all = Secret::remembered_since(0);
        assert!(all.iter().any(|v| v == made.expose()));
        assert!(all.iter().any(|v| v == read.expose()));
        assert!(!all.iter().any(|v| v == "k3"), "short values are not kept");
        // The list only grows, so reading from an offset gives what followed it.
        assert!(Secret::remembered_since(1).starts_with(&all[1..]));
        assert!(Secret::remembered_since(usize::MAX).is_empty());
    }
}
