//! What a run did on each node: the per-node summary the CLI prints and the exit code follows.

use std::fmt;
use std::time::Duration;

use super::marker::{RunReason, SkipReason};

/// How one step went on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// It ran and succeeded.
    Ran {
        /// Why it ran.
        reason: RunReason,
        /// Wall time, the reboot included.
        duration: Duration,
        /// It asked for a reboot, which happened.
        rebooted: bool,
    },
    /// It was skipped.
    Skipped(SkipReason),
    /// It ran and failed.
    Failed {
        /// Why it ran.
        reason: RunReason,
        /// What went wrong (exit status, timeout, lost connection).
        message: String,
    },
}

/// One step's line in a node's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// Step name.
    pub step: String,
    /// What happened.
    pub outcome: StepOutcome,
}

/// Where a node ended up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeStatus {
    /// Every step for this node ran or was skipped.
    Done,
    /// The node failed: at a step, or before any (unreachable, unreadable markers).
    Failed {
        /// The failing step, if any.
        step: Option<String>,
        /// What went wrong.
        message: String,
    },
    /// The node stopped at a barrier because other nodes failed before reaching it.
    Blocked {
        /// The step that did not start.
        step: String,
        /// The nodes it waited for.
        waiting_for: Vec<String>,
    },
}

/// One node's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    /// Node name.
    pub node: String,
    /// Steps reached, in order (steps for other nodes are not listed).
    pub steps: Vec<StepReport>,
    /// Where it ended up.
    pub status: NodeStatus,
}

/// The whole run, nodes in input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// Per-node reports.
    pub nodes: Vec<NodeReport>,
}

impl RunReport {
    /// Whether every node is done.
    pub fn success(&self) -> bool {
        self.nodes.iter().all(|n| n.status == NodeStatus::Done)
    }

    /// The report of a node by name.
    pub fn node(&self, name: &str) -> Option<&NodeReport> {
        self.nodes.iter().find(|n| n.node == name)
    }
}

impl NodeReport {
    /// The outcome of a step on this node, if it was reached.
    pub fn outcome(&self, step: &str) -> Option<&StepOutcome> {
        self.steps
            .iter()
            .find(|s| s.step == step)
            .map(|s| &s.outcome)
    }

    fn counts(&self) -> (usize, usize) {
        let ran = self
            .steps
            .iter()
            .filter(|s| matches!(s.outcome, StepOutcome::Ran { .. }))
            .count();
        let skipped = self
            .steps
            .iter()
            .filter(|s| matches!(s.outcome, StepOutcome::Skipped(_)))
            .count();
        (ran, skipped)
    }
}

/// One line per node: `NODE  ok: 2 ran, 1 skipped` / `failed at step "x": ...` / `blocked ...`.
impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.nodes.iter().map(|n| n.node.len()).max().unwrap_or(0);
        for node in &self.nodes {
            let (ran, skipped) = node.counts();
            write!(f, "{:width$}  ", node.node)?;
            match &node.status {
                NodeStatus::Done => writeln!(f, "ok: {ran} ran, {skipped} skipped")?,
                NodeStatus::Failed {
                    step: Some(step),
                    message,
                } => writeln!(f, "failed at step {step:?}: {message}")?,
                NodeStatus::Failed {
                    step: None,
                    message,
                } => writeln!(f, "failed: {message}")?,
                NodeStatus::Blocked { step, waiting_for } => writeln!(
                    f,
                    "blocked before step {step:?}: waiting for {}, which did not get there",
                    waiting_for.join(", ")
                )?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_has_one_line_per_node() {
        let report = RunReport {
            nodes: vec![
                NodeReport {
                    node: "head".into(),
                    steps: vec![],
                    status: NodeStatus::Blocked {
                        step: "beeond".into(),
                        waiting_for: vec!["node-1".into()],
                    },
                },
                NodeReport {
                    node: "node-1".into(),
                    steps: vec![],
                    status: NodeStatus::Failed {
                        step: Some("install".into()),
                        message: "exit status 3".into(),
                    },
                },
                NodeReport {
                    node: "node-2".into(),
                    steps: vec![
                        StepReport {
                            step: "install".into(),
                            outcome: StepOutcome::Skipped(SkipReason::UpToDate),
                        },
                        StepReport {
                            step: "mount".into(),
                            outcome: StepOutcome::Ran {
                                reason: RunReason::Rebooted,
                                duration: Duration::from_secs(1),
                                rebooted: false,
                            },
                        },
                    ],
                    status: NodeStatus::Done,
                },
            ],
        };
        assert_eq!(
            report.to_string(),
            "head    blocked before step \"beeond\": waiting for node-1, which did not get there\n\
             node-1  failed at step \"install\": exit status 3\n\
             node-2  ok: 1 ran, 1 skipped\n"
        );
        assert!(!report.success());
    }
}
