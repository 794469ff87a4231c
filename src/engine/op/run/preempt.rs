//! Spot eviction during a run, worked out without I/O (issue 34, docs/run.md): the watcher each
//! node of a spot block runs beside the job (it polls the instance metadata service's Scheduled
//! Events for a `Preempt` event naming its VM, records it in the run directory, runs the
//! `--on-preempt` hook and says so on stderr in one tagged line), that line's parsing on the
//! workstation, which ARM errors mean "no capacity now" (worth retrying later), the backoff
//! between tries, and which steps a recovery must run again across the whole block.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::addr::Address;
use crate::model::Step;
use crate::steps::library::mount_point;

/// The tag of the watcher's stderr line: `dsinfra-preempt <event id> <not before, RFC 1123>`.
pub const TAG: &str = "dsinfra-preempt";

/// The Scheduled Events api-version the watcher asks for (the one Azure's documentation uses).
pub const EVENTS_API_VERSION: &str = "2020-07-01";

/// Where the instance metadata service answers on an Azure VM.
pub const AZURE_IMDS: &str = "http://169.254.169.254";

/// How often the watcher polls, in seconds: a Preempt notice comes at least 30 s before the
/// eviction, so 5 s leaves the hook 25 s. `DSINFRA_PREEMPT_POLL_SECS` changes it (tests).
pub const DEFAULT_POLL_SECS: u32 = 5;

/// A Preempt notice as the watcher reported it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Notice {
    /// The node (`cluster.train[1]`).
    pub node: String,
    /// Scheduled Events' `EventId`.
    pub event_id: String,
    /// When the VM goes, as IMDS wrote it (`Thu, 03 Dec 2026 01:00:30 GMT`).
    pub not_before: String,
    /// When the workstation heard of it.
    pub seen: chrono::DateTime<chrono::Utc>,
}

/// The notice in a watcher's stderr line, if the line is one.
pub fn parse(node: &str, line: &str) -> Option<Notice> {
    let rest = line.strip_prefix(TAG)?.trim();
    let (event_id, not_before) = rest.split_once(' ')?;
    Some(Notice {
        node: node.to_owned(),
        event_id: event_id.to_owned(),
        not_before: not_before.trim().to_owned(),
        seen: chrono::Utc::now(),
    })
}

/// `NotBefore` (RFC 1123, as IMDS writes it) as a time.
pub fn not_before(notice: &Notice) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc2822(&notice.not_before)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// The watcher (Python 3, which every Azure Linux image has): polls `{imds}/metadata/
/// scheduledevents` with `Metadata: true` every `poll` seconds. Every `Preempt` event it sees
/// is appended once to `preemptions` (event id, not-before, the VMs going): Azure delivers an
/// availability set's events to all its VMs, so on an InfiniBand cluster the head's run
/// directory records every node that goes and when. Once an event lists `vm_name` it writes `preempt` (event id, not-before) in the run directory, runs
/// `on_preempt.sh` there if present, in the job's environment with `DSINFRA_PREEMPT_NOT_BEFORE`
/// set, and only then prints the tagged line on stderr: the workstation stops the job when it
/// reads it, and the hook (a last checkpoint) must have had its time first. An unanswered poll is tried again: the service may be
/// slow, and the job must not stop for it.
pub fn watcher_script(vm_name: &str, imds: &str, poll: u32) -> String {
    let url = format!(
        "{}/metadata/scheduledevents?api-version={EVENTS_API_VERSION}",
        imds.trim_end_matches('/')
    );
    format!(
        r#"import json, os, subprocess, sys, time, urllib.request
run_dir = os.path.dirname(os.path.abspath(__file__))
name = {name}
url = {url}
seen = set()
while True:
    try:
        request = urllib.request.Request(url, headers={{"Metadata": "true"}})
        with urllib.request.urlopen(request, timeout=5) as answer:
            document = json.load(answer)
    except Exception:
        document = {{}}
    for event in document.get("Events", []):
        if event.get("EventType") != "Preempt":
            continue
        event_id = event.get("EventId", "?")
        when = event.get("NotBefore", "")
        going = event.get("Resources", [])
        if event_id not in seen:
            seen.add(event_id)
            with open(os.path.join(run_dir, "preemptions"), "a") as out:
                out.write(event_id + " " + when + " " + ",".join(going) + "\n")
        if name in going:
            with open(os.path.join(run_dir, "preempt"), "w") as out:
                out.write(event_id + " " + when + "\n")
            hook = os.path.join(run_dir, "on_preempt.sh")
            if os.path.exists(hook):
                env = dict(os.environ, DSINFRA_PREEMPT_NOT_BEFORE=when)
                subprocess.call(["bash", "-c", '. "$0/env.sh"; exec bash "$0/on_preempt.sh"', run_dir], env=env)
            print("{tag} " + event_id + " " + when, file=sys.stderr, flush=True)
            sys.exit(0)
    time.sleep({poll})
"#,
        name = json_string(vm_name),
        url = json_string(&url),
        tag = TAG,
    )
}

/// A Python string literal (JSON's escaping is Python's for these characters).
fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// ARM error codes that say Azure has no capacity for the VM right now: worth trying again
/// later (or elsewhere), unlike a quota or a bad request.
pub fn is_capacity(code: &str) -> bool {
    [
        "AllocationFailed",
        "ZonalAllocationFailed",
        "OverconstrainedAllocationRequest",
        "OverconstrainedZonalAllocationRequest",
        "SkuNotAvailable",
    ]
    .iter()
    .any(|c| c.eq_ignore_ascii_case(code))
}

/// The wait before try `attempt` (1 = the first retry): `base` doubled each time, at most 32
/// times `base` (5 s -> 10 s ... 160 s with the default).
pub fn backoff(base: Duration, attempt: u32) -> Duration {
    base * 2u32.pow(attempt.saturating_sub(1).min(5))
}

/// The `--rerun-step` entries a recovery forces on `block` once any of its nodes was brought
/// back: its BeeOND steps (the scratch spans every node's local disk, so it is rebuilt across
/// the block), and the steps that fill that scratch (a `stage` whose `to` is under its mount:
/// the data went with it). Per-boot and new-node steps run where needed without being named.
pub fn rebuilt_steps(steps: &[Step], block: &Address) -> BTreeSet<String> {
    let own: Vec<&Step> = steps.iter().filter(|s| s.block == *block).collect();
    let scratches: Vec<&str> = own
        .iter()
        .filter(|s| s.kind == "beeond")
        .filter_map(|s| mount_point(&s.kind, s.params.get("mount").and_then(Value::as_str)))
        .collect();
    let under = |path: &str| {
        scratches.iter().any(|m| {
            path == *m
                || path
                    .strip_prefix(m.trim_end_matches('/'))
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    };
    own.iter()
        .filter(|s| {
            s.kind == "beeond"
                || s.params
                    .get("to")
                    .and_then(Value::as_str)
                    .is_some_and(under)
        })
        .map(|s| format!("{block}/{}", s.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watcher_line_is_a_notice_and_other_lines_are_not() {
        let notice = parse(
            "cluster.train[2]",
            "dsinfra-preempt 5B3C0E6A-1F2D Thu, 03 Dec 2026 01:00:30 GMT",
        )
        .expect("a notice");
        assert_eq!(notice.event_id, "5B3C0E6A-1F2D");
        assert_eq!(notice.not_before, "Thu, 03 Dec 2026 01:00:30 GMT");
        assert_eq!(
            not_before(&notice).map(|t| t.to_rfc3339()).as_deref(),
            Some("2026-12-03T01:00:30+00:00")
        );
        assert_eq!(parse("n", "step 12 of 40"), None);
        assert_eq!(parse("n", "dsinfra-preempt"), None);
    }

    #[test]
    fn capacity_errors_are_retried_and_others_are_not() {
        for code in [
            "AllocationFailed",
            "OverconstrainedAllocationRequest",
            "skunotavailable",
        ] {
            assert!(is_capacity(code), "{code}");
        }
        for code in [
            "OperationNotAllowed",
            "InvalidParameter",
            "AuthorizationFailed",
        ] {
            assert!(!is_capacity(code), "{code}");
        }
        let base = Duration::from_secs(5);
        assert_eq!(backoff(base, 1), Duration::from_secs(5));
        assert_eq!(backoff(base, 3), Duration::from_secs(20));
        assert_eq!(backoff(base, 40), Duration::from_secs(160));
    }

    #[test]
    fn the_watcher_asks_for_its_own_vm_with_the_metadata_header() {
        let script = watcher_script("exp-train-1", "http://127.0.0.1:9/_emulator/imds/x/", 2);
        assert!(script.contains("name = \"exp-train-1\""), "{script}");
        assert!(
            script.contains(
                "url = \"http://127.0.0.1:9/_emulator/imds/x/metadata/scheduledevents?api-version=2020-07-01\""
            ),
            "{script}"
        );
        assert!(script.contains("\"Metadata\": \"true\""), "{script}");
        assert!(script.contains("time.sleep(2)"), "{script}");
    }

    #[test]
    fn beeond_and_what_it_holds_are_rebuilt_but_not_other_steps() {
        let block: Address = "cluster.train".parse().expect("address");
        let step = |name: &str, kind: &str, params: Value| Step {
            name: name.to_owned(),
            kind: kind.to_owned(),
            block: block.clone(),
            scope: crate::model::StepScope::All,
            run: crate::model::RunPolicy::PerBoot,
            params: params
                .as_object()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .collect(),
            span: None,
        };
        let steps = vec![
            step("mofed", "mofed", serde_json::json!({})),
            step(
                "beeond",
                "beeond",
                serde_json::json!({"mount": "/mnt/scratch"}),
            ),
            step(
                "stage",
                "stage",
                serde_json::json!({"to": "/mnt/scratch/cosmoflow"}),
            ),
            step(
                "local",
                "stage",
                serde_json::json!({"to": "/mnt/resource/data"}),
            ),
            step(
                "beside",
                "stage",
                serde_json::json!({"to": "/mnt/scratchy"}),
            ),
        ];
        assert_eq!(
            rebuilt_steps(&steps, &block),
            ["cluster.train/beeond", "cluster.train/stage"]
                .into_iter()
                .map(str::to_owned)
                .collect()
        );
        let other: Address = "cluster.other".parse().expect("address");
        assert!(rebuilt_steps(&steps, &other).is_empty());
    }
}
