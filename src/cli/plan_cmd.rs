//! `plan` and `show`: diff the manifest against the experiment's state and render the result.
//!
//! Planning reads no Azure yet: the state is what the last apply recorded. Refresh (drift) and
//! the quota preflight need ARM and come with apply (issue 4); until a connection is requested,
//! the plan says plainly that they were not run.

use std::fs;
use std::io::Write as _;

use anyhow::Context as _;
use chrono::Utc;

use super::args::{PlanArgs, ShowArgs};
use super::manifest_cmds::load;
use super::{AlreadyReported, Outcome, Output};
use crate::addr::Address;
use crate::plan::{self, Mode, Plan, PlanOptions, PlanSource};
use crate::render;
use crate::state::{Backend as _, LocalBackend, State};

/// `dsinfra plan`
pub fn plan(args: &PlanArgs, out: &Output) -> anyhow::Result<Outcome> {
    let targets = args
        .targets
        .iter()
        .map(|t| t.parse::<Address>())
        .collect::<Result<Vec<_>, _>>()?;
    let loaded = load(&args.manifest, out)?;
    let desired = &loaded.desired;
    let mut backend = LocalBackend::open(&args.manifest.manifest)?;
    let state = backend
        .load()?
        .unwrap_or_else(|| State::new(&desired.experiment));
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
    if args.json {
        out.result(&render::plan_json_string(&plan));
    } else {
        out.result(&render::plan_text(&plan, out.stdout_colour()));
    }
    out.note(
        "planned from the saved state only: no Azure connection was requested, so drift \
         detection (refresh) and the quota/SKU preflight were not run",
    );
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
        write_atomically(path, &plan.to_saved_json())?;
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

/// `dsinfra show PLANFILE`: render a saved plan, after checking it still matches the manifest it
/// was made from and that manifest's state (the same check apply makes before applying it).
pub fn show(args: &ShowArgs, out: &Output) -> anyhow::Result<Outcome> {
    let file = args.plan.display().to_string();
    let text =
        fs::read_to_string(&args.plan).with_context(|| format!("could not read {file}"))?;
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
        anyhow::bail!("the saved plan does not say which manifest it was made from, so it cannot be checked: run `dsinfra plan -out` again");
    };
    let args = super::args::ManifestArgs {
        manifest: source.manifest.clone(),
        vars: vars.to_vec(),
        var_files: source.var_files.clone(),
    };
    let loaded = load(&args, out)?;
    let mut backend = LocalBackend::open(&args.manifest)?;
    let state = backend
        .load()?
        .unwrap_or_else(|| State::new(&loaded.desired.experiment));
    plan::check_binding(saved, &state, &loaded.desired.manifest_hash)?;
    out.note("the saved plan is current: the manifest and the state are as they were");
    Ok(())
}

fn absolute(path: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    std::path::absolute(path).with_context(|| format!("could not resolve {}", path.display()))
}

/// Write a file through a temporary sibling and a rename, so a crash leaves the old file or the
/// new one, never half of one.
fn write_atomically(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| std::path::Path::new("."));
    let mut tmp = tempfile_in(dir)?;
    tmp.1
        .write_all(text.as_bytes())
        .and_then(|()| tmp.1.sync_all())
        .with_context(|| format!("could not write {}", tmp.0.display()))?;
    fs::rename(&tmp.0, path).with_context(|| format!("could not write {}", path.display()))?;
    Ok(())
}

fn tempfile_in(dir: &std::path::Path) -> anyhow::Result<(std::path::PathBuf, fs::File)> {
    let path = dir.join(format!(".dsinfra-plan-{}.tmp", std::process::id()));
    let file = fs::File::create(&path)
        .with_context(|| format!("could not create {}", path.display()))?;
    Ok((path, file))
}
