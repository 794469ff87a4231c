//! Preview features (Microsoft.Features 2021-07-01, `features.json`): Features_Get, Features_List,
//! Features_ListAll, Features_Register and Features_Unregister, per subscription.
//!
//! Two Compute features change what a VM PUT gets (issue 29; compute/security.rs):
//! `TrustedLaunchByDefaultPreview` and `UseStandardSecurityType`. A subscription starts with the
//! features of its configuration ([`EmulatorConfig::features`]) registered; a register or an
//! unregister request changes its own subscription's state, which the VM handler then reads.
//! Azure approves some features by hand and leaves them `Pending`; these two register on request,
//! and the emulator answers `Registered` at once (a real registration can take minutes).

use serde_json::{Value, json};

use super::config::EmulatorConfig;
use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::store::Cloud;

/// The features the emulator lists for a namespace besides those registered.
const KNOWN: &[&str] = &[
    super::config::TRUSTED_LAUNCH_BY_DEFAULT,
    super::config::USE_STANDARD_SECURITY_TYPE,
];

fn key(sub: &str, name: &str) -> String {
    format!("{sub}/{name}").to_ascii_lowercase()
}

/// Whether subscription `sub` is registered for `name` (`Namespace/Name`).
pub(crate) fn registered(cloud: &Cloud, config: &EmulatorConfig, sub: &str, name: &str) -> bool {
    match cloud.features.get(&key(sub, name)) {
        Some(state) => state == "Registered",
        None => config.has_feature(name),
    }
}

fn state(cloud: &Cloud, config: &EmulatorConfig, sub: &str, name: &str) -> &'static str {
    match cloud.features.get(&key(sub, name)).map(String::as_str) {
        Some("Unregistered") => "Unregistered",
        _ if registered(cloud, config, sub, name) => "Registered",
        _ => "NotRegistered",
    }
}

fn feature(cloud: &Cloud, config: &EmulatorConfig, sub: &str, name: &str) -> Value {
    let (namespace, short) = name.split_once('/').unwrap_or(("", name));
    json!({
        "id": format!("/subscriptions/{sub}/providers/Microsoft.Features/providers/{namespace}/features/{short}"),
        "name": format!("{namespace}/{short}"),
        "type": "Microsoft.Features/providers/features",
        "properties": {"state": state(cloud, config, sub, name)},
    })
}

/// `rest`: the path after `/subscriptions/{sub}/providers/Microsoft.Features/`.
pub(crate) fn handle(
    cloud: &mut Cloud,
    ctx: &Ctx<'_>,
    sub: &str,
    rest: &[String],
) -> Result<Reply, ArmError> {
    let is = |i: usize, word: &str| rest.get(i).is_some_and(|s| s.eq_ignore_ascii_case(word));
    let get = ctx.method == "GET";
    let post = ctx.method == "POST";
    match rest.len() {
        // Features_ListAll.
        1 if is(0, "features") && get => Ok(list(cloud, ctx.config, sub, None)),
        // Features_List.
        3 if is(0, "providers") && is(2, "features") && get => {
            Ok(list(cloud, ctx.config, sub, Some(&rest[1])))
        }
        // Features_Get.
        4 if is(0, "providers") && is(2, "features") && get => {
            let name = format!("{}/{}", rest[1], rest[3]);
            Ok(Reply::json(200, feature(cloud, ctx.config, sub, &name)))
        }
        // Features_Register, Features_Unregister.
        5 if is(0, "providers") && is(2, "features") && post => {
            let name = format!("{}/{}", rest[1], rest[3]);
            let to = if is(4, "register") {
                "Registered"
            } else if is(4, "unregister") {
                "Unregistered"
            } else {
                return Err(super::resource::not_implemented(ctx));
            };
            cloud.features.insert(key(sub, &name), to.to_owned());
            cloud.changes += 1;
            Ok(Reply::json(200, feature(cloud, ctx.config, sub, &name)))
        }
        _ if !get && !post => Err(ArmError::method_not_allowed(&ctx.method)),
        _ => Err(super::resource::not_implemented(ctx)),
    }
}

fn list(cloud: &Cloud, config: &EmulatorConfig, sub: &str, namespace: Option<&str>) -> Reply {
    let prefix = format!("{}/", sub.to_ascii_lowercase());
    let mut names: Vec<String> = KNOWN
        .iter()
        .map(|n| (*n).to_owned())
        .chain(config.features.iter().cloned())
        .chain(
            cloud
                .features
                .keys()
                .filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned)),
        )
        .filter(|n| {
            namespace.is_none_or(|ns| {
                n.split_once('/')
                    .is_some_and(|(n, _)| n.eq_ignore_ascii_case(ns))
            })
        })
        .collect();
    names.sort_by_key(|n| n.to_ascii_lowercase());
    names.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    let value: Vec<Value> = names
        .iter()
        .map(|n| feature(cloud, config, sub, n))
        .collect();
    Reply::json(200, json!({"value": value}))
}
