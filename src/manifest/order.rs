//! The evaluation order: which part of the manifest is evaluated after which.
//!
//! Each local value, the `azure` block, each resource block and each output is a node of a
//! graph whose edges are the references written inside it (found and checked by `refs`). Nodes
//! are evaluated dependencies first, otherwise in source order; a cycle is reported as its path
//! (`vm.a -> vm.b -> vm.a`), located at the reference that closes it. The graph also remembers,
//! per attribute, the nodes it refers to and whether its references were wrong, so that
//! evaluation can skip what would only repeat an error already reported.

use std::collections::{BTreeMap, BTreeSet};

use crate::diag::{Diagnostic, Span};

use super::parse::{RawAttr, RawBlock, Spans};
use super::refs::{self, Allowed, Known, Reference};
use super::schema::{Manifest, RESOURCE_KINDS};

/// A node of the evaluation graph: a local value, a block, an output or the `azure` block.
#[derive(Debug, Clone)]
pub(super) struct Node {
    /// `local.x`, `vm.gpu`, `output.ip`, `azure`.
    pub id: String,
    /// Every reference written inside it.
    pub refs: Vec<Reference>,
}

/// Where a graph node's expressions are.
pub(super) enum Source<'a> {
    /// A local value.
    Attr(&'a RawAttr),
    /// The `azure` block, a resource block or an output.
    Block(&'a RawBlock),
}

/// The evaluation graph with, per attribute, the references it makes.
#[derive(Default)]
pub(super) struct Graph<'a> {
    /// The nodes, in source order (`azure`, locals, resources, outputs).
    pub nodes: Vec<Node>,
    /// Each node's expressions, at the node's index.
    pub sources: Vec<Source<'a>>,
    /// Attributes whose references are wrong (already reported), by value start offset.
    poisoned: BTreeSet<usize>,
    /// Nodes each attribute refers to, by value start offset.
    attr_targets: BTreeMap<usize, Vec<String>>,
    /// Resource block -> blocks referred to outside steps and structural attributes.
    pub block_references: BTreeMap<String, BTreeSet<String>>,
}

/// Attributes whose reference is consumed by the kit's structure (a NIC needs its network,
/// a VM lists its disks, a SAS depends on its scope) rather than a plain dependency.
const STRUCTURAL: [&str; 5] = ["network", "attach_to", "container", "share", "account"];

impl<'a> Graph<'a> {
    /// The graph of a manifest's parts, each node's references checked against `known` (wrong
    /// ones are reported into `diags`).
    pub fn build(
        manifest: &'a Manifest,
        known: &Known<'_>,
        spans: &Spans,
        diags: &mut Vec<Diagnostic>,
    ) -> Self {
        let mut builder = Builder {
            graph: Graph::default(),
            known,
            spans,
            diags,
        };
        if let Some(azure) = &manifest.azure {
            builder.add_block("azure".to_owned(), azure);
        }
        for local in &manifest.locals {
            builder.add_attr(format!("local.{}", local.name), local);
        }
        for block in &manifest.resources {
            builder.add_block(format!("{}.{}", block.ident, block.label()), block);
        }
        for output in &manifest.outputs {
            builder.add_block(format!("output.{}", output.label()), output);
        }
        builder.graph
    }

    /// Whether to skip evaluating an attribute: its references are wrong (reported) or point at
    /// something that failed (reported there).
    pub fn skip(&self, attr: &RawAttr, failed: &BTreeSet<String>) -> bool {
        self.poisoned.contains(&attr.value_span.start)
            || self
                .attr_targets
                .get(&attr.value_span.start)
                .is_some_and(|t| t.iter().any(|n| failed.contains(n)))
    }
}

/// A graph being built, with what its references are checked against.
struct Builder<'a, 'k> {
    graph: Graph<'a>,
    known: &'k Known<'k>,
    spans: &'k Spans,
    diags: &'k mut Vec<Diagnostic>,
}

/// The references written in a block.
#[derive(Default)]
struct Found {
    /// All of them, in source order: they order the evaluation.
    all: Vec<Reference>,
    /// The blocks it depends on as a resource: not through a structural attribute, a step or a
    /// local value.
    plain: BTreeSet<String>,
}

impl<'a> Builder<'a, '_> {
    fn add_attr(&mut self, id: String, attr: &'a RawAttr) {
        let refs = self.check_attr(attr);
        self.graph.nodes.push(Node { id, refs });
        self.graph.sources.push(Source::Attr(attr));
    }

    fn add_block(&mut self, id: String, block: &'a RawBlock) {
        let found = self.walk(block, true);
        if RESOURCE_KINDS.contains(&block.ident.as_str()) {
            self.graph.block_references.insert(id.clone(), found.plain);
        }
        self.graph.nodes.push(Node {
            id,
            refs: found.all,
        });
        self.graph.sources.push(Source::Block(block));
    }

    /// The references of a block and its nested blocks; `top` for the node's own block, whose
    /// structural attributes are not plain dependencies.
    fn walk(&mut self, block: &RawBlock, top: bool) -> Found {
        let mut found = Found::default();
        for attr in &block.attrs {
            let refs = self.check_attr(attr);
            if !(top && STRUCTURAL.contains(&attr.name.as_str())) {
                found.plain.extend(
                    refs.iter()
                        .filter_map(Reference::node)
                        .filter(|n| !n.starts_with("local.")),
                );
            }
            found.all.extend(refs);
        }
        for nested in &block.blocks {
            let inner = self.walk(nested, false);
            found.all.extend(inner.all);
            // Steps run after apply: their references order evaluation but are not resource
            // dependencies.
            if nested.ident != "step" {
                found.plain.extend(inner.plain);
            }
        }
        found
    }

    fn check_attr(&mut self, attr: &RawAttr) -> Vec<Reference> {
        let found = refs::collect(&attr.expr, self.spans);
        if !refs::check(&found, self.known, Allowed::All, "this", self.diags) {
            self.graph.poisoned.insert(attr.value_span.start);
        }
        self.graph.attr_targets.insert(
            attr.value_span.start,
            found.iter().filter_map(Reference::node).collect(),
        );
        found
    }
}

/// The evaluation order (dependencies first, otherwise source order), and every cycle found,
/// each reported once.
pub(super) fn order(nodes: &[Node], diags: &mut Vec<Diagnostic>) -> (Vec<usize>, BTreeSet<usize>) {
    let mut walk = CycleWalk {
        nodes,
        edges: edges(nodes),
        marks: vec![Mark::New; nodes.len()],
        stack: Vec::new(),
        out: Vec::with_capacity(nodes.len()),
        in_cycle: BTreeSet::new(),
        reported: BTreeSet::new(),
        diags,
    };
    for start in 0..nodes.len() {
        walk.visit(start);
    }
    (walk.out, walk.in_cycle)
}

/// Each node's targets (by index, first reference to each only) and where each is referred to.
fn edges(nodes: &[Node]) -> Vec<Vec<(usize, Span)>> {
    let index: BTreeMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    nodes
        .iter()
        .map(|n| {
            let mut out: Vec<(usize, Span)> = Vec::new();
            for r in &n.refs {
                if let Some(target) = r.node().and_then(|id| index.get(id.as_str()).copied())
                    && !out.iter().any(|(t, _)| *t == target)
                {
                    out.push((target, r.span.clone()));
                }
            }
            out
        })
        .collect()
}

/// Where a node is in the depth-first walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    New,
    OnStack,
    Done,
}

/// A depth-first walk that emits nodes after their targets and reports the cycles it meets.
// Recursive: manifests are small (a few dozen blocks), so recursion depth is no concern, and the
// explicit stack gives the cycle path for free.
struct CycleWalk<'n, 'd> {
    nodes: &'n [Node],
    edges: Vec<Vec<(usize, Span)>>,
    marks: Vec<Mark>,
    stack: Vec<usize>,
    /// Nodes in evaluation order.
    out: Vec<usize>,
    /// Nodes on some cycle.
    in_cycle: BTreeSet<usize>,
    /// Cycles reported, each as its sorted members, so a cycle met twice is reported once.
    reported: BTreeSet<Vec<usize>>,
    diags: &'d mut Vec<Diagnostic>,
}

impl CycleWalk<'_, '_> {
    fn visit(&mut self, node: usize) {
        if self.marks[node] != Mark::New {
            return;
        }
        self.marks[node] = Mark::OnStack;
        self.stack.push(node);
        for edge in 0..self.edges[node].len() {
            let target = self.edges[node][edge].0;
            match self.marks[target] {
                Mark::New => self.visit(target),
                Mark::OnStack => self.cycle(node, edge),
                Mark::Done => {}
            }
        }
        self.stack.pop();
        self.marks[node] = Mark::Done;
        self.out.push(node);
    }

    /// Edge number `edge` of `node` closes a cycle through the stack: mark and report it.
    fn cycle(&mut self, node: usize, edge: usize) {
        let (target, span) = &self.edges[node][edge];
        let from = self.stack.iter().position(|n| n == target).unwrap_or(0);
        let members: Vec<usize> = self.stack[from..].to_vec();
        let mut key = members.clone();
        key.sort_unstable();
        self.in_cycle.extend(members.iter().copied());
        if !self.reported.insert(key) {
            return;
        }
        let nodes = self.nodes;
        let mut path: Vec<&str> = members.iter().map(|m| nodes[*m].id.as_str()).collect();
        path.push(nodes[*target].id.as_str());
        self.diags.push(
            Diagnostic::error(format!("reference cycle: {}", path.join(" -> ")))
                .with_span(span.clone())
                .with_label(format!(
                    "{} refers to {} here",
                    nodes[node].id, nodes[*target].id
                ))
                .with_help("a block or local value cannot depend on itself, directly or through others; remove one of these references"),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::super::refs::Segment;
    use super::*;

    fn node(id: &str, targets: &[&str]) -> Node {
        let file: Arc<Path> = Arc::from(Path::new("t.hcl"));
        Node {
            id: id.to_owned(),
            refs: targets
                .iter()
                .map(|t| {
                    let (root, name) = t.split_once('.').expect("kind.name");
                    Reference {
                        root: root.to_owned(),
                        segments: vec![Segment::Attr(name.to_owned())],
                        span: Span::new(Arc::clone(&file), 0, 1),
                    }
                })
                .collect(),
        }
    }

    #[test]
    fn orders_dependencies_first_and_reports_cycles_as_paths() {
        let nodes = [
            node("vm.a", &["local.x"]),
            node("local.x", &[]),
            node("vm.b", &["vm.c"]),
            node("vm.c", &["vm.b"]),
        ];
        let mut diags = Vec::new();
        let (order, cyclic) = order(&nodes, &mut diags);
        assert_eq!(order, [1, 0, 3, 2]);
        assert_eq!(cyclic, BTreeSet::from([2, 3]));
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].summary, "reference cycle: vm.b -> vm.c -> vm.b");
    }
}
