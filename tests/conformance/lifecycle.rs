//! A typical lifecycle, every request and response validated.

use super::*;

struct Checked<'a> {
    specs: &'a Specs,
    http: reqwest::Client,
    endpoint: String,
    validated: usize,
}

impl Checked<'_> {
    /// Sends a request the client would send; validates the request body and the response.
    async fn call(
        &mut self,
        method: &str,
        path: &str,
        version: &str,
        body: Option<&Value>,
    ) -> Answer {
        let op = self
            .specs
            .operation(method, path, Some(version))
            .unwrap_or_else(|| panic!("{method} {path} {version} is not in the specs"));
        let request_errors = op.validate_request(body);
        let request_errors = significant(&request_errors, true);
        assert!(
            request_errors.is_empty(),
            "request {method} {path}:{}",
            describe(&request_errors)
        );
        let answer = send(
            &self.http,
            &self.endpoint,
            method,
            &versioned(path, version),
            body,
        )
        .await;
        let violations = op.validate_response(answer.status, answer.body.as_ref());
        let strict = significant(&violations, true);
        assert!(
            strict.is_empty(),
            "response {} to {method} {path} ({}):{}\n{:?}",
            answer.status,
            op.operation_id(),
            describe(&strict),
            answer.body
        );
        self.validated += 1;
        answer
    }

    /// Polls until the resource's provisioningState is terminal, validating each GET.
    async fn settle(&mut self, path: &str, version: &str) -> Answer {
        for _ in 0..100 {
            let answer = self.call("GET", path, version, None).await;
            let state = answer
                .body
                .as_ref()
                .and_then(|b| b.pointer("/properties/provisioningState"))
                .and_then(Value::as_str)
                .unwrap_or("Succeeded")
                .to_owned();
            if answer.status != 200 || matches!(state.as_str(), "Succeeded" | "Failed") {
                return answer;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("{path} never settled");
    }

    async fn gone(&mut self, path: &str, version: &str) {
        for _ in 0..100 {
            if self.call("GET", path, version, None).await.status == 404 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("{path} never went away");
    }
}

// A lifecycle is one scenario, top to bottom, in the order dsinfra apply and destroy run it.
#[allow(clippy::too_many_lines)]
#[tokio::test]
async fn a_typical_lifecycle_validates_end_to_end() {
    let Some(specs) = specs() else { return };
    let handle = emulator::start(EmulatorConfig {
        latency_scale: 0.001,
        ..EmulatorConfig::default()
    })
    .await
    .expect("emulator starts");
    let mut c = Checked {
        specs: &specs,
        http: reqwest::Client::new(),
        endpoint: handle.endpoint(),
        validated: 0,
    };
    let (net, compute, disks, storage, dtl, resources) = (
        "2024-07-01",
        "2024-11-01",
        "2025-01-02",
        "2025-01-01",
        "2018-09-15",
        "2025-04-01",
    );
    let sub = "/subscriptions/11111111-2222-3333-4444-555555555555";
    let rg = format!("{sub}/resourcegroups/exp-rg");
    let p = |rest: &str| format!("{sub}/resourceGroups/exp-rg/providers/{rest}");

    assert_eq!(
        c.call(
            "PUT",
            &rg,
            resources,
            Some(&json!({"location": "eastus", "tags": {"owner": "ds"}}))
        )
        .await
        .status,
        201
    );
    assert_eq!(c.call("GET", &rg, resources, None).await.status, 200);
    assert_eq!(
        c.call(
            "GET",
            &format!("{sub}/resourcegroups/missing"),
            resources,
            None
        )
        .await
        .status,
        404
    );

    let nsg = p("Microsoft.Network/networkSecurityGroups/exp-nsg");
    c.call("PUT", &nsg, net, Some(&json!({"location": "eastus", "properties": {"securityRules": [{"name": "ssh", "properties": {
        "protocol": "Tcp", "sourcePortRange": "*", "destinationPortRange": "22", "sourceAddressPrefix": "*",
        "destinationAddressPrefix": "*", "access": "Allow", "priority": 100, "direction": "Inbound"}}]}}))).await;
    c.settle(&nsg, net).await;
    let vnet = p("Microsoft.Network/virtualNetworks/exp-vnet");
    c.call("PUT", &vnet, net, Some(&json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
        "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24", "networkSecurityGroup": {"id": nsg}}}]}}))).await;
    c.settle(&vnet, net).await;
    let subnet2 = format!("{vnet}/subnets/extra");
    c.call(
        "PUT",
        &subnet2,
        net,
        Some(&json!({"properties": {"addressPrefix": "10.0.1.0/24"}})),
    )
    .await;
    c.settle(&subnet2, net).await;
    let pip = p("Microsoft.Network/publicIPAddresses/exp-pip");
    c.call(
        "PUT",
        &pip,
        net,
        Some(
            &json!({"location": "eastus", "sku": {"name": "Standard", "tier": "Regional"},
        "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"}}),
        ),
    )
    .await;
    c.settle(&pip, net).await;
    let nic = p("Microsoft.Network/networkInterfaces/exp-nic");
    c.call("PUT", &nic, net, Some(&json!({"location": "eastus", "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {
        "subnet": {"id": format!("{vnet}/subnets/default")}, "publicIPAddress": {"id": pip}}}],
        "networkSecurityGroup": {"id": nsg}, "enableAcceleratedNetworking": true}}))).await;
    c.settle(&nic, net).await;
    let ppg = p("Microsoft.Compute/proximityPlacementGroups/exp-ppg");
    assert_eq!(
        c.call(
            "PUT",
            &ppg,
            compute,
            Some(
                &json!({"location": "eastus", "zones": ["1"], "properties": {
        "proximityPlacementGroupType": "Standard", "intent": {"vmSizes": ["Standard_ND40rs_v2"]}}})
            )
        )
        .await
        .status,
        201
    );
    // The cluster's InfiniBand fabric, in the placement group, as dsinfra sends it.
    let fabric = p("Microsoft.Compute/availabilitySets/exp-avset");
    assert_eq!(
        c.call(
            "PUT",
            &fabric,
            compute,
            Some(
                &json!({"location": "eastus", "sku": {"name": "Aligned"}, "properties": {
                "platformFaultDomainCount": 1, "platformUpdateDomainCount": 1,
                "proximityPlacementGroup": {"id": ppg}}})
            )
        )
        .await
        .status,
        200
    );
    let disk = p("Microsoft.Compute/disks/exp-data");
    c.call(
        "PUT",
        &disk,
        disks,
        Some(
            &json!({"location": "eastus", "sku": {"name": "Premium_LRS"},
        "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 512}}),
        ),
    )
    .await;
    c.settle(&disk, disks).await;
    let vm = p("Microsoft.Compute/virtualMachines/exp-vm");
    // No `zones`: a VM in an availability set cannot also name a zone (ARM refuses both).
    let vm_body = json!({"location": "eastus", "properties": {
        "hardwareProfile": {"vmSize": "Standard_ND40rs_v2"},
        "storageProfile": {"imageReference": {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204", "version": "latest"},
            "osDisk": {"createOption": "FromImage", "caching": "ReadWrite", "managedDisk": {"storageAccountType": "Premium_LRS"}, "deleteOption": "Delete"},
            "dataDisks": [{"lun": 0, "createOption": "Attach", "managedDisk": {"id": disk}}]},
        "osProfile": {"computerName": "exp-vm", "adminUsername": "azureuser", "customData": "I2Nsb3VkLWNvbmZpZw==",
            "linuxConfiguration": {"disablePasswordAuthentication": true,
                "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAAC3Nz"}]}}},
        "networkProfile": {"networkInterfaces": [{"id": nic, "properties": {"primary": true}}]},
        "proximityPlacementGroup": {"id": ppg}, "availabilitySet": {"id": fabric}}});
    let created = c.call("PUT", &vm, compute, Some(&vm_body)).await;
    assert_eq!(created.status, 201);
    // Retry-After counts the emulator's own seconds, which is all a client can know: the ND VM's
    // 300 s of ARM time are 0.3 s at scale 0.001, so 1 (whole seconds, rounded up), never 300.
    let wait: u64 = created
        .retry_after
        .as_deref()
        .expect("a running VM create says when to poll")
        .parse()
        .expect("whole seconds");
    assert_eq!(wait, 1, "Retry-After {wait} s for a VM due in 0.3 s");
    c.settle(&vm, compute).await;
    let expanded = c
        .call("GET", &format!("{vm}?$expand=instanceView"), compute, None)
        .await;
    assert!(
        expanded
            .body
            .as_ref()
            .is_some_and(|b| b["properties"]["instanceView"]["statuses"].is_array())
    );
    c.call("GET", &format!("{vm}/instanceView"), compute, None)
        .await;
    c.call(
        "GET",
        &format!("{ppg}?includeColocationStatus=true"),
        compute,
        None,
    )
    .await;
    c.call("GET", &disk, disks, None).await;
    let members = c.call("GET", &fabric, compute, None).await;
    assert_eq!(
        members
            .body
            .as_ref()
            .map(|b| b["properties"]["virtualMachines"].clone()),
        Some(json!([{"id": vm}]))
    );
    for action in ["powerOff", "start", "restart", "deallocate", "start"] {
        assert_eq!(
            c.call("POST", &format!("{vm}/{action}"), compute, None)
                .await
                .status,
            202,
            "{action}"
        );
        // With latency 0.001 every action is done within a few polls.
        for _ in 0..100 {
            let view = c
                .call("GET", &format!("{vm}/instanceView"), compute, None)
                .await;
            let power = view
                .body
                .as_ref()
                .and_then(|b| b["statuses"][1]["code"].as_str().map(str::to_owned))
                .unwrap_or_default();
            if !power.ends_with("ing") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    c.call(
        "GET",
        &format!("{sub}/providers/Microsoft.Compute/locations/eastus/usages"),
        compute,
        None,
    )
    .await;
    c.call(
        "GET",
        &format!("{sub}/providers/Microsoft.Compute/skus"),
        "2021-07-01",
        None,
    )
    .await;

    // Updates by PATCH, each type's update model, validated both ways: the VM's data disks
    // (long-running, like its PUT), a disk grow while detached, tags on everything else.
    let detach = c
        .call(
            "PATCH",
            &vm,
            compute,
            Some(&json!({"tags": {"stage": "detached"},
                "properties": {"storageProfile": {"dataDisks": []}}})),
        )
        .await;
    assert_eq!(detach.status, 200);
    c.settle(&vm, compute).await;
    let grown = c
        .call(
            "PATCH",
            &disk,
            disks,
            Some(&json!({"properties": {"diskSizeGB": 1024}, "tags": {"grown": "yes"}})),
        )
        .await;
    assert_eq!(grown.status, 200);
    let grown = c.settle(&disk, disks).await;
    assert_eq!(
        grown
            .body
            .as_ref()
            .map(|b| b["properties"]["diskSizeGB"].clone()),
        Some(json!(1024))
    );
    let attach = c
        .call(
            "PATCH",
            &vm,
            compute,
            Some(&json!({"properties": {"storageProfile": {"dataDisks": [
                {"lun": 0, "createOption": "Attach", "managedDisk": {"id": disk}}]}}})),
        )
        .await;
    assert_eq!(attach.status, 200);
    let attached = c.settle(&vm, compute).await;
    assert_eq!(
        attached.body.as_ref().map(|b| {
            b["properties"]["storageProfile"]["dataDisks"][0]["managedDisk"]["id"].clone()
        }),
        Some(json!(disk))
    );
    for (path, version) in [
        (&nsg, net),
        (&vnet, net),
        (&pip, net),
        (&nic, net),
        (&ppg, compute),
        (&fabric, compute),
    ] {
        let tagged = c
            .call(
                "PATCH",
                path,
                version,
                Some(&json!({"tags": {"owner": "ds"}})),
            )
            .await;
        assert_eq!(tagged.status, 200, "{path}");
    }

    let account = p("Microsoft.Storage/storageAccounts/expdata0001");
    assert_eq!(
        c.call(
            "PUT",
            &account,
            storage,
            Some(
                &json!({"sku": {"name": "Standard_LRS"}, "kind": "StorageV2", "location": "eastus",
        "properties": {"minimumTlsVersion": "TLS1_2", "allowBlobPublicAccess": false}})
            )
        )
        .await
        .status,
        202
    );
    c.settle(&account, storage).await;
    c.settle(&account, storage).await;
    for _ in 0..100 {
        if c.call("GET", &account, storage, None).await.status == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let settings = c
        .call(
            "PATCH",
            &account,
            storage,
            Some(
                &json!({"tags": {"owner": "ds"}, "properties": {"accessTier": "Cool",
                "minimumTlsVersion": "TLS1_2", "networkAcls": {"defaultAction": "Deny"}}}),
            ),
        )
        .await;
    assert_eq!(settings.status, 200);
    c.call("POST", &format!("{account}/listKeys"), storage, None)
        .await;
    c.call("POST", &format!("{account}/ListAccountSas"), storage, Some(&json!({"signedServices": "b", "signedResourceTypes": "sco",
        "signedPermission": "rl", "signedExpiry": "2030-01-01T00:00:00Z", "signedProtocol": "https"}))).await;
    c.call(
        "POST",
        &format!("{account}/ListServiceSas"),
        storage,
        Some(&json!({"canonicalizedResource": "/blob/expdata0001/raw",
        "signedResource": "c", "signedPermission": "rl", "signedExpiry": "2030-01-01T00:00:00Z"})),
    )
    .await;
    let container = format!("{account}/blobServices/default/containers/raw");
    assert_eq!(
        c.call("PUT", &container, storage, Some(&json!({})))
            .await
            .status,
        201
    );
    c.call("GET", &container, storage, None).await;
    let share = format!("{account}/fileServices/default/shares/home");
    assert_eq!(
        c.call(
            "PUT",
            &share,
            storage,
            Some(&json!({"properties": {"shareQuota": 1024, "enabledProtocols": "SMB"}}))
        )
        .await
        .status,
        201
    );
    c.call("GET", &share, storage, None).await;
    let schedule = p("Microsoft.DevTestLab/schedules/shutdown-computevm-exp-vm");
    assert_eq!(c.call("PUT", &schedule, dtl, Some(&json!({"location": "eastus", "properties": {"status": "Enabled",
        "taskType": "ComputeVmShutdownTask", "dailyRecurrence": {"time": "1900"}, "timeZoneId": "UTC", "targetResourceId": vm,
        "notificationSettings": {"status": "Disabled", "timeInMinutes": 30}}}))).await.status, 201);
    c.call("GET", &schedule, dtl, None).await;

    // In-use errors validate against the default error schema.
    assert_eq!(c.call("DELETE", &nic, net, None).await.status, 400);
    assert_eq!(
        c.call("DELETE", &format!("{vnet}/subnets/default"), net, None)
            .await
            .status,
        400
    );
    assert_eq!(
        c.call(
            "GET",
            &p("Microsoft.Compute/virtualMachines/nope"),
            compute,
            None
        )
        .await
        .status,
        404
    );

    // Deletes, in dependency order.
    assert_eq!(c.call("DELETE", &schedule, dtl, None).await.status, 200);
    assert_eq!(c.call("DELETE", &share, storage, None).await.status, 200);
    assert_eq!(
        c.call("DELETE", &container, storage, None).await.status,
        200
    );
    assert_eq!(c.call("DELETE", &account, storage, None).await.status, 200);
    assert_eq!(c.call("DELETE", &account, storage, None).await.status, 204);
    assert_eq!(c.call("DELETE", &vm, compute, None).await.status, 202);
    c.gone(&vm, compute).await;
    assert_eq!(c.call("DELETE", &disk, disks, None).await.status, 202);
    assert_eq!(c.call("DELETE", &fabric, compute, None).await.status, 200);
    assert_eq!(c.call("DELETE", &ppg, compute, None).await.status, 200);
    for path in [&nic, &pip, &subnet2, &vnet, &nsg] {
        assert_eq!(
            c.call("DELETE", path, net, None).await.status,
            202,
            "{path}"
        );
        c.gone(path, net).await;
    }
    assert_eq!(c.call("DELETE", &nic, net, None).await.status, 204);
    assert_eq!(c.call("DELETE", &rg, resources, None).await.status, 202);
    assert!(c.validated > 60, "validated {} exchanges", c.validated);
    handle.shutdown().await;
}
