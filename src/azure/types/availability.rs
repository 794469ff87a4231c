//! Availability sets (Microsoft.Compute 2024-11-01): dsinfra creates one per InfiniBand cluster,
//! because Azure joins VMs into one InfiniBand fabric only when they share an availability set
//! (or a single-placement-group scale set). Their PUT is synchronous (200); their DELETE answers
//! 200 or 204. A VM joins a set only at creation (`properties.availabilitySet` of the VM).

use serde::{Deserialize, Serialize};

use super::common::{SubResource, Tags};
use super::compute::InstanceViewStatus;

/// An availability set.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailabilitySet {
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
    /// `Aligned` for VMs with managed disks (ARM's default is `Classic`, for unmanaged disks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<AvailabilitySetSku>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<AvailabilitySetProperties>,
}

/// The set's `sku` (the spec's common `Sku`; only `name` means anything for a set).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailabilitySetSku {
    /// `Aligned` or `Classic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl AvailabilitySetSku {
    /// The SKU VMs with managed disks need: ARM refuses a managed-disk VM in a `Classic` set.
    pub fn aligned() -> Self {
        Self {
            name: Some("Aligned".to_owned()),
        }
    }
}

/// `AvailabilitySetProperties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailabilitySetProperties {
    /// Fault domains the set's VMs are spread over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_fault_domain_count: Option<i32>,
    /// Update domains planned maintenance walks through one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_update_domain_count: Option<i32>,
    /// The proximity placement group the set is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proximity_placement_group: Option<SubResource>,
    /// The member VMs. ARM fills it in from the VMs that name the set; dsinfra never sends it
    /// (a VM joins the set by its own PUT).
    #[serde(default, skip_serializing)]
    pub virtual_machines: Option<Vec<SubResource>>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub statuses: Option<Vec<InstanceViewStatus>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::{request_body, response_body};

    const DIR: &str =
        "compute/resource-manager/Microsoft.Compute/ComputeRP/stable/2024-11-01/examples/";

    #[test]
    fn availability_set_matches_the_spec_example() {
        let file = format!("{DIR}availabilitySetExamples/AvailabilitySet_Create.json");
        let set = AvailabilitySet {
            location: "westus".into(),
            properties: Some(AvailabilitySetProperties {
                platform_fault_domain_count: Some(2),
                platform_update_domain_count: Some(20),
                ..AvailabilitySetProperties::default()
            }),
            ..AvailabilitySet::default()
        };
        assert_eq!(
            serde_json::to_value(&set).expect("serialises"),
            request_body(&file, "parameters")
        );
        let back: AvailabilitySet = serde_json::from_value(response_body(&file, "200"))
            .expect("the example response reads");
        assert_eq!(back.name.as_deref(), Some("myAvailabilitySet"));
        assert_eq!(
            back.sku,
            Some(AvailabilitySetSku {
                name: Some("Classic".into())
            })
        );
    }

    #[test]
    fn members_are_read_but_never_sent() {
        let set = AvailabilitySet {
            location: "eastus".into(),
            sku: Some(AvailabilitySetSku::aligned()),
            properties: Some(AvailabilitySetProperties {
                platform_fault_domain_count: Some(1),
                virtual_machines: Some(vec![SubResource::new("/vm")]),
                proximity_placement_group: Some(SubResource::new("/ppg")),
                ..AvailabilitySetProperties::default()
            }),
            ..AvailabilitySet::default()
        };
        assert_eq!(
            serde_json::to_value(&set).expect("serialises"),
            serde_json::json!({"location": "eastus", "sku": {"name": "Aligned"},
                "properties": {"platformFaultDomainCount": 1,
                    "proximityPlacementGroup": {"id": "/ppg"}}})
        );
    }
}
