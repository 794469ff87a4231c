//! Evaluation of expressions with hcl-rs, located at the attribute they came from.
//!
//! `hcl::eval` knows nothing about spans, so each attribute is evaluated on its own and an error
//! is reported at that attribute's value. `env()` and `file()` need the environment and the
//! manifest's directory, which hcl-rs's `fn`-pointer functions cannot capture, so they are resolved
//! first: a pass over the hcl-edit tree evaluates their arguments, calls them and puts the result
//! in place as a string literal (located errors point at the call itself).
//!
//! Error messages never quote values: a `file()` may have read something secret by mistake (a
//! private key), and an evaluation error must not print it.

use std::path::{Path, PathBuf};

use hcl::eval::{Context, ErrorKind, Evaluate};
use hcl_edit::Span as _;
use hcl_edit::expr::Expression;
use hcl_edit::visit_mut::{self, VisitMut};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::diag::{Diagnostic, Span, did_you_mean};

use super::functions;
use super::parse::{RawAttr, RawBlock, Spans};

/// Everything references can see: variables, locals and the blocks evaluated so far.
#[derive(Debug, Default, Clone)]
pub(super) struct Scope {
    /// `var.*`
    pub vars: serde_json::Map<String, Json>,
    /// `local.*`
    pub locals: serde_json::Map<String, Json>,
    /// `vm.*`, `storage_account.*`, ...: the values blocks expose (see `values.rs`).
    pub blocks: serde_json::Map<String, Json>,
}

impl Scope {
    fn context(&self) -> Context<'static> {
        let mut ctx = Context::new();
        functions::declare(&mut ctx);
        ctx.declare_var("var", to_hcl(&Json::Object(self.vars.clone())));
        ctx.declare_var("local", to_hcl(&Json::Object(self.locals.clone())));
        for (kind, value) in &self.blocks {
            ctx.declare_var(kind.as_str(), to_hcl(value));
        }
        ctx
    }

    /// Record the value a block exposes (`vm.gpu` -> {...}).
    pub fn set_block(&mut self, kind: &str, name: &str, value: Json) {
        let entry = self
            .blocks
            .entry(kind.to_owned())
            .or_insert_with(|| Json::Object(serde_json::Map::new()));
        if let Json::Object(map) = entry {
            map.insert(name.to_owned(), value);
        }
    }
}

fn to_hcl(value: &Json) -> hcl::Value {
    // A serde_json value always serialises into an HCL value: they have the same data model.
    hcl::to_value(value).unwrap_or(hcl::Value::Null)
}

fn to_json(value: &hcl::Value) -> Json {
    serde_json::to_value(value).unwrap_or(Json::Null)
}

/// One evaluated attribute. `value` is `None` when evaluation failed (already reported), so later
/// checks skip it instead of reporting follow-on errors.
#[derive(Debug, Clone)]
pub(super) struct EvalAttr {
    /// Attribute key.
    pub name: String,
    /// The value, or `None` if it could not be evaluated.
    pub value: Option<Json>,
    /// Where the key is.
    pub key_span: Span,
    /// Where the value is.
    pub value_span: Span,
}

/// A block with every attribute evaluated, nested blocks included.
#[derive(Debug, Clone)]
pub(super) struct EvalBlock {
    /// Block type.
    pub ident: String,
    /// Labels with spans.
    pub labels: Vec<(String, Span)>,
    /// Header span.
    pub header: Span,
    /// Attributes in source order.
    pub attrs: Vec<EvalAttr>,
    /// Nested blocks in source order.
    pub blocks: Vec<EvalBlock>,
}

impl EvalBlock {
    /// The first label (the block's name), or "".
    pub fn label(&self) -> &str {
        self.labels.first().map_or("", |(l, _)| l.as_str())
    }

    /// Span of the first label, or the header.
    pub fn label_span(&self) -> Span {
        self.labels
            .first()
            .map_or_else(|| self.header.clone(), |(_, s)| s.clone())
    }

    /// How the block reads in messages: `vm "gpu"`.
    pub fn title(&self) -> String {
        let mut out = self.ident.clone();
        for (label, _) in &self.labels {
            out.push_str(" \"");
            out.push_str(label);
            out.push('"');
        }
        out
    }

    /// The attribute called `name`, if written.
    pub fn attr(&self, name: &str) -> Option<&EvalAttr> {
        self.attrs.iter().find(|a| a.name == name)
    }

    /// The first nested block of a type.
    pub fn block(&self, ident: &str) -> Option<&EvalBlock> {
        self.blocks.iter().find(|b| b.ident == ident)
    }

    /// Nested blocks of one type.
    pub fn blocks_of<'a>(&'a self, ident: &'a str) -> impl Iterator<Item = &'a EvalBlock> + 'a {
        self.blocks.iter().filter(move |b| b.ident == ident)
    }
}

/// A file read by `file()`: the digest of its contents, for the manifest hash.
#[derive(Debug, Clone)]
pub(super) struct FileRead {
    /// SHA-256 of the contents (the path is not kept: see `manifest_hash`).
    pub digest: [u8; 32],
}

/// Evaluates expressions against a scope, resolving `env()` and `file()` on the way.
pub(super) struct Evaluator<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    base_dir: PathBuf,
    spans: &'a Spans,
    /// Files read by `file()`, in the order read.
    pub files: Vec<FileRead>,
}

impl<'a> Evaluator<'a> {
    /// An evaluator for a manifest in `base_dir`.
    pub fn new(
        env: &'a dyn Fn(&str) -> Option<String>,
        base_dir: PathBuf,
        spans: &'a Spans,
    ) -> Self {
        Self {
            env,
            base_dir,
            spans,
            files: Vec::new(),
        }
    }

    /// Evaluate one attribute; on failure report at its value and return `None`.
    pub fn attr(
        &mut self,
        attr: &RawAttr,
        scope: &Scope,
        quiet: bool,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<Json> {
        self.expr(
            &attr.expr,
            &attr.value_span,
            &attr.name,
            scope,
            quiet,
            diags,
        )
    }

    /// Evaluate an expression written at `span` for attribute `name`.
    pub fn expr(
        &mut self,
        expr: &Expression,
        span: &Span,
        name: &str,
        scope: &Scope,
        quiet: bool,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<Json> {
        let ctx = scope.context();
        let mut expr = expr.clone();
        let mut resolver = Resolver {
            eval: self,
            ctx: &ctx,
            diags: Vec::new(),
        };
        resolver.visit_expr_mut(&mut expr);
        let found = resolver.diags;
        if !found.is_empty() {
            if !quiet {
                diags.extend(found);
            }
            return None;
        }
        let hcl_expr: hcl::Expression = expr.into();
        match hcl_expr.evaluate(&ctx) {
            Ok(value) => Some(to_json(&value)),
            Err(err) => {
                if !quiet {
                    diags.push(eval_error(err.kind(), span, name));
                }
                None
            }
        }
    }

    /// Evaluate every attribute of a block and its nested blocks.
    pub fn block(
        &mut self,
        raw: &RawBlock,
        scope: &Scope,
        quiet: bool,
        skip: &dyn Fn(&RawAttr) -> bool,
        diags: &mut Vec<Diagnostic>,
    ) -> EvalBlock {
        let attrs = raw
            .attrs
            .iter()
            .map(|a| EvalAttr {
                name: a.name.clone(),
                value: if skip(a) {
                    None
                } else {
                    self.attr(a, scope, quiet, diags)
                },
                key_span: a.key_span.clone(),
                value_span: a.value_span.clone(),
            })
            .collect();
        let blocks = raw
            .blocks
            .iter()
            .map(|b| self.block(b, scope, quiet, skip, diags))
            .collect();
        EvalBlock {
            ident: raw.ident.clone(),
            labels: raw.labels.clone(),
            header: raw.header.clone(),
            attrs,
            blocks,
        }
    }

    fn call_env(&self, args: &[String]) -> Result<String, String> {
        let name = &args[0];
        match ((self.env)(name), args.get(1)) {
            (Some(value), _) => Ok(value),
            (None, Some(default)) => Ok(default.clone()),
            (None, None) => Err(format!(
                "environment variable `{name}` is not set; set it, or give a default: env(\"{name}\", \"...\")"
            )),
        }
    }

    fn call_file(&mut self, args: &[String]) -> Result<String, String> {
        let written = &args[0];
        let path = self.resolve_path(written);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let digest: [u8; 32] = Sha256::digest(&bytes).into();
                self.files.push(FileRead { digest });
                String::from_utf8(bytes).map_err(|_| format!("`{written}` is not UTF-8 text"))
            }
            Err(err) => {
                let why = match err.kind() {
                    std::io::ErrorKind::NotFound => "no such file".to_owned(),
                    std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
                    _ => err.to_string(),
                };
                Err(format!(
                    "cannot read `{written}` ({}): {why}",
                    path.display()
                ))
            }
        }
    }

    /// `~` is the home directory (from the injectable environment); relative paths are relative
    /// to the manifest's directory, so a manifest reads the same files from any working directory.
    pub fn resolve_path(&self, written: &str) -> PathBuf {
        if (written == "~" || written.starts_with("~/"))
            && let Some(home) = (self.env)("HOME").or_else(|| (self.env)("USERPROFILE"))
        {
            return Path::new(&home).join(written.trim_start_matches('~').trim_start_matches('/'));
        }
        let path = Path::new(written);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.base_dir.join(path)
        }
    }
}

/// Resolves `env()` and `file()` calls in place (see the module docs).
struct Resolver<'e, 'a, 'c> {
    eval: &'e mut Evaluator<'a>,
    ctx: &'e Context<'c>,
    diags: Vec<Diagnostic>,
}

impl VisitMut for Resolver<'_, '_, '_> {
    fn visit_expr_mut(&mut self, expr: &mut Expression) {
        let name = match expr {
            Expression::FuncCall(call) if !call.name.is_namespaced() => {
                call.name.name.as_str().to_owned()
            }
            _ => String::new(),
        };
        if name != "env" && name != "file" {
            let whole = expr.span();
            if let Expression::FuncCall(call) = expr {
                let known = functions::NAMES.contains(&call.name.name.as_str());
                if !known {
                    let span = self.eval.spans.of(call.name.name.span().or(whole));
                    let name = call.name.name.as_str();
                    let d = Diagnostic::error(format!("unknown function `{name}`"))
                        .with_span(span)
                        .with_label("not a function dsinfra knows");
                    self.diags.push(match did_you_mean(name, functions::NAMES) {
                        Some(s) => d.with_help(format!("did you mean `{s}`?")),
                        None => d.with_help(format!(
                            "available functions: {}",
                            functions::NAMES.join(", ")
                        )),
                    });
                    return;
                }
            }
            visit_mut::visit_expr_mut(self, expr);
            return;
        }
        let span = self.eval.spans.of(expr.span());
        let Expression::FuncCall(call) = expr else {
            return;
        };
        visit_mut::visit_func_call_mut(self, call);
        if !self.diags.is_empty() {
            return;
        }
        let (min, max) = if name == "env" { (1, 2) } else { (1, 1) };
        let args: Vec<&Expression> = call.args.iter().collect();
        if args.len() < min || args.len() > max {
            self.diags.push(
                Diagnostic::error(format!("wrong number of arguments to `{name}()`"))
                    .with_span(span)
                    .with_help(if name == "env" {
                        "write env(\"NAME\") or env(\"NAME\", \"default\")"
                    } else {
                        "write file(\"path\")"
                    }),
            );
            return;
        }
        let mut values = Vec::new();
        for arg in args {
            let hcl_expr: hcl::Expression = arg.clone().into();
            match hcl_expr.evaluate(self.ctx) {
                Ok(hcl::Value::String(s)) => values.push(s),
                Ok(_) => {
                    self.diags.push(
                        Diagnostic::error(format!("`{name}()` takes text arguments"))
                            .with_span(span)
                            .with_help("quote the argument"),
                    );
                    return;
                }
                Err(err) => {
                    self.diags.push(eval_error(err.kind(), &span, &name));
                    return;
                }
            }
        }
        let result = if name == "env" {
            self.eval.call_env(&values)
        } else {
            self.eval.call_file(&values)
        };
        match result {
            Ok(text) => *expr = Expression::from(text),
            Err(why) => self.diags.push(
                Diagnostic::error(format!("`{name}()` failed"))
                    .with_span(span)
                    .with_label(why),
            ),
        }
    }
}

/// An hcl-rs evaluation error as a located diagnostic, without quoting any value.
fn eval_error(kind: &ErrorKind, span: &Span, name: &str) -> Diagnostic {
    let (summary, help): (String, &str) = match kind {
        ErrorKind::UndefinedVar(var) => (
            format!("unknown name `{var}`"),
            "references start with `var.`, `local.` or a block kind",
        ),
        ErrorKind::UndefinedFunc(f) => (
            format!("unknown function `{f}`"),
            "see docs/manifest.md for the functions",
        ),
        ErrorKind::Unexpected(value, expected) => (
            format!("expected {expected}, found {}", type_name_hcl(value)),
            "check the types of the values in this expression",
        ),
        ErrorKind::Index(i) => (
            format!("index {i} is out of range"),
            "lists are indexed from 0",
        ),
        ErrorKind::NoSuchKey(key) => (format!("no key `{key}`"), "check the name of the key"),
        ErrorKind::KeyExists(key) => (
            format!("key `{key}` appears twice"),
            "each key may appear once",
        ),
        ErrorKind::UnaryOp(op, value) => (
            format!("`{op}` cannot be applied to {}", type_name_hcl(value)),
            "check the types of the values in this expression",
        ),
        ErrorKind::BinaryOp(lhs, op, rhs) => (
            format!(
                "`{op}` cannot be applied to {} and {}",
                type_name_hcl(lhs),
                type_name_hcl(rhs)
            ),
            "check the types of the values in this expression",
        ),
        ErrorKind::FuncCall(f, msg) => (
            format!("`{f}()` failed: {msg}"),
            "see docs/manifest.md for the functions",
        ),
        ErrorKind::Message(msg) => (msg.clone(), "check this expression"),
        _ => (
            "cannot evaluate this expression".to_owned(),
            "check this expression",
        ),
    };
    Diagnostic::error(format!("cannot evaluate `{name}`: {summary}"))
        .with_span(span.clone())
        .with_help(help)
}

fn type_name_hcl(value: &hcl::Value) -> &'static str {
    match value {
        hcl::Value::Null => "null",
        hcl::Value::Bool(_) => "a bool",
        hcl::Value::Number(_) => "a number",
        hcl::Value::String(_) => "a string",
        hcl::Value::Array(_) => "a list",
        hcl::Value::Object(_) => "an object",
    }
}

/// A JSON value's type, as messages name it.
pub(super) fn type_name(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a bool",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn eval_with(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
        dir: &Path,
    ) -> (Option<Json>, Vec<Diagnostic>) {
        let spans = Spans::new(Arc::from(Path::new("t.hcl")), Arc::from(text));
        let expr = hcl_edit::parser::parse_expr(text).expect("parses");
        let mut evaluator = Evaluator::new(env, dir.to_path_buf(), &spans);
        let mut scope = Scope::default();
        scope.vars.insert("n".into(), Json::from(3));
        let span = spans.at(0..text.len());
        let mut diags = Vec::new();
        let value = evaluator.expr(&expr, &span, "x", &scope, false, &mut diags);
        (value, diags)
    }

    fn eval(text: &str) -> (Option<Json>, Vec<Diagnostic>) {
        let env = |name: &str| (name == "USER").then(|| "ada".to_owned());
        eval_with(text, &env, Path::new("/nonexistent"))
    }

    #[test]
    fn interpolates_and_resolves_env() {
        assert_eq!(
            eval("\"${env(\"USER\")}-${var.n}\"").0,
            Some(Json::from("ada-3"))
        );
        assert_eq!(eval("env(\"NOPE\", \"dflt\")").0, Some(Json::from("dflt")));
        let (value, diags) = eval("env(\"NOPE\")");
        assert!(value.is_none());
        assert_eq!(diags[0].summary, "`env()` failed");
        assert_eq!(
            diags[0].label.as_deref(),
            Some(
                "environment variable `NOPE` is not set; set it, or give a default: env(\"NOPE\", \"...\")"
            )
        );
    }

    #[test]
    fn reads_files_relative_to_the_manifest_and_home() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("k.pub"), "ssh-ed25519 AAAA x\n").expect("write");
        let home = dir.path().to_string_lossy().into_owned();
        let env = move |name: &str| (name == "HOME").then(|| home.clone());
        let (value, _) = eval_with("file(\"k.pub\")", &env, dir.path());
        assert_eq!(value, Some(Json::from("ssh-ed25519 AAAA x\n")));
        let (value, _) = eval_with("file(\"~/k.pub\")", &env, Path::new("/elsewhere"));
        assert_eq!(value, Some(Json::from("ssh-ed25519 AAAA x\n")));
        let (_, diags) = eval_with("file(\"missing.pub\")", &env, dir.path());
        assert!(
            diags[0]
                .label
                .as_deref()
                .is_some_and(|l| l.ends_with("no such file"))
        );
    }

    #[test]
    fn errors_name_types_not_values() {
        let (_, diags) = eval("\"secret\" + 1");
        assert_eq!(diags.len(), 1);
        assert!(!diags[0].summary.contains("secret"), "{}", diags[0].summary);
        let (_, diags) = eval("lowr(\"x\")");
        assert_eq!(diags[0].summary, "unknown function `lowr`");
        assert_eq!(diags[0].help, ["did you mean `lower`?"]);
    }
}
