//! Long-running operations: creation with a deadline from the latency model, completion by
//! elapsed time (never by counting polls), and the three ways ARM lets clients watch them:
//! the Azure-AsyncOperation status resource, the Location result URL, and the storage monitor.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::config::normalize_location;
use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::store::{Cloud, Kind, OpKind, OpStatus, Operation};

/// Real-world durations the latency model starts from, before `latency_scale`.
pub(crate) fn base_latency(kind: Kind, op: &OpKind, vm_size: Option<&str>) -> Duration {
    let heavy_vm = vm_size.is_some_and(|s| s.to_ascii_lowercase().starts_with("standard_nd"));
    let secs = match (kind, op) {
        (
            Kind::Subnet | Kind::NetworkSecurityGroup | Kind::SecurityRule | Kind::PublicIpAddress,
            _,
        ) => 3,
        (Kind::NetworkInterface, _) | (Kind::Disk, OpKind::Delete) => 2,
        (Kind::VirtualNetwork | Kind::Disk, _) => 5,
        (Kind::StorageAccount | Kind::ContainerRegistry, _) => 20,
        // The cluster resource itself; its nodes take longer (see ml/nodes.rs).
        (Kind::MlCompute, OpKind::Put) | (Kind::MlWorkspace, OpKind::Delete) => 30,
        (Kind::MlCompute, OpKind::Delete) => 60,
        (Kind::VirtualMachine, OpKind::Put) if heavy_vm => 300,
        (Kind::VirtualMachine, OpKind::Put) => 90,
        (Kind::VirtualMachine, OpKind::Delete) | (Kind::MlWorkspace, OpKind::Put) => 45,
        // AKS: a control plane and its node pools (PUTs time themselves in `aks`).
        (Kind::ManagedCluster, OpKind::Delete) => 300,
        (Kind::AgentPool, OpKind::Delete) => 120,
        (Kind::VirtualMachine, OpKind::Action(action)) => match action.as_str() {
            "deallocate" => 60,
            "powerOff" => 20,
            _ => 30,
        },
        // Resource groups and everything else: about a second.
        _ => 1,
    };
    Duration::from_secs(secs)
}

/// Starts an operation on `target`; it takes any failure injected for this request.
pub(crate) fn start(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    kind: OpKind,
    target: &str,
    namespace: &str,
    location: &str,
    real: Duration,
) -> Operation {
    let duration = ctx.config.scaled(real);
    let due =
        ctx.now + chrono::Duration::from_std(duration).unwrap_or_else(|_| chrono::Duration::zero());
    let sub = target.split('/').nth(2).unwrap_or_default().to_owned();
    let op = Operation {
        id: uuid::Uuid::new_v4().to_string(),
        sub,
        namespace: namespace.to_owned(),
        location: normalize_location(location),
        kind,
        target: target.to_owned(),
        started: ctx.now,
        due,
        status: OpStatus::InProgress,
        finished: None,
        failure: ctx.take_failure(),
        previous_power: None,
    };
    cloud.operations.insert(op.id.clone(), op.clone());
    op
}

/// Whole seconds until the operation is due, as `Retry-After` wants them, counted on the
/// emulator's own (compressed) clock: a client cannot know `latency_scale`, so any other unit
/// makes it wait ARM's real time (a VM due in 0.9 s says `1`, not `90`). Rounded up, so a client
/// that waits exactly this never polls early, and never below 1 while the operation runs: HTTP
/// has no fractions (`delay-seconds` is an integer), and azure-core reads `0` as no header and
/// falls back to its own polling interval (30 s for the management SDKs), so `0` would be the
/// slowest answer of all. See docs/emulator.md, "Time".
pub(crate) fn retry_after_seconds(due: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    let left = (due - now).to_std().unwrap_or_default();
    let seconds = left.as_secs_f64().ceil();
    // Far beyond any operation's length; the cast only drops what cannot be a real wait.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let whole = seconds.min(86_400.0) as u64;
    whole.max(1)
}

/// Milliseconds until the operation is due (0 once it is), rounded up: the exact wait, for the
/// clients that read `retry-after-ms` (the Azure SDKs' millisecond hint; dsinfra's client).
pub(crate) fn retry_after_millis(due: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    let left = (due - now).to_std().unwrap_or_default();
    let millis = left.as_micros().div_ceil(1_000);
    u64::try_from(millis).unwrap_or(u64::MAX)
}

/// The wait headers of a running operation: `Retry-After` for every client, and the exact
/// `retry-after-ms`, since a compressed operation rarely ends on a whole second.
fn waits(ctx: &Ctx<'_>, op: &Operation) -> Vec<(String, String)> {
    vec![
        (
            "Retry-After".into(),
            retry_after_seconds(op.due, ctx.now).to_string(),
        ),
        (
            "retry-after-ms".into(),
            retry_after_millis(op.due, ctx.now).to_string(),
        ),
    ]
}

fn status_url(ctx: &Ctx<'_>, op: &Operation) -> String {
    format!(
        "{}/subscriptions/{}/providers/{}/locations/{}/operations/{}?api-version={}",
        ctx.endpoint, op.sub, op.namespace, op.location, op.id, ctx.api_version
    )
}

fn result_url(ctx: &Ctx<'_>, op: &Operation) -> String {
    format!(
        "{}/subscriptions/{}/providers/{}/locations/{}/operationResults/{}?api-version={}",
        ctx.endpoint, op.sub, op.namespace, op.location, op.id, ctx.api_version
    )
}

/// Headers of a PUT answered 200/201 with a non-terminal state (network, compute).
pub(crate) fn put_headers(ctx: &Ctx<'_>, op: &Operation) -> Vec<(String, String)> {
    vec![("Azure-AsyncOperation".into(), status_url(ctx, op))]
        .into_iter()
        .chain(waits(ctx, op))
        .collect()
}

/// Headers of a 202 for a DELETE or an action: both URLs, as network and compute send them.
pub(crate) fn accepted_headers(ctx: &Ctx<'_>, op: &Operation) -> Vec<(String, String)> {
    vec![
        ("Azure-AsyncOperation".into(), status_url(ctx, op)),
        ("Location".into(), result_url(ctx, op)),
    ]
    .into_iter()
    .chain(waits(ctx, op))
    .collect()
}

/// Headers of a storage account creation: the monitor URL only, in the storage provider's form.
pub(crate) fn storage_headers(ctx: &Ctx<'_>, op: &Operation) -> Vec<(String, String)> {
    vec![
        (
            "Location".into(),
            format!(
                "{}/subscriptions/{}/providers/Microsoft.Storage/operations/{}?monitor=true&api-version={}",
                ctx.endpoint, op.sub, op.id, ctx.api_version
            ),
        ),
    ]
    .into_iter()
    .chain(waits(ctx, op))
    .collect()
}

/// Headers of a resource group delete: the subscription-level operationresults URL.
pub(crate) fn group_headers(ctx: &Ctx<'_>, op: &Operation) -> Vec<(String, String)> {
    vec![(
        "Location".into(),
        format!(
            "{}/subscriptions/{}/operationresults/{}?api-version={}",
            ctx.endpoint, op.sub, op.id, ctx.api_version
        ),
    )]
    .into_iter()
    .chain(waits(ctx, op))
    .collect()
}

/// Completes every operation whose deadline has passed, oldest deadline first. Returns whether
/// anything changed (the caller then saves the cloud).
/// What handlers do when one of their operations completes, registered by them when the
/// emulator starts ([`super::providers::completions`] assembles the table), so that this module
/// imports no handler: a VM's DELETE releases its disks, a VM action leaves a power state, a
/// group's DELETE removes the role assignments and definitions inside it.
/// A hook run on the cloud with a resource's (or group's) key.
type Hook = fn(&mut Cloud, &str);

/// The power state an action (`deallocate`, `start`) leaves.
type PowerAfter = fn(&str) -> &'static str;

#[derive(Clone, Default)]
pub(crate) struct Completions {
    /// Run before a deleted resource of the kind is removed.
    deleted: Vec<(Kind, Hook)>,
    /// The power state an action of a resource of the kind leaves it in.
    acted: Vec<(Kind, PowerAfter)>,
    /// Run after a resource group is deleted, with its key.
    group_deleted: Vec<Hook>,
    /// Run at every advance of the clock, after the operations due: whether they changed
    /// anything.
    timers: Vec<Timer>,
}

/// A timer of the emulator's clock (see [`Completions::on_tick`]).
type Timer = fn(&mut Cloud, DateTime<Utc>, &Completions) -> bool;

impl Completions {
    /// Registers what a completed DELETE of a `kind` resource does first.
    #[must_use]
    pub fn on_delete(mut self, kind: Kind, hook: Hook) -> Self {
        self.deleted.push((kind, hook));
        self
    }

    /// Registers the power state an action of a `kind` resource leaves.
    #[must_use]
    pub fn on_action(mut self, kind: Kind, power_after: PowerAfter) -> Self {
        self.acted.push((kind, power_after));
        self
    }

    /// Registers what happens at every advance of the clock, once the operations due are done.
    #[must_use]
    pub fn on_tick(mut self, timer: Timer) -> Self {
        self.timers.push(timer);
        self
    }

    /// Runs what a completed DELETE of a `kind` resource does first, for `key`.
    pub fn run_deleted(&self, cloud: &mut Cloud, kind: Kind, key: &str) {
        for (_, hook) in self.deleted.iter().filter(|(k, _)| *k == kind) {
            hook(cloud, key);
        }
    }

    /// Registers what a completed group DELETE does after the group's resources are gone.
    #[must_use]
    pub fn on_group_delete(mut self, hook: Hook) -> Self {
        self.group_deleted.push(hook);
        self
    }
}

pub(crate) fn advance(cloud: &mut Cloud, now: DateTime<Utc>, completions: &Completions) -> bool {
    let mut due: Vec<(DateTime<Utc>, String)> = cloud
        .operations
        .values()
        .filter(|op| op.status == OpStatus::InProgress && op.due <= now)
        .map(|op| (op.due, op.id.clone()))
        .collect();
    due.sort();
    for (_, id) in &due {
        complete(cloud, id, completions);
    }
    // What else the clock brings (a spot VM whose eviction notice ran out goes).
    let mut ticked = false;
    for timer in &completions.timers {
        ticked |= timer(cloud, now, completions);
    }
    !due.is_empty() || ticked
}

fn complete(cloud: &mut Cloud, id: &str, completions: &Completions) {
    let Some(op) = cloud.operations.get(id).cloned() else {
        return;
    };
    let failed = op.failure.is_some();
    match &op.kind {
        OpKind::Put => {
            let mut remove = Vec::new();
            for (key, resource) in &mut cloud.resources {
                if resource.op.as_deref() != Some(id) {
                    continue;
                }
                resource.op = None;
                resource.changed = Some(op.due);
                if failed && resource.kind == Kind::StorageAccount {
                    // The old model: a failed 202-created resource never appears.
                    remove.push(key.clone());
                } else if failed {
                    resource.set_provisioning_state("Failed");
                    resource.failure.clone_from(&op.failure);
                    if resource.kind == Kind::VirtualMachine {
                        resource.power = Some("deallocated".into());
                    }
                } else {
                    resource.set_provisioning_state("Succeeded");
                    resource.hidden = false;
                    resource.failure = None;
                    if resource.kind == Kind::VirtualMachine {
                        resource.power = Some("running".into());
                    }
                }
            }
            for key in remove {
                cloud.remove_tree(&key);
            }
        }
        OpKind::Delete => {
            if failed {
                if let Some(resource) = cloud.resources.get_mut(&op.target) {
                    resource.op = None;
                    resource.changed = Some(op.due);
                    resource.set_provisioning_state("Failed");
                    resource.failure.clone_from(&op.failure);
                }
            } else {
                let kind = cloud.resources.get(&op.target).map(|r| r.kind);
                for (_, hook) in completions.deleted.iter().filter(|(k, _)| Some(*k) == kind) {
                    hook(cloud, &op.target);
                }
                cloud.remove_tree(&op.target);
            }
        }
        OpKind::Action(action) => {
            if let Some(resource) = cloud.resources.get_mut(&op.target) {
                resource.op = None;
                resource.changed = Some(op.due);
                let after = completions
                    .acted
                    .iter()
                    .find(|(k, _)| *k == resource.kind)
                    .map(|(_, power_after)| power_after(action).to_owned());
                resource.power = if failed {
                    op.previous_power.clone()
                } else {
                    after
                };
            }
        }
        OpKind::GroupDelete => {
            if failed {
                if let Some(group) = cloud.resources.get_mut(&op.target) {
                    group.op = None;
                    group.set_provisioning_state("Succeeded");
                }
            } else {
                cloud.remove_tree(&op.target);
                for hook in &completions.group_deleted {
                    hook(cloud, &op.target);
                }
            }
        }
    }
    if let Some(stored) = cloud.operations.get_mut(id) {
        stored.status = if failed {
            OpStatus::Failed
        } else {
            OpStatus::Succeeded
        };
        stored.finished = Some(stored.due);
    }
}

fn timestamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn find<'a>(cloud: &'a Cloud, sub: &str, id: &str) -> Result<&'a Operation, ArmError> {
    cloud
        .operations
        .get(id)
        .filter(|op| op.sub.eq_ignore_ascii_case(sub))
        .ok_or_else(|| {
            ArmError::new(
                404,
                "OperationNotFound",
                format!("The operation '{id}' could not be found."),
            )
        })
}

/// `GET .../locations/{loc}/operations/{id}`: always 200 with the status body, and while the
/// operation runs a `Retry-After` with the time left, as the network and compute providers send.
pub(crate) fn status(ctx: &Ctx<'_>, cloud: &Cloud, sub: &str, id: &str) -> Result<Reply, ArmError> {
    let op = find(cloud, sub, id)?;
    let mut body = json!({
        "name": op.id,
        "status": op.status.as_str(),
        "startTime": timestamp(op.started),
    });
    if let Some(finished) = op.finished {
        body["endTime"] = json!(timestamp(finished));
    }
    if op.status == OpStatus::Failed
        && let Some(failure) = &op.failure
    {
        body["error"] = failure.inner();
    }
    let reply = Reply::json(200, body);
    Ok(if op.status == OpStatus::InProgress {
        reply.headers(waits(ctx, op))
    } else {
        reply
    })
}

/// `GET .../operationResults/{id}` and the resource group operationresults URL: 202 while
/// running, then the synchronous result, or the failure with its status. The result of a PUT or
/// PATCH (`OpKind::Put`) is the resource as it is now (`render`, given its key), as ARM's Location
/// URL returns it: clients that take the final state from the Location (the JavaScript SDK for a
/// PATCH) read it there. Deletes and actions, and a resource deleted since, have no body (200).
pub(crate) fn result(
    ctx: &Ctx<'_>,
    cloud: &Cloud,
    sub: &str,
    id: &str,
    render: impl Fn(&Cloud, &str) -> Option<Value>,
) -> Result<Reply, ArmError> {
    let op = find(cloud, sub, id)?;
    match op.status {
        OpStatus::InProgress => {
            let location = format!(
                "{}{}",
                ctx.endpoint,
                match op.kind {
                    OpKind::GroupDelete => format!(
                        "/subscriptions/{}/operationresults/{}?api-version={}",
                        op.sub, op.id, ctx.api_version
                    ),
                    _ => format!(
                        "/subscriptions/{}/providers/{}/locations/{}/operationResults/{}?api-version={}",
                        op.sub, op.namespace, op.location, op.id, ctx.api_version
                    ),
                }
            );
            Ok(Reply::empty(202)
                .header("Location", location)
                .headers(waits(ctx, op)))
        }
        OpStatus::Succeeded => Ok(match (&op.kind, render(cloud, &op.target)) {
            (OpKind::Put, Some(body)) => Reply::json(200, body),
            _ => Reply::empty(200),
        }),
        OpStatus::Failed => Err(op
            .failure
            .clone()
            .unwrap_or_else(|| ArmError::new(500, "InternalServerError", "The operation failed."))),
    }
}

/// The storage provider's monitor URL: 202 while creating, then 200 with the account body.
pub(crate) fn storage_monitor(
    ctx: &Ctx<'_>,
    cloud: &Cloud,
    sub: &str,
    id: &str,
    render: impl Fn(&Cloud, &str) -> Option<Value>,
) -> Result<Reply, ArmError> {
    let op = find(cloud, sub, id)?;
    match op.status {
        OpStatus::InProgress => Ok(Reply::empty(202).headers(storage_headers(ctx, op))),
        OpStatus::Failed => Err(op
            .failure
            .clone()
            .unwrap_or_else(|| ArmError::new(500, "InternalServerError", "The operation failed."))),
        OpStatus::Succeeded => match render(cloud, &op.target) {
            Some(body) => Ok(Reply::json(200, body)),
            // Deleted since: the synchronous result of a finished creation is gone too.
            None => Ok(Reply::empty(204)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_counts_wall_seconds_of_the_emulators_clock() {
        let now = Utc::now();
        let due = |ms| now + chrono::Duration::milliseconds(ms);
        // A VM due in 0.9 s of wall time (90 s at scale 0.01) says 1, whatever the scale.
        assert_eq!(retry_after_seconds(due(900), now), 1);
        // Rounded up, so a client that waits exactly this never polls early.
        assert_eq!(retry_after_seconds(due(1_000), now), 1);
        assert_eq!(retry_after_seconds(due(1_001), now), 2);
        assert_eq!(retry_after_seconds(due(2_500), now), 3);
        assert_eq!(retry_after_seconds(due(90_000), now), 90);
        // Under a second, due, or past due (scale 0): 1, never 0, which clients read as "no
        // header" and answer with their own, longer, default.
        assert_eq!(retry_after_seconds(due(1), now), 1);
        assert_eq!(retry_after_seconds(now, now), 1);
        assert_eq!(retry_after_seconds(due(-50), now), 1);
    }

    #[test]
    fn retry_after_millis_is_the_exact_wait() {
        let now = Utc::now();
        let due = |us| now + chrono::Duration::microseconds(us);
        assert_eq!(retry_after_millis(due(900_000), now), 900);
        // Rounded up: never an early poll.
        assert_eq!(retry_after_millis(due(20_001), now), 21);
        assert_eq!(retry_after_millis(due(1), now), 1);
        assert_eq!(retry_after_millis(now, now), 0);
        assert_eq!(retry_after_millis(due(-5_000), now), 0);
    }
}
