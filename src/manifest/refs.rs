//! References between parts of a manifest: finding them and checking them.
//!
//! Blocks refer to each other (`storage_account.data.container.raw`, `vm.gpu.private_ip`), to
//! variables and to local values. Before anything is evaluated, this module collects every
//! reference from the hcl-edit tree (so each has a span) and checks that it names something that
//! exists ("did you mean"); `order` then orders the evaluation by them.

use std::collections::{BTreeMap, BTreeSet};

use hcl_edit::Span as _;
use hcl_edit::expr::{Expression, ForExpr, Traversal, TraversalOperator};
use hcl_edit::template::ForTemplateExpr;
use hcl_edit::visit::{self, Visit};

use crate::diag::{Diagnostic, Span, did_you_mean};

use super::parse::Spans;
use super::schema::RESOURCE_KINDS;

/// One step of a reference after its root: `.name` or `[index]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Segment {
    /// `.name`
    Attr(String),
    /// `[n]` with a literal number, or `[expr]` (`None`).
    Index(Option<u64>),
}

/// A reference found in an expression: `vm.gpu.private_ip` is root `vm` with segments
/// `gpu`, `private_ip`.
#[derive(Debug, Clone)]
pub(super) struct Reference {
    /// The root variable (`var`, `local`, `vm`, ...).
    pub root: String,
    /// What follows the root, as far as it is static.
    pub segments: Vec<Segment>,
    /// Where the reference is written.
    pub span: Span,
}

impl Reference {
    /// The attribute name at position `i` of the segments, if it is one.
    pub fn attr(&self, i: usize) -> Option<&str> {
        match self.segments.get(i) {
            Some(Segment::Attr(name)) => Some(name),
            _ => None,
        }
    }

    /// The node this reference depends on: `local.x`, `vm.gpu`; `None` for variables.
    pub fn node(&self) -> Option<String> {
        let first = self.attr(0)?;
        if self.root == "local" || RESOURCE_KINDS.contains(&self.root.as_str()) {
            Some(format!("{}.{first}", self.root))
        } else {
            None
        }
    }
}

/// Collect every reference in an expression (names bound by `for` are not references).
pub(super) fn collect(expr: &Expression, spans: &Spans) -> Vec<Reference> {
    let mut collector = Collector {
        spans,
        bound: Vec::new(),
        found: Vec::new(),
    };
    collector.visit_expr(expr);
    collector.found
}

struct Collector<'a> {
    spans: &'a Spans,
    bound: Vec<String>,
    found: Vec<Reference>,
}

impl Collector<'_> {
    fn is_bound(&self, name: &str) -> bool {
        self.bound.iter().any(|b| b == name)
    }
}

impl Visit for Collector<'_> {
    fn visit_expr(&mut self, expr: &Expression) {
        if let Expression::Variable(var) = expr {
            if !self.is_bound(var.as_str()) {
                self.found.push(Reference {
                    root: var.as_str().to_owned(),
                    segments: Vec::new(),
                    span: self.spans.of(expr.span()),
                });
            }
            return;
        }
        visit::visit_expr(self, expr);
    }

    fn visit_traversal(&mut self, node: &Traversal) {
        let Expression::Variable(root) = &node.expr else {
            visit::visit_traversal(self, node);
            return;
        };
        // Index expressions inside the traversal may hold references of their own.
        for op in &node.operators {
            if let TraversalOperator::Index(index) = op.value() {
                self.visit_expr(index);
            }
        }
        if self.is_bound(root.as_str()) {
            return;
        }
        let mut segments = Vec::new();
        for op in &node.operators {
            match op.value() {
                TraversalOperator::GetAttr(name) => segments.push(Segment::Attr(name.to_string())),
                TraversalOperator::LegacyIndex(i) => segments.push(Segment::Index(Some(**i))),
                TraversalOperator::Index(Expression::Number(n)) => {
                    segments.push(Segment::Index(n.as_u64()));
                }
                TraversalOperator::Index(_) => segments.push(Segment::Index(None)),
                TraversalOperator::AttrSplat(_) | TraversalOperator::FullSplat(_) => break,
            }
        }
        self.found.push(Reference {
            root: root.as_str().to_owned(),
            segments,
            span: self.spans.of(node.span()),
        });
    }

    fn visit_for_expr(&mut self, node: &ForExpr) {
        self.visit_expr(&node.intro.collection_expr);
        let depth = self.bound.len();
        if let Some(key) = &node.intro.key_var {
            self.bound.push(key.as_str().to_owned());
        }
        self.bound.push(node.intro.value_var.as_str().to_owned());
        if let Some(key_expr) = &node.key_expr {
            self.visit_expr(key_expr);
        }
        self.visit_expr(&node.value_expr);
        if let Some(cond) = &node.cond {
            self.visit_expr(&cond.expr);
        }
        self.bound.truncate(depth);
    }

    fn visit_for_template_expr(&mut self, node: &ForTemplateExpr) {
        self.visit_expr(&node.collection_expr);
        let depth = self.bound.len();
        if let Some(key) = &node.key_var {
            self.bound.push(key.as_str().to_owned());
        }
        self.bound.push(node.value_var.as_str().to_owned());
        self.visit_template(&node.template);
        self.bound.truncate(depth);
    }
}

/// Attributes a block exposes to references, per block kind (see `values.rs`).
pub(super) fn exposed_attrs(kind: &str) -> &'static [&'static str] {
    match kind {
        "network" => &["address", "name", "address_space", "subnet", "nsg_name"],
        "vm" => &[
            "address",
            "name",
            "size",
            "admin_username",
            "private_ip",
            "public_ip",
        ],
        "cluster" => &[
            "address",
            "name",
            "size",
            "count",
            "infiniband",
            "admin_username",
            "head_public_ip",
            "private_ips",
            "nodes",
        ],
        "storage_account" => &[
            "address",
            "name",
            "blob_endpoint",
            "file_endpoint",
            "container",
            "file_share",
        ],
        "sas" => &["address", "permissions"],
        "disk" => &["address", "name", "size_gb"],
        "aml_workspace" => &["address", "name", "resource_group"],
        "aml_cluster" => &["address", "name", "size", "count", "admin_username"],
        "aks" => &["address", "name"],
        _ => &[],
    }
}

/// What references may name: declared variables, locals and blocks.
pub(super) struct Known<'a> {
    /// Declared variable names.
    pub variables: &'a BTreeSet<String>,
    /// Declared local names.
    pub locals: &'a BTreeSet<String>,
    /// Declared block labels per kind.
    pub blocks: &'a BTreeMap<String, Vec<String>>,
}

/// Which roots a reference may start with, by where it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Allowed {
    /// Only `var.*` (the `experiment` attribute, variable validations).
    VariablesOnly,
    /// Nothing (variable defaults must be constants).
    Nothing,
    /// Everything.
    All,
}

/// Check references against what exists; return false if any is wrong (the caller skips
/// evaluating that expression, so the user sees one error per mistake, not follow-ons).
pub(super) fn check(
    refs: &[Reference],
    known: &Known<'_>,
    allowed: Allowed,
    what: &str,
    diags: &mut Vec<Diagnostic>,
) -> bool {
    let mut ok = true;
    for r in refs {
        if let Some(d) = check_one(r, known, allowed, what) {
            diags.push(d);
            ok = false;
        }
    }
    ok
}

fn check_one(r: &Reference, known: &Known<'_>, allowed: Allowed, what: &str) -> Option<Diagnostic> {
    let root = r.root.as_str();
    let is_kind = RESOURCE_KINDS.contains(&root);
    if root != "var" && !is_kind && root != "local" {
        let mut roots = vec!["var", "local"];
        roots.extend(RESOURCE_KINDS);
        let d = Diagnostic::error(format!("unknown name `{root}`"))
            .with_span(r.span.clone())
            .with_label("not a variable, local value or block");
        return Some(match did_you_mean(root, roots) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => d.with_help("references start with `var.`, `local.` or a block kind (`vm.NAME`, `storage_account.NAME`, ...); text needs quotes"),
        });
    }
    match allowed {
        Allowed::Nothing => {
            return Some(
                Diagnostic::error(format!("{what} cannot refer to other values"))
                    .with_span(r.span.clone())
                    .with_help("a variable's default must be a constant; use a local value to compute from it"),
            );
        }
        Allowed::VariablesOnly if root != "var" => {
            return Some(
                Diagnostic::error(format!("{what} may only refer to variables"))
                    .with_span(r.span.clone())
                    .with_help("every generated name depends on it, so it is evaluated before anything else"),
            );
        }
        _ => {}
    }
    let Some(first) = r.attr(0) else {
        let example = match root {
            "var" => "var.NAME",
            "local" => "local.NAME",
            _ => "KIND.NAME.ATTRIBUTE",
        };
        return Some(
            Diagnostic::error(format!("`{root}` alone is not a value"))
                .with_span(r.span.clone())
                .with_help(format!("name what you refer to, e.g. `{example}`")),
        );
    };
    let (names, noun): (Vec<&str>, String) = match root {
        "var" => (
            known.variables.iter().map(String::as_str).collect(),
            "variable".to_owned(),
        ),
        "local" => (
            known.locals.iter().map(String::as_str).collect(),
            "local value".to_owned(),
        ),
        kind => (
            known
                .blocks
                .get(kind)
                .map(|v| v.iter().map(String::as_str).collect())
                .unwrap_or_default(),
            format!("`{kind}` block"),
        ),
    };
    if !names.contains(&first) {
        let d = Diagnostic::error(format!("reference to undeclared {noun} `{first}`"))
            .with_span(r.span.clone())
            .with_label(format!("no {noun} named `{first}`"));
        return Some(match did_you_mean(first, names.iter().copied()) {
            Some(s) => d.with_help(format!("did you mean `{root}.{s}`?")),
            None if names.is_empty() => d.with_help(match root {
                "var" => format!("declare it: `variable \"{first}\" {{ default = ... }}`"),
                "local" => format!("define it: `locals {{ {first} = ... }}`"),
                kind => format!("declare it: `{kind} \"{first}\" {{ ... }}`"),
            }),
            None => d.with_help(format!("declared: {}", names.join(", "))),
        });
    }
    if is_kind && let Some(attr) = r.attr(1) {
        let exposed = exposed_attrs(root);
        if !exposed.contains(&attr) {
            let d = Diagnostic::error(format!("`{root}` blocks have no attribute `{attr}`"))
                .with_span(r.span.clone())
                .with_label("unknown attribute");
            return Some(match did_you_mean(attr, exposed.iter().copied()) {
                Some(s) => d.with_help(format!("did you mean `{root}.{first}.{s}`?")),
                None => d.with_help(format!("a `{root}` block exposes: {}", exposed.join(", "))),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;

    fn refs_of(text: &str) -> Vec<String> {
        let spans = Spans::new(Arc::from(Path::new("t.hcl")), Arc::from(text));
        let expr = hcl_edit::parser::parse_expr(text).expect("parses");
        collect(&expr, &spans)
            .into_iter()
            .map(|r| {
                let mut s = r.root.clone();
                for seg in r.segments {
                    match seg {
                        Segment::Attr(a) => {
                            s.push('.');
                            s.push_str(&a);
                        }
                        Segment::Index(i) => s.push_str(&["[", &format!("{i:?}"), "]"].concat()),
                    }
                }
                s
            })
            .collect()
    }

    #[test]
    fn finds_references_in_templates_calls_and_for_expressions() {
        assert_eq!(
            refs_of("\"${var.a}-${lower(local.b)}\""),
            ["var.a", "local.b"]
        );
        assert_eq!(
            refs_of("[for n in cluster.t.nodes : n.private_ip if n != var.skip]"),
            ["cluster.t.nodes", "var.skip"]
        );
        assert_eq!(
            refs_of("cluster.t.nodes[0].private_ip"),
            ["cluster.t.nodes[Some(0)].private_ip"]
        );
    }
}
