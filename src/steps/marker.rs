//! Markers on the node and the pure decision "run this step or skip it, and why".
//!
//! After a step succeeds, the node keeps `<marker_dir>/<step>.marker` holding the step's content
//! hash and the boot id it ran in. Markers live on the node, not in dsinfra's state, so that a
//! node recreated from the same manifest (a new disk) runs its steps again while a re-apply
//! against the same node does not; they hold no secret, so they are world-readable and the
//! runner reads them without sudo.

use std::collections::BTreeMap;
use std::fmt;

use crate::ssh::shell_quote;

use super::spec::RunPolicy;

/// What a node remembers about one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The step's content hash when it last succeeded.
    pub hash: String,
    /// The boot id it succeeded in.
    pub boot_id: String,
}

/// A node's current boot and its step markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// The current boot id.
    pub boot_id: String,
    /// Markers by step name.
    pub markers: BTreeMap<String, Marker>,
}

/// Why a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunReason {
    /// Never ran on this node.
    New,
    /// Its content hash changed.
    Changed,
    /// A per-boot step, and the node rebooted since it ran.
    Rebooted,
    /// Its policy is `always`.
    Always,
    /// Asked for (`--rerun-step`).
    Forced,
}

/// Why a step is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Ran with the same content before.
    UpToDate,
    /// A per-boot step that already ran in this boot.
    DoneThisBoot,
    /// The markers said run, but the step's check found the work already done on the node
    /// (OFED preinstalled on an HPC image): the marker was written instead.
    AlreadyDone,
}

/// The decision for one step on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Run(RunReason),
    /// Skip it.
    Skip(SkipReason),
}

impl fmt::Display for RunReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::New => "new",
            Self::Changed => "changed",
            Self::Rebooted => "rebooted",
            Self::Always => "always",
            Self::Forced => "forced",
        })
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::UpToDate => "up to date",
            Self::DoneThisBoot => "done this boot",
            Self::AlreadyDone => "already done (check)",
        })
    }
}

/// What the caller knows about a step on a node that its marker cannot say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Known {
    /// Nothing: the marker decides.
    #[default]
    Nothing,
    /// The user asked for it to run again (`--rerun-step`).
    Forced,
    /// dsinfra restarted the node (deallocate, start) since the step last ran there: a per-boot
    /// step runs again even when the node's boot id cannot tell (emulated nodes share a kernel).
    Restarted,
}

/// Decides whether a step runs. Order of precedence: forced, new, changed, restarted (per-boot
/// steps), then the policy.
pub fn decide(
    policy: RunPolicy,
    marker: Option<&Marker>,
    hash: &str,
    boot_id: &str,
    known: Known,
) -> Decision {
    if known == Known::Forced {
        return Decision::Run(RunReason::Forced);
    }
    let Some(marker) = marker else {
        return Decision::Run(RunReason::New);
    };
    if marker.hash != hash {
        return Decision::Run(RunReason::Changed);
    }
    if known == Known::Restarted && policy == RunPolicy::PerBoot {
        return Decision::Run(RunReason::Rebooted);
    }
    match policy {
        RunPolicy::Always => Decision::Run(RunReason::Always),
        RunPolicy::PerBoot if marker.boot_id != boot_id => Decision::Run(RunReason::Rebooted),
        RunPolicy::PerBoot => Decision::Skip(SkipReason::DoneThisBoot),
        RunPolicy::Once => Decision::Skip(SkipReason::UpToDate),
    }
}

/// The command printing the boot id, then one `<file>\t<hash> <boot id>` line per marker.
///
/// Only shell builtins (`read`, `printf`, `[`): it runs on every node before any step, and at
/// 32 nodes sharing two cores a `cat` and a `$(head ...)` per marker were a measurable part of
/// the fan-out's time (docs/benchmarks.md). It runs in the login shell, so it is POSIX `sh`.
pub(crate) fn read_state_command(marker_dir: &str, boot_id_path: &str) -> String {
    format!(
        "{read_boot} && printf '%s\\n' \"$b\" && for f in {dir}/*.marker; do [ -f \"$f\" ] \
         && {{ IFS= read -r l || [ -n \"$l\" ]; }} < \"$f\" && printf '%s\\t%s\\n' \"${{f##*/}}\" \"$l\"; \
         done; true",
        read_boot = read_first_line("b", boot_id_path),
        dir = shell_quote(marker_dir),
    )
}

/// Shell code reading the first line of `path` into `var` without a process (`read`, not
/// `$(cat ...)`); a last line without its newline still counts. Fails when `path` cannot be read.
fn read_first_line(var: &str, path: &str) -> String {
    format!(
        "{{ IFS= read -r {var} || [ -n \"${var}\" ]; }} < {path}",
        path = shell_quote(path)
    )
}

/// Parses [`read_state_command`]'s output; malformed marker lines count as absent markers.
pub(crate) fn parse_state(output: &str) -> Option<NodeState> {
    let mut lines = output.lines();
    let boot_id = lines.next()?.trim().to_owned();
    if boot_id.is_empty() {
        return None;
    }
    let markers = lines
        .filter_map(|line| {
            let (file, content) = line.split_once('\t')?;
            let step = file.strip_suffix(".marker")?;
            let (hash, boot) = content.trim().split_once(' ')?;
            Some((
                step.to_owned(),
                Marker {
                    hash: hash.to_owned(),
                    boot_id: boot.to_owned(),
                },
            ))
        })
        .collect();
    Some(NodeState { boot_id, markers })
}

/// Shell code that records a marker (atomically) when `$rc` is 0 or 100 (reboot requested).
/// The boot id is read on the node at that moment, so a marker always names the boot it ran in.
pub(crate) fn write_marker_epilogue(
    marker_dir: &str,
    step: &str,
    hash: &str,
    boot_id_path: &str,
) -> String {
    marker_epilogue(
        &format!("[ \"$rc\" = 0 ] || [ \"$rc\" = {REBOOT_EXIT} ]"),
        marker_dir,
        step,
        hash,
        boot_id_path,
    )
}

/// Shell code that records a marker after a step's check when `$rc` is 0 (already done), in
/// the same remote shell, so a skipped step costs no extra round trip. If the marker cannot be
/// written `$rc` becomes 1 and the step runs, whose own marker write then reports the problem.
pub(crate) fn check_marker_epilogue(
    marker_dir: &str,
    step: &str,
    hash: &str,
    boot_id_path: &str,
) -> String {
    marker_epilogue("[ \"$rc\" = 0 ]", marker_dir, step, hash, boot_id_path)
}

fn marker_epilogue(
    condition: &str,
    marker_dir: &str,
    step: &str,
    hash: &str,
    boot_id_path: &str,
) -> String {
    let dir = shell_quote(marker_dir);
    let file = shell_quote(&format!("{marker_dir}/{step}.marker"));
    // Builtins where a process is not needed (see `read_state_command`): the directory is made
    // only when missing, the boot id is read with `read`.
    format!(
        "if {condition}; then \
         {{ [ -d {dir} ] || mkdir -p -- {dir}; }} && chmod 755 -- {dir} && {read_boot} && \
         printf '%s %s\\n' {hash} \"$dsinfra_boot\" > {file}.tmp && mv -f -- {file}.tmp {file} \
         || {{ echo 'dsinfra: cannot write the step marker' >&2; rc=1; }}; fi",
        hash = shell_quote(hash),
        read_boot = read_first_line("dsinfra_boot", boot_id_path),
    )
}

/// The exit status by which a step asks for a reboot before the next step.
pub const REBOOT_EXIT: u32 = 100;

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(hash: &str, boot: &str) -> Marker {
        Marker {
            hash: hash.into(),
            boot_id: boot.into(),
        }
    }

    #[test]
    fn decisions_for_every_policy() {
        use Decision::{Run, Skip};
        let m = marker("h1", "b1");
        assert_eq!(
            decide(RunPolicy::Once, None, "h1", "b1", Known::Nothing),
            Run(RunReason::New)
        );
        assert_eq!(
            decide(RunPolicy::Once, Some(&m), "h2", "b1", Known::Nothing),
            Run(RunReason::Changed)
        );
        assert_eq!(
            decide(RunPolicy::Once, Some(&m), "h1", "b2", Known::Nothing),
            Skip(SkipReason::UpToDate)
        );
        assert_eq!(
            decide(RunPolicy::Once, Some(&m), "h1", "b1", Known::Forced),
            Run(RunReason::Forced)
        );
        assert_eq!(
            decide(RunPolicy::PerBoot, Some(&m), "h1", "b1", Known::Nothing),
            Skip(SkipReason::DoneThisBoot)
        );
        assert_eq!(
            decide(RunPolicy::PerBoot, Some(&m), "h1", "b2", Known::Nothing),
            Run(RunReason::Rebooted)
        );
        assert_eq!(
            decide(RunPolicy::Always, Some(&m), "h1", "b1", Known::Nothing),
            Run(RunReason::Always)
        );
        assert_eq!(
            decide(RunPolicy::Always, None, "h1", "b1", Known::Nothing),
            Run(RunReason::New)
        );
        // Restarted by dsinfra: per-boot steps run again on the same boot id; others do not,
        // and a changed step says so first.
        assert_eq!(
            decide(RunPolicy::PerBoot, Some(&m), "h1", "b1", Known::Restarted),
            Run(RunReason::Rebooted)
        );
        assert_eq!(
            decide(RunPolicy::Once, Some(&m), "h1", "b1", Known::Restarted),
            Skip(SkipReason::UpToDate)
        );
        assert_eq!(
            decide(RunPolicy::PerBoot, Some(&m), "h2", "b1", Known::Restarted),
            Run(RunReason::Changed)
        );
    }

    #[test]
    fn state_parses_boot_id_and_markers_and_ignores_junk() {
        let state = parse_state(
            "b-1\nmofed.marker\tabc b-0\nblob.marker\tdef b-1\nnot-a-marker\tx y\nbroken.marker\t\n",
        )
        .expect("boot id present");
        assert_eq!(state.boot_id, "b-1");
        assert_eq!(
            state.markers,
            BTreeMap::from([
                ("blob".to_owned(), marker("def", "b-1")),
                ("mofed".to_owned(), marker("abc", "b-0")),
            ])
        );
        assert_eq!(parse_state(""), None);
    }

    #[test]
    fn a_check_records_its_marker_only_when_it_says_done() {
        let step = write_marker_epilogue("/m", "s", "h", "/b");
        let check = check_marker_epilogue("/m", "s", "h", "/b");
        assert!(step.starts_with("if [ \"$rc\" = 0 ] || [ \"$rc\" = 100 ]; then { [ -d '/m' ]"));
        assert!(check.starts_with("if [ \"$rc\" = 0 ]; then { [ -d '/m' ]"));
        // Both write the same marker; only the condition differs.
        assert_eq!(
            step.split_once("; then").map(|(_, rest)| rest),
            check.split_once("; then").map(|(_, rest)| rest)
        );
    }

    /// Runs `script` in `shell` and returns its stdout and exit status.
    fn run_in(shell: &str, script: &str) -> (String, bool) {
        let out = std::process::Command::new(shell)
            .args(["-c", script])
            .output()
            .expect("the shell runs");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.success(),
        )
    }

    /// The state command (POSIX `sh`, as the login shell may be dash) and the marker epilogue
    /// (`bash -s` under `set -u`) run for real: a boot id file without its final newline, a
    /// marker written by the epilogue, a marker without a newline, and a missing boot id file.
    #[test]
    fn state_command_and_epilogue_run_in_the_shells_they_are_sent_to() {
        let dir = tempfile::tempdir().expect("temp dir");
        let markers = dir.path().join("markers");
        let boot = dir.path().join("boot_id");
        std::fs::write(&boot, "b-7").expect("boot id");
        let (markers, boot) = (
            markers.to_str().expect("UTF-8 temp path"),
            boot.to_str().expect("UTF-8 temp path"),
        );

        let (out, ok) = run_in("sh", &read_state_command(markers, boot));
        assert!(ok);
        assert_eq!(parse_state(&out).expect("boot id").boot_id, "b-7");

        let epilogue = write_marker_epilogue(markers, "mofed", "h1", boot);
        let (_, ok) = run_in("bash", &format!("set -u\nrc=0\n{epilogue}\nexit \"$rc\"\n"));
        assert!(ok);
        std::fs::write(format!("{markers}/blob.marker"), "h2 b-6").expect("marker");
        let (out, _) = run_in("sh", &read_state_command(markers, boot));
        assert_eq!(
            parse_state(&out).expect("boot id").markers,
            BTreeMap::from([
                ("blob".to_owned(), marker("h2", "b-6")),
                ("mofed".to_owned(), marker("h1", "b-7")),
            ])
        );

        // No boot id: no state (the runner reports the file), and no marker is written.
        let missing = format!("{boot}.missing");
        let (out, ok) = run_in("sh", &read_state_command(markers, &missing));
        assert!(!ok || parse_state(&out).is_none());
        let epilogue = write_marker_epilogue(markers, "other", "h3", &missing);
        let (_, ok) = run_in("bash", &format!("set -u\nrc=0\n{epilogue}\nexit \"$rc\"\n"));
        assert!(!ok);
        assert!(!std::path::Path::new(&format!("{markers}/other.marker")).exists());
    }

    #[test]
    fn reasons_read_as_in_the_plan() {
        assert_eq!(RunReason::Rebooted.to_string(), "rebooted");
        assert_eq!(SkipReason::DoneThisBoot.to_string(), "done this boot");
        assert_eq!(SkipReason::AlreadyDone.to_string(), "already done (check)");
    }
}
