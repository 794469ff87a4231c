//! The ARM emulator against the behaviour contract in shared/reference/arm.md: statuses, error
//! codes, exact messages and headers, long-running operations, persistence, throttling and fault
//! injection. A plain reqwest client plays the part of ARM clients.

use std::time::Duration;

use dsinfra::emulator::{
    self, BucketShape, ComputeLimits, EmulatorConfig, EmulatorHandle, FaultAction, FaultRule,
    QuotaConfig, QuotaLimit, SkuRestriction,
};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

mod authorization;
mod compute;
mod fabric;
mod groups;
mod kube;
mod network;
mod paging;
mod patch;
mod providers;
mod service;
mod sizes;
mod storage;

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
