//! Issue 17: examples/aml-beeond.hcl through the whole lifecycle against the built-in emulator,
//! as a user runs it: apply creates the workspace's dependencies, the workspace and a 4-node
//! AmlCompute and lists its nodes; the plan after apply is empty; park scales the cluster to zero
//! (the plan stays empty); unpark brings 4 new nodes; destroy leaves nothing, twice over (the
//! key vault's soft-deleted name is purged, so a second apply can take it again).
//!
//! Then what dsinfra reads back of a cluster (refresh: resized, recreated with another size,
//! deleted or scaled to zero outside dsinfra) and what it checks before creating one (an
//! existing workspace, AML's own quota), against an emulator the test holds.

use std::path::Path;

use super::{
    EmulatorConfig, PowerState, ResourceId, SUB, Value, World, client, config, config_with_quota,
    desired_of, dsinfra, emulator, json, plan_against, refresh, scratch, stderr, stdout,
};

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

/// A small AML experiment (a new workspace, one 2-node cluster without steps) for the tests
/// that change things outside dsinfra, run against an emulator the test holds.
const SMALL: &str = r#"azure { location = "eastus" }

aml_workspace "ws" {}

aml_cluster "train" {
  size    = "Standard_NC4as_T4_v3"
  count   = 2
  ssh_key = file("demo.pub")
}
"#;

/// `SMALL` applied with `--endpoint` against an emulator started from `config`.
pub(super) async fn small_applied(config: EmulatorConfig) -> (World, String) {
    let (dir, manifest) = scratch(SMALL);
    let emulator = emulator::start(config).await.expect("the emulator starts");
    let client = client(&emulator);
    let desired = desired_of(&manifest);
    let world = World {
        dir,
        manifest,
        emulator,
        client,
        desired,
    };
    let applied = world.run(&["apply", "exp.hcl", "--auto-approve"]);
    let applied = applied.success();
    assert!(
        stdout(&applied).contains("Apply complete: 7 created"),
        "{}",
        stdout(&applied)
    );
    let compute = world
        .state()
        .resource(&"aml_cluster.train.compute".parse().expect("valid"))
        .and_then(|r| r.id.clone())
        .expect("the compute is in the state");
    (world, compute)
}

/// Scale the compute outside dsinfra, as someone in the studio or with `az ml compute update`.
async fn scale_outside(world: &World, compute: &str, min: i64, max: i64) {
    let _: Value = world
        .client
        .patch(
            &ResourceId::from_raw(compute),
            &json!({"properties": {"properties": {"scaleSettings": {
                "minNodeCount": min, "maxNodeCount": max}}}}),
        )
        .await
        .expect("PATCH works");
}

fn compute_address() -> dsinfra::addr::Address {
    "aml_cluster.train.compute".parse().expect("valid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_sees_a_cluster_resized_outside_dsinfra_and_the_plan_scales_it_back_in_place() {
    let (world, compute) = small_applied(config()).await;
    let clean = refresh(&world.client, SUB, &mut world.state())
        .await
        .expect("refresh works");
    assert!(!clean.has_drift(), "{clean:?}");

    scale_outside(&world, &compute, 3, 3).await;
    let mut state = world.state();
    let report = refresh(&world.client, SUB, &mut state)
        .await
        .expect("refresh works");
    assert_eq!(
        report.changed,
        [(compute_address(), vec!["count".to_owned()])]
    );
    let recorded = state.resource(&compute_address()).expect("in the state");
    assert_eq!(recorded.attrs["count"], json!(3));
    assert_eq!(recorded.power_state, Some(PowerState::Running));
    let plan = world
        .run(&["plan", "exp.hcl", "--detailed-exitcode"])
        .code(2);
    let out = stdout(&plan);
    assert!(out.contains("~ aml_cluster.train.compute"), "{out}");
    assert!(
        out.contains("drifted: `count` changed outside dsinfra"),
        "{out}"
    );
    assert!(
        out.contains("Plan: 0 to add, 1 to change, 0 to replace, 0 to destroy."),
        "{out}"
    );

    // Autoscaling between 0 and 2: the count is no longer fixed, and the plan fixes it again.
    scale_outside(&world, &compute, 0, 2).await;
    let report = refresh(&world.client, SUB, &mut world.state())
        .await
        .expect("refresh works");
    assert_eq!(
        report.changed,
        [(compute_address(), vec!["count".to_owned()])]
    );
    world.run(&["apply", "exp.hcl", "--auto-approve"]).success();
    let report = refresh(&world.client, SUB, &mut world.state())
        .await
        .expect("refresh works");
    assert!(!report.has_drift(), "the apply scaled it back: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_scaled_to_zero_outside_dsinfra_is_seen_as_parked() {
    let (world, compute) = small_applied(config()).await;
    scale_outside(&world, &compute, 0, 0).await;
    let mut state = world.state();
    let report = refresh(&world.client, SUB, &mut state)
        .await
        .expect("refresh works");
    assert!(
        !report.has_drift(),
        "scaled to zero is parked, not drift: {report:?}"
    );
    assert_eq!(
        report.power_changed,
        [(
            compute_address(),
            Some(PowerState::Running),
            PowerState::Deallocated
        )]
    );
    // As with a VM deallocated outside dsinfra: nothing to plan, and unpark brings it back.
    world
        .run(&["plan", "exp.hcl", "--detailed-exitcode"])
        .code(0);
    world
        .run(&["unpark", "exp.hcl", "--auto-approve"])
        .success();
    let report = refresh(&world.client, SUB, &mut world.state())
        .await
        .expect("refresh works");
    assert!(report.power_changed.is_empty(), "{report:?}");
    assert_eq!(
        world.power_state("aml_cluster.train.compute"),
        Some(PowerState::Running)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_recreated_with_another_size_or_deleted_outside_dsinfra_is_replaced_or_created() {
    let (world, compute) = small_applied(config()).await;
    let id = ResourceId::from_raw(compute.clone());
    let before: Value = world
        .client
        .get(&id)
        .await
        .expect("GET works")
        .expect("the compute exists");
    world
        .client
        .delete_with(&id, &[("underlyingResourceAction", "Delete")])
        .await
        .expect("DELETE works");
    let report = refresh(&world.client, SUB, &mut world.state())
        .await
        .expect("refresh works");
    assert_eq!(report.deleted, [compute_address()]);
    let plan = world
        .run(&["plan", "exp.hcl", "--detailed-exitcode"])
        .code(2);
    let out = stdout(&plan);
    assert!(out.contains("drifted: deleted outside dsinfra"), "{out}");
    assert!(
        out.contains("Plan: 1 to add, 0 to change, 0 to replace, 0 to destroy."),
        "{out}"
    );

    let _: Value = world
        .client
        .put(
            &id,
            &json!({"location": "eastus", "tags": before["tags"], "properties": {
                "computeType": "AmlCompute",
                "properties": {"vmSize": "Standard_NC8as_T4_v3", "vmPriority": "Dedicated",
                    "scaleSettings": {"minNodeCount": 2, "maxNodeCount": 2,
                        "nodeIdleTimeBeforeScaleDown": "PT120S"}}}}),
        )
        .await
        .expect("PUT works");
    let report = refresh(&world.client, SUB, &mut world.state())
        .await
        .expect("refresh works");
    assert_eq!(
        report.changed,
        [(compute_address(), vec!["size".to_owned()])]
    );
    let plan = world
        .run(&["plan", "exp.hcl", "--detailed-exitcode"])
        .code(2);
    let out = stdout(&plan);
    assert!(
        out.contains("drifted: `size` changed outside dsinfra"),
        "{out}"
    );
    assert!(
        out.contains("Plan: 0 to add, 0 to change, 1 to replace, 0 to destroy."),
        "{out}"
    );
}

/// `SMALL` with an existing workspace `ml-rg/amlws` (written `location`, if any).
fn with_existing_workspace(location: Option<&str>) -> String {
    let location = location.map_or_else(String::new, |l| format!("\n  location       = \"{l}\""));
    SMALL.replace(
        "aml_workspace \"ws\" {}",
        &format!(
            "aml_workspace \"ws\" {{\n  existing       = true\n  name           = \"amlws\"\n  resource_group = \"ml-rg\"{location}\n}}"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_existing_workspace_is_a_located_error_before_anything_is_created() {
    let manifest = with_existing_workspace(None);
    let (dir, endpoint, plan) = plan_against(&manifest, config()).await;
    let refused = plan.code(1);
    assert_eq!(
        stderr(&refused).replace(&endpoint, "ENDPOINT"),
        format!(
            "\
note: refreshed 0 resource(s) from ENDPOINT: 0 deleted and 0 changed outside dsinfra
error: workspace ml-rg/amlws does not exist in subscription {SUB}
 --> exp.hcl:5:20
  |
5 |   name           = \"amlws\"
  |                    ^^^^^^^ `existing = true`: dsinfra reads this workspace and never creates it
  = help: create it (Azure Machine Learning studio, or `az ml workspace create --name amlws --resource-group ml-rg`), or drop `existing = true` to let dsinfra create it; check `name` and `resource_group` for a typo
"
        )
    );
    // Apply runs the same preflight before its first change: the resource group is not made.
    let emulator = emulator::start(config()).await.expect("starts");
    let endpoint = emulator.endpoint();
    dsinfra(dir.path())
        .args([
            "apply",
            "exp.hcl",
            "--auto-approve",
            "--endpoint",
            &endpoint,
        ])
        .assert()
        .code(1);
    let group: Option<Value> = client(&emulator)
        .get(&ResourceId::from_raw(format!(
            "/subscriptions/{SUB}/resourceGroups/dsinfra-exp"
        )))
        .await
        .expect("GET works");
    assert_eq!(group, None, "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_workspace_in_another_region_is_said_where_the_manifest_places_it() {
    // The workspace exists in westeurope: made by another experiment, in group dsinfra-base.
    let (dir, base) = scratch(
        "experiment = \"base\"\nazure { location = \"westeurope\" }\naml_workspace \"ws\" { name = \"amlws\" }\n",
    );
    let emulator = emulator::start(config()).await.expect("starts");
    let endpoint = emulator.endpoint();
    let run = |args: &[&str]| {
        dsinfra(dir.path())
            .args(args)
            .args(["--endpoint", &endpoint])
            .assert()
    };
    let base = base
        .file_name()
        .and_then(|f| f.to_str())
        .expect("a name")
        .to_owned();
    std::fs::rename(dir.path().join(&base), dir.path().join("base.hcl")).expect("rename");
    run(&["apply", "base.hcl", "--auto-approve"]).success();

    let manifest = with_existing_workspace(None).replace("ml-rg", "dsinfra-base");
    std::fs::write(dir.path().join("exp.hcl"), &manifest).expect("write");
    let refused = run(&["plan", "exp.hcl"]).code(1);
    let err = stderr(&refused);
    assert!(
        err.contains(
            "error: workspace dsinfra-base/amlws is in westeurope, not in eastus where the manifest puts its clusters\n --> exp.hcl:5:20\n"
        ),
        "{err}"
    );
    assert!(
        err.contains("= help: a cluster is created in its workspace's region: write `location = \"westeurope\"` on the aml_workspace block"),
        "{err}"
    );
    // Said where it is, the workspace passes and the cluster is planned there.
    let manifest = with_existing_workspace(Some("westeurope")).replace("ml-rg", "dsinfra-base");
    std::fs::write(dir.path().join("exp.hcl"), &manifest).expect("write");
    let planned = run(&["plan", "exp.hcl", "--detailed-exitcode"]).code(2);
    assert!(
        stdout(&planned)
            .contains("+ resource \"Microsoft.MachineLearningServices/workspaces/computes\""),
        "{}",
        stdout(&planned)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preflight_checks_amlcomputes_own_quota_dedicated_and_low_priority() {
    let config = config_with_quota("eastus", "Standard NCASv3_T4 Family", 4);
    let (_dir, _endpoint, plan) = plan_against(SMALL, config).await;
    let refused = plan.code(1);
    let err = stderr(&refused);
    assert!(
        err.contains(
            "\
error: not enough AmlCompute quota in eastus: aml_cluster.train needs 8 vCPUs of Standard NCASv3_T4 Family Cluster Dedicated vCPUs, 4 available
 --> exp.hcl:5:1
  |
5 | aml_cluster \"train\" {
  | ^^^^^^^^^^^^^^^^^^^ 2 x Standard_NC4as_T4_v3 (4 vCPUs each)
  = help: Standard NCASv3_T4 Family Cluster Dedicated vCPUs in eastus: limit 4, in use 0, available 4; this plan adds 8
  = help: AmlCompute has its own quota, apart from the VMs': request an increase of \"Standard NCASv3_T4 Family Cluster Dedicated vCPUs\" (region eastus) in Azure Machine Learning studio > Quota or the Azure portal > Quotas > Machine learning; or lower `count`, or use another size or region
"
        ),
        "{err}"
    );

    // Low-priority nodes count against the regional low-priority total, not the family.
    let mut config = config_with_quota("eastus", "Standard NCASv3_T4 Family", 4);
    config.quotas.regional_limit = 4;
    let low = SMALL.replace("count   = 2", "count   = 2\n  priority = \"low_priority\"");
    let (_dir, _endpoint, plan) = plan_against(&low, config).await;
    let err = stderr(&plan.code(1));
    assert!(
        err.contains("error: not enough AmlCompute quota in eastus: aml_cluster.train needs 8 vCPUs of Total Cluster LowPriority Regional vCPUs, 4 available"),
        "{err}"
    );
    assert!(!err.contains("Family Cluster Dedicated"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpark_checks_the_aml_quota_a_parked_cluster_needs_again() {
    let (world, compute) =
        small_applied(config_with_quota("eastus", "Standard NCASv3_T4 Family", 8)).await;
    world.run(&["park", "exp.hcl", "--auto-approve"]).success();
    // Someone else's cluster in the same workspace takes 4 of the family's 8 vCPUs meanwhile.
    let other = format!(
        "{}/computes/other",
        compute.rsplit_once("/computes/").expect("a compute id").0
    );
    let _: Value = world
        .client
        .put(
            &ResourceId::from_raw(other),
            &json!({"location": "eastus", "properties": {"computeType": "AmlCompute",
                "properties": {"vmSize": "Standard_NC4as_T4_v3", "vmPriority": "Dedicated",
                    "scaleSettings": {"minNodeCount": 1, "maxNodeCount": 1}}}}),
        )
        .await
        .expect("PUT works");
    let refused = world.run(&["unpark", "exp.hcl", "--auto-approve"]).code(1);
    let err = stderr(&refused);
    assert!(
        err.contains("error: not enough AmlCompute quota in eastus: aml_cluster.train needs 8 vCPUs of Standard NCASv3_T4 Family Cluster Dedicated vCPUs, 4 available"),
        "{err}"
    );
    assert!(
        err.contains("limit 8, in use 4, available 4; scaling them back needs 8"),
        "{err}"
    );
    assert_eq!(
        world.power_state("aml_cluster.train.compute"),
        Some(PowerState::Deallocated)
    );
}
