//! Which updates go to ARM as a PATCH (decision 28): a VM update that changes only its data
//! disks and/or tags, and a managed-disk update that changes only its size, SKU and/or tags.
//! The PATCH carries just what changed; every other update stays a full PUT of the model.
//! An AmlCompute update that changes only its node count and/or idle time is its PATCH
//! (`ClusterUpdateParameters`, which carries scale settings only): a PUT of an existing compute
//! overwrites it. A tags change goes as the PUT, the only body that carries them.
//!
//! Why: a PUT re-sends the whole VM (its OS profile and image, its network and security
//! profiles), so it can race with a concurrent change made elsewhere and restate properties ARM
//! refuses to see changed; a PATCH says only what this run changes. Attaching and detaching disks
//! (the data-disk move of decision 25) and retagging are exactly such updates.

use crate::azure::types::compute::{
    StorageProfile, VirtualMachineUpdate, VirtualMachineUpdateProperties,
};
use crate::azure::types::disk::{DiskSku, DiskUpdate, DiskUpdateProperties};
use crate::azure::types::ml::ClusterUpdateParameters;
use crate::model::Attrs;

use super::{Body, Request};

/// The attributes whose change a VM PATCH can carry.
const VM_PATCHABLE: [&str; 2] = ["data_disks", "tags"];
/// The attributes whose change a disk PATCH can carry.
const DISK_PATCHABLE: [&str; 3] = ["size_gb", "sku", "tags"];
/// The attributes whose change an AmlCompute PATCH can carry.
const COMPUTE_PATCHABLE: [&str; 2] = ["count", "idle_seconds_before_scaledown"];

/// The names of the attributes that differ between `before` and `after` (absent and null are
/// the same: no value).
fn changed<'a>(before: &'a Attrs, after: &'a Attrs) -> Vec<&'a str> {
    let value = |attrs: &'a Attrs, name: &str| attrs.get(name).filter(|v| !v.is_null());
    let mut names: Vec<&str> = before
        .keys()
        .chain(after.keys())
        .map(String::as_str)
        .filter(|name| value(before, name) != value(after, name))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The request that updates a resource from `before` to `after`: a PATCH when every changed
/// attribute is one the type's update model carries, else `request` (the full PUT) unchanged.
/// `request` is the PUT [`super::request_for`] built for `after`; the PATCH takes its values.
pub fn update_request(request: Request, before: &Attrs, after: &Attrs) -> Request {
    let changes = changed(before, after);
    if changes.is_empty() {
        return request;
    }
    let body = match &request.body {
        Body::VirtualMachine(vm) if changes.iter().all(|c| VM_PATCHABLE.contains(c)) => {
            let data_disks = changes.contains(&"data_disks").then(|| {
                // The whole new list: arrays replace in a PATCH, so a disk left out is detached.
                vm.properties
                    .as_ref()
                    .and_then(|p| p.storage_profile.as_ref())
                    .and_then(|s| s.data_disks.clone())
                    .unwrap_or_default()
            });
            Body::VirtualMachineUpdate(VirtualMachineUpdate {
                tags: changes
                    .contains(&"tags")
                    .then(|| vm.tags.clone().unwrap_or_default()),
                properties: data_disks.map(|disks| VirtualMachineUpdateProperties {
                    storage_profile: Some(StorageProfile {
                        data_disks: Some(disks),
                        ..StorageProfile::default()
                    }),
                }),
            })
        }
        Body::ManagedDisk(disk) if changes.iter().all(|c| DISK_PATCHABLE.contains(c)) => {
            Body::DiskUpdate(DiskUpdate {
                tags: changes
                    .contains(&"tags")
                    .then(|| disk.tags.clone().unwrap_or_default()),
                sku: changes
                    .contains(&"sku")
                    .then(|| disk.sku.clone().unwrap_or_else(DiskSku::default)),
                properties: changes.contains(&"size_gb").then(|| DiskUpdateProperties {
                    disk_size_gb: disk.properties.as_ref().and_then(|p| p.disk_size_gb),
                }),
            })
        }
        Body::MlCompute(compute) if changes.iter().all(|c| COMPUTE_PATCHABLE.contains(c)) => {
            let Some(scale) = compute
                .properties
                .as_ref()
                .and_then(|p| p.properties.as_ref())
                .and_then(|p| p.scale_settings.clone())
            else {
                return request;
            };
            Body::MlComputeUpdate(ClusterUpdateParameters::scale(scale))
        }
        _ => return request,
    };
    Request {
        id: request.id,
        body,
    }
}
