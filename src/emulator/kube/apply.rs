//! Server-side apply and the field ownership it keeps in `metadata.managedFields`.
//!
//! A manager's applied configuration is the set of fields it owns. Applying again sets what the
//! new configuration holds, removes what the manager applied last time and no longer does (unless
//! another manager owns it too), and refuses, without `force`, to change a field another manager
//! owns with a different value: a conflict. With `force` the fields change hands. Writes that are
//! not applies (create, replace, merge patch) record their manager's fields as an `Update`.
//!
//! Simplified from the API server: lists are atomic (replaced whole, owned whole: the server
//! merges the lists its schemas key, such as containers by name), and `status` is owned by no
//! one.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::status::Status;

/// A field's path: the keys from the object's root.
type Field = Vec<String>;

/// Fields nobody owns: the object's identity and what the server keeps.
const UNOWNED_ROOT: &[&str] = &["apiVersion", "kind", "status"];
const UNOWNED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
];

/// The object after `manager` applies `config` to `live` (`None`: it does not exist yet), with
/// its managed fields; the server's own metadata is left to the caller.
pub(super) fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, Status> {
    let applied = fields_of(config);
    let Some(live) = live else {
        let mut object = config.clone();
        set_entries(
            &mut object,
            vec![entry(manager, "Apply", config, &applied, now)],
        );
        return Ok(object);
    };
    let mut entries = entries_of(live);
    let previous = entries
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply")
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut conflicts = Vec::new();
    for other in entries
        .iter_mut()
        .filter(|e| !(e.manager == manager && e.operation == "Apply"))
    {
        let contested: Vec<Field> = applied
            .iter()
            .filter(|f| other.fields.iter().any(|o| overlaps(o, f)))
            .filter(|f| get(live, f) != get(config, f))
            .cloned()
            .collect();
        for field in contested {
            if force {
                other.fields.retain(|o| !overlaps(o, &field));
            } else {
                conflicts.push(format!(
                    "conflict with {:?}: .{}",
                    other.manager,
                    field.join(".")
                ));
            }
        }
    }
    if !conflicts.is_empty() {
        let n = conflicts.len();
        return Err(Status::new(
            409,
            "Conflict",
            format!(
                "Apply failed with {n} conflict{}: {}",
                if n == 1 { "" } else { "s" },
                conflicts.join("\n")
            ),
        ));
    }
    let mut object = live.clone();
    for dropped in previous.difference(&applied) {
        let shared = entries
            .iter()
            .filter(|e| !(e.manager == manager && e.operation == "Apply"))
            .any(|e| e.fields.iter().any(|o| overlaps(o, dropped)));
        if !shared {
            remove(&mut object, dropped);
        }
    }
    merge(&mut object, config);
    entries.retain(|e| !(e.fields.is_empty() || e.manager == manager && e.operation == "Apply"));
    let mut out: Vec<Value> = entries.iter().map(Entry::to_value).collect();
    out.push(entry(manager, "Apply", config, &applied, now));
    set_entries(&mut object, out);
    Ok(object)
}

/// Records a write that is not an apply: `manager` now owns the fields `sent` holds, taken from
/// any other `Update` entry (an apply's fields stay with it: the next apply decides).
pub(super) fn record_update(
    object: &mut Value,
    previous: Option<&Value>,
    sent: &Value,
    manager: &str,
    now: &str,
) {
    let fields = fields_of(sent);
    let mut entries = previous.map(entries_of).unwrap_or_default();
    for other in entries
        .iter_mut()
        .filter(|e| e.operation == "Update" && e.manager != manager)
    {
        other
            .fields
            .retain(|o| !fields.iter().any(|f| overlaps(o, f)));
    }
    entries.retain(|e| !(e.fields.is_empty() || e.manager == manager && e.operation == "Update"));
    let api_version = sent.get("apiVersion").cloned().unwrap_or(Value::Null);
    let mut out: Vec<Value> = entries.iter().map(Entry::to_value).collect();
    let mut mine = entry(manager, "Update", sent, &fields, now);
    mine["apiVersion"] = api_version;
    out.push(mine);
    set_entries(object, out);
}

struct Entry {
    manager: String,
    operation: String,
    raw: Value,
    fields: BTreeSet<Field>,
}

impl Entry {
    fn to_value(&self) -> Value {
        let mut value = self.raw.clone();
        value["fieldsV1"] = fields_v1(&self.fields);
        value
    }
}

fn entries_of(object: &Value) -> Vec<Entry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|raw| Entry {
            manager: raw["manager"].as_str().unwrap_or_default().to_owned(),
            operation: raw["operation"].as_str().unwrap_or_default().to_owned(),
            fields: parse_fields_v1(&raw["fieldsV1"]),
            raw: raw.clone(),
        })
        .collect()
}

fn entry(
    manager: &str,
    operation: &str,
    config: &Value,
    fields: &BTreeSet<Field>,
    now: &str,
) -> Value {
    json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": config.get("apiVersion").cloned().unwrap_or(Value::Null),
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(fields),
    })
}

fn set_entries(object: &mut Value, entries: Vec<Value>) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("managedFields".to_owned(), Value::Array(entries));
    }
}

/// The leaf fields of an object: scalars, lists and empty maps.
pub(super) fn fields_of(object: &Value) -> BTreeSet<Field> {
    let mut out = BTreeSet::new();
    if let Value::Object(root) = object {
        for (key, value) in root {
            if UNOWNED_ROOT.contains(&key.as_str()) {
                continue;
            }
            if key == "metadata" {
                for (mkey, mvalue) in value.as_object().into_iter().flatten() {
                    if !UNOWNED_METADATA.contains(&mkey.as_str()) {
                        leaves(mvalue, vec!["metadata".to_owned(), mkey.clone()], &mut out);
                    }
                }
                continue;
            }
            leaves(value, vec![key.clone()], &mut out);
        }
    }
    out
}

fn leaves(value: &Value, at: Field, out: &mut BTreeSet<Field>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, inner) in map {
                let mut next = at.clone();
                next.push(key.clone());
                leaves(inner, next, out);
            }
        }
        _ => {
            out.insert(at);
        }
    }
}

/// One field owns another when it is the other or holds it.
fn overlaps(a: &Field, b: &Field) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn get<'a>(value: &'a Value, field: &Field) -> Option<&'a Value> {
    field.iter().try_fold(value, |v, key| v.get(key))
}

fn remove(value: &mut Value, field: &Field) {
    let Some((last, parents)) = field.split_last() else {
        return;
    };
    let mut at = value;
    for key in parents {
        match at.get_mut(key) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(map) = at.as_object_mut() {
        map.remove(last);
    }
}

/// Maps merge key by key; anything else (scalars, lists) is replaced.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                match into.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value);
                    }
                    _ => {
                        into.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (into, from) => *into = from.clone(),
    }
}

/// `{"f:data": {"f:key": {}}}`: the API server's FieldsV1 encoding of a field set.
fn fields_v1(fields: &BTreeSet<Field>) -> Value {
    let mut root = Map::new();
    for field in fields {
        let mut at = &mut root;
        for key in field {
            at = at
                .entry(format!("f:{key}"))
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("built as objects");
        }
    }
    Value::Object(root)
}

fn parse_fields_v1(value: &Value) -> BTreeSet<Field> {
    fn walk(map: &Map<String, Value>, at: &Field, out: &mut BTreeSet<Field>) {
        let children: Vec<(&String, &Value)> =
            map.iter().filter(|(k, _)| k.starts_with("f:")).collect();
        if children.is_empty() {
            if !at.is_empty() {
                out.insert(at.clone());
            }
            return;
        }
        for (key, inner) in children {
            let mut next = at.clone();
            next.push(key["f:".len()..].to_owned());
            walk(inner.as_object().unwrap_or(&Map::new()), &next, out);
        }
    }
    let mut out = BTreeSet::new();
    if let Some(map) = value.as_object() {
        walk(map, &Vec::new(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(data: &Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": data})
    }

    #[test]
    fn applying_again_sets_new_fields_and_removes_the_ones_no_longer_applied() {
        let first = apply(
            None,
            &cm(&json!({"a": "1", "b": "2"})),
            "dsinfra",
            false,
            "t",
        )
        .expect("it applies");
        assert_eq!(
            first["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        let second = apply(
            Some(&first),
            &cm(&json!({"a": "1", "c": "3"})),
            "dsinfra",
            false,
            "t",
        )
        .expect("it applies");
        assert_eq!(second["data"], json!({"a": "1", "c": "3"}));
    }

    #[test]
    fn another_managers_field_conflicts_unless_forced_and_then_changes_hands() {
        let mut live = cm(&json!({"a": "1"}));
        record_update(
            &mut live,
            None,
            &cm(&json!({"a": "1"})),
            "kubectl-edit",
            "t",
        );
        let err = apply(Some(&live), &cm(&json!({"a": "2"})), "dsinfra", false, "t")
            .expect_err("a conflict");
        assert_eq!(err.code, 409);
        assert!(
            err.message
                .contains(r#"conflict with "kubectl-edit": .data.a"#),
            "{}",
            err.message
        );
        // The same value is no conflict: both own it.
        assert!(apply(Some(&live), &cm(&json!({"a": "1"})), "dsinfra", false, "t").is_ok());
        let forced =
            apply(Some(&live), &cm(&json!({"a": "2"})), "dsinfra", true, "t").expect("it applies");
        assert_eq!(forced["data"]["a"], "2");
        let managers: Vec<&str> = forced["metadata"]["managedFields"]
            .as_array()
            .expect("managed fields")
            .iter()
            .map(|e| e["manager"].as_str().expect("a manager"))
            .collect();
        assert_eq!(
            managers,
            vec!["dsinfra"],
            "kubectl-edit owned nothing else and is dropped"
        );
    }

    #[test]
    fn a_field_another_manager_also_owns_stays_when_one_stops_applying_it() {
        let a = apply(None, &cm(&json!({"x": "1"})), "one", false, "t").expect("it applies");
        let b = apply(Some(&a), &cm(&json!({"x": "1"})), "two", false, "t").expect("it applies");
        let mut nothing = cm(&json!({}));
        nothing.as_object_mut().expect("an object").remove("data");
        let c = apply(Some(&b), &nothing, "one", false, "t").expect("it applies");
        assert_eq!(c["data"]["x"], "1");
    }
}
