//! The object routes: list, get, create, replace, patch (apply or merge) and delete, and the
//! checks every object passes before it is stored: the resource it was sent to, its name, its
//! namespace, and its fields against the published schemas (or its CRD's schema) as the
//! request's `fieldValidation` asks.

use serde_json::{Value, json};

use super::apply;
use super::resources::{self, CRD_GROUP, CRD_PLURAL, Served};
use super::status::Status;
use super::{Answer, Request};
use crate::emulator::json::merge_patch;
use crate::emulator::store::KubeObjects;
use crate::kubeschema::{ViolationKind, check_crd_object};

/// Which objects a request names.
struct Target {
    served: Served,
    namespace: Option<String>,
    name: Option<String>,
}

/// The namespaces every new cluster has.
const BOOT_NAMESPACES: &[&str] = &["default", "kube-node-lease", "kube-public", "kube-system"];

/// A cluster's API as it first answers: its namespaces only.
pub(super) fn boot(api: &mut KubeObjects, request: &Request<'_>) {
    if api.revision > 0 {
        return;
    }
    let now = timestamp(request);
    for name in BOOT_NAMESPACES {
        api.revision += 1;
        api.objects.insert(
            format!("/namespaces//{name}"),
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": name, "uid": uuid::Uuid::new_v4().to_string(),
                                "resourceVersion": api.revision.to_string(), "generation": 1,
                                "creationTimestamp": now},
                   "status": {"phase": "Active"}}),
        );
    }
}

pub(super) fn serve(api: &mut KubeObjects, request: &Request<'_>) -> Answer {
    let Some(target) = target(api, request.path) else {
        return Status::not_found_path(request.path).into();
    };
    // A namespaced kind without a namespace in the path is only its list across namespaces.
    let across = request.method == "GET" && target.name.is_none();
    if target.served.namespaced && target.namespace.is_none() && !across {
        return Status::not_found_path(request.path).into();
    }
    let result = match (request.method, &target.name) {
        ("GET", None) => Ok(list(api, &target, request)),
        ("GET", Some(name)) => get(api, &target, name).cloned().map(Answer::ok),
        ("POST", None) => create(api, &target, request),
        ("PUT", Some(name)) => replace(api, &target, name, request),
        ("PATCH", Some(name)) => patch(api, &target, name, request),
        ("DELETE", Some(name)) => delete(api, &target, name),
        _ => Err(Status::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({} {})",
                request.method, request.path
            ),
        )),
    };
    result.unwrap_or_else(Answer::from)
}

/// `{prefix}[/namespaces/{ns}]/{plural}[/{name}]`, or a namespace itself.
fn target(api: &KubeObjects, path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (prefix_len, rest) = match *segments.first()? {
        "api" => (2, segments.get(2..)?),
        "apis" => (3, segments.get(3..)?),
        _ => return None,
    };
    let prefix = format!("/{}", segments[..prefix_len].join("/"));
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, more @ ..] if more.len() <= 1 => {
            (Some((*ns).to_owned()), [&[*plural][..], more].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let (plural, name) = match rest.as_slice() {
        [plural] => (*plural, None),
        [plural, name] => (*plural, Some((*name).to_owned())),
        _ => return None,
    };
    let served = resources::find(api, &prefix, plural)?;
    if namespace.is_some() && !served.namespaced {
        return None;
    }
    Some(Target {
        served,
        namespace,
        name,
    })
}

fn list(api: &KubeObjects, target: &Target, request: &Request<'_>) -> Answer {
    let selector = request
        .query
        .get("labelSelector")
        .map_or("", String::as_str);
    let items: Vec<Value> = api
        .objects
        .range(target.served.key_prefix(target.namespace.as_deref())..)
        .take_while(|(k, _)| k.starts_with(&target.served.key_prefix(target.namespace.as_deref())))
        .map(|(_, v)| v.clone())
        .filter(|v| selects(selector, v))
        .collect();
    Answer::ok(json!({
        "kind": format!("{}List", target.served.kind),
        "apiVersion": target.served.api_version(),
        "metadata": {"resourceVersion": api.revision.to_string()},
        "items": items,
    }))
}

/// Equality selectors only (`a=b,c=d`, `a==b`, `a!=b`); set-based ones select nothing.
fn selects(selector: &str, object: &Value) -> bool {
    let labels = object.pointer("/metadata/labels");
    selector
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .all(|term| {
            let label = |k: &str| labels.and_then(|l| l.get(k.trim())).and_then(Value::as_str);
            if let Some((k, v)) = term.split_once("!=") {
                label(k) != Some(v.trim())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                label(k) == Some(v.trim())
            } else {
                label(term).is_some()
            }
        })
}

fn get<'a>(api: &'a KubeObjects, target: &Target, name: &str) -> Result<&'a Value, Status> {
    let key = target
        .served
        .key(target.namespace.as_deref().unwrap_or(""), name);
    api.objects
        .get(&key)
        .ok_or_else(|| Status::not_found(&target.served.plural, name))
}

fn create(api: &mut KubeObjects, target: &Target, request: &Request<'_>) -> Result<Answer, Status> {
    let sent = body(request)?;
    let name = sent
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            Status::invalid(
                &target.served.kind,
                "",
                &[(
                    "metadata.name".to_owned(),
                    "Required value: name or generateName is required".to_owned(),
                )],
            )
        })?;
    let (mut object, warnings) = admit(api, target, &name, sent.clone(), request)?;
    let key = target
        .served
        .key(target.namespace.as_deref().unwrap_or(""), &name);
    if api.objects.contains_key(&key) {
        return Err(Status::already_exists(&target.served.plural, &name));
    }
    let now = timestamp(request);
    apply::record_update(&mut object, None, &sent, &manager(request, "create"), &now);
    let stored = store(api, target, key, object, None, &now);
    Ok(Answer {
        status: 201,
        body: stored,
        warnings,
    })
}

fn replace(
    api: &mut KubeObjects,
    target: &Target,
    name: &str,
    request: &Request<'_>,
) -> Result<Answer, Status> {
    let sent = body(request)?;
    let live = get(api, target, name)?.clone();
    let (mut object, warnings) = admit(api, target, name, sent.clone(), request)?;
    if let Some(version) = sent
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        && Some(version)
            != live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
    {
        return Err(Status::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
                target.served.plural
            ),
        ));
    }
    let now = timestamp(request);
    apply::record_update(
        &mut object,
        Some(&live),
        &sent,
        &manager(request, "update"),
        &now,
    );
    let key = target
        .served
        .key(target.namespace.as_deref().unwrap_or(""), name);
    let stored = store(api, target, key, object, Some(&live), &now);
    Ok(Answer {
        status: 200,
        body: stored,
        warnings,
    })
}

fn patch(
    api: &mut KubeObjects,
    target: &Target,
    name: &str,
    request: &Request<'_>,
) -> Result<Answer, Status> {
    let content_type = request.content_type.split(';').next().unwrap_or("").trim();
    let key = target
        .served
        .key(target.namespace.as_deref().unwrap_or(""), name);
    let live = api.objects.get(&key).cloned();
    let now = timestamp(request);
    let sent = body(request)?;
    let object = match content_type {
        "application/apply-patch+yaml" => {
            let Some(manager) = request.query.get("fieldManager").filter(|m| !m.is_empty()) else {
                return Err(Status::bad_request(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            };
            let force = request.query.get("force").is_some_and(|f| f == "true");
            apply::apply(live.as_ref(), &sent, manager, force, &now)?
        }
        // A strategic merge patch is taken as a merge patch: the same for maps, while the
        // lists its schemas key (containers by name) are replaced whole, not merged.
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            let Some(live) = live.as_ref() else {
                return Err(Status::not_found(&target.served.plural, name));
            };
            let mut object = merge_patch(live.clone(), &sent);
            apply::record_update(
                &mut object,
                Some(live),
                &sent,
                &manager(request, "patch"),
                &now,
            );
            object
        }
        other => {
            return Err(Status::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the emulator's Kubernetes API does not take {other:?} patches (server-side apply, merge and strategic merge patch only)"
                ),
            ));
        }
    };
    let (object, warnings) = admit(api, target, name, object, request)?;
    let created = live.is_none();
    let stored = store(api, target, key, object, live.as_ref(), &now);
    Ok(Answer {
        status: if created { 201 } else { 200 },
        body: stored,
        warnings,
    })
}

fn delete(api: &mut KubeObjects, target: &Target, name: &str) -> Result<Answer, Status> {
    let key = target
        .served
        .key(target.namespace.as_deref().unwrap_or(""), name);
    let Some(object) = api.objects.remove(&key) else {
        return Err(Status::not_found(&target.served.plural, name));
    };
    // What a namespace or a CRD holds goes with it (a real server finishes this in the
    // background, the namespace `Terminating` meanwhile).
    if target.served.group.is_empty() && target.served.plural == "namespaces" {
        // Keys are `{group}/{plural}/{namespace}/{name}`.
        api.objects.retain(|k, _| k.split('/').nth(2) != Some(name));
    }
    if target.served.group == CRD_GROUP && target.served.plural == CRD_PLURAL {
        let group = object
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let plural = object
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let held = format!("{group}/{plural}/");
        api.objects.retain(|k, _| !k.starts_with(&held));
    }
    api.revision += 1;
    Ok(Answer::ok(object))
}

/// Checks an object for `target` and returns it as it would be stored, with the warnings of the
/// fields a `Warn` validation dropped.
fn admit(
    api: &KubeObjects,
    target: &Target,
    name: &str,
    mut object: Value,
    request: &Request<'_>,
) -> Result<(Value, Vec<String>), Status> {
    let served = &target.served;
    // A body without them is taken as the URL's kind, as the API server decodes it.
    for (field, value) in [
        ("kind", served.kind.clone()),
        ("apiVersion", served.api_version()),
    ] {
        if object.get(field).is_none_or(|v| v.as_str() == Some("")) {
            object[field] = json!(value);
        }
    }
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if kind != served.kind || api_version != served.api_version() {
        return Err(Status::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({}), or the kind ({kind}) is not {}",
            served.api_version(),
            served.kind
        )));
    }
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err(Status::invalid(
            &kind,
            name,
            &[(
                "metadata.name".to_owned(),
                "Required value: name or generateName is required".to_owned(),
            )],
        ));
    };
    if metadata.get("name").and_then(Value::as_str) != Some(name) {
        return Err(Status::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            metadata
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
        )));
    }
    if let Some(namespace) = &target.namespace {
        match metadata.get("namespace").and_then(Value::as_str) {
            Some(sent) if sent != namespace => {
                return Err(Status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                metadata.insert("namespace".to_owned(), json!(namespace));
            }
        }
        if !api
            .objects
            .contains_key(&format!("/namespaces//{namespace}"))
        {
            return Err(Status::not_found("namespaces", namespace));
        }
    } else {
        metadata.remove("namespace");
    }
    if !is_subdomain(name) {
        return Err(Status::invalid(
            &kind,
            name,
            &[(
                "metadata.name".to_owned(),
                format!(
                    "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
                ),
            )],
        ));
    }
    let warnings = validate(served, &mut object, name, request)?;
    if served.group.is_empty() && served.plural == "secrets" {
        string_data_into_data(&mut object);
    }
    if served.group == CRD_GROUP && served.plural == CRD_PLURAL {
        crd_rules(&object, name)?;
    }
    Ok((object, warnings))
}

/// Field validation as `fieldValidation` asks (`Strict`, `Warn` by default, `Ignore`): unknown
/// fields fail, warn or are dropped silently; wrong types fail decoding (400), missing or
/// unsupported values fail validation (422).
fn validate(
    served: &Served,
    object: &mut Value,
    name: &str,
    request: &Request<'_>,
) -> Result<Vec<String>, Status> {
    let mut probe = object.clone();
    if let Some(metadata) = probe.get_mut("metadata").and_then(Value::as_object_mut) {
        // The server's own fields, not the client's: judged when it writes them.
        metadata.remove("managedFields");
    }
    let violations = match (&served.crd_schema, request.schemas) {
        (Some(schema), _) => check_crd_object(schema, &probe),
        (None, Some(schemas)) => schemas.check(&probe).map_err(Status::bad_request)?,
        (None, None) => Vec::new(),
    };
    let mode = request
        .query
        .get("fieldValidation")
        .map_or("Warn", String::as_str);
    let unknown: Vec<&str> = violations
        .iter()
        .filter(|v| v.kind == ViolationKind::UnknownField)
        .map(|v| v.path.as_str())
        .collect();
    if !unknown.is_empty() && mode == "Strict" {
        let listed: Vec<String> = unknown
            .iter()
            .map(|p| format!("unknown field {p:?}"))
            .collect();
        return Err(Status::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
            listed.join(", "),
            kind = served.kind,
            version = served.version
        )));
    }
    let types: Vec<String> = violations
        .iter()
        .filter(|v| v.kind == ViolationKind::Type)
        .map(|v| format!("{}: {}", v.path, v.reason))
        .collect();
    if !types.is_empty() {
        return Err(Status::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {}",
            types.join("; "),
            kind = served.kind,
            version = served.version
        )));
    }
    let invalid: Vec<(String, String)> = violations
        .iter()
        .filter(|v| matches!(v.kind, ViolationKind::Required | ViolationKind::Value))
        .map(|v| (v.path.clone(), v.reason.clone()))
        .collect();
    if !invalid.is_empty() {
        return Err(Status::invalid(&served.kind, name, &invalid));
    }
    for path in &unknown {
        drop_field(object, path);
    }
    Ok(if mode == "Warn" {
        unknown
            .iter()
            .map(|p| format!("unknown field {p:?}"))
            .collect()
    } else {
        Vec::new()
    })
}

/// A Secret's `stringData` is written into `data` (base64), as the API server stores it: a
/// read never shows `stringData`.
fn string_data_into_data(secret: &mut Value) {
    use base64::Engine as _;
    let Some(Value::Object(plain)) = secret.as_object_mut().and_then(|s| s.remove("stringData"))
    else {
        return;
    };
    let data = secret["data"].as_object().cloned().unwrap_or_default();
    let mut data = data;
    for (key, value) in plain {
        let text = value.as_str().unwrap_or_default();
        data.insert(
            key,
            json!(base64::engine::general_purpose::STANDARD.encode(text)),
        );
    }
    secret["data"] = Value::Object(data);
}

/// A CRD's name is its plural and group: `alluxioclusters.k8s-operator.alluxio.com`.
fn crd_rules(crd: &Value, name: &str) -> Result<(), Status> {
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name != format!("{plural}.{group}") {
        return Err(Status::invalid(
            "CustomResourceDefinition",
            name,
            &[(
                "metadata.name".to_owned(),
                format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
            )],
        ));
    }
    Ok(())
}

/// Stores an object with the server's metadata; a write that changes nothing keeps its
/// `resourceVersion`, and `generation` counts changes outside `metadata` and `status`.
fn store(
    api: &mut KubeObjects,
    target: &Target,
    key: String,
    mut object: Value,
    live: Option<&Value>,
    now: &str,
) -> Value {
    let server = |field: &str| {
        live.and_then(|l| l.pointer(&format!("/metadata/{field}")))
            .cloned()
    };
    let spec_changed = live.is_none_or(|l| {
        without(l, &["metadata", "status"]) != without(&object, &["metadata", "status"])
    });
    let unchanged = live.is_some_and(|l| {
        without(l, &["resourceVersion", "managedFields"])
            == without(&object, &["resourceVersion", "managedFields"])
    });
    let version = if unchanged {
        server("resourceVersion").unwrap_or_else(|| json!("1"))
    } else {
        api.revision += 1;
        json!(api.revision.to_string())
    };
    // Only objects with a spec have a generation (a ConfigMap has none).
    let generation =
        object
            .get("spec")
            .map(|_| match server("generation").and_then(|g| g.as_u64()) {
                Some(g) if spec_changed => g + 1,
                Some(g) => g,
                None => 1,
            });
    let uid = server("uid").unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
    let created = server("creationTimestamp").unwrap_or_else(|| json!(now));
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("uid".to_owned(), uid);
        metadata.insert("resourceVersion".to_owned(), version);
        if let Some(generation) = generation {
            metadata.insert("generation".to_owned(), json!(generation));
        }
        metadata.insert("creationTimestamp".to_owned(), created);
    }
    if target.served.group.is_empty() && target.served.plural == "namespaces" {
        object["status"] = json!({"phase": "Active"});
    }
    api.objects.insert(key, object.clone());
    object
}

fn without(object: &Value, fields: &[&str]) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        for field in fields {
            map.remove(*field);
        }
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in fields {
                metadata.remove(*field);
            }
        }
    }
    copy
}

fn body(request: &Request<'_>) -> Result<Value, Status> {
    if request.content_type.contains("protobuf") || request.content_type.contains("cbor") {
        return Err(Status::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/apply-patch+yaml, application/merge-patch+json (not {})",
                request.content_type
            ),
        ));
    }
    // JSON is YAML: clients send either under `apply-patch+yaml`.
    serde_json::from_slice(request.body)
        .or_else(|_| serde_yaml_ng::from_slice::<Value>(request.body))
        .map_err(|e| {
            Status::bad_request(format!(
                "the body of the request was in an unknown format: {e}"
            ))
        })
        .and_then(|v| {
            if v.is_object() {
                Ok(v)
            } else {
                Err(Status::bad_request("the body is not an object"))
            }
        })
}

/// The manager of a write that is not an apply: `fieldManager`, or one named after the verb.
fn manager(request: &Request<'_>, verb: &str) -> String {
    request
        .query
        .get("fieldManager")
        .cloned()
        .unwrap_or_else(|| format!("unknown-{verb}"))
}

fn timestamp(request: &Request<'_>) -> String {
    request.now.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Removes the field at a violation's path (`spec.template.spec.containers[0].typo`).
fn drop_field(object: &mut Value, path: &str) {
    let mut steps: Vec<(String, Option<usize>)> = Vec::new();
    for part in path.split('.') {
        let (key, rest) = part.split_once('[').unwrap_or((part, ""));
        steps.push((key.to_owned(), None));
        for index in rest
            .split('[')
            .map(|i| i.trim_end_matches(']'))
            .filter(|i| !i.is_empty())
        {
            steps.push((String::new(), index.parse().ok()));
        }
    }
    let Some(((last, _), parents)) = steps.split_last() else {
        return;
    };
    let mut at = object;
    for (key, index) in parents {
        let next = match index {
            Some(i) => at.get_mut(*i),
            None => at.get_mut(key.as_str()),
        };
        match next {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(map) = at.as_object_mut() {
        map.remove(last);
    }
}

fn is_subdomain(name: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !name.is_empty()
        && name.len() <= 253
        && name.chars().all(ok_char)
        && alnum(name.chars().next())
        && alnum(name.chars().last())
}
