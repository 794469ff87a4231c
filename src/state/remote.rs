//! The remote backend: the state as a blob in Azure Storage, locked with a finite, renewed lease.
//!
//! [`RemoteBackend`] is the [`Backend`] the engine sees when the manifest has a
//! `backend "azureblob"` block. It is a thin synchronous layer over [`crate::storage::lock`],
//! which owns the protocol (lease, holder metadata, conditional writes, snapshots):
//!
//! - opening takes the lease (refused with the holder's user, host, pid, command and since when
//!   another dsinfra has it) and starts its background renewal;
//! - `load` reads the blob under the lease and remembers its ETag;
//! - `save` writes under the lease id *and* that ETag, after a snapshot of the previous version,
//!   so a holder that lost its lease (force-unlock, or an expiry taken by another run) can never
//!   overwrite a newer state;
//! - [`Backend::unlock`] releases the lease and waits for it; a backend dropped without it
//!   releases in the background when a runtime is still there, and a process that dies instead
//!   leaves a lease that expires by itself within its duration.
//!
//! Every call is async, as the storage client is: there is no sync-over-async bridge and no
//! runtime of the backend's own (issue 31). The lease renewal runs on the caller's runtime.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use futures::future::BoxFuture;

use super::backend::save_checked;
use super::{Backend, LockHolder, State, StateError};
use crate::azure::SdkCredential;
use crate::azure::identity::{ChainOptions, CredentialEnv, DefaultCredentialChain};
use crate::model::BackendConfig;
use crate::secret;
use crate::storage::{self, Auth, BlobStore, LockInfo, RemoteState, StateLock};

/// The state blob of one experiment, leased while this value lives.
pub struct RemoteBackend {
    remote: RemoteState,
    lock: Option<StateLock>,
    holder: LockHolder,
    /// The ETag of the version last read or written: the next save requires it.
    etag: Option<String>,
    loaded_lineage: Option<String>,
    /// Set by `allow_lineage_change`: the next save may replace another lineage.
    replace_lineage: bool,
}

impl std::fmt::Debug for RemoteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The lease id is a capability over the blob and stays out; the store's Debug already
        // redacts its credential.
        f.debug_struct("RemoteBackend")
            .field("url", &self.remote.url())
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

/// The blob client for a backend block: its endpoint and credential.
///
/// The credential is a SAS from the environment variable `sas_env` names (for tests and CI), or
/// else Azure AD through the same [`DefaultCredentialChain`] the ARM client uses (environment
/// secret or certificate, workload identity, managed identity, Azure CLI, Azure Developer CLI),
/// lent to the Blob client as an `azure_core` credential by [`SdkCredential`]: a CI job or a VM
/// that can apply can also lock and read its state, and when no source works the message is the
/// chain's. Both go through `storage::Auth` (`Auth::sas` registers the SAS for redaction).
pub fn store_for(config: &BackendConfig) -> Result<BlobStore, StateError> {
    let endpoint = config.blob_endpoint();
    let url = format!("{endpoint}/{}/{}", config.container, config.key);
    let auth = match &config.sas_env {
        Some(name) => match std::env::var(name) {
            Ok(sas) if !sas.trim().is_empty() => Auth::sas(sas.trim()),
            _ => {
                return Err(StateError::RemoteAuth {
                    url,
                    why: format!(
                        "the backend's `sas_env` names the environment variable {name}, which is not set: set it to a SAS for the container `{}` (read, write, list, delete)",
                        config.container
                    ),
                });
            }
        },
        None => Auth::Token(azure_ad_credential()),
    };
    BlobStore::new(&endpoint, auth).map_err(|source| StateError::Remote {
        action: "reach",
        url,
        source: Box::new(source),
    })
}

/// The credential chain of this process's environment, for the Blob client.
fn azure_ad_credential() -> Arc<dyn azure_core::credentials::TokenCredential> {
    let env = CredentialEnv::from_process();
    // The chain's messages never quote the secret (tests/credentials.rs checks); registering it
    // also keeps it out of anything storage or Azure might echo back.
    if let Some(client_secret) = &env.client_secret {
        secret::register(client_secret.expose());
    }
    let chain = DefaultCredentialChain::new(&env, ChainOptions::default());
    Arc::new(SdkCredential::new(Arc::new(chain)))
}

/// What the storage layer says about a holder, as the state layer describes holders.
fn holder_of(info: &LockInfo) -> LockHolder {
    LockHolder {
        pid: info.pid,
        host: info.host.clone(),
        user: info.user.clone(),
        command: info.command.clone(),
        since: DateTime::parse_from_rfc3339(&info.since)
            .map_or(DateTime::<Utc>::UNIX_EPOCH, |t| t.with_timezone(&Utc)),
    }
}

fn info_of(holder: &LockHolder) -> LockInfo {
    LockInfo {
        user: holder.user.clone(),
        host: holder.host.clone(),
        pid: holder.pid,
        command: holder.command.clone(),
        since: holder.since.to_rfc3339_opts(SecondsFormat::Secs, true),
    }
}

impl RemoteBackend {
    /// Opens the state a backend block names and takes its lock for `holder`, with the default
    /// 60-second lease.
    pub async fn open(config: &BackendConfig, holder: LockHolder) -> Result<Self, StateError> {
        let store = store_for(config)?;
        Self::open_with(
            RemoteState::new(store, &config.container, &config.key),
            holder,
            storage::DEFAULT_LEASE,
        )
        .await
    }

    /// Takes the lock on `remote` for `holder` with a lease of `lease` (15 to 60 s). Fails with
    /// [`StateError::RemoteLocked`], naming the holder, if another process has it.
    pub async fn open_with(
        remote: RemoteState,
        holder: LockHolder,
        lease: Duration,
    ) -> Result<Self, StateError> {
        let url = remote.url();
        let info = info_of(&holder);
        let lock = remote.lock(info, lease).await.map_err(|e| match e {
            storage::Error::Locked { url, holder } => StateError::RemoteLocked {
                url,
                holder: (holder.pid != 0).then(|| holder_of(&holder)),
                lease_secs: lease.as_secs(),
            },
            source => StateError::remote("lock", url.clone(), source),
        })?;
        Ok(Self {
            remote,
            lock: Some(lock),
            holder,
            etag: None,
            loaded_lineage: None,
            replace_lineage: false,
        })
    }

    /// The state blob's URL, without any credential.
    pub fn url(&self) -> String {
        self.remote.url()
    }

    /// Whether the storage calls run on the caller's runtime (`true`) or on the backend's own.
    fn held(&self) -> &StateLock {
        self.lock
            .as_ref()
            .expect("the lock is held from open until unlock")
    }

    fn lost(&self, why: &str) -> StateError {
        StateError::RemoteLockLost {
            url: self.url(),
            why: secret::redact(why),
        }
    }

    fn storage_error(&self, action: &'static str, error: storage::Error) -> StateError {
        match error {
            storage::Error::LeaseLost { source, .. } => self.lost(&source.to_string()),
            source => StateError::remote(action, self.url(), source),
        }
    }

    /// Reads the blob under the lease: its state (if one was ever written) and its ETag.
    async fn read(&mut self) -> Result<Option<State>, StateError> {
        let lock = self.held();
        if let Some(why) = lock.lost() {
            return Err(self.lost(&why));
        }
        let version = lock
            .read()
            .await
            .map_err(|e| self.storage_error("read", e))?;
        self.etag = Some(version.etag);
        let Some(bytes) = version.content else {
            return Ok(None);
        };
        let url = self.url();
        let text = String::from_utf8(bytes).map_err(|_| StateError::Corrupt {
            path: PathBuf::from(&url),
            message: "the blob is not UTF-8 text".to_owned(),
            line: 1,
            column: 1,
        })?;
        let state = State::from_json(&text, &PathBuf::from(url))?;
        self.loaded_lineage = Some(state.lineage.clone());
        Ok(Some(state))
    }

    async fn write(&mut self, state: &State) -> Result<(), StateError> {
        if self.etag.is_none() {
            // Saving without a load first: learn the ETag, and refuse another lineage as a
            // loaded state would.
            let current = self.read().await?;
            if let Some(current) = current
                && current.lineage != state.lineage
                && !self.replace_lineage
            {
                return Err(StateError::LineageMismatch {
                    path: PathBuf::from(self.url()),
                    expected: current.lineage,
                    found: state.lineage.clone(),
                });
            }
        }
        let lock = self.held();
        if let Some(why) = lock.lost() {
            return Err(self.lost(&why));
        }
        let etag = self.etag.clone().expect("the ETag is known after a read");
        let text = state.to_json();
        let written = lock.write(text.as_bytes(), &etag).await.map_err(|e| {
            if e.is_condition_not_met() {
                self.lost(&format!(
                    "the state blob changed since it was read: {}",
                    storage::scrub(&e.to_string())
                ))
            } else {
                self.storage_error("write", e)
            }
        })?;
        self.etag = Some(written);
        Ok(())
    }
}

impl Backend for RemoteBackend {
    fn location(&self) -> String {
        self.url()
    }

    fn load(&mut self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        Box::pin(self.read())
    }

    fn save<'a>(&'a mut self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let loaded = self.loaded_lineage.clone();
            let url = self.url();
            save_checked(
                loaded.as_deref(),
                || PathBuf::from(url),
                state,
                async |state: &State| self.write(state).await,
            )
            .await?;
            self.loaded_lineage = Some(state.lineage.clone());
            self.replace_lineage = false;
            Ok(())
        })
    }

    fn lock_holder(&self) -> &LockHolder {
        &self.holder
    }

    fn allow_lineage_change(&mut self) {
        self.loaded_lineage = None;
        self.replace_lineage = true;
    }

    fn unlock(mut self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        let url = self.url();
        let lock = self.lock.take();
        Box::pin(async move {
            let Some(lock) = lock else {
                return Ok(());
            };
            match lock.release().await {
                // The lease is gone already (broken by force-unlock, or taken after it expired):
                // there is nothing of ours to release, and the failed save said so.
                Err(e) if e.is_lease_mismatch() => Ok(()),
                result => result.map_err(|source| StateError::remote("unlock", url, source)),
            }
        })
    }
}
