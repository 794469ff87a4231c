//! Commands that only read manifests: `init`, `validate`, `fmt`, `graph`. None of them needs an
//! Azure account, a network or a state.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::request::load;
use super::{AlreadyReported, Outcome, Output};
use crate::args::{FmtArgs, InitArgs, ManifestArgs};
use crate::manifest;
use crate::render;

/// `dsinfra init`
pub fn init(args: &InitArgs, out: &Output) -> anyhow::Result<Outcome> {
    let templates = manifest::starter_templates();
    if args.list {
        let width = templates.iter().map(|(n, _, _)| n.len()).max().unwrap_or(0);
        let mut text = String::from("Starter manifests (dsinfra init --template NAME):\n");
        for (name, description, _) in templates {
            let _ = writeln!(text, "  {name:<width$}  {description}");
        }
        out.result(&text);
        return Ok(Outcome::Success);
    }
    let Some((name, _, body)) = templates.iter().find(|(n, _, _)| *n == args.template) else {
        let names: Vec<&str> = templates.iter().map(|(n, _, _)| *n).collect();
        let hint = crate::diag::did_you_mean(&args.template, names.iter().copied())
            .map(|m| format!("did you mean `{m}`? "))
            .unwrap_or_default();
        bail!(
            "there is no template `{}`: {hint}the templates are {}",
            args.template,
            names.join(", ")
        );
    };
    let path = args
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{name}.hcl")));
    if path.exists() && !args.force {
        bail!(
            "{} already exists: choose another path, or pass --force to overwrite it",
            path.display()
        );
    }
    fs::write(&path, body).with_context(|| format!("could not write {}", path.display()))?;
    out.note(&format!(
        "wrote {}; next: edit it (at least `ssh_from` and `ssh_key`), then `dsinfra plan {}`",
        path.display(),
        path.display()
    ));
    Ok(Outcome::Success)
}

/// `dsinfra validate`
pub fn validate(args: &ManifestArgs, out: &Output) -> anyhow::Result<Outcome> {
    let loaded = load(args, out)?;
    let desired = &loaded.desired;
    let blocks: std::collections::BTreeSet<_> = desired
        .resources
        .iter()
        .map(|r| r.address.block_address())
        .collect();
    out.result(&format!(
        "{} is valid: experiment `{}`, {} Azure resources from {} blocks, {} post-boot steps{}\n",
        args.manifest.display(),
        desired.experiment,
        desired.resources.iter().filter(|r| r.kind.is_arm()).count(),
        blocks.len(),
        desired.steps.len(),
        match loaded.warnings.len() {
            0 => String::new(),
            n => format!(" ({n} warning{})", if n == 1 { "" } else { "s" }),
        }
    ));
    Ok(Outcome::Success)
}

/// `dsinfra fmt`
pub fn fmt(args: &FmtArgs, out: &Output) -> anyhow::Result<Outcome> {
    let mut unformatted = Vec::new();
    let mut failed = 0;
    for path in &args.files {
        let text = read(path)?;
        match manifest::format(path, &text) {
            Ok(formatted) if formatted == text => {}
            Ok(formatted) => {
                if args.check {
                    unformatted.push(path.display().to_string());
                } else {
                    fs::write(path, formatted)
                        .with_context(|| format!("could not write {}", path.display()))?;
                    out.note(&format!("formatted {}", path.display()));
                }
            }
            Err(problem) => {
                out.message(&render::diagnostics(
                    &problem.diagnostics,
                    &problem.sources,
                    out.stderr_colour(),
                ));
                failed += 1;
            }
        }
    }
    if !unformatted.is_empty() {
        out.result(&format!("{}\n", unformatted.join("\n")));
        out.note(&format!(
            "{} file(s) not formatted; run `dsinfra fmt` on them",
            unformatted.len()
        ));
    }
    if failed > 0 {
        return Err(AlreadyReported { count: failed }.into());
    }
    Ok(if unformatted.is_empty() {
        Outcome::Success
    } else {
        Outcome::Failed
    })
}

/// `dsinfra graph`
pub fn graph(args: &ManifestArgs, out: &Output) -> anyhow::Result<Outcome> {
    let loaded = load(args, out)?;
    out.result(&render::desired_dot(&loaded.desired));
    Ok(Outcome::Success)
}

fn read(path: &Path) -> anyhow::Result<String> {
    fs::read_to_string(path).with_context(|| format!("could not read {}", path.display()))
}
