//! Azure public-cloud region names (the `name` ARM uses, not the display name).

/// Every region name dsinfra accepts, sorted.
pub static LOCATIONS: &[&str] = &[
    "australiacentral",
    "australiacentral2",
    "australiaeast",
    "australiasoutheast",
    "austriaeast",
    "belgiumcentral",
    "brazilsouth",
    "brazilsoutheast",
    "canadacentral",
    "canadaeast",
    "centralindia",
    "centralus",
    "chilecentral",
    "denmarkeast",
    "eastasia",
    "eastus",
    "eastus2",
    "francecentral",
    "francesouth",
    "germanynorth",
    "germanywestcentral",
    "indonesiacentral",
    "israelcentral",
    "italynorth",
    "japaneast",
    "japanwest",
    "jioindiacentral",
    "jioindiawest",
    "koreacentral",
    "koreasouth",
    "malaysiawest",
    "mexicocentral",
    "newzealandnorth",
    "northcentralus",
    "northeurope",
    "norwayeast",
    "norwaywest",
    "polandcentral",
    "qatarcentral",
    "southafricanorth",
    "southafricawest",
    "southcentralus",
    "southeastasia",
    "southindia",
    "spaincentral",
    "swedencentral",
    "switzerlandnorth",
    "switzerlandwest",
    "uaecentral",
    "uaenorth",
    "uksouth",
    "ukwest",
    "westcentralus",
    "westeurope",
    "westindia",
    "westus",
    "westus2",
    "westus3",
];

/// Whether `name` is a known region (ARM compares region names case-insensitively and ignores
/// spaces, so `East US` is `eastus`).
pub fn is_known_location(name: &str) -> bool {
    LOCATIONS
        .binary_search(&super::normal_region(name).as_str())
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_region_with_a_price_is_a_known_location() {
        // The price list names where Azure offers sizes; a manifest may use any of them.
        for size in crate::catalog::vm_sizes() {
            for region in crate::catalog::regions_offering(&size.name) {
                assert!(is_known_location(region), "{region} ({})", size.name);
            }
        }
    }

    #[test]
    fn locations_are_sorted_for_binary_search() {
        assert!(LOCATIONS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_known_location("East US"));
        assert!(!is_known_location("moon-1"));
    }
}
