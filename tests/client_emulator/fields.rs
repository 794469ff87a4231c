//! Every field the client can send, held to the spec without the emulator in between.

use dsinfra::azure::ResourceId;
use dsinfra::azure::types::compute::{
    CachingType, DataDisk, DiskCreateOptionType, DiskDeleteOption, DiskStorageAccountType,
    ManagedDiskParameters,
};
use dsinfra::azure::types::devtestlab::Schedule;
use dsinfra::azure::types::disk::Disk;
use dsinfra::azure::types::network::{
    NetworkSecurityGroup, NetworkSecurityGroupProperties, PublicIpAddress, SecurityRule,
    ServiceEndpoint, Subnet, SubnetProperties,
};
use dsinfra::azure::types::placement::{
    ProximityPlacementGroup, ProximityPlacementGroupProperties, ProximityPlacementGroupType,
};
use dsinfra::azure::types::resources::ResourceGroup;
use dsinfra::azure::types::storage::{
    BlobContainer, ContainerProperties, DefaultAction, EnabledProtocols, FileShare,
    FileShareProperties, NetworkRuleSet, PublicAccess, ShareAccessTier, StorageAccountCreate,
    StorageSkuName, VirtualNetworkRule,
};
use dsinfra::openapi::{Specs, significant};

use crate::harness::{LOCATION, SUB, group, nic_body, specs, tags, vm_body, vnet_body};

/// Validates `body` strictly as the request of `PUT id` at the client's api-version.
fn spec_violations(specs: &Specs, id: &ResourceId, body: &impl serde::Serialize) -> Vec<String> {
    let version = dsinfra::azure::api_version::api_version_for_path(id.as_str())
        .expect("the client knows an api-version for every path it builds");
    let op = specs
        .operation("PUT", id.as_str(), Some(version))
        .unwrap_or_else(|| panic!("no PUT in the specs for {id} at {version}"));
    let body = serde_json::to_value(body).expect("the body serialises");
    significant(&op.validate_request(Some(&body)), true)
        .iter()
        .map(|v| format!("{id}: {v}"))
        .collect()
}

#[test]
#[allow(clippy::too_many_lines)] // One body per resource type, every optional field set.
fn every_field_the_client_can_send_is_declared_by_the_spec() {
    use dsinfra::azure::types::compute::{
        BillingProfile, VirtualMachineEvictionPolicy, VirtualMachinePriority,
    };
    use dsinfra::azure::types::devtestlab::{
        DayDetails, EnableStatus, HourDetails, NotificationSettings, ScheduleProperties,
        WeekDetails,
    };
    use dsinfra::azure::types::disk::{CreationData, DiskCreateOption, DiskProperties, DiskSku};
    use dsinfra::azure::types::network::{
        IpAllocationMethod, IpVersion, PublicIpProperties, PublicIpSku, PublicIpSkuName,
        PublicIpSkuTier, SecurityRuleAccess, SecurityRuleDirection, SecurityRuleProperties,
        SecurityRuleProtocol,
    };
    use dsinfra::azure::types::placement::PlacementIntent;
    use dsinfra::azure::types::storage::{
        AccessTier, EnabledDisabled, MinimumTlsVersion, RootSquash, StorageAccountCreateProperties,
    };

    let Some(specs) = specs() else { return };
    let rg = "rg-max";
    let nsg = ResourceId::network_security_group(SUB, rg, "nsg");
    let subnet = ResourceId::subnet(SUB, rg, "vnet", "default");
    let pip = ResourceId::public_ip_address(SUB, rg, "pip");
    let nic = ResourceId::network_interface(SUB, rg, "nic");
    let ppg = ResourceId::proximity_placement_group(SUB, rg, "ppg");
    let disk = ResourceId::disk(SUB, rg, "data");
    let vm = ResourceId::virtual_machine(SUB, rg, "vm");
    let mut violations = Vec::new();

    let group_body = ResourceGroup {
        managed_by: Some("/subscriptions/x/resourceGroups/owner".into()),
        ..ResourceGroup::new(LOCATION, tags())
    };
    violations.extend(spec_violations(&specs, &group(rg), &group_body));

    let rule = SecurityRule {
        properties: SecurityRuleProperties {
            description: Some("every field".into()),
            protocol: SecurityRuleProtocol::Tcp,
            source_port_range: Some("*".into()),
            destination_port_range: None,
            destination_port_ranges: Some(vec!["22".into(), "8888-8890".into()]),
            source_address_prefix: None,
            source_address_prefixes: Some(vec!["203.0.113.0/24".into()]),
            destination_address_prefix: Some("*".into()),
            access: SecurityRuleAccess::Deny,
            priority: 4000,
            direction: SecurityRuleDirection::Outbound,
            provisioning_state: None,
        },
        ..SecurityRule::allow_inbound_tcp("max", 4000, "22", "*")
    };
    let nsg_body = NetworkSecurityGroup {
        location: Some(LOCATION.into()),
        tags: tags(),
        properties: Some(NetworkSecurityGroupProperties {
            security_rules: Some(vec![rule.clone()]),
            ..NetworkSecurityGroupProperties::default()
        }),
        ..NetworkSecurityGroup::default()
    };
    violations.extend(spec_violations(&specs, &nsg, &nsg_body));
    violations.extend(spec_violations(
        &specs,
        &nsg.child("securityRules", "max"),
        &rule,
    ));

    let mut vnet = vnet_body(Some(&nsg));
    if let Some(props) = vnet
        .properties
        .as_mut()
        .and_then(|p| p.subnets.as_mut())
        .and_then(|subnets| subnets[0].properties.as_mut())
    {
        props.default_outbound_access = Some(false);
    }
    violations.extend(spec_violations(
        &specs,
        &ResourceId::virtual_network(SUB, rg, "vnet"),
        &vnet,
    ));
    let subnet_body = Subnet {
        properties: Some(SubnetProperties {
            address_prefix: Some("10.10.2.0/24".into()),
            network_security_group: Some((&nsg).into()),
            default_outbound_access: Some(false),
            service_endpoints: Some(vec![ServiceEndpoint {
                service: Some("Microsoft.Storage".into()),
                locations: Some(vec![LOCATION.into()]),
                provisioning_state: None,
            }]),
            ..SubnetProperties::default()
        }),
        ..Subnet::default()
    };
    violations.extend(spec_violations(&specs, &subnet, &subnet_body));

    let pip_body = PublicIpAddress {
        location: Some(LOCATION.into()),
        tags: tags(),
        sku: Some(PublicIpSku {
            name: Some(PublicIpSkuName::Standard),
            tier: Some(PublicIpSkuTier::Regional),
        }),
        zones: Some(vec!["1".into(), "2".into(), "3".into()]),
        properties: Some(PublicIpProperties {
            public_ip_allocation_method: Some(IpAllocationMethod::Static),
            public_ip_address_version: Some(IpVersion::IPv4),
            idle_timeout_in_minutes: Some(10),
            ..PublicIpProperties::default()
        }),
        ..PublicIpAddress::default()
    };
    violations.extend(spec_violations(&specs, &pip, &pip_body));

    let mut nic_max = nic_body(&subnet, Some(&pip), Some(&nsg));
    if let Some(props) = nic_max.properties.as_mut() {
        props.enable_ip_forwarding = Some(false);
        props.disable_tcp_state_tracking = Some(false);
        if let Some(config) = props
            .ip_configurations
            .as_mut()
            .and_then(|c| c[0].properties.as_mut())
        {
            config.private_ip_address = Some("10.10.1.4".into());
            config.private_ip_allocation_method = Some(IpAllocationMethod::Static);
            config.private_ip_address_version = Some(IpVersion::IPv4);
            config.private_ip_address_prefix_length = Some(24);
        }
    }
    violations.extend(spec_violations(&specs, &nic, &nic_max));

    let ppg_body = ProximityPlacementGroup {
        location: LOCATION.into(),
        tags: tags(),
        zones: Some(vec!["1".into()]),
        properties: Some(ProximityPlacementGroupProperties {
            proximity_placement_group_type: Some(ProximityPlacementGroupType::Standard),
            intent: Some(PlacementIntent {
                vm_sizes: vec!["Standard_ND40rs_v2".into()],
            }),
            ..ProximityPlacementGroupProperties::default()
        }),
        ..ProximityPlacementGroup::default()
    };
    violations.extend(spec_violations(&specs, &ppg, &ppg_body));

    let disk_body = Disk {
        zones: Some(vec!["1".into()]),
        sku: Some(DiskSku {
            name: Some(DiskStorageAccountType::UltraSsdLrs),
            tier: None,
        }),
        properties: Some(DiskProperties {
            creation_data: CreationData {
                create_option: DiskCreateOption::Copy,
                source_resource_id: Some(disk.as_str().into()),
                source_unique_id: None,
            },
            disk_size_gb: Some(1024),
            os_type: None,
            disk_iops_read_write: Some(8000),
            disk_mbps_read_write: Some(500),
            tier: Some("P30".into()),
            disk_state: None,
            disk_size_bytes: None,
            unique_id: None,
            time_created: None,
            provisioning_state: None,
        }),
        ..Disk::empty(
            LOCATION,
            1,
            DiskStorageAccountType::PremiumLrs,
            None,
            tags(),
        )
    };
    violations.extend(spec_violations(&specs, &disk, &disk_body));

    let mut vm_max = vm_body("Standard_ND40rs_v2", &nic, Some(&ppg), Some(&disk));
    vm_max.zones = Some(vec!["1".into()]);
    if let Some(props) = vm_max.properties.as_mut() {
        props.priority = Some(VirtualMachinePriority::Spot);
        props.eviction_policy = Some(VirtualMachineEvictionPolicy::Deallocate);
        props.billing_profile = Some(BillingProfile { max_price: -1.0 });
        if let Some(storage) = props.storage_profile.as_mut() {
            if let Some(os) = storage.os_disk.as_mut() {
                os.os_type = Some(dsinfra::azure::types::compute::OperatingSystemType::Linux);
                os.name = Some("vm-os".into());
            }
            if let Some(data) = storage.data_disks.as_mut() {
                data[0].name = Some("data".into());
                data[0].caching = Some(CachingType::ReadOnly);
                data[0].to_be_detached = Some(false);
                data.push(DataDisk {
                    lun: 1,
                    name: Some("scratch".into()),
                    caching: Some(CachingType::None),
                    create_option: DiskCreateOptionType::Empty,
                    disk_size_gb: Some(512),
                    managed_disk: Some(ManagedDiskParameters {
                        id: None,
                        storage_account_type: Some(DiskStorageAccountType::PremiumLrs),
                    }),
                    delete_option: Some(DiskDeleteOption::Delete),
                    to_be_detached: None,
                    disk_iops_read_write: None,
                    disk_mbps_read_write: None,
                });
            }
        }
    }
    violations.extend(spec_violations(&specs, &vm, &vm_max));

    let account = ResourceId::storage_account(SUB, rg, "dsinframax");
    let account_body = StorageAccountCreate {
        properties: Some(StorageAccountCreateProperties {
            minimum_tls_version: Some(MinimumTlsVersion::Tls12),
            allow_blob_public_access: Some(false),
            allow_shared_key_access: Some(true),
            supports_https_traffic_only: Some(true),
            is_hns_enabled: Some(true),
            is_nfs_v3_enabled: Some(false),
            access_tier: Some(AccessTier::Hot),
            large_file_shares_state: Some(EnabledDisabled::Enabled),
            public_network_access: Some("Enabled".into()),
            default_to_oauth_authentication: Some(false),
            network_acls: Some(NetworkRuleSet {
                default_action: DefaultAction::Deny,
                bypass: Some("AzureServices".into()),
                virtual_network_rules: vec![VirtualNetworkRule {
                    id: subnet.to_string(),
                    action: Some("Allow".into()),
                    state: None,
                }],
            }),
        }),
        ..StorageAccountCreate::secure_v2(LOCATION, StorageSkuName::StandardLrs, tags())
    };
    violations.extend(spec_violations(&specs, &account, &account_body));
    let container_body = BlobContainer {
        properties: Some(ContainerProperties {
            public_access: Some(PublicAccess::None),
            metadata: tags(),
            ..ContainerProperties::default()
        }),
        ..BlobContainer::default()
    };
    violations.extend(spec_violations(
        &specs,
        &ResourceId::blob_container(SUB, rg, "dsinframax", "c"),
        &container_body,
    ));
    let share_body = FileShare {
        properties: Some(FileShareProperties {
            share_quota: Some(5120),
            enabled_protocols: Some(EnabledProtocols::Nfs),
            access_tier: Some(ShareAccessTier::Premium),
            root_squash: Some(RootSquash::NoRootSquash),
            metadata: tags(),
            ..FileShareProperties::default()
        }),
        ..FileShare::default()
    };
    violations.extend(spec_violations(
        &specs,
        &ResourceId::file_share(SUB, rg, "dsinframax", "s"),
        &share_body,
    ));

    let schedule_body = Schedule {
        properties: ScheduleProperties {
            status: Some(EnableStatus::Enabled),
            task_type: Some("ComputeVmShutdownTask".into()),
            weekly_recurrence: Some(WeekDetails {
                weekdays: Some(vec!["Monday".into()]),
                time: Some("1900".into()),
            }),
            daily_recurrence: Some(DayDetails {
                time: Some("1900".into()),
            }),
            hourly_recurrence: Some(HourDetails { minute: Some(30) }),
            time_zone_id: Some("UTC".into()),
            notification_settings: Some(NotificationSettings {
                status: Some(EnableStatus::Enabled),
                time_in_minutes: Some(15),
                webhook_url: Some("https://example.invalid/hook".into()),
                email_recipient: Some("ops@example.invalid".into()),
                notification_locale: Some("en".into()),
            }),
            target_resource_id: Some(vm.as_str().into()),
            ..ScheduleProperties::default()
        },
        ..Schedule::vm_auto_shutdown(LOCATION, vm.as_str(), "1900", "UTC", tags())
    };
    violations.extend(spec_violations(
        &specs,
        &ResourceId::auto_shutdown_schedule(SUB, rg, "vm"),
        &schedule_body,
    ));

    assert!(
        violations.is_empty(),
        "client bodies the spec does not accept:\n  {}",
        violations.join("\n  ")
    );
}

/// The update bodies (`VirtualMachineUpdate`, `DiskUpdate`) with every field set, held to the
/// spec's PATCH operations.
#[test]
fn every_field_of_the_update_bodies_is_declared_by_the_spec() {
    use dsinfra::azure::types::compute::{
        StorageProfile, VirtualMachineUpdate, VirtualMachineUpdateProperties,
    };
    use dsinfra::azure::types::disk::{DiskSku, DiskUpdate, DiskUpdateProperties};

    let Some(specs) = specs() else { return };
    let rg = "rg-max";
    let disk = ResourceId::disk(SUB, rg, "data");
    let vm = ResourceId::virtual_machine(SUB, rg, "vm");
    let patch_violations = |id: &ResourceId, body: serde_json::Value| -> Vec<String> {
        let version = dsinfra::azure::api_version::api_version_for_path(id.as_str())
            .expect("the client knows an api-version for every path it builds");
        let op = specs
            .operation("PATCH", id.as_str(), Some(version))
            .unwrap_or_else(|| panic!("no PATCH in the specs for {id} at {version}"));
        significant(&op.validate_request(Some(&body)), true)
            .iter()
            .map(|v| format!("{id}: {v}"))
            .collect()
    };
    let vm_update = VirtualMachineUpdate {
        tags: tags(),
        properties: Some(VirtualMachineUpdateProperties {
            storage_profile: Some(StorageProfile {
                data_disks: Some(vec![DataDisk::attach(0, disk.as_str())]),
                ..StorageProfile::default()
            }),
        }),
    };
    let disk_update = DiskUpdate {
        tags: tags(),
        sku: Some(DiskSku {
            name: Some(DiskStorageAccountType::PremiumLrs),
            tier: None,
        }),
        properties: Some(DiskUpdateProperties {
            disk_size_gb: Some(1024),
        }),
    };
    let mut violations =
        patch_violations(&vm, serde_json::to_value(&vm_update).expect("serialises"));
    violations.extend(patch_violations(
        &disk,
        serde_json::to_value(&disk_update).expect("serialises"),
    ));
    assert!(violations.is_empty(), "{violations:#?}");
}
