//! The Azure Machine Learning bodies, from a desired model built by hand to the contract of
//! issue 17 (the manifest blocks are another engineer's work), held to the official spec where
//! `shared/azure-specs` has one (ML) and to Azure's REST reference otherwise.

use super::*;
use crate::openapi::{Specs, significant};
use serde_json::json;

const SUB: &str = "00000000-0000-0000-0000-000000000000";
const TENANT: &str = "11111111-2222-3333-4444-555555555555";

fn add(
    desired: &mut Desired,
    address: &str,
    kind: ResourceKind,
    name: &str,
    parent: Option<&str>,
    attrs: serde_json::Value,
    depends_on: &[&str],
) {
    let rg = desired.azure.resource_group.clone();
    let mut attrs: crate::model::Attrs =
        serde_json::from_value(attrs).expect("attributes are an object");
    attrs.insert(
        "tags".into(),
        json!({"managed-by": "dsinfra", "dsinfra-address": address}),
    );
    attrs
        .entry("location".into())
        .or_insert_with(|| json!(desired.azure.location));
    desired.resources.push(Resource {
        address: address.parse().expect("valid address"),
        kind,
        name: name.to_owned(),
        parent: parent.map(str::to_owned),
        resource_group: rg,
        attrs,
        depends_on: depends_on
            .iter()
            .map(|d| d.parse().expect("valid address"))
            .collect(),
        lifecycle: crate::model::Lifecycle::default(),
        span: None,
        attr_spans: BTreeMap::new(),
    });
}

/// dual-dsvm.hcl (for its group, network and settings) plus a new workspace with every
/// dependency (registry included) and a 4-node cluster on the network's subnet.
pub(crate) fn aml_desired() -> Desired {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/dual-dsvm.hcl");
    let opts = crate::manifest::LoadOptions {
        env: Box::new(|_| None),
        ..crate::manifest::LoadOptions::default()
    };
    let mut desired = crate::manifest::load(&path, &opts)
        .expect("the seed example loads")
        .desired;
    let account = desired
        .resource(&"storage_account.data.account".parse().expect("valid"))
        .expect("the example has an account")
        .attrs
        .clone();
    let mut storage = serde_json::to_value(account).expect("attributes serialise");
    storage["tags"] = json!(null);
    add(
        &mut desired,
        "aml_workspace.ws.storage",
        ResourceKind::StorageAccount,
        "dsiwsstore1a2b3c",
        None,
        storage,
        &[],
    );
    add_workspace_dependencies(&mut desired);
    add(
        &mut desired,
        "aml_workspace.ws.workspace",
        ResourceKind::MlWorkspace,
        "exp-1",
        None,
        json!({
            "storage_account": "aml_workspace.ws.storage",
            "key_vault": "aml_workspace.ws.key_vault",
            "application_insights": "aml_workspace.ws.insights",
            "container_registry": "aml_workspace.ws.registry",
            "sku": "Basic",
            "friendly_name": "ws",
        }),
        &[
            "aml_workspace.ws.storage",
            "aml_workspace.ws.key_vault",
            "aml_workspace.ws.insights",
            "aml_workspace.ws.registry",
        ],
    );
    let rg = desired.azure.resource_group.clone();
    add(
        &mut desired,
        "aml_cluster.beeond.compute",
        crate::engine::kinds::ml_compute::KIND,
        "beeond-1a2b",
        Some("exp-1"),
        json!({
            "size": "Standard_ND40rs_v2",
            "count": 4,
            "priority": "Dedicated",
            "idle_seconds_before_scaledown": 120,
            "admin_username": "azureuser",
            "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample user@host",
            "workspace_name": "exp-1",
            "workspace_resource_group": rg,
            "existing_workspace": false,
            "workspace": "aml_workspace.ws.workspace",
            "subnet": "network.main.vnet",
            "subnet_name": "default",
        }),
        &["aml_workspace.ws.workspace", "network.main.vnet"],
    );
    desired
}

/// The key vault, Log Analytics workspace, Application Insights and registry a new workspace
/// needs (its storage account is added by [`aml_desired`]).
fn add_workspace_dependencies(desired: &mut Desired) {
    add(
        desired,
        "aml_workspace.ws.key_vault",
        ResourceKind::KeyVault,
        "ws-kv-1a2b3c",
        None,
        json!({"sku": "standard"}),
        &[],
    );
    add(
        desired,
        "aml_workspace.ws.logs",
        ResourceKind::LogAnalyticsWorkspace,
        "exp-ws-logs",
        None,
        json!({"sku": "PerGB2018", "retention_days": 30}),
        &[],
    );
    add(
        desired,
        "aml_workspace.ws.insights",
        ResourceKind::AppInsights,
        "exp-ws-insights",
        None,
        json!({"application_type": "web", "logs": "aml_workspace.ws.logs"}),
        &["aml_workspace.ws.logs"],
    );
    add(
        desired,
        "aml_workspace.ws.registry",
        ResourceKind::ContainerRegistry,
        "expwsacr1a2b3c",
        None,
        json!({"sku": "Basic"}),
        &[],
    );
}

fn request(desired: &Desired, address: &str) -> Request {
    let resource = desired
        .resource(&address.parse().expect("valid"))
        .expect("present");
    request_for(resource, desired, SUB, Some(TENANT))
        .expect("the body builds")
        .expect("an ARM resource")
}

#[test]
fn a_compute_is_a_fixed_size_cluster_with_ssh_open_in_its_workspace() {
    let desired = aml_desired();
    let req = request(&desired, "aml_cluster.beeond.compute");
    let rg = &desired.azure.resource_group;
    assert_eq!(
        req.id.as_str(),
        format!(
            "/subscriptions/{SUB}/resourceGroups/{rg}/providers/Microsoft.MachineLearningServices/workspaces/exp-1/computes/beeond-1a2b"
        )
    );
    let vnet = request(&desired, "network.main.vnet");
    assert_eq!(
        req.to_json(),
        json!({
            "location": desired.azure.location,
            "tags": {"managed-by": "dsinfra", "dsinfra-address": "aml_cluster.beeond.compute"},
            "properties": {
                "computeType": "AmlCompute",
                "properties": {
                    "vmSize": "Standard_ND40rs_v2",
                    "vmPriority": "Dedicated",
                    "scaleSettings": {"minNodeCount": 4, "maxNodeCount": 4, "nodeIdleTimeBeforeScaleDown": "PT120S"},
                    "userAccountCredentials": {
                        "adminUserName": "azureuser",
                        "adminUserSshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample user@host"
                    },
                    "subnet": {"id": format!("{}/subnets/default", vnet.id.as_str())},
                    "remoteLoginPortPublicAccess": "Enabled"
                }
            }
        })
    );
}

#[test]
fn a_workspace_names_its_dependencies_by_id_with_a_system_identity() {
    let desired = aml_desired();
    let body = request(&desired, "aml_workspace.ws.workspace").to_json();
    let id = |address: &str| request(&desired, address).id.as_str().to_owned();
    assert_eq!(body["identity"], json!({"type": "SystemAssigned"}));
    assert_eq!(body["sku"], json!({"name": "Basic", "tier": "Basic"}));
    assert_eq!(
        body["properties"],
        json!({
            "friendlyName": "ws",
            "storageAccount": id("aml_workspace.ws.storage"),
            "keyVault": id("aml_workspace.ws.key_vault"),
            "applicationInsights": id("aml_workspace.ws.insights"),
            "containerRegistry": id("aml_workspace.ws.registry"),
        })
    );
}

#[test]
fn the_dependencies_follow_azures_rest_reference() {
    let desired = aml_desired();
    assert_eq!(
        request(&desired, "aml_workspace.ws.key_vault").to_json()["properties"],
        json!({
            "tenantId": TENANT,
            "sku": {"family": "A", "name": "standard"},
            "accessPolicies": [],
            "enableSoftDelete": true,
            "softDeleteRetentionInDays": 7,
        })
    );
    let logs = request(&desired, "aml_workspace.ws.logs");
    assert_eq!(
        logs.to_json()["properties"],
        json!({"sku": {"name": "PerGB2018"}, "retentionInDays": 30})
    );
    let insights = request(&desired, "aml_workspace.ws.insights").to_json();
    assert_eq!(insights["kind"], "web");
    assert_eq!(
        insights["properties"],
        json!({"Application_Type": "web", "WorkspaceResourceId": logs.id.as_str(), "IngestionMode": "LogAnalytics"})
    );
    assert_eq!(
        request(&desired, "aml_workspace.ws.registry").to_json(),
        json!({
            "location": desired.azure.location,
            "tags": {"managed-by": "dsinfra", "dsinfra-address": "aml_workspace.ws.registry"},
            "sku": {"name": "Basic"},
            "properties": {"adminUserEnabled": false},
        })
    );
}

#[test]
fn a_key_vault_without_the_tenant_is_refused_not_sent_half_made() {
    let desired = aml_desired();
    let vault = desired
        .resource(&"aml_workspace.ws.key_vault".parse().expect("valid"))
        .expect("present");
    assert!(needs_tenant(vault.kind));
    assert_eq!(
        request_for(vault, &desired, SUB, None)
            .expect_err("no tenant")
            .to_string(),
        "aml_workspace.ws.key_vault: attribute `tenant_id` is missing"
    );
}

/// The ML bodies (workspace PUT, compute PUT, compute PATCH) validate against the official
/// 2024-10-01 spec, read-only properties excluded and unknown properties refused.
#[test]
fn the_ml_bodies_validate_against_the_official_spec() {
    let Ok(specs) = Specs::load_default() else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "the spec check is required under CI");
        return;
    };
    let desired = aml_desired();
    let compute = request(&desired, "aml_cluster.beeond.compute");
    let resource = desired
        .resource(&"aml_cluster.beeond.compute".parse().expect("valid"))
        .expect("present");
    let mut before = resource.attrs.clone();
    before.insert("count".into(), json!(2));
    let patch = update_request(compute.clone(), &before, &resource.attrs);
    assert_eq!(patch.method(), "PATCH");
    for req in [
        request(&desired, "aml_workspace.ws.workspace"),
        compute,
        patch,
    ] {
        let version = crate::azure::api_version::api_version_for_path(req.id.as_str());
        let op = specs
            .operation(req.method(), req.id.as_str(), version)
            .unwrap_or_else(|| panic!("no {} in the specs for {}", req.method(), req.id));
        let body = req.to_json();
        let violations = op.validate_request(Some(&body));
        let strict = significant(&violations, true);
        assert!(
            strict.is_empty(),
            "{} is invalid: {:?}\n{body:#}",
            op.operation_id(),
            strict.iter().map(ToString::to_string).collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_count_or_idle_change_is_the_scale_patch_and_anything_else_the_put() {
    let desired = aml_desired();
    let resource = desired
        .resource(&"aml_cluster.beeond.compute".parse().expect("valid"))
        .expect("present");
    let put = request(&desired, "aml_cluster.beeond.compute");
    let mut before = resource.attrs.clone();
    before.insert("count".into(), json!(2));
    before.insert("idle_seconds_before_scaledown".into(), json!(600));
    let patch = update_request(put.clone(), &before, &resource.attrs);
    assert_eq!(
        patch.to_json(),
        json!({"properties": {"properties": {"scaleSettings": {
            "minNodeCount": 4, "maxNodeCount": 4, "nodeIdleTimeBeforeScaleDown": "PT120S"
        }}}})
    );
    // Tags are not in ClusterUpdateParameters: such an update is the PUT.
    before.insert("tags".into(), json!({"managed-by": "dsinfra"}));
    assert_eq!(update_request(put.clone(), &before, &resource.attrs), put);
}
