//! What the engine reports while it works (terraform's hooks): a resource started, its
//! long-running operation moved, it finished, failed, or was skipped. Every operation reports
//! through this one stream (apply and destroy, park and unpark); the engine never writes to the
//! terminal, and `render::progress` turns these events into lines.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::addr::Address;
use crate::azure::{LroProgress, ProgressCallback, ProgressState};

/// What the engine does to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// It is created (or adopted, if an interrupted run already created it).
    Create,
    /// It is changed in place.
    Update,
    /// It is deleted.
    Delete,
    /// A VM is deallocated (`park`).
    Deallocate,
    /// A VM is started (`unpark`).
    Start,
}

impl Operation {
    /// The verb in progress lines ("creating").
    pub fn progressive(self) -> &'static str {
        match self {
            Self::Create => "creating",
            Self::Update => "updating",
            Self::Delete => "deleting",
            Self::Deallocate => "deallocating",
            Self::Start => "starting",
        }
    }

    /// The participle in completion lines ("created").
    pub fn past(self) -> &'static str {
        match self {
            Self::Create => "created",
            Self::Update => "updated",
            Self::Delete => "deleted",
            // The power state reached, as `status` names it.
            Self::Deallocate => "deallocated (parked)",
            Self::Start => "running",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Deallocate => "deallocate",
            Self::Start => "start",
        })
    }
}

/// One thing that happened during an apply, destroy, park or unpark.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Work on a resource began (its ARM call is about to be sent).
    Started {
        /// The resource.
        address: Address,
        /// What is done to it.
        operation: Operation,
    },
    /// Its long-running operation reported a state (`InProgress`, `Creating`, a percentage).
    Progress {
        /// The resource.
        address: Address,
        /// What is done to it.
        operation: Operation,
        /// ARM's status word, with the percentage when given.
        state: String,
        /// Time since the resource started.
        elapsed: Duration,
    },
    /// It finished.
    Done {
        /// The resource.
        address: Address,
        /// What was done.
        operation: Operation,
        /// How long it took.
        elapsed: Duration,
    },
    /// It failed; the full error and advice come in the run's summary.
    Failed {
        /// The resource.
        address: Address,
        /// What was attempted.
        operation: Operation,
        /// How long until it failed.
        elapsed: Duration,
        /// ARM's code and message, verbatim.
        message: String,
    },
    /// It was not started because something it needs failed.
    Skipped {
        /// The resource.
        address: Address,
        /// What would have been done.
        operation: Operation,
        /// The failed resource that caused the skip.
        because: Address,
    },
    /// Ctrl-C: no new work starts; what runs finishes.
    Stopping {
        /// How many resources are still running.
        in_flight: usize,
    },
}

/// Where events go. Shared by every task of a run; must be cheap and must not block.
pub type EventSink = Arc<dyn Fn(&Event) + Send + Sync>;

/// An event sink that drops everything (library callers that want no progress).
pub fn discard() -> EventSink {
    Arc::new(|_| {})
}

/// Turns the ARM client's long-running-operation reports (keyed by request path) into
/// [`Event::Progress`] for the resource being worked on at that path.
///
/// The client's progress callback is fixed when the client is built, before the engine knows
/// what it will work on, so the bridge is built first, its [`LroBridge::callback`] goes into the
/// client builder, and the engine registers each resource's path while it works on it.
pub struct LroBridge {
    sink: Mutex<Option<EventSink>>,
    active: Mutex<HashMap<String, (Address, Operation, std::time::Instant)>>,
}

impl fmt::Debug for LroBridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LroBridge").finish_non_exhaustive()
    }
}

impl LroBridge {
    /// A bridge with no sink yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            sink: Mutex::new(None),
            active: Mutex::new(HashMap::new()),
        })
    }

    /// The callback to give `ArmClientBuilder::on_progress`.
    pub fn callback(self: &Arc<Self>) -> ProgressCallback {
        let bridge = Arc::clone(self);
        Arc::new(move |progress: &LroProgress| bridge.forward(progress))
    }

    /// Where progress events go from now on.
    pub fn connect(&self, sink: EventSink) {
        *lock(&self.sink) = Some(sink);
    }

    /// The engine works on `address` at ARM path `path` from now on.
    pub fn register(&self, path: &str, address: &Address, operation: Operation) {
        lock(&self.active).insert(
            path.to_ascii_lowercase(),
            (address.clone(), operation, std::time::Instant::now()),
        );
    }

    /// The engine is done with `path`.
    pub fn unregister(&self, path: &str) {
        lock(&self.active).remove(&path.to_ascii_lowercase());
    }

    fn forward(&self, progress: &LroProgress) {
        let state = match &progress.state {
            ProgressState::Started => "accepted".to_owned(),
            ProgressState::Running {
                status,
                percent_complete: Some(p),
            } => format!("{status} {p:.0}%"),
            ProgressState::Running { status, .. } => status.clone(),
            // Completion and failure are reported by the engine itself, with the outcome.
            ProgressState::Succeeded | ProgressState::Failed => return,
        };
        let found = lock(&self.active)
            .get(&progress.resource.to_ascii_lowercase())
            .cloned();
        let sink = lock(&self.sink).clone();
        if let (Some((address, operation, started)), Some(sink)) = (found, sink) {
            sink(&Event::Progress {
                address,
                operation,
                state,
                elapsed: started.elapsed(),
            });
        }
    }
}

/// A poisoned lock only means another task panicked while holding it; the maps stay usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::Method;

    #[test]
    fn the_bridge_forwards_running_states_of_registered_paths_only() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let bridge = LroBridge::new();
        let sink_seen = Arc::clone(&seen);
        bridge.connect(Arc::new(move |e: &Event| {
            sink_seen.lock().expect("not poisoned").push(e.clone());
        }));
        let callback = bridge.callback();
        let address: Address = "vm.gpu.vm".parse().expect("valid");
        bridge.register("/subscriptions/s/VM1", &address, Operation::Create);
        let report = |resource: &str, state: ProgressState| LroProgress {
            method: Method::Put,
            resource: resource.to_owned(),
            state,
            elapsed: Duration::from_secs(1),
            polls: 1,
        };
        callback(&report(
            "/subscriptions/s/vm1",
            ProgressState::Running {
                status: "InProgress".into(),
                percent_complete: Some(40.0),
            },
        ));
        callback(&report("/subscriptions/s/other", ProgressState::Started));
        callback(&report("/subscriptions/s/vm1", ProgressState::Succeeded));
        bridge.unregister("/subscriptions/s/vm1");
        callback(&report("/subscriptions/s/vm1", ProgressState::Started));
        let seen = seen.lock().expect("not poisoned");
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(matches!(
            &seen[0],
            Event::Progress { address: a, state, .. } if a == &address && state == "InProgress 40%"
        ));
    }
}
