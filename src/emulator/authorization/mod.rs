//! Microsoft.Authorization: role definitions and role assignments, the caller's permissions at a
//! resource group or resource, and the access check ARM makes for a request carrying a managed
//! identity's token (one issued by the IMDS stand-in, imds.rs) or a known caller's
//! (`EmulatorConfig::callers`). Other tokens keep full access, as before: the emulator has no
//! Entra ID, so only principals it knows have assignments to check.
//!
//! The check follows Azure RBAC's documented rules: the action comes from the method and path
//! (`GET` reads, `PUT`/`PATCH` write, `DELETE` deletes, `POST .../x` is `x/action`), an
//! assignment applies at its scope and below, and a role grants an action its `actions` match
//! (with `*` wildcards, case-insensitive) unless its `notActions` match too. Deny assignments,
//! conditions and data actions are not modelled.

pub(crate) mod assignments;
pub(crate) mod roles;

use serde_json::{Value, json};

use super::config::EmulatorConfig;
use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::json::{self, At as _};
use super::path::percent_decode;
use super::shared::token_hash;
use super::store::Cloud;

/// The namespace, as it appears in request paths (any casing).
const NAMESPACE: &str = "microsoft.authorization";

/// The principal a token stands for, when the emulator checks its rights: a managed identity's
/// (issued through IMDS) or a configured caller's. `None`: full access.
pub(crate) fn principal_of(cloud: &Cloud, config: &EmulatorConfig, token: u64) -> Option<String> {
    cloud.imds_tokens.get(&token).cloned().or_else(|| {
        config
            .callers
            .iter()
            .find(|c| token_hash(&c.token) == token)
            .map(|c| c.principal.clone())
    })
}

/// Whether a request may proceed: always for a token with full access; for another, when the
/// principal's role assignments grant the request's action at its scope.
pub(crate) fn authorize(
    cloud: &Cloud,
    config: &EmulatorConfig,
    token: u64,
    method: &str,
    path: &str,
) -> Result<(), ArmError> {
    let Some(principal) = principal_of(cloud, config, token) else {
        return Ok(());
    };
    let principal = principal.as_str();
    let (action, scope) = action_and_scope(method, &percent_decode(path));
    if granted(cloud, principal, &action, &scope) {
        return Ok(());
    }
    Err(ArmError::new(
        403,
        "AuthorizationFailed",
        format!(
            "The client '{principal}' with object id '{principal}' does not have authorization \
             to perform action '{action}' over scope '{scope}' or the scope is invalid. If access \
             was recently granted, please refresh your credentials."
        ),
    ))
}

/// Whether one of the principal's assignments at the scope or above grants the action.
fn granted(cloud: &Cloud, principal: &str, action: &str, scope: &str) -> bool {
    permissions_at(cloud, principal, scope)
        .iter()
        .any(|p| p.allows(action))
}

/// The permissions of every role the principal is assigned at `scope` or above, one per
/// assignment (what Permissions_ListForResourceGroup answers).
fn permissions_at(cloud: &Cloud, principal: &str, scope: &str) -> Vec<Permission> {
    cloud
        .role_assignments
        .values()
        .filter(|assignment| {
            let props = &assignment["properties"];
            let mine = props["principalId"]
                .as_str()
                .is_some_and(|p| p.eq_ignore_ascii_case(principal));
            let covers = props["scope"]
                .as_str()
                .is_some_and(|outer| scope_contains(outer, scope));
            mine && covers
        })
        .filter_map(|assignment| {
            assignment["properties"]["roleDefinitionId"]
                .as_str()
                .and_then(|id| roles::find(cloud, id))
        })
        .flat_map(|role| permissions_of(&role))
        .collect()
}

/// `GET {resource group or resource}/providers/Microsoft.Authorization/permissions`: the
/// caller's permissions there, one entry per role it holds at that scope or above (a caller with
/// full access holds `*`). The resource group must exist, as ARM's front door requires for
/// anything below it.
fn permissions(cloud: &Cloud, ctx: &Ctx<'_>, scope: &str) -> Result<Reply, ArmError> {
    let segments: Vec<&str> = scope.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        [subscriptions, sub, rg, name, ..]
            if subscriptions.eq_ignore_ascii_case("subscriptions")
                && rg.eq_ignore_ascii_case("resourceGroups") =>
        {
            super::groups::existing(cloud, sub, name)?;
        }
        _ => return Err(super::resource::not_implemented(ctx)),
    }
    let value: Vec<Value> = match ctx.caller.as_deref() {
        None => vec![json!({
            "actions": ["*"], "notActions": [], "dataActions": [], "notDataActions": []
        })],
        Some(principal) => permissions_at(cloud, principal, scope)
            .into_iter()
            .map(|p| {
                json!({
                    "actions": p.actions, "notActions": p.not_actions,
                    "dataActions": [], "notDataActions": []
                })
            })
            .collect(),
    };
    Ok(Reply::json(200, json!({ "value": value })))
}

/// Whether `inner` is `outer` or lies below it (ARM ids are case-insensitive).
pub(crate) fn scope_contains(outer: &str, inner: &str) -> bool {
    let outer = outer.trim_end_matches('/').to_ascii_lowercase();
    let inner = inner.trim_end_matches('/').to_ascii_lowercase();
    outer.is_empty() || inner == outer || inner.starts_with(&format!("{outer}/"))
}

/// One permission of a role: its `actions` and `notActions`.
pub(crate) struct Permission {
    actions: Vec<String>,
    not_actions: Vec<String>,
}

impl Permission {
    /// Whether it grants `action`: an `actions` pattern matches and no `notActions` one does
    /// (each role's permission on its own, as Azure RBAC evaluates them). The emulator keeps its
    /// own matcher, not dsinfra's (`azure::types::authorization`): a rule both learnt wrong
    /// would pass every test (the guide's lesson of Trusted Launch).
    fn allows(&self, action: &str) -> bool {
        self.actions.iter().any(|a| matches(a, action))
            && !self.not_actions.iter().any(|n| matches(n, action))
    }
}

/// A role definition's permissions.
pub(crate) fn permissions_of(role: &Value) -> Vec<Permission> {
    let strings = |value: Option<&Value>| -> Vec<String> {
        json::strings(value).map(str::to_owned).collect()
    };
    role.at("/properties/permissions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| Permission {
            actions: strings(p.get("actions")),
            not_actions: strings(p.get("notActions")),
        })
        .collect()
}

/// Matches an action against a pattern with `*` wildcards, case-insensitively.
fn matches(pattern: &str, action: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let action = action.to_ascii_lowercase();
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == action;
    };
    let Some(mut rest) = action.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The action a request performs and the scope it performs it at, as ARM derives them: the
/// type from the path's last `providers/{namespace}/{type}/{name}...`, the verb from the method.
pub(crate) fn action_and_scope(method: &str, path: &str) -> (String, String) {
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = trimmed.trim_start_matches('/').split('/').collect();
    let verb = |method: &str| match method.to_ascii_uppercase().as_str() {
        "PUT" | "PATCH" => "write",
        "DELETE" => "delete",
        "POST" => "action",
        _ => "read",
    };
    let providers = segments
        .iter()
        .rposition(|s| s.eq_ignore_ascii_case("providers"))
        .filter(|&i| i + 1 < segments.len());
    let (mut types, rest): (Vec<String>, &[&str]) = match providers {
        Some(i) => (vec![segments[i + 1].to_owned()], &segments[i + 2..]),
        None => (
            vec!["Microsoft.Resources".to_owned(), "subscriptions".to_owned()],
            segments.get(2..).unwrap_or_default(),
        ),
    };
    let mut pairs = rest.chunks_exact(2);
    types.extend(pairs.by_ref().map(|pair| pair[0].to_owned()));
    let tail = pairs.remainder().first();
    let scope = match (tail, providers) {
        // A collection straight under a namespace (`.../providers/ns/type`): the scope is what
        // holds it.
        (Some(_), Some(i)) if types.len() == 1 => format!("/{}", segments[..i].join("/")),
        (Some(tail), _) => trimmed
            .strip_suffix(tail)
            .unwrap_or(trimmed)
            .trim_end_matches('/')
            .to_owned(),
        (None, _) => trimmed.to_owned(),
    };
    let action = match tail {
        // A POST to `.../{name}/{x}` is the action `x`; a GET of `.../{name}/{x}` reads the
        // sub-view or collection `x`.
        Some(tail) => format!("{}/{tail}/{}", types.join("/"), verb(method)),
        None => format!("{}/{}", types.join("/"), verb(method)),
    };
    (action, scope)
}

/// Removes the role assignments and custom roles scoped inside a resource group being deleted.
pub(crate) fn remove_inside(cloud: &mut Cloud, group_key: &str) {
    assignments::remove_inside(cloud, group_key);
    roles::remove_inside(cloud, group_key);
}

/// Whether a path addresses Microsoft.Authorization (at any scope), which this module serves.
pub(crate) fn addresses(path: &str) -> bool {
    let lower = percent_decode(path).to_ascii_lowercase();
    lower
        .rsplit_once("/providers/")
        .is_some_and(|(_, rest)| rest.split('/').next() == Some(NAMESPACE))
}

/// Serves a Microsoft.Authorization request.
pub(crate) fn dispatch(cloud: &mut Cloud, ctx: &mut Ctx<'_>) -> Result<Reply, ArmError> {
    let path = percent_decode(ctx.uri.path());
    let lower = path.to_ascii_lowercase();
    let Some(at) = lower.rfind("/providers/microsoft.authorization/") else {
        return Err(super::resource::not_implemented(ctx));
    };
    let scope = path[..at].to_owned();
    let rest: Vec<String> = path[at + "/providers/microsoft.authorization/".len()..]
        .trim_end_matches('/')
        .split('/')
        .map(str::to_owned)
        .collect();
    match rest.as_slice() {
        [kind] if kind.eq_ignore_ascii_case("roleDefinitions") => roles::list(cloud, ctx, &scope),
        [kind, name] if kind.eq_ignore_ascii_case("roleDefinitions") => {
            roles::handle(cloud, ctx, &scope, name)
        }
        [kind] if kind.eq_ignore_ascii_case("roleAssignments") => {
            assignments::list(cloud, ctx, &scope)
        }
        [kind] if kind.eq_ignore_ascii_case("permissions") && ctx.method == "GET" => {
            permissions(cloud, ctx, &scope)
        }
        [kind, name] if kind.eq_ignore_ascii_case("roleAssignments") => {
            assignments::handle(cloud, ctx, &scope, name)
        }
        _ => Err(super::resource::not_implemented(ctx)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VM: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm";

    #[test]
    fn actions_come_from_the_method_and_the_path() {
        let cases = [
            ("POST", format!("{VM}/deallocate"), "Microsoft.Compute/virtualMachines/deallocate/action", VM.to_owned()),
            ("GET", VM.to_owned(), "Microsoft.Compute/virtualMachines/read", VM.to_owned()),
            ("PUT", VM.to_owned(), "Microsoft.Compute/virtualMachines/write", VM.to_owned()),
            ("DELETE", VM.to_owned(), "Microsoft.Compute/virtualMachines/delete", VM.to_owned()),
            ("GET", format!("{VM}/instanceView"), "Microsoft.Compute/virtualMachines/instanceView/read", VM.to_owned()),
            ("GET", "/subscriptions/s/resourceGroups/rg".to_owned(), "Microsoft.Resources/subscriptions/resourceGroups/read", "/subscriptions/s/resourceGroups/rg".to_owned()),
            ("GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines".to_owned(), "Microsoft.Compute/virtualMachines/read", "/subscriptions/s/resourceGroups/rg".to_owned()),
            ("PUT", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Authorization/roleAssignments/g".to_owned(), "Microsoft.Authorization/roleAssignments/write", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Authorization/roleAssignments/g".to_owned()),
        ];
        for (method, path, action, scope) in cases {
            assert_eq!(
                action_and_scope(method, &path),
                (action.to_owned(), scope),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn wildcards_match_case_insensitively() {
        let deallocate = "Microsoft.Compute/virtualMachines/deallocate/action";
        assert!(matches("*", deallocate));
        assert!(matches("Microsoft.Compute/*", deallocate));
        assert!(matches(
            "microsoft.compute/virtualmachines/*/action",
            deallocate
        ));
        assert!(matches(deallocate, deallocate));
        assert!(!matches("*/read", deallocate));
        assert!(!matches(
            "Microsoft.Compute/virtualMachines/start/action",
            deallocate
        ));
        assert!(matches("*/read", "Microsoft.Compute/virtualMachines/read"));
    }

    #[test]
    fn scopes_contain_what_lies_below_them_only() {
        assert!(scope_contains("/subscriptions/s/resourceGroups/rg", VM));
        assert!(scope_contains("/subscriptions/S/resourcegroups/RG/", VM));
        assert!(!scope_contains("/subscriptions/s/resourceGroups/r", VM));
        assert!(scope_contains("/", VM));
    }
}
