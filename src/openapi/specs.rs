//! Loading a folder of spec files, resolving `$ref`s between them, and finding the operation
//! that serves a concrete request.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::schema::{Direction, SchemaRef, Validator, Violation, ViolationKind};

/// Environment variable that points at the spec folder instead of the default location.
const SPECS_ENV: &str = "DSINFRA_AZURE_SPECS";

/// HTTP methods Swagger 2.0 path items may hold.
const METHODS: [&str; 6] = ["get", "put", "post", "delete", "patch", "head"];

/// Why the spec folder could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not valid JSON.
    #[error("{path} is not valid JSON: {source}")]
    Json {
        /// The file that failed to parse.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
}

/// The spec folder is not where it should be (or failed to load): tests say so loudly and, under
/// CI, fail instead of skipping.
#[derive(Debug, thiserror::Error)]
#[error(
    "Azure API specs not found at {tried} ({reason}); put the shared folder beside the checkout or \
     set DSINFRA_AZURE_SPECS"
)]
pub struct SpecsMissing {
    /// The directory that was tried.
    pub tried: PathBuf,
    /// What went wrong there.
    pub reason: String,
}

/// Every loaded JSON file, keyed by its path relative to the spec root with `/` separators.
pub(crate) struct Docs {
    files: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

impl Docs {
    /// Resolves `file.json#/pointer`, `#/pointer` or `file.json` relative to document `from`.
    pub(crate) fn resolve(&self, from: usize, reference: &str) -> Option<(usize, &Value)> {
        let (file, pointer) = reference.split_once('#').unwrap_or((reference, ""));
        let doc = if file.is_empty() {
            from
        } else {
            let joined = join(&self.files[from].0, file);
            *self.index.get(&joined)?
        };
        let value = if pointer.is_empty() {
            &self.files[doc].1
        } else {
            self.files[doc]
                .1
                .pointer(pointer)
                .or_else(|| self.definition_in_other_case(doc, pointer))?
        };
        Some((doc, value))
    }

    /// `#/definitions/{name}` in another letter case. The specs' files come from different
    /// commits of the repository (shared/azure-specs/README.md): AKS 2025-10-01 refers to
    /// common-types v5's `systemData`, which the v5 copy here spells `SystemData`. A definition
    /// name that matches only this way is the same definition renamed, never another one (a
    /// file with two names differing only in case resolves to neither).
    fn definition_in_other_case(&self, doc: usize, pointer: &str) -> Option<&Value> {
        let name = pointer.strip_prefix("/definitions/")?;
        if name.contains('/') {
            return None;
        }
        let definitions = self.files[doc].1.get("definitions")?.as_object()?;
        let mut matches = definitions
            .iter()
            .filter(|(candidate, _)| candidate.eq_ignore_ascii_case(name));
        let (_, found) = matches.next()?;
        matches.next().is_none().then_some(found)
    }

    /// Finds the definition in `base`'s file that is the discriminated subtype named `kind`.
    pub(crate) fn subtype<'a>(&'a self, base: SchemaRef<'a>, kind: &str) -> Option<SchemaRef<'a>> {
        let definitions = self.files[base.doc].1.get("definitions")?.as_object()?;
        definitions.iter().find_map(|(name, def)| {
            let value = def
                .get("x-ms-discriminator-value")
                .and_then(Value::as_str)
                .unwrap_or(name);
            (value == kind && def.get("allOf").is_some() && !std::ptr::eq(def, base.schema))
                .then_some(SchemaRef {
                    doc: base.doc,
                    schema: def,
                })
        })
    }
}

/// Joins a relative reference onto the directory of `from`, folding `.` and `..`.
fn join(from: &str, relative: &str) -> String {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for part in relative.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// One operation of one spec file, ready to match paths and validate bodies.
struct OperationEntry {
    doc: usize,
    template: String,
    method: String,
    api_version: String,
}

/// The loaded spec folder.
pub struct Specs {
    root: PathBuf,
    docs: Docs,
    operations: Vec<OperationEntry>,
}

/// An operation found for a request; borrows the loaded specs.
#[derive(Clone, Copy)]
pub struct Operation<'a> {
    specs: &'a Specs,
    entry: &'a OperationEntry,
}

/// One `x-ms-examples` entry whose file is present in the folder.
pub struct Example<'a> {
    /// The example's title (the key in `x-ms-examples`).
    pub title: String,
    /// The example file, relative to the spec root.
    pub file: String,
    /// The operation it illustrates.
    pub operation: Operation<'a>,
    /// The example's JSON (`parameters`, `responses`).
    pub body: &'a Value,
}

impl Specs {
    /// The folder tried when no override is given: `../shared/azure-specs` beside the checkout,
    /// or `$DSINFRA_AZURE_SPECS`.
    pub fn default_dir() -> PathBuf {
        std::env::var_os(SPECS_ENV).map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/azure-specs"),
            PathBuf::from,
        )
    }

    /// Loads the default folder; on failure prints the path tried to stderr, so a skipped test
    /// run is never silent.
    pub fn load_default() -> Result<Specs, SpecsMissing> {
        let dir = Self::default_dir();
        Self::load(&dir).map_err(|err| {
            let missing = SpecsMissing {
                tried: dir,
                reason: err.to_string(),
            };
            eprintln!("WARNING: {missing}");
            missing
        })
    }

    /// Loads every `.json` file below `dir` (spec files and their examples).
    pub fn load(dir: &Path) -> Result<Specs, SpecError> {
        let mut files = Vec::new();
        collect_json(dir, dir, &mut files)?;
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let index = files
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), i))
            .collect();
        let docs = Docs { files, index };
        let mut operations = Vec::new();
        for (doc, (_, value)) in docs.files.iter().enumerate() {
            let Some(paths) = value.get("paths").and_then(Value::as_object) else {
                continue;
            };
            let api_version = value
                .pointer("/info/version")
                .and_then(Value::as_str)
                .unwrap_or_default();
            for (template, item) in paths {
                for method in METHODS {
                    if item.get(method).is_some() {
                        operations.push(OperationEntry {
                            doc,
                            template: template.clone(),
                            method: method.to_owned(),
                            api_version: api_version.to_owned(),
                        });
                    }
                }
            }
        }
        Ok(Specs {
            root: dir.to_owned(),
            docs,
            operations,
        })
    }

    /// The folder the specs were loaded from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Finds the operation serving `method path` at `api_version` (any version when `None`).
    /// Path segments compare case-insensitively, as ARM routes them; when several templates
    /// match, the one with the most literal segments wins.
    pub fn operation(
        &self,
        method: &str,
        path: &str,
        api_version: Option<&str>,
    ) -> Option<Operation<'_>> {
        let path = path.split('?').next().unwrap_or(path);
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        self.operations
            .iter()
            .filter(|op| op.method.eq_ignore_ascii_case(method))
            .filter(|op| api_version.is_none_or(|v| v == op.api_version))
            .filter_map(|op| template_score(&op.template, &segments).map(|score| (score, op)))
            .max_by_key(|(score, _)| *score)
            .map(|(_, entry)| Operation { specs: self, entry })
    }

    /// Every `x-ms-examples` entry whose example file is present in the folder.
    pub fn examples(&self) -> Vec<Example<'_>> {
        let mut out = Vec::new();
        for entry in &self.operations {
            let op = Operation { specs: self, entry };
            let Some(examples) = op.raw().get("x-ms-examples").and_then(Value::as_object) else {
                continue;
            };
            for (title, link) in examples {
                let Some(reference) = link.get("$ref").and_then(Value::as_str) else {
                    continue;
                };
                let Some((doc, body)) = self.docs.resolve(entry.doc, reference) else {
                    continue;
                };
                out.push(Example {
                    title: title.clone(),
                    file: self.docs.files[doc].0.clone(),
                    operation: op,
                    body,
                });
            }
        }
        out
    }

    /// Validates `value` against a named definition of a file (relative to the root), for
    /// bodies that belong to no operation.
    pub fn validate_definition(
        &self,
        file: &str,
        definition: &str,
        value: &Value,
        direction: Direction,
    ) -> Option<Vec<Violation>> {
        let doc = *self.docs.index.get(file)?;
        let schema = self.docs.files[doc].1.get("definitions")?.get(definition)?;
        Some(self.run(SchemaRef { doc, schema }, value, direction))
    }

    fn run(&self, at: SchemaRef<'_>, value: &Value, direction: Direction) -> Vec<Violation> {
        let mut validator = Validator {
            docs: &self.docs,
            direction,
            out: Vec::new(),
        };
        validator.validate(value, at, "$", 0);
        validator.out
    }
}

impl<'a> Operation<'a> {
    fn raw(&self) -> &'a Value {
        &self.specs.docs.files[self.entry.doc].1["paths"][&self.entry.template][&self.entry.method]
    }

    /// The spec file holding the operation, relative to the spec root.
    pub fn file(&self) -> &'a str {
        &self.specs.docs.files[self.entry.doc].0
    }

    /// The path template, e.g. `/subscriptions/{subscriptionId}/resourcegroups/{resourceGroupName}`.
    pub fn template(&self) -> &'a str {
        &self.entry.template
    }

    /// The lower-case HTTP method.
    pub fn method(&self) -> &'a str {
        &self.entry.method
    }

    /// The api-version of the file (`info.version`).
    pub fn api_version(&self) -> &'a str {
        &self.entry.api_version
    }

    /// The `operationId`.
    pub fn operation_id(&self) -> &'a str {
        self.raw()
            .get("operationId")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// Whether the spec marks the operation `x-ms-long-running-operation`.
    pub fn long_running(&self) -> bool {
        self.raw()
            .get("x-ms-long-running-operation")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The status codes the spec declares (`default` included as the string `default`).
    pub fn statuses(&self) -> Vec<&'a str> {
        self.raw()
            .get("responses")
            .and_then(Value::as_object)
            .map(|r| r.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Every parameter of the operation (path-level ones included), with `$ref`s resolved.
    fn parameters(&self) -> Vec<(usize, &'a Value)> {
        let docs = &self.specs.docs;
        let path_level = docs.files[self.entry.doc].1["paths"][&self.entry.template]
            .get("parameters")
            .and_then(Value::as_array);
        let op_level = self.raw().get("parameters").and_then(Value::as_array);
        path_level
            .into_iter()
            .chain(op_level)
            .flatten()
            .filter_map(|p| match p.get("$ref").and_then(Value::as_str) {
                Some(reference) => docs.resolve(self.entry.doc, reference),
                None => Some((self.entry.doc, p)),
            })
            .collect()
    }

    /// The name of the `in: body` parameter, which is also its key in an example's parameters.
    pub fn body_parameter(&self) -> Option<&'a str> {
        self.parameters()
            .into_iter()
            .find(|(_, p)| p.get("in").and_then(Value::as_str) == Some("body"))
            .and_then(|(_, p)| p.get("name").and_then(Value::as_str))
    }

    /// Names of the operation's path parameters, in template order.
    pub fn path_parameters(&self) -> Vec<String> {
        self.entry
            .template
            .split('/')
            .filter_map(|s| {
                let start = s.find('{')?;
                let end = s.find('}')?;
                Some(s[start + 1..end].to_owned())
            })
            .collect()
    }

    /// Validates a request body against the `in: body` parameter's schema. An operation with no
    /// body parameter accepts only an empty body.
    pub fn validate_request(&self, body: Option<&Value>) -> Vec<Violation> {
        let param = self
            .parameters()
            .into_iter()
            .find(|(_, p)| p.get("in").and_then(Value::as_str) == Some("body"));
        match (param, body) {
            (Some((doc, p)), Some(body)) => match p.get("schema") {
                Some(schema) => self
                    .specs
                    .run(SchemaRef { doc, schema }, body, Direction::Request),
                None => Vec::new(),
            },
            (Some((_, p)), None) if p.get("required").and_then(Value::as_bool) == Some(true) => {
                vec![Violation {
                    path: "$".into(),
                    kind: ViolationKind::Body,
                    reason: "the operation requires a body".into(),
                }]
            }
            (None, Some(body)) if !is_empty_body(body) => vec![Violation {
                path: "$".into(),
                kind: ViolationKind::Body,
                reason: "the operation takes no body".into(),
            }],
            _ => Vec::new(),
        }
    }

    /// Validates a response: the status must be declared (errors may fall to `default`), and the
    /// body must match that response's schema, or be absent when it declares none.
    pub fn validate_response(&self, status: u16, body: Option<&Value>) -> Vec<Violation> {
        let responses = self.raw().get("responses");
        let code = status.to_string();
        let response = responses.and_then(|r| r.get(&code)).or_else(|| {
            (status >= 400)
                .then(|| responses.and_then(|r| r.get("default")))
                .flatten()
        });
        let Some(response) = response else {
            if status >= 400 {
                // Some specs (DiskRP) declare no error response at all; nothing to check against.
                return Vec::new();
            }
            return vec![Violation {
                path: "$".into(),
                kind: ViolationKind::UndeclaredStatus,
                reason: format!("status {status} is not declared by {}", self.operation_id()),
            }];
        };
        match (response.get("schema"), body) {
            (Some(schema), Some(body)) => self.specs.run(
                SchemaRef {
                    doc: self.entry.doc,
                    schema,
                },
                body,
                Direction::Response,
            ),
            (Some(_), None) => vec![Violation {
                path: "$".into(),
                kind: ViolationKind::Body,
                reason: format!("status {status} must carry a body"),
            }],
            (None, Some(body)) if !is_empty_body(body) => vec![Violation {
                path: "$".into(),
                kind: ViolationKind::Body,
                reason: format!("status {status} declares no body, got {body}"),
            }],
            _ => Vec::new(),
        }
    }
}

fn is_empty_body(body: &Value) -> bool {
    body.is_null() || body.as_object().is_some_and(serde_json::Map::is_empty)
}

/// Scores how well a template matches the concrete segments: `None` if it does not, otherwise
/// the number of literal segments (more literal = more specific).
fn template_score(template: &str, segments: &[&str]) -> Option<usize> {
    let parts: Vec<&str> = template.trim_matches('/').split('/').collect();
    // A leading `{scope}` (extension resources such as role assignments) stands for a whole
    // resource id: one or more segments, sent unescaped (`x-ms-skip-url-encoding`).
    if parts.first() == Some(&"{scope}") && parts.len() < segments.len() {
        let skip = segments.len() - parts.len();
        if segments[..=skip].iter().any(|s| s.is_empty()) {
            return None;
        }
        return template_score(&parts[1..].join("/"), &segments[skip + 1..]);
    }
    if parts.len() != segments.len() {
        return None;
    }
    let mut score = 0;
    for (part, segment) in parts.iter().zip(segments) {
        if segment.is_empty() {
            return None;
        }
        match (part.find('{'), part.find('}')) {
            (Some(start), Some(end)) => {
                let (prefix, suffix) = (&part[..start], &part[end + 1..]);
                let fits = segment.len() >= prefix.len() + suffix.len()
                    && segment[..prefix.len()].eq_ignore_ascii_case(prefix)
                    && segment[segment.len() - suffix.len()..].eq_ignore_ascii_case(suffix);
                if !fits {
                    return None;
                }
            }
            _ if part.eq_ignore_ascii_case(segment) => score += 1,
            _ => return None,
        }
    }
    Some(score)
}

fn collect_json(root: &Path, dir: &Path, out: &mut Vec<(String, Value)>) -> Result<(), SpecError> {
    let io = |source| SpecError::Io {
        path: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            collect_json(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).map_err(|source| SpecError::Io {
                path: path.clone(),
                source,
            })?;
            let value = serde_json::from_str(&text).map_err(|source| SpecError::Json {
                path: path.clone(),
                source,
            })?;
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            out.push((relative, value));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_scope_matches_a_whole_resource_id() {
        let template = "/{scope}/providers/Microsoft.Authorization/roleAssignments/{name}";
        let at = |path: &str| {
            let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
            template_score(template, &segments)
        };
        assert_eq!(
            at("/subscriptions/s/providers/Microsoft.Authorization/roleAssignments/g"),
            Some(3)
        );
        assert_eq!(
            at(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/v/providers/Microsoft.Authorization/roleAssignments/g"
            ),
            Some(3)
        );
        assert_eq!(
            at("/providers/Microsoft.Authorization/roleAssignments/g"),
            None
        );
        assert_eq!(
            at("/subscriptions/s/providers/Microsoft.Compute/disks/g"),
            None
        );
    }

    #[test]
    fn join_folds_parent_directories() {
        assert_eq!(
            join("network/stable/2024-07-01/vnet.json", "./network.json"),
            "network/stable/2024-07-01/network.json"
        );
        assert_eq!(
            join("a/b/c/d.json", "../../../common/types.json"),
            "common/types.json"
        );
    }

    #[test]
    fn templates_match_case_insensitively_and_prefer_literals() {
        let segments: Vec<&str> = "subscriptions/s/resourceGroups/rg".split('/').collect();
        assert_eq!(
            template_score(
                "/subscriptions/{subscriptionId}/resourcegroups/{name}",
                &segments
            ),
            Some(2)
        );
        assert_eq!(
            template_score("/subscriptions/{a}/{b}/{c}", &segments),
            Some(1)
        );
        assert_eq!(
            template_score("/subscriptions/{a}/locations/{c}", &segments),
            None
        );
        let prefixed: Vec<&str> = vec!["shutdown-computevm-vm1"];
        assert_eq!(
            template_score("/shutdown-computevm-{vm}", &prefixed),
            Some(0)
        );
    }
}
