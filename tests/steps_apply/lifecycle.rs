//! The whole cycle on a cluster: apply runs every step in order with barriers, a second apply
//! runs nothing, a changed parameter re-runs one step, park/unpark re-run per-boot steps.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_runs_the_steps_on_every_node_and_converges() {
    let Some((_farm, w)) = World::with_farm().await else {
        return;
    };
    w.write_manifest("first");
    let mut outputs = vec![first_apply(&w).await];
    outputs.extend(reapply(&w).await);
    outputs.extend(park_and_unpark(&w).await);
    no_secret_anywhere(&w, outputs).await;
}

/// The first apply: every step on every node it applies to, private nodes through the head, the
/// VM's steps while the cluster is still being created.
async fn first_apply(w: &World) -> String {
    // The last cluster node is slow to create: the VM's steps do not wait for it.
    w.handle.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: Some("*/virtualMachines/stepsdemo-train-2".into()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::Delay {
            millis: 4000,
            jitter_millis: 0,
        },
    });

    // First apply: every step on every node it applies to, private nodes through the head.
    let first = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    let at = |needle: &str| {
        first
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} is in the output:\n{first}"))
    };
    assert!(
        at("[vm.solo] [hello] finished") < at("cluster.train[2].vm: created"),
        "vm.solo's steps ran while the cluster was still being created:\n{first}"
    );
    assert!(at("cluster.train[2].vm: created") < at("[cluster.train[0]] [prep] started"));
    assert_eq!(
        started(&first),
        [
            "[cluster.train[0]] [gather] started (new)",
            "[cluster.train[0]] [mount] started (new)",
            "[cluster.train[0]] [prep] started (new)",
            "[cluster.train[1]] [mount] started (new)",
            "[cluster.train[1]] [prep] started (new)",
            "[cluster.train[2]] [mount] started (new)",
            "[cluster.train[2]] [prep] started (new)",
            "[vm.solo] [hello] started (new)",
        ],
        "{first}"
    );
    assert!(first.contains("steps of cluster.train: done"), "{first}");
    assert!(first.contains("steps of vm.solo: done"), "{first}");
    for rank in 0..3 {
        assert_eq!(
            w.read(&format!("prep-{rank}")),
            format!("cluster.train[{rank}]\n")
        );
        assert_eq!(w.read(&format!("mount-{rank}")), "boot\n");
    }
    assert_eq!(w.read("solo"), "hello from vm.solo\n");
    // The head-only step ran after every node's prep, the slower ones included (barrier).
    assert_eq!(w.read("gather").trim(), "3");
    // Nodes 1 and 2 have no public IP: they were reached through the head.
    let state = w.state();
    let addresses: Vec<&str> = state["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["address"].as_str())
        .collect();
    assert!(addresses.contains(&"cluster.train[0].public_ip"));
    assert!(!addresses.contains(&"cluster.train[1].public_ip"));
    assert!(!addresses.contains(&"cluster.train[2].public_ip"));
    // The state records what succeeded where (the head-only step on the head only).
    let head = w.resource("cluster.train[0].vm");
    let node1 = w.resource("cluster.train[1].vm");
    let names = |r: &Value| -> Vec<String> {
        r["steps"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(names(&head), ["gather", "mount", "prep"]);
    assert_eq!(names(&node1), ["mount", "prep"]);
    assert_eq!(names(&w.resource("vm.solo.vm")), ["hello"]);
    assert!(
        head["host_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("ssh-ed25519 "))
    );
    // Logs, one per node and step.
    let logs = w.path(".dsinfra/stepsdemo/logs");
    let runs: Vec<PathBuf> = std::fs::read_dir(&logs)
        .expect("a log directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let log = runs[0].join("cluster.train[1]").join("prep.log");
    assert!(log.exists(), "{} exists", log.display());
    first
}

/// Applies again: nothing runs, an adopted VM's key is pinned on first use, a changed parameter
/// re-runs one step, `--rerun-step` forces, `--steps skip` skips.
async fn reapply(w: &World) -> Vec<String> {
    let mut outputs = Vec::new();
    // An adopted VM has no pinned key: it is trusted on first use and its key stored.
    let pinned = w.resource("vm.solo.vm")["host_key"].clone();
    let path = farm_apply::state_path(w.dir.path(), "stepsdemo");
    let mut state = w.state();
    for r in state["resources"].as_array_mut().expect("resources") {
        if r["address"] == "vm.solo.vm" {
            r.as_object_mut().expect("an object").remove("host_key");
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&state).expect("JSON")).expect("saved");
    assert!(w.resource("vm.solo.vm").get("host_key").is_none());

    // Second apply: nothing runs.
    let second = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    assert_eq!(w.resource("vm.solo.vm")["host_key"], pinned, "{second}");
    assert_eq!(started(&second), Vec::<String>::new(), "{second}");
    assert!(
        second.contains("[cluster.train[2]] [prep] skipped (up to date)"),
        "{second}"
    );
    assert_eq!(w.read("prep-1"), "cluster.train[1]\n");
    outputs.push(second);

    // A changed parameter re-runs that step only.
    w.write_manifest("second");
    let changed = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    assert_eq!(
        started(&changed),
        ["[cluster.train[0]] [gather] started (changed)"],
        "{changed}"
    );
    outputs.push(changed);

    // --rerun-step forces a step on every node it applies to.
    let rerun = w
        .ok(&[
            "apply",
            "stepsdemo.hcl",
            "--auto-approve",
            "--rerun-step",
            "prep",
        ])
        .await;
    assert_eq!(
        started(&rerun),
        [
            "[cluster.train[0]] [prep] started (forced)",
            "[cluster.train[1]] [prep] started (forced)",
            "[cluster.train[2]] [prep] started (forced)",
        ],
        "{rerun}"
    );
    assert_eq!(w.read("prep-2"), "cluster.train[2]\ncluster.train[2]\n");
    outputs.push(rerun);

    // --steps skip runs nothing and says so.
    let skip = w
        .ok(&[
            "apply",
            "stepsdemo.hcl",
            "--auto-approve",
            "--steps",
            "skip",
            "--rerun-step",
            "prep",
        ])
        .await;
    assert_eq!(started(&skip), Vec::<String>::new(), "{skip}");
    assert!(
        skip.contains("post-boot step(s) were skipped (--steps skip)"),
        "{skip}"
    );
    outputs.push(skip);
    outputs
}

/// Park, then unpark: the started VMs boot afresh, so the per-boot step runs again there.
async fn park_and_unpark(w: &World) -> Vec<String> {
    let mut outputs = Vec::new();
    // Park, then unpark: the started VMs boot afresh, so the per-boot step runs again there.
    outputs.push(w.ok(&["park", "stepsdemo.hcl", "--auto-approve"]).await);
    let unpark = w.ok(&["unpark", "stepsdemo.hcl", "--auto-approve"]).await;
    assert_eq!(
        started(&unpark),
        [
            "[cluster.train[0]] [mount] started (rebooted)",
            "[cluster.train[1]] [mount] started (rebooted)",
            "[cluster.train[2]] [mount] started (rebooted)",
        ],
        "{unpark}"
    );
    assert_eq!(w.read("mount-0"), "boot\nboot\n");
    let head = w.resource("cluster.train[0].vm");
    assert_eq!(head["boots"], 1);
    assert_eq!(head["steps"]["mount"]["boot"], 1);
    assert_eq!(head["steps"]["prep"]["boot"], 0);
    outputs.push(unpark);
    outputs
}

/// The credentials the engine resolves for steps are in no state, output or log.
async fn no_secret_anywhere(w: &World, outputs: Vec<String>) {
    let logs = w.path(".dsinfra/stepsdemo/logs");
    // The credentials the engine resolves for steps (the account key via listKeys, the SAS
    // re-derived as apply signed it) never reach the state, the output or the logs. (No step
    // here uses them: `script` takes no secret input, and every kind that does would change
    // this machine's system configuration; tests/ssh.rs holds the runner's redaction.)
    let (sas, account_key) = w.credentials().await;
    let mut keys = w.account_keys().await;
    assert_eq!(keys.first(), Some(&account_key));
    keys.push(sas.clone());
    keys.push(
        sas.split('&')
            .find_map(|p| p.strip_prefix("sig="))
            .expect("a SAS has a signature")
            .to_owned(),
    );
    let mut haystacks: Vec<(String, String)> = vec![("state".into(), w.state_text())];
    haystacks.extend(
        outputs
            .into_iter()
            .enumerate()
            .map(|(i, o)| (format!("run {i}"), o)),
    );
    haystacks.extend(
        files_below(&logs)
            .into_iter()
            .map(|(p, t)| (p.display().to_string(), t)),
    );
    for key in &keys {
        for (name, text) in &haystacks {
            assert!(!text.contains(key.as_str()), "an account key is in {name}");
        }
    }
}
