//! The secret search: an end-to-end run of the real binary against an in-process emulator, then
//! a search of everything that run left behind for every secret it used.
//!
//! The manifest has a storage account, a container and a SAS on it. The run is apply, plan
//! --json, status, output (without --show-secrets), destroy --keep-data, with `RUST_LOG=debug`
//! set (dsinfra installs no tracing subscriber today, so this guards the day one is added
//! without a redaction layer). The secrets are both storage keys (read from the emulator with
//! listKeys directly) and the SAS token (from `output --show-secrets`, the one sanctioned place
//! it appears). Each is searched for raw, percent-encoded and base64-encoded in every captured
//! stdout and stderr and every file under `.dsinfra`: zero hits. The `--show-secrets` output is
//! searched too and must hit, which proves the search can find what it looks for.
//! A second test holds that `--show-secrets` without a connection is refused with its reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use dsinfra::cli::connect::builtin_emulator_config;
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
    /// The emulated cloud's files live apart from the workspace: they hold the keys by design.
    _cloud: tempfile::TempDir,
}

impl World {
    async fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let cloud = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("m.hcl"), MANIFEST).expect("manifest written");
        let handle = emulator::start(builtin_emulator_config(Some(cloud.path()), SCALE))
            .await
            .expect("the emulator starts");
        Self {
            handle,
            dir,
            _cloud: cloud,
        }
    }

    async fn run(&self, args: &[&str]) -> Output {
        let endpoint = self.handle.endpoint();
        self.run_with(&[args, &["--endpoint", &endpoint]].concat())
            .await
    }

    /// Runs dsinfra with exactly `args` (no connection unless they name one).
    async fn run_with(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsinfra"));
        cmd.current_dir(self.dir.path())
            .args(args)
            .env("DSINFRA_EMULATOR_LATENCY_SCALE", SCALE.to_string())
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "debug")
            .env_remove("AZURE_SUBSCRIPTION_ID")
            .stdin(Stdio::null());
        tokio::task::spawn_blocking(move || cmd.output().expect("dsinfra runs"))
            .await
            .expect("joined")
    }

    /// Runs dsinfra, asserts success, and returns stdout and stderr together.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "dsinfra {args:?} failed:\n{text}");
        text
    }

    fn state(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.path().join(".dsinfra/m/state.json"))
            .expect("the state exists");
        serde_json::from_str(&text).expect("the state is JSON")
    }

    /// Both keys of the experiment's storage account, read from the emulator with listKeys.
    async fn storage_keys(&self) -> Vec<String> {
        let state = self.state();
        let id = state["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["address"] == "storage_account.data.account")
            .and_then(|r| r["id"].as_str())
            .expect("the account is in the state")
            .to_owned();
        assert!(id.starts_with(&format!("/subscriptions/{SUB}/")), "{id}");
        let body: Value = reqwest::Client::new()
            .post(format!("{}{id}/listKeys", self.handle.endpoint()))
            .query(&[("api-version", "2024-01-01")])
            .bearer_auth("test")
            .send()
            .await
            .expect("the emulator answers")
            .json()
            .await
            .expect("JSON");
        let keys: Vec<String> = body["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| k["value"].as_str().expect("a key value").to_owned())
            .collect();
        assert_eq!(keys.len(), 2, "{body}");
        keys
    }
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
    captured.push(("status".into(), w.ok(&["status", "m.hcl"]).await));
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

    let mut leaks = Vec::new();
    for (what, text) in &captured {
        for name in hits(text, &secrets) {
            leaks.push(format!("{name} in the output of `dsinfra {what}`"));
        }
    }
    let files = files_under(&w.dir.path().join(".dsinfra"));
    assert!(files.iter().any(|f| f.ends_with("state.json")), "{files:?}");
    for file in files {
        let text = String::from_utf8_lossy(&std::fs::read(&file).expect("readable")).into_owned();
        for name in hits(&text, &secrets) {
            leaks.push(format!("{name} in {}", file.display()));
        }
    }
    assert!(leaks.is_empty(), "secrets leaked: {leaks:#?}");
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
