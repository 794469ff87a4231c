//! `network` blocks: a VNet with subnets and an NSG that admits SSH only from listed ranges.

use ipnet::Ipv4Net;
use serde::Deserialize;
use serde_json::{Value as Json, json};

use crate::addr::Address;
use crate::diag::Diagnostic;
use crate::model::{Attrs, Lifecycle, ResourceKind};

use super::super::decode::{self, BlockAttrs, Located, Unknown};
use super::super::eval::EvalBlock;
use super::super::names;
use super::super::validate::cidr;
use super::check::Check;
use super::{Expander, NetworkInfo, Origin};

const DEFAULT_SPACE: &str = "10.0.0.0/16";

/// A `network` block's attributes.
#[derive(Deserialize, Default)]
struct NetworkAttrs {
    address_space: Option<Located<Vec<String>>>,
    ssh_from: Option<Located<Vec<String>>>,
}

impl BlockAttrs for NetworkAttrs {}

/// A `subnet` block's attributes.
#[derive(Deserialize)]
struct SubnetAttrs {
    cidr: Located<String>,
}

impl BlockAttrs for SubnetAttrs {
    const REQUIRED: &'static [(&'static str, &'static str)] = &[("cidr", "\"10.0.1.0/24\"")];
}

pub(super) fn expand(ex: &mut Expander<'_>, block: &EvalBlock) {
    let label = block.label();
    let attrs: NetworkAttrs = decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let mut check = Check::new(block, ex.diags);
    let space_texts = attrs
        .address_space
        .as_ref()
        .map_or_else(|| vec![DEFAULT_SPACE.to_owned()], |s| s.value.clone());
    let spaces = address_spaces(&mut check, &space_texts);
    let space_span = check.span_of("address_space");
    let subnets = subnets(&mut check, &spaces, &space_texts);
    let rules = nsg_rules(&mut check, attrs.ssh_from.as_ref());
    push_network(ex, block, label, &rules, &space_texts, subnets);
    if let Some(info) = ex.networks.get_mut(label) {
        info.ipoib_overlap = spaces
            .iter()
            .copied()
            .find(|space| overlaps_ipoib(*space))
            .map(|space| (space, space_span));
    }
}

/// The range Azure gives the InfiniBand (IPoIB) interfaces of RDMA-capable VMs: a VNet that
/// overlaps it is ambiguous on those VMs (issue 29, item 8).
pub(super) const IPOIB_RANGE: Ipv4Net =
    match Ipv4Net::new(std::net::Ipv4Addr::new(172, 16, 0, 0), 16) {
        Ok(net) => net,
        Err(_) => panic!("a /16 is a valid prefix"),
    };

/// Whether `space` and [`IPOIB_RANGE`] share addresses.
fn overlaps_ipoib(space: Ipv4Net) -> bool {
    space.contains(&IPOIB_RANGE.network()) || IPOIB_RANGE.contains(&space.network())
}

/// The parsed `address_space` ranges (the default when not written).
fn address_spaces(check: &mut Check<'_>, texts: &[String]) -> Vec<Ipv4Net> {
    let title = check.title();
    let span = check.span_of("address_space");
    let mut spaces = Vec::new();
    for text in texts {
        match cidr::parse(text) {
            Ok(net) => spaces.push(net),
            Err(why) => check.report(
                Diagnostic::error(format!("invalid `address_space` in {title}"))
                    .with_span(span.clone())
                    .with_label(why)
                    .with_help("use private ranges such as 10.0.0.0/16"),
            ),
        }
    }
    spaces
}

/// The `subnet` blocks, each inside the space and overlapping no other; or one `default`
/// subnet when none is written.
fn subnets(
    check: &mut Check<'_>,
    spaces: &[Ipv4Net],
    space_texts: &[String],
) -> Vec<(String, Ipv4Net)> {
    let block = check.block();
    let title = check.title();
    let mut subnets: Vec<(String, Ipv4Net)> = Vec::new();
    for subnet in block.blocks_of("subnet") {
        let Some(SubnetAttrs { cidr: text }) =
            decode::decode(subnet, Unknown::Checked, check.diags_mut())
        else {
            continue;
        };
        let net = match cidr::parse(&text.value) {
            Ok(net) => net,
            Err(why) => {
                check.report(
                    Diagnostic::error(format!("invalid `cidr` in {} of {title}", subnet.title()))
                        .with_span(text.span.clone())
                        .with_label(why),
                );
                continue;
            }
        };
        if !spaces.is_empty() && !spaces.iter().any(|s| cidr::contains(*s, net)) {
            check.report(
                Diagnostic::error(format!(
                    "subnet `{}` is outside the address space of {title}",
                    subnet.label()
                ))
                .with_span(text.span.clone())
                .with_label(format!("{net} is not inside {}", space_texts.join(", ")))
                .with_help("choose a range inside `address_space`, or widen the address space"),
            );
            continue;
        }
        if let Some((other, _)) = subnets.iter().find(|(_, o)| cidr::overlaps(*o, net)) {
            check.report(
                Diagnostic::error(format!(
                    "subnets `{other}` and `{}` of {title} overlap",
                    subnet.label()
                ))
                .with_span(text.span.clone())
                .with_label(format!("{net} overlaps `{other}`"))
                .with_help("give each subnet its own range"),
            );
            continue;
        }
        subnets.push((subnet.label().to_owned(), net));
    }
    let explicit_subnets = block.blocks_of("subnet").count() > 0;
    if !explicit_subnets {
        // No subnet written: one `default` subnet, the first /24 of the space (or all of a
        // smaller space), which is what a single-experiment network needs.
        if let Some(space) = spaces.first() {
            let net = if space.prefix_len() <= 24 {
                Ipv4Net::new(space.network(), 24).unwrap_or(*space)
            } else {
                *space
            };
            subnets.push(("default".to_owned(), net));
        }
    }
    subnets
}

/// The NSG's rules: SSH from `ssh_from` (warned about when open to the internet, or empty), and
/// everything from inside the VNet.
fn nsg_rules(check: &mut Check<'_>, ssh_from: Option<&Located<Vec<String>>>) -> Vec<Json> {
    let block = check.block();
    let title = check.title();
    let mut rules = Vec::new();
    match ssh_from {
        None => check.report(no_ssh_warning(block)),
        Some(Located { value, .. }) if value.is_empty() => check.report(no_ssh_warning(block)),
        Some(sources) => {
            let mut open = false;
            for source in &sources.value {
                match cidr::ssh_source(source) {
                    Ok(cidr::Source::Anywhere) => open = true,
                    Ok(cidr::Source::Range) => {}
                    Err(why) => check.report(
                        Diagnostic::error(format!("invalid `ssh_from` entry in {title}"))
                            .with_span(sources.span.clone())
                            .with_label(why)
                            .with_help(
                                "list IPv4 addresses or CIDR ranges, e.g. [\"203.0.113.7/32\"]",
                            ),
                    ),
                }
            }
            if open {
                check.report(
                    Diagnostic::warning(format!("{title} allows SSH from the whole internet"))
                        .with_span(sources.span.clone())
                        .with_label("port 22 open to every address")
                        .with_help("list only your own address or range (e.g. [\"203.0.113.7/32\"]); bots scan port 22 continuously"),
                );
            }
            rules.push(json!({
                "name": "allow-ssh",
                "priority": 100,
                "direction": "Inbound",
                "access": "Allow",
                "protocol": "Tcp",
                "source_address_prefixes": sources.value,
                "destination_port_range": "22",
            }));
        }
    }
    rules.push(json!({
        "name": "allow-vnet-inbound",
        "priority": 110,
        "direction": "Inbound",
        "access": "Allow",
        "protocol": "*",
        "source_address_prefixes": ["VirtualNetwork"],
        "destination_port_range": "*",
    }));
    rules
}

/// The NSG and the VNet with its subnets.
fn push_network(
    ex: &mut Expander<'_>,
    block: &EvalBlock,
    label: &str,
    rules: &[Json],
    space_texts: &[String],
    subnets: Vec<(String, Ipv4Net)>,
) {
    let vnet = Address::new("network", label, None, "vnet");
    let nsg = Address::new("network", label, None, "nsg");
    let mut nsg_attrs = Attrs::new();
    nsg_attrs.insert("location".into(), ex.location());
    nsg_attrs.insert("rules".into(), json!(rules));
    let lifecycle = Lifecycle::default();
    ex.push(
        nsg.clone(),
        ResourceKind::NetworkSecurityGroup,
        names::compose(&ex.experiment.id, label, "nsg"),
        nsg_attrs,
        [],
        Origin {
            parent: None,
            lifecycle: &lifecycle,
            span: Some(&block.header),
        },
    );
    let mut vnet_attrs = Attrs::new();
    vnet_attrs.insert("location".into(), ex.location());
    vnet_attrs.insert("address_space".into(), json!(space_texts));
    vnet_attrs.insert(
        "subnets".into(),
        json!(subnets
            .iter()
            .map(|(name, net)| json!({"name": name, "address_prefix": net.to_string(), "nsg": nsg.to_string()}))
            .collect::<Vec<_>>()),
    );
    ex.push(
        vnet.clone(),
        ResourceKind::VirtualNetwork,
        names::compose(&ex.experiment.id, label, "vnet"),
        vnet_attrs,
        [nsg],
        Origin {
            parent: None,
            lifecycle: &lifecycle,
            span: Some(&block.header),
        },
    );
    ex.networks.insert(
        label.to_owned(),
        NetworkInfo {
            subnets: subnets.iter().map(|(n, _)| n.clone()).collect(),
            room: subnets.into_iter().map(|(n, net)| (n, (net, 0))).collect(),
            ipoib_overlap: None,
        },
    );
    ex.set_primaries(block, vec![vnet]);
}

fn no_ssh_warning(block: &EvalBlock) -> Diagnostic {
    Diagnostic::warning(format!("{} allows no SSH from outside", block.title()))
        .with_span(block.header.clone())
        .with_label("`ssh_from` is empty")
        .with_help("to reach the VMs, add `ssh_from = [\"<your public IP>/32\"]`")
}
