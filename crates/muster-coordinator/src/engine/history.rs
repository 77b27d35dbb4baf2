//! Offset history (protocol §6.24): each partition's last `offset_history_entries` commits,
//! resets and restores, within `offset_history_bytes`, with who wrote them and when; and the
//! OffsetHistory query.
//!
//! An entry gets its sequence number when its write is planned (so writes in flight never
//! share one) and joins the in-memory history once durable, as the offset does. The store
//! keeps the same entries (`Mutation::PutHistory`), keyed by sequence number; what the budget
//! drops is trimmed there in the same write. A partition's history is *complete* while it
//! still holds its first entry (sequence 0): only then does "no entry that old" mean "no offset
//! then" to a reset (`reset.rs`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use muster_protocol::{
    ErrorCode, OffsetHistoryEntry, OffsetHistoryRequest, OffsetHistoryResponse,
    PartitionHistory as WirePartitionHistory, TopicHistory,
};

use super::effects::{Deferred, Writer};
use super::topic_access::may_read;
use super::{Group, Map, Millis, NONE};
use crate::access::Access;
use crate::config::OffsetsConfig;
use crate::storage::{HistoryEntry, HistoryKind, HistoryTrim, HistoryWrite, Mutation};

/// Most entries one OffsetHistory answer holds (protocol §6.24); the rest are counted in
/// `omitted`.
pub const MAX_HISTORY_ANSWER: usize = 10_000;

/// One entry as a group keeps it in memory: [`HistoryEntry`]'s content, 64 bytes instead of
/// ~110 (the writer shared, the metadata a boxed `str`). A group may keep 100 per partition.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) seq: u64,
    pub(super) offset: i64,
    pub(super) at_ms: u64,
    pub(super) metadata: Option<Box<str>>,
    writer: Arc<Writer>,
    generation: i32,
    kind: HistoryKind,
}

impl Entry {
    /// Its durable form.
    fn to_record(&self) -> HistoryEntry {
        HistoryEntry {
            seq: self.seq,
            kind: self.kind,
            offset: self.offset,
            metadata: self.metadata.as_deref().map(str::to_owned),
            at_ms: self.at_ms,
            member_id: Arc::clone(&self.writer.member_id),
            client_id: Arc::clone(&self.writer.client_id),
            client_host: Arc::clone(&self.writer.client_host),
            generation: self.generation,
        }
    }

    /// As [`HistoryEntry::weight`].
    fn weight(&self) -> usize {
        48 + self.metadata.as_ref().map_or(0, |m| m.len())
            + self.writer.member_id.len()
            + self.writer.client_id.len()
            + self.writer.client_host.len()
    }
}

/// One partition's history, oldest first.
#[derive(Debug, Default)]
pub(super) struct PartitionLog {
    pub(super) entries: VecDeque<Entry>,
    /// What `entries` weigh ([`HistoryEntry::weight`]).
    bytes: usize,
    /// The sequence number of the next entry planned.
    next_seq: u64,
    /// The oldest entry not written yet (`offset_history_flush_ms`); `None`: all are.
    unwritten_from: Option<u64>,
}

impl PartitionLog {
    /// The time a new entry at `at` is stamped with: never earlier than the entry before it.
    /// A reset is stamped a millisecond past the latest entry (`reset.rs`), and a commit in
    /// that same millisecond must not read as older than the reset it follows.
    fn stamp(&self, at: Millis) -> Millis {
        self.entries.back().map_or(at, |e| e.at_ms.max(at))
    }

    /// Whether the history reaches back to the partition's first commit.
    pub(super) fn complete(&self) -> bool {
        self.entries.front().is_some_and(|e| e.seq == 0)
    }

    /// The sequence number below which entries are dropped once `adding` joins, under the
    /// count and byte budgets (`None`: nothing to drop).
    fn trim_below(&self, adding: usize, config: &OffsetsConfig) -> Option<u64> {
        let max = config.history_entries as usize;
        let mut count = self.entries.len() + 1;
        let mut bytes = self.bytes + adding;
        let mut below = None;
        for e in &self.entries {
            if count <= max && bytes <= config.history_bytes {
                break;
            }
            count -= 1;
            bytes -= e.weight();
            below = Some(e.seq + 1);
        }
        below
    }

    /// Appends a durable entry and drops what the budgets no longer hold.
    fn push(&mut self, entry: Entry, config: &OffsetsConfig) {
        if let Some(below) = self.trim_below(entry.weight(), config) {
            while self.entries.front().is_some_and(|e| e.seq < below) {
                if let Some(e) = self.entries.pop_front() {
                    self.bytes -= e.weight();
                }
            }
        }
        self.next_seq = self.next_seq.max(entry.seq + 1);
        self.bytes += entry.weight();
        // Entries of writes in flight at once can become durable out of order only if the
        // store reordered them, which it does not; keep the order by sequence regardless.
        // Entries come in order (sequence numbers rise): the search is for the rare other case.
        let at = if self.entries.back().is_none_or(|e| e.seq < entry.seq) {
            self.entries.len()
        } else {
            self.entries.partition_point(|e| e.seq < entry.seq)
        };
        if self.entries.len() == self.entries.capacity() {
            // Grow one at a time: a VecDeque's first allocation holds four, and most
            // partitions of most groups keep few entries (the cap is a ceiling, not a size).
            self.entries.reserve_exact(1);
        }
        self.entries.insert(at, entry);
    }
}

/// A group's histories: topic → partition → log.
pub(super) type Histories = Map<Box<str>, Map<i32, PartitionLog>>;

/// The partition's log, made empty if it has none (the topic's name is allocated only then).
fn log_mut<'a>(history: &'a mut Histories, topic: &str, partition: i32) -> &'a mut PartitionLog {
    if !history.contains_key(topic) {
        history.insert(Box::from(topic), Map::default());
    }
    history
        .get_mut(topic)
        .expect("inserted above")
        .entry(partition)
        .or_default()
}

/// Most partitions a group holds history back for before writing it at once: a bound on one
/// write's size.
const MAX_UNWRITTEN: usize = 4_096;

/// Partitions whose newest entries are in memory but not written yet
/// (`offset_history_flush_ms`): one write carries many commits' entries, and an entry the
/// history drops before the write (more commits than it keeps within one interval) is never
/// written at all. Writing them with each commit cost 75–83 % of commit throughput with one
/// store row per entry (store format 5; 12 % with format 6's runs, docs/benchmarks.md).
#[derive(Debug, Default)]
pub(super) struct Unwritten {
    partitions: Vec<(Arc<str>, i32)>,
    /// When they must be written at the latest.
    due: Option<Millis>,
}

/// Who writes an entry: shared ids, one allocation per member (or request).
#[derive(Debug, Clone)]
pub(super) struct Author {
    pub(super) member_id: Arc<str>,
    pub(super) client_id: Arc<str>,
    pub(super) client_host: Arc<str>,
    pub(super) generation: i32,
}

impl<R> Group<R> {
    /// Plans one history entry per written partition: `(topic, partition, offset, metadata)`
    /// at `at` by `author`. Returns the mutation's entries and trims (empty when history is
    /// off).
    pub(super) fn plan_history<'a>(
        &mut self,
        writes: impl Iterator<Item = (&'a Arc<str>, i32, i64, Option<&'a String>)>,
        kind: HistoryKind,
        at: u64,
        author: &Author,
    ) -> (Vec<HistoryWrite>, Vec<HistoryTrim>) {
        let config = &self.config.offsets;
        if config.history_entries == 0 {
            return (Vec::new(), Vec::new());
        }
        let mut entries = Vec::new();
        let mut trims = Vec::new();
        for (topic, partition, offset, metadata) in writes {
            let log = log_mut(&mut self.history, topic, partition);
            let entry = HistoryEntry {
                seq: log.next_seq,
                kind,
                offset,
                metadata: metadata.cloned(),
                at_ms: log.stamp(at),
                member_id: Arc::clone(&author.member_id),
                client_id: Arc::clone(&author.client_id),
                client_host: Arc::clone(&author.client_host),
                generation: author.generation,
            };
            log.next_seq += 1;
            if let Some(below_seq) = log.trim_below(entry.weight(), config) {
                trims.push(HistoryTrim {
                    topic: Arc::clone(topic),
                    partition,
                    below_seq,
                });
            }
            entries.push(HistoryWrite {
                topic: Arc::clone(topic),
                partition,
                entry,
            });
        }
        (entries, trims)
    }

    /// What a commit at `at` by `author` needs to record its history once durable, to be
    /// written by `due` at the latest.
    pub(super) fn deferred(author: &Author, at: Millis, due: Millis) -> Deferred {
        Deferred {
            writer: Arc::new(Writer {
                member_id: Arc::clone(&author.member_id),
                client_id: Arc::clone(&author.client_id),
                client_host: Arc::clone(&author.client_host),
            }),
            generation: author.generation,
            at,
            due,
        }
    }

    /// A durable commit's entries join the in-memory history now and the store's with the
    /// next flush (at `deferred.due` at the latest, or at once past [`MAX_UNWRITTEN`]).
    pub(super) fn record_deferred(
        &mut self,
        offsets: &[crate::storage::OffsetWrite],
        deferred: Deferred,
        out: &mut super::Effects<R>,
    ) {
        let config = &self.config.offsets;
        for w in offsets {
            let log = log_mut(&mut self.history, &w.topic, w.partition);
            let seq = log.next_seq;
            log.next_seq += 1;
            let at = log.stamp(deferred.at);
            log.push(
                Entry {
                    seq,
                    offset: w.committed.offset,
                    at_ms: at,
                    metadata: w.committed.metadata.as_deref().map(Box::from),
                    writer: Arc::clone(&deferred.writer),
                    generation: deferred.generation,
                    kind: HistoryKind::Commit,
                },
                config,
            );
            if log.unwritten_from.is_none() {
                log.unwritten_from = Some(seq);
                self.history_unwritten
                    .partitions
                    .push((Arc::clone(&w.topic), w.partition));
            }
        }
        if self.history_unwritten.due.is_none() {
            self.history_unwritten.due = Some(deferred.due);
            self.note_deadline(deferred.due);
        }
        self.flush_history(None, out);
    }

    /// When the held-back entries must be written (for [`Group::next_deadline`]).
    pub(super) fn history_due(&self) -> Option<Millis> {
        self.history_unwritten.due
    }

    /// The held-back entries as one `PutHistory`, with the trims of the partitions they touch
    /// (below the oldest entry memory holds). `None`: nothing held back.
    pub(super) fn take_unwritten_history(&mut self) -> Option<Mutation> {
        let unwritten = std::mem::take(&mut self.history_unwritten);
        if unwritten.partitions.is_empty() {
            return None;
        }
        let mut entries = Vec::new();
        let mut trim = Vec::new();
        for (topic, partition) in unwritten.partitions {
            let Some(log) = self
                .history
                .get_mut(&*topic)
                .and_then(|logs| logs.get_mut(&partition))
            else {
                continue;
            };
            let Some(from) = log.unwritten_from.take() else {
                continue;
            };
            if let Some(oldest) = log.entries.front().map(|e| e.seq).filter(|&s| s > 0) {
                trim.push(HistoryTrim {
                    topic: Arc::clone(&topic),
                    partition,
                    below_seq: oldest,
                });
            }
            for e in log.entries.iter().filter(|e| e.seq >= from) {
                entries.push(HistoryWrite {
                    topic: Arc::clone(&topic),
                    partition,
                    entry: e.to_record(),
                });
            }
        }
        Some(Mutation::PutHistory {
            group_id: self.group_id.to_string(),
            entries,
            trim,
        })
    }

    /// Writes every held-back entry now, whether due or not: the group stops being served here
    /// (a shutdown, or its shard handed to another node), and what memory holds would be lost.
    pub fn write_held_history(&mut self) -> super::Effects<R> {
        let mut out = super::Effects::default();
        if let Some(write) = self.take_unwritten_history() {
            out.writes.push(super::Write::BestEffort(vec![write]));
        }
        out
    }

    /// Writes the held-back entries if they are due at `now`, or if there are too many.
    pub(super) fn flush_history(&mut self, now: Option<Millis>, out: &mut super::Effects<R>) {
        let unwritten = &self.history_unwritten;
        let due = unwritten
            .due
            .is_some_and(|d| now.is_some_and(|now| d <= now));
        if due || unwritten.partitions.len() >= MAX_UNWRITTEN {
            if let Some(write) = self.take_unwritten_history() {
                out.writes.push(super::Write::BestEffort(vec![write]));
            }
        }
    }

    /// Entries whose write failed give their sequence numbers back, when no entry planned
    /// since took a later one: otherwise a partition whose first write failed would start at
    /// sequence 1 and its history would never be complete.
    pub(super) fn unplan_history(&mut self, entries: &[HistoryWrite]) {
        for w in entries.iter().rev() {
            let log = self
                .history
                .get_mut(&*w.topic)
                .and_then(|logs| logs.get_mut(&w.partition));
            if let Some(log) = log {
                if log.next_seq == w.entry.seq + 1 {
                    log.next_seq = w.entry.seq;
                }
            }
        }
    }

    /// Durable entries join the in-memory history. Consecutive entries by the same writer
    /// (one commit's partitions, or a restart's entries of one member) share one [`Writer`].
    pub(super) fn apply_history(&mut self, entries: Vec<HistoryWrite>) {
        let mut last: Option<Arc<Writer>> = None;
        for w in entries {
            let e = w.entry;
            let writer = match &last {
                Some(shared)
                    if *shared.member_id == *e.member_id
                        && *shared.client_id == *e.client_id
                        && *shared.client_host == *e.client_host =>
                {
                    Arc::clone(shared)
                }
                _ => {
                    let made = Arc::new(Writer {
                        member_id: e.member_id,
                        client_id: e.client_id,
                        client_host: e.client_host,
                    });
                    last = Some(Arc::clone(&made));
                    made
                }
            };
            let entry = Entry {
                seq: e.seq,
                offset: e.offset,
                at_ms: e.at_ms,
                metadata: e.metadata.map(String::into_boxed_str),
                writer,
                generation: e.generation,
                kind: e.kind,
            };
            log_mut(&mut self.history, &w.topic, w.partition).push(entry, &self.config.offsets);
        }
    }

    /// Puts back what a restored group's store holds beside its record and offsets (see
    /// [`Group::restore`]): its offset history and its expiry quarantine. A partition with an
    /// offset but no history (committed before history was kept, or with history off) starts
    /// at sequence 1, so that its history never claims to be complete.
    pub fn restore_offset_records(
        &mut self,
        history: Vec<HistoryWrite>,
        quarantine: Vec<crate::storage::QuarantinedOffset>,
    ) {
        self.quarantine = quarantine;
        if let Some(at) = self.quarantine_deadline() {
            self.note_deadline(at);
        }
        self.apply_history(history);
        for (topic, parts) in &self.offsets {
            for p in parts.keys() {
                let log = log_mut(&mut self.history, topic, *p);
                if log.entries.is_empty() {
                    log.next_seq = log.next_seq.max(1);
                }
            }
        }
    }

    /// The partition's log, if it has one.
    pub(super) fn log(&self, topic: &str, partition: i32) -> Option<&PartitionLog> {
        self.history.get(topic).and_then(|p| p.get(&partition))
    }

    /// OffsetHistory (protocol §6.24): a query, it changes nothing.
    pub fn offset_history(
        &self,
        req: &OffsetHistoryRequest,
        access: &Access,
    ) -> OffsetHistoryResponse {
        let mut topics: BTreeMap<&str, Vec<WirePartitionHistory>> = BTreeMap::new();
        let mut room = MAX_HISTORY_ANSWER;
        let mut omitted: u64 = 0;
        let wanted_topic = req.topic.as_deref();
        let mut names: Vec<&str> = self
            .history
            .iter()
            .filter(|(t, logs)| {
                wanted_topic.is_none_or(|w| w == &***t)
                    && logs.values().any(|l| !l.entries.is_empty())
            })
            .map(|(t, _)| &**t)
            .collect();
        names.sort_unstable();
        for topic in names {
            let readable = may_read(access, topic);
            let Some(logs) = self.history.get(topic) else {
                continue;
            };
            let mut partitions: Vec<(&i32, &PartitionLog)> = logs
                .iter()
                .filter(|(p, l)| req.partition.is_none_or(|w| w == **p) && !l.entries.is_empty())
                .collect();
            if partitions.is_empty() {
                // The topic has history, but not of the partition asked for.
                continue;
            }
            partitions.sort_unstable_by_key(|(p, _)| **p);
            let shown = topics.entry(topic).or_default();
            for (&partition, log) in partitions {
                if !readable {
                    shown.push(WirePartitionHistory {
                        partition,
                        error_code: ErrorCode::TopicAuthorizationFailed.code(),
                        entries: Vec::new(),
                    });
                    continue;
                }
                let limit = match req.limit {
                    0 => usize::MAX,
                    n => n as usize,
                };
                let wanted = log.entries.len().min(limit);
                let taken = wanted.min(room);
                omitted += (wanted - taken) as u64;
                room -= taken;
                shown.push(WirePartitionHistory {
                    partition,
                    error_code: NONE,
                    entries: log
                        .entries
                        .iter()
                        .rev()
                        .take(taken)
                        .map(wire_entry)
                        .collect(),
                });
            }
        }
        OffsetHistoryResponse {
            error_code: NONE,
            topics: topics
                .into_iter()
                .map(|(topic, partitions)| TopicHistory {
                    topic: topic.to_owned(),
                    partitions,
                })
                .collect(),
            omitted: u32::try_from(omitted).unwrap_or(u32::MAX),
        }
    }
}

/// Who a reset or restore is recorded as: the connection's principal, or nobody (an empty
/// name) without an auth file (protocol §6.24).
pub(super) fn principal_of(access: &Access) -> Arc<str> {
    if access.is_open() {
        Arc::from("")
    } else {
        Arc::from(access.name())
    }
}

fn wire_entry(e: &Entry) -> OffsetHistoryEntry {
    OffsetHistoryEntry {
        seq: e.seq,
        kind: e.kind.name().to_owned(),
        offset: e.offset,
        metadata: e.metadata.as_deref().map(str::to_owned),
        committed_at_ms: e.at_ms,
        member_id: e.writer.member_id.to_string(),
        client_id: e.writer.client_id.to_string(),
        client_host: e.writer.client_host.to_string(),
        generation_id: e.generation,
    }
}
