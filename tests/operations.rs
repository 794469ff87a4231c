//! Day-two operations against the emulator: refresh and drift, the quota/SKU preflight and the
//! size fallback in `plan`, `park`/`unpark`/`status`, `output` and `state list|show`.
//!
//! Each test builds its world directly: an in-process emulator, the experiment's resources PUT
//! through the ARM client, and the matching state written next to the manifest (as an apply would
//! leave it). The CLI behaviour is then checked by running the real binary with `--endpoint`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use assert_cmd::Command;
use dsinfra::azure::{ArmClient, ResourceId, StaticTokenCredential};
use dsinfra::connect::{EMULATOR_SUBSCRIPTION, builtin_emulator_config};
use dsinfra::emulator::{
    self, EmulatorConfig, EmulatorHandle, FaultAction, FaultRule, QuotaLimit, SkuRestriction,
};
use dsinfra::engine::refresh::refresh;
use dsinfra::manifest::{self, LoadOptions};
use dsinfra::model::{Desired, ResourceKind};
use dsinfra::state::{LocalBackend, PowerState, State};
use serde_json::{Value, json};

const SUB: &str = EMULATOR_SUBSCRIPTION;

const MANIFEST: &str = r#"azure { location = "eastus" }

network "main" { ssh_from = ["203.0.113.7/32"] }

vm "gpu" {
  size    = "Standard_NC4as_T4_v3"
  image   = "dsvm-ubuntu-22.04"
  ssh_key = file("demo.pub")
}

output "ssh" { value = "ssh azureuser@${vm.gpu.public_ip}" }
output "private" {
  value     = vm.gpu.private_ip
  sensitive = true
}
"#;

fn dsinfra(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("dsinfra").expect("the dsinfra binary is built by cargo test");
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("AZURE_SUBSCRIPTION_ID");
    cmd
}

/// A temp dir with `exp.hcl` (the given text) and the demo SSH key it reads.
fn scratch(manifest: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/keys/demo.pub");
    std::fs::copy(key, dir.path().join("demo.pub")).expect("copy the demo key");
    let path = dir.path().join("exp.hcl");
    std::fs::write(&path, manifest).expect("write the manifest");
    (dir, path)
}

fn desired_of(path: &Path) -> Desired {
    let Ok(loaded) = manifest::load(path, &LoadOptions::default()) else {
        panic!("the test manifest {} is valid", path.display());
    };
    loaded.desired
}

/// An emulator with every catalog size, operations instant.
fn config() -> EmulatorConfig {
    let mut config = builtin_emulator_config(None, 0.0);
    config.throttle = false;
    config
}

/// [`config`] with one vCPU quota limit: `limit` vCPUs of `family` in `location` (`*`: any).
fn config_with_quota(location: &str, family: &str, limit: u32) -> EmulatorConfig {
    let mut config = config();
    config.quotas.limits.push(QuotaLimit {
        location: location.into(),
        family: family.into(),
        limit,
    });
    config
}

/// `dsinfra plan exp.hcl --endpoint` on `manifest`, against an emulator started from `config`:
/// the manifest's directory, the emulator's endpoint, and how the plan ended.
async fn plan_against(
    manifest: &str,
    config: EmulatorConfig,
) -> (tempfile::TempDir, String, assert_cmd::assert::Assert) {
    let (dir, _) = scratch(manifest);
    let emulator = emulator::start(config).await.expect("starts");
    let endpoint = emulator.endpoint();
    let assert = dsinfra(dir.path())
        .args(["plan", "exp.hcl", "--endpoint", &endpoint])
        .assert();
    (dir, endpoint, assert)
}

fn client(emulator: &EmulatorHandle) -> ArmClient {
    ArmClient::builder(Arc::new(StaticTokenCredential::new("test-token")))
        .endpoint(emulator.endpoint())
        .time_scale(0.001)
        .build()
        .expect("a client")
}

fn id(desired: &Desired, address: &str) -> String {
    desired
        .resource(&address.parse().expect("valid address"))
        .expect("the manifest has it")
        .arm_id(SUB)
}

/// The ARM body of each resource of the test manifest, from its attributes.
fn body(desired: &Desired, kind: ResourceKind, attrs: &dsinfra::model::Attrs) -> Value {
    let location = attrs["location"].clone();
    let tags = attrs["tags"].clone();
    match kind {
        ResourceKind::ResourceGroup | ResourceKind::NetworkSecurityGroup => {
            json!({"location": location, "tags": tags})
        }
        ResourceKind::VirtualNetwork => json!({"location": location, "tags": tags, "properties": {
            "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}}),
        ResourceKind::PublicIp => json!({"location": location, "tags": tags,
            "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}}),
        ResourceKind::NetworkInterface => {
            json!({"location": location, "tags": tags, "properties": {
            "enableAcceleratedNetworking": attrs["accelerated_networking"],
            "ipConfigurations": [{"name": "ipconfig1", "properties": {
                "subnet": {"id": format!("{}/subnets/default", id(desired, "network.main.vnet"))},
                "publicIPAddress": {"id": id(desired, "vm.gpu.public_ip")},
                "privateIPAllocationMethod": "Dynamic"}}]}})
        }
        ResourceKind::VirtualMachine => {
            vm_body(desired, attrs["size"].as_str().unwrap_or_default(), &tags)
        }
        other => panic!("the test manifest has no {other}"),
    }
}

fn vm_body(desired: &Desired, size: &str, tags: &Value) -> Value {
    json!({"location": "eastus", "tags": tags, "properties": {
        "hardwareProfile": {"vmSize": size},
        "storageProfile": {
            "imageReference": {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2", "version": "latest"},
            "osDisk": {"createOption": "FromImage", "managedDisk": {"storageAccountType": "StandardSSD_LRS"}, "deleteOption": "Delete"}},
        "osProfile": {"computerName": "gpu", "adminUsername": "azureuser",
            "linuxConfiguration": {"disablePasswordAuthentication": true,
                "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA"}]}}},
        "networkProfile": {"networkInterfaces": [{"id": id(desired, "vm.gpu.nic"), "properties": {"primary": true}}]}}})
}

/// The experiment as an apply leaves it: its resources in the emulator, its state on disk.
struct World {
    dir: tempfile::TempDir,
    manifest: PathBuf,
    emulator: EmulatorHandle,
    client: ArmClient,
    desired: Desired,
}

impl World {
    async fn applied(config: EmulatorConfig) -> Self {
        let (dir, manifest) = scratch(MANIFEST);
        Self::applied_in(dir, manifest, config).await
    }

    async fn applied_in(dir: tempfile::TempDir, manifest: PathBuf, config: EmulatorConfig) -> Self {
        let emulator = emulator::start(config).await.expect("the emulator starts");
        let client = client(&emulator);
        let desired = desired_of(&manifest);
        let order = [
            "azure.resource_group",
            "network.main.nsg",
            "network.main.vnet",
            "vm.gpu.public_ip",
            "vm.gpu.nic",
            "vm.gpu.vm",
        ];
        for address in order {
            let r = desired
                .resource(&address.parse().expect("valid"))
                .expect("in the manifest");
            let _: Value = client
                .put(
                    &ResourceId::from_raw(r.arm_id(SUB)),
                    &body(&desired, r.kind, &r.attrs),
                )
                .await
                .unwrap_or_else(|e| panic!("PUT {address}: {e}"));
        }
        let mut state = State::from_applied(&desired, SUB);
        LocalBackend::open(&manifest)
            .expect("state dir")
            .save_sync(&mut state)
            .expect("state saved");
        Self {
            dir,
            manifest,
            emulator,
            client,
            desired,
        }
    }

    fn state(&self) -> State {
        LocalBackend::open(&self.manifest)
            .expect("state dir")
            .load_sync()
            .expect("state reads")
            .expect("state exists")
    }

    /// The power state the state records for the VM at `address`.
    fn power_state(&self, address: &str) -> Option<PowerState> {
        self.state()
            .resource(&address.parse().expect("valid"))
            .and_then(|r| r.power_state)
    }

    /// Run the binary against this world's emulator.
    fn run(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        let endpoint = self.emulator.endpoint();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--endpoint", endpoint.as_str()]);
        dsinfra(self.dir.path()).args(&all).assert()
    }

    async fn public_ip(&self) -> String {
        let pip: Value = self
            .client
            .get(&ResourceId::from_raw(id(&self.desired, "vm.gpu.public_ip")))
            .await
            .expect("GET works")
            .expect("the public IP exists");
        pip["properties"]["ipAddress"]
            .as_str()
            .expect("a static IP has its address")
            .to_owned()
    }
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

fn stderr(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

#[test]
fn plan_without_a_connection_says_refresh_and_the_preflight_were_skipped() {
    let (dir, _) = scratch(MANIFEST);
    let assert = dsinfra(dir.path())
        .args(["plan", "exp.hcl"])
        .assert()
        .success();
    assert_eq!(
        stderr(&assert),
        "note: planned from the saved state only: no Azure connection was requested, so drift detection (refresh) and the quota/SKU preflight were not run\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_finds_a_vm_deleted_and_a_nic_changed_outside_dsinfra_and_the_plan_shows_it() {
    let world = World::applied(config()).await;
    let mut state = world.state();
    let clean = refresh(&world.client, SUB, &mut state)
        .await
        .expect("refresh works");
    assert!(!clean.has_drift(), "{clean:?}");
    assert_eq!(clean.checked, 6);

    // Outside dsinfra: the VM is deleted, the NIC loses accelerated networking.
    world
        .client
        .delete(&ResourceId::from_raw(id(&world.desired, "vm.gpu.vm")))
        .await
        .expect("DELETE works");
    let nic = world
        .desired
        .resource(&"vm.gpu.nic".parse().expect("valid"))
        .expect("present");
    let mut attrs = nic.attrs.clone();
    attrs.insert("accelerated_networking".into(), json!(false));
    let _: Value = world
        .client
        .put(
            &ResourceId::from_raw(nic.arm_id(SUB)),
            &body(&world.desired, ResourceKind::NetworkInterface, &attrs),
        )
        .await
        .expect("PUT works");

    let mut state = world.state();
    let report = refresh(&world.client, SUB, &mut state)
        .await
        .expect("refresh works");
    assert_eq!(report.deleted, ["vm.gpu.vm".parse().expect("valid")]);
    assert_eq!(
        report.changed,
        [(
            "vm.gpu.nic".parse().expect("valid"),
            vec!["accelerated_networking".to_owned()]
        )]
    );

    let serial = world.state().serial;
    let plan = world.run(&["plan", "exp.hcl"]).success();
    let out = stdout(&plan);
    assert!(out.contains("drifted: deleted outside dsinfra"), "{out}");
    assert!(
        out.contains("drifted: `accelerated_networking` changed outside dsinfra"),
        "{out}"
    );
    assert!(
        stderr(&plan).contains(&format!(
            "note: refreshed 6 resource(s) from {}: 1 deleted and 1 changed outside dsinfra\n",
            world.emulator.endpoint()
        )),
        "{}",
        stderr(&plan)
    );
    // Planning saves nothing: the state is as the apply left it.
    assert_eq!(world.state().serial, serial);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preflight_reports_a_family_short_of_quota_on_the_vm_block() {
    let config = config_with_quota("eastus", "Standard NCASv3_T4 Family", 2);
    let (_dir, endpoint, plan) = plan_against(MANIFEST, config).await;
    let assert = plan.code(1);
    assert_eq!(
        stderr(&assert),
        format!(
            "note: refreshed 0 resource(s) from {endpoint}: 0 deleted and 0 changed outside dsinfra
error: not enough vCPU quota in eastus: vm.gpu needs 4 vCPUs of Standard NCASv3_T4 Family, 2 available
 --> exp.hcl:5:1
  |
5 | vm \"gpu\" {{
  | ^^^^^^^^ 1 x Standard_NC4as_T4_v3 (4 vCPUs each)
  = help: Standard NCASv3_T4 Family in eastus: limit 2, in use 0, available 2; this plan adds 4
  = help: request more in the Azure portal > Quotas > Compute (\"Standard NCASv3_T4 Family vCPUs\", region eastus), or try another region or size (`sizes = [...]` on the block tries sizes in order)
"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restricted_size_is_reported_as_sku_not_available() {
    let mut config = config();
    config.sku_restrictions.push(SkuRestriction {
        size: "Standard_NC4as_T4_v3".into(),
        location: "eastus".into(),
        zones: Vec::new(),
    });
    let (_dir, endpoint, plan) = plan_against(MANIFEST, config).await;
    let assert = plan.code(1);
    assert_eq!(
        stderr(&assert),
        format!(
            "note: refreshed 0 resource(s) from {endpoint}: 0 deleted and 0 changed outside dsinfra
error: Standard_NC4as_T4_v3 is not available to this subscription in eastus (SkuNotAvailable)
 --> exp.hcl:5:1
  |
5 | vm \"gpu\" {{
  | ^^^^^^^^ ARM would refuse vm.gpu with SkuNotAvailable (NotAvailableForSubscription)
  = help: try another size or region, or list other sizes in order with `sizes = [...]` on the block; or ask Azure support to enable Standard_NC4as_T4_v3 in eastus (Azure portal > Help + support > Service and subscription limits)
"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_reports_azures_refusal_to_attach_a_premium_disk_to_a_size_without_premium_io() {
    // This cloud's NC4as_T4_v3 has no premium IO (whatever the shipped catalog knows of it), so
    // attaching a Premium SSD to the running VM is refused by the VM update itself, as on Azure;
    // apply must stop there with ARM's code and words.
    let mut config = config();
    config
        .vm_sizes
        .iter_mut()
        .find(|s| s.name == "Standard_NC4as_T4_v3")
        .expect("a catalog size")
        .premium_io = Some(false);
    let world = World::applied(config).await;
    let manifest = format!(
        "{MANIFEST}\ndisk \"fast\" {{\n  size_gb   = 64\n  sku       = \"Premium_LRS\"\n  attach_to = vm.gpu\n}}\n"
    );
    std::fs::write(&world.manifest, manifest).expect("the manifest gains a disk");
    let failed = world.run(&["apply", "exp.hcl", "--auto-approve"]).code(1);
    let out = stdout(&failed);
    assert!(
        out.contains(
            "error: update vm.gpu.vm: InvalidParameter: Requested operation cannot be performed \
             because the VM size Standard_NC4as_T4_v3 does not support the storage account type \
             Premium_LRS of disk 'exp-fast'. Consider updating the VM to a size that supports \
             Premium storage. (request id "
        ),
        "{out}\n{}",
        stderr(&failed)
    );
    assert!(out.contains(", 1 failed."), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_size_fallback_picks_the_second_size_when_the_first_lacks_quota() {
    let manifest = MANIFEST.replace(
        "size    = \"Standard_NC4as_T4_v3\"",
        "sizes   = [\"Standard_ND40rs_v2\", \"Standard_ND96asr_v4\"]",
    );
    let config = config_with_quota("*", "standardNDSv2Family", 0);
    let (dir, _, plan) = plan_against(&manifest, config).await;
    let assert = plan.success();
    let out = stdout(&assert);
    assert!(
        out.contains("Note: vm.gpu: `sizes` resolved to Standard_ND96asr_v4: it passes the quota and SKU preflight, and the candidates before it do not: Standard_ND40rs_v2 (needs 40 standardNDSv2Family vCPUs in eastus, 0 available)\n"),
        "{out}"
    );
    assert!(
        out.contains("+ size                   = \"Standard_ND96asr_v4\""),
        "{out}"
    );
    assert!(
        !out.contains("+ sizes"),
        "the candidate list is not an attribute: {out}"
    );

    // Offline, the first candidate is planned, and the plan says why.
    let offline = dsinfra(dir.path())
        .args(["plan", "exp.hcl"])
        .assert()
        .success();
    assert!(stdout(&offline).contains(
        "Note: vm.gpu: `sizes` resolved to the first candidate, Standard_ND40rs_v2, without checking quota (no Azure connection)"
    ));
}

/// `plan` of a three-node manifest whose first size lacks quota, against an emulator answering
/// lists `page_size` items at a time: its stdout and stderr (the endpoint written as
/// `ENDPOINT`), and how many list pages (usages and SKUs) the preflight requested.
async fn plan_paged(page_size: usize) -> (String, String, usize) {
    let manifest = r#"azure { location = "eastus" }

network "main" { ssh_from = ["203.0.113.7/32"] }

cluster "node" {
  count   = 3
  sizes   = ["Standard_ND40rs_v2", "Standard_ND96asr_v4"]
  ssh_key = file("demo.pub")
}
"#;
    let pages = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&pages);
    let mut config = config_with_quota("*", "standardNDSv2Family", 0);
    config.page_size = page_size;
    config.response_validator = Some(Arc::new(move |request, _| {
        if request.method == "GET"
            && (request.path.ends_with("/usages") || request.path.ends_with("/skus"))
        {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Vec::new()
    }));
    let (_dir, endpoint, plan) = plan_against(manifest, config).await;
    let assert = plan.success();
    (
        stdout(&assert).replace(&endpoint, "ENDPOINT"),
        stderr(&assert).replace(&endpoint, "ENDPOINT"),
        pages.load(std::sync::atomic::Ordering::SeqCst),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preflight_follows_every_page_and_plans_as_with_one_page() {
    // Each preflight reads one usages list (cores, virtualMachines, one per family offered in
    // eastus) and one SKU list (one per size offered in eastus).
    let sizes: Vec<_> = config()
        .vm_sizes
        .into_iter()
        .filter(|s| s.offered_in("eastus"))
        .collect();
    let mut families: Vec<&str> = sizes.iter().map(|s| s.family.as_str()).collect();
    families.sort_unstable();
    families.dedup();
    let usages = 2 + families.len();
    let pages_for = |page_size: usize| usages.div_ceil(page_size) + sizes.len().div_ceil(page_size);

    let (out, err, one_page) = plan_paged(emulator::DEFAULT_PAGE_SIZE).await;
    assert!(
        out.contains("`sizes` resolved to Standard_ND96asr_v4"),
        "the fallback read the ND family's quota: {out}"
    );
    // Small pages: both lists span several pages, and none is cut at a page boundary. Not pages
    // of one: that is a request per SKU, about two minutes of a debug build for nothing more.
    let small = (usages / 3).max(2);
    assert!(usages > 2 * small && sizes.len() > 2 * small);
    let (paged_out, paged_err, pages) = plan_paged(small).await;
    assert_eq!((paged_out, paged_err), (out, err));
    // By default each list takes as many pages as it has thousands of items (the SKU list of a
    // catalog-backed cloud is longer than one page).
    let per_preflight = pages_for(emulator::DEFAULT_PAGE_SIZE);
    let preflights = one_page / per_preflight;
    assert_eq!(one_page, preflights * per_preflight);
    assert_eq!(pages, preflights * pages_for(small));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn park_then_status_then_unpark() {
    let world = World::applied(config()).await;
    let refused = world.run(&["park", "exp.hcl"]).code(1);
    assert!(
        stderr(&refused).ends_with(
            "error: not asking for approval without a terminal: pass --auto-approve to go ahead\n"
        ),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        world.state().resources[5].power_state,
        Some(PowerState::Running)
    );

    let parked = world.run(&["park", "exp.hcl", "--auto-approve"]).success();
    let err = stderr(&parked);
    assert!(err.contains("note: parking deallocates the VMs: compute is no longer billed, but each VM's temp disk (/mnt) is wiped, including BeeOND scratch and blobfuse caches"), "{err}");
    assert!(err.contains("vm.gpu.vm: deallocating...\n"), "{err}");
    assert!(
        err.contains("vm.gpu.vm: deallocated (parked) after "),
        "{err}"
    );
    let out = stdout(&parked);
    // The catalog's eastus price of Standard_NC4as_T4_v3 plus the public IP and the OS disk
    // (issue 29: a 30 GiB StandardSSD_LRS, $0.0031 an hour, which a parked VM still pays).
    assert!(out.starts_with("Cost per hour: $0.5341 before"), "{out}");
    assert!(
        out.contains(", $0.0081 now"),
        "parked costs the public IP and the OS disk: {out}"
    );
    let vm = world
        .state()
        .resource(&"vm.gpu.vm".parse().expect("valid"))
        .cloned()
        .expect("present");
    assert_eq!(vm.power_state, Some(PowerState::Deallocated));

    let ip = world.public_ip().await;
    let status = world.run(&["status", "exp.hcl"]).success();
    let out = stdout(&status);
    let row = out
        .lines()
        .find(|l| l.starts_with("vm.gpu.vm"))
        .unwrap_or_else(|| panic!("a row for the VM: {out}"));
    assert!(row.contains("deallocated (parked)"), "{row}");
    assert!(row.contains(&ip), "{row}");
    assert!(out.contains("Cost per hour now: $0.0"), "{out}");

    let again = world.run(&["park", "exp.hcl", "--auto-approve"]).success();
    assert!(
        stderr(&again).contains("note: nothing to do: 1 VM(s) selected, all already parked"),
        "{}",
        stderr(&again)
    );

    world
        .run(&["unpark", "exp.hcl", "--auto-approve"])
        .success();
    let status = world.run(&["status", "exp.hcl"]).success();
    let out = stdout(&status);
    assert!(
        out.lines()
            .any(|l| l.starts_with("vm.gpu.vm") && l.contains(" running ")),
        "{out}"
    );
    assert_eq!(world.power_state("vm.gpu.vm"), Some(PowerState::Running));

    let unknown = world
        .run(&["park", "exp.hcl", "--only", "gpus", "--auto-approve"])
        .code(1);
    assert!(
        stderr(&unknown).ends_with("error: --only gpus matches no VM in the state (VMs: vm.gpu)\n"),
        "{}",
        stderr(&unknown)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_hides_sensitive_values_unless_asked() {
    let world = World::applied(config()).await;
    let ip = world.public_ip().await;
    let shown = world.run(&["output", "exp.hcl"]).success();
    assert_eq!(
        stdout(&shown),
        format!("ssh     = \"ssh azureuser@{ip}\"\nprivate = (sensitive)\n")
    );
    let nic: Value = world
        .client
        .get(&ResourceId::from_raw(id(&world.desired, "vm.gpu.nic")))
        .await
        .expect("GET works")
        .expect("exists");
    let private = nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
        .as_str()
        .expect("a private IP")
        .to_owned();
    let secret = world
        .run(&["output", "exp.hcl", "--show-secrets"])
        .success();
    assert_eq!(
        stdout(&secret),
        format!("ssh     = \"ssh azureuser@{ip}\"\nprivate = \"{private}\"\n")
    );
    let one = world.run(&["output", "exp.hcl", "ssh"]).success();
    assert_eq!(stdout(&one), format!("ssh azureuser@{ip}\n"));
    let hidden = world.run(&["output", "exp.hcl", "private"]).code(1);
    assert_eq!(
        stderr(&hidden),
        "error: output `private` is sensitive: add --show-secrets to print it\n"
    );
}

#[test]
fn state_list_and_show_print_what_the_state_records() {
    let (dir, manifest) = scratch(MANIFEST);
    let desired = desired_of(&manifest);
    let mut state = State::from_applied(&desired, SUB);
    LocalBackend::open(&manifest)
        .expect("state dir")
        .save_sync(&mut state)
        .expect("saved");
    dsinfra(dir.path())
        .args(["state", "list", "exp.hcl"])
        .assert()
        .success()
        .stdout(
            "azure.resource_group\nnetwork.main.nsg\nnetwork.main.vnet\nvm.gpu.nic\nvm.gpu.public_ip\nvm.gpu.vm\n",
        );
    dsinfra(dir.path())
        .args(["state", "show", "exp.hcl", "vm.gpu.public_ip"])
        .assert()
        .success()
        .stdout(format!(
            r#"# vm.gpu.public_ip
type           = "Microsoft.Network/publicIPAddresses"
name           = "exp-gpu-pip"
resource_group = "dsinfra-exp"
id             = "/subscriptions/{SUB}/resourceGroups/dsinfra-exp/providers/Microsoft.Network/publicIPAddresses/exp-gpu-pip"
status         = created
allocation     = "Static"
location       = "eastus"
sku            = "Standard"
tags           = {{ "dsinfra-address" = "vm.gpu.public_ip", "dsinfra-experiment" = "exp", "managed-by" = "dsinfra" }}
depends_on     = [azure.resource_group]
"#
        ));
    let missing = dsinfra(dir.path())
        .args(["state", "show", "exp.hcl", "vm.gpu.publicip"])
        .assert()
        .code(1);
    assert_eq!(
        stderr(&missing),
        "error: the state has no resource at vm.gpu.publicip: did you mean `vm.gpu.public_ip`?\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_emulator_parks_the_cloud_kept_next_to_the_manifest() {
    let (dir, manifest) = scratch(MANIFEST);
    let mut config = config();
    config.state_dir = Some(dir.path().join(".dsinfra").join("emulator"));
    let World { dir, emulator, .. } = World::applied_in(dir, manifest, config).await;
    emulator.shutdown().await;

    let status = |dir: &Path| {
        let assert = dsinfra(dir)
            .env("DSINFRA_EMULATOR_LATENCY_SCALE", "0")
            .args(["status", "exp.hcl", "--emulator"])
            .assert()
            .success();
        let out = stdout(&assert);
        out.lines()
            .find(|l| l.starts_with("vm.gpu.vm"))
            .map_or_else(|| panic!("a row for the VM: {out}"), str::to_owned)
    };
    assert!(status(dir.path()).contains(" running "));
    dsinfra(dir.path())
        .env("DSINFRA_EMULATOR_LATENCY_SCALE", "0")
        .args([
            "park",
            "exp.hcl",
            "--emulator",
            "--only",
            "gpu",
            "--auto-approve",
        ])
        .assert()
        .success();
    assert!(status(dir.path()).contains(" deallocated (parked) "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpark_that_azure_cannot_place_fails_with_arms_words_and_advice() {
    let world = World::applied(config()).await;
    world.run(&["park", "exp.hcl", "--auto-approve"]).success();
    world.emulator.add_fault(FaultRule {
        method: Some("POST".into()),
        path: Some("*/virtualMachines/*/start".into()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::FailOperation {
            status: 409,
            code: "AllocationFailed".into(),
            message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.".into(),
        },
    });
    let failed = world.run(&["unpark", "exp.hcl", "--auto-approve"]).code(1);
    let err = stderr(&failed);
    assert!(err.contains("vm.gpu.vm: starting failed: "), "{err}");
    assert!(err.contains("AllocationFailed"), "{err}");
    assert!(err.contains("  = help: "), "{err}");
    assert!(
        err.contains("error: 1 of 1 VM(s) could not be started: vm.gpu.vm: "),
        "{err}"
    );
    // The failed VM keeps the power state it had: parked.
    assert_eq!(
        world.power_state("vm.gpu.vm"),
        Some(PowerState::Deallocated)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpark_checks_the_quota_a_parked_vm_needs_again_before_starting_anything() {
    let world = World::applied(config_with_quota("eastus", "Standard NCASv3_T4 Family", 4)).await;
    world.run(&["park", "exp.hcl", "--auto-approve"]).success();
    // Someone else takes the family's 4 vCPUs while the experiment is parked.
    let group = id(&world.desired, "azure.resource_group");
    let nic = format!("{group}/providers/Microsoft.Network/networkInterfaces/other-nic");
    let _: Value = world
        .client
        .put(
            &ResourceId::from_raw(nic.clone()),
            &json!({"location": "eastus", "properties": {"ipConfigurations": [{"name": "ip", "properties": {
                "subnet": {"id": format!("{}/subnets/default", id(&world.desired, "network.main.vnet"))}}}]}}),
        )
        .await
        .expect("PUT NIC");
    let mut other = vm_body(&world.desired, "Standard_NC4as_T4_v3", &json!({}));
    other["properties"]["networkProfile"]["networkInterfaces"][0]["id"] = json!(nic);
    let _: Value = world
        .client
        .put(
            &ResourceId::from_raw(format!(
                "{group}/providers/Microsoft.Compute/virtualMachines/other"
            )),
            &other,
        )
        .await
        .expect("PUT VM");

    let refused = world.run(&["unpark", "exp.hcl", "--auto-approve"]).code(1);
    assert_eq!(
        stderr(&refused),
        "\
error: not enough vCPU quota in eastus: vm.gpu needs 4 vCPUs of Standard NCASv3_T4 Family, 0 available
 --> exp.hcl:5:1
  |
5 | vm \"gpu\" {
  | ^^^^^^^^ 1 x Standard_NC4as_T4_v3 (4 vCPUs each)
  = help: Standard NCASv3_T4 Family in eastus: limit 4, in use 4, available 0; starting them needs 4
  = help: request more in the Azure portal > Quotas > Compute (\"Standard NCASv3_T4 Family vCPUs\", region eastus), or try another region or size (`sizes = [...]` on the block tries sizes in order)
"
    );
    assert_eq!(
        world.power_state("vm.gpu.vm"),
        Some(PowerState::Deallocated)
    );
}

/// Every `method` request (to `path`, if given) waits 30 s before it is answered: long enough
/// to be interrupted in the middle.
fn slowed(method: &str, path: Option<&str>) -> FaultRule {
    FaultRule {
        method: Some(method.into()),
        path: path.map(Into::into),
        resource_type: None,
        // Counted (never running out) so that a test sees when a request is being held:
        // `interrupted_once` presses Ctrl-C only then.
        count: Some(u32::MAX),
        action: FaultAction::Delay {
            millis: 30_000,
            jitter_millis: 0,
        },
    }
}

/// `dsinfra ARGS --endpoint` in the world's directory, started in the background, and
/// interrupted (SIGINT) once it has printed `ready` to stderr (`None`: once the emulator holds one
/// of its requests in a [`slowed`] fault, so the command is inside its wait whatever the load of
/// the machine): how it exited and everything it printed to stderr.
async fn interrupted_once(world: &World, args: &[&str], ready: Option<&str>) -> (i32, String) {
    use std::io::{BufRead as _, BufReader, Read as _};
    let endpoint = world.emulator.endpoint();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dsinfra"))
        .current_dir(world.dir.path())
        .args(args)
        .args(["--endpoint", &endpoint])
        .env("NO_COLOR", "1")
        .env_remove("AZURE_SUBSCRIPTION_ID")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("dsinfra starts");
    if ready.is_none() {
        let held = || {
            world
                .emulator
                .faults()
                .iter()
                .any(|f| f.rule.count.is_some_and(|left| left < u32::MAX))
        };
        let since = std::time::Instant::now();
        while !held() {
            assert!(
                since.elapsed() < std::time::Duration::from_mins(1),
                "{args:?} never reached a slowed request"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let ready = ready.map(str::to_owned);
    let what = format!("{args:?}");
    tokio::task::spawn_blocking(move || {
        let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
        let mut seen = String::new();
        if let Some(ready) = ready {
            while !seen.contains(&ready) {
                let before = seen.len();
                stderr.read_line(&mut seen).expect("readable");
                assert!(seen.len() > before, "{what} ended before {ready:?}: {seen}");
            }
        }
        // Into the slow wait.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let started = std::time::Instant::now();
        let status = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        stderr.read_to_string(&mut seen).expect("readable");
        let code = child
            .wait()
            .expect("waits")
            .code()
            .expect("exited, not killed");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{what} did not stop waiting: {seen}"
        );
        (code, seen)
    })
    .await
    .expect("joined")
}

/// Guards Ctrl-C in park: while it refreshes, it ends with nothing changed; once the
/// deallocation is sent, it stops waiting (Azure goes on with it), says so and exits 130, the
/// state valid and unlocked, so the next command runs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_park_stops_waiting_and_says_what_goes_on() {
    let world = World::applied(config()).await;
    let before = world.state();

    world.emulator.add_fault(slowed("GET", None));
    let (code, err) = interrupted_once(&world, &["park", "exp.hcl", "--auto-approve"], None).await;
    assert_eq!(code, 130, "{err}");
    assert_eq!(err, "note: interrupted: nothing was changed\n");
    assert_eq!(
        world.state().serial,
        before.serial,
        "the state was not written"
    );
    world.emulator.clear_faults();

    world
        .emulator
        .add_fault(slowed("POST", Some("*/virtualMachines/*/deallocate")));
    let (code, err) = interrupted_once(
        &world,
        &["park", "exp.hcl", "--auto-approve"],
        Some("vm.gpu.vm: deallocating...\n"),
    )
    .await;
    assert_eq!(code, 130, "{err}");
    assert!(
        err.ends_with(
            "note: interrupted: the 1 power action(s) sent go on in Azure; what finished is saved, and `dsinfra status exp.hcl` shows the rest\n"
        ),
        "{err}"
    );
    assert_eq!(world.power_state("vm.gpu.vm"), Some(PowerState::Running));
    world.emulator.clear_faults();
    // Unlocked and valid: the next park runs at once and finishes the job.
    world.run(&["park", "exp.hcl", "--auto-approve"]).success();
    assert_eq!(
        world.power_state("vm.gpu.vm"),
        Some(PowerState::Deallocated)
    );
}

/// Guards Ctrl-C in the read-only commands that hold the state's lock while they read ARM
/// (`status`, `output`): the read is abandoned, the command exits 130 saying nothing was
/// changed, and the lock goes with it (killed by the signal instead, a remote lease would stay
/// held for up to a minute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_status_or_output_ends_the_read_and_changes_nothing() {
    let world = World::applied(config()).await;
    world.emulator.add_fault(slowed("GET", None));
    let before = world.state();
    for command in [
        &["status", "exp.hcl"][..],
        &["output", "exp.hcl", "private", "--show-secrets"][..],
    ] {
        let (code, err) = interrupted_once(&world, command, None).await;
        assert_eq!(code, 130, "{command:?}: {err}");
        assert_eq!(
            err, "note: interrupted: nothing was changed\n",
            "{command:?}"
        );
    }
    assert_eq!(
        world.state().serial,
        before.serial,
        "the state was not written"
    );
}

/// Guards Ctrl-C in `ssh` and `ssh-config` while they read the VMs' addresses from ARM: the read
/// is abandoned and the command exits 130 saying nothing was changed (it used to be swallowed by
/// a listener nobody consulted, so the command went on waiting for ARM).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_ssh_or_ssh_config_ends_the_read() {
    let world = World::applied(config()).await;
    world.emulator.add_fault(slowed("GET", None));
    for command in [
        &["ssh-config", "exp.hcl"][..],
        &["ssh", "exp.hcl", "gpu"][..],
    ] {
        let (code, err) = interrupted_once(&world, command, None).await;
        assert_eq!(code, 130, "{command:?}: {err}");
        assert_eq!(
            err, "note: interrupted: nothing was changed\n",
            "{command:?}"
        );
    }
}

/// The same operations called through the library's API (`engine::op`).
#[path = "operations/api.rs"]
mod api;

/// Azure Machine Learning clusters through apply, park, unpark and destroy (issue 17).
#[path = "operations/aml.rs"]
mod aml;

/// Refresh by lists (issue 32): the same drift as per-resource reads, in calls that do not grow
/// with the node count.
#[path = "operations/refresh_lists.rs"]
mod refresh_lists;

/// Storage account names are global across Azure: one held outside the experiment is found at
/// plan time.
#[path = "operations/account_names.rs"]
mod account_names;

/// AKS clusters and pools: apply, park, prune, destroy, the kubeconfig, the preflight.
#[path = "operations/aks.rs"]
mod aks_clusters;
