//! The official Azure SDK for Python drives one whole lifecycle against the emulator
//! (`tests/sdk/lifecycle.py`): a client nobody here wrote, used as it is meant to be used against
//! ARM. A wrong answer from the emulator fails a step of the script, and so this test; every
//! request the SDK sends and every answer the emulator gives is also held to the official specs.
//!
//! The SDK lives in a virtualenv that `scripts/test` installs into the tools directory (pinned by
//! `tests/sdk/requirements.txt`) and names in `DSINFRA_PYTHON_SDK`. Without it (or without the
//! specs) a local run says why and passes; under CI (`CI=true`) it fails.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsinfra::emulator::{self, EmulatorConfig};
use dsinfra::openapi::Specs;

#[path = "common/spec_hooks.rs"]
mod spec_hooks;
use spec_hooks::{describe, request_validator, response_violations};

/// The subscription the script works in (any id works; the emulator creates it on first use).
const SUBSCRIPTION: &str = "00000000-0000-0000-0000-0000000000a1";
/// Small enough that every list the script checks (three VMs, a group's dozen resources) pages.
const PAGE_SIZE: usize = 2;
/// A VM takes 0.9 s, a storage account 0.2 s: operations really run and are really polled.
const LATENCY_SCALE: f64 = 0.01;
/// The lifecycle takes about 15 s. A client that waits real ARM durations (a `Retry-After` that
/// leaks them, issue 14 item 4) takes minutes; this bound catches that with room for a loaded
/// CI machine.
const TIME_LIMIT: Duration = Duration::from_mins(1);

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The virtualenv's python: `DSINFRA_PYTHON_SDK`, else the tools directory's default place.
/// `None` (after saying why) outside CI when it is missing; under CI a missing SDK fails.
fn python() -> Option<PathBuf> {
    let path = std::env::var_os("DSINFRA_PYTHON_SDK")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache/dsinfra/tools/python-sdk/bin/python"))
        })?;
    if path.is_file() {
        return Some(path);
    }
    let why = format!(
        "the Azure SDK for Python is not installed at {} (run `bash scripts/test --install-only`)",
        path.display()
    );
    assert!(!under_ci(), "{why}; it is required under CI");
    eprintln!("SKIPPING the Azure SDK for Python lifecycle: {why}");
    None
}

fn specs() -> Option<Arc<Specs>> {
    match Specs::load_default() {
        Ok(specs) => Some(Arc::new(specs)),
        Err(missing) => {
            assert!(
                !under_ci(),
                "conformance specs are required under CI: {missing}"
            );
            eprintln!("SKIPPING the Azure SDK for Python lifecycle: {missing}");
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_azure_sdk_for_python_runs_a_whole_lifecycle_against_the_emulator() {
    let Some(python) = python() else { return };
    let Some(specs) = specs() else { return };
    let handle = emulator::start(EmulatorConfig {
        latency_scale: LATENCY_SCALE,
        page_size: PAGE_SIZE,
        // The `permissions` step's caller, whose rights the emulator checks.
        callers: vec![dsinfra::emulator::Caller {
            token: "sdk-contributor-token".into(),
            principal: "5a5a5a5a-1111-4222-8333-944444444444".into(),
        }],
        request_validator: Some(request_validator(Arc::clone(&specs))),
        response_validator: Some(Arc::new(move |request, response| {
            response_violations(&specs, request, response)
        })),
        // The `spot_eviction` step waits out the notice `simulateEviction` gives.
        eviction_notice_secs: 1,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/lifecycle.py");
    let started = Instant::now();
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .args(["--endpoint", &handle.endpoint()])
        .args(["--subscription", SUBSCRIPTION])
        .args(["--page-size", &PAGE_SIZE.to_string()])
        // Nothing the developer's environment says may redirect the SDK (proxies, a cloud).
        .env_remove("AZURE_CLOUD")
        .env("NO_PROXY", "127.0.0.1")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(TIME_LIMIT * 2, run)
        .await
        .unwrap_or_else(|_| panic!("the lifecycle did not finish in {:?}", TIME_LIMIT * 2))
        .expect("the virtualenv's python runs");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown on failure (and with --nocapture): every step's line, how long each took.
    println!("{stdout}{stderr}lifecycle took {took:.1?}");

    // Every problem at once: a failing step does not hide a spec violation, nor the reverse.
    let mut problems = Vec::new();
    if !output.status.success() {
        let summary = stdout.lines().rev().take(2).collect::<Vec<_>>();
        problems.push(format!(
            "the lifecycle failed ({}), see its steps above: {}",
            output.status,
            summary.into_iter().rev().collect::<Vec<_>>().join("; ")
        ));
    } else if !stdout.contains("PASS  deletes") {
        problems.push("the lifecycle ended before its last step".to_owned());
    }
    if took >= TIME_LIMIT {
        problems.push(format!(
            "the lifecycle took {took:.1?}, over {TIME_LIMIT:?}: does a Retry-After leak real time?"
        ));
    }
    let requests = handle.request_violations();
    if !requests.is_empty() {
        problems.push(format!(
            "the SDK's requests broke the spec:{}",
            describe(&requests)
        ));
    }
    let responses = handle.response_violations();
    if !responses.is_empty() {
        problems.push(format!(
            "the emulator's answers to the SDK broke the spec:{}",
            describe(&responses)
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
