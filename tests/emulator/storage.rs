//! Microsoft.Storage and DevTestLab: the 202 + Location account create with global names,
//! synchronous containers, shares and schedules.

use super::*;

#[tokio::test]
async fn storage_account_create_is_202_location_with_names_checked_globally() {
    let env = env(EmulatorConfig {
        latency_scale: 0.02,
        ..EmulatorConfig::default()
    })
    .await;
    env.group("rg").await;
    env.group("other").await;
    let path = res("rg", "Microsoft.Storage/storageAccounts/dsdata01");
    let body = json!({"sku": {"name": "Standard_LRS"}, "kind": "StorageV2", "location": "eastus",
        "properties": {"minimumTlsVersion": "TLS1_2", "allowBlobPublicAccess": false}});
    let invalid = env
        .put(
            &res("rg", "Microsoft.Storage/storageAccounts/Bad_Name"),
            STORAGE,
            &body,
        )
        .await;
    assert_eq!(invalid.status, 400);
    assert_eq!(invalid.code(), "AccountNameInvalid");
    assert_eq!(
        invalid.message(),
        "Bad_Name is not a valid storage account name. Storage account name must be between 3 and 24 \
         characters in length and use numbers and lower-case letters only."
    );
    let accepted = env.put(&path, STORAGE, &body).await;
    assert_eq!(accepted.status, 202);
    assert_eq!(accepted.body, Value::Null, "the 202 has no body");
    let location = accepted.header("location").expect("Location").to_owned();
    assert!(
        location.contains("/providers/Microsoft.Storage/operations/")
            && location.contains("monitor=true"),
        "{location}"
    );
    assert!(
        accepted
            .header("retry-after")
            .is_some_and(|r| r.parse::<u64>().is_ok())
    );
    assert_eq!(
        env.get(&path, STORAGE).await.status,
        404,
        "old model: 404 until created"
    );
    let polled = env.send("GET", &location, None, Some(&env.token)).await;
    assert_eq!(polled.status, 202);
    let done = env.poll_location(&location).await;
    assert_eq!(done.status, 200);
    assert_eq!(done.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(
        done.body["properties"]["primaryEndpoints"]["blob"],
        "https://dsdata01.blob.core.windows.net/"
    );
    assert_eq!(done.body["sku"]["tier"], "Standard");
    assert_eq!(
        env.put(&path, STORAGE, &body).await.status,
        200,
        "existing account: 200"
    );
    for taken_path in [
        res("other", "Microsoft.Storage/storageAccounts/dsdata01"),
        "/subscriptions/another-sub/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/dsdata01"
            .to_owned(),
    ] {
        if taken_path.contains("another-sub") {
            let resp = env
                .put(
                    "/subscriptions/another-sub/resourceGroups/rg",
                    RESOURCES,
                    &json!({"location": "eastus"}),
                )
                .await;
            assert_eq!(resp.status, 201);
        }
        let taken = env.put(&taken_path, STORAGE, &body).await;
        assert_eq!(taken.status, 409);
        assert_eq!(taken.code(), "StorageAccountAlreadyTaken");
        assert_eq!(
            taken.message(),
            "The storage account named dsdata01 is already taken."
        );
    }
    let keys1 = env.post(&format!("{path}/listKeys"), STORAGE).await;
    assert_eq!(keys1.status, 200);
    assert_eq!(keys1.body["keys"][0]["keyName"], "key1");
    assert_eq!(keys1.body["keys"][1]["keyName"], "key2");
    let keys2 = env.post(&format!("{path}/listKeys"), STORAGE).await;
    assert_eq!(keys1.body, keys2.body, "keys are stable");
    assert_ne!(
        keys1.body["keys"][0]["value"],
        keys1.body["keys"][1]["value"]
    );
    assert_eq!(env.delete(&path, STORAGE).await.status, 200);
    assert_eq!(env.delete(&path, STORAGE).await.status, 204);
}

#[tokio::test]
async fn containers_shares_and_schedules_are_synchronous() {
    let env = env(fast()).await;
    env.network("rg").await;
    let account = res("rg", "Microsoft.Storage/storageAccounts/acct01");
    let accepted = env
        .put(
            &account,
            STORAGE,
            &json!({"sku": {"name": "Standard_LRS"}, "kind": "StorageV2", "location": "eastus"}),
        )
        .await;
    env.poll_location(accepted.header("location").expect("Location"))
        .await;
    for (child, kind) in [
        (
            format!("{account}/blobServices/default/containers/raw"),
            "Microsoft.Storage/storageAccounts/blobServices/containers",
        ),
        (
            format!("{account}/fileServices/default/shares/home"),
            "Microsoft.Storage/storageAccounts/fileServices/shares",
        ),
    ] {
        let created = env.put(&child, STORAGE, &json!({})).await;
        assert_eq!(created.status, 201);
        assert_eq!(created.body["type"], kind);
        assert_eq!(created.body["id"], child);
        assert_eq!(env.put(&child, STORAGE, &json!({})).await.status, 200);
        assert_eq!(env.get(&child, STORAGE).await.status, 200);
        assert_eq!(env.delete(&child, STORAGE).await.status, 200);
        assert_eq!(env.delete(&child, STORAGE).await.status, 204);
    }
    let orphan = env
        .put(
            &res(
                "rg",
                "Microsoft.Storage/storageAccounts/nosuch/blobServices/default/containers/c",
            ),
            STORAGE,
            &json!({}),
        )
        .await;
    assert_eq!(
        (orphan.status, orphan.code()),
        (404, "ParentResourceNotFound")
    );

    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm");
    env.create(&vm, COMPUTE, &vm_body("rg", "Standard_D4s_v5"))
        .await;
    let schedule = res("rg", "Microsoft.DevTestLab/schedules/shutdown-computevm-vm");
    let body = json!({"location": "eastus", "properties": {"status": "Enabled", "taskType": "ComputeVmShutdownTask",
        "dailyRecurrence": {"time": "1900"}, "timeZoneId": "UTC", "targetResourceId": vm,
        "notificationSettings": {"status": "Disabled", "timeInMinutes": 30}}});
    let created = env.put(&schedule, "2018-09-15", &body).await;
    assert_eq!(created.status, 201);
    assert_eq!(created.body["type"], "microsoft.devtestlab/schedules");
    assert_eq!(created.body["properties"]["provisioningState"], "Succeeded");
    assert!(
        created.body["properties"]["uniqueIdentifier"]
            .as_str()
            .is_some()
    );
    assert_eq!(env.put(&schedule, "2018-09-15", &body).await.status, 200);
    assert_eq!(
        env.get(&schedule, "2018-09-15").await.body["properties"]["dailyRecurrence"]["time"],
        "1900"
    );
    assert_eq!(env.delete(&schedule, "2018-09-15").await.status, 200);
    assert_eq!(env.delete(&schedule, "2018-09-15").await.status, 204);
}

/// Azure Files NFS needs an account firewall allowing the client's subnet; Azure refuses a VNet
/// rule for a subnet without the Microsoft.Storage service endpoint, and so does the emulator,
/// with ARM's code and message. An account created without rules reports ARM's defaults.
#[tokio::test]
async fn a_vnet_rule_needs_the_storage_service_endpoint_on_its_subnet() {
    let env = env(fast()).await;
    env.group("rg").await;
    let vnet = res("rg", "Microsoft.Network/virtualNetworks/vnet");
    let subnets = |endpoints: Value| {
        json!({"location": "eastus", "properties": {
            "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": "default", "properties": {
                "addressPrefix": "10.0.1.0/24", "serviceEndpoints": endpoints}}]}})
    };
    env.create(&vnet, NET, &subnets(json!([]))).await;
    let subnet = format!("{vnet}/subnets/default");
    let account = |rules: Value| {
        json!({"sku": {"name": "Premium_LRS"}, "kind": "FileStorage", "location": "eastus",
            "properties": {"supportsHttpsTrafficOnly": false, "networkAcls": rules}})
    };
    let deny = json!({"defaultAction": "Deny", "bypass": "None",
        "virtualNetworkRules": [{"id": subnet, "action": "Allow"}]});
    let path = res("rg", "Microsoft.Storage/storageAccounts/dsnfs01");
    let refused = env.put(&path, STORAGE, &account(deny.clone())).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.code(), "NetworkAclsValidationFailure");
    let vnet_id = subnet.trim_end_matches("/subnets/default");
    assert_eq!(
        refused.message(),
        format!(
            "Validation of network acls failure: SubnetsHaveNoServiceEndpointsConfigured:Subnets \
             default of virtual network {vnet_id} do not have ServiceEndpoints for \
             Microsoft.Storage resources configured. Add Microsoft.Storage to subnet's \
             ServiceEndpoints collection before trying to ACL Microsoft.Storage resources to \
             these subnets.."
        )
    );

    // With the endpoint on the subnet, the same account is created and keeps its rules.
    env.create(
        &vnet,
        NET,
        &subnets(json!([{"service": "Microsoft.Storage"}])),
    )
    .await;
    let got = env.get(&format!("{vnet}/subnets/default"), NET).await;
    assert_eq!(
        got.body["properties"]["serviceEndpoints"],
        json!([{"service": "Microsoft.Storage", "provisioningState": "Succeeded"}])
    );
    let accepted = env.put(&path, STORAGE, &account(deny)).await;
    assert_eq!(accepted.status, 202);
    let location = accepted.header("location").expect("Location").to_owned();
    let done = env.poll_location(&location).await;
    let acls = &done.body["properties"]["networkAcls"];
    assert_eq!(acls["defaultAction"], "Deny");
    assert_eq!(acls["bypass"], "None");
    assert_eq!(
        acls["virtualNetworkRules"],
        json!([{"id": subnet, "action": "Allow", "state": "Succeeded"}])
    );
    assert_eq!(done.body["properties"]["supportsHttpsTrafficOnly"], false);

    // An account without rules: ARM's defaults, open to every network (by key).
    let plain = res("rg", "Microsoft.Storage/storageAccounts/dsplain01");
    let accepted = env
        .put(
            &plain,
            STORAGE,
            &json!({"sku": {"name": "Standard_LRS"}, "kind": "StorageV2", "location": "eastus"}),
        )
        .await;
    let location = accepted.header("location").expect("Location").to_owned();
    let done = env.poll_location(&location).await;
    assert_eq!(
        done.body["properties"]["networkAcls"],
        json!({"bypass": "AzureServices", "virtualNetworkRules": [], "ipRules": [],
            "defaultAction": "Allow"})
    );
}
