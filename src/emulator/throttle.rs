//! ARM's request throttling: token buckets per subscription for reads, writes and deletes
//! (reads 250 refilled 25/s, writes and deletes 200 refilled 10/s, as ARM documents since 2024).

use std::collections::HashMap;

use tokio::time::Instant;

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

struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// What the buckets said about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Allowed; this many tokens remain.
    Allowed { remaining: u32 },
    /// Throttled; retry after this many whole seconds.
    Throttled { retry_after: u64 },
}

#[derive(Default)]
pub(crate) struct Throttle {
    buckets: HashMap<(String, Category), Bucket>,
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
        let scale = if time_scale > 0.0 && time_scale.is_finite() {
            time_scale
        } else {
            1.0
        };
        let (capacity, refill) = category.limits();
        let bucket = self
            .buckets
            .entry((subscription.to_ascii_lowercase(), category))
            .or_insert(Bucket {
                tokens: capacity,
                updated: now,
            });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64() / scale;
        bucket.tokens = (bucket.tokens + elapsed * refill).min(capacity);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Verdict::Allowed {
                remaining: float_to_count(bucket.tokens),
            }
        } else {
            // Seconds of ARM time until a token is back, in the emulator's seconds.
            let wait = (1.0 - bucket.tokens) / refill * scale;
            Verdict::Throttled {
                retry_after: u64::from(float_to_count(wait.ceil()).max(1)),
            }
        }
    }
}

/// Token counts are small and non-negative; the conversion only drops the fraction.
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
}
