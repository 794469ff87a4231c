//! The ARM emulator against the behaviour contract in shared/reference/arm.md: statuses, error
//! codes, exact messages and headers, long-running operations, persistence, throttling and fault
//! injection. A plain reqwest client plays the part of ARM clients.

use std::time::Duration;

use dsinfra::emulator::{
    self, EmulatorConfig, EmulatorHandle, FaultAction, FaultRule, QuotaConfig, QuotaLimit,
    SkuRestriction,
};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

const SUB: &str = "00000000-0000-0000-0000-000000000001";
const NET: &str = "2024-07-01";
const COMPUTE: &str = "2024-11-01";
const STORAGE: &str = "2025-01-01";
const RESOURCES: &str = "2025-04-01";

struct Env {
    handle: EmulatorHandle,
    http: reqwest::Client,
    token: String,
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: HeaderMap,
    body: Value,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

fn fast() -> EmulatorConfig {
    EmulatorConfig {
        latency_scale: 0.0,
        ..EmulatorConfig::default()
    }
}

async fn env(config: EmulatorConfig) -> Env {
    let handle = emulator::start(config).await.expect("emulator starts");
    Env {
        handle,
        http: reqwest::Client::new(),
        token: "test-token".into(),
    }
}

fn rg_path(rg: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{rg}")
}

fn res(rg: &str, rest: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{rg}/providers/{rest}")
}

fn with_version(path: &str, version: &str) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}api-version={version}")
}

impl Env {
    fn url(&self, path: &str) -> String {
        if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.handle.endpoint())
        }
    }

    async fn send(
        &self,
        method: &str,
        url: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Resp {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("valid method");
        let mut request = self.http.request(method, self.url(url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.expect("request reaches the emulator");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("body reads");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).expect("emulator answers JSON")
        };
        Resp {
            status,
            headers,
            body,
        }
    }

    async fn call(&self, method: &str, path: &str, version: &str, body: Option<&Value>) -> Resp {
        self.send(
            method,
            &with_version(path, version),
            body,
            Some(&self.token),
        )
        .await
    }

    async fn put(&self, path: &str, version: &str, body: &Value) -> Resp {
        self.call("PUT", path, version, Some(body)).await
    }

    async fn get(&self, path: &str, version: &str) -> Resp {
        self.call("GET", path, version, None).await
    }

    async fn delete(&self, path: &str, version: &str) -> Resp {
        self.call("DELETE", path, version, None).await
    }

    async fn post(&self, path: &str, version: &str) -> Resp {
        self.call("POST", path, version, None).await
    }

    /// Polls an absolute URL until it stops answering 202 (Location flow).
    async fn poll_location(&self, url: &str) -> Resp {
        for _ in 0..400 {
            let resp = self.send("GET", url, None, Some(&self.token)).await;
            if resp.status != 202 {
                return resp;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("operation at {url} never finished");
    }

    /// Polls an Azure-AsyncOperation URL until a terminal status.
    async fn poll_status(&self, url: &str) -> Value {
        for _ in 0..400 {
            let resp = self.send("GET", url, None, Some(&self.token)).await;
            assert_eq!(
                resp.status, 200,
                "status URLs always answer 200: {:?}",
                resp.body
            );
            if resp.body["status"] != "InProgress" {
                return resp.body;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("operation at {url} never finished");
    }

    async fn group(&self, rg: &str) {
        let resp = self
            .put(&rg_path(rg), RESOURCES, &json!({"location": "eastus"}))
            .await;
        assert!(matches!(resp.status, 200 | 201), "group PUT: {resp:?}");
    }

    /// PUTs and waits for the Azure-AsyncOperation to succeed.
    async fn create(&self, path: &str, version: &str, body: &Value) -> Resp {
        let resp = self.put(path, version, body).await;
        assert!(matches!(resp.status, 200 | 201), "PUT {path}: {resp:?}");
        if let Some(url) = resp.header("azure-asyncoperation") {
            let status = self.poll_status(url).await;
            assert_eq!(status["status"], "Succeeded", "{status}");
        }
        resp
    }

    async fn network(&self, rg: &str) {
        self.group(rg).await;
        self.create(
            &res(rg, "Microsoft.Network/virtualNetworks/vnet"),
            NET,
            &json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                    "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}}),
        )
        .await;
        self.create(
            &res(rg, "Microsoft.Network/publicIPAddresses/pip"),
            NET,
            &json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}}),
        )
        .await;
        self.create(
            &res(rg, "Microsoft.Network/networkInterfaces/nic"),
            NET,
            &json!({"location": "eastus", "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {
                "subnet": {"id": res(rg, "Microsoft.Network/virtualNetworks/vnet/subnets/default")},
                "publicIPAddress": {"id": res(rg, "Microsoft.Network/publicIPAddresses/pip")}}}]}}),
        )
        .await;
    }

    async fn vm(&self, rg: &str, name: &str, size: &str) -> Resp {
        self.put(
            &res(rg, &format!("Microsoft.Compute/virtualMachines/{name}")),
            COMPUTE,
            &vm_body(rg, size),
        )
        .await
    }
}

fn vm_body(rg: &str, size: &str) -> Value {
    json!({"location": "eastus", "properties": {
        "hardwareProfile": {"vmSize": size},
        "storageProfile": {
            "imageReference": {"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest"},
            "osDisk": {"createOption": "FromImage", "caching": "ReadWrite", "managedDisk": {"storageAccountType": "Premium_LRS"}, "deleteOption": "Delete"}},
        "osProfile": {"computerName": "vm", "adminUsername": "azureuser", "customData": "c2VjcmV0",
            "linuxConfiguration": {"disablePasswordAuthentication": true,
                "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA"}]}}},
        "networkProfile": {"networkInterfaces": [{"id": res(rg, "Microsoft.Network/networkInterfaces/nic"), "properties": {"primary": true}}]}}})
}

fn power_of(vm: &Value) -> Option<String> {
    vm["properties"]["instanceView"]["statuses"]
        .as_array()?
        .iter()
        .filter_map(|s| s["code"].as_str())
        .find(|c| c.starts_with("PowerState/"))
        .map(str::to_owned)
}

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
async fn vm_lifecycle_moves_through_power_states() {
    let env = env(EmulatorConfig {
        latency_scale: 0.01,
        ..EmulatorConfig::default()
    })
    .await;
    env.network("rg").await;
    let path = res("rg", "Microsoft.Compute/virtualMachines/vm");
    let created = env.vm("rg", "vm", "Standard_D4s_v5").await;
    assert_eq!(created.status, 201);
    let props = &created.body["properties"];
    assert_eq!(props["provisioningState"], "Creating");
    assert!(props["vmId"].as_str().is_some_and(|v| v.len() == 36));
    assert_eq!(props["storageProfile"]["osDisk"]["osType"], "Linux");
    assert_eq!(props["storageProfile"]["dataDisks"], json!([]));
    assert!(
        props["osProfile"].get("customData").is_none(),
        "customData is never echoed"
    );
    assert_eq!(created.body["type"], "Microsoft.Compute/virtualMachines");
    let async_url = created
        .header("azure-asyncoperation")
        .expect("Azure-AsyncOperation")
        .to_owned();
    assert!(async_url.contains("/providers/Microsoft.Compute/locations/eastus/operations/"));
    let creating = env
        .get(&format!("{path}?$expand=instanceView"), COMPUTE)
        .await;
    assert_eq!(
        power_of(&creating.body).as_deref(),
        Some("PowerState/starting")
    );
    assert_eq!(env.poll_status(&async_url).await["status"], "Succeeded");
    let running = env
        .get(&format!("{path}?$expand=instanceView"), COMPUTE)
        .await;
    assert_eq!(running.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(
        power_of(&running.body).as_deref(),
        Some("PowerState/running")
    );
    assert_eq!(
        running.body["properties"]["instanceView"]["statuses"][0]["code"],
        "ProvisioningState/succeeded"
    );
    let plain = env.get(&path, COMPUTE).await;
    assert!(plain.body["properties"].get("instanceView").is_none());

    for (action, during, after) in [
        ("powerOff", "PowerState/stopping", "PowerState/stopped"),
        ("start", "PowerState/starting", "PowerState/running"),
        ("restart", "PowerState/starting", "PowerState/running"),
        (
            "deallocate",
            "PowerState/deallocating",
            "PowerState/deallocated",
        ),
        ("start", "PowerState/starting", "PowerState/running"),
    ] {
        let accepted = env.post(&format!("{path}/{action}"), COMPUTE).await;
        assert_eq!(accepted.status, 202, "{action}: {:?}", accepted.body);
        assert!(accepted.header("azure-asyncoperation").is_some());
        let location = accepted
            .header("location")
            .expect("actions carry Location")
            .to_owned();
        let view = env.get(&format!("{path}/instanceView"), COMPUTE).await;
        let code = view.body["statuses"][1]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(code, during, "{action}");
        assert_eq!(env.poll_location(&location).await.status, 200);
        let view = env
            .get(&format!("{path}?$expand=instanceView"), COMPUTE)
            .await;
        assert_eq!(power_of(&view.body).as_deref(), Some(after), "{action}");
    }
    let deleted = env.delete(&path, COMPUTE).await;
    assert_eq!(deleted.status, 202);
    env.poll_location(deleted.header("location").expect("Location"))
        .await;
    assert_eq!(env.get(&path, COMPUTE).await.status, 404);
    // The NIC is free again once its VM is gone.
    let nic = env
        .delete(&res("rg", "Microsoft.Network/networkInterfaces/nic"), NET)
        .await;
    assert_eq!(nic.status, 202);
}

#[tokio::test]
async fn vcpu_quota_answers_operation_not_allowed_and_usages_count_vms() {
    let env = env(EmulatorConfig {
        quotas: QuotaConfig {
            limits: vec![
                QuotaLimit {
                    location: "eastus".into(),
                    family: "standardNDSv2Family".into(),
                    limit: 0,
                },
                QuotaLimit {
                    location: "eastus".into(),
                    family: "standardDSv5Family".into(),
                    limit: 6,
                },
            ],
            ..QuotaConfig::default()
        },
        ..fast()
    })
    .await;
    env.network("rg").await;
    let refused = env.vm("rg", "gpu", "Standard_ND40rs_v2").await;
    assert_eq!(refused.status, 409);
    assert_eq!(refused.code(), "OperationNotAllowed");
    assert_eq!(
        refused.message(),
        "Operation could not be completed as it results in exceeding approved standardNDSv2Family \
         Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, \
         Current Limit: 0, Current Usage: 0, Additional Required: 40, (Minimum) New Limit Required: 40."
    );
    let first = env.vm("rg", "vm1", "Standard_D4s_v5").await;
    assert_eq!(first.status, 201);
    let second = env.vm("rg", "vm2", "Standard_D4s_v5").await;
    assert_eq!(second.code(), "OperationNotAllowed");
    assert!(second.message().contains("Current Limit: 6, Current Usage: 4, Additional Required: 4, (Minimum) New Limit Required: 8."), "{}", second.message());
    let usages = env
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/usages"),
            COMPUTE,
        )
        .await;
    assert_eq!(usages.status, 200);
    let family = |name: &str| {
        usages.body["value"]
            .as_array()
            .and_then(|v| v.iter().find(|u| u["name"]["value"] == name).cloned())
    };
    let dsv5 = family("standardDSv5Family").expect("family listed");
    assert_eq!(
        (
            dsv5["currentValue"].as_i64(),
            dsv5["limit"].as_i64(),
            dsv5["unit"].as_str()
        ),
        (Some(4), Some(6), Some("Count"))
    );
    assert_eq!(
        family("cores").and_then(|c| c["currentValue"].as_i64()),
        Some(4)
    );
    assert_eq!(
        family("standardNDSv2Family").and_then(|c| c["limit"].as_i64()),
        Some(0)
    );
    // Deallocated VMs hold no cores; starting again checks quota.
    let vm1 = res("rg", "Microsoft.Compute/virtualMachines/vm1");
    env.poll_status(first.header("azure-asyncoperation").expect("async"))
        .await;
    let dealloc = env.post(&format!("{vm1}/deallocate"), COMPUTE).await;
    env.poll_location(dealloc.header("location").expect("Location"))
        .await;
    let vm2 = env
        .put(
            &res("rg", "Microsoft.Compute/virtualMachines/vm2"),
            COMPUTE,
            &vm_body("rg", "Standard_D4s_v5"),
        )
        .await;
    assert_eq!(
        vm2.status, 201,
        "cores freed by deallocation: {:?}",
        vm2.body
    );
    let start = env.post(&format!("{vm1}/start"), COMPUTE).await;
    assert_eq!((start.status, start.code()), (409, "OperationNotAllowed"));
}

#[tokio::test]
async fn sku_restrictions_refuse_vms_and_show_in_the_skus_list() {
    let env = env(EmulatorConfig {
        sku_restrictions: vec![SkuRestriction {
            size: "Standard_B2s".into(),
            location: "eastus".into(),
            zones: vec![],
        }],
        ..fast()
    })
    .await;
    env.network("rg").await;
    let refused = env.vm("rg", "vm", "Standard_B2s").await;
    assert_eq!(refused.status, 409);
    assert_eq!(refused.code(), "SkuNotAvailable");
    assert_eq!(
        refused.message(),
        "The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: \
         Standard_B2s' is currently not available in location 'eastus'. Please try another size or \
         deploy to a different location or different zone. See https://aka.ms/azureskunotavailable \
         for details."
    );
    let skus = env
        .get(
            &format!(
                "/subscriptions/{SUB}/providers/Microsoft.Compute/skus?$filter=location eq 'eastus'"
            ),
            "2021-07-01",
        )
        .await;
    let b2s = skus.body["value"]
        .as_array()
        .and_then(|v| v.iter().find(|s| s["name"] == "Standard_B2s").cloned())
        .expect("listed");
    assert_eq!(b2s["restrictions"][0]["type"], "Location");
    assert_eq!(
        b2s["restrictions"][0]["reasonCode"],
        "NotAvailableForSubscription"
    );
    assert!(
        skus.body["value"]
            .as_array()
            .is_some_and(|v| v.iter().all(|s| s["locations"][0] == "eastus"))
    );
    let unknown = env.vm("rg", "vm", "Standard_Nope").await;
    assert_eq!((unknown.status, unknown.code()), (400, "InvalidParameter"));
}

#[tokio::test]
async fn disks_attach_through_the_vm_body_and_detach_on_delete() {
    let env = env(fast()).await;
    env.network("rg").await;
    let disk = res("rg", "Microsoft.Compute/disks/data1");
    let created = env
        .put(
            &disk,
            "2025-01-02",
            &json!({"location": "eastus", "sku": {"name": "Premium_LRS"},
        "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 1024}}),
        )
        .await;
    assert_eq!(created.status, 202);
    assert!(created.header("azure-asyncoperation").is_some());
    env.poll_status(created.header("azure-asyncoperation").expect("async"))
        .await;
    let mut body = vm_body("rg", "Standard_D4s_v5");
    body["properties"]["storageProfile"]["dataDisks"] = json!([
        {"lun": 0, "createOption": "Attach", "managedDisk": {"id": disk}},
        {"lun": 1, "createOption": "Empty", "diskSizeGB": 64, "deleteOption": "Delete"}]);
    let vm_path = res("rg", "Microsoft.Compute/virtualMachines/vm");
    let vm = env.create(&vm_path, COMPUTE, &body).await;
    let data = vm.body["properties"]["storageProfile"]["dataDisks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(data.len(), 2);
    let attached = env.get(&disk, "2025-01-02").await;
    assert_eq!(attached.body["managedBy"], vm_path);
    assert_eq!(attached.body["properties"]["diskState"], "Attached");
    let refused = env.delete(&disk, "2025-01-02").await;
    assert_eq!(
        (refused.status, refused.code()),
        (409, "OperationNotAllowed")
    );
    let empty_disk_id = data[1]["managedDisk"]["id"]
        .as_str()
        .expect("implicit disk id")
        .to_owned();
    let os_disk_id = vm.body["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"]
        .as_str()
        .expect("os disk")
        .to_owned();
    assert_eq!(env.get(&empty_disk_id, "2025-01-02").await.status, 200);
    let deleted = env.delete(&vm_path, COMPUTE).await;
    env.poll_location(deleted.header("location").expect("Location"))
        .await;
    let detached = env.get(&disk, "2025-01-02").await;
    assert!(detached.body.get("managedBy").is_none());
    assert_eq!(detached.body["properties"]["diskState"], "Unattached");
    assert_eq!(
        env.get(&empty_disk_id, "2025-01-02").await.status,
        404,
        "deleteOption Delete removes the disk"
    );
    assert_eq!(
        env.get(&os_disk_id, "2025-01-02").await.status,
        404,
        "OS disk had deleteOption Delete"
    );
}

#[tokio::test]
async fn proximity_placement_groups_are_synchronous() {
    let env = env(fast()).await;
    env.network("rg").await;
    let ppg = res("rg", "Microsoft.Compute/proximityPlacementGroups/ppg");
    let body = json!({"location": "eastus", "zones": ["1"], "properties": {"proximityPlacementGroupType": "Standard", "intent": {"vmSizes": ["Standard_ND40rs_v2"]}}});
    let created = env.put(&ppg, COMPUTE, &body).await;
    assert_eq!(created.status, 201);
    assert!(created.header("azure-asyncoperation").is_none());
    assert_eq!(env.put(&ppg, COMPUTE, &body).await.status, 200);
    let mut vm = vm_body("rg", "Standard_D4s_v5");
    vm["properties"]["proximityPlacementGroup"] = json!({"id": ppg});
    env.create(
        &res("rg", "Microsoft.Compute/virtualMachines/vm"),
        COMPUTE,
        &vm,
    )
    .await;
    let got = env
        .get(&format!("{ppg}?includeColocationStatus=true"), COMPUTE)
        .await;
    assert_eq!(
        got.body["properties"]["virtualMachines"][0]["id"],
        res("rg", "Microsoft.Compute/virtualMachines/vm")
    );
    assert_eq!(
        got.body["properties"]["colocationStatus"]["code"],
        "ColocationStatus/Aligned"
    );
    let in_use = env.delete(&ppg, COMPUTE).await;
    assert_eq!(in_use.status, 409);
    let vm_delete = env
        .delete(&res("rg", "Microsoft.Compute/virtualMachines/vm"), COMPUTE)
        .await;
    env.poll_location(vm_delete.header("location").expect("Location"))
        .await;
    assert_eq!(env.delete(&ppg, COMPUTE).await.status, 200);
    assert_eq!(env.delete(&ppg, COMPUTE).await.status, 204);
}

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

#[tokio::test]
async fn bearer_tokens_are_required_and_can_expire() {
    let env = env(EmulatorConfig {
        required_token: Some("the-token".into()),
        ..fast()
    })
    .await;
    let url = with_version(&rg_path("rg"), RESOURCES);
    let missing = env.send("GET", &url, None, None).await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.code(), "AuthenticationFailed");
    assert_eq!(
        missing.message(),
        "Authentication failed. The 'Authorization' header is missing."
    );
    assert!(
        missing
            .header("www-authenticate")
            .is_some_and(|h| h.starts_with("Bearer "))
    );
    assert!(missing.header("x-ms-request-id").is_some());
    let wrong = env.send("GET", &url, None, Some("other")).await;
    assert_eq!(
        (wrong.status, wrong.code()),
        (401, "InvalidAuthenticationToken")
    );
    let ok = env.send("GET", &url, None, Some("the-token")).await;
    assert_eq!(
        ok.code(),
        "ResourceGroupNotFound",
        "a good token reaches ARM"
    );

    let open = self::env(fast()).await;
    let url = with_version(&rg_path("rg"), RESOURCES);
    assert_eq!(open.send("GET", &url, None, Some("any")).await.status, 404);
    open.handle.expire_tokens();
    let expired = open.send("GET", &url, None, Some("any")).await;
    assert_eq!(expired.status, 401);
    assert_eq!(expired.code(), "ExpiredAuthenticationToken");
    assert!(
        expired
            .message()
            .starts_with("The access token expiry UTC time '"),
        "{}",
        expired.message()
    );
    assert!(
        expired
            .message()
            .contains("' is earlier than current UTC time '")
    );
    assert_eq!(
        open.send("GET", &url, None, Some("fresh")).await.status,
        404,
        "a new token works"
    );
    let admin = open
        .http
        .post(format!(
            "{}/_emulator/tokens/expire",
            open.handle.endpoint()
        ))
        .send()
        .await
        .expect("admin call");
    assert_eq!(admin.status().as_u16(), 204);
    assert_eq!(
        open.send("GET", &url, None, Some("fresh")).await.code(),
        "ExpiredAuthenticationToken"
    );
}

#[tokio::test]
async fn every_response_has_request_id_and_rate_limit_headers_and_bursts_throttle() {
    let env = env(fast()).await;
    let first = env
        .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
        .await;
    assert!(
        first
            .header("x-ms-request-id")
            .is_some_and(|id| id.len() == 36)
    );
    assert_eq!(
        first.header("x-ms-ratelimit-remaining-subscription-writes"),
        Some("199")
    );
    let read = env.get(&rg_path("rg"), RESOURCES).await;
    assert_eq!(
        read.header("x-ms-ratelimit-remaining-subscription-reads"),
        Some("249")
    );
    let delete = env
        .delete(&res("rg", "Microsoft.Network/virtualNetworks/none"), NET)
        .await;
    assert_eq!(
        delete.header("x-ms-ratelimit-remaining-subscription-deletes"),
        Some("199")
    );
    let missing_version = env.send("GET", &rg_path("rg"), None, Some("t")).await;
    assert_eq!(
        (missing_version.status, missing_version.code()),
        (400, "MissingApiVersionParameter")
    );

    let mut throttled = None;
    for i in 0..230 {
        let resp = env
            .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
            .await;
        if resp.status == 429 {
            throttled = Some((i, resp));
            break;
        }
    }
    let (i, resp) = throttled.expect("a burst beyond 200 writes is throttled");
    assert!(
        (195..=200).contains(&i),
        "throttled after about 200 writes, at {i}"
    );
    assert_eq!(resp.code(), "SubscriptionRequestsThrottled");
    assert!(
        resp.header("retry-after")
            .is_some_and(|r| r.parse::<u64>().is_ok_and(|s| s >= 1))
    );
    assert_eq!(
        resp.header("x-ms-ratelimit-remaining-subscription-writes"),
        Some("0")
    );
    assert!(resp.header("x-ms-request-id").is_some());
    // Reads have their own bucket.
    assert_eq!(env.get(&rg_path("rg"), RESOURCES).await.status, 200);
    // Another subscription too.
    assert_eq!(
        env.put(
            "/subscriptions/sub2/resourceGroups/rg",
            RESOURCES,
            &json!({"location": "eastus"})
        )
        .await
        .status,
        201
    );
}

#[tokio::test]
async fn faults_from_the_handle_fail_the_next_n_matching_requests() {
    let env = env(fast()).await;
    env.group("rg").await;
    env.handle.add_fault(FaultRule::respond(
        "PUT",
        "Microsoft.Network/virtualNetworks",
        2,
        &emulator::ArmError::new(
            500,
            "InternalServerError",
            "Encountered internal server error.",
        ),
    ));
    let vnet = res("rg", "Microsoft.Network/virtualNetworks/v");
    let body = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}});
    assert_eq!(env.get(&vnet, NET).await.status, 404, "GETs do not match");
    for _ in 0..2 {
        let failed = env.put(&vnet, NET, &body).await;
        assert_eq!((failed.status, failed.code()), (500, "InternalServerError"));
        assert!(failed.header("x-ms-request-id").is_some());
    }
    assert_eq!(env.put(&vnet, NET, &body).await.status, 201);
    assert!(env.handle.faults().is_empty());

    // AllocationFailed inside the long-running operation.
    env.network("rg2").await;
    env.handle.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: Some("*/virtualMachines/*".into()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::FailOperation {
            status: 409,
            code: "AllocationFailed".into(),
            message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.".into(),
        },
    });
    let vm = env.vm("rg2", "vm", "Standard_D4s_v5").await;
    assert_eq!(vm.status, 201, "accepted first");
    let status = env
        .poll_status(vm.header("azure-asyncoperation").expect("async"))
        .await;
    assert_eq!(status["status"], "Failed");
    assert_eq!(status["error"]["code"], "AllocationFailed");
    let got = env
        .get(
            &format!(
                "{}?$expand=instanceView",
                res("rg2", "Microsoft.Compute/virtualMachines/vm")
            ),
            COMPUTE,
        )
        .await;
    assert_eq!(got.body["properties"]["provisioningState"], "Failed");
    assert_eq!(
        got.body["properties"]["instanceView"]["statuses"][0]["code"],
        "ProvisioningState/failed/AllocationFailed"
    );
    assert!(
        env.handle.faults().is_empty(),
        "the async fault was consumed"
    );
}

#[tokio::test]
async fn faults_over_http_make_429_storms_and_delays() {
    let env = env(fast()).await;
    let admin = format!("{}/_emulator/faults", env.handle.endpoint());
    let added = env.http.post(&admin).json(&json!([
        {"method": "GET", "count": 3, "action": {"kind": "respond", "status": 429, "code": "TooManyRequests",
          "message": "Too many requests.", "retry_after": 2}},
        {"method": "PUT", "count": 1, "action": {"kind": "delay", "millis": 150}},
    ])).send().await.expect("admin reachable");
    assert_eq!(added.status().as_u16(), 201);
    for _ in 0..3 {
        let storm = env.get(&rg_path("rg"), RESOURCES).await;
        assert_eq!(storm.status, 429);
        assert_eq!(storm.code(), "TooManyRequests");
        assert_eq!(storm.header("retry-after"), Some("2"));
    }
    assert_eq!(env.get(&rg_path("rg"), RESOURCES).await.status, 404);
    let started = std::time::Instant::now();
    assert_eq!(
        env.put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
            .await
            .status,
        201
    );
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "delay applied"
    );
    let listed: Value = env
        .http
        .get(&admin)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(listed["value"], json!([]));
    let expire = env
        .http
        .post(&admin)
        .json(&json!({"action": {"kind": "expire_token"}}))
        .send()
        .await
        .expect("admin");
    assert_eq!(expire.status().as_u16(), 201);
    assert_eq!(
        env.get(&rg_path("rg"), RESOURCES).await.code(),
        "ExpiredAuthenticationToken"
    );
    let bad = env
        .http
        .post(&admin)
        .json(&json!({"action": {"kind": "nonsense"}}))
        .send()
        .await
        .expect("admin");
    assert_eq!(bad.status().as_u16(), 400);
}

#[tokio::test]
async fn faults_load_from_a_file_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("faults.json");
    std::fs::write(&file, r#"[{"resource_type": "Microsoft.Resources/resourceGroups", "method": "PUT",
        "action": {"kind": "respond", "status": 503, "code": "ServiceUnavailable", "message": "Try later."}}]"#)
        .expect("write faults");
    let env = env(EmulatorConfig {
        faults_file: Some(file),
        ..fast()
    })
    .await;
    let failed = env
        .put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
        .await;
    assert_eq!(
        (failed.status, failed.code(), failed.message()),
        (503, "ServiceUnavailable", "Try later.")
    );
    assert_eq!(
        env.put(&rg_path("rg"), RESOURCES, &json!({"location": "eastus"}))
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn state_survives_a_restart_including_pending_operations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = EmulatorConfig {
        state_dir: Some(dir.path().to_owned()),
        latency_scale: 0.02,
        ..EmulatorConfig::default()
    };
    let first = env(config.clone()).await;
    first.group("rg").await;
    let account = res("rg", "Microsoft.Storage/storageAccounts/persisted01");
    let accepted = first
        .put(
            &account,
            STORAGE,
            &json!({"location": "eastus", "sku": {"name": "Standard_LRS"}}),
        )
        .await;
    assert_eq!(accepted.status, 202);
    let op_id = accepted
        .header("location")
        .and_then(|l| l.split("/operations/").nth(1))
        .and_then(|l| l.split('?').next())
        .expect("op id")
        .to_owned();
    first.handle.shutdown().await;
    assert!(dir.path().join("state.json").exists());

    let second = env(config.clone()).await;
    assert_eq!(second.get(&rg_path("rg"), RESOURCES).await.status, 200);
    let monitor = format!(
        "/subscriptions/{SUB}/providers/Microsoft.Storage/operations/{op_id}?monitor=true&api-version={STORAGE}"
    );
    let done = second.poll_location(&monitor).await;
    assert_eq!(
        done.status, 200,
        "the operation started before the restart completes after it"
    );
    let keys = second.post(&format!("{account}/listKeys"), STORAGE).await;
    second.handle.shutdown().await;

    let third = env(config).await;
    let again = third.post(&format!("{account}/listKeys"), STORAGE).await;
    assert_eq!(keys.body, again.body, "keys are stable across restarts");
    assert_eq!(
        third.get(&account, STORAGE).await.body["name"],
        "persisted01"
    );
}

#[tokio::test]
async fn latency_scale_controls_operation_duration() {
    let slow = env(EmulatorConfig {
        latency_scale: 0.1,
        ..EmulatorConfig::default()
    })
    .await;
    slow.group("rg").await;
    let vnet = res("rg", "Microsoft.Network/virtualNetworks/v");
    let body = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}});
    let started = std::time::Instant::now();
    let created = slow.put(&vnet, NET, &body).await;
    assert_eq!(
        created.header("retry-after"),
        Some("5"),
        "Retry-After counts ARM seconds: 5 s left, although at 0.1 that is 0.5 s of wall time"
    );
    let status_url = created.header("azure-asyncoperation").expect("async");
    let running = slow.send("GET", status_url, None, Some(&slow.token)).await;
    assert_eq!(running.body["status"], "InProgress");
    let left: u64 = running
        .header("retry-after")
        .expect("a running operation's status says when to look again")
        .parse()
        .expect("whole seconds");
    assert!((1..=5).contains(&left), "{left} s left of 5");
    slow.poll_status(status_url).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(480) && took < Duration::from_secs(3),
        "VNet at 0.1 took {took:?}"
    );

    let instant = env(fast()).await;
    instant.group("rg").await;
    let created = instant.put(&vnet, NET, &body).await;
    assert_eq!(
        created.body["properties"]["provisioningState"], "Updating",
        "first answer is non-terminal"
    );
    assert_eq!(created.header("retry-after"), Some("0"));
    assert_eq!(
        instant.get(&vnet, NET).await.body["properties"]["provisioningState"],
        "Succeeded"
    );
}

#[tokio::test]
async fn ssh_endpoints_map_public_ips_to_local_ports() {
    let env = env(fast()).await;
    env.network("rg").await;
    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm");
    env.create(&vm, COMPUTE, &vm_body("rg", "Standard_D4s_v5"))
        .await;
    let pip = env
        .get(&res("rg", "Microsoft.Network/publicIPAddresses/pip"), NET)
        .await;
    let address = pip.body["properties"]["ipAddress"]
        .as_str()
        .expect("address")
        .to_owned();
    let mapped = env
        .handle
        .map_ssh_endpoint(None, Some(&vm), "127.0.0.1:2222")
        .expect("mapped");
    assert_eq!(mapped.ip_address, address);
    let resp = env
        .http
        .post(format!("{}/_emulator/ssh-endpoints", env.handle.endpoint()))
        .json(&json!({"ipAddress": "20.0.0.9", "endpoint": "127.0.0.1:2223"}))
        .send()
        .await
        .expect("admin");
    assert_eq!(resp.status().as_u16(), 200);
    let listed: Value = env
        .http
        .get(format!("{}/_emulator/ssh-endpoints", env.handle.endpoint()))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    let value = listed["value"].as_array().cloned().unwrap_or_default();
    assert_eq!(value.len(), 2);
    assert_eq!(value[0]["ipAddress"], address);
    assert_eq!(value[0]["endpoint"], "127.0.0.1:2222");
    assert_eq!(
        value[0]["publicIpAddressId"],
        res("rg", "Microsoft.Network/publicIPAddresses/pip")
    );
    assert!(
        env.handle
            .map_ssh_endpoint(Some("1.2.3.4"), None, "not an address")
            .is_err()
    );
}

#[tokio::test]
async fn the_admin_api_lists_the_operations_it_ran() {
    let env = env(fast()).await;
    env.network("rg").await;
    let vm = res("rg", "Microsoft.Compute/virtualMachines/vm");
    env.create(&vm, COMPUTE, &vm_body("rg", "Standard_D4s_v5"))
        .await;
    let listed: Value = env
        .http
        .get(format!("{}/_emulator/operations", env.handle.endpoint()))
        .send()
        .await
        .expect("admin")
        .json()
        .await
        .expect("json");
    let operations = listed["operations"].as_object().expect("operations by id");
    let put = operations
        .values()
        .find(|op| {
            op["kind"] == "Put"
                && op["target"]
                    .as_str()
                    .is_some_and(|t| t.eq_ignore_ascii_case(&vm))
        })
        .expect("the VM's create is listed");
    assert!(
        put["started"].is_string() && put["due"].is_string(),
        "{put}"
    );
}
