//! Public IP addresses: static allocation, and the address a VM is reached at.

use serde_json::{Value, json};

use super::nic::{ip_configurations, vm_using_nic};
use super::{
    finish_put, is_key, network_body, sub_resource_id, sub_resource_ref, writable_properties,
};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::resource::{Target, key, require_location};
use crate::emulator::store::{Cloud, Kind};

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
        .unwrap_or_else(|| next_public_address(cloud));
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

pub(super) fn attached_to_running_vm(cloud: &Cloud, pip_key: &str) -> bool {
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

/// A public address not handed out before in this cloud (public IP resources and the AmlCompute
/// clusters' own addresses draw from the same counter).
pub(crate) fn next_public_address(cloud: &mut Cloud) -> String {
    cloud.ip_counter += 1;
    let n = cloud.ip_counter;
    format!(
        "20.{}.{}.{}",
        100 + (n >> 16) % 100,
        (n >> 8) & 0xff,
        (n & 0xff).max(1)
    )
}
