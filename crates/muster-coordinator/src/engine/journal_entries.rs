//! The rebalance journal's entries as a group keeps them: each one encoded (wincode, as on the
//! wire) in a boxed slice of its own, in a queue grown one slot at a time.
//!
//! Why not the [`RebalanceRecord`]s themselves: a group holds its journal for as long as it
//! lives, and reads it rarely (`groups why`, the dashboard, the record write after a
//! rebalance). As owned strings and vectors, a 10-member group's formation entry (ten member
//! ids joined, ten members' gained partitions) is ~3 KB of small allocations, and a queue that
//! doubles holds room for three more 340-byte records; encoded, the same entry is ~0.9 KB in one
//! allocation (the heap profile is in docs/benchmarks.md, "Idle memory"). Encoding and decoding
//! run at rebalance events and reads only, never on the heartbeat path.
//!
//! The bytes are this process's own encoding of a value it built: decoding them cannot fail
//! unless encoding did, which it cannot (strings, vectors and integers only, no size limit on
//! writing). Should either ever fail, the entry is left out of what is read rather than
//! panicking: the journal explains rebalances, the group's state does not depend on it.

use std::collections::VecDeque;

use muster_protocol::RebalanceRecord;

/// Completed (and the newest, possibly still completing) journal entries, oldest first.
#[derive(Debug, Default)]
pub(super) struct JournalEntries {
    entries: VecDeque<Box<[u8]>>,
}

impl JournalEntries {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Keeps `entry` as the newest of at most `keep` entries; the generations of the oldest
    /// ones dropped to make room go to `dropped` (their stored copies are deleted with the next
    /// record write).
    pub(super) fn push(&mut self, entry: &RebalanceRecord, keep: usize, dropped: &mut Vec<i32>) {
        if keep == 0 {
            return;
        }
        while self.entries.len() >= keep {
            match self.entries.pop_front() {
                Some(old) => dropped.extend(unpack(&old).map(|e| e.generation_id)),
                None => break,
            }
        }
        if let Some(bytes) = pack(entry) {
            if self.entries.len() == self.entries.capacity() {
                // One slot more, not double: most groups keep one or two entries.
                self.entries.reserve_exact(1);
            }
            self.entries.push_back(bytes);
        }
    }

    /// The newest entry, decoded.
    pub(super) fn newest(&self) -> Option<RebalanceRecord> {
        self.entries.back().and_then(|bytes| unpack(bytes))
    }

    /// Applies `change` to the newest entry if it is of `generation`; whether it was.
    pub(super) fn update_newest(
        &mut self,
        generation: i32,
        change: impl FnOnce(&mut RebalanceRecord),
    ) -> bool {
        let Some(last) = self.entries.back_mut() else {
            return false;
        };
        let Some(mut entry) = unpack(last).filter(|e| e.generation_id == generation) else {
            return false;
        };
        change(&mut entry);
        match pack(&entry) {
            Some(bytes) => {
                *last = bytes;
                true
            }
            None => false,
        }
    }

    /// The entries from position `from` (0: the oldest) on, oldest first.
    pub(super) fn starting_at(&self, from: usize) -> Vec<RebalanceRecord> {
        self.entries
            .range(from.min(self.entries.len())..)
            .filter_map(|b| unpack(b))
            .collect()
    }

    /// The newest `limit` entries, newest first.
    pub(super) fn newest_first(&self, limit: usize) -> Vec<RebalanceRecord> {
        self.entries
            .iter()
            .rev()
            .take(limit)
            .filter_map(|b| unpack(b))
            .collect()
    }

    /// Replaces every entry with `entries` (oldest first).
    pub(super) fn replace(&mut self, entries: impl IntoIterator<Item = RebalanceRecord>) {
        self.entries = entries.into_iter().filter_map(|e| pack(&e)).collect();
        self.entries.shrink_to_fit();
    }
}

fn pack(entry: &RebalanceRecord) -> Option<Box<[u8]>> {
    wincode::serialize(entry).ok().map(Vec::into_boxed_slice)
}

fn unpack(bytes: &[u8]) -> Option<RebalanceRecord> {
    wincode::deserialize(bytes).ok()
}

#[cfg(test)]
mod tests {
    use muster_protocol::{MemberChange, RebalanceCause, TopicPartitions};

    use super::*;

    fn entry(generation: i32) -> RebalanceRecord {
        RebalanceRecord {
            generation_id: generation,
            trigger: RebalanceCause {
                kind: "member_joined".into(),
                member_id: "m-1".into(),
                ..RebalanceCause::default()
            },
            joined: vec!["m-1".into(), "m-2".into()],
            changes: vec![MemberChange {
                member_id: "m-1".into(),
                gained: vec![TopicPartitions {
                    topic: "orders".into(),
                    partitions: vec![0, 1],
                }],
                ..MemberChange::default()
            }],
            ..RebalanceRecord::default()
        }
    }

    #[test]
    fn entries_read_back_as_written_and_the_oldest_go_first() {
        let mut journal = JournalEntries::default();
        let mut dropped = Vec::new();
        for generation in 1..=4 {
            journal.push(&entry(generation), 3, &mut dropped);
        }
        assert_eq!(dropped, vec![1]);
        assert_eq!(journal.len(), 3);
        assert_eq!(journal.newest(), Some(entry(4)));
        let newest_first: Vec<i32> = journal
            .newest_first(usize::MAX)
            .iter()
            .map(|e| e.generation_id)
            .collect();
        assert_eq!(newest_first, vec![4, 3, 2]);
        assert_eq!(journal.starting_at(1), vec![entry(3), entry(4)]);
        assert!(journal.starting_at(7).is_empty());
        // Nothing kept with keep 0.
        journal.push(&entry(5), 0, &mut dropped);
        assert_eq!(journal.len(), 3);
    }

    #[test]
    fn the_newest_entry_is_completed_only_for_its_own_generation() {
        let mut journal = JournalEntries::default();
        assert!(!journal.update_newest(1, |e| e.sync_ms = Some(5)));
        journal.push(&entry(1), 10, &mut Vec::new());
        journal.push(&entry(2), 10, &mut Vec::new());
        assert!(!journal.update_newest(1, |e| e.sync_ms = Some(5)));
        assert!(journal.update_newest(2, |e| {
            e.sync_ms = Some(7);
            e.moved = Some(2);
        }));
        let newest = journal.newest().unwrap_or_default();
        assert_eq!((newest.sync_ms, newest.moved), (Some(7), Some(2)));
        assert_eq!(journal.newest_first(2)[1], entry(1));
    }

    #[test]
    fn a_group_that_rebalanced_once_holds_one_slot() {
        let mut journal = JournalEntries::default();
        journal.push(&entry(1), 16, &mut Vec::new());
        assert_eq!(journal.entries.capacity(), 1);
        journal.replace(vec![entry(1), entry(2)]);
        assert_eq!(journal.entries.capacity(), 2);
        assert_eq!(journal.newest(), Some(entry(2)));
    }
}
