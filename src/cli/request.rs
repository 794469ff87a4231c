//! Arguments turned into what the operations take: the manifest loaded with its `-var` and
//! `-var-file` values (warnings shown, problems shown and counted).

use anyhow::bail;

use super::args::ManifestArgs;
use super::{AlreadyReported, Output};
use crate::manifest::{self, LoadOptions, Loaded};
use crate::render;

/// Load a manifest with its `-var`/`-var-file` values; print warnings, or print every problem
/// and fail with [`AlreadyReported`].
pub fn load(args: &ManifestArgs, out: &Output) -> anyhow::Result<Loaded> {
    let opts = load_options(args)?;
    match manifest::load(&args.manifest, &opts) {
        Ok(loaded) => {
            if !loaded.warnings.is_empty() {
                out.message(&render::diagnostics(
                    &loaded.warnings,
                    &loaded.sources,
                    out.stderr_colour(),
                ));
                out.message("\n");
            }
            Ok(loaded)
        }
        Err(failed) => {
            out.message(&render::diagnostics(
                &failed.diagnostics,
                &failed.sources,
                out.stderr_colour(),
            ));
            let count = failed.diagnostics.iter().filter(|d| d.is_error()).count();
            Err(AlreadyReported { count }.into())
        }
    }
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
