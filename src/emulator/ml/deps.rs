//! The resources an Azure Machine Learning workspace needs beside it, served as plain ARM
//! resources: key vaults (KeyVault 2023-07-01), Log Analytics workspaces (OperationalInsights
//! 2022-10-01), Application Insights components (Insights 2020-02-02) and container registries
//! (ContainerRegistry 2023-07-01). No official spec of these is in shared/, so their shapes
//! follow the services' REST documentation; each checks what its service requires of a
//! creation (docs/emulator.md lists what is not modelled).

use serde_json::{Value, json};

use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::ops;
use crate::emulator::resource::{Target, envelope, key, require_location};
use crate::emulator::store::{Cloud, Kind, OpKind};

/// ARM's answer for a body missing a property its model requires, in the words of the
/// deserializer the services share.
fn required(property: &str, path: &str) -> ArmError {
    ArmError::invalid_request(format!(
        "The request content was invalid and could not be deserialized: 'Required property \
         '{property}' not found in JSON. Path '{path}'.'"
    ))
}

/// Any resource of `kind` named `name`, anywhere: for the globally unique names.
fn named_elsewhere(cloud: &Cloud, kind: Kind, name: &str, own_key: &str) -> bool {
    cloud
        .resources
        .iter()
        .any(|(k, r)| r.kind == kind && r.name().eq_ignore_ascii_case(name) && k != own_key)
}

/// Stores a synchronously created or updated resource: 201 new, 200 updated.
fn store(cloud: &mut Cloud, target: &Target<'_>, kind: Kind, body: Value) -> Reply {
    let existed = cloud.resources.contains_key(&target.key);
    let resource = cloud.new_resource(target.id_in(cloud), kind, body.clone());
    cloud.put_resource(target.key.clone(), resource);
    Reply::json(if existed { 200 } else { 201 }, body)
}

/// Key Vault's name rule: 3-24 letters, digits and `-`, starting with a letter, ending with a
/// letter or digit, no `--`.
fn valid_vault_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=24).contains(&bytes.len())
        && bytes[0].is_ascii_alphabetic()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        && !name.contains("--")
}

/// `PUT` of a key vault: `properties.tenantId` and `properties.sku` are required; names are
/// global.
pub(crate) fn put_vault(
    cloud: &mut Cloud,
    ctx: &Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let name = target.name();
    if !valid_vault_name(name) {
        return Err(ArmError::new(
            400,
            "VaultNameNotValid",
            format!(
                "The vault name '{name}' is invalid. A vault's name must be between 3-24 \
                 alphanumeric characters. The name must begin with a letter, end with a letter or \
                 digit, and not contain consecutive hyphens."
            ),
        ));
    }
    let location = require_location(&body)?;
    let props = body.get("properties").cloned().unwrap_or(json!({}));
    let tenant = props
        .get("tenantId")
        .and_then(Value::as_str)
        .ok_or_else(|| required("tenantId", "properties"))?;
    let sku = props
        .get("sku")
        .ok_or_else(|| required("sku", "properties"))?;
    if sku.get("name").and_then(Value::as_str).is_none() {
        return Err(required("name", "properties.sku"));
    }
    if cloud
        .deleted_vaults
        .contains_key(&name.to_ascii_lowercase())
    {
        return Err(ArmError::new(
            409,
            "ConflictError",
            format!(
                "Exist soft deleted vault with the same name. The vault name '{name}' is in a \
                 deleted but recoverable state: recover it or purge it first."
            ),
        ));
    }
    if named_elsewhere(cloud, Kind::KeyVault, name, &target.key) {
        return Err(ArmError::new(
            409,
            "VaultAlreadyExists",
            format!(
                "The vault name '{name}' is already in use. Vault names are globally unique so it \
                 is possible that the name is already taken."
            ),
        ));
    }
    let mut stored = envelope(
        &target.id_in(cloud),
        name,
        Kind::KeyVault,
        Some(&location),
        &body,
    );
    let mut out = props.clone();
    out["tenantId"] = json!(tenant);
    out["vaultUri"] = json!(format!(
        "https://{}.vault.azure.net/",
        name.to_ascii_lowercase()
    ));
    for (field, default) in [
        ("accessPolicies", json!([])),
        ("enableSoftDelete", json!(true)),
        ("softDeleteRetentionInDays", json!(90)),
        ("enableRbacAuthorization", json!(false)),
        ("publicNetworkAccess", json!("Enabled")),
    ] {
        if out.get(field).is_none() {
            out[field] = default;
        }
    }
    out["provisioningState"] = json!("Succeeded");
    stored["properties"] = out;
    Ok(store(cloud, target, Kind::KeyVault, stored))
}

/// `PUT` of a Log Analytics workspace: SKU and retention default to PerGB2018 and 30 days.
pub(crate) fn put_log_analytics(
    cloud: &mut Cloud,
    ctx: &Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let name = target.name();
    let valid = (4..=63).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !valid {
        return Err(ArmError::new(
            400,
            "InvalidWorkspaceName",
            format!(
                "The workspace name '{name}' is invalid. It must be 4 to 63 characters of letters, \
                 digits and '-', and start and end with a letter or digit."
            ),
        ));
    }
    let location = require_location(&body)?;
    let existing = cloud.resources.get(&target.key).cloned();
    let mut props = body.get("properties").cloned().unwrap_or(json!({}));
    if props.get("sku").is_none() {
        props["sku"] = json!({"name": "PerGB2018"});
    }
    if props.get("retentionInDays").is_none() {
        props["retentionInDays"] = json!(30);
    }
    let customer = existing
        .as_ref()
        .and_then(|r| r.body.at("/properties/customerId").cloned())
        .unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
    props["customerId"] = customer;
    props["provisioningState"] = json!("Succeeded");
    props["publicNetworkAccessForIngestion"] = json!("Enabled");
    props["publicNetworkAccessForQuery"] = json!("Enabled");
    let mut stored = envelope(
        &target.id_in(cloud),
        name,
        Kind::LogAnalyticsWorkspace,
        Some(&location),
        &body,
    );
    stored["properties"] = props;
    Ok(store(cloud, target, Kind::LogAnalyticsWorkspace, stored))
}

/// `PUT` of an Application Insights component: `kind` and `properties.Application_Type` are
/// required; a `WorkspaceResourceId` must name a Log Analytics workspace that exists.
pub(crate) fn put_insights(
    cloud: &mut Cloud,
    ctx: &Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    if body.get("kind").and_then(Value::as_str).is_none() {
        return Err(required("kind", ""));
    }
    let props = body.get("properties").cloned().unwrap_or(json!({}));
    if props
        .get("Application_Type")
        .and_then(Value::as_str)
        .is_none()
    {
        return Err(required("Application_Type", "properties"));
    }
    let logs = props.get("WorkspaceResourceId").and_then(Value::as_str);
    if let Some(logs) = logs {
        let found = cloud
            .resources
            .get(&key(logs))
            .is_some_and(|r| r.kind == Kind::LogAnalyticsWorkspace);
        if !found {
            return Err(ArmError::new(
                400,
                "BadRequest",
                format!(
                    "The Log Analytics workspace '{logs}' given as WorkspaceResourceId could not \
                     be found."
                ),
            ));
        }
    }
    let existing = cloud.resources.get(&target.key).cloned();
    let kept = |field: &str| {
        existing
            .as_ref()
            .and_then(|r| r.body.at(&format!("/properties/{field}")).cloned())
    };
    let instrumentation =
        kept("InstrumentationKey").unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
    let app_id = kept("AppId").unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
    let region = crate::emulator::config::normalize_location(&location);
    let mut out = props.clone();
    out["ApplicationId"] = json!(target.name());
    out["AppId"] = app_id;
    out["InstrumentationKey"] = instrumentation.clone();
    out["ConnectionString"] = json!(format!(
        "InstrumentationKey={};IngestionEndpoint=https://{region}-0.in.applicationinsights.azure.com/",
        instrumentation.as_str().unwrap_or_default()
    ));
    out["TenantId"] = json!(target.path.sub);
    out["IngestionMode"] = json!(if logs.is_some() {
        "LogAnalytics"
    } else {
        "ApplicationInsights"
    });
    out["provisioningState"] = json!("Succeeded");
    out["CreationDate"] = kept("CreationDate").unwrap_or_else(|| json!(ctx.now.to_rfc3339()));
    let mut stored = envelope(
        &target.id_in(cloud),
        target.name(),
        Kind::AppInsights,
        Some(&location),
        &body,
    );
    stored["properties"] = out;
    // Application Insights answers 200 for a creation too.
    let reply = store(cloud, target, Kind::AppInsights, stored);
    Ok(Reply {
        status: 200,
        ..reply
    })
}

/// `PUT` of a container registry: `sku.name` required, names 5-50 letters and digits, global;
/// the creation is long-running (201 `Creating` with an Azure-AsyncOperation header).
pub(crate) fn put_registry(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let name = target.name();
    if !(5..=50).contains(&name.len()) || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(ArmError::new(
            400,
            "InvalidRegistryName",
            format!(
                "The registry name '{name}' is invalid: it must be 5 to 50 letters and digits."
            ),
        ));
    }
    let location = require_location(&body)?;
    let sku = body
        .at("/sku/name")
        .and_then(Value::as_str)
        .ok_or_else(|| required("sku", ""))?
        .to_owned();
    if !["Basic", "Standard", "Premium"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(&sku))
    {
        return Err(ArmError::new(
            400,
            "InvalidSku",
            format!("The sku '{sku}' is invalid: use Basic, Standard or Premium."),
        ));
    }
    if named_elsewhere(cloud, Kind::ContainerRegistry, name, &target.key) {
        return Err(ArmError::new(
            409,
            "AlreadyInUse",
            format!("The registry {name} is already in use."),
        ));
    }
    let existing = cloud.resources.get(&target.key).cloned();
    let mut props = body.get("properties").cloned().unwrap_or(json!({}));
    props["loginServer"] = json!(format!("{}.azurecr.io", name.to_ascii_lowercase()));
    if props.get("adminUserEnabled").is_none() {
        props["adminUserEnabled"] = json!(false);
    }
    props["creationDate"] = existing
        .as_ref()
        .and_then(|r| r.body.at("/properties/creationDate").cloned())
        .unwrap_or_else(|| json!(ctx.now.to_rfc3339()));
    let mut stored = envelope(
        &target.id_in(cloud),
        name,
        Kind::ContainerRegistry,
        Some(&location),
        &body,
    );
    stored["sku"] = json!({"name": sku, "tier": sku});
    if let Some(existing) = existing {
        props["provisioningState"] = existing
            .body
            .at("/properties/provisioningState")
            .cloned()
            .unwrap_or(json!("Succeeded"));
        stored["properties"] = props;
        let mut resource = existing;
        resource.body = stored.clone();
        cloud.put_resource(target.key.clone(), resource);
        return Ok(Reply::json(200, stored));
    }
    props["provisioningState"] = json!("Creating");
    stored["properties"] = props;
    let mut resource =
        cloud.new_resource(target.id.clone(), Kind::ContainerRegistry, stored.clone());
    let real = ops::base_latency(Kind::ContainerRegistry, &OpKind::Put, None);
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        Kind::ContainerRegistry.namespace(),
        &location,
        real,
    );
    resource.op = Some(op.id.clone());
    cloud.put_resource(target.key.clone(), resource);
    Ok(Reply::json(201, stored).headers(ops::put_headers(ctx, &op)))
}

/// `POST .../providers/Microsoft.KeyVault/locations/{loc}/deletedVaults/{name}/purge`
/// (Vaults_PurgeDeleted): forgets a soft-deleted vault, freeing its name. Azure may answer 202
/// and purge in the background (a long-running operation) or 200 when done; here the purge is
/// done when the answer leaves, so it is 200. A name with no deleted vault is 404.
pub(crate) fn purge_vault(cloud: &mut Cloud, ctx: &Ctx<'_>, name: &str) -> Result<Reply, ArmError> {
    if ctx.method != "POST" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    if cloud
        .deleted_vaults
        .remove(&name.to_ascii_lowercase())
        .is_none()
    {
        return Err(ArmError::new(
            404,
            "ResourceNotFound",
            format!("The deleted vault '{name}' was not found."),
        ));
    }
    Ok(Reply::empty(200))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vault_names_follow_key_vaults_rule() {
        for good in ["kv1", "dsinfra-ws-kv-0a1b2c3d", "abc"] {
            assert!(valid_vault_name(good), "{good}");
        }
        for bad in [
            "ab",
            "1kv",
            "kv-",
            "k--v",
            "k_v",
            "abcdefghijklmnopqrstuvwxy",
        ] {
            assert!(!valid_vault_name(bad), "{bad}");
        }
    }
}
