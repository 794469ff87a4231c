//! `apply` and `destroy` of a manifest, and `apply PLANFILE` (a saved plan).
//!
//! Both share one flow ([`apply`]): refresh, resolve size fallbacks, plan and preflight
//! ([`super::plan`]), report the plan, ask the [`Approver`], stop BeeOND before a destroy, then
//! walk the plan with the post-boot steps alongside ([`super::walk`]). A plan that changes
//! nothing still runs the steps (new or changed steps, `--rerun-step`, a restarted VM: each
//! node's markers decide). A saved plan ([`apply_saved`]) is applied exactly, after checking it
//! is still current ([`open_saved`]); like Terraform, it is not asked about again (it was
//! reviewed when it was saved).

use std::path::Path;

use chrono::Utc;

use super::plan::{Live, PlanRequest, Planned};
use super::steps::{StepsJob, StepsOptions};
use super::walk::{Walk, walk};
use super::{Approver, Arm, Cancel, Error, Events, OpEvent, Question};
use crate::addr::Address;
use crate::diag::SourceMap;
use crate::engine::execute::{Report, StateStore};
use crate::model::{BackendConfig, Desired};
use crate::plan::{self, CostTotals, Mode, Plan, PlanOptions};
use crate::state::{self, Backend, State};

/// The manifest an operation works on, loaded (with its `-var` values) and validated.
#[derive(Debug, Clone, Copy)]
pub struct Manifest<'a> {
    /// Its file: the local state, logs and known hosts live beside it.
    pub path: &'a Path,
    /// What it asks for.
    pub desired: &'a Desired,
    /// Its texts, for diagnostics.
    pub sources: &'a SourceMap,
    /// Its `backend "azureblob"` block, if the state is kept in Blob Storage.
    pub backend: Option<&'a BackendConfig>,
}

impl Manifest<'_> {
    /// Opens the state's backend (taking its lock for `dsinfra VERB MANIFEST`) and loads the
    /// state, a new one if there is none yet.
    async fn open_state(&self, verb: &str) -> Result<(Box<dyn Backend + Send>, State), Error> {
        let mut backend = state::open_backend(
            self.path,
            self.backend,
            &format!("dsinfra {verb} {}", self.path.display()),
        )
        .await?;
        let state = backend
            .load()
            .await?
            .unwrap_or_else(|| State::new(&self.desired.experiment));
        Ok((backend, state))
    }
}

/// What to apply or destroy.
pub struct ApplyRequest<'a> {
    /// The manifest.
    pub manifest: Manifest<'a>,
    /// The connection.
    pub arm: &'a Arm,
    /// Apply, or destroy (keeping data or not).
    pub mode: Mode,
    /// `-target` addresses (empty: everything).
    pub targets: Vec<Address>,
    /// Post-boot steps; for a destroy only the identity counts (it stops BeeOND first).
    pub steps: StepsOptions,
}

/// How an apply or destroy ended, when it did not fail before changing anything.
#[derive(Debug)]
pub enum ApplyOutcome {
    /// Azure already matched (steps may have run).
    NothingToDo,
    /// The approver said no: nothing was changed.
    Declined,
    /// The plan was walked (to the end, or until interrupted).
    Walked(Walked),
    /// A second Ctrl-C (or the grace period after the first) gave up waiting for running
    /// operations: the state holds what finished and the intents of what still runs.
    Abandoned,
}

/// What a walk did: the CLI renders the summary from it.
#[derive(Debug)]
pub struct Walked {
    /// `Apply` or `Destroy`.
    pub verb: &'static str,
    /// What was done, failed, skipped, not started.
    pub report: Report,
    /// What the experiment costs now, when everything was done.
    pub cost: Option<CostTotals>,
    /// Ctrl-C stopped new work (the rest of the plan was not started).
    pub interrupted: bool,
    /// Resources that failed (at least one when the walk did not finish), or else blocks of
    /// post-boot steps that failed; 0 when all went well.
    pub failed: usize,
}

/// The verb of a mode, as summaries name it.
fn verb(mode: Mode) -> &'static str {
    match mode {
        Mode::Normal => "Apply",
        Mode::Destroy { .. } => "Destroy",
    }
}

/// `apply` or `destroy` a manifest.
///
/// # Errors
///
/// Before anything was changed: the state could not be opened, ARM failed, the plan or the
/// preflight found errors ([`Error::Reported`]), Ctrl-C ([`Error::Interrupted`]), a data disk
/// could not be released; after a plan that changes nothing: steps that failed.
pub async fn apply(
    request: ApplyRequest<'_>,
    events: &Events,
    approver: &dyn Approver,
    cancel: &Cancel,
) -> Result<ApplyOutcome, Error> {
    let ApplyRequest {
        manifest,
        arm,
        mode,
        targets,
        steps: steps_options,
    } = request;
    let verb = verb(mode);
    let lower = verb.to_lowercase();
    let (backend, mut state) = manifest.open_state(&lower).await?;
    let mut desired = manifest.desired.clone();
    let destroy = matches!(mode, Mode::Destroy { .. });
    let options = PlanOptions {
        mode,
        targets,
        now: Utc::now(),
        rerun_steps: if destroy {
            std::collections::BTreeSet::new()
        } else {
            steps_options.rerun.clone()
        },
    };
    let request = PlanRequest {
        desired: &mut desired,
        sources: manifest.sources,
        state: &mut state,
        live: Live::Apply(arm),
        options,
    };
    let Planned { plan: planned, .. } = super::plan::plan(request, events, cancel).await?;
    let steps =
        (!destroy).then(|| StepsJob::new(arm, manifest.path, &steps_options, "apply", events));
    if !planned.has_changes() {
        events.event(OpEvent::Note(&format!(
            "nothing to {lower}: Azure matches the manifest"
        )));
        // The resources are in place, but steps may still have to run: each node's markers
        // decide.
        let steps_then_objects = NothingToDo {
            steps: steps.as_ref(),
            desired: &desired,
            planned: &planned,
            arm,
            destroy,
        };
        Box::pin(steps_then_objects.run((backend, state), events, cancel)).await?;
        return Ok(ApplyOutcome::NothingToDo);
    }
    if !approved(approver, destroy, &lower, arm, events)? {
        return Ok(ApplyOutcome::Declined);
    }
    cancel.check()?;
    if !destroy {
        // Boxed: the apply's future should not carry this one's size.
        Box::pin(rights_in_new_group(
            arm,
            &desired,
            &planned,
            manifest.sources,
            events,
            cancel,
        ))
        .await?;
    }
    let (backend, state) = if destroy {
        // BeeOND is stopped on the heads before their VMs go (best effort). A Ctrl-C meanwhile
        // ends the operation here, before anything is deleted.
        let store = StateStore::new(backend, state);
        let stop = StepsJob::stopping(
            arm,
            manifest.path,
            steps_options.identity.as_deref(),
            events,
        );
        cancel
            .interruptible(Box::pin(stop.stop_beeond(&desired, &store, &[])))
            .await?;
        cancel.check()?;
        store.into_parts()
    } else {
        (backend, state)
    };
    let run = Walk {
        plan: &planned,
        desired: &desired,
        sources: manifest.sources,
        arm,
        verb,
        steps: steps.as_ref(),
    };
    // Boxed, as the steps' runs above: their futures are large (the engine's and the steps'
    // together), and an operation's future should not be.
    // Opening the state again (a lock, and a download for a remote one) only when there are
    // objects to apply or records to prune or forget.
    let kube_work = !desired.kube_objects.is_empty() || !state.kube_objects.is_empty();
    let outcome = Box::pin(walk(run, (backend, state), events, cancel)).await?;
    if kube_work && matches!(&outcome, ApplyOutcome::Walked(w) if !w.interrupted) {
        Box::pin(after_walk(
            &manifest, &lower, arm, &desired, &planned, events, cancel,
        ))
        .await?;
    }
    Ok(outcome)
}

/// Asks the approver; a refusal is said.
fn approved(
    approver: &dyn Approver,
    destroy: bool,
    lower: &str,
    arm: &Arm,
    events: &Events,
) -> Result<bool, Error> {
    let question = Question {
        verb: if destroy { "destroy" } else { "apply" },
        text: format!(
            "Do you want to {lower} these changes in {}?",
            arm.place.name()
        ),
    };
    let yes = approver.approve(&question)?;
    if !yes {
        events.event(OpEvent::Note(&format!(
            "{lower} cancelled: nothing was changed"
        )));
    }
    Ok(yes)
}

/// After the walk (which released the state): the state is opened (and locked) again for the
/// objects' records; the phase releases it at once when neither the manifest nor the state has
/// any.
async fn after_walk(
    manifest: &Manifest<'_>,
    verb: &str,
    arm: &Arm,
    desired: &Desired,
    plan: &Plan,
    events: &Events,
    cancel: &Cancel,
) -> Result<(), Error> {
    let opened = manifest.open_state(verb).await?;
    if matches!(plan.mode, Mode::Destroy { .. }) {
        forget_gone_clusters(opened, events).await
    } else {
        kube_phase(opened, arm, desired, &plan.targets, events, cancel).await
    }
}

/// A plan that changes no resource: the steps still run where each node's markers say, and the
/// Kubernetes objects are applied (they may have drifted).
struct NothingToDo<'a> {
    steps: Option<&'a StepsJob<'a>>,
    desired: &'a Desired,
    planned: &'a Plan,
    arm: &'a Arm,
    destroy: bool,
}

impl NothingToDo<'_> {
    async fn run(
        self,
        (backend, state): (Box<dyn Backend + Send>, State),
        events: &Events,
        cancel: &Cancel,
    ) -> Result<(), Error> {
        let desired = self.desired;
        let (backend, state) = match self.steps.filter(|_| desired.has_post_boot()) {
            Some(job) => {
                let store = StateStore::new(backend, state);
                // The blocks the plan runs steps on (`-target` narrows them), and those that
                // park when idle (their watcher).
                let blocks = self.planned.post_boot_blocks(desired);
                let outcomes = cancel
                    .interruptible(Box::pin(job.now(desired, &store, Some(&blocks))))
                    .await?;
                job.conclude(desired, &outcomes)?;
                store.into_parts()
            }
            None => (backend, state),
        };
        if !self.destroy {
            Box::pin(kube_phase(
                (backend, state),
                self.arm,
                desired,
                &self.planned.targets,
                events,
                cancel,
            ))
            .await?;
        }
        Ok(())
    }
}

/// After a destroy: the records of objects whose cluster is gone go too (AKS deleted them with
/// it); a cluster a targeted destroy kept keeps its records.
async fn forget_gone_clusters(
    (mut backend, mut state): (Box<dyn Backend + Send>, State),
    events: &Events,
) -> Result<(), Error> {
    let before = state.kube_objects.len();
    let kept: Vec<_> = state
        .kube_objects
        .iter()
        .filter(|r| state.resource(&r.cluster).is_some())
        .cloned()
        .collect();
    state.kube_objects = kept;
    let saved = if state.kube_objects.len() == before {
        Ok(())
    } else {
        backend.save(&mut state).await
    };
    super::walk::release(backend, events).await;
    Ok(saved?)
}

/// The Kubernetes objects' phase (`engine::kube_objects`): apply, prune, record, release the
/// state, on the clusters `-target` selects (all without one). A failed object fails the apply
/// after every other object was tried.
async fn kube_phase(
    (mut backend, mut state): (Box<dyn Backend + Send>, State),
    arm: &Arm,
    desired: &Desired,
    targets: &[Address],
    events: &Events,
    cancel: &Cancel,
) -> Result<(), Error> {
    if desired.kube_objects.is_empty() && state.kube_objects.is_empty() {
        super::walk::release(backend, events).await;
        return Ok(());
    }
    let outcome = cancel
        .interruptible(crate::engine::kube_objects::apply(
            &arm.client,
            &arm.subscription,
            desired,
            &state,
            targets,
        ))
        .await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(interrupted) => {
            super::walk::release(backend, events).await;
            return Err(interrupted.into());
        }
    };
    for line in &outcome.lines {
        events.event(OpEvent::Note(line));
    }
    state.kube_objects = outcome.records;
    let saved = backend.save(&mut state).await;
    super::walk::release(backend, events).await;
    saved?;
    if outcome.failures.is_empty() {
        return Ok(());
    }
    Err(Error::Failed(format!(
        "{} Kubernetes object(s) could not be applied (the rest were):\n  {}",
        outcome.failures.len(),
        outcome.failures.join("\n  ")
    )))
}

/// A new resource group's idle-park rights
/// ([`crate::engine::preflight::rbac::check_in_new_group`]): asked once the group exists, before
/// anything else is written; problems end the apply there.
async fn rights_in_new_group(
    arm: &Arm,
    desired: &Desired,
    plan: &Plan,
    sources: &SourceMap,
    events: &Events,
    cancel: &Cancel,
) -> Result<(), Error> {
    let problems = cancel
        .interruptible(crate::engine::preflight::rbac::check_in_new_group(
            &arm.client,
            &arm.subscription,
            desired,
            plan,
        ))
        .await??;
    if problems.is_empty() {
        return Ok(());
    }
    events.event(OpEvent::Diagnostics {
        diagnostics: &problems,
        sources,
    });
    Err(Error::Reported {
        count: problems.len(),
    })
}

/// What a saved plan was made from, opened again: its backend (locked) and state.
pub struct Reopened {
    /// The state's backend, locked for this command.
    pub backend: Box<dyn Backend + Send>,
    /// The state, as the plan was checked against it.
    pub state: State,
}

/// Opens the state of `manifest` (the manifest `saved` was made from, loaded again) for
/// `dsinfra VERB`, and checks that neither the manifest nor the state changed since the plan was
/// saved: what `apply PLANFILE` and `show PLANFILE` both do before trusting it.
///
/// # Errors
///
/// The state could not be opened, or the plan is stale (said whole: what changed, and to plan
/// again).
pub async fn open_saved(
    saved: &Plan,
    manifest: &Manifest<'_>,
    verb: &str,
) -> Result<Reopened, Error> {
    let (backend, state) = manifest.open_state(verb).await?;
    plan::check_binding(saved, &state, &manifest.desired.manifest_hash)
        .map_err(|stale| Error::Failed(stale.to_string()))?;
    Ok(Reopened { backend, state })
}

/// What saved plan to apply.
pub struct SavedRequest<'a> {
    /// The plan, as read from its file.
    pub saved: &'a Plan,
    /// The manifest it was made from, loaded again with this command's `-var` values.
    pub manifest: Manifest<'a>,
    /// Its state, checked against the plan ([`open_saved`] with the verb `apply`).
    pub reopened: Reopened,
    /// The connection.
    pub arm: &'a Arm,
    /// Post-boot steps (a saved destroy runs none).
    pub steps: StepsOptions,
}

/// `apply PLANFILE`: exactly the saved changes, once [`open_saved`] found the plan still
/// current. The plan is reported, and not asked about.
///
/// # Errors
///
/// As [`apply`] once the plan is approved.
pub async fn apply_saved(
    request: SavedRequest<'_>,
    events: &Events,
    cancel: &Cancel,
) -> Result<ApplyOutcome, Error> {
    let SavedRequest {
        saved,
        manifest,
        reopened: Reopened { backend, state },
        arm,
        steps,
    } = request;
    // The saved plan, not a new evaluation, says what each resource becomes (size fallbacks were
    // resolved when it was made).
    let mut desired = manifest.desired.clone();
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
    events.event(OpEvent::Plan(saved));
    let destroy = matches!(saved.mode, Mode::Destroy { .. });
    if !saved.has_changes() {
        if saved.has_kube_changes() {
            // No resource changes, but the plan's Kubernetes objects do.
            let targets = &saved.targets;
            Box::pin(kube_phase(
                (backend, state),
                arm,
                &desired,
                targets,
                events,
                cancel,
            ))
            .await?;
        } else {
            super::walk::release(backend, events).await;
            events.event(OpEvent::Note("the saved plan changes nothing"));
        }
        return Ok(ApplyOutcome::NothingToDo);
    }
    cancel.check()?;
    let steps = matches!(saved.mode, Mode::Normal)
        .then(|| StepsJob::new(arm, manifest.path, &steps, "apply", events));
    let run = Walk {
        plan: saved,
        desired: &desired,
        sources: manifest.sources,
        arm,
        verb: verb(saved.mode),
        steps: steps.as_ref(),
    };
    // Boxed, as the steps' runs above: their futures are large (the engine's and the steps'
    // together), and an operation's future should not be.
    let kube_work = !desired.kube_objects.is_empty() || !state.kube_objects.is_empty();
    let outcome = Box::pin(walk(run, (backend, state), events, cancel)).await?;
    if kube_work && matches!(&outcome, ApplyOutcome::Walked(w) if !w.interrupted) {
        let verb = if destroy { "destroy" } else { "apply" };
        Box::pin(after_walk(
            &manifest, verb, arm, &desired, saved, events, cancel,
        ))
        .await?;
    }
    Ok(outcome)
}
