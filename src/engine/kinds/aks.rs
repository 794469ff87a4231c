//! The AKS drivers: a managed cluster (with its System pool in its body) and its named node
//! pools, each an ARM resource of its own (decision 73).
//!
//! - A cluster's body carries its one System pool; named pools are `agentPools/{name}` PUTs.
//!   What is read back and compared: a cluster's System pool node count and its Blob CSI switch
//!   (and tags); a pool's size and node count.
//! - A pool scaled to zero nodes is parked (as dsinfra's park leaves it), so a pool scaled to zero
//!   outside dsinfra is recorded as parked; a stopped cluster, or a stopped pool, the same way.
//! - Park scales every named pool to zero and unpark back to `count` (a PUT of the pool's body
//!   with the count changed); the System pool keeps its nodes (AKS requires at least one), and
//!   the plan prices it while parked. A block with `park = "stop"` parks by stopping the whole
//!   cluster instead; its pools are then left to the cluster's stop.
//! - The preflight reads the region's Kubernetes versions, and refuses a plan that writes to a
//!   stopped cluster or its pools.

use serde_json::Value;

use super::{Act, ClusterNodes, Driver, Parking, Preflight, text};
use crate::azure::types::aks::KubernetesVersions;
use crate::azure::types::aks::{
    AadProfile, AgentPool, AgentPoolProfile, AgentPoolProperties, ApiServerAccessProfile,
    ClusterIdentity, Enabled, GpuProfile, ManagedCluster, ManagedClusterProperties, StorageProfile,
};
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::diag::Diagnostic;
use crate::engine::bodies::{Body, BodyError, Builder};
use crate::engine::power::PowerChange;
use crate::model::Attrs;
use crate::plan::{Action, Plan};
use crate::state::{PowerState, ResourceState};

/// The name of the System pool inside a cluster's body.
pub(crate) const SYSTEM_POOL: &str = "system";

/// The AKS cluster driver.
pub(crate) struct Cluster;

/// The one cluster driver.
pub(crate) static CLUSTER: Cluster = Cluster;

/// The AKS node pool driver.
pub(crate) struct Pool;

/// The one pool driver.
pub(crate) static POOL: Pool = Pool;

static PARKING: Parking = Parking {
    warning: "parking scales the AKS node pools to zero nodes: AKS deletes their nodes (and what pods kept on them), and they are no longer billed; each cluster keeps its System pool (AKS requires one node), which is still billed; unpark scales the pools back and the pods are scheduled again",
    phrase: |change, n| {
        let to = match change {
            PowerChange::Park => "to zero nodes",
            PowerChange::Unpark => "back to their node count",
        };
        format!("scale {n} AKS node pool(s) {to}")
    },
};

static CLUSTER_PARKING: Parking = Parking {
    warning: "parking stops the AKS clusters whose block says `park = \"stop\"`: every node of every pool is deallocated (none is billed; pods stop and are scheduled again at start), the control plane keeps the cluster's objects; a stopped cluster accepts only start or delete, and starting takes minutes",
    phrase: |change, n| {
        let verb = match change {
            PowerChange::Park => "stop",
            PowerChange::Unpark => "start",
        };
        format!("{verb} {n} AKS cluster(s)")
    },
};

/// Whether an AKS resource's block parks by stopping the whole cluster (`park = "stop"`).
fn parks_by_stopping(attrs: &Attrs) -> bool {
    attrs.get("park").and_then(Value::as_str) == Some("stop")
}

/// A cluster's body, from its attributes.
fn cluster_body(b: &Builder<'_>) -> Result<ManagedCluster, BodyError> {
    let count = b
        .opt_i32("system_count")?
        .ok_or_else(|| b.missing("system_count"))?;
    let system = AgentPoolProfile {
        name: SYSTEM_POOL.to_owned(),
        properties: AgentPoolProperties {
            count: Some(i64::from(count)),
            vm_size: Some(b.text("system_size")?),
            mode: Some("System".to_owned()),
            os_type: Some("Linux".to_owned()),
            pool_type: Some("VirtualMachineScaleSets".to_owned()),
            ..AgentPoolProperties::default()
        },
    };
    let ranges = b.texts("api_server_ranges")?;
    let entra = b.opt_bool("entra_id")?.unwrap_or(false);
    Ok(ManagedCluster {
        location: Some(b.location()?),
        tags: b.tags()?,
        identity: Some(ClusterIdentity {
            kind: "SystemAssigned".to_owned(),
            principal_id: None,
        }),
        properties: Some(ManagedClusterProperties {
            kubernetes_version: b.opt_text("kubernetes_version")?,
            dns_prefix: Some(b.text("dns_prefix")?),
            agent_pool_profiles: vec![system],
            api_server_access_profile: (!ranges.is_empty()).then_some(ApiServerAccessProfile {
                authorized_ip_ranges: ranges,
            }),
            storage_profile: Some(StorageProfile {
                blob_csi_driver: Some(Enabled {
                    enabled: b.opt_bool("blob_csi")?.unwrap_or(false),
                }),
            }),
            enable_rbac: Some(true),
            aad_profile: entra.then_some(AadProfile {
                managed: Some(true),
                enable_azure_rbac: Some(true),
            }),
            disable_local_accounts: entra.then_some(true),
            ..ManagedClusterProperties::default()
        }),
        ..ManagedCluster::default()
    })
}

/// A pool's body from its attributes, with `count` nodes (the attribute's, or park's zero).
///
/// # Errors
///
/// An attribute is missing or malformed, said as `(attribute, what)`.
pub(crate) fn pool_body(
    attrs: &Attrs,
    count: Option<i64>,
) -> Result<AgentPool, (&'static str, String)> {
    let text = |key: &'static str| {
        attrs
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or((key, "missing or not text".to_owned()))
    };
    let count = match count {
        Some(n) => n,
        None => attrs
            .get("count")
            .and_then(Value::as_i64)
            .ok_or(("count", "missing or not a whole number".to_owned()))?,
    };
    let taints = match attrs.get("taints") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| ("taints", e.to_string()))?,
    };
    let driver = attrs.get("gpu_driver").and_then(Value::as_str);
    let tags = match attrs.get("tags") {
        None | Some(Value::Null) => None,
        Some(v) => Some(serde_json::from_value(v.clone()).map_err(|e| ("tags", e.to_string()))?),
    };
    Ok(AgentPool {
        id: None,
        properties: Some(AgentPoolProperties {
            count: Some(count),
            vm_size: Some(text("size")?),
            mode: Some("User".to_owned()),
            os_type: Some("Linux".to_owned()),
            pool_type: Some("VirtualMachineScaleSets".to_owned()),
            node_taints: taints,
            gpu_profile: driver.map(|d| GpuProfile {
                driver: d.to_owned(),
            }),
            tags,
            ..AgentPoolProperties::default()
        }),
    })
}

/// Whether a cluster's or pool's body says it is stopped.
fn stopped(body: &Value) -> bool {
    text(body, "/properties/powerState/code").is_some_and(|c| c.eq_ignore_ascii_case("Stopped"))
}

/// What `status` shows of a cluster's System pool or a pool: `count` nodes, none while stopped.
/// AKS reports no allocation state through ARM: a pool is steady once its operation is done, and
/// it says no node's state.
fn nodes_now(body: &Value, count: Option<i64>) -> ClusterNodes {
    let count = count
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or_default();
    let current = if stopped(body) { 0 } else { count };
    ClusterNodes {
        current,
        target: current,
        steady: text(body, "/properties/provisioningState")
            .is_none_or(|s| s.eq_ignore_ascii_case("Succeeded")),
        counts: crate::azure::types::ml::NodeStateCounts::default(),
    }
}

/// The System pool's count in a cluster's body.
fn system_count(body: &Value) -> Option<Value> {
    body.pointer("/properties/agentPoolProfiles")?
        .as_array()?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(SYSTEM_POOL))?
        .get("count")
        .cloned()
}

/// The Kubernetes versions the region offers (`GET .../locations/{l}/kubernetesVersions`): a
/// cluster the plan creates or updates with a `kubernetes_version` the region does not list is
/// an error at the attribute, before anything is created (AKS answers K8sVersionNotSupported
/// only after the network and storage exist).
async fn check_versions(at: &Preflight<'_>, plan: &Plan) -> Result<Vec<Diagnostic>, ArmError> {
    let mut problems = Vec::new();
    let mut read = std::collections::BTreeMap::<String, KubernetesVersions>::new();
    for change in plan.changes.iter().filter(|c| {
        c.kind == crate::model::ResourceKind::AksCluster
            && matches!(
                c.action,
                Action::Create | Action::Update | Action::Replace { .. }
            )
    }) {
        let Some(resource) = at.desired.resource(&change.address) else {
            continue;
        };
        let (Some(version), Some(location)) = (
            resource
                .attrs
                .get("kubernetes_version")
                .and_then(Value::as_str),
            resource.attrs.get("location").and_then(Value::as_str),
        ) else {
            continue;
        };
        if !read.contains_key(location) {
            let id = ResourceId::from_raw(format!(
                "/subscriptions/{}/providers/Microsoft.ContainerService/locations/{location}/kubernetesVersions",
                at.subscription
            ));
            let versions = at
                .client
                .get::<KubernetesVersions>(&id)
                .await?
                .unwrap_or_default();
            read.insert(location.to_owned(), versions);
        }
        let versions = &read[location];
        if versions.offers(version) {
            continue;
        }
        let span = resource
            .attr_spans
            .get("kubernetes_version")
            .or(resource.span.as_ref())
            .cloned();
        let offered = versions.listed();
        problems.push(
            Diagnostic::error(format!(
                "Kubernetes {version} is not offered in {location}"
            ))
            .with_span_opt(span)
            .with_label(format!("AKS in {location} offers {}", offered.join(", ")))
            .with_help(format!(
                "write one of those (`<major.minor>` runs its newest patch), or leave `kubernetes_version` out for the region's default{}",
                versions
                    .values
                    .iter()
                    .find(|v| v.is_default)
                    .map_or_else(String::new, |v| format!(" ({})", v.version))
            )),
        );
    }
    Ok(problems)
}

/// Whether a change writes to an AKS cluster or pool that exists (creating a pool in a cluster
/// writes to the cluster too).
fn writes(change: &crate::plan::Change) -> bool {
    matches!(
        change.action,
        Action::Update | Action::Replace { .. } | Action::Delete
    ) || (change.kind == crate::model::ResourceKind::AksPool && change.action == Action::Create)
}

/// AKS's rule for a stopped cluster: it accepts only start or delete. A plan that would write to
/// a stopped cluster (or to its pools) is refused at the block before any write, rather than
/// half applied. `clusters` are the clusters' addresses the plan writes to; each is read once.
async fn check_stopped(
    at: &Preflight<'_>,
    plan: &Plan,
    clusters: std::collections::BTreeSet<crate::addr::Address>,
) -> Result<Vec<Diagnostic>, ArmError> {
    let mut problems = Vec::new();
    for address in clusters {
        let Some(resource) = at.desired.resource(&address) else {
            continue;
        };
        // A cluster the plan deletes or replaces anyway: deleting is what a stopped one takes.
        let deleted = plan.changes.iter().any(|c| {
            c.address == address && matches!(c.action, Action::Delete | Action::Replace { .. })
        });
        if deleted {
            continue;
        }
        let id = ResourceId::from_raw(resource.arm_id(at.subscription));
        let body = match at.client.get::<Value>(&id).await {
            Ok(Some(body)) => body,
            Ok(None) => continue,
            Err(e) if e.is_resource_group_not_found() => continue,
            Err(e) => return Err(e),
        };
        if CLUSTER.power_in_body(&body) != Some(PowerState::Deallocated) {
            continue;
        }
        let start = if parks_by_stopping(&resource.attrs) {
            "`dsinfra unpark` starts it (its block parks by stopping it)".to_owned()
        } else {
            format!(
                "start it (`az aks start --resource-group {} --name {}`)",
                resource.resource_group, resource.name
            )
        };
        problems.push(
            Diagnostic::error(format!(
                "{} is stopped: AKS accepts only start or delete on a stopped cluster",
                address.block_address()
            ))
            .with_span_opt(resource.span.clone())
            .with_label("this plan changes the cluster or its pools")
            .with_help(format!(
                "{start}, then plan again (`dsinfra destroy` works on it as it is)"
            )),
        );
    }
    Ok(problems)
}

impl Driver for Cluster {
    fn preflight<'a>(&'a self, at: &'a Preflight<'a>, plan: &'a Plan) -> Act<'a, Vec<Diagnostic>> {
        Box::pin(async move {
            let mut problems = check_versions(at, plan).await?;
            let written = plan
                .changes
                .iter()
                .filter(|c| c.kind == crate::model::ResourceKind::AksCluster && writes(c))
                .map(|c| c.address.clone())
                .collect();
            problems.extend(check_stopped(at, plan, written).await?);
            Ok(problems)
        })
    }

    fn body(&self, b: &Builder<'_>) -> Result<Option<Body>, BodyError> {
        Ok(Some(Body::AksCluster(Box::new(cluster_body(b)?))))
    }

    fn compared(&self) -> &'static [&'static str] {
        &["system_count", "blob_csi", "tags"]
    }

    fn observed(&self, name: &str, body: &Value, _want: Option<&Value>) -> Option<Value> {
        match name {
            "system_count" => system_count(body),
            "blob_csi" => Some(Value::Bool(
                body.pointer("/properties/storageProfile/blobCSIDriver/enabled")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            )),
            _ => None,
        }
    }

    /// The System pool's nodes are the service's: `status` shows them (none while the cluster is
    /// stopped).
    fn is_pool(&self) -> bool {
        true
    }

    fn pool_nodes<'a>(
        &'a self,
        client: &'a ArmClient,
        id: &'a ResourceId,
    ) -> Act<'a, Option<ClusterNodes>> {
        Box::pin(async move {
            let cluster = client.get::<Value>(id).await?;
            Ok(cluster.map(|c| nodes_now(&c, system_count(&c).and_then(|n| n.as_i64()))))
        })
    }

    fn parking(&self) -> Option<&'static Parking> {
        Some(&CLUSTER_PARKING)
    }

    /// Only a cluster whose block parks by stopping it; others park their pools.
    fn parks(&self, resource: &ResourceState) -> bool {
        parks_by_stopping(&resource.attrs)
    }

    fn set_power<'a>(
        &'a self,
        client: &'a ArmClient,
        id: &'a ResourceId,
        _resource: &'a ResourceState,
        change: PowerChange,
    ) -> Act<'a, ()> {
        Box::pin(async move {
            let action = match change {
                PowerChange::Park => "stop",
                PowerChange::Unpark => "start",
            };
            // Stopping a stopped cluster (or starting a running one) changes nothing: safe to
            // repeat.
            client
                .post_action::<Value>(
                    id,
                    action,
                    &[],
                    None,
                    crate::azure::client::Idempotency::Idempotent,
                )
                .await
                .map(drop)
        })
    }

    fn power_in_body(&self, body: &Value) -> Option<PowerState> {
        text(body, "/properties/powerState/code")?;
        Some(if stopped(body) {
            PowerState::Deallocated
        } else {
            PowerState::Running
        })
    }
}

impl Driver for Pool {
    /// The clusters of the pools the plan writes to, unless the plan changes the cluster itself
    /// (its own driver's preflight reads it then): a stopped one is refused.
    fn preflight<'a>(&'a self, at: &'a Preflight<'a>, plan: &'a Plan) -> Act<'a, Vec<Diagnostic>> {
        Box::pin(async move {
            // Read by the cluster's own preflight, or not there yet.
            let changed_clusters: std::collections::BTreeSet<_> = plan
                .changes
                .iter()
                .filter(|c| {
                    c.kind == crate::model::ResourceKind::AksCluster
                        && (writes(c) || c.action == Action::Create)
                })
                .map(|c| c.address.clone())
                .collect();
            let clusters = plan
                .changes
                .iter()
                .filter(|c| c.kind == crate::model::ResourceKind::AksPool && writes(c))
                .filter_map(|c| {
                    let cluster = c.after.as_ref().or(c.before.as_ref())?.get("cluster")?;
                    cluster.as_str()?.parse::<crate::addr::Address>().ok()
                })
                .filter(|a| !changed_clusters.contains(a))
                .collect();
            check_stopped(at, plan, clusters).await
        })
    }

    fn body(&self, b: &Builder<'_>) -> Result<Option<Body>, BodyError> {
        let body =
            pool_body(b.attrs(), None).map_err(|(attribute, what)| b.invalid(attribute, what))?;
        Ok(Some(Body::AksPool(body)))
    }

    /// A pool's tags are its scale set's (`properties.tags`, sent so the nodes' bill carries
    /// the experiment's tags), not ARM's: the generic `tags` reading would see none.
    fn compared(&self) -> &'static [&'static str] {
        &["size", "count"]
    }

    fn observed(&self, name: &str, body: &Value, _want: Option<&Value>) -> Option<Value> {
        match name {
            "size" => text(body, "/properties/vmSize").map(Value::from),
            // Zero nodes is parked, not resized.
            "count" => body
                .pointer("/properties/count")
                .and_then(Value::as_i64)
                .filter(|n| *n > 0)
                .map(Value::from),
            _ => None,
        }
    }

    fn power_in_body(&self, body: &Value) -> Option<PowerState> {
        let count = body.pointer("/properties/count").and_then(Value::as_i64)?;
        Some(if count == 0 || stopped(body) {
            PowerState::Deallocated
        } else {
            PowerState::Running
        })
    }

    fn parking(&self) -> Option<&'static Parking> {
        Some(&PARKING)
    }

    /// AKS deletes a cluster's pools with it.
    fn deleted_with_parent(&self) -> bool {
        true
    }

    /// Not a pool of a cluster that parks by stopping: the cluster's stop deallocates its nodes,
    /// and a stopped cluster refuses a pool's PUT.
    fn parks(&self, resource: &ResourceState) -> bool {
        !parks_by_stopping(&resource.attrs)
    }

    /// A pool's nodes are the service's (a scale set AKS manages): `status` shows their count.
    fn is_pool(&self) -> bool {
        true
    }

    fn pool_nodes<'a>(
        &'a self,
        client: &'a ArmClient,
        id: &'a ResourceId,
    ) -> Act<'a, Option<ClusterNodes>> {
        Box::pin(async move {
            let pool = client.get::<Value>(id).await?;
            Ok(pool.map(|p| nodes_now(&p, p.pointer("/properties/count").and_then(Value::as_i64))))
        })
    }

    fn set_power<'a>(
        &'a self,
        client: &'a ArmClient,
        id: &'a ResourceId,
        resource: &'a ResourceState,
        change: PowerChange,
    ) -> Act<'a, ()> {
        Box::pin(async move {
            let count = match change {
                PowerChange::Park => Some(0),
                PowerChange::Unpark => None,
            };
            let body = pool_body(&resource.attrs, count).map_err(|(attribute, what)| {
                ArmError::usage(format!(
                    "{}: attribute `{attribute}` is {what}",
                    resource.address
                ))
            })?;
            client.put::<_, Value>(id, &body).await.map(drop)
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::openapi::{Specs, significant};

    fn pool_attrs() -> Attrs {
        serde_json::from_value(json!({
            "location": "eastus",
            "cluster": "aks.train.cluster",
            "size": "Standard_NC24ads_A100_v4",
            "count": 2,
            "taints": ["sku=gpu:NoSchedule"],
            "gpu_driver": "None",
            "tags": {"dsinfra-experiment": "exp"},
        }))
        .expect("attributes")
    }

    /// The body park sends (zero nodes) and unpark's (the count) are the manifest's pool with
    /// only the count changed, and both are valid agent pool PUTs in the official spec.
    #[test]
    fn park_sends_the_pools_own_body_with_zero_nodes_valid_for_the_spec() {
        let attrs = pool_attrs();
        let parked =
            serde_json::to_value(pool_body(&attrs, Some(0)).expect("builds")).expect("json");
        let running = serde_json::to_value(pool_body(&attrs, None).expect("builds")).expect("json");
        assert_eq!(parked["properties"]["count"], 0);
        assert_eq!(running["properties"]["count"], 2);
        let mut same = parked.clone();
        same["properties"]["count"] = json!(2);
        assert_eq!(same, running);
        assert_eq!(
            running["properties"]["gpuProfile"],
            json!({"driver": "None"})
        );
        assert_eq!(running["properties"]["mode"], "User");
        let specs = match Specs::load_default() {
            Ok(specs) => specs,
            Err(missing) => {
                let ci = std::env::var("CI").is_ok_and(|v| v == "true");
                assert!(!ci, "the spec check is required under CI: {missing}");
                eprintln!("SKIPPING the spec check of the pool body: {missing}");
                return;
            }
        };
        let path = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/agentPools/gpu";
        let op = specs
            .operation("PUT", path, Some("2025-10-01"))
            .expect("the spec has the agent pool PUT");
        for body in [parked, running] {
            let violations = op.validate_request(Some(&body));
            let strict = significant(&violations, true);
            assert!(strict.is_empty(), "{strict:?}\n{body:#}");
        }
    }

    #[test]
    fn a_pool_at_zero_nodes_or_stopped_is_parked_not_resized() {
        let pool = json!({"properties": {"count": 0, "vmSize": "Standard_NC24ads_A100_v4"}});
        assert_eq!(POOL.power_in_body(&pool), Some(PowerState::Deallocated));
        assert_eq!(POOL.observed("count", &pool, None), None);
        let running = json!({"properties": {"count": 3, "powerState": {"code": "Running"}}});
        assert_eq!(POOL.power_in_body(&running), Some(PowerState::Running));
        assert_eq!(POOL.observed("count", &running, None), Some(json!(3)));
        let stopped = json!({"properties": {"count": 3, "powerState": {"code": "Stopped"}}});
        assert_eq!(POOL.power_in_body(&stopped), Some(PowerState::Deallocated));
        let cluster = json!({"properties": {"powerState": {"code": "Stopped"},
            "agentPoolProfiles": [{"name": "system", "count": 1}]}});
        assert_eq!(
            CLUSTER.power_in_body(&cluster),
            Some(PowerState::Deallocated)
        );
        assert_eq!(
            CLUSTER.observed("system_count", &cluster, None),
            Some(json!(1))
        );
    }
}
