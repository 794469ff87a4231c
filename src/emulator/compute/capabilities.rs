//! What a VM's size lets it use, checked on every VM PUT (create, resize, and disks attached
//! later by PUT or PATCH): Premium SSD disks need a size with premium IO, and a NIC with
//! accelerated networking needs a size that supports it. A fact the size's spec leaves unknown
//! allows the request: the emulator refuses only what it knows Azure refuses.

use serde_json::Value;

use crate::emulator::config::{EmulatorConfig, VmSizeSpec};
use crate::emulator::error::ArmError;
use crate::emulator::json::At as _;
use crate::emulator::resource::key;
use crate::emulator::store::Cloud;

/// The disk types that need a size with premium IO: Premium SSD and Premium SSD v2.
fn is_premium(storage_account_type: &str) -> bool {
    ["Premium_LRS", "Premium_ZRS", "PremiumV2_LRS"]
        .iter()
        .any(|t| t.eq_ignore_ascii_case(storage_account_type))
}

/// The type of implicit disks a PUT does not type: Premium SSD where the size can attach it,
/// Standard HDD where it cannot, so the emulator never refuses a disk it chose itself.
pub(super) fn default_disk_type(size: &VmSizeSpec) -> &'static str {
    if size.premium_io == Some(false) {
        "Standard_LRS"
    } else {
        "Premium_LRS"
    }
}

/// ARM's InvalidParameter for a Premium disk on a size without premium IO, naming the first such
/// disk of the VM's storage profile (the one the request leaves after its disks are resolved:
/// what it attaches, creates, and keeps from before). A managed disk's type is its own SKU as
/// stored, so a disk converted since it was attached is judged by what it is now.
pub(super) fn check_premium_disks(
    cloud: &Cloud,
    size: &VmSizeSpec,
    storage_profile: &Value,
) -> Result<(), ArmError> {
    if size.premium_io != Some(false) {
        return Ok(());
    }
    let os = storage_profile
        .get("osDisk")
        .map(|d| (d, "osDisk.managedDisk.storageAccountType"));
    let data = storage_profile
        .get("dataDisks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|d| (d, "dataDisk.managedDisk.storageAccountType"));
    for (disk, target) in os.into_iter().chain(data) {
        let stored = disk
            .at("/managedDisk/id")
            .and_then(Value::as_str)
            .and_then(|id| cloud.resources.get(&key(id)))
            .and_then(|d| d.body.at("/sku/name").and_then(Value::as_str));
        let Some(kind) = stored.or_else(|| {
            disk.at("/managedDisk/storageAccountType")
                .and_then(Value::as_str)
        }) else {
            continue;
        };
        if is_premium(kind) {
            let name = disk.get("name").and_then(Value::as_str).unwrap_or_default();
            return Err(ArmError::new(
                400,
                "InvalidParameter",
                format!(
                    "Requested operation cannot be performed because the VM size {} does not \
                     support the storage account type {kind} of disk '{name}'. Consider updating \
                     the VM to a size that supports Premium storage.",
                    size.name
                ),
            )
            .with_target(target));
        }
    }
    Ok(())
}

/// ARM's VMSizeIsNotPermittedToEnableAcceleratedNetworking when one of the NICs a VM PUT names
/// has accelerated networking enabled and the size does not support it. The message lists the
/// sizes offered in the VM's location that the emulator allows it on (every size not known to
/// lack it).
pub(super) fn check_accelerated_networking(
    cloud: &Cloud,
    config: &EmulatorConfig,
    size: &VmSizeSpec,
    properties: &Value,
    location: &str,
    vm_id: &str,
) -> Result<(), ArmError> {
    if size.accelerated_networking != Some(false) {
        return Ok(());
    }
    let accelerated = properties
        .at("/networkProfile/networkInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|nic| nic.get("id").and_then(Value::as_str))
        .filter_map(|id| cloud.resources.get(&key(id)))
        .any(|nic| {
            nic.body
                .at("/properties/enableAcceleratedNetworking")
                .and_then(Value::as_bool)
                == Some(true)
        });
    if !accelerated {
        return Ok(());
    }
    let location = crate::emulator::config::normalize_location(location);
    let allowed: Vec<&str> = config
        .vm_sizes
        .iter()
        .filter(|s| s.offered_in(&location) && s.accelerated_networking != Some(false))
        .map(|s| s.name.as_str())
        .collect();
    Err(ArmError::new(
        400,
        "VMSizeIsNotPermittedToEnableAcceleratedNetworking",
        format!(
            "Virtual Machine size {} is not in the allowed list of VM sizes for accelerated \
             networking to be enabled on Network Interface {vm_id}. Allowed sizes: {}.",
            size.name,
            allowed.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dv2() -> VmSizeSpec {
        let mut size = VmSizeSpec::new("Standard_D2_v2", 2, "standardDv2Family");
        size.premium_io = Some(false);
        size
    }

    #[test]
    fn premium_disks_are_refused_only_on_a_size_known_to_lack_premium_io() {
        let cloud = Cloud::default();
        let profile = json!({
            "osDisk": {"name": "os", "managedDisk": {"storageAccountType": "StandardSSD_LRS"}},
            "dataDisks": [{"name": "scratch", "lun": 0,
                           "managedDisk": {"storageAccountType": "PremiumV2_LRS"}}]});
        let err = check_premium_disks(&cloud, &dv2(), &profile).expect_err("refused");
        assert_eq!((err.status, err.code.as_str()), (400, "InvalidParameter"));
        assert_eq!(
            err.message,
            "Requested operation cannot be performed because the VM size Standard_D2_v2 does not \
             support the storage account type PremiumV2_LRS of disk 'scratch'. Consider updating \
             the VM to a size that supports Premium storage."
        );
        assert_eq!(
            err.target.as_deref(),
            Some("dataDisk.managedDisk.storageAccountType")
        );
        let unknown = VmSizeSpec::new("Standard_D2_v2", 2, "standardDv2Family");
        assert!(check_premium_disks(&cloud, &unknown, &profile).is_ok());
        assert_eq!(default_disk_type(&dv2()), "Standard_LRS");
        assert_eq!(default_disk_type(&unknown), "Premium_LRS");
    }
}
