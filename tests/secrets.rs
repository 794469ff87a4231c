//! The secret search: an end-to-end run of the real binary against an in-process emulator, then
//! a search of everything that run left behind for every secret it used.
//!
//! The manifest has a storage account, a container and a SAS on it. The run is apply, plan
//! --json, status, output (without --show-secrets), destroy --keep-data, every command with
//! `DSINFRA_LOG=debug` and `--log-file` (one debug log for the whole run; `status` logs to stderr
//! instead, so that path is searched too). The secrets are both storage keys (read from the
//! emulator with listKeys directly) and the SAS token (from `output --show-secrets`, the one
//! sanctioned place it appears). Each is searched for raw, percent-encoded and base64-encoded in
//! every captured stdout and stderr, the debug log and every file under `.dsinfra`: zero hits.
//! The `--show-secrets` output is searched too and must hit, which proves the search can find
//! what it looks for, and the log must hold debug events, which proves it was written.
//! A second test holds that `--show-secrets` without a connection is refused with its reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use dsinfra::connect::builtin_emulator_config;
use dsinfra::emulator::{self, EmulatorHandle};
use dsinfra::state::SecretIdentity;
use serde_json::Value;

const SUB: &str = "00000000-0000-0000-0000-000000000000";
const SCALE: f64 = 0.001;

const MANIFEST: &str = r#"experiment = "secrets"
azure { location = "southcentralus" }

storage_account "data" {
  container "raw" {}
}

sas "read" {
  container  = storage_account.data.container.raw
  expires_in = "72h"
}

output "sas" {
  value     = sas.read
  sensitive = true
}
"#;

struct World {
    handle: EmulatorHandle,
    dir: tempfile::TempDir,
    /// The debug log every command appends to (outside `.dsinfra`, searched separately).
    log: PathBuf,
    /// The emulated cloud's files live apart from the workspace: they hold the keys by design.
    _cloud: tempfile::TempDir,
}

impl World {
    async fn new() -> Self {
        Self::with_manifest(MANIFEST).await
    }

    /// A workspace with `m.hcl` (the given text) and the demo SSH key as `demo.pub`.
    async fn with_manifest(manifest: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let cloud = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("m.hcl"), manifest).expect("manifest written");
        let key = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/keys/demo.pub");
        std::fs::copy(key, dir.path().join("demo.pub")).expect("the demo key is copied");
        let handle = emulator::start(builtin_emulator_config(Some(cloud.path()), SCALE))
            .await
            .expect("the emulator starts");
        let log = dir.path().join("debug.log");
        Self {
            handle,
            dir,
            log,
            _cloud: cloud,
        }
    }

    async fn run(&self, args: &[&str]) -> Output {
        let endpoint = self.handle.endpoint();
        self.run_with(&[args, &["--endpoint", &endpoint]].concat())
            .await
    }

    /// Runs dsinfra with `args` (no connection unless they name one), logging at debug level
    /// into the run's log file.
    async fn run_with(&self, args: &[&str]) -> Output {
        let log = self.log.display().to_string();
        self.spawn(&[args, &["--log-file", &log]].concat()).await
    }

    /// Runs dsinfra against the emulator with its debug log on stderr (no `--log-file`).
    async fn run_logging_to_stderr(&self, args: &[&str]) -> Output {
        let endpoint = self.handle.endpoint();
        self.spawn(&[args, &["--endpoint", &endpoint]].concat())
            .await
    }

    async fn spawn(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsinfra"));
        cmd.current_dir(self.dir.path())
            .args(args)
            .env("DSINFRA_EMULATOR_LATENCY_SCALE", SCALE.to_string())
            .env("NO_COLOR", "1")
            .env("DSINFRA_LOG", "debug")
            .env_remove("AZURE_SUBSCRIPTION_ID")
            .stdin(Stdio::null());
        tokio::task::spawn_blocking(move || cmd.output().expect("dsinfra runs"))
            .await
            .expect("joined")
    }

    /// Runs dsinfra, asserts success, and returns stdout and stderr together.
    async fn ok(&self, args: &[&str]) -> String {
        ok_text(args, &self.run(args).await)
    }

    fn state(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.path().join(".dsinfra/m/state.json"))
            .expect("the state exists");
        serde_json::from_str(&text).expect("the state is JSON")
    }

    /// Both keys of the experiment's storage account, read from the emulator with listKeys.
    async fn storage_keys(&self) -> Vec<String> {
        let state = self.state();
        let id = record(&state, "storage_account.data.account")["id"]
            .as_str()
            .expect("the account has an id")
            .to_owned();
        assert!(id.starts_with(&format!("/subscriptions/{SUB}/")), "{id}");
        let body = self
            .arm(
                reqwest::Method::POST,
                &format!("{id}/listKeys"),
                "2024-01-01",
            )
            .await;
        let keys: Vec<String> = body["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| k["value"].as_str().expect("a key value").to_owned())
            .collect();
        assert_eq!(keys.len(), 2, "{body}");
        keys
    }

    /// The JSON answer to `method` on `path` (an ARM id and what follows it) at `api_version`,
    /// asked of the emulator directly.
    async fn arm(&self, method: reqwest::Method, path: &str, api_version: &str) -> Value {
        reqwest::Client::new()
            .request(method, format!("{}{path}", self.handle.endpoint()))
            .query(&[("api-version", api_version)])
            .bearer_auth("test")
            .send()
            .await
            .expect("the emulator answers")
            .json()
            .await
            .expect("JSON")
    }
}

/// The record of the resource at `address` in a state read as JSON.
fn record<'a>(state: &'a Value, address: &str) -> &'a Value {
    state["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["address"] == address)
        .unwrap_or_else(|| panic!("{address} is in the state"))
}

/// stdout and stderr together, after asserting the command succeeded.
fn ok_text(args: &[&str], out: &Output) -> String {
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "dsinfra {args:?} failed:\n{text}");
    text
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// Percent-encoding of everything but RFC 3986's unreserved characters.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Percent-decoding (the SAS signature travels encoded in the query).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ASCII");
            out.push(u8::from_str_radix(hex, 16).expect("hex escape"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("UTF-8")
}

/// The forms a secret could leak in: as is, percent-encoded (lower- and upper-case escapes), and
/// base64-encoded.
fn forms(secret: &str) -> Vec<String> {
    let encoded = percent_encode(secret);
    let mut all = vec![
        secret.to_owned(),
        encoded.clone(),
        encoded.to_ascii_lowercase(),
        base64::engine::general_purpose::STANDARD.encode(secret),
    ];
    all.dedup();
    all
}

/// The secrets (by name) found in `text`, in any form.
fn hits(text: &str, secrets: &[(String, String)]) -> Vec<String> {
    secrets
        .iter()
        .filter(|(_, s)| forms(s).iter().any(|f| text.contains(f.as_str())))
        .map(|(name, _)| name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_state_plan_terminal_or_files() {
    let w = World::new().await;
    let mut captured: Vec<(String, String)> = Vec::new();
    captured.push((
        "apply".into(),
        w.ok(&["apply", "m.hcl", "--auto-approve"]).await,
    ));

    // The state records the SAS by identity only.
    let state = w.state();
    let sas = state["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["address"] == "sas.read")
        .expect("the SAS is in the state")
        .clone();
    let identity: SecretIdentity =
        serde_json::from_value(sas["secrets"]["token"].clone()).expect("a SAS identity");
    assert_eq!(identity.permissions, "rl");
    assert!(identity.scope.ends_with("/raw"), "{}", identity.scope);
    let lineage = state["lineage"].as_str().expect("a lineage").to_owned();

    captured.push((
        "plan --json".into(),
        w.ok(&["plan", "m.hcl", "--json"]).await,
    ));
    let status = w.run_logging_to_stderr(&["status", "m.hcl"]).await;
    let status = ok_text(&["status"], &status);
    // Positive control: the debug log really went to stderr here.
    assert!(status.contains("DEBUG"), "{status}");
    captured.push(("status".into(), status));
    let hidden = w.ok(&["output", "m.hcl"]).await;
    assert!(hidden.contains("sas = (sensitive)"), "{hidden}");
    captured.push(("output".into(), hidden));
    let refused = w.run(&["output", "m.hcl", "sas"]).await;
    assert!(!refused.status.success());
    captured.push((
        "output sas".into(),
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&refused.stdout),
            String::from_utf8_lossy(&refused.stderr)
        ),
    ));

    // The token, re-derived on request: the one apply signed (its fingerprint is the state's),
    // and the same every time.
    let shown = w.run(&["output", "m.hcl", "sas", "--show-secrets"]).await;
    let shown_text = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.status.success(),
        "{shown_text}\n{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let token = shown_text.trim().to_owned();
    assert!(token.contains("sig="), "{token}");
    assert!(token.contains("sp=rl"), "{token}");
    assert_eq!(
        SecretIdentity::fingerprint(lineage.as_bytes(), token.as_bytes()),
        identity.fingerprint,
        "the token shown is not the one apply signed"
    );
    let again = w.ok(&["output", "m.hcl", "sas", "--show-secrets"]).await;
    assert_eq!(again.trim(), token);

    let keys = w.storage_keys().await;
    captured.push((
        "destroy --keep-data".into(),
        w.ok(&["destroy", "m.hcl", "--auto-approve", "--keep-data"])
            .await,
    ));

    let signature = token
        .split('&')
        .find_map(|p| p.strip_prefix("sig="))
        .expect("a signature")
        .to_owned();
    let secrets = vec![
        ("key1".to_owned(), keys[0].clone()),
        ("key2".to_owned(), keys[1].clone()),
        ("sas token".to_owned(), token.clone()),
        ("sas signature".to_owned(), percent_decode(&signature)),
    ];

    // The search finds what it looks for: the sanctioned output has the token.
    assert_eq!(
        hits(&shown_text, &secrets),
        ["sas token", "sas signature"],
        "the search cannot see the token where it must be"
    );

    let leaks = leaks(&w, &captured, &secrets);
    assert!(leaks.is_empty(), "secrets leaked: {leaks:#?}");
}

/// Where the run left any of `secrets`: the commands' output, the debug log, the files under
/// `.dsinfra`.
fn leaks(w: &World, captured: &[(String, String)], secrets: &[(String, String)]) -> Vec<String> {
    let mut leaks = Vec::new();
    for (what, text) in captured {
        for name in hits(text, secrets) {
            leaks.push(format!("{name} in the output of `dsinfra {what}`"));
        }
    }
    // Positive control: the log exists and holds the debug events of every command (ARM requests
    // and the SAS signing's listKeys among them), so a zero-hit search of it means something.
    let log = std::fs::read_to_string(&w.log).expect("the debug log was written");
    assert!(log.contains("DEBUG"), "{log}");
    assert!(
        log.contains("listKeys"),
        "no listKeys request was logged:\n{log}"
    );
    for name in hits(&log, secrets) {
        leaks.push(format!("{name} in the debug log"));
    }
    let files = files_under(&w.dir.path().join(".dsinfra"));
    assert!(files.iter().any(|f| f.ends_with("state.json")), "{files:?}");
    for file in files {
        let text = String::from_utf8_lossy(&std::fs::read(&file).expect("readable")).into_owned();
        for name in hits(&text, secrets) {
            leaks.push(format!("{name} in {}", file.display()));
        }
    }
    leaks
}

/// Guards the rule that a SAS is never stored: without a connection to re-sign it, there is
/// nothing to print, and the command says why instead of printing something else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn showing_a_sas_without_a_connection_is_refused_with_the_reason() {
    let w = World::new().await;
    w.ok(&["apply", "m.hcl", "--auto-approve"]).await;
    let out = w
        .run_with(&["output", "m.hcl", "sas", "--show-secrets"])
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: a SAS is not stored: printing it needs a connection to re-sign it (--emulator or --endpoint)\n"
    );
}

const VM_MANIFEST: &str = r#"experiment = "outs"
azure { location = "southcentralus" }

network "main" { ssh_from = ["203.0.113.7/32"] }

vm "gpu" {
  size    = "Standard_NC4as_T4_v3"
  ssh_key = file("demo.pub")
}

output "ssh" { value = "ssh azureuser@${vm.gpu.public_ip}" }
output "region" { value = "southcentralus" }
output "private" {
  value     = vm.gpu.private_ip
  sensitive = true
}
"#;

/// Guards that apply records the outputs, with the public IP only ARM knew filled in, so that
/// `dsinfra output` prints them without a connection; and that a sensitive output is never
/// stored, only computed again when asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_stores_resolved_outputs_but_never_sensitive_ones() {
    let w = World::with_manifest(VM_MANIFEST).await;
    w.ok(&["apply", "m.hcl", "--auto-approve"]).await;

    let state = w.state();
    let ip_id = record(&state, "vm.gpu.public_ip")["id"]
        .as_str()
        .expect("the public IP has an id");
    let body = w.arm(reqwest::Method::GET, ip_id, "2024-05-01").await;
    let ip = body["properties"]["ipAddress"]
        .as_str()
        .expect("the emulator gave the public IP an address")
        .to_owned();
    assert_eq!(
        state["outputs"],
        serde_json::json!({"region": "southcentralus", "ssh": format!("ssh azureuser@{ip}")}),
        "the outputs in the state"
    );

    // No connection: the stored values are all `output` needs.
    let out = w.run_with(&["output", "m.hcl"]).await;
    let text = ok_text(&["output"], &out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "ssh     = \"ssh azureuser@{ip}\"\nregion  = \"southcentralus\"\nprivate = (sensitive)\n"
        ),
        "{text}"
    );
    let one = w.run_with(&["output", "m.hcl", "ssh"]).await;
    assert_eq!(
        String::from_utf8_lossy(&one.stdout),
        format!("ssh azureuser@{ip}\n")
    );
}

/// Guards `signed_at`: a SAS with an absolute `expiry` records when it was signed, so
/// `output --show-secrets` re-derives exactly the token apply signed (before, its signing time
/// was lost and the command could only refuse).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_expiry_sas_is_shown_as_apply_signed_it() {
    let expiry = (chrono::Utc::now() + chrono::TimeDelta::days(3))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let manifest = MANIFEST.replace(
        "expires_in = \"72h\"",
        &format!("expiry     = \"{expiry}\""),
    );
    assert_ne!(
        manifest, MANIFEST,
        "the test manifest sets an absolute expiry"
    );
    let w = World::with_manifest(&manifest).await;
    w.ok(&["apply", "m.hcl", "--auto-approve"]).await;
    let state = w.state();
    let identity: SecretIdentity =
        serde_json::from_value(record(&state, "sas.read")["secrets"]["token"].clone())
            .expect("a SAS identity");
    assert!(identity.signed_at.is_some(), "{identity:?}");
    assert_eq!(
        identity
            .expiry
            .map(|e| e.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        Some(expiry)
    );
    let shown = w.ok(&["output", "m.hcl", "sas", "--show-secrets"]).await;
    let token = shown.trim();
    assert!(token.contains("sig="), "{token}");
    let lineage = state["lineage"].as_str().expect("a lineage");
    assert_eq!(
        SecretIdentity::fingerprint(lineage.as_bytes(), token.as_bytes()),
        identity.fingerprint,
        "the token shown is not the one apply signed"
    );
}
