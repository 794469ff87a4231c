//! The stand-in for the instance metadata service's managed-identity token endpoint. On Azure a
//! program on a VM asks `http://169.254.169.254/metadata/identity/oauth2/token` for a token of
//! the VM's identity; here each VM has its own base, `{endpoint}/_emulator/imds{vm id}`, because
//! every "VM" of a test shares one host.
//!
//! Tokens are opaque random strings bound to the VM's principal. Only their hashes are kept (in
//! the cloud, so they survive a restart of the emulator), and they are never logged; ARM
//! requests carrying one are authorized against the principal's role assignments (see
//! authorization/).

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::compute;
use super::ops;
use super::resource::key;
use super::shared::{Shared, lock, token_hash};

/// Where the stand-in's paths start; the VM's id follows.
pub(crate) const PREFIX: &str = "/_emulator/imds/";

/// The token endpoint's path after the VM's id, as on Azure.
const TOKEN_PATH: &str = "/metadata/identity/oauth2/token";

/// The Scheduled Events endpoint's path after the VM's id, as on Azure.
const EVENTS_PATH: &str = "/metadata/scheduledevents";

/// How long a token lives, as IMDS reports it (a string, like every IMDS number).
const EXPIRES_IN: i64 = 86_399;

/// The audiences that name ARM.
const ARM_RESOURCES: [&str; 4] = [
    "https://management.azure.com/",
    "https://management.azure.com",
    "https://management.core.windows.net/",
    "https://management.core.windows.net",
];

fn answer(status: StatusCode, body: &Value) -> Response {
    (status, axum::Json(body.clone())).into_response()
}

fn invalid(description: &str) -> Response {
    answer(
        StatusCode::BAD_REQUEST,
        &json!({"error": "invalid_request", "error_description": description}),
    )
}

/// A host that does not answer: what a caller on a VM that is not running would see (it never
/// does, having stopped with its VM).
fn unreachable(vm_id: &str) -> Response {
    answer(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({"error": "unavailable", "error_description":
            format!("VM {vm_id} is not running: nothing answers on its host")}),
    )
}

/// Serves `GET {PREFIX}{vm id}/metadata/identity/oauth2/token` and
/// `GET {PREFIX}{vm id}/metadata/scheduledevents`.
pub(crate) fn handle(
    shared: &Shared,
    method: &str,
    path: &str,
    query: &str,
    headers: &HeaderMap,
) -> Response {
    if let Some(vm_id) = path
        .strip_prefix(PREFIX.trim_end_matches('/'))
        .and_then(|rest| rest.strip_suffix(EVENTS_PATH))
        .filter(|id| !id.is_empty())
    {
        return events(shared, method, vm_id, query, headers);
    }
    let Some(vm_id) = path
        .strip_prefix(PREFIX.trim_end_matches('/'))
        .and_then(|rest| rest.strip_suffix(TOKEN_PATH))
        .filter(|id| !id.is_empty())
    else {
        return answer(
            StatusCode::NOT_FOUND,
            &json!({"error": "not_found", "error_description": format!(
                "The emulator's IMDS stand-in serves only \
                 {PREFIX}{{vm id}}{TOKEN_PATH} and {PREFIX}{{vm id}}{EVENTS_PATH}, not {path}")}),
        );
    };
    if !method.eq_ignore_ascii_case("GET") {
        return answer(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "invalid_request", "error_description": "The method is not allowed"}),
        );
    }
    let metadata = headers
        .get("metadata")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !metadata {
        return invalid("Required metadata header not specified");
    }
    let params: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (k.to_ascii_lowercase(), super::path::percent_decode(v))
        })
        .collect();
    let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    if param("api-version").is_none() {
        return answer(
            StatusCode::BAD_REQUEST,
            &json!({"error": "Bad request", "error_description": "Required query variable 'api-version' is missing"}),
        );
    }
    let Some(resource) = param("resource") else {
        return invalid("Required audience parameter not specified");
    };
    if !ARM_RESOURCES.contains(&resource.as_str()) {
        return answer(
            StatusCode::BAD_REQUEST,
            &json!({"error": "invalid_resource", "error_description": format!(
                "The emulator's IMDS stand-in issues tokens for ARM only \
                 (resource=https://management.azure.com/), not for '{resource}'")}),
        );
    }
    issue(shared, vm_id, resource)
}

/// The Scheduled Events document of a running VM: Preempt events of spot evictions announced
/// for it and for the members of its availability set (compute/spot.rs). As on Azure the
/// `Metadata: true` header and an `api-version` are required.
fn events(
    shared: &Shared,
    method: &str,
    vm_id: &str,
    query: &str,
    headers: &HeaderMap,
) -> Response {
    if !method.eq_ignore_ascii_case("GET") {
        return answer(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "invalid_request", "error_description": "The method is not allowed"}),
        );
    }
    let metadata = headers
        .get("metadata")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !metadata {
        return invalid("Required metadata header not specified");
    }
    if !query
        .split('&')
        .any(|p| p.to_ascii_lowercase().starts_with("api-version="))
    {
        return answer(
            StatusCode::BAD_REQUEST,
            &json!({"error": "Bad request", "error_description": "Required query variable 'api-version' is missing"}),
        );
    }
    let now = shared.clock.now();
    let mut cloud = lock(&shared.cloud);
    ops::advance(&mut cloud, now, &shared.completions);
    let vm_key = key(vm_id);
    let running = cloud
        .resources
        .get(&vm_key)
        .filter(|r| !r.hidden && r.kind == super::store::Kind::VirtualMachine)
        .is_some_and(|vm| vm.power.as_deref() == Some("running"));
    if !running {
        return unreachable(vm_id);
    }
    answer(StatusCode::OK, &compute::scheduled_events(&cloud, &vm_key))
}

/// Issues a token for the VM's principal, if the VM runs and has one.
fn issue(shared: &Shared, vm_id: &str, resource: &str) -> Response {
    let now = shared.clock.now();
    let mut cloud = lock(&shared.cloud);
    ops::advance(&mut cloud, now, &shared.completions);
    let Some(vm) = cloud
        .resources
        .get(&key(vm_id))
        .filter(|r| !r.hidden && r.kind == super::store::Kind::VirtualMachine)
    else {
        return unreachable(vm_id);
    };
    if vm.power.as_deref() != Some("running") {
        return unreachable(vm_id);
    }
    let Some(principal) = compute::principal_of(vm).map(str::to_owned) else {
        return invalid("Identity not found");
    };
    let token = format!(
        "emu-mi.{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    cloud
        .imds_tokens
        .insert(token_hash(&token), principal.clone());
    if shared.save(&mut cloud).is_err() {
        return answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": "server_error", "error_description": "The emulator could not save its state"}),
        );
    }
    let issued = now.timestamp();
    answer(
        StatusCode::OK,
        &json!({
            "access_token": token,
            "client_id": client_id(&principal),
            "expires_in": EXPIRES_IN.to_string(),
            "expires_on": (issued + EXPIRES_IN).to_string(),
            "ext_expires_in": EXPIRES_IN.to_string(),
            "not_before": issued.to_string(),
            "resource": resource,
            "token_type": "Bearer",
        }),
    )
}

/// The application (client) id of a system-assigned identity: on Azure distinct from the
/// principal's object id and stable; here derived from it.
fn client_id(principal: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(principal.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}
