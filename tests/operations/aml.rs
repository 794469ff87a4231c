//! Issue 17: examples/aml-beeond.hcl through the whole lifecycle against the built-in emulator,
//! as a user runs it: apply creates the workspace's dependencies, the workspace and a 4-node
//! AmlCompute and lists its nodes; the plan after apply is empty; park scales the cluster to zero
//! (the plan stays empty); unpark brings 4 new nodes; destroy leaves nothing, twice over (the
//! key vault's soft-deleted name is purged, so a second apply can take it again).

use std::path::Path;

use super::{dsinfra, stderr, stdout};

fn run(dir: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    dsinfra(dir)
        .env("DSINFRA_EMULATOR_LATENCY_SCALE", "0.001")
        .args(args)
        .assert()
}

fn example_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(
        root.join("aml-beeond.hcl"),
        dir.path().join("aml-beeond.hcl"),
    )
    .expect("copy the example");
    std::fs::create_dir(dir.path().join("keys")).expect("keys dir");
    std::fs::copy(root.join("keys/demo.pub"), dir.path().join("keys/demo.pub"))
        .expect("copy the key");
    dir
}

/// The node ids apply or unpark listed (`aml_cluster.beeond[i]  <node id>  ip:port ...`).
fn node_ids(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.trim_start().starts_with("aml_cluster.beeond[") && l.contains(" private "))
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect()
}

fn state(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join(".dsinfra/aml-beeond/state.json"))
        .expect("the state is written");
    serde_json::from_str(&text).expect("json")
}

fn compute_power(dir: &Path) -> Option<String> {
    state(dir)["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["address"] == "aml_cluster.beeond.compute")
        .and_then(|r| r["power_state"].as_str().map(str::to_owned))
}

/// The cluster's row in `dsinfra status --emulator`: its cells (address, size, nodes, $/hour).
fn status_row(dir: &Path, file: &str) -> Vec<String> {
    let status = run(dir, &["status", file, "--emulator"]).success();
    let text = stdout(&status);
    let row = text
        .lines()
        .find(|l| l.starts_with("aml_cluster.beeond.compute "))
        .unwrap_or_else(|| panic!("status has a row for the cluster:\n{text}"));
    row.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_aml_example_applies_parks_unparks_and_destroys_against_the_emulator() {
    let dir = example_dir();
    let dir = dir.path();
    let file = "aml-beeond.hcl";
    let apply = run(dir, &["apply", file, "--emulator", "--auto-approve"]).success();
    let out = stdout(&apply) + &stderr(&apply);
    assert!(out.contains("Apply complete: 10 created"), "{out}");
    let first = node_ids(&out);
    assert_eq!(first.len(), 4, "apply lists the four nodes: {out}");
    assert_eq!(compute_power(dir).as_deref(), Some("running"));
    // Status reads the compute: four idle nodes, at four nodes' price.
    let row = status_row(dir, file);
    assert_eq!(
        row[1..3],
        ["Standard_ND40rs_v2", "4 nodes: 4 idle"],
        "{row:?}"
    );
    let running_rate = row[3].clone();
    assert_ne!(running_rate, "$0.00", "{row:?}");

    let empty = |dir: &Path| {
        run(dir, &["plan", file, "--emulator", "--detailed-exitcode"])
            .code(0)
            .get_output()
            .clone()
    };
    empty(dir);

    run(dir, &["park", file, "--emulator", "--auto-approve"]).success();
    assert_eq!(compute_power(dir).as_deref(), Some("deallocated"));
    let row = status_row(dir, file);
    assert_eq!(
        row[1..],
        ["Standard_ND40rs_v2", "parked (0 nodes)", "$0.00"],
        "{row:?}"
    );
    empty(dir);

    let unpark = run(dir, &["unpark", file, "--emulator", "--auto-approve"]).success();
    let out = stdout(&unpark) + &stderr(&unpark);
    let again = node_ids(&out);
    assert_eq!(again.len(), 4, "unpark lists four nodes: {out}");
    assert!(
        again.iter().all(|id| !first.contains(id)),
        "the nodes after unpark are new nodes: {first:?} then {again:?}"
    );
    assert_eq!(compute_power(dir).as_deref(), Some("running"));
    let row = status_row(dir, file);
    assert_eq!(
        row[1..],
        [
            "Standard_ND40rs_v2",
            "4 nodes: 4 idle",
            running_rate.as_str()
        ],
        "{row:?}"
    );

    for round in 0..2 {
        let destroy = run(dir, &["destroy", file, "--emulator", "--auto-approve"]).success();
        assert!(
            stdout(&destroy).contains("Destroy complete: 0 created, 0 updated, 10 deleted"),
            "round {round}: {}",
            stdout(&destroy)
        );
        assert_eq!(state(dir)["resources"], serde_json::json!([]));
        if round == 0 {
            // The key vault's name is free again: the purge after its delete released it.
            run(dir, &["apply", file, "--emulator", "--auto-approve"]).success();
        }
    }
}
