//! A managed disk's new SKU: an update in place, under Azure's conditions, checked at plan time.
//!
//! Azure changes a managed disk's type in place, data kept, between Standard HDD, Standard SSD
//! and Premium SSD (locally or zone-redundant), but only while the disk is unattached or the VM
//! it is attached to is deallocated; on an allocated VM (running, or stopped from inside) the
//! update is refused with OperationNotAllowed. There is no such conversion to or from Premium SSD
//! v2 or Ultra Disk: those need a new disk made from a snapshot. (Microsoft Learn, "Change the
//! disk type of an Azure managed disk".)
//!
//! Planned without these checks, the update would fail only at apply, after the resources
//! ordered before it had changed; and replacing the disk instead (what dsinfra did before) would
//! delete the user's data to do what Azure does without loss. So the plan refuses, located at the
//! manifest's `sku`, and says what to do. It does not deallocate the VM itself: stopping a VM the
//! user may have work running on is not a side effect a disk attribute should have; `dsinfra
//! park` is the command that deallocates (decision 32).

use std::collections::BTreeMap;

use serde_json::Value;

use super::change::{Action, Change};
use crate::addr::Address;
use crate::diag::{Diagnostic, Span};
use crate::model::{Desired, Resource, ResourceKind};
use crate::state::{PowerState, ResourceState, State};

/// The attribute holding a managed disk's SKU.
const SKU: &str = "sku";

/// The disk SKUs Azure converts between in place (every other pair needs a new disk).
const CONVERTIBLE: [&str; 5] = [
    "Standard_LRS",
    "StandardSSD_LRS",
    "StandardSSD_ZRS",
    "Premium_LRS",
    "Premium_ZRS",
];

/// One error per managed disk that `changes` updates in place to another SKU when Azure would
/// refuse it: a pair Azure cannot convert, or a disk attached (per the state, which the refresh
/// before the plan keeps true) to a VM that is not deallocated. Located at the manifest's `sku`
/// (the disk block when the manifest layer did not record it).
pub(super) fn disk_sku_changes(
    desired: &Desired,
    state: &State,
    changes: &BTreeMap<Address, Change>,
) -> Vec<Diagnostic> {
    changes
        .values()
        .filter(|c| c.kind == ResourceKind::ManagedDisk && c.action == Action::Update)
        .filter_map(|change| {
            let sku = |attrs: Option<&crate::model::Attrs>| {
                attrs
                    .and_then(|a| a.get(SKU))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let (have, want) = (sku(change.before.as_ref())?, sku(change.after.as_ref())?);
            if have == want {
                return None;
            }
            let resource = desired.resource(&change.address)?;
            if !CONVERTIBLE.contains(&have.as_str()) || !CONVERTIBLE.contains(&want.as_str()) {
                return Some(not_convertible(resource, &have, &want));
            }
            let allocated: Vec<&ResourceState> = state
                .resources
                .iter()
                .filter(|vm| vm.kind == ResourceKind::VirtualMachine)
                .filter(|vm| vm.power_state != Some(PowerState::Deallocated))
                .filter(|vm| holds(vm, &change.address))
                .collect();
            (!allocated.is_empty()).then(|| on_allocated_vm(resource, &have, &want, &allocated))
        })
        .collect()
}

/// Whether the VM's recorded `data_disks` include `disk`.
fn holds(vm: &ResourceState, disk: &Address) -> bool {
    let disk = disk.to_string();
    vm.attrs
        .get("data_disks")
        .and_then(Value::as_array)
        .is_some_and(|disks| disks.iter().any(|d| d["disk"] == disk.as_str()))
}

/// Where a diagnostic about the disk's SKU points.
fn sku_span(resource: &Resource) -> Option<Span> {
    resource
        .attr_spans
        .get(SKU)
        .cloned()
        .or_else(|| resource.span.clone())
}

/// The change Azure cannot make in place at all.
fn not_convertible(resource: &Resource, have: &str, want: &str) -> Diagnostic {
    let block = resource.address.block_address();
    Diagnostic::error(format!(
        "{block} cannot change from {have} to {want} in place: Azure converts a managed disk only between {}",
        CONVERTIBLE.join(", ")
    ))
    .with_span_opt(sku_span(resource))
    .with_label(format!("{have} cannot become {want}"))
    .with_help(format!("keep `sku = \"{have}\"`"))
    .with_help(format!(
        "for a {want} disk, add a new `disk` block, copy the data across (or create it from a snapshot of `{block}`), then remove `{block}`; dsinfra does not replace a disk to change its type, as that would delete its data"
    ))
}

/// The change Azure makes only once the disk's VM is deallocated.
fn on_allocated_vm(
    resource: &Resource,
    have: &str,
    want: &str,
    vms: &[&ResourceState],
) -> Diagnostic {
    let block = resource.address.block_address();
    let names: Vec<String> = vms
        .iter()
        .map(|vm| vm.address.block_address().to_string())
        .collect();
    let states: Vec<String> = vms
        .iter()
        .map(|vm| {
            let how = match vm.power_state {
                Some(PowerState::Running) => "running",
                Some(PowerState::Stopped) => "stopped but still allocated",
                Some(PowerState::Deallocated) | None => "not known to be deallocated",
            };
            format!("{} is {how}", vm.address.block_address())
        })
        .collect();
    let span = sku_span(resource);
    let manifest = span
        .as_ref()
        .map_or_else(|| "<manifest>".to_owned(), |s| s.file.display().to_string());
    let only = names
        .iter()
        .map(|n| format!("--only {n}"))
        .collect::<Vec<_>>()
        .join(" ");
    Diagnostic::error(format!(
        "{block} changes from {have} to {want}, which Azure does only while the disk's VM is deallocated, and {}",
        states.join(", ")
    ))
    .with_span_opt(span)
    .with_label(format!("needs {} deallocated first", names.join(", ")))
    .with_help(format!(
        "park it first: `dsinfra park {manifest} {only}` deallocates it and keeps its disks and their data (only the temp disk is lost); apply again, then `dsinfra unpark {manifest} {only}` starts it"
    ))
    .with_help(format!(
        "or keep `sku = \"{have}\"` for now; dsinfra neither replaces the disk (that would delete its data) nor stops the VM on its own"
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::model::{Desired, ResourceKind};
    use crate::plan::fixtures::{addr, dual, normal, resource, set};
    use crate::plan::{Action, plan};
    use crate::state::{PowerState, State};

    /// The `dual` experiment with a data disk of SKU `sku` attached to the GPU VM.
    fn with_disk(sku: &str) -> Desired {
        let mut desired = dual();
        desired.resources.push(resource(
            "disk.datasets",
            ResourceKind::ManagedDisk,
            "exp-datasets",
            &["resource_group.main"],
            &json!({"location": "eastus", "size_gb": 1024, "sku": sku, "zone": null}),
        ));
        let vm = addr("vm.gpu.vm");
        let gpu = desired
            .resources
            .iter_mut()
            .find(|r| r.address == vm)
            .expect("dual has vm.gpu");
        gpu.attrs.insert(
            "data_disks".into(),
            json!([{"disk": "disk.datasets", "lun": 0}]),
        );
        gpu.depends_on.insert(addr("disk.datasets"));
        desired
    }

    /// The state an apply of `with_disk(from)` leaves, the GPU VM in `power`.
    fn applied(from: &str, power: PowerState) -> State {
        let mut state = State::from_applied(&with_disk(from), "sub");
        let vm = addr("vm.gpu.vm");
        state
            .resources
            .iter_mut()
            .find(|r| r.address == vm)
            .expect("in the state")
            .power_state = Some(power);
        state
    }

    fn planned_sku_change(
        from: &str,
        to: &str,
        power: PowerState,
    ) -> Result<crate::plan::Plan, Vec<crate::diag::Diagnostic>> {
        let mut desired = with_disk(from);
        set(&mut desired, "disk.datasets", "sku", json!(to));
        plan(&desired, &applied(from, power), &normal())
    }

    #[test]
    fn a_new_sku_on_a_parked_vms_disk_is_an_update_in_place() {
        let planned = planned_sku_change("Premium_LRS", "StandardSSD_LRS", PowerState::Deallocated)
            .expect("plans");
        let disk = planned.change(&addr("disk.datasets")).expect("planned");
        assert_eq!(disk.action, Action::Update);
        let vm = planned.change(&addr("vm.gpu.vm")).expect("planned");
        assert_eq!(vm.action, Action::NoOp, "the VM is not touched");
    }

    #[test]
    fn a_new_sku_on_a_running_vms_disk_is_refused_naming_the_vm() {
        let problems = planned_sku_change("Premium_LRS", "StandardSSD_LRS", PowerState::Running)
            .expect_err("refused");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            problems[0].summary,
            "disk.datasets changes from Premium_LRS to StandardSSD_LRS, which Azure does only while the disk's VM is deallocated, and vm.gpu is running"
        );
    }

    #[test]
    fn a_vm_stopped_from_inside_still_holds_the_disk() {
        let problems = planned_sku_change("Standard_LRS", "Premium_LRS", PowerState::Stopped)
            .expect_err("refused");
        assert!(
            problems[0]
                .summary
                .ends_with("vm.gpu is stopped but still allocated"),
            "{problems:?}"
        );
    }

    #[test]
    fn an_unattached_disk_changes_sku_whatever_the_vms_do() {
        let mut desired = with_disk("Premium_LRS");
        let mut state = applied("Premium_LRS", PowerState::Running);
        // Neither the state nor the manifest attach it anywhere.
        for attrs in desired
            .resources
            .iter_mut()
            .map(|r| &mut r.attrs)
            .chain(state.resources.iter_mut().map(|r| &mut r.attrs))
        {
            attrs.remove("data_disks");
        }
        set(&mut desired, "disk.datasets", "sku", json!("Premium_ZRS"));
        let planned = plan(&desired, &state, &normal()).expect("plans");
        let disk = planned.change(&addr("disk.datasets")).expect("planned");
        assert_eq!(disk.action, Action::Update);
    }

    #[test]
    fn a_sku_azure_cannot_convert_to_is_refused_not_replaced() {
        let problems = planned_sku_change("Premium_LRS", "PremiumV2_LRS", PowerState::Deallocated)
            .expect_err("refused");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].summary.starts_with(
                "disk.datasets cannot change from Premium_LRS to PremiumV2_LRS in place"
            ),
            "{problems:?}"
        );
    }

    #[test]
    fn a_replaced_disk_may_take_any_sku() {
        // A new zone replaces the disk (the plan shows it); the new disk is created with its SKU.
        let mut desired = with_disk("Premium_LRS");
        set(&mut desired, "disk.datasets", "zone", json!("2"));
        set(
            &mut desired,
            "disk.datasets",
            "sku",
            json!("StandardSSD_LRS"),
        );
        let state = applied("Premium_LRS", PowerState::Running);
        let planned = plan(&desired, &state, &normal()).expect("plans");
        let disk = planned.change(&addr("disk.datasets")).expect("planned");
        assert!(matches!(disk.action, Action::Replace { .. }), "{disk:?}");
    }
}
