//! An in-memory [`Store`]: durable only for the life of the process. For tests, and for
//! checking that a durable backend behaves the same (one test body runs against both).
//! [`MemoryStore::fail_writes`] makes it fail like a full disk, so that what callers do on a
//! failed write is tested without one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use muster_protocol::TopicInfo;

use super::{
    CommittedOffset, Durable, GroupRecord, HistoryEntry, HistoryWrite, Mutation, OffsetWrite,
    QuarantinedOffset, RebalanceRecord, Store, StoreError, StoredGroup, StoredState,
};

/// A group's offset history: (topic, partition, seq) → entry.
type History = BTreeMap<(String, i32, u64), HistoryEntry>;

/// A group's quarantine: (topic, partition) → (offset, quarantined at).
type Quarantine = BTreeMap<(String, i32), (CommittedOffset, u64)>;

#[derive(Debug, Default)]
struct Inner {
    groups: BTreeMap<String, GroupRecord>,
    offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    topics: BTreeMap<String, i32>,
    journals: BTreeMap<String, BTreeMap<i32, RebalanceRecord>>,
    history: BTreeMap<String, History>,
    quarantine: BTreeMap<String, Quarantine>,
}

/// Keeps everything in process memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    /// Fault injection: while set, every write and every `load_group` fails as on a full disk.
    failing: AtomicBool,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// While `failing`, every batch fails ([`StoreError::Io`]) without being applied, reads of
    /// one group fail, and the store reports itself unhealthy: a disk that is full, for tests.
    pub fn fail_writes(&self, failing: bool) {
        self.failing.store(failing, Ordering::Release);
    }

    fn failing(&self) -> bool {
        self.failing.load(Ordering::Acquire)
    }
}

fn offset_writes(parts: &BTreeMap<(String, i32), CommittedOffset>) -> Vec<OffsetWrite> {
    parts
        .iter()
        .map(|((topic, partition), committed)| OffsetWrite {
            topic: topic.as_str().into(),
            partition: *partition,
            committed: committed.clone(),
        })
        .collect()
}

fn history_writes(history: &History) -> Vec<HistoryWrite> {
    history
        .iter()
        .map(|((topic, partition, _), entry)| HistoryWrite {
            topic: topic.as_str().into(),
            partition: *partition,
            entry: entry.clone(),
        })
        .collect()
}

fn quarantined(quarantine: &Quarantine) -> Vec<QuarantinedOffset> {
    quarantine
        .iter()
        .map(|((topic, partition), (committed, at))| QuarantinedOffset {
            write: OffsetWrite {
                topic: topic.as_str().into(),
                partition: *partition,
                committed: committed.clone(),
            },
            quarantined_at: *at,
        })
        .collect()
}

impl Store for MemoryStore {
    fn load(&self) -> Result<StoredState, StoreError> {
        let inner = self
            .inner
            .lock()
            .map_err(|_| StoreError::Corrupt("memory store lock poisoned".into()))?;
        Ok(StoredState {
            groups: inner.groups.values().cloned().collect(),
            offsets: inner
                .offsets
                .iter()
                .map(|(group, parts)| (group.clone(), offset_writes(parts)))
                .collect(),
            topics: inner
                .topics
                .iter()
                .map(|(topic, &partitions)| TopicInfo {
                    topic: topic.clone(),
                    partitions,
                })
                .collect(),
            journals: inner
                .journals
                .iter()
                .map(|(group, entries)| (group.clone(), entries.values().cloned().collect()))
                .collect(),
            history: inner
                .history
                .iter()
                .map(|(group, history)| (group.clone(), history_writes(history)))
                .collect(),
            quarantine: inner
                .quarantine
                .iter()
                .map(|(group, q)| (group.clone(), quarantined(q)))
                .collect(),
        })
    }

    fn load_group(&self, group_id: &str) -> Result<StoredGroup, StoreError> {
        if self.failing() {
            return Err(StoreError::Unavailable("injected failure".into()));
        }
        let inner = self
            .inner
            .lock()
            .map_err(|_| StoreError::Corrupt("memory store lock poisoned".into()))?;
        Ok(StoredGroup {
            record: inner.groups.get(group_id).cloned(),
            offsets: inner
                .offsets
                .get(group_id)
                .map(offset_writes)
                .unwrap_or_default(),
            journal: inner
                .journals
                .get(group_id)
                .map(|entries| entries.values().cloned().collect())
                .unwrap_or_default(),
            history: inner
                .history
                .get(group_id)
                .map(history_writes)
                .unwrap_or_default(),
            quarantine: inner
                .quarantine
                .get(group_id)
                .map(quarantined)
                .unwrap_or_default(),
        })
    }

    fn reads_one_group_cheaply(&self) -> bool {
        true
    }

    fn healthy(&self) -> bool {
        !self.failing()
    }

    fn apply(&self, batch: Vec<Mutation>) -> Durable {
        if self.failing() {
            return Durable::ready(Err(StoreError::Io(
                "injected failure: no space left on device".into(),
            )));
        }
        let Ok(mut inner) = self.inner.lock() else {
            return Durable::ready(Err(StoreError::Corrupt(
                "memory store lock poisoned".into(),
            )));
        };
        for mutation in batch {
            match mutation {
                Mutation::PutGroup(record) => {
                    inner.groups.insert(record.group_id.clone(), record);
                }
                Mutation::DeleteGroup { group_id } => {
                    inner.groups.remove(&group_id);
                    inner.offsets.remove(&group_id);
                    inner.journals.remove(&group_id);
                    inner.history.remove(&group_id);
                    inner.quarantine.remove(&group_id);
                }
                Mutation::PutOffsets { offsets, .. } if offsets.is_empty() => {}
                Mutation::PutOffsets { group_id, offsets } => {
                    let parts = inner.offsets.entry(group_id).or_default();
                    for w in offsets {
                        parts.insert((w.topic.to_string(), w.partition), w.committed);
                    }
                }
                Mutation::DeleteOffsets {
                    group_id,
                    partitions,
                } => {
                    if let Some(parts) = inner.offsets.get_mut(&group_id) {
                        for key in partitions {
                            parts.remove(&key);
                        }
                        if parts.is_empty() {
                            inner.offsets.remove(&group_id);
                        }
                    }
                }
                Mutation::PutHistory {
                    group_id,
                    entries,
                    trim,
                } => {
                    let history = inner.history.entry(group_id.clone()).or_default();
                    for t in trim {
                        let topic = t.topic.to_string();
                        let dropped: Vec<_> = history
                            .range(
                                (topic.clone(), t.partition, 0)..(topic, t.partition, t.below_seq),
                            )
                            .map(|(k, _)| k.clone())
                            .collect();
                        for k in dropped {
                            history.remove(&k);
                        }
                    }
                    for w in entries {
                        history.insert((w.topic.to_string(), w.partition, w.entry.seq), w.entry);
                    }
                    if history.is_empty() {
                        inner.history.remove(&group_id);
                    }
                }
                Mutation::PutQuarantine { offsets, .. } if offsets.is_empty() => {}
                Mutation::PutQuarantine { group_id, offsets } => {
                    let q = inner.quarantine.entry(group_id).or_default();
                    for o in offsets {
                        q.insert(
                            (o.write.topic.to_string(), o.write.partition),
                            (o.write.committed, o.quarantined_at),
                        );
                    }
                }
                Mutation::DeleteQuarantine {
                    group_id,
                    partitions,
                } => {
                    if let Some(q) = inner.quarantine.get_mut(&group_id) {
                        for key in partitions {
                            q.remove(&key);
                        }
                        if q.is_empty() {
                            inner.quarantine.remove(&group_id);
                        }
                    }
                }
                Mutation::PutTopic(topic) => {
                    inner.topics.insert(topic.topic, topic.partitions);
                }
                Mutation::PutRebalances {
                    group_id,
                    entries,
                    dropped,
                } => {
                    let journal = inner.journals.entry(group_id.clone()).or_default();
                    for generation in dropped {
                        journal.remove(&generation);
                    }
                    for entry in entries {
                        journal.insert(entry.generation_id, entry);
                    }
                    if journal.is_empty() {
                        inner.journals.remove(&group_id);
                    }
                }
            }
        }
        Durable::ready(Ok(()))
    }
}
