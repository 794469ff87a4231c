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

/// The value a resource block exposes, given the experiment id.
// A dispatch over block kinds, one value object each.
#[allow(clippy::too_many_lines)]
pub(super) fn block_value(block: &EvalBlock, experiment: &str) -> Json {
    let kind = block.ident.as_str();
    let label = block.label();
    let address = format!("{kind}.{label}");
    match kind {
        "network" => {
            let mut subnets = Map::new();
            for subnet in block.blocks_of("subnet") {
                subnets.insert(
                    subnet.label().to_owned(),
                    json!({"name": subnet.label(), "cidr": text(subnet, "cidr")}),
                );
            }
            json!({
                "address": address,
                "name": names::compose(experiment, label, "vnet"),
                "nsg_name": names::compose(experiment, label, "nsg"),
                "address_space": attr(block, "address_space").cloned().unwrap_or_else(|| json!(["10.0.0.0/16"])),
                "subnet": subnets,
            })
        }
        "vm" => {
            let public = attr(block, "public_ip")
                .and_then(Json::as_bool)
                .unwrap_or(true);
            json!({
                "address": address,
                "name": names::compose(experiment, label, ""),
                "size": text(block, "size"),
                "admin_username": text(block, "admin_username").unwrap_or_else(|| "azureuser".to_owned()),
                "private_ip": known_after_apply(&Address::new(kind, label, None, "nic"), "private_ip"),
                "public_ip": if public {
                    known_after_apply(&Address::new(kind, label, None, "public_ip"), "ip_address")
                } else {
                    Json::Null
                },
            })
        }
        "cluster" => {
            let count = attr(block, "count")
                .and_then(Json::as_i64)
                .unwrap_or(1)
                .clamp(0, MAX_NODES);
            let nodes: Vec<Json> = (0..count)
                .map(|i| {
                    let index = u32::try_from(i).unwrap_or(0);
                    json!({
                        "name": names::compose(experiment, label, &i.to_string()),
                        "private_ip": known_after_apply(&Address::new(kind, label, Some(index), "nic"), "private_ip"),
                    })
                })
                .collect();
            let private_ips: Vec<Json> = nodes.iter().map(|n| n["private_ip"].clone()).collect();
            let size = text(block, "size");
            let head_public = attr(block, "head_public_ip")
                .and_then(Json::as_bool)
                .unwrap_or(true);
            json!({
                "address": address,
                "name": names::compose(experiment, label, ""),
                "size": size,
                "count": count,
                "infiniband": size.as_deref().and_then(catalog::vm_size).is_some_and(|s| s.infiniband),
                "admin_username": text(block, "admin_username").unwrap_or_else(|| "azureuser".to_owned()),
                "head_public_ip": if head_public {
                    known_after_apply(&Address::new(kind, label, Some(0), "public_ip"), "ip_address")
                } else {
                    Json::Null
                },
                "private_ips": private_ips,
                "nodes": nodes,
            })
        }
        "storage_account" => {
            let name = text(block, "name")
                .unwrap_or_else(|| names::storage_account_name(experiment, label));
            let mut containers = Map::new();
            for c in block.blocks_of("container") {
                containers.insert(
                    c.label().to_owned(),
                    json!({
                        "address": format!("{address}.container.{}", c.label()),
                        "name": c.label(),
                        "account": name,
                    }),
                );
            }
            let mut shares = Map::new();
            for s in block.blocks_of("file_share") {
                shares.insert(
                    s.label().to_owned(),
                    json!({
                        "address": format!("{address}.file_share.{}", s.label()),
                        "name": s.label(),
                        "account": name,
                        "protocol": text(s, "protocol").unwrap_or_else(|| "SMB".to_owned()),
                    }),
                );
            }
            json!({
                "address": address,
                "name": name,
                "blob_endpoint": format!("https://{name}.blob.core.windows.net/"),
                "file_endpoint": format!("https://{name}.file.core.windows.net/"),
                "container": containers,
                "file_share": shares,
            })
        }
        "sas" => json!({
            "address": address,
            "permissions": text(block, "permissions").unwrap_or_else(|| "rl".to_owned()),
        }),
        "disk" => json!({
            "address": address,
            "name": names::compose(experiment, label, ""),
            "size_gb": attr(block, "size_gb").cloned(),
        }),
        _ => json!({ "address": address }),
    }
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
        let private = block_value(&block("vm", "gpu", &[("public_ip", json!(false))]), "exp");
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
        );
        assert_eq!(v["nodes"][1]["name"], "cf-train-1");
        assert_eq!(v["private_ips"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["infiniband"], true);
    }
}
