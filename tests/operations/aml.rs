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

    let empty = |dir: &Path| {
        run(dir, &["plan", file, "--emulator", "--detailed-exitcode"])
            .code(0)
            .get_output()
            .clone()
    };
    empty(dir);

    // Without a terminal the question cannot be asked, but the warning before it is shown: a
    // cluster's park deletes its nodes, which the VM wording ("deallocates") would hide.
    let unasked = run(dir, &["park", file, "--emulator"]).failure();
    let err = stderr(&unasked);
    assert!(
        err.contains("note: parking scales the AmlCompute clusters to zero nodes: Azure DELETES the nodes and their local disks (the BeeOND scratch and anything else under /mnt is lost)"),
        "{err}"
    );
    assert!(err.contains("unpark makes new nodes"), "{err}");
    assert!(!err.contains("parking deallocates the VMs"), "{err}");
    assert_eq!(compute_power(dir).as_deref(), Some("running"));

    run(dir, &["park", file, "--emulator", "--auto-approve"]).success();
    assert_eq!(compute_power(dir).as_deref(), Some("deallocated"));
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
