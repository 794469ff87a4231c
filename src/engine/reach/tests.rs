use std::sync::{Arc, Mutex};

use serde_json::json;

use super::*;
use crate::ssh::HostKeyPair;
use crate::state::ResourceState;

fn resource(address: &str, kind: ResourceKind, name: &str, attrs: Value) -> ResourceState {
    ResourceState {
        address: address.parse().expect("valid address"),
        kind,
        name: name.to_owned(),
        parent: None,
        resource_group: "rg".into(),
        id: Some(format!("/subscriptions/s/resourceGroups/rg/x/{name}")),
        attrs: serde_json::from_value(attrs).expect("attrs are an object"),
        depends_on: BTreeSet::new(),
        status: ResourceStatus::Created,
        power_state: (kind == ResourceKind::VirtualMachine).then_some(PowerState::Running),
        secrets: BTreeMap::new(),
        host_key: None,
        boots: 0,
        steps: BTreeMap::new(),
        mesh_key: None,
        nodes: std::collections::BTreeMap::new(),
        drift: None,
    }
}

/// A node's VM, NIC and (when `public`) public IP.
fn node(state: &mut State, block: &str, index: Option<u32>, public: bool) {
    let (kind, label) = block.split_once('.').expect("kind.label");
    let at = |part: &str| Address::new(kind, label, index, part).to_string();
    let name = match index {
        Some(i) => format!("exp-{label}-{i}"),
        None => format!("exp-{label}"),
    };
    state.upsert(resource(
        &at("vm"),
        ResourceKind::VirtualMachine,
        &name,
        json!({"admin_username": "alice"}),
    ));
    state.upsert(resource(
        &at("nic"),
        ResourceKind::NetworkInterface,
        &format!("{name}-nic"),
        json!({}),
    ));
    if public {
        state.upsert(resource(
            &at("public_ip"),
            ResourceKind::PublicIp,
            &format!("{name}-pip"),
            json!({}),
        ));
    }
}

/// A state with `vm.gpu` (public) and `cluster.train` of three nodes (head public).
fn sample() -> State {
    let mut state = State::new("exp");
    node(&mut state, "vm.gpu", None, true);
    for i in 0..3 {
        node(&mut state, "cluster.train", Some(i), i == 0);
    }
    state
}

fn ips() -> BTreeMap<Address, Attrs> {
    let entry = |address: &str, attr: &str, ip: &str| {
        (
            address.parse().expect("valid address"),
            Attrs::from([(attr.to_owned(), json!(ip))]),
        )
    };
    BTreeMap::from([
        entry("vm.gpu.public_ip", "ip_address", "20.0.0.9"),
        entry("vm.gpu.nic", "private_ip", "10.0.0.9"),
        entry("cluster.train[0].public_ip", "ip_address", "20.0.0.4"),
        entry("cluster.train[0].nic", "private_ip", "10.0.0.4"),
        entry("cluster.train[1].nic", "private_ip", "10.0.0.5"),
        entry("cluster.train[2].nic", "private_ip", "10.0.0.6"),
    ])
}

fn mapped(pairs: &[(&str, &str)]) -> Endpoints {
    let map: Vec<SshEndpoint> = pairs
        .iter()
        .map(|(ip, endpoint)| SshEndpoint {
            ip_address: (*ip).to_owned(),
            endpoint: (*endpoint).to_owned(),
            public_ip_id: None,
            port: None,
        })
        .collect();
    Endpoints::from_emulator(&map).with_addresses(ips())
}

fn train() -> Address {
    Address::block("cluster", "train")
}

fn no_tofu() -> RecordHostKey {
    Arc::new(|_, _| {})
}

fn direct(host: &str, port: u16) -> Route {
    Route::Direct {
        host: host.to_owned(),
        port,
    }
}

#[test]
fn blocks_lists_vm_and_cluster_blocks_with_vms() {
    let mut state = sample();
    state.upsert(resource(
        "storage_account.data.account",
        ResourceKind::StorageAccount,
        "expdata",
        json!({}),
    ));
    assert_eq!(
        blocks(&state),
        [train(), Address::block("vm", "gpu")],
        "storage is no block of nodes"
    );
}

#[test]
fn azure_dials_public_ips_directly_and_private_nodes_through_the_head() {
    let state = sample();
    let endpoints = Endpoints::direct().with_addresses(ips());
    assert!(!endpoints.is_emulated());
    let nodes = block_nodes(&state, &train(), &endpoints);
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["exp-train-0", "exp-train-1", "exp-train-2"]);
    assert_eq!(nodes[0].route, direct("20.0.0.4", 22));
    assert!(nodes[0].is_head());
    assert_eq!(
        nodes[2].route,
        Route::ViaHead {
            host: "10.0.0.6".into(),
            port: 22
        }
    );
    assert_eq!(nodes[1].user, "alice");
    assert_eq!(nodes[1].public_ip, None);
    assert_eq!(nodes[1].private_ip.as_deref(), Some("10.0.0.5"));
    assert_eq!(nodes[1].node().to_string(), "cluster.train[1]");
    let gpu = block_nodes(&state, &"vm.gpu.vm".parse().expect("valid"), &endpoints);
    assert_eq!(gpu.len(), 1);
    assert_eq!(gpu[0].route, direct("20.0.0.9", 22));
    assert_eq!(gpu[0].block, Address::block("vm", "gpu"));
}

#[test]
fn emulated_ips_go_to_their_local_endpoints_and_unmapped_ones_are_unreachable() {
    let state = sample();
    let endpoints = mapped(&[
        ("20.0.0.4", "127.0.0.1:2201"),
        ("10.0.0.4", "127.0.0.1:2201"),
        ("10.0.0.5", "127.0.0.1:2202"),
    ]);
    assert!(endpoints.is_emulated());
    assert_eq!(endpoints.resolve("10.0.0.6"), None);
    let nodes = block_nodes(&state, &train(), &endpoints);
    assert_eq!(nodes[0].route, direct("127.0.0.1", 2201));
    assert_eq!(
        nodes[1].route,
        Route::ViaHead {
            host: "127.0.0.1".into(),
            port: 2202
        }
    );
    assert_eq!(
        nodes[2].route,
        Route::Unreachable {
            why: "has no SSH endpoint in the emulator for its private IP 10.0.0.6".into()
        }
    );
    let gpu = block_nodes(&state, &Address::block("vm", "gpu"), &endpoints);
    assert_eq!(
        gpu[0].route,
        Route::Unreachable {
            why: "has no SSH endpoint in the emulator for its public IP 20.0.0.9".into()
        }
    );
}

#[test]
fn nodes_behind_an_unreachable_head_say_why() {
    let state = sample();
    let endpoints = mapped(&[("10.0.0.5", "127.0.0.1:2202")]);
    let nodes = block_nodes(&state, &train(), &endpoints);
    assert_eq!(
        nodes[1].route,
        Route::Unreachable {
            why: "is reached through its head cluster.train[0], which has no SSH endpoint in the emulator for its public IP 20.0.0.4".into()
        }
    );
}

#[test]
fn unknown_ips_a_private_head_and_parked_vms_are_unreachable() {
    let mut state = sample();
    let nodes = block_nodes(&state, &train(), &Endpoints::direct());
    assert_eq!(
        nodes[0].route,
        Route::Unreachable {
            why: "has a public IP whose address is not known (ARM was not asked)".into()
        }
    );
    // An IP recorded in the state's attributes is used without asking ARM.
    if let Some(pip) = state.resource_mut(&"vm.gpu.public_ip".parse().expect("valid")) {
        pip.attrs.insert("ip_address".into(), json!("20.1.1.1"));
    }
    let gpu = block_nodes(&state, &Address::block("vm", "gpu"), &Endpoints::direct());
    assert_eq!(gpu[0].route, direct("20.1.1.1", 22));

    state
        .resources
        .retain(|r| r.address.to_string() != "cluster.train[0].public_ip");
    let nodes = block_nodes(&state, &train(), &Endpoints::direct().with_addresses(ips()));
    assert_eq!(
        nodes[0].route,
        Route::Unreachable {
            why: "has no public IP and is the first node of its block, so there is no head to jump through".into()
        }
    );

    let mut state = sample();
    if let Some(vm) = state.resource_mut(&"vm.gpu.vm".parse().expect("valid")) {
        vm.power_state = Some(PowerState::Deallocated);
    }
    let gpu = block_nodes(
        &state,
        &Address::block("vm", "gpu"),
        &Endpoints::direct().with_addresses(ips()),
    );
    assert_eq!(
        gpu[0].route,
        Route::Unreachable {
            why: "is parked (deallocated): `dsinfra unpark` starts it".into()
        }
    );
}

#[test]
fn node_spec_pins_known_keys_and_jumps_through_the_head() {
    let mut state = sample();
    let head_key = HostKeyPair::generate().expect("generation works");
    let node_key = HostKeyPair::generate().expect("generation works");
    for (address, key) in [
        ("cluster.train[0].vm", &head_key),
        ("cluster.train[1].vm", &node_key),
    ] {
        if let Some(vm) = state.resource_mut(&address.parse().expect("valid")) {
            vm.host_key = Some(key.public().to_openssh());
        }
    }
    let endpoints = Endpoints::direct().with_addresses(ips());
    let nodes = block_nodes(&state, &train(), &endpoints);
    let head = nodes[0].node_spec(None, no_tofu()).expect("head is direct");
    assert_eq!(head.target.address(), "20.0.0.4:22");
    assert_eq!(head.target.node, "cluster.train[0]");
    assert_eq!(head.target.user, "alice");
    assert!(head.jump.is_none());
    assert!(matches!(&head.host_key, HostKeyPolicy::Pinned(k) if k.same_key(head_key.public())));

    let spec = nodes[1]
        .node_spec(Some(&nodes[0]), no_tofu())
        .expect("node behind the head");
    assert_eq!(spec.target.address(), "10.0.0.5:22");
    assert!(matches!(&spec.host_key, HostKeyPolicy::Pinned(k) if k.same_key(node_key.public())));
    let hop = spec.jump.expect("jumps through the head");
    assert_eq!(hop.target.address(), "20.0.0.4:22");
    assert_eq!(hop.target.node, "cluster.train[0]");
    assert!(matches!(&hop.host_key, HostKeyPolicy::Pinned(k) if k.same_key(head_key.public())));

    assert_eq!(
        nodes[1].node_spec(None, no_tofu()).expect_err("no head"),
        ReachError::NoHead {
            node: "cluster.train[1]".into()
        }
    );
}

#[test]
fn node_spec_trusts_unpinned_nodes_on_first_use_through_the_callback() {
    let state = sample();
    let nodes = block_nodes(&state, &train(), &Endpoints::direct().with_addresses(ips()));
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let record: RecordHostKey = Arc::new(move |node, _key| {
        sink.lock()
            .expect("test mutex not poisoned")
            .push(node.to_owned());
    });
    let spec = nodes[2]
        .node_spec(Some(&nodes[0]), record)
        .expect("reachable");
    let HostKeyPolicy::TrustOnFirstUse { record } = &spec.host_key else {
        panic!(
            "an unpinned node is trusted on first use: {:?}",
            spec.host_key
        );
    };
    let key = HostKeyPair::generate().expect("generation works");
    record("cluster.train[2]", key.public());
    assert_eq!(
        *seen.lock().expect("test mutex not poisoned"),
        ["cluster.train[2]"]
    );
}

#[test]
fn node_spec_refuses_unreachable_nodes_and_broken_pinned_keys() {
    let mut state = sample();
    let nodes = block_nodes(&state, &train(), &Endpoints::direct());
    assert_eq!(
        nodes[0]
            .node_spec(None, no_tofu())
            .expect_err("no IP")
            .to_string(),
        "node cluster.train[0] cannot be reached: it has a public IP whose address is not known (ARM was not asked)"
    );
    if let Some(vm) = state.resource_mut(&"vm.gpu.vm".parse().expect("valid")) {
        vm.host_key = Some("ssh-ed25519 not-base64".into());
    }
    let gpu = block_nodes(
        &state,
        &Address::block("vm", "gpu"),
        &Endpoints::direct().with_addresses(ips()),
    );
    let err = gpu[0].node_spec(None, no_tofu()).expect_err("bad key");
    assert!(
        err.to_string()
            .starts_with("node vm.gpu: the host key pinned in the state is not usable: "),
        "{err}"
    );
}

#[test]
fn markers_live_in_a_directory_per_vm() {
    assert_eq!(
        marker_dir(None, "exp-train-1"),
        "/var/lib/dsinfra/steps/exp-train-1"
    );
    assert_eq!(
        marker_dir(Some(""), "exp-gpu"),
        "/var/lib/dsinfra/steps/exp-gpu"
    );
    assert_eq!(
        marker_dir(Some("/tmp/hosts/"), "exp-train-0"),
        "/tmp/hosts/exp-train-0"
    );
    let state = sample();
    let gpu = block_nodes(
        &state,
        &Address::block("vm", "gpu"),
        &Endpoints::direct().with_addresses(ips()),
    );
    let spec = gpu[0].node_spec(None, no_tofu()).expect("reachable");
    assert_eq!(
        spec.marker_dir,
        marker_dir(std::env::var(MARKER_DIR_ENV).ok().as_deref(), "exp-gpu")
    );
    assert!(spec.marker_dir.ends_with("/exp-gpu"));
}

#[test]
fn nodes_sharing_one_address_are_told_apart_by_their_port() {
    let entry = |ip: &str, port: Option<u16>, endpoint: &str| SshEndpoint {
        ip_address: ip.to_owned(),
        endpoint: endpoint.to_owned(),
        public_ip_id: None,
        port,
    };
    let emulated = Endpoints::from_emulator(&[
        entry("20.1.2.3", Some(50000), "127.0.0.1:2301"),
        entry("20.1.2.3", Some(50001), "127.0.0.1:2302"),
        entry("10.0.0.4", None, "127.0.0.1:2303"),
    ]);
    assert_eq!(
        emulated.resolve_port("20.1.2.3", 50001),
        Some(("127.0.0.1".to_owned(), 2302))
    );
    assert_eq!(emulated.resolve_port("20.1.2.3", 50002), None);
    // Port 22 is the address's own entry, as a VM's is.
    assert_eq!(
        emulated.resolve_port("10.0.0.4", 22),
        Some(("127.0.0.1".to_owned(), 2303))
    );
    assert_eq!(emulated.resolve("20.1.2.3"), None);
    // Against Azure the address and port are dialled as listNodes gives them.
    assert_eq!(
        Endpoints::direct().resolve_port("20.1.2.3", 50000),
        Some(("20.1.2.3".to_owned(), 50000))
    );
}
