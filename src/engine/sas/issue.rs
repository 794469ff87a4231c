//! Issuing the SAS a `sas "N"` block asks for: sign it from the account key, and describe it
//! for the state without the token.
//!
//! The engine calls [`sign_for_state`] after `listKeys` gave it the account key. The token goes
//! to steps and, on request, to `dsinfra output --show-secrets`; the state keeps only the
//! [`SecretIdentity`]: kind, scope, permissions, expiry and a keyed fingerprint that changes
//! whenever the token does. It lives in the engine, not in `storage`, because it knows the
//! manifest's attribute names and the state's identity type, which the data-plane layer must not
//! (docs/architecture.md); it is pure (the clock is a parameter), so it is tested without a
//! service.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

use crate::model::Attrs;
use crate::state::{SecretIdentity, SecretKind};
use crate::storage::Error;
use crate::storage::sas::{
    AccountKey, Permissions, ResourceTypes, SasSpec, SasToken, Scope, Services,
};

/// How far back the start of a signed SAS is set, to tolerate clock skew with the service.
const CLOCK_SKEW: TimeDelta = TimeDelta::minutes(5);

/// Signs the SAS that a `sas` resource's attributes describe (`scope`, `permissions`,
/// `expires_in` or `expiry`, `https_only`; see docs/manifest.md), with `key`, at `now`.
/// `fingerprint_key` keys the identity's fingerprint (the state's lineage), so the same token
/// has unrelated fingerprints in two states. The token is registered for redaction.
pub fn sign_for_state(
    attrs: &Attrs,
    key: &AccountKey,
    fingerprint_key: &[u8],
    now: DateTime<Utc>,
) -> Result<(SasToken, SecretIdentity), Error> {
    let text = |name: &str| attrs.get(name).and_then(Value::as_str);
    let scope_address =
        text("scope").ok_or_else(|| Error::invalid("the SAS resource has no `scope` attribute"))?;
    let scope = scope_of(scope_address)?;
    let letters = text("permissions").unwrap_or("rl");
    let permissions = permissions_of(letters)?;
    let expiry = match (text("expires_in"), text("expiry")) {
        (Some(relative), _) => {
            let duration = crate::model::duration::parse(relative).map_err(Error::invalid)?;
            let duration = TimeDelta::from_std(duration)
                .map_err(|_| Error::invalid(format!("`{relative}` is too long for a SAS")))?;
            now + duration
        }
        (None, Some(absolute)) => DateTime::parse_from_rfc3339(absolute)
            .map_err(|e| Error::invalid(format!("invalid SAS expiry `{absolute}`: {e}")))?
            .with_timezone(&Utc),
        (None, None) => {
            return Err(Error::invalid(
                "the SAS resource has neither `expires_in` nor `expiry`",
            ));
        }
    };
    if expiry <= now {
        return Err(Error::invalid(format!(
            "the SAS for {scope_address} would already be expired ({expiry})"
        )));
    }
    let https_only = attrs
        .get("https_only")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let spec = SasSpec {
        scope,
        permissions,
        start: Some(now - CLOCK_SKEW),
        expiry,
        ip_range: None,
        protocol: crate::storage::Protocol::HttpsOnly,
    }
    .https_only(https_only);
    let token = spec.sign(key)?;
    let identity = SecretIdentity {
        kind: SecretKind::Sas,
        scope: describe_scope(&spec.scope, key.account()),
        permissions: letters.to_owned(),
        expiry: Some(expiry),
        signed_at: Some(now),
        fingerprint: SecretIdentity::fingerprint(fingerprint_key, token.expose_query().as_bytes()),
    };
    Ok((token, identity))
}

/// The SAS scope an address names: `storage_account.N.container.C`, `storage_account.N.share.S`
/// or the account itself (`storage_account.N.account`). Container and share names are their
/// block labels (see manifest/expand/storage.rs).
fn scope_of(address: &str) -> Result<Scope, Error> {
    let parts: Vec<&str> = address.split('.').collect();
    match parts.as_slice() {
        ["storage_account", _, "container", name] => Ok(Scope::Container {
            container: (*name).to_owned(),
        }),
        ["storage_account", _, "share", name] => Ok(Scope::Share {
            share: (*name).to_owned(),
        }),
        ["storage_account", _, "account"] | ["storage_account", _] => Ok(Scope::Account {
            services: Services::BLOB,
            resource_types: ResourceTypes::CONTAINER_OBJECT,
        }),
        _ => Err(Error::invalid(format!(
            "`{address}` is not a storage account, container or share"
        ))),
    }
}

fn permissions_of(letters: &str) -> Result<Permissions, Error> {
    let mut permissions = Permissions::default();
    for letter in letters.chars() {
        let flag = match letter {
            'r' => &mut permissions.read,
            'a' => &mut permissions.add,
            'c' => &mut permissions.create,
            'w' => &mut permissions.write,
            'd' => &mut permissions.delete,
            'l' => &mut permissions.list,
            other => {
                return Err(Error::invalid(format!(
                    "`{other}` is not a SAS permission (r, a, c, w, d, l)"
                )));
            }
        };
        *flag = true;
    }
    if permissions == Permissions::default() {
        return Err(Error::invalid("a SAS needs at least one permission"));
    }
    Ok(permissions)
}

/// How the state names a scope: `account data01`, `container data01/raw`, `share data01/home`.
fn describe_scope(scope: &Scope, account: &str) -> String {
    match scope {
        Scope::Account { .. } => format!("account {account}"),
        Scope::Container { container } => format!("container {account}/{container}"),
        Scope::Blob { container, blob } => format!("blob {account}/{container}/{blob}"),
        Scope::Share { share } => format!("share {account}/{share}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Azurite's public development key: a real key format, valid nowhere but the emulator.
    const DEV_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    fn key() -> AccountKey {
        AccountKey::new("expdata01", DEV_KEY).expect("valid base64")
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-22T06:00:00Z")
            .expect("valid time")
            .with_timezone(&Utc)
    }

    fn attrs(pairs: &[(&str, Value)]) -> Attrs {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn a_container_sas_is_signed_and_described_without_the_token() {
        let attrs = attrs(&[
            ("account", json!("storage_account.data.account")),
            ("scope", json!("storage_account.data.container.raw")),
            ("permissions", json!("rl")),
            ("expires_in", json!("72h")),
            ("https_only", json!(true)),
        ]);
        let (token, identity) =
            sign_for_state(&attrs, &key(), b"lineage-1", now()).expect("signed");
        let query = token.expose_query();
        assert!(query.contains("sr=c"), "{query}");
        assert!(query.contains("sp=rl"), "{query}");
        assert!(query.contains("spr=https&"), "{query}");
        assert!(query.contains("se=2026-11-25T06%3A00%3A00Z"), "{query}");
        assert!(query.contains("st=2026-11-22T05%3A55%3A00Z"), "{query}");
        assert_eq!(token.expiry(), now() + TimeDelta::hours(72));
        assert_eq!(identity.kind, SecretKind::Sas);
        assert_eq!(identity.scope, "container expdata01/raw");
        assert_eq!(identity.permissions, "rl");
        assert_eq!(identity.expiry, Some(now() + TimeDelta::hours(72)));
        assert_eq!(
            identity.fingerprint,
            SecretIdentity::fingerprint(b"lineage-1", query.as_bytes())
        );
        let stored = serde_json::to_string(&identity).expect("serialises");
        let signature = query.rsplit("sig=").next().expect("a signature");
        assert!(!stored.contains(signature), "{stored}");
        assert!(!stored.contains("sig="), "{stored}");
        // The same attributes at the same time sign the same token; another state keys another
        // fingerprint.
        let (again, other) = sign_for_state(&attrs, &key(), b"lineage-2", now()).expect("signed");
        assert_eq!(again.expose_query(), query);
        assert_ne!(other.fingerprint, identity.fingerprint);
    }

    #[test]
    fn account_and_share_scopes_and_absolute_expiry() {
        let account = attrs(&[
            ("scope", json!("storage_account.data.account")),
            ("expiry", json!("2026-12-01T00:00:00Z")),
            ("https_only", json!(false)),
        ]);
        let (token, identity) = sign_for_state(&account, &key(), b"l", now()).expect("signed");
        assert!(
            token.expose_query().contains("ss=b"),
            "{}",
            token.expose_query()
        );
        assert!(
            token.expose_query().contains("spr=https%2Chttp"),
            "{}",
            token.expose_query()
        );
        assert_eq!(identity.scope, "account expdata01");
        assert_eq!(identity.permissions, "rl");
        let share = attrs(&[
            ("scope", json!("storage_account.data.share.home")),
            ("permissions", json!("rwl")),
            ("expires_in", json!("1d")),
        ]);
        let (token, identity) = sign_for_state(&share, &key(), b"l", now()).expect("signed");
        assert!(
            token.expose_query().contains("sr=s&"),
            "{}",
            token.expose_query()
        );
        assert_eq!(identity.scope, "share expdata01/home");
    }

    #[test]
    fn bad_attributes_are_refused_with_a_reason() {
        let expired = attrs(&[
            ("scope", json!("storage_account.data.account")),
            ("expiry", json!("2026-01-01T00:00:00Z")),
        ]);
        assert_eq!(
            sign_for_state(&expired, &key(), b"l", now())
                .expect_err("expired")
                .to_string(),
            "the SAS for storage_account.data.account would already be expired (2026-01-01 00:00:00 UTC)"
        );
        let bad_letter = attrs(&[
            ("scope", json!("storage_account.data.account")),
            ("permissions", json!("rx")),
            ("expires_in", json!("1h")),
        ]);
        assert_eq!(
            sign_for_state(&bad_letter, &key(), b"l", now())
                .expect_err("x")
                .to_string(),
            "`x` is not a SAS permission (r, a, c, w, d, l)"
        );
        let bad_scope = attrs(&[("scope", json!("vm.gpu.vm")), ("expires_in", json!("1h"))]);
        assert_eq!(
            sign_for_state(&bad_scope, &key(), b"l", now())
                .expect_err("vm")
                .to_string(),
            "`vm.gpu.vm` is not a storage account, container or share"
        );
    }
}
