//! What every test here shares: the specs loaded once, the emulator hooks wired to them, a
//! client pointed at the emulator, the request bodies, and the round-trip check.

use std::sync::{Arc, Mutex, OnceLock};

use dsinfra::azure::types::compute::{
    CachingType, DataDisk, DiskCreateOptionType, DiskDeleteOption, DiskStorageAccountType,
    HardwareProfile, ImageReference, LinuxConfiguration, ManagedDiskParameters,
    NetworkInterfaceReference, NetworkInterfaceReferenceProperties, NetworkProfile, OsDisk,
    OsProfile, PowerState, SshConfiguration, SshPublicKey, StorageProfile, VirtualMachine,
    VirtualMachineProperties,
};
use dsinfra::azure::types::network::{
    AddressSpace, NetworkInterface, NetworkInterfaceIpConfiguration,
    NetworkInterfaceIpConfigurationProperties, NetworkInterfaceProperties, Subnet,
    SubnetProperties, VirtualNetwork, VirtualNetworkProperties,
};
use dsinfra::azure::types::resources::ResourceGroup;
use dsinfra::azure::types::{SubResource, Tags};
use dsinfra::azure::{ArmClient, ResourceId, Secret, StaticTokenCredential, TokenCredential};
use dsinfra::emulator::{
    self, EmulatorConfig, EmulatorHandle, RequestInfo, ResponseInfo, ResponseValidator,
};
use dsinfra::openapi::Specs;

#[path = "../common/spec_hooks.rs"]
mod spec_hooks;
use serde_json::json;
pub(crate) use spec_hooks::is_operation_status;
use spec_hooks::{describe, request_validator};

pub(crate) const SUB: &str = "5f1c1b7e-0d3a-4c55-9a38-2b8e6f0d9c41";
pub(crate) const LOCATION: &str = "eastus";
pub(crate) const SSH_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDsinfraTestKeyOnlyForTheEmulator0000000 dsinfra";
/// Base64 of a cloud-init file; it must reach ARM but never a log or an error.
pub(crate) const CUSTOM_DATA: &str = "I2Nsb3VkLWNvbmZpZwpwYWNrYWdlczogW2h0b3Bd";

// ---------------------------------------------------------------------------------------------
// The specs, the hooks and the environment.

/// The specs, loaded once per test binary. `None` locally when they are missing (said loudly);
/// under CI a missing spec folder fails the test.
pub(crate) fn specs() -> Option<Arc<Specs>> {
    static SPECS: OnceLock<Option<Arc<Specs>>> = OnceLock::new();
    SPECS
        .get_or_init(|| match Specs::load_default() {
            Ok(specs) => Some(Arc::new(specs)),
            Err(missing) => {
                let ci = std::env::var("CI").is_ok_and(|v| v == "true");
                assert!(
                    !ci,
                    "client/emulator conformance needs the specs under CI: {missing}"
                );
                eprintln!(
                    "SKIPPING client/emulator conformance test: {missing}. Nothing was checked."
                );
                None
            }
        })
        .clone()
}

/// One exchange as the emulator answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exchange {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) status: u16,
}

pub(crate) type Log = Arc<Mutex<Vec<Exchange>>>;

/// The response hook: the shared spec check of every answer, and a log of the exchange.
fn response_validator(specs: Arc<Specs>, log: Log) -> ResponseValidator {
    Arc::new(move |request: &RequestInfo, response: &ResponseInfo| {
        log.lock()
            .expect("the log is never poisoned")
            .push(Exchange {
                method: request.method.clone(),
                path: request.path.clone(),
                status: response.status,
            });
        spec_hooks::response_violations(&specs, request, response)
    })
}

/// A running emulator with both hooks, and a client pointed at it.
pub(crate) struct Env {
    pub(crate) handle: EmulatorHandle,
    pub(crate) client: ArmClient,
    log: Log,
}

/// Emulator latency: a VM takes 0.9 s, a storage account 0.2 s, so operations really run.
pub(crate) const LATENCY_SCALE: f64 = 0.01;
/// Client waits run on the emulator's clock, as `apply` runs them: the emulator's Retry-After
/// counts ARM seconds (a VM's 90), so a client on another scale would wait too long or poll
/// early. A 1 s minimum poll interval becomes 10 ms, a Retry-After of 2 s 20 ms.
pub(crate) const CLIENT_TIME_SCALE: f64 = LATENCY_SCALE;

pub(crate) async fn env_with(
    config: EmulatorConfig,
    credential: Arc<dyn TokenCredential>,
) -> Option<Env> {
    let specs = specs()?;
    let log = Log::default();
    // A test that chose its own latency scale keeps it (the pacing test needs 0: buckets in real
    // time); the rest get the suite's scale. Struct-update syntax alone would silently override
    // the test's choice.
    let latency_scale =
        if (config.latency_scale - EmulatorConfig::default().latency_scale).abs() < f64::EPSILON {
            LATENCY_SCALE
        } else {
            config.latency_scale
        };
    let handle = emulator::start(EmulatorConfig {
        latency_scale,
        request_validator: Some(request_validator(Arc::clone(&specs))),
        response_validator: Some(response_validator(specs, Arc::clone(&log))),
        ..config
    })
    .await
    .expect("the emulator starts");
    let client = ArmClient::builder(credential)
        .endpoint(handle.endpoint())
        .time_scale(CLIENT_TIME_SCALE)
        // Pinned jitter keeps backoff waits exact.
        .jitter(Arc::new(|| 0.5))
        .build()
        .expect("the client builds");
    Some(Env {
        handle,
        client,
        log,
    })
}

pub(crate) async fn env(config: EmulatorConfig) -> Option<Env> {
    env_with(
        config,
        Arc::new(StaticTokenCredential::new("emulator-token")),
    )
    .await
}

impl Env {
    /// Every request the client sent and every answer the emulator gave conformed.
    pub(crate) fn assert_conformant(&self) {
        let requests = self.handle.request_violations();
        assert!(
            requests.is_empty(),
            "requests broke the spec:{}",
            describe(&requests)
        );
        let responses = self.handle.response_violations();
        assert!(
            responses.is_empty(),
            "answers broke the spec:{}",
            describe(&responses)
        );
        assert!(
            !self.exchanges().is_empty(),
            "the response hook saw no exchange at all"
        );
    }

    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.log.lock().expect("the log is never poisoned").clone()
    }

    /// The statuses answered to `method` on exactly `path`, in order.
    pub(crate) fn statuses(&self, method: &str, path: &ResourceId) -> Vec<u16> {
        self.exchanges()
            .into_iter()
            .filter(|e| e.method == method && e.path == path.as_str())
            .map(|e| e.status)
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Bodies and shared setup.

// Every body takes `Option<Tags>`; returning that keeps the call sites short.
#[allow(clippy::unnecessary_wraps)]
pub(crate) fn tags() -> Option<Tags> {
    Some(Tags::from([("dsinfra".to_owned(), "test".to_owned())]))
}

pub(crate) fn group(rg: &str) -> ResourceId {
    ResourceId::resource_group(SUB, rg)
}

pub(crate) fn vnet_body(nsg: Option<&ResourceId>) -> VirtualNetwork {
    VirtualNetwork {
        location: Some(LOCATION.into()),
        tags: tags(),
        properties: Some(VirtualNetworkProperties {
            address_space: Some(AddressSpace {
                address_prefixes: vec!["10.10.0.0/16".into()],
            }),
            subnets: Some(vec![Subnet {
                name: Some("default".into()),
                properties: Some(SubnetProperties {
                    address_prefix: Some("10.10.1.0/24".into()),
                    network_security_group: nsg.map(SubResource::from),
                    ..SubnetProperties::default()
                }),
                ..Subnet::default()
            }]),
            ..VirtualNetworkProperties::default()
        }),
        ..VirtualNetwork::default()
    }
}

pub(crate) fn nic_body(
    subnet: &ResourceId,
    public_ip: Option<&ResourceId>,
    nsg: Option<&ResourceId>,
) -> NetworkInterface {
    NetworkInterface {
        location: Some(LOCATION.into()),
        tags: tags(),
        properties: Some(NetworkInterfaceProperties {
            ip_configurations: Some(vec![NetworkInterfaceIpConfiguration {
                name: Some("ipconfig1".into()),
                properties: Some(NetworkInterfaceIpConfigurationProperties {
                    subnet: Some(subnet.into()),
                    public_ip_address: public_ip.map(SubResource::from),
                    primary: Some(true),
                    ..NetworkInterfaceIpConfigurationProperties::default()
                }),
                ..NetworkInterfaceIpConfiguration::default()
            }]),
            network_security_group: nsg.map(SubResource::from),
            enable_accelerated_networking: Some(true),
            ..NetworkInterfaceProperties::default()
        }),
        ..NetworkInterface::default()
    }
}

/// A Linux VM with an SSH key and customData, optionally in a PPG with an attached disk.
pub(crate) fn vm_body(
    size: &str,
    nic: &ResourceId,
    ppg: Option<&ResourceId>,
    data_disk: Option<&ResourceId>,
) -> VirtualMachine {
    VirtualMachine {
        location: LOCATION.into(),
        tags: tags(),
        properties: Some(VirtualMachineProperties {
            hardware_profile: Some(HardwareProfile {
                vm_size: size.into(),
            }),
            storage_profile: Some(StorageProfile {
                image_reference: Some(ImageReference {
                    publisher: Some("Canonical".into()),
                    offer: Some("0001-com-ubuntu-server-jammy".into()),
                    sku: Some("22_04-lts-gen2".into()),
                    version: Some("latest".into()),
                    ..ImageReference::default()
                }),
                os_disk: Some(OsDisk {
                    os_type: None,
                    name: None,
                    caching: Some(CachingType::ReadWrite),
                    create_option: DiskCreateOptionType::FromImage,
                    disk_size_gb: Some(64),
                    managed_disk: Some(ManagedDiskParameters {
                        id: None,
                        storage_account_type: Some(DiskStorageAccountType::PremiumLrs),
                    }),
                    delete_option: Some(DiskDeleteOption::Delete),
                }),
                data_disks: data_disk.map(|disk| vec![DataDisk::attach(0, disk.as_str())]),
            }),
            os_profile: Some(OsProfile {
                computer_name: Some("trainer".into()),
                admin_username: Some("azureuser".into()),
                custom_data: Some(Secret::new(CUSTOM_DATA)),
                linux_configuration: Some(LinuxConfiguration {
                    disable_password_authentication: Some(true),
                    ssh: Some(SshConfiguration {
                        public_keys: vec![SshPublicKey {
                            path: "/home/azureuser/.ssh/authorized_keys".into(),
                            key_data: SSH_KEY.into(),
                        }],
                    }),
                    provision_vm_agent: Some(true),
                }),
            }),
            network_profile: Some(NetworkProfile {
                network_interfaces: vec![NetworkInterfaceReference {
                    id: nic.as_str().into(),
                    properties: Some(NetworkInterfaceReferenceProperties {
                        primary: Some(true),
                        delete_option: Some(DiskDeleteOption::Detach),
                    }),
                }],
            }),
            proximity_placement_group: ppg.map(SubResource::from),
            ..VirtualMachineProperties::default()
        }),
        ..VirtualMachine::default()
    }
}

/// A group with a VNet (one subnet) and a NIC in it: what every VM test needs.
pub(crate) async fn network(client: &ArmClient, rg: &str) -> ResourceId {
    client
        .put_resource_group(&group(rg), &ResourceGroup::new(LOCATION, tags()))
        .await
        .expect("group created");
    let vnet = ResourceId::virtual_network(SUB, rg, "vnet");
    client
        .put_virtual_network(&vnet, &vnet_body(None))
        .await
        .expect("vnet created");
    let subnet = ResourceId::subnet(SUB, rg, "vnet", "default");
    let nic = ResourceId::network_interface(SUB, rg, "nic");
    client
        .put_network_interface(&nic, &nic_body(&subnet, None, None))
        .await
        .expect("nic created");
    nic
}

/// Every writable property the client sent comes back with the same value in the typed read.
/// A property the emulator drops, or one the client's type cannot decode (a misspelt rename
/// reads as `None` and vanishes), fails here. `except` lists JSON paths ARM never returns.
pub(crate) fn assert_round_trip<S: serde::Serialize, R: serde::Serialize>(
    what: &str,
    sent: &S,
    read: &R,
    except: &[&str],
) {
    let sent = serde_json::to_value(sent).expect("the sent body serialises");
    let read = serde_json::to_value(read).expect("the read body serialises");
    let mut lost = Vec::new();
    subset(&sent, &read, "$", except, &mut lost);
    assert!(
        lost.is_empty(),
        "{what} did not round-trip:\n  {}\nread: {read}",
        lost.join("\n  ")
    );
}

fn subset(
    sent: &serde_json::Value,
    read: &serde_json::Value,
    path: &str,
    except: &[&str],
    lost: &mut Vec<String>,
) {
    use serde_json::Value;
    if except.contains(&path) {
        return;
    }
    match (sent, read) {
        (Value::Object(sent), Value::Object(read)) => {
            for (key, value) in sent {
                let child = format!("{path}.{key}");
                match read.get(key) {
                    Some(back) => subset(value, back, &child, except, lost),
                    None if except.contains(&child.as_str()) => {}
                    None => lost.push(format!("{child} is missing")),
                }
            }
        }
        (Value::Array(sent), Value::Array(read)) if sent.len() == read.len() => {
            for (i, (value, back)) in sent.iter().zip(read).enumerate() {
                subset(value, back, &format!("{path}[{i}]"), except, lost);
            }
        }
        // ARM ids and enum values compare case-insensitively.
        (Value::String(a), Value::String(b)) if a.eq_ignore_ascii_case(b) => {}
        (a, b) if a == b => {}
        (a, b) => lost.push(format!("{path}: sent {a}, read {b}")),
    }
}

#[test]
fn the_round_trip_check_catches_lost_and_changed_properties() {
    let sent = json!({"location": "eastus", "properties": {"a": 1, "b": ["x"], "id": "/Sub/RG"}});
    let mut lost = Vec::new();
    subset(
        &sent,
        &json!({"location": "EastUS", "properties": {"b": ["y"], "id": "/sub/rg"}}),
        "$",
        &[],
        &mut lost,
    );
    assert_eq!(
        lost,
        [
            "$.properties.a is missing",
            "$.properties.b[0]: sent \"x\", read \"y\""
        ]
    );
    let mut none = Vec::new();
    subset(
        &sent,
        &json!({"location": "eastus"}),
        "$",
        &["$.properties"],
        &mut none,
    );
    assert!(none.is_empty(), "{none:?}");
}

pub(crate) async fn power_state(client: &ArmClient, vm: &ResourceId) -> Option<PowerState> {
    client
        .get_instance_view(vm)
        .await
        .expect("instance view readable")
        .expect("the VM exists")
        .power_state()
}
