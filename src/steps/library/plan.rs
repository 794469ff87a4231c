//! What would run where, without running it: the dry run of a rendered step list, and the
//! "already done?" check of a step run on its own.

use std::fmt::Write as _;

use crate::steps::progress::{applies, barrier};
use crate::steps::spec::{RunPolicy, Scope, StepSpec};

/// The exported parameter that makes a rendered script run only its "already done?" section
/// and print `dsinfra-check: done` or `dsinfra-check: not done`.
pub const CHECK_ONLY_PARAM: &str = "DSINFRA_CHECK_ONLY";

/// A step that runs only `step`'s "already done?" section, every time, changing nothing.
/// Its output line says whether the node needs the step.
pub fn check_only(step: &StepSpec) -> StepSpec {
    let mut check = step.clone();
    check.name = format!("{}.check", step.name);
    check.policy = RunPolicy::Always;
    check
        .params
        .insert(CHECK_ONLY_PARAM.to_owned(), "1".to_owned());
    check
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
        let health = StepSpec::new("b.health", "true");
        let nodes = ["n0".to_owned(), "n1".to_owned()];
        assert_eq!(
            dry_run(&nodes, &[install, start, health]),
            " 1. b.install  once      timeout none    on n0, n1\n\
             \x20  -- barrier: waits until every node finished the steps above\n\
             \x202. b.start    per boot  timeout none    on n0\n\
             \x20  -- barrier: waits until the head finished the steps above\n\
             \x203. b.health   once      timeout none    on n0, n1\n"
        );
    }

    #[test]
    fn check_only_never_changes_the_original() {
        let step = StepSpec::new("mofed", "true");
        let check = check_only(&step);
        assert_eq!(check.name, "mofed.check");
        assert_eq!(
            check.params.get(CHECK_ONLY_PARAM).map(String::as_str),
            Some("1")
        );
        assert!(step.params.is_empty());
        assert_ne!(check.hash(), step.hash());
    }
}
