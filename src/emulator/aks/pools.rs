//! Agent pools: the rules AKS applies to a pool, whether it comes inside a cluster's
//! `agentPoolProfiles` or as its own `agentPools/{name}` PUT, and the pool's representation.
//!
//! From the 2025-10-01 spec's own words: a pool name matches `^[a-z][a-z0-9]{0,11}$`; `count` is
//! 1 to 1000 for System pools and 0 to 1000 for User pools (default 1); a System pool runs Linux
//! on a size with at least 2 vCPUs and 4 GB; `gpuProfile.driver` is `Install` (the default) or
//! `None`; `nodeTaints` are "added to new nodes during node pool create and scale". What is fixed
//! once a pool exists (its size, its GPU driver choice, its OS) is refused as ARM refuses a
//! property change (`PropertyChangeNotAllowed`). A cluster keeps at least one System pool.

use serde_json::{Value, json};

use super::HIDDEN;
use super::versions;
use crate::emulator::compute::check_nodes;
use crate::emulator::config::normalize_location;
use crate::emulator::error::ArmError;
use crate::emulator::http::Ctx;
use crate::emulator::json::At as _;
use crate::emulator::resource::{key, parent_key};
use crate::emulator::store::{Cloud, Kind, Resource};

/// What AKS reports as the image of every node, a fixed value here.
const NODE_IMAGE: &str = "AKSUbuntu-2204gen2containerd-202511.07.0";

/// Counts the spec allows, by mode.
const MAX_COUNT: u64 = 1000;

fn invalid(parameter: &str, message: impl AsRef<str>) -> ArmError {
    ArmError::new(
        400,
        "InvalidParameter",
        format!(
            "The value of parameter {parameter} is invalid. {}",
            message.as_ref()
        ),
    )
}

fn fixed(property: &str) -> ArmError {
    ArmError::new(
        400,
        "PropertyChangeNotAllowed",
        format!(
            "Changing property '{property}' is not allowed: it is fixed when the agent pool is \
             created. Create a new agent pool instead."
        ),
    )
}

/// What the cluster a pool belongs to says about it.
pub(super) struct InCluster<'a> {
    pub sub: &'a str,
    pub location: &'a str,
    /// The control plane's patch version: a pool's default, and its ceiling.
    pub version: &'a str,
}

/// Checks a pool as asked (its `properties`, or a profile with its `name`) and returns the
/// properties to store with the nodes it allocates; the quota is the caller's
/// ([`check_quota`]: a cluster PUT checks all its pools together).
pub(super) fn check(
    ctx: &Ctx<'_>,
    name: &str,
    asked: &Value,
    cluster: &InCluster<'_>,
    existing: Option<&Resource>,
) -> Result<(Value, Allocation), ArmError> {
    // A PUT of an existing pool keeps what it does not name (AKS's own stop example sends only
    // `powerState`).
    let merged;
    let asked = match existing.and_then(|p| p.body.get("properties")) {
        Some(before) => {
            merged = crate::emulator::json::merge_patch(before.clone(), asked);
            &merged
        }
        None => asked,
    };
    let (mode, count) = mode_and_count(name, asked)?;
    let size_name = asked
        .get("vmSize")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("agentPoolProfile.vmSize", "A VM size is required."))?;
    let size = ctx
        .config
        .vm_size(size_name)
        .filter(|s| s.offered_in(&normalize_location(cluster.location)))
        .ok_or_else(|| {
            invalid(
                "agentPoolProfile.vmSize",
                format!(
                    "The VM size {size_name} is not available in location '{}'.",
                    cluster.location
                ),
            )
        })?;
    let os = asked
        .get("osType")
        .and_then(Value::as_str)
        .unwrap_or("Linux");
    if mode == "System" {
        let small = size.vcpus < 2 || size.memory_mb.is_some_and(|mb| mb < 4096);
        if small || !os.eq_ignore_ascii_case("Linux") {
            return Err(invalid(
                "agentPoolProfile.mode",
                format!(
                    "System pool '{name}' must run Linux on a size with at least 2 vCPUs and 4 GB \
                     of memory ({size_name} has {} vCPUs).",
                    size.vcpus
                ),
            ));
        }
    }
    let driver = asked.at("/gpuProfile/driver").and_then(Value::as_str);
    if let Some(existing) = existing {
        check_fixed(existing, size_name, os, driver)?;
    }
    let asked_version = asked
        .get("orchestratorVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty());
    let version = versions::resolve(asked_version.or(Some(cluster.version)), cluster.location)?;
    if version_after(&version, cluster.version) {
        return Err(invalid(
            "agentPoolProfile.orchestratorVersion",
            format!(
                "The node pool version {version} cannot be greater than the control plane \
                 version {}.",
                cluster.version
            ),
        ));
    }
    let stopping = asked
        .at("/powerState/code")
        .and_then(Value::as_str)
        .is_some_and(|c| c.eq_ignore_ascii_case("Stopped"));
    let nodes = if stopping {
        0
    } else {
        u32::try_from(count).unwrap_or(u32::MAX)
    };
    let props = stored_properties(asked, (mode, count, size_name, os), asked_version, &version);
    let allocation = Allocation {
        size: size_name.to_owned(),
        nodes,
    };
    Ok((props, allocation))
}

/// The nodes a checked pool allocates: `nodes` VMs of `size` (none for a pool asked stopped).
pub(super) struct Allocation {
    pub size: String,
    pub nodes: u32,
}

/// Checks that the pools one request allocates (`allocations`) fit Compute's quota together,
/// leaving out what the pools `except` (those of the request) hold today.
pub(super) fn check_quota(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    cluster: &InCluster<'_>,
    allocations: &[Allocation],
    except: &[&str],
) -> Result<(), ArmError> {
    let wants: Vec<(&str, u32)> = allocations
        .iter()
        .map(|a| (a.size.as_str(), a.nodes))
        .collect();
    check_nodes(
        cloud,
        ctx.config,
        (cluster.sub, cluster.location),
        &wants,
        except,
    )
    .map_err(|e| quota_exceeded(&e))
}

/// The properties stored for a checked pool: what was asked, with AKS's values and defaults.
fn stored_properties(
    asked: &Value,
    (mode, count, size_name, os): (&str, u64, &str, &str),
    asked_version: Option<&str>,
    version: &str,
) -> Value {
    let mut props = asked.clone();
    if let Some(map) = props.as_object_mut() {
        for computed in [
            "name",
            "provisioningState",
            "powerState",
            "currentOrchestratorVersion",
            "nodeImageVersion",
            "eTag",
            "status",
        ] {
            map.remove(computed);
        }
    }
    props["count"] = json!(count);
    props["vmSize"] = json!(size_name);
    props["mode"] = json!(mode);
    props["osType"] = json!(os);
    props["type"] = json!("VirtualMachineScaleSets");
    props["orchestratorVersion"] = json!(asked_version.unwrap_or(version));
    props["currentOrchestratorVersion"] = json!(version);
    props["nodeImageVersion"] = json!(NODE_IMAGE);
    if props.get("maxPods").is_none() {
        props["maxPods"] = json!(110);
    }
    if props.get("enableAutoScaling").is_none() {
        props["enableAutoScaling"] = json!(false);
    }
    if props.get("upgradeSettings").is_none() {
        // AKS's default surge for a new pool.
        props["upgradeSettings"] = json!({"maxSurge": "10%"});
    }
    props["eTag"] = json!(new_etag());
    props
}

/// A pool's name, mode and node count, checked.
fn mode_and_count(name: &str, asked: &Value) -> Result<(&'static str, u64), ArmError> {
    if !valid_name(name) {
        return Err(invalid(
            "agentPoolProfile.name",
            format!(
                "'{name}' must start with a lowercase letter and hold at most 12 lowercase \
                 letters and digits."
            ),
        ));
    }
    let mode = match asked.get("mode").and_then(Value::as_str) {
        None => "User",
        Some(m) if m.eq_ignore_ascii_case("System") => "System",
        Some(m) if m.eq_ignore_ascii_case("User") => "User",
        Some(other) => {
            return Err(invalid(
                "agentPoolProfile.mode",
                format!("'{other}' is not emulated: use System or User."),
            ));
        }
    };
    let count = asked.get("count").and_then(Value::as_u64).unwrap_or(1);
    let least = u64::from(mode == "System");
    if !(least..=MAX_COUNT).contains(&count) {
        return Err(invalid(
            "agentPoolProfile.count",
            format!(
                "{count} nodes in {mode} pool '{name}': allowed values are {least} to \
                 {MAX_COUNT} (inclusive) for {} pools.",
                mode.to_ascii_lowercase()
            ),
        ));
    }
    Ok((mode, count))
}

/// A new opaque `eTag`: AKS changes a pool's (and a cluster's) on every write.
pub(super) fn new_etag() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The power a pool's PUT asks for (`properties.powerState.code`), if any. A System pool cannot
/// be stopped (AKS's node pool start/stop documentation): stop the cluster instead.
pub(super) fn asked_power(
    asked: &Value,
    name: &str,
    mode: Option<&str>,
) -> Result<Option<&'static str>, ArmError> {
    let Some(code) = asked.at("/powerState/code").and_then(Value::as_str) else {
        return Ok(None);
    };
    if code.eq_ignore_ascii_case("Stopped") {
        if mode.is_some_and(|m| m.eq_ignore_ascii_case("System")) {
            return Err(ArmError::new(
                400,
                "OperationNotAllowed",
                format!("System agent pool '{name}' cannot be stopped: stop the cluster instead."),
            ));
        }
        return Ok(Some("Stopped"));
    }
    Ok(Some("Running"))
}

/// AKS reports Compute's quota refusal in its own preflight wrapping; the counts are Compute's.
fn quota_exceeded(compute: &ArmError) -> ArmError {
    ArmError::new(
        400,
        "QuotaExceeded",
        format!(
            "Preflight validation check for resource(s) for container service failed. Message: {}",
            compute.message
        ),
    )
}

fn check_fixed(
    existing: &Resource,
    size: &str,
    os: &str,
    driver: Option<&str>,
) -> Result<(), ArmError> {
    let has = |pointer: &str| existing.body.at(pointer).and_then(Value::as_str);
    if has("/properties/vmSize").is_some_and(|s| !s.eq_ignore_ascii_case(size)) {
        return Err(fixed("vmSize"));
    }
    if has("/properties/osType").is_some_and(|o| !o.eq_ignore_ascii_case(os)) {
        return Err(fixed("osType"));
    }
    let before = has("/properties/gpuProfile/driver").unwrap_or("Install");
    if !before.eq_ignore_ascii_case(driver.unwrap_or("Install")) {
        return Err(fixed("gpuProfile.driver"));
    }
    Ok(())
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 12
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Whether patch version `a` is newer than `b` (both `major.minor.patch`).
fn version_after(a: &str, b: &str) -> bool {
    let parts = |v: &str| -> Vec<u32> { v.split('.').filter_map(|p| p.parse().ok()).collect() };
    parts(a) > parts(b)
}

/// Whether `pool` is its cluster's last System pool (deleting it, or making it a User pool,
/// would leave the cluster without one).
pub(super) fn last_system_pool(cloud: &Cloud, pool_key: &str) -> bool {
    let Some(cluster_key) = parent_key(pool_key) else {
        return false;
    };
    let system = |p: &&Resource| {
        p.body
            .at("/properties/mode")
            .and_then(Value::as_str)
            .is_some_and(|m| m.eq_ignore_ascii_case("System"))
    };
    let systems: Vec<&Resource> = cloud
        .children(cluster_key, Kind::AgentPool)
        .into_iter()
        .filter(system)
        .collect();
    systems.len() == 1 && key(&systems[0].id) == pool_key
}

/// The refusal of a change that would leave a cluster without a System pool.
pub(super) fn needs_a_system_pool(name: &str) -> ArmError {
    ArmError::new(
        400,
        "OperationNotAllowed",
        format!(
            "Agent pool '{name}' is the cluster's last System mode pool: a cluster needs at least \
             one System pool. Add another System pool first."
        ),
    )
}

/// A pool's GET view: its stored properties with the power state of its cluster.
pub(super) fn render(cloud: &Cloud, pool: &Resource) -> Value {
    let mut body = pool.body.clone();
    if let Some(map) = body.as_object_mut() {
        map.remove(HIDDEN);
    }
    let cluster_power = parent_key(&key(&pool.id))
        .and_then(|cluster| cloud.resources.get(cluster))
        .and_then(|c| c.power.clone());
    let power = match cluster_power.as_deref() {
        Some("Stopped") => "Stopped".to_owned(),
        _ => pool.power.clone().unwrap_or_else(|| "Running".into()),
    };
    if let Some(props) = body.get_mut("properties").filter(|p| p.is_object()) {
        props["powerState"] = json!({"code": power});
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_names_follow_the_specs_pattern() {
        assert!(valid_name("gpu"));
        assert!(valid_name("a12345678901"));
        assert!(!valid_name("a123456789012"));
        assert!(!valid_name("Gpu"));
        assert!(!valid_name("1gpu"));
        assert!(!valid_name("gpu-pool"));
    }

    #[test]
    fn versions_compare_by_number() {
        assert!(version_after("1.34.0", "1.33.3"));
        assert!(!version_after("1.33.10", "1.34.0"));
        assert!(version_after("1.33.10", "1.33.9"));
    }
}
