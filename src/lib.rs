//! dsinfra: declarative data-science experiment infrastructure on Azure.
//!
//! The library holds everything; `main.rs` only maps [`run`]'s result to an exit code. The module
//! map (see docs/architecture.md) follows terraform's layering: `cli` parses arguments and drives
//! the rest; `manifest` turns HCL into a [`model::Desired`]; `plan` diffs it against the `state`
//! without I/O; `azure` talks to ARM and `emulator` stands in for it; `render` is the only code
//! that writes to the terminal. `graph`, `azure` and `ssh` import nothing from the rest, so each
//! could become its own crate; `emulator` imports one type, `engine::reach::SshEndpoint`.
//! tests/layering.rs holds the code to the table of allowed imports in docs/architecture.md.

pub mod addr;
pub mod atomic_file;
pub mod azure;
pub mod catalog;
pub mod cli;
pub mod connect;
pub mod diag;
pub mod emulator;
pub mod engine;
pub mod graph;
pub mod log;
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
