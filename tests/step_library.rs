//! The built-in step library (src/steps/library): every template rendered for every example
//! manifest and pinned by snapshots, every rendered script checked by the real shellcheck, the
//! "already done?" section of every step run on a real sshd host, the SSH mesh and nodefile run
//! on four real sshd hosts, and `stage` run for real: four hosts, each running the real azcopy
//! binary against Azurite with its own shard. Submodules: `mounts` (rendered mount configs),
//! `stage_scale` (300,000 blobs over 64 nodes) and `stand_ins` (mofed and Alluxio run on a real
//! sshd host against stand-ins for the package and kernel tools).
//!
//! Real peers come from tests/common (sshd, Azurite); when one cannot run here a local run says
//! why and returns, and under CI (`CI=true`) it fails.

// Real-peer scenarios read best top to bottom, as one story per test.
#![allow(clippy::too_many_lines)]

#[path = "step_library/beeond_root.rs"]
mod beeond_root;
#[path = "step_library/bench.rs"]
mod bench;
#[allow(dead_code)] // Each test binary uses only some of the shared helpers.
mod common;
#[path = "step_library/dataset.rs"]
mod dataset;
#[path = "step_library/fabric.rs"]
mod fabric;
#[path = "step_library/idle.rs"]
mod idle;
#[path = "step_library/mounts.rs"]
mod mounts;
#[path = "step_library/nvme.rs"]
mod nvme;
#[path = "step_library/stage_scale.rs"]
mod stage_scale;
#[path = "step_library/stand_ins.rs"]
mod stand_ins;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::azurite::{ACCOUNT, Azurite, KEY, azcopy_binary};
use common::sshd::{self, TestHosts};
use dsinfra::manifest::{LoadOptions, load};
use dsinfra::model::{Desired, ResourceKind};
use dsinfra::ssh::{Secret, WaitPolicy};
use dsinfra::steps::library::{
    self, ClusterNode, Credential, CredentialKind, Expansion, LibraryError, NodeContext,
    StepRequest, StorageTarget, shard,
};
use dsinfra::steps::{self, Event, FileContent, RunOptions, RunPolicy, Scope, StepSpec};
use dsinfra::storage::{AccountKey, Auth, BlobItem, BlobStore, Permissions, PutOptions, SasSpec};
use serde_json::{Value, json};

/// A SAS-looking placeholder: it must never appear in a rendered script.
const FAKE_SAS: &str =
    "sv=2026-10-06&sr=c&sp=rl&se=2027-01-01T00%3A00%3A00Z&sig=FAKESIGNATUREforSNAPSHOTS";
/// A valid base64 account key placeholder (decodes to 64 bytes).
const FAKE_KEY: &str =
    "RkFLRUtFWWZvclNOQVBTSE9UU0ZBS0VLRVlmb3JTTkFQU0hPVFNGQUtFS0VZZm9yU05BUFNIT1RTRkFLRUtFWWY=";
/// A fixed head key for renders that do not run (a real run reads the head's own).
const FAKE_HEAD_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx3mYlq8zbV4f0v3Vq0m0Ck7cXG2xJH1p6JvUQ4WJ8y dsinfra-demo-head";

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn quick_wait() -> WaitPolicy {
    WaitPolicy {
        limit: Duration::from_secs(10),
        attempt_timeout: Duration::from_secs(5),
        first_delay: Duration::from_millis(100),
        max_delay: Duration::from_millis(500),
    }
}

// ---------------------------------------------------------------------------------------------
// Contexts built from loaded manifests, as the engine would (with placeholders for what only
// exists after apply: IP addresses, secret values, the head key, blob listings).
// ---------------------------------------------------------------------------------------------

fn skewed_listing(prefix: &str) -> Vec<BlobItem> {
    dataset::files()
        .iter()
        .enumerate()
        .map(|(i, (name, content))| BlobItem {
            name: format!("{prefix}/train/{name}.gz"),
            // Sizes as stored (gzip of incompressible data is a few bytes larger).
            size: content.len() as u64 + 20 + i as u64 % 3,
            content_encoding: Some("gzip".to_owned()),
            snapshot: None,
        })
        .collect()
}

/// The context of one `vm`/`cluster` block of a loaded manifest.
fn context_for(desired: &Desired, block: &str, experiment: &str) -> NodeContext {
    let mut vms: Vec<_> = desired
        .resources
        .iter()
        .filter(|r| {
            r.kind == ResourceKind::VirtualMachine && r.address.block_address().to_string() == block
        })
        .collect();
    vms.sort_by(|a, b| a.address.cmp(&b.address));
    assert!(!vms.is_empty(), "{block} has VMs");
    let nodes = vms
        .iter()
        .enumerate()
        .map(|(i, vm)| ClusterNode {
            name: vm.name.clone(),
            private_ip: format!("10.0.0.{}", 4 + i),
            ssh_port: 22,
        })
        .collect();
    let size = vms[0].attrs["size"].as_str().expect("a VM has a size");
    let image = vms[0].attrs["image"].to_string();
    let mut ctx = NodeContext::new(experiment, block, nodes);
    ctx.infiniband = dsinfra::catalog::shipped_size(size).is_some_and(|s| s.infiniband);
    vms[0].attrs["admin_username"]
        .as_str()
        .unwrap_or("azureuser")
        .clone_into(&mut ctx.admin_user);
    ctx.ubuntu = ["20.04", "22.04"]
        .into_iter()
        .find(|v| image.contains(v))
        .map(str::to_owned);
    ctx.head_public_key = Some(FAKE_HEAD_KEY.to_owned());
    // Every node's host key is pinned, as dsinfra pins the keys of the VMs it creates; the last
    // one is left out, as an adopted VM's would be, so the renders show both kinds.
    let pinned = vms.len().saturating_sub(1).max(1);
    for vm in vms.iter().take(pinned) {
        ctx.host_keys.insert(
            vm.name.clone(),
            FAKE_HEAD_KEY.replace("dsinfra-demo-head", &vm.name),
        );
    }
    for r in &desired.resources {
        let address = r.address.to_string();
        match r.kind {
            ResourceKind::BlobContainer | ResourceKind::FileShare => {
                let account = r
                    .parent
                    .clone()
                    .expect("containers and shares have an account");
                let mut target = StorageTarget::azure(&account, &r.name);
                target.nfs = r
                    .attrs
                    .get("protocol")
                    .and_then(Value::as_str)
                    .is_some_and(|p| p.eq_ignore_ascii_case("nfs"));
                let account_address = address.split('.').take(2).collect::<Vec<_>>().join(".");
                ctx.credentials.insert(
                    account_address.clone(),
                    Credential {
                        kind: CredentialKind::AccountKey,
                        identity: format!("{account_address} key1"),
                        value: Secret::new(FAKE_KEY),
                    },
                );
                ctx.storage.insert(address, target);
            }
            ResourceKind::Sas => {
                ctx.credentials.insert(
                    address.clone(),
                    Credential {
                        kind: CredentialKind::Sas,
                        identity: format!("{address} (signed 2026-05-01)"),
                        value: Secret::new(FAKE_SAS),
                    },
                );
            }
            _ => {}
        }
    }
    for step in desired
        .steps
        .iter()
        .filter(|s| s.block.to_string() == block)
    {
        if step.kind == "stage" {
            let prefix = step.params["prefix"].as_str().unwrap_or_default();
            ctx.listings.insert(
                step.name.clone(),
                skewed_listing(prefix.trim_end_matches('/')),
            );
        }
    }
    ctx
}

/// Every block of an example, rendered: `(block, node names, expansion)`.
/// A `cluster.train` context whose nodes are the test's sshd hosts, all reached on 127.0.0.1.
fn cluster_context(experiment: &str, hosts: &TestHosts) -> NodeContext {
    let nodes = hosts
        .hosts
        .iter()
        .map(|h| ClusterNode {
            name: h.name.clone(),
            private_ip: "127.0.0.1".into(),
            ssh_port: h.port,
        })
        .collect();
    let mut ctx = NodeContext::new(experiment, "cluster.train", nodes);
    // The hosts' login user is the admin user the `ssh_mesh` step gives a mesh of its own.
    ctx.admin_user = sshd::TEST_USER.into();
    ctx
}

fn render_example(file: &str) -> Vec<(String, Vec<String>, Expansion)> {
    let loaded = load(&examples_dir().join(file), &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{file} loads: {:?}", e.diagnostics));
    let desired = &loaded.desired;
    let experiment = desired.experiment.as_str();
    let blocks: BTreeSet<String> = desired.steps.iter().map(|s| s.block.to_string()).collect();
    blocks
        .into_iter()
        .map(|block| {
            let ctx = context_for(desired, &block, experiment);
            let requests: Vec<StepRequest<'_>> = desired
                .steps
                .iter()
                .filter(|s| s.block.to_string() == block)
                .map(StepRequest::from_model)
                .collect();
            let expansion = library::render_block(&requests, &ctx)
                .unwrap_or_else(|e| panic!("{file} {block} renders: {e}"));
            let names = ctx.nodes.iter().map(|n| n.name.clone()).collect();
            (block, names, expansion)
        })
        .collect()
}

/// The examples with steps.
const EXAMPLES: [&str; 5] = [
    "dual-dsvm.hcl",
    "dual-dsvm-files.hcl",
    "nd40-beeond.hcl",
    "nfs-cache.hcl",
    "alluxio.hcl",
];

/// A readable document of a rendering: the dry run, then every script.
fn document(blocks: &[(String, Vec<String>, Expansion)]) -> String {
    let mut out = String::new();
    for (block, nodes, expansion) in blocks {
        let _ = writeln!(out, "######## {block}: dry run");
        out.push_str(&library::dry_run(nodes, &expansion.steps));
        for fetch in &expansion.fetch {
            let _ = writeln!(
                out,
                "fetch after {}: node {} {} -> .dsinfra/<manifest>/{}",
                fetch.after_step, fetch.node, fetch.remote, fetch.local
            );
        }
        for step in &expansion.steps {
            out.push_str(&spec_text(step));
        }
    }
    out
}

fn spec_text(step: &StepSpec) -> String {
    let secrets: Vec<String> = step
        .secrets
        .iter()
        .map(|s| format!("{} = <{}>", s.name, s.identity))
        .collect();
    // Delivered files by size, not content: a stage list holds every blob of the listing.
    let files: Vec<String> = step
        .files
        .iter()
        .map(|f| match &f.content {
            FileContent::Same(text) => format!(
                "{} = same on every node, {} lines",
                f.name,
                text.lines().count()
            ),
            FileContent::ByRank(texts) => format!(
                "{} = by rank, lines {:?}",
                f.name,
                texts.iter().map(|t| t.lines().count()).collect::<Vec<_>>()
            ),
        })
        .collect();
    let files = if files.is_empty() {
        String::new()
    } else {
        format!(" files: [{}]", files.join(", "))
    };
    format!(
        "\n======== {} ({:?}, {:?}, timeout {:?}) secrets: [{}]{files} params: {:?}\n{}",
        step.name,
        step.scope,
        step.policy,
        step.timeout,
        secrets.join(", "),
        step.params,
        step.script
    )
}

/// Extra renders no example covers: blobfuse v1, the SSH mesh, blobfuse2 in always-fresh mode
/// with a SAS, NFS from an external export, stage without sharding, user script from env, the
/// head key prelude and the BeeOND stop step.
fn extras() -> Vec<StepSpec> {
    let mut ctx = NodeContext::new(
        "extras",
        "cluster.work",
        (0..3)
            .map(|i| ClusterNode {
                name: format!("work-{i}"),
                private_ip: format!("10.1.0.{}", 4 + i),
                ssh_port: 22,
            })
            .collect(),
    );
    ctx.ubuntu = Some("20.04".to_owned());
    ctx.head_public_key = Some(FAKE_HEAD_KEY.to_owned());
    ctx.storage.insert(
        "storage_account.data.container.raw".into(),
        StorageTarget::azure("dsinfraextrasdata", "raw"),
    );
    ctx.credentials.insert(
        "storage_account.data".into(),
        Credential {
            kind: CredentialKind::AccountKey,
            identity: "storage_account.data key1".into(),
            value: Secret::new(FAKE_KEY),
        },
    );
    ctx.credentials.insert(
        "sas.read".into(),
        Credential {
            kind: CredentialKind::Sas,
            identity: "sas.read (signed 2026-05-01)".into(),
            value: Secret::new(FAKE_SAS),
        },
    );
    ctx.listings
        .insert("local-copy".into(), skewed_listing("raw"));
    let cases: Vec<(&str, &str, Scope, RunPolicy, Value)> = vec![
        (
            "blobfuse",
            "blobfuse",
            Scope::All,
            RunPolicy::PerBoot,
            json!({
            "container": "storage_account.data.container.raw", "mount": "/mnt/data",
            "tmp_dir": "{temp}/blobfusetmp", "file_cache_timeout_sec": 0, "timeout": "15m"}),
        ),
        (
            "fresh",
            "blobfuse2",
            Scope::All,
            RunPolicy::PerBoot,
            json!({
            "container": "storage_account.data.container.raw", "sas": "sas.read",
            "mount": "/mnt/fresh", "cache_dir": "{temp}/fresh", "cache_timeout_sec": 0,
            "cache_size_gb": 50, "read_only": true, "disable_compression": true, "timeout": "15m"}),
        ),
        (
            "ssh_mesh",
            "ssh_mesh",
            Scope::All,
            RunPolicy::Once,
            json!({
            "prefer_infiniband": true, "nodefile": "/etc/dsinfra/nodefile", "timeout": "10m"}),
        ),
        (
            "nfs-export",
            "nfs_cache",
            Scope::All,
            RunPolicy::PerBoot,
            json!({
            "export": "10.1.0.200:/export/data", "mount": "/mnt/nfs", "cache_dir": "{temp}/fscache",
            "timeout": "10m"}),
        ),
        (
            "local-copy",
            "stage",
            Scope::All,
            RunPolicy::PerBoot,
            json!({
            "from": "storage_account.data.container.raw", "prefix": "raw/", "to": "{temp}/data",
            "decompress": true, "shard": false, "concurrency": 16, "include": "*.gz", "timeout": "2h"}),
        ),
        (
            "env-script",
            "script",
            Scope::Head,
            RunPolicy::Always,
            json!({
            "script": "echo \"training $MODEL on $DSINFRA_NODES nodes\"\n", "env": {"MODEL": "resnet50"},
            "timeout": "30m"}),
        ),
    ];
    let mut steps = vec![library::head_key_step(&ctx).expect("the head key step renders")];
    for (name, kind, scope, policy, params) in &cases {
        let params: BTreeMap<String, Value> =
            serde_json::from_value(params.clone()).expect("a map");
        let request = StepRequest {
            name,
            kind,
            scope: *scope,
            policy: *policy,
            params: &params,
        };
        let expansion = library::render(&request, &ctx).unwrap_or_else(|e| panic!("{name}: {e}"));
        steps.extend(expansion.steps);
    }
    let beeond: BTreeMap<String, Value> =
        serde_json::from_value(json!({"mount": "/mnt/scratch", "timeout": "30m"})).expect("a map");
    steps.push(library::beeond_stop("beeond", &beeond, &ctx).expect("the stop step renders"));
    // A data disk formatted as xfs, and the release that runs before it is detached.
    let disk: BTreeMap<String, Value> = serde_json::from_value(json!({
        "disk": "disk.scratch", "lun": 3, "mount": "/data/scratch", "fs": "xfs", "timeout": "10m"}))
    .expect("a map");
    let request = StepRequest {
        name: "disk-scratch",
        kind: "data_disk",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &disk,
    };
    steps.extend(
        library::render(&request, &ctx)
            .expect("the data disk step renders")
            .steps,
    );
    steps.push(
        library::data_disk_release(
            "disk-scratch",
            "disk.scratch",
            3,
            Some("/var/lib/dsinfra/steps/disk-scratch.marker"),
            &ctx,
        )
        .expect("the release renders"),
    );
    steps
}

// ---------------------------------------------------------------------------------------------
// Rendering, snapshots, shellcheck.
// ---------------------------------------------------------------------------------------------

#[test]
fn every_example_renders_and_matches_its_snapshot() {
    for file in EXAMPLES {
        let blocks = render_example(file);
        assert!(!blocks.is_empty(), "{file} has steps");
        insta::assert_snapshot!(
            format!("example-{}", file.trim_end_matches(".hcl")),
            document(&blocks)
        );
    }
    let extras = extras();
    let text: String = extras.iter().map(spec_text).collect();
    insta::assert_snapshot!("extras", text);
}

fn all_rendered_steps() -> Vec<StepSpec> {
    let mut steps: Vec<StepSpec> = EXAMPLES
        .iter()
        .flat_map(|file| render_example(file))
        .flat_map(|(_, _, expansion)| expansion.steps)
        .collect();
    steps.extend(extras());
    steps.extend(bench::renders());
    steps.extend(beeond_root::renders());
    steps.extend(nvme::renders());
    steps
}

#[test]
fn every_rendered_script_starts_strict_and_holds_no_secret() {
    let steps = all_rendered_steps();
    let kinds_seen: BTreeSet<String> = steps.iter().map(|s| s.name.clone()).collect();
    assert!(kinds_seen.len() >= 25, "{kinds_seen:?}");
    for step in &steps {
        assert!(
            step.script.starts_with("set -euo pipefail\n"),
            "{} does not start with set -euo pipefail",
            step.name
        );
        assert!(
            step.script.contains("dsinfra_done() {"),
            "{} has no check section",
            step.name
        );
        for secret in [FAKE_SAS, FAKE_KEY, "FAKESIGNATURE"] {
            assert!(
                !step.script.contains(secret),
                "{} contains a secret",
                step.name
            );
            assert!(
                !format!("{step:?}").contains(secret),
                "{} Debug shows a secret",
                step.name
            );
        }
    }
}

#[test]
fn every_rendered_script_passes_shellcheck() {
    let steps = all_rendered_steps();
    let mut failures = Vec::new();
    for step in &steps {
        let child = std::process::Command::new("shellcheck")
            .args(["-s", "bash", "-S", "style", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "shellcheck is required under CI: {e}"
                );
                eprintln!("NOT RUN: shellcheck is not installed ({e}); apt-get install shellcheck");
                return;
            }
        };
        std::io::Write::write_all(
            &mut child.stdin.take().expect("stdin is piped"),
            step.script.as_bytes(),
        )
        .expect("shellcheck reads stdin");
        let output = child.wait_with_output().expect("shellcheck runs");
        if !output.status.success() {
            failures.push(format!(
                "{}:\n{}",
                step.name,
                String::from_utf8_lossy(&output.stdout)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn blobfuse_v1_is_refused_outside_ubuntu_20_04() {
    let mut ctx = NodeContext::new(
        "x",
        "vm.gpu",
        vec![ClusterNode {
            name: "gpu".into(),
            private_ip: "10.0.0.4".into(),
            ssh_port: 22,
        }],
    );
    ctx.ubuntu = Some("22.04".into());
    let params: BTreeMap<String, Value> =
        serde_json::from_value(json!({"container": "storage_account.data.container.raw"}))
            .expect("map");
    let request = StepRequest {
        name: "blobfuse",
        kind: "blobfuse",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &params,
    };
    assert_eq!(
        library::render(&request, &ctx)
            .expect_err("the render is refused")
            .to_string(),
        "step `blobfuse`: blobfuse v1 has no package for Ubuntu 22.04 (only 20.04, and it is retired \
         in September 2026); use step \"blobfuse2\" instead"
    );
}

#[test]
fn unresolved_inputs_and_bad_parameters_are_named_exactly() {
    let ctx = NodeContext::new(
        "x",
        "cluster.c",
        vec![ClusterNode {
            name: "c-0".into(),
            private_ip: "10.0.0.4".into(),
            ssh_port: 22,
        }],
    );
    let params: BTreeMap<String, Value> =
        serde_json::from_value(json!({"container": "storage_account.data.container.raw"}))
            .expect("map");
    let request = StepRequest {
        name: "blobfuse2",
        kind: "blobfuse2",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &params,
    };
    assert_eq!(
        library::render(&request, &ctx).expect_err("the render is refused"),
        LibraryError::Unresolved {
            step: "blobfuse2".into(),
            address: "storage_account.data.container.raw".into(),
            what: "a container or share",
        }
    );
    let mesh: BTreeMap<String, Value> = BTreeMap::new();
    let request = StepRequest {
        name: "ssh_mesh",
        kind: "ssh_mesh",
        scope: Scope::All,
        policy: RunPolicy::Once,
        params: &mesh,
    };
    assert_eq!(
        library::render(&request, &ctx)
            .expect_err("the render is refused")
            .to_string(),
        "step `ssh_mesh`: the head's SSH public key is not known yet: run \
         steps::library::head_key_step on the head first and pass the key it prints in \
         NodeContext::head_public_key"
    );
    let beeond: BTreeMap<String, Value> =
        serde_json::from_value(json!({"version": "8.0.1"})).expect("map");
    let mut with_key = ctx.clone();
    with_key.head_public_key = Some(FAKE_HEAD_KEY.into());
    let request = StepRequest {
        name: "beeond",
        kind: "beeond",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &beeond,
    };
    assert_eq!(
        library::render(&request, &with_key)
            .expect_err("the render is refused")
            .to_string(),
        "step `beeond`: parameter `version`: \"8.0.1\": dsinfra supports BeeGFS 7.4.x (8.x dropped \
         helperd and renamed the tools beeond relies on)"
    );
    let bad_path: BTreeMap<String, Value> = serde_json::from_value(
        json!({"container": "storage_account.data.container.raw", "mount": "/mnt/my data"}),
    )
    .expect("map");
    let mut with_storage = ctx.clone();
    with_storage.storage.insert(
        "storage_account.data.container.raw".into(),
        StorageTarget::azure("acct1", "raw"),
    );
    with_storage.credentials.insert(
        "storage_account.data".into(),
        Credential {
            kind: CredentialKind::AccountKey,
            identity: "k".into(),
            value: Secret::new(FAKE_KEY),
        },
    );
    let request = StepRequest {
        name: "blobfuse2",
        kind: "blobfuse2",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &bad_path,
    };
    assert_eq!(
        library::render(&request, &with_storage)
            .expect_err("the render is refused")
            .to_string(),
        "step `blobfuse2`: parameter `mount`: \"/mnt/my data\" must not contain whitespace, quotes, `\\`, `$` or backquotes"
    );
}

#[test]
fn a_stage_into_the_beeond_mount_is_gated_on_beegfs() {
    let blocks = render_example("nd40-beeond.hcl");
    let stage = blocks[0]
        .2
        .steps
        .iter()
        .find(|s| s.name == "stage")
        .expect("a stage step");
    assert!(
        stage
            .script
            .contains("findmnt -n -t beegfs '/mnt/scratch' >/dev/null ||")
    );
    // Order on the cluster: MOFED, its check, BeeOND install, mesh, start (head), health, stage.
    let names: Vec<&str> = blocks[0].2.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mofed",
            "mofed.verify",
            "beeond.install",
            "beeond.mesh",
            "beeond.start",
            "beeond.health",
            "stage"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Running on real sshd hosts.
// ---------------------------------------------------------------------------------------------

/// Lines printed by each step, collected from runner events.
type Lines = Arc<Mutex<Vec<(String, String, String)>>>;

fn options_with_lines(hosts: &TestHosts, run: &str) -> (RunOptions, Lines) {
    let mut options = RunOptions::new(run, hosts.dir().join("logs"), hosts.auth());
    options.wait = quick_wait();
    options.reboot_wait = quick_wait();
    let lines: Lines = Arc::default();
    let sink = Arc::clone(&lines);
    options.events = Some(Arc::new(move |event: &Event<'_>| {
        if let Event::Line {
            node, step, line, ..
        } = event
        {
            sink.lock().expect("no poisoned lock").push((
                (*node).to_owned(),
                (*step).to_owned(),
                (*line).to_owned(),
            ));
        }
    }));
    (options, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_check_section_reports_not_done_on_a_fresh_host() {
    let Some(hosts) = sshd::start(1) else { return };
    let checks: Vec<StepSpec> = all_rendered_steps()
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let mut check = library::check_only(step);
            // One node runs every step, whatever its scope; examples reuse step names.
            check.scope = Scope::All;
            check.name = format!("c{i:02}.{}", check.name);
            check
        })
        .collect();
    let (options, lines) = options_with_lines(&hosts, "checks");
    let report = steps::run(&[hosts.hosts[0].node()], &checks, &options)
        .await
        .expect("valid input");
    assert!(report.success(), "{report}");
    let lines = lines.lock().expect("no poisoned lock");
    for check in &checks {
        let said: Vec<&str> = lines
            .iter()
            .filter(|(_, step, _)| *step == check.name)
            .map(|(_, _, line)| line.as_str())
            .collect();
        // Nothing to stop on a host that never ran BeeOND: the stop step's check is "done";
        // likewise nothing to release on a host without the data disk.
        // fio is a Debian package the tests install: its install step is done here.
        let fio_here = check.name.ends_with(".storage_bench.install.check")
            && std::process::Command::new("fio")
                .arg("--version")
                .output()
                .is_ok();
        let expected = if check.name.ends_with(".beeond.stop.check")
            || check.name.ends_with(".release.check")
            || fio_here
        {
            "dsinfra-check: done"
        } else {
            "dsinfra-check: not done"
        };
        assert_eq!(said, [expected], "{}", check.name);
    }
}

fn files_under(root: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable directory") {
            let entry = entry.expect("a directory entry");
            let path = entry.path();
            if path.file_name().is_some_and(|n| n == ".dsinfra-stage") {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path
                    .strip_prefix(root)
                    .expect("under root")
                    .display()
                    .to_string();
                let modified = entry
                    .metadata()
                    .expect("metadata")
                    .modified()
                    .expect("mtime");
                out.insert(
                    relative,
                    (std::fs::read(&path).expect("readable file"), modified),
                );
            }
        }
    }
    out
}

fn copied_lists(state: &Path, ranks: usize) -> Vec<Vec<String>> {
    (0..ranks)
        .map(|r| {
            std::fs::read_to_string(state.join(format!("rank-{r}.copied")))
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_copies_each_shard_once_on_four_hosts_and_a_rerun_copies_nothing() {
    let Some(azcopy) = azcopy_binary() else {
        return;
    };
    let Some(azurite) = Azurite::start() else {
        return;
    };
    let Some(hosts) = sshd::start(4) else { return };

    // The dataset: 64 gzip content-encoded blobs of skewed sizes, plus blobs the prefix excludes.
    let key = AccountKey::new(ACCOUNT, KEY).expect("the dev key is valid");
    let admin =
        BlobStore::new(&azurite.endpoint(), Auth::AccountKey(key.clone())).expect("endpoint");
    admin
        .create_container("cosmoflow")
        .await
        .expect("create container");
    let gzip = PutOptions {
        content_encoding: Some("gzip".into()),
        ..PutOptions::default()
    };
    let files = dataset::files();
    for (name, content) in &files {
        admin
            .put(
                "cosmoflow",
                &format!("cosmoUniverse/train/{name}.gz"),
                &common::gzip::gzip(content),
                &gzip,
            )
            .await
            .expect("upload");
    }
    admin
        .put(
            "cosmoflow",
            "other/readme.txt",
            b"not staged\n",
            &PutOptions::default(),
        )
        .await
        .expect("upload");

    let token = SasSpec::container(
        "cosmoflow",
        chrono::Utc::now() + chrono::TimeDelta::hours(1),
    )
    .permissions(Permissions::READ_LIST)
    .https_only(false)
    .sign(&key)
    .expect("sign");
    // The engine lists once, with the same read-only SAS the nodes get.
    let reader = BlobStore::new(&azurite.endpoint(), Auth::sas_token(&token)).expect("endpoint");
    let listing = reader
        .list("cosmoflow", "cosmoUniverse/", false)
        .await
        .expect("list");
    assert_eq!(listing.len(), dataset::FILES);

    let root = hosts.dir().join("scratch");
    let to = root.join("cosmoflow");
    let temp = hosts.dir().join("temp");
    std::fs::create_dir_all(&temp).expect("temp dir");
    let mut ctx = cluster_context("stage-test", &hosts);
    ctx.temp_dir = Some(temp.display().to_string());
    ctx.azcopy = Some(azcopy.display().to_string());
    let mut target = StorageTarget::azure(ACCOUNT, "cosmoflow");
    target.blob_endpoint = azurite.endpoint();
    ctx.storage
        .insert("storage_account.data.container.cosmoflow".into(), target);
    ctx.credentials.insert(
        "sas.read".into(),
        Credential {
            kind: CredentialKind::Sas,
            identity: "sas.read".into(),
            value: Secret::new(token.expose_query()),
        },
    );
    ctx.listings.insert("stage".into(), listing.clone());
    let params: BTreeMap<String, Value> = serde_json::from_value(json!({
        "from": "storage_account.data.container.cosmoflow",
        "sas": "sas.read",
        "prefix": "cosmoUniverse/",
        "to": to.display().to_string(),
        "decompress": true,
        "shard": true,
        "timeout": "5m",
    }))
    .expect("a map");
    let request = StepRequest {
        name: "stage",
        kind: "stage",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &params,
    };
    let expansion = library::render(&request, &ctx).expect("stage renders");
    assert_eq!(expansion.steps.len(), 1);
    assert!(!expansion.steps[0].script.contains(token.expose_query()));
    // The lists travel as the node's own file, not in the script.
    assert!(!expansion.steps[0].script.contains(".tfrecord"));
    let nodes: Vec<_> = hosts.hosts.iter().map(common::sshd::Host::node).collect();

    // First run: every rank copies its shard.
    let (options, lines) = options_with_lines(&hosts, "stage-1");
    let report = steps::run(&nodes, &expansion.steps, &options)
        .await
        .expect("valid input");
    assert!(
        report.success(),
        "{report}\n{:#?}",
        lines.lock().expect("lock")
    );

    // The target holds the whole dataset, decompressed and byte-identical, under its real name.
    let staged = files_under(&to);
    let expected: BTreeMap<String, &Vec<u8>> = files
        .iter()
        .map(|(name, content)| (format!("train/{name}"), content))
        .collect();
    assert_eq!(
        staged.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (name, content) in &expected {
        assert!(
            staged[name].0 == **content,
            "{name} differs from the original"
        );
    }

    // Each rank wrote exactly its own size-balanced shard, and no file was written twice.
    let plan = library::stage_shards(&listing, "cosmoUniverse/", None, 4, true).expect("valid");
    let copied = copied_lists(&to.join(".dsinfra-stage"), 4);
    let mut all: Vec<&String> = copied.iter().flatten().collect();
    all.sort();
    let unique: BTreeSet<&String> = all.iter().copied().collect();
    assert_eq!(all.len(), dataset::FILES, "files written");
    assert_eq!(unique.len(), dataset::FILES, "no file written twice");
    for shard in &plan.shards {
        let mut own: Vec<String> = shard
            .entries
            .iter()
            .map(|(_, local, _)| local.clone())
            .collect();
        own.sort();
        let mut wrote = copied[shard.rank].clone();
        wrote.sort();
        assert_eq!(wrote, own, "rank {} wrote its own shard", shard.rank);
    }
    {
        let lines = lines.lock().expect("lock");
        for shard in &plan.shards {
            let n = shard.entries.len();
            let wanted = format!(
                "dsinfra: rank {}: copying {n} of {n} file(s) with azcopy ",
                shard.rank
            );
            assert!(
                lines
                    .iter()
                    .any(|(node, _, l)| *node == format!("host{}", shard.rank)
                        && l.starts_with(&wanted)),
                "rank {} did not report copying its {n} files: {lines:#?}",
                shard.rank
            );
        }
    }
    let items: Vec<shard::Item> = listing
        .iter()
        .map(|b| shard::Item {
            name: b.name.clone(),
            size: b.size,
        })
        .collect();
    let by_size = shard::balance(&items, &shard::by_size(&items, 4));
    let modulo = shard::balance(&items, &shard::by_name_modulo(&items, 4));
    assert!(
        by_size <= 1.02 && modulo > 1.5,
        "balance: size {by_size}, modulo {modulo}"
    );

    // Re-run with the markers in place: the check section says done, nothing is touched.
    let mut options2 = options_with_lines(&hosts, "stage-2");
    options2.0.forced.insert("stage".into());
    let report = steps::run(&nodes, &expansion.steps, &options2.0)
        .await
        .expect("valid input");
    assert!(report.success(), "{report}");
    assert_eq!(
        options2
            .1
            .lock()
            .expect("lock")
            .iter()
            .filter(|(_, _, l)| l.contains("already done"))
            .count(),
        4
    );

    // Re-run without the done markers: every rank finds its files present and starts no azcopy.
    for r in 0..4 {
        std::fs::remove_file(to.join(format!(".dsinfra-stage/rank-{r}.done")))
            .expect("marker exists");
    }
    let (mut options3, lines3) = options_with_lines(&hosts, "stage-3");
    options3.forced.insert("stage".into());
    let report = steps::run(&nodes, &expansion.steps, &options3)
        .await
        .expect("valid input");
    assert!(report.success(), "{report}");
    {
        let lines3 = lines3.lock().expect("lock");
        assert_eq!(
            lines3
                .iter()
                .filter(|(_, _, l)| l.contains("nothing to copy"))
                .count(),
            4,
            "{lines3:#?}"
        );
        assert!(
            !lines3.iter().any(|(_, _, l)| l.contains("copying")),
            "{lines3:#?}"
        );
    }
    let again = files_under(&to);
    for (name, (_, modified)) in &staged {
        assert_eq!(again[name].1, *modified, "{name} was rewritten");
    }
    assert_eq!(copied_lists(&to.join(".dsinfra-stage"), 4), copied);

    // One file lost: only its owner copies it again, and only it.
    let lost = &plan.shards[2].entries[0].1;
    std::fs::remove_file(to.join(lost)).expect("staged file exists");
    for r in 0..4 {
        std::fs::remove_file(to.join(format!(".dsinfra-stage/rank-{r}.done")))
            .expect("marker exists");
    }
    let (mut options4, lines4) = options_with_lines(&hosts, "stage-4");
    options4.forced.insert("stage".into());
    let report = steps::run(&nodes, &expansion.steps, &options4)
        .await
        .expect("valid input");
    assert!(report.success(), "{report}");
    let lines4 = lines4.lock().expect("lock");
    let copying: Vec<&(String, String, String)> = lines4
        .iter()
        .filter(|(_, _, l)| l.contains("copying"))
        .collect();
    assert_eq!(copying.len(), 1, "{lines4:#?}");
    assert_eq!(copying[0].0, "host2");
    assert!(copying[0].2.contains("copying 1 of"), "{}", copying[0].2);
    assert!(files_under(&to)[lost].0 == *expected[lost]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ssh_mesh_and_nodefile_run_for_real_on_four_hosts() {
    let Some(hosts) = sshd::start(4) else { return };
    let mut ctx = cluster_context("mesh-test", &hosts);
    let ssh_dir = hosts.dir().join("mesh-ssh");
    let authorized = hosts.dir().join("authorized_keys");
    let client_line = std::fs::read_to_string(&authorized).expect("the harness's authorized keys");
    ctx.mesh = library::MeshSettings {
        user: sshd::TEST_USER.into(),
        ssh_dir: ssh_dir.display().to_string(),
        authorized_keys: authorized.display().to_string(),
        admin_dir: Some(hosts.dir().join("admin-mesh").display().to_string()),
    };
    let nodes: Vec<_> = hosts.hosts.iter().map(common::sshd::Host::node).collect();

    // 1. The head makes its key and prints the public half.
    let head_key = library::head_key_step(&ctx).expect("renders");
    let (options, lines) = options_with_lines(&hosts, "mesh-1");
    let report = steps::run(&nodes, std::slice::from_ref(&head_key), &options)
        .await
        .expect("valid");
    assert!(report.success(), "{report}");
    let key = lines
        .lock()
        .expect("lock")
        .iter()
        .find_map(|(node, _, line)| {
            (node == "host0")
                .then(|| library::parse_head_key(line))
                .flatten()
        })
        .expect("the head printed its key");
    let private = std::fs::read_to_string(ssh_dir.join("id_ed25519"))
        .expect("the private key is on the head");
    assert_eq!(
        std::fs::metadata(ssh_dir.join("id_ed25519"))
            .expect("exists")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // 2. The public key travels to every node; the nodefile is written on the head.
    ctx.head_public_key = Some(key.clone());
    let nodefile = hosts.dir().join("etc/nodefile");
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
    let expansion = library::render(&request, &ctx).expect("renders");
    let mut all = vec![head_key.clone()];
    all.extend(expansion.steps.clone());
    for round in 0..2 {
        let (mut options, lines) = options_with_lines(&hosts, &format!("mesh-2-{round}"));
        if round == 1 {
            options.forced.extend(all.iter().map(|s| s.name.clone()));
        }
        let report = steps::run(&nodes, &all, &options).await.expect("valid");
        assert!(
            report.success(),
            "{report}\n{:#?}",
            lines.lock().expect("lock")
        );
        // The key is appended once although four nodes appended it concurrently, twice.
        let text = std::fs::read_to_string(&authorized).expect("authorized keys");
        assert_eq!(text.lines().filter(|l| *l == key).count(), 1, "{text}");
        assert!(
            text.starts_with(&client_line),
            "existing lines are kept first"
        );
        assert_eq!(
            std::fs::read_to_string(&nodefile).expect("nodefile written"),
            "127.0.0.1\n127.0.0.1\n127.0.0.1\n127.0.0.1\n"
        );
        let config = std::fs::read_to_string(ssh_dir.join("config")).expect("mesh ssh config");
        assert_eq!(
            config.matches("# BEGIN dsinfra mesh mesh-test").count(),
            1,
            "{config}"
        );
    }
    // The admin user's mesh: its own key pair (0600), a config block naming its key; the public half authorized (the hosts share one filesystem).
    let admin = hosts.dir().join("admin-mesh");
    let admin_key = admin.join("dsinfra_mesh_ed25519");
    assert_eq!(
        std::fs::metadata(&admin_key)
            .expect("the admin mesh key exists")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let admin_private = std::fs::read_to_string(&admin_key).expect("readable");
    assert_ne!(
        admin_private, private,
        "the admin mesh has a key of its own"
    );
    let admin_public =
        std::fs::read_to_string(admin.join("dsinfra_mesh_ed25519.pub")).expect("the public half");
    assert!(
        std::fs::read_to_string(admin.join("authorized_keys"))
            .expect("authorized")
            .lines()
            .any(|l| l == admin_public.trim())
    );
    let admin_config = std::fs::read_to_string(admin.join("config")).expect("admin config");
    // No key is pinned here (the fabric test pins them): trusted on first use, as root's.
    assert!(
        admin_config.contains("StrictHostKeyChecking accept-new"),
        "{admin_config}"
    );
    assert!(
        admin_config.contains(&format!("IdentityFile {}", admin_key.display())),
        "{admin_config}"
    );
    assert_eq!(
        admin_config
            .matches("# BEGIN dsinfra mesh mesh-test")
            .count(),
        1,
        "{admin_config}"
    );
    // Written atomically: no temp file is left next to the nodefile.
    let leftovers: Vec<_> = std::fs::read_dir(nodefile.parent().expect("a parent"))
        .expect("readable")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(leftovers, [std::ffi::OsString::from("nodefile")]);
    // The private key never went through dsinfra: no log holds it.
    let logs = read_all(&hosts.dir().join("logs"));
    let body: String = private
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    assert!(!logs.contains(&body[..40]), "the private key reached a log");
    let admin_body: String = admin_private
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    assert!(
        !logs.contains(&admin_body[..40]),
        "the admin mesh's private key reached a log"
    );
    assert!(logs.contains(&key), "the public key is in the head's log");
}

fn read_all(dir: &Path) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    out
}
