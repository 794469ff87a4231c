//! Kubernetes objects a manifest puts on an AKS cluster (issue 33): each complete but for what
//! only apply can read (a Blob volume's account key), with the block that asked for it.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::addr::Address;

/// One object for a cluster's API, applied by server-side apply once the cluster answers.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeObject {
    /// The cluster it goes to: `aks.train.cluster`.
    pub cluster: Address,
    /// What asked for it, as the plan names it: `manifest "alluxio"`, `blob_volume "data"`.
    pub source: String,
    /// The object (`apiVersion`, `kind`, `metadata`, ...). A namespaced object without a
    /// namespace goes to `default`, as kubectl sends it.
    pub object: Value,
    /// A Secret whose `stringData` holds the name and key of this storage account
    /// (`storage_account.data`), read at apply: never in the manifest, the plan or the state.
    pub account_key_of: Option<Address>,
    /// Where a namespaced object without a namespace goes: a chart's namespace (`None`:
    /// `default`, as kubectl sends it).
    pub fallback_namespace: Option<String>,
}

impl KubeObject {
    pub fn api_version(&self) -> &str {
        self.object["apiVersion"].as_str().unwrap_or_default()
    }

    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }

    pub fn namespace(&self) -> Option<&str> {
        self.object["metadata"]["namespace"].as_str()
    }

    /// `Kind/namespace/name` (`Kind/name` when it has no namespace): how plan and state name it.
    pub fn id(&self) -> String {
        object_id(self.kind(), self.namespace(), self.name())
    }

    /// SHA-256 (hex) of the object as the manifest gives it, and of where it goes when it names
    /// no namespace: a change of either is an update.
    pub fn hash(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.object.to_string().as_bytes());
        if let Some(namespace) = &self.fallback_namespace {
            hasher.update(b"\0namespace:");
            hasher.update(namespace.as_bytes());
        }
        hex::encode(hasher.finalize())
    }
}

/// `Kind/namespace/name`, or `Kind/name`.
pub fn object_id(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    }
}
