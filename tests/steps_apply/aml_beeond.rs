//! Issue 17, Done-when 2: the `beeond` step kind, every line of it, the `ssh_mesh` step and a
//! `stage` into the BeeOND scratch, through the engine on the four nodes of an `aml_cluster`,
//! each node a local sshd at the port `listNodes` gives it (tests/common/aml_nodes.rs), as
//! examples/aml-beeond.hcl does. The staging half's dataset, Azurite and azcopy are
//! tests/steps_apply/aml_stage.rs's.
//!
//! The BeeOND scripts would install packages, build a kernel module and mount a file system on
//! this machine, so `DSINFRA_BEEOND_ROOT` points them at a directory standing in for `/`: its
//! `bin` holds stand-ins for the system's tools (first on the `PATH` of the scripts and of their
//! commands over the mesh), and the paths they write (`/etc/apt`, `/etc/beegfs`,
//! `/var/log/beeond`, the client's init script) are under it. The stand-ins record their argv
//! and node, and model what the scripts check afterwards: `apt-get install` makes `dpkg` and
//! `dpkg-query` report the package at the release of the repository the install wrote, and
//! installs the client's init script, whose `rebuild` makes `modinfo` report the kernel `uname`
//! gives; `beeond start -n NODEFILE` mounts the scratch on every node of the nodefile (as `findmnt`
//! then reports it) and `beegfs-ctl` lists one storage node per nodefile line.
//!
//! The hosts share this machine's filesystem, so the stand-ins keep their state per node: what a
//! node installed under the node's name (`DSINFRA_NODE`, which the runner exports), and what is
//! mounted under the node's address, the one name a node has both in a step (the address of
//! rank `DSINFRA_RANK` in the nodefile the head started BeeOND with) and over the mesh (the
//! server side of `$SSH_CONNECTION`: each AML host listens on its own loopback address). The
//! BeeOND configuration directory is one directory for all four nodes: the copy of the
//! connection secret to each node and the checksum comparison the start step makes go over the
//! mesh to every node, but land in that one directory. It belongs to the mesh user, who is root
//! on Azure and the farm's login user here.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use super::aml_stage::{Dataset, Tools, assert_staged};
use super::*;

/// A kernel BeeGFS 7.4 builds for (an AML node image's; this machine's may be newer).
const NODE_KERNEL: &str = "5.15.0-1073-azure";

/// What every stand-in starts with: where the root and the record are, which node this is, and
/// one line in the record for this call (time, node, tool, argv).
fn prologue(root: &Path) -> String {
    format!(
        r#"#!/bin/bash
set -euo pipefail
root={root}
state="$root/var/lib/stand-ins"
# This node's address: of its rank in the nodefile BeeOND was started with (in a step), or the
# address its sshd was reached at (over the mesh).
self_address() {{
  if [ -n "${{DSINFRA_RANK:-}}" ]; then
    sed -n "$((DSINFRA_RANK + 1))p" "$state/nodefile" 2>/dev/null || true
  else
    # shellcheck disable=SC2086
    set -- ${{SSH_CONNECTION:-}}
    echo "${{3:-}}"
  fi
}}
node=${{DSINFRA_NODE:-mesh@$(self_address)}}
printf '%s\t%s\t%s\t%s\n' "$(date +%s.%N)" "$node" "${{0##*/}}" "$*" >>"$root/calls"
"#,
        root = root.display()
    )
}

/// The stand-ins, by name, after the prologue.
fn stand_ins() -> Vec<(&'static str, String)> {
    let mut all = package_stand_ins();
    all.extend(beegfs_stand_ins());
    all
}

/// The tools of the install: the kernel, the download, apt and dpkg, the module.
fn package_stand_ins() -> Vec<(&'static str, String)> {
    vec![
        (
            "uname",
            format!("if [ \"${{1:-}}\" = -r ]; then echo {NODE_KERNEL}; else exec /bin/uname \"$@\"; fi\n"),
        ),
        (
            "wget",
            // `-O- KEY_URL` prints a key; `-O FILE LIST_URL` writes the repository line.
            r#"url=${!#}
if [ "${2:-}" = -O- ]; then echo "-----BEGIN PGP PUBLIC KEY BLOCK-----"; exit 0; fi
release=$(echo "$url" | sed -n 's|.*/release/\(beegfs_[0-9.]*\)/.*|\1|p')
# Written whole, then renamed: the other nodes read this file (one filesystem here).
staging=$(mktemp "${3:?}.XXXXXX")
# The list names its key (issue 29, item 11): apt reads the key there and nowhere else.
echo "deb [arch=amd64 signed-by=/etc/apt/keyrings/beegfs.gpg] https://www.beegfs.io/release/${release} stable non-free" >"$staging"
mv -f "$staging" "$3"
"#
            .to_owned(),
        ),
        // Written whole, then renamed: the nodes share one filesystem here, and another node's
        // apt-get reading a keyring half written took it for a missing key (exit 100).
        (
            "gpg",
            "staging=$(mktemp \"${!#}.XXXXXX\")\ncat >\"$staging\"\nmv -f \"$staging\" \"${!#}\"\n"
                .to_owned(),
        ),
        (
            "apt-get",
            // After the options: `update`, or `install -y PACKAGE...`.
            r#"while [ "${1:-}" != install ] && [ $# -gt 0 ]; do shift; done
[ $# -gt 0 ] || exit 0
shift
release=$(sed -n 's|.*/beegfs_\([0-9.]*\) .*|\1|p' "$root/etc/apt/sources.list.d/beegfs.list" 2>/dev/null || true)
keyring=$(sed -n 's/.*signed-by=\([^] ]*\).*/\1/p' "$root/etc/apt/sources.list.d/beegfs.list" 2>/dev/null || true)
if [ -n "$keyring" ] && [ ! -s "$root$keyring" ]; then
  # apt's answer to a repository whose key is not where its list says.
  echo "W: GPG error: https://www.beegfs.io stable InRelease: NO_PUBKEY" >&2
  release=""
fi
mkdir -p "$state/$node/packages"
for package in "$@"; do
  case "$package" in
    -*) ;;
    beeond | libbeegfs-ib)
      [ -n "$release" ] || { echo "E: Unable to locate package $package" >&2; exit 100; }
      echo "${release}" >"$state/$node/packages/$package"
      # The client package brings its init script, whose rebuild builds the module.
      mkdir -p "$root/etc/beegfs"
      # Written whole, then renamed: another node may be running it (one filesystem here).
      staging=$(mktemp "$root/etc/init.d/.beegfs-client.XXXXXX")
      cat >"$staging" <<EOF
#!/bin/bash
set -euo pipefail
node=\${DSINFRA_NODE:?}
printf '%s\t%s\t%s\t%s\n' "\$(date +%s.%N)" "\$node" beegfs-client "\$*" >>"$root/calls"
grep -q '^buildEnabled=true' "$root/etc/beegfs/beegfs-client-autobuild.conf"
mkdir -p "$state/\$node/modules"
uname -r >"$state/\$node/modules/beegfs"
EOF
      chmod 755 "$staging"
      mv -f "$staging" "$root/etc/init.d/beegfs-client" ;;
    *) echo 1.0 >"$state/$node/packages/$package" ;;
  esac
done
"#
            .to_owned(),
        ),
        (
            "dpkg",
            r#"[ "${1:-}" = -s ] && [ -f "$state/$node/packages/${2:?}" ] || exit 1
echo "Status: install ok installed"
"#
            .to_owned(),
        ),
        (
            "dpkg-query",
            r#"package=${!#}
[ -f "$state/$node/packages/$package" ] || exit 1
printf '%s' "$(cat "$state/$node/packages/$package")"
"#
            .to_owned(),
        ),
        (
            "modinfo",
            r#"[ -f "$state/$node/modules/${!#}" ] || exit 1
echo "$(cat "$state/$node/modules/${!#}") SMP mod_unload modversions"
"#
            .to_owned(),
        ),
    ]
}

/// The tools of start, health and stop: the mount table, BeeOND, the BeeGFS admin tool.
fn beegfs_stand_ins() -> Vec<(&'static str, String)> {
    vec![
        (
            "findmnt",
            // `-n -t beegfs MNT`: this node's BeeGFS mount; `-no TARGET /mnt/resource`: the
            // temp disk (an AML node's), under the root.
            r#"case "$*" in
  "-n -t beegfs "*)
    address=$(self_address)
    [ -n "$address" ] && [ "$(cat "$state/mounted/$address" 2>/dev/null)" = "${!#}" ] || exit 1
    echo "${!#} beegfs_nodev beegfs rw" ;;
  "-no TARGET /mnt/resource") echo "$root/mnt/resource" ;;
  *) exit 1 ;;
esac
"#
            .to_owned(),
        ),
        (
            "beeond",
            r#"action=$1
shift
nodefile="" mount="" conf=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) nodefile=$2; shift ;;
    -c) mount=$2; shift ;;
    -f) conf=$2; shift ;;
  esac
  shift
done
mkdir -p "$state/mounted"
case "$action" in
  start)
    # BeeOND refuses to start without its connection secret, readable by root only.
    [ "$(stat -c %a "$conf/connauthfile")" = 400 ] || exit 1
    cp "$nodefile" "$state/nodefile"
    mkdir -p "$mount"
    while read -r address; do echo "$mount" >"$state/mounted/$address"; done <"$nodefile"
    touch "$root/var/tmp/beeond.tmp" ;;
  stop)
    while read -r address; do rm -f "$state/mounted/$address"; done <"$nodefile"
    rm -f "$root/var/tmp/beeond.tmp" ;;
esac
"#
            .to_owned(),
        ),
        (
            "beegfs-ctl",
            r#"i=0
case "$*" in
  *--nodetype=storage*) while read -r address; do i=$((i + 1)); echo "storage-${address} [ID: $i]"; done <"$state/nodefile" ;;
  *--nodetype=meta*) echo "meta-$(head -n 1 "$state/nodefile") [ID: 1]" ;;
esac
"#
            .to_owned(),
        ),
    ]
}

/// The stand-in root: an image's skeleton, the stand-ins in `bin`, an empty record every node may
/// append to, and the BeeOND configuration directory owned by the mesh user (see the module doc).
/// Either farm's hosts (AML nodes, or VMs: the spot tests).
pub(super) fn stand_in_root(farm: &common::nodes::FarmHosts) -> std::path::PathBuf {
    let root = farm.dir().join("beeond-root");
    for dir in [
        "bin",
        "etc/apt/sources.list.d",
        "etc/apt/trusted.gpg.d",
        "etc/init.d",
        "etc/beegfs/beeond",
        "mnt/resource",
        "var/lib/stand-ins",
        "var/log",
        "var/tmp",
    ] {
        std::fs::create_dir_all(root.join(dir)).expect("root skeleton");
    }
    let prologue = prologue(&root);
    for (name, body) in stand_ins() {
        let path = root.join("bin").join(name);
        std::fs::write(&path, format!("{prologue}{body}")).expect("stand-in written");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("stand-in executable");
    }
    let calls = root.join("calls");
    std::fs::write(&calls, "").expect("record");
    std::fs::set_permissions(&calls, std::fs::Permissions::from_mode(0o666)).expect("record mode");
    let owned = std::process::Command::new("chown")
        .arg(farm.user())
        .arg(root.join("etc/beegfs/beeond"))
        .status()
        .is_ok_and(|s| s.success());
    assert!(owned, "chown the configuration directory");
    root
}

/// The stand-ins' record: `(time, node, tool, argv)` per call.
pub(super) fn calls(root: &Path) -> Vec<(f64, String, String, String)> {
    std::fs::read_to_string(root.join("calls"))
        .expect("record")
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.splitn(4, '\t').collect();
            assert_eq!(fields.len(), 4, "{line}");
            (
                fields[0].parse().expect("a time"),
                fields[1].to_owned(),
                fields[2].to_owned(),
                fields[3].to_owned(),
            )
        })
        .collect()
}

/// The nodes (by name) that called `tool` with argv starting `argv`, in the order of the calls.
fn callers(calls: &[(f64, String, String, String)], tool: &str, argv: &str) -> Vec<String> {
    calls
        .iter()
        .filter(|(_, _, t, a)| t == tool && a.starts_with(argv))
        .map(|(_, node, _, _)| node.clone())
        .collect()
}

/// A new workspace and four nodes with the mesh, BeeOND on the nodefile, and the dataset staged
/// into the BeeOND scratch (so the stage's gate asks whether the scratch is BeeGFS), as
/// examples/aml-beeond.hcl does.
fn write_beeond_manifest(w: &World, farm: &AmlNodeFarm) {
    let out = w.out().display().to_string();
    let block = format!(
        r#"aml_cluster "scratch" {{
  workspace      = aml_workspace.ws
  size           = "Standard_D2_v2"
  count          = 4
  admin_username = "{user}"
  ssh_key        = "{key}"
  step "ssh_mesh" {{
    nodefile = "{out}/nodefile"
  }}
  step "beeond" {{
    nodefile = "{out}/nodefile"
    mount    = "{out}/scratch"
  }}"#,
        user = farm.user(),
        key = farm.client_public_key(),
    );
    super::aml_stage::write_stage_manifest(
        w,
        "aml_workspace \"ws\" {}\n",
        &block,
        &w.out().join("scratch/staged"),
    );
}

#[allow(clippy::too_many_lines)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beeond_mesh_and_staging_run_on_four_aml_nodes_through_the_engine_and_a_second_apply_runs_nothing()
 {
    let Some(data) = Dataset::start().await else {
        return;
    };
    let Some(farm) = AmlNodeFarm::start() else {
        return;
    };
    let w = World::with_aml_farm_and_blobs(Arc::clone(&farm), data.plane()).await;
    write_beeond_manifest(&w, &farm);
    let root = stand_in_root(&farm);
    let tools = Tools::new(&w, &data.azcopy);
    let mesh = farm.mesh_dir();
    let admin_mesh = farm.admin_mesh_dir();
    let user = std::path::PathBuf::from(farm.user());
    let temp = root.join("mnt/resource");
    let env = [
        ("DSINFRA_MESH_DIR", mesh.as_path()),
        ("DSINFRA_MESH_USER", user.as_path()),
        ("DSINFRA_MESH_ADMIN_DIR", admin_mesh.as_path()),
        ("DSINFRA_BEEOND_ROOT", root.as_path()),
        ("DSINFRA_AZCOPY", tools.azcopy.as_path()),
        ("DSINFRA_TEMP_DIR", temp.as_path()),
    ];

    let started_at = std::time::Instant::now();
    let first = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    eprintln!("first apply took {:?}", started_at.elapsed());
    let mut booted = farm.booted();
    booted.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    assert_eq!(booted.len(), 4, "{first}");
    let nodes: Vec<String> = (0..4)
        .map(|i| format!("aml_cluster.scratch[{i}]"))
        .collect();
    let addresses: Vec<String> = booted
        .iter()
        .map(|b| common::aml_nodes::loopback_for(&b.private_ip).to_string())
        .collect();
    let record = calls(&root);
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };

    // Installed on every node, once: the repository of the pinned release, the packages, the
    // client module built for the node's kernel.
    assert_eq!(
        sorted(callers(
            &record,
            "apt-get",
            "-o DPkg::Lock::Timeout=300 -q install -y beeond libbeegfs-ib pdsh build-essential linux-headers-5.15.0-1073-azure"
        )),
        nodes,
        "{first}"
    );
    assert_eq!(
        sorted(callers(&record, "beegfs-client", "rebuild")),
        nodes,
        "{first}"
    );
    assert!(
        std::fs::read_to_string(root.join("etc/apt/sources.list.d/beegfs.list"))
            .expect("the repository line")
            .contains("/release/beegfs_7.4.6 "),
        "{first}"
    );
    assert!(
        first.contains(&format!(
            "BeeGFS 7.4.6 installed, client module built for {NODE_KERNEL}"
        )),
        "{first}"
    );

    // Started once, on the head, with a nodefile of the four nodes' own addresses in listNodes'
    // order, the scratch mounted on the temp disk's `beeond` directory.
    let starts: Vec<_> = record
        .iter()
        .filter(|(_, _, tool, argv)| tool == "beeond" && argv.starts_with("start "))
        .collect();
    assert_eq!(starts.len(), 1, "{starts:?}\n{first}");
    let out = w.out().display().to_string();
    let conf = root.join("etc/beegfs/beeond").display().to_string();
    assert_eq!(starts[0].1, nodes[0]);
    assert_eq!(
        starts[0].3,
        format!(
            "start -n {out}/nodefile -d {}/mnt/resource/beeond -c {out}/scratch -f {conf} -P -F -L {}/var/log/beeond",
            root.display(),
            root.display()
        )
    );
    let started_with =
        std::fs::read_to_string(root.join("var/lib/stand-ins/nodefile")).expect("nodefile");
    assert_eq!(started_with.lines().collect::<Vec<_>>(), addresses);
    assert_eq!(w.read("nodefile"), started_with);
    // The head asked every node over the mesh whether it had the scratch mounted, before and
    // after the start, and each node's own stand-in answered (by the address it was reached at).
    let asked = callers(&record, "findmnt", &format!("-n -t beegfs {out}/scratch"));
    for address in &addresses {
        let by = format!("mesh@{address}");
        assert!(
            asked.iter().filter(|n| **n == by).count() >= 2,
            "{by}: {asked:?}"
        );
    }
    // The connection secret: generated once on the head, mode 400, copied to every node and
    // checked there by checksum (one directory here: see the module doc).
    let auth = root.join("etc/beegfs/beeond/connauthfile");
    let meta = std::fs::metadata(&auth).expect("connauthfile");
    assert_eq!(meta.permissions().mode() & 0o777, 0o400);
    assert_eq!(
        std::fs::read_to_string(&auth).expect("secret").len(),
        64,
        "48 random bytes in base64"
    );

    // The health gate passed on every node: each found its BeeGFS mount and wrote a probe.
    for node in &nodes {
        assert!(
            first.contains(&format!("is BeeGFS and writable on {node}")),
            "{node}: {first}"
        );
    }
    assert_eq!(
        sorted(callers(&record, "findmnt", "-n -t beegfs"))
            .into_iter()
            .filter(|n| !n.starts_with("mesh@"))
            .collect::<BTreeSet<_>>(),
        nodes.iter().cloned().collect::<BTreeSet<_>>()
    );
    // Every node's record holds both steps.
    let compute = w.resource("aml_cluster.scratch.compute");
    for b in &booted {
        let steps: Vec<&String> = compute["nodes"][&b.node_id]["steps"]
            .as_object()
            .expect("records")
            .keys()
            .collect();
        assert_eq!(steps, ["beeond", "ssh_mesh", "stage"], "{}", b.node_id);
    }
    // Staged into the scratch, once BeeGFS was there: every rank its own shard, sharded across
    // the four nodes, gated by the mount check of its own node.
    assert_staged(
        &w.out().join("scratch/staged"),
        &data,
        &tools,
        ("aml_cluster.scratch", 4),
        &first,
    );

    // Nothing to do: no step starts (not even the head-key read) and no record changes. The
    // runner's own "already done?" checks still look (the start's asks every node over the mesh
    // whether the scratch is mounted); nothing else is called.
    let before = w.state()["resources"].clone();
    let calls_before = record.len();
    let azcopy_runs = tools.runs();
    let second = w
        .ok_env(&["apply", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert_eq!(started(&second), Vec::<String>::new(), "{second}");
    let looked: Vec<(String, String, String)> = calls(&root)[calls_before..]
        .iter()
        .map(|(_, node, tool, argv)| (node.clone(), tool.clone(), argv.clone()))
        .collect();
    let expected: Vec<(String, String, String)> = addresses
        .iter()
        .map(|a| {
            (
                format!("mesh@{a}"),
                "findmnt".to_owned(),
                format!("-n -t beegfs {out}/scratch"),
            )
        })
        .collect();
    assert_eq!(looked, expected, "{second}");
    assert_eq!(w.state()["resources"], before, "{second}");
    assert_eq!(
        tools.runs(),
        azcopy_runs,
        "no azcopy on the second apply: {second}"
    );

    // Park stops BeeOND from the head before the service deletes the nodes.
    let requests_before = w.requests.lock().expect("not poisoned").len();
    let parked = w
        .ok_env(&["park", "stepsdemo.hcl", "--auto-approve"], &env)
        .await;
    assert!(
        parked.contains("aml_cluster.scratch: BeeOND stopped (step `beeond`)"),
        "{parked}"
    );
    let record = calls(&root);
    let stops: Vec<_> = record
        .iter()
        .filter(|(_, _, tool, argv)| tool == "beeond" && argv.starts_with("stop "))
        .collect();
    assert_eq!(stops.len(), 1, "{stops:?}\n{parked}");
    assert_eq!(stops[0].1, nodes[0]);
    assert_eq!(stops[0].3, format!("stop -n {out}/nodefile -L -d -P"));
    let scaled = w.requests.lock().expect("not poisoned")[requests_before..]
        .iter()
        .find(|(_, method, path)| {
            matches!(method.as_str(), "PUT" | "PATCH") && path.contains("/computes/")
        })
        .map_or_else(
            || panic!("the compute was scaled down:\n{parked}"),
            |(at, _, _)| *at,
        );
    assert!(
        stops[0].0 < scaled,
        "stopped at {} scaled at {scaled}",
        stops[0].0
    );
    eprintln!("the whole story took {:?}", started_at.elapsed());
}
