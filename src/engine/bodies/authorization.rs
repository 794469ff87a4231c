//! Bodies of a block's idle-park access (issue 18, decision 52): the custom role with the
//! watcher's three actions, and its assignment to the head VM's system-assigned identity.
//!
//! The assignment names the head's principal id, which Azure makes when it creates the VM's
//! identity: the plan cannot know it, so [`super::request_for`] refuses the assignment and the
//! engine builds it with [`role_assignment_request`] once it has read the id from the VM.

use serde_json::Value;

use super::{Body, BodyError, Builder, Request};
use crate::azure::ResourceId;
use crate::azure::types::authorization::{
    Permission, RoleAssignmentCreate, RoleAssignmentProperties, RoleDefinition,
    RoleDefinitionProperties,
};
use crate::model::{Desired, Resource, ResourceKind};

impl Builder<'_> {
    pub(crate) fn role_definition(&self) -> Result<RoleDefinition, BodyError> {
        let scope = self
            .reference_id("scope")?
            .ok_or_else(|| self.missing("scope"))?;
        let actions = self.texts("actions")?;
        if actions.is_empty() {
            return Err(self.missing("actions"));
        }
        Ok(RoleDefinition {
            id: None,
            name: None,
            properties: RoleDefinitionProperties {
                role_name: self.text("role_name")?,
                description: self.opt_text("description")?,
                kind: "CustomRole".to_owned(),
                permissions: vec![Permission {
                    actions,
                    not_actions: Vec::new(),
                }],
                assignable_scopes: vec![scope],
            },
        })
    }

    fn role_assignment(&self, principal_id: &str) -> Result<RoleAssignmentCreate, BodyError> {
        let role = self
            .reference_id("role")?
            .ok_or_else(|| self.missing("role"))?;
        Ok(RoleAssignmentCreate {
            properties: RoleAssignmentProperties {
                scope: None,
                role_definition_id: role,
                principal_id: principal_id.to_owned(),
                principal_type: self.opt_text("principal_type")?,
                description: None,
            },
        })
    }

    /// The head VM an assignment's `principal` names (`{"vm": ADDRESS, "id": ...}`).
    pub(crate) fn principal_vm(&self) -> Result<&Resource, BodyError> {
        let vm = self
            .value("principal")
            .and_then(|p| p.get("vm"))
            .and_then(Value::as_str)
            .ok_or_else(|| self.missing("principal"))?;
        self.target("principal", vm)
    }

    /// `request_for`'s answer for an assignment: the principal is not known from the plan.
    pub(crate) fn principal_unknown(&self) -> BodyError {
        self.invalid(
            "principal",
            "the head VM's principal id exists only once Azure made its identity; build the assignment with role_assignment_request",
        )
    }
}

/// The PUT of a role assignment (`resource`, of kind [`ResourceKind::RoleAssignment`]) to the
/// principal `principal_id`, read from the head VM after it was created or updated.
pub fn role_assignment_request(
    resource: &Resource,
    desired: &Desired,
    subscription: &str,
    principal_id: &str,
) -> Result<Request, BodyError> {
    let b = Builder {
        resource,
        desired,
        subscription,
        tenant: None,
    };
    if resource.kind != ResourceKind::RoleAssignment {
        return Err(b.invalid("kind", "not a role assignment"));
    }
    let body = b.role_assignment(principal_id)?;
    let scope = b.reference_id("scope")?.ok_or_else(|| b.missing("scope"))?;
    let name = assignment_name(&scope, principal_id, &body.properties.role_definition_id);
    Ok(Request {
        id: ResourceId::from_raw(format!(
            "{scope}/providers/Microsoft.Authorization/roleAssignments/{name}"
        )),
        body: Body::RoleAssignment(body),
    })
}

/// A role assignment's name: a GUID of its scope, principal and role (case-insensitive, as
/// ARM ids are), as Microsoft recommends, so the same assignment always has the same name and
/// a new principal (the head VM made again) a new one: ARM refuses to change an assignment's
/// principal (RoleAssignmentUpdateNotPermitted).
pub fn assignment_name(scope: &str, principal_id: &str, role_definition_id: &str) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::digest(format!(
        "dsinfra-role-assignment-v1\n{}\n{}\n{}",
        scope.trim_end_matches('/').to_ascii_lowercase(),
        principal_id.to_ascii_lowercase(),
        role_definition_id.to_ascii_lowercase()
    ));
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The ARM id of the head VM whose principal an assignment names.
pub fn principal_vm_id(
    resource: &Resource,
    desired: &Desired,
    subscription: &str,
) -> Result<String, BodyError> {
    let b = Builder {
        resource,
        desired,
        subscription,
        tenant: None,
    };
    Ok(b.principal_vm()?.arm_id(subscription))
}
