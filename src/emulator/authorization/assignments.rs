//! Role assignments (`Microsoft.Authorization/roleAssignments`, 2022-04-01): PUT, GET and
//! DELETE at any scope, lists at a scope, and the errors ARM answers with. They are synchronous,
//! as on Azure (201 on create).
//!
//! Principals: the emulator has no directory, so the principals that exist are the system-
//! assigned identities of its VMs, and those its configuration declares
//! ([`EmulatorConfig::principals`](crate::emulator::EmulatorConfig::principals)). As on Azure, a principal created less than a replication
//! delay ago is not yet found unless the request says `principalType: ServicePrincipal`
//! (Azure's documented way around the delay); the delay follows the emulator's latency clock.

use std::time::Duration;

use serde_json::{Value, json};

use super::{roles, scope_contains};
use crate::emulator::compute;
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::{At as _, strings};
use crate::emulator::resource::TENANT;
use crate::emulator::store::Cloud;

/// The resource type of role assignments.
const TYPE: &str = "Microsoft.Authorization/roleAssignments";

/// How long a new principal takes to replicate to the directory ARM's authorization reads, at
/// latency scale 1 (Azure documents "can take a few minutes"; the emulator takes one).
const REPLICATION_DELAY: Duration = Duration::from_mins(1);

fn render(assignment: &Value) -> Value {
    assignment.clone()
}

/// `GET`, `PUT` or `DELETE` of `{scope}/providers/Microsoft.Authorization/roleAssignments/{name}`.
pub(crate) fn handle(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    scope: &str,
    name: &str,
) -> Result<Reply, ArmError> {
    let key = name.to_ascii_lowercase();
    match ctx.method.as_str() {
        "GET" => cloud
            .role_assignments
            .get(&key)
            .filter(|a| at_scope(a, scope))
            .map(|a| Reply::json(200, render(a)))
            .ok_or_else(|| not_found(name)),
        "PUT" => put(cloud, ctx, scope, name),
        "DELETE" => Ok(
            match cloud
                .role_assignments
                .get(&key)
                .filter(|a| at_scope(a, scope))
            {
                Some(_) => {
                    let gone = cloud.role_assignments.remove(&key).unwrap_or_default();
                    Reply::json(200, render(&gone))
                }
                None => Reply::empty(204),
            },
        ),
        other => Err(ArmError::method_not_allowed(other)),
    }
}

fn at_scope(assignment: &Value, scope: &str) -> bool {
    assignment
        .at("/properties/scope")
        .and_then(Value::as_str)
        .is_some_and(|s| s.eq_ignore_ascii_case(scope.trim_end_matches('/')))
}

fn not_found(name: &str) -> ArmError {
    ArmError::new(
        404,
        "RoleAssignmentNotFound",
        format!("The role assignment '{name}' is not found."),
    )
}

/// The checks ARM makes on a new assignment, in its order; returns the stored body.
fn put(cloud: &mut Cloud, ctx: &Ctx<'_>, scope: &str, name: &str) -> Result<Reply, ArmError> {
    if uuid::Uuid::parse_str(name).is_err() {
        return Err(ArmError::new(
            400,
            "InvalidRoleAssignmentId",
            format!(
                "The role assignment ID '{name}' is not valid. The role assignment ID must be a \
                 GUID."
            ),
        ));
    }
    let body = ctx.body();
    let props = body.get("properties").cloned().unwrap_or_else(|| json!({}));
    let field = |name: &str| props.get(name).and_then(Value::as_str).map(str::to_owned);
    let (Some(role_id), Some(principal)) = (field("roleDefinitionId"), field("principalId")) else {
        return Err(ArmError::invalid_request(
            "The role assignment must have 'properties.roleDefinitionId' and \
             'properties.principalId'.",
        ));
    };
    let principal_type = field("principalType").unwrap_or_else(|| "User".to_owned());
    let role = roles::find(cloud, &role_id)
        .filter(|role| assignable_at(role, scope))
        .filter(|role| {
            let created = role
                .at("/properties/createdOn")
                .and_then(Value::as_str)
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&chrono::Utc));
            !lagging(ctx, created)
        })
        .ok_or_else(|| ArmError {
            status: 400,
            ..roles::does_not_exist(&role_id)
        })?;
    check_principal(cloud, ctx, &principal, &principal_type)?;
    let key = name.to_ascii_lowercase();
    let role_guid = role["name"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let same_role = |a: &Value| {
        a.at("/properties/roleDefinitionId")
            .and_then(Value::as_str)
            .is_some_and(|id| id.to_ascii_lowercase().ends_with(&role_guid))
    };
    let same_principal = |a: &Value| {
        a.at("/properties/principalId")
            .and_then(Value::as_str)
            .is_some_and(|p| p.eq_ignore_ascii_case(&principal))
    };
    if let Some(existing) = cloud.role_assignments.get(&key) {
        if at_scope(existing, scope) && same_role(existing) && same_principal(existing) {
            return Ok(Reply::json(201, render(existing)));
        }
        return Err(ArmError::new(
            400,
            "RoleAssignmentUpdateNotPermitted",
            "Tenant ID, application ID, principal ID, and scope are not allowed to be updated.",
        ));
    }
    let duplicate = cloud
        .role_assignments
        .values()
        .any(|a| at_scope(a, scope) && same_role(a) && same_principal(a));
    if duplicate {
        return Err(ArmError::new(
            409,
            "RoleAssignmentExists",
            "The role assignment already exists.",
        ));
    }
    let now = ctx.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut stored_props = json!({
        "roleDefinitionId": role_id,
        "principalId": principal,
        "principalType": principal_type,
        "scope": scope.trim_end_matches('/'),
        "createdOn": now,
        "updatedOn": now,
        "createdBy": null,
        "updatedBy": null,
    });
    for optional in ["description", "condition", "conditionVersion"] {
        if let Some(value) = props.get(optional) {
            stored_props[optional] = value.clone();
        }
    }
    let assignment = json!({
        "id": format!("{}/providers/{TYPE}/{name}", scope.trim_end_matches('/')),
        "name": name,
        "type": TYPE,
        "properties": stored_props,
    });
    cloud.role_assignments.insert(key, assignment.clone());
    Ok(Reply::json(201, render(&assignment)))
}

/// Whether a role may be assigned at a scope: one of its assignable scopes contains it.
fn assignable_at(role: &Value, scope: &str) -> bool {
    strings(role.at("/properties/assignableScopes")).any(|s| scope_contains(s, scope))
}

/// PrincipalNotFound for a principal the directory does not (yet) know.
fn check_principal(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    principal: &str,
    principal_type: &str,
) -> Result<(), ArmError> {
    let found = compute::principals(cloud)
        .into_iter()
        .find(|(p, _)| p.eq_ignore_ascii_case(principal));
    let declared = ctx
        .config
        .principals
        .iter()
        .chain(ctx.config.callers.iter().map(|c| &c.principal))
        .any(|p| p.eq_ignore_ascii_case(principal));
    match found {
        None if declared => Ok(()),
        Some((_, created)) if lagging(ctx, created) => Err(principal_not_found(principal)),
        Some(_) if principal_type.eq_ignore_ascii_case("ServicePrincipal") => Ok(()),
        Some((_, created)) if !younger_than(ctx, created, REPLICATION_DELAY) => Ok(()),
        _ => Err(principal_not_found(principal)),
    }
}

/// Whether something made at `created` is still inside the configured replication lag
/// ([`crate::emulator::EmulatorConfig::replication_lag`]).
fn lagging(ctx: &Ctx<'_>, created: Option<chrono::DateTime<chrono::Utc>>) -> bool {
    younger_than(ctx, created, ctx.config.replication_lag)
}

/// Whether something made at `created` (if known) is younger than `age` (real-world time, on the
/// latency clock); nothing is younger than zero.
fn younger_than(
    ctx: &Ctx<'_>,
    created: Option<chrono::DateTime<chrono::Utc>>,
    age: Duration,
) -> bool {
    let age = chrono::Duration::from_std(ctx.config.scaled(age))
        .unwrap_or_else(|_| chrono::Duration::zero());
    !age.is_zero() && created.is_some_and(|at| ctx.now < at + age)
}

fn principal_not_found(principal: &str) -> ArmError {
    ArmError::new(
        400,
        "PrincipalNotFound",
        format!(
            "Principal {} does not exist in the directory {TENANT}. Check that you have the \
             correct principal ID. If you are creating this principal and then immediately \
             assigning a role, this error might be related to a replication delay. In this \
             case, set the role assignment principalType property to a value, such as \
             ServicePrincipal, User, or Group.  See https://aka.ms/docs-principaltype",
            principal.replace('-', "")
        ),
    )
}

/// `GET {scope}/providers/Microsoft.Authorization/roleAssignments`: with `$filter=atScope()`
/// the assignments at the scope and above it; with `principalId eq '…'` (or
/// `assignedTo('…')`) that principal's assignments at, above and below it; without a filter,
/// every assignment at, above and below it.
pub(crate) fn list(cloud: &Cloud, ctx: &Ctx<'_>, scope: &str) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let filter = ctx.query("$filter").map(str::trim).unwrap_or_default();
    let principal = filter
        .strip_prefix("principalId eq '")
        .or_else(|| filter.strip_prefix("assignedTo('"))
        .map(|rest| rest.trim_end_matches(')').trim_end_matches('\''));
    let at_scope_only = filter.eq_ignore_ascii_case("atScope()");
    if !filter.is_empty() && principal.is_none() && !at_scope_only {
        return Err(ArmError::new(
            400,
            "UnsupportedQuery",
            format!(
                "The filter '{filter}' is not supported. Use atScope(), principalId eq '{{id}}' \
                 or assignedTo('{{id}}')."
            ),
        ));
    }
    let items: Vec<Value> = cloud
        .role_assignments
        .values()
        .filter(|a| {
            let Some(own) = a.at("/properties/scope").and_then(Value::as_str) else {
                return false;
            };
            let above = scope_contains(own, scope);
            let below = scope_contains(scope, own);
            let mine = principal.is_none_or(|p| {
                a.at("/properties/principalId")
                    .and_then(Value::as_str)
                    .is_some_and(|id| id.eq_ignore_ascii_case(p))
            });
            mine && (above || (!at_scope_only && below))
        })
        .map(render)
        .collect();
    Ok(Reply::json(200, json!({"value": items})))
}

/// Removes the assignments at scopes inside `group_id` (a resource group being deleted).
pub(crate) fn remove_inside(cloud: &mut Cloud, group_id: &str) {
    cloud.role_assignments.retain(|_, a| {
        !a.at("/properties/scope")
            .and_then(Value::as_str)
            .is_some_and(|s| scope_contains(group_id, s))
    });
}
