//! Data disks with `mount`, on real block devices: loop devices stand in for the Azure disks,
//! behind the LUN links Azure's udev rules make (under `DSINFRA_DISK_ROOT`, with its own
//! fstab), and the generated step formats, mounts and unmounts them for real on the sshd hosts.
//!
//! Held: a disk with a file system is mounted as it is (same UUID, its files intact), a blank
//! one is formatted; moving a disk (`attach_to` edited) unmounts it on the old VM before the
//! emulator receives that VM's update, then mounts it on the new VM; a busy disk stops the move
//! before any change; moving it back mounts it again on the first VM.

use super::*;

/// Two loop devices, and everything mounted from them, released when dropped.
struct LoopDisks {
    devices: Vec<String>,
}

impl LoopDisks {
    /// `count` loop devices over sparse files in `dir`; `None` (said why) when this machine
    /// cannot make them (no loop driver, or not root).
    fn attach(dir: &Path, count: usize) -> Option<Self> {
        let mut disks = Self {
            devices: Vec::new(),
        };
        for i in 0..count {
            let image = dir.join(format!("disk{i}.img"));
            let file = std::fs::File::create(&image).expect("image file");
            file.set_len(64 << 20).expect("sparse 64 MiB");
            let out = Command::new("losetup")
                .args(["-f", "--show"])
                .arg(&image)
                .output();
            match out {
                Ok(out) if out.status.success() => disks
                    .devices
                    .push(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
                other => {
                    eprintln!(
                        "skipping: this machine cannot attach a loop device (losetup: {other:?})"
                    );
                    return None;
                }
            }
        }
        Some(disks)
    }
}

impl Drop for LoopDisks {
    fn drop(&mut self) {
        for device in &self.devices {
            let _ = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "findmnt -rno TARGET --source {device} | while read -r t; do umount -l \"$t\"; done"
                ))
                .status();
            let _ = Command::new("losetup").args(["-d", device]).status();
        }
    }
}

/// What `blkid -p` says about `device` (`UUID`, `TYPE`), empty when nothing.
fn probe(device: &str, tag: &str) -> String {
    let out = Command::new("blkid")
        .args(["-p", "-s", tag, "-o", "value", device])
        .output()
        .expect("blkid runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The device mounted at `target`, if any (from this process's mount table, which the sshd
/// hosts share).
fn mounted_at(target: &Path) -> Option<String> {
    let table = std::fs::read_to_string("/proc/self/mounts").expect("the mount table");
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1).is_some_and(|t| Path::new(t) == target))
        .and_then(|f| f.first().map(|s| (*s).to_owned()))
}

fn manifest(w: &World, data_on: &str) -> String {
    let farm = w.farm.as_ref().expect("a farm");
    let (user, key) = (farm.user().to_owned(), farm.client_public_key());
    let mnt = w.path("mnt").display().to_string();
    let vm = |name: &str| {
        format!(
            r#"vm "{name}" {{
  size           = "Standard_D2s_v3"
  image          = "ubuntu-22.04"
  admin_username = "{user}"
  ssh_key        = "{key}"
}}
"#
        )
    };
    format!(
        r#"disk "data" {{
  size_gb   = 4
  attach_to = vm.{data_on}
  lun       = 0
  mount     = "{mnt}/data"
}}
disk "blank" {{
  size_gb   = 4
  attach_to = vm.prep
  lun       = 1
  mount     = "{mnt}/blank"
}}
{}{}"#,
        vm("prep"),
        vm("train")
    )
}

/// The updates of a VM as they reached the emulator: the method, and the device mounted at the
/// watched target at that moment.
type Updates = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// Each update of VM `vm` the emulator receives (a PUT or a PATCH): its method, and what is
/// mounted at `target` as the request arrives.
fn watch_updates(w: &World, vm: &str, target: &Path) -> Updates {
    let seen: Updates = Arc::default();
    let record = Arc::clone(&seen);
    let (suffix, target) = (format!("/virtualMachines/{vm}"), target.to_owned());
    *w.on_request.lock().expect("not poisoned") = Some(Arc::new(move |request: &RequestInfo| {
        if matches!(request.method.as_str(), "PUT" | "PATCH") && request.path.ends_with(&suffix) {
            record
                .lock()
                .expect("not poisoned")
                .push((request.method.clone(), mounted_at(&target)));
        }
    }));
    seen
}

/// The method and path of every VM write (PUT or PATCH) the emulator received from the
/// `from`th request on.
fn vm_writes(w: &World, from: usize) -> Vec<(String, String)> {
    w.requests.lock().expect("not poisoned")[from..]
        .iter()
        .filter(|(_, method, path)| {
            matches!(method.as_str(), "PUT" | "PATCH") && path.contains("/virtualMachines/")
        })
        .map(|(_, method, path)| (method.clone(), path.clone()))
        .collect()
}

/// Puts a file system with a file on `data` (returning its UUID) and leaves `blank` blank, then
/// makes Azure's LUN links to both and an fstab of their own under the disk root (returned).
fn prepare(w: &World, data: &str, blank: &str) -> (String, PathBuf) {
    let contents = w.path("seed");
    std::fs::create_dir_all(&contents).expect("seed dir");
    std::fs::write(contents.join("keep.txt"), "results of week 1\n").expect("seed file");
    let made = Command::new("mkfs.ext4")
        .args(["-q", "-d"])
        .arg(&contents)
        .arg(data)
        .status()
        .expect("mkfs.ext4 runs");
    assert!(made.success());
    let uuid = probe(data, "UUID");
    assert!(!uuid.is_empty() && probe(blank, "TYPE").is_empty());
    let root = w.path("diskroot");
    let links = root.join("dev/disk/azure/scsi1");
    std::fs::create_dir_all(&links).expect("link dir");
    std::os::unix::fs::symlink(data, links.join("lun0")).expect("lun0");
    std::os::unix::fs::symlink(blank, links.join("lun1")).expect("lun1");
    std::fs::create_dir_all(root.join("etc")).expect("etc");
    std::fs::write(root.join("etc/fstab"), "# test fstab\n").expect("fstab");
    (uuid, root)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_disks_are_formatted_only_when_blank_and_unmounted_before_they_move() {
    let Some((_farm, w)) = World::with_farm().await else {
        return;
    };
    let Some(disks) = LoopDisks::attach(w.dir.path(), 2) else {
        return;
    };
    let (data, blank) = (disks.devices[0].clone(), disks.devices[1].clone());
    let (uuid, root) = prepare(&w, &data, &blank);
    let env = [("DSINFRA_DISK_ROOT", root.as_path())];
    let fstab = || std::fs::read_to_string(root.join("etc/fstab")).expect("fstab");
    let (data_mnt, blank_mnt) = (w.path("mnt/data"), w.path("mnt/blank"));

    // First apply: the disk with data is mounted as it is, the blank one is formatted.
    w.write_hcl("stepsdemo", &manifest(&w, "prep"));
    let first = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert!(
        first.contains("[vm.prep] [disk-data] started (new)"),
        "{first}"
    );
    assert_eq!(
        mounted_at(&data_mnt).as_deref(),
        Some(data.as_str()),
        "{first}"
    );
    assert_eq!(mounted_at(&blank_mnt).as_deref(), Some(blank.as_str()));
    assert_eq!(
        probe(&data, "UUID"),
        uuid,
        "the disk with data was not formatted"
    );
    assert_eq!(
        std::fs::read_to_string(data_mnt.join("keep.txt")).expect("the file is still there"),
        "results of week 1\n"
    );
    assert_eq!(probe(&blank, "TYPE"), "ext4");
    let table = fstab();
    let line = format!(
        "UUID={uuid} {} ext4 defaults,nofail,x-systemd.device-timeout=10s 0 2",
        data_mnt.display()
    );
    assert!(table.lines().any(|l| l == line), "{table}");
    assert_eq!(table.matches("nofail").count(), 2, "{table}");

    // A second apply changes nothing and formats nothing.
    let again = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert!(!again.contains("] started ("), "{again}");
    assert_eq!(probe(&data, "UUID"), uuid);

    // Move the data disk to vm.train: at the moment prep's update (the detach) reaches the
    // emulator, nothing is mounted from the disk any more.
    // Both VM updates are PATCHes of their data disks only (decision 28): a detach from prep,
    // then an attach to train, never a PUT re-sending either VM's whole model.
    let at_detach = watch_updates(&w, "stepsdemo-prep", &data_mnt);
    let requests_before = w.requests.lock().expect("not poisoned").len();
    w.write_hcl("stepsdemo", &manifest(&w, "train"));
    let moved = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert_eq!(
        *at_detach.lock().expect("not poisoned"),
        [("PATCH".to_owned(), None)],
        "prep's update reached Azure once, as a PATCH, with the disk unmounted:\n{moved}"
    );
    assert_moved_by_patches(&w, requests_before);
    assert!(
        moved.contains("disk.data is unmounted on vm.prep (lun 0) before Azure detaches it"),
        "the plan names the unmount:\n{moved}"
    );
    assert!(
        moved.contains("disk.data: unmounted on vm.prep, ready to be detached"),
        "{moved}"
    );
    assert!(
        moved.contains("[vm.train] [disk-data] started (new)"),
        "{moved}"
    );
    assert_eq!(
        mounted_at(&data_mnt).as_deref(),
        Some(data.as_str()),
        "{moved}"
    );
    assert_eq!(probe(&data, "UUID"), uuid, "moving formats nothing");
    assert!(data_mnt.join("keep.txt").exists());
    assert_eq!(
        fstab().matches(&format!("UUID={uuid} ")).count(),
        1,
        "{}",
        fstab()
    );

    busy_disk_stops_the_move(&w, &env, &data_mnt, &data).await;

    // Once nothing holds it, the move back goes through, and prep mounts it again (its marker
    // from the first apply went with the release, or the step would be skipped as done).
    let back = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert!(back.contains("[vm.prep] [disk-data] started"), "{back}");
    assert_eq!(
        mounted_at(&data_mnt).as_deref(),
        Some(data.as_str()),
        "{back}"
    );
    assert_eq!(probe(&data, "UUID"), uuid);
    drop(disks);
}

/// The VM writes since the `from`th request are two PATCHes: prep's detach, then train's attach.
fn assert_moved_by_patches(w: &World, from: usize) {
    let writes = vm_writes(w, from);
    assert_eq!(
        writes.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        ["PATCH", "PATCH"],
        "{writes:?}"
    );
    assert!(
        writes[0].1.ends_with("/stepsdemo-prep") && writes[1].1.ends_with("/stepsdemo-train"),
        "the detach comes first: {writes:?}"
    );
}

/// Moving the disk back while a process works in it: the release fails, and the apply stops
/// before any VM is changed; the disk stays mounted where it was.
async fn busy_disk_stops_the_move(w: &World, env: &[(&str, &Path)], data_mnt: &Path, data: &str) {
    let busy = Command::new("sleep")
        .arg("60")
        .current_dir(data_mnt)
        .spawn()
        .expect("a process in the mount");
    let puts_before = w.requests.lock().expect("not poisoned").len();
    w.write_hcl("stepsdemo", &manifest(w, "prep"));
    let (out, refused) = w
        .run_env(&["apply", "stepsdemo.hcl", "--auto-approve"], env)
        .await;
    let mut busy = busy;
    let _ = busy.kill();
    let _ = busy.wait();
    assert!(!out.status.success(), "{refused}");
    assert!(
        refused.contains("disk.data could not be released on vm.train, so it was not detached")
            && refused.contains("is busy at")
            && refused.contains("nothing was changed in Azure"),
        "{refused}"
    );
    let vm_writes = vm_writes(w, puts_before);
    assert!(vm_writes.is_empty(), "{vm_writes:?}\n{refused}");
    assert_eq!(mounted_at(data_mnt).as_deref(), Some(data));
}
