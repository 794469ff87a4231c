//! The Kubernetes objects an `aks` block puts on its cluster (decision 74): each `manifest` file's
//! documents, each `chart`'s rendering (`charts`), each `blob_volume`'s Secret, PersistentVolume and claim, and the NVIDIA device
//! plugin when a pool has GPUs whose driver AKS installs.
//!
//! Checked here, offline, at the attribute that is wrong: a file that does not exist or is not
//! Kubernetes YAML (its own line and column said), a Blob volume on a cluster without the Blob
//! CSI driver, names Kubernetes would refuse, two objects with the same kind, namespace and name.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::addr::Address;
use crate::diag::Diagnostic;
use crate::model::{KubeObject, ResourceKind};

use super::super::decode::{self, BlockAttrs, Located, Ref, Unknown};
use super::super::eval::EvalBlock;
use super::Expander;
use super::check::Check;
use super::targets::Container;

/// The blobfuse2 step's cache and kernel timeouts (the seed's, see `steps::library::mounts`), as
/// Blob CSI mount options: a Blob volume in a pod behaves as the same mount on a VM.
const BLOBFUSE2_OPTIONS: &[&str] = &[
    "-o allow_other",
    "--file-cache-timeout-in-seconds=120",
    "-o attr_timeout=240",
    "-o entry_timeout=240",
    "-o negative_timeout=120",
];

/// AKS's built-in storage class for Blob CSI with blobfuse2.
const BLOB_STORAGE_CLASS: &str = "azureblob-fuse-premium";

/// The NVIDIA device plugin's image (NVIDIA/k8s-device-plugin, the release AKS's GPU guide
/// deploys), and the label AKS puts on GPU nodes.
const DEVICE_PLUGIN_IMAGE: &str = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0";
const GPU_NODE_LABEL: (&str, &str) = ("kubernetes.azure.com/accelerator", "nvidia");

#[derive(Deserialize, Default)]
struct ManifestAttrs {
    file: Option<Located<String>>,
}

impl BlockAttrs for ManifestAttrs {
    const REQUIRED: &'static [(&'static str, &'static str)] = &[("file", "\"k8s/alluxio.yaml\"")];
}

#[derive(Deserialize, Default)]
struct BlobVolumeAttrs {
    container: Option<Ref<Container>>,
    namespace: Option<Located<String>>,
    size: Option<Located<String>>,
    mount_options: Option<Vec<String>>,
    read_only: Option<bool>,
}

impl BlockAttrs for BlobVolumeAttrs {
    const REQUIRED: &'static [(&'static str, &'static str)] =
        &[("container", "storage_account.data.container.raw")];
}

/// What the cluster's block says that the objects depend on.
pub(super) struct ClusterFacts<'a> {
    pub cluster: &'a Address,
    pub blob_csi: bool,
    /// Taints of the pools whose nodes have GPUs and an AKS-installed driver (empty: no such
    /// pool, no device plugin).
    pub gpu_taints: Option<Vec<String>>,
    pub device_plugin: Option<Located<bool>>,
}

/// Every object of one `aks` block, in manifest order: the device plugin, the Blob volumes, then
/// the files.
pub(super) fn read(ex: &mut Expander<'_>, block: &EvalBlock, facts: &ClusterFacts<'_>) {
    let mut objects = Vec::new();
    if let Some(taints) = &facts.gpu_taints
        && facts.device_plugin.as_ref().is_none_or(|d| d.value)
    {
        objects.push(object(
            facts.cluster,
            "device plugin",
            device_plugin(taints),
        ));
    }
    for volume in block.blocks_of("blob_volume") {
        objects.extend(blob_volume(ex, volume, facts));
    }
    for file in block.blocks_of("manifest") {
        objects.extend(manifest_file(ex, file, facts.cluster));
    }
    for chart in block.blocks_of("chart") {
        objects.extend(super::charts::read(ex, chart, facts.cluster));
    }
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut check = Check::new(block, ex.diags);
    for o in &objects {
        if let Some(first) = seen.insert(o.id(), o.source.clone()) {
            let title = check.title();
            check.report(
                Diagnostic::error(format!("{title} puts {} on the cluster twice", o.id()))
                    .with_span(block.header.clone())
                    .with_label(format!("from {first} and from {}", o.source))
                    .with_help("an object has one owner: remove one of them or rename it"),
            );
        }
    }
    ex.kube_objects.extend(objects);
}

pub(super) fn object(cluster: &Address, source: &str, value: Value) -> KubeObject {
    KubeObject {
        cluster: cluster.clone(),
        source: source.to_owned(),
        object: value,
        account_key_of: None,
        fallback_namespace: None,
    }
}

/// NVIDIA's device plugin DaemonSet (its static deployment, as AKS's GPU guide applies it), on
/// the GPU nodes only, tolerating the GPU pools' taints.
fn device_plugin(taints: &[String]) -> Value {
    let mut tolerations =
        vec![json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})];
    for taint in taints {
        let (key_value, effect) = taint.split_once(':').unwrap_or((taint, "NoSchedule"));
        let toleration = match key_value.split_once('=') {
            Some((key, value)) => {
                json!({"key": key, "operator": "Equal", "value": value, "effect": effect})
            }
            None => json!({"key": key_value, "operator": "Exists", "effect": effect}),
        };
        if !tolerations.contains(&toleration) {
            tolerations.push(toleration);
        }
    }
    let labels = json!({"name": "nvidia-device-plugin-ds"});
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {GPU_NODE_LABEL.0: GPU_NODE_LABEL.1},
                    "tolerations": tolerations,
                    "priorityClassName": "system-node-critical",
                    "containers": [{
                        "name": "nvidia-device-plugin-ctr",
                        "image": DEVICE_PLUGIN_IMAGE,
                        "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
                    }],
                    "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}],
                }
            }
        }
    })
}

/// A `blob_volume`: the account's Secret (filled at apply), a PersistentVolume of the Blob CSI
/// driver on the container, and a claim bound to it, named after the block.
fn blob_volume(
    ex: &mut Expander<'_>,
    block: &EvalBlock,
    facts: &ClusterFacts<'_>,
) -> Vec<KubeObject> {
    let attrs: BlobVolumeAttrs =
        decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let label = block.label().to_owned();
    let mut check = Check::new(block, ex.diags);
    if !facts.blob_csi {
        let title = check.title();
        check.report(
            Diagnostic::error(format!("{title} needs the cluster's Blob CSI driver"))
                .with_span(block.header.clone())
                .with_label("the cluster is made without it")
                .with_help(
                    "set `blob_csi = true` in the `aks` block (AKS's storageProfile.blobCSIDriver)",
                ),
        );
    }
    let namespace = attrs.namespace.map_or_else(|| "default".to_owned(), |n| {
        if !is_dns_label(&n.value) {
            check.report(
                Diagnostic::error(format!("invalid `namespace` {:?}", n.value))
                    .with_span(n.span.clone())
                    .with_label("Kubernetes names a namespace with 1-63 lowercase letters, digits and `-`")
                    .with_help("e.g. \"training\""),
            );
        }
        n.value
    });
    if !is_dns_label(&label) {
        check.report(
            Diagnostic::error(format!("invalid Blob volume name `{label}`"))
                .with_span(block.label_span())
                .with_label("it names the claim pods mount: 1-63 lowercase letters, digits and `-`")
                .with_help("e.g. `blob_volume \"datasets\"`"),
        );
    }
    let size = attrs.size.map_or_else(|| "1Ti".to_owned(), |s| s.value);
    let Some(container) = attrs.container else {
        return Vec::new();
    };
    let Some(container_name) = ex
        .resources
        .iter()
        .find(|r| r.address.to_string() == container.address)
        .map(|r| r.name.clone())
    else {
        return Vec::new();
    };
    // The account of `storage_account.NAME.container.C` is `storage_account.NAME.account`.
    let Some(account) = ex
        .resources
        .iter()
        .find(|r| {
            r.kind == ResourceKind::StorageAccount
                && container
                    .address
                    .starts_with(&format!("{}.{}.", r.address.kind, r.address.name))
        })
        .map(|r| r.address.clone())
    else {
        return Vec::new();
    };
    let mut options: Vec<String> = attrs
        .mount_options
        .unwrap_or_else(|| BLOBFUSE2_OPTIONS.iter().map(|o| (*o).to_owned()).collect());
    let read_only = attrs.read_only.unwrap_or(false);
    if read_only && !options.iter().any(|o| o.contains("ro")) {
        options.push("-o ro".to_owned());
    }
    let volume = BlobVolume {
        label,
        namespace,
        size,
        options,
        read_only,
        account,
        container_name,
        handle_prefix: ex.experiment.id.clone(),
    };
    blob_objects(facts.cluster, volume)
}

/// A checked `blob_volume`, ready to become objects.
struct BlobVolume {
    label: String,
    namespace: String,
    size: String,
    options: Vec<String>,
    read_only: bool,
    account: Address,
    container_name: String,
    /// What makes the volume handle unique in the cluster: the experiment's id.
    handle_prefix: String,
}

/// The Namespace (unless `default`), Secret, PersistentVolume and claim of a Blob volume.
fn blob_objects(cluster: &Address, v: BlobVolume) -> Vec<KubeObject> {
    let BlobVolume {
        label,
        namespace,
        size,
        options,
        read_only,
        account,
        container_name,
        handle_prefix,
    } = v;
    let facts_cluster = cluster;
    let secret = format!("{label}-blob");
    let pv = format!("{namespace}-{label}");
    let access = if read_only {
        "ReadOnlyMany"
    } else {
        "ReadWriteMany"
    };
    let source = format!("blob_volume {label:?}");
    let mut objects = Vec::new();
    if namespace != "default" {
        objects.push(object(
            facts_cluster,
            &source,
            json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        ));
    }
    objects.push(KubeObject {
        account_key_of: Some(account),
        ..object(
            facts_cluster,
            &source,
            json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret, "namespace": namespace}}),
        )
    });
    objects.push(object(facts_cluster, &source, json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv, "annotations": {"pv.kubernetes.io/provisioned-by": "blob.csi.azure.com"}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": [access],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": BLOB_STORAGE_CLASS,
            "mountOptions": options,
            "csi": {
                "driver": "blob.csi.azure.com",
                "volumeHandle": format!("{}#{namespace}#{label}", handle_prefix),
                "readOnly": read_only,
                "volumeAttributes": {"containerName": container_name},
                "nodeStageSecretRef": {"name": secret, "namespace": namespace},
            },
        }})));
    objects.push(object(
        facts_cluster,
        &source,
        json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": label, "namespace": namespace},
        "spec": {
            "accessModes": [access],
            "storageClassName": BLOB_STORAGE_CLASS,
            "volumeName": pv,
            "resources": {"requests": {"storage": size}},
        }}),
    ));
    objects
}

/// A `manifest` block: every document of its YAML file, each a Kubernetes object.
fn manifest_file(ex: &mut Expander<'_>, block: &EvalBlock, cluster: &Address) -> Vec<KubeObject> {
    let attrs: ManifestAttrs =
        decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let Some(file) = attrs.file else {
        return Vec::new();
    };
    let path = ex.base_dir.join(&file.value);
    let mut check = Check::new(block, ex.diags);
    let read = std::fs::read_to_string(&path)
        .map_err(|err| {
            (
                format!("{}: {err}", path.display()),
                "give a path relative to the manifest's directory",
            )
        })
        .and_then(|text| documents(&text, &file.value));
    match read {
        Ok(values) => {
            let source = format!("manifest {:?}", block.label());
            values
                .into_iter()
                .map(|v| object(cluster, &source, v))
                .collect()
        }
        Err((label, help)) => {
            check.report(
                Diagnostic::error(format!(
                    "`file` {:?} is not a Kubernetes manifest dsinfra can apply",
                    file.value
                ))
                .with_span(file.span.clone())
                .with_label(label)
                .with_help(help),
            );
            Vec::new()
        }
    }
}

/// The objects of a multi-document YAML text (`origin` names it in messages, with the line and
/// column of a YAML error): each document one object with `apiVersion`, `kind` and
/// `metadata.name`; empty documents are skipped; at least one object.
pub(super) fn documents(text: &str, origin: &str) -> Result<Vec<Value>, (String, &'static str)> {
    let mut objects = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document).map_err(|err| {
            let at = err
                .location()
                .map_or_else(String::new, |l| format!(":{}:{}", l.line(), l.column()));
            (
                format!("{origin}{at}: {err}"),
                "fix the YAML (kubectl would refuse it too)",
            )
        })?;
        if value.is_null() {
            continue;
        }
        let field = |pointer: &str| {
            value
                .pointer(pointer)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let missing: Vec<&str> = [
            ("/apiVersion", "apiVersion"),
            ("/kind", "kind"),
            ("/metadata/name", "metadata.name"),
        ]
        .iter()
        .filter(|(pointer, _)| field(pointer).is_none())
        .map(|(_, name)| *name)
        .collect();
        if !value.is_object() || !missing.is_empty() {
            let what = if value.is_object() {
                missing.join(", ")
            } else {
                "mapping: it is not an object".to_owned()
            };
            return Err((
                format!("{origin}: document {} has no {what}", index + 1),
                "each document is one object with apiVersion, kind and metadata.name (a List is not taken: list its items as documents)",
            ));
        }
        objects.push(value);
    }
    if objects.is_empty() {
        return Err((
            format!("{origin} holds no object"),
            "write at least one Kubernetes object in it",
        ));
    }
    Ok(objects)
}

/// An RFC 1123 label: what Kubernetes takes as a namespace's name.
pub(super) fn is_dns_label(name: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && alnum(name.chars().next())
        && alnum(name.chars().last())
}
