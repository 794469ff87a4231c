//! `dsinfra run`, `dsinfra runs` and `dsinfra logs` (`engine::op::run`): arguments to requests,
//! outcomes to text and the job's exit code. Node output is on stdout (stderr for what nodes
//! wrote there); dsinfra's own lines (summary, park) are on stderr, so `> out.txt` keeps only
//! the job's output.

use super::Outcome;
use super::output::Output;
use super::request::{load, read_state};
use super::terminal::{ProgressOn, Terminal};
use crate::args::{ConnectArgs, LogsArgs, ManifestArgs, RunArgs, RunsArgs};
use crate::connect::{Connection, connect};
use crate::engine::op::{self, Cancel, Events};
use crate::manifest::Loaded;
use crate::render::{run as view, status};

/// `dsinfra run`.
pub async fn run(args: &RunArgs, out: &Output, cancel: Cancel) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    let manifest = &args.manifest.manifest;
    let state = read_state(manifest, loaded.backend.as_ref(), "run").await?;
    let conn = connection(&args.connect, &args.manifest, &loaded, &cancel).await?;
    let request = op::RunRequest {
        at: op::Where {
            desired: &loaded.desired,
            manifest,
            state,
            arm: &conn,
            identity: args.identity.clone(),
        },
        target: op::RunTarget {
            name: args.target.clone(),
            all: args.all,
        },
        command: args.command.clone(),
        detach: args.detach,
        park_after: args.park_after.then(|| op::run::ParkAfter {
            sources: &loaded.sources,
            steps: op::StepsOptions {
                identity: args.identity.clone(),
                ..op::StepsOptions::default()
            },
            backend: loaded.backend.as_ref(),
        }),
        recover: args.recover.then(|| op::run::Recover {
            sources: &loaded.sources,
            steps: op::StepsOptions {
                identity: args.identity.clone(),
                ..op::StepsOptions::default()
            },
            backend: loaded.backend.as_ref(),
            max_restarts: args.max_restarts,
            backoff: recover_backoff(),
            tries: RECOVER_TRIES,
        }),
        on_preempt: args.on_preempt.clone(),
        checkpoint_dir: args.checkpoint_dir.clone(),
    };
    let events: Events = Terminal::new(out, ProgressOn::Job);
    let outcome = op::run(request, &events, &cancel).await?;
    out.message(&view::summary(&outcome.record));
    if outcome.record.detached && outcome.record.exit().is_none() {
        let recovers = if outcome.record.recover.is_some() {
            ", which also brings evicted spot nodes back and starts the job again"
        } else {
            ""
        };
        out.note(&format!(
            "follow it with `dsinfra logs {} {} -f`{recovers}",
            manifest.display(),
            outcome.record.id
        ));
    }
    if let Some(park) = outcome.park {
        match park {
            Ok(parked) if parked.sent.is_empty() => out.message(&status::cost_lines(&parked.after)),
            Ok(parked) => {
                if !parked.failures.is_empty() {
                    out.message(&status::power_failures(&parked.failures));
                }
                out.message(&status::cost_change(&parked.before, &parked.after));
            }
            Err(e) => out.error(&anyhow::Error::new(e).context("--park-after: the park failed")),
        }
    }
    if outcome.interrupted {
        return Ok(Outcome::Interrupted);
    }
    Ok(match outcome.record.exit() {
        Some(0) | None => Outcome::Success,
        Some(code) => Outcome::Code(code),
    })
}

/// How many times `--recover` tries to bring evicted nodes back while Azure has no capacity:
/// with the default backoff, about 24 minutes of waiting in all.
const RECOVER_TRIES: u32 = 8;

/// The first wait after a capacity refusal: 15 s, or `DSINFRA_RECOVER_BACKOFF_SECS` (tests).
fn recover_backoff() -> std::time::Duration {
    let secs = std::env::var("DSINFRA_RECOVER_BACKOFF_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(15);
    std::time::Duration::from_secs(secs)
}

/// `dsinfra runs`.
pub async fn runs(args: &RunsArgs, out: &Output, cancel: Cancel) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    let events: Events = Terminal::new(out, ProgressOn::Stderr);
    let lookup = lookup(&args.manifest, &args.connect, &loaded, out, &cancel).await;
    let conn_and_state = lookup.as_ref();
    let request = op::Lookup {
        manifest: &args.manifest.manifest,
        at: where_(
            conn_and_state,
            &loaded,
            &args.manifest,
            args.identity.as_ref(),
        ),
    };
    let records = op::runs(request, &events).await?;
    if records.is_empty() {
        out.note("no run is recorded yet: start one with `dsinfra run`");
    } else {
        out.result(&view::runs_table(&records, chrono::Utc::now()));
    }
    Ok(Outcome::Success)
}

/// `dsinfra logs`.
pub async fn logs(args: &LogsArgs, out: &Output, cancel: Cancel) -> anyhow::Result<Outcome> {
    let loaded = load(&args.manifest, out)?;
    let events: Events = Terminal::new(out, ProgressOn::Job);
    let lookup = lookup(&args.manifest, &args.connect, &loaded, out, &cancel).await;
    let request = op::LogsRequest {
        lookup: op::Lookup {
            manifest: &args.manifest.manifest,
            at: where_(
                lookup.as_ref(),
                &loaded,
                &args.manifest,
                args.identity.as_ref(),
            ),
        },
        id: args.id.clone(),
        follow: args.follow,
        // Used only for a detached run started with --recover, with that run's own limits.
        recover: args.follow.then(|| op::run::Recover {
            sources: &loaded.sources,
            steps: op::StepsOptions {
                identity: args.identity.clone(),
                ..op::StepsOptions::default()
            },
            backend: loaded.backend.as_ref(),
            max_restarts: 0,
            backoff: recover_backoff(),
            tries: RECOVER_TRIES,
        }),
    };
    let record = op::logs(request, &events, &cancel).await?;
    if record.detached || args.follow {
        let exit = record
            .exit()
            .map_or_else(String::new, |c| format!(", exit {c}"));
        out.note(&format!(
            "run {}: {}{exit}",
            record.id,
            record.state().word()
        ));
    }
    Ok(Outcome::Success)
}

/// The connection, interruptible.
async fn connection(
    connect_args: &ConnectArgs,
    manifest: &ManifestArgs,
    loaded: &Loaded,
    cancel: &Cancel,
) -> anyhow::Result<Connection> {
    Ok(cancel
        .interruptible(connect(
            &connect_args.options(),
            &manifest.manifest,
            &loaded.desired.azure,
        ))
        .await??)
}

/// The state and a connection for asking the head, or `None` (said why) when either is
/// missing: `runs` and attached runs' `logs` work from the records alone.
async fn lookup(
    manifest: &ManifestArgs,
    connect_args: &ConnectArgs,
    loaded: &Loaded,
    out: &Output,
    cancel: &Cancel,
) -> Option<(Connection, crate::state::State)> {
    let found = async {
        let state = read_state(&manifest.manifest, loaded.backend.as_ref(), "runs").await?;
        let conn = connection(connect_args, manifest, loaded, cancel).await?;
        anyhow::Ok((conn, state))
    };
    match found.await {
        Ok(found) => Some(found),
        Err(e) => {
            out.note(&format!("the head cannot be asked: {e:#}"));
            None
        }
    }
}

fn where_<'a>(
    found: Option<&'a (Connection, crate::state::State)>,
    loaded: &'a Loaded,
    manifest: &'a ManifestArgs,
    identity: Option<&std::path::PathBuf>,
) -> Option<op::Where<'a>> {
    found.map(|(conn, state)| op::Where {
        desired: &loaded.desired,
        manifest: &manifest.manifest,
        state: state.clone(),
        arm: conn,
        identity: identity.cloned(),
    })
}
