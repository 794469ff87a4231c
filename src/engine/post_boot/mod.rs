//! Post-boot steps in `apply` and `unpark`: from the manifest's steps, the state and the SSH
//! endpoints to runs of [`crate::steps::run`] on every `vm` and `cluster` block, and back to the
//! state as [`crate::state::StepRecord`]s.
//!
//! For each block with steps ([`PostBoot::run_block`]): its nodes and routes
//! ([`crate::engine::reach`]); a [`NodeContext`](crate::steps::library::NodeContext) with the
//! nodes, InfiniBand, the image's Ubuntu release, storage targets, credentials (account keys via
//! `listKeys`, SAS re-derived exactly as apply signed them) and blob listings for `stage`; the
//! head's public key when the block builds an SSH mesh; the block rendered with
//! [`render_block`](crate::steps::library::render_block); the run; result files fetched; and
//! a record on each VM for every manifest step whose runner parts all succeeded there.
//!
//! During an apply, [`drive`] starts each block as soon as what it needs is done
//! ([`Readiness`]), while the rest of the walk goes on. See docs/engine.md ("Post-boot steps").
//!
//! - [`auth`]: which SSH identity to log in with.
//! - [`context`]: the offline half of the context, and what steps refer to.
//! - [`credentials`]: keys, SAS tokens and listings from Azure.
//! - [`records`]: forced and rebooted steps, and the records to store.
//! - [`trigger`]: when a block is ready during the walk.
//! - [`driver`]: running ready blocks alongside the walk.
//! - [`fetch`]: result files back from the nodes.
//! - [`idle`]: the idle watcher's settings for a block with `park { idle }`.
//! - `stop`: BeeOND stop before park and destroy.
//! - `secure_boot`: kernel-module steps refuse to start on VMs with Secure Boot on.
//! - `release`: data disks unmounted on the VM they leave, before Azure detaches them.

pub mod auth;
mod block;
pub mod context;
pub mod credentials;
pub mod driver;
pub mod fetch;
pub mod idle;
pub mod records;
mod release;
mod secure_boot;
mod stop;
pub mod trigger;

pub use block::{BlockOutcome, BlockResult, Options, PostBoot, StepsMode};
pub use credentials::Azure;
pub use driver::{EndpointsFn, Message, drive};
pub use trigger::{Readiness, Signal};
