//! Availability sets as ARM keeps them, and the fabric rule they carry for VMs.
//!
//! Azure connects VMs over InfiniBand only within one availability set (or one
//! single-placement-group scale set), so an availability set stands for an InfiniBand fabric
//! here: [`vm_fabric`] tells which one a VM is in, and the boot hook passes it on (see
//! `super::super::boot`). The rules emulated: a synchronous PUT (200, creation included) that fills in ARM's
//! defaults (`Classic`, 2 fault and 5 update domains) and checks the domain ranges; fault and
//! update domain counts and the placement group cannot change once the set exists; GET lists the
//! member VMs (`virtualMachines`, derived from the VMs that name the set); a set with members
//! cannot be deleted; and a VM joins a set only when it is created.

use serde_json::{Value, json};

use super::super::error::ArmError;
use super::super::http::{Ctx, Reply};
use super::super::json::At as _;
use super::super::resource::{Target, envelope, key, require_location, require_reference};
use super::super::store::{Cloud, Kind, Resource};
use super::render;

/// The properties of a set that ARM refuses to change after creation, as its errors name them.
const FIXED: [&str; 2] = ["platformFaultDomainCount", "platformUpdateDomainCount"];

/// PUT of an availability set.
pub(crate) fn put_avset(
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
    // Derived or read-only: never taken from a request.
    for derived in [
        "virtualMachines",
        "statuses",
        "virtualMachineScaleSetMigrationInfo",
    ] {
        props.remove(derived);
    }
    props.entry("platformFaultDomainCount").or_insert(json!(2));
    props.entry("platformUpdateDomainCount").or_insert(json!(5));
    check_domain(&props, "platformFaultDomainCount", "fault", 3)?;
    check_domain(&props, "platformUpdateDomainCount", "update", 20)?;
    if let Some(ppg) = props
        .get("proximityPlacementGroup")
        .and_then(|p| p.get("id"))
        .and_then(Value::as_str)
    {
        require_reference(cloud, ppg, &id)?;
    }
    if let Some(before) = &existing {
        for name in FIXED {
            if before.body.at(&format!("/properties/{name}")) != props.get(name) {
                return Err(changed(name));
            }
        }
        let ppg_of =
            |v: Option<&Value>| v.and_then(|p| p.get("id")).and_then(Value::as_str).map(key);
        if ppg_of(before.body.at("/properties/proximityPlacementGroup"))
            != ppg_of(props.get("proximityPlacementGroup"))
            && !members(cloud, &before.id).is_empty()
        {
            return Err(changed("proximityPlacementGroup.id"));
        }
    }
    let mut stored_body = envelope(
        &id,
        target.name(),
        Kind::AvailabilitySet,
        Some(&location),
        &body,
    );
    if stored_body.get("sku").is_none() {
        stored_body["sku"] = json!({"name": "Classic"});
    }
    stored_body["properties"] = Value::Object(props);
    let set = cloud.new_resource(id, Kind::AvailabilitySet, stored_body);
    cloud.put_resource(target.key.clone(), set.clone());
    // The spec lists only 200 for this PUT, creation included.
    Ok(Reply::json(200, render(cloud, ctx, &set)))
}

/// ARM's range check of a domain count.
fn check_domain(
    props: &serde_json::Map<String, Value>,
    name: &str,
    what: &str,
    max: i64,
) -> Result<(), ArmError> {
    let value = props.get(name).and_then(Value::as_i64);
    match value {
        Some(n) if (1..=max).contains(&n) => Ok(()),
        _ => Err(ArmError::new(
            400,
            "InvalidParameter",
            format!(
                "The specified {what} domain count {} must fall in the range 1 to {max}.",
                props.get(name).unwrap_or(&Value::Null)
            ),
        )
        .with_target(name)),
    }
}

/// ARM's refusal to change a property that is fixed at creation (or, for a VM, fixed while it
/// is allocated).
pub(super) fn changed(property: &str) -> ArmError {
    ArmError::new(
        409,
        "PropertyChangeNotAllowed",
        format!("Changing property '{property}' is not allowed."),
    )
    .with_target(property)
}

/// The VMs in the set `set_id`, in creation order.
pub(super) fn members<'c>(cloud: &'c Cloud, set_id: &str) -> Vec<&'c Resource> {
    let own = key(set_id);
    cloud
        .of_kind(Kind::VirtualMachine)
        .into_iter()
        .filter(|vm| vm_fabric(vm).is_some_and(|id| key(id) == own))
        .collect()
}

/// The availability set (InfiniBand fabric) a stored VM is in, as its id; `None` outside any.
pub(crate) fn vm_fabric(vm: &Resource) -> Option<&str> {
    vm.body
        .at("/properties/availabilitySet/id")
        .and_then(Value::as_str)
}

/// The availability sets in the proximity placement group `ppg_id`, in creation order.
pub(super) fn in_placement_group<'c>(cloud: &'c Cloud, ppg_id: &str) -> Vec<&'c Resource> {
    let own = key(ppg_id);
    cloud
        .of_kind(Kind::AvailabilitySet)
        .into_iter()
        .filter(|set| {
            set.body
                .at("/properties/proximityPlacementGroup/id")
                .and_then(Value::as_str)
                .is_some_and(|id| key(id) == own)
        })
        .collect()
}

/// The GET representation's derived part: the member VMs.
pub(super) fn render_members(cloud: &Cloud, set: &Resource, body: &mut Value) {
    let vms: Vec<Value> = members(cloud, &set.id)
        .into_iter()
        .map(|vm| json!({"id": vm.id}))
        .collect();
    body["properties"]["virtualMachines"] = Value::Array(vms);
}

/// A set still holding VMs cannot be deleted.
pub(super) fn check_delete(cloud: &Cloud, set: &Resource) -> Result<(), ArmError> {
    if members(cloud, &set.id).is_empty() {
        return Ok(());
    }
    Err(ArmError::new(
        409,
        "OperationNotAllowed",
        format!(
            "Availability Set '{}' cannot be deleted. Before deleting an Availability Set please \
             ensure that it does not contain any VM.",
            set.name()
        ),
    ))
}

/// The checks of a VM PUT that concern its availability set: the set must exist, and a VM joins
/// a set (an InfiniBand fabric) only when it is created. An update that names another set, or a
/// set for a VM created outside one, is refused as ARM refuses it; an update that leaves the
/// property out keeps the VM where it is.
pub(super) fn check_vm_set(
    cloud: &Cloud,
    body: &Value,
    vm_id: &str,
    existing: Option<&Resource>,
) -> Result<(), ArmError> {
    let Some(asked) = body
        .at("/properties/availabilitySet/id")
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    require_reference(cloud, asked, vm_id)?;
    // A VM is placed either by an availability set or by a zone, never both (issue 29, item 7).
    // ARM's exact wording here is not captured in shared/reference/arm.md; the code is the one
    // ARM gives conflicting VM parameters.
    if body
        .get("zones")
        .and_then(Value::as_array)
        .is_some_and(|zones| !zones.is_empty())
    {
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            "Virtual machines in an availability set cannot be placed in an availability zone: \
             remove either 'availabilitySet' or 'zones'.",
        )
        .with_target("zones"));
    }
    match existing {
        Some(vm) if vm_fabric(vm).map(key) != Some(key(asked)) => {
            Err(changed("availabilitySet.id"))
        }
        _ => Ok(()),
    }
}
