//! The local record of each run: `.dsinfra/<manifest>/runs/<id>/run.json` (what ran where, when,
//! and how each node ended) beside one log per node (`<node>.log`, the lines an attached run
//! streamed). Ids read as their start (`20261126T221500-3f2a`: UTC start to the second, then 4
//! random hex digits so two runs started in one second stay apart); listings are ordered by the
//! recorded start itself, since two ids of one second sort by their random part.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::super::Error;
use crate::state::LocalBackend;

/// How a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Started and not known to have ended.
    Running,
    /// Every node exited 0.
    Succeeded,
    /// A node exited non-zero, or could not run the command.
    Failed,
    /// A detached job whose process is gone without an exit status (the VM rebooted or was
    /// parked under it).
    Lost,
}

impl RunState {
    /// The word `runs` shows.
    pub fn word(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Lost => "lost",
        }
    }
}

/// One node of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRun {
    /// The node (`cluster.train[1]`).
    pub node: String,
    /// Its run directory on the VM.
    pub dir: String,
    /// Its exit status, once known (`None`: still running, or it never ran: see `error`).
    pub exit: Option<i32>,
    /// When it ended, once known.
    pub ended: Option<DateTime<Utc>>,
    /// Why the command could not be run there (unreachable, refused key), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One run, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Its id (its start to the second, then a random part).
    pub id: String,
    /// The command line.
    pub command: String,
    /// What it ran on, as asked (`head`, `cluster.train`, `cluster.train[2]`).
    pub target: String,
    /// Started with `--detach` (the job runs on the head; its log stays there).
    pub detached: bool,
    /// When it started.
    pub started: DateTime<Utc>,
    /// When the last node ended, once known.
    pub ended: Option<DateTime<Utc>>,
    /// The nodes, head first.
    pub nodes: Vec<NodeRun>,
    /// Set when a state probe found the job's process gone without an exit status.
    #[serde(default)]
    pub lost: bool,
    /// `--recover`: the attempts before the one `nodes` describes, oldest first (one per
    /// restart after an eviction).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// The Preempt notices the nodes' watchers reported, over every attempt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preemptions: Vec<super::preempt::Notice>,
    /// Why `--recover` could not bring evicted nodes back, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up: Option<String>,
    /// `--recover` as a detached run was started with: `logs -f` goes on recovering it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover: Option<RecoverSpec>,
}

/// A detached run's `--recover` settings, for whoever follows it later (`logs -f`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoverSpec {
    /// `--max-restarts`.
    pub max_restarts: u32,
    /// `--on-preempt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_preempt: Option<String>,
    /// `DSINFRA_CHECKPOINT_DIR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_dir: Option<String>,
}

/// One attempt of a run that was started again after an eviction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// Its `DSINFRA_RESTART_COUNT` (0 for the first).
    pub restart: u32,
    /// When it started.
    pub started: DateTime<Utc>,
    /// How each node ended.
    pub nodes: Vec<NodeRun>,
    /// The nodes an eviction took (deallocated or deleted), as found after it ended.
    pub evicted: Vec<String>,
    /// What the recovery did before the next attempt (started, created again, steps re-run).
    #[serde(default)]
    pub recovery: Vec<String>,
}

/// A new run id for a run starting at `now`.
pub fn new_id(now: DateTime<Utc>) -> String {
    format!(
        "{}-{:04x}",
        now.format("%Y%m%dT%H%M%S"),
        rand::random::<u16>()
    )
}

impl RunRecord {
    /// How the run stands, from what is known of its nodes.
    pub fn state(&self) -> RunState {
        if self.lost {
            return RunState::Lost;
        }
        if self
            .nodes
            .iter()
            .any(|n| n.error.is_some() || n.exit.is_some_and(|c| c != 0))
        {
            return RunState::Failed;
        }
        if self.nodes.iter().all(|n| n.exit.is_some()) {
            RunState::Succeeded
        } else {
            RunState::Running
        }
    }

    /// The run's exit status: the first failure's (by the time nodes ended; a node that could
    /// not run counts as 255, as `ssh` reports a failed connection), else 0. `None` while
    /// running.
    pub fn exit(&self) -> Option<i32> {
        let failed = self
            .nodes
            .iter()
            .filter_map(|n| match (n.exit, &n.error) {
                (_, Some(_)) => Some((n.ended, 255)),
                (Some(code), None) if code != 0 => Some((n.ended, code)),
                _ => None,
            })
            .min_by_key(|(ended, _)| *ended);
        match failed {
            Some((_, code)) => Some(code),
            None if self.nodes.iter().all(|n| n.exit.is_some()) => Some(0),
            None => None,
        }
    }

    /// The current attempt as it ended, for [`RunRecord::attempts`]: started at `started` as
    /// restart `restart`, `evicted` the nodes an eviction took, `recovery` what bringing them
    /// back did.
    pub fn close_attempt(
        &self,
        restart: u32,
        started: DateTime<Utc>,
        evicted: Vec<String>,
        recovery: Vec<String>,
    ) -> Attempt {
        Attempt {
            restart,
            started,
            nodes: self.nodes.clone(),
            evicted,
            recovery,
        }
    }

    /// How many times the job was started again after an eviction.
    pub fn restarts(&self) -> usize {
        self.attempts.len()
    }

    /// How long it ran (until now while running).
    pub fn duration(&self, now: DateTime<Utc>) -> chrono::Duration {
        self.ended.unwrap_or(now) - self.started
    }
}

/// Where the runs of `manifest` are recorded.
///
/// # Errors
///
/// The manifest path has no file name.
pub fn runs_dir(manifest: &Path) -> Result<PathBuf, Error> {
    Ok(LocalBackend::state_dir(manifest)?.join("runs"))
}

/// The log file of `node` in the run `id`.
///
/// # Errors
///
/// As [`runs_dir`].
pub fn log_path(manifest: &Path, id: &str, node: &str) -> Result<PathBuf, Error> {
    Ok(runs_dir(manifest)?.join(id).join(format!("{node}.log")))
}

/// Saves `record` (atomically: a reader sees the old or the new version).
///
/// # Errors
///
/// The directory or file could not be written.
pub fn save(manifest: &Path, record: &RunRecord) -> Result<(), Error> {
    let dir = runs_dir(manifest)?.join(&record.id);
    std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, &e))?;
    let text = serde_json::to_string_pretty(record)
        .map_err(|e| Error::Failed(format!("could not encode the run record: {e}")))?;
    let path = dir.join("run.json");
    crate::atomic_file::replace(&path, text.as_bytes())
        .map_err(|e| Error::Failed(format!("could not write {}: {e}", path.display())))
}

/// The run `id` of `manifest`.
///
/// # Errors
///
/// There is no such run (the message lists the latest ids), or its record is unreadable.
pub fn load(manifest: &Path, id: &str) -> Result<RunRecord, Error> {
    let path = runs_dir(manifest)?.join(id).join("run.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| Error::Failed(format!("{} is not a run record: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let known: Vec<String> = list(manifest)?
                .into_iter()
                .rev()
                .take(5)
                .map(|r| r.id)
                .collect();
            let hint = if known.is_empty() {
                "no run is recorded yet: start one with `dsinfra run`".to_owned()
            } else {
                format!("the latest are: {}", known.join(", "))
            };
            Err(Error::Failed(format!(
                "no run `{id}` is recorded for {} ({hint}); `dsinfra runs {}` lists them",
                manifest.display(),
                manifest.display()
            )))
        }
        Err(e) => Err(io_error(&path, &e)),
    }
}

/// Every recorded run of `manifest`, oldest first; unreadable records are skipped.
///
/// # Errors
///
/// The runs directory exists but cannot be listed.
pub fn list(manifest: &Path) -> Result<Vec<RunRecord>, Error> {
    let dir = runs_dir(manifest)?;
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(&dir, &e)),
    };
    let mut records: Vec<RunRecord> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("run.json")).ok())
        .filter_map(|text| serde_json::from_str(&text).ok())
        .collect();
    // By the start itself, not the id: ids of runs started within one second order by their
    // random part (seen: a run listed before the one started just before it).
    records.sort_by(|a, b| a.started.cmp(&b.started).then_with(|| a.id.cmp(&b.id)));
    Ok(records)
}

fn io_error(path: &Path, e: &std::io::Error) -> Error {
    Error::Failed(format!("could not access {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(exit: Option<i32>, ended_s: i64) -> NodeRun {
        NodeRun {
            node: "n".to_owned(),
            dir: "/d".to_owned(),
            exit,
            ended: DateTime::from_timestamp(ended_s, 0),
            error: None,
        }
    }

    fn record(nodes: Vec<NodeRun>) -> RunRecord {
        RunRecord {
            id: new_id(Utc::now()),
            command: "true".to_owned(),
            target: "head".to_owned(),
            detached: false,
            started: Utc::now(),
            ended: None,
            nodes,
            lost: false,
            attempts: Vec::new(),
            preemptions: Vec::new(),
            gave_up: None,
            recover: None,
        }
    }

    #[test]
    fn the_first_failure_in_time_gives_the_exit_code() {
        let r = record(vec![node(Some(0), 1), node(Some(4), 9), node(Some(3), 5)]);
        assert_eq!((r.state(), r.exit()), (RunState::Failed, Some(3)));
        let r = record(vec![node(Some(0), 1), node(None, 0)]);
        assert_eq!((r.state(), r.exit()), (RunState::Running, None));
        let r = record(vec![node(Some(0), 1), node(Some(0), 2)]);
        assert_eq!((r.state(), r.exit()), (RunState::Succeeded, Some(0)));
    }

    /// Regression: `runs` listed two runs of one second by their ids' random part.
    #[test]
    fn runs_of_one_second_are_listed_in_the_order_they_started() {
        let dir = tempfile::tempdir().expect("temp dir");
        let manifest = dir.path().join("exp.hcl");
        let second = DateTime::from_timestamp(1_700_000_000, 0).expect("time");
        for (suffix, millis) in [("ffff", 100), ("0000", 700)] {
            let mut r = record(Vec::new());
            r.id = format!("{}-{suffix}", second.format("%Y%m%dT%H%M%S"));
            r.started = second + chrono::Duration::milliseconds(millis);
            save(&manifest, &r).expect("saved");
        }
        let listed: Vec<String> = list(&manifest)
            .expect("listed")
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(listed, ["20231114T221320-ffff", "20231114T221320-0000"]);
    }

    #[test]
    fn ids_sort_by_start_time() {
        let early = new_id(DateTime::from_timestamp(1_700_000_000, 0).expect("time"));
        let late = new_id(DateTime::from_timestamp(1_700_000_001, 0).expect("time"));
        assert!(early < late, "{early} < {late}");
        assert_eq!(early.len(), "20261126T221500-3f2a".len());
    }
}
