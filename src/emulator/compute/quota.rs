//! vCPU quota and SKU restrictions on VM creates, and the usages and SKUs endpoints that report
//! them.

use serde_json::{Value, json};

use crate::emulator::config::{EmulatorConfig, normalize_location};
use crate::emulator::error::ArmError;
use crate::emulator::json::At as _;
use crate::emulator::paging;
use crate::emulator::providers::key;
use crate::emulator::server::{Ctx, Reply};
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

/// `(family usage, regional usage)` in vCPUs for a subscription and location, leaving out one VM.
fn usage(
    cloud: &Cloud,
    config: &EmulatorConfig,
    sub: &str,
    location: &str,
    family: &str,
    except: &str,
) -> (u32, u32) {
    let prefix = key(&format!("/subscriptions/{sub}/"));
    let mut family_usage = 0;
    let mut regional = 0;
    // Runs over every VM on every VM PUT: compared in place, nothing allocated per VM.
    for vm in cloud.of_kind(Kind::VirtualMachine) {
        let id = vm.id.trim_end_matches('/');
        let in_sub = id
            .get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(&prefix));
        if id.eq_ignore_ascii_case(except) || !in_sub || !holds_cores(vm) {
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
        regional += size.vcpus;
        if size.family.eq_ignore_ascii_case(family) {
            family_usage += size.vcpus;
        }
    }
    (family_usage, regional)
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

/// Checks that allocating `size` in `location` fits the family and regional quotas.
pub(super) fn check_quota(
    cloud: &Cloud,
    config: &EmulatorConfig,
    sub: &str,
    location: &str,
    size: &str,
    vm_key: &str,
) -> Result<(), ArmError> {
    let Some(spec) = config.vm_size(size) else {
        return Ok(());
    };
    let location = normalize_location(location);
    let (family_usage, regional) = usage(cloud, config, sub, &location, &spec.family, vm_key);
    let family_limit = config.quotas.family_limit(&location, &spec.family);
    if family_usage + spec.vcpus > family_limit {
        return Err(quota_error(
            &format!("{} Cores", spec.family),
            &location,
            family_limit,
            family_usage,
            spec.vcpus,
        ));
    }
    let regional_limit = config.quotas.regional_limit;
    if regional + spec.vcpus > regional_limit {
        return Err(quota_error(
            "Total Regional Cores",
            &location,
            regional_limit,
            regional,
            spec.vcpus,
        ));
    }
    Ok(())
}

/// SkuNotAvailable when the size is restricted in the location (or in one of the VM's zones).
pub(super) fn check_sku(
    config: &EmulatorConfig,
    size: &str,
    location: &str,
    zones: &[String],
) -> Result<(), ArmError> {
    let normalized = normalize_location(location);
    let restricted = config.sku_restrictions.iter().any(|r| {
        r.size.eq_ignore_ascii_case(size)
            && normalize_location(&r.location) == normalized
            && (r.zones.is_empty() || zones.iter().any(|z| r.zones.contains(z)))
    });
    if restricted {
        return Err(ArmError::new(
            409,
            "SkuNotAvailable",
            format!(
                "The requested VM size for resource 'Following SKUs have failed for Capacity \
                 Restrictions: {size}' is currently not available in location '{normalized}'. Please \
                 try another size or deploy to a different location or different zone. See \
                 https://aka.ms/azureskunotavailable for details."
            ),
        ));
    }
    Ok(())
}

fn family_label(family: &str) -> String {
    let trimmed = family
        .trim_start_matches("standard")
        .trim_start_matches("Standard");
    let trimmed = trimmed.trim_end_matches("Family");
    format!("Standard {trimmed} Family vCPUs")
}

/// `GET .../locations/{loc}/usages`: per-family and regional vCPU usage with their limits.
pub(crate) fn usages(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    sub: &str,
    location: &str,
) -> Result<Reply, ArmError> {
    let location = normalize_location(location);
    let mut families: Vec<&str> = ctx
        .config
        .vm_sizes
        .iter()
        .map(|s| s.family.as_str())
        .collect();
    families.sort_unstable();
    families.dedup();
    let (_, regional) = usage(cloud, ctx.config, sub, &location, "", "");
    let prefix = key(&format!("/subscriptions/{sub}/"));
    let vm_count = cloud
        .of_kind(Kind::VirtualMachine)
        .into_iter()
        .filter(|vm| {
            key(&vm.id).starts_with(&prefix) && normalize_location(vm.location()) == location
        })
        .count();
    let mut value = vec![
        json!({"unit": "Count", "currentValue": regional, "limit": ctx.config.quotas.regional_limit,
               "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"}}),
        json!({"unit": "Count", "currentValue": vm_count, "limit": 25000,
               "name": {"value": "virtualMachines", "localizedValue": "Virtual Machines"}}),
    ];
    for family in families {
        let (current, _) = usage(cloud, ctx.config, sub, &location, family, "");
        value.push(json!({
            "unit": "Count",
            "currentValue": current,
            "limit": ctx.config.quotas.family_limit(&location, family),
            "name": {"value": family, "localizedValue": family_label(family)},
        }));
    }
    paging::page(ctx, value)
}

/// `GET /subscriptions/{s}/providers/Microsoft.Compute/skus`, with `$filter=location eq '...'`.
pub(crate) fn skus(ctx: &Ctx<'_>) -> Result<Reply, ArmError> {
    let filter = ctx.query("$filter").and_then(|f| {
        let (_, rest) = f.split_once("eq")?;
        Some(normalize_location(rest.trim().trim_matches('\'')))
    });
    let mut value = Vec::new();
    for size in &ctx.config.vm_sizes {
        for location in &ctx.config.locations {
            let location = normalize_location(location);
            if filter.as_ref().is_some_and(|f| *f != location) {
                continue;
            }
            let restrictions: Vec<Value> = ctx
                .config
                .sku_restrictions
                .iter()
                .filter(|r| r.size.eq_ignore_ascii_case(&size.name) && normalize_location(&r.location) == location)
                .map(|r| {
                    if r.zones.is_empty() {
                        json!({"type": "Location", "values": [location], "restrictionInfo": {"locations": [location]}, "reasonCode": "NotAvailableForSubscription"})
                    } else {
                        json!({"type": "Zone", "values": [location], "restrictionInfo": {"locations": [location], "zones": r.zones}, "reasonCode": "NotAvailableForSubscription"})
                    }
                })
                .collect();
            value.push(json!({
                "resourceType": "virtualMachines",
                "name": size.name,
                "tier": "Standard",
                "size": size.name.trim_start_matches("Standard_"),
                "family": size.family,
                "locations": [location],
                "locationInfo": [{"location": location, "zones": ["1", "2", "3"], "zoneDetails": []}],
                "capabilities": [
                    {"name": "vCPUs", "value": size.vcpus.to_string()},
                    {"name": "vCPUsAvailable", "value": size.vcpus.to_string()},
                    {"name": "HyperVGenerations", "value": "V1,V2"},
                ],
                "restrictions": restrictions,
            }));
        }
    }
    paging::page(ctx, value)
}

/// The OS disk size limit every VM size reports (1023 GiB): the same for all sizes in ARM.
const OS_DISK_MB: u32 = 1_047_552;

/// `GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/vmSizes`: the sizes offered
/// to the subscription in the location (the SKUs API's list without the restricted ones), as
/// `VirtualMachineSizeListResult`. One answer without `nextLink`: the spec declares the list
/// unpaged. Memory and temp disk appear only for sizes configured with them.
pub(crate) fn vm_sizes(ctx: &Ctx<'_>, location: &str) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let location = normalize_location(location);
    let offered = ctx
        .config
        .locations
        .iter()
        .any(|l| normalize_location(l) == location);
    if !offered {
        return Err(ArmError::new(
            400,
            "NoRegisteredProviderFound",
            format!(
                "No registered resource provider found for location '{location}' and API version \
                 '{}' for type 'locations/vmSizes'. The supported locations are '{}'.",
                ctx.api_version,
                ctx.config.locations.join(", ")
            ),
        ));
    }
    let value: Vec<Value> = ctx
        .config
        .vm_sizes
        .iter()
        .filter(|size| {
            !ctx.config.sku_restrictions.iter().any(|r| {
                r.zones.is_empty()
                    && r.size.eq_ignore_ascii_case(&size.name)
                    && normalize_location(&r.location) == location
            })
        })
        .map(|size| {
            let mut item = json!({
                "name": size.name,
                "numberOfCores": size.vcpus,
                "osDiskSizeInMB": OS_DISK_MB,
            });
            if let Some(memory) = size.memory_mb {
                item["memoryInMB"] = json!(memory);
            }
            if let Some(disk) = size.resource_disk_mb {
                item["resourceDiskSizeInMB"] = json!(disk);
            }
            item
        })
        .collect();
    Ok(Reply::json(200, json!({ "value": value })))
}

#[cfg(test)]
mod tests {
    use super::*;

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
