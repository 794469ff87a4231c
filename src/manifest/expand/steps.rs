//! `step` blocks inside `vm` and `cluster`: checked against the table in `step_kinds.rs` and
//! turned into [`Step`]s with every default filled in, so the plan shows exactly what will run.
//! References to storage and SAS blocks stay addresses: a step never holds a secret.

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use crate::addr::Address;
use crate::catalog::{self, VmSize};
use crate::diag::{Diagnostic, did_you_mean};
use crate::model::{RunPolicy, Step, StepScope};

use super::super::eval::EvalBlock;
use super::super::fields::{Fields, Located};
use super::super::step_kinds::{self, COMMON, Def, Kind, Ty};
use super::super::validate::time;
use super::Expander;

pub(super) fn expand(
    ex: &mut Expander<'_>,
    block: &EvalBlock,
    is_cluster: bool,
    infiniband: bool,
    size: Option<&Located<String>>,
) {
    let owner = Address::block(&block.ident, block.label());
    let diskless = sizes_without_temp_disk(ex, &owner, size);
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for generated in data_disk_steps(ex, &owner) {
        names.insert(generated.name.clone(), 0);
        ex.steps.push(generated);
    }
    for step in block.blocks_of("step") {
        let Some(kind) = step_kinds::kind(step.label()) else {
            let d = Diagnostic::error(format!(
                "unknown step kind `{}` in {}",
                step.label(),
                block.title()
            ))
            .with_span(step.label_span())
            .with_label("not a built-in step");
            ex.diags
                .push(match did_you_mean(step.label(), step_kinds::names()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(format!(
                        "built-in steps: {}; or write your own with step \"script\"",
                        step_kinds::names().collect::<Vec<_>>().join(", ")
                    )),
                });
            continue;
        };
        let Some(built) = read_step(
            ex,
            &owner,
            block,
            step,
            kind,
            (is_cluster, infiniband, &diskless),
            size,
        ) else {
            continue;
        };
        let line = step.header.start;
        if names.insert(built.name.clone(), line).is_some() {
            ex.diags.push(
                Diagnostic::error(format!(
                    "two steps named `{}` in {}",
                    built.name,
                    block.title()
                ))
                .with_span(step.header.clone())
                .with_help("give one of them a different `name = \"...\"`"),
            );
            continue;
        }
        ex.steps.push(built);
    }
}

// One step's checks read as a list: common attributes, parameters, then cross-parameter rules.
#[allow(clippy::too_many_arguments, clippy::too_many_lines)]
fn read_step(
    ex: &mut Expander<'_>,
    owner: &Address,
    block: &EvalBlock,
    step: &EvalBlock,
    kind: &Kind,
    (is_cluster, infiniband, diskless): (bool, bool, &[&'static VmSize]),
    size: Option<&Located<String>>,
) -> Option<Step> {
    let title = format!("step \"{}\" of {}", kind.name, block.title());
    let mut ok = true;
    let allowed: Vec<&str> = COMMON
        .iter()
        .copied()
        .chain(kind.params.iter().map(|p| p.name))
        .collect();
    for attr in &step.attrs {
        if !allowed.contains(&attr.name.as_str()) {
            let d = Diagnostic::error(format!(
                "unknown parameter `{}` for step \"{}\"",
                attr.name, kind.name
            ))
            .with_span(attr.key_span.clone())
            .with_label(format!("`{}` does not take this", kind.name));
            ex.diags
                .push(match did_you_mean(&attr.name, allowed.iter().copied()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(format!("`{}` takes: {}", kind.name, allowed.join(", "))),
                });
            ok = false;
        }
    }
    for nested in &step.blocks {
        ex.diags.push(
            Diagnostic::error(format!("unexpected block `{}` in {title}", nested.ident))
                .with_span(nested.header.clone())
                .with_help("steps take only parameters (`name = value`)"),
        );
        ok = false;
    }
    if kind.cluster_only && !is_cluster {
        ex.diags.push(
            Diagnostic::error(format!("step \"{}\" needs a cluster", kind.name))
                .with_span(step.label_span())
                .with_label(format!("{} is a single VM", block.title()))
                .with_help("move it into a `cluster` block, or remove it"),
        );
        ok = false;
    }
    if kind.name == "mofed"
        && !infiniband
        && let Some(size) = size
    {
        ex.diags.push(
                Diagnostic::warning(format!("step \"mofed\" on {}, which has no InfiniBand", size.value))
                    .with_span(step.label_span())
                    .with_label("MOFED drivers will have no device to drive")
                    .with_help("remove the step, or use an InfiniBand size (ND40rs_v2, ND96asr_v4, HB120rs_v3, ...)"),
            );
    }

    let sas_scopes = ex.sas_scopes.clone();
    let share_protocols = ex.share_protocols.clone();
    let base_dir = ex.base_dir.clone();
    let mut f = Fields::new(step, ex.diags);
    let name = f
        .string("name")
        .map_or_else(|| kind.name.to_owned(), |n| n.value);
    let run = match f.string("run") {
        None => kind.run,
        Some(r) => match r.value.as_str() {
            "once" => RunPolicy::Once,
            "per_boot" => RunPolicy::PerBoot,
            "always" => RunPolicy::Always,
            _ => {
                f.one_of(&r, "run", &["once", "per_boot", "always"]);
                ok = false;
                kind.run
            }
        },
    };
    let scope = match f.string("scope") {
        None => kind.scope,
        Some(s) => match s.value.as_str() {
            "all" => StepScope::All,
            "head" => StepScope::Head,
            _ => {
                f.one_of(&s, "scope", &["all", "head"]);
                ok = false;
                kind.scope
            }
        },
    };
    let mut params: BTreeMap<String, Json> = BTreeMap::new();
    let timeout = f
        .string("timeout")
        .map_or_else(|| kind.timeout.to_owned(), |t| t.value.clone());
    if let Err(why) = time::parse_duration(&timeout) {
        f.report(
            Diagnostic::error(format!("invalid `timeout` in {title}"))
                .with_span(f.span_of("timeout"))
                .with_label(why),
        );
        ok = false;
    }
    params.insert("timeout".into(), json!(timeout));

    let mut spans = BTreeMap::new();
    for param in kind.params {
        let span = f.span_of(param.name);
        let value = if f.has(param.name) {
            let v = read_param(&mut f, param.name, param.ty);
            if v.is_none() {
                ok = false;
            }
            v
        } else {
            match param.default {
                Def::Required => {
                    f.report(
                        Diagnostic::error(format!("{title} is missing `{}`", param.name))
                            .with_span(step.label_span())
                            .with_help(format!("add `{}`: {}", param.name, param.help)),
                    );
                    ok = false;
                    None
                }
                Def::Unset => None,
                Def::Text(t) => Some(json!(t)),
                Def::Int(i) => Some(json!(i)),
                Def::Bool(b) => Some(json!(b)),
            }
        };
        if let Some(value) = value {
            spans.insert(param.name, span);
            params.insert(param.name.to_owned(), value);
        }
    }

    // Rules that involve several parameters or other blocks.
    let text = |params: &BTreeMap<String, Json>, key: &str| {
        params.get(key).and_then(Json::as_str).map(str::to_owned)
    };
    let exactly_one = |f: &mut Fields<'_>, a: &str, b: &str| {
        let (has_a, has_b) = (f.has(a), f.has(b));
        if has_a == has_b {
            f.report(
                Diagnostic::error(format!("{title} needs exactly one of `{a}` and `{b}`"))
                    .with_span(step.label_span())
                    .with_help(if has_a {
                        format!("set `{a}` or `{b}`, not both")
                    } else {
                        format!("add `{a} = ...` or `{b} = ...`")
                    }),
            );
            false
        } else {
            true
        }
    };
    match kind.name {
        "script" => {
            ok &= exactly_one(&mut f, "script", "file");
            if let Some(file) = text(&params, "file") {
                let path = if std::path::Path::new(&file).is_absolute() {
                    std::path::PathBuf::from(&file)
                } else {
                    base_dir.join(&file)
                };
                if let Ok(content) = std::fs::read_to_string(&path) {
                    params.insert("script".into(), json!(content));
                } else {
                    f.report(
                        Diagnostic::error(format!("cannot read script file `{file}`"))
                            .with_span(f.span_of("file"))
                            .with_label(format!("looked for {}", path.display()))
                            .with_help("paths are relative to the manifest's directory"),
                    );
                    ok = false;
                }
            }
        }
        "nfs_cache" => {
            ok &= exactly_one(&mut f, "share", "export");
            if let Some(share) = text(&params, "share")
                && share_protocols.get(&share).is_some_and(|p| p != "NFS")
            {
                f.report(
                        Diagnostic::error(format!("{title} needs an NFS share"))
                            .with_span(f.span_of("share"))
                            .with_label(format!("{share} uses SMB"))
                            .with_help("set `protocol = \"NFS\"` on the share, or mount it with step \"azure_files\""),
                    );
                ok = false;
            }
            if let Some(version) = f.string("version") {
                if !f.one_of(&version, "version", &step_kinds::NFS_VERSIONS) {
                    ok = false;
                } else if text(&params, "share").is_some() && version.value != "4.1" {
                    f.report(
                        Diagnostic::error(format!(
                            "{title} mounts an Azure Files share with NFS {}",
                            version.value
                        ))
                        .with_span(version.span.clone())
                        .with_label("Azure Files NFS shares speak NFS 4.1 only")
                        .with_help("remove `version` (a share is mounted with 4.1), or set `version = \"4.1\"`"),
                    );
                    ok = false;
                }
            }
        }
        "beeond" if !params.contains_key("interface") => {
            params.insert(
                "interface".into(),
                json!(if infiniband { "ib0" } else { "eth0" }),
            );
        }
        _ => {}
    }
    ok &= check_temp_disk(&mut f, &title, kind, &params, diskless);
    if let Some(sas) = text(&params, "sas") {
        let target = text(&params, "container").or_else(|| text(&params, "from"));
        if let (Some(target), Some(scope)) = (target, sas_scopes.get(&sas)) {
            let account_of = |a: &str| {
                let label = a.split('.').nth(1).unwrap_or_default().to_owned();
                format!("storage_account.{label}.account")
            };
            if scope != &target && scope != &account_of(&target) {
                f.report(
                    Diagnostic::error(format!("{sas} does not grant access to {target}"))
                        .with_span(
                            spans
                                .get("sas")
                                .cloned()
                                .unwrap_or_else(|| step.header.clone()),
                        )
                        .with_label(format!("it is scoped to {scope}"))
                        .with_help("use a SAS scoped to this container or to its account"),
                );
                ok = false;
            }
        }
    }
    if !ok {
        return None;
    }
    Some(Step {
        block: owner.clone(),
        name,
        kind: kind.name.to_owned(),
        scope,
        run,
        params,
        span: Some(step.header.clone()),
    })
}

/// The kind of the step generated for a data disk with `mount`; not a kind a manifest can write
/// (the `disk` block says what to mount, the VM it is attached to runs it).
pub(in crate::manifest) const DATA_DISK_KIND: &str = "data_disk";

/// One generated step per data disk attached to this VM with a `mount`, named `disk-<label>`:
/// format the disk if it is blank, mount it, keep it in fstab. They come before the VM's own
/// steps, which may use the mounted disk.
fn data_disk_steps(ex: &Expander<'_>, owner: &Address) -> Vec<Step> {
    let Some(attachments) = ex.attachments.get(&owner.to_string()) else {
        return Vec::new();
    };
    attachments
        .iter()
        .filter_map(|a| {
            let mount = a.mount.as_ref()?;
            let params = BTreeMap::from([
                ("disk".to_owned(), json!(a.disk.to_string())),
                ("lun".to_owned(), json!(a.lun)),
                ("mount".to_owned(), json!(mount.path)),
                ("fs".to_owned(), json!(mount.fs)),
                ("timeout".to_owned(), json!("10m")),
            ]);
            Some(Step {
                block: owner.clone(),
                name: crate::model::data_disk_step_name(&a.disk.name),
                kind: DATA_DISK_KIND.to_owned(),
                scope: StepScope::All,
                // Per boot: the fstab line mounts it at boot already, and the re-run after a
                // start checks that it did (a `nofail` mount that failed is silent otherwise).
                run: RunPolicy::PerBoot,
                params,
                span: Some(mount.span.clone()),
            })
        })
        .collect()
}

/// The sizes this block may get that have no temp disk: its `size`, or every candidate of
/// `sizes = [...]` (the plan picks one by quota, so each must work).
fn sizes_without_temp_disk(
    ex: &Expander<'_>,
    owner: &Address,
    size: Option<&Located<String>>,
) -> Vec<&'static VmSize> {
    let fallbacks: Vec<String> = ex
        .primaries
        .get(&owner.to_string())
        .and_then(|vms| vms.first())
        .and_then(|vm| ex.resources.iter().find(|r| &r.address == vm))
        .and_then(|vm| vm.attrs.get("sizes"))
        .and_then(|sizes| serde_json::from_value(sizes.clone()).ok())
        .unwrap_or_default();
    let names = if fallbacks.is_empty() {
        size.map(|s| vec![s.value.clone()]).unwrap_or_default()
    } else {
        fallbacks
    };
    names
        .iter()
        .filter_map(|n| catalog::vm_size(n))
        .filter(|s| s.temp_disk_gib == Some(0))
        .collect()
}

/// A step whose directory is on the temp disk (`{temp}/...`, by default or as written) cannot
/// work on a size without one: the node has no such disk to resolve `{temp}` to, and the step
/// would fail at run time, after the VMs are paid for. Returns false when it reported that.
fn check_temp_disk(
    f: &mut Fields<'_>,
    title: &str,
    kind: &Kind,
    params: &BTreeMap<String, Json>,
    diskless: &[&'static VmSize],
) -> bool {
    // A script's text is the user's own; `{temp}` means nothing there.
    if diskless.is_empty() || kind.name == "script" {
        return true;
    }
    let mut ok = true;
    for param in kind.params.iter().filter(|p| p.ty == Ty::Text) {
        let Some(path) = params.get(param.name).and_then(Json::as_str) else {
            continue;
        };
        let Some(rest) = path.strip_prefix("{temp}") else {
            continue;
        };
        let written = f.has(param.name);
        let names: Vec<&str> = diskless.iter().map(|s| s.name).collect();
        let sizes = names.join(", ");
        let has = if names.len() == 1 { "has" } else { "have" };
        let siblings: Vec<&str> = diskless
            .iter()
            .filter_map(|s| catalog::with_temp_disk(s))
            .map(|s| s.name)
            .collect();
        let size_fix = if siblings.len() == diskless.len() {
            format!(
                "use a size with a temp disk: {} (the same size with a local disk)",
                siblings.join(", ")
            )
        } else {
            "use a size with a temp disk (a `d` size such as Standard_D4ds_v5)".to_owned()
        };
        let example = format!("/data{}", if rest.is_empty() { "/" } else { rest });
        let diagnostic = Diagnostic::error(format!(
            "{title} keeps `{}` on the temp disk, but {sizes} {has} none",
            param.name
        ));
        let diagnostic = if written {
            diagnostic
                .with_span(f.span_of(param.name))
                .with_label("`{temp}` has nothing to resolve to on this size")
        } else {
            diagnostic
                .with_span(f.block().label_span())
                .with_label(format!("`{}` defaults to \"{path}\"", param.name))
        };
        f.report(diagnostic.with_help(format!(
            "{size_fix}, or set `{}` to a directory on the OS or a data disk, e.g. \"{example}\"",
            param.name
        )));
        ok = false;
    }
    ok
}

fn read_param(f: &mut Fields<'_>, name: &str, ty: Ty) -> Option<Json> {
    let title = f.block().title();
    match ty {
        Ty::Text => f.string(name).map(|s| json!(s.value)),
        Ty::Int => {
            let n = f.integer(name)?;
            if n.value < 0 {
                f.report(
                    Diagnostic::error(format!("`{name}` in {title} must not be negative"))
                        .with_span(n.span)
                        .with_label(format!("this is {}", n.value)),
                );
                return None;
            }
            Some(json!(n.value))
        }
        Ty::Bool => f.bool(name).map(|b| json!(b.value)),
        Ty::Path => {
            let p = f.string(name)?;
            if p.value.starts_with('/') && !p.value.contains("..") {
                Some(json!(p.value))
            } else {
                f.report(
                    Diagnostic::error(format!("`{name}` in {title} must be an absolute path"))
                        .with_span(p.span)
                        .with_label("not an absolute path on the node")
                        .with_help(
                            "write a path starting with `/`, without `..`, e.g. \"/mnt/data\"",
                        ),
                );
                None
            }
        }
        Ty::Container => f
            .reference(
                name,
                "a blob container",
                "storage_account.data.container.raw",
                &|a: &str| a.starts_with("storage_account.") && a.contains(".container."),
            )
            .map(|r| json!(r.value)),
        Ty::Share => f
            .reference(
                name,
                "a file share",
                "storage_account.data.file_share.scratch",
                &|a: &str| a.starts_with("storage_account.") && a.contains(".file_share."),
            )
            .map(|r| json!(r.value)),
        Ty::Sas => f
            .reference(name, "a sas block", "sas.read", &|a: &str| {
                a.starts_with("sas.")
            })
            .map(|r| json!(r.value)),
        Ty::Account => f
            .reference(
                name,
                "a storage account",
                "storage_account.data",
                &|a: &str| {
                    a.strip_prefix("storage_account.")
                        .is_some_and(|label| !label.is_empty() && !label.contains('.'))
                },
            )
            .map(|r| json!(r.value)),
        Ty::PathList => read_paths(f, name, &title),
        Ty::TextMap => f
            .string_map(name)
            .map(|m| json!(m.value.into_iter().collect::<BTreeMap<_, _>>())),
    }
}

/// A list of absolute paths of files on the node, each with a file name (it names the local
/// copy), no `..`, and no two with the same file name (their copies would collide).
fn read_paths(f: &mut Fields<'_>, name: &str, title: &str) -> Option<Json> {
    let list = f.strings(name)?;
    let mut names = std::collections::BTreeSet::new();
    for path in &list.value {
        let file_name = path.rsplit('/').next().unwrap_or_default();
        let why = if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
            Some(format!("{path:?} is not an absolute path without `..`"))
        } else if file_name.is_empty() || file_name == "." {
            Some(format!("{path:?} does not name a file"))
        } else if !names.insert(file_name) {
            Some(format!("two paths end in the file name {file_name:?}"))
        } else {
            None
        };
        if let Some(why) = why {
            f.report(
                Diagnostic::error(format!("`{name}` in {title} must list files on the node"))
                    .with_span(list.span.clone())
                    .with_label(why)
                    .with_help(
                        "write absolute paths with distinct file names, e.g. [\"/data/results.csv\"]",
                    ),
            );
            return None;
        }
    }
    Some(json!(list.value))
}
