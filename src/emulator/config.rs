//! What an emulated cloud looks like: where it keeps its state, how slow it is, which VM sizes
//! exist, the quota and SKU restrictions of the subscription, and faults to inject from start.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::faults::FaultRule;
use super::hooks::{AmlNodeHook, VmBootHook, VmEvictHook};
use super::storage_plane::BlobDataPlane;

/// One VM size the emulated compute provider knows, with what Resource SKUs reports for it.
///
/// Every fact past the quota's (name, vCPUs, family) is optional: a fact left unknown is left
/// out of the SKUs answer, as ARM leaves out a capability a size does not state, and the checks
/// that read it (premium disks, accelerated networking) allow what they cannot judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmSizeSpec {
    /// ARM size name, e.g. `Standard_ND40rs_v2` (compared case-insensitively).
    pub name: String,
    /// vCPUs, counted against quota.
    pub vcpus: u32,
    /// Quota family as the usages API names it, e.g. `standardNDSv2Family`.
    pub family: String,
    /// Memory in MB, when known: the VM sizes list shows it (and leaves it out otherwise rather
    /// than inventing a number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u32>,
    /// The local temporary disk in MB (0: none), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_disk_mb: Option<u32>,
    /// Locations that offer the size (`eastus`); empty means every configured location.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<String>,
    /// vCPUs the guest sees, when fewer than `vcpus` (constrained-core sizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus_available: Option<u32>,
    /// GPUs, when known (0: none); a fraction for a size that gets part of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<f64>,
    /// Hyper-V generations the size boots (`1`, `2`); empty when not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generations: Vec<u8>,
    /// Has an RDMA (InfiniBand) interface, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<bool>,
    /// Supports accelerated networking on its NICs, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerated_networking: Option<bool>,
    /// Can attach Premium SSD (v1 and v2) disks, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub premium_io: Option<bool>,
    /// The day Azure retired or retires the size, if announced. From that day on the size is
    /// not available to any subscription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retirement_date: Option<NaiveDate>,
    /// Whether ARM accepts Trusted Launch for it: `Some(false)` is Resource SKUs'
    /// `TrustedLaunchDisabled: True` (and a refused VM PUT); `None`, as on Azure, says nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_launch: Option<bool>,
    /// An Arm64 processor (`CpuArchitectureType: Arm64`); x64 otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub arm64: bool,
    /// Local NVMe capacity in MiB (`NvmeDiskSizeInMiB`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme_mib: Option<u64>,
}

impl VmSizeSpec {
    /// Convenience constructor for config tables: a size offered everywhere, its other facts
    /// unknown.
    pub fn new(name: &str, vcpus: u32, family: &str) -> Self {
        Self {
            name: name.to_owned(),
            vcpus,
            family: family.to_owned(),
            memory_mb: None,
            resource_disk_mb: None,
            locations: Vec::new(),
            vcpus_available: None,
            gpus: None,
            generations: Vec::new(),
            rdma: None,
            accelerated_networking: None,
            premium_io: None,
            retirement_date: None,
            trusted_launch: None,
            arm64: false,
            nvme_mib: None,
        }
    }

    /// The same size with its memory and, when known, its temporary disk, in MB.
    #[must_use]
    pub fn with_memory(mut self, memory_mb: u32, resource_disk_mb: Option<u32>) -> Self {
        self.memory_mb = Some(memory_mb);
        self.resource_disk_mb = resource_disk_mb;
        self
    }

    /// The same size offered only in `locations`.
    #[must_use]
    pub fn in_locations<S: AsRef<str>>(mut self, locations: &[S]) -> Self {
        self.locations = locations
            .iter()
            .map(|l| normalize_location(l.as_ref()))
            .collect();
        self
    }

    /// Whether the size is offered in `location` (a normalised location such as `eastus`).
    pub fn offered_in(&self, location: &str) -> bool {
        // Compared in place: the SKUs list asks this of every size for every location.
        self.locations.is_empty()
            || self.locations.iter().any(|l| {
                l.chars()
                    .filter(|c| !c.is_whitespace())
                    .flat_map(char::to_lowercase)
                    .eq(location.chars())
            })
    }

    /// Whether the size is retired on `day`: on or after its retirement date.
    pub fn retired_on(&self, day: NaiveDate) -> bool {
        self.retirement_date.is_some_and(|date| date <= day)
    }
}

/// The sizes of arm.md §6 plus the small sizes the spec examples use, so the emulator accepts
/// the official examples and every size the catalog prices.
pub fn default_vm_sizes() -> Vec<VmSizeSpec> {
    [
        ("Standard_ND40rs_v2", 40, "standardNDSv2Family"),
        ("Standard_NC6", 6, "standardNCFamily"),
        ("Standard_NC6s_v3", 6, "standardNCSv3Family"),
        ("Standard_NC24ads_A100_v4", 24, "StandardNCADSA100v4Family"),
        ("Standard_ND96asr_v4", 96, "standardNDASv4_A100Family"),
        ("Standard_ND96isr_H100_v5", 96, "standardNDSH100v5Family"),
        ("Standard_D1_v2", 1, "standardDv2Family"),
        ("Standard_D2_v2", 2, "standardDv2Family"),
        ("Standard_D3_v2", 4, "standardDv2Family"),
        ("Standard_D2s_v5", 2, "standardDSv5Family"),
        ("Standard_D4s_v5", 4, "standardDSv5Family"),
        ("Standard_B2s", 2, "standardBSFamily"),
        ("Standard_L32s_v2", 32, "standardLSv2Family"),
    ]
    .into_iter()
    .map(|(name, vcpus, family)| {
        let mut size = VmSizeSpec::new(name, vcpus, family);
        // Issue 29: ARM refuses Trusted Launch on NDasrA100_v4.
        if name == "Standard_ND96asr_v4" {
            size.trusted_launch = Some(false);
        }
        size
    })
    .collect()
}

/// A vCPU limit for one quota family in one location (`*` matches every location).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaLimit {
    /// Location such as `eastus`, or `*`.
    pub location: String,
    /// Quota family, e.g. `standardNDSv2Family`.
    pub family: String,
    /// vCPU limit.
    pub limit: u32,
}

/// The subscription's vCPU quotas. Defaults are generous so manifests can be tried offline;
/// tests set a family to 0 to see the real OperationNotAllowed error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaConfig {
    /// Limit for a family with no entry in `limits`.
    pub default_family_limit: u32,
    /// The "Total Regional Cores" limit per location.
    pub regional_limit: u32,
    /// The "Total Regional Low-priority vCPUs" limit per location (`lowPriorityCores`): what
    /// spot VMs count against.
    #[serde(default = "default_low_priority_limit")]
    pub low_priority_limit: u32,
    /// Specific limits; the first match wins.
    pub limits: Vec<QuotaLimit>,
}

/// How long Azure gives a spot VM between the Preempt notice and its eviction (the documented
/// minimum), and what `simulateEviction` gives in the emulator unless configured otherwise.
pub const DEFAULT_NOTICE_SECS: u64 = 30;

fn default_low_priority_limit() -> u32 {
    1000
}

impl Default for QuotaConfig {
    fn default() -> Self {
        Self {
            default_family_limit: 1000,
            regional_limit: 5000,
            low_priority_limit: default_low_priority_limit(),
            limits: Vec::new(),
        }
    }
}

impl QuotaConfig {
    /// The limit for `family` in `location` (a normalised location such as `eastus`).
    pub fn family_limit(&self, location: &str, family: &str) -> u32 {
        self.limits
            .iter()
            .find(|l| {
                l.family.eq_ignore_ascii_case(family)
                    && (l.location == "*" || normalize_location(&l.location) == location)
            })
            .map_or(self.default_family_limit, |l| l.limit)
    }
}

/// A VM size not offered to the subscription in a location, or only in some zones of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkuRestriction {
    /// VM size name.
    pub size: String,
    /// Location such as `eastus`.
    pub location: String,
    /// Restricted zones; empty means the whole location.
    #[serde(default)]
    pub zones: Vec<String>,
}

/// A token bucket: how many requests it holds, and how many come back a minute.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BucketShape {
    /// Requests the full bucket allows at once.
    pub capacity: u32,
    /// Tokens added back a minute (counted on the emulator's compressed clock); a fraction
    /// lets tests refill slower than one a minute.
    pub refill_per_minute: f64,
}

/// Compute's own limits on writes to a virtual machine, applied after ARM's buckets: one bucket
/// per VM and one per subscription for each of Compute's VM write policies (create, update and
/// actions, delete and deallocate). The defaults are Compute's documented ones: 12 per VM
/// refilled 4 a minute, 1,500 per subscription refilled 500 a minute ("Compute throttling
/// limits", <https://learn.microsoft.com/azure/virtual-machines/compute-throttling-limits>).
/// Tests set small VM buckets to meet the limit in a few requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ComputeLimits {
    /// Each VM's bucket, per policy.
    pub per_vm: BucketShape,
    /// The subscription's bucket, per policy, shared by all its VMs.
    pub per_subscription: BucketShape,
}

impl Default for ComputeLimits {
    fn default() -> Self {
        Self {
            per_vm: BucketShape {
                capacity: 12,
                refill_per_minute: 4.0,
            },
            per_subscription: BucketShape {
                capacity: 1500,
                refill_per_minute: 500.0,
            },
        }
    }
}

/// Items per list page unless configured: the largest page ARM's resource lists are seen to
/// send (Azure documents no single size), so a list dsinfra makes fits one page here as it does
/// there (see docs/emulator.md, "Paging").
pub const DEFAULT_PAGE_SIZE: usize = 1000;

/// A caller the emulator knows ([`EmulatorConfig::callers`]): a bearer token and the principal
/// (an object id) it stands for.
#[derive(Clone, PartialEq, Eq)]
pub struct Caller {
    /// The bearer token, as sent.
    pub token: String,
    /// The principal's object id: role assignments name it.
    pub principal: String,
}

/// Everything that shapes an emulated cloud.
#[derive(Clone)]
pub struct EmulatorConfig {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Directory holding `state.json`, so separate runs see the same cloud. `None` keeps the cloud
    /// in memory only.
    pub state_dir: Option<PathBuf>,
    /// Multiplies every operation's duration: 1.0 is near reality, 0.01 suits tests, 0 completes
    /// every operation at once (still reported as in progress in the first response).
    pub latency_scale: f64,
    /// When set, only this bearer token is accepted; otherwise any non-empty token is.
    pub required_token: Option<String>,
    /// vCPU quotas.
    pub quotas: QuotaConfig,
    /// SKU restrictions reported by the SKUs API and enforced on VM PUT.
    pub sku_restrictions: Vec<SkuRestriction>,
    /// Whether ARM's per-subscription token buckets and Compute's VM limits answer 429 when
    /// empty. The remaining-count headers are sent either way.
    pub throttle: bool,
    /// Compute's per-VM and per-subscription limits on VM writes.
    pub compute_limits: ComputeLimits,
    /// The most items one answer of a list carries; longer lists continue at `nextLink`.
    /// Defaults to [`DEFAULT_PAGE_SIZE`]; tests set 1 so every list of two items pages.
    pub page_size: usize,
    /// The VM sizes the compute provider knows.
    pub vm_sizes: Vec<VmSizeSpec>,
    /// Locations the SKUs API lists.
    pub locations: Vec<String>,
    /// Provider namespaces the subscription starts out not registered for (e.g.
    /// `Microsoft.DevTestLab`): their requests answer ARM's 409 `MissingSubscriptionRegistration`
    /// until a `POST .../providers/{namespace}/register` (see registry.rs). Empty by default:
    /// every namespace the emulator serves starts registered.
    pub unregistered: Vec<String>,
    /// Preview features the subscription is registered for, as `Namespace/Name`. Two change
    /// what a VM PUT gets (issue 29; docs/emulator.md "Trusted Launch"): with
    /// [`TRUSTED_LAUNCH_BY_DEFAULT`] a Generation 2 VM created without a security type gets
    /// Trusted Launch with Secure Boot; without [`USE_STANDARD_SECURITY_TYPE`] a body that states
    /// `securityType: Standard` is refused. Empty by default, as a new subscription is.
    pub features: Vec<String>,
    /// Marketplace images (`publisher:offer:sku`) whose `features` lack `SecurityType`, so ARM
    /// refuses Trusted Launch for them (compute/images.rs). Images the shared image table knows
    /// keep its facts. Empty by default.
    pub no_trusted_launch_images: Vec<String>,
    /// Principals the directory holds besides the VMs' identities (users, groups, service
    /// principals made outside the emulator), by object id: role assignments may name them. The
    /// emulator has no Entra ID; empty by default.
    pub principals: Vec<String>,
    /// Callers whose rights the emulator checks, as ARM does for every token: each bearer token
    /// listed here is the principal beside it, and may do only what that principal's role
    /// assignments allow (the `permissions` API answers from them too). Other tokens keep full
    /// access, as before (an Owner). Empty by default. Issue 30: a Contributor-only user.
    pub callers: Vec<Caller>,
    /// How long new principals and new custom roles stay invisible to role assignments after
    /// they are made (real-world time, scaled by `latency_scale`): an assignment naming one sooner
    /// is refused with `PrincipalNotFound` (even with `principalType` set) or
    /// `RoleDefinitionDoesNotExist`, as Microsoft Entra ID's replication sometimes makes ARM do
    /// (issue 30). Zero by default; a principal without `principalType` waits a minute anyway.
    pub replication_lag: Duration,
    /// Faults active from the start.
    pub faults: Vec<FaultRule>,
    /// A JSON file with a list of [`FaultRule`]s, loaded at start.
    pub faults_file: Option<PathBuf>,
    /// Checks every ARM request that reaches a provider (after authentication, injected faults,
    /// throttling and the api-version check, as ARM's front door comes before the provider's
    /// own validation). When it reports anything, the emulator answers 400
    /// `InvalidRequestContent` with the violations in the message and `details`, and records
    /// them for [`super::EmulatorHandle::request_violations`]. `None` (the default) checks
    /// nothing. The emulator stays free of spec knowledge: tests plug the spec validator in here.
    pub request_validator: Option<RequestValidator>,
    /// Checks every ARM answer as it leaves (admin routes excepted). Violations change nothing on
    /// the wire; they are recorded for [`super::EmulatorHandle::response_violations`].
    pub response_validator: Option<ResponseValidator>,
    /// Called once for every VM whose creation succeeds, outside every emulator lock, with what
    /// the VM was created with (customData decoded). A returned `127.0.0.1:PORT` becomes the SSH
    /// endpoint of the VM's public and private IP until the VM is deleted. Tests start a real
    /// sshd per VM here; `None` (the default) boots nothing.
    pub on_vm_boot: Option<VmBootHook>,
    /// Called once for every AmlCompute node as it becomes idle, outside every emulator lock,
    /// with the node's addresses, port and the cluster's admin user and key. A returned address
    /// becomes the SSH endpoint of the cluster's public IP at the node's port, and of the node's
    /// private IP, until the node leaves (scale-down, delete). `None` (the default) boots nothing.
    pub on_aml_node: Option<AmlNodeHook>,
    /// Called once for every spot VM an eviction deallocated or deleted, outside every emulator
    /// lock: tests stop the sshd standing for it, as the VM stops. A VM evicted and started
    /// again boots again through [`EmulatorConfig::on_vm_boot`].
    pub on_vm_evict: Option<VmEvictHook>,
    /// Seconds between a spot eviction's Preempt notice and the eviction, for `simulateEviction`
    /// (Azure gives at least 30; tests give a few).
    pub eviction_notice_secs: u64,
    /// Serves the blob data plane of the storage accounts it names from an Azurite: their
    /// `primaryEndpoints.blob` is Azurite's URL for the account and `listKeys` answers the key
    /// Azurite knows (see storage_plane.rs). `None` (the default): every account advertises the
    /// public endpoint and random keys, and has no data plane.
    pub blob_data_plane: Option<BlobDataPlane>,
    /// The published Kubernetes schemas the AKS clusters' API checks objects against
    /// (`kubernetes-validate`'s directory of one release, see `crate::kubeschema`). `None`: only
    /// a CRD's own schema is checked, and built-in kinds are taken as sent.
    pub kube_schemas: Option<Arc<crate::kubeschema::Schemas>>,
}

/// What a validator is told about one ARM request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestInfo {
    /// Upper-case HTTP method, e.g. `PUT`.
    pub method: String,
    /// The URL path as sent (no query string), e.g.
    /// `/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v`.
    pub path: String,
    /// The `api-version` query parameter; `None` only for answers to a request without one.
    pub api_version: Option<String>,
    /// The parsed JSON body; `None` when the request had no body (or, for answers, one that is
    /// not JSON).
    pub body: Option<Value>,
}

/// What a response validator is told about one ARM answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseInfo {
    /// HTTP status.
    pub status: u16,
    /// The JSON body, if the answer has one.
    pub body: Option<Value>,
}

/// Checks one request; each returned string is one violation (empty means valid).
pub type RequestValidator = Arc<dyn Fn(&RequestInfo) -> Vec<String> + Send + Sync>;

/// Checks one answer to a request; each returned string is one violation.
pub type ResponseValidator = Arc<dyn Fn(&RequestInfo, &ResponseInfo) -> Vec<String> + Send + Sync>;

/// One violation a validator reported, with the request it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedViolation {
    /// Upper-case HTTP method.
    pub method: String,
    /// The URL path, without the query string.
    pub path: String,
    /// The answer's status for a response violation; `None` for a request violation.
    pub status: Option<u16>,
    /// What the validator said.
    pub message: String,
}

impl std::fmt::Display for RecordedViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(status) => write!(
                f,
                "{} {} answered {status}: {}",
                self.method, self.path, self.message
            ),
            None => write!(f, "{} {}: {}", self.method, self.path, self.message),
        }
    }
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            port: 0,
            state_dir: None,
            latency_scale: 1.0,
            required_token: None,
            quotas: QuotaConfig::default(),
            sku_restrictions: Vec::new(),
            throttle: true,
            compute_limits: ComputeLimits::default(),
            page_size: DEFAULT_PAGE_SIZE,
            vm_sizes: default_vm_sizes(),
            locations: [
                "eastus",
                "eastus2",
                "westus2",
                "westus3",
                "westeurope",
                "northeurope",
            ]
            .into_iter()
            .map(str::to_owned)
            .collect(),
            unregistered: Vec::new(),
            features: Vec::new(),
            no_trusted_launch_images: Vec::new(),
            principals: Vec::new(),
            replication_lag: Duration::ZERO,
            callers: Vec::new(),
            faults: Vec::new(),
            faults_file: None,
            request_validator: None,
            response_validator: None,
            on_vm_boot: None,
            on_aml_node: None,
            on_vm_evict: None,
            eviction_notice_secs: DEFAULT_NOTICE_SECS,
            blob_data_plane: None,
            kube_schemas: None,
        }
    }
}

/// Debug output never shows the required token.
impl std::fmt::Debug for EmulatorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorConfig")
            .field("port", &self.port)
            .field("state_dir", &self.state_dir)
            .field("latency_scale", &self.latency_scale)
            .field(
                "required_token",
                &self.required_token.as_ref().map(|_| "<redacted>"),
            )
            .field("quotas", &self.quotas)
            .field("sku_restrictions", &self.sku_restrictions)
            .field("throttle", &self.throttle)
            .field("compute_limits", &self.compute_limits)
            .field("page_size", &self.page_size)
            .field("vm_sizes", &self.vm_sizes.len())
            .field("locations", &self.locations)
            .field("unregistered", &self.unregistered)
            .field("features", &self.features)
            .field("no_trusted_launch_images", &self.no_trusted_launch_images)
            .field("principals", &self.principals)
            .field("replication_lag", &self.replication_lag)
            .field(
                "callers",
                &self
                    .callers
                    .iter()
                    .map(|c| c.principal.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("faults", &self.faults)
            .field("faults_file", &self.faults_file)
            .field("request_validator", &self.request_validator.is_some())
            .field("response_validator", &self.response_validator.is_some())
            .field("on_vm_boot", &self.on_vm_boot.is_some())
            .field("on_aml_node", &self.on_aml_node.is_some())
            .field("on_vm_evict", &self.on_vm_evict.is_some())
            .field("eviction_notice_secs", &self.eviction_notice_secs)
            .field("blob_data_plane", &self.blob_data_plane)
            .field("kube_schemas", &self.kube_schemas)
            .finish()
    }
}

impl EmulatorConfig {
    /// The VM families of the sizes offered in `location` (normalized), sorted, each once: the
    /// families a usages answer lists, for VMs and for AmlCompute alike.
    pub fn families_offered_in(&self, location: &str) -> Vec<&str> {
        let mut families: Vec<&str> = self
            .vm_sizes
            .iter()
            .filter(|s| s.offered_in(location))
            .map(|s| s.family.as_str())
            .collect();
        families.sort_unstable();
        families.dedup();
        families
    }

    /// Looks a size up case-insensitively.
    pub fn vm_size(&self, name: &str) -> Option<&VmSizeSpec> {
        self.vm_sizes
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
    }

    /// Scales a real-world duration by `latency_scale`.
    pub fn scaled(&self, real: Duration) -> Duration {
        if self.latency_scale <= 0.0 || !self.latency_scale.is_finite() {
            return Duration::ZERO;
        }
        real.mul_f64(self.latency_scale)
    }
}

/// ARM accepts `East US` and `eastus` alike; quotas, SKUs and usages use the short form.
pub fn normalize_location(location: &str) -> String {
    location
        .chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The preview feature that gives REST and SDK clients Trusted Launch by default (the portal,
/// CLI and PowerShell have it for everyone).
pub const TRUSTED_LAUNCH_BY_DEFAULT: &str = "Microsoft.Compute/TrustedLaunchByDefaultPreview";

/// The feature a subscription needs before ARM accepts `securityType: Standard` in a VM body.
pub const USE_STANDARD_SECURITY_TYPE: &str = "Microsoft.Compute/UseStandardSecurityType";

impl EmulatorConfig {
    /// Whether the subscription is registered for the preview feature `name` (`Namespace/Name`).
    pub fn has_feature(&self, name: &str) -> bool {
        self.features.iter().any(|f| f.eq_ignore_ascii_case(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_limits_match_family_and_location() {
        let quotas = QuotaConfig {
            default_family_limit: 10,
            regional_limit: 100,
            low_priority_limit: 1000,
            limits: vec![
                QuotaLimit {
                    location: "East US".into(),
                    family: "standardNDSv2Family".into(),
                    limit: 0,
                },
                QuotaLimit {
                    location: "*".into(),
                    family: "standardDv2Family".into(),
                    limit: 4,
                },
            ],
        };
        assert_eq!(quotas.family_limit("eastus", "standardndsv2family"), 0);
        assert_eq!(quotas.family_limit("westus2", "standardNDSv2Family"), 10);
        assert_eq!(quotas.family_limit("westus2", "standardDv2Family"), 4);
    }

    #[test]
    fn debug_output_hides_the_required_token() {
        let config = EmulatorConfig {
            required_token: Some("s3cret-token".into()),
            ..EmulatorConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("s3cret-token"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn scale_zero_means_instant() {
        let config = EmulatorConfig {
            latency_scale: 0.0,
            ..EmulatorConfig::default()
        };
        assert_eq!(config.scaled(Duration::from_secs(90)), Duration::ZERO);
        let config = EmulatorConfig {
            latency_scale: 0.01,
            ..EmulatorConfig::default()
        };
        assert_eq!(
            config.scaled(Duration::from_secs(90)),
            Duration::from_millis(900)
        );
    }

    #[test]
    fn validators_are_off_by_default_and_shown_only_as_present() {
        let config = EmulatorConfig::default();
        assert!(config.request_validator.is_none() && config.response_validator.is_none());
        let hooked = EmulatorConfig {
            request_validator: Some(Arc::new(|_: &RequestInfo| Vec::new())),
            ..EmulatorConfig::default()
        };
        let shown = format!("{hooked:?}");
        assert!(shown.contains("request_validator: true"), "{shown}");
        assert!(shown.contains("response_validator: false"), "{shown}");
    }

    #[test]
    fn recorded_violations_name_the_request_and_the_status() {
        let request = RecordedViolation {
            method: "PUT".into(),
            path: "/subscriptions/s/resourceGroups/rg".into(),
            status: None,
            message: "$.x: UnknownProperty".into(),
        };
        assert_eq!(
            request.to_string(),
            "PUT /subscriptions/s/resourceGroups/rg: $.x: UnknownProperty"
        );
        let response = RecordedViolation {
            status: Some(201),
            ..request
        };
        assert_eq!(
            response.to_string(),
            "PUT /subscriptions/s/resourceGroups/rg answered 201: $.x: UnknownProperty"
        );
    }
}
