//! Issue 18: `park { idle = "45m" }` on `vm` and `cluster` blocks, from text to what the engine
//! reads (`Desired::park_idle`) and the resources it adds (decision 52).

use std::time::Duration;

use super::*;

fn manifest(blocks: &str) -> String {
    format!(
        "experiment = \"exp\"\nazure {{ location = \"eastus\" }}\nnetwork \"main\" {{ ssh_from = [\"198.51.100.0/24\"] }}\n{blocks}"
    )
}

fn block(kind: &str, label: &str, extra: &str, park: &str) -> String {
    format!(
        "{kind} \"{label}\" {{\n  size    = \"Standard_D4ds_v5\"\n  ssh_key = \"{KEY}\"\n{extra}\n  park {{\n{park}\n  }}\n}}\n"
    )
}

fn load_idle(text: &str) -> Loaded {
    load_ok(Path::new("exp.hcl"), text, &LoadOptions::default())
}

#[test]
fn idle_alone_or_with_a_schedule_is_carried_per_block() {
    let text = manifest(&format!(
        "{}{}{}",
        block("vm", "gpu", "", "    idle = \"45m\""),
        block(
            "cluster",
            "train",
            "  count = 3\n  step \"ssh_mesh\" {}",
            "    at   = \"19:00\"\n    idle = \"1h30m\""
        ),
        block("vm", "evening", "", "    at = \"19:00\""),
    ));
    let desired = load_idle(&text).desired;
    let vm = Address::block("vm", "gpu");
    let cluster = Address::block("cluster", "train");
    assert_eq!(desired.park_idle_of(&vm), Some(Duration::from_mins(45)));
    assert_eq!(
        desired.park_idle_of(&cluster),
        Some(Duration::from_mins(90))
    );
    assert_eq!(
        desired.park_idle_of(&Address::new("cluster", "train", Some(2), "vm")),
        Some(Duration::from_mins(90)),
        "a node's address finds its block's window"
    );
    assert_eq!(desired.park_idle_of(&Address::block("vm", "evening")), None);
    assert_eq!(desired.park_idle.len(), 2);
    // Idle alone makes no auto-shutdown schedule; with `at`, every node still gets one.
    let schedules: Vec<String> = desired
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::AutoShutdownSchedule)
        .map(|r| r.address.to_string())
        .collect();
    assert_eq!(
        schedules,
        [
            "cluster.train[0].auto_shutdown",
            "cluster.train[1].auto_shutdown",
            "cluster.train[2].auto_shutdown",
            "vm.evening.auto_shutdown"
        ]
    );
}

#[test]
fn a_one_node_cluster_needs_no_mesh() {
    let text = manifest(&block(
        "cluster",
        "solo",
        "  count = 1",
        "    idle = \"10m\"",
    ));
    let desired = load_idle(&text).desired;
    assert_eq!(
        desired.park_idle_of(&Address::block("cluster", "solo")),
        Some(Duration::from_mins(10))
    );
}
