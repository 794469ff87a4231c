//! Planning: the pure diff between what a manifest asks for and what the state says exists.
//!
//! [`plan`] takes a [`Desired`](crate::model::Desired), a [`State`](crate::state::State) and
//! [`PlanOptions`] and returns a [`Plan`]: one [`Change`] per resource (create, update in place,
//! replace naming the attribute that forces it, delete, or no-op), each with its before and after
//! attributes and the reasons for it, in dependency order; the post-boot steps the manifest
//! declares; and what both worlds cost. It does no I/O, runs no async code and reads no clock (the
//! time it needs, for SAS expiry, comes in the options), so it is tested with plain values and its
//! rendered output with snapshots.
//!
//! A plan saved with `plan -out` is bound to the state's lineage and serial and to the manifest's
//! hash ([`Binding`]); [`check_binding`] refuses to apply it once any of them moved.

mod change;
mod cost;
mod detach;
mod diff;
mod disk_sku;
mod kube;
mod saved;
mod shrink;
mod steps;

pub use change::{Action, Change, Counts, Reason};
pub use cost::{CostSummary, CostTotals, Rate, ResourceCost, rate_of};
pub use detach::DiskDetach;
pub use diff::{SAS_RENEW_MARGIN_MINUTES, plan};
pub use kube::{KubeAction, KubeChange};
pub use saved::{PLAN_FORMAT_VERSION, PlanFileError, StalePlan, check_binding};
pub use steps::{NodeReason, PlannedStep, StepReason, nodes_text, rerun_selects};

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::addr::Address;

/// Whether a plan converges on the manifest or tears the experiment down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Mode {
    /// Create, change and delete whatever makes Azure match the manifest.
    Normal,
    /// Delete everything in the state.
    Destroy {
        /// Keep data resources (`ResourceKind::is_data`) and whatever they depend on.
        keep_data: bool,
    },
}

/// What to plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanOptions {
    /// Normal or destroy.
    pub mode: Mode,
    /// `-target` addresses; empty means everything.
    pub targets: Vec<Address>,
    /// The current time, for SAS expiry (the planner reads no clock).
    pub now: DateTime<Utc>,
    /// `--rerun-step` entries: steps to show (and run) as forced; see [`rerun_selects`] for what
    /// an entry names. An entry naming no step of the manifest is an error.
    pub rerun_steps: BTreeSet<String>,
}

/// What a saved plan was made against; see [`check_binding`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Lineage of the state the plan was made against.
    pub lineage: String,
    /// Serial of that state.
    pub serial: u64,
    /// SHA-256 of the manifest and variable values.
    pub manifest_hash: String,
    /// The dsinfra version that made the plan.
    pub dsinfra_version: String,
}

/// The result of planning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Format of a saved plan file ([`PLAN_FORMAT_VERSION`]).
    pub format_version: u32,
    /// What the plan was made against.
    pub binding: Binding,
    /// The experiment.
    pub experiment: String,
    /// Normal or destroy.
    pub mode: Mode,
    /// `-target` addresses, if any.
    pub targets: Vec<Address>,
    /// The time the plan was made (from [`PlanOptions::now`]).
    pub planned_at: DateTime<Utc>,
    /// One change per resource considered, deletions first (dependents before what they depend
    /// on), then everything else in dependency order.
    pub changes: Vec<Change>,
    /// Post-boot steps the manifest declares, with the nodes each would run on in the next apply
    /// and why (a prediction: the nodes' own markers decide at apply time).
    pub steps: Vec<PlannedStep>,
    /// Kubernetes objects for AKS clusters: applied after the resources and steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kube: Vec<kube::KubeChange>,
    /// What the experiment costs before and after.
    pub cost: CostSummary,
    /// Things the user should know about this plan as a whole (targeting, kept data).
    pub notes: Vec<String>,
    /// Where the manifest came from, recorded by the caller when the plan is saved so that
    /// `show` and `apply PLANFILE` can re-check it. The planner itself never sets it (it does no
    /// I/O). `-var` values are not recorded, as they may be secret: they are passed again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<PlanSource>,
}

/// The manifest and variable files a saved plan was made from, and the VM sizes it was judged
/// against beyond the shipped catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSource {
    /// The manifest, as an absolute path.
    pub manifest: std::path::PathBuf,
    /// `-var-file` files, as absolute paths.
    pub var_files: Vec<std::path::PathBuf>,
    /// The sizes the plan learnt from the subscription's live Resource SKUs (issue 31): `show`
    /// and `apply PLANFILE` judge the manifest against them again, without a connection for
    /// `show`, so a size Azure added after the shipped catalog is known there too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub learned_sizes: Vec<crate::catalog::VmSize>,
}

impl Plan {
    /// The blocks whose post-boot work this plan runs, in order: those its steps list (all with
    /// steps, or those `-target` selects), then the blocks of `desired` that park when idle and
    /// that the targets include. Their head's watcher is a step the engine adds, so they have
    /// post-boot work even with no steps of their own.
    pub fn post_boot_blocks(&self, desired: &crate::model::Desired) -> Vec<Address> {
        let mut blocks: Vec<Address> = Vec::new();
        let targeted = |block: &Address| {
            self.targets.is_empty() || self.targets.iter().any(|t| t.block_address() == *block)
        };
        let listed = self.steps.iter().map(|s| &s.block);
        for block in listed.chain(desired.park_idle.keys().filter(|b| targeted(b))) {
            if !blocks.contains(block) {
                blocks.push(block.clone());
            }
        }
        blocks
    }

    /// Whether applying the plan would change any resource (`--detailed-exitcode` exits 2 if
    /// so). Post-boot steps do not count, as in Terraform, where provisioners are no changes: a
    /// step with `run = "always"` would otherwise make every plan look dirty. See
    /// [`Self::has_step_runs`].
    pub fn has_changes(&self) -> bool {
        self.changes.iter().any(|c| c.action != Action::NoOp)
    }

    /// Whether apply creates, updates or prunes some Kubernetes object.
    pub fn has_kube_changes(&self) -> bool {
        self.kube.iter().any(KubeChange::changes)
    }

    /// Whether the plan predicts that some post-boot step runs on some node.
    pub fn has_step_runs(&self) -> bool {
        self.steps.iter().any(PlannedStep::runs)
    }

    /// How many resources each action touches.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for change in &self.changes {
            match change.action {
                Action::Create => counts.add += 1,
                Action::Update => counts.change += 1,
                Action::Replace { .. } => counts.replace += 1,
                Action::Delete => counts.destroy += 1,
                Action::NoOp => {}
            }
        }
        counts
    }

    /// The change for an address.
    pub fn change(&self, address: &Address) -> Option<&Change> {
        self.changes.iter().find(|c| &c.address == address)
    }
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
