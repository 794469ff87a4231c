//! Copying result files back from the nodes after a run (elbencho's CSV, fio's passes), and
//! turning a benchmark's file into rows of the results table: the library names
//! them in [`Expansion::fetch`](crate::steps::library::Expansion), the runner only streams
//! output, so this is the engine's post-run hook.
//!
//! A file is read as root (`sudo -n`) over a fresh SSH session (through the head for private
//! nodes), only from nodes where the step that writes it succeeded. It travels base64-encoded,
//! because the SSH layer hands command output over as text lines: the copy is byte-identical,
//! binary files included. A file that does not exist on the node is a warning naming it, not a
//! failure: the steps did succeed. The local path stays inside the experiment's directory: the
//! library's relative path is checked again here. A step that was up to date (skipped) is
//! fetched from only if its local copy is missing, so a no-change apply reads nothing back.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use chrono::{SecondsFormat, Utc};

use crate::ssh::{self, Auth, Exit, Session, WaitPolicy, shell_quote};
use crate::steps::library::{Fetch, ResultFormat, ResultsSource};
use crate::steps::results::{self, Results};
use crate::steps::{NodeSpec, RunReport, StepOutcome};

/// How long one `cat` may take.
const FETCH_TIMEOUT: Duration = Duration::from_mins(2);

/// Fetches every file of `fetches` whose step succeeded on its node into `dir`; returns the
/// local paths written. Failures become `warnings`: the steps themselves did succeed.
pub async fn fetch_files(
    fetches: &[Fetch],
    report: &RunReport,
    specs: &[NodeSpec],
    auth: &Auth,
    dir: &Path,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let mut written = Vec::new();
    for fetch in fetches {
        let Some(spec) = specs.get(fetch.node) else {
            continue;
        };
        let outcome = report
            .node(spec.name())
            .and_then(|n| n.outcome(&fetch.after_step));
        let up_to_date = match outcome {
            Some(StepOutcome::Ran { .. }) => false,
            Some(StepOutcome::Skipped(_)) => true,
            _ => continue,
        };
        if !is_relative_inside(&fetch.local) {
            warnings.push(format!(
                "not fetching {}: its local path {:?} would leave {}",
                fetch.remote,
                fetch.local,
                dir.display()
            ));
            continue;
        }
        let local = dir.join(&fetch.local);
        // A step that did not run this time wrote nothing new: its file came back when it ran.
        // Only a copy that is gone is fetched again; one the user edited is left alone.
        if up_to_date && local.exists() {
            continue;
        }
        match read_remote(spec, auth, &fetch.remote).await {
            Ok(bytes) => {
                let saved = local
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&local, &bytes));
                match saved {
                    Ok(()) => written.push(local.display().to_string()),
                    Err(e) => warnings.push(format!("could not write {}: {e}", local.display())),
                }
                if let Some(source) = &fetch.results {
                    match save_results(source, &bytes, dir) {
                        Ok(path) => written.push(path.display().to_string()),
                        Err(e) => warnings.push(format!(
                            "the results in {} could not be read: {e}",
                            local.display()
                        )),
                    }
                }
            }
            Err(FetchError::Missing) => warnings.push(format!(
                "{} was not fetched from {}: there is no such file on the node",
                fetch.remote,
                spec.name()
            )),
            Err(FetchError::Failed(e)) => warnings.push(format!(
                "could not fetch {} from {}: {e}",
                fetch.remote,
                spec.name()
            )),
        }
    }
    written
}

/// Turns a fetched benchmark file into the tidy results table under `dir` (the rows with their
/// provenance, dated now); returns the file written.
fn save_results(source: &ResultsSource, bytes: &[u8], dir: &Path) -> Result<PathBuf, String> {
    let text = String::from_utf8_lossy(bytes);
    let rows = match source.format {
        ResultFormat::ElbenchoCsv => results::parse_elbencho_csv(&text, &source.path)?,
        ResultFormat::FioPasses => results::parse_fio_passes(&text)?,
    };
    if rows.is_empty() {
        return Err("it holds no measured pass".into());
    }
    if !is_relative_inside(&source.local) {
        return Err(format!("{:?} would leave {}", source.local, dir.display()));
    }
    let mut provenance = source.provenance.clone();
    provenance.date = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let table = Results { provenance, rows };
    let path = dir.join(&source.local);
    path.parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, table.to_jsonl()))
        .map_err(|e| format!("could not write {}: {e}", path.display()))?;
    Ok(path)
}

/// A relative path without `..`, root or prefix components.
fn is_relative_inside(path: &str) -> bool {
    let path = Path::new(path);
    !path.as_os_str().is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Opens a session to the node (through its jump host, if any).
async fn open(spec: &NodeSpec, auth: &Auth) -> Result<(Option<Session>, Session), String> {
    let wait = WaitPolicy::once(Duration::from_secs(20));
    match &spec.jump {
        None => ssh::connect(&spec.target, &spec.host_key, auth, &wait)
            .await
            .map(|s| (None, s))
            .map_err(|e| e.to_string()),
        Some(hop) => {
            let jump = ssh::connect(&hop.target, &hop.host_key, auth, &wait)
                .await
                .map_err(|e| e.to_string())?;
            let session = ssh::connect_via(&jump, &spec.target, &spec.host_key, auth, &wait)
                .await
                .map_err(|e| e.to_string())?;
            Ok((Some(jump), session))
        }
    }
}

/// Why a file was not read.
#[derive(Debug, PartialEq, Eq)]
enum FetchError {
    /// The node has no regular file at that path.
    Missing,
    /// Anything else: the connection, sudo, a read error.
    Failed(String),
}

/// The exit status of [`fetch_command`] when the path is not a regular file.
const MISSING_EXIT: u32 = 3;

/// The remote command that prints the file base64-encoded, or exits [`MISSING_EXIT`]. The path
/// is a positional parameter of `sh -c`, quoted once: no second round of shell parsing.
fn fetch_command(remote: &str) -> String {
    format!(
        "sudo -n sh -c 'test -f \"$1\" || exit {MISSING_EXIT}; base64 -- \"$1\"' dsinfra-fetch {}",
        shell_quote(remote)
    )
}

/// Decodes the base64 text `fetch_command` printed (wrapped at 76 columns by `base64`).
fn decode(text: &str) -> Result<Vec<u8>, String> {
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|e| format!("the node sent unreadable data: {e}"))
}

async fn read_remote(spec: &NodeSpec, auth: &Auth, remote: &str) -> Result<Vec<u8>, FetchError> {
    let (jump, session) = open(spec, auth).await.map_err(FetchError::Failed)?;
    let output = session
        .output(&fetch_command(remote), b"", Some(FETCH_TIMEOUT))
        .await
        .map_err(|e| e.to_string());
    session.close().await;
    if let Some(jump) = jump {
        jump.close().await;
    }
    let output = output.map_err(FetchError::Failed)?;
    if output.exit == Exit::Code(MISSING_EXIT) {
        return Err(FetchError::Missing);
    }
    if !output.exit.success() {
        return Err(FetchError::Failed(format!(
            "reading it failed: {}",
            output.stderr.trim()
        )));
    }
    decode(&output.stdout).map_err(FetchError::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_written() {
        assert!(is_relative_inside("elbencho/head.csv"));
        assert!(!is_relative_inside("../outside.csv"));
        assert!(!is_relative_inside("/etc/passwd"));
        assert!(!is_relative_inside("a/../../b"));
        assert!(!is_relative_inside(""));
    }

    #[test]
    fn the_remote_command_quotes_the_path_once_and_the_copy_decodes_exactly() {
        assert_eq!(
            fetch_command("/data/it's here.csv"),
            "sudo -n sh -c 'test -f \"$1\" || exit 3; base64 -- \"$1\"' dsinfra-fetch \
             '/data/it'\\''s here.csv'"
        );
        // base64(1) wraps at 76 columns; the bytes come back exactly, binary included.
        let bytes: Vec<u8> = (0..=255).collect();
        let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let wrapped: Vec<String> = encoded
            .as_bytes()
            .chunks(76)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        assert_eq!(decode(&wrapped.join("\n")), Ok(bytes));
        assert!(decode("not base64!").is_err());
    }
}
