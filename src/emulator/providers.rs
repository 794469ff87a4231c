//! Routing a parsed ARM path to the resource group, network, compute, storage or DevTestLab
//! handlers, with the checks ARM makes before a request reaches a provider: the group exists,
//! is not being deleted, the resource type is known, the parent of a child resource exists.

use serde_json::{Value, json};

use super::aks;
use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::path::{ResourcePath, Route};
use super::render::render;
use super::resource::{TENANT, Target, canonical_id, key, not_implemented, visible};
use super::store::{Cloud, Kind, top_level};
use super::{compute, generic, groups, ml, network, ops, paging, registry, schedules, storage};

/// What the handlers do when their operations complete, for `ops::advance`.
pub(crate) fn completions() -> ops::Completions {
    ops::Completions::default()
        .on_delete(Kind::VirtualMachine, compute::release_disks)
        .on_action(Kind::VirtualMachine, compute::power_after)
        .on_delete(Kind::ManagedCluster, aks::remove_node_group)
        .on_action(Kind::ManagedCluster, aks::power_after)
        .on_group_delete(super::authorization::remove_inside)
        .on_group_delete(aks::remove_orphan_node_groups)
        .on_tick(compute::spot_tick)
}

pub(crate) fn dispatch(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    route: &Route,
) -> Result<Reply, ArmError> {
    match route {
        Route::Subscription { sub } => subscription(ctx, sub),
        Route::Groups { sub } => groups::list(cloud, ctx, sub),
        Route::Providers { sub } => registry::list(cloud, ctx, sub),
        Route::Resources { sub } => generic::list(cloud, ctx, sub, None),
        Route::GroupResources { sub, group } => generic::list(cloud, ctx, sub, Some(group)),
        Route::Group { sub, group } => groups::handle(cloud, ctx, sub, group),
        Route::GroupOperation { sub, id } => ops::result(ctx, cloud, sub, id, |_, _| None),
        Route::Location {
            sub,
            namespace,
            location,
            rest,
        } => location_route(cloud, ctx, sub, namespace, location, rest),
        Route::Provider {
            sub,
            namespace,
            rest,
        } if namespace.eq_ignore_ascii_case("Microsoft.Features") && !rest.is_empty() => {
            super::features::handle(cloud, ctx, sub, rest)
        }
        Route::Provider {
            sub,
            namespace,
            rest,
        } => {
            if let [] | [_] = rest.as_slice()
                && (rest.is_empty()
                    || ["register", "unregister", "resourceTypes"]
                        .iter()
                        .any(|a| rest[0].eq_ignore_ascii_case(a)))
            {
                return registry::handle(
                    cloud,
                    ctx,
                    sub,
                    namespace,
                    rest.first().map(String::as_str),
                );
            }
            served(cloud, ctx, sub, namespace)?;
            let storage_ns = namespace.eq_ignore_ascii_case("Microsoft.Storage");
            match rest.as_slice() {
                [skus]
                    if skus.eq_ignore_ascii_case("skus")
                        && namespace.eq_ignore_ascii_case("Microsoft.Compute") =>
                {
                    compute::skus(ctx)
                }
                [kind, id] if storage_ns && kind.eq_ignore_ascii_case("operations") => {
                    ops::storage_monitor(ctx, cloud, sub, id, |cloud, key| {
                        cloud.resources.get(key).map(|r| storage::render(cloud, r))
                    })
                }
                [check] if storage_ns && check.eq_ignore_ascii_case("checkNameAvailability") => {
                    storage::check_name(cloud, ctx)
                }
                [rtype] if subscription_kind(namespace, rtype).is_some() => {
                    list_in_subscription(cloud, ctx, sub, namespace, rtype)
                }
                // One type name in a namespace the emulator serves: ARM's own answer for a type
                // it does not know (or that has no subscription-wide list).
                [rtype] => Err(unknown_type(namespace, rtype, &ctx.api_version)),
                _ => Err(not_implemented(ctx)),
            }
        }
        Route::Resource(path) => {
            served(cloud, ctx, &path.sub, &path.namespace)?;
            resource(cloud, ctx, path)
        }
        Route::Unknown => Err(not_implemented(ctx)),
    }
}

/// `/subscriptions/{s}/providers/{namespace}/locations/{location}/...`: operation status and
/// results, usages, sizes, marketplace images, deleted vaults.
fn location_route(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    sub: &str,
    namespace: &str,
    location: &str,
    rest: &[String],
) -> Result<Reply, ArmError> {
    served(cloud, ctx, sub, namespace)?;
    let compute = namespace.eq_ignore_ascii_case("Microsoft.Compute");
    let aml = namespace.eq_ignore_ascii_case("Microsoft.MachineLearningServices");
    match rest {
        [kind, id] if kind.eq_ignore_ascii_case("operations") => ops::status(ctx, cloud, sub, id),
        [kind, id] if kind.eq_ignore_ascii_case("operationResults") => {
            let ctx: &Ctx<'_> = ctx;
            ops::result(ctx, cloud, sub, id, |cloud, key| {
                cloud.resources.get(key).map(|r| render(cloud, ctx, r))
            })
        }
        [usages] if compute && usages.eq_ignore_ascii_case("usages") => {
            compute::usages(cloud, ctx, sub, location)
        }
        [sizes] if compute && sizes.eq_ignore_ascii_case("vmSizes") => {
            compute::vm_sizes(ctx, location)
        }
        [publishers, ..] if compute && publishers.eq_ignore_ascii_case("publishers") => {
            compute::vm_image(ctx, sub, location, rest).unwrap_or_else(|| Err(not_implemented(ctx)))
        }
        [usages] if aml && usages.eq_ignore_ascii_case("usages") => {
            ml::usages(cloud, ctx, sub, location)
        }
        [sizes] if aml && sizes.eq_ignore_ascii_case("vmSizes") => Ok(ml::vm_sizes(ctx, location)),
        [versions]
            if namespace.eq_ignore_ascii_case("Microsoft.ContainerService")
                && versions.eq_ignore_ascii_case("kubernetesVersions") =>
        {
            aks::kubernetes_versions(ctx)
        }
        [deleted, name, purge]
            if namespace.eq_ignore_ascii_case("Microsoft.KeyVault")
                && deleted.eq_ignore_ascii_case("deletedVaults")
                && purge.eq_ignore_ascii_case("purge") =>
        {
            ml::purge_vault(cloud, ctx, name)
        }
        _ => Err(not_implemented(ctx)),
    }
}

/// Checks a namespace before its provider sees the request: one the emulator does not serve is
/// not implemented (never an ARM-looking "not found"), and one the subscription is not
/// registered for answers ARM's `MissingSubscriptionRegistration`.
fn served(cloud: &Cloud, ctx: &Ctx<'_>, sub: &str, namespace: &str) -> Result<(), ArmError> {
    if registry::implemented(namespace).is_none() {
        return Err(not_implemented(ctx));
    }
    registry::require_registered(cloud, ctx, sub, namespace)
}

/// ARM's 404 for a type name its namespace does not have.
fn unknown_type(namespace: &str, rtype: &str, api_version: &str) -> ArmError {
    ArmError::new(
        404,
        "InvalidResourceType",
        format!(
            "The resource type '{rtype}' could not be found in the namespace '{namespace}' for \
             api version '{api_version}'."
        ),
    )
}

fn resource(cloud: &mut Cloud, ctx: &mut Ctx<'_>, path: &ResourcePath) -> Result<Reply, ArmError> {
    let group = groups::existing(cloud, &path.sub, &path.group)?;
    let (group_key, group_name, group_deleting) = (group.0, group.1, group.2);
    let write = matches!(ctx.method.as_str(), "PUT" | "POST" | "PATCH");
    if write && group_deleting {
        return Err(ArmError::group_being_deleted(&path.group));
    }
    if let Some(tail) = &path.tail
        && ctx.method == "GET"
        && let Some(kind) = Kind::from_type(&format!("{}/{tail}", path.rtype()))
    {
        return list(cloud, ctx, path, kind, &group_key);
    }
    let kind = Kind::from_type(&path.rtype()).ok_or_else(|| {
        unknown_type(
            &path.namespace,
            path.rtype().split_once('/').map_or("", |(_, t)| t),
            &ctx.api_version,
        )
    })?;
    let id = canonical_id(path, kind, &group_name);
    let target = Target {
        path,
        kind,
        key: key(&id),
        id,
        group_name,
        group_key,
    };
    // A child (subnet, rule, container, share) needs its top-level parent.
    if path.segments.len() > 1 {
        let top = ResourcePath {
            segments: path.segments[..1].to_vec(),
            tail: None,
            ..path.clone()
        };
        let top_kind = Kind::from_type(&top.rtype());
        let top_key = top_kind.map(|k| key(&canonical_id(&top, k, &target.group_name)));
        let present = top_key
            .as_ref()
            .and_then(|k| cloud.resources.get(k))
            .is_some_and(|r| !r.hidden);
        if !present {
            if ctx.method == "DELETE" {
                return Ok(Reply::empty(204));
            }
            let parent_id =
                top_kind.map_or_else(String::new, |k| canonical_id(&top, k, &target.group_name));
            let action = if write { "write" } else { "read" };
            return Err(ArmError::new(
                404,
                "ParentResourceNotFound",
                format!(
                    "Failed to perform '{action}' on resource(s) of type '{}', because the parent \
                     resource '{parent_id}' could not be found.",
                    kind.type_name().split_once('/').map_or("", |(_, t)| t)
                ),
            ));
        }
    }
    if let Some(tail) = path.tail.clone() {
        return action(cloud, ctx, &target, &tail);
    }
    match ctx.method.as_str() {
        "GET" => get(cloud, ctx, &target),
        "HEAD" => Ok(Reply::empty(if visible(cloud, &target.key) {
            204
        } else {
            404
        })),
        "PUT" => put(cloud, ctx, &target),
        "DELETE" => delete(cloud, ctx, &target),
        "PATCH" => super::patch::patch(cloud, ctx, &target),
        other => Err(ArmError::method_not_allowed(other)),
    }
}

fn get(cloud: &Cloud, ctx: &Ctx<'_>, target: &Target<'_>) -> Result<Reply, ArmError> {
    match cloud.resources.get(&target.key) {
        Some(resource) if !resource.hidden => Ok(Reply::json(200, render(cloud, ctx, resource))),
        _ => Err(target.not_found()),
    }
}

fn list(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    path: &ResourcePath,
    kind: Kind,
    group_key: &str,
) -> Result<Reply, ArmError> {
    if kind == Kind::VirtualMachine {
        compute::check_vm_list_query(ctx)?;
    }
    let items: Vec<Value> = if path.segments.is_empty() {
        let prefix = format!("{group_key}/");
        cloud
            .of_kind(kind)
            .into_iter()
            .filter(|r| key(&r.id).starts_with(&prefix))
            .map(|r| render(cloud, ctx, r))
            .collect()
    } else {
        let parent = Kind::from_type(&path.rtype())
            .map(|k| key(&canonical_id(path, k, path.group.as_str())))
            .unwrap_or_default();
        cloud
            .children(&parent, kind)
            .into_iter()
            .filter(|r| !r.hidden)
            .map(|r| render(cloud, ctx, r))
            .collect()
    };
    paging::page(ctx, items)
}

/// The kind a subscription-wide list such as `/providers/Microsoft.Compute/virtualMachines`
/// names: a top-level kind (ARM has no subscription-wide list of subnets or containers).
fn subscription_kind(namespace: &str, rtype: &str) -> Option<Kind> {
    Kind::from_type(&format!("{namespace}/{rtype}")).filter(|k| top_level(*k))
}

/// `GET /subscriptions/{s}/providers/{namespace}/{type}`: every resource of the kind in every
/// group of the subscription, in creation order, as a GET of each shows it, paged.
fn list_in_subscription(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    sub: &str,
    namespace: &str,
    rtype: &str,
) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let Some(kind) = subscription_kind(namespace, rtype) else {
        return Err(unknown_type(namespace, rtype, &ctx.api_version));
    };
    if kind == Kind::VirtualMachine {
        compute::check_vm_list_query(ctx)?;
    }
    let prefix = key(&format!("/subscriptions/{sub}/resourceGroups/")) + "/";
    let items: Vec<Value> = cloud
        .of_kind(kind)
        .into_iter()
        .filter(|r| key(&r.id).starts_with(&prefix))
        .map(|r| render(cloud, ctx, r))
        .collect();
    paging::page(ctx, items)
}

fn put(cloud: &mut Cloud, ctx: &mut Ctx<'_>, target: &Target<'_>) -> Result<Reply, ArmError> {
    if !ctx.body().is_object() {
        return Err(ArmError::invalid_request(
            "The request content must be a JSON object.",
        ));
    }
    match target.kind {
        Kind::VirtualNetwork => network::put_vnet(cloud, ctx, target),
        Kind::Subnet => network::put_subnet(cloud, ctx, target),
        Kind::NetworkSecurityGroup => network::put_nsg(cloud, ctx, target),
        Kind::SecurityRule => network::put_rule(cloud, ctx, target),
        Kind::PublicIpAddress => network::put_public_ip(cloud, ctx, target),
        Kind::NetworkInterface => network::put_nic(cloud, ctx, target),
        Kind::ProximityPlacementGroup => compute::put_ppg(cloud, ctx, target),
        Kind::AvailabilitySet => compute::put_avset(cloud, ctx, target),
        Kind::VirtualMachine => compute::put_vm(cloud, ctx, target),
        Kind::Disk => compute::put_disk(cloud, ctx, target),
        Kind::StorageAccount => storage::put_account(cloud, ctx, target),
        Kind::BlobContainer | Kind::FileShare => Ok(storage::put_child(cloud, ctx, target)),
        Kind::Schedule => schedules::put(cloud, ctx, target),
        Kind::KeyVault => ml::put_vault(cloud, ctx, target),
        Kind::LogAnalyticsWorkspace => ml::put_log_analytics(cloud, ctx, target),
        Kind::AppInsights => ml::put_insights(cloud, ctx, target),
        Kind::ContainerRegistry => ml::put_registry(cloud, ctx, target),
        Kind::MlWorkspace => ml::put_workspace(cloud, ctx, target),
        Kind::MlCompute => ml::put_compute(cloud, ctx, target),
        Kind::ManagedCluster | Kind::AgentPool => aks::put(cloud, ctx, target),
        Kind::ResourceGroup => Err(ArmError::method_not_allowed("PUT")),
    }
}

fn delete(cloud: &mut Cloud, ctx: &mut Ctx<'_>, target: &Target<'_>) -> Result<Reply, ArmError> {
    let Some(resource) = cloud
        .resources
        .get(&target.key)
        .filter(|r| !r.hidden)
        .cloned()
    else {
        // ARM: a DELETE of a missing resource is a success with nothing deleted.
        return Ok(Reply::empty(204));
    };
    match target.kind {
        Kind::VirtualNetwork
        | Kind::Subnet
        | Kind::NetworkSecurityGroup
        | Kind::SecurityRule
        | Kind::PublicIpAddress
        | Kind::NetworkInterface => network::check_delete(cloud, &resource)?,
        Kind::VirtualMachine
        | Kind::Disk
        | Kind::ProximityPlacementGroup
        | Kind::AvailabilitySet => {
            compute::check_delete(cloud, &resource)?;
        }
        Kind::AgentPool => aks::check_delete(cloud, &resource)?,
        _ => {}
    }
    if target.kind == Kind::KeyVault {
        // Soft delete, on for every vault since 2020: the name stays taken until a purge.
        let location = resource
            .body
            .get("location")
            .and_then(Value::as_str)
            .unwrap_or_default();
        cloud
            .deleted_vaults
            .insert(target.name().to_ascii_lowercase(), location.to_owned());
    }
    match target.kind {
        // Synchronous deletes: 200 when something was deleted.
        Kind::StorageAccount
        | Kind::BlobContainer
        | Kind::FileShare
        | Kind::Schedule
        | Kind::ProximityPlacementGroup
        | Kind::AvailabilitySet
        | Kind::KeyVault
        | Kind::LogAnalyticsWorkspace
        | Kind::AppInsights => {
            cloud.remove_tree(&target.key);
            Ok(Reply::empty(200))
        }
        _ => {
            if let Some(op_id) = &resource.op
                && let Some(op) = cloud.operations.get(op_id).cloned()
                && op.kind == super::store::OpKind::Delete
            {
                // Already being deleted: answer with the running operation.
                return Ok(Reply::empty(202).headers(ops::accepted_headers(ctx, &op)));
            }
            let real = ops::base_latency(target.kind, &super::store::OpKind::Delete, None);
            let op = ops::start(
                cloud,
                ctx,
                super::store::OpKind::Delete,
                &target.key,
                target.kind.namespace(),
                resource.location(),
                real,
            );
            if let Some(stored) = cloud.resources.get_mut(&target.key) {
                stored.op = Some(op.id.clone());
                if stored.provisioning_state().is_some() {
                    stored.set_provisioning_state("Deleting");
                }
                if stored.kind == Kind::VirtualMachine {
                    stored.power = Some("deallocating".into());
                }
                ml::on_delete(stored, ctx.now, op.due);
            }
            Ok(Reply::empty(202).headers(ops::accepted_headers(ctx, &op)))
        }
    }
}

fn action(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    tail: &str,
) -> Result<Reply, ArmError> {
    match target.kind {
        Kind::VirtualMachine => compute::vm_action(cloud, ctx, target, tail),
        Kind::StorageAccount => storage::account_action(cloud, ctx, target, tail),
        Kind::MlCompute => ml::action(cloud, ctx, target, tail),
        Kind::ManagedCluster => aks::action(cloud, ctx, target, tail),
        _ => Err(not_implemented(ctx)),
    }
}

/// `GET /subscriptions/{s}` (Subscriptions_Get): the subscription and its tenant, which clients
/// read before writing what must name the tenant (a key vault's `tenantId`). Every subscription
/// exists here, as the emulator creates them on first use.
fn subscription(ctx: &Ctx<'_>, sub: &str) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    Ok(Reply::json(
        200,
        json!({
            "id": format!("/subscriptions/{sub}"),
            "subscriptionId": sub,
            "tenantId": TENANT,
            "displayName": "dsinfra emulator",
            "state": "Enabled",
            "authorizationSource": "RoleBased",
            "subscriptionPolicies": {
                "locationPlacementId": "Public_2014-09-01",
                "quotaId": "PayAsYouGo_2014-09-01",
                "spendingLimit": "Off"
            }
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::path::{Route, parse};
    use crate::emulator::resource::not_found;

    fn resource_path(path: &str) -> ResourcePath {
        match parse(path) {
            Route::Resource(p) => p,
            other => panic!("not a resource path: {other:?}"),
        }
    }

    #[test]
    fn ids_use_canonical_types_and_url_names() {
        let path = resource_path(
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/virtualnetworks/MyNet/subnets/Sub1",
        );
        assert_eq!(
            canonical_id(&path, Kind::Subnet, "RG"),
            "/subscriptions/s/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/MyNet/subnets/Sub1"
        );
    }

    #[test]
    fn not_found_messages_name_type_and_group() {
        let path = resource_path(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/x",
        );
        assert_eq!(
            not_found(&path, Kind::VirtualMachine).message,
            "The Resource 'Microsoft.Compute/virtualMachines/x' under resource group 'rg' was not \
             found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"
        );
        let path = resource_path(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/x",
        );
        assert_eq!(
            not_found(&path, Kind::Subnet).message,
            "The Resource 'Microsoft.Network/virtualNetworks/v/subnets/x' under resource group 'rg' \
             was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"
        );
    }
}
