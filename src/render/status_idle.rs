//! `dsinfra status`'s idle parking lines (issue 18): per block with `park { idle }`, what its
//! head's watcher says: `idle 12m of 45m`, `busy: job … running on …`, `parking since …`,
//! `parked`, or, loudly, `FAILED: <code>: <message>` when ARM refused the deallocation (the VMs
//! then keep billing until the cause is fixed; the watcher retries every interval).

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::paint::{bold, green, paint, red, yellow};
use super::status::duration_words;
use super::table::table;
use crate::engine::op::{IdleStatus, IdleView, StatusOutcome};

/// Minutes and hours as the manifest writes them: `45m`, `2h`, `1h 30m`, `90s`.
fn window_words(window: std::time::Duration) -> String {
    let s = window.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, 0) => format!("{h}h {m}m"),
        _ => format!("{s}s"),
    }
}

fn parse(at: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// One block's STATE cell and whether it is a failure.
fn state_cell(idle: &IdleStatus, now: DateTime<Utc>) -> (String, bool) {
    let window = window_words(idle.window);
    let found = match &idle.view {
        IdleView::Parked => return ("parked".to_owned(), false),
        IdleView::NotStarted => {
            return (
                "watcher not started yet (the next apply installs it)".to_owned(),
                false,
            );
        }
        IdleView::Unknown(why) => return (format!("unknown: {why}"), false),
        IdleView::Watching(found) => found,
    };
    if let Some(error) = &found.error {
        return (
            format!(
                "FAILED: {}: {} (at {}; the VMs keep billing; retried every {}s)",
                error.code, error.message, error.at, found.interval_s
            ),
            true,
        );
    }
    let mut cell = if let Some(parking) = &found.parking {
        format!("parking since {} ({} VMs)", parking.at, parking.vms.len())
    } else if let Some(busy) = &found.busy {
        format!("busy: {busy}")
    } else if let Some(since) = found.idle_since.as_deref().and_then(parse) {
        format!(
            "idle {} of {window}",
            duration_words((now - since).num_seconds().max(0))
        )
    } else {
        format!("watching ({window} window)")
    };
    // The watcher writes every tick: a much older file means it is not running.
    let interval = i64::try_from(found.interval_s).unwrap_or(i64::MAX / 4);
    if let Some(checked) = parse(&found.checked_at)
        && found.parking.is_none()
        && (now - checked).num_seconds() > 3 * interval
    {
        let _ = write!(
            cell,
            "; last checked {} ago: is the watcher running?",
            duration_words((now - checked).num_seconds())
        );
    }
    (cell, false)
}

/// The `dsinfra status` view ([`super::status::status_view`]) followed by the idle parking
/// table when some block has `park { idle }`.
pub fn status_view(found: &StatusOutcome, idle: &[IdleStatus], colour: bool) -> String {
    let mut text = super::status::status_view(found, colour);
    if !idle.is_empty() {
        text.push('\n');
        text.push_str(&idle_text(idle, found.at, colour));
    }
    text
}

/// The idle parking table, or nothing when no block has `park { idle }`.
pub fn idle_text(idle: &[IdleStatus], now: DateTime<Utc>, colour: bool) -> String {
    if idle.is_empty() {
        return String::new();
    }
    let mut rows = vec![
        ["IDLE PARK", "WINDOW", "STATE"]
            .iter()
            .map(|h| paint(colour, &bold(), h))
            .collect::<Vec<_>>(),
    ];
    for block in idle {
        let (cell, failed) = state_cell(block, now);
        let style = match &block.view {
            _ if failed => red(),
            IdleView::Parked => green(),
            _ => yellow(),
        };
        rows.push(vec![
            block.block.to_string(),
            window_words(block.window),
            paint(
                colour && (failed || matches!(block.view, IdleView::Parked)),
                &style,
                &cell,
            ),
        ]);
    }
    table(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::library::parse_idle_state;

    fn watching(json: &str) -> IdleStatus {
        IdleStatus {
            block: "cluster.train".parse().expect("address"),
            window: std::time::Duration::from_mins(45),
            view: IdleView::Watching(parse_idle_state(json).expect("state")),
        }
    }

    fn state_json(idle_since: &str, busy: &str, parking: &str, error: &str) -> String {
        format!(
            r#"{{"version":1,"window_s":2700,"interval_s":60,"checked_at":"2026-11-27T01:00:00Z","idle_since":{idle_since},"busy":{busy},"parking":{parking},"error":{error}}}"#
        )
    }

    #[test]
    fn each_watcher_state_reads_as_one_line() {
        let now = parse("2026-11-27T01:00:30Z").expect("time");
        let rows = [
            watching(&state_json(
                r#""2026-11-27T00:48:30Z""#,
                "null",
                "null",
                "null",
            )),
            watching(&state_json(
                "null",
                r#""job 20261127T005500-3f2a running on exp-train-2""#,
                "null",
                "null",
            )),
            watching(&state_json(
                r#""2026-11-27T00:15:00Z""#,
                "null",
                r#"{"at":"2026-11-27T01:00:00Z","vms":["a","b","c"]}"#,
                "null",
            )),
            watching(&state_json(
                r#""2026-11-27T00:15:00Z""#,
                "null",
                "null",
                r#"{"at":"2026-11-27T01:00:00Z","code":"AuthorizationFailed","message":"The client 'p' with object id 'p' does not have authorization to perform action 'Microsoft.Compute/virtualMachines/deallocate/action'"}"#,
            )),
            IdleStatus {
                block: "vm.gpu".parse().expect("address"),
                window: std::time::Duration::from_mins(90),
                view: IdleView::Parked,
            },
            IdleStatus {
                block: "vm.cpu".parse().expect("address"),
                window: std::time::Duration::from_hours(2),
                view: IdleView::Unknown("could not reach the head: timed out".to_owned()),
            },
        ];
        assert_eq!(
            idle_text(&rows, now, false),
            "\
IDLE PARK      WINDOW  STATE
cluster.train  45m     idle 12m 00s of 45m
cluster.train  45m     busy: job 20261127T005500-3f2a running on exp-train-2
cluster.train  45m     parking since 2026-11-27T01:00:00Z (3 VMs)
cluster.train  45m     FAILED: AuthorizationFailed: The client 'p' with object id 'p' does not have authorization to perform action 'Microsoft.Compute/virtualMachines/deallocate/action' (at 2026-11-27T01:00:00Z; the VMs keep billing; retried every 60s)
vm.gpu         1h 30m  parked
vm.cpu         2h      unknown: could not reach the head: timed out
"
        );
        assert_eq!(idle_text(&[], now, false), "");
    }

    #[test]
    fn a_watcher_that_stopped_writing_is_called_out() {
        let now = parse("2026-11-27T01:10:00Z").expect("time");
        let stale = watching(&state_json(
            "null",
            r#""GPU at 80% on exp-train-0""#,
            "null",
            "null",
        ));
        let text = idle_text(&[stale], now, false);
        assert!(
            text.contains(
                "busy: GPU at 80% on exp-train-0; last checked 10m 00s ago: is the watcher running?"
            ),
            "{text}"
        );
    }
}
