//! What would run where, without running it: the dry run of a rendered step list, and the
//! "already done?" check of a step run on its own.

use std::fmt::Write as _;

use crate::steps::progress::{applies, barrier};
use crate::steps::spec::{FileContent, RunPolicy, Scope, StepSpec};

/// The exported parameter that makes a rendered script run only its "already done?" section
/// and print `dsinfra-check: done` or `dsinfra-check: not done`.
pub const CHECK_ONLY_PARAM: &str = "DSINFRA_CHECK_ONLY";

/// The line a rendered script prints in check-only mode when the node needs nothing.
const CHECK_DONE_LINE: &str = "dsinfra-check: done";

/// A step that runs only `step`'s "already done?" section, every time, changing nothing.
/// Its output line says whether the node needs the step. It has no runner check of its own: it
/// is one.
pub fn check_only(step: &StepSpec) -> StepSpec {
    let mut check = step.clone();
    check.name = format!("{}.check", step.name);
    check.policy = RunPolicy::Always;
    check.check = None;
    check
        .params
        .insert(CHECK_ONLY_PARAM.to_owned(), "1".to_owned());
    check
}

/// The runner check ([`StepSpec::check`]) of a rendered library script: it writes the script
/// into the wrapper's private directory (`$0` is the check's own file there), runs it in
/// check-only mode ([`CHECK_ONLY_PARAM`]) with stdin closed, and exits 0 only when the verdict
/// line says done. The script travels in a quoted here-document whose delimiter it does not
/// contain, so nothing in it is expanded; secrets stay in `$DSINFRA_SECRETS` as for the step.
pub fn check_command(script: &str) -> String {
    let mut delimiter = "DSINFRA_STEP_EOF".to_owned();
    let mut n = 0u32;
    while script.lines().any(|line| line.contains(&delimiter)) {
        n += 1;
        delimiter = format!("DSINFRA_STEP_EOF_{n}");
    }
    let mut out = String::with_capacity(script.len() + 512);
    out.push_str(
        "# dsinfra: the step's \"already done?\" section, run on its own before the step.\n\
         # Exit 0: done (the runner records the marker and skips the step); else the step runs.\n\
         dsinfra_step=\"$(dirname -- \"$0\")/step.sh\"\n",
    );
    let _ = writeln!(out, "cat > \"$dsinfra_step\" <<'{delimiter}'");
    out.push_str(script);
    if !script.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "{delimiter}");
    let _ = writeln!(
        out,
        "verdict=$({CHECK_ONLY_PARAM}=1 bash \"$dsinfra_step\" </dev/null) || exit 1\n\
         printf '%s\\n' \"$verdict\"\n\
         printf '%s\\n' \"$verdict\" | grep -qx '{CHECK_DONE_LINE}'"
    );
    out
}

/// The dry run: each step in order with the nodes it runs on, its policy and timeout, and the
/// barriers the runner will hold between them (a barrier sits where the scope changes).
pub fn dry_run(nodes: &[String], steps: &[StepSpec]) -> String {
    let scopes: Vec<Scope> = steps.iter().map(|s| s.scope).collect();
    let width = steps.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (i, step) in steps.iter().enumerate() {
        match barrier(&scopes, i) {
            Some(Scope::All) => {
                let _ = writeln!(
                    out,
                    "   -- barrier: waits until every node finished the steps above"
                );
            }
            Some(Scope::Head) => {
                let _ = writeln!(
                    out,
                    "   -- barrier: waits until the head finished the steps above"
                );
            }
            None => {}
        }
        let on: Vec<&str> = nodes
            .iter()
            .enumerate()
            .filter(|(index, _)| applies(step.scope, *index))
            .map(|(_, n)| n.as_str())
            .collect();
        let policy = match step.policy {
            RunPolicy::Once => "once",
            RunPolicy::PerBoot => "per boot",
            RunPolicy::Always => "always",
        };
        let timeout = step
            .timeout
            .map_or_else(|| "none".to_owned(), |t| format!("{}s", t.as_secs()));
        let secrets: Vec<&str> = step.secrets.iter().map(|s| s.name.as_str()).collect();
        let _ = write!(
            out,
            "{:>2}. {:<width$}  {:<8}  timeout {:<6}  on {}",
            i + 1,
            step.name,
            policy,
            timeout,
            on.join(", ")
        );
        if !secrets.is_empty() {
            let _ = write!(out, "  (secret files: {})", secrets.join(", "));
        }
        for file in &step.files {
            let each = match file.content {
                FileContent::Same(_) => "the same on every node",
                FileContent::ByRank(_) => "each node its own",
            };
            let _ = write!(out, "  (file {}: {each})", file.name);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_shows_barriers_where_the_scope_changes() {
        let mut install = StepSpec::new("b.install", "true");
        install.policy = RunPolicy::Once;
        let mut start = StepSpec::new("b.start", "true");
        start.scope = Scope::Head;
        start.policy = RunPolicy::PerBoot;
        let mut health = StepSpec::new("b.health", "true");
        health.files.push(crate::steps::spec::StepFile {
            name: "shard.tsv".into(),
            content: FileContent::ByRank(vec![String::new(); 2]),
        });
        let nodes = ["n0".to_owned(), "n1".to_owned()];
        assert_eq!(
            dry_run(&nodes, &[install, start, health]),
            " 1. b.install  once      timeout none    on n0, n1\n\
             \x20  -- barrier: waits until every node finished the steps above\n\
             \x202. b.start    per boot  timeout none    on n0\n\
             \x20  -- barrier: waits until the head finished the steps above\n\
             \x203. b.health   once      timeout none    on n0, n1  (file shard.tsv: each node its own)\n"
        );
    }

    #[test]
    fn the_check_command_carries_the_script_verbatim_under_a_free_delimiter() {
        let script = "set -euo pipefail\necho \"$HOME\" 'x'\n";
        let check = check_command(script);
        assert!(check.contains(&format!(
            "cat > \"$dsinfra_step\" <<'DSINFRA_STEP_EOF'\n{script}DSINFRA_STEP_EOF\n"
        )));
        assert!(check.ends_with(
            "verdict=$(DSINFRA_CHECK_ONLY=1 bash \"$dsinfra_step\" </dev/null) || exit 1\n\
             printf '%s\\n' \"$verdict\"\n\
             printf '%s\\n' \"$verdict\" | grep -qx 'dsinfra-check: done'\n"
        ));
        // A script containing the delimiter gets another one.
        let tricky = "echo DSINFRA_STEP_EOF\necho DSINFRA_STEP_EOF_1";
        let check = check_command(tricky);
        assert!(check.contains("<<'DSINFRA_STEP_EOF_2'\n"));
        assert!(check.contains(&format!("{tricky}\nDSINFRA_STEP_EOF_2\n")));
    }

    #[test]
    fn check_only_never_changes_the_original() {
        let mut step = StepSpec::new("mofed", "true");
        step.check = Some(check_command("true"));
        let check = check_only(&step);
        assert_eq!(check.check, None);
        assert_eq!(check.name, "mofed.check");
        assert_eq!(
            check.params.get(CHECK_ONLY_PARAM).map(String::as_str),
            Some("1")
        );
        assert!(step.params.is_empty());
        assert_ne!(check.hash(), step.hash());
    }
}
