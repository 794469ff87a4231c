//! The manifest language: HCL text in, a [`Desired`] world (or every problem, located) out.
//!
//! The pipeline, one file per stage:
//! 1. `parse`: hcl-edit parses with byte spans (syntax errors are located);
//! 2. `schema`: blocks and attributes are checked against the language (unknown names get a
//!    "did you mean"), and the top level is sorted into a typed [`schema::Manifest`];
//! 3. `variables`: `-var`, var files and defaults give each variable its value;
//! 4. `refs`: every reference is found in the hcl-edit tree, checked, and the parts of the
//!    manifest are ordered so each is evaluated after what it refers to (cycles are reported as
//!    their path);
//! 5. `eval`: each attribute is evaluated with `hcl::eval`, errors located at the attribute;
//!    `values` puts what each block exposes (`vm.gpu.private_ip`) in scope for the next;
//! 6. `expand`: blocks become Azure resources with deterministic names and tags, checked on the
//!    way (sizes, images, CIDRs, SAS expiry, steps, Azure naming rules).
//!
//! Every stage reports into one list, so the user sees every problem at once. Nothing here
//! panics on any input, and nothing secret is ever quoted in a message.

mod backend;
mod decode;
mod eval;
mod expand;
mod fields;
mod format;
mod functions;
mod images;
mod names;
mod parse;
mod refs;
mod schema;
mod step_kinds;
mod templates;
mod validate;
mod values;
mod variables;

pub use backend::{AZUREBLOB, load_backend};
pub use format::format;
pub use templates::starter_templates;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::catalog;
use crate::diag::{Diagnostic, Severity, SourceMap, Span, did_you_mean};
use crate::model::{AzureSettings, Desired, Output, tags};

use self::eval::{EvalBlock, Evaluator, Scope};
use self::expand::Experiment;
use self::fields::Fields;
use self::parse::{RawAttr, RawBlock, Spans};
use self::refs::{Allowed, Known, Node};

/// Where variable values and environment variables come from.
pub struct LoadOptions {
    /// `-var name=value`, in the order given (later wins).
    pub vars: Vec<(String, String)>,
    /// `-var-file` paths (HCL `name = value` files), in the order given.
    pub var_files: Vec<PathBuf>,
    /// Environment lookup for `env()`, `~` and `AZURE_SUBSCRIPTION_ID`; injectable for tests.
    pub env: EnvLookup,
    /// VM sizes the shipped catalog lacks are errors (false, the default), or are collected in
    /// [`Loaded::unknown_sizes`] without a diagnostic (true), so that a connected command can
    /// look them up in the subscription's Resource SKUs and load again (`cli::live_sizes`).
    pub collect_unknown_sizes: bool,
}

/// How the manifest reads environment variables (`std::env::var` outside tests).
pub type EnvLookup = Box<dyn Fn(&str) -> Option<String>>;

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            vars: Vec::new(),
            var_files: Vec::new(),
            env: Box::new(|name| std::env::var(name).ok()),
            collect_unknown_sizes: false,
        }
    }
}

impl fmt::Debug for LoadOptions {
    // Variable values may be secret: show names only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadOptions")
            .field(
                "vars",
                &self.vars.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("var_files", &self.var_files)
            .finish_non_exhaustive()
    }
}

/// A manifest that loaded: what it asks for, plus warnings to show.
#[derive(Debug)]
pub struct Loaded {
    /// The desired resources, steps and outputs.
    pub desired: Desired,
    /// Warnings (e.g. SSH open to the internet), in source order.
    pub warnings: Vec<Diagnostic>,
    /// The texts read, to render the warnings with snippets.
    pub sources: SourceMap,
    /// The `backend "azureblob"` block, if the state is kept in Azure Blob Storage; hand it to
    /// [`crate::state::open_backend`]. (Kept here rather than in [`Desired`] because `Desired`
    /// is built literally in other modules' tests; moving it is a one-line change.)
    pub backend: Option<crate::model::BackendConfig>,
    /// VM sizes the catalog lacks, when [`LoadOptions::collect_unknown_sizes`] asked for them.
    pub unknown_sizes: Vec<String>,
}

/// A manifest that did not load: every problem found, located.
#[derive(Debug)]
pub struct LoadFailed {
    /// Errors then warnings, each in source order.
    pub diagnostics: Vec<Diagnostic>,
    /// The texts read, to render the diagnostics with snippets.
    pub sources: SourceMap,
}

impl fmt::Display for LoadFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let errors = self.diagnostics.iter().filter(|d| d.is_error()).count();
        write!(f, "the manifest has {errors} problem(s)")
    }
}

impl std::error::Error for LoadFailed {}

/// Read and load a manifest file.
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Loaded, LoadFailed> {
    match std::fs::read_to_string(path) {
        Ok(text) => load_str(path, &text, opts),
        Err(err) => Err(LoadFailed {
            diagnostics: vec![
                Diagnostic::error(format!("cannot read manifest `{}`", path.display()))
                    .with_help(format!("{err}; check the path")),
            ],
            sources: SourceMap::new(),
        }),
    }
}

/// Load a manifest from text; `path` names it in messages and anchors relative `file()` paths.
// The pipeline, stage by stage; each stage is a call into its own module.
#[allow(clippy::too_many_lines)]
pub fn load_str(path: &Path, text: &str, opts: &LoadOptions) -> Result<Loaded, LoadFailed> {
    let mut sources = SourceMap::new();
    let file = sources.add(path, text);
    let spans = Spans::new(Arc::clone(&file), Arc::from(text));
    let mut diags = Vec::new();
    let root = match parse::parse(&spans, text) {
        Ok(root) => root,
        Err(d) => return Err(finish_failed(vec![d], &file, sources)),
    };
    let manifest = schema::check(&root, &spans, &mut diags);
    let base_dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let env: &dyn Fn(&str) -> Option<String> = &*opts.env;
    let backend = backend::from_root(&root, &spans, env, &base_dir, &mut diags);
    let vars = variables::resolve(
        &manifest.variables,
        &opts.vars,
        &opts.var_files,
        env,
        &spans,
        &base_dir,
        &mut sources,
        &mut diags,
    );
    let mut evaluator = Evaluator::new(env, base_dir.clone(), &spans);
    let mut scope = Scope::default();
    for (name, value) in &vars.values {
        scope.vars.insert(name.clone(), value.clone());
    }

    let locals: BTreeSet<String> = manifest.locals.iter().map(|l| l.name.clone()).collect();
    let mut blocks_by_kind: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for block in &manifest.resources {
        blocks_by_kind
            .entry(block.ident.clone())
            .or_default()
            .push(block.label().to_owned());
    }
    let known = Known {
        variables: &vars.declared,
        locals: &locals,
        blocks: &blocks_by_kind,
    };

    let experiment = experiment_id(
        &manifest,
        path,
        &known,
        &spans,
        &mut evaluator,
        &scope,
        &mut diags,
    );

    // Collect references per attribute; check them; build the evaluation graph.
    let mut graph = Graph::default();
    if let Some(azure) = &manifest.azure {
        graph.add_block("azure".to_owned(), azure, &known, &spans, &mut diags);
    }
    for local in &manifest.locals {
        graph.add_attr(
            format!("local.{}", local.name),
            local,
            &known,
            &spans,
            &mut diags,
        );
    }
    for block in &manifest.resources {
        graph.add_block(
            format!("{}.{}", block.ident, block.label()),
            block,
            &known,
            &spans,
            &mut diags,
        );
    }
    for output in &manifest.outputs {
        graph.add_block(
            format!("output.{}", output.label()),
            output,
            &known,
            &spans,
            &mut diags,
        );
    }
    let (order, cyclic) = refs::order(&graph.nodes, &mut diags);
    let mut failed: BTreeSet<String> = cyclic.iter().map(|i| graph.nodes[*i].id.clone()).collect();

    // Evaluate in dependency order.
    let mut evaluated: BTreeMap<String, EvalBlock> = BTreeMap::new();
    for index in order {
        let id = graph.nodes[index].id.clone();
        let quiet = cyclic.contains(&index);
        match &graph.sources[index] {
            Source::Attr(attr) => {
                let value = if graph.skip(attr, &failed) {
                    None
                } else {
                    evaluator.attr(attr, &scope, quiet, &mut diags)
                };
                match value {
                    Some(v) => {
                        scope.locals.insert(attr.name.clone(), v);
                    }
                    None => {
                        failed.insert(id);
                    }
                }
            }
            Source::Block(raw) => {
                let skip = |attr: &RawAttr| graph.skip(attr, &failed);
                let block = evaluator.block(raw, &scope, quiet, &skip, &mut diags);
                if schema::RESOURCE_KINDS.contains(&raw.ident.as_str()) {
                    scope.set_block(
                        &raw.ident,
                        raw.label(),
                        values::block_value(&block, &experiment.id),
                    );
                }
                evaluated.insert(id, block);
            }
        }
    }

    let azure = azure_settings(
        evaluated.get("azure"),
        &experiment,
        env,
        spans.file_start(),
        &mut diags,
    );
    let resource_blocks: Vec<EvalBlock> = manifest
        .resources
        .iter()
        .filter_map(|b| {
            evaluated
                .get(&format!("{}.{}", b.ident, b.label()))
                .cloned()
        })
        .collect();
    let expanded = expand::expand(
        &resource_blocks,
        &experiment,
        &azure,
        manifest.azure.as_ref().map(|a| &a.header),
        &graph.block_references,
        expand::Context {
            base_dir,
            collect_unknown_sizes: opts.collect_unknown_sizes,
        },
        &mut diags,
    );
    let outputs = manifest
        .outputs
        .iter()
        .filter_map(|o| evaluated.get(&format!("output.{}", o.label())))
        .map(|o| read_output(o, &mut diags))
        .collect();

    let manifest_hash = manifest_hash(text, &vars, &evaluator.files);
    if diags.iter().any(Diagnostic::is_error) {
        return Err(finish_failed(diags, &file, sources));
    }
    let warnings = sorted(diags, &file);
    Ok(Loaded {
        desired: Desired {
            experiment: experiment.id,
            azure,
            resources: expanded.resources,
            steps: expanded.steps,
            outputs,
            manifest_hash,
            notes: expanded.notes,
        },
        warnings,
        sources,
        backend,
        unknown_sizes: expanded.unknown_sizes,
    })
}

/// Where a graph node's expressions are.
enum Source<'a> {
    Attr(&'a RawAttr),
    Block(&'a RawBlock),
}

/// The evaluation graph with, per attribute, the references it makes.
#[derive(Default)]
struct Graph<'a> {
    nodes: Vec<Node>,
    sources: Vec<Source<'a>>,
    /// Attributes whose references are wrong (already reported), by value start offset.
    poisoned: BTreeSet<usize>,
    /// Nodes each attribute refers to, by value start offset.
    attr_targets: BTreeMap<usize, Vec<String>>,
    /// Resource block -> blocks referred to outside steps and structural attributes.
    block_references: BTreeMap<String, BTreeSet<String>>,
}

/// Attributes whose reference is consumed by the kit's structure (a NIC needs its network,
/// a VM lists its disks, a SAS depends on its scope) rather than a plain dependency.
const STRUCTURAL: [&str; 5] = ["network", "attach_to", "container", "share", "account"];

impl<'a> Graph<'a> {
    fn add_attr(
        &mut self,
        id: String,
        attr: &'a RawAttr,
        known: &Known<'_>,
        spans: &Spans,
        diags: &mut Vec<Diagnostic>,
    ) {
        let refs = self.check_attr(attr, known, spans, diags);
        self.nodes.push(Node { id, refs });
        self.sources.push(Source::Attr(attr));
    }

    fn add_block(
        &mut self,
        id: String,
        block: &'a RawBlock,
        known: &Known<'_>,
        spans: &Spans,
        diags: &mut Vec<Diagnostic>,
    ) {
        let mut all = Vec::new();
        let mut plain: BTreeSet<String> = BTreeSet::new();
        self.walk(block, true, known, spans, diags, &mut all, &mut plain);
        if schema::RESOURCE_KINDS.contains(&block.ident.as_str()) {
            self.block_references.insert(id.clone(), plain);
        }
        self.nodes.push(Node { id, refs: all });
        self.sources.push(Source::Block(block));
    }

    #[allow(clippy::too_many_arguments)]
    fn walk(
        &mut self,
        block: &RawBlock,
        top: bool,
        known: &Known<'_>,
        spans: &Spans,
        diags: &mut Vec<Diagnostic>,
        all: &mut Vec<refs::Reference>,
        plain: &mut BTreeSet<String>,
    ) {
        for attr in &block.attrs {
            let found = self.check_attr(attr, known, spans, diags);
            let structural = top && STRUCTURAL.contains(&attr.name.as_str());
            if !structural {
                plain.extend(
                    found
                        .iter()
                        .filter_map(refs::Reference::node)
                        .filter(|n| !n.starts_with("local.")),
                );
            }
            all.extend(found);
        }
        for nested in &block.blocks {
            if nested.ident == "step" {
                // Steps run after apply: their references order evaluation but are not resource
                // dependencies.
                let mut ignored = BTreeSet::new();
                self.walk(nested, false, known, spans, diags, all, &mut ignored);
            } else {
                self.walk(nested, false, known, spans, diags, all, plain);
            }
        }
    }

    fn check_attr(
        &mut self,
        attr: &RawAttr,
        known: &Known<'_>,
        spans: &Spans,
        diags: &mut Vec<Diagnostic>,
    ) -> Vec<refs::Reference> {
        let found = refs::collect(&attr.expr, spans);
        if !refs::check(&found, known, Allowed::All, "this", diags) {
            self.poisoned.insert(attr.value_span.start);
        }
        self.attr_targets.insert(
            attr.value_span.start,
            found.iter().filter_map(refs::Reference::node).collect(),
        );
        found
    }

    /// Whether to skip evaluating an attribute: its references are wrong (reported) or point at
    /// something that failed (reported there).
    fn skip(&self, attr: &RawAttr, failed: &BTreeSet<String>) -> bool {
        self.poisoned.contains(&attr.value_span.start)
            || self
                .attr_targets
                .get(&attr.value_span.start)
                .is_some_and(|t| t.iter().any(|n| failed.contains(n)))
    }
}

fn experiment_id(
    manifest: &schema::Manifest,
    path: &Path,
    known: &Known<'_>,
    spans: &Spans,
    evaluator: &mut Evaluator<'_>,
    scope: &Scope,
    diags: &mut Vec<Diagnostic>,
) -> Experiment {
    let from_stem = || Experiment {
        id: names::sanitise_experiment(
            &path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
        span: None,
    };
    let Some(attr) = &manifest.experiment else {
        return from_stem();
    };
    let found = refs::collect(&attr.expr, spans);
    if !refs::check(&found, known, Allowed::VariablesOnly, "`experiment`", diags) {
        return from_stem();
    }
    match evaluator.attr(attr, scope, false, diags) {
        Some(Json::String(id)) if names::is_valid_experiment(&id) => Experiment {
            id,
            span: Some(attr.value_span.clone()),
        },
        Some(Json::String(id)) => {
            diags.push(
                Diagnostic::error(format!("invalid experiment id `{id}`"))
                    .with_span(attr.value_span.clone())
                    .with_label("not a valid id")
                    .with_help(format!(
                        "use lowercase letters, digits and single `-`, starting with a letter, e.g. `{}`",
                        names::sanitise_experiment(&id)
                    )),
            );
            from_stem()
        }
        Some(other) => {
            diags.push(
                Diagnostic::error("`experiment` must be text")
                    .with_span(attr.value_span.clone())
                    .with_label(format!("this is {}", eval::type_name(&other))),
            );
            from_stem()
        }
        None => from_stem(),
    }
}

fn azure_settings(
    block: Option<&EvalBlock>,
    experiment: &Experiment,
    env: &dyn Fn(&str) -> Option<String>,
    file_start: Span,
    diags: &mut Vec<Diagnostic>,
) -> AzureSettings {
    let default_rg = format!("dsinfra-{}", experiment.id);
    let Some(block) = block else {
        diags.push(
            Diagnostic::error("the manifest has no `azure` block")
                .with_span(file_start)
                .with_help(
                    "add `azure { location = \"eastus\" }` to say where the experiment runs",
                ),
        );
        return AzureSettings {
            subscription: env("AZURE_SUBSCRIPTION_ID"),
            location: String::new(),
            resource_group: default_rg,
            tags: BTreeMap::new(),
            endpoint: None,
        };
    };
    let mut f = Fields::new(block, diags);
    let subscription = f
        .string("subscription")
        .map(|s| s.value)
        .or_else(|| env("AZURE_SUBSCRIPTION_ID"))
        .filter(|s| !s.is_empty());
    let location = match f.required_string("location", "\"eastus\"") {
        Some(loc) if catalog::is_known_location(&loc.value) => loc
            .value
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase(),
        Some(loc) => {
            let d = Diagnostic::error(format!("unknown Azure location `{}`", loc.value))
                .with_span(loc.span.clone())
                .with_label("not an Azure region");
            f.report(
                match did_you_mean(&loc.value, catalog::LOCATIONS.iter().copied()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(
                        "use a region name such as eastus, westeurope or southcentralus",
                    ),
                },
            );
            loc.value
        }
        None => String::new(),
    };
    let resource_group = f.string("resource_group").map_or(default_rg, |r| r.value);
    let mut tag_map = BTreeMap::new();
    if let Some(written) = f.string_map("tags") {
        for (key, value) in written.value {
            let reserved = [tags::EXPERIMENT, tags::ADDRESS, tags::MANAGED_BY];
            let problem = if reserved.contains(&key.as_str()) {
                Some(format!("`{key}` is set by dsinfra on every resource"))
            } else if key.is_empty()
                || key.chars().count() > 512
                || key.contains(['<', '>', '%', '&', '\\', '?', '/'])
            {
                Some(format!(
                    "tag name `{key}` is not allowed (1-512 characters, none of < > % & \\ ? /)"
                ))
            } else if value.chars().count() > 256 {
                Some(format!(
                    "the value of tag `{key}` is longer than 256 characters"
                ))
            } else {
                None
            };
            if let Some(why) = problem {
                f.report(
                    Diagnostic::error("invalid tag in the `azure` block")
                        .with_span(written.span.clone())
                        .with_label(why),
                );
            } else {
                tag_map.insert(key, value);
            }
        }
    }
    let endpoint = f.string("endpoint").and_then(|e| {
        if e.value.starts_with("https://") || e.value.starts_with("http://") {
            Some(e.value.trim_end_matches('/').to_owned())
        } else {
            f.report(
                Diagnostic::error("`endpoint` must be a URL")
                    .with_span(e.span)
                    .with_help("e.g. \"https://management.azure.com\" or the emulator's \"http://127.0.0.1:PORT\""),
            );
            None
        }
    });
    AzureSettings {
        subscription,
        location,
        resource_group,
        tags: tag_map,
        endpoint,
    }
}

fn read_output(block: &EvalBlock, diags: &mut Vec<Diagnostic>) -> Output {
    let mut f = Fields::new(block, diags);
    if !f.has("value") {
        f.missing("value", "vm.NAME.public_ip");
    }
    let value = block
        .attr("value")
        .and_then(|a| a.value.clone())
        .unwrap_or(Json::Null);
    let sensitive = f.bool_or("sensitive", false);
    let description = f.string("description").map(|d| d.value);
    Output {
        name: block.label().to_owned(),
        value,
        sensitive,
        description,
    }
}

/// SHA-256 of everything the desired world was computed from: the manifest text, the var files,
/// the variable values and the files read by `file()`. A saved plan is bound to it.
fn manifest_hash(text: &str, vars: &variables::Variables, files: &[eval::FileRead]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"dsinfra-manifest-v1\0");
    hasher.update(text.as_bytes());
    for file in &vars.file_texts {
        hasher.update(b"\0var-file\0");
        hasher.update(file.as_bytes());
    }
    hasher.update(b"\0vars\0");
    hasher.update(
        serde_json::to_string(&vars.values)
            .unwrap_or_default()
            .as_bytes(),
    );
    // Only the contents count: the argument as written is already in the text, and the
    // resolved path depends on how the manifest was named (relative at `plan`, absolute when
    // `show`/`apply PLANFILE` reload it), which must not make a saved plan look stale.
    for read in files {
        hasher.update(b"\0file\0");
        hasher.update(read.digest);
    }
    hex::encode(hasher.finalize())
}

/// Errors first, then warnings; within each, problems without a place first (from `-var`),
/// then the manifest in source order, then other files.
fn sorted(mut diags: Vec<Diagnostic>, manifest: &Arc<Path>) -> Vec<Diagnostic> {
    diags.sort_by_key(|d| {
        let (other_file, start) = d
            .span
            .as_ref()
            .map_or((false, 0), |s| (&s.file != manifest, s.start));
        (
            d.severity != Severity::Error,
            d.span.is_some(),
            other_file,
            start,
        )
    });
    diags
}

fn finish_failed(diags: Vec<Diagnostic>, manifest: &Arc<Path>, sources: SourceMap) -> LoadFailed {
    LoadFailed {
        diagnostics: sorted(diags, manifest),
        sources,
    }
}

#[cfg(test)]
mod tests;
