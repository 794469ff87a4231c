//! The VM catalog's generator and the data it wrote (docs/catalog.md).
//!
//! - `scripts/catalog/test_generate.py` (the generator's unittest: bootstrap on fixture excerpts,
//!   online against a local Retail Prices and Resource SKUs server) runs with `python3`, so
//!   `cargo test` covers the script. Without python3 a local run says why and passes; under CI
//!   (`CI=true`) it fails.
//! - The committed `data/catalog/vm-sizes.csv` and `vm-prices.csv` parse per the format: the
//!   provenance comments in order, the header, the column count, each column's type, the sort
//!   order, every price row's size in vm-sizes.csv and every size priced somewhere. Every problem
//!   is reported at once, with its file and line.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

const SIZE_HEADER: &str = "name,vcpus,vcpus_available,memory_gib,gpus,gpu_model,gpu_arch,temp_disk_gib,quota_family,generations,rdma,accelerated_networking,premium_io,cpu_architecture,trusted_launch,temp_nvme,nvme_gib,retirement_date,facts";
const PRICE_HEADER: &str = "name,region,linux_payg,spot";
const GPU_ARCHES: [&str; 10] = [
    "Kepler",
    "Maxwell",
    "Pascal",
    "Volta",
    "Turing",
    "Ampere",
    "Ada",
    "Hopper",
    "Blackwell",
    "AMD",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

#[test]
fn the_generator_unittests_pass() {
    if Command::new("python3").arg("--version").output().is_err() {
        let why = "python3 is not on PATH, so scripts/catalog/test_generate.py cannot run";
        assert!(!under_ci(), "{why}; it is required under CI");
        eprintln!("SKIPPING the catalog generator's tests: {why}");
        return;
    }
    let output = Command::new("python3")
        .args(["-m", "unittest", "scripts/catalog/test_generate.py"])
        .current_dir(repo())
        // Keeps __pycache__ out of the checkout.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "scripts/catalog/test_generate.py failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One generated file: its `# ` comment lines and its data rows with their 1-based line numbers.
struct CatalogFile {
    path: String,
    comments: Vec<String>,
    header: String,
    rows: Vec<(usize, Vec<String>)>,
}

fn read(relative: &str) -> CatalogFile {
    let text =
        std::fs::read_to_string(repo().join(relative)).expect("the catalog file is committed");
    let mut lines = text.lines().enumerate();
    let mut comments = Vec::new();
    let mut header = String::new();
    for (_, line) in lines.by_ref() {
        if let Some(comment) = line.strip_prefix("# ") {
            comments.push(comment.to_owned());
        } else {
            line.clone_into(&mut header);
            break;
        }
    }
    let rows = lines
        .map(|(index, line)| (index + 1, line.split(',').map(str::to_owned).collect()))
        .collect();
    CatalogFile {
        path: relative.to_owned(),
        comments,
        header,
        rows,
    }
}

fn is_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let number = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit());
    parts.len() == 3
        && number(parts[0], 4)
        && number(parts[1], 2)
        && number(parts[2], 2)
        && (1..=12).contains(&parts[1].parse::<u32>().unwrap_or(0))
        && (1..=31).contains(&parts[2].parse::<u32>().unwrap_or(0))
}

/// A plain decimal as the files write it: digits with at most one point, no sign or exponent.
fn decimal(text: &str) -> Option<f64> {
    let plain = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.matches('.').count() <= 1
        && !text.starts_with('.')
        && !text.ends_with('.');
    if plain { text.parse().ok() } else { None }
}

fn is_count(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// Checks the provenance comments; `second` is the comment after `generated:` in this file.
fn check_comments(
    file: &CatalogFile,
    title: &str,
    extra: Option<&str>,
    problems: &mut Vec<String>,
) {
    let mut expected = vec![title.to_owned(), "generated: ".to_owned()];
    expected.extend(extra.map(str::to_owned));
    expected.push("mode: ".to_owned());
    for (index, prefix) in expected.iter().enumerate() {
        let line = file.comments.get(index).map_or("", String::as_str);
        let ok = if index == 0 {
            line == prefix
        } else {
            line.starts_with(prefix.as_str())
        };
        if !ok {
            problems.push(format!(
                "{}: comment {} should start `# {prefix}`, is `# {line}`",
                file.path,
                index + 1
            ));
        }
    }
    for date_key in ["generated: ", "prices-date: "] {
        for line in file
            .comments
            .iter()
            .filter_map(|c| c.strip_prefix(date_key))
        {
            if !is_date(line) {
                problems.push(format!(
                    "{}: `# {date_key}{line}` is not YYYY-MM-DD",
                    file.path
                ));
            }
        }
    }
    let mode = file
        .comments
        .iter()
        .find_map(|c| c.strip_prefix("mode: "))
        .unwrap_or("");
    if !["bootstrap", "online"].contains(&mode) {
        problems.push(format!(
            "{}: mode `{mode}` is neither bootstrap nor online",
            file.path
        ));
    }
    let sources = &file.comments[expected.len().min(file.comments.len())..];
    if sources.is_empty() || !sources.iter().all(|c| c.starts_with("source: ")) {
        problems.push(format!(
            "{}: the comments after `# mode:` must be `# source:` lines, at least one",
            file.path
        ));
    }
}

/// Checks one vm-sizes.csv row's columns; returns the problems found, without the location.
fn size_row_problems(row: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    let [
        name,
        vcpus,
        available,
        memory,
        gpus,
        model,
        arch,
        temp,
        family,
        generations,
        rdma,
        an,
        premium,
        cpu,
        trusted_launch,
        temp_nvme,
        nvme_gib,
        retirement,
        facts,
    ] = row
    else {
        return vec![format!("{} columns, expected 19", row.len())];
    };
    if !(name.starts_with("Standard_") || name.starts_with("Basic_")) || name.contains(' ') {
        problems.push(format!("name `{name}` is not an ARM size name"));
    }
    match (vcpus.parse::<u32>(), available.parse::<u32>()) {
        (Ok(all), Ok(active))
            if is_count(vcpus) && is_count(available) && active >= 1 && active <= all => {}
        _ => problems.push(format!(
            "vcpus `{vcpus}` / vcpus_available `{available}`: integers, 1 <= available <= vcpus"
        )),
    }
    if !decimal(memory).is_some_and(|m| m > 0.0) {
        problems.push(format!("memory_gib `{memory}` is not a positive decimal"));
    }
    match decimal(gpus) {
        Some(count) if count == 0.0 && (!model.is_empty() || !arch.is_empty()) => {
            problems.push("gpus 0 with a gpu_model or gpu_arch".to_owned());
        }
        Some(_) => {}
        None => problems.push(format!("gpus `{gpus}` is not a decimal")),
    }
    if !arch.is_empty() && !GPU_ARCHES.contains(&arch.as_str()) {
        problems.push(format!("gpu_arch `{arch}` is not one of {GPU_ARCHES:?}"));
    }
    if !(temp.is_empty() || is_count(temp)) {
        problems.push(format!(
            "temp_disk_gib `{temp}` is neither empty nor an integer"
        ));
    }
    if family.is_empty() {
        problems.push("quota_family is empty".to_owned());
    }
    if !["1", "2", "1 2"].contains(&generations.as_str()) {
        problems.push(format!(
            "generations `{generations}` is not `1`, `2` or `1 2`"
        ));
    }
    for (column, value) in [
        ("rdma", rdma),
        ("accelerated_networking", an),
        ("premium_io", premium),
        ("trusted_launch", trusted_launch),
        ("temp_nvme", temp_nvme),
    ] {
        if !["", "true", "false"].contains(&value.as_str()) {
            problems.push(format!("{column} `{value}` is not true, false or empty"));
        }
    }
    if !["x64", "Arm64"].contains(&cpu.as_str()) {
        problems.push(format!("cpu_architecture `{cpu}` is not x64 or Arm64"));
    }
    if !(nvme_gib.is_empty() || is_count(nvme_gib)) {
        problems.push(format!(
            "nvme_gib `{nvme_gib}` is neither empty nor an integer"
        ));
    }
    if temp_nvme == "true" && !["", "0"].contains(&temp.as_str()) {
        problems.push(format!(
            "temp_nvme with temp_disk_gib `{temp}`: an NVMe size has no temp disk"
        ));
    }
    if generations == "1" && trusted_launch != "false" {
        problems.push("a Generation 1 size cannot have Trusted Launch".to_owned());
    }
    if !(retirement.is_empty() || is_date(retirement)) {
        problems.push(format!("retirement_date `{retirement}` is not YYYY-MM-DD"));
    }
    if facts.is_empty() || facts.split(';').any(str::is_empty) {
        problems.push(format!(
            "facts `{facts}` is not a `;`-separated list of tags"
        ));
    }
    problems
}

/// Checks one vm-prices.csv row's columns; returns the problems found, without the location.
fn price_row_problems(row: &[String]) -> Vec<String> {
    let [_, region, payg, spot] = row else {
        return vec![format!("{} columns, expected 4", row.len())];
    };
    let mut problems = Vec::new();
    if region.is_empty()
        || !region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        problems.push(format!(
            "region `{region}` is not a lower-case ARM location name"
        ));
    }
    let payg_value = decimal(payg);
    if !payg_value.is_some_and(|p| p > 0.0) {
        problems.push(format!("linux_payg `{payg}` is not a positive decimal"));
    }
    if !spot.is_empty() {
        match decimal(spot) {
            Some(s) if s > 0.0 && Some(s) != payg_value => {}
            _ => problems.push(format!(
                "spot `{spot}` is not a positive decimal different from linux_payg"
            )),
        }
    }
    problems
}

fn check_sizes(file: &CatalogFile, problems: &mut Vec<String>) -> Vec<String> {
    check_comments(
        file,
        "dsinfra VM size catalog. Generated by scripts/catalog/generate.py; do not edit by hand.",
        None,
        problems,
    );
    if file.header != SIZE_HEADER {
        problems.push(format!("{}: header is `{}`", file.path, file.header));
    }
    let mut names: Vec<String> = Vec::new();
    for (line, row) in &file.rows {
        for problem in size_row_problems(row) {
            problems.push(format!("{}:{line}: {problem}", file.path));
        }
        if names
            .last()
            .is_some_and(|last| last.as_str() >= row[0].as_str())
        {
            problems.push(format!(
                "{}:{line}: {} is not after {} (sorted by name, no repeats)",
                file.path,
                row[0],
                names[names.len() - 1]
            ));
        }
        names.push(row[0].clone());
    }
    names
}

fn check_prices(file: &CatalogFile, sizes: &[String], problems: &mut Vec<String>) {
    check_comments(
        file,
        "dsinfra VM price catalog. Generated by scripts/catalog/generate.py; do not edit by hand.",
        Some("prices-date: "),
        problems,
    );
    if file.header != PRICE_HEADER {
        problems.push(format!("{}: header is `{}`", file.path, file.header));
    }
    let known: BTreeSet<&str> = sizes.iter().map(String::as_str).collect();
    let mut priced = BTreeSet::new();
    let mut previous: Option<(&str, &str)> = None;
    for (line, row) in &file.rows {
        for problem in price_row_problems(row) {
            problems.push(format!("{}:{line}: {problem}", file.path));
        }
        let key = (row[0].as_str(), row.get(1).map_or("", String::as_str));
        if previous.is_some_and(|p| p >= key) {
            problems.push(format!("{}:{line}: ({}, {}) is not after the row before (sorted by name, region; no repeats)", file.path, key.0, key.1));
        }
        previous = Some(key);
        if !known.contains(key.0) {
            problems.push(format!(
                "{}:{line}: {} is not in vm-sizes.csv",
                file.path, key.0
            ));
        }
        priced.insert(key.0);
    }
    for name in known.difference(&priced) {
        problems.push(format!(
            "data/catalog/vm-sizes.csv: {name} has no price row in any region"
        ));
    }
}

#[test]
fn the_committed_catalog_follows_its_format() {
    let mut problems = Vec::new();
    let sizes = read("data/catalog/vm-sizes.csv");
    let names = check_sizes(&sizes, &mut problems);
    check_prices(&read("data/catalog/vm-prices.csv"), &names, &mut problems);
    assert!(
        names.len() > 1000,
        "only {} sizes in data/catalog/vm-sizes.csv",
        names.len()
    );
    assert!(
        problems.is_empty(),
        "{} problems in data/catalog (regenerate with scripts/catalog/generate.py):\n{}",
        problems.len(),
        problems
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_format_checks_catch_bad_rows() {
    // Each check above can fail: a row with every kind of mistake gives one problem per column.
    let bad: Vec<String> =
        "Standard D8,8.5,9,-1,0,V100,Newton,x,,3,yes,no,maybe,ia64,perhaps,sure,-5,2026-13-01,"
            .split(',')
            .map(str::to_owned)
            .collect();
    assert_eq!(
        size_row_problems(&bad).len(),
        17,
        "{:#?}",
        size_row_problems(&bad)
    );
    let bad_price: Vec<String> = "Standard_D8s_v5,East US,0,0"
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(
        price_row_problems(&bad_price).len(),
        3,
        "{:#?}",
        price_row_problems(&bad_price)
    );
    let same: Vec<String> = "Standard_D8s_v5,eastus,0.5,0.50"
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(price_row_problems(&same).len(), 1);
    assert_eq!(size_row_problems(&["a".to_owned()]).len(), 1);
    // Issue 29: an NVMe size has no temp disk, and a Generation 1 size no Trusted Launch.
    let nvme: Vec<String> = "Standard_D8ds_v6,8,8,32,0,,,440,f,2,,,,x64,true,true,440,,docs"
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(
        size_row_problems(&nvme).len(),
        1,
        "{:?}",
        size_row_problems(&nvme)
    );
    let gen1: Vec<String> = "Standard_A1_v2,1,1,2,0,,,10,f,1,,,,x64,,,,,docs"
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(
        size_row_problems(&gen1).len(),
        1,
        "{:?}",
        size_row_problems(&gen1)
    );
}
