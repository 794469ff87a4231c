//! PATCH as ARM does it, per resource type: the request is a JSON merge patch (RFC 7396, which
//! ARM's resource-provider contract prescribes for PATCH) of the type's update model, applied
//! over the stored resource, and the result goes through the type's PUT, so that one function
//! per type holds the rules of both (a VM's disks, quota and fixed properties; a disk's size).
//!
//! What each type's update model may carry comes from the official specs:
//! `VirtualMachineUpdate` (a long-running operation, like the PUT), `DiskUpdate` (long-running),
//! `AvailabilitySetUpdate` and `StorageAccountUpdateParameters` (synchronous), and the tags-only
//! models (`TagsObject` for the network types, `UpdateResource` for placement groups), whose
//! PATCH changes tags and nothing else, synchronously.

use serde_json::{Value, json};

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::json::{At as _, merge_patch};
use super::render::render;
use super::resource::Target;
use super::store::{Cloud, Kind, Resource};
use super::{compute, ml, network, storage};

/// `PATCH` of a resource: see the module documentation for what each type accepts.
pub(crate) fn patch(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let update = ctx.body();
    if !update.is_object() {
        return Err(ArmError::invalid_request(
            "The request content must be a JSON object.",
        ));
    }
    let Some(stored) = cloud
        .resources
        .get(&target.key)
        .filter(|r| !r.hidden)
        .cloned()
    else {
        return Err(target.not_found());
    };
    match target.kind {
        Kind::VirtualMachine => through_put(ctx, &stored, &update, |ctx| {
            compute::put_vm(cloud, ctx, target)
        }),
        // The disk's PUT checks the update rules (`check_disk_update`) for both.
        Kind::Disk => through_put(ctx, &stored, &update, |ctx| {
            compute::put_disk(cloud, ctx, target)
        }),
        Kind::AvailabilitySet => through_put(ctx, &stored, &update, |ctx| {
            compute::put_avset(cloud, ctx, target)
        }),
        Kind::StorageAccount => patch_account(cloud, ctx, target, &stored, &update),
        Kind::MlCompute => ml::patch_compute(cloud, ctx, target, stored, &update),
        _ => Ok(patch_tags(cloud, ctx, target, &update)),
    }
}

/// Runs the type's PUT with the update merged over the stored resource as its body, then puts
/// the request's own body back (the server validates and logs what the client sent).
fn through_put(
    ctx: &mut Ctx<'_>,
    stored: &Resource,
    update: &Value,
    put: impl FnOnce(&mut Ctx<'_>) -> Result<Reply, ArmError>,
) -> Result<Reply, ArmError> {
    let mut merged = merge_patch(stored.body.clone(), update);
    // Tags are one value to ARM: a PATCH's tags replace the set (so a tag can be removed).
    if let Some(tags) = update.get("tags").filter(|t| t.is_object()) {
        merged["tags"] = tags.clone();
    }
    let sent = ctx.body.replace(merged);
    let reply = put(ctx);
    ctx.body = sent;
    reply
}

/// The tags-only update models: the tags replace the resource's tags; nothing else changes.
fn patch_tags(cloud: &mut Cloud, ctx: &Ctx<'_>, target: &Target<'_>, update: &Value) -> Reply {
    let Some(resource) = cloud.resources.get_mut(&target.key) else {
        return Reply::from(target.not_found());
    };
    if let Some(tags) = update.get("tags") {
        resource.body["tags"] = tags.clone();
    }
    if target.kind.has_etag() {
        resource.body["etag"] = json!(network::new_etag());
    }
    let resource = resource.clone();
    Reply::json(200, render(cloud, ctx, &resource))
}

/// A storage account's SKU changes only between the standard redundancies ARM converts in place
/// (LRS, GRS, RA-GRS); Premium and zone-redundant accounts keep theirs.
fn convertible_sku(sku: &str) -> bool {
    matches!(
        sku.to_ascii_uppercase().as_str(),
        "STANDARD_LRS" | "STANDARD_GRS" | "STANDARD_RAGRS"
    )
}

/// `StorageAccountUpdateParameters`: properties merge through the account's update (network
/// rules checked as on PUT), synchronously; `kind` only upgrades a general-purpose v1 or blob
/// account to StorageV2; the SKU converts only between standard LRS/GRS/RA-GRS.
fn patch_account(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    stored: &Resource,
    update: &Value,
) -> Result<Reply, ArmError> {
    let old_kind = stored
        .body
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("StorageV2");
    let new_kind = update.get("kind").and_then(Value::as_str);
    if let Some(new_kind) = new_kind
        && !new_kind.eq_ignore_ascii_case(old_kind)
        && !(new_kind == "StorageV2" && matches!(old_kind, "Storage" | "BlobStorage"))
    {
        return Err(ArmError::new(
            400,
            "InvalidValuesForRequestParameters",
            "Values for request parameters are invalid: kind.",
        ));
    }
    let old_sku = stored
        .body
        .at("/sku/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let new_sku = update.at("/sku/name").and_then(Value::as_str);
    if let Some(new_sku) = new_sku
        && !new_sku.eq_ignore_ascii_case(old_sku)
        && !(convertible_sku(old_sku) && convertible_sku(new_sku))
    {
        return Err(ArmError::new(
            400,
            "StorageAccountTypeConversionNotAllowed",
            format!("Storage account type cannot be changed to {new_sku}."),
        ));
    }
    through_put(ctx, stored, update, |ctx| {
        storage::put_account(cloud, ctx, target)
    })?;
    // The account's update path keeps tags and properties; the envelope changes are made here.
    let Some(account) = cloud.resources.get_mut(&target.key) else {
        return Err(target.not_found());
    };
    if let Some(kind) = new_kind {
        account.body["kind"] = json!(kind);
        if kind == "StorageV2" && account.body.at("/properties/accessTier").is_none() {
            account.body["properties"]["accessTier"] = json!("Hot");
        }
    }
    if let Some(sku) = new_sku {
        account.body["sku"] = json!({"name": sku, "tier": "Standard"});
    }
    let account = account.clone();
    Ok(Reply::json(200, render(cloud, ctx, &account)))
}
