//! How long and how often to try reaching a node that is still booting.
//!
//! Right after ARM reports a VM as running, its sshd may not listen yet (connection refused),
//! the network may drop packets (timeouts), or sshd may accept and close before sending its
//! banner. All of these are worth retrying until a limit; the delays grow so a slow boot does
//! not cost hundreds of attempts, with jitter so 32 nodes do not retry in lockstep.

use std::time::Duration;

/// Retry limits for reaching SSH on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Give up once this much time has passed since the first attempt.
    pub limit: Duration,
    /// One attempt (TCP connect, banner, key exchange, authentication) may take this long.
    pub attempt_timeout: Duration,
    /// Delay after the first failed attempt.
    pub first_delay: Duration,
    /// Delays grow up to this cap.
    pub max_delay: Duration,
}

impl Default for WaitPolicy {
    /// Five minutes: a fresh Azure VM usually answers within one or two; a reboot with MOFED
    /// module rebuilds can take several.
    fn default() -> Self {
        Self {
            limit: Duration::from_mins(5),
            attempt_timeout: Duration::from_secs(20),
            first_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(10),
        }
    }
}

impl WaitPolicy {
    /// A single attempt with this timeout and no retries (for nodes that should already be up).
    pub fn once(attempt_timeout: Duration) -> Self {
        Self {
            limit: Duration::ZERO,
            attempt_timeout,
            first_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        }
    }

    /// The delay before attempt `attempt + 1` (attempt counts from 1), doubling from
    /// `first_delay` up to `max_delay`, scaled by `jitter` in `[0.5, 1.0]`.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let doubled = self
            .first_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        doubled.min(self.max_delay).mul_f64(jitter.clamp(0.5, 1.0))
    }

    /// Whether another attempt fits: `elapsed` since the first attempt plus the next `delay`
    /// must stay within the limit.
    pub fn may_retry(&self, elapsed: Duration, delay: Duration) -> bool {
        elapsed.saturating_add(delay) < self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> WaitPolicy {
        WaitPolicy {
            limit: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(2),
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        }
    }

    #[test]
    fn delays_double_up_to_the_cap() {
        let p = policy();
        let delays: Vec<u128> = (1..=6).map(|a| p.delay(a, 1.0).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn jitter_scales_down_but_never_below_half() {
        let p = policy();
        assert_eq!(p.delay(2, 0.75).as_millis(), 150);
        assert_eq!(p.delay(2, 0.1).as_millis(), 100);
        assert_eq!(p.delay(40, 1.0).as_millis(), 1000);
    }

    #[test]
    fn retries_stop_at_the_limit() {
        let p = policy();
        assert!(p.may_retry(Duration::from_secs(9), Duration::from_millis(500)));
        assert!(!p.may_retry(Duration::from_secs(9), Duration::from_secs(1)));
        assert!(
            !WaitPolicy::once(Duration::from_secs(1)).may_retry(Duration::ZERO, Duration::ZERO)
        );
    }
}
