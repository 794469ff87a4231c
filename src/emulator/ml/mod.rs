//! Microsoft.MachineLearningServices (2024-10-01) and what a workspace needs beside it:
//! workspaces, AmlCompute clusters with their nodes and `listNodes`, and the key vaults, Log
//! Analytics workspaces, Application Insights components and container registries a workspace
//! is created with.
//!
//! One module per idea: `workspace` (the workspace and its associated resources' checks),
//! `compute` (the cluster resource, its quota and its GET view), `nodes` (how nodes come and go
//! over the latency model), `deps` (the four dependency providers), and `boot` (the hook that
//! lets a test stand a local sshd in for each node, and the SSH endpoint map it fills).

mod boot;
mod compute;
mod deps;
mod nodes;
mod workspace;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::resource::{Target, not_implemented};
use super::store::{Cloud, Kind, Resource};

pub(crate) use boot::{AmlBoots, forget};
pub(crate) use compute::{patch_compute, preempt_node, put_compute, usages, vm_sizes};
pub(crate) use deps::{purge_vault, put_insights, put_log_analytics, put_registry, put_vault};
pub(crate) use workspace::put_workspace;

/// The key of the emulator's own bookkeeping in a stored compute body (its public address and
/// SSH key): never shown, removed by [`render`].
const HIDDEN: &str = "dsinfraEmulator";

/// The emulated cloud's one Entra tenant, as workspaces and their identities report it.
pub(crate) const TENANT_ID: &str = "d51f0000-0000-4000-8000-00000000e317";

/// The GET representation of the kinds of this module at `now`.
pub(crate) fn render(resource: &Resource, now: DateTime<Utc>) -> Value {
    match resource.kind {
        Kind::MlCompute => compute::render(resource, now),
        _ => resource.body.clone(),
    }
}

/// The emulator models AmlCompute only: other compute types (instances, Kubernetes, attached
/// VMs, ...) are not implemented, said as such rather than as an ARM error.
fn not_amlcompute(ctx: &Ctx<'_>, compute_type: &str) -> ArmError {
    let mut err = not_implemented(ctx);
    err.message = format!(
        "{} (computeType '{compute_type}': only AmlCompute is emulated)",
        err.message.trim_end_matches('.')
    );
    err
}

/// A compute being deleted: its nodes leave now and are gone when the delete completes.
pub(crate) fn on_delete(resource: &mut Resource, now: DateTime<Utc>, done: DateTime<Utc>) {
    if resource.kind == Kind::MlCompute {
        nodes::leave_all(&mut resource.nodes, now, done);
    }
}

/// Actions on resources of this module: `listNodes` of a compute.
pub(crate) fn action(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    target: &Target<'_>,
    tail: &str,
) -> Result<Reply, ArmError> {
    match target.kind {
        Kind::MlCompute if tail.eq_ignore_ascii_case("listNodes") => {
            compute::list_nodes(cloud, ctx, target)
        }
        _ => Err(not_implemented(ctx)),
    }
}
