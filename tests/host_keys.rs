//! Host keys known before the first connection, end to end: the real binary applies a manifest
//! against an in-process emulator whose boot hook starts a real OpenSSH sshd per VM
//! (tests/common/nodes.rs) with the host key the VM's cloud-init customData carries.
//!
//! What is held: every VM's sshd presents exactly the key state pinned for it (a pinned
//! connection runs a command, any other pinned key is refused); the emulator maps each VM's
//! public and private IP to its sshd; an update keeps the key and boots nothing; a replaced VM
//! gets a new key; the private keys never appear in the state, dsinfra's output or the
//! emulator's files; and every customData document passes `cloud-init schema`. When sshd cannot run here the tests say so and return (CI fails instead).

// Other tests share tests/common; not every helper there is used by this file.
#[allow(dead_code)]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::cloud_init;
use common::farm_apply::{self, describe, output, start_emulator};
use common::nodes::{NodeFarm, cloud_config_host_key, cloud_config_ssh_keys};
use common::sshd::TEST_USER;
use dsinfra::emulator::{EmulatorHandle, VmBoot, VmBootHook};
use dsinfra::ssh::{self, Auth, HostKey, HostKeyPair, HostKeyPolicy, Target, WaitPolicy};
use serde_json::Value;

fn quick_wait() -> WaitPolicy {
    WaitPolicy {
        limit: Duration::from_secs(10),
        attempt_timeout: Duration::from_secs(5),
        first_delay: Duration::from_millis(100),
        max_delay: Duration::from_millis(500),
    }
}

/// One VM with a public IP and a two-node cluster (the second node has only a private IP).
fn manifest(client_key: &str, vm_image: &str, team: &str) -> String {
    format!(
        r#"experiment = "hostkeys"
azure {{
  location = "eastus"
  tags     = {{ team = "{team}" }}
}}
network "main" {{ ssh_from = ["203.0.113.7/32"] }}

vm "box" {{
  size           = "Standard_D2s_v5"
  image          = "{vm_image}"
  ssh_key        = "{client_key}"
  admin_username = "{TEST_USER}"
}}

cluster "pair" {{
  size           = "Standard_D2s_v5"
  count          = 2
  image          = "ubuntu-22.04"
  ssh_key        = "{client_key}"
  admin_username = "{TEST_USER}"
}}
"#
    )
}

/// An emulator booting VMs into the farm, and a directory for the manifest and the cloud.
struct World {
    farm: Arc<NodeFarm>,
    handle: EmulatorHandle,
    dir: tempfile::TempDir,
}

impl World {
    async fn start() -> Option<Self> {
        let farm = NodeFarm::start()?;
        let dir = tempfile::tempdir().expect("temp dir");
        let handle = start_emulator(dir.path(), Some(farm.hook()), |_| {}).await;
        Some(Self { farm, handle, dir })
    }

    fn manifest_path(&self) -> PathBuf {
        self.dir.path().join("hostkeys.hcl")
    }

    fn write_manifest(&self, vm_image: &str, team: &str) {
        let text = manifest(&self.farm.client_public_key(), vm_image, team);
        std::fs::write(self.manifest_path(), text).expect("manifest written");
    }

    /// `dsinfra apply --auto-approve` to the end; its output (stdout and stderr).
    async fn apply(&self) -> String {
        let out = output(farm_apply::dsinfra(
            self.dir.path(),
            &self.handle.endpoint(),
            &["apply", "hostkeys.hcl", "--auto-approve"],
        ))
        .await;
        let text = describe(&out);
        assert!(out.status.success(), "apply failed:\n{text}");
        text
    }

    fn state_text(&self) -> String {
        farm_apply::state_text(self.dir.path(), "hostkeys")
    }

    /// Azure VM name -> (address, pinned host key) for every VM in the state.
    fn pinned(&self) -> BTreeMap<String, (String, String)> {
        let state: Value = serde_json::from_str(&self.state_text()).expect("JSON state");
        state["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter(|r| r["kind"] == "virtual_machine")
            .map(|r| {
                let name = r["name"].as_str().expect("a name").to_owned();
                let address = r["address"].as_str().expect("an address").to_owned();
                let key = r["host_key"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{address} has no pinned host key"))
                    .to_owned();
                (name, (address, key))
            })
            .collect()
    }

    /// Connects to the farm host of `vm` pinning `key`, and runs `true`.
    async fn run_true(&self, vm: &str, key: &HostKey) -> Result<(), ssh::Error> {
        let host = self
            .farm
            .host(vm)
            .unwrap_or_else(|| panic!("no farm host for {vm}"));
        let target = Target {
            node: vm.to_owned(),
            host: "127.0.0.1".to_owned(),
            port: host.port,
            user: TEST_USER.to_owned(),
        };
        let auth = Auth::key_file(self.farm.client_key()).expect("the farm's key loads");
        let session = ssh::connect(
            &target,
            &HostKeyPolicy::Pinned(key.clone()),
            &auth,
            &quick_wait(),
        )
        .await?;
        let out = session.output("true", b"", None).await?;
        assert!(out.exit.success(), "`true` failed on {vm}: {out:?}");
        session.close().await;
        Ok(())
    }

    /// Every VM pinned in state answers with exactly that key, and refuses another.
    async fn check_pinned_keys(&self) -> BTreeMap<String, (String, String)> {
        let pinned = self.pinned();
        let other = HostKeyPair::generate().expect("generation works");
        for (vm, (address, line)) in &pinned {
            let key = HostKey::from_openssh(line).expect("state holds an OpenSSH line");
            self.run_true(vm, &key)
                .await
                .unwrap_or_else(|e| panic!("{address}: the pinned key is not accepted: {e}"));
            let refused = self
                .run_true(vm, other.public())
                .await
                .expect_err("another key is refused");
            assert!(refused.is_host_key_mismatch(), "{address}: {refused}");
        }
        pinned
    }

    /// The farm hosts' private keys (the PEM body lines of each).
    fn private_key_lines(&self, vms: &BTreeSet<String>) -> Vec<String> {
        let mut lines = Vec::new();
        for vm in vms {
            let host = self.farm.host(vm).expect("a farm host");
            let pem = std::fs::read_to_string(host.dir.join("ssh_host_ed25519_key"))
                .expect("the host key file exists");
            lines.extend(
                pem.lines()
                    .filter(|l| !l.starts_with("-----") && l.len() > 20)
                    .map(str::to_owned),
            );
        }
        assert!(!lines.is_empty());
        lines
    }

    /// Asserts that no private key line appears in `output`, the state or the emulator's files.
    fn assert_no_private_key(&self, vms: &BTreeSet<String>, output: &str) {
        let mut places = vec![
            ("dsinfra's output".to_owned(), output.to_owned()),
            ("the state".to_owned(), self.state_text()),
        ];
        for file in files_under(&self.dir.path().join("cloud")) {
            let text =
                String::from_utf8_lossy(&std::fs::read(&file).expect("readable")).into_owned();
            places.push((file.display().to_string(), text));
        }
        for line in self.private_key_lines(vms) {
            for (place, text) in &places {
                assert!(!text.contains(&line), "a private host key is in {place}");
            }
        }
        for (place, text) in &places {
            assert!(!text.contains("PRIVATE KEY"), "a private key is in {place}");
            assert!(!text.contains("customData"), "customData is in {place}");
        }
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn the_cloud_config_reader_reads_what_host_key_pair_writes() {
    let pair = HostKeyPair::generate().expect("generation works");
    let doc = pair.cloud_config();
    let keys = cloud_config_ssh_keys(doc.expose()).expect("a cloud-config");
    assert_eq!(
        keys.keys().map(String::as_str).collect::<Vec<_>>(),
        ["ed25519_private", "ed25519_public"]
    );
    assert_eq!(keys["ed25519_private"], pair.private_openssh().expose());
    let (private, public) = cloud_config_host_key(doc.expose()).expect("a host key");
    assert_eq!(private, pair.private_openssh().expose());
    assert!(public.same_key(pair.public()));
    assert_eq!(cloud_config_ssh_keys("#!/bin/sh\necho hi\n"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_farm_host_presents_the_key_from_the_custom_data_and_lets_the_client_in() {
    let Some(farm) = NodeFarm::start() else {
        return;
    };
    let pair = HostKeyPair::generate().expect("generation works");
    let boot = VmBoot {
        vm_id: "00000000-0000-0000-0000-000000000001".into(),
        name: "vm-one".into(),
        admin_username: TEST_USER.into(),
        ssh_public_keys: vec![farm.client_public_key()],
        custom_data: Some(pair.cloud_config().expose().to_owned()),
        public_ip: Some("20.0.0.4".into()),
        private_ip: Some("10.0.0.4".into()),
        vm_size: "Standard_D2s_v5".into(),
        fabric: None,
        ib0_address: None,
    };
    let hook = farm.hook();
    let endpoint = tokio::task::spawn_blocking(move || hook(&boot))
        .await
        .expect("joined")
        .expect("the farm answers an endpoint");
    let host = farm.host("vm-one").expect("the farm knows the host");
    assert_eq!(endpoint, format!("127.0.0.1:{}", host.port));
    assert_eq!(farm.started(), ["vm-one"]);
    assert_eq!(farm.user(), TEST_USER);

    let target = Target {
        node: "vm-one".into(),
        host: "127.0.0.1".into(),
        port: host.port,
        user: TEST_USER.into(),
    };
    let auth = Auth::key_file(farm.client_key()).expect("the farm's key loads");
    let session = ssh::connect(
        &target,
        &HostKeyPolicy::Pinned(pair.public().clone()),
        &auth,
        &quick_wait(),
    )
    .await
    .expect("the key from customData is the host's key");
    let who = session.output("whoami", b"", None).await.expect("exec");
    assert_eq!(who.stdout, TEST_USER);
    let other = HostKeyPair::generate().expect("generation works");
    let refused = ssh::connect(
        &target,
        &HostKeyPolicy::Pinned(other.public().clone()),
        &auth,
        &quick_wait(),
    )
    .await
    .expect_err("another key is refused");
    assert!(refused.is_host_key_mismatch(), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_pins_each_vms_key_keeps_it_on_update_and_replaces_it_with_the_vm() {
    let Some(w) = World::start().await else {
        return;
    };
    w.write_manifest("ubuntu-22.04", "vision");
    let first = w.apply().await;

    // One sshd per VM, each presenting the key state pinned for it.
    let pinned = w.check_pinned_keys().await;
    let vms: BTreeSet<String> = pinned.keys().cloned().collect();
    assert_eq!(vms.len(), 3, "{pinned:?}");
    let started: BTreeSet<String> = w.farm.started().into_iter().collect();
    assert_eq!(started, vms);
    assert_eq!(w.farm.started().len(), 3, "each VM booted once");
    let keys: BTreeSet<&String> = pinned.values().map(|(_, k)| k).collect();
    assert_eq!(keys.len(), 3, "every VM has its own key");

    // The emulator maps each VM's private IP, and the public IPs, to that VM's sshd.
    let listed: Value = reqwest::get(format!("{}/_emulator/ssh-endpoints", w.handle.endpoint()))
        .await
        .expect("the admin API answers")
        .json()
        .await
        .expect("JSON");
    let listed = listed["value"].as_array().expect("a list").clone();
    assert_eq!(
        listed.len(),
        5,
        "three private and two public IPs: {listed:?}"
    );
    assert_eq!(
        listed
            .iter()
            .filter(|e| e.get("publicIpAddressId").is_some())
            .count(),
        2,
        "{listed:?}"
    );
    let ports: BTreeSet<String> = vms
        .iter()
        .map(|vm| format!("127.0.0.1:{}", w.farm.host(vm).expect("a host").port))
        .collect();
    let mapped: BTreeSet<String> = listed
        .iter()
        .map(|e| e["endpoint"].as_str().expect("an endpoint").to_owned())
        .collect();
    assert_eq!(mapped, ports);
    assert_eq!(w.handle.ssh_endpoints().len(), 5);

    // New tags update every VM in place (a PUT without customData): same keys, no new boot.
    w.write_manifest("ubuntu-22.04", "speech");
    let updated = w.apply().await;
    for vm in ["vm.box.vm", "cluster.pair[0].vm", "cluster.pair[1].vm"] {
        assert!(
            updated.contains(&format!("# {vm} will be updated in place")),
            "{updated}"
        );
    }
    assert_eq!(w.pinned(), pinned, "an update keeps every pinned key");
    assert_eq!(w.farm.started().len(), 3, "an update boots no VM anew");

    // A new image replaces the single VM: a new key, pinned and served; the others keep theirs.
    w.write_manifest("ubuntu-24.04", "speech");
    let replaced = w.apply().await;
    let after = w.check_pinned_keys().await;
    let (box_vm, (_, old_key)) = pinned
        .iter()
        .find(|(_, (address, _))| address == "vm.box.vm")
        .expect("vm.box.vm is pinned");
    assert_ne!(&after[box_vm].1, old_key, "a replaced VM gets a new key");
    for (vm, entry) in &pinned {
        if vm != box_vm {
            assert_eq!(&after[vm], entry, "{vm} was not replaced");
        }
    }
    assert_eq!(
        w.farm.started().iter().filter(|n| *n == box_vm).count(),
        2,
        "the replacement booted once more"
    );
    let old = HostKey::from_openssh(old_key).expect("an OpenSSH line");
    assert!(
        w.run_true(box_vm, &old)
            .await
            .expect_err("the old key is refused")
            .is_host_key_mismatch()
    );
    assert_eq!(
        w.handle.ssh_endpoints().len(),
        5,
        "the old VM's mappings are gone"
    );

    let output = format!("{first}\n{updated}\n{replaced}");
    w.assert_no_private_key(&vms, &output);
}

/// Rewrites the state's record of `address` as an intent (`creating`) pinning `key`: what a
/// run killed around the VM's PUT leaves behind.
fn make_intent(w: &World, address: &str, key: &str) {
    let path = farm_apply::state_path(w.dir.path(), "hostkeys");
    let mut state: Value = serde_json::from_str(&w.state_text()).expect("JSON state");
    let record = state["resources"]
        .as_array_mut()
        .expect("resources")
        .iter_mut()
        .find(|r| r["address"] == address)
        .expect("the record exists");
    record["status"] = "creating".into();
    record["host_key"] = key.into();
    std::fs::write(path, serde_json::to_vec_pretty(&state).expect("serialises")).expect("written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_crash_an_existing_vm_keeps_its_key_and_a_missing_one_gets_a_new_one() {
    let Some(w) = World::start().await else {
        return;
    };
    w.write_manifest("ubuntu-22.04", "vision");
    w.apply().await;
    let pinned = w.pinned();
    let find = |address: &str| {
        pinned
            .iter()
            .find(|(_, (a, _))| a == address)
            .map(|(vm, (_, key))| (vm.clone(), key.clone()))
            .expect("pinned")
    };

    // Killed after the PUT, before `created` was saved: the VM exists with the intent's key.
    // It is adopted with that key (a PUT carrying another customData would be refused) and not
    // booted again.
    let (box_vm, box_key) = find("vm.box.vm");
    make_intent(&w, "vm.box.vm", &box_key);
    let adopted = w.apply().await;
    assert!(adopted.contains("# vm.box.vm will be created"), "{adopted}");
    assert_eq!(w.pinned()[&box_vm].1, box_key, "the intent's key is kept");
    assert_eq!(
        w.farm.started().len(),
        3,
        "an adopted VM does not boot again"
    );
    w.check_pinned_keys().await;

    // Killed after the intent, before the PUT: no VM, and the intent's private half is gone.
    // A new pair is generated and pinned instead, and the new VM serves it.
    let (node_vm, _) = find("cluster.pair[1].vm");
    let vm_url = format!(
        "{}/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/dsinfra-hostkeys/\
         providers/Microsoft.Compute/virtualMachines/{node_vm}?api-version=2024-11-01",
        w.handle.endpoint()
    );
    let http = reqwest::Client::new();
    let deleted = http
        .delete(&vm_url)
        .bearer_auth("test")
        .send()
        .await
        .expect("the emulator answers");
    assert!(deleted.status().is_success(), "{deleted:?}");
    for _ in 0..200 {
        let got = http
            .get(&vm_url)
            .bearer_auth("test")
            .send()
            .await
            .expect("answers");
        if got.status() == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The deleted VM's endpoint (its private IP only: it is not the head) is gone.
    let old_port = format!("127.0.0.1:{}", w.farm.host(&node_vm).expect("a host").port);
    let endpoints = w.handle.ssh_endpoints();
    assert_eq!(endpoints.len(), 4, "{endpoints:?}");
    assert!(
        endpoints.iter().all(|e| e.endpoint != old_port),
        "{endpoints:?}"
    );
    let lost = HostKeyPair::generate().expect("generation works");
    let lost_key = lost.public().to_openssh();
    make_intent(&w, "cluster.pair[1].vm", &lost_key);
    w.apply().await;
    let now = w.check_pinned_keys().await;
    assert_ne!(
        now[&node_vm].1, lost_key,
        "a key without its private half is not pinned"
    );
    assert_eq!(w.farm.started().len(), 4, "the recreated VM booted");
    assert_eq!(w.handle.ssh_endpoints().len(), 5);

    // What ARM answers for the VM never shows customData or the emulator's digest of it.
    let body: Value = http
        .get(&vm_url)
        .bearer_auth("test")
        .send()
        .await
        .expect("answers")
        .json()
        .await
        .expect("JSON");
    let text = body.to_string();
    assert!(
        body["properties"]["osProfile"]["adminUsername"] == TEST_USER,
        "{text}"
    );
    assert!(
        !text.contains("customData") && !text.contains("Sha256"),
        "{text}"
    );
}

/// Needs no sshd: the hook only records what it is told, so this runs everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_hook_sees_each_created_vm_once_with_its_cloud_config_and_ips() {
    let seen: Arc<std::sync::Mutex<Vec<VmBoot>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let dir = tempfile::tempdir().expect("temp dir");
    let hook: VmBootHook = Arc::new(move |boot: &VmBoot| {
        let mut seen = sink.lock().expect("not poisoned");
        seen.push(boot.clone());
        Some(format!("127.0.0.1:{}", 40000 + seen.len()))
    });
    let handle = start_emulator(dir.path(), Some(hook), |_| {}).await;
    let client = HostKeyPair::generate().expect("generation works");
    let client_key = client.public().to_openssh();
    std::fs::write(
        dir.path().join("hostkeys.hcl"),
        manifest(&client_key, "ubuntu-22.04", "vision"),
    )
    .expect("manifest written");
    let out = output(farm_apply::dsinfra(
        dir.path(),
        &handle.endpoint(),
        &["apply", "hostkeys.hcl", "--auto-approve", "--steps", "skip"],
    ))
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let state = farm_apply::state(dir.path(), "hostkeys");
    let pinned: BTreeMap<String, String> = state["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter(|r| r["kind"] == "virtual_machine")
        .map(|r| {
            (
                r["name"].as_str().expect("name").to_owned(),
                r["host_key"].as_str().expect("a pinned key").to_owned(),
            )
        })
        .collect();

    let seen = seen.lock().expect("not poisoned").clone();
    let names: BTreeSet<&str> = seen.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(seen.len(), 3, "one boot per VM: {seen:?}");
    assert_eq!(names, pinned.keys().map(String::as_str).collect());
    for boot in &seen {
        assert_eq!(boot.admin_username, TEST_USER);
        assert_eq!(boot.ssh_public_keys, std::slice::from_ref(&client_key));
        assert!(!boot.vm_id.is_empty());
        let doc = boot.custom_data.as_deref().expect("customData was sent");
        let (_, public) = cloud_config_host_key(doc).expect("a host key in the cloud-config");
        assert_eq!(public.to_openssh(), pinned[&boot.name], "{}", boot.name);
        assert!(boot.private_ip.is_some(), "{boot:?}");
        // The cluster's second node has no public IP; the VM and the head have one.
        assert_eq!(
            boot.public_ip.is_some(),
            !boot.name.ends_with("-1"),
            "{boot:?}"
        );
    }
    // Each boot's endpoint is mapped from its private IP, and from its public IP if it has one.
    let endpoints = handle.ssh_endpoints();
    assert_eq!(endpoints.len(), 5, "{endpoints:?}");
    for (i, boot) in seen.iter().enumerate() {
        let endpoint = format!("127.0.0.1:{}", 40001 + i);
        let ips: BTreeSet<&str> = endpoints
            .iter()
            .filter(|e| e.endpoint == endpoint)
            .map(|e| e.ip_address.as_str())
            .collect();
        let expected: BTreeSet<&str> = boot
            .private_ip
            .iter()
            .chain(boot.public_ip.iter())
            .map(String::as_str)
            .collect();
        assert_eq!(ips, expected, "{}", boot.name);
    }
}

/// Issue 13 item 11: `ssh_genkeytypes: []` made cloud-init reject the user data ("is too
/// short"). Every customData document an apply sends passes cloud-init's own validator, and the
/// farm's boot hook still reads the pinned key from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_custom_data_document_an_apply_sends_passes_cloud_init_schema() {
    if !cloud_init::available() {
        return;
    }
    let boots: Arc<std::sync::Mutex<Vec<VmBoot>>> = Arc::default();
    let sink = Arc::clone(&boots);
    let dir = tempfile::tempdir().expect("temp dir");
    let hook: VmBootHook = Arc::new(move |boot: &VmBoot| {
        let mut boots = sink.lock().expect("not poisoned");
        boots.push(boot.clone());
        Some(format!("127.0.0.1:{}", 41000 + boots.len()))
    });
    let handle = start_emulator(dir.path(), Some(hook), |_| {}).await;
    let client = HostKeyPair::generate().expect("generation works");
    std::fs::write(
        dir.path().join("hostkeys.hcl"),
        manifest(&client.public().to_openssh(), "ubuntu-22.04", "vision"),
    )
    .expect("manifest written");
    let out = output(farm_apply::dsinfra(
        dir.path(),
        &handle.endpoint(),
        &["apply", "hostkeys.hcl", "--auto-approve", "--steps", "skip"],
    ))
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let boots = boots.lock().expect("not poisoned").clone();
    assert_eq!(boots.len(), 3, "one boot per VM");
    for boot in &boots {
        let vm = &boot.name;
        let doc = boot.custom_data.as_deref().expect("customData was sent");
        if let Err(report) = cloud_init::schema_check(doc) {
            panic!("cloud-init rejects the customData of {vm}:\n{report}");
        }
        assert!(cloud_config_host_key(doc).is_some(), "{vm}: no host key");
    }
}
