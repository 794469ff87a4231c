//! `plan`: diff the manifest against the experiment's state, the first stage of `apply` and
//! `destroy` too.
//!
//! With a connection the state is first refreshed from ARM (drift: resources deleted or changed
//! outside dsinfra, VM power states), `sizes = [...]` fallbacks are resolved against quota, and
//! after planning the quota and SKU preflight runs; its problems are located diagnostics and fail
//! the plan. Without one the plan is made from the saved state alone and a note says plainly that
//! refresh and the preflight were skipped. The refreshed state is not saved here: planning
//! changes nothing.

use super::{Arm, Cancel, Error, Events, OpEvent};
use crate::azure::ArmError;
use crate::diag::{Diagnostic, SourceMap};
use crate::engine::{preflight, refresh};
use crate::model::Desired;
use crate::plan::{self, Mode, Plan, PlanOptions};
use crate::state::State;

/// How a plan reaches ARM.
#[derive(Debug, Clone, Copy)]
pub enum Live<'a> {
    /// No connection: plan from the saved state only.
    Offline,
    /// `dsinfra plan`: connected when it could be. Automatic Azure (no flag given) whose
    /// credentials do not work degrades to an offline plan instead of failing, since a preview
    /// is still useful; the preflight runs for destroy plans too.
    Preview(&'a Arm),
    /// `apply`/`destroy`: connected, and any ARM failure fails the operation; a destroy needs
    /// no preflight (it creates nothing).
    Apply(&'a Arm),
}

/// What to plan.
pub struct PlanRequest<'a> {
    /// The manifest's desired world; `sizes` fallbacks are resolved in it (the walk then creates
    /// what the plan says).
    pub desired: &'a mut Desired,
    /// The manifest's texts, for the diagnostics.
    pub sources: &'a SourceMap,
    /// The state; refreshed in place when connected.
    pub state: &'a mut State,
    /// The connection, if any.
    pub live: Live<'a>,
    /// Mode, targets, time, `--rerun-step`.
    pub options: PlanOptions,
}

/// A plan made.
#[derive(Debug)]
pub struct Planned {
    /// The plan (already shown as [`OpEvent::Plan`]).
    pub plan: Plan,
    /// Whether it was refreshed and preflighted against ARM.
    pub live: bool,
}

/// Refresh (if connected), resolve size fallbacks, plan, run the preflight (if connected), and
/// report the plan as [`OpEvent::Plan`].
///
/// # Errors
///
/// [`Error::Reported`]: the plan or the preflight found errors (reported as diagnostics);
/// [`Error::Arm`]: ARM failed; [`Error::Interrupted`]: cancelled while waiting on ARM.
pub async fn plan(
    request: PlanRequest<'_>,
    events: &Events,
    cancel: &Cancel,
) -> Result<Planned, Error> {
    let PlanRequest {
        desired,
        sources,
        state,
        live,
        options,
    } = request;
    let destroy = matches!(options.mode, Mode::Destroy { .. });
    let (arm, resolved) =
        refresh_and_resolve(live, desired, state, destroy, events, cancel).await?;
    let preflight::Resolved {
        notes: mut fallback_notes,
        problems: early_problems,
    } = resolved;
    if !destroy {
        fallback_notes.extend(preflight::security::keep_existing(desired, state));
    }
    let mut planned = match plan::plan(desired, state, &options) {
        Ok(planned) => planned,
        Err(diagnostics) => return Err(reported(&diagnostics, sources, events)),
    };
    planned.notes.append(&mut fallback_notes);
    let preflight_wanted = match live {
        Live::Apply(_) => !destroy,
        Live::Offline | Live::Preview(_) => true,
    };
    let mut problems = early_problems;
    if arm.is_some() && !destroy {
        planned
            .notes
            .extend(preflight::rbac::deferred_note(&planned));
    }
    if let Some(arm) = arm.filter(|_| preflight_wanted) {
        problems.extend(
            cancel
                .interruptible(preflight::preflight(
                    &arm.client,
                    &arm.subscription,
                    desired,
                    &planned,
                ))
                .await??,
        );
    }
    events.event(OpEvent::Plan(&planned));
    if arm.is_none() {
        events.event(OpEvent::Note(
            "planned from the saved state only: no Azure connection was requested, so drift \
             detection (refresh) and the quota/SKU preflight were not run",
        ));
    }
    if !problems.is_empty() {
        events.event(OpEvent::Diagnostics {
            diagnostics: &problems,
            sources,
        });
        let count = errors(&problems);
        if count > 0 {
            return Err(Error::Reported { count });
        }
    }
    Ok(Planned {
        plan: planned,
        live: arm.is_some(),
    })
}

/// Refresh `state` and resolve `sizes` fallbacks against quota when connected (or offline when
/// not, or when [`Live::Preview`] degrades). Returns the connection the plan keeps and the plan
/// notes explaining each fallback.
async fn refresh_and_resolve<'a>(
    live: Live<'a>,
    desired: &mut Desired,
    state: &mut State,
    destroy: bool,
    events: &Events,
    cancel: &Cancel,
) -> Result<(Option<&'a Arm>, preflight::Resolved), Error> {
    let arm = match live {
        Live::Offline => None,
        Live::Preview(arm) | Live::Apply(arm) => Some(arm),
    };
    if let Some(arm) = arm {
        let refreshed = cancel
            .interruptible(async {
                let report = refresh::refresh(&arm.client, &arm.subscription, state).await?;
                let notes = if destroy {
                    preflight::Resolved::default()
                } else {
                    preflight::resolve_live(&arm.client, &arm.subscription, desired, state).await?
                };
                Ok::<_, ArmError>((report, notes))
            })
            .await?;
        match refreshed {
            Ok((report, notes)) => {
                events.event(OpEvent::Note(&refresh_note(&report, live)));
                return Ok((Some(arm), notes));
            }
            // Automatic Azure (no flag given) degrades to the offline plan when the credentials
            // do not work; an explicit emulator or endpoint, or an apply, is an error.
            Err(err)
                if matches!(live, Live::Preview(_))
                    && arm.place.is_azure()
                    && (err.is_credential() || err.is_auth()) =>
            {
                events.event(OpEvent::Note(&format!("could not use Azure: {err}")));
            }
            Err(err) => return Err(err.into()),
        }
    }
    let notes = if destroy {
        Vec::new()
    } else {
        preflight::resolve_sizes_offline(desired, state)
    };
    Ok((
        None,
        preflight::Resolved {
            notes,
            problems: Vec::new(),
        },
    ))
}

/// What the refresh found. `plan` names where it looked; apply's note never did.
fn refresh_note(report: &refresh::RefreshReport, live: Live<'_>) -> String {
    let place = match live {
        Live::Preview(arm) => format!(" from {}", arm.place.name()),
        Live::Offline | Live::Apply(_) => String::new(),
    };
    format!(
        "refreshed {} resource(s){place}: {} deleted and {} changed outside dsinfra",
        report.checked,
        report.deleted.len(),
        report.changed.len()
    )
}

/// Reports `diagnostics` and the error they make.
pub(super) fn reported(diagnostics: &[Diagnostic], sources: &SourceMap, events: &Events) -> Error {
    events.event(OpEvent::Diagnostics {
        diagnostics,
        sources,
    });
    Error::Reported {
        count: errors(diagnostics),
    }
}

fn errors(diagnostics: &[Diagnostic]) -> usize {
    diagnostics.iter().filter(|d| d.is_error()).count()
}
