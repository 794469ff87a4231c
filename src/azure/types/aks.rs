//! AKS bodies (Microsoft.ContainerService 2025-10-01, `managedClusters.json`): a managed cluster
//! (`ManagedCluster`, its System pool in `agentPoolProfiles`) and an agent pool (`AgentPool`).
//!
//! dsinfra sends a cluster with exactly one pool, its System pool, and every other pool as its
//! own `agentPools/{name}` resource (as Terraform's azurerm provider does): a pool then has its
//! own place in the plan, its own price line, and park scales it alone. Read-only values
//! (`provisioningState`, `powerState`, `currentKubernetesVersion`, `fqdn`,
//! `nodeResourceGroup`) are read back, never sent.

use serde::{Deserialize, Serialize};

use super::common::Tags;

/// A managed cluster.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedCluster {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// The region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// The cluster's identity (`SystemAssigned`: AKS makes one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<ClusterIdentity>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<ManagedClusterProperties>,
}

/// `ManagedClusterIdentity` (only its type is sent).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterIdentity {
    /// `SystemAssigned`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub principal_id: Option<String>,
}

/// `ManagedClusterAADProfile`: AKS-managed Entra ID, authorization by Azure RBAC.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AadProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<bool>,
    #[serde(
        default,
        rename = "enableAzureRBAC",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_azure_rbac: Option<bool>,
}

/// `ManagedClusterProperties`, as far as dsinfra uses it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterProperties {
    /// `<major.minor>` (AKS picks the newest patch) or `<major.minor.patch>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Read-only: the patch version the control plane runs.
    #[serde(default, skip_serializing)]
    pub current_kubernetes_version: Option<String>,
    /// The API server's DNS prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_prefix: Option<String>,
    /// Pools sent with the cluster (dsinfra: the System pool only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_pool_profiles: Vec<AgentPoolProfile>,
    /// Who may reach the API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_access_profile: Option<ApiServerAccessProfile>,
    /// The storage CSI drivers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_profile: Option<StorageProfile>,
    /// Entra ID (AAD) integration: users sign in with Entra tokens, authorized by Azure RBAC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aad_profile: Option<AadProfile>,
    /// With Entra ID: no static local credential (the kubeconfig signs in through Entra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_local_accounts: Option<bool>,
    /// Kubernetes RBAC (AKS's default is on).
    #[serde(
        default,
        rename = "enableRBAC",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_rbac: Option<bool>,
    /// The group AKS keeps the nodes in (named by AKS when not sent).
    #[serde(default, skip_serializing)]
    pub node_resource_group: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub fqdn: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
    /// Read-only here (dsinfra stops and starts a cluster by its actions).
    #[serde(default, skip_serializing)]
    pub power_state: Option<PowerState>,
}

/// `PowerState`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PowerState {
    /// `Running` or `Stopped`.
    #[serde(default)]
    pub code: Option<String>,
}

/// `ManagedClusterAPIServerAccessProfile`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServerAccessProfile {
    /// CIDR ranges that may reach the API server.
    #[serde(
        default,
        rename = "authorizedIPRanges",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub authorized_ip_ranges: Vec<String>,
}

/// `ManagedClusterStorageProfile`, its Blob CSI driver.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfile {
    /// `blobCSIDriver`.
    #[serde(
        default,
        rename = "blobCSIDriver",
        skip_serializing_if = "Option::is_none"
    )]
    pub blob_csi_driver: Option<Enabled>,
}

/// `{ "enabled": bool }`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Enabled {
    /// Whether it is on.
    pub enabled: bool,
}

/// `ManagedClusterAgentPoolProfile`: a pool's properties and its name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentPoolProfile {
    /// The pool's name.
    pub name: String,
    /// Its properties.
    #[serde(flatten)]
    pub properties: AgentPoolProperties,
}

/// An agent pool (`AgentPool`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentPool {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<AgentPoolProperties>,
}

/// `ManagedClusterAgentPoolProfileProperties`, as far as dsinfra uses it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentPoolProperties {
    /// Nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// The nodes' size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_size: Option<String>,
    /// `System` or `User`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// `Linux`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_type: Option<String>,
    /// `VirtualMachineScaleSets`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub pool_type: Option<String>,
    /// Taints, `key=value:Effect`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_taints: Vec<String>,
    /// Node labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_labels: Option<Tags>,
    /// Whether AKS installs the GPU driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_profile: Option<GpuProfile>,
    /// Tags of the pool's scale set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
    /// Read-only here.
    #[serde(default, skip_serializing)]
    pub power_state: Option<PowerState>,
}

/// `GPUProfile`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GpuProfile {
    /// `Install` (AKS's default) or `None`.
    pub driver: String,
}

/// `CredentialResults` of `listClusterUserCredential`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CredentialResults {
    /// The kubeconfigs (base64).
    #[serde(default)]
    pub kubeconfigs: Vec<CredentialResult>,
}

/// One kubeconfig.
#[derive(Clone, Default, Deserialize)]
pub struct CredentialResult {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// The kubeconfig, base64: a credential, never logged.
    #[serde(default)]
    pub value: String,
}

impl std::fmt::Debug for CredentialResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialResult")
            .field("name", &self.name)
            .field("value", &"(secret)")
            .finish()
    }
}

/// `KubernetesVersionListResult`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct KubernetesVersions {
    /// One entry per minor.
    #[serde(default)]
    pub values: Vec<KubernetesVersion>,
}

/// One minor the region offers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesVersion {
    /// `1.33`.
    #[serde(default)]
    pub version: String,
    /// Whether it is the region's default.
    #[serde(default)]
    pub is_default: bool,
    /// Its patches, by version.
    #[serde(default)]
    pub patch_versions: std::collections::BTreeMap<String, serde_json::Value>,
}

impl KubernetesVersions {
    /// Whether `asked` (`1.33` or `1.33.3`) is one the region offers.
    pub fn offers(&self, asked: &str) -> bool {
        self.values
            .iter()
            .any(|v| v.version == asked || v.patch_versions.contains_key(asked))
    }

    /// Every minor and patch offered, for a message.
    pub fn listed(&self) -> Vec<String> {
        self.values.iter().map(|v| v.version.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::{request_body, response_body};

    const EXAMPLES: &str = "containerservice/resource-manager/Microsoft.ContainerService/aks/stable/2025-10-01/examples";

    #[test]
    fn the_spec_examples_read_as_these_types() {
        let cluster: ManagedCluster = serde_json::from_value(response_body(
            &format!("{EXAMPLES}/ManagedClustersGet.json"),
            "200",
        ))
        .expect("a cluster");
        let props = cluster.properties.expect("properties");
        assert_eq!(props.agent_pool_profiles[0].name, "nodepool1");
        assert_eq!(props.agent_pool_profiles[0].properties.count, Some(3));
        assert!(props.node_resource_group.is_some());
        let pool: AgentPool = serde_json::from_value(request_body(
            &format!("{EXAMPLES}/AgentPoolsCreate_Update.json"),
            "parameters",
        ))
        .expect("a pool");
        let pool_props = pool.properties.expect("properties");
        assert_eq!(pool_props.node_taints, ["Key1=Value1:NoSchedule"]);
        assert_eq!(pool_props.mode.as_deref(), Some("User"));
        let versions: KubernetesVersions = serde_json::from_value(response_body(
            &format!("{EXAMPLES}/KubernetesVersions_List.json"),
            "200",
        ))
        .expect("versions");
        assert!(versions.offers("1.24") && versions.offers("1.24.9") && !versions.offers("1.9"));
    }
}
