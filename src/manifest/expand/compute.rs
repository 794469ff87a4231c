//! `vm` and `cluster` blocks: the attributes both share (size, image, key, disk, network, park)
//! are decoded and checked once by [`Machine::read`]; `nodes.rs` builds each node's resources
//! from it, `boot.rs` reads the image and the park schedule.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value as Json;

use crate::addr::Address;
use crate::catalog::{self, Catalog, Retirement, VmSize};
use crate::diag::{Diagnostic, Span, did_you_mean};

use super::super::decode::{self, BlockAttrs, Located, OneOf, Ref, Unknown};
use super::super::eval::EvalBlock;
use super::super::images::ImageRef;
use super::super::validate::ssh_key;
use super::super::values::MAX_NODES;
use super::boot::{read_image, read_park};
use super::check::Check;
use super::security::{self, Security};
use super::targets::{self, DiskSku, Zone};
use super::{Attachment, Expander, NetworkInfo, idle, nodes, spot, steps};

/// Usernames Azure refuses for Linux VMs.
const RESERVED_USERS: [&str; 31] = [
    "1",
    "123",
    "a",
    "actuser",
    "adm",
    "admin",
    "admin1",
    "admin2",
    "administrator",
    "aspnet",
    "backup",
    "console",
    "david",
    "guest",
    "john",
    "owner",
    "root",
    "server",
    "sql",
    "support",
    "support_388945a0",
    "sys",
    "test",
    "test1",
    "test2",
    "test3",
    "user",
    "user1",
    "user2",
    "user3",
    "user4",
];

/// The attributes `vm` and `cluster` blocks share.
#[derive(Deserialize, Default)]
struct MachineAttrs {
    size: Option<Located<String>>,
    sizes: Option<Located<Vec<String>>>,
    image: Option<Located<String>>,
    trusted_launch: Option<Located<bool>>,
    secure_boot: Option<Located<bool>>,
    ssh_key: Option<Located<Vec<String>>>,
    admin_username: Option<Located<String>>,
    os_disk_gb: Option<Located<i64>>,
    os_disk_sku: Option<OneOf<DiskSku>>,
    zone: Option<OneOf<Zone>>,
    network: Option<Ref<targets::Network>>,
    subnet: Option<Located<String>>,
    priority: Option<OneOf<spot::Priority>>,
    max_price: Option<Located<f64>>,
    eviction: Option<OneOf<spot::Eviction>>,
}

impl BlockAttrs for MachineAttrs {}

/// A `vm` block's own attributes.
#[derive(Deserialize, Default)]
struct VmAttrs {
    public_ip: Option<bool>,
}

impl BlockAttrs for VmAttrs {}

/// A `cluster` block's own attributes.
#[derive(Deserialize, Default)]
struct ClusterAttrs {
    count: Option<Located<i64>>,
    head_public_ip: Option<bool>,
    placement_group: Option<bool>,
}

impl BlockAttrs for ClusterAttrs {}

/// What every node of a `vm` or `cluster` has in common.
pub(super) struct Machine {
    /// `size`, or the first of `sizes`.
    pub size: Option<Located<String>>,
    /// The ordered candidates of `sizes = [...]` (the first is `size`); empty without one. The
    /// plan resolves them against quota (engine::preflight).
    pub fallbacks: Vec<String>,
    /// The size's catalog entry.
    pub info: Option<VmSize>,
    /// The image.
    pub image: Option<ImageRef>,
    /// Trusted Launch, Secure Boot and vTPM.
    pub security: Security,
    /// The public keys.
    pub ssh_keys: Vec<String>,
    /// The admin user.
    pub admin: String,
    /// The OS disk's size, when set.
    pub os_disk_gb: Option<i64>,
    /// The OS disk's SKU.
    pub os_disk_sku: String,
    /// The availability zone, when set.
    pub zone: Option<String>,
    /// The network's label.
    pub network: Option<String>,
    /// The subnet's name.
    pub subnet: Option<String>,
    /// The auto-shutdown time and Windows time zone.
    pub park: Option<(String, String)>,
    /// `park { idle }`: the idle window after which the head parks the block, where written.
    pub park_idle: Option<Located<std::time::Duration>>,
    /// `priority = "spot"`: the eviction policy and price cap; `None` for regular VMs.
    pub spot: Option<spot::Spot>,
}

impl Machine {
    fn read(ex: &mut Expander<'_>, block: &EvalBlock) -> Self {
        let networks = ex.networks.clone();
        let location = ex.azure.location.clone();
        // Before decoding: a missing size is the block's first problem, as it always was.
        let size_missing = block.attr("sizes").is_none() && block.attr("size").is_none();
        if size_missing {
            ex.diags
                .push(decode::missing(block, "size", "\"Standard_NC6s_v3\""));
        }
        let attrs: MachineAttrs =
            decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
        let mut check = Check::new(block, ex.diags);
        let mut unknown = ex.unknown_sizes.as_mut();
        let (size, fallbacks) = read_sizes(
            &mut check,
            (attrs.size, attrs.sizes),
            &location,
            (&ex.catalog, unknown.as_deref_mut()),
        );
        let info = size
            .as_ref()
            .and_then(|s| check_size(&mut check, s, &location, (&ex.catalog, unknown)));
        let info = info.as_ref();
        let spot = spot::read(
            &mut check,
            (attrs.priority, attrs.max_price, attrs.eviction),
            (info, &fallbacks),
            &location,
        );
        let image = read_image(&mut check, attrs.image, info);
        let security = security::choose(
            &mut check,
            (attrs.trusted_launch, attrs.secure_boot),
            image.as_ref(),
            info,
        );
        let ssh_keys = read_keys(&mut check, attrs.ssh_key);
        let admin = attrs
            .admin_username
            .filter(|u| check_username(&mut check, u))
            .map_or_else(|| "azureuser".to_owned(), |u| u.value);
        let os_disk_gb = check
            .in_range(attrs.os_disk_gb, "os_disk_gb", (30, 4095), " GiB")
            .map(|n| n.value);
        let os_disk_sku = attrs
            .os_disk_sku
            .filter(|s| premium_fits(&mut check, info, &s.value, s.span.clone(), "its OS disk"))
            .map_or_else(|| "StandardSSD_LRS".to_owned(), |s| s.value);
        let infiniband = info.is_some_and(|s| s.infiniband);
        if block.ident == "cluster"
            && infiniband
            && let Some(zone) = &attrs.zone
        {
            check.report(zone_with_fabric(&check.title(), zone));
        }
        let zone = attrs.zone.map(|z| z.value);
        let network = choose_network(&mut check, attrs.network, &networks);
        if infiniband
            && let Some((space, span)) = network
                .as_ref()
                .and_then(|n| networks.get(n))
                .and_then(|n| n.ipoib_overlap.clone())
        {
            check.report(ipoib_overlap_warning(
                &check.title(),
                network.as_deref(),
                space,
                span,
            ));
        }
        let subnets = network
            .as_ref()
            .and_then(|n| networks.get(n))
            .map(|n| n.subnets.clone())
            .unwrap_or_default();
        let subnet = choose_subnet(&mut check, attrs.subnet, &subnets);
        let park = block
            .block("park")
            .map(|p| read_park(check.diags_mut(), p, &block.title()))
            .unwrap_or_default();
        Self {
            size,
            fallbacks,
            info: info.cloned(),
            image,
            security,
            ssh_keys,
            admin,
            os_disk_gb,
            os_disk_sku,
            zone,
            network,
            subnet,
            park: park.schedule,
            park_idle: park.idle,
            spot,
        }
    }
}

/// The network: named by reference, or the only one there is.
fn choose_network(
    check: &mut Check<'_>,
    written: Option<Ref<targets::Network>>,
    networks: &BTreeMap<String, NetworkInfo>,
) -> Option<String> {
    if check.has("network") {
        return written.map(|r| r.address.trim_start_matches("network.").to_owned());
    }
    let title = check.title();
    let header = check.block().header.clone();
    let names: Vec<&String> = networks.keys().collect();
    match names.as_slice() {
        [only] => Some((*only).clone()),
        [] => {
            check.report(
                Diagnostic::error(format!("{title} needs a network"))
                    .with_span(header)
                    .with_help("add a `network \"main\" { ssh_from = [\"<your IP>/32\"] }` block"),
            );
            None
        }
        many => {
            check.report(
                Diagnostic::error(format!("{title} must say which network it uses"))
                    .with_span(header)
                    .with_help(format!(
                        "add `network = network.NAME`; the manifest has: {}",
                        many.iter()
                            .map(|n| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
            );
            None
        }
    }
}

/// `subnet`, which the network must have; its first subnet when not written.
pub(super) fn choose_subnet(
    check: &mut Check<'_>,
    written: Option<Located<String>>,
    subnets: &[String],
) -> Option<String> {
    match written {
        Some(s) if subnets.contains(&s.value) || subnets.is_empty() => Some(s.value),
        Some(s) => {
            let d = Diagnostic::error(format!("network has no subnet `{}`", s.value))
                .with_span(s.span.clone())
                .with_label("unknown subnet");
            check.report(
                match did_you_mean(&s.value, subnets.iter().map(String::as_str)) {
                    Some(m) => d.with_help(format!("did you mean `{m}`?")),
                    None => d.with_help(format!("subnets: {}", subnets.join(", "))),
                },
            );
            None
        }
        None => subnets.first().cloned(),
    }
}

/// `size = "..."`, or an ordered fallback `sizes = ["...", "..."]` whose first entry stands for the
/// size until the plan resolves it. Every candidate must be a known size.
fn read_sizes(
    check: &mut Check<'_>,
    (size, sizes): (Option<Located<String>>, Option<Located<Vec<String>>>),
    location: &str,
    (catalog, mut unknown): (&Catalog, Option<&mut Vec<String>>),
) -> (Option<Located<String>>, Vec<String>) {
    if !check.has("sizes") {
        return (size, Vec::new());
    }
    let title = check.title();
    if check.has("size") {
        check.report(
            Diagnostic::error(format!("{title} sets both `size` and `sizes`"))
                .with_span(check.span_of("sizes"))
                .with_label("an ordered list of sizes to try")
                .with_help(
                    "keep `sizes` (the plan picks the first that has quota) or `size`, not both",
                ),
        );
        return (None, Vec::new());
    }
    let Some(sizes) = sizes else {
        return (None, Vec::new());
    };
    if sizes.value.is_empty() {
        check.report(
            Diagnostic::error(format!("`sizes` in {title} is empty"))
                .with_span(sizes.span)
                .with_help("list at least one size, e.g. sizes = [\"Standard_ND40rs_v2\", \"Standard_ND96asr_v4\"]"),
        );
        return (None, Vec::new());
    }
    for later in &sizes.value[1..] {
        let candidate = Located {
            value: later.clone(),
            span: sizes.span.clone(),
        };
        check_size(
            check,
            &candidate,
            location,
            (catalog, unknown.as_deref_mut()),
        );
    }
    let first = Located {
        value: sizes.value[0].clone(),
        span: sizes.span.clone(),
    };
    (Some(first), sizes.value)
}

/// A size must be one Azure has (the catalog's full list), offered in the manifest's region;
/// a retired or retiring size is a warning with its date.
pub(super) fn check_size(
    check: &mut Check<'_>,
    size: &Located<String>,
    location: &str,
    (catalog, unknown): (&Catalog, Option<&mut Vec<String>>),
) -> Option<VmSize> {
    let title = check.title();
    let Some(info) = catalog.vm_size(&size.value).cloned() else {
        if let Some(unknown) = unknown {
            unknown.push(size.value.clone());
            return None;
        }
        let d = Diagnostic::error(format!("unknown VM size `{}` in {title}", size.value))
            .with_span(size.span.clone())
            .with_label("not a size Azure offers (as of the shipped catalog)");
        check.report(match did_you_mean(&size.value, catalog.vm_size_names()) {
            Some(s) => d.with_help(format!(
                "did you mean `{s}`? (`dsinfra sizes` lists every size)"
            )),
            None => d.with_help(
                "`dsinfra sizes` lists every size with its facts and price; `--gpu` the GPU ones",
            ),
        });
        return None;
    };
    match info.retirement(catalog::today()) {
        Some(Retirement::Retired(date)) => check.report(
            Diagnostic::warning(format!("VM size `{}` was retired on {date}", info.name))
                .with_span(size.span.clone())
                .with_label("Azure no longer creates VMs of this size")
                .with_help(replacement_help(&info, location)),
        ),
        Some(Retirement::Retiring(date)) => check.report(
            Diagnostic::warning(format!("VM size `{}` retires on {date}", info.name))
                .with_span(size.span.clone())
                .with_label("Azure stops running VMs of this size on that date")
                .with_help(replacement_help(&info, location)),
        ),
        None => {}
    }
    // A size learnt from the subscription's Resource SKUs has no shipped price rows; the
    // preflight checks where it is offered.
    if !info.is_live()
        && catalog::is_known_location(location)
        && catalog::price(&info.name, location).is_none()
    {
        let regions = catalog::regions_offering(&info.name);
        check.report(
            Diagnostic::error(format!("VM size `{}` is not offered in {location}", info.name))
                .with_span(size.span.clone())
                .with_label(format!("no {location} offer in the shipped catalog"))
                .with_help(format!(
                    "regions that offer it: {}; or pick a size offered here: `dsinfra sizes --region {location}`",
                    list_some(&regions, 12)
                )),
        );
    }
    Some(info)
}

/// Premium SSDs attach only to sizes with premium IO (an `s` in the name, by Azure's convention;
/// Dv2 and the A-series have none): Azure refuses the VM otherwise, after the plan was approved.
/// Unknown premium IO passes: the catalog does not guess. Returns false when it reported.
fn premium_fits(
    check: &mut Check<'_>,
    info: Option<&VmSize>,
    sku: &str,
    span: Span,
    what: &str,
) -> bool {
    let Some(size) = info.filter(|s| s.premium_io == Some(false)) else {
        return true;
    };
    if !sku.starts_with("Premium") {
        return true;
    }
    let title = check.title();
    check.report(
        Diagnostic::error(format!(
            "{title} cannot use a {sku} disk for {what}: {} has no premium storage",
            size.name
        ))
        .with_span(span)
        .with_label(format!(
            "{} supports Standard HDD and Standard SSD only",
            size.name
        ))
        .with_help(premium_help(size)),
    );
    false
}

/// How to get premium storage: the size's premium sibling when the catalog has one
/// (`Standard_D4_v5` -> `Standard_D4s_v5`), else a Standard SSD.
fn premium_help(size: &VmSize) -> String {
    match catalog::with_premium_io(size) {
        Some(sibling) => format!(
            "use StandardSSD_LRS, or the same size with premium storage: {}",
            sibling.name
        ),
        None => "use StandardSSD_LRS, or a size with premium storage (an `s` size such as Standard_D4s_v5)".to_owned(),
    }
}

/// Every data disk attached to a size without premium IO must be Standard: the rule of
/// [`premium_fits`], reported at the disk's `attach_to`.
fn check_premium_data_disks(
    ex: &mut Expander<'_>,
    title: &str,
    info: Option<&VmSize>,
    disks: &[Attachment],
) {
    let Some(size) = info.filter(|s| s.premium_io == Some(false)) else {
        return;
    };
    for disk in disks {
        let sku = ex
            .resources
            .iter()
            .find(|r| r.address == disk.disk)
            .and_then(|r| r.attrs.get("sku"))
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned();
        if !sku.starts_with("Premium") {
            continue;
        }
        ex.diags.push(
            Diagnostic::error(format!(
                "{} is a {sku} disk, but {title} is {}, which has no premium storage",
                disk.disk.block_address(),
                size.name
            ))
            .with_span(disk.span.clone())
            .with_label(format!("attaches a {sku} disk to {title}"))
            .with_help(premium_help(size).replace(
                "use StandardSSD_LRS",
                "give the disk `sku = \"StandardSSD_LRS\"`",
            )),
        );
    }
}

/// What to say instead of a retiring size: where to find current ones.
fn replacement_help(info: &VmSize, location: &str) -> String {
    let filter = if info.gpus > 0.0 { " --gpu" } else { "" };
    format!("pick a current size: `dsinfra sizes{filter} --region {location}` lists them")
}

/// `a, b, c and 9 more`: a long list cut to what a diagnostic can show.
pub(super) fn list_some(items: &[&str], at_most: usize) -> String {
    if items.len() <= at_most {
        return items.join(", ");
    }
    format!(
        "{} and {} more",
        items[..at_most].join(", "),
        items.len() - at_most
    )
}

/// `ssh_key`: one public key or a list of them (required; reported missing here rather than by
/// the decoder, so that it comes after the image's problems, as it always has).
pub(super) fn read_keys(check: &mut Check<'_>, keys: Option<Located<Vec<String>>>) -> Vec<String> {
    let title = check.title();
    let Some(keys) = keys else {
        if !check.has("ssh_key") {
            let missing =
                decode::missing(check.block(), "ssh_key", "file(\"~/.ssh/id_ed25519.pub\")");
            check.report(missing);
        }
        return Vec::new();
    };
    let mut out = Vec::new();
    for key in &keys.value {
        match ssh_key::check(key) {
            Ok(k) => out.push(k),
            Err(ssh_key::KeyError::Private) => check.report(
                Diagnostic::error(format!("`ssh_key` in {title} is a private key"))
                    .with_span(keys.span.clone())
                    .with_label("a private key must never be in a manifest (it is not shown here)")
                    .with_help("use the public half, e.g. file(\"~/.ssh/id_ed25519.pub\")"),
            ),
            Err(ssh_key::KeyError::NotAKey(why)) => check.report(
                Diagnostic::error(format!("`ssh_key` in {title} is not an SSH public key"))
                    .with_span(keys.span.clone())
                    .with_label(why)
                    .with_help(
                        "give the contents of a .pub file, e.g. file(\"~/.ssh/id_ed25519.pub\")",
                    ),
            ),
        }
    }
    if keys.value.is_empty() {
        check.report(
            Diagnostic::error(format!("`ssh_key` in {title} is empty"))
                .with_span(keys.span)
                .with_help("password login is disabled, so at least one public key is needed"),
        );
    }
    out
}

pub(super) fn check_username(check: &mut Check<'_>, user: &Located<String>) -> bool {
    let name = user.value.as_str();
    let why = if RESERVED_USERS.contains(&name.to_ascii_lowercase().as_str()) {
        Some("Azure reserves this name")
    } else if name.is_empty() || name.len() > 32 {
        Some("it must be 1 to 32 characters")
    } else if !name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        Some("use lowercase letters, digits, `_` and `-`, starting with a letter")
    } else {
        None
    };
    if let Some(why) = why {
        let title = check.title();
        check.report(
            Diagnostic::error(format!("invalid `admin_username` in {title}"))
                .with_span(user.span.clone())
                .with_label(why)
                .with_help("the default `azureuser` always works"),
        );
        return false;
    }
    true
}

/// Issue 29 item 7: an InfiniBand cluster's nodes share an availability set (their fabric), and
/// ARM refuses a VM that names both an availability set and a zone, after the network, the
/// placement group and the set exist.
fn zone_with_fabric(title: &str, zone: &OneOf<Zone>) -> Diagnostic {
    Diagnostic::error(format!("{title} cannot be placed in a zone"))
        .with_span(zone.span.clone())
        .with_label("its InfiniBand nodes share an availability set, and Azure refuses a VM in both an availability set and a zone")
        .with_help("remove `zone`: the availability set (in the cluster's proximity placement group) already keeps the nodes on one InfiniBand fabric, in one datacenter")
}

/// Issue 29 item 8: Azure gives the InfiniBand interface (IPoIB) of RDMA-capable VMs addresses in
/// 172.16.0.0/16; a VNet overlapping it makes routes to those addresses ambiguous on the node.
fn ipoib_overlap_warning(
    title: &str,
    network: Option<&str>,
    space: ipnet::Ipv4Net,
    span: Span,
) -> Diagnostic {
    let network = network.map_or_else(|| "its network".to_owned(), |n| format!("network \"{n}\""));
    Diagnostic::warning(format!(
        "{network} overlaps the InfiniBand range of {title}"
    ))
    .with_span(span)
    .with_label(format!(
        "{space} overlaps {}, which Azure gives the nodes' InfiniBand (IPoIB) interfaces",
        super::network::IPOIB_RANGE
    ))
    .with_help("choose an address space outside 172.16.0.0/16, such as 10.20.0.0/16")
}

/// The most VMs Azure puts in one availability set, and so in one InfiniBand fabric.
const MAX_FABRIC_NODES: i64 = 200;

/// An InfiniBand cluster must fit in one availability set: more nodes cannot share its fabric,
/// and ARM would refuse the 201st VM in the middle of an apply.
fn check_fabric_count(check: &mut Check<'_>, count: i64) {
    if count <= MAX_FABRIC_NODES {
        return;
    }
    let title = check.title();
    check.report(
        Diagnostic::error(format!(
            "{title} has {count} nodes, more than one InfiniBand fabric can hold"
        ))
        .with_span(check.span_of("count"))
        .with_label(format!(
            "at most {MAX_FABRIC_NODES} nodes of an InfiniBand size"
        ))
        .with_help(format!(
            "Azure connects VMs over InfiniBand only within one availability set, which holds at \
             most {MAX_FABRIC_NODES} VMs: use count <= {MAX_FABRIC_NODES}, or split the work over \
             several clusters"
        )),
    );
}

/// The addresses Azure keeps in every subnet: the network address, the first three hosts (the
/// default gateway and Azure DNS) and the broadcast address.
const SUBNET_RESERVED: u64 = 5;

/// A block whose NICs do not fit in its subnet, counted with the blocks before it in the same
/// subnet: ARM would refuse the NIC after the last free address (`SubnetIsFull`), in the middle
/// of an apply that has made the others (a 256-node cluster in the default /24 holds 251). Adds
/// the block's `nics` to the subnet's count; the error, at `span`, only for the block that
/// overflows it.
pub(super) fn subnet_room(
    networks: &mut BTreeMap<String, NetworkInfo>,
    (network, subnet): (&str, &str),
    nics: u64,
    title: &str,
    span: Span,
) -> Option<Diagnostic> {
    let (net, used) = networks.get_mut(network)?.room.get_mut(subnet)?;
    let before = *used;
    *used += nics;
    let total = *used;
    let net = *net;
    let room = (1u64 << (32 - u32::from(net.prefix_len()))).saturating_sub(SUBNET_RESERVED);
    if total <= room || before > room {
        return None;
    }
    // The widest prefix whose subnet holds them all.
    let bits = (total + SUBNET_RESERVED)
        .next_power_of_two()
        .trailing_zeros();
    let prefix = 32 - bits.min(32);
    let others = if before > 0 {
        format!(" and {before} of the blocks before it")
    } else {
        String::new()
    };
    Some(
        Diagnostic::error(format!(
            "{title} does not fit in subnet `{subnet}` of network.{network}"
        ))
        .with_span(span)
        .with_label(format!(
            "{nics} NIC(s){others}: {total} in {net}, which holds {room} (Azure keeps {SUBNET_RESERVED} addresses of every subnet)"
        ))
        .with_help(format!(
            "give network.{network} a subnet of /{prefix} or wider, e.g. `subnet \"{subnet}\" {{ cidr = \"{}/{prefix}\" }}` inside an address space that holds it",
            net.network()
        )),
    )
}

/// [`subnet_room`] for a `vm` or `cluster` block: one NIC a node.
fn check_subnet_room(ex: &mut Expander<'_>, block: &EvalBlock, machine: &Machine, nodes: u32) {
    let (Some(network), Some(subnet)) = (&machine.network, &machine.subnet) else {
        return;
    };
    let mut check = Check::new(block, ex.diags);
    // The header of a `vm`, which has no `count`.
    let span = check.span_of("count");
    if let Some(d) = subnet_room(
        &mut ex.networks,
        (network, subnet),
        u64::from(nodes),
        &check.title(),
        span,
    ) {
        check.report(d);
    }
}

/// Expand a `vm` or `cluster` block: one node's resources are built in one place
/// (`nodes::push_node`), in the order Azure needs them (IP, NIC, VM, schedule).
pub(super) fn expand(ex: &mut Expander<'_>, block: &EvalBlock) {
    let machine = Machine::read(ex, block);
    let lifecycle = ex.lifecycle(block);
    let is_cluster = block.ident == "cluster";
    let shape = Nodes::read(ex, block, &machine);
    check_subnet_room(ex, block, &machine, shape.count);
    let label = block.label().to_owned();
    let kind = block.ident.clone();
    let ppg_address = Address::new(&kind, &label, None, "ppg");
    if shape.placement_group {
        nodes::push_placement_group(ex, block, &machine, &lifecycle, &ppg_address);
    }
    let ppg = shape.placement_group.then_some(ppg_address);
    let fabric = (is_cluster && machine.info.as_ref().is_some_and(|s| s.infiniband))
        .then(|| nodes::push_fabric(ex, block, &lifecycle, ppg.as_ref()));
    let block_address = format!("{kind}.{label}");
    let disks = ex
        .attachments
        .get(&block_address)
        .cloned()
        .unwrap_or_default();
    check_premium_data_disks(ex, &block.title(), machine.info.as_ref(), &disks);
    let kit = nodes::Kit {
        block,
        machine: &machine,
        lifecycle: &lifecycle,
        vnet: machine
            .network
            .as_ref()
            .map(|n| Address::new("network", n, None, "vnet")),
        nsg: machine
            .network
            .as_ref()
            .map(|n| Address::new("network", n, None, "nsg")),
        ppg,
        fabric,
        disks,
    };
    let primaries = (0..shape.count)
        .map(|i| {
            nodes::push_node(
                ex,
                &kit,
                is_cluster.then_some(i),
                (i as usize) < shape.public,
            )
        })
        .collect();
    ex.set_primaries(block, primaries);
    if let Some(why) = &machine.security.why {
        ex.notes.push((Address::block(&kind, &label), why.clone()));
    }
    let infiniband = machine.info.as_ref().is_some_and(|s| s.infiniband);
    steps::expand(ex, block, is_cluster, infiniband, machine.size.as_ref());
    idle::expand(ex, block, &machine, shape.count);
}

/// How many nodes a block has, how many of them get a public IP, and whether they share a
/// proximity placement group.
struct Nodes {
    count: u32,
    public: usize,
    placement_group: bool,
}

impl Nodes {
    fn read(ex: &mut Expander<'_>, block: &EvalBlock, machine: &Machine) -> Self {
        if block.ident != "cluster" {
            let attrs: VmAttrs =
                decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
            return Self {
                count: 1,
                public: usize::from(attrs.public_ip.unwrap_or(true)),
                placement_group: false,
            };
        }
        let attrs: ClusterAttrs =
            decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
        let mut check = Check::new(block, ex.diags);
        let count = if check.has("count") {
            check
                .in_range(attrs.count, "count", (1, MAX_NODES), " nodes")
                .map_or(0, |c| c.value)
        } else {
            1
        };
        if machine.info.as_ref().is_some_and(|s| s.infiniband) {
            check_fabric_count(&mut check, count);
        }
        Self {
            // The range check above bounds `count` by MAX_NODES, far below u32::MAX.
            count: u32::try_from(count).unwrap_or(0),
            public: usize::from(attrs.head_public_ip.unwrap_or(true)),
            placement_group: attrs.placement_group.unwrap_or(true),
        }
    }
}
