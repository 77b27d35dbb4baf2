//! Turning batches of mutations into etcd transactions, within etcd's limits.
//!
//! A batch is first [`prepare`]d into key operations, each tagged with the shard whose
//! ownership it needs. The writer then fills a [`TxnPlan`] with whole batches, in submission
//! order, until the next one would break a limit: `max_ops` operations (etcd's
//! `--max-txn-ops`, 128 by default; the ownership compares count separately and are one per
//! shard), `max_bytes` of keys and values (under etcd's `--max-request-bytes`, 1.5 MiB by
//! default). A batch too large for one transaction on its own is spread over several, in
//! order.
//!
//! etcd refuses a transaction that writes one key twice or writes a key inside a range it
//! deletes, so the plan coalesces: a later put or delete of a key replaces the earlier one
//! (the later wins, as it would have applied last), and a prefix delete drops the plan's
//! earlier operations under that prefix. Only a put under a prefix the same plan deletes
//! (a group deleted and written again) must wait for the next transaction.

use std::collections::{BTreeMap, BTreeSet};

use muster_coordinator::storage::{codec, Mutation, StoreError};

use crate::keys::KeyLayout;
use crate::shard::shard_of;

/// One key operation of a prepared batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KeyOp {
    Put { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
    DeletePrefix { prefix: Vec<u8> },
}

impl KeyOp {
    fn size(&self) -> usize {
        // Protobuf framing per operation is a handful of bytes; 16 covers it.
        16 + match self {
            KeyOp::Put { key, value } => key.len() + value.len(),
            KeyOp::Delete { key } => key.len(),
            KeyOp::DeletePrefix { prefix } => 2 * prefix.len(),
        }
    }
}

/// A key operation and the shard it is fenced on (`None`: cluster-wide, the topic catalog).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FencedOp {
    pub shard: Option<u32>,
    pub op: KeyOp,
}

/// Encodes a batch into key operations, in order.
pub(super) fn prepare(
    keys: &KeyLayout,
    shards: u32,
    batch: Vec<Mutation>,
) -> Result<Vec<FencedOp>, StoreError> {
    let rejected = |e: codec::CodecError| StoreError::Rejected(e.to_string());
    let mut ops = Vec::new();
    for mutation in batch {
        match mutation {
            Mutation::PutGroup(record) => {
                let shard = shard_of(&record.group_id, shards);
                let (group_id, value) = codec::encode_group(record).map_err(rejected)?;
                ops.push(FencedOp {
                    shard: Some(shard),
                    op: KeyOp::Put {
                        key: keys.group(shard, &group_id),
                        value,
                    },
                });
            }
            Mutation::DeleteGroup { group_id } => {
                let shard = shard_of(&group_id, shards);
                ops.push(FencedOp {
                    shard: Some(shard),
                    op: KeyOp::Delete {
                        key: keys.group(shard, &group_id),
                    },
                });
                ops.push(FencedOp {
                    shard: Some(shard),
                    op: KeyOp::DeletePrefix {
                        prefix: keys.group_offsets_prefix(shard, &group_id),
                    },
                });
                ops.push(FencedOp {
                    shard: Some(shard),
                    op: KeyOp::DeletePrefix {
                        prefix: keys.group_journal_prefix(shard, &group_id),
                    },
                });
            }
            Mutation::PutRebalances {
                group_id,
                entries,
                dropped,
            } => {
                let shard = shard_of(&group_id, shards);
                for generation in dropped {
                    ops.push(FencedOp {
                        shard: Some(shard),
                        op: KeyOp::Delete {
                            key: keys.journal(shard, &group_id, generation),
                        },
                    });
                }
                for entry in entries {
                    let key = keys.journal(shard, &group_id, entry.generation_id);
                    let value = codec::encode_rebalance(entry).map_err(rejected)?;
                    ops.push(FencedOp {
                        shard: Some(shard),
                        op: KeyOp::Put { key, value },
                    });
                }
            }
            Mutation::PutOffsets { group_id, offsets } => {
                let shard = shard_of(&group_id, shards);
                for write in offsets {
                    let key = keys.offset(shard, &group_id, &write.topic, write.partition);
                    let value = codec::encode_offset(write.committed).map_err(rejected)?;
                    ops.push(FencedOp {
                        shard: Some(shard),
                        op: KeyOp::Put { key, value },
                    });
                }
            }
            Mutation::DeleteOffsets {
                group_id,
                partitions,
            } => {
                let shard = shard_of(&group_id, shards);
                for (topic, partition) in partitions {
                    ops.push(FencedOp {
                        shard: Some(shard),
                        op: KeyOp::Delete {
                            key: keys.offset(shard, &group_id, &topic, partition),
                        },
                    });
                }
            }
            Mutation::PutTopic(topic) => ops.push(FencedOp {
                shard: None,
                op: KeyOp::Put {
                    key: keys.topic(&topic.topic),
                    value: topic.partitions.to_string().into_bytes(),
                },
            }),
        }
    }
    Ok(ops)
}

/// Limits one transaction must stay within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnLimits {
    /// Operations per transaction, and ownership compares per transaction (etcd's
    /// `--max-txn-ops`, default 128).
    pub max_ops: usize,
    /// Bytes of keys and values per transaction; keep it below etcd's `--max-request-bytes`
    /// (default 1.5 MiB) with room for framing.
    pub max_bytes: usize,
}

impl Default for TxnLimits {
    fn default() -> Self {
        TxnLimits {
            max_ops: 128,
            max_bytes: 1 << 20,
        }
    }
}

/// Whether an operation went into the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Added {
    Yes,
    /// It would break a limit or conflict with the plan: it belongs in the next transaction.
    Full,
}

/// The operations of one transaction being built.
#[derive(Debug, Clone, Default)]
pub(super) struct TxnPlan {
    /// Single-key puts (`Some`) and deletes (`None`), coalesced: the last operation wins.
    keys: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    prefixes: Vec<Vec<u8>>,
    pub shards: BTreeSet<u32>,
    bytes: usize,
}

impl TxnPlan {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.prefixes.is_empty()
    }

    pub fn op_count(&self) -> usize {
        self.keys.len() + self.prefixes.len()
    }

    fn under_deleted_prefix(&self, key: &[u8]) -> bool {
        self.prefixes.iter().any(|p| key.starts_with(p))
    }

    /// Adds `op` if it fits within `limits` and does not conflict.
    pub fn add(&mut self, op: &FencedOp, limits: TxnLimits) -> Added {
        let new_shard = op.shard.filter(|s| !self.shards.contains(s));
        if new_shard.is_some() && self.shards.len() >= limits.max_ops {
            return Added::Full;
        }
        let grows = match &op.op {
            KeyOp::Put { key, .. } | KeyOp::Delete { key } => !self.keys.contains_key(key),
            KeyOp::DeletePrefix { .. } => true,
        };
        if (grows && self.op_count() >= limits.max_ops)
            || (!self.is_empty() && self.bytes + op.op.size() > limits.max_bytes)
        {
            return Added::Full;
        }
        match &op.op {
            KeyOp::Put { key, value } => {
                if self.under_deleted_prefix(key) {
                    return Added::Full;
                }
                self.keys.insert(key.clone(), Some(value.clone()));
            }
            KeyOp::Delete { key } => {
                if !self.under_deleted_prefix(key) {
                    self.keys.insert(key.clone(), None);
                }
            }
            KeyOp::DeletePrefix { prefix } => {
                // Whatever the plan wrote under the prefix is deleted by it anyway.
                self.keys.retain(|key, _| !key.starts_with(prefix));
                self.prefixes.push(prefix.clone());
            }
        }
        if let Some(shard) = new_shard {
            self.shards.insert(shard);
        }
        self.bytes += op.op.size();
        Added::Yes
    }

    /// The plan's operations: puts, single deletes and prefix deletes, in key order.
    pub fn into_ops(self) -> Vec<KeyOp> {
        let mut ops: Vec<KeyOp> = self
            .keys
            .into_iter()
            .map(|(key, value)| match value {
                Some(value) => KeyOp::Put { key, value },
                None => KeyOp::Delete { key },
            })
            .collect();
        ops.extend(
            self.prefixes
                .into_iter()
                .map(|prefix| KeyOp::DeletePrefix { prefix }),
        );
        ops
    }
}

#[cfg(test)]
mod tests {
    use super::{Added, FencedOp, KeyOp, TxnLimits, TxnPlan};

    fn put(key: &str, value: &str) -> FencedOp {
        FencedOp {
            shard: Some(0),
            op: KeyOp::Put {
                key: key.into(),
                value: value.into(),
            },
        }
    }

    const LIMITS: TxnLimits = TxnLimits {
        max_ops: 3,
        max_bytes: 1000,
    };

    #[test]
    fn a_later_write_of_a_key_replaces_the_earlier() {
        let mut plan = TxnPlan::default();
        assert_eq!(plan.add(&put("a", "1"), LIMITS), Added::Yes);
        assert_eq!(plan.add(&put("a", "2"), LIMITS), Added::Yes);
        let delete = FencedOp {
            shard: Some(0),
            op: KeyOp::Delete { key: "b".into() },
        };
        assert_eq!(plan.add(&delete, LIMITS), Added::Yes);
        assert_eq!(plan.add(&put("b", "3"), LIMITS), Added::Yes);
        assert_eq!(
            plan.into_ops(),
            vec![
                KeyOp::Put {
                    key: "a".into(),
                    value: "2".into()
                },
                KeyOp::Put {
                    key: "b".into(),
                    value: "3".into()
                }
            ]
        );
    }

    #[test]
    fn limits_and_conflicts_end_the_plan() {
        let mut plan = TxnPlan::default();
        for key in ["a", "b", "c"] {
            assert_eq!(plan.add(&put(key, "v"), LIMITS), Added::Yes);
        }
        assert_eq!(plan.add(&put("d", "v"), LIMITS), Added::Full, "max_ops");
        assert_eq!(plan.add(&put("a", "w"), LIMITS), Added::Yes, "no new op");

        let mut plan = TxnPlan::default();
        let prefix = FencedOp {
            shard: Some(0),
            op: KeyOp::DeletePrefix {
                prefix: "g/".into(),
            },
        };
        assert_eq!(plan.add(&put("g/1", "v"), LIMITS), Added::Yes);
        assert_eq!(plan.add(&prefix, LIMITS), Added::Yes);
        assert_eq!(plan.op_count(), 1, "the put under the prefix is dropped");
        assert_eq!(plan.add(&put("g/1", "v"), LIMITS), Added::Full, "conflict");

        let mut plan = TxnPlan::default();
        let big = put("k", &"x".repeat(2000));
        assert_eq!(plan.add(&big, LIMITS), Added::Yes, "alone, it is sent");
        assert_eq!(plan.add(&put("l", "v"), LIMITS), Added::Full, "max_bytes");
    }

    #[test]
    fn compares_are_limited_too() {
        let mut plan = TxnPlan::default();
        let limits = TxnLimits {
            max_ops: 2,
            max_bytes: 1000,
        };
        for shard in 0..2 {
            let mut op = put("same", "v");
            op.shard = Some(shard);
            assert_eq!(plan.add(&op, limits), Added::Yes);
        }
        let mut op = put("same", "v");
        op.shard = Some(2);
        assert_eq!(plan.add(&op, limits), Added::Full);
    }
}
