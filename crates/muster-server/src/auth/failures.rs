//! Slowing down guessing: each peer address with recent failed Hellos gets turns, one per
//! attempt, spaced by a delay that doubles with each failure (100 ms, 200 ms, … up to 5 s).
//! Parallel connections from that address queue for turns, so opening more connections does not
//! guess faster. An address with no failure for a minute is forgotten; the table is bounded.
//! Time comes in as `now`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The first failure's spacing.
const BASE: Duration = Duration::from_millis(100);
/// The largest spacing.
const MAX: Duration = Duration::from_secs(5);
/// Failures older than this are forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(60);
/// Addresses tracked at once; past it, entries not failing lately are dropped first.
const MAX_TRACKED: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    last_failure: Instant,
    /// When the next attempt from this address may be checked.
    next_turn: Instant,
}

fn spacing(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    BASE.saturating_mul(1u32 << (failures - 1).min(16)).min(MAX)
}

/// Failed Hellos by peer address.
#[derive(Debug, Default)]
pub struct Failures {
    peers: HashMap<IpAddr, Entry>,
}

impl Failures {
    /// How long an attempt from `peer` arriving at `now` must wait before it is checked; takes
    /// its turn.
    pub fn admit(&mut self, peer: IpAddr, now: Instant) -> Duration {
        let Some(entry) = self.peers.get_mut(&peer) else {
            return Duration::ZERO;
        };
        if now.saturating_duration_since(entry.last_failure) > FORGET_AFTER {
            self.peers.remove(&peer);
            return Duration::ZERO;
        }
        let turn = entry.next_turn.max(now);
        entry.next_turn = turn + spacing(entry.failures);
        turn - now
    }

    /// Records a failed attempt from `peer` at `now`.
    pub fn failed(&mut self, peer: IpAddr, now: Instant) {
        if !self.peers.contains_key(&peer) && self.peers.len() >= MAX_TRACKED {
            self.peers
                .retain(|_, e| now.saturating_duration_since(e.last_failure) <= FORGET_AFTER);
            if self.peers.len() >= MAX_TRACKED {
                // Still full of active guessers: drop the one that failed longest ago.
                let oldest = self
                    .peers
                    .iter()
                    .min_by_key(|(_, e)| e.last_failure)
                    .map(|(ip, _)| *ip);
                if let Some(ip) = oldest {
                    self.peers.remove(&ip);
                }
            }
        }
        let entry = self.peers.entry(peer).or_insert(Entry {
            failures: 0,
            last_failure: now,
            next_turn: now,
        });
        entry.failures = entry.failures.saturating_add(1);
        entry.last_failure = now;
        entry.next_turn = entry.next_turn.max(now + spacing(entry.failures));
    }

    pub fn tracked(&self) -> usize {
        self.peers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_clean_address_waits_for_nothing() {
        let mut f = Failures::default();
        let now = Instant::now();
        assert_eq!(f.admit(ip(1), now), Duration::ZERO);
        assert_eq!(f.tracked(), 0);
    }

    #[test]
    fn spacing_doubles_with_each_failure_up_to_five_seconds() {
        assert_eq!(spacing(1), Duration::from_millis(100));
        assert_eq!(spacing(2), Duration::from_millis(200));
        assert_eq!(spacing(6), Duration::from_millis(3200));
        assert_eq!(spacing(7), MAX);
        assert_eq!(spacing(1000), MAX);
    }

    #[test]
    fn parallel_attempts_from_a_failing_address_queue_for_turns() {
        let mut f = Failures::default();
        let t0 = Instant::now();
        f.failed(ip(1), t0);
        f.failed(ip(1), t0);
        // Two failures: attempts are 200 ms apart, the first one 200 ms after the failure.
        let waits: Vec<Duration> = (0..3).map(|_| f.admit(ip(1), t0)).collect();
        assert_eq!(
            waits,
            [200, 400, 600].map(Duration::from_millis).to_vec(),
            "turns"
        );
        // Another address is not affected.
        assert_eq!(f.admit(ip(2), t0), Duration::ZERO);
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_minute() {
        let mut f = Failures::default();
        let t0 = Instant::now();
        f.failed(ip(1), t0);
        assert!(f.admit(ip(1), t0) > Duration::ZERO);
        assert_eq!(f.admit(ip(1), t0 + Duration::from_secs(61)), Duration::ZERO);
        assert_eq!(f.tracked(), 0);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut f = Failures::default();
        let t0 = Instant::now();
        for i in 0..(MAX_TRACKED as u32 + 10) {
            f.failed(
                IpAddr::from(i.to_be_bytes()),
                t0 + Duration::from_micros(u64::from(i)),
            );
        }
        assert_eq!(f.tracked(), MAX_TRACKED);
    }
}
