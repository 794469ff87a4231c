//! Copying result files back from the nodes after a run (elbencho's CSV): the library names
//! them in [`Expansion::fetch`](crate::steps::library::Expansion), the runner only streams
//! output, so this is the engine's post-run hook.
//!
//! A file is read with `sudo -n cat` over a fresh SSH session (through the head for private
//! nodes), only from nodes where the step that writes it succeeded. The local path stays inside
//! the experiment's directory: the library's relative path is checked again here. Files are
//! read as text lines and written back with `\n` endings (CSV results; not for binary files).

use std::path::{Component, Path};
use std::time::Duration;

use crate::ssh::{self, Auth, Session, WaitPolicy, shell_quote};
use crate::steps::library::Fetch;
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
        let ran = report.node(spec.name()).is_some_and(|n| {
            matches!(
                n.outcome(&fetch.after_step),
                Some(StepOutcome::Ran { .. } | StepOutcome::Skipped(_))
            )
        });
        if !ran {
            continue;
        }
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
        match read_remote(spec, auth, &fetch.remote).await {
            Ok(bytes) => {
                let saved = local
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&local, bytes));
                match saved {
                    Ok(()) => written.push(local.display().to_string()),
                    Err(e) => warnings.push(format!("could not write {}: {e}", local.display())),
                }
            }
            Err(e) => warnings.push(format!(
                "could not fetch {} from {}: {e}",
                fetch.remote,
                spec.name()
            )),
        }
    }
    written
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

async fn read_remote(spec: &NodeSpec, auth: &Auth, remote: &str) -> Result<Vec<u8>, String> {
    let (jump, session) = open(spec, auth).await?;
    let output = session
        .output(
            &format!("sudo -n cat -- {}", shell_quote(remote)),
            b"",
            Some(FETCH_TIMEOUT),
        )
        .await
        .map_err(|e| e.to_string());
    session.close().await;
    if let Some(jump) = jump {
        jump.close().await;
    }
    let output = output?;
    if !output.exit.success() {
        return Err(format!("`cat` failed: {}", output.stderr.trim()));
    }
    let mut bytes = output.stdout.into_bytes();
    if !bytes.is_empty() {
        bytes.push(b'\n');
    }
    Ok(bytes)
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
}
