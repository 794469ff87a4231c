//! Slowing down before ARM throttles: a pacer fed by `x-ms-ratelimit-remaining-*` headers.
//!
//! ARM meters requests per subscription (and globally and per tenant) with token buckets and
//! tells the client, on every response, how many requests of each kind remain. When a bucket
//! runs low the pacer delays further requests of that kind until the bucket's known refill rate
//! has brought it back above a threshold, so a burst of parallel creates slows itself down
//! instead of collecting 429s. The arithmetic is a pure function ([`bucket_delay`]); the
//! [`Pacer`] only stores the latest observation per bucket and reserves one token per request so
//! that concurrent callers queue behind each other instead of all firing at the same instant.
//!
//! A caller can also bound how many requests are in flight at once with a [`RequestGate`]
//! ([`super::ArmClient::gated`]): the client takes a permit for each HTTP exchange (a PUT, one
//! poll, the final GET) and returns it with the answer, so an operation waiting between polls
//! holds nothing. Every answer tells the gate whether ARM pushed back ([`Load`]), so a gate can
//! adapt its bound. The engine's `--parallelism` is such a gate.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What one answer said about ARM's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// ARM throttled the request (429), or a rate-limit bucket is low, so the pacer is holding
    /// requests back.
    Throttled,
    /// The request went through and every bucket has room.
    Clear,
}

/// Held while one request is in flight; dropping it lets the next one in.
pub type GatePermit = Box<dyn Send>;

/// A bound on the requests a client has in flight, lent to it with
/// [`super::ArmClient::gated`].
///
/// The client asks for a permit right before each HTTP exchange and drops it once the answer is
/// read: waits (pacing, retry backoff, the time between polls of a long-running operation) hold
/// no permit. It reports every answer's [`Load`] through [`RequestGate::observe`]; a request
/// that got no answer (a connection failure) reports nothing.
pub trait RequestGate: Send + Sync {
    /// Waits until one more request may be sent.
    fn admit(&self) -> Pin<Box<dyn Future<Output = GatePermit> + Send + '_>>;

    /// What an answer said about ARM's load.
    fn observe(&self, load: Load);
}

/// What a request costs in ARM's buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestClass {
    /// GET and HEAD.
    Read,
    /// PUT, PATCH, POST.
    Write,
    /// DELETE.
    Delete,
}

impl RequestClass {
    /// The class of an HTTP method.
    pub fn for_method(method: &str) -> Self {
        match method {
            "GET" | "HEAD" => Self::Read,
            "DELETE" => Self::Delete,
            _ => Self::Write,
        }
    }
}

/// One of ARM's request buckets, named after its `x-ms-ratelimit-remaining-*` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// `x-ms-ratelimit-remaining-subscription-reads`.
    SubscriptionReads,
    /// `x-ms-ratelimit-remaining-subscription-writes`.
    SubscriptionWrites,
    /// `x-ms-ratelimit-remaining-subscription-deletes`.
    SubscriptionDeletes,
    /// `x-ms-ratelimit-remaining-subscription-global-reads`.
    GlobalReads,
    /// `x-ms-ratelimit-remaining-subscription-global-writes`.
    GlobalWrites,
    /// `x-ms-ratelimit-remaining-tenant-reads`.
    TenantReads,
    /// `x-ms-ratelimit-remaining-tenant-writes`.
    TenantWrites,
}

impl Bucket {
    /// Every bucket.
    pub const ALL: [Self; 7] = [
        Self::SubscriptionReads,
        Self::SubscriptionWrites,
        Self::SubscriptionDeletes,
        Self::GlobalReads,
        Self::GlobalWrites,
        Self::TenantReads,
        Self::TenantWrites,
    ];

    /// The response header carrying this bucket's remaining count.
    pub fn header(self) -> &'static str {
        match self {
            Self::SubscriptionReads => "x-ms-ratelimit-remaining-subscription-reads",
            Self::SubscriptionWrites => "x-ms-ratelimit-remaining-subscription-writes",
            Self::SubscriptionDeletes => "x-ms-ratelimit-remaining-subscription-deletes",
            Self::GlobalReads => "x-ms-ratelimit-remaining-subscription-global-reads",
            Self::GlobalWrites => "x-ms-ratelimit-remaining-subscription-global-writes",
            Self::TenantReads => "x-ms-ratelimit-remaining-tenant-reads",
            Self::TenantWrites => "x-ms-ratelimit-remaining-tenant-writes",
        }
    }

    /// Whether a request of `class` draws from this bucket. Deletes also count against the
    /// global and tenant write buckets, which have no delete counterpart.
    pub fn applies_to(self, class: RequestClass) -> bool {
        match self {
            Self::SubscriptionReads | Self::GlobalReads | Self::TenantReads => {
                class == RequestClass::Read
            }
            Self::SubscriptionWrites => class == RequestClass::Write,
            Self::SubscriptionDeletes => class == RequestClass::Delete,
            Self::GlobalWrites | Self::TenantWrites => class != RequestClass::Read,
        }
    }

    /// (capacity, refill per second). Subscription buckets per ARM's 2024 token-bucket model
    /// (reads 250 + 25/s, writes and deletes 200 + 10/s); global buckets are 15 times that;
    /// tenant buckets follow the older hourly limits (12,000 reads, 1,200 writes per hour).
    pub fn shape(self) -> (f64, f64) {
        match self {
            Self::SubscriptionReads => (250.0, 25.0),
            Self::SubscriptionWrites | Self::SubscriptionDeletes => (200.0, 10.0),
            Self::GlobalReads => (3750.0, 375.0),
            Self::GlobalWrites => (3000.0, 150.0),
            Self::TenantReads => (12_000.0, 12_000.0 / 3600.0),
            Self::TenantWrites => (1_200.0, 1_200.0 / 3600.0),
        }
    }
}

/// Reads every `x-ms-ratelimit-remaining-*` bucket header present. `header` looks a header up
/// by lower-case name.
pub fn parse_remaining<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Vec<(Bucket, u32)> {
    Bucket::ALL
        .iter()
        .filter_map(|&bucket| {
            let value = header(bucket.header())?.trim().parse().ok()?;
            Some((bucket, value))
        })
        .collect()
}

/// How long a request must wait so that `bucket`, last seen with `remaining` requests left
/// `elapsed` ago, has refilled to `threshold_fraction` of its capacity. Zero when it already has.
pub fn bucket_delay(
    bucket: Bucket,
    remaining: f64,
    elapsed: Duration,
    threshold_fraction: f64,
) -> Duration {
    let (capacity, refill) = bucket.shape();
    let estimate = (remaining + refill * elapsed.as_secs_f64()).min(capacity);
    let threshold = capacity * threshold_fraction;
    if estimate >= threshold {
        Duration::ZERO
    } else {
        Duration::from_secs_f64((threshold - estimate) / refill)
    }
}

/// Shared across a client's requests: remembers each bucket's last reported level and tells the
/// next request how long to wait.
#[derive(Debug)]
pub struct Pacer {
    threshold_fraction: f64,
    observed: Mutex<HashMap<Bucket, (f64, Instant)>>,
}

impl Default for Pacer {
    fn default() -> Self {
        Self::new(0.1)
    }
}

impl Pacer {
    /// A pacer that slows down once a bucket falls below `threshold_fraction` of its capacity
    /// (0 disables pacing).
    pub fn new(threshold_fraction: f64) -> Self {
        Self {
            threshold_fraction,
            observed: Mutex::new(HashMap::new()),
        }
    }

    /// Records the buckets a response reported at `now`.
    pub fn observe(&self, remaining: &[(Bucket, u32)], now: Instant) {
        let mut observed = self
            .observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for &(bucket, left) in remaining {
            observed.insert(bucket, (f64::from(left), now));
        }
    }

    /// How long a request of `class` should wait at `now`, reserving one token from each bucket
    /// it draws on so the next caller waits a little longer.
    pub fn acquire(&self, class: RequestClass, now: Instant) -> Duration {
        let mut observed = self
            .observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut wait = Duration::ZERO;
        for (bucket, (remaining, at)) in observed.iter_mut() {
            if !bucket.applies_to(class) {
                continue;
            }
            let delay = bucket_delay(
                *bucket,
                *remaining,
                now.saturating_duration_since(*at),
                self.threshold_fraction,
            );
            wait = wait.max(delay);
            *remaining -= 1.0;
        }
        wait
    }

    /// Whether any bucket is currently below its threshold: the "slow down" signal the engine
    /// can show.
    pub fn is_slowing_down(&self, now: Instant) -> bool {
        let observed = self
            .observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        observed.iter().any(|(bucket, (remaining, at))| {
            bucket_delay(
                *bucket,
                *remaining,
                now.saturating_duration_since(*at),
                self.threshold_fraction,
            ) > Duration::ZERO
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_bucket_headers_are_read() {
        let headers = [
            ("x-ms-ratelimit-remaining-subscription-reads", "249"),
            ("x-ms-ratelimit-remaining-subscription-writes", "199"),
            ("x-ms-ratelimit-remaining-subscription-deletes", "198"),
            ("x-ms-ratelimit-remaining-subscription-global-reads", "3749"),
            (
                "x-ms-ratelimit-remaining-subscription-global-writes",
                "2999",
            ),
            ("x-ms-ratelimit-remaining-tenant-reads", "11999"),
            ("x-ms-ratelimit-remaining-tenant-writes", "junk"),
        ];
        let parsed = parse_remaining(|n| headers.iter().find(|(k, _)| *k == n).map(|(_, v)| *v));
        assert_eq!(
            parsed,
            vec![
                (Bucket::SubscriptionReads, 249),
                (Bucket::SubscriptionWrites, 199),
                (Bucket::SubscriptionDeletes, 198),
                (Bucket::GlobalReads, 3749),
                (Bucket::GlobalWrites, 2999),
                (Bucket::TenantReads, 11999),
            ]
        );
    }

    #[test]
    fn a_full_bucket_costs_nothing_and_a_low_one_waits_for_its_refill() {
        // Writes: capacity 200, refill 10/s, threshold 10% = 20.
        let b = Bucket::SubscriptionWrites;
        assert_eq!(bucket_delay(b, 150.0, Duration::ZERO, 0.1), Duration::ZERO);
        assert_eq!(bucket_delay(b, 20.0, Duration::ZERO, 0.1), Duration::ZERO);
        assert_eq!(
            bucket_delay(b, 5.0, Duration::ZERO, 0.1),
            Duration::from_millis(1500)
        );
        // Half a second later the bucket has refilled by 5.
        assert_eq!(
            bucket_delay(b, 5.0, Duration::from_millis(500), 0.1),
            Duration::from_secs(1)
        );
        assert_eq!(
            bucket_delay(b, 0.0, Duration::from_mins(1), 0.1),
            Duration::ZERO
        );
        // Pacing off.
        assert_eq!(bucket_delay(b, 0.0, Duration::ZERO, 0.0), Duration::ZERO);
    }

    #[test]
    fn pacer_delays_only_the_class_that_is_low_and_queues_concurrent_callers() {
        let pacer = Pacer::new(0.1);
        let t0 = Instant::now();
        pacer.observe(
            &[
                (Bucket::SubscriptionWrites, 18),
                (Bucket::SubscriptionReads, 240),
            ],
            t0,
        );
        assert!(pacer.is_slowing_down(t0));
        assert_eq!(pacer.acquire(RequestClass::Read, t0), Duration::ZERO);
        // 18 left, threshold 20: (20 - 18) / 10 per second.
        assert_eq!(
            pacer.acquire(RequestClass::Write, t0),
            Duration::from_millis(200)
        );
        // The first caller reserved a token: the second waits one refill interval longer.
        assert_eq!(
            pacer.acquire(RequestClass::Write, t0),
            Duration::from_millis(300)
        );
        // Deletes draw on their own bucket, which has not been reported low.
        assert_eq!(pacer.acquire(RequestClass::Delete, t0), Duration::ZERO);
        assert!(!pacer.is_slowing_down(t0 + Duration::from_secs(5)));
    }

    #[test]
    fn methods_map_to_classes() {
        assert_eq!(RequestClass::for_method("GET"), RequestClass::Read);
        assert_eq!(RequestClass::for_method("PUT"), RequestClass::Write);
        assert_eq!(RequestClass::for_method("POST"), RequestClass::Write);
        assert_eq!(RequestClass::for_method("DELETE"), RequestClass::Delete);
        assert!(Bucket::TenantWrites.applies_to(RequestClass::Delete));
        assert!(!Bucket::SubscriptionWrites.applies_to(RequestClass::Delete));
    }
}
