//! Azure Machine Learning bodies (Microsoft.MachineLearningServices 2024-10-01): workspaces
//! (`workspaceRP.json` `Workspace`) and AmlCompute clusters (`machineLearningServices.json`
//! `ComputeResource` with the `AmlCompute` discriminator, and its PATCH `ClusterUpdateParameters`).
//!
//! A compute's node counts (`nodeStateCounts`, `allocationState`, `errors`) are read-only and are
//! what apply, refresh, park and status read; they are never sent.

use serde::{Deserialize, Serialize};

use super::common::Tags;

/// A workspace.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// The workspace's identity: dsinfra asks for a system-assigned one, which the workspace
    /// uses to reach its storage account and key vault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<ManagedIdentity>,
    /// The workspace's SKU (`Basic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<MlSku>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<WorkspaceProperties>,
}

/// `WorkspaceProperties`: the dependent resources are ARM ids, fixed at creation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceProperties {
    /// The display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub friendly_name: Option<String>,
    /// The storage account's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_account: Option<String>,
    /// The key vault's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_vault: Option<String>,
    /// The Application Insights component's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_insights: Option<String>,
    /// The container registry's id (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_registry: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

/// `ManagedServiceIdentity` (common types v3), as far as dsinfra uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedIdentity {
    /// `SystemAssigned`, `UserAssigned`, `SystemAssigned,UserAssigned` or `None`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub principal_id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub tenant_id: Option<String>,
}

impl ManagedIdentity {
    /// A system-assigned identity.
    pub fn system_assigned() -> Self {
        Self {
            kind: "SystemAssigned".to_owned(),
            principal_id: None,
            tenant_id: None,
        }
    }
}

/// `Sku` (common types v3): only `name` is required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MlSku {
    /// e.g. `Basic`.
    pub name: String,
    /// e.g. `Basic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
}

/// A compute in its ARM envelope (`ComputeResource`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComputeResource {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Region: where the workspace is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// The compute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Compute>,
}

/// `Compute` with the `AmlCompute` discriminator: the only compute type dsinfra manages.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compute {
    /// `AmlCompute`.
    pub compute_type: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Read-only: `Creating`, `Updating`, `Succeeded`, `Failed`, ...
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
    /// Read-only: errors of the compute's provisioning.
    #[serde(default, skip_serializing)]
    pub provisioning_errors: Option<Vec<ArmErrorResponse>>,
    /// The AmlCompute properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<AmlComputeProperties>,
}

/// The discriminator value of an AmlCompute cluster.
pub const AML_COMPUTE: &str = "AmlCompute";

/// `AmlComputeProperties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmlComputeProperties {
    /// The VM size of every node (`Standard_ND40rs_v2`; Azure may answer upper-cased).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_size: Option<String>,
    /// `Dedicated` or `LowPriority`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_priority: Option<String>,
    /// The node count bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_settings: Option<ScaleSettings>,
    /// The admin user every node gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_account_credentials: Option<UserAccountCredentials>,
    /// The subnet the nodes join.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<MlResourceId>,
    /// `Enabled`: the SSH port of every node is reachable (dsinfra runs steps over it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_login_port_public_access: Option<String>,
    /// Read-only: `Steady` or `Resizing`.
    #[serde(default, skip_serializing)]
    pub allocation_state: Option<String>,
    /// Read-only: what went wrong while resizing (quota, capacity, a bad subnet).
    #[serde(default, skip_serializing)]
    pub errors: Option<Vec<ArmErrorResponse>>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub current_node_count: Option<i32>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub target_node_count: Option<i32>,
    /// Read-only: nodes per state.
    #[serde(default, skip_serializing)]
    pub node_state_counts: Option<NodeStateCounts>,
}

/// `ScaleSettings`: dsinfra sets min = max (a fixed-size cluster, so autoscaling never takes a
/// node and its scratch away).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSettings {
    /// Max nodes (required).
    pub max_node_count: i32,
    /// Min nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_node_count: Option<i32>,
    /// ISO 8601 duration, `PT120S`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_idle_time_before_scale_down: Option<String>,
}

impl ScaleSettings {
    /// A fixed size of `count` nodes, released after `idle_seconds` idle (moot at a fixed size
    /// but part of what the cluster was asked for).
    pub fn fixed(count: i32, idle_seconds: Option<i64>) -> Self {
        Self {
            max_node_count: count,
            min_node_count: Some(count),
            node_idle_time_before_scale_down: idle_seconds.map(|s| format!("PT{s}S")),
        }
    }
}

/// `UserAccountCredentials`: the SSH public key is not a secret, but the spec marks it
/// `x-ms-secret`, so Azure never returns it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserAccountCredentials {
    /// The admin user's name.
    pub admin_user_name: String,
    /// Its SSH public key (OpenSSH one-line form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_user_ssh_public_key: Option<String>,
}

/// `ResourceId` (ML's own reference shape, `{"id": ...}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MlResourceId {
    /// The referenced resource's id.
    pub id: String,
}

/// `NodeStateCounts`: how many nodes are in each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStateCounts {
    /// Idle: allocated and usable.
    #[serde(default)]
    pub idle_node_count: i32,
    /// Running a job: usable.
    #[serde(default)]
    pub running_node_count: i32,
    /// Being prepared.
    #[serde(default)]
    pub preparing_node_count: i32,
    /// Unusable (a hardware or image failure).
    #[serde(default)]
    pub unusable_node_count: i32,
    /// Leaving the cluster.
    #[serde(default)]
    pub leaving_node_count: i32,
    /// Taken back by Azure (low priority).
    #[serde(default)]
    pub preempted_node_count: i32,
}

impl NodeStateCounts {
    /// Nodes that can run work: idle or running.
    pub fn usable(&self) -> i32 {
        self.idle_node_count + self.running_node_count
    }

    /// Nodes that exist in any state.
    pub fn total(&self) -> i32 {
        self.usable()
            + self.preparing_node_count
            + self.unusable_node_count
            + self.leaving_node_count
            + self.preempted_node_count
    }
}

/// `ErrorResponse` (common types v3): `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ArmErrorResponse {
    /// The error.
    #[serde(default)]
    pub error: Option<ArmErrorDetail>,
}

/// `ErrorDetail` (common types v3), the part dsinfra shows.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ArmErrorDetail {
    /// ARM's code.
    #[serde(default)]
    pub code: Option<String>,
    /// ARM's message.
    #[serde(default)]
    pub message: Option<String>,
}

impl std::fmt::Display for ArmErrorResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let detail = self.error.clone().unwrap_or_default();
        match (detail.code, detail.message) {
            (Some(code), Some(message)) => write!(f, "{code}: {message}"),
            (Some(text), None) | (None, Some(text)) => f.write_str(&text),
            (None, None) => f.write_str("an unnamed error"),
        }
    }
}

/// `ClusterUpdateParameters`: the compute's PATCH, which changes only its scale settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterUpdateParameters {
    /// `ClusterUpdateProperties` (flattened by the SDKs, nested on the wire).
    pub properties: ClusterUpdateProperties,
}

/// `ClusterUpdateProperties`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterUpdateProperties {
    /// `ScaleSettingsInformation`.
    pub properties: ScaleSettingsInformation,
}

/// `ScaleSettingsInformation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSettingsInformation {
    /// The new scale settings.
    pub scale_settings: ScaleSettings,
}

impl ClusterUpdateParameters {
    /// The PATCH that sets `scale`.
    pub fn scale(scale: ScaleSettings) -> Self {
        Self {
            properties: ClusterUpdateProperties {
                properties: ScaleSettingsInformation {
                    scale_settings: scale,
                },
            },
        }
    }
}

/// Seconds of an ISO 8601 duration as Azure writes idle times (`PT120S`, `PT5M`, `PT1H30M`);
/// `None` for anything with days or fractions, which dsinfra never sends.
pub fn duration_seconds(text: &str) -> Option<i64> {
    let rest = text.strip_prefix("PT")?;
    let mut total = 0i64;
    let mut number = String::new();
    for c in rest.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: i64 = number.parse().ok()?;
        number.clear();
        total += n * match c {
            'H' => 3600,
            'M' => 60,
            'S' => 1,
            _ => return None,
        };
    }
    number.is_empty().then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::{request_body, response_body};

    const DIR: &str = "machinelearningservices/resource-manager/Microsoft.MachineLearningServices/stable/2024-10-01/examples/";

    #[test]
    fn a_fixed_size_compute_matches_the_spec_example() {
        let file = format!("{DIR}Compute/createOrUpdate/AmlCompute.json");
        let expected = request_body(&file, "parameters");
        let body = ComputeResource {
            location: Some("eastus".into()),
            properties: Some(Compute {
                compute_type: AML_COMPUTE.into(),
                description: Some("some compute".into()),
                properties: Some(AmlComputeProperties {
                    scale_settings: Some(ScaleSettings {
                        max_node_count: 4,
                        min_node_count: Some(4),
                        node_idle_time_before_scale_down: Some("PT5M".into()),
                    }),
                    ..AmlComputeProperties::default()
                }),
                ..Compute::default()
            }),
            ..ComputeResource::default()
        };
        assert_eq!(serde_json::to_value(&body).expect("serialises"), expected);
        // The response reads, node counts and all.
        let back: ComputeResource =
            serde_json::from_value(response_body(&file, "200")).expect("the response reads");
        let props = back
            .properties
            .and_then(|p| p.properties)
            .expect("AmlCompute properties");
        assert_eq!(props.allocation_state.as_deref(), Some("Resizing"));
        assert_eq!(props.node_state_counts, Some(NodeStateCounts::default()));
    }

    #[test]
    fn the_scale_patch_matches_the_spec_example() {
        let file = format!("{DIR}Compute/patch.json");
        let patch = ClusterUpdateParameters::scale(ScaleSettings {
            max_node_count: 4,
            min_node_count: Some(4),
            node_idle_time_before_scale_down: Some("PT5M".into()),
        });
        assert_eq!(
            serde_json::to_value(&patch).expect("serialises"),
            request_body(&file, "parameters")
        );
    }

    #[test]
    fn the_workspace_example_response_reads() {
        let file = format!("{DIR}Workspace/create.json");
        let back: Workspace =
            serde_json::from_value(response_body(&file, "200")).expect("the response reads");
        let props = back.properties.expect("properties");
        assert!(
            props
                .key_vault
                .as_deref()
                .is_some_and(|k| k.ends_with("/vaults/testkv"))
        );
        assert_eq!(props.friendly_name.as_deref(), Some("HelloName"));
    }

    #[test]
    fn idle_times_read_as_azure_writes_them() {
        assert_eq!(duration_seconds("PT120S"), Some(120));
        assert_eq!(duration_seconds("PT5M"), Some(300));
        assert_eq!(duration_seconds("PT1H30M15S"), Some(5415));
        assert_eq!(duration_seconds("P1D"), None);
        assert_eq!(duration_seconds("PT5"), None);
    }

    #[test]
    fn usable_nodes_are_idle_or_running() {
        let counts = NodeStateCounts {
            idle_node_count: 2,
            running_node_count: 1,
            preparing_node_count: 1,
            unusable_node_count: 1,
            ..NodeStateCounts::default()
        };
        assert_eq!((counts.usable(), counts.total()), (3, 5));
    }
}
