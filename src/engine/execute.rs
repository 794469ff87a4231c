//! Apply or destroy a plan: walk its changes in dependency order, in parallel, make the ARM
//! calls, and keep the state true after every step.
//!
//! Each change becomes one or two nodes of the walk ([`schedule`]): a delete node, an apply node
//! (create or update), or both for a replacement (delete, then create). Deletes wait for
//! whatever depended on the deleted resource (its dependents are deleted first, or updated first
//! when they merely stop referring to it); creates and updates wait for what they depend on; a
//! replacement's create waits for its own delete. Terraform's order, without a global phase
//! barrier, so independent work never waits.
//!
//! Crash safety comes from three things together. Names are deterministic, so a repeated PUT
//! addresses the same resource. Before a create is sent, an *intent* (status `Creating`, with the
//! id) is saved; after ARM reports success the resource is saved as `Created`; a delete removes it
//! from the state once ARM says it is gone. Every save is atomic (the backend's rename). Killed
//! at any instant, the state therefore names everything that might exist: the next plan creates
//! (adopts, PUT being idempotent) what has an intent, deletes what is no longer wanted, and never
//! leaves an orphan or makes a duplicate.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::advice::{ResourceError, describe};
use super::bodies::{Request, needs_tenant, request_for, update_request};
use super::events::{Event, EventSink, LroBridge, Operation};
use super::kinds::{self, Applying};
use super::limiter::Limiter;
use crate::addr::Address;
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::diag::SourceMap;
use crate::graph::walk;
use crate::model::{Desired, Resource, ResourceKind, arm_id};
use crate::plan::{Action, Change, Plan};
use crate::state::{PowerState, ResourceState, ResourceStatus, State};

use store::relock;
pub use store::{Staged, StateStore};

/// Which half of a change a walk node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Delete (a delete, or the first half of a replacement).
    Delete,
    /// Create or update (the second half of a replacement creates).
    Apply,
}

/// One node of the walk.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Node {
    /// The resource.
    pub address: Address,
    /// Which half.
    pub phase: Phase,
}

impl Node {
    fn new(address: &Address, phase: Phase) -> Self {
        Self {
            address: address.clone(),
            phase,
        }
    }
}

/// The walk's graph for a plan: node -> the nodes it waits for. `state` supplies what each
/// resource depended on when it was created, which orders deletes.
pub fn schedule(plan: &Plan, state: &State) -> BTreeMap<Node, BTreeSet<Node>> {
    let mut graph: BTreeMap<Node, BTreeSet<Node>> = BTreeMap::new();
    let mut desired_deps: BTreeMap<&Address, &BTreeSet<Address>> = BTreeMap::new();
    for change in &plan.changes {
        let address = &change.address;
        match change.action {
            Action::NoOp => {}
            Action::Create | Action::Update => {
                graph.insert(Node::new(address, Phase::Apply), BTreeSet::new());
                desired_deps.insert(address, &change.depends_on);
            }
            Action::Replace { .. } => {
                graph.insert(Node::new(address, Phase::Delete), BTreeSet::new());
                graph.insert(
                    Node::new(address, Phase::Apply),
                    BTreeSet::from([Node::new(address, Phase::Delete)]),
                );
                desired_deps.insert(address, &change.depends_on);
            }
            Action::Delete => {
                graph.insert(Node::new(address, Phase::Delete), BTreeSet::new());
            }
        }
    }
    // Creates and updates wait for the creates and updates of what they depend on.
    for (address, deps) in &desired_deps {
        let node = Node::new(address, Phase::Apply);
        let waits: Vec<Node> = deps
            .iter()
            .map(|d| Node::new(d, Phase::Apply))
            .filter(|n| graph.contains_key(n))
            .collect();
        if let Some(set) = graph.get_mut(&node) {
            set.extend(waits);
        }
    }
    // A VM that gains a data disk waits for the update of the VM that loses it: Azure refuses to
    // attach a disk another VM still owns (OperationNotAllowed), so a move is detach, then attach.
    for detach in plan.disk_detaches() {
        let loser = Node::new(&detach.vm, Phase::Apply);
        let disk = detach.disk.to_string();
        for change in &plan.changes {
            let gains = change
                .after
                .as_ref()
                .and_then(|a| a.get("data_disks"))
                .and_then(serde_json::Value::as_array)
                .is_some_and(|disks| disks.iter().any(|d| d["disk"] == disk.as_str()));
            let gainer = Node::new(&change.address, Phase::Apply);
            if gains
                && change.address != detach.vm
                && graph.contains_key(&loser)
                && let Some(set) = graph.get_mut(&gainer)
            {
                set.insert(loser.clone());
            }
        }
    }
    // A delete waits for everything that depended on the resource (per the state): deleted
    // dependents go first; updated dependents that no longer refer to it (a detached disk) are
    // updated first. An updated dependent that still refers to a replaced resource gets no such
    // edge: it would wait for itself.
    for dependent in &state.resources {
        for dependency in &dependent.depends_on {
            let delete = Node::new(dependency, Phase::Delete);
            if !graph.contains_key(&delete) {
                continue;
            }
            let dependent_delete = Node::new(&dependent.address, Phase::Delete);
            let dependent_apply = Node::new(&dependent.address, Phase::Apply);
            let wait = if graph.contains_key(&dependent_delete) {
                Some(dependent_delete)
            } else if graph.contains_key(&dependent_apply)
                && !desired_deps
                    .get(&dependent.address)
                    .is_some_and(|d| d.contains(dependency))
            {
                Some(dependent_apply)
            } else {
                None
            };
            if let (Some(wait), Some(set)) = (wait, graph.get_mut(&delete)) {
                set.insert(wait);
            }
        }
    }
    graph
}

/// How to run a plan.
pub struct Execution {
    /// The ARM client (built with [`LroBridge::callback`] for operation progress).
    pub client: ArmClient,
    /// The subscription every id lives in.
    pub subscription: String,
    /// The operation's bound on ARM requests in flight (`--parallelism`), shared with whatever
    /// else the command sends (its refresh, its preflight); fewer while ARM throttles. An
    /// operation waiting between polls holds no slot (see `limiter`).
    pub limiter: Arc<Limiter>,
    /// Where progress goes.
    pub events: EventSink,
    /// The bridge the client reports operation progress to, if it was built with one.
    pub bridge: Option<Arc<LroBridge>>,
    /// Manifest texts, to name manifest lines in advice.
    pub sources: Option<SourceMap>,
    /// The first pause before the engine retries a call ARM kept throttling through the
    /// client's retries (see [`THROTTLED_ROUNDS`]).
    pub throttle_pause: Duration,
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("subscription", &self.subscription)
            .field("parallelism", &self.limiter.limit())
            .finish_non_exhaustive()
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Resources finished, with what was done, in completion order.
    pub done: Vec<(Address, Operation)>,
    /// Failures, in address order.
    pub failed: Vec<ResourceError>,
    /// Not started because something they need failed: (resource, operation, the failure).
    pub skipped: Vec<(Address, Operation, Address)>,
    /// Not started because the run was interrupted.
    pub cancelled: Vec<(Address, Operation)>,
    /// Wall time of the walk.
    pub elapsed: Duration,
}

impl Report {
    /// Whether everything planned was done.
    pub fn is_success(&self) -> bool {
        self.failed.is_empty() && self.skipped.is_empty() && self.cancelled.is_empty()
    }

    /// How many resources were created, updated and deleted (a replacement counts as both a
    /// delete and a create).
    pub fn counts(&self) -> (usize, usize, usize) {
        let count = |op| self.done.iter().filter(|(_, o)| *o == op).count();
        (
            count(Operation::Create),
            count(Operation::Update),
            count(Operation::Delete),
        )
    }
}

/// Everything a node's work needs, shared by all tasks.
struct Shared {
    /// Gated by the run's [`Limiter`]: every request this run makes counts against
    /// `--parallelism`, PUTs, DELETEs, polls, final GETs and listKeys alike.
    client: ArmClient,
    subscription: String,
    desired: Desired,
    changes: BTreeMap<Address, Change>,
    store: Arc<StateStore>,
    events: EventSink,
    bridge: Option<Arc<LroBridge>>,
    sources: Option<SourceMap>,
    throttle_pause: Duration,
    /// The plan's time: SAS are signed at it.
    planned_at: chrono::DateTime<chrono::Utc>,
    /// Resources reported done whose record is only staged: the run's closing flush saves them,
    /// and if it cannot, they are failures after all.
    unsaved: Mutex<Vec<(Address, Operation, Staged)>>,
    /// The intents written before the walk (see `intents.rs`).
    early: Early,
    /// The subscription's tenant, read the first time a body needs it (see `aml.rs`).
    tenant: tokio::sync::OnceCell<Result<String, String>>,
}

fn operation_of(change: &Change, phase: Phase) -> Operation {
    match (phase, &change.action) {
        (Phase::Delete, _) => Operation::Delete,
        (Phase::Apply, Action::Update) => Operation::Update,
        (Phase::Apply, _) => Operation::Create,
    }
}

/// Run `plan` (made from `desired` against the state in `store`). `cancel` turning `true` stops
/// new work from starting; work in flight finishes and is saved.
pub async fn execute(
    plan: &Plan,
    desired: &Desired,
    store: Arc<StateStore>,
    execution: Execution,
    cancel: watch::Receiver<bool>,
) -> Report {
    let started = Instant::now();
    let graph = schedule(plan, &store.snapshot());
    let early = Early::write(plan, desired, &execution.subscription, &store).await;
    tracing::debug!(nodes = graph.len(), "walk starts (early intents saved)");
    let shared = Arc::new(Shared {
        client: execution.client.gated(Arc::clone(&execution.limiter) as _),
        subscription: execution.subscription,
        desired: desired.clone(),
        changes: plan
            .changes
            .iter()
            .map(|c| (c.address.clone(), c.clone()))
            .collect(),
        store,
        events: execution.events,
        bridge: execution.bridge,
        sources: execution.sources,
        throttle_pause: execution.throttle_pause,
        planned_at: plan.planned_at,
        unsaved: Mutex::new(Vec::new()),
        early,
        tenant: tokio::sync::OnceCell::new(),
    });
    if let Some(bridge) = &shared.bridge {
        bridge.connect(Arc::clone(&shared.events));
    }
    let walked = walk(
        &graph,
        |node: Node| {
            let shared = Arc::clone(&shared);
            async move { run_node(&shared, &node).await }
        },
        cancel,
    )
    .await;
    let op = |node: &Node| {
        shared
            .changes
            .get(&node.address)
            .map_or(Operation::Create, |c| operation_of(c, node.phase))
    };
    let mut report = Report {
        done: walked
            .succeeded
            .iter()
            .map(|n| (n.address.clone(), op(n)))
            .collect(),
        failed: walked.failed.into_values().collect(),
        skipped: Vec::new(),
        cancelled: walked
            .cancelled
            .iter()
            .map(|n| (n.address.clone(), op(n)))
            .collect(),
        elapsed: Duration::ZERO,
    };
    tracing::debug!("walk done");
    shared.early.withdraw_untaken(&shared.store).await;
    flush(&shared, &mut report).await;
    report.elapsed = started.elapsed();
    // One line per run at info level, in microseconds: what scripts/bench-apply.sh reads as
    // the makespan (the summary line rounds it to 10 ms, 1% of a scaled critical path).
    tracing::info!(
        elapsed_us = report.elapsed.as_micros(),
        "walk finished and state flushed"
    );
    for (node, because) in &walked.skipped {
        let operation = op(node);
        (shared.events)(&Event::Skipped {
            address: node.address.clone(),
            operation,
            because: because.address.clone(),
        });
        report
            .skipped
            .push((node.address.clone(), operation, because.address.clone()));
    }
    report
}

/// Save the records the walk only staged. Those a failed save leaves unsaved move from done to
/// failed (with the backend's message), and are reported as such: the state still says what it
/// said before (an intent, for a create), which the next apply resolves.
async fn flush(shared: &Shared, report: &mut Report) {
    let Err(err) = shared.store.flush().await else {
        return;
    };
    let unsaved = std::mem::take(&mut *relock(&shared.unsaved));
    for (address, operation, staged) in unsaved {
        if shared.store.is_saved(staged) {
            continue;
        }
        report
            .done
            .retain(|(a, o)| !(*a == address && *o == operation));
        let error = save_error(&address, operation, &err);
        (shared.events)(&Event::Failed {
            address: address.clone(),
            operation,
            elapsed: Duration::ZERO,
            message: error.message.clone(),
        });
        report.failed.push(error);
    }
    report.failed.sort_by(|a, b| a.address.cmp(&b.address));
}

async fn run_node(shared: &Shared, node: &Node) -> Result<(), ResourceError> {
    let Some(change) = shared.changes.get(&node.address) else {
        return Ok(());
    };
    let operation = operation_of(change, node.phase);
    tracing::debug!(address = %node.address, ?operation, "node starts");
    (shared.events)(&Event::Started {
        address: node.address.clone(),
        operation,
    });
    let started = Instant::now();
    let result = match node.phase {
        Phase::Delete => delete(shared, change).await,
        Phase::Apply => apply(shared, change, operation).await,
    };
    match &result {
        Ok(()) => (shared.events)(&Event::Done {
            address: node.address.clone(),
            operation,
            elapsed: started.elapsed(),
        }),
        Err(err) => (shared.events)(&Event::Failed {
            address: node.address.clone(),
            operation,
            elapsed: started.elapsed(),
            message: err.message.clone(),
        }),
    }
    result
}

/// An error that is not ARM's (a body that cannot be built, a state that cannot be saved).
/// Send `request` (the PUT or PATCH of `resource`), then wait for what its kind needs before
/// it counts as done (a compute's usable nodes).
async fn put(
    shared: &Shared,
    resource: &Resource,
    operation: Operation,
    request: &Request,
) -> Result<(), ResourceError> {
    let address = &resource.address;
    call_described(
        shared,
        &request.id,
        address,
        operation,
        Some(resource),
        || send(shared, address, operation, resource.kind, request),
    )
    .await?;
    let applying = applying(shared, address, operation);
    let after = kinds::driver(resource.kind).after_put(applying, resource, &request.id);
    after.await.map_err(|e| local_error(address, operation, e))
}

/// What a kind's driver is given to act after a request of this run.
fn applying<'a>(shared: &'a Shared, address: &'a Address, operation: Operation) -> Applying<'a> {
    Applying {
        client: &shared.client,
        subscription: &shared.subscription,
        events: &shared.events,
        address,
        operation,
    }
}

fn local_error(address: &Address, operation: Operation, message: String) -> ResourceError {
    ResourceError {
        address: address.clone(),
        operation,
        message,
        code: None,
        advice: Vec::new(),
    }
}

fn save_error(
    address: &Address,
    operation: Operation,
    err: &dyn std::fmt::Display,
) -> ResourceError {
    let mut e = local_error(
        address,
        operation,
        format!("the state could not be saved: {err}"),
    );
    e.advice.push(
        "nothing more is started; fix the problem and apply again: what was created is adopted"
            .to_owned(),
    );
    e
}

/// When ARM still throttles after the client's own retries, the engine tries the whole call
/// again this many times (every call it makes is idempotent: PUT and DELETE), pausing
/// [`Execution::throttle_pause`], doubled each round; every 429 has lowered the limiter
/// meanwhile.
pub const THROTTLED_ROUNDS: u32 = 3;

/// One ARM call (its requests go through the client's gate, the limiter), with progress routed
/// to `address`.
async fn call<T, Fut>(
    shared: &Shared,
    id: &ResourceId,
    address: &Address,
    operation: Operation,
    send: impl Fn() -> Fut,
) -> Result<T, ArmError>
where
    Fut: Future<Output = Result<T, ArmError>>,
{
    let mut round = 0;
    loop {
        if let Some(bridge) = &shared.bridge {
            bridge.register(id.as_str(), address, operation);
        }
        let result = send().await;
        if let Some(bridge) = &shared.bridge {
            bridge.unregister(id.as_str());
        }
        // A 429 whose wait is longer than the client waits out is not sent again early either:
        // it would be refused again (and counted against Compute's policy).
        let throttled_error = result
            .as_ref()
            .err()
            .is_some_and(|e| e.is_throttled() && e.throttle_wait().is_none());
        if !throttled_error || round >= THROTTLED_ROUNDS {
            return result;
        }
        tokio::time::sleep(shared.throttle_pause * 2u32.pow(round)).await;
        round += 1;
    }
}

/// [`call`], with a failure turned into the resource's error: ARM's code and message verbatim
/// plus advice, located on the manifest block of `resource` when there is one.
async fn call_described<T, Fut>(
    shared: &Shared,
    id: &ResourceId,
    address: &Address,
    operation: Operation,
    resource: Option<&Resource>,
    send: impl Fn() -> Fut,
) -> Result<T, ResourceError>
where
    Fut: Future<Output = Result<T, ArmError>>,
{
    call(shared, id, address, operation, send)
        .await
        .map_err(|e| describe(&e, address, operation, resource, shared.sources.as_ref()))
}

async fn delete(shared: &Shared, change: &Change) -> Result<(), ResourceError> {
    let address = &change.address;
    let operation = Operation::Delete;
    if change.kind.is_arm() {
        // The id the state recorded; else the one the name implies (an intent always has one,
        // but a hand-edited state may not).
        let id = ResourceId::from_raw(change.id.clone().unwrap_or_else(|| {
            arm_id(
                &shared.subscription,
                change.kind,
                &change.resource_group,
                change.parent.as_deref(),
                &change.name,
            )
        }));
        let driver = kinds::driver(change.kind);
        if driver.deleted_with_parent() && parent_goes_too(shared, change) {
            // Its parent's DELETE, later in this run, takes it with it.
            return forget(shared, address, operation).await;
        }
        let query = driver.delete_query();
        call_described(
            shared,
            &id,
            address,
            operation,
            shared.desired.resource(address),
            || shared.client.delete_with(&id, query),
        )
        .await?;
        driver
            .after_delete(applying(shared, address, operation), change)
            .await
            .map_err(|message| local_error(address, operation, message))?;
    }
    forget(shared, address, operation).await
}

/// Removes a deleted resource from the state.
async fn forget(
    shared: &Shared,
    address: &Address,
    operation: Operation,
) -> Result<(), ResourceError> {
    shared
        .store
        .update(|state| {
            state.remove(address);
        })
        .await
        .map_err(|e| save_error(address, operation, &e))
}

/// Whether the run also deletes (or replaces) the resource `change`'s resource lives in: the
/// change named by its `parent`, in its group, whose ARM type contains its own.
fn parent_goes_too(shared: &Shared, change: &Change) -> bool {
    let Some(parent) = change.parent.as_deref() else {
        return false;
    };
    shared.changes.values().any(|c| {
        c.name == parent
            && c.resource_group
                .eq_ignore_ascii_case(&change.resource_group)
            && matches!(c.action, Action::Delete | Action::Replace { .. })
            && change.kind.lives_in(c.kind)
    })
}

async fn apply(
    shared: &Shared,
    change: &Change,
    operation: Operation,
) -> Result<(), ResourceError> {
    let address = &change.address;
    let resource = shared.desired.resource(address).ok_or_else(|| {
        local_error(
            address,
            operation,
            "the plan creates it but the manifest no longer has it: run `dsinfra plan` again"
                .to_owned(),
        )
    })?;
    let request = request_of(shared, change, resource, operation).await?;
    let id = id_of(shared, resource, request.as_ref());
    // A new resource's intent may already be saved, with its VM's host key (see intents.rs).
    let early_key = match shared.early.take(address).await {
        Some(Prepared::Saved(key)) => Some(key),
        Some(Prepared::SaveFailed(message)) => {
            return Err(save_error(address, operation, &message));
        }
        Some(Prepared::KeyFailed(message)) => return Err(local_error(address, operation, message)),
        None => None,
    };
    let intent_saved = early_key.is_some();
    // The early intent is this run's own record, not an earlier one.
    let previous = if intent_saved {
        None
    } else {
        shared.store.resource(address)
    };
    // A VM's create pins a new host key and sends it in customData (see host_key.rs).
    let (request, host_key) = host_key::attach(
        shared,
        resource,
        operation,
        &id,
        previous.as_ref(),
        request,
        early_key.flatten(),
    )
    .await?;
    let record = |status: ResourceStatus, secrets| {
        record_of(
            resource,
            &id,
            previous.as_ref(),
            host_key.clone(),
            status,
            secrets,
        )
    };
    if let Some(request) = request {
        if operation == Operation::Create && !intent_saved {
            // The intent: from here on the resource may exist, so the state must say so.
            shared
                .store
                .update(|state| state.upsert(record(ResourceStatus::Creating, BTreeMap::new())))
                .await
                .map_err(|e| save_error(address, operation, &e))?;
        }
        put(shared, resource, operation, &request).await?;
        let secrets = previous
            .as_ref()
            .map(|p| p.secrets.clone())
            .unwrap_or_default();
        // Staged, not saved: it records what happened, and nothing acts on it before a save
        // carries it (a dependent's intent save does, right after; see `StateStore`).
        let staged = shared
            .store
            .stage(|state| state.upsert(record(ResourceStatus::Created, secrets)));
        relock(&shared.unsaved).push((address.clone(), operation, staged));
        tracing::debug!(%address, "done (record staged)");
        Ok(())
    } else {
        // A SAS is signed locally from the account key (its dependency, so created by now) at
        // the plan's time; the state keeps its identity only, never the token.
        let key = super::sas::account_key(
            &shared.client,
            &shared.desired,
            &shared.subscription,
            resource,
        )
        .await
        .map_err(|e| local_error(address, operation, e.to_string()))?;
        let lineage = shared.store.lineage();
        let (_token, identity) = super::sas::sign(resource, &key, &lineage, shared.planned_at)
            .map_err(|e| local_error(address, operation, e.to_string()))?;
        shared
            .store
            .update(|state| {
                state.upsert(record(
                    ResourceStatus::Created,
                    BTreeMap::from([("token".to_owned(), identity)]),
                ));
            })
            .await
            .map_err(|e| save_error(address, operation, &e))
    }
}

/// The ARM id a resource is written at: what its name implies, or, for a kind named at apply,
/// the request's (built from what only apply knows).
fn id_of(shared: &Shared, resource: &Resource, request: Option<&Request>) -> String {
    match request {
        Some(request) if resource.kind.named_at_apply() => request.id.as_str().to_owned(),
        _ => resource.arm_id(&shared.subscription),
    }
}

/// Sends an apply node's request; an assignment's waits out Entra ID's replication.
async fn send(
    shared: &Shared,
    address: &Address,
    operation: Operation,
    kind: ResourceKind,
    request: &Request,
) -> Result<(), ArmError> {
    if kind == ResourceKind::RoleAssignment {
        principal::send_assignment(shared, address, operation, request).await
    } else {
        request.send(&shared.client).await
    }
}

/// The request an apply node sends: the PUT `request_for` built, or, for an update that changes
/// only what the type's update model carries, the PATCH of just that (decision 28).
/// The request that makes the change (`None` for a SAS), with the subscription's tenant read
/// first for the kinds whose body names it (a key vault).
async fn request_of(
    shared: &Shared,
    change: &Change,
    resource: &Resource,
    operation: Operation,
) -> Result<Option<Request>, ResourceError> {
    let address = &change.address;
    if resource.kind == ResourceKind::RoleAssignment {
        // ARM refuses to change an assignment, so this is always a create (a PUT).
        return principal::assignment_request(shared, address, resource, operation)
            .await
            .map(Some);
    }
    let tenant = if needs_tenant(resource.kind) {
        Some(tenant::tenant(shared, address, operation).await?)
    } else {
        None
    };
    Ok(request_for(
        resource,
        &shared.desired,
        &shared.subscription,
        tenant.as_deref(),
    )
    .map_err(|e| local_error(address, operation, e.to_string()))?
    .map(|request| to_send(change, resource, request)))
}

fn to_send(change: &Change, resource: &Resource, request: Request) -> Request {
    match (&change.before, &change.action) {
        (Some(before), Action::Update) => update_request(request, before, &resource.attrs),
        _ => request,
    }
}

/// The state record of `resource` as this run writes it, at `status`. What dsinfra learned about
/// a node (its boots, its steps) outlives updates; a VM's power state is kept (updating a parked VM
/// does not start it), and a new VM is running.
fn record_of(
    resource: &Resource,
    id: &str,
    previous: Option<&ResourceState>,
    host_key: Option<String>,
    status: ResourceStatus,
    secrets: BTreeMap<String, crate::state::SecretIdentity>,
) -> ResourceState {
    // Azure's name for a kind named at apply is the id's last segment, not the manifest's.
    let name = if resource.kind.named_at_apply() {
        id.rsplit('/').next().unwrap_or(id).to_owned()
    } else {
        resource.name.clone()
    };
    ResourceState {
        address: resource.address.clone(),
        kind: resource.kind,
        name,
        parent: resource.parent.clone(),
        resource_group: resource.resource_group.clone(),
        id: resource.kind.is_arm().then(|| id.to_owned()),
        attrs: resource.attrs.clone(),
        depends_on: resource.depends_on.clone(),
        status,
        // An AmlCompute's "power" is its node count: running at `count`, parked at zero nodes.
        power_state: kinds::is_parkable(resource.kind).then(|| {
            previous
                .and_then(|p| p.power_state)
                .unwrap_or(PowerState::Running)
        }),
        secrets,
        host_key,
        boots: previous.map_or(0, |p| p.boots),
        steps: previous.map(|p| p.steps.clone()).unwrap_or_default(),
        // The head's mesh key, like its step records, belongs to the VM, which an update keeps.
        mesh_key: previous.and_then(|p| p.mesh_key.clone()),
        // An AmlCompute's nodes keep their pinned keys and step records across scale updates;
        // nodes that went away are dropped when the nodes are next listed.
        nodes: previous.map(|p| p.nodes.clone()).unwrap_or_default(),
        drift: None,
    }
}

mod host_key;
mod intents;
mod principal;
mod store;
mod tenant;

use intents::{Early, Prepared};

#[cfg(test)]
mod tests;
