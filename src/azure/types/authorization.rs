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

/// `Permission`: allowed actions (and, read back, the excluded ones).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permission {
    /// Allowed control-plane actions.
    pub actions: Vec<String>,
    /// Excluded control-plane actions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_actions: Vec<String>,
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
