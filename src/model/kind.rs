//! The Azure resource types dsinfra manages, with what the planner must know about each.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An Azure resource type dsinfra creates (plus the locally signed SAS, which lives in state like a
/// resource so that re-signing before expiry can be planned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// `Microsoft.Resources/resourceGroups`
    ResourceGroup,
    /// `Microsoft.Network/virtualNetworks` (subnets are sent inside the VNet body).
    VirtualNetwork,
    /// `Microsoft.Network/networkSecurityGroups`
    NetworkSecurityGroup,
    /// `Microsoft.Network/publicIPAddresses`
    PublicIp,
    /// `Microsoft.Network/networkInterfaces`
    NetworkInterface,
    /// `Microsoft.Compute/proximityPlacementGroups`
    ProximityPlacementGroup,
    /// `Microsoft.Compute/availabilitySets`: one InfiniBand fabric per cluster.
    AvailabilitySet,
    /// `Microsoft.Compute/virtualMachines`
    VirtualMachine,
    /// `Microsoft.Compute/disks`
    ManagedDisk,
    /// `Microsoft.Storage/storageAccounts`
    StorageAccount,
    /// `Microsoft.Storage/storageAccounts/blobServices/containers`
    BlobContainer,
    /// `Microsoft.Storage/storageAccounts/fileServices/shares`
    FileShare,
    /// `Microsoft.DevTestLab/schedules` (`shutdown-computevm-<vm>`)
    AutoShutdownSchedule,
    /// A shared access signature signed locally; never sent to ARM, never stored in clear.
    Sas,
    /// `Microsoft.KeyVault/vaults`: a key vault an Azure Machine Learning workspace requires.
    KeyVault,
    /// `Microsoft.OperationalInsights/workspaces`: the Log Analytics workspace that a
    /// workspace-based Application Insights component stores into (Azure retired classic
    /// components, so a new one needs this).
    LogAnalyticsWorkspace,
    /// `Microsoft.Insights/components`: the Application Insights an ML workspace requires.
    AppInsights,
    /// `Microsoft.ContainerRegistry/registries`: an ML workspace's optional image registry.
    ContainerRegistry,
    /// `Microsoft.MachineLearningServices/workspaces`
    MlWorkspace,
    /// `Microsoft.MachineLearningServices/workspaces/computes`: an AmlCompute cluster (a child
    /// of its workspace: `parent` is the workspace's name).
    MlCompute,
    /// `Microsoft.Authorization/roleDefinitions`: the custom role of a block's idle watcher
    /// (read, deallocate and start VMs in the experiment's resource group).
    RoleDefinition,
    /// `Microsoft.Authorization/roleAssignments`: that role, assigned to the head VM's
    /// system-assigned identity at the resource group.
    RoleAssignment,
    /// `Microsoft.ContainerService/managedClusters`: an AKS cluster with its System pool.
    AksCluster,
    /// `Microsoft.ContainerService/managedClusters/agentPools`: a named pool of an AKS cluster
    /// (a child: `parent` is the cluster's name).
    AksPool,
}

impl ResourceKind {
    /// Every kind, in a stable order.
    pub const ALL: [Self; 24] = [
        Self::ResourceGroup,
        Self::VirtualNetwork,
        Self::NetworkSecurityGroup,
        Self::PublicIp,
        Self::NetworkInterface,
        Self::ProximityPlacementGroup,
        Self::AvailabilitySet,
        Self::VirtualMachine,
        Self::ManagedDisk,
        Self::StorageAccount,
        Self::BlobContainer,
        Self::FileShare,
        Self::AutoShutdownSchedule,
        Self::Sas,
        Self::KeyVault,
        Self::LogAnalyticsWorkspace,
        Self::AppInsights,
        Self::ContainerRegistry,
        Self::MlWorkspace,
        Self::MlCompute,
        Self::RoleDefinition,
        Self::RoleAssignment,
        Self::AksCluster,
        Self::AksPool,
    ];

    /// The ARM resource type, as in ids and in the plan's JSON `type` field.
    pub fn arm_type(self) -> &'static str {
        match self {
            Self::ResourceGroup => "Microsoft.Resources/resourceGroups",
            Self::VirtualNetwork => "Microsoft.Network/virtualNetworks",
            Self::NetworkSecurityGroup => "Microsoft.Network/networkSecurityGroups",
            Self::PublicIp => "Microsoft.Network/publicIPAddresses",
            Self::NetworkInterface => "Microsoft.Network/networkInterfaces",
            Self::ProximityPlacementGroup => "Microsoft.Compute/proximityPlacementGroups",
            Self::AvailabilitySet => "Microsoft.Compute/availabilitySets",
            Self::VirtualMachine => "Microsoft.Compute/virtualMachines",
            Self::ManagedDisk => "Microsoft.Compute/disks",
            Self::StorageAccount => "Microsoft.Storage/storageAccounts",
            Self::BlobContainer => "Microsoft.Storage/storageAccounts/blobServices/containers",
            Self::FileShare => "Microsoft.Storage/storageAccounts/fileServices/shares",
            Self::AutoShutdownSchedule => "Microsoft.DevTestLab/schedules",
            Self::Sas => "dsinfra/sas",
            Self::KeyVault => "Microsoft.KeyVault/vaults",
            Self::LogAnalyticsWorkspace => "Microsoft.OperationalInsights/workspaces",
            Self::AppInsights => "Microsoft.Insights/components",
            Self::ContainerRegistry => "Microsoft.ContainerRegistry/registries",
            Self::MlWorkspace => "Microsoft.MachineLearningServices/workspaces",
            Self::MlCompute => "Microsoft.MachineLearningServices/workspaces/computes",
            Self::RoleDefinition => "Microsoft.Authorization/roleDefinitions",
            Self::RoleAssignment => "Microsoft.Authorization/roleAssignments",
            Self::AksCluster => "Microsoft.ContainerService/managedClusters",
            Self::AksPool => "Microsoft.ContainerService/managedClusters/agentPools",
        }
    }

    /// Attributes whose change cannot be made in place: changing one replaces the resource.
    /// The plan names the attribute that forces a replacement.
    pub fn force_new(self) -> &'static [&'static str] {
        match self {
            Self::ResourceGroup
            | Self::VirtualNetwork
            | Self::NetworkSecurityGroup
            | Self::ProximityPlacementGroup
            | Self::KeyVault
            | Self::LogAnalyticsWorkspace
            | Self::ContainerRegistry => &["location"],
            Self::PublicIp => &["location", "sku", "zone"],
            // A managed disk's SKU changes in place (a PATCH, while the disk is unattached or its
            // VM deallocated): replacing the disk would delete its data to do what Azure does
            // without loss. The plan checks Azure's conditions (plan::disk_sku).
            Self::ManagedDisk => &["location", "zone"],
            // ARM updates only a set's tags; its members must be replaced with it (a VM's
            // `availability_set` refers to it, so the plan cascades the replacement to them).
            Self::AvailabilitySet => &[
                "location",
                "sku",
                "fault_domain_count",
                "update_domain_count",
                "proximity_placement_group",
            ],
            Self::NetworkInterface => &["location", "subnet"],
            // Azure can resize some VMs in place, but not across families, not into a PPG with
            // running members and not between Gen1/Gen2 images; replacing is the one behaviour
            // that always works, and the plan says so before anything is spent.
            Self::VirtualMachine => &[
                "location",
                "size",
                "image",
                "admin_username",
                "zone",
                "os_disk_size_gb",
                "os_disk_sku",
                "proximity_placement_group",
                // A VM joins an availability set (its InfiniBand fabric) only when it is created.
                "availability_set",
                "nic",
                // Azure fixes the security type at creation; Secure Boot changes only while
                // deallocated, and the VM's kernel-module steps depend on it.
                "security",
                // Spot or regular is fixed at creation, as is what an eviction does (decision
                // 75). A new price cap is accepted only while the VM is deallocated: replacing
                // is what works from any state (a regular VM has none of the three).
                "priority",
                "eviction_policy",
                "max_price",
            ],
            Self::StorageAccount => &["location", "kind", "sku", "hns"],
            Self::BlobContainer => &[],
            Self::FileShare => &["protocol"],
            Self::AutoShutdownSchedule => &["vm"],
            Self::Sas => &["account", "scope", "permissions", "start", "https_only"],
            Self::AppInsights => &["location", "logs"],
            // Azure fixes a workspace's dependent resources at creation.
            Self::MlWorkspace => &[
                "location",
                "storage_account",
                "key_vault",
                "application_insights",
                "container_registry",
            ],
            // A compute's PATCH (ClusterUpdateParameters) carries only its scale settings: the
            // node count and idle time change in place, everything else replaces the cluster.
            Self::MlCompute => &[
                "location",
                "size",
                "priority",
                "admin_username",
                "ssh_public_key",
                "subnet",
                "subnet_name",
            ],
            // A role definition's actions and name change in place (a PUT of the same GUID).
            Self::RoleDefinition => &["scope"],
            // ARM refuses to change an existing assignment (RoleAssignmentUpdateNotPermitted):
            // a new principal (the head VM replaced) or role means a new assignment.
            Self::RoleAssignment => &["principal", "role", "scope"],
            // AKS fixes a cluster's region and DNS prefix, and its System pool's size, at
            // creation; the version and node count change in place.
            Self::AksCluster => &["location", "dns_prefix", "system_size", "entra_id"],
            // A pool's size, OS and GPU driver are fixed (AKS refuses the change). Taints apply
            // to new nodes only (the spec's words), so changing them in place would leave the
            // nodes already there with the old ones: a new pool is the change that holds.
            Self::AksPool => &["location", "cluster", "size", "gpu_driver", "taints"],
        }
    }

    /// Attributes newer dsinfra versions added to this kind: a state record made before one
    /// existed (the attribute is absent, not null) is not a change, so upgrading dsinfra never
    /// replaces what it created. A VM recorded without `security` keeps what Azure gave it; the
    /// kernel-module steps check that before they start (engine::post_boot).
    pub fn added_later(self) -> &'static [&'static str] {
        match self {
            Self::VirtualMachine => &["security"],
            _ => &[],
        }
    }

    /// Whether Azure's name for a resource of this kind is made at apply, from what only apply
    /// knows: a role assignment's name is a GUID of its scope, principal and role (Microsoft's
    /// recommendation: an assignment's principal cannot change, so a new principal is a new
    /// assignment), and the principal is the head VM's identity, made by Azure. The manifest's
    /// name is then [`crate::model::NAMED_AT_APPLY`], the state records Azure's, and the plan
    /// compares what the resource assigns, never its name.
    pub fn named_at_apply(self) -> bool {
        matches!(self, Self::RoleAssignment)
    }

    /// Whether this kind holds the user's data: `destroy --keep-data` keeps these (and whatever
    /// they need, such as their resource group).
    pub fn is_data(self) -> bool {
        matches!(
            self,
            Self::StorageAccount
                | Self::BlobContainer
                | Self::FileShare
                | Self::ManagedDisk
                | Self::MlWorkspace
        )
    }

    /// Whether a resource of this kind lives inside one of `parent` (a container in a storage
    /// account, a pool in an AKS cluster): `parent`'s ARM type is a prefix of its own, so it is
    /// deleted with its parent.
    pub fn lives_in(self, parent: Self) -> bool {
        self.arm_type()
            .strip_prefix(parent.arm_type())
            .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Whether this kind exists in ARM (false for the locally signed SAS).
    pub fn is_arm(self) -> bool {
        self != Self::Sas
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.arm_type())
    }
}

#[cfg(test)]
mod tests {
    use super::ResourceKind as K;

    #[test]
    fn a_child_kind_lives_in_the_kind_whose_type_prefixes_its_own() {
        assert!(K::BlobContainer.lives_in(K::StorageAccount));
        assert!(K::FileShare.lives_in(K::StorageAccount));
        assert!(K::AksPool.lives_in(K::AksCluster));
        assert!(K::MlCompute.lives_in(K::MlWorkspace));
        assert!(!K::AksCluster.lives_in(K::AksPool));
        assert!(!K::StorageAccount.lives_in(K::StorageAccount));
        // A type that merely starts with the same letters is not inside.
        assert!(!K::MlCompute.lives_in(K::ManagedDisk));
    }
}
