//! Data: `storage_account` (with containers and file shares), `disk` and `sas` blocks.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use crate::addr::Address;
use crate::diag::Diagnostic;
use crate::model::{Attrs, ResourceKind};

use super::super::eval::EvalBlock;
use super::super::fields::Fields;
use super::super::names;
use super::super::validate::time;
use super::{Attachment, DiskMount, Expander, nfs_access};

const ACCOUNT_SKUS: [&str; 8] = [
    "Standard_LRS",
    "Standard_GRS",
    "Standard_RAGRS",
    "Standard_ZRS",
    "Standard_GZRS",
    "Standard_RAGZRS",
    "Premium_LRS",
    "Premium_ZRS",
];
const ACCOUNT_KINDS: [&str; 3] = ["StorageV2", "BlockBlobStorage", "FileStorage"];
const DISK_SKUS: [&str; 5] = [
    "Standard_LRS",
    "StandardSSD_LRS",
    "Premium_LRS",
    "StandardSSD_ZRS",
    "Premium_ZRS",
];
/// File systems a data disk's `mount` may format: what Ubuntu's images can make without extra
/// packages (ext4; xfs with xfsprogs, installed by the step when missing).
const DISK_FILESYSTEMS: [&str; 2] = ["ext4", "xfs"];
/// SAS permission letters (Azure Storage service SAS and account SAS).
const SAS_PERMISSIONS: &str = "racwdxltmeop";
/// The longest SAS lifetime dsinfra signs: a year. Longer-lived tokens are a standing risk.
const MAX_SAS_DAYS: i64 = 365;

// The account and its children are read and built together: child rules depend on the kind.
#[allow(clippy::too_many_lines)]
pub(super) fn expand_account(ex: &mut Expander<'_>, block: &EvalBlock) {
    let label = block.label().to_owned();
    let title = block.title();
    let lifecycle = ex.lifecycle(block);
    let id = ex.experiment.id.clone();
    let mut f = Fields::new(block, ex.diags);
    let mut user_named = false;
    let name = match f.string("name") {
        Some(n) => {
            user_named = true;
            if let Err(why) = names::check(ResourceKind::StorageAccount, &n.value) {
                f.report(
                    Diagnostic::error(format!("invalid storage account name `{}`", n.value))
                        .with_span(n.span.clone())
                        .with_label(why)
                        .with_help("storage account names are 3-24 lowercase letters and digits, unique across Azure; or leave `name` out to get a generated one"),
                );
            }
            n.value
        }
        None => names::storage_account_name(&id, &label),
    };
    let sku = f
        .string("sku")
        .filter(|s| f.one_of(s, "sku", &ACCOUNT_SKUS))
        .map_or_else(|| "Standard_LRS".to_owned(), |s| s.value);
    let kind_written = f.string("kind");
    let kind = kind_written
        .clone()
        .filter(|k| f.one_of(k, "kind", &ACCOUNT_KINDS))
        .map_or_else(|| "StorageV2".to_owned(), |k| k.value);
    let hns = f.bool_or("hns", false);
    if kind == "FileStorage" && !sku.starts_with("Premium") {
        f.report(
            Diagnostic::error(format!(
                "{title}: FileStorage accounts must use a Premium SKU"
            ))
            .with_span(f.span_of("kind"))
            .with_help("set `sku = \"Premium_LRS\"` (or Premium_ZRS)"),
        );
    }
    let account = Address::new("storage_account", &label, None, "account");
    let mut children = Vec::new();
    let mut nfs_protocol = None;
    for container in block.blocks_of("container") {
        if kind == "FileStorage" {
            f.report(
                Diagnostic::error(format!(
                    "{title} is a FileStorage account and cannot hold blob containers"
                ))
                .with_span(container.header.clone())
                .with_help("put containers in a StorageV2 account (the default `kind`)"),
            );
        }
        children.push((
            Address::new(
                "storage_account",
                &label,
                None,
                &format!("container.{}", container.label()),
            ),
            ResourceKind::BlobContainer,
            container.label().to_owned(),
            json!({"public_access": "None"}),
            container.header.clone(),
        ));
    }
    for share in block.blocks_of("file_share") {
        let mut sf = Fields::new(share, f.diags_mut());
        let quota = sf
            .integer_in("quota_gb", 1, 102_400, " GiB")
            .map_or(1024, |q| q.value);
        let protocol = sf.string("protocol");
        let protocol_ok = protocol
            .clone()
            .filter(|p| sf.one_of(p, "protocol", &["SMB", "NFS"]));
        let protocol_value = protocol_ok
            .as_ref()
            .map_or_else(|| "SMB".to_owned(), |p| p.value.clone());
        if protocol_value == "NFS" && kind != "FileStorage" {
            sf.report(
                Diagnostic::error(format!("NFS file shares need a premium FileStorage account ({title} is {kind})"))
                    .with_span(protocol_ok.as_ref().map_or_else(|| share.header.clone(), |p| p.span.clone()))
                    .with_help(format!("set `kind = \"FileStorage\"` and `sku = \"Premium_LRS\"` on {title}, or use protocol = \"SMB\"")),
            );
        }
        if protocol_value == "NFS" && kind == "FileStorage" && nfs_protocol.is_none() {
            nfs_protocol = protocol_ok.as_ref().map(|p| p.span.clone());
        }
        let address = Address::new(
            "storage_account",
            &label,
            None,
            &format!("file_share.{}", share.label()),
        );
        children.push((
            address,
            ResourceKind::FileShare,
            share.label().to_owned(),
            json!({"quota_gb": quota, "protocol": protocol_value}),
            share.header.clone(),
        ));
    }
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    attrs.insert("sku".into(), json!(sku));
    attrs.insert("kind".into(), json!(kind));
    attrs.insert("hns".into(), json!(hns));
    attrs.insert("https_only".into(), json!(true));
    attrs.insert("min_tls_version".into(), json!("TLS1_2"));
    attrs.insert("allow_blob_public_access".into(), json!(false));
    let mut deps = Vec::new();
    if let Some(span) = nfs_protocol
        && let Some((rules, vnets)) = nfs_access::nfs_account_access(ex, &title, &span)
    {
        attrs.insert("https_only".into(), json!(false));
        attrs.insert("network_rules".into(), rules);
        deps = vnets;
    }
    ex.push(
        account.clone(),
        ResourceKind::StorageAccount,
        name.clone(),
        None,
        attrs,
        deps,
        &lifecycle,
        Some(&block.header),
    );
    if user_named {
        ex.user_named.insert(account.clone());
    }
    for (address, kind, child_name, values, span) in children {
        let mut attrs = Attrs::new();
        if let serde_json::Value::Object(map) = values {
            for (k, v) in map {
                attrs.insert(k, v);
            }
        }
        if kind == ResourceKind::FileShare
            && let Some(protocol) = attrs.get("protocol").and_then(|p| p.as_str())
        {
            ex.share_protocols
                .insert(address.to_string(), protocol.to_owned());
        }
        ex.push(
            address,
            kind,
            child_name,
            Some(name.clone()),
            attrs,
            [account.clone()],
            &lifecycle,
            Some(&span),
        );
    }
    ex.set_primaries(block, vec![account]);
}

pub(super) fn expand_disk(ex: &mut Expander<'_>, block: &EvalBlock) {
    let label = block.label().to_owned();
    let lifecycle = ex.lifecycle(block);
    let id = ex.experiment.id.clone();
    let mut f = Fields::new(block, ex.diags);
    let size = f.integer_in("size_gb", 4, 32_767, " GiB");
    if size.is_none() {
        f.missing("size_gb", "512");
    }
    let sku_written = f.string("sku").filter(|s| f.one_of(s, "sku", &DISK_SKUS));
    let sku_span = sku_written.as_ref().map(|s| s.span.clone());
    let sku = sku_written.map_or_else(|| "StandardSSD_LRS".to_owned(), |s| s.value);
    let zone = f
        .string("zone")
        .filter(|z| f.one_of(z, "zone", &["1", "2", "3"]))
        .map(|z| z.value);
    let lun = f.integer_in("lun", 0, 63, "").map_or(0, |l| l.value);
    let is_vm = |a: &str| a.starts_with("vm.") && a.matches('.').count() == 1;
    let attach = if f.has("attach_to") {
        f.reference(
            "attach_to",
            "a vm (disks attach to one VM)",
            "vm.prep",
            &is_vm,
        )
    } else {
        None
    };
    let mount = read_mount(&mut f);
    let address = Address::new("disk", &label, None, "");
    if let Some(vm) = attach {
        ex.attachments
            .entry(vm.value)
            .or_default()
            .push(Attachment {
                lun,
                disk: address.clone(),
                span: vm.span,
                mount,
            });
    }
    let mut attrs = Attrs::new();
    attrs.insert("location".into(), ex.location());
    attrs.insert("size_gb".into(), json!(size.as_ref().map(|s| s.value)));
    attrs.insert("sku".into(), json!(sku));
    attrs.insert("zone".into(), json!(zone));
    ex.push(
        address.clone(),
        ResourceKind::ManagedDisk,
        names::compose(&id, &label, ""),
        None,
        attrs,
        [],
        &lifecycle,
        Some(&block.header),
    );
    if let Some(size) = size {
        // The plan refuses a shrink there (plan::shrink), so it must know where `size_gb` is.
        ex.locate(&address, "size_gb", size.span);
    }
    if let Some(span) = sku_span {
        // A new SKU on a disk whose VM runs is refused there (plan::disk_sku).
        ex.locate(&address, "sku", span);
    }
    ex.set_primaries(block, vec![address]);
}

/// `mount` (an absolute path) and `fs` (ext4 or xfs, default ext4) of a disk block. `fs` alone
/// means nothing, so it is refused rather than ignored.
fn read_mount(f: &mut Fields<'_>) -> Option<DiskMount> {
    let title = f.block().title();
    let fs = f
        .string("fs")
        .filter(|s| f.one_of(s, "fs", &DISK_FILESYSTEMS));
    let Some(mount) = f.string("mount") else {
        if let Some(fs) = fs {
            f.report(
                Diagnostic::error(format!("`fs` in {title} needs `mount`"))
                    .with_span(fs.span)
                    .with_label("nothing formats the disk without a mount point")
                    .with_help("add `mount = \"/data\"` (formatted only if the disk is blank), or remove `fs`"),
            );
        }
        return None;
    };
    // The root, /mnt (the temp disk on many images) and the system's own directories would be
    // hidden under the data disk, or the disk under them.
    let reserved = [
        "/",
        "/mnt",
        "/mnt/resource",
        "/boot",
        "/etc",
        "/usr",
        "/var",
        "/home",
        "/tmp",
    ];
    let path = mount.value.trim_end_matches('/');
    if !mount.value.starts_with('/') || mount.value.split('/').any(|c| c == "..") {
        f.report(
            Diagnostic::error(format!("`mount` in {title} must be an absolute path"))
                .with_span(mount.span)
                .with_label("not an absolute path on the VM")
                .with_help("write a path starting with `/`, without `..`, e.g. \"/data\""),
        );
        return None;
    }
    if reserved.contains(&if path.is_empty() { "/" } else { path }) {
        f.report(
            Diagnostic::error(format!("`mount` in {title} would cover `{}`", mount.value))
                .with_span(mount.span)
                .with_label("a system directory (or the temp disk's mount point)")
                .with_help("mount data disks on a directory of their own, e.g. \"/data\""),
        );
        return None;
    }
    Some(DiskMount {
        path: path.to_owned(),
        fs: fs.map_or_else(|| "ext4".to_owned(), |s| s.value),
        span: mount.span,
    })
}

pub(super) fn expand_sas(ex: &mut Expander<'_>, block: &EvalBlock) {
    expand_sas_at(ex, block, Utc::now());
}

// Scope, permissions and expiry are read and checked in order, then the SAS is built.
#[allow(clippy::too_many_lines)]
fn expand_sas_at(ex: &mut Expander<'_>, block: &EvalBlock, now: DateTime<Utc>) {
    let label = block.label().to_owned();
    let title = block.title();
    let mut f = Fields::new(block, ex.diags);
    let is_container = |a: &str| a.starts_with("storage_account.") && a.contains(".container.");
    let is_share = |a: &str| a.starts_with("storage_account.") && a.contains(".file_share.");
    let is_account = |a: &str| a.starts_with("storage_account.") && a.matches('.').count() == 1;
    let written: Vec<&str> = ["container", "share", "account"]
        .into_iter()
        .filter(|n| f.has(n))
        .collect();
    let target = match written.as_slice() {
        ["container"] => f.reference(
            "container",
            "a blob container",
            "storage_account.data.container.raw",
            &is_container,
        ),
        ["share"] => f.reference(
            "share",
            "a file share",
            "storage_account.data.file_share.scratch",
            &is_share,
        ),
        ["account"] => f.reference(
            "account",
            "a storage account",
            "storage_account.data",
            &is_account,
        ),
        [] => {
            f.report(
                Diagnostic::error(format!("{title} must say what it grants access to"))
                    .with_span(block.header.clone())
                    .with_help("add `container = storage_account.NAME.container.NAME` (or `share = ...`, `account = ...`)"),
            );
            None
        }
        _ => {
            f.report(
                Diagnostic::error(format!("{title} sets {} at once", written.join(" and ")))
                    .with_span(block.header.clone())
                    .with_help(
                        "a SAS is scoped to one container, one share or one account: keep one",
                    ),
            );
            None
        }
    };
    let permissions = f.string("permissions");
    let permissions = match permissions {
        None => Some("rl".to_owned()),
        Some(p) => {
            let bad = p.value.chars().find(|c| !SAS_PERMISSIONS.contains(*c));
            let repeated = p
                .value
                .chars()
                .enumerate()
                .any(|(i, c)| p.value[..i].contains(c));
            if p.value.is_empty() || bad.is_some() || repeated {
                let why = match bad {
                    Some(c) => format!("`{c}` is not a SAS permission"),
                    None if repeated => "a letter appears twice".to_owned(),
                    None => "no permission given".to_owned(),
                };
                f.report(
                    Diagnostic::error(format!("invalid `permissions` in {title}"))
                        .with_span(p.span)
                        .with_label(why)
                        .with_help("use letters from r(ead) a(dd) c(reate) w(rite) d(elete) l(ist), e.g. \"rl\" to read and list"),
                );
                None
            } else {
                Some(p.value)
            }
        }
    };
    let expiry = read_expiry(&mut f, &title, now);
    let https_only = f.bool_or("https_only", true);
    let Some(target) = target else {
        return;
    };
    let account_label = target
        .value
        .trim_start_matches("storage_account.")
        .split('.')
        .next()
        .unwrap_or_default()
        .to_owned();
    let account = Address::new("storage_account", &account_label, None, "account");
    let scope: Address = if is_account(&target.value) {
        account.clone()
    } else {
        target.value.parse().unwrap_or_else(|_| account.clone())
    };
    let account_name = ex
        .resources
        .iter()
        .find(|r| r.address == account)
        .map(|r| r.name.clone());
    let (Some(permissions), Some((expiry_key, expiry_value))) = (permissions, expiry) else {
        return;
    };
    let mut attrs = Attrs::new();
    attrs.insert("account".into(), json!(account.to_string()));
    attrs.insert("scope".into(), json!(scope.to_string()));
    attrs.insert("permissions".into(), json!(permissions));
    attrs.insert(expiry_key.into(), json!(expiry_value));
    attrs.insert("https_only".into(), json!(https_only));
    let address = Address::new("sas", &label, None, "");
    ex.sas_scopes
        .insert(format!("sas.{label}"), scope.to_string());
    let mut deps = vec![account.clone()];
    if scope != account {
        deps.push(scope);
    }
    ex.push(
        address.clone(),
        ResourceKind::Sas,
        label,
        account_name,
        attrs,
        deps,
        &crate::model::Lifecycle::default(),
        Some(&block.header),
    );
    ex.set_primaries(block, vec![address]);
}

/// `expires_in = "72h"` (relative to signing) or `expiry = "2026-01-02T03:04:05Z"`; default 24h.
fn read_expiry(
    f: &mut Fields<'_>,
    title: &str,
    now: DateTime<Utc>,
) -> Option<(&'static str, String)> {
    let relative = f.string("expires_in");
    let absolute = f.string("expiry");
    let max = Duration::days(MAX_SAS_DAYS);
    match (relative, absolute) {
        (Some(_), Some(a)) => {
            f.report(
                Diagnostic::error(format!("{title} sets both `expires_in` and `expiry`"))
                    .with_span(a.span)
                    .with_help("keep one: `expires_in = \"72h\"` (from signing) or `expiry = \"<RFC 3339 time>\"`"),
            );
            None
        }
        (Some(r), None) => match time::parse_duration(&r.value) {
            Err(why) => {
                f.report(
                    Diagnostic::error(format!("invalid `expires_in` in {title}"))
                        .with_span(r.span)
                        .with_label(why),
                );
                None
            }
            Ok(seconds) if seconds < 60 || seconds > max.num_seconds() => {
                f.report(
                    Diagnostic::error(format!("`expires_in` in {title} must be between 1 minute and {MAX_SAS_DAYS} days"))
                        .with_span(r.span)
                        .with_label(format!("`{}` is out of range", r.value))
                        .with_help("a SAS should live as long as the experiment needs it; dsinfra re-signs it before it expires"),
                );
                None
            }
            Ok(_) => Some(("expires_in", r.value)),
        },
        (None, Some(a)) => {
            match DateTime::parse_from_rfc3339(&a.value) {
                Err(_) => {
                    f.report(
                    Diagnostic::error(format!("invalid `expiry` in {title}"))
                        .with_span(a.span)
                        .with_label("not an RFC 3339 time")
                        .with_help("write e.g. \"2030-01-31T18:00:00Z\", or use `expires_in = \"72h\"`"),
                );
                    None
                }
                Ok(t) => {
                    let t = t.with_timezone(&Utc);
                    if t <= now {
                        f.report(
                            Diagnostic::error(format!("`expiry` of {title} is in the past"))
                                .with_span(a.span)
                                .with_label("this time has passed")
                                .with_help("choose a future time, or use `expires_in = \"72h\"`"),
                        );
                        None
                    } else if t - now > max {
                        f.report(
                        Diagnostic::error(format!("`expiry` of {title} is more than {MAX_SAS_DAYS} days away"))
                            .with_span(a.span)
                            .with_label("too far in the future")
                            .with_help("long-lived tokens are a standing risk; use a shorter expiry, dsinfra re-signs before it runs out"),
                    );
                        None
                    } else {
                        Some((
                            "expiry",
                            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        ))
                    }
                }
            }
        }
        (None, None) => Some(("expires_in", "24h".to_owned())),
    }
}
