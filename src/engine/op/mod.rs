//! The operations layer: `plan`, `apply`, `destroy`, `park`, `unpark`, `status`/`refresh` and
//! `output`, each a function that takes one validated request, reports what happens through a
//! [`Listener`], asks an [`Approver`] before it changes anything, stops when its [`Cancel`] is
//! pressed, and returns one outcome (terraform's `backend/local`: a request in, events out, a
//! result back). The CLI only turns arguments into requests and renders events and outcomes;
//! tests call the same functions with their own listener, approver and canceller.
//!
//! What every operation shares is here: the connection it works through ([`Arm`]), the events
//! ([`OpEvent`]), the question ([`Question`]) and the one error type of the layer ([`Error`]).

pub mod apply;
pub mod cancel;
pub mod endpoints;
pub mod output;
pub mod park;
pub mod place;
pub mod plan;
pub mod prepare;
pub mod report;
pub mod run;
pub mod sizes;
pub mod status;
pub mod steps;
mod walk;

use std::sync::Arc;

pub use apply::{
    ApplyOutcome, ApplyRequest, Manifest, Reopened, SavedRequest, Walked, apply, apply_saved,
    open_saved,
};
pub use cancel::{Cancel, Canceller, Interrupted};
pub use output::{OutputOutcome, OutputRequest, OutputValue, output};
pub use park::{ParkOutcome, ParkRequest, park};
pub use place::Place;
pub use plan::{Live, PlanRequest, Planned, plan};
pub use prepare::{PrepareError, Prepared, prepare};
pub use report::{ReportOutcome, ReportRequest, report};
pub use run::{LogsRequest, Lookup, RunOutcome, RunRequest, RunTarget, Where, logs, run, runs};
pub use sizes::learn_sizes;
pub use status::{
    ClusterNodes, ClusterStatus, IdleStatus, IdleView, StatusOutcome, StatusRequest, idle_statuses,
    status,
};
pub use steps::{StepsJob, StepsOptions};

/// How post-boot steps run (`--steps`).
pub use crate::engine::post_boot::StepsMode;
pub use walk::GRACE;

use crate::azure::{ArmClient, ArmError};
use crate::diag::{Diagnostic, SourceMap};
use crate::engine::events::{Event, LroBridge};
use crate::engine::limiter::Limiter;
use crate::engine::post_boot::BlockOutcome;
use crate::plan::Plan;
use crate::state::StateError;

/// The connection every operation works through, made once per command (`crate::connect`).
///
/// Both clients are gated by the one [`Limiter`] (`--parallelism`), so every ARM request of every
/// operation (refresh, preflight, apply's walk, park's power actions, status's reads) counts
/// against the same bound.
#[derive(Debug, Clone)]
pub struct Arm {
    /// For reads and quick calls: refresh, preflight, Resource SKUs, listKeys.
    pub client: ArmClient,
    /// For the engine's changes: against an emulator it waits at the emulator's latency scale
    /// and reports long-running-operation progress to [`Arm::bridge`]; against Azure it is
    /// [`Arm::client`].
    pub engine_client: ArmClient,
    /// Carries long-running-operation progress from [`Arm::engine_client`] to the events.
    pub bridge: Arc<LroBridge>,
    /// The command's one bound on ARM requests in flight.
    pub limiter: Arc<Limiter>,
    /// The subscription all ids live in.
    pub subscription: String,
    /// Where it goes: Azure, or an emulator with its pace and SSH endpoint map (injected by
    /// `connect`, so no operation asks which).
    pub place: Arc<dyn Place>,
}

/// Opens the state of an applied manifest (local, or its `backend` block's blob), taking its lock
/// for `dsinfra MANIFEST`: what the day-two operations (park, unpark, status, state) act on.
///
/// # Errors
///
/// The state is locked or unreadable, or there is none yet (nothing was applied).
pub async fn open_applied(
    manifest: &std::path::Path,
    backend: Option<&crate::model::BackendConfig>,
) -> Result<(Box<dyn crate::state::Backend + Send>, crate::state::State), Error> {
    let mut opened = crate::state::open_backend(
        manifest,
        backend,
        &format!("dsinfra {}", manifest.display()),
    )
    .await?;
    let state = opened.load().await?.ok_or_else(|| {
        Error::Failed(format!(
            "{} has no state yet: nothing was applied (run `dsinfra apply {}` first)",
            manifest.display(),
            manifest.display()
        ))
    })?;
    Ok((opened, state))
}

/// What an operation reports while it works. The CLI renders these (`render`); tests collect
/// them. Borrowed: a listener that keeps one clones what it needs.
#[derive(Debug)]
pub enum OpEvent<'a> {
    /// A line for the user (what was refreshed, a fallback taken, why something was skipped).
    Note(&'a str),
    /// Located warnings or errors (manifest warnings, preflight problems, plan errors). When
    /// they include errors the operation then fails with [`Error::Reported`].
    Diagnostics {
        /// The diagnostics.
        diagnostics: &'a [Diagnostic],
        /// The sources they point into.
        sources: &'a SourceMap,
    },
    /// The plan, before approval is asked.
    Plan(&'a Plan),
    /// Changes to Azure begin (apply's walk, park's power actions): [`OpEvent::Resource`]
    /// events follow until [`OpEvent::WorkFinished`].
    WorkStarted,
    /// Progress of one resource (the engine's events; apply, destroy, park and unpark alike).
    Resource(&'a Event),
    /// The changes ended (done, failed or interrupted).
    WorkFinished,
    /// A post-boot step's runner event.
    Step(&'a crate::steps::Event<'a>),
    /// A block's steps ended; `map_hint` says how to give an emulated VM an SSH endpoint.
    Block {
        /// What happened.
        outcome: &'a BlockOutcome,
        /// The steps mode it ran in.
        mode: StepsMode,
        /// How to map an SSH endpoint, for a block that could not be reached.
        map_hint: &'a str,
    },
    /// A line a command printed on a node (`dsinfra run`, `dsinfra logs`).
    Output {
        /// The node, when lines of several nodes are shown (they are prefixed with it).
        node: Option<&'a str>,
        /// Which stream it came from.
        stream: crate::ssh::Stream,
        /// The line, without its newline.
        line: &'a str,
    },
}

/// Where an operation's events go: shared, because steps report from their own tasks.
pub type Events = Arc<dyn Listener>;

/// Receives an operation's events. Called from the operation's tasks, so it must not block for
/// long.
pub trait Listener: Send + Sync {
    /// One event.
    fn event(&self, event: OpEvent<'_>);
}

/// A listener that drops everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Listener for Quiet {
    fn event(&self, _event: OpEvent<'_>) {}
}

/// What an operation asks before it changes anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The operation (`apply`, `destroy`, `park`, `unpark`).
    pub verb: &'static str,
    /// The question, whole ("Do you want to apply these changes in Azure?").
    pub text: String,
}

/// Says yes or no to a [`Question`]. The CLI's implementation prompts on the terminal (or
/// refuses without one); `--auto-approve` and tests use [`AutoApprove`].
pub trait Approver: Send + Sync {
    /// The answer.
    ///
    /// # Errors
    ///
    /// The answer could not be had (no terminal, Ctrl-C at the prompt: [`Error::Interrupted`]).
    fn approve(&self, question: &Question) -> Result<bool, Error>;
}

/// Approves everything (`--auto-approve`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoApprove;

impl Approver for AutoApprove {
    fn approve(&self, _question: &Question) -> Result<bool, Error> {
        Ok(true)
    }
}

/// The operations layer's one error type; the CLI prints it once.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Problems were already reported as [`OpEvent::Diagnostics`] (or block outcomes, or
    /// failed resources): only the exit code is left to choose.
    #[error("{count} problem(s) reported above")]
    Reported {
        /// How many.
        count: usize,
    },
    /// Ctrl-C before anything was changed.
    #[error(transparent)]
    Interrupted(#[from] Interrupted),
    /// ARM refused or could not be reached.
    #[error(transparent)]
    Arm(#[from] ArmError),
    /// The state could not be read, locked or saved.
    #[error(transparent)]
    State(#[from] StateError),
    /// Anything else, said whole for the user (what failed and what to do).
    #[error("{0}")]
    Failed(String),
}
