//! Typed access to an evaluated block's attributes, with located type errors.
//!
//! Expansion code asks for `size` as a string or `count` as a whole number; a [`Fields`] answers
//! with the value and its span, or reports a located diagnostic ("`count` must be a whole number,
//! found a string") and answers `None`. Attributes whose evaluation already failed answer `None`
//! silently, so one mistake gives one error.

use serde_json::Value as Json;

use crate::diag::{Diagnostic, Span};

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

    /// The diagnostics being collected (to read a nested block with its own `Fields`).
    pub fn diags_mut(&mut self) -> &mut Vec<Diagnostic> {
        self.diags
    }

    /// The block being read.
    pub fn block(&self) -> &'a EvalBlock {
        self.block
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

    /// The span of an attribute's value, or the block header if it is not written.
    pub fn span_of(&self, name: &str) -> Span {
        self.block
            .attr(name)
            .map_or_else(|| self.block.header.clone(), |a| a.value_span.clone())
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

    /// An optional whole number.
    pub fn integer(&mut self, name: &str) -> Option<Located<i64>> {
        let (attr, value) = self.raw(name)?;
        let number = match value {
            Json::Number(n) => n.as_i64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    // The filter above makes the cast exact.
                    .map(|f| {
                        #[allow(clippy::cast_possible_truncation)]
                        let i = f as i64;
                        i
                    })
            }),
            Json::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        if let Some(n) = number {
            Some(Located {
                value: n,
                span: attr.value_span.clone(),
            })
        } else {
            self.type_error(attr, "a whole number", value);
            None
        }
    }

    /// An optional whole number that must lie in `min..=max`.
    pub fn integer_in(
        &mut self,
        name: &str,
        min: i64,
        max: i64,
        unit: &str,
    ) -> Option<Located<i64>> {
        let n = self.integer(name)?;
        if n.value < min || n.value > max {
            let d = Diagnostic::error(format!(
                "`{name}` in {} must be between {min} and {max}{unit}",
                self.block.title()
            ))
            .with_span(n.span.clone())
            .with_label(format!("this is {}", n.value));
            self.diags.push(d);
            return None;
        }
        Some(n)
    }

    /// An optional list of strings; a single string is accepted as a list of one.
    pub fn strings(&mut self, name: &str) -> Option<Located<Vec<String>>> {
        let (attr, value) = self.raw(name)?;
        let list = match value {
            Json::String(s) => Some(vec![s.clone()]),
            Json::Array(items) => items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>(),
            _ => None,
        };
        if list.is_none() {
            self.type_error(attr, "a list of text values", value);
        }
        list.map(|value| Located {
            value,
            span: attr.value_span.clone(),
        })
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

    /// An optional reference to another block's part: the value must be an object that a block
    /// exposes (`storage_account.data.container.raw`), and its address must start with one of
    /// `prefixes` (`storage_account.` and `.container.`). Returns the address.
    pub fn reference(
        &mut self,
        name: &str,
        what: &str,
        example: &str,
        accept: &dyn Fn(&str) -> bool,
    ) -> Option<Located<String>> {
        let (attr, value) = self.raw(name)?;
        let address = value
            .get("address")
            .and_then(Json::as_str)
            .filter(|a| accept(a));
        if let Some(address) = address {
            return Some(Located {
                value: address.to_owned(),
                span: attr.value_span.clone(),
            });
        }
        let found = match value.get("address").and_then(Json::as_str) {
            Some(other) => format!("this refers to `{other}`"),
            None => format!("this is {}", type_name(value)),
        };
        let d = Diagnostic::error(format!(
            "`{name}` in {} must refer to {what}",
            self.block.title()
        ))
        .with_span(attr.value_span.clone())
        .with_label(found)
        .with_help(format!(
            "write a reference without quotes, e.g. `{name} = {example}`"
        ));
        self.diags.push(d);
        None
    }

    /// Check that a string is one of `allowed` (case-sensitive, as ARM enums are); report with a
    /// suggestion otherwise.
    pub fn one_of(&mut self, value: &Located<String>, name: &str, allowed: &[&str]) -> bool {
        if allowed.contains(&value.value.as_str()) {
            return true;
        }
        let mut d = Diagnostic::error(format!(
            "`{name}` in {} must be one of: {}",
            self.block.title(),
            allowed.join(", ")
        ))
        .with_span(value.span.clone())
        .with_label(format!("`{}` is not one of them", value.value));
        if let Some(s) = crate::diag::did_you_mean(&value.value, allowed.iter().copied()) {
            d = d.with_help(format!("did you mean `{s}`?"));
        }
        self.diags.push(d);
        false
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;

    fn block(attrs: &[(&str, Json)]) -> EvalBlock {
        let file: Arc<Path> = Arc::from(Path::new("t.hcl"));
        let span = Span::new(Arc::clone(&file), 0, 1);
        EvalBlock {
            ident: "vm".into(),
            labels: vec![("gpu".into(), span.clone())],
            header: span.clone(),
            attrs: attrs
                .iter()
                .map(|(n, v)| EvalAttr {
                    name: (*n).to_owned(),
                    value: Some(v.clone()),
                    key_span: span.clone(),
                    value_span: span.clone(),
                })
                .collect(),
            blocks: Vec::new(),
        }
    }

    #[test]
    fn reads_typed_values_and_reports_type_errors() {
        let b = block(&[
            ("size", Json::from("x")),
            ("count", Json::from("four")),
            ("zone", Json::from(1)),
            ("ssh_from", Json::from("1.2.3.4")),
        ]);
        let mut diags = Vec::new();
        let mut f = Fields::new(&b, &mut diags);
        assert_eq!(f.string("size").map(|s| s.value), Some("x".into()));
        assert_eq!(f.string("zone").map(|s| s.value), Some("1".into()));
        assert!(f.integer("count").is_none());
        assert_eq!(
            f.strings("ssh_from").map(|s| s.value),
            Some(vec!["1.2.3.4".into()])
        );
        assert!(f.required_string("image", "\"ubuntu-22.04\"").is_none());
        assert_eq!(diags.len(), 2);
        assert_eq!(
            diags[0].summary,
            "`count` in vm \"gpu\" must be a whole number"
        );
        assert_eq!(diags[0].label.as_deref(), Some("this is a string"));
        assert_eq!(diags[1].summary, "vm \"gpu\" is missing `image`");
    }

    #[test]
    fn references_are_checked_by_address() {
        let b = block(&[
            ("attach_to", serde_json::json!({"address": "vm.prep"})),
            ("container", serde_json::json!({"address": "vm.prep"})),
        ]);
        let mut diags = Vec::new();
        let mut f = Fields::new(&b, &mut diags);
        let is_vm = |a: &str| a.starts_with("vm.");
        let is_container = |a: &str| a.contains(".container.");
        assert_eq!(
            f.reference("attach_to", "a vm", "vm.prep", &is_vm)
                .map(|r| r.value),
            Some("vm.prep".into())
        );
        assert!(
            f.reference("container", "a container", "x", &is_container)
                .is_none()
        );
        assert_eq!(diags[0].label.as_deref(), Some("this refers to `vm.prep`"));
    }
}
