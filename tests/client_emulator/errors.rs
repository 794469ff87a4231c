//! ARM's refusals as the client surfaces them: codes, messages and facts verbatim.

use dsinfra::azure::types::compute::VirtualMachine;
use dsinfra::azure::types::network::{NetworkInterface, NetworkSecurityGroup, VirtualNetwork};
use dsinfra::azure::types::quota::{RestrictionReason, SkuAvailability, usage_for};
use dsinfra::azure::types::resources::ResourceGroup;
use dsinfra::azure::{DeleteOutcome, ResourceId};
use dsinfra::emulator::{
    EmulatorConfig, FaultAction, FaultRule, QuotaConfig, QuotaLimit, SkuRestriction,
};

use crate::harness::{LOCATION, SUB, env, group, network, vm_body, vnet_body};

#[tokio::test]
async fn quota_exceeded_surfaces_operation_not_allowed_verbatim_with_its_facts() {
    let Some(env) = env(EmulatorConfig {
        quotas: QuotaConfig {
            limits: vec![QuotaLimit {
                location: LOCATION.into(),
                family: "standardNDSv2Family".into(),
                limit: 0,
            }],
            ..QuotaConfig::default()
        },
        ..EmulatorConfig::default()
    })
    .await
    else {
        return;
    };
    let nic = network(&env.client, "rg-quota").await;
    // The client can see the shortfall before asking, from the same numbers ARM enforces.
    let usages = env
        .client
        .compute_usages(SUB, LOCATION)
        .await
        .expect("usages");
    let nd = usage_for(&usages, "standardNDSv2Family").expect("the ND family is listed");
    assert_eq!((nd.limit, nd.current_value), (0, 0));

    let vm = ResourceId::virtual_machine(SUB, "rg-quota", "gpu");
    let err = env
        .client
        .put_virtual_machine(&vm, &vm_body("Standard_ND40rs_v2", &nic, None, None))
        .await
        .expect_err("no ND quota");
    assert_eq!(err.status(), Some(409));
    assert_eq!(err.code(), Some("OperationNotAllowed"));
    assert_eq!(
        err.message(),
        Some(
            "Operation could not be completed as it results in exceeding approved \
             standardNDSv2Family Cores quota. Additional details - Deployment Model: Resource \
             Manager, Location: eastus, Current Limit: 0, Current Usage: 0, Additional Required: \
             40, (Minimum) New Limit Required: 40."
        )
    );
    assert!(err.to_string().starts_with(
        "OperationNotAllowed: Operation could not be completed as it results in exceeding \
         approved standardNDSv2Family Cores quota."
    ));
    let request_id = err
        .request_id()
        .expect("ARM's request id is kept")
        .to_owned();
    assert!(
        err.to_string()
            .ends_with(&format!("(request id {request_id})"))
    );
    let facts = err.quota_facts().expect("the message carries quota facts");
    assert_eq!(facts.family, "standardNDSv2Family");
    assert_eq!(facts.location.as_deref(), Some("eastus"));
    assert_eq!(facts.current_limit, Some(0));
    assert_eq!(facts.current_usage, Some(0));
    assert_eq!(facts.additional_required, Some(40));
    assert_eq!(facts.new_limit_required, Some(40));
    // A quota refusal is final: no retry.
    assert_eq!(env.statuses("PUT", &vm), [409]);
    env.assert_conformant();
}

#[tokio::test]
async fn a_restricted_size_surfaces_sku_not_available_verbatim() {
    let Some(env) = env(EmulatorConfig {
        sku_restrictions: vec![
            SkuRestriction {
                size: "Standard_ND40rs_v2".into(),
                location: LOCATION.into(),
                zones: Vec::new(),
            },
            SkuRestriction {
                size: "Standard_NC24ads_A100_v4".into(),
                location: LOCATION.into(),
                zones: vec!["2".into()],
            },
        ],
        ..EmulatorConfig::default()
    })
    .await
    else {
        return;
    };
    let nic = network(&env.client, "rg-sku").await;
    let skus = env.client.compute_skus(SUB, LOCATION).await.expect("skus");
    let nd = skus
        .iter()
        .find(|s| s.name.as_deref() == Some("Standard_ND40rs_v2"))
        .expect("the size is listed");
    assert_eq!(
        nd.availability(LOCATION),
        SkuAvailability::Restricted {
            reason: Some(RestrictionReason::NotAvailableForSubscription)
        }
    );
    let a100 = skus
        .iter()
        .find(|s| s.name.as_deref() == Some("Standard_NC24ads_A100_v4"))
        .expect("the zonal size is listed");
    assert_eq!(
        a100.availability(LOCATION),
        SkuAvailability::Available {
            zones: vec!["1".into(), "3".into()]
        }
    );
    let vm = ResourceId::virtual_machine(SUB, "rg-sku", "gpu");
    let err = env
        .client
        .put_virtual_machine(&vm, &vm_body("Standard_ND40rs_v2", &nic, None, None))
        .await
        .expect_err("the size is restricted");
    assert_eq!(err.status(), Some(409));
    assert_eq!(err.code(), Some("SkuNotAvailable"));
    assert_eq!(
        err.message(),
        Some(
            "The requested VM size for resource 'Following SKUs have failed for Capacity \
             Restrictions: Standard_ND40rs_v2' is currently not available in location 'eastus'. \
             Please try another size or deploy to a different location or different zone. See \
             https://aka.ms/azureskunotavailable for details."
        )
    );
    assert_eq!(env.statuses("PUT", &vm), [409]);

    // A zonal restriction refuses the restricted zone only.
    let zonal = ResourceId::virtual_machine(SUB, "rg-sku", "a100");
    let body = VirtualMachine {
        zones: Some(vec!["2".into()]),
        ..vm_body("Standard_NC24ads_A100_v4", &nic, None, None)
    };
    let err = env
        .client
        .put_virtual_machine(&zonal, &body)
        .await
        .expect_err("zone 2 is restricted");
    assert_eq!(err.code(), Some("SkuNotAvailable"));
    env.assert_conformant();
}

const ALLOCATION_FAILED: &str = "Allocation failed. We do not have sufficient capacity for the \
     requested VM size in this region. Read more about improving likelihood of allocation success \
     at http://aka.ms/allocation-guidance";

#[tokio::test]
async fn allocation_failed_inside_the_operation_surfaces_code_and_message_verbatim() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    let nic = network(&env.client, "rg-alloc").await;
    env.handle.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: None,
        resource_type: Some("Microsoft.Compute/virtualMachines".into()),
        count: Some(1),
        action: FaultAction::FailOperation {
            status: 409,
            code: "AllocationFailed".into(),
            message: ALLOCATION_FAILED.into(),
        },
    });
    let vm = ResourceId::virtual_machine(SUB, "rg-alloc", "gpu");
    let err = env
        .client
        .put_virtual_machine(&vm, &vm_body("Standard_ND40rs_v2", &nic, None, None))
        .await
        .expect_err("the allocation fails");
    assert!(err.is_operation_failed(), "{err:?}");
    assert_eq!(err.code(), Some("AllocationFailed"));
    assert_eq!(err.message(), Some(ALLOCATION_FAILED));
    assert_eq!(
        err.to_string().split(" (request id").next(),
        Some(format!("AllocationFailed: {ALLOCATION_FAILED}").as_str())
    );
    // The PUT was accepted (201) and not re-sent; the failure came from the operation.
    assert_eq!(env.statuses("PUT", &vm), [201]);
    assert!(env.handle.faults().is_empty(), "the rule was consumed");
    env.assert_conformant();
}

#[tokio::test]
async fn a_put_into_a_missing_group_is_resource_group_not_found() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    let vnet = ResourceId::virtual_network(SUB, "rg-missing", "vnet");
    let err = env
        .client
        .put_virtual_network(&vnet, &vnet_body(None))
        .await
        .expect_err("the group does not exist");
    assert_eq!(err.status(), Some(404));
    assert!(err.is_resource_group_not_found());
    assert_eq!(
        err.message(),
        Some("Resource group 'rg-missing' could not be found.")
    );
    // A read inside the missing group is an error too, not "absent": the group is what is missing.
    let err = env
        .client
        .get::<VirtualNetwork>(&vnet)
        .await
        .expect_err("the group is missing");
    assert!(err.is_resource_group_not_found());
    // So is a DELETE: ARM answers 404 for the group before any provider sees the call.
    let err = env
        .client
        .delete(&vnet)
        .await
        .expect_err("the group is missing");
    assert!(err.is_resource_group_not_found(), "{err:?}");
    env.assert_conformant();
}

#[tokio::test]
async fn missing_resources_read_as_none_and_delete_as_already_absent() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    env.client
        .put_resource_group(&group("rg-absent"), &ResourceGroup::new(LOCATION, None))
        .await
        .expect("group created");
    let ids = [
        ResourceId::virtual_network(SUB, "rg-absent", "nope"),
        ResourceId::network_interface(SUB, "rg-absent", "nope"),
        ResourceId::virtual_machine(SUB, "rg-absent", "nope"),
        ResourceId::disk(SUB, "rg-absent", "nope"),
        ResourceId::storage_account(SUB, "rg-absent", "dsinfranope"),
    ];
    for id in &ids {
        let read = env
            .client
            .get::<serde_json::Value>(id)
            .await
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!(read.is_none(), "{id}");
        assert_eq!(env.statuses("GET", id), [404], "{id}");
        let deleted = env
            .client
            .delete(id)
            .await
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(deleted, DeleteOutcome::AlreadyAbsent, "{id}");
        assert_eq!(env.statuses("DELETE", id), [204], "{id}");
    }
    env.assert_conformant();
}

#[tokio::test]
async fn deleting_a_nic_attached_to_a_vm_is_nic_in_use() {
    let Some(env) = env(EmulatorConfig::default()).await else {
        return;
    };
    let nic = network(&env.client, "rg-inuse").await;
    let vm = ResourceId::virtual_machine(SUB, "rg-inuse", "trainer");
    env.client
        .put_virtual_machine(&vm, &vm_body("Standard_D2s_v5", &nic, None, None))
        .await
        .expect("vm created");
    let err = env
        .client
        .delete(&nic)
        .await
        .expect_err("the NIC is in use");
    assert_eq!(err.status(), Some(400));
    assert_eq!(err.code(), Some("NicInUse"));
    assert_eq!(
        err.message().map(str::to_owned),
        Some(format!(
            "Network Interface {nic} is used by existing resource {vm}. In order to delete the \
             network interface, it must be dissociated from the resource. To learn more, see \
             aka.ms/deletenic."
        ))
    );
    assert_eq!(env.statuses("DELETE", &nic), [400], "no retry of a 400");
    // While the group is being deleted, writes into it are refused.
    let deleting = {
        let client = env.client.clone();
        tokio::spawn(async move { client.delete_resource_group(&group("rg-inuse")).await })
    };
    while env.statuses("DELETE", &group("rg-inuse")).is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let nsg = ResourceId::network_security_group(SUB, "rg-inuse", "late");
    let err = env
        .client
        .put_network_security_group(
            &nsg,
            &NetworkSecurityGroup {
                location: Some(LOCATION.into()),
                ..NetworkSecurityGroup::default()
            },
        )
        .await
        .expect_err("the group is being deleted");
    assert_eq!(err.status(), Some(409));
    assert_eq!(err.code(), Some("ResourceGroupBeingDeleted"));
    assert_eq!(
        err.message(),
        Some(
            "The resource group 'rg-inuse' is in deprovisioning state and cannot perform this \
             operation."
        )
    );
    // The group delete cascades through the VM, the NIC and the VNet.
    assert_eq!(
        deleting
            .await
            .expect("the task completes")
            .expect("group deleted"),
        DeleteOutcome::Deleted
    );
    let err = env
        .client
        .get::<NetworkInterface>(&nic)
        .await
        .expect_err("the group is gone with everything in it");
    assert!(err.is_resource_group_not_found());
    env.assert_conformant();
}
