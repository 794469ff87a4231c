//! The intents of a run's new resources, written before the walk starts.
//!
//! A create must be in the state (an *intent*, `status: creating`) before its PUT is sent, or a
//! crash right after the PUT would leave a resource nobody knows about. Written when each node
//! starts, that is a save on every dependency link of the critical path, and when 64 NICs finish
//! together, 64 VM intents queued behind each other's saves: 5-15 ms per link of a 64-node
//! cluster on 2 cores (docs/engine.md, "Makespan"). An intent only says "may exist", so nothing
//! is lost by writing it earlier: the plan's new resources all get theirs here, in one save, and
//! their nodes send their PUT without waiting for the disk.
//!
//! A new VM's intent must also pin its host key before its PUT (`host_key.rs`: the key pinned in
//! the state is always the one the VM was, or will be, created with). Generating 64 key pairs
//! before the first save would delay the whole walk, so the first save has the VMs' intents
//! without a key, and a task started alongside the walk generates the pairs and saves them, long
//! before any VM can start (a VM waits for its NIC, which waits for its network). A VM node
//! waits for that save; its private half stays in memory until the node sends it in customData.
//! Killed in between, the state has a VM intent without a key, which the next apply handles
//! like any earlier record: it asks ARM whether the VM exists.
//!
//! "New" means no record at all. A create that follows an earlier record (an interrupted create,
//! a resource deleted outside dsinfra, the second half of a replacement) writes its intent when
//! its node starts, as before: it has to ask ARM or wait for its delete first.
//!
//! An intent whose node never starts (the run was cancelled, or something it needs failed) is
//! withdrawn before the run's closing save, so the state names only what may exist. After a
//! crash the early intents stay, like any interrupted create: the next apply creates or adopts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::addr::Address;
use crate::model::{Desired, ResourceKind};
use crate::plan::{Action, Plan};
use crate::ssh::HostKeyPair;
use crate::state::ResourceStatus;

use super::{StateStore, record_of, relock};

/// What a new resource's node finds prepared for it. (No `Debug`: it holds private keys.)
pub(super) enum Prepared {
    /// Its intent is saved (with this host key pair pinned, for a VM).
    Saved(Option<HostKeyPair>),
    /// Its intent could not be saved (the backend's message): the node fails without sending.
    SaveFailed(String),
    /// Its VM's host key could not be generated (why): the node fails without sending.
    KeyFailed(String),
}

/// The early intents of a run, taken by their nodes as they start.
#[derive(Default)]
pub(super) struct Early {
    /// Prepared and not yet taken.
    ready: Arc<Mutex<BTreeMap<Address, Prepared>>>,
    /// The VMs whose host keys the key task is pinning.
    pending_keys: BTreeSet<Address>,
    /// Turns `true` when the key task has put its VMs in `ready`.
    keys_done: Option<watch::Receiver<bool>>,
    /// The key task, awaited before the intents no node took are withdrawn.
    key_task: Mutex<Option<KeyTask>>,
}

/// The key task's handle. A walk dropped before it awaited the task (the operation gave up)
/// aborts it: like the walk's other tasks, it must not outlive the operation that started it.
struct KeyTask(JoinHandle<()>);

impl Drop for KeyTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Early {
    /// Write the intents of every resource `plan` creates with no earlier record, in one save,
    /// and start the task that pins the new VMs' host keys.
    pub(super) async fn write(
        plan: &Plan,
        desired: &Desired,
        subscription: &str,
        store: &Arc<StateStore>,
    ) -> Self {
        let mut records = Vec::new();
        for change in &plan.changes {
            // A kind named at apply has no id before its request is built (execute.rs).
            if change.action != Action::Create
                || !change.kind.is_arm()
                || change.kind.named_at_apply()
            {
                continue;
            }
            let Some(resource) = desired.resource(&change.address) else {
                continue;
            };
            if store.resource(&change.address).is_some() {
                continue;
            }
            let id = resource.arm_id(subscription);
            records.push(record_of(
                resource,
                &id,
                None,
                None,
                ResourceStatus::Creating,
                BTreeMap::new(),
            ));
        }
        if records.is_empty() {
            return Self::default();
        }
        let (mut vms, mut others) = (Vec::new(), Vec::new());
        for record in &records {
            if record.kind == ResourceKind::VirtualMachine {
                vms.push(record.address.clone());
            } else {
                others.push(record.address.clone());
            }
        }
        // Moved, not copied: with 137 records, copies were a third of this save's time.
        let saved = store
            .update(|state| {
                for record in records {
                    state.upsert(record);
                }
            })
            .await;
        if let Err(err) = saved {
            // Nothing was sent, and the records were new: the state is as it was.
            let _undone = store.stage(|state| {
                for address in vms.iter().chain(&others) {
                    state.remove(address);
                }
            });
            let ready = vms
                .into_iter()
                .chain(others)
                .map(|address| (address, Prepared::SaveFailed(err.to_string())))
                .collect();
            return Self {
                ready: Arc::new(Mutex::new(ready)),
                ..Self::default()
            };
        }
        let ready: BTreeMap<Address, Prepared> = others
            .into_iter()
            .map(|address| (address, Prepared::Saved(None)))
            .collect();
        let mut early = Self {
            ready: Arc::new(Mutex::new(ready)),
            pending_keys: vms.iter().cloned().collect(),
            ..Self::default()
        };
        if !vms.is_empty() {
            let (done, keys_done) = watch::channel(false);
            let task = tokio::spawn(pin_keys(
                vms,
                Arc::clone(store),
                Arc::clone(&early.ready),
                done,
            ));
            early.keys_done = Some(keys_done);
            early.key_task = Mutex::new(Some(KeyTask(task)));
        }
        early
    }

    /// What was prepared for `address`, once: `None` when its node writes its own intent. A new
    /// VM waits here for its host key to be pinned.
    pub(super) async fn take(&self, address: &Address) -> Option<Prepared> {
        if self.pending_keys.contains(address)
            && let Some(done) = &self.keys_done
        {
            let mut done = done.clone();
            // An error means the task ended without saying so (it panicked): what it did not
            // prepare, the node prepares itself.
            let _ = done.wait_for(|done| *done).await;
        }
        relock(&self.ready).remove(address)
    }

    /// Wait for the key task, then remove the intents no node took (never started) from the
    /// state, in memory: the run's closing flush saves that.
    pub(super) async fn withdraw_untaken(&self, store: &StateStore) {
        let task = relock(&self.key_task).take();
        if let Some(mut task) = task {
            let _ = (&mut task.0).await;
        }
        let untaken: Vec<Address> = std::mem::take(&mut *relock(&self.ready))
            .into_keys()
            .collect();
        if untaken.is_empty() {
            return;
        }
        let _withdrawn = store.stage(|state| {
            for address in &untaken {
                if state
                    .resource(address)
                    .is_some_and(|r| r.status == ResourceStatus::Creating)
                {
                    state.remove(address);
                }
            }
        });
    }
}

/// The key task: a pair per new VM, their public halves pinned in the VMs' intents in one save,
/// then each VM's prepared outcome in `ready`.
async fn pin_keys(
    vms: Vec<Address>,
    store: Arc<StateStore>,
    ready: Arc<Mutex<BTreeMap<Address, Prepared>>>,
    done: watch::Sender<bool>,
) {
    let mut pinned = Vec::new();
    let mut outcomes = BTreeMap::new();
    for vm in vms {
        // A pair costs about 0.1 ms of CPU; between two, the walk's own tasks (the first
        // creates, on the critical path) go first.
        tokio::task::yield_now().await;
        match HostKeyPair::generate() {
            Ok(pair) => {
                pinned.push((vm.clone(), pair.public().to_openssh()));
                outcomes.insert(vm, Ok(pair));
            }
            Err(e) => {
                outcomes.insert(
                    vm,
                    Err(Prepared::KeyFailed(format!(
                        "cannot generate the VM's SSH host key: {e}"
                    ))),
                );
            }
        }
    }
    let saved = store
        .update(|state| {
            for (vm, key) in pinned {
                if let Some(record) = state.resource_mut(&vm) {
                    record.host_key = Some(key);
                }
            }
        })
        .await;
    let mut ready = relock(&ready);
    for (address, outcome) in outcomes {
        let prepared = match (outcome, &saved) {
            (Ok(pair), Ok(())) => Prepared::Saved(Some(pair)),
            (Ok(_), Err(err)) => Prepared::SaveFailed(err.to_string()),
            (Err(failed), _) => failed,
        };
        ready.insert(address, prepared);
    }
    drop(ready);
    let _ = done.send(true);
}
