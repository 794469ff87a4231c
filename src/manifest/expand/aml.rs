//! Azure Machine Learning: `aml_workspace` and `aml_cluster` blocks.
//!
//! A new workspace becomes the workspace and what Azure requires of one (a storage account, a
//! key vault, Application Insights with its Log Analytics workspace, optionally a container
//! registry); an existing one becomes nothing at all: it is only read, by the engine's preflight,
//! and never created, changed or deleted. A cluster becomes one AmlCompute of a fixed size
//! (min = max = `count`, so autoscaling never takes nodes, and their scratch, away) that lives in
//! its workspace's resource group, plus the same steps as a `cluster`.

use serde::Deserialize;
use serde_json::json;

use crate::addr::Address;
use crate::diag::{Diagnostic, Span};
use crate::model::{Attrs, ResourceKind};

use super::super::decode::{self, BlockAttrs, Choices, Located, OneOf, Ref, Unknown};
use super::super::eval::EvalBlock;
use super::super::names;
use super::super::values::MAX_NODES;
use super::check::Check;
use super::compute::{check_size, check_username, choose_subnet, read_keys, subnet_room};
use super::{Expander, Origin, steps, storage, targets};

/// What clusters need to know about a workspace.
#[derive(Debug, Clone)]
pub(super) struct WorkspaceInfo {
    /// The workspace's Azure name.
    name: String,
    /// Its resource group.
    resource_group: String,
    /// Its region (a compute is created where its workspace is).
    location: String,
    /// Whether it exists already (read only) rather than being created by dsinfra.
    existing: bool,
    /// Where the block names the workspace (its `name`, else its header): the preflight's
    /// problems with an existing workspace point there.
    name_span: Span,
    /// Where the block writes `location`, if it does.
    location_span: Option<Span>,
}

/// An `aml_workspace` block's attributes.
#[derive(Deserialize, Default)]
struct WorkspaceAttrs {
    existing: Option<bool>,
    name: Option<Located<String>>,
    resource_group: Option<Located<String>>,
    location: Option<Located<String>>,
    container_registry: Option<Located<bool>>,
}

impl BlockAttrs for WorkspaceAttrs {}

/// An `aml_cluster` block's attributes.
#[derive(Deserialize, Default)]
struct ClusterAttrs {
    workspace: Option<Ref<targets::AmlWorkspace>>,
    name: Option<Located<String>>,
    size: Option<Located<String>>,
    count: Option<Located<i64>>,
    ssh_key: Option<Located<Vec<String>>>,
    admin_username: Option<Located<String>>,
    priority: Option<OneOf<Priority>>,
    idle_seconds_before_scaledown: Option<Located<i64>>,
    network: Option<Ref<targets::Network>>,
    subnet: Option<Located<String>>,
}

impl BlockAttrs for ClusterAttrs {
    // Listed although an `Option`: the block's other checks still run without it.
    const REQUIRED: &'static [(&'static str, &'static str)] = &[("size", "\"Standard_ND40rs_v2\"")];
}

/// An AmlCompute's VM priority, as the manifest writes it.
struct Priority;

impl Choices for Priority {
    const ALLOWED: &'static [&'static str] = &["dedicated", "low_priority"];
}

/// Azure's default idle time before an AmlCompute scales down (its `nodeIdleTimeBeforeScaleDown`
/// of PT120S). A fixed-size cluster (min = max) never scales below `count`, so it matters only
/// while nodes above the minimum exist.
const DEFAULT_IDLE_SECONDS: i64 = 120;

/// The nodes Azure Machine Learning's service limits give one AmlCompute cluster whose nodes
/// talk to each other (a "communication-enabled" pool, as BeeOND and MPI training need): 100 on
/// an InfiniBand (RDMA) family, 300 on others. Above them Azure refuses to scale unless support
/// raised the limit, which dsinfra cannot see offline: a warning, not an error.
const AML_MAX_RDMA_NODES: i64 = 100;
/// The same limit on families without InfiniBand (see [`AML_MAX_RDMA_NODES`]).
const AML_MAX_NODES: i64 = 300;

/// Expand an `aml_workspace` block.
pub(super) fn expand_workspace(ex: &mut Expander<'_>, block: &EvalBlock) {
    let label = block.label().to_owned();
    let attrs: WorkspaceAttrs =
        decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let lifecycle = ex.lifecycle(block);
    let existing = attrs.existing.unwrap_or(false);
    let id = ex.experiment.id.clone();
    let name_span = attrs
        .name
        .as_ref()
        .map_or_else(|| block.header.clone(), |n| n.span.clone());
    let location_span = attrs.location.as_ref().map(|l| l.span.clone());
    let mut check = Check::new(block, ex.diags);
    let name = workspace_name(&mut check, &attrs, existing, &id);
    check_new_or_existing(&mut check, &attrs, existing);
    let location = workspace_location(&mut check, attrs.location.clone(), &ex.azure.location);
    let resource_group = attrs
        .resource_group
        .map_or_else(|| ex.azure.resource_group.clone(), |g| g.value);
    if let Err(why) = names::check(ResourceKind::ResourceGroup, &resource_group)
        && existing
    {
        check.report(
            Diagnostic::error(format!("invalid resource group name `{resource_group}`"))
                .with_span(check.span_of("resource_group"))
                .with_label(why),
        );
    }
    ex.aml_workspaces.insert(
        label.clone(),
        WorkspaceInfo {
            name: name.clone(),
            resource_group,
            location,
            existing,
            name_span,
            location_span,
        },
    );
    if existing {
        ex.set_primaries(block, Vec::new());
        return;
    }
    let registry = attrs.container_registry.is_some_and(|r| r.value);
    let workspace = push_dependencies_and_workspace(ex, block, &name, registry, &lifecycle);
    if attrs.name.is_some() {
        ex.user_named.insert(workspace.clone());
    }
    ex.set_primaries(block, vec![workspace]);
}

/// The workspace's Azure name: `name` (checked), which an existing workspace must have, or
/// `<experiment>-<label>`.
fn workspace_name(
    check: &mut Check<'_>,
    attrs: &WorkspaceAttrs,
    existing: bool,
    id: &str,
) -> String {
    let title = check.title();
    let label = check.block().label().to_owned();
    match &attrs.name {
        Some(n) => {
            if let Err(why) = names::check(ResourceKind::MlWorkspace, &n.value) {
                check.report(
                    Diagnostic::error(format!("invalid workspace name `{}`", n.value))
                        .with_span(n.span.clone())
                        .with_label(why)
                        .with_help("workspace names are 3-33 letters, digits, `_` and `-`, starting with a letter or digit"),
                );
            }
            n.value.clone()
        }
        None if existing => {
            check.report(
                Diagnostic::error(format!("{title} is an existing workspace without a `name`"))
                    .with_span(check.span_of("existing"))
                    .with_label("dsinfra reads an existing workspace by its name")
                    .with_help("add `name = \"...\"`: the workspace's name in Azure Machine Learning studio"),
            );
            String::new()
        }
        None => names::compose(id, &label, ""),
    }
}

/// What only an existing workspace may say (where it is), and what only a new one may (a
/// registry to create).
fn check_new_or_existing(check: &mut Check<'_>, attrs: &WorkspaceAttrs, existing: bool) {
    let title = check.title();
    if existing {
        if let Some(registry) = &attrs.container_registry {
            check.report(
                Diagnostic::error(format!("{title} is existing: `container_registry` has no effect"))
                    .with_span(registry.span.clone())
                    .with_label("dsinfra never changes an existing workspace")
                    .with_help("remove `container_registry`, or let dsinfra create the workspace (remove `existing`)"),
            );
        }
    } else {
        // Decoded values, not written attributes: `null` (as a conditional on a variable gives
        // it) means unset, so one block can switch between new and existing by a variable.
        for (attr, span, what) in [
            (
                "resource_group",
                attrs.resource_group.as_ref().map(|g| g.span.clone()),
                "the experiment's resource group (`azure.resource_group`)",
            ),
            (
                "location",
                attrs.location.as_ref().map(|l| l.span.clone()),
                "the experiment's location (`azure.location`)",
            ),
        ] {
            if let Some(span) = span {
                check.report(
                    Diagnostic::error(format!("{title} is created by dsinfra: `{attr}` is for existing workspaces"))
                        .with_span(span)
                        .with_label(format!("a new workspace goes in {what}"))
                        .with_help(format!("remove `{attr}`, or add `existing = true` to use a workspace that exists already")),
                );
            }
        }
    }
}

/// An existing workspace's `location` as ARM writes it (`East US` is `eastus`); the experiment's
/// location without one.
fn workspace_location(
    check: &mut Check<'_>,
    location: Option<Located<String>>,
    default: &str,
) -> String {
    match location {
        Some(loc) => {
            super::super::known_location(&loc, "use a region name such as eastus or westeurope")
                .unwrap_or_else(|d| {
                    check.report(d);
                    default.to_owned()
                })
        }
        None => default.to_owned(),
    }
}

/// A new workspace's resources: what Azure requires of it, then the workspace, which depends on
/// all of them. Returns the workspace's address.
fn push_dependencies_and_workspace(
    ex: &mut Expander<'_>,
    block: &EvalBlock,
    name: &str,
    registry: bool,
    lifecycle: &crate::model::Lifecycle,
) -> Address {
    let label = block.label().to_owned();
    let id = ex.experiment.id.clone();
    let at = |part: &str| Address::new("aml_workspace", &label, None, part);
    let origin = || Origin {
        parent: None,
        lifecycle,
        span: Some(&block.header),
    };
    let with_location = |pairs: &[(&str, serde_json::Value)]| -> Attrs {
        let mut attrs = Attrs::new();
        attrs.insert("location".into(), ex.location());
        for (key, value) in pairs {
            attrs.insert((*key).into(), value.clone());
        }
        attrs
    };
    let storage_values = storage::account_values(ex.location(), "Standard_LRS", "StorageV2", false);
    let vault_values = with_location(&[("sku", json!("standard"))]);
    let logs_values = with_location(&[("sku", json!("PerGB2018")), ("retention_days", json!(30))]);
    let insights_values = with_location(&[
        ("application_type", json!("web")),
        ("logs", json!(at("logs").to_string())),
    ]);
    let registry_values = with_location(&[("sku", json!("Basic"))]);
    let mut workspace_values = with_location(&[
        ("storage_account", json!(at("storage").to_string())),
        ("key_vault", json!(at("key_vault").to_string())),
        ("application_insights", json!(at("insights").to_string())),
        ("sku", json!("Basic")),
        ("friendly_name", json!(label)),
    ]);
    ex.push(
        at("storage"),
        ResourceKind::StorageAccount,
        names::aml_storage_name(&id, &label),
        storage_values,
        [],
        origin(),
    );
    ex.push(
        at("key_vault"),
        ResourceKind::KeyVault,
        names::key_vault_name(&id, &label),
        vault_values,
        [],
        origin(),
    );
    ex.push(
        at("logs"),
        ResourceKind::LogAnalyticsWorkspace,
        names::compose(&id, &label, "logs"),
        logs_values,
        [],
        origin(),
    );
    ex.push(
        at("insights"),
        ResourceKind::AppInsights,
        names::compose(&id, &label, "insights"),
        insights_values,
        [at("logs")],
        origin(),
    );
    let mut needs = vec![at("storage"), at("key_vault"), at("insights")];
    if registry {
        ex.push(
            at("registry"),
            ResourceKind::ContainerRegistry,
            names::registry_name(&id, &label),
            registry_values,
            [],
            origin(),
        );
        workspace_values.insert(
            "container_registry".into(),
            json!(at("registry").to_string()),
        );
        needs.push(at("registry"));
    }
    ex.push(
        at("workspace"),
        ResourceKind::MlWorkspace,
        name.to_owned(),
        workspace_values,
        needs,
        origin(),
    );
    at("workspace")
}

/// Expand an `aml_cluster` block: its AmlCompute, then its steps.
pub(super) fn expand_cluster(ex: &mut Expander<'_>, block: &EvalBlock) {
    let label = block.label().to_owned();
    let attrs: ClusterAttrs = decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let lifecycle = ex.lifecycle(block);
    let workspaces = ex.aml_workspaces.clone();
    let networks = ex.networks.clone();
    let id = ex.experiment.id.clone();
    let mut check = Check::new(block, ex.diags);
    let workspace = choose_workspace(&mut check, attrs.workspace, &workspaces);
    let location = workspace
        .as_ref()
        .map_or_else(|| ex.azure.location.clone(), |(_, w)| w.location.clone());
    let unknown = ex.unknown_sizes.as_mut();
    let info = attrs
        .size
        .as_ref()
        .and_then(|s| check_size(&mut check, s, &location, (&ex.catalog, unknown)));
    let info = info.as_ref();
    let infiniband = info.is_some_and(|s| s.infiniband);
    let count = read_count(&mut check, attrs.count, infiniband);
    let key = read_one_key(&mut check, attrs.ssh_key);
    let admin = attrs
        .admin_username
        .filter(|u| check_username(&mut check, u))
        .map_or_else(|| "azureuser".to_owned(), |u| u.value);
    // ARM's VmPriority values.
    let priority = if attrs.priority.is_some_and(|p| p.value == "low_priority") {
        "LowPriority"
    } else {
        "Dedicated"
    };
    let idle = read_idle(&mut check, attrs.idle_seconds_before_scaledown);
    let (subnet, subnet_name) = read_subnet(&mut check, attrs.network, attrs.subnet, &networks);
    claim_addresses(&mut ex.networks, &mut check, (&subnet, &subnet_name), count);
    let name = compute_name(&mut check, attrs.name.as_ref(), &id, &label);
    let Some((workspace_label, workspace)) = workspace else {
        return;
    };
    let mut values = Attrs::new();
    values.insert("location".into(), json!(workspace.location));
    if let Some(size) = &attrs.size {
        values.insert("size".into(), json!(size.value));
    }
    values.insert("count".into(), json!(count));
    values.insert("priority".into(), json!(priority));
    values.insert("idle_seconds_before_scaledown".into(), json!(idle));
    values.insert("admin_username".into(), json!(admin));
    if let Some(key) = key {
        values.insert("ssh_public_key".into(), json!(key));
    }
    values.insert("workspace_name".into(), json!(workspace.name));
    values.insert(
        "workspace_resource_group".into(),
        json!(workspace.resource_group),
    );
    values.insert("existing_workspace".into(), json!(workspace.existing));
    let mut deps = Vec::new();
    if !workspace.existing {
        let address = Address::new("aml_workspace", &workspace_label, None, "workspace");
        values.insert("workspace".into(), json!(address.to_string()));
        deps.push(address);
    }
    if let Some((vnet, subnet_name)) = subnet.zip(subnet_name) {
        values.insert("subnet".into(), json!(vnet.to_string()));
        values.insert("subnet_name".into(), json!(subnet_name));
        deps.push(vnet);
    }
    let compute = Address::new("aml_cluster", &label, None, "compute");
    ex.push(
        compute.clone(),
        ResourceKind::MlCompute,
        name,
        values,
        deps,
        Origin {
            parent: Some(workspace.name.clone()),
            lifecycle: &lifecycle,
            span: Some(&block.header),
        },
    );
    // A compute lives in its workspace's group, which an existing workspace may not share with
    // the experiment.
    if let Some(resource) = ex.resources.iter_mut().rev().find(|r| r.address == compute) {
        resource
            .resource_group
            .clone_from(&workspace.resource_group);
    }
    if workspace.existing {
        // The preflight reads an existing workspace before anything is created: what it finds
        // wrong (missing, in another region) is said at the workspace block's words.
        ex.locate(&compute, "workspace_name", workspace.name_span.clone());
        if let Some(span) = workspace.location_span.clone() {
            ex.locate(&compute, "location", span);
        }
    }
    if attrs.name.is_some() {
        ex.user_named.insert(compute.clone());
    }
    ex.set_primaries(block, vec![compute]);
    push_notes(ex, &label);
    steps::expand(ex, block, true, infiniband, attrs.size.as_ref());
}

/// The compute's Azure name: `name` (checked), or the label and a hash of the experiment.
fn compute_name(
    check: &mut Check<'_>,
    written: Option<&Located<String>>,
    id: &str,
    label: &str,
) -> String {
    match written {
        Some(n) => {
            if let Err(why) = names::check(ResourceKind::MlCompute, &n.value) {
                check.report(
                    Diagnostic::error(format!("invalid AmlCompute name `{}`", n.value))
                        .with_span(n.span.clone())
                        .with_label(why)
                        .with_help("AmlCompute names are 2-16 letters, digits and `-`, starting with a letter; or leave `name` out to get a generated one"),
                );
            }
            n.value.clone()
        }
        None => names::aml_compute_name(id, label),
    }
}

/// What the plan says when a cluster's compute is created or replaced: the nodes' host keys
/// and what parking loses.
fn push_notes(ex: &mut Expander<'_>, label: &str) {
    let block_address = Address::block("aml_cluster", label);
    ex.notes.push((
        block_address.clone(),
        "AmlCompute nodes make their own SSH host keys: each is trusted on first use and pinned in state; a changed key for the same node is refused".to_owned(),
    ));
    ex.notes.push((
        block_address,
        "parking scales the cluster to zero nodes, which deletes the nodes and their local disks (the BeeOND scratch with them); unpark makes new nodes and runs the steps again".to_owned(),
    ));
}

/// The workspace: named by reference, or the only `aml_workspace` there is. Returns its label
/// and what clusters need to know about it.
fn choose_workspace(
    check: &mut Check<'_>,
    written: Option<Ref<targets::AmlWorkspace>>,
    workspaces: &std::collections::BTreeMap<String, WorkspaceInfo>,
) -> Option<(String, WorkspaceInfo)> {
    if check.has("workspace") {
        let label = written?
            .address
            .trim_start_matches("aml_workspace.")
            .to_owned();
        let info = workspaces.get(&label)?.clone();
        return Some((label, info));
    }
    let title = check.title();
    let header = check.block().header.clone();
    let labels: Vec<&String> = workspaces.keys().collect();
    match labels.as_slice() {
        [only] => workspaces.get(*only).map(|w| ((*only).clone(), w.clone())),
        [] => {
            check.report(
                Diagnostic::error(format!("{title} needs a workspace"))
                    .with_span(header)
                    .with_help("add an `aml_workspace \"ws\" {}` block (dsinfra creates it), or one with `existing = true` and `name` to use a workspace you have"),
            );
            None
        }
        many => {
            check.report(
                Diagnostic::error(format!("{title} must say which workspace it uses"))
                    .with_span(header)
                    .with_help(format!(
                        "add `workspace = aml_workspace.NAME`; the manifest has: {}",
                        many.iter()
                            .map(|n| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
            );
            None
        }
    }
}

/// `count`: at least one node (a fixed-size cluster: min = max = count); at most dsinfra's
/// cluster limit, with a warning above Azure Machine Learning's default limit for clusters whose
/// nodes talk to each other.
fn read_count(check: &mut Check<'_>, count: Option<Located<i64>>, infiniband: bool) -> i64 {
    if !check.has("count") {
        return 1;
    }
    let Some(count) = check.in_range(count, "count", (1, MAX_NODES), " nodes") else {
        return 1;
    };
    let (limit, what) = if infiniband {
        (AML_MAX_RDMA_NODES, "InfiniBand (RDMA) nodes")
    } else {
        (AML_MAX_NODES, "nodes that talk to each other (MPI, BeeOND)")
    };
    if count.value > limit {
        let title = check.title();
        check.report(
            Diagnostic::warning(format!(
                "{title} has {} nodes, above Azure Machine Learning's limit of {limit} per cluster",
                count.value
            ))
            .with_span(count.span.clone())
            .with_label(format!("at most {limit} {what} by default"))
            .with_help("ask Azure support to raise the limit before applying, or split the work over several clusters"),
        );
    }
    count.value
}

/// `ssh_key`: AmlCompute takes exactly one public key (`sshSettings.adminPublicKey`).
fn read_one_key(check: &mut Check<'_>, keys: Option<Located<Vec<String>>>) -> Option<String> {
    let span = keys.as_ref().map(|k| k.span.clone());
    let written = keys.as_ref().map_or(0, |k| k.value.len());
    let valid = read_keys(check, keys);
    if written > 1 {
        let title = check.title();
        check.report(
            Diagnostic::error(format!("`ssh_key` in {title} lists {written} keys"))
                .with_span(span.unwrap_or_else(|| check.span_of("ssh_key")))
                .with_label("AmlCompute takes one SSH public key")
                .with_help("keep one key (the nodes' admin user logs in with it); a `script` step can add others to ~/.ssh/authorized_keys"),
        );
        return None;
    }
    valid.into_iter().next()
}

/// `idle_seconds_before_scaledown`: whole seconds, not negative (the engine sends it as the
/// ISO 8601 duration Azure wants, `PT120S`).
fn read_idle(check: &mut Check<'_>, idle: Option<Located<i64>>) -> i64 {
    match idle {
        Some(n) if n.value < 0 => {
            let title = check.title();
            check.report(
                Diagnostic::error(format!(
                    "`idle_seconds_before_scaledown` in {title} must not be negative"
                ))
                .with_span(n.span)
                .with_label(format!("this is {}", n.value))
                .with_help(format!("Azure's default is {DEFAULT_IDLE_SECONDS} seconds")),
            );
            DEFAULT_IDLE_SECONDS
        }
        Some(n) => n.value,
        None => DEFAULT_IDLE_SECONDS,
    }
}

/// The nodes join the subnet, one address each, after the `vm` and `cluster` blocks' NICs
/// (`compute::subnet_room`).
fn claim_addresses(
    networks: &mut std::collections::BTreeMap<String, super::NetworkInfo>,
    check: &mut Check<'_>,
    (vnet, subnet): (&Option<Address>, &Option<String>),
    count: i64,
) {
    if let (Some(vnet), Some(subnet)) = (vnet, subnet)
        && let Some(d) = subnet_room(
            networks,
            (&vnet.name, subnet),
            u64::try_from(count).unwrap_or(0),
            &check.title(),
            check.span_of("count"),
        )
    {
        check.report(d);
    }
}

/// `network` and `subnet`: optional (without them Azure gives the nodes a network of its own);
/// the subnet must be one of the network's, its first when not written. Returns the network's
/// VNet address and the subnet's name.
fn read_subnet(
    check: &mut Check<'_>,
    network: Option<Ref<targets::Network>>,
    subnet: Option<Located<String>>,
    networks: &std::collections::BTreeMap<String, super::NetworkInfo>,
) -> (Option<Address>, Option<String>) {
    if !check.has("network") {
        if let Some(subnet) = subnet {
            let title = check.title();
            check.report(
                Diagnostic::error(format!("`subnet` in {title} needs a `network`"))
                    .with_span(subnet.span)
                    .with_label("no network to take this subnet from")
                    .with_help("add `network = network.NAME`, or remove `subnet`"),
            );
        }
        return (None, None);
    }
    let Some(network) = network else {
        return (None, None);
    };
    let label = network.address.trim_start_matches("network.").to_owned();
    let subnets = networks
        .get(&label)
        .map(|n| n.subnets.clone())
        .unwrap_or_default();
    let subnet = choose_subnet(check, subnet, &subnets);
    (Some(Address::new("network", &label, None, "vnet")), subnet)
}
