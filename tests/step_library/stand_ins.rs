//! `mofed` and `alluxio` run for real (the rendered scripts, through the runner, `sudo -n bash`
//! on a real sshd host) against stand-ins for the system tools they change: the package manager,
//! the kernel and OFED tools, systemd, mounts. The stand-ins are small bash scripts, first on
//! the script's `PATH` (an exported step parameter), that keep their state in files of this
//! test, so nothing on the machine is touched. What they model, and nothing more:
//!
//! - a dpkg database (`installed`: one package per line) read by `dpkg-query -W`, and the hold
//!   list (`held`) written by `apt-mark hold` and `dpkg --set-selections`;
//! - `apt-get install`, which adds packages, and Ubuntu 22.04's one conflict that matters here:
//!   `fuse` (libfuse 2's tools) conflicts with `fuse3`, so installing `fuse` removes `fuse3` and
//!   `blobfuse2`, which depends on it; the blobfuse2 mount is then modelled as gone (on a real
//!   node it dies with its next restart, when /usr/bin/blobfuse2 no longer exists);
//! - the running kernel (`kernel`, printed by `uname -r`) and the kernels OFED's modules are
//!   built for (`ofed-kernels`): `modinfo -k K -F filename mlx5_ib` names OFED's module under
//!   updates/dkms/ for those, else the kernel's inbox module; `dkms autoinstall -k K` builds for
//!   K, and only when linux-headers-K is installed, as DKMS needs;
//! - mounts (`mounts`: `DIR FSTYPE OPTIONS` lines) for `mountpoint`, `findmnt` and Alluxio's
//!   `alluxio-fuse`, processes for `pgrep -f` (`processes`).
//!
//! Every call is appended to `calls`; a tool the scripts must not reach here (`wget`,
//! `mlnxofedinstall`) fails loudly.

use std::path::Path;

use super::*;

/// A directory of stand-ins and their state.
struct StandIns {
    dir: PathBuf,
}

impl StandIns {
    fn new(root: &Path) -> Self {
        let dir = root.join("stand-ins");
        std::fs::create_dir_all(dir.join("bin")).expect("stand-in dir");
        for state in [
            "installed",
            "held",
            "calls",
            "mounts",
            "processes",
            "ofed-kernels",
        ] {
            std::fs::write(dir.join(state), "").expect("state file");
        }
        let me = Self { dir };
        let s = me.dir.display().to_string();
        me.tool(
            "uname",
            &format!(
                "if [ \"${{1:-}}\" = -r ]; then cat {s}/kernel; else exec /bin/uname \"$@\"; fi"
            ),
        );
        me.tool(
            "dpkg-query",
            &format!(
                r#"format=; patterns=()
for a in "$@"; do
  case "$a" in -W) ;; -f=*) format=${{a#-f=}} ;; *) patterns+=("$a") ;; esac
done
found=1
while read -r pkg; do
  for p in "${{patterns[@]}}"; do
    # shellcheck disable=SC2053 # Glob patterns, as dpkg-query matches them.
    if [[ $pkg == $p ]]; then
      if [[ $format == *'${{Package}}'* ]]; then printf '%s ii \n' "$pkg"; else printf 'ii '; fi
      found=0
      break
    fi
  done
done <{s}/installed
exit $found"#
            ),
        );
        me.tool(
            "apt-mark",
            &format!(
                r#"case "$1" in
  hold) shift; printf '%s\n' "$@" >>{s}/held; sort -u -o {s}/held {s}/held ;;
  showhold) sort -u {s}/held ;;
  *) exit 1 ;;
esac"#
            ),
        );
        me.tool("dpkg", &format!(r#"case "$1" in
  --set-selections) while read -r p state; do [ "$state" = hold ] && echo "$p" >>{s}/held; done; sort -u -o {s}/held {s}/held ;;
  --get-selections) shift; for p in "$@"; do if grep -qx "$p" {s}/held; then printf '%s\thold\n' "$p"; fi; done ;;
  -s) grep -qx "$2" {s}/installed ;;
  *) echo "dpkg stand-in: unexpected $*" >&2; exit 1 ;;
esac"#));
        me.tool(
            "apt-get",
            &format!(
                r#"command=; packages=(); skip=0
for a in "$@"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  case "$a" in
    -o) skip=1 ;;
    -*) ;;
    *) if [ -z "$command" ]; then command=$a; else packages+=("$a"); fi ;;
  esac
done
[ "$command" = install ] || exit 0
for p in "${{packages[@]}}"; do
  if [ "$p" = fuse ] && grep -qx fuse3 {s}/installed; then
    echo "Removing fuse3 and blobfuse2 (fuse conflicts with fuse3)"
    grep -vx -e fuse3 -e blobfuse2 {s}/installed >{s}/installed.new || true
    mv {s}/installed.new {s}/installed
    grep -v ' fuse.blobfuse2 ' {s}/mounts >{s}/mounts.new || true
    mv {s}/mounts.new {s}/mounts
  fi
  grep -qx "$p" {s}/installed || echo "$p" >>{s}/installed
done"#
            ),
        );
        me.tool("ofed_info", "echo 'MLNX_OFED_LINUX-5.9-0.5.6.0:'");
        me.tool(
            "modinfo",
            &format!(
                r#"kernel=$(cat {s}/kernel); module=
while [ $# -gt 0 ]; do
  case "$1" in -k) kernel=$2; shift 2 ;; -F) shift 2 ;; *) module=$1; shift ;; esac
done
if grep -qx "$kernel" {s}/ofed-kernels; then
  echo "/lib/modules/$kernel/updates/dkms/$module.ko"
else
  echo "/lib/modules/$kernel/kernel/drivers/infiniband/hw/mlx5/$module.ko"
fi"#
            ),
        );
        me.tool("dkms", &format!(r#"case "$1" in
  status) while read -r k; do echo "mlnx-ofed-kernel/5.9, $k, x86_64: installed"; done <{s}/ofed-kernels ;;
  autoinstall)
    grep -qx "linux-headers-$3" {s}/installed || {{ echo "dkms stand-in: no headers for $3" >&2; exit 1; }}
    echo "$3" >>{s}/ofed-kernels ;;
  *) exit 1 ;;
esac"#));
        me.tool("systemctl", "exit 0");
        me.tool(
            "pgrep",
            &format!("[ \"$1\" = -f ] && grep -qF -- \"$2\" {s}/processes"),
        );
        me.tool("mountpoint", &format!("grep -q \"^$2 \" {s}/mounts"));
        me.tool("findmnt", &format!(
            "dir=${{*: -1}}; line=$(grep \"^$dir \" {s}/mounts) || exit 1; echo \"${{line##* }}\""
        ));
        for forbidden in ["wget", "mlnxofedinstall"] {
            me.tool(
                forbidden,
                "echo \"stand-in: $0 must not run in this test\" >&2; exit 1",
            );
        }
        me
    }

    /// Writes an executable stand-in that records its call, then runs `body`.
    fn tool(&self, name: &str, body: &str) {
        write_executable(
            &self.dir.join("bin").join(name),
            &format!(
                "#!/bin/bash\nset -u\necho \"{name} $*\" >>{}/calls\n{body}\n",
                self.dir.display()
            ),
        );
    }

    /// Replaces the stand-in `name` (the forbidden ones included) for one test.
    fn replace(&self, name: &str, body: &str) {
        self.tool(name, body);
    }

    fn set(&self, state: &str, lines: &[&str]) {
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(self.dir.join(state), text).expect("state written");
    }

    fn lines(&self, state: &str) -> Vec<String> {
        let mut lines: Vec<String> = std::fs::read_to_string(self.dir.join(state))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    }

    /// `step` with the stand-ins first on its `PATH`.
    fn apply(&self, step: &mut StepSpec) {
        step.params.insert(
            "PATH".into(),
            format!(
                "{}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                self.dir.display()
            ),
        );
    }
}

fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).expect("executable written");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn single_node(hosts: &TestHosts, block: &str) -> NodeContext {
    let mut ctx = NodeContext::new(
        "stand-ins",
        block,
        vec![ClusterNode {
            name: hosts.hosts[0].name.clone(),
            private_ip: "127.0.0.1".into(),
            ssh_port: hosts.hosts[0].port,
        }],
    );
    let temp = hosts.dir().join("temp");
    std::fs::create_dir_all(&temp).expect("temp dir");
    ctx.temp_dir = Some(temp.display().to_string());
    ctx
}

pub(crate) async fn run_ok(
    hosts: &TestHosts,
    run: &str,
    steps: &[StepSpec],
) -> Vec<(String, String, String)> {
    let (options, lines) = options_with_lines(hosts, run);
    let report = steps::run(&[hosts.hosts[0].node()], steps, &options)
        .await
        .expect("valid input");
    let lines = lines.lock().expect("no poisoned lock").clone();
    assert!(report.success(), "{report}\n{lines:#?}");
    lines
}

const OLD_KERNEL: &str = "5.15.0-1050-azure";
const NEW_KERNEL: &str = "5.15.0-1060-azure";

/// The kernel hold covers the meta-packages that pull newer kernels (linux-azure and its
/// parts) and the running kernel's packages, only those installed. And after an upgrade and a
/// reboot (a newer kernel installed before the hold, say by unattended-upgrades on first boot),
/// the per-boot check finds OFED's modules built for the old kernel, builds them for the new
/// one and holds the new kernel; the boot after that builds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mofed_holds_the_kernel_meta_packages_and_rebuilds_after_a_kernel_upgrade() {
    let Some(hosts) = sshd::start(1) else { return };
    let tools = StandIns::new(hosts.dir());
    tools.set("kernel", &[OLD_KERNEL]);
    tools.set("ofed-kernels", &[OLD_KERNEL]);
    tools.set(
        "installed",
        &[
            "linux-azure",
            "linux-image-azure",
            "linux-headers-azure",
            "linux-tools-azure",
            "linux-image-5.15.0-1050-azure",
            "linux-headers-5.15.0-1050-azure",
            "linux-modules-5.15.0-1050-azure",
            "openssh-server",
        ],
    );
    let ctx = single_node(&hosts, "vm.hpc");
    let params: BTreeMap<String, Value> = serde_json::from_value(json!({
        "enable_ipoib": false, "hold_kernel": true, "timeout": "5m"
    }))
    .expect("a map");
    let request = StepRequest {
        name: "mofed",
        kind: "mofed",
        scope: Scope::All,
        policy: RunPolicy::Once,
        params: &params,
    };
    let mut steps = library::render(&request, &ctx).expect("renders").steps;
    for step in &mut steps {
        tools.apply(step);
    }

    // First boot: OFED (the image's) matches the kernel; the step holds the kernel.
    run_ok(&hosts, "mofed-1", &steps).await;
    assert_eq!(
        tools.lines("held"),
        [
            "linux-azure",
            "linux-headers-5.15.0-1050-azure",
            "linux-headers-azure",
            "linux-image-5.15.0-1050-azure",
            "linux-image-azure",
            "linux-modules-5.15.0-1050-azure",
            "linux-tools-azure",
        ],
        "held: the meta-packages and the running kernel's packages, only installed ones"
    );
    let dkms_builds = |tools: &StandIns| {
        tools
            .lines("calls")
            .iter()
            .filter(|c| c.starts_with("dkms autoinstall"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(dkms_builds(&tools).is_empty());

    // A newer kernel was installed before the hold; the node reboots into it.
    tools.set("kernel", &[NEW_KERNEL]);
    let mut installed = tools.lines("installed");
    installed.extend([
        format!("linux-image-{NEW_KERNEL}"),
        format!("linux-modules-{NEW_KERNEL}"),
    ]);
    tools.set(
        "installed",
        &installed.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    hosts.hosts[0].reboot();
    let lines = run_ok(&hosts, "mofed-2", &steps).await;
    assert_eq!(
        dkms_builds(&tools),
        [format!("dkms autoinstall -k {NEW_KERNEL}")],
        "{lines:#?}"
    );
    assert!(tools.lines("ofed-kernels").contains(&NEW_KERNEL.to_owned()));
    let held = tools.lines("held");
    for package in [
        format!("linux-image-{NEW_KERNEL}"),
        format!("linux-headers-{NEW_KERNEL}"),
        format!("linux-modules-{NEW_KERNEL}"),
        "linux-azure".to_owned(),
    ] {
        assert!(held.contains(&package), "{package} held: {held:?}");
    }
    assert!(
        lines.iter().any(|(_, step, line)| step == "mofed.verify"
            && line.contains(&format!("not built for the running kernel {NEW_KERNEL}"))),
        "{lines:#?}"
    );

    // The next boot finds the modules matching: nothing is built.
    hosts.hosts[0].reboot();
    run_ok(&hosts, "mofed-3", &steps).await;
    assert_eq!(dkms_builds(&tools).len(), 1);
}

/// Issue 29, item 11: on a plain image (no OFED), `mofed` installs DOCA-OFED of the pinned
/// release from NVIDIA's apt repository, whose list names the key it is signed with; the modules
/// DKMS builds match the running kernel, the node reboots once, and the kernel stays held. The
/// stand-in apt installs `doca-ofed` only from a list whose `signed-by` key exists, as apt does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mofed_installs_doca_ofed_from_its_pinned_repository_on_a_plain_image() {
    let Some(hosts) = sshd::start(1) else { return };
    let tools = StandIns::new(hosts.dir());
    let s = tools.dir.display().to_string();
    let apt_root = hosts.dir().join("apt-root");
    let r = apt_root.display().to_string();
    tools.set("kernel", &[NEW_KERNEL]);
    tools.set(
        "installed",
        &[
            "linux-azure",
            "linux-image-5.15.0-1060-azure",
            "linux-modules-5.15.0-1060-azure",
        ],
    );
    // No OFED until doca-ofed is installed.
    tools.replace(
        "ofed_info",
        &format!("grep -qx doca-ofed {s}/installed && echo 'OFED-internal-24.10-1.1.4:'"),
    );
    tools.replace(
        "wget",
        r#"case "${!#}" in
  */public/repo/doca/GPG-KEY-Mellanox.pub) echo "-----BEGIN PGP PUBLIC KEY BLOCK-----" ;;
  *) echo "stand-in wget: unexpected ${!#}" >&2; exit 1 ;;
esac"#,
    );
    tools.replace("gpg", r#"cat >"${!#}""#);
    tools.replace(
        "apt-get",
        &format!(
            r#"command=; packages=(); skip=0
for a in "$@"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  case "$a" in -o) skip=1 ;; -*) ;; *) if [ -z "$command" ]; then command=$a; else packages+=("$a"); fi ;; esac
done
[ "$command" = install ] || exit 0
for p in "${{packages[@]}}"; do
  if [ "$p" = doca-ofed ]; then
    list={r}/etc/apt/sources.list.d/doca-ofed.list
    grep -q 'https://linux.mellanox.com/public/repo/doca/2.9.1/ubuntu' "$list" 2>/dev/null ||
      {{ echo "E: Unable to locate package doca-ofed" >&2; exit 100; }}
    key=$(sed -n 's/.*signed-by=\([^] ]*\).*/\1/p' "$list")
    [ -s "{r}$key" ] || {{ echo "W: NO_PUBKEY" >&2; echo "E: Unable to locate package doca-ofed" >&2; exit 100; }}
    # DKMS builds the modules for the running kernel as the package installs.
    cat {s}/kernel >>{s}/ofed-kernels
  fi
  grep -qx "$p" {s}/installed || echo "$p" >>{s}/installed
done"#
        ),
    );
    std::fs::create_dir_all(apt_root.join("etc")).expect("apt root");
    std::fs::write(
        apt_root.join("etc/os-release"),
        "ID=ubuntu\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu 22.04.5 LTS\"\n",
    )
    .expect("the node's release");
    let mut ctx = single_node(&hosts, "vm.hpc");
    ctx.apt_root = Some(r.clone());
    let params: BTreeMap<String, Value> = serde_json::from_value(json!({
        "enable_ipoib": false, "hold_kernel": true, "timeout": "5m"
    }))
    .expect("a map");
    let request = StepRequest {
        name: "mofed",
        kind: "mofed",
        scope: Scope::All,
        policy: RunPolicy::Once,
        params: &params,
    };
    let mut steps = library::render(&request, &ctx).expect("renders").steps;
    for step in &mut steps {
        tools.apply(step);
    }
    let (mut options, lines) = options_with_lines(&hosts, "doca-1");
    options.reboot_command = hosts.hosts[0].simulated_reboot_command();
    let boot_before = hosts.hosts[0].boot_id();
    let report = steps::run(&[hosts.hosts[0].node()], &steps, &options)
        .await
        .expect("valid input");
    let lines = lines.lock().expect("no poisoned lock").clone();
    assert!(
        report.success(),
        "{report}\n{lines:#?}\n{:#?}",
        tools.lines("calls")
    );
    assert!(tools.lines("installed").contains(&"doca-ofed".to_owned()));
    assert_ne!(
        hosts.hosts[0].boot_id(),
        boot_before,
        "the install reboots the node"
    );
    let list = std::fs::read_to_string(apt_root.join("etc/apt/sources.list.d/doca-ofed.list"))
        .expect("the repository list");
    assert_eq!(
        list,
        "deb [signed-by=/etc/apt/keyrings/doca-ofed.gpg] https://linux.mellanox.com/public/repo/doca/2.9.1/ubuntu22.04/x86_64/ ./\n"
    );
    assert!(
        tools
            .lines("held")
            .contains(&format!("linux-image-{NEW_KERNEL}"))
    );
    assert!(
        !tools
            .lines("calls")
            .iter()
            .any(|c| c.starts_with("mlnxofedinstall"))
    );
}

/// apt-get (and dpkg) fail with exit status 100, the status a step returns to ask the runner for
/// a reboot: a step whose apt-get failed was taken as done-and-reboot (found when a stand-in apt
/// refused a package and the AML test waited for a reboot that never came). Now a command that
/// fails with 100 fails the step; the script's own `exit 100` still reboots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_failing_with_status_100_fails_the_step_and_only_exit_100_reboots() {
    let Some(hosts) = sshd::start(1) else { return };
    let ctx = single_node(&hosts, "vm.box");
    let script = |name: &str, text: &str| {
        let params: BTreeMap<String, Value> =
            serde_json::from_value(json!({ "script": text })).expect("a map");
        let request = StepRequest {
            name,
            kind: "script",
            scope: Scope::All,
            policy: RunPolicy::Once,
            params: &params,
        };
        library::render(&request, &ctx).expect("renders").steps
    };
    let run = |run: &'static str, steps: Vec<StepSpec>| {
        let hosts = &hosts;
        async move {
            let (mut options, lines) = options_with_lines(hosts, run);
            options.reboot_command = hosts.hosts[0].simulated_reboot_command();
            let report = steps::run(&[hosts.hosts[0].node()], &steps, &options)
                .await
                .expect("valid input");
            let lines = lines.lock().expect("no poisoned lock").clone();
            (report.success(), lines)
        }
    };
    let boot = hosts.hosts[0].boot_id();
    // As `apt-get install` of a package no repository has: status 100, under `set -e`.
    let (ok, lines) = run(
        "fails-100",
        script(
            "apt",
            "sh -c 'echo \"E: Unable to locate package nothing\" >&2; exit 100'\necho after",
        ),
    )
    .await;
    assert!(!ok, "{lines:#?}");
    assert!(
        lines.iter().any(|(_, _, l)| l
            .ends_with("failed with exit status 100 (a failure, not a reboot request)")),
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|(_, _, l)| l == "after"), "{lines:#?}");
    assert_eq!(hosts.hosts[0].boot_id(), boot, "no reboot");

    // The script's own `exit 100` is a reboot request, as before.
    let (ok, lines) = run("asks-100", script("reboot", "exit 100")).await;
    assert!(ok, "{lines:#?}");
    assert_ne!(hosts.hosts[0].boot_id(), boot, "rebooted");
}

/// Alluxio on a node that also mounts a container with blobfuse2 (Ubuntu 22.04): it installs
/// libfuse2 (what Alluxio 2.9's FUSE loads), never `fuse`, so fuse3 and blobfuse2 stay installed
/// and blobfuse2's mount stays; its own mount has allow_other, with user_allow_other set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alluxio_leaves_blobfuse2_installed_and_mounted_and_mounts_with_allow_other() {
    let Some(hosts) = sshd::start(1) else { return };
    let tools = StandIns::new(hosts.dir());
    tools.set(
        "installed",
        &[
            "fuse3",
            "libfuse3-3",
            "blobfuse2",
            "openjdk-11-jre-headless",
        ],
    );
    let blob_mount =
        "/mnt/blob fuse.blobfuse2 rw,nosuid,nodev,relatime,user_id=0,group_id=0,allow_other";
    tools.set("mounts", &[blob_mount]);
    // An unpacked Alluxio 2.9.4 whose tools are stand-ins too (no download).
    let opt = hosts.dir().join("opt");
    let s = tools.dir.display().to_string();
    let home = opt.join("alluxio-2.9.4");
    std::fs::create_dir_all(home.join("conf")).expect("conf dir");
    std::fs::create_dir_all(home.join("integration/fuse/bin")).expect("fuse dir");
    std::fs::create_dir_all(home.join("bin")).expect("bin dir");
    write_executable(
        &home.join("bin/alluxio"),
        &format!("#!/bin/bash\necho \"alluxio $*\" >>{s}/calls\n"),
    );
    write_executable(
        &home.join("bin/alluxio-start.sh"),
        &format!(
            "#!/bin/bash\necho \"alluxio-start.sh $*\" >>{s}/calls\n\
             case \"$1\" in master) echo alluxio.master.AlluxioMaster ;; worker) echo alluxio.worker.AlluxioWorker ;; esac >>{s}/processes\n"
        ),
    );
    write_executable(
        &home.join("integration/fuse/bin/alluxio-fuse"),
        &format!(
            "#!/bin/bash\necho \"alluxio-fuse $*\" >>{s}/calls\n\
             if [ \"$1\" = mount ]; then\n\
               shift; options=\n\
               if [ \"$1\" = -o ]; then options=\",$2\"; shift 2; fi\n\
               echo \"$1 fuse.alluxio-fuse rw,nosuid,nodev,user_id=0,group_id=0$options\" >>{s}/mounts\n\
             fi\n"
        ),
    );
    let fuse_conf = hosts.dir().join("fuse.conf");
    std::fs::write(&fuse_conf, "# mount_max = 1000\n").expect("fuse.conf");
    let mount = hosts.dir().join("alluxio-fuse");

    let mut ctx = single_node(&hosts, "vm.reader");
    ctx.storage.insert(
        "storage_account.data.container.raw".into(),
        StorageTarget::azure("dsinfradata", "raw"),
    );
    ctx.credentials.insert(
        "storage_account.data".into(),
        Credential {
            kind: CredentialKind::AccountKey,
            identity: "storage_account.data key1".into(),
            value: Secret::new(FAKE_KEY),
        },
    );
    let params: BTreeMap<String, Value> = serde_json::from_value(json!({
        "container": "storage_account.data.container.raw", "mount": mount.display().to_string(),
        "memory_gb": 1, "version": "2.9.4", "timeout": "5m"
    }))
    .expect("a map");
    let request = StepRequest {
        name: "alluxio",
        kind: "alluxio",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &params,
    };
    let mut steps = library::render(&request, &ctx).expect("renders").steps;
    for step in &mut steps {
        // The scripts' two system locations, moved into this test's directory.
        let moved = step
            .script
            .replace("\nopt=/opt\n", &format!("\nopt={}\n", opt.display()))
            .replace(
                "\nfuse_conf=/etc/fuse.conf\n",
                &format!("\nfuse_conf={}\n", fuse_conf.display()),
            );
        assert!(
            !moved.contains("=/opt"),
            "{}: every /opt path moved:\n{moved}",
            step.name
        );
        assert!(!moved.contains("=/etc/fuse.conf"), "{}", step.name);
        step.script = moved;
        if step.check.is_some() {
            step.check = Some(library::check_command(&step.script));
        }
        tools.apply(step);
    }
    let lines = run_ok(&hosts, "alluxio", &steps).await;

    let installed = tools.lines("installed");
    for package in ["blobfuse2", "fuse3", "libfuse2"] {
        assert!(
            installed.contains(&package.to_owned()),
            "{package} installed: {installed:?}\n{lines:#?}"
        );
    }
    assert!(!installed.contains(&"fuse".to_owned()), "{installed:?}");
    let mounts = tools.lines("mounts");
    assert!(
        mounts.contains(&blob_mount.to_owned()),
        "blobfuse2 still mounted: {mounts:?}"
    );
    assert!(
        tools.lines("calls").contains(&format!(
            "alluxio-fuse mount -o allow_other {} /",
            mount.display()
        )),
        "{:?}",
        tools.lines("calls")
    );
    let conf = std::fs::read_to_string(&fuse_conf).expect("fuse.conf");
    assert!(conf.lines().any(|l| l == "user_allow_other"), "{conf}");
    // The site file holds the key: root-only.
    let site = home.join("conf/alluxio-site.properties");
    assert_eq!(
        std::fs::metadata(&site)
            .expect("site file")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
}
