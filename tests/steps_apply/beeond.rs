//! BeeOND's stop on the head before park and destroy, with a stand-in `beeond` recording when
//! it ran, and a Ctrl-C while it stops.

use super::*;

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
