//! The one place a command gets its state backend: local unless the manifest has a `backend`
//! block.
//!
//! Commands call [`open_backend`] instead of naming a backend, so that moving an experiment's
//! state to Azure Blob is a manifest change, not a code path per command. Holding the returned
//! value means holding the lock (an OS file lock, or a renewed blob lease) until its
//! `unlock`.

use std::path::Path;

use super::{Backend, LocalBackend, LockHolder, RemoteBackend, StateError};
use crate::model::BackendConfig;

/// Opens and locks the state of `manifest`: the local file next to it when `backend` is `None`,
/// else the blob the backend block names. `command` is what other processes are told holds the
/// lock (`dsinfra apply exp.hcl`).
///
/// # Errors
///
/// [`StateError::Locked`] or [`StateError::RemoteLocked`] (naming the holder) when another
/// process holds the lock; I/O, storage or credential errors otherwise.
pub async fn open_backend(
    manifest: &Path,
    backend: Option<&BackendConfig>,
    command: &str,
) -> Result<Box<dyn Backend + Send>, StateError> {
    let holder = LockHolder::current(command);
    match backend {
        None => Ok(Box::new(LocalBackend::open_as(manifest, holder)?)),
        Some(config) => Ok(Box::new(RemoteBackend::open(config, holder).await?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::State;

    #[tokio::test]
    async fn without_a_backend_block_the_state_is_the_local_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = dir.path().join("exp.hcl");
        let mut backend = open_backend(&manifest, None, "dsinfra apply exp.hcl")
            .await
            .expect("local lock");
        assert_eq!(
            backend.location(),
            dir.path()
                .join(".dsinfra/exp/state.json")
                .display()
                .to_string()
        );
        assert_eq!(backend.lock_holder().command, "dsinfra apply exp.hcl");
        let mut state = State::new("exp");
        backend.save(&mut state).await.expect("saved");
        let err = open_backend(&manifest, None, "dsinfra plan exp.hcl")
            .await
            .err()
            .expect("held by the first");
        assert!(matches!(err, StateError::Locked { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_missing_sas_variable_is_named_without_a_value() {
        let config = BackendConfig {
            account: "acct".to_owned(),
            container: "tfstate".to_owned(),
            key: "exp.json".to_owned(),
            endpoint: Some("http://127.0.0.1:9/acct".to_owned()),
            sas_env: Some("DSINFRA_TEST_UNSET_SAS_VARIABLE".to_owned()),
        };
        let err = open_backend(Path::new("exp.hcl"), Some(&config), "dsinfra plan")
            .await
            .err()
            .expect("no SAS");
        assert_eq!(
            err.to_string(),
            "cannot authenticate to the state http://127.0.0.1:9/acct/tfstate/exp.json: the backend's `sas_env` names the environment variable DSINFRA_TEST_UNSET_SAS_VARIABLE, which is not set: set it to a SAS for the container `tfstate` (read, write, list, delete)"
        );
    }
}
