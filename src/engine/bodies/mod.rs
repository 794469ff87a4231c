//! From a desired [`Resource`] to the typed ARM request that creates or updates it.
//!
//! The manifest layer describes resources by attributes and refers to other resources by
//! address (`"subnet": "network.main.vnet"`), so that planning works offline. Here, with the
//! subscription known, every reference becomes the ARM id of the resource it names (derived from
//! that resource's deterministic name, exactly as [`Resource::arm_id`] derives ids for the state),
//! and the attributes become the body types of [`crate::azure::types`]. This is pure: no I/O, so
//! every body is unit-tested and held to the official API specs in a test.
//!
//! Two decisions live here. Blob containers and file shares get no tags (ARM refuses tags on
//! them; they carry the account's). And a VM's OS disk gets a deterministic name and
//! `deleteOption: Delete`, so that deleting the VM deletes its OS disk: no orphaned disks.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::addr::Address;
use crate::azure::types::Tags;
use crate::azure::types::aks::{AgentPool, ManagedCluster};
use crate::azure::types::authorization::{RoleAssignmentCreate, RoleDefinition};
use crate::azure::types::availability::AvailabilitySet;
use crate::azure::types::compute::{VirtualMachine, VirtualMachineUpdate};
use crate::azure::types::devtestlab::Schedule;
use crate::azure::types::disk::{Disk, DiskUpdate};
use crate::azure::types::ml::{ClusterUpdateParameters, ComputeResource, Workspace};
use crate::azure::types::monitor::{AppInsightsComponent, LogAnalyticsWorkspace};
use crate::azure::types::network::{
    NetworkInterface, NetworkSecurityGroup, PublicIpAddress, VirtualNetwork,
};
use crate::azure::types::placement::ProximityPlacementGroup;
use crate::azure::types::registry::Registry;
use crate::azure::types::resources::ResourceGroup;
use crate::azure::types::storage::{BlobContainer, FileShare, StorageAccountCreate};
use crate::azure::types::vault::Vault;
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::engine::kinds;
use crate::model::{Desired, Resource, ResourceKind};

mod authorization;
mod compute;
mod ml;
mod network;
mod storage;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_idle;
#[cfg(test)]
pub(crate) mod tests_ml;
mod update;

pub use authorization::{principal_vm_id, role_assignment_request};
pub use update::update_request;

/// Why a resource's attributes could not become a request body. These are bugs in the
/// manifest layer or a hand-edited state, not user errors, so the messages name the attribute.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// A required attribute is absent or null.
    #[error("{address}: attribute `{attribute}` is missing")]
    Missing {
        /// The resource's address.
        address: String,
        /// The attribute.
        attribute: String,
    },
    /// An attribute has the wrong shape or an unknown value.
    #[error("{address}: attribute `{attribute}` is invalid: {message}")]
    Invalid {
        /// The resource's address.
        address: String,
        /// The attribute.
        attribute: String,
        /// What is wrong.
        message: String,
    },
    /// An attribute refers to a resource the manifest does not have.
    #[error("{address}: `{attribute}` refers to {reference}, which is not in the manifest")]
    UnknownReference {
        /// The resource's address.
        address: String,
        /// The referring attribute.
        attribute: String,
        /// The missing address.
        reference: String,
    },
}

/// The typed body of one PUT, or of one PATCH for the updates `update` sends that way.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A resource group.
    ResourceGroup(ResourceGroup),
    /// A virtual network with its subnets.
    VirtualNetwork(VirtualNetwork),
    /// A network security group with its rules.
    NetworkSecurityGroup(NetworkSecurityGroup),
    /// A public IP address.
    PublicIp(PublicIpAddress),
    /// A network interface.
    NetworkInterface(NetworkInterface),
    /// A proximity placement group.
    ProximityPlacementGroup(ProximityPlacementGroup),
    /// An availability set (a cluster's InfiniBand fabric).
    AvailabilitySet(AvailabilitySet),
    /// A virtual machine.
    VirtualMachine(Box<VirtualMachine>),
    /// A VM PATCH: only its data disks and/or tags (see `update`).
    VirtualMachineUpdate(VirtualMachineUpdate),
    /// A managed disk.
    ManagedDisk(Disk),
    /// A managed-disk PATCH: only its size, SKU and/or tags (see `update`).
    DiskUpdate(DiskUpdate),
    /// A storage account.
    StorageAccount(StorageAccountCreate),
    /// A blob container.
    BlobContainer(BlobContainer),
    /// A file share.
    FileShare(FileShare),
    /// A DevTestLab auto-shutdown schedule.
    AutoShutdownSchedule(Schedule),
    /// A key vault (an ML workspace's).
    KeyVault(Vault),
    /// A Log Analytics workspace.
    LogAnalytics(LogAnalyticsWorkspace),
    /// An Application Insights component.
    AppInsights(AppInsightsComponent),
    /// A container registry.
    Registry(Registry),
    /// An Azure Machine Learning workspace.
    MlWorkspace(Box<Workspace>),
    /// An AmlCompute cluster.
    MlCompute(Box<ComputeResource>),
    /// An AmlCompute PATCH: only its scale settings (see `update`).
    MlComputeUpdate(ClusterUpdateParameters),
    /// A custom role definition (an idle watcher's).
    RoleDefinition(RoleDefinition),
    /// A role assignment (built by [`role_assignment_request`]).
    RoleAssignment(RoleAssignmentCreate),
    /// An AKS cluster with its System pool.
    AksCluster(Box<ManagedCluster>),
    /// A named AKS node pool.
    AksPool(AgentPool),
}

/// One PUT or PATCH: where, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The resource's ARM id.
    pub id: ResourceId,
    /// The body.
    pub body: Body,
}

impl Request {
    /// The body as JSON, as it goes on the wire (for spec validation and tests).
    // Only tests read a body as JSON or ask its method; the client sends it typed.
    #[cfg(test)]
    ///
    /// # Panics
    ///
    /// Never: the body types serialise to JSON objects with string keys.
    pub fn to_json(&self) -> Value {
        let value = match &self.body {
            Body::ResourceGroup(b) => serde_json::to_value(b),
            Body::VirtualNetwork(b) => serde_json::to_value(b),
            Body::NetworkSecurityGroup(b) => serde_json::to_value(b),
            Body::PublicIp(b) => serde_json::to_value(b),
            Body::NetworkInterface(b) => serde_json::to_value(b),
            Body::ProximityPlacementGroup(b) => serde_json::to_value(b),
            Body::AvailabilitySet(b) => serde_json::to_value(b),
            Body::VirtualMachine(b) => serde_json::to_value(b),
            Body::ManagedDisk(b) => serde_json::to_value(b),
            Body::VirtualMachineUpdate(b) => serde_json::to_value(b),
            Body::DiskUpdate(b) => serde_json::to_value(b),
            Body::StorageAccount(b) => serde_json::to_value(b),
            Body::BlobContainer(b) => serde_json::to_value(b),
            Body::FileShare(b) => serde_json::to_value(b),
            Body::AutoShutdownSchedule(b) => serde_json::to_value(b),
            Body::KeyVault(b) => serde_json::to_value(b),
            Body::LogAnalytics(b) => serde_json::to_value(b),
            Body::AppInsights(b) => serde_json::to_value(b),
            Body::Registry(b) => serde_json::to_value(b),
            Body::MlWorkspace(b) => serde_json::to_value(b),
            Body::MlCompute(b) => serde_json::to_value(b),
            Body::MlComputeUpdate(b) => serde_json::to_value(b),
            Body::RoleDefinition(b) => serde_json::to_value(b),
            Body::RoleAssignment(b) => serde_json::to_value(b),
            Body::AksCluster(b) => serde_json::to_value(b),
            Body::AksPool(b) => serde_json::to_value(b),
        };
        value.expect("ARM bodies always serialise: their maps have string keys")
    }

    /// The same request with `cloud_init` (a cloud-init document such as
    /// [`crate::ssh::HostKeyPair::cloud_config`]) as the VM's `osProfile.customData`, base64 as
    /// ARM wants it. Only a VM's *create* may carry it: ARM refuses a changed customData on an
    /// existing VM, so [`request_for`] never sets it and updates go without. Only VMs take
    /// customData; any other body is returned unchanged.
    #[must_use]
    pub fn with_custom_data(mut self, cloud_init: &crate::ssh::Secret) -> Self {
        use base64::Engine as _;
        if let Body::VirtualMachine(vm) = &mut self.body
            && let Some(os) = vm.properties.as_mut().and_then(|p| p.os_profile.as_mut())
        {
            let encoded = base64::engine::general_purpose::STANDARD.encode(cloud_init.expose());
            os.custom_data = Some(crate::azure::secret::Secret::new(encoded));
        }
        self
    }

    /// The HTTP method the request goes with.
    #[cfg(test)]
    pub fn method(&self) -> &'static str {
        match self.body {
            Body::VirtualMachineUpdate(_) | Body::DiskUpdate(_) | Body::MlComputeUpdate(_) => {
                "PATCH"
            }
            _ => "PUT",
        }
    }

    /// Send the PUT (or PATCH) and wait until ARM has finished it (the client polls long-running
    /// operations). The response body is not needed: the state records what was asked for.
    pub async fn send(&self, client: &ArmClient) -> Result<(), ArmError> {
        let id = &self.id;
        match &self.body {
            Body::ResourceGroup(b) => client.put_resource_group(id, b).await.map(drop),
            Body::VirtualNetwork(b) => client.put_virtual_network(id, b).await.map(drop),
            Body::NetworkSecurityGroup(b) => {
                client.put_network_security_group(id, b).await.map(drop)
            }
            Body::PublicIp(b) => client.put_public_ip_address(id, b).await.map(drop),
            Body::NetworkInterface(b) => client.put_network_interface(id, b).await.map(drop),
            Body::ProximityPlacementGroup(b) => {
                client.put_proximity_placement_group(id, b).await.map(drop)
            }
            Body::AvailabilitySet(b) => client.put_availability_set(id, b).await.map(drop),
            Body::VirtualMachine(b) => client.put_virtual_machine(id, b).await.map(drop),
            Body::ManagedDisk(b) => client.put_disk(id, b).await.map(drop),
            Body::VirtualMachineUpdate(b) => client.patch_virtual_machine(id, b).await.map(drop),
            Body::DiskUpdate(b) => client.patch_disk(id, b).await.map(drop),
            Body::StorageAccount(b) => client.put_storage_account(id, b).await.map(drop),
            Body::BlobContainer(b) => client.put_blob_container(id, b).await.map(drop),
            Body::FileShare(b) => client.put_file_share(id, b).await.map(drop),
            Body::AutoShutdownSchedule(b) => client.put_schedule(id, b).await.map(drop),
            Body::KeyVault(b) => client.put_key_vault(id, b).await.map(drop),
            Body::LogAnalytics(b) => client.put_log_analytics(id, b).await.map(drop),
            Body::AppInsights(b) => client.put_app_insights(id, b).await.map(drop),
            Body::Registry(b) => client.put_registry(id, b).await.map(drop),
            Body::MlWorkspace(b) => client.put_ml_workspace(id, b).await.map(drop),
            Body::MlCompute(b) => client.put_ml_compute(id, b).await.map(drop),
            Body::MlComputeUpdate(b) => client.patch_ml_compute(id, b).await.map(drop),
            Body::RoleDefinition(b) => client.put::<_, Value>(id, b).await.map(drop),
            Body::RoleAssignment(b) => client.put::<_, Value>(id, b).await.map(drop),
            Body::AksCluster(b) => client.put::<_, Value>(id, b).await.map(drop),
            Body::AksPool(b) => client.put::<_, Value>(id, b).await.map(drop),
        }
    }
}

/// The request that creates or updates `resource`, with references resolved against `desired`
/// in `subscription`. `None` for a SAS, which is signed locally and never sent to ARM. `tenant`
/// is the subscription's Microsoft Entra tenant, which only a key vault's body needs (the
/// caller reads it from ARM once, when the plan has a vault: [`needs_tenant`]).
pub fn request_for(
    resource: &Resource,
    desired: &Desired,
    subscription: &str,
    tenant: Option<&str>,
) -> Result<Option<Request>, BodyError> {
    let b = Builder {
        resource,
        desired,
        subscription,
        tenant,
    };
    let Some(body) = kinds::driver(resource.kind).body(&b)? else {
        return Ok(None);
    };
    Ok(Some(Request {
        id: ResourceId::from_raw(resource.arm_id(subscription)),
        body,
    }))
}

/// Whether the body of a `kind` names the subscription's tenant.
pub fn needs_tenant(kind: ResourceKind) -> bool {
    kinds::driver(kind).needs_tenant()
}

/// Reads one resource's attributes and resolves its references.
pub(crate) struct Builder<'a> {
    resource: &'a Resource,
    desired: &'a Desired,
    subscription: &'a str,
    tenant: Option<&'a str>,
}

impl Builder<'_> {
    pub(crate) fn missing(&self, attribute: &str) -> BodyError {
        BodyError::Missing {
            address: self.resource.address.to_string(),
            attribute: attribute.to_owned(),
        }
    }

    pub(crate) fn invalid(&self, attribute: &str, message: impl Into<String>) -> BodyError {
        BodyError::Invalid {
            address: self.resource.address.to_string(),
            attribute: attribute.to_owned(),
            message: message.into(),
        }
    }

    /// Every attribute of the resource (a driver that builds its body apart from the builder:
    /// an AKS pool's, which park sends again with another count).
    pub(crate) fn attrs(&self) -> &crate::model::Attrs {
        &self.resource.attrs
    }

    /// The attribute, `None` when absent or null.
    pub(crate) fn value(&self, attribute: &str) -> Option<&Value> {
        self.resource.attrs.get(attribute).filter(|v| !v.is_null())
    }

    pub(crate) fn text(&self, attribute: &str) -> Result<String, BodyError> {
        self.opt_text(attribute)?
            .ok_or_else(|| self.missing(attribute))
    }

    pub(crate) fn opt_text(&self, attribute: &str) -> Result<Option<String>, BodyError> {
        match self.value(attribute) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.invalid(attribute, format!("expected text, found {other}"))),
        }
    }

    pub(crate) fn opt_i32(&self, attribute: &str) -> Result<Option<i32>, BodyError> {
        match self.value(attribute) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| {
                    self.invalid(attribute, format!("expected a whole number, found {v}"))
                }),
        }
    }

    pub(crate) fn opt_bool(&self, attribute: &str) -> Result<Option<bool>, BodyError> {
        match self.value(attribute) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                Err(self.invalid(attribute, format!("expected true or false, found {other}")))
            }
        }
    }

    pub(crate) fn texts(&self, attribute: &str) -> Result<Vec<String>, BodyError> {
        match self.value(attribute) {
            None => Ok(Vec::new()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| self.invalid(attribute, format!("expected a list of text: {e}"))),
        }
    }

    /// An ARM enum from its wire spelling (`"Standard_LRS"`), via the body type's serde names.
    fn wire_enum<T: DeserializeOwned>(&self, attribute: &str) -> Result<T, BodyError> {
        let text = self.text(attribute)?;
        serde_json::from_value(Value::String(text.clone()))
            .map_err(|_| self.invalid(attribute, format!("`{text}` is not a value ARM accepts")))
    }

    /// A security rule's enum field from its wire spelling.
    fn rule_enum<T: DeserializeOwned>(
        &self,
        rule: &str,
        field: &str,
        text: &str,
    ) -> Result<T, BodyError> {
        serde_json::from_value(Value::String(text.to_owned())).map_err(|_| {
            self.invalid(
                "rules",
                format!("rule `{rule}`: `{text}` is not a valid {field}"),
            )
        })
    }

    pub(crate) fn tags(&self) -> Result<Option<Tags>, BodyError> {
        match self.value("tags") {
            None => Ok(None),
            Some(v) => serde_json::from_value::<BTreeMap<String, String>>(v.clone())
                .map(Some)
                .map_err(|e| self.invalid("tags", e.to_string())),
        }
    }

    pub(crate) fn zones(&self) -> Result<Option<Vec<String>>, BodyError> {
        Ok(self.opt_text("zone")?.map(|z| vec![z]))
    }

    /// The resource an address-valued text refers to.
    pub(crate) fn target(&self, attribute: &str, reference: &str) -> Result<&Resource, BodyError> {
        reference
            .parse::<Address>()
            .ok()
            .and_then(|a| self.desired.resource(&a))
            .ok_or_else(|| BodyError::UnknownReference {
                address: self.resource.address.to_string(),
                attribute: attribute.to_owned(),
                reference: reference.to_owned(),
            })
    }

    /// The ARM id of the resource an attribute refers to (`None` when the attribute is null).
    pub(crate) fn reference_id(&self, attribute: &str) -> Result<Option<String>, BodyError> {
        match self.opt_text(attribute)? {
            None => Ok(None),
            Some(reference) => Ok(Some(
                self.target(attribute, &reference)?
                    .arm_id(self.subscription),
            )),
        }
    }

    pub(crate) fn location(&self) -> Result<String, BodyError> {
        self.text("location")
    }
}
