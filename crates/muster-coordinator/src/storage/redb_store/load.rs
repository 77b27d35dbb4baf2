//! Reading a whole [`RedbStore`](super::RedbStore) into a [`StoredState`], for startup.
//!
//! One read transaction (one snapshot) for all tables. Groups and offsets are decoded on two
//! threads at once: they are independent, about equally heavy, and startup has the cores to
//! spare (on 2 cores, 100 000 groups and 1 000 000 offsets take about half the time).
//! [`load_group`] reads one group the same way, for a group rolling back to what is durable.

use std::path::Path;

use muster_protocol::TopicInfo;
use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::codec;
use super::{GROUPS, JOURNAL, OFFSETS, TOPICS};
use crate::storage::{
    GroupRecord, OffsetWrite, RebalanceRecord, StoreError, StoredGroup, StoredState,
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
        history: Vec::new(),    // TODO(stores)
        quarantine: Vec::new(), // TODO(stores)
    })
}

/// One group's record and offsets, in one snapshot.
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
    Ok(StoredGroup {
        record,
        offsets,
        journal,
        history: Vec::new(),    // TODO(stores)
        quarantine: Vec::new(), // TODO(stores)
    })
}

fn decode_entry(
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

fn load_groups(txn: &ReadTransaction, path: &Path) -> Result<Vec<GroupRecord>, StoreError> {
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

fn load_topics(txn: &ReadTransaction, path: &Path) -> Result<Vec<TopicInfo>, StoreError> {
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

fn corrupt(path: &Path, reason: String) -> StoreError {
    StoreError::CorruptFile {
        path: path.to_path_buf(),
        reason,
    }
}

/// A failed read: corruption names the file, anything else is I/O.
fn read_error(path: &Path, error: redb::Error) -> StoreError {
    match error {
        redb::Error::Corrupted(reason) => corrupt(path, reason),
        other => StoreError::Io(format!("reading {}: {other}", path.display())),
    }
}
