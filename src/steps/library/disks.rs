//! Data disks: the step generated for a `disk` block with `mount` (format only if blank, mount
//! by UUID with `nofail`), and the release that runs on the VM a disk is about to leave
//! (unmount, drop its fstab line) before Azure detaches it.
//!
//! Both find the disk by its LUN through Azure's udev links, so neither depends on device names
//! (`/dev/sdc` on one VM may be `/dev/sdd` on the next). [`NodeContext::disk_root`] prefixes the
//! links and the fstab so that tests can stand loop devices in for Azure disks.

use serde_json::{Value, json};

use super::{Builder, LibraryError, NodeContext, Part, StepRequest};
use crate::steps::spec::{RunPolicy, Scope, StepSpec};

/// The file systems a data disk may be formatted with (the manifest checks the same list).
const FILESYSTEMS: [&str; 2] = ["ext4", "xfs"];

/// The template variables every data-disk script needs: the disk, its LUN links and the fstab.
fn disk_vars(ctx: &NodeContext, disk: &str, lun: u64) -> Value {
    let root = ctx.disk_root.as_deref().unwrap_or_default();
    json!({
        "disk": disk,
        "lun": lun,
        "scsi_link": format!("{root}/dev/disk/azure/scsi1/lun{lun}"),
        "nvme_link": format!("{root}/dev/disk/azure/data/by-lun/{lun}"),
        "fstab": format!("{root}/etc/fstab"),
    })
}

/// `data_disk`: format the disk at `lun` if it is blank, mount it at `mount`, keep it in fstab.
pub(super) fn data_disk(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let p = b.params();
    let disk = p.required("disk")?;
    let lun = p.int("lun")?.ok_or_else(|| LibraryError::MissingParam {
        step: b.name().to_owned(),
        param: "lun".to_owned(),
    })?;
    let mount = p.path_or("mount", "/data")?;
    let fs = p.text_or("fs", "ext4")?;
    if !FILESYSTEMS.contains(&fs) {
        return Err(LibraryError::BadParam {
            step: b.name().to_owned(),
            param: "fs".to_owned(),
            why: format!("{fs:?} is not one of {}", FILESYSTEMS.join(", ")),
        });
    }
    let mut vars = disk_vars(b.ctx(), disk, lun);
    if let Value::Object(map) = &mut vars {
        map.insert("mount".to_owned(), json!(mount));
        map.insert("fs".to_owned(), json!(fs));
    }
    let request = b.request();
    b.push(Part::new(
        None,
        "data_disk.sh.j2",
        "format (only if blank) and mount a data disk",
        request.scope,
        request.policy,
        vars,
    ))
}

/// `nvme_temp`: the raw local NVMe disks of a v6 and newer `d` size (one, or a RAID 0 of
/// several) formatted if blank and mounted where `{temp}` resolves (`/mnt`), on every boot:
/// Azure mounts no temp disk on those sizes, and wipes the disks when the VM is deallocated.
pub(super) fn nvme_temp(b: &mut Builder<'_>) -> Result<(), LibraryError> {
    let ctx = b.ctx();
    let root = ctx.disk_root.as_deref().unwrap_or_default();
    let vars = json!({
        "links": format!("{root}/dev/disk/azure/local/by-index"),
        "md": format!("{root}/dev/md/dsinfra-temp"),
        "temp_dir": ctx.temp_dir,
    });
    let request = b.request();
    b.push(Part::new(
        None,
        "nvme_temp.sh.j2",
        "assemble, format (only if blank) and mount the local NVMe disks as the temp disk",
        request.scope,
        request.policy,
        vars,
    ))
}

/// The step that releases `disk` (attached at `lun`) on the VM it is about to leave: unmount
/// it, drop its fstab line and, when given, the `marker` file of the VM's mount step (so that
/// the disk is mounted again if it ever comes back). Runs on every call; its check skips it
/// when nothing is mounted or left behind.
///
/// # Errors
///
/// The step name cannot name a runner step.
pub fn data_disk_release(
    name: &str,
    disk: &str,
    lun: u64,
    marker: Option<&str>,
    ctx: &NodeContext,
) -> Result<StepSpec, LibraryError> {
    let params = std::collections::BTreeMap::new();
    let request = StepRequest {
        name,
        kind: "data_disk",
        scope: Scope::All,
        policy: RunPolicy::Always,
        params: &params,
    };
    let mut b = Builder::new(&request, ctx)?;
    let mut vars = disk_vars(ctx, disk, lun);
    if let Value::Object(map) = &mut vars {
        map.insert("marker".to_owned(), json!(marker.unwrap_or_default()));
    }
    b.push(Part::new(
        Some("release"),
        "data_disk-release.sh.j2",
        "unmount a data disk before Azure detaches it",
        Scope::All,
        RunPolicy::Always,
        vars,
    ))?;
    let mut expansion = b.finish();
    Ok(expansion.steps.remove(0))
}
