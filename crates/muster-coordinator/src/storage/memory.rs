//! An in-memory [`Store`]: durable only for the life of the process. For tests, and for
//! checking that a durable backend behaves the same (one test body runs against both).

use std::collections::BTreeMap;
use std::sync::Mutex;

use muster_protocol::TopicInfo;

use super::{
    CommittedOffset, Durable, GroupRecord, Mutation, OffsetWrite, Store, StoreError, StoredState,
};

#[derive(Debug, Default)]
struct Inner {
    groups: BTreeMap<String, GroupRecord>,
    offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    topics: BTreeMap<String, i32>,
}

/// Keeps everything in process memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }
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
                .map(|(group, parts)| {
                    let writes = parts
                        .iter()
                        .map(|((topic, partition), committed)| OffsetWrite {
                            topic: topic.as_str().into(),
                            partition: *partition,
                            committed: committed.clone(),
                        })
                        .collect();
                    (group.clone(), writes)
                })
                .collect(),
            topics: inner
                .topics
                .iter()
                .map(|(topic, &partitions)| TopicInfo {
                    topic: topic.clone(),
                    partitions,
                })
                .collect(),
        })
    }

    fn apply(&self, batch: Vec<Mutation>) -> Durable {
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
                }
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
                Mutation::PutTopic(topic) => {
                    inner.topics.insert(topic.topic, topic.partitions);
                }
            }
        }
        Durable::ready(Ok(()))
    }
}
