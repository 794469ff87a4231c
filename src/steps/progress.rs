//! Cluster barriers: which nodes a step waits for, and whether they got there.
//!
//! Steps run in list order on every node, each node at its own pace, except where the scope
//! changes: a head-only step that follows an all-nodes step waits until every node finished
//! everything before it (BeeOND may only start once every node installed it), and an all-nodes
//! step that follows a head-only step waits until the head finished it (nodes stage data only
//! after the head started BeeOND). A node that stopped (failed, or blocked itself) before the
//! barrier blocks everyone waiting on it. The rules are pure functions over published
//! [`Progress`], so they are unit-tested without SSH.

use super::spec::Scope;

/// How far one node got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Steps `0..passed` are done (ran, skipped, or not for this node).
    pub passed: usize,
    /// The node will not get further (it failed or was blocked).
    pub stopped: bool,
}

/// Whether `scope` includes node `index` (node 0 is the head).
pub fn applies(scope: Scope, index: usize) -> bool {
    scope == Scope::All || index == 0
}

/// The scope of nodes step `i` must wait for, if step `i` starts a barrier (its scope differs
/// from the previous step's).
pub fn barrier(scopes: &[Scope], i: usize) -> Option<Scope> {
    let previous = *scopes.get(i.checked_sub(1)?)?;
    (scopes.get(i) != Some(&previous)).then_some(previous)
}

/// The state of a barrier before step `i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Every awaited node passed step `i - 1`.
    Open,
    /// Some awaited nodes are still working.
    Pending,
    /// These awaited nodes stopped before the barrier (indices).
    Blocked(Vec<usize>),
}

/// Evaluates the barrier before step `i` for nodes in `scope`, given everyone's progress.
pub fn gate(progress: &[Progress], scope: Scope, i: usize) -> Gate {
    let awaited = progress
        .iter()
        .enumerate()
        .filter(|(index, _)| applies(scope, *index));
    let stopped: Vec<usize> = awaited
        .clone()
        .filter(|(_, p)| p.stopped && p.passed < i)
        .map(|(index, _)| index)
        .collect();
    if !stopped.is_empty() {
        Gate::Blocked(stopped)
    } else if awaited.clone().all(|(_, p)| p.passed >= i) {
        Gate::Open
    } else {
        Gate::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Scope::{All, Head};

    fn at(passed: usize) -> Progress {
        Progress {
            passed,
            stopped: false,
        }
    }

    #[test]
    fn barriers_sit_where_the_scope_changes() {
        let scopes = [All, All, Head, Head, All];
        let found: Vec<Option<Scope>> = (0..scopes.len()).map(|i| barrier(&scopes, i)).collect();
        assert_eq!(found, [None, None, Some(All), None, Some(Head)]);
    }

    #[test]
    fn head_step_waits_for_every_node() {
        // Step 2 is head-only after two all-nodes steps.
        assert_eq!(gate(&[at(2), at(1), at(2)], All, 2), Gate::Pending);
        assert_eq!(gate(&[at(2), at(2), at(3)], All, 2), Gate::Open);
    }

    #[test]
    fn nodes_wait_for_the_head_only_after_a_head_step() {
        assert_eq!(gate(&[at(2), at(5), at(0)], Head, 3), Gate::Pending);
        assert_eq!(gate(&[at(3), at(0), at(0)], Head, 3), Gate::Open);
    }

    #[test]
    fn a_stopped_node_blocks_the_barrier() {
        let failed = Progress {
            passed: 1,
            stopped: true,
        };
        assert_eq!(
            gate(&[at(2), failed, at(2)], All, 2),
            Gate::Blocked(vec![1])
        );
        // A node that stopped after the barrier does not block it.
        let late = Progress {
            passed: 3,
            stopped: true,
        };
        assert_eq!(gate(&[at(2), late], All, 2), Gate::Open);
    }

    #[test]
    fn the_head_is_node_zero() {
        assert!(applies(Head, 0) && !applies(Head, 1) && applies(All, 7));
    }
}
