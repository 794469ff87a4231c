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
