//! Snapshot tests of rendered plans (colour off), made from real manifests through
//! `manifest::load_str`, against the state an apply of an earlier manifest would leave
//! (`State::from_applied`). Each snapshot was read line by line before it was accepted; a change
//! to one is a change to what users see, so review the diff the same way.

use std::collections::BTreeSet;
use std::path::Path;

use chrono::{DateTime, Utc};
use dsinfra::addr::Address;
use dsinfra::diag::SourceMap;
use dsinfra::manifest::{self, LoadOptions};
use dsinfra::model::{Desired, ResourceKind, StepScope};
use dsinfra::plan::{self, Mode, Plan, PlanOptions};
use dsinfra::render;
use dsinfra::state::{PowerState, State, StepRecord};

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra";

/// A small dual-VM experiment: a CPU VM, a GPU VM parked at night, storage with a container.
fn dual(gpu_size: &str, with_storage: bool) -> String {
    let storage = if with_storage {
        "storage_account \"data\" {\n  container \"datasets\" {}\n}\n"
    } else {
        ""
    };
    format!(
        r#"experiment = "dual"

azure {{ location = "eastus" }}

network "main" {{ ssh_from = ["203.0.113.7/32"] }}

{storage}
vm "prep" {{
  size    = "Standard_D4ds_v5"
  image   = "dsvm-ubuntu-22.04"
  ssh_key = "{KEY}"
}}

vm "gpu" {{
  size    = "{gpu_size}"
  image   = "dsvm-ubuntu-22.04"
  ssh_key = "{KEY}"
  park {{ at = "19:00" }}
}}
"#
    )
}

/// A cluster of `count` ND40rs_v2 nodes with steps, a protected storage account and a data disk.
fn cluster(count: u32) -> String {
    format!(
        r#"experiment = "cosmo"

azure {{ location = "southcentralus" }}

network "hpc" {{ ssh_from = ["203.0.113.7/32"] }}

storage_account "data" {{
  container "cosmoflow" {{}}
  lifecycle {{ prevent_destroy = true }}
}}

sas "read" {{
  container  = storage_account.data.container.cosmoflow
  expires_in = "72h"
}}

cluster "train" {{
  size    = "Standard_ND40rs_v2"
  count   = {count}
  image   = "hpc-ubuntu-22.04"
  ssh_key = "{KEY}"

  step "mofed" {{}}
  step "beeond" {{ mount = "/mnt/scratch" }}
  step "stage" {{
    from       = storage_account.data.container.cosmoflow
    sas        = sas.read
    to         = "/mnt/scratch/cosmoflow"
    decompress = true
  }}
}}
"#
    )
}

fn load(name: &str, text: &str) -> (Desired, SourceMap) {
    let opts = LoadOptions {
        env: Box::new(|_| None),
        ..LoadOptions::default()
    };
    match manifest::load_str(Path::new(name), text, &opts) {
        Ok(loaded) => (loaded.desired, loaded.sources),
        Err(failed) => panic!(
            "test manifest {name} does not load:\n{}",
            render::diagnostics(&failed.diagnostics, &failed.sources, false)
        ),
    }
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-22T06:00:00Z")
        .expect("valid time")
        .with_timezone(&Utc)
}

fn options(mode: Mode) -> PlanOptions {
    PlanOptions {
        mode,
        targets: Vec::new(),
        now: now(),
        rerun_steps: BTreeSet::new(),
    }
}

/// Records in `state` that every step of `desired` succeeded on every node it runs on, at each
/// VM's current boot, as an apply that ran the steps leaves it.
fn record_steps(state: &mut State, desired: &Desired) {
    for step in &desired.steps {
        for r in &mut state.resources {
            let node = r.kind == ResourceKind::VirtualMachine
                && r.address.block_address() == step.block
                && (step.scope == StepScope::All || r.address.index.unwrap_or(0) == 0);
            if node {
                r.steps.insert(
                    step.name.clone(),
                    StepRecord {
                        fingerprint: step.fingerprint(),
                        boot: r.boots,
                        at: "2026-11-22T05:00:00Z".to_owned(),
                    },
                );
            }
        }
    }
}

/// The state an apply of `applied` leaves after its steps ran everywhere, changed by `edit`.
fn ran(applied: &str, edit: impl FnOnce(&mut State)) -> State {
    let desired = load("before.hcl", applied).0;
    let mut state = State::from_applied(&desired, "00000000-sub");
    record_steps(&mut state, &desired);
    edit(&mut state);
    state
}

/// Plan `text` against `state` with `rerun` steps forced.
fn plan_against(state: &State, text: &str, rerun: &[&str]) -> Plan {
    let (desired, sources) = load("exp.hcl", text);
    let opts = PlanOptions {
        rerun_steps: rerun.iter().map(|r| (*r).to_owned()).collect(),
        ..options(Mode::Normal)
    };
    plan::plan(&desired, state, &opts).unwrap_or_else(|diags| {
        panic!(
            "planning failed:\n{}",
            render::diagnostics(&diags, &sources, false)
        )
    })
}

/// Plan `text` against the state an apply of `applied` (if any) would leave.
fn plan_of(applied: Option<&str>, text: &str, mode: Mode) -> Plan {
    let state = match applied {
        Some(before) => State::from_applied(&load("before.hcl", before).0, "00000000-sub"),
        None => State::new("test"),
    };
    let (desired, sources) = load("exp.hcl", text);
    plan::plan(&desired, &state, &options(mode)).unwrap_or_else(|diags| {
        panic!(
            "planning failed:\n{}",
            render::diagnostics(&diags, &sources, false)
        )
    })
}

#[test]
fn from_empty() {
    let plan = plan_of(None, &dual("Standard_NC4as_T4_v3", true), Mode::Normal);
    assert!(plan.has_changes());
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn no_op() {
    let text = dual("Standard_NC4as_T4_v3", true);
    let plan = plan_of(Some(&text), &text, Mode::Normal);
    assert!(!plan.has_changes());
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn vm_size_change_replaces_the_vm() {
    let plan = plan_of(
        Some(&dual("Standard_NC4as_T4_v3", true)),
        &dual("Standard_NC24ads_A100_v4", true),
        Mode::Normal,
    );
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn storage_removed_is_deleted() {
    let plan = plan_of(
        Some(&dual("Standard_NC4as_T4_v3", true)),
        &dual("Standard_NC4as_T4_v3", false),
        Mode::Normal,
    );
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

/// Issue 34: the flagship cluster made spot. Azure fixes a VM's priority at creation, so every
/// node is replaced (the plan names `priority`), and the cost section prices the nodes at the
/// catalog's spot price beside the on-demand one, with the block's saving.
#[test]
fn the_flagship_cluster_goes_spot() {
    let spot = cluster(4).replace(
        "  ssh_key = \"",
        "  priority = \"spot\"\n  eviction = \"delete\"\n  ssh_key = \"",
    );
    assert!(spot.contains("priority = \"spot\""));
    let plan = plan_of(Some(&cluster(4)), &spot, Mode::Normal);
    let text = render::plan_text(&plan, false);
    assert!(
        text.contains("cluster.train: 4 spot VMs at $19.543/h instead of $105.752/h on-demand: saves $86.209/h (82%) while running"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn cluster_grows_from_4_to_6_nodes() {
    let plan = plan_of(Some(&cluster(4)), &cluster(6), Mode::Normal);
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

/// The address of node `i`'s VM in the `train` cluster.
fn node_vm(i: u32) -> Address {
    Address::new("cluster", "train", Some(i), "vm")
}

fn fabric() -> Address {
    Address::new("cluster", "train", None, "availability_set")
}

fn change<'p>(plan: &'p Plan, address: &Address) -> &'p plan::Change {
    plan.changes
        .iter()
        .find(|c| &c.address == address)
        .unwrap_or_else(|| panic!("{address} is in the plan"))
}

/// Regression (issue 13): an InfiniBand cluster used to be separate VMs in a placement group,
/// which Azure does not connect over InfiniBand. Every node must be in the cluster's one
/// availability set (Aligned, in the placement group, one fault and one update domain).
#[test]
fn every_node_of_an_infiniband_cluster_is_in_one_availability_set() {
    let plan = plan_of(None, &cluster(4), Mode::Normal);
    let set = change(&plan, &fabric());
    assert_eq!(set.kind, ResourceKind::AvailabilitySet);
    assert_eq!(set.action, plan::Action::Create);
    let after = set.after.as_ref().expect("created");
    assert_eq!(after["sku"], "Aligned");
    assert_eq!(after["proximity_placement_group"], "cluster.train.ppg");
    assert_eq!(
        (&after["fault_domain_count"], &after["update_domain_count"]),
        (&serde_json::json!(1), &serde_json::json!(1))
    );
    for i in 0..4 {
        let vm = change(&plan, &node_vm(i));
        let attrs = vm.after.as_ref().expect("created");
        assert_eq!(attrs["availability_set"], "cluster.train.availability_set");
        assert!(vm.depends_on.contains(&fabric()), "{:?}", vm.depends_on);
    }
}

/// Growing the cluster adds VMs to the same set and leaves the set and nodes 0-3 alone.
#[test]
fn growing_an_infiniband_cluster_keeps_its_fabric_and_its_nodes() {
    let plan = plan_of(Some(&cluster(4)), &cluster(6), Mode::Normal);
    assert_eq!(change(&plan, &fabric()).action, plan::Action::NoOp);
    for i in 0..4 {
        assert_eq!(
            change(&plan, &node_vm(i)).action,
            plan::Action::NoOp,
            "node {i}"
        );
    }
    for i in 4..6 {
        let vm = change(&plan, &node_vm(i));
        assert_eq!(vm.action, plan::Action::Create, "node {i}");
        assert_eq!(
            vm.after.as_ref().expect("created")["availability_set"],
            "cluster.train.availability_set"
        );
    }
    // Shrinking keeps the fabric too.
    let plan = plan_of(Some(&cluster(6)), &cluster(4), Mode::Normal);
    assert_eq!(change(&plan, &fabric()).action, plan::Action::NoOp);
    assert_eq!(change(&plan, &node_vm(5)).action, plan::Action::Delete);
    assert_eq!(change(&plan, &node_vm(3)).action, plan::Action::NoOp);
}

/// A node created before the cluster had a fabric cannot join it in place (Azure puts a VM in an
/// availability set only at creation): the plan replaces it and names the attribute.
#[test]
fn a_node_outside_the_fabric_is_replaced_and_the_plan_names_why() {
    let state = ran(&cluster(2), |state| {
        state.remove(&fabric());
        for i in 0..2 {
            let vm = state
                .resource_mut(&node_vm(i))
                .expect("the VM is in the state");
            vm.attrs.remove("availability_set");
        }
    });
    let plan = plan_against(&state, &cluster(2), &[]);
    assert_eq!(change(&plan, &fabric()).action, plan::Action::Create);
    for i in 0..2 {
        assert_eq!(
            change(&plan, &node_vm(i)).action,
            plan::Action::Replace {
                forced_by: vec!["availability_set".to_owned()]
            }
        );
    }
    let text = render::plan_text(&plan, false);
    assert!(
        text.contains("availability_set"),
        "the plan names the attribute that forces the replacement:\n{text}"
    );
}

#[test]
fn destroy_keep_data() {
    let text = cluster(2);
    let plan = plan_of(Some(&text), &text, Mode::Destroy { keep_data: true });
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn prevent_destroy_refuses_destroy() {
    let text = cluster(2);
    let state = State::from_applied(&load("before.hcl", &text).0, "00000000-sub");
    let (desired, sources) = load("exp.hcl", &text);
    let diags = plan::plan(
        &desired,
        &state,
        &options(Mode::Destroy { keep_data: false }),
    )
    .expect_err("prevent_destroy refuses");
    insta::assert_snapshot!(render::diagnostics(&diags, &sources, false));
}

/// `dual` with a data disk of `size_gb` GiB attached to the prep VM.
fn with_disk(size_gb: u32) -> String {
    with_disk_of(size_gb, "Premium_LRS")
}

fn with_disk_of(size_gb: u32, sku: &str) -> String {
    format!(
        "{}\ndisk \"datasets\" {{\n  size_gb   = {size_gb}\n  sku       = \"{sku}\"\n  attach_to = vm.prep\n}}\n",
        dual("Standard_NC4as_T4_v3", false)
    )
}

/// The state an apply of a Premium_LRS `disk.datasets` on `vm.prep` leaves, that VM in `power`
/// as the refresh before a plan would record it.
fn disk_applied(power: PowerState) -> State {
    let mut state = State::from_applied(
        &load("before.hcl", &with_disk_of(1024, "Premium_LRS")).0,
        "00000000-sub",
    );
    let vm: Address = "vm.prep.vm".parse().expect("an address");
    state
        .resources
        .iter_mut()
        .find(|r| r.address == vm)
        .expect("vm.prep is in the state")
        .power_state = Some(power);
    state
}

/// Regression: a new `sku` on a managed disk used to replace it (delete, then create), losing
/// its data, for what Azure does in place. With the disk's VM parked it is an update in place.
#[test]
fn a_disks_new_sku_is_an_update_in_place_while_its_vm_is_parked() {
    let plan = plan_against(
        &disk_applied(PowerState::Deallocated),
        &with_disk_of(1024, "StandardSSD_LRS"),
        &[],
    );
    let disk = plan
        .change(&"disk.datasets".parse().expect("an address"))
        .expect("planned");
    assert_eq!(disk.action, plan::Action::Update);
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

/// While the disk's VM runs, Azure refuses the new SKU; the plan says so at `sku`, before any
/// write, and how to get there (park first) without losing the data.
#[test]
fn a_disks_new_sku_while_its_vm_runs_is_refused_at_its_sku() {
    let (desired, sources) = load("exp.hcl", &with_disk_of(1024, "StandardSSD_LRS"));
    let diags = plan::plan(
        &desired,
        &disk_applied(PowerState::Running),
        &options(Mode::Normal),
    )
    .expect_err("refused while the VM runs");
    insta::assert_snapshot!(render::diagnostics(&diags, &sources, false));
}

/// Regression: a smaller `size_gb` used to plan as an in-place update that Azure refuses at apply
/// ("cannot be resized down"), after other resources had already changed.
#[test]
fn shrinking_a_data_disk_is_refused_at_its_size_gb() {
    let state = State::from_applied(&load("before.hcl", &with_disk(1024)).0, "00000000-sub");
    let (desired, sources) = load("exp.hcl", &with_disk(512));
    let diags =
        plan::plan(&desired, &state, &options(Mode::Normal)).expect_err("a shrink is refused");
    insta::assert_snapshot!(render::diagnostics(&diags, &sources, false));
}

#[test]
fn json_plan_is_shaped_like_terraform_show_json() {
    let plan = plan_of(
        Some(&dual("Standard_NC4as_T4_v3", true)),
        &dual("Standard_NC24ads_A100_v4", true),
        Mode::Normal,
    );
    let json = render::plan_json(&plan);
    let vm = json["resource_changes"]
        .as_array()
        .expect("an array")
        .iter()
        .find(|c| c["address"] == "vm.gpu.vm")
        .expect("the GPU VM is in the plan");
    assert_eq!(vm["type"], "Microsoft.Compute/virtualMachines");
    assert_eq!(
        vm["change"]["actions"],
        serde_json::json!(["delete", "create"])
    );
    assert_eq!(vm["change"]["replace_paths"], serde_json::json!([["size"]]));
    assert_eq!(vm["change"]["before"]["size"], "Standard_NC4as_T4_v3");
    assert_eq!(vm["change"]["after"]["size"], "Standard_NC24ads_A100_v4");
    assert_eq!(json["format_version"], "1.2");
    insta::assert_snapshot!(render::plan_json_string(&plan));
}

#[test]
fn steps_that_ran_and_nothing_changed() {
    let text = cluster(4);
    let plan = plan_against(&ran(&text, |_| {}), &text, &[]);
    assert!(!plan.has_changes() && !plan.has_step_runs());
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn a_changed_step_parameter_reruns_only_that_step() {
    let before = cluster(4);
    let after = before.replace("/mnt/scratch/cosmoflow", "/mnt/scratch/cosmoflow-v2");
    let plan = plan_against(&ran(&before, |_| {}), &after, &[]);
    assert!(!plan.has_changes() && plan.has_step_runs());
    let running: Vec<&str> = plan
        .steps
        .iter()
        .filter(|s| s.runs())
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(running, ["stage"]);
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn an_unparked_node_reruns_its_per_boot_steps() {
    // Node 2 was parked and unparked by dsinfra after the steps ran: its boot count moved on.
    let text = cluster(4);
    let state = ran(&text, |state| {
        let node = Address::new("cluster", "train", Some(2), "vm");
        state
            .resource_mut(&node)
            .expect("the cluster has node 2")
            .boots = 1;
    });
    let plan = plan_against(&state, &text, &[]);
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn rerun_step_forces_a_step_everywhere() {
    let text = cluster(4);
    let plan = plan_against(&ran(&text, |_| {}), &text, &["train/mofed"]);
    assert!(!plan.has_changes() && plan.has_step_runs());
    let json = render::plan_json(&plan);
    let mofed = &json["steps"][0];
    assert_eq!(mofed["name"], "mofed");
    assert_eq!(mofed["runs"], true);
    assert_eq!(
        mofed["reasons"][3],
        serde_json::json!({"node": "cluster.train[3].vm", "reason": "forced"})
    );
    assert_eq!(json["steps"][1]["runs"], false);
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn graph_dot() {
    let (desired, _) = load("exp.hcl", &dual("Standard_NC4as_T4_v3", true));
    insta::assert_snapshot!(render::desired_dot(&desired));
}

// ---------------------------------------------------------------------------------------------
// Azure Machine Learning (issue 17).
// ---------------------------------------------------------------------------------------------

/// examples/aml-beeond.hcl as shipped, with its count replaced by `count` (it reads its key
/// from examples/keys, so it is loaded from its own directory).
fn aml_example(count: u32) -> Desired {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/aml-beeond.hcl");
    let text = std::fs::read_to_string(&path)
        .expect("the example exists")
        .replace("count     = 4", &format!("count     = {count}"));
    let opts = LoadOptions {
        env: Box::new(|_| None),
        ..LoadOptions::default()
    };
    match manifest::load_str(&path, &text, &opts) {
        Ok(loaded) => loaded.desired,
        Err(failed) => panic!(
            "aml-beeond.hcl does not load:\n{}",
            render::diagnostics(&failed.diagnostics, &failed.sources, false)
        ),
    }
}

/// The whole example from nothing: the workspace and what it needs, the fixed-size compute
/// priced per node, its steps on four new nodes, and the notes on host keys and parking.
#[test]
fn aml_beeond_from_empty() {
    let plan = plan::plan(
        &aml_example(4),
        &State::new("aml-beeond"),
        &options(Mode::Normal),
    )
    .expect("plans");
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

/// Two more nodes: the compute's scale settings change in place, and only the new nodes run the
/// steps.
#[test]
fn aml_cluster_grows_in_place() {
    let applied = aml_example(4);
    let mut state = State::from_applied(&applied, "00000000-sub");
    // As an apply leaves it: the four nodes it listed, every step succeeded on each.
    let compute: dsinfra::addr::Address = "aml_cluster.beeond.compute".parse().expect("address");
    let compute = state.resource_mut(&compute).expect("recorded");
    for i in 0..4 {
        let node = compute.node_mut(&format!("tvm-{i}"));
        for step in &applied.steps {
            node.steps.insert(
                step.name.clone(),
                dsinfra::state::StepRecord {
                    fingerprint: step.fingerprint(),
                    boot: 0,
                    at: "2026-11-26T18:00:00Z".to_owned(),
                },
            );
        }
    }
    let plan = plan::plan(&aml_example(6), &state, &options(Mode::Normal)).expect("plans");
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

/// Issue 18: a two-node GPU cluster, parked when idle for `idle` (or never, when `None`).
fn idle_cluster(size: &str, idle: Option<&str>) -> String {
    let park = idle.map_or_else(String::new, |w| format!("  park {{ idle = \"{w}\" }}\n"));
    format!(
        r#"experiment = "idle"

azure {{ location = "eastus" }}

network "main" {{ ssh_from = ["203.0.113.7/32"] }}

cluster "train" {{
  size    = "{size}"
  count   = 2
  image   = "dsvm-ubuntu-22.04"
  ssh_key = "{KEY}"
  step "ssh_mesh" {{}}
{park}}}
"#
    )
}

#[test]
fn idle_park_from_empty_shows_the_access_and_the_savings() {
    let plan = plan_of(
        None,
        &idle_cluster("Standard_NC4as_T4_v3", Some("45m")),
        Mode::Normal,
    );
    assert_eq!(plan.cost.idle.len(), 1);
    assert_eq!(plan.cost.idle[0].vms, 2);
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn idle_park_added_later_updates_the_head_in_place() {
    let plan = plan_of(
        Some(&idle_cluster("Standard_NC4as_T4_v3", None)),
        &idle_cluster("Standard_NC4as_T4_v3", Some("1h30m")),
        Mode::Normal,
    );
    let head = change(&plan, &node_vm_of("train", 0));
    assert_eq!(head.action, plan::Action::Update);
    let other = change(&plan, &node_vm_of("train", 1));
    assert_eq!(other.action, plan::Action::NoOp);
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn a_replaced_head_replaces_the_idle_assignment_but_not_the_role() {
    let plan = plan_of(
        Some(&idle_cluster("Standard_NC4as_T4_v3", Some("45m"))),
        &idle_cluster("Standard_NC8as_T4_v3", Some("45m")),
        Mode::Normal,
    );
    let access: Address = "cluster.train.idle_access".parse().expect("valid");
    let role: Address = "cluster.train.idle_role".parse().expect("valid");
    assert!(matches!(
        change(&plan, &access).action,
        plan::Action::Replace { .. }
    ));
    assert_eq!(change(&plan, &role).action, plan::Action::NoOp);
    let destroy = plan_of(
        Some(&idle_cluster("Standard_NC4as_T4_v3", Some("45m"))),
        &idle_cluster("Standard_NC4as_T4_v3", Some("45m")),
        Mode::Destroy { keep_data: false },
    );
    let position = |a: &Address| {
        destroy
            .changes
            .iter()
            .position(|c| &c.address == a)
            .expect("deleted")
    };
    // ARM refuses to delete a role that is still assigned: the assignment goes first.
    assert!(position(&access) < position(&role));
    assert!(position(&access) < position(&node_vm_of("train", 0)));
}

fn node_vm_of(block: &str, i: u32) -> Address {
    Address::new("cluster", block, Some(i), "vm")
}
