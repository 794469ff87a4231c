//! Idle auto-park end to end (issue 18): `park { idle = "2m" }` on a compressed clock
//! (`DSINFRA_IDLE_TIME_SCALE`: a 2 s window sampled every second), the watcher installed by
//! apply on an sshd host standing in for the VM, an `nvidia-smi` stand-in whose utilisation the
//! test sets, and the emulator's IMDS stand-in and role-based authorization. Held: a busy GPU
//! and then a running `dsinfra run --detach` job keep the VM up; the custom role rewritten
//! without the deallocate action (a PUT, as someone editing the role would) makes the watcher
//! fail loudly, and `status` shows ARM's AuthorizationFailed; the role restored, the watcher
//! deallocates the VM with the head's own token on its next tick and `status` says parked.
//!
//! The VM has no steps of its own: the watcher is installed all the same (an apply used to
//! run post-boot work only for blocks with steps).
//!
//! A two-node `cluster` with the `ssh_mesh` step (moved off `/root/.ssh` by `DSINFRA_MESH_DIR`
//! into the farm's mesh directory, whose `authorized_keys` every farm host reads): the head
//! samples node 1 over the mesh (node 1 alone busy shows in the head's state), then deallocates
//! node 1 before itself through the emulator.

use std::os::unix::fs::PermissionsExt as _;

use super::*;

/// The compressed clock: `2m` (the manifest's minimum, as issue 18 asks) becomes 2.4 s.
const SCALE: &str = "0.02";

/// The test's watcher settings and where its stand-ins keep their state.
struct Idle {
    smi: PathBuf,
    util: PathBuf,
    state_dir: PathBuf,
}

impl Idle {
    fn new(w: &World) -> Self {
        let util = w.path("gpu-util");
        std::fs::write(&util, "90\n").expect("util");
        let smi = w.path("nvidia-smi");
        std::fs::write(&smi, format!("#!/bin/sh\ncat '{}'\n", util.display())).expect("smi");
        std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let state_dir = w.path("idle");
        Self {
            smi,
            util,
            state_dir,
        }
    }

    fn env(&self) -> Vec<(&'static str, &Path)> {
        vec![
            ("DSINFRA_NVIDIA_SMI", self.smi.as_path()),
            ("DSINFRA_IDLE_DIR", self.state_dir.as_path()),
            ("DSINFRA_IDLE_TIME_SCALE", Path::new(SCALE)),
        ]
    }

    fn set_gpu(&self, percent: u32) {
        std::fs::write(&self.util, format!("{percent}\n")).expect("util");
    }

    fn state(&self) -> Option<dsinfra::steps::library::IdleState> {
        let text = std::fs::read_to_string(self.state_dir.join("state.json")).ok()?;
        dsinfra::steps::library::parse_idle_state(&text).ok()
    }

    /// Waits up to `secs` for the watcher's state to satisfy `done`.
    async fn wait_for(
        &self,
        secs: u64,
        what: &str,
        done: impl Fn(&dsinfra::steps::library::IdleState) -> bool,
    ) -> dsinfra::steps::library::IdleState {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(state) = self.state().filter(|s| done(s)) {
                return state;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: the watcher's state is {:?}; its log:\n{}",
                self.state(),
                std::fs::read_to_string(self.state_dir.join("watcher.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Idle {
    /// Every watcher loop this test started ends with it (its pidfile names its session).
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.state_dir.join("watcher.pid")) {
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", pid.trim())])
                .status();
        }
    }
}

fn write_gpu_vm(w: &World, farm: &NodeFarm) {
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"vm "gpu" {{
  size           = "Standard_ND40rs_v2"
  image          = "ubuntu-22.04"
  admin_username = "{}"
  ssh_key        = "{}"
  park {{
    idle = "2m"
  }}
}}
"#,
            farm.user(),
            farm.client_public_key()
        ),
    );
}

/// PUTs the block's idle role with `actions` (as someone editing the role in the portal would).
async fn put_role(w: &World, actions: &[&str]) {
    let role = w.resource("vm.gpu.idle_role");
    let id = role["id"].as_str().expect("the role's id");
    let url = format!("{}{id}?api-version=2022-04-01", w.handle.endpoint());
    let client = reqwest::Client::new();
    let mut body: Value = client
        .get(&url)
        .bearer_auth("dsinfra-emulator")
        .send()
        .await
        .expect("GET the role")
        .json()
        .await
        .expect("a role body");
    body["properties"]["permissions"] = serde_json::json!([{"actions": actions, "notActions": []}]);
    let put = client
        .put(&url)
        .bearer_auth("dsinfra-emulator")
        .json(&body)
        .send()
        .await
        .expect("PUT the role");
    assert!(put.status().is_success(), "{:?}", put.text().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_vm_parks_itself_a_job_keeps_it_up_and_a_missing_permission_is_loud() {
    let Some((farm, w)) = World::with_farm().await else {
        return;
    };
    write_gpu_vm(&w, &farm);
    let idle = Idle::new(&w);
    let env = idle.env();
    w.ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    // A busy GPU: nothing parks.
    let busy = idle.wait_for(10, "a busy GPU", |s| s.busy.is_some()).await;
    assert!(
        busy.busy
            .as_deref()
            .is_some_and(|b| b.starts_with("GPU at 90% on ")),
        "{busy:?}"
    );

    // A detached job running: the GPU goes idle, the VM stays up while the job runs.
    let (out, text) = w
        .run(&["run", "stepsdemo.hcl", "--detach", "--", "sleep 5"])
        .await;
    assert!(out.status.success(), "{text}");
    idle.set_gpu(0);
    let job = idle
        .wait_for(5, "a running job", |s| {
            s.busy.as_deref().is_some_and(|b| b.starts_with("job "))
        })
        .await;
    assert!(job.parking.is_none() && job.error.is_none(), "{job:?}");
    let identity = w.farm.as_ref().expect("farm").client_key().to_owned();
    let status_env: Vec<(&str, &Path)> = vec![
        ("DSINFRA_IDLE_DIR", idle.state_dir.as_path()),
        ("DSINFRA_SSH_IDENTITY", identity.as_path()),
    ];
    let said = w.ok_env(&["status", "stepsdemo.hcl"], &status_env).await;
    assert!(said.contains("vm.gpu     2m      busy: job "), "{said}");

    // The role loses its deallocate action while the job runs: when it ends, the watcher's
    // deallocation is refused, recorded and shown loudly.
    put_role(
        &w,
        &[
            "Microsoft.Compute/virtualMachines/read",
            "Microsoft.Compute/virtualMachines/start/action",
        ],
    )
    .await;
    let failed = idle
        .wait_for(15, "a refused deallocation", |s| s.error.is_some())
        .await;
    let error = failed.error.expect("an error");
    assert_eq!(error.code, "AuthorizationFailed", "{error:?}");
    assert!(
        error.message.contains(
            "does not have authorization to perform action 'Microsoft.Compute/virtualMachines/deallocate/action' over scope '/subscriptions/"
        ),
        "{}",
        error.message
    );
    assert_eq!(
        w.resource("vm.gpu.vm")["power_state"],
        "running",
        "nothing was deallocated"
    );
    let said = w.ok_env(&["status", "stepsdemo.hcl"], &status_env).await;
    assert!(
        said.contains("FAILED: AuthorizationFailed: The client '"),
        "{said}"
    );

    // The role restored: the next tick parks the VM with the head's own token.
    put_role(
        &w,
        &[
            "Microsoft.Compute/virtualMachines/read",
            "Microsoft.Compute/virtualMachines/deallocate/action",
            "Microsoft.Compute/virtualMachines/start/action",
        ],
    )
    .await;
    let parked = idle
        .wait_for(15, "the parking", |s| s.parking.is_some())
        .await;
    assert!(parked.error.is_none(), "{parked:?}");
    assert!(
        w.first_request("POST", "/virtualMachines/stepsdemo-gpu/deallocate")
            .is_some()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let said = w.ok_env(&["status", "stepsdemo.hcl"], &status_env).await;
        if said.contains("vm.gpu     2m      parked") {
            assert!(said.contains("deallocated (parked)"), "{said}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not parked:\n{said}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Two GPU nodes with the mesh the manifest requires for `idle` on more than one node.
fn write_gpu_cluster(w: &World, farm: &NodeFarm) {
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"cluster "train" {{
  size           = "Standard_ND40rs_v2"
  count          = 2
  image          = "ubuntu-22.04"
  admin_username = "{}"
  ssh_key        = "{}"
  step "ssh_mesh" {{}}
  park {{
    idle = "2m"
  }}
}}
"#,
            farm.user(),
            farm.client_public_key()
        ),
    );
}

/// The emulator's instance view power state of the VM `id` (`PowerState/...`).
async fn power_state(w: &World, id: &str) -> String {
    let api = dsinfra::azure::api_version::api_version_for_path(id).expect("a compute api");
    let url = format!("{}{id}/instanceView?api-version={api}", w.handle.endpoint());
    let view: Value = reqwest::Client::new()
        .get(&url)
        .bearer_auth("dsinfra-emulator")
        .send()
        .await
        .expect("GET the instance view")
        .json()
        .await
        .expect("an instance view");
    view["statuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["code"].as_str())
        .find(|c| c.starts_with("PowerState/"))
        .unwrap_or_default()
        .to_owned()
}

/// Where in the emulator's request record the first `POST` deallocating the VM `id` is.
fn deallocation_index(w: &World, id: &str) -> Option<usize> {
    let path = format!("{id}/deallocate").to_ascii_lowercase();
    w.requests
        .lock()
        .expect("not poisoned")
        .iter()
        .position(|(_, m, p)| m == "POST" && p.to_ascii_lowercase().ends_with(&path))
}

// Issue 18, Done-when: an idle cluster is deallocated by the watcher through the emulator with
// the head's identity. The head samples node 1 over the mesh (its sshd runs node 1's
// `nvidia-smi` stand-in, which reads a value kept for node 1's port alone), then parks node 1
// before itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_cluster_parks_its_nodes_after_the_head_sampled_them_over_the_mesh() {
    let Some((farm, w)) = World::with_farm().await else {
        return;
    };
    write_gpu_cluster(&w, &farm);
    let idle = Idle::new(&w);
    // The stand-in answers for the sshd it runs under (the port in `SSH_CONNECTION`): a value
    // kept for that port, else the shared one. The head's own sample reads the shared one.
    std::fs::write(
        &idle.smi,
        format!(
            "#!/bin/sh\nport=${{SSH_CONNECTION##* }}\ncat '{util}-'\"$port\" 2>/dev/null || cat '{util}'\n",
            util = idle.util.display()
        ),
    )
    .expect("smi");
    let mesh = farm.mesh_dir();
    let admin_mesh = farm.admin_mesh_dir();
    let user = PathBuf::from(farm.user());
    let mut env = idle.env();
    env.extend([
        ("DSINFRA_MESH_DIR", mesh.as_path()),
        ("DSINFRA_MESH_USER", user.as_path()),
        ("DSINFRA_MESH_ADMIN_DIR", admin_mesh.as_path()),
    ]);
    w.ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    let (head, node1) = (
        w.resource("cluster.train[0].vm"),
        w.resource("cluster.train[1].vm"),
    );
    let id = |vm: &Value| vm["id"].as_str().expect("a VM id").to_owned();
    let (head_id, node1_id) = (id(&head), id(&node1));
    let node1_name = node1["name"].as_str().expect("a VM name").to_owned();
    let node1_port = farm.host(&node1_name).expect("node 1's host").port;

    // Node 1 alone busy: the head learns it only by sampling node 1 over the mesh.
    let node1_util = PathBuf::from(format!("{}-{node1_port}", idle.util.display()));
    std::fs::write(&node1_util, "90\n").expect("node 1's util");
    idle.set_gpu(0);
    let busy = idle
        .wait_for(10, "node 1 busy", |s| {
            s.busy.as_deref() == Some(format!("GPU at 90% on {node1_name}").as_str())
        })
        .await;
    assert!(busy.parking.is_none() && busy.error.is_none(), "{busy:?}");
    let identity = farm.client_key().to_owned();
    let status_env: Vec<(&str, &Path)> = vec![
        ("DSINFRA_IDLE_DIR", idle.state_dir.as_path()),
        ("DSINFRA_SSH_IDENTITY", identity.as_path()),
    ];
    assert_eq!(power_state(&w, &node1_id).await, "PowerState/running");
    assert_eq!(power_state(&w, &head_id).await, "PowerState/running");

    // Node 1 idle too: after the window both VMs are deallocated, node 1 first.
    std::fs::write(&node1_util, "0\n").expect("node 1's util");
    let parked = idle
        .wait_for(15, "the parking", |s| {
            s.parking.as_ref().is_some_and(|p| p.vms.len() == 2)
        })
        .await;
    assert!(
        parked.error.is_none() && parked.busy.is_none(),
        "{parked:?}"
    );
    assert_eq!(
        parked.parking.expect("parking").vms,
        [node1_id.clone(), head_id.clone()]
    );
    let (first, last) = (
        deallocation_index(&w, &node1_id).expect("node 1 deallocated"),
        deallocation_index(&w, &head_id).expect("the head deallocated"),
    );
    assert!(
        first < last,
        "node 1's deallocation is sent before the head's"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let states = [
            power_state(&w, &node1_id).await,
            power_state(&w, &head_id).await,
        ];
        let said = w.ok_env(&["status", "stepsdemo.hcl"], &status_env).await;
        let shows_parked = said
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["cluster.train", "2m", "parked"]);
        if states.iter().all(|s| s == "PowerState/deallocated") && shows_parked {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not parked: {states:?}\n{said}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
