//! The kinds a cluster's API serves, built in or defined by a CustomResourceDefinition, and the
//! discovery documents clients read to map a kind to its URL.
//!
//! The built-in table holds the kinds dsinfra writes and the ones its examples and users' files
//! commonly hold; a kind outside it is "not found" by discovery, as on a server without it.

use serde_json::{Value, json};

use crate::emulator::store::KubeObjects;

/// A resource the API serves.
#[derive(Debug, Clone)]
pub(super) struct Served {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    /// A custom resource's schema (`openAPIV3Schema`); built-in kinds are judged by the
    /// published schemas instead.
    pub crd_schema: Option<Value>,
}

impl Served {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Where its objects are: `/api/v1` or `/apis/{group}/{version}`.
    pub fn prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// The store key of one object.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        format!("{}/{}/{namespace}/{name}", self.group, self.plural)
    }

    /// The store key prefix of every object of this resource (in `namespace` if given).
    pub fn key_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) => format!("{}/{}/{ns}/", self.group, self.plural),
            None => format!("{}/{}/", self.group, self.plural),
        }
    }
}

/// (group, version, kind, plural, namespaced, short names).
type BuiltIn = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
);

const BUILT_IN: &[BuiltIn] = &[
    ("", "v1", "Namespace", "namespaces", false, &["ns"]),
    ("", "v1", "ConfigMap", "configmaps", true, &["cm"]),
    ("", "v1", "Secret", "secrets", true, &[]),
    ("", "v1", "ServiceAccount", "serviceaccounts", true, &["sa"]),
    ("", "v1", "Service", "services", true, &["svc"]),
    ("", "v1", "Pod", "pods", true, &["po"]),
    (
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        false,
        &["pv"],
    ),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
        &["pvc"],
    ),
    ("apps", "v1", "DaemonSet", "daemonsets", true, &["ds"]),
    ("apps", "v1", "Deployment", "deployments", true, &["deploy"]),
    ("apps", "v1", "StatefulSet", "statefulsets", true, &["sts"]),
    ("batch", "v1", "Job", "jobs", true, &[]),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
        &[],
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        &[],
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        true,
        &[],
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
        &[],
    ),
    (
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
        &["sc"],
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        false,
        &["pc"],
    ),
    (
        "node.k8s.io",
        "v1",
        "RuntimeClass",
        "runtimeclasses",
        false,
        &[],
    ),
    (
        CRD_GROUP,
        "v1",
        "CustomResourceDefinition",
        CRD_PLURAL,
        false,
        &["crd", "crds"],
    ),
];

pub(super) const CRD_GROUP: &str = "apiextensions.k8s.io";
pub(super) const CRD_PLURAL: &str = "customresourcedefinitions";

/// Every resource served now: the built-in ones, then each served version of each CRD.
pub(super) fn served(api: &KubeObjects) -> Vec<Served> {
    let mut all: Vec<Served> = BUILT_IN
        .iter()
        .map(|(group, version, kind, plural, namespaced, short)| Served {
            group: (*group).to_owned(),
            version: (*version).to_owned(),
            kind: (*kind).to_owned(),
            plural: (*plural).to_owned(),
            namespaced: *namespaced,
            short_names: short.iter().map(|s| (*s).to_owned()).collect(),
            crd_schema: None,
        })
        .collect();
    let crds = format!("{CRD_GROUP}/{CRD_PLURAL}//");
    for crd in api
        .objects
        .iter()
        .filter(|(key, _)| key.starts_with(&crds))
        .map(|(_, crd)| crd)
    {
        let spec = &crd["spec"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        for version in spec["versions"].as_array().into_iter().flatten() {
            if version["served"] != Value::Bool(true) {
                continue;
            }
            all.push(Served {
                group: text(&spec["group"]),
                version: text(&version["name"]),
                kind: text(&spec["names"]["kind"]),
                plural: text(&spec["names"]["plural"]),
                namespaced: spec["scope"] == "Namespaced",
                short_names: spec["names"]["shortNames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect(),
                crd_schema: Some(
                    version
                        .pointer("/schema/openAPIV3Schema")
                        .cloned()
                        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
                ),
            });
        }
    }
    all
}

/// The resource at `prefix` (`/api/v1`, `/apis/apps/v1`) named `plural`.
pub(super) fn find(api: &KubeObjects, prefix: &str, plural: &str) -> Option<Served> {
    served(api)
        .into_iter()
        .find(|s| s.prefix() == prefix && s.plural == plural)
}

/// `GET /api`.
pub(super) fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

/// `GET /apis`: every named group, its versions in the order served.
pub(super) fn api_groups(api: &KubeObjects) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for s in served(api).into_iter().filter(|s| !s.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == s.group) {
            Some((_, versions)) if !versions.contains(&s.version) => versions.push(s.version),
            Some(_) => {}
            None => groups.push((s.group, vec![s.version])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(name, versions)| {
            let listed: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
                .collect();
            json!({"name": name, "versions": listed, "preferredVersion": listed[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /api/v1` or `GET /apis/{group}/{version}`: the resources of one group version.
pub(super) fn resource_list(api: &KubeObjects, path: &str) -> Option<Value> {
    let served: Vec<Served> = served(api)
        .into_iter()
        .filter(|s| s.prefix() == path)
        .collect();
    let first = served.first()?;
    let resources: Vec<Value> = served
        .iter()
        .map(|s| {
            json!({
                "name": s.plural,
                "singularName": s.kind.to_ascii_lowercase(),
                "namespaced": s.namespaced,
                "kind": s.kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update"],
                "shortNames": s.short_names,
            })
        })
        .collect();
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": first.api_version(),
        "resources": resources,
    }))
}
