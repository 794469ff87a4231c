//! AKS credentials on the user's machine: each cluster's user kubeconfig
//! (`listClusterUserCredential`), written next to the state (never into it) with mode 0600, so
//! that the user's own `kubectl` (or `dsinfra kubectl`) reaches the cluster.
//!
//! The kubeconfig is a credential: it is read from ARM when it is needed (after an apply that
//! made or kept a cluster, and before each `dsinfra kubectl`), so a rotated credential is never
//! stale for long, and it is registered for redaction the moment it is read.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;

use crate::addr::Address;
use crate::azure::client::Idempotency;
use crate::azure::types::aks::CredentialResults;
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::model::ResourceKind;
use crate::secret::Secret;
use crate::state::{ResourceStatus, State};

/// Where the kubeconfig of the cluster at `cluster` (`aks.train.cluster`) is kept: the state
/// directory's `kubeconfig-<label>`.
pub fn kubeconfig_path(state_dir: &Path, cluster: &Address) -> PathBuf {
    state_dir.join(format!("kubeconfig-{}", cluster.name))
}

/// The AKS clusters the state holds as created.
pub fn clusters(state: &State) -> Vec<(&Address, &str)> {
    state
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::AksCluster && r.status == ResourceStatus::Created)
        .filter_map(|r| Some((&r.address, r.id.as_deref()?)))
        .collect()
}

/// The user kubeconfig of the cluster at `id`, as AKS hands it out.
///
/// # Errors
///
/// ARM refused (the cluster is gone, the caller may not list credentials), or the answer held
/// no kubeconfig.
pub async fn user_kubeconfig(
    client: &ArmClient,
    id: &ResourceId,
) -> Result<Secret<String>, ArmError> {
    // Listing credentials changes nothing: repeating it is safe.
    let answer: Option<CredentialResults> = client
        .post_action(
            id,
            "listClusterUserCredential",
            &[],
            None::<&Value>,
            Idempotency::Idempotent,
        )
        .await?;
    let encoded = answer
        .and_then(|a| a.kubeconfigs.into_iter().next())
        .map(|k| Secret::registered(k.value))
        .ok_or_else(|| {
            ArmError::usage(format!(
                "{id}: listClusterUserCredential answered no kubeconfig"
            ))
        })?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.expose().trim())
        .map_err(|e| ArmError::usage(format!("{id}: the kubeconfig is not base64: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ArmError::usage(format!("{id}: the kubeconfig is not UTF-8 text")))?;
    Ok(Secret::registered(text))
}

/// Writes a kubeconfig to `path`, mode 0600 from its first byte, atomically (a half-written
/// credential file is never left behind, nor a readable one).
///
/// # Errors
///
/// The file could not be written.
pub fn write(path: &Path, kubeconfig: &Secret<String>) -> std::io::Result<()> {
    crate::atomic_file::write_private(path, kubeconfig.expose().as_bytes())
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Reads and writes the kubeconfig of every cluster the state holds; one line per cluster
/// saying where it went, or why not (a failure here never fails the apply that made them).
pub async fn write_all(client: &ArmClient, state: &State, state_dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for (address, id) in clusters(state) {
        let path = kubeconfig_path(state_dir, address);
        let line = match user_kubeconfig(client, &ResourceId::from_raw(id.to_owned())).await {
            Ok(kubeconfig) => match write(&path, &kubeconfig) {
                Ok(()) => format!(
                    "{address}: kubeconfig written to {} (mode 0600); `dsinfra kubectl` uses it",
                    path.display()
                ),
                Err(e) => format!("{address}: could not write {}: {e}", path.display()),
            },
            Err(e) => format!("{address}: no kubeconfig: {e}"),
        };
        lines.push(line);
    }
    lines
}

/// Removes the kubeconfigs of clusters the state no longer holds (destroyed, or removed from the
/// manifest): a credential of a cluster that is gone is not left behind. Returns what it removed.
pub fn remove_stale(state: &State, state_dir: &Path) -> Vec<PathBuf> {
    let kept: Vec<PathBuf> = clusters(state)
        .into_iter()
        .map(|(address, _)| kubeconfig_path(state_dir, address))
        .collect();
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let is_kubeconfig = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("kubeconfig-") && !n.contains(".tmp"));
        if is_kubeconfig && !kept.contains(&path) && std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}
