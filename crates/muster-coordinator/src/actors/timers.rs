//! The supervisor's timer queue: one entry per group (its earliest deadline), not one per
//! member, so a million members cost a million heap entries nowhere. A group re-arms only when
//! its next deadline moves *earlier*; when a later deadline replaces an earlier one the old
//! entry just fires early and the group re-arms from its tick. Pure: the supervisor turns the
//! earliest entry into one actix timer.

use std::collections::{BTreeSet, HashMap};

use crate::engine::Millis;

/// Deadlines keyed by group key.
#[derive(Debug, Default)]
pub struct DeadlineQueue {
    by_time: BTreeSet<(Millis, u64)>,
    by_key: HashMap<u64, Millis>,
}

impl DeadlineQueue {
    /// Arms `key` at `at` unless it is already armed at or before `at`. Returns whether the
    /// queue's earliest deadline moved earlier (the caller reschedules its wake-up).
    pub fn arm(&mut self, key: u64, at: Millis) -> bool {
        if let Some(&current) = self.by_key.get(&key) {
            if current <= at {
                return false;
            }
            self.by_time.remove(&(current, key));
        }
        let earliest_before = self.earliest();
        self.by_key.insert(key, at);
        self.by_time.insert((at, key));
        earliest_before.is_none_or(|e| at < e)
    }

    /// Forgets `key` (its group is gone).
    pub fn disarm(&mut self, key: u64) {
        if let Some(at) = self.by_key.remove(&key) {
            self.by_time.remove(&(at, key));
        }
    }

    pub fn earliest(&self) -> Option<Millis> {
        self.by_time.first().map(|&(at, _)| at)
    }

    /// Removes and returns every key due at `now`.
    pub fn pop_due(&mut self, now: Millis, due: &mut Vec<u64>) {
        while let Some(&(at, key)) = self.by_time.first() {
            if at > now {
                break;
            }
            self.by_time.pop_first();
            self.by_key.remove(&key);
            due.push(key);
        }
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_earlier_deadlines_replace() {
        let mut q = DeadlineQueue::default();
        assert!(q.arm(1, 100));
        assert!(!q.arm(1, 200), "later deadline keeps the earlier entry");
        assert!(q.arm(1, 50));
        assert!(!q.arm(2, 70), "not earlier than the queue's earliest");
        assert_eq!(q.earliest(), Some(50));
        let mut due = Vec::new();
        q.pop_due(60, &mut due);
        assert_eq!(due, vec![1]);
        due.clear();
        q.pop_due(69, &mut due);
        assert!(due.is_empty());
        q.disarm(2);
        assert!(q.is_empty());
    }
}
