//! The one clock of a run: CLOCK_MONOTONIC in nanoseconds.
//!
//! On Linux CLOCK_MONOTONIC is system-wide, so readings taken by different processes (the
//! runner, the nemesis, every worker) are comparable; it never jumps and nothing in the run
//! can skew it. std's `Instant` reads the same clock but hides the number, which the
//! histories need to write down.

use rustix::time::{clock_gettime, ClockId};

/// Nanoseconds on CLOCK_MONOTONIC (module docs).
pub fn now_ns() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    // Both fields are non-negative for CLOCK_MONOTONIC; a negative one would be a kernel bug,
    // read as 0 rather than wrapped.
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// Milliseconds, for messages.
pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::now_ns;

    #[test]
    fn the_clock_moves_forward_with_real_time() {
        let a = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = now_ns();
        assert!(b >= a + 2_000_000, "{a} then {b}");
    }
}
