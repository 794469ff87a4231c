//! One room per resource kind: what the engine does differently for a kind lives in that kind's
//! driver, and the phases (bodies, refresh, execute, power, preflight) call through [`driver`].
//!
//! Terraform's provider interface is the model: a provider answers ReadResource,
//! PlanResourceChange and ApplyResourceChange for each of its types, and the core never asks
//! which type it holds. Here a [`Driver`] says, for one [`ResourceKind`]:
//!
//! - its ARM body ([`Driver::body`]);
//! - how it is read back: the attributes ARM reads back reliably and their values in ARM's body
//!   ([`Driver::compared`], [`Driver::observed`]), values only ARM knows ([`Driver::known`]), and
//!   the power state its body implies ([`Driver::power_in_body`]);
//! - what apply does around its PUT and DELETE ([`Driver::after_put`], [`Driver::delete_query`],
//!   [`Driver::after_delete`]);
//! - how park and unpark act on it ([`Driver::parking`], [`Driver::set_power`]);
//! - its preflight before a plan or an unpark ([`Driver::preflight`],
//!   [`Driver::unpark_preflight`]);
//! - whether it is a pool of nodes the service manages ([`Driver::is_pool`]).
//!
//! Every method has the answer of a plain ARM kind (tags read back, nothing before or after its
//! requests) as its default, so most kinds are one row of [`plain`]. A kind with more has a file
//! (or a directory) of its own: [`virtual_machine`], [`key_vault`], [`storage_account`],
//! [`ml_compute`], [`aks`]. Adding a kind is a variant of `ResourceKind`, its driver, and a row in
//! [`driver`] (docs/architecture.md).

use std::collections::BTreeSet;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::addr::Address;
use crate::azure::types::ml::NodeStateCounts;
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::diag::Diagnostic;
use crate::engine::bodies::{Body, BodyError, Builder};
use crate::engine::events::{EventSink, Operation};
use crate::engine::power::PowerChange;
use crate::model::{Attrs, Desired, Resource, ResourceKind};
use crate::plan::{Change, Plan};
use crate::state::{PowerState, ResourceState, State};

pub(crate) mod aks;
pub(crate) mod key_vault;
pub(crate) mod ml_compute;
pub(crate) mod plain;
pub(crate) mod storage_account;
pub(crate) mod virtual_machine;

/// What apply knows when it asks a driver to act after a request: the run's client (gated by
/// its limiter), the subscription, where progress goes, and which resource and operation.
pub(crate) struct Applying<'a> {
    /// The run's client.
    pub client: &'a ArmClient,
    /// The subscription applied to.
    pub subscription: &'a str,
    /// Where progress events go.
    pub events: &'a EventSink,
    /// The resource's address.
    pub address: &'a Address,
    /// The operation under way.
    pub operation: Operation,
}

/// How park and unpark treat a kind, in the words the question and warnings use.
pub(crate) struct Parking {
    /// What parking does to resources of this kind, said before the question.
    pub warning: &'static str,
    /// The question's phrase for `n` of them (`Deallocate 2 VM(s)`), starting lower case when
    /// another kind's phrase comes first.
    pub phrase: fn(PowerChange, usize) -> String,
}

/// What a preflight reads and judges with.
pub(crate) struct Preflight<'a> {
    /// The preflight's client.
    pub client: &'a ArmClient,
    /// The subscription.
    pub subscription: &'a str,
    /// The manifest's resources (for spans and the size catalog).
    pub desired: &'a Desired,
}

/// What the service says about a pool's nodes (`status` shows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClusterNodes {
    /// How many nodes it has now.
    pub current: i32,
    /// How many it is scaling to.
    pub target: i32,
    /// Whether it is done scaling (AmlCompute: `allocationState: Steady`, else `Resizing`).
    pub steady: bool,
    /// How many nodes are in each state.
    pub counts: NodeStateCounts,
}

impl ClusterNodes {
    /// Whether the service says which state each node is in (AmlCompute does; AKS, through ARM,
    /// gives a count only).
    pub fn has_states(&self) -> bool {
        self.counts != NodeStateCounts::default()
    }
}

/// A future that reads or acts, borrowed for `'a`.
pub(crate) type Act<'a, T> = BoxFuture<'a, Result<T, ArmError>>;

/// What the engine does differently for one resource kind. Defaults are a plain ARM kind's.
pub(crate) trait Driver: Send + Sync {
    /// The request body that creates or updates `b`'s resource; `None` for a kind never sent to
    /// ARM (a SAS is signed locally).
    ///
    /// # Errors
    ///
    /// An attribute is missing or malformed (a bug in the manifest layer or a hand-edited state).
    fn body(&self, b: &Builder<'_>) -> Result<Option<Body>, BodyError>;

    /// Whether its body names the subscription's Microsoft Entra tenant (read from ARM once per
    /// run, when a plan has such a kind).
    fn needs_tenant(&self) -> bool {
        false
    }

    /// The managed attributes ARM reads back reliably, compared for drift (`tags` included when
    /// the kind takes tags).
    fn compared(&self) -> &'static [&'static str] {
        &["tags"]
    }

    /// ARM's value for the managed attribute `name` (not `tags`: [`observed`] reads those for
    /// every kind), in dsinfra's form; `want` is the recorded value, for attributes whose
    /// reading depends on it. `None` when ARM does not say.
    fn observed(&self, _name: &str, _body: &Value, _want: Option<&Value>) -> Option<Value> {
        None
    }

    /// Values only ARM knows, which `(known after apply: ...)` placeholders name.
    fn known(&self, _body: &Value, _known: &mut Attrs) {}

    /// The power state the resource's body implies (a cluster scaled to zero is parked), for
    /// kinds whose power is not in an instance view.
    fn power_in_body(&self, _body: &Value) -> Option<PowerState> {
        None
    }

    /// Whether a refresh also reads its instance view (power state and since when).
    fn has_instance_view(&self) -> bool {
        false
    }

    /// Whether a refresh reads resources of this kind with one list per resource group (the
    /// collection at `{group}/providers/{ARM type}`, paged by `nextLink`) instead of a GET each:
    /// the top-level kinds a cluster has one of per node, and their neighbours.
    fn listed(&self) -> bool {
        false
    }

    /// After its PUT or PATCH succeeded: what must also hold before it counts as done (an
    /// AmlCompute cluster waits for its nodes). The error is said as the resource's failure.
    fn after_put<'a>(
        &'a self,
        _at: Applying<'a>,
        _resource: &'a Resource,
        _id: &'a ResourceId,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// The query its DELETE needs.
    fn delete_query(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// Whether deleting its parent deletes it too, so that its own DELETE is not sent when the
    /// same run deletes the parent (an AKS pool goes with its cluster; its own DELETE would be
    /// refused while the cluster is stopped).
    fn deleted_with_parent(&self) -> bool {
        false
    }

    /// After its DELETE succeeded (a key vault is purged, so its name is free again).
    fn after_delete<'a>(
        &'a self,
        _at: Applying<'a>,
        _change: &'a Change,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// How park and unpark act on it; `None` for kinds they leave alone.
    fn parking(&self) -> Option<&'static Parking> {
        None
    }

    /// Whether park and unpark act on this resource of a parkable kind: an AKS pool of a cluster
    /// whose block parks by stopping is left to the cluster's stop.
    fn parks(&self, _resource: &ResourceState) -> bool {
        self.parking().is_some()
    }

    /// Park or unpark the resource at `id` (recorded as `resource`), until it is there.
    fn set_power<'a>(
        &'a self,
        _client: &'a ArmClient,
        _id: &'a ResourceId,
        resource: &'a ResourceState,
        _change: PowerChange,
    ) -> Act<'a, ()> {
        let message = format!("{} cannot be parked", resource.address);
        Box::pin(async move { Err(ArmError::usage(message)) })
    }

    /// Its part of a plan's preflight (quota, things that must already exist), read and judged.
    fn preflight<'a>(
        &'a self,
        _at: &'a Preflight<'a>,
        _plan: &'a Plan,
    ) -> Act<'a, Vec<Diagnostic>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Its part of an unpark's preflight for the resources at `todo` (those of other kinds are
    /// skipped): what starting them again needs.
    fn unpark_preflight<'a>(
        &'a self,
        _at: &'a Preflight<'a>,
        _state: &'a State,
        _todo: &'a [Address],
    ) -> Act<'a, Vec<Diagnostic>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Whether it is a pool of nodes the service creates and deletes (an AmlCompute cluster):
    /// its nodes are read from the service, not from resources of the subscription.
    fn is_pool(&self) -> bool {
        false
    }

    /// A pool's nodes as the service has them now; `None` when it is gone (or not a pool).
    fn pool_nodes<'a>(
        &'a self,
        _client: &'a ArmClient,
        _id: &'a ResourceId,
    ) -> Act<'a, Option<ClusterNodes>> {
        Box::pin(async { Ok(None) })
    }
}

/// The driver of `kind`: the one registry of kinds.
pub(crate) fn driver(kind: ResourceKind) -> &'static dyn Driver {
    match kind {
        ResourceKind::VirtualMachine => &virtual_machine::DRIVER,
        ResourceKind::KeyVault => &key_vault::DRIVER,
        ResourceKind::MlCompute => &ml_compute::DRIVER,
        ResourceKind::ResourceGroup => &plain::RESOURCE_GROUP,
        ResourceKind::VirtualNetwork => &plain::VIRTUAL_NETWORK,
        ResourceKind::NetworkSecurityGroup => &plain::NETWORK_SECURITY_GROUP,
        ResourceKind::PublicIp => &plain::PUBLIC_IP,
        ResourceKind::NetworkInterface => &plain::NETWORK_INTERFACE,
        ResourceKind::ProximityPlacementGroup => &plain::PROXIMITY_PLACEMENT_GROUP,
        ResourceKind::AvailabilitySet => &plain::AVAILABILITY_SET,
        ResourceKind::ManagedDisk => &plain::MANAGED_DISK,
        ResourceKind::StorageAccount => &storage_account::DRIVER,
        ResourceKind::BlobContainer => &plain::BLOB_CONTAINER,
        ResourceKind::FileShare => &plain::FILE_SHARE,
        ResourceKind::AutoShutdownSchedule => &plain::AUTO_SHUTDOWN_SCHEDULE,
        ResourceKind::Sas => &plain::SAS,
        ResourceKind::LogAnalyticsWorkspace => &plain::LOG_ANALYTICS_WORKSPACE,
        ResourceKind::AppInsights => &plain::APP_INSIGHTS,
        ResourceKind::ContainerRegistry => &plain::CONTAINER_REGISTRY,
        ResourceKind::MlWorkspace => &plain::ML_WORKSPACE,
        ResourceKind::RoleDefinition => &plain::ROLE_DEFINITION,
        ResourceKind::RoleAssignment => &plain::ROLE_ASSIGNMENT,
        ResourceKind::AksCluster => &aks::CLUSTER,
        ResourceKind::AksPool => &aks::POOL,
    }
}

/// Whether park and unpark act on resources of `kind`.
pub(crate) fn is_parkable(kind: ResourceKind) -> bool {
    driver(kind).parking().is_some()
}

/// Whether resources of `kind` are pools of service-managed nodes.
pub(crate) fn is_pool(kind: ResourceKind) -> bool {
    driver(kind).is_pool()
}

/// The distinct kinds of `kinds`, in the registry's order (the enum's).
pub(crate) fn distinct(kinds: impl IntoIterator<Item = ResourceKind>) -> BTreeSet<ResourceKind> {
    kinds.into_iter().collect()
}

/// ARM's tags on a body, as the `tags` attribute reads them: every tag ARM has.
fn observed_tags(body: &Value) -> Value {
    Value::Object(
        body.get("tags")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    )
}

/// ARM's value for the managed attribute `name` of a `kind` resource, in dsinfra's form.
pub(crate) fn observed(
    kind: ResourceKind,
    name: &str,
    body: &Value,
    want: Option<&Value>,
) -> Option<Value> {
    if name == "tags" {
        return Some(observed_tags(body));
    }
    driver(kind).observed(name, body, want)
}

/// The text at `pointer` in `value`.
pub(crate) fn text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind has a driver, and a kind that takes no tags does not compare them: the
    /// registry is total, and what refresh compares is each driver's word.
    #[test]
    fn every_kind_has_a_driver_and_untagged_kinds_compare_no_tags() {
        for kind in ResourceKind::ALL {
            let compared = driver(kind).compared();
            let untagged = matches!(
                kind,
                ResourceKind::Sas
                    | ResourceKind::BlobContainer
                    | ResourceKind::FileShare
                    | ResourceKind::RoleDefinition
                    | ResourceKind::RoleAssignment
                    | ResourceKind::AksPool
            );
            assert_eq!(compared.contains(&"tags"), !untagged, "{kind}");
        }
    }
}
