//! Microsoft.DevTestLab global schedules (2018-09-15), used for VM auto-shutdown: synchronous
//! PUT (201/200), GET, and DELETE (200/204), with ids and types in lower case as DTL answers.

use serde_json::{Value, json};

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::resource::{Target, envelope, key, require_location};
use super::store::{Cloud, Kind};

pub(crate) fn put(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let existing = cloud.resources.get(&target.key).cloned();
    // The spec makes location optional for schedules; ARM defaults it from the group.
    let location = require_location(&body).or_else(|_| {
        cloud
            .resources
            .get(&target.group_key)
            .map(|g| g.location().to_owned())
            .ok_or_else(|| ArmError::group_not_found(&target.path.group))
    })?;
    let mut props = body
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(vm) = props.get("targetResourceId").and_then(Value::as_str)
        && cloud.resources.get(&key(vm)).is_none_or(|r| r.hidden)
    {
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            format!("The target resource '{vm}' does not exist."),
        )
        .with_target("targetResourceId"));
    }
    props.insert("provisioningState".into(), json!("Succeeded"));
    let (created, unique) = existing.as_ref().map_or_else(
        || {
            (
                json!(ctx.now.to_rfc3339()),
                json!(uuid::Uuid::new_v4().to_string()),
            )
        },
        |old| {
            (
                old.body["properties"]["createdDate"].clone(),
                old.body["properties"]["uniqueIdentifier"].clone(),
            )
        },
    );
    props.insert("createdDate".into(), created);
    props.insert("uniqueIdentifier".into(), unique);
    props
        .entry("notificationSettings")
        .or_insert(json!({"status": "Disabled", "timeInMinutes": 30}));
    let mut stored = envelope(
        &target.id,
        target.name(),
        Kind::Schedule,
        Some(&location),
        &body,
    );
    stored["properties"] = Value::Object(props);
    let schedule = cloud.new_resource(target.id.clone(), Kind::Schedule, stored.clone());
    cloud.put_resource(target.key.clone(), schedule);
    Ok(Reply::json(
        if existing.is_some() { 200 } else { 201 },
        stored,
    ))
}
