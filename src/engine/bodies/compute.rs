//! Compute bodies: VMs (image, OS and data disks, NIC references, the security profile;
//! customData is added at create time by `Request::with_custom_data`), managed disks, proximity
//! placement groups, availability sets and the auto-shutdown schedule.

use serde_json::Value;

use crate::azure::types::SubResource;
use crate::azure::types::availability::{
    AvailabilitySet, AvailabilitySetProperties, AvailabilitySetSku,
};
use crate::azure::types::compute::{
    BillingProfile, DataDisk, DiskCreateOptionType, DiskDeleteOption, DiskStorageAccountType,
    HardwareProfile, ImageReference, LinuxConfiguration, ManagedDiskParameters,
    NetworkInterfaceReference, NetworkInterfaceReferenceProperties, NetworkProfile, OsDisk,
    OsProfile, SecurityProfile, SecurityType, SshConfiguration, SshPublicKey, StorageProfile,
    UefiSettings, VirtualMachine, VirtualMachineEvictionPolicy, VirtualMachineIdentity,
    VirtualMachinePriority, VirtualMachineProperties,
};
use crate::azure::types::devtestlab::Schedule;
use crate::azure::types::disk::Disk;
use crate::azure::types::placement::{
    PlacementIntent, ProximityPlacementGroup, ProximityPlacementGroupProperties,
    ProximityPlacementGroupType,
};

use super::{BodyError, Builder};

/// A VM's `priority`, `evictionPolicy` and `billingProfile`.
type SpotSettings = (
    Option<VirtualMachinePriority>,
    Option<VirtualMachineEvictionPolicy>,
    Option<BillingProfile>,
);

impl Builder<'_> {
    pub(crate) fn placement_group(&self) -> Result<ProximityPlacementGroup, BodyError> {
        let sizes = self.texts("vm_sizes")?;
        Ok(ProximityPlacementGroup {
            location: self.location()?,
            tags: self.tags()?,
            zones: self.zones()?,
            properties: Some(ProximityPlacementGroupProperties {
                proximity_placement_group_type: Some(ProximityPlacementGroupType::Standard),
                intent: (!sizes.is_empty()).then_some(PlacementIntent { vm_sizes: sizes }),
                ..ProximityPlacementGroupProperties::default()
            }),
            ..ProximityPlacementGroup::default()
        })
    }

    /// A cluster's InfiniBand fabric: the set, in the cluster's placement group when it has one.
    pub(crate) fn availability_set(&self) -> Result<AvailabilitySet, BodyError> {
        if self.opt_text("sku")?.as_deref() != Some("Aligned") {
            // Managed disks need an Aligned set; dsinfra never makes unmanaged disks.
            return Err(self.invalid("sku", "must be Aligned (the VMs have managed disks)"));
        }
        Ok(AvailabilitySet {
            location: self.location()?,
            tags: self.tags()?,
            sku: Some(AvailabilitySetSku::aligned()),
            properties: Some(AvailabilitySetProperties {
                platform_fault_domain_count: self.opt_i32("fault_domain_count")?,
                platform_update_domain_count: self.opt_i32("update_domain_count")?,
                proximity_placement_group: self
                    .reference_id("proximity_placement_group")?
                    .map(SubResource::new),
                ..AvailabilitySetProperties::default()
            }),
            ..AvailabilitySet::default()
        })
    }

    fn image(&self) -> Result<ImageReference, BodyError> {
        let image = self.value("image").ok_or_else(|| self.missing("image"))?;
        let part = |key: &str| image.get(key).and_then(Value::as_str).map(str::to_owned);
        let reference = ImageReference {
            publisher: part("publisher"),
            offer: part("offer"),
            sku: part("sku"),
            version: part("version").or_else(|| Some("latest".to_owned())),
            ..ImageReference::default()
        };
        if reference.publisher.is_none() || reference.offer.is_none() || reference.sku.is_none() {
            return Err(self.invalid("image", "needs a publisher, an offer and a sku"));
        }
        Ok(reference)
    }

    /// `securityProfile` from the VM's `security` attribute (manifest::expand::security chose
    /// it): Trusted Launch with its UEFI settings, or none at all for `Standard`. `Standard` is
    /// sent only when the connected preflight marked it `explicit`: ARM accepts it from REST
    /// clients only on subscriptions registered for `UseStandardSecurityType`, and a body without
    /// a profile gets a VM without Trusted Launch unless the subscription gives it by default
    /// (issue 29, item 5; decisions 59 and 61).
    fn security_profile(&self) -> Result<Option<SecurityProfile>, BodyError> {
        let security = self
            .value("security")
            .ok_or_else(|| self.missing("security"))?;
        let flag = |key: &str| {
            security
                .get(key)
                .and_then(Value::as_bool)
                .ok_or_else(|| self.invalid("security", format!("needs `{key}` (true or false)")))
        };
        let kind = security.get("type").and_then(Value::as_str);
        match kind {
            Some("TrustedLaunch") => Ok(Some(SecurityProfile {
                security_type: Some(SecurityType::TrustedLaunch),
                uefi_settings: Some(UefiSettings {
                    secure_boot_enabled: Some(flag("secure_boot")?),
                    v_tpm_enabled: Some(flag("vtpm")?),
                }),
            })),
            Some("Standard") if security.get("explicit").and_then(Value::as_bool) == Some(true) => {
                Ok(Some(SecurityProfile {
                    security_type: Some(SecurityType::Standard),
                    uefi_settings: None,
                }))
            }
            Some("Standard") => Ok(None),
            _ => Err(self.invalid("security", "`type` must be TrustedLaunch or Standard")),
        }
    }

    fn data_disks(&self) -> Result<Vec<DataDisk>, BodyError> {
        #[derive(serde::Deserialize)]
        struct DiskAttr {
            lun: i32,
            disk: String,
        }
        let raw = self
            .value("data_disks")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let disks: Vec<DiskAttr> =
            serde_json::from_value(raw).map_err(|e| self.invalid("data_disks", e.to_string()))?;
        disks
            .into_iter()
            .map(|d| {
                let id = self
                    .target("data_disks", &d.disk)?
                    .arm_id(self.subscription);
                Ok(DataDisk::attach(d.lun, &id))
            })
            .collect()
    }

    /// `identity = {"type": "SystemAssigned"}`: the head of a block that parks when idle.
    fn identity(&self) -> Result<Option<VirtualMachineIdentity>, BodyError> {
        let Some(identity) = self.value("identity") else {
            return Ok(None);
        };
        match identity.get("type").and_then(Value::as_str) {
            Some(kind @ "SystemAssigned") => Ok(Some(VirtualMachineIdentity {
                kind: kind.to_owned(),
                principal_id: None,
                tenant_id: None,
            })),
            _ => Err(self.invalid("identity", "`type` must be SystemAssigned")),
        }
    }

    /// `priority`, `evictionPolicy` and `billingProfile.maxPrice` of a spot VM; none of them for
    /// a regular one (ARM's default priority is Regular, and it refuses an eviction policy or a
    /// price cap on a regular VM).
    fn spot(&self) -> Result<SpotSettings, BodyError> {
        match self.opt_text("priority")?.as_deref() {
            None | Some("Regular") => Ok((None, None, None)),
            Some("Spot") => {
                let eviction = match self.opt_text("eviction_policy")?.as_deref() {
                    None | Some("Deallocate") => VirtualMachineEvictionPolicy::Deallocate,
                    Some("Delete") => VirtualMachineEvictionPolicy::Delete,
                    Some(_) => {
                        return Err(self.invalid("eviction_policy", "must be Deallocate or Delete"));
                    }
                };
                let max_price = match self.value("max_price") {
                    None | Some(Value::Null) => -1.0,
                    Some(v) => v
                        .as_f64()
                        .ok_or_else(|| self.invalid("max_price", "must be a number"))?,
                };
                Ok((
                    Some(VirtualMachinePriority::Spot),
                    Some(eviction),
                    Some(BillingProfile { max_price }),
                ))
            }
            Some(_) => Err(self.invalid("priority", "must be Regular or Spot")),
        }
    }

    pub(crate) fn virtual_machine(&self) -> Result<VirtualMachine, BodyError> {
        let name = &self.resource.name;
        let admin = self.text("admin_username")?;
        let keys = self.texts("ssh_public_keys")?;
        if keys.is_empty() {
            return Err(self.missing("ssh_public_keys"));
        }
        let os_disk_sku = match self.value("os_disk_sku") {
            Some(_) => Some(self.wire_enum::<DiskStorageAccountType>("os_disk_sku")?),
            None => None,
        };
        let nic = self
            .reference_id("nic")?
            .ok_or_else(|| self.missing("nic"))?;
        let data_disks = self.data_disks()?;
        let (priority, eviction_policy, billing_profile) = self.spot()?;
        Ok(VirtualMachine {
            location: self.location()?,
            tags: self.tags()?,
            zones: self.zones()?,
            identity: self.identity()?,
            properties: Some(VirtualMachineProperties {
                hardware_profile: Some(HardwareProfile {
                    vm_size: self.text("size")?,
                }),
                storage_profile: Some(StorageProfile {
                    image_reference: Some(self.image()?),
                    os_disk: Some(OsDisk {
                        os_type: None,
                        // A deterministic name and deleteOption Delete: the OS disk goes with
                        // the VM, so a deleted or replaced VM leaves no orphaned disk.
                        name: Some(format!("{name}-osdisk")),
                        caching: None,
                        create_option: DiskCreateOptionType::FromImage,
                        disk_size_gb: self.opt_i32("os_disk_size_gb")?,
                        managed_disk: os_disk_sku.map(|sku| ManagedDiskParameters {
                            id: None,
                            storage_account_type: Some(sku),
                        }),
                        delete_option: Some(DiskDeleteOption::Delete),
                    }),
                    data_disks: (!data_disks.is_empty()).then_some(data_disks),
                }),
                os_profile: Some(OsProfile {
                    computer_name: Some(name.clone()),
                    admin_username: Some(admin.clone()),
                    custom_data: None,
                    linux_configuration: Some(LinuxConfiguration {
                        disable_password_authentication: Some(true),
                        ssh: Some(SshConfiguration {
                            public_keys: keys
                                .into_iter()
                                .map(|key_data| SshPublicKey {
                                    path: format!("/home/{admin}/.ssh/authorized_keys"),
                                    key_data,
                                })
                                .collect(),
                        }),
                        // Left to the image default: the body type spells the property
                        // `provisionVmAgent`, the spec `provisionVMAgent` (reported to the lead).
                        provision_vm_agent: None,
                    }),
                }),
                network_profile: Some(NetworkProfile {
                    network_interfaces: vec![NetworkInterfaceReference {
                        id: nic,
                        properties: Some(NetworkInterfaceReferenceProperties {
                            primary: Some(true),
                            // The NIC is a resource of its own in the plan: deleting the VM
                            // detaches it and the engine deletes it in order.
                            delete_option: Some(DiskDeleteOption::Detach),
                        }),
                    }],
                }),
                proximity_placement_group: self
                    .reference_id("proximity_placement_group")?
                    .map(SubResource::new),
                security_profile: self.security_profile()?,
                availability_set: self.reference_id("availability_set")?.map(SubResource::new),
                priority,
                eviction_policy,
                billing_profile,
                ..VirtualMachineProperties::default()
            }),
            ..VirtualMachine::default()
        })
    }

    pub(crate) fn disk(&self) -> Result<Disk, BodyError> {
        let size = self
            .opt_i32("size_gb")?
            .ok_or_else(|| self.missing("size_gb"))?;
        Ok(Disk::empty(
            self.location()?,
            size,
            self.wire_enum("sku")?,
            self.zones()?,
            self.tags()?,
        ))
    }

    pub(crate) fn schedule(&self) -> Result<Schedule, BodyError> {
        let vm = self.reference_id("vm")?.ok_or_else(|| self.missing("vm"))?;
        // The manifest writes HH:MM; DevTestLab wants HHMM.
        let time = self.text("time")?.replace(':', "");
        let zone = self
            .opt_text("time_zone")?
            .unwrap_or_else(|| "UTC".to_owned());
        let mut schedule =
            Schedule::vm_auto_shutdown(self.location()?, &vm, &time, &zone, self.tags()?);
        if self.opt_text("status")?.as_deref() == Some("Disabled") {
            schedule.properties.status =
                Some(crate::azure::types::devtestlab::EnableStatus::Disabled);
        }
        Ok(schedule)
    }
}
