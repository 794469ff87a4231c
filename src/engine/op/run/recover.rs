//! `dsinfra run --recover` (issue 34, docs/run.md): once an attempt of the job ended without
//! success, find the spot VMs of its block an eviction took ([`evicted`], waiting out a notice
//! the watchers reported), bring them back ([`bring_back`]: a deallocated VM is started through
//! the unpark operation, a deleted one created again through a targeted apply, each retried
//! with backoff while Azure answers with a capacity error), with exactly the steps the new or
//! restarted nodes need, plus the block-wide ones an eviction breaks (a BeeOND scratch and what
//! was staged into it, [`super::preempt::rebuilt_steps`]).
//!
//! A low-priority `aml_cluster` loses nodes differently: Azure Machine Learning takes a node
//! back without a notice dsinfra can read (no Scheduled Events on the service's nodes) and
//! allocates a new one in its place by itself. So a node of such a block that `listNodes` no
//! longer shows usable after a failed attempt is [`Gone::Preempted`]: the recovery waits for the
//! cluster to have its nodes again, runs the block's steps (all of them on the new node, the
//! BeeOND scratch and what was staged into it across the block) and starts the job again.

use std::time::Duration;

use serde_json::Value;

use super::super::apply::{ApplyOutcome, ApplyRequest, Manifest};
use super::super::steps::StepsOptions;
use super::super::{AutoApprove, Cancel, Error, Events, OpEvent, ParkRequest};
use super::Where;
use super::preempt::{self, Notice};
use crate::addr::Address;
use crate::azure::ResourceId;
use crate::azure::types::compute::PowerState;
use crate::diag::SourceMap;
use crate::engine::advice::ResourceError;
use crate::engine::power::PowerChange;
use crate::engine::reach::{AmlNode, NodeReach, Route, aml};
use crate::model::BackendConfig;
use crate::plan::Mode;
use crate::state::StateError;

/// What a recovery needs besides the run's [`Where`].
pub struct Recover<'a> {
    /// The manifest's text, for located problems.
    pub sources: &'a SourceMap,
    /// Steps options (identity; the recovery adds the steps it forces).
    pub steps: StepsOptions,
    /// The manifest's `backend` block: the recovery locks the state it names.
    pub backend: Option<&'a BackendConfig>,
    /// `--max-restarts`: how many times the job is started again at most.
    pub max_restarts: u32,
    /// The first wait after a capacity refusal; doubled at each further one.
    pub backoff: Duration,
    /// How many times bringing the nodes back is tried while Azure has no capacity.
    pub tries: u32,
}

/// How an eviction left a VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// Deallocated (eviction policy Deallocate): its disks are kept; start it.
    Deallocated,
    /// Deleted (eviction policy Delete): create it again.
    Deleted,
    /// A low-priority AmlCompute node Azure took back: the service allocates a new node (a new
    /// node id, host key and address) in its place; wait for it and run its steps.
    Preempted,
}

/// A node an eviction took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evicted {
    /// The node (`cluster.train[2]`).
    pub node: String,
    /// Its VM resource.
    pub vm: Address,
    /// What the eviction did to it.
    pub gone: Gone,
}

/// How long past a notice's `NotBefore` the recovery waits for Azure to carry the eviction out.
const EVICTION_GRACE: Duration = Duration::from_mins(3);

/// How often the VMs are read while waiting for an eviction.
const EVICTION_POLL: Duration = Duration::from_secs(1);

/// How long the recovery waits for Azure Machine Learning to give a low-priority cluster its
/// nodes back. The service allocates a new node in a few minutes when it has capacity, and keeps
/// trying when it has not; past this the recovery gives up with advice.
const REPLACEMENT_WAIT: Duration = Duration::from_mins(30);

/// How often `listNodes` is read while waiting for the new nodes.
const REPLACEMENT_POLL: Duration = Duration::from_secs(2);

/// How long the recovery waits for another dsinfra process (an apply, a park) to release the
/// state before it gives up: bringing nodes back writes the state, so it takes the lock.
const LOCK_WAIT: Duration = Duration::from_mins(10);

/// How often the lock is tried while another process holds it.
const LOCK_POLL: Duration = Duration::from_secs(5);

/// Opens the applied state with its lock, waiting while another dsinfra process holds it (at
/// most [`LOCK_WAIT`], saying so once) instead of failing the recovery at once: an eviction in
/// the middle of a colleague's apply should cost minutes, not the run.
///
/// # Errors
///
/// The state is still locked after the wait, it could not be read, or Ctrl-C.
pub async fn open_state(
    manifest: &std::path::Path,
    backend: Option<&BackendConfig>,
    events: &Events,
    cancel: &Cancel,
) -> Result<(Box<dyn crate::state::Backend + Send>, crate::state::State), Error> {
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    let mut said = false;
    loop {
        match super::super::open_applied(manifest, backend).await {
            Err(Error::State(
                locked @ (StateError::Locked { .. } | StateError::RemoteLocked { .. }),
            )) if tokio::time::Instant::now() < deadline => {
                if !said {
                    said = true;
                    events.event(OpEvent::Note(&format!(
                        "{locked}: the recovery waits for it (at most {} minutes)",
                        LOCK_WAIT.as_secs() / 60
                    )));
                }
                cancel.interruptible(tokio::time::sleep(LOCK_POLL)).await?;
            }
            opened => return opened,
        }
    }
}

fn is_spot(at: &Where<'_>, vm: &Address) -> bool {
    at.desired
        .resource(vm)
        .and_then(|r| r.attrs.get("priority"))
        .and_then(Value::as_str)
        == Some("Spot")
}

/// The low-priority AmlCompute of `block`, when it is an `aml_cluster` of low-priority nodes.
fn low_priority_compute(at: &Where<'_>, block: &[NodeReach]) -> Option<Address> {
    let compute = block.first()?.aml_compute()?;
    (at.desired
        .resource(&compute)
        .and_then(|r| r.attrs.get("priority"))
        .and_then(Value::as_str)
        == Some("LowPriority"))
    .then_some(compute)
}

/// The nodes of `compute` as `listNodes` gives them now (none when ARM no longer has it).
async fn listed_nodes(
    at: &Where<'_>,
    compute: &Address,
    cancel: &Cancel,
) -> Result<Vec<AmlNode>, Error> {
    let Some(id) = at.state.resource(compute).and_then(|r| r.id.as_deref()) else {
        return Ok(Vec::new());
    };
    let listed = cancel
        .interruptible(aml::list_nodes(&at.arm.client, &ResourceId::from_raw(id)))
        .await?
        .map_err(|e| Error::Failed(format!("listing the nodes of {compute}: {e}")))?;
    Ok(listed.unwrap_or_default())
}

/// The nodes of a low-priority `aml_cluster` block that the attempt ran on and that `listNodes`
/// no longer shows usable (preempted, leaving, or gone).
async fn preempted(
    at: &Where<'_>,
    block: &[NodeReach],
    cancel: &Cancel,
) -> Result<Vec<Evicted>, Error> {
    let Some(compute) = low_priority_compute(at, block) else {
        return Ok(Vec::new());
    };
    let listed = listed_nodes(at, &compute, cancel).await?;
    Ok(block
        .iter()
        .filter(|n| !matches!(n.route, Route::Unreachable { .. }))
        .filter(|n| !listed.iter().any(|l| l.node_id == n.name && l.is_usable()))
        .map(|n| Evicted {
            node: n.node().to_string(),
            vm: n.vm.clone(),
            gone: Gone::Preempted,
        })
        .collect())
}

/// The spot VMs of `block` an eviction took: each read from ARM (404: deleted; deallocated:
/// deallocated). A node whose watcher reported a notice is waited for until its `NotBefore`
/// has passed and Azure has acted, at most [`EVICTION_GRACE`] longer. For a low-priority
/// `aml_cluster`, the nodes Azure Machine Learning took back ([`Gone::Preempted`]).
///
/// # Errors
///
/// ARM could not be read, or Ctrl-C.
pub async fn evicted(
    at: &Where<'_>,
    block: &[NodeReach],
    notices: &[Notice],
    cancel: &Cancel,
) -> Result<Vec<Evicted>, Error> {
    let mut found = preempted(at, block, cancel).await?;
    for node in block.iter().filter(|n| is_spot(at, &n.vm)) {
        let Some(id) = at.state.resource(&node.vm).and_then(|r| r.id.clone()) else {
            continue;
        };
        let id = ResourceId::from_raw(id);
        let deadline = notices
            .iter()
            .filter(|n| n.node == node.node().to_string())
            .filter_map(preempt::not_before)
            .max()
            .map(|t| {
                let left = (t - chrono::Utc::now()).to_std().unwrap_or_default();
                tokio::time::Instant::now() + left + EVICTION_GRACE
            });
        loop {
            let view = cancel
                .interruptible(at.arm.client.get_instance_view(&id))
                .await?
                .map_err(|e| Error::Failed(format!("reading {}: {e}", node.vm)))?;
            let gone = match view {
                None => Some(Gone::Deleted),
                Some(v) => matches!(
                    v.power_state(),
                    Some(PowerState::Deallocated | PowerState::Deallocating)
                )
                .then_some(Gone::Deallocated),
            };
            if let Some(gone) = gone {
                found.push(Evicted {
                    node: node.node().to_string(),
                    vm: node.vm.clone(),
                    gone,
                });
                break;
            }
            match deadline {
                Some(d) if tokio::time::Instant::now() < d => {
                    cancel
                        .interruptible(tokio::time::sleep(EVICTION_POLL))
                        .await?;
                }
                _ => break,
            }
        }
    }
    Ok(found)
}

/// Brings the evicted nodes back: starts the deallocated VMs (the unpark operation: quota
/// check, start, per-boot steps of the restarted nodes) and creates the deleted ones again
/// (apply targeted at them: the new VM gets every step), forcing the block-wide steps an
/// eviction breaks. A capacity refusal is tried again after a growing wait, up to
/// [`Recover::tries`] times. Returns what was done, one line each.
///
/// # Errors
///
/// A failure that is not a capacity refusal, capacity refused every time (with what to try
/// instead), the state could not be opened, or Ctrl-C.
pub async fn bring_back(
    at: &Where<'_>,
    recover: &Recover<'_>,
    gone: &[Evicted],
    events: &Events,
    cancel: &Cancel,
) -> Result<Vec<String>, Error> {
    let mut steps = recover.steps.clone();
    for block in gone
        .iter()
        .map(|e| e.vm.block_address())
        .collect::<std::collections::BTreeSet<_>>()
    {
        steps
            .rerun
            .extend(preempt::rebuilt_steps(&at.desired.steps, &block));
    }
    let mut done = Vec::new();
    if !steps.rerun.is_empty() {
        done.push(format!(
            "forced across the block: {}",
            steps.rerun.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut tries = 0;
    loop {
        tries += 1;
        let failures = once(at, recover, gone, &steps, events, cancel).await?;
        if failures.is_empty() {
            for e in gone {
                done.push(match e.gone {
                    Gone::Deallocated => format!("{}: started again", e.node),
                    Gone::Deleted => format!("{}: created again", e.node),
                    Gone::Preempted => format!(
                        "{}: preempted; Azure Machine Learning allocated a new node in its place",
                        e.node
                    ),
                });
            }
            if tries > 1 {
                done.push(format!("after {} capacity refusal(s)", tries - 1));
            }
            return Ok(done);
        }
        let capacity = failures
            .iter()
            .all(|f| f.code.as_deref().is_some_and(preempt::is_capacity));
        let first = &failures[0];
        if !capacity {
            return Err(Error::Failed(format!(
                "the evicted nodes could not be brought back: {first}"
            )));
        }
        if tries >= recover.tries {
            return Err(Error::Failed(capacity_advice(at, gone, first, tries)));
        }
        let wait = preempt::backoff(recover.backoff, tries);
        events.event(OpEvent::Note(&format!(
            "Azure has no capacity for the evicted nodes now ({}): trying again in {}s \
             (try {} of {})",
            first.code.as_deref().unwrap_or("capacity"),
            wait.as_secs(),
            tries + 1,
            recover.tries
        )));
        cancel.interruptible(tokio::time::sleep(wait)).await?;
    }
}

/// One try: the unpark of the deallocated nodes and the apply of the deleted ones; the
/// resources that failed.
async fn once(
    at: &Where<'_>,
    recover: &Recover<'_>,
    gone: &[Evicted],
    steps: &StepsOptions,
    events: &Events,
    cancel: &Cancel,
) -> Result<Vec<ResourceError>, Error> {
    let mut failures = Vec::new();
    let stopped: Vec<String> = gone
        .iter()
        .filter(|e| e.gone == Gone::Deallocated)
        .map(|e| e.node.clone())
        .collect();
    if !stopped.is_empty() {
        let (backend, state) = open_state(at.manifest, recover.backend, events, cancel).await?;
        let request = ParkRequest {
            change: PowerChange::Unpark,
            desired: at.desired,
            sources: recover.sources,
            manifest: at.manifest,
            backend,
            state,
            arm: at.arm,
            only: &stopped,
            steps: steps.clone(),
        };
        let outcome = super::super::park(request, events, &AutoApprove, cancel).await?;
        failures.extend(outcome.failures);
        if failures.is_empty()
            && let Some(problem) = outcome.problem
        {
            return Err(problem);
        }
    }
    // The apply's targets: the deleted VMs, and the computes of preempted AML nodes.
    let mut targets: Vec<Address> = gone
        .iter()
        .filter(|e| e.gone == Gone::Deleted)
        .map(|e| e.vm.clone())
        .collect();
    // A preempted AML node comes back by itself: once the cluster has its nodes again, an apply
    // targeted at its compute changes nothing in ARM and runs the block's steps where needed.
    let computes: std::collections::BTreeSet<Address> = gone
        .iter()
        .filter(|e| e.gone == Gone::Preempted)
        .map(|e| aml::compute_of(&e.vm.block_address()))
        .collect();
    for compute in computes {
        replaced(at, &compute, events, cancel).await?;
        targets.push(compute);
    }
    if !targets.is_empty() {
        // The apply takes the lock itself and fails at once when it is held: wait for it here.
        let (backend, _) = open_state(at.manifest, recover.backend, events, cancel).await?;
        super::super::walk::release(backend, events).await;
        let request = ApplyRequest {
            manifest: Manifest {
                path: at.manifest,
                desired: at.desired,
                sources: recover.sources,
                backend: recover.backend,
            },
            arm: at.arm,
            mode: Mode::Normal,
            targets,
            steps: steps.clone(),
        };
        match super::super::apply(request, events, &AutoApprove, cancel).await? {
            ApplyOutcome::Walked(walked) if walked.failed > 0 => {
                if walked.report.failed.is_empty() {
                    return Err(Error::Failed(
                        "the evicted nodes were created again, but their steps failed (the \
                         apply's summary above says which)"
                            .to_owned(),
                    ));
                }
                failures.extend(walked.report.failed);
            }
            ApplyOutcome::Declined | ApplyOutcome::Abandoned => {
                return Err(Error::Failed(
                    "the apply that creates the evicted nodes again did not finish".to_owned(),
                ));
            }
            ApplyOutcome::Walked(_) | ApplyOutcome::NothingToDo => {}
        }
    }
    Ok(failures)
}

/// Waits until the low-priority AmlCompute `compute` lists its `count` nodes usable again
/// (Azure Machine Learning allocates new ones in place of the preempted), at most
/// [`REPLACEMENT_WAIT`].
async fn replaced(
    at: &Where<'_>,
    compute: &Address,
    events: &Events,
    cancel: &Cancel,
) -> Result<(), Error> {
    let count = at
        .desired
        .resource(compute)
        .and_then(|r| r.attrs.get("count"))
        .and_then(Value::as_u64)
        .and_then(|c| usize::try_from(c).ok())
        .unwrap_or(1);
    events.event(OpEvent::Note(&format!(
        "waiting for Azure Machine Learning to allocate new nodes in place of the preempted ones \
         ({compute}: {count} node(s) usable)"
    )));
    let deadline = tokio::time::Instant::now() + REPLACEMENT_WAIT;
    loop {
        let listed = listed_nodes(at, compute, cancel).await?;
        let usable = listed.iter().filter(|n| n.is_usable()).count();
        if usable >= count {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Failed(format!(
                "{compute} had {usable} of its {count} nodes usable {} minutes after the \
                 preemption: Azure Machine Learning has no low-priority capacity for it now; try \
                 again later with `dsinfra run --recover`, or use `priority = \"dedicated\"` \
                 or another size",
                REPLACEMENT_WAIT.as_secs() / 60
            )));
        }
        cancel
            .interruptible(tokio::time::sleep(REPLACEMENT_POLL))
            .await?;
    }
}

/// What to do when Azure keeps refusing capacity: the size and region, and the levers.
fn capacity_advice(at: &Where<'_>, gone: &[Evicted], first: &ResourceError, tries: u32) -> String {
    let size = gone
        .first()
        .and_then(|e| at.desired.resource(&e.vm))
        .and_then(|r| r.attrs.get("size"))
        .and_then(Value::as_str)
        .unwrap_or("this size");
    format!(
        "Azure had no spot capacity for {size} in {} after {tries} tries ({first}): try again \
         later with `dsinfra run --recover`, list other sizes with `sizes = [...]`, move the \
         experiment to another region (`azure {{ location }}`), or use `priority = \"regular\"`",
        at.desired.azure.location
    )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::engine::op::Listener;
    use crate::state::State;

    #[derive(Default)]
    struct Notes(Mutex<Vec<String>>);

    impl Listener for Notes {
        fn event(&self, event: OpEvent<'_>) {
            if let OpEvent::Note(text) = event {
                self.0.lock().expect("not poisoned").push(text.to_owned());
            }
        }
    }

    /// A manifest whose applied state exists, and its lock held by "another process".
    async fn held(
        dir: &std::path::Path,
    ) -> (std::path::PathBuf, Box<dyn crate::state::Backend + Send>) {
        let manifest = dir.join("exp.hcl");
        let mut backend = crate::state::open_backend(&manifest, None, "dsinfra apply exp.hcl")
            .await
            .expect("the lock");
        backend.save(&mut State::new("exp")).await.expect("saved");
        (manifest, backend)
    }

    #[tokio::test(start_paused = true)]
    async fn the_recovery_waits_for_the_state_lock_and_says_so_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (manifest, backend) = held(dir.path()).await;
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(12)).await;
            backend.unlock().await.expect("released");
        });
        let notes = Arc::new(Notes::default());
        let events: Events = notes.clone();
        let started = tokio::time::Instant::now();
        let (_backend, state) = open_state(&manifest, None, &events, &Cancel::never())
            .await
            .expect("opened once released");
        release.await.expect("the holder ends");
        assert_eq!(state.experiment, "exp");
        assert!(started.elapsed() >= Duration::from_secs(12));
        let notes = notes.0.lock().expect("not poisoned").clone();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("running `dsinfra apply exp.hcl`")
                && notes[0].ends_with("the recovery waits for it (at most 10 minutes)"),
            "{notes:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_held_past_the_wait_ends_the_recovery_with_the_lock_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (manifest, _backend) = held(dir.path()).await;
        let events: Events = Arc::new(Notes::default());
        let err = open_state(&manifest, None, &events, &Cancel::never())
            .await
            .err()
            .expect("still locked");
        assert!(
            matches!(err, Error::State(StateError::Locked { .. })),
            "{err}"
        );
    }
}
