//! `report`: gather the benchmark results one or two manifests' applies fetched
//! (`.dsinfra/<manifest>/results/*.jsonl`, written by `engine::post_boot::fetch`) and save the
//! documents rendered from them under the first manifest's `reports/`. Nothing here talks to
//! Azure or a node; `render::report` draws the tables and charts.

use std::path::{Path, PathBuf};

use super::{Cancel, Error, Events, OpEvent};
use crate::state::LocalBackend;
use crate::steps::results::Results;

/// One manifest's results.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// How the report names it: the manifest's file name without `.hcl`.
    pub label: String,
    /// Its results files, by file name order (one per benchmark step).
    pub results: Vec<Results>,
}

/// What `report` reads.
#[derive(Debug, Clone, Copy)]
pub struct ReportRequest<'a> {
    /// The manifests, in the order the report puts them side by side.
    pub manifests: &'a [PathBuf],
}

/// What `report` found.
#[derive(Debug, Clone)]
pub struct ReportOutcome {
    /// One entry per manifest, in the request's order.
    pub experiments: Vec<Experiment>,
    /// Where the documents go: the first manifest's `.dsinfra/<manifest>/reports/`.
    pub dir: PathBuf,
}

/// Reads every manifest's results. A manifest without any is an error that says how to get
/// them; a results file that does not parse is a note, and the others are still reported.
pub async fn report(
    request: ReportRequest<'_>,
    events: &Events,
    cancel: &Cancel,
) -> Result<ReportOutcome, Error> {
    cancel.check()?;
    let mut experiments = Vec::new();
    let mut first_dir = None;
    for manifest in request.manifests {
        let dir = LocalBackend::state_dir(manifest).map_err(|e| Error::Failed(e.to_string()))?;
        first_dir.get_or_insert_with(|| dir.join("reports"));
        let label = manifest.file_stem().map_or_else(
            || manifest.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        let results = read_results(&dir.join("results"), events)?;
        if results.is_empty() {
            return Err(Error::Failed(format!(
                "{} has no benchmark results in {}: apply it with an `elbencho` or \
                 `storage_bench` step first (their results are fetched after the steps run)",
                manifest.display(),
                dir.join("results").display()
            )));
        }
        experiments.push(Experiment { label, results });
    }
    let dir = first_dir.ok_or_else(|| Error::Failed("no manifest to report on".into()))?;
    Ok(ReportOutcome { experiments, dir })
}

/// Every `*.jsonl` results file in `dir`, by name; a file that does not parse is a note.
fn read_results(dir: &Path, events: &Events) -> Result<Vec<Results>, Error> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    let mut all = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::Failed(format!("cannot read {}: {e}", path.display())))?;
        match Results::from_jsonl(&text) {
            Ok(results) => all.push(results),
            Err(why) => events.event(OpEvent::Note(&format!(
                "{} is left out: it is not a results file ({why})",
                path.display()
            ))),
        }
    }
    Ok(all)
}

/// Writes the rendered documents (file name, content) into `dir`; returns their paths.
pub fn save(dir: &Path, documents: &[(String, String)]) -> Result<Vec<PathBuf>, Error> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::Failed(format!("cannot create {}: {e}", dir.display())))?;
    documents
        .iter()
        .map(|(name, content)| {
            let path = dir.join(name);
            std::fs::write(&path, content)
                .map_err(|e| Error::Failed(format!("cannot write {}: {e}", path.display())))?;
            Ok(path)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::engine::op::Listener;

    /// Collects notes.
    #[derive(Default)]
    struct Notes(Mutex<Vec<String>>);

    impl Listener for Notes {
        fn event(&self, event: OpEvent<'_>) {
            if let OpEvent::Note(text) = event {
                self.0.lock().expect("not poisoned").push(text.to_owned());
            }
        }
    }

    const PROVENANCE: &str = r#"{"experiment":"e","block":"vm.a","step":"s","kind":"storage_bench","size":null,"image":null,"nodes":1,"params":{},"dsinfra_version":"0","date":"d"}"#;

    #[tokio::test]
    async fn results_are_read_by_name_a_bad_file_is_a_note_and_none_is_an_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let manifest = dir.path().join("exp.hcl");
        let results = dir.path().join(".dsinfra/exp/results");
        std::fs::create_dir_all(&results).expect("dirs");
        std::fs::write(results.join("b.jsonl"), format!("{PROVENANCE}\n")).expect("written");
        std::fs::write(results.join("a.jsonl"), "not json\n").expect("written");
        std::fs::write(results.join("raw.csv"), "ignored").expect("written");
        let notes = Arc::new(Notes::default());
        let events: Events = notes.clone();
        let manifests = [manifest.clone()];
        let found = report(
            ReportRequest {
                manifests: &manifests,
            },
            &events,
            &Cancel::never(),
        )
        .await
        .expect("one results file");
        assert_eq!(found.experiments[0].label, "exp");
        assert_eq!(found.experiments[0].results.len(), 1);
        assert_eq!(found.dir, dir.path().join(".dsinfra/exp/reports"));
        let notes = notes.0.lock().expect("not poisoned").clone();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("a.jsonl is left out"), "{notes:?}");

        let other = [dir.path().join("none.hcl")];
        let err = report(
            ReportRequest { manifests: &other },
            &events,
            &Cancel::never(),
        )
        .await
        .expect_err("no results");
        assert!(
            err.to_string().contains("has no benchmark results"),
            "{err}"
        );
        let (canceller, cancel) = crate::engine::op::cancel::pair();
        canceller.press();
        assert!(matches!(
            report(
                ReportRequest {
                    manifests: &manifests
                },
                &events,
                &cancel
            )
            .await,
            Err(Error::Interrupted(_))
        ));
    }
}
