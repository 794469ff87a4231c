//! Slowing down before ARM throttles: a pacer fed by the `x-ms-ratelimit-remaining-*` headers.
//!
//! Two layers throttle a request, and both say on every answer how much room is left:
//!
//! - ARM's front door, with token buckets per scope (subscription, the subscription across all
//!   regions, tenant) and per operation type (reads, writes, deletes each have their own bucket).
//!   Since 2024 a subscription's reads hold 250 tokens refilled at 25 a second, its writes and
//!   its deletes 200 refilled at 10; the tenant buckets are the same size, the global ones 15
//!   times larger ("Understand how Azure Resource Manager throttles requests",
//!   <https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling>).
//!   The old hourly limits (12,000 reads and 1,200 writes an hour) are no longer modelled: ARM
//!   sends the same header names, but their counts now come from the buckets above.
//! - The resource provider, in `x-ms-ratelimit-remaining-resource: <RP>/<policy>;<count>` (one
//!   entry per policy, comma-separated or repeated). Compute's policies are token buckets too,
//!   per VM and per subscription, each refilled by a third of its capacity a minute (a VM's
//!   updates: 12, refilled 4 a minute; "Compute throttling limits",
//!   <https://learn.microsoft.com/azure/virtual-machines/compute-throttling-limits>, and
//!   "Troubleshooting API throttling errors",
//!   <https://learn.microsoft.com/troubleshoot/azure/virtual-machines/troubleshooting-throttling-errors>).
//!   The header gives no capacity, so the pacer takes the largest count it has seen plus the
//!   request that spent it, and the refill from the policy's name (`...30Min` refills its
//!   capacity over 30 minutes) or Compute's documented third a minute.
//!
//! When a bucket runs low the pacer delays further requests that draw on it until its refill
//! has brought it back above a threshold (at least one whole token), so a burst slows itself
//! down instead of collecting 429s. ARM buckets are kept per subscription (tenant buckets once);
//! a resource policy is kept per top-level resource and operation type, so a throttled VM does
//! not hold back its neighbours. The arithmetic is pure ([`refill_delay`]); the [`Pacer`] only
//! stores the latest observation per bucket and reserves one token per request so that
//! concurrent callers queue behind each other instead of all firing at the same instant.
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

/// What a request costs in ARM's buckets: each operation type has its own.
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

/// Where ARM counts one of its buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One subscription in the region ARM served the request from.
    Subscription,
    /// One subscription across every region.
    SubscriptionGlobal,
    /// The tenant, for requests without a subscription.
    Tenant,
}

/// One of ARM's token buckets: a scope and an operation type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// Where it is counted.
    pub scope: Scope,
    /// Which requests draw on it.
    pub class: RequestClass,
}

impl Bucket {
    /// Every bucket ARM reports.
    pub const ALL: [Self; 9] = {
        use RequestClass::{Delete, Read, Write};
        use Scope::{Subscription, SubscriptionGlobal, Tenant};
        [
            Self::new(Subscription, Read),
            Self::new(Subscription, Write),
            Self::new(Subscription, Delete),
            Self::new(SubscriptionGlobal, Read),
            Self::new(SubscriptionGlobal, Write),
            Self::new(SubscriptionGlobal, Delete),
            Self::new(Tenant, Read),
            Self::new(Tenant, Write),
            Self::new(Tenant, Delete),
        ]
    };

    /// The bucket of `class` requests counted at `scope`.
    pub const fn new(scope: Scope, class: RequestClass) -> Self {
        Self { scope, class }
    }

    /// The response header carrying this bucket's remaining count.
    pub fn header(self) -> &'static str {
        use RequestClass::{Delete, Read, Write};
        match (self.scope, self.class) {
            (Scope::Subscription, Read) => "x-ms-ratelimit-remaining-subscription-reads",
            (Scope::Subscription, Write) => "x-ms-ratelimit-remaining-subscription-writes",
            (Scope::Subscription, Delete) => "x-ms-ratelimit-remaining-subscription-deletes",
            (Scope::SubscriptionGlobal, Read) => {
                "x-ms-ratelimit-remaining-subscription-global-reads"
            }
            (Scope::SubscriptionGlobal, Write) => {
                "x-ms-ratelimit-remaining-subscription-global-writes"
            }
            (Scope::SubscriptionGlobal, Delete) => {
                "x-ms-ratelimit-remaining-subscription-global-deletes"
            }
            (Scope::Tenant, Read) => "x-ms-ratelimit-remaining-tenant-reads",
            (Scope::Tenant, Write) => "x-ms-ratelimit-remaining-tenant-writes",
            (Scope::Tenant, Delete) => "x-ms-ratelimit-remaining-tenant-deletes",
        }
    }

    /// `(capacity, refill per second)` from ARM's documented buckets (module docs): reads hold
    /// 250 refilled 25/s, writes and deletes 200 refilled 10/s, for a subscription and for a
    /// tenant alike; the global buckets are 15 times the subscription's.
    pub fn shape(self) -> (f64, f64) {
        let (capacity, refill) = match self.class {
            RequestClass::Read => (250.0, 25.0),
            RequestClass::Write | RequestClass::Delete => (200.0, 10.0),
        };
        match self.scope {
            Scope::Subscription | Scope::Tenant => (capacity, refill),
            Scope::SubscriptionGlobal => (capacity * 15.0, refill * 15.0),
        }
    }
}

/// The header naming a resource provider's policies.
pub const RESOURCE_HEADER: &str = "x-ms-ratelimit-remaining-resource";

/// One entry of `x-ms-ratelimit-remaining-resource`, e.g. `Microsoft.Compute/PutVM3Min;239`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePolicy {
    /// `<RP>/<policy>`, e.g. `Microsoft.Compute/PutVM3Min`.
    pub name: String,
    /// Requests left under the policy.
    pub remaining: u32,
}

impl ResourcePolicy {
    /// How long the policy takes to refill its whole capacity: the window its name ends with
    /// (`HighCostGet30Min`: 30 minutes), else three minutes, as Compute's token buckets refill a
    /// third of their capacity a minute.
    pub fn refill_window(&self) -> Duration {
        let digits = self
            .name
            .strip_suffix("Min")
            .map(|rest| {
                let start = rest
                    .rfind(|c: char| !c.is_ascii_digit())
                    .map_or(0, |i| i + 1);
                &rest[start..]
            })
            .and_then(|digits| digits.parse::<u64>().ok())
            .filter(|&minutes| minutes > 0);
        Duration::from_secs(digits.unwrap_or(3) * 60)
    }
}

/// Reads every ARM bucket header present. `header` looks a header up by lower-case name.
pub fn parse_remaining<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Vec<(Bucket, u32)> {
    Bucket::ALL
        .iter()
        .filter_map(|&bucket| {
            let value = header(bucket.header())?.trim().parse().ok()?;
            Some((bucket, value))
        })
        .collect()
}

/// Reads every policy in the values of `x-ms-ratelimit-remaining-resource` (the header may be
/// repeated, and one value may list several policies separated by commas). Entries that are not
/// `name;count` are skipped.
pub fn parse_resource_policies<'a>(
    values: impl IntoIterator<Item = &'a str>,
) -> Vec<ResourcePolicy> {
    values
        .into_iter()
        .flat_map(|value| value.split(','))
        .filter_map(|entry| {
            let (name, count) = entry.trim().rsplit_once(';')?;
            let name = name.trim();
            (!name.is_empty()).then_some(())?;
            Some(ResourcePolicy {
                name: name.to_owned(),
                remaining: count.trim().parse().ok()?,
            })
        })
        .collect()
}

/// How long a request must wait so that a bucket of `capacity` refilled at `refill` tokens a
/// second, last seen with `remaining` tokens `elapsed` ago, is back to `threshold_fraction` of
/// its capacity, and to at least one whole token (a threshold below one would send the request
/// into an empty bucket). Zero when it already is, or when `threshold_fraction` is 0 (pacing off).
pub fn refill_delay(
    capacity: f64,
    refill: f64,
    remaining: f64,
    elapsed: Duration,
    threshold_fraction: f64,
) -> Duration {
    if threshold_fraction <= 0.0 || refill <= 0.0 {
        return Duration::ZERO;
    }
    let estimate = (remaining + refill * elapsed.as_secs_f64()).min(capacity);
    let threshold = (capacity * threshold_fraction).max(1.0);
    if estimate >= threshold {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64((threshold - estimate) / refill).unwrap_or(Duration::MAX)
    }
}

/// [`refill_delay`] for one of ARM's buckets.
pub fn bucket_delay(
    bucket: Bucket,
    remaining: f64,
    elapsed: Duration,
    threshold_fraction: f64,
) -> Duration {
    let (capacity, refill) = bucket.shape();
    refill_delay(capacity, refill, remaining, elapsed, threshold_fraction)
}

/// The request a pacing decision is about: its operation type, and where ARM and the resource
/// provider count it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The operation type.
    pub class: RequestClass,
    /// The subscription in the path, lower-cased; `None` for a tenant request.
    pub subscription: Option<String>,
    /// The top-level resource in the path (`/subscriptions/../providers/NS/type/name`),
    /// lower-cased, which also covers its child resources and actions; `None` above resources.
    pub resource: Option<String>,
}

impl Target {
    /// The target of `method` on the URL path `path`.
    pub fn of(method: &str, path: &str) -> Self {
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        let subscription = (segments.len() > 2
            && segments[1].eq_ignore_ascii_case("subscriptions"))
        .then(|| segments[2].to_ascii_lowercase());
        let resource = (segments.len() >= 9
            && segments[3].eq_ignore_ascii_case("resourceGroups")
            && segments[5].eq_ignore_ascii_case("providers"))
        .then(|| segments[..9].join("/").to_ascii_lowercase());
        Self {
            class: RequestClass::for_method(method),
            subscription,
            resource,
        }
    }

    /// Who owns `scope`'s counts for this request: the subscription, or the tenant ("").
    fn owner(&self, scope: Scope) -> &str {
        match scope {
            Scope::Subscription | Scope::SubscriptionGlobal => {
                self.subscription.as_deref().unwrap_or_default()
            }
            Scope::Tenant => "",
        }
    }
}

/// A bucket's last reported level, as the pacer tracks it.
#[derive(Debug, Clone, Copy)]
struct Level {
    remaining: f64,
    capacity: f64,
    refill: f64,
    at: Instant,
}

/// The resource policies of one resource and operation type, by policy name. Keyed by resource
/// first so that a request looks up its own policies instead of scanning every resource's: a
/// 256-node apply has a policy per VM, and the scan was a string compare per VM per request.
type Policies = HashMap<String, Level>;

#[derive(Debug, Default)]
struct Observed {
    /// ARM's buckets by bucket and owner (subscription id, or "" for the tenant).
    buckets: HashMap<(Bucket, String), Level>,
    /// Resource provider policies, by resource, then operation type (nested, so that a request
    /// finds its resource's by the name it holds, without building a key).
    policies: HashMap<String, HashMap<RequestClass, Policies>>,
}

impl Observed {
    fn levels(&self) -> impl Iterator<Item = &Level> {
        self.buckets.values().chain(
            self.policies
                .values()
                .flat_map(HashMap::values)
                .flat_map(HashMap::values),
        )
    }
}

/// Shared across a client's requests: remembers each bucket's last reported level and tells the
/// next request how long to wait.
#[derive(Debug)]
pub struct Pacer {
    threshold_fraction: f64,
    time_scale: f64,
    observed: Mutex<Observed>,
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
            time_scale: 1.0,
            observed: Mutex::new(Observed::default()),
        }
    }

    /// The same pacer on a client whose waits are multiplied by `scale` (see
    /// [`super::ArmClientBuilder::time_scale`]): a real second between two observations is
    /// then `1 / scale` seconds of the server's refill, as the waits it returns are slept
    /// `scale` times as long. 0 (no waiting at all) keeps real time.
    #[must_use]
    pub fn with_time_scale(mut self, scale: f64) -> Self {
        self.time_scale = if scale > 0.0 && scale.is_finite() {
            scale
        } else {
            1.0
        };
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Observed> {
        self.observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Time since `at` in the client's time.
    fn elapsed(&self, now: Instant, at: Instant) -> Duration {
        now.saturating_duration_since(at).div_f64(self.time_scale)
    }

    fn delay(&self, level: &Level, now: Instant) -> Duration {
        refill_delay(
            level.capacity,
            level.refill,
            level.remaining,
            self.elapsed(now, level.at),
            self.threshold_fraction,
        )
    }

    /// Records what the answer to a request for `target` reported at `now`: ARM's buckets and
    /// the resource provider's policies.
    pub fn observe(
        &self,
        target: &Target,
        remaining: &[(Bucket, u32)],
        policies: &[ResourcePolicy],
        now: Instant,
    ) {
        let mut observed = self.lock();
        for &(bucket, left) in remaining {
            let (capacity, refill) = bucket.shape();
            observed.buckets.insert(
                (bucket, target.owner(bucket.scope).to_owned()),
                Level {
                    remaining: f64::from(left),
                    capacity,
                    refill,
                    at: now,
                },
            );
        }
        let Some(resource) = &target.resource else {
            return;
        };
        if policies.is_empty() {
            return;
        }
        let own = observed
            .policies
            .entry(resource.clone())
            .or_default()
            .entry(target.class)
            .or_default();
        // The latest answer names the policies this kind of request falls under now; one it no
        // longer names (a VM's create policy, once its updates follow) would only keep losing
        // reserved tokens that no answer corrects.
        own.retain(|name, _| policies.iter().any(|p| p.name == *name));
        for policy in policies {
            // The request that produced this count spent one token: the capacity is at least
            // one more than any count seen.
            let seen = f64::from(policy.remaining) + 1.0;
            let capacity = own
                .get(&policy.name)
                .map_or(seen, |level| level.capacity.max(seen));
            let refill = capacity / policy.refill_window().as_secs_f64();
            own.insert(
                policy.name.clone(),
                Level {
                    remaining: f64::from(policy.remaining),
                    capacity,
                    refill,
                    at: now,
                },
            );
        }
    }

    /// How long a request for `target` should wait at `now`, reserving one token from each
    /// bucket and policy it draws on so the next caller waits a little longer.
    pub fn acquire(&self, target: &Target, now: Instant) -> Duration {
        let mut observed = self.lock();
        let observed = &mut *observed;
        let mut wait = Duration::ZERO;
        for ((bucket, owner), level) in &mut observed.buckets {
            if bucket.class != target.class || *owner != target.owner(bucket.scope) {
                continue;
            }
            wait = wait.max(self.delay(level, now));
            level.remaining -= 1.0;
        }
        if let Some(own) = target
            .resource
            .as_ref()
            .and_then(|r| observed.policies.get_mut(r.as_str()))
            .and_then(|classes| classes.get_mut(&target.class))
        {
            for level in own.values_mut() {
                wait = wait.max(self.delay(level, now));
                level.remaining -= 1.0;
            }
        }
        wait
    }

    /// Whether any bucket or policy is currently below its threshold: the "slow down" signal
    /// the engine can show.
    pub fn is_slowing_down(&self, now: Instant) -> bool {
        self.lock()
            .levels()
            .any(|level| self.delay(level, now) > Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUB_A: &str =
        "/subscriptions/AAAA/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1";
    const SUB_B: &str =
        "/subscriptions/bbbb/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1";

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |n| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v)
    }

    #[test]
    fn every_scope_and_operation_type_is_read_deletes_included() {
        use RequestClass::{Delete, Read, Write};
        use Scope::{Subscription, SubscriptionGlobal, Tenant};
        let headers = [
            ("x-ms-ratelimit-remaining-subscription-reads", "249"),
            ("x-ms-ratelimit-remaining-subscription-writes", "199"),
            ("x-ms-ratelimit-remaining-subscription-deletes", "198"),
            ("x-ms-ratelimit-remaining-subscription-global-reads", "3749"),
            (
                "x-ms-ratelimit-remaining-subscription-global-deletes",
                "2998",
            ),
            ("x-ms-ratelimit-remaining-tenant-reads", "247"),
            ("x-ms-ratelimit-remaining-tenant-deletes", "197"),
            ("x-ms-ratelimit-remaining-tenant-writes", "junk"),
        ];
        assert_eq!(
            parse_remaining(lookup(&headers)),
            vec![
                (Bucket::new(Subscription, Read), 249),
                (Bucket::new(Subscription, Write), 199),
                (Bucket::new(Subscription, Delete), 198),
                (Bucket::new(SubscriptionGlobal, Read), 3749),
                (Bucket::new(SubscriptionGlobal, Delete), 2998),
                (Bucket::new(Tenant, Read), 247),
                (Bucket::new(Tenant, Delete), 197),
            ]
        );
    }

    #[test]
    fn buckets_follow_arms_token_bucket_limits_not_the_old_hourly_ones() {
        use RequestClass::{Delete, Read, Write};
        assert_eq!(
            Bucket::new(Scope::Subscription, Read).shape(),
            (250.0, 25.0)
        );
        assert_eq!(
            Bucket::new(Scope::Subscription, Write).shape(),
            (200.0, 10.0)
        );
        assert_eq!(
            Bucket::new(Scope::Subscription, Delete).shape(),
            (200.0, 10.0)
        );
        // Regression: the tenant buckets were modelled as 12,000 reads / 1,200 writes an hour.
        assert_eq!(Bucket::new(Scope::Tenant, Read).shape(), (250.0, 25.0));
        assert_eq!(Bucket::new(Scope::Tenant, Write).shape(), (200.0, 10.0));
        assert_eq!(
            Bucket::new(Scope::SubscriptionGlobal, Read).shape(),
            (3750.0, 375.0)
        );
    }

    #[test]
    fn resource_policies_are_read_from_joined_and_repeated_headers() {
        let policies = parse_resource_policies([
            "Microsoft.Compute/PutVM3Min;239,Microsoft.Compute/PutVM30Min;1199",
            " Microsoft.Compute/UpdateVMResource;0 ",
            "garbage,Microsoft.Compute/X;-1,;3",
        ]);
        let names: Vec<(&str, u32)> = policies
            .iter()
            .map(|p| (p.name.as_str(), p.remaining))
            .collect();
        assert_eq!(
            names,
            [
                ("Microsoft.Compute/PutVM3Min", 239),
                ("Microsoft.Compute/PutVM30Min", 1199),
                ("Microsoft.Compute/UpdateVMResource", 0),
            ]
        );
        let window = |name: &str| {
            ResourcePolicy {
                name: name.into(),
                remaining: 0,
            }
            .refill_window()
        };
        assert_eq!(
            window("Microsoft.Compute/HighCostGet30Min"),
            Duration::from_mins(30)
        );
        assert_eq!(
            window("Microsoft.Compute/PutVM3Min"),
            Duration::from_mins(3)
        );
        assert_eq!(
            window("Microsoft.Compute/UpdateVMResource"),
            Duration::from_mins(3)
        );
        assert_eq!(window("Microsoft.Compute/Min"), Duration::from_mins(3));
    }

    #[test]
    fn a_full_bucket_costs_nothing_and_a_low_one_waits_for_its_refill() {
        // Writes: capacity 200, refill 10/s, threshold 10% = 20.
        let b = Bucket::new(Scope::Subscription, RequestClass::Write);
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
        // A VM's 12 updates refilled 4 a minute: 10% is 1.2 tokens, 18 s away from empty.
        assert_eq!(
            refill_delay(12.0, 4.0 / 60.0, 0.0, Duration::ZERO, 0.1),
            Duration::from_secs(18)
        );
        // Capacity 3: 10% is 0.3 of a token, so the wait is for a whole one (60 s at 1/min).
        assert_eq!(
            refill_delay(3.0, 1.0 / 60.0, 0.0, Duration::ZERO, 0.1),
            Duration::from_mins(1)
        );
    }

    #[test]
    fn pacer_delays_only_the_class_that_is_low_and_queues_concurrent_callers() {
        let pacer = Pacer::new(0.1);
        let t0 = Instant::now();
        let write = Target::of("PUT", SUB_A);
        pacer.observe(
            &write,
            &[
                (Bucket::new(Scope::Subscription, RequestClass::Write), 18),
                (Bucket::new(Scope::Subscription, RequestClass::Read), 240),
            ],
            &[],
            t0,
        );
        assert!(pacer.is_slowing_down(t0));
        assert_eq!(pacer.acquire(&Target::of("GET", SUB_A), t0), Duration::ZERO);
        // 18 left, threshold 20: (20 - 18) / 10 per second.
        assert_eq!(pacer.acquire(&write, t0), Duration::from_millis(200));
        // The first caller reserved a token: the second waits one refill interval longer.
        assert_eq!(pacer.acquire(&write, t0), Duration::from_millis(300));
        // Deletes draw on their own bucket, which has not been reported low.
        assert_eq!(
            pacer.acquire(&Target::of("DELETE", SUB_A), t0),
            Duration::ZERO
        );
        // Another subscription has its own buckets.
        assert_eq!(pacer.acquire(&Target::of("PUT", SUB_B), t0), Duration::ZERO);
        assert!(!pacer.is_slowing_down(t0 + Duration::from_secs(5)));
    }

    #[test]
    fn a_low_resource_policy_slows_that_resource_alone() {
        // Regression: `x-ms-ratelimit-remaining-resource` was ignored, so a burst of updates to
        // one VM ran into Compute's per-VM limit (12, refilled 4 a minute) and its 429s.
        let pacer = Pacer::new(0.1);
        let t0 = Instant::now();
        let vm1 = Target::of("POST", &format!("{SUB_A}/start"));
        let policies = |left| {
            parse_resource_policies([format!(
                "Microsoft.Compute/UpdateVMResource;{left},Microsoft.Compute/UpdateVMSubscription;1400"
            )
            .as_str()])
        };
        pacer.observe(&vm1, &[], &policies(11), t0);
        assert_eq!(pacer.acquire(&vm1, t0), Duration::ZERO);
        pacer.observe(&vm1, &[], &policies(0), t0);
        assert!(pacer.is_slowing_down(t0));
        // Capacity 12 learnt from the first answer; 1.2 tokens at 12 per 3 minutes: 18 s.
        assert_eq!(pacer.acquire(&vm1, t0), Duration::from_secs(18));
        // The PATCH of the same VM is a write too and queues behind it.
        let patch = Target::of("PATCH", SUB_A);
        assert_eq!(pacer.acquire(&patch, t0), Duration::from_secs(33));
        // Another VM, a read of this one, and a request without a resource are not held back.
        let vm2 = Target::of("POST", &SUB_A.replace("vm1", "vm2"));
        assert_eq!(pacer.acquire(&vm2, t0), Duration::ZERO);
        assert_eq!(pacer.acquire(&Target::of("GET", SUB_A), t0), Duration::ZERO);
        assert_eq!(
            pacer.acquire(
                &Target::of("PUT", "/subscriptions/aaaa/resourceGroups/rg"),
                t0
            ),
            Duration::ZERO
        );
        // A minute later (4 tokens back) the VM is clear again.
        assert!(!pacer.is_slowing_down(t0 + Duration::from_mins(1)));
        // An answer naming other policies for the VM's writes replaces the old ones.
        let put = parse_resource_policies(["Microsoft.Compute/PutVMResource;11"]);
        pacer.observe(&Target::of("PUT", SUB_A), &[], &put, t0);
        assert_eq!(pacer.acquire(&vm1, t0), Duration::ZERO);
    }

    #[test]
    fn a_compressed_client_clock_counts_refills_in_server_time() {
        // At time scale 0.01 the client sleeps 1/100 of every wait, so 0.1 s of real time is
        // 10 s of the server's refill: 100 writes back, nothing to wait.
        let pacer = Pacer::new(0.1).with_time_scale(0.01);
        let t0 = Instant::now();
        let write = Target::of("PUT", SUB_A);
        let bucket = Bucket::new(Scope::Subscription, RequestClass::Write);
        pacer.observe(&write, &[(bucket, 0)], &[], t0);
        assert_eq!(pacer.acquire(&write, t0), Duration::from_secs(2));
        assert_eq!(
            pacer.acquire(&write, t0 + Duration::from_millis(100)),
            Duration::ZERO
        );
    }

    #[test]
    fn targets_name_the_subscription_and_the_top_level_resource() {
        let target = Target::of("POST", &format!("{SUB_A}/extensions/ext"));
        assert_eq!(target.class, RequestClass::Write);
        assert_eq!(target.subscription.as_deref(), Some("aaaa"));
        assert_eq!(
            target.resource.as_deref(),
            Some(SUB_A.to_ascii_lowercase().as_str())
        );
        let tenant = Target::of("GET", "/providers/Microsoft.Compute/operations");
        assert_eq!((tenant.subscription, tenant.resource), (None, None));
        assert_eq!(
            Target::of("DELETE", "/subscriptions/s/resourceGroups/rg").class,
            RequestClass::Delete
        );
    }

    #[test]
    fn methods_map_to_classes() {
        assert_eq!(RequestClass::for_method("GET"), RequestClass::Read);
        assert_eq!(RequestClass::for_method("PUT"), RequestClass::Write);
        assert_eq!(RequestClass::for_method("POST"), RequestClass::Write);
        assert_eq!(RequestClass::for_method("PATCH"), RequestClass::Write);
        assert_eq!(RequestClass::for_method("DELETE"), RequestClass::Delete);
    }
}
