//! Role definitions: custom roles (PUT, GET, DELETE at a scope; lists filtered by role name)
//! and a few built-in roles, readable by GUID. The official spec for role definitions is not in
//! shared/azure-specs, so these bodies follow Azure's documented shape
//! (`authorization-RoleDefinitionsCalls.json`, 2022-04-01) without a spec check here.

use serde_json::{Value, json};

use super::scope_contains;
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::{At as _, strings};
use crate::emulator::store::Cloud;

/// The resource type of role definitions.
const TYPE: &str = "Microsoft.Authorization/roleDefinitions";

/// Where a custom role keeps the scope it was written at (deleting that scope's resource group
/// deletes it). Stripped from every answer.
pub(crate) const SCOPE: &str = "_emulatorScope";

/// A built-in role: GUID, name, description, actions, notActions. Abbreviated to what dsinfra
/// and its tests use (Azure's lists are longer); see docs/emulator.md.
struct BuiltIn {
    guid: &'static str,
    name: &'static str,
    description: &'static str,
    actions: &'static [&'static str],
    not_actions: &'static [&'static str],
}

const BUILT_INS: [BuiltIn; 6] = [
    BuiltIn {
        guid: "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
        name: "Owner",
        description: "Grants full access to manage all resources, including the ability to \
                      assign roles in Azure RBAC.",
        actions: &["*"],
        not_actions: &[],
    },
    BuiltIn {
        guid: "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
        name: "User Access Administrator",
        description: "Lets you manage user access to Azure resources.",
        actions: &["*/read", "Microsoft.Authorization/*", "Microsoft.Support/*"],
        not_actions: &[],
    },
    BuiltIn {
        guid: "f58310d9-a9f6-439a-9e8d-f62e7b41a168",
        name: "Role Based Access Control Administrator",
        description: "Manage access to Azure resources by assigning roles using Azure RBAC. \
                      This role does not allow you to manage access using other ways, such as \
                      Azure Policy.",
        actions: &[
            "Microsoft.Authorization/roleAssignments/write",
            "Microsoft.Authorization/roleAssignments/delete",
            "*/read",
            "Microsoft.Support/*",
        ],
        not_actions: &[],
    },
    BuiltIn {
        guid: "acdd72a7-3385-48ef-bd42-f606fba81ae7",
        name: "Reader",
        description: "View all resources, but does not allow you to make any changes.",
        actions: &["*/read"],
        not_actions: &[],
    },
    BuiltIn {
        guid: "b24988ac-6180-42a0-ab88-20f7382dd24c",
        name: "Contributor",
        description: "Grants full access to manage all resources, but does not allow you to \
                      assign roles in Azure RBAC, manage assignments in Azure Blueprints, or \
                      share image galleries.",
        actions: &["*"],
        not_actions: &[
            "Microsoft.Authorization/*/Delete",
            "Microsoft.Authorization/*/Write",
            "Microsoft.Authorization/elevateAccess/Action",
            "Microsoft.Blueprint/blueprintAssignments/write",
            "Microsoft.Blueprint/blueprintAssignments/delete",
            "Microsoft.Compute/galleries/share/action",
        ],
    },
    BuiltIn {
        guid: "9980e02c-c2be-4d73-94e8-173b1dc7cf3c",
        name: "Virtual Machine Contributor",
        description: "Create and manage virtual machines, manage disks, install and run \
                      software, reset password of the root user of the virtual machine using VM \
                      extensions, and manage local user accounts using VM extensions. This role \
                      does not grant you management access to the virtual network or storage \
                      account the virtual machines are connected to.",
        actions: &[
            "Microsoft.Authorization/*/read",
            "Microsoft.Compute/availabilitySets/*",
            "Microsoft.Compute/locations/*",
            "Microsoft.Compute/virtualMachines/*",
            "Microsoft.Compute/disks/write",
            "Microsoft.Compute/disks/read",
            "Microsoft.Compute/disks/delete",
            "Microsoft.DevTestLab/schedules/*",
            "Microsoft.Network/networkInterfaces/*",
            "Microsoft.Network/networkSecurityGroups/join/action",
            "Microsoft.Network/networkSecurityGroups/read",
            "Microsoft.Network/publicIPAddresses/join/action",
            "Microsoft.Network/publicIPAddresses/read",
            "Microsoft.Network/virtualNetworks/read",
            "Microsoft.Network/virtualNetworks/subnets/join/action",
            "Microsoft.Resources/deployments/*",
            "Microsoft.Resources/subscriptions/resourceGroups/read",
            "Microsoft.Storage/storageAccounts/listKeys/action",
            "Microsoft.Storage/storageAccounts/read",
        ],
        not_actions: &[],
    },
];

/// The last segment of a role definition id: its GUID, lower-cased.
fn guid_of(id: &str) -> String {
    id.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

fn built_in(guid: &str, sub: Option<&str>) -> Option<Value> {
    let role = BUILT_INS.iter().find(|b| b.guid == guid)?;
    let prefix = sub
        .map(|s| format!("/subscriptions/{s}"))
        .unwrap_or_default();
    Some(json!({
        "id": format!("{prefix}/providers/{TYPE}/{}", role.guid),
        "name": role.guid,
        "type": TYPE,
        "properties": {
            "roleName": role.name,
            "type": "BuiltInRole",
            "description": role.description,
            "assignableScopes": ["/"],
            "permissions": [{
                "actions": role.actions,
                "notActions": role.not_actions,
                "dataActions": [],
                "notDataActions": [],
            }],
        },
    }))
}

/// The role definition a `roleDefinitionId` names (custom or built-in), as stored.
pub(crate) fn find(cloud: &Cloud, id: &str) -> Option<Value> {
    let guid = guid_of(id);
    cloud
        .role_definitions
        .get(&guid)
        .cloned()
        .or_else(|| built_in(&guid, None))
}

/// ARM's answer for a role definition that does not exist.
pub(crate) fn does_not_exist(id: &str) -> ArmError {
    ArmError::new(
        404,
        "RoleDefinitionDoesNotExist",
        format!(
            "The specified role definition with ID '{}' does not exist.",
            guid_of(id)
        ),
    )
}

fn render(role: &Value) -> Value {
    let mut out = role.clone();
    if let Some(map) = out.as_object_mut() {
        map.remove(SCOPE);
    }
    out
}

/// The subscription a scope lies in, if any.
fn subscription_of(scope: &str) -> Option<&str> {
    let mut parts = scope.trim_start_matches('/').split('/');
    match (parts.next(), parts.next()) {
        (Some(s), Some(id)) if s.eq_ignore_ascii_case("subscriptions") => Some(id),
        _ => None,
    }
}

/// `GET`, `PUT` or `DELETE` of `{scope}/providers/Microsoft.Authorization/roleDefinitions/{name}`.
pub(crate) fn handle(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    scope: &str,
    name: &str,
) -> Result<Reply, ArmError> {
    let guid = name.to_ascii_lowercase();
    match ctx.method.as_str() {
        "GET" => cloud
            .role_definitions
            .get(&guid)
            .map(render)
            .or_else(|| built_in(&guid, subscription_of(scope)))
            .map(|role| Reply::json(200, role))
            .ok_or_else(|| does_not_exist(name)),
        "PUT" => put(cloud, ctx, scope, name),
        "DELETE" => delete(cloud, &guid),
        other => Err(ArmError::method_not_allowed(other)),
    }
}

fn put(cloud: &mut Cloud, ctx: &Ctx<'_>, scope: &str, name: &str) -> Result<Reply, ArmError> {
    let guid = name.to_ascii_lowercase();
    if uuid::Uuid::parse_str(name).is_err() {
        return Err(ArmError::new(
            400,
            "InvalidRoleDefinitionId",
            format!(
                "The role definition ID '{name}' is not valid. The role definition ID must be a \
                 GUID."
            ),
        ));
    }
    if built_in(&guid, None).is_some() {
        return Err(ArmError::new(
            400,
            "RoleDefinitionUpdateNotPermitted",
            "Built-in role definitions cannot be updated.",
        ));
    }
    let body = ctx.body();
    let props = body.get("properties").cloned().unwrap_or_else(|| json!({}));
    let Some(role_name) = props.get("roleName").and_then(Value::as_str) else {
        return Err(ArmError::invalid_request(
            "The role definition must have a 'properties.roleName'.",
        ));
    };
    let scopes: Vec<String> = strings(props.get("assignableScopes"))
        .map(str::to_owned)
        .collect();
    if scopes.is_empty() {
        return Err(ArmError::new(
            400,
            "InvalidAssignableScopes",
            "The role definition must have at least one assignable scope.",
        ));
    }
    let taken = cloud.role_definitions.iter().any(|(other, role)| {
        *other != guid
            && role
                .at("/properties/roleName")
                .and_then(Value::as_str)
                .is_some_and(|n| n.eq_ignore_ascii_case(role_name))
    });
    if taken {
        return Err(ArmError::new(
            409,
            "RoleDefinitionWithSameNameExists",
            "A custom role with the same name already exists in this directory. Use a different \
             name.",
        ));
    }
    let now = ctx.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let created = cloud
        .role_definitions
        .get(&guid)
        .and_then(|r| r.at("/properties/createdOn").cloned())
        .unwrap_or_else(|| json!(now));
    let permissions: Vec<Value> = props
        .get("permissions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let list = |k: &str| p.get(k).cloned().unwrap_or_else(|| json!([]));
            json!({
                "actions": list("actions"),
                "notActions": list("notActions"),
                "dataActions": list("dataActions"),
                "notDataActions": list("notDataActions"),
            })
        })
        .collect();
    let role = json!({
        "id": format!("{scope}/providers/{TYPE}/{name}"),
        "name": name,
        "type": TYPE,
        "properties": {
            "roleName": role_name,
            "type": "CustomRole",
            "description": props.get("description").cloned().unwrap_or(json!("")),
            "assignableScopes": scopes,
            "permissions": permissions,
            "createdOn": created,
            "updatedOn": now,
            "createdBy": null,
            "updatedBy": null,
        },
        SCOPE: scope,
    });
    cloud.role_definitions.insert(guid, role.clone());
    Ok(Reply::json(201, render(&role)))
}

fn delete(cloud: &mut Cloud, guid: &str) -> Result<Reply, ArmError> {
    let used = cloud.role_assignments.values().any(|a| {
        a.at("/properties/roleDefinitionId")
            .and_then(Value::as_str)
            .is_some_and(|id| guid_of(id) == guid)
    });
    if used && cloud.role_definitions.contains_key(guid) {
        return Err(ArmError::new(
            409,
            "RoleDefinitionHasAssignments",
            "There are existing role assignments referencing role (code: \
             RoleDefinitionHasAssignments).",
        ));
    }
    Ok(match cloud.role_definitions.remove(guid) {
        Some(role) => Reply::json(200, render(&role)),
        None => Reply::empty(204),
    })
}

/// `GET {scope}/providers/Microsoft.Authorization/roleDefinitions`: the roles assignable at the
/// scope (built-ins and custom roles whose assignable scopes contain it), optionally filtered
/// by `roleName eq '…'` or `type eq 'CustomRole'|'BuiltInRole'`.
pub(crate) fn list(cloud: &Cloud, ctx: &Ctx<'_>, scope: &str) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let filter = ctx.query("$filter").map(parse_filter).transpose()?;
    let sub = subscription_of(scope);
    let custom = cloud.role_definitions.values().filter(|role| {
        strings(role.at("/properties/assignableScopes"))
            .any(|s| scope_contains(s, scope) || scope_contains(scope, s))
    });
    let built_ins = BUILT_INS.iter().filter_map(|b| built_in(b.guid, sub));
    let items: Vec<Value> = custom
        .map(render)
        .chain(built_ins)
        .filter(|role| {
            filter.as_ref().is_none_or(|(field, value)| {
                role.at(&format!("/properties/{field}"))
                    .and_then(Value::as_str)
                    .is_some_and(|v| v.eq_ignore_ascii_case(value))
            })
        })
        .collect();
    Ok(Reply::json(200, json!({"value": items})))
}

/// `roleName eq 'x'` or `type eq 'x'`: the property and the value.
fn parse_filter(filter: &str) -> Result<(String, String), ArmError> {
    let invalid = || {
        ArmError::new(
            400,
            "InvalidFilterInQueryString",
            format!(
                "The filter '{filter}' is not supported. Use roleName eq '{{name}}' or type eq '{{type}}'."
            ),
        )
    };
    let (field, value) = filter.split_once(" eq ").ok_or_else(invalid)?;
    let field = field.trim();
    let value = value
        .trim()
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .ok_or_else(invalid)?;
    let field = match field.to_ascii_lowercase().as_str() {
        "rolename" => "roleName",
        "type" => "type",
        _ => return Err(invalid()),
    };
    Ok((field.to_owned(), value.replace("''", "'")))
}

/// Removes the custom roles written at a scope inside `group_id` (a resource group being deleted).
pub(crate) fn remove_inside(cloud: &mut Cloud, group_id: &str) {
    cloud.role_definitions.retain(|_, role| {
        !role
            .get(SCOPE)
            .and_then(Value::as_str)
            .is_some_and(|s| scope_contains(group_id, s))
    });
}
