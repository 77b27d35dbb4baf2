//! Reading stored state back from etcd: everything, one shard, or one group, each at a single
//! revision (a consistent snapshot), sorted as the `Store` trait promises (groups by id,
//! offsets and quarantines by group then topic and partition, histories by group, topic,
//! partition and seq, topics by name) whatever the key order.

use std::collections::BTreeMap;
use std::sync::Arc;

use muster_coordinator::storage::{
    codec, CommittedOffset, GroupRecord, HistoryEntry, HistoryWrite, OffsetWrite,
    QuarantinedOffset, RebalanceRecord, StoreError, StoredGroup, StoredState,
};
use muster_protocol::TopicInfo;

use super::read_failed;
use crate::client::EtcdClient;
use crate::generated::mvccpb::KeyValue;
use crate::keys::KeyLayout;

fn corrupt(key: &[u8], what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!(
        "etcd key {:?}: {what}",
        String::from_utf8_lossy(key)
    ))
}

fn groups(keys: &KeyLayout, kvs: Vec<KeyValue>) -> Result<Vec<GroupRecord>, StoreError> {
    let mut out = Vec::with_capacity(kvs.len());
    for kv in kvs {
        let group_id = keys
            .parse_group(&kv.key)
            .ok_or_else(|| corrupt(&kv.key, "not a group key"))?;
        // etcd keeps no format version: a value stays as the release that last wrote its group
        // left it, the current encoding or one before it (`storage::codec`).
        out.push(
            codec::decode_group_or_earlier(&group_id, &kv.value)
                .map_err(|e| corrupt(&kv.key, e))?,
        );
    }
    out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    Ok(out)
}

fn offsets(
    keys: &KeyLayout,
    kvs: Vec<KeyValue>,
) -> Result<Vec<(String, Vec<OffsetWrite>)>, StoreError> {
    let mut by_group: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>> = BTreeMap::new();
    for kv in kvs {
        let key = keys
            .parse_offset(&kv.key)
            .ok_or_else(|| corrupt(&kv.key, "not an offset key"))?;
        let committed = codec::decode_offset(&kv.value).map_err(|e| corrupt(&kv.key, e))?;
        by_group
            .entry(key.group_id)
            .or_default()
            .insert((key.topic, key.partition), committed);
    }
    Ok(by_group
        .into_iter()
        .map(|(group_id, offsets)| {
            // One allocation per topic, as the engine's own writes share it.
            let mut topic = None;
            let writes = offsets
                .into_iter()
                .map(|((name, partition), committed)| OffsetWrite {
                    topic: shared_topic(&mut topic, name),
                    partition,
                    committed,
                })
                .collect();
            (group_id, writes)
        })
        .collect())
}

/// `name`, sharing the allocation of the one before when it is the same topic.
fn shared_topic(last: &mut Option<Arc<str>>, name: String) -> Arc<str> {
    match last {
        Some(t) if **t == *name => Arc::clone(t),
        _ => Arc::clone(last.insert(Arc::from(name))),
    }
}

type Histories = Vec<(String, Vec<HistoryWrite>)>;

fn histories(keys: &KeyLayout, kvs: Vec<KeyValue>) -> Result<Histories, StoreError> {
    let mut by_group: BTreeMap<String, BTreeMap<(String, i32, u64), HistoryEntry>> =
        BTreeMap::new();
    for kv in kvs {
        let key = keys
            .parse_history(&kv.key)
            .ok_or_else(|| corrupt(&kv.key, "not an offset history key"))?;
        let entry = codec::decode_history(key.seq, &kv.value).map_err(|e| corrupt(&kv.key, e))?;
        by_group
            .entry(key.group_id)
            .or_default()
            .insert((key.topic, key.partition, key.seq), entry);
    }
    Ok(by_group
        .into_iter()
        .map(|(group_id, entries)| {
            let mut topic = None;
            let writes = entries
                .into_iter()
                .map(|((name, partition, _), entry)| HistoryWrite {
                    topic: shared_topic(&mut topic, name),
                    partition,
                    entry,
                })
                .collect();
            (group_id, writes)
        })
        .collect())
}

type Quarantines = Vec<(String, Vec<QuarantinedOffset>)>;

/// A quarantine as read: (topic, partition) → (offset, quarantined at).
type Quarantine = BTreeMap<(String, i32), (CommittedOffset, u64)>;

fn quarantines(keys: &KeyLayout, kvs: Vec<KeyValue>) -> Result<Quarantines, StoreError> {
    let mut by_group: BTreeMap<String, Quarantine> = BTreeMap::new();
    for kv in kvs {
        let key = keys
            .parse_quarantine(&kv.key)
            .ok_or_else(|| corrupt(&kv.key, "not a quarantine key"))?;
        let value = codec::decode_quarantine(&kv.value).map_err(|e| corrupt(&kv.key, e))?;
        by_group
            .entry(key.group_id)
            .or_default()
            .insert((key.topic, key.partition), value);
    }
    Ok(by_group
        .into_iter()
        .map(|(group_id, offsets)| {
            let offsets = offsets
                .into_iter()
                .map(
                    |((topic, partition), (committed, quarantined_at))| QuarantinedOffset {
                        write: OffsetWrite {
                            topic: topic.into(),
                            partition,
                            committed,
                        },
                        quarantined_at,
                    },
                )
                .collect();
            (group_id, offsets)
        })
        .collect())
}

/// One topic key and its value (the partition count, decimal).
pub(super) fn topic(keys: &KeyLayout, key: &[u8], value: &[u8]) -> Result<TopicInfo, StoreError> {
    let topic = keys
        .parse_topic(key)
        .ok_or_else(|| corrupt(key, "not a topic key"))?;
    let partitions = std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| corrupt(key, "partition count is not a number"))?;
    Ok(TopicInfo { topic, partitions })
}

type Journals = Vec<(String, Vec<RebalanceRecord>)>;

fn journals(keys: &KeyLayout, kvs: Vec<KeyValue>) -> Result<Journals, StoreError> {
    let mut by_group: BTreeMap<String, BTreeMap<i32, RebalanceRecord>> = BTreeMap::new();
    for kv in kvs {
        let (group_id, generation) = keys
            .parse_journal(&kv.key)
            .ok_or_else(|| corrupt(&kv.key, "not a journal key"))?;
        let entry = codec::decode_rebalance(&kv.value).map_err(|e| corrupt(&kv.key, e))?;
        by_group
            .entry(group_id)
            .or_default()
            .insert(generation, entry);
    }
    Ok(by_group
        .into_iter()
        .map(|(group_id, entries)| (group_id, entries.into_values().collect()))
        .collect())
}

fn topics(keys: &KeyLayout, kvs: Vec<KeyValue>) -> Result<Vec<TopicInfo>, StoreError> {
    let mut out = Vec::with_capacity(kvs.len());
    for kv in kvs {
        out.push(topic(keys, &kv.key, &kv.value)?);
    }
    out.sort_by(|a, b| a.topic.cmp(&b.topic));
    Ok(out)
}

/// The topic catalog alone, and the revision it was read at (to watch from the next one).
pub(super) async fn catalog(
    client: &EtcdClient,
    keys: &KeyLayout,
) -> Result<(Vec<TopicInfo>, i64), StoreError> {
    let (topic_kvs, revision) = client
        .range_prefix(&keys.topics_prefix(), 0)
        .await
        .map_err(read_failed)?;
    Ok((topics(keys, topic_kvs)?, revision))
}

/// Everything of the cluster.
pub(super) async fn everything(
    client: &EtcdClient,
    keys: &KeyLayout,
) -> Result<StoredState, StoreError> {
    let (group_kvs, revision) = client
        .range_prefix(&keys.groups_prefix(), 0)
        .await
        .map_err(read_failed)?;
    let (offset_kvs, _) = client
        .range_prefix(&keys.offsets_prefix(), revision)
        .await
        .map_err(read_failed)?;
    let (topic_kvs, _) = client
        .range_prefix(&keys.topics_prefix(), revision)
        .await
        .map_err(read_failed)?;
    let (journal_kvs, _) = client
        .range_prefix(&keys.journals_prefix(), revision)
        .await
        .map_err(read_failed)?;
    let (history_kvs, _) = client
        .range_prefix(&keys.histories_prefix(), revision)
        .await
        .map_err(read_failed)?;
    let (quarantine_kvs, _) = client
        .range_prefix(&keys.quarantines_prefix(), revision)
        .await
        .map_err(read_failed)?;
    Ok(StoredState {
        groups: groups(keys, group_kvs)?,
        offsets: offsets(keys, offset_kvs)?,
        topics: topics(keys, topic_kvs)?,
        journals: journals(keys, journal_kvs)?,
        history: histories(keys, history_kvs)?,
        quarantine: quarantines(keys, quarantine_kvs)?,
    })
}

/// One shard's groups, offsets, journals, histories and quarantines (no topics).
pub(super) async fn shard(
    client: &EtcdClient,
    keys: &KeyLayout,
    shard: u32,
) -> Result<StoredState, StoreError> {
    let (group_kvs, revision) = client
        .range_prefix(&keys.shard_groups_prefix(shard), 0)
        .await
        .map_err(read_failed)?;
    let (offset_kvs, _) = client
        .range_prefix(&keys.shard_offsets_prefix(shard), revision)
        .await
        .map_err(read_failed)?;
    let (journal_kvs, _) = client
        .range_prefix(&keys.shard_journals_prefix(shard), revision)
        .await
        .map_err(read_failed)?;
    let (history_kvs, _) = client
        .range_prefix(&keys.shard_history_prefix(shard), revision)
        .await
        .map_err(read_failed)?;
    let (quarantine_kvs, _) = client
        .range_prefix(&keys.shard_quarantine_prefix(shard), revision)
        .await
        .map_err(read_failed)?;
    Ok(StoredState {
        groups: groups(keys, group_kvs)?,
        offsets: offsets(keys, offset_kvs)?,
        topics: Vec::new(),
        journals: journals(keys, journal_kvs)?,
        history: histories(keys, history_kvs)?,
        quarantine: quarantines(keys, quarantine_kvs)?,
    })
}

/// One group.
pub(super) async fn group(
    client: &EtcdClient,
    keys: &KeyLayout,
    shard: u32,
    group_id: &str,
) -> Result<StoredGroup, StoreError> {
    let (offset_kvs, revision) = client
        .range_prefix(&keys.group_offsets_prefix(shard, group_id), 0)
        .await
        .map_err(read_failed)?;
    // The record at the same revision as the offsets.
    let (record_kvs, _) = client
        .range_exact(&keys.group(shard, group_id), revision)
        .await
        .map_err(read_failed)?;
    let (journal_kvs, _) = client
        .range_prefix(&keys.group_journal_prefix(shard, group_id), revision)
        .await
        .map_err(read_failed)?;
    let (history_kvs, _) = client
        .range_prefix(&keys.group_history_prefix(shard, group_id), revision)
        .await
        .map_err(read_failed)?;
    let (quarantine_kvs, _) = client
        .range_prefix(&keys.group_quarantine_prefix(shard, group_id), revision)
        .await
        .map_err(read_failed)?;
    Ok(StoredGroup {
        record: groups(keys, record_kvs)?.into_iter().next(),
        offsets: offsets(keys, offset_kvs)?
            .into_iter()
            .next()
            .map(|(_, writes)| writes)
            .unwrap_or_default(),
        journal: journals(keys, journal_kvs)?
            .into_iter()
            .next()
            .map(|(_, entries)| entries)
            .unwrap_or_default(),
        history: histories(keys, history_kvs)?
            .into_iter()
            .next()
            .map(|(_, entries)| entries)
            .unwrap_or_default(),
        quarantine: quarantines(keys, quarantine_kvs)?
            .into_iter()
            .next()
            .map(|(_, offsets)| offsets)
            .unwrap_or_default(),
    })
}
