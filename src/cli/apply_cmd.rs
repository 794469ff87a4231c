//! `apply` and `destroy`: arguments to [`op::apply`] (or [`op::apply_saved`] for `apply
//! PLANFILE`), events drawn by the [`Terminal`], approval asked by the [`Prompt`]
//! (`--auto-approve` skips it; without a terminal and without the flag it is an error, never a
//! hang), and the outcome turned into the summary and an exit code.
//!
//! Ctrl-C once stops new work, lets running operations finish (at most [`op::GRACE`]), saves and
//! exits 130; a second Ctrl-C exits at once, after waiting for a state save in progress, if any
//! (`engine::op::walk`). Before anything is changed, Ctrl-C ends the command with nothing changed.

use std::path::Path;

use anyhow::{Context as _, bail};

use super::request::{load_connected, load_saved, manifest_of, read_saved, read_state};
use super::terminal::{ProgressOn, Prompt, Terminal};
use super::{Outcome, Output};
use crate::addr::Address;
use crate::args::{ApplyArgs, ConnectArgs, DestroyArgs, ManifestArgs};
use crate::connect::connect;
use crate::engine::op::{self, ApplyOutcome, StepsOptions};
use crate::plan::Mode;
use crate::render::progress::summary;

/// What one run of `apply` or `destroy` does.
struct Job<'a> {
    manifest: &'a ManifestArgs,
    connect: &'a ConnectArgs,
    auto_approve: bool,
    targets: &'a [String],
    mode: Mode,
    steps: StepsOptions,
}

/// `dsinfra apply MANIFEST|PLANFILE`
pub async fn apply(args: &ApplyArgs, out: &Output, cancel: op::Cancel) -> anyhow::Result<Outcome> {
    if is_saved_plan(&args.manifest.manifest)? {
        return apply_saved(args, out, &cancel).await;
    }
    let job = Job {
        manifest: &args.manifest,
        connect: &args.connect,
        auto_approve: args.auto_approve,
        targets: &args.targets,
        mode: Mode::Normal,
        steps: args.steps.options(),
    };
    run(job, out, &cancel).await
}

/// `dsinfra destroy MANIFEST`
pub async fn destroy(
    args: &DestroyArgs,
    out: &Output,
    cancel: op::Cancel,
) -> anyhow::Result<Outcome> {
    let job = Job {
        manifest: &args.manifest,
        connect: &args.connect,
        auto_approve: args.auto_approve,
        targets: &args.targets,
        mode: Mode::Destroy {
            keep_data: args.keep_data,
        },
        // Destroy runs no steps; `-i` logs in to stop BeeOND first.
        steps: StepsOptions {
            identity: args.identity.clone(),
            ..StepsOptions::default()
        },
    };
    run(job, out, &cancel).await
}

/// A manifest ends in `.hcl`; anything else that reads as JSON is taken for a saved plan.
fn is_saved_plan(path: &Path) -> anyhow::Result<bool> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("hcl"))
    {
        return Ok(false);
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    Ok(text.trim_start().starts_with('{'))
}

async fn run(job: Job<'_>, out: &Output, cancel: &op::Cancel) -> anyhow::Result<Outcome> {
    let events: op::Events = Terminal::new(out, ProgressOn::Stdout);
    let path = &job.manifest.manifest;
    let options = job.connect.options();
    let (loaded, conn) = load_connected(job.manifest, out, &events, cancel, async |azure| {
        connect(&options, path, azure).await
    })
    .await?;
    let targets = job
        .targets
        .iter()
        .map(|t| t.parse::<Address>())
        .collect::<Result<Vec<_>, _>>()?;
    let request = op::ApplyRequest {
        manifest: manifest_of(&loaded, path),
        arm: &conn,
        mode: job.mode,
        targets,
        steps: job.steps,
    };
    let approver = Prompt {
        auto_approve: job.auto_approve,
    };
    let outcome = op::apply(request, &events, &approver, cancel).await?;
    if matches!(outcome, ApplyOutcome::Walked(_) | ApplyOutcome::NothingToDo) {
        write_kubeconfigs(path, loaded.backend.as_ref(), &conn, out).await;
    }
    finish(outcome, out)
}

/// After an apply or a destroy: the user kubeconfig of each AKS cluster the state holds, next to
/// the state (docs/aks.md), and none of a cluster that is gone. What goes wrong here is said, and
/// never fails the apply.
async fn write_kubeconfigs(
    path: &Path,
    backend: Option<&crate::model::BackendConfig>,
    conn: &crate::connect::Connection,
    out: &Output,
) {
    let Ok(state) = read_state(path, backend, "apply").await else {
        return;
    };
    let Ok(dir) = crate::state::LocalBackend::state_dir(path) else {
        return;
    };
    for gone in crate::engine::kube::remove_stale(&state, &dir) {
        out.note(&format!("removed {}: its cluster is gone", gone.display()));
    }
    if crate::engine::kube::clusters(&state).is_empty() {
        return;
    }
    for line in crate::engine::kube::write_all(&conn.client, &state, &dir).await {
        out.note(&line);
    }
}

/// `apply PLANFILE`: exactly the saved changes, after checking the plan is still current.
async fn apply_saved(
    args: &ApplyArgs,
    out: &Output,
    cancel: &op::Cancel,
) -> anyhow::Result<Outcome> {
    let path = &args.manifest.manifest;
    let saved = read_saved(path)?;
    let Some(source) = &saved.source else {
        bail!(
            "{} does not say which manifest it was made from, so it cannot be applied: run `dsinfra plan -out` again",
            path.display()
        );
    };
    if !args.targets.is_empty() {
        bail!(
            "-target cannot narrow a saved plan: it is applied exactly as saved; make a new plan with -target instead"
        );
    }
    let loaded = load_saved(source, &args.manifest.vars, out)?;
    let manifest = manifest_of(&loaded, &source.manifest);
    let reopened = op::open_saved(&saved, &manifest, "apply").await?;
    let conn = cancel
        .interruptible(connect(
            &args.connect.options(),
            &source.manifest,
            &loaded.desired.azure,
        ))
        .await??;
    let request = op::SavedRequest {
        saved: &saved,
        manifest,
        reopened,
        arm: &conn,
        steps: args.steps.options(),
    };
    let events: op::Events = Terminal::new(out, ProgressOn::Stdout);
    let outcome = op::apply_saved(request, &events, cancel).await?;
    finish(outcome, out)
}

/// The summary of a walk, and the exit code of an outcome.
fn finish(outcome: ApplyOutcome, out: &Output) -> anyhow::Result<Outcome> {
    match outcome {
        ApplyOutcome::NothingToDo => Ok(Outcome::Success),
        ApplyOutcome::Declined => Ok(Outcome::Failed),
        ApplyOutcome::Abandoned => Ok(Outcome::Interrupted),
        ApplyOutcome::Walked(walked) => {
            out.result(&summary(walked.verb, &walked.report, walked.cost.as_ref()));
            if walked.interrupted {
                Ok(Outcome::Interrupted)
            } else if walked.failed > 0 {
                Err(op::Error::Reported {
                    count: walked.failed,
                }
                .into())
            } else {
                Ok(Outcome::Success)
            }
        }
    }
}
