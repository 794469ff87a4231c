//! Data: `storage_account` (with containers and file shares), `disk` and `sas` blocks.

use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use serde_json::{Value as Json, json};

use crate::addr::Address;
use crate::diag::{Diagnostic, Span};
use crate::model::{Attrs, Lifecycle, ResourceKind};

use super::super::decode::{self, BlockAttrs, Choices, Located, OneOf, Ref, Target, Unknown};
use super::super::eval::EvalBlock;
use super::super::names;
use super::super::validate::time;
use super::check::Check;
use super::targets::{self, DiskSku, SasAccount as SasAccountTarget, Zone};
use super::{Attachment, DiskMount, Expander, Origin, nfs_access};

/// A storage account's SKU.
struct AccountSku;

impl Choices for AccountSku {
    const ALLOWED: &'static [&'static str] = &[
        "Standard_LRS",
        "Standard_GRS",
        "Standard_RAGRS",
        "Standard_ZRS",
        "Standard_GZRS",
        "Standard_RAGZRS",
        "Premium_LRS",
        "Premium_ZRS",
    ];
}

/// A storage account's kind.
struct AccountKind;

impl Choices for AccountKind {
    const ALLOWED: &'static [&'static str] = &["StorageV2", "BlockBlobStorage", "FileStorage"];
}

/// A file share's protocol.
struct Protocol;

impl Choices for Protocol {
    const ALLOWED: &'static [&'static str] = &["SMB", "NFS"];
}

/// File systems a data disk's `mount` may format: what Ubuntu's images can make without extra
/// packages (ext4; xfs with xfsprogs, installed by the step when missing).
struct DiskFilesystem;

impl Choices for DiskFilesystem {
    const ALLOWED: &'static [&'static str] = &["ext4", "xfs"];
}

/// A `storage_account` block's attributes.
#[derive(Deserialize, Default)]
struct AccountAttrs {
    name: Option<Located<String>>,
    sku: Option<OneOf<AccountSku>>,
    kind: Option<OneOf<AccountKind>>,
    hns: Option<bool>,
}

impl BlockAttrs for AccountAttrs {}

/// A `file_share` block's attributes.
#[derive(Deserialize, Default)]
struct ShareAttrs {
    quota_gb: Option<Located<i64>>,
    protocol: Option<OneOf<Protocol>>,
}

impl BlockAttrs for ShareAttrs {}

/// A `disk` block's attributes.
#[derive(Deserialize, Default)]
struct DiskAttrs {
    size_gb: Option<Located<i64>>,
    sku: Option<OneOf<DiskSku>>,
    zone: Option<OneOf<Zone>>,
    lun: Option<Located<i64>>,
    attach_to: Option<Located<Ref<targets::Vm>>>,
    mount: Option<Located<String>>,
    fs: Option<OneOf<DiskFilesystem>>,
}

impl BlockAttrs for DiskAttrs {
    const REQUIRED: &'static [(&'static str, &'static str)] = &[("size_gb", "512")];
}

/// A `sas` block's attributes. Its scope (`container`, `share` or `account`) is read apart, as a
/// reference only once exactly one is written.
#[derive(Deserialize, Default)]
struct SasAttrs {
    permissions: Option<Located<String>>,
    expires_in: Option<Located<String>>,
    expiry: Option<Located<String>>,
    https_only: Option<bool>,
}

impl BlockAttrs for SasAttrs {}

/// SAS permission letters (Azure Storage service SAS and account SAS).
const SAS_PERMISSIONS: &str = "racwdxltmeop";
/// The longest SAS lifetime dsinfra signs: a year. Longer-lived tokens are a standing risk.
const MAX_SAS_DAYS: i64 = 365;

/// A child of a storage account: its address, kind, name, attributes and span.
type Child = (Address, ResourceKind, String, Json, Span);

pub(super) fn expand_account(ex: &mut Expander<'_>, block: &EvalBlock) {
    let label = block.label().to_owned();
    let lifecycle = ex.lifecycle(block);
    let id = ex.experiment.id.clone();
    let attrs: AccountAttrs = decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let mut check = Check::new(block, ex.diags);
    let user_named = attrs.name.is_some();
    let name = match attrs.name {
        Some(n) => {
            if let Err(why) = names::check(ResourceKind::StorageAccount, &n.value) {
                check.report(
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
    let sku = attrs
        .sku
        .map_or_else(|| "Standard_LRS".to_owned(), |s| s.value);
    let kind = attrs
        .kind
        .map_or_else(|| "StorageV2".to_owned(), |k| k.value);
    if kind == "FileStorage" && !sku.starts_with("Premium") {
        check.report(
            Diagnostic::error(format!(
                "{}: FileStorage accounts must use a Premium SKU",
                check.title()
            ))
            .with_span(check.span_of("kind"))
            .with_help("set `sku = \"Premium_LRS\"` (or Premium_ZRS)"),
        );
    }
    let mut children = containers(&mut check, &kind);
    let (shares, nfs_protocol) = shares(&mut check, &kind);
    children.extend(shares);
    let mut values = account_values(ex.location(), &sku, &kind, attrs.hns.unwrap_or(false));
    let mut deps = Vec::new();
    if let Some(span) = nfs_protocol
        && let Some((rules, vnets)) = nfs_access::nfs_account_access(ex, &block.title(), &span)
    {
        values.insert("https_only".into(), json!(false));
        values.insert("network_rules".into(), rules);
        deps = vnets;
    }
    let account = Address::new("storage_account", &label, None, "account");
    ex.push(
        account.clone(),
        ResourceKind::StorageAccount,
        name.clone(),
        values,
        deps,
        Origin {
            parent: None,
            lifecycle: &lifecycle,
            span: Some(&block.header),
        },
    );
    if user_named {
        ex.user_named.insert(account.clone());
    }
    push_children(ex, &account, &name, children, &lifecycle);
    ex.set_primaries(block, vec![account]);
}

/// A storage account's attributes (an `aml_workspace`'s account is built the same way).
pub(super) fn account_values(location: Json, sku: &str, kind: &str, hns: bool) -> Attrs {
    let mut values = Attrs::new();
    values.insert("location".into(), location);
    values.insert("sku".into(), json!(sku));
    values.insert("kind".into(), json!(kind));
    values.insert("hns".into(), json!(hns));
    values.insert("https_only".into(), json!(true));
    values.insert("min_tls_version".into(), json!("TLS1_2"));
    values.insert("allow_blob_public_access".into(), json!(false));
    values
}

/// The account's blob containers (none in a FileStorage account).
fn containers(check: &mut Check<'_>, kind: &str) -> Vec<Child> {
    let block = check.block();
    let label = block.label();
    let mut children = Vec::new();
    for container in block.blocks_of("container") {
        if kind == "FileStorage" {
            check.report(
                Diagnostic::error(format!(
                    "{} is a FileStorage account and cannot hold blob containers",
                    block.title()
                ))
                .with_span(container.header.clone())
                .with_help("put containers in a StorageV2 account (the default `kind`)"),
            );
        }
        children.push((
            Address::new(
                "storage_account",
                label,
                None,
                &format!("container.{}", container.label()),
            ),
            ResourceKind::BlobContainer,
            container.label().to_owned(),
            json!({"public_access": "None"}),
            container.header.clone(),
        ));
    }
    children
}

/// The account's file shares, and where the first NFS share of a FileStorage account says
/// `protocol` (that account then admits the experiment's subnets, see `nfs_access`).
fn shares(check: &mut Check<'_>, kind: &str) -> (Vec<Child>, Option<Span>) {
    let block = check.block();
    let (label, title) = (block.label(), block.title());
    let mut children = Vec::new();
    let mut nfs_protocol = None;
    for share in block.blocks_of("file_share") {
        let attrs: ShareAttrs =
            decode::decode(share, Unknown::Checked, check.diags_mut()).unwrap_or_default();
        let mut share_check = Check::new(share, check.diags_mut());
        let quota = share_check
            .in_range(attrs.quota_gb, "quota_gb", (1, 102_400), " GiB")
            .map_or(1024, |q| q.value);
        let protocol = attrs
            .protocol
            .as_ref()
            .map_or_else(|| "SMB".to_owned(), |p| p.value.clone());
        if protocol == "NFS" && kind != "FileStorage" {
            share_check.report(
                Diagnostic::error(format!("NFS file shares need a premium FileStorage account ({title} is {kind})"))
                    .with_span(attrs.protocol.as_ref().map_or_else(|| share.header.clone(), |p| p.span.clone()))
                    .with_help(format!("set `kind = \"FileStorage\"` and `sku = \"Premium_LRS\"` on {title}, or use protocol = \"SMB\"")),
            );
        }
        if protocol == "NFS" && kind == "FileStorage" && nfs_protocol.is_none() {
            nfs_protocol = attrs.protocol.as_ref().map(|p| p.span.clone());
        }
        let address = Address::new(
            "storage_account",
            label,
            None,
            &format!("file_share.{}", share.label()),
        );
        children.push((
            address,
            ResourceKind::FileShare,
            share.label().to_owned(),
            json!({"quota_gb": quota, "protocol": protocol}),
            share.header.clone(),
        ));
    }
    (children, nfs_protocol)
}

/// Push the account's containers and shares, each depending on the account.
fn push_children(
    ex: &mut Expander<'_>,
    account: &Address,
    account_name: &str,
    children: Vec<Child>,
    lifecycle: &Lifecycle,
) {
    for (address, kind, child_name, values, span) in children {
        let mut attrs = Attrs::new();
        if let Json::Object(map) = values {
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
            attrs,
            [account.clone()],
            Origin {
                parent: Some(account_name.to_owned()),
                lifecycle,
                span: Some(&span),
            },
        );
    }
}

pub(super) fn expand_disk(ex: &mut Expander<'_>, block: &EvalBlock) {
    let label = block.label().to_owned();
    let lifecycle = ex.lifecycle(block);
    let id = ex.experiment.id.clone();
    let attrs: DiskAttrs = decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let mut check = Check::new(block, ex.diags);
    let size = check.in_range(attrs.size_gb, "size_gb", (4, 32_767), " GiB");
    let sku_span = attrs.sku.as_ref().map(|s| s.span.clone());
    let sku = attrs
        .sku
        .map_or_else(|| "StandardSSD_LRS".to_owned(), |s| s.value);
    let zone = attrs.zone.map(|z| z.value);
    let lun = check
        .in_range(attrs.lun, "lun", (0, 63), "")
        .map_or(0, |l| l.value);
    let mount = read_mount(&mut check, attrs.mount, attrs.fs);
    let address = Address::new("disk", &label, None, "");
    if let Some(vm) = attrs.attach_to {
        ex.attachments
            .entry(vm.value.address)
            .or_default()
            .push(Attachment {
                lun,
                disk: address.clone(),
                span: vm.span,
                mount,
            });
    }
    let mut values = Attrs::new();
    values.insert("location".into(), ex.location());
    values.insert("size_gb".into(), json!(size.as_ref().map(|s| s.value)));
    values.insert("sku".into(), json!(sku));
    values.insert("zone".into(), json!(zone));
    ex.push(
        address.clone(),
        ResourceKind::ManagedDisk,
        names::compose(&id, &label, ""),
        values,
        [],
        Origin {
            parent: None,
            lifecycle: &lifecycle,
            span: Some(&block.header),
        },
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
fn read_mount(
    check: &mut Check<'_>,
    mount: Option<Located<String>>,
    fs: Option<OneOf<DiskFilesystem>>,
) -> Option<DiskMount> {
    let title = check.title();
    let Some(mount) = mount else {
        if let Some(fs) = fs {
            check.report(
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
        check.report(
            Diagnostic::error(format!("`mount` in {title} must be an absolute path"))
                .with_span(mount.span)
                .with_label("not an absolute path on the VM")
                .with_help("write a path starting with `/`, without `..`, e.g. \"/data\""),
        );
        return None;
    }
    if reserved.contains(&if path.is_empty() { "/" } else { path }) {
        check.report(
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

fn expand_sas_at(ex: &mut Expander<'_>, block: &EvalBlock, now: DateTime<Utc>) {
    let label = block.label().to_owned();
    let attrs: SasAttrs = decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let mut check = Check::new(block, ex.diags);
    let target = sas_target(&mut check);
    let permissions = sas_permissions(&mut check, attrs.permissions);
    let expiry = read_expiry(&mut check, attrs.expires_in, attrs.expiry, now);
    let https_only = attrs.https_only.unwrap_or(true);
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
    let scope: Address = if SasAccountTarget::accepts(&target.value) {
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
    let mut values = Attrs::new();
    values.insert("account".into(), json!(account.to_string()));
    values.insert("scope".into(), json!(scope.to_string()));
    values.insert("permissions".into(), json!(permissions));
    values.insert(expiry_key.into(), json!(expiry_value));
    values.insert("https_only".into(), json!(https_only));
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
        values,
        deps,
        Origin {
            parent: account_name,
            lifecycle: &Lifecycle::default(),
            span: Some(&block.header),
        },
    );
    ex.set_primaries(block, vec![address]);
}

/// What a SAS grants access to: exactly one of `container`, `share` and `account`, a reference
/// of the matching kind (read only then, so a second scope is one error, not two). Returns the
/// referenced address.
fn sas_target(check: &mut Check<'_>) -> Option<Located<String>> {
    let block = check.block();
    let title = check.title();
    let written: Vec<&str> = ["container", "share", "account"]
        .into_iter()
        .filter(|n| check.has(n))
        .collect();
    match written.as_slice() {
        ["container"] => reference::<targets::Container>(check, "container"),
        ["share"] => reference::<targets::Share>(check, "share"),
        ["account"] => reference::<SasAccountTarget>(check, "account"),
        [] => {
            check.report(
                Diagnostic::error(format!("{title} must say what it grants access to"))
                    .with_span(block.header.clone())
                    .with_help("add `container = storage_account.NAME.container.NAME` (or `share = ...`, `account = ...`)"),
            );
            None
        }
        _ => {
            check.report(
                Diagnostic::error(format!("{title} sets {} at once", written.join(" and ")))
                    .with_span(block.header.clone())
                    .with_help(
                        "a SAS is scoped to one container, one share or one account: keep one",
                    ),
            );
            None
        }
    }
}

/// One reference attribute of the block, as its address with its span.
fn reference<T: Target>(check: &mut Check<'_>, name: &str) -> Option<Located<String>> {
    let block = check.block();
    decode::attr::<Located<Ref<T>>>(block, name, check.diags_mut()).map(|r| Located {
        value: r.value.address,
        span: r.span,
    })
}

/// `permissions`: distinct SAS permission letters; "rl" when not written.
fn sas_permissions(check: &mut Check<'_>, permissions: Option<Located<String>>) -> Option<String> {
    let Some(p) = permissions else {
        return Some("rl".to_owned());
    };
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
        check.report(
            Diagnostic::error(format!("invalid `permissions` in {}", check.title()))
                .with_span(p.span)
                .with_label(why)
                .with_help("use letters from r(ead) a(dd) c(reate) w(rite) d(elete) l(ist), e.g. \"rl\" to read and list"),
        );
        None
    } else {
        Some(p.value)
    }
}

/// `expires_in = "72h"` (relative to signing) or `expiry = "2026-01-02T03:04:05Z"`; default 24h.
fn read_expiry(
    check: &mut Check<'_>,
    relative: Option<Located<String>>,
    absolute: Option<Located<String>>,
    now: DateTime<Utc>,
) -> Option<(&'static str, String)> {
    let title = check.title();
    let max = Duration::days(MAX_SAS_DAYS);
    match (relative, absolute) {
        (Some(_), Some(a)) => {
            check.report(
                Diagnostic::error(format!("{title} sets both `expires_in` and `expiry`"))
                    .with_span(a.span)
                    .with_help("keep one: `expires_in = \"72h\"` (from signing) or `expiry = \"<RFC 3339 time>\"`"),
            );
            None
        }
        (Some(r), None) => match time::parse_duration(&r.value) {
            Err(why) => {
                check.report(
                    Diagnostic::error(format!("invalid `expires_in` in {title}"))
                        .with_span(r.span)
                        .with_label(why),
                );
                None
            }
            Ok(seconds) if seconds < 60 || seconds > max.num_seconds() => {
                check.report(
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
                    check.report(
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
                        check.report(
                            Diagnostic::error(format!("`expiry` of {title} is in the past"))
                                .with_span(a.span)
                                .with_label("this time has passed")
                                .with_help("choose a future time, or use `expires_in = \"72h\"`"),
                        );
                        None
                    } else if t - now > max {
                        check.report(
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
