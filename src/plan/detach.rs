//! Data disks a plan takes away from a VM that stays: the engine unmounts each on its VM before
//! the VM's update detaches it in Azure (a disk pulled while mounted loses what the page cache
//! still holds, and the VM keeps a dead mount). Like stopping BeeOND before `destroy`, this is a
//! step that must run before an ARM change, so the plan names it.

use serde_json::Value;

use super::Plan;
use super::change::Action;
use crate::addr::Address;
use crate::model::ResourceKind;

/// One data disk leaving one VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskDetach {
    /// The VM resource it leaves (`vm.prep.vm`).
    pub vm: Address,
    /// The disk (`disk.datasets`).
    pub disk: Address,
    /// The LUN it is attached at on that VM now.
    pub lun: u64,
}

/// `(disk address, lun)` of a VM's `data_disks` attribute.
fn attached(attrs: Option<&crate::model::Attrs>) -> Vec<(String, u64)> {
    attrs
        .and_then(|a| a.get("data_disks"))
        .and_then(Value::as_array)
        .map(|disks| {
            disks
                .iter()
                .filter_map(|d| {
                    Some((d.get("disk")?.as_str()?.to_owned(), d.get("lun")?.as_u64()?))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Plan {
    /// The data disks this plan detaches from VMs updated in place: in a VM's `data_disks`
    /// before and not after (moved to another VM, detached, or deleted). A VM that is deleted
    /// or replaced takes its mounts with it and is not listed.
    pub fn disk_detaches(&self) -> Vec<DiskDetach> {
        let mut out = Vec::new();
        for change in &self.changes {
            if change.kind != ResourceKind::VirtualMachine || change.action != Action::Update {
                continue;
            }
            let after = attached(change.after.as_ref());
            for (disk, lun) in attached(change.before.as_ref()) {
                if after.iter().any(|(d, _)| *d == disk) {
                    continue;
                }
                if let Ok(disk) = disk.parse() {
                    out.push(DiskDetach {
                        vm: change.address.clone(),
                        disk,
                        lun,
                    });
                }
            }
        }
        out
    }
}

/// The plan's notes about [`Plan::disk_detaches`], one per disk.
pub(super) fn detach_notes(plan: &Plan) -> Vec<String> {
    plan.disk_detaches()
        .iter()
        .map(|d| {
            format!(
                "{} is unmounted on {} (lun {}) before Azure detaches it; apply stops there if it is busy",
                d.disk,
                d.vm.block_address(),
                d.lun
            )
        })
        .collect()
}
