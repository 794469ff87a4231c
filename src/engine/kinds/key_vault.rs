//! The key vault driver (an Azure Machine Learning workspace's vault): its body names the
//! subscription's tenant, and a deleted vault is purged at once, so that its name (which the
//! next apply of the same manifest uses again) is free instead of reserved for 7 days.

use futures::future::BoxFuture;
use serde_json::Value;

use super::{Applying, Driver};
use crate::azure::{Idempotency, ResourceId};
use crate::engine::bodies::{Body, BodyError, Builder};
use crate::plan::Change;

/// The key vault driver.
pub(crate) struct KeyVault;

/// The one key vault driver.
pub(crate) static DRIVER: KeyVault = KeyVault;

impl Driver for KeyVault {
    fn body(&self, b: &Builder<'_>) -> Result<Option<Body>, BodyError> {
        Ok(Some(Body::KeyVault(b.key_vault()?)))
    }

    fn needs_tenant(&self) -> bool {
        true
    }

    /// Purge the soft-deleted vault. A 404 means there is nothing to purge.
    fn after_delete<'a>(
        &'a self,
        at: Applying<'a>,
        change: &'a Change,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let location = change
                .before
                .as_ref()
                .and_then(|b| b.get("location"))
                .and_then(Value::as_str);
            let Some(location) = location else {
                return Ok(());
            };
            let deleted = ResourceId::from_raw(format!(
                "/subscriptions/{}/providers/Microsoft.KeyVault/locations/{location}/deletedVaults/{}",
                at.subscription, change.name
            ));
            match at
                .client
                .post_action::<Value>(&deleted, "purge", &[], None, Idempotency::Idempotent)
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if e.status() == Some(404) => Ok(()),
                Err(e) => Err(format!(
                    "the key vault was deleted but could not be purged ({e}); its name stays \
                     reserved for 7 days: purge it with `az keyvault purge --name {}`",
                    change.name
                )),
            }
        })
    }
}
