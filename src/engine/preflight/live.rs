//! What the subscription's own Resource SKUs answer says about a size, where the shipped catalog
//! is silent or stale (docs/catalog.md, "Shipped and live").
//!
//! The shipped catalog states accelerated networking, premium IO and retirement for the sizes its
//! sources covered, and leaves the rest unknown rather than guessing. Connected, the preflight has
//! the SKUs answer for every region the plan uses, which states them for every size the
//! subscription can create: before planning, a NIC's accelerated networking follows it; after
//! planning, a Premium SSD on a size whose SKU says `PremiumIO=False`, and a size the SKU marks as
//! retired, are reported on the block before anything is created.

use std::borrow::Cow;

use chrono::NaiveDate;
use serde_json::Value;

use crate::addr::Address;
use crate::azure::types::quota::ResourceSku;
use crate::catalog::{self, CpuArchitecture, VmSize};
use crate::diag::Diagnostic;
use crate::model::{Desired, ResourceKind};

use super::{Capacity, Demand, text};

/// A `True`/`False` capability of a SKU, if it states it.
fn flag(sku: &ResourceSku, name: &str) -> Option<bool> {
    sku.capability(name).map(|v| v.eq_ignore_ascii_case("true"))
}

/// The SKU's processor architecture (`CpuArchitectureType`), if it states one.
pub fn cpu_architecture(sku: &ResourceSku) -> Option<CpuArchitecture> {
    sku.capability("CpuArchitectureType")
        .and_then(CpuArchitecture::from_name)
}

/// Whether the SKU accepts Trusted Launch: Resource SKUs mark the sizes that refuse it
/// (`TrustedLaunchDisabled: True`) and say nothing of the others, which accept it if they boot
/// Generation 2 (docs/decisions.md 61).
pub fn trusted_launch(sku: &ResourceSku) -> Option<bool> {
    if let Some(disabled) = flag(sku, "TrustedLaunchDisabled") {
        return Some(!disabled);
    }
    let generations = sku.capability("HyperVGenerations")?;
    Some(
        generations
            .split(',')
            .any(|g| g.trim().eq_ignore_ascii_case("V2")),
    )
}

/// `RetirementDateUtc` (`MM/DD/YYYY`, as Resource SKUs writes it), if the SKU states one.
fn retirement(sku: &ResourceSku) -> Option<NaiveDate> {
    let value = sku.capability("RetirementDateUtc")?;
    NaiveDate::parse_from_str(value.trim(), "%m/%d/%Y")
        .or_else(|_| NaiveDate::parse_from_str(value.trim(), "%Y-%m-%d"))
        .ok()
}

/// Set each new VM's NIC's accelerated networking to what its size's live SKU says, where that
/// differs from the shipped catalog (unknown or stale). A NIC asking for accelerated networking on
/// a size without it makes ARM refuse the VM; one not asking for it on a size that has it loses
/// the faster path. VMs that exist keep their NIC as it is. Returns one plan note per change.
pub fn apply_networking(
    desired: &mut Desired,
    existing: &[Address],
    capacity: &Capacity,
) -> Vec<String> {
    let mut changes: Vec<(Address, bool, String)> = Vec::new();
    for vm in desired
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::VirtualMachine && !existing.contains(&r.address))
    {
        let (Some(size), Some(location), Some(nic)) = (
            text(vm.attrs.get("size")),
            text(vm.attrs.get("location")),
            text(vm.attrs.get("nic")).and_then(|n| n.parse::<Address>().ok()),
        ) else {
            continue;
        };
        let Some(live) = capacity
            .sku(&location, &size)
            .and_then(|sku| flag(sku, "AcceleratedNetworkingEnabled"))
        else {
            continue;
        };
        let shipped = catalog::shipped_size(&size).and_then(|s| s.accelerated_networking);
        if shipped != Some(live) {
            changes.push((nic, live, size));
        }
    }
    let mut notes = Vec::new();
    for (nic, live, size) in changes {
        let Some(resource) = desired.resources.iter_mut().find(|r| r.address == nic) else {
            continue;
        };
        if resource.attrs.get("accelerated_networking") == Some(&Value::Bool(live)) {
            continue;
        }
        resource
            .attrs
            .insert("accelerated_networking".into(), Value::Bool(live));
        notes.push(format!(
            "{nic}: accelerated networking {} as the subscription's Resource SKUs state for {size} (the shipped catalog {})",
            if live { "on" } else { "off" },
            match catalog::shipped_size(&size).and_then(|s| s.accelerated_networking) {
                Some(_) => "says otherwise",
                None => "does not say",
            }
        ));
    }
    notes
}

/// The problems the live SKUs reveal for the VMs the plan creates.
pub(super) fn problems(
    desired: &Desired,
    wanted: &[Demand],
    capacity: &Capacity,
) -> Vec<Diagnostic> {
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for d in wanted {
        if !seen.insert((d.block.clone(), d.size.clone(), d.location.clone())) {
            continue;
        }
        let Some(sku) = capacity.sku(&d.location, &d.size) else {
            continue;
        };
        if flag(sku, "PremiumIO") == Some(false)
            && let Some(what) = premium_disk_of(desired, &d.block)
        {
            problems.push(
                Diagnostic::error(format!(
                    "{} cannot use {what}: {} has no premium storage in {}",
                    d.block, d.size, d.location
                ))
                .with_span_opt(d.span.clone())
                .with_label("the subscription's Resource SKUs say PremiumIO=False")
                .with_help("use StandardSSD_LRS for the disk, or a size with premium storage (an `s` size); `dsinfra sizes` lists them"),
            );
        }
        let shipped = catalog::shipped_size(&d.size).and_then(|s| s.retirement_date);
        if let Some(date) = retirement(sku).filter(|date| shipped != Some(*date)) {
            let retired = date <= catalog::today();
            problems.push(
                Diagnostic::warning(format!(
                    "{} {} on {date}, per the subscription's Resource SKUs",
                    d.size,
                    if retired { "was retired" } else { "retires" }
                ))
                .with_span_opt(d.span.clone())
                .with_label(format!("{} uses it", d.block))
                .with_help(format!(
                    "pick a current size: `dsinfra sizes --region {}` lists them",
                    d.location
                )),
            );
        }
    }
    problems
}

/// The first Premium disk a block's VM uses (its OS disk or an attached data disk), described.
fn premium_disk_of(desired: &Desired, block: &Address) -> Option<String> {
    let vm = desired
        .resources
        .iter()
        .find(|r| r.kind == ResourceKind::VirtualMachine && r.address.block_address() == *block)?;
    if let Some(sku) = text(vm.attrs.get("os_disk_sku")).filter(|s| s.starts_with("Premium")) {
        return Some(format!("a {sku} OS disk"));
    }
    let disks = vm.attrs.get("data_disks").and_then(Value::as_array)?;
    disks.iter().find_map(|d| {
        let address: Address = d.get("disk").and_then(Value::as_str)?.parse().ok()?;
        let disk = desired.resource(&address)?;
        let sku = text(disk.attrs.get("sku")).filter(|s| s.starts_with("Premium"))?;
        Some(format!("{sku} data disk {}", address.block_address()))
    })
}

/// A size the shipped catalog lacks, as the subscription's Resource SKUs describe it, for
/// [`catalog::learn`]. `None` when the SKU is not a VM size or does not say its vCPUs.
pub fn size_from_sku(sku: &ResourceSku) -> Option<VmSize> {
    let name = sku.name.as_deref()?;
    let number =
        |capability: &str| -> Option<f64> { sku.capability(capability)?.trim().parse().ok() };
    let whole =
        |capability: &str| -> Option<u32> { sku.capability(capability)?.trim().parse().ok() };
    let vcpus = whole("vCPUs")?;
    let generations = sku.capability("HyperVGenerations").unwrap_or("V1");
    // Resource SKUs report the temp disk in MB; 0 is no temp disk.
    let temp_disk_gib = whole("MaxResourceVolumeMB").map(|mb| mb / 1024);
    let nvme_gib = whole("NvmeDiskSizeInMiB")
        .filter(|mib| *mib > 0)
        .map(|mib| mib / 1024);
    Some(VmSize {
        name: Cow::Owned(name.to_owned()),
        vcpus,
        vcpus_available: whole("vCPUsAvailable").unwrap_or(vcpus),
        memory_gib: number("MemoryGB").unwrap_or(0.0),
        gpus: number("GPUs").unwrap_or(0.0),
        gpu_model: Cow::Borrowed(""),
        gpu_arch: None,
        temp_disk_gib,
        quota_family: Cow::Owned(sku.family.clone().unwrap_or_default()),
        gen1: generations
            .split(',')
            .any(|g| g.trim().eq_ignore_ascii_case("V1")),
        gen2: generations
            .split(',')
            .any(|g| g.trim().eq_ignore_ascii_case("V2")),
        infiniband: flag(sku, "RdmaEnabled") == Some(true),
        accelerated_networking: flag(sku, "AcceleratedNetworkingEnabled"),
        premium_io: flag(sku, "PremiumIO"),
        cpu: cpu_architecture(sku).unwrap_or_else(|| CpuArchitecture::of_name(name)),
        trusted_launch: trusted_launch(sku),
        temp_nvme: nvme_gib.is_some() && temp_disk_gib.unwrap_or(0) == 0,
        nvme_gib,
        retirement_date: retirement(sku),
        facts: Cow::Borrowed(catalog::LIVE_FACTS),
    })
}
