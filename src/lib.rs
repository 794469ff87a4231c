//! dsinfra: declarative data-science experiment infrastructure on Azure.
//!
//! The library holds everything; `main.rs` only maps [`run`]'s result to an exit code. The module
//! map (see docs/architecture.md) follows terraform's layering: `cli` (private) turns arguments
//! into requests and renders outcomes; [`engine::op`] runs every operation (plan, apply, destroy,
//! park, unpark, status, output) from a request, with events, an approver and a cancel token;
//! [`connect`] makes the connection they work through; `manifest` turns HCL into a
//! [`model::Desired`]; `plan` diffs it against the `state` without I/O; `azure` talks to ARM and
//! `emulator` stands in for it (tests and `--emulator`); `render` is the only code that writes to
//! the terminal. `graph`, `azure` and `ssh` import nothing from the rest, so each could become its
//! own crate; `emulator` imports one type, `engine::reach::SshEndpoint`.
//! tests/layering.rs holds the code to the table of allowed imports in docs/architecture.md.
//!
//! What a library user needs is public: the manifest loader, the plan, the operations and their
//! connection, the state and its backends, the emulator and the spec validator for tests, and
//! the clients they use. Helpers of one layer (`atomic_file`, `log`, the engine's execution,
//! preflight, bodies, limiter and SAS modules) are crate-private.

pub mod addr;
mod args;
pub(crate) mod atomic_file;
pub mod azure;
pub mod catalog;
mod cli;
pub mod connect;
pub mod diag;
pub mod emulator;
pub mod engine;
pub mod graph;
pub mod kubeschema;
pub(crate) mod log;
pub mod manifest;
pub mod model;
pub mod openapi;
pub mod plan;
pub mod render;
pub mod secret;
pub mod ssh;
pub mod state;
pub mod steps;
pub mod storage;

pub use cli::run;
