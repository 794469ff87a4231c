//! PATCH as ARM does it, per type: a VM's update is a long-running operation that attaches and
//! detaches disks, resizes within ARM's rules and refuses fixed properties; a disk grows (never
//! shrinks) and changes type only where Azure converts in place; a storage account's settings change and its kind and SKU convert only as ARM
//! allows; an availability set keeps its domain counts; the network types change only tags.
//! Every change is checked by a GET afterwards.

use super::*;

const DISKS: &str = "2025-01-02";

impl Env {
    async fn patch(&self, path: &str, version: &str, body: &Value) -> Resp {
        self.call("PATCH", path, version, Some(body)).await
    }

    /// An empty managed disk, created and finished.
    async fn disk(&self, rg: &str, name: &str, size_gb: i64) -> String {
        let path = res(rg, &format!("Microsoft.Compute/disks/{name}"));
        let created = self
            .put(
                &path,
                DISKS,
                &json!({"location": "eastus", "sku": {"name": "Premium_LRS"},
                    "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": size_gb}}),
            )
            .await;
        assert_eq!(created.status, 202, "{created:?}");
        self.poll_status(created.header("azure-asyncoperation").expect("async"))
            .await;
        path
    }

    /// A running VM named `name` on its own NIC in the group's network (made by `network`).
    async fn running_vm(&self, rg: &str, name: &str, size: &str) -> String {
        let nic = res(
            rg,
            &format!("Microsoft.Network/networkInterfaces/{name}-nic"),
        );
        self.create(
            &nic,
            NET,
            &json!({"location": "eastus", "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {
                "subnet": {"id": res(rg, "Microsoft.Network/virtualNetworks/vnet/subnets/default")}}}]}}),
        )
        .await;
        let mut body = vm_body(rg, size);
        body["properties"]["networkProfile"]["networkInterfaces"][0]["id"] = json!(nic);
        let path = res(rg, &format!("Microsoft.Compute/virtualMachines/{name}"));
        self.create(&path, COMPUTE, &body).await;
        path
    }

    /// PATCHes and waits for the Azure-AsyncOperation the answer names.
    async fn patch_and_wait(&self, path: &str, version: &str, body: &Value) -> Resp {
        let resp = self.patch(path, version, body).await;
        assert_eq!(resp.status, 200, "PATCH {path}: {resp:?}");
        let url = resp
            .header("azure-asyncoperation")
            .expect("a long-running PATCH names its operation");
        assert_eq!(self.poll_status(url).await["status"], "Succeeded");
        resp
    }
}

fn attach(lun: i64, disk: &str) -> Value {
    json!({"lun": lun, "createOption": "Attach", "managedDisk": {"id": disk}})
}

fn data_disks(vm: &Value) -> Vec<(i64, String)> {
    vm["properties"]["storageProfile"]["dataDisks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            (
                d["lun"].as_i64().unwrap_or(-1),
                d["managedDisk"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn vm_patch_attaches_and_detaches_disks_as_a_long_running_operation() {
    let env = env(EmulatorConfig {
        latency_scale: 0.005,
        ..EmulatorConfig::default()
    })
    .await;
    env.network("rg").await;
    let disk = env.disk("rg", "data1", 64).await;
    let vm = env.running_vm("rg", "vm", "Standard_D4s_v5").await;

    let patched = env
        .patch(
            &vm,
            COMPUTE,
            &json!({"tags": {"team": "ml"},
                "properties": {"storageProfile": {"dataDisks": [attach(0, &disk)]}}}),
        )
        .await;
    assert_eq!(patched.status, 200, "{patched:?}");
    assert_eq!(patched.body["properties"]["provisioningState"], "Updating");
    let url = patched
        .header("azure-asyncoperation")
        .expect("VM PATCH is long-running, like the PUT")
        .to_owned();
    assert!(url.contains("/providers/Microsoft.Compute/locations/eastus/operations/"));
    assert_eq!(env.poll_status(&url).await["status"], "Succeeded");

    let after = env.get(&vm, COMPUTE).await;
    assert_eq!(after.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(data_disks(&after.body), vec![(0, disk.clone())]);
    assert_eq!(after.body["tags"], json!({"team": "ml"}));
    // What the PATCH left out is kept: the OS profile, the NIC, the size.
    assert_eq!(
        after.body["properties"]["osProfile"]["adminUsername"],
        "azureuser"
    );
    assert_eq!(
        after.body["properties"]["hardwareProfile"]["vmSize"],
        "Standard_D4s_v5"
    );
    let attached = env.get(&disk, DISKS).await;
    assert_eq!(attached.body["managedBy"], vm);
    assert_eq!(attached.body["properties"]["diskState"], "Attached");

    // Arrays replace: an empty list detaches; tags replace as a set.
    env.patch_and_wait(
        &vm,
        COMPUTE,
        &json!({"tags": {"stage": "2"}, "properties": {"storageProfile": {"dataDisks": []}}}),
    )
    .await;
    let after = env.get(&vm, COMPUTE).await;
    assert_eq!(data_disks(&after.body), vec![]);
    assert_eq!(after.body["tags"], json!({"stage": "2"}));
    let detached = env.get(&disk, DISKS).await;
    assert!(detached.body.get("managedBy").is_none());
    assert_eq!(detached.body["properties"]["diskState"], "Unattached");
}

#[tokio::test]
async fn vm_patch_refuses_a_disk_another_vm_owns_and_a_lun_used_twice() {
    let env = env(fast()).await;
    env.network("rg").await;
    let disk = env.disk("rg", "data1", 64).await;
    let other = env.disk("rg", "data2", 64).await;
    let first = env.running_vm("rg", "a", "Standard_D2s_v5").await;
    let second = env.running_vm("rg", "b", "Standard_D2s_v5").await;
    env.patch_and_wait(
        &first,
        COMPUTE,
        &json!({"properties": {"storageProfile": {"dataDisks": [attach(0, &disk)]}}}),
    )
    .await;

    let taken = env
        .patch(
            &second,
            COMPUTE,
            &json!({"properties": {"storageProfile": {"dataDisks": [attach(0, &disk)]}}}),
        )
        .await;
    assert_eq!((taken.status, taken.code()), (409, "OperationNotAllowed"));
    assert_eq!(
        taken.message(),
        format!("Disk 'data1' cannot be attached as the disk is already owned by VM '{first}'.")
    );

    let twice = env
        .patch(
            &first,
            COMPUTE,
            &json!({"properties": {"storageProfile": {"dataDisks": [attach(0, &disk), attach(0, &other)]}}}),
        )
        .await;
    assert_eq!((twice.status, twice.code()), (400, "InvalidParameter"));
    assert_eq!(twice.message(), "A disk at LUN 0 already exists.");
    // Refused requests change nothing.
    assert_eq!(
        data_disks(&env.get(&first, COMPUTE).await.body),
        vec![(0, disk)]
    );
    assert!(env.get(&other, DISKS).await.body.get("managedBy").is_none());
}

#[tokio::test]
async fn vm_patch_resizes_within_the_cluster_while_running_and_freely_when_deallocated() {
    let env = env(fast()).await;
    env.network("rg").await;
    let vm = env.running_vm("rg", "vm", "Standard_D2s_v5").await;
    let size = |s: &str| json!({"properties": {"hardwareProfile": {"vmSize": s}}});

    // Same family (the emulator's hardware cluster): a running VM resizes.
    env.patch_and_wait(&vm, COMPUTE, &size("Standard_D4s_v5"))
        .await;
    let after = env.get(&vm, COMPUTE).await;
    assert_eq!(
        after.body["properties"]["hardwareProfile"]["vmSize"],
        "Standard_D4s_v5"
    );

    let refused = env.patch(&vm, COMPUTE, &size("Standard_D2_v2")).await;
    assert_eq!(
        (refused.status, refused.code()),
        (409, "OperationNotAllowed")
    );
    assert_eq!(
        refused.message(),
        "Unable to resize the VM 'vm' because the requested size Standard_D2_v2 is not available \
         in the current hardware cluster. The available sizes in this cluster are: \
         Standard_D2s_v5,Standard_D4s_v5. Read more on VM resizing strategy at \
         https://aka.ms/azure-resizevm."
    );

    // Issue 29 item 12b: the VM's own size list (VirtualMachines_ListAvailableSizes, which the
    // JavaScript SDK's resize helpers call) says the same as the refusal: the cluster's sizes
    // while it runs, every size of its location once deallocated.
    let names = |resp: &Resp| -> Vec<String> {
        resp.body["value"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["name"].as_str().map(str::to_owned))
            .collect()
    };
    let sizes_path = format!("{vm}/vmSizes");
    let running = env.get(&sizes_path, COMPUTE).await;
    assert_eq!(running.status, 200, "{running:?}");
    super::providers::conforms("GET", &sizes_path, COMPUTE, &running);
    assert_eq!(names(&running), ["Standard_D2s_v5", "Standard_D4s_v5"]);

    let deallocate = env.post(&format!("{vm}/deallocate"), COMPUTE).await;
    env.poll_location(deallocate.header("location").expect("Location"))
        .await;
    let parked = env.get(&sizes_path, COMPUTE).await;
    let everywhere = env
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/vmSizes"),
            COMPUTE,
        )
        .await;
    assert_eq!(parked.body, everywhere.body);
    assert!(names(&parked).contains(&"Standard_D2_v2".to_owned()));
    env.patch_and_wait(&vm, COMPUTE, &size("Standard_D2_v2"))
        .await;
    let after = env.get(&vm, COMPUTE).await;
    assert_eq!(
        after.body["properties"]["hardwareProfile"]["vmSize"],
        "Standard_D2_v2"
    );
}

#[tokio::test]
async fn vm_patch_refuses_fixed_properties_with_property_change_not_allowed() {
    let env = env(fast()).await;
    env.network("rg").await;
    let set = res("rg", "Microsoft.Compute/availabilitySets/set");
    let made = env
        .put(
            &set,
            COMPUTE,
            &json!({"location": "eastus", "sku": {"name": "Aligned"}}),
        )
        .await;
    assert_eq!(made.status, 200);
    let ppg = res("rg", "Microsoft.Compute/proximityPlacementGroups/ppg");
    let made = env.put(&ppg, COMPUTE, &json!({"location": "eastus"})).await;
    assert_eq!(made.status, 201);
    let vm = env.running_vm("rg", "vm", "Standard_D2s_v5").await;

    for (body, property) in [
        (
            json!({"properties": {"availabilitySet": {"id": set}}}),
            "availabilitySet.id",
        ),
        (
            json!({"properties": {"proximityPlacementGroup": {"id": ppg}}}),
            "proximityPlacementGroup.id",
        ),
        (
            json!({"properties": {"storageProfile": {"osDisk": {"name": "another"}}}}),
            "osDisk.name",
        ),
        (
            json!({"properties": {"osProfile": {"customData": "b3RoZXI="}}}),
            "customData",
        ),
    ] {
        let refused = env.patch(&vm, COMPUTE, &body).await;
        assert_eq!(
            (refused.status, refused.code(), refused.message()),
            (
                409,
                "PropertyChangeNotAllowed",
                format!("Changing property '{property}' is not allowed.").as_str()
            ),
            "{body}"
        );
    }
    // Deallocated, the VM may move into a placement group.
    let deallocate = env.post(&format!("{vm}/deallocate"), COMPUTE).await;
    env.poll_location(deallocate.header("location").expect("Location"))
        .await;
    env.patch_and_wait(
        &vm,
        COMPUTE,
        &json!({"properties": {"proximityPlacementGroup": {"id": ppg}}}),
    )
    .await;
    let after = env.get(&vm, COMPUTE).await;
    assert_eq!(
        after.body["properties"]["proximityPlacementGroup"]["id"],
        ppg
    );
}

#[tokio::test]
async fn disk_patch_grows_changes_sku_and_tags_and_never_shrinks() {
    let env = env(fast()).await;
    env.group("rg").await;
    let disk = env.disk("rg", "data1", 64).await;
    let grown = env
        .patch(
            &disk,
            DISKS,
            &json!({"properties": {"diskSizeGB": 128}, "sku": {"name": "StandardSSD_LRS"},
                "tags": {"k": "v"}}),
        )
        .await;
    assert_eq!(grown.status, 200, "{grown:?}");
    let url = grown
        .header("azure-asyncoperation")
        .expect("disk PATCH is long-running");
    assert_eq!(env.poll_status(url).await["status"], "Succeeded");
    // Issue 29 item 12a: a client that takes the final state from the Location URL (the
    // JavaScript SDK for a PATCH) reads the resource there, as ARM returns it, not an empty 200.
    let location = grown
        .header("location")
        .expect("a disk PATCH names its result URL too");
    let result = env.poll_location(location).await;
    assert_eq!(result.status, 200, "{result:?}");
    assert_eq!(result.body["properties"]["diskSizeGB"], 128, "{result:?}");
    assert_eq!(
        result.body["id"].as_str().map(str::to_ascii_lowercase),
        Some(disk.to_ascii_lowercase())
    );
    let after = env.get(&disk, DISKS).await;
    assert_eq!(after.body["properties"]["diskSizeGB"], 128);
    assert_eq!(
        after.body["properties"]["diskSizeBytes"],
        128_i64 * 1024 * 1024 * 1024
    );
    assert_eq!(after.body["sku"]["name"], "StandardSSD_LRS");
    assert_eq!(after.body["tags"], json!({"k": "v"}));
    assert_eq!(
        after.body["properties"]["creationData"]["createOption"],
        "Empty"
    );

    let shrunk = env
        .patch(&disk, DISKS, &json!({"properties": {"diskSizeGB": 32}}))
        .await;
    assert_eq!((shrunk.status, shrunk.code()), (400, "BadRequest"));
    assert!(
        shrunk.message().starts_with(&format!(
            "The disk/snapshot resource with id {disk} cannot be resized down from 128 GB to 32 GB."
        )),
        "{}",
        shrunk.message()
    );
    assert_eq!(
        env.get(&disk, DISKS).await.body["properties"]["diskSizeGB"],
        128
    );
}

#[tokio::test]
async fn disk_patch_of_an_attached_disk_follows_the_running_vm_rules() {
    let env = env(fast()).await;
    env.network("rg").await;
    let disk = env.disk("rg", "data1", 64).await;
    let vm = env.running_vm("rg", "vm", "Standard_D2s_v5").await;
    env.patch_and_wait(
        &vm,
        COMPUTE,
        &json!({"properties": {"storageProfile": {"dataDisks": [attach(0, &disk)]}}}),
    )
    .await;
    // A data disk grows while its VM runs (expansion without downtime) up to 4 TiB.
    let grown = env
        .patch(&disk, DISKS, &json!({"properties": {"diskSizeGB": 256}}))
        .await;
    assert_eq!(grown.status, 200, "{grown:?}");
    assert_eq!(
        env.get(&vm, COMPUTE).await.body["properties"]["storageProfile"]["dataDisks"][0]["diskSizeGB"],
        256,
        "the VM shows its disk's new size"
    );
    let past_limit = env
        .patch(&disk, DISKS, &json!({"properties": {"diskSizeGB": 8192}}))
        .await;
    assert_eq!(
        (past_limit.status, past_limit.code()),
        (409, "OperationNotAllowed")
    );
    let sku = env
        .patch(&disk, DISKS, &json!({"sku": {"name": "Standard_LRS"}}))
        .await;
    assert_eq!((sku.status, sku.code()), (409, "OperationNotAllowed"));
    // A PUT of the existing disk is an update too, held to the same rules.
    let mut put_back = env.get(&disk, DISKS).await.body;
    put_back["sku"] = json!({"name": "Standard_LRS"});
    let put = env.put(&disk, DISKS, &put_back).await;
    assert_eq!((put.status, put.code()), (409, "OperationNotAllowed"));
    assert_eq!(
        env.get(&disk, DISKS).await.body["sku"]["name"],
        "Premium_LRS"
    );
    // The OS disk keeps its size while the VM runs.
    let os_disk = env.get(&vm, COMPUTE).await.body["properties"]["storageProfile"]["osDisk"]
        ["managedDisk"]["id"]
        .as_str()
        .expect("OS disk id")
        .to_owned();
    let os = env
        .patch(&os_disk, DISKS, &json!({"properties": {"diskSizeGB": 64}}))
        .await;
    assert_eq!((os.status, os.code()), (409, "OperationNotAllowed"));
    assert_eq!(
        os.message(),
        format!(
            "Changes to the disk size of '{}' can be made only when the disk is unattached or \
             the managing virtual machine(s) are deallocated. The disk is attached to VM '{vm}'.",
            os_disk.rsplit('/').next().unwrap_or_default()
        )
    );
    let deallocate = env.post(&format!("{vm}/deallocate"), COMPUTE).await;
    env.poll_location(deallocate.header("location").expect("Location"))
        .await;
    let os = env
        .patch(&os_disk, DISKS, &json!({"properties": {"diskSizeGB": 64}}))
        .await;
    assert_eq!(os.status, 200, "{os:?}");
    assert_eq!(
        env.get(&os_disk, DISKS).await.body["properties"]["diskSizeGB"],
        64
    );
    // Once the VM is deallocated, the attached data disk changes type in place: same disk.
    let unique_id = env.get(&disk, DISKS).await.body["properties"]["uniqueId"].clone();
    let sku = env
        .patch(&disk, DISKS, &json!({"sku": {"name": "Standard_LRS"}}))
        .await;
    assert_eq!(sku.status, 200, "{sku:?}");
    env.poll_status(sku.header("azure-asyncoperation").expect("async"))
        .await;
    let after = env.get(&disk, DISKS).await.body;
    assert_eq!(after["sku"]["name"], "Standard_LRS");
    assert_eq!(after["properties"]["uniqueId"], unique_id);
    // Still attached: the update kept the owner.
    assert_eq!(after["managedBy"], vm);
}

/// Azure converts a disk's type in place only among Standard HDD, Standard SSD and Premium SSD:
/// to or from Premium SSD v2 (or Ultra Disk) a new disk is made from a snapshot.
#[tokio::test]
async fn disk_patch_refuses_a_type_azure_cannot_convert_in_place() {
    let env = env(fast()).await;
    env.group("rg").await;
    let premium = env.disk("rg", "data1", 64).await;
    let to_v2 = env
        .patch(&premium, DISKS, &json!({"sku": {"name": "PremiumV2_LRS"}}))
        .await;
    assert_eq!((to_v2.status, to_v2.code()), (400, "OperationNotAllowed"));
    assert_eq!(
        to_v2.message(),
        "Changing a disk's account type from 'Premium_LRS' to 'PremiumV2_LRS' is not supported."
    );
    let v2 = res("rg", "Microsoft.Compute/disks/data2");
    let created = env
        .put(
            &v2,
            DISKS,
            &json!({"location": "eastus", "sku": {"name": "PremiumV2_LRS"}, "zones": ["1"],
                "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 64}}),
        )
        .await;
    assert_eq!(created.status, 202, "{created:?}");
    env.poll_status(created.header("azure-asyncoperation").expect("async"))
        .await;
    let from_v2 = env
        .patch(&v2, DISKS, &json!({"sku": {"name": "Premium_LRS"}}))
        .await;
    assert_eq!(
        (from_v2.status, from_v2.code()),
        (400, "OperationNotAllowed")
    );
    assert_eq!(
        env.get(&v2, DISKS).await.body["sku"]["name"],
        "PremiumV2_LRS"
    );
    assert_eq!(
        env.get(&premium, DISKS).await.body["sku"]["name"],
        "Premium_LRS"
    );
}

#[tokio::test]
async fn storage_account_patch_changes_settings_and_converts_only_as_arm_allows() {
    let env = env(fast()).await;
    env.group("rg").await;
    let account = res("rg", "Microsoft.Storage/storageAccounts/dsinfrapatch");
    let created = env
        .put(
            &account,
            STORAGE,
            &json!({"location": "eastus", "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"}),
        )
        .await;
    assert_eq!(created.status, 202);
    env.poll_location(created.header("location").expect("Location"))
        .await;

    let patched = env
        .patch(
            &account,
            STORAGE,
            &json!({"tags": {"k": "v"}, "sku": {"name": "Standard_GRS"}, "properties": {
                "minimumTlsVersion": "TLS1_2", "accessTier": "Cool",
                "allowBlobPublicAccess": false, "supportsHttpsTrafficOnly": true,
                "networkAcls": {"defaultAction": "Deny", "ipRules": [{"value": "203.0.113.7"}]}}}),
        )
        .await;
    assert_eq!(patched.status, 200, "{patched:?}");
    assert!(
        patched.header("location").is_none(),
        "a storage PATCH is synchronous"
    );
    let after = env.get(&account, STORAGE).await.body;
    assert_eq!(after["properties"]["minimumTlsVersion"], "TLS1_2");
    assert_eq!(after["properties"]["accessTier"], "Cool");
    assert_eq!(after["properties"]["networkAcls"]["defaultAction"], "Deny");
    assert_eq!(
        after["properties"]["networkAcls"]["ipRules"][0]["value"],
        "203.0.113.7"
    );
    // Defaults the PATCH left out are filled as on PUT.
    assert_eq!(
        after["properties"]["networkAcls"]["bypass"],
        "AzureServices"
    );
    assert_eq!(after["sku"]["name"], "Standard_GRS");
    assert_eq!(after["tags"], json!({"k": "v"}));
    assert_eq!(after["location"], "eastus");

    let premium = env
        .patch(&account, STORAGE, &json!({"sku": {"name": "Premium_LRS"}}))
        .await;
    assert_eq!(
        (premium.status, premium.code(), premium.message()),
        (
            400,
            "StorageAccountTypeConversionNotAllowed",
            "Storage account type cannot be changed to Premium_LRS."
        )
    );
    let kind = env
        .patch(&account, STORAGE, &json!({"kind": "Storage"}))
        .await;
    assert_eq!(
        (kind.status, kind.code(), kind.message()),
        (
            400,
            "InvalidValuesForRequestParameters",
            "Values for request parameters are invalid: kind."
        )
    );
    assert_eq!(env.get(&account, STORAGE).await.body["kind"], "StorageV2");
}

#[tokio::test]
async fn availability_set_patch_keeps_its_domain_counts() {
    let env = env(fast()).await;
    env.group("rg").await;
    let set = res("rg", "Microsoft.Compute/availabilitySets/set");
    env.put(
        &set,
        COMPUTE,
        &json!({"location": "eastus", "sku": {"name": "Aligned"}}),
    )
    .await;
    let tagged = env.patch(&set, COMPUTE, &json!({"tags": {"k": "v"}})).await;
    assert_eq!(tagged.status, 200);
    assert_eq!(tagged.body["properties"]["platformFaultDomainCount"], 2);
    let refused = env
        .patch(
            &set,
            COMPUTE,
            &json!({"properties": {"platformFaultDomainCount": 3}}),
        )
        .await;
    assert_eq!(
        (refused.status, refused.code(), refused.message()),
        (
            409,
            "PropertyChangeNotAllowed",
            "Changing property 'platformFaultDomainCount' is not allowed."
        )
    );
    let after = env.get(&set, COMPUTE).await.body;
    assert_eq!(after["tags"], json!({"k": "v"}));
    assert_eq!(after["properties"]["platformFaultDomainCount"], 2);
}

#[tokio::test]
async fn network_patch_is_tags_only_and_synchronous() {
    let env = env(fast()).await;
    env.network("rg").await;
    let vnet = res("rg", "Microsoft.Network/virtualNetworks/vnet");
    let before = env.get(&vnet, NET).await.body;
    let patched = env
        .patch(
            &vnet,
            NET,
            &json!({"tags": {"k": "v"}, "properties": {"addressSpace": {"addressPrefixes": ["10.9.0.0/16"]}}}),
        )
        .await;
    assert_eq!(patched.status, 200);
    assert!(patched.header("azure-asyncoperation").is_none());
    let after = env.get(&vnet, NET).await.body;
    assert_eq!(after["tags"], json!({"k": "v"}));
    assert_eq!(
        after["properties"]["addressSpace"],
        before["properties"]["addressSpace"]
    );
    assert_ne!(after["etag"], before["etag"], "a change gives a new etag");
}

#[tokio::test]
async fn vm_patch_during_its_delete_is_refused_naming_the_patch() {
    let env = env(EmulatorConfig {
        latency_scale: 0.01,
        ..EmulatorConfig::default()
    })
    .await;
    env.network("rg").await;
    let vm = env.running_vm("rg", "vm", "Standard_D2s_v5").await;
    let deleting = env.delete(&vm, COMPUTE).await;
    assert_eq!(deleting.status, 202);
    let refused = env.patch(&vm, COMPUTE, &json!({"tags": {"k": "v"}})).await;
    assert_eq!(
        (refused.status, refused.code(), refused.message()),
        (
            409,
            "OperationNotAllowed",
            "Operation 'PATCH' is not allowed on VM 'vm' since the VM is marked for deletion."
        )
    );
}
