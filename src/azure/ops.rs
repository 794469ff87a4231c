//! Thin typed helpers per resource over the generic operations, so callers never pick a body
//! type, an action name or an idempotency flag by hand.

use super::client::{ArmClient, DeleteOutcome, Idempotency};
use super::error::ArmError;
use super::resource_id::ResourceId;
use super::types::authorization::Permission;
use super::types::availability::AvailabilitySet;
use super::types::compute::{
    VirtualMachine, VirtualMachineInstanceView, VirtualMachineUpdate, VmAction,
};
use super::types::devtestlab::Schedule;
use super::types::disk::{Disk, DiskUpdate};
use super::types::features::FeatureResult;
use super::types::images::{VirtualMachineImage, VirtualMachineImageResource};
use super::types::ml::{ClusterUpdateParameters, ComputeResource, Workspace};
use super::types::monitor::{AppInsightsComponent, LogAnalyticsWorkspace};
use super::types::network::{
    NetworkInterface, NetworkSecurityGroup, PublicIpAddress, Subnet, VirtualNetwork,
};
use super::types::placement::ProximityPlacementGroup;
use super::types::quota::{ResourceSku, Usage};
use super::types::registry::Registry;
use super::types::resources::{Provider, ResourceGroup, Subscription};
use super::types::storage::{
    BlobContainer, FileShare, StorageAccount, StorageAccountCreate, StorageAccountKeys,
};
use super::types::vault::Vault;

impl ArmClient {
    /// PUT a resource group.
    pub async fn put_resource_group(
        &self,
        id: &ResourceId,
        body: &ResourceGroup,
    ) -> Result<ResourceGroup, ArmError> {
        self.put(id, body).await
    }

    /// PUT a virtual network (with every subnet: the list replaces the existing one).
    pub async fn put_virtual_network(
        &self,
        id: &ResourceId,
        body: &VirtualNetwork,
    ) -> Result<VirtualNetwork, ArmError> {
        self.put(id, body).await
    }

    /// PUT one subnet.
    pub async fn put_subnet(&self, id: &ResourceId, body: &Subnet) -> Result<Subnet, ArmError> {
        self.put(id, body).await
    }

    /// PUT a network security group.
    pub async fn put_network_security_group(
        &self,
        id: &ResourceId,
        body: &NetworkSecurityGroup,
    ) -> Result<NetworkSecurityGroup, ArmError> {
        self.put(id, body).await
    }

    /// PUT a public IP address.
    pub async fn put_public_ip_address(
        &self,
        id: &ResourceId,
        body: &PublicIpAddress,
    ) -> Result<PublicIpAddress, ArmError> {
        self.put(id, body).await
    }

    /// PUT a network interface.
    pub async fn put_network_interface(
        &self,
        id: &ResourceId,
        body: &NetworkInterface,
    ) -> Result<NetworkInterface, ArmError> {
        self.put(id, body).await
    }

    /// PUT a proximity placement group.
    pub async fn put_proximity_placement_group(
        &self,
        id: &ResourceId,
        body: &ProximityPlacementGroup,
    ) -> Result<ProximityPlacementGroup, ArmError> {
        self.put(id, body).await
    }

    /// PUT an availability set.
    pub async fn put_availability_set(
        &self,
        id: &ResourceId,
        body: &AvailabilitySet,
    ) -> Result<AvailabilitySet, ArmError> {
        self.put(id, body).await
    }

    /// PUT a virtual machine (also how data disks are attached and detached).
    pub async fn put_virtual_machine(
        &self,
        id: &ResourceId,
        body: &VirtualMachine,
    ) -> Result<VirtualMachine, ArmError> {
        self.put(id, body).await
    }

    /// PATCH a virtual machine (a long-running operation, polled): how dsinfra attaches and
    /// detaches data disks and retags a VM without re-sending its whole model.
    pub async fn patch_virtual_machine(
        &self,
        id: &ResourceId,
        body: &VirtualMachineUpdate,
    ) -> Result<VirtualMachine, ArmError> {
        self.patch(id, body).await
    }

    /// GET a VM's instance view.
    pub async fn get_instance_view(
        &self,
        vm: &ResourceId,
    ) -> Result<Option<VirtualMachineInstanceView>, ArmError> {
        self.get(&vm.join("instanceView")).await
    }

    /// Runs a power action and waits for it.
    pub async fn vm_action(&self, vm: &ResourceId, action: VmAction) -> Result<(), ArmError> {
        let idempotency = if action.is_idempotent() {
            Idempotency::Idempotent
        } else {
            Idempotency::NotIdempotent
        };
        self.post_action::<serde_json::Value>(vm, action.path(), &[], None, idempotency)
            .await
            .map(|_| ())
    }

    /// PUT a managed disk.
    pub async fn put_disk(&self, id: &ResourceId, body: &Disk) -> Result<Disk, ArmError> {
        self.put(id, body).await
    }

    /// PATCH a managed disk (grow, SKU, tags; long-running, polled).
    pub async fn patch_disk(&self, id: &ResourceId, body: &DiskUpdate) -> Result<Disk, ArmError> {
        self.patch(id, body).await
    }

    /// PUT a storage account (202 + Location, polled).
    pub async fn put_storage_account(
        &self,
        id: &ResourceId,
        body: &StorageAccountCreate,
    ) -> Result<StorageAccount, ArmError> {
        self.put(id, body).await
    }

    /// POST listKeys. Reading keys changes nothing, so it retries like a GET.
    pub async fn list_storage_keys(
        &self,
        account: &ResourceId,
    ) -> Result<StorageAccountKeys, ArmError> {
        self.post_action(account, "listKeys", &[], None, Idempotency::Idempotent)
            .await?
            .ok_or_else(|| ArmError::usage(format!("listKeys on {account} returned no keys")))
    }

    /// PUT a blob container.
    pub async fn put_blob_container(
        &self,
        id: &ResourceId,
        body: &BlobContainer,
    ) -> Result<BlobContainer, ArmError> {
        self.put(id, body).await
    }

    /// PUT a file share.
    pub async fn put_file_share(
        &self,
        id: &ResourceId,
        body: &FileShare,
    ) -> Result<FileShare, ArmError> {
        self.put(id, body).await
    }

    /// PUT a DevTestLab schedule (VM auto-shutdown).
    pub async fn put_schedule(
        &self,
        id: &ResourceId,
        body: &Schedule,
    ) -> Result<Schedule, ArmError> {
        self.put(id, body).await
    }

    /// The subscription's view of the resource provider `namespace` (its registration state);
    /// `None` when ARM does not know the namespace.
    pub async fn provider(
        &self,
        subscription_id: &str,
        namespace: &str,
    ) -> Result<Option<Provider>, ArmError> {
        self.get(&ResourceId::resource_provider(subscription_id, namespace))
            .await
    }

    /// Compute usages (vCPU quota per family) in `location`.
    pub async fn compute_usages(
        &self,
        subscription_id: &str,
        location: &str,
    ) -> Result<Vec<Usage>, ArmError> {
        self.list(&ResourceId::compute_usages(subscription_id, location), &[])
            .await
    }

    /// Compute SKUs offered in `location`, with their restrictions.
    pub async fn compute_skus(
        &self,
        subscription_id: &str,
        location: &str,
    ) -> Result<Vec<ResourceSku>, ArmError> {
        let filter = format!("location eq '{location}'");
        self.list(
            &ResourceId::compute_skus(subscription_id),
            &[("$filter", filter.as_str())],
        )
        .await
    }

    /// The newest version of a marketplace image in `location` and what it supports
    /// (VirtualMachineImages_List newest first, then VirtualMachineImages_Get); `None` when the
    /// image is not offered there.
    pub async fn vm_image(
        &self,
        subscription_id: &str,
        location: &str,
        urn: (&str, &str, &str, &str),
    ) -> Result<Option<VirtualMachineImage>, ArmError> {
        let (publisher, offer, sku, version) = urn;
        let versions =
            ResourceId::vm_image_versions(subscription_id, location, publisher, offer, sku);
        let version = if version.eq_ignore_ascii_case("latest") {
            // The list is a bare array, not a page.
            let Some(response) = self
                .get_raw(&versions, &[("$top", "1"), ("$orderby", "name desc")])
                .await?
            else {
                return Ok(None);
            };
            let listed: Vec<VirtualMachineImageResource> = response.json()?;
            match listed.into_iter().next() {
                Some(newest) => newest.name,
                None => return Ok(None),
            }
        } else {
            version.to_owned()
        };
        self.get(&versions.join(&version)).await
    }

    /// Whether the subscription is registered for the preview feature `namespace/name`.
    pub async fn feature_registered(
        &self,
        subscription_id: &str,
        namespace: &str,
        name: &str,
    ) -> Result<bool, ArmError> {
        let feature: Option<FeatureResult> = self
            .get(&ResourceId::feature(subscription_id, namespace, name))
            .await?;
        Ok(feature.is_some_and(|f| f.registered()))
    }

    /// The caller's permissions at a resource group (Permissions_ListForResourceGroup): one
    /// entry per role it holds there or above. `None` when the group does not exist yet (ARM
    /// answers only for an existing one).
    pub async fn permissions_at_resource_group(
        &self,
        subscription_id: &str,
        resource_group: &str,
    ) -> Result<Option<Vec<Permission>>, ArmError> {
        let collection = ResourceId::resource_group(subscription_id, resource_group)
            .join("providers/Microsoft.Authorization/permissions");
        match self.list(&collection, &[]).await {
            Ok(permissions) => Ok(Some(permissions)),
            Err(err) if err.is_resource_group_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Deletes a resource group and everything in it.
    pub async fn delete_resource_group(&self, id: &ResourceId) -> Result<DeleteOutcome, ArmError> {
        self.delete(id).await
    }

    /// The subscription (its tenant); `None` when ARM does not know it.
    pub async fn subscription(
        &self,
        subscription_id: &str,
    ) -> Result<Option<Subscription>, ArmError> {
        self.get(&ResourceId::subscription(subscription_id)).await
    }

    /// PUT a key vault.
    pub async fn put_key_vault(&self, id: &ResourceId, body: &Vault) -> Result<Vault, ArmError> {
        self.put(id, body).await
    }

    /// PUT a Log Analytics workspace.
    pub async fn put_log_analytics(
        &self,
        id: &ResourceId,
        body: &LogAnalyticsWorkspace,
    ) -> Result<LogAnalyticsWorkspace, ArmError> {
        self.put(id, body).await
    }

    /// PUT an Application Insights component.
    pub async fn put_app_insights(
        &self,
        id: &ResourceId,
        body: &AppInsightsComponent,
    ) -> Result<AppInsightsComponent, ArmError> {
        self.put(id, body).await
    }

    /// PUT a container registry.
    pub async fn put_registry(
        &self,
        id: &ResourceId,
        body: &Registry,
    ) -> Result<Registry, ArmError> {
        self.put(id, body).await
    }

    /// PUT an Azure Machine Learning workspace.
    pub async fn put_ml_workspace(
        &self,
        id: &ResourceId,
        body: &Workspace,
    ) -> Result<Workspace, ArmError> {
        self.put(id, body).await
    }

    /// PUT an AmlCompute cluster. ARM finishes the PUT when the cluster is provisioned, not when
    /// its nodes are: callers that need nodes wait for them (`engine::aml_scale`).
    pub async fn put_ml_compute(
        &self,
        id: &ResourceId,
        body: &ComputeResource,
    ) -> Result<ComputeResource, ArmError> {
        self.put(id, body).await
    }

    /// PATCH an AmlCompute cluster's scale settings.
    pub async fn patch_ml_compute(
        &self,
        id: &ResourceId,
        body: &ClusterUpdateParameters,
    ) -> Result<ComputeResource, ArmError> {
        self.patch(id, body).await
    }

    /// Reads an Azure Machine Learning workspace; `None` when it does not exist.
    pub async fn get_ml_workspace(&self, id: &ResourceId) -> Result<Option<Workspace>, ArmError> {
        self.get(id).await
    }

    /// Azure Machine Learning's own vCPU usages in `location` (AmlCompute quota per family and
    /// the regional dedicated and low-priority totals), apart from the VMs' compute usages.
    pub async fn ml_usages(
        &self,
        subscription_id: &str,
        location: &str,
    ) -> Result<Vec<Usage>, ArmError> {
        let collection = ResourceId::from_raw(format!(
            "/subscriptions/{subscription_id}/providers/Microsoft.MachineLearningServices/locations/{location}/usages"
        ));
        self.list(&collection, &[]).await
    }

    /// Reads an AmlCompute cluster; `None` when it does not exist.
    pub async fn get_ml_compute(
        &self,
        id: &ResourceId,
    ) -> Result<Option<ComputeResource>, ArmError> {
        self.get(id).await
    }
}
