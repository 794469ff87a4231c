//! The OpenAPI v3 documents kubectl reads before it writes: `/openapi/v3` lists one document per
//! group version, and each document's operations say which query parameters the server takes.
//! kubectl sends `fieldValidation=Strict` (server-side field validation) only to a server whose
//! PATCH operation of the kind lists that parameter; otherwise it validates on its own against
//! the documents' schemas, which the stand-in does not serve (its validation is the server's).

use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use super::resources::{Served, served};
use crate::emulator::store::KubeObjects;

/// `GET /openapi/v3`: each group version's document, its URL carrying a hash of what it holds
/// (clients cache documents by that URL).
pub(super) fn index(api: &KubeObjects) -> Value {
    let mut paths = Map::new();
    let all = served(api);
    for s in &all {
        let name = s.prefix().trim_start_matches('/').to_owned();
        if paths.contains_key(&name) {
            continue;
        }
        let hash = fingerprint(&document_of(&all, &s.prefix()));
        paths.insert(
            name.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{name}?hash={hash:016X}")}),
        );
    }
    json!({"paths": paths})
}

/// `GET /openapi/v3/{api/v1 | apis/group/version}`.
pub(super) fn document(api: &KubeObjects, group_version: &str) -> Option<Value> {
    let prefix = format!("/{}", group_version.trim_end_matches('/'));
    let all = served(api);
    all.iter()
        .any(|s| s.prefix() == prefix)
        .then(|| document_of(&all, &prefix))
}

fn document_of(all: &[Served], prefix: &str) -> Value {
    let mut paths = Map::new();
    for s in all.iter().filter(|s| s.prefix() == prefix) {
        let gvk = json!({"group": s.group, "version": s.version, "kind": s.kind});
        let item = if s.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", s.plural)
        } else {
            format!("{prefix}/{}/{{name}}", s.plural)
        };
        let operation = |id: &str, params: &[&str]| {
            let parameters: Vec<Value> = params
                .iter()
                .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
                .collect();
            json!({
                "operationId": format!("{id}{}", s.kind),
                "parameters": parameters,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": id,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        paths.insert(
            item,
            json!({
                "get": operation("get", &[]),
                "put": operation("put", &["dryRun", "fieldManager", "fieldValidation"]),
                "patch": operation("patch", &["dryRun", "fieldManager", "fieldValidation", "force"]),
                "delete": operation("delete", &["dryRun"]),
            }),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": {}},
    })
}

fn fingerprint(value: &Value) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}
