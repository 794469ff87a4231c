//! `status`: the experiment's VMs (power state, addresses, since when, what they cost), its
//! AmlCompute clusters (node states from a GET of each compute, what they cost) and its cost per
//! hour. With a connection the state is refreshed first (power states, IP addresses, drift);
//! without one the rows are what the state last recorded. Nothing is saved.

use chrono::{DateTime, Utc};

use super::{Arm, Cancel, Error};
use crate::addr::Address;
use crate::azure::ResourceId;
use crate::engine::kinds;
use crate::engine::power::{self, HourlyCost, VmStatus};
use crate::engine::refresh::{self, RefreshReport};
use crate::plan::rate_of;
use crate::state::{Drift, PowerState, State};
use crate::steps::library::{IdleState, parse_idle_state};

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
    /// One row per AmlCompute cluster.
    pub clusters: Vec<ClusterStatus>,
    /// $/hour now and in both extremes.
    pub cost: HourlyCost,
    /// When the rows were made (durations and costs "since" are counted to it).
    pub at: DateTime<Utc>,
    /// What the refresh found, when there was a connection.
    pub refreshed: Option<RefreshReport>,
    /// Spot VMs the refresh found evicted (deallocated or deleted by Azure), one line each.
    pub evictions: Vec<String>,
}

/// One AmlCompute cluster in `status`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterStatus {
    /// The compute's address (`aml_cluster.scratch.compute`).
    pub address: Address,
    /// The nodes' VM size.
    pub size: String,
    /// The manifest's `count` (the nodes it has when not parked).
    pub count: i64,
    /// Recorded as parked (scaled to zero) in the state.
    pub parked: bool,
    /// The nodes as a GET of the compute shows them; `None` offline or when the compute is gone.
    pub nodes: Option<ClusterNodes>,
    /// $/hour now: `count` nodes at the size's price, nothing while parked.
    pub per_hour: f64,
}

pub use crate::engine::kinds::ClusterNodes;

/// The clusters of `state`, their nodes read through `arm` when there is one.
async fn cluster_statuses(state: &State, arm: Option<&Arm>) -> Result<Vec<ClusterStatus>, Error> {
    let mut clusters = Vec::new();
    let computes = state
        .resources
        .iter()
        .filter(|r| kinds::is_pool(r.kind) && r.drift != Some(Drift::Deleted));
    for r in computes {
        let nodes = match (arm, &r.id) {
            (Some(arm), Some(id)) => {
                kinds::driver(r.kind)
                    .pool_nodes(&arm.client, &ResourceId::from_raw(id.clone()))
                    .await?
            }
            _ => None,
        };
        let parked = r.power_state == Some(PowerState::Deallocated);
        let (rate, _) = rate_of(r.kind, &r.attrs);
        clusters.push(ClusterStatus {
            address: r.address.clone(),
            // An AKS cluster's own pool is its System pool.
            size: r
                .attrs
                .get("size")
                .or_else(|| r.attrs.get("system_size"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("-")
                .to_owned(),
            count: r
                .attrs
                .get("count")
                .or_else(|| r.attrs.get("system_count"))
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(1),
            parked,
            nodes,
            per_hour: if power::is_billed(r.power_state) {
                rate.running_per_hour
            } else {
                rate.parked_per_hour
            },
        });
    }
    Ok(clusters)
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
    let clusters = cancel
        .interruptible(cluster_statuses(&state, arm))
        .await??;
    Ok(StatusOutcome {
        cost: power::hourly_cost(&state),
        evictions: evictions(&state, report),
        state,
        vms,
        clusters,
        at,
        refreshed,
    })
}

/// The spot VMs a refresh found evicted: deleted (policy Delete), or deallocated while the state
/// had them running (nothing dsinfra did: an eviction, policy Deallocate), with what brings
/// them back.
pub fn evictions(state: &State, report: &RefreshReport) -> Vec<String> {
    let spot = |address: &Address| {
        state
            .resource(address)
            .and_then(|r| r.attrs.get("priority"))
            .and_then(serde_json::Value::as_str)
            == Some("Spot")
    };
    let mut lines = Vec::new();
    for r in state.resources.iter().filter(|r| spot(&r.address)) {
        if r.drift == Some(Drift::Deleted) {
            lines.push(format!(
                "{}: deleted by Azure (a spot eviction, `eviction = \"delete\"`): \
                 `dsinfra run --recover` or `dsinfra apply` creates it again",
                r.address
            ));
        }
    }
    for (address, before, after) in &report.power_changed {
        if spot(address)
            && *before == Some(PowerState::Running)
            && *after == PowerState::Deallocated
        {
            lines.push(format!(
                "{address}: deallocated by Azure (a spot eviction): `dsinfra run --recover` or \
                 `dsinfra unpark` starts it again"
            ));
        }
    }
    lines
}

/// One block's idle parking (`park { idle }`, issue 18) as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleStatus {
    /// The block (`cluster.train`).
    pub block: Address,
    /// The manifest's window.
    pub window: std::time::Duration,
    /// What the head's watcher says, or why it was not asked.
    pub view: IdleView,
}

/// What is known of a block's idle watcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdleView {
    /// The head is deallocated: nothing runs, nothing bills but the disks.
    Parked,
    /// The watcher's state file, read from the head.
    Watching(IdleState),
    /// The head runs but has no state file yet (no apply since `idle` was added, or before
    /// the first tick).
    NotStarted,
    /// The head could not be asked; why.
    Unknown(String),
}

/// The shell command that prints the watcher's state file, or nothing when there is none.
fn state_file_command() -> String {
    let dir = std::env::var(crate::engine::post_boot::idle::IDLE_DIR_ENV)
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| crate::steps::library::IDLE_STATE_DIR.to_owned());
    format!(
        "cat -- {} 2>/dev/null || true",
        crate::ssh::shell_quote(&format!("{dir}/state.json"))
    )
}

/// What the head of `block` says about its watcher.
async fn idle_view(
    state: &State,
    block: &Address,
    endpoints: &crate::engine::reach::Endpoints,
) -> IdleView {
    let nodes = crate::engine::reach::block_nodes(state, block, endpoints);
    let Some(head) = nodes.first() else {
        return IdleView::Unknown(format!("{block} has no VMs in the state"));
    };
    match state.resource(&head.vm).and_then(|r| r.power_state) {
        Some(PowerState::Deallocated) => return IdleView::Parked,
        Some(PowerState::Running) => {}
        Some(other) => return IdleView::Unknown(format!("the head is {other:?}")),
        None => return IdleView::Unknown("the head's power state is not known".to_owned()),
    }
    let auth = match crate::engine::post_boot::auth::identity(
        &crate::engine::post_boot::auth::Sources::from_env(None),
    ) {
        Ok(auth) => auth,
        Err(why) => return IdleView::Unknown(why),
    };
    let reacher = super::run::remote::Reacher::new(auth, Some(head.clone()));
    let session = match reacher.connect(head).await {
        Ok(session) => session,
        Err(why) => return IdleView::Unknown(format!("could not reach the head: {why}")),
    };
    let answer = session
        .output(
            &state_file_command(),
            b"",
            Some(std::time::Duration::from_secs(30)),
        )
        .await;
    session.close().await;
    match answer {
        Ok(out) if out.stdout.trim().is_empty() => IdleView::NotStarted,
        Ok(out) => match parse_idle_state(&out.stdout) {
            Ok(found) => IdleView::Watching(found),
            Err(why) => IdleView::Unknown(why),
        },
        Err(e) => IdleView::Unknown(format!("could not read the watcher's state: {e}")),
    }
}

/// The idle parking of every block of `desired` that has it: the head's watcher state, read
/// over SSH when the head runs (a refreshed `state` says so), `parked` when it is deallocated.
/// Offline (no `arm`), nothing can be asked.
pub async fn idle_statuses(
    desired: &crate::model::Desired,
    state: &State,
    arm: Option<&Arm>,
) -> Vec<IdleStatus> {
    if desired.park_idle.is_empty() {
        return Vec::new();
    }
    let endpoints = match arm {
        Some(arm) => super::endpoints::for_state(arm, state)
            .await
            .map_err(|e| e.to_string()),
        None => Err("offline: run with --emulator, --endpoint or Azure credentials".to_owned()),
    };
    let mut found = Vec::new();
    for (block, window) in &desired.park_idle {
        let view = match &endpoints {
            Ok(endpoints) => idle_view(state, block, endpoints).await,
            Err(why) => IdleView::Unknown(why.clone()),
        };
        found.push(IdleStatus {
            block: block.clone(),
            window: *window,
            view,
        });
    }
    found
}
