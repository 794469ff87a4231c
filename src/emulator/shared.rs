//! The state every request shares (the cloud, faults, throttle, tokens seen, violations
//! recorded) and the clock operations are timed by. A leaf: it imports no handler.

use std::collections::{BTreeMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, Utc};

use super::config::{EmulatorConfig, RecordedViolation};
use super::error::{ArmError, EmulatorError};
use super::faults::FaultTable;
use super::http::KubeApiEndpoint;
use super::ops::Completions;
use super::store::{Cloud, Persist};
use super::throttle::Throttle;

/// A clock that follows tokio's time (so tests may pause it) but reads as UTC, so operation
/// deadlines survive a restart in `state.json`.
pub(crate) struct Clock {
    instant: tokio::time::Instant,
    utc: DateTime<Utc>,
}

impl Clock {
    pub fn new() -> Self {
        Self {
            instant: tokio::time::Instant::now(),
            utc: Utc::now(),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        let elapsed = self.instant.elapsed();
        self.utc + chrono::Duration::from_std(elapsed).unwrap_or_else(|_| chrono::Duration::zero())
    }
}

/// State shared by every request.
pub(crate) struct Shared {
    pub config: EmulatorConfig,
    pub endpoint: String,
    pub kube_api: KubeApiEndpoint,
    pub clock: Clock,
    pub cloud: Mutex<Cloud>,
    pub faults: Mutex<FaultTable>,
    pub throttle: Mutex<Throttle>,
    /// What handlers do when their operations complete (see `ops.rs`).
    pub completions: Completions,
    /// Hashes of bearer tokens seen, and of those declared expired. Hashes, not tokens, so no
    /// secret is kept.
    pub tokens_seen: Mutex<HashSet<u64>>,
    pub tokens_expired: Mutex<HashSet<u64>>,
    /// What the configured validators reported, in arrival order.
    pub request_violations: Mutex<Vec<RecordedViolation>>,
    pub response_violations: Mutex<Vec<RecordedViolation>>,
    /// Whether empty buckets answer 429: `config.throttle` at start, switched by the admin API
    /// (`PUT /_emulator/throttle`) so that a benchmark can build a large experiment unthrottled
    /// and then measure its reads against ARM's budget.
    pub throttling: AtomicBool,
    /// The ARM requests answered, counted for `GET /_emulator/requests`.
    pub requests: Mutex<RequestTally>,
}

/// How many ARM requests the emulator answered, by method and by status: what a benchmark or a
/// test in another process counts (the in-process `request_validator` sees each request too).
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct RequestTally {
    pub total: u64,
    #[serde(rename = "byMethod")]
    pub by_method: BTreeMap<String, u64>,
    #[serde(rename = "byStatus")]
    pub by_status: BTreeMap<u16, u64>,
}

impl RequestTally {
    pub fn count(&mut self, method: &str, status: u16) {
        self.total += 1;
        *self.by_method.entry(method.to_owned()).or_default() += 1;
        *self.by_status.entry(status).or_default() += 1;
    }
}

/// Locks a mutex, recovering the data if a panicking request poisoned it: the cloud stays
/// usable for the remaining requests of a test.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// Whether an empty bucket answers 429 now.
    pub fn throttling(&self) -> bool {
        self.throttling.load(Ordering::Relaxed)
    }

    /// Switches throttling on or off; every bucket starts full again, as after a quiet spell.
    pub fn set_throttling(&self, on: bool) {
        *lock(&self.throttle) = Throttle::default();
        self.throttling.store(on, Ordering::Relaxed);
    }

    pub fn state_dir(&self) -> Option<&PathBuf> {
        self.config.state_dir.as_ref()
    }

    /// Saves the cloud now, under its lock, if it has a directory; a failure is logged and
    /// reported to the caller. For the rare changes outside ARM requests (test hooks); requests
    /// use [`Shared::persist`], which does not hold the lock while writing.
    pub fn save(&self, cloud: &mut Cloud) -> Result<(), ArmError> {
        let Some(dir) = self.state_dir() else {
            return Ok(());
        };
        cloud.save(dir).map_err(|err| save_failed(&err))
    }

    /// Returns once change `version` (numbered by [`Cloud::mark_changed`]) is on disk, writing
    /// the cloud if no one else's write has covered it yet (group commit; see store.rs). Without
    /// a directory there is nothing to write.
    pub async fn persist(&self, persist: &Persist, version: u64) -> Result<(), ArmError> {
        let Some(dir) = self.state_dir() else {
            return Ok(());
        };
        let _turn = persist.turn.lock().await;
        if persist.is_written(version) {
            return Ok(());
        }
        blocking(|| {
            let (bytes, newest) = lock(&self.cloud).file_bytes(dir)?;
            persist.write(dir, newest, &bytes)
        })
        .map_err(|err| save_failed(&err))
    }

    pub fn expire_tokens(&self) {
        let seen = lock(&self.tokens_seen).clone();
        lock(&self.tokens_expired).extend(seen);
    }
}

fn save_failed(err: &EmulatorError) -> ArmError {
    tracing::error!(%err, "emulator could not save its state");
    ArmError::new(
        500,
        "InternalServerError",
        "The emulator could not save its state.",
    )
}

/// Runs file I/O without stalling the runtime's other tasks: in `block_in_place` on a
/// multi-thread runtime, directly on a current-thread one (tests), which cannot hand its tasks
/// to another thread.
fn blocking<T>(io: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(io)
        }
        _ => io(),
    }
}

/// A bearer token's hash: what is kept of a token instead of the token.
pub(crate) fn token_hash(token: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    token.hash(&mut hasher);
    hasher.finish()
}
