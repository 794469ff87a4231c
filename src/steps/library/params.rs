//! Typed access to a step's parameters, with the checks the templates rely on.
//!
//! The manifest layer (src/manifest/step_kinds.rs) already validated types and filled defaults;
//! this layer still checks what a template interpolates, because a value reaching a shell script
//! must be safe there whoever built the map (the engine, a test, a future API).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::LibraryError;

/// A step's parameters, with its name for error messages.
pub(super) struct Params<'a> {
    pub step: &'a str,
    pub map: &'a BTreeMap<String, Value>,
}

impl<'a> Params<'a> {
    fn bad(&self, param: &str, why: impl Into<String>) -> LibraryError {
        LibraryError::BadParam {
            step: self.step.to_owned(),
            param: param.to_owned(),
            why: why.into(),
        }
    }

    /// An optional text parameter.
    pub fn text(&self, name: &str) -> Result<Option<&'a str>, LibraryError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(self.bad(name, format!("expected text, got {other}"))),
        }
    }

    /// A text parameter with a default.
    pub fn text_or(&self, name: &str, default: &'a str) -> Result<&'a str, LibraryError> {
        Ok(self.text(name)?.unwrap_or(default))
    }

    /// A required text parameter.
    pub fn required(&self, name: &str) -> Result<&'a str, LibraryError> {
        self.text(name)?.ok_or_else(|| LibraryError::MissingParam {
            step: self.step.to_owned(),
            param: name.to_owned(),
        })
    }

    /// A whole number >= 0 with a default.
    pub fn int_or(&self, name: &str, default: u64) -> Result<u64, LibraryError> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    /// An optional whole number >= 0.
    pub fn int(&self, name: &str) -> Result<Option<u64>, LibraryError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.bad(name, format!("expected a whole number >= 0, got {n}"))),
            Some(other) => Err(self.bad(name, format!("expected a number, got {other}"))),
        }
    }

    /// A boolean with a default.
    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool, LibraryError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(self.bad(name, format!("expected true or false, got {other}"))),
        }
    }

    /// A path on the node: absolute (or under the temp disk, `{temp}/...`), no `..`, and no
    /// whitespace or quotes, because paths also go into fstab lines and config files.
    pub fn path_or(&self, name: &str, default: &'a str) -> Result<&'a str, LibraryError> {
        let path = self.text_or(name, default)?;
        check_path(path).map_err(|why| self.bad(name, why))?;
        Ok(path)
    }

    /// The step's timeout (`45m`, `2h`, `90s`, `1h30m`).
    pub fn timeout(&self) -> Result<Option<Duration>, LibraryError> {
        self.text("timeout")?
            .map(|t| parse_duration(t).map_err(|why| self.bad("timeout", why)))
            .transpose()
    }
}

/// Checks a node path for use in scripts, fstab and config files.
pub(super) fn check_path(path: &str) -> Result<(), String> {
    let rest = path.strip_prefix("{temp}").unwrap_or(path);
    if !rest.starts_with('/') {
        return Err(format!(
            "{path:?} must be an absolute path (or start with {{temp}}/ for the temp disk)"
        ));
    }
    if rest.split('/').any(|c| c == "..") {
        return Err(format!("{path:?} must not contain `..`"));
    }
    if rest.contains("{temp}")
        || rest.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\' | '$' | '`')
        })
    {
        return Err(format!(
            "{path:?} must not contain whitespace, quotes, `\\`, `$` or backquotes"
        ));
    }
    Ok(())
}

/// Parses `90s`, `45m`, `2h`, `1d`, `1h30m` (the manifest's one duration syntax).
pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::model::duration::parse(text)
}

/// Whether `name` is a valid Azure storage account name (3-24 lowercase letters and digits).
pub(super) fn is_account_name(name: &str) -> bool {
    (3..=24).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Whether `name` is a valid container or share name (3-63 lowercase letters, digits, `-`).
pub(super) fn is_container_name(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("45m"), Ok(Duration::from_mins(45)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_mins(90)));
        assert!(parse_duration("45").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5x").is_err());
    }

    #[test]
    fn paths() {
        assert!(check_path("/mnt/blob").is_ok());
        assert!(check_path("{temp}/bf2").is_ok());
        assert!(check_path("relative").is_err());
        assert!(check_path("/a/../b").is_err());
        assert!(check_path("/a b").is_err());
        assert!(check_path("/a/$(x)").is_err());
        assert_eq!(
            check_path("mnt").err().as_deref(),
            Some("\"mnt\" must be an absolute path (or start with {temp}/ for the temp disk)")
        );
    }

    #[test]
    fn azure_names() {
        assert!(is_account_name("devstoreaccount1") && !is_account_name("Dev"));
        assert!(is_container_name("cosmo-flow") && !is_container_name("-x1"));
    }
}
