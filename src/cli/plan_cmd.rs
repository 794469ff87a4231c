//! `plan` and `show`: diff the manifest against the experiment's state and render the result.
//!
//! With a connection (`--emulator`, `--endpoint`, or Azure when a subscription resolves) the plan
//! first refreshes the state from ARM (drift: resources deleted or changed outside dsinfra, VM
//! power states), resolves `sizes = [...]` fallbacks against quota, and after planning runs the
//! quota and SKU preflight; its problems are located diagnostics and fail the plan. Without one it
//! plans from the saved state alone and says plainly that refresh and the preflight were skipped.
//! The refreshed state is not saved: planning changes nothing.

use std::fs;

use anyhow::Context as _;
use chrono::Utc;

use super::args::ConnectArgs;
use super::args::{PlanArgs, ShowArgs};
use super::request::load;
use super::{AlreadyReported, Outcome, Output};
use crate::addr::Address;
use crate::connect::Connection;
use crate::engine::op::Target;
use crate::engine::{preflight, refresh};
use crate::model::AzureSettings;
use crate::plan::{self, Mode, Plan, PlanOptions, PlanSource};
use crate::render;
use crate::state::{self, State};

/// `dsinfra plan`
pub fn plan(args: &PlanArgs, out: &Output) -> anyhow::Result<Outcome> {
    let targets = args
        .targets
        .iter()
        .map(|t| t.parse::<Address>())
        .collect::<Result<Vec<_>, _>>()?;
    let loaded = super::live_sizes::load_connected(&args.manifest, &args.connect, out)?;
    let mut desired = loaded.desired.clone();
    let mut backend = state::open_backend(
        &args.manifest.manifest,
        loaded.backend.as_ref(),
        &format!("dsinfra plan {}", args.manifest.manifest.display()),
    )?;
    let mut state = backend
        .load()?
        .unwrap_or_else(|| State::new(&desired.experiment));
    let runtime = super::interrupt::runtime()?;
    let (live, fallback_notes) =
        refresh_and_resolve(args, out, &runtime, &mut desired, &mut state)?;
    let desired = &desired;
    let options = PlanOptions {
        mode: if args.destroy {
            Mode::Destroy {
                keep_data: args.keep_data,
            }
        } else {
            Mode::Normal
        },
        targets,
        now: Utc::now(),
        rerun_steps: args.rerun_steps.iter().cloned().collect(),
    };
    let mut plan = match plan::plan(desired, &state, &options) {
        Ok(plan) => plan,
        Err(diagnostics) => {
            out.message(&render::diagnostics(
                &diagnostics,
                &loaded.sources,
                out.stderr_colour(),
            ));
            let count = diagnostics.iter().filter(|d| d.is_error()).count();
            return Err(AlreadyReported { count }.into());
        }
    };
    plan.notes.extend(fallback_notes);
    let problems = match &live {
        Some(conn) => super::interrupt::block_on(
            &runtime,
            preflight::preflight(&conn.client, &conn.subscription, desired, &plan),
        )??,
        None => Vec::new(),
    };
    if args.json {
        out.result(&render::plan_json_string(&plan));
    } else {
        out.result(&render::plan_text(&plan, out.stdout_colour()));
    }
    if live.is_none() {
        out.note(
            "planned from the saved state only: no Azure connection was requested, so drift \
             detection (refresh) and the quota/SKU preflight were not run",
        );
    }
    if !problems.is_empty() {
        out.message(&render::diagnostics(
            &problems,
            &loaded.sources,
            out.stderr_colour(),
        ));
        let count = problems.iter().filter(|d| d.is_error()).count();
        if count > 0 {
            return Err(AlreadyReported { count }.into());
        }
    }
    if let Some(path) = &args.out {
        plan.source = Some(PlanSource {
            manifest: absolute(&args.manifest.manifest)?,
            var_files: args
                .manifest
                .var_files
                .iter()
                .map(|f| absolute(f))
                .collect::<anyhow::Result<_>>()?,
        });
        crate::atomic_file::write(path, plan.to_saved_json().as_bytes())?;
        out.note(&format!(
            "saved the plan to {}; `dsinfra show {}` re-renders it and checks it is still current",
            path.display(),
            path.display()
        ));
    }
    Ok(if args.detailed_exitcode && plan.has_changes() {
        Outcome::Changes
    } else {
        Outcome::Success
    })
}

/// Connect if asked (or if Azure is configured), refresh `state` from ARM and resolve `sizes`
/// fallbacks against quota; without a connection, resolve them offline. Returns the connection
/// to run the preflight with, and the plan notes explaining each fallback.
fn refresh_and_resolve(
    args: &PlanArgs,
    out: &Output,
    runtime: &tokio::runtime::Runtime,
    desired: &mut crate::model::Desired,
    state: &mut State,
) -> anyhow::Result<(Option<Connection>, Vec<String>)> {
    let live = super::interrupt::block_on(
        runtime,
        live_connection(&args.connect, &args.manifest.manifest, &desired.azure),
    )??;
    let mut fallback_notes = Vec::new();
    let live = match live {
        Some(conn) => {
            let refreshed = super::interrupt::block_on(runtime, async {
                let report = refresh::refresh(&conn.client, &conn.subscription, state).await?;
                let notes = if args.destroy {
                    Vec::new()
                } else {
                    preflight::resolve_live(&conn.client, &conn.subscription, desired, state)
                        .await?
                };
                Ok::<_, crate::azure::ArmError>((report, notes))
            })?;
            match refreshed {
                Ok((report, notes)) => {
                    out.note(&refresh_note(&report, &conn.target));
                    fallback_notes = notes;
                    Some(conn)
                }
                // Automatic Azure (no flag given) degrades to the offline plan when the
                // credentials do not work; an explicit emulator or endpoint is an error.
                Err(err)
                    if conn.target == Target::Azure && (err.is_credential() || err.is_auth()) =>
                {
                    out.note(&format!("could not use Azure: {err}"));
                    None
                }
                Err(err) => return Err(err.into()),
            }
        }
        None => None,
    };
    if live.is_none() && !args.destroy {
        fallback_notes = preflight::resolve_sizes_offline(desired, state);
    }
    Ok((live, fallback_notes))
}

/// [`crate::connect::live_connection`] for these flags.
pub(super) async fn live_connection(
    args: &ConnectArgs,
    manifest: &std::path::Path,
    settings: &AzureSettings,
) -> anyhow::Result<Option<Connection>> {
    Ok(crate::connect::live_connection(&args.options(), manifest, settings).await?)
}

/// Where a connection goes, for messages.
pub(super) fn target_name(target: &Target) -> String {
    target.name()
}

fn refresh_note(report: &refresh::RefreshReport, target: &Target) -> String {
    format!(
        "refreshed {} resource(s) from {}: {} deleted and {} changed outside dsinfra",
        report.checked,
        target_name(target),
        report.deleted.len(),
        report.changed.len()
    )
}

/// `dsinfra show PLANFILE`: render a saved plan, after checking it still matches the manifest it
/// was made from and that manifest's state (the same check apply makes before applying it).
pub fn show(args: &ShowArgs, out: &Output) -> anyhow::Result<Outcome> {
    let file = args.plan.display().to_string();
    let text = fs::read_to_string(&args.plan).with_context(|| format!("could not read {file}"))?;
    let saved = Plan::from_saved_json(&text, &file)?;
    if args.json {
        out.result(&render::plan_json_string(&saved));
    } else {
        out.result(&render::plan_text(&saved, out.stdout_colour()));
    }
    check_current(&saved, &args.vars, out)?;
    Ok(Outcome::Success)
}

/// Check a saved plan against the manifest and state it was made from (recorded in the plan as
/// [`PlanSource`]), with the `-var` values given again on this command line.
fn check_current(saved: &Plan, vars: &[String], out: &Output) -> anyhow::Result<()> {
    let Some(source) = &saved.source else {
        anyhow::bail!(
            "the saved plan does not say which manifest it was made from, so it cannot be checked: run `dsinfra plan -out` again"
        );
    };
    open_saved(saved, source, vars, "show", out)?;
    out.note("the saved plan is current: the manifest and the state are as they were");
    Ok(())
}

/// What a saved plan was made from, opened again: its manifest (with the `-var` values of this
/// command line), its backend, locked for `dsinfra VERB MANIFEST`, and its state.
pub(super) struct Reopened {
    /// The manifest, loaded again.
    pub loaded: crate::manifest::Loaded,
    /// Its state's backend.
    pub backend: Box<dyn state::Backend + Send>,
    /// Its state.
    pub state: State,
}

/// Reopen what `saved` was made from (`source`) and check that neither the manifest nor the
/// state changed since: what `apply PLANFILE` and `show PLANFILE` both do before trusting it.
pub(super) fn open_saved(
    saved: &Plan,
    source: &PlanSource,
    vars: &[String],
    verb: &str,
    out: &Output,
) -> anyhow::Result<Reopened> {
    let args = super::args::ManifestArgs {
        manifest: source.manifest.clone(),
        vars: vars.to_vec(),
        var_files: source.var_files.clone(),
    };
    let loaded = load(&args, out)?;
    let mut backend = state::open_backend(
        &args.manifest,
        loaded.backend.as_ref(),
        &format!("dsinfra {verb} {}", args.manifest.display()),
    )?;
    let state = backend
        .load()?
        .unwrap_or_else(|| State::new(&loaded.desired.experiment));
    plan::check_binding(saved, &state, &loaded.desired.manifest_hash)?;
    Ok(Reopened {
        loaded,
        backend,
        state,
    })
}

fn absolute(path: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    std::path::absolute(path).with_context(|| format!("could not resolve {}", path.display()))
}
