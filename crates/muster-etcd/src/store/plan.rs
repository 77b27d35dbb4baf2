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
//! (the later wins, as it would have applied last), and a range delete (a group's prefix, the
//! old entries of a partition's history) drops the plan's earlier operations inside that range.
//! Only a put inside a range the same plan deletes (a group deleted and written again) must
//! wait for the next transaction. A history trim never meets its own mutation's entries: its
//! range is cut around them ([`trim_ranges`]), so an offset reset stays one transaction.

use std::collections::{BTreeMap, BTreeSet};

use muster_coordinator::storage::{codec, HistoryTrim, HistoryWrite, Mutation, StoreError};

use crate::keys::{prefix_end, KeyLayout};
use crate::shard::shard_of;

/// One key operation of a prepared batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KeyOp {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        key: Vec<u8>,
    },
    /// Every key from `start` (inclusive) to `end` (exclusive).
    DeleteRange {
        start: Vec<u8>,
        end: Vec<u8>,
    },
}

impl KeyOp {
    fn size(&self) -> usize {
        // Protobuf framing per operation is a handful of bytes; 16 covers it.
        16 + match self {
            KeyOp::Put { key, value } => key.len() + value.len(),
            KeyOp::Delete { key } => key.len(),
            KeyOp::DeleteRange { start, end } => start.len() + end.len(),
        }
    }

    /// Every key under `prefix`.
    fn delete_prefix(prefix: Vec<u8>) -> Self {
        KeyOp::DeleteRange {
            end: prefix_end(&prefix),
            start: prefix,
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
                for prefix in [
                    keys.group_offsets_prefix(shard, &group_id),
                    keys.group_journal_prefix(shard, &group_id),
                    keys.group_history_prefix(shard, &group_id),
                    keys.group_quarantine_prefix(shard, &group_id),
                ] {
                    ops.push(FencedOp {
                        shard: Some(shard),
                        op: KeyOp::delete_prefix(prefix),
                    });
                }
            }
            Mutation::PutHistory {
                group_id,
                entries,
                trim,
            } => {
                let shard = shard_of(&group_id, shards);
                let fenced = |op| FencedOp {
                    shard: Some(shard),
                    op,
                };
                // Trims first, as the `Store` contract applies them.
                for t in &trim {
                    for (from, below) in trim_ranges(t, &entries) {
                        let key = |seq| keys.history(shard, &group_id, &t.topic, t.partition, seq);
                        ops.push(fenced(KeyOp::DeleteRange {
                            start: key(from),
                            end: key(below),
                        }));
                    }
                }
                for write in entries {
                    let key = keys.history(
                        shard,
                        &group_id,
                        &write.topic,
                        write.partition,
                        write.entry.seq,
                    );
                    let value = codec::encode_history(write.entry).map_err(rejected)?;
                    ops.push(fenced(KeyOp::Put { key, value }));
                }
            }
            Mutation::PutQuarantine { group_id, offsets } => {
                let shard = shard_of(&group_id, shards);
                for q in offsets {
                    let key = keys.quarantine(shard, &group_id, &q.write.topic, q.write.partition);
                    let value = codec::encode_quarantine(q.write.committed, q.quarantined_at)
                        .map_err(rejected)?;
                    ops.push(FencedOp {
                        shard: Some(shard),
                        op: KeyOp::Put { key, value },
                    });
                }
            }
            Mutation::DeleteQuarantine {
                group_id,
                partitions,
            } => {
                let shard = shard_of(&group_id, shards);
                for (topic, partition) in partitions {
                    ops.push(FencedOp {
                        shard: Some(shard),
                        op: KeyOp::Delete {
                            key: keys.quarantine(shard, &group_id, &topic, partition),
                        },
                    });
                }
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

/// The seq ranges (`from..below`) a trim deletes: its partition's entries below `below_seq`,
/// less the seqs its own mutation appends there (appended after the trim, they stay). Cutting
/// them out keeps every put of the mutation outside its deleted ranges, which etcd requires of
/// one transaction.
fn trim_ranges(trim: &HistoryTrim, entries: &[HistoryWrite]) -> Vec<(u64, u64)> {
    let kept: BTreeSet<u64> = entries
        .iter()
        .filter(|w| w.topic == trim.topic && w.partition == trim.partition)
        .map(|w| w.entry.seq)
        .filter(|&seq| seq < trim.below_seq)
        .collect();
    let mut ranges = Vec::with_capacity(kept.len() + 1);
    let mut from = 0;
    for seq in kept {
        if from < seq {
            ranges.push((from, seq));
        }
        // `seq < below_seq`, so `seq + 1` cannot overflow.
        from = seq + 1;
    }
    if from < trim.below_seq {
        ranges.push((from, trim.below_seq));
    }
    ranges
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
    /// Range deletes, `start..end`.
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    pub shards: BTreeSet<u32>,
    bytes: usize,
}

impl TxnPlan {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.ranges.is_empty()
    }

    pub fn op_count(&self) -> usize {
        self.keys.len() + self.ranges.len()
    }

    fn in_deleted_range(&self, key: &[u8]) -> bool {
        self.ranges
            .iter()
            .any(|(start, end)| start.as_slice() <= key && key < end.as_slice())
    }

    /// Adds `op` if it fits within `limits` and does not conflict.
    pub fn add(&mut self, op: &FencedOp, limits: TxnLimits) -> Added {
        let new_shard = op.shard.filter(|s| !self.shards.contains(s));
        if new_shard.is_some() && self.shards.len() >= limits.max_ops {
            return Added::Full;
        }
        let grows = match &op.op {
            KeyOp::Put { key, .. } | KeyOp::Delete { key } => !self.keys.contains_key(key),
            KeyOp::DeleteRange { .. } => true,
        };
        if (grows && self.op_count() >= limits.max_ops)
            || (!self.is_empty() && self.bytes + op.op.size() > limits.max_bytes)
        {
            return Added::Full;
        }
        match &op.op {
            KeyOp::Put { key, value } => {
                if self.in_deleted_range(key) {
                    return Added::Full;
                }
                self.keys.insert(key.clone(), Some(value.clone()));
            }
            KeyOp::Delete { key } => {
                if !self.in_deleted_range(key) {
                    self.keys.insert(key.clone(), None);
                }
            }
            KeyOp::DeleteRange { start, end } => {
                // Whatever the plan wrote inside the range is deleted by it anyway.
                self.keys.retain(|key, _| !(start <= key && key < end));
                self.ranges.push((start.clone(), end.clone()));
            }
        }
        if let Some(shard) = new_shard {
            self.shards.insert(shard);
        }
        self.bytes += op.op.size();
        Added::Yes
    }

    /// The plan's operations: puts and single deletes in key order, then range deletes.
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
            self.ranges
                .into_iter()
                .map(|(start, end)| KeyOp::DeleteRange { start, end }),
        );
        ops
    }
}

#[cfg(test)]
mod tests {
    use muster_coordinator::storage::suite::{history, trim};

    use super::{trim_ranges, Added, FencedOp, KeyOp, TxnLimits, TxnPlan};

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
            op: KeyOp::delete_prefix("g/".into()),
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
    fn a_range_delete_drops_what_the_plan_wrote_inside_it() {
        const LIMITS: TxnLimits = TxnLimits {
            max_ops: 10,
            max_bytes: 1000,
        };
        let mut plan = TxnPlan::default();
        let range = FencedOp {
            shard: Some(0),
            op: KeyOp::DeleteRange {
                start: "h/1".into(),
                end: "h/3".into(),
            },
        };
        for key in ["h/0", "h/1", "h/2", "h/3"] {
            assert_eq!(plan.add(&put(key, "v"), LIMITS), Added::Yes);
        }
        assert_eq!(plan.add(&range, LIMITS), Added::Yes);
        assert_eq!(plan.add(&put("h/2", "w"), LIMITS), Added::Full, "inside");
        assert_eq!(
            plan.add(&put("h/3", "w"), LIMITS),
            Added::Yes,
            "end excluded"
        );
        let keys: Vec<_> = plan
            .into_ops()
            .into_iter()
            .map(|op| match op {
                KeyOp::Put { key, .. } | KeyOp::Delete { key } => key,
                KeyOp::DeleteRange { start, .. } => start,
            })
            .collect();
        assert_eq!(keys, [b"h/0".to_vec(), b"h/3".to_vec(), b"h/1".to_vec()]);
    }

    /// A trim's range, cut around the entries its own mutation appends below it; nothing for a
    /// trim that deletes nothing.
    #[test]
    fn a_trim_skips_its_own_mutations_entries() {
        let entries = [
            history("t", 0, 3),
            history("t", 0, 4),
            history("t", 0, 9),
            history("t", 1, 5),
            history("u", 0, 6),
        ];
        assert_eq!(
            trim_ranges(&trim("t", 0, 9), &entries),
            vec![(0, 3), (5, 9)]
        );
        assert_eq!(trim_ranges(&trim("t", 1, 5), &entries), vec![(0, 5)]);
        assert_eq!(trim_ranges(&trim("t", 1, 6), &entries), vec![(0, 5)]);
        assert_eq!(trim_ranges(&trim("t", 0, 0), &entries), vec![]);
        assert_eq!(trim_ranges(&trim("t", 0, 1), &[history("t", 0, 0)]), vec![]);
        assert_eq!(
            trim_ranges(&trim("t", 0, u64::MAX), &[history("t", 0, u64::MAX - 1)]),
            vec![(0, u64::MAX - 1)]
        );
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
