//! What apply and destroy do beyond the PUT or DELETE for Azure Machine Learning resources.
//!
//! - A key vault's body names the subscription's tenant, read once per run from
//!   `GET /subscriptions/{id}` (any credential works; a token's claims would not say it for
//!   every credential type).
//! - A compute's create or count change completes only when its nodes are usable
//!   ([`crate::engine::aml_scale`]), reported as the resource's progress.
//! - A compute's DELETE must say what becomes of its VMs (`underlyingResourceAction=Delete`: ARM
//!   requires the parameter); a workspace's is permanent (`forceToPurge=true`), and a vault is
//!   purged once deleted, so their names are free for the next apply (decision 40).

use std::time::Instant;

use super::{Shared, local_error};
use crate::addr::Address;
use crate::azure::ResourceId;
use crate::engine::advice::ResourceError;
use crate::engine::aml_scale::{describe_counts, wait_for_nodes};
use crate::engine::events::{Event, Operation};
use crate::model::{Resource, ResourceKind};
use crate::plan::Change;

/// The query a DELETE of `kind` needs.
pub(super) fn delete_query(kind: ResourceKind) -> &'static [(&'static str, &'static str)] {
    match kind {
        ResourceKind::MlCompute => &[("underlyingResourceAction", "Delete")],
        ResourceKind::MlWorkspace => &[("forceToPurge", "true")],
        _ => &[],
    }
}

/// The subscription's tenant, read from ARM the first time a body needs it.
pub(super) async fn tenant(
    shared: &Shared,
    address: &Address,
    operation: Operation,
) -> Result<String, ResourceError> {
    let read = shared
        .tenant
        .get_or_init(|| async {
            match shared.client.subscription(&shared.subscription).await {
                Ok(Some(sub)) => sub.tenant_id.ok_or_else(|| {
                    "ARM's answer for the subscription names no tenantId".to_owned()
                }),
                Ok(None) => Err("ARM does not know the subscription".to_owned()),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
    read.clone().map_err(|e| {
        local_error(
            address,
            operation,
            format!(
                "a key vault needs the subscription's tenant, which could not be read \
                 (GET /subscriptions/{}): {e}",
                shared.subscription
            ),
        )
    })
}

/// After a compute's PUT or PATCH: wait until it has its `count` usable nodes.
pub(super) async fn await_nodes(
    shared: &Shared,
    resource: &Resource,
    id: &str,
    operation: Operation,
) -> Result<(), ResourceError> {
    let address = &resource.address;
    let wanted = resource
        .attrs
        .get("count")
        .and_then(serde_json::Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| {
            local_error(
                address,
                operation,
                "attribute `count` is missing or not a whole number".to_owned(),
            )
        })?;
    let started = Instant::now();
    let events = &shared.events;
    let progress = |counts: &crate::azure::types::ml::NodeStateCounts| {
        events(&Event::Progress {
            address: address.clone(),
            operation,
            state: format!(
                "{} of {wanted} node(s) usable ({})",
                counts.usable(),
                describe_counts(counts)
            ),
            elapsed: started.elapsed(),
        });
    };
    wait_for_nodes(
        &shared.client,
        &ResourceId::from_raw(id),
        address,
        wanted,
        &progress,
    )
    .await
    .map(drop)
    .map_err(|e| local_error(address, operation, e.to_string()))
}

/// After a key vault's DELETE: purge the soft-deleted vault, so that its name (which the next
/// apply of the same manifest uses again) is free at once. A 404 means there is nothing to purge.
pub(super) async fn purge_vault(shared: &Shared, change: &Change) -> Result<(), ResourceError> {
    let location = change
        .before
        .as_ref()
        .and_then(|b| b.get("location"))
        .and_then(serde_json::Value::as_str);
    let Some(location) = location else {
        return Ok(());
    };
    let deleted = ResourceId::from_raw(format!(
        "/subscriptions/{}/providers/Microsoft.KeyVault/locations/{location}/deletedVaults/{}",
        shared.subscription, change.name
    ));
    match shared
        .client
        .post_action::<serde_json::Value>(
            &deleted,
            "purge",
            &[],
            None,
            crate::azure::Idempotency::Idempotent,
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.status() == Some(404) => Ok(()),
        Err(e) => Err(local_error(
            &change.address,
            Operation::Delete,
            format!(
                "the key vault was deleted but could not be purged ({e}); its name stays reserved \
                 for 7 days: purge it with `az keyvault purge --name {}`",
                change.name
            ),
        )),
    }
}
