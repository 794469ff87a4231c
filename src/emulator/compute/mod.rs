//! Microsoft.Compute: VMs (quota, the sizes offered and what they allow, power states, instance
//! view, disks via the VM body), managed disks, proximity placement groups, availability sets
//! (InfiniBand fabrics), and the usages, SKUs and VM sizes endpoints.

use serde_json::{Value, json};

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::json::At as _;
use super::resource::{Target, envelope, key, require_location};
use super::store::{Cloud, Kind, Resource};

mod avset;
mod capabilities;
mod disks;
mod identity;
mod images;
mod power;
mod quota;
mod security;
mod skus;
mod spot;
mod vm;

pub(crate) use avset::{put_avset, vm_fabric};
pub(crate) use disks::{put_disk, release_disks};
pub(crate) use identity::{principal_of, principals};
pub(crate) use images::handle as vm_image;
use power::instance_view;
pub(crate) use power::{power_after, vm_action};
pub(crate) use quota::{check_nodes, pool_nodes, usages};
pub(crate) use skus::{skus, vm_sizes};
pub(crate) use spot::schedule as schedule_eviction;
pub(crate) use spot::{is_spot, scheduled_events, tick as spot_tick};
use vm::CUSTOM_DATA_DIGEST;
pub(crate) use vm::put_vm;

/// Overlays `update` on `base`, object by object.
fn merge(mut base: Value, update: &Value) -> Value {
    match (base.as_object_mut(), update.as_object()) {
        (Some(base_map), Some(update_map)) => {
            for (k, v) in update_map {
                let merged = match base_map.remove(k) {
                    Some(old) if old.is_object() && v.is_object() => merge(old, v),
                    _ => v.clone(),
                };
                base_map.insert(k.clone(), merged);
            }
            base
        }
        _ => update.clone(),
    }
}

/// The GET representation of compute resources.
/// The query rules of a VM list (VirtualMachines_List and _ListAll): `$expand=instanceView`
/// "can only be specified if a valid $filter option is specified" (the spec's words; the only
/// filter is a scale set's, which dsinfra never makes), so without one it is refused.
pub(crate) fn check_vm_list_query(ctx: &Ctx<'_>) -> Result<(), ArmError> {
    if ctx.query("$expand").is_some() && ctx.query("$filter").is_none() {
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            "The $expand=instanceView option of a virtual machine list can only be specified \
             with a valid $filter (virtualMachineScaleSet/id eq ...); use statusOnly=true on \
             the subscription's list for the run-time status of every virtual machine.",
        )
        .with_target("$expand"));
    }
    Ok(())
}

pub(crate) fn render(cloud: &Cloud, ctx: &Ctx<'_>, resource: &Resource) -> Value {
    let mut body = resource.body.clone();
    let now = ctx.now.to_rfc3339();
    match resource.kind {
        Kind::VirtualMachine => {
            if let Some(map) = body.as_object_mut() {
                map.remove(CUSTOM_DATA_DIGEST);
                map.remove(identity::PRINCIPAL_CREATED);
            }
            // A GET's `$expand=instanceView`, or a subscription list's `statusOnly=true`
            // (VirtualMachines_ListAll: the run-time status of every VM).
            let expand = ctx
                .query("$expand")
                .is_some_and(|e| e.eq_ignore_ascii_case("instanceView"))
                || ctx
                    .query("statusOnly")
                    .is_some_and(|s| s.eq_ignore_ascii_case("true"));
            if expand {
                body["properties"]["instanceView"] = instance_view(resource, &now);
            }
            disk_sizes_now(cloud, &mut body["properties"]["storageProfile"]);
        }
        Kind::Disk => {
            let attached = body.get("managedBy").is_some();
            let state = resource.provisioning_state().unwrap_or("Succeeded");
            if state == "Succeeded" || attached {
                body["properties"]["diskState"] =
                    json!(if attached { "Attached" } else { "Unattached" });
            }
        }
        Kind::AvailabilitySet => avset::render_members(cloud, resource, &mut body),
        Kind::ProximityPlacementGroup => {
            let vms: Vec<Value> = ppg_members(cloud, &resource.id)
                .map(|vm| json!({"id": vm.id}))
                .collect();
            body["properties"]["virtualMachines"] = Value::Array(vms);
            let sets: Vec<Value> = avset::in_placement_group(cloud, &resource.id)
                .into_iter()
                .map(|set| json!({"id": set.id}))
                .collect();
            body["properties"]["availabilitySets"] = Value::Array(sets);
            if ctx
                .query("includeColocationStatus")
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
            {
                body["properties"]["colocationStatus"] = json!({
                    "code": "ColocationStatus/Aligned",
                    "level": "Info",
                    "displayStatus": "Aligned",
                    "message": "All resources in the proximity placement group are aligned.",
                });
            }
        }
        _ => {}
    }
    body
}

/// A VM's disks as ARM shows them: each managed disk's `diskSizeGB` is the disk's own, so a
/// disk grown by its PATCH shows its new size in the VM too.
fn disk_sizes_now(cloud: &Cloud, profile: &mut Value) {
    let Some(profile) = profile.as_object_mut() else {
        return;
    };
    let disks = profile
        .iter_mut()
        .flat_map(|(name, value)| match name.as_str() {
            "osDisk" => vec![value],
            "dataDisks" => value
                .as_array_mut()
                .map(|d| d.iter_mut().collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        });
    for disk in disks {
        let size = disk
            .at("/managedDisk/id")
            .and_then(Value::as_str)
            .and_then(|id| cloud.resources.get(&key(id)))
            .and_then(|d| d.body.at("/properties/diskSizeGB").cloned());
        if let Some(size) = size {
            disk["diskSizeGB"] = size;
        }
    }
}

pub(crate) fn put_ppg(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let id = target.id_in(cloud);
    let existing = cloud.resources.get(&target.key).cloned();
    let mut props = body
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    props.remove("virtualMachines");
    props.remove("colocationStatus");
    props
        .entry("proximityPlacementGroupType")
        .or_insert(json!("Standard"));
    let mut stored_body = envelope(
        &id,
        target.name(),
        Kind::ProximityPlacementGroup,
        Some(&location),
        &body,
    );
    stored_body["properties"] = Value::Object(props);
    let ppg = cloud.new_resource(id, Kind::ProximityPlacementGroup, stored_body);
    cloud.put_resource(target.key.clone(), ppg.clone());
    Ok(Reply::json(
        if existing.is_some() { 200 } else { 201 },
        render(cloud, ctx, &ppg),
    ))
}

/// The VMs placed in the proximity placement group `ppg_id`.
fn ppg_members<'c>(cloud: &'c Cloud, ppg_id: &str) -> impl Iterator<Item = &'c Resource> {
    let own = key(ppg_id);
    cloud
        .of_kind(Kind::VirtualMachine)
        .into_iter()
        .filter(move |vm| {
            vm.body
                .at("/properties/proximityPlacementGroup/id")
                .and_then(Value::as_str)
                .is_some_and(|id| key(id) == own)
        })
}

/// The in-use rules of compute DELETEs.
pub(crate) fn check_delete(cloud: &Cloud, resource: &Resource) -> Result<(), ArmError> {
    match resource.kind {
        Kind::Disk => match resource.body.get("managedBy").and_then(Value::as_str) {
            Some(owner) => Err(ArmError::new(
                409,
                "OperationNotAllowed",
                format!("Disk {} is attached to VM {owner}.", resource.name()),
            )),
            None => Ok(()),
        },
        Kind::ProximityPlacementGroup => {
            let users: Vec<String> = ppg_members(cloud, &resource.id)
                .map(|vm| vm.id.clone())
                .chain(
                    avset::in_placement_group(cloud, &resource.id)
                        .into_iter()
                        .map(|set| set.id.clone()),
                )
                .collect();
            if users.is_empty() {
                Ok(())
            } else {
                Err(ArmError::new(
                    409,
                    "OperationNotAllowed",
                    format!(
                        "Proximity placement group {} cannot be deleted as it is in use by the \
                         following resources: {}.",
                        resource.id,
                        users.join(", ")
                    ),
                ))
            }
        }
        Kind::AvailabilitySet => avset::check_delete(cloud, resource),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_overlays_nested_objects() {
        let merged = merge(
            json!({"a": {"b": 1, "c": 2}, "d": 3}),
            &json!({"a": {"b": 9}}),
        );
        assert_eq!(merged, json!({"a": {"b": 9, "c": 2}, "d": 3}));
    }
}
