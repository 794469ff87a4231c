//! `Microsoft.Authorization` 2022-04-01: the custom role and the role assignment that let a
//! block's head VM park the block when idle (issue 18). The role assignment is checked against
//! `authorization-RoleAssignmentsCalls.json`; shared/azure-specs has no role-definition spec
//! file, so [`RoleDefinition`] follows Azure's REST reference (Role Definitions - Create Or
//! Update, 2022-04-01): `roleName`, `description`, `type`, `permissions[].actions`,
//! `assignableScopes`.

use serde::{Deserialize, Serialize};

/// A role definition (`RoleDefinition`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleDefinition {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only: the role's GUID.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Properties.
    pub properties: RoleDefinitionProperties,
}

/// `RoleDefinitionProperties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleDefinitionProperties {
    /// The role's display name, unique in the tenant.
    pub role_name: String,
    /// What the role is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `CustomRole` for a role dsinfra defines.
    #[serde(rename = "type")]
    pub kind: String,
    /// What the role allows.
    pub permissions: Vec<Permission>,
    /// Where the role may be assigned.
    pub assignable_scopes: Vec<String>,
}

/// `Permission`: allowed actions (and, read back, the excluded ones). Also what
/// Permissions_ListForResourceGroup answers: one per role the caller holds there.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permission {
    /// Allowed control-plane actions.
    #[serde(default)]
    pub actions: Vec<String>,
    /// Excluded control-plane actions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_actions: Vec<String>,
}

impl Permission {
    /// Whether this permission allows `action`: one of its `actions` matches and none of its
    /// `notActions` does. Azure RBAC takes each role's permission on its own: a `notActions` entry
    /// removes the action from that role only, never from another role the caller holds.
    pub fn allows(&self, action: &str) -> bool {
        self.actions.iter().any(|a| action_matches(a, action))
            && !self.not_actions.iter().any(|n| action_matches(n, action))
    }
}

/// Whether any of `permissions` allows `action` (what ARM's authorization decides, deny
/// assignments and conditions aside).
pub fn allowed(permissions: &[Permission], action: &str) -> bool {
    permissions.iter().any(|p| p.allows(action))
}

/// Matches an RBAC action against a pattern with `*` wildcards, case-insensitively
/// (`Microsoft.Authorization/*/Write` matches `Microsoft.Authorization/roleDefinitions/write`).
pub fn action_matches(pattern: &str, action: &str) -> bool {
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

/// The body of a role assignment's PUT (`RoleAssignmentCreateParameters`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleAssignmentCreate {
    /// Properties.
    pub properties: RoleAssignmentProperties,
}

/// `RoleAssignmentProperties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleAssignmentProperties {
    /// Read-only: where the assignment applies (the URL's scope).
    #[serde(default, skip_serializing)]
    pub scope: Option<String>,
    /// The role definition's id.
    pub role_definition_id: String,
    /// The principal's object id.
    pub principal_id: String,
    /// `ServicePrincipal` for a managed identity: Azure's documented way to avoid
    /// `PrincipalNotFound` while a just-made identity replicates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_type: Option<String>,
    /// What the assignment is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules as Azure RBAC documents them (`*` anywhere, any case; a role's `notActions`
    /// remove only from that role). The emulator holds its own copy of the rule (on purpose:
    /// emulator/authorization), so each side checks the other.
    #[test]
    fn actions_match_with_wildcards_and_not_actions_remove_within_one_role() {
        let write = "Microsoft.Authorization/roleDefinitions/write";
        assert!(action_matches("*", write));
        assert!(action_matches("Microsoft.Authorization/*", write));
        assert!(action_matches("microsoft.authorization/*/Write", write));
        assert!(!action_matches("*/read", write));
        assert!(action_matches(
            "*/read",
            "Microsoft.Compute/virtualMachines/read"
        ));
        let contributor = Permission {
            actions: vec!["*".into()],
            not_actions: vec!["Microsoft.Authorization/*/Write".into()],
        };
        assert!(!contributor.allows(write));
        assert!(contributor.allows("Microsoft.Compute/virtualMachines/write"));
        let uaa = Permission {
            actions: vec!["Microsoft.Authorization/*".into()],
            not_actions: Vec::new(),
        };
        assert!(allowed(&[contributor, uaa], write));
    }
}
