//! Microsoft.ContainerService (2025-10-01): AKS managed clusters and their agent pools.
//!
//! One module per idea: `cluster` (the cluster's PUT, node resource group, stop and start, the
//! user kubeconfig), `pools` (AKS's rules for a pool and its view) and `versions` (the
//! Kubernetes versions a region offers). A cluster's `agentPoolProfiles` are stored as agent pool
//! resources, as AKS keeps them, and a cluster's GET shows them back from there. Pool nodes hold
//! Compute quota (`compute::quota` counts them) unless their cluster is stopped.
//!
//! Not modelled: the nodes themselves (no VMs appear in the node resource group), autoscaling,
//! upgrades, maintenance, add-ons beyond storing what was asked, and Entra-ID (AAD) clusters'
//! tokens. The Kubernetes API a kubeconfig points at is served apart from ARM.

mod cluster;
mod pools;
mod versions;

use serde_json::{Value, json};

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::json::At as _;
use super::ops;
use super::resource::{Target, parent_key};
use super::store::{Cloud, Kind, OpKind, Resource};

pub(crate) use cluster::action;
pub(crate) use versions::kubernetes_versions;

/// How long AKS takes to make a pool's nodes, and to change a pool, before the latency scale.
const POOL_CREATE_SECONDS: u64 = 180;
const POOL_UPDATE_SECONDS: u64 = 60;

/// The key of the emulator's own bookkeeping in a stored body (the cluster's API token): never
/// shown, removed on render.
const HIDDEN: &str = "dsinfraEmulator";

/// Where the Kubernetes API of a cluster is served, relative to the emulator's origin: the
/// kubeconfig `listClusterUserCredential` returns points here.
pub(crate) fn kube_api_path(cluster_key: &str) -> String {
    format!("/_kubernetes{cluster_key}")
}

/// `PUT` of a managed cluster or an agent pool.
pub(crate) fn put(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    match target.kind {
        Kind::ManagedCluster => cluster::put_cluster(cloud, ctx, target),
        _ => put_pool(cloud, ctx, target),
    }
}

/// `PUT .../agentPools/{name}`: a new pool or a change (its count, labels, taints for new nodes).
fn put_pool(cloud: &mut Cloud, ctx: &mut Ctx<'_>, target: &Target<'_>) -> Result<Reply, ArmError> {
    let Some(cluster) = parent_key(&target.key)
        .and_then(|c| cloud.resources.get(c))
        .cloned()
    else {
        return Err(target.not_found());
    };
    cluster::refuse_if_stopped(&cluster, "agent pool update")?;
    let existing = cloud.resources.get(&target.key).cloned();
    if existing.as_ref().is_some_and(|p| p.op.is_some()) {
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Operation is not allowed: another operation is in progress on agent pool '{}'.",
                target.name()
            ),
        ));
    }
    let asked = ctx.body().get("properties").cloned().unwrap_or(json!({}));
    let version = cluster
        .body
        .at("/properties/currentKubernetesVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let in_cluster = pools::InCluster {
        sub: &target.path.sub,
        location: cluster.location(),
        version: &version,
    };
    let (props, allocation) =
        pools::check(ctx, target.name(), &asked, &in_cluster, existing.as_ref())?;
    pools::check_quota(cloud, ctx, &in_cluster, &[allocation], &[&target.key])?;
    let becomes_user = props.get("mode").and_then(Value::as_str) != Some("System");
    if existing.is_some() && becomes_user && pools::last_system_pool(cloud, &target.key) {
        return Err(pools::needs_a_system_pool(target.name()));
    }
    let power = pools::asked_power(
        &asked,
        target.name(),
        props.get("mode").and_then(Value::as_str),
    )?;
    let real = std::time::Duration::from_secs(if existing.is_some() {
        POOL_UPDATE_SECONDS
    } else {
        POOL_CREATE_SECONDS
    });
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        Kind::AgentPool.namespace(),
        cluster.location(),
        real,
    );
    cluster::store_pool(
        cloud,
        &target.key,
        (&cluster.id, target.name()),
        props,
        &op.id,
    );
    if let Some(pool) = cloud.resources.get_mut(&target.key) {
        let before = pool.power.clone().unwrap_or_else(|| "Running".into());
        if let Some(power) = power.filter(|p| *p != before) {
            pool.power = Some(power.to_owned());
            let during = if power == "Stopped" {
                "Stopping"
            } else {
                "Starting"
            };
            pool.set_provisioning_state(during);
        }
    }
    let status = if existing.is_some() { 200 } else { 201 };
    let pool = cloud.resources.get(&target.key).cloned();
    let view = pool.map_or(Value::Null, |p| pools::render(cloud, &p));
    Ok(Reply::json(status, view).headers(ops::put_headers(ctx, &op)))
}

/// What a DELETE of an agent pool must not do: leave its cluster without a System pool, or
/// touch a stopped cluster.
pub(crate) fn check_delete(cloud: &Cloud, pool: &Resource) -> Result<(), ArmError> {
    if pool.kind != Kind::AgentPool {
        return Ok(());
    }
    let pool_key = super::resource::key(&pool.id);
    if let Some(cluster) = parent_key(&pool_key).and_then(|c| cloud.resources.get(c)) {
        cluster::refuse_if_stopped(cluster, "agent pool delete")?;
    }
    if pools::last_system_pool(cloud, &pool_key) {
        return Err(pools::needs_a_system_pool(pool.name()));
    }
    Ok(())
}

/// The GET view of a cluster or pool.
pub(crate) fn render(cloud: &Cloud, resource: &Resource) -> Value {
    if resource.kind == Kind::AgentPool {
        return pools::render(cloud, resource);
    }
    let mut body = resource.body.clone();
    if let Some(map) = body.as_object_mut() {
        map.remove(HIDDEN);
    }
    // The spec's examples (and AKS) answer the type as `ManagedClusters`.
    body["type"] = json!("Microsoft.ContainerService/ManagedClusters");
    let power = resource.power.clone().unwrap_or_else(|| "Running".into());
    let acting = resource
        .op
        .as_ref()
        .and_then(|id| cloud.operations.get(id))
        .and_then(|op| match &op.kind {
            OpKind::Action(action) => Some(action.clone()),
            _ => None,
        });
    let Some(props) = body.get_mut("properties").filter(|p| p.is_object()) else {
        return body;
    };
    props["powerState"] = json!({"code": power});
    match acting.as_deref() {
        Some("stop") => props["provisioningState"] = json!("Stopping"),
        Some("start") => props["provisioningState"] = json!("Starting"),
        _ => {}
    }
    let key = super::resource::key(&resource.id);
    let profiles: Vec<Value> = cloud
        .children(&key, Kind::AgentPool)
        .into_iter()
        .map(|pool| {
            let mut profile = pools::render(cloud, pool)["properties"].clone();
            profile["name"] = json!(pool.name());
            profile
        })
        .collect();
    props["agentPoolProfiles"] = json!(profiles);
    body
}

/// The power state a cluster action leaves.
pub(crate) fn power_after(action: &str) -> &'static str {
    if action == "stop" {
        "Stopped"
    } else {
        "Running"
    }
}

/// A deleted cluster takes its node resource group with it.
pub(crate) fn remove_node_group(cloud: &mut Cloud, cluster_key: &str) {
    let node_group = cloud
        .resources
        .get(cluster_key)
        .and_then(cluster::node_group_key);
    if let Some(group) = node_group {
        cloud.remove_tree(&group);
    }
}

/// After a group is deleted, the node resource groups of the clusters it held go too.
pub(crate) fn remove_orphan_node_groups(cloud: &mut Cloud, _group_key: &str) {
    let orphans: Vec<String> = cloud
        .of_kind(Kind::ResourceGroup)
        .into_iter()
        .filter(|group| {
            group
                .body
                .get("managedBy")
                .and_then(Value::as_str)
                .is_some_and(|owner| {
                    owner
                        .to_ascii_lowercase()
                        .contains("/providers/microsoft.containerservice/")
                        && !cloud.resources.contains_key(&super::resource::key(owner))
                })
        })
        .map(|group| super::resource::key(&group.id))
        .collect();
    for group in orphans {
        cloud.remove_tree(&group);
    }
}
