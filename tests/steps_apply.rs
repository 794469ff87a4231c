//! Post-boot steps in `apply`, `park` and `unpark`, end to end: the real binary against an
//! in-process emulator whose boot hook starts a real sshd per VM (tests/common/nodes.rs), with
//! the host key the VM's customData carries, so dsinfra reaches every VM as it would in Azure:
//! pinned host keys, the cluster's private nodes through its head.
//!
//! The manifest's `script` steps write files (all hosts share this machine's filesystem) that
//! prove where, how often and in which order they ran. Held: steps run on every node; a head-only
//! step after an all-nodes step waits for every node (barrier); the state records what succeeded;
//! a second apply runs nothing; a changed parameter re-runs only that step; `--rerun-step`;
//! `--steps skip`; `unpark` re-runs per-boot steps; logs are written; the storage account key the
//! engine reads for a step appears in no state, output or log. Without SSH endpoints, apply says
//! why the steps were not run and succeeds, and `--steps run` makes that an error.

#[allow(dead_code)] // Each test binary uses only some of the shared helpers.
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsinfra::emulator::{EmulatorHandle, FaultAction, FaultRule, RequestInfo};
use serde_json::Value;

use common::farm_apply::{self, describe, output, start_emulator};
use common::nodes::NodeFarm;

/// Where every manifest here puts its experiment: a region and a network.
const PLACE: &str = r#"azure { location = "eastus" }
network "main" {}
"#;

/// A storage account with a container and a read SAS on it, for the steps that use them.
const STORAGE_AND_SAS: &str = r#"storage_account "data" {
  container "raw" {}
}
sas "read" {
  container  = storage_account.data.container.raw
  expires_in = "24h"
}
"#;

/// The public half of the demo key, for manifests whose VMs nobody logs in to.
fn demo_key() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/keys/demo.pub"))
        .expect("the demo key exists")
        .trim()
        .to_owned()
}

/// An emulator, a working directory with the manifest, and where the steps write.
struct World {
    handle: EmulatorHandle,
    dir: tempfile::TempDir,
    farm: Option<Arc<NodeFarm>>,
    /// Every ARM request the emulator received: (seconds since the epoch, method, path).
    requests: Arc<Mutex<Vec<(f64, String, String)>>>,
}

/// Seconds since the Unix epoch, as `date +%s.%N` prints them.
fn epoch_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs_f64()
}

impl World {
    /// A world whose VMs boot into a new farm, and the farm; `None` when sshd cannot run here
    /// (said why).
    async fn with_farm() -> Option<(Arc<NodeFarm>, Self)> {
        let farm = NodeFarm::start()?;
        let world = Self::new(Some(Arc::clone(&farm))).await;
        Some((farm, world))
    }

    async fn new(farm: Option<Arc<NodeFarm>>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("out")).expect("out dir");
        std::fs::create_dir_all(dir.path().join("markers")).expect("markers dir");
        // The request validator hook doubles as the emulator's operation record: it judges
        // nothing and notes when each request arrived.
        let requests: Arc<Mutex<Vec<(f64, String, String)>>> = Arc::default();
        let seen = Arc::clone(&requests);
        let handle = start_emulator(dir.path(), farm.as_ref().map(NodeFarm::hook), |config| {
            config.request_validator = Some(Arc::new(move |request: &RequestInfo| {
                seen.lock().expect("not poisoned").push((
                    epoch_seconds(),
                    request.method.clone(),
                    request.path.clone(),
                ));
                Vec::new()
            }));
        })
        .await;
        Self {
            handle,
            dir,
            farm,
            requests,
        }
    }

    /// When the emulator first received `method` on a path ending in `suffix`.
    fn first_request(&self, method: &str, suffix: &str) -> Option<f64> {
        self.requests
            .lock()
            .expect("not poisoned")
            .iter()
            .find(|(_, m, path)| m == method && path.ends_with(suffix))
            .map(|(at, _, _)| *at)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn out(&self) -> PathBuf {
        self.path("out")
    }

    /// Writes the manifest; `gather_note` lands in the head-only step's script (a parameter
    /// change when it changes).
    fn write_manifest(&self, gather_note: &str) {
        let (user, key) = self.farm.as_ref().map_or_else(
            || ("azureuser".to_owned(), demo_key()),
            |f| (f.user().to_owned(), f.client_public_key()),
        );
        let out = self.out().display().to_string();
        let text = format!(
            r#"{STORAGE_AND_SAS}vm "solo" {{
  size           = "Standard_D2s_v3"
  image          = "ubuntu-22.04"
  admin_username = "{user}"
  ssh_key        = "{key}"
  step "script" {{
    name   = "hello"
    script = <<EOT
echo "hello from $DSINFRA_NODE" >> {out}/solo
EOT
  }}
}}
cluster "train" {{
  size           = "Standard_D2s_v3"
  count          = 3
  image          = "ubuntu-22.04"
  admin_username = "{user}"
  ssh_key        = "{key}"
  step "script" {{
    name   = "prep"
    script = <<EOT
if [ "$DSINFRA_RANK" != 0 ]; then sleep 1; fi
echo "$DSINFRA_NODE" >> {out}/prep-$DSINFRA_RANK
EOT
  }}
  step "script" {{
    name   = "gather"
    scope  = "head"
    script = <<EOT
ls {out} | grep -c '^prep-' > {out}/gather # {gather_note}
EOT
  }}
  step "script" {{
    name   = "mount"
    run    = "per_boot"
    script = <<EOT
echo "boot" >> {out}/mount-$DSINFRA_RANK
EOT
  }}
}}
"#
        );
        self.write_hcl("stepsdemo", &text);
    }

    /// Writes the manifest `stepsdemo.hcl`: the experiment named `experiment`, [`PLACE`], then
    /// `body`.
    fn write_hcl(&self, experiment: &str, body: &str) {
        let text = format!("experiment = \"{experiment}\"\n{PLACE}{body}");
        std::fs::write(self.path("stepsdemo.hcl"), text).expect("manifest written");
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = farm_apply::dsinfra(self.dir.path(), &self.handle.endpoint(), args);
        cmd.env("DSINFRA_MARKER_DIR", self.path("markers"))
            .env_remove("SSH_AUTH_SOCK")
            .env_remove("DSINFRA_SSH_IDENTITY")
            .env("HOME", self.path("home"));
        // Only the commands that run or stop steps log in to the VMs.
        let logs_in = matches!(
            args.first().copied(),
            Some("apply" | "park" | "unpark" | "destroy")
        );
        if let Some(farm) = self.farm.as_ref().filter(|_| logs_in) {
            cmd.arg("-i").arg(farm.client_key());
        }
        cmd
    }

    /// Runs dsinfra to the end (on a blocking thread: the emulator shares this runtime).
    async fn run(&self, args: &[&str]) -> (Output, String) {
        self.run_env(args, &[]).await
    }

    /// Runs dsinfra with extra environment variables to the end.
    async fn run_env(&self, args: &[&str], env: &[(&str, &Path)]) -> (Output, String) {
        let mut cmd = self.command(args);
        for (name, value) in env {
            cmd.env(name, value);
        }
        let out = output(cmd).await;
        let text = describe(&out);
        (out, text)
    }

    /// Runs dsinfra with extra environment variables; fails the test if it fails.
    async fn ok_env(&self, args: &[&str], env: &[(&str, &Path)]) -> String {
        let (out, text) = self.run_env(args, env).await;
        assert!(out.status.success(), "dsinfra {args:?} failed:\n{text}");
        text
    }

    async fn ok(&self, args: &[&str]) -> String {
        self.ok_env(args, &[]).await
    }

    fn state(&self) -> Value {
        farm_apply::state(self.dir.path(), "stepsdemo")
    }

    fn state_text(&self) -> String {
        farm_apply::state_text(self.dir.path(), "stepsdemo")
    }

    fn resource(&self, address: &str) -> Value {
        self.state()["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["address"] == address)
            .cloned()
            .unwrap_or_else(|| panic!("{address} is in the state"))
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out().join(name)).unwrap_or_default()
    }

    /// The SAS and account key `engine::post_boot` resolves for steps, with checks that their
    /// identities and the context's Debug output do not reveal them.
    async fn credentials(&self) -> (String, String) {
        use dsinfra::engine::post_boot::{Azure, context::References, credentials};
        use dsinfra::steps::library::{CredentialKind, NodeContext};
        let loaded = dsinfra::manifest::load(
            &self.path("stepsdemo.hcl"),
            &dsinfra::manifest::LoadOptions::default(),
        )
        .expect("the manifest loads");
        let state: dsinfra::state::State = serde_json::from_value(self.state()).expect("a state");
        let client = dsinfra::azure::ArmClient::builder(Arc::new(
            dsinfra::azure::StaticTokenCredential::new("dsinfra-emulator"),
        ))
        .endpoint(self.handle.endpoint())
        .build()
        .expect("a client");
        let refs = References {
            storage: ["storage_account.data.container.raw".parse().expect("ok")].into(),
            sas: ["sas.read".parse().expect("ok")].into(),
            account_keys: ["storage_account.data.account".parse().expect("ok")].into(),
        };
        let resolve = || async {
            let mut ctx = NodeContext::new("stepsdemo", "vm.solo", Vec::new());
            credentials::add_credentials(
                Azure {
                    client: &client,
                    subscription: "00000000-0000-0000-0000-000000000000",
                    desired: &loaded.desired,
                },
                &state,
                &refs,
                &mut ctx,
            )
            .await
            .expect("the credentials resolve");
            ctx
        };
        let ctx = resolve().await;
        let sas = &ctx.credentials["sas.read"];
        let key = &ctx.credentials["storage_account.data"];
        assert_eq!(sas.kind, CredentialKind::Sas);
        assert_eq!(key.kind, CredentialKind::AccountKey);
        let fingerprint = state
            .resource(&"sas.read".parse().expect("ok"))
            .and_then(|r| r.secrets.get("token"))
            .map(|t| t.fingerprint.clone())
            .expect("apply recorded the SAS identity");
        assert_eq!(sas.identity, format!("sas.read {fingerprint}"));
        assert!(sas.value.expose().contains("sig="));
        // Re-derived, not re-signed: the same token every time.
        let again = resolve().await;
        assert_eq!(
            again.credentials["sas.read"].value.expose(),
            sas.value.expose()
        );
        let debug = format!("{ctx:?}");
        assert!(!debug.contains(sas.value.expose()) && !debug.contains(key.value.expose()));
        (sas.value.expose().to_owned(), key.value.expose().to_owned())
    }

    /// The storage account's keys, as the emulator's listKeys returns them.
    async fn account_keys(&self) -> Vec<String> {
        let account = self.resource("storage_account.data.account");
        let id = account["id"].as_str().expect("the account has an id");
        let url = format!(
            "{}{id}/listKeys?api-version=2023-05-01",
            self.handle.endpoint()
        );
        let body: Value = reqwest::Client::new()
            .post(url)
            .bearer_auth("dsinfra-emulator")
            .send()
            .await
            .expect("listKeys answers")
            .json()
            .await
            .expect("listKeys is JSON");
        body["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| k["value"].as_str().expect("a key value").to_owned())
            .collect()
    }
}

/// Lines of `text` that report a step starting.
fn started(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('[') && l.contains("] started ("))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// Every file below `dir`, with its text.
fn files_below(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_below(&path));
        } else {
            let text =
                String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
            found.push((path, text));
        }
    }
    found
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ssh_endpoints_apply_says_why_and_succeeds_unless_steps_must_run() {
    let w = World::new(None).await;
    w.write_manifest("first");
    let text = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    assert!(
        text.contains(
            "note: the steps of cluster.train were not run: a node cannot be reached over SSH"
        ),
        "{text}"
    );
    assert!(
        text.contains("cluster.train[0] has no SSH endpoint in the emulator for its public IP"),
        "{text}"
    );
    assert!(text.contains("/_emulator/ssh-endpoints"), "{text}");
    assert_eq!(started(&text), Vec::<String>::new());
    let resources = w.state()["resources"].as_array().expect("resources").len();
    assert!(resources > 0);

    let (out, text) = w
        .run(&["apply", "stepsdemo.hcl", "--auto-approve", "--steps", "run"])
        .await;
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("error: the steps of cluster.train were not run"),
        "{text}"
    );
    // The steps record nothing when they did not run.
    assert!(w.resource("vm.solo.vm").get("steps").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_whose_vm_failed_does_not_run_its_steps_and_says_why() {
    let w = World::new(None).await;
    w.write_manifest("first");
    w.handle.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: Some("*/virtualMachines/stepsdemo-train-1".into()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::FailOperation {
            status: 200,
            code: "AllocationFailed".into(),
            message: "no capacity".into(),
        },
    });
    let (out, text) = w.run(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("the steps of cluster.train were not run: cluster.train[1].vm failed"),
        "{text}"
    );
    // The other block did not wait for the failed one: it was tried (and has no endpoint).
    assert!(
        text.contains("note: the steps of vm.solo were not run: a node cannot be reached"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn park_and_destroy_try_to_stop_beeond_first_and_go_on_when_they_cannot() {
    let w = World::new(None).await;
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"cluster "scratch" {{
  size    = "Standard_D2s_v3"
  count   = 2
  image   = "ubuntu-22.04"
  ssh_key = "{}"
  step "beeond" {{}}
}}
"#,
            demo_key()
        ),
    );
    w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    let why = "cluster.scratch: BeeOND was not stopped (the head cluster.scratch[0] has no SSH \
               endpoint in the emulator for its public IP";
    let parked = w.ok(&["park", "stepsdemo.hcl", "--auto-approve"]).await;
    assert!(parked.contains(why), "{parked}");
    assert!(parked.contains("deallocated (parked) after"), "{parked}");
    let destroyed = w.ok(&["destroy", "stepsdemo.hcl", "--auto-approve"]).await;
    // Parked VMs cannot be reached either; the destroy goes on.
    assert!(
        destroyed.contains(
            "cluster.scratch: BeeOND was not stopped (the head cluster.scratch[0] is parked"
        ),
        "{destroyed}"
    );
    assert!(destroyed.contains("Destroy complete"), "{destroyed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_node_fails_the_apply_and_the_summary_says_where() {
    let Some((farm, w)) = World::with_farm().await else {
        return;
    };
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"cluster "train" {{
  size           = "Standard_D2s_v3"
  count          = 2
  image          = "ubuntu-22.04"
  admin_username = "{}"
  ssh_key        = "{}"
  step "script" {{
    name   = "boom"
    script = <<EOT
if [ "$DSINFRA_RANK" = 1 ]; then echo "no disk here" >&2; exit 3; fi
EOT
  }}
  step "script" {{
    name   = "after"
    scope  = "head"
    script = "true"
  }}
}}
"#,
            farm.user(),
            farm.client_public_key()
        ),
    );
    let (out, text) = w.run(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("[cluster.train[1]] [boom] no disk here"),
        "{text}"
    );
    assert!(text.contains("steps of cluster.train: FAILED"), "{text}");
    assert!(
        text.contains("cluster.train[1]  failed at step \"boom\": "),
        "{text}"
    );
    assert!(
        text.contains(
            "cluster.train[0]  blocked before step \"after\": waiting for cluster.train[1]"
        ),
        "{text}"
    );
    // What succeeded is recorded; what failed is not.
    assert!(w.resource("cluster.train[0].vm")["steps"]["boom"].is_object());
    assert!(w.resource("cluster.train[1].vm").get("steps").is_none());
}

/// Polls `ps -eo args` on this machine (where every farm host runs) until `stop` is set;
/// returns every snapshot.
fn watch_processes(
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut snapshots = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let ps = Command::new("ps")
                .args(["-eo", "args"])
                .output()
                .expect("ps runs");
            snapshots.push(String::from_utf8_lossy(&ps.stdout).into_owned());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        snapshots
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A cluster whose `script` step reads a SAS and an account key from its secret files, and
/// whose result files come back to the workstation. Its experiment is not named like its file
/// (`stepsdemo.hcl`): files come back under the manifest's directory, `.dsinfra/stepsdemo/`.
fn write_probe_manifest(w: &World, farm: &NodeFarm) {
    let out = w.out().display().to_string();
    let text = format!(
        r#"{STORAGE_AND_SAS}output "sas" {{
  value     = sas.read
  sensitive = true
}}
cluster "train" {{
  size           = "Standard_D2s_v3"
  count          = 2
  image          = "ubuntu-22.04"
  admin_username = "{user}"
  ssh_key        = "{key}"
  step "script" {{
    name        = "probe"
    sas         = sas.read
    storage_key = storage_account.data
    fetch       = ["{out}/data.bin", "{out}/missing.bin"]
    script      = <<EOT
f="$DSINFRA_SECRETS/sas"
{{
  sha256sum < "$f" | cut -d' ' -f1
  stat -c %a "$f"
  echo "$f"
  sha256sum < "$DSINFRA_SECRETS/storage_key" | cut -d' ' -f1
}} > {out}/probe-$DSINFRA_RANK
if [ "$DSINFRA_RANK" = 0 ]; then head -c 70001 /dev/urandom > {out}/data.bin; fi
sleep 1.75
EOT
  }}
}}
"#,
        user = farm.user(),
        key = farm.client_public_key()
    );
    w.write_hcl("probe", &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_step_reads_its_sas_from_a_private_file_and_its_results_come_back() {
    let Some((farm, w)) = World::with_farm().await else {
        return;
    };
    write_probe_manifest(&w, &farm);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_processes(Arc::clone(&stop));
    let applied = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let snapshots = watcher.join().expect("the ps watcher ends");
    assert!(
        snapshots.iter().any(|s| s.contains("sleep 1.75")),
        "ps saw the step running (else the argv check below proves nothing)"
    );
    assert!(
        applied.contains("steps of cluster.train: done"),
        "{applied}"
    );

    // The SAS the step received is the one `output --show-secrets` re-derives: the token apply
    // signed, without its leading `?`, in a 0600 file that is gone after the step. The account
    // key arrived the same way.
    let (shown, text) = w
        .run(&["output", "stepsdemo.hcl", "sas", "--show-secrets"])
        .await;
    assert!(shown.status.success(), "{text}");
    let token = String::from_utf8(shown.stdout)
        .expect("the token is text")
        .trim()
        .trim_start_matches('?')
        .to_owned();
    assert!(token.contains("sig="), "{token}");
    // The search below looks for the token as `output` prints it: here it must hit.
    assert!(text.contains(&token));
    let keys = w.account_keys().await;
    for rank in 0..2 {
        let probe = w.read(&format!("probe-{rank}"));
        let lines: Vec<&str> = probe.lines().collect();
        assert_eq!(lines.len(), 4, "rank {rank} wrote {probe:?}");
        assert_eq!(
            lines[0],
            sha256_hex(token.as_bytes()),
            "rank {rank}: the SAS"
        );
        assert_eq!(lines[1], "600", "rank {rank}: the SAS file's mode");
        assert!(lines[2].ends_with("/sas"), "{}", lines[2]);
        let file = Path::new(lines[2]);
        assert!(
            !file.exists(),
            "{} is removed after the step",
            file.display()
        );
        assert!(
            !file.parent().expect("a directory").exists(),
            "the secret directory is removed after the step"
        );
        assert_eq!(
            lines[3],
            sha256_hex(keys[0].as_bytes()),
            "rank {rank}: the key"
        );
    }

    results_came_back(&w, &applied);
    no_secret_in_any_output(&w, &token, keys, applied, snapshots).await;
    fetched_again_only_when_missing(&w).await;
}

/// An apply whose step is up to date reads back only the files that are gone locally: one the
/// user edited is kept, one deleted comes back.
async fn fetched_again_only_when_missing(w: &World) {
    let edited = ".dsinfra/stepsdemo/fetched/probe/probe-train-0/data.bin";
    let deleted = ".dsinfra/stepsdemo/fetched/probe/probe-train-1/data.bin";
    std::fs::write(w.path(edited), "annotated by hand").expect("writable");
    std::fs::remove_file(w.path(deleted)).expect("removable");
    let again = w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    assert!(again.contains("nothing to apply"), "{again}");
    assert!(!again.contains(&format!("fetched {edited}")), "{again}");
    assert!(again.contains(&format!("  fetched {deleted}\n")), "{again}");
    assert_eq!(
        std::fs::read_to_string(w.path(edited)).expect("kept"),
        "annotated by hand"
    );
    assert_eq!(
        std::fs::read(w.path(deleted)).expect("fetched again"),
        std::fs::read(w.out().join("data.bin")).expect("the head wrote data.bin")
    );
}

/// The file the head wrote came back byte-identical, from every node; a missing one is a warning.
fn results_came_back(w: &World, applied: &str) {
    // The file the head wrote comes back byte-identical (binary, no trailing newline), from the
    // head and from node 1 through the head (the nodes share this machine's filesystem).
    let data = std::fs::read(w.out().join("data.bin")).expect("the head wrote data.bin");
    assert_eq!(data.len(), 70001);
    for vm in ["probe-train-0", "probe-train-1"] {
        let local = format!(".dsinfra/stepsdemo/fetched/probe/{vm}/data.bin");
        assert!(
            applied.contains(&format!("  fetched {local}\n")),
            "{applied}"
        );
        assert_eq!(
            std::fs::read(w.path(&local)).expect("fetched"),
            data,
            "{local} is byte-identical"
        );
    }
    // A file the step did not write is a warning naming it; the apply still succeeded.
    let missing = w.out().join("missing.bin");
    for node in ["cluster.train[0]", "cluster.train[1]"] {
        let warning = format!(
            "  warning: {} was not fetched from {node}: there is no such file on the node\n",
            missing.display()
        );
        assert!(applied.contains(&warning), "{applied}");
    }
    assert!(
        !w.path(".dsinfra/stepsdemo/fetched/probe/probe-train-0/missing.bin")
            .exists()
    );
}

/// The token and the account keys appear in no state, plan JSON, output, log or remote argv.
async fn no_secret_in_any_output(
    w: &World,
    token: &str,
    keys: Vec<String>,
    applied: String,
    snapshots: Vec<String>,
) {
    // The token and the keys are nowhere: state, plan JSON, output, logs, remote argv.
    let plan = w.ok(&["plan", "stepsdemo.hcl", "--json"]).await;
    assert!(
        plan.contains("\"probe\""),
        "the plan JSON lists the step:\n{plan}"
    );
    let signature = token
        .split('&')
        .find_map(|p| p.strip_prefix("sig="))
        .expect("a SAS has a signature")
        .to_owned();
    let mut secrets = keys;
    secrets.push(token.to_owned());
    secrets.push(signature);
    let mut haystacks: Vec<(String, String)> = vec![
        ("state".into(), w.state_text()),
        ("plan --json".into(), plan),
        ("apply".into(), applied),
    ];
    haystacks.extend(
        files_below(&w.path(".dsinfra/stepsdemo/logs"))
            .into_iter()
            .map(|(p, t)| (p.display().to_string(), t)),
    );
    haystacks.extend(
        snapshots
            .into_iter()
            .enumerate()
            .map(|(i, s)| (format!("ps snapshot {i}"), s)),
    );
    assert!(
        haystacks
            .iter()
            .any(|(name, _)| name.ends_with("probe.log")),
        "the step's log is searched"
    );
    for secret in &secrets {
        for (name, text) in &haystacks {
            assert!(!text.contains(secret.as_str()), "a secret is in {name}");
        }
    }
}

/// This machine's BeeOND status file, which the stop step's "already done?" check reads: with
/// neither it nor a BeeGFS mount there is nothing to stop. Every farm host shares this
/// filesystem, so creating it makes the head look like a running BeeOND instance. Created only
/// if absent, removed when dropped.
struct PretendBeeondRuns {
    created: bool,
}

const BEEOND_STATUS_FILE: &str = "/var/tmp/beeond.tmp";

impl PretendBeeondRuns {
    fn start() -> Self {
        let created = !Path::new(BEEOND_STATUS_FILE).exists();
        if created {
            std::fs::write(BEEOND_STATUS_FILE, "dsinfra test stand-in\n")
                .expect("the BeeOND status file can be written");
        }
        Self { created }
    }
}

impl Drop for PretendBeeondRuns {
    fn drop(&mut self) {
        if self.created {
            let _ = std::fs::remove_file(BEEOND_STATUS_FILE);
        }
    }
}

/// A Ctrl-C while the head stops BeeOND (a stand-in that takes 5 s) ends `destroy` there, with
/// 130 and nothing deleted.
async fn ctrl_c_while_beeond_stops_ends_the_destroy_there(w: &World) {
    let slow = w.path("beeond-slow");
    let slow_calls = w.path("beeond-slow-calls");
    write_stand_in(&slow, &slow_calls, "sleep 5");
    let child = w
        .command(&["destroy", "stepsdemo.hcl", "--auto-approve"])
        .env("DSINFRA_BEEOND", &slow)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dsinfra starts");
    let calls = slow_calls.clone();
    let out = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while beeond_calls(&calls).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        child.wait_with_output().expect("waits")
    })
    .await
    .expect("joined");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(beeond_calls(&slow_calls).len(), 1, "{text}");
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert!(text.contains("interrupted: nothing was changed"), "{text}");
    assert!(
        w.first_request("DELETE", "/virtualMachines/stepsdemo-scratch-0")
            .is_none(),
        "{text}"
    );
}

/// The `beeond` stand-in's records: (when, argv) per call.
fn beeond_calls(path: &Path) -> Vec<(f64, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let (at, argv) = line.split_once(' ').expect("`TIME ARGV`");
            (
                at.parse().expect("a time from date +%s.%N"),
                argv.to_owned(),
            )
        })
        .collect()
}

/// Writes an executable `beeond` stand-in at `path` that appends `TIME ARGV` to `calls`, then runs
/// `then` (shell).
fn write_stand_in(path: &Path, calls: &Path, then: &str) {
    std::fs::write(
        path,
        format!(
            "#!/bin/sh\nprintf '%s %s\\n' \"$(date +%s.%N)\" \"$*\" >> '{}'\n{then}\n",
            calls.display()
        ),
    )
    .expect("stand-in written");
    std::fs::set_permissions(
        path,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .expect("stand-in executable");
}

/// A cluster with a `beeond` step whose nodefile exists, and a harmless `beeond` stand-in that
/// records when and how it was called (for `DSINFRA_BEEOND`). Returns the nodefile, the stand-in's
/// record file and the stand-in.
fn beeond_setup(w: &World, farm: &NodeFarm) -> (PathBuf, PathBuf, PathBuf) {
    let nodefile = w.path("nodefile");
    std::fs::write(&nodefile, "10.0.0.4\n10.0.0.5\n").expect("nodefile written");
    // A harmless `beeond` that records when and how it was called (`DSINFRA_BEEOND`).
    let calls = w.path("beeond-calls");
    let stand_in = w.path("beeond-stand-in");
    write_stand_in(&stand_in, &calls, "");
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"cluster "scratch" {{
  size           = "Standard_D2s_v3"
  count          = 2
  image          = "ubuntu-22.04"
  admin_username = "{}"
  ssh_key        = "{}"
  step "beeond" {{
    nodefile = "{}"
  }}
}}
"#,
            farm.user(),
            farm.client_public_key(),
            nodefile.display()
        ),
    );
    (nodefile, calls, stand_in)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn park_and_destroy_stop_beeond_on_a_reachable_head_before_the_vms_go() {
    let Some((farm, w)) = World::with_farm().await else {
        return;
    };
    let (nodefile, calls, stand_in) = beeond_setup(&w, &farm);
    // The BeeOND step itself would install packages on this machine: not run.
    w.ok(&[
        "apply",
        "stepsdemo.hcl",
        "--auto-approve",
        "--steps",
        "skip",
    ])
    .await;
    let _running = PretendBeeondRuns::start();
    let env = [("DSINFRA_BEEOND", stand_in.as_path())];
    let expected_argv = format!("stop -n {} -L -d -P", nodefile.display());

    let parked = w
        .ok_env(&["park", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert!(
        parked.contains("cluster.scratch: BeeOND stopped (step `beeond`)"),
        "{parked}"
    );
    let recorded = beeond_calls(&calls);
    assert_eq!(recorded.len(), 1, "{recorded:?}\n{parked}");
    assert_eq!(recorded[0].1, expected_argv);
    for vm in ["stepsdemo-scratch-0", "stepsdemo-scratch-1"] {
        let deallocated = w
            .first_request("POST", &format!("/virtualMachines/{vm}/deallocate"))
            .unwrap_or_else(|| panic!("{vm} was deallocated:\n{parked}"));
        assert!(
            recorded[0].0 < deallocated,
            "BeeOND stopped at {} before {vm} was deallocated at {deallocated}",
            recorded[0].0
        );
    }

    w.ok(&[
        "unpark",
        "stepsdemo.hcl",
        "--auto-approve",
        "--steps",
        "skip",
    ])
    .await;
    ctrl_c_while_beeond_stops_ends_the_destroy_there(&w).await;
    let destroyed = w
        .ok_env(&["destroy", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert!(
        destroyed.contains("cluster.scratch: BeeOND stopped (step `beeond`)"),
        "{destroyed}"
    );
    assert!(destroyed.contains("Destroy complete"), "{destroyed}");
    let recorded = beeond_calls(&calls);
    assert_eq!(recorded.len(), 2, "{recorded:?}\n{destroyed}");
    assert_eq!(recorded[1].1, expected_argv);
    for vm in ["stepsdemo-scratch-0", "stepsdemo-scratch-1"] {
        let deleted = w
            .first_request("DELETE", &format!("/virtualMachines/{vm}"))
            .unwrap_or_else(|| panic!("{vm} was deleted:\n{destroyed}"));
        assert!(
            recorded[1].0 < deleted,
            "BeeOND stopped at {} before {vm} was deleted at {deleted}",
            recorded[1].0
        );
    }
}
