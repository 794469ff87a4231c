//! The remote-state lock: a finite, renewed blob lease on the state blob.
//!
//! Terraform's azurerm backend takes an infinite lease, so a crashed run leaves a lock that only a
//! human can clear. dsinfra takes a finite lease (15 to 60 seconds) and renews it from a
//! background task while it runs: a holder that dies simply stops renewing, and the lease expires
//! on its own. Who holds the lock is written on the blob as metadata (user, host, pid, command,
//! since), so a second run is refused with that information.
//!
//! Writes are conditional twice over: under the held lease id, and on the ETag of the version the
//! caller read. A holder whose lease was broken (`force-unlock`) or expired and taken by another
//! run therefore cannot overwrite a newer state. Before each overwrite the previous version is
//! kept as a blob snapshot.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use super::Error;
use super::blob::{BlobStore, Conditions, PutOptions};
use crate::secret;

/// The lease dsinfra takes on the state blob unless told otherwise: renewed every third of it,
/// so two renewals may fail before the lease is lost.
pub const DEFAULT_LEASE: Duration = Duration::from_mins(1);

const META_USER: &str = "dsinfra_lock_user";
const META_HOST: &str = "dsinfra_lock_host";
const META_PID: &str = "dsinfra_lock_pid";
const META_COMMAND: &str = "dsinfra_lock_command";
const META_SINCE: &str = "dsinfra_lock_since";

/// Metadata values travel as HTTP headers: ASCII only, and kept short.
const MAX_META_VALUE: usize = 256;

/// Who holds a state lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// The user name of the holder's process.
    pub user: String,
    /// The holder's host name.
    pub host: String,
    /// The holder's process id.
    pub pid: u32,
    /// The dsinfra command the holder runs, e.g. `dsinfra apply`.
    pub command: String,
    /// When the lock was taken, RFC 3339 UTC.
    pub since: String,
}

impl LockInfo {
    /// This process, running `command`.
    pub fn current(command: &str) -> Self {
        let user = std::env::var("USER")
            .or_else(|_| std::env::var("USERNAME"))
            .unwrap_or_else(|_| "unknown".to_owned());
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".to_owned());
        Self {
            user,
            host,
            pid: std::process::id(),
            command: command.to_owned(),
            since: Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        }
    }

    /// The blob metadata that records this holder. Values are made header-safe and redacted (a
    /// command line can carry a secret).
    pub fn to_metadata(&self) -> BTreeMap<String, String> {
        [
            (META_USER, header_safe(&self.user)),
            (META_HOST, header_safe(&self.host)),
            (META_PID, self.pid.to_string()),
            (META_COMMAND, header_safe(&self.command)),
            (META_SINCE, header_safe(&self.since)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// The holder recorded in blob metadata, if there is one.
    pub fn from_metadata(metadata: &BTreeMap<String, String>) -> Option<Self> {
        let get = |key: &str| {
            metadata
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        };
        Some(Self {
            user: get(META_USER)?,
            host: get(META_HOST)?,
            pid: get(META_PID)?.parse().ok()?,
            command: get(META_COMMAND)?,
            since: get(META_SINCE)?,
        })
    }

    /// A holder whose metadata could not be read (it took the lease but had not yet written
    /// who it is).
    fn unknown() -> Self {
        Self {
            user: "unknown".to_owned(),
            host: "unknown".to_owned(),
            pid: 0,
            command: "unknown".to_owned(),
            since: "unknown".to_owned(),
        }
    }
}

impl fmt::Display for LockInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{} (pid {}, `{}`, since {})",
            self.user, self.host, self.pid, self.command, self.since
        )
    }
}

fn header_safe(value: &str) -> String {
    secret::redact(value)
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(MAX_META_VALUE)
        .collect()
}

/// One version of the state blob as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateVersion {
    /// The state bytes; `None` while no state was ever written (the blob is the empty
    /// placeholder a first lock creates).
    pub content: Option<Vec<u8>>,
    /// The ETag to pass to [`StateLock::write`].
    pub etag: String,
}

/// The state blob of one backend: `container/key` in a storage account.
#[derive(Clone, Debug)]
pub struct RemoteState {
    store: BlobStore,
    container: String,
    key: String,
}

impl RemoteState {
    /// The state at `container/key` behind `store`.
    pub fn new(store: BlobStore, container: &str, key: &str) -> Self {
        Self {
            store,
            container: container.to_owned(),
            key: key.to_owned(),
        }
    }

    /// The state blob's URL, without credentials.
    pub fn url(&self) -> String {
        self.store.display_url(&self.container, &self.key)
    }

    /// Reads the state without locking (for `state pull`); `None` if there is no blob.
    pub async fn read(&self) -> Result<Option<StateVersion>, Error> {
        self.read_with(&Conditions::none()).await
    }

    async fn read_with(&self, conditions: &Conditions) -> Result<Option<StateVersion>, Error> {
        match self
            .store
            .get(&self.container, &self.key, None, conditions)
            .await
        {
            Ok(blob) => Ok(Some(StateVersion {
                content: (!blob.content.is_empty()).then_some(blob.content),
                etag: blob.properties.etag,
            })),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Who holds the lock now, if anyone.
    pub async fn holder(&self) -> Result<Option<LockInfo>, Error> {
        match self.store.properties(&self.container, &self.key).await {
            Ok(props) if props.lease.is_held() => Ok(Some(
                LockInfo::from_metadata(&props.metadata).unwrap_or_else(LockInfo::unknown),
            )),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Takes the lock: a lease of `lease` (15 to 60 s) on the state blob, renewed in the
    /// background until [`StateLock::release`] or drop. If another run holds it, fails with
    /// [`Error::Locked`] naming that run.
    pub async fn lock(&self, info: LockInfo, lease: Duration) -> Result<StateLock, Error> {
        let lease_id = match self
            .store
            .acquire_lease(&self.container, &self.key, lease)
            .await
        {
            Ok(id) => id,
            Err(e) if e.is_not_found() => {
                self.create_placeholder().await?;
                self.acquire_or_report_holder(lease).await?
            }
            Err(e) if e.is_lease_present() => return Err(self.locked_error().await),
            Err(e) => return Err(e),
        };
        let conditions = Conditions::leased(&lease_id);
        if let Err(e) = self
            .store
            .set_metadata(&self.container, &self.key, &info.to_metadata(), &conditions)
            .await
        {
            // Best effort: the lease would expire anyway.
            let _ = self
                .store
                .release_lease(&self.container, &self.key, &lease_id)
                .await;
            return Err(e);
        }
        let lost = Arc::new(Mutex::new(None));
        let renewer = tokio::spawn(renew_until_stopped(
            self.clone(),
            lease_id.clone(),
            lease,
            Arc::clone(&lost),
        ));
        Ok(StateLock {
            state: self.clone(),
            lease_id,
            info,
            renewer: Some(renewer),
            lost,
            released: false,
        })
    }

    async fn acquire_or_report_holder(&self, lease: Duration) -> Result<String, Error> {
        match self
            .store
            .acquire_lease(&self.container, &self.key, lease)
            .await
        {
            Ok(id) => Ok(id),
            Err(e) if e.is_lease_present() => Err(self.locked_error().await),
            Err(e) => Err(e),
        }
    }

    /// The first lock of a new state creates an empty blob to lease: leases need a blob.
    async fn create_placeholder(&self) -> Result<(), Error> {
        let options = PutOptions {
            conditions: Conditions {
                if_not_exists: true,
                ..Conditions::none()
            },
            ..PutOptions::default()
        };
        match self
            .store
            .put(&self.container, &self.key, &[], &options)
            .await
        {
            Ok(_) => Ok(()),
            // Another run created it first: fine, the lease decides who goes on.
            Err(e) if matches!(e.status(), Some(409 | 412)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn locked_error(&self) -> Error {
        // The holder writes its metadata just after taking the lease; give it a moment.
        let mut holder = None;
        for _ in 0..5 {
            match self.holder().await {
                Ok(Some(info)) if info != LockInfo::unknown() => {
                    holder = Some(info);
                    break;
                }
                Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
                Ok(None) | Err(_) => break,
            }
        }
        Error::Locked {
            url: self.url(),
            holder: Box::new(holder.unwrap_or_else(LockInfo::unknown)),
        }
    }

    /// Breaks the lock whoever holds it (`dsinfra force-unlock`, after confirmation) and
    /// returns who held it.
    pub async fn force_unlock(&self) -> Result<Option<LockInfo>, Error> {
        let holder = self.holder().await?;
        match self
            .store
            .break_lease(&self.container, &self.key, Duration::ZERO)
            .await
        {
            Ok(_) => Ok(holder),
            // Nothing to break: the blob is missing or not leased.
            Err(e) if e.is_not_found() || e.code() == Some("LeaseNotPresentWithLeaseOperation") => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The ids of the kept previous versions (snapshots), oldest first.
    pub async fn versions(&self) -> Result<Vec<String>, Error> {
        let items = self.store.list(&self.container, &self.key, true).await?;
        let mut versions: Vec<String> = items
            .into_iter()
            .filter(|item| item.name == self.key && item.size > 0)
            .filter_map(|item| item.snapshot)
            .collect();
        versions.sort();
        Ok(versions)
    }

    /// The content of a kept previous version.
    pub async fn read_version(&self, snapshot: &str) -> Result<Vec<u8>, Error> {
        let blob = self
            .store
            .get(
                &self.container,
                &self.key,
                Some(snapshot),
                &Conditions::none(),
            )
            .await?;
        Ok(blob.content)
    }
}

/// Renews the lease every third of its duration until the task is aborted, or records why it
/// could not. Transient failures are retried at the next tick; the lease outlives two of them.
async fn renew_until_stopped(
    state: RemoteState,
    lease_id: String,
    lease: Duration,
    lost: Arc<Mutex<Option<String>>>,
) {
    let period = lease / 3;
    loop {
        tokio::time::sleep(period).await;
        match state
            .store
            .renew_lease(&state.container, &state.key, &lease_id)
            .await
        {
            Ok(()) => {}
            Err(e) if e.is_transient() => {
                tracing::warn!("renewing the state lock failed, retrying: {e}");
            }
            Err(e) => {
                tracing::warn!("the state lock was lost: {e}");
                *lost
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e.to_string());
                return;
            }
        }
    }
}

/// A held state lock. Release it with [`StateLock::release`]; dropping it releases it in the
/// background on a best-effort basis, and if even that fails the lease expires by itself.
#[derive(Debug)]
pub struct StateLock {
    state: RemoteState,
    lease_id: String,
    info: LockInfo,
    renewer: Option<JoinHandle<()>>,
    lost: Arc<Mutex<Option<String>>>,
    released: bool,
}

impl StateLock {
    /// Who we told the world we are.
    pub fn info(&self) -> &LockInfo {
        &self.info
    }

    /// The lease id: a capability over the state blob, so never printed or stored.
    pub fn lease_id(&self) -> &str {
        &self.lease_id
    }

    /// Why the background renewal gave up, if it did; a write will then be refused.
    pub fn lost(&self) -> Option<String> {
        self.lost
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The state as it is now under our lease.
    pub async fn read(&self) -> Result<StateVersion, Error> {
        let conditions = Conditions::leased(&self.lease_id);
        let version = self
            .state
            .read_with(&conditions)
            .await
            .map_err(|e| self.lease_lost_or(e))?;
        version.ok_or_else(|| Error::LeaseLost {
            url: self.state.url(),
            source: Box::new(Error::invalid("the state blob was deleted while locked")),
        })
    }

    /// Writes `content` as the new state, only if we still hold the lease and the blob is still
    /// at `expected_etag` (from [`StateLock::read`] or the previous write). The version being
    /// replaced is kept as a snapshot first. Returns the new ETag.
    pub async fn write(&self, content: &[u8], expected_etag: &str) -> Result<String, Error> {
        let store = &self.state.store;
        let (container, key) = (&self.state.container, &self.state.key);
        let conditions = Conditions::leased(&self.lease_id).if_match(expected_etag);
        store
            .snapshot(container, key, &conditions)
            .await
            .map_err(|e| self.lease_lost_or(e))?;
        let options = PutOptions {
            content_type: Some("application/json".to_owned()),
            content_encoding: None,
            // A put replaces all metadata: keep saying who holds the lock.
            metadata: self.info.to_metadata(),
            conditions,
        };
        store
            .put(container, key, content, &options)
            .await
            .map_err(|e| self.lease_lost_or(e))
    }

    fn lease_lost_or(&self, error: Error) -> Error {
        if error.is_lease_mismatch() {
            Error::LeaseLost {
                url: self.state.url(),
                source: Box::new(error),
            }
        } else {
            error
        }
    }

    /// Stops renewing, clears the holder metadata and releases the lease.
    pub async fn release(mut self) -> Result<(), Error> {
        self.released = true;
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
        release(&self.state, &self.lease_id).await
    }
}

async fn release(state: &RemoteState, lease_id: &str) -> Result<(), Error> {
    let conditions = Conditions::leased(lease_id);
    state
        .store
        .set_metadata(&state.container, &state.key, &BTreeMap::new(), &conditions)
        .await?;
    state
        .store
        .release_lease(&state.container, &state.key, lease_id)
        .await
}

impl Drop for StateLock {
    fn drop(&mut self) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
        if self.released {
            return;
        }
        // Drop cannot wait; release in the background if a runtime is still there, where
        // [`settle_releases`] can wait for it. If the process exits first, the lease expires
        // within its duration.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let state = self.state.clone();
            let lease_id = self.lease_id.clone();
            let release = runtime.spawn(async move {
                if let Err(e) = release(&state, &lease_id).await {
                    tracing::warn!("releasing the state lock failed; it expires by itself: {e}");
                }
            });
            relock(&RELEASES).push(release);
        }
    }
}

/// The releases of leases dropped without [`StateLock::release`], running in the background.
static RELEASES: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>> =
    std::sync::Mutex::new(Vec::new());

fn relock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Wait (at most `bound`) for the releases of leases that were dropped instead of released (a
/// command that failed with its state open): a process calls this before its runtime ends, so
/// the next command finds the state free instead of waiting out the lease.
pub async fn settle_releases(bound: Duration) {
    let pending: Vec<_> = relock(&RELEASES).drain(..).collect();
    if pending.is_empty() {
        return;
    }
    let _ = tokio::time::timeout(bound, futures::future::join_all(pending)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> LockInfo {
        LockInfo {
            user: "ana".to_owned(),
            host: "ws-1".to_owned(),
            pid: 4242,
            command: "dsinfra apply -target vm.gpu".to_owned(),
            since: "2026-01-02T03:04:05Z".to_owned(),
        }
    }

    #[test]
    fn lock_info_round_trips_through_metadata() {
        let metadata = info().to_metadata();
        assert_eq!(
            metadata.get("dsinfra_lock_pid").map(String::as_str),
            Some("4242")
        );
        assert_eq!(LockInfo::from_metadata(&metadata), Some(info()));
    }

    #[test]
    fn metadata_keys_are_matched_case_insensitively() {
        let upper: BTreeMap<String, String> = info()
            .to_metadata()
            .into_iter()
            .map(|(k, v)| (k.to_ascii_uppercase(), v))
            .collect();
        assert_eq!(LockInfo::from_metadata(&upper), Some(info()));
    }

    #[test]
    fn missing_or_bad_metadata_gives_no_holder() {
        let mut metadata = info().to_metadata();
        metadata.insert("dsinfra_lock_pid".to_owned(), "not-a-pid".to_owned());
        assert_eq!(LockInfo::from_metadata(&metadata), None);
        assert_eq!(LockInfo::from_metadata(&BTreeMap::new()), None);
    }

    #[test]
    fn metadata_values_are_header_safe_and_redacted() {
        secret::register("lock-info-secret-99");
        let mut holder = info();
        holder.command = "dsinfra apply --var key=lock-info-secret-99 ünïcode\n".to_owned();
        let metadata = holder.to_metadata();
        assert_eq!(
            metadata.get("dsinfra_lock_command").map(String::as_str),
            Some("dsinfra apply --var key=*** ?n?code?")
        );
    }

    #[test]
    fn locked_error_names_the_holder_exactly() {
        let error = Error::Locked {
            url: "http://127.0.0.1:1/acct/state/a".to_owned(),
            holder: Box::new(info()),
        };
        assert_eq!(
            error.to_string(),
            "the state http://127.0.0.1:1/acct/state/a is locked by ana@ws-1 (pid 4242, \
             `dsinfra apply -target vm.gpu`, since 2026-01-02T03:04:05Z)"
        );
    }
}
