//! The half of a block's [`NodeContext`] that needs Azure: account keys (`listKeys`), SAS tokens
//! (re-derived exactly as apply signed them, see [`crate::engine::sas`]) and the blob listings
//! `stage` steps shard.
//!
//! Nothing here is stored: keys and tokens live in memory for the run, registered for redaction,
//! and reach the nodes only as runner secret inputs. Credential identities (what the step hash
//! covers) name the secret without revealing it, so a re-signed SAS re-runs the steps using it
//! and a re-read account key under the same identity does not.

use serde_json::Value;

use super::context::{References, account_of};
use crate::addr::Address;
use crate::azure::{ArmClient, ResourceId};
use crate::model::{Desired, Step};
use crate::ssh::Secret;
use crate::state::State;
use crate::steps::library::{Credential, CredentialKind, NodeContext};
use crate::storage::{AccountKey, Auth, BlobStore};

/// Where secrets come from.
#[derive(Clone, Copy)]
pub struct Azure<'a> {
    /// The ARM client (for `listKeys`).
    pub client: &'a ArmClient,
    /// The subscription the resources live in.
    pub subscription: &'a str,
    /// The manifest.
    pub desired: &'a Desired,
}

impl std::fmt::Debug for Azure<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Azure")
            .field("subscription", &self.subscription)
            .finish_non_exhaustive()
    }
}

/// The key under which the library looks a storage account's key up: `storage_account.data`.
fn credential_key(account: &Address) -> String {
    format!("{}.{}", account.kind, account.name)
}

/// Adds the account keys and SAS tokens `refs` needs to `ctx.credentials`.
///
/// # Errors
///
/// A `listKeys` call failed, or a SAS is not applied yet or cannot be re-derived; the text names
/// the resource, never a secret.
pub async fn add_credentials(
    azure: Azure<'_>,
    state: &State,
    refs: &References,
    ctx: &mut NodeContext,
) -> Result<(), String> {
    for account in &refs.account_keys {
        let resource = azure
            .desired
            .resource(account)
            .ok_or_else(|| format!("the manifest has no {account}"))?;
        let keys = azure
            .client
            .list_storage_keys(&ResourceId::from_raw(resource.arm_id(azure.subscription)))
            .await
            .map_err(|e| format!("listKeys on {account} failed: {e}"))?;
        for key in &keys.keys {
            crate::secret::register(key.value.expose());
        }
        let first = keys
            .keys
            .first()
            .ok_or_else(|| format!("listKeys on {account} returned no keys"))?;
        ctx.credentials.insert(
            credential_key(account),
            Credential {
                kind: CredentialKind::AccountKey,
                identity: format!("{} key1", credential_key(account)),
                value: Secret::new(first.value.expose()),
            },
        );
    }
    for sas in &refs.sas {
        let resource = azure
            .desired
            .resource(sas)
            .ok_or_else(|| format!("the manifest has no {sas}"))?;
        let identity = state
            .resource(sas)
            .and_then(|r| r.secrets.get("token"))
            .ok_or_else(|| format!("{sas} has not been signed yet: it is created by apply"))?;
        let key = crate::engine::sas::account_key(
            azure.client,
            azure.desired,
            azure.subscription,
            resource,
        )
        .await
        .map_err(|e| e.to_string())?;
        let token = crate::engine::sas::resign(resource, &key, &state.lineage, identity)
            .map_err(|e| e.to_string())?;
        crate::secret::register(token.expose_query());
        ctx.credentials.insert(
            sas.to_string(),
            Credential {
                kind: CredentialKind::Sas,
                identity: format!("{sas} {}", identity.fingerprint),
                value: Secret::new(token.expose_query()),
            },
        );
    }
    Ok(())
}

/// Lists, once each, the blobs every `stage` step of `steps` copies, into `ctx.listings` by step
/// name. Runs after [`add_credentials`]: it reads with the step's SAS, else the account key.
///
/// # Errors
///
/// The step's source or credential is unknown, or the listing failed.
pub async fn add_listings(steps: &[&Step], ctx: &mut NodeContext) -> Result<(), String> {
    for step in steps.iter().filter(|s| s.kind == "stage") {
        let text = |name: &str| step.params.get(name).and_then(Value::as_str);
        let from = text("from").ok_or_else(|| format!("step `{}` has no `from`", step.name))?;
        let target = ctx
            .storage
            .get(from)
            .ok_or_else(|| format!("step `{}`: {from} is not a container", step.name))?;
        let auth = if let Some(sas) = text("sas") {
            let credential = ctx
                .credentials
                .get(sas)
                .ok_or_else(|| format!("step `{}`: {sas} is not resolved", step.name))?;
            Auth::sas(credential.value.expose())
        } else {
            let account: Address = from
                .parse()
                .map_err(|e| format!("step `{}`: {from}: {e}", step.name))?;
            let account = credential_key(&account_of(&account));
            let credential = ctx.credentials.get(&account).ok_or_else(|| {
                format!("step `{}`: the key of {account} is not resolved", step.name)
            })?;
            let key = AccountKey::new(&target.account, credential.value.expose())
                .map_err(|e| format!("step `{}`: {e}", step.name))?;
            Auth::AccountKey(key)
        };
        let store = BlobStore::new(&target.blob_endpoint, auth)
            .map_err(|e| format!("step `{}`: {e}", step.name))?;
        let listing = store
            .list(&target.name, text("prefix").unwrap_or(""), false)
            .await
            .map_err(|e| format!("step `{}`: listing {from} failed: {e}", step.name))?;
        ctx.listings.insert(step.name.clone(), listing);
    }
    Ok(())
}
