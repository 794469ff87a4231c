//! Network security groups and their rules, with the default rules ARM adds to every group.

use serde_json::{Value, json};

use super::{finish_put, is_key, network_body, new_etag, sub_resource_ref, writable_properties};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::resource::{Target, key, require_location};
use crate::emulator::store::{Cloud, Kind};

fn rule_body(id: &str, name: &str, request: &Value, kind: Kind) -> Value {
    json!({
        "id": id,
        "name": name,
        "etag": new_etag(),
        "type": kind.type_name(),
        "properties": writable_properties(request, &[]),
    })
}

pub(crate) fn put_nsg(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let id = target.id_in(cloud);
    let created = !cloud.resources.contains_key(&target.key);
    let rules: Vec<Value> = body
        .at("/properties/securityRules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut children = Vec::new();
    for old in cloud
        .children(&target.key, Kind::SecurityRule)
        .into_iter()
        .map(|r| key(&r.id))
        .collect::<Vec<_>>()
    {
        cloud.remove_tree(&old);
    }
    for rule in &rules {
        let name = rule.get("name").and_then(Value::as_str).ok_or_else(|| {
            ArmError::new(
                400,
                "InvalidRequestFormat",
                "Cannot parse the request: a security rule has no name.",
            )
            .with_target("properties.securityRules")
        })?;
        let rule_id = format!("{id}/securityRules/{name}");
        let resource = cloud.new_resource(
            rule_id.clone(),
            Kind::SecurityRule,
            rule_body(&rule_id, name, rule, Kind::SecurityRule),
        );
        children.push((key(&rule_id), resource));
    }
    let props = writable_properties(&body, &["securityRules", "defaultSecurityRules"]);
    let stored_body = network_body(
        &id,
        target.name(),
        Kind::NetworkSecurityGroup,
        &location,
        &body,
        props,
    );
    let stored = cloud.new_resource(id, Kind::NetworkSecurityGroup, stored_body);
    finish_put(cloud, ctx, target, created, &location, stored, children)
}

pub(crate) fn put_rule(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let id = target.id_in(cloud);
    let created = !cloud.resources.contains_key(&target.key);
    let stored = cloud.new_resource(
        id.clone(),
        Kind::SecurityRule,
        rule_body(&id, target.name(), &body, Kind::SecurityRule),
    );
    finish_put(cloud, ctx, target, created, "eastus", stored, Vec::new())
}

/// The six rules every NSG carries, at ARM's priorities.
pub(super) fn default_rules(nsg_id: &str) -> Vec<Value> {
    let rules = [
        (
            "AllowVnetInBound",
            "Allow inbound traffic from all VMs in VNET",
            "VirtualNetwork",
            "VirtualNetwork",
            "Allow",
            65000,
            "Inbound",
        ),
        (
            "AllowAzureLoadBalancerInBound",
            "Allow inbound traffic from azure load balancer",
            "AzureLoadBalancer",
            "*",
            "Allow",
            65001,
            "Inbound",
        ),
        (
            "DenyAllInBound",
            "Deny all inbound traffic",
            "*",
            "*",
            "Deny",
            65500,
            "Inbound",
        ),
        (
            "AllowVnetOutBound",
            "Allow outbound traffic from all VMs to all VMs in VNET",
            "VirtualNetwork",
            "VirtualNetwork",
            "Allow",
            65000,
            "Outbound",
        ),
        (
            "AllowInternetOutBound",
            "Allow outbound traffic from all VMs to Internet",
            "*",
            "Internet",
            "Allow",
            65001,
            "Outbound",
        ),
        (
            "DenyAllOutBound",
            "Deny all outbound traffic",
            "*",
            "*",
            "Deny",
            65500,
            "Outbound",
        ),
    ];
    rules
        .iter()
        .map(
            |(name, description, source, destination, access, priority, direction)| {
                json!({
                    "id": format!("{nsg_id}/defaultSecurityRules/{name}"),
                    "name": name,
                    "etag": "W/\"00000000-0000-0000-0000-000000000000\"",
                    "type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules",
                    "properties": {
                        "provisioningState": "Succeeded",
                        "description": description,
                        "protocol": "*",
                        "sourcePortRange": "*",
                        "destinationPortRange": "*",
                        "sourceAddressPrefix": source,
                        "destinationAddressPrefix": destination,
                        "access": access,
                        "priority": priority,
                        "direction": direction,
                        "sourcePortRanges": [],
                        "destinationPortRanges": [],
                        "sourceAddressPrefixes": [],
                        "destinationAddressPrefixes": [],
                    }
                })
            },
        )
        .collect()
}

pub(super) fn nsg_users(cloud: &Cloud, nsg_key: &str) -> Vec<String> {
    let mut users: Vec<String> = cloud
        .of_kind(Kind::NetworkInterface)
        .into_iter()
        .chain(cloud.of_kind(Kind::Subnet))
        .filter(|r| {
            r.body
                .get("properties")
                .and_then(|p| sub_resource_ref(p, "networkSecurityGroup"))
                .is_some_and(|id| is_key(id, nsg_key))
        })
        .map(|r| r.id.clone())
        .collect();
    users.sort();
    users
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nsgs_carry_six_default_rules() {
        let rules = default_rules("/nsg");
        assert_eq!(rules.len(), 6);
        let priorities: Vec<i64> = rules
            .iter()
            .filter_map(|r| r.at("/properties/priority").and_then(Value::as_i64))
            .collect();
        assert_eq!(priorities, [65000, 65001, 65500, 65000, 65001, 65500]);
    }
}
