//! Compute bodies (Microsoft.Compute 2024-11-01): virtual machines, their instance view and
//! power state, and the power actions. Placement groups are in `placement.rs`.
//!
//! dsinfra creates Linux VMs with SSH keys only: there is no `adminPassword` field, so a
//! password can never be sent. `customData` (cloud-init, base64) may hold secrets and is a
//! [`Secret`]: it is sent but never printed. ARM does not return it on reads.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::common::{SubResource, Tags};
use crate::azure::secret::Secret;

/// A virtual machine.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachine {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub managed_by: Option<String>,
    /// Region (required).
    pub location: String,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Availability zone (one), e.g. `["1"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
    /// The VM's managed identity (`VirtualMachineIdentity`): a head that parks its block when
    /// idle has a system-assigned one (issue 18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<VirtualMachineIdentity>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<VirtualMachineProperties>,
}

/// `VirtualMachineIdentity`: which identities the VM has, and (read-only) the system-assigned
/// one's principal.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineIdentity {
    /// `SystemAssigned`, `UserAssigned`, `SystemAssigned, UserAssigned` or `None`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Read-only: the system-assigned identity's object id in Microsoft Entra ID.
    #[serde(default, skip_serializing)]
    pub principal_id: Option<String>,
    /// Read-only: the identity's tenant.
    #[serde(default, skip_serializing)]
    pub tenant_id: Option<String>,
}

/// `VirtualMachineProperties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineProperties {
    /// The size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_profile: Option<HardwareProfile>,
    /// Image and disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_profile: Option<StorageProfile>,
    /// Admin user, SSH keys, customData.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_profile: Option<OsProfile>,
    /// NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_profile: Option<NetworkProfile>,
    /// The placement group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proximity_placement_group: Option<SubResource>,
    /// The availability set, which can only be chosen when the VM is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_set: Option<SubResource>,
    /// Regular, Low or Spot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<VirtualMachinePriority>,
    /// What happens to an evicted Spot VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_policy: Option<VirtualMachineEvictionPolicy>,
    /// Spot price cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billing_profile: Option<BillingProfile>,
    /// Trusted Launch, Secure Boot and vTPM. Azure applies Trusted Launch with Secure Boot on to
    /// a Generation 2 VM created without it, so dsinfra always sends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_profile: Option<SecurityProfile>,
    /// Read-only: `Creating`, `Updating`, `Succeeded`, `Failed`, `Deleting`.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
    /// Read-only: the VM's unique id.
    #[serde(default, skip_serializing)]
    pub vm_id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub time_created: Option<String>,
    /// Read-only: present with `$expand=instanceView`.
    #[serde(default, skip_serializing)]
    pub instance_view: Option<VirtualMachineInstanceView>,
}

/// `HardwareProfile`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HardwareProfile {
    /// e.g. `Standard_ND40rs_v2`.
    pub vm_size: String,
}

/// `VirtualMachineUpdate`: the body of a VM PATCH. Only what is set is sent, and ARM changes
/// only that (objects merge, arrays such as `dataDisks` replace), so an update that attaches or
/// detaches disks or retags never re-sends the OS profile (see decision 28).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineUpdate {
    /// The VM's tags, all of them: a PATCH replaces the tag set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// The properties to change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<VirtualMachineUpdateProperties>,
}

/// The properties of a [`VirtualMachineUpdate`] dsinfra changes by PATCH.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineUpdateProperties {
    /// The storage profile; dsinfra sends only `dataDisks`, the whole new list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_profile: Option<StorageProfile>,
}

/// `StorageProfile`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfile {
    /// The image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_reference: Option<ImageReference>,
    /// The OS disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_disk: Option<OsDisk>,
    /// Data disks; managed disks are attached and detached by PUTting the VM with this list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_disks: Option<Vec<DataDisk>>,
}

/// `ImageReference`: a marketplace image (publisher/offer/sku/version) or an image id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageReference {
    /// An image resource id, instead of publisher/offer/sku.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// e.g. `microsoft-dsvm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// e.g. `ubuntu-hpc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<String>,
    /// e.g. `2204`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    /// `latest` or a version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Read-only: the version `latest` resolved to.
    #[serde(default, skip_serializing)]
    pub exact_version: Option<String>,
}

/// `OSDisk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsDisk {
    /// Windows or Linux (returned; needed only for specialised disks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_type: Option<OperatingSystemType>,
    /// The disk's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Host caching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caching: Option<CachingType>,
    /// Required: `FromImage` for a new VM.
    pub create_option: DiskCreateOptionType,
    /// Size in GiB, to grow the image's disk.
    #[serde(
        default,
        rename = "diskSizeGB",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk_size_gb: Option<i32>,
    /// Managed disk settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_disk: Option<ManagedDiskParameters>,
    /// Delete or Detach with the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DiskDeleteOption>,
}

/// `DataDisk`: an empty new disk (`Empty`) or an existing managed disk (`Attach`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataDisk {
    /// Required: the LUN, unique per VM.
    pub lun: i32,
    /// The disk's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Host caching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caching: Option<CachingType>,
    /// Required.
    pub create_option: DiskCreateOptionType,
    /// Size in GiB for `Empty`.
    #[serde(
        default,
        rename = "diskSizeGB",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk_size_gb: Option<i32>,
    /// The managed disk (its id for `Attach`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_disk: Option<ManagedDiskParameters>,
    /// Delete or Detach with the VM; dsinfra detaches data so it outlives the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DiskDeleteOption>,
    /// Set to detach the disk on the next PUT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_be_detached: Option<bool>,
    /// Read-only.
    #[serde(default, rename = "diskIOPSReadWrite", skip_serializing)]
    pub disk_iops_read_write: Option<i64>,
    /// Read-only.
    #[serde(default, rename = "diskMBpsReadWrite", skip_serializing)]
    pub disk_mbps_read_write: Option<i64>,
}

impl DataDisk {
    /// Attaches the existing managed disk `disk_id` at `lun`, kept when the VM is deleted.
    pub fn attach(lun: i32, disk_id: &str) -> Self {
        Self {
            lun,
            name: None,
            caching: None,
            create_option: DiskCreateOptionType::Attach,
            disk_size_gb: None,
            managed_disk: Some(ManagedDiskParameters {
                id: Some(disk_id.to_string()),
                storage_account_type: None,
            }),
            delete_option: Some(DiskDeleteOption::Detach),
            to_be_detached: None,
            disk_iops_read_write: None,
            disk_mbps_read_write: None,
        }
    }
}

/// `ManagedDiskParameters`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedDiskParameters {
    /// An existing disk's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Storage type for a new disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_account_type: Option<DiskStorageAccountType>,
}

/// `StorageAccountTypes` (compute) / `DiskStorageAccountTypes` (disks): the same values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiskStorageAccountType {
    /// Standard HDD.
    #[serde(rename = "Standard_LRS")]
    StandardLrs,
    /// Premium SSD.
    #[serde(rename = "Premium_LRS")]
    PremiumLrs,
    /// Standard SSD.
    #[serde(rename = "StandardSSD_LRS")]
    StandardSsdLrs,
    /// Ultra disk (data disks only).
    #[serde(rename = "UltraSSD_LRS")]
    UltraSsdLrs,
    /// Zone-redundant premium SSD.
    #[serde(rename = "Premium_ZRS")]
    PremiumZrs,
    /// Zone-redundant standard SSD.
    #[serde(rename = "StandardSSD_ZRS")]
    StandardSsdZrs,
    /// Premium SSD v2.
    #[serde(rename = "PremiumV2_LRS")]
    PremiumV2Lrs,
}

/// `CachingTypes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CachingType {
    /// No caching.
    None,
    /// Read cache.
    ReadOnly,
    /// Read/write cache.
    ReadWrite,
}

/// `DiskCreateOptionTypes` (VM disks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiskCreateOptionType {
    /// From the image.
    FromImage,
    /// A new empty disk.
    Empty,
    /// An existing managed disk.
    Attach,
    /// A copy of a snapshot or disk.
    Copy,
    /// From a restore point.
    Restore,
}

/// `DiskDeleteOptionTypes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiskDeleteOption {
    /// Delete the disk with the VM.
    Delete,
    /// Keep the disk.
    Detach,
}

/// `OperatingSystemTypes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperatingSystemType {
    /// Windows.
    Windows,
    /// Linux.
    Linux,
}

/// `SecurityProfile` (computeRPCommon.json): the parts dsinfra sets.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityProfile {
    /// `TrustedLaunch`, or `Standard` for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_type: Option<SecurityType>,
    /// Secure Boot and vTPM; only with Trusted Launch (or a confidential VM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uefi_settings: Option<UefiSettings>,
}

/// `SecurityTypes`. The 2024-11-01 spec lists `TrustedLaunch` and `ConfidentialVM` and models the
/// enum as a string; `Standard` is the value Azure documents for opting a Generation 2 VM out of
/// Trusted Launch (and lists from API version 2025-11-01 on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecurityType {
    /// Secure Boot and vTPM available (Generation 2 images only).
    TrustedLaunch,
    /// Confidential VM (DC/EC sizes; dsinfra does not create these).
    #[serde(rename = "ConfidentialVM")]
    ConfidentialVm,
    /// No UEFI security features.
    Standard,
}

/// `UefiSettings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UefiSettings {
    /// Only signed boot loaders, kernels and kernel modules load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot_enabled: Option<bool>,
    /// A virtual TPM (measured boot, attestation).
    #[serde(
        default,
        rename = "vTpmEnabled",
        skip_serializing_if = "Option::is_none"
    )]
    pub v_tpm_enabled: Option<bool>,
}

/// `VirtualMachinePriorityTypes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VirtualMachinePriority {
    /// Pay-as-you-go.
    Regular,
    /// Legacy low priority.
    Low,
    /// Spot.
    Spot,
}

/// `VirtualMachineEvictionPolicyTypes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VirtualMachineEvictionPolicy {
    /// Deallocate on eviction.
    Deallocate,
    /// Delete on eviction.
    Delete,
}

/// `BillingProfile`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BillingProfile {
    /// Maximum Spot price per hour in USD; -1 means up to the pay-as-you-go price.
    pub max_price: f64,
}

/// `OSProfile`, Linux only.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsProfile {
    /// Host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computer_name: Option<String>,
    /// The admin user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_username: Option<String>,
    /// Base64 cloud-init; secret-bearing, so it never prints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_data: Option<Secret>,
    /// SSH-only Linux settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linux_configuration: Option<LinuxConfiguration>,
}

/// `LinuxConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinuxConfiguration {
    /// dsinfra always sets true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_password_authentication: Option<bool>,
    /// Authorised keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<SshConfiguration>,
    /// Whether to install the VM agent. The spec spells it `provisionVMAgent`; camelCase
    /// would send `provisionVmAgent`, which ARM ignores as unknown.
    #[serde(
        default,
        rename = "provisionVMAgent",
        skip_serializing_if = "Option::is_none"
    )]
    pub provision_vm_agent: Option<bool>,
}

/// `SshConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SshConfiguration {
    /// Keys for authorized_keys.
    #[serde(default)]
    pub public_keys: Vec<SshPublicKey>,
}

/// `SshPublicKey`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SshPublicKey {
    /// e.g. `/home/azureuser/.ssh/authorized_keys`.
    pub path: String,
    /// The OpenSSH public key line.
    pub key_data: String,
}

/// `NetworkProfile`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkProfile {
    /// NICs by id.
    #[serde(default)]
    pub network_interfaces: Vec<NetworkInterfaceReference>,
}

/// `NetworkInterfaceReference`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceReference {
    /// The NIC's id.
    pub id: String,
    /// Primary flag and delete behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<NetworkInterfaceReferenceProperties>,
}

/// `NetworkInterfaceReferenceProperties`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceReferenceProperties {
    /// Whether this is the primary NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// Delete or Detach with the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DiskDeleteOption>,
}

/// `VirtualMachineInstanceView` (GET `.../instanceView`), the fields dsinfra reads.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceView {
    /// Host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computer_name: Option<String>,
    /// OS name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_name: Option<String>,
    /// OS version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_version: Option<String>,
    /// V1 or V2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyper_v_generation: Option<String>,
    /// Provisioning and power statuses.
    #[serde(default)]
    pub statuses: Vec<InstanceViewStatus>,
}

/// `InstanceViewStatus`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceViewStatus {
    /// e.g. `PowerState/running`, `ProvisioningState/succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Info, Warning or Error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// e.g. `VM running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_status: Option<String>,
    /// Detail text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// A VM's power state, from its `PowerState/...` status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PowerState {
    /// Booting.
    Starting,
    /// Running (billed).
    Running,
    /// Shutting down.
    Stopping,
    /// Stopped but allocated: still billed for compute.
    Stopped,
    /// Releasing its host.
    Deallocating,
    /// Released: compute is not billed.
    Deallocated,
    /// A state this client does not know, kept as sent.
    Other(String),
}

impl PowerState {
    /// Reads `PowerState/running` and the like; `None` for other status codes.
    pub fn from_code(code: &str) -> Option<Self> {
        let (prefix, state) = code.split_once('/')?;
        if !prefix.eq_ignore_ascii_case("PowerState") {
            return None;
        }
        Some(match state.to_ascii_lowercase().as_str() {
            "starting" => Self::Starting,
            "running" => Self::Running,
            "stopping" => Self::Stopping,
            "stopped" => Self::Stopped,
            "deallocating" => Self::Deallocating,
            "deallocated" => Self::Deallocated,
            _ => Self::Other(state.to_string()),
        })
    }

    /// Whether compute is billed in this state (everything but deallocated).
    pub fn is_billed(&self) -> bool {
        !matches!(self, Self::Deallocated)
    }
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::Deallocating => "deallocating",
            Self::Deallocated => "deallocated",
            Self::Other(s) => s,
        })
    }
}

impl VirtualMachineInstanceView {
    /// The power state, if the view reports one.
    pub fn power_state(&self) -> Option<PowerState> {
        self.statuses
            .iter()
            .filter_map(|s| s.code.as_deref())
            .find_map(PowerState::from_code)
    }

    /// The `ProvisioningState/...` suffix, e.g. `succeeded`.
    pub fn provisioning_state(&self) -> Option<&str> {
        self.statuses
            .iter()
            .filter_map(|s| s.code.as_deref())
            .find_map(|c| {
                c.split_once('/')
                    .filter(|(p, _)| p.eq_ignore_ascii_case("ProvisioningState"))
                    .map(|(_, s)| s)
            })
    }
}

/// The VM power actions (POST `.../{action}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmAction {
    /// Stop and release the host: compute billing stops.
    Deallocate,
    /// Start a stopped or deallocated VM.
    Start,
    /// Stop but keep the host: still billed.
    PowerOff,
    /// Reboot.
    Restart,
}

impl VmAction {
    /// The action's path segment.
    pub fn path(self) -> &'static str {
        match self {
            Self::Deallocate => "deallocate",
            Self::Start => "start",
            Self::PowerOff => "powerOff",
            Self::Restart => "restart",
        }
    }

    /// Whether repeating the action is harmless: deallocate, start and powerOff end in the same
    /// state however often they run; restart reboots again.
    pub fn is_idempotent(self) -> bool {
        !matches!(self, Self::Restart)
    }
}

#[cfg(test)]
mod tests;
