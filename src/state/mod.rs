//! The state: what dsinfra believes exists in Azure for one experiment, and where that is kept.
//!
//! The state is the planner's "before" and the engine's memory across runs (terraform's state):
//! per resource its address, ARM id, kind, the attributes dsinfra manages, its dependencies, and
//! whether its create finished. It is versioned JSON ([`FORMAT_VERSION`], a `serial` bumped on every
//! save, a `lineage` that identifies one experiment's state for its whole life) so that a saved plan
//! can be bound to exactly one version of it.
//!
//! Where it is kept is a [`Backend`]: [`LocalBackend`] (a file next to the manifest, an OS lock, an
//! atomic write and a backup) or [`RemoteBackend`] (a blob in Azure Storage under a finite,
//! renewed lease, with conditional writes and snapshots); [`open_backend`] picks one from the
//! manifest's `backend` block. Secrets never enter the state: a secret is recorded only by its [`SecretIdentity`], and
//! every save refuses attribute values that look like secrets (see docs/state.md).

mod backend;
mod error;
mod local;
mod lock;
mod model;
pub mod open;
pub mod remote;
mod secret;
pub mod transfer;

pub use backend::Backend;
pub use error::StateError;
pub use local::LocalBackend;
/// For test doubles of a backend, which run their I/O as the local backend does.
#[cfg(test)]
pub(crate) use local::blocking;
pub use lock::LockHolder;
pub use model::{
    Drift, FORMAT_VERSION, KubeRecord, MeshKey, NodeRecord, PowerState, ResourceState,
    ResourceStatus, State, StepRecord,
};
pub use open::open_backend;
pub use remote::RemoteBackend;
pub use secret::{SecretIdentity, SecretKind};

/// The version of dsinfra writing states and plans (recorded in both).
pub const DSINFRA_VERSION: &str = env!("CARGO_PKG_VERSION");
