//! Resource groups (Microsoft.Resources 2025-04-01, `resources.json` `ResourceGroup`).

use serde::{Deserialize, Serialize};

use super::common::Tags;

/// A resource group. `location` is required; `properties` holds only the read-only
/// provisioningState, so it is never sent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only (the name comes from the URL).
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only: `Microsoft.Resources/resourceGroups`.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Region, e.g. `eastus`.
    pub location: String,
    /// The id of the resource that manages this group, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub properties: Option<ResourceGroupProperties>,
}

/// The group's read-only properties.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroupProperties {
    /// `Succeeded`, or `Deleting` while a delete runs.
    #[serde(default)]
    pub provisioning_state: Option<String>,
}

impl ResourceGroup {
    /// A group to create in `location`.
    pub fn new(location: impl Into<String>, tags: Option<Tags>) -> Self {
        Self {
            location: location.into(),
            tags,
            ..Self::default()
        }
    }
}

/// A resource provider as the subscription sees it (`resources.json` `Provider`): read only,
/// dsinfra reads it to learn whether the subscription is registered for a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    /// The namespace in ARM's spelling, e.g. `Microsoft.DevTestLab`.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `Registered`, `NotRegistered`, `Registering` or `Unregistering` (ARM documents no closed
    /// set, so it stays a string).
    #[serde(default)]
    pub registration_state: Option<String>,
}

impl Provider {
    /// Whether resources of the namespace can be used now.
    pub fn is_registered(&self) -> bool {
        self.registration_state
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("Registered"))
    }
}

/// A subscription as `GET /subscriptions/{id}` answers (the Subscriptions API): read only,
/// dsinfra reads it to learn the subscription's tenant (a key vault's `tenantId`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    /// The subscription GUID.
    #[serde(default)]
    pub subscription_id: Option<String>,
    /// The Microsoft Entra tenant the subscription belongs to.
    #[serde(default)]
    pub tenant_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::{request_body, response_body};

    const EXAMPLE: &str = "resources/resource-manager/Microsoft.Resources/stable/2025-04-01/examples/CreateResourceGroup.json";

    #[test]
    fn a_provider_reads_its_registration_state() {
        let provider: Provider = serde_json::from_value(serde_json::json!({
            "id": "/subscriptions/s/providers/Microsoft.DevTestLab",
            "namespace": "Microsoft.DevTestLab",
            "registrationState": "NotRegistered",
            "resourceTypes": [],
        }))
        .expect("reads");
        assert_eq!(provider.namespace.as_deref(), Some("Microsoft.DevTestLab"));
        assert!(!provider.is_registered());
        let registered = Provider {
            registration_state: Some("Registered".into()),
            ..Provider::default()
        };
        assert!(registered.is_registered());
    }

    #[test]
    fn create_body_matches_the_spec_example() {
        let body = serde_json::to_value(ResourceGroup::new("eastus", None)).expect("serialises");
        assert_eq!(body, request_body(EXAMPLE, "parameters"));
    }

    #[test]
    fn response_reads_and_read_only_fields_are_not_sent_back() {
        let group: ResourceGroup = serde_json::from_value(response_body(EXAMPLE, "201"))
            .expect("the example response reads");
        assert_eq!(group.name.as_deref(), Some("my-resource-group"));
        assert_eq!(
            group
                .properties
                .and_then(|p| p.provisioning_state)
                .as_deref(),
            Some("Succeeded")
        );
        let resent = serde_json::to_value(ResourceGroup {
            id: Some("/subscriptions/x".into()),
            properties: Some(ResourceGroupProperties {
                provisioning_state: Some("Succeeded".into()),
            }),
            ..ResourceGroup::new("eastus", None)
        })
        .expect("serialises");
        assert_eq!(resent, serde_json::json!({"location": "eastus"}));
    }
}
