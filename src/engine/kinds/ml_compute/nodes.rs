//! How dsinfra reaches the nodes of an `aml_cluster` (an Azure Machine Learning AmlCompute).
//!
//! AmlCompute nodes are not resources in the subscription: the service creates and deletes them
//! as the cluster scales, names them by a node id, and gives each an SSH port on the cluster's
//! one public IP address (a load balancer in front of the nodes). The only place to learn them is
//! the compute's `listNodes` action (`POST .../computes/{name}/listNodes`, paged through
//! `nextLink`): node id, public IP, port, private IP and node state. So:
//!
//! * a node is `aml_cluster.c[i].node`, where `i` is its position among the listed nodes sorted
//!   by node id (index 0 is the head, as for a `cluster`); its [`NodeReach::name`] is the node id;
//! * every node is dialled directly at `publicIpAddress:port` ([`Endpoints::resolve_port`]: the
//!   emulator maps `ip:port` to the local sshd standing in for the node); the nodes reach each
//!   other on their private IPs (the nodefile and the mesh use them, as for a `cluster`);
//! * host keys are made by the service, so they are trusted on first use and pinned per node id
//!   on the compute's state ([`crate::state::ResourceState::nodes`]);
//! * a parked cluster (scaled to zero) has no nodes: its nodes are shown unreachable with why.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::addr::Address;
use crate::azure::{ArmClient, ArmError, Idempotency, ResourceId};
use crate::engine::reach::{DEFAULT_USER, Endpoints, NodeReach, Route};
use crate::state::{Drift, PowerState, ResourceState, ResourceStatus, State};

/// The block kind of Azure Machine Learning clusters.
pub const AML_CLUSTER: &str = "aml_cluster";

/// The part name of an AML node's address (`aml_cluster.c[2].node`).
pub const NODE_PART: &str = "node";

/// The part name of an AML cluster's compute resource (`aml_cluster.c.compute`).
pub const COMPUTE_PART: &str = "compute";

/// What `listNodes` says about one node.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmlNode {
    /// The node id (`tvmps_...`): stable for the node's life, new for every new node.
    pub node_id: String,
    /// The cluster's public IP address (shared by all its nodes); absent without public SSH.
    #[serde(default)]
    pub public_ip_address: Option<String>,
    /// The node's SSH port on the public IP address.
    #[serde(default, deserialize_with = "port")]
    pub port: Option<u16>,
    /// Its private IP address (what the other nodes dial).
    #[serde(default)]
    pub private_ip_address: Option<String>,
    /// `idle`, `running`, `preparing`, `unusable`, `leaving` or `preempted`.
    #[serde(default)]
    pub node_state: Option<String>,
}

/// The spec types `port` as a number (int32): accept `50000` and `50000.0`, and nothing that is
/// not a valid port.
fn port<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
    let value = Option::<Value>::deserialize(d)?;
    Ok(value
        .as_ref()
        .and_then(Value::as_f64)
        .filter(|p| p.fract() == 0.0 && (1.0..=65535.0).contains(p))
        .map(|p| {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // checked above
            let p = p as u16;
            p
        }))
}

/// One page of `listNodes` (`AmlComputeNodesInformation`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodesPage {
    #[serde(default)]
    nodes: Vec<AmlNode>,
    #[serde(default)]
    next_link: Option<String>,
}

impl AmlNode {
    /// Whether the node can take SSH sessions: `idle` (no job) or `running` (a job runs on it;
    /// SSH still works, as on Azure, where users log in to watch their jobs).
    pub fn is_usable(&self) -> bool {
        matches!(self.node_state.as_deref(), Some("idle" | "running"))
    }
}

/// The compute resource of an `aml_cluster` block (`aml_cluster.c` -> `aml_cluster.c.compute`).
pub fn compute_of(block: &Address) -> Address {
    Address::new(&block.kind, &block.name, None, COMPUTE_PART)
}

/// The AmlCompute clusters of the state that exist: created, and not found deleted by a refresh.
pub(crate) fn live_computes(state: &State) -> impl Iterator<Item = &ResourceState> {
    state.resources.iter().filter(|r| {
        r.kind == super::KIND
            && r.status == ResourceStatus::Created
            && r.drift != Some(Drift::Deleted)
    })
}

/// Whether the compute is parked (scaled to zero nodes by `dsinfra park`).
fn is_parked(compute: &ResourceState) -> bool {
    compute.power_state == Some(PowerState::Deallocated)
}

/// The nodes of the `aml_cluster` block `block` in node-id order, each with how to reach it.
///
/// Nodes that are not listed (parked, not read from ARM, not allocated yet) appear as
/// unreachable placeholders up to the cluster's `count`, so a block never looks empty and
/// every command says why its nodes cannot be reached.
pub(crate) fn block_nodes(state: &State, block: &Address, endpoints: &Endpoints) -> Vec<NodeReach> {
    let compute_address = compute_of(block);
    let Some(compute) = state
        .resource(&compute_address)
        .filter(|r| live_computes(state).any(|l| l.address == r.address))
    else {
        return Vec::new();
    };
    let user = compute
        .attrs
        .get("admin_username")
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_USER)
        .to_owned();
    let count = compute
        .attrs
        .get("count")
        .and_then(Value::as_u64)
        .and_then(|c| usize::try_from(c).ok())
        .unwrap_or(1)
        .max(1);
    let listed: Option<Vec<AmlNode>> = if is_parked(compute) {
        Some(Vec::new())
    } else {
        endpoints.aml_nodes(&compute_address).map(|nodes| {
            let mut nodes = nodes.to_vec();
            nodes.sort_by(|a, b| a.node_id.cmp(&b.node_id));
            nodes
        })
    };
    let node_address = |i: usize| {
        Address::new(
            &block.kind,
            &block.name,
            Some(u32::try_from(i).unwrap_or(u32::MAX)),
            NODE_PART,
        )
    };
    let mut nodes: Vec<NodeReach> = Vec::new();
    for (i, node) in listed.iter().flatten().enumerate() {
        nodes.push(NodeReach {
            vm: node_address(i),
            block: block.clone(),
            index: i,
            name: node.node_id.clone(),
            user: user.clone(),
            public_ip: node.public_ip_address.clone(),
            private_ip: node.private_ip_address.clone(),
            host_key: compute
                .nodes
                .get(&node.node_id)
                .and_then(|r| r.host_key.clone()),
            route: route_of(node, endpoints),
        });
    }
    let why = match &listed {
        _ if is_parked(compute) => {
            "is parked (scaled to zero nodes): `dsinfra unpark` creates new nodes".to_owned()
        }
        None => "belongs to an AmlCompute cluster whose nodes were not listed (ARM was not asked)"
            .to_owned(),
        Some(found) => format!(
            "is not allocated yet: the cluster lists {} of its {count} nodes",
            found.len()
        ),
    };
    for i in nodes.len()..count {
        nodes.push(NodeReach {
            vm: node_address(i),
            block: block.clone(),
            index: i,
            name: format!("{}-{i}", compute.name),
            user: user.clone(),
            public_ip: None,
            private_ip: None,
            host_key: None,
            route: Route::Unreachable { why: why.clone() },
        });
    }
    nodes
}

/// One line per listed node of the `aml_cluster` block `block`, in node order, for the apply's
/// report: address, node id, public address and port, private IP and node state
/// (`aml_cluster.c[0]  tvmps_1  20.1.2.3:50000  private 10.0.0.4  idle`). Empty when the nodes
/// were not listed.
pub fn describe(block: &Address, endpoints: &Endpoints) -> Vec<String> {
    let Some(listed) = endpoints.aml_nodes(&compute_of(block)) else {
        return Vec::new();
    };
    let mut listed = listed.to_vec();
    listed.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    let unknown = || "?".to_owned();
    listed
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let public = match (&n.public_ip_address, n.port) {
                (Some(ip), Some(port)) => format!("{ip}:{port}"),
                _ => "(no public SSH)".to_owned(),
            };
            format!(
                "{}[{i}]  {}  {public}  private {}  {}",
                block,
                n.node_id,
                n.private_ip_address.clone().unwrap_or_else(unknown),
                n.node_state.clone().unwrap_or_else(unknown)
            )
        })
        .collect()
}

/// The route to one listed node.
fn route_of(node: &AmlNode, endpoints: &Endpoints) -> Route {
    let unreachable = |why: String| Route::Unreachable { why };
    if !node.is_usable() {
        return unreachable(match node.node_state.as_deref() {
            Some("preparing") => {
                "is still preparing (Azure Machine Learning is setting it up): apply again once it is idle".to_owned()
            }
            Some("preempted") => {
                "was preempted (Azure took back a low-priority node); the cluster gets a new node in its place".to_owned()
            }
            Some("unusable") => {
                "is unusable (Azure Machine Learning reports it failed); the service replaces it".to_owned()
            }
            Some("leaving") => "is leaving the cluster (being deallocated)".to_owned(),
            Some(other) => format!("is in state {other:?}, not idle or running"),
            None => "has no state in listNodes".to_owned(),
        });
    }
    let (Some(ip), Some(port)) = (node.public_ip_address.as_deref(), node.port) else {
        return unreachable(
            "has no public SSH address in listNodes (the cluster was created with SSH access off, or without a public IP)"
                .to_owned(),
        );
    };
    match endpoints.resolve_port(ip, port) {
        Some((host, port)) => Route::Direct { host, port },
        None => unreachable(format!(
            "has no SSH endpoint in the emulator for its address {ip}:{port}"
        )),
    }
}

/// Lists the nodes of every AmlCompute cluster in the state that is not parked, keyed by the
/// compute's address, ready for [`Endpoints::with_aml_nodes`]. Each cluster's pages are read in
/// turn (`nextLink`); clusters are read at once, bounded by the client's gate. A compute ARM no
/// longer has is left out (its nodes then show as not listed).
pub async fn read_aml_nodes(
    client: &ArmClient,
    state: &State,
) -> Result<BTreeMap<Address, Vec<AmlNode>>, ArmError> {
    let wanted: Vec<(Address, String)> = live_computes(state)
        .filter(|r| !is_parked(r))
        .filter_map(|r| Some((r.address.clone(), r.id.clone()?)))
        .collect();
    let reads: Vec<_> = wanted
        .into_iter()
        .map(|(address, id)| async move {
            let nodes = list_nodes(client, &ResourceId::from_raw(&id)).await?;
            Ok::<_, ArmError>((address, nodes))
        })
        .collect();
    let mut found = BTreeMap::new();
    for result in futures::future::join_all(reads).await {
        let (address, nodes) = result?;
        if let Some(nodes) = nodes {
            found.insert(address, nodes);
        }
    }
    Ok(found)
}

/// Every node `listNodes` gives for one compute, following `nextLink`; `None` when ARM answers
/// that the compute does not exist.
pub(crate) async fn list_nodes(
    client: &ArmClient,
    compute: &ResourceId,
) -> Result<Option<Vec<AmlNode>>, ArmError> {
    // listNodes only reads: repeating it is safe, so it is retried like a GET.
    let first = client
        .post_action::<Value>(compute, "listNodes", &[], None, Idempotency::Idempotent)
        .await;
    let first = match first {
        Ok(page) => page.unwrap_or_default(),
        Err(e) if e.is_not_found() && !e.is_resource_group_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut page: NodesPage = parse_page(first)?;
    let mut nodes = std::mem::take(&mut page.nodes);
    while let Some(next) = page.next_link.take().filter(|l| !l.is_empty()) {
        // The continuation is a GET of the link, as for every pageable ARM operation.
        let response = client.poll_get(&next).await?;
        page = response.json()?;
        nodes.append(&mut page.nodes);
    }
    Ok(Some(nodes))
}

/// A page from a body that may be empty (`null`: no nodes).
fn parse_page(body: Value) -> Result<NodesPage, ArmError> {
    if body.is_null() {
        return Ok(NodesPage {
            nodes: Vec::new(),
            next_link: None,
        });
    }
    serde_json::from_value(body).map_err(|e| {
        ArmError::usage(format!(
            "listNodes answered a body dsinfra cannot read: {e}"
        ))
    })
}

#[cfg(test)]
mod tests;
