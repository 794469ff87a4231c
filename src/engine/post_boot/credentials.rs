//! The half of a block's [`NodeContext`] that needs Azure: the storage accounts' own endpoints
//! (as ARM returns them), account keys (`listKeys`), SAS tokens (re-derived exactly as apply
//! signed them, see [`crate::engine::sas`]) and the blob listings `stage` steps shard.
//!
//! Nothing here is stored: keys and tokens live in memory for the run, registered for redaction,
//! and reach the nodes only as runner secret inputs. Credential identities (what the step hash
//! covers) name the secret without revealing it, so a re-signed SAS re-runs the steps using it
//! and a re-read account key under the same identity does not.

use std::collections::BTreeMap;

use serde_json::Value;

use super::context::{References, account_of};
use crate::addr::Address;
use crate::azure::{ArmClient, ResourceId};
use crate::model::{Desired, Step};
use crate::ssh::Secret;
use crate::state::State;
use crate::steps::library::{Credential, CredentialKind, NodeContext, StorageTarget};
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

/// Points `ctx.storage` at the accounts' own endpoints, then adds the account keys and SAS
/// tokens `refs` needs to `ctx.credentials`.
///
/// # Errors
///
/// Reading an account or a `listKeys` call failed, or a SAS is not applied yet or cannot be
/// re-derived; the text names the resource, never a secret.
pub async fn add_credentials(
    azure: Azure<'_>,
    state: &State,
    refs: &References,
    ctx: &mut NodeContext,
) -> Result<(), String> {
    add_endpoints(azure, state, refs, ctx).await?;
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

/// Reads each storage account a target of `ctx.storage` lives in, once, and takes its endpoints
/// from the account as ARM returned it. `https://NAME.blob.core.windows.net` is only public
/// Azure's: sovereign clouds, Azure Stack and emulated accounts served by Azurite advertise
/// other endpoints, and listing or copying from the public name there reaches nothing.
async fn add_endpoints(
    azure: Azure<'_>,
    state: &State,
    refs: &References,
    ctx: &mut NodeContext,
) -> Result<(), String> {
    let mut accounts: BTreeMap<Address, Value> = BTreeMap::new();
    for storage in &refs.storage {
        let Some(target) = ctx.storage.get_mut(&storage.to_string()) else {
            continue;
        };
        let account = account_of(storage);
        if !accounts.contains_key(&account) {
            // The id ARM gave it when apply made or read it; the manifest's when not recorded.
            let id = match state.resource(&account).and_then(|r| r.id.clone()) {
                Some(id) => id,
                None => azure
                    .desired
                    .resource(&account)
                    .ok_or_else(|| format!("the manifest has no {account}"))?
                    .arm_id(azure.subscription),
            };
            let body = azure
                .client
                .get::<Value>(&ResourceId::from_raw(id))
                .await
                .map_err(|e| format!("reading {account} for its endpoints failed: {e}"))?
                .ok_or_else(|| format!("{account} does not exist in Azure: apply creates it"))?;
            accounts.insert(account.clone(), body);
        }
        use_account_endpoints(target, &accounts[&account]);
    }
    Ok(())
}

/// Sets `target`'s endpoints from the account's `properties.primaryEndpoints`; an endpoint the
/// body does not give stays the public one.
fn use_account_endpoints(target: &mut StorageTarget, account: &Value) {
    let endpoint = |service: &str| {
        account
            .pointer(&format!("/properties/primaryEndpoints/{service}"))
            .and_then(Value::as_str)
            .map(|url| url.trim_end_matches('/'))
            .filter(|url| !url.is_empty())
    };
    if let Some(blob) = endpoint("blob") {
        blob.clone_into(&mut target.blob_endpoint);
    }
    // Mounts name the file service by host alone (`HOST:/account/share`, `//HOST/share`).
    if let Some(host) = endpoint("file")
        .and_then(|url| url.split_once("://"))
        .and_then(|(_, rest)| rest.split('/').next())
        .filter(|host| !host.is_empty())
    {
        host.clone_into(&mut target.file_host);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A storage account as ARM answers a GET of it, with the given primary endpoints.
    fn account(endpoints: &Value) -> Value {
        json!({"name": "expdata01", "properties": {"primaryEndpoints": endpoints}})
    }

    #[test]
    fn targets_take_the_endpoints_the_account_advertises() {
        let mut target = StorageTarget::azure("expdata01", "raw");
        // Azure China: neither host is public Azure's.
        use_account_endpoints(
            &mut target,
            &account(&json!({
                "blob": "https://expdata01.blob.core.chinacloudapi.cn/",
                "file": "https://expdata01.file.core.chinacloudapi.cn/",
            })),
        );
        assert_eq!(
            target.blob_endpoint,
            "https://expdata01.blob.core.chinacloudapi.cn"
        );
        assert_eq!(target.file_host, "expdata01.file.core.chinacloudapi.cn");
        // An emulated account served by Azurite: path-style, the account in the path.
        let mut target = StorageTarget::azure("stageacct", "raw");
        use_account_endpoints(
            &mut target,
            &account(&json!({"blob": "http://127.0.0.1:10000/stageacct/"})),
        );
        assert_eq!(target.blob_endpoint, "http://127.0.0.1:10000/stageacct");
        assert_eq!(target.file_host, "stageacct.file.core.windows.net");
    }

    #[test]
    fn an_account_without_endpoints_keeps_the_public_ones() {
        let mut target = StorageTarget::azure("expdata01", "raw");
        use_account_endpoints(&mut target, &json!({"properties": {}}));
        use_account_endpoints(&mut target, &account(&json!({"blob": ""})));
        assert_eq!(target, StorageTarget::azure("expdata01", "raw"));
    }
}
