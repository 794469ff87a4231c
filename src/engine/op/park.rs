//! `park` and `unpark` as one operation: refresh the VMs' power states (so a VM parked by its
//! auto-shutdown schedule is not parked again), pick the VMs to change, check the quota a start
//! needs, ask, stop BeeOND before a park, send the power actions, and run the started VMs'
//! steps after an unpark.
//!
//! The power actions are [`crate::engine::power::set_power`]: every VM's action at once, its
//! requests gated by the connection's one limiter, each VM saved as it finishes, progress as the
//! engine's [`OpEvent::Resource`] events between [`OpEvent::WorkStarted`] and
//! [`OpEvent::WorkFinished`], as apply reports.
//!
//! Ctrl-C until the actions are sent (refreshing, the quota check, the question, BeeOND's stop)
//! ends the operation with [`Error::Interrupted`]: nothing was changed, and dropping the backend
//! releases the lock. Once sent, the actions run in Azure whatever dsinfra does, so a press then
//! only stops the waiting: what finished is saved and the outcome says what goes on.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::steps::{StepsJob, StepsOptions};
use super::{Approver, Arm, Cancel, Error, Events, OpEvent, Question};
use crate::addr::Address;
use crate::diag::SourceMap;
use crate::engine::advice::{self, ResourceError};
use crate::engine::events::{Event, EventSink, Operation};
use crate::engine::kinds;
use crate::engine::power::{self, HourlyCost, PowerChange, PowerError};
use crate::engine::preflight;
use crate::engine::refresh;
use crate::model::{Desired, ResourceKind};
use crate::state::{Backend, State};

/// What a park or unpark is asked to do.
pub struct ParkRequest<'a> {
    /// Park or unpark.
    pub change: PowerChange,
    /// The manifest's world: its blocks locate quota problems and advice, its steps run after
    /// an unpark.
    pub desired: &'a Desired,
    /// The manifest's text, for the snippets of located problems and advice.
    pub sources: &'a SourceMap,
    /// The manifest's path: the steps' logs go next to it, and notes name it.
    pub manifest: &'a Path,
    /// The opened state backend (holding the lock) and the state it read.
    pub backend: Box<dyn Backend + Send>,
    /// The state, as the backend read it.
    pub state: State,
    /// The connection.
    pub arm: &'a Arm,
    /// `--only`: the VMs to act on (a block label, block, node or address); empty for all.
    pub only: &'a [String],
    /// Steps after an unpark, BeeOND's stop before a park.
    pub steps: StepsOptions,
}

/// What a park or unpark did. Problems after the actions were sent do not make the operation
/// fail: they are here, with what was done, so the caller can show both.
#[derive(Debug)]
pub struct ParkOutcome {
    /// The VMs the actions were sent to; empty when every selected VM was already where asked.
    pub sent: Vec<Address>,
    /// $/hour before the actions.
    pub before: HourlyCost,
    /// $/hour after them (what finished).
    pub after: HourlyCost,
    /// Each VM whose action failed: ARM's words and the engine's advice (quota numbers,
    /// capacity: another zone, region or size), as apply's summary lists failures.
    pub failures: Vec<ResourceError>,
    /// Set when a Ctrl-C stopped the waiting: what goes on, for the user.
    pub interrupted: Option<String>,
    /// What failed once the actions were sent: VMs that could not be changed
    /// ([`Error::Failed`], with the count and the first failure), or steps after an unpark
    /// ([`Error::Reported`]).
    pub problem: Option<Error>,
}

/// Park or unpark the VMs `request` selects.
///
/// # Errors
///
/// Before anything was changed: the refresh or the quota read failed, `--only` selects no VM,
/// the quota is short for a start ([`Error::Reported`], the problems sent as diagnostics), the
/// question was declined or could not be asked, or Ctrl-C ([`Error::Interrupted`]).
pub async fn park(
    request: ParkRequest<'_>,
    events: &Events,
    approver: &dyn Approver,
    cancel: &Cancel,
) -> Result<ParkOutcome, Error> {
    let ParkRequest {
        change,
        desired,
        sources,
        manifest,
        mut backend,
        mut state,
        arm,
        only,
        steps,
    } = request;
    let note = |text: &str| events.event(OpEvent::Note(text));
    // Refreshed first, so a VM parked by its auto-shutdown schedule is not parked again.
    cancel
        .interruptible(refresh::refresh(&arm.client, &arm.subscription, &mut state))
        .await??;
    let selected = power::select_vms(&state, only).map_err(|e| Error::Failed(e.to_string()))?;
    let todo = power::needing_change(&state, &selected, change);
    let before = power::hourly_cost(&state);
    if todo.is_empty() {
        note(&nothing_to_do(change, selected.len()));
        return Ok(ParkOutcome {
            sent: Vec::new(),
            before,
            after: before,
            failures: Vec::new(),
            interrupted: None,
            problem: None,
        });
    }
    let kinds = Kinds::of(&state, &todo);
    if change == PowerChange::Park {
        for warning in park_warnings(&kinds) {
            note(warning);
        }
    }
    if change == PowerChange::Unpark {
        check_start(arm, &state, &todo, (desired, sources), events, cancel).await?;
    }
    let question = Question {
        verb: change.verb(),
        text: question(change, &todo, &kinds, &arm.place.name()),
    };
    if !approver.approve(&question)? {
        return Err(Error::Failed("cancelled: nothing was changed".to_owned()));
    }
    cancel.check()?;
    let job = StepsJob::new(arm, manifest, &steps, change.verb(), events);
    if change == PowerChange::Park {
        (backend, state) = cancel
            .interruptible(Box::pin(job.before_park(desired, (backend, state), &todo)))
            .await?;
    }
    // The last moment at which a Ctrl-C means "nothing was changed".
    cancel.check()?;

    events.event(OpEvent::WorkStarted);
    let listener = Arc::clone(events);
    let sink: EventSink = Arc::new(move |event: &Event| listener.event(OpEvent::Resource(event)));
    // The engine's client: against an emulator it waits at the emulator's latency scale, as
    // apply's does; either way it is gated by the connection's limiter.
    let sent = cancel
        .interruptible(Box::pin(power::set_power(
            &arm.engine_client,
            backend.as_mut(),
            &mut state,
            &todo,
            change,
            &sink,
        )))
        .await;
    events.event(OpEvent::WorkFinished);
    let mut outcome = ParkOutcome {
        before,
        after: power::hourly_cost(&state),
        sent: todo,
        failures: Vec::new(),
        interrupted: None,
        problem: None,
    };
    let Ok(sent) = sent else {
        outcome.interrupted = Some(format!(
            "interrupted: the {} power action(s) sent go on in Azure; what finished is saved, \
             and `dsinfra status {}` shows the rest",
            outcome.sent.len(),
            manifest.display()
        ));
        return Ok(outcome);
    };
    (outcome.failures, outcome.problem) = problems(sent, change, desired, sources);
    if change == PowerChange::Unpark {
        after_unpark(&job, desired, (backend, state), cancel, &mut outcome).await;
    } else {
        super::walk::release(backend, events).await;
    }
    Ok(outcome)
}

/// The started VMs' steps (they boot afresh, so their per-boot steps run again). A press stops
/// them: the VMs run, and what had not finished runs at the next apply.
async fn after_unpark(
    job: &StepsJob<'_>,
    desired: &Desired,
    parts: (Box<dyn Backend + Send>, State),
    cancel: &Cancel,
    outcome: &mut ParkOutcome,
) {
    let ran = cancel
        .interruptible(Box::pin(job.after_unpark(desired, parts, &outcome.sent)))
        .await;
    match ran {
        Ok(ran) => outcome.problem = outcome.problem.take().or(ran.err()),
        Err(_) => {
            outcome.interrupted = Some(
                "interrupted: the VMs are running; the steps that had not finished run at the \
                 next `dsinfra apply`"
                    .to_owned(),
            );
        }
    }
}

/// The note when every selected VM is already where it was asked to go.
fn nothing_to_do(change: PowerChange, selected: usize) -> String {
    let verb = match change {
        PowerChange::Park => "parked",
        PowerChange::Unpark => "running",
    };
    format!("nothing to do: {selected} VM(s) selected, all already {verb}")
}

/// What went wrong with the actions: each failed VM described, and the operation's problem.
fn problems(
    sent: Result<(), PowerError>,
    change: PowerChange,
    desired: &Desired,
    sources: &SourceMap,
) -> (Vec<ResourceError>, Option<Error>) {
    match sent {
        Ok(()) => (Vec::new(), None),
        Err(PowerError::State(e)) => (Vec::new(), Some(Error::State(e))),
        Err(err) => {
            let failures = match &err {
                PowerError::Failed { failures, .. } => {
                    described(failures, change, desired, sources)
                }
                PowerError::NoSuchVm { .. } | PowerError::State(_) => Vec::new(),
            };
            (failures, Some(Error::Failed(err.to_string())))
        }
    }
}

/// How many of the resources a park or unpark acts on are of each parkable kind, in the
/// registry's order: each kind is parked its own way (its driver's [`kinds::Parking`]), and the
/// question and warnings say how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Kinds(BTreeMap<ResourceKind, usize>);

impl Kinds {
    fn of(state: &State, todo: &[Address]) -> Self {
        let mut counts = BTreeMap::new();
        for r in todo.iter().filter_map(|a| state.resource(a)) {
            *counts.entry(r.kind).or_default() += 1;
        }
        Self(counts)
    }

    fn parkings(&self) -> impl Iterator<Item = (&'static kinds::Parking, usize)> + '_ {
        self.0
            .iter()
            .filter_map(|(kind, n)| Some((kinds::driver(*kind).parking()?, *n)))
    }
}

/// The warnings a park gives before asking, one per kind of resource it parks: a mixed
/// manifest gets each.
fn park_warnings(kinds: &Kinds) -> Vec<&'static str> {
    kinds.parkings().map(|(p, _)| p.warning).collect()
}

/// `Deallocate 2 VM(s) on <target>: vm.a.vm, vm.b.vm?`; AmlCompute clusters are scaled (to zero
/// nodes, or back to their `count`), and a mixed park names each kind.
fn question(change: PowerChange, todo: &[Address], kinds: &Kinds, target: &str) -> String {
    let names: Vec<String> = todo.iter().map(ToString::to_string).collect();
    let what: Vec<String> = kinds
        .parkings()
        .map(|(p, n)| (p.phrase)(change, n))
        .collect();
    format!(
        "{} on {target}: {}?",
        capitalized(&what.join(" and ")),
        names.join(", ")
    )
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// Before an unpark: starting needs the vCPUs a deallocated VM gave back (and scaling a cluster
/// back its nodes' vCPUs of AML's own quota), so the quota is checked before any VM is started;
/// a shortfall is reported as located diagnostics.
async fn check_start(
    arm: &Arm,
    state: &State,
    todo: &[Address],
    (desired, sources): (&Desired, &SourceMap),
    events: &Events,
    cancel: &Cancel,
) -> Result<(), Error> {
    let locations = preflight::locations_of_vms(state, todo);
    let mut problems = Vec::new();
    if !locations.is_empty() {
        let capacity = cancel
            .interruptible(preflight::Capacity::fetch(
                &arm.client,
                &arm.subscription,
                &locations,
            ))
            .await??;
        problems = preflight::check_start(state, todo, desired, &capacity);
    }
    // Other kinds' starts are their drivers' (an AmlCompute's nodes need AML's own quota).
    let at = kinds::Preflight {
        client: &arm.client,
        subscription: &arm.subscription,
        desired,
    };
    let by_kind = kinds::distinct(
        todo.iter()
            .filter_map(|a| state.resource(a))
            .map(|r| r.kind),
    )
    .into_iter()
    .map(|kind| kinds::driver(kind).unpark_preflight(&at, state, todo));
    for found in cancel
        .interruptible(futures::future::try_join_all(by_kind))
        .await??
    {
        problems.extend(found);
    }
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

/// Each failed VM with ARM's words and the engine's advice, named by the power operation.
fn described(
    failures: &[(Address, crate::azure::ArmError)],
    change: PowerChange,
    desired: &Desired,
    sources: &SourceMap,
) -> Vec<ResourceError> {
    failures
        .iter()
        .map(|(address, err)| {
            // The engine's advice (quota numbers, capacity: another zone, region or size)
            // applies to a start as it does to a create.
            let mut described = advice::describe(
                err,
                address,
                Operation::Update,
                desired.resource(address),
                Some(sources),
            );
            described.operation = change.operation();
            described
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kinds::ml_compute;

    /// The warning a park of `kind` gives: its driver's.
    fn warning_of(kind: ResourceKind) -> &'static str {
        kinds::driver(kind).parking().expect("parkable").warning
    }

    fn addresses(list: &[&str]) -> Vec<Address> {
        list.iter()
            .map(|a| a.parse().expect("an address"))
            .collect()
    }

    #[test]
    fn a_park_of_vms_keeps_the_vm_wording() {
        let todo = addresses(&["vm.a.vm"]);
        let kinds = Kinds(BTreeMap::from([(ResourceKind::VirtualMachine, 1)]));
        let warnings = park_warnings(&kinds);
        assert_eq!(warnings, vec![warning_of(ResourceKind::VirtualMachine)]);
        assert!(warnings[0].contains("each VM's temp disk (/mnt) is wiped"));
        assert_eq!(
            question(PowerChange::Park, &todo, &kinds, "Azure"),
            "Deallocate 1 VM(s) on Azure: vm.a.vm?"
        );
    }

    #[test]
    fn a_park_of_aml_clusters_says_the_nodes_and_their_disks_are_deleted() {
        let todo = addresses(&["aml_cluster.beeond.compute"]);
        let kinds = Kinds(BTreeMap::from([(ml_compute::KIND, 1)]));
        let warnings = park_warnings(&kinds);
        assert_eq!(warnings, vec![warning_of(ml_compute::KIND)]);
        assert!(warnings[0].contains("DELETES the nodes and their local disks"));
        assert!(warnings[0].contains("BeeOND scratch"));
        assert!(warnings[0].contains("runs the steps on them again"));
        assert!(!warnings[0].contains("deallocates"));
        assert_eq!(
            question(PowerChange::Park, &todo, &kinds, "the emulator"),
            "Scale 1 AmlCompute cluster(s) to zero nodes (deleting the nodes and their local disks) on the emulator: aml_cluster.beeond.compute?"
        );
        assert_eq!(
            question(PowerChange::Unpark, &todo, &kinds, "the emulator"),
            "Scale 1 AmlCompute cluster(s) back to their node count (new nodes) on the emulator: aml_cluster.beeond.compute?"
        );
    }

    #[test]
    fn a_mixed_park_says_both() {
        let todo = addresses(&["vm.a.vm", "aml_cluster.beeond.compute"]);
        let kinds = Kinds(BTreeMap::from([
            (ml_compute::KIND, 1),
            (ResourceKind::VirtualMachine, 1),
        ]));
        let warnings = park_warnings(&kinds);
        assert_eq!(
            warnings,
            vec![
                warning_of(ResourceKind::VirtualMachine),
                warning_of(ml_compute::KIND)
            ]
        );
        assert!(
            warnings[0].contains("deallocates the VMs"),
            "the VMs' first"
        );
        assert!(warnings[1].contains("DELETES the nodes"));
        assert_eq!(
            question(PowerChange::Park, &todo, &kinds, "Azure"),
            "Deallocate 1 VM(s) and scale 1 AmlCompute cluster(s) to zero nodes (deleting the nodes and their local disks) on Azure: vm.a.vm, aml_cluster.beeond.compute?"
        );
    }
}
