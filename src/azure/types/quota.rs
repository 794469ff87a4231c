//! Compute usages (vCPU quota per family, 2024-11-01) and resource SKUs (availability and
//! restrictions per location and zone, 2021-07-01): what dsinfra checks before asking for a VM.

use serde::Deserialize;

/// One usage counter, e.g. `standardNDSv2Family` cores in a region.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Always `Count`.
    #[serde(default)]
    pub unit: String,
    /// In use now.
    pub current_value: i64,
    /// The approved limit.
    pub limit: i64,
    /// Which counter.
    pub name: UsageName,
}

/// `UsageName`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageName {
    /// e.g. `standardNDSv2Family`, `cores` (total regional).
    #[serde(default)]
    pub value: String,
    /// e.g. `Standard NDSv2 Family vCPUs`.
    #[serde(default)]
    pub localized_value: Option<String>,
}

impl Usage {
    /// How many more units fit under the limit (never negative).
    pub fn available(&self) -> i64 {
        (self.limit - self.current_value).max(0)
    }
}

/// Finds the counter for `family` (case-insensitive, as ARM compares).
pub fn usage_for<'a>(usages: &'a [Usage], family: &str) -> Option<&'a Usage> {
    usages
        .iter()
        .find(|u| u.name.value.eq_ignore_ascii_case(family))
}

/// One resource SKU (a VM size, a disk type, ...).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSku {
    /// e.g. `virtualMachines`.
    #[serde(default)]
    pub resource_type: Option<String>,
    /// e.g. `Standard_ND40rs_v2`.
    #[serde(default)]
    pub name: Option<String>,
    /// e.g. `Standard`.
    #[serde(default)]
    pub tier: Option<String>,
    /// e.g. `ND40rs_v2`.
    #[serde(default)]
    pub size: Option<String>,
    /// The quota family, e.g. `standardNDSv2Family`.
    #[serde(default)]
    pub family: Option<String>,
    /// Regions offering it.
    #[serde(default)]
    pub locations: Vec<String>,
    /// Zones per region.
    #[serde(default)]
    pub location_info: Vec<ResourceSkuLocationInfo>,
    /// vCPUs, MemoryGB, GPUs, ...
    #[serde(default)]
    pub capabilities: Vec<ResourceSkuCapability>,
    /// Where the subscription may not use it.
    #[serde(default)]
    pub restrictions: Vec<ResourceSkuRestriction>,
}

/// `ResourceSkuLocationInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSkuLocationInfo {
    /// Region.
    #[serde(default)]
    pub location: String,
    /// Zones offering the SKU.
    #[serde(default)]
    pub zones: Vec<String>,
}

/// `ResourceSkuCapabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct ResourceSkuCapability {
    /// e.g. `vCPUs`.
    #[serde(default)]
    pub name: String,
    /// e.g. `40`.
    #[serde(default)]
    pub value: String,
}

/// `ResourceSkuRestrictions`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSkuRestriction {
    /// Location or Zone.
    #[serde(rename = "type")]
    pub kind: RestrictionType,
    /// The locations (for Location restrictions) the restriction applies to.
    #[serde(default)]
    pub values: Vec<String>,
    /// Where exactly.
    #[serde(default)]
    pub restriction_info: Option<ResourceSkuRestrictionInfo>,
    /// Why.
    #[serde(default)]
    pub reason_code: Option<RestrictionReason>,
}

/// `ResourceSkuRestrictionsType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum RestrictionType {
    /// The whole region.
    Location,
    /// Some zones.
    Zone,
}

/// `ResourceSkuRestrictionsReasonCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum RestrictionReason {
    /// The subscription's offer excludes it.
    QuotaId,
    /// Not available to this subscription.
    NotAvailableForSubscription,
}

/// `ResourceSkuRestrictionInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct ResourceSkuRestrictionInfo {
    /// Restricted regions.
    #[serde(default)]
    pub locations: Vec<String>,
    /// Restricted zones.
    #[serde(default)]
    pub zones: Vec<String>,
}

/// Whether a SKU can be used in a region, and in which zones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkuAvailability {
    /// Usable; the zones that offer it and are not restricted (empty: no zones there).
    Available {
        /// Usable zones.
        zones: Vec<String>,
    },
    /// The region does not offer the SKU at all.
    NotOffered,
    /// Offered but restricted for this subscription in the whole region.
    Restricted {
        /// Why, when ARM says.
        reason: Option<RestrictionReason>,
    },
}

impl ResourceSku {
    /// A capability's value, e.g. `capability("vCPUs") == Some("40")`.
    pub fn capability(&self, name: &str) -> Option<&str> {
        self.capabilities
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .map(|c| c.value.as_str())
    }

    /// Whether the SKU can be used in `location` (case-insensitive), and in which zones.
    pub fn availability(&self, location: &str) -> SkuAvailability {
        let same = |l: &String| l.eq_ignore_ascii_case(location);
        let info = self.location_info.iter().find(|i| same(&i.location));
        if !self.locations.iter().any(same) && info.is_none() {
            return SkuAvailability::NotOffered;
        }
        let mut zones: Vec<String> = info.map(|i| i.zones.clone()).unwrap_or_default();
        for restriction in &self.restrictions {
            let restricted_here = restriction.values.iter().any(same)
                || restriction
                    .restriction_info
                    .as_ref()
                    .is_some_and(|i| i.locations.iter().any(same));
            if !restricted_here {
                continue;
            }
            match restriction.kind {
                RestrictionType::Location => {
                    return SkuAvailability::Restricted {
                        reason: restriction.reason_code,
                    };
                }
                RestrictionType::Zone => {
                    let blocked = restriction
                        .restriction_info
                        .as_ref()
                        .map(|i| i.zones.clone())
                        .unwrap_or_default();
                    zones.retain(|z| !blocked.contains(z));
                }
            }
        }
        zones.sort();
        SkuAvailability::Available { zones }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::response_body;
    use serde_json::json;

    #[test]
    fn usage_example_reads() {
        let body = response_body(
            "compute/resource-manager/Microsoft.Compute/ComputeRP/stable/2024-11-01/examples/computeRPCommonExamples/Usage_List_MaximumSet_Gen.json",
            "200",
        );
        let usages: Vec<Usage> =
            serde_json::from_value(body["value"].clone()).expect("the example usages read");
        assert_eq!(usages[0].available(), 2);
        assert!(usage_for(&usages, "AAAAAAAAAAAAAAAAAA").is_some());
        assert!(usage_for(&usages, "standardNDSv2Family").is_none());
    }

    #[test]
    fn sku_example_reads_with_zones() {
        let body = response_body(
            "compute/resource-manager/Microsoft.Compute/Skus/stable/2021-07-01/examples/skus/ListAvailableResourceSkus.json",
            "200",
        );
        let skus: Vec<ResourceSku> =
            serde_json::from_value(body["value"].clone()).expect("the example SKUs read");
        assert_eq!(skus[0].name.as_deref(), Some("Standard_A0"));
        assert_eq!(skus[0].capability("vcpus"), Some("1"));
        assert_eq!(
            skus[0].availability("WestUS"),
            SkuAvailability::Available {
                zones: vec!["1".into(), "2".into()]
            }
        );
        assert_eq!(skus[0].availability("eastus"), SkuAvailability::NotOffered);
    }

    #[test]
    fn restrictions_by_location_and_zone() {
        let sku: ResourceSku = serde_json::from_value(json!({
            "name": "Standard_ND40rs_v2", "family": "standardNDSv2Family",
            "locations": ["eastus", "westeurope"],
            "locationInfo": [{"location": "eastus", "zones": ["1", "2", "3"]},
                             {"location": "westeurope", "zones": ["1"]}],
            "restrictions": [
                {"type": "Zone", "values": ["eastus"], "reasonCode": "NotAvailableForSubscription",
                 "restrictionInfo": {"locations": ["eastus"], "zones": ["2"]}},
                {"type": "Location", "values": ["westeurope"], "reasonCode": "QuotaId",
                 "restrictionInfo": {"locations": ["westeurope"]}}
            ]
        }))
        .expect("reads");
        assert_eq!(
            sku.availability("eastus"),
            SkuAvailability::Available {
                zones: vec!["1".into(), "3".into()]
            }
        );
        assert_eq!(
            sku.availability("westeurope"),
            SkuAvailability::Restricted {
                reason: Some(RestrictionReason::QuotaId)
            }
        );
    }
}
