//! Refresh: read every resource the state knows back from ARM, mark what was deleted or changed
//! outside dsinfra (drift), and record each VM's power state and the values only ARM knows
//! (public and private IP addresses) for `dsinfra output` and `dsinfra status`.
//!
//! What is read back is each kind's driver's word (`engine::kinds`): the power state a body
//! implies (an AmlCompute cluster scaled to zero is parked), whether an instance view is read
//! (a VM's), and which attributes are compared ([`changed_attributes`]). Only attributes that ARM
//! reads back reliably are: a VM's size and data disks (by LUN), a NIC's accelerated networking,
//! a share's quota, a disk's size and SKU, a storage account's SKU and kind, an AmlCompute's size,
//! node count and idle time, and the tags dsinfra set. Other attributes (an image's `latest`, an
//! SSH key list) come back normalised or not at all, and comparing them would report drift that
//! is not there.
//! Tags added in Azure (by a policy, say) are not drift; a tag dsinfra set that is missing or
//! different is.
//!
//! The reads (lists, and GETs for the kinds not listed) are all started at once and bounded
//! around the calls, as style.md asks, by the client's gate: the command's one limiter
//! (`--parallelism`, `engine::limiter`), the same that bounds apply's walk and park's power
//! actions. The ARM client already retries throttling and transient failures.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;
use serde_json::Value;

use crate::addr::Address;
use crate::azure::types::compute::{PowerState as ArmPowerState, VirtualMachineInstanceView};
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::engine::kinds;
use crate::model::{Attrs, ResourceKind};
use crate::state::{Drift, PowerState, ResourceState, ResourceStatus, State};

/// What a refresh found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RefreshReport {
    /// Resources read back.
    pub checked: usize,
    /// Resources found deleted outside dsinfra.
    pub deleted: Vec<Address>,
    /// Resources whose managed attributes changed outside dsinfra, with the attribute names.
    pub changed: Vec<(Address, Vec<String>)>,
    /// VMs whose power state differs from what the state recorded: (address, before, now).
    pub power_changed: Vec<(Address, Option<PowerState>, PowerState)>,
    /// Values only ARM knows, by resource and attribute (`ip_address` of a public IP,
    /// `private_ip` of a NIC), as `(known after apply: ...)` placeholders name them.
    pub observed: BTreeMap<Address, Attrs>,
    /// When each VM entered its current power state, as instanceView reports it (RFC 3339).
    pub power_since: BTreeMap<Address, String>,
}

impl RefreshReport {
    /// Whether anything drifted.
    pub fn has_drift(&self) -> bool {
        !self.deleted.is_empty() || !self.changed.is_empty()
    }
}

/// What one GET found.
enum Found {
    Gone,
    Present {
        body: Value,
        view: Option<VirtualMachineInstanceView>,
    },
}

/// How a refresh reads ARM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// One list per resource type and group for the kinds their drivers list
    /// ([`kinds::Driver::listed`]), plus the subscription's VM power states
    /// (`VirtualMachines_ListAll` with `statusOnly=true`), and a GET for each resource of the
    /// other kinds (none of which a cluster has one of per node): the calls grow with the
    /// resource types, not the nodes (issue 32, decision 70).
    Lists,
    /// One GET per resource, and a VM's instance view: what every refresh did before issue 32.
    /// Kept so that a test can hold the lists to it (the same drift, the same plan).
    EachResource,
}

/// Read every created ARM resource in `state` back from ARM and update the state in memory:
/// `drift` on what was deleted or changed (a changed resource's `attrs` then hold what Azure has),
/// `power_state` of VMs, and the non-sensitive outputs whose values only ARM knew. The caller
/// decides whether to save (`drift` is never saved; the next refresh finds it again).
///
/// Resources whose create was interrupted (`Creating`) and the locally signed SAS are skipped:
/// the apply adopts the former and the latter is not in ARM.
///
/// Every read is started at once: give a client gated by the command's limiter
/// (`ArmClient::gated`) and at most `--parallelism` of them are in flight.
pub async fn refresh(
    client: &ArmClient,
    subscription: &str,
    state: &mut State,
) -> Result<RefreshReport, ArmError> {
    refresh_by(client, subscription, state, Reading::Lists).await
}

/// [`refresh`], reading as `reading` says.
///
/// # Errors
///
/// A read failed (after the client's retries).
pub async fn refresh_by(
    client: &ArmClient,
    subscription: &str,
    state: &mut State,
    reading: Reading,
) -> Result<RefreshReport, ArmError> {
    let targets: Vec<Target> = state
        .resources
        .iter()
        .filter(|r| r.kind.is_arm() && r.status == ResourceStatus::Created)
        .filter_map(|r| r.id.clone().map(|id| (r.address.clone(), r.kind, id)))
        .collect();
    let results = match reading {
        Reading::EachResource => read_each(client, &targets).await?,
        Reading::Lists => read_listed(client, subscription, &targets, Views::Read).await?,
    };

    let mut report = RefreshReport {
        checked: results.len(),
        ..RefreshReport::default()
    };
    for (address, found) in results {
        let Some(resource) = state.resource_mut(&address) else {
            continue;
        };
        match found {
            Found::Gone => {
                resource.drift = Some(Drift::Deleted);
                report.deleted.push(address);
            }
            Found::Present { body, view } => {
                apply_observation(resource, &body, view.as_ref(), &mut report);
            }
        }
    }
    principal_drift(state, &mut report);
    resolve_outputs(state, &report.observed);
    Ok(report)
}

/// A resource to read back: its address, kind and ARM id.
pub(crate) type Target = (Address, ResourceKind, String);

/// Whether a read by lists also lists the VMs' instance views (their power states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Views {
    Read,
    Skip,
}

/// The bodies ARM has for `targets`, read by lists as a refresh reads them (one per resource
/// type and group, a GET for each target of a kind that is not listed), without instance views;
/// a target ARM no longer has is left out. For `engine::reach::read_addresses`, which needs the
/// IP addresses of every node: by lists, its calls do not grow with the nodes either.
///
/// # Errors
///
/// A read failed (after the client's retries).
pub(crate) async fn read_bodies(
    client: &ArmClient,
    subscription: &str,
    targets: &[Target],
) -> Result<Vec<(Address, ResourceKind, Value)>, ArmError> {
    let kinds: BTreeMap<&Address, ResourceKind> = targets.iter().map(|(a, k, _)| (a, *k)).collect();
    let found = read_listed(client, subscription, targets, Views::Skip).await?;
    Ok(found
        .into_iter()
        .filter_map(|(address, found)| match found {
            Found::Gone => None,
            Found::Present { body, .. } => {
                let kind = *kinds.get(&address)?;
                Some((address, kind, body))
            }
        })
        .collect())
}

/// A GET per target (and a VM's instance view), all started at once.
async fn read_each<'t>(
    client: &ArmClient,
    targets: impl IntoIterator<Item = &'t Target>,
) -> Result<Vec<(Address, Found)>, ArmError> {
    let reads = targets.into_iter().map(|(address, kind, id)| async move {
        let found = read(client, *kind, id).await?;
        Ok::<_, ArmError>((address.clone(), found))
    });
    join_all(reads).await.into_iter().collect()
}

/// The bodies of one list, by lower-cased id.
type Listed = BTreeMap<String, Value>;

/// Lists for the listed kinds (one per resource type and group, and the subscription's VM power
/// states when there are VMs and `views` says so), a GET for each other target; all started at
/// once. A resource a list does not name is gone, as a GET's 404 says; a group that is gone lists
/// nothing.
async fn read_listed(
    client: &ArmClient,
    subscription: &str,
    targets: &[Target],
    views: Views,
) -> Result<Vec<(Address, Found)>, ArmError> {
    // The listed targets with their (lower-cased) group; the others are read with a GET each.
    let mut listed: Vec<(&Target, String)> = Vec::new();
    let mut each: Vec<&Target> = Vec::new();
    for target in targets {
        let (_, kind, id) = target;
        let group = ResourceId::from_raw(id.as_str())
            .resource_group_name()
            .map(str::to_ascii_lowercase);
        match group.filter(|_| kinds::driver(*kind).listed()) {
            Some(group) => listed.push((target, group)),
            None => each.push(target),
        }
    }
    // The collections to list: (group, kind), each once.
    let collections: BTreeSet<(String, ResourceKind)> = listed
        .iter()
        .map(|((_, kind, _), group)| (group.clone(), *kind))
        .collect();
    let lists = collections.iter().map(|(group, kind)| async move {
        let collection = ResourceId::from_raw(format!(
            "/subscriptions/{subscription}/resourceGroups/{group}/providers/{}",
            kind.arm_type()
        ));
        let listed = match client.list::<Value>(&collection, &[]).await {
            Ok(items) => by_id(items),
            // A missing resource group means everything in it is gone too.
            Err(e) if e.is_resource_group_not_found() => Listed::new(),
            Err(e) => return Err(e),
        };
        Ok(((group.clone(), *kind), listed))
    });
    let has_vms = views == Views::Read
        && listed
            .iter()
            .any(|((_, kind, _), _)| kinds::driver(*kind).has_instance_view());
    let statuses = async {
        if !has_vms {
            return Ok(Listed::new());
        }
        // Every VM of the subscription with its run-time status (the instance view), in pages:
        // the one call that carries power states for a whole list (VirtualMachines_List's
        // `$expand=instanceView` needs a scale set `$filter`, see the spec).
        let all = ResourceId::from_raw(format!(
            "/subscriptions/{subscription}/providers/Microsoft.Compute/virtualMachines"
        ));
        client
            .list::<Value>(&all, &[("statusOnly", "true")])
            .await
            .map(by_id)
    };
    let gets = read_each(client, each);
    let (lists, statuses, found) = futures::join!(join_all(lists), statuses, gets);
    let lists: BTreeMap<(String, ResourceKind), Listed> =
        lists.into_iter().collect::<Result<_, _>>()?;
    let statuses = statuses?;
    let mut found = found?;
    for ((address, kind, id), group) in listed {
        let key = id.to_ascii_lowercase();
        let body = lists
            .get(&(group, *kind))
            .and_then(|l| l.get(&key))
            .cloned();
        let view = statuses
            .get(&key)
            .and_then(|vm| vm.pointer("/properties/instanceView"))
            .and_then(|v| serde_json::from_value::<VirtualMachineInstanceView>(v.clone()).ok());
        found.push((
            address.clone(),
            match body {
                Some(body) => Found::Present { body, view },
                None => Found::Gone,
            },
        ));
    }
    Ok(found)
}

/// A list's items by lower-cased id (ARM's names are case-insensitive, and DevTestLab answers
/// ids in lower case).
fn by_id(items: Vec<Value>) -> Listed {
    items
        .into_iter()
        .filter_map(|item| {
            let id = item.get("id")?.as_str()?.to_ascii_lowercase();
            Some((id, item))
        })
        .collect()
}

/// A role assignment whose principal is no longer its head VM's (the VM made again outside
/// dsinfra gets a new identity) drifted: ARM cannot change an assignment's principal, so the
/// plan replaces it (`principal` forces a new one). Its `principal` then records the one it
/// still names.
fn principal_drift(state: &mut State, report: &mut RefreshReport) {
    let principal = |address: &Address| {
        report
            .observed
            .get(address)
            .and_then(|known| known.get("principal_id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let mut drifted = Vec::new();
    for resource in &state.resources {
        if resource.kind != ResourceKind::RoleAssignment || resource.drift.is_some() {
            continue;
        }
        let Some(vm) = resource
            .attrs
            .get("principal")
            .and_then(|p| p.get("vm"))
            .and_then(Value::as_str)
            .and_then(|vm| vm.parse::<Address>().ok())
        else {
            continue;
        };
        if let (Some(now), Some(assigned)) = (principal(&vm), principal(&resource.address))
            && !now.eq_ignore_ascii_case(&assigned)
        {
            drifted.push((resource.address.clone(), assigned));
        }
    }
    for (address, assigned) in drifted {
        if let Some(resource) = state.resource_mut(&address) {
            if let Some(Value::Object(principal)) = resource.attrs.get_mut("principal") {
                principal.insert("id".into(), Value::from(assigned));
            }
            resource.drift = Some(Drift::Changed {
                attributes: vec!["principal".to_owned()],
            });
            report.changed.push((address, vec!["principal".to_owned()]));
        }
    }
}

async fn read(client: &ArmClient, kind: ResourceKind, id: &str) -> Result<Found, ArmError> {
    let id = ResourceId::from_raw(id);
    let body = match client.get::<Value>(&id).await {
        Ok(Some(body)) => body,
        Ok(None) => return Ok(Found::Gone),
        // A missing resource group means everything in it is gone too.
        Err(e) if e.is_resource_group_not_found() => return Ok(Found::Gone),
        Err(e) => return Err(e),
    };
    let view = if kinds::driver(kind).has_instance_view() {
        client.get_instance_view(&id).await?
    } else {
        None
    };
    Ok(Found::Present { body, view })
}

fn apply_observation(
    resource: &mut ResourceState,
    body: &Value,
    view: Option<&VirtualMachineInstanceView>,
    report: &mut RefreshReport,
) {
    let changed = changed_attributes(resource.kind, &resource.attrs, body);
    if changed.is_empty() {
        resource.drift = None;
    } else {
        for name in &changed {
            if let Some(now) = kinds::observed(resource.kind, name, body, resource.attrs.get(name))
            {
                resource.attrs.insert(name.clone(), now);
            }
        }
        resource.drift = Some(Drift::Changed {
            attributes: changed.clone(),
        });
        report.changed.push((resource.address.clone(), changed));
    }
    let known = known_values(resource.kind, body);
    if !known.is_empty() {
        report.observed.insert(resource.address.clone(), known);
    }
    if let Some(power) = kinds::driver(resource.kind).power_in_body(body) {
        if resource.power_state != Some(power) {
            report
                .power_changed
                .push((resource.address.clone(), resource.power_state, power));
        }
        resource.power_state = Some(power);
    }
    if let Some(view) = view {
        if let Some(power) = view.power_state().as_ref().and_then(power_state_of) {
            if resource.power_state != Some(power) {
                report
                    .power_changed
                    .push((resource.address.clone(), resource.power_state, power));
            }
            resource.power_state = Some(power);
        }
        if let Some(since) = power_since(view) {
            report.power_since.insert(resource.address.clone(), since);
        }
    }
}

/// The state's power state for an ARM power state; transitional states count as where they lead
/// (a VM that is deallocating is parked as far as billing goes once it finishes).
pub fn power_state_of(state: &ArmPowerState) -> Option<PowerState> {
    match state {
        ArmPowerState::Starting | ArmPowerState::Running => Some(PowerState::Running),
        ArmPowerState::Stopping | ArmPowerState::Stopped => Some(PowerState::Stopped),
        ArmPowerState::Deallocating | ArmPowerState::Deallocated => Some(PowerState::Deallocated),
        ArmPowerState::Other(_) => None,
    }
}

/// When the VM entered its current power state: the `PowerState/...` status's time when ARM sends
/// one, otherwise the time of the last provisioning operation (a start or deallocate is one).
pub fn power_since(view: &VirtualMachineInstanceView) -> Option<String> {
    let time_of = |prefix: &str| {
        view.statuses
            .iter()
            .filter(|s| {
                s.code
                    .as_deref()
                    .is_some_and(|c| c.to_ascii_lowercase().starts_with(prefix))
            })
            .find_map(|s| s.time.clone())
    };
    time_of("powerstate/").or_else(|| time_of("provisioningstate/"))
}

/// The managed attributes of `kind` whose value in ARM's `body` differs from `attrs`, in name
/// order. Only attributes ARM reads back reliably are compared; an attribute dsinfra does not
/// manage (absent or null in `attrs`) is never drift.
pub fn changed_attributes(kind: ResourceKind, attrs: &Attrs, body: &Value) -> Vec<String> {
    let mut changed: Vec<String> = kinds::driver(kind)
        .compared()
        .iter()
        .filter(|name| {
            let Some(want) = attrs.get(**name).filter(|v| !v.is_null()) else {
                return false;
            };
            // What ARM does not send back cannot be compared: never call it drift.
            kinds::observed(kind, name, body, Some(want))
                .is_some_and(|have| !same(name, want, &have))
        })
        .map(|n| (*n).to_owned())
        .collect();
    changed.sort();
    changed
}

/// Whether a wanted value matches what ARM has. Tags match when every tag dsinfra set is there
/// with its value; names (sizes, SKUs) compare case-insensitively, as ARM does.
fn same(name: &str, want: &Value, have: &Value) -> bool {
    match (name, want, have) {
        ("tags", Value::Object(want), Value::Object(have)) => {
            want.iter().all(|(k, v)| have.get(k) == Some(v))
        }
        (_, Value::String(a), Value::String(b)) => a.eq_ignore_ascii_case(b),
        (_, a, b) => a == b,
    }
}

/// Values only ARM knows, named as `(known after apply: ADDRESS.ATTR)` placeholders name them:
/// a public IP's `ip_address`, a NIC's `private_ip`, and a VM's `secure_boot`.
pub fn known_values(kind: ResourceKind, body: &Value) -> Attrs {
    let mut known = Attrs::new();
    kinds::driver(kind).known(body, &mut known);
    known
}

/// Replace every `(known after apply: ADDRESS.ATTR)` placeholder inside `value` whose value is in
/// `observed`; placeholders still unknown are left as they are.
pub fn resolve_known(value: &Value, observed: &BTreeMap<Address, Attrs>) -> Value {
    match value {
        Value::String(s) => resolve_text(s, observed),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| resolve_known(v, observed)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), resolve_known(v, observed)))
                .collect(),
        ),
        other => other.clone(),
    }
}

const PLACEHOLDER: &str = "(known after apply: ";

fn resolve_text(s: &str, observed: &BTreeMap<Address, Attrs>) -> Value {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find(PLACEHOLDER) {
        let after = &rest[start + PLACEHOLDER.len()..];
        let Some(end) = after.find(')') else { break };
        let reference = &after[..end];
        let value = reference.rsplit_once('.').and_then(|(address, attribute)| {
            let address: Address = address.parse().ok()?;
            observed.get(&address)?.get(attribute).cloned()
        });
        out.push_str(&rest[..start]);
        match value {
            // A whole-string placeholder keeps the value's JSON type.
            Some(v) if start == 0 && end + 1 == after.len() && out.is_empty() => return v,
            Some(Value::String(v)) => out.push_str(&v),
            Some(v) => out.push_str(&v.to_string()),
            None => out.push_str(&rest[start..=start + PLACEHOLDER.len() + end]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Value::String(out)
}

/// Whether a value still holds a placeholder.
pub fn has_unknown(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains(PLACEHOLDER),
        Value::Array(items) => items.iter().any(has_unknown),
        Value::Object(map) => map.values().any(has_unknown),
        _ => false,
    }
}

fn resolve_outputs(state: &mut State, observed: &BTreeMap<Address, Attrs>) {
    for value in state.outputs.values_mut() {
        if has_unknown(value) {
            *value = resolve_known(value, observed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::compute::InstanceViewStatus;
    use serde_json::json;

    fn attrs(value: Value) -> Attrs {
        serde_json::from_value(value).expect("an object")
    }

    #[test]
    fn a_resized_vm_and_a_removed_tag_are_drift_but_an_added_tag_is_not() {
        let want = attrs(json!({
            "size": "Standard_NC4as_T4_v3", "image": {"sku": "x"},
            "tags": {"managed-by": "dsinfra", "dsinfra-address": "vm.gpu.vm"}
        }));
        let same_body = json!({
            "tags": {"managed-by": "dsinfra", "dsinfra-address": "vm.gpu.vm", "costcenter": "42"},
            "properties": {"hardwareProfile": {"vmSize": "standard_nc4as_t4_v3"}}
        });
        assert!(changed_attributes(ResourceKind::VirtualMachine, &want, &same_body).is_empty());
        let drifted = json!({
            "tags": {"managed-by": "dsinfra"},
            "properties": {"hardwareProfile": {"vmSize": "Standard_NC12s_v3"}}
        });
        assert_eq!(
            changed_attributes(ResourceKind::VirtualMachine, &want, &drifted),
            ["size", "tags"]
        );
        assert_eq!(
            kinds::observed(ResourceKind::VirtualMachine, "size", &drifted, None),
            Some(json!("Standard_NC12s_v3"))
        );
    }

    #[test]
    fn a_data_disk_detached_outside_dsinfra_is_drift_and_one_attached_outside_is_not() {
        let want = attrs(json!({"data_disks": [
            {"lun": 0, "disk": "disk.data"}, {"lun": 1, "disk": "disk.more"}
        ]}));
        let disk = |lun: u64| json!({"lun": lun, "managedDisk": {"id": "/subscriptions/s/x"}});
        let with =
            |disks: Vec<Value>| json!({"properties": {"storageProfile": {"dataDisks": disks}}});
        let vm = ResourceKind::VirtualMachine;
        assert!(changed_attributes(vm, &want, &with(vec![disk(1), disk(0)])).is_empty());
        // One attached outside dsinfra at a LUN dsinfra does not use is not drift.
        assert!(changed_attributes(vm, &want, &with(vec![disk(0), disk(1), disk(5)])).is_empty());
        let detached = with(vec![disk(1)]);
        assert_eq!(changed_attributes(vm, &want, &detached), ["data_disks"]);
        // The state then records what ARM has, in dsinfra's form: the plan attaches it again.
        assert_eq!(
            kinds::observed(vm, "data_disks", &detached, want.get("data_disks")),
            Some(json!([{"lun": 1, "disk": "disk.more"}]))
        );
        // ARM's VM body without a storage profile says nothing: never drift.
        assert!(changed_attributes(vm, &want, &json!({"properties": {}})).is_empty());
        // A VM without data disks in ARM's answer (the key left out) has none.
        assert_eq!(
            changed_attributes(vm, &want, &json!({"properties": {"storageProfile": {}}})),
            ["data_disks"]
        );
    }

    #[test]
    fn nic_share_disk_and_account_attributes_compare_in_arms_form() {
        let nic = attrs(json!({"accelerated_networking": true}));
        let off = json!({"properties": {"enableAcceleratedNetworking": false}});
        assert_eq!(
            changed_attributes(ResourceKind::NetworkInterface, &nic, &off),
            ["accelerated_networking"]
        );
        let share = attrs(json!({"quota_gb": 1024, "protocol": "NFS"}));
        assert!(
            changed_attributes(
                ResourceKind::FileShare,
                &share,
                &json!({"properties": {"shareQuota": 1024}})
            )
            .is_empty()
        );
        assert_eq!(
            changed_attributes(
                ResourceKind::FileShare,
                &share,
                &json!({"properties": {"shareQuota": 2048}})
            ),
            ["quota_gb"]
        );
        let disk = attrs(json!({"size_gb": 512, "sku": "Premium_LRS"}));
        assert_eq!(
            changed_attributes(
                ResourceKind::ManagedDisk,
                &disk,
                &json!({"sku": {"name": "Standard_LRS"}, "properties": {"diskSizeGB": 1024}})
            ),
            ["size_gb", "sku"]
        );
        let account = attrs(json!({"sku": "Standard_LRS", "kind": "StorageV2"}));
        assert!(
            changed_attributes(
                ResourceKind::StorageAccount,
                &account,
                &json!({"sku": {"name": "Standard_LRS"}, "kind": "StorageV2"})
            )
            .is_empty()
        );
    }

    #[test]
    fn unmanaged_attributes_are_never_drift() {
        let vm = attrs(json!({"size": null}));
        assert!(
            changed_attributes(
                ResourceKind::VirtualMachine,
                &vm,
                &json!({"properties": {"hardwareProfile": {"vmSize": "Standard_D2s_v5"}}})
            )
            .is_empty()
        );
        assert!(changed_attributes(ResourceKind::Sas, &vm, &json!({})).is_empty());
    }

    #[test]
    fn power_states_map_to_billing_states_and_their_time() {
        assert_eq!(
            power_state_of(&ArmPowerState::Deallocating),
            Some(PowerState::Deallocated)
        );
        assert_eq!(
            power_state_of(&ArmPowerState::Starting),
            Some(PowerState::Running)
        );
        assert_eq!(power_state_of(&ArmPowerState::Other("x".into())), None);
        let status = |code: &str, time: Option<&str>| InstanceViewStatus {
            code: Some(code.into()),
            time: time.map(str::to_owned),
            ..InstanceViewStatus::default()
        };
        let view = VirtualMachineInstanceView {
            statuses: vec![
                status("ProvisioningState/succeeded", Some("2026-11-22T06:00:00Z")),
                status("PowerState/running", None),
            ],
            ..VirtualMachineInstanceView::default()
        };
        assert_eq!(power_since(&view).as_deref(), Some("2026-11-22T06:00:00Z"));
        let view = VirtualMachineInstanceView {
            statuses: vec![
                status("ProvisioningState/succeeded", Some("2026-11-22T06:00:00Z")),
                status("PowerState/running", Some("2026-11-22T05:00:00Z")),
            ],
            ..VirtualMachineInstanceView::default()
        };
        assert_eq!(power_since(&view).as_deref(), Some("2026-11-22T05:00:00Z"));
    }

    #[test]
    fn placeholders_resolve_in_place_keeping_unknown_ones() {
        let pip: Address = "vm.gpu.public_ip".parse().expect("valid");
        let observed = BTreeMap::from([(pip, attrs(json!({"ip_address": "20.100.0.4"})))]);
        assert_eq!(
            resolve_known(
                &json!("(known after apply: vm.gpu.public_ip.ip_address)"),
                &observed
            ),
            json!("20.100.0.4")
        );
        assert_eq!(
            resolve_known(
                &json!({"ssh": "ssh azureuser@(known after apply: vm.gpu.public_ip.ip_address) -p 22",
                        "other": "(known after apply: vm.gpu.nic.private_ip)"}),
                &observed
            ),
            json!({"ssh": "ssh azureuser@20.100.0.4 -p 22",
                   "other": "(known after apply: vm.gpu.nic.private_ip)"})
        );
        assert!(has_unknown(&json!(["(known after apply: a.b.c)"])));
        assert!(!has_unknown(&json!(["20.100.0.4"])));
    }

    #[test]
    fn nic_and_public_ip_expose_their_addresses() {
        let nic = json!({"properties": {"ipConfigurations": [
            {"properties": {"privateIPAddress": "10.0.0.4"}}]}});
        assert_eq!(
            known_values(ResourceKind::NetworkInterface, &nic),
            attrs(json!({"private_ip": "10.0.0.4"}))
        );
        assert_eq!(
            known_values(
                ResourceKind::PublicIp,
                &json!({"properties": {"ipAddress": "20.1.2.3"}})
            ),
            attrs(json!({"ip_address": "20.1.2.3"}))
        );
        assert!(known_values(ResourceKind::ManagedDisk, &nic).is_empty());
    }

    /// Issue 13 item 13: the kernel-module steps read Secure Boot from ARM's view of the VM.
    #[test]
    fn a_vm_exposes_whether_secure_boot_is_on() {
        let secure_boot = |body: Value| known_values(ResourceKind::VirtualMachine, &body);
        let tl = |on: bool| {
            json!({"properties": {"securityProfile": {"securityType": "TrustedLaunch",
                "uefiSettings": {"secureBootEnabled": on, "vTpmEnabled": true}}}})
        };
        assert_eq!(secure_boot(tl(true)), attrs(json!({"secure_boot": true})));
        assert_eq!(secure_boot(tl(false)), attrs(json!({"secure_boot": false})));
        // No profile: Azure writes one when it applies Trusted Launch, so there is none.
        assert_eq!(
            secure_boot(json!({"properties": {}})),
            attrs(json!({"secure_boot": false}))
        );
        assert_eq!(
            secure_boot(json!({"properties": {"securityProfile": {"securityType": "Standard"}}})),
            attrs(json!({"secure_boot": false}))
        );
    }
}
