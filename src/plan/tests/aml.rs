//! Issue 17: plans of `aml_workspace` and `aml_cluster` blocks, from examples/aml-beeond.hcl as
//! the manifest layer loads it: what changes in place, what replaces, the steps and the notes.

use std::path::Path;

use super::*;
use crate::manifest::{LoadOptions, load};
use crate::model::Desired;

fn example() -> Desired {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/aml-beeond.hcl");
    load(&path, &LoadOptions::default())
        .expect("the example loads")
        .desired
}

const COMPUTE: &str = "aml_cluster.beeond.compute";

/// The example as an apply leaves it: every resource created, and the compute's four nodes
/// recorded (by node id, as apply lists them) with every step of the block succeeded on them.
fn applied_example() -> State {
    let desired = example();
    let mut state = State::from_applied(&desired, "sub");
    let compute = state.resource_mut(&addr(COMPUTE)).expect("recorded");
    for i in 0..4 {
        let node = compute.node_mut(&format!("tvm-{i}"));
        node.host_key = Some(format!("ssh-ed25519 KEY{i}"));
        for step in &desired.steps {
            node.steps.insert(
                step.name.clone(),
                crate::state::StepRecord {
                    fingerprint: step.fingerprint(),
                    boot: 0,
                    at: "2026-11-26T18:00:00Z".to_owned(),
                },
            );
        }
    }
    state
}

/// Where each planned step runs and why, as the plan text puts it.
fn step_reasons(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .flat_map(|s| {
            s.by_reason().into_iter().map(move |(reason, nodes)| {
                format!("{} {}: {reason}", s.name, nodes_text(&s.block, &nodes))
            })
        })
        .collect()
}

#[test]
fn a_new_cluster_runs_every_step_on_every_node_and_says_what_parking_loses() {
    let plan = plan(&example(), &State::new("aml-beeond"), &normal()).expect("plans");
    assert_eq!(
        step_reasons(&plan),
        [
            "beeond aml_cluster.beeond[0..3] (4 nodes): new node",
            "stage aml_cluster.beeond[0..3] (4 nodes): new node",
            "elbencho aml_cluster.beeond[0]: new node",
        ]
    );
    let compute = plan.change(&addr(COMPUTE)).expect("planned");
    // The compute comes after its workspace, which comes after what it needs.
    let position = |a: &str| plan.changes.iter().position(|c| c.address == addr(a));
    assert!(position("aml_workspace.ws.workspace") < position(COMPUTE));
    assert!(position("aml_workspace.ws.key_vault") < position("aml_workspace.ws.workspace"));
    assert_eq!(compute.action, Action::Create);
    assert_eq!(plan.notes.len(), 2);
    assert!(
        plan.notes[0].contains("trusted on first use"),
        "{:?}",
        plan.notes
    );
    assert!(plan.notes[1].contains("deletes the nodes and their local disks"));
}

#[test]
fn the_applied_example_plans_nothing_and_no_steps() {
    let plan = plan(&example(), &applied_example(), &normal()).expect("plans");
    assert!(!plan.has_changes());
    assert!(plan.steps.iter().all(|s| !s.runs()));
    assert!(plan.notes.is_empty(), "{:?}", plan.notes);
}

#[test]
fn a_count_or_idle_change_updates_the_compute_in_place() {
    let mut desired = example();
    set(&mut desired, COMPUTE, "count", json!(6));
    set(
        &mut desired,
        COMPUTE,
        "idle_seconds_before_scaledown",
        json!(600),
    );
    let plan = plan(&desired, &applied_example(), &normal()).expect("plans");
    let compute = plan.change(&addr(COMPUTE)).expect("planned");
    assert_eq!(compute.action, Action::Update);
    assert_eq!(
        compute.reasons[0].to_string(),
        "`count`, `idle_seconds_before_scaledown` changed"
    );
    assert_eq!(plan.counts().change, 1);
    assert_eq!(plan.counts().replace + plan.counts().add, 0);
    // The two new nodes run every step; the four there already are up to date.
    assert_eq!(
        step_reasons(&plan),
        [
            "beeond aml_cluster.beeond[4,5] (2 nodes): new node",
            "beeond aml_cluster.beeond[0..3] (4 nodes): up to date",
            "stage aml_cluster.beeond[4,5] (2 nodes): new node",
            "stage aml_cluster.beeond[0..3] (4 nodes): up to date",
            "elbencho aml_cluster.beeond[0]: up to date",
        ]
    );
    let price = crate::catalog::price("Standard_ND40rs_v2", "southcentralus").expect("priced");
    let growth = plan.cost.after.running_per_hour - plan.cost.before.running_per_hour;
    assert!((growth - 2.0 * price.linux_payg).abs() < 1e-6, "{growth}");
    assert!(plan.cost.after.parked_per_hour.abs() < f64::EPSILON);
}

#[test]
fn a_size_or_priority_change_replaces_the_compute_naming_the_attribute() {
    for (attribute, value) in [
        ("size", json!("Standard_ND96asr_v4")),
        ("priority", json!("LowPriority")),
        ("ssh_public_key", json!("ssh-ed25519 AAAA other")),
    ] {
        let mut desired = example();
        set(&mut desired, COMPUTE, attribute, value);
        let plan = plan(&desired, &applied_example(), &normal()).expect("plans");
        let compute = plan.change(&addr(COMPUTE)).expect("planned");
        assert_eq!(
            compute.action,
            Action::Replace {
                forced_by: vec![attribute.to_owned()]
            }
        );
        assert_eq!(
            compute.reasons[0].to_string(),
            format!("`{attribute}` cannot change in place")
        );
        assert_eq!(plan.counts().replace, 1, "{attribute}");
        // New nodes: every step runs everywhere, and the notes say so again.
        assert!(
            plan.steps
                .iter()
                .all(|s| s.reasons.iter().all(|r| r.reason == StepReason::NewNode))
        );
        assert_eq!(plan.notes.len(), 2);
    }
}

#[test]
fn a_replaced_workspace_takes_its_compute_along() {
    let mut desired = example();
    set(
        &mut desired,
        "aml_workspace.ws.workspace",
        "location",
        json!("eastus"),
    );
    let plan = plan(&desired, &applied_example(), &normal()).expect("plans");
    let compute = plan.change(&addr(COMPUTE)).expect("planned");
    assert!(matches!(compute.action, Action::Replace { .. }));
    assert_eq!(
        compute.reasons,
        [Reason::ParentReplaced {
            parent: addr("aml_workspace.ws.workspace")
        }]
    );
}

#[test]
fn destroy_keep_data_keeps_the_workspace_and_what_it_needs() {
    let options = PlanOptions {
        mode: Mode::Destroy { keep_data: true },
        ..normal()
    };
    let plan = plan(&example(), &applied_example(), &options).expect("plans");
    let deleted = addresses(&plan, |c| c.action == Action::Delete);
    assert!(deleted.contains(&COMPUTE.to_owned()), "{deleted:?}");
    for kept in [
        "aml_workspace.ws.workspace",
        "aml_workspace.ws.storage",
        "aml_workspace.ws.key_vault",
        "aml_workspace.ws.insights",
        "aml_workspace.ws.logs",
    ] {
        assert!(!deleted.contains(&kept.to_owned()), "{kept} is kept");
    }
}
