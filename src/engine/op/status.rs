//! `status`: the experiment's VMs (power state, addresses, since when, what they cost) and its
//! cost per hour. With a connection the state is refreshed first (power states, IP addresses,
//! drift); without one the rows are what the state last recorded. Nothing is saved.

use chrono::{DateTime, Utc};

use super::{Arm, Cancel, Error};
use crate::engine::power::{self, HourlyCost, VmStatus};
use crate::engine::refresh::{self, RefreshReport};
use crate::state::State;

/// What `status` reads.
pub struct StatusRequest<'a> {
    /// The state (its backend, holding the lock, stays with the caller until the outcome).
    pub state: State,
    /// The connection, when there is one (`None`: offline, from the state).
    pub arm: Option<&'a Arm>,
}

/// What `status` found.
#[derive(Debug)]
pub struct StatusOutcome {
    /// The state, refreshed when there was a connection.
    pub state: State,
    /// One row per VM.
    pub vms: Vec<VmStatus>,
    /// $/hour now and in both extremes.
    pub cost: HourlyCost,
    /// When the rows were made (durations and costs "since" are counted to it).
    pub at: DateTime<Utc>,
    /// What the refresh found, when there was a connection.
    pub refreshed: Option<RefreshReport>,
}

/// Read the experiment's status.
///
/// # Errors
///
/// The refresh failed ([`Error::Arm`]) or Ctrl-C came during it ([`Error::Interrupted`]).
pub async fn status(request: StatusRequest<'_>, cancel: &Cancel) -> Result<StatusOutcome, Error> {
    let StatusRequest { mut state, arm } = request;
    let refreshed = match arm {
        // The caller holds the state's lock while ARM is read: a Ctrl-C meanwhile must release
        // it (a remote lease would otherwise refuse everyone for up to a minute).
        Some(arm) => Some(
            cancel
                .interruptible(refresh::refresh(&arm.client, &arm.subscription, &mut state))
                .await??,
        ),
        None => None,
    };
    let at = Utc::now();
    let offline = RefreshReport::default();
    let report = refreshed.as_ref().unwrap_or(&offline);
    let vms = power::vm_statuses(&state, &report.observed, &report.power_since, at);
    Ok(StatusOutcome {
        cost: power::hourly_cost(&state),
        state,
        vms,
        at,
        refreshed,
    })
}
