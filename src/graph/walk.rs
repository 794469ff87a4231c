//! The parallel walk: start each node the moment everything it depends on has succeeded.
//!
//! Terraform walks its graph with a fixed parallelism of 10 *around the walk*; style.md asks for
//! concurrency limited around the work instead, so the walk itself spawns every ready node at once
//! and the work takes a permit from a semaphore only around each of its cloud requests (the
//! caller owns that semaphore: the engine's `limiter`, the ARM client's gate). The critical path,
//! not a walk limit, then bounds the makespan.
//!
//! Failure semantics (terraform's): a failed node's dependents are skipped, with the failed node
//! named as the reason, and independent work goes on. Cancellation (the first Ctrl-C) stops new
//! nodes from starting; nodes already running finish and are reported.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use tokio::sync::watch;
use tokio::task::JoinSet;

/// What happened to every node of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkReport<K: Ord, E> {
    /// Nodes whose work succeeded, in completion order.
    pub succeeded: Vec<K>,
    /// Nodes whose work failed, with their error.
    pub failed: BTreeMap<K, E>,
    /// Nodes never started because a dependency failed or was skipped: node -> the failed node
    /// that caused it.
    pub skipped: BTreeMap<K, K>,
    /// Nodes never started because the walk was cancelled.
    pub cancelled: BTreeSet<K>,
}

impl<K: Ord, E> WalkReport<K, E> {
    /// Whether every node succeeded.
    pub fn is_success(&self) -> bool {
        self.failed.is_empty() && self.skipped.is_empty() && self.cancelled.is_empty()
    }
}

/// Walk `deps` (node -> the nodes it depends on; every dependency must itself be a key) and run
/// `work` for each node once all its dependencies succeeded. Dependencies that are not keys are
/// treated as already satisfied (resources outside a targeted subset, or unchanged ones).
///
/// `cancel` flips to `true` to stop starting new nodes.
pub async fn walk<K, E, F, Fut>(
    deps: &BTreeMap<K, BTreeSet<K>>,
    work: F,
    mut cancel: watch::Receiver<bool>,
) -> WalkReport<K, E>
where
    K: Ord + Clone + Send + 'static,
    E: Send + 'static,
    F: Fn(K) -> Fut,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
{
    // Dependencies on nodes outside the walk are satisfied by definition.
    let mut waiting_on: BTreeMap<K, BTreeSet<K>> = deps
        .iter()
        .map(|(node, d)| {
            let inside = d
                .iter()
                .filter(|x| deps.contains_key(*x))
                .cloned()
                .collect();
            (node.clone(), inside)
        })
        .collect();
    let mut dependents: BTreeMap<K, Vec<K>> = BTreeMap::new();
    for (node, d) in &waiting_on {
        for dep in d {
            dependents
                .entry(dep.clone())
                .or_default()
                .push(node.clone());
        }
    }
    let mut report = WalkReport {
        succeeded: Vec::new(),
        failed: BTreeMap::new(),
        skipped: BTreeMap::new(),
        cancelled: BTreeSet::new(),
    };
    let mut running = JoinSet::new();
    let mut started: BTreeSet<K> = BTreeSet::new();
    let mut cancelled = *cancel.borrow();
    // Once every sender is gone nobody can cancel any more: stop listening, or `changed()` would
    // resolve immediately on every turn of the loop.
    let mut can_cancel = true;

    loop {
        if !cancelled {
            let ready: Vec<K> = waiting_on
                .iter()
                .filter(|(node, d)| d.is_empty() && !started.contains(*node))
                .map(|(node, _)| node.clone())
                .collect();
            for node in ready {
                started.insert(node.clone());
                let fut = work(node.clone());
                running.spawn(async move { (node, fut.await) });
            }
        }
        if running.is_empty() {
            break;
        }
        let joined = tokio::select! {
            joined = running.join_next() => joined,
            changed = cancel.changed(), if can_cancel && !cancelled => {
                match changed {
                    Ok(()) => cancelled = *cancel.borrow(),
                    Err(_) => can_cancel = false,
                }
                continue;
            }
        };
        let Some(joined) = joined else { break };
        let (node, result) = match joined {
            Ok(pair) => pair,
            // A panicking work function is a bug; surface it rather than hiding it as a skip.
            Err(join_error) => std::panic::resume_unwind(join_error.into_panic()),
        };
        waiting_on.remove(&node);
        match result {
            Ok(()) => {
                for dependent in dependents.get(&node).into_iter().flatten() {
                    if let Some(d) = waiting_on.get_mut(dependent) {
                        d.remove(&node);
                    }
                }
                report.succeeded.push(node);
            }
            Err(err) => {
                skip_dependents(&node, &dependents, &mut waiting_on, &mut report.skipped);
                report.failed.insert(node, err);
            }
        }
    }
    for node in waiting_on.into_keys() {
        if !report.skipped.contains_key(&node) {
            report.cancelled.insert(node);
        }
    }
    report
}

/// Mark everything downstream of `failed` as skipped because of it.
fn skip_dependents<K: Ord + Clone>(
    failed: &K,
    dependents: &BTreeMap<K, Vec<K>>,
    waiting_on: &mut BTreeMap<K, BTreeSet<K>>,
    skipped: &mut BTreeMap<K, K>,
) {
    let mut stack: Vec<K> = dependents.get(failed).cloned().unwrap_or_default();
    while let Some(node) = stack.pop() {
        if waiting_on.remove(&node).is_some() {
            stack.extend(dependents.get(&node).cloned().unwrap_or_default());
            skipped.insert(node, failed.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    fn graph(
        edges: &[(&'static str, &[&'static str])],
    ) -> BTreeMap<&'static str, BTreeSet<&'static str>> {
        edges
            .iter()
            .map(|(n, d)| (*n, d.iter().copied().collect()))
            .collect()
    }

    /// A receiver whose sender is already gone: the walk must neither cancel nor spin on it.
    fn never_cancel() -> watch::Receiver<bool> {
        watch::channel(false).1
    }

    #[tokio::test]
    async fn starts_each_node_once_its_dependencies_succeeded() {
        let deps = graph(&[
            ("rg", &[]),
            ("vnet", &["rg"]),
            ("nic", &["vnet", "pip"]),
            ("pip", &["rg"]),
            ("vm", &["nic"]),
        ]);
        let log = Arc::new(Mutex::new(Vec::new()));
        let report = walk(
            &deps,
            |node| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().expect("not poisoned").push(node);
                    Ok::<(), ()>(())
                }
            },
            never_cancel(),
        )
        .await;
        assert!(report.is_success());
        let order = log.lock().expect("not poisoned").clone();
        let pos = |n| order.iter().position(|x| *x == n).expect("ran");
        assert!(pos("rg") < pos("vnet") && pos("rg") < pos("pip"));
        assert!(pos("vnet") < pos("nic") && pos("pip") < pos("nic") && pos("nic") < pos("vm"));
    }

    #[tokio::test(start_paused = true)]
    async fn independent_nodes_run_concurrently() {
        // Ten independent 1-second nodes finish in ~1 s of (paused, virtual) time, not 10 s.
        let deps: BTreeMap<u32, BTreeSet<u32>> = (0..10).map(|i| (i, BTreeSet::new())).collect();
        let start = tokio::time::Instant::now();
        let report = walk(
            &deps,
            |_| async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok::<(), ()>(())
            },
            never_cancel(),
        )
        .await;
        assert_eq!(report.succeeded.len(), 10);
        assert!(
            start.elapsed() < Duration::from_millis(1500),
            "{:?}",
            start.elapsed()
        );
    }

    #[tokio::test]
    async fn a_failure_skips_only_its_dependents() {
        let deps = graph(&[
            ("rg", &[]),
            ("storage", &["rg"]),
            ("nic", &["rg"]),
            ("vm", &["nic"]),
            ("schedule", &["vm"]),
        ]);
        let report = walk(
            &deps,
            |node| async move {
                if node == "nic" {
                    Err("NicInUse")
                } else {
                    Ok(())
                }
            },
            never_cancel(),
        )
        .await;
        assert_eq!(report.failed.get("nic"), Some(&"NicInUse"));
        assert_eq!(report.skipped.get("vm"), Some(&"nic"));
        assert_eq!(report.skipped.get("schedule"), Some(&"nic"));
        assert!(report.succeeded.contains(&"storage"));
        assert!(report.cancelled.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_lets_running_work_finish_and_starts_nothing_new() {
        let deps = graph(&[("a", &[]), ("b", &["a"])]);
        let (tx, rx) = watch::channel(false);
        let tx = Arc::new(tx);
        let report = walk(
            &deps,
            |node| {
                let tx = Arc::clone(&tx);
                async move {
                    if node == "a" {
                        tx.send(true).expect("walk holds the receiver");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Ok::<(), ()>(())
                }
            },
            rx,
        )
        .await;
        assert_eq!(report.succeeded, vec!["a"]);
        assert_eq!(report.cancelled, BTreeSet::from(["b"]));
    }

    #[tokio::test]
    async fn dependencies_outside_the_walk_count_as_satisfied() {
        let deps = graph(&[("vm", &["nic-unchanged"])]);
        let report = walk(&deps, |_| async { Ok::<(), ()>(()) }, never_cancel()).await;
        assert_eq!(report.succeeded, vec!["vm"]);
    }
}
