//! Kubernetes objects checked against the published schemas: the JSON Schema files the
//! `kubernetes-validate` package ships (one directory per Kubernetes release, `-strict` when
//! every object forbids undeclared properties), and a CustomResourceDefinition's own
//! `openAPIV3Schema` for its custom resources.
//!
//! The Kubernetes API stand-in of the emulator judges every object it is given with this module,
//! so a test double cannot accept what an API server refuses. It knows nothing about the rest of
//! the crate, like `openapi`, so it could become its own crate.
//!
//! What it checks, and why it stops there: the keywords the published schemas use (`$ref` into
//! `_definitions.json`, `type` with `null`, `properties`, `additionalProperties` as a boolean or a
//! schema, `required`, `enum`, `items`, `oneOf` of the int-or-string kind, a loose `format`), and
//! in a CRD's schema the structural-schema extensions (`x-kubernetes-preserve-unknown-fields`,
//! `x-kubernetes-int-or-string`, `nullable`) plus `minimum`/`maximum`. An API server's own
//! validation (names, label syntax, immutable fields, cross-field rules, CEL) is not modelled.

mod check;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use check::check_crd_object;

/// The environment variable naming a schema directory (`.../v1.37.0-local-strict`).
pub const SCHEMAS_ENV: &str = "DSINFRA_KUBE_SCHEMAS";

/// What kind of rule a value broke: an API server answers an unknown field and a wrong type
/// while decoding (400), and a missing or out-of-range value while validating (422).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViolationKind {
    /// A property the schema does not declare.
    UnknownField,
    /// The JSON type differs from the schema's.
    Type,
    /// A `required` property is missing.
    Required,
    /// A value outside a closed `enum` or a numeric range.
    Value,
}

/// One broken rule, located by the field path an API server prints (`spec.containers[0].image`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub kind: ViolationKind,
    pub reason: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// The published schemas of one Kubernetes release, indexed by group, version and kind.
pub struct Schemas {
    dir: PathBuf,
    defs: Map<String, Value>,
    /// `(group, version, kind)` -> the definition's name in `defs`.
    by_gvk: BTreeMap<(String, String, String), String>,
}

impl fmt::Debug for Schemas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schemas")
            .field("dir", &self.dir)
            .field("kinds", &self.by_gvk.len())
            .finish_non_exhaustive()
    }
}

impl Schemas {
    /// Loads `dir/_definitions.json` (a `kubernetes-validate` schema directory).
    ///
    /// # Errors
    ///
    /// The file is missing or is not a definitions document; the text says which.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let file = dir.join("_definitions.json");
        let text = std::fs::read_to_string(&file).map_err(|e| {
            format!(
                "cannot read the Kubernetes schemas at {}: {e} (give the directory of one release \
                 from the kubernetes-validate package, e.g. .../kubernetes-json-schema/v1.37.0-local-strict)",
                file.display()
            )
        })?;
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", file.display()))?;
        let Some(Value::Object(defs)) = doc.get("$defs").cloned() else {
            return Err(format!("{} has no $defs", file.display()));
        };
        let mut by_gvk = BTreeMap::new();
        for (name, def) in &defs {
            // A kind's definition lists the kinds it is; its List and watch-event types list
            // several, so only the one whose name ends in the kind is the kind's own.
            let Some(Value::Array(gvks)) = def.get("x-kubernetes-group-version-kind") else {
                continue;
            };
            for gvk in gvks {
                let text = |k: &str| gvk.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                let kind = text("kind");
                if name.rsplit('.').next() == Some(kind.as_str()) {
                    by_gvk.insert((text("group"), text("version"), kind), name.clone());
                }
            }
        }
        Ok(Self {
            dir: dir.to_owned(),
            defs,
            by_gvk,
        })
    }

    /// The schemas at `$DSINFRA_KUBE_SCHEMAS`, if it is set.
    ///
    /// # Errors
    ///
    /// The variable is set but the directory does not load.
    pub fn from_env() -> Result<Option<Self>, String> {
        match std::env::var_os(SCHEMAS_ENV) {
            Some(dir) => Self::load(Path::new(&dir)).map(Some),
            None => Ok(None),
        }
    }

    /// Whether the release defines `kind` in `api_version` (`apps/v1`, `v1`).
    #[must_use]
    pub fn knows(&self, api_version: &str, kind: &str) -> bool {
        self.by_gvk.contains_key(&gvk(api_version, kind))
    }

    /// Every rule `object` breaks, judged by the schema of its own `apiVersion` and `kind`.
    ///
    /// # Errors
    ///
    /// The release has no schema for the object's kind.
    pub fn check(&self, object: &Value) -> Result<Vec<Violation>, String> {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = self
            .by_gvk
            .get(&gvk(api_version, kind))
            .ok_or_else(|| format!("no schema for kind {kind:?} in {api_version:?}"))?;
        let mut found = Vec::new();
        check::walk(&self.defs, &self.defs[name], object, "", &mut found);
        Ok(found)
    }
}

fn gvk(api_version: &str, kind: &str) -> (String, String, String) {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    (group.to_owned(), version.to_owned(), kind.to_owned())
}
