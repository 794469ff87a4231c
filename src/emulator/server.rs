//! The HTTP front door: every request passes authentication, fault injection and throttling in
//! the order ARM applies them, then reaches the provider handlers under one lock on the cloud.
//! Every answer carries `x-ms-request-id` and the remaining-requests header of its bucket.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::admin;
use super::authorization;
use super::config::{RecordedViolation, RequestInfo, ResponseInfo};
use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::imds;
use super::kube;
use super::ops;
use super::path::{self, Route};
use super::providers;
use super::shared::{Shared, lock, token_hash};
use super::store::Cloud;
use super::throttle::{Category, ComputeVerdict, Verdict, VmPolicy};

/// The single axum handler: admin routes first, then ARM.
pub(crate) async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let uri = single_leading_slash(uri);
    let path = uri.path().to_owned();
    if path.starts_with(imds::PREFIX) {
        let query = uri.query().unwrap_or_default();
        return imds::handle(&shared, method.as_str(), &path, query, &headers);
    }
    if path.starts_with(kube::PREFIX) {
        return kube::handle(&shared, &method, &uri, &headers, &body).await;
    }
    if path.starts_with(admin::PREFIX) {
        return admin::handle(&shared, method.as_str(), &path, &body);
    }
    let request_id = uuid::Uuid::new_v4().to_string();
    let correlation = headers
        .get("x-ms-correlation-request-id")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| request_id.clone(), str::to_owned);
    let began = std::time::Instant::now();
    let (reply, rate_header) = arm(&shared, &method, &uri, &headers, &body).await;
    // One debug line per ARM request (`dsinfra emulator --log-file F`): what a client sent and
    // what it got, to diagnose a client nobody here wrote. The path only: a query may carry a
    // filter or a skip token, never needed to tell which call it was.
    tracing::debug!(
        target: "dsinfra::emulator::request",
        method = %method,
        path = %uri.path(),
        status = reply.status,
        duration_ms = began.elapsed().as_secs_f64() * 1000.0,
        "ARM request"
    );
    lock(&shared.requests).count(method.as_str(), reply.status);
    check_response(&shared, &method, &uri, &body, &reply);
    let mut response = build(reply);
    let out = response.headers_mut();
    insert(out, "x-ms-request-id", &request_id);
    insert(out, "x-ms-correlation-request-id", &correlation);
    if let Some((name, remaining)) = rate_header {
        insert(out, name, &remaining.to_string());
    }
    response
}

/// The request's URI with its leading slashes collapsed into one. The official SDKs build
/// `{scope}` paths as `/{scope}/providers/...`, and the JavaScript SDK documents scopes that start
/// with `/` (`/subscriptions/...`), so its requests arrive as `//subscriptions/...`; ARM serves
/// them as the single-slash path, and ids stored from them must not keep the `//` (a list by
/// scope would then miss the resource).
fn single_leading_slash(uri: Uri) -> Uri {
    if !uri.path().starts_with("//") {
        return uri;
    }
    let path = format!("/{}", uri.path().trim_start_matches('/'));
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let mut parts = uri.into_parts();
    // The collapsed form of a valid path is valid; the request is kept as sent otherwise.
    if let Ok(collapsed) = path_and_query.parse() {
        parts.path_and_query = Some(collapsed);
    }
    Uri::from_parts(parts).unwrap_or_default()
}

/// Runs the configured response validator on an answer and records what it reports. The answer
/// itself is never changed: a test double that hid its own mistakes would defeat the check.
fn check_response(shared: &Shared, method: &Method, uri: &Uri, body: &Bytes, reply: &Reply) {
    let Some(validator) = &shared.config.response_validator else {
        return;
    };
    let request = RequestInfo {
        method: method.as_str().to_ascii_uppercase(),
        path: uri.path().to_owned(),
        api_version: parse_query(uri).remove("api-version"),
        body: serde_json::from_slice(body).ok(),
    };
    let response = ResponseInfo {
        status: reply.status,
        body: reply.body.clone(),
    };
    let found = validator(&request, &response);
    if found.is_empty() {
        return;
    }
    lock(&shared.response_violations).extend(found.into_iter().map(|message| RecordedViolation {
        method: request.method.clone(),
        path: request.path.clone(),
        status: Some(reply.status),
        message,
    }));
}

/// Runs the configured request validator. Violations are recorded and answered as ARM answers a
/// body it cannot accept: 400 `InvalidRequestContent`, every violation in the message and one
/// `details` entry each, so the client shows them verbatim.
fn check_request(shared: &Shared, request: &RequestInfo) -> Option<Reply> {
    let validator = shared.config.request_validator.as_ref()?;
    let found = validator(request);
    if found.is_empty() {
        return None;
    }
    lock(&shared.request_violations).extend(found.iter().map(|message| RecordedViolation {
        method: request.method.clone(),
        path: request.path.clone(),
        status: None,
        message: message.clone(),
    }));
    let details: Vec<Value> = found
        .iter()
        .map(|message| serde_json::json!({"code": "InvalidRequestContent", "message": message}))
        .collect();
    let message = format!(
        "The request content was invalid and could not be deserialized: {}",
        found.join("; ")
    );
    Some(Reply::json(
        400,
        serde_json::json!({"error": {
            "code": "InvalidRequestContent",
            "message": message,
            "details": details,
        }}),
    ))
}

fn insert(headers: &mut HeaderMap, name: &str, value: &str) {
    if let (Ok(name), Ok(value)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        headers.insert(name, value);
    }
}

fn build(reply: Reply) -> Response {
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = match reply.body {
        Some(body) => (status, axum::Json(body)).into_response(),
        None => status.into_response(),
    };
    for (name, value) in &reply.headers {
        insert(response.headers_mut(), name, value);
    }
    response
}

/// ARM's timestamp style in authentication messages, e.g. `5/13/2024 6:05:58 PM`.
fn arm_time(time: DateTime<Utc>) -> String {
    time.format("%-m/%-d/%Y %-I:%M:%S %p").to_string()
}

fn expired(now: DateTime<Utc>) -> ArmError {
    let expiry = now - chrono::Duration::minutes(5);
    ArmError::new(
        401,
        "ExpiredAuthenticationToken",
        format!(
            "The access token expiry UTC time '{}' is earlier than current UTC time '{}'.",
            arm_time(expiry),
            arm_time(now)
        ),
    )
}

fn unauthorized(err: ArmError, description: &str) -> Reply {
    Reply::from(err).header(
        "WWW-Authenticate",
        format!(
            "Bearer authorization_uri=\"https://login.microsoftonline.com/common\", \
             error=\"invalid_token\", error_description=\"{description}\""
        ),
    )
}

/// Checks the bearer token as ARM does, before anything else; returns the token's hash.
fn authenticate(shared: &Shared, headers: &HeaderMap, now: DateTime<Utc>) -> Result<u64, Reply> {
    let Some(value) = headers.get("authorization") else {
        return Err(unauthorized(
            ArmError::new(
                401,
                "AuthenticationFailed",
                "Authentication failed. The 'Authorization' header is missing.",
            ),
            "The authentication failed because of missing 'Authorization' header.",
        ));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return Err(unauthorized(
            ArmError::new(
                401,
                "AuthenticationFailed",
                "Authentication failed. The 'Authorization' header is provided in an invalid format.",
            ),
            "The authentication failed because of invalid 'Authorization' header.",
        ));
    };
    let hash = token_hash(token);
    // A token issued through the IMDS stand-in is valid besides the one the emulator requires.
    let managed = || {
        lock(&shared.cloud).imds_tokens.contains_key(&hash)
            || shared.config.callers.iter().any(|c| c.token == token)
    };
    if shared
        .config
        .required_token
        .as_deref()
        .is_some_and(|required| required != token)
        && !managed()
    {
        return Err(unauthorized(
            ArmError::new(
                401,
                "InvalidAuthenticationToken",
                "The access token is invalid.",
            ),
            "The access token is invalid.",
        ));
    }
    if lock(&shared.tokens_expired).contains(&hash) {
        return Err(unauthorized(expired(now), "The access token has expired."));
    }
    lock(&shared.tokens_seen).insert(hash);
    Ok(hash)
}

/// Authentication, then authorization: a managed identity's or a configured caller's token is
/// checked against its role assignments, as ARM does after authenticating; other tokens keep
/// full access (authorization/). Returns the principal whose rights were checked, if any.
fn admit(
    shared: &Shared,
    headers: &HeaderMap,
    now: DateTime<Utc>,
    method: &str,
    path: &str,
) -> Result<Option<String>, Reply> {
    let token = authenticate(shared, headers, now)?;
    let cloud = lock(&shared.cloud);
    authorization::authorize(&cloud, &shared.config, token, method, path).map_err(Reply::from)?;
    Ok(authorization::principal_of(&cloud, &shared.config, token))
}

/// Microsoft.Authorization lives at any scope (`{scope}/providers/Microsoft.Authorization/...`),
/// so it is routed before the path is read as a resource.
fn dispatch(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    route: &Route,
    path: &str,
) -> Result<Reply, ArmError> {
    if authorization::addresses(path) {
        authorization::dispatch(cloud, ctx)
    } else {
        providers::dispatch(cloud, ctx, route)
    }
}

fn subscription(route: &Route) -> Option<&str> {
    match route {
        Route::Subscription { sub }
        | Route::Groups { sub }
        | Route::Providers { sub }
        | Route::Resources { sub }
        | Route::GroupResources { sub, .. }
        | Route::Group { sub, .. }
        | Route::Location { sub, .. }
        | Route::Provider { sub, .. }
        | Route::GroupOperation { sub, .. } => Some(sub),
        Route::Resource(p) => Some(&p.sub),
        Route::Unknown => None,
    }
}

fn resource_type(route: &Route) -> Option<String> {
    match route {
        Route::Groups { .. } | Route::Group { .. } => {
            Some("Microsoft.Resources/resourceGroups".to_owned())
        }
        Route::Resource(p) if !p.segments.is_empty() => Some(p.rtype()),
        _ => None,
    }
}

fn parse_query(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (
                path::percent_decode(k).to_ascii_lowercase(),
                path::percent_decode(&v.replace('+', " ")),
            )
        })
        .collect()
}

/// `http://` and the request's `Host`, so links in answers lead back the way the client came;
/// the emulator's own endpoint when there is no usable `Host`.
fn origin(shared: &Shared, headers: &HeaderMap) -> String {
    headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty())
        .map_or_else(|| shared.endpoint.clone(), |host| format!("http://{host}"))
}

type RateHeader = Option<(&'static str, u32)>;

/// Draws from the subscription's bucket: the remaining-count header to send, and the 429 when
/// the bucket is empty and throttling is on.
fn take_token(shared: &Shared, route: &Route, category: Category) -> (RateHeader, Option<Reply>) {
    let Some(sub) = subscription(route) else {
        return (None, None);
    };
    let verdict = lock(&shared.throttle).take(
        sub,
        category,
        tokio::time::Instant::now(),
        shared.config.latency_scale,
    );
    match verdict {
        Verdict::Allowed { remaining } => (Some((category.header(), remaining)), None),
        Verdict::Throttled { retry_after } if shared.throttling() => {
            let err = ArmError::new(
                429,
                "SubscriptionRequestsThrottled",
                format!(
                    "Number of '{}' requests for subscription '{sub}' actor 'emulator' exceeded. \
                     Please try again after '{retry_after}' seconds after the last request and \
                     refer to https://aka.ms/arm-throttling for more details.",
                    category.label(),
                ),
            );
            let reply = Reply::from(err).header("Retry-After", retry_after.to_string());
            (Some((category.header(), 0)), Some(reply))
        }
        Verdict::Throttled { .. } => (Some((category.header(), 0)), None),
    }
}

/// The header in which Compute reports its policies.
const RESOURCE_HEADER: &str = "x-ms-ratelimit-remaining-resource";

/// Draws from Compute's VM write policies when the request is one (`None` for everything
/// else), or Compute's 429 when the request is refused and throttling is on.
fn compute_token(
    shared: &Shared,
    route: &Route,
    method: &str,
    now: DateTime<Utc>,
) -> Result<Option<ComputeVerdict>, Reply> {
    let Route::Resource(path) = route else {
        return Ok(None);
    };
    let (Some(policy), Some((vm_type, vm_name))) =
        (VmPolicy::of(method, path), path.segments.first())
    else {
        return Ok(None);
    };
    let vm = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/{}/{vm_type}/{vm_name}",
        path.sub, path.group, path.namespace
    );
    let verdict = lock(&shared.throttle).take_compute(
        &path.sub,
        &vm,
        policy,
        &shared.config.compute_limits,
        tokio::time::Instant::now(),
        shared.config.latency_scale,
    );
    match verdict.refusal_reply(now) {
        Some(refused) if shared.throttling() => Err(with_compute_header(refused, Some(&verdict))),
        _ => Ok(Some(verdict)),
    }
}

/// Adds Compute's remaining-requests header to an answer to a VM write.
fn with_compute_header(reply: Reply, verdict: Option<&ComputeVerdict>) -> Reply {
    match verdict {
        Some(verdict) => reply.header(RESOURCE_HEADER, verdict.header_value()),
        None => reply,
    }
}

/// The request body as JSON; `None` when it is empty or only whitespace.
fn parse_body(body: &Bytes) -> Result<Option<Value>, ArmError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice::<Value>(body)
        .map(Some)
        .map_err(|err| {
            ArmError::invalid_request(format!(
                "The request content was invalid and could not be deserialized: '{err}'."
            ))
        })
}

async fn arm(
    shared: &Shared,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> (Reply, RateHeader) {
    let now = shared.clock.now();
    let path = uri.path();
    let route = path::parse(path);
    let method_name = method.as_str().to_ascii_uppercase();
    let caller = match admit(shared, headers, now, &method_name, path) {
        Ok(caller) => caller,
        Err(reply) => return (reply, None),
    };
    let category = Category::of(&method_name);
    let rtype = resource_type(&route);
    let decision = lock(&shared.faults).decide(&method_name, path, rtype.as_deref());
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    if decision.expire_token {
        return (
            unauthorized(expired(now), "The access token has expired."),
            None,
        );
    }
    let (rate, throttled) = take_token(shared, &route, category);
    if let Some(reply) = throttled {
        return (reply, rate);
    }
    if let Some((err, retry_after)) = decision.respond {
        let mut reply = Reply::from(err);
        if let Some(seconds) = retry_after {
            reply = reply.header("Retry-After", seconds.to_string());
        }
        return (reply, rate);
    }
    let query = parse_query(uri);
    let Some(api_version) = query.get("api-version").cloned() else {
        let err = ArmError::new(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
        return (err.into(), rate);
    };
    let mut body = match parse_body(body) {
        Ok(body) => body,
        Err(err) => return (err.into(), rate),
    };
    if shared.config.request_validator.is_some() {
        let request = RequestInfo {
            method: method_name.clone(),
            path: path.to_owned(),
            api_version: Some(api_version.clone()),
            body,
        };
        if let Some(reply) = check_request(shared, &request) {
            return (reply, rate);
        }
        body = request.body;
    }
    // Compute's own limits come after ARM's front door, where the provider takes the request.
    let compute = match compute_token(shared, &route, &method_name, now) {
        Ok(compute) => compute,
        Err(refused) => return (refused, rate),
    };
    let mut ctx = Ctx {
        config: &shared.config,
        endpoint: &shared.endpoint,
        origin: origin(shared, headers),
        kube_api: &shared.kube_api,
        uri,
        now,
        method: method_name.clone(),
        query,
        api_version,
        body,
        fail_operation: decision.fail_operation.as_ref().map(|(_, e)| e.clone()),
        took_failure: false,
        caller,
    };
    let (reply, change) = {
        let mut cloud = lock(&shared.cloud);
        let advanced = ops::advance(&mut cloud, now, &shared.completions);
        let reply = dispatch(&mut cloud, &mut ctx, &route, path);
        let wrote = method_name != "GET" && method_name != "HEAD";
        (reply, (advanced || wrote).then(|| cloud.mark_changed()))
    };
    // Answered only once the change is on disk, but written outside the lock: other requests go
    // on meanwhile, and their changes join the next write.
    let saved = match change {
        Some((persist, version)) => shared.persist(&persist, version).await,
        None => Ok(()),
    };
    let reply = match (reply, saved) {
        (_, Err(err)) | (Err(err), _) => Reply::from(err),
        (Ok(reply), Ok(())) => reply,
    };
    let reply = with_compute_header(reply, compute.as_ref());
    if ctx.took_failure
        && let Some((id, _)) = decision.fail_operation
    {
        lock(&shared.faults).consume(id);
    }
    (reply, rate)
}
