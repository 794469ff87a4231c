//! `dsinfra ssh` and `dsinfra ssh-config` end to end: the real binary and the real OpenSSH
//! client against real sshd hosts. The binary applies a manifest (one VM, a three-node cluster
//! whose nodes 1 and 2 have no public IP) against an in-process emulator whose boot hook starts
//! an sshd per VM with the host key dsinfra pinned (tests/common/nodes.rs).
//!
//! What is held: the printed ssh_config drives `ssh` to a direct node and, through the head,
//! to a private node (also `Include`d from another config); `dsinfra ssh FILE NODE -- COMMAND`
//! runs the command, even while another run holds the state's lock; a key other than the
//! pinned one is refused, for the node and for the head it jumps through; a VM without a pinned
//! key is trusted on first use with a warning and pinned by OpenSSH from then on; an unknown
//! node name gets the exact error. When sshd or the ssh client cannot run here the tests say
//! so and return (under CI they fail instead).

// Other tests share tests/common; not every helper there is used by this file.
#[allow(dead_code)]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use common::farm_apply::{self, output, start_emulator};
use common::nodes::NodeFarm;
use common::sshd::TEST_USER;
use dsinfra::emulator::EmulatorHandle;
use dsinfra::ssh::HostKeyPair;
use serde_json::Value;

/// The OpenSSH client the commands run.
const SSH: &str = "/usr/bin/ssh";

fn manifest(client_key: &str) -> String {
    format!(
        r#"experiment = "reach"
azure {{ location = "eastus" }}
network "main" {{ ssh_from = ["203.0.113.7/32"] }}

vm "gpu" {{
  size           = "Standard_D2s_v5"
  image          = "ubuntu-22.04"
  ssh_key        = "{client_key}"
  admin_username = "{TEST_USER}"
}}

cluster "train" {{
  size           = "Standard_D2s_v5"
  count          = 3
  image          = "ubuntu-22.04"
  ssh_key        = "{client_key}"
  admin_username = "{TEST_USER}"
}}
"#
    )
}

/// Whether the OpenSSH client is installed. Like the sshd harness: a local run says why and
/// skips; under CI (`CI=true`) a missing client fails the test.
fn ssh_client_available() -> bool {
    if Path::new(SSH).exists() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the OpenSSH client {SSH} is required under CI (Debian package openssh-client)"
    );
    eprintln!(
        "SKIPPED: {SSH} is missing (Debian package openssh-client; scripts/test installs it)"
    );
    false
}

/// An applied experiment: the emulator booting VMs into the farm, the manifest and its state.
struct World {
    farm: Arc<NodeFarm>,
    handle: EmulatorHandle,
    dir: tempfile::TempDir,
}

/// What a command printed and how it ended.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn of(out: &Output) -> Self {
        Self {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn describe(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }

    fn ok(self) -> Self {
        assert_eq!(self.code, Some(0), "{}", self.describe());
        self
    }
}

impl World {
    /// Applies the manifest; `None` when sshd or ssh cannot run here (said why).
    async fn applied() -> Option<Self> {
        if !ssh_client_available() {
            return None;
        }
        let farm = NodeFarm::start()?;
        let dir = tempfile::tempdir().expect("temp dir");
        let handle = start_emulator(dir.path(), Some(farm.hook()), |_| {}).await;
        let world = Self { farm, handle, dir };
        std::fs::write(
            world.path("reach.hcl"),
            manifest(&world.farm.client_public_key()),
        )
        .expect("manifest written");
        world
            .dsinfra(&["apply", "reach.hcl", "--auto-approve"])
            .await
            .ok();
        Some(world)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `program args` in the experiment's directory to the end, on a blocking thread (the
    /// emulator shares this runtime).
    async fn run(&self, mut cmd: Command) -> Ran {
        cmd.current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("AZURE_SUBSCRIPTION_ID")
            .stdin(Stdio::null());
        Ran::of(&output(cmd).await)
    }

    /// `dsinfra ARGS --endpoint <emulator>`; a `--` in `args` keeps its place after the flag.
    async fn dsinfra(&self, args: &[&str]) -> Ran {
        self.run(farm_apply::dsinfra(
            self.dir.path(),
            &self.handle.endpoint(),
            args,
        ))
        .await
    }

    /// The printed ssh_config (with the farm's client key), written to `ssh_config`.
    async fn ssh_config(&self) -> (PathBuf, String) {
        let key = self.farm.client_key().display().to_string();
        let ran = self
            .dsinfra(&["ssh-config", "reach.hcl", "-i", &key])
            .await
            .ok();
        let path = self.path("ssh_config");
        std::fs::write(&path, &ran.stdout).expect("config written");
        (path, ran.stdout)
    }

    /// `ssh -F CONFIG ALIAS COMMAND` with the real client, non-interactively.
    async fn ssh_with_config(&self, config: &Path, alias: &str, command: &str) -> Ran {
        let mut cmd = Command::new(SSH);
        cmd.arg("-F")
            .arg(config)
            .args(["-o", "BatchMode=yes", alias, command]);
        self.run(cmd).await
    }

    /// The port of the sshd standing in for the VM named `vm`.
    fn port(&self, vm: &str) -> u16 {
        self.farm
            .host(vm)
            .unwrap_or_else(|| panic!("the farm booted {vm}"))
            .port
    }

    /// How many logins the sshd standing in for `vm` accepted so far.
    fn logins(&self, vm: &str) -> usize {
        let log = self.farm.host(vm).expect("booted").log;
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .matches("Accepted publickey")
            .count()
    }

    /// Rewrites the state file with `change` applied to the VM named `vm`.
    fn edit_state_vm(&self, vm: &str, change: impl FnOnce(&mut serde_json::Map<String, Value>)) {
        let path = farm_apply::state_path(self.dir.path(), "reach");
        let mut state = farm_apply::state(self.dir.path(), "reach");
        let record = state["resources"]
            .as_array_mut()
            .expect("resources")
            .iter_mut()
            .find(|r| r["kind"] == "virtual_machine" && r["name"] == vm)
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("{vm} is in the state"));
        change(record);
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&state).expect("serialises"),
        )
        .expect("state written");
    }

    fn known_hosts(&self) -> String {
        std::fs::read_to_string(self.path(".dsinfra/reach/known_hosts")).expect("written")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_config_drives_openssh_to_direct_and_private_nodes() {
    let Some(world) = World::applied().await else {
        return;
    };
    let (config, text) = world.ssh_config().await;
    for alias in [
        "reach-gpu",
        "reach-train-0",
        "reach-train-1",
        "reach-train-2",
    ] {
        assert!(
            text.contains(&format!("Host {alias}\n")),
            "{alias}:\n{text}"
        );
    }
    assert!(text.contains("  StrictHostKeyChecking yes\n"), "{text}");
    assert!(!text.contains("accept-new"), "every key is pinned:\n{text}");
    // Every VM's pinned key is filed under its name, and nothing else is in the file.
    let known = world.known_hosts();
    let filed: Vec<&str> = known
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        filed,
        [
            "reach-train-0",
            "reach-train-1",
            "reach-train-2",
            "reach-gpu"
        ]
    );

    // A direct node: the command runs on its own sshd.
    let ran = world
        .ssh_with_config(&config, "reach-gpu", "echo $SSH_CONNECTION")
        .await
        .ok();
    assert!(
        ran.stdout
            .trim_end()
            .ends_with(&format!(" {}", world.port("reach-gpu"))),
        "{}",
        ran.describe()
    );

    // A private node: reached on its own sshd, and the head accepted a login for the jump.
    let block = text
        .split("\n\n")
        .find(|b| b.starts_with("Host reach-train-1\n"))
        .expect("a block for node 1");
    assert!(block.ends_with("  ProxyJump reach-train-0"), "{block}");
    let head_logins = world.logins("reach-train-0");
    let ran = world
        .ssh_with_config(&config, "reach-train-1", "echo $SSH_CONNECTION")
        .await
        .ok();
    assert!(
        ran.stdout
            .trim_end()
            .ends_with(&format!(" {}", world.port("reach-train-1"))),
        "{}",
        ran.describe()
    );
    assert_eq!(world.logins("reach-train-0"), head_logins + 1);

    // The same from a user's own config that `Include`s the printed one (the jump then reads
    // the user's config again, and finds the head's block through the Include).
    let user_config = world.path("user_config");
    std::fs::write(&user_config, format!("Include {}\n", config.display()))
        .expect("user config written");
    let ran = world
        .ssh_with_config(&user_config, "reach-train-2", "echo $SSH_CONNECTION")
        .await
        .ok();
    assert!(
        ran.stdout
            .trim_end()
            .ends_with(&format!(" {}", world.port("reach-train-2"))),
        "{}",
        ran.describe()
    );
    assert_eq!(world.logins("reach-train-0"), head_logins + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsinfra_ssh_runs_a_command_and_names_unknown_nodes_exactly() {
    let Some(world) = World::applied().await else {
        return;
    };
    let key = world.farm.client_key().display().to_string();
    // While another run (an apply, say) holds the state's lock, a session still opens.
    let held = dsinfra::state::LocalBackend::open(&world.path("reach.hcl")).expect("lock taken");
    let ran = world
        .dsinfra(&["ssh", "reach.hcl", "gpu", "-i", &key, "--", "echo", "hi"])
        .await
        .ok();
    assert_eq!(ran.stdout, "hi\n", "{}", ran.describe());
    drop(held);

    // Through the head, named by its VM name; the command's words reach the remote shell.
    let ran = world
        .dsinfra(&[
            "ssh",
            "reach.hcl",
            "reach-train-1",
            "-i",
            &key,
            "--",
            "echo",
            "$SSH_CONNECTION",
        ])
        .await
        .ok();
    assert!(
        ran.stdout
            .trim_end()
            .ends_with(&format!(" {}", world.port("reach-train-1"))),
        "{}",
        ran.describe()
    );

    let ran = world
        .dsinfra(&["ssh", "reach.hcl", "trian[1]", "--", "true"])
        .await;
    assert_eq!(ran.code, Some(1), "{}", ran.describe());
    assert_eq!(
        ran.stderr,
        "error: no node `trian[1]` in the state (nodes: cluster.train[0], cluster.train[1], cluster.train[2], vm.gpu); did you mean `train[1]`?\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_other_than_the_pinned_ones_are_refused_and_unpinned_vms_are_trusted_once() {
    let Some(world) = World::applied().await else {
        return;
    };
    let key = world.farm.client_key().display().to_string();
    let other = HostKeyPair::generate()
        .expect("ed25519 generation works")
        .public()
        .to_openssh();

    // The state pins another key for the head: the head is refused, and so is node 1 behind
    // it, before any login to node 1.
    world.edit_state_vm("reach-train-0", |vm| {
        vm.insert("host_key".into(), Value::from(other.clone()));
    });
    for node in ["train", "train[1]"] {
        let ran = world
            .dsinfra(&["ssh", "reach.hcl", node, "-i", &key, "--", "echo", "hi"])
            .await;
        assert_eq!(ran.code, Some(255), "{node}: {}", ran.describe());
        assert!(
            ran.stderr.contains("Host key verification failed."),
            "{node}: {}",
            ran.describe()
        );
        assert!(!ran.stdout.contains("hi"), "{}", ran.describe());
    }
    assert_eq!(world.logins("reach-train-0"), 0);
    assert_eq!(world.logins("reach-train-1"), 0);
    // The printed config refuses it just as well.
    let (config, _) = world.ssh_config().await;
    let ran = world
        .ssh_with_config(&config, "reach-train-0", "true")
        .await;
    assert_eq!(ran.code, Some(255), "{}", ran.describe());

    // A VM without a pinned key (adopted): trusted on first use with a warning, then OpenSSH's
    // record of its key is kept when dsinfra writes the file again.
    world.edit_state_vm("reach-gpu", |vm| {
        vm.remove("host_key");
    });
    let ran = world
        .dsinfra(&["ssh", "reach.hcl", "vm.gpu", "-i", &key, "--", "echo", "hi"])
        .await
        .ok();
    assert_eq!(ran.stdout, "hi\n");
    assert!(
        ran.stderr.contains(
            "warning: vm.gpu (reach-gpu) has no pinned host key in the state (an adopted VM)"
        ),
        "{}",
        ran.describe()
    );
    let accepted: Vec<String> = world
        .known_hosts()
        .lines()
        .filter(|l| l.starts_with("reach-gpu "))
        .map(str::to_owned)
        .collect();
    assert_eq!(accepted.len(), 1, "{}", world.known_hosts());
    world
        .dsinfra(&["ssh", "reach.hcl", "gpu", "-i", &key, "--", "true"])
        .await
        .ok();
    assert!(world.known_hosts().contains(&accepted[0]));
}
