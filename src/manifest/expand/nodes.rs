//! The resources of a `vm` or `cluster` block's nodes, built from what [`Machine::read`] read:
//! per node a public IP, a NIC, the VM and its auto-shutdown schedule, in the order Azure needs
//! them; per block a proximity placement group and, for a cluster of an InfiniBand size, the
//! availability set that is its fabric ([`push_fabric`]).

use serde_json::{Value as Json, json};

use crate::addr::Address;
use crate::model::{Attrs, Lifecycle, ResourceKind};

use super::super::eval::EvalBlock;
use super::super::images::ImageRef;
use super::super::names;
use super::compute::Machine;
use super::{Attachment, Expander, Origin};

/// What every node of one block is built from.
pub(super) struct Kit<'a> {
    /// The `vm` or `cluster` block.
    pub block: &'a EvalBlock,
    /// What its nodes share.
    pub machine: &'a Machine,
    /// Its `lifecycle`.
    pub lifecycle: &'a Lifecycle,
    /// The network's VNet, when the block has a network.
    pub vnet: Option<Address>,
    /// The network's NSG, when the block has a network.
    pub nsg: Option<Address>,
    /// The proximity placement group, when the nodes share one.
    pub ppg: Option<Address>,
    /// The availability set of a cluster's InfiniBand fabric.
    pub fabric: Option<Address>,
    /// The data disks attached to the block.
    pub disks: Vec<Attachment>,
}

/// Fault and update domains of a cluster's availability set. One of each: a tightly coupled job
/// (MPI, NCCL, BeeOND striping over every node) dies with any one node, so spreading nodes over
/// fault domains buys no availability and only narrows where Azure can place them (published HPC
/// advice for GPU scale sets sets `platformFaultDomainCount = 1` for the same reason), and one
/// update domain means planned maintenance interrupts the job once instead of once per domain.
const FABRIC_DOMAINS: i64 = 1;

/// The availability set that puts a cluster of an InfiniBand size on one InfiniBand fabric: Azure
/// connects VMs over InfiniBand only within one availability set (or one single-placement-group
/// scale set), and a proximity placement group alone does not. Every node names it; a node can
/// join it only at creation, so `availability_set` forces a VM's replacement (model::kind). The
/// set goes in the cluster's placement group when it has one. Returns its address.
pub(super) fn push_fabric(
    ex: &mut Expander<'_>,
    block: &EvalBlock,
    lifecycle: &Lifecycle,
    ppg: Option<&Address>,
) -> Address {
    let kind = block.ident.clone();
    let label = block.label().to_owned();
    let address = Address::new(&kind, &label, None, "availability_set");
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    // Aligned: the nodes have managed disks, which ARM refuses in a Classic set.
    attrs.insert("sku".into(), json!("Aligned"));
    attrs.insert("fault_domain_count".into(), json!(FABRIC_DOMAINS));
    attrs.insert("update_domain_count".into(), json!(FABRIC_DOMAINS));
    attrs.insert(
        "proximity_placement_group".into(),
        ppg.map_or(Json::Null, |p| json!(p.to_string())),
    );
    ex.push(
        address.clone(),
        ResourceKind::AvailabilitySet,
        names::compose(&ex.experiment.id, &label, "avset"),
        attrs,
        ppg.cloned(),
        Origin {
            parent: None,
            lifecycle,
            span: Some(&block.header),
        },
    );
    address
}

/// The proximity placement group of a cluster's nodes.
pub(super) fn push_placement_group(
    ex: &mut Expander<'_>,
    block: &EvalBlock,
    machine: &Machine,
    lifecycle: &Lifecycle,
    address: &Address,
) {
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    attrs.insert("type".into(), json!("Standard"));
    attrs.insert(
        "vm_sizes".into(),
        json!(
            machine
                .size
                .as_ref()
                .map(|s| vec![s.value.clone()])
                .unwrap_or_default()
        ),
    );
    if let Some(zone) = &machine.zone {
        attrs.insert("zone".into(), json!(zone));
    }
    ex.push(
        address.clone(),
        ResourceKind::ProximityPlacementGroup,
        names::compose(&ex.experiment.id, block.label(), "ppg"),
        attrs,
        [],
        Origin {
            parent: None,
            lifecycle,
            span: Some(&block.header),
        },
    );
}

/// One node: its public IP (if it has one), NIC, VM and auto-shutdown schedule. Returns the
/// VM's address. `index` is the node's number in a cluster.
pub(super) fn push_node(
    ex: &mut Expander<'_>,
    kit: &Kit<'_>,
    index: Option<u32>,
    public: bool,
) -> Address {
    let (kind, label) = (kit.block.ident.as_str(), kit.block.label());
    let id = ex.experiment.id.clone();
    let (vm_name, suffix) = match index {
        Some(i) => (names::compose(&id, label, &i.to_string()), format!("{i}-")),
        None => (names::compose(&id, label, ""), String::new()),
    };
    let pip = Address::new(kind, label, index, "public_ip");
    let nic = Address::new(kind, label, index, "nic");
    let vm = Address::new(kind, label, index, "vm");
    let header = Some(&kit.block.header);
    if public {
        let mut attrs = Attrs::new();
        attrs.insert("location".into(), ex.location());
        attrs.insert("sku".into(), json!("Standard"));
        attrs.insert("allocation".into(), json!("Static"));
        if let Some(zone) = &kit.machine.zone {
            attrs.insert("zone".into(), json!(zone));
        }
        let name = names::compose(&id, label, &format!("{suffix}pip"));
        let kind = ResourceKind::PublicIp;
        ex.push(
            pip.clone(),
            kind,
            name,
            attrs,
            [],
            Origin {
                parent: None,
                lifecycle: kit.lifecycle,
                span: header,
            },
        );
    }
    let (nic_attrs, nic_deps) = nic_attrs(ex, kit, public.then_some(&pip));
    let name = names::compose(&id, label, &format!("{suffix}nic"));
    let nic_kind = ResourceKind::NetworkInterface;
    ex.push(
        nic.clone(),
        nic_kind,
        name,
        nic_attrs,
        nic_deps,
        Origin {
            parent: None,
            lifecycle: kit.lifecycle,
            span: header,
        },
    );
    let (attrs, deps) = vm_attrs(ex, kit, &nic);
    let vm_kind = ResourceKind::VirtualMachine;
    ex.push(
        vm.clone(),
        vm_kind,
        vm_name.clone(),
        attrs,
        deps,
        Origin {
            parent: None,
            lifecycle: kit.lifecycle,
            span: header,
        },
    );
    if let Some(span) = &kit.machine.security.asked_at {
        // The manifest chose the VM's security itself: a change to it replaces the VM, while a
        // changed default keeps what an existing VM has (engine::preflight::security).
        ex.locate(&vm, "security", span.clone());
    }
    if let Some((time, zone)) = &kit.machine.park {
        let mut attrs = Attrs::new();
        attrs.insert("location".into(), ex.location());
        attrs.insert("time".into(), json!(time));
        attrs.insert("time_zone".into(), json!(zone));
        attrs.insert("vm".into(), json!(vm.to_string()));
        attrs.insert("status".into(), json!("Enabled"));
        ex.push(
            Address::new(kind, label, index, "auto_shutdown"),
            ResourceKind::AutoShutdownSchedule,
            names::shutdown_schedule_name(&vm_name),
            attrs,
            [vm.clone()],
            Origin {
                parent: None,
                lifecycle: kit.lifecycle,
                span: header,
            },
        );
    }
    vm
}

/// A node's NIC: in the block's subnet, behind its network's NSG, with its public IP if any.
fn nic_attrs(ex: &Expander<'_>, kit: &Kit<'_>, pip: Option<&Address>) -> (Attrs, Vec<Address>) {
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    attrs.insert(
        "subnet".into(),
        json!(kit.vnet.as_ref().map(ToString::to_string)),
    );
    attrs.insert("subnet_name".into(), json!(kit.machine.subnet));
    attrs.insert(
        "nsg".into(),
        json!(kit.nsg.as_ref().map(ToString::to_string)),
    );
    attrs.insert(
        "public_ip".into(),
        pip.map_or(Json::Null, |p| json!(p.to_string())),
    );
    attrs.insert(
        "accelerated_networking".into(),
        json!(
            kit.machine
                .info
                .as_ref()
                .is_some_and(|s| s.accelerated_networking == Some(true))
        ),
    );
    let mut deps: Vec<Address> = kit.vnet.iter().chain(kit.nsg.iter()).cloned().collect();
    deps.extend(pip.cloned());
    (attrs, deps)
}

/// A node's VM body, in the plan's words, and what it waits for.
fn vm_attrs(ex: &Expander<'_>, kit: &Kit<'_>, nic: &Address) -> (Attrs, Vec<Address>) {
    let machine = kit.machine;
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    attrs.insert(
        "size".into(),
        json!(machine.size.as_ref().map(|s| s.value.clone())),
    );
    attrs.insert(
        "image".into(),
        machine.image.as_ref().map_or(Json::Null, ImageRef::to_json),
    );
    if !machine.fallbacks.is_empty() {
        // Resolved and removed by the plan (engine::preflight::resolve_sizes).
        attrs.insert("sizes".into(), json!(machine.fallbacks));
    }
    attrs.insert("admin_username".into(), json!(machine.admin));
    attrs.insert("ssh_public_keys".into(), json!(machine.ssh_keys));
    attrs.insert("os_disk_size_gb".into(), json!(machine.os_disk_gb));
    attrs.insert("os_disk_sku".into(), json!(machine.os_disk_sku));
    attrs.insert("zone".into(), json!(machine.zone));
    attrs.insert("nic".into(), json!(nic.to_string()));
    attrs.insert(
        "proximity_placement_group".into(),
        kit.ppg
            .as_ref()
            .map_or(Json::Null, |p| json!(p.to_string())),
    );
    if let Some(set) = &kit.fabric {
        attrs.insert("availability_set".into(), json!(set.to_string()));
    }
    attrs.insert(
        "data_disks".into(),
        json!(
            kit.disks
                .iter()
                .map(|d| json!({"lun": d.lun, "disk": d.disk.to_string()}))
                .collect::<Vec<_>>()
        ),
    );
    attrs.insert("password_auth_disabled".into(), json!(true));
    attrs.insert("security".into(), machine.security.to_json());
    // Only a spot VM carries these: a regular VM's attributes stay what they were before spot
    // existed, so no plan sees a change in VMs made by earlier versions.
    if let Some(spot) = &machine.spot {
        attrs.insert("priority".into(), json!("Spot"));
        attrs.insert("eviction_policy".into(), json!(spot.eviction));
        // -1 as the integer it is written as (the plan shows `-1`, not `-1.0`).
        let cap = if (spot.max_price + 1.0).abs() < f64::EPSILON {
            json!(-1)
        } else {
            json!(spot.max_price)
        };
        attrs.insert("max_price".into(), cap);
    }
    let mut deps = vec![nic.clone()];
    deps.extend(kit.disks.iter().map(|d| d.disk.clone()));
    deps.extend(kit.ppg.iter().cloned());
    deps.extend(kit.fabric.iter().cloned());
    (attrs, deps)
}
