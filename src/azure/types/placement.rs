//! Proximity placement groups (Microsoft.Compute 2024-11-01): keep a cluster's VMs close for
//! low latency. Their PUT is synchronous (200/201), their DELETE answers 200 only.

use serde::{Deserialize, Serialize};

use super::common::{SubResource, Tags};
use super::compute::InstanceViewStatus;

/// A proximity placement group.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProximityPlacementGroup {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Region (required).
    pub location: String,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<ProximityPlacementGroupProperties>,
}

/// `ProximityPlacementGroupProperties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProximityPlacementGroupProperties {
    /// Standard (Ultra is reserved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proximity_placement_group_type: Option<ProximityPlacementGroupType>,
    /// The VM sizes meant to go in, which lets Azure pick a host that has them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<PlacementIntent>,
    /// Read-only: member VMs.
    #[serde(default, skip_serializing)]
    pub virtual_machines: Option<Vec<SubResource>>,
    /// Returned with `includeColocationStatus=true`; never sent.
    #[serde(default, skip_serializing)]
    pub colocation_status: Option<InstanceViewStatus>,
}

/// `ProximityPlacementGroupType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProximityPlacementGroupType {
    /// Co-locate within a region or zone.
    Standard,
    /// Reserved for future use.
    Ultra,
}

/// The PPG's `intent`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementIntent {
    /// VM sizes.
    #[serde(default)]
    pub vm_sizes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::{request_body, response_body};

    const DIR: &str =
        "compute/resource-manager/Microsoft.Compute/ComputeRP/stable/2024-11-01/examples/";

    #[test]
    fn placement_group_matches_the_spec_example() {
        let file = format!(
            "{DIR}proximityPlacementGroupExamples/ProximityPlacementGroup_CreateOrUpdate.json"
        );
        let ppg = ProximityPlacementGroup {
            location: "westus".into(),
            zones: Some(vec!["1".into()]),
            properties: Some(ProximityPlacementGroupProperties {
                proximity_placement_group_type: Some(ProximityPlacementGroupType::Standard),
                intent: Some(PlacementIntent {
                    vm_sizes: vec!["Basic_A0".into(), "Basic_A2".into()],
                }),
                ..ProximityPlacementGroupProperties::default()
            }),
            ..ProximityPlacementGroup::default()
        };
        assert_eq!(
            serde_json::to_value(&ppg).expect("serialises"),
            request_body(&file, "parameters")
        );
        let back: ProximityPlacementGroup = serde_json::from_value(response_body(&file, "200"))
            .expect("the example response reads");
        assert_eq!(back.name.as_deref(), Some("myProximityPlacementGroup"));
    }
}
