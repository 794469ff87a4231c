//! Waiting for an AmlCompute cluster to reach its node count.
//!
//! ARM finishes a compute's PUT or scale PATCH when the *cluster* is provisioned, not when its
//! *nodes* are: allocation goes on afterwards (`allocationState: Resizing`, nodes `preparing`).
//! Steps need usable nodes, and park must know the nodes (and their local disks) are gone, so
//! apply, park and unpark poll the compute until it is `Steady` at the wanted count. What would
//! make the wait endless fails it instead, naming the cluster: ARM's `errors` on the compute
//! (quota, capacity, a bad subnet), nodes `unusable` or `preempted` once allocation settled, a
//! steady cluster at another count, or the bound (about 45 minutes at Azure's pace).

use std::time::{Duration, Instant};

use crate::addr::Address;
use crate::azure::types::ml::{ComputeResource, NodeStateCounts, ScaleSettings};
use crate::azure::{ArmClient, ArmError, ResourceId};

/// How long a cluster may take to reach its count, at Azure's pace (scaled like the client's
/// other waits against an emulator). AmlCompute allocations of large GPU sizes take 10 to 20
/// minutes; this leaves room for a slow region without waiting forever.
pub const NODE_WAIT: Duration = Duration::from_mins(45);

/// The pause between two reads of the compute, at Azure's pace.
pub const NODE_POLL: Duration = Duration::from_secs(15);

/// Why a cluster did not reach its count.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    /// Reading the compute failed.
    #[error("{cluster}: {source}")]
    Arm {
        /// The cluster.
        cluster: Address,
        /// ARM's error.
        #[source]
        source: Box<ArmError>,
    },
    /// The compute is gone.
    #[error("{cluster}: the compute no longer exists")]
    Gone {
        /// The cluster.
        cluster: Address,
    },
    /// The compute reports errors, or nodes that will never be usable.
    #[error("{cluster}: {message}")]
    Failed {
        /// The cluster.
        cluster: Address,
        /// What Azure said, and what to do.
        message: String,
    },
    /// The bound passed.
    #[error(
        "{cluster}: {usable} of {wanted} node(s) usable after {waited:?} ({counts}); the cluster is left as it is",
        waited = NODE_WAIT
    )]
    TimedOut {
        /// The cluster.
        cluster: Address,
        /// Usable nodes at the last read.
        usable: i32,
        /// The count waited for.
        wanted: i32,
        /// The node states at the last read.
        counts: String,
    },
}

/// The node counts a read of `compute` shows, and whether allocation has settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeReading {
    /// Nodes per state.
    pub counts: NodeStateCounts,
    /// `allocationState: Steady`.
    pub steady: bool,
}

impl NodeReading {
    /// What a compute's GET says.
    pub fn of(compute: &ComputeResource) -> Self {
        let props = compute
            .properties
            .as_ref()
            .and_then(|p| p.properties.as_ref());
        Self {
            counts: props.and_then(|p| p.node_state_counts).unwrap_or_default(),
            steady: props
                .and_then(|p| p.allocation_state.as_deref())
                .is_some_and(|s| s.eq_ignore_ascii_case("Steady")),
        }
    }
}

/// `2 idle, 1 running, 1 preparing`: the non-zero states, for progress and messages.
pub fn describe_counts(counts: &NodeStateCounts) -> String {
    let parts: Vec<String> = [
        (counts.idle_node_count, "idle"),
        (counts.running_node_count, "running"),
        (counts.preparing_node_count, "preparing"),
        (counts.unusable_node_count, "unusable"),
        (counts.preempted_node_count, "preempted"),
        (counts.leaving_node_count, "leaving"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, state)| format!("{n} {state}"))
    .collect();
    if parts.is_empty() {
        "no nodes".to_owned()
    } else {
        parts.join(", ")
    }
}

/// What one read of the compute means for a wait for `wanted` usable nodes: `Ok(true)` done,
/// `Ok(false)` keep waiting, `Err` a failure that waiting will not cure. Pure, so each rule is
/// unit-tested.
pub fn judge(
    cluster: &Address,
    compute: &ComputeResource,
    wanted: i32,
) -> Result<bool, ScaleError> {
    let failed = |message: String| ScaleError::Failed {
        cluster: cluster.clone(),
        message,
    };
    let outer = compute.properties.as_ref();
    let props = outer.and_then(|p| p.properties.as_ref());
    let errors: Vec<String> = props
        .and_then(|p| p.errors.clone())
        .into_iter()
        .chain(outer.and_then(|p| p.provisioning_errors.clone()))
        .flatten()
        .map(|e| e.to_string())
        .collect();
    if !errors.is_empty() {
        return Err(failed(format!(
            "Azure reports: {}; fix the cause (quota, capacity, subnet) and apply again",
            errors.join("; ")
        )));
    }
    if outer
        .and_then(|p| p.provisioning_state.as_deref())
        .is_some_and(|s| s.eq_ignore_ascii_case("Failed"))
    {
        return Err(failed(
            "the compute's provisioningState is Failed; delete it (destroy, or replace it) and apply again"
                .to_owned(),
        ));
    }
    let reading = NodeReading::of(compute);
    let counts = reading.counts;
    if !reading.steady {
        return Ok(false);
    }
    let lost = counts.unusable_node_count + counts.preempted_node_count;
    if lost > 0 {
        return Err(failed(format!(
            "{lost} node(s) unusable or preempted ({}): Azure will not make them usable; \
             park and unpark the cluster to get new nodes",
            describe_counts(&counts)
        )));
    }
    if counts.usable() == wanted && counts.total() == wanted {
        return Ok(true);
    }
    // Steady at another count: Azure settled without reaching it (a scale it could not do).
    let target = props.and_then(|p| p.target_node_count);
    if target.is_some_and(|t| t != wanted) {
        return Err(failed(format!(
            "Azure settled at {} node(s) ({}), not {wanted}",
            counts.total(),
            describe_counts(&counts)
        )));
    }
    Ok(false)
}

/// Waits until the compute at `id` is steady with exactly `wanted` usable nodes (0 for a parked
/// cluster), calling `progress` with the node states after every read. The pace follows the
/// client's time scale (an emulator's latency scale), as its operation polls do.
pub async fn wait_for_nodes(
    client: &ArmClient,
    id: &ResourceId,
    cluster: &Address,
    wanted: i32,
    progress: &(dyn Fn(&NodeStateCounts) + Send + Sync),
) -> Result<NodeStateCounts, ScaleError> {
    let scale = client.time_scale();
    let interval = NODE_POLL.mul_f64(scale).max(Duration::from_millis(20));
    let limit = NODE_WAIT.mul_f64(scale).max(Duration::from_secs(10));
    let started = Instant::now();
    loop {
        let compute = client
            .get_ml_compute(id)
            .await
            .map_err(|source| ScaleError::Arm {
                cluster: cluster.clone(),
                source: Box::new(source),
            })?
            .ok_or_else(|| ScaleError::Gone {
                cluster: cluster.clone(),
            })?;
        let counts = NodeReading::of(&compute).counts;
        progress(&counts);
        if judge(cluster, &compute, wanted)? {
            return Ok(counts);
        }
        if started.elapsed() >= limit {
            return Err(ScaleError::TimedOut {
                cluster: cluster.clone(),
                usable: counts.usable(),
                wanted,
                counts: describe_counts(&counts),
            });
        }
        tokio::time::sleep(interval).await;
    }
}

/// PATCHes the compute's scale settings to a fixed `count` nodes, then waits for them
/// ([`wait_for_nodes`]): how park (0) and unpark (the manifest's count) resize a cluster.
pub async fn scale_to(
    client: &ArmClient,
    id: &ResourceId,
    cluster: &Address,
    count: i32,
    idle_seconds: Option<i64>,
    progress: &(dyn Fn(&NodeStateCounts) + Send + Sync),
) -> Result<NodeStateCounts, ScaleError> {
    let patch = crate::azure::types::ml::ClusterUpdateParameters::scale(ScaleSettings::fixed(
        count,
        idle_seconds,
    ));
    client
        .patch_ml_compute(id, &patch)
        .await
        .map_err(|source| ScaleError::Arm {
            cluster: cluster.clone(),
            source: Box::new(source),
        })?;
    wait_for_nodes(client, id, cluster, count, progress).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compute(props: &serde_json::Value) -> ComputeResource {
        serde_json::from_value(json!({
            "properties": {"computeType": "AmlCompute", "provisioningState": "Succeeded", "properties": props}
        }))
        .expect("reads")
    }

    fn cluster() -> Address {
        "aml_cluster.beeond.compute".parse().expect("valid")
    }

    #[test]
    fn a_cluster_is_ready_only_when_steady_with_every_node_usable() {
        let resizing = compute(&json!({
            "allocationState": "Resizing", "targetNodeCount": 4,
            "nodeStateCounts": {"idleNodeCount": 4}
        }));
        assert!(!judge(&cluster(), &resizing, 4).expect("no failure"));
        let preparing = compute(&json!({
            "allocationState": "Steady", "targetNodeCount": 4,
            "nodeStateCounts": {"idleNodeCount": 3, "preparingNodeCount": 1}
        }));
        assert!(!judge(&cluster(), &preparing, 4).expect("no failure"));
        let ready = compute(&json!({
            "allocationState": "Steady", "targetNodeCount": 4,
            "nodeStateCounts": {"idleNodeCount": 3, "runningNodeCount": 1}
        }));
        assert!(judge(&cluster(), &ready, 4).expect("no failure"));
        let parked = compute(&json!({"allocationState": "Steady", "targetNodeCount": 0}));
        assert!(judge(&cluster(), &parked, 0).expect("no failure"));
        let leaving = compute(&json!({
            "allocationState": "Steady", "targetNodeCount": 0,
            "nodeStateCounts": {"leavingNodeCount": 2}
        }));
        assert!(!judge(&cluster(), &leaving, 0).expect("no failure"));
    }

    #[test]
    fn azure_errors_and_lost_nodes_fail_the_wait_naming_the_cluster() {
        let quota = compute(&json!({
            "allocationState": "Resizing",
            "errors": [{"error": {"code": "QuotaExceeded", "message": "Not enough cores"}}]
        }));
        let err = judge(&cluster(), &quota, 4).expect_err("fails");
        assert_eq!(
            err.to_string(),
            "aml_cluster.beeond.compute: Azure reports: QuotaExceeded: Not enough cores; fix the cause (quota, capacity, subnet) and apply again"
        );
        let unusable = compute(&json!({
            "allocationState": "Steady", "targetNodeCount": 4,
            "nodeStateCounts": {"idleNodeCount": 3, "unusableNodeCount": 1}
        }));
        let err = judge(&cluster(), &unusable, 4).expect_err("fails");
        assert!(
            err.to_string()
                .contains("1 node(s) unusable or preempted (3 idle, 1 unusable)"),
            "{err}"
        );
        let short = compute(&json!({
            "allocationState": "Steady", "targetNodeCount": 2,
            "nodeStateCounts": {"idleNodeCount": 2}
        }));
        assert!(
            judge(&cluster(), &short, 4)
                .expect_err("fails")
                .to_string()
                .contains("Azure settled at 2 node(s)")
        );
    }

    #[test]
    fn counts_read_as_words() {
        let counts = NodeStateCounts {
            idle_node_count: 2,
            preparing_node_count: 2,
            ..NodeStateCounts::default()
        };
        assert_eq!(describe_counts(&counts), "2 idle, 2 preparing");
        assert_eq!(describe_counts(&NodeStateCounts::default()), "no nodes");
    }
}
