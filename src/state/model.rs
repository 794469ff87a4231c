//! The versioned state model and its JSON form.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::secret::{SecretIdentity, SecretKind, secret_like};
use super::{DSINFRA_VERSION, StateError};
use crate::addr::Address;
use crate::model::{Attrs, Desired, ResourceKind};

/// The state format this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

/// One experiment's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Format of this document; a newer one than [`FORMAT_VERSION`] is refused.
    pub format_version: u32,
    /// Bumped by every save; a saved plan is bound to one serial.
    pub serial: u64,
    /// A UUID given when the state is first created and kept for its whole life: two states with
    /// different lineages are different histories, even at the same serial.
    pub lineage: String,
    /// The experiment (manifest id) this state belongs to.
    pub experiment: String,
    /// The dsinfra version that last saved it.
    pub dsinfra_version: String,
    /// Resources, ordered by address.
    #[serde(default)]
    pub resources: Vec<ResourceState>,
    /// Non-sensitive output values from the last apply. Sensitive outputs are never stored: they
    /// are computed again when asked for.
    #[serde(default)]
    pub outputs: BTreeMap<String, Value>,
    /// The Kubernetes objects dsinfra applied to AKS clusters (issue 33), to prune those the
    /// manifest no longer lists and to tell a changed object from an unchanged one. Names and a
    /// hash only: never the objects, which may hold secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kube_objects: Vec<KubeRecord>,
}

/// One Kubernetes object applied to a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeRecord {
    /// The cluster's address: `aks.train.cluster`.
    pub cluster: Address,
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// The namespace it went to when the manifest gave none (`default`, a chart's): where prune
    /// finds it. `namespace` stays as written, as the plan names the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_namespace: Option<String>,
    /// [`crate::model::KubeObject::hash`] of what was applied.
    pub hash: String,
}

impl KubeRecord {
    /// `Kind/namespace/name`, as the plan names it.
    pub fn id(&self) -> String {
        crate::model::object_id(&self.kind, self.namespace.as_deref(), &self.name)
    }
}

/// Whether a resource's create finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceStatus {
    /// ARM reported the create (or the adoption) as succeeded.
    Created,
    /// An intent recorded before the create was sent: after a crash the resource may or may not
    /// exist, and the next apply adopts it if it does.
    Creating,
}

/// A VM's power state as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PowerState {
    /// Running and billed for compute.
    Running,
    /// Deallocated ("parked"): no compute charges, temp disk lost.
    Deallocated,
    /// Stopped from inside the OS or by `powerOff`: still billed for compute.
    Stopped,
}

/// What a refresh found changed outside dsinfra. Set by the engine in memory for the plan; never
/// saved (the next refresh finds it again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Drift {
    /// The resource no longer exists in Azure.
    Deleted,
    /// These attributes differ in Azure from what dsinfra set (`attrs` holds what Azure has now).
    Changed {
        /// The attributes that changed, in name order.
        attributes: Vec<String>,
    },
}

/// One resource as dsinfra last knew it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceState {
    /// Address in the manifest.
    pub address: Address,
    /// Resource type.
    pub kind: ResourceKind,
    /// Azure name.
    pub name: String,
    /// Parent resource name for child types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Resource group.
    pub resource_group: String,
    /// ARM id, known once the create was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The attributes dsinfra manages, as last applied or refreshed. Never secrets.
    #[serde(default)]
    pub attrs: Attrs,
    /// What it depended on when it was created: the order to delete in once it leaves the manifest.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub depends_on: BTreeSet<Address>,
    /// Whether the create finished.
    pub status: ResourceStatus,
    /// For VMs: the power state as last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<PowerState>,
    /// Identities (never values) of the secrets belonging to this resource, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, SecretIdentity>,
    /// For VMs dsinfra created: the public half of the host key it generated and sent in
    /// customData (an OpenSSH line). SSH connections pin it; `None` for adopted VMs, which are
    /// trusted on first use and pinned from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key: Option<String>,
    /// For VMs: how many times dsinfra started the VM again since it was created (unpark,
    /// resize). A per-boot step recorded at an older boot runs again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub boots: u64,
    /// For VMs: the post-boot steps that last succeeded on this node, by step name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, StepRecord>,
    /// For a cluster's head VM: the head's cluster SSH public key, as the head printed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh_key: Option<MeshKey>,
    /// For AmlCompute clusters: what dsinfra learnt about each node it reached, by node id
    /// (`listNodes`' `nodeId`). The nodes are not resources of their own (Azure Machine Learning
    /// makes and deletes them), so their host keys and step records live on the compute. A node
    /// that no longer exists loses its record the next time the nodes are listed and reached.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, NodeRecord>,
    /// Drift found by the refresh of this run (not saved).
    #[serde(skip)]
    pub drift: Option<Drift>,
}

/// A post-boot step that succeeded on a node, as the plan needs it to predict the next apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRecord {
    /// [`crate::model::Step::fingerprint`] of the manifest step that ran.
    pub fingerprint: String,
    /// The VM's [`ResourceState::boots`] when it ran.
    #[serde(default)]
    pub boot: u64,
    /// When it finished (RFC 3339, UTC).
    pub at: String,
}

/// One node of an AmlCompute cluster, as dsinfra last reached it (see [`ResourceState::nodes`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// The host key the node presented the first time dsinfra reached it (an OpenSSH public key
    /// line). Azure Machine Learning generates the nodes' host keys, so dsinfra cannot know them
    /// beforehand: the first key is trusted, pinned here, and any other key for the same node id
    /// is refused afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key: Option<String>,
    /// The post-boot steps that last succeeded on this node, by step name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, StepRecord>,
    /// When the node is its cluster's head: the head's cluster SSH public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh_key: Option<MeshKey>,
}

/// The public half of the key a cluster's head generated for the SSH mesh, as the head printed
/// it (`dsinfra-head-key`). Public, so it may be stored: the mesh is rendered from it, and a head
/// whose key is recorded for its current boot is not asked again (a second apply runs nothing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeshKey {
    /// The OpenSSH public key line (`ssh-ed25519 AAAA... comment`).
    pub key: String,
    /// The head VM's [`ResourceState::boots`] when it was read (0 on an AML node, which never
    /// boots again under the same node id). A key read at another boot is read again.
    pub boot: u64,
}

impl ResourceState {
    /// The record of the AmlCompute node `node_id`, created empty if it has none yet.
    pub fn node_mut(&mut self, node_id: &str) -> &mut NodeRecord {
        self.nodes.entry(node_id.to_owned()).or_default()
    }

    /// Drops the records of nodes not in `live` (node ids the cluster lists now): a node Azure
    /// deleted (scale down, park) takes its pinned host key and step records with it, and a new
    /// node is trusted on first use and runs every step. Returns the node ids dropped.
    pub fn forget_nodes_except(&mut self, live: &BTreeSet<String>) -> Vec<String> {
        let gone: Vec<String> = self
            .nodes
            .keys()
            .filter(|id| !live.contains(*id))
            .cloned()
            .collect();
        for id in &gone {
            self.nodes.remove(id);
        }
        gone
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl State {
    /// A new, empty state with a fresh lineage (serial 0: never saved).
    pub fn new(experiment: &str) -> Self {
        Self::with_lineage(experiment, uuid::Uuid::new_v4().to_string())
    }

    fn with_lineage(experiment: &str, lineage: String) -> Self {
        Self {
            format_version: FORMAT_VERSION,
            serial: 0,
            lineage,
            experiment: experiment.to_owned(),
            dsinfra_version: DSINFRA_VERSION.to_owned(),
            resources: Vec::new(),
            outputs: BTreeMap::new(),
            kube_objects: Vec::new(),
        }
    }

    /// The state an apply of `desired` would leave if every create succeeded: each resource
    /// `Created` with its ARM id in `subscription`, VMs running, serial 1 and a lineage derived from
    /// the experiment name so that tests are deterministic. SAS resources get an identity with no
    /// expiry and a fingerprint of their address, as no secret was signed.
    pub fn from_applied(desired: &Desired, subscription: &str) -> Self {
        let digest = Sha256::digest(format!("dsinfra-lineage:{}", desired.experiment));
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        let lineage = uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string();
        let mut state = Self::with_lineage(&desired.experiment, lineage);
        state.serial = 1;
        for r in &desired.resources {
            let mut secrets = BTreeMap::new();
            if r.kind == ResourceKind::Sas {
                let text = |key: &str| {
                    r.attrs
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                secrets.insert(
                    "token".to_owned(),
                    SecretIdentity {
                        kind: SecretKind::Sas,
                        scope: text("scope"),
                        permissions: text("permissions"),
                        expiry: None,
                        signed_at: None,
                        fingerprint: SecretIdentity::fingerprint(
                            state.lineage.as_bytes(),
                            r.address.to_string().as_bytes(),
                        ),
                    },
                );
            }
            state.upsert(ResourceState {
                address: r.address.clone(),
                kind: r.kind,
                name: r.name.clone(),
                parent: r.parent.clone(),
                resource_group: r.resource_group.clone(),
                id: Some(r.arm_id(subscription)),
                attrs: r.attrs.clone(),
                depends_on: r.depends_on.clone(),
                status: ResourceStatus::Created,
                power_state: (r.kind == ResourceKind::VirtualMachine)
                    .then_some(PowerState::Running),
                secrets,
                host_key: None,
                boots: 0,
                steps: std::collections::BTreeMap::new(),
                mesh_key: None,
                nodes: BTreeMap::new(),
                drift: None,
            });
        }
        state.outputs = desired
            .outputs
            .iter()
            .filter(|o| !o.sensitive)
            .map(|o| (o.name.clone(), o.value.clone()))
            .collect();
        state
    }

    /// The resource at an address.
    pub fn resource(&self, address: &Address) -> Option<&ResourceState> {
        self.resources
            .binary_search_by(|r| r.address.cmp(address))
            .ok()
            .map(|i| &self.resources[i])
    }

    /// The resource at an address, to change it.
    pub fn resource_mut(&mut self, address: &Address) -> Option<&mut ResourceState> {
        self.resources
            .binary_search_by(|r| r.address.cmp(address))
            .ok()
            .map(|i| &mut self.resources[i])
    }

    /// Insert or replace a resource, keeping resources ordered by address.
    pub fn upsert(&mut self, resource: ResourceState) {
        match self
            .resources
            .binary_search_by(|r| r.address.cmp(&resource.address))
        {
            Ok(i) => self.resources[i] = resource,
            Err(i) => self.resources.insert(i, resource),
        }
    }

    /// Remove a resource (after its delete succeeded).
    pub fn remove(&mut self, address: &Address) -> Option<ResourceState> {
        self.resources
            .binary_search_by(|r| r.address.cmp(address))
            .ok()
            .map(|i| self.resources.remove(i))
    }

    /// The state as pretty JSON with a final newline (what backends store).
    ///
    /// # Panics
    ///
    /// Never: every map in it has string keys, so serialisation cannot fail.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self)
            .expect("a State always serialises: keys are strings");
        text.push('\n');
        text
    }

    /// Parse a state document read from `path` (named in errors). The format version is checked
    /// before anything else, so a newer format is refused with advice rather than a parse error.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, StateError> {
        let corrupt = |err: &serde_json::Error| StateError::Corrupt {
            path: path.to_owned(),
            message: strip_position(&err.to_string()),
            line: err.line(),
            column: err.column(),
        };
        let raw: Value = serde_json::from_str(text).map_err(|e| corrupt(&e))?;
        let found = raw.get("format_version").and_then(Value::as_u64);
        match found {
            Some(v) if v > u64::from(FORMAT_VERSION) => {
                return Err(StateError::NewerFormat {
                    path: path.to_owned(),
                    found: u32::try_from(v).unwrap_or(u32::MAX),
                    supported: FORMAT_VERSION,
                    written_by: raw
                        .get("dsinfra_version")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown")
                        .to_owned(),
                });
            }
            Some(v) if v >= 1 => {}
            _ => {
                return Err(StateError::Corrupt {
                    path: path.to_owned(),
                    message: "`format_version` is missing or not a positive whole number"
                        .to_owned(),
                    line: 1,
                    column: 1,
                });
            }
        }
        // Parse the text again rather than the `Value`, so errors keep their line and column.
        let mut state: Self = serde_json::from_str(text).map_err(|e| corrupt(&e))?;
        state.resources.sort_by(|a, b| a.address.cmp(&b.address));
        Ok(state)
    }

    /// Check that no attribute or output holds something that looks like a secret.
    pub fn check_no_secrets(&self) -> Result<(), StateError> {
        for r in &self.resources {
            for (name, value) in &r.attrs {
                if let Some(what) = find_secret(value) {
                    return Err(StateError::SecretInAttribute {
                        address: r.address.to_string(),
                        attribute: name.clone(),
                        what,
                    });
                }
            }
        }
        for (name, value) in &self.outputs {
            if let Some(what) = find_secret(value) {
                return Err(StateError::SecretInAttribute {
                    address: "output".to_owned(),
                    attribute: name.clone(),
                    what,
                });
            }
        }
        Ok(())
    }
}

/// The first secret-looking string anywhere inside a JSON value.
fn find_secret(value: &Value) -> Option<&'static str> {
    match value {
        Value::String(s) => secret_like(s),
        Value::Array(items) => items.iter().find_map(find_secret),
        Value::Object(map) => map.values().find_map(find_secret),
        _ => None,
    }
}

/// serde_json appends " at line L column C" to its messages; the error variant says it its own way.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AzureSettings, Lifecycle, Output, Resource};

    fn tiny_desired() -> Desired {
        let rg = Resource {
            address: "resource_group.main".parse().expect("valid"),
            kind: ResourceKind::ResourceGroup,
            name: "exp-rg".to_owned(),
            parent: None,
            resource_group: "exp-rg".to_owned(),
            attrs: Attrs::from([("location".to_owned(), Value::from("eastus"))]),
            depends_on: BTreeSet::new(),
            lifecycle: Lifecycle::default(),
            span: None,
            attr_spans: std::collections::BTreeMap::new(),
        };
        let vm = Resource {
            address: "vm.gpu.vm".parse().expect("valid"),
            kind: ResourceKind::VirtualMachine,
            name: "exp-gpu".to_owned(),
            attrs: Attrs::from([("size".to_owned(), Value::from("Standard_NC6s_v3"))]),
            depends_on: BTreeSet::from([rg.address.clone()]),
            ..rg.clone()
        };
        Desired {
            experiment: "exp".to_owned(),
            azure: AzureSettings {
                subscription: None,
                location: "eastus".to_owned(),
                resource_group: "exp-rg".to_owned(),
                tags: BTreeMap::new(),
                endpoint: None,
            },
            resources: vec![vm, rg],
            steps: Vec::new(),
            outputs: vec![
                Output {
                    name: "ip".to_owned(),
                    value: Value::from("1.2.3.4"),
                    sensitive: false,
                    description: None,
                },
                Output {
                    name: "sas_url".to_owned(),
                    value: Value::from("(known after apply)"),
                    sensitive: true,
                    description: None,
                },
            ],
            manifest_hash: "abc".to_owned(),
            notes: Vec::new(),
            park_idle: std::collections::BTreeMap::new(),
            kube_objects: Vec::new(),
            catalog: crate::catalog::Catalog::shipped(),
        }
    }

    #[test]
    fn from_applied_marks_everything_created_in_address_order() {
        let state = State::from_applied(&tiny_desired(), "sub");
        let addrs: Vec<String> = state
            .resources
            .iter()
            .map(|r| r.address.to_string())
            .collect();
        assert_eq!(addrs, ["resource_group.main", "vm.gpu.vm"]);
        let vm = state
            .resource(&"vm.gpu.vm".parse().expect("valid"))
            .expect("present");
        assert_eq!(vm.status, ResourceStatus::Created);
        assert_eq!(vm.power_state, Some(PowerState::Running));
        assert_eq!(
            vm.id.as_deref(),
            Some(
                "/subscriptions/sub/resourceGroups/exp-rg/providers/Microsoft.Compute/virtualMachines/exp-gpu"
            )
        );
        assert_eq!(state.serial, 1);
        assert_eq!(
            state.lineage,
            State::from_applied(&tiny_desired(), "sub").lineage
        );
        assert_eq!(state.outputs.keys().collect::<Vec<_>>(), ["ip"]);
    }

    #[test]
    fn round_trips_through_json_without_the_drift_marker() {
        let mut state = State::from_applied(&tiny_desired(), "sub");
        state.resources[1].drift = Some(Drift::Deleted);
        let text = state.to_json();
        assert!(!text.contains("drift"));
        let back = State::from_json(&text, Path::new("state.json")).expect("parses");
        state.resources[1].drift = None;
        assert_eq!(back, state);
    }

    /// Issue 17: AML nodes' pinned keys and step records live on the compute, by node id; states
    /// written before the field existed load, and a state without node records does not write it.
    #[test]
    fn aml_node_records_round_trip_and_nodes_that_went_away_lose_theirs() {
        let mut state = State::from_applied(&tiny_desired(), "sub");
        assert!(!state.to_json().contains("\"nodes\""));
        let vm = &mut state.resources[1];
        vm.node_mut("tvmps_b").host_key = Some("ssh-ed25519 AAAA b".into());
        vm.node_mut("tvmps_a").steps.insert(
            "beeond".into(),
            StepRecord {
                fingerprint: "f".into(),
                boot: 0,
                at: "t".into(),
            },
        );
        let back = State::from_json(&state.to_json(), Path::new("s.json")).expect("parses");
        assert_eq!(back, state);
        let live = BTreeSet::from(["tvmps_b".to_owned(), "tvmps_c".to_owned()]);
        let gone = state.resources[1].forget_nodes_except(&live);
        assert_eq!(gone, ["tvmps_a"]);
        let ids: Vec<&String> = state.resources[1].nodes.keys().collect();
        assert_eq!(ids, ["tvmps_b"], "a node never reached gets no record");
    }

    #[test]
    fn refuses_a_newer_format_naming_both_versions() {
        let text = r#"{"format_version": 7, "dsinfra_version": "3.1.0", "something": "new"}"#;
        let err =
            State::from_json(text, Path::new(".dsinfra/exp/state.json")).expect_err("newer format");
        assert_eq!(
            err.to_string(),
            format!(
                "the state file .dsinfra/exp/state.json has format version 7 (written by dsinfra 3.1.0), but this dsinfra {DSINFRA_VERSION} understands format version 1 at most: upgrade dsinfra to 3.1.0 or later to use this state, and do not edit the file by hand"
            )
        );
    }

    #[test]
    fn corrupt_json_names_the_file_line_and_column() {
        let text = "{\n  \"format_version\": 1,\n  \"serial\": 3\n  \"lineage\": \"x\"\n}\n";
        let err = State::from_json(text, Path::new("s.json")).expect_err("corrupt");
        assert_eq!(
            err.to_string(),
            "the state file s.json is corrupt: expected `,` or `}` at line 4, column 3; if it was not edited by hand, the previous version is in state.json.backup next to it"
        );
        let err = State::from_json(
            r#"{"format_version": 1, "serial": "x"}"#,
            Path::new("s.json"),
        )
        .expect_err("wrong type");
        assert!(
            err.to_string()
                .starts_with("the state file s.json is corrupt: invalid type: string \"x\", expected u64 at line 1, column 35"),
            "{err}"
        );
        let err = State::from_json("{}", Path::new("s.json")).expect_err("no version");
        assert!(
            err.to_string().contains("`format_version` is missing"),
            "{err}"
        );
    }

    #[test]
    fn a_secret_in_an_attribute_is_refused_without_echoing_it() {
        let mut state = State::from_applied(&tiny_desired(), "sub");
        state.resources[1].attrs.insert(
            "custom_data".to_owned(),
            Value::from(vec![Value::from("se=2026-01-01&sig=SECRETVALUE")]),
        );
        let err = state.check_no_secrets().expect_err("secret");
        let text = err.to_string();
        assert_eq!(
            text,
            "refusing to save state: attribute `custom_data` of `vm.gpu.vm` looks like a SAS token, and secrets are never stored in state; this is a dsinfra bug, please report it (without the value)"
        );
        assert!(
            State::from_applied(&tiny_desired(), "sub")
                .check_no_secrets()
                .is_ok()
        );
    }
}
