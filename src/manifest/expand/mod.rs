//! Expansion: evaluated blocks to Azure resources ("kits").
//!
//! A `vm` block becomes a public IP, a NIC, a VM and maybe an auto-shutdown schedule; a `cluster`
//! becomes N of those plus a proximity placement group; and so on. Every resource gets a
//! deterministic name, the experiment's tags plus dsinfra's own (experiment, address,
//! managed-by), a dependency on the resource group, dependencies from the kit's structure (a NIC
//! needs its VNet) and from references between blocks. Values are checked on the way, each
//! problem located at the attribute that caused it.

mod aks;
mod aml;
mod boot;
mod charts;
mod check;
mod compute;
mod idle;
mod kube_objects;
mod network;
mod nfs_access;
mod nodes;
mod security;
mod spot;
mod step_lists;
mod steps;
mod storage;
mod targets;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value as Json, json};

use crate::addr::Address;
use crate::diag::{Diagnostic, Span};
use crate::model::{Attrs, AzureSettings, Lifecycle, Resource, ResourceKind, Step, tags};

use super::decode::{self, BlockAttrs, Unknown};
use super::eval::EvalBlock;
use super::names;

/// The experiment id and where it was set (for "shorten the experiment id" advice).
#[derive(Debug, Clone)]
pub(super) struct Experiment {
    /// The id.
    pub id: String,
    /// The `experiment` attribute's value, when set in the manifest (else it is the file stem).
    pub span: Option<Span>,
}

/// What other blocks need to know about a network.
#[derive(Debug, Clone)]
struct NetworkInfo {
    subnets: Vec<String>,
    /// Each subnet's range, and the NICs the blocks expanded so far put in it: Azure keeps five
    /// addresses of every subnet, so a /24 holds 251 NICs (see `compute::check_subnet_room`).
    room: BTreeMap<String, (ipnet::Ipv4Net, u64)>,
    /// The first address space that overlaps the InfiniBand range Azure reserves, and where
    /// `address_space` is written: InfiniBand blocks on this network are warned.
    ipoib_overlap: Option<(ipnet::Ipv4Net, Span)>,
}

/// A data disk attached to a VM.
#[derive(Debug, Clone)]
struct Attachment {
    lun: i64,
    disk: Address,
    span: Span,
    /// Where the VM mounts it, and with which file system, when the disk block says `mount`.
    mount: Option<DiskMount>,
}

/// A data disk's `mount` and `fs`: the VM it is attached to gets a generated step for them.
#[derive(Debug, Clone)]
struct DiskMount {
    path: String,
    fs: String,
    span: Span,
}

/// A `lifecycle { ... }` block's attributes.
#[derive(serde::Deserialize, Default)]
struct LifecycleAttrs {
    prevent_destroy: Option<bool>,
}

impl BlockAttrs for LifecycleAttrs {}

/// The expansion's output.
pub(super) struct Expanded {
    /// Resources, sorted by address.
    pub resources: Vec<Resource>,
    /// Steps in manifest order.
    pub steps: Vec<Step>,
    /// What the plan should say about choices made per block (see `Desired::notes`).
    pub notes: Vec<(Address, String)>,
    /// VM sizes the catalog lacks, when [`Context::collect_unknown_sizes`] asked for them.
    pub unknown_sizes: Vec<String>,
    /// The idle window of each block with `park { idle }` (see `Desired::park_idle`).
    pub park_idle: BTreeMap<Address, Duration>,
    /// Kubernetes objects for AKS clusters, in manifest order.
    pub kube_objects: Vec<crate::model::KubeObject>,
}

/// What the loader tells the expansion besides the blocks.
pub(super) struct Context {
    /// Where relative `file()` paths start.
    pub base_dir: PathBuf,
    /// Collect sizes the catalog lacks instead of reporting them (see `LoadOptions`).
    pub collect_unknown_sizes: bool,
    /// The sizes to judge against (see `LoadOptions`).
    pub catalog: crate::catalog::Catalog,
}

/// Where a resource comes from: the parent resource it lives in (a container's account), and
/// its block's lifecycle and header.
struct Origin<'a> {
    parent: Option<String>,
    lifecycle: &'a Lifecycle,
    span: Option<&'a Span>,
}

/// Shared state while expanding.
struct Expander<'a> {
    experiment: &'a Experiment,
    /// The sizes to judge against: shipped, and learnt from live Resource SKUs.
    catalog: crate::catalog::Catalog,
    azure: &'a AzureSettings,
    rg: Address,
    base_dir: PathBuf,
    diags: &'a mut Vec<Diagnostic>,
    resources: Vec<Resource>,
    steps: Vec<Step>,
    notes: Vec<(Address, String)>,
    park_idle: BTreeMap<Address, Duration>,
    kube_objects: Vec<crate::model::KubeObject>,
    networks: BTreeMap<String, NetworkInfo>,
    attachments: BTreeMap<String, Vec<Attachment>>,
    /// Scope (container, share or account address) of each `sas`.
    sas_scopes: BTreeMap<String, String>,
    /// Protocol of each file share, by address.
    share_protocols: BTreeMap<String, String>,
    /// Each `aml_workspace`, by label, for the clusters that run in it.
    aml_workspaces: BTreeMap<String, aml::WorkspaceInfo>,
    /// Block address -> the resources a reference to it depends on.
    primaries: BTreeMap<String, Vec<Address>>,
    /// Names the user chose (storage accounts): checked where written, not as generated names.
    /// Sizes the catalog lacks, collected instead of reported (`Some` only when asked).
    unknown_sizes: Option<Vec<String>>,
    user_named: BTreeSet<Address>,
}

/// Expand every evaluated resource block. `references` maps a block address (`vm.gpu`) to the
/// block addresses its attributes refer to, for `depends_on`.
pub(super) fn expand(
    blocks: &[EvalBlock],
    experiment: &Experiment,
    azure: &AzureSettings,
    azure_span: Option<&Span>,
    references: &BTreeMap<String, BTreeSet<String>>,
    context: Context,
    diags: &mut Vec<Diagnostic>,
) -> Expanded {
    let rg = Address::block("azure", "resource_group");
    let mut ex = Expander {
        experiment,
        azure,
        rg: rg.clone(),
        base_dir: context.base_dir,
        diags,
        unknown_sizes: context.collect_unknown_sizes.then(Vec::new),
        catalog: context.catalog,
        resources: Vec::new(),
        steps: Vec::new(),
        notes: Vec::new(),
        park_idle: BTreeMap::new(),
        kube_objects: Vec::new(),
        networks: BTreeMap::new(),
        attachments: BTreeMap::new(),
        sas_scopes: BTreeMap::new(),
        share_protocols: BTreeMap::new(),
        primaries: BTreeMap::new(),
        user_named: BTreeSet::new(),
        aml_workspaces: BTreeMap::new(),
    };
    let mut rg_attrs = Attrs::new();
    rg_attrs.insert("location".into(), json!(azure.location));
    ex.push(
        rg,
        ResourceKind::ResourceGroup,
        azure.resource_group.clone(),
        rg_attrs,
        [],
        Origin {
            parent: None,
            lifecycle: &Lifecycle::default(),
            span: azure_span,
        },
    );
    let of_kind = |kind: &'static str| blocks.iter().filter(move |b| b.ident == kind);
    for block in of_kind("network") {
        network::expand(&mut ex, block);
    }
    for block in of_kind("storage_account") {
        storage::expand_account(&mut ex, block);
    }
    for block in of_kind("disk") {
        storage::expand_disk(&mut ex, block);
    }
    // SAS blocks before VMs: steps check that the SAS they use covers their container.
    for block in of_kind("sas") {
        storage::expand_sas(&mut ex, block);
    }
    for block in blocks
        .iter()
        .filter(|b| b.ident == "vm" || b.ident == "cluster")
    {
        compute::expand(&mut ex, block);
    }
    for block in of_kind("aml_workspace") {
        aml::expand_workspace(&mut ex, block);
    }
    for block in of_kind("aml_cluster") {
        aml::expand_cluster(&mut ex, block);
    }
    for block in of_kind("aks") {
        aks::expand(&mut ex, block);
    }
    ex.check_lun_conflicts();
    ex.add_reference_dependencies(references);
    ex.check_names();
    let Expander {
        mut resources,
        steps,
        notes,
        unknown_sizes,
        park_idle,
        kube_objects,
        ..
    } = ex;
    resources.sort_by(|a, b| a.address.cmp(&b.address));
    Expanded {
        resources,
        steps,
        notes,
        unknown_sizes: unknown_sizes.unwrap_or_default(),
        park_idle,
        kube_objects,
    }
}

impl Expander<'_> {
    /// Add a resource with dsinfra's tags and a dependency on the resource group.
    fn push(
        &mut self,
        address: Address,
        kind: ResourceKind,
        name: String,
        mut attrs: Attrs,
        depends_on: impl IntoIterator<Item = Address>,
        origin: Origin<'_>,
    ) {
        if kind.is_arm() {
            let mut all: BTreeMap<String, String> = self.azure.tags.clone();
            all.insert(tags::EXPERIMENT.into(), self.experiment.id.clone());
            all.insert(tags::ADDRESS.into(), address.to_string());
            all.insert(tags::MANAGED_BY.into(), "dsinfra".into());
            attrs.insert("tags".into(), json!(all));
        }
        let mut deps: BTreeSet<Address> = depends_on.into_iter().collect();
        if kind != ResourceKind::ResourceGroup {
            deps.insert(self.rg.clone());
        }
        self.resources.push(Resource {
            address,
            kind,
            name,
            parent: origin.parent,
            resource_group: self.azure.resource_group.clone(),
            attrs,
            depends_on: deps,
            lifecycle: origin.lifecycle.clone(),
            span: origin.span.cloned(),
            attr_spans: BTreeMap::new(),
        });
    }

    /// Record where the manifest writes `attribute` of the resource at `address` (already
    /// pushed), for diagnostics about that one value.
    fn locate(&mut self, address: &Address, attribute: &str, span: Span) {
        if let Some(resource) = self
            .resources
            .iter_mut()
            .rev()
            .find(|r| &r.address == address)
        {
            resource.attr_spans.insert(attribute.to_owned(), span);
        }
    }

    fn location(&self) -> Json {
        json!(self.azure.location)
    }

    /// Record which resources a reference to `block` (e.g. `vm.gpu`) waits for.
    fn set_primaries(&mut self, block: &EvalBlock, primaries: Vec<Address>) {
        self.primaries
            .insert(format!("{}.{}", block.ident, block.label()), primaries);
    }

    /// `lifecycle { prevent_destroy = true }` of a block.
    fn lifecycle(&mut self, block: &EvalBlock) -> Lifecycle {
        let Some(lc) = block.block("lifecycle") else {
            return Lifecycle::default();
        };
        let attrs: LifecycleAttrs =
            decode::decode(lc, Unknown::Checked, self.diags).unwrap_or_default();
        Lifecycle {
            prevent_destroy: attrs.prevent_destroy.unwrap_or(false),
        }
    }

    fn check_lun_conflicts(&mut self) {
        for (vm, attachments) in &self.attachments {
            let mut seen: BTreeMap<i64, &Address> = BTreeMap::new();
            for a in attachments {
                if let Some(first) = seen.insert(a.lun, &a.disk) {
                    self.diags.push(
                        Diagnostic::error(format!(
                            "{} and {} are both attached to {vm} at lun {}",
                            first, a.disk, a.lun
                        ))
                        .with_span(a.span.clone())
                        .with_help("give each data disk of a VM its own `lun` (0, 1, 2, ...)"),
                    );
                }
            }
        }
    }

    fn add_reference_dependencies(&mut self, references: &BTreeMap<String, BTreeSet<String>>) {
        for (from, targets) in references {
            let Some(dependents) = self.primaries.get(from).cloned() else {
                continue;
            };
            let mut wanted: BTreeSet<Address> = BTreeSet::new();
            for target in targets {
                if target == from {
                    continue;
                }
                if let Some(primaries) = self.primaries.get(target) {
                    wanted.extend(primaries.iter().cloned());
                }
            }
            for resource in &mut self.resources {
                if dependents.contains(&resource.address) {
                    resource.depends_on.extend(wanted.iter().cloned());
                }
            }
        }
    }

    /// Check every generated name against Azure's rules; one report per block is enough, as one
    /// cause (a long experiment id) usually breaks all of a block's names.
    fn check_names(&mut self) {
        let mut reported: BTreeSet<Address> = BTreeSet::new();
        for resource in &self.resources {
            if self.user_named.contains(&resource.address) {
                continue;
            }
            let Err(why) = names::check(resource.kind, &resource.name) else {
                continue;
            };
            let block = resource.address.block_address();
            if !reported.insert(block) {
                continue;
            }
            let what = kind_noun(resource.kind);
            let mut d = Diagnostic::error(format!(
                "`{}` is not a valid {what} name (for {})",
                resource.name, resource.address
            ))
            .with_span_opt(resource.span.clone())
            .with_label(why);
            let id = &self.experiment.id;
            let label = &resource.address.name;
            d = match resource.kind {
                ResourceKind::BlobContainer | ResourceKind::FileShare => d.with_help(format!(
                    "the {what} is named after its block: rename it (3-63 lowercase letters, digits and single `-`)"
                )),
                ResourceKind::ResourceGroup => d.with_help(
                    "set `resource_group` in the `azure` block to a valid name, or shorten the experiment id".to_owned(),
                ),
                ResourceKind::MlWorkspace => d.with_help(format!(
                    "the name is `<experiment>-<block name>`: choose one with `name = \"...\"` in the block (3-33 letters, digits, `_` and `-`), or shorten the experiment id `{id}` or the block name `{label}`"
                )),
                _ if resource.name.contains(id.as_str()) => d.with_help(format!(
                    "the name is `<experiment>-<block name>...`: shorten the experiment id `{id}` ({} characters, {}) or the block name `{label}`",
                    id.chars().count(),
                    if self.experiment.span.is_some() {
                        "set by `experiment`"
                    } else {
                        "from the manifest's file name; set `experiment = \"...\"` to choose another"
                    }
                )),
                _ => d.with_help(format!("rename the block `{label}`")),
            };
            self.diags.push(d);
        }
    }
}

/// How messages name a resource kind.
fn kind_noun(kind: ResourceKind) -> &'static str {
    match kind {
        ResourceKind::ResourceGroup => "resource group",
        ResourceKind::VirtualNetwork => "virtual network",
        ResourceKind::NetworkSecurityGroup => "network security group",
        ResourceKind::PublicIp => "public IP",
        ResourceKind::NetworkInterface => "network interface",
        ResourceKind::ProximityPlacementGroup => "proximity placement group",
        ResourceKind::AvailabilitySet => "availability set",
        ResourceKind::VirtualMachine => "virtual machine",
        ResourceKind::ManagedDisk => "managed disk",
        ResourceKind::StorageAccount => "storage account",
        ResourceKind::BlobContainer => "blob container",
        ResourceKind::FileShare => "file share",
        ResourceKind::AutoShutdownSchedule => "auto-shutdown schedule",
        ResourceKind::Sas => "SAS",
        ResourceKind::KeyVault => "key vault",
        ResourceKind::LogAnalyticsWorkspace => "Log Analytics workspace",
        ResourceKind::AppInsights => "Application Insights component",
        ResourceKind::ContainerRegistry => "container registry",
        ResourceKind::MlWorkspace => "Azure Machine Learning workspace",
        ResourceKind::MlCompute => "AmlCompute cluster",
        ResourceKind::RoleDefinition => "role definition",
        ResourceKind::RoleAssignment => "role assignment",
        ResourceKind::AksCluster => "AKS cluster",
        ResourceKind::AksPool => "AKS node pool",
    }
}
