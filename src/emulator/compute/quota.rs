//! vCPU quota on VM creates, and the usages endpoint that reports it.

use serde_json::{Value, json};

use crate::emulator::config::{EmulatorConfig, normalize_location};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::paging;
use crate::emulator::resource::{key, parent_key};
use crate::emulator::store::{Cloud, Kind, Resource};

pub(super) fn vm_size(vm: &Resource) -> Option<&str> {
    vm.body
        .at("/properties/hardwareProfile/vmSize")
        .and_then(Value::as_str)
}

/// Whether a VM holds cores: everything except deallocated (and failed, never allocated) VMs.
pub(super) fn holds_cores(vm: &Resource) -> bool {
    vm.power.as_deref() != Some("deallocated")
}

/// What a subscription's VMs hold in one location, in vCPUs.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    /// Regular VMs of one family (and AKS nodes).
    family: u32,
    /// Regular VMs of every family (and AKS nodes).
    regional: u32,
    /// Spot VMs: they count against the low-priority quota only.
    low_priority: u32,
}

/// The usage of a subscription and location, leaving out one VM.
fn usage(
    cloud: &Cloud,
    config: &EmulatorConfig,
    sub: &str,
    location: &str,
    family: &str,
    except: &[&str],
) -> Held {
    let prefix = key(&format!("/subscriptions/{sub}/"));
    let mut family_usage = 0;
    let mut regional = 0;
    let mut low_priority = 0;
    // Runs over every VM on every VM PUT: compared in place, nothing allocated per VM.
    for vm in cloud.of_kind(Kind::VirtualMachine) {
        let id = vm.id.trim_end_matches('/');
        let in_sub = id
            .get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(&prefix));
        if except.iter().any(|e| id.eq_ignore_ascii_case(e)) || !in_sub || !holds_cores(vm) {
            continue;
        }
        let same_location = vm
            .location()
            .chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .eq(location.chars());
        if !same_location {
            continue;
        }
        let Some(size) = vm_size(vm).and_then(|s| config.vm_size(s)) else {
            continue;
        };
        if super::spot::is_spot(vm) {
            low_priority += size.vcpus;
            continue;
        }
        regional += size.vcpus;
        if size.family.eq_ignore_ascii_case(family) {
            family_usage += size.vcpus;
        }
    }
    // AKS nodes are scale-set VMs in the cluster's node group: they hold the same Compute quota.
    for (pool_key, size, nodes) in pools_holding_cores(cloud, &prefix, location) {
        if except.iter().any(|e| pool_key.eq_ignore_ascii_case(e)) {
            continue;
        }
        let Some(size) = config.vm_size(size) else {
            continue;
        };
        regional += size.vcpus * nodes;
        if size.family.eq_ignore_ascii_case(family) {
            family_usage += size.vcpus * nodes;
        }
    }
    Held {
        family: family_usage,
        regional,
        low_priority,
    }
}

/// The AKS node pools of a subscription (`prefix`: its key) in `location` whose nodes
/// hold cores: `(pool key, size, nodes)`. A stopped cluster's (or stopped pool's) nodes are
/// deallocated, as a deallocated VM's, and hold none.
fn pools_holding_cores<'c>(
    cloud: &'c Cloud,
    prefix: &'c str,
    location: &'c str,
) -> impl Iterator<Item = (String, &'c str, u32)> + 'c {
    cloud
        .of_kind(Kind::AgentPool)
        .into_iter()
        .filter_map(move |pool| {
            let pool_key = key(&pool.id);
            if !pool_key
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
            {
                return None;
            }
            let cluster = cloud.resources.get(parent_key(&pool_key)?)?;
            if cluster.power.as_deref() == Some("Stopped")
                || pool.power.as_deref() == Some("Stopped")
                || normalize_location(cluster.location()) != location
            {
                return None;
            }
            let (size, nodes) = pool_nodes(pool)?;
            Some((pool_key, size, nodes))
        })
}

/// An AKS pool's nodes as stored: `(size, count)`.
pub(crate) fn pool_nodes(pool: &Resource) -> Option<(&str, u32)> {
    let size = pool.body.at("/properties/vmSize").and_then(Value::as_str)?;
    let nodes = pool.body.at("/properties/count").and_then(Value::as_u64)?;
    Some((size, u32::try_from(nodes).unwrap_or(u32::MAX)))
}

/// ARM's OperationNotAllowed for a vCPU quota, in its exact words.
fn quota_error(quota: &str, location: &str, limit: u32, current: u32, required: u32) -> ArmError {
    ArmError::new(
        409,
        "OperationNotAllowed",
        format!(
            "Operation could not be completed as it results in exceeding approved {quota} quota. \
             Additional details - Deployment Model: Resource Manager, Location: {location}, Current \
             Limit: {limit}, Current Usage: {current}, Additional Required: {required}, (Minimum) New \
             Limit Required: {}.",
            current + required
        ),
    )
}

/// Checks that allocating `size` in `location` fits the family and regional quotas, or for a
/// spot VM (`spot`) the regional low-priority quota, which is all a spot VM counts against.
pub(super) fn check_quota(
    cloud: &Cloud,
    config: &EmulatorConfig,
    (sub, location): (&str, &str),
    size: &str,
    vm_key: &str,
    spot: bool,
) -> Result<(), ArmError> {
    if !spot {
        return check_nodes(cloud, config, (sub, location), &[(size, 1)], &[vm_key]);
    }
    let Some(spec) = config.vm_size(size) else {
        return Ok(());
    };
    let location = normalize_location(location);
    let held = usage(cloud, config, sub, &location, &spec.family, &[vm_key]);
    let limit = config.quotas.low_priority_limit;
    if held.low_priority + spec.vcpus > limit {
        return Err(quota_error(
            "LowPriorityCores",
            &location,
            limit,
            held.low_priority,
            spec.vcpus,
        ));
    }
    Ok(())
}

/// Checks that the allocations `wants` (`(size, nodes)` each) in `location` fit the family and
/// regional quotas together, leaving out what `except` (a VM, or the AKS pools being created or
/// scaled) holds today. One request that allocates several pools (a cluster PUT, a start) is
/// refused when their sum does not fit, as Compute refuses the scale sets AKS creates for them
/// one after the other: each pool fitting alone is not enough.
pub(crate) fn check_nodes(
    cloud: &Cloud,
    config: &EmulatorConfig,
    (sub, location): (&str, &str),
    wants: &[(&str, u32)],
    except: &[&str],
) -> Result<(), ArmError> {
    let location = normalize_location(location);
    // vCPUs asked per family (as the config spells it), in the order the families first appear.
    let mut families: Vec<(&str, u32)> = Vec::new();
    for &(size, nodes) in wants {
        let Some(spec) = config.vm_size(size) else {
            continue;
        };
        let vcpus = spec.vcpus.saturating_mul(nodes);
        match families
            .iter_mut()
            .find(|(f, _)| f.eq_ignore_ascii_case(&spec.family))
        {
            Some((_, required)) => *required += vcpus,
            None => families.push((&spec.family, vcpus)),
        }
    }
    let mut regional = 0;
    for &(family, required) in &families {
        let held = usage(cloud, config, sub, &location, family, except);
        // The same for every family: what the region holds.
        regional = held.regional;
        let family_limit = config.quotas.family_limit(&location, family);
        if held.family + required > family_limit {
            return Err(quota_error(
                &format!("{family} Cores"),
                &location,
                family_limit,
                held.family,
                required,
            ));
        }
    }
    let regional_required: u32 = families.iter().map(|(_, r)| r).sum();
    let regional_limit = config.quotas.regional_limit;
    if regional + regional_required > regional_limit {
        return Err(quota_error(
            "Total Regional Cores",
            &location,
            regional_limit,
            regional,
            regional_required,
        ));
    }
    Ok(())
}

/// The usages counter's `localizedValue` for a family: `standardNDSv2Family` -> `Standard NDSv2
/// Family vCPUs`. Some families are spelt with spaces (`Standard NCASv3_T4 Family`), so the
/// parts are trimmed before they are joined again.
fn family_label(family: &str) -> String {
    let trimmed = family
        .trim_start_matches("standard")
        .trim_start_matches("Standard")
        .trim();
    let trimmed = trimmed.trim_end_matches("Family").trim();
    format!("Standard {trimmed} Family vCPUs")
}

/// `GET .../locations/{loc}/usages`: per-family and regional vCPU usage with their limits, for
/// every family of the sizes offered in the location.
pub(crate) fn usages(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    sub: &str,
    location: &str,
) -> Result<Reply, ArmError> {
    let location = normalize_location(location);
    let families = ctx.config.families_offered_in(&location);
    let held = usage(cloud, ctx.config, sub, &location, "", &[]);
    let prefix = key(&format!("/subscriptions/{sub}/"));
    let vm_count = cloud
        .of_kind(Kind::VirtualMachine)
        .into_iter()
        .filter(|vm| {
            key(&vm.id).starts_with(&prefix) && normalize_location(vm.location()) == location
        })
        .count();
    let mut value = vec![
        json!({"unit": "Count", "currentValue": held.regional, "limit": ctx.config.quotas.regional_limit,
               "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"}}),
        json!({"unit": "Count", "currentValue": held.low_priority, "limit": ctx.config.quotas.low_priority_limit,
               "name": {"value": "lowPriorityCores", "localizedValue": "Total Regional Low-priority vCPUs"}}),
        json!({"unit": "Count", "currentValue": vm_count, "limit": 25000,
               "name": {"value": "virtualMachines", "localizedValue": "Virtual Machines"}}),
    ];
    for family in families {
        let current = usage(cloud, ctx.config, sub, &location, family, &[]).family;
        value.push(json!({
            "unit": "Count",
            "currentValue": current,
            "limit": ctx.config.quotas.family_limit(&location, family),
            "name": {"value": family, "localizedValue": family_label(family)},
        }));
    }
    paging::page(ctx, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_labels_read_like_arms_whatever_the_spelling() {
        assert_eq!(
            family_label("standardNDSv2Family"),
            "Standard NDSv2 Family vCPUs"
        );
        assert_eq!(
            family_label("Standard NCASv3_T4 Family"),
            "Standard NCASv3_T4 Family vCPUs"
        );
        assert_eq!(
            family_label("standard NDAMSv4_A100Family"),
            "Standard NDAMSv4_A100 Family vCPUs"
        );
    }

    #[test]
    fn quota_message_matches_arm() {
        let err = quota_error("standardNDSv2Family Cores", "eastus", 0, 0, 40);
        assert_eq!(err.status, 409);
        assert_eq!(err.code, "OperationNotAllowed");
        assert_eq!(
            err.message,
            "Operation could not be completed as it results in exceeding approved standardNDSv2Family \
             Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, \
             Current Limit: 0, Current Usage: 0, Additional Required: 40, (Minimum) New Limit \
             Required: 40."
        );
    }
}
