//! The embedded minijinja templates (templates/steps/*.sh.j2) and the filters they use.
//!
//! Templates are compiled into the binary with `include_str!`, so a released dsinfra needs no
//! files next to it. The environment is strict: an undefined variable is an error, never an
//! empty string that would turn `rm -rf "$dir/"` into something worse.

use std::sync::OnceLock;

use minijinja::{Environment, UndefinedBehavior, Value};

use crate::ssh::shell_quote;

/// Every template, by name.
const TEMPLATES: &[(&str, &str)] = &[
    (
        "_base.sh.j2",
        include_str!("../../../templates/steps/_base.sh.j2"),
    ),
    (
        "_lib.sh.j2",
        include_str!("../../../templates/steps/_lib.sh.j2"),
    ),
    (
        "_msprod.sh.j2",
        include_str!("../../../templates/steps/_msprod.sh.j2"),
    ),
    (
        "_mesh.sh.j2",
        include_str!("../../../templates/steps/_mesh.sh.j2"),
    ),
    (
        "_mesh_admin.sh.j2",
        include_str!("../../../templates/steps/_mesh_admin.sh.j2"),
    ),
    (
        "_beeond_root.sh.j2",
        include_str!("../../../templates/steps/_beeond_root.sh.j2"),
    ),
    (
        "_nodefile.sh.j2",
        include_str!("../../../templates/steps/_nodefile.sh.j2"),
    ),
    (
        "_mofed.sh.j2",
        include_str!("../../../templates/steps/_mofed.sh.j2"),
    ),
    (
        "_disk.sh.j2",
        include_str!("../../../templates/steps/_disk.sh.j2"),
    ),
    (
        "data_disk.sh.j2",
        include_str!("../../../templates/steps/data_disk.sh.j2"),
    ),
    (
        "nvme_temp.sh.j2",
        include_str!("../../../templates/steps/nvme_temp.sh.j2"),
    ),
    (
        "data_disk-release.sh.j2",
        include_str!("../../../templates/steps/data_disk-release.sh.j2"),
    ),
    (
        "mofed.sh.j2",
        include_str!("../../../templates/steps/mofed.sh.j2"),
    ),
    (
        "mofed-verify.sh.j2",
        include_str!("../../../templates/steps/mofed-verify.sh.j2"),
    ),
    (
        "blobfuse2.sh.j2",
        include_str!("../../../templates/steps/blobfuse2.sh.j2"),
    ),
    (
        "blobfuse.sh.j2",
        include_str!("../../../templates/steps/blobfuse.sh.j2"),
    ),
    (
        "azure_files.sh.j2",
        include_str!("../../../templates/steps/azure_files.sh.j2"),
    ),
    (
        "nfs_cache.sh.j2",
        include_str!("../../../templates/steps/nfs_cache.sh.j2"),
    ),
    (
        "head_key.sh.j2",
        include_str!("../../../templates/steps/head_key.sh.j2"),
    ),
    (
        "ssh_mesh-keys.sh.j2",
        include_str!("../../../templates/steps/ssh_mesh-keys.sh.j2"),
    ),
    (
        "ssh_mesh-nodefile.sh.j2",
        include_str!("../../../templates/steps/ssh_mesh-nodefile.sh.j2"),
    ),
    (
        "beeond-install.sh.j2",
        include_str!("../../../templates/steps/beeond-install.sh.j2"),
    ),
    (
        "beeond-start.sh.j2",
        include_str!("../../../templates/steps/beeond-start.sh.j2"),
    ),
    (
        "beeond-health.sh.j2",
        include_str!("../../../templates/steps/beeond-health.sh.j2"),
    ),
    (
        "beeond-stop.sh.j2",
        include_str!("../../../templates/steps/beeond-stop.sh.j2"),
    ),
    (
        "stage.sh.j2",
        include_str!("../../../templates/steps/stage.sh.j2"),
    ),
    (
        "elbencho-install.sh.j2",
        include_str!("../../../templates/steps/elbencho-install.sh.j2"),
    ),
    (
        "elbencho-service.sh.j2",
        include_str!("../../../templates/steps/elbencho-service.sh.j2"),
    ),
    (
        "elbencho-run.sh.j2",
        include_str!("../../../templates/steps/elbencho-run.sh.j2"),
    ),
    (
        "fio-install.sh.j2",
        include_str!("../../../templates/steps/fio-install.sh.j2"),
    ),
    (
        "storage_bench.sh.j2",
        include_str!("../../../templates/steps/storage_bench.sh.j2"),
    ),
    (
        "alluxio-install.sh.j2",
        include_str!("../../../templates/steps/alluxio-install.sh.j2"),
    ),
    (
        "alluxio-master.sh.j2",
        include_str!("../../../templates/steps/alluxio-master.sh.j2"),
    ),
    (
        "alluxio-worker.sh.j2",
        include_str!("../../../templates/steps/alluxio-worker.sh.j2"),
    ),
    (
        "idle-install.sh.j2",
        include_str!("../../../templates/steps/idle-install.sh.j2"),
    ),
    (
        "idle-watcher.sh.j2",
        include_str!("../../../templates/steps/idle-watcher.sh.j2"),
    ),
    (
        "idle-watcher.conf.j2",
        include_str!("../../../templates/steps/idle-watcher.conf.j2"),
    ),
    (
        "script.sh.j2",
        include_str!("../../../templates/steps/script.sh.j2"),
    ),
];

/// `value` as shell words: single-quoted, with each `{temp}` replaced by `"$T"` (the temp disk,
/// resolved on the node). `{temp}/beeond` becomes `"$T"'/beeond'`.
pub(super) fn shell_word(value: &str) -> String {
    if value.is_empty() {
        return "''".to_owned();
    }
    let mut out = String::new();
    for (i, part) in value.split("{temp}").enumerate() {
        if i > 0 {
            out.push_str("\"$T\"");
        }
        if !part.is_empty() {
            out.push_str(&shell_quote(part));
        }
    }
    out
}

fn sh_filter(value: &Value) -> String {
    match value.as_str() {
        Some(text) => shell_word(text),
        None => shell_word(&value.to_string()),
    }
}

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(true);
        env.add_filter("sh", sh_filter);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .unwrap_or_else(|e| panic!("embedded template {name} must parse: {e:#}"));
        }
        env
    })
}

/// Renders template `name` with `context`.
pub(super) fn render(name: &str, context: &serde_json::Value) -> Result<String, String> {
    let template = environment()
        .get_template(name)
        .map_err(|e| format!("template {name}: {e:#}"))?;
    template
        .render(Value::from_serialize(context))
        .map_err(|e| format!("template {name}: {e:#}"))
}

/// Whether template `name` defines its own "already done?" section. The others inherit the
/// base's `return 1` (never done), so running their check would only cost a round trip.
pub(super) fn has_check(name: &str) -> bool {
    TEMPLATES
        .iter()
        .any(|(n, source)| *n == name && source.contains("{% block check %}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_with_a_check_section_are_known() {
        assert!(has_check("mofed.sh.j2"));
        assert!(has_check("stage.sh.j2"));
        assert!(!has_check("script.sh.j2"));
        assert!(!has_check("mofed-verify.sh.j2"));
        assert!(!has_check("no-such-template.sh.j2"));
    }

    #[test]
    fn temp_placeholders_become_the_run_time_variable() {
        assert_eq!(shell_word("{temp}/beeond"), "\"$T\"'/beeond'");
        assert_eq!(shell_word("/mnt/blob"), "'/mnt/blob'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("{temp}"), "\"$T\"");
    }

    #[test]
    fn every_embedded_template_parses() {
        for (name, _) in TEMPLATES {
            assert!(environment().get_template(name).is_ok(), "{name}");
        }
    }
}
