//! The Kubernetes API of each emulated AKS cluster: the stand-in the kubeconfig of
//! `listClusterUserCredential` points at (`{origin}/_kubernetes{cluster key}`), driven in tests by
//! the real `kubectl` and the official Python `kubernetes` client.
//!
//! One module per idea: `resources` (the kinds served, built in or from a CRD, and the discovery
//! documents), `openapi` (the OpenAPI v3 index and documents kubectl reads before it sends a
//! request), `objects` (create, get, list, replace, merge patch, delete, and the checks every
//! stored object passes), `apply` (server-side apply: field ownership, conflicts, removal of
//! fields a manager stopped applying), `status` (the API server's `Status` answers).
//!
//! Modelled: discovery (legacy JSON documents; a client asking for aggregated discovery gets them
//! and falls back, as against an older server), `/version`, field validation (`Strict`, `Warn`,
//! `Ignore`) against the published schemas of `kubernetes-validate` (the emulator's
//! `kube_schemas`) and a CRD's own schema, server-side apply with `managedFields`,
//! `resourceVersion` and `generation`, namespaces (a namespaced object needs its namespace;
//! deleting a namespace deletes what it holds, at once), CRDs (served once created, their custom
//! resources deleted with them). Not modelled: scheduling, pods running, controllers (a
//! Deployment makes no ReplicaSet), CSI mounts, GPUs, watches, admission, RBAC (the cluster's one
//! user token may do anything), defaulting, a strategic merge patch's list merging (lists are replaced, as by a merge patch), JSON
//! patch (415), protobuf and CBOR bodies (415: kubectl's typed generators such as
//! `kubectl create configmap` send protobuf; `kubectl apply -f`, `get`, `delete` send JSON), and
//! server-side printing (`kubectl get` shows NAME and AGE only).

mod apply;
mod objects;
mod openapi;
mod resources;
mod status;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::json::At as _;
use super::path::percent_decode;
use super::shared::{Shared, lock};
use super::store::{Cloud, KubeObjects};
use status::Status;

/// Where every cluster's API is served, followed by the cluster's key.
pub(crate) const PREFIX: &str = "/_kubernetes/";

/// The key of the emulator's own bookkeeping in a stored cluster body (its API token).
const HIDDEN_TOKEN: &str = "/dsinfraEmulator/token";

/// What one request asks of a cluster's API, once the cluster is found and the caller admitted.
pub(super) struct Request<'a> {
    pub method: &'a str,
    /// The API path: `/api/v1/namespaces/default/configmaps/x`.
    pub path: &'a str,
    pub query: BTreeMap<String, String>,
    pub content_type: &'a str,
    pub body: &'a [u8],
    /// The version the cluster runs (`1.33.2`), for `/version`.
    pub version: String,
    pub now: chrono::DateTime<chrono::Utc>,
    pub schemas: Option<&'a crate::kubeschema::Schemas>,
}

/// An answer: its status, body and warnings (`Warning: 299 - "..."` headers).
pub(super) struct Answer {
    pub status: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

impl Answer {
    pub fn ok(body: Value) -> Self {
        Self {
            status: 200,
            body,
            warnings: Vec::new(),
        }
    }
}

impl From<Status> for Answer {
    fn from(status: Status) -> Self {
        Self {
            status: status.code,
            body: status.body(),
            warnings: Vec::new(),
        }
    }
}

/// Serves `{PREFIX}{cluster key}{API path}`.
pub(crate) async fn handle(
    shared: &Arc<Shared>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let (answer, change) = {
        let mut cloud = lock(&shared.cloud);
        let answer = serve(shared, &mut cloud, method, uri, headers, body);
        let wrote = answer.status < 300 && !matches!(method.as_str(), "GET" | "HEAD");
        (answer, wrote.then(|| cloud.mark_changed()))
    };
    let answer = match change {
        Some((persist, version)) => match shared.persist(&persist, version).await {
            Ok(()) => answer,
            Err(err) => Status::new(500, "InternalError", err.message.clone()).into(),
        },
        None => answer,
    };
    tracing::debug!(
        target: "dsinfra::emulator::request",
        method = %method,
        path = %uri.path(),
        status = answer.status,
        "Kubernetes API request"
    );
    respond(answer)
}

fn serve(
    shared: &Shared,
    cloud: &mut Cloud,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Answer {
    let rest = &uri.path()[PREFIX.len() - 1..];
    let Some((cluster_key, api_path)) = split_cluster(rest) else {
        return Status::not_found_path(uri.path()).into();
    };
    let Some(cluster) = cloud.resources.get(&cluster_key) else {
        // A real cluster's API is gone with it: no DNS name answers any more.
        cloud.kube.remove(&cluster_key);
        return Status::new(
            503,
            "ServiceUnavailable",
            format!("no managed cluster {cluster_key} answers: it does not exist (any more)"),
        )
        .into();
    };
    let props = cluster
        .body
        .get("properties")
        .cloned()
        .unwrap_or(Value::Null);
    if props.at("/powerState/code").and_then(Value::as_str) == Some("Stopped") {
        return Status::new(
            503,
            "ServiceUnavailable",
            "the cluster is stopped: its API server does not answer until it is started",
        )
        .into();
    }
    let sent = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|t| !t.is_empty());
    // An Entra-ID cluster takes an Entra token (the emulator takes, as ARM does, the configured
    // token or any; its audience is not checked); one with local accounts, its own token.
    let admitted = if props.at("/aadProfile/managed") == Some(&Value::Bool(true)) {
        sent.is_some_and(|t| {
            shared
                .config
                .required_token
                .as_deref()
                .is_none_or(|r| r == t)
        })
    } else {
        let token = cluster.body.at(HIDDEN_TOKEN).and_then(Value::as_str);
        token.is_some() && sent == token
    };
    if !admitted {
        return Status::new(401, "Unauthorized", "Unauthorized").into();
    }
    let version = props
        .get("currentKubernetesVersion")
        .and_then(Value::as_str)
        .unwrap_or("1.33.0")
        .to_owned();
    let request = Request {
        method: method.as_str(),
        path: api_path,
        query: query(uri),
        content_type: headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or(""),
        body,
        version,
        now: shared.clock.now(),
        schemas: shared.config.kube_schemas.as_deref(),
    };
    let api = cloud.kube.entry(cluster_key).or_default();
    objects::boot(api, &request);
    route(api, &request)
}

fn route(api: &mut KubeObjects, request: &Request<'_>) -> Answer {
    let path = request.path.trim_end_matches('/');
    if request.method == "GET" {
        match path {
            "/version" => return Answer::ok(version(&request.version)),
            "/api" => return Answer::ok(resources::api_versions()),
            "/apis" => return Answer::ok(resources::api_groups(api)),
            "/openapi/v3" => return Answer::ok(openapi::index(api)),
            _ => {}
        }
        if let Some(group_version) = path.strip_prefix("/openapi/v3/") {
            return openapi::document(api, group_version)
                .map_or_else(|| Status::not_found_path(request.path).into(), Answer::ok);
        }
        if let Some(list) = resources::resource_list(api, path) {
            return Answer::ok(list);
        }
    }
    objects::serve(api, request)
}

/// Splits `/subscriptions/.../managedclusters/{name}/api/v1/...` after the cluster's name.
fn split_cluster(rest: &str) -> Option<(String, &str)> {
    let lower = rest.to_ascii_lowercase();
    let at = lower.find("/providers/microsoft.containerservice/managedclusters/")?
        + "/providers/microsoft.containerservice/managedclusters/".len();
    let end = rest[at..].find('/').map_or(rest.len(), |i| at + i);
    Some((lower[..end].to_owned(), &rest[end..]))
}

fn query(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(&v.replace('+', " ")))
        })
        .collect()
}

fn version(version: &str) -> Value {
    let mut parts = version.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": format!("v{version}"),
        "platform": "linux/amd64",
    })
}

fn respond(answer: Answer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(answer.body)).into_response();
    for warning in answer.warnings {
        let text = format!("299 - {}", serde_json::Value::String(warning));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append("warning", value);
        }
    }
    response
}
