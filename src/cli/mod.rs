//! The command line: parse arguments, run one command, print its error once, pick the exit code.
//!
//! Each command lives in its own file and returns `Result<Outcome, anyhow::Error>`; errors from
//! every layer meet here and are printed in exactly one place ([`run`]), which is also the only
//! place that chooses the exit code. anyhow is used in this module only (style.md habit 1).

mod apply_cmd;
mod args;
pub mod connect;
mod emulator_cmd;
mod manifest_cmds;
mod ops_cmds;
mod output;
mod plan_cmd;
mod state_cmds;

use std::ffi::OsString;

use clap::Parser;

pub use args::{Cli, ColorChoice, Command};
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
    match dispatch(cli.command, &out) {
        Ok(Outcome::Success) => 0,
        Ok(Outcome::Changes) => 2,
        Ok(Outcome::Failed) => 1,
        Ok(Outcome::Interrupted) => 130,
        Err(err) => {
            if err.downcast_ref::<AlreadyReported>().is_none() {
                out.error(&err);
            }
            1
        }
    }
}

fn dispatch(command: Command, out: &Output) -> anyhow::Result<Outcome> {
    match command {
        Command::Init(args) => manifest_cmds::init(&args, out),
        Command::Validate(args) => manifest_cmds::validate(&args, out),
        Command::Fmt(args) => manifest_cmds::fmt(&args, out),
        Command::Graph(args) => manifest_cmds::graph(&args, out),
        Command::Plan(args) => plan_cmd::plan(&args, out),
        Command::Show(args) => plan_cmd::show(&args, out),
        Command::Apply(args) => apply_cmd::apply(&args, out),
        Command::Destroy(args) => apply_cmd::destroy(&args, out),
        Command::Park(args) => ops_cmds::park(&args, out, crate::engine::power::PowerChange::Park),
        Command::Unpark(args) => {
            ops_cmds::park(&args, out, crate::engine::power::PowerChange::Unpark)
        }
        Command::Status(args) => ops_cmds::status(&args, out),
        Command::Output(args) => ops_cmds::output(&args, out),
        Command::State(args::StateCommands::Inspect(command)) => ops_cmds::state(&command, out),
        Command::State(args::StateCommands::Pull(args)) => state_cmds::pull(&args, out),
        Command::State(args::StateCommands::Push(args)) => state_cmds::push(&args, out),
        Command::ForceUnlock(args) => state_cmds::force_unlock(&args, out),
        Command::Emulator(args) => emulator_cmd::emulator(&args, out),
    }
}
