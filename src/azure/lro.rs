//! Long-running operations, exactly as ARM's async protocol describes them (arm.md section 2).
//!
//! After a PUT, DELETE or POST answers 201/202 (or 200 with a non-terminal provisioningState),
//! the client polls `Azure-AsyncOperation` when present, else `Location`:
//! - the Azure-AsyncOperation URL always answers 200 with `{status, error?}`; `InProgress` (or
//!   any non-terminal status) means wait, `Succeeded` means done, `Failed`/`Canceled` carry the
//!   operation's `error`, which is surfaced verbatim. A 4xx/5xx from that URL means the status
//!   read failed, not the operation; it is retried like any idempotent GET.
//! - the Location URL answers 202 while running, then the operation's synchronous result
//!   (200/201 with a body, or 204).
//! - with neither header, the resource itself is polled until its provisioningState is terminal
//!   (a DELETE until it is gone).
//!
//! After a PUT succeeds the resource is read with a final GET. The PUT is never re-sent to poll:
//! that is what loses the error code in the deprecated SDKs. Waits follow `Retry-After` between
//! a floor and a cap; a response without one gets a wait that starts at the floor and doubles up
//! to the default, so a two-second NIC is seen within a second or two and a VM is still polled
//! only every ten seconds. Every wait is multiplied by the client's time scale so tests against
//! the emulator run in milliseconds, except a millisecond hint (`retry-after-ms`, which the
//! emulator sends with the exact wait on its own clock): that is slept as sent, see
//! `RawResponse::retry_after`. Decisions are pure functions; [`ArmClient::wait_for`] only loops
//! over them.
//!
//! Each poll is one request through [`ArmClient::execute`]; the wait before it is a plain sleep.
//! A [gated](ArmClient::gated) client therefore holds a permit only while a poll is in flight,
//! never while the operation runs in Azure: a bound on requests, not on operations.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::client::{ArmClient, Method, RawResponse};
use super::error::{ArmError, ErrorDetail, FailedState, RequestInfo};
use super::resource_id::ResourceId;

/// Where to poll a long-running operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollTarget {
    /// The `Azure-AsyncOperation` status URL.
    AsyncOperation(String),
    /// The `Location` result URL.
    Location(String),
    /// No header: poll the resource's own provisioningState (or, for a DELETE, until 404).
    Resource,
}

/// What to do with the first response of a mutating request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// The request is complete.
    Done,
    /// The request continues; poll here.
    Poll(PollTarget),
}

/// Picks the polling URL: Azure-AsyncOperation when present, else Location.
pub fn poll_url(azure_async_operation: Option<&str>, location: Option<&str>) -> Option<PollTarget> {
    let present = |v: Option<&str>| {
        v.map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    present(azure_async_operation)
        .map(PollTarget::AsyncOperation)
        .or_else(|| present(location).map(PollTarget::Location))
}

/// Whether a provisioningState (or operation status) is final. States are provider-defined
/// ("Creating", "Updating", "Accepted", "Deleting", ...); only these three end an operation.
pub fn is_terminal(state: &str) -> bool {
    ["Succeeded", "Failed", "Canceled"]
        .iter()
        .any(|t| t.eq_ignore_ascii_case(state))
}

/// Decides from the first response whether a PUT/DELETE/POST is done or must be polled.
/// `provisioning_state` is the body's `properties.provisioningState`, if any (none means
/// Succeeded).
pub fn initial_disposition(
    method: Method,
    status: u16,
    target: Option<PollTarget>,
    provisioning_state: Option<&str>,
) -> Result<Disposition, String> {
    let running = provisioning_state.is_some_and(|s| !is_terminal(s));
    match status {
        202 => match target {
            Some(t) => Ok(Disposition::Poll(t)),
            None if method == Method::Post => {
                Err("202 Accepted without Azure-AsyncOperation or Location header".into())
            }
            None => Ok(Disposition::Poll(PollTarget::Resource)),
        },
        200 | 201 => match target {
            // 201 with a polling header is the documented async create; a 200 with one but a
            // terminal state is already done.
            Some(t) if status == 201 || running => Ok(Disposition::Poll(t)),
            None if running => Ok(Disposition::Poll(PollTarget::Resource)),
            _ => Ok(Disposition::Done),
        },
        _ => Ok(Disposition::Done),
    }
}

/// The state an Azure-AsyncOperation status body reports.
#[derive(Debug, Clone, PartialEq)]
pub enum OperationState {
    /// Still running; the status string as sent (`InProgress`, or a provider's own word).
    Running(String),
    /// Finished successfully.
    Succeeded,
    /// Finished with this failure.
    Failed(FailedState, ErrorDetail),
}

/// The body of an Azure-AsyncOperation status URL.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationStatus {
    /// `InProgress`, `Succeeded`, `Failed`, `Canceled`.
    #[serde(default)]
    pub status: String,
    /// 0-100 when the provider reports it.
    #[serde(default)]
    pub percent_complete: Option<f64>,
    /// Set when the status is Failed or Canceled.
    #[serde(default)]
    pub error: Option<ErrorDetail>,
}

impl OperationStatus {
    /// What the status means for the operation.
    pub fn state(&self) -> OperationState {
        let failed = |state| {
            let error = self.error.clone().unwrap_or_else(|| ErrorDetail {
                message: format!(
                    "the operation ended {} without an error object",
                    self.status
                ),
                ..ErrorDetail::default()
            });
            OperationState::Failed(state, error)
        };
        if self.status.eq_ignore_ascii_case("Succeeded") {
            OperationState::Succeeded
        } else if self.status.eq_ignore_ascii_case("Failed") {
            failed(FailedState::Failed)
        } else if self.status.eq_ignore_ascii_case("Canceled") {
            failed(FailedState::Canceled)
        } else {
            OperationState::Running(self.status.clone())
        }
    }
}

/// How a Location poll answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocationPoll {
    /// 202: still running.
    Running,
    /// 200/201/204: the operation's result.
    Done,
}

/// Interprets a Location poll's (non-error) status.
pub fn location_poll(status: u16) -> LocationPoll {
    if status == 202 {
        LocationPoll::Running
    } else {
        LocationPoll::Done
    }
}

/// How long to wait between polls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PollPolicy {
    /// The longest wait when the response has no `Retry-After` (the waits grow to it).
    pub default_interval: Duration,
    /// The shortest wait, even if `Retry-After` says 0.
    pub min_interval: Duration,
    /// The longest wait, even if `Retry-After` says more.
    pub max_interval: Duration,
    /// When to give up on an operation (wall time, not scaled).
    pub max_wait: Duration,
}

impl Default for PollPolicy {
    fn default() -> Self {
        Self {
            default_interval: Duration::from_secs(10),
            min_interval: Duration::from_secs(1),
            max_interval: Duration::from_mins(2),
            max_wait: Duration::from_hours(2),
        }
    }
}

impl PollPolicy {
    /// The wait before the next poll (before the client's time scale); `polls` is how many
    /// polls were made so far.
    ///
    /// `Retry-After` is honoured as sent, within the floor and the cap: ARM asks clients not to
    /// poll sooner, and the emulator's value is exactly the time left. Without it, the wait
    /// starts at the floor and doubles with every poll up to `default_interval`: most operations
    /// end in seconds (network, disks) and a fixed ten-second wait would triple them, while a
    /// long one (a VM) settles at the default instead of costing a read every second.
    pub fn interval(&self, retry_after: Option<Duration>, polls: u32) -> Duration {
        let wait = retry_after.unwrap_or_else(|| {
            self.min_interval
                .saturating_mul(1u32 << polls.min(16))
                .min(self.default_interval)
        });
        wait.clamp(self.min_interval, self.max_interval)
    }
}

/// What an operation is doing, for progress display.
#[derive(Debug, Clone, PartialEq)]
pub enum ProgressState {
    /// The first response said the operation continues.
    Started,
    /// A poll said it still runs; the provider's status word and percentage if given.
    Running {
        /// `InProgress`, `Creating`, `202`, ...
        status: String,
        /// 0-100, when reported.
        percent_complete: Option<f64>,
    },
    /// It succeeded.
    Succeeded,
    /// It failed or was canceled (the error follows as the call's result).
    Failed,
}

/// One progress report of a long-running operation.
#[derive(Debug, Clone, PartialEq)]
pub struct LroProgress {
    /// `PUT`, `DELETE` or `POST`.
    pub method: Method,
    /// The resource (or action) path, without query.
    pub resource: String,
    /// Where the operation is.
    pub state: ProgressState,
    /// Time since the first response.
    pub elapsed: Duration,
    /// Polls so far.
    pub polls: u32,
}

/// Receives progress reports; shared by all of a client's operations.
pub type ProgressCallback = Arc<dyn Fn(&LroProgress) + Send + Sync>;

/// The provisioningState in a resource body, if any.
pub(crate) fn provisioning_state(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Props {
        #[serde(default, rename = "provisioningState")]
        provisioning_state: Option<String>,
    }
    #[derive(Deserialize)]
    struct Body {
        #[serde(default)]
        properties: Option<Props>,
    }
    serde_json::from_slice::<Body>(body)
        .ok()?
        .properties?
        .provisioning_state
}

/// What one poll found.
struct PollStep {
    state: ProgressState,
    /// The final body (Location flow, or the resource when polling it directly).
    body: Option<Vec<u8>>,
    retry_after: Option<Duration>,
}

impl ArmClient {
    /// Polls `target` until the operation started by `first` ends. `resource` is what the
    /// operation acts on (polled directly when there is no header). Returns the final body the
    /// Location flow delivered, if any.
    pub(crate) async fn wait_for(
        &self,
        method: Method,
        resource: &ResourceId,
        target: PollTarget,
        first: &RawResponse,
    ) -> Result<Option<Vec<u8>>, ArmError> {
        let started = Instant::now();
        let report = |state: ProgressState, polls: u32| {
            self.report(&LroProgress {
                method,
                resource: resource.as_str().to_string(),
                state,
                elapsed: started.elapsed(),
                polls,
            });
        };
        report(ProgressState::Started, 0);
        let mut retry_after = first.retry_after(self.time_scale());
        let mut polls = 0u32;
        loop {
            if started.elapsed() > self.poll_policy().max_wait {
                return Err(ArmError::operation_timeout(
                    started.elapsed(),
                    first.info.clone(),
                ));
            }
            self.sleep(self.poll_policy().interval(retry_after, polls))
                .await;
            polls += 1;
            let step = match self.poll_once(method, resource, &target, first).await {
                Ok(step) => step,
                Err(e) => {
                    if e.is_operation_failed() {
                        report(ProgressState::Failed, polls);
                    }
                    return Err(e);
                }
            };
            retry_after = step.retry_after;
            let done = step.state == ProgressState::Succeeded;
            report(step.state, polls);
            if done {
                return Ok(step.body);
            }
        }
    }

    /// One poll of `target`. A failed operation comes back as the error.
    async fn poll_once(
        &self,
        method: Method,
        resource: &ResourceId,
        target: &PollTarget,
        first: &RawResponse,
    ) -> Result<PollStep, ArmError> {
        let running = |status: String, percent_complete| ProgressState::Running {
            status,
            percent_complete,
        };
        match target {
            PollTarget::AsyncOperation(url) => {
                let response = self.poll_get(url).await?;
                let status: OperationStatus = response.json()?;
                let state = match status.state() {
                    OperationState::Running(word) => running(word, status.percent_complete),
                    OperationState::Succeeded => ProgressState::Succeeded,
                    OperationState::Failed(state, error) => {
                        return Err(ArmError::operation_failed(
                            state,
                            error,
                            failure_info(&first.info, &response.info),
                        ));
                    }
                };
                Ok(PollStep {
                    state,
                    body: None,
                    retry_after: response.retry_after(self.time_scale()),
                })
            }
            PollTarget::Location(url) => {
                let response = self.poll_get(url).await?;
                let (state, body) = match location_poll(response.status) {
                    LocationPoll::Running => (running("Accepted".into(), None), None),
                    LocationPoll::Done => (ProgressState::Succeeded, Some(response.body.clone())),
                };
                Ok(PollStep {
                    state,
                    body,
                    retry_after: response.retry_after(self.time_scale()),
                })
            }
            PollTarget::Resource => {
                let Some(response) = self.get_raw(resource, &[]).await? else {
                    if method == Method::Delete {
                        return Ok(PollStep {
                            state: ProgressState::Succeeded,
                            body: None,
                            retry_after: None,
                        });
                    }
                    return Err(ArmError::invalid_response(
                        "the resource disappeared while its operation was running",
                        first.info.clone(),
                    ));
                };
                let retry_after = response.retry_after(self.time_scale());
                let word = provisioning_state(&response.body);
                let state = match word {
                    _ if method == Method::Delete => {
                        running(word.unwrap_or_else(|| "Deleting".into()), None)
                    }
                    Some(s)
                        if s.eq_ignore_ascii_case("Failed")
                            || s.eq_ignore_ascii_case("Canceled") =>
                    {
                        let state = if s.eq_ignore_ascii_case("Failed") {
                            FailedState::Failed
                        } else {
                            FailedState::Canceled
                        };
                        return Err(ArmError::operation_failed(
                            state,
                            ErrorDetail {
                                code: "ProvisioningStateFailed".into(),
                                message: format!("the resource's provisioningState became '{s}'"),
                                ..ErrorDetail::default()
                            },
                            failure_info(&first.info, &response.info),
                        ));
                    }
                    Some(s) if !is_terminal(&s) => running(s, None),
                    _ => ProgressState::Succeeded,
                };
                Ok(PollStep {
                    state,
                    body: Some(response.body),
                    retry_after,
                })
            }
        }
    }
}

/// The request info a failed operation reports: the original request's method and path, with
/// the ids of whichever response carried them (the original's first, as support asks for it).
fn failure_info(original: &RequestInfo, poll: &RequestInfo) -> RequestInfo {
    RequestInfo {
        method: original.method.clone(),
        path: original.path.clone(),
        request_id: original
            .request_id
            .clone()
            .or_else(|| poll.request_id.clone()),
        correlation_id: original
            .correlation_id
            .clone()
            .or_else(|| poll.correlation_id.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OP: &str = "https://x/op";

    fn async_op() -> PollTarget {
        PollTarget::AsyncOperation(OP.into())
    }

    /// (method, status, polling header, provisioningState, expected).
    type Case = (
        Method,
        u16,
        Option<PollTarget>,
        Option<&'static str>,
        Disposition,
    );

    #[test]
    fn azure_async_operation_wins_over_location() {
        assert_eq!(
            poll_url(Some("https://a/op"), Some("https://a/loc")),
            Some(PollTarget::AsyncOperation("https://a/op".into()))
        );
        assert_eq!(
            poll_url(None, Some("https://a/loc")),
            Some(PollTarget::Location("https://a/loc".into()))
        );
        assert_eq!(
            poll_url(Some(" "), Some("https://a/loc")),
            Some(PollTarget::Location("https://a/loc".into()))
        );
        assert_eq!(poll_url(None, None), None);
    }

    #[test]
    fn first_response_dispositions() {
        use Disposition::{Done, Poll};
        use Method::{Delete, Post, Put};
        let cases: Vec<Case> = vec![
            // Network/compute create: 201 + Azure-AsyncOperation.
            (
                Put,
                201,
                Some(async_op()),
                Some("Updating"),
                Poll(async_op()),
            ),
            // 200 with a non-terminal state and a header polls the header...
            (
                Put,
                200,
                Some(async_op()),
                Some("Creating"),
                Poll(async_op()),
            ),
            // ...and without one polls the resource.
            (Put, 200, None, Some("Updating"), Poll(PollTarget::Resource)),
            (Put, 201, None, Some("Creating"), Poll(PollTarget::Resource)),
            // Terminal or absent provisioningState: done (absent means Succeeded).
            (Put, 200, None, Some("Succeeded"), Done),
            (Put, 201, None, None, Done),
            (Put, 200, Some(async_op()), Some("Succeeded"), Done),
            // Storage create: 202 + Location.
            (
                Put,
                202,
                Some(PollTarget::Location("https://x/l".into())),
                None,
                Poll(PollTarget::Location("https://x/l".into())),
            ),
            (
                Delete,
                202,
                Some(PollTarget::Location("https://x/l".into())),
                None,
                Poll(PollTarget::Location("https://x/l".into())),
            ),
            (Delete, 200, None, None, Done),
            (Delete, 204, None, None, Done),
            (Delete, 202, None, None, Poll(PollTarget::Resource)),
            (Post, 202, Some(async_op()), None, Poll(async_op())),
            (Post, 200, None, None, Done),
        ];
        for (method, status, target, state, expected) in cases {
            assert_eq!(
                initial_disposition(method, status, target.clone(), state),
                Ok(expected.clone()),
                "{method:?} {status} {target:?} {state:?}"
            );
        }
        assert!(initial_disposition(Post, 202, None, None).is_err());
    }

    #[test]
    fn operation_status_states() {
        let parse = |json: &str| -> OperationState {
            serde_json::from_str::<OperationStatus>(json)
                .expect("a status body parses")
                .state()
        };
        assert_eq!(
            parse(r#"{"status":"InProgress","percentComplete":40}"#),
            OperationState::Running("InProgress".into())
        );
        assert_eq!(
            parse(r#"{"status":"Succeeded"}"#),
            OperationState::Succeeded
        );
        let OperationState::Failed(FailedState::Failed, error) = parse(
            r#"{"name":"op","status":"Failed","error":{"code":"AllocationFailed","message":"Allocation failed.","details":[{"code":"Inner","message":"m"}]}}"#,
        ) else {
            panic!("Failed must be a failure");
        };
        assert_eq!(error.code, "AllocationFailed");
        assert_eq!(error.details[0].code, "Inner");
        let OperationState::Failed(FailedState::Canceled, error) =
            parse(r#"{"status":"Canceled"}"#)
        else {
            panic!("Canceled must be a failure");
        };
        assert_eq!(
            error.message,
            "the operation ended Canceled without an error object"
        );
    }

    #[test]
    fn location_polls_run_until_a_result() {
        assert_eq!(location_poll(202), LocationPoll::Running);
        for status in [200, 201, 204] {
            assert_eq!(location_poll(status), LocationPoll::Done);
        }
    }

    #[test]
    fn poll_interval_honours_retry_after_within_floor_and_cap() {
        let policy = PollPolicy::default();
        for polls in [0, 3, 40] {
            assert_eq!(
                policy.interval(Some(Duration::from_secs(17)), polls),
                Duration::from_secs(17)
            );
            assert_eq!(
                policy.interval(Some(Duration::ZERO), polls),
                Duration::from_secs(1)
            );
            assert_eq!(
                policy.interval(Some(Duration::from_mins(10)), polls),
                Duration::from_mins(2)
            );
        }
    }

    #[test]
    fn without_retry_after_the_wait_doubles_from_the_floor_to_the_default() {
        let policy = PollPolicy::default();
        let waits: Vec<u64> = (0..7)
            .map(|polls| policy.interval(None, polls).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10, 10]);
        // Far along (or with a huge count) it stays at the default instead of overflowing.
        assert_eq!(policy.interval(None, u32::MAX), Duration::from_secs(10));
        // A policy whose floor is above its default waits the floor.
        let odd = PollPolicy {
            min_interval: Duration::from_secs(20),
            ..PollPolicy::default()
        };
        assert_eq!(odd.interval(None, 0), Duration::from_secs(20));
    }

    #[test]
    fn provisioning_state_is_read_from_properties() {
        assert_eq!(
            provisioning_state(br#"{"properties":{"provisioningState":"Creating"}}"#).as_deref(),
            Some("Creating")
        );
        assert_eq!(provisioning_state(br#"{"name":"x"}"#), None);
        assert_eq!(provisioning_state(b""), None);
        assert!(is_terminal("succeeded") && is_terminal("Canceled") && !is_terminal("Deleting"));
    }
}
