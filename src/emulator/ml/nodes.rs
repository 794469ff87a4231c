//! The nodes of an AmlCompute cluster and how they come and go over the latency model.
//!
//! A node is allocated a while after the cluster is asked to grow, then prepares (the service
//! installs its image and agents) and becomes idle, the state in which jobs and SSH reach it.
//! Shrinking marks nodes leaving; they disappear a little later. Every moment is stored as a
//! deadline, so a node's state is a pure function of the clock, like an operation's.
//!
//! As on Azure, node ids are never reused: a cluster scaled to zero and back gets new nodes
//! with new ids, new local disks, and no memory of the old ones. Every node of a cluster is
//! reached at the cluster's one public address on a port of its own (`50000 + slot`, the lowest
//! slot no present node holds), and has a private address in `10.0.0.0/8`.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::emulator::config::EmulatorConfig;
pub(crate) use crate::emulator::store::Node;

/// The port of slot 0: AmlCompute's first node-level SSH port.
pub(crate) const FIRST_PORT: u16 = 50_000;

/// A node's `nodeState`, of those the emulator models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeState {
    Preparing,
    Idle,
    Leaving,
    Preempted,
}

impl NodeState {
    /// The spelling of `AmlComputeNodeInformation.nodeState`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Preparing => "preparing",
            Self::Idle => "idle",
            Self::Leaving => "leaving",
            Self::Preempted => "preempted",
        }
    }
}

impl Node {
    /// The node's public SSH port.
    pub fn port(&self) -> u16 {
        FIRST_PORT + self.slot
    }

    /// Whether the node is listed at `now`: allocated and not yet gone.
    pub fn listed(&self, now: DateTime<Utc>) -> bool {
        self.allocated_at <= now && self.gone_at.is_none_or(|gone| now < gone)
    }

    /// Whether the node still counts toward the cluster (not leaving, not gone).
    pub fn staying(&self) -> bool {
        self.leaving_at.is_none()
    }

    /// The node's state at `now` (meaningful while it is listed).
    pub fn state(&self, now: DateTime<Utc>) -> NodeState {
        if self.preempted_at.is_some_and(|at| at <= now) {
            NodeState::Preempted
        } else if self.leaving_at.is_some_and(|at| at <= now) {
            NodeState::Leaving
        } else if now < self.ready_at {
            NodeState::Preparing
        } else {
            NodeState::Idle
        }
    }

    /// Whether SSH reaches the node at `now`: listed and idle.
    pub fn usable(&self, now: DateTime<Utc>) -> bool {
        self.listed(now) && self.state(now) == NodeState::Idle
    }
}

/// Real-world durations of a node's life, before the latency scale.
struct Timing {
    allocate: Duration,
    prepare: Duration,
    leave: Duration,
}

/// About a minute to allocate VMs; preparing takes longer on the large GPU sizes, whose images
/// carry drivers and InfiniBand stacks; leaving is quick.
fn timing(vm_size: &str) -> Timing {
    let heavy = vm_size.to_ascii_lowercase().starts_with("standard_nd");
    Timing {
        allocate: Duration::from_mins(1),
        prepare: Duration::from_secs(if heavy { 240 } else { 120 }),
        leave: Duration::from_secs(30),
    }
}

fn after(now: DateTime<Utc>, config: &EmulatorConfig, real: Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(config.scaled(real))
        .unwrap_or_else(|_| chrono::Duration::zero())
}

/// The private address of a node: one `/16`-ish range per cluster (from its creation number),
/// one address per slot.
fn private_ip(cluster_seq: u64, slot: u16) -> String {
    format!("10.{}.{}.{}", cluster_seq % 256, slot / 250, 4 + slot % 250)
}

/// What a resize needs to know about the cluster.
pub(crate) struct Cluster<'a> {
    /// The cluster resource's creation number (its private range).
    pub seq: u64,
    pub vm_size: &'a str,
}

/// Resizes `nodes` to `target` staying nodes at `now`: surplus nodes (the newest first) start
/// leaving, missing ones are allocated in the lowest free slots with fresh ids from `new_id`.
/// Nodes gone before `now` are dropped.
pub(crate) fn resize(
    nodes: &mut Vec<Node>,
    target: usize,
    cluster: &Cluster<'_>,
    config: &EmulatorConfig,
    now: DateTime<Utc>,
    mut new_id: impl FnMut(usize) -> String,
) {
    nodes.retain(|n| n.gone_at.is_none_or(|gone| now < gone));
    let timing = timing(cluster.vm_size);
    let staying = nodes.iter().filter(|n| n.staying()).count();
    if staying > target {
        let mut surplus: Vec<&mut Node> = nodes.iter_mut().filter(|n| n.staying()).collect();
        surplus.sort_by_key(|n| std::cmp::Reverse(n.slot));
        for node in surplus.into_iter().take(staying - target) {
            leave(node, config, now, timing.leave);
        }
        return;
    }
    let allocated_at = after(now, config, timing.allocate);
    let ready_at = after(allocated_at, config, timing.prepare);
    for n in 0..target - staying {
        let slot = (0..=u16::MAX - FIRST_PORT)
            .find(|s| nodes.iter().all(|node| node.slot != *s))
            .unwrap_or_default();
        nodes.push(Node {
            id: new_id(n + 1),
            slot,
            private_ip: private_ip(cluster.seq, slot),
            allocated_at,
            ready_at,
            leaving_at: None,
            gone_at: None,
            preempted_at: None,
        });
    }
}

/// Azure takes the node `id` back at `now` (a low-priority node preempted): it is listed as
/// `preempted` for a short while, then gone; it no longer counts toward the cluster, so the next
/// [`resize`] allocates one in its place, as AmlCompute does. False when no such usable node.
pub(crate) fn preempt(
    nodes: &mut [Node],
    id: &str,
    vm_size: &str,
    config: &EmulatorConfig,
    now: DateTime<Utc>,
) -> bool {
    let Some(node) = nodes
        .iter_mut()
        .find(|n| n.id == id && n.staying() && n.listed(now))
    else {
        return false;
    };
    node.preempted_at = Some(now);
    node.leaving_at = Some(now);
    node.gone_at = Some(after(now, config, timing(vm_size).leave));
    true
}

/// Every node starts leaving (the cluster is being deleted); they are gone by `gone`.
pub(crate) fn leave_all(nodes: &mut [Node], now: DateTime<Utc>, gone: DateTime<Utc>) {
    for node in nodes.iter_mut().filter(|n| n.staying()) {
        node.leaving_at = Some(now);
        node.gone_at = Some(gone.min(node.gone_at.unwrap_or(gone)));
    }
}

fn leave(node: &mut Node, config: &EmulatorConfig, now: DateTime<Utc>, real: Duration) {
    node.leaving_at = Some(now);
    // A node still being allocated simply never appears.
    node.gone_at = Some(if node.allocated_at > now {
        now
    } else {
        after(now, config, real)
    });
}

/// The node id AML shows: `tvm-{number}_{n}-{time}`, the number unique in the cloud so that
/// ids never repeat and sort in creation order.
pub(crate) fn node_id(number: u64, n: usize, now: DateTime<Utc>) -> String {
    format!("tvm-{number:010}_{n}-{}", now.format("%Y%m%dt%H%M%Sz"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> EmulatorConfig {
        EmulatorConfig {
            latency_scale: 0.01,
            ..EmulatorConfig::default()
        }
    }

    /// Issue 34: a preempted low-priority node is listed as `preempted`, stops counting toward
    /// the cluster (the next resize allocates one in its place), then is gone.
    #[test]
    fn a_preempted_node_is_listed_as_such_then_replaced() {
        let config = config();
        let t0 = Utc::now();
        let cluster = Cluster {
            seq: 3,
            vm_size: "Standard_D2_v2",
        };
        let mut counter = 0;
        let mut ids = |_| {
            counter += 1;
            node_id(counter, 1, t0)
        };
        let mut nodes = Vec::new();
        resize(&mut nodes, 2, &cluster, &config, t0, &mut ids);
        let ready = t0 + chrono::Duration::seconds(5);
        let id = nodes[1].id.clone();
        assert!(!preempt(
            &mut nodes,
            "nope",
            cluster.vm_size,
            &config,
            ready
        ));
        assert!(preempt(&mut nodes, &id, cluster.vm_size, &config, ready));
        assert_eq!(nodes[1].state(ready), NodeState::Preempted);
        assert_eq!(nodes[1].state(ready).as_str(), "preempted");
        assert!(nodes[1].listed(ready));
        resize(&mut nodes, 2, &cluster, &config, ready, &mut ids);
        assert_eq!(nodes.iter().filter(|n| n.staying()).count(), 2);
        let later = ready + chrono::Duration::seconds(5);
        assert!(!nodes[1].listed(later), "gone");
        assert!(nodes[2].usable(later), "its replacement");
        assert_ne!(nodes[2].id, id);
    }

    #[test]
    fn nodes_prepare_then_idle_and_leave_with_new_ids_on_regrowth() {
        let config = config();
        let t0 = Utc::now();
        let cluster = Cluster {
            seq: 7,
            vm_size: "Standard_D2_v2",
        };
        let mut counter = 0;
        let mut ids = |_| {
            counter += 1;
            node_id(counter, 1, t0)
        };
        let mut nodes = Vec::new();
        resize(&mut nodes, 2, &cluster, &config, t0, &mut ids);
        assert_eq!(nodes.len(), 2);
        assert_eq!(
            nodes.iter().map(Node::port).collect::<Vec<_>>(),
            [50_000, 50_001]
        );
        assert_eq!(nodes[1].private_ip, "10.7.0.5");
        // Not allocated yet, then preparing, then idle (0.6 s and 1.2 s at scale 0.01).
        assert!(!nodes[0].listed(t0));
        let allocated = t0 + chrono::Duration::milliseconds(700);
        assert!(nodes[0].listed(allocated));
        assert_eq!(nodes[0].state(allocated), NodeState::Preparing);
        let ready = t0 + chrono::Duration::milliseconds(1_900);
        assert!(nodes[0].usable(ready));
        // Down to one: the higher slot leaves, then is gone.
        resize(&mut nodes, 1, &cluster, &config, ready, &mut ids);
        assert_eq!(nodes[1].state(ready), NodeState::Leaving);
        let later = ready + chrono::Duration::seconds(1);
        assert!(!nodes[1].listed(later));
        // Back to two: the gone node is dropped, a new id takes the free slot.
        let old: Vec<String> = nodes.iter().map(|n| n.id.clone()).collect();
        resize(&mut nodes, 2, &cluster, &config, later, &mut ids);
        assert_eq!(nodes.len(), 2);
        assert!(!old.contains(&nodes[1].id));
        assert_eq!(nodes[1].slot, 1);
    }

    #[test]
    fn node_ids_sort_in_creation_order() {
        let now = Utc::now();
        assert!(node_id(9, 1, now) < node_id(10, 1, now));
        assert!(node_id(9, 1, now).starts_with("tvm-0000000009_1-"));
    }
}
