//! The diff itself: decide each resource's action, cascade replacements, honour destroy modes,
//! targets and `prevent_destroy`, and order the result with the dependency graph.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use super::change::{Action, Change, Reason};
use super::cost::CostSummary;
use super::saved::PLAN_FORMAT_VERSION;
use super::steps::{StepInputs, planned_steps, unmatched_reruns};
use super::{Binding, Mode, Plan, PlanOptions};
use crate::addr::Address;
use crate::diag::{Diagnostic, did_you_mean};
use crate::graph::Dag;
use crate::model::{Desired, Resource, ResourceKind};
use crate::state::{DSINFRA_VERSION, Drift, ResourceState, ResourceStatus, State};

/// A SAS is signed again when it expires within this many minutes (or has expired), so that the
/// steps that use it right after an apply never get an expired token.
pub const SAS_RENEW_MARGIN_MINUTES: i64 = 60;

/// Plan the changes that take `state` to `desired` (or tear it down, per `opts.mode`).
///
/// Errors are located diagnostics: `prevent_destroy` refusals at the protected block, managed
/// disks the manifest shrinks at their `size_gb` (Azure cannot; see `shrink`), managed disks
/// given a SKU Azure would refuse at their `sku` (see `disk_sku`), targets that select nothing,
/// and dependency cycles.
pub fn plan(desired: &Desired, state: &State, opts: &PlanOptions) -> Result<Plan, Vec<Diagnostic>> {
    let desired_graph = graph_of(
        desired
            .resources
            .iter()
            .map(|r| (&r.address, &r.depends_on)),
    );
    let state_graph = graph_of(state.resources.iter().map(|r| (&r.address, &r.depends_on)));
    let mut problems = Vec::new();
    if let Some(cycle) = desired_graph.find_cycle() {
        problems.push(cycle_diagnostic("the manifest's resources", &cycle));
    }
    if let Some(cycle) = state_graph.find_cycle() {
        problems.push(cycle_diagnostic("the state's resources", &cycle));
    }
    problems.extend(unmatched_targets(desired, state, &opts.targets));
    if !problems.is_empty() {
        return Err(problems);
    }

    let mut changes = match opts.mode {
        Mode::Normal => {
            let mut changes = diff_normal(desired, state, opts.now);
            cascade_replacements(desired, &mut changes);
            changes
        }
        Mode::Destroy { keep_data } => diff_destroy(state, &state_graph, keep_data),
    };
    let mut notes = Vec::new();
    if !opts.targets.is_empty() {
        let total = changes.len();
        restrict_to_targets(&mut changes, opts, &desired_graph, &state_graph);
        notes.push(format!(
            "targeting is for exceptional cases (recovering from an error, working around a problem): this plan covers {} of {total} resources; run a plan without -target afterwards",
            changes.len()
        ));
    }
    let kept = changes
        .values()
        .filter(|c| c.reasons.contains(&Reason::KeptData))
        .count();
    if kept > 0 {
        notes.push(format!(
            "--keep-data keeps {kept} data resource(s) and what they need; `dsinfra destroy` without it deletes them too"
        ));
    }

    if opts.mode == Mode::Normal {
        notes.extend(block_notes(desired, &changes));
    }

    let mut refusals = super::shrink::disk_shrinks(desired, &changes);
    refusals.extend(super::disk_sku::disk_sku_changes(desired, state, &changes));
    refusals.extend(prevent_destroy(desired, &changes));
    if !refusals.is_empty() {
        return Err(refusals);
    }

    let order = ordered(&changes, &desired_graph, &state_graph);
    let changes: Vec<Change> = order
        .into_iter()
        .filter_map(|a| changes.remove(&a))
        .collect();

    let mut cost = cost_of(state, &changes);
    cost.location.clone_from(&desired.azure.location);
    cost.price_idle(&desired.park_idle);
    let steps = match opts.mode {
        Mode::Normal => {
            let unmatched = unmatched_reruns(desired, &opts.rerun_steps);
            if !unmatched.is_empty() {
                return Err(unmatched);
            }
            let inputs = StepInputs {
                state,
                changes: &changes,
                rerun_steps: &opts.rerun_steps,
            };
            planned_steps(desired, &inputs, |block| {
                opts.targets.is_empty()
                    || changes.iter().any(|c| c.address.block_address() == *block)
            })
        }
        Mode::Destroy { .. } => Vec::new(),
    };
    let mut plan = Plan {
        format_version: PLAN_FORMAT_VERSION,
        binding: Binding {
            lineage: state.lineage.clone(),
            serial: state.serial,
            manifest_hash: desired.manifest_hash.clone(),
            dsinfra_version: DSINFRA_VERSION.to_owned(),
        },
        experiment: desired.experiment.clone(),
        mode: opts.mode,
        targets: opts.targets.clone(),
        planned_at: opts.now,
        changes,
        steps,
        kube: super::kube::changes(desired, state, opts),
        cost,
        notes,
        source: None,
    };
    plan.notes.extend(super::detach::detach_notes(&plan));
    Ok(plan)
}

/// The manifest's notes on blocks whose VMs (or AmlCompute) this plan creates or replaces (the
/// only time a VM's security settings, say, take effect), as `block: note`.
fn block_notes(desired: &Desired, changes: &BTreeMap<Address, Change>) -> Vec<String> {
    desired
        .notes
        .iter()
        .filter(|(block, _)| {
            changes.values().any(|c| {
                matches!(
                    c.kind,
                    ResourceKind::VirtualMachine | ResourceKind::MlCompute
                ) && c.address.block_address() == *block
                    && matches!(c.action, Action::Create | Action::Replace { .. })
            })
        })
        .map(|(block, note)| format!("{block}: {note}"))
        .collect()
}

/// A dependency graph over a set of resources; dependencies outside the set are left out.
fn graph_of<'a>(
    resources: impl Iterator<Item = (&'a Address, &'a BTreeSet<Address>)> + Clone,
) -> Dag<Address> {
    let known: BTreeSet<&Address> = resources.clone().map(|(a, _)| a).collect();
    let mut dag = Dag::new();
    for (address, deps) in resources {
        dag.add_node(address.clone());
        for dep in deps.iter().filter(|d| known.contains(d)) {
            dag.add_dependency(address.clone(), dep.clone());
        }
    }
    dag
}

fn cycle_diagnostic(what: &str, cycle: &[Address]) -> Diagnostic {
    let path = cycle
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" -> ");
    Diagnostic::error(format!("{what} depend on each other in a cycle: {path}")).with_help(
        "a cycle cannot be created or deleted in any order; remove one of the references",
    )
}

fn unmatched_targets(desired: &Desired, state: &State, targets: &[Address]) -> Vec<Diagnostic> {
    let all: BTreeSet<&Address> = desired
        .resources
        .iter()
        .map(|r| &r.address)
        .chain(state.resources.iter().map(|r| &r.address))
        .collect();
    let blocks: BTreeSet<String> = all.iter().map(|a| a.block_address().to_string()).collect();
    targets
        .iter()
        .filter(|t| !all.iter().any(|a| t.selects(a)))
        .map(|t| {
            let target = t.to_string();
            let d = Diagnostic::error(format!(
                "-target {target} matches no resource in the manifest or the state"
            ));
            match did_you_mean(
                &t.block_address().to_string(),
                blocks.iter().map(String::as_str),
            ) {
                Some(close) => d.with_help(format!("did you mean `{close}`?")),
                None => d.with_help("`dsinfra state list` shows the addresses dsinfra knows"),
            }
        })
        .collect()
}

fn new_change(r: &Resource, action: Action, before: Option<&ResourceState>) -> Change {
    Change {
        address: r.address.clone(),
        kind: r.kind,
        name: r.name.clone(),
        resource_group: r.resource_group.clone(),
        parent: r.parent.clone(),
        id: before.and_then(|s| s.id.clone()),
        action,
        before: before.map(|s| s.attrs.clone()),
        after: Some(r.attrs.clone()),
        reasons: Vec::new(),
        depends_on: r.depends_on.clone(),
        power_state: before.and_then(|s| s.power_state),
        secrets: before
            .map(|s| s.secrets.keys().cloned().collect())
            .unwrap_or_default(),
    }
}

fn delete_change(s: &ResourceState, reasons: Vec<Reason>) -> Change {
    Change {
        address: s.address.clone(),
        kind: s.kind,
        name: s.name.clone(),
        resource_group: s.resource_group.clone(),
        parent: s.parent.clone(),
        id: s.id.clone(),
        action: Action::Delete,
        before: Some(s.attrs.clone()),
        after: None,
        reasons,
        depends_on: s.depends_on.clone(),
        power_state: s.power_state,
        secrets: s.secrets.keys().cloned().collect(),
    }
}

fn kept_change(s: &ResourceState, reason: Reason) -> Change {
    Change {
        action: Action::NoOp,
        after: Some(s.attrs.clone()),
        ..delete_change(s, vec![reason])
    }
}

/// Attribute names whose values differ (present on one side only counts as different, except an
/// attribute the state's record predates: see `ResourceKind::added_later`).
fn changed_attributes(before: &ResourceState, after: &Resource) -> Vec<String> {
    let keys: BTreeSet<&String> = before.attrs.keys().chain(after.attrs.keys()).collect();
    let predates = |k: &String| {
        !before.attrs.contains_key(k) && after.kind.added_later().contains(&k.as_str())
    };
    keys.into_iter()
        .filter(|k| before.attrs.get(*k) != after.attrs.get(*k) && !predates(k))
        .cloned()
        .collect()
}

/// Changes to what identifies the resource in Azure: these always replace it.
fn identity_changes(before: &ResourceState, after: &Resource) -> Vec<String> {
    let mut forced = Vec::new();
    if before.kind != after.kind {
        forced.push("type".to_owned());
    }
    // A kind named at apply is compared by what it is (its force-new attributes), not by name.
    if before.name != after.name && !after.kind.named_at_apply() {
        forced.push("name".to_owned());
    }
    if before.resource_group != after.resource_group {
        forced.push("resource_group".to_owned());
    }
    if before.parent != after.parent {
        forced.push("parent".to_owned());
    }
    forced
}

/// The expiry of a SAS that must be signed again now, if any.
fn sas_expiring(before: &ResourceState, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if before.kind != ResourceKind::Sas {
        return None;
    }
    let deadline = now + Duration::minutes(SAS_RENEW_MARGIN_MINUTES);
    before
        .secrets
        .values()
        .filter_map(|s| s.expiry)
        .filter(|expiry| *expiry <= deadline)
        .min()
}

fn diff_normal(desired: &Desired, state: &State, now: DateTime<Utc>) -> BTreeMap<Address, Change> {
    let mut changes = BTreeMap::new();
    for r in &desired.resources {
        let change = match state.resource(&r.address) {
            None => Change {
                reasons: vec![Reason::New],
                ..new_change(r, Action::Create, None)
            },
            Some(before) if before.status == ResourceStatus::Creating => Change {
                reasons: vec![Reason::Interrupted],
                ..new_change(r, Action::Create, Some(before))
            },
            Some(before) if before.drift == Some(Drift::Deleted) => Change {
                reasons: vec![Reason::DriftDeleted],
                before: None,
                ..new_change(r, Action::Create, Some(before))
            },
            Some(before) => diff_existing(r, before, now),
        };
        changes.insert(r.address.clone(), change);
    }
    for s in &state.resources {
        if desired.resource(&s.address).is_none() {
            let mut reasons = vec![Reason::Removed];
            if s.drift == Some(Drift::Deleted) {
                reasons.push(Reason::DriftDeleted);
            }
            changes.insert(s.address.clone(), delete_change(s, reasons));
        }
    }
    changes
}

fn diff_existing(r: &Resource, before: &ResourceState, now: DateTime<Utc>) -> Change {
    let changed = changed_attributes(before, r);
    let mut forced: Vec<String> = changed
        .iter()
        .filter(|a| r.kind.force_new().contains(&a.as_str()))
        .cloned()
        .collect();
    forced.extend(identity_changes(before, r));
    let mut reasons = Vec::new();
    if let Some(Drift::Changed { attributes }) = &before.drift {
        reasons.push(Reason::DriftChanged {
            attributes: attributes.clone(),
        });
    }
    let expiring = sas_expiring(before, now);
    let action = if !forced.is_empty() || expiring.is_some() {
        if !forced.is_empty() {
            reasons.push(Reason::ForcedBy {
                attributes: forced.clone(),
            });
        }
        if let Some(expiry) = expiring {
            forced.push("expiry".to_owned());
            reasons.push(Reason::SasExpiring { expiry });
        }
        Action::Replace { forced_by: forced }
    } else if !changed.is_empty() {
        reasons.push(Reason::Changed {
            attributes: changed,
        });
        Action::Update
    } else {
        Action::NoOp
    };
    Change {
        reasons,
        ..new_change(r, action, Some(before))
    }
}

/// Every address string inside a JSON value.
fn referenced_addresses(value: &Value, out: &mut Vec<Address>) {
    match value {
        Value::String(s) => {
            if let Ok(address) = s.parse::<Address>() {
                out.push(address);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| referenced_addresses(v, out)),
        Value::Object(map) => map.values().for_each(|v| referenced_addresses(v, out)),
        _ => {}
    }
}

/// The resource `r` lives inside (a container's or share's storage account): the dependency
/// named `r.parent` whose ARM type contains `r`'s. Such a child is deleted with its parent.
fn parent_of<'a>(desired: &Desired, r: &'a Resource) -> Option<&'a Address> {
    let name = r.parent.as_deref()?;
    r.depends_on.iter().find(|dep| {
        desired
            .resource(dep)
            .is_some_and(|p| p.name == name && r.kind.lives_in(p.kind))
    })
}

/// A resource whose force-new attribute refers to a replaced resource is replaced too (a VM cannot
/// keep a NIC that is deleted), and so is a child of a replaced resource (a container dies with
/// its storage account). Repeats until nothing more changes, so chains cascade.
fn cascade_replacements(desired: &Desired, changes: &mut BTreeMap<Address, Change>) {
    loop {
        let mut cascaded = Vec::new();
        for r in &desired.resources {
            let Some(change) = changes.get(&r.address) else {
                continue;
            };
            if !matches!(change.action, Action::NoOp | Action::Update) {
                continue;
            }
            // Made anew: replaced, or made again after it was deleted outside dsinfra (a new
            // resource all the same: a VM made again has a new identity).
            let replaced = |address: &Address| {
                changes.get(address).is_some_and(|c| {
                    matches!(c.action, Action::Replace { .. })
                        || (c.action == Action::Create && c.reasons.contains(&Reason::DriftDeleted))
                })
            };
            if let Some(parent) = parent_of(desired, r).filter(|p| replaced(p)) {
                cascaded.push((
                    r.address.clone(),
                    Reason::ParentReplaced {
                        parent: parent.clone(),
                    },
                ));
                continue;
            }
            for attribute in r.kind.force_new() {
                let Some(value) = r.attrs.get(*attribute) else {
                    continue;
                };
                let mut refs = Vec::new();
                referenced_addresses(value, &mut refs);
                if let Some(dependency) = refs.into_iter().find(|dep| replaced(dep)) {
                    cascaded.push((
                        r.address.clone(),
                        Reason::DependencyReplaced {
                            attribute: (*attribute).to_owned(),
                            dependency,
                        },
                    ));
                    break;
                }
            }
        }
        if cascaded.is_empty() {
            return;
        }
        for (address, reason) in cascaded {
            if let Some(change) = changes.get_mut(&address) {
                // The referring attribute forces the replacement; a child is not forced by any
                // attribute of its own.
                let forced_by = match &reason {
                    Reason::DependencyReplaced { attribute, .. } => vec![attribute.clone()],
                    _ => Vec::new(),
                };
                change.action = Action::Replace { forced_by };
                change
                    .reasons
                    .retain(|r| !matches!(r, Reason::Changed { .. }));
                change.reasons.push(reason);
            }
        }
    }
}

fn diff_destroy(state: &State, graph: &Dag<Address>, keep_data: bool) -> BTreeMap<Address, Change> {
    // What each kept resource is kept for: data itself, or the first data resource needing it.
    let mut kept: BTreeMap<Address, Reason> = BTreeMap::new();
    if keep_data {
        for s in state.resources.iter().filter(|s| s.kind.is_data()) {
            kept.insert(s.address.clone(), Reason::KeptData);
        }
        for s in state.resources.iter().filter(|s| s.kind.is_data()) {
            for dep in graph.all_dependencies(&s.address) {
                kept.entry(dep).or_insert_with(|| Reason::KeptForData {
                    needed_by: s.address.clone(),
                });
            }
        }
    }
    state
        .resources
        .iter()
        .map(|s| {
            let change = if let Some(reason) = kept.remove(&s.address) {
                kept_change(s, reason)
            } else {
                let mut reasons = vec![Reason::Destroy];
                if s.drift == Some(Drift::Deleted) {
                    reasons.push(Reason::DriftDeleted);
                }
                delete_change(s, reasons)
            };
            (s.address.clone(), change)
        })
        .collect()
}

/// Keep only what the targets select, plus what that needs: dependencies for creates and
/// updates, dependents for deletes (they cannot outlive what they depend on), and replacements
/// cascading from a kept replacement.
fn restrict_to_targets(
    changes: &mut BTreeMap<Address, Change>,
    opts: &PlanOptions,
    desired_graph: &Dag<Address>,
    state_graph: &Dag<Address>,
) {
    let selected: BTreeSet<Address> = changes
        .keys()
        .filter(|a| opts.targets.iter().any(|t| t.selects(a)))
        .cloned()
        .collect();
    let mut included = selected.clone();
    for address in &selected {
        match opts.mode {
            Mode::Normal => included.extend(desired_graph.all_dependencies(address)),
            Mode::Destroy { .. } => included.extend(state_graph.all_dependents(address)),
        }
    }
    loop {
        let more: Vec<Address> = changes
            .values()
            .filter(|c| !included.contains(&c.address))
            .filter(|c| {
                c.reasons.iter().any(|r| match r {
                    Reason::DependencyReplaced { dependency, .. } => included.contains(dependency),
                    Reason::ParentReplaced { parent } => included.contains(parent),
                    _ => false,
                })
            })
            .map(|c| c.address.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        included.extend(more);
    }
    changes.retain(|address, _| included.contains(address));
}

/// `prevent_destroy` refuses any plan that deletes or replaces the resource.
fn prevent_destroy(desired: &Desired, changes: &BTreeMap<Address, Change>) -> Vec<Diagnostic> {
    changes
        .values()
        .filter_map(|change| {
            let r = desired.resource(&change.address)?;
            if !r.lifecycle.prevent_destroy {
                return None;
            }
            let block = r.address.block_address();
            let diagnostic = match &change.action {
                Action::Delete => Diagnostic::error(format!(
                    "{} has `prevent_destroy` set, but this plan would destroy it",
                    change.address
                ))
                .with_label("protected by `prevent_destroy`")
                .with_help("`dsinfra destroy --keep-data` keeps storage accounts, shares, containers and data disks")
                .with_help(format!(
                    "to really destroy it, remove `prevent_destroy` from `{block}` first"
                )),
                Action::Replace { forced_by } => Diagnostic::error(format!(
                    "{} has `prevent_destroy` set, but this plan would replace it ({})",
                    change.address,
                    change
                        .reasons
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                ))
                .with_label("protected by `prevent_destroy`")
                .with_help(format!(
                    "revert the change to {} to keep it",
                    forced_by
                        .iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .with_help(format!(
                    "to replace it anyway, remove `prevent_destroy` from `{block}` first"
                )),
                _ => return None,
            };
            Some(diagnostic.with_span_opt(r.span.clone()))
        })
        .collect()
}

/// Deletions first, dependents before their dependencies; then everything else with
/// dependencies first. Ties break by address, so the order is stable.
fn ordered(
    changes: &BTreeMap<Address, Change>,
    desired_graph: &Dag<Address>,
    state_graph: &Dag<Address>,
) -> Vec<Address> {
    let is_delete = |a: &Address| changes.get(a).is_some_and(|c| c.action == Action::Delete);
    let mut order: Vec<Address> = state_graph
        .reverse_order()
        .unwrap_or_default()
        .into_iter()
        .filter(|a| is_delete(a))
        .collect();
    let mut placed: BTreeSet<Address> = order.iter().cloned().collect();
    let forward = desired_graph
        .topological_order()
        .unwrap_or_default()
        .into_iter()
        .chain(state_graph.topological_order().unwrap_or_default());
    for address in forward {
        if changes.contains_key(&address) && placed.insert(address.clone()) {
            order.push(address);
        }
    }
    order
}

fn cost_of(state: &State, changes: &[Change]) -> CostSummary {
    let planned: BTreeSet<&Address> = changes.iter().map(|c| &c.address).collect();
    let rows = changes
        .iter()
        .map(|c| {
            // A resource deleted outside dsinfra costs nothing now, whatever the state says.
            let before = state
                .resource(&c.address)
                .filter(|s| s.drift != Some(Drift::Deleted))
                .map(|s| &s.attrs);
            (&c.address, c.kind, before, c.after.as_ref())
        })
        .chain(
            state
                .resources
                .iter()
                .filter(|s| !planned.contains(&s.address))
                .map(|s| (&s.address, s.kind, Some(&s.attrs), Some(&s.attrs))),
        );
    CostSummary::from_rows(rows)
}

#[cfg(test)]
mod cascade_tests {
    use serde_json::json;

    use super::*;
    use crate::plan::Counts;
    use crate::plan::fixtures::{addr, dual, normal, set};

    fn account_sku_changed() -> (Desired, State) {
        let state = State::from_applied(&dual(), "sub");
        let mut desired = dual();
        set(
            &mut desired,
            "storage_account.data.account",
            "sku",
            json!("Standard_GRS"),
        );
        (desired, state)
    }

    #[test]
    fn a_replaced_storage_account_replaces_its_containers() {
        let (desired, state) = account_sku_changed();
        let planned = plan(&desired, &state, &normal()).expect("plans");
        let account = planned
            .change(&addr("storage_account.data.account"))
            .expect("planned");
        assert_eq!(account.forced_by(), ["sku"]);
        let container = planned
            .change(&addr("storage_account.data.container.raw"))
            .expect("planned");
        assert_eq!(container.action, Action::Replace { forced_by: vec![] });
        assert_eq!(
            container.reasons,
            [Reason::ParentReplaced {
                parent: addr("storage_account.data.account")
            }]
        );
        assert_eq!(
            container.reasons[0].to_string(),
            "it lives in storage_account.data.account, which is replaced, and goes with it"
        );
        // Nothing else lives in the account: the VM side is untouched.
        assert_eq!(
            planned.counts(),
            Counts {
                replace: 2,
                ..Counts::default()
            }
        );
    }

    #[test]
    fn targeting_a_replaced_account_keeps_its_containers_in_the_plan() {
        let (desired, state) = account_sku_changed();
        let opts = PlanOptions {
            targets: vec![addr("storage_account.data.account")],
            ..normal()
        };
        let planned = plan(&desired, &state, &opts).expect("plans");
        assert!(
            planned
                .change(&addr("storage_account.data.container.raw"))
                .is_some_and(|c| matches!(c.action, Action::Replace { .. })),
            "{:?}",
            planned.changes
        );
    }
}
