//! `dsinfra run`, `runs` and `logs`: run a command on the experiment's nodes over the pinned
//! SSH sessions the steps use, with the environment a distributed job needs ([`job`]), record
//! each run under `.dsinfra/<manifest>/runs/<id>/` ([`records`]), and follow detached runs on
//! the head. docs/run.md is the user's guide and the contract of the run directory on a node.
//!
//! An attached run streams every node's lines as [`OpEvent::Output`] and ends with the job's
//! exit status (the first failure's, for several nodes). A first Ctrl-C stops the job on every
//! node (its process group gets SIGTERM) and waits for the nodes to report; a second returns at
//! once with the record saved as far as known. `--park-after` then parks the VMs through
//! [`super::park`], whatever the job's status, unless a Ctrl-C stopped the job (the user is
//! at the keyboard and decides).

mod job;
pub mod preempt;
pub mod records;
mod recover;
pub(crate) mod remote;
mod supervise;
mod target;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use chrono::Utc;
use futures::future::join_all;

use super::steps::StepsOptions;
use super::{Arm, AutoApprove, Cancel, Error, Events, OpEvent, ParkOutcome, ParkRequest};
use crate::diag::SourceMap;
use crate::engine::post_boot::auth;
use crate::engine::power::PowerChange;
use crate::engine::reach::{Endpoints, NodeReach};
use crate::model::Desired;
use crate::ssh::{Exit, Privilege, ScriptRequest, Session, Stream};
use crate::state::State;

pub use job::{DEFAULT_RUNS_DIR, MASTER_PORT};
pub use records::{Attempt, NodeRun, RecoverSpec, RunRecord, RunState};
pub use recover::Recover;
pub use target::RunTarget;

use job::{Job, JobNode};
use remote::Reacher;

/// The environment variable that moves the run directories on the nodes (tests: many hosts,
/// one filesystem), read on the workstation like `DSINFRA_MARKER_DIR`.
pub const RUNS_DIR_ENV: &str = "DSINFRA_RUNS_DIR";

/// Seconds between the preemption watcher's polls of Scheduled Events (tests: 1).
pub const PREEMPT_POLL_ENV: &str = "DSINFRA_PREEMPT_POLL_SECS";

/// Where a run is, and how to reach its nodes.
pub struct Where<'a> {
    /// The manifest's world: blocks, sizes, steps.
    pub desired: &'a Desired,
    /// The manifest's path: records live next to it.
    pub manifest: &'a Path,
    /// The state (read without holding its lock: a run must not block an apply).
    pub state: State,
    /// The connection (for the IP addresses and the emulator's SSH endpoints).
    pub arm: &'a Arm,
    /// `-i`: the private key to log in with (else the environment's sources).
    pub identity: Option<PathBuf>,
}

/// `--park-after`: what the park needs besides the run's [`Where`].
pub struct ParkAfter<'a> {
    /// The manifest's text, for located problems.
    pub sources: &'a SourceMap,
    /// Steps options (BeeOND's stop before the park).
    pub steps: StepsOptions,
    /// The manifest's `backend` block: the park locks the state it names.
    pub backend: Option<&'a crate::model::BackendConfig>,
}

/// What `dsinfra run` is asked to do.
pub struct RunRequest<'a> {
    /// Where.
    pub at: Where<'a>,
    /// On which nodes.
    pub target: RunTarget,
    /// The command's words (joined by spaces for the remote shell, as `ssh` does).
    pub command: Vec<String>,
    /// `--detach`: start on the head and return.
    pub detach: bool,
    /// `--park-after`: park the VMs when the job ends.
    pub park_after: Option<ParkAfter<'a>>,
    /// `--recover`: bring evicted spot nodes back and start the job again.
    pub recover: Option<Recover<'a>>,
    /// `--on-preempt`: what a spot node runs when Azure announces its eviction.
    pub on_preempt: Option<String>,
    /// `--checkpoint-dir`: where the job keeps its checkpoints (`DSINFRA_CHECKPOINT_DIR`).
    pub checkpoint_dir: Option<String>,
}

/// What a run did.
#[derive(Debug)]
pub struct RunOutcome {
    /// The record, as saved.
    pub record: RunRecord,
    /// The park after the job, when asked: what it did, or why it failed.
    pub park: Option<Result<ParkOutcome, Error>>,
    /// Set when a Ctrl-C stopped the job (and the waiting, at a second press); no park follows.
    pub interrupted: bool,
}

/// Runs the request's command.
///
/// # Errors
///
/// Before the job started: the target names nothing, `--detach` with several nodes or with
/// `--park-after`, no usable SSH identity, the endpoints could not be read, the record could
/// not be written, Ctrl-C ([`Error::Interrupted`]). Nodes that fail are in the outcome.
pub async fn run(
    request: RunRequest<'_>,
    events: &Events,
    cancel: &Cancel,
) -> Result<RunOutcome, Error> {
    let RunRequest {
        mut at,
        target,
        command,
        detach,
        park_after,
        recover,
        on_preempt,
        checkpoint_dir,
    } = request;
    refuse_detached(detach, park_after.is_some())?;
    let endpoints = cancel
        .interruptible(super::endpoints::for_state(at.arm, &at.state))
        .await??;
    let mut selected = target::select(&target, at.desired, &at.state, &endpoints)?;
    if detach && selected.ranks != [0] {
        return Err(Error::Failed(format!(
            "--detach starts the job on the head only, but `{}` is {} nodes: drop the TARGET \
             (or name the head); the job can start work on the other nodes through \
             $DSINFRA_HOSTFILE",
            selected.label,
            selected.ranks.len()
        )));
    }
    let auth =
        auth::identity(&auth::Sources::from_env(at.identity.as_deref())).map_err(Error::Failed)?;
    let mut job = make_job(&at, &selected.block, &endpoints, command.join(" "));
    job.on_preempt = on_preempt;
    job.checkpoint_dir = checkpoint_dir.or_else(|| durable_dir(&at, &selected));
    let spec = recover.as_ref().filter(|_| detach).map(|r| RecoverSpec {
        max_restarts: r.max_restarts,
        on_preempt: job.on_preempt.clone(),
        checkpoint_dir: job.checkpoint_dir.clone(),
    });
    let mut record = new_record(&job, &selected, detach, spec);
    records::save(at.manifest, &record)?;
    let mut attempt_started = record.started;
    let interrupted = loop {
        let reacher = Reacher::new(auth.clone(), selected.block.first().cloned());
        let interrupted = if detach {
            let head = &selected.block[0];
            warn_unpinned(&reacher, &[head], events);
            start_detached(&job, &reacher, head, &mut record, events).await;
            false
        } else {
            let attempt = Launch {
                job: &job,
                selected: &selected,
                reacher: &reacher,
                stop_on_preempt: recover.is_some(),
            };
            attempt.run(at.manifest, &mut record, events, cancel).await
        };
        records::save(at.manifest, &record)?;
        let Some(recover) = recover.as_ref().filter(|_| !interrupted && !detach) else {
            break interrupted;
        };
        let Some(next) = recover_from_eviction(
            &at,
            recover,
            &selected,
            (&mut record, attempt_started),
            job.restart,
            (events, cancel),
        )
        .await?
        else {
            break false;
        };
        attempt_started = Utc::now();
        // The nodes may have new addresses (a VM created again): read everything afresh.
        at.state = next;
        let endpoints = cancel
            .interruptible(super::endpoints::for_state(at.arm, &at.state))
            .await??;
        selected = target::select(&target, at.desired, &at.state, &endpoints)?;
        job = make_job(&at, &selected.block, &endpoints, job.command.clone()).again(job);
        record.nodes = node_runs(&job, &selected.ranks);
        record.ended = None;
        records::save(at.manifest, &record)?;
    };
    let park = match park_after {
        Some(park_after) if !interrupted => Some(park(&at, park_after, events, cancel).await),
        _ => None,
    };
    Ok(RunOutcome {
        record,
        park,
        interrupted,
    })
}

/// Where the selected block's job checkpoints unless told ([`job::durable_checkpoint_dir`]).
fn durable_dir(at: &Where<'_>, selected: &target::Selected) -> Option<String> {
    let head = selected.block.first()?;
    job::durable_checkpoint_dir(&at.desired.steps, &head.block)
}

/// What `--detach` cannot be combined with.
fn refuse_detached(detach: bool, park_after: bool) -> Result<(), Error> {
    if detach && park_after {
        return Err(Error::Failed(
            "--park-after with --detach needs the idle watcher on the head, which is not built \
             yet: run attached (without --detach) to park when the job ends, or park later \
             with `dsinfra park`"
                .to_owned(),
        ));
    }
    Ok(())
}

/// Notes the nodes that will be trusted on first use.
fn warn_unpinned(reacher: &Reacher, nodes: &[&NodeReach], events: &Events) {
    for node in nodes {
        for warning in reacher.unpinned_warnings(node) {
            events.event(OpEvent::Note(&warning));
        }
    }
}

/// One attached attempt of the job on the selected nodes.
struct Launch<'a> {
    job: &'a Job,
    selected: &'a target::Selected,
    reacher: &'a Reacher,
    stop_on_preempt: bool,
}

impl Launch<'_> {
    /// Runs it to its end, filling in the record (its nodes, its end, the notices the watchers
    /// reported); returns whether a Ctrl-C stopped it.
    async fn run(
        &self,
        manifest: &Path,
        record: &mut RunRecord,
        events: &Events,
        cancel: &Cancel,
    ) -> bool {
        let nodes: Vec<&NodeReach> = self
            .selected
            .ranks
            .iter()
            .map(|&r| &self.selected.block[r])
            .collect();
        warn_unpinned(self.reacher, &nodes, events);
        let tasks = Tasks {
            job: self.job,
            reacher: self.reacher,
            manifest,
            events,
            prefixed: nodes.len() > 1,
            sessions: Mutex::default(),
            notices: Mutex::default(),
            preempted: tokio::sync::Notify::new(),
            lost: tokio::sync::Notify::new(),
            stop_on_preempt: self.stop_on_preempt,
        };
        let interrupted = tasks
            .run_all(&nodes, &self.selected.ranks, record, cancel)
            .await;
        record.preemptions.extend(
            tasks
                .notices
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if record
            .nodes
            .iter()
            .all(|n| n.exit.is_some() || n.error.is_some())
        {
            record.ended = Some(Utc::now());
        }
        interrupted
    }
}

/// After an attempt that did not succeed: whether spot nodes of the block were evicted, and if
/// so (and `--max-restarts` allows) bring them back and close the attempt in the record.
/// Returns the state to start the next attempt from, or `None` when the run ends here (it
/// succeeded, failed on its own, or may not be started again).
///
/// # Errors
///
/// The nodes could not be brought back (the record says why), ARM could not be read, Ctrl-C.
async fn recover_from_eviction(
    at: &Where<'_>,
    recover: &Recover<'_>,
    selected: &target::Selected,
    (record, attempt_started): (&mut RunRecord, chrono::DateTime<Utc>),
    restart: u32,
    (events, cancel): (&Events, &Cancel),
) -> Result<Option<State>, Error> {
    if record.exit() == Some(0) {
        return Ok(None);
    }
    let notices: Vec<preempt::Notice> = record
        .preemptions
        .iter()
        .filter(|n| n.seen >= attempt_started)
        .cloned()
        .collect();
    let gone = recover::evicted(at, &selected.block, &notices, cancel).await?;
    if gone.is_empty() && notices.is_empty() {
        // Not an eviction: the job failed on its own, and its exit status says so.
        return Ok(None);
    }
    let mut names: Vec<String> = gone.iter().map(|e| e.node.clone()).collect();
    if names.is_empty() {
        names = notices.iter().map(|n| n.node.clone()).collect();
        names.dedup();
    }
    if restart >= recover.max_restarts {
        events.event(OpEvent::Note(&format!(
            "{} evicted, but the job was already started again {restart} time(s) \
             (--max-restarts {}): not starting it again",
            names.join(", "),
            recover.max_restarts
        )));
        return Ok(None);
    }
    let what = if gone.is_empty() {
        "announced for eviction, which did not come:"
    } else if gone.iter().all(|e| e.gone == recover::Gone::Preempted) {
        "preempted (Azure Machine Learning took the node back): waiting for the new node, then"
    } else {
        "evicted: bringing back, then"
    };
    events.event(OpEvent::Note(&format!(
        "{} {what} starting the job again (restart {} of at most {})",
        names.join(", "),
        restart + 1,
        recover.max_restarts
    )));
    let brought = if gone.is_empty() {
        // The job was stopped for a notice Azure did not carry out in time: nothing to bring
        // back, but the job is to be started again.
        Ok(vec![
            "no eviction followed the notice: the job starts again as it was".to_owned(),
        ])
    } else {
        recover::bring_back(at, recover, &gone, events, cancel).await
    };
    let recovery = match brought {
        Ok(done) => done,
        Err(Error::Interrupted(i)) => return Err(Error::Interrupted(i)),
        Err(err) => {
            record.gave_up = Some(format!("{}: {err}", names.join(", ")));
            records::save(at.manifest, record)?;
            return Err(err);
        }
    };
    let closed = record.close_attempt(restart, attempt_started, names, recovery);
    record.attempts.push(closed);
    // Read under the lock (the recovery's writes are done), which is released at once: the
    // next attempt must not hold it (a remote state's lease would otherwise stay taken).
    let (backend, state) =
        recover::open_state(at.manifest, recover.backend, events, cancel).await?;
    super::walk::release(backend, events).await;
    Ok(Some(state))
}

/// The record of a run about to start; `recover` goes with a detached run, for `logs -f`.
fn new_record(
    job: &Job,
    selected: &target::Selected,
    detach: bool,
    recover: Option<RecoverSpec>,
) -> RunRecord {
    RunRecord {
        id: job.id.clone(),
        command: job.command.clone(),
        target: selected.label.clone(),
        detached: detach,
        started: Utc::now(),
        ended: None,
        nodes: node_runs(job, &selected.ranks),
        lost: false,
        attempts: Vec::new(),
        preemptions: Vec::new(),
        gave_up: None,
        recover,
    }
}

/// The records of the nodes at `ranks`, before they run.
fn node_runs(job: &Job, ranks: &[usize]) -> Vec<NodeRun> {
    ranks
        .iter()
        .map(|&r| NodeRun {
            node: job.nodes[r].node.clone(),
            dir: job.dir(&job.nodes[r]),
            exit: None,
            ended: None,
            error: None,
        })
        .collect()
}

/// The job for `block`: its nodes' private addresses, the slots of its size, its mounts.
/// Against an emulator the addresses are the local endpoints it maps the private IPs to, as in
/// the `ssh_mesh` step's nodefile (decision 49), so the hostfile names hosts that answer here.
fn make_job(at: &Where<'_>, block: &[NodeReach], endpoints: &Endpoints, command: String) -> Job {
    let desired = at.desired;
    let head = block.first();
    let size = head
        .and_then(|n| {
            desired
                .resource(&n.vm)
                .or_else(|| n.aml_compute().and_then(|c| desired.resource(&c)))
        })
        .and_then(|vm| vm.attrs.get("size"))
        .and_then(serde_json::Value::as_str);
    let block_address = head.map(|n| n.block.clone());
    Job {
        id: records::new_id(Utc::now()),
        command,
        nodes: block
            .iter()
            .map(|n| JobNode {
                node: n.node().to_string(),
                vm_name: n.name.clone(),
                host: n
                    .private_ip
                    .as_deref()
                    .map_or_else(|| n.name.clone(), |ip| endpoints.node_address(ip).0),
                imds: imds_of(at, n, endpoints),
            })
            .collect(),
        slots: job::slots_for(&desired.catalog, size),
        mounts: block_address
            .map(|b| job::mounts(&desired.steps, &b))
            .unwrap_or_default(),
        runs_dir: std::env::var(RUNS_DIR_ENV)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_RUNS_DIR.to_owned()),
        restart: 0,
        checkpoint_dir: None,
        on_preempt: None,
        preempt_poll: std::env::var(PREEMPT_POLL_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|s| *s > 0)
            .unwrap_or(preempt::DEFAULT_POLL_SECS),
    }
}

/// Where a spot node's watcher reads Scheduled Events: Azure's instance metadata service, or
/// under an emulator its stand-in for that VM; `None` for a regular VM (no eviction to watch).
fn imds_of(at: &Where<'_>, node: &NodeReach, endpoints: &Endpoints) -> Option<String> {
    let spot = at
        .desired
        .resource(&node.vm)
        .and_then(|r| r.attrs.get("priority"))
        .and_then(serde_json::Value::as_str)
        == Some("Spot");
    if !spot {
        return None;
    }
    if !endpoints.is_emulated() {
        return Some(preempt::AZURE_IMDS.to_owned());
    }
    let id = at.state.resource(&node.vm)?.id.clone()?;
    Some(format!(
        "{}/_emulator/imds{id}",
        at.arm.client.endpoint().trim_end_matches('/')
    ))
}

/// The script request that starts the job at `rank`.
fn start_request(job: &Job, rank: usize, detach: bool) -> ScriptRequest {
    ScriptRequest {
        script: job.start_script(rank, detach),
        files: job.files(rank),
        privilege: Privilege::User,
        ..ScriptRequest::default()
    }
}

/// Starts the job detached on the head; the record notes a failure to start.
async fn start_detached(
    job: &Job,
    reacher: &Reacher,
    head: &NodeReach,
    record: &mut RunRecord,
    events: &Events,
) {
    let started = async {
        let session = reacher.connect(head).await?;
        let mut lines = Vec::new();
        let exit = session
            .run_script(&start_request(job, 0, true), &mut |_, line| {
                lines.push(line.to_owned());
            })
            .await
            .map_err(|e| e.to_string())?;
        session.close().await;
        if exit.success() {
            Ok(())
        } else {
            Err(format!(
                "the job could not be started ({exit:?}): {}",
                lines.join("; ")
            ))
        }
    };
    if let Err(why) = started.await {
        events.event(OpEvent::Note(&format!("{}: {why}", head.node())));
        record.nodes[0].error = Some(why);
        record.nodes[0].ended = Some(Utc::now());
    }
}

/// The attached run's node tasks and what they share.
struct Tasks<'a> {
    job: &'a Job,
    reacher: &'a Reacher,
    manifest: &'a Path,
    events: &'a Events,
    /// Whether lines carry their node's name (several nodes).
    prefixed: bool,
    /// The open sessions, for stopping the job on Ctrl-C.
    sessions: Mutex<Vec<(Session, String)>>,
    /// The Preempt notices the spot nodes' watchers reported.
    notices: Mutex<Vec<preempt::Notice>>,
    /// Pressed at each notice.
    preempted: tokio::sync::Notify,
    /// Pressed when a node's session ends without the job's exit status (the node went away:
    /// a low-priority AML node is taken back without a notice dsinfra can read).
    lost: tokio::sync::Notify,
    /// `--recover`: a notice stops the job on every node (it starts again once the evicted
    /// node is back); without it the job goes on where it can.
    stop_on_preempt: bool,
}

impl Tasks<'_> {
    /// Runs the job on every node; returns whether a Ctrl-C stopped the job (the first press:
    /// the nodes then report how it ended) or the waiting (the second).
    async fn run_all(
        &self,
        nodes: &[&NodeReach],
        ranks: &[usize],
        record: &mut RunRecord,
        cancel: &Cancel,
    ) -> bool {
        let shared = Mutex::new(std::mem::take(&mut record.nodes));
        let interrupted = {
            let all = join_all(
                nodes
                    .iter()
                    .zip(ranks)
                    .enumerate()
                    .map(|(i, (node, &rank))| self.run_node(node, rank, i, &shared)),
            );
            let mut cancel = cancel.clone();
            tokio::pin!(all);
            let mut presses = 0;
            let mut stopped = false;
            loop {
                tokio::select! {
                    _ = &mut all => break presses > 0,
                    () = self.preempted.notified(), if self.stop_on_preempt && !stopped => {
                        stopped = true;
                        self.events.event(OpEvent::Note(
                            "a spot node is being evicted: stopping the job on every node \
                             (SIGTERM to its process group); --recover starts it again once the \
                             node is back",
                        ));
                        self.stop_all().await;
                    }
                    () = self.lost.notified(), if self.stop_on_preempt && !stopped => {
                        stopped = true;
                        self.events.event(OpEvent::Note(
                            "a node's session was lost: stopping the job on every node \
                             (SIGTERM to its process group); --recover then checks whether \
                             Azure took the node and starts the job again once it is back",
                        ));
                        self.stop_all().await;
                    }
                    () = cancel.pressed() => {
                        presses += 1;
                        if presses > 1 {
                            break true;
                        }
                        self.events.event(OpEvent::Note(
                            "Ctrl-C: stopping the job on every node (SIGTERM to its process \
                             group); press again to stop waiting",
                        ));
                        self.stop_all().await;
                    }
                }
            }
        };
        record.nodes = shared.into_inner().unwrap_or_else(PoisonError::into_inner);
        interrupted
    }

    /// Sends the stop to every node's job (best effort).
    async fn stop_all(&self) {
        let sessions = self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (session, dir) in sessions {
            let _ = session
                .output(
                    &job::stop_script(&dir),
                    b"",
                    Some(std::time::Duration::from_secs(10)),
                )
                .await;
        }
    }

    /// Runs the job on one node, streaming and logging its lines, and fills in its record.
    async fn run_node(
        &self,
        node: &NodeReach,
        rank: usize,
        slot: usize,
        shared: &Mutex<Vec<NodeRun>>,
    ) {
        let name = node.node().to_string();
        let result = self.attached(node, rank, &name).await;
        let mut nodes = shared.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = &mut nodes[slot];
        entry.ended = Some(Utc::now());
        match result {
            Ok(Exit::Code(code)) => entry.exit = Some(i32::try_from(code).unwrap_or(255)),
            // A signal ends a shell's job with 128 + its number; the name is what SSH gives.
            Ok(Exit::Signal(signal)) => {
                entry.exit = Some(255);
                entry.error = Some(format!("killed by signal {signal}"));
            }
            Err(why) => {
                self.events.event(OpEvent::Note(&format!("{name}: {why}")));
                entry.error = Some(why);
                self.lost.notify_one();
            }
        }
    }

    async fn attached(&self, node: &NodeReach, rank: usize, name: &str) -> Result<Exit, String> {
        let session = self.reacher.connect(node).await?;
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((session.clone(), self.job.dir(&self.job.nodes[rank])));
        let log_path =
            records::log_path(self.manifest, &self.job.id, name).map_err(|e| e.to_string())?;
        // Each attempt of a recovered run appends to the node's log, after a line saying which.
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map(std::io::BufWriter::new)
            .map_err(|e| format!("could not write {}: {e}", log_path.display()))?;
        if self.job.restart > 0 {
            use std::io::Write as _;
            let _ = writeln!(log, "--- restart {} ---", self.job.restart);
        }
        let events = self.events;
        let prefixed = self.prefixed;
        let exit = session
            .run_script(
                &start_request(self.job, rank, false),
                &mut |stream, line| {
                    use std::io::Write as _;
                    let _ = writeln!(log, "{line}");
                    if stream == Stream::Stderr
                        && let Some(notice) = preempt::parse(name, line)
                    {
                        events.event(OpEvent::Note(&format!(
                            "{name}: Azure announced the eviction of this spot VM (Preempt {}, \
                             not before {})",
                            notice.event_id, notice.not_before
                        )));
                        self.notices
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(notice);
                        self.preempted.notify_one();
                        return;
                    }
                    events.event(OpEvent::Output {
                        node: prefixed.then_some(name),
                        stream,
                        line,
                    });
                },
            )
            .await
            .map_err(|e| e.to_string());
        let _ = std::io::Write::flush(&mut log);
        session.close().await;
        exit
    }
}

/// `--park-after`: the park operation on every VM of the experiment, approved by the flag.
async fn park(
    at: &Where<'_>,
    after: ParkAfter<'_>,
    events: &Events,
    cancel: &Cancel,
) -> Result<ParkOutcome, Error> {
    events.event(OpEvent::Note("--park-after: parking the experiment's VMs"));
    let (backend, state) = super::open_applied(at.manifest, after.backend).await?;
    let request = ParkRequest {
        change: PowerChange::Park,
        desired: at.desired,
        sources: after.sources,
        manifest: at.manifest,
        backend,
        state,
        arm: at.arm,
        only: &[],
        steps: after.steps,
    };
    super::park(request, events, &AutoApprove, cancel).await
}

/// What `dsinfra runs` and `dsinfra logs` look at: the records, and the head for detached runs
/// (`None` when it cannot be asked: the records are shown as last known).
pub struct Lookup<'a> {
    /// The manifest's path: records live next to it.
    pub manifest: &'a Path,
    /// How to reach the head, when a connection could be made.
    pub at: Option<Where<'a>>,
}

/// Every recorded run, oldest first, detached runs still running asked about on their head
/// (and their records updated).
///
/// # Errors
///
/// The records could not be read.
pub async fn runs(lookup: Lookup<'_>, events: &Events) -> Result<Vec<RunRecord>, Error> {
    let mut all = records::list(lookup.manifest)?;
    let open: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].detached && all[i].state() == RunState::Running)
        .collect();
    if open.is_empty() {
        return Ok(all);
    }
    // One session per node the open runs started on (usually the one head).
    let mut sessions: Vec<(String, Option<Session>)> = Vec::new();
    for i in open {
        let node = all[i].nodes[0].node.clone();
        if !sessions.iter().any(|(n, _)| *n == node) {
            let session = node_session(&lookup, &node, events).await;
            sessions.push((node.clone(), session));
        }
        let Some(Some(head)) = sessions.iter().find(|(n, _)| *n == node).map(|(_, s)| s) else {
            continue;
        };
        let record = &mut all[i];
        match probe(head, &record.nodes[0].dir).await {
            Ok(answer) => {
                apply_probe(record, answer);
                records::save(lookup.manifest, record)?;
            }
            Err(why) => events.event(OpEvent::Note(&format!(
                "run {}: could not ask {node} ({why}); its state is the last one known",
                record.id
            ))),
        }
    }
    for (_, session) in sessions.into_iter().filter_map(|(n, s)| Some((n, s?))) {
        session.close().await;
    }
    Ok(all)
}

/// What `dsinfra logs` is asked.
pub struct LogsRequest<'a> {
    /// Records and head.
    pub lookup: Lookup<'a>,
    /// The run's id.
    pub id: String,
    /// `-f`: follow a detached run until it ends.
    pub follow: bool,
    /// With `follow`: what recovering a detached run started with `--recover` needs, when the
    /// caller can give it (its limits are the run's own).
    pub recover: Option<Recover<'a>>,
}

/// Prints a run's logs as [`OpEvent::Output`] events: the local logs of an attached run, the
/// head's log of a detached one (followed to the end with `follow`). Returns the record, updated
/// with the state the head reported.
///
/// # Errors
///
/// No such run, or a detached run's head cannot be reached.
pub async fn logs(
    request: LogsRequest<'_>,
    events: &Events,
    cancel: &Cancel,
) -> Result<RunRecord, Error> {
    let LogsRequest {
        lookup,
        id,
        follow,
        recover,
    } = request;
    let mut record = records::load(lookup.manifest, &id)?;
    if !record.detached {
        let prefixed = record.nodes.len() > 1;
        for node in &record.nodes {
            let path = records::log_path(lookup.manifest, &id, &node.node)?;
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for line in text.lines() {
                events.event(OpEvent::Output {
                    node: prefixed.then_some(node.node.as_str()),
                    stream: Stream::Stdout,
                    line,
                });
            }
        }
        return Ok(record);
    }
    if follow && let (Some(spec), Some(recover)) = (record.recover.clone(), recover) {
        return supervise::follow_and_recover(lookup, record, (spec, recover), events, cancel)
            .await;
    }
    let mut seen = Followed::default();
    follow_once(&lookup, &mut record, (follow, 0), &mut seen, events, cancel).await?;
    Ok(record)
}

/// What following a detached run's log saw.
#[derive(Default)]
struct Followed {
    /// Lines printed.
    printed: usize,
    /// The Preempt notices among them (the head's watcher writes its line to the log).
    notices: Vec<preempt::Notice>,
}

/// Prints a detached run's log from its line `skip + 1` (followed to the job's end with
/// `follow`), counting into `seen` what it printed (also when the stream breaks), and updates
/// the record with the head's closing answer.
async fn follow_once(
    lookup: &Lookup<'_>,
    record: &mut RunRecord,
    (follow, skip): (bool, usize),
    seen: &mut Followed,
    events: &Events,
    cancel: &Cancel,
) -> Result<(), Error> {
    let head_name = record.nodes[0].node.clone();
    let head = node_session(lookup, &head_name, events)
        .await
        .ok_or_else(|| {
            Error::Failed(format!(
                "run {} is detached: its log is on the head, which cannot be reached now",
                record.id
            ))
        })?;
    let mut last = String::new();
    let exit = cancel
        .interruptible(head.exec(
            "bash -s",
            job::log_script(&record.nodes[0].dir, follow, skip).as_bytes(),
            None,
            &mut |stream, line| match stream {
                Stream::Stdout => {
                    seen.printed += 1;
                    if let Some(notice) = preempt::parse(&head_name, line) {
                        events.event(OpEvent::Note(&format!(
                            "{head_name}: Azure announced the eviction of this spot VM \
                             (Preempt {}, not before {})",
                            notice.event_id, notice.not_before
                        )));
                        seen.notices.push(notice);
                        return;
                    }
                    events.event(OpEvent::Output {
                        node: None,
                        stream,
                        line,
                    });
                }
                Stream::Stderr => line.clone_into(&mut last),
            },
        ))
        .await?
        .map_err(|e| Error::Failed(e.to_string()))?;
    head.close().await;
    if exit.success()
        && let Some(answer) = job::parse_probe(&last)
    {
        apply_probe(record, answer);
        records::save(lookup.manifest, record)?;
    }
    Ok(())
}

/// A session to `node`, the node a detached run was started on (through its block's head when
/// it is private); `None`, said why, when it cannot be reached.
async fn node_session(lookup: &Lookup<'_>, node: &str, events: &Events) -> Option<Session> {
    let at = lookup.at.as_ref()?;
    let reached = async {
        let endpoints: Endpoints = super::endpoints::for_state(at.arm, &at.state)
            .await
            .map_err(|e| e.to_string())?;
        let target = RunTarget {
            name: Some(node.to_owned()),
            all: false,
        };
        let selected = target::select(&target, at.desired, &at.state, &endpoints)
            .map_err(|e| e.to_string())?;
        let auth = auth::identity(&auth::Sources::from_env(at.identity.as_deref()))?;
        let reacher = Reacher::new(auth, selected.block.first().cloned());
        reacher.connect(&selected.block[selected.ranks[0]]).await
    };
    match reached.await {
        Ok(session) => Some(session),
        Err(why) => {
            events.event(OpEvent::Note(&format!(
                "could not reach {node} ({why}): its detached runs are shown as last known"
            )));
            None
        }
    }
}

/// Asks the head how the run in `dir` stands.
async fn probe(head: &Session, dir: &str) -> Result<(String, Option<i32>), String> {
    let output = head
        .output(
            "bash -s",
            job::state_probe(dir).as_bytes(),
            Some(std::time::Duration::from_secs(30)),
        )
        .await
        .map_err(|e| e.to_string())?;
    job::parse_probe(&output.stdout).ok_or_else(|| format!("unexpected answer {:?}", output.stdout))
}

/// Updates a detached run's record with the head's answer.
fn apply_probe(record: &mut RunRecord, (state, code): (String, Option<i32>)) {
    let node = &mut record.nodes[0];
    match (state.as_str(), code) {
        ("done", Some(code)) => {
            node.exit = Some(code);
            node.ended.get_or_insert_with(Utc::now);
            record.ended = node.ended;
        }
        ("lost" | "missing", _) => {
            record.lost = true;
            node.ended.get_or_insert_with(Utc::now);
            record.ended = node.ended;
        }
        _ => {}
    }
}
