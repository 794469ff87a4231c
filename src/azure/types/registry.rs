//! Container registries (Microsoft.ContainerRegistry 2023-07-01, `Registry`): an Azure Machine
//! Learning workspace's optional image registry. No official spec of this provider is in
//! `shared/azure-specs`; the body follows Azure's REST reference (Registries - Create).

use serde::{Deserialize, Serialize};

use super::common::Tags;

/// A registry.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registry {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Region (required).
    pub location: String,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// The SKU (required).
    pub sku: RegistrySku,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<RegistryProperties>,
}

/// `Sku` (registry): `Basic`, `Standard` or `Premium`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RegistrySku {
    /// The SKU's name.
    pub name: String,
}

/// `RegistryProperties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryProperties {
    /// The admin user stays off: the workspace reaches the registry with its identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_user_enabled: Option<bool>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
    /// Read-only: `{name}.azurecr.io`.
    #[serde(default, skip_serializing)]
    pub login_server: Option<String>,
}
