//! Azure Machine Learning against the emulator, every ML request and answer held to the
//! 2024-10-01 spec: a workspace with its dependencies, an AmlCompute cluster whose nodes boot
//! through `on_aml_node` into the SSH endpoint map (public address and port, private address),
//! `listNodes` paged, endpoints gone after a scale to zero and new node ids after scaling up,
//! and AML's refusals (name, size, missing workspace, missing dependency, quota).
//!
//! The typed client does not speak these api-versions yet (that is the ARM layer's work), so
//! the requests here are raw HTTP, as the conformance replay sends them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsinfra::emulator::{AmlNodeBoot, EmulatorConfig, QuotaConfig, QuotaLimit};
use serde_json::{Value, json};

use crate::harness::{LOCATION, SSH_KEY, SUB, env};

const ML: &str = "2024-10-01";

struct Http {
    http: reqwest::Client,
    endpoint: String,
}

impl Http {
    async fn send(
        &self,
        method: &str,
        path: &str,
        version: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}{sep}api-version={version}", self.endpoint)
        };
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut request = self.http.request(method, url).bearer_auth("emulator-token");
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.expect("the emulator answers");
        let status = response.status().as_u16();
        let text = response.text().await.expect("a body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).expect("JSON")
        };
        (status, body)
    }

    /// GETs `path` until `done` holds for its body (at most ~20 s).
    async fn until(&self, path: &str, version: &str, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..1000 {
            let (status, body) = self.send("GET", path, version, None).await;
            if status == 200 && done(&body) {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{path} never reached the expected state");
    }

    /// Every node `listNodes` reports, following `nextLink` with POST as the spec's operation.
    async fn list_nodes(&self, compute: &str) -> Vec<Value> {
        let (status, mut page) = self
            .send("POST", &format!("{compute}/listNodes"), ML, None)
            .await;
        assert_eq!(status, 200, "{page}");
        let mut nodes = Vec::new();
        loop {
            nodes.extend(page["nodes"].as_array().cloned().unwrap_or_default());
            let Some(next) = page["nextLink"].as_str().map(str::to_owned) else {
                return nodes;
            };
            let (status, next_page) = self.send("POST", &next, ML, None).await;
            assert_eq!(status, 200, "{next_page}");
            page = next_page;
        }
    }

    async fn endpoints(&self) -> Vec<Value> {
        let url = format!("{}/_emulator/ssh-endpoints", self.endpoint);
        let body: Value = self
            .http
            .get(url)
            .send()
            .await
            .expect("admin API")
            .json()
            .await
            .expect("JSON");
        body["value"].as_array().cloned().unwrap_or_default()
    }
}

fn rg_path(rg: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{rg}")
}

fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

/// A group with a storage account, key vault, Log Analytics and Application Insights, and a
/// workspace on them, created and waited for. Returns the workspace's path.
async fn workspace(http: &Http, rg: &str) -> String {
    let group = rg_path(rg);
    let (status, _) = http
        .send(
            "PUT",
            &group,
            "2025-04-01",
            Some(&json!({"location": LOCATION})),
        )
        .await;
    assert_eq!(status, 201);
    let account = format!("{}sa", rg.replace('-', ""));
    let storage = format!("{group}/providers/Microsoft.Storage/storageAccounts/{account}");
    let (status, _) = http
        .send(
            "PUT",
            &storage,
            "2025-01-01",
            Some(&json!({"location": LOCATION, "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"})),
        )
        .await;
    assert_eq!(status, 202);
    http.until(&storage, "2025-01-01", |_| true).await;
    let vault = format!("{group}/providers/Microsoft.KeyVault/vaults/{rg}-kv");
    let (status, kv) = http
        .send(
            "PUT",
            &vault,
            "2023-07-01",
            Some(&json!({"location": LOCATION, "properties": {
                "tenantId": "d51f0000-0000-4000-8000-00000000e317",
                "sku": {"family": "A", "name": "standard"}}})),
        )
        .await;
    assert_eq!(status, 201, "{kv}");
    let logs = format!("{group}/providers/Microsoft.OperationalInsights/workspaces/{rg}-logs");
    let (status, _) = http
        .send(
            "PUT",
            &logs,
            "2022-10-01",
            Some(&json!({"location": LOCATION})),
        )
        .await;
    assert_eq!(status, 201);
    let insights = format!("{group}/providers/Microsoft.Insights/components/{rg}-ai");
    let (status, ai) = http
        .send(
            "PUT",
            &insights,
            "2020-02-02",
            Some(&json!({"location": LOCATION, "kind": "web", "properties": {
                "Application_Type": "web", "WorkspaceResourceId": logs}})),
        )
        .await;
    assert_eq!(status, 200, "{ai}");
    let ws = format!("{group}/providers/Microsoft.MachineLearningServices/workspaces/{rg}-ws");
    let body = json!({"location": LOCATION, "identity": {"type": "SystemAssigned"},
        "properties": {"storageAccount": storage, "keyVault": vault, "applicationInsights": insights,
                       "friendlyName": "ws"}});
    // A workspace whose key vault does not exist is refused before anything is created.
    let mut missing = body.clone();
    missing["properties"]["keyVault"] = json!(format!("{vault}-gone"));
    let (status, refused) = http.send("PUT", &ws, ML, Some(&missing)).await;
    assert_eq!(
        (status, error_code(&refused)),
        (400, "BadRequest"),
        "{refused}"
    );
    assert_eq!(refused["error"]["target"], "properties.keyVault");
    let (status, _) = http.send("PUT", &ws, ML, Some(&body)).await;
    assert_eq!(status, 202);
    let made = http
        .until(&ws, ML, |b| {
            b["properties"]["provisioningState"] == "Succeeded"
        })
        .await;
    assert_eq!(made["properties"]["keyVault"], json!(vault));
    ws
}

fn compute_body(nodes: u64, size: &str) -> Value {
    json!({"location": LOCATION, "properties": {"computeType": "AmlCompute", "properties": {
        "vmSize": size, "vmPriority": "Dedicated",
        "scaleSettings": {"minNodeCount": nodes, "maxNodeCount": nodes, "nodeIdleTimeBeforeScaleDown": "PT120S"},
        "userAccountCredentials": {"adminUserName": "azureuser", "adminUserSshPublicKey": SSH_KEY},
        "remoteLoginPortPublicAccess": "Enabled"}}})
}

fn scale(nodes: u64) -> Value {
    json!({"properties": {"properties": {"scaleSettings": {
        "minNodeCount": nodes, "maxNodeCount": nodes, "nodeIdleTimeBeforeScaleDown": "PT120S"}}}})
}

fn idle(count: u64) -> impl Fn(&Value) -> bool {
    move |b: &Value| {
        let p = &b["properties"]["properties"];
        p["allocationState"] == "Steady"
            && p["currentNodeCount"] == json!(count)
            && p["nodeStateCounts"]["idleNodeCount"] == json!(count)
    }
}

/// Whether the endpoint map holds `ip` (with `port`, or none) mapped to `endpoint`.
fn mapped(map: &[Value], ip: &str, port: Option<u16>, endpoint: &str) -> bool {
    map.iter().any(|e| {
        e["ipAddress"] == ip
            && e["port"] == port.map_or(Value::Null, |p| json!(p))
            && e["endpoint"] == endpoint
    })
}

/// AML's usages report the clusters' vCPUs against the same limits (6 DSv5 vCPUs held of 6), and
/// its VM sizes list the emulator's sizes.
async fn usages_count_the_clusters(http: &Http) {
    let usages = format!(
        "/subscriptions/{SUB}/providers/Microsoft.MachineLearningServices/locations/{LOCATION}/usages"
    );
    let (status, body) = http.send("GET", &usages, ML, None).await;
    assert_eq!(status, 200, "{body}");
    let family = body["value"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|u| u["name"]["value"] == "standardDSv5Family")
        .expect("the DSv5 family is listed");
    assert_eq!(
        (family["currentValue"].clone(), family["limit"].clone()),
        (json!(6), json!(6))
    );
    assert_eq!(
        family["name"]["localizedValue"],
        "Standard DSv5 family Cluster Dedicated vCPUs"
    );
    let sizes = format!(
        "/subscriptions/{SUB}/providers/Microsoft.MachineLearningServices/locations/{LOCATION}/vmSizes"
    );
    let (status, body) = http.send("GET", &sizes, ML, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["value"]
            .as_array()
            .expect("a list")
            .iter()
            .any(|s| s["name"] == "Standard_ND40rs_v2" && s["vCPUs"] == 40)
    );
}

// One cluster's life, start to end, as apply, park and unpark drive it.
#[allow(clippy::too_many_lines)]
#[tokio::test]
async fn aml_nodes_boot_through_the_hook_list_and_come_back_new_after_a_scale_to_zero() {
    let boots: Arc<Mutex<Vec<AmlNodeBoot>>> = Arc::default();
    let seen = Arc::clone(&boots);
    let config = EmulatorConfig {
        // Every list of two pages: listNodes must follow its nextLink.
        page_size: 1,
        on_aml_node: Some(Arc::new(move |boot: &AmlNodeBoot| {
            seen.lock().expect("not poisoned").push(boot.clone());
            Some(SocketAddr::from(([127, 0, 0, 1], boot.port - 10_000)))
        })),
        ..EmulatorConfig::default()
    };
    let Some(env) = env(config).await else { return };
    let http = Http {
        http: reqwest::Client::new(),
        endpoint: env.handle.endpoint(),
    };
    let ws = workspace(&http, "rg-aml").await;
    let compute = format!("{ws}/computes/beeond");
    let (status, created) = http
        .send(
            "PUT",
            &compute,
            ML,
            Some(&compute_body(2, "Standard_D2_v2")),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["properties"]["provisioningState"], "Creating");
    // The key is a secret in the spec: never shown back.
    assert_eq!(
        created["properties"]["properties"]["userAccountCredentials"],
        json!({"adminUserName": "azureuser"})
    );
    // Preparing first, then idle; the hook ran before any answer showed a node idle.
    let mut saw_preparing = false;
    for _ in 0..1000 {
        let (_, body) = http.send("GET", &compute, ML, None).await;
        let counts = &body["properties"]["properties"]["nodeStateCounts"];
        saw_preparing |= counts["preparingNodeCount"].as_u64().unwrap_or(0) > 0;
        let idle_now = counts["idleNodeCount"].as_u64().unwrap_or(0);
        assert!(
            boots.lock().expect("not poisoned").len() as u64 >= idle_now,
            "an answer showed {idle_now} idle nodes before the hook was told of them"
        );
        if idle(2)(&body) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(saw_preparing, "nodes never showed as preparing");
    let first = http.list_nodes(&compute).await;
    assert_eq!(first.len(), 2, "{first:?}");
    let public_ip = first[0]["publicIpAddress"]
        .as_str()
        .expect("public IP")
        .to_owned();
    assert_eq!(first[1]["publicIpAddress"], json!(public_ip));
    assert_eq!(
        first.iter().map(|n| n["port"].clone()).collect::<Vec<_>>(),
        [json!(50_000), json!(50_001)]
    );
    assert!(first.iter().all(|n| n["nodeState"] == "idle"));
    let booted = boots.lock().expect("not poisoned").clone();
    assert_eq!(booted.len(), 2);
    let map = http.endpoints().await;
    for (index, node) in first.iter().enumerate() {
        let boot = booted
            .iter()
            .find(|b| node["nodeId"] == json!(b.node_id))
            .expect("the hook was told of every listed node");
        assert_eq!(boot.index, index);
        assert_eq!(boot.admin_username, "azureuser");
        assert_eq!(boot.ssh_public_key.as_deref(), Some(SSH_KEY));
        assert_eq!(boot.vm_size, "Standard_D2_v2");
        assert_eq!(node["privateIpAddress"], json!(boot.private_ip));
        assert!(boot.private_ip.starts_with("10."));
        let local = format!("127.0.0.1:{}", boot.port - 10_000);
        assert!(mapped(&map, &public_ip, Some(boot.port), &local), "{map:?}");
        assert!(mapped(&map, &boot.private_ip, None, &local), "{map:?}");
    }
    // Park: scale to zero. The nodes leave; their endpoints go with them.
    let (status, patched) = http.send("PATCH", &compute, ML, Some(&scale(0))).await;
    assert_eq!(status, 200, "{patched}");
    http.until(&compute, ML, idle(0)).await;
    assert!(http.list_nodes(&compute).await.is_empty());
    let map = http.endpoints().await;
    assert!(
        !map.iter().any(|e| e["ipAddress"] == json!(public_ip)
            || booted.iter().any(|b| e["ipAddress"] == json!(b.private_ip))),
        "endpoints outlived their nodes: {map:?}"
    );
    // Unpark: new nodes, new ids, the same ports, booted again.
    let (status, _) = http.send("PATCH", &compute, ML, Some(&scale(2))).await;
    assert_eq!(status, 200);
    http.until(&compute, ML, idle(2)).await;
    let second = http.list_nodes(&compute).await;
    assert_eq!(second.len(), 2);
    assert!(
        second
            .iter()
            .all(|n| !first.iter().any(|o| o["nodeId"] == n["nodeId"])),
        "node ids came back: {first:?} {second:?}"
    );
    assert_eq!(boots.lock().expect("not poisoned").len(), 4);
    let map = http.endpoints().await;
    assert!(
        mapped(&map, &public_ip, Some(50_001), "127.0.0.1:40001"),
        "{map:?}"
    );
    // Destroy: the compute and its endpoints go.
    let (status, _) = http
        .send(
            "DELETE",
            &format!("{compute}?underlyingResourceAction=Delete"),
            ML,
            None,
        )
        .await;
    assert_eq!(status, 202);
    for _ in 0..1000 {
        if http.send("GET", &compute, ML, None).await.0 == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(http.send("GET", &compute, ML, None).await.0, 404);
    assert!(http.endpoints().await.is_empty());
    env.assert_conformant();
}

#[tokio::test]
async fn aml_refuses_a_bad_name_size_parent_and_quota_as_aml_does() {
    let config = EmulatorConfig {
        quotas: QuotaConfig {
            limits: vec![QuotaLimit {
                location: "*".into(),
                family: "standardDSv5Family".into(),
                limit: 6,
            }],
            ..QuotaConfig::default()
        },
        ..EmulatorConfig::default()
    };
    let Some(env) = env(config).await else { return };
    let http = Http {
        http: reqwest::Client::new(),
        endpoint: env.handle.endpoint(),
    };
    let ws = workspace(&http, "rg-amlerr").await;
    let (status, body) = http
        .send(
            "PUT",
            &format!("{ws}/computes/1bad_name"),
            ML,
            Some(&compute_body(1, "Standard_D2_v2")),
        )
        .await;
    assert_eq!((status, error_code(&body)), (400, "BadRequest"));
    assert_eq!(
        body["error"]["message"],
        "Compute name is invalid. It can include letters, digits and dashes. It must start with a \
         letter, end with a letter or digit, and be between 2 and 16 characters in length."
    );
    let (status, body) = http
        .send(
            "PUT",
            &format!("{ws}/computes/c1"),
            ML,
            Some(&compute_body(1, "Standard_Nope")),
        )
        .await;
    assert_eq!((status, error_code(&body)), (400, "InvalidPropertyValue"));
    assert_eq!(
        body["error"]["message"],
        "The specified value Standard_Nope for property Cluster.Properties.VMSize is not a \
         supported VM size. See additional details for supported VM sizes."
    );
    let missing = format!(
        "{}/providers/Microsoft.MachineLearningServices/workspaces/nows/computes/c1",
        rg_path("rg-amlerr")
    );
    let (status, body) = http
        .send(
            "PUT",
            &missing,
            ML,
            Some(&compute_body(1, "Standard_D2_v2")),
        )
        .await;
    assert_eq!((status, error_code(&body)), (404, "ParentResourceNotFound"));
    // 6 vCPUs of DSv5: three 2-vCPU nodes fit, a fourth does not (the first cluster holds them).
    let (status, _) = http
        .send(
            "PUT",
            &format!("{ws}/computes/fits"),
            ML,
            Some(&compute_body(3, "Standard_D2s_v5")),
        )
        .await;
    assert_eq!(status, 201);
    let (status, body) = http
        .send(
            "PUT",
            &format!("{ws}/computes/over"),
            ML,
            Some(&compute_body(1, "Standard_D2s_v5")),
        )
        .await;
    assert_eq!((status, error_code(&body)), (400, "BadRequest"));
    assert_eq!(
        body["error"]["message"],
        "The specified subscription has a Standard DSv5 family vCPU quota of 6 and cannot \
         accomodate for at least 1 requested managed compute nodes which maps to 2 vCPUs. Talk \
         to your Subscription Admin or refer to \
         https://docs.microsoft.com/azure/machine-learning/how-to-manage-quotas#request-quota-increases \
         to increase the family quota"
    );
    usages_count_the_clusters(&http).await;
    // Scaling the first one up is checked the same way.
    let (status, body) = http
        .send("PATCH", &format!("{ws}/computes/fits"), ML, Some(&scale(4)))
        .await;
    assert_eq!((status, error_code(&body)), (400, "BadRequest"), "{body}");
    env.assert_conformant();
}

/// Dedicated nodes also count against AML's regional dedicated total, whatever their family;
/// low-priority ones do not (they have their own total).
#[tokio::test]
async fn aml_refuses_dedicated_nodes_beyond_the_regional_total() {
    let config = EmulatorConfig {
        quotas: QuotaConfig {
            regional_limit: 4,
            ..QuotaConfig::default()
        },
        ..EmulatorConfig::default()
    };
    let Some(env) = env(config).await else { return };
    let http = Http {
        http: reqwest::Client::new(),
        endpoint: env.handle.endpoint(),
    };
    let ws = workspace(&http, "rg-amltotal").await;
    let (status, _) = http
        .send(
            "PUT",
            &format!("{ws}/computes/dsv5"),
            ML,
            Some(&compute_body(1, "Standard_D2s_v5")),
        )
        .await;
    assert_eq!(status, 201);
    // Another family, 2 more vCPUs: fits the family (1000) but not the regional total (4).
    let (status, body) = http
        .send(
            "PUT",
            &format!("{ws}/computes/dv2"),
            ML,
            Some(&compute_body(2, "Standard_D2_v2")),
        )
        .await;
    assert_eq!((status, error_code(&body)), (400, "BadRequest"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(
                "The specified subscription has a total regional dedicated vCPU quota of 4 and \
                 cannot accomodate for at least 1 requested managed compute nodes"
            )),
        "{body}"
    );
    let mut low = compute_body(2, "Standard_D2_v2");
    low["properties"]["properties"]["vmPriority"] = json!("LowPriority");
    let (status, body) = http
        .send("PUT", &format!("{ws}/computes/low"), ML, Some(&low))
        .await;
    assert_eq!(status, 201, "low priority has its own total: {body}");
    env.assert_conformant();
}
