//! The SSH mesh over two addresses per node (issue 13): real sshd hosts that each also listen on
//! a second loopback address standing for their `ib0`, the nodefile listing those addresses, and
//! real pdsh (what `beeond -P` runs) reaching every node by it in parallel, with host keys
//! checked strictly against the keys pinned in the context and never a prompt. A host outside
//! the head's fabric (its ib0 address has no listener, as a VM outside the cluster's availability
//! set has no InfiniBand route to the others) fails the nodefile step, and with it BeeOND's start
//! gate, with a message naming that node.

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::*;
use common::sshd::Ib0;

/// The ib0 stand-in of host `i`: `127.77.0.<i+1>`, listened on when `in_fabric`.
fn ib0(i: usize, in_fabric: bool) -> Ib0 {
    Ib0 {
        address: format!("127.77.0.{}", i + 1),
        listening: in_fabric,
    }
}

/// A cluster context over `hosts` with InfiniBand, each host's key pinned, the mesh in a
/// scratch directory; and the head's key, read by running the head-key step for real.
async fn fabric_context(hosts: &TestHosts, run: &str) -> (NodeContext, StepSpec, PathBuf) {
    let mut ctx = cluster_context("fabric-test", hosts);
    ctx.infiniband = true;
    ctx.temp_dir = Some(hosts.dir().join("temp").display().to_string());
    ctx.host_keys = hosts
        .hosts
        .iter()
        .map(|h| (h.name.clone(), h.public_key.to_openssh()))
        .collect();
    let ssh_dir = hosts.dir().join("mesh-ssh");
    ctx.mesh = library::MeshSettings {
        user: sshd::TEST_USER.into(),
        ssh_dir: ssh_dir.display().to_string(),
        authorized_keys: hosts.dir().join("authorized_keys").display().to_string(),
        admin_dir: Some(hosts.dir().join("admin-mesh").display().to_string()),
    };
    let head_key = library::head_key_step(&ctx).expect("renders");
    let nodes: Vec<_> = hosts.hosts.iter().map(common::sshd::Host::node).collect();
    let (options, lines) = options_with_lines(hosts, run);
    let report = steps::run(&nodes, std::slice::from_ref(&head_key), &options)
        .await
        .expect("valid");
    assert!(report.success(), "{report}");
    ctx.head_public_key = lines
        .lock()
        .expect("lock")
        .iter()
        .find_map(|(node, _, line)| {
            (node == "host0")
                .then(|| library::parse_head_key(line))
                .flatten()
        });
    assert!(ctx.head_public_key.is_some(), "the head printed its key");
    (ctx, head_key, ssh_dir)
}

/// Runs `steps` on every host; the report and every line the steps printed.
async fn run_steps(hosts: &TestHosts, steps_to_run: &[StepSpec], run: &str) -> (bool, String) {
    let nodes: Vec<_> = hosts.hosts.iter().map(common::sshd::Host::node).collect();
    let (options, lines) = options_with_lines(hosts, run);
    let report = steps::run(&nodes, steps_to_run, &options)
        .await
        .expect("valid input");
    let said: Vec<String> = lines
        .lock()
        .expect("lock")
        .iter()
        .map(|(node, step, line)| format!("{node} {step}: {line}"))
        .collect();
    (report.success(), format!("{report}\n{}", said.join("\n")))
}

fn mesh_steps(ctx: &NodeContext, nodefile: &Path) -> Vec<StepSpec> {
    let params: BTreeMap<String, Value> = serde_json::from_value(json!({
        "prefer_infiniband": true, "nodefile": nodefile.display().to_string(), "timeout": "2m"
    }))
    .expect("a map");
    let request = StepRequest {
        name: "ssh_mesh",
        kind: "ssh_mesh",
        scope: Scope::All,
        policy: RunPolicy::Once,
        params: &params,
    };
    library::render(&request, ctx).expect("renders").steps
}

/// Regression (issue 13): the mesh covered only the nodes' private IPs while the nodefile listed
/// ib0 addresses, so pdsh met unknown host keys and BeeOND fell back to sequential ssh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdsh_reaches_every_node_by_its_ib0_address_in_parallel_with_pinned_keys() {
    let Some(hosts) = sshd::start_with_ib0(&(0..4).map(|i| Some(ib0(i, true))).collect::<Vec<_>>())
    else {
        return;
    };
    let pdsh = Path::new("/usr/bin/pdsh");
    if !pdsh.exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "pdsh is required under CI (scripts/test installs it)"
        );
        eprintln!("SKIPPED: pdsh is not installed (scripts/test installs it)");
        return;
    }
    let (mut ctx, head_key, ssh_dir) = fabric_context(&hosts, "fabric-key").await;
    let nodefile = hosts.dir().join("etc/nodefile");
    let mut all = vec![head_key.clone()];
    all.extend(mesh_steps(&ctx, &nodefile));
    let (ok, said) = run_steps(&hosts, &all, "fabric-mesh").await;
    assert!(ok, "{said}");
    let listed = std::fs::read_to_string(&nodefile).expect("nodefile written");
    assert_eq!(listed, "127.77.0.1\n127.77.0.2\n127.77.0.3\n127.77.0.4\n");
    let config = std::fs::read_to_string(ssh_dir.join("config")).expect("mesh config");
    assert!(config.contains("StrictHostKeyChecking yes"), "{config}");
    assert!(
        !config.contains("accept-new"),
        "every key is pinned:\n{config}"
    );
    assert!(config.contains("BatchMode yes"), "{config}");
    let known =
        std::fs::read_to_string(ssh_dir.join("known_hosts.dsinfra-mesh")).expect("pinned keys");
    // The admin user's mesh knows the same pinned keys under the same addresses.
    assert_eq!(
        std::fs::read_to_string(hosts.dir().join("admin-mesh/known_hosts.dsinfra-mesh"))
            .expect("the admin mesh's known hosts"),
        known
    );
    for host in &hosts.hosts {
        let ib0 = &host.ib0.as_ref().expect("an ib0 stand-in").address;
        // Both addresses of the node carry its pinned key.
        let key: Vec<String> = host
            .public_key
            .to_openssh()
            .split_whitespace()
            .take(2)
            .map(str::to_owned)
            .collect();
        let line = format!(
            "[127.0.0.1]:{port},[{ib0}]:{port} {key}",
            port = host.port,
            key = key.join(" ")
        );
        assert!(known.lines().any(|l| l == line), "{line}\n{known}");
    }

    // Real pdsh over the nodefile, as beeond -P runs it: each node sleeps 1 s and says which
    // ib0 address it answered on. On a node, root's ~/.ssh/config is the mesh config; here it is
    // passed with -F. Sequential runs would take at least 4 s.
    let started = Instant::now();
    let out = Command::new(pdsh)
        .args(["-R", "ssh", "-f", "32", "-l", sshd::TEST_USER, "-w"])
        .arg(format!("^{}", nodefile.display()))
        .arg("sleep 1; set -- $SSH_CONNECTION; echo answered-on=$3 ib0=$DSINFRA_TEST_IB0_ADDRESS")
        .env(
            "PDSH_SSH_ARGS",
            format!("-F {} -x -l%u %h", ssh_dir.join("config").display()),
        )
        .stdin(Stdio::null())
        .output()
        .expect("pdsh runs");
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for i in 1..=4 {
        let address = format!("127.77.0.{i}");
        assert!(
            stdout.contains(&format!("{address}: answered-on={address}")),
            "{address} answered on its ib0 address:\n{stdout}\n{stderr}"
        );
    }
    assert!(
        elapsed < Duration::from_millis(3500),
        "pdsh took {elapsed:?}: not in parallel\n{stdout}"
    );
    assert!(
        !stderr.contains("Warning"),
        "no host key was learnt or prompted for:\n{stderr}"
    );

    // Strict: a node whose pinned key is not the one it presents is refused, not accepted.
    // The mesh config and the nodefile are removed so the steps' own checks let them run again.
    let wrong = hosts.hosts[3].public_key.to_openssh();
    ctx.host_keys.insert("host2".into(), wrong);
    std::fs::remove_file(ssh_dir.join("config")).expect("config removed");
    std::fs::remove_file(&nodefile).expect("nodefile removed");
    let mut again = vec![head_key];
    again.extend(mesh_steps(&ctx, &nodefile));
    let (ok, said) = run_steps(&hosts, &again, "fabric-wrong-key").await;
    assert!(!ok, "a wrong pinned key must fail the mesh:\n{said}");
    assert!(
        said.contains("the head cannot reach node host2")
            && said.contains("Host key verification failed"),
        "the failure names the node and why:\n{said}"
    );
}

/// A node outside the head's InfiniBand fabric (its ib0 address is not reachable from the head)
/// stops BeeOND before it starts, naming the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_outside_the_fabric_fails_the_beeond_gate_naming_it() {
    // host3 has no ib0 at all (the real `ip -4 -o addr show ib0` runs there and fails): the
    // nodefile falls back to its private IP instead of dying on the failed command.
    let fabric = [
        Some(ib0(0, true)),
        Some(ib0(1, true)),
        Some(ib0(2, false)),
        None,
    ];
    let Some(hosts) = sshd::start_with_ib0(&fabric) else {
        return;
    };
    let (mut ctx, head_key, _) = fabric_context(&hosts, "outside-key").await;
    // A harmless stand-in: the gate must stop before BeeOND is started at all.
    let stand_in = hosts.dir().join("beeond-stand-in");
    let calls = hosts.dir().join("beeond-calls");
    std::fs::write(
        &stand_in,
        format!("#!/bin/sh\necho \"$*\" >> '{}'\n", calls.display()),
    )
    .expect("stand-in written");
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755))
        .expect("executable");
    ctx.beeond = Some(stand_in.display().to_string());
    let nodefile = hosts.dir().join("etc/nodefile");
    let params: BTreeMap<String, Value> =
        serde_json::from_value(json!({"nodefile": nodefile.display().to_string()})).expect("a map");
    let request = StepRequest {
        name: "beeond",
        kind: "beeond",
        scope: Scope::All,
        policy: RunPolicy::Once,
        params: &params,
    };
    let expansion = library::render(&request, &ctx).expect("renders");
    // The install part would install BeeGFS on this machine: the mesh and the start gate run.
    let mut chosen = vec![head_key];
    chosen.extend(
        expansion
            .steps
            .into_iter()
            .filter(|s| ["beeond.mesh", "beeond.start"].contains(&s.name.as_str())),
    );
    assert_eq!(chosen.len(), 3, "head key, mesh and start");
    let (ok, said) = run_steps(&hosts, &chosen, "outside").await;
    assert!(!ok, "the start gate must fail:\n{said}");
    assert!(
        said.contains(
            "node host2 is not in the head's InfiniBand fabric: the head cannot reach its ib0 \
             address 127.77.0.3"
        ),
        "{said}"
    );
    assert!(
        said.contains("node host3 has no ib0 address: the nodefile lists its private IP"),
        "{said}"
    );
    assert!(!calls.exists(), "beeond was not started");
    assert!(
        !nodefile.exists(),
        "no nodefile lists a node BeeOND cannot reach"
    );
}

/// The node farm (the emulator's boot hook in end-to-end tests) gives a VM of an InfiniBand size
/// the ib0 stand-in the emulator assigned to its fabric, listened on, and a VM outside every set
/// an ib0 address nobody listens on: no InfiniBand route, as on Azure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn farm_hosts_of_an_infiniband_size_have_an_ib0_route_only_inside_a_set() {
    let Some(farm) = common::nodes::NodeFarm::start() else {
        return;
    };
    let boot = |name: &str, private_ip: &str, ib0: Option<&str>| dsinfra::emulator::VmBoot {
        vm_id: format!("00000000-0000-0000-0000-00000000000{}", name.len()),
        name: name.to_owned(),
        admin_username: sshd::TEST_USER.into(),
        ssh_public_keys: vec![farm.client_public_key()],
        custom_data: None,
        public_ip: None,
        private_ip: Some(private_ip.to_owned()),
        vm_size: "Standard_ND40rs_v2".into(),
        fabric: ib0.map(|_| {
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/availabilitySets/f"
                .to_owned()
        }),
        ib0_address: ib0.map(str::to_owned),
    };
    for vm in [
        boot("member", "10.0.0.4", Some("127.70.0.4")),
        boot("outsider", "10.0.0.5", None),
    ] {
        let hook = farm.hook();
        tokio::task::spawn_blocking(move || hook(&vm))
            .await
            .expect("joined")
            .expect("the farm answers an endpoint");
    }
    let member = farm.host("member").expect("booted");
    std::net::TcpStream::connect(("127.70.0.4", member.port))
        .expect("a member's sshd listens on its ib0 address");
    let outsider = farm.host("outsider").expect("booted");
    let config = std::fs::read_to_string(outsider.dir.join("sshd_config")).expect("config");
    assert!(
        config
            .lines()
            .any(|l| l.starts_with("SetEnv ") && l.contains(" DSINFRA_TEST_IB0_ADDRESS=127.99.0.5")),
        "the outsider reports an ib0 address:\n{config}"
    );
    assert!(
        std::net::TcpStream::connect(("127.99.0.5", outsider.port)).is_err(),
        "nothing listens on the outsider's ib0 address"
    );
}
