//! One whole lifecycle through the typed operations, every exchange held to the specs.

use dsinfra::azure::types::compute::{
    DataDisk, DiskStorageAccountType, PowerState, StorageProfile, VirtualMachineUpdate,
    VirtualMachineUpdateProperties, VmAction,
};
use dsinfra::azure::types::devtestlab::Schedule;
use dsinfra::azure::types::disk::{Disk, DiskUpdate, DiskUpdateProperties};
use dsinfra::azure::types::network::{
    NetworkSecurityGroup, NetworkSecurityGroupProperties, PublicIpAddress, SecurityRule, Subnet,
    SubnetProperties,
};
use dsinfra::azure::types::placement::{
    ProximityPlacementGroup, ProximityPlacementGroupProperties, ProximityPlacementGroupType,
};
use dsinfra::azure::types::quota::{SkuAvailability, usage_for};
use dsinfra::azure::types::resources::ResourceGroup;
use dsinfra::azure::types::storage::{
    BlobContainer, ContainerProperties, EnabledProtocols, FileShare, FileShareProperties,
    PublicAccess, ShareAccessTier, StorageAccountCreate, StorageSkuName,
};
use dsinfra::azure::{DeleteOutcome, ResourceId};
use dsinfra::emulator::EmulatorConfig;

use crate::harness::{
    CUSTOM_DATA, LOCATION, SUB, assert_round_trip, env, group, nic_body, power_state, tags,
    vm_body, vnet_body,
};

#[tokio::test]
#[allow(clippy::too_many_lines)] // One lifecycle, read top to bottom, is the point of the test.
async fn a_full_lifecycle_through_the_typed_operations_conforms_to_the_specs() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    let client = &env.client;
    let rg = "rg-lifecycle";

    let group_sent = ResourceGroup::new(LOCATION, tags());
    let created = client
        .put_resource_group(&group(rg), &group_sent)
        .await
        .expect("group created");
    assert_round_trip("group", &group_sent, &created, &[]);
    assert_eq!(created.name.as_deref(), Some(rg));

    let nsg = ResourceId::network_security_group(SUB, rg, "nsg");
    let nsg_body = NetworkSecurityGroup {
        location: Some(LOCATION.into()),
        tags: tags(),
        properties: Some(NetworkSecurityGroupProperties {
            security_rules: Some(vec![
                SecurityRule::allow_inbound_tcp("ssh", 100, "22", "203.0.113.0/24"),
                SecurityRule::allow_inbound_tcp("jupyter", 110, "8888", "203.0.113.0/24"),
            ]),
            ..NetworkSecurityGroupProperties::default()
        }),
        ..NetworkSecurityGroup::default()
    };
    let nsg_read = client
        .put_network_security_group(&nsg, &nsg_body)
        .await
        .expect("nsg created");
    assert_round_trip("nsg", &nsg_body, &nsg_read, &[]);
    let rules = nsg_read
        .properties
        .and_then(|p| p.security_rules)
        .expect("the rules are read back");
    assert_eq!(
        rules
            .iter()
            .filter_map(|r| r.name.as_deref())
            .collect::<Vec<_>>(),
        ["ssh", "jupyter"]
    );

    let vnet = ResourceId::virtual_network(SUB, rg, "vnet");
    let vnet_sent = vnet_body(Some(&nsg));
    let vnet_read = client
        .put_virtual_network(&vnet, &vnet_sent)
        .await
        .expect("vnet created");
    assert_round_trip("vnet", &vnet_sent, &vnet_read, &[]);
    assert_eq!(
        vnet_read
            .properties
            .and_then(|p| p.provisioning_state)
            .as_deref(),
        Some("Succeeded")
    );
    let subnet = ResourceId::subnet(SUB, rg, "vnet", "default");
    let scratch_sent = Subnet {
        properties: Some(SubnetProperties {
            address_prefix: Some("10.10.2.0/24".into()),
            network_security_group: Some((&nsg).into()),
            default_outbound_access: Some(false),
            ..SubnetProperties::default()
        }),
        ..Subnet::default()
    };
    let scratch_read = client
        .put_subnet(
            &ResourceId::subnet(SUB, rg, "vnet", "scratch"),
            &scratch_sent,
        )
        .await
        .expect("second subnet created");
    assert_round_trip("subnet", &scratch_sent, &scratch_read, &[]);

    let pip = ResourceId::public_ip_address(SUB, rg, "pip");
    let pip_sent = PublicIpAddress::standard_static(LOCATION, tags());
    let pip_read = client
        .put_public_ip_address(&pip, &pip_sent)
        .await
        .expect("public ip created");
    assert_round_trip("public ip", &pip_sent, &pip_read, &[]);
    let address = pip_read
        .properties
        .and_then(|p| p.ip_address)
        .expect("a Standard static address is assigned at creation");
    assert!(address.parse::<std::net::Ipv4Addr>().is_ok(), "{address}");

    let nic = ResourceId::network_interface(SUB, rg, "nic");
    let nic_sent = nic_body(&subnet, Some(&pip), Some(&nsg));
    let nic_read = client
        .put_network_interface(&nic, &nic_sent)
        .await
        .expect("nic created");
    assert_round_trip("nic", &nic_sent, &nic_read, &[]);
    let nic_props = nic_read.properties.expect("nic properties");
    assert_eq!(nic_props.enable_accelerated_networking, Some(true));
    assert_eq!(
        nic_props
            .network_security_group
            .map(|s| s.id.to_lowercase()),
        Some(nsg.as_str().to_lowercase())
    );

    let ppg = ResourceId::proximity_placement_group(SUB, rg, "ppg");
    let ppg_sent = ProximityPlacementGroup {
        location: LOCATION.into(),
        tags: tags(),
        properties: Some(ProximityPlacementGroupProperties {
            proximity_placement_group_type: Some(ProximityPlacementGroupType::Standard),
            ..ProximityPlacementGroupProperties::default()
        }),
        ..ProximityPlacementGroup::default()
    };
    let ppg_read = client
        .put_proximity_placement_group(&ppg, &ppg_sent)
        .await
        .expect("ppg created");
    assert_round_trip("ppg", &ppg_sent, &ppg_read, &[]);

    let disk = ResourceId::disk(SUB, rg, "data");
    let disk_sent = Disk::empty(
        LOCATION,
        256,
        DiskStorageAccountType::PremiumLrs,
        None,
        tags(),
    );
    let disk_read = client
        .put_disk(&disk, &disk_sent)
        .await
        .expect("disk created");
    assert_round_trip("disk", &disk_sent, &disk_read, &[]);
    assert_eq!(disk_read.properties.and_then(|p| p.disk_size_gb), Some(256));

    let vm = ResourceId::virtual_machine(SUB, rg, "trainer");
    let vm_sent = vm_body("Standard_D4s_v5", &nic, Some(&ppg), Some(&disk));
    let vm_read = client
        .put_virtual_machine(&vm, &vm_sent)
        .await
        .expect("vm created");
    // customData is write-only in ARM: it is never returned.
    assert_round_trip(
        "vm",
        &vm_sent,
        &vm_read,
        &["$.properties.osProfile.customData"],
    );
    let vm_props = vm_read.properties.clone().expect("vm properties");
    assert_eq!(vm_props.provisioning_state.as_deref(), Some("Succeeded"));
    assert!(
        vm_props
            .os_profile
            .as_ref()
            .and_then(|o| o.custom_data.as_ref())
            .is_none(),
        "ARM never returns customData"
    );
    let attached = vm_props
        .storage_profile
        .and_then(|s| s.data_disks)
        .expect("the data disk is listed");
    assert_eq!(attached.len(), 1);
    assert!(
        !format!("{vm_read:?}").contains(CUSTOM_DATA),
        "customData must never print"
    );
    // The VM PUT went out once: the client polls the operation, it never re-sends the PUT.
    assert_eq!(env.statuses("PUT", &vm).len(), 1);

    let view = client
        .get_instance_view(&vm)
        .await
        .expect("instance view")
        .expect("the VM exists");
    assert_eq!(view.provisioning_state(), Some("succeeded"));
    assert_eq!(view.power_state(), Some(PowerState::Running));

    for (action, expected) in [
        (VmAction::Deallocate, PowerState::Deallocated),
        (VmAction::Start, PowerState::Running),
        (VmAction::PowerOff, PowerState::Stopped),
        (VmAction::Restart, PowerState::Running),
    ] {
        client
            .vm_action(&vm, action)
            .await
            .unwrap_or_else(|e| panic!("{action:?} failed: {e}"));
        assert_eq!(
            power_state(client, &vm).await,
            Some(expected.clone()),
            "after {action:?}"
        );
        let posted = env.statuses("POST", &vm.join(action.path()));
        assert_eq!(posted, [202], "{action:?} is accepted once and polled");
    }

    // Detach the data disk the way the client documents it (`toBeDetached` on the next PUT),
    // then attach it again by listing it. Regression: the emulator used to keep a disk marked
    // `toBeDetached: true` attached.
    let mut detaching = vm_sent.clone();
    if let Some(disks) = detaching
        .properties
        .as_mut()
        .and_then(|p| p.storage_profile.as_mut())
        .and_then(|s| s.data_disks.as_mut())
    {
        disks[0].to_be_detached = Some(true);
    }
    let detached = client
        .put_virtual_machine(&vm, &detaching)
        .await
        .expect("disk detached");
    assert_eq!(
        detached
            .properties
            .and_then(|p| p.storage_profile)
            .and_then(|s| s.data_disks)
            .map(|d| d.len()),
        Some(0),
        "a disk marked toBeDetached leaves the VM"
    );
    let disk_now = client
        .get::<Disk>(&disk)
        .await
        .expect("disk read")
        .expect("the disk outlives the detach");
    assert_eq!(disk_now.managed_by, None);
    assert_eq!(
        disk_now.properties.and_then(|p| p.disk_state).as_deref(),
        Some("Unattached")
    );
    let reattached = client
        .put_virtual_machine(&vm, &vm_sent)
        .await
        .expect("disk attached again");
    assert_round_trip(
        "vm",
        &vm_sent,
        &reattached,
        &["$.properties.osProfile.customData"],
    );
    let disk_now = client
        .get::<Disk>(&disk)
        .await
        .expect("disk read")
        .expect("the disk exists");
    assert!(
        disk_now
            .managed_by
            .is_some_and(|owner| owner.eq_ignore_ascii_case(vm.as_str())),
        "the VM owns the disk again"
    );

    // The same detach and attach by PATCH, as the engine sends them (only the data disks), and
    // a disk grow: each PATCH goes out once and its operation is polled like a PUT's.
    let data_disks = |disks: Vec<DataDisk>| VirtualMachineUpdate {
        tags: None,
        properties: Some(VirtualMachineUpdateProperties {
            storage_profile: Some(StorageProfile {
                data_disks: Some(disks),
                ..StorageProfile::default()
            }),
        }),
    };
    let detached = client
        .patch_virtual_machine(&vm, &data_disks(Vec::new()))
        .await
        .expect("disk detached by PATCH");
    let props = detached.properties.expect("vm properties");
    assert_eq!(props.provisioning_state.as_deref(), Some("Succeeded"));
    assert_eq!(
        props
            .storage_profile
            .and_then(|s| s.data_disks)
            .map(|d| d.len()),
        Some(0)
    );
    assert_eq!(env.statuses("PATCH", &vm), [200], "sent once, then polled");
    let grown = client
        .patch_disk(
            &disk,
            &DiskUpdate {
                properties: Some(DiskUpdateProperties {
                    disk_size_gb: Some(512),
                }),
                ..DiskUpdate::default()
            },
        )
        .await
        .expect("disk grown by PATCH");
    assert_eq!(grown.properties.and_then(|p| p.disk_size_gb), Some(512));
    let reattached = client
        .patch_virtual_machine(&vm, &data_disks(vec![DataDisk::attach(0, disk.as_str())]))
        .await
        .expect("disk attached by PATCH");
    assert_eq!(
        reattached
            .properties
            .and_then(|p| p.storage_profile)
            .and_then(|s| s.data_disks)
            .map(|d| d.len()),
        Some(1)
    );
    assert_eq!(env.statuses("PATCH", &vm), [200, 200]);

    // Usages count the running VM's cores against its family; the SKU list offers its size.
    let usages = client.compute_usages(SUB, LOCATION).await.expect("usages");
    let family = usage_for(&usages, "standardDSv5Family").expect("the VM's family is listed");
    assert_eq!(family.current_value, 4);
    let skus = client.compute_skus(SUB, LOCATION).await.expect("skus");
    // The client asks with `$filter=location eq 'eastus'`; only that location comes back.
    assert!(
        skus.iter()
            .all(|s| s.locations.iter().all(|l| l.eq_ignore_ascii_case(LOCATION))),
        "the location filter was not applied"
    );
    let size = skus
        .iter()
        .find(|s| s.name.as_deref() == Some("Standard_D4s_v5"))
        .expect("the VM's size is listed");
    assert!(
        matches!(
            size.availability(LOCATION),
            SkuAvailability::Available { .. }
        ),
        "{:?}",
        size.availability(LOCATION)
    );
    assert_eq!(size.capability("vCPUs"), Some("4"));

    let account_name = "dsinfralifecycle01";
    let account = ResourceId::storage_account(SUB, rg, account_name);
    let account_read = client
        .put_storage_account(
            &account,
            &StorageAccountCreate::secure_v2(LOCATION, StorageSkuName::StandardLrs, tags()),
        )
        .await
        .expect("storage account created");
    assert_eq!(
        account_read
            .properties
            .as_ref()
            .and_then(|p| p.provisioning_state.as_deref()),
        Some("Succeeded")
    );
    // Storage answers 202 + Location, which the client polls; the PUT is sent once.
    assert_eq!(env.statuses("PUT", &account), [202]);

    let keys = client.list_storage_keys(&account).await.expect("keys");
    let first_key = keys
        .key("key1")
        .expect("key1 is listed")
        .expose()
        .to_owned();
    assert!(!first_key.is_empty());
    let shown = format!("{keys:?}");
    assert!(
        !shown.contains(&first_key),
        "a storage key printed: {shown}"
    );
    assert!(shown.contains("<redacted>"));

    let container = ResourceId::blob_container(SUB, rg, account_name, "datasets");
    let container_sent = BlobContainer {
        properties: Some(ContainerProperties {
            public_access: Some(PublicAccess::None),
            metadata: tags(),
            ..ContainerProperties::default()
        }),
        ..BlobContainer::default()
    };
    let container_read = client
        .put_blob_container(&container, &container_sent)
        .await
        .expect("container created");
    assert_round_trip("container", &container_sent, &container_read, &[]);
    let share = ResourceId::file_share(SUB, rg, account_name, "scratch");
    let share_sent = FileShare {
        properties: Some(FileShareProperties {
            share_quota: Some(100),
            enabled_protocols: Some(EnabledProtocols::Smb),
            access_tier: Some(ShareAccessTier::Hot),
            ..FileShareProperties::default()
        }),
        ..FileShare::default()
    };
    let share_read = client
        .put_file_share(&share, &share_sent)
        .await
        .expect("share created");
    assert_round_trip("share", &share_sent, &share_read, &[]);
    assert_eq!(share_read.properties.and_then(|p| p.share_quota), Some(100));

    let schedule = ResourceId::auto_shutdown_schedule(SUB, rg, "trainer");
    let schedule_sent = Schedule::vm_auto_shutdown(LOCATION, vm.as_str(), "1900", "UTC", tags());
    let schedule_read = client
        .put_schedule(&schedule, &schedule_sent)
        .await
        .expect("schedule created");
    assert_round_trip("schedule", &schedule_sent, &schedule_read, &[]);
    assert_eq!(
        schedule_read.properties.task_type.as_deref(),
        Some("ComputeVmShutdownTask")
    );

    // Deletes in reverse order of creation, then the group.
    for id in [
        &schedule, &share, &container, &account, &vm, &disk, &ppg, &nic, &pip, &vnet, &nsg,
    ] {
        assert_eq!(
            client
                .delete(id)
                .await
                .unwrap_or_else(|e| panic!("{id}: {e}")),
            DeleteOutcome::Deleted,
            "{id}"
        );
        assert!(
            client
                .get::<serde_json::Value>(id)
                .await
                .unwrap_or_else(|e| panic!("{id}: {e}"))
                .is_none(),
            "{id} is gone"
        );
    }
    assert_eq!(
        client
            .delete_resource_group(&group(rg))
            .await
            .expect("group deleted"),
        DeleteOutcome::Deleted
    );
    assert!(
        client
            .get::<ResourceGroup>(&group(rg))
            .await
            .expect("group read")
            .is_none()
    );
    env.assert_conformant();
}
