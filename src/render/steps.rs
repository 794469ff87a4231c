//! Post-boot steps on the terminal: the runner's events as `[node] [step] ...` lines while the
//! steps run, and each block's outcome afterwards (per-node summary, or why it did not run).
//!
//! The texts are pure functions ([`event_line`], [`block_outcome`]) so they are tested exactly;
//! [`sink`] only writes them to stdout, one whole line at a time, so lines from nodes running
//! concurrently never interleave mid-line.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;

use crate::engine::post_boot::{BlockOutcome, BlockResult, StepsMode};
use crate::steps::{Event, EventSink};

/// One line for a runner event (without a newline).
pub fn event_line(event: &Event<'_>) -> String {
    match event {
        Event::StepStarted { node, step, reason } => {
            format!("[{node}] [{step}] started ({reason})")
        }
        Event::StepSkipped { node, step, reason } => {
            format!("[{node}] [{step}] skipped ({reason})")
        }
        Event::Line {
            node, step, line, ..
        } => format!("[{node}] [{step}] {line}"),
        Event::StepFinished {
            node,
            step,
            success: true,
        } => format!("[{node}] [{step}] finished"),
        Event::StepFinished {
            node,
            step,
            success: false,
        } => format!("[{node}] [{step}] FAILED"),
        Event::Rebooting { node, step } => {
            format!("[{node}] [{step}] rebooting the node as the step asked")
        }
        Event::Waiting { node, step } => {
            format!("[{node}] [{step}] waiting for the other nodes to get here")
        }
    }
}

/// Where runner events go in the CLI: stdout, a line each.
pub fn sink() -> EventSink {
    Arc::new(|event: &Event<'_>| {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", event_line(event));
        let _ = stdout.flush();
    })
}

/// What to tell the user about one block after its steps, in `mode`. `map_hint` says how to
/// give an emulated VM an SSH endpoint (it names the emulator's URL).
pub fn block_outcome(outcome: &BlockOutcome, mode: StepsMode, map_hint: &str) -> String {
    let block = &outcome.block;
    let mut text = String::new();
    match &outcome.result {
        BlockResult::Ran {
            report,
            fetched,
            warnings,
        } => {
            let verdict = if report.success() { "done" } else { "FAILED" };
            let _ = writeln!(text, "steps of {block}: {verdict}");
            for line in report.to_string().lines() {
                let _ = writeln!(text, "  {line}");
            }
            for file in fetched {
                let _ = writeln!(text, "  fetched {file}");
            }
            for warning in warnings {
                let _ = writeln!(text, "  warning: {warning}");
            }
        }
        BlockResult::Unreachable { nodes, emulated } => {
            let lead = if mode == StepsMode::Run {
                "error"
            } else {
                "note"
            };
            let _ = writeln!(
                text,
                "{lead}: the steps of {block} were not run: a node cannot be reached over SSH"
            );
            for node in nodes {
                let _ = writeln!(text, "  {node}");
            }
            if *emulated {
                let _ = writeln!(
                    text,
                    "  = an emulated VM is not a machine: nothing runs its steps unless an sshd \
                     stands in for it. {map_hint}"
                );
            }
            if mode == StepsMode::Auto {
                let _ = writeln!(
                    text,
                    "  = the apply itself succeeded; `--steps run` makes this an error, \
                     `--steps skip` silences it"
                );
            }
        }
        BlockResult::Blocked(why) => {
            let _ = writeln!(text, "the steps of {block} were not run: {why}");
        }
        BlockResult::Failed(why) => {
            let _ = writeln!(text, "error: the steps of {block} could not run: {why}");
        }
        BlockResult::Skipped => {
            let _ = writeln!(text, "the steps of {block} were skipped (--steps skip)");
        }
    }
    // An AML cluster's nodes appear nowhere else: the service makes them, the plan cannot know.
    if !outcome.nodes.is_empty() {
        let _ = writeln!(text, "  nodes of {block} (listNodes):");
        for node in &outcome.nodes {
            let _ = writeln!(text, "    {node}");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ssh::Stream;
    use crate::steps::StepReport;
    use crate::steps::{NodeReport, NodeStatus, RunReason, RunReport, SkipReason, StepOutcome};

    #[test]
    fn events_are_prefixed_with_node_and_step() {
        let lines = [
            event_line(&Event::StepStarted {
                node: "vm.gpu",
                step: "mount",
                reason: RunReason::Rebooted,
            }),
            event_line(&Event::StepSkipped {
                node: "vm.gpu",
                step: "install",
                reason: SkipReason::UpToDate,
            }),
            event_line(&Event::Line {
                node: "cluster.t[1]",
                step: "prep",
                stream: Stream::Stderr,
                line: "hello",
            }),
            event_line(&Event::StepFinished {
                node: "vm.gpu",
                step: "mount",
                success: false,
            }),
            event_line(&Event::Waiting {
                node: "cluster.t[0]",
                step: "start",
            }),
        ];
        assert_eq!(
            lines,
            [
                "[vm.gpu] [mount] started (rebooted)",
                "[vm.gpu] [install] skipped (up to date)",
                "[cluster.t[1]] [prep] hello",
                "[vm.gpu] [mount] FAILED",
                "[cluster.t[0]] [start] waiting for the other nodes to get here",
            ]
        );
    }

    #[test]
    fn outcomes_say_what_ran_or_why_not() {
        let ran = BlockOutcome {
            block: "vm.gpu".parse().expect("ok"),
            result: BlockResult::Ran {
                report: RunReport {
                    nodes: vec![NodeReport {
                        node: "vm.gpu".into(),
                        steps: vec![StepReport {
                            step: "prep".into(),
                            outcome: StepOutcome::Ran {
                                reason: RunReason::New,
                                duration: Duration::from_secs(1),
                                rebooted: false,
                            },
                        }],
                        status: NodeStatus::Done,
                    }],
                },
                fetched: vec![".dsinfra/x/elbencho/head.csv".into()],
                warnings: vec![],
            },
            nodes: Vec::new(),
        };
        assert_eq!(
            block_outcome(&ran, StepsMode::Auto, ""),
            "steps of vm.gpu: done\n  vm.gpu  ok: 1 ran, 0 skipped\n  fetched .dsinfra/x/elbencho/head.csv\n"
        );
        let unreachable = BlockOutcome {
            block: "cluster.t".parse().expect("ok"),
            result: BlockResult::Unreachable {
                nodes: vec![
                    "cluster.t[0] has no SSH endpoint in the emulator for its public IP 20.0.0.4"
                        .into(),
                ],
                emulated: true,
            },
            nodes: Vec::new(),
        };
        assert_eq!(
            block_outcome(&unreachable, StepsMode::Auto, "Map one with X."),
            "note: the steps of cluster.t were not run: a node cannot be reached over SSH\n  \
             cluster.t[0] has no SSH endpoint in the emulator for its public IP 20.0.0.4\n  \
             = an emulated VM is not a machine: nothing runs its steps unless an sshd stands \
             in for it. Map one with X.\n  \
             = the apply itself succeeded; `--steps run` makes this an error, `--steps skip` \
             silences it\n"
        );
        assert!(block_outcome(&unreachable, StepsMode::Run, "").starts_with("error: "));
        assert!(unreachable.is_failure(StepsMode::Run));
        assert!(!unreachable.is_failure(StepsMode::Auto));
        // An AML cluster's nodes, as listNodes gave them, follow its outcome.
        let aml = BlockOutcome {
            block: "aml_cluster.s".parse().expect("ok"),
            result: BlockResult::Skipped,
            nodes: vec!["aml_cluster.s[0]  tvmps_a  20.1.2.3:50000  private 10.0.0.4  idle".into()],
        };
        assert_eq!(
            block_outcome(&aml, StepsMode::Skip, ""),
            "the steps of aml_cluster.s were skipped (--steps skip)\n  nodes of aml_cluster.s \
             (listNodes):\n    aml_cluster.s[0]  tvmps_a  20.1.2.3:50000  private 10.0.0.4  idle\n"
        );
    }
}
