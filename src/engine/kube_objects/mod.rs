//! Apply's last phase for AKS clusters: the manifest's Kubernetes objects (`aks` blocks'
//! `manifest`, `blob_volume` and the device plugin) put on each cluster by server-side apply once
//! it answers, recorded in the state (kind, namespace, name, hash; never the objects), and the
//! recorded ones the manifest no longer lists pruned.
//!
//! Every listed object is applied at every apply, so one changed or deleted behind dsinfra's back
//! is put back (drift), and said: apply reads each object before it applies it. Namespaces go
//! first, then CRDs (their kinds are served once they are), then the rest in manifest order.

mod client;

use serde_json::{Value, json};

use crate::addr::Address;
use crate::azure::{ArmClient, ResourceId};
use crate::model::{Desired, KubeObject, ResourceKind};
use crate::secret::Secret;
use crate::state::{KubeRecord, State};

use client::Cluster;

/// What one apply did to the objects of the clusters: one line per object that changed (or was
/// found changed), the records the state keeps, and what failed.
#[derive(Debug, Default)]
pub struct Outcome {
    pub lines: Vec<String>,
    pub records: Vec<KubeRecord>,
    pub failures: Vec<String>,
}

/// How long a kind a CRD of this apply defines may take to be served (a real API server
/// establishes a CRD in a few seconds).
const CRD_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Applies every cluster's objects and prunes the dropped ones, on the clusters `targets`
/// selects (every one when empty; the others' records are kept as they are). Clusters the state
/// does not hold as created are left alone (their objects wait for the apply that makes them).
pub async fn apply(
    client: &ArmClient,
    subscription: &str,
    desired: &Desired,
    state: &State,
    targets: &[Address],
) -> Outcome {
    let mut outcome = Outcome::default();
    let mut clusters: Vec<&Address> = desired.kube_objects.iter().map(|o| &o.cluster).collect();
    clusters.extend(state.kube_objects.iter().map(|r| &r.cluster));
    clusters.sort();
    clusters.dedup();
    for cluster in clusters {
        let recorded: Vec<&KubeRecord> = state
            .kube_objects
            .iter()
            .filter(|r| &r.cluster == cluster)
            .collect();
        if !(targets.is_empty() || targets.iter().any(|t| t.selects(cluster))) {
            outcome.records.extend(recorded.into_iter().cloned());
            continue;
        }
        let Some(id) = state
            .resource(cluster)
            .filter(|r| r.kind == ResourceKind::AksCluster)
            .and_then(|r| r.id.clone())
        else {
            // The cluster is gone: its objects went with it.
            continue;
        };
        let objects: Vec<&KubeObject> = desired
            .kube_objects
            .iter()
            .filter(|o| &o.cluster == cluster)
            .collect();
        let ctx = Ctx {
            client,
            subscription,
            desired,
            cluster,
        };
        match one_cluster(
            &ctx,
            &ResourceId::from_raw(id),
            &objects,
            &recorded,
            &mut outcome,
        )
        .await
        {
            Ok(()) => {}
            Err(err) => {
                // Nothing known changed: the records stay as they were.
                outcome.records.extend(recorded.into_iter().cloned());
                outcome.failures.push(format!("{cluster}: {err}"));
            }
        }
    }
    outcome
}

struct Ctx<'a> {
    client: &'a ArmClient,
    subscription: &'a str,
    desired: &'a Desired,
    cluster: &'a Address,
}

async fn one_cluster(
    ctx: &Ctx<'_>,
    id: &ResourceId,
    objects: &[&KubeObject],
    recorded: &[&KubeRecord],
    outcome: &mut Outcome,
) -> Result<(), String> {
    let kubeconfig = crate::engine::kube::user_kubeconfig(ctx.client, id)
        .await
        .map_err(|e| format!("no kubeconfig: {e}"))?;
    let token = match client::auth(&kubeconfig)? {
        client::Auth::Token(token) => token,
        client::Auth::Entra { server_id } => {
            let scope = format!("{server_id}/.default");
            let token = ctx
                .client
                .token_for(&scope)
                .await
                .map_err(|e| format!("no Entra ID token for the cluster ({scope}): {e}"))?;
            Secret::registered(token.token.expose().to_owned())
        }
    };
    let mut api = Cluster::from_kubeconfig(&kubeconfig, token)?;
    api.discover().await?;
    let rank = |o: &&&KubeObject| match o.kind() {
        "Namespace" => 0,
        "CustomResourceDefinition" => 1,
        _ => 2,
    };
    let mut ordered: Vec<&&KubeObject> = objects.iter().collect();
    ordered.sort_by_key(rank);
    let mut defined_crd = false;
    for object in ordered {
        let id = object.id();
        let record = recorded.iter().find(|r| r.id() == id);
        match apply_one(ctx, &mut api, object, defined_crd).await {
            Ok((found, applied_namespace)) => {
                defined_crd |= object.kind() == "CustomResourceDefinition";
                let verb = match (record, found) {
                    (None, _) => Some("created"),
                    (Some(r), _) if r.hash != object.hash() => Some("updated"),
                    (Some(_), Found::Missing) => {
                        Some("re-created (it was deleted outside dsinfra)")
                    }
                    (Some(_), Found::Changed) => Some("put back (it was changed outside dsinfra)"),
                    (Some(_), Found::Same) => None,
                };
                if let Some(verb) = verb {
                    outcome.lines.push(format!(
                        "{}: {id} {verb} (from {})",
                        ctx.cluster, object.source
                    ));
                }
                outcome.records.push(KubeRecord {
                    cluster: ctx.cluster.clone(),
                    api_version: object.api_version().to_owned(),
                    kind: object.kind().to_owned(),
                    namespace: object.namespace().map(str::to_owned),
                    name: object.name().to_owned(),
                    applied_namespace,
                    hash: object.hash(),
                });
            }
            Err(err) => {
                outcome.records.extend(record.map(|r| (*r).clone()));
                outcome.failures.push(format!(
                    "{}: {id} (from {}): {err}",
                    ctx.cluster, object.source
                ));
            }
        }
    }
    for record in recorded {
        let id = record.id();
        if objects.iter().any(|o| o.id() == id) {
            continue;
        }
        let pruned = match api.served(&record.api_version, &record.kind) {
            // Its kind is gone (its CRD was deleted): so is the object.
            None => Ok(()),
            Some(served) => {
                // Where it went: as written, or where apply put it when the manifest gave none.
                let namespace = record
                    .applied_namespace
                    .as_deref()
                    .or(record.namespace.as_deref());
                api.delete(served, namespace, &record.name).await
            }
        };
        match pruned {
            Ok(()) => outcome.lines.push(format!(
                "{}: {id} pruned (no longer in the manifest)",
                ctx.cluster
            )),
            Err(err) => {
                outcome.records.push((*record).clone());
                outcome
                    .failures
                    .push(format!("{}: pruning {id}: {err}", ctx.cluster));
            }
        }
    }
    Ok(())
}

/// What the cluster held before the apply.
enum Found {
    Missing,
    Same,
    Changed,
}

/// Applies one object: what the cluster held before, and the namespace it went to when the
/// manifest gave none.
async fn apply_one(
    ctx: &Ctx<'_>,
    api: &mut Cluster,
    object: &KubeObject,
    defined_crd: bool,
) -> Result<(Found, Option<String>), String> {
    let served = served(api, object, defined_crd).await?;
    let mut body = object.object.clone();
    let mut applied_namespace = None;
    if served.namespaced && object.namespace().is_none() {
        let namespace = object.fallback_namespace.as_deref().unwrap_or("default");
        body["metadata"]["namespace"] = json!(namespace);
        applied_namespace = Some(namespace.to_owned());
    }
    if let Some(account) = &object.account_key_of {
        body["stringData"] = account_secret(ctx, account).await?;
    }
    let namespace = body
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let before = api
        .get(&served, namespace.as_deref(), object.name())
        .await?;
    let after = api.apply(&served, &body).await?;
    let version = |v: &Value| v.pointer("/metadata/resourceVersion").cloned();
    let found = match before {
        None => Found::Missing,
        Some(before) if version(&before) == version(&after) => Found::Same,
        Some(_) => Found::Changed,
    };
    Ok((found, applied_namespace))
}

/// Where the object's kind is served; a kind a CRD of this apply defines is waited for.
async fn served(
    api: &mut Cluster,
    object: &KubeObject,
    defined_crd: bool,
) -> Result<client::Served, String> {
    let started = std::time::Instant::now();
    loop {
        if let Some(served) = api.served(object.api_version(), object.kind()) {
            return Ok(served.clone());
        }
        if !defined_crd || started.elapsed() > CRD_WAIT {
            return Err(format!(
                "the cluster serves no kind {} in {}: a CRD defines it? put the CRD in a `manifest` of this cluster (it is applied first)",
                object.kind(),
                object.api_version()
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        api.discover().await?;
    }
}

/// A Blob volume's Secret data: the account's name and its first key, read now (`listKeys`).
async fn account_secret(ctx: &Ctx<'_>, account: &Address) -> Result<Value, String> {
    let resource = ctx
        .desired
        .resource(account)
        .ok_or_else(|| format!("the manifest has no {account}"))?;
    let keys = ctx
        .client
        .list_storage_keys(&ResourceId::from_raw(resource.arm_id(ctx.subscription)))
        .await
        .map_err(|e| format!("listKeys on {account} failed: {e}"))?;
    for key in &keys.keys {
        crate::secret::register(key.value.expose());
    }
    let key: Secret<String> = keys
        .keys
        .first()
        .map(|k| Secret::new(k.value.expose().to_owned()))
        .ok_or_else(|| format!("listKeys on {account} returned no keys"))?;
    Ok(json!({"azurestorageaccountname": resource.name, "azurestorageaccountkey": key.expose()}))
}
