//! The VM driver: its size and attached data disks read back, its identity and Secure Boot as
//! ARM has them, its power from the instance view, and park as deallocate (start to unpark).

use serde_json::Value;

use super::{Act, Driver, Parking, text};
use crate::azure::{ArmClient, ResourceId};
use crate::engine::bodies::{Body, BodyError, Builder};
use crate::engine::power::PowerChange;
use crate::model::Attrs;
use crate::state::ResourceState;

/// The VM driver.
pub(crate) struct VirtualMachine;

/// The recorded data disks (`[{lun, disk}]`, `disk` an address) that ARM still has attached, by
/// LUN: a disk detached outside dsinfra (the portal, `az vm disk detach`) is drift, and the plan
/// attaches it again (a PATCH of the VM) before a step mounts it. ARM names disks by id, and an
/// id cannot be turned back into an address here, so a disk attached outside dsinfra at a LUN
/// dsinfra does not use is not drift (as a tag added outside is not); `None` when the body has no
/// storage profile to say.
fn attached(body: &Value, want: &Value) -> Option<Value> {
    let luns: Vec<u64> = body
        .pointer("/properties/storageProfile")?
        .get("dataDisks")
        .and_then(Value::as_array)
        .map(|disks| {
            disks
                .iter()
                .filter_map(|d| d.get("lun").and_then(Value::as_u64))
                .collect()
        })
        .unwrap_or_default();
    let kept = want
        .as_array()?
        .iter()
        .filter(|d| {
            d.get("lun")
                .and_then(Value::as_u64)
                .is_some_and(|lun| luns.contains(&lun))
        })
        .cloned()
        .collect();
    Some(Value::Array(kept))
}

/// The one VM driver.
pub(crate) static DRIVER: VirtualMachine = VirtualMachine;

static PARKING: Parking = Parking {
    warning: "parking deallocates the VMs: compute is no longer billed, but each VM's temp disk (/mnt) is wiped, including BeeOND scratch and blobfuse caches; OS and data disks, public IPs and storage are kept (and still billed)",
    phrase: |change, n| {
        let verb = match change {
            PowerChange::Park => "deallocate",
            PowerChange::Unpark => "start",
        };
        format!("{verb} {n} VM(s)")
    },
};

impl Driver for VirtualMachine {
    fn body(&self, b: &Builder<'_>) -> Result<Option<Body>, BodyError> {
        Ok(Some(Body::VirtualMachine(Box::new(b.virtual_machine()?))))
    }

    fn compared(&self) -> &'static [&'static str] {
        &["data_disks", "size", "tags"]
    }

    fn observed(&self, name: &str, body: &Value, want: Option<&Value>) -> Option<Value> {
        match name {
            "size" => text(body, "/properties/hardwareProfile/vmSize").map(Value::from),
            "data_disks" => attached(body, want?),
            _ => None,
        }
    }

    /// Its system-assigned identity's principal (what an idle-park assignment names), and
    /// whether Secure Boot is on, as the VM has it (Azure's default applies when the body had
    /// no securityProfile): the kernel-module steps check it before they start.
    fn known(&self, body: &Value, known: &mut Attrs) {
        if let Some(principal) = text(body, "/identity/principalId") {
            known.insert("principal_id".into(), Value::from(principal));
        }
        let trusted = text(body, "/properties/securityProfile/securityType")
            .is_some_and(|t| !t.eq_ignore_ascii_case("Standard"));
        let secure_boot = body
            .pointer("/properties/securityProfile/uefiSettings/secureBootEnabled")
            .and_then(Value::as_bool);
        // ARM writes the profile when it applies its default, so a VM without one has none.
        known.insert(
            "secure_boot".into(),
            Value::Bool(trusted && secure_boot.unwrap_or(false)),
        );
    }

    fn has_instance_view(&self) -> bool {
        true
    }

    fn listed(&self) -> bool {
        true
    }

    fn parking(&self) -> Option<&'static Parking> {
        Some(&PARKING)
    }

    fn set_power<'a>(
        &'a self,
        client: &'a ArmClient,
        id: &'a ResourceId,
        _resource: &'a ResourceState,
        change: PowerChange,
    ) -> Act<'a, ()> {
        Box::pin(client.vm_action(id, change.action()))
    }
}
