//! The one apply-time fact a role assignment needs (issue 18, decision 52): the principal id of
//! the head VM's system-assigned identity, which Azure makes when it creates (or updates) the VM,
//! read back from the VM right before the assignment is sent.

use super::{Operation, Shared, local_error};
use crate::addr::Address;
use crate::azure::ResourceId;
use crate::azure::types::compute::VirtualMachine;
use crate::engine::advice::ResourceError;
use crate::engine::bodies::{Request, principal_vm_id, role_assignment_request};
use crate::model::Resource;

/// The PUT of `resource` (a role assignment) to its head VM's principal.
pub(super) async fn assignment_request(
    shared: &Shared,
    address: &Address,
    resource: &Resource,
    operation: Operation,
) -> Result<Request, ResourceError> {
    let fail = |message: String| local_error(address, operation, message);
    let vm_id = principal_vm_id(resource, &shared.desired, &shared.subscription)
        .map_err(|e| fail(e.to_string()))?;
    let vm: Option<VirtualMachine> = shared
        .client
        .get(&ResourceId::from_raw(vm_id.clone()))
        .await
        .map_err(|e| fail(format!("reading the head VM's identity (GET {vm_id}): {e}")))?;
    let principal = vm
        .and_then(|vm| vm.identity)
        .and_then(|identity| identity.principal_id)
        .ok_or_else(|| {
            fail(format!(
                "the head VM {vm_id} has no system-assigned identity: its update did not give it one"
            ))
        })?;
    role_assignment_request(resource, &shared.desired, &shared.subscription, &principal)
        .map_err(|e| fail(e.to_string()))
}
