//! The layering rule, checked: the Modules table of docs/architecture.md says what each module
//! of the crate may import from the others ("imports from the crate"), and this test holds the
//! code and the table to each other, so a wrong-way import fails CI instead of waiting for a
//! review, and the table cannot drift from the code.
//!
//! - Every top-level module declared in src/lib.rs has a row, and every row names such a module.
//! - Every path of a module's code that names another module (`use crate::x`, a `use` group,
//!   `crate::x::Y` in an expression, a `super::` chain that climbs out of the module) is allowed
//!   by its row. An entry may name an item (`engine::reach::SshEndpoint`): then only that item.
//! - Every entry is used (a stale entry would let the next wrong-way import in silently).
//! - The allowed imports have no cycle.
//! - Every file under src/ is read (or is test code), so no file escapes the check.
//!
//! Test code (`#[cfg(test)]` items and the files of `#[cfg(test)] mod x;`) may cross layers, as
//! the doc says; comments and string literals are not imports. src/lib.rs and src/main.rs are the
//! crate root, not a module. The scanner is in layering/scan.rs, with its own tests below.

#[path = "layering/emulator.rs"]
mod emulator;
#[path = "layering/scan.rs"]
mod scan;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use scan::{Reference, scan};

/// Where the rule is written, relative to the repository.
const DOC: &str = "docs/architecture.md";

/// What one row of the table allows its module to import.
#[derive(Debug)]
enum Allowed {
    /// "everything" (the `cli`).
    Everything,
    /// Entries as written: a module (`state`) or an item in one (`engine::reach::SshEndpoint`).
    Only(BTreeSet<String>),
}

/// One row of the Modules table.
#[derive(Debug)]
struct Row {
    /// The line of docs/architecture.md the row is on.
    line: usize,
    allowed: Allowed,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Modules table: module -> its row. Panics if the doc has no such table.
fn table(doc: &str) -> BTreeMap<String, Row> {
    let mut rows = BTreeMap::new();
    let mut in_section = false;
    for (n, line) in doc.lines().enumerate() {
        if line.starts_with("## ") {
            in_section = line.trim() == "## Modules";
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if !in_section || !line.starts_with('|') || cells.len() < 5 {
            continue;
        }
        let (name, imports) = (cells[1], cells[cells.len() - 2]);
        if name == "module" || name.starts_with("---") {
            continue;
        }
        let allowed = match imports {
            "everything" => Allowed::Everything,
            "nothing" => Allowed::Only(BTreeSet::new()),
            _ => Allowed::Only(backticked(imports)),
        };
        rows.insert(
            name.trim_matches('`').to_owned(),
            Row {
                line: n + 1,
                allowed,
            },
        );
    }
    assert!(!rows.is_empty(), "{DOC} has no `## Modules` table");
    rows
}

/// The `code spans` of a cell: the entries of an "imports from the crate" list (prose around
/// them, such as "for the credential chain only", is for the reader).
fn backticked(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The top-level modules src/lib.rs declares.
fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|line| {
            // Any visibility: `mod x;`, `pub mod x;`, `pub(crate) mod x;`.
            let line = line.trim();
            let line = match line.strip_prefix("pub") {
                Some(rest) if rest.starts_with('(') => rest.split_once(')')?.1.trim_start(),
                Some(rest) => rest.trim_start(),
                None => line,
            };
            let rest = line.strip_prefix("mod ")?;
            Some(rest.strip_suffix(';')?.trim().to_owned())
        })
        .collect()
}

/// A reference found in a module's code, with the file it is in.
struct Found {
    file: PathBuf,
    /// The file's top-level module.
    module: String,
    /// The file's module path (`["emulator", "compute", "vm"]`).
    path: Vec<String>,
    reference: Reference,
}

/// What walking the modules' files found.
#[derive(Default)]
struct Walk {
    /// References to another top-level module, test code left out.
    found: Vec<Found>,
    /// References inside the file's own top-level module, test code left out.
    internal: Vec<Found>,
    /// Files scanned, and test files deliberately not scanned: together, every file of a module.
    covered: BTreeSet<PathBuf>,
}

/// Walks the files of `modules`, from each module's own file through the `mod name;` children.
fn walk_modules(modules: &BTreeSet<String>) -> Walk {
    let src = root().join("src");
    let mut walk = Walk::default();
    for module in modules {
        let file = src.join(format!("{module}.rs"));
        let dir = src.join(module);
        let top = if file.exists() {
            file
        } else {
            dir.join("mod.rs")
        };
        walk.module(&top, &dir, std::slice::from_ref(module));
    }
    walk
}

impl Walk {
    /// Scans `file` (module path `path`, child files under `dir`) and the child module files it
    /// declares; those it declares under `#[cfg(test)]` are test code, covered but not scanned.
    fn module(&mut self, file: &Path, dir: &Path, path: &[String]) {
        let source =
            fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        self.covered.insert(file.to_owned());
        let scanned = scan(&source, path);
        for reference in scanned.references {
            let found = Found {
                file: file.to_owned(),
                module: path[0].clone(),
                path: path.to_vec(),
                reference,
            };
            if found.reference.segments[0] == path[0] {
                self.internal.push(found);
            } else {
                self.found.push(found);
            }
        }
        for (name, child_file) in children(dir) {
            // Only a child this file declares (`mod name;`) is part of the module.
            if !source.contains(&format!("mod {name};")) {
                continue;
            }
            if scanned.test_children.contains(&name) {
                self.covered.insert(child_file);
                self.covered.extend(rust_files(&dir.join(&name)));
                continue;
            }
            let mut child_path = path.to_vec();
            child_path.push(name.clone());
            self.module(&child_file, &dir.join(&name), &child_path);
        }
    }
}

/// The child module files in `dir`: `name.rs`, or `name/mod.rs`, by module name.
fn children(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut children: Vec<(String, PathBuf)> = entries
        .filter_map(|e| {
            let child = e.ok()?.path();
            if child.is_dir() {
                let file = child.join("mod.rs");
                file.exists().then(|| (file_name(&child), file))
            } else if child.extension().is_some_and(|e| e == "rs") && file_name(&child) != "mod.rs"
            {
                Some((file_stem(&child), child))
            } else {
                None
            }
        })
        .collect();
    children.sort();
    children
}

/// Every `.rs` file under `dir`, at any depth.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for path in entries.filter_map(|e| Some(e.ok()?.path())) {
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The entry of `entries` that allows `segments` (a module entry, or an item entry the path
/// starts with).
fn allowing<'a>(entries: &'a BTreeSet<String>, segments: &[String]) -> Option<&'a String> {
    entries.iter().find(|entry| {
        let entry: Vec<&str> = entry.split("::").collect();
        entry.len() <= segments.len() && entry.iter().zip(segments).all(|(a, b)| a == b)
    })
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn load() -> (BTreeMap<String, Row>, BTreeSet<String>) {
    let doc = fs::read_to_string(root().join(DOC)).expect("docs/architecture.md reads");
    let lib = fs::read_to_string(root().join("src/lib.rs")).expect("src/lib.rs reads");
    (table(&doc), declared_modules(&lib))
}

#[test]
fn the_modules_table_lists_exactly_the_crates_modules() {
    let (rows, modules) = load();
    let mut problems = String::new();
    for module in modules.iter().filter(|m| !rows.contains_key(*m)) {
        let _ = writeln!(
            problems,
            "src/lib.rs declares module `{module}`, which the Modules table of {DOC} has no row \
             for: add one saying what it owns and what it imports from the crate"
        );
    }
    for (module, row) in rows.iter().filter(|(m, _)| !modules.contains(*m)) {
        let _ = writeln!(
            problems,
            "{DOC}:{}: the Modules table has a row for `{module}`, which src/lib.rs does not \
             declare: remove the row or correct its name",
            row.line
        );
    }
    for (module, row) in &rows {
        let Allowed::Only(entries) = &row.allowed else {
            continue;
        };
        for entry in entries {
            let target = entry.split("::").next().unwrap_or_default();
            if !modules.contains(target) || target == module {
                let _ = writeln!(
                    problems,
                    "{DOC}:{}: `{module}` lists `{entry}`, which is not another module of the \
                     crate: name a module from src/lib.rs",
                    row.line
                );
            }
        }
    }
    assert!(problems.is_empty(), "\n{problems}");
}

#[test]
fn no_module_imports_what_the_modules_table_does_not_allow() {
    let (rows, modules) = load();
    let mut problems = String::new();
    for found in walk_modules(&modules).found {
        let Some(row) = rows.get(&found.module) else {
            continue; // Reported by the_modules_table_lists_exactly_the_crates_modules.
        };
        let Allowed::Only(entries) = &row.allowed else {
            continue;
        };
        let r = &found.reference;
        if allowing(entries, &r.segments).is_some() {
            continue;
        }
        let listed = if entries.is_empty() {
            "nothing from the crate".to_owned()
        } else {
            "only ".to_owned()
                + &entries
                    .iter()
                    .map(|e| format!("`{e}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
        };
        let _ = writeln!(
            problems,
            "{}:{}:{}: `{}` makes `{}` import `{}`, which the layering rule forbids: {DOC}:{} \
             lets `{}` import {listed}",
            relative(&found.file),
            r.line,
            r.col,
            r.written,
            found.module,
            r.segments[0],
            row.line,
            found.module,
        );
    }
    assert!(
        problems.is_empty(),
        "\n{problems}\nhelp: make each dependency point the other way (move the item to the \
         module that owns its idea, or to one the importing module may import); if one is \
         intended, add it to the module's row in {DOC}, keeping the table free of cycles"
    );
}

#[test]
fn every_import_the_modules_table_lists_is_used() {
    let (rows, modules) = load();
    let found = walk_modules(&modules).found;
    let mut problems = String::new();
    for (module, row) in &rows {
        let Allowed::Only(entries) = &row.allowed else {
            continue;
        };
        for entry in entries {
            let used = found.iter().any(|f| {
                f.module == *module
                    && allowing(&BTreeSet::from([entry.clone()]), &f.reference.segments).is_some()
            });
            if !used {
                let _ = writeln!(
                    problems,
                    "{DOC}:{}: `{module}` lists `{entry}`, but no code of `{module}` outside \
                     tests uses it: remove it from the row, so the table says what the code does",
                    row.line
                );
            }
        }
    }
    assert!(problems.is_empty(), "\n{problems}");
}

#[test]
fn every_source_file_is_checked_or_test_code() {
    let (_, modules) = load();
    let covered = walk_modules(&modules).covered;
    let src = root().join("src");
    let crate_root = [src.join("lib.rs"), src.join("main.rs")];
    let missed: Vec<String> = rust_files(&src)
        .into_iter()
        .filter(|f| !covered.contains(f) && !crate_root.contains(f))
        .map(|f| relative(&f))
        .collect();
    assert!(
        missed.is_empty(),
        "the layering check does not read {missed:?}: declare each file as `mod name;` in its \
         parent (a `#[path]` or `include!` would hide its imports from the check), or remove it"
    );
}

#[test]
fn the_modules_table_has_no_import_cycle() {
    let (rows, _) = load();
    let edges: BTreeMap<&str, BTreeSet<&str>> = rows
        .iter()
        .filter_map(|(module, row)| match &row.allowed {
            Allowed::Only(entries) => Some((
                module.as_str(),
                entries
                    .iter()
                    .filter_map(|e| e.split("::").next())
                    .collect(),
            )),
            Allowed::Everything => None,
        })
        .collect();
    for start in edges.keys() {
        if let Some(cycle) = cycle_from(&edges, &mut vec![*start]) {
            panic!(
                "the Modules table of {DOC} allows an import cycle: {}; cut it by moving the \
                 item that closes it to the module that owns its idea",
                cycle.join(" -> ")
            );
        }
    }
}

/// A path from `path[0]` back to itself, extending `path` depth first.
fn cycle_from<'a>(
    edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    path: &mut Vec<&'a str>,
) -> Option<Vec<&'a str>> {
    let last = *path.last()?;
    for &next in edges.get(last).into_iter().flatten() {
        if next == path[0] {
            let mut cycle = path.clone();
            cycle.push(next);
            return Some(cycle);
        }
        if path.contains(&next) {
            continue;
        }
        path.push(next);
        if let Some(cycle) = cycle_from(edges, path) {
            return Some(cycle);
        }
        path.pop();
    }
    None
}

/// The emulator's modules (`src/emulator/*.rs` and `src/emulator/*/mod.rs`).
fn emulator_modules() -> BTreeSet<String> {
    children(&root().join("src/emulator"))
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// Every import between two modules of the emulator, test code left out.
fn emulator_imports() -> Vec<emulator::Import> {
    let modules = emulator_modules();
    let walk = walk_modules(&BTreeSet::from(["emulator".to_owned()]));
    walk.internal
        .iter()
        .filter(|f| f.module == "emulator")
        .map(|f| {
            let r = &f.reference;
            let in_module = |name: Option<&String>| {
                name.filter(|n| modules.contains(*n))
                    .map_or_else(|| emulator::ROOT.to_owned(), Clone::clone)
            };
            emulator::Import {
                from: in_module(f.path.get(1)),
                to: in_module(r.segments.get(1)),
                at: format!("{}:{}:{}", relative(&f.file), r.line, r.col),
                written: r.written.clone(),
            }
        })
        .collect()
}

#[test]
fn the_emulator_layers_table_lists_exactly_its_modules() {
    let doc = fs::read_to_string(root().join(DOC)).expect("docs/architecture.md reads");
    let layers = emulator::layers(&doc);
    let modules = emulator_modules();
    let mut problems = String::new();
    for module in modules.iter().filter(|m| !layers.contains_key(*m)) {
        let _ = writeln!(
            problems,
            "src/emulator/ has module `{module}`, which the Emulator layers table of {DOC} has \
             no row for: add one giving its layer (leaf, handler, router or door)"
        );
    }
    for (module, (_, line)) in layers.iter().filter(|(m, _)| !modules.contains(*m)) {
        let _ = writeln!(
            problems,
            "{DOC}:{line}: the Emulator layers table has a row for `{module}`, which is not a \
             module of src/emulator/"
        );
    }
    assert!(problems.is_empty(), "\n{problems}");
}

#[test]
fn the_emulators_imports_point_down_its_layers_without_a_cycle() {
    let doc = fs::read_to_string(root().join(DOC)).expect("docs/architecture.md reads");
    let layers = emulator::layers(&doc)
        .into_iter()
        .map(|(m, (layer, _))| (m, layer))
        .collect();
    let imports = emulator_imports();
    assert!(
        imports
            .iter()
            .any(|i| i.from == "compute" && i.to == "store"),
        "the scan found the emulator's imports"
    );
    let problems = emulator::problems(&layers, &imports);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The rule itself, on imports made up for it: a leaf that imports a handler, a handler that
/// imports the router, an import of the root and a cycle between handlers each fail it.
#[test]
fn deliberate_violations_of_the_emulator_layers_are_each_reported() {
    use emulator::{Import, Layer, ROOT, problems};
    let layers: BTreeMap<String, Layer> = [
        ("store", Layer::Leaf),
        ("compute", Layer::Handler),
        ("network", Layer::Handler),
        ("providers", Layer::Router),
        ("server", Layer::Door),
    ]
    .into_iter()
    .map(|(m, l)| (m.to_owned(), l))
    .collect();
    let import = |from: &str, to: &str| Import {
        from: from.to_owned(),
        to: to.to_owned(),
        at: format!("src/emulator/{from}.rs:1:5"),
        written: format!("super::{to}::X"),
    };
    let fine = [
        import("compute", "store"),
        import("providers", "compute"),
        import("server", "providers"),
        import("compute", "network"),
    ];
    assert!(problems(&layers, &fine).is_empty());
    let leaf_up = problems(&layers, &[import("store", "compute")]);
    assert_eq!(leaf_up.len(), 1, "{leaf_up:?}");
    assert!(
        leaf_up[0].contains("leaf `store` import handler `compute`"),
        "{leaf_up:?}"
    );
    let to_router = problems(&layers, &[import("compute", "providers")]);
    assert!(to_router[0].contains("no router, no door"), "{to_router:?}");
    let root = problems(&layers, &[import("compute", ROOT)]);
    assert!(root[0].contains("import the emulator's root"), "{root:?}");
    let cycle = problems(
        &layers,
        &[import("compute", "network"), import("network", "compute")],
    );
    assert_eq!(cycle.len(), 1, "{cycle:?}");
    assert!(
        cycle[0].contains("compute -> network -> compute"),
        "{cycle:?}"
    );
}

// The scanner on its own: each case is a way a wrong-way import can be written or hidden.

fn paths(source: &str, module: &[&str]) -> Vec<String> {
    let module: Vec<String> = module.iter().map(|&m| m.to_owned()).collect();
    scan(source, &module)
        .references
        .iter()
        .map(|r| format!("{}:{}:{}", r.line, r.col, r.segments.join("::")))
        .collect()
}

#[test]
fn scanner_expands_use_groups_and_finds_paths_in_expressions() {
    let source = "use crate::{addr::Address, engine::{self, reach::{Endpoints, SshEndpoint}}};\n\
                  fn f() { let e = crate::emulator::start(); }\n";
    assert_eq!(
        paths(source, &["state"]),
        [
            "1:13:addr::Address",
            "1:37:engine",
            "1:51:engine::reach::Endpoints",
            "1:62:engine::reach::SshEndpoint",
            "2:18:emulator::start",
        ]
    );
}

#[test]
fn scanner_resolves_super_chains_from_files_and_inline_modules() {
    let source = "use super::super::emulator::X;\nuse super::sibling::Y;\n\
                  mod inner {\n    use super::super::super::azure::Z;\n}\n";
    // From src/engine/post_boot.rs: `super::super` is the crate root, and `super::sibling`
    // is `engine::sibling` (a path inside the module, which the emulator's layering reads).
    assert_eq!(
        paths(source, &["engine", "post_boot"]),
        ["1:5:emulator::X", "2:5:engine::sibling::Y", "4:9:azure::Z"]
    );
}

/// Regression: a crate-private module (`pub(crate) mod log;`) was not read as declared, so its
/// row looked stale and its files unchecked.
#[test]
fn modules_of_every_visibility_are_declared() {
    let lib = "pub mod addr;\nmod cli;\npub(crate) mod log;\npub(super) mod x;\n// mod not;\n";
    let declared: Vec<String> = declared_modules(lib).into_iter().collect();
    assert_eq!(declared, ["addr", "cli", "log", "x"]);
}

#[test]
fn scanner_skips_comments_strings_and_test_code() {
    let source = "// use crate::emulator;\n/* crate::emulator /* nested */ crate::x */\n\
                  const S: &str = \"crate::emulator\";\nconst R: &str = r#\"crate::y\"#;\n\
                  const C: char = '\\'';\nfn lt<'a>(x: &'a str) -> &'a str { x }\n\
                  #[cfg(test)]\nmod tests {\n    use crate::emulator::X;\n}\n\
                  #[cfg(test)]\nmod more;\n#[cfg(test)]\nuse crate::emulator::Y;\n\
                  use crate::model::Attrs;\n";
    let module = ["engine".to_owned()];
    let scanned = scan(source, &module);
    let found: Vec<String> = scanned
        .references
        .iter()
        .map(|r| r.segments.join("::"))
        .collect();
    assert_eq!(found, ["model::Attrs"]);
    assert_eq!(scanned.test_children, ["more"]);
}
