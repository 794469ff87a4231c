//! The `backend "azureblob"` block: where the experiment's state is kept.
//!
//! The backend is read before, and independently of, everything else in the manifest, because
//! the state must be found (and locked) before variables are resolved or resources evaluated,
//! and because `state pull|push` and `force-unlock` must work on a manifest whose variables are
//! not given. So, as in Terraform, its values are literal: references to variables, locals or
//! blocks are refused; functions such as `env()` are allowed. It holds no secret: a SAS is named
//! by the environment variable that carries it (`sas_env`), never written in the manifest.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diag::{Diagnostic, SourceMap, did_you_mean};
use crate::model::{BackendConfig, ResourceKind};

use super::eval::{EvalBlock, Evaluator, Scope};
use super::fields::{Fields, Located};
use super::parse::{self, RawAttr, RawBlock, Spans};
use super::schema::{BlockSchema, check_body};
use super::{LoadFailed, names, refs};

/// The only backend type: Azure Blob Storage.
pub const AZUREBLOB: &str = "azureblob";

/// What a `backend "azureblob"` block may contain.
pub(super) static BACKEND: BlockSchema = BlockSchema {
    attrs: &["account", "container", "key", "endpoint", "sas_env"],
    blocks: &[],
};

/// Reads the manifest's backend block (at most one) from its parsed top level, reporting every
/// problem into `diags`. `None` when there is no block or it has errors.
pub(super) fn from_root(
    root: &RawBlock,
    spans: &Spans,
    env: &dyn Fn(&str) -> Option<String>,
    base_dir: &Path,
    diags: &mut Vec<Diagnostic>,
) -> Option<BackendConfig> {
    let block = the_block(root, spans, diags)?;
    let errors = |diags: &[Diagnostic]| diags.iter().filter(|d| d.is_error()).count();
    let errors_before = errors(diags);
    check_type(block, diags);
    check_body(block, &BACKEND, diags);
    let evaluated = evaluate(block, spans, env, base_dir, diags);
    let config = read_config(&evaluated, diags);
    if errors(diags) > errors_before {
        return None;
    }
    config
}

/// The first `backend` block; any other is reported.
fn the_block<'a>(
    root: &'a RawBlock,
    spans: &Spans,
    diags: &mut Vec<Diagnostic>,
) -> Option<&'a RawBlock> {
    let mut blocks = root.blocks.iter().filter(|b| b.ident == "backend");
    let first = blocks.next()?;
    for extra in blocks {
        diags.push(
            Diagnostic::error("duplicate `backend` block")
                .with_span(extra.header.clone())
                .with_label(format!(
                    "the first is at line {}",
                    spans.line_of(first.header.start)
                ))
                .with_help("an experiment keeps its state in one place: keep one `backend` block"),
        );
    }
    Some(first)
}

/// Evaluate the block's literal values; an attribute that refers to anything is reported and
/// not evaluated.
fn evaluate(
    block: &RawBlock,
    spans: &Spans,
    env: &dyn Fn(&str) -> Option<String>,
    base_dir: &Path,
    diags: &mut Vec<Diagnostic>,
) -> EvalBlock {
    let mut skipped = Vec::new();
    for attr in &block.attrs {
        let found = refs::collect(&attr.expr, spans);
        for r in &found {
            diags_push_reference(r, diags);
        }
        if !found.is_empty() {
            skipped.push(attr.value_span.start);
        }
    }
    let mut evaluator = Evaluator::new(env, base_dir.to_path_buf(), spans);
    let skip = |attr: &RawAttr| skipped.contains(&attr.value_span.start);
    evaluator.block(block, &Scope::default(), false, &skip, diags)
}

/// The backend's settings, each checked by its [`Rule`]; `None` when a required one is missing.
fn read_config(block: &EvalBlock, diags: &mut Vec<Diagnostic>) -> Option<BackendConfig> {
    let mut f = Fields::new(block, diags);
    let account = f.required_string("account", "\"expstate01\"");
    let container = f.required_string("container", "\"tfstate\"");
    let key = f.required_string("key", "\"cosmoflow.dsinfra.json\"");
    let endpoint = f.string("endpoint");
    let sas_env = f.string("sas_env");
    for (value, rule) in [
        (&account, &ACCOUNT),
        (&container, &CONTAINER),
        (&key, &KEY),
        (&endpoint, &ENDPOINT),
        (&sas_env, &SAS_ENV),
    ] {
        if let Some(value) = value {
            rule.apply(value, &mut f);
        }
    }
    Some(BackendConfig {
        account: account?.value,
        container: container?.value,
        key: key?.value,
        endpoint: endpoint.map(|e| e.value.trim_end_matches('/').to_owned()),
        sas_env: sas_env.map(|s| s.value),
    })
}

/// How one text setting of the backend block is checked, and the error when it fails.
struct Rule {
    /// Why a value is not allowed, if it is not (the error's label).
    check: fn(&str) -> Result<(), String>,
    /// The error's summary, given the value.
    summary: fn(&str) -> String,
    /// What to write instead.
    help: &'static str,
}

impl Rule {
    fn apply(&self, value: &Located<String>, f: &mut Fields<'_>) {
        if let Err(why) = (self.check)(&value.value) {
            f.report(
                Diagnostic::error((self.summary)(&value.value))
                    .with_span(value.span.clone())
                    .with_label(why)
                    .with_help(self.help),
            );
        }
    }
}

static ACCOUNT: Rule = Rule {
    check: |v| names::check(ResourceKind::StorageAccount, v),
    summary: |v| format!("invalid storage account name `{v}`"),
    help: "storage account names are 3-24 lowercase letters and digits",
};
static CONTAINER: Rule = Rule {
    check: |v| names::check(ResourceKind::BlobContainer, v),
    summary: |v| format!("invalid container name `{v}`"),
    help: "container names are 3-63 lowercase letters, digits and `-`",
};
static KEY: Rule = Rule {
    check: check_blob_name,
    summary: |v| format!("invalid blob name `{v}`"),
    help: "e.g. \"cosmoflow.dsinfra.json\" or \"team/cosmoflow.json\"",
};
static ENDPOINT: Rule = Rule {
    check: check_endpoint,
    summary: |_| "`endpoint` must be a blob service URL".to_owned(),
    help: "e.g. \"https://ACCOUNT.blob.core.windows.net\" or Azurite's \"http://127.0.0.1:10000/devstoreaccount1\"; leave it out for the account's public endpoint",
};
static SAS_ENV: Rule = Rule {
    check: |v| {
        if is_env_name(v) {
            Ok(())
        } else {
            Err("not a variable name".to_owned())
        }
    },
    summary: |v| format!("invalid environment variable name `{v}`"),
    help: "`sas_env` names the environment variable that holds the SAS, e.g. \"DSINFRA_STATE_SAS\"; never write the SAS itself in the manifest",
};

fn diags_push_reference(r: &refs::Reference, diags: &mut Vec<Diagnostic>) {
    diags.push(
        Diagnostic::error("the `backend` block cannot refer to other values")
            .with_span(r.span.clone())
            .with_label("a reference")
            .with_help("the state is located before anything else is evaluated: write the value itself (`env(\"NAME\")` is allowed)"),
    );
}

fn check_type(block: &RawBlock, diags: &mut Vec<Diagnostic>) {
    match block.labels.as_slice() {
        [(label, _)] if label == AZUREBLOB => {}
        [(label, span)] => {
            let d = Diagnostic::error(format!("unknown backend type \"{label}\""))
                .with_span(span.clone())
                .with_label("not a backend dsinfra knows");
            diags.push(match did_you_mean(label, [AZUREBLOB]) {
                Some(s) => d.with_help(format!("did you mean \"{s}\"?")),
                None => d.with_help(
                    "dsinfra keeps remote state in Azure Blob Storage only: write `backend \"azureblob\" { ... }`",
                ),
            });
        }
        _ => diags.push(
            Diagnostic::error("`backend` block needs exactly one type")
                .with_span(block.header.clone())
                .with_help("write `backend \"azureblob\" { ... }`"),
        ),
    }
}

/// Azure's blob naming rules: 1 to 1024 characters, at most 254 path segments, and no name
/// ending with `.` or `/` (the service would silently strip them), no control characters.
fn check_blob_name(name: &str) -> Result<(), String> {
    let len = name.chars().count();
    if len == 0 || len > 1024 {
        return Err(format!("it is {len} characters; Azure allows 1 to 1024"));
    }
    if name.split('/').count() > 254 {
        return Err("it has more than 254 `/`-separated segments".to_owned());
    }
    if name.ends_with('.') || name.ends_with('/') {
        return Err("it may not end with `.` or `/`".to_owned());
    }
    if name.chars().any(|c| c.is_control() || c == '\\') {
        return Err("control characters and `\\` are not allowed".to_owned());
    }
    Ok(())
}

fn check_endpoint(endpoint: &str) -> Result<(), String> {
    let Some(rest) = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
    else {
        return Err("not an http(s) URL".to_owned());
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err("no host".to_owned());
    }
    if endpoint.contains('?') || endpoint.contains('#') {
        return Err(
            "a query string is not allowed (a SAS goes in the variable `sas_env` names)".to_owned(),
        );
    }
    Ok(())
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Reads only the backend block of the manifest at `path`: what `state pull|push` and
/// `force-unlock` need, without resolving variables or evaluating resources. `Ok(None)` when
/// the manifest keeps its state locally.
pub fn load_backend(path: &Path) -> Result<Option<BackendConfig>, LoadFailed> {
    let text = std::fs::read_to_string(path).map_err(|err| LoadFailed {
        diagnostics: vec![
            Diagnostic::error(format!("cannot read manifest `{}`", path.display()))
                .with_help(format!("{err}; check the path")),
        ],
        sources: SourceMap::new(),
    })?;
    let mut sources = SourceMap::new();
    let file = sources.add(path, text.as_str());
    let spans = Spans::new(Arc::clone(&file), Arc::from(text.as_str()));
    let root = match parse::parse(&spans, &text) {
        Ok(root) => root,
        Err(d) => {
            return Err(LoadFailed {
                diagnostics: vec![d],
                sources,
            });
        }
    };
    let base_dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut diags = Vec::new();
    let env = |name: &str| std::env::var(name).ok();
    let backend = from_root(&root, &spans, &env, &base_dir, &mut diags);
    if diags.iter().any(Diagnostic::is_error) {
        return Err(LoadFailed {
            diagnostics: diags,
            sources,
        });
    }
    Ok(backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_names_follow_the_azure_rules() {
        assert_eq!(check_blob_name("exp/cosmoflow.dsinfra.json"), Ok(()));
        assert_eq!(
            check_blob_name(""),
            Err("it is 0 characters; Azure allows 1 to 1024".to_owned())
        );
        assert_eq!(
            check_blob_name("state."),
            Err("it may not end with `.` or `/`".to_owned())
        );
        assert_eq!(
            check_blob_name(&format!("{}z", "a/".repeat(254))),
            Err("it has more than 254 `/`-separated segments".to_owned())
        );
    }

    #[test]
    fn endpoints_and_variable_names_are_checked() {
        assert_eq!(
            check_endpoint("http://127.0.0.1:10000/devstoreaccount1"),
            Ok(())
        );
        assert_eq!(
            check_endpoint("acct.blob.core.windows.net"),
            Err("not an http(s) URL".to_owned())
        );
        assert!(check_endpoint("https://a.blob.core.windows.net/?sv=1").is_err());
        assert!(is_env_name("DSINFRA_STATE_SAS"));
        assert!(!is_env_name("sv=2026&sig=x"));
    }

    #[test]
    fn the_backend_alone_loads_without_the_rest_of_the_manifest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("exp.hcl");
        std::fs::write(
            &path,
            "azure { location = var.where }\nbackend \"azureblob\" {\n  account = \"expstate01\"\n  container = \"tfstate\"\n  key = \"exp.json\"\n}\n",
        )
        .expect("written");
        assert_eq!(
            load_backend(&path).expect("loads"),
            Some(BackendConfig {
                account: "expstate01".to_owned(),
                container: "tfstate".to_owned(),
                key: "exp.json".to_owned(),
                endpoint: None,
                sas_env: None,
            })
        );
        std::fs::write(&path, "azure { location = \"eastus\" }\n").expect("written");
        assert_eq!(load_backend(&path).expect("loads"), None);
    }

    #[test]
    fn a_full_load_carries_the_backend() {
        let text = "azure { location = \"eastus\" }\nbackend \"azureblob\" {\n  account = \"devstoreaccount1\"\n  container = \"tfstate\"\n  key = \"team/exp.json\"\n  endpoint = \"http://127.0.0.1:10000/devstoreaccount1/\"\n  sas_env = env(\"SAS_VAR_NAME\")\n}\n";
        let opts = super::super::LoadOptions {
            env: Box::new(|name| (name == "SAS_VAR_NAME").then(|| "DSINFRA_STATE_SAS".to_owned())),
            ..super::super::LoadOptions::default()
        };
        let loaded = super::super::load_str(Path::new("exp.hcl"), text, &opts).expect("loads");
        let backend = loaded.backend.expect("a backend");
        assert_eq!(
            backend.endpoint.as_deref(),
            Some("http://127.0.0.1:10000/devstoreaccount1")
        );
        assert_eq!(backend.sas_env.as_deref(), Some("DSINFRA_STATE_SAS"));
        assert_eq!(
            backend.blob_endpoint(),
            "http://127.0.0.1:10000/devstoreaccount1"
        );
        let public = BackendConfig {
            endpoint: None,
            ..backend
        };
        assert_eq!(
            public.blob_endpoint(),
            "https://devstoreaccount1.blob.core.windows.net"
        );
    }
}
