//! The command line: parse arguments, run one command, print its error once, pick the exit code.
//!
//! Each command lives in its own file and returns `Result<Outcome, anyhow::Error>`; errors from
//! every layer meet here and are printed in exactly one place ([`run`]), which is also the only
//! place that chooses the exit code. anyhow is used in this module only (style.md habit 1).

mod args;
mod output;

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
            return if err.use_stderr() { 1 } else { 0 };
        }
    };
    let out = Output::new(cli.color);
    match dispatch(cli.command, &out) {
        Ok(Outcome::Success) => 0,
        Ok(Outcome::Changes) => 2,
        Ok(Outcome::Failed) => 1,
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
        Command::Init(args) => init(&args, out),
        Command::Validate(args) => validate(&args, out),
        Command::Fmt(args) => fmt(&args, out),
        Command::Graph(args) => graph(&args, out),
        Command::Plan(args) => plan(&args, out),
        Command::Show(args) => show(&args, out),
    }
}

fn init(_args: &args::InitArgs, _out: &Output) -> anyhow::Result<Outcome> {
    anyhow::bail!("`dsinfra init` is not available in this build yet")
}

fn validate(_args: &args::ManifestArgs, _out: &Output) -> anyhow::Result<Outcome> {
    anyhow::bail!("`dsinfra validate` is not available in this build yet")
}

fn fmt(_args: &args::FmtArgs, _out: &Output) -> anyhow::Result<Outcome> {
    anyhow::bail!("`dsinfra fmt` is not available in this build yet")
}

fn graph(_args: &args::ManifestArgs, _out: &Output) -> anyhow::Result<Outcome> {
    anyhow::bail!("`dsinfra graph` is not available in this build yet")
}

fn plan(_args: &args::PlanArgs, _out: &Output) -> anyhow::Result<Outcome> {
    anyhow::bail!("`dsinfra plan` is not available in this build yet")
}

fn show(_args: &args::ShowArgs, _out: &Output) -> anyhow::Result<Outcome> {
    anyhow::bail!("`dsinfra show` is not available in this build yet")
}
