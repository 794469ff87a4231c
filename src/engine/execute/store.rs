//! The run's state and its backend, shared by every task of the walk: changes staged in memory,
//! saved by group commit, handed back (lock and all) when an operation gives up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::addr::Address;
use crate::state::{Backend, ResourceState, State, StateError};

/// The state of a run and the backend it is saved to, shared by every task.
///
/// A change is made in memory ([`StateStore::stage`]) and made durable by a save
/// ([`StateStore::persist`]; [`StateStore::update`] does both). What must be durable is what the
/// engine is about to act on: an intent is persisted before its PUT is sent (write-ahead). What
/// only records what happened (a `created` record) is staged, and the next save of anyone carries
/// it: usually the intent save of a dependent that starts right away, so a dependency link costs
/// one save instead of two, and the run's end flushes the rest ([`StateStore::flush`]).
///
/// Saves are *group commits*: a local save costs two fsyncs, so while one save runs, the changes
/// made meanwhile queue up and the next save writes all of them at once; a caller whose change
/// was already written by someone else's save returns without saving again. With 64 NICs
/// starting together this turns 64 serial intent saves into one or two, and a save never
/// interleaves with another.
///
/// Nothing here blocks the runtime. Waiting for a save in progress is an async lock, so the
/// waiting tasks give their thread to others (operations being polled, responses arriving);
/// the save itself is the backend's, async (a blob write), or file I/O the local backend runs
/// in `block_in_place`, which moves the thread's other tasks elsewhere first. On 2 cores a
/// blocking save plus one task blocked on the lock used to stop every tokio worker: 64 intent
/// saves in a row then held up every operation.
pub struct StateStore {
    /// The state and how many changes were made to it. Held only to change or copy it.
    state: Mutex<(State, u64)>,
    /// The backend (with its lock) until [`StateStore::close`] hands it back, and how many
    /// changes its last successful save contained.
    backend: tokio::sync::Mutex<Slot>,
    /// The same count as the backend's, readable without waiting for a save in progress.
    saved: AtomicU64,
}

/// Where the backend is kept: `None` once the store was closed.
struct Slot {
    backend: Option<Box<dyn Backend + Send>>,
    saved: u64,
}

/// A change made in memory and not known to be saved: [`StateStore::persist`] it, or let a later
/// save carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[must_use = "a staged change is not durable until persisted or flushed"]
pub struct Staged(u64);

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateStore").finish_non_exhaustive()
    }
}

/// A panic while holding the state lock happens before or after a change or a copy, never
/// halfway through the backend's atomic rename, so the data behind a poisoned lock is still
/// consistent.
pub(super) fn relock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl StateStore {
    /// Guard `state`, saved through `backend`.
    pub fn new(backend: Box<dyn Backend + Send>, state: State) -> Self {
        Self {
            state: Mutex::new((state, 0)),
            backend: tokio::sync::Mutex::new(Slot {
                backend: Some(backend),
                saved: 0,
            }),
            saved: AtomicU64::new(0),
        }
    }

    /// Change the state and return once the change is saved.
    pub async fn update(&self, change: impl FnOnce(&mut State)) -> Result<(), StateError> {
        let staged = self.stage(change);
        self.persist(staged).await
    }

    /// Change the state in memory only. The change is durable once a save that started after it
    /// succeeds: [`StateStore::persist`], anyone's [`StateStore::update`], or
    /// [`StateStore::flush`].
    pub fn stage(&self, change: impl FnOnce(&mut State)) -> Staged {
        let mut guard = relock(&self.state);
        change(&mut guard.0);
        guard.1 += 1;
        Staged(guard.1)
    }

    /// Return once `staged` (and everything staged before it) is saved.
    pub async fn persist(&self, staged: Staged) -> Result<(), StateError> {
        // Fair (first come, first served): every change made while a save runs is in the copy
        // the next save takes, so the queue behind it mostly finds its change already saved.
        let mut slot = self.backend.lock().await;
        self.save_if_behind(&mut slot, staged).await
    }

    /// Save every change staged so far.
    pub async fn flush(&self) -> Result<(), StateError> {
        self.persist(self.latest()).await
    }

    /// The newest change staged so far.
    fn latest(&self) -> Staged {
        Staged(relock(&self.state).1)
    }

    /// Whether a save has written `staged`.
    pub fn is_saved(&self, staged: Staged) -> bool {
        self.saved.load(Ordering::SeqCst) >= staged.0
    }

    /// Saves a copy of the live state unless the backend has already saved `wanted`.
    async fn save_if_behind(&self, slot: &mut Slot, wanted: Staged) -> Result<(), StateError> {
        if slot.saved >= wanted.0 {
            return Ok(());
        }
        let Some(saver) = slot.backend.as_mut() else {
            return Err(StateError::Closed);
        };
        let (mut copy, version) = {
            let guard = relock(&self.state);
            (guard.0.clone(), guard.1)
        };
        saver.save(&mut copy).await?;
        slot.saved = version;
        self.saved.store(version, Ordering::SeqCst);
        // The live state follows the serial the backend gave the copy it saved.
        let mut guard = relock(&self.state);
        guard.0.serial = copy.serial;
        guard.0.dsinfra_version.clone_from(&copy.dsinfra_version);
        Ok(())
    }

    /// A copy of the state now.
    pub fn snapshot(&self) -> State {
        relock(&self.state).0.clone()
    }

    /// A copy of one resource's record now. Cheaper than [`StateStore::snapshot`], which every
    /// starting node used to take: 137 copies of a 137-resource state for a 64-node cluster,
    /// each holding the lock that every save needs.
    pub fn resource(&self, address: &Address) -> Option<ResourceState> {
        relock(&self.state).0.resource(address).cloned()
    }

    /// The state's lineage (what SAS signatures are bound to).
    pub fn lineage(&self) -> String {
        relock(&self.state).0.lineage.clone()
    }

    /// Gives the state up: waits for a save in progress, saves what is only staged, and hands
    /// the backend (and with it the state's lock) back to the caller, who releases it. The
    /// second Ctrl-C closes the store this way, so the lock is free when the operation returns,
    /// not when the last task of the abandoned walk happens to drop its share of the store.
    ///
    /// Every save asked for afterwards fails with [`StateError::Closed`] and writes nothing: the
    /// walk's tasks still running are detached from the state. What they started has an intent
    /// in the state already (intents are saved before their PUT), so the next apply adopts it.
    ///
    /// The backend is `None` when the store was closed before.
    pub async fn close(&self) -> (Option<Box<dyn Backend + Send>>, Result<(), StateError>) {
        let mut slot = self.backend.lock().await;
        if slot.backend.is_none() {
            return (None, Ok(()));
        }
        let saved = self.save_if_behind(&mut slot, self.latest()).await;
        (slot.backend.take(), saved)
    }

    /// The backend and the final state.
    ///
    /// # Panics
    ///
    /// After [`StateStore::close`]: the caller that closed the store has the backend (a bug).
    pub fn into_parts(self) -> (Box<dyn Backend + Send>, State) {
        let backend = self
            .backend
            .into_inner()
            .backend
            .expect("into_parts is never called on a closed store");
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
        (backend, state)
    }
}
