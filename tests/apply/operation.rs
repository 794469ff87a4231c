//! `engine::op::apply` and `engine::op::plan` called as a library: what the CLI tests cannot
//! show. Events collected by a test listener, an approver that says no (nothing changes), a
//! Ctrl-C at the approval (nothing changes), two Ctrl-Cs during the walk (the operation gives up
//! at once with the state saved, and the next apply adopts what was under way).

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use dsinfra::connect::{Choice, Connection, Options, connect};
use dsinfra::engine::events::Event;
use dsinfra::engine::op::{
    self, ApplyOutcome, ApplyRequest, Approver, AutoApprove, Cancel, Canceller, Listener, OpEvent,
    Question, StepsMode, StepsOptions,
};
use dsinfra::manifest::{self, LoadOptions, Loaded};
use dsinfra::plan::Mode;

use super::{World, group_of, world};

/// What the listener heard, one line per event.
#[derive(Default)]
struct Heard {
    lines: Mutex<Vec<String>>,
    /// Pressed at the first resource started, `presses` times.
    press_at_start: Option<(Canceller, u32)>,
}

impl Heard {
    fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("not poisoned").clone()
    }

    fn position(&self, line: &str) -> usize {
        self.lines()
            .iter()
            .position(|l| l == line)
            .unwrap_or_else(|| panic!("no {line:?} in {:#?}", self.lines()))
    }
}

impl Listener for Heard {
    fn event(&self, event: OpEvent<'_>) {
        let line = match event {
            OpEvent::Note(text) => format!("note: {text}"),
            OpEvent::Diagnostics { diagnostics, .. } => {
                format!("{} diagnostic(s)", diagnostics.len())
            }
            OpEvent::Plan(plan) => format!("plan: {} change(s)", plan.changes.len()),
            OpEvent::WorkStarted => "work started".to_owned(),
            OpEvent::Resource(Event::Started { address, .. }) => {
                let mut lines = self.lines.lock().expect("not poisoned");
                let first = !lines.iter().any(|l| l.starts_with("started "));
                lines.push(format!("started {address}"));
                drop(lines);
                if let Some((canceller, presses)) = self.press_at_start.as_ref().filter(|_| first) {
                    for _ in 0..*presses {
                        canceller.press();
                    }
                }
                return;
            }
            OpEvent::Resource(_) => return,
            OpEvent::WorkFinished => "work finished".to_owned(),
            OpEvent::Step(_) => "step".to_owned(),
            OpEvent::Block { .. } => "block".to_owned(),
            OpEvent::Output { line, .. } => format!("output: {line}"),
        };
        self.lines.lock().expect("not poisoned").push(line);
    }
}

/// Answers every question with `answer`, after pressing `press` (a Ctrl-C while asking), and
/// remembers the questions.
struct Answer {
    says: bool,
    press: Option<Canceller>,
    asked: Mutex<Vec<Question>>,
}

impl Answer {
    fn new(answer: bool, press: Option<Canceller>) -> Self {
        Self {
            says: answer,
            press,
            asked: Mutex::new(Vec::new()),
        }
    }
}

impl Approver for Answer {
    fn approve(&self, question: &Question) -> Result<bool, op::Error> {
        self.asked
            .lock()
            .expect("not poisoned")
            .push(question.clone());
        if let Some(canceller) = &self.press {
            canceller.press();
        }
        Ok(self.says)
    }
}

const FILE: &str = "dual-dsvm.hcl";

fn loaded(w: &World) -> Loaded {
    manifest::load(&w.path(FILE), &LoadOptions::default()).expect("the example loads")
}

async fn connection(w: &World, loaded: &Loaded) -> Connection {
    let options = Options {
        choice: Choice::Endpoint(w.handle.endpoint()),
        parallelism: NonZeroUsize::new(8).expect("non-zero"),
    };
    connect(&options, &w.path(FILE), &loaded.desired.azure)
        .await
        .expect("connects")
}

/// Apply (or destroy) the example through the operation, steps skipped (no SSH hosts here).
async fn apply(
    w: &World,
    mode: Mode,
    events: &Arc<Heard>,
    approver: &dyn Approver,
    cancel: &Cancel,
) -> Result<ApplyOutcome, op::Error> {
    let loaded = loaded(w);
    let conn = connection(w, &loaded).await;
    let path = w.path(FILE);
    let request = ApplyRequest {
        manifest: op::Manifest {
            path: &path,
            desired: &loaded.desired,
            sources: &loaded.sources,
            backend: loaded.backend.as_ref(),
        },
        arm: &conn,
        mode,
        targets: Vec::new(),
        steps: StepsOptions {
            mode: StepsMode::Skip,
            ..StepsOptions::default()
        },
    };
    let events: op::Events = Arc::clone(events) as op::Events;
    op::apply(request, &events, approver, cancel).await
}

/// The state's lock is free the moment the operation has returned: it can be taken again at
/// once, with no polling window (an abandoned walk hands the lock back before it returns).
fn assert_unlocked(w: &World) {
    if let Err(e) = dsinfra::state::LocalBackend::open(&w.path(FILE)) {
        panic!("the state is still locked after the operation returned: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_that_says_no_changes_nothing_and_is_asked_once() {
    let w = world().await;
    let heard = Arc::new(Heard::default());
    let no = Answer::new(false, None);
    let outcome = apply(&w, Mode::Normal, &heard, &no, &Cancel::never())
        .await
        .expect("no error");
    assert!(matches!(outcome, ApplyOutcome::Declined), "{outcome:?}");
    let asked = no.asked.lock().expect("not poisoned").clone();
    assert_eq!(
        asked,
        [Question {
            verb: "apply",
            text: format!(
                "Do you want to apply these changes in {}?",
                w.handle.endpoint()
            ),
        }]
    );
    // The plan was shown before the question, and nothing was started.
    assert!(
        heard.position("plan: 12 change(s)")
            < heard.position("note: apply cancelled: nothing was changed")
    );
    assert!(
        !heard.lines().iter().any(|l| l == "work started"),
        "{:#?}",
        heard.lines()
    );
    assert_eq!(w.inventory(&group_of("dual-dsvm")).await, BTreeSet::new());
    assert_unlocked(&w);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_asking_ends_the_operation_before_anything_is_changed() {
    let w = world().await;
    let heard = Arc::new(Heard::default());
    let (canceller, cancel) = op::cancel::pair();
    let yes_but_pressed = Answer::new(true, Some(canceller));
    let err = apply(&w, Mode::Normal, &heard, &yes_but_pressed, &cancel)
        .await
        .expect_err("interrupted");
    assert!(matches!(err, op::Error::Interrupted(_)), "{err:?}");
    assert_eq!(err.to_string(), "interrupted: nothing was changed");
    assert!(
        !heard.lines().iter().any(|l| l == "work started"),
        "{:#?}",
        heard.lines()
    );
    assert_eq!(w.inventory(&group_of("dual-dsvm")).await, BTreeSet::new());
    assert_unlocked(&w);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_reports_its_walk_then_has_nothing_to_do_and_destroy_empties_the_cloud() {
    let w = world().await;
    let heard = Arc::new(Heard::default());
    let outcome = apply(&w, Mode::Normal, &heard, &AutoApprove, &Cancel::never())
        .await
        .expect("applies");
    let ApplyOutcome::Walked(walked) = outcome else {
        panic!("walked: {outcome:?}")
    };
    assert_eq!(
        (walked.verb, walked.failed, walked.interrupted),
        ("Apply", 0, false)
    );
    assert!(walked.report.is_success(), "{:?}", walked.report);
    assert!(walked.cost.is_some(), "the cost after a successful apply");
    let lines = heard.lines();
    let started = heard.position("work started");
    let finished = heard.position("work finished");
    let resources: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("started "))
        .collect();
    assert_eq!(resources.len(), 12, "{lines:#?}");
    assert!(
        resources.iter().all(|&i| started < i && i < finished),
        "{lines:#?}"
    );
    assert_eq!(
        w.inventory(&group_of("dual-dsvm")).await,
        w.expected_cloud("dual-dsvm")
    );

    let again = Arc::new(Heard::default());
    let outcome = apply(
        &w,
        Mode::Normal,
        &again,
        &Answer::new(false, None),
        &Cancel::never(),
    )
    .await
    .expect("plans");
    assert!(matches!(outcome, ApplyOutcome::NothingToDo), "{outcome:?}");
    again.position("note: nothing to apply: Azure matches the manifest");

    let destroy = Arc::new(Heard::default());
    let outcome = apply(
        &w,
        Mode::Destroy { keep_data: false },
        &destroy,
        &AutoApprove,
        &Cancel::never(),
    )
    .await
    .expect("destroys");
    let ApplyOutcome::Walked(walked) = outcome else {
        panic!("walked: {outcome:?}")
    };
    assert_eq!((walked.verb, walked.failed), ("Destroy", 0));
    assert_eq!(w.inventory(&group_of("dual-dsvm")).await, BTreeSet::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_presses_during_the_walk_give_up_at_once_and_the_next_apply_adopts_the_rest() {
    let w = world().await;
    let (canceller, cancel) = op::cancel::pair();
    let heard = Arc::new(Heard {
        press_at_start: Some((canceller, 2)),
        ..Heard::default()
    });
    let outcome = apply(&w, Mode::Normal, &heard, &AutoApprove, &cancel)
        .await
        .expect("gives up, without an error");
    assert!(matches!(outcome, ApplyOutcome::Abandoned), "{outcome:?}");
    let lines = heard.lines();
    assert!(
        heard.position(
            "note: exiting now: the state holds everything finished so far; operations still running in Azure are adopted by the next apply"
        ) < heard.position("work finished"),
        "{lines:#?}"
    );
    // It gave up at once: nothing else was started after the presses.
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("started ")).count(),
        1,
        "{lines:#?}"
    );
    assert_unlocked(&w);
    let outcome = apply(
        &w,
        Mode::Normal,
        &Arc::new(Heard::default()),
        &AutoApprove,
        &Cancel::never(),
    )
    .await
    .expect("applies");
    assert!(
        matches!(outcome, ApplyOutcome::Walked(ref w) if w.failed == 0),
        "{outcome:?}"
    );
    assert_eq!(
        w.inventory(&group_of("dual-dsvm")).await,
        w.expected_cloud("dual-dsvm")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_plan_says_what_it_skipped() {
    let w = world().await;
    let loaded = loaded(&w);
    let mut desired = loaded.desired.clone();
    let mut state = dsinfra::state::State::new(&desired.experiment);
    let heard = Arc::new(Heard::default());
    let events: op::Events = Arc::clone(&heard) as op::Events;
    let planned = op::plan(
        op::PlanRequest {
            desired: &mut desired,
            sources: &loaded.sources,
            state: &mut state,
            live: op::Live::Offline,
            options: dsinfra::plan::PlanOptions {
                mode: Mode::Normal,
                targets: Vec::new(),
                now: chrono::Utc::now(),
                rerun_steps: BTreeSet::new(),
            },
        },
        &events,
        &Cancel::never(),
    )
    .await
    .expect("plans");
    assert!(!planned.live);
    assert_eq!(planned.plan.changes.len(), 12);
    assert_eq!(
        heard.lines(),
        [
            "plan: 12 change(s)".to_owned(),
            "note: planned from the saved state only: no Azure connection was requested, so drift \
             detection (refresh) and the quota/SKU preflight were not run"
                .to_owned()
        ]
    );
}
