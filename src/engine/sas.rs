//! Issuing a `sas` resource's token: the account key from `listKeys`, then the pure signing of
//! the private `issue` module (sas/issue.rs).
//!
//! Apply and `dsinfra output --show-secrets` both come here, so the token shown on request is
//! the very token apply signed: HMAC-SHA256 is deterministic, and both sign the same fields
//! (scope, permissions, start, expiry, protocol) with the same key. The state never holds the
//! token, only its [`SecretIdentity`]; the key is registered for redaction as soon as it is read.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

use crate::azure::{ArmClient, ResourceId};
use crate::model::{Desired, Resource};
use crate::state::SecretIdentity;
use crate::storage::sas::{AccountKey, SasToken};

mod issue;

use issue::sign_for_state;

/// Why a SAS could not be issued. The text names no secret: keys and tokens are redacted
/// before they could reach it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SasError(String);

/// The key of the storage account a `sas` resource belongs to (its `account` attribute), read
/// with `listKeys` and registered for redaction. `key1` is used; the emulator and Azure list it
/// first.
///
/// # Errors
///
/// The account is not in the manifest, `listKeys` failed or returned no usable key.
pub async fn account_key(
    client: &ArmClient,
    desired: &Desired,
    subscription: &str,
    sas: &Resource,
) -> Result<AccountKey, SasError> {
    let account_address = sas
        .attrs
        .get("account")
        .and_then(Value::as_str)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| SasError(format!("{} names no storage account", sas.address)))?;
    let account = desired.resource(&account_address).ok_or_else(|| {
        SasError(format!(
            "{} refers to {account_address}, which the manifest does not have",
            sas.address
        ))
    })?;
    let keys = client
        .list_storage_keys(&ResourceId::from_raw(account.arm_id(subscription)))
        .await
        .map_err(|e| SasError(format!("listKeys on {account_address} failed: {e}")))?;
    for key in &keys.keys {
        crate::secret::register(key.value.expose());
    }
    let first = keys
        .keys
        .first()
        .ok_or_else(|| SasError(format!("listKeys on {account_address} returned no keys")))?;
    AccountKey::new(&account.name, first.value.expose()).map_err(|e| SasError(e.to_string()))
}

/// Signs `sas` at `now` (the plan's time) with `key`; the fingerprint is keyed by `lineage`.
/// The identity records `now` as `signed_at`, so the token can be signed again later whatever
/// kind of expiry the manifest gives.
///
/// # Errors
///
/// The resource's attributes do not describe a valid SAS.
pub fn sign(
    sas: &Resource,
    key: &AccountKey,
    lineage: &str,
    now: DateTime<Utc>,
) -> Result<(SasToken, SecretIdentity), SasError> {
    let (token, mut identity) = sign_for_state(&sas.attrs, key, lineage.as_bytes(), now)
        .map_err(|e| SasError(e.to_string()))?;
    // `sign_for_state` records it too; setting it here keeps the guarantee this module's
    // re-signing relies on in one place.
    identity.signed_at = Some(now);
    Ok((token, identity))
}

/// The time apply signed `sas` at: the identity's `signed_at`, or, for states written before it
/// was recorded, the expiry minus the resource's `expires_in`. `None` for such an old state when
/// the manifest sets an absolute `expiry` (nothing then tells the signing time).
pub fn signed_at(sas: &Resource, identity: &SecretIdentity) -> Option<DateTime<Utc>> {
    if let Some(at) = identity.signed_at {
        return Some(at);
    }
    let relative = sas.attrs.get("expires_in").and_then(Value::as_str)?;
    let duration = crate::model::duration::parse(relative).ok()?;
    Some(identity.expiry? - TimeDelta::from_std(duration).ok()?)
}

/// Re-derives the token apply signed for `sas`, and checks it against the fingerprint in
/// `identity`, so a token is shown only if it is the one the state describes.
///
/// # Errors
///
/// The signing time cannot be recovered, signing failed, or the re-signed token differs from
/// the recorded one (the key was rotated, or the manifest changed since apply).
pub fn resign(
    sas: &Resource,
    key: &AccountKey,
    lineage: &str,
    identity: &SecretIdentity,
) -> Result<SasToken, SasError> {
    let now = signed_at(sas, identity).ok_or_else(|| {
        SasError(format!(
            "the signing time of {} is not recorded (its state predates that, and it sets an \
             absolute `expiry`): run `dsinfra apply` to re-sign it",
            sas.address
        ))
    })?;
    let (token, again) = sign(sas, key, lineage, now)?;
    if again.fingerprint != identity.fingerprint {
        return Err(SasError(format!(
            "the SAS of {} no longer matches the state (key rotated or manifest changed): \
             run `dsinfra apply` to re-sign it",
            sas.address
        )));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Address;
    use crate::model::{Lifecycle, ResourceKind};
    use serde_json::json;

    /// Azurite's public development key: valid nowhere but an emulator.
    const DEV_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    fn sas(expiry: (&str, &str)) -> Resource {
        let mut attrs = crate::model::Attrs::new();
        attrs.insert("account".into(), json!("storage_account.data.account"));
        attrs.insert("scope".into(), json!("storage_account.data.container.raw"));
        attrs.insert("permissions".into(), json!("rl"));
        attrs.insert(expiry.0.into(), json!(expiry.1));
        attrs.insert("https_only".into(), json!(true));
        Resource {
            address: Address::new("sas", "read", None, ""),
            kind: ResourceKind::Sas,
            name: "read".into(),
            parent: Some("expdata01".into()),
            resource_group: "rg".into(),
            attrs,
            depends_on: std::collections::BTreeSet::new(),
            lifecycle: Lifecycle::default(),
            span: None,
            attr_spans: std::collections::BTreeMap::new(),
        }
    }

    fn key(base64: &str) -> AccountKey {
        AccountKey::new("expdata01", base64).expect("valid base64")
    }

    fn planned() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
            .expect("valid time")
            .with_timezone(&Utc)
    }

    #[test]
    fn resigning_from_the_identity_gives_the_token_apply_signed() {
        let sas = sas(("expires_in", "72h"));
        let (token, identity) = sign(&sas, &key(DEV_KEY), "lineage-1", planned()).expect("signs");
        assert_eq!(signed_at(&sas, &identity), Some(planned()));
        let again = resign(&sas, &key(DEV_KEY), "lineage-1", &identity).expect("re-signs");
        assert_eq!(again.expose_query(), token.expose_query());
    }

    #[test]
    fn resigning_with_a_rotated_key_is_refused() {
        let sas = sas(("expires_in", "72h"));
        let (_, identity) = sign(&sas, &key(DEV_KEY), "lineage-1", planned()).expect("signs");
        let rotated = key("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
        let err = resign(&sas, &rotated, "lineage-1", &identity)
            .expect_err("a different key gives a different token");
        assert_eq!(
            err.to_string(),
            "the SAS of sas.read no longer matches the state (key rotated or manifest changed): \
             run `dsinfra apply` to re-sign it"
        );
    }

    #[test]
    fn an_absolute_expiry_is_resigned_from_the_recorded_signing_time() {
        let sas = sas(("expiry", "2026-03-05T00:00:00Z"));
        let (token, identity) = sign(&sas, &key(DEV_KEY), "lineage-1", planned()).expect("signs");
        assert_eq!(identity.signed_at, Some(planned()));
        assert_eq!(signed_at(&sas, &identity), Some(planned()));
        let again = resign(&sas, &key(DEV_KEY), "lineage-1", &identity).expect("re-signs");
        assert_eq!(again.expose_query(), token.expose_query());
    }

    #[test]
    fn a_state_without_signed_at_still_resigns_a_relative_expiry() {
        let sas = sas(("expires_in", "72h"));
        let (token, mut identity) =
            sign(&sas, &key(DEV_KEY), "lineage-1", planned()).expect("signs");
        identity.signed_at = None;
        assert_eq!(signed_at(&sas, &identity), Some(planned()));
        let again = resign(&sas, &key(DEV_KEY), "lineage-1", &identity).expect("re-signs");
        assert_eq!(again.expose_query(), token.expose_query());
    }

    #[test]
    fn an_old_state_with_an_absolute_expiry_cannot_be_resigned() {
        let sas = sas(("expiry", "2026-03-05T00:00:00Z"));
        let (_, mut identity) = sign(&sas, &key(DEV_KEY), "lineage-1", planned()).expect("signs");
        identity.signed_at = None;
        assert_eq!(signed_at(&sas, &identity), None);
        let err = resign(&sas, &key(DEV_KEY), "lineage-1", &identity).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "the signing time of sas.read is not recorded (its state predates that, and it sets \
             an absolute `expiry`): run `dsinfra apply` to re-sign it"
        );
    }

    #[test]
    fn signed_at_is_optional_in_the_state_document() {
        let old = r#"{"kind":"sas","scope":"container expdata01/raw","permissions":"rl",
            "expiry":"2026-03-04T10:00:00Z","fingerprint":"hmac-sha256:00"}"#;
        let identity: SecretIdentity = serde_json::from_str(old).expect("an old identity reads");
        assert_eq!(identity.signed_at, None);
        let sas = sas(("expiry", "2026-03-05T00:00:00Z"));
        let (_, fresh) = sign(&sas, &key(DEV_KEY), "lineage-1", planned()).expect("signs");
        let json = serde_json::to_value(&fresh).expect("serialises");
        assert_eq!(json["signed_at"], "2026-03-01T10:00:00Z");
    }
}
