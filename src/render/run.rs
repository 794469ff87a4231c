//! `dsinfra run`, `runs` and `logs`: a node's output line, the per-node summary of a run, and
//! the list of recorded runs.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::table::table;
use crate::engine::op::run::{RunRecord, RunState};

/// A line a node printed: prefixed with the node's name when several nodes run.
pub fn output_line(node: Option<&str>, line: &str) -> String {
    match node {
        Some(node) => format!("{node}: {line}"),
        None => line.to_owned(),
    }
}

/// The closing lines of a run: one per node (its exit status or why it did not run), then
/// the run's state and where its record is.
pub fn summary(record: &RunRecord) -> String {
    let mut out = String::new();
    if record.detached {
        return format!(
            "run {} started detached on {}\n",
            record.id, record.nodes[0].node
        );
    }
    for node in &record.nodes {
        let how = match (&node.error, node.exit) {
            (Some(why), _) => format!("failed: {why}"),
            (None, Some(0)) => "exit 0".to_owned(),
            (None, Some(code)) => format!("exit {code}: failed"),
            (None, None) => "still running (not waited for)".to_owned(),
        };
        let _ = writeln!(out, "  {}: {how}", node.node);
    }
    for attempt in &record.attempts {
        let _ = writeln!(
            out,
            "  attempt {}: {} evicted; {}",
            attempt.restart,
            attempt.evicted.join(", "),
            attempt.recovery.join("; ")
        );
    }
    if let Some(why) = &record.gave_up {
        let _ = writeln!(out, "  not recovered: {why}");
    }
    let state = record.state();
    let exit = record
        .exit()
        .map_or_else(String::new, |c| format!(", exit {c}"));
    let _ = writeln!(
        out,
        "run {}: {}{exit}{}",
        record.id,
        state.word(),
        restarts(record)
    );
    out
}

/// `, 1 restart` after evictions (`--recover`), else nothing.
fn restarts(record: &RunRecord) -> String {
    match record.restarts() {
        0 => String::new(),
        1 => ", 1 restart".to_owned(),
        n => format!(", {n} restarts"),
    }
}

/// `dsinfra runs`: one row per run, oldest first.
pub fn runs_table(records: &[RunRecord], now: DateTime<Utc>) -> String {
    let mut rows = vec![
        [
            "ID", "STATE", "EXIT", "STARTED", "DURATION", "TARGET", "COMMAND",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for record in records {
        let state = record.state();
        let word = if record.detached && state == RunState::Running {
            "running (detached)".to_owned()
        } else {
            format!("{}{}", state.word(), restarts(record))
        };
        rows.push(vec![
            record.id.clone(),
            word,
            record
                .exit()
                .map_or_else(|| "-".to_owned(), |c| c.to_string()),
            record.started.format("%Y-%m-%d %H:%M:%S").to_string(),
            duration(record.duration(now)),
            record.target.clone(),
            record.command.clone(),
        ]);
    }
    table(&rows)
}

/// `1h02m`, `3m05s`, `12s`.
fn duration(d: chrono::Duration) -> String {
    let s = d.num_seconds().max(0);
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m{sec:02}s"),
        (h, min, _) => format!("{h}h{min:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::op::run::NodeRun;

    fn record(exits: &[Option<i32>]) -> RunRecord {
        let started = DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        RunRecord {
            id: "20270115T080000-00ff".to_owned(),
            command: "python train.py".to_owned(),
            target: "cluster.c".to_owned(),
            detached: false,
            started,
            ended: Some(started + chrono::Duration::seconds(185)),
            nodes: exits
                .iter()
                .enumerate()
                .map(|(i, exit)| NodeRun {
                    node: format!("cluster.c[{i}]"),
                    dir: String::new(),
                    exit: *exit,
                    ended: Some(started + chrono::Duration::seconds(i64::try_from(i).unwrap_or(0))),
                    error: None,
                })
                .collect(),
            lost: false,
            attempts: Vec::new(),
            preemptions: Vec::new(),
            gave_up: None,
            recover: None,
        }
    }

    #[test]
    fn the_summary_names_each_node_and_the_first_failure() {
        assert_eq!(
            summary(&record(&[Some(0), Some(3)])),
            "  cluster.c[0]: exit 0\n  cluster.c[1]: exit 3: failed\nrun 20270115T080000-00ff: failed, exit 3\n"
        );
    }

    #[test]
    fn runs_are_listed_with_state_exit_and_duration() {
        let text = runs_table(&[record(&[Some(0)])], Utc::now());
        assert_eq!(
            text,
            "ID                    STATE      EXIT  STARTED              DURATION  TARGET     COMMAND\n\
             20270115T080000-00ff  succeeded  0     2027-01-15 08:00:00  3m05s     cluster.c  python train.py\n"
        );
    }
}
