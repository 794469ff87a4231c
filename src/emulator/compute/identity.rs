//! A VM's system-assigned managed identity (compute's `VirtualMachineIdentity`): the service
//! principal Azure creates with the VM, stable across updates, gone when the identity's type
//! becomes `None` or the VM is deleted. User-assigned identities are not modelled (dsinfra never
//! sends them), so a request for one is refused rather than half-served.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::emulator::error::ArmError;
use crate::emulator::json::At as _;
use crate::emulator::resource::TENANT;
use crate::emulator::store::{Cloud, Kind, Resource};

/// Where a VM keeps when its principal was created (for the replication delay of role
/// assignments, see authorization/assignments.rs). Stripped from every answer.
pub(crate) const PRINCIPAL_CREATED: &str = "_emulatorPrincipalCreated";

/// The identity a VM is stored with after a PUT (or a PATCH merged into one): `None` when it has
/// none, else the identity with its principal (the existing one when the VM already had it), and
/// the principal's creation time.
pub(crate) fn vm_identity(
    body: &Value,
    existing: Option<&Resource>,
    now: DateTime<Utc>,
) -> Result<Option<(Value, Value)>, ArmError> {
    let kept = existing.and_then(|vm| {
        let identity = vm.body.get("identity")?;
        let created = vm.body.get(PRINCIPAL_CREATED)?;
        Some((identity.clone(), created.clone()))
    });
    // A PUT without `identity` leaves the VM's identity as it is.
    let Some(asked) = body.get("identity") else {
        return Ok(kept);
    };
    let kind = asked.get("type").and_then(Value::as_str).unwrap_or("None");
    if kind.eq_ignore_ascii_case("None") {
        return Ok(None);
    }
    if !kind.eq_ignore_ascii_case("SystemAssigned") {
        let known = ["UserAssigned", "SystemAssigned, UserAssigned"];
        if known.iter().any(|k| k.eq_ignore_ascii_case(kind)) {
            return Err(ArmError::new(
                501,
                "NotImplemented",
                format!(
                    "The dsinfra emulator does not model user-assigned identities (identity type \
                     '{kind}'); only 'SystemAssigned' and 'None' are served. See \
                     docs/emulator.md."
                ),
            ));
        }
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            format!(
                "The value '{kind}' of parameter 'identity.type' is invalid. Allowed values are \
                 'SystemAssigned', 'UserAssigned', 'SystemAssigned, UserAssigned' and 'None'."
            ),
        )
        .with_target("identity.type"));
    }
    if let Some((identity, created)) = kept
        && identity.get("principalId").is_some()
    {
        return Ok(Some((identity, created)));
    }
    let identity = json!({
        "type": "SystemAssigned",
        "principalId": uuid::Uuid::new_v4().to_string(),
        "tenantId": TENANT,
    });
    Ok(Some((identity, json!(now.to_rfc3339()))))
}

/// The principal of a VM's system-assigned identity.
pub(crate) fn principal_of(vm: &Resource) -> Option<&str> {
    vm.body.at("/identity/principalId").and_then(Value::as_str)
}

/// The VMs' principals that exist: `principalId` to its creation time.
pub(crate) fn principals(cloud: &Cloud) -> Vec<(String, Option<DateTime<Utc>>)> {
    cloud
        .of_kind(Kind::VirtualMachine)
        .into_iter()
        .filter(|vm| !vm.hidden)
        .filter_map(|vm| {
            let principal = principal_of(vm)?;
            let created = vm
                .body
                .get(PRINCIPAL_CREATED)
                .and_then(Value::as_str)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc));
            Some((principal.to_owned(), created))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm_with(body: Value) -> Resource {
        Cloud::default().new_resource(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/v"
                .into(),
            Kind::VirtualMachine,
            body,
        )
    }

    #[test]
    fn a_system_assigned_identity_gets_a_stable_principal_until_it_is_removed() {
        let now = Utc::now();
        let asked = json!({"identity": {"type": "SystemAssigned"}});
        let (identity, created) = vm_identity(&asked, None, now)
            .expect("accepted")
            .expect("an identity");
        let principal = identity["principalId"].as_str().expect("a principal");
        assert!(uuid::Uuid::parse_str(principal).is_ok());
        assert_eq!(identity["tenantId"], TENANT);

        let mut body = json!({"identity": identity.clone()});
        body[PRINCIPAL_CREATED] = created.clone();
        let vm = vm_with(body);
        let again = vm_identity(&asked, Some(&vm), now).expect("accepted");
        assert_eq!(again, Some((identity.clone(), created.clone())));
        let absent = vm_identity(&json!({}), Some(&vm), now).expect("accepted");
        assert_eq!(absent, Some((identity, created)));
        let none = json!({"identity": {"type": "None"}});
        assert_eq!(vm_identity(&none, Some(&vm), now).expect("accepted"), None);
    }

    #[test]
    fn user_assigned_identities_are_refused_with_a_clear_message() {
        let asked = json!({"identity": {"type": "UserAssigned"}});
        let err = vm_identity(&asked, None, Utc::now()).expect_err("refused");
        assert_eq!(err.status, 501);
        assert!(err.message.contains("user-assigned"), "{}", err.message);
        let bad = json!({"identity": {"type": "Magic"}});
        let err = vm_identity(&bad, None, Utc::now()).expect_err("refused");
        assert_eq!((err.status, err.code.as_str()), (400, "InvalidParameter"));
    }
}
