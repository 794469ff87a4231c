//! What the step library needs to know about a block, from the manifest and the state: the pure
//! half of building a [`NodeContext`] (nodes, InfiniBand, admin user, Ubuntu release, storage
//! targets) and the list of what a block's steps refer to.
//!
//! Secret values (account keys, SAS tokens) and blob listings need Azure and are added by
//! [`super::credentials`]; everything here works offline and is unit-tested.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::super::reach::{Endpoints, NodeReach};
use crate::addr::Address;
use crate::model::{Desired, ResourceKind, Step};
use crate::steps::library::{ClusterNode, MeshSettings, NodeContext, StorageTarget};

/// The environment variable that names the `beeond` command on the nodes when it is not the
/// packaged one on the `PATH` (an absolute path; [`NodeContext::beeond`]). Read on the
/// workstation, like `DSINFRA_MARKER_DIR`: a BeeOND installed elsewhere, or a test's stand-in.
pub const BEEOND_ENV: &str = "DSINFRA_BEEOND";

/// The environment variable that names the `elbencho` command on the nodes when it is not the
/// release the step installs (an absolute path; [`NodeContext::elbencho`]): a test's stand-in,
/// since elbencho is no Debian package.
pub const ELBENCHO_ENV: &str = "DSINFRA_ELBENCHO";

/// The `elbencho` command override from [`ELBENCHO_ENV`], if set and not empty.
fn elbencho_command() -> Option<String> {
    std::env::var(ELBENCHO_ENV).ok().filter(|v| !v.is_empty())
}

/// The environment variable that names a preinstalled `azcopy` on the nodes (an absolute path;
/// [`NodeContext::azcopy`]): `stage` then runs it instead of installing the pinned package, and
/// refuses it if it is older than the step needs. Read on the workstation, like
/// `DSINFRA_ELBENCHO`: an image with azcopy elsewhere, or a test's npm azcopy.
pub const AZCOPY_ENV: &str = "DSINFRA_AZCOPY";

/// The `azcopy` command override from [`AZCOPY_ENV`], if set and not empty.
fn azcopy_command() -> Option<String> {
    std::env::var(AZCOPY_ENV).ok().filter(|v| !v.is_empty())
}

/// The environment variable naming a directory that stands in for the nodes' temp disk
/// ([`NodeContext::temp_dir`]; `/mnt/resource` or `/mnt` on Azure): azcopy's logs and job plans
/// and the stage's scratch go there. Tests whose sshd hosts have no temp disk set it. Unset on
/// Azure.
pub const TEMP_DIR_ENV: &str = "DSINFRA_TEMP_DIR";

/// The temp-disk override from [`TEMP_DIR_ENV`], if set and not empty.
fn temp_dir() -> Option<String> {
    std::env::var(TEMP_DIR_ENV).ok().filter(|v| !v.is_empty())
}

/// An image as one line: `publisher:offer:sku:version` for a marketplace reference, the text
/// itself otherwise.
fn image_name(image: &Value) -> String {
    if let Some(text) = image.as_str() {
        return text.to_owned();
    }
    ["publisher", "offer", "sku", "version"]
        .iter()
        .filter_map(|k| image.get(k).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(":")
}

/// The `beeond` command override from [`BEEOND_ENV`], if set and not empty.
fn beeond_command() -> Option<String> {
    std::env::var(BEEOND_ENV).ok().filter(|v| !v.is_empty())
}

/// The environment variable naming a directory that stands in for `/` where data-disk steps
/// look for Azure's LUN links and the fstab ([`NodeContext::disk_root`]): tests point it at
/// links to loop devices, so that formatting and mounting run for real without touching the
/// machine's own fstab. Unset on Azure.
pub const DISK_ROOT_ENV: &str = "DSINFRA_DISK_ROOT";

/// The data-disk root override from [`DISK_ROOT_ENV`], if set and not empty.
fn disk_root() -> Option<String> {
    std::env::var(DISK_ROOT_ENV).ok().filter(|v| !v.is_empty())
}

/// The environment variable naming a directory that stands in for `/` for the `beeond` step kind
/// ([`NodeContext::beeond_root`]): its `bin` comes first on the `PATH` of the BeeOND scripts and
/// of the commands they run on other nodes over the mesh (so stand-ins for apt-get, dpkg,
/// modinfo, findmnt, beeond and beegfs-ctl answer instead of the system's), and the system paths
/// those scripts write (`/etc/apt`, `/etc/beegfs`, `/var/log/beeond`, the client's init script)
/// are under it. Read on the workstation, like `DSINFRA_DISK_ROOT`: tests whose sshd hosts are
/// this machine run every line of the step kind without changing it. Unset on Azure.
pub const BEEOND_ROOT_ENV: &str = "DSINFRA_BEEOND_ROOT";

/// The BeeOND root override from [`BEEOND_ROOT_ENV`], if set and not empty.
fn beeond_root() -> Option<String> {
    std::env::var(BEEOND_ROOT_ENV)
        .ok()
        .filter(|v| !v.is_empty())
}

/// The environment variable naming a directory that stands in for the mesh user's `~/.ssh`
/// ([`MeshSettings`]): the head's key pair, its SSH config and known hosts go there, and every
/// node appends the head's key to `authorized_keys` in it. Read on the workstation, like
/// `DSINFRA_BEEOND`: tests whose sshd hosts share this machine point it at a scratch directory
/// their hosts accept keys from, so the mesh never touches `/root/.ssh`. Unset on Azure.
pub const MESH_DIR_ENV: &str = "DSINFRA_MESH_DIR";

/// The environment variable naming the user the head logs in as on the other nodes over the
/// mesh (root when unset): with [`MESH_DIR_ENV`], a test host's login user.
pub const MESH_USER_ENV: &str = "DSINFRA_MESH_USER";

/// The environment variable naming a directory that stands in for the admin user's `~/.ssh` on
/// every node, where the `ssh_mesh` step puts that user's mesh ([`MeshSettings::admin_dir`]).
/// Read on the workstation; tests whose hosts share one login user and one filesystem point it
/// at a scratch directory. Unset on Azure: the user's own `~/.ssh`.
pub const MESH_ADMIN_DIR_ENV: &str = "DSINFRA_MESH_ADMIN_DIR";

/// Where the SSH mesh lives: root's `~/.ssh` unless [`MESH_DIR_ENV`] and [`MESH_USER_ENV`] move
/// it; the admin user's `~/.ssh` unless [`MESH_ADMIN_DIR_ENV`] moves that.
fn mesh_settings() -> MeshSettings {
    let read = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    let mut mesh = mesh_settings_from(read(MESH_DIR_ENV), read(MESH_USER_ENV));
    mesh.admin_dir = read(MESH_ADMIN_DIR_ENV);
    mesh
}

/// [`mesh_settings`] from the two values: `dir` holds the key pair, config and
/// `authorized_keys`, as `~/.ssh` does.
fn mesh_settings_from(dir: Option<String>, user: Option<String>) -> MeshSettings {
    let mut mesh = MeshSettings::default();
    if let Some(dir) = dir {
        let dir = dir.trim_end_matches('/').to_owned();
        mesh.authorized_keys = format!("{dir}/authorized_keys");
        mesh.ssh_dir = dir;
    }
    if let Some(user) = user {
        mesh.user = user;
    }
    mesh
}

/// What a block's steps refer to by address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// Containers and file shares (`storage_account.data.container.raw`).
    pub storage: BTreeSet<Address>,
    /// `sas` resources (`sas.read`).
    pub sas: BTreeSet<Address>,
    /// Storage accounts whose key some step needs (steps on storage without a `sas`), as the
    /// account resource (`storage_account.data.account`).
    pub account_keys: BTreeSet<Address>,
}

/// Every address-looking text in a parameter value, nested values included.
fn addresses_in(value: &Value, out: &mut Vec<Address>) {
    match value {
        Value::String(text) => {
            if let Ok(address) = text.parse::<Address>() {
                out.push(address);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| addresses_in(v, out)),
        Value::Object(map) => map.values().for_each(|v| addresses_in(v, out)),
        _ => {}
    }
}

/// The storage account resource of a container or share address.
pub fn account_of(storage: &Address) -> Address {
    Address::new(&storage.kind, &storage.name, None, "account")
}

/// What `steps` refer to among `desired`'s resources.
pub fn references(desired: &Desired, steps: &[&Step]) -> References {
    let mut refs = References::default();
    for step in steps {
        let mut found = Vec::new();
        for value in step.params.values() {
            addresses_in(value, &mut found);
        }
        let has_sas = step.params.get("sas").is_some_and(|v| !v.is_null());
        for address in found {
            // `storage_key = storage_account.data` names the account block: its key.
            if address.kind == "storage_account" && address.part.is_empty() {
                let account = account_of(&address);
                if desired.resource(&account).is_some() {
                    refs.account_keys.insert(account);
                }
                continue;
            }
            match desired.resource(&address).map(|r| r.kind) {
                Some(ResourceKind::BlobContainer | ResourceKind::FileShare) => {
                    if !has_sas {
                        refs.account_keys.insert(account_of(&address));
                    }
                    refs.storage.insert(address);
                }
                Some(ResourceKind::Sas) => {
                    refs.sas.insert(address);
                }
                _ => {}
            }
        }
    }
    refs
}

/// The addresses a block's steps need created before they can run: the block's own resources,
/// what its steps refer to, and everything those depend on.
pub fn needed_resources(desired: &Desired, block: &Address) -> BTreeSet<Address> {
    let steps: Vec<&Step> = desired.steps.iter().filter(|s| &s.block == block).collect();
    let refs = references(desired, &steps);
    let mut todo: Vec<Address> = desired
        .resources
        .iter()
        .filter(|r| &r.address.block_address() == block)
        .map(|r| r.address.clone())
        .chain(refs.storage)
        .chain(refs.sas)
        .chain(refs.account_keys)
        .collect();
    let mut needed = BTreeSet::new();
    while let Some(address) = todo.pop() {
        if !needed.insert(address.clone()) {
            continue;
        }
        if let Some(resource) = desired.resource(&address) {
            todo.extend(resource.depends_on.iter().cloned());
        }
    }
    needed
}

/// The Ubuntu release an image reference names (`20.04`, `22.04`, `24.04`), read from its
/// offer and SKU (`0001-com-ubuntu-server-jammy` / `22_04-lts-gen2`, DSVM `ubuntu-2204`).
pub fn ubuntu_release(image: &Value) -> Option<String> {
    let text = ["offer", "sku"]
        .iter()
        .filter_map(|k| image.get(k).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase();
    let known = [
        ("20.04", ["20_04", "2004", "focal"]),
        ("22.04", ["22_04", "2204", "jammy"]),
        ("24.04", ["24_04", "2404", "noble"]),
    ];
    known
        .iter()
        .find(|(_, marks)| marks.iter().any(|m| text.contains(m)))
        .map(|(release, _)| (*release).to_owned())
}

/// The runner's and the library's view of one node: its Azure name, and the address and port
/// the other nodes of the block reach its sshd at (the emulator's local endpoint for the private
/// IP when emulated, else the private IP on port 22).
fn cluster_node(node: &NodeReach, endpoints: &Endpoints) -> ClusterNode {
    let (ip, port) = endpoints.node_address(node.private_ip.as_deref().unwrap_or_default());
    ClusterNode {
        name: node.name.clone(),
        private_ip: ip,
        ssh_port: port,
    }
}

/// The context of `block` without secrets and listings: nodes (head first), InfiniBand from the
/// catalog, the admin user, the Ubuntu release of the image, the storage targets its steps
/// name (public Azure endpoints until [`super::credentials::add_credentials`] reads the
/// accounts' own), and the node-side tool and temp-disk overrides ([`AZCOPY_ENV`],
/// [`TEMP_DIR_ENV`]).
pub fn base_context(
    desired: &Desired,
    block: &Address,
    nodes: &[NodeReach],
    endpoints: &Endpoints,
    refs: &References,
) -> NodeContext {
    let mut ctx = NodeContext::new(
        &desired.experiment,
        &block.to_string(),
        nodes.iter().map(|n| cluster_node(n, endpoints)).collect(),
    );
    // An AML node is no resource: its size is its compute's (which has no image: the service
    // picks the node OS, so the Ubuntu release stays unknown and steps read /etc/os-release).
    let head_vm = nodes.first().and_then(|n| {
        desired
            .resource(&n.vm)
            .or_else(|| n.aml_compute().and_then(|c| desired.resource(&c)))
    });
    if let Some(vm) = head_vm {
        ctx.infiniband = vm
            .attrs
            .get("size")
            .and_then(Value::as_str)
            .and_then(|size| desired.vm_size(size))
            .is_some_and(|s| s.infiniband);
        ctx.ubuntu = vm.attrs.get("image").and_then(ubuntu_release);
        ctx.vm_size = vm
            .attrs
            .get("size")
            .and_then(Value::as_str)
            .map(str::to_owned);
        ctx.image = vm.attrs.get("image").map(image_name);
    }
    if let Some(head) = nodes.first() {
        ctx.admin_user.clone_from(&head.user);
    }
    // The mesh pins the same keys dsinfra itself checks each node against.
    ctx.host_keys = nodes
        .iter()
        .filter_map(|n| Some((n.name.clone(), n.host_key.clone()?)))
        .collect();
    ctx.storage = storage_targets(desired, &refs.storage);
    // The workstation's seams are read here, where every context the engine builds starts
    // (apply, stop, release), so a step renders the same script whichever of them renders it.
    ctx.azcopy = azcopy_command();
    ctx.temp_dir = temp_dir();
    ctx.beeond = beeond_command();
    ctx.beeond_root = beeond_root();
    ctx.elbencho = elbencho_command();
    ctx.disk_root = disk_root();
    ctx.mesh = mesh_settings();
    ctx
}

/// Containers and shares by address, resolved to their Azure names.
fn storage_targets(
    desired: &Desired,
    addresses: &BTreeSet<Address>,
) -> BTreeMap<String, StorageTarget> {
    addresses
        .iter()
        .filter_map(|address| {
            let resource = desired.resource(address)?;
            let account = resource.parent.as_deref()?;
            let mut target = StorageTarget::azure(account, &resource.name);
            target.nfs = resource.kind == ResourceKind::FileShare
                && resource.attrs.get("protocol").and_then(Value::as_str) == Some("NFS");
            Some((address.to_string(), target))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::reach::Route;
    use crate::model::{Lifecycle, Resource, RunPolicy, StepScope};
    use serde_json::json;

    fn resource(address: &str, kind: ResourceKind, name: &str, parent: Option<&str>) -> Resource {
        Resource {
            address: address.parse().expect("valid address"),
            kind,
            name: name.into(),
            parent: parent.map(str::to_owned),
            resource_group: "rg".into(),
            attrs: crate::model::Attrs::new(),
            depends_on: BTreeSet::new(),
            lifecycle: Lifecycle::default(),
            span: None,
            attr_spans: BTreeMap::new(),
        }
    }

    fn step(block: &str, kind: &str, params: Value) -> Step {
        Step {
            block: block.parse().expect("valid block"),
            name: kind.into(),
            kind: kind.into(),
            scope: StepScope::All,
            run: RunPolicy::Once,
            params: serde_json::from_value(params).expect("a map"),
            span: None,
        }
    }

    fn desired() -> Desired {
        let mut account = resource(
            "storage_account.data.account",
            ResourceKind::StorageAccount,
            "expdata01",
            None,
        );
        account
            .depends_on
            .insert("resource_group.main".parse().expect("ok"));
        let mut container = resource(
            "storage_account.data.container.raw",
            ResourceKind::BlobContainer,
            "raw",
            Some("expdata01"),
        );
        container.depends_on.insert(account.address.clone());
        let mut share = resource(
            "storage_account.data.file_share.nfs",
            ResourceKind::FileShare,
            "nfs",
            Some("expdata01"),
        );
        share.attrs.insert("protocol".into(), json!("NFS"));
        let mut sas = resource("sas.read", ResourceKind::Sas, "read", Some("expdata01"));
        sas.depends_on.insert(container.address.clone());
        let mut vm = resource("vm.gpu.vm", ResourceKind::VirtualMachine, "exp-gpu", None);
        vm.attrs.insert("size".into(), json!("Standard_ND40rs_v2"));
        vm.attrs.insert(
            "image".into(),
            json!({"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204"}),
        );
        vm.depends_on.insert("vm.gpu.nic".parse().expect("ok"));
        let nic = resource(
            "vm.gpu.nic",
            ResourceKind::NetworkInterface,
            "exp-gpu-nic",
            None,
        );
        let other = resource("vm.cpu.vm", ResourceKind::VirtualMachine, "exp-cpu", None);
        Desired {
            experiment: "exp".into(),
            azure: crate::model::AzureSettings {
                subscription: None,
                location: "eastus".into(),
                resource_group: "rg".into(),
                tags: BTreeMap::new(),
                endpoint: None,
            },
            resources: vec![account, container, share, sas, vm, nic, other],
            outputs: Vec::new(),
            manifest_hash: String::new(),
            notes: Vec::new(),
            park_idle: std::collections::BTreeMap::new(),
            kube_objects: Vec::new(),
            steps: vec![
                step(
                    "vm.gpu",
                    "stage",
                    json!({"from": "storage_account.data.container.raw", "sas": "sas.read"}),
                ),
                step(
                    "vm.gpu",
                    "nfs_cache",
                    json!({"share": "storage_account.data.file_share.nfs"}),
                ),
            ],
            catalog: crate::catalog::Catalog::shipped(),
        }
    }

    #[test]
    fn references_name_storage_sas_and_the_keys_of_steps_without_a_sas() {
        let d = desired();
        let steps: Vec<&Step> = d.steps.iter().collect();
        let refs = references(&d, &steps);
        let text =
            |set: &BTreeSet<Address>| set.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            text(&refs.storage),
            [
                "storage_account.data.container.raw",
                "storage_account.data.file_share.nfs"
            ]
        );
        assert_eq!(text(&refs.sas), ["sas.read"]);
        assert_eq!(text(&refs.account_keys), ["storage_account.data.account"]);
    }

    #[test]
    fn a_script_step_names_the_sas_and_the_account_whose_key_it_reads() {
        let mut d = desired();
        d.steps = vec![step(
            "vm.gpu",
            "script",
            json!({"script": "true", "sas": "sas.read", "storage_key": "storage_account.data"}),
        )];
        let steps: Vec<&Step> = d.steps.iter().collect();
        let refs = references(&d, &steps);
        let text =
            |set: &BTreeSet<Address>| set.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(text(&refs.sas), ["sas.read"]);
        assert_eq!(text(&refs.account_keys), ["storage_account.data.account"]);
        assert!(refs.storage.is_empty());
        // An account the manifest does not have is no reference.
        d.steps[0].params = [("storage_key".to_owned(), json!("storage_account.nope"))].into();
        let steps: Vec<&Step> = d.steps.iter().collect();
        assert!(references(&d, &steps).account_keys.is_empty());
    }

    #[test]
    fn a_block_needs_its_own_resources_what_its_steps_name_and_their_dependencies() {
        let d = desired();
        let needed: Vec<String> = needed_resources(&d, &"vm.gpu".parse().expect("ok"))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            needed,
            [
                "resource_group.main",
                "sas.read",
                "storage_account.data.account",
                "storage_account.data.container.raw",
                "storage_account.data.file_share.nfs",
                "vm.gpu.nic",
                "vm.gpu.vm",
            ]
        );
    }

    /// Issue 17: the nodes of an `aml_cluster` reach each other on their private IPs (port 22
    /// inside the cluster's network), not on the public address and port dsinfra dials: the
    /// nodefile and the mesh list those, named by node id; the compute gives the size.
    #[test]
    fn aml_nodes_mesh_on_their_private_ips_and_the_compute_gives_the_size() {
        let mut d = desired();
        let mut compute = resource(
            "aml_cluster.scratch.compute",
            crate::engine::kinds::ml_compute::KIND,
            "scratch-1a2b",
            Some("exp-ws"),
        );
        compute
            .attrs
            .insert("size".into(), json!("Standard_ND40rs_v2"));
        d.resources.push(compute);
        let block: Address = "aml_cluster.scratch".parse().expect("ok");
        let nodes: Vec<NodeReach> = (0..2u8)
            .map(|i| NodeReach {
                vm: Address::new("aml_cluster", "scratch", Some(u32::from(i)), "node"),
                block: block.clone(),
                index: usize::from(i),
                name: format!("tvmps_{i}"),
                user: "azureuser".into(),
                public_ip: Some("20.1.2.3".into()),
                private_ip: Some(format!("10.0.0.{}", 4 + i)),
                host_key: None,
                route: Route::Direct {
                    host: "20.1.2.3".into(),
                    port: 50000 + u16::from(i),
                },
            })
            .collect();
        let ctx = base_context(
            &d,
            &block,
            &nodes,
            &Endpoints::direct(),
            &References::default(),
        );
        assert_eq!(
            ctx.nodes,
            [
                ClusterNode {
                    name: "tvmps_0".into(),
                    private_ip: "10.0.0.4".into(),
                    ssh_port: 22
                },
                ClusterNode {
                    name: "tvmps_1".into(),
                    private_ip: "10.0.0.5".into(),
                    ssh_port: 22
                }
            ]
        );
        assert!(ctx.infiniband, "ND40rs_v2 from the compute's size");
        assert_eq!(ctx.ubuntu, None, "the service picks the node image");
    }

    #[test]
    fn the_mesh_is_roots_unless_a_directory_and_user_move_it() {
        assert_eq!(mesh_settings_from(None, None), MeshSettings::default());
        assert_eq!(
            mesh_settings_from(Some("/tmp/farm/mesh/".into()), Some("dsinfra-test".into())),
            MeshSettings {
                user: "dsinfra-test".into(),
                ssh_dir: "/tmp/farm/mesh".into(),
                authorized_keys: "/tmp/farm/mesh/authorized_keys".into(),
                admin_dir: None,
            }
        );
        assert_eq!(
            mesh_settings_from(None, Some("azureuser".into())).ssh_dir,
            "/root/.ssh"
        );
    }

    #[test]
    fn ubuntu_releases_are_read_from_offers_and_skus() {
        let image = |offer: &str, sku: &str| json!({"offer": offer, "sku": sku});
        assert_eq!(
            ubuntu_release(&image("0001-com-ubuntu-server-focal", "20_04-lts")).as_deref(),
            Some("20.04")
        );
        assert_eq!(
            ubuntu_release(&image("ubuntu-2204", "2204-gen2")).as_deref(),
            Some("22.04")
        );
        assert_eq!(
            ubuntu_release(&image("ubuntu-24_04-lts", "server")).as_deref(),
            Some("24.04")
        );
        assert_eq!(ubuntu_release(&image("centos", "7_9")), None);
    }

    #[test]
    fn the_base_context_has_nodes_infiniband_release_user_and_storage() {
        let d = desired();
        let block: Address = "vm.gpu".parse().expect("ok");
        let node = NodeReach {
            vm: "vm.gpu.vm".parse().expect("ok"),
            block: block.clone(),
            index: 0,
            name: "exp-gpu".into(),
            user: "alice".into(),
            public_ip: Some("20.0.0.4".into()),
            private_ip: Some("10.0.0.4".into()),
            host_key: Some("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx3 exp-gpu".into()),
            route: Route::Direct {
                host: "20.0.0.4".into(),
                port: 22,
            },
        };
        let steps: Vec<&Step> = d.steps.iter().collect();
        let refs = references(&d, &steps);
        let ctx = base_context(
            &d,
            &block,
            std::slice::from_ref(&node),
            &Endpoints::direct(),
            &refs,
        );
        assert_eq!(
            ctx.nodes,
            [ClusterNode {
                name: "exp-gpu".into(),
                private_ip: "10.0.0.4".into(),
                ssh_port: 22
            }]
        );
        assert!(ctx.infiniband);
        assert_eq!(ctx.ubuntu.as_deref(), Some("22.04"));
        assert_eq!(ctx.admin_user, "alice");
        // The mesh pins the key the state pins for the node.
        assert_eq!(
            ctx.host_keys["exp-gpu"],
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx3 exp-gpu"
        );
        let share = &ctx.storage["storage_account.data.file_share.nfs"];
        assert!(share.nfs);
        assert_eq!(
            ctx.storage["storage_account.data.container.raw"].blob_endpoint,
            "https://expdata01.blob.core.windows.net"
        );
        let emulated = Endpoints::from_emulator(&[crate::engine::reach::SshEndpoint {
            ip_address: "10.0.0.4".into(),
            endpoint: "127.0.0.1:2201".into(),
            public_ip_id: None,
            port: None,
        }]);
        let ctx = base_context(&d, &block, &[node], &emulated, &refs);
        assert_eq!(
            (ctx.nodes[0].private_ip.as_str(), ctx.nodes[0].ssh_port),
            ("127.0.0.1", 2201)
        );
    }
}
