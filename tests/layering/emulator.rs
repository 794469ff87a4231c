//! The emulator's own layering: the "Emulator layers" table of docs/architecture.md puts each
//! module of `src/emulator/` in a layer, and the imports between them must point down.
//!
//! - **leaf**: the HTTP context and replies, the shared state and clock, the store, resource
//!   helpers, configuration and its boot hooks, LRO bookkeeping: a leaf imports leaves only.
//! - **handler**: one provider's (or one cross-kind request's) handlers: leaves and handlers.
//! - **router**: dispatches a parsed request to its handler.
//! - **door**: the front door (authentication, faults, throttling), the admin API and the boot
//!   gate around it.
//!
//! No module imports the emulator's root (`emulator/mod.rs` assembles the server and re-exports
//! the public API), and the imports have no cycle. The checks are pure over (layers, imports), so
//! a deliberate violation is tested below them.

use std::collections::{BTreeMap, BTreeSet};

/// A layer of the emulator, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    Leaf,
    Handler,
    Router,
    Door,
}

impl Layer {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "leaf" => Some(Self::Leaf),
            "handler" => Some(Self::Handler),
            "router" => Some(Self::Router),
            "door" => Some(Self::Door),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Leaf => "leaf",
            Self::Handler => "handler",
            Self::Router => "router",
            Self::Door => "door",
        }
    }
}

/// The name the checks give the emulator's root (`emulator/mod.rs`).
pub const ROOT: &str = "(root)";

/// One import between two modules of the emulator.
#[derive(Debug, Clone)]
pub struct Import {
    /// The importing module (`compute`), or [`ROOT`].
    pub from: String,
    /// The imported module, or [`ROOT`] for an item of `emulator/mod.rs`.
    pub to: String,
    /// `file:line:col` of the path.
    pub at: String,
    /// The path as written.
    pub written: String,
}

/// The "Emulator layers" table: module -> (its layer, the doc line).
pub fn layers(doc: &str) -> BTreeMap<String, (Layer, usize)> {
    let mut rows = BTreeMap::new();
    let mut in_section = false;
    for (n, line) in doc.lines().enumerate() {
        if line.starts_with("## ") {
            in_section = line.trim() == "## Emulator layers";
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if !in_section || !line.starts_with('|') || cells.len() < 4 {
            continue;
        }
        if let Some(layer) = Layer::parse(cells[2]) {
            rows.insert(cells[1].trim_matches('`').to_owned(), (layer, n + 1));
        }
    }
    rows
}

/// What breaks the layering: imports that point up or into the root, and a cycle.
pub fn problems(layers: &BTreeMap<String, Layer>, imports: &[Import]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for import in imports.iter().filter(|i| i.from != i.to) {
        if import.to == ROOT {
            problems.push(format!(
                "{}: `{}` makes `{}` import the emulator's root: move the item to the module \
                 that owns its idea (the root only assembles the server and re-exports)",
                import.at, import.written, import.from
            ));
            continue;
        }
        edges
            .entry(import.from.as_str())
            .or_default()
            .insert(import.to.as_str());
        let (Some(from), Some(to)) = (layers.get(&import.from), layers.get(&import.to)) else {
            continue; // A module without a row is reported on its own.
        };
        let allowed = match from {
            Layer::Leaf => *to == Layer::Leaf,
            Layer::Handler => *to <= Layer::Handler,
            Layer::Router | Layer::Door => true,
        };
        if !allowed {
            problems.push(format!(
                "{}: `{}` makes {} `{}` import {} `{}`: a {} imports {}",
                import.at,
                import.written,
                from.name(),
                import.from,
                to.name(),
                import.to,
                from.name(),
                match from {
                    Layer::Leaf => "leaves only",
                    _ => "leaves and handlers only (no router, no door)",
                }
            ));
        }
    }
    if let Some(cycle) = find_cycle(&edges) {
        problems.push(format!(
            "the emulator's modules import each other in a cycle: {}; cut it by moving the item \
             that closes it down a layer, or by registering a callback",
            cycle.join(" -> ")
        ));
    }
    problems
}

/// A cycle of `edges`, if there is one: a depth-first search that meets a module still on its
/// stack (each module is finished once, so this is linear in the imports).
fn find_cycle<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Option<Vec<&'a str>> {
    fn visit<'a>(
        module: &'a str,
        edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(at) = stack.iter().position(|m| *m == module) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(module);
            return Some(cycle);
        }
        if !done.insert(module) {
            return None;
        }
        stack.push(module);
        for &next in edges.get(module).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|start| visit(start, edges, &mut Vec::new(), &mut done))
}
