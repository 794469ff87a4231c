//! ARM resource ids, built from their parts so no call site formats paths by hand.
//!
//! An id is also the request path (ARM resource ids are paths without host or api-version), so
//! the same value addresses the resource in requests and refers to it from other bodies (a NIC's
//! subnet, a VM's NIC).

use std::fmt;

use serde::{Deserialize, Serialize};

/// An ARM resource id such as
/// `/subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{vm}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResourceId(String);

impl ResourceId {
    /// Wraps an id received from ARM or read from state.
    pub fn from_raw(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// `/subscriptions/{subscription}`.
    pub fn subscription(subscription_id: &str) -> Self {
        Self(format!("/subscriptions/{subscription_id}"))
    }

    /// `/subscriptions/{subscription}/resourceGroups/{group}`.
    pub fn resource_group(subscription_id: &str, resource_group: &str) -> Self {
        Self(format!(
            "/subscriptions/{subscription_id}/resourceGroups/{resource_group}"
        ))
    }

    /// A top-level resource of a provider under this scope:
    /// `{self}/providers/{namespace}/{kind}/{name}`.
    #[must_use]
    pub fn provider(&self, namespace: &str, kind: &str, name: &str) -> Self {
        Self(format!("{}/providers/{namespace}/{kind}/{name}", self.0))
    }

    /// A child resource: `{self}/{kind}/{name}` (subnets, containers, shares).
    #[must_use]
    pub fn child(&self, kind: &str, name: &str) -> Self {
        Self(format!("{}/{kind}/{name}", self.0))
    }

    /// A path below this one that is not a resource, e.g. an action (`deallocate`) or a
    /// collection (`usages`).
    #[must_use]
    pub fn join(&self, segment: &str) -> Self {
        Self(format!("{}/{segment}", self.0))
    }

    /// The id as a path.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The last segment, the resource's name.
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or_default()
    }

    /// The resource group named in the id, if any.
    pub fn resource_group_name(&self) -> Option<&str> {
        let mut segments = self.0.split('/');
        segments
            .by_ref()
            .find(|s| s.eq_ignore_ascii_case("resourceGroups"))?;
        segments.next()
    }

    /// Whether the id names a resource group itself (its DELETE cascades, its 404 is
    /// ResourceGroupNotFound).
    pub fn is_resource_group(&self) -> bool {
        let segments: Vec<&str> = self.0.split('/').filter(|s| !s.is_empty()).collect();
        segments.len() == 4 && segments[2].eq_ignore_ascii_case("resourceGroups")
    }

    // Builders for every type dsinfra manages, so provider names are spelled once.

    /// A virtual network.
    pub fn virtual_network(subscription_id: &str, resource_group: &str, name: &str) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.Network",
            "virtualNetworks",
            name,
        )
    }

    /// A subnet of a virtual network.
    pub fn subnet(subscription_id: &str, resource_group: &str, vnet: &str, name: &str) -> Self {
        Self::virtual_network(subscription_id, resource_group, vnet).child("subnets", name)
    }

    /// A network security group.
    pub fn network_security_group(subscription_id: &str, resource_group: &str, name: &str) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.Network",
            "networkSecurityGroups",
            name,
        )
    }

    /// A public IP address.
    pub fn public_ip_address(subscription_id: &str, resource_group: &str, name: &str) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.Network",
            "publicIPAddresses",
            name,
        )
    }

    /// A network interface.
    pub fn network_interface(subscription_id: &str, resource_group: &str, name: &str) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.Network",
            "networkInterfaces",
            name,
        )
    }

    /// A proximity placement group.
    pub fn proximity_placement_group(
        subscription_id: &str,
        resource_group: &str,
        name: &str,
    ) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.Compute",
            "proximityPlacementGroups",
            name,
        )
    }

    /// An availability set.
    pub fn availability_set(subscription_id: &str, resource_group: &str, name: &str) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.Compute",
            "availabilitySets",
            name,
        )
    }

    /// A virtual machine.
    pub fn virtual_machine(subscription_id: &str, resource_group: &str, name: &str) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.Compute",
            "virtualMachines",
            name,
        )
    }

    /// A managed disk.
    pub fn disk(subscription_id: &str, resource_group: &str, name: &str) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.Compute",
            "disks",
            name,
        )
    }

    /// A storage account.
    pub fn storage_account(subscription_id: &str, resource_group: &str, name: &str) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.Storage",
            "storageAccounts",
            name,
        )
    }

    /// A blob container (always under the `default` blob service).
    pub fn blob_container(
        subscription_id: &str,
        resource_group: &str,
        account: &str,
        name: &str,
    ) -> Self {
        Self::storage_account(subscription_id, resource_group, account)
            .child("blobServices", "default")
            .child("containers", name)
    }

    /// A file share (always under the `default` file service).
    pub fn file_share(
        subscription_id: &str,
        resource_group: &str,
        account: &str,
        name: &str,
    ) -> Self {
        Self::storage_account(subscription_id, resource_group, account)
            .child("fileServices", "default")
            .child("shares", name)
    }

    /// The DevTestLab auto-shutdown schedule of a VM; ARM fixes its name to
    /// `shutdown-computevm-{vm}`.
    pub fn auto_shutdown_schedule(subscription_id: &str, resource_group: &str, vm: &str) -> Self {
        Self::resource_group(subscription_id, resource_group).provider(
            "Microsoft.DevTestLab",
            "schedules",
            &format!("shutdown-computevm-{vm}"),
        )
    }

    /// The compute usages (quota per VM family) of a location.
    pub fn compute_usages(subscription_id: &str, location: &str) -> Self {
        Self::subscription(subscription_id)
            .provider("Microsoft.Compute", "locations", location)
            .join("usages")
    }

    /// A resource provider of a subscription: `/subscriptions/{s}/providers/{namespace}`.
    pub fn resource_provider(subscription_id: &str, namespace: &str) -> Self {
        Self::subscription(subscription_id).join(&format!("providers/{namespace}"))
    }

    /// The versions of a marketplace image in a location (VirtualMachineImages_List); a
    /// version's own id is this joined with the version.
    pub fn vm_image_versions(
        subscription_id: &str,
        location: &str,
        publisher: &str,
        offer: &str,
        sku: &str,
    ) -> Self {
        Self::subscription(subscription_id)
            .provider("Microsoft.Compute", "locations", location)
            .join(&format!(
                "publishers/{publisher}/artifacttypes/vmimage/offers/{offer}/skus/{sku}/versions"
            ))
    }

    /// A preview feature of a subscription (`Microsoft.Features`), e.g. `Microsoft.Compute`,
    /// `UseStandardSecurityType`.
    pub fn feature(subscription_id: &str, namespace: &str, name: &str) -> Self {
        Self::subscription(subscription_id).join(&format!(
            "providers/Microsoft.Features/providers/{namespace}/features/{name}"
        ))
    }

    /// The compute resource SKU list of a subscription.
    pub fn compute_skus(subscription_id: &str) -> Self {
        Self::subscription(subscription_id).join("providers/Microsoft.Compute/skus")
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ResourceId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_spell_the_arm_paths() {
        assert_eq!(
            ResourceId::subnet("s", "rg", "v", "default").as_str(),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/default"
        );
        assert_eq!(
            ResourceId::blob_container("s", "rg", "acct", "raw").as_str(),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/acct/blobServices/default/containers/raw"
        );
        assert_eq!(
            ResourceId::auto_shutdown_schedule("s", "rg", "gpu").as_str(),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.DevTestLab/schedules/shutdown-computevm-gpu"
        );
        assert_eq!(
            ResourceId::compute_usages("s", "eastus").as_str(),
            "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/usages"
        );
        assert_eq!(
            ResourceId::compute_skus("s").as_str(),
            "/subscriptions/s/providers/Microsoft.Compute/skus"
        );
    }

    #[test]
    fn parts_are_read_back() {
        let id = ResourceId::virtual_machine("s", "My-RG", "gpu");
        assert_eq!(id.name(), "gpu");
        assert_eq!(id.resource_group_name(), Some("My-RG"));
        assert!(!id.is_resource_group());
        assert!(ResourceId::resource_group("s", "rg").is_resource_group());
    }
}
