//! Idle auto-park (issue 18): the watcher that deallocates a block's VMs when the block has been
//! idle for its whole `park { idle }` window, installed on the block's head by
//! [`idle_watch_step`], and the state file it leaves for `dsinfra status` ([`parse_idle_state`]).
//!
//! The watcher is a bash program (templates/steps/idle-watcher.sh.j2) plus a config file, both
//! delivered with the install step as [`StepFile`]s. It runs every `interval`: from a systemd
//! timer where systemd is PID 1 (Azure VMs), else from a `setsid nohup` loop whose pidfile a
//! re-install replaces (the test hosts), as `dsinfra run --detach` falls back. It gets its ARM
//! token from the head's managed identity (IMDS) and never prints or stores it. docs/park.md
//! describes what counts as idle and what the watcher records.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::{LibraryError, NodeContext, templates};
use crate::steps::spec::{FileContent, RunPolicy, Scope, StepFile, StepSpec};

/// Where the watcher program is installed on the head.
pub const IDLE_WATCHER_PATH: &str = "/usr/local/lib/dsinfra/idle-watcher";

/// The watcher's state directory when `DSINFRA_IDLE_DIR` does not move it.
pub const IDLE_STATE_DIR: &str = "/var/lib/dsinfra/idle";

/// The name of the runner step that installs the watcher.
pub const IDLE_STEP_NAME: &str = "dsinfra-idle-watch";

/// What one block's watcher watches and how it parks (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct IdleWatch {
    /// How long the block must stay idle before it is parked.
    pub window: Duration,
    /// How often the watcher samples.
    pub interval: Duration,
    /// GPU utilisation (percent, every GPU of every node) below which a GPU node is idle.
    pub gpu_threshold_pct: u32,
    /// 1-minute load per core below which a CPU node is idle (used when the size has no GPU).
    pub cpu_load_threshold: f64,
    /// Whether the catalog says the size has GPUs.
    pub gpus: bool,
    /// ARM's base URL: `https://management.azure.com` or the emulator's endpoint.
    pub arm_endpoint: String,
    /// IMDS's base URL: `http://169.254.169.254` or the emulator's stand-in for the head.
    pub imds_endpoint: String,
    /// The Microsoft.Compute api-version dsinfra uses.
    pub compute_api_version: String,
    /// The head VM's resource id: deallocated last.
    pub head_vm_id: String,
    /// The other nodes' resource ids: deallocated first, in parallel.
    pub other_vm_ids: Vec<String>,
    /// The base of the on-node run records (`DSINFRA_RUNS_DIR` or `/var/lib/dsinfra/runs`).
    pub runs_dir: String,
    /// The watcher's state directory (`DSINFRA_IDLE_DIR` or [`IDLE_STATE_DIR`]).
    pub state_dir: String,
    /// An `nvidia-smi` stand-in's absolute path (`DSINFRA_NVIDIA_SMI`), else the one on PATH.
    pub nvidia_smi: Option<String>,
}

impl IdleWatch {
    /// The defaults of the contract for a window: sampled every minute (or every tenth of a
    /// short window), 10 % GPU, 0.5 load per core, the Azure endpoints and the on-node paths.
    pub fn new(window: Duration, gpus: bool) -> Self {
        Self {
            window,
            interval: (window / 10).clamp(Duration::from_secs(1), Duration::from_mins(1)),
            gpu_threshold_pct: 10,
            cpu_load_threshold: 0.5,
            gpus,
            arm_endpoint: "https://management.azure.com".to_owned(),
            imds_endpoint: "http://169.254.169.254".to_owned(),
            compute_api_version: String::new(),
            head_vm_id: String::new(),
            other_vm_ids: Vec::new(),
            runs_dir: "/var/lib/dsinfra/runs".to_owned(),
            state_dir: IDLE_STATE_DIR.to_owned(),
            nvidia_smi: None,
        }
    }
}

/// The watcher's `state.json`, as `dsinfra status` reads it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IdleState {
    /// The file's format version (1).
    pub version: u32,
    /// The window, in seconds.
    pub window_s: u64,
    /// The sampling interval, in seconds.
    pub interval_s: u64,
    /// When the last tick ran (RFC 3339).
    pub checked_at: String,
    /// Since when every node has been idle (RFC 3339), if it is.
    pub idle_since: Option<String>,
    /// Why the block is not idle (`job 2026…-1a2b running on exp-train-2`), if it is not.
    pub busy: Option<String>,
    /// The deallocation the watcher started, if it did.
    pub parking: Option<IdleParking>,
    /// The last ARM error, if the last attempt to park failed.
    pub error: Option<IdleError>,
}

/// A deallocation the watcher sent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IdleParking {
    /// When (RFC 3339).
    pub at: String,
    /// The VMs' resource ids, in the order they were deallocated.
    pub vms: Vec<String>,
}

/// An ARM error the watcher got while parking.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IdleError {
    /// When (RFC 3339).
    pub at: String,
    /// ARM's error code (`AuthorizationFailed`), or the watcher's own (`ImdsFailed`).
    pub code: String,
    /// ARM's message.
    pub message: String,
}

/// Parses a watcher's `state.json`; the error says what is wrong with it.
pub fn parse_idle_state(text: &str) -> Result<IdleState, String> {
    let state: IdleState =
        serde_json::from_str(text).map_err(|e| format!("idle state file: {e}"))?;
    if state.version != 1 {
        return Err(format!(
            "idle state file: version {} is not one this dsinfra reads (1)",
            state.version
        ));
    }
    Ok(state)
}

/// Whole seconds, at least one.
fn secs(d: Duration) -> u64 {
    d.as_secs().max(1)
}

/// A resource id the watcher may put in a URL: `/subscriptions/...` of safe characters.
fn check_vm_id(id: &str) -> Result<(), String> {
    let ok = id.starts_with("/subscriptions/")
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!("{id:?} is not a VM resource id"))
    }
}

/// An http(s) base URL without a trailing slash, of characters safe in the config file.
fn check_url(url: &str) -> Result<(), String> {
    let ok = (url.starts_with("http://") || url.starts_with("https://"))
        && !url.ends_with('/')
        && url
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | ':' | '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!("{url:?} is not an http(s) base URL"))
    }
}

/// The watcher's config file: shell assignments, every value quoted.
fn config(ctx: &NodeContext, watch: &IdleWatch) -> Result<String, String> {
    check_url(&watch.arm_endpoint)?;
    check_url(&watch.imds_endpoint)?;
    check_vm_id(&watch.head_vm_id)?;
    for id in &watch.other_vm_ids {
        check_vm_id(id)?;
    }
    for path in [&watch.runs_dir, &watch.state_dir] {
        super::params::check_path(path)?;
    }
    if let Some(smi) = &watch.nvidia_smi {
        super::params::check_path(smi)?;
    }
    if !watch
        .compute_api_version
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-')
        || watch.compute_api_version.is_empty()
    {
        return Err(format!(
            "{:?} is not an api-version",
            watch.compute_api_version
        ));
    }
    if !(watch.cpu_load_threshold.is_finite() && watch.cpu_load_threshold > 0.0) {
        return Err("the CPU load threshold must be a positive number".to_owned());
    }
    let mut peers = Vec::new();
    for node in ctx.nodes.iter().skip(1) {
        let safe = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '-' | '_'))
        };
        if !safe(&node.name) || !safe(&node.private_ip) {
            return Err(format!(
                "node {:?} has no usable name and private IP",
                node.name
            ));
        }
        peers.push(format!(
            "{} {} {}",
            node.name, node.private_ip, node.ssh_port
        ));
    }
    let vars = json!({
        "experiment": ctx.experiment,
        "block": ctx.block,
        "window_s": secs(watch.window),
        "interval_s": secs(watch.interval),
        "gpu_threshold_pct": watch.gpu_threshold_pct,
        "cpu_load_threshold": format!("{}", watch.cpu_load_threshold),
        "gpus": watch.gpus,
        "arm_endpoint": watch.arm_endpoint,
        "imds_endpoint": watch.imds_endpoint,
        "compute_api_version": watch.compute_api_version,
        "head_vm_id": watch.head_vm_id,
        "other_vm_ids": watch.other_vm_ids.join(" "),
        "runs_dir": watch.runs_dir,
        "state_dir": watch.state_dir,
        "nvidia_smi": watch.nvidia_smi.clone().unwrap_or_else(|| "nvidia-smi".to_owned()),
        "peers": peers.join("\n"),
        "mesh_user": ctx.mesh.user,
        "ssh_dir": ctx.mesh.ssh_dir,
    });
    templates::render("idle-watcher.conf.j2", &vars)
}

/// The step that installs (or re-installs) `watch`'s watcher on the head of the block `ctx`
/// describes and starts it: head only, once per boot and whenever the program or its config
/// changes, so a changed window or a restarted head gets a fresh watcher (the old loop is
/// replaced, never doubled) and an apply that changes nothing leaves the window running.
pub fn idle_watch_step(ctx: &NodeContext, watch: &IdleWatch) -> Result<StepSpec, LibraryError> {
    let name = IDLE_STEP_NAME.to_owned();
    let bad = |why: String| LibraryError::Unsupported {
        step: name.clone(),
        why: format!("idle watcher: {why}"),
    };
    let conf = config(ctx, watch).map_err(bad)?;
    let template = |template: &str, context: &serde_json::Value| {
        templates::render(template, context).map_err(|e| LibraryError::Template {
            step: name.clone(),
            template: e,
        })
    };
    let program = template("idle-watcher.sh.j2", &json!({}))?;
    let context = json!({
        "step": name,
        "kind": "idle_watch",
        "title": "the idle watcher on the head",
        "experiment": ctx.experiment,
        "block": ctx.block,
        "node_count": ctx.nodes.len(),
        "temp_dir": ctx.temp_dir,
        "infiniband": ctx.infiniband,
        "program_path": IDLE_WATCHER_PATH,
        "state_dir": watch.state_dir,
        "interval_s": secs(watch.interval),
    });
    let script = template("idle-install.sh.j2", &context)?;
    let mut step = StepSpec::new(name, script);
    step.files = vec![
        StepFile {
            name: "idle-watcher".to_owned(),
            content: FileContent::Same(program),
        },
        StepFile {
            name: "idle-watcher.conf".to_owned(),
            content: FileContent::Same(conf),
        },
    ];
    step.scope = Scope::Head;
    // Once per boot, and again when the program or its config changes (files are hashed): an
    // apply that changes nothing must not reinstall it, which restarted the idle window every
    // time. After an unpark (a new boot, or `Restarted` for emulated nodes) it is reinstalled,
    // which the setsid fallback needs (nothing survives a reboot there; a systemd timer would).
    step.policy = RunPolicy::PerBoot;
    step.timeout = Some(Duration::from_mins(2));
    Ok(step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::library::ClusterNode;

    const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/exp-rg/providers/Microsoft.Compute/virtualMachines";

    fn cluster() -> NodeContext {
        let node = |i: usize| ClusterNode {
            name: format!("exp-train-{i}"),
            private_ip: format!("10.0.0.{}", i + 4),
            ssh_port: 22,
        };
        NodeContext::new("exp", "cluster.train", (0..3).map(node).collect())
    }

    fn watch() -> IdleWatch {
        let mut watch = IdleWatch::new(Duration::from_mins(45), true);
        watch.compute_api_version = "2024-07-01".to_owned();
        watch.head_vm_id = format!("{SUB}/exp-train-0");
        watch.other_vm_ids = vec![format!("{SUB}/exp-train-1"), format!("{SUB}/exp-train-2")];
        watch
    }

    fn file<'a>(step: &'a StepSpec, name: &str) -> &'a str {
        step.files
            .iter()
            .find(|f| f.name == name)
            .map_or_else(|| panic!("the step delivers {name}"), |f| f.for_rank(0))
    }

    #[test]
    fn the_step_runs_on_the_head_once_per_boot_with_the_program_and_its_config() {
        let step = idle_watch_step(&cluster(), &watch()).expect("renders");
        assert_eq!(
            (step.name.as_str(), step.scope, step.policy),
            (IDLE_STEP_NAME, Scope::Head, RunPolicy::PerBoot)
        );
        assert!(step.script.starts_with("set -euo pipefail\n"));
        let conf = file(&step, "idle-watcher.conf");
        for line in [
            "window_s=2700\n",
            "interval_s=60\n",
            "gpus=1\n",
            "gpu_threshold_pct=10\n",
            "cpu_load_threshold='0.5'\n",
            "arm_endpoint='https://management.azure.com'\n",
            "imds_endpoint='http://169.254.169.254'\n",
            "compute_api_version='2024-07-01'\n",
            "peers='exp-train-1 10.0.0.5 22\nexp-train-2 10.0.0.6 22'\n",
            "state_dir='/var/lib/dsinfra/idle'\n",
            "nvidia_smi='nvidia-smi'\n",
        ] {
            assert!(conf.contains(line), "{line:?} in:\n{conf}");
        }
        assert!(conf.contains(&format!("head_vm_id='{SUB}/exp-train-0'\n")));
        let program = file(&step, "idle-watcher");
        assert!(program.starts_with("#!/usr/bin/env bash\n"));
        assert!(program.contains("/metadata/identity/oauth2/token?api-version=2018-02-01"));
        // The token reaches curl on its standard input, never its command line.
        assert!(program.contains("curl -sS -K - "));
    }

    #[test]
    fn the_interval_defaults_to_a_tenth_of_the_window_between_1s_and_a_minute() {
        let at = |secs| IdleWatch::new(Duration::from_secs(secs), false).interval;
        assert_eq!(at(2700), Duration::from_mins(1));
        assert_eq!(at(120), Duration::from_secs(12));
        assert_eq!(at(3), Duration::from_secs(1));
    }

    #[test]
    fn unsafe_config_values_are_refused_not_rendered() {
        let mut bad = watch();
        bad.arm_endpoint = "https://x/';reboot'".to_owned();
        let err = idle_watch_step(&cluster(), &bad).expect_err("refused");
        assert!(
            err.to_string().contains("is not an http(s) base URL"),
            "{err}"
        );
        let mut bad = watch();
        bad.other_vm_ids.push("exp-train-3".to_owned());
        let err = idle_watch_step(&cluster(), &bad).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "step `dsinfra-idle-watch`: idle watcher: \"exp-train-3\" is not a VM resource id"
        );
    }

    #[test]
    fn state_files_parse_and_unknown_versions_are_refused() {
        let text = r#"{"version":1,"window_s":2700,"interval_s":60,"checked_at":"2026-11-27T01:00:00Z","idle_since":null,"busy":"job 20261127T005500-3f2a running on exp-train-2","parking":null,"error":{"at":"2026-11-27T00:50:00Z","code":"AuthorizationFailed","message":"The client 'p' with object id 'p' does not have authorization"}}"#;
        let state = parse_idle_state(text).expect("parses");
        assert_eq!(
            state.busy.as_deref(),
            Some("job 20261127T005500-3f2a running on exp-train-2")
        );
        assert_eq!(state.error.expect("an error").code, "AuthorizationFailed");
        let parked = r#"{"version":1,"window_s":2,"interval_s":1,"checked_at":"2026-11-27T01:00:00Z","idle_since":"2026-11-27T00:59:57Z","busy":null,"parking":{"at":"2026-11-27T01:00:00Z","vms":["a","b"]},"error":null}"#;
        assert_eq!(
            parse_idle_state(parked).expect("parses").parking,
            Some(IdleParking {
                at: "2026-11-27T01:00:00Z".to_owned(),
                vms: vec!["a".to_owned(), "b".to_owned()],
            })
        );
        assert_eq!(
            parse_idle_state(&parked.replace("\"version\":1", "\"version\":2")),
            Err("idle state file: version 2 is not one this dsinfra reads (1)".to_owned())
        );
        assert!(parse_idle_state("{}").is_err());
    }
}
