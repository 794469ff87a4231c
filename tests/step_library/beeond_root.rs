//! The `beeond` step kind rendered with its stand-in root (`DSINFRA_BEEOND_ROOT`, held in
//! [`NodeContext::beeond_root`]): the scripts put the root's `bin` first on the `PATH`, here and
//! in the commands they run on other nodes over the mesh, and write the system's paths under the
//! root; without it nothing of the seam is rendered (the example's snapshot pins that). These
//! renders also go through shellcheck with every other script (see `all_rendered_steps`).

use super::*;

const ROOT: &str = "/tmp/farm/beeond-root";

/// Two nodes whose `beeond` step (install, mesh, start, health) and `beeond stop` are rendered
/// with `root` as the stand-in root.
fn render(root: Option<&str>) -> Result<Vec<StepSpec>, LibraryError> {
    let nodes = (0..2)
        .map(|i| ClusterNode {
            name: format!("aml-node-{i}"),
            private_ip: format!("127.11.0.{}", 4 + i),
            ssh_port: 22,
        })
        .collect();
    let mut ctx = NodeContext::new("seam", "aml_cluster.scratch", nodes);
    ctx.head_public_key = Some(FAKE_HEAD_KEY.to_owned());
    ctx.beeond_root = root.map(str::to_owned);
    let params: BTreeMap<String, Value> = BTreeMap::new();
    let request = StepRequest {
        name: "beeond",
        kind: "beeond",
        scope: Scope::All,
        policy: RunPolicy::PerBoot,
        params: &params,
    };
    let mut steps = library::render_block(&[request], &ctx)?.steps;
    steps.push(library::beeond_stop("beeond", &params, &ctx)?);
    Ok(steps)
}

/// The seam's renders, for the strictness and shellcheck tests.
pub fn renders() -> Vec<StepSpec> {
    render(Some(ROOT)).expect("the beeond step renders with a stand-in root")
}

#[test]
fn with_a_stand_in_root_the_beeond_scripts_run_its_tools_and_write_under_it() {
    let steps = renders();
    let script = |name: &str| {
        steps
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} rendered"))
            .script
            .clone()
    };
    let path = format!("export PATH={ROOT}/bin:\"$PATH\"\n");
    for name in [
        "beeond.install",
        "beeond.start",
        "beeond.health",
        "beeond.stop",
    ] {
        let text = script(name);
        // Before the check section, which already calls dpkg, modinfo or findmnt.
        let at = text.find(&path).unwrap_or_else(|| panic!("{name}: {text}"));
        assert!(
            at < text.find("dsinfra_done() {").expect("a check"),
            "{name}"
        );
    }
    let install = script("beeond.install");
    for written in [
        format!("{ROOT}/etc/apt/sources.list.d/beegfs.list"),
        // The key, where the list names it (else apt's trusted directory), under the root.
        format!("gpg --dearmor --yes -o \"{ROOT}${{keyring}}\""),
        format!("mkdir -p \"{ROOT}$(dirname \"$keyring\")\""),
        format!("autobuild={ROOT}/etc/beegfs/beegfs-client-autobuild.conf"),
        format!("{ROOT}/etc/init.d/beegfs-client rebuild"),
        format!("conf_dir='{ROOT}/etc/beegfs/beeond'"),
    ] {
        assert!(install.contains(&written), "{written}: {install}");
    }
    // The only system paths left are one it reads (the node's release) and the keyring's path
    // as apt names it, which is written under the root (above).
    let outside: Vec<&str> = install
        .lines()
        .filter(|l| l.contains(" /etc/") || l.contains("=/etc/"))
        .collect();
    assert_eq!(
        outside,
        [
            ". /etc/os-release",
            "  [ -n \"$keyring\" ] || keyring=/etc/apt/trusted.gpg.d/beegfs.gpg"
        ],
        "{install}"
    );
    let start = script("beeond.start");
    assert!(
        start.contains(&format!("-L {ROOT}/var/log/beeond")),
        "{start}"
    );
    // The mesh's remote commands (the mount count on every node) find the same tools.
    assert!(
        start.contains(&format!(
            "\"${{mesh_user}}@${{host}}\" \"PATH={ROOT}/bin:\\$PATH;\" \"$@\""
        )),
        "{start}"
    );
    let stop = script("beeond.stop");
    assert!(
        stop.contains(&format!("[ -e {ROOT}/var/tmp/beeond.tmp ]")),
        "{stop}"
    );

    // Unset, the scripts are the ones Azure gets: no trace of the seam.
    for step in render(None).expect("renders") {
        assert!(
            !step.script.contains("DSINFRA_BEEOND_ROOT"),
            "{}",
            step.name
        );
        assert!(!step.script.contains("export PATH="), "{}", step.name);
    }
}

#[test]
fn a_stand_in_root_must_be_a_plain_absolute_path() {
    for bad in [
        "relative/root",
        "/",
        "/tmp/a b",
        "/tmp/$(id)",
        "/tmp/../etc",
    ] {
        let err = render(Some(bad)).expect_err(bad).to_string();
        assert!(err.contains("the BeeOND root"), "{bad}: {err}");
    }
    // A trailing slash is the same root.
    let steps = render(Some("/tmp/root/")).expect("renders");
    assert!(steps[0].script.contains("export PATH=/tmp/root/bin:"));
}
