//! Microsoft.Network (2024-07-01): virtual networks and subnets, security groups and rules,
//! public IPs and NICs. PUTs answer 200/201 with `Updating` and an Azure-AsyncOperation header;
//! DELETEs answer 202 with Location; resources in use refuse deletion with ARM's 400s.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::error::ArmError;
use super::json::At as _;
use super::ops;
use super::providers::{Target, envelope, key, require_location, require_reference};
use super::server::{Ctx, Reply};
use super::store::{Cloud, Kind, OpKind, Resource};

/// A fresh weak etag, as the network provider sends.
pub(crate) fn new_etag() -> String {
    format!("W/\"{}\"", uuid::Uuid::new_v4())
}

fn sub_resource_id(value: &Value, field: &str) -> Option<String> {
    sub_resource_ref(value, field).map(str::to_owned)
}

/// [`sub_resource_id`], borrowed: the scans below run on every NIC PUT and GET, over every NIC,
/// so they neither clone nor allocate (at 64 nodes they were a third of the emulator's time).
fn sub_resource_ref<'v>(value: &'v Value, field: &str) -> Option<&'v str> {
    value
        .get(field)
        .and_then(|v| v.get("id"))
        .and_then(Value::as_str)
}

/// Whether `id` is the resource whose [`key`] is `lower_key`, without building the key.
fn is_key(id: &str, lower_key: &str) -> bool {
    id.trim_end_matches('/').eq_ignore_ascii_case(lower_key)
}

/// Keeps the creation order of a resource being replaced.
fn upsert(cloud: &mut Cloud, key: String, mut resource: Resource) {
    if let Some(old) = cloud.resources.get(&key) {
        resource.seq = old.seq;
        resource.power.clone_from(&old.power);
        resource.keys.clone_from(&old.keys);
    }
    cloud.resources.insert(key, resource);
}

/// The stored form of a top-level network resource: ARM's envelope with a fresh etag, and the
/// given properties plus a new `resourceGuid` (every network resource carries both).
fn network_body(
    id: &str,
    name: &str,
    kind: Kind,
    location: &str,
    body: &Value,
    mut props: serde_json::Map<String, Value>,
) -> Value {
    props.insert(
        "resourceGuid".into(),
        json!(uuid::Uuid::new_v4().to_string()),
    );
    let mut stored = envelope(id, name, kind, Some(location), body);
    stored["etag"] = json!(new_etag());
    stored["properties"] = Value::Object(props);
    stored
}

/// Starts the PUT operation and answers 201 (created) or 200 (updated) with the body.
fn finish_put(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    created: bool,
    location: &str,
    mut stored: Resource,
    children: Vec<(String, Resource)>,
) -> Result<Reply, ArmError> {
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        "Microsoft.Network",
        location,
        ops::base_latency(target.kind, &OpKind::Put, None),
    );
    stored.op = Some(op.id.clone());
    upsert(cloud, target.key.clone(), stored);
    for (child_key, mut child) in children {
        child.op = Some(op.id.clone());
        upsert(cloud, child_key, child);
    }
    let resource = cloud
        .resources
        .get(&target.key)
        .cloned()
        .ok_or_else(|| ArmError::new(500, "InternalServerError", "resource vanished"))?;
    Ok(
        Reply::json(if created { 201 } else { 200 }, render(cloud, &resource))
            .headers(ops::put_headers(ctx, &op)),
    )
}

/// Properties of a request minus the named ones, plus `provisioningState: Updating`.
fn writable_properties(body: &Value, drop: &[&str]) -> serde_json::Map<String, Value> {
    let mut props = body
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for name in drop {
        props.remove(*name);
    }
    props.insert("provisioningState".into(), json!("Updating"));
    props
}

fn subnet_body(id: &str, name: &str, request: &Value) -> Value {
    let mut props = writable_properties(request, &["ipConfigurations"]);
    props
        .entry("privateEndpointNetworkPolicies")
        .or_insert(json!("Disabled"));
    props
        .entry("privateLinkServiceNetworkPolicies")
        .or_insert(json!("Enabled"));
    json!({
        "id": id,
        "name": name,
        "etag": new_etag(),
        "type": Kind::Subnet.type_name(),
        "properties": props,
    })
}

fn check_nsg_reference(cloud: &Cloud, props: &Value, referrer: &str) -> Result<(), ArmError> {
    if let Some(nsg) = sub_resource_id(props, "networkSecurityGroup") {
        require_reference(cloud, &nsg, referrer)?;
    }
    Ok(())
}

pub(crate) fn put_vnet(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let id = target.id_in(cloud);
    let created = !cloud.resources.contains_key(&target.key);
    let requested: Vec<Value> = body
        .at("/properties/subnets")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut children = Vec::new();
    let mut kept = Vec::new();
    for subnet in &requested {
        let name = subnet.get("name").and_then(Value::as_str).ok_or_else(|| {
            ArmError::new(
                400,
                "InvalidRequestFormat",
                "Cannot parse the request: a subnet has no name.",
            )
            .with_target("properties.subnets")
        })?;
        let subnet_id = cloud
            .resources
            .get(&key(&format!("{id}/subnets/{name}")))
            .map_or_else(|| format!("{id}/subnets/{name}"), |r| r.id.clone());
        check_nsg_reference(
            cloud,
            subnet.get("properties").unwrap_or(&Value::Null),
            &subnet_id,
        )?;
        let child_key = key(&subnet_id);
        kept.push(child_key.clone());
        let resource = cloud.new_resource(
            subnet_id.clone(),
            Kind::Subnet,
            subnet_body(&subnet_id, name, subnet),
        );
        children.push((child_key, resource));
    }
    // A PUT that drops a subnet deletes it, which fails while something uses it.
    let dropped: Vec<Resource> = cloud
        .children(&target.key, Kind::Subnet)
        .into_iter()
        .filter(|s| !kept.contains(&key(&s.id)))
        .cloned()
        .collect();
    for subnet in &dropped {
        check_subnet_unused(cloud, subnet)?;
    }
    for subnet in &dropped {
        cloud.remove_tree(&key(&subnet.id));
    }
    let mut props = writable_properties(&body, &["subnets"]);
    props.entry("virtualNetworkPeerings").or_insert(json!([]));
    props.entry("enableDdosProtection").or_insert(json!(false));
    let stored_body = network_body(
        &id,
        target.name(),
        Kind::VirtualNetwork,
        &location,
        &body,
        props,
    );
    let stored = cloud.new_resource(id, Kind::VirtualNetwork, stored_body);
    finish_put(cloud, ctx, target, created, &location, stored, children)
}

pub(crate) fn put_subnet(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let id = target.id_in(cloud);
    check_nsg_reference(cloud, body.get("properties").unwrap_or(&Value::Null), &id)?;
    let created = !cloud.resources.contains_key(&target.key);
    let parent_location = target
        .path
        .parent()
        .and_then(|p| {
            let parent_key = key(&super::providers::canonical_id(
                &p,
                Kind::VirtualNetwork,
                &target.group_name,
            ));
            cloud
                .resources
                .get(&parent_key)
                .map(|r| r.location().to_owned())
        })
        .unwrap_or_else(|| "eastus".into());
    let stored = cloud.new_resource(
        id.clone(),
        Kind::Subnet,
        subnet_body(&id, target.name(), &body),
    );
    finish_put(
        cloud,
        ctx,
        target,
        created,
        &parent_location,
        stored,
        Vec::new(),
    )
}

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
fn default_rules(nsg_id: &str) -> Vec<Value> {
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

pub(crate) fn put_public_ip(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let id = target.id_in(cloud);
    let existing = cloud.resources.get(&target.key).cloned();
    let created = existing.is_none();
    let sku_name = body
        .at("/sku/name")
        .and_then(Value::as_str)
        .unwrap_or("Basic")
        .to_owned();
    let allocation = body
        .at("/properties/publicIPAllocationMethod")
        .and_then(Value::as_str)
        .unwrap_or(if sku_name.eq_ignore_ascii_case("Standard") {
            "Static"
        } else {
            "Dynamic"
        })
        .to_owned();
    if sku_name.eq_ignore_ascii_case("Standard") && allocation.eq_ignore_ascii_case("Dynamic") {
        return Err(ArmError::new(
            400,
            "StandardSkuPublicIPAddressesMustBeStatic",
            format!("Standard sku publicIp {id} must be Static."),
        ));
    }
    // Keep an address once given, as a Static address is.
    let address = existing
        .as_ref()
        .and_then(|r| {
            r.body
                .at("/properties/ipAddress")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| {
            cloud.ip_counter += 1;
            let n = cloud.ip_counter;
            format!(
                "20.{}.{}.{}",
                100 + (n >> 16) % 100,
                (n >> 8) & 0xff,
                (n & 0xff).max(1)
            )
        });
    let mut props = writable_properties(&body, &["ipAddress", "ipConfiguration"]);
    props.insert("publicIPAllocationMethod".into(), json!(allocation));
    props
        .entry("publicIPAddressVersion")
        .or_insert(json!("IPv4"));
    props.entry("idleTimeoutInMinutes").or_insert(json!(4));
    props.entry("ipTags").or_insert(json!([]));
    props
        .entry("ddosSettings")
        .or_insert(json!({"protectionMode": "VirtualNetworkInherited"}));
    props.insert("ipAddress".into(), json!(address));
    let mut stored_body = network_body(
        &id,
        target.name(),
        Kind::PublicIpAddress,
        &location,
        &body,
        props,
    );
    let tier = body
        .at("/sku/tier")
        .and_then(Value::as_str)
        .unwrap_or("Regional");
    stored_body["sku"] = json!({"name": sku_name, "tier": tier});
    let stored = cloud.new_resource(id, Kind::PublicIpAddress, stored_body);
    finish_put(cloud, ctx, target, created, &location, stored, Vec::new())
}

fn parse_prefix(prefix: &str) -> Option<(u32, u32)> {
    let (addr, len) = prefix.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    (len <= 32).then_some((u32::from(addr), len))
}

/// The lowest free host address of a subnet, skipping the five Azure reserves (network, .1-.3,
/// broadcast).
fn allocate_private_ip(cloud: &Cloud, subnet: &Resource, own_nic: &str) -> Option<String> {
    let prefix = subnet
        .body
        .at("/properties/addressPrefix")
        .and_then(Value::as_str)
        .or_else(|| {
            subnet
                .body
                .at("/properties/addressPrefixes/0")
                .and_then(Value::as_str)
        })?;
    let (base, len) = parse_prefix(prefix)?;
    let size = 1u64 << (32 - len);
    let subnet_key = key(&subnet.id);
    let used: std::collections::HashSet<&str> = cloud
        .of_kind(Kind::NetworkInterface)
        .into_iter()
        .filter(|nic| !is_key(&nic.id, own_nic))
        .flat_map(ip_configurations)
        .filter(|ipc| {
            sub_resource_ref(&ipc["properties"], "subnet").is_some_and(|s| is_key(s, &subnet_key))
        })
        .filter_map(|ipc| {
            ipc.at("/properties/privateIPAddress")
                .and_then(Value::as_str)
        })
        .collect();
    (4..size.saturating_sub(1)).find_map(|offset| {
        let addr = Ipv4Addr::from(base.wrapping_add(u32::try_from(offset).ok()?)).to_string();
        (!used.contains(addr.as_str())).then_some(addr)
    })
}

fn ip_configurations(nic: &Resource) -> &[Value] {
    nic.body
        .at("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The stored IP configurations of a NIC: ids, private addresses, checked references.
fn ip_configuration_bodies(
    cloud: &Cloud,
    target: &Target<'_>,
    id: &str,
    existing: Option<&Resource>,
    requested: &[Value],
) -> Result<Vec<Value>, ArmError> {
    // Secondary IP configurations may leave the subnet out: they share the primary's.
    let first_subnet = requested.iter().find_map(|ipc| {
        ipc.get("properties")
            .and_then(|p| sub_resource_id(p, "subnet"))
    });
    let mut configs = Vec::new();
    for (i, ipc) in requested.iter().enumerate() {
        let name = ipc
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("ipconfig1")
            .to_owned();
        let ipc_id = format!("{id}/ipConfigurations/{name}");
        let props = ipc.get("properties").cloned().unwrap_or_else(|| json!({}));
        let subnet_id = sub_resource_id(&props, "subnet")
            .or_else(|| first_subnet.clone())
            .ok_or_else(|| {
                ArmError::new(
                    400,
                    "InvalidRequestFormat",
                    "Cannot parse the request: an IP configuration has no subnet.",
                )
                .with_target(&format!(
                    "properties.ipConfigurations[{i}].properties.subnet"
                ))
            })?;
        require_reference(cloud, &subnet_id, &ipc_id)?;
        if let Some(pip) = sub_resource_id(&props, "publicIPAddress") {
            require_reference(cloud, &pip, &ipc_id)?;
        }
        let subnet = cloud.resources.get(&key(&subnet_id)).cloned();
        let previous = existing.and_then(|nic| {
            ip_configurations(nic)
                .iter()
                .find(|c| c.get("name").and_then(Value::as_str) == Some(name.as_str()))
                .and_then(|c| {
                    c.at("/properties/privateIPAddress")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
        });
        let address = props
            .get("privateIPAddress")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(previous)
            .or_else(|| {
                subnet
                    .as_ref()
                    .and_then(|s| allocate_private_ip(cloud, s, &target.key))
            })
            .unwrap_or_else(|| "10.0.0.4".into());
        let mut out = props.as_object().cloned().unwrap_or_default();
        out.insert("subnet".into(), json!({"id": subnet_id}));
        out.insert("privateIPAddress".into(), json!(address));
        out.entry("privateIPAllocationMethod")
            .or_insert(json!("Dynamic"));
        out.entry("privateIPAddressVersion")
            .or_insert(json!("IPv4"));
        out.entry("primary").or_insert(json!(i == 0));
        out.insert("provisioningState".into(), json!("Updating"));
        configs.push(json!({
            "id": ipc_id,
            "name": name,
            "etag": new_etag(),
            "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
            "properties": out,
        }));
    }
    Ok(configs)
}

pub(crate) fn put_nic(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let id = target.id_in(cloud);
    let existing = cloud.resources.get(&target.key).cloned();
    let created = existing.is_none();
    if let Some(props) = body.get("properties") {
        check_nsg_reference(cloud, props, &id)?;
    }
    let requested = body
        .at("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if requested.is_empty() {
        return Err(ArmError::new(
            400,
            "NetworkInterfaceMustHaveAtLeastOneIpConfiguration",
            format!("Network interface {id} must have at least one IP configuration."),
        ));
    }
    let configs = ip_configuration_bodies(cloud, target, &id, existing.as_ref(), &requested)?;
    let mut props =
        writable_properties(&body, &["ipConfigurations", "virtualMachine", "macAddress"]);
    props.insert("ipConfigurations".into(), Value::Array(configs));
    props
        .entry("enableAcceleratedNetworking")
        .or_insert(json!(false));
    props.entry("enableIPForwarding").or_insert(json!(false));
    props.entry("nicType").or_insert(json!("Standard"));
    props
        .entry("dnsSettings")
        .or_insert(json!({"dnsServers": [], "appliedDnsServers": []}));
    let stored_body = network_body(
        &id,
        target.name(),
        Kind::NetworkInterface,
        &location,
        &body,
        props,
    );
    let stored = cloud.new_resource(id, Kind::NetworkInterface, stored_body);
    finish_put(cloud, ctx, target, created, &location, stored, Vec::new())
}

/// VMs whose network profile lists the NIC.
fn vm_using_nic(cloud: &Cloud, nic_key: &str) -> Option<String> {
    cloud
        .of_kind(Kind::VirtualMachine)
        .into_iter()
        .find_map(|vm| {
            vm.body
                .at("/properties/networkProfile/networkInterfaces")
                .and_then(Value::as_array)?
                .iter()
                .any(|n| {
                    n.get("id")
                        .and_then(Value::as_str)
                        .is_some_and(|id| is_key(id, nic_key))
                })
                .then(|| vm.id.clone())
        })
}

/// `(ip configuration id, its properties)` of every NIC.
fn all_ip_configurations(cloud: &Cloud) -> impl Iterator<Item = (&str, &Value)> {
    cloud
        .of_kind(Kind::NetworkInterface)
        .into_iter()
        .flat_map(ip_configurations)
        .map(|c| {
            let id = c.get("id").and_then(Value::as_str).unwrap_or_default();
            (id, c.get("properties").unwrap_or(&Value::Null))
        })
}

fn users_of(cloud: &Cloud, field: &str, target: &str) -> Vec<String> {
    all_ip_configurations(cloud)
        .filter(|(_, props)| sub_resource_ref(props, field).is_some_and(|id| is_key(id, target)))
        .map(|(id, _)| id.to_owned())
        .collect()
}

fn check_subnet_unused(cloud: &Cloud, subnet: &Resource) -> Result<(), ArmError> {
    if let Some(user) = users_of(cloud, "subnet", &key(&subnet.id))
        .into_iter()
        .next()
    {
        return Err(ArmError::new(
            400,
            "InUseSubnetCannotBeDeleted",
            format!(
                "Subnet {} is in use by {user} and cannot be deleted. In order to delete the \
                 subnet, delete all the resources within the subnet. See aka.ms/deletesubnet.",
                subnet.name()
            ),
        ));
    }
    Ok(())
}

/// The in-use rules of network DELETEs.
pub(crate) fn check_delete(cloud: &Cloud, resource: &Resource) -> Result<(), ArmError> {
    let own = key(&resource.id);
    match resource.kind {
        Kind::Subnet => check_subnet_unused(cloud, resource),
        Kind::VirtualNetwork => cloud
            .children(&own, Kind::Subnet)
            .into_iter()
            .try_for_each(|s| check_subnet_unused(cloud, s)),
        Kind::NetworkInterface => match vm_using_nic(cloud, &own) {
            Some(vm) => Err(ArmError::new(
                400,
                "NicInUse",
                format!(
                    "Network Interface {} is used by existing resource {vm}. In order to delete the \
                     network interface, it must be dissociated from the resource. To learn more, see \
                     aka.ms/deletenic.",
                    resource.id
                ),
            )),
            None => Ok(()),
        },
        Kind::PublicIpAddress => {
            match users_of(cloud, "publicIPAddress", &own).into_iter().next() {
                Some(user) => Err(ArmError::new(
                    400,
                    "PublicIPAddressCannotBeDeleted",
                    format!(
                        "Public IP address {} can not be deleted since it is still allocated to resource \
                     {user}. In order to delete the public IP, disassociate/detach the Public IP \
                     address from the resource.  To learn how to do this, see aka.ms/deletepublicip.",
                        resource.id
                    ),
                )),
                None => Ok(()),
            }
        }
        Kind::NetworkSecurityGroup => {
            let users = nsg_users(cloud, &own);
            if users.is_empty() {
                Ok(())
            } else {
                Err(ArmError::new(
                    400,
                    "InUseNetworkSecurityGroupCannotBeDeleted",
                    format!(
                        "Network security group {} cannot be deleted because it is in use by the \
                         following resources: {}. In order to delete the Network security group, \
                         remove the association with the resource(s). To learn how to do this, see \
                         aka.ms/deletensg.",
                        resource.id,
                        users.join(", ")
                    ),
                ))
            }
        }
        _ => Ok(()),
    }
}

fn nsg_users(cloud: &Cloud, nsg_key: &str) -> Vec<String> {
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

fn set_state_everywhere(value: &mut Value, state: &str) {
    if let Some(array) = value
        .pointer_mut("/properties/ipConfigurations")
        .and_then(Value::as_array_mut)
    {
        for ipc in array {
            if let Some(props) = ipc.get_mut("properties").and_then(Value::as_object_mut)
                && props.contains_key("provisioningState")
            {
                props.insert("provisioningState".into(), json!(state));
            }
        }
    }
}

/// The GET representation: stored body plus what other resources imply.
pub(crate) fn render(cloud: &Cloud, resource: &Resource) -> Value {
    let mut body = resource.body.clone();
    let own = key(&resource.id);
    let state = resource
        .provisioning_state()
        .unwrap_or("Succeeded")
        .to_owned();
    match resource.kind {
        Kind::VirtualNetwork => {
            let subnets: Vec<Value> = cloud
                .children(&own, Kind::Subnet)
                .into_iter()
                .map(|s| render(cloud, s))
                .collect();
            body["properties"]["subnets"] = Value::Array(subnets);
        }
        Kind::Subnet => {
            let users: Vec<Value> = users_of(cloud, "subnet", &own)
                .into_iter()
                .map(|id| json!({"id": id}))
                .collect();
            if !users.is_empty() {
                body["properties"]["ipConfigurations"] = Value::Array(users);
            }
        }
        Kind::NetworkSecurityGroup => {
            let rules: Vec<Value> = cloud
                .children(&own, Kind::SecurityRule)
                .into_iter()
                .map(|r| r.body.clone())
                .collect();
            body["properties"]["securityRules"] = Value::Array(rules);
            body["properties"]["defaultSecurityRules"] = Value::Array(default_rules(&resource.id));
            let (nics, subnets): (Vec<String>, Vec<String>) = nsg_users(cloud, &own)
                .into_iter()
                .partition(|id| id.to_ascii_lowercase().contains("/networkinterfaces/"));
            if !nics.is_empty() {
                body["properties"]["networkInterfaces"] =
                    json!(nics.iter().map(|id| json!({"id": id})).collect::<Vec<_>>());
            }
            if !subnets.is_empty() {
                body["properties"]["subnets"] = json!(
                    subnets
                        .iter()
                        .map(|id| json!({"id": id}))
                        .collect::<Vec<_>>()
                );
            }
        }
        Kind::PublicIpAddress => {
            if let Some(user) = users_of(cloud, "publicIPAddress", &own).into_iter().next() {
                body["properties"]["ipConfiguration"] = json!({"id": user});
            }
            // A Dynamic address exists only while attached to an allocated VM.
            let dynamic = body
                .at("/properties/publicIPAllocationMethod")
                .and_then(Value::as_str)
                .is_some_and(|m| m.eq_ignore_ascii_case("Dynamic"));
            if dynamic
                && !attached_to_running_vm(cloud, &own)
                && let Some(props) = body.get_mut("properties").and_then(Value::as_object_mut)
            {
                props.remove("ipAddress");
            }
        }
        Kind::NetworkInterface => {
            set_state_everywhere(&mut body, &state);
            if let Some(vm) = vm_using_nic(cloud, &own) {
                body["properties"]["virtualMachine"] = json!({"id": vm});
                body["properties"]["primary"] = json!(true);
                let n = resource.seq;
                body["properties"]["macAddress"] = json!(format!(
                    "00-0D-3A-{:02X}-{:02X}-{:02X}",
                    (n >> 16) & 0xff,
                    (n >> 8) & 0xff,
                    n & 0xff
                ));
            }
        }
        _ => {}
    }
    body
}

fn attached_to_running_vm(cloud: &Cloud, pip_key: &str) -> bool {
    cloud
        .of_kind(Kind::NetworkInterface)
        .into_iter()
        .any(|nic| {
            let uses = ip_configurations(nic).iter().any(|c| {
                sub_resource_ref(&c["properties"], "publicIPAddress")
                    .is_some_and(|id| is_key(id, pip_key))
            });
            uses && vm_using_nic(cloud, &key(&nic.id)).is_some_and(|vm| {
                cloud
                    .resources
                    .get(&key(&vm))
                    .and_then(|v| v.power.as_deref())
                    .is_some_and(|p| p != "deallocated")
            })
        })
}

/// Finds the public IP address of a VM (through its NICs), for the SSH endpoint test hook.
pub(crate) fn vm_public_ip(cloud: &Cloud, vm_key: &str) -> Option<(String, String)> {
    let vm = cloud.resources.get(vm_key)?;
    let nics = vm
        .body
        .at("/properties/networkProfile/networkInterfaces")?
        .as_array()?
        .iter()
        .filter_map(|n| n.get("id").and_then(Value::as_str))
        .map(key);
    for nic_key in nics {
        let Some(nic) = cloud.resources.get(&nic_key) else {
            continue;
        };
        for ipc in ip_configurations(nic) {
            if let Some(pip_id) = sub_resource_id(&ipc["properties"], "publicIPAddress")
                && let Some(pip) = cloud.resources.get(&key(&pip_id))
                && let Some(address) = pip.body.at("/properties/ipAddress").and_then(Value::as_str)
            {
                return Some((address.to_owned(), pip.id.clone()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_parse() {
        assert_eq!(
            parse_prefix("10.0.1.0/24"),
            Some((u32::from(Ipv4Addr::new(10, 0, 1, 0)), 24))
        );
        assert_eq!(parse_prefix("10.0.1.0/33"), None);
        assert_eq!(parse_prefix("nonsense"), None);
    }

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
