//! The idle watcher (issue 18) on its own: its install script, program and config pass
//! shellcheck, and the program's ticks run for real (bash, curl) against a small local stand-in
//! for IMDS and ARM that records every request: an idle head parks the other VMs first and
//! itself last with the identity's token, a running job or a busy GPU keeps it from parking, and
//! an ARM refusal is recorded with ARM's code and message and retried on the next tick. The
//! whole loop against the emulator and sshd hosts is tests/steps_apply/idle.rs.

use std::net::SocketAddr;
use std::process::Command;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::any;
use dsinfra::steps::library::{IdleWatch, idle_watch_step, parse_idle_state};

use super::*;

const TOKEN: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOi.IDLE-TEST-TOKEN.c2lnbmF0dXJl";
const VMS: &str = "/subscriptions/00000000-0000-0000-0000-00000000000a/resourceGroups/exp-rg/providers/Microsoft.Compute/virtualMachines";

/// What the stand-in saw and how it answers deallocations.
#[derive(Default)]
struct Arm {
    /// `POST <path> <authorization>` of each deallocation, in arrival order.
    calls: Vec<String>,
    /// Whether deallocations are refused (the role lost its deallocate action).
    deny: bool,
}

type Shared = Arc<Mutex<Arm>>;

async fn serve(State(arm): State<Shared>, uri: Uri, headers: HeaderMap) -> (StatusCode, String) {
    let path = uri.path().to_owned();
    if path.ends_with("/metadata/identity/oauth2/token") {
        if headers.get("metadata").and_then(|v| v.to_str().ok()) != Some("true") {
            return (
                StatusCode::BAD_REQUEST,
                r#"{"error":"invalid_request","error_description":"Required metadata header not specified"}"#.to_owned(),
            );
        }
        let body = json!({"access_token": TOKEN, "expires_in": "86399", "token_type": "Bearer",
            "resource": "https://management.azure.com/"});
        return (StatusCode::OK, body.to_string());
    }
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_owned();
    let mut arm = arm.lock().expect("arm");
    arm.calls.push(format!("POST {path} {auth}"));
    if arm.deny {
        let scope = path.trim_end_matches("/deallocate");
        let message = format!(
            "The client 'p1' with object id 'p1' does not have authorization to perform action \
             'Microsoft.Compute/virtualMachines/deallocate/action' over scope '{scope}' or the \
             scope is invalid. If access was recently granted, please refresh your credentials."
        );
        let body = json!({"error": {"code": "AuthorizationFailed", "message": message}});
        return (StatusCode::FORBIDDEN, body.to_string());
    }
    (StatusCode::ACCEPTED, String::new())
}

async fn stand_in() -> (SocketAddr, Shared) {
    let arm = Shared::default();
    let app = Router::new()
        .fallback(any(serve))
        .with_state(Arc::clone(&arm));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, arm)
}

/// The watcher of a one-node block with two more VMs to park, its files under `dir`.
fn install(dir: &Path, addr: SocketAddr, gpu_util: &str) -> PathBuf {
    let smi = dir.join("nvidia-smi");
    std::fs::write(&smi, format!("#!/bin/sh\nprintf '{gpu_util}\\n'\n")).expect("smi");
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let ctx = NodeContext::new(
        "exp",
        "vm.gpu",
        vec![ClusterNode {
            name: "exp-gpu-0".into(),
            private_ip: "10.0.0.4".into(),
            ssh_port: 22,
        }],
    );
    let mut watch = IdleWatch::new(Duration::from_secs(2), true);
    watch.interval = Duration::from_secs(1);
    watch.arm_endpoint = format!("http://{addr}");
    watch.imds_endpoint = format!("http://{addr}/imds{VMS}/exp-gpu-0");
    watch.compute_api_version = "2024-07-01".into();
    watch.head_vm_id = format!("{VMS}/exp-gpu-0");
    watch.other_vm_ids = vec![format!("{VMS}/exp-gpu-1"), format!("{VMS}/exp-gpu-2")];
    watch.runs_dir = dir.join("runs").display().to_string();
    watch.state_dir = dir.join("idle").display().to_string();
    watch.nvidia_smi = Some(smi.display().to_string());
    let step = idle_watch_step(&ctx, &watch).expect("renders");
    for file in &step.files {
        std::fs::write(dir.join(&file.name), file.for_rank(0)).expect("write");
    }
    dir.join("idle-watcher.conf")
}

/// One tick, as the timer runs it.
async fn tick(dir: &Path, conf: &Path) -> String {
    let out = tokio::process::Command::new("bash")
        .arg(dir.join("idle-watcher"))
        .arg(conf)
        .output()
        .await
        .expect("bash runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the tick fails: {text}");
    assert!(!text.contains(TOKEN), "the token was printed: {text}");
    text
}

fn state(dir: &Path) -> dsinfra::steps::library::IdleState {
    let text = std::fs::read_to_string(dir.join("idle/state.json")).expect("state.json");
    parse_idle_state(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn no_token_on_disk(dir: &Path) {
    for entry in std::fs::read_dir(dir.join("idle")).expect("state dir") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains(TOKEN), "{} holds the token", path.display());
    }
}

#[test]
fn the_watcher_install_program_and_config_pass_shellcheck() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = install(dir.path(), "127.0.0.1:9".parse().expect("addr"), "0");
    let ctx = NodeContext::new("exp", "vm.gpu", Vec::new());
    let mut watch = IdleWatch::new(Duration::from_mins(45), false);
    watch.compute_api_version = "2024-07-01".into();
    watch.head_vm_id = format!("{VMS}/exp-gpu-0");
    let step = idle_watch_step(&ctx, &watch).expect("renders");
    let script = dir.path().join("install.sh");
    std::fs::write(&script, &step.script).expect("write");
    for file in [&script, &dir.path().join("idle-watcher"), &conf] {
        let out = match Command::new("shellcheck")
            .args(["-s", "bash", "-S", "style"])
            .arg(file)
            .output()
        {
            Ok(out) => out,
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "shellcheck is required under CI: {e}"
                );
                eprintln!("NOT RUN: shellcheck is not installed ({e}); apt-get install shellcheck");
                return;
            }
        };
        assert!(
            out.status.success(),
            "{}:\n{}",
            file.display(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_head_parks_the_others_first_then_itself_with_the_identitys_token() {
    let (addr, arm) = stand_in().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = install(dir.path(), addr, "0\n3");
    tick(dir.path(), &conf).await;
    let first = state(dir.path());
    assert!(
        first.idle_since.is_some() && first.busy.is_none(),
        "{first:?}"
    );
    assert!(first.parking.is_none());
    assert!(arm.lock().expect("arm").calls.is_empty());
    tokio::time::sleep(Duration::from_millis(2100)).await;
    tick(dir.path(), &conf).await;
    let calls = arm.lock().expect("arm").calls.clone();
    let bearer = format!("Bearer {TOKEN}");
    let mut others: Vec<String> = calls[..2].to_vec();
    others.sort();
    assert_eq!(
        others,
        [
            format!("POST {VMS}/exp-gpu-1/deallocate {bearer}"),
            format!("POST {VMS}/exp-gpu-2/deallocate {bearer}"),
        ]
    );
    assert_eq!(
        calls[2..],
        [format!("POST {VMS}/exp-gpu-0/deallocate {bearer}")]
    );
    let parked = state(dir.path());
    let parking = parked.parking.expect("parking recorded");
    assert_eq!(parking.vms.len(), 3);
    assert_eq!(parking.vms[2], format!("{VMS}/exp-gpu-0"));
    assert!(parked.error.is_none());
    // Parked: later ticks send nothing more.
    tick(dir.path(), &conf).await;
    assert_eq!(arm.lock().expect("arm").calls.len(), 3);
    no_token_on_disk(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_or_a_busy_gpu_keeps_the_block_up_and_a_refusal_is_recorded_and_retried() {
    let (addr, arm) = stand_in().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A busy GPU.
    let conf = install(dir.path(), addr, "0\n55");
    tick(dir.path(), &conf).await;
    let busy = state(dir.path());
    assert_eq!(
        busy.busy
            .as_deref()
            .map(|b| b.starts_with("GPU at 55% on ")),
        Some(true)
    );
    assert!(busy.idle_since.is_none());
    // Idle GPUs but a running job (this test's own pid is alive).
    let conf = install(dir.path(), addr, "0");
    let run = dir.path().join("runs/exp-gpu-0/20261127T010000-3f2a");
    std::fs::create_dir_all(&run).expect("run dir");
    std::fs::write(run.join("state"), "running\n").expect("state");
    std::fs::write(run.join("pid"), format!("{}\n", std::process::id())).expect("pid");
    tick(dir.path(), &conf).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    tick(dir.path(), &conf).await;
    assert_eq!(
        state(dir.path()).busy,
        Some(format!(
            "job 20261127T010000-3f2a running on {}",
            hostname()
        ))
    );
    assert!(arm.lock().expect("arm").calls.is_empty());
    // The job is lost (its process is gone): idle; ARM refuses; recorded, and the head is kept.
    std::fs::write(run.join("pid"), "999999999\n").expect("pid");
    arm.lock().expect("arm").deny = true;
    tick(dir.path(), &conf).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let text = tick(dir.path(), &conf).await;
    assert!(
        text.contains("FAILED to park: AuthorizationFailed: "),
        "{text}"
    );
    let failed = state(dir.path());
    let error = failed.error.expect("the error is recorded");
    assert_eq!(error.code, "AuthorizationFailed");
    assert!(
        error.message.starts_with("The client 'p1' with object id 'p1' does not have authorization to perform action 'Microsoft.Compute/virtualMachines/deallocate/action' over scope '/subscriptions/"),
        "{}",
        error.message
    );
    assert!(failed.parking.is_none());
    let calls = arm.lock().expect("arm").calls.clone();
    assert_eq!(
        calls.len(),
        2,
        "the head is not deallocated before the others: {calls:?}"
    );
    // Fixed: the next tick parks.
    arm.lock().expect("arm").deny = false;
    tokio::time::sleep(Duration::from_secs(1)).await;
    tick(dir.path(), &conf).await;
    let parked = state(dir.path());
    assert!(
        parked.error.is_none() && parked.parking.is_some(),
        "{parked:?}"
    );
    assert_eq!(arm.lock().expect("arm").calls.len(), 5);
    no_token_on_disk(dir.path());
}

fn hostname() -> String {
    let out = Command::new("hostname").output().expect("hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
