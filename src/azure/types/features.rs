//! Preview features of a subscription (Microsoft.Features 2021-07-01, `features.json`):
//! Features_Get's `FeatureResult`.

use serde::Deserialize;

/// `FeatureResult`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct FeatureResult {
    /// `Namespace/Name`.
    #[serde(default)]
    pub name: String,
    /// Its state for the subscription.
    #[serde(default)]
    pub properties: FeatureProperties,
}

/// `FeatureProperties`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct FeatureProperties {
    /// `Registered`, `Registering`, `NotRegistered`, `Pending`, `Unregistering`, `Unregistered`.
    #[serde(default)]
    pub state: String,
}

impl FeatureResult {
    /// Registered: what ARM acts on (a registration still pending or in progress is not).
    pub fn registered(&self) -> bool {
        self.properties.state.eq_ignore_ascii_case("Registered")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::response_body;

    #[test]
    fn the_spec_example_reads() {
        let body = response_body(
            "resources/resource-manager/Microsoft.Features/stable/2021-07-01/examples/listProviderFeatures.json",
            "200",
        );
        let features: Vec<FeatureResult> =
            serde_json::from_value(body["value"].clone()).expect("reads");
        assert!(!features.is_empty());
        assert!(features.iter().all(|f| !f.name.is_empty()));
        // The example writes the state in lower case; ARM compares it case-insensitively.
        assert!(features[0].registered() && !features[1].registered());
    }
}
