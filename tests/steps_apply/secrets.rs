//! Secrets reaching steps (SAS and account key as 0600 files, never in argv, state, output or
//! logs) and result files coming back.

use super::*;

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
