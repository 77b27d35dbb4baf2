//! Reading stored state back from etcd: everything, one shard, or one group, each at a single
//! revision (a consistent snapshot), sorted as the `Store` trait promises (groups by id,
//! offsets and quarantines by group then topic and partition, histories by group, topic,
//! partition and seq, topics by name) whatever the key order.
//!
//! Decoding is per key: a key that cannot be decoded is collected as an [`UnreadableKey`]
//! instead of failing the rest. A shard load ([`shard`], [`group_in_shard`]) keeps going and
//! quarantines the groups of those keys ([`ShardLoad`]); the `Store` trait's loads
//! ([`everything`], [`group`]) still fail on the first one, as they always did.

use std::collections::BTreeMap;
use std::sync::Arc;

use muster_coordinator::storage::{
    codec, CommittedOffset, GroupRecord, HistoryEntry, HistoryWrite, OffsetWrite,
    QuarantinedOffset, RebalanceRecord, StoreError, StoredGroup, StoredState,
};
use muster_protocol::TopicInfo;

use super::read_failed;
use super::unreadable::{ShardLoad, UnreadableKey};
use crate::client::EtcdClient;
use crate::generated::mvccpb::KeyValue;
use crate::keys::KeyLayout;

/// Where undecodable keys are collected.
type Unreadable = Vec<UnreadableKey>;

fn unreadable(
    out: &mut Unreadable,
    key: &[u8],
    group_id: Option<&str>,
    what: impl std::fmt::Display,
) {
    out.push(UnreadableKey {
        key: key.to_vec(),
        group_id: group_id.map(str::to_owned),
        reason: what.to_string(),
    });
}

fn corrupt(key: &[u8], what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!(
        "etcd key {:?}: {what}",
        String::from_utf8_lossy(key)
    ))
}

/// `state`, unless a key could not be decoded: the first one is the error.
fn strict<T>(value: T, unreadable: Unreadable) -> Result<T, StoreError> {
    match unreadable.into_iter().next() {
        Some(bad) => Err(corrupt(&bad.key, bad.reason)),
        None => Ok(value),
    }
}

fn groups(keys: &KeyLayout, kvs: Vec<KeyValue>, bad: &mut Unreadable) -> Vec<GroupRecord> {
    let mut out = Vec::with_capacity(kvs.len());
    for kv in kvs {
        let Some(group_id) = keys.parse_group(&kv.key) else {
            unreadable(bad, &kv.key, None, "not a group key");
            continue;
        };
        // etcd keeps no format version: a value stays as the release that last wrote its group
        // left it, the current encoding or one before it (`storage::codec`).
        match codec::decode_group_or_earlier(&group_id, &kv.value) {
            Ok(record) => out.push(record),
            Err(e) => unreadable(bad, &kv.key, Some(&group_id), e),
        }
    }
    out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    out
}

fn offsets(
    keys: &KeyLayout,
    kvs: Vec<KeyValue>,
    bad: &mut Unreadable,
) -> Vec<(String, Vec<OffsetWrite>)> {
    let mut by_group: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>> = BTreeMap::new();
    for kv in kvs {
        let Some(key) = keys.parse_offset(&kv.key) else {
            unreadable(bad, &kv.key, None, "not an offset key");
            continue;
        };
        let committed = match codec::decode_offset(&kv.value) {
            Ok(committed) => committed,
            Err(e) => {
                unreadable(bad, &kv.key, Some(&key.group_id), e);
                continue;
            }
        };
        by_group
            .entry(key.group_id)
            .or_default()
            .insert((key.topic, key.partition), committed);
    }
    by_group
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
        .collect()
}

/// `name`, sharing the allocation of the one before when it is the same topic.
fn shared_topic(last: &mut Option<Arc<str>>, name: String) -> Arc<str> {
    match last {
        Some(t) if **t == *name => Arc::clone(t),
        _ => Arc::clone(last.insert(Arc::from(name))),
    }
}

type Histories = Vec<(String, Vec<HistoryWrite>)>;

fn histories(keys: &KeyLayout, kvs: Vec<KeyValue>, bad: &mut Unreadable) -> Histories {
    let mut by_group: BTreeMap<String, BTreeMap<(String, i32, u64), HistoryEntry>> =
        BTreeMap::new();
    for kv in kvs {
        let Some(key) = keys.parse_history(&kv.key) else {
            unreadable(bad, &kv.key, None, "not an offset history key");
            continue;
        };
        let entry = match codec::decode_history(key.seq, &kv.value) {
            Ok(entry) => entry,
            Err(e) => {
                unreadable(bad, &kv.key, Some(&key.group_id), e);
                continue;
            }
        };
        by_group
            .entry(key.group_id)
            .or_default()
            .insert((key.topic, key.partition, key.seq), entry);
    }
    by_group
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
        .collect()
}

type Quarantines = Vec<(String, Vec<QuarantinedOffset>)>;

/// A quarantine as read: (topic, partition) → (offset, quarantined at).
type Quarantine = BTreeMap<(String, i32), (CommittedOffset, u64)>;

fn quarantines(keys: &KeyLayout, kvs: Vec<KeyValue>, bad: &mut Unreadable) -> Quarantines {
    let mut by_group: BTreeMap<String, Quarantine> = BTreeMap::new();
    for kv in kvs {
        let Some(key) = keys.parse_quarantine(&kv.key) else {
            unreadable(bad, &kv.key, None, "not a quarantine key");
            continue;
        };
        let value = match codec::decode_quarantine(&kv.value) {
            Ok(value) => value,
            Err(e) => {
                unreadable(bad, &kv.key, Some(&key.group_id), e);
                continue;
            }
        };
        by_group
            .entry(key.group_id)
            .or_default()
            .insert((key.topic, key.partition), value);
    }
    by_group
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
        .collect()
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

fn journals(keys: &KeyLayout, kvs: Vec<KeyValue>, bad: &mut Unreadable) -> Journals {
    let mut by_group: BTreeMap<String, BTreeMap<i32, RebalanceRecord>> = BTreeMap::new();
    for kv in kvs {
        let Some((group_id, generation)) = keys.parse_journal(&kv.key) else {
            unreadable(bad, &kv.key, None, "not a journal key");
            continue;
        };
        match codec::decode_rebalance(&kv.value) {
            Ok(entry) => {
                by_group
                    .entry(group_id)
                    .or_default()
                    .insert(generation, entry);
            }
            Err(e) => unreadable(bad, &kv.key, Some(&group_id), e),
        }
    }
    by_group
        .into_iter()
        .map(|(group_id, entries)| (group_id, entries.into_values().collect()))
        .collect()
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

/// What one read covers: a prefix, or one exact key.
enum Range {
    Prefix(Vec<u8>),
    Exact(Vec<u8>),
}

/// The key-values of some groups, each kind read at the same revision, not decoded yet.
struct Raw {
    revision: i64,
    groups: Vec<KeyValue>,
    offsets: Vec<KeyValue>,
    journals: Vec<KeyValue>,
    history: Vec<KeyValue>,
    quarantine: Vec<KeyValue>,
}

async fn range(
    client: &EtcdClient,
    range: &Range,
    revision: i64,
) -> Result<(Vec<KeyValue>, i64), StoreError> {
    match range {
        Range::Prefix(prefix) => client.range_prefix(prefix, revision).await,
        Range::Exact(key) => client.range_exact(key, revision).await,
    }
    .map_err(read_failed)
}

/// Reads groups, offsets, journals, histories and quarantines (in that order of `ranges`),
/// the first at the current revision and the others at the same one (a consistent snapshot).
async fn read(client: &EtcdClient, ranges: [Range; 5]) -> Result<Raw, StoreError> {
    let [groups, offsets, journals, history, quarantine] = ranges;
    let (groups, revision) = range(client, &groups, 0).await?;
    Ok(Raw {
        revision,
        groups,
        offsets: range(client, &offsets, revision).await?.0,
        journals: range(client, &journals, revision).await?.0,
        history: range(client, &history, revision).await?.0,
        quarantine: range(client, &quarantine, revision).await?.0,
    })
}

/// Decodes what was read, per key: the keys that cannot be decoded go to `bad`.
fn decode(keys: &KeyLayout, raw: Raw, bad: &mut Unreadable) -> StoredState {
    StoredState {
        groups: groups(keys, raw.groups, bad),
        offsets: offsets(keys, raw.offsets, bad),
        topics: Vec::new(),
        journals: journals(keys, raw.journals, bad),
        history: histories(keys, raw.history, bad),
        quarantine: quarantines(keys, raw.quarantine, bad),
    }
}

/// Everything of the cluster; the first undecodable key fails it.
pub(super) async fn everything(
    client: &EtcdClient,
    keys: &KeyLayout,
) -> Result<StoredState, StoreError> {
    let raw = read(
        client,
        [
            Range::Prefix(keys.groups_prefix()),
            Range::Prefix(keys.offsets_prefix()),
            Range::Prefix(keys.journals_prefix()),
            Range::Prefix(keys.histories_prefix()),
            Range::Prefix(keys.quarantines_prefix()),
        ],
    )
    .await?;
    let (topic_kvs, _) = client
        .range_prefix(&keys.topics_prefix(), raw.revision)
        .await
        .map_err(read_failed)?;
    let mut bad = Vec::new();
    let mut state = decode(keys, raw, &mut bad);
    state.topics = topics(keys, topic_kvs)?;
    strict(state, bad)
}

/// One shard's groups, offsets, journals, histories and quarantines (no topics). A key that
/// cannot be decoded quarantines its group ([`ShardLoad`]); only a failed read is an error.
pub(super) async fn shard(
    client: &EtcdClient,
    keys: &KeyLayout,
    shard: u32,
) -> Result<ShardLoad, StoreError> {
    let raw = read(
        client,
        [
            Range::Prefix(keys.shard_groups_prefix(shard)),
            Range::Prefix(keys.shard_offsets_prefix(shard)),
            Range::Prefix(keys.shard_journals_prefix(shard)),
            Range::Prefix(keys.shard_history_prefix(shard)),
            Range::Prefix(keys.shard_quarantine_prefix(shard)),
        ],
    )
    .await?;
    let mut bad = Vec::new();
    let state = decode(keys, raw, &mut bad);
    Ok(ShardLoad::new(state, bad))
}

/// The ranges holding one group's keys.
fn group_ranges(keys: &KeyLayout, shard: u32, group_id: &str) -> [Range; 5] {
    [
        Range::Exact(keys.group(shard, group_id)),
        Range::Prefix(keys.group_offsets_prefix(shard, group_id)),
        Range::Prefix(keys.group_journal_prefix(shard, group_id)),
        Range::Prefix(keys.group_history_prefix(shard, group_id)),
        Range::Prefix(keys.group_quarantine_prefix(shard, group_id)),
    ]
}

/// One group of a shard, as [`shard`] reads them (a quarantined group read again, to see
/// whether its keys have been fixed or removed).
pub(super) async fn group_in_shard(
    client: &EtcdClient,
    keys: &KeyLayout,
    shard: u32,
    group_id: &str,
) -> Result<ShardLoad, StoreError> {
    let raw = read(client, group_ranges(keys, shard, group_id)).await?;
    let mut bad = Vec::new();
    let state = decode(keys, raw, &mut bad);
    Ok(ShardLoad::new(state, bad))
}

/// One group; the first undecodable key fails it.
pub(super) async fn group(
    client: &EtcdClient,
    keys: &KeyLayout,
    shard: u32,
    group_id: &str,
) -> Result<StoredGroup, StoreError> {
    let raw = read(client, group_ranges(keys, shard, group_id)).await?;
    let mut bad = Vec::new();
    let state = decode(keys, raw, &mut bad);
    let state = strict(state, bad)?;
    Ok(StoredGroup {
        record: state.groups.into_iter().next(),
        offsets: only(state.offsets),
        journal: only(state.journals),
        history: only(state.history),
        quarantine: only(state.quarantine),
    })
}

/// The one group's entries of a by-group list (empty if it has none).
fn only<T: Default>(mut by_group: Vec<(String, T)>) -> T {
    by_group.pop().map(|(_, x)| x).unwrap_or_default()
}
