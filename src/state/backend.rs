//! The seam between the engine and where a state is kept.
//!
//! The engine (issue 4) loads the state once, then saves it after every resource it creates,
//! changes or deletes. It needs nothing else from a backend, so a remote backend (Azure Blob with a
//! lease standing in for the OS lock) implements the same trait. Holding a backend means holding
//! the lock: constructors acquire it, and [`Backend::unlock`] releases it. The trait is async,
//! as the remote backend's storage calls are (issue 31: no sync-over-async bridge); the local
//! backend's file I/O runs in `block_in_place`, so a save never stalls the runtime's other tasks.

use std::path::PathBuf;

use futures::future::BoxFuture;

use super::{DSINFRA_VERSION, LockHolder, State, StateError};

/// Where one experiment's state is kept, locked until [`Backend::unlock`].
pub trait Backend: Send {
    /// Where the state lives, for messages (a path, or a blob URL without any credential).
    fn location(&self) -> String;

    /// Read the state; `None` when this experiment has never been saved.
    fn load(&mut self) -> BoxFuture<'_, Result<Option<State>, StateError>>;

    /// Write `state` atomically as the new current version, keeping the previous one. Bumps
    /// `state.serial` (and records this dsinfra's version) as part of the save; on error the state
    /// is left as it was.
    fn save<'a>(&'a mut self, state: &'a mut State) -> BoxFuture<'a, Result<(), StateError>>;

    /// Who holds the lock: this process, as recorded for others to see.
    fn lock_holder(&self) -> &LockHolder;

    /// Forget the lineage of the state last loaded, so that the next save may replace it with
    /// another experiment's history. Only `dsinfra state push --force` calls this: every other
    /// save refuses a different lineage. A backend that does not check lineages (a test
    /// double) has nothing to forget.
    fn allow_lineage_change(&mut self) {}

    /// Release the lock now, and say whether that worked. Every command ends with it, on
    /// success and failure alike. A backend dropped without it still lets go (the OS drops a
    /// file lock with its handle; a blob lease is released in the background when a runtime is
    /// there, and otherwise expires within its duration), but only `unlock` waits for it.
    fn unlock(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>>;
}

/// What every backend's save does around its own write: refuse a state of another lineage than
/// the one loaded (`location` names the state in that error), refuse a state holding a secret,
/// bump the serial and record this dsinfra's version, then `write`. If the write fails, serial
/// and version are put back, so the caller's state is as it was (the trait's promise).
pub(super) async fn save_checked(
    loaded_lineage: Option<&str>,
    location: impl FnOnce() -> PathBuf,
    state: &mut State,
    write: impl AsyncFnOnce(&State) -> Result<(), StateError>,
) -> Result<(), StateError> {
    if let Some(expected) = loaded_lineage
        && expected != state.lineage
    {
        return Err(StateError::LineageMismatch {
            path: location(),
            expected: expected.to_owned(),
            found: state.lineage.clone(),
        });
    }
    state.check_no_secrets()?;
    let previous = (state.serial, state.dsinfra_version.clone());
    state.serial += 1;
    DSINFRA_VERSION.clone_into(&mut state.dsinfra_version);
    let written = write(state).await;
    if written.is_err() {
        (state.serial, state.dsinfra_version) = previous;
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_write_leaves_the_state_as_it_was() {
        let mut state = State::new("exp");
        state.serial = 7;
        state.dsinfra_version = "0.0.1".to_owned();
        let failed = save_checked(None, PathBuf::new, &mut state, async |written: &State| {
            assert_eq!(written.serial, 8, "the write sees the bumped serial");
            assert_eq!(written.dsinfra_version, DSINFRA_VERSION);
            Err(StateError::Io {
                action: "write",
                path: PathBuf::from("x"),
                source: std::io::Error::other("disk full"),
            })
        })
        .await;
        assert!(failed.is_err());
        assert_eq!((state.serial, state.dsinfra_version.as_str()), (7, "0.0.1"));
    }

    #[tokio::test]
    async fn another_lineage_is_refused_before_anything_is_written() {
        let mut state = State::new("exp");
        let result = save_checked(
            Some("someone-else"),
            || PathBuf::from(".dsinfra/exp/state.json"),
            &mut state,
            async |_: &State| panic!("nothing is written"),
        )
        .await;
        assert!(
            matches!(result, Err(StateError::LineageMismatch { ref expected, .. }) if expected == "someone-else"),
            "{result:?}"
        );
        assert_eq!(state.serial, 0);
    }
}
