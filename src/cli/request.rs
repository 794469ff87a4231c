//! Arguments turned into what the operations take: the manifest loaded with its `-var` and
//! `-var-file` values (warnings shown, problems shown and counted).

use anyhow::{Context as _, bail};

use super::{AlreadyReported, Output};
use crate::args::ManifestArgs;
use crate::catalog;
use crate::connect::Connection;
use crate::engine::op;
use crate::manifest::{self, LoadOptions, Loaded};
use crate::model::AzureSettings;
use crate::plan::{Plan, PlanSource};
use crate::render;

/// Load a manifest with its `-var`/`-var-file` values; print warnings, or print every problem
/// and fail with [`AlreadyReported`].
pub fn load(args: &ManifestArgs, out: &Output) -> anyhow::Result<Loaded> {
    load_with(args, out, catalog::Catalog::shipped())
}

/// [`load`], judging the manifest's VM sizes against `catalog`.
fn load_with(
    args: &ManifestArgs,
    out: &Output,
    catalog: catalog::Catalog,
) -> anyhow::Result<Loaded> {
    let opts = LoadOptions {
        catalog,
        ..load_options(args)?
    };
    match manifest::load(&args.manifest, &opts) {
        Ok(loaded) => Ok(warned(loaded, out)),
        Err(failed) => Err(reported(&failed, out)),
    }
}

/// A loaded manifest, its warnings shown.
fn warned(loaded: Loaded, out: &Output) -> Loaded {
    if !loaded.warnings.is_empty() {
        out.message(&render::diagnostics(
            &loaded.warnings,
            &loaded.sources,
            out.stderr_colour(),
        ));
        out.message("\n");
    }
    loaded
}

/// Print a manifest's problems with their source; the error that says they were shown.
pub fn reported(failed: &manifest::LoadFailed, out: &Output) -> anyhow::Error {
    out.message(&render::diagnostics(
        &failed.diagnostics,
        &failed.sources,
        out.stderr_colour(),
    ));
    let count = failed.diagnostics.iter().filter(|d| d.is_error()).count();
    AlreadyReported { count }.into()
}

/// The loader's options for these arguments.
pub fn load_options(args: &ManifestArgs) -> anyhow::Result<LoadOptions> {
    Ok(LoadOptions {
        vars: parse_vars(&args.vars)?,
        var_files: args.var_files.clone(),
        ..LoadOptions::default()
    })
}

/// `-var NAME=VALUE` pairs, in order (later wins, as the loader applies them in order).
fn parse_vars(raw: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    raw.iter()
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_owned(), value.to_owned()))
            }
            _ => bail!("`-var {pair}` is not NAME=VALUE (for example: -var nodes=6)"),
        })
        .collect()
}

/// A connection as a command asked for it: required ([`Connection`]) or when available
/// (`Option<Connection>`).
pub trait Connected {
    /// The connection's [`op::Arm`], if there is one.
    fn arm(&self) -> Option<&op::Arm>;
}

impl Connected for Connection {
    fn arm(&self) -> Option<&op::Arm> {
        Some(self)
    }
}

impl Connected for Option<Connection> {
    fn arm(&self) -> Option<&op::Arm> {
        self.as_deref()
    }
}

/// [`load`] for a command that connects (`plan`, `apply`, `destroy`): reads the manifest once
/// and hands it to [`op::prepare`], which connects with `connect` (given the manifest's Azure
/// settings), learns from the live Resource SKUs the sizes the shipped catalog lacks, and judges
/// the manifest against them. A connection that fails is reported after the manifest's own
/// warnings and problems, as if it had been made after loading.
///
/// # Errors
///
/// The manifest has errors (printed), connecting failed, Ctrl-C.
pub async fn load_connected<C: Connected>(
    args: &ManifestArgs,
    out: &Output,
    events: &op::Events,
    cancel: &op::Cancel,
    connect: impl AsyncFnOnce(&AzureSettings) -> Result<C, op::Error>,
) -> anyhow::Result<(Loaded, C)> {
    let opts = load_options(args)?;
    let read = manifest::read(&args.manifest, &opts).map_err(|failed| reported(&failed, out))?;
    match op::prepare(&read, C::arm, connect, events, cancel).await {
        Ok(prepared) => {
            let loaded = warned(prepared.loaded, out);
            Ok((loaded, prepared.connection?))
        }
        Err(op::PrepareError::Manifest(failed)) => Err(reported(&failed, out)),
        Err(op::PrepareError::Op(err)) => Err(err.into()),
    }
}

/// `work`'s result, with the state's lock released after it whatever it returned: a command
/// ends with an explicit unlock (issue 31), so a remote lease is free when the command ends, not
/// when it expires.
///
/// # Errors
///
/// `work`'s error, or else the unlock's.
pub async fn unlocking<T>(
    backend: Box<dyn crate::state::Backend + Send>,
    work: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let result = work.await;
    let unlocked = backend.unlock().await;
    let value = result?;
    unlocked?;
    Ok(value)
}

/// The manifest a saved plan was made from, loaded again with the `-var` values given again and
/// judged against the sizes the plan learnt ([`PlanSource::learned_sizes`]).
pub fn load_saved(source: &PlanSource, vars: &[String], out: &Output) -> anyhow::Result<Loaded> {
    load_with(
        &source_args(source, vars),
        out,
        catalog::Catalog::with_learned(source.learned_sizes.clone()),
    )
}

/// A saved plan, read from its file.
pub fn read_saved(path: &std::path::Path) -> anyhow::Result<Plan> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("could not read {file}"))?;
    Ok(Plan::from_saved_json(&text, &file)?)
}

/// The manifest arguments a saved plan was made with, with the `-var` values given again.
pub fn source_args(source: &PlanSource, vars: &[String]) -> ManifestArgs {
    ManifestArgs {
        manifest: source.manifest.clone(),
        vars: vars.to_vec(),
        var_files: source.var_files.clone(),
    }
}

/// The operations' view of a loaded manifest.
pub fn manifest_of<'a>(
    loaded: &'a crate::manifest::Loaded,
    path: &'a std::path::Path,
) -> op::Manifest<'a> {
    op::Manifest {
        path,
        desired: &loaded.desired,
        sources: &loaded.sources,
        backend: loaded.backend.as_ref(),
    }
}

/// The manifest's state, read without holding its lock for longer than the read: a session on
/// a node must neither wait for nor block an apply. If an apply holds a local state's lock, the
/// file is read anyway (saves replace it atomically, so a reader sees one whole version).
/// `verb` names the command in the lock while it is held (`ssh`, `run`).
pub async fn read_state(
    manifest: &std::path::Path,
    backend: Option<&crate::model::BackendConfig>,
    verb: &str,
) -> anyhow::Result<crate::state::State> {
    use crate::state::{State, StateError};
    let command = format!("dsinfra {verb} {}", manifest.display());
    let state = match crate::state::open_backend(manifest, backend, &command).await {
        Ok(mut opened) => {
            let state = opened.load().await?;
            opened.unlock().await?;
            state
        }
        Err(StateError::Locked { state, .. }) => match std::fs::read_to_string(&state) {
            Ok(text) => Some(State::from_json(&text, &state)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(e).with_context(|| format!("could not read {}", state.display()));
            }
        },
        Err(e) => return Err(e.into()),
    };
    state.with_context(|| {
        format!(
            "{} has no state yet: nothing was applied (run `dsinfra apply {}` first)",
            manifest.display(),
            manifest.display()
        )
    })
}
