//! Kubernetes on Azure: an `aks` block becomes an AKS cluster (with its System pool) and one
//! resource per named `pool` (decision 73).
//!
//! Checked here, offline, each at the attribute that is wrong: the cluster and pool names (the
//! spec's patterns), the Kubernetes version's form (whether the region offers it is the
//! preflight's question, read from ARM), the API server's allowed ranges, a System pool of at
//! least one node on a size AKS accepts for one (2 vCPUs and 4 GB, the spec's words), the pools'
//! sizes (the catalog, in the region), counts and taints.

use serde::Deserialize;
use serde_json::json;

use crate::addr::Address;
use crate::diag::Diagnostic;
use crate::model::{Attrs, ResourceKind};

use super::super::decode::{self, BlockAttrs, Choices, Located, OneOf, Unknown};
use super::super::eval::EvalBlock;
use super::super::names;
use super::super::validate::cidr;
use super::check::Check;
use super::compute::check_size;
use super::{Expander, Origin, kube_objects};

/// The System pool's size when the block names none: general purpose, 4 vCPUs and 16 GiB, above
/// AKS's floor for a System pool with room for its add-ons.
pub(crate) const DEFAULT_SYSTEM_SIZE: &str = "Standard_D4s_v5";

/// The most nodes a pool may have (the spec's `count` range).
const MAX_POOL_NODES: i64 = 1000;

/// An `aks` block's attributes.
#[derive(Deserialize, Default)]
struct ClusterAttrs {
    name: Option<Located<String>>,
    kubernetes_version: Option<Located<String>>,
    dns_prefix: Option<Located<String>>,
    api_server_from: Option<Located<Vec<String>>>,
    blob_csi: Option<bool>,
    system_size: Option<Located<String>>,
    system_count: Option<Located<i64>>,
    park: Option<OneOf<ParkMode>>,
    device_plugin: Option<Located<bool>>,
    entra_id: Option<bool>,
}

impl BlockAttrs for ClusterAttrs {}

/// How `dsinfra park` parks the cluster: scale its named pools to zero (the System pool keeps a
/// node), or stop the whole cluster (every node deallocated; nothing but start or delete until
/// unpark).
struct ParkMode;

impl Choices for ParkMode {
    const ALLOWED: &'static [&'static str] = &["pools", "stop"];
}

/// A `pool` block's attributes.
#[derive(Deserialize, Default)]
struct PoolAttrs {
    size: Option<Located<String>>,
    count: Option<Located<i64>>,
    taints: Option<Located<Vec<String>>>,
    gpu_driver: Option<OneOf<GpuDriver>>,
}

impl BlockAttrs for PoolAttrs {
    const REQUIRED: &'static [(&'static str, &'static str)] =
        &[("size", "\"Standard_NC24ads_A100_v4\"")];
}

/// Who installs a GPU pool's NVIDIA driver: AKS (`install`, its default) or nobody (`none`:
/// the NVIDIA GPU operator, which brings its own).
struct GpuDriver;

impl Choices for GpuDriver {
    const ALLOWED: &'static [&'static str] = &["install", "none"];
}

/// Expand an `aks` block.
pub(super) fn expand(ex: &mut Expander<'_>, block: &EvalBlock) {
    let label = block.label().to_owned();
    let attrs: ClusterAttrs = decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let lifecycle = ex.lifecycle(block);
    let location = ex.azure.location.clone();
    let id = ex.experiment.id.clone();
    let mut check = Check::new(block, ex.diags);
    let name = cluster_name(&mut check, attrs.name.as_ref(), &id, &label);
    let version_span = attrs.kubernetes_version.as_ref().map(|v| v.span.clone());
    let version = attrs
        .kubernetes_version
        .filter(|v| check_version(&mut check, v))
        .map(|v| v.value);
    let dns_prefix = dns_prefix(&mut check, attrs.dns_prefix.as_ref(), &name);
    let ranges = api_server_ranges(&mut check, attrs.api_server_from.as_ref());
    let system_size = attrs.system_size.clone().unwrap_or_else(|| Located {
        value: DEFAULT_SYSTEM_SIZE.to_owned(),
        span: block.header.clone(),
    });
    let unknown = ex.unknown_sizes.as_mut();
    if let Some(info) = check_size(&mut check, &system_size, &location, (&ex.catalog, unknown)) {
        check_system_size(&mut check, &system_size, &info);
    }
    let system_count = system_count(&mut check, attrs.system_count);
    let mut values = Attrs::new();
    values.insert("location".into(), json!(location));
    if let Some(version) = version {
        values.insert("kubernetes_version".into(), json!(version));
    }
    values.insert("dns_prefix".into(), json!(dns_prefix));
    values.insert("api_server_ranges".into(), json!(ranges));
    values.insert("blob_csi".into(), json!(attrs.blob_csi.unwrap_or(false)));
    if attrs.entra_id == Some(true) {
        values.insert("entra_id".into(), json!(true));
    }
    values.insert("system_size".into(), json!(system_size.value));
    values.insert("system_count".into(), json!(system_count));
    let park = attrs.park.map_or_else(|| "pools".to_owned(), |p| p.value);
    values.insert("park".into(), json!(park));
    let cluster = Address::new("aks", &label, None, "cluster");
    let pools = read_pools(
        &mut check,
        (&ex.catalog, ex.unknown_sizes.as_mut()),
        &location,
    );
    ex.push(
        cluster.clone(),
        ResourceKind::AksCluster,
        name.clone(),
        values,
        Vec::new(),
        Origin {
            parent: None,
            lifecycle: &lifecycle,
            span: Some(&block.header),
        },
    );
    // Both names are checked above, where they are written (or made from the label).
    ex.user_named.insert(cluster.clone());
    if let Some(span) = version_span {
        // The preflight says a version the region does not offer here.
        ex.locate(&cluster, "kubernetes_version", span);
    }
    let gpu_taints = gpu_pool_taints(ex, &pools);
    let blob_csi = attrs.blob_csi.unwrap_or(false);
    let mut primaries = vec![cluster.clone()];
    for (pool_label, mut pool_values, span) in pools {
        pool_values.insert("location".into(), json!(location));
        pool_values.insert("cluster".into(), json!(cluster.to_string()));
        pool_values.insert("park".into(), json!(park));
        let address = Address::new("aks", &label, None, &format!("pool.{pool_label}"));
        ex.push(
            address.clone(),
            ResourceKind::AksPool,
            pool_label,
            pool_values,
            [cluster.clone()],
            Origin {
                parent: Some(name.clone()),
                lifecycle: &lifecycle,
                span: Some(&span),
            },
        );
        ex.user_named.insert(address.clone());
        primaries.push(address);
    }
    ex.set_primaries(block, primaries);
    let facts = kube_objects::ClusterFacts {
        cluster: &cluster,
        blob_csi,
        gpu_taints,
        device_plugin: attrs.device_plugin,
    };
    kube_objects::read(ex, block, &facts);
}

/// `system_count`: at least one node (AKS keeps its own pods there), 1 when not written.
fn system_count(check: &mut Check<'_>, count: Option<Located<i64>>) -> i64 {
    match count {
        None => 1,
        Some(count) if count.value < 1 => {
            let title = check.title();
            check.report(
                Diagnostic::error(format!("the System pool of {title} has no node"))
                    .with_span(count.span.clone())
                    .with_label(format!("this is {}", count.value))
                    .with_help("AKS keeps at least one node in a System pool (its own pods run there); park scales the named pools to zero instead"),
            );
            1
        }
        count => check
            .in_range(count, "system_count", (1, MAX_POOL_NODES), " nodes")
            .map_or(1, |c| c.value),
    }
}

/// The taints of the pools whose nodes have GPUs and a driver AKS installs (`None`: no such
/// pool): what the NVIDIA device plugin must tolerate.
fn gpu_pool_taints(
    ex: &Expander<'_>,
    pools: &[(String, Attrs, crate::diag::Span)],
) -> Option<Vec<String>> {
    let mut taints: Option<Vec<String>> = None;
    for (_, values, _) in pools {
        let gpus = values
            .get("size")
            .and_then(|s| s.as_str())
            .and_then(|s| ex.catalog.vm_size(s))
            .is_some_and(|s| s.gpus > 0.0);
        let driver_by_aks = values.get("gpu_driver").and_then(|d| d.as_str()) != Some("None");
        if gpus && driver_by_aks {
            let all = taints.get_or_insert_with(Vec::new);
            for taint in values
                .get("taints")
                .and_then(|t| t.as_array())
                .into_iter()
                .flatten()
            {
                if let Some(taint) = taint.as_str().filter(|t| !all.iter().any(|a| a == t)) {
                    all.push(taint.to_owned());
                }
            }
        }
    }
    taints
}

/// The cluster's Azure name: `name` (checked) or the experiment and the label.
fn cluster_name(
    check: &mut Check<'_>,
    written: Option<&Located<String>>,
    id: &str,
    label: &str,
) -> String {
    let (name, span) = match written {
        Some(n) => (n.value.clone(), Some(n.span.clone())),
        None => (names::compose(id, label, ""), None),
    };
    if let Err(why) = names::check(ResourceKind::AksCluster, &name) {
        let d = Diagnostic::error(format!("invalid AKS cluster name `{name}`")).with_label(why);
        check.report(match span {
            Some(span) => d.with_span(span).with_help(
                "1-63 letters, digits, `-` and `_`, starting and ending with a letter or digit",
            ),
            None => d
                .with_span(check.block().label_span())
                .with_help("set `name` in the block, or shorten the experiment id or the label"),
        });
    }
    name
}

/// `kubernetes_version`: `<major.minor>` (AKS picks the newest patch) or `<major.minor.patch>`.
fn check_version(check: &mut Check<'_>, version: &Located<String>) -> bool {
    let parts: Vec<&str> = version.value.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    if numeric && matches!(parts.len(), 2 | 3) {
        return true;
    }
    let title = check.title();
    check.report(
        Diagnostic::error(format!("invalid `kubernetes_version` in {title}"))
            .with_span(version.span.clone())
            .with_label("not `<major.minor>` or `<major.minor.patch>`")
            .with_help("write e.g. \"1.33\" (AKS runs the newest patch of it); `az aks get-versions --location <region>` lists what the region offers, and plan checks it"),
    );
    false
}

/// `dns_prefix`: written (checked against the spec's pattern), or made from the cluster's name.
fn dns_prefix(check: &mut Check<'_>, written: Option<&Located<String>>, name: &str) -> String {
    if let Some(prefix) = written {
        let value = &prefix.value;
        let ok = (1..=54).contains(&value.len())
            && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !value.starts_with('-')
            && !value.ends_with('-');
        if !ok {
            let title = check.title();
            check.report(
                Diagnostic::error(format!("invalid `dns_prefix` in {title}"))
                    .with_span(prefix.span.clone())
                    .with_label(
                        "AKS takes 1-54 letters, digits and `-`, not starting or ending with `-`",
                    )
                    .with_help("or leave `dns_prefix` out: it is made from the cluster's name"),
            );
        }
        return value.clone();
    }
    let mut prefix: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(54)
        .collect();
    while prefix.ends_with('-') {
        prefix.pop();
    }
    prefix
}

/// `api_server_from`: CIDR ranges (a bare address is its /32). None, or the whole internet, is a
/// warning: the API server then answers every address (AKS's default).
fn api_server_ranges(check: &mut Check<'_>, from: Option<&Located<Vec<String>>>) -> Vec<String> {
    let title = check.title();
    let block = check.block();
    let Some(from) = from.filter(|f| !f.value.is_empty()) else {
        check.report(
            Diagnostic::warning(format!("the Kubernetes API of {title} is open to the whole internet"))
                .with_span(block.header.clone())
                .with_label("no `api_server_from`")
                .with_help("add `api_server_from = [\"<your public IP>/32\"]`: AKS then answers only those addresses"),
        );
        return Vec::new();
    };
    let mut ranges = Vec::new();
    for source in &from.value {
        match cidr::ssh_source(source) {
            Ok(cidr::Source::Anywhere) if source == "0.0.0.0/0" => {
                check.report(
                    Diagnostic::warning(format!(
                        "the Kubernetes API of {title} is open to the whole internet"
                    ))
                    .with_span(from.span.clone())
                    .with_label("`0.0.0.0/0` is every address")
                    .with_help("list only your own address or range"),
                );
                ranges.push(source.clone());
            }
            Ok(cidr::Source::Range) if source.contains('/') => ranges.push(source.clone()),
            Ok(cidr::Source::Range) => ranges.push(format!("{source}/32")),
            Ok(cidr::Source::Anywhere) | Err(_) => check.report(
                Diagnostic::error(format!(
                    "invalid `api_server_from` entry `{source}` in {title}"
                ))
                .with_span(from.span.clone())
                .with_label("AKS takes IPv4 addresses and CIDR ranges only")
                .with_help("list addresses or ranges, e.g. [\"203.0.113.7/32\"]"),
            ),
        }
    }
    ranges
}

/// A System pool's size: AKS's floor of 2 vCPUs and 4 GB (the spec's `AgentPoolMode`).
fn check_system_size(check: &mut Check<'_>, size: &Located<String>, info: &crate::catalog::VmSize) {
    if info.vcpus >= 2 && info.memory_gib >= 4.0 {
        return;
    }
    let title = check.title();
    check.report(
        Diagnostic::error(format!(
            "`{}` is too small for the System pool of {title}",
            info.name
        ))
        .with_span(size.span.clone())
        .with_label(format!("{} vCPUs and {} GiB", info.vcpus, info.memory_gib))
        .with_help(format!(
            "AKS needs at least 2 vCPUs and 4 GB in a System pool; e.g. `{DEFAULT_SYSTEM_SIZE}`"
        )),
    );
}

/// The block's `pool` blocks, checked: `(label, attributes, header)`.
fn read_pools(
    check: &mut Check<'_>,
    (catalog, mut unknown): (&crate::catalog::Catalog, Option<&mut Vec<String>>),
    location: &str,
) -> Vec<(String, Attrs, crate::diag::Span)> {
    let block = check.block();
    let mut pools = Vec::new();
    for pool in block.blocks_of("pool") {
        let label = pool.label().to_owned();
        let attrs: PoolAttrs =
            decode::decode(pool, Unknown::Checked, check.diags_mut()).unwrap_or_default();
        let mut pool_check = Check::new(pool, check.diags_mut());
        if let Err(why) = names::check(ResourceKind::AksPool, &label) {
            pool_check.report(
                Diagnostic::error(format!("invalid AKS pool name `{label}`"))
                    .with_span(pool.label_span())
                    .with_label(why)
                    .with_help("AKS names a pool with 1-12 lowercase letters and digits, starting with a letter (e.g. `gpu`)"),
            );
        }
        let mut values = Attrs::new();
        if let Some(size) = &attrs.size {
            check_size(
                &mut pool_check,
                size,
                location,
                (catalog, unknown.as_deref_mut()),
            );
            values.insert("size".into(), json!(size.value));
        }
        let count = pool_check
            .in_range(attrs.count, "count", (0, MAX_POOL_NODES), " nodes")
            .map_or(1, |c| c.value);
        values.insert("count".into(), json!(count));
        let taints = attrs
            .taints
            .map(|t| read_taints(&mut pool_check, t))
            .unwrap_or_default();
        values.insert("taints".into(), json!(taints));
        if let Some(driver) = attrs.gpu_driver {
            let wire = if driver.value == "none" {
                "None"
            } else {
                "Install"
            };
            values.insert("gpu_driver".into(), json!(wire));
        }
        pools.push((label, values, pool.header.clone()));
    }
    pools
}

/// `taints`: `key=value:Effect` (or `key:Effect`), Effect one of Kubernetes' three.
fn read_taints(check: &mut Check<'_>, taints: Located<Vec<String>>) -> Vec<String> {
    const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
    for taint in &taints.value {
        let valid = taint.rsplit_once(':').is_some_and(|(key, effect)| {
            let key = key.split_once('=').map_or(key, |(k, _)| k);
            !key.is_empty() && EFFECTS.contains(&effect)
        });
        if !valid {
            let title = check.title();
            check.report(
                Diagnostic::error(format!("invalid taint `{taint}` in {title}"))
                    .with_span(taints.span.clone())
                    .with_label("not `key=value:Effect`")
                    .with_help("e.g. \"sku=gpu:NoSchedule\"; the effect is NoSchedule, PreferNoSchedule or NoExecute"),
            );
        }
    }
    taints.value
}
