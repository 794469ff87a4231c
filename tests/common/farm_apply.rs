//! The plumbing of end-to-end tests that run the real binary against an in-process emulator
//! whose VMs boot into a [`NodeFarm`](super::nodes::NodeFarm) (tests/host_keys.rs,
//! tests/steps_apply/, tests/ssh_cmds.rs): start the emulator with a boot hook, build and run
//! a `dsinfra` command against it, and read the experiment's local state.
//!
//! Only setup lives here: what a test checks stays in the test. Use through `mod common;`.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use dsinfra::connect::builtin_emulator_config;
use dsinfra::emulator::{self, EmulatorConfig, EmulatorHandle, VmBootHook};
use serde_json::Value;

/// Emulator latency scale of the farm tests: a VM takes 90 ms.
pub const SCALE: f64 = 0.001;

/// Starts an emulator at [`SCALE`] keeping its cloud in `dir/cloud`; `boot` is its VM boot hook
/// (usually [`NodeFarm::hook`](super::nodes::NodeFarm::hook)), and `configure` may set more of
/// the configuration before it starts.
pub async fn start_emulator(
    dir: &Path,
    boot: Option<VmBootHook>,
    configure: impl FnOnce(&mut EmulatorConfig),
) -> EmulatorHandle {
    let cloud = dir.join("cloud");
    std::fs::create_dir_all(&cloud).expect("cloud dir");
    let mut config = builtin_emulator_config(Some(&cloud), SCALE);
    config.on_vm_boot = boot;
    configure(&mut config);
    emulator::start(config).await.expect("the emulator starts")
}

/// `dsinfra ARGS --endpoint ENDPOINT` run in `dir` (a `--` in `args` keeps its place after the
/// flag), at the emulator's [`SCALE`], without colour, an ambient subscription or a stdin.
pub fn dsinfra(dir: &Path, endpoint: &str, args: &[&str]) -> Command {
    let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsinfra"));
    cmd.current_dir(dir)
        .args(&args[..split])
        .args(["--endpoint", endpoint])
        .args(&args[split..])
        .env("DSINFRA_EMULATOR_LATENCY_SCALE", SCALE.to_string())
        .env("NO_COLOR", "1")
        .env_remove("AZURE_SUBSCRIPTION_ID")
        .stdin(Stdio::null());
    cmd
}

/// Runs `cmd` to the end on a blocking thread: the emulator shares the test's runtime.
pub async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("the program runs"))
        .await
        .expect("joined")
}

/// How a run ended and what it printed, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The local state of the manifest `dir/STEM.hcl`, as saved.
pub fn state_text(dir: &Path, stem: &str) -> String {
    std::fs::read_to_string(state_path(dir, stem)).expect("the state exists")
}

/// The local state of the manifest `dir/STEM.hcl`, parsed.
pub fn state(dir: &Path, stem: &str) -> Value {
    serde_json::from_str(&state_text(dir, stem)).expect("the state is valid JSON")
}

/// Where the local backend keeps the state of the manifest `dir/STEM.hcl` (its directory is
/// named after the manifest's file, not its experiment).
pub fn state_path(dir: &Path, stem: &str) -> std::path::PathBuf {
    dir.join(".dsinfra").join(stem).join("state.json")
}
