//! Idle auto-park (`park { idle = "45m" }`, issue 18): the manifest's checks of it and what it
//! adds to a `vm` or `cluster` block. The block's head (node 0) runs a watcher that parks the
//! block's VMs when they have been idle for the window; a cluster's head samples the other nodes
//! over the `ssh_mesh` step's keys, so a cluster without that step cannot be watched.

use crate::addr::Address;
use crate::diag::Diagnostic;

use super::super::eval::EvalBlock;
use super::Expander;
use super::compute::Machine;

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
}
