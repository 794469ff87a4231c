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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OnceCell, watch};
use tokio::task::JoinSet;

use crate::ssh::{self, Auth, Exit, Privilege, ScriptRequest, Session, Stream, Target, WaitPolicy};

use super::log::{Redactor, StepLog, log_path};
use super::marker::{
    Decision, Known, NodeState, REBOOT_EXIT, RunReason, SkipReason, check_marker_epilogue, decide,
    parse_state, read_state_command, write_marker_epilogue,
};
use super::progress::{Gate, Progress, applies, barrier, gate};
use super::report::{NodeReport, NodeStatus, RunReport, StepOutcome, StepReport};
use super::spec::{NodeSpec, Scope, StepSpec};

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
        let mut session = self
            .connect(node, &self.options.wait)
            .await
            .map_err(unreachable)?;
        let mut state = read_state(&session, node).await.map_err(unreachable)?;

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
            let outcome = match self.run_step(&session, index, i, reason).await {
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

    /// Runs step `i` on node `index`, streaming its output to the log and the events.
    async fn run_step(
        &self,
        session: &Session,
        index: usize,
        i: usize,
        reason: RunReason,
    ) -> Result<Ran, String> {
        let node = &self.nodes[index];
        let step = &self.steps[i];
        self.emit(&Event::StepStarted {
            node: node.name(),
            step: &step.name,
            reason,
        });
        let path = log_path(
            &self.options.log_dir,
            &self.options.run_id,
            node.name(),
            &step.name,
        );
        let mut log = StepLog::create(&path);
        let request = ScriptRequest {
            script: step.script.clone(),
            env: self.script_env(index, i),
            secrets: step
                .secrets
                .iter()
                .map(|s| (s.name.clone(), s.value.clone()))
                .collect(),
            privilege: self.options.privilege,
            timeout: step.timeout,
            epilogue: Some(write_marker_epilogue(
                &node.marker_dir,
                &step.name,
                &self.hashes[i],
                &node.boot_id_path,
            )),
        };
        let result = session
            .run_script(&request, &mut |stream, line| {
                let line = self.redactor.redact(line);
                log.line(&line);
                self.emit(&Event::Line {
                    node: node.name(),
                    step: &step.name,
                    stream,
                    line: &line,
                });
            })
            .await;
        log.finish();
        let log_note = format!("(log: {})", path.display());
        match result {
            Ok(Exit::Code(0)) => Ok(Ran::Done),
            Ok(Exit::Code(REBOOT_EXIT)) => Ok(Ran::Reboot),
            Ok(Exit::Code(code)) => Err(format!("exit status {code} {log_note}")),
            Ok(Exit::Signal(signal)) => Err(format!("killed by signal {signal} {log_note}")),
            Err(e) => Err(format!("{e} {log_note}")),
        }
    }

    /// Runs step `i`'s check on node `index`: `Ok(true)` when it says the work is already done
    /// (its marker is then written by the same remote shell), `Ok(false)` when the step must
    /// run (any other exit status, a timeout included). Only a lost connection is an error.
    /// Output goes to `<step>.check.log`, not to the terminal: a check is a quick question, and
    /// 64 nodes answering it would drown the steps that do run.
    async fn run_check(&self, session: &Session, index: usize, i: usize) -> Result<bool, String> {
        let node = &self.nodes[index];
        let step = &self.steps[i];
        let Some(check) = &step.check else {
            return Ok(false);
        };
        let path = log_path(
            &self.options.log_dir,
            &self.options.run_id,
            node.name(),
            &format!("{}.check", step.name),
        );
        let mut log = StepLog::create(&path);
        let request = ScriptRequest {
            script: check.clone(),
            env: self.script_env(index, i),
            secrets: step
                .secrets
                .iter()
                .map(|s| (s.name.clone(), s.value.clone()))
                .collect(),
            privilege: self.options.privilege,
            timeout: Some(step.timeout.map_or(CHECK_TIMEOUT, |t| t.min(CHECK_TIMEOUT))),
            epilogue: Some(check_marker_epilogue(
                &node.marker_dir,
                &step.name,
                &self.hashes[i],
                &node.boot_id_path,
            )),
        };
        let result = session
            .run_script(&request, &mut |_, line| {
                log.line(&self.redactor.redact(line));
            })
            .await;
        let done = match &result {
            Ok(exit) => {
                log.line(&format!(
                    "dsinfra: check {} ({exit:?})",
                    if exit.success() {
                        "says already done"
                    } else {
                        "says run the step"
                    }
                ));
                exit.success()
            }
            Err(_) => false,
        };
        log.finish();
        result.map(|_| done).map_err(|e| {
            format!(
                "the step's check could not run: {e} (log: {})",
                path.display()
            )
        })
    }

    /// The variables a step's script sees: its parameters, then the node's identity
    /// (`DSINFRA_NODE`, `DSINFRA_RANK` counting from 0 at the head, `DSINFRA_NODES`), so one
    /// script can shard work by rank.
    fn script_env(&self, rank: usize, i: usize) -> Vec<(String, String)> {
        let node = &self.nodes[rank];
        let mut env: Vec<(String, String)> = self.steps[i]
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        env.push(("DSINFRA_NODE".to_owned(), node.name().to_owned()));
        env.push(("DSINFRA_RANK".to_owned(), rank.to_string()));
        env.push(("DSINFRA_NODES".to_owned(), self.nodes.len().to_string()));
        env
    }

    /// Reboots a node after step `i` asked for it, waits for a new boot id, and records the
    /// step's marker in the new boot (so a per-boot step that asked does not run again).
    async fn reboot(
        &self,
        session: Session,
        node: &NodeSpec,
        old_boot: &str,
        i: usize,
    ) -> Result<(Session, String), String> {
        // The command may kill the connection before it answers: its outcome says nothing.
        let _ = session
            .output(
                &self.options.reboot_command,
                b"",
                Some(Duration::from_mins(1)),
            )
            .await;
        self.pool.forget(&pool_key(node));
        session.close().await;
        drop(session);

        let limit = self.options.reboot_wait.limit;
        let started = Instant::now();
        loop {
            let remaining = limit.saturating_sub(started.elapsed());
            let wait = WaitPolicy {
                limit: remaining,
                ..self.options.reboot_wait
            };
            let fresh = self.connect(node, &wait).await?;
            let boot_id = fresh
                .boot_id(Some(&node.boot_id_path))
                .await
                .map_err(|e| e.to_string())?;
            if boot_id != old_boot {
                let mut marker = ScriptRequest::new("true");
                marker.privilege = self.options.privilege;
                marker.epilogue = Some(write_marker_epilogue(
                    &node.marker_dir,
                    &self.steps[i].name,
                    &self.hashes[i],
                    &node.boot_id_path,
                ));
                let exit = fresh
                    .run_script(&marker, &mut |_, _| {})
                    .await
                    .map_err(|e| e.to_string())?;
                if !exit.success() {
                    return Err(format!(
                        "cannot record the step marker after the reboot ({exit:?})"
                    ));
                }
                return Ok((fresh, boot_id));
            }
            // Still the old boot: the reboot has not taken the node down yet.
            self.pool.forget(&pool_key(node));
            fresh.close().await;
            if started.elapsed() + Duration::from_secs(1) >= limit {
                return Err(format!(
                    "the node did not reboot within {}s (boot id unchanged)",
                    limit.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// The node's session, from the pool (through its jump host if it has one).
    async fn connect(&self, node: &NodeSpec, wait: &WaitPolicy) -> Result<Session, String> {
        let auth = &self.options.auth;
        match &node.jump {
            None => {
                self.pool
                    .get(pool_key(node), || {
                        ssh::connect(&node.target, &node.host_key, auth, wait)
                    })
                    .await
            }
            Some(hop) => {
                let jump = self
                    .pool
                    .get(target_key(&hop.target, None), || {
                        ssh::connect(&hop.target, &hop.host_key, auth, &self.options.wait)
                    })
                    .await
                    .map_err(|e| format!("cannot reach the jump host: {e}"))?;
                self.pool
                    .get(pool_key(node), || {
                        ssh::connect_via(&jump, &node.target, &node.host_key, auth, wait)
                    })
                    .await
            }
        }
    }
}

/// Reads the boot id and the markers with one unprivileged command.
async fn read_state(session: &Session, node: &NodeSpec) -> Result<NodeState, String> {
    let output = session
        .output(
            &read_state_command(&node.marker_dir, &node.boot_id_path),
            b"",
            Some(Duration::from_mins(1)),
        )
        .await
        .map_err(|e| e.to_string())?;
    parse_state(&output.stdout).ok_or_else(|| {
        format!(
            "node {}: cannot read the boot id from {}: {}",
            node.name(),
            node.boot_id_path,
            output.stderr.trim()
        )
    })
}

fn target_key(target: &Target, via: Option<&Target>) -> String {
    let direct = format!("{}@{}", target.user, target.address());
    match via {
        Some(hop) => format!("{direct} via {}", target_key(hop, None)),
        None => direct,
    }
}

fn pool_key(node: &NodeSpec) -> String {
    target_key(&node.target, node.jump.as_ref().map(|hop| &hop.target))
}

/// One connection per destination, shared by the node's own task and the nodes that jump
/// through it. A failed connection is remembered as its message, so 31 nodes behind an
/// unreachable head fail at once instead of each waiting out the limit again.
#[derive(Default)]
struct Pool {
    entries: Mutex<HashMap<String, Arc<Slot>>>,
}

/// A pooled connection, or the message of the attempt that failed.
type Slot = OnceCell<Result<Session, String>>;

impl Pool {
    async fn get<F, Fut>(&self, key: String, connect: F) -> Result<Session, String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Session, ssh::Error>>,
    {
        let cell = {
            let mut entries = self.entries.lock().expect("pool mutex is never poisoned");
            Arc::clone(entries.entry(key).or_default())
        };
        cell.get_or_init(|| async { connect().await.map_err(|e| e.to_string()) })
            .await
            .clone()
    }

    fn forget(&self, key: &str) {
        self.entries
            .lock()
            .expect("pool mutex is never poisoned")
            .remove(key);
    }

    async fn close_all(&self) {
        let cells: Vec<_> = self
            .entries
            .lock()
            .expect("pool mutex is never poisoned")
            .drain()
            .map(|(_, cell)| cell)
            .collect();
        for cell in cells {
            if let Some(Ok(session)) = cell.get() {
                session.close().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
