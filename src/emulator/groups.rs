//! Resource groups (Microsoft.Resources 2025-04-01): synchronous PUT, GET and HEAD, and a
//! long-running DELETE that cascades to everything inside and blocks new writes meanwhile.

use serde_json::{Value, json};

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::resource::key;
use super::store::{Cloud, Kind, OpKind};
use super::{ops, paging};

fn group_key(sub: &str, group: &str) -> String {
    key(&format!("/subscriptions/{sub}/resourceGroups/{group}"))
}

/// Finds a group: `(key, stored name, being deleted)`, or ARM's 404 ResourceGroupNotFound.
pub(crate) fn existing(
    cloud: &Cloud,
    sub: &str,
    group: &str,
) -> Result<(String, String, bool), ArmError> {
    let key = group_key(sub, group);
    let resource = cloud
        .resources
        .get(&key)
        .ok_or_else(|| ArmError::group_not_found(group))?;
    let deleting = resource.provisioning_state() == Some("Deleting");
    Ok((key, resource.name().to_owned(), deleting))
}

/// Name rules: 1-90 characters of letters, digits, `_ - . ( )`, not ending with `.`.
fn valid_name(name: &str) -> bool {
    (1..=90).contains(&name.chars().count())
        && !name.ends_with('.')
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '(' | ')'))
}

pub(crate) fn handle(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    sub: &str,
    group: &str,
) -> Result<Reply, ArmError> {
    let key = group_key(sub, group);
    match ctx.method.as_str() {
        "GET" => cloud
            .resources
            .get(&key)
            .map(|g| Reply::json(200, g.body.clone()))
            .ok_or_else(|| ArmError::group_not_found(group)),
        "HEAD" => Ok(Reply::empty(if cloud.resources.contains_key(&key) {
            204
        } else {
            404
        })),
        "PUT" => put(cloud, ctx, sub, group, &key),
        "PATCH" => {
            let body = ctx.body();
            let resource = cloud
                .resources
                .get_mut(&key)
                .ok_or_else(|| ArmError::group_not_found(group))?;
            if let Some(tags) = body.get("tags") {
                resource.body["tags"] = tags.clone();
            }
            Ok(Reply::json(200, resource.body.clone()))
        }
        "DELETE" => delete(cloud, ctx, group, &key),
        other => Err(ArmError::method_not_allowed(other)),
    }
}

fn put(
    cloud: &mut Cloud,
    ctx: &Ctx<'_>,
    sub: &str,
    group: &str,
    key: &str,
) -> Result<Reply, ArmError> {
    if !valid_name(group) {
        return Err(ArmError::new(
            400,
            "InvalidResourceGroupName",
            format!(
                "Resource group name '{group}' is invalid. It can contain only alphanumeric \
                 characters, underscores, hyphens, periods and parentheses, and cannot end with a \
                 period."
            ),
        ));
    }
    let body = ctx.body();
    let location = super::resource::require_location(&body)?;
    if let Some(existing) = cloud.resources.get_mut(key) {
        if existing.provisioning_state() == Some("Deleting") {
            return Err(ArmError::group_being_deleted(group));
        }
        if !super::config::normalize_location(existing.location())
            .eq(&super::config::normalize_location(&location))
        {
            return Err(ArmError::new(
                409,
                "InvalidResourceGroupLocation",
                format!(
                    "Invalid resource group location '{location}'. The Resource group already \
                     exists in location '{}'.",
                    existing.location()
                ),
            ));
        }
        if let Some(tags) = body.get("tags") {
            existing.body["tags"] = tags.clone();
        }
        return Ok(Reply::json(200, existing.body.clone()));
    }
    let id = format!("/subscriptions/{sub}/resourceGroups/{group}");
    let mut stored = json!({
        "id": id,
        "name": group,
        "type": Kind::ResourceGroup.type_name(),
        "location": location,
        "properties": {"provisioningState": "Succeeded"},
    });
    for field in ["tags", "managedBy"] {
        if let Some(value) = body.get(field) {
            stored[field] = value.clone();
        }
    }
    let resource = cloud.new_resource(id, Kind::ResourceGroup, stored.clone());
    cloud.resources.insert(key.to_owned(), resource);
    Ok(Reply::json(201, stored))
}

fn delete(cloud: &mut Cloud, ctx: &mut Ctx<'_>, group: &str, key: &str) -> Result<Reply, ArmError> {
    let Some(existing) = cloud.resources.get(key) else {
        return Err(ArmError::group_not_found(group));
    };
    if let Some(op) = existing.op.as_ref().and_then(|id| cloud.operations.get(id)) {
        return Ok(Reply::empty(202).headers(ops::group_headers(ctx, op)));
    }
    // The group takes as long as its slowest member, plus its own second.
    let prefix = format!("{key}/");
    let slowest = cloud
        .resources
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(_, r)| ops::base_latency(r.kind, &OpKind::Delete, None))
        .max()
        .unwrap_or_default();
    let real = ops::base_latency(Kind::ResourceGroup, &OpKind::GroupDelete, None) + slowest;
    let location = existing.location().to_owned();
    let op = ops::start(
        cloud,
        ctx,
        OpKind::GroupDelete,
        key,
        "Microsoft.Resources",
        &location,
        real,
    );
    for (k, resource) in &mut cloud.resources {
        if k == key || k.starts_with(&prefix) {
            if resource.provisioning_state().is_some() {
                resource.set_provisioning_state("Deleting");
            }
            if k == key {
                resource.op = Some(op.id.clone());
            }
        }
    }
    Ok(Reply::empty(202).headers(ops::group_headers(ctx, &op)))
}

pub(crate) fn list(cloud: &Cloud, ctx: &Ctx<'_>, sub: &str) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let prefix = key(&format!("/subscriptions/{sub}/"));
    let groups: Vec<Value> = cloud
        .of_kind(Kind::ResourceGroup)
        .into_iter()
        .filter(|g| key(&g.id).starts_with(&prefix))
        .map(|g| g.body.clone())
        .collect();
    paging::page(ctx, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_follow_arm_rules() {
        assert!(valid_name("my-rg_(1).x"));
        assert!(!valid_name("ends-with-dot."));
        assert!(!valid_name("has space"));
        assert!(!valid_name(&"a".repeat(91)));
        assert!(!valid_name(""));
    }
}
