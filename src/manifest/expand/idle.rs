//! Idle auto-park (`park { idle = "45m" }`, issue 18): the manifest's checks of it and what it
//! adds to a `vm` or `cluster` block. The block's head (node 0) runs a watcher that parks the
//! block's VMs when they have been idle for the window; a cluster's head samples the other nodes
//! over the `ssh_mesh` step's keys, so a cluster without that step cannot be watched.
//!
//! The watcher parks through ARM with the head VM's own identity, never the user's credentials:
//! the head gets a system-assigned identity, the block a custom role with exactly the three
//! actions parking needs ([`IDLE_ACTIONS`]), assignable only in the experiment's resource group,
//! and an assignment of that role to the head's principal at the resource group (decision 52).

use serde_json::json;

use crate::addr::Address;
use crate::diag::Diagnostic;
use crate::model::{Attrs, ResourceKind};

use super::super::eval::EvalBlock;
use super::super::names;
use super::compute::Machine;
use super::{Expander, Origin};

/// The actions of the idle role: read the block's VMs, deallocate them, start them again (the
/// watcher restarts nothing today; `start` lets `unpark` run from the head later without a
/// second role). Nothing else: no write, no delete, no other resource type.
pub const IDLE_ACTIONS: [&str; 3] = [
    "Microsoft.Compute/virtualMachines/read",
    "Microsoft.Compute/virtualMachines/deallocate/action",
    "Microsoft.Compute/virtualMachines/start/action",
];

/// The identity the head VM gets.
const SYSTEM_ASSIGNED: &str = "SystemAssigned";

/// The placeholder for the head's principal id, which Azure makes when it creates the identity.
const PRINCIPAL_AFTER_APPLY: &str = "(known after apply)";

/// The step a cluster's watcher samples the other nodes through.
const MESH_STEP: &str = "ssh_mesh";

/// Record a block's idle window (checked by `boot::read_park`) for the engine, after checking
/// that a cluster of more than one node has the `ssh_mesh` step the watcher needs.
pub(super) fn expand(ex: &mut Expander<'_>, block: &EvalBlock, machine: &Machine, count: u32) {
    let Some(idle) = &machine.park_idle else {
        return;
    };
    let has_mesh = block
        .blocks_of("step")
        .any(|step| step.label() == MESH_STEP);
    if count > 1 && !has_mesh {
        ex.diags.push(
            Diagnostic::error(format!(
                "{} parks when idle but has no `ssh_mesh` step",
                block.title()
            ))
            .with_span(idle.span.clone())
            .with_label(format!(
                "the head samples the other {} nodes over the cluster's SSH mesh",
                count - 1
            ))
            .with_help("add `step \"ssh_mesh\" {}` to the cluster, or remove `idle` from `park`"),
        );
        return;
    }
    ex.park_idle
        .insert(Address::block(&block.ident, block.label()), idle.value);
    push_access(ex, block, machine);
}

/// The head's identity, the block's idle role and the role's assignment to the head.
fn push_access(ex: &mut Expander<'_>, block: &EvalBlock, machine: &Machine) {
    let (kind, label) = (block.ident.as_str(), block.label());
    let index = (kind == "cluster").then_some(0);
    let head = Address::new(kind, label, index, "vm");
    let Some(vm) = ex.resources.iter_mut().find(|r| r.address == head) else {
        // The head was not made (a problem reported elsewhere): nothing to give access to.
        return;
    };
    vm.attrs
        .insert("identity".into(), json!({ "type": SYSTEM_ASSIGNED }));
    let lifecycle = ex.lifecycle(block);
    let block_address = format!("{kind}.{label}");
    let subscription = ex.azure.subscription.clone().unwrap_or_default();
    let group = ex.azure.resource_group.clone();
    let rg = ex.rg.to_string();
    let role = Address::new(kind, label, None, "idle_role");
    let mut attrs = Attrs::new();
    attrs.insert(
        "role_name".into(),
        json!(format!(
            "dsinfra idle park {} {block_address} {}",
            ex.experiment.id,
            names::group_tag(&subscription, &group)
        )),
    );
    attrs.insert(
        "description".into(),
        json!(format!(
            "Lets the head of {block_address} deallocate this experiment's VMs when they are idle (dsinfra)"
        )),
    );
    attrs.insert("actions".into(), json!(IDLE_ACTIONS));
    attrs.insert("scope".into(), json!(rg));
    let span = machine.park_idle.as_ref().map(|i| &i.span);
    // ARM keeps no tags on role definitions and assignments: `Expander::push` adds them to every
    // ARM resource, so they are taken off again below.
    ex.push(
        role.clone(),
        ResourceKind::RoleDefinition,
        names::idle_guid(&subscription, &group, &block_address, "idle_role"),
        attrs,
        [],
        Origin {
            parent: None,
            lifecycle: &lifecycle,
            span,
        },
    );
    untag(ex, &role);
    let mut attrs = Attrs::new();
    attrs.insert("role".into(), json!(role.to_string()));
    attrs.insert(
        "principal".into(),
        json!({ "vm": head.to_string(), "id": PRINCIPAL_AFTER_APPLY }),
    );
    // Azure's documented way to assign a role to an identity made moments ago, before Microsoft
    // Entra ID has replicated it: say what the principal is.
    attrs.insert("principal_type".into(), json!("ServicePrincipal"));
    attrs.insert("scope".into(), json!(rg));
    let access = Address::new(kind, label, None, "idle_access");
    ex.push(
        access.clone(),
        ResourceKind::RoleAssignment,
        // Azure's name is a GUID of scope, principal and role, made at apply once the head's
        // principal exists (ResourceKind::named_at_apply).
        crate::model::NAMED_AT_APPLY.to_owned(),
        attrs,
        [head, role],
        Origin {
            parent: None,
            lifecycle: &lifecycle,
            span,
        },
    );
    untag(ex, &access);
}

/// Take dsinfra's tags off a resource just pushed (see `push_access`).
fn untag(ex: &mut Expander<'_>, address: &Address) {
    if let Some(r) = ex
        .resources
        .iter_mut()
        .rev()
        .find(|r| &r.address == address)
    {
        r.attrs.remove("tags");
    }
}
