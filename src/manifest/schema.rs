//! The shape of the manifest language: which blocks and attributes exist where.
//!
//! This is the first check after parsing and needs no evaluation: unknown blocks and attributes
//! (with "did you mean"), wrong label counts, invalid labels, and duplicate blocks. It also sorts
//! the top level into a [`Manifest`], the typed view the later passes work on. Step blocks have
//! parameters that depend on their kind; `steps.rs` checks those from its own table.

use std::collections::{BTreeMap, BTreeSet};

use crate::diag::{Diagnostic, did_you_mean};

use super::parse::{RawAttr, RawBlock, Spans};

/// What a block may contain.
pub(super) struct BlockSchema {
    /// Allowed attribute names.
    pub attrs: &'static [&'static str],
    /// Allowed nested blocks.
    pub blocks: &'static [Nested],
}

/// A nested block type.
pub(super) struct Nested {
    /// Block type.
    pub ident: &'static str,
    /// Whether it takes one label (a name), or none.
    pub labelled: bool,
    /// May appear more than once.
    pub repeatable: bool,
    /// What it may contain; `None` when another module checks it (steps).
    pub schema: Option<&'static BlockSchema>,
}

const fn nested(ident: &'static str, schema: &'static BlockSchema) -> Nested {
    Nested {
        ident,
        labelled: false,
        repeatable: false,
        schema: Some(schema),
    }
}

const fn named(ident: &'static str, schema: &'static BlockSchema) -> Nested {
    Nested {
        ident,
        labelled: true,
        repeatable: true,
        schema: Some(schema),
    }
}

const STEP: Nested = Nested {
    ident: "step",
    labelled: true,
    repeatable: true,
    schema: None,
};

static LIFECYCLE: BlockSchema = BlockSchema {
    attrs: &["prevent_destroy"],
    blocks: &[],
};
static PARK: BlockSchema = BlockSchema {
    attrs: &["at", "time_zone", "idle"],
    blocks: &[],
};
static IMAGE: BlockSchema = BlockSchema {
    attrs: &["publisher", "offer", "sku", "version", "generation"],
    blocks: &[],
};
static VALIDATION: BlockSchema = BlockSchema {
    attrs: &["condition", "error_message"],
    blocks: &[],
};
static SUBNET: BlockSchema = BlockSchema {
    attrs: &["cidr"],
    blocks: &[],
};
static CONTAINER: BlockSchema = BlockSchema {
    attrs: &[],
    blocks: &[],
};
static FILE_SHARE: BlockSchema = BlockSchema {
    attrs: &["quota_gb", "protocol"],
    blocks: &[],
};

/// The `azure` block.
pub(super) static AZURE: BlockSchema = BlockSchema {
    attrs: &[
        "subscription",
        "location",
        "resource_group",
        "tags",
        "endpoint",
    ],
    blocks: &[],
};
static VARIABLE: BlockSchema = BlockSchema {
    attrs: &["type", "default", "description", "sensitive"],
    blocks: &[Nested {
        ident: "validation",
        labelled: false,
        repeatable: true,
        schema: Some(&VALIDATION),
    }],
};
static OUTPUT: BlockSchema = BlockSchema {
    attrs: &["value", "sensitive", "description"],
    blocks: &[],
};
static NETWORK: BlockSchema = BlockSchema {
    attrs: &["address_space", "ssh_from"],
    blocks: &[named("subnet", &SUBNET)],
};
static VM: BlockSchema = BlockSchema {
    attrs: &[
        "size",
        "sizes",
        "image",
        "ssh_key",
        "admin_username",
        "os_disk_gb",
        "os_disk_sku",
        "zone",
        "public_ip",
        "network",
        "subnet",
        "trusted_launch",
        "secure_boot",
        "priority",
        "max_price",
        "eviction",
    ],
    blocks: &[
        nested("image", &IMAGE),
        nested("park", &PARK),
        nested("lifecycle", &LIFECYCLE),
        STEP,
    ],
};
static CLUSTER: BlockSchema = BlockSchema {
    attrs: &[
        "size",
        "sizes",
        "count",
        "image",
        "ssh_key",
        "admin_username",
        "os_disk_gb",
        "os_disk_sku",
        "zone",
        "placement_group",
        "head_public_ip",
        "network",
        "subnet",
        "trusted_launch",
        "secure_boot",
        "priority",
        "max_price",
        "eviction",
    ],
    blocks: &[
        nested("image", &IMAGE),
        nested("park", &PARK),
        nested("lifecycle", &LIFECYCLE),
        STEP,
    ],
};
static STORAGE_ACCOUNT: BlockSchema = BlockSchema {
    attrs: &["name", "sku", "kind", "hns"],
    blocks: &[
        named("container", &CONTAINER),
        named("file_share", &FILE_SHARE),
        nested("lifecycle", &LIFECYCLE),
    ],
};
static SAS: BlockSchema = BlockSchema {
    attrs: &[
        "container",
        "share",
        "account",
        "permissions",
        "expires_in",
        "expiry",
        "https_only",
    ],
    blocks: &[],
};
static DISK: BlockSchema = BlockSchema {
    attrs: &["size_gb", "sku", "attach_to", "lun", "zone", "mount", "fs"],
    blocks: &[nested("lifecycle", &LIFECYCLE)],
};
static AML_WORKSPACE: BlockSchema = BlockSchema {
    attrs: &[
        "existing",
        "name",
        "resource_group",
        "location",
        "container_registry",
    ],
    blocks: &[nested("lifecycle", &LIFECYCLE)],
};
static AML_CLUSTER: BlockSchema = BlockSchema {
    attrs: &[
        "workspace",
        "name",
        "size",
        "count",
        "ssh_key",
        "admin_username",
        "priority",
        "idle_seconds_before_scaledown",
        "network",
        "subnet",
    ],
    blocks: &[nested("lifecycle", &LIFECYCLE), STEP],
};

static AKS_POOL: BlockSchema = BlockSchema {
    attrs: &["size", "count", "taints", "gpu_driver"],
    blocks: &[],
};
static AKS_MANIFEST: BlockSchema = BlockSchema {
    attrs: &["file"],
    blocks: &[],
};
static AKS_BLOB_VOLUME: BlockSchema = BlockSchema {
    attrs: &[
        "container",
        "namespace",
        "size",
        "mount_options",
        "read_only",
    ],
    blocks: &[],
};
static AKS_CHART: BlockSchema = BlockSchema {
    attrs: &[
        "path",
        "repository",
        "chart",
        "version",
        "namespace",
        "values",
    ],
    blocks: &[],
};
static AKS: BlockSchema = BlockSchema {
    attrs: &[
        "name",
        "kubernetes_version",
        "dns_prefix",
        "api_server_from",
        "blob_csi",
        "system_size",
        "system_count",
        "park",
        "device_plugin",
        "entra_id",
    ],
    blocks: &[
        named("pool", &AKS_POOL),
        named("manifest", &AKS_MANIFEST),
        named("blob_volume", &AKS_BLOB_VOLUME),
        named("chart", &AKS_CHART),
        nested("lifecycle", &LIFECYCLE),
    ],
};

/// Block kinds that expand into Azure resources, in the order the docs present them.
pub(super) const RESOURCE_KINDS: [&str; 9] = [
    "network",
    "vm",
    "cluster",
    "storage_account",
    "sas",
    "disk",
    "aml_workspace",
    "aml_cluster",
    "aks",
];

fn resource_schema(kind: &str) -> Option<&'static BlockSchema> {
    Some(match kind {
        "network" => &NETWORK,
        "vm" => &VM,
        "cluster" => &CLUSTER,
        "storage_account" => &STORAGE_ACCOUNT,
        "sas" => &SAS,
        "disk" => &DISK,
        "aml_workspace" => &AML_WORKSPACE,
        "aml_cluster" => &AML_CLUSTER,
        "aks" => &AKS,
        _ => return None,
    })
}

const TOP_LEVEL_BLOCKS: [&str; 14] = [
    "azure",
    "backend",
    "variable",
    "locals",
    "output",
    "network",
    "vm",
    "cluster",
    "storage_account",
    "sas",
    "disk",
    "aml_workspace",
    "aml_cluster",
    "aks",
];

/// The manifest's top level, sorted by meaning. Blocks keep their source order.
#[derive(Debug, Default)]
pub(super) struct Manifest {
    /// `experiment = "..."`.
    pub experiment: Option<RawAttr>,
    /// The `azure` block.
    pub azure: Option<RawBlock>,
    /// `variable` blocks.
    pub variables: Vec<RawBlock>,
    /// Every attribute of every `locals` block.
    pub locals: Vec<RawAttr>,
    /// `output` blocks.
    pub outputs: Vec<RawBlock>,
    /// Resource blocks (`network`, `vm`, ...), in source order.
    pub resources: Vec<RawBlock>,
}

/// Check the shape of the whole file and sort its top level.
pub(super) fn check(root: &RawBlock, spans: &Spans, diags: &mut Vec<Diagnostic>) -> Manifest {
    let mut manifest = Manifest::default();
    for attr in &root.attrs {
        if attr.name == "experiment" {
            manifest.experiment = Some(attr.clone());
        } else {
            diags.push(unknown_top_attr(attr));
        }
    }
    // Labelled blocks seen so far, with the line each was declared on.
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for block in &root.blocks {
        if admit(block, spans, &mut seen, diags) {
            manifest.add(block, spans, diags);
        }
    }
    manifest
}

/// The error for a top-level attribute other than `experiment`, with the likeliest fix.
fn unknown_top_attr(attr: &RawAttr) -> Diagnostic {
    let d = Diagnostic::error(format!("unknown top-level attribute `{}`", attr.name))
        .with_span(attr.key_span.clone())
        .with_label("not a top-level setting");
    if let Some(block) = TOP_LEVEL_BLOCKS.iter().find(|b| **b == attr.name) {
        d.with_help(format!(
            "`{block}` is a block: write `{block} {}{{ ... }}` without `=`",
            if is_labelled_top(block) {
                "\"name\" "
            } else {
                ""
            }
        ))
    } else if let Some(s) = did_you_mean(&attr.name, ["experiment"]) {
        d.with_help(format!("did you mean `{s}`?"))
    } else {
        d.with_help("the only top-level attribute is `experiment`; everything else goes in a block")
    }
}

/// Whether a top-level block is sorted into the [`Manifest`]: its kind is known (the backend is
/// read on its own, see backend.rs), its labels are right, and it is no duplicate. Each problem
/// is reported.
fn admit(
    block: &RawBlock,
    spans: &Spans,
    seen: &mut BTreeMap<(String, String), usize>,
    diags: &mut Vec<Diagnostic>,
) -> bool {
    let ident = block.ident.as_str();
    if !TOP_LEVEL_BLOCKS.contains(&ident) {
        let d = Diagnostic::error(format!("unknown block `{ident}`"))
            .with_span(block.header.clone())
            .with_label("not a top-level block");
        diags.push(match did_you_mean(ident, TOP_LEVEL_BLOCKS) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => d.with_help(format!(
                "top-level blocks are: {}",
                TOP_LEVEL_BLOCKS.join(", ")
            )),
        });
        return false;
    }
    if ident == "backend" {
        return false;
    }
    let labelled = is_labelled_top(ident);
    if !check_labels(block, labelled, diags) {
        return false;
    }
    if !labelled {
        return true;
    }
    let key = (ident.to_owned(), block.label().to_owned());
    if let Some(first) = seen.get(&key) {
        diags.push(
            Diagnostic::error(format!("duplicate block {}", block.title()))
                .with_span(block.label_span())
                .with_label(format!("first declared at line {first}"))
                .with_help(format!("give each `{ident}` block a different name")),
        );
        return false;
    }
    seen.insert(key, spans.line_of(block.header.start));
    true
}

impl Manifest {
    /// Check an admitted top-level block's body and sort it in.
    fn add(&mut self, block: &RawBlock, spans: &Spans, diags: &mut Vec<Diagnostic>) {
        match block.ident.as_str() {
            "azure" => {
                if self.azure.is_some() {
                    diags.push(
                        Diagnostic::error("duplicate `azure` block")
                            .with_span(block.header.clone())
                            .with_help("put every Azure setting in one `azure` block"),
                    );
                    return;
                }
                check_body(block, &AZURE, diags);
                self.azure = Some(block.clone());
            }
            "variable" => {
                check_body(block, &VARIABLE, diags);
                self.variables.push(block.clone());
            }
            "locals" => self.add_locals(block, spans, diags),
            "output" => {
                check_body(block, &OUTPUT, diags);
                self.outputs.push(block.clone());
            }
            kind => {
                if let Some(schema) = resource_schema(kind) {
                    check_body(block, schema, diags);
                }
                self.resources.push(block.clone());
            }
        }
    }

    /// A `locals` block: attributes only, each name defined once across all `locals` blocks.
    fn add_locals(&mut self, block: &RawBlock, spans: &Spans, diags: &mut Vec<Diagnostic>) {
        for nested in &block.blocks {
            diags.push(
                Diagnostic::error(format!("unexpected block `{}` in `locals`", nested.ident))
                    .with_span(nested.header.clone())
                    .with_help("`locals` holds only attributes: `name = expression`"),
            );
        }
        for attr in &block.attrs {
            if let Some(first) = self.locals.iter().find(|l| l.name == attr.name) {
                diags.push(
                    Diagnostic::error(format!("duplicate local value `{}`", attr.name))
                        .with_span(attr.key_span.clone())
                        .with_label(format!(
                            "first defined at line {}",
                            spans.line_of(first.key_span.start)
                        ))
                        .with_help("each local value may be defined only once"),
                );
            } else {
                self.locals.push(attr.clone());
            }
        }
    }
}

fn is_labelled_top(ident: &str) -> bool {
    !matches!(ident, "azure" | "locals")
}

/// Whether a label can name a block: it becomes part of addresses (`vm.gpu`) and Azure names.
pub(super) fn is_valid_label(label: &str) -> bool {
    let mut chars = label.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn check_labels(block: &RawBlock, labelled: bool, diags: &mut Vec<Diagnostic>) -> bool {
    let ident = &block.ident;
    match (labelled, block.labels.len()) {
        (true, 1) => {
            let (label, span) = &block.labels[0];
            if is_valid_label(label) {
                true
            } else {
                diags.push(
                    Diagnostic::error(format!("invalid name \"{label}\" for a `{ident}` block"))
                        .with_span(span.clone())
                        .with_label("not a valid name")
                        .with_help("names start with a letter and contain only letters, digits, `_` and `-`"),
                );
                false
            }
        }
        (false, 0) => true,
        (true, _) => {
            diags.push(
                Diagnostic::error(format!("`{ident}` block needs exactly one name"))
                    .with_span(block.header.clone())
                    .with_help(format!("write `{ident} \"name\" {{ ... }}`")),
            );
            false
        }
        (false, _) => {
            diags.push(
                Diagnostic::error(format!("`{ident}` block takes no name"))
                    .with_span(block.header.clone())
                    .with_help(format!("write `{ident} {{ ... }}`")),
            );
            false
        }
    }
}

/// Check a block's attributes and nested blocks against its schema, recursively.
pub(super) fn check_body(block: &RawBlock, schema: &BlockSchema, diags: &mut Vec<Diagnostic>) {
    let kind = &block.ident;
    let title = block.title();
    for attr in &block.attrs {
        if schema.attrs.contains(&attr.name.as_str()) {
            continue;
        }
        let mut d = Diagnostic::error(format!("unknown attribute `{}` in {title}", attr.name))
            .with_span(attr.key_span.clone())
            .with_label(format!("not an attribute of `{kind}`"));
        if let Some(nested) = schema.blocks.iter().find(|n| n.ident == attr.name) {
            d = d.with_help(format!(
                "`{0}` is a block: write `{0} {1}{{ ... }}` without `=`",
                nested.ident,
                if nested.labelled { "\"name\" " } else { "" }
            ));
        } else {
            d = with_suggestion(d, &attr.name, schema);
        }
        diags.push(d);
    }
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for nested_block in &block.blocks {
        let Some(nested) = schema.blocks.iter().find(|n| n.ident == nested_block.ident) else {
            let mut d =
                Diagnostic::error(format!("unknown block `{}` in {title}", nested_block.ident))
                    .with_span(nested_block.header.clone())
                    .with_label(format!("not a block of `{kind}`"));
            if schema.attrs.contains(&nested_block.ident.as_str()) {
                d = d.with_help(format!(
                    "`{0}` is an attribute: write `{0} = ...`",
                    nested_block.ident
                ));
            } else {
                d = with_suggestion(d, &nested_block.ident, schema);
            }
            diags.push(d);
            continue;
        };
        if !check_labels(nested_block, nested.labelled, diags) {
            continue;
        }
        let key = (nested_block.ident.clone(), nested_block.label().to_owned());
        if !seen.insert(key) && (nested.labelled || !nested.repeatable) {
            // Steps may repeat a kind; their names are checked in `steps.rs`.
            if nested.schema.is_some() {
                let what = if nested.labelled {
                    nested_block.title()
                } else {
                    format!("`{}`", nested_block.ident)
                };
                diags.push(
                    Diagnostic::error(format!("duplicate block {what} in {title}"))
                        .with_span(nested_block.header.clone())
                        .with_help(if nested.labelled {
                            format!("give each `{}` a different name", nested_block.ident)
                        } else {
                            format!("merge the two `{}` blocks into one", nested_block.ident)
                        }),
                );
                continue;
            }
        }
        if let Some(inner) = nested.schema {
            check_body(nested_block, inner, diags);
        }
    }
}

fn with_suggestion(d: Diagnostic, name: &str, schema: &BlockSchema) -> Diagnostic {
    let candidates = schema
        .attrs
        .iter()
        .copied()
        .chain(schema.blocks.iter().map(|n| n.ident));
    if let Some(s) = did_you_mean(name, candidates) {
        d.with_help(format!("did you mean `{s}`?"))
    } else {
        let mut all: Vec<&str> = schema.attrs.to_vec();
        all.extend(schema.blocks.iter().map(|n| n.ident));
        if all.is_empty() {
            d.with_help("this block takes no attributes")
        } else {
            d.with_help(format!("expected one of: {}", all.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::super::parse::parse;
    use super::*;

    fn run(text: &str) -> (Manifest, Vec<Diagnostic>) {
        let spans = Spans::new(Arc::from(Path::new("t.hcl")), Arc::from(text));
        let root = parse(&spans, text).expect("parses");
        let mut diags = Vec::new();
        let manifest = check(&root, &spans, &mut diags);
        (manifest, diags)
    }

    #[test]
    fn sorts_the_top_level() {
        let (m, diags) = run(
            "experiment = \"x\"\nazure { location = \"eastus\" }\nvariable \"a\" {}\nlocals { b = 1 }\nvm \"gpu\" { size = \"s\" }\noutput \"o\" { value = 1 }\n",
        );
        assert!(diags.is_empty(), "{diags:?}");
        assert!(m.experiment.is_some() && m.azure.is_some());
        assert_eq!(
            (m.variables.len(), m.locals.len(), m.outputs.len()),
            (1, 1, 1)
        );
        assert_eq!(m.resources[0].title(), "vm \"gpu\"");
    }

    #[test]
    fn unknown_names_get_suggestions() {
        let (_, diags) = run("vm \"gpu\" {\n  sise = 1\n  parc {}\n}\nvms \"x\" {}\n");
        let summaries: Vec<&str> = diags.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                "unknown attribute `sise` in vm \"gpu\"",
                "unknown block `parc` in vm \"gpu\"",
                "unknown block `vms`"
            ]
        );
        assert_eq!(diags[0].help, ["did you mean `size`?"]);
        assert_eq!(diags[1].help, ["did you mean `park`?"]);
    }

    #[test]
    fn duplicates_and_labels_are_checked() {
        let (m, diags) = run("vm \"a\" {}\nvm \"a\" {}\nvm {}\nazure \"x\" {}\nvm \"9x\" {}\n");
        assert_eq!(m.resources.len(), 1);
        let summaries: Vec<&str> = diags.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                "duplicate block vm \"a\"",
                "`vm` block needs exactly one name",
                "`azure` block takes no name",
                "invalid name \"9x\" for a `vm` block"
            ]
        );
        assert_eq!(diags[0].label.as_deref(), Some("first declared at line 1"));
    }
}
