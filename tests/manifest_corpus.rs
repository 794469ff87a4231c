//! The malformed-manifest corpus: every `tests/corpus/NN-name.hcl` must produce exactly the
//! diagnostics in `NN-name.expected` (rendered as the CLI prints them, without colour).
//!
//! Optional companions: `NN-name.vars` is passed as a var file, and each `name=value` line of
//! `NN-name.flags` as a `-var`. Run with `UPDATE_CORPUS=1` to rewrite the expectations, then
//! review the diff by eye: the expectations are the user interface.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use dsinfra::diag::render_all;
use dsinfra::manifest::{LoadOptions, load};

fn corpus() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("tests/corpus")
        .expect("tests/corpus exists (tests run from the crate root)")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hcl"))
        .map(|p| Path::new("tests/corpus").join(p.file_name().expect("a file name")))
        .collect();
    files.sort();
    files
}

/// The environment the corpus sees: fixed, so expectations do not depend on the machine.
fn options(manifest: &Path) -> LoadOptions {
    let vars_file = manifest.with_extension("vars");
    let flags_file = manifest.with_extension("flags");
    let vars = std::fs::read_to_string(&flags_file)
        .map(|text| {
            text.lines()
                .filter_map(|l| l.split_once('='))
                .map(|(n, v)| (n.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    LoadOptions {
        vars,
        var_files: if vars_file.exists() {
            vec![vars_file]
        } else {
            Vec::new()
        },
        env: Box::new(|name| match name {
            "HOME" => Some("tests/corpus/home".to_owned()),
            "DSINFRA_CORPUS" => Some("set".to_owned()),
            _ => None,
        }),
        ..LoadOptions::default()
    }
}

fn render(manifest: &Path) -> String {
    match load(manifest, &options(manifest)) {
        Err(failed) => render_all(&failed.diagnostics, &failed.sources),
        Ok(loaded) => render_all(&loaded.warnings, &loaded.sources),
    }
}

fn diff(expected: &str, actual: &str) -> String {
    let mut out = String::new();
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    for i in 0..e.len().max(a.len()) {
        match (e.get(i), a.get(i)) {
            (Some(x), Some(y)) if x == y => {
                let _ = writeln!(out, "  {x}");
            }
            (x, y) => {
                if let Some(x) = x {
                    let _ = writeln!(out, "- {x}");
                }
                if let Some(y) = y {
                    let _ = writeln!(out, "+ {y}");
                }
            }
        }
    }
    out
}

#[test]
fn malformed_manifests_give_exact_diagnostics() {
    let update = std::env::var_os("UPDATE_CORPUS").is_some();
    let files = corpus();
    assert!(
        files.len() >= 40,
        "the corpus has {} manifests; keep at least 40",
        files.len()
    );
    let mut failures = Vec::new();
    for manifest in &files {
        let actual = render(manifest);
        assert!(
            !actual.is_empty(),
            "{} loads without any diagnostic: it is not malformed",
            manifest.display()
        );
        let expected_path = manifest.with_extension("expected");
        if update {
            std::fs::write(&expected_path, &actual).expect("write expectation");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{} (expected - / actual +):\n{}",
                manifest.display(),
                diff(&expected, &actual)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} corpus file(s) differ; run with UPDATE_CORPUS=1 to accept, then review:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn corpus_names_are_numbered_and_unique() {
    let mut numbers: Vec<String> = corpus()
        .iter()
        .map(|p| {
            let name = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            name.split('-').next().unwrap_or_default().to_owned()
        })
        .collect();
    assert!(
        numbers
            .iter()
            .all(|n| (2..=3).contains(&n.len()) && n.chars().all(|c| c.is_ascii_digit())),
        "every corpus file starts with its number (two digits, three from 100): {numbers:?}"
    );
    let count = numbers.len();
    numbers.dedup();
    assert_eq!(numbers.len(), count, "each number is used once");
}

/// Every example and starter template dsinfra ships loads without an error, so a rule added to
/// validation (sizes without a temp disk, for one) cannot leave a shipped manifest broken.
#[test]
fn every_shipped_example_and_template_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The starter templates read `~/.ssh/id_ed25519.pub`; a scratch home holds the demo key.
    let home = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(home.path().join(".ssh")).expect("mkdir .ssh");
    std::fs::copy(
        root.join("examples/keys/demo.pub"),
        home.path().join(".ssh/id_ed25519.pub"),
    )
    .expect("copy the demo key");
    let home_dir = home.path().display().to_string();
    let mut failures = Vec::new();
    for dir in ["examples", "templates"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .expect("the directory exists")
            .map(|e| e.expect("readable entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "hcl"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{dir} has manifests");
        for file in files {
            let home_dir = home_dir.clone();
            // Only manifests with a network declare `my_ip` (aml-beeond.hcl has none).
            let text = std::fs::read_to_string(&file).expect("readable manifest");
            let vars = if text.contains("variable \"my_ip\"") {
                vec![("my_ip".to_owned(), "203.0.113.7/32".to_owned())]
            } else {
                Vec::new()
            };
            let options = LoadOptions {
                vars,
                var_files: Vec::new(),
                env: Box::new(move |name| (name == "HOME").then(|| home_dir.clone())),
                ..LoadOptions::default()
            };
            if let Err(failed) = load(&file, &options) {
                failures.push(render_all(&failed.diagnostics, &failed.sources));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 15: the dual DSVM shipped Standard_NC6s_v3 two years after Azure announced its
/// retirement. Every size a shipped example, template or the README names must be one Azure
/// offers today: known to the catalog, and neither retired nor announced for retirement.
#[test]
fn no_shipped_example_template_or_readme_names_a_retired_or_retiring_size() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for dir in ["examples", "templates"] {
        files.extend(
            std::fs::read_dir(root.join(dir))
                .expect("the directory exists")
                .map(|e| e.expect("readable entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "hcl")),
        );
    }
    let today = dsinfra::catalog::today();
    let mut problems = Vec::new();
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable");
        for (at, _) in text.match_indices("Standard_") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            // `Standard_LRS` and friends are storage SKUs: VM sizes have a vCPU count.
            if !name.chars().any(|c| c.is_ascii_digit()) {
                continue;
            }
            seen += 1;
            match dsinfra::catalog::shipped_size(&name) {
                None => problems.push(format!(
                    "{}: {name} is not a size Azure offers",
                    file.display()
                )),
                Some(size) => {
                    if let Some(state) = size.retirement(today) {
                        problems.push(format!("{}: {name} {state:?}", file.display()));
                    }
                }
            }
        }
    }
    assert!(seen > 5, "the shipped files name sizes");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
