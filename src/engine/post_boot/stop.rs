//! Stopping BeeOND before `park` and `destroy`: the head runs
//! [`beeond_stop`](crate::steps::library::beeond_stop), which unmounts the scratch and stops
//! the BeeGFS services on every node, so no node is deallocated with a half-written file system
//! still mounted. Best effort: a head that cannot be reached gets a warning and the command
//! goes on (a deallocated temp disk loses the scratch anyway).

use crate::addr::Address;
use crate::engine::reach::{Endpoints, Route, block_nodes};
use crate::ssh::RecordHostKey;
use crate::steps::library::beeond_stop;
use crate::steps::{self, NodeStatus};

use super::block::PostBoot;
use super::context::{base_context, references};

impl PostBoot<'_> {
    /// Stops BeeOND on every block of `only` (all blocks when empty) that has a `beeond` step.
    /// Returns one line per block: what was done, or why not.
    pub async fn stop_beeond(&self, only: &[Address], endpoints: &Endpoints) -> Vec<String> {
        let desired = self.azure.desired;
        let mut lines = Vec::new();
        for step in desired.steps.iter().filter(|s| s.kind == "beeond") {
            let block = &step.block;
            if !only.is_empty() && !only.iter().any(|a| a.block_address() == *block) {
                continue;
            }
            lines.push(match self.stop_one(step, endpoints).await {
                Ok(()) => format!("{block}: BeeOND stopped (step `{}`)", step.name),
                Err(why) => format!(
                    "{block}: BeeOND was not stopped ({why}); continuing: the scratch on the \
                     temp disks is lost anyway"
                ),
            });
        }
        lines
    }

    async fn stop_one(
        &self,
        step: &crate::model::Step,
        endpoints: &Endpoints,
    ) -> Result<(), String> {
        let state = self.store.snapshot();
        let nodes = block_nodes(&state, &step.block, endpoints);
        let head = nodes.first().ok_or("no VMs in the state")?;
        if let Route::Unreachable { why } = &head.route {
            return Err(format!("the head {} {why}", head.node()));
        }
        let refs = references(self.azure.desired, &[step]);
        let ctx = base_context(self.azure.desired, &step.block, &nodes, endpoints, &refs);
        let stop_step = beeond_stop(&step.name, &step.params, &ctx).map_err(|e| e.to_string())?;
        // A key seen for the first time here is not stored: stopping is best effort and the
        // next apply pins it.
        let tofu: RecordHostKey = std::sync::Arc::new(|_, _| {});
        let spec = head.node_spec(None, tofu).map_err(|e| e.to_string())?;
        let auth = self.auth()?;
        let options = self.run_options(auth, std::collections::BTreeSet::new());
        let report = steps::run(&[spec], &[stop_step], &options)
            .await
            .map_err(|e| e.to_string())?;
        match report.nodes.first().map(|n| &n.status) {
            Some(NodeStatus::Done) => Ok(()),
            _ => Err(report.to_string().trim_end().to_owned()),
        }
    }
}
