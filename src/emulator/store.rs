//! The emulated cloud's contents: resources (groups included) and operations, kept in one
//! serialisable value and written atomically to `state.json` after every change, so separate
//! runs of the CLI (apply, then destroy) see the same cloud.
//!
//! Writing the whole cloud costs a serialisation of every resource (about 0.3 MB for a 64-node
//! cluster) and an fsync. Done by every request under the cloud's lock, that cost serialised
//! 64 parallel PUTs behind each other, which real ARM does not do. So changes are numbered
//! ([`Cloud::mark_changed`]) and written by *group commit* ([`Persist`]): one request writes the
//! cloud as it is when its turn comes, and every request whose change that write contained is
//! answered without writing again. A request is still answered only once its change is on disk.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{ArmError, EmulatorError};
use super::json::At as _;
use crate::engine::reach::SshEndpoint;

/// Bumped when the file layout changes incompatibly.
const STATE_VERSION: u32 = 1;

/// The resource types the emulator serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Kind {
    ResourceGroup,
    VirtualNetwork,
    Subnet,
    NetworkSecurityGroup,
    SecurityRule,
    PublicIpAddress,
    NetworkInterface,
    ProximityPlacementGroup,
    AvailabilitySet,
    VirtualMachine,
    Disk,
    StorageAccount,
    BlobContainer,
    FileShare,
    Schedule,
    KeyVault,
    LogAnalyticsWorkspace,
    AppInsights,
    ContainerRegistry,
    MlWorkspace,
    MlCompute,
    ManagedCluster,
    AgentPool,
}

impl Kind {
    /// Every kind, in the order the providers API lists their types.
    pub const ALL: [Kind; 23] = [
        Self::ResourceGroup,
        Self::VirtualNetwork,
        Self::Subnet,
        Self::NetworkSecurityGroup,
        Self::SecurityRule,
        Self::PublicIpAddress,
        Self::NetworkInterface,
        Self::ProximityPlacementGroup,
        Self::AvailabilitySet,
        Self::VirtualMachine,
        Self::Disk,
        Self::StorageAccount,
        Self::BlobContainer,
        Self::FileShare,
        Self::Schedule,
        Self::KeyVault,
        Self::LogAnalyticsWorkspace,
        Self::AppInsights,
        Self::ContainerRegistry,
        Self::MlWorkspace,
        Self::MlCompute,
        Self::ManagedCluster,
        Self::AgentPool,
    ];

    /// Maps a URL resource type (any casing) to a kind.
    pub fn from_type(rtype: &str) -> Option<Self> {
        let kind = match rtype.to_ascii_lowercase().as_str() {
            "microsoft.network/virtualnetworks" => Self::VirtualNetwork,
            "microsoft.network/virtualnetworks/subnets" => Self::Subnet,
            "microsoft.network/networksecuritygroups" => Self::NetworkSecurityGroup,
            "microsoft.network/networksecuritygroups/securityrules" => Self::SecurityRule,
            "microsoft.network/publicipaddresses" => Self::PublicIpAddress,
            "microsoft.network/networkinterfaces" => Self::NetworkInterface,
            "microsoft.compute/proximityplacementgroups" => Self::ProximityPlacementGroup,
            "microsoft.compute/availabilitysets" => Self::AvailabilitySet,
            "microsoft.compute/virtualmachines" => Self::VirtualMachine,
            "microsoft.compute/disks" => Self::Disk,
            "microsoft.storage/storageaccounts" => Self::StorageAccount,
            "microsoft.storage/storageaccounts/blobservices/containers" => Self::BlobContainer,
            "microsoft.storage/storageaccounts/fileservices/shares" => Self::FileShare,
            "microsoft.devtestlab/schedules" => Self::Schedule,
            "microsoft.keyvault/vaults" => Self::KeyVault,
            "microsoft.operationalinsights/workspaces" => Self::LogAnalyticsWorkspace,
            "microsoft.insights/components" => Self::AppInsights,
            "microsoft.containerregistry/registries" => Self::ContainerRegistry,
            "microsoft.machinelearningservices/workspaces" => Self::MlWorkspace,
            "microsoft.machinelearningservices/workspaces/computes" => Self::MlCompute,
            "microsoft.containerservice/managedclusters" => Self::ManagedCluster,
            "microsoft.containerservice/managedclusters/agentpools" => Self::AgentPool,
            _ => return None,
        };
        Some(kind)
    }

    /// The canonical type string ARM returns.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::ResourceGroup => "Microsoft.Resources/resourceGroups",
            Self::VirtualNetwork => "Microsoft.Network/virtualNetworks",
            Self::Subnet => "Microsoft.Network/virtualNetworks/subnets",
            Self::NetworkSecurityGroup => "Microsoft.Network/networkSecurityGroups",
            Self::SecurityRule => "Microsoft.Network/networkSecurityGroups/securityRules",
            Self::PublicIpAddress => "Microsoft.Network/publicIPAddresses",
            Self::NetworkInterface => "Microsoft.Network/networkInterfaces",
            Self::ProximityPlacementGroup => "Microsoft.Compute/proximityPlacementGroups",
            Self::AvailabilitySet => "Microsoft.Compute/availabilitySets",
            Self::VirtualMachine => "Microsoft.Compute/virtualMachines",
            Self::Disk => "Microsoft.Compute/disks",
            Self::StorageAccount => "Microsoft.Storage/storageAccounts",
            Self::BlobContainer => "Microsoft.Storage/storageAccounts/blobServices/containers",
            Self::FileShare => "Microsoft.Storage/storageAccounts/fileServices/shares",
            // DevTestLab answers in lower case (its spec examples do too).
            Self::Schedule => "microsoft.devtestlab/schedules",
            Self::KeyVault => "Microsoft.KeyVault/vaults",
            Self::LogAnalyticsWorkspace => "Microsoft.OperationalInsights/workspaces",
            // Application Insights answers in lower case, as its ids in the AML examples show.
            Self::AppInsights => "microsoft.insights/components",
            Self::ContainerRegistry => "Microsoft.ContainerRegistry/registries",
            Self::MlWorkspace => "Microsoft.MachineLearningServices/workspaces",
            Self::MlCompute => "Microsoft.MachineLearningServices/workspaces/computes",
            // Ids spell it `managedClusters`; a GET's `type` says `ManagedClusters` (the
            // spec's examples), which `aks::render` puts back.
            Self::ManagedCluster => "Microsoft.ContainerService/managedClusters",
            Self::AgentPool => "Microsoft.ContainerService/managedClusters/agentPools",
        }
    }

    /// The provider namespace, as operation URLs spell it.
    pub fn namespace(self) -> &'static str {
        self.type_name().split('/').next().unwrap_or_default()
    }

    /// Network resources carry an etag on every representation.
    pub fn has_etag(self) -> bool {
        self.namespace() == "Microsoft.Network"
    }
}

/// One resource as the emulator stores it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Resource {
    /// The id in the casing of the request that created it.
    pub id: String,
    pub kind: Kind,
    /// The stored representation (id, name, type, location, tags, properties, ...). Values
    /// derived from other resources (a subnet's ipConfigurations) are added on read.
    pub body: Value,
    /// Creation order, so lists and child arrays keep the order they were created in.
    pub seq: u64,
    /// The operation currently running on it.
    #[serde(default)]
    pub op: Option<String>,
    /// Hidden resources answer 404 (a storage account until its creation completes: ARM's
    /// "old model" for a 202 to a PUT).
    #[serde(default)]
    pub hidden: bool,
    /// VM power state (`running`, `deallocated`, ...).
    #[serde(default)]
    pub power: Option<String>,
    /// Storage account keys. The emulator's state is the fake cloud's own storage, so they live
    /// here; they never reach logs or errors.
    #[serde(default)]
    pub keys: Vec<String>,
    /// The error that failed the last operation on it (shown in a VM's instance view).
    #[serde(default)]
    pub failure: Option<ArmError>,
    /// The nodes of an AmlCompute cluster, present, coming and leaving (see `ml/nodes.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
    /// When its last operation (create, update, power action) finished: the time a VM's
    /// `ProvisioningState/succeeded` status gives, the same for every read until the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<DateTime<Utc>>,
}

impl Resource {
    pub fn provisioning_state(&self) -> Option<&str> {
        self.body
            .at("/properties/provisioningState")
            .and_then(Value::as_str)
    }

    pub fn set_provisioning_state(&mut self, state: &str) {
        if let Some(props) = self
            .body
            .get_mut("properties")
            .and_then(Value::as_object_mut)
        {
            props.insert("provisioningState".into(), Value::String(state.to_owned()));
        }
    }

    pub fn location(&self) -> &str {
        self.body
            .get("location")
            .and_then(Value::as_str)
            .unwrap_or("eastus")
    }

    pub fn name(&self) -> &str {
        self.body
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// What an operation does when it completes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum OpKind {
    /// A PUT (create or update).
    Put,
    /// A DELETE of one resource.
    Delete,
    /// A POST action on a VM: `start`, `deallocate`, `powerOff`, `restart`.
    Action(String),
    /// A resource group delete, cascading to everything inside.
    GroupDelete,
}

/// An operation's externally visible status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum OpStatus {
    InProgress,
    Succeeded,
    Failed,
}

impl OpStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "InProgress",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
        }
    }
}

/// A long-running operation, completed by time rather than by polling.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Operation {
    pub id: String,
    pub sub: String,
    pub namespace: String,
    pub location: String,
    pub kind: OpKind,
    /// Key of the target resource (or group).
    pub target: String,
    pub started: DateTime<Utc>,
    pub due: DateTime<Utc>,
    pub status: OpStatus,
    #[serde(default)]
    pub finished: Option<DateTime<Utc>>,
    /// An injected failure the operation ends with.
    #[serde(default)]
    pub failure: Option<ArmError>,
    /// What the resource's state was before (for an action that fails).
    #[serde(default)]
    pub previous_power: Option<String>,
}

/// How much of a cloud is on disk, and the locks that order writing it.
///
/// Two locks, never held together by one writer in the order writer -> cloud, so they cannot
/// deadlock: `turn` (async) queues the requests that want their change written, and `file`
/// guards the file and `written`. A write of version `v` replaces the file only if `v` is newer
/// than what is there, so a slow writer with an older copy never overwrites a newer one.
#[derive(Debug, Default)]
pub(crate) struct Persist {
    /// One group commit at a time; the others wait without blocking a thread.
    pub turn: tokio::sync::Mutex<()>,
    /// Guards the file; held while writing it.
    file: Mutex<()>,
    /// The newest change number on disk.
    written: AtomicU64,
}

impl Persist {
    /// Whether change `version` is on disk.
    pub fn is_written(&self, version: u64) -> bool {
        self.written.load(Ordering::Acquire) >= version
    }

    /// Writes `bytes` (the cloud as of change `version`) unless a newer version is already on
    /// disk. The caller may hold the cloud's lock (cloud -> file is the only nesting).
    pub fn write(&self, dir: &Path, version: u64, bytes: &[u8]) -> Result<(), EmulatorError> {
        let _file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_written(version) {
            return Ok(());
        }
        write_atomically(dir, bytes)?;
        self.written.store(version, Ordering::Release);
        Ok(())
    }
}

/// Everything in the emulated cloud.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Cloud {
    #[serde(default)]
    pub version: u32,
    /// Changes made since the emulator started, numbered for [`Persist`].
    #[serde(skip)]
    pub changes: u64,
    /// What of this cloud is on disk.
    #[serde(skip)]
    pub persist: Arc<Persist>,
    /// Keyed by the lower-cased id: names are case-insensitive.
    pub resources: BTreeMap<String, Resource>,
    pub operations: BTreeMap<String, Operation>,
    #[serde(default)]
    pub ssh_endpoints: Vec<SshEndpoint>,
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub ip_counter: u32,
    /// Provider registrations that differ from the configured start, keyed by
    /// `{subscription}/{namespace}` in lower case (see registry.rs).
    #[serde(default)]
    pub registrations: BTreeMap<String, Registration>,
    /// Key vaults deleted and not yet purged, by lower-cased name (names are global): Azure
    /// keeps a deleted vault recoverable, its name reserved, until it is purged.
    #[serde(default)]
    pub deleted_vaults: BTreeMap<String, String>,
    /// Preview-feature states set by register/unregister requests, keyed by
    /// `{subscription}/{Namespace/Name}` in lower case (see features.rs).
    #[serde(default)]
    pub features: BTreeMap<String, String>,
    /// Custom role definitions and role assignments, by lower-cased id: they live at any scope,
    /// outside the resources (see authorization/).
    #[serde(default)]
    pub role_definitions: BTreeMap<String, Value>,
    #[serde(default)]
    pub role_assignments: BTreeMap<String, Value>,
    /// Tokens issued through the IMDS stand-in: the token's hash to the principal it was issued
    /// to. Hashes, never tokens, so the state file holds no secret.
    #[serde(default)]
    pub imds_tokens: BTreeMap<u64, String>,
    /// The Kubernetes API objects of each AKS cluster, by the cluster's key (see `kube/`).
    #[serde(default)]
    pub kube: BTreeMap<String, KubeObjects>,
    /// Spot evictions announced (a Preempt event) and not yet carried out (compute/spot.rs).
    #[serde(default)]
    pub evictions: Vec<Eviction>,
    /// VMs evictions took, until the boot hooks hear of them.
    #[serde(default)]
    pub evicted: Vec<Evicted>,
    /// The Scheduled Events `DocumentIncarnation`: one more at every change of the events.
    #[serde(default)]
    pub event_incarnation: u64,
}

/// A spot eviction the emulator has announced and not yet carried out (compute/spot.rs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Eviction {
    /// The Scheduled Events `EventId` (a GUID).
    pub event_id: String,
    /// The VM's key.
    pub vm: String,
    /// Its name, as `Resources` lists it.
    pub name: String,
    /// The availability set it is in, whose members see the event too.
    pub fabric: Option<String>,
    /// When the VM goes.
    pub not_before: DateTime<Utc>,
}

/// A VM an eviction took, for the boot hooks (drained by `boot.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Evicted {
    /// The VM's key.
    pub vm: String,
    /// Its name.
    pub name: String,
    /// Deleted (policy Delete) rather than deallocated.
    pub deleted: bool,
}

/// What one cluster's Kubernetes API holds: its objects by `{group}/{resource}/{namespace}/{name}`
/// (the namespace empty for cluster-scoped ones), and the counter its `resourceVersion`s come from.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct KubeObjects {
    pub revision: u64,
    pub objects: BTreeMap<String, Value>,
}

impl Cloud {
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A new resource with the next creation number, no operation, power state or keys yet.
    pub fn new_resource(&mut self, id: String, kind: Kind, body: Value) -> Resource {
        Resource {
            id,
            kind,
            body,
            seq: self.next_seq(),
            op: None,
            hidden: false,
            power: None,
            keys: Vec::new(),
            failure: None,
            nodes: Vec::new(),
            changed: None,
        }
    }

    /// Stores `resource` at `key`. One that replaces another keeps the other's place in the
    /// creation order (lists come back in that order, as ARM's do); the replaced one is returned.
    pub fn put_resource(&mut self, key: String, mut resource: Resource) -> Option<Resource> {
        if let Some(old) = self.resources.get(&key) {
            resource.seq = old.seq;
            resource.changed = resource.changed.or(old.changed);
        }
        self.resources.insert(key, resource)
    }

    /// Resources of a kind, in creation order.
    pub fn of_kind(&self, kind: Kind) -> Vec<&Resource> {
        let mut out: Vec<&Resource> = self
            .resources
            .values()
            .filter(|r| r.kind == kind && !r.hidden)
            .collect();
        out.sort_by_key(|r| r.seq);
        out
    }

    /// Direct children of a resource, in creation order.
    pub fn children(&self, parent_key: &str, kind: Kind) -> Vec<&Resource> {
        let prefix = format!("{parent_key}/");
        let mut out: Vec<&Resource> = self
            .resources
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(_, r)| r)
            .filter(|r| r.kind == kind)
            .collect();
        out.sort_by_key(|r| r.seq);
        out
    }

    /// Removes a resource and everything nested under its id.
    pub fn remove_tree(&mut self, key: &str) {
        let prefix = format!("{key}/");
        self.resources
            .retain(|k, _| k != key && !k.starts_with(&prefix));
    }

    /// Loads `state.json` from `dir`, or an empty cloud if there is none yet.
    pub fn load(dir: &Path) -> Result<Cloud, EmulatorError> {
        let path = state_path(dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                serde_json::from_str(&text).map_err(|source| EmulatorError::Parse { path, source })
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Cloud {
                version: STATE_VERSION,
                ..Cloud::default()
            }),
            Err(source) => Err(EmulatorError::Io { path, source }),
        }
    }

    /// Numbers a change that must reach the disk: the number to wait for, with the
    /// bookkeeping of its write.
    pub fn mark_changed(&mut self) -> (Arc<Persist>, u64) {
        self.changes += 1;
        (Arc::clone(&self.persist), self.changes)
    }

    /// The cloud as `state.json` holds it, and the change number it contains. Compact: the file
    /// is for the emulator to reload, and the indentation cost a third of the time.
    pub fn file_bytes(&mut self, dir: &Path) -> Result<(Vec<u8>, u64), EmulatorError> {
        self.version = STATE_VERSION;
        let bytes = serde_json::to_vec(self).map_err(|source| EmulatorError::Parse {
            path: state_path(dir),
            source,
        })?;
        Ok((bytes, self.changes))
    }

    /// Writes `state.json` now (the caller holds the cloud's lock), after numbering the change.
    pub fn save(&mut self, dir: &Path) -> Result<(), EmulatorError> {
        self.changes += 1;
        let (bytes, version) = self.file_bytes(dir)?;
        self.persist.write(dir, version, &bytes)
    }
}

/// Writes `state.json` atomically: a temporary file in the same directory, fsync, then a rename,
/// so a crash never leaves half a cloud. The file is private to the user (it holds keys).
fn write_atomically(dir: &Path, bytes: &[u8]) -> Result<(), EmulatorError> {
    let path = state_path(dir);
    let io = |source| EmulatorError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let tmp = dir.join(format!(".state.json.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)
}

fn state_path(dir: &Path) -> PathBuf {
    dir.join("state.json")
}

/// One node of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Node {
    /// The node id AML shows, e.g. `tvm-0000000042_1-20261126t173000z`.
    pub id: String,
    /// Its port is `FIRST_PORT + slot`.
    pub slot: u16,
    pub private_ip: String,
    /// When it appears in `listNodes` (preparing).
    pub allocated_at: DateTime<Utc>,
    /// When it becomes idle.
    pub ready_at: DateTime<Utc>,
    /// When it started leaving (a scale-down or the cluster's delete).
    #[serde(default)]
    pub leaving_at: Option<DateTime<Utc>>,
    /// When it is gone for good.
    #[serde(default)]
    pub gone_at: Option<DateTime<Utc>>,
    /// When Azure took it back (a low-priority node preempted): listed as `preempted` until it
    /// is gone, a new node allocated in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_at: Option<DateTime<Utc>>,
}

/// A subscription's registration with one provider namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum RegistrationState {
    NotRegistered,
    Registering,
    Registered,
    Unregistering,
}

impl RegistrationState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::NotRegistered => "NotRegistered",
            Self::Registering => "Registering",
            Self::Registered => "Registered",
            Self::Unregistering => "Unregistering",
        }
    }

    /// Where a transition ends once its time is up.
    pub(crate) fn settled(self) -> Self {
        match self {
            Self::Registering => Self::Registered,
            Self::Unregistering => Self::NotRegistered,
            other => other,
        }
    }
}

/// A registration changed by a request, and when a transition in progress ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Registration {
    pub state: RegistrationState,
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
}

/// Whether ARM lists a kind among a group's resources: child resources are not listed.
pub(crate) fn top_level(kind: Kind) -> bool {
    !matches!(
        kind,
        Kind::ResourceGroup
            | Kind::Subnet
            | Kind::SecurityRule
            | Kind::BlobContainer
            | Kind::FileShare
            | Kind::MlCompute
            | Kind::AgentPool
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_disk(dir: &Path) -> String {
        std::fs::read_to_string(state_path(dir)).expect("state.json is there")
    }

    #[test]
    fn an_older_write_never_replaces_a_newer_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let persist = Persist::default();
        assert!(!persist.is_written(1));
        persist.write(dir.path(), 2, b"v2").expect("writes");
        assert!(persist.is_written(1) && persist.is_written(2) && !persist.is_written(3));
        // A writer that copied the cloud at change 1 and came late leaves change 2 in place.
        persist.write(dir.path(), 1, b"v1").expect("skips");
        assert_eq!(on_disk(dir.path()), "v2");
        persist.write(dir.path(), 3, b"v3").expect("writes");
        assert_eq!(on_disk(dir.path()), "v3");
    }

    #[test]
    fn a_saved_cloud_reloads_with_its_resources() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cloud = Cloud::load(dir.path()).expect("empty cloud");
        let id = "/subscriptions/s/resourceGroups/rg".to_owned();
        let group = cloud.new_resource(
            id.clone(),
            Kind::ResourceGroup,
            serde_json::json!({"id": id, "location": "eastus"}),
        );
        cloud.resources.insert(id.to_ascii_lowercase(), group);
        let (persist, version) = cloud.mark_changed();
        let (bytes, contains) = cloud.file_bytes(dir.path()).expect("serialises");
        assert_eq!(contains, version);
        persist.write(dir.path(), contains, &bytes).expect("writes");
        assert!(persist.is_written(version));
        let reloaded = Cloud::load(dir.path()).expect("reloads");
        assert_eq!(reloaded.resources.len(), 1);
        assert_eq!(
            reloaded.resources[&id.to_ascii_lowercase()].location(),
            "eastus"
        );
        // The bookkeeping is the running emulator's, not the file's.
        assert_eq!(reloaded.changes, 0);
        // Saving under the lock numbers its own change and writes it.
        cloud.save(dir.path()).expect("saves");
        assert!(cloud.persist.is_written(version + 1));
    }
}
