//! Moving a state between backends, as `dsinfra state pull` and `state push` do: a state's bytes
//! as stored (read without its lock: a read must work while an apply holds it), the remote blob a
//! `backend` block names, and the rules a pushed state must pass.

use std::path::{Path, PathBuf};

use super::{LocalBackend, State, StateError, remote};
use crate::model::BackendConfig;
use crate::storage::RemoteState;

/// Why a state could not be pulled.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// Nothing was ever saved there.
    #[error("there is no state at {location} yet: nothing to pull")]
    Nothing {
        /// The blob's URL or the file's path.
        location: String,
    },
    /// The local file could not be read.
    #[error("could not read {}", path.display())]
    Read {
        /// The state file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The backend could not be reached or read.
    #[error(transparent)]
    State(#[from] StateError),
}

/// The state blob a `backend "azureblob"` block names, with the backend's credential.
///
/// # Errors
///
/// No credential could be had for it.
pub fn remote_state(config: &BackendConfig) -> Result<RemoteState, StateError> {
    let store = remote::store_for(config)?;
    Ok(RemoteState::new(store, &config.container, &config.key))
}

/// The state of `manifest`, byte for byte as stored: from the remote blob when `backend` names
/// one, else from the file next to the manifest. Takes no lock.
///
/// # Errors
///
/// There is no state yet, or it could not be read.
pub async fn pull(manifest: &Path, backend: Option<&BackendConfig>) -> Result<Vec<u8>, PullError> {
    if let Some(config) = backend {
        let remote = remote_state(config)?;
        let read = remote
            .read()
            .await
            .map_err(|source| StateError::remote("read", remote.url(), source))?;
        return read
            .and_then(|version| version.content)
            .ok_or_else(|| PullError::Nothing {
                location: remote.url(),
            });
    }
    let path = LocalBackend::state_dir(manifest)?.join("state.json");
    match std::fs::read(&path) {
        Ok(bytes) => Ok(bytes),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(PullError::Nothing {
            location: path.display().to_string(),
        }),
        Err(source) => Err(PullError::Read { path, source }),
    }
}

/// Why a push must be refused without `--force`, if it must: `pushed` is another experiment's
/// history (lineage) or older than the backend's state (serial). Pure, so the rules are tested
/// on their own.
pub fn push_refusal(current: Option<&State>, pushed: &State) -> Option<String> {
    let current = current?;
    if current.lineage != pushed.lineage {
        return Some(format!(
            "it has lineage {} but the backend's state has lineage {}: they are the histories of different experiments",
            pushed.lineage, current.lineage
        ));
    }
    if pushed.serial < current.serial {
        return Some(format!(
            "it has serial {} but the backend's state is newer (serial {}): pull the newer state first",
            pushed.serial, current.serial
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_refuses_another_lineage_and_an_older_serial() {
        let mut current = State::new("exp");
        current.serial = 5;
        let other = State::new("exp");
        assert_eq!(
            push_refusal(Some(&current), &other),
            Some(format!(
                "it has lineage {} but the backend's state has lineage {}: they are the histories of different experiments",
                other.lineage, current.lineage
            ))
        );
        let mut older = current.clone();
        older.serial = 4;
        assert_eq!(
            push_refusal(Some(&current), &older).as_deref(),
            Some(
                "it has serial 4 but the backend's state is newer (serial 5): pull the newer state first"
            )
        );
        assert_eq!(push_refusal(Some(&current), &current), None);
        assert_eq!(push_refusal(None, &other), None);
    }

    #[test]
    fn pulling_a_state_never_saved_says_where_it_looked() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let manifest = dir.path().join("exp.hcl");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let err = runtime
            .block_on(pull(&manifest, None))
            .expect_err("nothing saved");
        let expected = LocalBackend::state_dir(&manifest)
            .expect("a state dir")
            .join("state.json");
        assert_eq!(
            err.to_string(),
            format!(
                "there is no state at {} yet: nothing to pull",
                expected.display()
            )
        );
    }
}
