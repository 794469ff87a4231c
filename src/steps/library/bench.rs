//! The benchmark step kinds: `elbencho` (a sweep across the nodes, driven from the head) and
//! `storage_bench` (the same files written, read cold and read warm on several paths of one
//! node, with fio). Each fetches its raw results and names how they become rows of the tidy
//! results table ([`crate::steps::results`]), with what produced them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Builder, Fetch, LibraryError, Part};
use crate::steps::results::{Provenance, parse_size};
use crate::steps::spec::{RunPolicy, Scope};

/// The elbencho release installed on the nodes (static x86_64 build from GitHub releases).
const ELBENCHO_VERSION: &str = "3.0-25";

/// The port elbencho services listen on.
const ELBENCHO_PORT: u16 = 1611;

/// How a fetched results file becomes rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultFormat {
    /// elbencho's `--csvfile`.
    ElbenchoCsv,
    /// `storage_bench`'s file: a `### dsinfra-pass` line before each fio JSON document.
    FioPasses,
}

/// What a fetched file holds, for [`crate::steps::results`]: its format, the directory the
/// elbencho rows measured, and the provenance (its `date` is filled in when fetched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultsSource {
    /// The file's format.
    pub format: ResultFormat,
    /// The directory measured (elbencho's rows do not name it).
    pub path: String,
    /// What produced the file.
    pub provenance: Provenance,
    /// Where the tidy rows go, relative to `.dsinfra/<manifest>/` (`results/<step>.jsonl`).
    pub local: String,
}

/// One size parameter checked (`4M`), or the list form of it (`block_sizes`) when given.
fn sizes(
    b: &Builder<'_>,
    one: &str,
    list: Option<&str>,
    default: &str,
) -> Result<Vec<String>, LibraryError> {
    let listed = list.and_then(|l| b.request().params.get(l).map(|v| (l, v)));
    let values: Vec<String> = match listed.map(|(_, v)| v) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => vec![b.params().text_or(one, default)?.to_owned()],
    };
    for value in &values {
        if parse_size(value).is_none_or(|n| n == 0) {
            return Err(LibraryError::BadParam {
                step: b.name().to_owned(),
                param: listed.map_or(one, |(l, _)| l).to_owned(),
                why: format!("{value:?} is not a size like 64M or 4K"),
            });
        }
    }
    Ok(values)
}

/// A count parameter: a whole number or a list of them (a sweep axis).
fn counts(b: &Builder<'_>, name: &str, default: u64) -> Result<Vec<u64>, LibraryError> {
    let bad = |why: String| LibraryError::BadParam {
        step: b.name().to_owned(),
        param: name.to_owned(),
        why,
    };
    let values = match b.request().params.get(name) {
        Some(Value::Array(items)) => items.iter().map(Value::as_u64).collect::<Option<Vec<_>>>(),
        Some(Value::Null) | None => Some(vec![default]),
        Some(other) => other.as_u64().map(|n| vec![n]),
    }
    .ok_or_else(|| bad("expected a whole number or a list of them".into()))?;
    if values.is_empty() || values.contains(&0) {
        return Err(bad("expected whole numbers of at least 1".into()));
    }
    Ok(values)
}

/// What produced a step's results, from its context (the date is the fetch's).
fn provenance(b: &Builder<'_>) -> Provenance {
    let ctx = b.ctx();
    Provenance {
        experiment: ctx.experiment.clone(),
        block: ctx.block.clone(),
        step: b.name().to_owned(),
        kind: b.request().kind.to_owned(),
        size: ctx.vm_size.clone(),
        image: ctx.image.clone(),
        nodes: ctx.nodes.len(),
        // A list form replaces its one-value default, which would only mislead here.
        params: b
            .request()
            .params
            .iter()
            .filter(|(k, _)| !b.request().params.contains_key(&format!("{k}s")))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        dsinfra_version: env!("CARGO_PKG_VERSION").to_owned(),
        date: String::new(),
    }
}

/// `elbencho`: install and start the service on every node, run the sweep from the head: for
/// each point (threads x files x file size x block size), write then read with caches dropped,
/// every node at once, each point appending its rows to one CSV.
pub(super) fn elbencho(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let threads = counts(b, "threads", 8)?;
    let files = counts(b, "files", 128)?;
    let file_sizes = sizes(b, "file_size", Some("file_sizes"), "64M")?;
    let block_sizes = sizes(b, "block_size", Some("block_sizes"), "4M")?;
    // Block size outermost, threads innermost: the order of the tutorial's figures.
    let mut points = Vec::new();
    for block_size in &block_sizes {
        for file_size in &file_sizes {
            for files in &files {
                for threads in &threads {
                    points.push(json!({
                        "threads": threads,
                        "files": files,
                        "file_size": file_size,
                        "block_size": block_size,
                    }));
                }
            }
        }
    }
    let hosts: Vec<String> = b
        .ctx()
        .nodes
        .iter()
        .map(|n| format!("{}:{ELBENCHO_PORT}", n.private_ip))
        .collect();
    let csv = p
        .path_or("csv", "/var/log/dsinfra/elbencho.csv")?
        .to_owned();
    let dir = p.path_or("dir", "/mnt/scratch/elbencho")?.to_owned();
    let vars = json!({
        "version": ELBENCHO_VERSION,
        "port": ELBENCHO_PORT,
        "bin": b.ctx().elbencho.as_deref().unwrap_or("elbencho"),
        "dir": dir,
        "points": points,
        "csv": csv,
        "hosts": hosts.join(","),
    });
    let policy = b.request().policy;
    b.push(Part::new(
        Some("install"),
        "elbencho-install.sh.j2",
        "elbencho install",
        Scope::All,
        RunPolicy::Once,
        vars.clone(),
    ))?;
    b.push(Part::new(
        Some("service"),
        "elbencho-service.sh.j2",
        "elbencho service",
        Scope::All,
        RunPolicy::PerBoot,
        vars.clone(),
    ))?;
    b.push(Part::new(
        None,
        "elbencho-run.sh.j2",
        "elbencho read/write sweep",
        Scope::Head,
        policy,
        vars,
    ))?;
    let name = b.step_name(None);
    let results = ResultsSource {
        format: ResultFormat::ElbenchoCsv,
        path: dir,
        provenance: provenance(b),
        local: format!("results/{name}.jsonl"),
    };
    b.fetch(Fetch {
        after_step: name.clone(),
        node: 0,
        remote: csv,
        local: format!("elbencho/{name}.csv"),
        results: Some(results),
    });
    Ok(())
}

/// `storage_bench`: on the head (a single VM's only node), for each path: write the files, drop
/// the page cache and read them (cold), read them again at once (warm: what FS-Cache or the
/// page cache gives), then delete them; fio measures each pass.
pub(super) fn storage_bench(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let paths: Vec<String> = match b.request().params.get("paths") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => {
            return Err(LibraryError::MissingParam {
                step: b.name().to_owned(),
                param: "paths".into(),
            });
        }
    };
    for path in &paths {
        let why = if path.starts_with("{temp}") {
            // The template compares the paths as written; `{temp}` is resolved nowhere there.
            Err(format!("{path:?} must be an absolute path"))
        } else {
            super::params::check_path(path)
        };
        why.map_err(|why| LibraryError::BadParam {
            step: b.name().to_owned(),
            param: "paths".into(),
            why,
        })?;
    }
    let threads = p.int_or("threads", 1)?.max(1);
    let files = p.int_or("files", 16)?.max(1);
    let file_size = sizes(b, "file_size", None, "16M")?.remove(0);
    let block_size = sizes(b, "block_size", None, "1M")?.remove(0);
    let results = p
        .path_or("results", "/var/log/dsinfra/storage_bench.txt")?
        .to_owned();
    let file_bytes = parse_size(&file_size).unwrap_or_default();
    let vars = json!({
        "paths": paths,
        "threads": threads,
        "files": files,
        "file_bytes": file_bytes,
        "block_bytes": parse_size(&block_size).unwrap_or_default(),
        "job_bytes": file_bytes.saturating_mul(files),
        "drop_caches": p.bool_or("drop_caches", true)?,
        "results": results,
    });
    let policy = b.request().policy;
    b.push(Part::new(
        Some("install"),
        "fio-install.sh.j2",
        "fio install",
        Scope::Head,
        RunPolicy::Once,
        vars.clone(),
    ))?;
    b.push(Part::new(
        None,
        "storage_bench.sh.j2",
        "write, cold read and warm read per path",
        Scope::Head,
        policy,
        vars,
    ))?;
    let name = b.step_name(None);
    let source = ResultsSource {
        format: ResultFormat::FioPasses,
        path: String::new(),
        provenance: provenance(b),
        local: format!("results/{name}.jsonl"),
    };
    b.fetch(Fetch {
        after_step: name.clone(),
        node: 0,
        remote: results,
        local: format!("storage_bench/{name}.txt"),
        results: Some(source),
    });
    Ok(())
}
