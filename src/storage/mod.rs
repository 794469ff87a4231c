//! The Azure Storage data plane: SAS signing, a small Blob client, and the remote-state lock.
//!
//! Everything here talks to a storage account's own endpoint (`https://acct.blob.core.windows.net`
//! or Azurite on 127.0.0.1), never to ARM: the `azure` module creates accounts and containers and
//! fetches keys; this module uses them. It imports nothing from the rest of dsinfra but
//! [`crate::secret`], so it could become its own crate.
//!
//! - [`sas`]: account and service SAS signed locally from the account key (pure).
//! - [`blob`]: put/get/list, leases, metadata, conditional writes and snapshots over the official
//!   `azure_storage_blob` crate.
//! - [`lock`]: the state blob with a finite, renewed lease, holder metadata, conditional writes
//!   and kept previous versions.
//!
//! Secrets (keys, SAS tokens) are registered for redaction when they enter and never appear in
//! an [`Error`] or in `Debug` output.

pub mod blob;
mod error;
pub mod lock;
pub mod sas;

pub use blob::{Auth, Blob, BlobItem, BlobProperties, BlobStore, Conditions, Lease, PutOptions};
pub use error::{Error, scrub};
pub use lock::{DEFAULT_LEASE, LockInfo, RemoteState, StateLock, StateVersion, settle_releases};
pub use sas::{
    AccountKey, Permissions, Protocol, ResourceTypes, SIGNED_VERSION, SasSpec, SasToken, Scope,
    Services,
};
