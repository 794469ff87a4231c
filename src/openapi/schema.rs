//! Validation of one JSON value against one Swagger 2.0 schema, following `$ref`s across files.
//!
//! The walk is driven by the value, not the schema, so recursive definitions (a subnet that
//! holds NICs that hold subnets) terminate. Each violation carries a JSON path such as
//! `$.properties.subnets[0].name` so a failing test points at the field.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::specs::Docs;

/// Which way a body travels: requests may not carry `readOnly` properties, and may leave out
/// required properties that are read-only (the service fills them in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A body sent to the service.
    Request,
    /// A body returned by the service.
    Response,
}

/// What kind of rule a value broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViolationKind {
    /// The JSON type differs from the schema's `type`.
    Type,
    /// A `required` property is missing.
    Required,
    /// A value is not one of a closed `enum`.
    Enum,
    /// A `readOnly` property appears in a request.
    ReadOnly,
    /// A property the schema does not declare (ARM tolerates some: callers choose).
    UnknownProperty,
    /// A string does not look like its `format` (date-time, uuid).
    Format,
    /// The status code is not declared for the operation.
    UndeclaredStatus,
    /// A body where the spec declares none, or none where it declares one.
    Body,
    /// A `$ref` that does not resolve: a broken spec, reported rather than ignored.
    BrokenRef,
}

/// One broken rule, located by a JSON path into the validated value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON path of the offending value, `$` being the body itself.
    pub path: String,
    /// The rule broken.
    pub kind: ViolationKind,
    /// A human explanation, naming the expected and actual values.
    pub reason: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?}: {}", self.path, self.kind, self.reason)
    }
}

/// A schema together with the file it lives in, so relative `$ref`s inside it resolve.
#[derive(Clone, Copy)]
pub(crate) struct SchemaRef<'a> {
    pub doc: usize,
    pub schema: &'a Value,
}

/// How an object treats properties it does not declare.
enum Extra<'a> {
    Forbidden,
    Any,
    Schema(SchemaRef<'a>),
}

/// The flattened view of an object schema after following `allOf` chains.
struct ObjectShape<'a> {
    properties: BTreeMap<String, SchemaRef<'a>>,
    required: BTreeSet<String>,
    extra: Extra<'a>,
    discriminator: Option<(String, SchemaRef<'a>)>,
}

/// Deep enough for any ARM body; guards against `allOf` cycles in a broken spec.
const MAX_DEPTH: usize = 64;

pub(crate) struct Validator<'a> {
    pub docs: &'a Docs,
    pub direction: Direction,
    pub out: Vec<Violation>,
}

impl<'a> Validator<'a> {
    fn push(&mut self, path: &str, kind: ViolationKind, reason: String) {
        self.out.push(Violation {
            path: path.to_owned(),
            kind,
            reason,
        });
    }

    /// Follows `$ref` links until a schema without one; reports a broken link once.
    fn resolve(&mut self, mut at: SchemaRef<'a>, path: &str) -> Option<SchemaRef<'a>> {
        for _ in 0..MAX_DEPTH {
            let Some(target) = at.schema.get("$ref").and_then(Value::as_str) else {
                return Some(at);
            };
            if let Some((doc, schema)) = self.docs.resolve(at.doc, target) {
                at = SchemaRef { doc, schema };
            } else {
                self.push(
                    path,
                    ViolationKind::BrokenRef,
                    format!("$ref {target} does not resolve"),
                );
                return None;
            }
        }
        self.push(path, ViolationKind::BrokenRef, "$ref chain too long".into());
        None
    }

    /// True when the schema, or the schema it refers to, is marked read-only.
    fn is_read_only(&mut self, at: SchemaRef<'a>, path: &str) -> bool {
        if flag(at.schema, "readOnly") {
            return true;
        }
        self.resolve(at, path)
            .is_some_and(|resolved| flag(resolved.schema, "readOnly"))
    }

    pub fn validate(&mut self, value: &Value, at: SchemaRef<'a>, path: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        // Services send `null` for absent optional values and generated clients accept it, so
        // null fails only where a schema says `x-nullable: false` outright.
        if value.is_null() && !explicitly_not_nullable(at.schema) {
            return;
        }
        let Some(at) = self.resolve(at, path) else {
            return;
        };
        let schema = at.schema;
        if value.is_null() {
            if explicitly_not_nullable(schema) {
                self.push(path, ViolationKind::Type, "null is not allowed here".into());
            }
            return;
        }
        let declared = schema.get("type").and_then(Value::as_str);
        let is_object_schema = declared == Some("object")
            || (declared.is_none()
                && (schema.get("properties").is_some()
                    || schema.get("allOf").is_some()
                    || schema.get("additionalProperties").is_some()));
        if let Some(kind) = declared
            && !type_matches(kind, value)
        {
            self.push(
                path,
                ViolationKind::Type,
                format!("expected {kind}, found {}", json_type(value)),
            );
            return;
        }
        self.check_enum(value, schema, path);
        self.check_format(value, schema, path);
        match value {
            Value::Object(map) if is_object_schema => self.validate_object(map, at, path, depth),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    let item_at = SchemaRef {
                        doc: at.doc,
                        schema: item_schema,
                    };
                    for (i, item) in items.iter().enumerate() {
                        self.validate(item, item_at, &format!("{path}[{i}]"), depth + 1);
                    }
                }
            }
            _ => {}
        }
    }

    fn check_enum(&mut self, value: &Value, schema: &Value, path: &str) {
        let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
            return;
        };
        let open = schema
            .get("x-ms-enum")
            .and_then(|e| e.get("modelAsString"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if open && value.is_string() {
            return;
        }
        // ARM compares enum strings case-insensitively, so the validator does too.
        let matches = allowed.iter().any(|a| match (a, value) {
            (Value::String(a), Value::String(v)) => a.eq_ignore_ascii_case(v),
            (a, v) => a == v,
        });
        if !matches {
            self.push(
                path,
                ViolationKind::Enum,
                format!("{value} is not one of {}", Value::Array(allowed.clone())),
            );
        }
    }

    fn check_format(&mut self, value: &Value, schema: &Value, path: &str) {
        let (Some(text), Some(format)) =
            (value.as_str(), schema.get("format").and_then(Value::as_str))
        else {
            return;
        };
        let ok = match format {
            "date-time" | "date" => looks_like_date(text),
            "uuid" => looks_like_uuid(text),
            _ => true,
        };
        if !ok {
            self.push(
                path,
                ViolationKind::Format,
                format!("{text:?} is not a valid {format}"),
            );
        }
    }

    fn validate_object(
        &mut self,
        map: &serde_json::Map<String, Value>,
        at: SchemaRef<'a>,
        path: &str,
        depth: usize,
    ) {
        let mut shape = ObjectShape {
            properties: BTreeMap::new(),
            required: BTreeSet::new(),
            extra: Extra::Forbidden,
            discriminator: None,
        };
        self.collect(at, &mut shape, path, 0);
        let mut open_subtype = false;
        if let Some((property, base)) = shape.discriminator.take()
            && let Some(Value::String(kind)) = map.get(&property)
        {
            if let Some(sub) = self.docs.subtype(base, kind) {
                self.collect(sub, &mut shape, path, 0);
            } else {
                // An unknown subtype cannot be checked property by property; accept its extras.
                open_subtype = true;
            }
        }
        for name in &shape.required {
            if map.contains_key(name) {
                continue;
            }
            let prop = shape.properties.get(name).copied();
            let read_only = prop.is_some_and(|p| self.is_read_only(p, path));
            if self.direction == Direction::Request && read_only {
                continue;
            }
            self.push(
                path,
                ViolationKind::Required,
                format!("required property {name:?} is missing"),
            );
        }
        for (name, value) in map {
            let child = format!("{path}.{name}");
            if let Some(&prop) = shape.properties.get(name) {
                if self.direction == Direction::Request && self.is_read_only(prop, &child) {
                    self.push(
                        &child,
                        ViolationKind::ReadOnly,
                        "read-only property must not be sent".into(),
                    );
                    continue;
                }
                self.validate(value, prop, &child, depth + 1);
                continue;
            }
            match shape.extra {
                Extra::Any => {}
                Extra::Schema(extra) => self.validate(value, extra, &child, depth + 1),
                Extra::Forbidden if open_subtype => {}
                Extra::Forbidden => self.push(
                    &child,
                    ViolationKind::UnknownProperty,
                    format!("property {name:?} is not declared by the schema"),
                ),
            }
        }
    }

    /// Gathers properties, required names and the extra-property rule through `allOf`.
    fn collect(
        &mut self,
        at: SchemaRef<'a>,
        shape: &mut ObjectShape<'a>,
        path: &str,
        depth: usize,
    ) {
        if depth > MAX_DEPTH {
            return;
        }
        let Some(at) = self.resolve(at, path) else {
            return;
        };
        let schema = at.schema;
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                shape.properties.entry(name.clone()).or_insert(SchemaRef {
                    doc: at.doc,
                    schema: prop,
                });
            }
        }
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            shape
                .required
                .extend(required.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        match schema.get("additionalProperties") {
            Some(Value::Bool(true)) => shape.extra = Extra::Any,
            Some(extra @ Value::Object(_)) => {
                shape.extra = Extra::Schema(SchemaRef {
                    doc: at.doc,
                    schema: extra,
                });
            }
            _ => {}
        }
        if let Some(property) = schema.get("discriminator").and_then(Value::as_str)
            && shape.discriminator.is_none()
        {
            shape.discriminator = Some((property.to_owned(), at));
        }
        if let Some(parents) = schema.get("allOf").and_then(Value::as_array) {
            for parent in parents {
                self.collect(
                    SchemaRef {
                        doc: at.doc,
                        schema: parent,
                    },
                    shape,
                    path,
                    depth + 1,
                );
            }
        }
    }
}

fn explicitly_not_nullable(schema: &Value) -> bool {
    schema.get("x-nullable").and_then(Value::as_bool) == Some(false)
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool).unwrap_or(false)
}

fn type_matches(kind: &str, value: &Value) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        // `file` and unknown types are not checked.
        _ => true,
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Loose on purpose: specs and examples use many date-time spellings (7 fraction digits, no
/// zone), so only the `YYYY-MM-DD` start is required.
fn looks_like_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 10
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[5..7].iter().all(u8::is_ascii_digit)
        && bytes[7] == b'-'
        && bytes[8..10].iter().all(u8::is_ascii_digit)
}

fn looks_like_uuid(text: &str) -> bool {
    text.len() == 36
        && text.char_indices().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_checked_loosely() {
        assert!(looks_like_date("2024-01-02T03:04:05.1234567Z"));
        assert!(looks_like_date("2024-01-02"));
        assert!(!looks_like_date("yesterday"));
        assert!(!looks_like_date("2024/01/02"));
    }

    #[test]
    fn uuids_need_hex_and_hyphens_in_place() {
        assert!(looks_like_uuid("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"));
        assert!(!looks_like_uuid("0f1e2d3c4b5a697887-96a5b4c3d2e1f0abcd"));
        assert!(!looks_like_uuid("not-a-uuid"));
    }

    #[test]
    fn integers_accept_whole_floats_only() {
        assert!(type_matches("integer", &serde_json::json!(3)));
        assert!(type_matches("integer", &serde_json::json!(3.0)));
        assert!(!type_matches("integer", &serde_json::json!(3.5)));
        assert!(!type_matches("integer", &serde_json::json!("3")));
    }
}
