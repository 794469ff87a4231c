//! The Kubernetes objects of the plan: what apply will do to each object the manifest lists for
//! an AKS cluster, and which recorded objects it prunes, judged from the state's records alone
//! (no I/O). Apply re-applies every listed object (server-side apply changes nothing where the
//! cluster matches), so an object changed behind dsinfra's back is put back even when the plan
//! shows it unchanged; apply says which ones it found so.

use serde::{Deserialize, Serialize};

use crate::addr::Address;
use crate::model::Desired;
use crate::state::State;

use super::{Mode, PlanOptions};

/// What apply does to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KubeAction {
    Create,
    Update,
    Unchanged,
    /// Recorded, no longer in the manifest: deleted from the cluster.
    Prune,
}

/// One object of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeChange {
    pub cluster: Address,
    /// `Kind/namespace/name`.
    pub id: String,
    /// What asked for it (`manifest "alluxio"`), or `state` for a pruned one.
    pub source: String,
    pub action: KubeAction,
}

/// The objects' changes, in manifest order, prunes last, of the clusters `-target` selects
/// (every one without). A destroy lists none: the cluster takes its objects with it. A cluster
/// the plan deletes prunes nothing either, for the same reason.
pub fn changes(desired: &Desired, state: &State, opts: &PlanOptions) -> Vec<KubeChange> {
    if matches!(opts.mode, Mode::Destroy { .. }) {
        return Vec::new();
    }
    let targets = &opts.targets;
    let in_scope =
        |cluster: &Address| targets.is_empty() || targets.iter().any(|t| t.selects(cluster));
    let mut out: Vec<KubeChange> = desired
        .kube_objects
        .iter()
        .filter(|o| in_scope(&o.cluster))
        .map(|o| {
            let id = o.id();
            let recorded = state
                .kube_objects
                .iter()
                .find(|r| r.cluster == o.cluster && r.id() == id);
            let action = match recorded {
                None => KubeAction::Create,
                Some(r) if r.hash == o.hash() => KubeAction::Unchanged,
                Some(_) => KubeAction::Update,
            };
            KubeChange {
                cluster: o.cluster.clone(),
                id,
                source: o.source.clone(),
                action,
            }
        })
        .collect();
    let kept = |cluster: &Address| desired.resources.iter().any(|r| &r.address == cluster);
    for record in &state.kube_objects {
        let id = record.id();
        let listed = desired
            .kube_objects
            .iter()
            .any(|o| o.cluster == record.cluster && o.id() == id);
        if !listed && kept(&record.cluster) && in_scope(&record.cluster) {
            out.push(KubeChange {
                cluster: record.cluster.clone(),
                id,
                source: "state".to_owned(),
                action: KubeAction::Prune,
            });
        }
    }
    out
}

impl KubeChange {
    /// Whether apply writes or deletes it.
    pub fn changes(&self) -> bool {
        self.action != KubeAction::Unchanged
    }
}
