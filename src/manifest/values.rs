//! What a block exposes to references: `vm.gpu.private_ip`, `storage_account.data.name`, ...
//!
//! Right after a block is evaluated, its value object is put in scope so later blocks can refer
//! to it. Every object carries `address`, so a reference used where a resource is expected
//! (`attach_to = vm.prep`, `container = storage_account.data.container.raw`) is recognised by
//! its address. Values only Azure knows (IP addresses) are `known after apply` placeholders.
//! Nothing here is secret: a `sas` exposes its address, never a token.

use serde_json::{Map, Value as Json, json};

use crate::addr::Address;
use crate::catalog;
use crate::model::known_after_apply;

use super::eval::EvalBlock;
use super::names;

/// The largest cluster dsinfra expands; a larger `count` is an error reported by `compute.rs`.
pub(super) const MAX_NODES: i64 = 1000;

fn attr<'a>(block: &'a EvalBlock, name: &str) -> Option<&'a Json> {
    block
        .attr(name)
        .and_then(|a| a.value.as_ref())
        .filter(|v| !v.is_null())
}

fn text(block: &EvalBlock, name: &str) -> Option<String> {
    attr(block, name).and_then(Json::as_str).map(str::to_owned)
}

/// The value a resource block exposes, given the experiment id and the experiment's resource
/// group (what a new `aml_workspace` lives in).
pub(super) fn block_value(
    block: &EvalBlock,
    experiment: &str,
    group: &str,
    catalog: &catalog::Catalog,
) -> Json {
    let of = Of {
        block,
        experiment,
        catalog,
        kind: block.ident.as_str(),
        label: block.label(),
        address: format!("{}.{}", block.ident, block.label()),
    };
    match of.kind {
        "network" => network(&of),
        "vm" => vm(&of),
        "cluster" => cluster(&of),
        "storage_account" => storage_account(&of),
        "sas" => json!({
            "address": of.address,
            "permissions": text(block, "permissions").unwrap_or_else(|| "rl".to_owned()),
        }),
        "disk" => json!({
            "address": of.address,
            "name": names::compose(experiment, of.label, ""),
            "size_gb": attr(block, "size_gb").cloned(),
        }),
        "aml_workspace" => json!({
            "address": of.address,
            "name": text(block, "name")
                .unwrap_or_else(|| names::compose(experiment, of.label, "")),
            // An existing workspace's own group; a new one is created in the experiment's.
            "resource_group": text(block, "resource_group").unwrap_or_else(|| group.to_owned()),
        }),
        "aml_cluster" => json!({
            "address": of.address,
            "name": text(block, "name")
                .unwrap_or_else(|| names::aml_compute_name(experiment, of.label)),
            "size": text(block, "size"),
            "count": attr(block, "count").and_then(Json::as_i64).unwrap_or(1),
            "admin_username": admin_username(block),
        }),
        "aks" => json!({
            "address": of.address,
            "name": text(block, "name").unwrap_or_else(|| names::compose(experiment, of.label, "")),
        }),
        _ => json!({ "address": of.address }),
    }
}

/// The block whose value is built, with what every kind's value uses.
struct Of<'a> {
    block: &'a EvalBlock,
    catalog: &'a catalog::Catalog,
    experiment: &'a str,
    kind: &'a str,
    label: &'a str,
    /// `kind.label`.
    address: String,
}

impl Of<'_> {
    /// A placeholder for an attribute of one of the block's Azure resources, known after apply.
    fn after_apply(&self, index: Option<u32>, part: &str, attribute: &str) -> Json {
        known_after_apply(&Address::new(self.kind, self.label, index, part), attribute)
    }
}

fn network(of: &Of<'_>) -> Json {
    let mut subnets = Map::new();
    for subnet in of.block.blocks_of("subnet") {
        subnets.insert(
            subnet.label().to_owned(),
            json!({"name": subnet.label(), "cidr": text(subnet, "cidr")}),
        );
    }
    json!({
        "address": of.address,
        "name": names::compose(of.experiment, of.label, "vnet"),
        "nsg_name": names::compose(of.experiment, of.label, "nsg"),
        "address_space": attr(of.block, "address_space").cloned().unwrap_or_else(|| json!(["10.0.0.0/16"])),
        "subnet": subnets,
    })
}

fn vm(of: &Of<'_>) -> Json {
    let public = attr(of.block, "public_ip")
        .and_then(Json::as_bool)
        .unwrap_or(true);
    json!({
        "address": of.address,
        "name": names::compose(of.experiment, of.label, ""),
        "size": text(of.block, "size"),
        "admin_username": admin_username(of.block),
        "private_ip": of.after_apply(None, "nic", "private_ip"),
        "public_ip": if public {
            of.after_apply(None, "public_ip", "ip_address")
        } else {
            Json::Null
        },
    })
}

fn cluster(of: &Of<'_>) -> Json {
    let count = attr(of.block, "count")
        .and_then(Json::as_i64)
        .unwrap_or(1)
        .clamp(0, MAX_NODES);
    let nodes: Vec<Json> = (0..count)
        .map(|i| {
            let index = u32::try_from(i).unwrap_or(0);
            json!({
                "name": names::compose(of.experiment, of.label, &i.to_string()),
                "private_ip": of.after_apply(Some(index), "nic", "private_ip"),
            })
        })
        .collect();
    let private_ips: Vec<Json> = nodes.iter().map(|n| n["private_ip"].clone()).collect();
    let size = text(of.block, "size");
    let head_public = attr(of.block, "head_public_ip")
        .and_then(Json::as_bool)
        .unwrap_or(true);
    json!({
        "address": of.address,
        "name": names::compose(of.experiment, of.label, ""),
        "size": size,
        "count": count,
        "infiniband": size
            .as_deref()
            .and_then(|size| of.catalog.vm_size(size))
            .is_some_and(|s| s.infiniband),
        "admin_username": admin_username(of.block),
        "head_public_ip": if head_public {
            of.after_apply(Some(0), "public_ip", "ip_address")
        } else {
            Json::Null
        },
        "private_ips": private_ips,
        "nodes": nodes,
    })
}

fn storage_account(of: &Of<'_>) -> Json {
    let name = text(of.block, "name")
        .unwrap_or_else(|| names::storage_account_name(of.experiment, of.label));
    let mut containers = Map::new();
    for c in of.block.blocks_of("container") {
        containers.insert(
            c.label().to_owned(),
            json!({
                "address": format!("{}.container.{}", of.address, c.label()),
                "name": c.label(),
                "account": name,
            }),
        );
    }
    let mut shares = Map::new();
    for s in of.block.blocks_of("file_share") {
        shares.insert(
            s.label().to_owned(),
            json!({
                "address": format!("{}.file_share.{}", of.address, s.label()),
                "name": s.label(),
                "account": name,
                "protocol": text(s, "protocol").unwrap_or_else(|| "SMB".to_owned()),
            }),
        );
    }
    json!({
        "address": of.address,
        "name": name,
        "blob_endpoint": format!("https://{name}.blob.core.windows.net/"),
        "file_endpoint": format!("https://{name}.file.core.windows.net/"),
        "container": containers,
        "file_share": shares,
    })
}

fn admin_username(block: &EvalBlock) -> String {
    text(block, "admin_username").unwrap_or_else(|| "azureuser".to_owned())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::super::eval::EvalAttr;
    use super::*;
    use crate::diag::Span;

    fn block(kind: &str, label: &str, attrs: &[(&str, Json)]) -> EvalBlock {
        let span = Span::new(Arc::from(Path::new("t.hcl")), 0, 1);
        EvalBlock {
            ident: kind.into(),
            labels: vec![(label.into(), span.clone())],
            header: span.clone(),
            attrs: attrs
                .iter()
                .map(|(n, v)| EvalAttr {
                    name: (*n).into(),
                    value: Some(v.clone()),
                    key_span: span.clone(),
                    value_span: span.clone(),
                })
                .collect(),
            blocks: Vec::new(),
        }
    }

    #[test]
    fn vms_expose_names_and_known_after_apply_ips() {
        let v = block_value(
            &block("vm", "gpu", &[("size", json!("Standard_NC4as_T4_v3"))]),
            "exp",
            "rg",
            &catalog::Catalog::shipped(),
        );
        assert_eq!(v["name"], "exp-gpu");
        assert_eq!(
            v["private_ip"],
            "(known after apply: vm.gpu.nic.private_ip)"
        );
        assert_eq!(
            v["public_ip"],
            "(known after apply: vm.gpu.public_ip.ip_address)"
        );
        let private = block_value(
            &block("vm", "gpu", &[("public_ip", json!(false))]),
            "exp",
            "rg",
            &catalog::Catalog::shipped(),
        );
        assert_eq!(private["public_ip"], Json::Null);
    }

    #[test]
    fn clusters_expose_nodes_and_infiniband() {
        let v = block_value(
            &block(
                "cluster",
                "train",
                &[("size", json!("Standard_ND40rs_v2")), ("count", json!(2))],
            ),
            "cf",
            "rg",
            &catalog::Catalog::shipped(),
        );
        assert_eq!(v["nodes"][1]["name"], "cf-train-1");
        assert_eq!(v["private_ips"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["infiniband"], true);
    }
}
