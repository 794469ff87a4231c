//! The command line: parse arguments, run one command, print its error once, pick the exit code.
//!
//! Each command lives in its own file and returns `Result<Outcome, anyhow::Error>`; errors from
//! every layer meet here and are printed in exactly one place ([`run`]), which is also the only
//! place that chooses the exit code. anyhow is used in this module only (style.md habit 1).

mod apply_cmd;
mod emulator_cmd;
mod kube_cmd;
mod manifest_cmds;
mod ops_cmds;
mod output;
mod plan_cmd;
mod report_cmd;
mod request;
mod run_cmd;
mod sizes_cmd;
mod ssh_cmds;
mod state_cmds;
pub(crate) mod terminal;

use std::ffi::OsString;

use clap::Parser;

use crate::engine::op;
use crate::engine::power::PowerChange;

use crate::args;
pub use crate::args::{Cli, ColorChoice, Command};
pub use output::Output;

/// How a command finished, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything went as asked (exit 0).
    Success,
    /// `plan --detailed-exitcode` found changes (exit 2).
    Changes,
    /// A check found problems and already reported them (exit 1), e.g. `fmt --check`.
    Failed,
    /// Interrupted by Ctrl-C after saving what was done (exit 130, as shells report SIGINT).
    Interrupted,
    /// A remote job's own exit status (`dsinfra run`), passed on as it is.
    Code(i32),
}

/// An error that was already shown to the user (diagnostics print themselves with their source);
/// [`run`] only sets the exit code for it.
#[derive(Debug, thiserror::Error)]
#[error("{count} problem(s) reported above")]
pub struct AlreadyReported {
    /// How many errors were reported.
    pub count: usize,
}

/// Run dsinfra with the process arguments; returns the exit code.
pub fn run() -> i32 {
    run_with(std::env::args_os())
}

/// Run dsinfra with explicit arguments (the first is the program name); returns the exit code.
pub fn run_with<I: IntoIterator<Item = OsString>>(argv: I) -> i32 {
    let argv: Vec<String> = argv
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cli = match Cli::try_parse_from(args::normalise_terraform_flags(argv)) {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2);
            // usage errors are exit 1 here, like every other error, so scripts see one code.
            let _ = err.print();
            return i32::from(err.use_stderr());
        }
    };
    let out = Output::new(cli.color);
    if let Err(err) = crate::log::init(cli.log_file.as_deref(), out.stderr_colour()) {
        out.error(&err.into());
        return 1;
    }
    match dispatch(cli.command, &out) {
        Ok(Outcome::Success) => 0,
        Ok(Outcome::Changes) => 2,
        Ok(Outcome::Failed) => 1,
        Ok(Outcome::Interrupted) => 130,
        Ok(Outcome::Code(code)) => code,
        Err(err) if is_interrupted(&err) => {
            // Ctrl-C before the engine ran: the command unwound (its lock released) and says
            // so in one line, with the shell's exit code for SIGINT.
            out.note(&err.to_string());
            130
        }
        Err(err) => {
            if !is_reported(&err) {
                out.error(&err);
            }
            1
        }
    }
}

/// Ctrl-C before anything was changed, from the CLI's own waits or from an operation.
fn is_interrupted(err: &anyhow::Error) -> bool {
    err.downcast_ref::<op::Interrupted>().is_some()
        || matches!(
            err.downcast_ref::<op::Error>(),
            Some(op::Error::Interrupted(_))
        )
}

/// Problems already shown (diagnostics, failed resources, block outcomes): only the exit code
/// is left.
fn is_reported(err: &anyhow::Error) -> bool {
    err.downcast_ref::<AlreadyReported>().is_some()
        || matches!(
            err.downcast_ref::<op::Error>(),
            Some(op::Error::Reported { .. })
        )
}

/// The CLI's one way into async code: one runtime for the command, and every Ctrl-C turned into
/// a press of the operation's [`op::Cancel`] (handled in one place for every operation; what a
/// press means is the operation's business, see `engine::op::cancel`). Listening starts before
/// `work` is first polled, so a press during its first steps is not lost.
fn block_on<F>(work: impl FnOnce(op::Cancel) -> F) -> anyhow::Result<Outcome>
where
    F: std::future::Future<Output = anyhow::Result<Outcome>>,
{
    use anyhow::Context as _;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    let (canceller, cancel) = op::cancel::pair();
    let presses = {
        let _entered = runtime.enter();
        ctrl_c_presses()
    };
    if let Some(mut presses) = presses {
        runtime.spawn(async move {
            while presses.recv().await.is_some() {
                canceller.press();
            }
        });
    }
    let result = runtime.block_on(async {
        let result = work(cancel).await;
        // A state lock dropped on a failure path is released in the background: wait for it,
        // so the next command finds the state free (an explicit unlock already waited).
        crate::storage::settle_releases(std::time::Duration::from_secs(10)).await;
        result
    });
    // Whatever still runs (a power action sent, a session closing) is not waited for: the
    // operation has saved what finished and said what goes on in Azure.
    runtime.shutdown_background();
    result
}

/// Ctrl-C presses, counted from the moment the stream is made; `None` where signals cannot be
/// handled (the default SIGINT then stays).
#[cfg(unix)]
fn ctrl_c_presses() -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok()
}

/// Ctrl-C presses, counted from the moment the stream is made; `None` where signals cannot be
/// handled.
#[cfg(windows)]
fn ctrl_c_presses() -> Option<tokio::signal::windows::CtrlC> {
    tokio::signal::windows::ctrl_c().ok()
}

fn dispatch(command: Command, out: &Output) -> anyhow::Result<Outcome> {
    match command {
        Command::Init(args) => manifest_cmds::init(&args, out),
        Command::Validate(args) => manifest_cmds::validate(&args, out),
        Command::Fmt(args) => manifest_cmds::fmt(&args, out),
        Command::Graph(args) => manifest_cmds::graph(&args, out),
        Command::Plan(args) => block_on(|cancel| plan_cmd::plan(&args, out, cancel)),
        Command::Show(args) => block_on(|_| plan_cmd::show(&args, out)),
        Command::Apply(args) => block_on(|cancel| apply_cmd::apply(&args, out, cancel)),
        Command::Destroy(args) => block_on(|cancel| apply_cmd::destroy(&args, out, cancel)),
        Command::Park(args) => {
            block_on(|cancel| ops_cmds::park(&args, out, PowerChange::Park, cancel))
        }
        Command::Unpark(args) => {
            block_on(|cancel| ops_cmds::park(&args, out, PowerChange::Unpark, cancel))
        }
        Command::Status(args) => block_on(|cancel| ops_cmds::status(&args, out, cancel)),
        Command::Output(args) => block_on(|cancel| ops_cmds::output(&args, out, cancel)),
        Command::Ssh(args) => block_on(|cancel| ssh_cmds::ssh(&args, out, cancel)),
        Command::SshConfig(args) => block_on(|cancel| ssh_cmds::ssh_config(&args, out, cancel)),
        Command::Kubectl(args) => block_on(|cancel| kube_cmd::kubectl(&args, out, cancel)),
        Command::Run(args) => block_on(|cancel| run_cmd::run(&args, out, cancel)),
        Command::Runs(args) => block_on(|cancel| run_cmd::runs(&args, out, cancel)),
        Command::Logs(args) => block_on(|cancel| run_cmd::logs(&args, out, cancel)),
        Command::Sizes(args) => sizes_cmd::sizes(&args, out),
        Command::Report(args) => block_on(|cancel| report_cmd::report(&args, out, cancel)),
        Command::State(args::StateCommands::Inspect(command)) => {
            block_on(|_| ops_cmds::state(&command, out))
        }
        Command::State(args::StateCommands::Pull(args)) => {
            block_on(|cancel| state_cmds::pull(&args, out, cancel))
        }
        Command::State(args::StateCommands::Push(args)) => {
            block_on(|_| state_cmds::push(&args, out))
        }
        Command::ForceUnlock(args) => {
            block_on(|cancel| state_cmds::force_unlock(&args, out, cancel))
        }
        Command::Emulator(args) => block_on(|cancel| emulator_cmd::emulator(&args, out, cancel)),
    }
}
