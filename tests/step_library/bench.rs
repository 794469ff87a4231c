//! The benchmark kinds (issue 19): an `elbencho` sweep renders one point per combination of its
//! lists, in the tutorial's order, and names its results; `storage_bench` renders fio's three
//! passes per path; bad values are refused by the library too (whoever built the parameters).

use super::*;

/// The context the benchmark renders use: a cluster of four.
fn bench_context() -> NodeContext {
    let nodes = (0..4)
        .map(|i| ClusterNode {
            name: format!("bench-{i}"),
            private_ip: format!("10.2.0.{}", 4 + i),
            ssh_port: 22,
        })
        .collect();
    let mut ctx = NodeContext::new("bench", "cluster.bench", nodes);
    ctx.vm_size = Some("Standard_HB120rs_v3".to_owned());
    ctx.image = Some("microsoft-dsvm:ubuntu-hpc:2204:latest".to_owned());
    ctx
}

fn render_kind(kind: &str, params: &Value) -> Result<Expansion, LibraryError> {
    let mut params: BTreeMap<String, Value> =
        serde_json::from_value(params.clone()).expect("a map");
    params.insert("timeout".into(), json!("1h"));
    let request = StepRequest {
        name: kind,
        kind,
        scope: Scope::Head,
        policy: RunPolicy::Once,
        params: &params,
    };
    library::render(&request, &bench_context())
}

/// The benchmark steps every shellcheck and strictness test sees too.
pub fn renders() -> Vec<StepSpec> {
    let sweep = render_kind(
        "elbencho",
        &json!({"threads": [1, 4], "block_sizes": ["256K", "4M"], "files": 2, "file_size": "1M"}),
    )
    .expect("the sweep renders");
    let compare = render_kind(
        "storage_bench",
        &json!({"paths": ["/mnt/resource", "/mnt/blob"], "files": 4, "file_size": "16M",
                "block_size": "1M", "threads": 2, "drop_caches": true,
                "results": "/var/log/dsinfra/storage_bench.txt"}),
    )
    .expect("storage_bench renders");
    sweep.steps.into_iter().chain(compare.steps).collect()
}

#[test]
fn a_sweep_runs_every_point_and_its_results_keep_their_provenance() {
    let sweep = render_kind(
        "elbencho",
        &json!({"threads": [1, 4], "block_sizes": ["256K", "4M"], "files": 2, "file_size": "1M"}),
    )
    .expect("renders");
    let run = &sweep.steps[2].script;
    let points: Vec<&str> = run.lines().filter(|l| l.starts_with("point ")).collect();
    // Block size outermost, threads innermost: the order of the tutorial's figures.
    assert_eq!(
        points,
        [
            "point 1 2 '1M' '256K'",
            "point 4 2 '1M' '256K'",
            "point 1 2 '1M' '4M'",
            "point 4 2 '1M' '4M'"
        ]
    );
    assert!(run.contains("--hosts \"$hosts\""), "{run}");
    assert!(run.contains("hosts='10.2.0.4:1611,10.2.0.5:1611,10.2.0.6:1611,10.2.0.7:1611'"));
    let fetch = &sweep.fetch[0];
    let results = fetch.results.as_ref().expect("the CSV becomes results");
    assert_eq!(results.local, "results/elbencho.jsonl");
    assert_eq!(results.provenance.nodes, 4);
    assert_eq!(
        results.provenance.size.as_deref(),
        Some("Standard_HB120rs_v3")
    );
    assert_eq!(results.provenance.params["threads"], json!([1, 4]));
    // The list replaces the one-value default in what the results say produced them.
    assert!(!results.provenance.params.contains_key("block_size"));
    assert_eq!(results.provenance.params["file_size"], "1M");

    // A scalar is a one-point sweep, as before.
    let one = render_kind("elbencho", &json!({"threads": 8})).expect("renders");
    let points: Vec<&str> = one.steps[2]
        .script
        .lines()
        .filter(|l| l.starts_with("point "))
        .collect();
    assert_eq!(points, ["point 8 128 '64M' '4M'"]);
}

#[test]
fn storage_bench_measures_three_passes_per_path() {
    let compare = render_kind(
        "storage_bench",
        &json!({"paths": ["/mnt/resource", "/mnt/blob"], "file_size": "16M", "files": 4}),
    )
    .expect("renders");
    let names: Vec<&str> = compare.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["storage_bench.install", "storage_bench"]);
    let script = &compare.steps[1].script;
    assert!(
        script.contains("paths=('/mnt/resource' '/mnt/blob')"),
        "{script}"
    );
    for pass in [
        "write write 1 n/a",
        "read-cold read 1 \"$dropped\"",
        "read-warm read 0 n/a",
    ] {
        assert!(script.contains(&format!("pass \"$path\" {pass}")), "{pass}");
    }
    assert!(
        script.contains("--nrfiles=4 --filesize=16777216"),
        "{script}"
    );
    assert!(script.contains("--size=67108864"), "{script}");
    assert_eq!(compare.fetch[0].local, "storage_bench/storage_bench.txt");
}

#[test]
fn bad_sweep_values_are_refused_by_the_library_too() {
    let bad = |kind: &str, params: Value| render_kind(kind, &params).expect_err("refused");
    assert!(
        bad("elbencho", json!({"block_sizes": ["4MB"]}))
            .to_string()
            .contains("\"4MB\" is not a size"),
    );
    assert!(
        bad("elbencho", json!({"threads": []}))
            .to_string()
            .contains("at least 1")
    );
    assert!(matches!(
        bad("storage_bench", json!({})),
        LibraryError::MissingParam { .. }
    ));
    assert!(
        bad("storage_bench", json!({"paths": ["{temp}/x"]}))
            .to_string()
            .contains("must be an absolute path")
    );
    assert!(
        bad("storage_bench", json!({"paths": ["/a b"]}))
            .to_string()
            .contains("whitespace")
    );
}

#[test]
fn benchmark_renders_match_their_snapshot() {
    let text: String = renders().iter().map(spec_text).collect();
    insta::assert_snapshot!("bench", text);
}
