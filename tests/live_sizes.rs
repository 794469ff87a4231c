//! Issue 15: a VM size Azure added after the shipped catalog's date is not refused by a
//! connected `plan`: its facts are read from the subscription's Resource SKUs (here, an emulator
//! configured with a size the catalog lacks). Offline, `validate` still refuses it, and a size
//! the SKUs do not list either stays an error with the catalog's suggestion.

use std::path::Path;

use assert_cmd::Command;
use dsinfra::connect::builtin_emulator_config;
use dsinfra::emulator::{self, EmulatorConfig, VmSizeSpec};

/// A size no shipped catalog has: 8 vCPUs, a 300 GiB temp disk, premium IO, offered in eastus.
const NEW_SIZE: &str = "Standard_D8zz_v9";

fn manifest(size: &str) -> String {
    format!(
        r#"azure {{ location = "eastus" }}

network "main" {{ ssh_from = ["203.0.113.7/32"] }}

vm "prep" {{
  size        = "{size}"
  os_disk_sku = "Premium_LRS"
  ssh_key     = file("demo.pub")
}}
"#
    )
}

fn scratch(manifest: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/keys/demo.pub");
    std::fs::copy(key, dir.path().join("demo.pub")).expect("copy the demo key");
    std::fs::write(dir.path().join("exp.hcl"), manifest).expect("write the manifest");
    dir
}

fn dsinfra(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("dsinfra").expect("the dsinfra binary is built by cargo test");
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("AZURE_SUBSCRIPTION_ID");
    cmd
}

/// The built-in emulator's sizes plus [`NEW_SIZE`].
fn config() -> EmulatorConfig {
    let mut config = builtin_emulator_config(None, 0.0);
    config.throttle = false;
    let mut size = VmSizeSpec::new(NEW_SIZE, 8, "standardDZZv9Family")
        .with_memory(32 * 1024, Some(300 * 1024))
        .in_locations(&["eastus"]);
    size.generations = vec![1, 2];
    size.accelerated_networking = Some(true);
    size.premium_io = Some(true);
    config.vm_sizes.push(size);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_size_newer_than_the_catalog_is_planned_from_the_subscriptions_resource_skus() {
    assert!(
        dsinfra::catalog::shipped_size(NEW_SIZE).is_none(),
        "the catalog lacks it"
    );
    let dir = scratch(&manifest(NEW_SIZE));
    let emulator = emulator::start(config()).await.expect("starts");
    let plan = dsinfra(dir.path())
        .args(["plan", "exp.hcl", "--endpoint", &emulator.endpoint()])
        .assert();
    let output = plan.get_output();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let date = dsinfra::catalog::sizes_provenance()
        .generated
        .expect("the catalog has a date");
    assert!(
        stderr.contains(&format!(
            "note: {NEW_SIZE} is not in the shipped catalog of {date}: its facts come from the \
             subscription's Resource SKUs in eastus, and it has no price in the catalog"
        )),
        "{stderr}"
    );
    assert!(stdout.contains("# vm.prep.vm will be created"), "{stdout}");
    assert!(
        stdout.contains(&format!("{NEW_SIZE} (no eastus price: unpriced)")),
        "{stdout}"
    );
    // The SKU's accelerated networking reached the NIC.
    let json = dsinfra(dir.path())
        .args([
            "plan",
            "exp.hcl",
            "--json",
            "--endpoint",
            &emulator.endpoint(),
        ])
        .assert()
        .success();
    let plan: serde_json::Value =
        serde_json::from_slice(&json.get_output().stdout).expect("a JSON plan");
    let nic = plan["resource_changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["address"] == "vm.prep.nic")
        .expect("the NIC is planned");
    assert_eq!(
        nic["change"]["after"]["accelerated_networking"], true,
        "{nic}"
    );
}

/// Issue 31: a plan saved with a size learnt from the live Resource SKUs records it, so `show`
/// (offline) and `apply PLANFILE` judge the manifest against the same facts. Before, the learnt
/// size lived only in the planning process's memory, and both failed with "unknown VM size".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_plan_with_a_size_learnt_live_is_shown_and_applied() {
    let dir = scratch(&manifest(NEW_SIZE));
    let emulator = emulator::start(config()).await.expect("starts");
    dsinfra(dir.path())
        .args([
            "plan",
            "exp.hcl",
            "-out",
            "exp.plan",
            "--endpoint",
            &emulator.endpoint(),
        ])
        .assert()
        .success();
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("exp.plan")).expect("the plan is saved"),
    )
    .expect("JSON");
    assert_eq!(
        saved["source"]["learned_sizes"][0]["name"], NEW_SIZE,
        "the plan records the size it learnt"
    );
    let show = dsinfra(dir.path()).args(["show", "exp.plan"]).assert();
    let output = show.get_output();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let apply = dsinfra(dir.path())
        .args(["apply", "exp.plan", "--endpoint", &emulator.endpoint()])
        .assert();
    let output = apply.get_output();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("Apply complete:"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_or_unlisted_an_unknown_size_is_still_refused() {
    let dir = scratch(&manifest(NEW_SIZE));
    let validate = dsinfra(dir.path())
        .args(["validate", "exp.hcl"])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&validate.get_output().stderr).into_owned();
    assert!(
        stderr.contains(&format!(
            "error: unknown VM size `{NEW_SIZE}` in vm \"prep\""
        )),
        "{stderr}"
    );
    // Connected, but the subscription's SKUs do not list it either.
    let dir = scratch(&manifest("Standard_D8zz_v8"));
    let emulator = emulator::start(config()).await.expect("starts");
    let plan = dsinfra(dir.path())
        .args(["plan", "exp.hcl", "--endpoint", &emulator.endpoint()])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&plan.get_output().stderr).into_owned();
    assert!(
        stderr.contains("error: unknown VM size `Standard_D8zz_v8` in vm \"prep\""),
        "{stderr}"
    );
    assert!(
        !stderr.contains("is not in the shipped catalog"),
        "{stderr}"
    );
}

/// A shipped size whose temp disk the catalog does not know (Dv4: its sources do not say).
const SILENT_SIZE: &str = "Standard_D2_v4";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temp_disk_the_catalog_does_not_know_is_checked_against_the_live_skus() {
    let shipped = dsinfra::catalog::shipped_size(SILENT_SIZE).expect("shipped");
    assert_eq!(
        shipped.temp_disk_gib, None,
        "the shipped catalog does not say"
    );
    let manifest = format!(
        r#"azure {{ location = "eastus" }}

network "main" {{ ssh_from = ["203.0.113.7/32"] }}

storage_account "data" {{
  container "datasets" {{}}
}}

vm "prep" {{
  size    = "{SILENT_SIZE}"
  ssh_key = file("demo.pub")
  step "blobfuse2" {{ container = storage_account.data.container.datasets }}
}}
"#
    );
    let dir = scratch(&manifest);
    // Offline nothing says the size has no temp disk: the rule cannot refuse it.
    dsinfra(dir.path())
        .args(["validate", "exp.hcl"])
        .assert()
        .success();
    // The subscription's SKUs say it has none (Dv4 has no local temp disk).
    let mut config = config();
    let spec = config
        .vm_sizes
        .iter_mut()
        .find(|s| s.name == SILENT_SIZE)
        .expect("the built-in emulator has every catalog size");
    spec.resource_disk_mb = Some(0);
    let emulator = emulator::start(config).await.expect("starts");
    let plan = dsinfra(dir.path())
        .args(["plan", "exp.hcl", "--endpoint", &emulator.endpoint()])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&plan.get_output().stderr).into_owned();
    assert!(
        stderr.contains(&format!("note: {SILENT_SIZE}: what the shipped catalog of")),
        "{stderr}"
    );
    assert!(
        stderr.contains("on the temp disk, but Standard_D2_v4 has none"),
        "{stderr}"
    );
}
