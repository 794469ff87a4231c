//! The seam between the engine and where a state is kept.
//!
//! The engine (issue 4) loads the state once, then saves it after every resource it creates,
//! changes or deletes. It needs nothing else from a backend, so a remote backend (Azure Blob with a
//! lease standing in for the OS lock) implements the same trait. Holding a backend means holding
//! the lock: constructors acquire it and dropping the backend releases it.

use super::{LockHolder, State, StateError};

/// Where one experiment's state is kept, locked for as long as the value lives.
pub trait Backend {
    /// Where the state lives, for messages (a path, or a blob URL without any credential).
    fn location(&self) -> String;

    /// Read the state; `None` when this experiment has never been saved.
    fn load(&mut self) -> Result<Option<State>, StateError>;

    /// Write `state` atomically as the new current version, keeping the previous one. Bumps
    /// `state.serial` (and records this dsinfra's version) as part of the save; on error the state
    /// is left as it was.
    fn save(&mut self, state: &mut State) -> Result<(), StateError>;

    /// Who holds the lock: this process, as recorded for others to see.
    fn lock_holder(&self) -> &LockHolder;

    /// Forget the lineage of the state last loaded, so that the next save may replace it with
    /// another experiment's history. Only `dsinfra state push --force` calls this: every other
    /// save refuses a different lineage. A backend that does not check lineages (a test
    /// double) has nothing to forget.
    fn allow_lineage_change(&mut self) {}
}
