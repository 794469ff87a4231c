//! Parking: deallocate an experiment's VMs (no compute charges while parked) and start them
//! again, in parallel, saving the state after every VM; plus what the experiment costs per hour
//! in its current power states, for `park`, `unpark` and `status`.
//!
//! Deallocating releases the host, so the temp disk (`/mnt`: BeeOND scratch, blobfuse caches) is
//! lost; OS and data disks, public IPs and storage stay (and stay billed). Every VM's action is
//! started at once and its requests go through the client's gate, the command's one limiter
//! (`--parallelism`), as apply's do; each VM's progress is reported as the engine's events
//! ([`Event`] with [`Operation::Deallocate`] or [`Operation::Start`]), which the same renderer
//! as apply's draws. The engine never writes to the terminal.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;

use super::events::{Event, EventSink, Operation};
use super::kinds;
use crate::addr::Address;
use crate::azure::types::compute::VmAction;
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::model::ResourceKind;
use crate::plan::rate_of;
use crate::state::{Backend, Drift, PowerState, ResourceStatus, State, StateError};

/// Park or unpark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerChange {
    /// Deallocate: compute billing stops, the temp disk is lost.
    Park,
    /// Start again.
    Unpark,
}

impl PowerChange {
    /// The ARM action.
    pub fn action(self) -> VmAction {
        match self {
            Self::Park => VmAction::Deallocate,
            Self::Unpark => VmAction::Start,
        }
    }

    /// The power state the action leads to.
    pub fn target(self) -> PowerState {
        match self {
            Self::Park => PowerState::Deallocated,
            Self::Unpark => PowerState::Running,
        }
    }

    /// The command's name (`park`, `unpark`), e.g. for the steps' log directory.
    pub fn verb(self) -> &'static str {
        match self {
            Self::Park => "park",
            Self::Unpark => "unpark",
        }
    }

    /// The operation its events name.
    pub fn operation(self) -> Operation {
        match self {
            Self::Park => Operation::Deallocate,
            Self::Unpark => Operation::Start,
        }
    }
}

/// Errors of a park or unpark run.
#[derive(Debug, thiserror::Error)]
pub enum PowerError {
    /// `--only` named something that is no VM in the state.
    #[error("--only {name} matches no VM in the state{hint}")]
    NoSuchVm {
        /// The name given.
        name: String,
        /// ` (VMs: ...)` or a suggestion.
        hint: String,
    },
    /// Saving the state failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// Some VMs failed; the others were done and saved.
    #[error("{failed} of {total} VM(s) could not be {verb}: {first}")]
    Failed {
        /// How many failed.
        failed: usize,
        /// How many were attempted.
        total: usize,
        /// `deallocated` or `started`.
        verb: &'static str,
        /// The first failure, with ARM's code and message.
        first: String,
        /// Every failure, in the order they came, with ARM's error as it came (for advice).
        failures: Vec<(Address, ArmError)>,
    },
}

/// The resources whose power follows `address`'s: the pools of an AKS cluster, which its stop
/// deallocates and its start brings back (the pools of a cluster that parks its pools instead
/// are parked on their own, and are not selected with it).
fn followers(state: &State, address: &Address) -> Vec<Address> {
    let Some(cluster) = state
        .resource(address)
        .filter(|r| r.kind == crate::model::ResourceKind::AksCluster)
    else {
        return Vec::new();
    };
    let at = cluster.address.to_string();
    state
        .resources
        .iter()
        .filter(|r| {
            r.kind == crate::model::ResourceKind::AksPool
                && r.attrs.get("cluster").and_then(serde_json::Value::as_str) == Some(at.as_str())
        })
        .map(|r| r.address.clone())
        .collect()
}

/// Whether `name` (a block label such as `gpu`, a block address such as `cluster.train`, a node
/// such as `cluster.train[1]`, or a full address) selects the VM at `vm`.
fn name_selects(name: &str, vm: &Address) -> bool {
    if let Ok(address) = name.parse::<Address>() {
        return address.selects(vm);
    }
    if let Some((kind, label)) = name.split_once('.') {
        return vm.kind == kind && vm.name == label;
    }
    vm.name == name
}

/// The VMs to act on: every created VM in the state that still exists (not drifted away), or
/// those `only` selects. Each name in `only` must select at least one VM.
pub fn select_vms(state: &State, only: &[String]) -> Result<Vec<Address>, PowerError> {
    let vms: Vec<&Address> = state
        .resources
        .iter()
        .filter(|r| {
            kinds::driver(r.kind).parks(r)
                && r.status == ResourceStatus::Created
                && r.drift != Some(Drift::Deleted)
        })
        .map(|r| &r.address)
        .collect();
    for name in only {
        if !vms.iter().any(|vm| name_selects(name, vm)) {
            let blocks: Vec<String> = vms
                .iter()
                .map(|a| a.block_address().to_string())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let hint = if blocks.is_empty() {
                " (the state has no VMs)".to_owned()
            } else {
                format!(" (VMs: {})", blocks.join(", "))
            };
            return Err(PowerError::NoSuchVm {
                name: name.clone(),
                hint,
            });
        }
    }
    Ok(vms
        .into_iter()
        .filter(|vm| only.is_empty() || only.iter().any(|n| name_selects(n, vm)))
        .cloned()
        .collect())
}

/// The VMs of `selected` that are not already in `change`'s target state.
pub fn needing_change(state: &State, selected: &[Address], change: PowerChange) -> Vec<Address> {
    selected
        .iter()
        .filter(|a| {
            state
                .resource(a)
                .is_none_or(|r| r.power_state != Some(change.target()))
        })
        .cloned()
        .collect()
}

/// Run `change` on `vms` in parallel. `client` should be gated by the command's limiter: every
/// action is started at once, and the gate keeps the requests in flight (actions, polls) to
/// `--parallelism`, while an action waiting between polls holds no slot. Each VM's new power
/// state is saved through `backend` the moment its action finishes, so an interruption loses
/// nothing. Failures do not stop the others; they are reported together at the end.
pub async fn set_power(
    client: &ArmClient,
    backend: &mut dyn Backend,
    state: &mut State,
    vms: &[Address],
    change: PowerChange,
    events: &EventSink,
) -> Result<(), PowerError> {
    let operation = change.operation();
    let mut running = FuturesUnordered::new();
    for address in vms {
        // Owned: the state is saved (and so written) as each one finishes.
        let Some((resource, id)) = state.resource(address).and_then(|r| {
            let id = ResourceId::from_raw(r.id.clone()?);
            Some((r.clone(), id))
        }) else {
            continue;
        };
        events(&Event::Started {
            address: address.clone(),
            operation,
        });
        let driver = kinds::driver(resource.kind);
        running.push(async move {
            let started = std::time::Instant::now();
            let result = driver.set_power(client, &id, &resource, change).await;
            (address, started.elapsed(), result)
        });
    }
    let mut failures = Vec::new();
    while let Some((address, elapsed, result)) = running.next().await {
        match result {
            Ok(()) => {
                if let Some(r) = state.resource_mut(address) {
                    r.power_state = Some(change.target());
                    // A started VM boots afresh: its temp disk (mounts, caches, scratch) is
                    // new, so its per-boot steps run again (see engine::post_boot::records).
                    if change == PowerChange::Unpark {
                        r.boots += 1;
                    }
                }
                // What the resource's power carries with it (a stopped AKS cluster's pools).
                for follower in followers(state, address) {
                    if let Some(r) = state.resource_mut(&follower) {
                        r.power_state = Some(change.target());
                    }
                }
                backend.save(state).await?;
                events(&Event::Done {
                    address: address.clone(),
                    operation,
                    elapsed,
                });
            }
            Err(err) => {
                events(&Event::Failed {
                    address: address.clone(),
                    operation,
                    elapsed,
                    message: err.to_string(),
                });
                failures.push((address.clone(), err));
            }
        }
    }
    if let Some((address, err)) = failures.first() {
        return Err(PowerError::Failed {
            failed: failures.len(),
            total: vms.len(),
            verb: match change {
                PowerChange::Park => "deallocated",
                PowerChange::Unpark => "started",
            },
            first: format!("{address}: {err}"),
            failures,
        });
    }
    Ok(())
}

/// What the experiment costs per hour in its current power states, and in the two extremes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HourlyCost {
    /// $/hour now: running VMs at their running rate, deallocated ones at their parked rate.
    pub now: f64,
    /// $/hour with every VM running.
    pub all_running: f64,
    /// $/hour with every VM parked.
    pub all_parked: f64,
}

/// Whether compute is billed in a power state (everything but deallocated; an unknown state is
/// assumed billed, which is the safe side for a cost estimate).
pub fn is_billed(state: Option<PowerState>) -> bool {
    state != Some(PowerState::Deallocated)
}

/// The experiment's cost per hour from the state's attributes and power states.
pub fn hourly_cost(state: &State) -> HourlyCost {
    let mut cost = HourlyCost::default();
    for r in state
        .resources
        .iter()
        .filter(|r| r.drift != Some(Drift::Deleted))
    {
        let (rate, _) = rate_of(r.kind, &r.attrs);
        cost.all_running += rate.running_per_hour;
        cost.all_parked += rate.parked_per_hour;
        cost.now += if is_billed(r.power_state) {
            rate.running_per_hour
        } else {
            rate.parked_per_hour
        };
    }
    cost
}

/// One VM in `dsinfra status`.
#[derive(Debug, Clone, PartialEq)]
pub struct VmStatus {
    /// The VM.
    pub address: Address,
    /// Azure name.
    pub name: String,
    /// Size.
    pub size: String,
    /// Power state (as last seen when no connection was made).
    pub power: Option<PowerState>,
    /// Public IP address, when it has one and it is known.
    pub public_ip: Option<String>,
    /// Private IP address, when known.
    pub private_ip: Option<String>,
    /// Since when it is in its power state, when ARM said.
    pub since: Option<DateTime<Utc>>,
    /// $/hour in its current power state.
    pub per_hour: f64,
    /// Estimated cost since `since` at `per_hour` (running VMs only).
    pub since_start: Option<f64>,
}

/// Build the status rows of every VM in the state. `observed` holds what a refresh read
/// (`ip_address` of public IPs, `private_ip` of NICs) and `since` when each VM entered its power
/// state; both may be empty (no connection).
pub fn vm_statuses(
    state: &State,
    observed: &BTreeMap<Address, crate::model::Attrs>,
    since: &BTreeMap<Address, String>,
    now: DateTime<Utc>,
) -> Vec<VmStatus> {
    let sibling = |vm: &Address, part: &str, attr: &str| {
        let address = Address::new(&vm.kind, &vm.name, vm.index, part);
        observed
            .get(&address)
            .and_then(|a| a.get(attr))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    state
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::VirtualMachine && r.drift != Some(Drift::Deleted))
        .map(|r| {
            let (rate, _) = rate_of(r.kind, &r.attrs);
            let billed = is_billed(r.power_state);
            let per_hour = if billed {
                rate.running_per_hour
            } else {
                rate.parked_per_hour
            };
            let since = since
                .get(&r.address)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc));
            let since_start = since
                .filter(|_| r.power_state == Some(PowerState::Running))
                .map(|t| {
                    let seconds = (now - t).num_seconds().max(0);
                    // Seconds in a run are far below 2^52: the conversion is exact.
                    #[allow(clippy::cast_precision_loss)]
                    let hours = seconds as f64 / 3600.0;
                    per_hour * hours
                });
            VmStatus {
                address: r.address.clone(),
                name: r.name.clone(),
                size: r
                    .attrs
                    .get("size")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("?")
                    .to_owned(),
                power: r.power_state,
                public_ip: sibling(&r.address, "public_ip", "ip_address"),
                private_ip: sibling(&r.address, "nic", "private_ip"),
                since,
                per_hour,
                since_start,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Attrs;
    use crate::state::ResourceState;
    use serde_json::json;

    fn vm(address: &str, size: &str, power: PowerState) -> ResourceState {
        ResourceState {
            address: address.parse().expect("valid"),
            kind: ResourceKind::VirtualMachine,
            name: address.replace('.', "-"),
            parent: None,
            resource_group: "rg".into(),
            id: Some(format!(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{address}"
            )),
            attrs: Attrs::from([
                ("size".to_owned(), json!(size)),
                ("location".to_owned(), json!("eastus")),
                ("os_disk_size_gb".to_owned(), json!(128)),
                ("os_disk_sku".to_owned(), json!("Premium_LRS")),
            ]),
            depends_on: std::collections::BTreeSet::new(),
            status: ResourceStatus::Created,
            power_state: Some(power),
            secrets: BTreeMap::new(),
            host_key: None,
            boots: 0,
            steps: std::collections::BTreeMap::new(),
            mesh_key: None,
            nodes: std::collections::BTreeMap::new(),
            drift: None,
        }
    }

    fn state(vms: Vec<ResourceState>) -> State {
        let mut s = State::new("exp");
        for v in vms {
            s.upsert(v);
        }
        s
    }

    #[test]
    fn only_selects_by_label_block_node_or_address_and_refuses_unknown_names() {
        let s = state(vec![
            vm("vm.gpu.vm", "Standard_NC4as_T4_v3", PowerState::Running),
            vm(
                "cluster.train[0].vm",
                "Standard_NC4as_T4_v3",
                PowerState::Running,
            ),
            vm(
                "cluster.train[1].vm",
                "Standard_NC4as_T4_v3",
                PowerState::Running,
            ),
        ]);
        let names = |only: &[&str]| {
            select_vms(
                &s,
                &only.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
            )
            .expect("selects")
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
        };
        assert_eq!(names(&[]).len(), 3);
        assert_eq!(names(&["gpu"]), ["vm.gpu.vm"]);
        assert_eq!(names(&["cluster.train"]).len(), 2);
        assert_eq!(names(&["cluster.train[1]"]), ["cluster.train[1].vm"]);
        let err = select_vms(&s, &["gpus".to_owned()]).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "--only gpus matches no VM in the state (VMs: cluster.train, vm.gpu)"
        );
    }

    #[test]
    fn a_parked_vm_costs_only_its_disk_and_is_not_parked_again() {
        let mut s = state(vec![
            vm("vm.a.vm", "Standard_NC4as_T4_v3", PowerState::Running),
            vm("vm.b.vm", "Standard_NC4as_T4_v3", PowerState::Deallocated),
        ]);
        let disk = crate::catalog::disk_price_per_hour("Premium_LRS", 128);
        let cost = hourly_cost(&s);
        assert!((cost.all_parked - 2.0 * disk).abs() < 1e-4, "{cost:?}");
        assert!((cost.now - (0.526 + 2.0 * disk)).abs() < 1e-4, "{cost:?}");
        assert!(
            (cost.all_running - 2.0 * (0.526 + disk)).abs() < 1e-4,
            "{cost:?}"
        );
        let all = select_vms(&s, &[]).expect("all");
        assert_eq!(
            needing_change(&s, &all, PowerChange::Park),
            [all[0].clone()]
        );
        s.resources[0].drift = Some(Drift::Deleted);
        assert_eq!(select_vms(&s, &[]).expect("all").len(), 1);
    }

    #[test]
    fn status_estimates_cost_since_start_for_running_vms_only() {
        let s = state(vec![
            vm("vm.a.vm", "Standard_NC4as_T4_v3", PowerState::Running),
            vm("vm.b.vm", "Standard_NC4as_T4_v3", PowerState::Deallocated),
        ]);
        let now = DateTime::parse_from_rfc3339("2026-11-22T08:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        let since = BTreeMap::from([
            (
                "vm.a.vm".parse().expect("valid"),
                "2026-11-22T06:00:00Z".to_owned(),
            ),
            (
                "vm.b.vm".parse().expect("valid"),
                "2026-11-22T06:00:00Z".to_owned(),
            ),
        ]);
        let observed = BTreeMap::from([(
            "vm.a.public_ip".parse().expect("valid"),
            Attrs::from([("ip_address".to_owned(), json!("20.100.0.4"))]),
        )]);
        let rows = vm_statuses(&s, &observed, &since, now);
        assert_eq!(rows[0].public_ip.as_deref(), Some("20.100.0.4"));
        let cost = rows[0].since_start.expect("running");
        assert!((cost - 2.0 * rows[0].per_hour).abs() < 1e-9);
        assert_eq!(rows[1].since_start, None);
        assert!(rows[1].per_hour < 0.1);
    }
}
