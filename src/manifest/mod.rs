//! The manifest language: HCL text in, a [`Desired`] world (or every problem, located) out.
//!
//! The pipeline, one file per stage:
//! 1. `parse`: hcl-edit parses with byte spans (syntax errors are located);
//! 2. `schema`: blocks and attributes are checked against the language (unknown names get a
//!    "did you mean"), and the top level is sorted into a typed [`schema::Manifest`];
//! 3. `variables`: `-var`, var files and defaults give each variable its value;
//! 4. `refs`: every reference is found in the hcl-edit tree and checked; `order` orders the
//!    parts of the manifest so each is evaluated after what it refers to (cycles are reported
//!    as their path);
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
mod order;
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
use self::order::{Graph, Source};
use self::parse::{RawAttr, Spans};
use self::refs::{Allowed, Known};

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
    /// The VM sizes to judge against: the shipped catalog, plus what a connected command learnt
    /// from live Resource SKUs or a saved plan recorded (issue 31). Carried into
    /// [`Desired::catalog`].
    pub catalog: crate::catalog::Catalog,
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
            catalog: crate::catalog::Catalog::shipped(),
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

/// Read a manifest file ([`read_str`]).
///
/// # Errors
///
/// The file cannot be read, or is not HCL.
pub fn read<'o>(path: &Path, opts: &'o LoadOptions) -> Result<Read<'o>, LoadFailed> {
    match std::fs::read_to_string(path) {
        Ok(text) => read_str(path, &text, opts),
        Err(err) => Err(unreadable(path, &err)),
    }
}

/// The problem of a manifest file that cannot be read.
fn unreadable(path: &Path, err: &std::io::Error) -> LoadFailed {
    LoadFailed {
        diagnostics: vec![
            Diagnostic::error(format!("cannot read manifest `{}`", path.display()))
                .with_help(format!("{err}; check the path")),
        ],
        sources: SourceMap::new(),
    }
}

/// Read and load a manifest file.
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Loaded, LoadFailed> {
    match std::fs::read_to_string(path) {
        Ok(text) => load_str(path, &text, opts),
        Err(err) => Err(unreadable(path, &err)),
    }
}

/// Load a manifest from text; `path` names it in messages and anchors relative `file()` paths:
/// [`read_str`], then [`Read::judge`] against `opts`'s catalog.
///
/// # Errors
///
/// The manifest has errors: every problem found, located.
pub fn load_str(path: &Path, text: &str, opts: &LoadOptions) -> Result<Loaded, LoadFailed> {
    read_str(path, text, opts)?.judge(&opts.catalog, opts.collect_unknown_sizes)
}

/// A manifest read: parsed, checked against the schema, its backend and variables resolved:
/// all that does not depend on VM sizes. [`Read::judge`] evaluates and expands it against a size
/// catalog (a cluster's `infiniband`, every size check), so a connected command judges it once
/// against what it knows, collecting the sizes it lacks, learns those from Azure, and judges it
/// again, without reading or parsing the text again (issue 31).
pub struct Read<'o> {
    path: PathBuf,
    opts: &'o LoadOptions,
    file: Arc<Path>,
    text: String,
    spans: Spans,
    sources: SourceMap,
    manifest: schema::Manifest,
    backend: Option<crate::model::BackendConfig>,
    vars: variables::Variables,
    /// What reading found (judging adds its own to a copy).
    diags: Vec<Diagnostic>,
}

/// Read a manifest from text (the size-independent stages of the pipeline; see the module doc).
/// Only a syntax error fails here: every other problem is carried to [`Read::judge`], so that
/// the user sees every problem at once.
///
/// # Errors
///
/// The text is not HCL.
pub fn read_str<'o>(
    path: &Path,
    text: &str,
    opts: &'o LoadOptions,
) -> Result<Read<'o>, LoadFailed> {
    let mut sources = SourceMap::new();
    let file = sources.add(path, text);
    let spans = Spans::new(Arc::clone(&file), Arc::from(text));
    // A syntax error stops here: nothing after it could be located reliably.
    let root = match parse::parse(&spans, text) {
        Ok(root) => root,
        Err(d) => return Err(finish_failed(vec![d], &file, sources)),
    };
    let mut load = Load {
        path,
        opts,
        env: &*opts.env,
        spans: &spans,
        base_dir: base_dir(path),
        sources,
        diags: Vec::new(),
        catalog: &opts.catalog,
        collect_unknown_sizes: false,
    };
    let manifest = schema::check(&root, &spans, &mut load.diags);
    // The backend is read on its own, with literal values only (see backend.rs).
    let backend = backend::from_root(&root, &spans, load.env, &load.base_dir, &mut load.diags);
    let vars = load.variables(&manifest);
    let Load { sources, diags, .. } = load;
    Ok(Read {
        path: path.to_owned(),
        opts,
        file,
        text: text.to_owned(),
        spans,
        sources,
        manifest,
        backend,
        vars,
        diags,
    })
}

impl Read<'_> {
    /// The sizes the options judge against (the shipped catalog, or what a saved plan learnt).
    pub fn catalog(&self) -> &crate::catalog::Catalog {
        &self.opts.catalog
    }

    /// Evaluate and expand the manifest against `catalog`: VM sizes it lacks are errors, or,
    /// with `collect_unknown_sizes`, collected in [`Loaded::unknown_sizes`] without one.
    ///
    /// # Errors
    ///
    /// The manifest has errors (reading's and judging's): every problem found, located.
    pub fn judge(
        &self,
        catalog: &crate::catalog::Catalog,
        collect_unknown_sizes: bool,
    ) -> Result<Loaded, LoadFailed> {
        let mut load = Load {
            path: &self.path,
            opts: self.opts,
            env: &*self.opts.env,
            spans: &self.spans,
            base_dir: base_dir(&self.path),
            sources: self.sources.clone(),
            diags: self.diags.clone(),
            catalog,
            collect_unknown_sizes,
        };
        let (manifest, vars) = (&self.manifest, &self.vars);
        let mut evaluation = Evaluation::new(load.evaluator(), catalog, vars);
        // The experiment id names everything, so it is evaluated first, from variables only.
        let names = Names::of(manifest);
        let known = names.known(&vars.declared);
        let experiment = load.experiment(manifest, &known, &mut evaluation);
        let graph = Graph::build(manifest, &known, &self.spans, &mut load.diags);
        evaluation.run(&graph, &experiment.id, &mut load.diags);
        let manifest_hash = manifest_hash(&self.text, vars, &evaluation.evaluator.files);
        let (desired, unknown_sizes) = load.desired(
            manifest,
            &graph,
            &evaluation.blocks,
            experiment,
            manifest_hash,
        );
        if load.diags.iter().any(Diagnostic::is_error) {
            return Err(finish_failed(load.diags, &self.file, load.sources));
        }
        Ok(Loaded {
            desired,
            warnings: sorted(load.diags, &self.file),
            sources: load.sources,
            backend: self.backend.clone(),
            unknown_sizes,
        })
    }
}

/// Where a manifest's relative paths (`file()`, `ssh_key`) start: its directory.
fn base_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// One load in progress: what every stage reads, and the one list every stage reports into.
struct Load<'a> {
    /// The manifest's path; its stem is the default experiment id.
    path: &'a Path,
    opts: &'a LoadOptions,
    env: &'a dyn Fn(&str) -> Option<String>,
    spans: &'a Spans,
    base_dir: PathBuf,
    /// The manifest and the var files read, to render diagnostics with snippets.
    sources: SourceMap,
    diags: Vec<Diagnostic>,
    /// The sizes judged against, and whether sizes it lacks are collected instead of reported.
    catalog: &'a crate::catalog::Catalog,
    collect_unknown_sizes: bool,
}

impl<'a> Load<'a> {
    /// An evaluator for expressions in the manifest.
    fn evaluator(&self) -> Evaluator<'a> {
        Evaluator::new(self.env, self.base_dir.clone(), self.spans)
    }

    /// Stage 3: each variable's value, from `-var`, var files and defaults.
    fn variables(&mut self, manifest: &schema::Manifest) -> variables::Variables {
        variables::resolve(
            &manifest.variables,
            &variables::Given {
                flags: &self.opts.vars,
                files: &self.opts.var_files,
            },
            &variables::Context {
                env: self.env,
                spans: self.spans,
                base_dir: &self.base_dir,
            },
            &mut self.sources,
            &mut self.diags,
        )
    }

    /// The experiment id: the `experiment` attribute (which may refer only to variables, because
    /// every generated name depends on it), or else the manifest file's name made valid.
    fn experiment(
        &mut self,
        manifest: &schema::Manifest,
        known: &Known<'_>,
        evaluation: &mut Evaluation<'_>,
    ) -> Experiment {
        let from_stem = || Experiment {
            id: names::sanitise_experiment(
                &self
                    .path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
            span: None,
        };
        let Some(attr) = &manifest.experiment else {
            return from_stem();
        };
        let diags = &mut self.diags;
        let found = refs::collect(&attr.expr, self.spans);
        if !refs::check(&found, known, Allowed::VariablesOnly, "`experiment`", diags) {
            return from_stem();
        }
        match evaluation
            .evaluator
            .attr(attr, &evaluation.scope, false, diags)
        {
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

    /// Stage 6: the evaluated blocks become the desired world: Azure settings, resources and
    /// steps (expanded from the kits), outputs. Also returns the VM sizes the catalog lacks.
    fn desired(
        &mut self,
        manifest: &schema::Manifest,
        graph: &Graph<'_>,
        evaluated: &BTreeMap<String, EvalBlock>,
        experiment: Experiment,
        manifest_hash: String,
    ) -> (Desired, Vec<String>) {
        let azure = azure_settings(
            evaluated.get("azure"),
            &experiment,
            self.env,
            self.spans.file_start(),
            &mut self.diags,
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
                base_dir: self.base_dir.clone(),
                collect_unknown_sizes: self.collect_unknown_sizes,
                catalog: self.catalog.clone(),
            },
            &mut self.diags,
        );
        let outputs = manifest
            .outputs
            .iter()
            .filter_map(|o| evaluated.get(&format!("output.{}", o.label())))
            .map(|o| read_output(o, &mut self.diags))
            .collect();
        let desired = Desired {
            experiment: experiment.id,
            azure,
            resources: expanded.resources,
            steps: expanded.steps,
            outputs,
            manifest_hash,
            notes: expanded.notes,
            park_idle: expanded.park_idle,
            kube_objects: expanded.kube_objects,
            catalog: self.catalog.clone(),
        };
        (desired, expanded.unknown_sizes)
    }
}

/// The names references may use besides variables: local values and block labels by kind.
struct Names {
    locals: BTreeSet<String>,
    blocks: BTreeMap<String, Vec<String>>,
}

impl Names {
    fn of(manifest: &schema::Manifest) -> Self {
        let mut blocks: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for block in &manifest.resources {
            blocks
                .entry(block.ident.clone())
                .or_default()
                .push(block.label().to_owned());
        }
        Self {
            locals: manifest.locals.iter().map(|l| l.name.clone()).collect(),
            blocks,
        }
    }

    fn known<'a>(&'a self, variables: &'a BTreeSet<String>) -> Known<'a> {
        Known {
            variables,
            locals: &self.locals,
            blocks: &self.blocks,
        }
    }
}

/// Stage 5's state: the values in scope so far, the nodes that failed, the evaluated blocks.
struct Evaluation<'a> {
    evaluator: Evaluator<'a>,
    /// The sizes block values describe (a cluster's `infiniband`).
    catalog: &'a crate::catalog::Catalog,
    scope: Scope,
    /// Ids of nodes that failed (or are on a cycle): what refers to them is not evaluated.
    failed: BTreeSet<String>,
    /// Each evaluated block, by node id.
    blocks: BTreeMap<String, EvalBlock>,
}

impl<'a> Evaluation<'a> {
    fn new(
        evaluator: Evaluator<'a>,
        catalog: &'a crate::catalog::Catalog,
        vars: &variables::Variables,
    ) -> Self {
        let mut scope = Scope::default();
        for (name, value) in &vars.values {
            scope.vars.insert(name.clone(), value.clone());
        }
        Self {
            evaluator,
            catalog,
            scope,
            failed: BTreeSet::new(),
            blocks: BTreeMap::new(),
        }
    }

    /// Evaluate every node in dependency order. A local value enters the scope as it is
    /// evaluated, and so does what a resource block exposes (`vm.gpu.private_ip`).
    fn run(&mut self, graph: &Graph<'_>, experiment: &str, diags: &mut Vec<Diagnostic>) {
        let (order, cyclic) = order::order(&graph.nodes, diags);
        self.failed = cyclic.iter().map(|i| graph.nodes[*i].id.clone()).collect();
        for index in order {
            let id = graph.nodes[index].id.clone();
            // A node on a cycle is evaluated quietly: the cycle is reported once, as its path,
            // and its members' errors would only repeat it.
            let quiet = cyclic.contains(&index);
            match &graph.sources[index] {
                Source::Attr(attr) => {
                    let value = if graph.skip(attr, &self.failed) {
                        None
                    } else {
                        self.evaluator.attr(attr, &self.scope, quiet, diags)
                    };
                    match value {
                        Some(v) => {
                            self.scope.locals.insert(attr.name.clone(), v);
                        }
                        None => {
                            self.failed.insert(id);
                        }
                    }
                }
                Source::Block(raw) => {
                    let failed = &self.failed;
                    let skip = |attr: &RawAttr| graph.skip(attr, failed);
                    let block = self.evaluator.block(raw, &self.scope, quiet, &skip, diags);
                    if schema::RESOURCE_KINDS.contains(&raw.ident.as_str()) {
                        let group = self.resource_group(experiment);
                        self.scope.set_block(
                            &raw.ident,
                            raw.label(),
                            values::block_value(&block, experiment, &group, self.catalog),
                        );
                    }
                    self.blocks.insert(id, block);
                }
            }
        }
    }
}

impl Evaluation<'_> {
    /// The experiment's resource group as `azure_settings` will read it. The `azure` block is
    /// the graph's first node and refers to no block, so it is evaluated before any block that
    /// asks (a new `aml_workspace` exposes the group it is created in).
    fn resource_group(&self, experiment: &str) -> String {
        self.blocks
            .get("azure")
            .and_then(|azure| azure.attr("resource_group"))
            .and_then(|attr| attr.value.as_ref())
            .and_then(Json::as_str)
            .map_or_else(|| format!("dsinfra-{experiment}"), str::to_owned)
    }
}

/// The `azure` block's settings; without the block, an error (and defaults, so that the rest of
/// the manifest is still checked).
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
    let location = read_location(&mut f);
    let resource_group = f.string("resource_group").map_or(default_rg, |r| r.value);
    let tags = read_tags(&mut f);
    let endpoint = read_endpoint(&mut f);
    AzureSettings {
        subscription,
        location,
        resource_group,
        tags,
        endpoint,
    }
}

/// `location`, written the way ARM returns it (`East US` becomes `eastus`) when it is a known
/// region; an unknown one is reported with the nearest region name.
fn read_location(f: &mut Fields<'_>) -> String {
    let Some(loc) = f.required_string("location", "\"eastus\"") else {
        return String::new();
    };
    known_location(
        &loc,
        "use a region name such as eastus, westeurope or southcentralus",
    )
    .unwrap_or_else(|d| {
        f.report(d);
        loc.value
    })
}

/// A region as ARM writes it (`East US` is `eastus`), or, for a name no region has, the error
/// located at it with the nearest region name (else `help`). The `azure` block and an existing
/// workspace's `location` are read through this.
fn known_location(loc: &decode::Located<String>, help: &str) -> Result<String, Diagnostic> {
    if catalog::is_known_location(&loc.value) {
        return Ok(loc
            .value
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase());
    }
    let d = Diagnostic::error(format!("unknown Azure location `{}`", loc.value))
        .with_span(loc.span.clone())
        .with_label("not an Azure region");
    Err(
        match did_you_mean(&loc.value, catalog::LOCATIONS.iter().copied()) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => d.with_help(help.to_owned()),
        },
    )
}

/// The user's `tags`, without the invalid ones (each reported at the attribute).
fn read_tags(f: &mut Fields<'_>) -> BTreeMap<String, String> {
    let mut tag_map = BTreeMap::new();
    let Some(written) = f.string_map("tags") else {
        return tag_map;
    };
    for (key, value) in written.value {
        if let Some(why) = tag_problem(&key, &value) {
            f.report(
                Diagnostic::error("invalid tag in the `azure` block")
                    .with_span(written.span.clone())
                    .with_label(why),
            );
        } else {
            tag_map.insert(key, value);
        }
    }
    tag_map
}

/// Why a tag cannot be set, if it cannot: dsinfra sets some itself, and Azure limits the rest.
fn tag_problem(key: &str, value: &str) -> Option<String> {
    let reserved = [tags::EXPERIMENT, tags::ADDRESS, tags::MANAGED_BY];
    if reserved.contains(&key) {
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
    }
}

/// `endpoint`, the ARM URL to use instead of Azure's (the emulator's, in tests).
fn read_endpoint(f: &mut Fields<'_>) -> Option<String> {
    let e = f.string("endpoint")?;
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
