//! VM "boots" for tests: when a VM's creation succeeds, an optional hook
//! ([`super::EmulatorConfig::on_vm_boot`]) is told what the VM was created with (its admin user,
//! SSH keys and the decoded cloud-init customData) and may answer with a local SSH endpoint,
//! such as a real sshd the test started with the host key from the customData. That endpoint is
//! recorded for the VM's public and private IP, so `dsinfra` reaches the stand-in exactly as it
//! would reach the VM, jumps through a head node included.
//!
//! Why a wrapper around the request handler instead of code in the operation machinery: a boot
//! must happen outside every lock (the hook starts processes) and before any answer that lets a
//! client see the creation finished. Each answer therefore passes one gate after the handler has
//! run: whoever reaches the gate first runs the boots whose creation has completed meanwhile and
//! records their endpoints, and everyone else's answer waits until that is done. A client that
//! learns its VM succeeded thus always finds its endpoint already listed.
//!
//! The hook is also told the VM's InfiniBand fabric: the availability set it is in (Azure connects
//! VMs over InfiniBand only within one set) and, for a member, an address standing for its `ib0`
//! ([`ib0_address`]: a loopback address per member, one `127.N.0.0/16` range per set). A stand-in
//! that listens there too is reachable over "InfiniBand" by the other members; a VM outside every
//! set gets no such address, so a test host standing for it has no working ib0 route, as on
//! Azure. Two different sets are not isolated from each other here (dsinfra puts one cluster in
//! one set, so the case that matters is in the set or not).
//!
//! customData is a secret (it carries the VM's private host key): it is decoded into memory for
//! the hook and never stored, logged or echoed, as in ARM. Pending boots live in memory only: an
//! emulator restarted while a VM is being created does not boot it.
//!
//! Spot evictions (compute/spot.rs) pass the same gate: an evicted VM's eviction hook runs (a
//! test powers its host off), and a deallocated spot VM that is started again boots again with
//! the customData it was created with, kept in memory for spot VMs only (never stored). The
//! evictions themselves happen on time, not only at requests ([`evict_on_time`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use base64::Engine as _;
use serde_json::Value;

use super::hooks::{AmlNodeHook, VmBoot, VmBootHook, VmEvictHook, VmEviction};
use super::json::At as _;
use super::ml::{AmlBoots, forget};
use super::path::{self, Route};
use super::resource::key;
use super::server;
use super::shared::{Shared, lock};
use super::store::{Cloud, Kind};
use crate::engine::reach::SshEndpoint;

/// The boots the emulator is tracking, beside the cloud (never saved with it).
#[derive(Default)]
pub(crate) struct Boots {
    /// VMs whose create was accepted and that have not booted yet, by resource key, with their
    /// decoded customData.
    pending: Mutex<BTreeMap<String, Option<String>>>,
    /// The customData of VMs whose creation failed, by resource key: a failed VM PUT again is
    /// provisioned again with what it was created with (ARM keeps it; the PUT need not resend).
    failed: Mutex<BTreeMap<String, Option<String>>>,
    /// VMs that booted with an endpoint, by resource key: the IPs recorded for them, removed
    /// when the VM goes.
    booted: Mutex<BTreeMap<String, Vec<String>>>,
    /// The customData of booted spot VMs, by resource key, kept in memory (never stored) so
    /// that one an eviction deallocated boots again when it is started.
    spot_data: Mutex<BTreeMap<String, Option<String>>>,
    /// Spot VMs an eviction deallocated, by resource key, with their customData: booted again
    /// once started.
    evicted: Mutex<BTreeMap<String, Option<String>>>,
    /// Held while boots run; every answer passes it (see the module documentation).
    gate: tokio::sync::Mutex<()>,
}

/// The request handler with boots: the plain handler, then the gate. Either hook may be absent.
pub(crate) struct Booting {
    pub shared: Arc<Shared>,
    pub hook: Option<VmBootHook>,
    pub aml_hook: Option<AmlNodeHook>,
    pub evict_hook: Option<VmEvictHook>,
    pub boots: Boots,
    pub aml_boots: AmlBoots,
}

/// Whether `route` addresses a VM itself (not an action or sub-view of one).
fn vm_key(route: &Route) -> Option<String> {
    let Route::Resource(p) = route else {
        return None;
    };
    let is_vm = p.segments.len() == 1
        && p.tail.is_none()
        && p.rtype()
            .eq_ignore_ascii_case("Microsoft.Compute/virtualMachines");
    is_vm.then(|| {
        key(&format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/{}",
            p.sub,
            p.group,
            p.name()
        ))
    })
}

/// The decoded customData of a VM PUT body. Text that is not base64 or not UTF-8 is handed over
/// lossily: the compute provider has already refused a body that is not base64.
pub(crate) fn decoded_custom_data(body: &Value) -> Option<String> {
    let encoded = body
        .at("/properties/osProfile/customData")
        .and_then(Value::as_str)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The axum handler used when a boot hook is configured.
pub(crate) async fn handle(
    State(booting): State<Arc<Booting>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let vm = (method == Method::PUT && booting.hook.is_some())
        .then(|| vm_key(&path::parse(uri.path())))
        .flatten();
    // A failed VM that is PUT again is provisioned again, so it boots like a new one.
    let failed_before = vm.as_ref().is_some_and(|k| {
        lock(&booting.shared.cloud)
            .resources
            .get(k)
            .is_some_and(|r| r.provisioning_state() == Some("Failed"))
    });
    let custom_data = vm
        .as_ref()
        .and_then(|_| serde_json::from_slice::<Value>(&body).ok())
        .and_then(|b| decoded_custom_data(&b));
    let response = server::handle(
        State(Arc::clone(&booting.shared)),
        method,
        uri,
        headers,
        body,
    )
    .await;
    let status = response.status().as_u16();
    if let Some(vm) = vm
        && (status == 201 || (status == 200 && failed_before))
    {
        let kept = lock(&booting.boots.failed).remove(&vm).flatten();
        lock(&booting.boots.pending).insert(vm, custom_data.or(kept));
    }
    booting.settle().await;
    response
}

/// How often the emulator looks for spot evictions whose notice ran out.
const EVICTION_TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// Carries out spot evictions when their notice runs out, as Azure does, even when no request
/// arrives (the emulator's other clocks move at requests only: nothing else happens to a
/// resource by itself): while one is pending, the clock is advanced every [`EVICTION_TICK`],
/// and with boot hooks the evicted VMs' hooks run (`booting`'s gate). Runs until aborted.
pub(crate) async fn evict_on_time(shared: Arc<Shared>, booting: Option<Arc<Booting>>) {
    let mut tick = tokio::time::interval(EVICTION_TICK);
    loop {
        tick.tick().await;
        let acted = {
            let mut cloud = lock(&shared.cloud);
            if cloud.evictions.is_empty() {
                continue;
            }
            let acted = super::ops::advance(&mut cloud, shared.clock.now(), &shared.completions);
            if acted && let Err(err) = shared.save(&mut cloud) {
                tracing::error!(message = %err.message, "the emulator could not save an eviction");
            }
            acted
        };
        if acted && let Some(booting) = &booting {
            booting.settle().await;
        }
    }
}

impl Booting {
    /// Runs the boots that are due (VMs and AmlCompute nodes) and forgets the endpoints of
    /// deleted VMs and departed nodes; returns once done.
    async fn settle(&self) {
        let _gate = self.boots.gate.lock().await;
        // Read after the handler answered, so every node an answer shows idle is due here.
        let now = self.shared.clock.now();
        let (due, gone, nodes_due, nodes_gone, evictions) = {
            let mut cloud = lock(&self.shared.cloud);
            let evictions = self.take_evicted(&mut cloud);
            let (nodes_due, nodes_gone) = match self.aml_hook {
                Some(_) => (
                    self.aml_boots.take_due(&cloud, now),
                    self.aml_boots.take_gone(&cloud, now),
                ),
                None => (Vec::new(), Vec::new()),
            };
            let mut due = self.take_due(&cloud);
            due.extend(self.take_restarted(&cloud));
            (
                due,
                self.take_gone(&cloud),
                nodes_due,
                nodes_gone,
                evictions,
            )
        };
        // The evicted VMs stop before anything boots (a VM evicted and started again between
        // two answers stops, then boots).
        if let Some(hook) = &self.evict_hook {
            for eviction in evictions {
                let hook = Arc::clone(hook);
                if let Err(err) = tokio::task::spawn_blocking(move || hook(&eviction)).await {
                    tracing::error!(%err, "the emulator's VM eviction hook panicked");
                }
            }
        }
        let mut booted = Vec::new();
        if let Some(hook) = &self.hook {
            for (vm, boot) in due {
                let hook = Arc::clone(hook);
                booted.push(tokio::task::spawn_blocking(move || {
                    let endpoint = hook(&boot);
                    (vm, boot, endpoint)
                }));
            }
        }
        let mut nodes_booted = Vec::new();
        if let Some(hook) = &self.aml_hook {
            for (node, boot) in nodes_due {
                let hook = Arc::clone(hook);
                nodes_booted.push(tokio::task::spawn_blocking(move || {
                    let endpoint = hook(&boot);
                    (node, boot, endpoint)
                }));
            }
        }
        let mut recorded = Vec::new();
        for task in booted {
            match task.await {
                Ok((vm, boot, Some(endpoint))) => recorded.push((vm, boot, endpoint)),
                Ok((_, _, None)) => {}
                Err(err) => tracing::error!(%err, "the emulator's VM boot hook panicked"),
            }
        }
        let mut nodes_recorded = Vec::new();
        for task in nodes_booted {
            match task.await {
                Ok((node, boot, Some(endpoint))) => nodes_recorded.push((node, boot, endpoint)),
                Ok((_, _, None)) => {}
                Err(err) => tracing::error!(%err, "the emulator's AmlCompute node hook panicked"),
            }
        }
        if recorded.is_empty()
            && gone.is_empty()
            && nodes_recorded.is_empty()
            && nodes_gone.is_empty()
        {
            return;
        }
        let mut cloud = lock(&self.shared.cloud);
        for ips in gone.values() {
            cloud.ssh_endpoints.retain(|e| !ips.contains(&e.ip_address));
        }
        forget(&mut cloud, &nodes_gone);
        for (vm, boot, endpoint) in recorded {
            self.record(&mut cloud, vm, &boot, &endpoint);
        }
        for (node, boot, endpoint) in nodes_recorded {
            self.aml_boots.record(&mut cloud, &node, &boot, endpoint);
        }
        if let Err(err) = self.shared.save(&mut cloud) {
            tracing::error!(message = %err.message, "the emulator could not save SSH endpoints");
        }
    }

    /// Takes the pending VMs whose creation has finished: those that succeeded, with what the
    /// hook needs; failed or vanished ones are dropped.
    fn take_due(&self, cloud: &Cloud) -> Vec<(String, VmBoot)> {
        let mut pending = lock(&self.boots.pending);
        let mut due = Vec::new();
        pending.retain(|vm_key, custom_data| {
            let Some(vm) = cloud.resources.get(vm_key) else {
                return false;
            };
            if vm.op.is_some() {
                return true;
            }
            match vm.provisioning_state() {
                Some("Succeeded") => {
                    if super::compute::is_spot(vm) {
                        lock(&self.boots.spot_data).insert(vm_key.clone(), custom_data.clone());
                    }
                    due.push((vm_key.clone(), vm_boot(cloud, vm_key, custom_data.take())));
                }
                Some("Failed") => {
                    lock(&self.boots.failed).insert(vm_key.clone(), custom_data.take());
                }
                _ => {}
            }
            false
        });
        due
    }

    /// Takes the VMs evictions took since the last answer: a deallocated one is remembered, to
    /// boot again once started; a deleted one is forgotten (created again, it is a new VM).
    fn take_evicted(&self, cloud: &mut Cloud) -> Vec<VmEviction> {
        let mut spot_data = lock(&self.boots.spot_data);
        let mut evicted = lock(&self.boots.evicted);
        std::mem::take(&mut cloud.evicted)
            .into_iter()
            .map(|e| {
                let data = spot_data.remove(&e.vm).flatten();
                if !e.deleted {
                    evicted.insert(e.vm.clone(), data);
                }
                VmEviction {
                    name: e.name,
                    deleted: e.deleted,
                }
            })
            .collect()
    }

    /// Takes the evicted VMs that run again (started, their start finished), to boot again with
    /// the customData they were created with.
    fn take_restarted(&self, cloud: &Cloud) -> Vec<(String, VmBoot)> {
        let mut evicted = lock(&self.boots.evicted);
        let mut due = Vec::new();
        evicted.retain(|vm_key, custom_data| {
            let Some(vm) = cloud.resources.get(vm_key) else {
                return false;
            };
            if vm.op.is_some() || vm.power.as_deref() != Some("running") {
                return true;
            }
            lock(&self.boots.spot_data).insert(vm_key.clone(), custom_data.clone());
            due.push((vm_key.clone(), vm_boot(cloud, vm_key, custom_data.take())));
            false
        });
        due
    }

    /// Takes the booted VMs that no longer exist, with the IPs recorded for them.
    fn take_gone(&self, cloud: &Cloud) -> BTreeMap<String, Vec<String>> {
        let mut booted = lock(&self.boots.booted);
        let gone: Vec<String> = booted
            .keys()
            .filter(|k| !cloud.resources.contains_key(*k))
            .cloned()
            .collect();
        gone.into_iter()
            .filter_map(|k| booted.remove_entry(&k))
            .collect()
    }

    /// Records `endpoint` for the VM's IPs, replacing older mappings of those IPs.
    fn record(&self, cloud: &mut Cloud, vm: String, boot: &VmBoot, endpoint: &str) {
        if endpoint.parse::<SocketAddr>().is_err() {
            tracing::error!(
                vm = %boot.name,
                endpoint,
                "the VM boot hook answered something that is not a socket address; ignored"
            );
            return;
        }
        // Deleted while the hook ran: nothing to reach.
        if !cloud.resources.contains_key(&vm) {
            return;
        }
        let public_ip_id = super::network::vm_public_ip(cloud, &vm).map(|(_, id)| id);
        let mut ips = Vec::new();
        for (ip, id) in [
            (boot.public_ip.clone(), public_ip_id),
            (boot.private_ip.clone(), None),
        ] {
            let Some(ip) = ip else { continue };
            cloud.ssh_endpoints.retain(|e| e.ip_address != ip);
            cloud.ssh_endpoints.push(SshEndpoint {
                ip_address: ip.clone(),
                endpoint: endpoint.to_owned(),
                public_ip_id: id,
                port: None,
            });
            ips.push(ip);
        }
        lock(&self.boots.booted).insert(vm, ips);
    }
}

/// What the hook is told about a VM, read from the stored VM and its NIC.
fn vm_boot(cloud: &Cloud, vm_key: &str, custom_data: Option<String>) -> VmBoot {
    let vm = cloud.resources.get(vm_key);
    let body = vm.map_or(&Value::Null, |v| &v.body);
    let text = |pointer: &str| {
        body.at(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let ssh_public_keys = body
        .at("/properties/osProfile/linuxConfiguration/ssh/publicKeys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|k| k.get("keyData").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    let private_ip = private_ip(cloud, body);
    let fabric = vm
        .and_then(super::compute::vm_fabric)
        .and_then(|id| cloud.resources.get(&key(id)));
    VmBoot {
        vm_id: text("/properties/vmId"),
        name: vm.map(|v| v.name().to_owned()).unwrap_or_default(),
        admin_username: text("/properties/osProfile/adminUsername"),
        ssh_public_keys,
        custom_data,
        public_ip: super::network::vm_public_ip(cloud, vm_key).map(|(ip, _)| ip),
        vm_size: text("/properties/hardwareProfile/vmSize"),
        fabric: fabric.map(|set| set.id.clone()),
        ib0_address: fabric
            .map(|set| ib0_address(set.seq, private_ip.as_deref(), vm.map_or(0, |v| v.seq))),
        private_ip,
    }
}

/// The address standing for a fabric member's `ib0`: `127.N.C.D`, where `N` (64 to 127) follows
/// the set's creation number, so each set has its own range, and `C.D` are the last two octets of
/// the member's private IP (unique in its network), or follow the VM's creation number when it
/// has none.
pub(crate) fn ib0_address(set_seq: u64, private_ip: Option<&str>, vm_seq: u64) -> String {
    let range = 64 + set_seq % 64;
    let octets: Option<Vec<u8>> = private_ip
        .and_then(|ip| ip.parse::<std::net::Ipv4Addr>().ok())
        .map(|ip| ip.octets().to_vec());
    match octets {
        Some(o) => format!("127.{range}.{}.{}", o[2], o[3]),
        None => format!("127.{range}.{}.{}", (vm_seq >> 8) % 256, vm_seq % 256),
    }
}

/// The private address of the VM's primary NIC (the first when none says it is primary).
fn private_ip(cloud: &Cloud, vm_body: &Value) -> Option<String> {
    let nics = vm_body
        .at("/properties/networkProfile/networkInterfaces")?
        .as_array()?;
    let primary = nics
        .iter()
        .find(|n| n.at("/properties/primary").and_then(Value::as_bool) == Some(true))
        .or_else(|| nics.first())?;
    let nic = cloud
        .resources
        .get(&key(primary.get("id")?.as_str()?))
        .filter(|r| r.kind == Kind::NetworkInterface)?;
    let configs = nic.body.at("/properties/ipConfigurations")?.as_array()?;
    let config = configs
        .iter()
        .find(|c| c.at("/properties/primary").and_then(Value::as_bool) == Some(true))
        .or_else(|| configs.first())?;
    config
        .at("/properties/privateIPAddress")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn custom_data_is_decoded_and_absent_when_not_sent() {
        let body = json!({"properties": {"osProfile": {"customData": "I2Nsb3VkLWNvbmZpZwo="}}});
        assert_eq!(
            decoded_custom_data(&body).as_deref(),
            Some("#cloud-config\n")
        );
        assert_eq!(
            decoded_custom_data(&json!({"properties": {"osProfile": {}}})),
            None
        );
    }

    #[test]
    fn only_the_vm_itself_is_a_vm_route() {
        let vm =
            "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/Vm1";
        assert_eq!(
            vm_key(&path::parse(vm)).as_deref(),
            Some(
                "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm1"
            )
        );
        assert_eq!(vm_key(&path::parse(&format!("{vm}/start"))), None);
        assert_eq!(
            vm_key(&path::parse(
                "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/disks/d1"
            )),
            None
        );
    }

    #[test]
    fn each_fabric_has_its_own_ib0_range_and_members_differ_within_it() {
        assert_eq!(ib0_address(3, Some("10.0.1.7"), 9), "127.67.1.7");
        assert_eq!(ib0_address(4, Some("10.0.1.7"), 9), "127.68.1.7");
        assert_ne!(
            ib0_address(3, Some("10.0.0.4"), 9),
            ib0_address(3, Some("10.0.0.5"), 10)
        );
        assert_eq!(ib0_address(3, None, 258), "127.67.1.2");
    }

    #[test]
    fn debug_of_a_boot_hides_the_custom_data() {
        let boot = VmBoot {
            vm_id: "id".into(),
            name: "vm1".into(),
            admin_username: "azureuser".into(),
            ssh_public_keys: vec!["ssh-ed25519 AAAA".into()],
            custom_data: Some("PRIVATE KEY".into()),
            public_ip: None,
            private_ip: Some("10.0.0.4".into()),
            vm_size: "Standard_ND40rs_v2".into(),
            fabric: None,
            ib0_address: None,
        };
        let shown = format!("{boot:?}");
        assert!(!shown.contains("PRIVATE"), "{shown}");
        assert!(
            shown.contains("custom_data: Some(\"<redacted>\")"),
            "{shown}"
        );
    }
}
