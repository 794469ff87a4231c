//! Microsoft.Storage (2025-01-01): storage accounts (202 + Location creation in the "old
//! model", global name uniqueness, name rules, stable random keys, SAS listing), blob containers
//! and file shares (synchronous PUT and DELETE).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::json::At as _;
use super::ops;
use super::resource::{Target, envelope, key, require_location};
use super::storage_plane::{BlobDataPlane, valid_account_name};
use super::store::{Cloud, Kind, OpKind, Resource};

fn name_invalid(name: &str) -> ArmError {
    ArmError::new(
        400,
        "AccountNameInvalid",
        format!(
            "{name} is not a valid storage account name. Storage account name must be between 3 and \
             24 characters in length and use numbers and lower-case letters only."
        ),
    )
}

/// Any account with this name, in any group of any subscription.
fn account_named<'a>(cloud: &'a Cloud, name: &str) -> Option<&'a Resource> {
    cloud
        .resources
        .values()
        .find(|r| r.kind == Kind::StorageAccount && r.name().eq_ignore_ascii_case(name))
}

fn random_key() -> String {
    let bytes: [u8; 64] = rand::random();
    STANDARD.encode(bytes)
}

/// The account's endpoints; the blob endpoint is Azurite's when the configuration serves the
/// account's blob data plane there.
fn endpoints(name: &str, plane: Option<&BlobDataPlane>) -> Value {
    let blob = plane
        .and_then(|p| p.blob_endpoint(name))
        .unwrap_or_else(|| format!("https://{name}.blob.core.windows.net/"));
    json!({
        "blob": blob,
        "queue": format!("https://{name}.queue.core.windows.net/"),
        "table": format!("https://{name}.table.core.windows.net/"),
        "file": format!("https://{name}.file.core.windows.net/"),
        "web": format!("https://{name}.z13.web.core.windows.net/"),
        "dfs": format!("https://{name}.dfs.core.windows.net/"),
    })
}

/// The properties of a new account: what was asked, plus what the storage provider adds.
fn new_account_properties(
    body: &Value,
    name: &str,
    (location, kind): (&str, &str),
    now: &str,
    plane: Option<&BlobDataPlane>,
) -> serde_json::Map<String, Value> {
    let mut props = body
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    props.insert("provisioningState".into(), json!("Creating"));
    props.insert("creationTime".into(), json!(now));
    props.insert("primaryEndpoints".into(), endpoints(name, plane));
    props.insert("primaryLocation".into(), json!(location));
    props.insert("statusOfPrimary".into(), json!("available"));
    props.insert("keyCreationTime".into(), json!({"key1": now, "key2": now}));
    props
        .entry("supportsHttpsTrafficOnly")
        .or_insert(json!(true));
    props.entry("minimumTlsVersion").or_insert(json!("TLS1_0"));
    props.entry("allowBlobPublicAccess").or_insert(json!(false));
    if kind == "StorageV2" || kind == "BlobStorage" {
        props.entry("accessTier").or_insert(json!("Hot"));
    }
    props.entry("encryption").or_insert(json!({
        "services": {
            "blob": {"keyType": "Account", "enabled": true, "lastEnabledTime": now},
            "file": {"keyType": "Account", "enabled": true, "lastEnabledTime": now},
        },
        "keySource": "Microsoft.Storage",
    }));
    props
}

/// The service endpoint a subnet needs before an account's VNet rule may name it.
const STORAGE_ENDPOINT: &str = "Microsoft.Storage";

/// The account firewall as ARM stores it: the request's `networkAcls` with ARM's defaults
/// filled in (allow everything when absent), each VNet rule checked the way the storage
/// provider checks it. A rule whose subnet lacks the `Microsoft.Storage` service endpoint is
/// refused with ARM's `NetworkAclsValidationFailure` (see docs/emulator.md for the message).
fn network_acls(cloud: &Cloud, requested: Option<&Value>) -> Result<Value, ArmError> {
    let mut acls = requested
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    acls.entry("bypass").or_insert(json!("AzureServices"));
    acls.entry("ipRules").or_insert(json!([]));
    acls.entry("defaultAction").or_insert(json!("Allow"));
    let rules = acls
        .get("virtualNetworkRules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut missing: Vec<(String, String)> = Vec::new();
    let mut checked = Vec::new();
    for mut rule in rules {
        let id = rule
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some((vnet, subnet_name)) = id.split_once("/subnets/") else {
            return Err(ArmError::new(
                400,
                "InvalidValuesForRequestParameters",
                "Values for request parameters are invalid: networkAcls.virtualNetworkRules[*].id. \
                 For more information, see - https://aka.ms/storagenetworkruleset",
            ));
        };
        let endpoints = cloud
            .resources
            .get(&key(&id))
            .filter(|r| r.kind == Kind::Subnet)
            .and_then(|r| r.body.at("/properties/serviceEndpoints"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let has_storage = endpoints.iter().any(|e| {
            e.get("service")
                .and_then(Value::as_str)
                .is_some_and(|s| s.eq_ignore_ascii_case(STORAGE_ENDPOINT))
        });
        if !has_storage {
            missing.push((vnet.to_owned(), subnet_name.to_owned()));
        }
        rule["action"] = rule.get("action").cloned().unwrap_or(json!("Allow"));
        rule["state"] = json!("Succeeded");
        checked.push(rule);
    }
    if let Some((vnet, _)) = missing.first() {
        let subnets: Vec<&str> = missing
            .iter()
            .filter(|(v, _)| v == vnet)
            .map(|(_, s)| s.as_str())
            .collect();
        return Err(ArmError::new(
            400,
            "NetworkAclsValidationFailure",
            format!(
                "Validation of network acls failure: SubnetsHaveNoServiceEndpointsConfigured:Subnets \
                 {} of virtual network {vnet} do not have ServiceEndpoints for Microsoft.Storage \
                 resources configured. Add Microsoft.Storage to subnet's ServiceEndpoints \
                 collection before trying to ACL Microsoft.Storage resources to these subnets..",
                subnets.join(",")
            ),
        ));
    }
    acls.insert("virtualNetworkRules".into(), Value::Array(checked));
    Ok(Value::Object(acls))
}

pub(crate) fn put_account(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let name = target.name().to_owned();
    if !valid_account_name(&name) {
        return Err(name_invalid(&name));
    }
    let body = ctx.body();
    let location = require_location(&body)?;
    if let Some(other) = account_named(cloud, &name)
        && key(&other.id) != target.key
    {
        return Err(ArmError::new(
            409,
            "StorageAccountAlreadyTaken",
            format!("The storage account named {name} is already taken."),
        ));
    }
    let sku = body
        .at("/sku/name")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ArmError::new(
                400,
                "MissingRequiredProperty",
                "The required property 'sku' is missing.",
            )
        })?;
    let kind = body
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("StorageV2")
        .to_owned();
    if let Some(existing) = cloud.resources.get(&target.key).cloned() {
        if let Some(op) = existing.op.as_ref().and_then(|id| cloud.operations.get(id)) {
            // Still being created: the same request is accepted again.
            return Ok(Reply::empty(202).headers(ops::storage_headers(ctx, op)));
        }
        // An update without `networkAcls` keeps the account's firewall; either way its VNet
        // rules are checked against the subnets as they are now.
        let acls = network_acls(
            cloud,
            body.at("/properties/networkAcls")
                .or_else(|| existing.body.at("/properties/networkAcls")),
        )?;
        let stored = cloud
            .resources
            .get_mut(&target.key)
            .ok_or_else(|| ArmError::new(500, "InternalServerError", "account vanished"))?;
        if let Some(tags) = body.get("tags") {
            stored.body["tags"] = tags.clone();
        }
        if let Some(props) = body.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                stored.body["properties"][k] = v.clone();
            }
        }
        stored.body["properties"]["networkAcls"] = acls;
        let stored = stored.clone();
        return Ok(Reply::json(200, render(cloud, &stored)));
    }
    let id = target.id.clone();
    let now = ctx.now.to_rfc3339();
    let plane = ctx.config.blob_data_plane.as_ref();
    let mut props = new_account_properties(&body, &name, (&location, &kind), &now, plane);
    let acls = network_acls(cloud, body.at("/properties/networkAcls"))?;
    props.insert("networkAcls".into(), acls);
    let mut stored_body = envelope(&id, &name, Kind::StorageAccount, Some(&location), &body);
    let tier = if sku.starts_with("Premium") {
        "Premium"
    } else {
        "Standard"
    };
    stored_body["sku"] = json!({"name": sku, "tier": tier});
    stored_body["kind"] = json!(kind);
    stored_body["properties"] = Value::Object(props);
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        "Microsoft.Storage",
        &location,
        ops::base_latency(Kind::StorageAccount, &OpKind::Put, None),
    );
    let mut account = cloud.new_resource(id, Kind::StorageAccount, stored_body);
    account.op = Some(op.id.clone());
    account.hidden = true;
    // An account Azurite serves has the keys Azurite knows, so what is signed with them passes
    // there; a second key Azurite was not given stays random, as it cannot sign for Azurite.
    let mut keys = plane
        .and_then(|p| p.keys_of(&name))
        .map(<[String]>::to_vec)
        .unwrap_or_default();
    keys.resize_with(2, random_key);
    account.keys = keys;
    cloud.put_resource(target.key.clone(), account);
    Ok(Reply::empty(202).headers(ops::storage_headers(ctx, &op)))
}

pub(crate) fn render(_cloud: &Cloud, resource: &Resource) -> Value {
    resource.body.clone()
}

fn child_body(id: &str, name: &str, kind: Kind, request: &Value, now: &str) -> Value {
    let mut props = request
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    props.insert("lastModifiedTime".into(), json!(now));
    if kind == Kind::BlobContainer {
        props.entry("publicAccess").or_insert(json!("None"));
        props.insert("leaseStatus".into(), json!("Unlocked"));
        props.insert("leaseState".into(), json!("Available"));
        props.insert("hasImmutabilityPolicy".into(), json!(false));
        props.insert("hasLegalHold".into(), json!(false));
        props
            .entry("defaultEncryptionScope")
            .or_insert(json!("$account-encryption-key"));
        props
            .entry("denyEncryptionScopeOverride")
            .or_insert(json!(false));
    } else {
        props.entry("shareQuota").or_insert(json!(102_400));
        props
            .entry("accessTier")
            .or_insert(json!("TransactionOptimized"));
        props.entry("enabledProtocols").or_insert(json!("SMB"));
    }
    json!({
        "id": id,
        "name": name,
        "type": kind.type_name(),
        "etag": format!("\"0x8D{:X}\"", rand::random::<u64>() >> 8),
        "properties": props,
    })
}

pub(crate) fn put_child(cloud: &mut Cloud, ctx: &Ctx<'_>, target: &Target<'_>) -> Reply {
    let body = ctx.body();
    let id = target.id_in(cloud);
    let existing = cloud.resources.get(&target.key).cloned();
    let mut stored = child_body(
        &id,
        target.name(),
        target.kind,
        &body,
        &ctx.now.to_rfc3339(),
    );
    if let Some(old) = &existing {
        // Updates merge into the existing properties.
        let mut props = old.body["properties"].clone();
        if let (Some(p), Some(new)) = (props.as_object_mut(), stored["properties"].as_object()) {
            for (k, v) in new {
                p.insert(k.clone(), v.clone());
            }
        }
        stored["properties"] = props;
    }
    let child = cloud.new_resource(id, target.kind, stored.clone());
    cloud.put_resource(target.key.clone(), child);
    Reply::json(if existing.is_some() { 200 } else { 201 }, stored)
}

/// `listKeys` and `regenerateKey` answer alike: every key with its name, value and the time it
/// was made (the account's `keyCreationTime`, which a regeneration moves).
fn keys_body(account: &Resource, created: &str) -> Value {
    let keys: Vec<Value> = account
        .keys
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let name = format!("key{}", i + 1);
            let made = account
                .body
                .at(&format!("/properties/keyCreationTime/{name}"))
                .and_then(Value::as_str)
                .unwrap_or(created);
            json!({"keyName": name, "value": value, "permissions": "FULL", "creationTime": made})
        })
        .collect();
    json!({ "keys": keys })
}

/// `POST .../regenerateKey` with `{"keyName": "key1"|"key2"}`: a new value for that key, the
/// other kept, answered as `listKeys` answers. SAS tokens listed afterwards are signed with the
/// new value, so those signed with the old one no longer match the account's keys. Kerberos
/// keys (`kerb1`, `kerb2`) need Active Directory, which the emulator does not have.
fn regenerate_key(
    cloud: &mut Cloud,
    ctx: &Ctx<'_>,
    target: &Target<'_>,
    created: &str,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let name = body
        .get("keyName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let index = match name.as_str() {
        "key1" => 0,
        "key2" => 1,
        "kerb1" | "kerb2" => return Err(super::resource::not_implemented(ctx)),
        _ => {
            return Err(ArmError::new(
                400,
                "InvalidValuesForRequestParameters",
                "Values for request parameters are invalid: keyName.",
            ));
        }
    };
    let now = ctx.now.to_rfc3339();
    let Some(account) = cloud.resources.get_mut(&target.key) else {
        return Err(target.not_found());
    };
    if let Some(slot) = account.keys.get_mut(index) {
        *slot = random_key();
    }
    if let Some(times) = account
        .body
        .pointer_mut("/properties/keyCreationTime")
        .and_then(Value::as_object_mut)
    {
        times.insert(name, json!(now));
    }
    Ok(Reply::json(200, keys_body(account, created)))
}

/// Drops fractional seconds, as ARM does in the SAS tokens it lists.
fn sas_time(text: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(time) => time
            .with_timezone(&chrono::Utc)
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string(),
        Err(_) => text.to_owned(),
    }
}

fn encode(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            ':' => "%3A".to_owned(),
            '+' => "%2B".to_owned(),
            '/' => "%2F".to_owned(),
            '=' => "%3D".to_owned(),
            other => other.to_string(),
        })
        .collect()
}

fn sign(key_b64: &str, message: &str) -> Result<String, ArmError> {
    let internal = || {
        ArmError::new(
            500,
            "InternalServerError",
            "The account key could not be used.",
        )
    };
    let key = STANDARD.decode(key_b64).map_err(|_| internal())?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|_| internal())?;
    mac.update(message.as_bytes());
    Ok(STANDARD.encode(mac.finalize().into_bytes()))
}

fn field<'a>(body: &'a Value, name: &str) -> Result<&'a str, ArmError> {
    body.get(name).and_then(Value::as_str).ok_or_else(|| {
        ArmError::new(
            400,
            "MissingRequiredProperty",
            format!("The required property '{name}' is missing."),
        )
    })
}

/// The SAS listing actions sign with the account's key1, in the 2015-04-05 format ARM returns.
fn account_sas(account: &Resource, body: &Value) -> Result<Value, ArmError> {
    let (ss, srt, sp) = (
        field(body, "signedServices")?,
        field(body, "signedResourceTypes")?,
        field(body, "signedPermission")?,
    );
    let se = sas_time(field(body, "signedExpiry")?);
    let st = body
        .get("signedStart")
        .and_then(Value::as_str)
        .map(sas_time)
        .unwrap_or_default();
    let spr = body
        .get("signedProtocol")
        .and_then(Value::as_str)
        .unwrap_or("https,http");
    let sip = body
        .get("signedIp")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let key = account_key(account, body)?;
    let message = format!(
        "{}\n{sp}\n{ss}\n{srt}\n{st}\n{se}\n{sip}\n{spr}\n2015-04-05\n",
        account.name()
    );
    let sig = sign(key, &message)?;
    let start = optional_start(&st);
    let token = format!(
        "sv=2015-04-05&ss={ss}&srt={srt}&sp={sp}{start}&se={}&spr={spr}&sig={}",
        encode(&se),
        encode(&sig)
    );
    Ok(json!({ "accountSasToken": token }))
}

fn service_sas(account: &Resource, body: &Value) -> Result<Value, ArmError> {
    let resource = field(body, "canonicalizedResource")?;
    let sr = field(body, "signedResource")?;
    let sp = body
        .get("signedPermission")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let se = body
        .get("signedExpiry")
        .and_then(Value::as_str)
        .map(sas_time)
        .unwrap_or_default();
    let st = body
        .get("signedStart")
        .and_then(Value::as_str)
        .map(sas_time)
        .unwrap_or_default();
    let key = account_key(account, body)?;
    let message = format!("{sp}\n{st}\n{se}\n{resource}\n\n\n\n2015-04-05\n\n\n\n\n");
    let sig = sign(key, &message)?;
    let start = optional_start(&st);
    let token = format!(
        "sv=2015-04-05&sr={sr}{start}&se={}&sp={sp}&sig={}",
        encode(&se),
        encode(&sig)
    );
    Ok(json!({ "serviceSasToken": token }))
}

/// The `&st=` part of a token, present only when a start time was given.
fn optional_start(start: &str) -> String {
    if start.is_empty() {
        String::new()
    } else {
        format!("&st={}", encode(start))
    }
}

fn account_key<'a>(account: &'a Resource, body: &Value) -> Result<&'a str, ArmError> {
    let index = match body.get("keyToSign").and_then(Value::as_str) {
        Some("key2") => 1,
        _ => 0,
    };
    account
        .keys
        .get(index)
        .map(String::as_str)
        .ok_or_else(|| ArmError::new(500, "InternalServerError", "The account has no keys."))
}

pub(crate) fn account_action(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    tail: &str,
) -> Result<Reply, ArmError> {
    let Some(account) = cloud.resources.get(&target.key).cloned() else {
        return Err(target.not_found());
    };
    if account.op.is_some() {
        return Err(ArmError::new(
            409,
            "StorageAccountBeingCreated",
            format!("The storage account {} is being created.", account.name()),
        ));
    }
    if ctx.method != "POST" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let created = account
        .body
        .at("/properties/creationTime")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match tail.to_ascii_lowercase().as_str() {
        "listkeys" => Ok(Reply::json(200, keys_body(&account, &created))),
        "listaccountsas" => Ok(Reply::json(200, account_sas(&account, &ctx.body())?)),
        "listservicesas" => Ok(Reply::json(200, service_sas(&account, &ctx.body())?)),
        "regeneratekey" => regenerate_key(cloud, ctx, target, &created),
        _ => Err(super::resource::not_implemented(ctx)),
    }
}

/// `POST /subscriptions/{s}/providers/Microsoft.Storage/checkNameAvailability`.
pub(crate) fn check_name(cloud: &Cloud, ctx: &Ctx<'_>) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let name = field(&body, "name")?;
    let answer = if !valid_account_name(name) {
        json!({"nameAvailable": false, "reason": "AccountNameInvalid", "message": name_invalid(name).message})
    } else if account_named(cloud, name).is_some() {
        json!({"nameAvailable": false, "reason": "AlreadyExists",
               "message": format!("The storage account named {name} is already taken.")})
    } else {
        json!({"nameAvailable": true})
    };
    Ok(Reply::json(200, answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_names_follow_arm_rules() {
        assert!(valid_account_name("abc123"));
        assert!(!valid_account_name("ab"));
        assert!(!valid_account_name("Upper"));
        assert!(!valid_account_name("has-dash"));
        assert!(!valid_account_name(&"a".repeat(25)));
    }

    #[test]
    fn name_invalid_message_is_exact() {
        assert_eq!(
            name_invalid("Bad_Name").message,
            "Bad_Name is not a valid storage account name. Storage account name must be between 3 \
             and 24 characters in length and use numbers and lower-case letters only."
        );
    }

    #[test]
    fn sas_times_drop_fractions() {
        assert_eq!(
            sas_time("2017-05-24T10:42:03.1567373Z"),
            "2017-05-24T10:42:03Z"
        );
        assert_eq!(encode("a:b+c/d="), "a%3Ab%2Bc%2Fd%3D");
    }
}
