//! Issue 30: whether the caller may write what `park { idle }` needs, asked before any write.
//!
//! The idle watcher parks with the head VM's own identity, so apply creates a custom role and
//! assigns it to that identity. Writing role definitions takes
//! `Microsoft.Authorization/roleDefinitions/write` and assigning roles
//! `Microsoft.Authorization/roleAssignments/write`: Owner and User Access Administrator hold
//! both, Role Based Access Control Administrator only the second, Contributor neither (its
//! `notActions` remove `Microsoft.Authorization/*/Write`). Without this check a Contributor's
//! apply failed with `AuthorizationFailed` after the GPU VMs existed and billed.
//!
//! ARM answers the caller's permissions at a resource group (Permissions_ListForResourceGroup,
//! one entry per role held there or above) only once the group exists: for a new group, apply
//! asks right after creating it, before anything else ([`super::super::op`]'s apply), and plan
//! says it will.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::azure::types::authorization::{Permission, allowed};
use crate::azure::{ArmClient, ArmError};
use crate::diag::Diagnostic;
use crate::model::{Desired, ResourceKind};
use crate::plan::{Action, Plan};

/// Creating or changing a custom role.
pub const ROLE_WRITE: &str = "Microsoft.Authorization/roleDefinitions/write";
/// Assigning a role.
pub const ASSIGNMENT_WRITE: &str = "Microsoft.Authorization/roleAssignments/write";

/// The rights-demanding writes of a plan: each block's role and assignment writes, with the
/// address of the resource that needs them.
fn needed(plan: &Plan) -> BTreeMap<Address, Vec<(Address, &'static str)>> {
    let mut needs: BTreeMap<Address, Vec<(Address, &'static str)>> = BTreeMap::new();
    for change in &plan.changes {
        let action = match (change.kind, &change.action) {
            (
                ResourceKind::RoleDefinition,
                Action::Create | Action::Update | Action::Replace { .. },
            ) => ROLE_WRITE,
            (ResourceKind::RoleAssignment, Action::Create | Action::Replace { .. }) => {
                ASSIGNMENT_WRITE
            }
            _ => continue,
        };
        needs
            .entry(change.address.block_address())
            .or_default()
            .push((change.address.clone(), action));
    }
    needs
}

/// What a plan asks of the caller's rights: its idle-park writes by block, the resource group
/// they go to, and whether the plan creates that group (ARM can then not answer the caller's
/// permissions there before apply made it). `None` when the plan writes no role.
struct Asked<'p> {
    needs: BTreeMap<Address, Vec<(Address, &'static str)>>,
    group: &'p str,
    new_group: bool,
}

fn asked(plan: &Plan) -> Option<Asked<'_>> {
    let needs = needed(plan);
    if needs.is_empty() {
        return None;
    }
    let group = plan
        .changes
        .iter()
        .find(|c| {
            matches!(
                c.kind,
                ResourceKind::RoleDefinition | ResourceKind::RoleAssignment
            )
        })?
        .resource_group
        .as_str();
    let new_group = plan.changes.iter().any(|c| {
        c.kind == ResourceKind::ResourceGroup
            && c.name.eq_ignore_ascii_case(group)
            && matches!(c.action, Action::Create | Action::Replace { .. })
    });
    Some(Asked {
        needs,
        group,
        new_group,
    })
}

/// One error per block whose writes `permissions` do not allow, located at its `idle`.
pub fn judge(
    desired: &Desired,
    needs: &BTreeMap<Address, Vec<(Address, &'static str)>>,
    permissions: &[Permission],
    group: &str,
) -> Vec<Diagnostic> {
    let mut problems = Vec::new();
    for (block, writes) in needs {
        let mut missing: Vec<&str> = writes
            .iter()
            .map(|(_, action)| *action)
            .filter(|action| !allowed(permissions, action))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            continue;
        }
        let span = writes
            .iter()
            .find_map(|(address, _)| desired.resource(address).and_then(|r| r.span.clone()));
        let roles = if missing.contains(&ROLE_WRITE) {
            "Owner or User Access Administrator"
        } else {
            "Owner, User Access Administrator or Role Based Access Control Administrator"
        };
        problems.push(
            Diagnostic::error(format!(
                "{block} parks when idle, but your identity may not create its role in resource \
                 group {group}: it lacks {}",
                missing.join(" and ")
            ))
            .with_span_opt(span)
            .with_label(
                "the head parks with its own identity: apply creates a custom role and assigns it",
            )
            .with_help(format!(
                "ask an administrator for {roles} on resource group {group} (or the \
                 subscription), or to create the role and its assignment for you; or remove \
                 `idle` from `park` (parking `at` a time needs no extra rights). Nothing in \
                 Azure was changed."
            )),
        );
    }
    problems
}

/// Before any write, with a connection: the caller's permissions at the experiment's resource
/// group against what the plan's idle-park writes need. Nothing to check (no such writes, or a
/// group the plan creates: apply checks it once made) is no problem.
pub async fn preflight(
    client: &ArmClient,
    subscription: &str,
    desired: &Desired,
    plan: &Plan,
) -> Result<Vec<Diagnostic>, ArmError> {
    let Some(Asked { needs, group, .. }) = asked(plan).filter(|a| !a.new_group) else {
        return Ok(Vec::new());
    };
    match client
        .permissions_at_resource_group(subscription, group)
        .await?
    {
        Some(permissions) => Ok(judge(desired, &needs, &permissions, group)),
        None => Ok(Vec::new()),
    }
}

/// The plan note for a new resource group: ARM cannot say yet what the caller may do there.
pub fn deferred_note(plan: &Plan) -> Option<String> {
    let Asked { group, .. } = asked(plan).filter(|a| a.new_group)?;
    Some(format!(
        "park {{ idle }} needs rights to create a role and assign it ({ROLE_WRITE}, \
             {ASSIGNMENT_WRITE}); Azure answers what you may do in resource group {group} only \
             once it exists, so apply asks right after creating it, before anything else, and \
             deletes it again if you may not"
    ))
}

/// For a plan that creates the resource group its idle-park roles go to: create the group (the
/// body the walk sends again, so the walk then finds it as planned), ask ARM what the caller may
/// do there, and when that is not enough delete the empty group again and return the problems.
/// Nothing else has been written then. Returns no problems when there is nothing to check here.
pub async fn check_in_new_group(
    client: &ArmClient,
    subscription: &str,
    desired: &Desired,
    plan: &Plan,
) -> Result<Vec<Diagnostic>, ArmError> {
    let Some(Asked { needs, group, .. }) = asked(plan).filter(|a| a.new_group) else {
        return Ok(Vec::new());
    };
    let Some(resource) = desired
        .resources
        .iter()
        .find(|r| r.kind == ResourceKind::ResourceGroup && r.name.eq_ignore_ascii_case(group))
    else {
        return Ok(Vec::new());
    };
    let request = crate::engine::bodies::request_for(resource, desired, subscription, None)
        .map_err(|e| ArmError::usage(e.to_string()))?
        .ok_or_else(|| ArmError::usage(format!("no request creates resource group {group}")))?;
    request.send(client).await?;
    let permissions = client
        .permissions_at_resource_group(subscription, group)
        .await?
        .unwrap_or_default();
    let problems = judge(desired, &needs, &permissions, group);
    if !problems.is_empty() {
        client.delete_resource_group(&request.id).await?;
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permission(actions: &[&str], not_actions: &[&str]) -> Permission {
        Permission {
            actions: actions.iter().map(|a| (*a).to_owned()).collect(),
            not_actions: not_actions.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    fn needs() -> BTreeMap<Address, Vec<(Address, &'static str)>> {
        let at = |s: &str| s.parse::<Address>().expect("an address");
        BTreeMap::from([(
            at("vm.gpu"),
            vec![
                (at("vm.gpu.idle_role"), ROLE_WRITE),
                (at("vm.gpu.idle_access"), ASSIGNMENT_WRITE),
            ],
        )])
    }

    /// The built-in roles' permissions as Azure documents them: who may create the idle role.
    #[test]
    fn owner_and_user_access_administrator_may_contributor_may_not() {
        let desired = crate::plan::fixtures::dual();
        let contributor = permission(&["*"], &["Microsoft.Authorization/*/Write"]);
        let owner = permission(&["*"], &[]);
        let uaa = permission(&["*/read", "Microsoft.Authorization/*"], &[]);
        let rbac_admin = permission(
            &["Microsoft.Authorization/roleAssignments/write", "*/read"],
            &[],
        );
        assert!(judge(&desired, &needs(), &[owner], "rg").is_empty());
        assert!(judge(&desired, &needs(), std::slice::from_ref(&uaa), "rg").is_empty());
        let refused = judge(&desired, &needs(), std::slice::from_ref(&contributor), "rg");
        assert_eq!(refused.len(), 1);
        assert!(
            refused[0].summary.contains(ROLE_WRITE)
                && refused[0].summary.contains(ASSIGNMENT_WRITE)
        );
        // Two roles: each one's notActions apply to itself only.
        assert!(judge(&desired, &needs(), &[contributor.clone(), uaa], "rg").is_empty());
        let partial = judge(&desired, &needs(), &[contributor, rbac_admin], "rg");
        assert_eq!(partial.len(), 1);
        assert!(
            partial[0]
                .summary
                .ends_with(&format!("it lacks {ROLE_WRITE}")),
            "{}",
            partial[0].summary
        );
    }
}
