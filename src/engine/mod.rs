//! The engine: turns a plan into ARM calls, in dependency order and in parallel (the generic walk
//! is [`crate::graph::walk()`]), saving state after every change and reporting progress as events
//! (it never writes to the terminal).
//!
//! - [`bodies`]: desired resources -> typed ARM request bodies, references resolved to ids.
//! - [`execute`]: apply and destroy a plan: the walk, the ARM calls, intents and state saves.
//! - [`limiter`]: the adaptive bound on concurrent ARM calls (`--parallelism`).
//! - [`events`]: what the engine reports while it works; `render::progress` draws it.
//! - [`advice`]: ARM errors shown verbatim, with what to do about them.
//! - [`refresh`]: read the state's resources back from ARM: drift, power states, IP addresses.
//! - [`preflight`]: quota and SKU checks before spending, and the `sizes = [...]` fallback.
//! - [`sas`]: sign a `sas` resource from the account key `listKeys` returns.
//! - [`power`]: park and unpark (deallocate/start in parallel), cost per hour by power state.
//! - [`outputs`]: after apply, the non-sensitive outputs with ARM-only values filled in.
//! - [`post_boot`]: post-boot steps in apply and unpark: contexts, runs, state records.
//! - [`reach`]: how each VM is reached over SSH (direct, through the head, emulator endpoints).
//!
//! See docs/engine.md for the design.

pub mod post_boot;
pub mod power;
pub(crate) mod preflight;
pub mod reach;
pub mod refresh;
pub(crate) mod registration;

pub(crate) mod advice;
pub(crate) mod bodies;
pub mod events;
pub(crate) mod execute;
pub(crate) mod kinds;
pub mod kube;
pub mod kube_objects;
pub(crate) mod limiter;
pub mod op;
pub(crate) mod outputs;
pub(crate) mod sas;
