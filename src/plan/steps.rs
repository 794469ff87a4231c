//! The post-boot steps a plan lists: which nodes each step would run on and when it runs again.
//! Whether a step actually runs in an apply is decided later (issue 6); the plan only makes the
//! manifest's steps visible next to the infrastructure they need.

use serde::{Deserialize, Serialize};

use crate::addr::Address;
use crate::model::{Desired, ResourceKind, RunPolicy, Step, StepScope};

/// One step and where it would run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedStep {
    /// The `vm` or `cluster` block it belongs to.
    pub block: Address,
    /// Step name, unique within its block.
    pub name: String,
    /// Step kind (`mofed`, `blobfuse2`, `script`, ...).
    pub kind: String,
    /// All nodes or the head only.
    pub scope: StepScope,
    /// When it runs again.
    pub run: RunPolicy,
    /// The VM resources it would run on, in node order.
    pub nodes: Vec<Address>,
}

impl PlannedStep {
    /// Where it runs, compactly: `cluster.train[0..3] (4 nodes)`, `cluster.train[0]`, `vm.gpu`.
    pub fn nodes_text(&self) -> String {
        let indices: Vec<u32> = self.nodes.iter().filter_map(|n| n.index).collect();
        match indices.as_slice() {
            [] => self.block.to_string(),
            [one] => format!("{}[{one}]", self.block),
            [first, .., last] if u64::from(*last - *first) + 1 == indices.len() as u64 => {
                format!("{}[{first}..{last}] ({} nodes)", self.block, indices.len())
            }
            _ => self
                .nodes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// The steps of `desired` whose block is selected by `selected`, with their nodes.
pub(super) fn planned_steps(
    desired: &Desired,
    selected: impl Fn(&Address) -> bool,
) -> Vec<PlannedStep> {
    desired
        .steps
        .iter()
        .filter(|step| selected(&step.block))
        .map(|step| plan_step(desired, step))
        .collect()
}

fn plan_step(desired: &Desired, step: &Step) -> PlannedStep {
    let mut nodes: Vec<Address> = desired
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::VirtualMachine)
        .filter(|r| r.address.block_address() == step.block)
        .filter(|r| step.scope == StepScope::All || r.address.index.unwrap_or(0) == 0)
        .map(|r| r.address.clone())
        .collect();
    nodes.sort();
    PlannedStep {
        block: step.block.clone(),
        name: step.name.clone(),
        kind: step.kind.clone(),
        scope: step.scope,
        run: step.run,
        nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(nodes: &[&str]) -> PlannedStep {
        PlannedStep {
            block: "cluster.train".parse().expect("valid"),
            name: "mofed".into(),
            kind: "mofed".into(),
            scope: StepScope::All,
            run: RunPolicy::Once,
            nodes: nodes.iter().map(|n| n.parse().expect("valid")).collect(),
        }
    }

    #[test]
    fn node_ranges_are_compact_when_contiguous() {
        assert_eq!(
            step(&[
                "cluster.train[0].vm",
                "cluster.train[1].vm",
                "cluster.train[2].vm",
                "cluster.train[3].vm"
            ])
            .nodes_text(),
            "cluster.train[0..3] (4 nodes)"
        );
        assert_eq!(
            step(&["cluster.train[0].vm"]).nodes_text(),
            "cluster.train[0]"
        );
        assert_eq!(
            step(&["cluster.train[0].vm", "cluster.train[2].vm"]).nodes_text(),
            "cluster.train[0].vm, cluster.train[2].vm"
        );
        let mut single = step(&["vm.gpu.vm"]);
        single.block = "vm.gpu".parse().expect("valid");
        assert_eq!(single.nodes_text(), "vm.gpu");
    }
}
