//! The walk of an approved plan: data disks released first, then the engine's walk
//! (`engine::execute`) with the post-boot steps alongside, Ctrl-C handled as the user expects,
//! the outputs recorded and the steps concluded.
//!
//! Ctrl-C once stops new work and lets running operations finish (at most [`GRACE`]); what
//! finished is saved and the outcome says the walk was interrupted. A second Ctrl-C (or the end
//! of the grace period) gives up waiting at once, after a state save in progress, if any: the
//! outcome is [`ApplyOutcome::Abandoned`], the state's lock is released before it is returned,
//! and what still runs in Azure has an intent in the state, so the next apply adopts it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::apply::{ApplyOutcome, Walked};
use super::steps::{StepsJob, tee};
use super::{Arm, Cancel, Error, Events, OpEvent};
use crate::diag::SourceMap;
use crate::engine::events::{Event, EventSink};
use crate::engine::execute::{Execution, Report, StateStore, execute};
use crate::engine::outputs;
use crate::engine::post_boot::{BlockOutcome, Message};
use crate::model::Desired;
use crate::plan::Plan;
use crate::state::{Backend, State};

/// How long the first Ctrl-C waits for running operations before giving up on them.
pub const GRACE: Duration = Duration::from_mins(1);

/// The engine's first pause before retrying a call ARM kept throttling (ARM's write buckets
/// refill within a minute).
const THROTTLE_PAUSE: Duration = Duration::from_secs(20);

/// Everything the walk of one plan needs.
pub(super) struct Walk<'a> {
    /// The approved plan.
    pub plan: &'a Plan,
    /// What it was made from (fallbacks resolved).
    pub desired: &'a Desired,
    /// Manifest texts, to name manifest lines in advice.
    pub sources: &'a SourceMap,
    /// The connection: the walk's requests count against the same limiter as the refresh and
    /// preflight before it.
    pub arm: &'a Arm,
    /// `Apply` or `Destroy`.
    pub verb: &'static str,
    /// Post-boot steps, run alongside the walk (`None`: destroy).
    pub steps: Option<&'a StepsJob<'a>>,
}

/// Walks `run.plan` against the state, reporting resource progress between
/// [`OpEvent::WorkStarted`] and [`OpEvent::WorkFinished`].
///
/// # Errors
///
/// Before the walk: a data disk could not be released, or Ctrl-C ([`Error::Interrupted`]).
pub(super) async fn walk(
    run: Walk<'_>,
    (backend, state): (Box<dyn Backend + Send>, State),
    events: &Events,
    cancel: &Cancel,
) -> Result<ApplyOutcome, Error> {
    let Walk {
        plan,
        desired,
        sources,
        arm,
        verb,
        steps,
    } = run;
    let (backend, state) = release_disks(steps, plan, desired, (backend, state), cancel).await?;
    events.event(OpEvent::WorkStarted);
    let in_flight = Arc::new(AtomicUsize::new(0));
    // Set when the operation gives up: a task of the walk that has not stopped yet is heard no
    // more (the operation has returned, and its caller may be printing its last words).
    let gone = Arc::new(AtomicBool::new(false));
    let sink = counting(until_gone(events, &gone), Arc::clone(&in_flight));
    // Post-boot steps hear the engine's events, so each block starts once it is ready.
    let (messages, received) = mpsc::unbounded_channel();
    let sink = match steps {
        Some(_) => tee(sink, messages.clone()),
        None => sink,
    };
    let store = Arc::new(StateStore::new(backend, state));
    let (stop, stopped) = watch::channel(false);
    let execution = Execution {
        client: arm.engine_client.clone(),
        subscription: arm.subscription.clone(),
        limiter: Arc::clone(&arm.limiter),
        events: Arc::clone(&sink),
        bridge: Some(Arc::clone(&arm.bridge)),
        sources: Some(sources.clone()),
        throttle_pause: THROTTLE_PAUSE.mul_f64(arm.place.time_scale()),
    };
    let engine = async {
        let report = execute(
            plan,
            desired,
            Arc::clone(&store),
            execution,
            stopped.clone(),
        )
        .await;
        let _ = messages.send(Message::WalkDone);
        report
    };
    let run_steps = async {
        match steps {
            Some(job) => {
                job.during((plan, desired), &store, received, stopped.clone())
                    .await
            }
            None => Vec::new(),
        }
    };
    let work = async { tokio::join!(engine, run_steps) };
    tokio::pin!(work);
    // Armed (reset) by the first Ctrl-C; the branch is disabled until then.
    let grace = tokio::time::sleep(GRACE);
    tokio::pin!(grace);
    let mut presses = cancel.clone();
    let mut interrupted = false;
    let (report, outcomes) = loop {
        // Biased, presses first: a press heard while the walk was being polled (an event's
        // listener pressing, as a test does) is handled before the walk is polled again, which
        // would start what depends on a resource that finished meanwhile. Unbiased, the order
        // was random, and under load a second resource started after two presses.
        tokio::select! {
            biased;
            () = presses.pressed() => {
                // Two presses close together may be seen as one wake-up: count them.
                if interrupted || presses.presses() >= 2 {
                    return Ok(abandon(&store, &gone, events).await);
                }
                interrupted = true;
                let _ = stop.send(true);
                sink(&Event::Stopping { in_flight: in_flight.load(Ordering::SeqCst) });
                grace.as_mut().reset(tokio::time::Instant::now() + GRACE);
            }
            () = &mut grace, if interrupted => {
                events.event(OpEvent::Note(&format!(
                    "operations still running after {}s; exiting without waiting for them",
                    GRACE.as_secs()
                )));
                return Ok(abandon(&store, &gone, events).await);
            }
            done = &mut work => break done,
        }
    };
    events.event(OpEvent::WorkFinished);
    let failed = if interrupted {
        0
    } else {
        conclude(&report, steps, (desired, &outcomes), &store, arm, events).await?
    };
    unlock(&store, events).await;
    Ok(ApplyOutcome::Walked(Walked {
        verb,
        cost: report.is_success().then_some(plan.cost.after),
        report,
        interrupted,
        failed,
    }))
}

/// The walk is over: save what is only staged and release the state's lock now, explicitly
/// (issue 31), so the next command finds it free. A failure is said.
pub(super) async fn unlock(store: &StateStore, events: &Events) {
    let (backend, saved) = store.close().await;
    if let Err(e) = saved {
        events.event(OpEvent::Note(&format!(
            "the last save of the state failed: {e}"
        )));
    }
    if let Some(backend) = backend {
        release(backend, events).await;
    }
}

/// Release the state's lock now; a failure is said (the lock then expires by itself).
pub(super) async fn release(backend: Box<dyn Backend + Send>, events: &Events) {
    if let Err(e) = backend.unlock().await {
        events.event(OpEvent::Note(&format!(
            "the state's lock could not be released ({e}); it expires by itself"
        )));
    }
}

/// Data disks leaving a VM are unmounted there first (a step before an ARM change, like BeeOND's
/// stop before destroy). A busy disk ends the apply here, before any change.
async fn release_disks(
    steps: Option<&StepsJob<'_>>,
    plan: &Plan,
    desired: &Desired,
    (backend, state): (Box<dyn Backend + Send>, State),
    cancel: &Cancel,
) -> Result<(Box<dyn Backend + Send>, State), Error> {
    let Some(job) = steps.filter(|_| !plan.disk_detaches().is_empty()) else {
        return Ok((backend, state));
    };
    let store = StateStore::new(backend, state);
    cancel
        .interruptible(job.release_disks(plan, desired, &store))
        .await??;
    cancel.check()?;
    Ok(store.into_parts())
}

/// After a walk that ran to its end: the outputs recorded when it succeeded, and the steps
/// concluded. Returns how many resources (or else blocks of steps) failed.
async fn conclude(
    report: &Report,
    steps: Option<&StepsJob<'_>>,
    (desired, outcomes): (&Desired, &[BlockOutcome]),
    store: &StateStore,
    arm: &Arm,
    events: &Events,
) -> Result<usize, Error> {
    if !report.is_success() {
        return Ok(report.failed.len().max(1));
    }
    // The outputs, with what only ARM knows filled in. The resources are in place whatever
    // happens here, so a failure is a note, not a failed apply.
    if let Err(e) = outputs::record(&arm.engine_client, desired, store).await {
        events.event(OpEvent::Note(&format!(
            "{e}; `dsinfra output` reads them from Azure instead"
        )));
    }
    match steps.map(|job| job.conclude(desired, outcomes)) {
        Some(Err(Error::Reported { count })) => Ok(count),
        Some(Err(other)) => Err(other),
        Some(Ok(())) | None => Ok(0),
    }
}

/// The engine's events as the listener's, until `gone` is set.
fn until_gone(events: &Events, gone: &Arc<AtomicBool>) -> EventSink {
    let listener = Arc::clone(events);
    let gone = Arc::clone(gone);
    Arc::new(move |event: &Event| {
        if !gone.load(Ordering::SeqCst) {
            listener.event(OpEvent::Resource(event));
        }
    })
}

/// Counts resources in flight (for the Ctrl-C message) on the way to `sink`.
fn counting(sink: EventSink, in_flight: Arc<AtomicUsize>) -> EventSink {
    Arc::new(move |event: &Event| {
        match event {
            Event::Started { .. } => {
                in_flight.fetch_add(1, Ordering::SeqCst);
            }
            Event::Done { .. } | Event::Failed { .. } => {
                in_flight.fetch_sub(1, Ordering::SeqCst);
            }
            _ => {}
        }
        sink(event);
    })
}

/// Gives up waiting: waits for a save in progress, saves what is only staged, releases the
/// state's lock, and says what that means. Everything finished is then saved; what still runs in
/// Azure has an intent in the state, so the next apply adopts it.
///
/// The walk's tasks are detached here, not waited for: the store refuses their saves from now on
/// ([`StateStore::close`]), `gone` silences their events, and dropping the walk's future (the
/// caller returns) aborts them. So the lock is free when the operation returns, every time, and
/// no save of theirs can start that a process exit would cut in half.
async fn abandon(store: &StateStore, gone: &AtomicBool, events: &Events) -> ApplyOutcome {
    let (backend, saved) = store.close().await;
    gone.store(true, Ordering::SeqCst);
    // Handed back explicitly: the OS lock or the blob lease is released now.
    if let Some(backend) = backend {
        release(backend, events).await;
    }
    match saved {
        Ok(()) => events.event(OpEvent::Note(
            "exiting now: the state holds everything finished so far; operations still running in Azure are adopted by the next apply",
        )),
        Err(e) => events.event(OpEvent::Note(&format!(
            "exiting now; the last save failed ({e}): the state holds the intents of everything started, and the next apply adopts what exists"
        ))),
    }
    events.event(OpEvent::WorkFinished);
    ApplyOutcome::Abandoned
}
