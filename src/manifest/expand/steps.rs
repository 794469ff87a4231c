//! `step` blocks inside `vm` and `cluster`: checked against the table in `step_kinds.rs` and
//! turned into [`Step`]s with every default filled in, so the plan shows exactly what will run.
//! References to storage and SAS blocks stay addresses: a step never holds a secret.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value as Json, json};

use crate::addr::Address;
use crate::catalog::{self, VmSize};
use crate::diag::{Diagnostic, Span, did_you_mean};
use crate::model::{RunPolicy, Step, StepScope};

use super::super::decode::{self, BlockAttrs, Choices, Located, OneOf, Ref, Unknown};
use super::super::eval::EvalBlock;
use super::super::step_kinds::{self, COMMON, Def, Kind, Ty};
use super::super::validate::time;
use super::Expander;
use super::check::Check;
use super::{step_lists, targets};

/// The attributes every step takes (its kind's own parameters are read from the kind's table,
/// one by one, in [`read_params`]).
#[derive(Deserialize, Default)]
struct StepAttrs {
    name: Option<String>,
    run: Option<RunPolicy>,
    scope: Option<StepScope>,
    timeout: Option<Located<String>>,
}

impl BlockAttrs for StepAttrs {}

/// The NFS versions `nfs_cache` mounts with.
struct NfsVersion;

impl Choices for NfsVersion {
    const ALLOWED: &'static [&'static str] = &step_kinds::NFS_VERSIONS;
}

/// What the steps of one `vm` or `cluster` block are checked against.
struct Owner<'a> {
    address: Address,
    block: &'a EvalBlock,
    is_cluster: bool,
    infiniband: bool,
    size: Option<&'a Located<String>>,
    /// The sizes this block may get that have no temp disk.
    diskless: Vec<VmSize>,
}

pub(super) fn expand(
    ex: &mut Expander<'_>,
    block: &EvalBlock,
    is_cluster: bool,
    infiniband: bool,
    size: Option<&Located<String>>,
) {
    let address = Address::block(&block.ident, block.label());
    let candidates = candidate_sizes(ex, &address, size);
    let owner = Owner {
        diskless: sizes_without_temp_disk(&candidates),
        address,
        block,
        is_cluster,
        infiniband,
        size,
    };
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    if all_nvme_only(&candidates) {
        names.insert(NVME_TEMP_KIND.to_owned(), 0);
        ex.steps.push(nvme_temp_step(&owner.address, size));
    }
    for generated in data_disk_steps(ex, &owner.address) {
        names.insert(generated.name.clone(), 0);
        ex.steps.push(generated);
    }
    for step in block.blocks_of("step") {
        let Some(kind) = step_kinds::kind(step.label()) else {
            ex.diags.push(unknown_kind(block, step));
            continue;
        };
        let Some(built) = read_step(ex, &owner, step, kind) else {
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

fn unknown_kind(block: &EvalBlock, step: &EvalBlock) -> Diagnostic {
    let d = Diagnostic::error(format!(
        "unknown step kind `{}` in {}",
        step.label(),
        block.title()
    ))
    .with_span(step.label_span())
    .with_label("not a built-in step");
    match did_you_mean(step.label(), step_kinds::names()) {
        Some(s) => d.with_help(format!("did you mean `{s}`?")),
        None => d.with_help(format!(
            "built-in steps: {}; or write your own with step \"script\"",
            step_kinds::names().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Step kinds that download x86_64 builds (the MLNX_OFED tarball, elbencho's static release):
/// on an Arm64 size they would fail on the node after a long boot (issue 29, item 10).
const X86_64_ONLY_STEPS: [&str; 2] = ["mofed", "elbencho"];

/// An x86_64-only step on an Arm64 size: an error at the step.
fn check_architecture(
    ex: &mut Expander<'_>,
    owner: &Owner<'_>,
    step: &EvalBlock,
    kind: &Kind,
    title: &str,
) -> bool {
    // The catalog's architecture; the name's own statement for a size it does not know.
    let Some(size) = owner.size.filter(|s| {
        ex.catalog
            .vm_size(&s.value)
            .map_or_else(|| catalog::is_arm64_name(&s.value), VmSize::arm64)
    }) else {
        return true;
    };
    if !X86_64_ONLY_STEPS.contains(&kind.name) {
        return true;
    }
    ex.diags.push(
        Diagnostic::error(format!("{title} cannot run on an Arm64 size"))
            .with_span(step.header.clone())
            .with_label(format!(
                "it installs an x86_64 build, and {} has an Arm64 processor",
                size.value
            ))
            .with_help("use an x64 size (no `p` among the letters after the vCPU count, e.g. Standard_D4s_v5), or remove this step"),
    );
    false
}

/// One step: its common attributes, its kind's parameters, then the rules that involve several
/// parameters or other blocks. `None` when anything was reported.
fn read_step(
    ex: &mut Expander<'_>,
    owner: &Owner<'_>,
    step: &EvalBlock,
    kind: &Kind,
) -> Option<Step> {
    let title = format!("step \"{}\" of {}", kind.name, owner.block.title());
    let allowed: Vec<&str> = COMMON
        .iter()
        .copied()
        .chain(kind.params.iter().map(|p| p.name))
        .collect();
    let unknown = Unknown::Param {
        kind: kind.name,
        allowed: &allowed,
    };
    let attrs: StepAttrs = decode::decode(step, unknown, ex.diags).unwrap_or_default();
    let mut ok = step
        .attrs
        .iter()
        .all(|a| allowed.contains(&a.name.as_str()));
    ok &= check_placement(ex, owner, step, kind, &title);
    ok &= check_architecture(ex, owner, step, kind, &title);
    let sas_scopes = ex.sas_scopes.clone();
    let share_protocols = ex.share_protocols.clone();
    let base_dir = ex.base_dir.clone();
    let mut check = Check::new(step, ex.diags);
    // A value that is text but not one of the choices was reported by the decoder; the step
    // is not built then (a value of the wrong type falls back to the kind's default, as before).
    ok &= !rejected_choice(step, "run", attrs.run.is_some());
    ok &= !rejected_choice(step, "scope", attrs.scope.is_some());
    let timeout = attrs
        .timeout
        .map_or_else(|| kind.timeout.to_owned(), |t| t.value);
    if let Err(why) = time::parse_duration(&timeout) {
        check.report(
            Diagnostic::error(format!("invalid `timeout` in {title}"))
                .with_span(check.span_of("timeout"))
                .with_label(why),
        );
        ok = false;
    }
    let (mut params, spans, params_ok) = read_params(&mut check, kind, &title);
    ok &= params_ok;
    params.insert("timeout".into(), json!(timeout));
    let rules = KindRules {
        title: &title,
        base_dir: &base_dir,
        share_protocols: &share_protocols,
        infiniband: owner.infiniband,
    };
    ok &= rules.check(&mut check, kind, &mut params);
    ok &= check_temp_disk(&mut check, &title, kind, &params, &owner.diskless);
    ok &= check_sas_scope(&mut check, &params, &spans, &sas_scopes);
    if !ok {
        return None;
    }
    Some(Step {
        block: owner.address.clone(),
        name: attrs.name.unwrap_or_else(|| kind.name.to_owned()),
        kind: kind.name.to_owned(),
        scope: attrs.scope.unwrap_or(kind.scope),
        run: attrs.run.unwrap_or(kind.run),
        params,
        span: Some(step.header.clone()),
    })
}

/// Whether `name` was written as text (or a number) the decoder refused as none of its choices.
fn rejected_choice(step: &EvalBlock, name: &str, decoded: bool) -> bool {
    !decoded
        && step
            .attr(name)
            .and_then(|a| a.value.as_ref())
            .is_some_and(|v| v.is_string() || v.is_number())
}

/// Where the step is: no nested blocks, a cluster for a cluster-only kind; and a warning for
/// MOFED on a size without InfiniBand. Returns false when it reported an error.
fn check_placement(
    ex: &mut Expander<'_>,
    owner: &Owner<'_>,
    step: &EvalBlock,
    kind: &Kind,
    title: &str,
) -> bool {
    let mut ok = true;
    for nested in &step.blocks {
        ex.diags.push(
            Diagnostic::error(format!("unexpected block `{}` in {title}", nested.ident))
                .with_span(nested.header.clone())
                .with_help("steps take only parameters (`name = value`)"),
        );
        ok = false;
    }
    if kind.cluster_only && !owner.is_cluster {
        ex.diags.push(
            Diagnostic::error(format!("step \"{}\" needs a cluster", kind.name))
                .with_span(step.label_span())
                .with_label(format!("{} is a single VM", owner.block.title()))
                .with_help("move it into a `cluster` block, or remove it"),
        );
        ok = false;
    }
    if kind.name == "mofed"
        && !owner.infiniband
        && let Some(size) = owner.size
    {
        ex.diags.push(
                Diagnostic::warning(format!("step \"mofed\" on {}, which has no InfiniBand", size.value))
                    .with_span(step.label_span())
                    .with_label("MOFED drivers will have no device to drive")
                    .with_help("remove the step, or use an InfiniBand size (ND40rs_v2, ND96asr_v4, HB120rs_v3, ...)"),
            );
    }
    ok
}

/// The kind's parameters from its table: each written one decoded by its type, each other one
/// its default (or reported missing). Returns them, where each written one is, and whether all
/// were fine.
fn read_params(
    check: &mut Check<'_>,
    kind: &Kind,
    title: &str,
) -> (BTreeMap<String, Json>, BTreeMap<&'static str, Span>, bool) {
    let mut ok = true;
    let mut params: BTreeMap<String, Json> = BTreeMap::new();
    let mut spans = BTreeMap::new();
    for param in kind.params {
        let span = check.span_of(param.name);
        let value = if check.has(param.name) {
            let v = read_param(check, param.name, param.ty);
            ok &= v.is_some();
            v
        } else {
            match param.default {
                Def::Required => {
                    check.report(
                        Diagnostic::error(format!("{title} is missing `{}`", param.name))
                            .with_span(check.block().label_span())
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
    (params, spans, ok)
}

/// The rules of particular kinds: `script` reads its file, `nfs_cache` needs an NFS share and
/// NFS 4.1 for one, `beeond` picks its interface.
struct KindRules<'a> {
    title: &'a str,
    base_dir: &'a std::path::Path,
    share_protocols: &'a BTreeMap<String, String>,
    infiniband: bool,
}

impl KindRules<'_> {
    /// Check `kind`'s rules, filling in what they derive. Returns false when it reported.
    fn check(
        &self,
        check: &mut Check<'_>,
        kind: &Kind,
        params: &mut BTreeMap<String, Json>,
    ) -> bool {
        match kind.name {
            "script" => self.script(check, params),
            "nfs_cache" => self.nfs_cache(check, params),
            "elbencho" => {
                at_most_one(check, self.title, "block_size", "block_sizes")
                    & at_most_one(check, self.title, "file_size", "file_sizes")
            }
            "beeond" if !params.contains_key("interface") => {
                params.insert(
                    "interface".into(),
                    json!(if self.infiniband { "ib0" } else { "eth0" }),
                );
                true
            }
            _ => true,
        }
    }

    fn script(&self, check: &mut Check<'_>, params: &mut BTreeMap<String, Json>) -> bool {
        let mut ok = exactly_one(check, self.title, "script", "file");
        if let Some(file) = text(params, "file") {
            let path = if std::path::Path::new(&file).is_absolute() {
                std::path::PathBuf::from(&file)
            } else {
                self.base_dir.join(&file)
            };
            if let Ok(content) = std::fs::read_to_string(&path) {
                params.insert("script".into(), json!(content));
            } else {
                check.report(
                    Diagnostic::error(format!("cannot read script file `{file}`"))
                        .with_span(check.span_of("file"))
                        .with_label(format!("looked for {}", path.display()))
                        .with_help("paths are relative to the manifest's directory"),
                );
                ok = false;
            }
        }
        ok
    }

    fn nfs_cache(&self, check: &mut Check<'_>, params: &BTreeMap<String, Json>) -> bool {
        let title = self.title;
        let mut ok = exactly_one(check, title, "share", "export");
        if let Some(share) = text(params, "share")
            && self.share_protocols.get(&share).is_some_and(|p| p != "NFS")
        {
            check.report(
                    Diagnostic::error(format!("{title} needs an NFS share"))
                        .with_span(check.span_of("share"))
                        .with_label(format!("{share} uses SMB"))
                        .with_help("set `protocol = \"NFS\"` on the share, or mount it with step \"azure_files\""),
                );
            ok = false;
        }
        // `version` was read as text with the other parameters; here it must be a version.
        let block = check.block();
        let version = decode::attr::<OneOf<NfsVersion>>(block, "version", check.diags_mut());
        match version {
            None if check.has("version") => ok = false,
            Some(version) if text(params, "share").is_some() && version.value != "4.1" => {
                check.report(
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
            _ => {}
        }
        ok
    }
}

/// A parameter's text value, if set.
fn text(params: &BTreeMap<String, Json>, key: &str) -> Option<String> {
    params.get(key).and_then(Json::as_str).map(str::to_owned)
}

/// Exactly one of `a` and `b` must be written. Returns false when it reported.
fn exactly_one(check: &mut Check<'_>, title: &str, a: &str, b: &str) -> bool {
    let (has_a, has_b) = (check.has(a), check.has(b));
    if has_a != has_b {
        return true;
    }
    check.report(
        Diagnostic::error(format!("{title} needs exactly one of `{a}` and `{b}`"))
            .with_span(check.block().label_span())
            .with_help(if has_a {
                format!("set `{a}` or `{b}`, not both")
            } else {
                format!("add `{a} = ...` or `{b} = ...`")
            }),
    );
    false
}

/// At most one of `a` (one value) and `b` (its list) may be written. Returns false when it
/// reported.
fn at_most_one(check: &mut Check<'_>, title: &str, a: &str, b: &str) -> bool {
    if !(check.has(a) && check.has(b)) {
        return true;
    }
    check.report(
        Diagnostic::error(format!("{title} sets both `{a}` and `{b}`"))
            .with_span(check.span_of(b))
            .with_label(format!("`{b}` is the list form of `{a}`"))
            .with_help(format!(
                "keep one: `{b} = [...]` sweeps, `{a} = \"...\"` is one point"
            )),
    );
    false
}

/// A step that uses a SAS for a container (or `from`) must use one scoped to that container or
/// its account. Returns false when it reported.
fn check_sas_scope(
    check: &mut Check<'_>,
    params: &BTreeMap<String, Json>,
    spans: &BTreeMap<&'static str, Span>,
    sas_scopes: &BTreeMap<String, String>,
) -> bool {
    let Some(sas) = text(params, "sas") else {
        return true;
    };
    let target = text(params, "container").or_else(|| text(params, "from"));
    let (Some(target), Some(scope)) = (target, sas_scopes.get(&sas)) else {
        return true;
    };
    let account_of = |a: &str| {
        let label = a.split('.').nth(1).unwrap_or_default().to_owned();
        format!("storage_account.{label}.account")
    };
    if scope == &target || scope == &account_of(&target) {
        return true;
    }
    let header = check.block().header.clone();
    check.report(
        Diagnostic::error(format!("{sas} does not grant access to {target}"))
            .with_span(spans.get("sas").cloned().unwrap_or(header))
            .with_label(format!("it is scoped to {scope}"))
            .with_help("use a SAS scoped to this container or to its account"),
    );
    false
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

/// The sizes this block may get: its `size`, or every candidate of `sizes = [...]` (the plan
/// picks one by quota, so each must work).
fn candidate_sizes(
    ex: &Expander<'_>,
    owner: &Address,
    size: Option<&Located<String>>,
) -> Vec<VmSize> {
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
        .filter_map(|n| ex.catalog.vm_size(n).cloned())
        .collect()
}

/// Whether every size the block may get has NVMe local storage and no temp disk: then a
/// generated per-boot step mounts the NVMe as the temp disk (`nvme_temp`).
fn all_nvme_only(sizes: &[VmSize]) -> bool {
    !sizes.is_empty() && sizes.iter().all(VmSize::nvme_only)
}

/// The sizes this block may get that have no temp disk, counting NVMe-only sizes as having one
/// when every size the block may get is one (the `nvme_temp` step mounts it).
fn sizes_without_temp_disk(sizes: &[VmSize]) -> Vec<VmSize> {
    let nvme_mounted = all_nvme_only(sizes);
    sizes
        .iter()
        .filter(|s| s.temp_disk_gib == Some(0) && !(nvme_mounted && s.nvme_only()))
        .cloned()
        .collect()
}

/// The step that mounts the block's local NVMe as its temp disk, on every boot, first of the
/// block's steps.
fn nvme_temp_step(owner: &Address, size: Option<&Located<String>>) -> Step {
    Step {
        block: owner.clone(),
        name: NVME_TEMP_KIND.to_owned(),
        kind: NVME_TEMP_KIND.to_owned(),
        scope: StepScope::All,
        // Azure wipes local NVMe when the VM is deallocated, and mounts nothing at boot.
        run: RunPolicy::PerBoot,
        params: BTreeMap::from([("timeout".to_owned(), json!("10m"))]),
        span: size.map(|s| s.span.clone()),
    }
}

/// The generated step kind that mounts NVMe local storage as the temp disk.
pub(in crate::manifest) const NVME_TEMP_KIND: &str = "nvme_temp";

/// A step whose directory is on the temp disk (`{temp}/...`, by default or as written) cannot
/// work on a size without one: the node has no such disk to resolve `{temp}` to, and the step
/// would fail at run time, after the VMs are paid for. Returns false when it reported that.
fn check_temp_disk(
    check: &mut Check<'_>,
    title: &str,
    kind: &Kind,
    params: &BTreeMap<String, Json>,
    diskless: &[VmSize],
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
        let written = check.has(param.name);
        let names: Vec<&str> = diskless.iter().map(|s| &*s.name).collect();
        let sizes = names.join(", ");
        let has = if names.len() == 1 { "has" } else { "have" };
        let siblings: Vec<&str> = diskless
            .iter()
            .filter_map(catalog::with_temp_disk)
            .map(|s| &*s.name)
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
        // The v6 and newer `d` sizes: local storage, but raw NVMe disks that nothing mounts.
        let nvme: Vec<&VmSize> = diskless.iter().filter(|s| s.nvme_only()).collect();
        let (has, size_fix) = if nvme.len() == diskless.len() {
            let capacity = nvme
                .iter()
                .map(|s| {
                    s.nvme_gib
                        .map_or_else(|| "?".to_owned(), |g| format!("{g} GiB"))
                })
                .collect::<Vec<_>>()
                .join(", ");
            let scsi: Vec<&str> = nvme
                .iter()
                .filter_map(|s| catalog::with_scsi_temp_disk(s))
                .map(|s| &*s.name)
                .collect();
            (
                format!(
                    "{has} none: {} local storage is raw NVMe ({capacity}), which dsinfra mounts as the temp disk only when every size the block may get has it",
                    if names.len() == 1 { "its" } else { "their" }
                ),
                if scsi.len() == nvme.len() {
                    format!(
                        "use sizes of one kind: all with NVMe, or {} (the v5 size of the same shape, with a mounted temp disk) instead",
                        scsi.join(", ")
                    )
                } else {
                    size_fix
                },
            )
        } else {
            (format!("{has} none"), size_fix)
        };
        let diagnostic = Diagnostic::error(format!(
            "{title} keeps `{}` on the temp disk, but {sizes} {has}",
            param.name
        ));
        let diagnostic = if written {
            diagnostic
                .with_span(check.span_of(param.name))
                .with_label("`{temp}` has nothing to resolve to on this size")
        } else {
            diagnostic
                .with_span(check.block().label_span())
                .with_label(format!("`{}` defaults to \"{path}\"", param.name))
        };
        check.report(diagnostic.with_help(format!(
            "{size_fix}, or set `{}` to a directory on the OS or a data disk, e.g. \"{example}\"",
            param.name
        )));
        ok = false;
    }
    ok
}

fn read_param(check: &mut Check<'_>, name: &str, ty: Ty) -> Option<Json> {
    let block = check.block();
    let title = block.title();
    let diags = check.diags_mut();
    match ty {
        Ty::Text => decode::attr::<String>(block, name, diags).map(|s| json!(s)),
        Ty::Int => {
            let n = decode::attr::<Located<i64>>(block, name, diags)?;
            if n.value < 0 {
                check.report(
                    Diagnostic::error(format!("`{name}` in {title} must not be negative"))
                        .with_span(n.span)
                        .with_label(format!("this is {}", n.value)),
                );
                return None;
            }
            Some(json!(n.value))
        }
        Ty::Bool => decode::attr::<bool>(block, name, diags).map(|b| json!(b)),
        Ty::Path => {
            let p = decode::attr::<Located<String>>(block, name, diags)?;
            if p.value.starts_with('/') && !p.value.contains("..") {
                Some(json!(p.value))
            } else {
                check.report(
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
        Ty::Container => address::<targets::Container>(block, name, diags),
        Ty::Share => address::<targets::Share>(block, name, diags),
        Ty::Sas => address::<targets::Sas>(block, name, diags),
        Ty::Account => address::<targets::Account>(block, name, diags),
        Ty::PathList => read_paths(check, name, &title),
        Ty::Counts => step_lists::read_counts(check, name, &title),
        Ty::Size => step_lists::read_size(check, name, &title),
        Ty::Sizes => step_lists::read_sizes(check, name, &title),
        Ty::Dirs => step_lists::read_dirs(check, name, &title),
        Ty::TextMap => {
            decode::attr::<BTreeMap<String, String>>(block, name, diags).map(|m| json!(m))
        }
    }
}

/// A reference parameter, as the address it refers to.
fn address<T: decode::Target>(
    block: &EvalBlock,
    name: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<Json> {
    decode::attr::<Ref<T>>(block, name, diags).map(|r| json!(r.address))
}

/// A list of absolute paths of files on the node, each with a file name (it names the local
/// copy), no `..`, and no two with the same file name (their copies would collide).
fn read_paths(check: &mut Check<'_>, name: &str, title: &str) -> Option<Json> {
    let block = check.block();
    let list = decode::attr::<Located<Vec<String>>>(block, name, check.diags_mut())?;
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
            check.report(
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
