//! Post-boot steps: content hashes, node markers, barriers, and the runner that executes an
//! ordered list of steps on every node of a VM or cluster over [`crate::ssh`].
//!
//! The module has its own small input types ([`StepSpec`], [`NodeSpec`]); the engine converts
//! the manifest's `model::Step` into them after rendering templates. The built-in step library
//! is separate. See docs/ssh.md for the design.

mod hash;
pub mod library;
mod log;
mod marker;
mod progress;
mod report;
pub mod results;
mod runner;
mod spec;

pub use hash::step_hash;
pub use log::{REDACTED, Redactor};
pub use marker::{Decision, Known, Marker, NodeState, REBOOT_EXIT, RunReason, SkipReason, decide};
pub use progress::{Gate, Progress, applies, barrier, gate};
pub use report::{NodeReport, NodeStatus, RunReport, StepOutcome, StepReport};
pub use runner::{CHECK_TIMEOUT, DEFAULT_REBOOT_COMMAND, Error, Event, EventSink, RunOptions, run};
pub use spec::{
    DEFAULT_MARKER_DIR, FileContent, Hop, NodeSpec, RunPolicy, Scope, SecretInput, StepFile,
    StepSpec,
};
