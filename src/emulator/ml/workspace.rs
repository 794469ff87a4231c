//! Azure Machine Learning workspaces (2024-10-01): a creation is long-running (202 with ARM's
//! polling headers; the workspace shows `Creating` meanwhile) and needs the resources Azure
//! requires beside it, a storage account, a key vault and Application Insights (a container
//! registry is optional), which must exist when it is asked for. An update changes what AML
//! lets change and refuses to swap the associated resources.

use serde_json::{Map, Value, json};

use super::TENANT_ID;
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::ops;
use crate::emulator::resource::{Target, envelope, key, require_location};
use crate::emulator::store::{Cloud, Kind, OpKind};

/// The associated resources: property, the kind it must name, whether a creation needs it.
const ASSOCIATED: &[(&str, Kind, bool)] = &[
    ("storageAccount", Kind::StorageAccount, true),
    ("keyVault", Kind::KeyVault, true),
    ("applicationInsights", Kind::AppInsights, true),
    ("containerRegistry", Kind::ContainerRegistry, false),
];

/// Properties AML computes; a request's values for them are ignored, as ARM ignores read-only
/// properties.
const READ_ONLY: &[&str] = &[
    "workspaceId",
    "provisioningState",
    "serviceProvisionedResourceGroup",
    "privateLinkCount",
    "privateEndpointConnections",
    "notebookInfo",
    "tenantId",
    "storageHnsEnabled",
    "mlFlowTrackingUri",
];

fn associated_missing(property: &str, id: &str) -> ArmError {
    ArmError::new(
        400,
        "BadRequest",
        format!(
            "The resource '{id}' given as the workspace's {property} could not be found. Create \
             it first, or give the id of an existing one."
        ),
    )
    .with_target(&format!("properties.{property}"))
}

fn associated_required(property: &str) -> ArmError {
    ArmError::new(
        400,
        "BadRequest",
        format!("The workspace's {property} is required: give the ARM id of an existing one."),
    )
    .with_target(&format!("properties.{property}"))
}

/// Checks that every associated resource the request names exists, is of the right type, and
/// that a creation names the required ones.
fn check_associated(cloud: &Cloud, props: &Map<String, Value>) -> Result<(), ArmError> {
    for (property, kind, required) in ASSOCIATED {
        match props.get(*property).and_then(Value::as_str) {
            Some(id) => {
                let found = cloud
                    .resources
                    .get(&key(id))
                    .is_some_and(|r| r.kind == *kind && !r.hidden);
                if !found {
                    return Err(associated_missing(property, id));
                }
            }
            None if *required => return Err(associated_required(property)),
            None => {}
        }
    }
    Ok(())
}

/// The managed identity as AML shows it: the system identity's principal and tenant, and a
/// principal and client id for every user-assigned identity.
fn identity(asked: &Value) -> Value {
    let mut identity = asked.clone();
    let kind = asked
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind.contains("SystemAssigned") {
        identity["principalId"] = json!(uuid::Uuid::new_v4().to_string());
        identity["tenantId"] = json!(TENANT_ID);
    }
    if let Some(users) = identity
        .get_mut("userAssignedIdentities")
        .and_then(Value::as_object_mut)
    {
        for user in users.values_mut() {
            *user = json!({
                "principalId": uuid::Uuid::new_v4().to_string(),
                "clientId": uuid::Uuid::new_v4().to_string(),
            });
        }
    }
    identity
}

/// A new workspace's properties: what was asked, AML's defaults, and what AML computes.
fn new_properties(
    target: &Target<'_>,
    location: &str,
    asked: Map<String, Value>,
) -> Map<String, Value> {
    let name = target.name();
    let group = &target.path.group;
    let sub = &target.path.sub;
    let region = crate::emulator::config::normalize_location(location);
    let workspace_id = uuid::Uuid::new_v4();
    let mut props = asked;
    props.insert("workspaceId".into(), json!(workspace_id.to_string()));
    props.insert("provisioningState".into(), json!("Creating"));
    props.insert("tenantId".into(), json!(TENANT_ID));
    props.entry("friendlyName").or_insert_with(|| json!(name));
    props
        .entry("discoveryUrl")
        .or_insert_with(|| json!(format!("https://{region}.api.azureml.ms/discovery")));
    props.entry("hbiWorkspace").or_insert(json!(false));
    props
        .entry("allowPublicAccessWhenBehindVnet")
        .or_insert(json!(false));
    props
        .entry("publicNetworkAccess")
        .or_insert(json!("Enabled"));
    props.entry("v1LegacyMode").or_insert(json!(false));
    props.insert(
        "serviceProvisionedResourceGroup".into(),
        json!(format!(
            "{name}_{}",
            &workspace_id.simple().to_string()[..16]
        )),
    );
    props.insert("privateLinkCount".into(), json!(0));
    props.insert("storageHnsEnabled".into(), json!(false));
    props.insert(
        "mlFlowTrackingUri".into(),
        json!(format!(
            "azureml://{region}.api.azureml.ms/mlflow/v1.0/subscriptions/{sub}/resourceGroups/\
             {group}/providers/Microsoft.MachineLearningServices/workspaces/{name}"
        )),
    );
    props
}

/// `PUT` of a workspace.
pub(crate) fn put_workspace(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let mut asked = body
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for field in READ_ONLY {
        asked.remove(*field);
    }
    if let Some(existing) = cloud.resources.get(&target.key).cloned() {
        if let Some(op) = existing.op.as_ref().and_then(|id| cloud.operations.get(id)) {
            // Still being created: the same request is accepted again.
            return Ok(Reply::empty(202).headers(ops::accepted_headers(ctx, op)));
        }
        for (property, _, _) in ASSOCIATED {
            let now = existing
                .body
                .pointer(&format!("/properties/{property}"))
                .and_then(Value::as_str);
            if let Some(wanted) = asked.get(*property).and_then(Value::as_str)
                && now.is_some_and(|n| key(n) != key(wanted))
            {
                return Err(ArmError::new(
                    400,
                    "BadRequest",
                    format!(
                        "The workspace's {property} cannot be changed once the workspace has \
                         been created."
                    ),
                )
                .with_target(&format!("properties.{property}")));
            }
        }
        check_associated(cloud, &asked)?;
        let stored = cloud
            .resources
            .get_mut(&target.key)
            .ok_or_else(|| target.not_found())?;
        for (k, v) in asked {
            stored.body["properties"][k] = v;
        }
        if let Some(tags) = body.get("tags") {
            stored.body["tags"] = tags.clone();
        }
        return Ok(Reply::json(200, stored.body.clone()));
    }
    check_associated(cloud, &asked)?;
    let name = target.name();
    let props = new_properties(target, &location, asked);
    let mut stored = envelope(&target.id, name, Kind::MlWorkspace, Some(&location), &body);
    if let Some(asked_identity) = body.get("identity") {
        stored["identity"] = identity(asked_identity);
    }
    if stored.get("sku").is_none() {
        stored["sku"] = json!({"name": "Basic", "tier": "Basic"});
    }
    if stored.get("kind").is_none() {
        stored["kind"] = json!("Default");
    }
    stored["properties"] = Value::Object(props);
    let mut resource = cloud.new_resource(target.id.clone(), Kind::MlWorkspace, stored);
    let real = ops::base_latency(Kind::MlWorkspace, &OpKind::Put, None);
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        Kind::MlWorkspace.namespace(),
        &location,
        real,
    );
    resource.op = Some(op.id.clone());
    cloud.put_resource(target.key.clone(), resource);
    Ok(Reply::empty(202).headers(ops::accepted_headers(ctx, &op)))
}
