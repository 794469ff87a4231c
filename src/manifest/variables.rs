//! Input variables: declarations, values from `-var`, var files and defaults, types, validation.
//!
//! Precedence follows Terraform, which users already know: a declaration's `default` is
//! overridden by var files (in the order given), which are overridden by `-var` (later wins).
//! Every problem is reported: undeclared names (with "did you mean"), values of the wrong type,
//! missing required values (located at the declaration), and failed `validation` rules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hcl_edit::expr::Expression;
use serde_json::Value as Json;

use crate::diag::{Diagnostic, SourceMap, Span, did_you_mean};

use super::eval::{Evaluator, Scope, type_name};
use super::parse::{self, RawAttr, RawBlock, Spans};
use super::refs::{self, Allowed, Known};

/// A variable's declared type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum VarType {
    /// `any` (or no `type`).
    Any,
    /// `string`
    String,
    /// `number`
    Number,
    /// `bool`
    Bool,
    /// `list(T)` or `set(T)`
    List(Box<VarType>),
    /// `map(T)`
    Map(Box<VarType>),
}

impl VarType {
    fn describe(&self) -> String {
        match self {
            Self::Any => "any value".to_owned(),
            Self::String => "text".to_owned(),
            Self::Number => "a number".to_owned(),
            Self::Bool => "true or false".to_owned(),
            Self::List(t) => format!("a list of {}", t.describe()),
            Self::Map(t) => format!("a map of {}", t.describe()),
        }
    }
}

/// Parse a type expression (`string`, `list(string)`, ...).
pub(super) fn parse_type(expr: &Expression) -> Option<VarType> {
    match expr {
        Expression::Variable(name) => match name.as_str() {
            "any" => Some(VarType::Any),
            "string" => Some(VarType::String),
            "number" => Some(VarType::Number),
            "bool" => Some(VarType::Bool),
            _ => None,
        },
        Expression::FuncCall(call) if call.args.len() == 1 => {
            let inner = parse_type(call.args.iter().next()?)?;
            match call.name.name.as_str() {
                "list" | "set" => Some(VarType::List(Box::new(inner))),
                "map" => Some(VarType::Map(Box::new(inner))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Convert a value to a type the way HCL does (numbers and bools from their text forms).
pub(super) fn convert(value: &Json, ty: &VarType) -> Option<Json> {
    match (ty, value) {
        (VarType::Any, _)
        | (VarType::String, Json::String(_))
        | (VarType::Number, Json::Number(_))
        | (VarType::Bool, Json::Bool(_)) => Some(value.clone()),
        (VarType::String, Json::Number(n)) => Some(Json::String(n.to_string())),
        (VarType::String, Json::Bool(b)) => Some(Json::String(b.to_string())),
        (VarType::Number, Json::String(s)) => {
            let trimmed = s.trim();
            trimmed
                .parse::<i64>()
                .map(Json::from)
                .ok()
                .or_else(|| trimmed.parse::<f64>().ok().map(Json::from))
        }
        (VarType::Bool, Json::String(s)) => match s.as_str() {
            "true" => Some(Json::Bool(true)),
            "false" => Some(Json::Bool(false)),
            _ => None,
        },
        (VarType::List(inner), Json::Array(items)) => items
            .iter()
            .map(|i| convert(i, inner))
            .collect::<Option<Vec<_>>>()
            .map(Json::Array),
        (VarType::Map(inner), Json::Object(map)) => map
            .iter()
            .map(|(k, v)| convert(v, inner).map(|v| (k.clone(), v)))
            .collect::<Option<serde_json::Map<_, _>>>()
            .map(Json::Object),
        _ => None,
    }
}

/// Where a variable's value came from, for messages.
#[derive(Debug, Clone)]
enum Origin {
    Default(Span),
    VarFile(Span),
    Flag,
}

struct Declared<'a> {
    block: &'a RawBlock,
    ty: VarType,
}

/// The resolved variables.
#[derive(Debug, Default)]
pub(super) struct Variables {
    /// Declared variable names.
    pub declared: BTreeSet<String>,
    /// Each variable's value (missing when it has none or it was invalid).
    pub values: BTreeMap<String, Json>,
    /// Texts of the var files read, for the manifest hash.
    pub file_texts: Vec<String>,
}

/// The values given on the command line, each in the order given.
pub(super) struct Given<'a> {
    /// `-var name=value` (later wins).
    pub flags: &'a [(String, String)],
    /// `-var-file` paths (later wins).
    pub files: &'a [PathBuf],
}

/// What evaluating a default or a var file needs: the manifest's spans (defaults and validation
/// rules are written there), the environment for `env()`, and where relative paths start.
pub(super) struct Context<'a> {
    /// Environment lookup for `env()`.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Spans into the manifest.
    pub spans: &'a Spans,
    /// The manifest's directory.
    pub base_dir: &'a Path,
}

/// Resolve every declared variable's value and check it.
///
/// Resolution runs in precedence order (defaults, then var files, then flags, each overriding
/// what came before), then converts each value to its declared type and runs the `validation`
/// rules.
pub(super) fn resolve(
    declarations: &[RawBlock],
    given: &Given<'_>,
    ctx: &Context<'_>,
    sources: &mut SourceMap,
    diags: &mut Vec<Diagnostic>,
) -> Variables {
    let mut resolver = Resolver {
        ctx,
        evaluator: Evaluator::new(ctx.env, ctx.base_dir.to_path_buf(), ctx.spans),
        declared: BTreeMap::new(),
        values: BTreeMap::new(),
        out: Variables::default(),
        diags,
    };
    for block in declarations {
        resolver.declare(block);
    }
    for path in given.files {
        resolver.read_var_file(path, sources);
    }
    for (name, raw) in given.flags {
        resolver.flag(name, raw);
    }
    resolver.convert();
    resolver.check_validations();
    resolver.out
}

/// A resolution in progress: the declarations, the value found so far for each variable with
/// where it came from, and the result.
struct Resolver<'a, 'd> {
    ctx: &'a Context<'a>,
    /// Evaluates expressions written in the manifest (defaults, validation rules).
    evaluator: Evaluator<'a>,
    declared: BTreeMap<String, Declared<'a>>,
    values: BTreeMap<String, (Json, Origin)>,
    out: Variables,
    diags: &'d mut Vec<Diagnostic>,
}

impl<'a> Resolver<'a, '_> {
    /// Read a `variable` block: its type, and its default (a constant) as the first value.
    fn declare(&mut self, block: &'a RawBlock) {
        let name = block.label().to_owned();
        let ty = match block.attr("type") {
            None => VarType::Any,
            Some(attr) => parse_type(&attr.expr).unwrap_or_else(|| {
                self.diags.push(
                    Diagnostic::error(format!("unknown type for variable `{name}`"))
                        .with_span(attr.value_span.clone())
                        .with_help(
                            "use string, number, bool, any, list(TYPE), set(TYPE) or map(TYPE)",
                        ),
                );
                VarType::Any
            }),
        };
        if let Some(default) = block.attr("default") {
            let nothing = BTreeSet::new();
            let no_blocks = BTreeMap::new();
            let known = Known {
                variables: &nothing,
                locals: &nothing,
                blocks: &no_blocks,
            };
            let found = refs::collect(&default.expr, self.ctx.spans);
            if refs::check(&found, &known, Allowed::Nothing, "a default", self.diags)
                && let Some(v) = self
                    .evaluator
                    .attr(default, &Scope::default(), false, self.diags)
                && !v.is_null()
            {
                self.values.insert(
                    name.clone(),
                    (v, Origin::Default(default.value_span.clone())),
                );
            }
        }
        self.out.declared.insert(name.clone());
        self.declared.insert(name, Declared { block, ty });
    }

    /// Read a `-var-file`: `name = constant` lines, each overriding what came before.
    fn read_var_file(&mut self, path: &Path, sources: &mut SourceMap) {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) => {
                self.diags.push(
                    Diagnostic::error(format!("cannot read var file `{}`", path.display()))
                        .with_help(format!("{err}; check the -var-file path")),
                );
                return;
            }
        };
        let text: Arc<str> = Arc::from(text);
        self.out.file_texts.push(text.to_string());
        let file = sources.add(path.to_path_buf(), Arc::clone(&text));
        let spans = Spans::new(file, Arc::clone(&text));
        let root = match parse::parse(&spans, &text) {
            Ok(root) => root,
            Err(d) => {
                self.diags.push(d);
                return;
            }
        };
        for block in &root.blocks {
            self.diags.push(
                Diagnostic::error("a var file holds only `name = value` lines")
                    .with_span(block.header.clone())
                    .with_help("move blocks into the manifest"),
            );
        }
        let mut evaluator = Evaluator::new(self.ctx.env, self.ctx.base_dir.to_path_buf(), &spans);
        for attr in &root.attrs {
            self.var_file_line(attr, &spans, &mut evaluator);
        }
    }

    /// One `name = value` line of a var file, whose spans are `spans`.
    fn var_file_line(&mut self, attr: &RawAttr, spans: &Spans, evaluator: &mut Evaluator<'_>) {
        if !self.declared.contains_key(&attr.name) {
            let d =
                Diagnostic::warning(format!("var file sets undeclared variable `{}`", attr.name))
                    .with_span(attr.key_span.clone())
                    .with_label("ignored");
            self.diags.push(
                match did_you_mean(&attr.name, self.declared.keys().map(String::as_str)) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(
                        "declare it in the manifest with a `variable` block, or remove it",
                    ),
                },
            );
            return;
        }
        let found = refs::collect(&attr.expr, spans);
        if !found.is_empty() {
            self.diags.push(
                Diagnostic::error("values in a var file must be constants")
                    .with_span(found[0].span.clone())
                    .with_help("write the value itself; references are not available here"),
            );
            return;
        }
        if let Some(v) = evaluator.attr(attr, &Scope::default(), false, self.diags) {
            self.values.insert(
                attr.name.clone(),
                (v, Origin::VarFile(attr.value_span.clone())),
            );
        }
    }

    /// One `-var name=value` flag.
    fn flag(&mut self, name: &str, raw: &str) {
        let Some(decl) = self.declared.get(name) else {
            let d = Diagnostic::error(format!(
                "-var {name}=...: no variable `{name}` is declared in the manifest"
            ));
            self.diags.push(
                match did_you_mean(name, self.declared.keys().map(String::as_str)) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(format!(
                        "declare it: variable \"{name}\" {{ type = string }}"
                    )),
                },
            );
            return;
        };
        // As in Terraform, -var text is taken literally for text variables and parsed as an HCL
        // expression (`4`, `true`, `["a"]`) for the others.
        let value = match decl.ty {
            VarType::String | VarType::Any => Json::String(raw.to_owned()),
            _ => parse::parse_expr(raw)
                .and_then(|e| {
                    let hcl_expr: hcl::Expression = e.into();
                    hcl::eval::Evaluate::evaluate(&hcl_expr, &hcl::eval::Context::new()).ok()
                })
                .and_then(|v| serde_json::to_value(v).ok())
                .unwrap_or_else(|| Json::String(raw.to_owned())),
        };
        self.values.insert(name.to_owned(), (value, Origin::Flag));
    }

    /// Give each variable its final value, converted to its type; report the missing and the
    /// ill-typed (where the value was written).
    fn convert(&mut self) {
        for (name, decl) in &self.declared {
            let Some((value, origin)) = self.values.remove(name) else {
                self.diags.push(
                    Diagnostic::error(format!("variable `{name}` has no value"))
                        .with_span(decl.block.label_span())
                        .with_label("required: it has no default")
                        .with_help(format!(
                            "pass -var {name}=VALUE, set it in a -var-file, or give it a `default`"
                        )),
                );
                continue;
            };
            let Some(converted) = convert(&value, &decl.ty) else {
                let d = Diagnostic::error(format!(
                    "variable `{name}` must be {}, found {}",
                    decl.ty.describe(),
                    type_name(&value)
                ));
                self.diags.push(match &origin {
                    Origin::Default(span) | Origin::VarFile(span) => d.with_span(span.clone()),
                    Origin::Flag => {
                        d.with_help(format!("check the value given with -var {name}=..."))
                    }
                });
                continue;
            };
            self.out.values.insert(name.clone(), converted);
        }
    }

    /// Run each variable's `validation` rules against its value (a variable without a value is
    /// already reported).
    fn check_validations(&mut self) {
        let mut scope = Scope::default();
        for (name, value) in &self.out.values {
            scope.vars.insert(name.clone(), value.clone());
        }
        let rules: Vec<(String, &'a RawBlock)> = self
            .declared
            .iter()
            .filter(|(name, _)| self.out.values.contains_key(*name))
            .flat_map(|(name, decl)| {
                decl.block
                    .blocks_of("validation")
                    .map(move |rule| (name.clone(), rule))
            })
            .collect();
        for (name, rule) in rules {
            self.check_rule(&name, rule, &scope);
        }
    }

    /// One `validation` rule of variable `name`; `scope` holds every variable's value.
    fn check_rule(&mut self, name: &str, rule: &RawBlock, scope: &Scope) {
        let diags = &mut *self.diags;
        let Some(condition) = rule.attr("condition") else {
            diags.push(
                Diagnostic::error(format!("validation of `{name}` has no `condition`"))
                    .with_span(rule.header.clone())
                    .with_help(format!(
                        "add `condition = length(var.{name}) > 0` or similar"
                    )),
            );
            return;
        };
        let nothing = BTreeSet::new();
        let no_blocks = BTreeMap::new();
        let known = Known {
            variables: &self.out.declared,
            locals: &nothing,
            blocks: &no_blocks,
        };
        let found = refs::collect(&condition.expr, self.ctx.spans);
        if !refs::check(
            &found,
            &known,
            Allowed::VariablesOnly,
            "a validation condition",
            diags,
        ) {
            return;
        }
        let evaluator = &mut self.evaluator;
        let message = rule
            .attr("error_message")
            .and_then(|m| evaluator.attr(m, scope, false, diags))
            .and_then(|m| m.as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("the value of `{name}` is not valid"));
        match evaluator.attr(condition, scope, false, diags) {
            Some(Json::Bool(true)) | None => {}
            Some(Json::Bool(false)) => diags.push(
                Diagnostic::error(format!("invalid value for variable `{name}`"))
                    .with_span(condition.value_span.clone())
                    .with_label(message)
                    .with_help(format!("pass a value that satisfies this rule with -var {name}=... or in a var file")),
            ),
            Some(other) => diags.push(
                Diagnostic::error(format!("validation `condition` of `{name}` must be true or false"))
                    .with_span(condition.value_span.clone())
                    .with_label(format!("this is {}", type_name(&other))),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(text: &str) -> Option<VarType> {
        parse_type(&hcl_edit::parser::parse_expr(text).expect("parses"))
    }

    #[test]
    fn parses_types() {
        assert_eq!(ty("string"), Some(VarType::String));
        assert_eq!(
            ty("list(string)"),
            Some(VarType::List(Box::new(VarType::String)))
        );
        assert_eq!(
            ty("map(number)"),
            Some(VarType::Map(Box::new(VarType::Number)))
        );
        assert_eq!(ty("tuple(string)"), None);
        assert_eq!(ty("strin"), None);
    }

    #[test]
    fn converts_like_hcl() {
        assert_eq!(
            convert(&Json::from("4"), &VarType::Number),
            Some(Json::from(4))
        );
        assert_eq!(
            convert(&Json::from("true"), &VarType::Bool),
            Some(Json::from(true))
        );
        assert_eq!(
            convert(&Json::from(4), &VarType::String),
            Some(Json::from("4"))
        );
        assert_eq!(convert(&Json::from("four"), &VarType::Number), None);
        assert_eq!(
            convert(
                &serde_json::json!(["a", 1]),
                &VarType::List(Box::new(VarType::String))
            ),
            Some(serde_json::json!(["a", "1"]))
        );
    }
}
