//! The AmlCompute driver: an Azure Machine Learning cluster, a pool of nodes the service makes
//! and deletes as it scales.
//!
//! - Its body is a fixed-size cluster (min = max = `count`) with its SSH port open
//!   (`remoteLoginPortPublicAccess: Enabled`): dsinfra runs the steps over it.
//! - It has no power state of its own: one scaled to zero nodes (`maxNodeCount` 0) is parked, as
//!   dsinfra's park leaves it, so a cluster scaled to zero outside dsinfra is recorded as parked,
//!   as a VM deallocated outside dsinfra is. Its size, node count and idle time are read back.
//! - Its create or count change completes only when its nodes are usable ([`scale`]), reported
//!   as the resource's progress; its DELETE must say what becomes of its VMs
//!   (`underlyingResourceAction=Delete`: ARM requires the parameter).
//! - Park scales it to zero and unpark back to `count` ([`scale::scale_to`]).
//! - Its preflight reads an existing workspace and AML's own vCPU quota ([`preflight`]).
//! - Its nodes are reached through the compute's `listNodes` ([`nodes`]).

use futures::future::BoxFuture;
use serde_json::Value;

use super::{Act, Applying, ClusterNodes, Driver, Parking, Preflight, text};
use crate::addr::Address;
use crate::azure::types::ml::{
    AML_COMPUTE, AmlComputeProperties, Compute, ComputeResource, MlResourceId, NodeStateCounts,
    ScaleSettings, UserAccountCredentials, duration_seconds,
};
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::diag::Diagnostic;
use crate::engine::bodies::{Body, BodyError, Builder};
use crate::engine::events::Event;
use crate::engine::power::PowerChange;
use crate::model::{Resource, ResourceKind};
use crate::plan::Plan;
use crate::state::{PowerState, ResourceState, State};

pub(crate) mod nodes;
pub(crate) mod preflight;
pub(crate) mod scale;

/// The kind this driver is for (tests elsewhere build its resources with it).
pub(crate) const KIND: ResourceKind = ResourceKind::MlCompute;

/// The AmlCompute driver.
pub(crate) struct MlCompute;

/// The one AmlCompute driver.
pub(crate) static DRIVER: MlCompute = MlCompute;

static PARKING: Parking = Parking {
    warning: "parking scales the AmlCompute clusters to zero nodes: Azure DELETES the nodes and their local disks (the BeeOND scratch and anything else under /mnt is lost), and the nodes are no longer billed; unpark makes new nodes (new node ids, new host keys) and runs the steps on them again; the workspace and its storage are kept",
    phrase: |change, n| {
        let to = match change {
            PowerChange::Park => "to zero nodes (deleting the nodes and their local disks)",
            PowerChange::Unpark => "back to their node count (new nodes)",
        };
        format!("scale {n} AmlCompute cluster(s) {to}")
    },
};

/// An AmlCompute cluster's scale settings: (minNodeCount, maxNodeCount).
fn scale_settings(body: &Value) -> Option<(i64, i64)> {
    let settings = body.pointer("/properties/properties/scaleSettings")?;
    let max = settings.get("maxNodeCount").and_then(Value::as_i64)?;
    let min = settings
        .get("minNodeCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Some((min, max))
}

/// A node count in dsinfra's form (`count`: min = max) as ARM has it, compared with `want` (the
/// state's count). A cluster scaled to zero is parked, not resized: `None`. When min and max
/// differ (someone made it autoscale), the side that differs from `want` is the count, so that
/// the plan sees the change and scales it back to a fixed size.
fn cluster_count(body: &Value, want: Option<&Value>) -> Option<Value> {
    let (min, max) = scale_settings(body)?;
    if max == 0 {
        return None;
    }
    let want = want.and_then(Value::as_i64);
    Some(Value::from(if want == Some(min) { max } else { min }))
}

/// A cluster's body, from its attributes.
fn compute_body(b: &Builder<'_>) -> Result<ComputeResource, BodyError> {
    let count = b.opt_i32("count")?.ok_or_else(|| b.missing("count"))?;
    if count < 0 {
        return Err(b.invalid("count", format!("{count} is below zero")));
    }
    let priority = b.text("priority")?;
    if !matches!(priority.as_str(), "Dedicated" | "LowPriority") {
        return Err(b.invalid(
            "priority",
            format!("`{priority}` is not Dedicated or LowPriority"),
        ));
    }
    let subnet = match b.reference_id("subnet")? {
        None => None,
        Some(vnet) => {
            let name = b.text("subnet_name")?;
            Some(MlResourceId {
                id: format!("{vnet}/subnets/{name}"),
            })
        }
    };
    let idle = b.opt_i32("idle_seconds_before_scaledown")?.map(i64::from);
    Ok(ComputeResource {
        location: Some(b.location()?),
        tags: b.tags()?,
        properties: Some(Compute {
            compute_type: AML_COMPUTE.to_owned(),
            properties: Some(AmlComputeProperties {
                vm_size: Some(b.text("size")?),
                vm_priority: Some(priority),
                scale_settings: Some(ScaleSettings::fixed(count, idle)),
                user_account_credentials: Some(UserAccountCredentials {
                    admin_user_name: b.text("admin_username")?,
                    admin_user_ssh_public_key: Some(b.text("ssh_public_key")?),
                }),
                subnet,
                remote_login_port_public_access: Some("Enabled".to_owned()),
                ..AmlComputeProperties::default()
            }),
            ..Compute::default()
        }),
        ..ComputeResource::default()
    })
}

/// After a compute's PUT or PATCH: wait until it has its `count` usable nodes (a tags-only PUT
/// changes no count, and then the wait ends at its first read).
async fn await_nodes(at: Applying<'_>, resource: &Resource, id: &ResourceId) -> Result<(), String> {
    let wanted = resource
        .attrs
        .get("count")
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| "attribute `count` is missing or not a whole number".to_owned())?;
    let started = std::time::Instant::now();
    let progress = |counts: &NodeStateCounts| {
        (at.events)(&Event::Progress {
            address: at.address.clone(),
            operation: at.operation,
            state: format!(
                "{} of {wanted} node(s) usable ({})",
                counts.usable(),
                scale::describe_counts(counts)
            ),
            elapsed: started.elapsed(),
        });
    };
    scale::wait_for_nodes(at.client, id, at.address, wanted, &progress)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Park (scale to zero) or unpark (scale to `count`) a cluster and wait until its nodes are gone
/// or usable. A failure that is not ARM's own (a timeout, nodes Azure reports unusable) is
/// carried as a message, which is how the park summary shows it.
async fn scale_cluster(
    client: &ArmClient,
    id: &ResourceId,
    resource: &ResourceState,
    change: PowerChange,
) -> Result<(), ArmError> {
    let number = |key: &str| resource.attrs.get(key).and_then(Value::as_i64);
    let nodes = match change {
        PowerChange::Park => 0,
        PowerChange::Unpark => i32::try_from(number("count").unwrap_or(1)).unwrap_or(i32::MAX),
    };
    let idle = number("idle_seconds_before_scaledown");
    scale::scale_to(client, id, &resource.address, nodes, idle, &|_| {})
        .await
        .map(|_| ())
        .map_err(|err| match err {
            scale::ScaleError::Arm { source, .. } => *source,
            other => ArmError::usage(other.to_string()),
        })
}

/// What `compute` (a GET's answer) says about its nodes.
fn nodes_of(compute: &ComputeResource) -> ClusterNodes {
    let Some(props) = compute
        .properties
        .as_ref()
        .and_then(|p| p.properties.as_ref())
    else {
        return ClusterNodes::default();
    };
    ClusterNodes {
        current: props.current_node_count.unwrap_or_default(),
        target: props.target_node_count.unwrap_or_default(),
        steady: props
            .allocation_state
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("Steady")),
        counts: props.node_state_counts.unwrap_or_default(),
    }
}

impl Driver for MlCompute {
    fn body(&self, b: &Builder<'_>) -> Result<Option<Body>, BodyError> {
        Ok(Some(Body::MlCompute(Box::new(compute_body(b)?))))
    }

    fn compared(&self) -> &'static [&'static str] {
        &["size", "count", "idle_seconds_before_scaledown", "tags"]
    }

    fn observed(&self, name: &str, body: &Value, want: Option<&Value>) -> Option<Value> {
        match name {
            "size" => text(body, "/properties/properties/vmSize").map(Value::from),
            "count" => cluster_count(body, want),
            "idle_seconds_before_scaledown" => text(
                body,
                "/properties/properties/scaleSettings/nodeIdleTimeBeforeScaleDown",
            )
            .and_then(duration_seconds)
            .map(Value::from),
            _ => None,
        }
    }

    /// Parked (deallocated) when it may have no node at all (scaled to zero, by dsinfra's park
    /// or outside it), running otherwise.
    fn power_in_body(&self, body: &Value) -> Option<PowerState> {
        let (_, max) = scale_settings(body)?;
        Some(if max == 0 {
            PowerState::Deallocated
        } else {
            PowerState::Running
        })
    }

    fn after_put<'a>(
        &'a self,
        at: Applying<'a>,
        resource: &'a Resource,
        id: &'a ResourceId,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(await_nodes(at, resource, id))
    }

    fn delete_query(&self) -> &'static [(&'static str, &'static str)] {
        &[("underlyingResourceAction", "Delete")]
    }

    fn parking(&self) -> Option<&'static Parking> {
        Some(&PARKING)
    }

    fn set_power<'a>(
        &'a self,
        client: &'a ArmClient,
        id: &'a ResourceId,
        resource: &'a ResourceState,
        change: PowerChange,
    ) -> Act<'a, ()> {
        Box::pin(scale_cluster(client, id, resource, change))
    }

    fn preflight<'a>(&'a self, at: &'a Preflight<'a>, plan: &'a Plan) -> Act<'a, Vec<Diagnostic>> {
        Box::pin(preflight::preflight(
            at.client,
            at.subscription,
            at.desired,
            plan,
        ))
    }

    fn unpark_preflight<'a>(
        &'a self,
        at: &'a Preflight<'a>,
        state: &'a State,
        todo: &'a [Address],
    ) -> Act<'a, Vec<Diagnostic>> {
        Box::pin(async move {
            // Clusters scaled to zero hold none of AML's quota: scaling back needs it again.
            let locations = preflight::locations_of_clusters(state, todo);
            if locations.is_empty() {
                return Ok(Vec::new());
            }
            let capacity =
                preflight::MlCapacity::fetch(at.client, at.subscription, &locations).await?;
            Ok(preflight::check_start(state, todo, at.desired, &capacity))
        })
    }

    fn is_pool(&self) -> bool {
        true
    }

    fn pool_nodes<'a>(
        &'a self,
        client: &'a ArmClient,
        id: &'a ResourceId,
    ) -> Act<'a, Option<ClusterNodes>> {
        Box::pin(async move { Ok(client.get_ml_compute(id).await?.as_ref().map(nodes_of)) })
    }
}

#[cfg(test)]
mod tests;
