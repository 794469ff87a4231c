//! The state layer's one error type. Every message names the file involved and says what to do.

use std::io;
use std::path::PathBuf;

use super::LockHolder;

/// Why the state could not be read, locked or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A file operation failed.
    #[error("could not {action} {}: {source}", path.display())]
    Io {
        /// What dsinfra was doing ("read", "write", "lock", ...).
        action: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// The state file is not valid JSON or not a valid state.
    #[error(
        "the state file {} is corrupt: {message} at line {line}, column {column}; if it was not edited by hand, the previous version is in state.json.backup next to it",
        path.display()
    )]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// What the parser found wrong.
        message: String,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
    },

    /// The state was written by a newer dsinfra with a format this one does not understand.
    #[error(
        "the state file {} has format version {found} (written by dsinfra {written_by}), but this dsinfra {this_version} understands format version {supported} at most: upgrade dsinfra to {written_by} or later to use this state, and do not edit the file by hand",
        path.display(),
        this_version = super::DSINFRA_VERSION
    )]
    NewerFormat {
        /// The state file.
        path: PathBuf,
        /// Its format version.
        found: u32,
        /// The newest format this build reads.
        supported: u32,
        /// The dsinfra version recorded in the file (`unknown` if absent).
        written_by: String,
    },

    /// Another process holds the lock on the state.
    #[error(
        "the state {} is locked by another dsinfra process: {}; wait for it to finish (the operating system releases the lock when that process exits, even if it crashes)",
        state.display(),
        holder.as_ref().map_or_else(|| "it has not recorded who it is yet".to_owned(), LockHolder::describe)
    )]
    Locked {
        /// The state file the lock protects.
        state: PathBuf,
        /// Who holds the lock, as recorded in the lock file.
        holder: Option<LockHolder>,
    },

    /// The state file is gone but its backup is not: a save was probably interrupted by hand.
    #[error(
        "the state file {} is missing but its backup {} exists: if you did not delete the state on purpose, restore it with `mv {} {}`; to start over, delete the backup too",
        path.display(), backup.display(), backup.display(), path.display()
    )]
    MissingWithBackup {
        /// The missing state file.
        path: PathBuf,
        /// The backup that exists.
        backup: PathBuf,
    },

    /// A save would overwrite the state of another lineage (another experiment's history).
    #[error(
        "refusing to save state of lineage {found} over {} which holds lineage {expected}: they are different histories; this is a dsinfra bug, please report it",
        path.display()
    )]
    LineageMismatch {
        /// The state file.
        path: PathBuf,
        /// The lineage loaded from it.
        expected: String,
        /// The lineage of the state being saved.
        found: String,
    },

    /// A save found a value that looks like a secret in an attribute.
    #[error(
        "refusing to save state: attribute `{attribute}` of `{address}` looks like {what}, and secrets are never stored in state; this is a dsinfra bug, please report it (without the value)"
    )]
    SecretInAttribute {
        /// The resource.
        address: String,
        /// The attribute holding the value.
        attribute: String,
        /// What it looks like ("a SAS token").
        what: &'static str,
    },

    /// A save was asked for after the operation gave the state up (a second Ctrl-C): a task of
    /// the abandoned walk that was still running. Nothing was written.
    #[error(
        "the state was not saved: the operation had already given it up (a second Ctrl-C) and released its lock; what this change recorded was started with an intent in the state, so the next apply adopts it"
    )]
    Closed,

    /// The manifest path has no file name to derive the state directory from.
    #[error("cannot find a state location for {}: the path has no file name", path.display())]
    NoManifestStem {
        /// The path given.
        path: PathBuf,
    },

    /// Another dsinfra holds the lease on the remote state blob.
    #[error(
        "the state {url} is locked by another dsinfra process: {}; wait for it to finish (the lock is a {lease_secs}-second lease that expires by itself if that process dies), or run `dsinfra force-unlock` if you are sure it is not running",
        holder.as_ref().map_or_else(|| "it has not recorded who it is yet".to_owned(), LockHolder::describe)
    )]
    RemoteLocked {
        /// The state blob, without any credential.
        url: String,
        /// Who holds the lease, as recorded in the blob's metadata.
        holder: Option<LockHolder>,
        /// How long the holder's lease lasts without renewal, in seconds.
        lease_secs: u64,
    },

    /// The lease on the remote state was lost (broken by `force-unlock`, or expired and taken).
    #[error(
        "the lock on the state {url} was lost ({why}); the state was not written, so nothing newer was overwritten: run the command again to take the lock anew"
    )]
    RemoteLockLost {
        /// The state blob, without any credential.
        url: String,
        /// What showed it, redacted.
        why: String,
    },

    /// A remote state operation failed.
    #[error("could not {action} the state {url}: {source}")]
    Remote {
        /// What dsinfra was doing ("lock", "read", "write", ...).
        action: &'static str,
        /// The state blob, without any credential.
        url: String,
        /// The storage error (it never holds a secret); boxed to keep every `Result` small.
        #[source]
        source: Box<crate::storage::Error>,
    },

    /// The backend's credential could not be found, or gave no token.
    #[error("cannot authenticate to the state {url}: {why}")]
    RemoteAuth {
        /// The state blob, without any credential.
        url: String,
        /// What is missing and how to provide it.
        why: String,
    },
}

impl StateError {
    /// A remote state operation that failed with `source`, as it is reported. A credential
    /// failure is an authentication failure whose reason is the credential's own message (the
    /// credential chain's lists every source it tried and what to do); anything else is `action`
    /// failing on `url`.
    pub fn remote(action: &'static str, url: String, source: crate::storage::Error) -> Self {
        match source {
            crate::storage::Error::Credential { message, .. } => {
                Self::RemoteAuth { url, why: message }
            }
            source => Self::Remote {
                action,
                url,
                source: Box::new(source),
            },
        }
    }
}
