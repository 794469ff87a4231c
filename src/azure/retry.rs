//! When to retry a request and how long to wait: small pure functions (the smithy-rs way).
//!
//! The client calls [`classify`] on every failed attempt and [`RetryPolicy::delay`] to turn the
//! class into a wait or a stop. Neither does I/O, reads a clock or draws a random number: the
//! jitter and "now" are arguments, so the tests below pin every decision exactly.
//!
//! What is safe to retry:
//! - 429: the request was refused before anything was done, so any method may retry, after
//!   `Retry-After`. That holds for both throttling layers: ARM's token buckets (reads, writes and
//!   deletes per subscription or tenant) and a resource provider's policies, such as Compute's
//!   per-VM update limit, whose 429 `OperationNotAllowed` / `TooManyRequests` is a refusal
//!   ("Troubleshooting API throttling errors",
//!   <https://learn.microsoft.com/troubleshoot/azure/virtual-machines/troubleshooting-throttling-errors>).
//!   So even a non-idempotent action (`restart`) is retried on a 429, never on a 5xx.
//! - A failed connect: the request never left, so any method may retry.
//! - 500/502/503/504, timeouts and broken connections: the request may have been applied, so
//!   only idempotent requests retry (GET, PUT, DELETE, operation polls; POST actions only when
//!   the caller vouches for them).
//! - Any other 4xx is the caller's problem and is never retried.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// How an attempt ended, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// ARM answered with this status.
    Status(u16),
    /// The attempt timed out.
    Timeout,
    /// The connection could not be made; nothing was sent.
    ConnectFailed,
    /// The connection broke during the exchange.
    OtherTransport,
}

/// What kind of failure an attempt was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryClass {
    /// 429: wait (Retry-After) and retry.
    Throttled,
    /// A transient failure that is safe to retry for this request.
    Transient,
    /// Success, a client error, or a failure that is unsafe to retry for this request.
    DoNotRetry,
}

/// Classifies one attempt. `idempotent` says whether repeating the request is harmless.
pub fn classify(outcome: AttemptOutcome, idempotent: bool) -> RetryClass {
    match outcome {
        AttemptOutcome::Status(429) => RetryClass::Throttled,
        AttemptOutcome::ConnectFailed => RetryClass::Transient,
        AttemptOutcome::Status(500 | 502 | 503 | 504)
        | AttemptOutcome::Timeout
        | AttemptOutcome::OtherTransport
            if idempotent =>
        {
            RetryClass::Transient
        }
        _ => RetryClass::DoNotRetry,
    }
}

/// Attempt limits and backoff shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Total attempts, the first included.
    pub max_attempts: u32,
    /// Backoff before the first retry (before jitter).
    pub base_delay: Duration,
    /// The longest backoff (before jitter).
    pub max_delay: Duration,
    /// The longest `Retry-After` the client waits out. A longer one stops the request at once
    /// ([`RetryDecision::WaitTooLong`]): retrying before the server's time is refused again and,
    /// at Compute, counts against the same policy.
    pub max_retry_after: Duration,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Wait this long, then send the request again.
    Retry(Duration),
    /// Give up: the failure is not retryable, or the attempts are spent.
    Stop,
    /// Give up now: the server asked for this wait, longer than
    /// [`RetryPolicy::max_retry_after`]. A retry any sooner would be refused again.
    WaitTooLong(Duration),
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(800),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_mins(2),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// Whether and when to send the request again.
    ///
    /// `attempt` is the 1-based number of the attempt that just failed. `retry_after` is what
    /// the response asked for, honoured exactly as given up to `max_retry_after`; a longer one
    /// ends the request at once with [`RetryDecision::WaitTooLong`], whatever attempts are left,
    /// since cutting the wait short only earns another refusal (and Compute counts refused
    /// requests against the policy). Without it the wait is exponential backoff with full
    /// jitter: `jitter * min(max_delay, base * 2^(attempt-1))`, where `jitter` is a uniform draw
    /// from [0, 1) supplied by the caller.
    pub fn decide(
        &self,
        class: RetryClass,
        attempt: u32,
        retry_after: Option<Duration>,
        jitter: f64,
    ) -> RetryDecision {
        if class == RetryClass::DoNotRetry {
            return RetryDecision::Stop;
        }
        if let Some(wait) = retry_after.filter(|w| *w > self.max_retry_after) {
            return RetryDecision::WaitTooLong(wait);
        }
        if attempt >= self.max_attempts {
            return RetryDecision::Stop;
        }
        RetryDecision::Retry(retry_after.unwrap_or_else(|| {
            self.backoff_ceiling(attempt)
                .mul_f64(jitter.clamp(0.0, 1.0))
        }))
    }

    /// The wait before the next attempt, or `None` to stop for any reason (see [`Self::decide`]).
    pub fn delay(
        &self,
        class: RetryClass,
        attempt: u32,
        retry_after: Option<Duration>,
        jitter: f64,
    ) -> Option<Duration> {
        match self.decide(class, attempt, retry_after, jitter) {
            RetryDecision::Retry(wait) => Some(wait),
            RetryDecision::Stop | RetryDecision::WaitTooLong(_) => None,
        }
    }

    /// The un-jittered backoff after attempt `attempt` (1-based).
    pub fn backoff_ceiling(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(30);
        self.base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay)
    }
}

/// Reads how long the server asked the client to wait.
///
/// `header` looks a header up by lower-case name. The millisecond headers some Azure services
/// send (`retry-after-ms`, `x-ms-retry-after-ms`) win over `Retry-After`, which is either whole
/// seconds (what ARM sends) or an HTTP date, measured from `now`. A date in the past means "no
/// wait"; an unreadable value is ignored.
pub fn parse_retry_after<'a>(
    header: impl Fn(&str) -> Option<&'a str>,
    now: DateTime<Utc>,
) -> Option<Duration> {
    if let Some(exact) = parse_retry_after_ms(&header) {
        return Some(exact);
    }
    let value = header("retry-after")?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&Utc) - now;
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// Reads a millisecond wait (`retry-after-ms`, else `x-ms-retry-after-ms`), the server's exact
/// wall time. `dsinfra emulator` sends one next to its whole-second `Retry-After`, because its
/// compressed operations end between whole seconds.
pub fn parse_retry_after_ms<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Option<Duration> {
    ["retry-after-ms", "x-ms-retry-after-ms"]
        .into_iter()
        .find_map(|name| header(name).and_then(|v| v.trim().parse::<u64>().ok()))
        .map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifier_table() {
        use AttemptOutcome::{ConnectFailed, OtherTransport, Status, Timeout};
        use RetryClass::{DoNotRetry, Throttled, Transient};
        let table = [
            // (outcome, idempotent, expected)
            (Status(429), true, Throttled),
            (Status(429), false, Throttled),
            (Status(500), true, Transient),
            (Status(502), true, Transient),
            (Status(503), true, Transient),
            (Status(504), true, Transient),
            (Status(500), false, DoNotRetry),
            (Status(503), false, DoNotRetry),
            (Status(501), true, DoNotRetry),
            (Status(400), true, DoNotRetry),
            (Status(401), true, DoNotRetry),
            (Status(403), true, DoNotRetry),
            (Status(404), true, DoNotRetry),
            (Status(408), true, DoNotRetry),
            (Status(409), true, DoNotRetry),
            (Status(200), true, DoNotRetry),
            (Timeout, true, Transient),
            (Timeout, false, DoNotRetry),
            (OtherTransport, true, Transient),
            (OtherTransport, false, DoNotRetry),
            (ConnectFailed, true, Transient),
            (ConnectFailed, false, Transient),
        ];
        for (outcome, idempotent, expected) in table {
            assert_eq!(
                classify(outcome, idempotent),
                expected,
                "{outcome:?} idempotent={idempotent}"
            );
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_ceiling() {
        let policy = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(10),
            max_retry_after: Duration::from_mins(1),
        };
        let ceilings: Vec<u64> = (1..=6)
            .map(|a| policy.backoff_ceiling(a).as_secs())
            .collect();
        assert_eq!(ceilings, [1, 2, 4, 8, 10, 10]);
        assert_eq!(policy.backoff_ceiling(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn full_jitter_stays_within_zero_and_the_ceiling() {
        let policy = RetryPolicy::default();
        for attempt in 1..policy.max_attempts {
            let ceiling = policy.backoff_ceiling(attempt);
            for jitter in [0.0, 0.25, 0.5, 0.999_999] {
                let delay = policy
                    .delay(RetryClass::Transient, attempt, None, jitter)
                    .expect("attempts below the cap retry");
                assert!(delay <= ceiling, "{delay:?} > {ceiling:?}");
                assert_eq!(delay, ceiling.mul_f64(jitter));
            }
        }
        // Out-of-range jitter is clamped instead of overshooting.
        assert_eq!(
            policy.delay(RetryClass::Transient, 1, None, 7.0),
            Some(policy.backoff_ceiling(1))
        );
    }

    #[test]
    fn attempts_are_capped_and_client_errors_stop_at_once() {
        let policy = RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        };
        assert!(policy.delay(RetryClass::Transient, 2, None, 0.5).is_some());
        assert_eq!(policy.delay(RetryClass::Transient, 3, None, 0.5), None);
        assert_eq!(policy.delay(RetryClass::DoNotRetry, 1, None, 0.5), None);
        assert_eq!(
            RetryPolicy::none().delay(RetryClass::Throttled, 1, None, 0.5),
            None
        );
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.decide(RetryClass::Throttled, 1, Some(Duration::from_secs(6)), 0.1),
            RetryDecision::Retry(Duration::from_secs(6))
        );
        assert_eq!(
            policy.decide(RetryClass::Throttled, 1, Some(policy.max_retry_after), 0.1),
            RetryDecision::Retry(policy.max_retry_after)
        );
    }

    /// Regression: a Retry-After above the cap (Compute's per-VM policies can ask for 1200 s)
    /// used to be cut to the cap and retried early, which Compute refuses again.
    #[test]
    fn a_retry_after_above_the_cap_stops_at_once_instead_of_retrying_early() {
        let policy = RetryPolicy::default();
        let long = Duration::from_mins(20);
        assert_eq!(
            policy.decide(RetryClass::Throttled, 1, Some(long), 0.1),
            RetryDecision::WaitTooLong(long)
        );
        // Even on the last attempt the caller learns why it stops.
        assert_eq!(
            policy.decide(RetryClass::Throttled, policy.max_attempts, Some(long), 0.1),
            RetryDecision::WaitTooLong(long)
        );
        assert_eq!(
            policy.delay(RetryClass::Throttled, 1, Some(long), 0.1),
            None
        );
    }

    #[test]
    fn retry_after_parsing() {
        let now = DateTime::parse_from_rfc3339("2015-10-21T07:28:00Z")
            .expect("a fixed instant")
            .with_timezone(&Utc);
        let headers = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
        };
        assert_eq!(
            parse_retry_after(headers(&[("retry-after", "17")]), now),
            Some(Duration::from_secs(17))
        );
        assert_eq!(
            parse_retry_after(headers(&[("retry-after", " 0 ")]), now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(
                headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]),
                now
            ),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after(
                headers(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(
                headers(&[("retry-after", "17"), ("retry-after-ms", "250")]),
                now
            ),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_retry_after(headers(&[("x-ms-retry-after-ms", "40")]), now),
            Some(Duration::from_millis(40))
        );
        assert_eq!(
            parse_retry_after(headers(&[("retry-after", "soon")]), now),
            None
        );
        assert_eq!(parse_retry_after(headers(&[]), now), None);
    }
}
