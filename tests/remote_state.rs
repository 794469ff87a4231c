//! The remote state backend (`backend "azureblob"`) against the real Azure Storage emulator.
//!
//! tests/azurite.rs checks the storage protocol underneath (leases, conditional writes,
//! snapshots); this file checks what dsinfra builds on it: `state::RemoteBackend` behind the
//! synchronous `Backend` trait, called from every context the CLI and tests use, and the
//! `state pull|push` and `force-unlock` commands through the real binary. Every test starts its
//! own Azurite (tests/common/azurite.rs); under CI a missing Azurite fails the test.

// Other tests share tests/common; not every helper there is used by this file.
#[allow(dead_code)]
mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use common::azurite::{ACCOUNT, Azurite, KEY};
use dsinfra::state::{Backend as _, LockHolder, RemoteBackend, State, StateError};
use dsinfra::storage::{AccountKey, Auth, BlobStore, Permissions, RemoteState, SasSpec, SasToken};

/// The shortest lease Azure allows: the SIGKILL test waits for one to expire.
const LEASE: Duration = Duration::from_secs(15);

const CONTAINER: &str = "tfstate";

fn key() -> AccountKey {
    AccountKey::new(ACCOUNT, KEY).expect("the dev key is valid base64")
}

/// A container SAS with what the backend needs: read, write (leases, snapshots), list, delete.
fn state_sas() -> SasToken {
    SasSpec::container(CONTAINER, Utc::now() + TimeDelta::hours(1))
        .permissions(Permissions::ALL)
        .https_only(false)
        .sign(&key())
        .expect("a valid SAS spec")
}

/// Runs a storage call for the test itself on a thread of its own, so that it works whatever
/// runtime the test body runs in.
fn block<F: Future + Send>(future: F) -> F::Output
where
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime")
                    .block_on(future)
            })
            .join()
            .expect("the storage call does not panic")
    })
}

/// Full rights through the account key, to set up and to check behind the backend's back.
fn admin(azurite: &Azurite, key_name: &str) -> RemoteState {
    let store = BlobStore::new(&azurite.endpoint(), Auth::AccountKey(key())).expect("endpoint");
    RemoteState::new(store, CONTAINER, key_name)
}

/// Starts Azurite with the state container created; `None` only outside CI without Azurite.
fn azurite() -> Option<Azurite> {
    let azurite = Azurite::start()?;
    let admin = BlobStore::new(&azurite.endpoint(), Auth::AccountKey(key())).expect("endpoint");
    block(admin.create_container(CONTAINER)).expect("create the state container");
    Some(azurite)
}

fn remote(azurite: &Azurite, key: &str, sas: &SasToken) -> RemoteState {
    let store = BlobStore::new(&azurite.endpoint(), Auth::sas_token(sas)).expect("endpoint");
    RemoteState::new(store, CONTAINER, key)
}

fn holder(user: &str, command: &str) -> LockHolder {
    LockHolder {
        pid: 4242,
        host: "lab1".to_owned(),
        user: user.to_owned(),
        command: command.to_owned(),
        since: DateTime::parse_from_rfc3339("2026-11-22T05:30:00Z")
            .expect("valid time")
            .with_timezone(&Utc),
    }
}

/// A remote backend driven from a synchronous test: a runtime of the test's own runs its calls,
/// its lease renewal and its release, as the CLI's runtime does for a command.
struct Held {
    runtime: tokio::runtime::Runtime,
    backend: Option<RemoteBackend>,
}

impl Held {
    fn backend(&mut self) -> &mut RemoteBackend {
        self.backend.as_mut().expect("held until unlocked")
    }

    fn save(&mut self, state: &mut State) -> Result<(), StateError> {
        let runtime = self.runtime.handle().clone();
        runtime.block_on(self.backend().save(state))
    }

    /// Release the lease and wait for it, as every command ends.
    fn unlock(mut self) -> Result<(), StateError> {
        let backend = Box::new(self.backend.take().expect("held until unlocked"));
        self.runtime.block_on(backend.unlock())
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.backend.fmt(f)
    }
}

/// Opens the backend on `remote` as [`holder`]`(user, command)` would, with the [`LEASE`].
fn lock_as(remote: &RemoteState, user: &str, command: &str) -> Result<Held, StateError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let backend = runtime.block_on(RemoteBackend::open_with(
        remote.clone(),
        holder(user, command),
        LEASE,
    ))?;
    Ok(Held {
        runtime,
        backend: Some(backend),
    })
}

/// The whole life of a backend on the caller's runtime: lock, load nothing, save twice, load
/// what was saved, see the lock refused to a second holder, and free once unlocked.
async fn exercise(remote: &RemoteState) {
    let open = |user: &str, command: &str| {
        RemoteBackend::open_with(remote.clone(), holder(user, command), LEASE)
    };
    let mut backend = open("ana", "dsinfra apply exp.hcl")
        .await
        .expect("the lock is free");
    assert_eq!(backend.location(), remote.url());
    assert_eq!(backend.load().await.expect("nothing yet"), None);
    let mut state = State::new("exp");
    backend.save(&mut state).await.expect("first save");
    state
        .outputs
        .insert("ip".to_owned(), serde_json::Value::from("10.0.0.4"));
    backend.save(&mut state).await.expect("second save");
    assert_eq!(state.serial, 2);
    assert_eq!(backend.load().await.expect("loads"), Some(state.clone()));

    let refused = open("bo", "dsinfra plan").await.expect_err("held by ana");
    assert!(
        matches!(refused, StateError::RemoteLocked { .. }),
        "{refused}"
    );
    Box::new(backend).unlock().await.expect("released");
    let again = open("bo", "dsinfra plan")
        .await
        .expect("free once unlocked");
    Box::new(again).unlock().await.expect("released");
}

/// Issue 31: the backend is async, on the caller's runtime (no bridge, no runtime of its own).
#[tokio::test(flavor = "multi_thread")]
async fn works_on_the_callers_multi_thread_runtime() {
    let Some(azurite) = azurite() else {
        return;
    };
    exercise(&remote(&azurite, "multi.json", &state_sas())).await;
}

#[tokio::test(flavor = "current_thread")]
async fn works_on_a_current_thread_runtime() {
    let Some(azurite) = azurite() else {
        return;
    };
    exercise(&remote(&azurite, "current.json", &state_sas())).await;
}

/// Issue 31: a backend dropped without `unlock` (a command that failed with its state open)
/// releases its lease in the background, and `settle_releases`, which the CLI awaits before its
/// runtime ends, waits for that: the next holder finds the state free at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_backend_is_released_once_the_releases_settle() {
    let Some(azurite) = azurite() else {
        return;
    };
    let remote = remote(&azurite, "dropped.json", &state_sas());
    let open =
        |user: &str| RemoteBackend::open_with(remote.clone(), holder(user, "dsinfra apply"), LEASE);
    let backend = open("ana").await.expect("free");
    drop(backend);
    dsinfra::storage::settle_releases(Duration::from_secs(10)).await;
    let again = open("bo")
        .await
        .expect("released in the background, waited for");
    Box::new(again).unlock().await.expect("released");
}

#[test]
fn a_second_holder_is_refused_with_the_first_ones_details() {
    let Some(azurite) = azurite() else {
        return;
    };
    let remote = remote(&azurite, "exp/cosmoflow.dsinfra.json", &state_sas());
    let first = lock_as(&remote, "ana", "dsinfra apply exp.hcl").expect("free");
    let err = lock_as(&remote, "bo", "dsinfra plan").expect_err("held");
    assert_eq!(
        err.to_string(),
        format!(
            "the state {}/tfstate/exp%2Fcosmoflow.dsinfra.json is locked by another dsinfra process: pid 4242, user ana on host lab1, running `dsinfra apply exp.hcl` since 2026-11-22T05:30:00Z; wait for it to finish (the lock is a 15-second lease that expires by itself if that process dies), or run `dsinfra force-unlock` if you are sure it is not running",
            azurite.endpoint()
        )
    );
    first.unlock().expect("released");
}

#[test]
fn a_lost_lease_refuses_the_write_and_keeps_the_newer_state() {
    let Some(azurite) = azurite() else {
        return;
    };
    let remote = remote(&azurite, "lost.json", &state_sas());
    let mut backend = lock_as(&remote, "ana", "dsinfra apply").expect("free");
    let mut state = State::new("exp");
    backend.save(&mut state).expect("saved");

    let broken = block(remote.force_unlock()).expect("force-unlock");
    assert_eq!(broken.map(|h| h.user), Some("ana".to_owned()));

    let before = block(remote.read()).expect("read").expect("blob");
    let err = backend.save(&mut state).expect_err("the lease is gone");
    assert_eq!(state.serial, 1, "a failed save leaves the serial alone");
    let text = err.to_string();
    let prefix = format!("the lock on the state {} was lost (", remote.url());
    assert!(text.starts_with(&prefix), "{text}");
    assert!(
        text.ends_with(
            "); the state was not written, so nothing newer was overwritten: run the command again to take the lock anew"
        ),
        "{text}"
    );
    assert!(text.contains("LeaseNotPresentWithBlobOperation"), "{text}");
    let after = block(remote.read()).expect("read").expect("blob");
    assert_eq!(after, before, "nothing was written");
    backend.unlock().expect("released");
}

#[test]
fn saves_round_trip_byte_for_byte_and_keep_the_previous_version() {
    let Some(azurite) = azurite() else {
        return;
    };
    let remote = remote(&azurite, "round.json", &state_sas());
    let mut backend = lock_as(&remote, "ana", "dsinfra apply").expect("free");
    let mut state = State::new("exp");
    backend.save(&mut state).expect("first");
    let first = state.to_json();
    state
        .outputs
        .insert("ip".to_owned(), serde_json::Value::from("10.0.0.4"));
    backend.save(&mut state).expect("second");
    backend.unlock().expect("released");

    let admin = admin(&azurite, "round.json");
    let current = block(admin.read()).expect("read").expect("blob");
    assert_eq!(current.content, Some(state.to_json().into_bytes()));
    let versions = block(admin.versions()).expect("versions");
    let last = versions.last().expect("the first save was kept");
    assert_eq!(
        block(admin.read_version(last)).expect("read the snapshot"),
        first.into_bytes()
    );
    assert_eq!(block(admin.holder()).expect("holder"), None);
}

/// Environment variables that turn `remote_holder_child` into the helper process.
const CHILD_ENDPOINT: &str = "DSINFRA_TEST_REMOTE_CHILD_ENDPOINT";
const CHILD_SAS: &str = "DSINFRA_TEST_REMOTE_CHILD_SAS";

/// The helper process of `a_sigkilled_holder_leaves_a_lock_that_expires`: it takes the lock
/// through `RemoteBackend`, says so, and waits to be killed.
#[test]
#[ignore = "helper process run by a_sigkilled_holder_leaves_a_lock_that_expires"]
fn remote_holder_child() {
    let (Ok(endpoint), Ok(sas)) = (std::env::var(CHILD_ENDPOINT), std::env::var(CHILD_SAS)) else {
        eprintln!(
            "remote_holder_child is a helper of a_sigkilled_holder_leaves_a_lock_that_expires"
        );
        return;
    };
    let store = BlobStore::new(&endpoint, Auth::sas(&sas)).expect("endpoint");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let backend = runtime
        .block_on(RemoteBackend::open_with(
            RemoteState::new(store, CONTAINER, "killed.json"),
            LockHolder::current("dsinfra apply (child)"),
            LEASE,
        ))
        .expect("the child takes the free lock");
    println!("LOCKED {}", backend.lock_holder().pid);
    std::thread::sleep(Duration::from_mins(5));
    drop(backend);
}

#[test]
fn a_sigkilled_holder_leaves_a_lock_that_expires() {
    let Some(azurite) = azurite() else {
        return;
    };
    let sas = state_sas();
    let remote = remote(&azurite, "killed.json", &sas);
    let mut child = Command::new(std::env::current_exe().expect("the test binary path"))
        .args(["--ignored", "--exact", "remote_holder_child", "--nocapture"])
        .env(CHILD_ENDPOINT, azurite.endpoint())
        .env(CHILD_SAS, sas.expose_query())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the test binary can be re-run");
    let stdout = child.stdout.take().expect("stdout is piped");
    let child_pid = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            line.split("LOCKED ")
                .nth(1)
                .and_then(|pid| pid.trim().parse::<u32>().ok())
        })
        .expect("the child took the lock before exiting");
    assert_eq!(child_pid, child.id());

    // std's Child::kill is SIGKILL on Unix: no destructor, no release.
    child.kill().expect("kill the child");
    let killed_at = Instant::now();
    child.wait().expect("reap the child");

    let refused = lock_as(&remote, "ana", "dsinfra plan")
        .expect_err("the dead holder's lease is still there at first");
    let StateError::RemoteLocked {
        holder: Some(dead), ..
    } = &refused
    else {
        panic!("expected RemoteLocked with a holder, got {refused}")
    };
    assert_eq!(dead.pid, child_pid);
    assert_eq!(dead.command, "dsinfra apply (child)");

    let backend = loop {
        match lock_as(&remote, "ana", "dsinfra plan") {
            Ok(backend) => break backend,
            Err(StateError::RemoteLocked { .. })
                if killed_at.elapsed() < LEASE + Duration::from_secs(5) =>
            {
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("the lock did not become free after the lease: {e}"),
        }
    };
    let waited = killed_at.elapsed();
    // The child renewed every 5 s, so the lease ran out 10 to 15 s after the kill.
    assert!(
        waited + Duration::from_secs(1) >= LEASE * 2 / 3,
        "{waited:?}"
    );
    backend.unlock().expect("released");
}

// ---- The commands, through the real binary -------------------------------------------------

/// The environment variable the test manifests name in `sas_env`.
const SAS_ENV: &str = "DSINFRA_TEST_STATE_SAS";

/// A manifest in a temporary directory whose backend is `key` on this Azurite.
fn manifest(azurite: &Azurite, key: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("exp.hcl");
    std::fs::write(
        &path,
        format!(
            "azure {{ location = \"eastus\" }}\n\nbackend \"azureblob\" {{\n  account   = \"{ACCOUNT}\"\n  container = \"{CONTAINER}\"\n  key       = \"{key}\"\n  endpoint  = \"{}\"\n  sas_env   = \"{SAS_ENV}\"\n}}\n",
            azurite.endpoint()
        ),
    )
    .expect("written");
    (dir, path)
}

/// Azurite (stopped when dropped), a state SAS, a manifest in a temporary directory, its path,
/// and the remote state its backend names: what the command tests start from.
type Setup = (
    Azurite,
    SasToken,
    tempfile::TempDir,
    std::path::PathBuf,
    RemoteState,
);

/// Starts Azurite and lets `write` put a manifest whose backend is `key` on it; `None` only
/// outside CI without Azurite.
fn setup(
    key: &str,
    write: fn(&Azurite, &str) -> (tempfile::TempDir, std::path::PathBuf),
) -> Option<Setup> {
    let azurite = azurite()?;
    let sas = state_sas();
    let (dir, exp) = write(&azurite, key);
    let remote = remote(&azurite, key, &sas);
    Some((azurite, sas, dir, exp, remote))
}

/// What a run of the binary printed, and how it ended.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn of(output: &std::process::Output) -> Self {
        Self {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// The binary with `args`, without colour and with an empty stdin.
fn binary(args: &[&str]) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("dsinfra")
        .expect("the dsinfra binary is built by cargo test");
    cmd.env("NO_COLOR", "1").args(args).write_stdin("");
    cmd
}

fn dsinfra(sas: &SasToken, args: &[&str]) -> Run {
    Run::of(
        &binary(args)
            .env(SAS_ENV, sas.expose_query())
            .output()
            .expect("dsinfra runs"),
    )
}

/// `dsinfra apply EXP --auto-approve --endpoint ARM`, to the end.
fn apply(sas: &SasToken, exp: &std::path::Path, arm: &Arm) -> Run {
    dsinfra(
        sas,
        &[
            "apply",
            path_str(exp),
            "--auto-approve",
            "--endpoint",
            &arm.endpoint(),
        ],
    )
}

fn path_str(path: &std::path::Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn state_pull_prints_the_saved_state_byte_for_byte() {
    let Some((_azurite, sas, _dir, exp, remote)) = setup("pulled.json", manifest) else {
        return;
    };
    let mut backend = lock_as(&remote, "ana", "dsinfra apply").expect("free");
    let mut state = State::new("exp");
    state
        .outputs
        .insert("ip".to_owned(), serde_json::Value::from("10.0.0.4"));
    backend.save(&mut state).expect("saved");

    // Pull does not lock: it works while an apply holds the state.
    let pulled = dsinfra(&sas, &["state", "pull", path_str(&exp)]);
    assert_eq!((pulled.code, pulled.stderr.as_str()), (Some(0), ""));
    assert_eq!(pulled.stdout, state.to_json());
    backend.unlock().expect("released");
}

#[test]
fn state_push_refuses_another_lineage_or_a_held_lock_and_forces_when_told() {
    let Some((_azurite, sas, dir, exp, remote)) = setup("pushed.json", manifest) else {
        return;
    };
    let url = remote.url();

    // The first push creates the remote state.
    let ours = State::new("exp");
    let ours_file = dir.path().join("ours.json");
    std::fs::write(&ours_file, ours.to_json()).expect("written");
    let first = dsinfra(
        &sas,
        &["state", "push", path_str(&exp), path_str(&ours_file)],
    );
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(
        first.stderr,
        format!("pushed {} to {url} (serial 1)\n", ours_file.display())
    );

    let theirs = State::new("exp");
    let theirs_file = dir.path().join("theirs.json");
    std::fs::write(&theirs_file, theirs.to_json()).expect("written");
    let refused = dsinfra(
        &sas,
        &["state", "push", path_str(&exp), path_str(&theirs_file)],
    );
    assert_eq!(refused.code, Some(1));
    assert_eq!(
        refused.stderr,
        format!(
            "error: refusing to push {} to {url}: it has lineage {} but the backend's state has lineage {}: they are the histories of different experiments; use --force to replace it anyway (the replaced version is kept)\n",
            theirs_file.display(),
            theirs.lineage,
            ours.lineage
        )
    );

    // While another dsinfra holds the lock, a push is refused with who holds it.
    let held = lock_as(&remote, "ana", "dsinfra apply exp.hcl").expect("free");
    let locked = dsinfra(
        &sas,
        &[
            "state",
            "push",
            path_str(&exp),
            path_str(&theirs_file),
            "--force",
        ],
    );
    assert_eq!(locked.code, Some(1));
    assert_eq!(
        locked.stderr,
        format!(
            "error: the state {url} is locked by another dsinfra process: pid 4242, user ana on host lab1, running `dsinfra apply exp.hcl` since 2026-11-22T05:30:00Z; wait for it to finish (the lock is a 60-second lease that expires by itself if that process dies), or run `dsinfra force-unlock` if you are sure it is not running\n"
        )
    );
    held.unlock().expect("released");

    let forced = dsinfra(
        &sas,
        &[
            "state",
            "push",
            path_str(&exp),
            path_str(&theirs_file),
            "--force",
        ],
    );
    assert_eq!(forced.code, Some(0), "{}", forced.stderr);
    let pulled = dsinfra(&sas, &["state", "pull", path_str(&exp)]);
    let now = State::from_json(&pulled.stdout, std::path::Path::new("pulled")).expect("a state");
    assert_eq!((now.lineage, now.serial), (theirs.lineage, 2));
}

#[test]
fn force_unlock_asks_or_needs_yes_and_breaks_the_lease() {
    let Some((_azurite, sas, _dir, exp, remote)) = setup("stuck.json", manifest) else {
        return;
    };
    let url = remote.url();

    let free = dsinfra(&sas, &["force-unlock", path_str(&exp), "--yes"]);
    assert_eq!(free.code, Some(0));
    assert_eq!(
        free.stderr,
        format!("the state {url} is not locked: nothing to do\n")
    );

    let mut held = lock_as(&remote, "ana", "dsinfra apply exp.hcl").expect("free");
    let who = "ana@lab1 (pid 4242, `dsinfra apply exp.hcl`, since 2026-11-22T05:30:00Z)";
    let no_tty = dsinfra(&sas, &["force-unlock", path_str(&exp)]);
    assert_eq!(no_tty.code, Some(1));
    assert_eq!(
        no_tty.stderr,
        format!(
            "error: force-unlock needs confirmation, but there is no terminal to ask on: the state {url} is locked by {who}; if that process is not running, run again with --yes\n"
        )
    );
    assert!(block(remote.holder()).expect("holder").is_some());

    let broken = dsinfra(&sas, &["force-unlock", path_str(&exp), "--yes"]);
    assert_eq!(broken.code, Some(0), "{}", broken.stderr);
    assert_eq!(
        broken.stderr,
        format!("broke the lock on {url}, held by {who}\n")
    );
    let mut state = State::new("exp");
    let lost = held.save(&mut state).expect_err("the lease was broken");
    assert!(matches!(lost, StateError::RemoteLockLost { .. }), "{lost}");
    held.unlock().expect("released");
}

#[test]
fn the_sas_never_appears_in_output_errors_or_debug() {
    let Some((_azurite, sas, dir, exp, remote)) = setup("secret.json", manifest) else {
        return;
    };
    let mut texts = Vec::new();

    let mut backend = lock_as(&remote, "ana", "dsinfra apply").expect("free");
    let mut state = State::new("exp");
    backend.save(&mut state).expect("saved");
    texts.push(format!("{backend:?} {remote:?}"));
    let refused = lock_as(&remote, "bo", "dsinfra plan").expect_err("held");
    texts.push(format!("{refused} {refused:?}"));
    let other = State::new("exp");
    let other_file = dir.path().join("other.json");
    std::fs::write(&other_file, other.to_json()).expect("written");
    for args in [
        vec!["state", "pull", path_str(&exp)],
        vec!["state", "push", path_str(&exp), path_str(&other_file)],
        vec!["force-unlock", path_str(&exp)],
    ] {
        let run = dsinfra(&sas, &args);
        texts.push(run.stdout);
        texts.push(run.stderr);
    }
    backend.unlock().expect("released");
    // A SAS refused by the service (expired) and a service that is not there.
    let expired = SasSpec::container(CONTAINER, Utc::now() - TimeDelta::hours(1))
        .permissions(Permissions::ALL)
        .start(Utc::now() - TimeDelta::hours(2))
        .https_only(false)
        .sign(&key())
        .expect("a valid SAS spec");
    let run = dsinfra(&expired, &["state", "pull", path_str(&exp)]);
    assert_eq!(run.code, Some(1));
    assert!(run.stderr.contains("HTTP 403"), "{}", run.stderr);
    texts.push(run.stderr);
    let nowhere = RemoteState::new(
        BlobStore::new("http://127.0.0.1:9/devstoreaccount1", Auth::sas_token(&sas))
            .expect("endpoint"),
        CONTAINER,
        "nowhere.json",
    );
    let err = lock_as(&nowhere, "ana", "dsinfra apply").expect_err("nothing listens on port 9");
    texts.push(format!("{err} {err:?}"));

    assert_eq!(texts.len(), 10);
    for token in [&sas, &expired] {
        let query = token.expose_query();
        let signature = query.rsplit("sig=").next().unwrap_or_default();
        for text in &texts {
            assert!(!text.contains(query), "the SAS leaked into: {text}");
            assert!(!text.contains(signature), "a signature leaked into: {text}");
            assert!(!text.contains("sig="), "a signature leaked into: {text}");
        }
    }
}

// ---- The same commands on a local state (no Azurite needed) --------------------------------

fn dsinfra_local(args: &[&str]) -> Run {
    Run::of(&binary(args).output().expect("dsinfra runs"))
}

#[test]
fn local_state_pull_push_and_force_unlock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = dir.path().join("exp.hcl");
    std::fs::write(&exp, "azure { location = var.where }\n").expect("written");
    let state_path = dir.path().join(".dsinfra/exp/state.json");

    let nothing = dsinfra_local(&["state", "pull", path_str(&exp)]);
    assert_eq!(nothing.code, Some(1));
    assert_eq!(
        nothing.stderr,
        format!(
            "error: there is no state at {} yet: nothing to pull\n",
            state_path.display()
        )
    );

    // Push works without the manifest's variables: only the backend block is read.
    let state = State::new("exp");
    let file = dir.path().join("moved.json");
    std::fs::write(&file, state.to_json()).expect("written");
    let pushed = dsinfra_local(&["state", "push", path_str(&exp), path_str(&file)]);
    assert_eq!(pushed.code, Some(0), "{}", pushed.stderr);
    assert_eq!(
        pushed.stderr,
        format!(
            "pushed {} to {} (serial 1)\n",
            file.display(),
            state_path.display()
        )
    );
    let pulled = dsinfra_local(&["state", "pull", path_str(&exp)]);
    assert_eq!(pulled.code, Some(0));
    assert_eq!(
        pulled.stdout,
        std::fs::read_to_string(&state_path).expect("the state file")
    );

    let unlock = dsinfra_local(&["force-unlock", path_str(&exp), "--yes"]);
    assert_eq!(unlock.code, Some(1));
    assert_eq!(
        unlock.stderr,
        format!(
            "error: the state of {} is local: its lock is an operating-system lock that is released when its holder exits, even if it crashes, so there is nothing to force-unlock\n",
            exp.display()
        )
    );
}

#[test]
fn a_bad_backend_block_is_reported_with_its_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = dir.path().join("exp.hcl");
    std::fs::write(
        &exp,
        "backend \"azureblob\" {\n  account   = \"expstate01\"\n  container = \"tfstate\"\n}\n",
    )
    .expect("written");
    let run = dsinfra_local(&["state", "pull", path_str(&exp)]);
    assert_eq!(run.code, Some(1));
    assert_eq!(
        run.stderr,
        format!(
            "error: backend \"azureblob\" is missing `key`\n --> {}:1:1\n  |\n1 | backend \"azureblob\" {{\n  | ^^^^^^^^^^^^^^^^^^^\n  = help: add `key = \"cosmoflow.dsinfra.json\"`\n",
            exp.display()
        )
    );
}

/// A storage account and its container, kept in a remote state: what the two-apply and Ctrl-C
/// tests apply.
fn applied_manifest(azurite: &Azurite, key: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, path) = manifest(azurite, key);
    let mut text = std::fs::read_to_string(&path).expect("the manifest was written");
    text.push_str("\nstorage_account \"data\" {\n  container \"raw\" {}\n}\n");
    std::fs::write(&path, text).expect("written");
    (dir, path)
}

/// An ARM emulator on a runtime of its own (these tests are synchronous), stopped on drop.
struct Arm {
    handle: dsinfra::emulator::EmulatorHandle,
    runtime: tokio::runtime::Runtime,
}

impl Arm {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let mut config = dsinfra::connect::builtin_emulator_config(None, 0.0);
        config.throttle = false;
        let handle = runtime
            .block_on(dsinfra::emulator::start(config))
            .expect("the emulator starts");
        Self { handle, runtime }
    }

    fn endpoint(&self) -> String {
        self.handle.endpoint()
    }

    /// Every `method` request waits `millis` before it is answered, until cleared.
    fn slow(&self, method: &str, millis: u64) {
        let _guard = self.runtime.enter();
        self.handle.add_fault(dsinfra::emulator::FaultRule {
            method: Some(method.to_owned()),
            path: None,
            resource_type: None,
            count: None,
            action: dsinfra::emulator::FaultAction::Delay {
                millis,
                jitter_millis: 0,
            },
        });
    }
}

/// `dsinfra ARGS --endpoint ARM`, started in the background with its output captured.
fn spawn_dsinfra(sas: &SasToken, arm: &Arm, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_dsinfra"))
        .args(args)
        .args(["--endpoint", &arm.endpoint()])
        .env("NO_COLOR", "1")
        .env(SAS_ENV, sas.expose_query())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dsinfra starts")
}

fn finished(child: std::process::Child) -> Run {
    Run::of(&child.wait_with_output().expect("dsinfra ends"))
}

/// Who holds the lease on `remote` now, as a refused process is told, once someone does.
fn wait_for_holder(remote: &RemoteState, within: Duration) -> LockHolder {
    let deadline = Instant::now() + within;
    loop {
        // A holder that has taken the lease but not yet written who it is reads as the
        // `unknown` placeholder (pid 0): keep waiting for its metadata.
        if let Some(info) = block(remote.holder())
            .expect("the lock can be read")
            .filter(|info| info.pid != 0)
        {
            return LockHolder {
                pid: info.pid,
                host: info.host,
                user: info.user,
                command: info.command,
                since: DateTime::parse_from_rfc3339(&info.since)
                    .expect("the lock records an RFC 3339 time")
                    .with_timezone(&Utc),
            };
        }
        assert!(Instant::now() < deadline, "nobody took the lock");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Guards the lock where it matters: two literal `apply` runs on one `backend "azureblob"`
/// manifest. The second is refused at once, naming the first (its pid, user, host, command and
/// start), and succeeds after the first has finished and released the lease.
#[test]
fn a_second_apply_is_refused_while_the_first_holds_the_remote_lock() {
    let Some((_azurite, sas, _dir, exp, remote)) = setup("two-applies.json", applied_manifest)
    else {
        return;
    };
    let url = remote.url();
    let arm = Arm::start();
    // The first apply's creates take a few seconds, so it holds the lock while the second runs.
    arm.slow("PUT", 1500);

    let first = spawn_dsinfra(&sas, &arm, &["apply", path_str(&exp), "--auto-approve"]);
    let holder = wait_for_holder(&remote, Duration::from_secs(30));
    assert_eq!(holder.pid, first.id());
    assert_eq!(holder.command, format!("dsinfra apply {}", exp.display()));

    let second = apply(&sas, &exp, &arm);
    assert_eq!(second.code, Some(1), "{}", second.stderr);
    assert_eq!(
        second.stderr,
        format!(
            "error: the state {url} is locked by another dsinfra process: {}; wait for it to finish (the lock is a 60-second lease that expires by itself if that process dies), or run `dsinfra force-unlock` if you are sure it is not running\n",
            holder.describe()
        )
    );
    assert_eq!(second.stdout, "", "the refused apply planned nothing");

    let first = finished(first);
    assert_eq!(first.code, Some(0), "{}\n{}", first.stdout, first.stderr);
    assert!(
        block(remote.holder()).expect("readable").is_none(),
        "the first apply released the lease when it finished"
    );
    arm.handle.clear_faults();
    let again = apply(&sas, &exp, &arm);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains("note: nothing to apply: Azure matches the manifest"),
        "{}",
        again.stderr
    );
}

/// Guards Ctrl-C before the engine runs: an apply (and a plan) interrupted while it refreshes
/// exits 130 with one line saying nothing was changed, writes nothing, and releases the remote
/// lease at once (rather than leaving it to expire, refusing everyone else meanwhile).
#[test]
fn ctrl_c_during_refresh_changes_nothing_and_releases_the_remote_lock() {
    let Some((_azurite, sas, _dir, exp, remote)) = setup("interrupted.json", applied_manifest)
    else {
        return;
    };
    let arm = Arm::start();
    let applied = apply(&sas, &exp, &arm);
    assert_eq!(applied.code, Some(0), "{}", applied.stderr);
    let before = block(remote.read()).expect("readable").expect("a state");

    // The refresh's reads hang long enough to be interrupted in the middle.
    arm.slow("GET", 30_000);
    for command in [
        &["apply", path_str(&exp), "--auto-approve"][..],
        &["plan", path_str(&exp)][..],
    ] {
        let child = spawn_dsinfra(&sas, &arm, command);
        let holder = wait_for_holder(&remote, Duration::from_secs(30));
        assert_eq!(holder.pid, child.id());
        // Past the lock and the connection, into the refresh's first read.
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let run = finished(child);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{command:?} did not stop waiting for the slow reads"
        );
        assert_eq!(
            run.code,
            Some(130),
            "{command:?}\n{}\n{}",
            run.stdout,
            run.stderr
        );
        assert_eq!(run.stderr, "note: interrupted: nothing was changed\n");
        assert_eq!(run.stdout, "", "{command:?} planned nothing");
        assert!(
            block(remote.holder()).expect("readable").is_none(),
            "{command:?} released the lease at exit rather than leave it to expire"
        );
        // (The lock's metadata changes the blob's ETag; the state itself must not change.)
        let after = block(remote.read()).expect("readable").expect("a state");
        assert_eq!(after.content, before.content, "the state was not written");
    }
}
