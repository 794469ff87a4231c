//! AmlCompute nodes "booting" for tests: when a node becomes idle, an optional hook
//! ([`crate::emulator::EmulatorConfig::on_aml_node`]) is told what it needs to stand a local
//! sshd in for the node (the admin user and key, the node's addresses and port) and may answer
//! with that sshd's address. The address is recorded in the SSH endpoint map for the cluster's
//! public address and the node's port, and for the node's private address, so `dsinfra`
//! reaches the stand-in exactly as it would reach the node; both entries go when the node leaves.
//!
//! The hook runs at the gate every answer passes (see `emulator/boot.rs`), outside every lock
//! and before the answer is sent: a node's idleness is a function of time, so any answer that
//! shows a node idle was produced no later than the gate that booted it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::compute::{listed_nodes, public_ip, ssh_public_key};
use crate::emulator::hooks::AmlNodeBoot;
use crate::emulator::json::At as _;
use crate::emulator::resource::key;
use crate::emulator::shared::lock;
use crate::emulator::store::{Cloud, Kind};
use crate::engine::reach::SshEndpoint;

/// The nodes the hook has been told of, by `{compute key}|{node id}`, with the endpoint map
/// entries recorded for each (address, port). In memory only, like the VM boots.
#[derive(Default)]
pub(crate) struct AmlBoots {
    told: Mutex<BTreeMap<String, Vec<MapEntry>>>,
}

/// One entry of the SSH endpoint map: an address, and the port for a shared public address.
type MapEntry = (String, Option<u16>);

fn node_key(compute_key: &str, node_id: &str) -> String {
    format!("{compute_key}|{node_id}")
}

impl AmlBoots {
    /// The nodes usable at `now` that the hook has not been told of yet; they count as told.
    pub fn take_due(&self, cloud: &Cloud, now: DateTime<Utc>) -> Vec<(String, AmlNodeBoot)> {
        let mut told = lock(&self.told);
        let mut due = Vec::new();
        for compute in cloud.of_kind(Kind::MlCompute) {
            let compute_key = key(&compute.id);
            let text = |pointer: &str| {
                compute
                    .body
                    .at(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            for (index, node) in listed_nodes(compute, now).into_iter().enumerate() {
                let k = node_key(&compute_key, &node.id);
                if !node.usable(now) || told.contains_key(&k) {
                    continue;
                }
                told.insert(k.clone(), Vec::new());
                due.push((
                    k,
                    AmlNodeBoot {
                        compute_id: compute.id.clone(),
                        node_id: node.id.clone(),
                        index,
                        admin_username: text(
                            "/properties/properties/userAccountCredentials/adminUserName",
                        ),
                        ssh_public_key: ssh_public_key(compute).map(str::to_owned),
                        public_ip: public_ip(compute).unwrap_or_default().to_owned(),
                        port: node.port(),
                        private_ip: node.private_ip.clone(),
                        vm_size: text("/properties/properties/vmSize"),
                    },
                ));
            }
        }
        due
    }

    /// Forgets the nodes told of that are no longer usable (leaving, gone, or their compute
    /// deleted); returns the endpoint map entries recorded for them.
    pub fn take_gone(&self, cloud: &Cloud, now: DateTime<Utc>) -> Vec<(String, Option<u16>)> {
        let mut told = lock(&self.told);
        let gone: Vec<String> = told
            .keys()
            .filter(|k| {
                let (compute_key, node_id) = k.split_once('|').unwrap_or_default();
                !cloud
                    .resources
                    .get(compute_key)
                    .is_some_and(|c| c.nodes.iter().any(|n| n.id == node_id && n.usable(now)))
            })
            .cloned()
            .collect();
        gone.iter()
            .filter_map(|k| told.remove(k))
            .flatten()
            .collect()
    }

    /// Records `endpoint` for the node's public address and port and for its private address.
    pub fn record(&self, cloud: &mut Cloud, node: &str, boot: &AmlNodeBoot, endpoint: SocketAddr) {
        let mut told = lock(&self.told);
        // Left while the hook ran: nothing to reach.
        let Some(entries) = told.get_mut(node) else {
            return;
        };
        for (ip, port) in [
            (boot.public_ip.clone(), Some(boot.port)),
            (boot.private_ip.clone(), None),
        ] {
            cloud
                .ssh_endpoints
                .retain(|e| !(e.ip_address == ip && e.port == port));
            cloud.ssh_endpoints.push(SshEndpoint {
                ip_address: ip.clone(),
                endpoint: endpoint.to_string(),
                public_ip_id: None,
                port,
            });
            entries.push((ip, port));
        }
    }
}

/// Removes the endpoint map entries of nodes that went away.
pub(crate) fn forget(cloud: &mut Cloud, gone: &[(String, Option<u16>)]) {
    cloud.ssh_endpoints.retain(|e| {
        !gone
            .iter()
            .any(|(ip, port)| e.ip_address == *ip && e.port == *port)
    });
}
