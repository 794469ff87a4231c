//! The ARM transport: one reqwest client, bearer tokens, request ids, retries, pacing, and the
//! generic resource operations (`put`, `get`, `delete`, `post_action`, `list`).
//!
//! Every request goes through [`ArmClient::execute`], which is the only place that touches the
//! network: it waits for the rate-limit pacer, attaches a (cached) token, takes a permit from the
//! caller's [`RequestGate`] if the client is [gated](ArmClient::gated) (for the exchange only),
//! sends, records the rate-limit headers, refreshes the token once on 401
//! ExpiredAuthenticationToken, and retries what [`retry::classify`] says is safe. Nothing it logs
//! or returns contains a token, a request body (customData) or a query string.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use reqwest::Url;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::api_version::api_version_for_path;
use super::credential::{TokenCache, TokenCredential};
use super::error::{ArmError, ErrorDetail, RequestInfo, ThrottleWait};
use super::lro::{
    Disposition, LroProgress, PollPolicy, ProgressCallback, initial_disposition, poll_url,
    provisioning_state,
};
use super::ratelimit::{
    Load, Pacer, RESOURCE_HEADER, RequestGate, Target, parse_remaining, parse_resource_policies,
};
use super::resource_id::ResourceId;
use super::retry::{
    AttemptOutcome, RetryDecision, RetryPolicy, classify, parse_retry_after, parse_retry_after_ms,
};

/// Azure's public-cloud ARM endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://management.azure.com";

/// `User-Agent` of every request.
pub const USER_AGENT: &str = concat!("dsinfra/", env!("CARGO_PKG_VERSION"));

/// HTTP methods the client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET.
    Get,
    /// PUT.
    Put,
    /// PATCH.
    Patch,
    /// POST.
    Post,
    /// DELETE.
    Delete,
}

impl Method {
    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Post => "POST",
            Self::Delete => "DELETE",
        }
    }

    fn to_reqwest(self) -> reqwest::Method {
        match self {
            Self::Get => reqwest::Method::GET,
            Self::Put => reqwest::Method::PUT,
            Self::Patch => reqwest::Method::PATCH,
            Self::Post => reqwest::Method::POST,
            Self::Delete => reqwest::Method::DELETE,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether repeating a request is harmless, which decides whether 5xx and timeouts retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotency {
    /// Repeating it leaves the same end state (GET, PUT, DELETE, polls, most VM power actions).
    Idempotent,
    /// Repeating it may do the work twice (POST actions by default).
    NotIdempotent,
}

/// How a DELETE ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// Something was deleted (200, or an operation that succeeded).
    Deleted,
    /// There was nothing to delete (204, or 404 on the resource itself).
    AlreadyAbsent,
}

/// One response, read whole.
#[derive(Debug, Clone)]
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) body: Vec<u8>,
    pub(crate) info: RequestInfo,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The wait this response asks for, in the client's time (what [`ArmClient::sleep`]
    /// multiplies by `time_scale`). `Retry-After` is counted like the client's own waits. A
    /// millisecond hint is the server's exact wall time, so it is divided by the scale here and
    /// slept as sent: an emulator on a compressed clock (which sends one) is then polled when its
    /// operation is due, at whatever scale the client runs. In production the scale is 1 and
    /// both are taken as sent.
    pub(crate) fn retry_after(&self, time_scale: f64) -> Option<Duration> {
        match parse_retry_after_ms(|name| self.header(name)) {
            Some(exact) if time_scale > 0.0 => Some(
                Duration::try_from_secs_f64(exact.as_secs_f64() / time_scale)
                    .unwrap_or(Duration::MAX),
            ),
            Some(exact) => Some(exact),
            None => parse_retry_after(|name| self.header(name), Utc::now()),
        }
    }

    /// The body as `T`. Decode errors name only the position, never the text: response bodies
    /// can hold keys.
    pub(crate) fn json<T: DeserializeOwned>(&self) -> Result<T, ArmError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            ArmError::invalid_response(
                format!(
                    "the body does not match the expected shape ({:?} error at line {}, column {})",
                    e.classify(),
                    e.line(),
                    e.column()
                ),
                self.info.clone(),
            )
        })
    }
}

/// Builds an [`ArmClient`].
pub struct ArmClientBuilder {
    endpoint: String,
    credential: Arc<dyn TokenCredential>,
    retry: RetryPolicy,
    polling: PollPolicy,
    time_scale: f64,
    request_timeout: Duration,
    pacing_threshold: f64,
    progress: Option<ProgressCallback>,
    jitter: Arc<dyn Fn() -> f64 + Send + Sync>,
}

impl ArmClientBuilder {
    /// The ARM endpoint, e.g. `http://127.0.0.1:PORT` for the emulator.
    #[must_use]
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = endpoint.into();
        self
    }

    /// Retry limits and backoff.
    #[must_use]
    pub fn retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Poll intervals and the longest wait for an operation.
    #[must_use]
    pub fn poll_policy(mut self, polling: PollPolicy) -> Self {
        self.polling = polling;
        self
    }

    /// Multiplies every wait (polls, backoff, Retry-After, pacing) except a millisecond hint,
    /// which is the server's exact wall time; 0.001 makes tests against the emulator fast. 1.0
    /// in production.
    #[must_use]
    pub fn time_scale(mut self, scale: f64) -> Self {
        self.time_scale = scale.max(0.0);
        self
    }

    /// Timeout of one HTTP exchange.
    #[must_use]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Slow down once a rate-limit bucket falls below this fraction of its capacity (0 turns
    /// pacing off). Default 0.1.
    #[must_use]
    pub fn pacing_threshold(mut self, fraction: f64) -> Self {
        self.pacing_threshold = fraction;
        self
    }

    /// Receives progress of long-running operations.
    #[must_use]
    pub fn on_progress(mut self, callback: ProgressCallback) -> Self {
        self.progress = Some(callback);
        self
    }

    /// The source of backoff jitter, uniform in [0, 1). Tests pin it.
    #[must_use]
    pub fn jitter(mut self, jitter: Arc<dyn Fn() -> f64 + Send + Sync>) -> Self {
        self.jitter = jitter;
        self
    }

    /// The client.
    pub fn build(self) -> Result<ArmClient, ArmError> {
        let endpoint = Url::parse(self.endpoint.trim_end_matches('/')).map_err(|e| {
            ArmError::usage(format!("invalid ARM endpoint '{}': {e}", self.endpoint))
        })?;
        if !matches!(endpoint.scheme(), "http" | "https") || endpoint.host_str().is_none() {
            return Err(ArmError::usage(format!(
                "invalid ARM endpoint '{}': expected http(s)://host[:port]",
                self.endpoint
            )));
        }
        let http = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(self.request_timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ArmError::usage(format!("cannot build the HTTP client: {e}")))?;
        let scope = format!("{}/.default", endpoint.origin().ascii_serialization());
        Ok(ArmClient {
            gate: None,
            inner: Arc::new(Inner {
                http,
                endpoint,
                scope,
                credential: self.credential,
                tokens: TokenCache::default(),
                retry: self.retry,
                polling: self.polling,
                time_scale: self.time_scale,
                pacer: Pacer::new(self.pacing_threshold).with_time_scale(self.time_scale),
                progress: self.progress,
                jitter: self.jitter,
            }),
        })
    }
}

struct Inner {
    http: reqwest::Client,
    endpoint: Url,
    scope: String,
    credential: Arc<dyn TokenCredential>,
    tokens: TokenCache,
    retry: RetryPolicy,
    polling: PollPolicy,
    time_scale: f64,
    pacer: Pacer,
    progress: Option<ProgressCallback>,
    jitter: Arc<dyn Fn() -> f64 + Send + Sync>,
}

/// The Azure Resource Manager client. Cheap to clone; clones share tokens and the pacer (and the
/// gate, if any).
#[derive(Clone)]
pub struct ArmClient {
    inner: Arc<Inner>,
    /// Bounds this client's requests in flight; `None`: unbounded. Outside `inner` so that one
    /// client can lend a gated copy to a run while its other users stay ungated.
    gate: Option<Arc<dyn RequestGate>>,
}

impl fmt::Debug for ArmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArmClient")
            .field("endpoint", &self.inner.endpoint.as_str())
            .field("credential", &self.inner.credential)
            .field("gated", &self.gate.is_some())
            .finish_non_exhaustive()
    }
}

/// A page of a list response.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page<T> {
    #[serde(default = "Vec::new")]
    value: Vec<T>,
    #[serde(default)]
    next_link: Option<String>,
}

impl ArmClient {
    /// A token from this client's credential for another audience than ARM: an Entra-ID AKS
    /// cluster's API (`6dae42f8-4368-4678-94ff-3960e28e3630/.default`). Not cached: it is asked
    /// once per cluster per apply.
    ///
    /// # Errors
    ///
    /// The credential could not produce one.
    pub async fn token_for(&self, scope: &str) -> Result<super::AccessToken, ArmError> {
        self.inner.credential.get_token(scope).await
    }

    /// A builder with production defaults and `credential`.
    pub fn builder(credential: Arc<dyn TokenCredential>) -> ArmClientBuilder {
        ArmClientBuilder {
            endpoint: DEFAULT_ENDPOINT.to_string(),
            credential,
            retry: RetryPolicy::default(),
            polling: PollPolicy::default(),
            time_scale: 1.0,
            request_timeout: Duration::from_mins(1),
            pacing_threshold: 0.1,
            progress: None,
            jitter: Arc::new(rand::random::<f64>),
        }
    }

    /// A copy of this client whose every HTTP exchange first takes a permit from `gate`, and
    /// which tells `gate` what each answer said about ARM's load. The permit covers one exchange
    /// only (a PUT, a poll, the final GET), never the waits between them, so `gate` bounds the
    /// requests in flight, not the operations. The copy shares tokens and the pacer with `self`;
    /// `self` stays ungated.
    #[must_use]
    pub fn gated(&self, gate: Arc<dyn RequestGate>) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            gate: Some(gate),
        }
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        self.inner.endpoint.as_str()
    }

    /// Whether the pacer is currently holding requests back (ARM reported a low bucket).
    pub fn is_slowing_down(&self) -> bool {
        self.inner.pacer.is_slowing_down(Instant::now())
    }

    pub(crate) fn time_scale(&self) -> f64 {
        self.inner.time_scale
    }

    pub(crate) fn poll_policy(&self) -> PollPolicy {
        self.inner.polling
    }

    pub(crate) fn report(&self, progress: &LroProgress) {
        tracing::debug!(
            method = %progress.method,
            resource = %progress.resource,
            state = ?progress.state,
            elapsed_ms = millis(progress.elapsed),
            "long-running operation"
        );
        if let Some(callback) = &self.inner.progress {
            callback(progress);
        }
    }

    pub(crate) async fn sleep(&self, wait: Duration) {
        let scaled = wait.mul_f64(self.inner.time_scale);
        if !scaled.is_zero() {
            tokio::time::sleep(scaled).await;
        }
    }

    /// The URL for an ARM path (api-version from the one table) plus extra query pairs.
    fn url_for(&self, path: &str, query: &[(&str, &str)]) -> Result<Url, ArmError> {
        let version = api_version_for_path(path).ok_or_else(|| {
            ArmError::usage(format!("no api-version is known for the ARM path {path}"))
        })?;
        let base = self.inner.endpoint.as_str().trim_end_matches('/');
        let mut url = Url::parse(&format!("{base}{path}"))
            .map_err(|e| ArmError::usage(format!("invalid ARM path {path}: {e}")))?;
        {
            let mut pairs = url.query_pairs_mut();
            pairs.append_pair("api-version", version);
            for (k, v) in query {
                pairs.append_pair(k, v);
            }
        }
        Ok(url)
    }

    /// An absolute URL from ARM (poll or nextLink). It must point at the endpoint's origin: the
    /// bearer token is never sent anywhere else.
    fn absolute_url(&self, url: &str) -> Result<Url, ArmError> {
        let parsed = Url::parse(url).map_err(|_| {
            ArmError::usage("ARM returned a polling or paging URL that is not a valid URL")
        })?;
        if parsed.origin() != self.inner.endpoint.origin() {
            return Err(ArmError::usage(format!(
                "refusing to send the ARM token to {} (the endpoint is {})",
                parsed.origin().ascii_serialization(),
                self.inner.endpoint.origin().ascii_serialization()
            )));
        }
        Ok(parsed)
    }

    /// Sends one logical request, with pacing, token refresh and retries. Returns any status
    /// below 400; errors carry ARM's body.
    pub(crate) async fn execute(
        &self,
        method: Method,
        url: Url,
        body: Option<&[u8]>,
        idempotency: Idempotency,
    ) -> Result<RawResponse, ArmError> {
        let idempotent = idempotency == Idempotency::Idempotent;
        // One id per logical request, shared by its retries, so ARM's logs tie them together.
        let client_request_id = uuid::Uuid::new_v4().to_string();
        let path = url.path().to_string();
        let target = Target::of(method.as_str(), &path);
        let mut attempt = 0u32;
        let mut refreshed = false;
        loop {
            attempt += 1;
            let pause = self.inner.pacer.acquire(&target, Instant::now());
            if !pause.is_zero() {
                tracing::info!(%method, %path, wait_ms = millis(pause), "ARM rate limit low: slowing down");
                self.sleep(pause).await;
            }
            let (outcome, retry_after, error) =
                match self.attempt(method, &url, body, &client_request_id).await? {
                    Attempt::Answered(response) => return Ok(response),
                    Attempt::Failed {
                        outcome,
                        retry_after,
                        error,
                    } => (outcome, retry_after, error),
                };
            if error.status() == Some(401)
                && error.code() == Some("ExpiredAuthenticationToken")
                && !refreshed
            {
                // Refreshing does not count as a retry: the request never reached the provider.
                tracing::info!("ARM says the token expired: refreshing it once");
                refreshed = true;
                attempt -= 1;
                self.inner.tokens.invalidate().await;
                continue;
            }
            let class = classify(outcome, idempotent);
            let jitter = (self.inner.jitter)();
            match self.inner.retry.decide(class, attempt, retry_after, jitter) {
                RetryDecision::Retry(wait) => {
                    tracing::warn!(%method, %path, attempt, ?outcome, wait_ms = millis(wait), "retrying ARM request");
                    self.sleep(wait).await;
                }
                RetryDecision::Stop => return Err(error),
                RetryDecision::WaitTooLong(wait) => {
                    // Stop rather than sit silent for up to 20 minutes (Compute's per-VM
                    // policies) holding the state lock: nothing was done, so the error says
                    // when the request can be sent again (docs/azure-client.md).
                    tracing::warn!(%method, %path, attempt, wait_s = wait.as_secs(), "ARM asks for a longer wait than the client waits out: stopping");
                    let limit = self.inner.retry.max_retry_after;
                    let until = ThrottleWait::until(Utc::now(), wait, self.inner.time_scale);
                    return Err(error.with_throttle_wait(ThrottleWait { wait, limit, until }));
                }
            }
        }
    }

    /// One HTTP exchange. Only a failure to get a token ends the request from here; everything
    /// else comes back for the retry decision.
    async fn attempt(
        &self,
        method: Method,
        url: &Url,
        body: Option<&[u8]>,
        client_request_id: &str,
    ) -> Result<Attempt, ArmError> {
        let mut info = RequestInfo {
            method: method.as_str().to_string(),
            path: url.path().to_string(),
            request_id: None,
            correlation_id: None,
        };
        let token = self
            .inner
            .tokens
            .token(self.inner.credential.as_ref(), &self.inner.scope)
            .await?;
        let mut request = self
            .inner
            .http
            .request(method.to_reqwest(), url.clone())
            .bearer_auth(token.token.expose())
            .header("x-ms-client-request-id", client_request_id)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_vec());
        } else if method == Method::Post {
            // ARM answers 411 Length Required to a bodiless POST without Content-Length: 0.
            request = request
                .header(reqwest::header::CONTENT_LENGTH, "0")
                .body(Vec::new());
        }
        // The gate's permit covers the exchange alone, from sending to the last byte of the
        // answer (or the transport error), and is returned before any retry backoff.
        let permit = match &self.gate {
            Some(gate) => Some(gate.admit().await),
            None => None,
        };
        tracing::debug!(%method, path = %info.path, "ARM request");
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                let outcome = if e.is_connect() {
                    AttemptOutcome::ConnectFailed
                } else if e.is_timeout() {
                    AttemptOutcome::Timeout
                } else {
                    AttemptOutcome::OtherTransport
                };
                return Ok(Attempt::Failed {
                    outcome,
                    retry_after: None,
                    error: ArmError::transport(e, info),
                });
            }
        };
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        info.request_id = text("x-ms-request-id").map(str::to_string);
        info.correlation_id = text("x-ms-correlation-request-id").map(str::to_string);
        let now = Instant::now();
        self.observe_limits(method, url, &headers, now);
        if let Some(gate) = &self.gate {
            gate.observe(if status == 429 || self.inner.pacer.is_slowing_down(now) {
                Load::Throttled
            } else {
                Load::Clear
            });
        }
        let bytes = response.bytes().await;
        drop(permit);
        let bytes = match bytes {
            Ok(bytes) => bytes,
            Err(e) => {
                return Ok(Attempt::Failed {
                    outcome: AttemptOutcome::OtherTransport,
                    retry_after: None,
                    error: ArmError::transport(e, info),
                });
            }
        };
        let raw = RawResponse {
            status,
            headers,
            body: bytes.to_vec(),
            info,
        };
        if status < 400 {
            return Ok(Attempt::Answered(raw));
        }
        Ok(Attempt::Failed {
            outcome: AttemptOutcome::Status(status),
            retry_after: raw.retry_after(self.inner.time_scale),
            error: ArmError::api(status, ErrorDetail::from_body(&raw.body), raw.info),
        })
    }

    /// Tells the pacer what an answer said about ARM's buckets and the provider's policies.
    fn observe_limits(
        &self,
        method: Method,
        url: &Url,
        headers: &reqwest::header::HeaderMap,
        now: Instant,
    ) {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let policies = parse_resource_policies(
            headers
                .get_all(RESOURCE_HEADER)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        self.inner.pacer.observe(
            &Target::of(method.as_str(), url.path()),
            &parse_remaining(text),
            &policies,
            now,
        );
    }

    /// A GET for polling URLs and nextLinks (absolute, already carrying their api-version).
    pub(crate) async fn poll_get(&self, url: &str) -> Result<RawResponse, ArmError> {
        let url = self.absolute_url(url)?;
        self.execute(Method::Get, url, None, Idempotency::Idempotent)
            .await
    }

    /// GET of a resource; `None` on 404 (see [`ArmClient::get`] for which 404s).
    pub(crate) async fn get_raw(
        &self,
        id: &ResourceId,
        query: &[(&str, &str)],
    ) -> Result<Option<RawResponse>, ArmError> {
        let url = self.url_for(id.as_str(), query)?;
        match self
            .execute(Method::Get, url, None, Idempotency::Idempotent)
            .await
        {
            Ok(response) => Ok(Some(response)),
            Err(e) if is_absent(&e, id) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads a resource. `None` when ARM answers 404 for the resource itself (ResourceNotFound,
    /// NotFound, ContainerNotFound, ...). A 404 ResourceGroupNotFound for a resource inside the
    /// group is an error: the group is what is missing, and the caller should know.
    pub async fn get<T: DeserializeOwned>(&self, id: &ResourceId) -> Result<Option<T>, ArmError> {
        self.get_with(id, &[]).await
    }

    /// [`ArmClient::get`] with extra query pairs (`$expand=instanceView`).
    pub async fn get_with<T: DeserializeOwned>(
        &self,
        id: &ResourceId,
        query: &[(&str, &str)],
    ) -> Result<Option<T>, ArmError> {
        self.get_raw(id, query).await?.map(|r| r.json()).transpose()
    }

    /// Creates or replaces a resource and waits until ARM has finished, then reads it back.
    pub async fn put<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        id: &ResourceId,
        body: &B,
    ) -> Result<T, ArmError> {
        self.write(Method::Put, id, body).await
    }

    /// Updates an existing resource with an update model (`VirtualMachineUpdate`, `DiskUpdate`:
    /// only what changes) and waits until ARM has finished, then reads it back. A PATCH that
    /// ARM runs as a long-running operation (a VM's, a disk's) is polled exactly like a PUT.
    /// Retried like a PUT: the body sets values, so sending it twice changes nothing more.
    pub async fn patch<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        id: &ResourceId,
        body: &B,
    ) -> Result<T, ArmError> {
        self.write(Method::Patch, id, body).await
    }

    /// A PUT or a PATCH, waited for.
    async fn write<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        id: &ResourceId,
        body: &B,
    ) -> Result<T, ArmError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| ArmError::usage(format!("cannot serialise the body for {id}: {e}")))?;
        let url = self.url_for(id.as_str(), &[])?;
        let first = self
            .execute(method, url, Some(&bytes), Idempotency::Idempotent)
            .await?;
        let state = provisioning_state(&first.body);
        match Self::disposition(method, &first, state.as_deref())? {
            Disposition::Done => {
                if state
                    .as_deref()
                    .is_some_and(|s| s.eq_ignore_ascii_case("Failed"))
                {
                    return Err(ArmError::operation_failed(
                        super::error::FailedState::Failed,
                        ErrorDetail {
                            code: "ProvisioningStateFailed".into(),
                            message: "the resource's provisioningState is 'Failed'".into(),
                            ..ErrorDetail::default()
                        },
                        first.info.clone(),
                    ));
                }
                first.json()
            }
            Disposition::Poll(target) => {
                self.wait_for(method, id, target, &first).await?;
                // The final GET: the operation status does not carry the resource.
                self.get(id).await?.ok_or_else(|| {
                    ArmError::invalid_response(
                        "the resource was not found after its write succeeded",
                        first.info.clone(),
                    )
                })
            }
        }
    }

    /// Deletes a resource and waits until it is gone. A 404 for the resource itself counts as
    /// already gone; 404 ResourceGroupNotFound for a resource inside a group is an error.
    pub async fn delete(&self, id: &ResourceId) -> Result<DeleteOutcome, ArmError> {
        self.delete_with(id, &[]).await
    }

    /// [`ArmClient::delete`] with extra query pairs (a compute's required
    /// `underlyingResourceAction`, a workspace's `forceToPurge`).
    pub async fn delete_with(
        &self,
        id: &ResourceId,
        query: &[(&str, &str)],
    ) -> Result<DeleteOutcome, ArmError> {
        let url = self.url_for(id.as_str(), query)?;
        let first = match self
            .execute(Method::Delete, url, None, Idempotency::Idempotent)
            .await
        {
            Ok(first) => first,
            Err(e) if is_absent(&e, id) => return Ok(DeleteOutcome::AlreadyAbsent),
            Err(e) => return Err(e),
        };
        match Self::disposition(Method::Delete, &first, None)? {
            Disposition::Done if first.status == 204 => Ok(DeleteOutcome::AlreadyAbsent),
            Disposition::Done => Ok(DeleteOutcome::Deleted),
            Disposition::Poll(target) => {
                self.wait_for(Method::Delete, id, target, &first).await?;
                Ok(DeleteOutcome::Deleted)
            }
        }
    }

    /// POSTs an action (`deallocate`, `listKeys`) on a resource and waits for it to finish.
    /// Returns the action's result body, if it has one (200 with a body, or the Location
    /// flow's final body). POSTs retry 5xx and timeouts only when `idempotency` says so.
    pub async fn post_action<T: DeserializeOwned>(
        &self,
        id: &ResourceId,
        action: &str,
        query: &[(&str, &str)],
        body: Option<&serde_json::Value>,
        idempotency: Idempotency,
    ) -> Result<Option<T>, ArmError> {
        let target = id.join(action);
        let url = self.url_for(target.as_str(), query)?;
        let bytes = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| ArmError::usage(format!("cannot serialise the body for {target}: {e}")))?;
        let first = self
            .execute(Method::Post, url, bytes.as_deref(), idempotency)
            .await?;
        let result = match Self::disposition(Method::Post, &first, None)? {
            Disposition::Done => Some(first.body.clone()),
            Disposition::Poll(poll) => self.wait_for(Method::Post, &target, poll, &first).await?,
        };
        match result {
            Some(bytes) if !bytes.iter().all(u8::is_ascii_whitespace) => {
                let raw = RawResponse {
                    body: bytes,
                    ..first
                };
                raw.json().map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Lists a collection, following `nextLink` until the last page.
    pub async fn list<T: DeserializeOwned>(
        &self,
        collection: &ResourceId,
        query: &[(&str, &str)],
    ) -> Result<Vec<T>, ArmError> {
        let url = self.url_for(collection.as_str(), query)?;
        let mut response = self
            .execute(Method::Get, url, None, Idempotency::Idempotent)
            .await?;
        let mut items = Vec::new();
        loop {
            let page: Page<T> = response.json()?;
            items.extend(page.value);
            match page.next_link.filter(|l| !l.is_empty()) {
                Some(next) => response = self.poll_get(&next).await?,
                None => return Ok(items),
            }
        }
    }

    fn disposition(
        method: Method,
        first: &RawResponse,
        state: Option<&str>,
    ) -> Result<Disposition, ArmError> {
        let target = poll_url(
            first.header("azure-asyncoperation"),
            first.header("location"),
        );
        initial_disposition(method, first.status, target, state)
            .map_err(|m| ArmError::invalid_response(m, first.info.clone()))
    }
}

/// How one HTTP exchange ended.
enum Attempt {
    /// ARM answered below 400.
    Answered(RawResponse),
    /// It failed; the retry decision needs these.
    Failed {
        outcome: AttemptOutcome,
        retry_after: Option<Duration>,
        error: ArmError,
    },
}

/// Milliseconds for logs.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Whether an error means "this resource does not exist" (as opposed to "its group does not").
fn is_absent(error: &ArmError, id: &ResourceId) -> bool {
    error.is_not_found() && (id.is_resource_group() || !error.is_resource_group_not_found())
}
