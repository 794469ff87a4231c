//! Virtual networks and their subnets: address spaces, the NSG a subnet names, and the rule that
//! a subnet in use cannot go.

use serde_json::{Value, json};

use super::{finish_put, network_body, new_etag, sub_resource_id, users_of, writable_properties};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::resource::{Target, key, require_location, require_reference};
use crate::emulator::store::{Cloud, Kind, Resource};

fn subnet_body(id: &str, name: &str, request: &Value) -> Value {
    let mut props = writable_properties(request, &["ipConfigurations"]);
    // Service endpoints are provisioned with the subnet; ARM reports each one's state.
    if let Some(Value::Array(endpoints)) = props.get_mut("serviceEndpoints") {
        for endpoint in endpoints.iter_mut() {
            if let Value::Object(map) = endpoint {
                map.insert("provisioningState".into(), json!("Succeeded"));
            }
        }
    }
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

pub(super) fn check_nsg_reference(
    cloud: &Cloud,
    props: &Value,
    referrer: &str,
) -> Result<(), ArmError> {
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
            let parent_key = key(&crate::emulator::resource::canonical_id(
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

pub(super) fn check_subnet_unused(cloud: &Cloud, subnet: &Resource) -> Result<(), ArmError> {
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
