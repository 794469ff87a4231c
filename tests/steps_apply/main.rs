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
//! why the steps were not run and succeeds, and `--steps run` makes that an error. Benchmarks
//! (`bench`): an elbencho sweep and fio's comparison, fetched as results and reported.

#[allow(dead_code)] // Each test binary uses only some of the shared helpers.
#[path = "../common/mod.rs"]
mod common;

mod aml;
mod aml_beeond;
mod aml_stage;
mod beeond;
mod bench;
mod disks;
mod failures;
mod idle;
mod lifecycle;
mod run;
mod secrets;
mod spot;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsinfra::emulator::{BlobDataPlane, EmulatorHandle, FaultAction, FaultRule, RequestInfo};
use serde_json::Value;

use common::aml_nodes::AmlNodeFarm;
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
    /// The sshd hosts standing in for AmlCompute nodes, if any.
    aml: Option<Arc<AmlNodeFarm>>,
    /// Every ARM request the emulator received: (seconds since the epoch, method, path).
    requests: Arc<Mutex<Vec<(f64, String, String)>>>,
    /// A probe a test sets to look at the machine the moment a request arrives (what is
    /// mounted when a VM's update reaches Azure).
    on_request: RequestProbe,
}

/// See [`World::on_request`].
type RequestProbe = Arc<Mutex<Option<Arc<dyn Fn(&RequestInfo) + Send + Sync>>>>;

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

    /// [`World::with_farm`] whose hosts each listen on an address of their own
    /// ([`NodeFarm::start_addressed`]): a hostfile names every node distinctly.
    async fn with_addressed_farm() -> Option<(Arc<NodeFarm>, Self)> {
        let farm = NodeFarm::start_addressed()?;
        let world = Self::new(Some(Arc::clone(&farm))).await;
        Some((farm, world))
    }

    /// A world whose VMs boot into `farm` and whose storage accounts named in `plane` have
    /// their blob data plane in an Azurite.
    async fn with_farm_and_blobs(farm: Arc<NodeFarm>, plane: BlobDataPlane) -> Self {
        Self::build(Some(farm), None, Some(plane)).await
    }

    /// A world whose AmlCompute nodes boot into `aml` (no VM farm).
    async fn with_aml_farm(aml: Arc<AmlNodeFarm>) -> Self {
        Self::build(None, Some(aml), None).await
    }

    /// A world whose AmlCompute nodes boot into `aml` and whose storage accounts named in
    /// `plane` have their blob data plane in an Azurite.
    async fn with_aml_farm_and_blobs(aml: Arc<AmlNodeFarm>, plane: BlobDataPlane) -> Self {
        Self::build(None, Some(aml), Some(plane)).await
    }

    async fn new(farm: Option<Arc<NodeFarm>>) -> Self {
        Self::build(farm, None, None).await
    }

    async fn build(
        farm: Option<Arc<NodeFarm>>,
        aml: Option<Arc<AmlNodeFarm>>,
        plane: Option<BlobDataPlane>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("out")).expect("out dir");
        std::fs::create_dir_all(dir.path().join("markers")).expect("markers dir");
        // The request validator hook doubles as the emulator's operation record: it judges
        // nothing and notes when each request arrived.
        let requests: Arc<Mutex<Vec<(f64, String, String)>>> = Arc::default();
        let seen = Arc::clone(&requests);
        let on_request: RequestProbe = Arc::default();
        let probe = Arc::clone(&on_request);
        let aml_hook = aml.as_ref().map(AmlNodeFarm::hook);
        let evict_hook = farm.as_ref().map(NodeFarm::evict_hook);
        let handle = start_emulator(dir.path(), farm.as_ref().map(NodeFarm::hook), |config| {
            config.on_aml_node = aml_hook;
            // An evicted spot VM's host powers off; the notice is short so tests stay quick.
            config.on_vm_evict = evict_hook;
            config.eviction_notice_secs = 2;
            config.blob_data_plane = plane;
            config.request_validator = Some(Arc::new(move |request: &RequestInfo| {
                seen.lock().expect("not poisoned").push((
                    epoch_seconds(),
                    request.method.clone(),
                    request.path.clone(),
                ));
                let probe = probe.lock().expect("not poisoned").clone();
                if let Some(probe) = probe {
                    probe(request);
                }
                Vec::new()
            }));
        })
        .await;
        Self {
            handle,
            dir,
            farm,
            aml,
            requests,
            on_request,
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
            .env("DSINFRA_RUNS_DIR", self.path("runs"))
            .env_remove("SSH_AUTH_SOCK")
            .env_remove("DSINFRA_SSH_IDENTITY")
            .env("HOME", self.path("home"));
        // Only the commands that run or stop steps log in to the VMs.
        let logs_in = matches!(
            args.first().copied(),
            Some("apply" | "park" | "unpark" | "destroy")
        );
        let identity = self
            .farm
            .as_ref()
            .map(|f| f.client_key())
            .or_else(|| self.aml.as_ref().map(|f| f.client_key()));
        if let Some(key) = identity.filter(|_| logs_in) {
            cmd.arg("-i").arg(key);
        }
        // `run` ends with its command: the key goes in the environment instead of `-i`.
        if let Some(key) =
            identity.filter(|_| matches!(args.first().copied(), Some("run" | "runs" | "logs")))
        {
            cmd.env("DSINFRA_SSH_IDENTITY", key);
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
