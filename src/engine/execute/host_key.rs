//! The host key of a VM being created: generated here, pinned in the intent, installed on the VM
//! through cloud-init customData (see docs/ssh.md).
//!
//! The private half is never stored, so it exists only in this run. That settles what a create
//! may do after a crash, when the state holds an intent (or a VM refresh found deleted):
//!
//! * killed between the intent and the PUT, the VM does not exist and the intent's key has no
//!   private half any more: a new pair is generated, and the intent saved again with it before
//!   the PUT, so the state never pins a key the VM does not have;
//! * killed between the PUT and the save of `Created`, the VM exists and was created with the
//!   intent's key: it is adopted with that key, and the PUT carries no customData (ARM refuses a
//!   changed one, and it could not be the same: its private half is gone).
//!
//! Which case it is, only ARM knows: a create that follows an earlier record asks it with a GET.
//! A create with no earlier record (the usual case) needs no call.

use crate::addr::Address;
use crate::engine::advice::ResourceError;
use crate::engine::bodies::Request;
use crate::engine::events::Operation;
use crate::model::{Resource, ResourceKind};
use crate::ssh::HostKeyPair;
use crate::state::ResourceState;

use super::{Shared, call_described, local_error};
use crate::azure::ResourceId;

/// What a VM create does about its host key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Choice {
    /// Generate a pair, pin its public half, send it in customData.
    Generate,
    /// The VM already exists: keep the key the state recorded (none: trust on first use), send
    /// no customData.
    Keep,
}

/// Whether the create must first ask ARM if the VM exists: only when the state already had a
/// record of it (an intent, or a VM refresh found deleted).
pub(super) fn must_look(previous: Option<&ResourceState>) -> bool {
    previous.is_some()
}

/// The choice, given whether the VM exists (`None` when nobody asked: no earlier record).
pub(super) fn choose(exists: Option<bool>) -> Choice {
    if exists == Some(true) {
        Choice::Keep
    } else {
        Choice::Generate
    }
}

/// The request to send and the host key to record. A VM's create gets a new pair (its public
/// half recorded, the document with its private half in customData) unless the VM turns out to
/// exist already; everything else, VM updates included, keeps the recorded key and sends no
/// customData. `early` is the pair generated with the VM's early intent, whose public half that
/// intent already pins (intents.rs): it is the one sent.
pub(super) async fn attach(
    shared: &Shared,
    resource: &Resource,
    operation: Operation,
    id: &str,
    previous: Option<&ResourceState>,
    request: Option<Request>,
    early: Option<HostKeyPair>,
) -> Result<(Option<Request>, Option<String>), ResourceError> {
    let recorded = previous.and_then(|p| p.host_key.clone());
    if resource.kind != ResourceKind::VirtualMachine || operation != Operation::Create {
        return Ok((request, recorded));
    }
    let pair = match early {
        Some(pair) => Some(pair),
        None => for_create(shared, resource, id, previous).await?,
    };
    match pair {
        Some(pair) => Ok((
            request.map(|r| r.with_custom_data(&pair.cloud_config())),
            Some(pair.public().to_openssh()),
        )),
        None => Ok((request, recorded)),
    }
}

/// For a VM create: `Some(pair)` when a new key goes to the VM, `None` when the VM already exists
/// and keeps the key the state recorded.
async fn for_create(
    shared: &Shared,
    resource: &Resource,
    id: &str,
    previous: Option<&ResourceState>,
) -> Result<Option<HostKeyPair>, ResourceError> {
    let address: &Address = &resource.address;
    let operation = Operation::Create;
    let exists = if must_look(previous) {
        let id = ResourceId::from_raw(id.to_owned());
        let found = call_described(shared, &id, address, operation, Some(resource), || {
            shared.client.get::<serde_json::Value>(&id)
        })
        .await?;
        Some(found.is_some())
    } else {
        None
    };
    match choose(exists) {
        Choice::Keep => Ok(None),
        Choice::Generate => HostKeyPair::generate().map(Some).map_err(|e| {
            local_error(
                address,
                operation,
                format!("cannot generate the VM's SSH host key: {e}"),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_create_generates_without_asking_arm() {
        assert!(!must_look(None));
        assert_eq!(choose(None), Choice::Generate);
    }

    #[test]
    fn after_a_crash_an_existing_vm_keeps_its_key_and_a_missing_one_gets_a_new_key() {
        // Killed between the PUT and the save: the VM exists with the intent's key.
        assert_eq!(choose(Some(true)), Choice::Keep);
        // Killed between the intent and the PUT (or deleted outside dsinfra): a new pair, since
        // the intent's private half is gone.
        assert_eq!(choose(Some(false)), Choice::Generate);
    }
}
