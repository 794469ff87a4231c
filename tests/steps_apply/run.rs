//! `dsinfra run`, `runs` and `logs` on a 4-node GPU cluster whose nodes are sshd hosts: the
//! hostfile every node sees (hosts, 8 slots per ND40rs_v2), exit codes (the first failure's,
//! with a per-node summary), a detached run followed with `logs -f`, the records `runs` lists,
//! and `--park-after` deallocating the VMs. The test hosts have no systemd, so the detached run
//! takes the `setsid nohup` path.

use super::*;

/// A 4-node cluster of 8-GPU VMs without steps.
fn write_gpu_cluster(w: &World) {
    let farm = w.farm.as_ref().expect("a farm");
    let body = format!(
        r#"cluster "train" {{
  size           = "Standard_ND40rs_v2"
  count          = 4
  image          = "ubuntu-22.04"
  admin_username = "{}"
  ssh_key        = "{}"
}}
"#,
        farm.user(),
        farm.client_public_key()
    );
    w.write_hcl("stepsdemo", &body);
}

/// The stdout lines of node `node` (`cluster.train[1]: ...`), without the prefix.
fn lines_of(stdout: &str, node: &str) -> Vec<String> {
    let prefix = format!("{node}: ");
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_gives_every_node_the_hostfile_and_the_jobs_exit_code() {
    let Some((_farm, w)) = World::with_addressed_farm().await else {
        return;
    };
    write_gpu_cluster(&w);
    w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    hostfile_on_every_node(&w).await;
    exit_codes(&w).await;
    detached(&w).await;
    errors(&w).await;
    ctrl_c(&w).await;
    park_after(&w).await;
}

/// Issue 30: jobs run as the admin user, and MPI launchers and pdsh ssh to the hostfile's hosts
/// as that user, with its own `~/.ssh`. Real OpenMPI (`mpirun --hostfile`, whose daemons start
/// over ssh) and real pdsh over the nodefile, started by `dsinfra run` as the admin user of a
/// 3-node cluster with the `ssh_mesh` step; each host has its own address, as nodes have their
/// own private IPs. Each rank prints the address its sshd was dialled at (`SSH_CONNECTION`), so
/// every host shows up once. Before the admin mesh (root's only), ssh failed with "Permission
/// denied (publickey)" and the hostfile named private IPs nothing here answers at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mpirun_and_pdsh_reach_every_node_as_the_admin_user() {
    let Some(admin) = common::sshd::AdminUser::take() else {
        return;
    };
    for tool in ["/usr/bin/mpirun", "/usr/bin/pdsh"] {
        if !Path::new(tool).exists() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{tool} is required under CI (scripts/test installs openmpi-bin and pdsh)"
            );
            eprintln!("SKIPPED: {tool} is not installed (scripts/test installs it)");
            return;
        }
    }
    let Some((farm, w)) = World::with_addressed_farm().await else {
        return;
    };
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"cluster "train" {{
  size           = "Standard_D2s_v3"
  count          = 3
  image          = "ubuntu-22.04"
  admin_username = "{}"
  ssh_key        = "{}"
  step "ssh_mesh" {{}}
}}
"#,
            common::sshd::ADMIN_USER,
            farm.client_public_key()
        ),
    );
    // Root's mesh moves to the farm's directory (its login user stands for root); the admin
    // user's is in its real home, where ssh, mpirun and pdsh find it by themselves.
    let mesh = farm.mesh_dir();
    let user = PathBuf::from(farm.user());
    w.ok_env(
        &["apply", "stepsdemo.hcl", "--auto-approve"],
        &[
            ("DSINFRA_MESH_DIR", mesh.as_path()),
            ("DSINFRA_MESH_USER", user.as_path()),
        ],
    )
    .await;
    let config = std::fs::read_to_string(admin.ssh_dir().join("config")).expect("admin config");
    assert!(config.contains("BatchMode yes"), "{config}");

    // The hosts: what the hostfile lists, each the address of one node's sshd.
    let (out, text) = w
        .run(&["run", "stepsdemo.hcl", "--", "cat $DSINFRA_HOSTFILE"])
        .await;
    assert!(out.status.success(), "{text}");
    let hosts: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.strip_suffix(" slots=1").expect("1 slot").to_owned())
        .collect();
    assert_eq!(hosts.len(), 3, "{text}");
    let dialled = |stdout: &str| -> Vec<String> {
        let mut seen: Vec<String> = stdout
            .lines()
            .filter_map(|l| l.split_whitespace().rev().nth(1).map(str::to_owned))
            .collect();
        seen.sort();
        seen
    };
    let mut expected = hosts.clone();
    expected.sort();

    let (out, text) = w
        .run(&[
            "run",
            "stepsdemo.hcl",
            "--",
            // `rtc_hwloc_vmhole none`: the three "nodes" are one machine here, and their daemons
            // writing hwloc's shared-memory topology at once made one crash in
            // hwloc_shmem_topology_write now and then (nodes that are machines of their own
            // never share it).
            "mpirun --mca rtc_hwloc_vmhole none --hostfile $DSINFRA_HOSTFILE -np 3 sh -c 'echo rank $OMPI_COMM_WORLD_RANK: $SSH_CONNECTION'",
        ])
        .await;
    assert!(out.status.success(), "mpirun as the admin user:\n{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        dialled(&stdout),
        expected,
        "every host runs a rank:\n{text}"
    );

    let (out, text) = w
        .run(&[
            "run",
            "stepsdemo.hcl",
            "--",
            "pdsh -w ^$DSINFRA_NODEFILE 'echo $(id -un) $SSH_CONNECTION'",
        ])
        .await;
    assert!(out.status.success(), "pdsh as the admin user:\n{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        dialled(&stdout),
        expected,
        "pdsh reached every host:\n{text}"
    );
    assert_eq!(
        stdout.matches(common::sshd::ADMIN_USER).count(),
        3,
        "as the admin user:\n{text}"
    );
}

/// Every node: the same hostfile, head first, 8 slots each; its own rank.
async fn hostfile_on_every_node(w: &World) {
    let (out, text) = w
        .run(&[
            "run",
            "stepsdemo.hcl",
            "--all",
            "--",
            "cat $DSINFRA_HOSTFILE; echo rank=$NODE_RANK/$NNODES head=$MASTER_ADDR",
        ])
        .await;
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let head = lines_of(&stdout, "cluster.train[0]");
    assert_eq!(head.len(), 5, "{text}");
    let hosts: Vec<&str> = head[..4]
        .iter()
        .map(|l| {
            l.strip_suffix(" slots=8")
                .unwrap_or_else(|| panic!("{l:?} has 8 slots"))
        })
        .collect();
    let distinct: std::collections::BTreeSet<_> = hosts.iter().collect();
    assert_eq!(distinct.len(), 4, "four hosts: {hosts:?}");
    assert!(
        hosts
            .iter()
            .all(|h| h.parse::<std::net::Ipv4Addr>().is_ok()),
        "{hosts:?}"
    );
    for rank in 0..4 {
        let lines = lines_of(&stdout, &format!("cluster.train[{rank}]"));
        assert_eq!(
            lines[..4],
            head[..4],
            "node {rank} sees the same hostfile:\n{text}"
        );
        assert_eq!(
            lines[4],
            format!("rank={rank}/4 head={}", hosts[0]),
            "{text}"
        );
    }
}

/// One node fails with 3: the run exits 3 and the summary names it.
async fn exit_codes(w: &World) {
    let (out, text) = w
        .run(&[
            "run",
            "stepsdemo.hcl",
            "cluster.train",
            "--",
            "if [ $NODE_RANK = 2 ]; then echo failing >&2; exit 3; fi",
        ])
        .await;
    assert_eq!(out.status.code(), Some(3), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cluster.train[2]: failing"), "{text}");
    assert!(
        stderr.contains("  cluster.train[2]: exit 3: failed\n"),
        "{text}"
    );
    assert!(stderr.contains("  cluster.train[1]: exit 0\n"), "{text}");
}

/// Detached on the head, followed to its end.
async fn detached(w: &World) {
    let (out, text) = w
        .run(&[
            "run",
            "stepsdemo.hcl",
            "--detach",
            "--",
            "echo begun on $DSINFRA_NODE; sleep 1; echo ended; exit 4",
        ])
        .await;
    assert!(out.status.success(), "{text}");
    let id = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| {
            l.strip_prefix("run ")?
                .strip_suffix(" started detached on cluster.train[0]")
        })
        .map_or_else(|| panic!("the id is printed:\n{text}"), str::to_owned);
    let (out, text) = w.run(&["runs", "stepsdemo.hcl"]).await;
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("running (detached)")),
        "{text}"
    );
    let (out, text) = w.run(&["logs", "stepsdemo.hcl", &id, "-f"]).await;
    assert!(out.status.success(), "{text}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "begun on cluster.train[0]\nended\n",
        "{text}"
    );
    assert!(
        text.contains(&format!("run {id}: failed, exit 4")),
        "{text}"
    );

    // The run directory on the head holds the contract the idle watcher reads (docs/run.md).
    let dir = w.path("runs").join("stepsdemo-train-0").join(&id);
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    assert_eq!(
        (read("state"), read("exit")),
        ("done\n".to_owned(), "4\n".to_owned())
    );
    assert!(read("runner").starts_with("setsid "), "{}", read("runner"));

    // A detached run nobody follows: `runs` asks the head how it ended.
    let (out, text) = w
        .run(&["run", "stepsdemo.hcl", "--detach", "--", "echo quick"])
        .await;
    assert!(out.status.success(), "{text}");

    // Every run is listed, with its state and exit status.
    // The job ends at once; a loaded machine may take a moment to run it.
    let since = std::time::Instant::now();
    let (out, text) = loop {
        let (out, text) = w.run(&["runs", "stepsdemo.hcl"]).await;
        assert!(out.status.success(), "{text}");
        let last = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .map(str::to_owned);
        if !last.is_some_and(|l| l.contains("running")) || since.elapsed() > Duration::from_secs(10)
        {
            break (out, text);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let rows: Vec<Vec<String>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().take(3).map(str::to_owned).collect())
        .collect();
    let states: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r[1].as_str(), r[2].as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("succeeded", "0"),
            ("failed", "3"),
            ("failed", "4"),
            ("succeeded", "0")
        ],
        "{text}"
    );
    assert_eq!(rows[2][0], id, "{text}");
}

/// Requests that cannot be done say why and what to do.
async fn errors(w: &World) {
    for (args, expected) in [
        (
            vec!["run", "stepsdemo.hcl", "cluster.nope", "--", "true"],
            "error: no node or block `cluster.nope` in the state; choose one of: cluster.train, \
             cluster.train[0], cluster.train[1], cluster.train[2], cluster.train[3]",
        ),
        (
            vec!["run", "stepsdemo.hcl", "--all", "--detach", "--", "true"],
            "error: --detach starts the job on the head only, but `cluster.train` is 4 nodes: \
             drop the TARGET (or name the head); the job can start work on the other nodes \
             through $DSINFRA_HOSTFILE",
        ),
        (
            vec![
                "run",
                "stepsdemo.hcl",
                "--detach",
                "--park-after",
                "--",
                "true",
            ],
            "error: --park-after with --detach needs the idle watcher on the head, which is not \
             built yet: run attached (without --detach) to park when the job ends, or park later \
             with `dsinfra park`",
        ),
    ] {
        let (out, text) = w.run(&args).await;
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(expected),
            "{expected}\n{text}"
        );
    }
}

/// Ctrl-C stops the job on every node, which records the command's 143; no park follows.
async fn ctrl_c(w: &World) {
    let (code, stderr) = interrupted(
        w,
        &[
            "run",
            "stepsdemo.hcl",
            "--all",
            "--park-after",
            "--",
            "echo started >&2; sleep 30; echo never",
        ],
    )
    .await;
    assert_eq!(code, 130, "{stderr}");
    assert!(
        stderr.contains("Ctrl-C: stopping the job on every node"),
        "{stderr}"
    );
    assert!(!stderr.contains("parking"), "{stderr}");
    let last = std::fs::read_dir(w.path("runs").join("stepsdemo-train-3"))
        .expect("runs of node 3")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .max()
        .expect("a run");
    assert_eq!(
        std::fs::read_to_string(last.join("exit")).unwrap_or_default(),
        "143\n",
        "{stderr}"
    );
}

/// --park-after: the job ends, the VMs are deallocated.
async fn park_after(w: &World) {
    let parked = w
        .ok(&[
            "run",
            "stepsdemo.hcl",
            "--park-after",
            "--",
            "echo last job",
        ])
        .await;
    for i in 0..4 {
        assert!(
            w.first_request(
                "POST",
                &format!("/virtualMachines/stepsdemo-train-{i}/deallocate")
            )
            .is_some(),
            "stepsdemo-train-{i} was deallocated:\n{parked}"
        );
        assert_eq!(
            w.resource(&format!("cluster.train[{i}].vm"))["power_state"],
            "deallocated",
            "{parked}"
        );
    }
}

/// `dsinfra ARGS` started in the background and sent SIGINT once every node of the 4 printed
/// `started` on stderr: how it exited (within 10 s of the signal) and its stderr.
async fn interrupted(w: &World, args: &[&str]) -> (i32, String) {
    use std::io::{BufRead as _, BufReader, Read as _};
    let mut cmd = w.command(args);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("dsinfra starts");
    tokio::task::spawn_blocking(move || {
        let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
        let mut seen = String::new();
        while seen.matches(": started").count() < 4 {
            let before = seen.len();
            stderr.read_line(&mut seen).expect("readable");
            assert!(
                seen.len() > before,
                "ended before every node started: {seen}"
            );
        }
        let signalled = std::time::Instant::now();
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        stderr.read_to_string(&mut seen).expect("readable");
        let code = child.wait().expect("waits").code().expect("exited");
        assert!(
            signalled.elapsed() < Duration::from_secs(10),
            "the job was not stopped: {seen}"
        );
        (code, seen)
    })
    .await
    .expect("joined")
}
