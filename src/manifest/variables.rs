//! Input variables: declarations, values from `-var`, var files and defaults, types, validation.
//!
//! Precedence follows Terraform, which users already know: a declaration's `default` is
//! overridden by var files (in the order given), which are overridden by `-var` (later wins).
//! Every problem is reported: undeclared names (with "did you mean"), values of the wrong type,
//! missing required values (located at the declaration), and failed `validation` rules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use hcl_edit::expr::Expression;
use serde_json::Value as Json;

use crate::diag::{Diagnostic, SourceMap, Span, did_you_mean};

use super::eval::{Evaluator, Scope, type_name};
use super::parse::{self, RawBlock, Spans};
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

/// Resolve every declared variable's value and check it.
// Resolution runs in precedence order (defaults, files, flags), then checks; splitting it would
// only pass the same maps around.
#[allow(clippy::too_many_lines, clippy::too_many_arguments)]
pub(super) fn resolve(
    declarations: &[RawBlock],
    flags: &[(String, String)],
    var_files: &[PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
    manifest_spans: &Spans,
    base_dir: &std::path::Path,
    sources: &mut SourceMap,
    diags: &mut Vec<Diagnostic>,
) -> Variables {
    let mut out = Variables::default();
    let mut declared: BTreeMap<String, Declared<'_>> = BTreeMap::new();
    let empty_known = BTreeSet::new();
    let empty_blocks = BTreeMap::new();
    let mut evaluator = Evaluator::new(env, base_dir.to_path_buf(), manifest_spans);
    let mut values: BTreeMap<String, (Json, Origin)> = BTreeMap::new();

    for block in declarations {
        let name = block.label().to_owned();
        let ty = match block.attr("type") {
            None => VarType::Any,
            Some(attr) => parse_type(&attr.expr).unwrap_or_else(|| {
                diags.push(
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
            let known = Known {
                variables: &empty_known,
                locals: &empty_known,
                blocks: &empty_blocks,
            };
            let found = refs::collect(&default.expr, manifest_spans);
            if refs::check(&found, &known, Allowed::Nothing, "a default", diags)
                && let Some(v) = evaluator.attr(default, &Scope::default(), false, diags)
                && !v.is_null()
            {
                values.insert(
                    name.clone(),
                    (v, Origin::Default(default.value_span.clone())),
                );
            }
        }
        out.declared.insert(name.clone());
        declared.insert(name, Declared { block, ty });
    }

    for path in var_files {
        read_var_file(
            path,
            &declared,
            env,
            base_dir,
            sources,
            &mut values,
            &mut out,
            diags,
        );
    }

    for (name, raw) in flags {
        let Some(decl) = declared.get(name) else {
            let mut d = Diagnostic::error(format!(
                "-var {name}=...: no variable `{name}` is declared in the manifest"
            ));
            d = match did_you_mean(name, declared.keys().map(String::as_str)) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(format!(
                    "declare it: variable \"{name}\" {{ type = string }}"
                )),
            };
            diags.push(d);
            continue;
        };
        // As in Terraform, -var text is taken literally for text variables and parsed as an HCL
        // expression (`4`, `true`, `["a"]`) for the others.
        let value = match decl.ty {
            VarType::String | VarType::Any => Json::String(raw.clone()),
            _ => parse::parse_expr(raw)
                .and_then(|e| {
                    let hcl_expr: hcl::Expression = e.into();
                    hcl::eval::Evaluate::evaluate(&hcl_expr, &hcl::eval::Context::new()).ok()
                })
                .and_then(|v| serde_json::to_value(v).ok())
                .unwrap_or_else(|| Json::String(raw.clone())),
        };
        values.insert(name.clone(), (value, Origin::Flag));
    }

    for (name, decl) in &declared {
        let Some((value, origin)) = values.remove(name) else {
            diags.push(
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
            diags.push(match &origin {
                Origin::Default(span) | Origin::VarFile(span) => d.with_span(span.clone()),
                Origin::Flag => d.with_help(format!("check the value given with -var {name}=...")),
            });
            continue;
        };
        out.values.insert(name.clone(), converted);
        let _ = origin;
    }

    check_validations(&declared, &out, manifest_spans, &mut evaluator, diags);
    out
}

#[allow(clippy::too_many_arguments)]
fn read_var_file(
    path: &PathBuf,
    declared: &BTreeMap<String, Declared<'_>>,
    env: &dyn Fn(&str) -> Option<String>,
    base_dir: &std::path::Path,
    sources: &mut SourceMap,
    values: &mut BTreeMap<String, (Json, Origin)>,
    out: &mut Variables,
    diags: &mut Vec<Diagnostic>,
) {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            diags.push(
                Diagnostic::error(format!("cannot read var file `{}`", path.display()))
                    .with_help(format!("{err}; check the -var-file path")),
            );
            return;
        }
    };
    let text: Arc<str> = Arc::from(text);
    out.file_texts.push(text.to_string());
    let file = sources.add(path.clone(), Arc::clone(&text));
    let spans = Spans::new(file, Arc::clone(&text));
    let root = match parse::parse(&spans, &text) {
        Ok(root) => root,
        Err(d) => {
            diags.push(d);
            return;
        }
    };
    for block in &root.blocks {
        diags.push(
            Diagnostic::error("a var file holds only `name = value` lines")
                .with_span(block.header.clone())
                .with_help("move blocks into the manifest"),
        );
    }
    let mut evaluator = Evaluator::new(env, base_dir.to_path_buf(), &spans);
    for attr in &root.attrs {
        if !declared.contains_key(&attr.name) {
            let mut d =
                Diagnostic::warning(format!("var file sets undeclared variable `{}`", attr.name))
                    .with_span(attr.key_span.clone())
                    .with_label("ignored");
            d = match did_you_mean(&attr.name, declared.keys().map(String::as_str)) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => {
                    d.with_help("declare it in the manifest with a `variable` block, or remove it")
                }
            };
            diags.push(d);
            continue;
        }
        let found = refs::collect(&attr.expr, &spans);
        if !found.is_empty() {
            diags.push(
                Diagnostic::error("values in a var file must be constants")
                    .with_span(found[0].span.clone())
                    .with_help("write the value itself; references are not available here"),
            );
            continue;
        }
        if let Some(v) = evaluator.attr(attr, &Scope::default(), false, diags) {
            values.insert(
                attr.name.clone(),
                (v, Origin::VarFile(attr.value_span.clone())),
            );
        }
    }
}

fn check_validations(
    declared: &BTreeMap<String, Declared<'_>>,
    vars: &Variables,
    spans: &Spans,
    evaluator: &mut Evaluator<'_>,
    diags: &mut Vec<Diagnostic>,
) {
    let mut scope = Scope::default();
    for (name, value) in &vars.values {
        scope.vars.insert(name.clone(), value.clone());
    }
    let empty = BTreeSet::new();
    let no_blocks = BTreeMap::new();
    let known = Known {
        variables: &vars.declared,
        locals: &empty,
        blocks: &no_blocks,
    };
    for (name, decl) in declared {
        if !vars.values.contains_key(name) {
            continue;
        }
        for rule in decl.block.blocks_of("validation") {
            let Some(condition) = rule.attr("condition") else {
                diags.push(
                    Diagnostic::error(format!("validation of `{name}` has no `condition`"))
                        .with_span(rule.header.clone())
                        .with_help(format!(
                            "add `condition = length(var.{name}) > 0` or similar"
                        )),
                );
                continue;
            };
            let found = refs::collect(&condition.expr, spans);
            if !refs::check(
                &found,
                &known,
                Allowed::VariablesOnly,
                "a validation condition",
                diags,
            ) {
                continue;
            }
            let message = rule
                .attr("error_message")
                .and_then(|m| evaluator.attr(m, &scope, false, diags))
                .and_then(|m| m.as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("the value of `{name}` is not valid"));
            match evaluator.attr(condition, &scope, false, diags) {
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
