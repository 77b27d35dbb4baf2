//! Storage: what the coordinator makes durable (group metadata, committed offsets with their
//! history and expiry quarantine, rebalance journals, the topic catalog) and the [`Store`] trait any backend implements. The in-memory backend
//! ([`MemoryStore`]) serves tests; the durable one ([`RedbStore`]) keeps everything in one
//! redb file under the data directory and group-commits writes.
//!
//! Writes are batches of [`Mutation`]s applied atomically and in submission order; the
//! returned [`Durable`] resolves once the batch is on stable storage. Callers answer clients
//! only after that (protocol §6.13: a NONE OffsetCommit answer means the offset survives a crash).
//!
//! A failing disk (ENOSPC, EIO) fails exactly the batches that were being written, with an
//! error; the store then reports itself unhealthy ([`Store::healthy`]: `/readyz` and the
//! `muster_storage_healthy` gauge follow it), refuses new batches at once
//! ([`StoreError::Unavailable`], so nothing queues without bound) and recovers by itself once a
//! write succeeds again. Callers keep in-memory state no further ahead than what is durable:
//! a group whose record failed to write reloads it ([`Store::load_group`]).

mod memory;
mod parking;
pub mod records;
mod redb_store;
mod shared;
#[cfg(any(test, feature = "store-suite"))]
pub mod suite;

/// The value encoding of group records, offsets, journal entries, offset history entries and
/// quarantined offsets (redb store format version 5), shared with other backends so that every
/// store holds the same bytes for the same record.
/// [`decode_group_or_earlier`](codec::decode_group_or_earlier) also reads the group values of
/// formats 2, 3 and 4, for a backend that keeps no format version of its own.
pub mod codec {
    pub use super::redb_store::codec::{
        decode_group, decode_group_or_earlier, decode_history, decode_offset, decode_quarantine,
        decode_rebalance, encode_group, encode_history, encode_offset, encode_quarantine,
        encode_rebalance, CodecError,
    };
    #[cfg(feature = "store-suite")]
    pub use super::redb_store::codec::{encode_group_v2, encode_group_v3};
}

pub use memory::MemoryStore;
pub use parking::{is_data_only, summarise, ParkedSummary, ParkingLoad};
pub use records::{
    ClassicMemberRecord, CommittedOffset, ConsumerGroupRecord, ConsumerMemberRecord, GroupRecord,
    HistoryEntry, HistoryKind, HistoryTrim, HistoryWrite, MemberRecord, OffsetWrite,
    OwnershipRecord, QuarantinedOffset, RebalanceRecord,
};
pub use redb_store::{RedbStore, WriterStats};
pub use shared::{TopicChange, TopicsWrite, TopicsWritten};

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

use muster_protocol::TopicInfo;
use tokio::sync::oneshot;

/// One change to durable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// Replace a group's metadata.
    PutGroup(GroupRecord),
    /// Remove a group's metadata, all its offsets, its offset history and its quarantine.
    DeleteGroup { group_id: String },
    /// Upsert committed offsets of a group.
    PutOffsets {
        group_id: String,
        offsets: Vec<OffsetWrite>,
    },
    /// Remove some offsets of a group (retention).
    DeleteOffsets {
        group_id: String,
        partitions: Vec<(String, i32)>,
    },
    /// Append entries to partitions' offset histories (each keyed by group, topic, partition
    /// and `seq`) and drop the entries `trim` names (the history keeps the last
    /// `offset_history_entries`, within `offset_history_bytes`).
    PutHistory {
        group_id: String,
        entries: Vec<HistoryWrite>,
        trim: Vec<HistoryTrim>,
    },
    /// Put offsets past retention in the expiry quarantine (upsert by partition).
    PutQuarantine {
        group_id: String,
        offsets: Vec<QuarantinedOffset>,
    },
    /// Remove partitions from the expiry quarantine (restored, or dropped after the grace
    /// period).
    DeleteQuarantine {
        group_id: String,
        partitions: Vec<(String, i32)>,
    },
    /// Create a topic or change its partition count.
    PutTopic(TopicInfo),
    /// Upsert entries of a group's rebalance journal (each keyed by the generation it
    /// reached) and delete the entries of the `dropped` generations (the journal keeps the
    /// last `journal_size`). Deleting the group deletes its journal.
    PutRebalances {
        group_id: String,
        entries: Vec<RebalanceRecord>,
        dropped: Vec<i32>,
    },
}

/// Everything a store holds, as loaded at startup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredState {
    pub groups: Vec<GroupRecord>,
    /// Offsets by group id (groups may have offsets and no metadata: simple commits).
    pub offsets: Vec<(String, Vec<OffsetWrite>)>,
    pub topics: Vec<TopicInfo>,
    /// Rebalance journals by group id, each sorted by generation (oldest first).
    pub journals: Vec<(String, Vec<RebalanceRecord>)>,
    /// Offset histories by group id, each sorted by topic, partition, then `seq`.
    pub history: Vec<(String, Vec<HistoryWrite>)>,
    /// Expiry quarantines by group id.
    pub quarantine: Vec<(String, Vec<QuarantinedOffset>)>,
}

/// A storage failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("storage I/O failed: {0}")]
    Io(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("the store has shut down")]
    Closed,
    /// Another process (or another handle in this one) holds the store's file lock.
    #[error("another musterd is using {}; stop it or choose another --data-dir", path.display())]
    Locked { path: PathBuf },
    /// The store's directory or file cannot be created, opened, read or written.
    #[error(
        "cannot open the store at {}: {reason}; check that musterd may read and write it, \
         or choose another --data-dir",
        path.display()
    )]
    Unreadable { path: PathBuf, reason: String },
    /// The file is not a Muster store, or its contents fail their checks. Never reset silently.
    #[error(
        "data in {} is corrupt beyond recovery ({reason}): restore it from a backup or move it \
         aside to start empty",
        path.display()
    )]
    CorruptFile { path: PathBuf, reason: String },
    /// The file was written in a store format this build does not read.
    #[error(
        "{} holds store format version {found}, but this musterd reads only version \
         {supported}: run a musterd release that reads version {found}, or restore a backup",
        path.display()
    )]
    UnsupportedFormat {
        path: PathBuf,
        found: u64,
        supported: u64,
    },
    /// A batch could not be written as given (e.g. a record too large to encode); nothing of
    /// it was applied.
    #[error("the store refused a write: {0}")]
    Rejected(String),
    /// The store is recovering from a failed write (a full or failing disk): nothing is
    /// written until it has reopened its file and a probe write has succeeded.
    #[error("storage is failing and recovering; nothing can be written now: {0}")]
    Unavailable(String),
    /// Cluster mode: another node took the shard over (the write's condition on this node's
    /// ownership failed); nothing of the batch was applied by that transaction, and this node
    /// must drop the shard's groups.
    #[error("shard {shard} was taken over by another node; the write was refused (fenced)")]
    Fenced { shard: u32 },
    /// Cluster mode: the write is for a shard this node does not own (never granted, or
    /// released); nothing of the batch was sent.
    #[error("shard {shard} is not owned by this node; nothing was written")]
    NotOwner { shard: u32 },
    /// Cluster mode: the principal already holds its `max_groups` groups across the cluster;
    /// the new group was not charged (nor created).
    #[error(
        "principal {principal} holds {held} groups across the cluster, its max_groups is {max}"
    )]
    QuotaExceeded {
        principal: String,
        held: u64,
        max: u32,
    },
}

/// One group as stored: its record (if it ever had one written) and its offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredGroup {
    pub record: Option<GroupRecord>,
    pub offsets: Vec<OffsetWrite>,
    /// Its rebalance journal, oldest first.
    pub journal: Vec<RebalanceRecord>,
    /// Its offset history, sorted by topic, partition, then `seq`.
    pub history: Vec<HistoryWrite>,
    /// Its expiry quarantine.
    pub quarantine: Vec<QuarantinedOffset>,
}

/// A durable home for coordinator state. Implementations must apply batches atomically and in
/// the order `apply` was called, and resolve each [`Durable`] only once its batch would
/// survive a crash of the process.
pub trait Store: Send + Sync + 'static {
    /// Everything stored, for startup.
    fn load(&self) -> Result<StoredState, StoreError>;
    /// Everything stored, for the startup of a server that parks groups with nothing but data
    /// as index entries: each such group as a [`ParkedSummary`] only (`parking.rs`). The
    /// default summarises a full [`Store::load`].
    fn load_parking(&self) -> Result<ParkingLoad, StoreError> {
        Ok(summarise(self.load()?))
    }
    /// Submits a batch; never blocks on I/O.
    fn apply(&self, batch: Vec<Mutation>) -> Durable;
    /// What is durable for one group: how a group whose write failed gets back to disk's
    /// state. Fails while the store is unhealthy; the caller retries later. The default reads
    /// everything ([`Store::load`]) and keeps one group: backends override it.
    fn load_group(&self, group_id: &str) -> Result<StoredGroup, StoreError> {
        let state = self.load()?;
        Ok(StoredGroup {
            record: state.groups.into_iter().find(|g| g.group_id == group_id),
            offsets: state
                .offsets
                .into_iter()
                .find(|(g, _)| g == group_id)
                .map(|(_, offsets)| offsets)
                .unwrap_or_default(),
            journal: state
                .journals
                .into_iter()
                .find(|(g, _)| g == group_id)
                .map(|(_, journal)| journal)
                .unwrap_or_default(),
            history: state
                .history
                .into_iter()
                .find(|(g, _)| g == group_id)
                .map(|(_, history)| history)
                .unwrap_or_default(),
            quarantine: state
                .quarantine
                .into_iter()
                .find(|(g, _)| g == group_id)
                .map(|(_, quarantine)| quarantine)
                .unwrap_or_default(),
        })
    }
    /// Writes catalog changes, each only if the topic is still as it was planned against
    /// (`shared.rs`). The default writes them as they are: a store only this node writes
    /// holds no change this node has not planned against (the supervisor makes one catalog
    /// change at a time).
    fn put_topics(&self, changes: Vec<TopicChange>) -> TopicsWrite {
        let written: Vec<TopicInfo> = changes.iter().map(|c| c.topic.clone()).collect();
        let durable = self.apply(written.iter().cloned().map(Mutation::PutTopic).collect());
        Box::pin(async move {
            durable.await?;
            Ok(TopicsWritten {
                written,
                ..TopicsWritten::default()
            })
        })
    }
    /// Charges one unit of `principal`'s `max_groups` to the new group `group_id` across every
    /// node sharing the store, unless the principal holds `max` groups already (then
    /// [`StoreError::QuotaExceeded`]); `max: None` charges whatever the count. Resolves once
    /// the unit is durable; the group gives it back in the transaction that deletes it.
    /// `None`: the store keeps no quota of its own, the node's in-memory count decides (the
    /// default: a store only one node writes).
    fn charge_group(
        &self,
        _group_id: &str,
        _principal: &str,
        _max: Option<u32>,
    ) -> Option<Durable> {
        None
    }
    /// Whether [`Store::load_group`] reads local data (a file, memory) rather than making a
    /// network round trip: then the coordinator keeps a parked group in the store only and
    /// reads it back, on the supervisor's thread, when a request, a query or a deadline needs
    /// it (`actors/group/park.rs`). False by default: such a store's parked groups are kept
    /// in memory whole.
    fn reads_one_group_cheaply(&self) -> bool {
        false
    }
    /// Whether writes are succeeding: false from a failed write until the store has recovered.
    fn healthy(&self) -> bool {
        true
    }
    /// Flushes and stops accepting writes (graceful shutdown). Idempotent.
    fn close(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Resolves when a submitted batch is durable (or failed).
#[must_use = "a write is only durable once its Durable resolves"]
pub struct Durable(DurableInner);

enum DurableInner {
    Ready(Option<Result<(), StoreError>>),
    Waiting(oneshot::Receiver<Result<(), StoreError>>),
}

impl Durable {
    /// An already-resolved outcome.
    pub fn ready(result: Result<(), StoreError>) -> Self {
        Durable(DurableInner::Ready(Some(result)))
    }

    /// A pending outcome and the sender a backend completes it with.
    pub fn pending() -> (DurableSender, Self) {
        let (tx, rx) = oneshot::channel();
        (DurableSender(tx), Durable(DurableInner::Waiting(rx)))
    }
}

/// Completes a [`Durable`].
pub struct DurableSender(oneshot::Sender<Result<(), StoreError>>);

impl DurableSender {
    pub fn complete(self, result: Result<(), StoreError>) {
        // The waiter may have gone away (its client disconnected): nothing to tell then.
        let _ = self.0.send(result);
    }
}

impl Future for Durable {
    type Output = Result<(), StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().0 {
            DurableInner::Ready(result) => {
                Poll::Ready(result.take().unwrap_or(Err(StoreError::Closed)))
            }
            DurableInner::Waiting(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.unwrap_or(Err(StoreError::Closed))),
        }
    }
}
