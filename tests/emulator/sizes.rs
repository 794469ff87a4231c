//! Microsoft.Compute sizes as Resource SKUs states them: each size only in the locations that
//! offer it, its capabilities under ARM's names, usages per offered family, and the VM PUTs Azure
//! refuses because of the size: not offered in the location, retired, a Premium disk on a size
//! without premium IO, accelerated networking on a size without it.

use chrono::NaiveDate;
use dsinfra::emulator::VmSizeSpec;

use super::*;

fn day(text: &str) -> NaiveDate {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("a date")
}

fn sized(sizes: Vec<VmSizeSpec>) -> EmulatorConfig {
    EmulatorConfig {
        vm_sizes: sizes,
        ..fast()
    }
}

fn skus_path(location: &str) -> String {
    format!(
        "/subscriptions/{SUB}/providers/Microsoft.Compute/skus?$filter=location eq '{location}'"
    )
}

fn names(list: &Value) -> Vec<String> {
    list["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str().map(str::to_owned))
        .collect()
}

fn capability(sku: &Value, name: &str) -> Option<String> {
    sku["capabilities"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
        .and_then(|c| c["value"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn a_size_is_listed_and_accepted_only_where_it_is_offered() {
    let env = env(sized(vec![
        VmSizeSpec::new("Standard_D4s_v5", 4, "standardDSv5Family"),
        VmSizeSpec::new("Standard_ND96isr_H200_v5", 96, "standardNDSH200v5Family")
            .in_locations(&["eastus2", "westus3"]),
    ]))
    .await;
    env.network("rg").await;

    let eastus = env.get(&skus_path("eastus"), "2021-07-01").await;
    assert_eq!(names(&eastus.body), ["Standard_D4s_v5"]);
    let eastus2 = env.get(&skus_path("eastus2"), "2021-07-01").await;
    assert_eq!(
        names(&eastus2.body),
        ["Standard_D4s_v5", "Standard_ND96isr_H200_v5"]
    );
    let all = env
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Compute/skus"),
            "2021-07-01",
        )
        .await;
    let h200_locations: Vec<&str> = all.body["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["name"] == "Standard_ND96isr_H200_v5")
        .filter_map(|s| s["locations"][0].as_str())
        .collect();
    assert_eq!(h200_locations, ["eastus2", "westus3"]);

    let sizes = |location: &str| {
        format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/{location}/vmSizes")
    };
    assert_eq!(
        names(&env.get(&sizes("eastus"), COMPUTE).await.body),
        ["Standard_D4s_v5"]
    );
    let usages = |location: &str| {
        format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/{location}/usages")
    };
    let counters = |body: &Value| -> Vec<String> {
        body["value"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| u["name"]["value"].as_str().map(str::to_owned))
            .collect()
    };
    let in_eastus = counters(&env.get(&usages("eastus"), COMPUTE).await.body);
    assert!(
        !in_eastus.iter().any(|c| c == "standardNDSH200v5Family"),
        "{in_eastus:?}"
    );
    let in_eastus2 = counters(&env.get(&usages("eastus2"), COMPUTE).await.body);
    assert!(
        in_eastus2.iter().any(|c| c == "standardNDSH200v5Family"),
        "{in_eastus2:?}"
    );

    let refused = env.vm("rg", "gpu", "Standard_ND96isr_H200_v5").await;
    assert_eq!((refused.status, refused.code()), (400, "InvalidParameter"));
    assert_eq!(refused.body["error"]["target"], "vmSize");
    assert_eq!(
        refused.message(),
        "The requested VM size Standard_ND96isr_H200_v5 is not available in the current region. \
         The sizes available in the current region are: Standard_D4s_v5."
    );
    let unknown = env.vm("rg", "vm", "Standard_Nope").await;
    assert_eq!(
        unknown.message(),
        "The value Standard_Nope provided for the VM size is not valid. The valid sizes in the \
         current region are: Standard_D4s_v5."
    );
    assert_eq!(env.vm("rg", "vm", "Standard_D4s_v5").await.status, 201);
}

#[tokio::test]
async fn skus_state_capabilities_with_arm_names_and_formats() {
    let mut nc = VmSizeSpec::new("Standard_NC24ads_A100_v4", 24, "StandardNCADSA100v4Family")
        .with_memory(220 * 1024, Some(64 * 1024));
    nc.gpus = Some(1.0);
    nc.generations = vec![2];
    nc.rdma = Some(false);
    nc.accelerated_networking = Some(true);
    nc.premium_io = Some(true);
    let mut hb = VmSizeSpec::new("Standard_HB176-144rs_v4", 176, "standardHBv4Family");
    hb.vcpus_available = Some(144);
    hb.rdma = Some(true);
    let env = env(sized(vec![nc, hb])).await;
    let skus = env.get(&skus_path("eastus"), "2021-07-01").await;
    let sku = |name: &str| {
        skus.body["value"]
            .as_array()
            .and_then(|v| v.iter().find(|s| s["name"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    let a100 = sku("Standard_NC24ads_A100_v4");
    for (name, value) in [
        ("vCPUs", "24"),
        ("vCPUsAvailable", "24"),
        ("MemoryGB", "220"),
        ("MaxResourceVolumeMB", "65536"),
        ("GPUs", "1"),
        ("HyperVGenerations", "V2"),
        ("RdmaEnabled", "False"),
        ("AcceleratedNetworkingEnabled", "True"),
        ("PremiumIO", "True"),
    ] {
        assert_eq!(capability(&a100, name).as_deref(), Some(value), "{name}");
    }
    assert_eq!(capability(&a100, "RetirementDateUtc"), None);
    let hb = sku("Standard_HB176-144rs_v4");
    assert_eq!(capability(&hb, "vCPUsAvailable").as_deref(), Some("144"));
    assert_eq!(capability(&hb, "RdmaEnabled").as_deref(), Some("True"));
    // What the size's spec does not state, the answer leaves out, as ARM does.
    for unknown in [
        "GPUs",
        "MemoryGB",
        "PremiumIO",
        "HyperVGenerations",
        "AcceleratedNetworkingEnabled",
    ] {
        assert_eq!(capability(&hb, unknown), None, "{unknown}");
    }
}

#[tokio::test]
async fn a_retired_size_is_refused_as_not_available_and_a_retiring_one_is_not() {
    let mut retired = VmSizeSpec::new("Standard_NC6s_v3", 6, "standardNCSv3Family");
    retired.retirement_date = Some(day("2025-09-30"));
    let mut retiring = VmSizeSpec::new("Standard_D4s_v5", 4, "standardDSv5Family");
    retiring.retirement_date = Some(day("2099-03-31"));
    let env = env(sized(vec![retired, retiring])).await;
    env.network("rg").await;

    let refused = env.vm("rg", "gpu", "Standard_NC6s_v3").await;
    assert_eq!((refused.status, refused.code()), (409, "SkuNotAvailable"));
    assert_eq!(
        refused.message(),
        format!(
            "The requested size for resource '{}' is currently not available in location \
             'eastus' zones '' for subscription '{SUB}'. Please try another size or deploy to a \
             different location or zones. See https://aka.ms/azureskunotavailable for details.",
            res("rg", "Microsoft.Compute/virtualMachines/gpu")
        )
    );

    let skus = env.get(&skus_path("eastus"), "2021-07-01").await;
    let sku = |name: &str| {
        skus.body["value"]
            .as_array()
            .and_then(|v| v.iter().find(|s| s["name"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    let nc = sku("Standard_NC6s_v3");
    assert_eq!(
        capability(&nc, "RetirementDateUtc").as_deref(),
        Some("09/30/2025")
    );
    assert_eq!(
        nc["restrictions"],
        json!([{"type": "Location", "values": ["eastus"],
                "restrictionInfo": {"locations": ["eastus"]},
                "reasonCode": "NotAvailableForSubscription"}])
    );
    let d4 = sku("Standard_D4s_v5");
    assert_eq!(
        capability(&d4, "RetirementDateUtc").as_deref(),
        Some("03/31/2099")
    );
    assert_eq!(d4["restrictions"], json!([]));
    let sizes = env
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/vmSizes"),
            COMPUTE,
        )
        .await;
    assert_eq!(names(&sizes.body), ["Standard_D4s_v5"]);

    // A size announced to retire later is still created; resizing to a retired one is refused.
    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm");
    let created = env
        .create(&vm, COMPUTE, &vm_body("rg", "Standard_D4s_v5"))
        .await;
    assert_eq!(created.status, 201);
    let dealloc = env.post(&format!("{vm}/deallocate"), COMPUTE).await;
    env.poll_location(dealloc.header("location").expect("Location"))
        .await;
    let resized = env
        .put(&vm, COMPUTE, &vm_body("rg", "Standard_NC6s_v3"))
        .await;
    assert_eq!((resized.status, resized.code()), (409, "SkuNotAvailable"));
}

fn premium_sizes() -> EmulatorConfig {
    let mut without = VmSizeSpec::new("Standard_D2_v2", 2, "standardDv2Family");
    without.premium_io = Some(false);
    let mut with = VmSizeSpec::new("Standard_DS2_v2", 2, "standardDSv2Family");
    with.premium_io = Some(true);
    sized(vec![without, with])
}

fn with_os_disk(size: &str, storage_account_type: &str) -> Value {
    let mut body = vm_body("rg", size);
    body["properties"]["storageProfile"]["osDisk"]["name"] = json!("vm-os");
    body["properties"]["storageProfile"]["osDisk"]["managedDisk"]["storageAccountType"] =
        json!(storage_account_type);
    body
}

#[tokio::test]
async fn a_premium_disk_is_refused_on_a_size_without_premium_io() {
    let env = env(premium_sizes()).await;
    env.network("rg").await;
    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm");

    // At create, the OS disk.
    let refused = env
        .put(&vm, COMPUTE, &with_os_disk("Standard_D2_v2", "Premium_LRS"))
        .await;
    assert_eq!((refused.status, refused.code()), (400, "InvalidParameter"));
    assert_eq!(
        refused.message(),
        "Requested operation cannot be performed because the VM size Standard_D2_v2 does not \
         support the storage account type Premium_LRS of disk 'vm-os'. Consider updating the VM \
         to a size that supports Premium storage."
    );
    assert_eq!(
        refused.body["error"]["target"],
        "osDisk.managedDisk.storageAccountType"
    );
    assert_eq!(env.get(&vm, COMPUTE).await.status, 404, "nothing was made");

    // A disk the request does not type is one the size can attach.
    let mut untyped = with_os_disk("Standard_D2_v2", "StandardSSD_LRS");
    untyped["properties"]["storageProfile"]["dataDisks"] =
        json!([{"lun": 0, "name": "scratch", "createOption": "Empty", "diskSizeGB": 64}]);
    let created = env.create(&vm, COMPUTE, &untyped).await;
    assert_eq!(
        created.body["properties"]["storageProfile"]["dataDisks"][0]["managedDisk"]["storageAccountType"],
        "Standard_LRS"
    );

    // Attached later, by PATCH: refused, and the disk stays unattached.
    let disk = res("rg", "Microsoft.Compute/disks/fast");
    let made = env
        .put(
            &disk,
            "2025-01-02",
            &json!({"location": "eastus", "sku": {"name": "Premium_LRS"},
                    "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 128}}),
        )
        .await;
    env.poll_status(made.header("azure-asyncoperation").expect("async"))
        .await;
    let attach = json!({"properties": {"storageProfile": {"dataDisks": [
        {"lun": 0, "name": "scratch", "createOption": "Empty", "diskSizeGB": 64},
        {"lun": 1, "createOption": "Attach", "managedDisk": {"id": disk}}]}}});
    let patched = env.call("PATCH", &vm, COMPUTE, Some(&attach)).await;
    assert_eq!((patched.status, patched.code()), (400, "InvalidParameter"));
    assert_eq!(
        patched.body["error"]["target"],
        "dataDisk.managedDisk.storageAccountType"
    );
    assert!(
        patched.message().contains("of disk 'fast'"),
        "{}",
        patched.message()
    );
    assert!(
        env.get(&disk, "2025-01-02")
            .await
            .body
            .get("managedBy")
            .is_none(),
        "the refused attach left the disk alone"
    );
}

#[tokio::test]
async fn a_resize_to_a_size_without_premium_io_is_refused_while_premium_disks_stay() {
    let env = env(premium_sizes()).await;
    env.network("rg").await;
    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm");
    env.create(
        &vm,
        COMPUTE,
        &with_os_disk("Standard_DS2_v2", "Premium_LRS"),
    )
    .await;
    let dealloc = env.post(&format!("{vm}/deallocate"), COMPUTE).await;
    env.poll_location(dealloc.header("location").expect("Location"))
        .await;
    let resized = env
        .put(&vm, COMPUTE, &with_os_disk("Standard_D2_v2", "Premium_LRS"))
        .await;
    assert_eq!((resized.status, resized.code()), (400, "InvalidParameter"));
    assert!(
        resized.message().starts_with(
            "Requested operation cannot be performed because the VM size Standard_D2_v2"
        ),
        "{}",
        resized.message()
    );
}

#[tokio::test]
async fn accelerated_networking_is_refused_on_a_size_without_it() {
    let mut d1 = VmSizeSpec::new("Standard_D1_v2", 1, "standardDv2Family");
    d1.accelerated_networking = Some(false);
    let mut d2 = VmSizeSpec::new("Standard_D2_v2", 2, "standardDv2Family");
    d2.accelerated_networking = Some(true);
    let unknown = VmSizeSpec::new("Standard_D3_v2", 4, "standardDv2Family");
    let env = env(sized(vec![d1, d2, unknown])).await;
    env.network("rg").await;
    env.create(
        &res("rg", "Microsoft.Network/networkInterfaces/nic"),
        NET,
        &json!({"location": "eastus", "properties": {"enableAcceleratedNetworking": true,
            "ipConfigurations": [{"name": "ipconfig1", "properties": {
                "subnet": {"id": res("rg", "Microsoft.Network/virtualNetworks/vnet/subnets/default")}}}]}}),
    )
    .await;

    let refused = env.vm("rg", "vm", "Standard_D1_v2").await;
    assert_eq!(
        (refused.status, refused.code()),
        (400, "VMSizeIsNotPermittedToEnableAcceleratedNetworking")
    );
    assert_eq!(
        refused.message(),
        format!(
            "Virtual Machine size Standard_D1_v2 is not in the allowed list of VM sizes for \
             accelerated networking to be enabled on Network Interface {}. Allowed sizes: \
             Standard_D2_v2, Standard_D3_v2.",
            res("rg", "Microsoft.Compute/virtualMachines/vm")
        )
    );
    // A size that supports it, or one whose support is not known, is accepted.
    assert_eq!(env.vm("rg", "vm", "Standard_D2_v2").await.status, 201);
    let resized = env.vm("rg", "vm", "Standard_D3_v2").await;
    assert_eq!(resized.status, 200, "{:?}", resized.body);
    // Resizing to a size without it is refused like a create.
    let back = env.vm("rg", "vm", "Standard_D1_v2").await;
    assert_eq!(
        back.code(),
        "VMSizeIsNotPermittedToEnableAcceleratedNetworking"
    );
}

#[tokio::test]
async fn usages_name_families_spelt_with_spaces_as_arm_does() {
    let env = env(sized(vec![VmSizeSpec::new(
        "Standard_NC4as_T4_v3",
        4,
        "Standard NCASv3_T4 Family",
    )]))
    .await;
    let usages = env
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/usages"),
            COMPUTE,
        )
        .await;
    let family = usages.body["value"]
        .as_array()
        .and_then(|v| {
            v.iter()
                .find(|u| u["name"]["value"] == "Standard NCASv3_T4 Family")
                .cloned()
        })
        .expect("the family is listed");
    assert_eq!(
        family["name"]["localizedValue"],
        "Standard NCASv3_T4 Family vCPUs"
    );
}
