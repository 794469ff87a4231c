//! How dsinfra reaches each VM over SSH: which address and port to dial, whether to jump through
//! the head node, which host key to expect, and why a node cannot be reached at all.
//!
//! Post-boot steps (apply), `dsinfra ssh` and `dsinfra ssh-config` all need the same answer, so
//! it is computed once here from the state:
//!
//! * A `vm` block is one node with its own public IP (unless `public_ip = false`).
//! * A `cluster` has a public IP on node 0 only (unless `head_public_ip = false`); every other
//!   node is reached through node 0, the head, like OpenSSH's ProxyJump. The head dials the
//!   node's private IP.
//! * Against the emulator the IPs are fake: [`Endpoints`] maps each one to the local sshd that
//!   stands in for the VM (`127.0.0.1:PORT`), and an IP without a mapping is unreachable.
//! * Host keys: a VM dsinfra created has its key pinned in state; an adopted VM is trusted on
//!   first use (see [`NodeReach::node_spec`]).
//!
//! * An `aml_cluster` (Azure Machine Learning AmlCompute) has nodes the service makes: they are
//!   listed with `listNodes` and each is dialled at the cluster's public IP and its own port;
//!   their host keys are trusted on first use and pinned per node id (see [`aml`]).
//!
//! IP addresses are values only ARM knows. The state does not record them (the plan compares its
//! attributes with the manifest's), so callers read them with [`read_addresses`] and hand them
//! over with [`Endpoints::with_addresses`]; an IP found in a resource's state attributes
//! (`ip_address` of a public IP, `private_ip` of a NIC) is used first.

pub(crate) use crate::engine::kinds::ml_compute::nodes as aml;
pub mod openssh;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::addr::Address;
use crate::azure::{ArmClient, ArmError};
use crate::model::{Attrs, ResourceKind};
use crate::ssh::{BOOT_ID_PATH, HostKey, HostKeyPolicy, RecordHostKey, Target};
use crate::state::{Drift, PowerState, ResourceStatus, State};
use crate::steps::{DEFAULT_MARKER_DIR, Hop, NodeSpec};

pub use aml::{AML_CLUSTER, AmlNode, read_aml_nodes};

/// The SSH port of a real VM.
pub const SSH_PORT: u16 = 22;

/// The environment variable that moves the marker directory (tests: many hosts, one filesystem).
pub const MARKER_DIR_ENV: &str = "DSINFRA_MARKER_DIR";

/// The login user when the state does not say (the manifest's default `admin_username`).
pub(crate) const DEFAULT_USER: &str = "azureuser";

/// A mapping from a public IP address to a local SSH endpoint: one entry of an emulator's map
/// (`GET /_emulator/ssh-endpoints`), which [`Endpoints::from_emulator`] reads. It is defined
/// here, by the code that consumes it, so the emulator depends on the engine's type and
/// production code does not depend on the test server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshEndpoint {
    /// The public IP address ARM reports.
    #[serde(rename = "ipAddress")]
    pub ip_address: String,
    /// `127.0.0.1:port` of the sshd standing in for the VM.
    pub endpoint: String,
    /// The public IP resource id, when known.
    #[serde(
        rename = "publicIpAddressId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_id: Option<String>,
    /// The public port this entry stands for, when the address is shared by many nodes behind
    /// distinct ports (an AmlCompute cluster: `listNodes` gives every node the cluster's public
    /// IP and a port of its own). `None`: the address's SSH port 22, as for a VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// Where SSH connections for an IP address go: the address itself on port 22 (Azure), or the
/// local sshd an emulator mapped it to. Also carries the IP addresses (and each VM's Secure Boot
/// setting) read from ARM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// `Some` against an emulator: IP address -> (host, port). Unmapped IPs are unreachable.
    emulated: Option<BTreeMap<String, (String, u16)>>,
    /// Values only ARM knows, by resource (`ip_address` of public IPs, `private_ip` of NICs).
    addresses: BTreeMap<Address, Attrs>,
    /// The nodes `listNodes` gave, by AmlCompute resource (`aml_cluster.c.compute`).
    aml_nodes: BTreeMap<Address, Vec<AmlNode>>,
}

impl Endpoints {
    /// Real Azure: every IP address is dialled as it is, on port 22.
    pub fn direct() -> Self {
        Self::default()
    }

    /// An emulator's map from (fake) IP addresses to local sshd endpoints. Entries whose endpoint
    /// is not a socket address are left out: the IP is then unreachable, which is what it is.
    pub fn from_emulator(map: &[SshEndpoint]) -> Self {
        let emulated = map
            .iter()
            .filter_map(|e| {
                let socket: SocketAddr = e.endpoint.parse().ok()?;
                Some((
                    emulated_key(&e.ip_address, e.port),
                    (socket.ip().to_string(), socket.port()),
                ))
            })
            .collect();
        Self {
            emulated: Some(emulated),
            addresses: BTreeMap::new(),
            aml_nodes: BTreeMap::new(),
        }
    }

    /// The same endpoints, knowing the IP addresses ARM reported (a refresh's `observed` map or
    /// what [`read_addresses`] returns).
    #[must_use]
    pub fn with_addresses(mut self, addresses: BTreeMap<Address, Attrs>) -> Self {
        self.addresses.extend(addresses);
        self
    }

    /// The same endpoints, knowing the nodes of AmlCompute clusters (what [`aml::read_aml_nodes`]
    /// returns).
    #[must_use]
    pub fn with_aml_nodes(mut self, nodes: BTreeMap<Address, Vec<AmlNode>>) -> Self {
        self.aml_nodes.extend(nodes);
        self
    }

    /// The nodes listed for the AmlCompute at `compute`; `None` when they were not read.
    pub fn aml_nodes(&self, compute: &Address) -> Option<&[AmlNode]> {
        self.aml_nodes.get(compute).map(Vec::as_slice)
    }

    /// Whether Secure Boot is on for the VM at `vm`, as ARM reported it (`None`: not read).
    pub fn secure_boot(&self, vm: &Address) -> Option<bool> {
        self.addresses
            .get(vm)
            .and_then(|a| a.get("secure_boot"))
            .and_then(Value::as_bool)
    }

    /// Whether IP addresses are emulated (mapped to local endpoints).
    pub fn is_emulated(&self) -> bool {
        self.emulated.is_some()
    }

    /// Where to dial `ip`: `(host, port)`. `None` only when emulated and `ip` is not mapped.
    pub fn resolve(&self, ip: &str) -> Option<(String, u16)> {
        match &self.emulated {
            None => Some((ip.to_owned(), SSH_PORT)),
            Some(map) => map.get(ip).cloned(),
        }
    }

    /// Where the other nodes of a block reach the node at private IP `ip`: the emulator's local
    /// endpoint for it when emulated and mapped (decision 49), else the IP itself on port 22.
    /// What the `ssh_mesh` step's nodefile and a run's hostfile name.
    pub fn node_address(&self, ip: &str) -> (String, u16) {
        self.resolve(ip)
            .unwrap_or_else(|| (ip.to_owned(), SSH_PORT))
    }

    /// Where to dial `ip` on `port` (an AmlCompute node's public address and port, as
    /// `listNodes` gives them): `(host, port)`. `None` only when emulated and not mapped.
    pub fn resolve_port(&self, ip: &str, port: u16) -> Option<(String, u16)> {
        match &self.emulated {
            None => Some((ip.to_owned(), port)),
            Some(map) => map.get(&emulated_key(ip, Some(port))).cloned(),
        }
    }

    /// A value only ARM knows (`attr` of the resource at `address`), from the state's attributes
    /// when recorded there, else from the addresses read from ARM. Placeholders do not count.
    fn known(&self, state: &State, address: &Address, attr: &str) -> Option<String> {
        let real = |v: &Value| {
            v.as_str()
                .filter(|s| !s.is_empty() && !s.starts_with("(known after apply"))
                .map(str::to_owned)
        };
        state
            .resource(address)
            .and_then(|r| r.attrs.get(attr))
            .and_then(real)
            .or_else(|| {
                self.addresses
                    .get(address)
                    .and_then(|a| a.get(attr))
                    .and_then(real)
            })
    }
}

/// The key of an emulated endpoint: the address alone for port 22, `ip:port` otherwise.
fn emulated_key(ip: &str, port: Option<u16>) -> String {
    match port {
        None | Some(SSH_PORT) => ip.to_owned(),
        Some(port) => format!("{ip}:{port}"),
    }
}

/// How a node is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Dial it from here.
    Direct {
        /// Host name or IP address.
        host: String,
        /// Port.
        port: u16,
    },
    /// Jump through the block's head node, which dials this.
    ViaHead {
        /// Host or IP address as the head sees it.
        host: String,
        /// Port.
        port: u16,
    },
    /// It cannot be reached now.
    Unreachable {
        /// Why, as a phrase that follows the node's name (`has no public IP ...`).
        why: String,
    },
}

/// One node of a `vm`, `cluster` or `aml_cluster` block and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReach {
    /// The VM resource (`cluster.train[1].vm`); for an AML node, its address
    /// `aml_cluster.c[1].node` (not a resource: the service owns the nodes).
    pub vm: Address,
    /// Its block (`cluster.train`).
    pub block: Address,
    /// Its position in the block: 0 is the head.
    pub index: usize,
    /// Its Azure VM name; for an AML node, its node id.
    pub name: String,
    /// The login user (`admin_username`).
    pub user: String,
    /// Its public IP address, when it has one and it is known.
    pub public_ip: Option<String>,
    /// Its private IP address, when known.
    pub private_ip: Option<String>,
    /// The pinned host key (an OpenSSH public key line); `None` for adopted VMs and AML nodes
    /// not reached yet (both trusted on first use).
    pub host_key: Option<String>,
    /// How to reach it.
    pub route: Route,
}

/// Why a node cannot be turned into something to connect to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReachError {
    /// The node's route is unreachable.
    #[error("node {node} cannot be reached: it {why}")]
    Unreachable {
        /// The node (`cluster.train[1]`).
        node: String,
        /// Why.
        why: String,
    },
    /// A node behind the head was asked for without a directly reachable head.
    #[error(
        "node {node} is reached through its head node, but the head is not reachable from here"
    )]
    NoHead {
        /// The node.
        node: String,
    },
    /// The pinned key in the state does not parse.
    #[error("node {node}: the host key pinned in the state is not usable: {message}")]
    HostKey {
        /// The node.
        node: String,
        /// What is wrong with it.
        message: String,
    },
}

impl NodeReach {
    /// The node's address without a part: `cluster.train[1]`, `vm.gpu`. Its name in messages.
    pub fn node(&self) -> Address {
        Address::new(&self.vm.kind, &self.vm.name, self.vm.index, "")
    }

    /// The AmlCompute resource this node belongs to (`aml_cluster.c.compute`), for an AML node;
    /// `None` for a VM. Its pinned key and step records live there, under its node id.
    pub fn aml_compute(&self) -> Option<Address> {
        (self.block.kind == AML_CLUSTER).then(|| aml::compute_of(&self.block))
    }

    /// Whether this is the block's head (the first node; the only node of a `vm` block).
    pub fn is_head(&self) -> bool {
        self.index == 0
    }

    /// The host-key policy: the pinned key when the state has one, else trust on first use
    /// with `tofu` receiving the key the node presents.
    pub fn host_key_policy(&self, tofu: RecordHostKey) -> Result<HostKeyPolicy, ReachError> {
        match &self.host_key {
            Some(line) => HostKey::from_openssh(line)
                .map(HostKeyPolicy::Pinned)
                .map_err(|message| ReachError::HostKey {
                    node: self.node().to_string(),
                    message,
                }),
            None => Ok(HostKeyPolicy::TrustOnFirstUse { record: tofu }),
        }
    }

    /// What the step runner needs to reach this node. `head` is the block's head (needed for a
    /// node reached through it); `tofu` records keys of nodes without a pinned key. Markers go
    /// to `${DSINFRA_MARKER_DIR:-/var/lib/dsinfra/steps}/<vm name>`: one directory per VM, so
    /// test hosts that share one filesystem do not share markers.
    pub fn node_spec(
        &self,
        head: Option<&NodeReach>,
        tofu: RecordHostKey,
    ) -> Result<NodeSpec, ReachError> {
        let node = self.node().to_string();
        let (host, port, jump) = match &self.route {
            Route::Unreachable { why } => {
                return Err(ReachError::Unreachable {
                    node,
                    why: why.clone(),
                });
            }
            Route::Direct { host, port } => (host.clone(), *port, None),
            Route::ViaHead { host, port } => {
                let Some((head, Route::Direct { host: hh, port: hp })) =
                    head.map(|h| (h, &h.route))
                else {
                    return Err(ReachError::NoHead { node });
                };
                let hop = Hop {
                    target: Target {
                        node: head.node().to_string(),
                        host: hh.clone(),
                        port: *hp,
                        user: head.user.clone(),
                    },
                    host_key: head.host_key_policy(tofu.clone())?,
                };
                (host.clone(), *port, Some(hop))
            }
        };
        Ok(NodeSpec {
            target: Target {
                node,
                host,
                port,
                user: self.user.clone(),
            },
            host_key: self.host_key_policy(tofu)?,
            jump,
            marker_dir: marker_dir(std::env::var(MARKER_DIR_ENV).ok().as_deref(), &self.name),
            boot_id_path: BOOT_ID_PATH.to_owned(),
        })
    }
}

/// The marker directory of the VM named `vm_name` under `base` (default
/// [`DEFAULT_MARKER_DIR`]; an empty base counts as unset).
pub fn marker_dir(base: Option<&str>, vm_name: &str) -> String {
    let base = base
        .filter(|b| !b.is_empty())
        .unwrap_or(DEFAULT_MARKER_DIR)
        .trim_end_matches('/');
    format!("{base}/{vm_name}")
}

/// The VMs of the state that exist: created, and not found deleted by a refresh.
fn live_vms(state: &State) -> impl Iterator<Item = &crate::state::ResourceState> {
    state.resources.iter().filter(|r| {
        r.kind == ResourceKind::VirtualMachine
            && r.status == ResourceStatus::Created
            && r.drift != Some(Drift::Deleted)
    })
}

/// The `vm`, `cluster` and `aml_cluster` blocks that have VMs (or an AmlCompute) in the state,
/// sorted (`aml_cluster.scratch`, `cluster.train`, `vm.gpu`).
pub fn blocks(state: &State) -> Vec<Address> {
    live_vms(state)
        .chain(aml::live_computes(state))
        .map(|r| r.address.block_address())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The nodes of `block` (`cluster.train` or `vm.gpu`; any address of the block works), head
/// first then by index, each with how to reach it through `endpoints`. An `aml_cluster`'s nodes
/// are those `listNodes` gave ([`Endpoints::with_aml_nodes`]), in node-id order.
pub fn block_nodes(state: &State, block: &Address, endpoints: &Endpoints) -> Vec<NodeReach> {
    let block = block.block_address();
    if block.kind == AML_CLUSTER {
        return aml::block_nodes(state, &block, endpoints);
    }
    let mut vms: Vec<_> = live_vms(state)
        .filter(|r| r.address.block_address() == block)
        .collect();
    vms.sort_by_key(|r| r.address.index);
    let mut nodes: Vec<NodeReach> = Vec::with_capacity(vms.len());
    for (position, r) in vms.into_iter().enumerate() {
        let at = |part: &str| Address::new(&block.kind, &block.name, r.address.index, part);
        let has_public = state.resource(&at("public_ip")).is_some();
        let public_ip = endpoints.known(state, &at("public_ip"), "ip_address");
        let private_ip = endpoints.known(state, &at("nic"), "private_ip");
        let route = route_of(
            r.power_state,
            has_public,
            public_ip.as_deref(),
            private_ip.as_deref(),
            nodes.first(),
            endpoints,
        );
        nodes.push(NodeReach {
            vm: r.address.clone(),
            block: block.clone(),
            index: position,
            name: r.name.clone(),
            user: r
                .attrs
                .get("admin_username")
                .and_then(Value::as_str)
                .unwrap_or(DEFAULT_USER)
                .to_owned(),
            public_ip,
            private_ip,
            host_key: r.host_key.clone(),
            route,
        });
    }
    nodes
}

/// The route to one node, given what is known about it and the block's head (`None` for the
/// head itself).
fn route_of(
    power: Option<PowerState>,
    has_public: bool,
    public_ip: Option<&str>,
    private_ip: Option<&str>,
    head: Option<&NodeReach>,
    endpoints: &Endpoints,
) -> Route {
    let unreachable = |why: String| Route::Unreachable { why };
    match power {
        Some(PowerState::Deallocated) => {
            return unreachable("is parked (deallocated): `dsinfra unpark` starts it".to_owned());
        }
        Some(PowerState::Stopped) => {
            return unreachable("is stopped: `dsinfra unpark` starts it".to_owned());
        }
        Some(PowerState::Running) | None => {}
    }
    if has_public {
        let Some(ip) = public_ip else {
            return unreachable(
                "has a public IP whose address is not known (ARM was not asked)".to_owned(),
            );
        };
        return match endpoints.resolve(ip) {
            Some((host, port)) => Route::Direct { host, port },
            None => unreachable(format!(
                "has no SSH endpoint in the emulator for its public IP {ip}"
            )),
        };
    }
    let Some(head) = head else {
        return unreachable(
            "has no public IP and is the first node of its block, so there is no head to jump through"
                .to_owned(),
        );
    };
    if let Route::Unreachable { why } = &head.route {
        return unreachable(format!(
            "is reached through its head {}, which {why}",
            head.node()
        ));
    }
    let Some(ip) = private_ip else {
        return unreachable(
            "has no public IP and its private IP address is not known (ARM was not asked)"
                .to_owned(),
        );
    };
    match endpoints.resolve(ip) {
        Some((host, port)) => Route::ViaHead { host, port },
        None => unreachable(format!(
            "has no SSH endpoint in the emulator for its private IP {ip}"
        )),
    }
}

/// Read from ARM the IP addresses of every VM in the state: the `ip_address` of each VM's
/// public IP and the `private_ip` of its NIC, keyed by their addresses, ready for
/// [`Endpoints::with_addresses`]; and each VM's own view, for its `secure_boot`
/// ([`Endpoints::secure_boot`]). Read by lists, as a refresh reads (one per resource type and
/// group, `engine::refresh`), so the calls do not grow with the nodes: a 64-node cluster was 192
/// GETs. A resource ARM no longer has is left out (the node then shows as unreachable with the
/// reason).
///
/// # Errors
///
/// A read failed (after the client's retries).
pub async fn read_addresses(
    client: &ArmClient,
    subscription: &str,
    state: &State,
) -> Result<BTreeMap<Address, Attrs>, ArmError> {
    let wanted: Vec<super::refresh::Target> = live_vms(state)
        .flat_map(|vm| {
            ["public_ip", "nic", "vm"].into_iter().map(move |part| {
                Address::new(&vm.address.kind, &vm.address.name, vm.address.index, part)
            })
        })
        .filter_map(|address| {
            let r = state.resource(&address)?;
            let id = r.id.clone()?;
            (r.status == ResourceStatus::Created).then_some((address, r.kind, id))
        })
        .collect();
    let bodies = super::refresh::read_bodies(client, subscription, &wanted).await?;
    let mut found = BTreeMap::new();
    for (address, kind, body) in bodies {
        let known = super::refresh::known_values(kind, &body);
        if !known.is_empty() {
            found.insert(address, known);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests;
