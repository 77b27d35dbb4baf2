//! The write side of [`RedbStore`](super::RedbStore): batches prepared (encoded) on the
//! caller's thread, and the one writer thread that group-commits them.
//!
//! Each round the writer takes everything waiting on its channel, applies it in submission
//! order in one redb write transaction, commits (one fsync), and only then completes every
//! batch's [`DurableSender`]. A commit costs a few milliseconds of fsync whatever it holds, so
//! throughput comes from how much each round carries, and a caller's latency is at most the
//! round in progress plus its own.
//!
//! A failed round (a full or failing disk) answers its batches with the error, marks the store
//! unhealthy and hands over to `recovery`, which reopens the file; the rounds resume once it
//! has.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use redb::Database;
use tracing::{trace, warn};

use super::codec::{self, CodecError};
use super::recovery::{self, Backoff};
use super::{
    runtime_error, Command, Shared, GROUPS, HISTORY, JOURNAL, OFFSETS, QUARANTINE, TOPICS,
};
use crate::storage::{DurableSender, Mutation, StoreError};

/// One mutation, encoded and ready to write.
pub(super) enum Op {
    PutGroup {
        group_id: String,
        value: Vec<u8>,
    },
    DeleteGroup {
        group_id: String,
    },
    PutOffsets {
        group_id: String,
        /// (topic, partition, encoded offset)
        offsets: Vec<(String, i32, Vec<u8>)>,
    },
    DeleteOffsets {
        group_id: String,
        partitions: Vec<(String, i32)>,
    },
    PutTopic {
        topic: String,
        partitions: i32,
    },
    PutRebalances {
        group_id: String,
        /// (generation, encoded entry)
        entries: Vec<(i32, Vec<u8>)>,
        dropped: Vec<i32>,
    },
    PutHistory {
        group_id: String,
        /// One per partition the mutation writes.
        runs: Vec<HistoryRun>,
        /// (topic, partition, below_seq): applied before `runs`.
        trim: Vec<(String, i32, u64)>,
    },
    PutQuarantine {
        group_id: String,
        /// (topic, partition, encoded offset and quarantine time)
        offsets: Vec<(String, i32, Vec<u8>)>,
    },
    DeleteQuarantine {
        group_id: String,
        partitions: Vec<(String, i32)>,
    },
}

/// One encoded run of a partition's history: (topic, partition, first seq, value).
pub(super) type HistoryRun = (String, i32, u64, Vec<u8>);

/// What the writer has done since the store opened (see [`RedbStore::stats`]).
///
/// [`RedbStore::stats`]: super::RedbStore::stats
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Transactions committed (one fsync each).
    pub rounds: u64,
    /// Batches made durable by those rounds.
    pub batches: u64,
    /// Time spent writing and committing those rounds.
    pub busy: Duration,
}

/// The writer's running totals, shared with the store.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    rounds: AtomicU64,
    batches: AtomicU64,
    busy_us: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> WriterStats {
        WriterStats {
            rounds: self.rounds.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            busy: Duration::from_micros(self.busy_us.load(Ordering::Relaxed)),
        }
    }
}

/// Encodes a batch. Runs on the caller's thread, so the writer only writes; a batch that
/// cannot be encoded fails alone, before it is queued.
pub(super) fn prepare(batch: Vec<Mutation>) -> Result<Vec<Op>, StoreError> {
    let rejected = |e: CodecError| StoreError::Rejected(e.to_string());
    batch
        .into_iter()
        .map(|mutation| {
            Ok(match mutation {
                Mutation::PutGroup(record) => {
                    let (group_id, value) = codec::encode_group(record).map_err(rejected)?;
                    Op::PutGroup { group_id, value }
                }
                Mutation::DeleteGroup { group_id } => Op::DeleteGroup { group_id },
                Mutation::PutOffsets { group_id, offsets } => Op::PutOffsets {
                    group_id,
                    offsets: offsets
                        .into_iter()
                        .map(|w| {
                            let value = codec::encode_offset(w.committed).map_err(rejected)?;
                            Ok((w.topic.to_string(), w.partition, value))
                        })
                        .collect::<Result<_, StoreError>>()?,
                },
                Mutation::DeleteOffsets {
                    group_id,
                    partitions,
                } => Op::DeleteOffsets {
                    group_id,
                    partitions,
                },
                Mutation::PutHistory {
                    group_id,
                    entries,
                    trim,
                } => Op::PutHistory {
                    group_id,
                    runs: history_runs(entries).map_err(rejected)?,
                    trim: trim
                        .into_iter()
                        .map(|t| (t.topic.to_string(), t.partition, t.below_seq))
                        .collect(),
                },
                Mutation::PutQuarantine { group_id, offsets } => Op::PutQuarantine {
                    group_id,
                    offsets: offsets
                        .into_iter()
                        .map(|q| {
                            let value =
                                codec::encode_quarantine(q.write.committed, q.quarantined_at)
                                    .map_err(rejected)?;
                            Ok((q.write.topic.to_string(), q.write.partition, value))
                        })
                        .collect::<Result<_, StoreError>>()?,
                },
                Mutation::DeleteQuarantine {
                    group_id,
                    partitions,
                } => Op::DeleteQuarantine {
                    group_id,
                    partitions,
                },
                Mutation::PutTopic(topic) => Op::PutTopic {
                    topic: topic.topic,
                    partitions: topic.partitions,
                },
                Mutation::PutRebalances {
                    group_id,
                    entries,
                    dropped,
                } => Op::PutRebalances {
                    group_id,
                    entries: entries
                        .into_iter()
                        .map(|e| {
                            let generation = e.generation_id;
                            Ok((generation, codec::encode_rebalance(e).map_err(rejected)?))
                        })
                        .collect::<Result<_, StoreError>>()?,
                    dropped,
                },
            })
        })
        .collect()
}

/// The writer thread's body: rounds of drain, write, commit, complete, until told to stop
/// (or until every sender is gone).
pub(super) fn run(shared: &Shared, commands: Receiver<Command>) {
    let counters = &shared.counters;
    let path = &shared.path;
    let mut backoff = Backoff::default();
    let mut round: Vec<(Vec<Op>, DurableSender)> = Vec::new();
    let mut stop = false;
    while !stop {
        // Block for the first command of a round, then take whatever else is already queued.
        let Ok(first) = commands.recv() else { break };
        let mut next = Some(first);
        while let Some(command) = next {
            match command {
                Command::Apply { ops, done } => round.push((ops, done)),
                Command::Stop => stop = true,
            }
            next = commands.try_recv().ok();
        }
        if round.is_empty() {
            continue;
        }
        let started = Instant::now();
        let result = shared
            .injected()
            .and_then(|()| shared.database())
            .and_then(|db| commit(&db, round.iter().map(|(ops, _)| ops.as_slice())));
        let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let batches = round.len();
        match &result {
            Ok(()) => {
                counters.rounds.fetch_add(1, Ordering::Relaxed);
                counters
                    .batches
                    .fetch_add(batches as u64, Ordering::Relaxed);
                counters.busy_us.fetch_add(elapsed_us, Ordering::Relaxed);
                crate::metrics::storage_sync(elapsed_us as f64 / 1e6);
                trace!(batches, elapsed_us, "store round committed");
                backoff.reset();
            }
            Err(error) => {
                crate::metrics::storage_error();
                warn!(
                    batches,
                    path = %path.display(),
                    %error,
                    "store round failed; its batches are answered with the error"
                );
            }
        }
        // A batch the store refused as given (too large) leaves the database intact; any other
        // failure may have poisoned it: reopen before writing again. Unhealthy before the
        // failures are told, so that whoever sees one also sees the store failing.
        let poisoned = matches!(&result, Err(e) if !matches!(e, StoreError::Rejected(_)));
        if poisoned {
            shared.set_healthy(false);
        }
        for (_, done) in round.drain(..) {
            done.complete(result.clone());
        }
        if poisoned && !stop && !recovery::recover(shared, &commands, &mut backoff) {
            break;
        }
    }
    trace!(path = %path.display(), "store writer stopped");
}

/// Applies the batches, in order, in one write transaction and commits it (fsync).
fn commit<'a>(db: &Database, batches: impl Iterator<Item = &'a [Op]>) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(runtime_error)?;
    {
        let mut groups = txn.open_table(GROUPS).map_err(runtime_error)?;
        let mut offsets = txn.open_table(OFFSETS).map_err(runtime_error)?;
        let mut topics = txn.open_table(TOPICS).map_err(runtime_error)?;
        let mut journal = txn.open_table(JOURNAL).map_err(runtime_error)?;
        let mut history = txn.open_table(HISTORY).map_err(runtime_error)?;
        let mut quarantine = txn.open_table(QUARANTINE).map_err(runtime_error)?;
        for op in batches.flatten() {
            match op {
                Op::PutGroup { group_id, value } => {
                    groups
                        .insert(group_id.as_str(), value.as_slice())
                        .map_err(runtime_error)?;
                }
                Op::DeleteGroup { group_id } => {
                    groups.remove(group_id.as_str()).map_err(runtime_error)?;
                    // Every key of this group, and no other: the smallest group id after
                    // `group_id` is `group_id` + NUL ("g2" sorts after "g\0").
                    let after = format!("{group_id}\0");
                    offsets
                        .retain_in(
                            (group_id.as_str(), "", i32::MIN)..(after.as_str(), "", i32::MIN),
                            |_, _| false,
                        )
                        .map_err(runtime_error)?;
                    journal
                        .retain_in(
                            (group_id.as_str(), i32::MIN)..(after.as_str(), i32::MIN),
                            |_, _| false,
                        )
                        .map_err(runtime_error)?;
                    history
                        .retain_in(
                            (group_id.as_str(), "", i32::MIN, 0)..(after.as_str(), "", i32::MIN, 0),
                            |_, _| false,
                        )
                        .map_err(runtime_error)?;
                    quarantine
                        .retain_in(
                            (group_id.as_str(), "", i32::MIN)..(after.as_str(), "", i32::MIN),
                            |_, _| false,
                        )
                        .map_err(runtime_error)?;
                }
                Op::PutOffsets {
                    group_id,
                    offsets: writes,
                } => {
                    for (topic, partition, value) in writes {
                        offsets
                            .insert(
                                (group_id.as_str(), topic.as_str(), *partition),
                                value.as_slice(),
                            )
                            .map_err(runtime_error)?;
                    }
                }
                Op::DeleteOffsets {
                    group_id,
                    partitions,
                } => {
                    for (topic, partition) in partitions {
                        offsets
                            .remove((group_id.as_str(), topic.as_str(), *partition))
                            .map_err(runtime_error)?;
                    }
                }
                Op::PutTopic { topic, partitions } => {
                    topics
                        .insert(topic.as_str(), *partitions)
                        .map_err(runtime_error)?;
                }
                Op::PutRebalances {
                    group_id,
                    entries,
                    dropped,
                } => {
                    for generation in dropped {
                        journal
                            .remove((group_id.as_str(), *generation))
                            .map_err(runtime_error)?;
                    }
                    for (generation, value) in entries {
                        journal
                            .insert((group_id.as_str(), *generation), value.as_slice())
                            .map_err(runtime_error)?;
                    }
                }
                Op::PutHistory {
                    group_id,
                    runs,
                    trim,
                } => {
                    let group = group_id.as_str();
                    // Trims first: an entry of this same mutation below a trim stays.
                    for (topic, partition, below_seq) in trim {
                        trim_history(&mut history, group, topic, *partition, *below_seq)?;
                    }
                    for (topic, partition, first_seq, value) in runs {
                        history
                            .insert(
                                (group, topic.as_str(), *partition, *first_seq),
                                value.as_slice(),
                            )
                            .map_err(runtime_error)?;
                    }
                }
                Op::PutQuarantine {
                    group_id,
                    offsets: writes,
                } => {
                    for (topic, partition, value) in writes {
                        quarantine
                            .insert(
                                (group_id.as_str(), topic.as_str(), *partition),
                                value.as_slice(),
                            )
                            .map_err(runtime_error)?;
                    }
                }
                Op::DeleteQuarantine {
                    group_id,
                    partitions,
                } => {
                    for (topic, partition) in partitions {
                        quarantine
                            .remove((group_id.as_str(), topic.as_str(), *partition))
                            .map_err(runtime_error)?;
                    }
                }
            }
        }
    }
    txn.commit().map_err(runtime_error)
}

/// A `PutHistory`'s entries as runs (store format 6): one per partition, its entries by rising
/// sequence number. An entry given twice keeps its last copy, as one row per entry did.
fn history_runs(
    mut entries: Vec<crate::storage::HistoryWrite>,
) -> Result<Vec<HistoryRun>, CodecError> {
    // Stable: of two copies of one entry, the later stays the later.
    entries.sort_by(|a, b| {
        (&*a.topic, a.partition, a.entry.seq).cmp(&(&*b.topic, b.partition, b.entry.seq))
    });
    let mut runs = Vec::new();
    let mut run: Vec<crate::storage::HistoryEntry> = Vec::new();
    let mut entries = entries.into_iter().peekable();
    while let Some(w) = entries.next() {
        let next_same = entries
            .peek()
            .map(|n| (&*n.topic, n.partition, n.entry.seq));
        if next_same == Some((&*w.topic, w.partition, w.entry.seq)) {
            continue;
        }
        let ends = next_same.is_none_or(|(t, p, _)| (t, p) != (&*w.topic, w.partition));
        run.push(w.entry);
        if ends {
            let (first_seq, value) = codec::encode_history_run(&run)?;
            runs.push((w.topic.to_string(), w.partition, first_seq, value));
            run.clear();
        }
    }
    Ok(runs)
}

/// Drops `topic`/`partition`'s history entries below `below_seq`: the runs that end below it
/// are deleted without being decoded; a run that straddles it is written again with what it
/// keeps. A run whose value cannot be read is left for the next load to report.
fn trim_history(
    history: &mut redb::Table<'_, (&str, &str, i32, u64), &[u8]>,
    group: &str,
    topic: &str,
    partition: i32,
    below_seq: u64,
) -> Result<(), StoreError> {
    let mut kept = Vec::new();
    history
        .retain_in(
            (group, topic, partition, 0)..(group, topic, partition, below_seq),
            |(_, _, _, first_seq), value| match codec::history_run_last_seq(value) {
                Some(last) if last < below_seq => false,
                Some(_) => match codec::decode_history_run(first_seq, value) {
                    Ok(mut entries) => {
                        entries.retain(|e| e.seq >= below_seq);
                        kept.push(entries);
                        false
                    }
                    Err(_) => true,
                },
                None => true,
            },
        )
        .map_err(runtime_error)?;
    for entries in kept {
        let (first_seq, value) =
            codec::encode_history_run(&entries).map_err(|e| StoreError::Rejected(e.to_string()))?;
        history
            .insert((group, topic, partition, first_seq), value.as_slice())
            .map_err(runtime_error)?;
    }
    Ok(())
}
