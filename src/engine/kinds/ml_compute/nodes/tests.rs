use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::*;
use crate::engine::reach::{SshEndpoint, blocks};
use crate::state::NodeRecord;

fn compute(power: Option<PowerState>) -> ResourceState {
    ResourceState {
        address: "aml_cluster.scratch.compute".parse().expect("valid"),
        kind: super::super::KIND,
        name: "scratch-1a2b".into(),
        parent: Some("exp-ws".into()),
        resource_group: "rg".into(),
        id: Some(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.MachineLearningServices/workspaces/exp-ws/computes/scratch-1a2b"
                .into(),
        ),
        attrs: serde_json::from_value(json!({"admin_username": "alice", "count": 3}))
            .expect("attrs"),
        depends_on: BTreeSet::new(),
        status: ResourceStatus::Created,
        power_state: power,
        secrets: BTreeMap::new(),
        host_key: None,
        boots: 0,
        steps: BTreeMap::new(),
        mesh_key: None,
        nodes: BTreeMap::new(),
        drift: None,
    }
}

fn node(id: &str, port: u16, private: &str, state: &str) -> AmlNode {
    serde_json::from_value(json!({
        "nodeId": id,
        "publicIpAddress": "20.1.2.3",
        "port": port,
        "privateIpAddress": private,
        "nodeState": state,
        "runId": null,
    }))
    .expect("a listNodes entry")
}

fn block() -> Address {
    Address::block(AML_CLUSTER, "scratch")
}

fn listed(nodes: Vec<AmlNode>) -> BTreeMap<Address, Vec<AmlNode>> {
    BTreeMap::from([(compute_of(&block()), nodes)])
}

fn state_with(compute: ResourceState) -> State {
    let mut state = State::new("exp");
    state.upsert(compute);
    state
}

/// Issue 17: every listed node is dialled at the public IP and its own port, in node-id order
/// (index 0 is the head), as the user the compute was made with; the pinned key of a node id
/// is found on the compute.
#[test]
fn aml_nodes_are_dialled_at_their_port_in_node_id_order() {
    let mut c = compute(Some(PowerState::Running));
    c.nodes.insert(
        "tvmps_b".into(),
        NodeRecord {
            host_key: Some("ssh-ed25519 AAAAB node-b".into()),
            steps: BTreeMap::new(),
            mesh_key: None,
        },
    );
    let state = state_with(c);
    assert_eq!(blocks(&state), [block()]);
    let endpoints = Endpoints::direct().with_aml_nodes(listed(vec![
        node("tvmps_c", 50002, "10.0.0.6", "running"),
        node("tvmps_a", 50000, "10.0.0.4", "idle"),
        node("tvmps_b", 50001, "10.0.0.5", "idle"),
    ]));
    let nodes = block_nodes(&state, &block(), &endpoints);
    let seen: Vec<(String, &str, &Route)> = nodes
        .iter()
        .map(|n| (n.vm.to_string(), n.name.as_str(), &n.route))
        .collect();
    let direct = |port| Route::Direct {
        host: "20.1.2.3".into(),
        port,
    };
    assert_eq!(
        seen,
        [
            (
                "aml_cluster.scratch[0].node".to_owned(),
                "tvmps_a",
                &direct(50000)
            ),
            (
                "aml_cluster.scratch[1].node".to_owned(),
                "tvmps_b",
                &direct(50001)
            ),
            (
                "aml_cluster.scratch[2].node".to_owned(),
                "tvmps_c",
                &direct(50002)
            ),
        ]
    );
    assert!(nodes[0].is_head());
    assert_eq!(nodes[1].user, "alice");
    assert_eq!(nodes[1].private_ip.as_deref(), Some("10.0.0.5"));
    assert_eq!(
        nodes[1].host_key.as_deref(),
        Some("ssh-ed25519 AAAAB node-b")
    );
    assert_eq!(
        nodes[0].host_key, None,
        "a node not reached yet is trusted on first use"
    );
    assert_eq!(nodes[2].node().to_string(), "aml_cluster.scratch[2]");
    assert_eq!(
        nodes[2].aml_compute().map(|a| a.to_string()).as_deref(),
        Some("aml_cluster.scratch.compute")
    );
}

/// Against the emulator a node is found by `ip:port`; its private IP (what the other nodes
/// dial) has its own entry without a port.
#[test]
fn emulated_aml_nodes_resolve_by_address_and_port() {
    let state = state_with(compute(None));
    let entry = |ip: &str, port: Option<u16>, endpoint: &str| SshEndpoint {
        ip_address: ip.into(),
        endpoint: endpoint.into(),
        public_ip_id: None,
        port,
    };
    let endpoints = Endpoints::from_emulator(&[
        entry("20.1.2.3", Some(50000), "127.0.0.1:2201"),
        entry("10.0.0.4", None, "127.0.0.1:2201"),
        entry("20.1.2.3", Some(50001), "127.0.0.1:2202"),
    ])
    .with_aml_nodes(listed(vec![
        node("tvmps_a", 50000, "10.0.0.4", "idle"),
        node("tvmps_b", 50001, "10.0.0.5", "idle"),
        node("tvmps_c", 50002, "10.0.0.6", "idle"),
    ]));
    let nodes = block_nodes(&state, &block(), &endpoints);
    assert_eq!(
        nodes[1].route,
        Route::Direct {
            host: "127.0.0.1".into(),
            port: 2202
        }
    );
    assert_eq!(
        nodes[2].route,
        Route::Unreachable {
            why: "has no SSH endpoint in the emulator for its address 20.1.2.3:50002".into()
        }
    );
    assert_eq!(
        endpoints.resolve("10.0.0.4"),
        Some(("127.0.0.1".into(), 2201))
    );
}

/// A parked cluster has no nodes: each of its `count` nodes says so and what to do.
#[test]
fn a_parked_cluster_has_unreachable_nodes_that_say_unpark() {
    let state = state_with(compute(Some(PowerState::Deallocated)));
    let nodes = block_nodes(&state, &block(), &Endpoints::direct());
    assert_eq!(nodes.len(), 3);
    for n in &nodes {
        assert_eq!(
            n.route,
            Route::Unreachable {
                why: "is parked (scaled to zero nodes): `dsinfra unpark` creates new nodes".into()
            }
        );
    }
    let err = nodes[0]
        .node_spec(None, std::sync::Arc::new(|_, _| {}))
        .expect_err("parked");
    assert_eq!(
        err.to_string(),
        "node aml_cluster.scratch[0] cannot be reached: it is parked (scaled to zero nodes): `dsinfra unpark` creates new nodes"
    );
}

/// Nodes not listed, not allocated yet, or not usable are unreachable with the reason.
#[test]
fn unlisted_missing_and_unusable_nodes_say_why() {
    let state = state_with(compute(None));
    let nodes = block_nodes(&state, &block(), &Endpoints::direct());
    assert_eq!(nodes.len(), 3);
    assert_eq!(
        nodes[0].route,
        Route::Unreachable {
            why: "belongs to an AmlCompute cluster whose nodes were not listed (ARM was not asked)"
                .into()
        }
    );
    let endpoints = Endpoints::direct().with_aml_nodes(listed(vec![
        node("tvmps_a", 50000, "10.0.0.4", "preparing"),
        node("tvmps_b", 50001, "10.0.0.5", "idle"),
    ]));
    let nodes = block_nodes(&state, &block(), &endpoints);
    let why = |n: &NodeReach| match &n.route {
        Route::Unreachable { why } => why.clone(),
        other => format!("reachable: {other:?}"),
    };
    assert!(
        why(&nodes[0]).starts_with("is still preparing"),
        "{}",
        why(&nodes[0])
    );
    assert!(matches!(nodes[1].route, Route::Direct { .. }));
    assert_eq!(
        why(&nodes[2]),
        "is not allocated yet: the cluster lists 2 of its 3 nodes"
    );
}

/// listNodes pages parse as the spec's `AmlComputeNodesInformation` (port a number, nullable
/// addresses); an empty answer is no nodes.
#[test]
fn list_nodes_pages_parse_as_the_spec_describes_them() {
    let page = parse_page(json!({
        "nodes": [
            {"nodeId": "tvmps_a", "privateIpAddress": "10.0.0.4", "publicIpAddress": null,
             "port": 50000.0, "nodeState": "idle", "runId": null}
        ],
        "nextLink": "https://management.azure.com/next"
    }))
    .expect("parses");
    assert_eq!(page.nodes[0].port, Some(50000));
    assert_eq!(page.nodes[0].public_ip_address, None);
    assert_eq!(
        page.next_link.as_deref(),
        Some("https://management.azure.com/next")
    );
    assert!(parse_page(Value::Null).expect("empty").nodes.is_empty());
    let bad = parse_page(json!({"nodes": [{"port": 1}]})).expect_err("no node id");
    assert!(
        bad.to_string()
            .contains("listNodes answered a body dsinfra cannot read"),
        "{bad}"
    );
}
