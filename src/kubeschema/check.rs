//! The walk: one value against one schema, driven by the value so recursive definitions
//! (`JSONSchemaProps` holds `JSONSchemaProps`) terminate.

use serde_json::{Map, Value};

use super::{Violation, ViolationKind};

/// The published schemas' walk: `defs` resolves `$ref`s, an absent `additionalProperties`
/// allows any property (JSON Schema's rule; the `-strict` directories say `false` everywhere).
pub(super) fn walk(
    defs: &Map<String, Value>,
    schema: &Value,
    value: &Value,
    path: &str,
    found: &mut Vec<Violation>,
) {
    let schema = resolve(defs, schema);
    if let Some(Value::Array(alternatives)) = schema.get("oneOf") {
        let fits = alternatives.iter().any(|alt| {
            let mut inner = Vec::new();
            walk(defs, alt, value, path, &mut inner);
            inner.is_empty()
        });
        if !fits {
            push(
                found,
                path,
                ViolationKind::Type,
                format!("{} fits none of the allowed types", describe(value)),
            );
        }
        return;
    }
    if !type_fits(schema.get("type"), value) {
        push(
            found,
            path,
            ViolationKind::Type,
            format!(
                "expected {}, got {}",
                type_text(schema.get("type")),
                describe(value)
            ),
        );
        return;
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !value.is_null()
        && !allowed.contains(value)
    {
        push(
            found,
            path,
            ViolationKind::Value,
            format!(
                "unsupported value {value}: supported values: {}",
                join(allowed)
            ),
        );
    }
    match value {
        Value::Object(fields) => {
            required(schema, fields, path, found);
            let properties = schema.get("properties").and_then(Value::as_object);
            for (key, field) in fields {
                let at = join_path(path, key);
                match (
                    properties.and_then(|p| p.get(key)),
                    schema.get("additionalProperties"),
                ) {
                    (Some(sub), _) => walk(defs, sub, field, &at, found),
                    (None, Some(Value::Bool(false))) => unknown(found, &at),
                    (None, Some(extra @ Value::Object(_))) => walk(defs, extra, field, &at, found),
                    (None, _) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(defs, item_schema, item, &format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

/// Every rule a custom resource breaks under its CRD's `openAPIV3Schema` (a structural schema):
/// an object field its schema does not declare is unknown unless the schema preserves unknown
/// fields; `metadata` at the root is the API server's, not the schema's.
#[must_use]
pub fn check_crd_object(schema: &Value, object: &Value) -> Vec<Violation> {
    let mut found = Vec::new();
    let Some(fields) = object.as_object() else {
        push(
            &mut found,
            "",
            ViolationKind::Type,
            "expected an object".to_owned(),
        );
        return found;
    };
    required(schema, fields, "", &mut found);
    for (key, field) in fields {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match schema.get("properties").and_then(|p| p.get(key)) {
            Some(sub) => structural(sub, field, key, &mut found),
            None if preserves(schema) => {}
            None => unknown(&mut found, key),
        }
    }
    found
}

fn structural(schema: &Value, value: &Value, path: &str, found: &mut Vec<Violation>) {
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) {
            push(
                found,
                path,
                ViolationKind::Type,
                "null is not allowed here".to_owned(),
            );
        }
        return;
    }
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let fits = if int_or_string {
        value.is_string() || value.is_i64() || value.is_u64()
    } else {
        type_fits(schema.get("type"), value)
    };
    if !fits {
        let expected = if int_or_string {
            "integer or string".to_owned()
        } else {
            type_text(schema.get("type"))
        };
        push(
            found,
            path,
            ViolationKind::Type,
            format!("expected {expected}, got {}", describe(value)),
        );
        return;
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        push(
            found,
            path,
            ViolationKind::Value,
            format!(
                "unsupported value {value}: supported values: {}",
                join(allowed)
            ),
        );
    }
    range(schema, value, path, found);
    match value {
        Value::Object(fields) => {
            required(schema, fields, path, found);
            for (key, field) in fields {
                let at = join_path(path, key);
                match (
                    schema.get("properties").and_then(|p| p.get(key)),
                    schema.get("additionalProperties"),
                ) {
                    (Some(sub), _) => structural(sub, field, &at, found),
                    (None, Some(extra @ Value::Object(_))) => structural(extra, field, &at, found),
                    (None, Some(Value::Bool(true))) => {}
                    (None, _) if preserves(schema) => {}
                    (None, _) => unknown(found, &at),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    structural(item_schema, item, &format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

fn range(schema: &Value, value: &Value, path: &str, found: &mut Vec<Violation>) {
    let Some(number) = value.as_f64() else {
        return;
    };
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && number < min
    {
        push(
            found,
            path,
            ViolationKind::Value,
            format!("should be greater than or equal to {min}"),
        );
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
        && number > max
    {
        push(
            found,
            path,
            ViolationKind::Value,
            format!("should be less than or equal to {max}"),
        );
    }
}

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn required(schema: &Value, fields: &Map<String, Value>, path: &str, found: &mut Vec<Violation>) {
    if let Some(Value::Array(names)) = schema.get("required") {
        for name in names.iter().filter_map(Value::as_str) {
            if fields.get(name).is_none_or(Value::is_null) {
                push(
                    found,
                    &join_path(path, name),
                    ViolationKind::Required,
                    "Required value".to_owned(),
                );
            }
        }
    }
}

/// A `$ref` names a definition by its last segment (`#/$defs/X`, or the per-kind files'
/// `/api/_definitions.json#/$defs/X`); an unresolvable one accepts anything, since the schema,
/// not the object, would be at fault.
fn resolve<'a>(defs: &'a Map<String, Value>, schema: &'a Value) -> &'a Value {
    let mut schema = schema;
    for _ in 0..16 {
        let Some(target) = schema.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let name = target.rsplit('/').next().unwrap_or(target);
        match defs.get(name) {
            Some(def) => schema = def,
            None => return &Value::Bool(true),
        }
    }
    schema
}

fn type_fits(declared: Option<&Value>, value: &Value) -> bool {
    let fits = |t: &str| match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    };
    match declared {
        Some(Value::String(t)) => fits(t),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).any(fits),
        _ => true,
    }
}

fn type_text(declared: Option<&Value>) -> String {
    match declared {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".to_owned(),
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn join(values: &[Value]) -> String {
    values
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn unknown(found: &mut Vec<Violation>, path: &str) {
    push(
        found,
        path,
        ViolationKind::UnknownField,
        format!("unknown field {path:?}"),
    );
}

fn push(found: &mut Vec<Violation>, path: &str, kind: ViolationKind, reason: String) {
    found.push(Violation {
        path: path.to_owned(),
        kind,
        reason,
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn defs() -> Map<String, Value> {
        json!({
            "Pod": {"type": "object", "additionalProperties": false, "required": ["spec"],
                    "properties": {"apiVersion": {"type": ["string", "null"], "enum": ["v1"]},
                                   "spec": {"$ref": "#/$defs/Spec"}}},
            "Spec": {"type": ["object", "null"], "additionalProperties": false,
                     "properties": {"port": {"$ref": "#/$defs/IntOrString"},
                                    "items": {"type": ["array", "null"], "items": {"type": "string"}}}},
            "IntOrString": {"oneOf": [{"type": ["string", "null"]}, {"type": ["integer", "null"]}]},
        })
        .as_object()
        .cloned()
        .expect("an object")
    }

    fn paths(found: &[Violation]) -> Vec<(String, ViolationKind)> {
        found.iter().map(|v| (v.path.clone(), v.kind)).collect()
    }

    #[test]
    fn a_published_schema_finds_unknown_fields_types_enums_and_missing_fields_by_path() {
        let defs = defs();
        let mut found = Vec::new();
        let object =
            json!({"apiVersion": "v2", "spec": {"port": 1.5, "items": ["a", 3], "extra": 1}});
        walk(&defs, &defs["Pod"], &object, "", &mut found);
        assert_eq!(
            paths(&found),
            vec![
                ("apiVersion".to_owned(), ViolationKind::Value),
                ("spec.port".to_owned(), ViolationKind::Type),
                ("spec.items[1]".to_owned(), ViolationKind::Type),
                ("spec.extra".to_owned(), ViolationKind::UnknownField),
            ]
        );
        let mut found = Vec::new();
        walk(
            &defs,
            &defs["Pod"],
            &json!({"spec": {"port": "http"}}),
            "",
            &mut found,
        );
        assert!(found.is_empty(), "{found:?}");
        walk(&defs, &defs["Pod"], &json!({}), "", &mut found);
        assert_eq!(
            paths(&found),
            vec![("spec".to_owned(), ViolationKind::Required)]
        );
    }

    #[test]
    fn a_crd_schema_prunes_nothing_it_preserves_and_checks_ranges_and_int_or_string() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1},
                "port": {"x-kubernetes-int-or-string": true},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}});
        let ok = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
                        "spec": {"size": 2, "port": "web", "extra": {"any": [1]}, "labels": {"a": "b"}}});
        assert!(check_crd_object(&schema, &ok).is_empty());
        let bad =
            json!({"spec": {"size": 0, "port": true, "labels": {"a": 1}, "typo": 1}, "status": {}});
        assert_eq!(
            paths(&check_crd_object(&schema, &bad)),
            vec![
                ("spec.size".to_owned(), ViolationKind::Value),
                ("spec.port".to_owned(), ViolationKind::Type),
                ("spec.labels.a".to_owned(), ViolationKind::Type),
                ("spec.typo".to_owned(), ViolationKind::UnknownField),
                ("status".to_owned(), ViolationKind::UnknownField),
            ]
        );
        assert_eq!(
            paths(&check_crd_object(&schema, &json!({"spec": {}}))),
            vec![("spec.size".to_owned(), ViolationKind::Required)]
        );
    }
}
