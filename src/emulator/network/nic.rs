//! Network interfaces: IP configurations, private addresses allocated from the subnet, and the
//! VM that holds a NIC.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::vnet::check_nsg_reference;
use super::{
    finish_put, is_key, network_body, new_etag, sub_resource_id, sub_resource_ref,
    writable_properties,
};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::resource::{Target, key, require_location, require_reference};
use crate::emulator::store::{Cloud, Kind, Resource};

fn parse_prefix(prefix: &str) -> Option<(u32, u32)> {
    let (addr, len) = prefix.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    (len <= 32).then_some((u32::from(addr), len))
}

/// The lowest free host address of a subnet, skipping the five Azure reserves (network, .1-.3,
/// broadcast); `None` when the subnet's prefix cannot be read. A subnet with no address left
/// refuses the NIC as Network does (400 `SubnetIsFull`): a 256-node cluster in a /24 stops at
/// its 252nd NIC.
fn allocate_private_ip(
    cloud: &Cloud,
    subnet: &Resource,
    own_nic: &str,
) -> Result<Option<String>, ArmError> {
    let Some(prefix) = subnet
        .body
        .at("/properties/addressPrefix")
        .and_then(Value::as_str)
        .or_else(|| {
            subnet
                .body
                .at("/properties/addressPrefixes/0")
                .and_then(Value::as_str)
        })
    else {
        return Ok(None);
    };
    let Some((base, len)) = parse_prefix(prefix) else {
        return Ok(None);
    };
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
    let free = (4..size.saturating_sub(1)).find_map(|offset| {
        let addr = Ipv4Addr::from(base.wrapping_add(u32::try_from(offset).ok()?)).to_string();
        (!used.contains(addr.as_str())).then_some(addr)
    });
    match free {
        Some(addr) => Ok(Some(addr)),
        None => Err(ArmError::new(
            400,
            "SubnetIsFull",
            format!(
                "Subnet {} with address prefix {prefix} does not have enough capacity for 1 IP \
                 addresses.",
                subnet.name()
            ),
        )),
    }
}

pub(super) fn ip_configurations(nic: &Resource) -> &[Value] {
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
        let asked = props
            .get("privateIPAddress")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(previous);
        let address = match (asked, subnet.as_ref()) {
            (Some(address), _) => Some(address),
            (None, Some(subnet)) => allocate_private_ip(cloud, subnet, &target.key)?,
            (None, None) => None,
        }
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
pub(super) fn vm_using_nic(cloud: &Cloud, nic_key: &str) -> Option<String> {
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
pub(super) fn all_ip_configurations(cloud: &Cloud) -> impl Iterator<Item = (&str, &Value)> {
    cloud
        .of_kind(Kind::NetworkInterface)
        .into_iter()
        .flat_map(ip_configurations)
        .map(|c| {
            let id = c.get("id").and_then(Value::as_str).unwrap_or_default();
            (id, c.get("properties").unwrap_or(&Value::Null))
        })
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
}
