//! Request throttling in two layers, as Azure applies them.
//!
//! - ARM's front door: token buckets per subscription for reads, writes and deletes (reads 250
//!   refilled 25/s, writes and deletes 200 refilled 10/s, as ARM documents since 2024: "Understand
//!   how Azure Resource Manager throttles requests",
//!   <https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling>).
//! - Compute's own policies on writes to a virtual machine, checked once ARM let the request
//!   through: for each of create (PUT), update (PATCH, actions such as start or powerOff,
//!   extension writes) and delete (DELETE, deallocate) one bucket per VM and one per
//!   subscription ([`ComputeLimits`]; "Compute throttling limits",
//!   <https://learn.microsoft.com/azure/virtual-machines/compute-throttling-limits>). A request
//!   is classified by method and VM path alone, so any new kind of VM write (a PATCH, a new
//!   action) counts without further code. Its answers carry
//!   `x-ms-ratelimit-remaining-resource: Microsoft.Compute/<policy>;<count>,...`, and a refusal
//!   is Compute's 429 `OperationNotAllowed` with a `TooManyRequests` detail naming the policy
//!   ("Troubleshooting API throttling errors",
//!   <https://learn.microsoft.com/troubleshoot/azure/virtual-machines/troubleshooting-throttling-errors>).
//!   Compute documents no header names for its per-resource buckets; the emulator names them
//!   `<Policy>VMResource` and `<Policy>VMSubscription` (docs/emulator.md).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::json;
use tokio::time::Instant;

use super::config::{BucketShape, ComputeLimits};
use super::http::Reply;
use super::path::ResourcePath;

/// Which bucket a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Category {
    Reads,
    Writes,
    Deletes,
}

impl Category {
    pub fn of(method: &str) -> Self {
        match method {
            "GET" | "HEAD" => Self::Reads,
            "DELETE" => Self::Deletes,
            _ => Self::Writes,
        }
    }

    /// `(capacity, refill per second)`.
    fn limits(self) -> (f64, f64) {
        match self {
            Self::Reads => (250.0, 25.0),
            Self::Writes | Self::Deletes => (200.0, 10.0),
        }
    }

    pub fn header(self) -> &'static str {
        match self {
            Self::Reads => "x-ms-ratelimit-remaining-subscription-reads",
            Self::Writes => "x-ms-ratelimit-remaining-subscription-writes",
            Self::Deletes => "x-ms-ratelimit-remaining-subscription-deletes",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Reads => "read",
            Self::Writes => "write",
            Self::Deletes => "delete",
        }
    }
}

/// One token bucket, refilled lazily whenever it is looked at.
struct Bucket {
    tokens: f64,
    updated: Instant,
    /// Requests refused since the bucket last had a token, for Compute's error details.
    refused: u32,
}

impl Bucket {
    fn full(capacity: f64, now: Instant) -> Self {
        Self {
            tokens: capacity,
            updated: now,
            refused: 0,
        }
    }

    /// Adds what `refill` tokens a second bring back since the last look, on the emulator's
    /// clock: `scale` real seconds are one second of Azure's.
    fn refill(&mut self, capacity: f64, refill: f64, now: Instant, scale: f64) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64() / scale;
        self.tokens = (self.tokens + elapsed * refill).min(capacity);
        self.updated = now;
    }

    /// Real seconds until one token is back.
    fn wait(&self, refill: f64, scale: f64) -> f64 {
        (1.0 - self.tokens).max(0.0) / refill * scale
    }
}

/// The emulator's latency scale as a clock rate: 0 (instant operations) says nothing about
/// elapsed time, so the buckets then run in real time.
fn clock_rate(time_scale: f64) -> f64 {
    if time_scale > 0.0 && time_scale.is_finite() {
        time_scale
    } else {
        1.0
    }
}

/// What the buckets said about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Allowed; this many tokens remain.
    Allowed { remaining: u32 },
    /// Throttled; retry after this many whole seconds.
    Throttled { retry_after: u64 },
}

/// One of Compute's VM write policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum VmPolicy {
    /// Create or replace (PUT of the VM).
    Put,
    /// Update: PATCH, actions (start, powerOff, restart, redeploy, ...), child resource writes.
    Update,
    /// DELETE of the VM, deallocate, simulateEviction.
    Delete,
}

impl VmPolicy {
    /// The policy of `method` on `path`, or `None` when Compute's VM write limits do not apply
    /// (reads, other resource types, lists).
    pub fn of(method: &str, path: &ResourcePath) -> Option<Self> {
        let is_vm = path.namespace.eq_ignore_ascii_case("Microsoft.Compute")
            && path
                .segments
                .first()
                .is_some_and(|(t, _)| t.eq_ignore_ascii_case("virtualMachines"));
        if !is_vm || matches!(method, "GET" | "HEAD") {
            return None;
        }
        let on_the_vm = path.segments.len() == 1;
        Some(match (method, path.tail.as_deref()) {
            ("PUT", None) if on_the_vm => Self::Put,
            ("DELETE", None) if on_the_vm => Self::Delete,
            ("POST", Some(action))
                if on_the_vm
                    && ["deallocate", "simulateEviction"]
                        .iter()
                        .any(|a| a.eq_ignore_ascii_case(action)) =>
            {
                Self::Delete
            }
            _ => Self::Update,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Put => "PutVM",
            Self::Update => "UpdateVM",
            Self::Delete => "DeleteVM",
        }
    }
}

/// The two levels of a Compute policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Level {
    Resource,
    Subscription,
}

impl Level {
    fn suffix(self) -> &'static str {
        match self {
            Self::Resource => "Resource",
            Self::Subscription => "Subscription",
        }
    }
}

/// Per bucket: `(capacity, refill per second)`.
fn shape(bucket: BucketShape) -> (f64, f64) {
    (f64::from(bucket.capacity), bucket.refill_per_minute / 60.0)
}

/// Compute's refusal of a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ComputeRefusal {
    /// The policy that ran out, e.g. `UpdateVMResource`.
    pub policy: String,
    /// Real seconds until it has a token again.
    pub wait: f64,
    /// The bucket's capacity.
    pub allowed: u32,
    /// The capacity plus the requests refused since it ran out.
    pub measured: u32,
}

/// What Compute's policies said about one VM write.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ComputeVerdict {
    /// The policy the request falls under.
    pub policy: VmPolicy,
    /// Tokens left at the VM's and the subscription's level.
    pub remaining: (u32, u32),
    /// Set when the request is refused.
    pub refused: Option<ComputeRefusal>,
}

impl ComputeVerdict {
    /// The `x-ms-ratelimit-remaining-resource` value: both levels of the policy.
    pub fn header_value(&self) -> String {
        let name = self.policy.name();
        format!(
            "Microsoft.Compute/{name}{};{},Microsoft.Compute/{name}{};{}",
            Level::Resource.suffix(),
            self.remaining.0,
            Level::Subscription.suffix(),
            self.remaining.1,
        )
    }

    /// Compute's 429 for a refused request, `now` being the emulator's clock: the error shape
    /// Compute documents, `Retry-After` in whole seconds of the emulator's clock (at least 1)
    /// and the exact wait in `retry-after-ms`, like every wait the emulator sends.
    pub fn refusal_reply(&self, now: DateTime<Utc>) -> Option<Reply> {
        let refusal = self.refused.as_ref()?;
        let millis = float_to_count((refusal.wait * 1000.0).ceil());
        let seconds = float_to_count(refusal.wait.ceil()).max(1);
        let end = now + chrono::Duration::milliseconds(i64::from(millis));
        let violation = json!({
            "operationGroup": refusal.policy,
            "startTime": now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false),
            "endTime": end.to_rfc3339_opts(chrono::SecondsFormat::Micros, false),
            "allowedRequestCount": refusal.allowed,
            "measuredRequestCount": refusal.measured,
        });
        let body = json!({"error": {
            "code": "OperationNotAllowed",
            "message": "The server rejected the request because too many requests have been \
                        received for this subscription.",
            "details": [{
                "code": "TooManyRequests",
                "target": refusal.policy,
                "message": violation.to_string(),
            }],
        }});
        Some(
            Reply::json(429, body)
                .header("Retry-After", seconds.to_string())
                .header("retry-after-ms", millis.to_string()),
        )
    }
}

#[derive(Default)]
pub(crate) struct Throttle {
    buckets: HashMap<(String, Category), Bucket>,
    /// Compute's buckets by policy, level and owner (the VM's path or the subscription),
    /// lower-cased.
    compute: HashMap<(VmPolicy, Level, String), Bucket>,
}

impl Throttle {
    /// Takes one token from the subscription's bucket for `category`, refilling it first.
    ///
    /// `time_scale` is the emulator's latency scale: its operations run that many times as fast
    /// as Azure's, so its buckets must refill that much faster too, or a test at 0.01 exhausts
    /// the read budget by polling alone where real ARM never would. The Retry-After it returns
    /// counts the emulator's own seconds, like every `Retry-After` the emulator sends (whole
    /// seconds, at least 1): a client cannot know the scale, so ARM seconds would make it wait
    /// Azure's time. A scale of 0 (instant operations) says nothing about elapsed time, so the
    /// buckets then run in real time.
    pub fn take(
        &mut self,
        subscription: &str,
        category: Category,
        now: Instant,
        time_scale: f64,
    ) -> Verdict {
        let scale = clock_rate(time_scale);
        let (capacity, refill) = category.limits();
        let bucket = self
            .buckets
            .entry((subscription.to_ascii_lowercase(), category))
            .or_insert_with(|| Bucket::full(capacity, now));
        bucket.refill(capacity, refill, now, scale);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Verdict::Allowed {
                remaining: float_to_count(bucket.tokens),
            }
        } else {
            Verdict::Throttled {
                retry_after: u64::from(float_to_count(bucket.wait(refill, scale).ceil()).max(1)),
            }
        }
    }

    /// Takes one token from both levels of Compute's `policy` for a write to `vm` (the VM's
    /// path) in `subscription`, or refuses the request when either level is empty; a refused
    /// request takes nothing. The clock is the emulator's, as in [`Throttle::take`].
    pub fn take_compute(
        &mut self,
        subscription: &str,
        vm: &str,
        policy: VmPolicy,
        limits: &ComputeLimits,
        now: Instant,
        time_scale: f64,
    ) -> ComputeVerdict {
        let scale = clock_rate(time_scale);
        let levels = [
            (Level::Resource, vm, shape(limits.per_vm), limits.per_vm),
            (
                Level::Subscription,
                subscription,
                shape(limits.per_subscription),
                limits.per_subscription,
            ),
        ];
        let mut refused: Option<ComputeRefusal> = None;
        for (level, owner, (capacity, refill), configured) in levels {
            let bucket = self
                .compute
                .entry((policy, level, owner.to_ascii_lowercase()))
                .or_insert_with(|| Bucket::full(capacity, now));
            bucket.refill(capacity, refill, now, scale);
            if bucket.tokens < 1.0 {
                let wait = if refill > 0.0 {
                    bucket.wait(refill, scale)
                } else {
                    f64::from(u32::MAX)
                };
                bucket.refused = bucket.refused.saturating_add(1);
                if refused.as_ref().is_none_or(|r| wait > r.wait) {
                    refused = Some(ComputeRefusal {
                        policy: format!("{}{}", policy.name(), level.suffix()),
                        wait,
                        allowed: configured.capacity,
                        measured: configured.capacity.saturating_add(bucket.refused),
                    });
                }
            }
        }
        let mut remaining = [0u32; 2];
        for (i, (level, owner)) in [(Level::Resource, vm), (Level::Subscription, subscription)]
            .into_iter()
            .enumerate()
        {
            if let Some(bucket) = self
                .compute
                .get_mut(&(policy, level, owner.to_ascii_lowercase()))
            {
                if refused.is_none() {
                    bucket.tokens -= 1.0;
                    bucket.refused = 0;
                }
                remaining[i] = float_to_count(bucket.tokens);
            }
        }
        ComputeVerdict {
            policy,
            remaining: (remaining[0], remaining[1]),
            refused,
        }
    }
}

/// Token counts and waits are small and non-negative; the conversion only drops the fraction.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn float_to_count(value: f64) -> u32 {
    value.max(0.0).floor() as u32
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn buckets_refill_on_the_emulators_compressed_clock() {
        // Regression: at latency scale 0.01 the buckets refilled in real time, so polling a
        // 64-node apply exhausted the 250-read budget although ARM would have refilled it.
        let mut throttle = Throttle::default();
        let start = Instant::now();
        for _ in 0..200 {
            assert!(matches!(
                throttle.take("sub", Category::Writes, start, 0.01),
                Verdict::Allowed { .. }
            ));
        }
        assert_eq!(
            throttle.take("sub", Category::Writes, start, 0.01),
            Verdict::Throttled { retry_after: 1 }
        );
        // 0.1 s of real time is 10 s of emulated time: 100 writes refilled.
        let later = start + Duration::from_millis(100);
        for _ in 0..100 {
            assert!(matches!(
                throttle.take("sub", Category::Writes, later, 0.01),
                Verdict::Allowed { .. }
            ));
        }
        assert!(matches!(
            throttle.take("sub", Category::Writes, later, 0.01),
            Verdict::Throttled { .. }
        ));
        // Scale 0 (instant operations) keeps real time.
        let mut instant = Throttle::default();
        for _ in 0..200 {
            instant.take("sub", Category::Writes, start, 0.0);
        }
        assert!(matches!(
            instant.take(
                "sub",
                Category::Writes,
                start + Duration::from_millis(100),
                0.0
            ),
            Verdict::Allowed { .. }
        ));
        assert!(matches!(
            instant.take(
                "sub",
                Category::Writes,
                start + Duration::from_millis(100),
                0.0
            ),
            Verdict::Throttled { .. }
        ));
    }

    #[test]
    fn writes_allow_a_burst_of_200_then_throttle_and_refill() {
        let mut throttle = Throttle::default();
        let start = Instant::now();
        for i in 0..200u32 {
            assert_eq!(
                throttle.take("sub", Category::Writes, start, 1.0),
                Verdict::Allowed { remaining: 199 - i }
            );
        }
        assert_eq!(
            throttle.take("sub", Category::Writes, start, 1.0),
            Verdict::Throttled { retry_after: 1 }
        );
        // Other subscriptions and other categories have their own buckets.
        assert!(matches!(
            throttle.take("other", Category::Writes, start, 1.0),
            Verdict::Allowed { .. }
        ));
        assert!(matches!(
            throttle.take("sub", Category::Reads, start, 1.0),
            Verdict::Allowed { .. }
        ));
        // 10 tokens a second: after one second, ten more writes pass.
        let later = start + Duration::from_secs(1);
        for _ in 0..10 {
            assert!(matches!(
                throttle.take("sub", Category::Writes, later, 1.0),
                Verdict::Allowed { .. }
            ));
        }
        assert!(matches!(
            throttle.take("sub", Category::Writes, later, 1.0),
            Verdict::Throttled { .. }
        ));
    }

    #[test]
    fn methods_map_to_arm_categories() {
        assert_eq!(Category::of("GET"), Category::Reads);
        assert_eq!(Category::of("POST"), Category::Writes);
        assert_eq!(Category::of("PATCH"), Category::Writes);
        assert_eq!(Category::of("DELETE"), Category::Deletes);
    }

    fn vm_path(method_path: &str) -> ResourcePath {
        match super::super::path::parse(method_path) {
            super::super::path::Route::Resource(path) => path,
            other => panic!("not a resource path: {other:?}"),
        }
    }

    const VM: &str =
        "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1";

    #[test]
    fn vm_writes_fall_under_computes_policies_by_method_and_path() {
        let of = |method, path: &str| VmPolicy::of(method, &vm_path(path));
        assert_eq!(of("PUT", VM), Some(VmPolicy::Put));
        assert_eq!(of("PATCH", VM), Some(VmPolicy::Update));
        assert_eq!(of("POST", &format!("{VM}/start")), Some(VmPolicy::Update));
        assert_eq!(
            of("POST", &format!("{VM}/powerOff")),
            Some(VmPolicy::Update)
        );
        assert_eq!(
            of("POST", &format!("{VM}/deallocate")),
            Some(VmPolicy::Delete)
        );
        assert_eq!(of("DELETE", VM), Some(VmPolicy::Delete));
        assert_eq!(
            of("PUT", &format!("{VM}/extensions/ext")),
            Some(VmPolicy::Update)
        );
        assert_eq!(of("GET", VM), None);
        assert_eq!(of("GET", &format!("{VM}/instanceView")), None);
        let disk = VM.replace("virtualMachines/vm1", "disks/d1");
        assert_eq!(of("PUT", &disk), None);
    }

    #[test]
    fn a_vm_allows_twelve_updates_then_refuses_until_a_token_is_back() {
        let limits = ComputeLimits::default();
        let mut throttle = Throttle::default();
        let start = Instant::now();
        for i in 0..12u32 {
            let verdict = throttle.take_compute("sub", VM, VmPolicy::Update, &limits, start, 1.0);
            assert_eq!(verdict.refused, None, "update {i}");
            assert_eq!(verdict.remaining, (11 - i, 1499 - i));
        }
        let refused = throttle.take_compute("sub", VM, VmPolicy::Update, &limits, start, 1.0);
        assert_eq!(refused.remaining, (0, 1488));
        let refusal = refused.refused.clone().expect("the 13th update is refused");
        assert_eq!(refusal.policy, "UpdateVMResource");
        // 4 tokens a minute: one is back after 15 s.
        assert!((refusal.wait - 15.0).abs() < 1e-9, "{}", refusal.wait);
        assert_eq!((refusal.allowed, refusal.measured), (12, 13));
        assert_eq!(
            refused.header_value(),
            "Microsoft.Compute/UpdateVMResource;0,Microsoft.Compute/UpdateVMSubscription;1488"
        );
        let reply = refused
            .refusal_reply(Utc::now())
            .expect("a refusal has a reply");
        assert_eq!(reply.status, 429);
        let body = reply.body.expect("a body");
        assert_eq!(body["error"]["code"], "OperationNotAllowed");
        assert_eq!(body["error"]["details"][0]["code"], "TooManyRequests");
        assert_eq!(body["error"]["details"][0]["target"], "UpdateVMResource");
        assert!(reply.headers.contains(&("Retry-After".into(), "15".into())));
        assert!(
            reply
                .headers
                .contains(&("retry-after-ms".into(), "15000".into()))
        );
        // Another VM, and another policy on this VM, have their own buckets.
        let other = VM.replace("vm1", "vm2");
        for policy in [VmPolicy::Update, VmPolicy::Delete] {
            let vm = if policy == VmPolicy::Update {
                &other
            } else {
                VM
            };
            assert_eq!(
                throttle
                    .take_compute("sub", vm, policy, &limits, start, 1.0)
                    .refused,
                None
            );
        }
        // Paths differ in case only: the same VM.
        assert!(
            throttle
                .take_compute(
                    "sub",
                    &VM.to_uppercase(),
                    VmPolicy::Update,
                    &limits,
                    start,
                    1.0
                )
                .refused
                .is_some()
        );
        // 15 s later one update passes, the next is refused again.
        let later = start + std::time::Duration::from_secs(15);
        let verdict = throttle.take_compute("sub", VM, VmPolicy::Update, &limits, later, 1.0);
        assert_eq!(verdict.refused, None);
        assert!(
            throttle
                .take_compute("sub", VM, VmPolicy::Update, &limits, later, 1.0)
                .refused
                .is_some()
        );
    }

    #[test]
    fn the_subscription_level_limits_all_vms_and_waits_count_the_emulators_seconds() {
        let limits = ComputeLimits {
            per_vm: BucketShape {
                capacity: 12,
                refill_per_minute: 4.0,
            },
            per_subscription: BucketShape {
                capacity: 2,
                refill_per_minute: 1.0,
            },
        };
        let mut throttle = Throttle::default();
        let start = Instant::now();
        for vm in ["vm1", "vm2"] {
            let path = VM.replace("vm1", vm);
            assert_eq!(
                throttle
                    .take_compute("sub", &path, VmPolicy::Put, &limits, start, 0.01)
                    .refused,
                None
            );
        }
        let refused = throttle.take_compute(
            "sub",
            &VM.replace("vm1", "vm3"),
            VmPolicy::Put,
            &limits,
            start,
            0.01,
        );
        let refusal = refused
            .refused
            .clone()
            .expect("the subscription is out of PUTs");
        assert_eq!(refusal.policy, "PutVMSubscription");
        // 60 s of Azure's time at scale 0.01: 0.6 s, sent as Retry-After 1 and 600 ms.
        let reply = refused.refusal_reply(Utc::now()).expect("a reply");
        assert!(reply.headers.contains(&("Retry-After".into(), "1".into())));
        assert!(
            reply
                .headers
                .contains(&("retry-after-ms".into(), "600".into()))
        );
        // A refused request took nothing from the VM's own bucket.
        assert_eq!(refused.remaining, (12, 0));
    }
}
