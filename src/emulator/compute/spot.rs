//! Spot VMs (decision 75): the body rules ARM applies to `priority`, `evictionPolicy` and
//! `billingProfile.maxPrice`, the current spot price (the shipped catalog's), the low-priority
//! quota they count against, and evictions: `simulateEviction` (the real API, 204) or the
//! admin route schedule a `Preempt` event that the VM (and every VM of its availability set, as
//! Scheduled Events are delivered on Azure) reads from the IMDS stand-in; once its `NotBefore`
//! has passed, the VM is deallocated or deleted as its policy says.
//!
//! Sources: the compute spec's descriptions (2024-11-01: `priority`, `evictionPolicy`,
//! `billingProfile.maxPrice`: "-1 ... up to on-demand", compared "at the time of create/update"
//! and the operation "will only succeed if the maxPrice is greater than the current Azure Spot
//! price"), the Scheduled Events document shape (`DocumentIncarnation`, `Events[]` with
//! `EventId`, `EventType` Preempt, `ResourceType`, `Resources`, `EventStatus`, `NotBefore` in
//! RFC 1123, `Description`, `EventSource`, `DurationInSeconds`), and, marked as recalled in
//! docs/decisions.md (not re-read here: no network), the error codes and words of ARM's refusals.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::avset::vm_fabric;
use crate::emulator::error::ArmError;
use crate::emulator::json::At as _;
use crate::emulator::ops::Completions;
use crate::emulator::resource::key;
use crate::emulator::store::{Cloud, Evicted, Eviction, Kind, Resource};

/// A VM's priority as stored: `Regular` when the body has none.
pub(crate) fn priority(vm_body: &Value) -> &str {
    vm_body
        .at("/properties/priority")
        .and_then(Value::as_str)
        .unwrap_or("Regular")
}

/// Whether a stored VM is a spot VM (`Low` is the legacy name ARM still accepts).
pub(crate) fn is_spot(vm: &Resource) -> bool {
    matches!(priority(&vm.body), "Spot" | "Low")
}

/// The current spot price of `size` in `location`: the shipped catalog's (`None`: no spot offer).
pub(crate) fn spot_price(size: &str, location: &str) -> Option<f64> {
    crate::catalog::price(size, location).and_then(|p| p.spot)
}

fn invalid(target: &str, message: String) -> ArmError {
    ArmError::new(400, "InvalidParameter", message).with_target(target)
}

/// ARM's checks of a VM body's spot settings: the priority's values, an eviction policy or a
/// price cap only on a spot VM, a spot offer for the size in the region, a cap above zero (or
/// -1) and above the current spot price, and, for an existing VM, a priority and eviction
/// policy that never change and a cap that changes only while the VM is deallocated.
pub(crate) fn check(
    body: &Value,
    existing: Option<&Resource>,
    size: &str,
    location: &str,
) -> Result<(), ArmError> {
    let merged = |pointer: &str| {
        body.at(pointer)
            .cloned()
            .or_else(|| existing.and_then(|vm| vm.body.at(pointer).cloned()))
    };
    let asked = merged("/properties/priority");
    let asked = asked.as_ref().and_then(Value::as_str).unwrap_or("Regular");
    if !matches!(asked, "Regular" | "Low" | "Spot") {
        return Err(invalid(
            "priority",
            format!(
                "The value '{asked}' of parameter 'priority' is not allowed. Allowed values are 'Regular', 'Low', 'Spot'."
            ),
        ));
    }
    if let Some(vm) = existing
        && priority(&vm.body) != asked
    {
        return Err(changed("priority"));
    }
    let spot = asked != "Regular";
    let eviction = merged("/properties/evictionPolicy");
    if let Some(vm) = existing
        && vm.body.at("/properties/evictionPolicy") != eviction.as_ref()
    {
        return Err(changed("evictionPolicy"));
    }
    let max_price = merged("/properties/billingProfile/maxPrice");
    if !spot {
        if eviction.is_some() {
            return Err(invalid(
                "evictionPolicy",
                "Eviction policy can be set only on Azure Spot Virtual Machines.".to_owned(),
            ));
        }
        if max_price.is_some() {
            return Err(invalid(
                "billingProfile",
                "Billing profile can be set only on Azure Spot Virtual Machines.".to_owned(),
            ));
        }
    }
    if !spot {
        return Ok(());
    }
    if let Some(policy) = eviction.as_ref().and_then(Value::as_str)
        && !matches!(policy, "Deallocate" | "Delete")
    {
        return Err(invalid(
            "evictionPolicy",
            format!(
                "The value '{policy}' of parameter 'evictionPolicy' is not allowed. Allowed values are 'Deallocate', 'Delete'."
            ),
        ));
    }
    let Some(current) = spot_price(size, location) else {
        return Err(ArmError::new(
            409,
            "SkuNotAvailable",
            format!(
                "The requested VM size {size} is not available for Azure Spot Virtual Machines in \
                 location '{location}'. Please try another size or deploy to a different location."
            ),
        )
        .with_target("hardwareProfile.vmSize"));
    };
    let cap = match &max_price {
        None => -1.0,
        Some(v) => v.as_f64().ok_or_else(|| {
            invalid(
                "billingProfile.maxPrice",
                "maxPrice must be a number".to_owned(),
            )
        })?,
    };
    let is_default = (cap + 1.0).abs() < f64::EPSILON;
    if !is_default && cap <= 0.0 {
        return Err(invalid(
            "billingProfile.maxPrice",
            format!("The maxPrice '{cap}' is not valid: it must be -1 or greater than zero."),
        ));
    }
    let cap_changed = existing
        .is_some_and(|vm| vm.body.at("/properties/billingProfile/maxPrice") != max_price.as_ref());
    if cap_changed && existing.is_some_and(super::quota::holds_cores) {
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            "The maxPrice of an Azure Spot Virtual Machine can be changed only while it is \
             deallocated.",
        )
        .with_target("billingProfile.maxPrice"));
    }
    if existing.is_none() || cap_changed {
        below_spot(cap, current, size)?;
    }
    Ok(())
}

/// A cap under the current spot price: ARM refuses to allocate (a create, or a start).
pub(crate) fn below_spot(cap: f64, current: f64, size: &str) -> Result<(), ArmError> {
    if (cap + 1.0).abs() < f64::EPSILON || cap >= current {
        return Ok(());
    }
    Err(ArmError::new(
        409,
        "OperationNotAllowed",
        format!(
            "Unable to perform operation since the provided maxPrice '{cap} USD' is lower than the \
             current spot price '{current} USD' for Azure Spot VM size '{size}'."
        ),
    )
    .with_target("billingProfile.maxPrice"))
}

/// Starting a deallocated spot VM allocates it again at the current spot price.
pub(crate) fn check_start(vm: &Resource) -> Result<(), ArmError> {
    if !is_spot(vm) {
        return Ok(());
    }
    let size = super::quota::vm_size(vm).unwrap_or_default();
    let location = crate::emulator::config::normalize_location(vm.location());
    let Some(current) = spot_price(size, &location) else {
        return Ok(());
    };
    let cap = vm
        .body
        .at("/properties/billingProfile/maxPrice")
        .and_then(Value::as_f64)
        .unwrap_or(-1.0);
    below_spot(cap, current, size)
}

fn changed(property: &str) -> ArmError {
    ArmError::new(
        409,
        "PropertyChangeNotAllowed",
        format!("Changing property '{property}' is not allowed."),
    )
    .with_target(property)
}

/// Spot and regular VMs never share an availability set (decision 75): the VM asking to join
/// `set` with `asked` priority is refused when a member of the other kind is there.
pub(crate) fn check_set_members(cloud: &Cloud, body: &Value, vm_key: &str) -> Result<(), ArmError> {
    let Some(set) = body
        .at("/properties/availabilitySet/id")
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    let asked_spot = matches!(priority(body), "Spot" | "Low");
    let set = key(set);
    let other = cloud.of_kind(Kind::VirtualMachine).into_iter().find(|vm| {
        key(&vm.id) != vm_key
            && vm_fabric(vm).map(key).as_deref() == Some(set.as_str())
            && is_spot(vm) != asked_spot
    });
    match other {
        Some(member) => Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Virtual machine priority '{}' is not allowed in availability set '{}': it holds \
                 virtual machine '{}' of priority '{}'. Spot and regular virtual machines cannot \
                 be mixed in one availability set.",
                if asked_spot { "Spot" } else { "Regular" },
                set.rsplit('/').next().unwrap_or_default(),
                member.name(),
                priority(&member.body)
            ),
        )
        .with_target("availabilitySet.id")),
        None => Ok(()),
    }
}

/// Announces the eviction of the VM at `vm_key` (a spot VM) in `notice` seconds.
///
/// # Errors
///
/// No such VM, or a VM that is not a running spot VM (ARM's `simulateEviction` answers
/// OperationNotAllowed for a regular VM).
pub(crate) fn schedule(
    cloud: &mut Cloud,
    vm_key: &str,
    now: DateTime<Utc>,
    notice: u64,
) -> Result<Eviction, ArmError> {
    let Some(vm) = cloud
        .resources
        .get(vm_key)
        .filter(|r| r.kind == Kind::VirtualMachine && !r.hidden)
    else {
        return Err(ArmError::new(
            404,
            "ResourceNotFound",
            format!("The VM '{vm_key}' was not found."),
        ));
    };
    if !is_spot(vm) {
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Operation 'simulateEviction' is allowed only on Azure Spot Virtual Machines; \
                 '{}' is not one.",
                vm.name()
            ),
        ));
    }
    if vm.power.as_deref() != Some("running") {
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Operation 'simulateEviction' is not allowed on VM '{}' since it is not running.",
                vm.name()
            ),
        ));
    }
    if let Some(already) = cloud.evictions.iter().find(|e| e.vm == vm_key) {
        return Ok(already.clone());
    }
    let eviction = Eviction {
        event_id: uuid::Uuid::new_v4().to_string().to_ascii_uppercase(),
        vm: vm_key.to_owned(),
        name: vm.name().to_owned(),
        fabric: vm_fabric(vm).map(key),
        not_before: now + chrono::Duration::seconds(i64::try_from(notice).unwrap_or(i64::MAX / 4)),
    };
    cloud.evictions.push(eviction.clone());
    cloud.event_incarnation += 1;
    Ok(eviction)
}

/// [`evict_due`] as a timer of the emulator's clock (`ops::Completions::on_tick`): an evicted
/// VM that goes is deleted as a completed DELETE deletes it, with the kind's hooks.
pub(crate) fn tick(cloud: &mut Cloud, now: DateTime<Utc>, completions: &Completions) -> bool {
    evict_due(cloud, now, &|cloud: &mut Cloud, vm: &str| {
        completions.run_deleted(cloud, Kind::VirtualMachine, vm);
        cloud.remove_tree(vm);
    })
}

/// Carries out the evictions whose notice has run out: a `Deallocate` VM is deallocated (its
/// cores freed, its disks kept), a `Delete` VM is deleted with the disks that go with it (through
/// `delete`, the emulator's deletion). Returns whether anything happened.
pub(crate) fn evict_due(
    cloud: &mut Cloud,
    now: DateTime<Utc>,
    delete: &dyn Fn(&mut Cloud, &str),
) -> bool {
    let (due, later): (Vec<Eviction>, Vec<Eviction>) = std::mem::take(&mut cloud.evictions)
        .into_iter()
        .partition(|e| e.not_before <= now);
    cloud.evictions = later;
    if due.is_empty() {
        return false;
    }
    cloud.event_incarnation += 1;
    for eviction in due {
        let Some(vm) = cloud.resources.get(&eviction.vm) else {
            continue;
        };
        let deleted = vm
            .body
            .at("/properties/evictionPolicy")
            .and_then(Value::as_str)
            == Some("Delete");
        if deleted {
            delete(cloud, &eviction.vm);
        } else if let Some(vm) = cloud.resources.get_mut(&eviction.vm) {
            vm.power = Some("deallocated".into());
            vm.changed = Some(eviction.not_before);
        }
        cloud.evicted.push(Evicted {
            vm: eviction.vm,
            name: eviction.name,
            deleted,
        });
    }
    // Drained by the boot hooks; bounded for an emulator run without them.
    let excess = cloud.evicted.len().saturating_sub(256);
    cloud.evicted.drain(..excess);
    true
}

/// The Scheduled Events document the VM at `vm_key` reads: the evictions of itself and of the
/// members of its availability set.
pub(crate) fn scheduled_events(cloud: &Cloud, vm_key: &str) -> Value {
    let fabric = cloud.resources.get(vm_key).and_then(vm_fabric).map(key);
    let events: Vec<Value> = cloud
        .evictions
        .iter()
        .filter(|e| e.vm == vm_key || (fabric.is_some() && e.fabric == fabric))
        .map(|e| {
            json!({
                "EventId": e.event_id,
                "EventStatus": "Scheduled",
                "EventType": "Preempt",
                "ResourceType": "VirtualMachine",
                "Resources": [e.name],
                "NotBefore": e.not_before.format("%a, %d %b %Y %H:%M:%S GMT").to_string(),
                "Description": "The virtual machine is being evicted: Azure needs the capacity back.",
                "EventSource": "Platform",
                "DurationInSeconds": -1,
            })
        })
        .collect();
    json!({"DocumentIncarnation": cloud.event_incarnation, "Events": events})
}

#[cfg(test)]
mod tests;
