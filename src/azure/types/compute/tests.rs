use super::*;
use crate::azure::types::spec_examples::{request_body, response_body};
use serde_json::json;

const DIR: &str =
    "compute/resource-manager/Microsoft.Compute/ComputeRP/stable/2024-11-01/examples/";

fn nic_ref(id: &str) -> NetworkInterfaceReference {
    NetworkInterfaceReference {
        id: id.into(),
        properties: Some(NetworkInterfaceReferenceProperties {
            primary: Some(true),
            delete_option: None,
        }),
    }
}

fn image(publisher: &str, offer: &str, sku: &str) -> ImageReference {
    ImageReference {
        publisher: Some(publisher.into()),
        offer: Some(offer.into()),
        sku: Some(sku.into()),
        version: Some("latest".into()),
        ..ImageReference::default()
    }
}

fn os_disk() -> OsDisk {
    OsDisk {
        os_type: None,
        name: Some("myVMosdisk".into()),
        caching: Some(CachingType::ReadWrite),
        create_option: DiskCreateOptionType::FromImage,
        disk_size_gb: None,
        managed_disk: Some(ManagedDiskParameters {
            id: None,
            storage_account_type: Some(DiskStorageAccountType::StandardLrs),
        }),
        delete_option: None,
    }
}

const NIC: &str = "/subscriptions/{subscription-id}/resourceGroups/myResourceGroup/providers/Microsoft.Network/networkInterfaces/{existing-nic-name}";

#[test]
fn vm_with_ssh_matches_the_spec_example() {
    let expected = request_body(
        &format!("{DIR}virtualMachineExamples/VirtualMachine_Create_WithSshAuthentication.json"),
        "parameters",
    );
    let key = expected["properties"]["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]
        ["keyData"]
        .as_str()
        .expect("the example has a key")
        .to_string();
    let vm = VirtualMachine {
        location: "westus".into(),
        properties: Some(VirtualMachineProperties {
            hardware_profile: Some(HardwareProfile {
                vm_size: "Standard_D1_v2".into(),
            }),
            storage_profile: Some(StorageProfile {
                image_reference: Some(image("{image_publisher}", "{image_offer}", "{image_sku}")),
                os_disk: Some(os_disk()),
                data_disks: None,
            }),
            os_profile: Some(OsProfile {
                computer_name: Some("myVM".into()),
                admin_username: Some("{your-username}".into()),
                custom_data: None,
                linux_configuration: Some(LinuxConfiguration {
                    disable_password_authentication: Some(true),
                    ssh: Some(SshConfiguration {
                        public_keys: vec![SshPublicKey {
                            path: "/home/{your-username}/.ssh/authorized_keys".into(),
                            key_data: key,
                        }],
                    }),
                    provision_vm_agent: None,
                }),
            }),
            network_profile: Some(NetworkProfile {
                network_interfaces: vec![nic_ref(NIC)],
            }),
            ..VirtualMachineProperties::default()
        }),
        ..VirtualMachine::default()
    };
    assert_eq!(serde_json::to_value(&vm).expect("serialises"), expected);
}

#[test]
fn vm_with_empty_data_disks_matches_the_spec_example_minus_the_password() {
    // The example is a Windows VM with adminPassword, which dsinfra deliberately cannot
    // express; everything else must match.
    let mut expected = request_body(
        &format!("{DIR}virtualMachineExamples/VirtualMachine_Create_WithEmptyDataDisks.json"),
        "parameters",
    );
    let removed = expected["properties"]["osProfile"]
        .as_object_mut()
        .and_then(|o| o.remove("adminPassword"));
    assert!(
        removed.is_some(),
        "the example should carry a password to remove"
    );
    let empty = |lun| DataDisk {
        lun,
        name: None,
        caching: None,
        create_option: DiskCreateOptionType::Empty,
        disk_size_gb: Some(1023),
        managed_disk: None,
        delete_option: None,
        to_be_detached: None,
        disk_iops_read_write: None,
        disk_mbps_read_write: None,
    };
    let vm = VirtualMachine {
        location: "westus".into(),
        properties: Some(VirtualMachineProperties {
            hardware_profile: Some(HardwareProfile {
                vm_size: "Standard_D2_v2".into(),
            }),
            storage_profile: Some(StorageProfile {
                image_reference: Some(image(
                    "MicrosoftWindowsServer",
                    "WindowsServer",
                    "2016-Datacenter",
                )),
                os_disk: Some(os_disk()),
                data_disks: Some(vec![empty(0), empty(1)]),
            }),
            os_profile: Some(OsProfile {
                computer_name: Some("myVM".into()),
                admin_username: Some("{your-username}".into()),
                ..OsProfile::default()
            }),
            network_profile: Some(NetworkProfile {
                network_interfaces: vec![nic_ref(NIC)],
            }),
            ..VirtualMachineProperties::default()
        }),
        ..VirtualMachine::default()
    };
    assert_eq!(serde_json::to_value(&vm).expect("serialises"), expected);
}

#[test]
fn custom_data_is_sent_but_never_printed() {
    let profile = OsProfile {
        custom_data: Some(Secret::new("I2Nsb3VkLWNvbmZpZw==")),
        ..OsProfile::default()
    };
    assert_eq!(
        serde_json::to_value(&profile).expect("serialises"),
        json!({"customData": "I2Nsb3VkLWNvbmZpZw=="})
    );
    assert!(!format!("{profile:?}").contains("I2Nsb3Vk"));
}

#[test]
fn attach_and_placement_shapes() {
    let disk = DataDisk::attach(
        2,
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d",
    );
    assert_eq!(
        serde_json::to_value(&disk).expect("serialises"),
        json!({"lun": 2, "createOption": "Attach", "deleteOption": "Detach",
               "managedDisk": {"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d"}})
    );
    let props = VirtualMachineProperties {
        proximity_placement_group: Some(SubResource::new("/ppg")),
        provisioning_state: Some("Creating".into()),
        vm_id: Some("guid".into()),
        ..VirtualMachineProperties::default()
    };
    assert_eq!(
        serde_json::to_value(&props).expect("serialises"),
        json!({"proximityPlacementGroup": {"id": "/ppg"}})
    );
}

#[test]
fn instance_view_example_gives_power_and_provisioning_state() {
    let view: VirtualMachineInstanceView = serde_json::from_value(response_body(
        &format!("{DIR}virtualMachineExamples/VirtualMachine_Get_InstanceView.json"),
        "200",
    ))
    .expect("the example instance view reads");
    assert_eq!(view.power_state(), Some(PowerState::Running));
    assert_eq!(view.provisioning_state(), Some("succeeded"));
}

#[test]
fn power_state_mapping() {
    let cases = [
        ("PowerState/starting", Some(PowerState::Starting)),
        ("PowerState/running", Some(PowerState::Running)),
        ("PowerState/stopping", Some(PowerState::Stopping)),
        ("PowerState/stopped", Some(PowerState::Stopped)),
        ("PowerState/deallocating", Some(PowerState::Deallocating)),
        ("PowerState/deallocated", Some(PowerState::Deallocated)),
        ("powerstate/Running", Some(PowerState::Running)),
        (
            "PowerState/hibernated",
            Some(PowerState::Other("hibernated".into())),
        ),
        ("ProvisioningState/succeeded", None),
        ("garbage", None),
    ];
    for (code, expected) in cases {
        assert_eq!(PowerState::from_code(code), expected, "{code}");
    }
    assert!(PowerState::Stopped.is_billed());
    assert!(!PowerState::Deallocated.is_billed());
    assert!(VmAction::Deallocate.is_idempotent() && !VmAction::Restart.is_idempotent());
    assert_eq!(VmAction::PowerOff.path(), "powerOff");
}

/// Regression: `provisionVMAgent` went out as `provisionVmAgent` (serde's camelCase), which
/// the spec does not declare and ARM ignores; found by tests/client_emulator/.
#[test]
fn provision_vm_agent_is_spelled_as_the_spec_spells_it() {
    let linux = LinuxConfiguration {
        provision_vm_agent: Some(false),
        ..LinuxConfiguration::default()
    };
    assert_eq!(
        serde_json::to_value(&linux).expect("serialises"),
        json!({"provisionVMAgent": false})
    );
    let back: LinuxConfiguration =
        serde_json::from_value(json!({"provisionVMAgent": true})).expect("reads");
    assert_eq!(back.provision_vm_agent, Some(true));
}
