//! `dsinfra logs FILE ID -f` of a detached run started with `--recover` (docs/run.md): the
//! client that follows the run is the one that recovers it. It follows the head's log; when the
//! job has ended without success (or the log stream broke, the head gone), it looks for evicted
//! spot nodes as an attached `--recover` does ([`super::recover_from_eviction`]), brings them
//! back, starts the job again detached on the head with `DSINFRA_RESTART_COUNT` one higher, and
//! follows on, without printing again the lines it printed.

use chrono::Utc;

use super::records::{self, RecoverSpec, RunRecord};
use super::remote::Reacher;
use super::target::{self, RunTarget};
use super::{
    Cancel, Error, Events, Followed, Lookup, OpEvent, Recover, follow_once, make_job, node_runs,
    recover_from_eviction, start_detached,
};
use crate::engine::post_boot::auth;

/// Follows the detached run of `record`, recovering it after evictions within the run's own
/// `--max-restarts`; returns its record as it ended.
///
/// # Errors
///
/// The record could not be saved, the nodes could not be brought back, ARM could not be read,
/// Ctrl-C.
pub(super) async fn follow_and_recover(
    mut lookup: Lookup<'_>,
    mut record: RunRecord,
    (spec, recover): (RecoverSpec, Recover<'_>),
    events: &Events,
    cancel: &Cancel,
) -> Result<RunRecord, Error> {
    let recover = Recover {
        max_restarts: spec.max_restarts,
        ..recover
    };
    let mut printed = 0;
    let mut attempt_started = Utc::now();
    loop {
        let mut seen = Followed::default();
        let followed = follow_once(
            &lookup,
            &mut record,
            (true, printed),
            &mut seen,
            events,
            cancel,
        )
        .await;
        printed += seen.printed;
        record.preemptions.extend(seen.notices);
        records::save(lookup.manifest, &record)?;
        match followed {
            Ok(()) => {}
            Err(Error::Interrupted(i)) => return Err(Error::Interrupted(i)),
            Err(err) => events.event(OpEvent::Note(&format!(
                "the head's log stopped ({err}): looking for an eviction"
            ))),
        }
        if record.exit() == Some(0) {
            return Ok(record);
        }
        let Some(at) = lookup.at.as_mut() else {
            return Ok(record);
        };
        let head = RunTarget {
            name: Some(record.nodes[0].node.clone()),
            all: false,
        };
        let endpoints = cancel
            .interruptible(super::super::endpoints::for_state(at.arm, &at.state))
            .await??;
        let selected = target::select(&head, at.desired, &at.state, &endpoints)?;
        let restart = u32::try_from(record.restarts()).unwrap_or(u32::MAX);
        let Some(state) = recover_from_eviction(
            at,
            &recover,
            &selected,
            (&mut record, attempt_started),
            restart,
            (events, cancel),
        )
        .await?
        else {
            return Ok(record);
        };
        // A head created again has a new disk, and its run directory a new log.
        let head_name = selected.block[selected.ranks[0]].node().to_string();
        if record
            .attempts
            .last()
            .is_some_and(|a| a.recovery.contains(&format!("{head_name}: created again")))
        {
            printed = 0;
        }
        at.state = state;
        let endpoints = cancel
            .interruptible(super::super::endpoints::for_state(at.arm, &at.state))
            .await??;
        let selected = target::select(&head, at.desired, &at.state, &endpoints)?;
        let mut job = make_job(at, &selected.block, &endpoints, record.command.clone());
        job.id.clone_from(&record.id);
        job.restart = restart + 1;
        job.on_preempt.clone_from(&spec.on_preempt);
        job.checkpoint_dir.clone_from(&spec.checkpoint_dir);
        record.nodes = node_runs(&job, &selected.ranks);
        record.ended = None;
        record.lost = false;
        records::save(lookup.manifest, &record)?;
        let auth = auth::identity(&auth::Sources::from_env(at.identity.as_deref()))
            .map_err(Error::Failed)?;
        let reacher = Reacher::new(auth, selected.block.first().cloned());
        start_detached(
            &job,
            &reacher,
            &selected.block[selected.ranks[0]],
            &mut record,
            events,
        )
        .await;
        records::save(lookup.manifest, &record)?;
        if record.nodes[0].error.is_some() {
            return Ok(record);
        }
        attempt_started = Utc::now();
    }
}
