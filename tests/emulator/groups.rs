//! Resource groups: synchronous create and update, ARM's 404s, the long-running delete that
//! blocks writes and cascades.

use super::*;

#[tokio::test]
async fn resource_group_create_update_get_and_missing() {
    let env = env(fast()).await;
    let path = rg_path("My-RG");
    let created = env
        .put(
            &path,
            RESOURCES,
            &json!({"location": "eastus", "tags": {"a": "b"}}),
        )
        .await;
    assert_eq!(created.status, 201);
    assert_eq!(
        created.body["id"],
        format!("/subscriptions/{SUB}/resourceGroups/My-RG")
    );
    assert_eq!(created.body["type"], "Microsoft.Resources/resourceGroups");
    assert_eq!(created.body["properties"]["provisioningState"], "Succeeded");
    let updated = env
        .put(&rg_path("my-rg"), RESOURCES, &json!({"location": "eastus"}))
        .await;
    assert_eq!(updated.status, 200);
    assert_eq!(
        updated.body["name"], "My-RG",
        "casing of the first PUT is kept"
    );
    let moved = env
        .put(&path, RESOURCES, &json!({"location": "westus2"}))
        .await;
    assert_eq!(
        (moved.status, moved.code()),
        (409, "InvalidResourceGroupLocation")
    );
    assert!(env.get(&rg_path("MY-RG"), RESOURCES).await.status == 200);
    let head = env.call("HEAD", &path, RESOURCES, None).await;
    assert_eq!(head.status, 204);
    let missing = env.get(&rg_path("nope"), RESOURCES).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.code(), "ResourceGroupNotFound");
    assert_eq!(
        missing.message(),
        "Resource group 'nope' could not be found."
    );
    let bad = env
        .put(&rg_path("bad."), RESOURCES, &json!({"location": "eastus"}))
        .await;
    assert_eq!((bad.status, bad.code()), (400, "InvalidResourceGroupName"));
    let list = env
        .get(&format!("/subscriptions/{SUB}/resourcegroups"), RESOURCES)
        .await;
    assert_eq!(list.body["value"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn missing_group_is_404_for_get_put_and_delete() {
    let env = env(fast()).await;
    let path = res("ghost", "Microsoft.Network/virtualNetworks/v");
    for resp in [
        env.get(&path, NET).await,
        env.put(&path, NET, &json!({"location": "eastus"})).await,
        env.delete(&path, NET).await,
    ] {
        assert_eq!(resp.status, 404);
        assert_eq!(resp.code(), "ResourceGroupNotFound");
        assert_eq!(resp.message(), "Resource group 'ghost' could not be found.");
    }
}

#[tokio::test]
async fn group_delete_is_long_running_blocks_writes_and_cascades() {
    let env = env(EmulatorConfig {
        latency_scale: 0.05,
        ..EmulatorConfig::default()
    })
    .await;
    env.network("rg").await;
    let account = res("rg", "Microsoft.Storage/storageAccounts/cascadeacct");
    let created = env
        .put(
            &account,
            STORAGE,
            &json!({"location": "eastus", "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"}),
        )
        .await;
    env.poll_location(created.header("location").expect("storage Location"))
        .await;
    let deleting = env.delete(&rg_path("rg"), RESOURCES).await;
    assert_eq!(deleting.status, 202);
    let location = deleting
        .header("location")
        .expect("group delete has Location")
        .to_owned();
    assert!(
        location.contains(&format!("/subscriptions/{SUB}/operationresults/")),
        "{location}"
    );
    assert!(deleting.header("retry-after").is_some());
    let group = env.get(&rg_path("rg"), RESOURCES).await;
    assert_eq!(group.body["properties"]["provisioningState"], "Deleting");
    let blocked = env
        .put(
            &res("rg", "Microsoft.Network/virtualNetworks/late"),
            NET,
            &json!({"location": "eastus"}),
        )
        .await;
    assert_eq!(blocked.status, 409);
    assert_eq!(blocked.code(), "ResourceGroupBeingDeleted");
    assert_eq!(
        blocked.message(),
        "The resource group 'rg' is in deprovisioning state and cannot perform this operation."
    );
    let again = env
        .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
        .await;
    assert_eq!(again.code(), "ResourceGroupBeingDeleted");
    let done = env.poll_location(&location).await;
    assert_eq!(done.status, 200);
    assert_eq!(env.get(&rg_path("rg"), RESOURCES).await.status, 404);
    // Everything inside went with it: a new group of the same name is empty, and the storage
    // account name is free again.
    env.group("rg").await;
    let vnet = env
        .get(&res("rg", "Microsoft.Network/virtualNetworks/vnet"), NET)
        .await;
    assert_eq!((vnet.status, vnet.code()), (404, "ResourceNotFound"));
    let retaken = env
        .put(
            &res("rg", "Microsoft.Storage/storageAccounts/cascadeacct"),
            STORAGE,
            &json!({"location": "eastus", "sku": {"name": "Standard_LRS"}}),
        )
        .await;
    assert_eq!(retaken.status, 202);
}
