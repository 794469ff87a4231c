//! Between manifest steps and runner steps: which runner steps a `--rerun-step` name forces,
//! which per-boot steps must run again because dsinfra restarted the VM, and which manifest
//! steps to record as succeeded in the state after a run.
//!
//! A manifest step `blobfuse2` expands into runner steps `blobfuse2.install` and
//! `blobfuse2.mount`; a `script` step is one runner step of its own name. So a manifest step owns
//! the runner steps named `<name>` or `<name>.<part>`. Also where the head's mesh key is kept
//! with the head's records. All pure, unit-tested.

use std::collections::{BTreeMap, BTreeSet};

use crate::addr::Address;
use crate::engine::reach::NodeReach;
use crate::model::Step;
use crate::state::{MeshKey, State, StepRecord};
use crate::steps::{RunPolicy, RunReport, Scope, StepOutcome, StepSpec};

/// The head's mesh key recorded in `state` for the head as it is now, if any: on an AML node's
/// record (a node id is one node's life: a new head, as after unpark, has no record), or on the
/// head VM when it was read at the VM's current boot (a replaced VM is a new record; an unparked
/// one has booted again).
pub fn recorded_mesh_key(state: &State, head: &NodeReach) -> Option<String> {
    if let Some(compute) = head.aml_compute() {
        let node = state.resource(&compute)?.nodes.get(&head.name)?;
        return node.mesh_key.as_ref().map(|k| k.key.clone());
    }
    let vm = state.resource(&head.vm)?;
    vm.mesh_key
        .as_ref()
        .filter(|k| k.boot == vm.boots)
        .map(|k| k.key.clone())
}

/// Records `key`, just read from `head`, where [`recorded_mesh_key`] finds it.
pub fn record_mesh_key(state: &mut State, head: &NodeReach, key: &str) {
    let at = |boot| {
        Some(MeshKey {
            key: key.to_owned(),
            boot,
        })
    };
    match head.aml_compute() {
        Some(compute) => {
            if let Some(r) = state.resource_mut(&compute) {
                r.node_mut(&head.name).mesh_key = at(0);
            }
        }
        None => {
            if let Some(vm) = state.resource_mut(&head.vm) {
                vm.mesh_key = at(vm.boots);
            }
        }
    }
}

/// Whether runner step `runner` belongs to manifest step `manifest`.
pub fn belongs(runner: &str, manifest: &str) -> bool {
    runner == manifest
        || runner
            .strip_prefix(manifest)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// The runner steps of `block` forced by `--rerun-step` entries: `NAME` in every block or
/// `BLOCK/NAME` (`cluster.train/beeond`, `train/beeond`) in one, as the plan reads them
/// ([`crate::plan::rerun_selects`]); a manifest step name forces all its parts, a part name
/// (`beeond.install`) only that part.
pub fn forced_steps(
    entries: &BTreeSet<String>,
    block: &Address,
    runner: &[StepSpec],
) -> BTreeSet<String> {
    let wanted: Vec<&str> = entries
        .iter()
        .filter_map(|entry| match entry.split_once('/') {
            Some((b, name)) if b == block.name || b == block.to_string() => Some(name),
            Some(_) => None,
            None => Some(entry.as_str()),
        })
        .collect();
    runner
        .iter()
        .filter(|s| wanted.iter().any(|n| belongs(&s.name, n)))
        .map(|s| s.name.clone())
        .collect()
}

/// Per node, the per-boot runner steps to run again because dsinfra restarted that node's VM
/// since the step last succeeded there (its record's `boot` is older than the VM's `boots`): a
/// deallocated VM lost its temp disk, so its mounts, caches and scratch are gone even if the
/// node's boot id cannot tell (emulated nodes share one kernel). Only the restarted nodes run
/// them again (`RunOptions::restarted`), as the plan says per node; nodes without any are left
/// out.
pub fn rebooted_steps(
    steps: &[&Step],
    nodes: &[RunNode],
    state: &State,
    runner: &[StepSpec],
) -> BTreeMap<String, BTreeSet<String>> {
    let mut restarted = BTreeMap::new();
    for node in nodes {
        let Some((records, boots)) = node_records(state, node) else {
            continue;
        };
        let outdated: Vec<&str> = steps
            .iter()
            .filter(|step| {
                records
                    .get(&step.name)
                    .is_some_and(|record| record.boot < boots)
            })
            .map(|step| step.name.as_str())
            .collect();
        let parts: BTreeSet<String> = runner
            .iter()
            .filter(|s| {
                s.policy == RunPolicy::PerBoot && outdated.iter().any(|n| belongs(&s.name, n))
            })
            .map(|s| s.name.clone())
            .collect();
        if !parts.is_empty() {
            restarted.insert(node.name.clone(), parts);
        }
    }
    restarted
}

/// One node of a run: its name in the runner's report, its VM and its index (0 = head).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunNode {
    /// The runner's node name.
    pub name: String,
    /// The VM resource (for an AML node, its address `aml_cluster.c[i].node`).
    pub vm: Address,
    /// Its index in the block.
    pub index: usize,
    /// For an AML node: its node id, under which its compute keeps its step records.
    pub node_id: Option<String>,
}

/// A node's step records and how many times dsinfra restarted it: the VM's own, or for an AML
/// node the record on its compute (never restarted: a restarted AML node is a new node id).
fn node_records<'s>(
    state: &'s State,
    node: &RunNode,
) -> Option<(&'s BTreeMap<String, StepRecord>, u64)> {
    match &node.node_id {
        Some(id) => {
            let compute = crate::engine::reach::aml::compute_of(&node.vm.block_address());
            let record = state.resource(&compute)?.nodes.get(id)?;
            Some((&record.steps, 0))
        }
        None => state.resource(&node.vm).map(|vm| (&vm.steps, vm.boots)),
    }
}

/// The records to store after a run: `(vm, manifest step name, record)` for every manifest step
/// whose runner steps for that node all ran or were skipped as done. A step that does not apply
/// to a node (head-only, on another node) is not recorded there.
pub fn succeeded(
    steps: &[&Step],
    runner: &[StepSpec],
    report: &RunReport,
    nodes: &[RunNode],
    state: &State,
    at: &str,
) -> Vec<(Address, String, StepRecord)> {
    let mut out = Vec::new();
    for node in nodes {
        let Some(node_report) = report.node(&node.name) else {
            continue;
        };
        let records = node_records(state, node);
        let boot = records.map_or(0, |(_, boots)| boots);
        for step in steps {
            let mut parts = runner
                .iter()
                .filter(|s| belongs(&s.name, &step.name))
                .filter(|s| s.scope == Scope::All || node.index == 0)
                .peekable();
            if parts.peek().is_none() {
                continue;
            }
            let outcomes: Vec<Option<&StepOutcome>> =
                parts.map(|part| node_report.outcome(&part.name)).collect();
            let all_ok = outcomes
                .iter()
                .all(|o| matches!(o, Some(StepOutcome::Ran { .. } | StepOutcome::Skipped(_))));
            let any_ran = outcomes
                .iter()
                .any(|o| matches!(o, Some(StepOutcome::Ran { .. })));
            let fingerprint = step.fingerprint();
            // A step that only skipped keeps its record (when and in which boot it last ran),
            // so an apply that runs nothing leaves the state as it was.
            let recorded = records
                .and_then(|(steps, _)| steps.get(&step.name))
                .is_some_and(|r| r.fingerprint == fingerprint);
            if all_ok && (any_ran || !recorded) {
                out.push((
                    node.vm.clone(),
                    step.name.clone(),
                    StepRecord {
                        fingerprint,
                        boot,
                        at: at.to_owned(),
                    },
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::model::{ResourceKind, StepScope};
    use crate::state::{ResourceState, ResourceStatus};
    use crate::steps::{NodeReport, NodeStatus, RunReason, SkipReason, StepReport};

    fn runner(name: &str, scope: Scope, policy: RunPolicy) -> StepSpec {
        let mut s = StepSpec::new(name, "true");
        s.scope = scope;
        s.policy = policy;
        s
    }

    fn step(name: &str, run: crate::model::RunPolicy) -> Step {
        Step {
            block: "cluster.train".parse().expect("ok"),
            name: name.into(),
            kind: "script".into(),
            scope: StepScope::All,
            run,
            params: BTreeMap::new(),
            span: None,
        }
    }

    fn vm(address: &str, boots: u64, records: &[(&str, u64)]) -> ResourceState {
        ResourceState {
            address: address.parse().expect("ok"),
            kind: ResourceKind::VirtualMachine,
            name: address.into(),
            parent: None,
            resource_group: "rg".into(),
            id: None,
            attrs: crate::model::Attrs::new(),
            depends_on: BTreeSet::new(),
            status: ResourceStatus::Created,
            power_state: None,
            secrets: BTreeMap::new(),
            host_key: None,
            boots,
            steps: records
                .iter()
                .map(|(n, boot)| {
                    (
                        (*n).to_owned(),
                        StepRecord {
                            fingerprint: "f".into(),
                            boot: *boot,
                            at: "t".into(),
                        },
                    )
                })
                .collect(),
            mesh_key: None,
            nodes: std::collections::BTreeMap::new(),
            drift: None,
        }
    }

    fn ran() -> StepOutcome {
        StepOutcome::Ran {
            reason: RunReason::New,
            duration: Duration::from_secs(1),
            rebooted: false,
        }
    }

    #[test]
    fn a_manifest_name_forces_all_its_parts_and_a_part_name_only_itself() {
        let runner = [
            runner("beeond.install", Scope::All, RunPolicy::Once),
            runner("beeond.start", Scope::Head, RunPolicy::PerBoot),
            runner("beeondx", Scope::All, RunPolicy::Once),
            runner("prep", Scope::All, RunPolicy::Once),
        ];
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        let block: Address = "cluster.train".parse().expect("ok");
        assert_eq!(
            forced_steps(&names(&["beeond"]), &block, &runner),
            names(&["beeond.install", "beeond.start"])
        );
        assert_eq!(
            forced_steps(&names(&["beeond.start", "train/prep"]), &block, &runner),
            names(&["beeond.start", "prep"])
        );
        assert_eq!(
            forced_steps(
                &names(&["vm.gpu/prep", "cluster.train/beeondx"]),
                &block,
                &runner
            ),
            names(&["beeondx"])
        );
    }

    #[test]
    fn per_boot_parts_rerun_when_a_vm_was_restarted_after_they_last_succeeded() {
        let mut state = State::new("exp");
        state.upsert(vm("cluster.train[0].vm", 2, &[("mount", 1), ("data", 2)]));
        state.upsert(vm("cluster.train[1].vm", 2, &[("mount", 2), ("data", 2)]));
        let mount = step("mount", crate::model::RunPolicy::PerBoot);
        let data = step("data", crate::model::RunPolicy::PerBoot);
        let runner = [
            runner("mount.install", Scope::All, RunPolicy::Once),
            runner("mount", Scope::All, RunPolicy::PerBoot),
            runner("data", Scope::All, RunPolicy::PerBoot),
        ];
        let nodes: Vec<RunNode> = ["cluster.train[0].vm", "cluster.train[1].vm"]
            .iter()
            .enumerate()
            .map(|(index, a)| RunNode {
                name: format!("train-{index}"),
                vm: a.parse().expect("ok"),
                index,
                node_id: None,
            })
            .collect();
        // Only node 0 was restarted since its mount ran; node 1 ran everything at boot 2.
        let restarted = rebooted_steps(&[&mount, &data], &nodes, &state, &runner);
        assert_eq!(
            restarted,
            BTreeMap::from([("train-0".to_owned(), BTreeSet::from(["mount".to_owned()]))])
        );
    }

    /// Issue 17: an AML node's records are on its compute under its node id; a step it only
    /// skipped keeps its record, a node seen for the first time gets one.
    #[test]
    fn the_heads_mesh_key_is_read_again_only_for_a_new_head() {
        use crate::engine::reach::Route;
        let head = |vm: &str, block: &str, name: &str| NodeReach {
            vm: vm.parse().expect("ok"),
            block: block.parse().expect("ok"),
            index: 0,
            name: name.into(),
            user: "azureuser".into(),
            public_ip: None,
            private_ip: Some("10.0.0.4".into()),
            host_key: None,
            route: Route::Direct {
                host: "10.0.0.4".into(),
                port: 22,
            },
        };
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx3 dsinfra-exp-head";
        let mut state = State::new("exp");
        state.upsert(vm("cluster.c[0].vm", 0, &[]));
        let mut compute = vm("aml_cluster.s.compute", 0, &[]);
        compute.kind = crate::engine::kinds::ml_compute::KIND;
        state.upsert(compute);

        // A VM head: kept for the boot it was read at; an unpark (a new boot) reads it again.
        let vm_head = head("cluster.c[0].vm", "cluster.c", "exp-c-0");
        assert_eq!(recorded_mesh_key(&state, &vm_head), None);
        record_mesh_key(&mut state, &vm_head, key);
        assert_eq!(recorded_mesh_key(&state, &vm_head).as_deref(), Some(key));
        let boots = &mut state.resource_mut(&vm_head.vm).expect("vm").boots;
        *boots += 1;
        assert_eq!(recorded_mesh_key(&state, &vm_head), None, "unparked");
        // A replaced VM is a new record, without the key.
        state.upsert(vm("cluster.c[0].vm", 0, &[]));
        assert_eq!(recorded_mesh_key(&state, &vm_head), None, "replaced");

        // An AML head: kept on its node id's record; another node id as head reads it again.
        let aml_head = head("aml_cluster.s[0].node", "aml_cluster.s", "tvmps_a");
        record_mesh_key(&mut state, &aml_head, key);
        assert_eq!(recorded_mesh_key(&state, &aml_head).as_deref(), Some(key));
        let compute = state
            .resource(&"aml_cluster.s.compute".parse().expect("ok"))
            .expect("compute");
        assert_eq!(
            compute.nodes["tvmps_a"].mesh_key.as_ref().map(|k| k.boot),
            Some(0)
        );
        let new_head = head("aml_cluster.s[0].node", "aml_cluster.s", "tvmps_z");
        assert_eq!(recorded_mesh_key(&state, &new_head), None, "new node id");
    }

    #[test]
    fn aml_node_records_are_read_from_the_compute_by_node_id() {
        let mut state = State::new("exp");
        let mut compute = vm("aml_cluster.s.compute", 0, &[]);
        compute.kind = crate::engine::kinds::ml_compute::KIND;
        let prep = step("prep", crate::model::RunPolicy::Once);
        compute.node_mut("tvmps_a").steps.insert(
            "prep".into(),
            StepRecord {
                fingerprint: prep.fingerprint(),
                boot: 0,
                at: "then".into(),
            },
        );
        state.upsert(compute);
        let runner = [runner("prep", Scope::All, RunPolicy::Once)];
        let node_report = |node: &str, outcome: StepOutcome| NodeReport {
            node: node.into(),
            steps: vec![StepReport {
                step: "prep".into(),
                outcome,
            }],
            status: NodeStatus::Done,
        };
        let report = RunReport {
            nodes: vec![
                node_report(
                    "aml_cluster.s[0]",
                    StepOutcome::Skipped(SkipReason::UpToDate),
                ),
                node_report(
                    "aml_cluster.s[1]",
                    StepOutcome::Skipped(SkipReason::UpToDate),
                ),
            ],
        };
        let nodes: Vec<RunNode> = ["tvmps_a", "tvmps_b"]
            .iter()
            .enumerate()
            .map(|(index, id)| RunNode {
                name: format!("aml_cluster.s[{index}]"),
                vm: format!("aml_cluster.s[{index}].node").parse().expect("ok"),
                index,
                node_id: Some((*id).to_owned()),
            })
            .collect();
        let records = succeeded(&[&prep], &runner, &report, &nodes, &state, "now");
        let got: Vec<String> = records.iter().map(|(a, n, _)| format!("{a} {n}")).collect();
        assert_eq!(got, ["aml_cluster.s[1].node prep"]);
    }

    #[test]
    fn records_need_every_part_that_applies_to_the_node() {
        let mut state = State::new("exp");
        state.upsert(vm("cluster.train[0].vm", 3, &[]));
        state.upsert(vm("cluster.train[1].vm", 3, &[]));
        let mesh = step("mesh", crate::model::RunPolicy::Once);
        let prep = step("prep", crate::model::RunPolicy::Once);
        let runner = [
            runner("mesh.keys", Scope::All, RunPolicy::Once),
            runner("mesh.nodefile", Scope::Head, RunPolicy::Once),
            runner("prep", Scope::All, RunPolicy::Once),
        ];
        let report = RunReport {
            nodes: vec![
                NodeReport {
                    node: "head".into(),
                    steps: vec![
                        StepReport {
                            step: "mesh.keys".into(),
                            outcome: ran(),
                        },
                        StepReport {
                            step: "mesh.nodefile".into(),
                            outcome: StepOutcome::Failed {
                                reason: RunReason::New,
                                message: "exit status 1".into(),
                            },
                        },
                    ],
                    status: NodeStatus::Failed {
                        step: Some("mesh.nodefile".into()),
                        message: "exit status 1".into(),
                    },
                },
                NodeReport {
                    node: "node1".into(),
                    steps: vec![
                        StepReport {
                            step: "mesh.keys".into(),
                            outcome: StepOutcome::Skipped(SkipReason::UpToDate),
                        },
                        StepReport {
                            step: "prep".into(),
                            outcome: ran(),
                        },
                    ],
                    status: NodeStatus::Done,
                },
            ],
        };
        let nodes = [
            RunNode {
                name: "head".into(),
                vm: "cluster.train[0].vm".parse().expect("ok"),
                index: 0,
                node_id: None,
            },
            RunNode {
                name: "node1".into(),
                vm: "cluster.train[1].vm".parse().expect("ok"),
                index: 1,
                node_id: None,
            },
        ];
        let records = succeeded(&[&mesh, &prep], &runner, &report, &nodes, &state, "now");
        let got: Vec<(String, String, u64)> = records
            .iter()
            .map(|(vm, name, r)| (vm.to_string(), name.clone(), r.boot))
            .collect();
        assert_eq!(
            got,
            [
                ("cluster.train[1].vm".to_owned(), "mesh".to_owned(), 3),
                ("cluster.train[1].vm".to_owned(), "prep".to_owned(), 3),
            ]
        );
        assert_eq!(records[0].2.fingerprint, mesh.fingerprint());
        // Recorded with this fingerprint already and only skipped: the record stays as it is.
        let mut recorded = vm("cluster.train[1].vm", 3, &[]);
        recorded.steps.insert(
            "mesh".into(),
            StepRecord {
                fingerprint: mesh.fingerprint(),
                boot: 1,
                at: "then".into(),
            },
        );
        state.upsert(recorded);
        let again = succeeded(&[&mesh, &prep], &runner, &report, &nodes, &state, "now");
        let names: Vec<&str> = again.iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(names, ["prep"]);
    }
}
