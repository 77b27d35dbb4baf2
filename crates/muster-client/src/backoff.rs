//! Exponential backoff between retries (reconnects, rejoin attempts): a pure policy, so its
//! delays can be tested without a clock. The jitter is applied from a sample the caller passes
//! in; [`Backoff::delay`] is the jitter-free value.

use std::time::Duration;

/// Exponential backoff: attempt `n` (from 0) waits `initial * multiplier^n`, capped at `max`,
/// then spread by up to `±jitter` (a fraction of the delay, itself never above `max`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay before the first retry.
    pub initial: Duration,
    /// Upper bound on any delay.
    pub max: Duration,
    /// Growth factor per attempt (≥ 1).
    pub multiplier: u32,
    /// Fraction of the delay, in `0.0..=1.0`, by which it is randomly lengthened or shortened.
    /// 0 makes the delays deterministic.
    pub jitter: f64,
}

impl Default for Backoff {
    /// 100 ms, doubling, capped at 10 s, ±20 % jitter (Kafka's `reconnect.backoff.ms` and
    /// `reconnect.backoff.max.ms` are 50 ms and 1 s; a coordinator is one server, so a slower
    /// cap spares it a storm of reconnects).
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
            multiplier: 2,
            jitter: 0.2,
        }
    }
}

impl Backoff {
    /// A backoff without jitter.
    pub fn fixed_exponential(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            multiplier: 2,
            jitter: 0.0,
        }
    }

    /// The jitter-free delay before retry number `attempt` (0 = the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = self.multiplier.max(1).saturating_pow(attempt);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// The delay before retry `attempt`, spread by the jitter: `sample` in `[0, 1)` maps to
    /// `delay * (1 - jitter)` ..= `delay * (1 + jitter)`, capped at `max`.
    pub fn delay_with_sample(&self, attempt: u32, sample: f64) -> Duration {
        let base = self.delay(attempt);
        let jitter = self.jitter.clamp(0.0, 1.0);
        if jitter == 0.0 {
            return base;
        }
        let spread = 1.0 + jitter * (2.0 * sample.clamp(0.0, 1.0) - 1.0);
        base.mul_f64(spread).min(self.max)
    }

    /// The delay before retry `attempt` with a fresh random sample.
    pub fn next_delay(&self, attempt: u32) -> Duration {
        self.delay_with_sample(attempt, random_unit())
    }
}

/// A pseudo-random number in `[0, 1)`, from the standard library's randomly keyed hasher (no
/// extra dependency: jitter needs spread, not quality).
fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos().into()),
    );
    // 53 random bits make an f64 in [0, 1).
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_until_the_cap() {
        let b = Backoff::fixed_exponential(Duration::from_millis(100), Duration::from_secs(1));
        let delays: Vec<u128> = (0..7).map(|n| b.delay(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000, 1000]);
        // Huge attempt numbers saturate instead of overflowing.
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
        assert_eq!(b.next_delay(3), Duration::from_millis(800), "no jitter");
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let b = Backoff {
            jitter: 0.5,
            ..Backoff::fixed_exponential(Duration::from_millis(100), Duration::from_millis(300))
        };
        assert_eq!(b.delay_with_sample(0, 0.0), Duration::from_millis(50));
        assert_eq!(b.delay_with_sample(0, 0.5), Duration::from_millis(100));
        assert_eq!(b.delay_with_sample(0, 1.0), Duration::from_millis(150));
        // Never above the cap, even when jitter would lengthen it.
        assert_eq!(b.delay_with_sample(5, 1.0), Duration::from_millis(300));
        for _ in 0..100 {
            let d = b.next_delay(1);
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(300));
        }
    }

    #[test]
    fn multiplier_below_one_is_constant() {
        let b = Backoff {
            multiplier: 0,
            ..Backoff::fixed_exponential(Duration::from_millis(10), Duration::from_secs(1))
        };
        assert_eq!(b.delay(5), Duration::from_millis(10));
    }
}
