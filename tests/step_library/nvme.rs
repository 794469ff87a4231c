//! The generated `nvme_temp` step (issue 29, item 9) run for real on an sshd host: a loop device
//! stands in for a size's local NVMe disk, behind the link azure-vm-utils makes
//! (`/dev/disk/azure/local/by-index/1`, under the test's disk root), and the step formats it
//! only when blank and mounts it where `{temp}` resolves, on every boot.
//!
//! Held: a blank disk is formatted (ext4) and mounted; after a reboot (the disk keeps its data)
//! it is mounted as it is, the file written before still there; after a deallocation (Azure
//! hands the disk back blank) it is formatted again. The several-disk path (RAID 0 with mdadm)
//! is rendered and shellchecked with every script, not run: md devices need a kernel module
//! this machine may not have.

use std::path::Path;
use std::process::Command;

use super::*;
use crate::stand_ins::run_ok;

/// The step rendered for `ctx`.
fn render(ctx: &NodeContext) -> Vec<StepSpec> {
    let params: BTreeMap<String, Value> = BTreeMap::new();
    let request = StepRequest {
        name: "nvme_temp",
        kind: "nvme_temp",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &params,
    };
    library::render(&request, ctx).expect("renders").steps
}

/// Its renders, for the strictness and shellcheck tests: on a real node and with a disk root.
pub fn renders() -> Vec<StepSpec> {
    let nodes = vec![ClusterNode {
        name: "node-0".into(),
        private_ip: "10.0.0.4".into(),
        ssh_port: 22,
    }];
    let plain = NodeContext::new("nvme", "cluster.scratch", nodes.clone());
    let mut seam = NodeContext::new("nvme", "cluster.scratch", nodes);
    seam.disk_root = Some("/tmp/farm/disks".into());
    seam.temp_dir = Some("/tmp/farm/temp".into());
    let mut all = render(&plain);
    all.extend(render(&seam));
    all
}

/// A loop device over a sparse file, detached (and unmounted) when dropped.
struct Loop(String);

impl Loop {
    fn attach(image: &Path) -> Option<Self> {
        let file = std::fs::File::create(image).expect("image file");
        file.set_len(64 << 20).expect("sparse 64 MiB");
        match Command::new("losetup")
            .args(["-f", "--show"])
            .arg(image)
            .output()
        {
            Ok(out) if out.status.success() => {
                Some(Self(String::from_utf8_lossy(&out.stdout).trim().to_owned()))
            }
            other => {
                eprintln!(
                    "skipping: this machine cannot attach a loop device (losetup: {other:?})"
                );
                None
            }
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "findmnt -rno TARGET --source {} | while read -r t; do umount -l \"$t\"; done",
                self.0
            ))
            .status();
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// The device mounted at `target` and its file system type, if any.
fn mounted_at(target: &Path) -> Option<(String, String)> {
    let table = std::fs::read_to_string("/proc/self/mounts").expect("the mount table");
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1).is_some_and(|t| Path::new(t) == target))
        .map(|f| (f[0].to_owned(), f[2].to_owned()))
}

fn umount(target: &Path) {
    let status = Command::new("umount")
        .arg(target)
        .status()
        .expect("umount runs");
    assert!(status.success(), "umount {}", target.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_nvme_disk_is_formatted_once_per_deallocation_and_mounted_every_boot() {
    let Some(hosts) = sshd::start(1) else { return };
    let Some(disk) = Loop::attach(&hosts.dir().join("nvme0.img")) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must be able to attach a loop device"
        );
        return;
    };
    let root = hosts.dir().join("disks");
    let by_index = root.join("dev/disk/azure/local/by-index");
    std::fs::create_dir_all(&by_index).expect("links dir");
    std::os::unix::fs::symlink(&disk.0, by_index.join("1")).expect("the azure-vm-utils link");
    let temp = hosts.dir().join("temp");
    let mut ctx = NodeContext::new(
        "nvme",
        "cluster.scratch",
        vec![ClusterNode {
            name: hosts.hosts[0].name.clone(),
            private_ip: "127.0.0.1".into(),
            ssh_port: hosts.hosts[0].port,
        }],
    );
    ctx.disk_root = Some(root.display().to_string());
    ctx.temp_dir = Some(temp.display().to_string());
    let steps = render(&ctx);

    // First boot: blank, so formatted and mounted.
    let lines = run_ok(&hosts, "nvme-1", &steps).await;
    assert_eq!(
        mounted_at(&temp),
        Some((disk.0.clone(), "ext4".to_owned())),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|(_, _, l)| l.contains("is blank: creating ext4")),
        "{lines:#?}"
    );
    std::fs::write(temp.join("kept"), "scratch").expect("write on the NVMe");

    // A reboot: nothing is mounted at boot, the disk keeps its data.
    umount(&temp);
    hosts.hosts[0].reboot();
    let lines = run_ok(&hosts, "nvme-2", &steps).await;
    assert_eq!(mounted_at(&temp).map(|(d, _)| d), Some(disk.0.clone()));
    assert!(
        lines
            .iter()
            .any(|(_, _, l)| l.contains("already holds ext4: mounting it")),
        "{lines:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(temp.join("kept")).ok().as_deref(),
        Some("scratch")
    );

    // The same boot again: the check sees the mount and runs nothing.
    let lines = run_ok(&hosts, "nvme-3", &steps).await;
    assert!(
        !lines
            .iter()
            .any(|(_, _, l)| l.contains("mounting it") || l.contains("creating")),
        "{lines:#?}"
    );

    // A deallocation: Azure hands the disk back blank; it is formatted again.
    umount(&temp);
    let wiped = Command::new("wipefs")
        .args(["-a", &disk.0])
        .output()
        .expect("wipefs runs");
    assert!(wiped.status.success(), "{wiped:?}");
    hosts.hosts[0].reboot();
    let lines = run_ok(&hosts, "nvme-4", &steps).await;
    assert_eq!(mounted_at(&temp).map(|(d, _)| d), Some(disk.0.clone()));
    assert!(
        lines
            .iter()
            .any(|(_, _, l)| l.contains("is blank: creating ext4")),
        "{lines:#?}"
    );
    assert!(!temp.join("kept").exists());
    umount(&temp);
}
