//! The post-boot steps a plan lists: which nodes each step would run on, and why.
//!
//! The plan predicts, offline, what an apply's step runner will do on each node: it compares the
//! manifest's [`Step::fingerprint`] with the [`StepRecord`]s that state keeps for every node a step
//! succeeded on, the VM's [`boots`](ResourceState::boots) with the boot each record was made in,
//! and looks at the VMs this plan creates or replaces. It is a prediction, not the decision: at
//! apply time each node's own markers (over the rendered script) have the final word, so a node
//! rebooted outside dsinfra, or a marker deleted by hand, is only seen then.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::change::{Action, Change};
use crate::addr::Address;
use crate::diag::{Diagnostic, did_you_mean};
use crate::model::{Desired, ResourceKind, RunPolicy, Step, StepScope};
use crate::state::{ResourceState, State};

/// One step and where it would run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedStep {
    /// The `vm` or `cluster` block it belongs to.
    pub block: Address,
    /// Step name, unique within its block.
    pub name: String,
    /// Step kind (`mofed`, `blobfuse2`, `script`, ...).
    pub kind: String,
    /// All nodes or the head only.
    pub scope: StepScope,
    /// When it runs again.
    pub run: RunPolicy,
    /// The VM resources it would run on, in node order.
    pub nodes: Vec<Address>,
    /// For each node in [`Self::nodes`], in the same order: whether the step would run there in
    /// the next apply, and why. Empty in plans saved before reasons existed.
    #[serde(default)]
    pub reasons: Vec<NodeReason>,
}

/// Whether a step would run on one node, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReason {
    /// The node's VM resource (`cluster.train[3].vm`).
    pub node: Address,
    /// Why the step runs there, or [`StepReason::UpToDate`].
    pub reason: StepReason,
}

/// Why a step would run on a node. The variants are in order of precedence: a node gets the
/// first that applies, so the plan names the reason that does not depend on a flag when there is
/// one (a step forced on a new node runs because the node is new).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepReason {
    /// The VM is created or replaced by this plan: a fresh disk runs every step.
    NewNode,
    /// The node exists but the step never succeeded on it (a step added to the manifest, or one
    /// that failed last time).
    New,
    /// The step's kind, scope, run policy or parameters changed since it last succeeded there.
    Changed,
    /// A per-boot step, and dsinfra restarted the VM (unpark, resize) since the step ran.
    Rebooted,
    /// Its run policy is `always`.
    Always,
    /// Asked for with `--rerun-step`.
    Forced,
    /// Nothing to do: the next apply skips it on this node.
    UpToDate,
}

impl StepReason {
    /// Whether the step runs for this reason (everything but [`StepReason::UpToDate`]).
    pub fn runs(self) -> bool {
        self != Self::UpToDate
    }
}

impl fmt::Display for StepReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NewNode => "new node",
            Self::New => "not run here yet",
            Self::Changed => "changed since it ran",
            Self::Rebooted => "restarted since it ran",
            Self::Always => "runs on every apply",
            Self::Forced => "forced (--rerun-step)",
            Self::UpToDate => "up to date",
        })
    }
}

impl PlannedStep {
    /// Where it runs, compactly: `cluster.train[0..3] (4 nodes)`, `cluster.train[0]`, `vm.gpu`.
    pub fn nodes_text(&self) -> String {
        nodes_text(&self.block, &self.nodes)
    }

    /// Whether the step would run on at least one node.
    pub fn runs(&self) -> bool {
        self.reasons.iter().any(|r| r.reason.runs())
    }

    /// The nodes grouped by reason, in the order of [`StepReason`] (runs first, up to date last),
    /// each group in node order.
    pub fn by_reason(&self) -> Vec<(StepReason, Vec<Address>)> {
        let mut groups: Vec<(StepReason, Vec<Address>)> = Vec::new();
        for r in &self.reasons {
            match groups.iter_mut().find(|(reason, _)| *reason == r.reason) {
                Some((_, nodes)) => nodes.push(r.node.clone()),
                None => groups.push((r.reason, vec![r.node.clone()])),
            }
        }
        groups.sort_by_key(|(reason, _)| *reason);
        groups
    }
}

/// A set of nodes of one block, compactly: `vm.gpu`, `cluster.train[2]`,
/// `cluster.train[0..3] (4 nodes)`, `cluster.train[0..3,6,8,9] (7 nodes)`. Ranges keep the
/// text short for 64-node clusters whatever subset a reason covers.
pub fn nodes_text(block: &Address, nodes: &[Address]) -> String {
    let mut indices: Vec<u32> = nodes.iter().filter_map(|n| n.index).collect();
    indices.sort_unstable();
    indices.dedup();
    match indices.as_slice() {
        [] => block.to_string(),
        [one] => format!("{block}[{one}]"),
        _ => {
            let mut ranges: Vec<(u32, u32)> = Vec::new();
            for &i in &indices {
                match ranges.last_mut() {
                    Some((_, last)) if *last + 1 == i => *last = i,
                    _ => ranges.push((i, i)),
                }
            }
            // Two neighbours read better as a list (`0,1`) than as a range (`0..1`).
            let text: Vec<String> = ranges
                .iter()
                .map(|&(first, last)| match last - first {
                    0 => first.to_string(),
                    1 => format!("{first},{last}"),
                    _ => format!("{first}..{last}"),
                })
                .collect();
            format!("{block}[{}] ({} nodes)", text.join(","), indices.len())
        }
    }
}

/// Whether `--rerun-step` forces the step or runner part `name` of `block`.
///
/// Each entry is `NAME` (in every block) or `BLOCK/NAME`, where `BLOCK` is the block's address
/// (`cluster.train`, `vm.gpu`) or its bare name (`train`). `NAME` is a manifest step name
/// (`beeond`), which forces every part the library expands it into (`beeond.install`,
/// `beeond.start`, ...), or one part (`beeond.start`), which forces only that part in the run and
/// shows the manifest step as forced in the plan. The engine uses the same rule to build the
/// runner's forced set from its part names, so plan and apply agree.
pub fn rerun_selects(rerun_steps: &BTreeSet<String>, block: &Address, name: &str) -> bool {
    rerun_steps.iter().any(|entry| {
        let wanted = match entry.split_once('/') {
            Some((b, n)) if b == block.name || b == block.to_string() => n,
            Some(_) => return false,
            None => entry.as_str(),
        };
        let part_of = |whole: &str, part: &str| {
            part.strip_prefix(whole)
                .is_some_and(|rest| rest.starts_with('.'))
        };
        wanted == name || part_of(name, wanted) || part_of(wanted, name)
    })
}

/// `--rerun-step` entries that name no step of `desired`: each is an error, with a suggestion,
/// because a mistyped name would otherwise silently force nothing.
pub(super) fn unmatched_reruns(
    desired: &Desired,
    rerun_steps: &BTreeSet<String>,
) -> Vec<Diagnostic> {
    let known: Vec<String> = desired
        .steps
        .iter()
        .map(|s| format!("{}/{}", s.block, s.name))
        .collect();
    let mut names: Vec<&str> = desired.steps.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    rerun_steps
        .iter()
        .filter(|entry| {
            !desired
                .steps
                .iter()
                .any(|s| rerun_selects(&BTreeSet::from([(*entry).clone()]), &s.block, &s.name))
        })
        .map(|entry| {
            let bare = entry.rsplit_once('/').map_or(entry.as_str(), |(_, n)| n);
            let candidates = names
                .iter()
                .copied()
                .chain(known.iter().map(String::as_str));
            let help = match did_you_mean(entry, candidates.clone())
                .or_else(|| did_you_mean(bare, candidates))
            {
                Some(close) => format!("did you mean `{close}`?"),
                None if known.is_empty() => "the manifest declares no steps".to_owned(),
                None => format!("the manifest's steps are: {}", known.join(", ")),
            };
            Diagnostic::error(format!(
                "--rerun-step {entry} names no step of the manifest"
            ))
            .with_help(help)
        })
        .collect()
}

/// What [`planned_steps`] needs besides the manifest.
pub(super) struct StepInputs<'a> {
    /// The state the plan was made against (step records, boots).
    pub state: &'a State,
    /// The plan's changes (which VMs are created or replaced).
    pub changes: &'a [Change],
    /// `--rerun-step` entries.
    pub rerun_steps: &'a BTreeSet<String>,
}

/// The steps of `desired` whose block is selected by `selected`, with their nodes and why each
/// node would run them.
pub(super) fn planned_steps(
    desired: &Desired,
    inputs: &StepInputs<'_>,
    selected: impl Fn(&Address) -> bool,
) -> Vec<PlannedStep> {
    desired
        .steps
        .iter()
        .filter(|step| selected(&step.block))
        .map(|step| plan_step(desired, inputs, step))
        .collect()
}

fn plan_step(desired: &Desired, inputs: &StepInputs<'_>, step: &Step) -> PlannedStep {
    if step.block.kind == AML_CLUSTER {
        return plan_aml_step(desired, inputs, step);
    }
    let mut nodes: Vec<Address> = desired
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::VirtualMachine)
        .filter(|r| r.address.block_address() == step.block)
        .filter(|r| step.scope == StepScope::All || r.address.index.unwrap_or(0) == 0)
        .map(|r| r.address.clone())
        .collect();
    nodes.sort();
    let fingerprint = step.fingerprint();
    let forced = rerun_selects(inputs.rerun_steps, &step.block, &step.name);
    let reasons = nodes
        .iter()
        .map(|node| {
            let fresh = inputs.changes.iter().any(|c| {
                &c.address == node && matches!(c.action, Action::Create | Action::Replace { .. })
            });
            let vm = inputs.state.resource(node);
            NodeReason {
                node: node.clone(),
                reason: node_reason(
                    &step.name,
                    step.run,
                    &fingerprint,
                    if fresh { None } else { vm },
                    forced,
                ),
            }
        })
        .collect();
    PlannedStep {
        block: step.block.clone(),
        name: step.name.clone(),
        kind: step.kind.clone(),
        scope: step.scope,
        run: step.run,
        nodes,
        reasons,
    }
}

/// The block kind of Azure Machine Learning clusters, whose nodes are no resources.
const AML_CLUSTER: &str = "aml_cluster";

/// [`plan_step`] for an `aml_cluster`: its nodes are `aml_cluster.c[i].node` for `i` below the
/// compute's `count`. The service makes the nodes, so they have no state of their own: node `i`
/// is the `i`-th node id the compute's records hold (they are sorted by node id, as apply
/// numbers the nodes), and a node without one is new. A compute this plan creates or replaces,
/// or a parked one (unpark makes new nodes), has only new nodes.
fn plan_aml_step(desired: &Desired, inputs: &StepInputs<'_>, step: &Step) -> PlannedStep {
    let compute = Address::new(&step.block.kind, &step.block.name, None, "compute");
    let count = desired
        .resource(&compute)
        .and_then(|r| r.attrs.get("count"))
        .and_then(serde_json::Value::as_u64)
        .and_then(|c| u32::try_from(c).ok())
        .unwrap_or(1);
    let fresh = inputs.changes.iter().any(|c| {
        c.address == compute && matches!(c.action, Action::Create | Action::Replace { .. })
    });
    let known = inputs
        .state
        .resource(&compute)
        .filter(|r| !fresh && r.power_state != Some(crate::state::PowerState::Deallocated));
    let records: Vec<&crate::state::NodeRecord> = known
        .map(|r| r.nodes.values().collect())
        .unwrap_or_default();
    let last = if step.scope == StepScope::All {
        count
    } else {
        count.min(1)
    };
    let nodes: Vec<Address> = (0..last)
        .map(|i| Address::new(&step.block.kind, &step.block.name, Some(i), "node"))
        .collect();
    let fingerprint = step.fingerprint();
    let forced = rerun_selects(inputs.rerun_steps, &step.block, &step.name);
    let reasons = nodes
        .iter()
        .zip(0..)
        .map(|(node, i): (&Address, usize)| NodeReason {
            node: node.clone(),
            reason: record_reason(
                &step.name,
                step.run,
                &fingerprint,
                records.get(i).map(|r| (&r.steps, 0)),
                forced,
            ),
        })
        .collect();
    PlannedStep {
        block: step.block.clone(),
        name: step.name.clone(),
        kind: step.kind.clone(),
        scope: step.scope,
        run: step.run,
        nodes,
        reasons,
    }
}

/// The reason for step `name` on one node. `vm` is the node's state, or `None` when this plan
/// creates or replaces it (a new disk, so nothing recorded on the old one counts).
fn node_reason(
    name: &str,
    run: RunPolicy,
    fingerprint: &str,
    vm: Option<&ResourceState>,
    forced: bool,
) -> StepReason {
    record_reason(
        name,
        run,
        fingerprint,
        vm.map(|vm| (&vm.steps, vm.boots)),
        forced,
    )
}

/// [`node_reason`] from a node's step records and boots (a VM's, or an AML node's record on its
/// compute); `None` for a new node.
fn record_reason(
    name: &str,
    run: RunPolicy,
    fingerprint: &str,
    records: Option<(
        &std::collections::BTreeMap<String, crate::state::StepRecord>,
        u64,
    )>,
    forced: bool,
) -> StepReason {
    let Some((steps, boots)) = records else {
        return StepReason::NewNode;
    };
    match steps.get(name) {
        None => StepReason::New,
        Some(record) if record.fingerprint != fingerprint => StepReason::Changed,
        Some(record) if run == RunPolicy::PerBoot && record.boot < boots => StepReason::Rebooted,
        Some(_) if run == RunPolicy::Always => StepReason::Always,
        Some(_) if forced => StepReason::Forced,
        Some(_) => StepReason::UpToDate,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::plan::fixtures::{dual, normal, set};
    use crate::plan::{PlanOptions, plan};
    use crate::state::StepRecord;

    fn addr(text: &str) -> Address {
        text.parse().expect("valid address")
    }

    fn step(nodes: &[&str]) -> PlannedStep {
        PlannedStep {
            block: addr("cluster.train"),
            name: "mofed".into(),
            kind: "mofed".into(),
            scope: StepScope::All,
            run: RunPolicy::Once,
            nodes: nodes.iter().map(|n| addr(n)).collect(),
            reasons: Vec::new(),
        }
    }

    fn train(indices: &[u32]) -> Vec<Address> {
        indices
            .iter()
            .map(|i| Address::new("cluster", "train", Some(*i), "vm"))
            .collect()
    }

    fn rerun(entries: &[&str]) -> BTreeSet<String> {
        entries.iter().map(|e| (*e).to_owned()).collect()
    }

    #[test]
    fn node_sets_are_compact_ranges() {
        let block = addr("cluster.train");
        assert_eq!(
            nodes_text(&block, &train(&[0, 1, 2, 3])),
            "cluster.train[0..3] (4 nodes)"
        );
        assert_eq!(nodes_text(&block, &train(&[0])), "cluster.train[0]");
        assert_eq!(
            nodes_text(&block, &train(&[10, 9, 8, 0, 1, 2, 3, 6, 12, 13])),
            "cluster.train[0..3,6,8..10,12,13] (10 nodes)"
        );
        assert_eq!(
            nodes_text(&block, &train(&[0, 2])),
            "cluster.train[0,2] (2 nodes)"
        );
        let sixty_four: Vec<u32> = (0..64).collect();
        assert_eq!(
            nodes_text(&block, &train(&sixty_four)),
            "cluster.train[0..63] (64 nodes)"
        );
        let mut single = step(&["vm.gpu.vm"]);
        single.block = addr("vm.gpu");
        assert_eq!(single.nodes_text(), "vm.gpu");
    }

    fn vm(boots: u64, records: &[(&str, &str, u64)]) -> ResourceState {
        let mut state = crate::state::State::from_applied(&dual(), "sub");
        let mut vm = state
            .resource_mut(&addr("vm.gpu.vm"))
            .expect("the fixture has a VM")
            .clone();
        vm.boots = boots;
        vm.steps = records
            .iter()
            .map(|(name, fingerprint, boot)| {
                (
                    (*name).to_owned(),
                    StepRecord {
                        fingerprint: (*fingerprint).to_owned(),
                        boot: *boot,
                        at: "2026-11-22T05:00:00Z".to_owned(),
                    },
                )
            })
            .collect();
        vm
    }

    #[test]
    fn each_reason_and_its_precedence() {
        use RunPolicy::{Always, Once, PerBoot};
        use StepReason::{Changed, Forced, New, NewNode, Rebooted, UpToDate};
        let ran = vm(1, &[("s", "f1", 1), ("old", "f1", 0)]);
        // A created or replaced VM: new node, whatever else holds (forced included).
        assert_eq!(node_reason("s", Once, "f1", None, true), NewNode);
        assert_eq!(node_reason("missing", Once, "f1", Some(&ran), false), New);
        assert_eq!(node_reason("missing", Once, "f1", Some(&ran), true), New);
        assert_eq!(node_reason("s", Once, "f2", Some(&ran), false), Changed);
        assert_eq!(node_reason("s", Once, "f2", Some(&ran), true), Changed);
        // Rebooted only for per-boot steps recorded at an older boot.
        assert_eq!(
            node_reason("old", PerBoot, "f1", Some(&ran), false),
            Rebooted
        );
        assert_eq!(node_reason("old", Once, "f1", Some(&ran), false), UpToDate);
        assert_eq!(node_reason("s", PerBoot, "f1", Some(&ran), false), UpToDate);
        assert_eq!(
            node_reason("s", Always, "f1", Some(&ran), true),
            StepReason::Always
        );
        assert_eq!(node_reason("s", Once, "f1", Some(&ran), true), Forced);
        assert_eq!(node_reason("s", PerBoot, "f1", Some(&ran), true), Forced);
        assert!(!UpToDate.runs() && Forced.runs());
        assert_eq!(NewNode.to_string(), "new node");
        assert_eq!(UpToDate.to_string(), "up to date");
    }

    #[test]
    fn rerun_entries_name_steps_parts_and_blocks() {
        let train = addr("cluster.train");
        let gpu = addr("vm.gpu");
        let beeond = rerun(&["beeond"]);
        assert!(rerun_selects(&beeond, &train, "beeond"));
        assert!(rerun_selects(&beeond, &train, "beeond.start"));
        assert!(rerun_selects(&beeond, &gpu, "beeond"));
        assert!(!rerun_selects(&beeond, &train, "beeond2"));
        assert!(!rerun_selects(&beeond, &train, "mofed"));
        // A part forces only that part in a run, and its manifest step shows as forced.
        let start = rerun(&["beeond.start"]);
        assert!(rerun_selects(&start, &train, "beeond"));
        assert!(rerun_selects(&start, &train, "beeond.start"));
        assert!(!rerun_selects(&start, &train, "beeond.install"));
        // Qualified by block address or bare block name.
        for entry in ["cluster.train/mofed", "train/mofed"] {
            let qualified = rerun(&[entry]);
            assert!(rerun_selects(&qualified, &train, "mofed"), "{entry}");
            assert!(!rerun_selects(&qualified, &gpu, "mofed"), "{entry}");
        }
        assert!(!rerun_selects(&BTreeSet::new(), &train, "mofed"));
    }

    fn with_rerun(entries: &[&str]) -> PlanOptions {
        PlanOptions {
            rerun_steps: rerun(entries),
            ..normal()
        }
    }

    /// The applied state with `mount` recorded on the VM at boot `boot` and the VM at `boots`.
    fn ran(boot: u64, boots: u64) -> crate::state::State {
        let desired = dual();
        let mut state = crate::state::State::from_applied(&desired, "sub");
        let vm = state
            .resource_mut(&addr("vm.gpu.vm"))
            .expect("the fixture has a VM");
        vm.boots = boots;
        vm.steps.insert(
            "mount".to_owned(),
            StepRecord {
                fingerprint: desired.steps[0].fingerprint(),
                boot,
                at: "2026-11-22T05:00:00Z".to_owned(),
            },
        );
        state
    }

    fn reasons_of(
        desired: &Desired,
        state: &crate::state::State,
        opts: &PlanOptions,
    ) -> Vec<StepReason> {
        let planned = plan(desired, state, opts).expect("plans");
        assert_eq!(planned.steps.len(), 1);
        assert_eq!(planned.steps[0].reasons.len(), planned.steps[0].nodes.len());
        planned.steps[0].reasons.iter().map(|r| r.reason).collect()
    }

    #[test]
    fn the_planner_reads_records_boots_changes_and_reruns() {
        use StepReason::{Changed, Forced, New, NewNode, Rebooted, UpToDate};
        let desired = dual();
        let empty = crate::state::State::new("exp");
        assert_eq!(reasons_of(&desired, &empty, &normal()), [NewNode]);
        let applied = crate::state::State::from_applied(&desired, "sub");
        assert_eq!(reasons_of(&desired, &applied, &normal()), [New]);
        assert_eq!(reasons_of(&desired, &ran(0, 0), &normal()), [UpToDate]);
        // Unparked since the per-boot step ran.
        assert_eq!(reasons_of(&desired, &ran(0, 1), &normal()), [Rebooted]);
        assert_eq!(reasons_of(&desired, &ran(1, 1), &normal()), [UpToDate]);
        assert_eq!(
            reasons_of(&desired, &ran(0, 0), &with_rerun(&["mount"])),
            [Forced]
        );
        let mut changed = dual();
        changed.steps[0]
            .params
            .insert("mount".to_owned(), json!("/mnt/other"));
        assert_eq!(reasons_of(&changed, &ran(0, 0), &normal()), [Changed]);
        // A replaced VM is a new node even though its old disk ran the step.
        let mut replaced = dual();
        set(
            &mut replaced,
            "vm.gpu.vm",
            "size",
            json!("Standard_NC24ads_A100_v4"),
        );
        assert_eq!(reasons_of(&replaced, &ran(0, 0), &normal()), [NewNode]);
        let planned = plan(&desired, &ran(0, 0), &normal()).expect("plans");
        assert!(!planned.has_step_runs() && !planned.has_changes());
        let forced = plan(&desired, &ran(0, 0), &with_rerun(&["mount"])).expect("plans");
        assert!(forced.has_step_runs() && !forced.has_changes());
    }

    #[test]
    fn a_rerun_naming_no_step_is_an_error_with_a_suggestion() {
        let errors = plan(
            &dual(),
            &ran(0, 0),
            &with_rerun(&["mout", "vm.cpu/mount", "zzz"]),
        )
        .expect_err("unknown steps");
        let texts: Vec<(String, Vec<String>)> = errors
            .iter()
            .map(|d| (d.summary.clone(), d.help.clone()))
            .collect();
        assert_eq!(
            texts,
            [
                (
                    "--rerun-step mout names no step of the manifest".to_owned(),
                    vec!["did you mean `mount`?".to_owned()]
                ),
                (
                    "--rerun-step vm.cpu/mount names no step of the manifest".to_owned(),
                    vec!["did you mean `vm.gpu/mount`?".to_owned()]
                ),
                (
                    "--rerun-step zzz names no step of the manifest".to_owned(),
                    vec!["the manifest's steps are: vm.gpu/mount".to_owned()]
                ),
            ]
        );
        // Destroy plans list no steps, so they do not check the names either.
        let destroy = PlanOptions {
            mode: crate::plan::Mode::Destroy { keep_data: false },
            ..with_rerun(&["zzz"])
        };
        assert!(
            plan(&dual(), &ran(0, 0), &destroy)
                .expect("plans")
                .steps
                .is_empty()
        );
    }

    #[test]
    fn nodes_group_by_reason_runs_first() {
        let mut s = step(&[]);
        s.nodes = train(&[0, 1, 2, 3]);
        s.reasons = s
            .nodes
            .iter()
            .zip([
                StepReason::UpToDate,
                StepReason::NewNode,
                StepReason::UpToDate,
                StepReason::NewNode,
            ])
            .map(|(node, reason)| NodeReason {
                node: node.clone(),
                reason,
            })
            .collect();
        assert!(s.runs());
        assert_eq!(
            s.by_reason(),
            [
                (StepReason::NewNode, train(&[1, 3])),
                (StepReason::UpToDate, train(&[0, 2])),
            ]
        );
        // Saved plans from before reasons existed still load.
        let mut value = serde_json::to_value(&s).expect("serialises");
        value.as_object_mut().expect("an object").remove("reasons");
        let old: PlannedStep = serde_json::from_value(value).expect("loads without reasons");
        assert!(old.reasons.is_empty() && !old.runs());
    }
}

#[cfg(test)]
mod aml_tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::model::{Lifecycle, Resource, StepScope};
    use crate::state::StepRecord;

    fn desired(count: u64) -> Desired {
        let mut d = crate::plan::fixtures::dual();
        d.resources.push(Resource {
            address: "aml_cluster.scratch.compute".parse().expect("ok"),
            kind: ResourceKind::MlCompute,
            name: "scratch-1a2b".into(),
            parent: Some("exp-ws".into()),
            resource_group: "rg".into(),
            attrs: crate::model::Attrs::from([("count".to_owned(), json!(count))]),
            depends_on: BTreeSet::new(),
            lifecycle: Lifecycle::default(),
            span: None,
            attr_spans: BTreeMap::new(),
        });
        d
    }

    fn step(scope: StepScope) -> Step {
        Step {
            block: "aml_cluster.scratch".parse().expect("ok"),
            name: "prep".into(),
            kind: "script".into(),
            scope,
            run: RunPolicy::Once,
            params: BTreeMap::new(),
            span: None,
        }
    }

    /// Issue 17: an AML cluster's steps are planned per node `aml_cluster.c[i].node`; node `i`
    /// is the `i`-th node id recorded on the compute, so a second plan after an apply says "up
    /// to date", and nodes without a record (scaled up, or all after a park) are new.
    #[test]
    fn aml_nodes_are_planned_from_the_records_on_the_compute() {
        let desired = desired(3);
        let all = step(StepScope::All);
        let mut state = State::from_applied(&desired, "sub");
        let compute: Address = "aml_cluster.scratch.compute".parse().expect("ok");
        {
            let r = state.resource_mut(&compute).expect("applied");
            for id in ["tvmps_b", "tvmps_a"] {
                r.node_mut(id).steps.insert(
                    "prep".into(),
                    StepRecord {
                        fingerprint: all.fingerprint(),
                        boot: 0,
                        at: "t".into(),
                    },
                );
            }
        }
        let rerun = BTreeSet::new();
        let inputs = StepInputs {
            state: &state,
            changes: &[],
            rerun_steps: &rerun,
        };
        let planned = plan_step(&desired, &inputs, &all);
        let reasons: Vec<(String, StepReason)> = planned
            .reasons
            .iter()
            .map(|r| (r.node.to_string(), r.reason))
            .collect();
        assert_eq!(
            reasons,
            [
                (
                    "aml_cluster.scratch[0].node".to_owned(),
                    StepReason::UpToDate
                ),
                (
                    "aml_cluster.scratch[1].node".to_owned(),
                    StepReason::UpToDate
                ),
                (
                    "aml_cluster.scratch[2].node".to_owned(),
                    StepReason::NewNode
                ),
            ]
        );
        assert_eq!(planned.nodes_text(), "aml_cluster.scratch[0..2] (3 nodes)");
        let head = plan_step(&desired, &inputs, &step(StepScope::Head));
        assert_eq!(head.nodes.len(), 1);
        // Parked: unpark makes new nodes, whatever was recorded for the old ones.
        state.resource_mut(&compute).expect("applied").power_state =
            Some(crate::state::PowerState::Deallocated);
        let inputs = StepInputs {
            state: &state,
            changes: &[],
            rerun_steps: &rerun,
        };
        let parked = plan_step(&desired, &inputs, &all);
        assert!(
            parked
                .reasons
                .iter()
                .all(|r| r.reason == StepReason::NewNode)
        );
    }
}
