//! `dsinfra apply` and `destroy` end to end: the real binary against an ARM emulator started
//! in-process by each test (so faults can be injected and the emulated cloud inspected over
//! HTTP), on copies of the seed examples.
//!
//! What is held: both seeds converge (apply, then a plan with no changes, an edit, apply again,
//! destroy leaving nothing); `destroy --keep-data` leaves exactly the data; 429 storms, 500s,
//! AllocationFailed inside an operation, quota refusals and token expiry either recover or fail
//! with ARM's message and the right advice, with a valid state and no panic; and SIGKILL at
//! random moments never leaves a duplicate or an orphan once apply is run again; a data disk
//! moved and grown reaches ARM as PATCHes only (decision 28); a data disk's new SKU is refused
//! at `sku` while its VM runs and is one PATCH of the same disk once the VM is parked
//! (decision 32).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsinfra::connect::builtin_emulator_config;
use dsinfra::emulator::{self, EmulatorConfig, EmulatorHandle, FaultAction, FaultRule};
use serde_json::Value;

#[path = "apply/idle.rs"]
mod idle;
#[path = "apply/operation.rs"]
mod operation;

const SUB: &str = "00000000-0000-0000-0000-000000000000";
/// Emulator latency scale: a VM takes 90 ms, an ND VM 300 ms.
const SCALE: f64 = 0.001;

/// An emulator and a copy of the examples.
struct World {
    handle: EmulatorHandle,
    dir: tempfile::TempDir,
}

async fn world_with(config: impl FnOnce(EmulatorConfig) -> EmulatorConfig) -> World {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"),
        dir.path(),
    );
    let cloud = dir.path().join("cloud");
    std::fs::create_dir_all(&cloud).expect("cloud dir");
    let handle = emulator::start(config(builtin_emulator_config(Some(&cloud), SCALE)))
        .await
        .expect("the emulator starts");
    World { handle, dir }
}

async fn world() -> World {
    world_with(|c| c).await
}

/// The `(method, path)` of each request the emulator received, in order.
type Requests = Arc<Mutex<Vec<(String, String)>>>;

/// A world whose emulator records every request with one of `methods` (its request hook sees
/// each request once, before the provider answers).
async fn world_recording(methods: &'static [&'static str]) -> (World, Requests) {
    let requests = Requests::default();
    let seen = Arc::clone(&requests);
    let w = world_with(move |c| EmulatorConfig {
        request_validator: Some(Arc::new(move |request: &emulator::RequestInfo| {
            if methods.contains(&request.method.as_str()) {
                seen.lock()
                    .expect("not poisoned")
                    .push((request.method.clone(), request.path.clone()));
            }
            Vec::new()
        })),
        ..c
    })
    .await;
    (w, requests)
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("readable") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

impl World {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsinfra"));
        cmd.current_dir(self.dir.path())
            .args(args)
            .args(["--endpoint", &self.handle.endpoint()])
            .env("DSINFRA_EMULATOR_LATENCY_SCALE", SCALE.to_string())
            .env("NO_COLOR", "1")
            .env_remove("AZURE_SUBSCRIPTION_ID")
            .stdin(Stdio::null());
        cmd
    }

    /// Run dsinfra to the end (on a blocking thread: the emulator shares this runtime).
    async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        tokio::task::spawn_blocking(move || cmd.output().expect("dsinfra runs"))
            .await
            .expect("joined")
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        let text = describe(&out);
        assert!(out.status.success(), "dsinfra {args:?} failed:\n{text}");
        text
    }

    fn state(&self, stem: &str) -> Value {
        let path = self.path(&format!(".dsinfra/{stem}/state.json"));
        let text = std::fs::read_to_string(&path).expect("the state exists");
        serde_json::from_str(&text).expect("the state is valid JSON")
    }

    /// The ARM id the state records for `address`, as written.
    fn id_in_state(&self, stem: &str, address: &str) -> String {
        self.state(stem)["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["address"] == address)
            .and_then(|r| r["id"].as_str())
            .unwrap_or_else(|| panic!("{address} is in the state"))
            .to_owned()
    }

    /// Every ARM id the state records (lower case).
    fn state_ids(&self, stem: &str) -> BTreeSet<String> {
        self.state(stem)["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["id"].as_str())
            .filter(|id| !id.contains("/sas/"))
            .map(str::to_ascii_lowercase)
            .collect()
    }

    fn state_addresses(&self, stem: &str) -> BTreeSet<String> {
        self.state(stem)["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .map(|r| r["address"].as_str().expect("address").to_owned())
            .collect()
    }

    /// Everything in the emulated cloud under resource group `rg`, read over HTTP, as lower-case
    /// ids (the group itself included when it exists).
    async fn inventory(&self, rg: &str) -> BTreeSet<String> {
        let http = reqwest::Client::new();
        let base = self.handle.endpoint();
        let get = |path: String| {
            let http = http.clone();
            let url = format!("{base}{path}");
            async move {
                let resp = http
                    .get(&url)
                    .query(&[("api-version", "2024-11-01")])
                    .bearer_auth("test")
                    .send()
                    .await
                    .expect("the emulator answers");
                if resp.status() == 404 {
                    return Vec::new();
                }
                let body: Value = resp.json().await.expect("JSON");
                body["value"].as_array().cloned().unwrap_or_default()
            }
        };
        let mut ids = BTreeSet::new();
        let groups = get(format!("/subscriptions/{SUB}/resourcegroups")).await;
        if !groups.iter().any(|g| {
            g["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(rg))
        }) {
            return ids;
        }
        ids.insert(format!("/subscriptions/{SUB}/resourcegroups/{rg}").to_ascii_lowercase());
        let group = format!("/subscriptions/{SUB}/resourceGroups/{rg}/providers");
        for kind in [
            "Microsoft.Network/virtualNetworks",
            "Microsoft.Network/networkSecurityGroups",
            "Microsoft.Network/publicIPAddresses",
            "Microsoft.Network/networkInterfaces",
            "Microsoft.Compute/virtualMachines",
            "Microsoft.Compute/disks",
            "Microsoft.Compute/proximityPlacementGroups",
            "Microsoft.Compute/availabilitySets",
            "Microsoft.Storage/storageAccounts",
            "Microsoft.DevTestLab/schedules",
        ] {
            for item in get(format!("{group}/{kind}")).await {
                let id = item["id"].as_str().expect("an id").to_owned();
                if kind == "Microsoft.Storage/storageAccounts" {
                    for child in [
                        "blobServices/default/containers",
                        "fileServices/default/shares",
                    ] {
                        for c in get(format!("{id}/{child}")).await {
                            ids.insert(c["id"].as_str().expect("an id").to_ascii_lowercase());
                        }
                    }
                }
                ids.insert(id.to_ascii_lowercase());
            }
        }
        ids
    }

    /// What the cloud should hold for a state: its ids plus each VM's OS disk (created with the
    /// VM, deleted with it).
    fn expected_cloud(&self, stem: &str) -> BTreeSet<String> {
        let mut ids = self.state_ids(stem);
        let os_disks: Vec<String> = ids
            .iter()
            .filter_map(|id| id.split_once("/providers/microsoft.compute/virtualmachines/"))
            .map(|(group, vm)| format!("{group}/providers/microsoft.compute/disks/{vm}-osdisk"))
            .collect();
        ids.extend(os_disks);
        ids
    }
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The resource group of an experiment (`azure.resource_group` defaults to `dsinfra-<id>`).
fn group_of(experiment: &str) -> String {
    format!("dsinfra-{experiment}")
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("readable");
    assert!(text.contains(from), "{} has no `{from}`", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).expect("writable");
}

/// Apply, check convergence, edit, apply, destroy: the emulator ends empty.
async fn lifecycle(file: &str, experiment: &str, edits: &[(&str, &str)]) {
    let stem = file.trim_end_matches(".hcl");
    let w = world().await;
    let apply = w.ok(&["apply", file, "--auto-approve"]).await;
    assert!(apply.contains("Apply complete:"), "{apply}");
    let plan = w.run(&["plan", file, "--detailed-exitcode"]).await;
    assert_eq!(plan.status.code(), Some(0), "{}", describe(&plan));
    let rg = group_of(experiment);
    assert_eq!(w.inventory(&rg).await, w.expected_cloud(stem));

    for (from, to) in edits {
        edit(&w.path(file), from, to);
    }
    let changed = w.run(&["plan", file, "--detailed-exitcode"]).await;
    assert_eq!(changed.status.code(), Some(2), "{}", describe(&changed));
    w.ok(&["apply", file, "--auto-approve"]).await;
    let plan = w.run(&["plan", file, "--detailed-exitcode"]).await;
    assert_eq!(plan.status.code(), Some(0), "{}", describe(&plan));
    assert_eq!(w.inventory(&rg).await, w.expected_cloud(stem));

    let destroy = w.ok(&["destroy", file, "--auto-approve"]).await;
    assert!(destroy.contains("Destroy complete:"), "{destroy}");
    assert_eq!(
        w.inventory(&rg).await,
        BTreeSet::new(),
        "the experiment left resources behind"
    );
    assert!(w.state_addresses(stem).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_dsvm_applies_converges_changes_size_and_destroys_to_nothing() {
    lifecycle(
        "dual-dsvm.hcl",
        "dual-dsvm",
        &[(
            "size    = \"Standard_D4ds_v5\"",
            "size    = \"Standard_D2ds_v5\"",
        )],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cosmoflow_applies_converges_changes_node_count_and_destroys_to_nothing() {
    lifecycle(
        "nd40-beeond.hcl",
        "cosmoflow",
        &[("count   = 4", "count   = 2")],
    )
    .await;
}

/// Issue 29: on a subscription registered for Trusted Launch by default
/// (`dsinfra emulator --trusted-launch-default`), the flagship and the dual DSVM apply and
/// converge: the connected plan reads each size's SKU and each image's features, states Trusted
/// Launch where both support it, so Azure's default changes nothing dsinfra reads back; and the
/// VMs that build kernel modules or carry an NVIDIA driver have Secure Boot off as Azure reports
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flagship_and_dual_dsvm_converge_where_trusted_launch_is_the_default() {
    let w = world_with(|c| EmulatorConfig {
        features: vec![dsinfra::emulator::TRUSTED_LAUNCH_BY_DEFAULT.to_owned()],
        ..c
    })
    .await;
    for file in ["nd40-beeond.hcl", "dual-dsvm.hcl"] {
        w.ok(&["apply", file, "--auto-approve"]).await;
        let plan = w.run(&["plan", file, "--detailed-exitcode"]).await;
        assert_eq!(plan.status.code(), Some(0), "{file}: {}", describe(&plan));
    }
    // As Azure reports the VMs.
    let http = reqwest::Client::new();
    for (stem, address, expected) in [
        ("nd40-beeond", "cluster.train[0].vm", false),
        ("dual-dsvm", "vm.gpu.vm", false),
        ("dual-dsvm", "vm.prep.vm", true),
    ] {
        let id = w.id_in_state(stem, address);
        let vm: Value = http
            .get(format!("{}{id}", w.handle.endpoint()))
            .query(&[("api-version", "2024-11-01")])
            .bearer_auth("test")
            .send()
            .await
            .expect("the emulator answers")
            .json()
            .await
            .expect("a VM body");
        assert_eq!(
            vm.pointer("/properties/securityProfile/uefiSettings/secureBootEnabled"),
            Some(&Value::Bool(expected)),
            "{address}: {vm}"
        );
    }
}

/// Issue 29 item 5: `trusted_launch = false` sent `securityType: Standard`, which ARM refuses
/// from a subscription not registered for `UseStandardSecurityType` (the emulator's default, as
/// most subscriptions are). The body now leaves the profile out, and the VM is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_launch_false_applies_without_the_standard_security_type_feature() {
    let w = world().await;
    edit(
        &w.path("dual-dsvm.hcl"),
        "size    = \"Standard_D4ds_v5\"",
        "size    = \"Standard_D4ds_v5\"\n  trusted_launch = false",
    );
    let apply = w.ok(&["apply", "dual-dsvm.hcl", "--auto-approve"]).await;
    assert!(apply.contains("Apply complete:"), "{apply}");
    let plan = w
        .run(&["plan", "dual-dsvm.hcl", "--detailed-exitcode"])
        .await;
    assert_eq!(plan.status.code(), Some(0), "{}", describe(&plan));
}

/// The emulator's own `--help` example: `dsinfra emulator --latency-scale 0.01`, then
/// `apply --endpoint` with nothing else set. The client cannot know the scale, so it runs at the
/// emulator's speed only if `Retry-After` counts the emulator's seconds. In ARM time one VM create
/// alone is 90 s (`ops::base_latency`), and the old `Retry-After: 90` made the client wait all of
/// it; at 0.01 the whole chain (group, NSG, VNet, NIC, VM) is about 1 s of model, and each poll
/// waits at most a whole second more, so half a VM's ARM time is a generous bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_against_a_compressed_emulator_needs_no_latency_scale_variable() {
    let w = world_with(|c| EmulatorConfig {
        latency_scale: 0.01,
        ..c
    })
    .await;
    let mut cmd = w.command(&["apply", "dual-dsvm.hcl", "--auto-approve"]);
    cmd.env_remove("DSINFRA_EMULATOR_LATENCY_SCALE");
    let started = std::time::Instant::now();
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("dsinfra runs"))
        .await
        .expect("joined");
    let took = started.elapsed();
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        took < Duration::from_secs(45),
        "apply took {took:?}: it waited ARM's time, not the emulator's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_keep_data_leaves_exactly_the_data_and_its_group() {
    let w = world().await;
    w.ok(&["apply", "nd40-beeond.hcl", "--auto-approve"]).await;
    w.ok(&[
        "destroy",
        "nd40-beeond.hcl",
        "--auto-approve",
        "--keep-data",
    ])
    .await;
    let left = w.inventory(&group_of("cosmoflow")).await;
    let kinds: BTreeSet<&str> = left
        .iter()
        .map(|id| {
            if id.ends_with("/resourcegroups/dsinfra-cosmoflow") {
                "group"
            } else if id.contains("/containers/") {
                "container"
            } else if id.contains("/shares/") {
                "share"
            } else if id.contains("/storageaccounts/") {
                "account"
            } else {
                "other"
            }
        })
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["account", "container", "group", "share"]),
        "{left:#?}"
    );
    assert_eq!(left.len(), 4, "{left:#?}");
    assert_eq!(left, w.expected_cloud("nd40-beeond"));
    let addresses = w.state_addresses("nd40-beeond");
    assert!(
        addresses.iter().all(|a| a.starts_with("storage_account.")
            || a == "azure.resource_group"
            || a.starts_with("sas.")),
        "{addresses:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_without_a_terminal_or_auto_approve_refuses_instead_of_waiting() {
    let w = world().await;
    let out = w.run(&["apply", "dual-dsvm.hcl"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "error: apply needs approval, but there is no terminal to ask on: review the plan above and run again with --auto-approve"
        ),
        "{}",
        describe(&out)
    );
    assert_eq!(w.inventory(&group_of("dual-dsvm")).await, BTreeSet::new());
}

fn respond(
    method: &str,
    path: &str,
    count: u32,
    status: u16,
    code: &str,
    message: &str,
) -> FaultRule {
    FaultRule {
        method: Some(method.to_owned()),
        path: Some(path.to_owned()),
        resource_type: None,
        count: Some(count),
        action: FaultAction::Respond {
            status,
            code: code.to_owned(),
            message: message.to_owned(),
            retry_after: Some(1),
        },
    }
}

/// After a recovered fault the run converges as if nothing happened.
async fn recovers(w: &World) {
    let out = w.run(&["apply", "dual-dsvm.hcl", "--auto-approve"]).await;
    assert!(out.status.success(), "{}", describe(&out));
    let plan = w
        .run(&["plan", "dual-dsvm.hcl", "--detailed-exitcode"])
        .await;
    assert_eq!(plan.status.code(), Some(0), "{}", describe(&plan));
    assert_eq!(
        w.inventory(&group_of("dual-dsvm")).await,
        w.expected_cloud("dual-dsvm")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_storm_is_ridden_out() {
    let w = world().await;
    w.handle.add_fault(respond(
        "PUT",
        "*",
        12,
        429,
        "TooManyRequests",
        "The request is being throttled.",
    ));
    recovers(&w).await;
    assert!(w.handle.faults().is_empty(), "the storm was not consumed");
}

/// Regression: a 429 asking for longer than the client waits out (Compute's per-VM policies say
/// up to 1200 s) used to be retried early, by the client and again by the engine's throttled
/// rounds. Now that resource fails at once saying when to apply again, and a rerun converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_beyond_the_clients_wait_fails_the_resource_with_a_time_to_apply_again() {
    let w = world().await;
    let mut rule = respond(
        "PUT",
        "*/networkSecurityGroups/*",
        1,
        429,
        "SubscriptionRequestsThrottled",
        "Number of 'write' requests for subscription exceeded.",
    );
    if let FaultAction::Respond { retry_after, .. } = &mut rule.action {
        *retry_after = Some(1200);
    }
    w.handle.add_fault(rule);
    let out = w.run(&["apply", "dual-dsvm.hcl", "--auto-approve"]).await;
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "SubscriptionRequestsThrottled: Number of 'write' requests for subscription exceeded."
        ),
        "{text}"
    );
    assert!(
        text.contains("; Azure asks to wait 1200 s (policy SubscriptionRequestsThrottled), longer than dsinfra waits between retries (120 s), so it stopped without retrying"),
        "{text}"
    );
    assert!(
        text.contains("= help: Azure throttles network.main for 1200 s: run apply again after "),
        "{text}"
    );
    recovers(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_server_errors_are_retried() {
    let w = world().await;
    w.handle.add_fault(respond(
        "PUT",
        "*/networkInterfaces/*",
        2,
        500,
        "InternalServerError",
        "An internal error occurred.",
    ));
    recovers(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_mid_run_is_refreshed() {
    let w = world().await;
    w.handle.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: Some("*/virtualMachines/*".into()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::ExpireToken,
    });
    recovers(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocation_failure_in_the_operation_fails_that_vm_only_and_a_rerun_converges() {
    let w = world().await;
    w.handle.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: Some("*/virtualMachines/dual-dsvm-gpu".into()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::FailOperation {
            status: 409,
            code: "AllocationFailed".into(),
            message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.".into(),
        },
    });
    let out = w.run(&["apply", "dual-dsvm.hcl", "--auto-approve"]).await;
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error: create vm.gpu.vm: AllocationFailed: Allocation failed. We do not have sufficient capacity for the requested VM size in this region."),
        "{text}"
    );
    assert!(
        text.contains("= help: Azure has no capacity for Standard_NC4as_T4_v3 in eastus right now: try another zone, region or size (`zone`, `location` or `size` of vm.gpu at dual-dsvm.hcl:30), or apply again later"),
        "{text}"
    );
    assert!(
        text.contains("skipped: create vm.gpu.auto_shutdown (needs vm.gpu.vm)"),
        "{text}"
    );
    // Independent work went on; the failed VM is recorded as an intent.
    let state = w.state("dual-dsvm");
    let status = |address: &str| {
        state["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["address"] == address)
            .map(|r| r["status"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(status("vm.prep.vm").as_deref(), Some("created"));
    assert_eq!(status("vm.gpu.vm").as_deref(), Some("creating"));
    assert_eq!(status("vm.gpu.auto_shutdown"), None);
    recovers(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_refusal_names_family_region_numbers_and_where_to_ask() {
    let w = world().await;
    w.handle.add_fault(respond(
        "PUT",
        "*/virtualMachines/dual-dsvm-gpu",
        1,
        409,
        "OperationNotAllowed",
        "Operation could not be completed as it results in exceeding approved standardNCSv3Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 4, Current Usage: 0, Additional Required: 6, (Minimum) New Limit Required: 6.",
    ));
    let out = w.run(&["apply", "dual-dsvm.hcl", "--auto-approve"]).await;
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("error: create vm.gpu.vm: OperationNotAllowed: Operation could not be completed as it results in exceeding approved standardNCSv3Family Cores quota."), "{text}");
    assert!(
        text.contains("= help: the standardNCSv3Family vCPU quota in eastus is too small: 6 more vCPUs are needed, 4 available (limit 4, in use 0)"),
        "{text}"
    );
    assert!(
        text.contains("= help: request more in the Azure portal > Quotas > Compute (standardNCSv3Family, eastus) to at least 6"),
        "{text}"
    );
    serde_json::to_string(&w.state("dual-dsvm")).expect("valid state");
    recovers(&w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_quota_is_refused_before_anything_is_spent() {
    let w = world_with(|mut c| {
        c.quotas.limits.push(emulator::QuotaLimit {
            location: "eastus".into(),
            family: "Standard NCASv3_T4 Family".into(),
            limit: 2,
        });
        c
    })
    .await;
    let out = w.run(&["apply", "dual-dsvm.hcl", "--auto-approve"]).await;
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("Standard NCASv3_T4 Family"), "{text}");
    assert!(text.contains("Quotas"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
}

/// SIGKILL the apply after `delay`, then apply again: the cloud holds exactly what the state
/// says, which is exactly the manifest.
async fn kill_and_recover(delay: Duration) {
    let w = world().await;
    let mut child = w
        .command(&["apply", "nd40-beeond.hcl", "--auto-approve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dsinfra starts");
    tokio::time::sleep(delay).await;
    let _ = child.kill();
    let _ = child.wait();
    let out = w.run(&["apply", "nd40-beeond.hcl", "--auto-approve"]).await;
    assert!(
        out.status.success(),
        "after a kill at {delay:?}: {}",
        describe(&out)
    );
    let plan = w
        .run(&["plan", "nd40-beeond.hcl", "--detailed-exitcode"])
        .await;
    assert_eq!(plan.status.code(), Some(0), "{}", describe(&plan));
    assert_eq!(
        w.inventory(&group_of("cosmoflow")).await,
        w.expected_cloud("nd40-beeond"),
        "after a kill at {delay:?}"
    );
    // Every resource of the manifest (17: group, network 2, storage 3, SAS, PPG, 4 NICs, 4 VMs,
    // the head's public IP), each once.
    assert_eq!(w.state_addresses("nd40-beeond").len(), 18);
}

/// Read an apply's output into `seen` until its first create is reported (`true`), or until it
/// ends (`false`).
fn until_first_create(stdout: &mut impl std::io::BufRead, seen: &mut String) -> bool {
    loop {
        let mut line = String::new();
        if stdout.read_line(&mut line).map_or(true, |n| n == 0) {
            return false;
        }
        seen.push_str(&line);
        if line.contains("creating...") {
            return true;
        }
    }
}

/// The intents of every new resource are saved before the walk starts (engine/execute/intents.rs):
/// killed the moment the first create is reported, the state already names all 16 ARM resources
/// the manifest creates (the SAS is signed locally, after its account), none of them yet created,
/// and the next apply converges on exactly the manifest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_as_the_first_create_starts_the_state_names_everything_the_plan_creates() {
    let w = world().await;
    let mut child = w
        .command(&["apply", "nd40-beeond.hcl", "--auto-approve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dsinfra starts");
    let stdout = child.stdout.take();
    // Read until the first create is reported, then kill at once.
    let (seen, started) = tokio::task::spawn_blocking(move || {
        let mut seen = String::new();
        let started = stdout
            .is_some_and(|out| until_first_create(&mut std::io::BufReader::new(out), &mut seen));
        (seen, started)
    })
    .await
    .unwrap_or_default();
    let _ = child.kill();
    child.wait().expect("reaped");
    assert!(started, "the apply ended before any create started: {seen}");
    let state = w.state("nd40-beeond");
    let records = state["resources"].as_array().expect("resources");
    let creating: BTreeSet<&str> = records
        .iter()
        .filter(|r| r["status"] == "creating")
        .map(|r| r["address"].as_str().expect("address"))
        .collect();
    assert_eq!(creating.len(), 17, "{creating:?}\n{seen}");
    assert_eq!(records.len(), 17, "{state:#}");
    assert!(!creating.contains("sas.read"), "{creating:?}");
    let out = w.run(&["apply", "nd40-beeond.hcl", "--auto-approve"]).await;
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        w.inventory(&group_of("cosmoflow")).await,
        w.expected_cloud("nd40-beeond")
    );
    assert_eq!(w.state_addresses("nd40-beeond").len(), 18);
}

/// Five fixed moments spread over the apply (about 0.5 s at this scale: network, storage, NICs,
/// VMs); `DSINFRA_KILL_TRIALS=N` (scripts/kill-test.sh) runs N trials at random moments instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_five_moments_never_duplicates_or_orphans() {
    let delays: Vec<u64> = match std::env::var("DSINFRA_KILL_TRIALS") {
        Ok(n) => {
            let n: usize = n.parse().expect("DSINFRA_KILL_TRIALS is a number");
            let mut seed: u64 = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .subsec_nanos()
                .into();
            seed |= 1;
            (0..n)
                .map(|_| {
                    // xorshift: good enough to spread kill moments, no dependency needed.
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    20 + seed % 900
                })
                .collect()
        }
        Err(_) => vec![60, 180, 330, 520, 800],
    };
    for (trial, millis) in delays.iter().enumerate() {
        eprintln!("kill trial {}: SIGKILL after {millis} ms", trial + 1);
        kill_and_recover(Duration::from_millis(*millis)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_plan_is_applied_exactly_once_and_then_refused_as_stale() {
    let w = world().await;
    w.ok(&["plan", "dual-dsvm.hcl", "-out", "dual.plan"]).await;
    let applied = w.ok(&["apply", "dual.plan"]).await;
    assert!(applied.contains("Apply complete: 12 created"), "{applied}");
    assert_eq!(
        w.inventory(&group_of("dual-dsvm")).await,
        w.expected_cloud("dual-dsvm")
    );
    let again = w.run(&["apply", "dual.plan"]).await;
    let text = describe(&again);
    assert_eq!(again.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "error: the saved plan was made against state serial 0, the state is now at serial"
        ),
        "{text}"
    );
    assert!(text.contains(": run `dsinfra plan -out` again"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_lets_running_work_finish_saves_and_exits_130() {
    let w = world().await;
    let mut child = w
        .command(&["apply", "nd40-beeond.hcl", "--auto-approve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dsinfra starts");
    // One SIGINT as soon as the first resource starts: most of the walk is still ahead.
    let out = tokio::task::spawn_blocking(move || {
        use std::io::{BufReader, Read as _};
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut seen = String::new();
        if until_first_create(&mut stdout, &mut seen) {
            let status = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .expect("kill runs");
            assert!(status.success());
        }
        stdout.read_to_string(&mut seen).expect("readable");
        let mut out = child.wait_with_output().expect("waits");
        out.stdout = seen.into_bytes();
        out
    })
    .await
    .expect("joined");
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert!(
        text.contains("interrupted: starting nothing new; waiting for"),
        "{text}"
    );
    assert!(text.contains("not started (interrupted)"), "{text}");
    // What finished is saved; an intent is left only for what was sent: the early intents of
    // what never started were withdrawn (engine/execute/intents.rs).
    let cloud = w.inventory(&group_of("cosmoflow")).await;
    let state = w.state("nd40-beeond");
    for record in state["resources"].as_array().expect("resources") {
        if record["status"] == "creating" {
            let id = record["id"].as_str().expect("an intent has its id");
            assert!(
                cloud.contains(&id.to_ascii_lowercase()),
                "an intent for {} survived although it was never sent: {state:#}",
                record["address"]
            );
        }
    }
    assert!(
        w.state_addresses("nd40-beeond").len() < 17,
        "the interrupt came too late to test anything: {text}"
    );
    // A second apply completes the rest.
    w.ok(&["apply", "nd40-beeond.hcl", "--auto-approve"]).await;
    assert_eq!(
        w.inventory(&group_of("cosmoflow")).await,
        w.expected_cloud("nd40-beeond")
    );
}

/// Decision 28, end to end: moving a data disk to another VM and growing it reaches ARM as three
/// PATCHes (the disk's size, the losing VM's data disks, the gaining VM's), never as a PUT that
/// re-sends a VM's whole model; afterwards the disk is on the new VM at its new size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_and_growing_a_data_disk_is_sent_as_patches() {
    let (w, writes) = world_recording(&["PUT", "PATCH"]).await;
    let file = "dual-dsvm-files.hcl";
    w.ok(&["apply", file, "--auto-approve"]).await;
    writes.lock().expect("not poisoned").clear();
    edit(&w.path(file), "attach_to = vm.prep", "attach_to = vm.train");
    edit(&w.path(file), "size_gb   = 1024", "size_gb   = 2048");
    w.ok(&["apply", file, "--auto-approve"]).await;

    let id_of = |address: &str| w.id_in_state("dual-dsvm-files", address);
    let (disk, prep, train) = (
        id_of("disk.datasets"),
        id_of("vm.prep.vm"),
        id_of("vm.train.vm"),
    );
    let mut sent = writes.lock().expect("not poisoned").clone();
    sent.sort();
    let mut expected = vec![
        ("PATCH".to_owned(), disk.clone()),
        ("PATCH".to_owned(), prep),
        ("PATCH".to_owned(), train.clone()),
    ];
    expected.sort();
    assert_eq!(sent, expected, "only PATCHes, one per changed resource");

    let read = reqwest::Client::new()
        .get(format!("{}{disk}", w.handle.endpoint()))
        .query(&[("api-version", "2025-01-02")])
        .bearer_auth("test")
        .send()
        .await
        .expect("the emulator answers");
    let read: Value = read.json().await.expect("JSON");
    assert_eq!(read["properties"]["diskSizeGB"], 2048);
    assert!(
        read["managedBy"]
            .as_str()
            .is_some_and(|owner| owner.eq_ignore_ascii_case(&train)),
        "{read:#}"
    );
}

/// POSTs `register` for `namespace` as `az provider register` does, then waits until the
/// provider says `Registered` (what `az provider show` is asked for).
async fn register(w: &World, namespace: &str) {
    let provider = format!(
        "{}/subscriptions/{SUB}/providers/{namespace}",
        w.handle.endpoint()
    );
    let http = reqwest::Client::new();
    let resp = http
        .post(format!("{provider}/register?api-version=2025-04-01"))
        .bearer_auth("test")
        .send()
        .await
        .expect("the emulator answers");
    assert_eq!(resp.status(), 200);
    for _ in 0..100 {
        let body: Value = http
            .get(format!("{provider}?api-version=2025-04-01"))
            .bearer_auth("test")
            .send()
            .await
            .expect("the emulator answers")
            .json()
            .await
            .expect("JSON");
        if body["registrationState"] == "Registered" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{namespace} never registered");
}

const REGISTER_HELP: &str = "register the subscription for Microsoft.DevTestLab once: `az provider register --namespace Microsoft.DevTestLab`; registering takes a minute or two";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unregistered_devtestlab_is_explained_before_anything_is_written() {
    let w = world_with(|c| EmulatorConfig {
        unregistered: vec!["Microsoft.DevTestLab".into()],
        ..c
    })
    .await;
    let out = w.run(&["apply", "dual-dsvm.hcl", "--auto-approve"]).await;
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error: the subscription is not registered for Microsoft.DevTestLab (NotRegistered), which vm.gpu needs: ARM would refuse it with MissingSubscriptionRegistration"),
        "{text}"
    );
    assert_eq!(text.matches(REGISTER_HELP).count(), 1, "said once: {text}");
    assert!(
        w.inventory(&group_of("dual-dsvm")).await.is_empty(),
        "nothing written"
    );
    register(&w, "Microsoft.DevTestLab").await;
    let applied = w.ok(&["apply", "dual-dsvm.hcl", "--auto-approve"]).await;
    assert!(applied.contains("Apply complete: 12 created"), "{applied}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_plan_meeting_missing_registration_advises_registering_once() {
    let w = world().await;
    w.ok(&["plan", "dual-dsvm.hcl", "-out", "dual.plan"]).await;
    // Registration undone after the plan was made: only the writes can tell.
    let url = format!(
        "{}/subscriptions/{SUB}/providers/Microsoft.DevTestLab/unregister?api-version=2025-04-01",
        w.handle.endpoint()
    );
    let resp = reqwest::Client::new()
        .post(url)
        .bearer_auth("test")
        .send()
        .await
        .expect("the emulator answers");
    assert_eq!(resp.status(), 200);
    let out = w.run(&["apply", "dual.plan"]).await;
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(
        text.matches("MissingSubscriptionRegistration: The subscription is not registered to use namespace 'Microsoft.DevTestLab'.").count(),
        2,
        "both schedules fail: {text}"
    );
    assert_eq!(
        text.matches(REGISTER_HELP).count(),
        1,
        "advised once: {text}"
    );
}

/// Regression: a smaller `size_gb` used to be planned as an in-place update, so apply moved the
/// disk between VMs first and only then met Azure's refusal to shrink it. Now the plan stops
/// before any write, pointing at `size_gb`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_shrink_is_refused_by_the_plan_before_anything_is_changed() {
    let (w, writes) = world_recording(&["PUT", "PATCH", "POST", "DELETE"]).await;
    let file = "dual-dsvm-files.hcl";
    w.ok(&["apply", file, "--auto-approve"]).await;
    writes.lock().expect("not poisoned").clear();
    edit(&w.path(file), "attach_to = vm.prep", "attach_to = vm.train");
    edit(&w.path(file), "size_gb   = 1024", "size_gb   = 512");
    let out = w.run(&["apply", file, "--auto-approve"]).await;
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error: disk.datasets is 1024 GiB and Azure cannot shrink a managed disk, but the manifest asks for 512 GiB\n  --> dual-dsvm-files.hcl:15:15"),
        "{text}"
    );
    assert_eq!(*writes.lock().expect("not poisoned"), []);
}

/// Regression: a new `sku` on a data disk used to replace the disk (delete, then create: its data
/// gone; only a `prevent_destroy`, taken off here, stopped it), for what Azure does in place. Now, while the disk's VM runs, the plan stops at `sku` and says to park the VM, with
/// nothing written; once it is parked, the apply sends one PATCH of the disk and no DELETE, and
/// the disk keeps its id and Azure's `uniqueId` (the same disk, so the same data) on the same VM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disks_new_sku_is_patched_in_place_once_its_vm_is_parked() {
    let (w, writes) = world_recording(&["PUT", "PATCH", "POST", "DELETE"]).await;
    let file = "dual-dsvm-files.hcl";
    w.ok(&["apply", file, "--auto-approve"]).await;
    let id_of = |address: &str| w.id_in_state("dual-dsvm-files", address);
    let (disk, prep) = (id_of("disk.datasets"), id_of("vm.prep.vm"));
    let read_disk = || async {
        let resp = reqwest::Client::new()
            .get(format!("{}{disk}", w.handle.endpoint()))
            .query(&[("api-version", "2025-01-02")])
            .bearer_auth("test")
            .send()
            .await
            .expect("the emulator answers");
        resp.json::<Value>().await.expect("JSON")
    };
    let unique_id = read_disk().await["properties"]["uniqueId"].clone();
    assert!(unique_id.is_string(), "the emulator names the disk");

    edit(
        &w.path(file),
        "sku       = \"Premium_LRS\"",
        "sku       = \"StandardSSD_LRS\"",
    );
    edit(&w.path(file), "lifecycle { prevent_destroy = true }", "");
    writes.lock().expect("not poisoned").clear();
    let out = w.run(&["apply", file, "--auto-approve"]).await;
    let text = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error: disk.datasets changes from Premium_LRS to StandardSSD_LRS, which Azure does only while the disk's VM is deallocated, and vm.prep is running\n  --> dual-dsvm-files.hcl:16:15"),
        "{text}"
    );
    assert!(
        text.contains("help: park it first: `dsinfra park dual-dsvm-files.hcl --only vm.prep` deallocates it and keeps its disks and their data (only the temp disk is lost); apply again, then `dsinfra unpark dual-dsvm-files.hcl --only vm.prep` starts it"),
        "{text}"
    );
    assert_eq!(*writes.lock().expect("not poisoned"), [], "nothing written");

    // What the help says, in order.
    w.ok(&["park", file, "--only", "vm.prep", "--auto-approve"])
        .await;
    writes.lock().expect("not poisoned").clear();
    let applied = w.ok(&["apply", file, "--auto-approve"]).await;
    assert!(
        applied.contains("Apply complete: 0 created, 1 updated, 0 deleted"),
        "{applied}"
    );
    assert_eq!(
        *writes.lock().expect("not poisoned"),
        [("PATCH".to_owned(), disk.clone())],
        "one PATCH of the disk, no DELETE, no PUT"
    );
    let after = read_disk().await;
    assert_eq!(after["sku"]["name"], "StandardSSD_LRS");
    assert_eq!(after["properties"]["uniqueId"], unique_id, "the same disk");
    assert!(
        after["managedBy"]
            .as_str()
            .is_some_and(|owner| owner.eq_ignore_ascii_case(&prep)),
        "{after:#}"
    );
    assert_eq!(id_of("disk.datasets"), disk);
    w.ok(&["unpark", file, "--only", "vm.prep", "--auto-approve"])
        .await;
}
