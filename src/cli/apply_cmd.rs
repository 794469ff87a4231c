//! `apply` and `destroy`: refresh, plan, show, ask, execute, summarise.
//!
//! Both commands share one flow ([`run`]): connect to ARM, refresh the state (drift, power
//! states), resolve size fallbacks, plan, run the quota/SKU preflight, render the plan, ask for
//! approval (dialoguer; `--auto-approve` skips it; without a terminal and without the flag it is
//! an error, never a hang), then hand the plan to the engine and render its events. `apply
//! PLANFILE` applies a saved plan exactly, after checking it is still current; like Terraform, it
//! does not ask again (the plan was reviewed when it was saved).
//!
//! Ctrl-C once stops new work, lets running operations finish (at most [`GRACE`]), saves and exits
//! 130; a second Ctrl-C exits at once, after waiting for a state save in progress, if any.

use std::io::IsTerminal as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use chrono::Utc;
use tokio::sync::watch;

use super::args::ConnectArgs;
use super::args::{ApplyArgs, DestroyArgs, ManifestArgs};
use super::steps_run::{self, StepsJob};
use super::{AlreadyReported, Outcome, Output};
use crate::addr::Address;
use crate::azure::ArmClient;
use crate::connect::connect;
use crate::engine::events::{Event, EventSink, LroBridge};
use crate::engine::execute::{Execution, Report, StateStore, execute};
use crate::engine::limiter::Limiter;
use crate::engine::op::Target;
use crate::engine::{preflight, refresh};
use crate::model::Desired;
use crate::plan::{self, Mode, Plan, PlanOptions};
use crate::render;
use crate::render::progress::{Progress, summary};
use crate::state::{self, Backend, State};

/// How long the first Ctrl-C waits for running operations before exiting anyway.
pub const GRACE: Duration = Duration::from_mins(1);

/// The engine's first pause before retrying a call ARM kept throttling (ARM's write buckets
/// refill within a minute).
const THROTTLE_PAUSE: Duration = Duration::from_secs(20);

/// What one run does.
struct Job<'a> {
    manifest: &'a ManifestArgs,
    connect: &'a ConnectArgs,
    auto_approve: bool,
    targets: &'a [String],
    mode: Mode,
    /// `apply`'s post-boot step flags; `None` for destroy.
    steps: Option<&'a super::args::StepsArgs>,
    /// `destroy -i`: the identity that stops BeeOND first.
    identity: Option<&'a Path>,
}

impl Job<'_> {
    fn verb(&self) -> &'static str {
        match self.mode {
            Mode::Normal => "Apply",
            Mode::Destroy { .. } => "Destroy",
        }
    }
}

/// `dsinfra apply MANIFEST|PLANFILE`
pub fn apply(args: &ApplyArgs, out: &Output) -> anyhow::Result<Outcome> {
    if is_saved_plan(&args.manifest.manifest)? {
        return apply_saved(args, out);
    }
    run(
        &Job {
            manifest: &args.manifest,
            connect: &args.connect,
            auto_approve: args.auto_approve,
            targets: &args.targets,
            mode: Mode::Normal,
            steps: Some(&args.steps),
            identity: None,
        },
        out,
    )
}

/// `dsinfra destroy MANIFEST`
pub fn destroy(args: &DestroyArgs, out: &Output) -> anyhow::Result<Outcome> {
    run(
        &Job {
            manifest: &args.manifest,
            connect: &args.connect,
            auto_approve: args.auto_approve,
            targets: &args.targets,
            mode: Mode::Destroy {
                keep_data: args.keep_data,
            },
            steps: None,
            identity: args.identity.as_deref(),
        },
        out,
    )
}

/// A manifest ends in `.hcl`; anything else that reads as JSON is taken for a saved plan.
fn is_saved_plan(path: &Path) -> anyhow::Result<bool> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("hcl"))
    {
        return Ok(false);
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    Ok(text.trim_start().starts_with('{'))
}

fn run(job: &Job<'_>, out: &Output) -> anyhow::Result<Outcome> {
    let loaded = super::live_sizes::load_connected(job.manifest, job.connect, out)?;
    let mut desired = loaded.desired.clone();
    let manifest = &job.manifest.manifest;
    let mut backend = state::open_backend(
        manifest,
        loaded.backend.as_ref(),
        &format!(
            "dsinfra {} {}",
            job.verb().to_lowercase(),
            manifest.display()
        ),
    )?;
    let mut state = backend
        .load()?
        .unwrap_or_else(|| State::new(&desired.experiment));
    let runtime = super::interrupt::runtime()?;
    let conn = super::interrupt::block_on(
        &runtime,
        connect(&job.connect.options(), manifest, &desired.azure),
    )??;
    let (client, time_scale, bridge) = (
        conn.engine_client.clone(),
        conn.time_scale,
        Arc::clone(&conn.bridge),
    );

    let planned = plan_live(
        job,
        &runtime,
        (&client, &conn.subscription),
        (&mut desired, &mut state),
        &loaded.sources,
        out,
    )?;
    if !planned.has_changes() {
        out.note(&format!(
            "nothing to {}: Azure matches the manifest",
            job.verb().to_lowercase()
        ));
        // The resources are in place, but steps may still have to run (new or changed steps,
        // --rerun-step, a VM that was restarted): each node's markers decide.
        if let Some(args) = job.steps.filter(|_| !desired.steps.is_empty()) {
            let steps = StepsJob::new(&conn, manifest, args, "apply");
            let store = StateStore::new(backend, state);
            // Only the blocks the plan lists (`-target` narrows them).
            let blocks: Vec<Address> = planned.steps.iter().map(|s| s.block.clone()).collect();
            let outcomes = super::interrupt::block_on(
                &runtime,
                steps.now(
                    (&client, &conn.subscription),
                    &desired,
                    &store,
                    Some(&blocks),
                ),
            )?;
            steps.conclude(&desired, &outcomes, out)?;
        }
        return Ok(Outcome::Success);
    }
    if !super::interrupt::approval(approve(job, &conn.target))? {
        out.note(&format!(
            "{} cancelled: nothing was changed",
            job.verb().to_lowercase()
        ));
        return Ok(Outcome::Failed);
    }
    let (backend, state) = if matches!(job.mode, Mode::Destroy { .. }) {
        // BeeOND is stopped on the heads before their VMs go (best effort).
        // A Ctrl-C meanwhile ends the command here, before anything is deleted.
        let store = StateStore::new(backend, state);
        let stop = StepsJob::stopping(&conn, manifest, job.identity);
        super::interrupt::block_on(
            &runtime,
            stop.stop_beeond((&client, &conn.subscription), &desired, &store, &[], out),
        )?;
        super::interrupt::check()?;
        store.into_parts()
    } else {
        (backend, state)
    };
    let run = Run {
        runtime: &runtime,
        client,
        subscription: conn.subscription.clone(),
        bridge,
        limiter: Arc::clone(&conn.limiter),
        verb: job.verb(),
        time_scale,
        steps: job
            .steps
            .map(|args| StepsJob::new(&conn, manifest, args, "apply")),
    };
    let outcome = run.execute(&planned, &desired, backend, state, &loaded.sources, out)?;
    drop(conn);
    Ok(outcome)
}

/// Refresh, resolve size fallbacks, plan, preflight, and show the plan. Located problems are
/// printed and fail the command.
fn plan_live(
    job: &Job<'_>,
    runtime: &tokio::runtime::Runtime,
    (client, subscription): (&ArmClient, &str),
    (desired, state): (&mut Desired, &mut State),
    sources: &crate::diag::SourceMap,
    out: &Output,
) -> anyhow::Result<Plan> {
    let targets = job
        .targets
        .iter()
        .map(|t| t.parse::<Address>())
        .collect::<Result<Vec<_>, _>>()?;
    let fallback_notes = super::interrupt::block_on(runtime, async {
        let report = refresh::refresh(client, subscription, state).await?;
        out.note(&format!(
            "refreshed {} resource(s): {} deleted and {} changed outside dsinfra",
            report.checked,
            report.deleted.len(),
            report.changed.len()
        ));
        match job.mode {
            Mode::Normal => preflight::resolve_live(client, subscription, desired, state).await,
            Mode::Destroy { .. } => Ok(Vec::new()),
        }
    })??;
    let options = PlanOptions {
        mode: job.mode,
        targets,
        now: Utc::now(),
        rerun_steps: job
            .steps
            .map(|s| s.rerun_steps.iter().cloned().collect())
            .unwrap_or_default(),
    };
    let mut planned = match plan::plan(desired, state, &options) {
        Ok(planned) => planned,
        Err(diagnostics) => {
            out.message(&render::diagnostics(
                &diagnostics,
                sources,
                out.stderr_colour(),
            ));
            let count = diagnostics.iter().filter(|d| d.is_error()).count();
            return Err(AlreadyReported { count }.into());
        }
    };
    planned.notes.extend(fallback_notes);
    let problems = match job.mode {
        Mode::Normal => super::interrupt::block_on(
            runtime,
            preflight::preflight(client, subscription, desired, &planned),
        )??,
        Mode::Destroy { .. } => Vec::new(),
    };
    out.result(&render::plan_text(&planned, out.stdout_colour()));
    if !problems.is_empty() {
        out.message(&render::diagnostics(
            &problems,
            sources,
            out.stderr_colour(),
        ));
        let count = problems.iter().filter(|d| d.is_error()).count();
        if count > 0 {
            return Err(AlreadyReported { count }.into());
        }
    }
    Ok(planned)
}

/// `apply PLANFILE`: exactly the saved changes, after checking the plan is still current.
fn apply_saved(args: &ApplyArgs, out: &Output) -> anyhow::Result<Outcome> {
    let path = &args.manifest.manifest;
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("could not read {file}"))?;
    let saved = Plan::from_saved_json(&text, &file)?;
    let Some(source) = saved.source.clone() else {
        bail!(
            "{file} does not say which manifest it was made from, so it cannot be applied: run `dsinfra plan -out` again"
        );
    };
    if !args.targets.is_empty() {
        bail!(
            "-target cannot narrow a saved plan: it is applied exactly as saved; make a new plan with -target instead"
        );
    }
    let super::plan_cmd::Reopened {
        loaded,
        backend,
        state,
    } = super::plan_cmd::open_saved(&saved, &source, &args.manifest.vars, "apply", out)?;
    // The saved plan, not a new evaluation, says what each resource becomes (size fallbacks were
    // resolved when it was made).
    let mut desired = loaded.desired.clone();
    for change in &saved.changes {
        if let (Some(after), Some(resource)) = (
            &change.after,
            desired
                .resources
                .iter_mut()
                .find(|r| r.address == change.address),
        ) {
            resource.attrs.clone_from(after);
        }
    }
    out.result(&render::plan_text(&saved, out.stdout_colour()));
    if !saved.has_changes() {
        out.note("the saved plan changes nothing");
        return Ok(Outcome::Success);
    }
    let runtime = super::interrupt::runtime()?;
    let conn = super::interrupt::block_on(
        &runtime,
        connect(&args.connect.options(), &source.manifest, &desired.azure),
    )??;
    super::interrupt::check()?;
    let (client, time_scale, bridge) = (
        conn.engine_client.clone(),
        conn.time_scale,
        Arc::clone(&conn.bridge),
    );
    let verb = match saved.mode {
        Mode::Normal => "Apply",
        Mode::Destroy { .. } => "Destroy",
    };
    let run = Run {
        runtime: &runtime,
        client,
        subscription: conn.subscription.clone(),
        bridge,
        limiter: Arc::clone(&conn.limiter),
        verb,
        time_scale,
        steps: matches!(saved.mode, Mode::Normal)
            .then(|| StepsJob::new(&conn, &source.manifest, &args.steps, "apply")),
    };
    let outcome = run.execute(&saved, &desired, backend, state, &loaded.sources, out)?;
    drop(conn);
    Ok(outcome)
}

/// Ask before spending money. Never waits on a terminal that is not there.
fn approve(job: &Job<'_>, target: &Target) -> anyhow::Result<bool> {
    if job.auto_approve {
        return Ok(true);
    }
    let verb = job.verb().to_lowercase();
    if !std::io::stdin().is_terminal() || !console::Term::stderr().is_term() {
        bail!(
            "{verb} needs approval, but there is no terminal to ask on: review the plan above and run again with --auto-approve"
        );
    }
    let place = match target {
        Target::Azure => "Azure".to_owned(),
        Target::Endpoint(url) => url.clone(),
        Target::BuiltInEmulator => "the built-in emulator".to_owned(),
    };
    dialoguer::Confirm::new()
        .with_prompt(format!("Do you want to {verb} these changes in {place}?"))
        .default(false)
        .interact()
        .context("could not read the answer")
}

/// Everything the execution of one plan needs.
struct Run<'a> {
    runtime: &'a tokio::runtime::Runtime,
    client: ArmClient,
    subscription: String,
    bridge: Arc<LroBridge>,
    /// The connection's limiter: the walk's requests count against the same bound as the
    /// refresh and preflight before it.
    limiter: Arc<Limiter>,
    verb: &'static str,
    /// The client's time scale (1 against Azure), applied to the engine's own pauses too.
    time_scale: f64,
    /// Post-boot steps, run alongside the walk (`None`: destroy).
    steps: Option<StepsJob<'a>>,
}

impl Run<'_> {
    /// Data disks leaving a VM are unmounted there first (a step before an ARM change, like
    /// BeeOND's stop before destroy). A busy disk ends the apply here, before any change.
    fn release_disks(
        &self,
        planned: &Plan,
        desired: &Desired,
        (backend, state): (Box<dyn Backend + Send>, State),
        out: &Output,
    ) -> anyhow::Result<(Box<dyn Backend + Send>, State)> {
        let Some(job) = self
            .steps
            .as_ref()
            .filter(|_| !planned.disk_detaches().is_empty())
        else {
            return Ok((backend, state));
        };
        let store = StateStore::new(backend, state);
        super::interrupt::block_on(
            self.runtime,
            job.release_disks(
                (&self.client, &self.subscription),
                planned,
                desired,
                &store,
                out,
            ),
        )??;
        super::interrupt::check()?;
        Ok(store.into_parts())
    }

    fn execute(
        self,
        planned: &Plan,
        desired: &Desired,
        backend: Box<dyn Backend + Send>,
        state: State,
        sources: &crate::diag::SourceMap,
        out: &Output,
    ) -> anyhow::Result<Outcome> {
        let (backend, state) = self.release_disks(planned, desired, (backend, state), out)?;
        let tty = console::Term::stdout().is_term();
        let progress = Progress::new(tty);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let sink = counting(progress.sink(), Arc::clone(&in_flight));
        // Post-boot steps hear the engine's events, so each block starts once it is ready.
        let (messages, received) = tokio::sync::mpsc::unbounded_channel();
        let sink = match &self.steps {
            Some(_) => steps_run::tee(sink, messages.clone()),
            None => sink,
        };
        let store = Arc::new(StateStore::new(backend, state));
        let (cancel, cancelled) = watch::channel(false);
        let outputs_client = self.client.clone();
        let steps_cancelled = cancelled.clone();
        let steps_subscription = self.subscription.clone();
        let execution = Execution {
            client: self.client,
            subscription: self.subscription,
            limiter: self.limiter,
            events: Arc::clone(&sink),
            bridge: Some(self.bridge),
            sources: Some(sources.clone()),
            throttle_pause: THROTTLE_PAUSE.mul_f64(self.time_scale),
        };
        let mut interrupted = false;
        let steps = self.steps.as_ref();
        let (report, step_outcomes): (Report, Vec<_>) = self.runtime.block_on(async {
            // Listening starts here, before the walk is first polled: a `ctrl_c()` future made in
            // the select below would only listen from its first poll, after the first resources
            // were already started (and reported), and a press in between would be lost.
            let mut ctrl_c = ctrl_c_presses();
            let walk = async {
                let report =
                    execute(planned, desired, Arc::clone(&store), execution, cancelled).await;
                let _ = messages.send(crate::engine::post_boot::Message::WalkDone);
                report
            };
            let run_steps = async {
                match steps {
                    Some(job) => {
                        job.during(
                            (&outputs_client, &steps_subscription),
                            (planned, desired),
                            &store,
                            received,
                            steps_cancelled,
                        )
                        .await
                    }
                    None => Vec::new(),
                }
            };
            let work = async { tokio::join!(walk, run_steps) };
            tokio::pin!(work);
            // Armed (reset) by the first Ctrl-C; the branch is disabled until then.
            let grace = tokio::time::sleep(GRACE);
            tokio::pin!(grace);
            loop {
                tokio::select! {
                    report = &mut work => break report,
                    pressed = next_press(ctrl_c.as_mut()) => {
                        if pressed.is_none() {
                            // No signal handling on this platform: run to the end.
                            break (&mut work).await;
                        }
                        if interrupted {
                            exit_now(&store, out);
                        }
                        interrupted = true;
                        let _ = cancel.send(true);
                        sink(&Event::Stopping { in_flight: in_flight.load(Ordering::SeqCst) });
                        grace.as_mut().reset(tokio::time::Instant::now() + GRACE);
                    }
                    () = &mut grace, if interrupted => {
                        out.note(&format!(
                            "operations still running after {}s; exiting without waiting for them",
                            GRACE.as_secs()
                        ));
                        exit_now(&store, out);
                    }
                }
            }
        });
        progress.finish();
        if report.is_success() && !interrupted {
            record_outputs(self.runtime, &outputs_client, desired, &store, out);
        }
        let cost = report.is_success().then_some(&planned.cost.after);
        out.result(&summary(self.verb, &report, cost));
        if interrupted {
            return Ok(Outcome::Interrupted);
        }
        if report.is_success() {
            if let Some(job) = steps {
                job.conclude(desired, &step_outcomes, out)?;
            }
            Ok(Outcome::Success)
        } else {
            Err(AlreadyReported {
                count: report.failed.len().max(1),
            }
            .into())
        }
    }
}

/// Ctrl-C presses, counted from the moment the stream is made (a `tokio::signal::ctrl_c()`
/// future listens only from its first poll, and anew each time).
#[cfg(unix)]
type CtrlC = tokio::signal::unix::Signal;
#[cfg(windows)]
type CtrlC = tokio::signal::windows::CtrlC;

/// Starts counting Ctrl-C presses; `None` where signals cannot be handled.
fn ctrl_c_presses() -> Option<CtrlC> {
    #[cfg(unix)]
    let presses = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
    #[cfg(windows)]
    let presses = tokio::signal::windows::ctrl_c();
    presses.ok()
}

/// The next press; `None` at once without signal handling.
async fn next_press(presses: Option<&mut CtrlC>) -> Option<()> {
    presses?.recv().await
}

/// After a successful run: the outputs, with what only ARM knows filled in (engine/outputs.rs).
/// The resources are in place whatever happens here, so a failure is a note, not a failed apply.
fn record_outputs(
    runtime: &tokio::runtime::Runtime,
    client: &ArmClient,
    desired: &Desired,
    store: &StateStore,
    out: &Output,
) {
    let recorded = runtime.block_on(crate::engine::outputs::record(client, desired, store));
    if let Err(e) = recorded {
        out.note(&format!(
            "{e}; `dsinfra output` reads them from Azure instead"
        ));
    }
}

/// Count resources in flight (for the Ctrl-C message) on the way to the renderer.
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

/// The second Ctrl-C (or the end of the grace period): wait for a save in progress, save what
/// is only staged, then exit 130. Everything finished is then saved; what still runs in Azure has
/// an intent in the state, so the next apply adopts it.
fn exit_now(store: &StateStore, out: &Output) -> ! {
    let (_held, saved) = store.hold();
    match saved {
        Ok(()) => out.note(
            "exiting now: the state holds everything finished so far; operations still running in Azure are adopted by the next apply",
        ),
        Err(e) => out.note(&format!(
            "exiting now; the last save failed ({e}): the state holds the intents of everything started, and the next apply adopts what exists"
        )),
    }
    std::process::exit(130);
}
