//! Startup with parking for a [`RedbStore`](super::RedbStore) ([`Store::load_parking`]): one
//! pass over each table in key order, in one read transaction. A group with nothing but data
//! is summarised as the pass goes — only its offsets' commit times and its quarantine's times
//! are decoded; its history runs and journal entries are skipped undecoded — and every other
//! group is read whole, as [`load`](super::load::load) reads it. Every table is keyed by
//! group id first, so the summaries (in group id order from the groups table) are met in
//! order by every other table's rows and merged in one walk ([`Merge`]): no map of the
//! groups is built. What it returns is what [`summarise`] makes of a full load (the store
//! suite checks it), without holding the full load in memory.
//!
//! [`Store::load_parking`]: crate::storage::Store::load_parking
//! [`summarise`]: crate::storage::summarise

use std::collections::HashSet;
use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable};

use super::codec;
use super::load::{
    corrupt, decode_entry, history_run, in_sequence_order, load_groups, load_topics, quarantined,
    read_error,
};
use super::{HISTORY, JOURNAL, OFFSETS, QUARANTINE};
use crate::storage::{
    is_data_only, OffsetWrite, ParkedSummary, ParkingLoad, StoreError, StoredState,
};
use crate::types::Millis;

pub(super) fn load_parking(db: &Database, path: &Path) -> Result<ParkingLoad, StoreError> {
    let txn = db.begin_read().map_err(|e| read_error(path, e.into()))?;
    let mut whole = Vec::new();
    let mut parked = Vec::new();
    for record in load_groups(&txn, path)? {
        if is_data_only(Some(&record)) {
            let group_id = record.group_id.clone();
            parked.push(ParkedSummary {
                record: Some(record),
                ..bare(group_id)
            });
        } else {
            whole.push(record);
        }
    }
    let kept: HashSet<String> = whole.iter().map(|r| r.group_id.clone()).collect();
    let mut state = StoredState {
        groups: whole,
        topics: load_topics(&txn, path)?,
        ..StoredState::default()
    };

    let mut merge = Merge::new(parked);
    let table = txn
        .open_table(OFFSETS)
        .map_err(|e| read_error(path, e.into()))?;
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        let (group_id, topic, partition) = key.value();
        let committed = codec::decode_offset(value.value()).map_err(|e| {
            corrupt(
                path,
                format!("offset of {group_id:?} {topic:?}/{partition}: {e}"),
            )
        })?;
        if kept.contains(group_id) {
            let write = OffsetWrite {
                topic: topic.into(),
                partition,
                committed,
            };
            match state.offsets.last_mut() {
                Some((last, writes)) if last == group_id => writes.push(write),
                _ => state.offsets.push((group_id.to_owned(), vec![write])),
            }
        } else {
            let summary = merge.at(group_id);
            summary.oldest_commit = earliest(summary.oldest_commit, committed.commit_timestamp_ms);
        }
    }
    let mut merge = Merge::new(merge.finish());

    let table = txn
        .open_table(HISTORY)
        .map_err(|e| read_error(path, e.into()))?;
    let mut topic = None;
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        let group_id = key.value().0;
        if !kept.contains(group_id) {
            // A group may have nothing but its history left: it still exists.
            merge.at(group_id);
            continue;
        }
        if state
            .history
            .last()
            .is_none_or(|(last, _)| last != group_id)
        {
            if let Some((_, writes)) = state.history.last_mut() {
                in_sequence_order(writes);
            }
            state.history.push((group_id.to_owned(), Vec::new()));
        }
        if let Some((_, writes)) = state.history.last_mut() {
            history_run(path, &mut topic, key.value(), value.value(), writes)?;
        }
    }
    if let Some((_, writes)) = state.history.last_mut() {
        in_sequence_order(writes);
    }
    let mut merge = Merge::new(merge.finish());

    let table = txn
        .open_table(QUARANTINE)
        .map_err(|e| read_error(path, e.into()))?;
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        let offset = quarantined(path, key.value(), value.value())?;
        let group_id = key.value().0;
        if kept.contains(group_id) {
            match state.quarantine.last_mut() {
                Some((last, offsets)) if last == group_id => offsets.push(offset),
                _ => state.quarantine.push((group_id.to_owned(), vec![offset])),
            }
        } else {
            let summary = merge.at(group_id);
            summary.quarantined = summary.quarantined.saturating_add(1);
            summary.oldest_quarantined =
                earliest(summary.oldest_quarantined, offset.quarantined_at);
        }
    }
    let parked = merge.finish();

    // A journal belongs to a group with a record; a parked group's is read back with it.
    let table = txn
        .open_table(JOURNAL)
        .map_err(|e| read_error(path, e.into()))?;
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        let group_id = key.value().0;
        if !kept.contains(group_id) {
            continue;
        }
        let record = decode_entry(path, key.value(), value.value())?;
        match state.journals.last_mut() {
            Some((last, entries)) if last == group_id => entries.push(record),
            _ => state.journals.push((group_id.to_owned(), vec![record])),
        }
    }
    Ok(ParkingLoad { state, parked })
}

fn bare(group_id: String) -> ParkedSummary {
    ParkedSummary {
        group_id,
        record: None,
        oldest_commit: None,
        quarantined: 0,
        oldest_quarantined: None,
    }
}

fn earliest(current: Option<Millis>, at: Millis) -> Option<Millis> {
    Some(current.map_or(at, |c| c.min(at)))
}

/// The summaries met so far by one table's pass, in group id order, merged with those still
/// ahead: the table's rows come in group id order too, so the summary of each row's group is
/// the last one met, the next one ahead, or a new one (a group with no record) in between.
struct Merge {
    ahead: std::iter::Peekable<std::vec::IntoIter<ParkedSummary>>,
    met: Vec<ParkedSummary>,
}

impl Merge {
    fn new(summaries: Vec<ParkedSummary>) -> Self {
        Merge {
            met: Vec::with_capacity(summaries.len()),
            ahead: summaries.into_iter().peekable(),
        }
    }

    /// The summary of `group_id`, whose rows come after every group met before it.
    fn at(&mut self, group_id: &str) -> &mut ParkedSummary {
        let current = self.met.last().is_some_and(|s| s.group_id == group_id);
        if !current {
            while let Some(before) = self.ahead.next_if(|s| s.group_id.as_str() < group_id) {
                self.met.push(before);
            }
            let summary = self
                .ahead
                .next_if(|s| s.group_id == group_id)
                .unwrap_or_else(|| bare(group_id.to_owned()));
            self.met.push(summary);
        }
        let last = self.met.len() - 1;
        &mut self.met[last]
    }

    /// Every summary, in group id order.
    fn finish(mut self) -> Vec<ParkedSummary> {
        self.met.extend(self.ahead);
        self.met
    }
}
