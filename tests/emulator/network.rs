//! Microsoft.Network: asynchronous PUTs with etags, default NSG rules, private IPs, and the
//! in-use rules of DELETEs.

use super::*;

#[tokio::test]
async fn network_put_is_async_with_etag_and_get_404_uses_arm_message() {
    let env = env(EmulatorConfig {
        latency_scale: 0.05,
        ..EmulatorConfig::default()
    })
    .await;
    env.group("rg").await;
    let path = res("rg", "Microsoft.Network/virtualNetworks/MyVNet");
    let body = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
        "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}});
    let created = env.put(&path, NET, &body).await;
    assert_eq!(created.status, 201);
    assert_eq!(created.body["properties"]["provisioningState"], "Updating");
    assert!(
        created.body["etag"]
            .as_str()
            .is_some_and(|e| e.starts_with("W/\""))
    );
    let async_url = created
        .header("azure-asyncoperation")
        .expect("Azure-AsyncOperation")
        .to_owned();
    assert!(
        async_url.contains("/providers/Microsoft.Network/locations/eastus/operations/"),
        "{async_url}"
    );
    assert!(created.header("retry-after").is_some());
    let first = env.send("GET", &async_url, None, Some(&env.token)).await;
    assert_eq!(
        (first.status, first.body["status"].as_str()),
        (200, Some("InProgress"))
    );
    assert_eq!(env.poll_status(&async_url).await["status"], "Succeeded");
    let got = env
        .get(&res("rg", "microsoft.network/virtualnetworks/myvnet"), NET)
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body["name"], "MyVNet");
    assert_eq!(got.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(
        got.body["properties"]["subnets"][0]["id"],
        format!(
            "{}/subnets/default",
            res("rg", "Microsoft.Network/virtualNetworks/MyVNet")
        )
    );
    assert_eq!(got.body["properties"]["virtualNetworkPeerings"], json!([]));
    let updated = env.put(&path, NET, &body).await;
    assert_eq!(updated.status, 200);
    let deleted = env.delete(&path, NET).await;
    assert_eq!(deleted.status, 202);
    assert!(
        deleted
            .header("location")
            .is_some_and(|l| l.contains("/operationResults/"))
    );
    assert_eq!(
        env.get(&path, NET).await.body["properties"]["provisioningState"],
        "Deleting"
    );
    let finished = env
        .poll_location(deleted.header("location").expect("Location"))
        .await;
    assert_eq!(finished.status, 200);
    let gone = env.get(&path, NET).await;
    assert_eq!(gone.status, 404);
    assert_eq!(gone.code(), "ResourceNotFound");
    assert_eq!(
        gone.message(),
        "The Resource 'Microsoft.Network/virtualNetworks/MyVNet' under resource group 'rg' was not \
         found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"
    );
    assert_eq!(
        env.delete(&path, NET).await.status,
        204,
        "DELETE of a missing resource"
    );
}

#[tokio::test]
async fn nsg_has_default_rules_and_cannot_be_deleted_in_use() {
    let env = env(fast()).await;
    env.group("rg").await;
    let nsg = res("rg", "Microsoft.Network/networkSecurityGroups/nsg");
    let created = env.create(&nsg, NET, &json!({"location": "eastus", "properties": {"securityRules": [{"name": "ssh", "properties": {
        "protocol": "Tcp", "sourcePortRange": "*", "destinationPortRange": "22", "sourceAddressPrefix": "*",
        "destinationAddressPrefix": "*", "access": "Allow", "priority": 100, "direction": "Inbound"}}]}})).await;
    assert_eq!(
        created.body["properties"]["defaultSecurityRules"]
            .as_array()
            .map(Vec::len),
        Some(6)
    );
    let got = env.get(&nsg, NET).await;
    assert_eq!(
        got.body["properties"]["securityRules"][0]["id"],
        format!("{nsg}/securityRules/ssh")
    );
    env.create(&res("rg", "Microsoft.Network/virtualNetworks/vnet"), NET, &json!({"location": "eastus", "properties": {
        "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
        "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24", "networkSecurityGroup": {"id": nsg}}}]}})).await;
    let refused = env.delete(&nsg, NET).await;
    assert_eq!(
        (refused.status, refused.code()),
        (400, "InUseNetworkSecurityGroupCannotBeDeleted")
    );
    assert!(
        refused.message().contains("/subnets/default"),
        "{}",
        refused.message()
    );
}

#[tokio::test]
async fn nic_gets_a_private_ip_and_in_use_resources_refuse_deletion() {
    let env = env(fast()).await;
    env.network("rg").await;
    let nic_path = res("rg", "Microsoft.Network/networkInterfaces/nic");
    let nic = env.get(&nic_path, NET).await;
    let ipc = &nic.body["properties"]["ipConfigurations"][0];
    assert_eq!(ipc["properties"]["privateIPAddress"], "10.0.0.4");
    assert_eq!(ipc["properties"]["privateIPAllocationMethod"], "Dynamic");
    assert_eq!(ipc["properties"]["primary"], true);
    let pip = env
        .get(&res("rg", "Microsoft.Network/publicIPAddresses/pip"), NET)
        .await;
    assert!(
        pip.body["properties"]["ipAddress"].as_str().is_some(),
        "Standard static IPs get an address"
    );
    assert_eq!(
        pip.body["properties"]["ipConfiguration"]["id"],
        format!("{nic_path}/ipConfigurations/ipconfig1")
    );

    let subnet = env
        .delete(
            &res(
                "rg",
                "Microsoft.Network/virtualNetworks/vnet/subnets/default",
            ),
            NET,
        )
        .await;
    assert_eq!(subnet.status, 400);
    assert_eq!(subnet.code(), "InUseSubnetCannotBeDeleted");
    assert_eq!(
        subnet.message(),
        format!(
            "Subnet default is in use by {nic_path}/ipConfigurations/ipconfig1 and cannot be deleted. \
             In order to delete the subnet, delete all the resources within the subnet. See \
             aka.ms/deletesubnet."
        )
    );
    let vnet = env
        .delete(&res("rg", "Microsoft.Network/virtualNetworks/vnet"), NET)
        .await;
    assert_eq!(vnet.code(), "InUseSubnetCannotBeDeleted");
    let pip_delete = env
        .delete(&res("rg", "Microsoft.Network/publicIPAddresses/pip"), NET)
        .await;
    assert_eq!(
        (pip_delete.status, pip_delete.code()),
        (400, "PublicIPAddressCannotBeDeleted")
    );
    assert!(
        pip_delete
            .message()
            .contains("can not be deleted since it is still allocated to resource")
    );

    let vm = env.vm("rg", "vm", "Standard_D4s_v5").await;
    assert_eq!(vm.status, 201);
    let in_use = env.delete(&nic_path, NET).await;
    assert_eq!(in_use.status, 400);
    assert_eq!(in_use.code(), "NicInUse");
    assert!(
        in_use.message().starts_with(&format!(
            "Network Interface {nic_path} is used by existing resource {}",
            res("rg", "Microsoft.Compute/virtualMachines/vm")
        )),
        "{}",
        in_use.message()
    );
    let missing_ref = env.put(&res("rg", "Microsoft.Network/networkInterfaces/nic2"), NET, &json!({"location": "eastus",
        "properties": {"ipConfigurations": [{"name": "c", "properties": {"subnet": {"id": res("rg", "Microsoft.Network/virtualNetworks/vnet/subnets/none")}}}]}})).await;
    assert_eq!(
        (missing_ref.status, missing_ref.code()),
        (400, "InvalidResourceReference")
    );
}

#[tokio::test]
async fn a_nic_in_a_subnet_with_no_address_left_is_refused_as_network_refuses_it() {
    let env = env(fast()).await;
    env.group("rg").await;
    // A /29 has 8 addresses; Azure keeps 5 (network, .1-.3, broadcast): 3 NICs fit.
    let vnet = env
        .create(
            &res("rg", "Microsoft.Network/virtualNetworks/small"),
            NET,
            &json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.1.0.0/16"]},
                "subnets": [{"name": "tiny", "properties": {"addressPrefix": "10.1.0.0/29"}}]}}),
        )
        .await;
    assert!(vnet.status < 300, "{:?}", vnet.body);
    let subnet = res("rg", "Microsoft.Network/virtualNetworks/small/subnets/tiny");
    let nic = |n: usize| {
        json!({"location": "eastus", "properties": {"ipConfigurations": [{"name": format!("c{n}"),
            "properties": {"subnet": {"id": subnet.clone()}}}]}})
    };
    let mut addresses = Vec::new();
    for n in 0..3 {
        let path = res("rg", &format!("Microsoft.Network/networkInterfaces/nic{n}"));
        let made = env.put(&path, NET, &nic(n)).await;
        assert!(made.status < 300, "NIC {n}: {:?}", made.body);
        addresses.push(
            made.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    assert_eq!(addresses, ["10.1.0.4", "10.1.0.5", "10.1.0.6"]);
    let full = env
        .put(
            &res("rg", "Microsoft.Network/networkInterfaces/nic3"),
            NET,
            &nic(3),
        )
        .await;
    assert_eq!((full.status, full.code()), (400, "SubnetIsFull"));
    assert_eq!(
        full.message(),
        "Subnet tiny with address prefix 10.1.0.0/29 does not have enough capacity for 1 IP addresses."
    );
}
