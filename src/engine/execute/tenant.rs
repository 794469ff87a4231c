//! The subscription's tenant, which a key vault's body names (`engine::kinds::key_vault`): read
//! once per run from `GET /subscriptions/{id}` (any credential works; a token's claims would
//! not say it for every credential type).

use super::{Shared, local_error};
use crate::addr::Address;
use crate::engine::advice::ResourceError;
use crate::engine::events::Operation;

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
