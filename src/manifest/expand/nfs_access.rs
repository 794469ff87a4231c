//! What makes a storage account holding an NFS file share reachable, as Azure Files requires:
//! NFS 4.1 has no encryption in transit and authenticates by network, so the account needs
//! secure transfer off (`supportsHttpsTrafficOnly: false`), and it must never be open to the
//! internet: its firewall denies by default and allows only the experiment's subnets, which get
//! the `Microsoft.Storage` service endpoint (Azure refuses a VNet rule for a subnet without it).
//! Only that account differs; every other account stays HTTPS-only and public-by-key.

use serde_json::{Value as Json, json};

use crate::addr::Address;
use crate::diag::{Diagnostic, Span};

use super::Expander;

/// The service endpoint a subnet needs before a storage account may allow it.
pub(super) const STORAGE_SERVICE_ENDPOINT: &str = "Microsoft.Storage";

/// The account's network rules (`network_rules` attribute) and the VNets it must wait for, or
/// `None` when the manifest has no network (reported: nothing could ever mount the share).
/// `protocol` is where the first NFS share says so, for the diagnostics.
pub(super) fn nfs_account_access(
    ex: &mut Expander<'_>,
    title: &str,
    protocol: &Span,
) -> Option<(Json, Vec<Address>)> {
    if ex.networks.is_empty() {
        ex.diags.push(
            Diagnostic::error(format!(
                "the NFS share of {title} cannot be reached from anywhere"
            ))
            .with_span(protocol.clone())
            .with_label("Azure Files serves NFS only to allowed virtual networks")
            .with_help("add a `network` block: its subnets are allowed into the account"),
        );
        return None;
    }
    let mut subnets = Vec::new();
    let mut vnets = Vec::new();
    for (label, info) in &ex.networks {
        let vnet = Address::new("network", label, None, "vnet");
        for subnet in &info.subnets {
            subnets.push(json!({"vnet": vnet.to_string(), "subnet": subnet}));
        }
        vnets.push(vnet);
    }
    let names: Vec<String> = ex
        .networks
        .keys()
        .map(|l| format!("network \"{l}\""))
        .collect();
    ex.diags.push(
        Diagnostic::warning(format!(
            "{title} is planned for NFS: secure transfer off, reachable only from the subnets of {}",
            names.join(", ")
        ))
        .with_span(protocol.clone())
        .with_label("NFS 4.1 on Azure Files has no encryption in transit and no key")
        .with_help(
            "so this account, unlike the others, allows plain NFS (supportsHttpsTrafficOnly = \
             false) and denies every network but those subnets, which get the Microsoft.Storage \
             service endpoint; keep data that must be encrypted in transit in another account",
        ),
    );
    add_service_endpoints(ex);
    Some((
        json!({"default_action": "Deny", "bypass": "None", "subnets": subnets}),
        vnets,
    ))
}

/// Every subnet of the manifest's VNets gets the `Microsoft.Storage` service endpoint (the
/// networks are expanded before the storage accounts).
fn add_service_endpoints(ex: &mut Expander<'_>) {
    for resource in &mut ex.resources {
        if resource.address.kind != "network" || resource.address.part != "vnet" {
            continue;
        }
        if let Some(Json::Array(subnets)) = resource.attrs.get_mut("subnets") {
            for subnet in subnets.iter_mut() {
                if let Json::Object(map) = subnet {
                    map.insert(
                        "service_endpoints".to_owned(),
                        json!([STORAGE_SERVICE_ENDPOINT]),
                    );
                }
            }
        }
    }
}
