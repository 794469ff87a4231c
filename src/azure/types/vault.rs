//! Key vaults (Microsoft.KeyVault 2023-07-01, `Vault`): the vault an Azure Machine Learning
//! workspace keeps its secrets in. No official spec of this provider is in `shared/azure-specs`;
//! the body follows Azure's REST reference (Vaults - Create Or Update).
//!
//! A vault's `tenantId` is the Microsoft Entra tenant that authenticates its requests: the
//! subscription's tenant, which the engine reads from `GET /subscriptions/{id}` and passes in.

use serde::{Deserialize, Serialize};

use super::common::Tags;

/// A vault (`VaultCreateOrUpdateParameters` for the PUT, `Vault` for reads).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Vault {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Region (required).
    pub location: String,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Properties (required).
    pub properties: VaultProperties,
}

/// `VaultProperties`: `tenantId` and `sku` are required.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VaultProperties {
    /// The tenant that authenticates requests to the vault.
    pub tenant_id: String,
    /// The SKU.
    pub sku: VaultSku,
    /// Access policies: none from dsinfra; the workspace's identity is granted its own when
    /// the workspace is created.
    #[serde(default)]
    pub access_policies: Vec<serde_json::Value>,
    /// Soft delete cannot be turned off (Azure made it mandatory); stated for clarity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_soft_delete: Option<bool>,
    /// Days a deleted vault is kept (7 to 90): dsinfra asks for the least, so that a destroyed
    /// vault's name is reserved as briefly as Azure allows (decision 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_delete_retention_in_days: Option<i32>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
    /// Read-only: `https://{name}.vault.azure.net/`.
    #[serde(default, skip_serializing)]
    pub vault_uri: Option<String>,
}

/// `Sku` (key vault): family `A`, name `standard` or `premium`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VaultSku {
    /// Always `A`.
    pub family: String,
    /// `standard` or `premium`.
    pub name: String,
}

impl VaultSku {
    /// The SKU called `name` (family A, the only family).
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            family: "A".to_owned(),
            name: name.into(),
        }
    }
}

/// The fewest days Azure keeps a deleted vault (and reserves its name).
pub const MIN_SOFT_DELETE_DAYS: i32 = 7;
