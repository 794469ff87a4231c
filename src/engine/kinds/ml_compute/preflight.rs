//! The preflight of AmlCompute clusters, before anything is created: an existing
//! workspace (`aml_workspace { existing = true }`) is read, so that a missing one or one in
//! another region is said at the manifest's words instead of as ARM's `ParentResourceNotFound`
//! after other resources were made; and the clusters' nodes are checked against AmlCompute's
//! own vCPU quota, which is apart from the VMs' (`Microsoft.MachineLearningServices/locations/
//! {loc}/usages`): dedicated nodes count against their family and the regional dedicated total,
//! low-priority nodes against the regional low-priority total.
//!
//! Fetching ([`MlCapacity::fetch`], [`workspace_problems`]) is separate from deciding
//! ([`check`], [`check_start`]), which are pure and unit-tested.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::addr::Address;
use crate::azure::types::quota::Usage;
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::catalog;
use crate::diag::{Diagnostic, Span};
use crate::model::{Attrs, Desired, Resource};
use crate::plan::{Action, Change, Plan};
use crate::state::{PowerState, State};

/// The quota counters AmlCompute nodes count against.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Counter {
    /// One VM family's dedicated vCPUs (`standardNDSv2Family`).
    Family(String),
    /// The regional total of dedicated vCPUs.
    Dedicated,
    /// The regional total of low-priority vCPUs.
    LowPriority,
}

impl Counter {
    /// Whether `usage` is this counter. AML names its counters by their label
    /// ("Standard NDSv2 Family Cluster Dedicated vCPUs", "Total Cluster Dedicated Regional
    /// vCPUs"); some answers give the family's id or a short name (`Cores`,
    /// `LowPriorityCores`) as the value instead: either is taken.
    fn matches(&self, usage: &Usage) -> bool {
        let names = [
            Some(usage.name.value.as_str()),
            usage.name.localized_value.as_deref(),
        ];
        let is = |wanted: &[&str]| {
            names
                .iter()
                .flatten()
                .any(|n| wanted.iter().any(|w| n.eq_ignore_ascii_case(w)))
        };
        match self {
            Self::Family(family) => is(&[family, &self.label()]),
            Self::Dedicated => is(&["Cores", "Total Cluster Dedicated Regional vCPUs"]),
            Self::LowPriority => is(&[
                "LowPriorityCores",
                "Total Cluster LowPriority Regional vCPUs",
            ]),
        }
    }

    /// The counter's name as AML's quota page shows it.
    fn label(&self) -> String {
        match self {
            Self::Family(family) => {
                let core = family
                    .trim_start_matches("standard")
                    .trim_start_matches("Standard")
                    .trim_end_matches("Family")
                    .trim();
                format!("Standard {core} Family Cluster Dedicated vCPUs")
            }
            Self::Dedicated => "Total Cluster Dedicated Regional vCPUs".to_owned(),
            Self::LowPriority => "Total Cluster LowPriority Regional vCPUs".to_owned(),
        }
    }
}

/// AML's usages of every location the plan's clusters use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MlCapacity {
    /// Usages per location (lower case).
    pub usages: BTreeMap<String, Vec<Usage>>,
}

impl MlCapacity {
    /// Read AML's usages of every location, one call per location.
    pub async fn fetch(
        client: &ArmClient,
        subscription: &str,
        locations: &BTreeSet<String>,
    ) -> Result<Self, ArmError> {
        let mut capacity = Self::default();
        for location in locations {
            let usages = client.ml_usages(subscription, location).await?;
            capacity
                .usages
                .insert(location.to_ascii_lowercase(), usages);
        }
        Ok(capacity)
    }

    fn usage(&self, location: &str, counter: &Counter) -> Option<&Usage> {
        self.usages
            .get(location)?
            .iter()
            .find(|u| counter.matches(u))
    }
}

/// One cluster's nodes that need quota.
#[derive(Debug, Clone, PartialEq)]
struct Demand {
    block: Address,
    size: String,
    location: String,
    nodes: i64,
    vcpus: i64,
    family: String,
    low_priority: bool,
    span: Option<Span>,
}

impl Demand {
    /// What a cluster of `attrs` (a compute's attributes) holds of quota with `nodes` nodes;
    /// `None` for a size the catalog does not know (ARM's own check still applies).
    fn of(
        catalog: &catalog::Catalog,
        block: Address,
        attrs: &Attrs,
        nodes: i64,
        span: Option<Span>,
    ) -> Option<Self> {
        let size = text(attrs.get("size"))?;
        let location = text(attrs.get("location"))?.to_ascii_lowercase();
        let info = catalog.vm_size(&size)?;
        Some(Self {
            block,
            size,
            location,
            nodes,
            vcpus: i64::from(info.vcpus),
            family: info.quota_family.to_string(),
            low_priority: text(attrs.get("priority"))
                .is_some_and(|p| p.eq_ignore_ascii_case("LowPriority")),
            span,
        })
    }

    fn counters(&self) -> Vec<Counter> {
        if self.low_priority {
            vec![Counter::LowPriority]
        } else {
            vec![Counter::Family(self.family.clone()), Counter::Dedicated]
        }
    }

    fn total(&self) -> i64 {
        self.nodes * self.vcpus
    }
}

fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_owned)
}

fn count(attrs: Option<&Attrs>) -> i64 {
    attrs
        .and_then(|a| a.get("count"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The compute changes of a plan.
fn compute_changes(plan: &Plan) -> impl Iterator<Item = &Change> {
    plan.changes.iter().filter(|c| c.kind == super::KIND)
}

/// The nodes the plan's clusters need (created, replaced, or scaled up while running), and the
/// vCPUs it frees first (deleted and replaced clusters, scaled-down ones) per (location, counter).
fn demands(desired: &Desired, plan: &Plan) -> (Vec<Demand>, BTreeMap<(String, Counter), i64>) {
    let mut wanted = Vec::new();
    let mut freed: BTreeMap<(String, Counter), i64> = BTreeMap::new();
    for change in compute_changes(plan) {
        // A parked cluster holds no node and its scale changes keep it parked.
        let parked = change.power_state == Some(PowerState::Deallocated);
        let before = change.before.as_ref().filter(|_| !parked);
        let (before_nodes, after_nodes) = match change.action {
            Action::Create => (0, count(change.after.as_ref())),
            Action::Replace { .. } => (count(before), count(change.after.as_ref())),
            Action::Update if !parked => (count(before), count(change.after.as_ref())),
            Action::Delete => (count(before), 0),
            _ => continue,
        };
        let block = change.address.block_address();
        let span = desired
            .resource(&change.address)
            .and_then(|r| r.span.clone());
        let old_goes = matches!(change.action, Action::Replace { .. } | Action::Delete);
        if let Some(old) =
            before.and_then(|b| Demand::of(&desired.catalog, block.clone(), b, before_nodes, None))
        {
            let released = if old_goes {
                old.total()
            } else {
                (before_nodes - after_nodes).max(0) * old.vcpus
            };
            for counter in old.counters() {
                *freed.entry((old.location.clone(), counter)).or_default() += released;
            }
        }
        let added = if old_goes || change.action == Action::Create {
            after_nodes
        } else {
            (after_nodes - before_nodes).max(0)
        };
        if added == 0 {
            continue;
        }
        if let Some(d) = change
            .after
            .as_ref()
            .and_then(|a| Demand::of(&desired.catalog, block, a, added, span))
        {
            wanted.push(d);
        }
    }
    (wanted, freed)
}

/// The locations whose AML usages a plan needs: those of the clusters it creates or grows.
pub fn locations_of(desired: &Desired, plan: &Plan) -> BTreeSet<String> {
    demands(desired, plan)
        .0
        .into_iter()
        .map(|d| d.location)
        .collect()
}

/// Check the plan's clusters against AML's quota: one diagnostic per short counter, located on
/// the first block it concerns.
pub fn check(desired: &Desired, plan: &Plan, capacity: &MlCapacity) -> Vec<Diagnostic> {
    let (wanted, freed) = demands(desired, plan);
    quota_problems(&wanted, &freed, capacity, "this plan adds")
}

/// Check that scaling the parked clusters at `clusters` back to their `count` fits AML's
/// quota: a cluster scaled to zero holds none, so `unpark` needs it again.
pub fn check_start(
    state: &State,
    clusters: &[Address],
    desired: &Desired,
    capacity: &MlCapacity,
) -> Vec<Diagnostic> {
    let wanted: Vec<Demand> = clusters
        .iter()
        .filter_map(|address| {
            let r = state.resource(address).filter(|r| r.kind == super::KIND)?;
            let span = desired.resource(address).and_then(|d| d.span.clone());
            Demand::of(
                &desired.catalog,
                address.block_address(),
                &r.attrs,
                count(Some(&r.attrs)),
                span,
            )
        })
        .collect();
    quota_problems(
        &wanted,
        &BTreeMap::new(),
        capacity,
        "scaling them back needs",
    )
}

/// The locations of the clusters at `clusters`, for [`MlCapacity::fetch`].
pub fn locations_of_clusters(state: &State, clusters: &[Address]) -> BTreeSet<String> {
    clusters
        .iter()
        .filter_map(|a| state.resource(a))
        .filter(|r| r.kind == super::KIND)
        .filter_map(|r| text(r.attrs.get("location")))
        .map(|l| l.to_ascii_lowercase())
        .collect()
}

fn quota_problems(
    wanted: &[Demand],
    freed: &BTreeMap<(String, Counter), i64>,
    capacity: &MlCapacity,
    adds: &str,
) -> Vec<Diagnostic> {
    let mut tallies: BTreeMap<(String, Counter), Vec<&Demand>> = BTreeMap::new();
    for d in wanted {
        for counter in d.counters() {
            tallies
                .entry((d.location.clone(), counter))
                .or_default()
                .push(d);
        }
    }
    let mut problems = Vec::new();
    for ((location, counter), blocks) in &tallies {
        let Some(usage) = capacity.usage(location, counter) else {
            continue;
        };
        let needed: i64 = blocks.iter().map(|d| d.total()).sum();
        let released = freed
            .get(&(location.clone(), counter.clone()))
            .copied()
            .unwrap_or(0);
        let available = (usage.available() + released).max(0);
        if needed > available {
            problems.push(quota_diagnostic(
                blocks, needed, location, counter, usage, available, adds,
            ));
        }
    }
    problems
}

fn quota_diagnostic(
    blocks: &[&Demand],
    needed: i64,
    location: &str,
    counter: &Counter,
    usage: &Usage,
    available: i64,
    adds: &str,
) -> Diagnostic {
    let mut names: Vec<String> = Vec::new();
    for d in blocks {
        let name = d.block.to_string();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let what = blocks
        .iter()
        .map(|d| {
            let priority = if d.low_priority { " low priority" } else { "" };
            format!(
                "{} x {}{priority} ({} vCPUs each)",
                d.nodes, d.size, d.vcpus
            )
        })
        .collect::<Vec<_>>()
        .join(" + ");
    let label = counter.label();
    Diagnostic::error(format!(
        "not enough AmlCompute quota in {location}: {} needs {needed} vCPUs of {label}, {available} available",
        names.join(" and ")
    ))
    .with_span_opt(blocks[0].span.clone())
    .with_label(what)
    .with_help(format!(
        "{label} in {location}: limit {}, in use {}, available {available}; {adds} {needed}",
        usage.limit, usage.current_value
    ))
    .with_help(format!(
        "AmlCompute has its own quota, apart from the VMs': request an increase of \"{label}\" (region {location}) in Azure Machine Learning studio > Quota or the Azure portal > Quotas > Machine learning; or lower `count`, or use another size or region"
    ))
}

/// The existing workspaces the plan's clusters use, read before anything is created: a
/// missing workspace, or one in another region than the manifest puts its clusters in, is an
/// error located at the workspace block.
pub async fn workspace_problems(
    client: &ArmClient,
    subscription: &str,
    desired: &Desired,
    plan: &Plan,
) -> Result<Vec<Diagnostic>, ArmError> {
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for change in compute_changes(plan).filter(|c| {
        matches!(
            c.action,
            Action::Create | Action::Replace { .. } | Action::Update
        )
    }) {
        let Some(resource) = desired.resource(&change.address) else {
            continue;
        };
        let existing = resource
            .attrs
            .get("existing_workspace")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let (Some(name), Some(group)) = (
            text(resource.attrs.get("workspace_name")),
            text(resource.attrs.get("workspace_resource_group")),
        ) else {
            continue;
        };
        if !existing || !seen.insert((group.to_ascii_lowercase(), name.to_ascii_lowercase())) {
            continue;
        }
        let id = ResourceId::from_raw(format!(
            "/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.MachineLearningServices/workspaces/{name}"
        ));
        let found = match client.get_ml_workspace(&id).await {
            Ok(found) => found.map(|w| w.location),
            Err(e) if e.is_resource_group_not_found() => None,
            Err(e) => return Err(e),
        };
        let found = match found {
            Some(location) => Found::In(location.unwrap_or_default()),
            None => Found::Missing,
        };
        problems.extend(workspace_problem(resource, subscription, &found));
    }
    Ok(problems)
}

/// What the preflight found of an existing workspace.
#[derive(Debug, Clone, PartialEq)]
enum Found {
    Missing,
    /// It exists, in this region (as ARM writes it).
    In(String),
}

/// The problem with the existing workspace a compute (`resource`) uses, if any.
fn workspace_problem(resource: &Resource, subscription: &str, found: &Found) -> Option<Diagnostic> {
    let name = text(resource.attrs.get("workspace_name")).unwrap_or_default();
    let group = text(resource.attrs.get("workspace_resource_group")).unwrap_or_default();
    let at_name = resource
        .attr_spans
        .get("workspace_name")
        .cloned()
        .or_else(|| resource.span.clone());
    match found {
        Found::Missing => Some(
            Diagnostic::error(format!(
                "workspace {group}/{name} does not exist in subscription {subscription}"
            ))
            .with_span_opt(at_name)
            .with_label("`existing = true`: dsinfra reads this workspace and never creates it")
            .with_help(format!(
                "create it (Azure Machine Learning studio, or `az ml workspace create --name {name} --resource-group {group}`), or drop `existing = true` to let dsinfra create it; check `name` and `resource_group` for a typo"
            )),
        ),
        Found::In(location) => {
            let wanted = text(resource.attrs.get("location")).unwrap_or_default();
            let normal = |l: &str| l.replace(' ', "").to_ascii_lowercase();
            if location.is_empty() || normal(location) == normal(&wanted) {
                return None;
            }
            let span = resource
                .attr_spans
                .get("location")
                .cloned()
                .or(at_name);
            Some(
                Diagnostic::error(format!(
                    "workspace {group}/{name} is in {}, not in {wanted} where the manifest puts its clusters",
                    normal(location)
                ))
                .with_span_opt(span)
                .with_label(format!("the clusters of this workspace would be created in {wanted}"))
                .with_help(format!(
                    "a cluster is created in its workspace's region: write `location = \"{}\"` on the aml_workspace block",
                    normal(location)
                )),
            )
        }
    }
}

/// The AML part of a plan's preflight: the existing workspaces, and AML's quota for the
/// clusters the plan creates or grows. Both reads run together.
pub async fn preflight(
    client: &ArmClient,
    subscription: &str,
    desired: &Desired,
    plan: &Plan,
) -> Result<Vec<Diagnostic>, ArmError> {
    let locations = locations_of(desired, plan);
    let capacity = async {
        if locations.is_empty() {
            Ok(MlCapacity::default())
        } else {
            MlCapacity::fetch(client, subscription, &locations).await
        }
    };
    let (mut problems, capacity) = futures::try_join!(
        workspace_problems(client, subscription, desired, plan),
        capacity
    )?;
    problems.extend(check(desired, plan, &capacity));
    Ok(problems)
}

#[cfg(test)]
mod tests;
