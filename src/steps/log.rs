//! Step logs on the local disk and the redaction of secret values from every line.
//!
//! Secrets reach scripts as files, but a script may still print one (`set -x`, a verbose tool).
//! Every line is therefore passed through [`Redactor`] before it reaches a log file or an event,
//! so neither the terminal nor `.dsinfra/.../logs` ever holds a secret value.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Replaces known secret values in text.
#[derive(Clone, Default)]
pub struct Redactor {
    values: Vec<String>,
}

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

impl Redactor {
    /// A redactor for these values; empty values are ignored, and longer ones are replaced
    /// first so a secret containing another is not half-redacted.
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let mut values: Vec<String> = values
            .into_iter()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self { values }
    }

    /// `line` with every secret value replaced.
    pub fn redact(&self, line: &str) -> String {
        let mut out = line.to_owned();
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), REDACTED);
            }
        }
        out
    }
}

/// The log file of one step on one node: `<log_dir>/<run>/<node>/<step>.log`.
pub(crate) fn log_path(log_dir: &Path, run: &str, node: &str, step: &str) -> PathBuf {
    // Node names are addresses such as `cluster.train[3]`; only `/` cannot be in a file name.
    log_dir
        .join(run)
        .join(node.replace('/', "_"))
        .join(format!("{step}.log"))
}

/// An open step log; write failures are reported once and then ignored, because losing a log
/// line must not fail a step that succeeded on the node.
pub(crate) struct StepLog {
    file: Option<BufWriter<File>>,
}

impl StepLog {
    pub(crate) fn create(path: &Path) -> Self {
        let file = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| File::create(path));
        match file {
            Ok(file) => Self {
                file: Some(BufWriter::new(file)),
            },
            Err(e) => {
                tracing::warn!("cannot write step log {}: {e}", path.display());
                Self { file: None }
            }
        }
    }

    pub(crate) fn line(&mut self, text: &str) {
        if let Some(file) = &mut self.file
            && writeln!(file, "{text}").is_err()
        {
            tracing::warn!("a step log stopped accepting lines");
            self.file = None;
        }
    }

    pub(crate) fn finish(mut self) {
        if let Some(file) = &mut self.file {
            let _ = file.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_every_occurrence_longest_first() {
        let r = Redactor::new(["abc", "abcdef", "", " zz "]);
        assert_eq!(
            r.redact("x abcdef y abc zz"),
            "x [redacted] y [redacted] [redacted]"
        );
        assert_eq!(r.redact("nothing here"), "nothing here");
    }

    #[test]
    fn log_path_layout() {
        assert_eq!(
            log_path(Path::new("/l"), "run1", "cluster.train[3]", "mofed"),
            Path::new("/l/run1/cluster.train[3]/mofed.log")
        );
    }
}
