//! Data disks leaving a VM: before the apply's walk, the VM each disk leaves runs
//! [`data_disk_release`], which unmounts the disk and drops its fstab line, so that Azure never
//! detaches a mounted disk. It is the "step before an ARM change" of a disk move, like stopping
//! BeeOND before `destroy` ([`super::stop`]).
//!
//! A VM that cannot be reached (parked, so nothing is mounted) gets a note and the apply goes
//! on; a disk that is busy, or a release that fails, stops the apply before anything changes.

use crate::engine::reach::{Endpoints, Route, block_nodes};
use crate::model::data_disk_step_name;
use crate::plan::DiskDetach;
use crate::ssh::RecordHostKey;
use crate::steps::library::data_disk_release;
use crate::steps::{self, NodeStatus};

use super::block::PostBoot;
use super::context::{References, base_context};

impl PostBoot<'_> {
    /// Releases every disk of `detaches` on the VM it leaves, in order.
    ///
    /// # Errors
    ///
    /// A release failed on a reachable VM (the disk is busy, say): the message names the disk,
    /// the VM and the script's own explanation. The apply must not go on.
    pub async fn release_disks(
        &self,
        detaches: &[DiskDetach],
        endpoints: &Endpoints,
    ) -> Result<Vec<String>, String> {
        let mut lines = Vec::new();
        for detach in detaches {
            let block = detach.vm.block_address();
            match self.release_one(detach, endpoints).await {
                Ok(Some(why)) => lines.push(format!(
                    "{}: not unmounted on {block} ({why}); continuing: a VM that is not \
                     running has nothing mounted",
                    detach.disk
                )),
                Ok(None) => lines.push(format!(
                    "{}: unmounted on {block}, ready to be detached",
                    detach.disk
                )),
                Err(why) => {
                    return Err(format!(
                        "{} could not be released on {block}, so it was not detached: {why}",
                        detach.disk
                    ));
                }
            }
        }
        Ok(lines)
    }

    /// `Ok(None)` when released, `Ok(Some(why))` when the VM cannot be reached.
    async fn release_one(
        &self,
        detach: &DiskDetach,
        endpoints: &Endpoints,
    ) -> Result<Option<String>, String> {
        let state = self.store.snapshot();
        let block = detach.vm.block_address();
        let nodes = block_nodes(&state, &block, endpoints);
        let Some(node) = nodes.iter().find(|n| n.vm == detach.vm) else {
            return Ok(Some("it is not in the state".to_owned()));
        };
        if let Route::Unreachable { why } = &node.route {
            return Ok(Some(format!("{} {why}", node.node())));
        }
        let ctx = base_context(
            self.azure.desired,
            &block,
            &nodes,
            endpoints,
            &References::default(),
        );
        // A key seen for the first time here is not stored: the next apply pins it.
        let tofu: RecordHostKey = std::sync::Arc::new(|_, _| {});
        let spec = node.node_spec(None, tofu).map_err(|e| e.to_string())?;
        let mount_step = data_disk_step_name(&detach.disk.name);
        let marker = format!("{}/{mount_step}.marker", spec.marker_dir);
        let step = data_disk_release(
            &mount_step,
            &detach.disk.to_string(),
            detach.lun,
            Some(&marker),
            &ctx,
        )
        .map_err(|e| e.to_string())?;
        let auth = self.auth()?;
        let options = self.run_options(auth, std::collections::BTreeSet::new());
        let report = steps::run(&[spec], &[step], &options)
            .await
            .map_err(|e| e.to_string())?;
        match report.nodes.first().map(|n| &n.status) {
            Some(NodeStatus::Done) => Ok(None),
            _ => Err(report.to_string().trim_end().to_owned()),
        }
    }
}
