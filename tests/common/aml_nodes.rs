//! A farm of real sshd hosts standing in for the nodes of AmlCompute clusters, for end-to-end
//! tests against the emulator: the emulator's AML node hook
//! ([`dsinfra::emulator::EmulatorConfig::on_aml_node`]) calls [`AmlNodeFarm::hook`] when a node
//! becomes idle, and the farm starts an OpenSSH `sshd` for it. The emulator then maps the
//! cluster's public IP and the node's port (and the node's private IP) to that sshd, so dsinfra
//! reaches the node exactly as it would on Azure: at `publicIpAddress:port` from `listNodes`.
//!
//! Unlike the VM farm (`nodes.rs`), whose hosts get the key dsinfra put in cloud-init, each host
//! here generates its own host key, as an AML node does: dsinfra has to trust it on first use.
//! The login user is always `TEST_USER`; `authorized_keys` holds the farm's client key and the
//! compute's admin key. Every host stops when the farm drops; the hook holds the farm weakly.
//!
//! Nodes reach each other on their private IPs. This machine has none of those, so each host
//! also listens on a loopback address of its own made from its private IP (`10.0.1.5` ->
//! `127.0.1.5`, [`loopback_for`]), and that is the address the emulator maps both the node's
//! public port and its private IP to: a nodefile or mesh built from the mapped addresses names
//! every node by a distinct address, as on Azure. The hosts share one `authorized_keys`
//! ([`AmlNodeFarm::mesh_dir`]), which stands for every node's `~/.ssh` of the mesh user, so a
//! test points `DSINFRA_MESH_DIR` there and the head's mesh key lets it into every node.
//!
//! Use through `mod common;` (it needs the sibling `sshd` module).

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use dsinfra::emulator::{AmlNodeBoot, AmlNodeHook};
use dsinfra::ssh::{HostKey, HostKeyPair};

use super::nodes::FarmHosts;

/// Real sshd hosts standing in for AmlCompute nodes, by node id.
pub struct AmlNodeFarm {
    /// The hosts, by node id.
    hosts: FarmHosts,
    /// What the emulator said about each node, in the order the nodes became idle.
    boots: Mutex<Vec<AmlNodeBoot>>,
}

impl std::ops::Deref for AmlNodeFarm {
    type Target = FarmHosts;

    fn deref(&self) -> &FarmHosts {
        &self.hosts
    }
}

impl AmlNodeFarm {
    /// A farm with no hosts yet. `None` (after printing why) when sshd cannot run here; under CI
    /// that is a test failure instead, as for `sshd::start`.
    pub fn start() -> Option<Arc<Self>> {
        Some(Arc::new(Self {
            hosts: FarmHosts::new()?,
            boots: Mutex::new(Vec::new()),
        }))
    }

    /// The emulator's AML node hook: starts a host per node and answers its address.
    pub fn hook(self: &Arc<Self>) -> AmlNodeHook {
        let farm = Arc::downgrade(self);
        Arc::new(move |boot: &AmlNodeBoot| farm.upgrade().map(|farm| farm.boot(boot)))
    }

    /// The host key the host standing in for `node_id` generated.
    pub fn host_key(&self, node_id: &str) -> Option<HostKey> {
        self.hosts.with_host(node_id, |h| h.public_key.clone())
    }

    /// What the emulator told the farm, one entry per node, in the order they became idle.
    pub fn booted(&self) -> Vec<AmlNodeBoot> {
        self.boots.lock().expect("farm mutex not poisoned").clone()
    }

    /// Starts the host for one node and returns its address.
    fn boot(&self, boot: &AmlNodeBoot) -> SocketAddr {
        // The node makes its own host key: nothing dsinfra sent names one.
        let pair = HostKeyPair::generate().expect("ed25519 generation works");
        let name = format!("aml-{}", boot.node_id);
        if boot.admin_username != self.user() {
            eprintln!(
                "AmlNodeFarm: node {} has admin user {:?}; only {} can log in to farm hosts",
                boot.node_id,
                boot.admin_username,
                self.user()
            );
        }
        let address = loopback_for(&boot.private_ip);
        let mesh = self.mesh_dir();
        let port = self.hosts.start_host_at(
            &boot.node_id,
            &name,
            (pair.private_openssh().expose(), pair.public()),
            (
                &mesh.join("authorized_keys"),
                boot.ssh_public_key.as_slice(),
            ),
            &address.to_string(),
        );
        self.boots
            .lock()
            .expect("farm mutex not poisoned")
            .push(boot.clone());
        SocketAddr::from((address, port))
    }
}

/// The loopback address a node with `private_ip` listens on: `127` followed by the private IP's
/// last three octets (`10.0.1.5` -> `127.0.1.5`), distinct for every node of a subnet.
pub fn loopback_for(private_ip: &str) -> Ipv4Addr {
    let octets = private_ip
        .parse::<Ipv4Addr>()
        .expect("the emulator gives AML nodes IPv4 private addresses")
        .octets();
    Ipv4Addr::new(127, octets[1], octets[2], octets[3])
}
