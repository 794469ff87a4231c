//! The step runner: every node's steps in order, nodes concurrently, barriers between scopes,
//! reboot-and-continue, logs and events.
//!
//! Each node gets one task and one SSH session (shared through [`Pool`] with nodes that jump
//! through it). A task reads the node's boot id and markers with one unprivileged command,
//! decides each step with [`decide`], and runs the ones that must run through
//! [`Session::run_script`]; the marker is written by the same remote shell right after the
//! script succeeds, so no extra round trip is spent per step. A step with a check command runs
//! the check first (unless forced); a check that says "already done" writes the marker the same
//! way and the step is skipped. Failures stay on their node:
//! other nodes go on until a barrier needs the failed node, and the report says who stopped
//! where.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::ssh::{Auth, Held, Privilege, Session, Stream, WaitPolicy};

use super::log::Redactor;
use super::marker::{Decision, Known, NodeState, RunReason, SkipReason, decide};
use super::progress::{Gate, Progress, applies, barrier, gate};
use super::report::{NodeReport, NodeStatus, RunReport, StepOutcome, StepReport};
use super::spec::{NodeSpec, Scope, StepSpec};

mod exec;
mod pool;

use exec::read_state;
use pool::Pool;

/// Something the runner reports while it works; the renderer decides how to show it.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A step starts on a node.
    StepStarted {
        /// Node name.
        node: &'a str,
        /// Step name.
        step: &'a str,
        /// Why it runs.
        reason: RunReason,
    },
    /// A step is skipped on a node.
    StepSkipped {
        /// Node name.
        node: &'a str,
        /// Step name.
        step: &'a str,
        /// Why.
        reason: SkipReason,
    },
    /// A line of output (secrets already redacted): shown as `[node] [step] line`.
    Line {
        /// Node name.
        node: &'a str,
        /// Step name.
        step: &'a str,
        /// Which stream.
        stream: Stream,
        /// The line, without newline.
        line: &'a str,
    },
    /// A step ended on a node.
    StepFinished {
        /// Node name.
        node: &'a str,
        /// Step name.
        step: &'a str,
        /// Whether it succeeded.
        success: bool,
    },
    /// A step asked for a reboot; the node is rebooting.
    Rebooting {
        /// Node name.
        node: &'a str,
        /// The step that asked.
        step: &'a str,
    },
    /// A node waits at a barrier for other nodes.
    Waiting {
        /// Node name.
        node: &'a str,
        /// The step that waits.
        step: &'a str,
    },
}

/// Receives events; called from many tasks at once.
pub type EventSink = Arc<dyn Fn(&Event<'_>) + Send + Sync>;

/// How to run.
#[derive(Clone)]
pub struct RunOptions {
    /// Names this run's log directory: logs go to `<log_dir>/<run_id>/<node>/<step>.log`.
    pub run_id: String,
    /// The experiment's log directory.
    pub log_dir: PathBuf,
    /// How to authenticate to every node.
    pub auth: Auth,
    /// How long to wait for a node's SSH at the start.
    pub wait: WaitPolicy,
    /// How long to wait for a node to come back after a reboot.
    pub reboot_wait: WaitPolicy,
    /// The command that reboots a node (it runs as the login user; the default uses sudo).
    pub reboot_command: String,
    /// Steps to run again whatever their markers say (`--rerun-step`); their checks are not
    /// asked.
    pub forced: BTreeSet<String>,
    /// Per node name, the per-boot steps to run again because dsinfra restarted that node since
    /// they last ran there (unpark). Their checks are still asked.
    pub restarted: BTreeMap<String, BTreeSet<String>>,
    /// Whom scripts run as.
    pub privilege: Privilege,
    /// Where events go.
    pub events: Option<EventSink>,
}

impl fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunOptions")
            .field("run_id", &self.run_id)
            .field("log_dir", &self.log_dir)
            .field("auth", &self.auth)
            .field("reboot_command", &self.reboot_command)
            .field("forced", &self.forced)
            .field("restarted", &self.restarted)
            .finish_non_exhaustive()
    }
}

/// The longest a step's check may take (less if the step's own timeout is shorter); a check
/// that times out counts as "not done", so the step runs.
pub const CHECK_TIMEOUT: Duration = Duration::from_mins(5);

/// The default reboot command. `systemctl reboot` returns at once and the connection drops
/// when sshd stops; the runner then waits for a new boot id.
pub const DEFAULT_REBOOT_COMMAND: &str = "sudo -n systemctl reboot";

impl RunOptions {
    /// Options with default waits, reboot command and privilege.
    pub fn new(run_id: impl Into<String>, log_dir: impl Into<PathBuf>, auth: Auth) -> Self {
        Self {
            run_id: run_id.into(),
            log_dir: log_dir.into(),
            auth,
            wait: WaitPolicy::default(),
            reboot_wait: WaitPolicy {
                limit: Duration::from_mins(15),
                ..WaitPolicy::default()
            },
            reboot_command: DEFAULT_REBOOT_COMMAND.to_owned(),
            forced: BTreeSet::new(),
            restarted: BTreeMap::new(),
            privilege: Privilege::Sudo,
            events: None,
        }
    }
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// No nodes were given.
    #[error("no nodes to run steps on")]
    NoNodes,
    /// A step name is unusable as a marker and log file name.
    #[error(
        "step name {0:?} must use only letters, digits, '_', '-' and '.' and not start with '.'"
    )]
    BadStepName(String),
    /// Two steps have the same name.
    #[error("two steps are named {0:?}; step names must be unique")]
    DuplicateStep(String),
    /// A step's delivered file has an unusable name, or two have the same name.
    #[error(
        "step {step:?}: file name {file:?} must be unique and use only letters, digits, '_', '-' \
         and '.' and not start with '.'"
    )]
    BadFileName {
        /// The step.
        step: String,
        /// The file name.
        file: String,
    },
}

/// Runs `steps` on `nodes` (node 0 is the head) and reports per node. Only invalid input is an
/// error; node failures are in the report (see [`RunReport::success`]).
pub async fn run(
    nodes: &[NodeSpec],
    steps: &[StepSpec],
    options: &RunOptions,
) -> Result<RunReport, Error> {
    validate(nodes, steps)?;
    let redactor = Redactor::new(
        steps
            .iter()
            .flat_map(|s| s.secrets.iter().map(|secret| secret.value.expose())),
    );
    let (progress, _) = watch::channel(vec![Progress::default(); nodes.len()]);
    let context = Arc::new(Context {
        nodes: nodes.to_vec(),
        hashes: steps.iter().map(StepSpec::hash).collect(),
        scopes: steps.iter().map(|s| s.scope).collect(),
        steps: steps.to_vec(),
        options: options.clone(),
        redactor,
        progress,
        pool: Pool::default(),
    });
    let mut tasks = JoinSet::new();
    for index in 0..nodes.len() {
        let context = Arc::clone(&context);
        tasks.spawn(async move { (index, context.run_node(index).await) });
    }
    let mut reports: Vec<Option<NodeReport>> = vec![None; nodes.len()];
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, report)) => reports[index] = Some(report),
            // A panicking node task is a bug; re-raise it rather than report a half-truth.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {}
        }
    }
    // Close every pooled connection (jump hosts included) before returning.
    context.pool.close_all().await;
    Ok(RunReport {
        nodes: reports
            .into_iter()
            .zip(nodes)
            .map(|(report, node)| {
                report.unwrap_or_else(|| NodeReport {
                    node: node.name().to_owned(),
                    steps: Vec::new(),
                    status: NodeStatus::Failed {
                        step: None,
                        message: "the node's task was cancelled".to_owned(),
                    },
                })
            })
            .collect(),
    })
}

fn validate(nodes: &[NodeSpec], steps: &[StepSpec]) -> Result<(), Error> {
    if nodes.is_empty() {
        return Err(Error::NoNodes);
    }
    let mut seen = BTreeSet::new();
    for step in steps {
        let valid = !step.name.is_empty()
            && !step.name.starts_with('.')
            && step
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return Err(Error::BadStepName(step.name.clone()));
        }
        if !seen.insert(step.name.as_str()) {
            return Err(Error::DuplicateStep(step.name.clone()));
        }
        let mut files = BTreeSet::new();
        for file in &step.files {
            if !crate::ssh::is_file_name(&file.name) || !files.insert(file.name.as_str()) {
                return Err(Error::BadFileName {
                    step: step.name.clone(),
                    file: file.name.clone(),
                });
            }
        }
    }
    Ok(())
}

/// What every node task shares.
struct Context {
    nodes: Vec<NodeSpec>,
    steps: Vec<StepSpec>,
    hashes: Vec<String>,
    scopes: Vec<Scope>,
    options: RunOptions,
    redactor: Redactor,
    progress: watch::Sender<Vec<Progress>>,
    pool: Pool,
}

/// How a step that ran ended, from the runner's point of view.
enum Ran {
    Done,
    Reboot,
}

impl Context {
    fn emit(&self, event: &Event<'_>) {
        if let Some(sink) = &self.options.events {
            sink(event);
        }
    }

    fn publish(&self, index: usize, passed: usize, stopped: bool) {
        self.progress
            .send_modify(|all| all[index] = Progress { passed, stopped });
    }

    async fn run_node(&self, index: usize) -> NodeReport {
        let node = &self.nodes[index];
        let mut report = NodeReport {
            node: node.name().to_owned(),
            steps: Vec::new(),
            status: NodeStatus::Done,
        };
        let result = self.walk(index, &mut report).await;
        match result {
            Ok(()) => self.publish(index, self.steps.len(), false),
            Err((at, status)) => {
                self.publish(index, at, true);
                report.status = status;
            }
        }
        report
    }

    /// Walks the step list on one node; on a stop returns the step index and the status.
    async fn walk(&self, index: usize, report: &mut NodeReport) -> Result<(), (usize, NodeStatus)> {
        let node = &self.nodes[index];
        let unreachable = |message: String| {
            (
                0,
                NodeStatus::Failed {
                    step: None,
                    message,
                },
            )
        };
        let session = self
            .connect(node, &self.options.wait)
            .await
            .map_err(unreachable)?;
        let (state, held) = read_state(&session, node).await.map_err(unreachable)?;
        let mut held = Some(held);
        let result = self
            .walk_steps(index, report, session, state, &mut held)
            .await;
        // No step ran (all skipped, or a stop before the first): the held shell just exits.
        if let Some(held) = held {
            held.release().await;
        }
        result
    }

    /// [`Self::walk`]'s steps on a connected node whose state was read; the first step that
    /// runs takes the `held` shell.
    async fn walk_steps(
        &self,
        index: usize,
        report: &mut NodeReport,
        mut session: Session,
        mut state: NodeState,
        held: &mut Option<Held>,
    ) -> Result<(), (usize, NodeStatus)> {
        let node = &self.nodes[index];
        for (i, step) in self.steps.iter().enumerate() {
            if !applies(step.scope, index) {
                self.publish(index, i + 1, false);
                continue;
            }
            if let Some(scope) = barrier(&self.scopes, i) {
                self.wait_at_barrier(index, i, scope).await?;
            }
            let reason = match self.decide_step(&session, index, i, &state).await {
                Ok(Decision::Skip(reason)) => {
                    self.skipped(index, i, report, reason);
                    continue;
                }
                Ok(Decision::Run(reason)) => reason,
                Err((reason, message)) => return Err(self.failed_at(i, report, reason, message)),
            };

            let started = Instant::now();
            let outcome = match self.run_step(&session, held.take(), index, i, reason).await {
                Ok(Ran::Done) => Ok(false),
                Ok(Ran::Reboot) => {
                    self.emit(&Event::Rebooting {
                        node: node.name(),
                        step: &step.name,
                    });
                    match self.reboot(session.clone(), node, &state.boot_id, i).await {
                        Ok((fresh, boot_id)) => {
                            session = fresh;
                            state.boot_id = boot_id;
                            Ok(true)
                        }
                        Err(message) => Err(message),
                    }
                }
                Err(message) => Err(message),
            };
            self.emit(&Event::StepFinished {
                node: node.name(),
                step: &step.name,
                success: outcome.is_ok(),
            });
            match outcome {
                Ok(rebooted) => report.steps.push(StepReport {
                    step: step.name.clone(),
                    outcome: StepOutcome::Ran {
                        reason,
                        duration: started.elapsed(),
                        rebooted,
                    },
                }),
                Err(message) => return Err(self.failed_at(i, report, reason, message)),
            }
            self.publish(index, i + 1, false);
        }
        Ok(())
    }

    /// Whether step `i` runs on node `index`: the markers decide ([`decide`]); when they say
    /// run and the step is not forced, its check may still find the work done, which skips it
    /// as [`SkipReason::AlreadyDone`]. A check that cannot run fails the step with the reason
    /// it was going to run for.
    async fn decide_step(
        &self,
        session: &Session,
        index: usize,
        i: usize,
        state: &NodeState,
    ) -> Result<Decision, (RunReason, String)> {
        let step = &self.steps[i];
        let marker = state.markers.get(&step.name);
        let known = if self.options.forced.contains(&step.name) {
            Known::Forced
        } else if self
            .options
            .restarted
            .get(self.nodes[index].name())
            .is_some_and(|s| s.contains(&step.name))
        {
            Known::Restarted
        } else {
            Known::Nothing
        };
        let decision = decide(step.policy, marker, &self.hashes[i], &state.boot_id, known);
        match decision {
            Decision::Run(reason) if reason != RunReason::Forced && step.check.is_some() => {
                match self.run_check(session, index, i).await {
                    Ok(true) => Ok(Decision::Skip(SkipReason::AlreadyDone)),
                    Ok(false) => Ok(decision),
                    Err(message) => Err((reason, message)),
                }
            }
            _ => Ok(decision),
        }
    }

    /// Reports step `i` as skipped on node `index` and lets waiting nodes past it.
    fn skipped(&self, index: usize, i: usize, report: &mut NodeReport, reason: SkipReason) {
        let step = &self.steps[i].name;
        self.emit(&Event::StepSkipped {
            node: self.nodes[index].name(),
            step,
            reason,
        });
        report.steps.push(StepReport {
            step: step.clone(),
            outcome: StepOutcome::Skipped(reason),
        });
        self.publish(index, i + 1, false);
    }

    /// Records step `i` as failed in `report`; returns where the node stopped.
    fn failed_at(
        &self,
        i: usize,
        report: &mut NodeReport,
        reason: RunReason,
        message: String,
    ) -> (usize, NodeStatus) {
        let step = &self.steps[i].name;
        report.steps.push(StepReport {
            step: step.clone(),
            outcome: StepOutcome::Failed {
                reason,
                message: message.clone(),
            },
        });
        (
            i,
            NodeStatus::Failed {
                step: Some(step.clone()),
                message,
            },
        )
    }

    /// Waits until the barrier before step `i` opens, or reports who blocks it.
    async fn wait_at_barrier(
        &self,
        index: usize,
        i: usize,
        scope: Scope,
    ) -> Result<(), (usize, NodeStatus)> {
        let mut receiver = self.progress.subscribe();
        let mut announced = false;
        loop {
            let current = gate(&receiver.borrow_and_update(), scope, i);
            match current {
                Gate::Open => return Ok(()),
                Gate::Blocked(indices) => {
                    return Err((
                        i,
                        NodeStatus::Blocked {
                            step: self.steps[i].name.clone(),
                            waiting_for: indices
                                .into_iter()
                                .map(|n| self.nodes[n].name().to_owned())
                                .collect(),
                        },
                    ));
                }
                Gate::Pending => {
                    if !announced {
                        announced = true;
                        self.emit(&Event::Waiting {
                            node: self.nodes[index].name(),
                            step: &self.steps[i].name,
                        });
                    }
                    // The sender lives in `self`, so this only fails if the run is torn down.
                    if receiver.changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pool::pool_key;
    use super::*;
    use crate::ssh::{self, Target};

    fn step(name: &str) -> StepSpec {
        StepSpec::new(name, "true")
    }

    fn node() -> NodeSpec {
        NodeSpec::new(
            Target {
                node: "n".into(),
                host: "127.0.0.1".into(),
                port: 22,
                user: "u".into(),
            },
            ssh::HostKeyPolicy::Pinned(
                ssh::HostKeyPair::generate()
                    .expect("generation works")
                    .public()
                    .clone(),
            ),
        )
    }

    #[test]
    fn input_is_validated_before_any_connection() {
        assert_eq!(validate(&[], &[]), Err(Error::NoNodes));
        assert_eq!(
            validate(&[node()], &[step("a"), step("a")]),
            Err(Error::DuplicateStep("a".into()))
        );
        assert_eq!(
            validate(&[node()], &[step("../x")]),
            Err(Error::BadStepName("../x".into()))
        );
        assert_eq!(
            Error::DuplicateStep("a".into()).to_string(),
            "two steps are named \"a\"; step names must be unique"
        );
        assert_eq!(
            validate(&[node()], &[step("mofed"), step("blob.v2")]),
            Ok(())
        );
        let mut staged = step("stage");
        let list = |name: &str| crate::steps::StepFile {
            name: name.into(),
            content: crate::steps::FileContent::Same(String::new()),
        };
        staged.files = vec![list("shard.tsv"), list("shard.tsv")];
        assert_eq!(
            validate(&[node()], std::slice::from_ref(&staged)),
            Err(Error::BadFileName {
                step: "stage".into(),
                file: "shard.tsv".into()
            })
        );
        staged.files = vec![list(".hidden")];
        assert!(validate(&[node()], &[staged]).is_err());
    }

    #[test]
    fn pool_keys_distinguish_jumped_nodes() {
        let mut n = node();
        assert_eq!(pool_key(&n), "u@127.0.0.1:22");
        n.jump = Some(super::super::spec::Hop {
            target: Target {
                node: "head".into(),
                host: "20.1.2.3".into(),
                port: 22,
                user: "u".into(),
            },
            host_key: n.host_key.clone(),
        });
        assert_eq!(pool_key(&n), "u@127.0.0.1:22 via u@20.1.2.3:22");
    }
}
