//! The one apply-time fact a role assignment needs (issue 18, decision 52): the principal id of
//! the head VM's system-assigned identity, which Azure makes when it creates (or updates) the VM,
//! read back from the VM right before the assignment is sent; and the assignment's PUT, which
//! waits out Microsoft Entra ID's replication of that principal and of the new custom role
//! (issue 30, [`replication_wait`]).

use std::time::{Duration, Instant};

use super::{Operation, Shared, local_error};
use crate::addr::Address;
use crate::azure::ArmError;
use crate::azure::ResourceId;
use crate::azure::types::compute::VirtualMachine;
use crate::engine::advice::ResourceError;
use crate::engine::bodies::{Request, principal_vm_id, role_assignment_request};
use crate::engine::events::Event;
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

/// The codes ARM answers an assignment with while Microsoft Entra ID has not yet replicated a
/// principal or a role definition made moments ago: "If you are creating this principal and then
/// immediately assigning a role, this error might be related to a replication delay". Setting
/// `principalType` (dsinfra does) avoids most `PrincipalNotFound`s, not all; a new custom role
/// has no such switch.
pub(super) const REPLICATION_CODES: [&str; 2] = ["PrincipalNotFound", "RoleDefinitionDoesNotExist"];

/// How long, in the client's time, an assignment keeps waiting for replication (other
/// provisioners wait about two minutes too).
pub(super) const REPLICATION_BUDGET: Duration = Duration::from_mins(2);

/// The wait before the next try of an assignment refused with `code` after `waited` (the
/// client's time already spent waiting): 5 s doubling to 30 s, until [`REPLICATION_BUDGET`] is
/// spent; `None` for any other code, or when the budget is spent. Pure, so the schedule is
/// pinned by a test.
pub(super) fn replication_wait(code: Option<&str>, waited: Duration) -> Option<Duration> {
    if !code.is_some_and(|c| REPLICATION_CODES.iter().any(|r| r.eq_ignore_ascii_case(c))) {
        return None;
    }
    let left = REPLICATION_BUDGET
        .checked_sub(waited)
        .filter(|l| !l.is_zero())?;
    let mut step = Duration::from_secs(5);
    let mut spent = Duration::ZERO;
    while spent + step <= waited {
        spent += step;
        step = (step * 2).min(Duration::from_secs(30));
    }
    Some(step.min(left))
}

/// Sends the assignment's PUT, trying again while ARM says the principal or the role has not
/// replicated yet ([`replication_wait`]); the waits are the client's (scaled under an emulator's
/// compressed clock) and each is reported as the resource's progress.
pub(super) async fn send_assignment(
    shared: &Shared,
    address: &Address,
    operation: Operation,
    request: &Request,
) -> Result<(), ArmError> {
    let started = Instant::now();
    let mut waited = Duration::ZERO;
    loop {
        let result = request.send(&shared.client).await;
        let Err(error) = &result else {
            return result;
        };
        let Some(wait) = replication_wait(error.code(), waited) else {
            return result;
        };
        (shared.events)(&Event::Progress {
            address: address.clone(),
            operation,
            state: format!(
                "{}: waiting {}s for Microsoft Entra ID to replicate it",
                error.code().unwrap_or_default(),
                wait.as_secs()
            ),
            elapsed: started.elapsed(),
        });
        shared.client.sleep(wait).await;
        waited += wait;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replication_is_waited_out_for_two_minutes_and_nothing_else_is() {
        let mut waited = Duration::ZERO;
        let mut waits = Vec::new();
        while let Some(wait) = replication_wait(Some("PrincipalNotFound"), waited) {
            waits.push(wait.as_secs());
            waited += wait;
        }
        assert_eq!(waits, [5, 10, 20, 30, 30, 25]);
        assert_eq!(waited, REPLICATION_BUDGET);
        assert_eq!(
            replication_wait(Some("roledefinitiondoesnotexist"), Duration::ZERO),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            replication_wait(Some("AuthorizationFailed"), Duration::ZERO),
            None
        );
        assert_eq!(replication_wait(None, Duration::ZERO), None);
    }
}
