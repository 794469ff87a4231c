//! A farm of real sshd hosts standing in for the nodes of AmlCompute clusters, for end-to-end
//! tests against the emulator: the emulator's AML node hook
//! ([`dsinfra::emulator::EmulatorConfig::on_aml_node`]) calls [`AmlNodeFarm::hook`] when a node
//! becomes idle, and the farm starts an OpenSSH `sshd` for it. The emulator then maps the
//! cluster's public IP and the node's port (and the node's private IP) to that sshd, so dsinfra
//! reaches the node exactly as it would on Azure: at `publicIpAddress:port` from `listNodes`.
//!
//! Unlike the VM farm (`nodes.rs`), whose hosts get the key dsinfra put in cloud-init, each host
//! here generates its own host key, as an AML node does: dsinfra has to trust it on first use.
//! The login user is always [`TEST_USER`]; `authorized_keys` holds the farm's client key and the
//! compute's admin key. Every host stops when the farm drops; the hook holds the farm weakly.
//!
//! Use through `mod common;` (it needs the sibling `sshd` module).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dsinfra::emulator::{AmlNodeBoot, AmlNodeHook};
use dsinfra::ssh::{HostKey, HostKeyPair};

use super::sshd::{self, Host, TEST_USER};

/// Real sshd hosts standing in for AmlCompute nodes, by node id.
pub struct AmlNodeFarm {
    /// The hosts, by node id; stopped before the directory goes (field order).
    hosts: Mutex<BTreeMap<String, Host>>,
    /// What the emulator said about each node, in the order the nodes became idle.
    boots: Mutex<Vec<AmlNodeBoot>>,
    client_key: PathBuf,
    client_public: HostKey,
    dir: tempfile::TempDir,
}

impl AmlNodeFarm {
    /// A farm with no hosts yet. `None` (after printing why) when sshd cannot run here; under CI
    /// that is a test failure instead, as for `sshd::start`.
    pub fn start() -> Option<Arc<Self>> {
        if !sshd::available() {
            return None;
        }
        let dir = sshd::scratch_dir();
        let (client_key, client_public) = sshd::write_client_key(dir.path());
        Some(Arc::new(Self {
            hosts: Mutex::new(BTreeMap::new()),
            boots: Mutex::new(Vec::new()),
            client_key,
            client_public,
            dir,
        }))
    }

    /// The emulator's AML node hook: starts a host per node and answers its address.
    pub fn hook(self: &Arc<Self>) -> AmlNodeHook {
        let farm = Arc::downgrade(self);
        Arc::new(move |boot: &AmlNodeBoot| farm.upgrade().map(|farm| farm.boot(boot)))
    }

    /// The client's private key file (for `-i`).
    pub fn client_key(&self) -> &Path {
        &self.client_key
    }

    /// The client's public key as an OpenSSH line, for the manifest's `ssh_key`.
    pub fn client_public_key(&self) -> String {
        self.client_public.to_openssh()
    }

    /// The login user on every host (the manifest's `admin_username` should be this).
    #[allow(clippy::unused_self)] // A method, like NodeFarm::user: the farm owns its user.
    pub fn user(&self) -> &str {
        TEST_USER
    }

    /// The host key the host standing in for `node_id` generated.
    pub fn host_key(&self, node_id: &str) -> Option<HostKey> {
        self.hosts
            .lock()
            .expect("farm mutex not poisoned")
            .get(node_id)
            .map(|h| h.public_key.clone())
    }

    /// What the emulator told the farm, one entry per node, in the order they became idle.
    pub fn booted(&self) -> Vec<AmlNodeBoot> {
        self.boots.lock().expect("farm mutex not poisoned").clone()
    }

    /// Starts the host for one node and returns its address.
    fn boot(&self, boot: &AmlNodeBoot) -> SocketAddr {
        if boot.admin_username != TEST_USER {
            eprintln!(
                "AmlNodeFarm: node {} has admin user {:?}; only {TEST_USER} can log in to farm hosts",
                boot.node_id, boot.admin_username
            );
        }
        // The node makes its own host key: nothing dsinfra sent names one.
        let pair = HostKeyPair::generate().expect("ed25519 generation works");
        let name = format!("aml-{}", boot.node_id);
        let authorized = self.dir.path().join(format!("{name}.authorized_keys"));
        let mut keys = vec![self.client_public_key()];
        keys.extend(boot.ssh_public_key.iter().cloned());
        sshd::write_authorized_keys(&authorized, &keys);
        let host = Host::start_with_key(
            self.dir.path(),
            &name,
            pair.private_openssh().expose(),
            pair.public(),
            &authorized,
        );
        let address = SocketAddr::from(([127, 0, 0, 1], host.port));
        self.boots
            .lock()
            .expect("farm mutex not poisoned")
            .push(boot.clone());
        let old = self
            .hosts
            .lock()
            .expect("farm mutex not poisoned")
            .insert(boot.node_id.clone(), host);
        // Stopping a host waits for its process: outside the lock.
        drop(old);
        address
    }
}
