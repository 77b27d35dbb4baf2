//! Reading a whole [`RedbStore`](super::RedbStore) into a [`StoredState`], for startup.
//!
//! One read transaction (one snapshot) for all tables. Groups and offsets are decoded on two
//! threads at once: they are independent, about equally heavy, and startup has the cores to
//! spare (on 2 cores, 100 000 groups and 1 000 000 offsets take about half the time).
//! [`load_group`] reads one group the same way, for a group rolling back to what is durable.
//! Offset histories and quarantines are read after both, on the calling thread. Startup with
//! parking reads the same tables another way (`load_parking.rs`), with these decoders.

use std::path::Path;
use std::sync::Arc;

use muster_protocol::TopicInfo;
use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::codec;
use super::{GROUPS, HISTORY, JOURNAL, OFFSETS, QUARANTINE, TOPICS};
use crate::storage::{
    GroupRecord, HistoryWrite, OffsetWrite, QuarantinedOffset, RebalanceRecord, StoreError,
    StoredGroup, StoredState,
};

type Offsets = Vec<(String, Vec<OffsetWrite>)>;

pub(super) fn load(db: &Database, path: &Path) -> Result<StoredState, StoreError> {
    let txn = db.begin_read().map_err(|e| read_error(path, e.into()))?;
    let txn = &txn;
    let (groups, offsets) = std::thread::scope(|scope| {
        let offsets = std::thread::Builder::new()
            .name("muster-store-load".into())
            .spawn_scoped(scope, move || load_offsets(txn, path));
        let groups = load_groups(txn, path);
        let offsets = match offsets {
            Ok(handle) => handle.join().unwrap_or_else(|_| {
                Err(StoreError::Io(format!(
                    "loading the offsets of {} panicked",
                    path.display()
                )))
            }),
            // No second thread to be had: do it here.
            Err(_) => load_offsets(txn, path),
        };
        (groups, offsets)
    });
    Ok(StoredState {
        groups: groups?,
        offsets: offsets?,
        topics: load_topics(txn, path)?,
        journals: load_journals(txn, path)?,
        history: load_histories(txn, path)?,
        quarantine: load_quarantines(txn, path)?,
    })
}

/// One group's record, offsets, journal, offset history and quarantine, in one snapshot.
pub(super) fn load_group(
    db: &Database,
    path: &Path,
    group_id: &str,
) -> Result<StoredGroup, StoreError> {
    let txn = db.begin_read().map_err(|e| read_error(path, e.into()))?;
    let groups = txn
        .open_table(GROUPS)
        .map_err(|e| read_error(path, e.into()))?;
    let record = match groups
        .get(group_id)
        .map_err(|e| read_error(path, e.into()))?
    {
        Some(value) => Some(
            codec::decode_group(group_id, value.value())
                .map_err(|e| corrupt(path, e.to_string()))?,
        ),
        None => None,
    };
    let table = txn
        .open_table(OFFSETS)
        .map_err(|e| read_error(path, e.into()))?;
    // Every key of this group and no other (see the writer's DeleteGroup).
    let after = format!("{group_id}\0");
    let mut offsets = Vec::new();
    for entry in table
        .range((group_id, "", i32::MIN)..(after.as_str(), "", i32::MIN))
        .map_err(|e| read_error(path, e.into()))?
    {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        let (_, topic, partition) = key.value();
        let committed = codec::decode_offset(value.value()).map_err(|e| {
            corrupt(
                path,
                format!("offset of {group_id:?} {topic:?}/{partition}: {e}"),
            )
        })?;
        offsets.push(OffsetWrite {
            topic: topic.into(),
            partition,
            committed,
        });
    }
    let table = txn
        .open_table(JOURNAL)
        .map_err(|e| read_error(path, e.into()))?;
    let mut journal = Vec::new();
    for entry in table
        .range((group_id, i32::MIN)..(after.as_str(), i32::MIN))
        .map_err(|e| read_error(path, e.into()))?
    {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        journal.push(decode_entry(path, key.value(), value.value())?);
    }
    let table = txn
        .open_table(HISTORY)
        .map_err(|e| read_error(path, e.into()))?;
    let mut history = Vec::new();
    let mut topic = None;
    for entry in table
        .range((group_id, "", i32::MIN, 0)..(after.as_str(), "", i32::MIN, 0))
        .map_err(|e| read_error(path, e.into()))?
    {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        history_run(path, &mut topic, key.value(), value.value(), &mut history)?;
    }
    in_sequence_order(&mut history);
    let table = txn
        .open_table(QUARANTINE)
        .map_err(|e| read_error(path, e.into()))?;
    let mut quarantine = Vec::new();
    for entry in table
        .range((group_id, "", i32::MIN)..(after.as_str(), "", i32::MIN))
        .map_err(|e| read_error(path, e.into()))?
    {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        quarantine.push(quarantined(path, key.value(), value.value())?);
    }
    Ok(StoredGroup {
        record,
        offsets,
        journal,
        history,
        quarantine,
    })
}

/// `topic`, sharing the allocation of the row before when it names the same topic (as the
/// engine's own writes share one per topic).
fn shared_topic(last: &mut Option<Arc<str>>, topic: &str) -> Arc<str> {
    match last {
        Some(t) if **t == *topic => Arc::clone(t),
        _ => Arc::clone(last.insert(Arc::from(topic))),
    }
}

/// Appends a run's entries (store format 6) to `out`.
pub(super) fn history_run(
    path: &Path,
    last_topic: &mut Option<Arc<str>>,
    (group_id, topic, partition, first_seq): (&str, &str, i32, u64),
    bytes: &[u8],
    out: &mut Vec<HistoryWrite>,
) -> Result<(), StoreError> {
    let entries = codec::decode_history_run(first_seq, bytes).map_err(|e| {
        corrupt(
            path,
            format!("offset history of {group_id:?} {topic:?}/{partition}: {e}"),
        )
    })?;
    let topic = shared_topic(last_topic, topic);
    out.extend(entries.into_iter().map(|entry| HistoryWrite {
        topic: Arc::clone(&topic),
        partition,
        entry,
    }));
    Ok(())
}

/// Sorts one group's entries by topic, partition and seq. Runs come in that order of their
/// *first* entries; the engine writes a partition's entries once each and mostly in order, so
/// runs rarely interleave (a reset's write in flight while commits' entries are written) and
/// this is then a single pass. A seq found twice keeps one copy.
pub(super) fn in_sequence_order(history: &mut Vec<HistoryWrite>) {
    fn order(a: &HistoryWrite, b: &HistoryWrite) -> std::cmp::Ordering {
        (&*a.topic, a.partition, a.entry.seq).cmp(&(&*b.topic, b.partition, b.entry.seq))
    }
    if !history.is_sorted_by(|a, b| order(a, b).is_lt()) {
        history.sort_by(order);
        history.dedup_by(|a, b| order(a, b).is_eq());
    }
}

pub(super) fn quarantined(
    path: &Path,
    (group_id, topic, partition): (&str, &str, i32),
    bytes: &[u8],
) -> Result<QuarantinedOffset, StoreError> {
    let (committed, quarantined_at) = codec::decode_quarantine(bytes).map_err(|e| {
        corrupt(
            path,
            format!("quarantined offset of {group_id:?} {topic:?}/{partition}: {e}"),
        )
    })?;
    Ok(QuarantinedOffset {
        write: OffsetWrite {
            topic: topic.into(),
            partition,
            committed,
        },
        quarantined_at,
    })
}

type Histories = Vec<(String, Vec<HistoryWrite>)>;

fn load_histories(txn: &ReadTransaction, path: &Path) -> Result<Histories, StoreError> {
    let table = txn
        .open_table(HISTORY)
        .map_err(|e| read_error(path, e.into()))?;
    let mut histories: Histories = Vec::new();
    let mut topic = None;
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        let group_id = key.value().0;
        // Keys are in group order, then topic, partition and first seq order.
        if histories.last().is_none_or(|(last, _)| last != group_id) {
            if let Some((_, writes)) = histories.last_mut() {
                in_sequence_order(writes);
            }
            histories.push((group_id.to_owned(), Vec::new()));
        }
        if let Some((_, writes)) = histories.last_mut() {
            history_run(path, &mut topic, key.value(), value.value(), writes)?;
        }
    }
    if let Some((_, writes)) = histories.last_mut() {
        in_sequence_order(writes);
    }
    Ok(histories)
}

type Quarantines = Vec<(String, Vec<QuarantinedOffset>)>;

fn load_quarantines(txn: &ReadTransaction, path: &Path) -> Result<Quarantines, StoreError> {
    let table = txn
        .open_table(QUARANTINE)
        .map_err(|e| read_error(path, e.into()))?;
    let mut quarantines: Quarantines = Vec::new();
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        let offset = quarantined(path, key.value(), value.value())?;
        let group_id = key.value().0;
        match quarantines.last_mut() {
            Some((last, offsets)) if last == group_id => offsets.push(offset),
            _ => quarantines.push((group_id.to_owned(), vec![offset])),
        }
    }
    Ok(quarantines)
}

pub(super) fn decode_entry(
    path: &Path,
    (group_id, generation): (&str, i32),
    bytes: &[u8],
) -> Result<RebalanceRecord, StoreError> {
    codec::decode_rebalance(bytes).map_err(|e| {
        corrupt(
            path,
            format!("journal entry of {group_id:?} generation {generation}: {e}"),
        )
    })
}

type Journals = Vec<(String, Vec<RebalanceRecord>)>;

fn load_journals(txn: &ReadTransaction, path: &Path) -> Result<Journals, StoreError> {
    let table = txn
        .open_table(JOURNAL)
        .map_err(|e| read_error(path, e.into()))?;
    let mut journals: Journals = Vec::new();
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        let record = decode_entry(path, key.value(), value.value())?;
        let group_id = key.value().0;
        // Keys are in group order, then generation order.
        match journals.last_mut() {
            Some((last, entries)) if last == group_id => entries.push(record),
            _ => journals.push((group_id.to_owned(), vec![record])),
        }
    }
    Ok(journals)
}

pub(super) fn load_groups(
    txn: &ReadTransaction,
    path: &Path,
) -> Result<Vec<GroupRecord>, StoreError> {
    let table = txn
        .open_table(GROUPS)
        .map_err(|e| read_error(path, e.into()))?;
    let len = table.len().map_err(|e| read_error(path, e.into()))?;
    let mut groups = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        groups.push(
            codec::decode_group(key.value(), value.value())
                .map_err(|e| corrupt(path, e.to_string()))?,
        );
    }
    Ok(groups)
}

fn load_offsets(txn: &ReadTransaction, path: &Path) -> Result<Offsets, StoreError> {
    let table = txn
        .open_table(OFFSETS)
        .map_err(|e| read_error(path, e.into()))?;
    let mut offsets: Offsets = Vec::new();
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        let (group_id, topic, partition) = key.value();
        let committed = codec::decode_offset(value.value()).map_err(|e| {
            corrupt(
                path,
                format!("offset of {group_id:?} {topic:?}/{partition}: {e}"),
            )
        })?;
        let write = OffsetWrite {
            topic: topic.into(),
            partition,
            committed,
        };
        // Keys are in group order: a group's offsets are consecutive.
        match offsets.last_mut() {
            Some((last, writes)) if last == group_id => writes.push(write),
            _ => offsets.push((group_id.to_owned(), vec![write])),
        }
    }
    Ok(offsets)
}

pub(super) fn load_topics(
    txn: &ReadTransaction,
    path: &Path,
) -> Result<Vec<TopicInfo>, StoreError> {
    let table = txn
        .open_table(TOPICS)
        .map_err(|e| read_error(path, e.into()))?;
    let mut topics = Vec::new();
    for entry in table.iter().map_err(|e| read_error(path, e.into()))? {
        let (key, value) = entry.map_err(|e| read_error(path, e.into()))?;
        topics.push(TopicInfo {
            topic: key.value().to_owned(),
            partitions: value.value(),
        });
    }
    Ok(topics)
}

pub(super) fn corrupt(path: &Path, reason: String) -> StoreError {
    StoreError::CorruptFile {
        path: path.to_path_buf(),
        reason,
    }
}

/// A failed read: corruption names the file, anything else is I/O.
pub(super) fn read_error(path: &Path, error: redb::Error) -> StoreError {
    match error {
        redb::Error::Corrupted(reason) => corrupt(path, reason),
        other => StoreError::Io(format!("reading {}: {other}", path.display())),
    }
}
