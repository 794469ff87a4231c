//! What the runner is asked to do: steps and nodes, in the runner's own small types.
//!
//! They are independent of the manifest model on purpose: the engine converts `model::Step`
//! (after rendering its template) into a [`StepSpec`], and VMs/cluster nodes into [`NodeSpec`]s.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::ssh::{BOOT_ID_PATH, HostKeyPolicy, Secret, Target};

use super::hash::{step_hash, with_files};

/// Which nodes a step runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every node.
    All,
    /// The head node (the first node) only.
    Head,
}

/// When a step runs again once it succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunPolicy {
    /// Again only when its content changes.
    Once,
    /// Again after every reboot (mounts, caches and scratch on the temp disk).
    PerBoot,
    /// On every run.
    Always,
}

/// A secret input: its identity is hashed, its value only reaches the node.
#[derive(Debug, Clone)]
pub struct SecretInput {
    /// The name the script reads it under: `$DSINFRA_SECRETS/<name>`.
    pub name: String,
    /// What identifies the value without revealing it (e.g. the key's address and version); a
    /// new identity re-runs the step, a new value under the same identity does not.
    pub identity: String,
    /// The value.
    pub value: Secret,
}

/// A non-secret file delivered with a step: `$DSINFRA_FILES/<name>` on the node, removed when
/// the script ends. It keeps large inputs out of the script text, so a node receives only its
/// own part (a `stage` shard list) and the script stays small however big the dataset is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFile {
    /// The file name under `$DSINFRA_FILES` (letters, digits, `_`, `-`, `.`).
    pub name: String,
    /// What each node gets.
    pub content: FileContent,
}

/// Which content of a [`StepFile`] a node receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileContent {
    /// The same content on every node.
    Same(String),
    /// One content per rank (node index, 0 = head); a node past the end gets an empty file.
    ByRank(Vec<String>),
}

impl StepFile {
    /// The content the node of rank `rank` receives.
    pub fn for_rank(&self, rank: usize) -> &str {
        match &self.content {
            FileContent::Same(text) => text,
            FileContent::ByRank(texts) => texts.get(rank).map_or("", String::as_str),
        }
    }
}

/// One rendered step.
#[derive(Debug, Clone)]
pub struct StepSpec {
    /// Unique within the list; letters, digits, `_`, `-`, `.` (it names the marker and log file).
    pub name: String,
    /// The rendered script (bash).
    pub script: String,
    /// Non-secret parameters: hashed, and exported to the script as variables.
    pub params: BTreeMap<String, String>,
    /// Secret inputs, delivered as files on the node.
    pub secrets: Vec<SecretInput>,
    /// Non-secret files, delivered next to the script (each node its own content): hashed.
    pub files: Vec<StepFile>,
    /// Nodes it runs on.
    pub scope: Scope,
    /// When it runs again.
    pub policy: RunPolicy,
    /// Kill it after this long.
    pub timeout: Option<Duration>,
    /// An optional "already done?" script, run before the step whenever the markers say it
    /// must run (never when it is forced), with the step's parameters, secrets and privilege.
    /// Exit status 0 means the node already has what the step would do: the marker is written
    /// and the step is skipped ([`SkipReason::AlreadyDone`](super::SkipReason::AlreadyDone));
    /// anything else runs the step. It is not part of [`Self::hash`]: a better check does not
    /// make the step's work different.
    pub check: Option<String>,
}

impl StepSpec {
    /// A step running `script` once on every node, with no parameters.
    pub fn new(name: impl Into<String>, script: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            script: script.into(),
            params: BTreeMap::new(),
            secrets: Vec::new(),
            files: Vec::new(),
            scope: Scope::All,
            policy: RunPolicy::Once,
            timeout: None,
            check: None,
        }
    }

    /// The content hash recorded in the node's marker (see [`step_hash`]), covering the
    /// delivered files too ([`with_files`]): a changed file re-runs the step. One hash for all
    /// nodes, so a change to any node's part re-runs the step everywhere, as a changed script
    /// would.
    pub fn hash(&self) -> String {
        let identities: BTreeMap<&str, &str> = self
            .secrets
            .iter()
            .map(|s| (s.name.as_str(), s.identity.as_str()))
            .collect();
        with_files(
            step_hash(&self.script, &self.params, &identities),
            &self.files,
        )
    }
}

/// How to reach a node and where its markers live.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Address, port, user; `target.node` is the node's name in logs and the summary.
    pub target: Target,
    /// Host-key policy for this node.
    pub host_key: HostKeyPolicy,
    /// Reach the node through this host (the head node of a private cluster).
    pub jump: Option<Hop>,
    /// The directory holding this node's step markers.
    pub marker_dir: String,
    /// Where the node's boot id is read.
    pub boot_id_path: String,
}

/// A jump host.
#[derive(Debug, Clone)]
pub struct Hop {
    /// How to reach it.
    pub target: Target,
    /// Its host-key policy.
    pub host_key: HostKeyPolicy,
}

/// Where markers live on a real node.
pub const DEFAULT_MARKER_DIR: &str = "/var/lib/dsinfra/steps";

impl NodeSpec {
    /// A directly reachable node with the default marker directory and boot id.
    pub fn new(target: Target, host_key: HostKeyPolicy) -> Self {
        Self {
            target,
            host_key,
            jump: None,
            marker_dir: DEFAULT_MARKER_DIR.to_owned(),
            boot_id_path: BOOT_ID_PATH.to_owned(),
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.target.node
    }
}
