//! A small generic dependency graph (a DAG) over any ordered key, built on petgraph.
//!
//! The planner orders changes with it, `dsinfra graph` prints it as DOT, and [`walk()`] runs async
//! work over it in parallel (the engine's apply and destroy), starting each node once its
//! dependencies succeeded. It knows nothing about Azure or addresses: keys are any
//! `Ord + Clone + Display` type, so this module could become its own crate.
//!
//! Edges point from a dependency to its dependent ("`a` must exist before `b`"), so a topological
//! order lists dependencies first. Every query that returns several nodes returns them in key
//! order, and the topological order breaks ties by key, so plans and DOT output are stable from run
//! to run (petgraph's own `toposort` makes no such promise).

mod dot;
mod walk;

pub use dot::DotNode;
pub use walk::{WalkReport, walk};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};

/// A dependency cycle, as the path that closes it: the first node is repeated at the end
/// (`a -> b -> a`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("dependency cycle: {}", display_path(.path))]
pub struct CycleError<K: fmt::Display + fmt::Debug> {
    /// The nodes of the cycle in dependency order, first node repeated at the end.
    pub path: Vec<K>,
}

fn display_path<K: fmt::Display>(path: &[K]) -> String {
    path.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// A directed graph of dependencies between keys.
#[derive(Debug, Clone)]
pub struct Dag<K> {
    graph: DiGraph<K, ()>,
    index: BTreeMap<K, NodeIndex>,
}

impl<K: Ord + Clone + fmt::Display + fmt::Debug> Default for Dag<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord + Clone + fmt::Display + fmt::Debug> Dag<K> {
    /// An empty graph.
    pub fn new() -> Self {
        Self {
            graph: DiGraph::new(),
            index: BTreeMap::new(),
        }
    }

    /// Add a node; adding one that exists is a no-op. Returns whether it was new.
    pub fn add_node(&mut self, key: K) -> bool {
        let before = self.index.len();
        self.index_of(key);
        self.index.len() > before
    }

    /// Record that `dependent` needs `dependency` first, adding either node if missing. Adding the
    /// same edge twice keeps one edge.
    pub fn add_dependency(&mut self, dependent: K, dependency: K) {
        let to = self.index_of(dependent);
        let from = self.index_of(dependency);
        self.graph.update_edge(from, to, ());
    }

    /// The index of a node, adding it if missing.
    fn index_of(&mut self, key: K) -> NodeIndex {
        if let Some(ix) = self.index.get(&key) {
            return *ix;
        }
        let ix = self.graph.add_node(key.clone());
        self.index.insert(key, ix);
        ix
    }

    /// Whether the graph holds `key`.
    pub fn contains(&self, key: &K) -> bool {
        self.index.contains_key(key)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Every node, in key order.
    pub fn nodes(&self) -> impl Iterator<Item = &K> {
        self.index.keys()
    }

    /// Every edge as `(dependent, dependency)`, ordered by dependent then dependency.
    pub fn edges(&self) -> Vec<(K, K)> {
        let mut edges: Vec<(K, K)> = self
            .graph
            .edge_indices()
            .filter_map(|e| self.graph.edge_endpoints(e))
            .map(|(from, to)| (self.graph[to].clone(), self.graph[from].clone()))
            .collect();
        edges.sort();
        edges
    }

    /// The nodes `key` depends on directly (empty for an unknown key).
    pub fn dependencies(&self, key: &K) -> BTreeSet<K> {
        self.neighbours(key, Direction::Incoming)
    }

    /// The nodes that depend on `key` directly (empty for an unknown key).
    pub fn dependents(&self, key: &K) -> BTreeSet<K> {
        self.neighbours(key, Direction::Outgoing)
    }

    /// Everything `key` depends on, directly or not (not `key` itself, unless it is on a cycle).
    pub fn all_dependencies(&self, key: &K) -> BTreeSet<K> {
        self.reachable(key, Direction::Incoming)
    }

    /// Everything that depends on `key`, directly or not.
    pub fn all_dependents(&self, key: &K) -> BTreeSet<K> {
        self.reachable(key, Direction::Outgoing)
    }

    /// The dependency map the engine's walk takes: node -> the nodes it depends on directly.
    pub fn dependency_map(&self) -> BTreeMap<K, BTreeSet<K>> {
        self.index
            .keys()
            .map(|k| (k.clone(), self.dependencies(k)))
            .collect()
    }

    /// Nodes not in `done` whose dependencies are all in `done`, in key order: what a walk may
    /// start next.
    pub fn ready_nodes(&self, done: &BTreeSet<K>) -> Vec<K> {
        self.index
            .iter()
            .filter(|(key, _)| !done.contains(*key))
            .filter(|(_, ix)| {
                self.graph
                    .neighbors_directed(**ix, Direction::Incoming)
                    .all(|dep| done.contains(&self.graph[dep]))
            })
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Dependencies first; among nodes that are ready at the same time, the smallest key first.
    pub fn topological_order(&self) -> Result<Vec<K>, CycleError<K>> {
        let mut waiting: BTreeMap<NodeIndex, usize> = self
            .index
            .values()
            .map(|ix| {
                let deps = self
                    .graph
                    .neighbors_directed(*ix, Direction::Incoming)
                    .count();
                (*ix, deps)
            })
            .collect();
        let mut ready: BTreeSet<(K, NodeIndex)> = waiting
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(ix, _)| (self.graph[*ix].clone(), *ix))
            .collect();
        let mut order = Vec::with_capacity(self.len());
        while let Some((key, ix)) = ready.pop_first() {
            order.push(key);
            for dependent in self.graph.neighbors_directed(ix, Direction::Outgoing) {
                if let Some(n) = waiting.get_mut(&dependent) {
                    *n -= 1;
                    if *n == 0 {
                        ready.insert((self.graph[dependent].clone(), dependent));
                    }
                }
            }
        }
        if order.len() == self.len() {
            Ok(order)
        } else {
            // Kahn's algorithm stalls only when the graph has a cycle, so one is always found.
            let path = self.find_cycle().unwrap_or_default();
            Err(CycleError { path })
        }
    }

    /// Dependents first: the order to delete things in.
    pub fn reverse_order(&self) -> Result<Vec<K>, CycleError<K>> {
        let mut order = self.topological_order()?;
        order.reverse();
        Ok(order)
    }

    /// A dependency cycle if there is one, as a path in dependency order with the first node
    /// repeated at the end (`a -> b -> a` means `b` depends on `a` and `a` on `b`). The search
    /// starts from the smallest key, so the same graph always reports the same cycle.
    pub fn find_cycle(&self) -> Option<Vec<K>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            OnStack,
            Done,
        }
        let mut marks: BTreeMap<NodeIndex, Mark> =
            self.index.values().map(|ix| (*ix, Mark::New)).collect();
        for start in self.index.values() {
            if marks[start] != Mark::New {
                continue;
            }
            // Iterative depth-first search along dependency -> dependent edges; `stack` holds the
            // current path with the dependents still to visit from each node.
            let mut stack: Vec<(NodeIndex, Vec<NodeIndex>)> = vec![(*start, self.next_of(*start))];
            marks.insert(*start, Mark::OnStack);
            while let Some((node, pending)) = stack.last_mut() {
                let node = *node;
                let Some(next) = pending.pop() else {
                    marks.insert(node, Mark::Done);
                    stack.pop();
                    continue;
                };
                match marks[&next] {
                    Mark::New => {
                        marks.insert(next, Mark::OnStack);
                        stack.push((next, self.next_of(next)));
                    }
                    Mark::OnStack => {
                        // A node marked on-stack is on the stack, so `position` always finds it.
                        let from = stack.iter().position(|(n, _)| *n == next).unwrap_or(0);
                        let mut path: Vec<K> = stack[from..]
                            .iter()
                            .map(|(n, _)| self.graph[*n].clone())
                            .collect();
                        path.push(self.graph[next].clone());
                        return Some(path);
                    }
                    Mark::Done => {}
                }
            }
        }
        None
    }

    /// Dependents of a node, largest key first so that popping visits the smallest first.
    fn next_of(&self, ix: NodeIndex) -> Vec<NodeIndex> {
        let mut next: Vec<NodeIndex> = self
            .graph
            .neighbors_directed(ix, Direction::Outgoing)
            .collect();
        next.sort_by(|a, b| self.graph[*b].cmp(&self.graph[*a]));
        next
    }

    fn neighbours(&self, key: &K, direction: Direction) -> BTreeSet<K> {
        self.index.get(key).map_or_else(BTreeSet::new, |ix| {
            self.graph
                .neighbors_directed(*ix, direction)
                .map(|n| self.graph[n].clone())
                .collect()
        })
    }

    fn reachable(&self, key: &K, direction: Direction) -> BTreeSet<K> {
        let mut seen = BTreeSet::new();
        let Some(start) = self.index.get(key) else {
            return seen;
        };
        let mut stack = vec![*start];
        while let Some(ix) = stack.pop() {
            for n in self.graph.neighbors_directed(ix, direction) {
                if seen.insert(self.graph[n].clone()) {
                    stack.push(n);
                }
            }
        }
        seen
    }

    /// The graph in Graphviz DOT. Nodes and edges appear in key order; `describe` supplies each
    /// node's label, cluster and extra attributes. Edges point from a dependent to what it depends
    /// on, as in `terraform graph`.
    pub fn to_dot(&self, name: &str, describe: impl Fn(&K) -> DotNode) -> String {
        dot::render(self, name, describe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(edges: &[(&'static str, &'static str)]) -> Dag<&'static str> {
        let mut dag = Dag::new();
        for (dependent, dependency) in edges {
            dag.add_dependency(*dependent, *dependency);
        }
        dag
    }

    fn vm_graph() -> Dag<&'static str> {
        let mut g = dag(&[
            ("vnet", "rg"),
            ("pip", "rg"),
            ("nic", "vnet"),
            ("nic", "pip"),
            ("vm", "nic"),
            ("disk", "rg"),
            ("vm", "disk"),
        ]);
        g.add_node("storage");
        g
    }

    #[test]
    fn topological_order_puts_dependencies_first_and_breaks_ties_by_key() {
        let order = vm_graph().topological_order().expect("acyclic");
        assert_eq!(order, ["rg", "disk", "pip", "storage", "vnet", "nic", "vm"]);
    }

    #[test]
    fn reverse_order_puts_dependents_first() {
        let order = vm_graph().reverse_order().expect("acyclic");
        assert_eq!(order, ["vm", "nic", "vnet", "storage", "pip", "disk", "rg"]);
    }

    #[test]
    fn direct_and_transitive_queries() {
        let g = vm_graph();
        assert_eq!(g.dependencies(&"nic"), BTreeSet::from(["pip", "vnet"]));
        assert_eq!(g.dependents(&"rg"), BTreeSet::from(["disk", "pip", "vnet"]));
        assert_eq!(
            g.all_dependencies(&"vm"),
            BTreeSet::from(["disk", "nic", "pip", "rg", "vnet"])
        );
        assert_eq!(g.all_dependents(&"vnet"), BTreeSet::from(["nic", "vm"]));
        assert!(g.all_dependencies(&"missing").is_empty());
        assert!(g.dependents(&"storage").is_empty());
    }

    #[test]
    fn duplicate_nodes_and_edges_are_kept_once() {
        let mut g = dag(&[("b", "a"), ("b", "a")]);
        assert!(!g.add_node("a"));
        assert_eq!(g.len(), 2);
        assert_eq!(g.edges(), [("b", "a")]);
    }

    #[test]
    fn finds_a_cycle_as_a_closed_path() {
        let g = dag(&[("b", "a"), ("c", "b"), ("a", "c"), ("d", "a")]);
        assert_eq!(g.find_cycle(), Some(vec!["a", "b", "c", "a"]));
        let err = g.topological_order().expect_err("cyclic");
        assert_eq!(err.to_string(), "dependency cycle: a -> b -> c -> a");
        assert!(vm_graph().find_cycle().is_none());
    }

    #[test]
    fn a_self_dependency_is_a_cycle_of_one() {
        let g = dag(&[("a", "a")]);
        assert_eq!(g.find_cycle(), Some(vec!["a", "a"]));
    }

    #[test]
    fn ready_nodes_are_those_whose_dependencies_are_done() {
        let g = vm_graph();
        assert_eq!(g.ready_nodes(&BTreeSet::new()), ["rg", "storage"]);
        let done = BTreeSet::from(["rg", "storage", "pip"]);
        assert_eq!(g.ready_nodes(&done), ["disk", "vnet"]);
        let all: BTreeSet<_> = g.nodes().copied().collect();
        assert!(g.ready_nodes(&all).is_empty());
    }

    #[test]
    fn dependency_map_matches_the_walk_input_shape() {
        let map = dag(&[("b", "a")]).dependency_map();
        assert_eq!(
            map,
            BTreeMap::from([("a", BTreeSet::new()), ("b", BTreeSet::from(["a"]))])
        );
    }
}
