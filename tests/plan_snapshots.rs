//! Snapshot tests of rendered plans (colour off), made from real manifests through
//! `manifest::load_str`, against the state an apply of an earlier manifest would leave
//! (`State::from_applied`). Each snapshot was read line by line before it was accepted; a change
//! to one is a change to what users see, so review the diff the same way.

use std::path::Path;

use chrono::{DateTime, Utc};
use dsinfra::diag::SourceMap;
use dsinfra::manifest::{self, LoadOptions};
use dsinfra::model::Desired;
use dsinfra::plan::{self, Mode, Plan, PlanOptions};
use dsinfra::render;
use dsinfra::state::State;

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
  size    = "Standard_D3_v2"
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
    }
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
    let plan = plan_of(None, &dual("Standard_NC6s_v3", true), Mode::Normal);
    assert!(plan.has_changes());
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn no_op() {
    let text = dual("Standard_NC6s_v3", true);
    let plan = plan_of(Some(&text), &text, Mode::Normal);
    assert!(!plan.has_changes());
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn vm_size_change_replaces_the_vm() {
    let plan = plan_of(
        Some(&dual("Standard_NC6s_v3", true)),
        &dual("Standard_NC24ads_A100_v4", true),
        Mode::Normal,
    );
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn storage_removed_is_deleted() {
    let plan = plan_of(
        Some(&dual("Standard_NC6s_v3", true)),
        &dual("Standard_NC6s_v3", false),
        Mode::Normal,
    );
    insta::assert_snapshot!(render::plan_text(&plan, false));
}

#[test]
fn cluster_grows_from_4_to_6_nodes() {
    let plan = plan_of(Some(&cluster(4)), &cluster(6), Mode::Normal);
    insta::assert_snapshot!(render::plan_text(&plan, false));
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

#[test]
fn json_plan_is_shaped_like_terraform_show_json() {
    let plan = plan_of(
        Some(&dual("Standard_NC6s_v3", true)),
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
    assert_eq!(vm["change"]["before"]["size"], "Standard_NC6s_v3");
    assert_eq!(vm["change"]["after"]["size"], "Standard_NC24ads_A100_v4");
    assert_eq!(json["format_version"], "1.2");
    insta::assert_snapshot!(render::plan_json_string(&plan));
}

#[test]
fn graph_dot() {
    let (desired, _) = load("exp.hcl", &dual("Standard_NC6s_v3", true));
    insta::assert_snapshot!(render::desired_dot(&desired));
}
