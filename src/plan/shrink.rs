//! Refusing a managed-disk shrink at plan time.
//!
//! Azure grows a managed disk in place but never shrinks one: a PATCH or PUT with a smaller
//! `diskSizeGB` is refused ("cannot be resized down"). Planned as an ordinary in-place update,
//! the shrink would fail only at apply, after the resources ordered before it were already
//! changed. Replacing the disk instead would succeed and delete the user's data, so the plan never
//! does that on its own: it stops and says what the user can do (keep the size, or make a new
//! disk and copy the data).
//!
//! A VM's OS disk needs no check here: `os_disk_size_gb` forces the VM's replacement
//! (`ResourceKind::force_new`), which the plan shows, and the new VM gets a new OS disk, which
//! Azure creates at any size the image allows.

use std::collections::BTreeMap;

use serde_json::Value;

use super::change::{Action, Change};
use crate::addr::Address;
use crate::diag::Diagnostic;
use crate::model::{Desired, ResourceKind};

/// The attribute holding a managed disk's size in GiB.
const SIZE: &str = "size_gb";

/// One error per managed disk that `changes` would update in place to a smaller size than the
/// state records (the size the last apply or refresh saw in Azure), located at the manifest's
/// `size_gb` (the disk block when the manifest layer did not record it).
pub(super) fn disk_shrinks(
    desired: &Desired,
    changes: &BTreeMap<Address, Change>,
) -> Vec<Diagnostic> {
    changes
        .values()
        .filter(|c| c.kind == ResourceKind::ManagedDisk && c.action == Action::Update)
        .filter_map(|change| {
            let size = |attrs: Option<&crate::model::Attrs>| {
                attrs.and_then(|a| a.get(SIZE)).and_then(Value::as_i64)
            };
            let (have, want) = (size(change.before.as_ref())?, size(change.after.as_ref())?);
            if want >= have {
                return None;
            }
            let resource = desired.resource(&change.address)?;
            let span = resource
                .attr_spans
                .get(SIZE)
                .cloned()
                .or_else(|| resource.span.clone());
            let block = change.address.block_address();
            Some(
                Diagnostic::error(format!(
                    "{block} is {have} GiB and Azure cannot shrink a managed disk, but the manifest asks for {want} GiB"
                ))
                .with_span_opt(span)
                .with_label(format!("smaller than the disk's {have} GiB"))
                .with_help(format!(
                    "keep `size_gb = {have}` (or more): a managed disk can only grow"
                ))
                .with_help(format!(
                    "for a smaller disk, add a new `disk` block of {want} GiB, attach both and copy the data across, then remove `{block}`; dsinfra does not replace a disk to shrink it, as that would delete its data"
                )),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::model::{Desired, ResourceKind};
    use crate::plan::fixtures::{addr, dual, normal, resource, set};
    use crate::plan::{Action, PlanOptions, plan};
    use crate::state::State;

    /// The `dual` experiment with a data disk of `size` GiB.
    fn with_disk(size: i64, sku: &str) -> Desired {
        let mut desired = dual();
        desired.resources.push(resource(
            "disk.datasets",
            ResourceKind::ManagedDisk,
            "exp-datasets",
            &["resource_group.main"],
            &json!({"location": "eastus", "size_gb": size, "sku": sku, "zone": null}),
        ));
        desired
    }

    #[test]
    fn shrinking_a_data_disk_is_refused_before_anything_is_changed() {
        let state = State::from_applied(&with_disk(1024, "Premium_LRS"), "sub");
        let mut desired = with_disk(1024, "Premium_LRS");
        set(&mut desired, "disk.datasets", "size_gb", json!(512));
        let problems = plan(&desired, &state, &normal()).expect_err("a shrink is refused");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            problems[0].summary,
            "disk.datasets is 1024 GiB and Azure cannot shrink a managed disk, but the manifest asks for 512 GiB"
        );
    }

    #[test]
    fn growing_a_data_disk_stays_an_update_in_place() {
        let state = State::from_applied(&with_disk(512, "Premium_LRS"), "sub");
        let mut desired = with_disk(512, "Premium_LRS");
        set(&mut desired, "disk.datasets", "size_gb", json!(1024));
        let planned = plan(&desired, &state, &normal()).expect("a grow plans");
        let disk = planned.change(&addr("disk.datasets")).expect("planned");
        assert_eq!(disk.action, Action::Update);
    }

    #[test]
    fn a_disk_replaced_for_another_reason_may_be_created_smaller() {
        // A new zone replaces the disk (the plan shows it); the new disk can have any size.
        let state = State::from_applied(&with_disk(1024, "Premium_LRS"), "sub");
        let mut desired = with_disk(1024, "Premium_LRS");
        set(&mut desired, "disk.datasets", "size_gb", json!(512));
        set(&mut desired, "disk.datasets", "zone", json!("2"));
        let planned = plan(&desired, &state, &normal()).expect("a replacement plans");
        let disk = planned.change(&addr("disk.datasets")).expect("planned");
        assert!(matches!(disk.action, Action::Replace { .. }), "{disk:?}");
    }

    #[test]
    fn a_smaller_os_disk_replaces_the_vm_visibly_instead_of_failing() {
        // Azure creates the new VM's OS disk at any size, so this is no refusal: the plan shows
        // the replacement and names the attribute that forces it.
        let mut before = dual();
        set(&mut before, "vm.gpu.vm", "os_disk_size_gb", json!(256));
        let state = State::from_applied(&before, "sub");
        let mut desired = before.clone();
        set(&mut desired, "vm.gpu.vm", "os_disk_size_gb", json!(128));
        let planned = plan(&desired, &state, &normal()).expect("a replacement plans");
        let vm = planned.change(&addr("vm.gpu.vm")).expect("planned");
        assert_eq!(vm.forced_by(), ["os_disk_size_gb"]);
    }

    #[test]
    fn a_disk_outside_the_targets_is_not_refused() {
        let state = State::from_applied(&with_disk(1024, "Premium_LRS"), "sub");
        let mut desired = with_disk(1024, "Premium_LRS");
        set(&mut desired, "disk.datasets", "size_gb", json!(512));
        let opts = PlanOptions {
            targets: vec![addr("vm.gpu")],
            ..normal()
        };
        assert!(plan(&desired, &state, &opts).is_ok());
    }
}
