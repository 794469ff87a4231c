//! Progress of an apply, destroy, park or unpark, drawn from the engine's events, and an apply's
//! summary. One renderer for every operation: a VM being deallocated reads like one being
//! created.
//!
//! On a terminal every resource gets an indicatif line with a spinner, its elapsed time and its
//! operation's state (`creating vm.gpu.vm  InProgress  [00:42]`), finished in place with the
//! outcome. Anywhere else (CI logs, pipes) each event is one plain line with a UTC timestamp, so
//! logs read in order and diff cleanly. The line texts are pure functions ([`plain_line`],
//! [`summary`]) so they are tested exactly.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::money::{dollars, rate};
use crate::addr::Address;
use crate::engine::events::{Event, EventSink};
use crate::engine::execute::Report;
use crate::plan::CostTotals;

/// Whole seconds (hundredths below ten seconds, where the difference matters), as people read
/// durations in logs.
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 10.0 {
        format!("{secs:.2}s")
    } else if secs < 3600.0 {
        let whole = d.as_secs();
        if whole < 60 {
            format!("{whole}s")
        } else {
            format!("{}m{:02}s", whole / 60, whole % 60)
        }
    } else {
        let whole = d.as_secs();
        format!("{}h{:02}m", whole / 3600, (whole % 3600) / 60)
    }
}

/// The event as one line without a timestamp.
pub fn event_text(event: &Event) -> String {
    match event {
        Event::Started { address, operation } => {
            format!("{address}: {}...", operation.progressive())
        }
        Event::Progress {
            address,
            operation,
            state,
            elapsed,
        } => format!(
            "{address}: still {} ({state}, {} elapsed)",
            operation.progressive(),
            duration(*elapsed)
        ),
        Event::Done {
            address,
            operation,
            elapsed,
        } => format!(
            "{address}: {} after {}",
            operation.past(),
            duration(*elapsed)
        ),
        Event::Failed {
            address,
            operation,
            elapsed,
            message,
        } => format!(
            "{address}: {operation} failed after {}: {message}",
            duration(*elapsed)
        ),
        Event::Skipped {
            address,
            operation,
            because,
        } => format!("{address}: {operation} skipped: it needs {because}, which failed"),
        Event::Stopping { in_flight } => format!(
            "interrupted: starting nothing new; waiting for {in_flight} running operation(s) to finish (Ctrl-C again to exit now)"
        ),
    }
}

/// The event as a plain log line at `now`.
pub fn plain_line(event: &Event, now: DateTime<Utc>) -> String {
    format!(
        "{} {}",
        now.to_rfc3339_opts(SecondsFormat::Secs, true),
        event_text(event)
    )
}

/// Draws events: indicatif lines on a terminal, timestamped lines elsewhere (on stdout, or on
/// stderr for commands whose stdout carries their result).
pub struct Progress {
    bars: Option<(MultiProgress, Mutex<HashMap<Address, ProgressBar>>)>,
    /// Lines go to stderr rather than stdout.
    stderr: bool,
    /// Plain mode: the last operation state printed per resource, so a log gets one line per
    /// change of state rather than one per poll.
    last_state: Mutex<HashMap<Address, String>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("tty", &self.bars.is_some())
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// A renderer on stdout (apply, destroy); `tty` chooses live lines over log lines.
    pub fn new(tty: bool) -> Arc<Self> {
        Self::on(tty, false)
    }

    /// A renderer on stderr (park, unpark: their stdout is the cost they leave); `tty` chooses
    /// live lines over log lines.
    pub fn on_stderr(tty: bool) -> Arc<Self> {
        Self::on(tty, true)
    }

    fn on(tty: bool, stderr: bool) -> Arc<Self> {
        let bars = tty.then(|| {
            let target = if stderr {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::stdout()
            };
            (
                MultiProgress::with_draw_target(target),
                Mutex::new(HashMap::new()),
            )
        });
        Arc::new(Self {
            bars,
            stderr,
            last_state: Mutex::new(HashMap::new()),
        })
    }

    /// The sink to give the engine.
    pub fn sink(self: &Arc<Self>) -> EventSink {
        let me = Arc::clone(self);
        Arc::new(move |event: &Event| me.show(event))
    }

    /// Draw one event.
    pub fn show(&self, event: &Event) {
        let Some((multi, bars)) = &self.bars else {
            if let Event::Progress { address, state, .. } = event {
                let mut last = self
                    .last_state
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if last.get(address) == Some(state) {
                    return;
                }
                last.insert(address.clone(), state.clone());
            }
            let line = plain_line(event, Utc::now());
            if self.stderr {
                let mut stderr = std::io::stderr().lock();
                let _ = writeln!(stderr, "{line}");
                let _ = stderr.flush();
            } else {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{line}");
                let _ = stdout.flush();
            }
            return;
        };
        let mut bars = bars
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match event {
            Event::Started { address, operation } => {
                let bar = multi.add(ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {prefix} {wide_msg} [{elapsed}]")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.set_prefix(format!("{} {address}", operation.progressive()));
                bar.enable_steady_tick(Duration::from_millis(120));
                bars.insert(address.clone(), bar);
            }
            Event::Progress { address, state, .. } => {
                if let Some(bar) = bars.get(address) {
                    bar.set_message(state.clone());
                }
            }
            Event::Done { address, .. } | Event::Failed { address, .. } => {
                if let Some(bar) = bars.remove(address) {
                    bar.set_style(
                        ProgressStyle::with_template("  {wide_msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.finish_with_message(event_text(event));
                }
            }
            Event::Skipped { .. } | Event::Stopping { .. } => {
                let _ = multi.println(event_text(event));
            }
        }
    }

    /// Stop every spinner still running (an interrupted run).
    pub fn finish(&self) {
        if let Some((_, bars)) = &self.bars {
            let mut bars = bars
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (_, bar) in bars.drain() {
                bar.abandon();
            }
        }
    }
}

/// The end of a run: what was done, what failed (verbatim, with advice), what was skipped or not
/// started, and what the experiment costs now. `verb` is `Apply` or `Destroy`.
pub fn summary(verb: &str, report: &Report, cost: Option<&CostTotals>) -> String {
    let (created, updated, deleted) = report.counts();
    let mut text = String::new();
    let done = format!("{created} created, {updated} updated, {deleted} deleted");
    if report.is_success() {
        let _ = writeln!(
            text,
            "{verb} complete: {done} in {}.",
            duration(report.elapsed)
        );
    } else {
        let mut parts = vec![done];
        if !report.failed.is_empty() {
            parts.push(format!("{} failed", report.failed.len()));
        }
        if !report.skipped.is_empty() {
            parts.push(format!(
                "{} skipped because something they need failed",
                report.skipped.len()
            ));
        }
        if !report.cancelled.is_empty() {
            parts.push(format!(
                "{} not started (interrupted)",
                report.cancelled.len()
            ));
        }
        let _ = writeln!(
            text,
            "{verb} incomplete after {}: {}.",
            duration(report.elapsed),
            parts.join(", ")
        );
        // Advice shared by several failures (eight schedules of one unregistered namespace)
        // is printed with the first only.
        let mut advised = std::collections::BTreeSet::new();
        for failure in &report.failed {
            let _ = write!(
                text,
                "error: {} {}: {}",
                failure.operation, failure.address, failure.message
            );
            for advice in failure.advice.iter().filter(|a| advised.insert(a.as_str())) {
                let _ = write!(text, "\n  = help: {advice}");
            }
            text.push('\n');
        }
        for (address, operation, because) in &report.skipped {
            let _ = writeln!(text, "skipped: {operation} {address} (needs {because})");
        }
        if !report.failed.is_empty() || !report.cancelled.is_empty() {
            let _ = writeln!(
                text,
                "The state records everything done so far; run the same command again to finish: what exists is adopted, nothing is duplicated."
            );
        }
    }
    if let Some(cost) = cost {
        let _ = writeln!(
            text,
            "Cost now: {}/h running ({} per 30 days), {}/h parked ({} per 30 days).",
            rate(cost.running_per_hour),
            dollars(cost.running_per_month),
            rate(cost.parked_per_hour),
            dollars(cost.parked_per_month)
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::advice::ResourceError;
    use crate::engine::events::Operation;

    fn addr(text: &str) -> Address {
        text.parse().expect("valid")
    }

    #[test]
    fn plain_lines_are_timestamped_and_name_the_resource() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T06:00:05Z")
            .expect("valid")
            .with_timezone(&Utc);
        let cases = [
            (
                Event::Started {
                    address: addr("vm.gpu.vm"),
                    operation: Operation::Create,
                },
                "2026-11-22T06:00:05Z vm.gpu.vm: creating...",
            ),
            (
                Event::Progress {
                    address: addr("vm.gpu.vm"),
                    operation: Operation::Create,
                    state: "InProgress 40%".into(),
                    elapsed: Duration::from_secs(75),
                },
                "2026-11-22T06:00:05Z vm.gpu.vm: still creating (InProgress 40%, 1m15s elapsed)",
            ),
            (
                Event::Done {
                    address: addr("network.main.vnet"),
                    operation: Operation::Delete,
                    elapsed: Duration::from_millis(4200),
                },
                "2026-11-22T06:00:05Z network.main.vnet: deleted after 4.20s",
            ),
            (
                Event::Skipped {
                    address: addr("vm.gpu.auto_shutdown"),
                    operation: Operation::Create,
                    because: addr("vm.gpu.vm"),
                },
                "2026-11-22T06:00:05Z vm.gpu.auto_shutdown: create skipped: it needs vm.gpu.vm, which failed",
            ),
        ];
        for (event, line) in cases {
            assert_eq!(plain_line(&event, now), line);
        }
    }

    /// Guards issue 16: park and unpark report through the engine's events and are drawn by
    /// apply's renderer, timestamped like apply's lines.
    #[test]
    fn park_and_unpark_lines_are_drawn_like_apply_lines() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T06:00:05Z")
            .expect("valid")
            .with_timezone(&Utc);
        let vm = || addr("cluster.train[3].vm");
        let cases = [
            (
                Event::Started {
                    address: vm(),
                    operation: Operation::Deallocate,
                },
                "2026-11-22T06:00:05Z cluster.train[3].vm: deallocating...",
            ),
            (
                Event::Done {
                    address: vm(),
                    operation: Operation::Deallocate,
                    elapsed: Duration::from_secs(42),
                },
                "2026-11-22T06:00:05Z cluster.train[3].vm: deallocated (parked) after 42s",
            ),
            (
                Event::Done {
                    address: vm(),
                    operation: Operation::Start,
                    elapsed: Duration::from_millis(1500),
                },
                "2026-11-22T06:00:05Z cluster.train[3].vm: running after 1.50s",
            ),
            (
                Event::Failed {
                    address: vm(),
                    operation: Operation::Start,
                    elapsed: Duration::from_secs(12),
                    message: "AllocationFailed: no capacity".into(),
                },
                "2026-11-22T06:00:05Z cluster.train[3].vm: start failed after 12s: AllocationFailed: no capacity",
            ),
        ];
        for (event, line) in cases {
            assert_eq!(plain_line(&event, now), line);
        }
    }

    #[test]
    fn a_failed_run_lists_errors_skips_and_how_to_finish() {
        let report = Report {
            done: vec![
                (addr("resource_group.main"), Operation::Create),
                (addr("vm.gpu.nic"), Operation::Create),
            ],
            failed: vec![ResourceError {
                address: addr("vm.gpu.vm"),
                operation: Operation::Create,
                message: "AllocationFailed: no capacity (request id r1)".into(),
                code: Some("AllocationFailed".into()),
                advice: vec!["try another zone".into()],
            }],
            skipped: vec![(
                addr("vm.gpu.auto_shutdown"),
                Operation::Create,
                addr("vm.gpu.vm"),
            )],
            cancelled: Vec::new(),
            elapsed: Duration::from_secs(95),
        };
        let cost = CostTotals {
            running_per_hour: 3.06,
            parked_per_hour: 0.1,
            running_per_month: 2203.2,
            parked_per_month: 72.0,
        };
        assert_eq!(
            summary("Apply", &report, Some(&cost)),
            "Apply incomplete after 1m35s: 2 created, 0 updated, 0 deleted, 1 failed, 1 skipped because something they need failed.\n\
             error: create vm.gpu.vm: AllocationFailed: no capacity (request id r1)\n  = help: try another zone\n\
             skipped: create vm.gpu.auto_shutdown (needs vm.gpu.vm)\n\
             The state records everything done so far; run the same command again to finish: what exists is adopted, nothing is duplicated.\n\
             Cost now: $3.06/h running ($2,203.20 per 30 days), $0.1000/h parked ($72.00 per 30 days).\n"
        );
    }

    #[test]
    fn a_complete_run_is_one_line() {
        let report = Report {
            done: vec![(addr("vm.gpu.vm"), Operation::Delete)],
            elapsed: Duration::from_millis(2500),
            ..Report::default()
        };
        assert_eq!(
            summary("Destroy", &report, None),
            "Destroy complete: 0 created, 0 updated, 1 deleted in 2.50s.\n"
        );
    }
}
