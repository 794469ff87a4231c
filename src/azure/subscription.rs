//! Which subscription dsinfra works in: the manifest's, else AZURE_SUBSCRIPTION_ID, else the
//! Azure CLI's default.
//!
//! The precedence is a pure function over its inputs ([`resolve_subscription`]); the CLI is
//! asked lazily, only when nothing else decided, because spawning `az` takes about a second.
//! [`resolve_subscription_from_environment`] is the thin wrapper that reads the real process
//! environment and runs `az account show`.

use std::fmt;

use super::error::ArmError;

/// Where the subscription id came from, so the plan can say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionSource {
    /// The manifest's `azure { subscription_id = ... }`.
    Manifest,
    /// AZURE_SUBSCRIPTION_ID.
    Environment,
    /// `az account show` (the CLI's default subscription).
    AzureCli,
}

impl fmt::Display for SubscriptionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Manifest => "the manifest",
            Self::Environment => "AZURE_SUBSCRIPTION_ID",
            Self::AzureCli => "the Azure CLI's default subscription",
        })
    }
}

/// A subscription id and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSubscription {
    /// The subscription GUID.
    pub id: String,
    /// Its source.
    pub source: SubscriptionSource,
}

/// The message when no source names a subscription.
pub const NO_SUBSCRIPTION: &str = "no Azure subscription: set `subscription` in the manifest's `azure` block, set AZURE_SUBSCRIPTION_ID, or run `az login` (and `az account set --subscription ...`)";

/// Picks the subscription: `explicit` (manifest) > `env` (AZURE_SUBSCRIPTION_ID) > `cli_default`
/// (called only when needed). Empty strings count as unset. The chosen id must be a GUID, as
/// every ARM subscription id is; a typo fails here with its source named instead of as a 404
/// later.
pub fn resolve_subscription(
    explicit: Option<&str>,
    env: Option<&str>,
    cli_default: impl FnOnce() -> Option<String>,
) -> Result<ResolvedSubscription, ArmError> {
    let given = |v: Option<&str>| {
        v.map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let (id, source) = if let Some(id) = given(explicit) {
        (id, SubscriptionSource::Manifest)
    } else if let Some(id) = given(env) {
        (id, SubscriptionSource::Environment)
    } else if let Some(id) = given(cli_default().as_deref()) {
        (id, SubscriptionSource::AzureCli)
    } else {
        return Err(ArmError::usage(NO_SUBSCRIPTION));
    };
    if uuid::Uuid::try_parse(&id).is_err() {
        return Err(ArmError::usage(format!(
            "subscription id '{id}' from {source} is not a GUID (expected e.g. 00000000-0000-0000-0000-000000000000)"
        )));
    }
    Ok(ResolvedSubscription { id, source })
}

/// Resolves the subscription against the real environment and Azure CLI.
pub async fn resolve_subscription_from_environment(
    explicit: Option<&str>,
) -> Result<ResolvedSubscription, ArmError> {
    let env = std::env::var("AZURE_SUBSCRIPTION_ID").ok();
    let needs_cli = [explicit, env.as_deref()]
        .iter()
        .all(|v| v.is_none_or(|v| v.trim().is_empty()));
    let cli = if needs_cli {
        azure_cli_default_subscription().await
    } else {
        None
    };
    resolve_subscription(explicit, env.as_deref(), || cli)
}

/// `az account show --query id -o tsv`, or `None` when the CLI is missing or not logged in.
async fn azure_cli_default_subscription() -> Option<String> {
    let output = tokio::process::Command::new("az")
        .args(["account", "show", "--query", "id", "--output", "tsv"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let id = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "11111111-1111-1111-1111-111111111111";
    const B: &str = "22222222-2222-2222-2222-222222222222";
    const C: &str = "33333333-3333-3333-3333-333333333333";

    #[test]
    fn manifest_beats_environment_beats_cli() {
        let cli = || Some(C.to_string());
        let r = resolve_subscription(Some(A), Some(B), cli).expect("resolves");
        assert_eq!((r.id.as_str(), r.source), (A, SubscriptionSource::Manifest));
        let r = resolve_subscription(None, Some(B), cli).expect("resolves");
        assert_eq!(
            (r.id.as_str(), r.source),
            (B, SubscriptionSource::Environment)
        );
        let r = resolve_subscription(Some(" "), Some(""), cli).expect("resolves");
        assert_eq!((r.id.as_str(), r.source), (C, SubscriptionSource::AzureCli));
    }

    #[test]
    fn the_cli_is_not_asked_when_something_else_decided() {
        let r = resolve_subscription(Some(A), None, || panic!("the CLI must not run"));
        assert!(r.is_ok());
    }

    #[test]
    fn nothing_configured_says_how_to_fix_it() {
        let err = resolve_subscription(None, None, || None).expect_err("nothing to resolve");
        assert_eq!(err.to_string(), NO_SUBSCRIPTION);
    }

    #[test]
    fn a_non_guid_names_its_source() {
        let err = resolve_subscription(None, Some("my-sub"), || None).expect_err("not a GUID");
        assert_eq!(
            err.to_string(),
            "subscription id 'my-sub' from AZURE_SUBSCRIPTION_ID is not a GUID (expected e.g. 00000000-0000-0000-0000-000000000000)"
        );
    }
}
