//! Microsoft.Network (2024-07-01): virtual networks and subnets, security groups and rules,
//! public IPs and NICs. PUTs answer 200/201 with `Updating` and an Azure-AsyncOperation header;
//! DELETEs answer 202 with Location; resources in use refuse deletion with ARM's 400s.

use serde_json::{Value, json};

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::json::At as _;
use super::ops;
use super::resource::{Target, envelope, key};
use super::store::{Cloud, Kind, OpKind, Resource};

mod nic;
mod nsg;
mod public_ip;
mod vnet;

pub(crate) use nic::put_nic;
use nic::{all_ip_configurations, vm_using_nic};
use nsg::{default_rules, nsg_users};
pub(crate) use nsg::{put_nsg, put_rule};
use public_ip::attached_to_running_vm;
pub(crate) use public_ip::{next_public_address, put_public_ip, vm_public_ip};
use vnet::check_subnet_unused;
pub(crate) use vnet::{put_subnet, put_vnet};

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

/// Stores a network resource, keeping what a PUT does not change of the one it replaces.
fn upsert(cloud: &mut Cloud, key: String, mut resource: Resource) {
    if let Some(old) = cloud.resources.get(&key) {
        resource.power.clone_from(&old.power);
        resource.keys.clone_from(&old.keys);
    }
    cloud.put_resource(key, resource);
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

fn users_of(cloud: &Cloud, field: &str, target: &str) -> Vec<String> {
    all_ip_configurations(cloud)
        .filter(|(_, props)| sub_resource_ref(props, field).is_some_and(|id| is_key(id, target)))
        .map(|(id, _)| id.to_owned())
        .collect()
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
