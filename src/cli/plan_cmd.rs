//! `plan` and `show`: arguments to [`op::plan`] (and [`op::open_saved`]), the plan drawn by the
//! [`Terminal`], `-out` written, `--detailed-exitcode` chosen.
//!
//! `plan` connects when asked (`--emulator`, `--endpoint`) or when Azure is configured (a
//! subscription resolves); without a connection it plans from the saved state alone, and says so.

use anyhow::Context as _;
use chrono::Utc;

use super::request::{load_connected, load_saved, manifest_of, read_saved, unlocking};
use super::terminal::{ProgressOn, Terminal};
use super::{Outcome, Output};
use crate::addr::Address;
use crate::args::{PlanArgs, ShowArgs};
use crate::engine::op;
use crate::plan::{Mode, PlanOptions, PlanSource};
use crate::render;
use crate::state::{self, State};

/// `dsinfra plan`
pub async fn plan(args: &PlanArgs, out: &Output, cancel: op::Cancel) -> anyhow::Result<Outcome> {
    let targets = args
        .targets
        .iter()
        .map(|t| t.parse::<Address>())
        .collect::<Result<Vec<_>, _>>()?;
    let events: op::Events = if args.json {
        Terminal::json(out)
    } else {
        Terminal::new(out, ProgressOn::Stdout)
    };
    let manifest = &args.manifest.manifest;
    let (loaded, conn) = load_connected(&args.manifest, out, &events, &cancel, async |azure| {
        crate::connect::live_connection(&args.connect.options(), manifest, azure).await
    })
    .await?;
    let mut desired = loaded.desired.clone();
    // Held (locked) until the plan is made, so no apply changes the state meanwhile.
    let mut backend = state::open_backend(
        manifest,
        loaded.backend.as_ref(),
        &format!("dsinfra plan {}", manifest.display()),
    )
    .await?;
    let state = backend.load().await;
    let plan = unlocking(backend, Box::pin(async {
        let mut state = state?.unwrap_or_else(|| State::new(&desired.experiment));
        let request = op::PlanRequest {
            desired: &mut desired,
            sources: &loaded.sources,
            state: &mut state,
            live: conn.as_deref().map_or(op::Live::Offline, op::Live::Preview),
            options: PlanOptions {
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
            },
        };
        let mut plan = op::plan(request, &events, &cancel).await?.plan;
        if let Some(path) = &args.out {
            plan.source = Some(PlanSource {
                manifest: absolute(manifest)?,
                var_files: args
                    .manifest
                    .var_files
                    .iter()
                    .map(|f| absolute(f))
                    .collect::<anyhow::Result<_>>()?,
                learned_sizes: desired.catalog.learned().to_vec(),
            });
            crate::atomic_file::write(path, plan.to_saved_json().as_bytes())?;
            out.note(&format!(
                "saved the plan to {}; `dsinfra show {}` re-renders it and checks it is still current",
                path.display(),
                path.display()
            ));
        }
        anyhow::Ok(plan)
    }))
    .await?;
    Ok(if args.detailed_exitcode && plan.has_changes() {
        Outcome::Changes
    } else {
        Outcome::Success
    })
}

/// `dsinfra show PLANFILE`: render a saved plan, after checking it still matches the manifest it
/// was made from and that manifest's state (the same check apply makes before applying it).
pub async fn show(args: &ShowArgs, out: &Output) -> anyhow::Result<Outcome> {
    let saved = read_saved(&args.plan)?;
    if args.json {
        out.result(&render::plan_json_string(&saved));
    } else {
        out.result(&render::plan_text(&saved, out.stdout_colour()));
    }
    let Some(source) = &saved.source else {
        anyhow::bail!(
            "the saved plan does not say which manifest it was made from, so it cannot be checked: run `dsinfra plan -out` again"
        );
    };
    let loaded = load_saved(source, &args.vars, out)?;
    let reopened = op::open_saved(&saved, &manifest_of(&loaded, &source.manifest), "show").await?;
    reopened.backend.unlock().await?;
    out.note("the saved plan is current: the manifest and the state are as they were");
    Ok(Outcome::Success)
}

fn absolute(path: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    std::path::absolute(path).with_context(|| format!("could not resolve {}", path.display()))
}
