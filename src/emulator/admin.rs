//! The emulator's own HTTP API under `/_emulator/`, for tests and tools in other processes:
//! fault rules, token expiry, the operations it ran, the ARM requests it answered (counts),
//! throttling switched on or off, and the public-IP to local-SSH-endpoint map. It needs no token
//! and is not throttled; it is not part of ARM and only listens on 127.0.0.1.

use std::net::SocketAddr;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::faults::FaultRule;
use super::json::At as _;
use super::network::vm_public_ip;
use super::resource::key;
use super::shared::{RequestTally, Shared, lock};
use super::store::Kind;
use crate::engine::reach::SshEndpoint;

/// The reserved path prefix.
pub(crate) const PREFIX: &str = "/_emulator/";

fn reply(status: StatusCode, body: &Value) -> Response {
    (status, axum::Json(body.clone())).into_response()
}

fn bad_request(message: &str) -> Response {
    reply(
        StatusCode::BAD_REQUEST,
        &json!({"error": {"code": "BadRequest", "message": message}}),
    )
}

/// A mapping request: an address or a resource id (public IP or VM), and the local endpoint.
#[derive(Deserialize)]
struct MapRequest {
    #[serde(rename = "ipAddress")]
    ip_address: Option<String>,
    #[serde(rename = "resourceId")]
    resource_id: Option<String>,
    endpoint: String,
}

pub(crate) fn handle(shared: &Shared, method: &str, path: &str, body: &[u8]) -> Response {
    let route = path.trim_start_matches(PREFIX).trim_end_matches('/');
    match (method, route) {
        ("GET", "health") => reply(StatusCode::OK, &json!({"status": "ok"})),
        ("GET", "faults") => {
            let faults = lock(&shared.faults).list();
            reply(StatusCode::OK, &json!({ "value": faults }))
        }
        ("POST", "faults") => {
            let rules: Vec<FaultRule> = match serde_json::from_slice::<Value>(body) {
                Ok(Value::Array(items)) => match serde_json::from_value(Value::Array(items)) {
                    Ok(rules) => rules,
                    Err(err) => return bad_request(&err.to_string()),
                },
                Ok(single) => match serde_json::from_value(single) {
                    Ok(rule) => vec![rule],
                    Err(err) => return bad_request(&err.to_string()),
                },
                Err(err) => return bad_request(&err.to_string()),
            };
            let mut table = lock(&shared.faults);
            let ids: Vec<u64> = rules.into_iter().map(|r| table.add(r)).collect();
            reply(StatusCode::CREATED, &json!({ "ids": ids }))
        }
        ("DELETE", "faults") => {
            lock(&shared.faults).clear();
            StatusCode::NO_CONTENT.into_response()
        }
        ("POST", "tokens/expire") => {
            shared.expire_tokens();
            StatusCode::NO_CONTENT.into_response()
        }
        // The operations the emulator ran (kind, target, started, due), the same records its
        // state file holds: benchmarks measure the critical path from them without a state dir.
        ("GET", "operations") => {
            let operations = lock(&shared.cloud).operations.clone();
            reply(StatusCode::OK, &json!({ "operations": operations }))
        }
        // The ARM requests answered since the start (or the last DELETE), by method and status:
        // the refresh benchmark counts a plan's calls and its 429s with it.
        ("GET", "requests") => {
            let tally = lock(&shared.requests).clone();
            reply(
                StatusCode::OK,
                &serde_json::to_value(tally).unwrap_or(Value::Null),
            )
        }
        ("DELETE", "requests") => {
            *lock(&shared.requests) = RequestTally::default();
            StatusCode::NO_CONTENT.into_response()
        }
        ("GET", "throttle") => reply(StatusCode::OK, &json!({"enabled": shared.throttling()})),
        ("PUT", "throttle") => {
            let Some(on) = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("enabled").and_then(Value::as_bool))
            else {
                return bad_request("give {\"enabled\": true} or {\"enabled\": false}");
            };
            shared.set_throttling(on);
            reply(StatusCode::OK, &json!({"enabled": on}))
        }
        // Announces a spot VM's eviction (a Preempt event) and carries it out after the notice:
        // what `simulateEviction` does, with the notice chosen per call.
        ("POST", "evictions") => evict(shared, body),
        // Azure takes back a low-priority AmlCompute node: `{"computeId": ..., "nodeId": ...}`.
        ("POST", "aml-preemptions") => preempt(shared, body),
        ("GET", "evictions") => {
            let evictions = lock(&shared.cloud).evictions.clone();
            reply(StatusCode::OK, &json!({ "value": evictions }))
        }
        ("GET", "ssh-endpoints") => {
            let endpoints = lock(&shared.cloud).ssh_endpoints.clone();
            reply(StatusCode::OK, &json!({ "value": endpoints }))
        }
        ("POST" | "PUT", "ssh-endpoints") => {
            let request: MapRequest = match serde_json::from_slice(body) {
                Ok(r) => r,
                Err(err) => return bad_request(&err.to_string()),
            };
            match map_ssh(
                shared,
                request.ip_address.as_deref(),
                request.resource_id.as_deref(),
                &request.endpoint,
            ) {
                Ok(mapped) => reply(
                    StatusCode::OK,
                    &serde_json::to_value(mapped).unwrap_or(Value::Null),
                ),
                Err(message) => bad_request(&message),
            }
        }
        ("DELETE", "ssh-endpoints") => {
            let mut cloud = lock(&shared.cloud);
            cloud.ssh_endpoints.clear();
            let _ = shared.save(&mut cloud);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            &json!({"error": {"code": "NotFound", "message": format!("No emulator admin route {method} {path}.")}}),
        ),
    }
}

/// `POST /_emulator/aml-preemptions {"computeId": AmlCompute id, "nodeId": id}`.
fn preempt(shared: &Shared, body: &[u8]) -> Response {
    #[derive(Deserialize)]
    struct PreemptRequest {
        #[serde(rename = "computeId")]
        compute_id: String,
        #[serde(rename = "nodeId")]
        node_id: String,
    }
    let request: PreemptRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(err) => return bad_request(&err.to_string()),
    };
    let now = shared.clock.now();
    let mut cloud = lock(&shared.cloud);
    match super::ml::preempt_node(
        &mut cloud,
        &shared.config,
        (&super::resource::key(&request.compute_id), &request.node_id),
        now,
    ) {
        Ok(()) => {
            let _ = shared.save(&mut cloud);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(message) => bad_request(&message),
    }
}

/// `POST /_emulator/evictions {"resourceId": VM id, "noticeSeconds": N}`.
fn evict(shared: &Shared, body: &[u8]) -> Response {
    #[derive(Deserialize)]
    struct EvictRequest {
        #[serde(rename = "resourceId")]
        resource_id: String,
        #[serde(rename = "noticeSeconds")]
        notice_seconds: Option<u64>,
    }
    let request: EvictRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(err) => return bad_request(&err.to_string()),
    };
    let now = shared.clock.now();
    let mut cloud = lock(&shared.cloud);
    let notice = request
        .notice_seconds
        .unwrap_or(shared.config.eviction_notice_secs);
    match super::compute::schedule_eviction(
        &mut cloud,
        &super::resource::key(&request.resource_id),
        now,
        notice,
    ) {
        Ok(eviction) => {
            let _ = shared.save(&mut cloud);
            reply(
                StatusCode::ACCEPTED,
                &serde_json::to_value(eviction).unwrap_or(Value::Null),
            )
        }
        Err(err) => reply(
            StatusCode::from_u16(err.status).unwrap_or(StatusCode::BAD_REQUEST),
            &json!({"error": {"code": err.code, "message": err.message}}),
        ),
    }
}

/// Used by [`super::map_ssh`] to build the stored mapping.
pub(crate) fn endpoint(ip: String, endpoint: &str, public_ip_id: Option<String>) -> SshEndpoint {
    SshEndpoint {
        ip_address: ip,
        endpoint: endpoint.to_owned(),
        public_ip_id,
        port: None,
    }
}

/// Shared by the handle and the admin API.
pub(crate) fn map_ssh(
    shared: &Shared,
    ip_address: Option<&str>,
    resource_id: Option<&str>,
    endpoint: &str,
) -> Result<SshEndpoint, String> {
    if endpoint.parse::<SocketAddr>().is_err() {
        return Err(format!(
            "endpoint {endpoint:?} is not a socket address such as 127.0.0.1:2222"
        ));
    }
    let mut cloud = lock(&shared.cloud);
    let (ip, pip_id) = match (ip_address, resource_id) {
        (Some(ip), _) => (ip.to_owned(), None),
        (None, Some(id)) => {
            let id_key = key(id);
            let resource = cloud
                .resources
                .get(&id_key)
                .ok_or_else(|| format!("no resource {id}"))?;
            match resource.kind {
                Kind::PublicIpAddress => {
                    let ip = resource
                        .body
                        .at("/properties/ipAddress")
                        .and_then(serde_json::Value::as_str)
                        .ok_or_else(|| format!("public IP {id} has no address"))?;
                    (ip.to_owned(), Some(resource.id.clone()))
                }
                Kind::VirtualMachine => {
                    let (ip, pip) = vm_public_ip(&cloud, &id_key)
                        .ok_or_else(|| format!("VM {id} has no public IP address"))?;
                    (ip, Some(pip))
                }
                _ => return Err(format!("{id} is neither a public IP nor a VM")),
            }
        }
        (None, None) => return Err("give ipAddress or resourceId".into()),
    };
    let mapped = self::endpoint(ip, endpoint, pip_id);
    cloud
        .ssh_endpoints
        .retain(|e| e.ip_address != mapped.ip_address);
    cloud.ssh_endpoints.push(mapped.clone());
    shared.save(&mut cloud).map_err(|e| e.message)?;
    Ok(mapped)
}
