//! Slowing down guessing: each peer address with recent failed Hellos gets turns, one per
//! attempt, spaced by a delay that doubles with each failure (100 ms, 200 ms, … up to 5 s).
//! Parallel connections from that address queue for turns, so opening more connections does not
//! guess faster. A Hello whose turn is more than [`MAX_WAIT`] away is not queued at all: it is
//! refused unchecked, so the queue (and the connection slots its waiters hold) stays short, and
//! clients sharing the address (a NAT) wait at most that long. An address with no failure for a
//! minute is forgotten; the table is bounded. Time comes in as `now`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The first failure's spacing.
const BASE: Duration = Duration::from_millis(100);
/// The largest spacing.
const MAX: Duration = Duration::from_secs(5);
/// The longest a Hello waits for its turn; one whose turn is further away is refused unchecked.
pub const MAX_WAIT: Duration = Duration::from_secs(10);
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
    /// How long an attempt from `peer` arriving at `now` must wait before it is checked (its
    /// turn is taken), or `None`: its turn is over [`MAX_WAIT`] away, and it is refused
    /// unchecked (no turn taken).
    pub fn admit(&mut self, peer: IpAddr, now: Instant) -> Option<Duration> {
        let Some(entry) = self.peers.get_mut(&peer) else {
            return Some(Duration::ZERO);
        };
        if now.saturating_duration_since(entry.last_failure) > FORGET_AFTER {
            self.peers.remove(&peer);
            return Some(Duration::ZERO);
        }
        let turn = entry.next_turn.max(now);
        if turn - now > MAX_WAIT {
            return None;
        }
        entry.next_turn = turn + spacing(entry.failures);
        Some(turn - now)
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
        assert_eq!(f.admit(ip(1), now), Some(Duration::ZERO));
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
        let waits: Vec<Option<Duration>> = (0..3).map(|_| f.admit(ip(1), t0)).collect();
        assert_eq!(
            waits,
            [200, 400, 600]
                .map(|ms| Some(Duration::from_millis(ms)))
                .to_vec(),
            "turns"
        );
        // Another address is not affected.
        assert_eq!(f.admit(ip(2), t0), Some(Duration::ZERO));
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_minute() {
        let mut f = Failures::default();
        let t0 = Instant::now();
        f.failed(ip(1), t0);
        assert!(f.admit(ip(1), t0) > Some(Duration::ZERO));
        assert_eq!(
            f.admit(ip(1), t0 + Duration::from_secs(61)),
            Some(Duration::ZERO)
        );
        assert_eq!(f.tracked(), 0);
    }

    #[test]
    fn no_hello_waits_longer_than_the_bound_and_refused_ones_take_no_turn() {
        let mut f = Failures::default();
        let t0 = Instant::now();
        for _ in 0..10 {
            f.failed(ip(1), t0); // spacing 5 s from here on
        }
        let waits: Vec<Option<Duration>> = (0..4).map(|_| f.admit(ip(1), t0)).collect();
        // Turns at 5 s and 10 s; the next would be 15 s away: refused, and it booked nothing.
        assert_eq!(
            waits,
            vec![
                Some(Duration::from_secs(5)),
                Some(Duration::from_secs(10)),
                None,
                None
            ]
        );
        // Once time has moved on, turns are given again.
        assert_eq!(
            f.admit(ip(1), t0 + Duration::from_secs(6)),
            Some(Duration::from_secs(9))
        );
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
