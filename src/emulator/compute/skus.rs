//! Which VM sizes a subscription may use where: the Resource SKUs list and the per-location VM
//! sizes list that report it, and the refusals of a VM PUT whose size is unknown, not offered in
//! the VM's location, restricted for the subscription, or retired.
//!
//! A size is offered in the locations its [`VmSizeSpec`] names (every configured location when it
//! names none). Retirement is a restriction like a configured one: from its retirement date on
//! a size is listed with a `NotAvailableForSubscription` restriction in every location and a VM
//! PUT that asks for it is refused with SkuNotAvailable (docs/emulator.md, "Catalog-backed
//! sizes").

use std::collections::HashMap;

use chrono::NaiveDate;
use serde_json::{Value, json};

use crate::emulator::config::{EmulatorConfig, VmSizeSpec, normalize_location};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::paging;
use crate::emulator::store::Resource;

/// The OS disk size limit every VM size reports (1023 GiB): the same for all sizes in ARM.
const OS_DISK_MB: u32 = 1_047_552;

/// Why a size is not available to the subscription in one location.
enum Restriction<'a> {
    /// A configured restriction: the whole location (no zones) or some of its zones.
    Configured(&'a [String]),
    /// Retired on or before today.
    Retired,
}

/// The restrictions on `size` in `location` (normalised) on `today`.
fn restrictions<'a>(
    config: &'a EmulatorConfig,
    size: &VmSizeSpec,
    location: &str,
    today: NaiveDate,
) -> impl Iterator<Item = Restriction<'a>> {
    let configured = config
        .sku_restrictions
        .iter()
        .filter(move |r| {
            r.size.eq_ignore_ascii_case(&size.name) && normalize_location(&r.location) == location
        })
        .map(|r| Restriction::Configured(&r.zones));
    let retired = size.retired_on(today).then_some(Restriction::Retired);
    configured.chain(retired)
}

/// A size restricted in the whole of `location`: not offered to the subscription there at all.
fn restricted_everywhere_in(
    config: &EmulatorConfig,
    size: &VmSizeSpec,
    location: &str,
    today: NaiveDate,
) -> bool {
    restrictions(config, size, location, today).any(|r| match r {
        Restriction::Configured(zones) => zones.is_empty(),
        Restriction::Retired => true,
    })
}

/// The names of the sizes offered in `location` (normalised), for ARM's "valid sizes" lists.
fn names_offered_in<'a>(
    config: &'a EmulatorConfig,
    location: &'a str,
) -> impl Iterator<Item = &'a str> {
    config
        .vm_sizes
        .iter()
        .filter(move |s| s.offered_in(location))
        .map(|s| s.name.as_str())
}

/// The size a VM PUT asks for, if ARM accepts it in `location`: InvalidParameter for a size
/// ARM does not know, or one not offered in the location, with the sizes that are.
pub(super) fn offered_size<'a>(
    config: &'a EmulatorConfig,
    size: &str,
    location: &str,
) -> Result<&'a VmSizeSpec, ArmError> {
    let location = normalize_location(location);
    let valid = || {
        names_offered_in(config, &location)
            .collect::<Vec<_>>()
            .join(",")
    };
    let Some(spec) = config.vm_size(size) else {
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            format!(
                "The value {size} provided for the VM size is not valid. The valid sizes in the \
                 current region are: {}.",
                valid()
            ),
        )
        .with_target("vmSize"));
    };
    if !spec.offered_in(&location) {
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            format!(
                "The requested VM size {size} is not available in the current region. The sizes \
                 available in the current region are: {}.",
                valid()
            ),
        )
        .with_target("vmSize"));
    }
    Ok(spec)
}

/// Where a VM asks for its size: what the SkuNotAvailable messages name.
pub(super) struct Placement<'a> {
    /// The VM's resource id.
    pub(super) vm_id: &'a str,
    /// The subscription id.
    pub(super) sub: &'a str,
    /// The VM's location as sent.
    pub(super) location: &'a str,
    /// The zones the VM asks for.
    pub(super) zones: &'a [String],
}

/// SkuNotAvailable when the size is restricted in the location (or in one of the VM's zones).
/// A retired size is checked only when a VM is created with it or resized to it (`newly`): the
/// refusal is Azure's documented one for a size not available to the subscription.
pub(super) fn check_sku(
    config: &EmulatorConfig,
    size: &VmSizeSpec,
    at: &Placement<'_>,
    newly: bool,
    today: NaiveDate,
) -> Result<(), ArmError> {
    let location = normalize_location(at.location);
    for restriction in restrictions(config, size, &location, today) {
        match restriction {
            Restriction::Configured(zones)
                if zones.is_empty() || at.zones.iter().any(|z| zones.contains(z)) =>
            {
                return Err(ArmError::new(
                    409,
                    "SkuNotAvailable",
                    format!(
                        "The requested VM size for resource 'Following SKUs have failed for \
                         Capacity Restrictions: {}' is currently not available in location \
                         '{location}'. Please try another size or deploy to a different location \
                         or different zone. See https://aka.ms/azureskunotavailable for details.",
                        size.name
                    ),
                ));
            }
            Restriction::Retired if newly => {
                return Err(ArmError::new(
                    409,
                    "SkuNotAvailable",
                    format!(
                        "The requested size for resource '{}' is currently not available in \
                         location '{location}' zones '{}' for subscription '{}'. Please try \
                         another size or deploy to a different location or zones. See \
                         https://aka.ms/azureskunotavailable for details.",
                        at.vm_id,
                        at.zones.join(","),
                        at.sub
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A number as Resource SKUs writes it: `7`, `0.75`.
fn number(value: f64) -> String {
    format!("{value}")
}

/// `True` / `False`, as Resource SKUs writes booleans.
fn flag(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}

/// The capabilities Resource SKUs reports for a size, with ARM's names and value formats; a fact
/// the spec leaves unknown is left out, as ARM leaves out what a size does not state.
fn capabilities(size: &VmSizeSpec) -> Vec<Value> {
    let mut out: Vec<(&str, String)> = Vec::new();
    if let Some(disk) = size.resource_disk_mb {
        out.push(("MaxResourceVolumeMB", disk.to_string()));
    }
    out.push(("OSVhdSizeMB", OS_DISK_MB.to_string()));
    out.push(("vCPUs", size.vcpus.to_string()));
    if !size.generations.is_empty() {
        let generations: Vec<String> = size.generations.iter().map(|g| format!("V{g}")).collect();
        out.push(("HyperVGenerations", generations.join(",")));
    }
    if let Some(memory) = size.memory_mb {
        out.push(("MemoryGB", number(f64::from(memory) / 1024.0)));
    }
    if let Some(premium) = size.premium_io {
        out.push(("PremiumIO", flag(premium).to_owned()));
    }
    // ARM states GPUs only for sizes that have them.
    if let Some(gpus) = size.gpus.filter(|g| *g > 0.0) {
        out.push(("GPUs", number(gpus)));
    }
    out.push((
        "vCPUsAvailable",
        size.vcpus_available.unwrap_or(size.vcpus).to_string(),
    ));
    if let Some(date) = size.retirement_date {
        out.push(("RetirementDateUtc", date.format("%m/%d/%Y").to_string()));
    }
    if let Some(accelerated) = size.accelerated_networking {
        out.push(("AcceleratedNetworkingEnabled", flag(accelerated).to_owned()));
    }
    if let Some(rdma) = size.rdma {
        out.push(("RdmaEnabled", flag(rdma).to_owned()));
    }
    out.push((
        "CpuArchitectureType",
        if size.arm64 { "Arm64" } else { "x64" }.to_owned(),
    ));
    // ARM names the capability only on the sizes that refuse Trusted Launch.
    if size.trusted_launch == Some(false) {
        out.push(("TrustedLaunchDisabled", flag(true).to_owned()));
    }
    if let Some(nvme) = size.nvme_mib {
        out.push(("NvmeDiskSizeInMiB", nvme.to_string()));
    }
    out.into_iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect()
}

/// One `ResourceSku` of a size in one location.
fn sku_item(config: &EmulatorConfig, size: &VmSizeSpec, location: &str, today: NaiveDate) -> Value {
    let restrictions: Vec<Value> = restrictions(config, size, location, today)
        .map(|r| match r {
            Restriction::Configured(zones) if !zones.is_empty() => json!({
                "type": "Zone", "values": [location],
                "restrictionInfo": {"locations": [location], "zones": zones},
                "reasonCode": "NotAvailableForSubscription"}),
            _ => json!({
                "type": "Location", "values": [location],
                "restrictionInfo": {"locations": [location]},
                "reasonCode": "NotAvailableForSubscription"}),
        })
        .collect();
    json!({
        "resourceType": "virtualMachines",
        "name": size.name,
        "tier": "Standard",
        "size": size.name.trim_start_matches("Standard_"),
        "family": size.family,
        "locations": [location],
        "locationInfo": [{"location": location, "zones": ["1", "2", "3"], "zoneDetails": []}],
        "capabilities": capabilities(size),
        "restrictions": restrictions,
    })
}

/// `GET /subscriptions/{s}/providers/Microsoft.Compute/skus`, with `$filter=location eq '...'`:
/// one item per size and location that offers it. Only the page asked for is built: the whole
/// list of a catalog-backed emulator is tens of thousands of items.
pub(crate) fn skus(ctx: &Ctx<'_>) -> Result<Reply, ArmError> {
    let filter = ctx.query("$filter").and_then(|f| {
        let (_, rest) = f.split_once("eq")?;
        Some(normalize_location(rest.trim().trim_matches('\'')))
    });
    let locations: Vec<String> = ctx
        .config
        .locations
        .iter()
        .map(|l| normalize_location(l))
        .filter(|l| filter.as_ref().is_none_or(|f| f == l))
        .collect();
    // Each size's own locations are looked up in the ones asked for, not the other way round:
    // the whole list is some 1,400 sizes in 60 locations.
    let asked: HashMap<&str, usize> = locations
        .iter()
        .enumerate()
        .map(|(i, l)| (l.as_str(), i))
        .collect();
    let mut offered: Vec<(&VmSizeSpec, &str)> = Vec::new();
    for size in &ctx.config.vm_sizes {
        if size.locations.is_empty() {
            offered.extend(locations.iter().map(|l| (size, l.as_str())));
            continue;
        }
        let mut here: Vec<usize> = size
            .locations
            .iter()
            .filter_map(|l| {
                // Configured locations are normally already ARM's short names: no copy then.
                let plain = !l
                    .bytes()
                    .any(|b| b.is_ascii_uppercase() || b.is_ascii_whitespace());
                if plain {
                    asked.get(l.as_str()).copied()
                } else {
                    asked.get(normalize_location(l).as_str()).copied()
                }
            })
            .collect();
        // In the configured order, as for a size offered everywhere.
        here.sort_unstable();
        here.dedup();
        offered.extend(here.into_iter().map(|i| (size, locations[i].as_str())));
    }
    let today = ctx.now.date_naive();
    paging::page_built(ctx, offered, |(size, location)| {
        sku_item(ctx.config, size, location, today)
    })
}

/// `GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/vmSizes`: the sizes offered
/// to the subscription in the location (the SKUs API's list without the sizes restricted in the
/// whole location, retired ones among them), as `VirtualMachineSizeListResult`. One answer
/// without `nextLink`: the spec declares the list unpaged. Memory and temp disk appear only for
/// sizes configured with them.
pub(crate) fn vm_sizes(ctx: &Ctx<'_>, location: &str) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let location = normalize_location(location);
    let configured = ctx
        .config
        .locations
        .iter()
        .any(|l| normalize_location(l) == location);
    if !configured {
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
    Ok(size_list(ctx, &location, |_| true))
}

/// `GET .../virtualMachines/{vm}/vmSizes` (VirtualMachines_ListAvailableSizes): the sizes the VM
/// can be resized to. A VM holding its hardware can move only within its hardware cluster (the
/// emulator's cluster is the size's quota family, as the resize check in `vm.rs` models it); a
/// deallocated VM can take any size offered in its location.
pub(crate) fn vm_available_sizes(ctx: &Ctx<'_>, vm: &Resource) -> Reply {
    let location = normalize_location(vm.location());
    let family = super::quota::vm_size(vm)
        .filter(|_| super::quota::holds_cores(vm))
        .and_then(|size| ctx.config.vm_size(size))
        .map(|spec| spec.family.clone());
    size_list(ctx, &location, |size| {
        family.as_ref().is_none_or(|f| &size.family == f)
    })
}

/// The `VirtualMachineSizeListResult` of the sizes offered in `location` (and not restricted
/// everywhere there) that `keep` keeps.
fn size_list(ctx: &Ctx<'_>, location: &str, keep: impl Fn(&VmSizeSpec) -> bool) -> Reply {
    let today = ctx.now.date_naive();
    let value: Vec<Value> = ctx
        .config
        .vm_sizes
        .iter()
        .filter(|size| {
            size.offered_in(location)
                && !restricted_everywhere_in(ctx.config, size, location, today)
                && keep(size)
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
    Reply::json(200, json!({ "value": value }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("a date")
    }

    #[test]
    fn capabilities_use_arm_names_and_formats_and_leave_out_the_unknown() {
        let mut size = VmSizeSpec::new("Standard_NC6s_v3", 6, "standardNCSv3Family")
            .with_memory(112 * 1024, Some(736 * 1024));
        size.gpus = Some(1.0);
        size.generations = vec![1, 2];
        size.rdma = Some(false);
        size.accelerated_networking = Some(true);
        size.premium_io = Some(true);
        size.retirement_date = Some(day("2025-09-30"));
        let named: Vec<(String, String)> = capabilities(&size)
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or_default().to_owned(),
                    c["value"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let value = |name: &str| {
            named
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(value("vCPUs"), Some("6"));
        assert_eq!(value("vCPUsAvailable"), Some("6"));
        assert_eq!(value("MemoryGB"), Some("112"));
        assert_eq!(value("MaxResourceVolumeMB"), Some("753664"));
        assert_eq!(value("GPUs"), Some("1"));
        assert_eq!(value("HyperVGenerations"), Some("V1,V2"));
        assert_eq!(value("RdmaEnabled"), Some("False"));
        assert_eq!(value("AcceleratedNetworkingEnabled"), Some("True"));
        assert_eq!(value("PremiumIO"), Some("True"));
        assert_eq!(value("RetirementDateUtc"), Some("09/30/2025"));

        let bare = capabilities(
            &VmSizeSpec::new("Standard_B1ls", 1, "standardBSFamily").with_memory(768, None),
        );
        let bare_names: Vec<&str> = bare.iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(
            bare_names,
            [
                "OSVhdSizeMB",
                "vCPUs",
                "MemoryGB",
                "vCPUsAvailable",
                "CpuArchitectureType"
            ]
        );
        assert_eq!(bare[2]["value"], "0.75");
        assert_eq!(bare[4]["value"], "x64");
        // Issue 29: the sizes that refuse Trusted Launch say so; the others say nothing.
        let mut a100 = VmSizeSpec::new("Standard_ND96asr_v4", 96, "standardNDASv4_A100Family");
        a100.trusted_launch = Some(false);
        a100.nvme_mib = Some(1024);
        let caps = capabilities(&a100);
        let named = |name: &str| {
            caps.iter()
                .find(|c| c["name"] == name)
                .map(|c| c["value"].clone())
        };
        assert_eq!(
            named("TrustedLaunchDisabled"),
            Some(serde_json::json!("True"))
        );
        assert_eq!(named("NvmeDiskSizeInMiB"), Some(serde_json::json!("1024")));
    }

    #[test]
    fn a_size_is_retired_from_its_retirement_date_on() {
        let mut size = VmSizeSpec::new("Standard_NC6s_v3", 6, "standardNCSv3Family");
        size.retirement_date = Some(day("2025-09-30"));
        assert!(!size.retired_on(day("2025-09-29")));
        assert!(size.retired_on(day("2025-09-30")));
        let config = EmulatorConfig {
            vm_sizes: vec![size.clone()],
            ..EmulatorConfig::default()
        };
        assert!(restricted_everywhere_in(
            &config,
            &size,
            "eastus",
            day("2026-01-01")
        ));
        assert!(!restricted_everywhere_in(
            &config,
            &size,
            "eastus",
            day("2025-01-01")
        ));
    }
}
