//! `network` blocks: a VNet with subnets and an NSG that admits SSH only from listed ranges.

use ipnet::Ipv4Net;
use serde_json::json;

use crate::addr::Address;
use crate::diag::Diagnostic;
use crate::model::{Attrs, Lifecycle, ResourceKind};

use super::super::eval::EvalBlock;
use super::super::fields::{Fields, Located};
use super::super::names;
use super::super::validate::cidr;
use super::{Expander, NetworkInfo};

const DEFAULT_SPACE: &str = "10.0.0.0/16";

// Reads, checks and builds the VNet and NSG in one pass: the checks need the parsed ranges the
// resources are made of.
#[allow(clippy::too_many_lines)]
pub(super) fn expand(ex: &mut Expander<'_>, block: &EvalBlock) {
    let label = block.label();
    let title = block.title();
    let mut fields = Fields::new(block, ex.diags);
    let spaces_written = fields.strings("address_space");
    let ssh_from = fields.strings("ssh_from");
    let space_span = fields.span_of("address_space");

    let mut spaces: Vec<Ipv4Net> = Vec::new();
    let space_texts = spaces_written
        .as_ref()
        .map_or_else(|| vec![DEFAULT_SPACE.to_owned()], |s| s.value.clone());
    for text in &space_texts {
        match cidr::parse(text) {
            Ok(net) => spaces.push(net),
            Err(why) => fields.report(
                Diagnostic::error(format!("invalid `address_space` in {title}"))
                    .with_span(space_span.clone())
                    .with_label(why)
                    .with_help("use private ranges such as 10.0.0.0/16"),
            ),
        }
    }

    let mut subnets: Vec<(String, Ipv4Net)> = Vec::new();
    for subnet in block.blocks_of("subnet") {
        let mut sf = Fields::new(subnet, fields_diags(&mut fields));
        let Some(text) = sf.required_string("cidr", "\"10.0.1.0/24\"") else {
            continue;
        };
        let net = match cidr::parse(&text.value) {
            Ok(net) => net,
            Err(why) => {
                sf.report(
                    Diagnostic::error(format!("invalid `cidr` in {} of {title}", subnet.title()))
                        .with_span(text.span.clone())
                        .with_label(why),
                );
                continue;
            }
        };
        if !spaces.is_empty() && !spaces.iter().any(|s| cidr::contains(*s, net)) {
            sf.report(
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
            sf.report(
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

    let mut rules = Vec::new();
    match &ssh_from {
        None => fields.report(no_ssh_warning(block)),
        Some(Located { value, .. }) if value.is_empty() => fields.report(no_ssh_warning(block)),
        Some(sources) => {
            let mut open = false;
            for source in &sources.value {
                match cidr::ssh_source(source) {
                    Ok(cidr::Source::Anywhere) => open = true,
                    Ok(cidr::Source::Range) => {}
                    Err(why) => fields.report(
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
                fields.report(
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
        None,
        nsg_attrs,
        [],
        &lifecycle,
        Some(&block.header),
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
        None,
        vnet_attrs,
        [nsg],
        &lifecycle,
        Some(&block.header),
    );
    ex.networks.insert(
        label.to_owned(),
        NetworkInfo {
            subnets: subnets.into_iter().map(|(n, _)| n).collect(),
        },
    );
    ex.set_primaries(block, vec![vnet]);
}

fn fields_diags<'f>(fields: &'f mut Fields<'_>) -> &'f mut Vec<Diagnostic> {
    fields.diags_mut()
}

fn no_ssh_warning(block: &EvalBlock) -> Diagnostic {
    Diagnostic::warning(format!("{} allows no SSH from outside", block.title()))
        .with_span(block.header.clone())
        .with_label("`ssh_from` is empty")
        .with_help("to reach the VMs, add `ssh_from = [\"<your public IP>/32\"]`")
}
