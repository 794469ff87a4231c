//! Attribute-by-attribute access to an evaluated block, with located type errors: what the
//! top-level blocks' readers (`azure`, `output`, `backend`) still use. Resource blocks decode
//! into typed structs through [`super::decode`] instead, with the same messages.
//!
//! A [`Fields`] answers `string("location")` with the value and its span, or reports a located
//! diagnostic ("`location` in azure must be text") and answers `None`. Attributes whose
//! evaluation already failed answer `None` silently, so one mistake gives one error.

use serde_json::Value as Json;

use crate::diag::Diagnostic;

use super::eval::{EvalAttr, EvalBlock, type_name};

pub(super) use super::decode::Located;

/// Reads one block's attributes, reporting type errors into `diags`.
pub(super) struct Fields<'a> {
    block: &'a EvalBlock,
    diags: &'a mut Vec<Diagnostic>,
}

impl<'a> Fields<'a> {
    /// Read `block`'s attributes.
    pub fn new(block: &'a EvalBlock, diags: &'a mut Vec<Diagnostic>) -> Self {
        Self { block, diags }
    }

    /// Report a diagnostic.
    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diags.push(diagnostic);
    }

    /// Whether the attribute is written (even if its evaluation failed).
    pub fn has(&self, name: &str) -> bool {
        self.block.attr(name).is_some()
    }

    /// The evaluated value of an attribute, if written, evaluated and not null.
    fn raw(&self, name: &str) -> Option<(&'a EvalAttr, &'a Json)> {
        let attr = self.block.attr(name)?;
        match &attr.value {
            Some(Json::Null) | None => None,
            Some(value) => Some((attr, value)),
        }
    }

    fn type_error(&mut self, attr: &EvalAttr, expected: &str, found: &Json) {
        let d = Diagnostic::error(format!(
            "`{}` in {} must be {expected}",
            attr.name,
            self.block.title()
        ))
        .with_span(attr.value_span.clone())
        .with_label(format!("this is {}", type_name(found)));
        self.diags.push(d);
    }

    /// Report that a required attribute is missing (unless it is written but failed).
    pub fn missing(&mut self, name: &str, example: &str) {
        if self.has(name) {
            return;
        }
        let d = Diagnostic::error(format!("{} is missing `{name}`", self.block.title()))
            .with_span(self.block.header.clone())
            .with_help(format!("add `{name} = {example}`"));
        self.diags.push(d);
    }

    /// An optional string.
    pub fn string(&mut self, name: &str) -> Option<Located<String>> {
        let (attr, value) = self.raw(name)?;
        match value {
            Json::String(s) => Some(Located {
                value: s.clone(),
                span: attr.value_span.clone(),
            }),
            // Numbers are accepted where text is expected (zone = 1), as HCL converts them.
            Json::Number(n) => Some(Located {
                value: n.to_string(),
                span: attr.value_span.clone(),
            }),
            other => {
                self.type_error(attr, "text", other);
                None
            }
        }
    }

    /// A required string (reports if missing).
    pub fn required_string(&mut self, name: &str, example: &str) -> Option<Located<String>> {
        let found = self.string(name);
        if found.is_none() {
            self.missing(name, example);
        }
        found
    }

    /// An optional bool.
    pub fn bool(&mut self, name: &str) -> Option<Located<bool>> {
        let (attr, value) = self.raw(name)?;
        if let Json::Bool(b) = value {
            Some(Located {
                value: *b,
                span: attr.value_span.clone(),
            })
        } else {
            self.type_error(attr, "true or false", value);
            None
        }
    }

    /// A bool with a default.
    pub fn bool_or(&mut self, name: &str, default: bool) -> bool {
        self.bool(name).map_or(default, |b| b.value)
    }

    /// An optional map of strings (tags).
    pub fn string_map(&mut self, name: &str) -> Option<Located<Vec<(String, String)>>> {
        let (attr, value) = self.raw(name)?;
        let map = match value {
            Json::Object(map) => map
                .iter()
                .map(|(k, v)| match v {
                    Json::String(s) => Some((k.clone(), s.clone())),
                    Json::Number(n) => Some((k.clone(), n.to_string())),
                    Json::Bool(b) => Some((k.clone(), b.to_string())),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>(),
            _ => None,
        };
        if map.is_none() {
            self.type_error(attr, "a map of text values", value);
        }
        map.map(|value| Located {
            value,
            span: attr.value_span.clone(),
        })
    }
}
