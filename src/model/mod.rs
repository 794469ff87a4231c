//! The desired world: what a manifest asks for, after evaluation and expansion.
//!
//! The manifest layer produces a [`Desired`]; the planner diffs it against the state; the engine
//! turns each [`Resource`] into ARM calls. Resources refer to each other by [`Address`] (in
//! `depends_on` and in attribute values such as a NIC's `subnet`), never by ARM id, so that a plan
//! can be made offline without knowing the subscription. The ARM id is derived from the address's
//! deterministic name when the subscription is known ([`Resource::arm_id`]).

pub mod duration;
mod kind;
mod kube;

pub use kind::ResourceKind;
pub use kube::{KubeObject, object_id};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::addr::Address;
use crate::diag::Span;

/// Attribute values of a resource: what dsinfra manages and diffs. Values are JSON so they can be
/// stored in state and shown in plans as-is; references to other resources are address strings.
pub type Attrs = BTreeMap<String, Value>;

/// Tags dsinfra puts on every ARM resource so it can always be traced back to its manifest.
pub mod tags {
    /// The experiment (manifest id) the resource belongs to.
    pub const EXPERIMENT: &str = "dsinfra-experiment";
    /// The resource's address in the manifest.
    pub const ADDRESS: &str = "dsinfra-address";
    /// Marks the resource as created by dsinfra.
    pub const MANAGED_BY: &str = "managed-by";
}

/// Lifecycle flags from the manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifecycle {
    /// Refuse to delete or replace this resource.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prevent_destroy: bool,
}

/// One Azure resource (or locally signed SAS) the manifest asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// Stable address, e.g. `vm.gpu.nic`.
    pub address: Address,
    /// Resource type.
    pub kind: ResourceKind,
    /// Deterministic Azure name (valid per the naming rules for its kind).
    pub name: String,
    /// Name of the parent resource for child types (the storage account of a container or share).
    pub parent: Option<String>,
    /// Resource group the resource lives in (for a resource group: its own name).
    pub resource_group: String,
    /// Attributes dsinfra manages; the plan diffs these.
    pub attrs: Attrs,
    /// Resources that must exist before this one (from references and from block structure).
    pub depends_on: BTreeSet<Address>,
    /// Lifecycle flags.
    pub lifecycle: Lifecycle,
    /// Where in the manifest this resource comes from (the block header), for diagnostics.
    pub span: Option<Span>,
    /// Where the manifest writes single attributes that a plan-time diagnostic can point at (a
    /// disk's `size_gb` and `sku`, a VM's `os_disk_size_gb`), by attribute name. Only the
    /// manifest layer fills it; a resource built any other way has none and its diagnostics fall
    /// back to `span`.
    pub attr_spans: BTreeMap<String, Span>,
}

/// The manifest's name for a resource whose Azure name is made at apply
/// ([`ResourceKind::named_at_apply`]).
pub const NAMED_AT_APPLY: &str = "(known after apply)";

impl Resource {
    /// The ARM resource id in a subscription.
    pub fn arm_id(&self, subscription: &str) -> String {
        arm_id(
            subscription,
            self.kind,
            &self.resource_group,
            self.parent.as_deref(),
            &self.name,
        )
    }
}

/// The ARM id of a resource from its parts (see [`Resource::arm_id`]).
pub fn arm_id(
    subscription: &str,
    kind: ResourceKind,
    resource_group: &str,
    parent: Option<&str>,
    name: &str,
) -> String {
    let group = format!("/subscriptions/{subscription}/resourceGroups/{resource_group}");
    let parent = parent.unwrap_or_default();
    match kind {
        ResourceKind::ResourceGroup => {
            format!("/subscriptions/{subscription}/resourceGroups/{name}")
        }
        ResourceKind::BlobContainer => format!(
            "{group}/providers/Microsoft.Storage/storageAccounts/{parent}/blobServices/default/containers/{name}"
        ),
        ResourceKind::FileShare => format!(
            "{group}/providers/Microsoft.Storage/storageAccounts/{parent}/fileServices/default/shares/{name}"
        ),
        ResourceKind::Sas => format!("{group}/sas/{parent}/{name}"),
        ResourceKind::MlCompute => format!(
            "{group}/providers/Microsoft.MachineLearningServices/workspaces/{parent}/computes/{name}"
        ),
        ResourceKind::AksPool => format!(
            "{group}/providers/Microsoft.ContainerService/managedClusters/{parent}/agentPools/{name}"
        ),
        other => format!("{group}/providers/{}/{name}", other.arm_type()),
    }
}

/// The `azure` block: where and how the experiment's resources are created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AzureSettings {
    /// Subscription id; `None` when neither the manifest nor `AZURE_SUBSCRIPTION_ID` sets it
    /// (offline planning still works).
    pub subscription: Option<String>,
    /// Default Azure region for every resource.
    pub location: String,
    /// The experiment's resource group.
    pub resource_group: String,
    /// Tags applied to every resource, besides dsinfra's own.
    pub tags: BTreeMap<String, String>,
    /// ARM endpoint override (an emulator, a sovereign cloud).
    pub endpoint: Option<String>,
}

/// The manifest's `backend "azureblob"` block: where the state is kept when it is not the local
/// file next to the manifest. Holds no secret: a SAS is only named by the environment variable
/// that carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendConfig {
    /// The storage account name.
    pub account: String,
    /// The blob container holding the state (it must exist).
    pub container: String,
    /// The state blob's name in the container.
    pub key: String,
    /// The blob endpoint; `None` means `https://<account>.blob.core.windows.net`.
    pub endpoint: Option<String>,
    /// The environment variable holding a SAS (tests, CI); `None` means Azure AD.
    pub sas_env: Option<String>,
}

impl BackendConfig {
    /// The blob endpoint: the one written, or the account's public endpoint.
    pub fn blob_endpoint(&self) -> String {
        self.endpoint
            .clone()
            .unwrap_or_else(|| format!("https://{}.blob.core.windows.net", self.account))
    }
}

/// Which nodes of a VM or cluster a step runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepScope {
    /// Every node.
    All,
    /// The head node (node 0) only.
    Head,
}

/// When a step runs again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunPolicy {
    /// Once, until its content changes.
    Once,
    /// Once per boot (mounts, caches and scratch on the temp disk).
    PerBoot,
    /// Every apply.
    Always,
}

/// A post-boot step declared inside a `vm` or `cluster` block.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The `vm`/`cluster` block the step belongs to (`cluster.train`).
    pub block: Address,
    /// The step's name, unique within its block (defaults to its kind).
    pub name: String,
    /// Built-in step kind (`mofed`, `blobfuse2`, `stage`, ...) or `script` for user steps.
    pub kind: String,
    /// Nodes it runs on.
    pub scope: StepScope,
    /// When it runs again.
    pub run: RunPolicy,
    /// Parameters after evaluation; references to secrets are address strings, never values.
    pub params: BTreeMap<String, Value>,
    /// Where it was declared.
    pub span: Option<Span>,
}

/// Built-in steps that build and load kernel modules on the node: `mofed` (OFED drivers with
/// `--add-kernel-support`) and `beeond` (the BeeGFS client module). Secure Boot refuses to load
/// such locally built, unsigned modules.
pub const KERNEL_MODULE_STEPS: [&str; 2] = ["mofed", "beeond"];

/// The name of the step generated for a `disk` block with `mount` on the VM it is attached to
/// (`disk-datasets`): the manifest names it, and the engine finds its marker by it when the disk
/// leaves that VM.
pub fn data_disk_step_name(disk_label: &str) -> String {
    format!("disk-{disk_label}")
}

impl Step {
    /// Whether the step builds and loads kernel modules (see [`KERNEL_MODULE_STEPS`]).
    pub fn builds_kernel_modules(&self) -> bool {
        KERNEL_MODULE_STEPS.contains(&self.kind.as_str())
    }

    /// A digest of what the manifest says about this step (kind, scope, run policy and
    /// parameters, which name secrets by address, never by value). State records it for every
    /// node the step succeeded on, so a plan can tell, offline, which steps are new or changed;
    /// the node's own markers (over the rendered script) stay the final word when apply runs.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest as _, Sha256};
        // serde_json writes object keys in order (BTreeMap / sorted Map), so equal parameters
        // always give the same bytes.
        let text = serde_json::json!({
            "kind": self.kind,
            "scope": self.scope,
            "run": self.run,
            "params": self.params,
        })
        .to_string();
        hex::encode(Sha256::digest(format!(
            "dsinfra-step-fingerprint-v1\n{text}"
        )))
    }
}

/// An `output` block.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Output name.
    pub name: String,
    /// Value; strings of the form `(known after apply: ADDRESS.ATTR)` stand for values only ARM
    /// knows (see [`known_after_apply`]).
    pub value: Value,
    /// Whether the value is secret (never printed unless `--show-secrets`).
    pub sensitive: bool,
    /// Description from the manifest.
    pub description: Option<String>,
}

/// The placeholder for a value that only exists after apply, such as a VM's public IP.
pub fn known_after_apply(address: &Address, attribute: &str) -> Value {
    Value::String(format!("(known after apply: {address}.{attribute})"))
}

/// In a block's note whose Trusted Launch waits for Azure's answer (the manifest layer could not
/// tell whether the size and image support it), what follows this is what the block gets where
/// they do; the connected plan keeps it as the reason of its decision.
pub const SECURITY_WHERE_SUPPORTED: &str = "Where both support it: ";

/// Everything a manifest asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    /// The manifest id: every resource is tagged with it. Defaults to the manifest's file stem.
    pub experiment: String,
    /// Azure settings.
    pub azure: AzureSettings,
    /// Resources in a stable order (by address).
    pub resources: Vec<Resource>,
    /// Post-boot steps in manifest order.
    pub steps: Vec<Step>,
    /// Outputs in manifest order.
    pub outputs: Vec<Output>,
    /// SHA-256 (hex) of the manifest text and the variable values: binds saved plans.
    pub manifest_hash: String,
    /// Choices the manifest left to dsinfra that the plan explains, per block (`cluster.train`):
    /// shown as the plan's notes when the block's VMs are created or replaced (the only time
    /// they apply), e.g. why its VMs run with Secure Boot off.
    pub notes: Vec<(Address, String)>,
    /// `park { idle = "45m" }` (issue 18): per `vm` or `cluster` block address (`cluster.train`),
    /// the window after which the block's head parks the block's VMs when they are idle. Blocks
    /// without `idle` are absent and never touched by a watcher.
    pub park_idle: BTreeMap<Address, Duration>,
    /// Kubernetes objects for the AKS clusters (`aks` blocks' `manifest`, `blob_volume` and
    /// device plugin), in manifest order.
    pub kube_objects: Vec<KubeObject>,
    /// The VM sizes the manifest was judged against: the shipped catalog and the sizes a
    /// connected command learnt from live Resource SKUs (issue 31). Every size fact about this
    /// manifest is read here.
    pub catalog: crate::catalog::Catalog,
}

impl Desired {
    /// The facts of a VM size, as this manifest was judged against them.
    pub fn vm_size(&self, name: &str) -> Option<&crate::catalog::VmSize> {
        self.catalog.vm_size(name)
    }

    /// The resource at an address.
    pub fn resource(&self, address: &Address) -> Option<&Resource> {
        self.resources.iter().find(|r| &r.address == address)
    }

    /// The idle window of a `vm` or `cluster` block (`cluster.train`), when it has
    /// `park { idle }`.
    pub fn park_idle_of(&self, block: &Address) -> Option<Duration> {
        self.park_idle.get(&block.block_address()).copied()
    }

    /// Whether anything runs on the VMs after they boot: steps, or the idle watcher the engine
    /// puts on the head of a block with `park { idle }` (a block may have that and no steps).
    pub fn has_post_boot(&self) -> bool {
        !self.steps.is_empty() || !self.park_idle.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_ids_follow_the_provider_paths() {
        assert_eq!(
            arm_id("s", ResourceKind::ResourceGroup, "rg", None, "rg"),
            "/subscriptions/s/resourceGroups/rg"
        );
        assert_eq!(
            arm_id("s", ResourceKind::VirtualMachine, "rg", None, "vm1"),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1"
        );
        assert_eq!(
            arm_id("s", ResourceKind::BlobContainer, "rg", Some("acct"), "raw"),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/acct/blobServices/default/containers/raw"
        );
        assert_eq!(
            arm_id(
                "s",
                ResourceKind::AutoShutdownSchedule,
                "rg",
                None,
                "shutdown-computevm-gpu"
            ),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.DevTestLab/schedules/shutdown-computevm-gpu"
        );
    }
}
