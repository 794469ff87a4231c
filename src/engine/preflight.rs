//! The quota and SKU preflight: before anything is spent, check that the VMs a plan creates fit
//! the subscription's vCPU quota (per family and the regional total) and that their sizes are
//! offered, unrestricted, in their region and zone. Each problem is a located diagnostic on the
//! `vm`/`cluster` block, with the numbers and where to get more quota.
//!
//! It also resolves the ordered size fallback (`sizes = ["Standard_ND40rs_v2",
//! "Standard_ND96asr_v4"]` on a `vm` or `cluster`): the manifest layer writes the candidates into
//! the VM's `sizes` attribute with `size` set to the first; [`resolve_sizes`] picks the first
//! candidate that passes the preflight, rewrites the block's resources for it and removes the
//! candidate list, so that the planner diffs only real attributes. A block that already exists
//! keeps the candidate it was created with: a fallback must not replace running VMs the moment
//! quota for a preferred size appears. Without a connection, [`resolve_sizes_offline`] takes the
//! first candidate and says so.
//!
//! The same preflight reports provider namespaces the subscription is not registered for
//! (`engine::registration`), and runs the preflight of each kind the plan changes (the kind's
//! driver, `engine::kinds`: an AmlCompute's existing workspace is there, in the right region,
//! and AML's own quota holds), before anything is written.
//!
//! Fetching ([`Capacity::fetch`]) is separate from deciding ([`check`], [`resolve_sizes`]), which
//! are pure and unit-tested.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::addr::Address;
use crate::azure::types::quota::{ResourceSku, SkuAvailability, Usage, usage_for};
use crate::azure::{ArmClient, ArmError};
use crate::catalog;
use crate::diag::{Diagnostic, Span};
use crate::engine::kinds;
use crate::model::{Desired, ResourceKind};
use crate::plan::{Action, Plan};
use crate::state::State;

pub mod live;
pub mod rbac;
pub mod security;

/// The VM attribute holding the ordered size candidates of a `sizes = [...]` block.
pub const SIZES_ATTR: &str = "sizes";

/// The usages counter of the regional vCPU total.
const REGIONAL: &str = "cores";

/// The usages counter of the regional low-priority vCPU total: all that spot VMs count against
/// (decision 75), not their family's or the regional total.
const LOW_PRIORITY: &str = "lowPriorityCores";

/// What the subscription has in each region the plan uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capacity {
    /// Compute usages per location (lower case).
    pub usages: BTreeMap<String, Vec<Usage>>,
    /// VM SKUs per location (lower case).
    pub skus: BTreeMap<String, Vec<ResourceSku>>,
}

impl Capacity {
    /// Read usages and SKUs of every location, one pair of calls per location.
    pub async fn fetch(
        client: &ArmClient,
        subscription: &str,
        locations: &BTreeSet<String>,
    ) -> Result<Self, ArmError> {
        let mut capacity = Self::default();
        for location in locations {
            let (usages, skus) = futures::try_join!(
                client.compute_usages(subscription, location),
                client.compute_skus(subscription, location)
            )?;
            let skus = skus
                .into_iter()
                .filter(|s| {
                    s.resource_type
                        .as_deref()
                        .is_none_or(|t| t.eq_ignore_ascii_case("virtualMachines"))
                })
                .collect();
            capacity
                .usages
                .insert(location.to_ascii_lowercase(), usages);
            capacity.skus.insert(location.to_ascii_lowercase(), skus);
        }
        Ok(capacity)
    }

    fn sku(&self, location: &str, size: &str) -> Option<&ResourceSku> {
        self.skus
            .get(&location.to_ascii_lowercase())?
            .iter()
            .find(|s| {
                s.name
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(size))
            })
    }

    fn usage(&self, location: &str, counter: &str) -> Option<&Usage> {
        usage_for(self.usages.get(&location.to_ascii_lowercase())?, counter)
    }
}

/// One VM the plan creates, and what it needs.
#[derive(Debug, Clone, PartialEq)]
struct Demand {
    block: Address,
    size: String,
    location: String,
    zone: Option<String>,
    vcpus: i64,
    family: String,
    span: Option<Span>,
    /// A spot VM: counted against [`LOW_PRIORITY`] only.
    spot: bool,
}

fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_owned)
}

/// vCPUs and quota family of a size: from the catalog, else from the SKU list.
fn size_facts(
    catalog: &catalog::Catalog,
    size: &str,
    sku: Option<&ResourceSku>,
) -> Option<(i64, String)> {
    if let Some(info) = catalog.vm_size(size) {
        return Some((i64::from(info.vcpus), info.quota_family.to_string()));
    }
    let sku = sku?;
    let vcpus = sku.capability("vCPUs")?.parse().ok()?;
    Some((vcpus, sku.family.clone()?))
}

/// The VMs the plan creates (creates and replacements) and the AKS nodes it adds, and the vCPUs
/// it frees first (deletes and the old side of replacements of VMs) per (location, family).
fn demands(
    desired: &Desired,
    plan: &Plan,
    capacity: &Capacity,
) -> (Vec<Demand>, BTreeMap<(String, String), i64>) {
    let mut wanted = Vec::new();
    let mut freed: BTreeMap<(String, String), i64> = BTreeMap::new();
    wanted.extend(aks_demands(desired, plan, capacity));
    for change in plan
        .changes
        .iter()
        .filter(|c| c.kind == ResourceKind::VirtualMachine)
    {
        let replaced_or_deleted = matches!(change.action, Action::Delete | Action::Replace { .. });
        if let Some(before) = change.before.as_ref().filter(|_| replaced_or_deleted) {
            let location = text(before.get("location")).unwrap_or_default();
            let facts = text(before.get("size")).and_then(|size| {
                size_facts(&desired.catalog, &size, capacity.sku(&location, &size))
            });
            let spot = text(before.get("priority")).as_deref() == Some("Spot");
            if let Some((vcpus, family)) = facts {
                let family = if spot {
                    LOW_PRIORITY.to_owned()
                } else {
                    family
                };
                *freed
                    .entry((location.to_ascii_lowercase(), family))
                    .or_default() += vcpus;
            }
        }
        if !matches!(change.action, Action::Create | Action::Replace { .. }) {
            continue;
        }
        let Some(resource) = desired.resource(&change.address) else {
            continue;
        };
        let (Some(size), Some(location)) = (
            text(resource.attrs.get("size")),
            text(resource.attrs.get("location")),
        ) else {
            continue;
        };
        let (vcpus, family) = size_facts(&desired.catalog, &size, capacity.sku(&location, &size))
            .unwrap_or((0, String::new()));
        wanted.push(Demand {
            block: resource.address.block_address(),
            size,
            location: location.to_ascii_lowercase(),
            zone: text(resource.attrs.get("zone")),
            vcpus,
            family,
            span: resource.span.clone(),
            spot: text(resource.attrs.get("priority")).as_deref() == Some("Spot"),
        });
    }
    (wanted, freed)
}

/// The (size attribute, node count attribute) of a kind whose nodes are VMs of the
/// subscription's Compute quota: a VM itself (one node), an AKS cluster's System pool and an
/// AKS node pool (scale-set VMs).
fn node_attrs(kind: ResourceKind) -> Option<(&'static str, Option<&'static str>)> {
    match kind {
        ResourceKind::VirtualMachine => Some(("size", None)),
        ResourceKind::AksCluster => Some(("system_size", Some("system_count"))),
        ResourceKind::AksPool => Some(("size", Some("count"))),
        _ => None,
    }
}

/// The AKS nodes the plan adds: a new pool's (or System pool's) nodes, or the nodes a count
/// increase adds, one [`Demand`] per node, as each node is a VM of the family's quota.
fn aks_demands(desired: &Desired, plan: &Plan, capacity: &Capacity) -> Vec<Demand> {
    let mut wanted = Vec::new();
    for change in &plan.changes {
        let Some((size_key, Some(count_key))) = node_attrs(change.kind) else {
            continue;
        };
        let Some(resource) = desired.resource(&change.address) else {
            continue;
        };
        let count = |attrs: Option<&crate::model::Attrs>| {
            attrs
                .and_then(|a| a.get(count_key))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        let added = match change.action {
            Action::Create | Action::Replace { .. } => count(Some(&resource.attrs)),
            Action::Update => count(Some(&resource.attrs)) - count(change.before.as_ref()),
            _ => 0,
        };
        let (Some(size), Some(location)) = (
            text(resource.attrs.get(size_key)),
            text(resource.attrs.get("location")),
        ) else {
            continue;
        };
        let (vcpus, family) = size_facts(&desired.catalog, &size, capacity.sku(&location, &size))
            .unwrap_or((0, String::new()));
        for _ in 0..added.max(0) {
            wanted.push(Demand {
                block: resource.address.block_address(),
                size: size.clone(),
                location: location.to_ascii_lowercase(),
                zone: None,
                vcpus,
                family: family.clone(),
                span: resource.span.clone(),
                spot: false,
            });
        }
    }
    wanted
}

/// The locations whose capacity a plan of `desired` needs.
pub fn locations_of(desired: &Desired) -> BTreeSet<String> {
    desired
        .resources
        .iter()
        .filter(|r| node_attrs(r.kind).is_some())
        .filter_map(|r| text(r.attrs.get("location")))
        .map(|l| l.to_ascii_lowercase())
        .collect()
}

/// Check the plan's new VMs against quota and SKU availability: one diagnostic per problem,
/// located on the first block it concerns.
pub fn check(desired: &Desired, plan: &Plan, capacity: &Capacity) -> Vec<Diagnostic> {
    let (wanted, freed) = demands(desired, plan, capacity);
    let mut problems = sku_problems(&wanted, capacity);
    problems.extend(live::problems(desired, &wanted, capacity));
    problems.extend(quota_problems(&wanted, &freed, capacity, "this plan adds"));
    problems
}

fn sku_problems(wanted: &[Demand], capacity: &Capacity) -> Vec<Diagnostic> {
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for d in wanted {
        if !seen.insert((
            d.block.clone(),
            d.size.clone(),
            d.location.clone(),
            d.zone.clone(),
        )) {
            continue;
        }
        if let Some(diagnostic) = sku_problem(d, capacity) {
            problems.push(diagnostic);
        }
    }
    problems
}

fn sku_problem(d: &Demand, capacity: &Capacity) -> Option<Diagnostic> {
    // Without a SKU list for the region (an endpoint that has none) there is nothing to check.
    capacity.skus.get(&d.location)?;
    let fallback_hint = "or list other sizes in order with `sizes = [...]` on the block";
    let availability = capacity
        .sku(&d.location, &d.size)
        .map_or(SkuAvailability::NotOffered, |s| s.availability(&d.location));
    let (summary, label, help) = match availability {
        SkuAvailability::NotOffered => (
            format!("{} is not offered in {}", d.size, d.location),
            format!("{} needs {}", d.block, d.size),
            format!(
                "pick a size offered in {} (`az vm list-skus --location {} --resource-type virtualMachines`) or another region, {fallback_hint}",
                d.location, d.location
            ),
        ),
        SkuAvailability::Restricted { reason } => (
            format!(
                "{} is not available to this subscription in {} (SkuNotAvailable)",
                d.size, d.location
            ),
            format!(
                "ARM would refuse {} with SkuNotAvailable{}",
                d.block,
                reason.map_or_else(String::new, |r| format!(" ({r:?})"))
            ),
            format!(
                "try another size or region, {fallback_hint}; or ask Azure support to enable {} in {} (Azure portal > Help + support > Service and subscription limits)",
                d.size, d.location
            ),
        ),
        SkuAvailability::Available { zones } => {
            let zone = d.zone.as_ref()?;
            if zones.is_empty() || zones.contains(zone) {
                return None;
            }
            (
                format!(
                    "{} is not available in zone {zone} of {} (SkuNotAvailable)",
                    d.size, d.location
                ),
                format!("{} asks for zone {zone}", d.block),
                format!(
                    "use a zone where it is available ({}) or remove `zone`, {fallback_hint}",
                    zones.join(", ")
                ),
            )
        }
    };
    Some(
        Diagnostic::error(summary)
            .with_span_opt(d.span.clone())
            .with_label(label)
            .with_help(help),
    )
}

/// What the plan adds to one quota counter in one location.
struct Tally<'a> {
    vcpus: i64,
    blocks: Vec<&'a Demand>,
}

fn tally<'a>(
    wanted: &'a [Demand],
    key: impl Fn(&Demand) -> Option<String>,
) -> BTreeMap<(String, String), Tally<'a>> {
    let mut out: BTreeMap<(String, String), Tally<'a>> = BTreeMap::new();
    for d in wanted {
        let Some(counter) = key(d) else { continue };
        let entry = out.entry((d.location.clone(), counter)).or_insert(Tally {
            vcpus: 0,
            blocks: Vec::new(),
        });
        entry.vcpus += d.vcpus;
        entry.blocks.push(d);
    }
    out
}

/// `adds` names what takes the vCPUs in the help text ("this plan adds").
fn quota_problems(
    wanted: &[Demand],
    freed: &BTreeMap<(String, String), i64>,
    capacity: &Capacity,
    adds: &str,
) -> Vec<Diagnostic> {
    let mut problems = Vec::new();
    let families = tally(wanted, |d| {
        (!d.spot && !d.family.is_empty()).then(|| d.family.clone())
    });
    for ((location, family), t) in &families {
        let Some(usage) = capacity.usage(location, family) else {
            continue;
        };
        let released = freed
            .get(&(location.clone(), family.clone()))
            .copied()
            .unwrap_or(0);
        let available = (usage.available() + released).max(0);
        if t.vcpus <= available {
            continue;
        }
        problems.push(quota_diagnostic(
            &t.blocks, t.vcpus, location, family, usage, available, adds,
        ));
    }
    let low = tally(wanted, |d| d.spot.then(|| LOW_PRIORITY.to_owned()));
    for ((location, counter), t) in &low {
        let Some(usage) = capacity.usage(location, counter) else {
            continue;
        };
        let released = freed
            .get(&(location.clone(), counter.clone()))
            .copied()
            .unwrap_or(0);
        let available = (usage.available() + released).max(0);
        if t.vcpus <= available {
            continue;
        }
        problems.push(quota_diagnostic(
            &t.blocks,
            t.vcpus,
            location,
            "the regional low-priority total (spot VMs)",
            usage,
            available,
            adds,
        ));
    }
    let regional = tally(wanted, |d| (!d.spot).then(|| REGIONAL.to_owned()));
    for ((location, _), t) in &regional {
        let Some(usage) = capacity.usage(location, REGIONAL) else {
            continue;
        };
        let released: i64 = freed
            .iter()
            .filter(|((l, f), _)| l == location && f != LOW_PRIORITY)
            .map(|(_, v)| v)
            .sum();
        let available = (usage.available() + released).max(0);
        if t.vcpus <= available {
            continue;
        }
        problems.push(quota_diagnostic(
            &t.blocks,
            t.vcpus,
            location,
            "the regional total (Total Regional vCPUs)",
            usage,
            available,
            adds,
        ));
    }
    problems
}

fn quota_diagnostic(
    blocks: &[&Demand],
    needed: i64,
    location: &str,
    family: &str,
    usage: &Usage,
    available: i64,
    adds: &str,
) -> Diagnostic {
    let mut names: Vec<String> = Vec::new();
    let mut counts: BTreeMap<(String, String), (i64, i64)> = BTreeMap::new();
    for d in blocks {
        let block = d.block.to_string();
        if !names.contains(&block) {
            names.push(block.clone());
        }
        let entry = counts
            .entry((block, d.size.clone()))
            .or_insert((0, d.vcpus));
        entry.0 += 1;
    }
    let first = blocks[0];
    let what = counts
        .iter()
        .map(|((_, size), (n, each))| format!("{n} x {size} ({each} vCPUs each)"))
        .collect::<Vec<_>>()
        .join(" + ");
    let portal_family = if family.starts_with("the regional low-priority") {
        "Total Regional Spot vCPUs".to_owned()
    } else if family.starts_with("the regional") {
        "Total Regional vCPUs".to_owned()
    } else {
        usage
            .name
            .localized_value
            .clone()
            .unwrap_or_else(|| family.to_owned())
    };
    Diagnostic::error(format!(
        "not enough vCPU quota in {location}: {} needs {needed} vCPUs of {family}, {available} available",
        names.join(" and ")
    ))
    .with_span_opt(first.span.clone())
    .with_label(what)
    .with_help(format!(
        "{family} in {location}: limit {}, in use {}, available {available}; {adds} {needed}",
        usage.limit, usage.current_value
    ))
    .with_help(format!(
        "request more in the Azure portal > Quotas > Compute (\"{portal_family}\", region {location}), or try another region or size (`sizes = [...]` on the block tries sizes in order)"
    ))
}

/// Run the preflight for a plan: check that the subscription is registered for every provider
/// namespace the plan writes to (`engine::registration`), fetch usages and SKUs of the plan's
/// regions to check its new VMs against them, and run the preflight of each kind the plan changes
/// ([`kinds::Driver::preflight`]); the reads run together. Problems are returned,
/// not raised: the caller shows them and decides.
pub async fn preflight(
    client: &ArmClient,
    subscription: &str,
    desired: &Desired,
    plan: &Plan,
) -> Result<Vec<Diagnostic>, ArmError> {
    let creates_vms = plan.changes.iter().any(|c| {
        (c.kind == ResourceKind::VirtualMachine
            && matches!(c.action, Action::Create | Action::Replace { .. }))
            || (node_attrs(c.kind).is_some_and(|(_, count)| count.is_some())
                && matches!(
                    c.action,
                    Action::Create | Action::Replace { .. } | Action::Update
                ))
    });
    let capacity = async {
        if creates_vms {
            Capacity::fetch(client, subscription, &locations_of(desired))
                .await
                .map(Some)
        } else {
            Ok(None)
        }
    };
    let (mut problems, capacity, ml, rights) = futures::join!(
        super::registration::preflight(client, subscription, desired, plan),
        capacity,
        kinds_preflight(client, subscription, desired, plan),
        Box::pin(rbac::preflight(client, subscription, desired, plan))
    );
    if let Some(capacity) = capacity? {
        problems.extend(check(desired, plan, &capacity));
    }
    problems.extend(ml?);
    problems.extend(rights?);
    Ok(problems)
}

/// The preflight of every kind the plan changes, each its driver's, run together.
async fn kinds_preflight(
    client: &ArmClient,
    subscription: &str,
    desired: &Desired,
    plan: &Plan,
) -> Result<Vec<Diagnostic>, ArmError> {
    let at = kinds::Preflight {
        client,
        subscription,
        desired,
    };
    let each = kinds::distinct(plan.changes.iter().map(|c| c.kind))
        .into_iter()
        .map(|kind| kinds::driver(kind).preflight(&at, plan));
    let found = futures::future::try_join_all(each).await?;
    Ok(found.into_iter().flatten().collect())
}

/// Check that starting the parked VMs at `vms` fits the quota: a deallocated VM holds no vCPUs,
/// so `unpark` needs them again (ARM checks quota on start, as on create). `desired` locates the
/// diagnostics on the blocks when the manifest still has them.
pub fn check_start(
    state: &State,
    vms: &[Address],
    desired: &Desired,
    capacity: &Capacity,
) -> Vec<Diagnostic> {
    let wanted: Vec<Demand> = vms
        .iter()
        .filter_map(|address| {
            // Other kinds' starts are their drivers' (`kinds::Driver::unpark_preflight`).
            let r = state
                .resource(address)
                .filter(|r| r.kind == ResourceKind::VirtualMachine)?;
            let size = text(r.attrs.get("size"))?;
            let location = text(r.attrs.get("location"))?.to_ascii_lowercase();
            let (vcpus, family) =
                size_facts(&desired.catalog, &size, capacity.sku(&location, &size))?;
            Some(Demand {
                block: address.block_address(),
                size,
                location,
                zone: text(r.attrs.get("zone")),
                vcpus,
                family,
                span: desired.resource(address).and_then(|d| d.span.clone()),
                spot: text(r.attrs.get("priority")).as_deref() == Some("Spot"),
            })
        })
        .collect();
    quota_problems(&wanted, &BTreeMap::new(), capacity, "starting them needs")
}

/// The locations of the VMs at `vms`, for [`Capacity::fetch`].
pub fn locations_of_vms(state: &State, vms: &[Address]) -> BTreeSet<String> {
    vms.iter()
        .filter_map(|a| state.resource(a))
        .filter(|r| r.kind == ResourceKind::VirtualMachine)
        .filter_map(|r| text(r.attrs.get("location")))
        .map(|l| l.to_ascii_lowercase())
        .collect()
}

/// One block's size candidates, in manifest order.
fn candidates(desired: &Desired) -> BTreeMap<Address, Vec<String>> {
    let mut out = BTreeMap::new();
    for r in &desired.resources {
        if r.kind != ResourceKind::VirtualMachine {
            continue;
        }
        if let Some(list) = r.attrs.get(SIZES_ATTR).and_then(Value::as_array) {
            let sizes: Vec<String> = list.iter().filter_map(|v| text(Some(v))).collect();
            if !sizes.is_empty() {
                out.entry(r.address.block_address()).or_insert(sizes);
            }
        }
    }
    out
}

/// Set a block's size on every resource that depends on it, and drop the candidate list: the
/// VMs' `size`, their NICs' accelerated networking (the size decides it) and the placement
/// group's `vm_sizes`.
pub fn set_block_size(desired: &mut Desired, block: &Address, size: &str) {
    let accelerated = desired
        .vm_size(size)
        .is_some_and(|s| s.accelerated_networking == Some(true));
    for r in desired
        .resources
        .iter_mut()
        .filter(|r| r.address.block_address() == *block)
    {
        match r.kind {
            ResourceKind::VirtualMachine => {
                r.attrs.insert("size".into(), Value::from(size));
                r.attrs.remove(SIZES_ATTR);
            }
            ResourceKind::NetworkInterface => {
                r.attrs
                    .insert("accelerated_networking".into(), Value::Bool(accelerated));
            }
            ResourceKind::ProximityPlacementGroup => {
                r.attrs
                    .insert("vm_sizes".into(), Value::from(vec![Value::from(size)]));
            }
            _ => {}
        }
    }
}

/// The candidate an existing block was created with, if any of its VMs exists with one.
fn kept_size(state: &State, block: &Address, sizes: &[String]) -> Option<String> {
    state
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::VirtualMachine && r.address.block_address() == *block)
        .filter_map(|r| text(r.attrs.get("size")))
        .find(|s| sizes.iter().any(|c| c.eq_ignore_ascii_case(s)))
}

/// Resolve every `sizes = [...]` without a connection: an existing block keeps its size, a new one
/// takes the first candidate. Returns plan notes saying so.
pub fn resolve_sizes_offline(desired: &mut Desired, state: &State) -> Vec<String> {
    let mut notes = Vec::new();
    for (block, sizes) in candidates(desired) {
        if let Some(kept) = kept_size(state, &block, &sizes) {
            notes.push(kept_note(&block, &kept));
            set_block_size(desired, &block, &kept);
            continue;
        }
        notes.push(format!(
            "{block}: `sizes` resolved to the first candidate, {}, without checking quota (no Azure connection); with --emulator, --endpoint or Azure credentials the plan picks the first size that passes the quota and SKU preflight",
            sizes[0]
        ));
        set_block_size(desired, &block, &sizes[0]);
    }
    notes
}

fn kept_note(block: &Address, kept: &str) -> String {
    format!(
        "{block}: keeps {kept} from `sizes`, the size it was created with (a fallback never replaces existing VMs)"
    )
}

/// Resolve every `sizes = [...]` against the subscription's capacity: an existing block keeps its
/// size; a new one takes the first candidate whose VMs pass the quota and SKU checks, counting
/// what earlier blocks already took. Returns plan notes explaining each choice.
pub fn resolve_sizes(desired: &mut Desired, state: &State, capacity: &Capacity) -> Vec<String> {
    let mut notes = Vec::new();
    // vCPUs taken by blocks resolved so far, per (location, counter).
    let mut taken: BTreeMap<(String, String), i64> = BTreeMap::new();
    for (block, sizes) in candidates(desired) {
        if let Some(kept) = kept_size(state, &block, &sizes) {
            notes.push(kept_note(&block, &kept));
            set_block_size(desired, &block, &kept);
            continue;
        }
        let mut rejected = Vec::new();
        let mut chosen = None;
        for size in &sizes {
            if let Some(why) = candidate_problem(desired, &block, size, capacity, &taken) {
                rejected.push(format!("{size} ({why})"));
            } else {
                chosen = Some(size.clone());
                break;
            }
        }
        let size = chosen.clone().unwrap_or_else(|| sizes[0].clone());
        record_taken(desired, &block, &size, capacity, &mut taken);
        set_block_size(desired, &block, &size);
        notes.push(match (chosen, rejected.is_empty()) {
            (Some(size), true) => format!("{block}: `sizes` resolved to {size}, the first candidate: it passes the quota and SKU preflight"),
            (Some(size), false) => format!(
                "{block}: `sizes` resolved to {size}: it passes the quota and SKU preflight, and the candidates before it do not: {}",
                rejected.join("; ")
            ),
            (None, _) => format!(
                "{block}: no candidate of `sizes` passes the quota and SKU preflight ({}); planned with the first, {size}",
                rejected.join("; ")
            ),
        });
    }
    notes
}

/// The block's new VMs with this size: (count, location, zone).
fn block_vms(desired: &Desired, block: &Address) -> Vec<(String, Option<String>)> {
    desired
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::VirtualMachine && r.address.block_address() == *block)
        .filter_map(|r| {
            Some((
                text(r.attrs.get("location"))?.to_ascii_lowercase(),
                text(r.attrs.get("zone")),
            ))
        })
        .collect()
}

/// Why a candidate size does not fit, in a few words; `None` when it does.
fn candidate_problem(
    desired: &Desired,
    block: &Address,
    size: &str,
    capacity: &Capacity,
    taken: &BTreeMap<(String, String), i64>,
) -> Option<String> {
    let vms = block_vms(desired, block);
    let mut per_location: BTreeMap<&str, i64> = BTreeMap::new();
    for (location, zone) in &vms {
        let sku = capacity.sku(location, size);
        if capacity.skus.contains_key(location.as_str()) {
            match sku.map_or(SkuAvailability::NotOffered, |s| s.availability(location)) {
                SkuAvailability::NotOffered => return Some(format!("not offered in {location}")),
                SkuAvailability::Restricted { .. } => {
                    return Some(format!("SkuNotAvailable in {location}"));
                }
                SkuAvailability::Available { zones } => {
                    if let Some(zone) = zone
                        && !zones.is_empty()
                        && !zones.contains(zone)
                    {
                        return Some(format!("not available in zone {zone} of {location}"));
                    }
                }
            }
        }
        *per_location.entry(location).or_default() += 1;
    }
    for (location, count) in per_location {
        let (vcpus, family) = size_facts(&desired.catalog, size, capacity.sku(location, size))?;
        let needed = vcpus * count;
        for counter in [family.as_str(), REGIONAL] {
            let Some(usage) = capacity.usage(location, counter) else {
                continue;
            };
            let already = taken
                .get(&(location.to_owned(), counter.to_owned()))
                .copied()
                .unwrap_or(0);
            let available = (usage.available() - already).max(0);
            if needed > available {
                let what = if counter == REGIONAL {
                    "regional total"
                } else {
                    counter
                };
                return Some(format!(
                    "needs {needed} {what} vCPUs in {location}, {available} available"
                ));
            }
        }
    }
    None
}

fn record_taken(
    desired: &Desired,
    block: &Address,
    size: &str,
    capacity: &Capacity,
    taken: &mut BTreeMap<(String, String), i64>,
) {
    for (location, _) in block_vms(desired, block) {
        if let Some((vcpus, family)) =
            size_facts(&desired.catalog, size, capacity.sku(&location, size))
        {
            *taken.entry((location.clone(), family)).or_default() += vcpus;
            *taken.entry((location, REGIONAL.to_owned())).or_default() += vcpus;
        }
    }
}

/// What resolving against the subscription adds to the plan: notes, and problems found before
/// planning (errors stop the plan as the preflight's do).
#[derive(Debug, Default)]
pub struct Resolved {
    /// Plan notes (a size fallback taken, a NIC's accelerated networking, a VM's security).
    pub notes: Vec<String>,
    /// Located diagnostics.
    pub problems: Vec<Diagnostic>,
}

/// Before planning, with a connection: fetch the capacity of `desired`'s regions when it has
/// `sizes` fallbacks to resolve or VMs to create, resolve the fallbacks against it, let the new
/// VMs' NICs follow the live SKUs' accelerated networking ([`live::apply_networking`]), and
/// decide the new VMs' security from the size, the image and the subscription's features
/// ([`security::apply`]).
pub async fn resolve_live(
    client: &ArmClient,
    subscription: &str,
    desired: &mut Desired,
    state: &State,
) -> Result<Resolved, ArmError> {
    let existing: Vec<Address> = state
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::VirtualMachine)
        .map(|r| r.address.clone())
        .collect();
    let creates_vms = desired
        .resources
        .iter()
        .any(|r| r.kind == ResourceKind::VirtualMachine && !existing.contains(&r.address));
    if candidates(desired).is_empty() && !creates_vms {
        return Ok(Resolved::default());
    }
    let capacity = Capacity::fetch(client, subscription, &locations_of(desired)).await?;
    let mut notes = resolve_sizes(desired, state, &capacity);
    notes.extend(live::apply_networking(desired, &existing, &capacity));
    // After the fallbacks: the images and sizes read are the ones the VMs get.
    let facts = security::SecurityFacts::fetch(client, subscription, desired, &existing).await;
    let (security_notes, problems) = security::apply(desired, &existing, &capacity, &facts);
    notes.extend(security_notes);
    Ok(Resolved { notes, problems })
}

#[cfg(test)]
mod tests;
