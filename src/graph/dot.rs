//! Graphviz DOT output for a [`Dag`], with stable ordering so the output can be diffed and
//! snapshot-tested.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use super::Dag;

/// How one node is drawn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DotNode {
    /// The text shown in the node (`\n` starts a new line).
    pub label: String,
    /// The cluster (a boxed subgraph) the node is drawn in, by its title; `None` for the top level.
    pub cluster: Option<String>,
    /// Further attributes (`shape`, `style`, ...), written in the order given.
    pub attrs: Vec<(String, String)>,
}

/// Quote a string as a DOT identifier.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out.push('"');
    out
}

fn node_line<K: fmt::Display>(out: &mut String, indent: &str, key: &K, node: &DotNode) {
    let mut attrs = vec![format!("label={}", quote(&node.label))];
    attrs.extend(node.attrs.iter().map(|(k, v)| format!("{k}={}", quote(v))));
    let _ = writeln!(
        out,
        "{indent}{} [{}];",
        quote(&key.to_string()),
        attrs.join(", ")
    );
}

pub(super) fn render<K: Ord + Clone + fmt::Display + fmt::Debug>(
    dag: &Dag<K>,
    name: &str,
    describe: impl Fn(&K) -> DotNode,
) -> String {
    let mut out = format!("digraph {} {{\n", quote(name));
    out.push_str("  rankdir=\"RL\";\n  node [shape=box];\n");
    let described: Vec<(&K, DotNode)> = dag.nodes().map(|k| (k, describe(k))).collect();
    let mut clusters: BTreeMap<&str, Vec<(&K, &DotNode)>> = BTreeMap::new();
    for (key, node) in &described {
        match &node.cluster {
            Some(cluster) => clusters.entry(cluster).or_default().push((key, node)),
            None => node_line(&mut out, "  ", key, node),
        }
    }
    for (i, (title, members)) in clusters.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_{i} {{");
        let _ = writeln!(out, "    label={};", quote(title));
        for (key, node) in members {
            node_line(&mut out, "    ", key, node);
        }
        out.push_str("  }\n");
    }
    for (dependent, dependency) in dag.edges() {
        let _ = writeln!(
            out,
            "  {} -> {};",
            quote(&dependent.to_string()),
            quote(&dependency.to_string())
        );
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nodes_clusters_and_edges_in_key_order() {
        let mut dag = Dag::new();
        dag.add_dependency("vm.gpu.vm", "vm.gpu.nic");
        dag.add_dependency("vm.gpu.nic", "rg");
        let dot = dag.to_dot("exp", |key| DotNode {
            label: format!("{key}\n\"x\""),
            cluster: key.strip_prefix("vm.gpu.").map(|_| "vm.gpu".to_owned()),
            attrs: vec![("shape".to_owned(), "ellipse".to_owned())],
        });
        assert_eq!(
            dot,
            "digraph \"exp\" {\n  rankdir=\"RL\";\n  node [shape=box];\n  \
             \"rg\" [label=\"rg\\n\\\"x\\\"\", shape=\"ellipse\"];\n  \
             subgraph cluster_0 {\n    label=\"vm.gpu\";\n    \
             \"vm.gpu.nic\" [label=\"vm.gpu.nic\\n\\\"x\\\"\", shape=\"ellipse\"];\n    \
             \"vm.gpu.vm\" [label=\"vm.gpu.vm\\n\\\"x\\\"\", shape=\"ellipse\"];\n  }\n  \
             \"vm.gpu.nic\" -> \"rg\";\n  \"vm.gpu.vm\" -> \"vm.gpu.nic\";\n}\n"
        );
    }
}
