//! When a block's steps may start during an apply: as soon as the changes to everything the
//! block needs are done (its VMs, NICs and public IPs, the storage and SAS its steps name, and
//! what those depend on), while the rest of the walk goes on. The dual DSVM's CPU VM is
//! configured while the GPU VM is still being created.
//!
//! [`Readiness`] watches the engine's events (pure; unit-tested): a `Done` ticks a change off,
//! a `Failed` or `Skipped` change the block needs means its steps do not run, with the reason.

use std::collections::{BTreeMap, BTreeSet};

use super::context::needed_resources;
use crate::addr::Address;
use crate::engine::events::{Event, Operation};
use crate::model::Desired;
use crate::plan::{Action, Plan};

/// What happened to a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// Everything it needs is done: its steps may start.
    Ready(Address),
    /// Something it needs failed or was skipped: its steps do not run.
    Blocked {
        /// The block.
        block: Address,
        /// Why, e.g. `cluster.train[1].vm failed`.
        why: String,
    },
}

/// The changes each block with steps still waits for.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    pending: BTreeMap<Address, BTreeSet<(Address, Operation)>>,
    settled: BTreeSet<Address>,
}

impl Readiness {
    /// Tracks the blocks `plan` runs post-boot work on ([`Plan::post_boot_blocks`]: steps, or the
    /// idle watcher), against `plan`'s changes.
    pub fn new(plan: &Plan, desired: &Desired) -> Self {
        let blocks: BTreeSet<Address> = plan.post_boot_blocks(desired).into_iter().collect();
        let mut pending = BTreeMap::new();
        for block in blocks {
            let needed = needed_resources(desired, &block);
            let mut waits = BTreeSet::new();
            for change in &plan.changes {
                let address = &change.address;
                // A block also waits for its own nodes to go (a cluster shrinking), so the
                // nodes its steps see are the nodes that remain.
                let relevant = needed.contains(address) || address.block_address() == block;
                if !relevant {
                    continue;
                }
                match change.action {
                    Action::NoOp => {}
                    Action::Create => {
                        waits.insert((address.clone(), Operation::Create));
                    }
                    Action::Update => {
                        waits.insert((address.clone(), Operation::Update));
                    }
                    Action::Delete => {
                        waits.insert((address.clone(), Operation::Delete));
                    }
                    Action::Replace { .. } => {
                        waits.insert((address.clone(), Operation::Delete));
                        waits.insert((address.clone(), Operation::Create));
                    }
                }
            }
            pending.insert(block, waits);
        }
        Self {
            pending,
            settled: BTreeSet::new(),
        }
    }

    /// Blocks that need nothing more and were not reported yet (at the start: blocks with no
    /// changes at all).
    pub fn ready(&mut self) -> Vec<Signal> {
        let ready: Vec<Address> = self
            .pending
            .iter()
            .filter(|(block, waits)| waits.is_empty() && !self.settled.contains(*block))
            .map(|(block, _)| block.clone())
            .collect();
        self.settled.extend(ready.iter().cloned());
        ready.into_iter().map(Signal::Ready).collect()
    }

    /// Takes one engine event into account; returns the blocks it made ready or blocked.
    pub fn observe(&mut self, event: &Event) -> Vec<Signal> {
        let mut signals = Vec::new();
        match event {
            Event::Done {
                address, operation, ..
            } => {
                for waits in self.pending.values_mut() {
                    waits.remove(&(address.clone(), *operation));
                }
                signals = self.ready();
            }
            Event::Failed {
                address, operation, ..
            } => {
                signals = self.block_on(address, *operation, &format!("{address} failed"));
            }
            Event::Skipped {
                address,
                operation,
                because,
            } => {
                signals = self.block_on(
                    address,
                    *operation,
                    &format!(
                        "{address} was not {} because {because} failed",
                        operation.past()
                    ),
                );
            }
            _ => {}
        }
        signals
    }

    fn block_on(&mut self, address: &Address, operation: Operation, why: &str) -> Vec<Signal> {
        let key = (address.clone(), operation);
        let blocked: Vec<Address> = self
            .pending
            .iter()
            .filter(|(block, waits)| waits.contains(&key) && !self.settled.contains(*block))
            .map(|(block, _)| block.clone())
            .collect();
        self.settled.extend(blocked.iter().cloned());
        blocked
            .into_iter()
            .map(|block| Signal::Blocked {
                block,
                why: why.to_owned(),
            })
            .collect()
    }

    /// After the walk: blocks still waiting (the run was interrupted before their resources
    /// were done), each reported once.
    pub fn unfinished(&mut self) -> Vec<Signal> {
        let left: Vec<Address> = self
            .pending
            .keys()
            .filter(|b| !self.settled.contains(*b))
            .cloned()
            .collect();
        self.settled.extend(left.iter().cloned());
        left.into_iter()
            .map(|block| Signal::Blocked {
                block,
                why: "the apply stopped before its resources were done".to_owned(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::plan::{PlanOptions, plan};
    use crate::state::State;

    fn desired() -> Desired {
        let text = r#"
experiment = "t"
azure { location = "eastus" }
network "main" {}
storage_account "data" {
  container "raw" {}
}
vm "prep" {
  size = "Standard_D2s_v3"
  image = "ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBm0QmKkWB0DMyVv0GGEBkOwgkEHVGbz7fHhJ5yDmHPe t"
  step "script" {
    script = "true"
  }
}
vm "gpu" {
  size = "Standard_D2s_v3"
  image = "ubuntu-22.04"
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBm0QmKkWB0DMyVv0GGEBkOwgkEHVGbz7fHhJ5yDmHPe t"
  step "blobfuse2" { container = storage_account.data.container.raw }
}
"#;
        crate::manifest::load_str(
            std::path::Path::new("t.hcl"),
            text,
            &crate::manifest::LoadOptions::default(),
        )
        .expect("the test manifest loads")
        .desired
    }

    fn done(address: &str) -> Event {
        Event::Done {
            address: address.parse().expect("ok"),
            operation: Operation::Create,
            elapsed: Duration::ZERO,
        }
    }

    /// Issue 17: an `aml_cluster`'s steps start once its compute is done (which needs the
    /// workspace and everything the workspace needs), not before.
    #[test]
    fn an_aml_cluster_is_ready_once_its_compute_is_done() {
        let text = r#"
experiment = "t"
azure { location = "eastus" }
aml_workspace "ws" {}
aml_cluster "scratch" {
  workspace = aml_workspace.ws
  size      = "Standard_D2s_v3"
  count     = 2
  ssh_key   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBm0QmKkWB0DMyVv0GGEBkOwgkEHVGbz7fHhJ5yDmHPe t"
  step "script" {
    script = "true"
  }
}
"#;
        let d = crate::manifest::load_str(
            std::path::Path::new("t.hcl"),
            text,
            &crate::manifest::LoadOptions::default(),
        )
        .expect("the test manifest loads")
        .desired;
        let planned = plan(
            &d,
            &State::new("t"),
            &PlanOptions {
                mode: crate::plan::Mode::Normal,
                targets: Vec::new(),
                now: chrono::Utc::now(),
                rerun_steps: BTreeSet::new(),
            },
        )
        .expect("plans");
        let mut r = Readiness::new(&planned, &d);
        assert_eq!(r.ready(), []);
        let compute = "aml_cluster.scratch.compute";
        let mut signals = Vec::new();
        for change in planned
            .changes
            .iter()
            .filter(|c| c.address.to_string() != compute)
        {
            signals.extend(r.observe(&done(&change.address.to_string())));
        }
        assert_eq!(
            signals,
            [],
            "the workspace's parts alone do not start the steps"
        );
        assert_eq!(
            r.observe(&done(compute)),
            [Signal::Ready("aml_cluster.scratch".parse().expect("ok"))]
        );
    }

    #[test]
    fn a_block_is_ready_once_its_own_resources_and_its_storage_are_done() {
        let d = desired();
        let planned = plan(
            &d,
            &State::new("t"),
            &PlanOptions {
                mode: crate::plan::Mode::Normal,
                targets: Vec::new(),
                now: chrono::Utc::now(),
                rerun_steps: BTreeSet::new(),
            },
        )
        .expect("plans");
        let mut r = Readiness::new(&planned, &d);
        assert_eq!(r.ready(), []);
        let mut signals = Vec::new();
        for change in &planned.changes {
            let a = change.address.to_string();
            if a.starts_with("vm.gpu") || a.starts_with("storage_account") {
                continue;
            }
            signals.extend(r.observe(&done(&a)));
        }
        assert_eq!(signals, [Signal::Ready("vm.prep".parse().expect("ok"))]);
        let signals = r.observe(&Event::Failed {
            address: "storage_account.data.account".parse().expect("ok"),
            operation: Operation::Create,
            elapsed: Duration::ZERO,
            message: "boom".into(),
        });
        assert_eq!(
            signals,
            [Signal::Blocked {
                block: "vm.gpu".parse().expect("ok"),
                why: "storage_account.data.account failed".into()
            }]
        );
        assert_eq!(r.unfinished(), []);
    }
}
