//! The client's one error type: ARM's answer kept verbatim, behind predicates.
//!
//! Advice later in dsinfra depends on ARM's exact code and message ("OperationNotAllowed ...
//! exceeding approved standardNDSv2Family Cores quota"), so nothing here paraphrases them. The
//! type is opaque in the reqwest style: callers ask `is_not_found()`, `status()`, `code()`
//! instead of matching variants, which lets the representation change without breaking them.
//! Nothing secret can reach it: request paths are stored without their query string, transport
//! errors are stripped of their URL, and tokens never enter an error at all.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::quota_message::QuotaFacts;

/// ARM's error object (`{"error": {...}}` in a response, `error` in an operation status), with
/// every field ARM sends. Unknown fields (compute's `innererror`) are kept as JSON.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDetail {
    /// PascalCase error code, e.g. `OperationNotAllowed`.
    #[serde(default)]
    pub code: String,
    /// The human-readable message, verbatim.
    #[serde(default)]
    pub message: String,
    /// What the error is about, e.g. a property path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Nested errors (deployment failures put the real cause here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<ErrorDetail>,
    /// Typed extra facts (`{"type": "PolicyViolation", "info": {...}}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_info: Vec<AdditionalInfo>,
    /// Compute's `innererror {exceptiontype, errordetail}`, kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub innererror: Option<Value>,
}

/// One entry of ARM's `additionalInfo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdditionalInfo {
    /// The kind of information, e.g. `PolicyViolation`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The information itself; its shape depends on `kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<Value>,
}

/// How much of an error body is kept when it is not ARM's JSON (a gateway's HTML page).
const MAX_RAW_BODY: usize = 512;

impl ErrorDetail {
    /// Reads an error response body: ARM's `{"error": {...}}` envelope, the older unwrapped
    /// `{code, message}`, or any other text (kept, shortened, as the message).
    pub fn from_body(body: &[u8]) -> Self {
        #[derive(Deserialize)]
        struct Envelope {
            error: ErrorDetail,
        }
        if let Ok(envelope) = serde_json::from_slice::<Envelope>(body) {
            return envelope.error;
        }
        if let Ok(bare) = serde_json::from_slice::<ErrorDetail>(body)
            && !bare.code.is_empty()
        {
            return bare;
        }
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        let message = match text.char_indices().nth(MAX_RAW_BODY) {
            Some((cut, _)) => format!("{}...", &text[..cut]),
            None => text.to_string(),
        };
        Self {
            message,
            ..Self::default()
        }
    }
}

/// Which request an error belongs to, for the user and for Microsoft support.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// HTTP method.
    pub method: String,
    /// Path without host or query string (queries can carry opaque tokens).
    pub path: String,
    /// `x-ms-request-id` from the response.
    pub request_id: Option<String>,
    /// `x-ms-correlation-request-id` from the response.
    pub correlation_id: Option<String>,
}

/// How a long-running operation ended when it did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedState {
    /// The operation status said `Failed` (or the resource's provisioningState did).
    Failed,
    /// The operation status said `Canceled`.
    Canceled,
}

/// What kind of transport failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TransportKind {
    Timeout,
    Connect,
    Other,
}

#[derive(Debug)]
enum Kind {
    /// ARM answered with an error status.
    Api { status: u16, error: ErrorDetail },
    /// A long-running operation ended Failed or Canceled.
    OperationFailed {
        state: FailedState,
        error: ErrorDetail,
    },
    /// The request did not complete at the HTTP level.
    Transport {
        kind: TransportKind,
        source: reqwest::Error,
    },
    /// No token could be obtained.
    Credential { message: String },
    /// ARM answered with a body the client cannot read.
    InvalidResponse { message: String },
    /// A long-running operation was still running when the client stopped waiting.
    OperationTimeout { elapsed: Duration },
    /// The caller asked for something the client cannot do (unknown provider, bad endpoint).
    Usage { message: String },
}

/// Why the client gave up on a throttled request without retrying it: the server asked for a
/// longer wait than the client waits out (`RetryPolicy::max_retry_after`). Nothing was done by
/// the request (a 429 is a refusal), so it can simply be sent again once the wait is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThrottleWait {
    /// The wait the server asked for (`Retry-After`), in Azure's seconds.
    pub wait: Duration,
    /// The longest wait the client waits out.
    pub limit: Duration,
    /// When the wait is over, on the wall clock.
    pub until: DateTime<Utc>,
}

impl ThrottleWait {
    /// The wall-clock end of `wait` asked for at `now` by a client whose waits are multiplied
    /// by `time_scale` (1 against Azure; an emulator's compressed clock in tests).
    pub fn until(now: DateTime<Utc>, wait: Duration, time_scale: f64) -> DateTime<Utc> {
        let wall = wait.mul_f64(time_scale.max(0.0));
        now + chrono::Duration::from_std(wall).unwrap_or(chrono::Duration::MAX)
    }
}

/// An error from the ARM client. Ask it questions with the predicates.
pub struct ArmError {
    kind: Box<Kind>,
    request: Option<RequestInfo>,
    /// Boxed, like `kind`, so every `Result<_, ArmError>` stays small.
    throttle_wait: Option<Box<ThrottleWait>>,
}

impl ArmError {
    fn new(kind: Kind, request: Option<RequestInfo>) -> Self {
        Self {
            kind: Box::new(kind),
            request,
            throttle_wait: None,
        }
    }

    /// This (throttling) error ended the request at once because the server asked for `wait`.
    #[must_use]
    pub fn with_throttle_wait(mut self, wait: ThrottleWait) -> Self {
        self.throttle_wait = Some(Box::new(wait));
        self
    }

    /// Set when the client stopped without retrying because the server asked for a wait longer
    /// than it waits out; the request can be sent again after [`ThrottleWait::until`].
    pub fn throttle_wait(&self) -> Option<&ThrottleWait> {
        self.throttle_wait.as_deref()
    }

    /// The throttling policy that refused the request: Compute names it in a `TooManyRequests`
    /// detail's `target` (`UpdateVMResource`); ARM's own buckets only in the code
    /// (`SubscriptionRequestsThrottled`). `None` unless this is a 429.
    pub fn throttle_policy(&self) -> Option<&str> {
        if !self.is_throttled() {
            return None;
        }
        self.details()
            .iter()
            .filter(|d| d.code == "TooManyRequests")
            .find_map(|d| d.target.as_deref())
            .or_else(|| self.code())
    }

    /// ARM answered `status` with this error body.
    pub fn api(status: u16, error: ErrorDetail, request: RequestInfo) -> Self {
        Self::new(Kind::Api { status, error }, Some(request))
    }

    /// A long-running operation ended in `state` with this error.
    pub fn operation_failed(state: FailedState, error: ErrorDetail, request: RequestInfo) -> Self {
        Self::new(Kind::OperationFailed { state, error }, Some(request))
    }

    /// A reqwest failure; the URL is dropped so no query string can leak.
    pub fn transport(source: reqwest::Error, request: RequestInfo) -> Self {
        let kind = if source.is_timeout() {
            TransportKind::Timeout
        } else if source.is_connect() {
            TransportKind::Connect
        } else {
            TransportKind::Other
        };
        Self::new(
            Kind::Transport {
                kind,
                source: source.without_url(),
            },
            Some(request),
        )
    }

    /// No token could be obtained. `message` must not contain a token (credential messages
    /// never do: they describe which source failed).
    pub fn credential(message: impl Into<String>) -> Self {
        Self::new(
            Kind::Credential {
                message: message.into(),
            },
            None,
        )
    }

    /// ARM answered something unreadable.
    pub fn invalid_response(message: impl Into<String>, request: RequestInfo) -> Self {
        Self::new(
            Kind::InvalidResponse {
                message: message.into(),
            },
            Some(request),
        )
    }

    /// The client gave up waiting for a long-running operation.
    pub fn operation_timeout(elapsed: Duration, request: RequestInfo) -> Self {
        Self::new(Kind::OperationTimeout { elapsed }, Some(request))
    }

    /// The caller misused the client.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(
            Kind::Usage {
                message: message.into(),
            },
            None,
        )
    }

    /// The HTTP status ARM answered, if it answered.
    pub fn status(&self) -> Option<u16> {
        match &*self.kind {
            Kind::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// ARM's error body, from a response or a failed operation.
    pub fn detail(&self) -> Option<&ErrorDetail> {
        match &*self.kind {
            Kind::Api { error, .. } | Kind::OperationFailed { error, .. } => Some(error),
            _ => None,
        }
    }

    /// ARM's error code (`ResourceNotFound`, `AllocationFailed`), if any.
    pub fn code(&self) -> Option<&str> {
        self.detail()
            .map(|e| e.code.as_str())
            .filter(|c| !c.is_empty())
    }

    /// ARM's message, verbatim.
    pub fn message(&self) -> Option<&str> {
        self.detail().map(|e| e.message.as_str())
    }

    /// ARM's `target`.
    pub fn target(&self) -> Option<&str> {
        self.detail().and_then(|e| e.target.as_deref())
    }

    /// ARM's nested `details`.
    pub fn details(&self) -> &[ErrorDetail] {
        self.detail().map_or(&[], |e| e.details.as_slice())
    }

    /// ARM's `additionalInfo`.
    pub fn additional_info(&self) -> &[AdditionalInfo] {
        self.detail().map_or(&[], |e| e.additional_info.as_slice())
    }

    /// The request this error belongs to (method, path, request ids).
    pub fn request(&self) -> Option<&RequestInfo> {
        self.request.as_ref()
    }

    /// `x-ms-request-id` (or, failing that, the correlation id) of the failing response.
    pub fn request_id(&self) -> Option<&str> {
        let request = self.request.as_ref()?;
        request
            .request_id
            .as_deref()
            .or(request.correlation_id.as_deref())
    }

    /// 404 of any kind.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// 404 because the resource group itself is missing.
    pub fn is_resource_group_not_found(&self) -> bool {
        self.is_not_found() && self.code() == Some("ResourceGroupNotFound")
    }

    /// 429: ARM throttled the request.
    pub fn is_throttled(&self) -> bool {
        self.status() == Some(429)
    }

    /// 409: a conflict (quota, SKU not available, in-use, name taken).
    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// 401 or 403, or no token at all.
    pub fn is_auth(&self) -> bool {
        matches!(self.status(), Some(401 | 403)) || self.is_credential()
    }

    /// No token could be obtained.
    pub fn is_credential(&self) -> bool {
        matches!(&*self.kind, Kind::Credential { .. })
    }

    /// A long-running operation ended Failed or Canceled.
    pub fn is_operation_failed(&self) -> bool {
        matches!(&*self.kind, Kind::OperationFailed { .. })
    }

    /// How the failed operation ended, if this is an operation failure.
    pub fn failed_state(&self) -> Option<FailedState> {
        match &*self.kind {
            Kind::OperationFailed { state, .. } => Some(*state),
            _ => None,
        }
    }

    /// The request timed out, or the client stopped waiting for an operation.
    pub fn is_timeout(&self) -> bool {
        matches!(
            &*self.kind,
            Kind::Transport {
                kind: TransportKind::Timeout,
                ..
            } | Kind::OperationTimeout { .. }
        )
    }

    /// The connection could not be made.
    pub fn is_connect(&self) -> bool {
        matches!(
            &*self.kind,
            Kind::Transport {
                kind: TransportKind::Connect,
                ..
            }
        )
    }

    /// The caller misused the client.
    pub fn is_usage(&self) -> bool {
        matches!(&*self.kind, Kind::Usage { .. })
    }

    /// The quota facts in an `OperationNotAllowed` vCPU-quota message, for advice.
    pub fn quota_facts(&self) -> Option<QuotaFacts> {
        let detail = self.detail()?;
        QuotaFacts::from_message(&detail.message)
    }
}

impl fmt::Display for ArmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (method, path) = self
            .request
            .as_ref()
            .map_or(("", ""), |r| (r.method.as_str(), r.path.as_str()));
        match &*self.kind {
            Kind::Api { status, error } if error.code.is_empty() => {
                write!(f, "HTTP {status} from {method} {path}")?;
                if !error.message.is_empty() {
                    write!(f, ": {}", error.message)?;
                }
            }
            Kind::Api { error, .. } | Kind::OperationFailed { error, .. } => {
                write!(f, "{}: {}", error.code, error.message)?;
            }
            Kind::Transport { kind, source } => match kind {
                TransportKind::Timeout => write!(f, "{method} {path} timed out")?,
                TransportKind::Connect => {
                    write!(f, "could not connect to ARM for {method} {path}: {source}")?;
                }
                TransportKind::Other => write!(f, "{method} {path} failed: {source}")?,
            },
            Kind::Credential { message } => {
                write!(f, "could not get an Azure access token: {message}")?;
            }
            Kind::InvalidResponse { message } => {
                write!(f, "unexpected response to {method} {path}: {message}")?;
            }
            Kind::OperationTimeout { elapsed } => write!(
                f,
                "{method} {path} was still running after {}s; dsinfra stopped waiting",
                elapsed.as_secs()
            )?,
            Kind::Usage { message } => f.write_str(message)?,
        }
        if let Some(id) = self.request_id() {
            write!(f, " (request id {id})")?;
        }
        if let Some(wait) = &self.throttle_wait {
            let policy = self
                .throttle_policy()
                .map(|p| format!(" (policy {p})"))
                .unwrap_or_default();
            write!(
                f,
                "; Azure asks to wait {} s{policy}, longer than dsinfra waits between retries ({} s), so it stopped without retrying: nothing was done by this request, which can be sent again after {}",
                wait.wait.as_secs(),
                wait.limit.as_secs(),
                wait.until.to_rfc3339_opts(SecondsFormat::Secs, true)
            )?;
        }
        Ok(())
    }
}

impl fmt::Debug for ArmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArmError")
            .field("kind", &self.kind)
            .field("request", &self.request)
            .field("throttle_wait", &self.throttle_wait)
            .finish()
    }
}

impl std::error::Error for ArmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.kind {
            Kind::Transport { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUOTA_BODY: &str = r#"{"error":{"code":"OperationNotAllowed","message":"Operation could not be completed as it results in exceeding approved standardNDSv2Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 0, Current Usage: 0, Additional Required: 40, (Minimum) New Limit Required: 40."}}"#;

    fn request(id: Option<&str>) -> RequestInfo {
        RequestInfo {
            method: "PUT".into(),
            path:
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/gpu"
                    .into(),
            request_id: id.map(str::to_string),
            correlation_id: Some("corr-1".into()),
        }
    }

    #[test]
    fn quota_error_displays_arm_code_and_message_verbatim_with_request_id() {
        let err = ArmError::api(
            409,
            ErrorDetail::from_body(QUOTA_BODY.as_bytes()),
            request(Some("req-9")),
        );
        assert_eq!(
            err.to_string(),
            "OperationNotAllowed: Operation could not be completed as it results in exceeding approved standardNDSv2Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 0, Current Usage: 0, Additional Required: 40, (Minimum) New Limit Required: 40. (request id req-9)"
        );
        assert!(err.is_conflict());
        assert_eq!(err.code(), Some("OperationNotAllowed"));
        assert_eq!(err.status(), Some(409));
        let facts = err.quota_facts().expect("the quota message carries facts");
        assert_eq!(facts.family, "standardNDSv2Family");
        assert_eq!(facts.additional_required, Some(40));
    }

    #[test]
    fn correlation_id_stands_in_when_there_is_no_request_id() {
        let err = ArmError::api(404, ErrorDetail::from_body(br#"{"error":{"code":"ResourceGroupNotFound","message":"Resource group 'rg' could not be found."}}"#), request(None));
        assert_eq!(
            err.to_string(),
            "ResourceGroupNotFound: Resource group 'rg' could not be found. (request id corr-1)"
        );
        assert!(err.is_not_found());
        assert!(err.is_resource_group_not_found());
    }

    #[test]
    fn every_arm_field_is_kept() {
        let body = br#"{"error":{"code":"InvalidParameter","message":"bad","target":"properties.x",
            "details":[{"code":"Inner","message":"deeper","target":"y"}],
            "additionalInfo":[{"type":"PolicyViolation","info":{"policy":"p"}}],
            "innererror":{"exceptiontype":"E","errordetail":"D"}}}"#;
        let err = ArmError::api(400, ErrorDetail::from_body(body), request(Some("r")));
        assert_eq!(err.target(), Some("properties.x"));
        assert_eq!(err.details()[0].code, "Inner");
        assert_eq!(err.details()[0].target.as_deref(), Some("y"));
        assert_eq!(err.additional_info()[0].kind, "PolicyViolation");
        assert_eq!(
            err.detail().and_then(|d| d.innererror.clone()),
            Some(serde_json::json!({"exceptiontype":"E","errordetail":"D"}))
        );
    }

    #[test]
    fn unwrapped_and_non_json_bodies_are_still_reported() {
        let bare = ErrorDetail::from_body(br#"{"code":"Conflict","message":"busy"}"#);
        assert_eq!(
            (bare.code.as_str(), bare.message.as_str()),
            ("Conflict", "busy")
        );
        let html = ErrorDetail::from_body(b"<html>Bad Gateway</html>");
        assert_eq!(html.code, "");
        let err = ArmError::api(502, html, request(None));
        assert_eq!(
            err.to_string(),
            "HTTP 502 from PUT /subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/gpu: <html>Bad Gateway</html> (request id corr-1)"
        );
        let long = "x".repeat(2000);
        assert_eq!(
            ErrorDetail::from_body(long.as_bytes()).message.len(),
            MAX_RAW_BODY + 3
        );
    }

    #[test]
    fn failed_operation_surfaces_the_operation_error() {
        let error = ErrorDetail {
            code: "AllocationFailed".into(),
            message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this region. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance".into(),
            ..ErrorDetail::default()
        };
        let err = ArmError::operation_failed(FailedState::Failed, error, request(Some("op-1")));
        assert!(err.is_operation_failed());
        assert_eq!(err.status(), None);
        assert_eq!(err.failed_state(), Some(FailedState::Failed));
        assert!(
            err.to_string()
                .starts_with("AllocationFailed: Allocation failed. We do not have")
        );
        assert!(err.to_string().ends_with("(request id op-1)"));
    }

    #[test]
    fn credential_errors_say_what_failed() {
        let err = ArmError::credential("no credential in the chain produced a token");
        assert!(err.is_credential() && err.is_auth());
        assert_eq!(
            err.to_string(),
            "could not get an Azure access token: no credential in the chain produced a token"
        );
    }
}
