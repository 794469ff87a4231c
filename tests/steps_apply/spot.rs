//! Issue 34: spot clusters whose runs survive an eviction. A 4-node spot cluster of sshd hosts
//! runs a job that counts its own steps and checkpoints them every half second to a directory
//! every node shares (`--checkpoint-dir`, as a file share would be); one node is evicted in the
//! middle, through the emulator's eviction route: its Preempt event appears in the Scheduled
//! Events of the IMDS stand-in, the nodes' watchers see it, the job is stopped everywhere, the
//! emulator carries the eviction out (the node's host powers off, its processes with it), and
//! `run --recover` brings the node back, re-runs the steps it needs (its per-boot step, not the
//! others' nor its once step), and starts the job again with `DSINFRA_RESTART_COUNT=1`: it
//! resumes from its checkpoint and finishes, exit 0, one restart.

use super::*;

/// Steps a node's job counts to; a step takes half a second.
const STEPS: u32 = 12;

/// The job: resume from this rank's checkpoint, count to [`STEPS`], checkpoint each step.
const JOB: &str = "ckpt=$DSINFRA_CHECKPOINT_DIR/rank$NODE_RANK; \
    mkdir -p $DSINFRA_CHECKPOINT_DIR; step=$(cat $ckpt 2>/dev/null || echo 0); \
    echo restart=$DSINFRA_RESTART_COUNT rank=$NODE_RANK from=$step; \
    while [ $step -lt 12 ]; do sleep 0.5; step=$((step+1)); echo $step > $ckpt.tmp && mv $ckpt.tmp $ckpt; done; \
    echo rank=$NODE_RANK done at $step";

/// A 4-node spot cluster of small sizes with a once step and a per-boot step that write where
/// they ran.
fn write_spot_cluster(w: &World, eviction: &str) {
    let farm = w.farm.as_ref().expect("a farm");
    let out = w.out().display().to_string();
    let body = format!(
        r#"cluster "train" {{
  size           = "Standard_D2s_v3"
  count          = 4
  image          = "ubuntu-22.04"
  admin_username = "{user}"
  ssh_key        = "{key}"
  priority       = "spot"
  eviction       = "{eviction}"
  step "script" {{
    name   = "setup"
    script = "echo $DSINFRA_NODE >> {out}/setup-$DSINFRA_RANK"
  }}
  step "script" {{
    name   = "mount"
    run    = "per_boot"
    script = "echo $DSINFRA_NODE >> {out}/mount-$DSINFRA_RANK"
  }}
}}
"#,
        user = farm.user(),
        key = farm.client_public_key(),
    );
    w.write_hcl("stepsdemo", &body);
}

/// Lines in `out/<name>` (0 when the file does not exist).
fn lines_in(w: &World, name: &str) -> usize {
    std::fs::read_to_string(w.out().join(name)).map_or(0, |t| t.lines().count())
}

/// Asks the emulator to evict `vm` (a resource id) with `notice` seconds of notice.
async fn evict(w: &World, vm: &str, notice: u64) {
    let answer = reqwest::Client::new()
        .post(format!("{}/_emulator/evictions", w.handle.endpoint()))
        .json(&serde_json::json!({"resourceId": vm, "noticeSeconds": notice}))
        .send()
        .await
        .expect("the emulator answers");
    assert_eq!(answer.status().as_u16(), 202, "{:?}", answer.text().await);
}

/// A checkpoint directory every node shares, writable by the login user, as a file share
/// mounted for it is.
fn shared_checkpoint_dir(w: &World) -> PathBuf {
    let ckpt = w.out().join("ckpt");
    std::fs::create_dir_all(&ckpt).expect("checkpoint dir");
    std::fs::set_permissions(&ckpt, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("checkpoint dir mode");
    ckpt
}

/// Waits until rank `rank`'s job has checkpointed step 3 or later in `ckpt`: at most a minute,
/// and failing with the command's output if `running` (the run or `logs -f`) ends first.
async fn until_checkpointed(
    ckpt: &Path,
    rank: usize,
    running: &mut tokio::task::JoinHandle<Output>,
) {
    let file = ckpt.join(format!("rank{rank}"));
    let deadline = std::time::Instant::now() + Duration::from_mins(1);
    while std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .is_none_or(|step| step < 3)
    {
        if running.is_finished() {
            let out = running.await.expect("the command finishes");
            panic!(
                "the command ended before rank {rank} checkpointed:\n{}",
                describe(&out)
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job never checkpointed on rank {rank}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs the job with `--recover` in the background, evicts node 2 once its job has
/// checkpointed a few steps, and returns the run's output.
async fn run_and_evict_node_2(w: &World, env: &[(&str, &Path)]) -> (Output, String) {
    let hook =
        "echo $DSINFRA_NODE $DSINFRA_PREEMPT_NOT_BEFORE >> $DSINFRA_CHECKPOINT_DIR/preempted";
    let ckpt = shared_checkpoint_dir(w);
    let ckpt_arg = ckpt.display().to_string();
    let mut cmd = w.command(&[
        "run",
        "stepsdemo.hcl",
        "cluster.train",
        "--recover",
        "--max-restarts",
        "2",
        "--checkpoint-dir",
        &ckpt_arg,
        "--on-preempt",
        hook,
        "--",
        JOB,
    ]);
    cmd.env("DSINFRA_PREEMPT_POLL_SECS", "1")
        .env("DSINFRA_RECOVER_BACKOFF_SECS", "1");
    for (name, value) in env {
        cmd.env(name, value);
    }
    let mut running = tokio::spawn(output(cmd));
    until_checkpointed(&ckpt, 2, &mut running).await;
    let vm = w.resource("cluster.train[2].vm")["id"]
        .as_str()
        .expect("the VM's id")
        .to_owned();
    evict(w, &vm, 2).await;
    let out = running.await.expect("the run finishes");
    let text = describe(&out);
    (out, text)
}

/// What every recovered run shows: exit 0 after one restart, every rank done, node 2 resumed
/// from its checkpoint (not from 0), stdout only the job's, and the steps re-run only where
/// needed: the per-boot step on node 2 only, and its once step only when node 2 is a new VM
/// (`new_vm`).
fn assert_recovered(w: &World, out: &Output, text: &str, new_vm: bool) {
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for rank in 0..4 {
        assert!(
            stdout.contains(&format!("rank={rank} done at {STEPS}")),
            "rank {rank} finished:\n{text}"
        );
    }
    let resumed = stdout
        .lines()
        .find_map(|l| {
            l.split_once("restart=1 rank=2 from=")
                .and_then(|(_, n)| n.trim().parse::<u32>().ok())
        })
        .unwrap_or_else(|| panic!("node 2 started again with DSINFRA_RESTART_COUNT=1:\n{text}"));
    assert!(
        (3..STEPS).contains(&resumed),
        "node 2 resumed from its checkpoint ({resumed}):\n{text}"
    );
    assert!(
        text.contains("Azure announced the eviction of this spot VM"),
        "the watcher's notice:\n{text}"
    );
    assert!(text.contains(", 1 restart"), "{text}");
    // The --on-preempt hook ran on the evicted node, in the job's environment, before the stop.
    let hooked = std::fs::read_to_string(w.out().join("ckpt/preempted")).unwrap_or_default();
    assert_eq!(hooked.lines().count(), 1, "{hooked}\n{text}");
    assert!(
        hooked.starts_with("cluster.train[2] ") && hooked.trim_end().ends_with(" GMT"),
        "{hooked}"
    );
    assert!(
        stdout.lines().all(|l| l.starts_with("cluster.train[")),
        "stdout holds the job's lines only:\n{stdout}"
    );
    // The restarted node ran its per-boot step again; the others did not, and no once step ran
    // again anywhere.
    assert_eq!(lines_in(w, "mount-2"), 2, "{text}");
    for rank in [0, 1, 3] {
        assert_eq!(
            lines_in(w, &format!("mount-{rank}")),
            1,
            "rank {rank}\n{text}"
        );
    }
    for rank in [0, 1, 3] {
        assert_eq!(
            lines_in(w, &format!("setup-{rank}")),
            1,
            "rank {rank}\n{text}"
        );
    }
    assert_eq!(lines_in(w, "setup-2"), 1 + usize::from(new_vm), "{text}");
}

/// Deallocated on eviction, and the first start after it refused for capacity (Azure's
/// AllocationFailed): recovery waits, tries again and succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deallocated_spot_node_is_started_again_after_a_capacity_refusal_and_the_job_resumes() {
    let Some((farm, w)) = World::with_farm().await else {
        return;
    };
    write_spot_cluster(&w, "deallocate");
    w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    w.handle.add_fault(FaultRule {
        method: Some("POST".into()),
        path: Some("*/virtualMachines/stepsdemo-train-2/start".into()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::FailOperation {
            status: 200,
            code: "AllocationFailed".into(),
            message: "Allocation failed. We do not have sufficient capacity for the requested \
                      VM size in this region."
                .into(),
        },
    });
    let (out, text) = run_and_evict_node_2(&w, &[]).await;
    assert_recovered(&w, &out, &text, false);
    assert!(
        text.contains("Azure has no capacity for the evicted nodes now (AllocationFailed)"),
        "{text}"
    );
    assert_eq!(
        farm.evictions(),
        vec![("stepsdemo-train-2".to_owned(), false)]
    );
    let runs = w.ok(&["runs", "stepsdemo.hcl"]).await;
    assert!(runs.contains("succeeded, 1 restart"), "{runs}");
    // An eviction outside any run: `status` says what happened and what brings the node back.
    let vm1 = w.resource("cluster.train[1].vm")["id"]
        .as_str()
        .expect("the VM's id")
        .to_owned();
    evict(&w, &vm1, 0).await;
    let status = w.ok(&["status", "stepsdemo.hcl"]).await;
    assert!(
        status.contains("cluster.train[1].vm: deallocated by Azure (a spot eviction)"),
        "{status}"
    );
}

/// Deleted on eviction: recovery creates the VM again (a new host) and it gets its steps; the
/// first create is refused for capacity inside its operation (ARM's
/// OverconstrainedAllocationRequest, a placement group's), and the recovery tries again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_spot_node_is_created_again_and_the_job_resumes() {
    let Some((farm, w)) = World::with_farm().await else {
        return;
    };
    write_spot_cluster(&w, "delete");
    farm.set_marker_root(&w.path("markers"));
    w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    w.handle.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: Some("*/virtualMachines/stepsdemo-train-2".into()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::FailOperation {
            status: 200,
            code: "OverconstrainedAllocationRequest".into(),
            message: "Allocation failed. VM(s) with the following constraints cannot be \
                      allocated, because the condition is too restrictive. Please remove some \
                      constraints and try again."
                .into(),
        },
    });
    let (out, text) = run_and_evict_node_2(&w, &[]).await;
    assert!(
        text.contains(
            "Azure has no capacity for the evicted nodes now (OverconstrainedAllocationRequest)"
        ),
        "{text}"
    );
    assert!(text.contains("cluster.train[2]: created again"), "{text}");
    assert_recovered(&w, &out, &text, true);
    assert_eq!(
        farm.evictions(),
        vec![("stepsdemo-train-2".to_owned(), true)]
    );
    // A new VM: booted twice under the same name.
    assert_eq!(
        farm.started()
            .iter()
            .filter(|n| *n == "stepsdemo-train-2")
            .count(),
        2
    );
}

/// A BeeOND scratch spans every node's local disk: when one node of a spot cluster is evicted
/// (deleted, so it comes back as a new VM with a new host key), the recovery starts BeeOND again
/// from the head across the whole block (the `beeond` step forced), on the stand-in root of
/// tests/steps_apply/aml_beeond.rs, over a mesh the head wrote again for the new key, and the
/// job resumes. The evicted node's run directory records the event it heard. (The stand-in root
/// models nodes reached at their own addresses, not InfiniBand's ib0 ones, so the cluster is of
/// a size without InfiniBand: no availability set, whose members would hear each other's
/// events.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_beeond_scratch_is_rebuilt_across_the_cluster_after_an_eviction() {
    let Some(farm) = NodeFarm::start_addressed() else {
        return;
    };
    let w = World::new(Some(Arc::clone(&farm))).await;
    let out = w.out().display().to_string();
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"cluster "train" {{
  size           = "Standard_D2s_v3"
  count          = 4
  image          = "ubuntu-22.04"
  admin_username = "{user}"
  ssh_key        = "{key}"
  priority       = "spot"
  eviction       = "delete"
  step "ssh_mesh" {{
    nodefile = "{out}/nodefile"
  }}
  step "beeond" {{
    nodefile = "{out}/nodefile"
    mount    = "{out}/scratch"
  }}
}}
"#,
            user = farm.user(),
            key = farm.client_public_key(),
        ),
    );
    farm.set_marker_root(&w.path("markers"));
    let root = super::aml_beeond::stand_in_root(&farm);
    // An evicted node loses its BeeOND mount (the stand-in keeps it per node address, the node
    // of rank N being line N+1 of the nodefile BeeOND was started with).
    let state = root.join("var/lib/stand-ins");
    farm.set_on_evict(move |eviction| {
        let rank: usize = eviction
            .name
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a node's VM name ends in its rank");
        let nodefile = std::fs::read_to_string(state.join("nodefile")).unwrap_or_default();
        if let Some(address) = nodefile.lines().nth(rank) {
            let _ = std::fs::remove_file(state.join("mounted").join(address));
        }
    });
    let mesh = farm.mesh_dir();
    let admin_mesh = farm.admin_mesh_dir();
    let user = PathBuf::from(farm.user());
    let temp = root.join("mnt/resource");
    let env = [
        ("DSINFRA_MESH_DIR", mesh.as_path()),
        ("DSINFRA_MESH_USER", user.as_path()),
        ("DSINFRA_MESH_ADMIN_DIR", admin_mesh.as_path()),
        ("DSINFRA_BEEOND_ROOT", root.as_path()),
        ("DSINFRA_TEMP_DIR", temp.as_path()),
    ];
    w.ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    let starts = |record: &[(f64, String, String, String)]| -> Vec<String> {
        record
            .iter()
            .filter(|(_, _, tool, argv)| tool == "beeond" && argv.starts_with("start "))
            .map(|(_, node, _, _)| node.clone())
            .collect()
    };
    assert_eq!(
        starts(&super::aml_beeond::calls(&root)),
        ["cluster.train[0]"]
    );
    let (run, text) = run_and_evict_node_2(&w, &env).await;
    assert!(run.status.success(), "{text}");
    assert!(
        text.contains("forced across the block: cluster.train/beeond"),
        "{text}"
    );
    assert!(text.contains(", 1 restart"), "{text}");
    let runs = w.path("runs").join("stepsdemo-train-2");
    let heard: Vec<String> = std::fs::read_dir(&runs)
        .expect("the head's runs")
        .flatten()
        .filter_map(|run| std::fs::read_to_string(run.path().join("preemptions")).ok())
        .collect();
    assert_eq!(heard.len(), 1, "{heard:?}\n{text}");
    assert!(
        heard[0].trim_end().ends_with(" GMT stepsdemo-train-2"),
        "{heard:?}"
    );
    // Started again once, from the head, for the whole block.
    assert_eq!(
        starts(&super::aml_beeond::calls(&root)),
        ["cluster.train[0]", "cluster.train[0]"],
        "{text}"
    );
}

/// A detached run started with `--recover` is recovered by `logs -f`, which follows it: the
/// head itself is evicted (its host, the job with it, powers off), `logs -f` sees the stream
/// end, brings the head back, starts the job again detached with `DSINFRA_RESTART_COUNT=1`, and
/// follows on without printing the first attempt's lines again; the job resumes from its
/// checkpoint and the run ends with exit 0 after one restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_run_is_recovered_by_the_client_following_it() {
    let Some((_farm, w)) = World::with_farm().await else {
        return;
    };
    write_spot_cluster(&w, "deallocate");
    w.ok(&["apply", "stepsdemo.hcl", "--auto-approve"]).await;
    let ckpt = shared_checkpoint_dir(&w);
    let ckpt_arg = ckpt.display().to_string();
    // The watcher's poll is chosen when the job starts.
    let poll = PathBuf::from("1");
    let started = w
        .ok_env(
            &[
                "run",
                "stepsdemo.hcl",
                "--detach",
                "--recover",
                "--checkpoint-dir",
                &ckpt_arg,
                "--",
                JOB,
            ],
            &[("DSINFRA_PREEMPT_POLL_SECS", poll.as_path())],
        )
        .await;
    let id = started
        .split_whitespace()
        .skip_while(|w| *w != "run")
        .nth(1)
        .expect("the run's id")
        .to_owned();
    assert!(
        started.contains("which also brings evicted spot nodes back"),
        "{started}"
    );
    let mut cmd = w.command(&["logs", "stepsdemo.hcl", &id, "-f"]);
    cmd.env("DSINFRA_PREEMPT_POLL_SECS", "1")
        .env("DSINFRA_RECOVER_BACKOFF_SECS", "1");
    let mut following = tokio::spawn(output(cmd));
    until_checkpointed(&ckpt, 0, &mut following).await;
    let head = w.resource("cluster.train[0].vm")["id"]
        .as_str()
        .expect("the head's id")
        .to_owned();
    evict(&w, &head, 2).await;
    let out = following.await.expect("logs -f ends");
    let text = describe(&out);
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("restart=0 rank=0 from=0").count(),
        1,
        "the first attempt's lines once:\n{text}"
    );
    let resumed = stdout
        .lines()
        .find_map(|l| {
            l.split_once("restart=1 rank=0 from=")
                .and_then(|(_, n)| n.trim().parse::<u32>().ok())
        })
        .unwrap_or_else(|| panic!("the job started again:\n{text}"));
    assert!((3..STEPS).contains(&resumed), "{resumed}\n{text}");
    assert!(
        stdout.contains(&format!("rank=0 done at {STEPS}")),
        "{text}"
    );
    assert!(
        stdout
            .lines()
            .all(|l| l.starts_with("restart=") || l.starts_with("rank=")),
        "stdout holds the job's lines only:\n{stdout}"
    );
    assert!(
        text.contains("cluster.train[0]: Azure announced the eviction of this spot VM"),
        "the head's watcher wrote its notice to the log:\n{text}"
    );
    assert!(text.contains("succeeded, exit 0"), "{text}");
    let runs = w.ok(&["runs", "stepsdemo.hcl"]).await;
    assert!(runs.contains("succeeded, 1 restart"), "{runs}");
}

/// A low-priority `aml_cluster` loses a node without a notice dsinfra can read: Azure Machine
/// Learning takes it back (the emulator's preemption route; its host powers off, its BeeOND
/// mount with it) and allocates a new node in its place. `run --recover` sees the node's session
/// lost, stops the job on the others, finds the node preempted in `listNodes`, waits for the new
/// node, runs the block's steps (the mesh and BeeOND on the new node, BeeOND started again from
/// the head across the block) and starts the job again: every rank resumes from its checkpoint.
#[allow(clippy::too_many_lines)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_low_priority_aml_node_is_replaced_and_the_job_resumes() {
    let Some(farm) = AmlNodeFarm::start() else {
        return;
    };
    let w = World::with_aml_farm(Arc::clone(&farm)).await;
    let out = w.out().display().to_string();
    w.write_hcl(
        "stepsdemo",
        &format!(
            r#"aml_workspace "ws" {{}}
aml_cluster "scratch" {{
  workspace      = aml_workspace.ws
  size           = "Standard_D2_v2"
  count          = 4
  priority       = "low_priority"
  admin_username = "{user}"
  ssh_key        = "{key}"
  step "ssh_mesh" {{
    nodefile = "{out}/nodefile"
  }}
  step "beeond" {{
    nodefile = "{out}/nodefile"
    mount    = "{out}/scratch"
  }}
  step "script" {{
    name   = "setup"
    script = "echo $DSINFRA_NODE >> {out}/setup"
  }}
}}
"#,
            user = farm.user(),
            key = farm.client_public_key(),
        ),
    );
    let root = super::aml_beeond::stand_in_root(&farm);
    let mesh = farm.mesh_dir();
    let admin_mesh = farm.admin_mesh_dir();
    let user = PathBuf::from(farm.user());
    let temp = root.join("mnt/resource");
    let env = [
        ("DSINFRA_MESH_DIR", mesh.as_path()),
        ("DSINFRA_MESH_USER", user.as_path()),
        ("DSINFRA_MESH_ADMIN_DIR", admin_mesh.as_path()),
        ("DSINFRA_BEEOND_ROOT", root.as_path()),
        ("DSINFRA_TEMP_DIR", temp.as_path()),
    ];
    w.ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert_eq!(lines_in(&w, "setup"), 4);
    let ckpt = shared_checkpoint_dir(&w);
    let ckpt_arg = ckpt.display().to_string();
    let mut cmd = w.command(&[
        "run",
        "stepsdemo.hcl",
        "aml_cluster.scratch",
        "--recover",
        "--checkpoint-dir",
        &ckpt_arg,
        "--",
        JOB,
    ]);
    for (name, value) in &env {
        cmd.env(name, value);
    }
    let mut running = tokio::spawn(output(cmd));
    until_checkpointed(&ckpt, 2, &mut running).await;
    let mut booted = farm.booted();
    booted.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    let taken = booted[2].clone();
    let answer = reqwest::Client::new()
        .post(format!("{}/_emulator/aml-preemptions", w.handle.endpoint()))
        .json(&serde_json::json!({"computeId": taken.compute_id, "nodeId": taken.node_id}))
        .send()
        .await
        .expect("the emulator answers");
    assert_eq!(answer.status().as_u16(), 204, "{:?}", answer.text().await);
    // Azure takes the node: its host powers off, and its part of the BeeOND scratch goes.
    assert!(farm.power_off(&taken.node_id));
    let address = common::aml_nodes::loopback_for(&taken.private_ip).to_string();
    let _ = std::fs::remove_file(root.join("var/lib/stand-ins/mounted").join(&address));

    let out = running.await.expect("the run finishes");
    let text = describe(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(
            "aml_cluster.scratch[2] preempted (Azure Machine Learning took the node back)"
        ),
        "{text}"
    );
    assert!(
        text.contains("forced across the block: aml_cluster.scratch/beeond"),
        "{text}"
    );
    assert!(text.contains(", 1 restart"), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for rank in 0..4 {
        assert!(
            stdout.contains(&format!("rank={rank} done at {STEPS}")),
            "rank {rank} finished:\n{text}"
        );
        let resumed = stdout
            .lines()
            .find_map(|l| {
                l.split_once(&format!("restart=1 rank={rank} from="))
                    .and_then(|(_, n)| n.trim().parse::<u32>().ok())
            })
            .unwrap_or_else(|| panic!("rank {rank} started again:\n{text}"));
        assert!(
            resumed >= 3,
            "rank {rank} resumed from its checkpoint:\n{text}"
        );
    }
    // A fifth node booted in place of the preempted one; the steps ran on it (the once step on
    // it alone), and BeeOND was started again from the head with the new node in the nodefile.
    let booted = farm.booted();
    assert_eq!(booted.len(), 5, "{text}");
    let new = &booted[4];
    assert_eq!(lines_in(&w, "setup"), 5, "{text}");
    let starts: Vec<String> = super::aml_beeond::calls(&root)
        .into_iter()
        .filter(|(_, _, tool, argv)| tool == "beeond" && argv.starts_with("start "))
        .map(|(_, node, _, _)| node)
        .collect();
    assert_eq!(
        starts,
        ["aml_cluster.scratch[0]", "aml_cluster.scratch[0]"],
        "{text}"
    );
    let nodefile = w.read("nodefile");
    let new_address = common::aml_nodes::loopback_for(&new.private_ip).to_string();
    assert!(nodefile.lines().any(|l| l == new_address), "{nodefile}");
    assert!(!nodefile.lines().any(|l| l == address), "{nodefile}");
    let runs = w.ok(&["runs", "stepsdemo.hcl"]).await;
    assert!(runs.contains("succeeded, 1 restart"), "{runs}");
}
