//! The durable records of a group: its metadata ([`GroupRecord`], one [`MemberRecord`] per
//! member) and its committed offsets. Owned here, by storage; the engine builds and reads them
//! (`engine/persist.rs`), storage never looks at the engine.

use std::sync::Arc;

use muster_protocol::{AssignorMetadata, TopicPartitions};

/// One entry of a group's rebalance journal. Stored as its protocol encoding (protocol §3,
/// `RebalanceRecord`), whose bytes the protocol contract freezes: the store format cannot
/// drift from it unnoticed.
pub use muster_protocol::RebalanceRecord;

use crate::types::{GroupState, Millis};

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub metadata: Option<String>,
    /// When it was committed, on the coordinator's clock (retention counts from here).
    pub commit_timestamp_ms: Millis,
}

/// A committed offset for one partition, as written. The topic is shared by the writes of one
/// commit (one allocation per topic, not per partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetWrite {
    pub topic: Arc<str>,
    pub partition: i32,
    pub committed: CommittedOffset,
}

/// A group's durable metadata (protocol §6.17).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    pub group_id: String,
    pub state: GroupState,
    pub generation: i32,
    pub assignor: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<MemberRecord>,
    pub state_since_ms: Millis,
    /// The principal that created the group, charged its `max_groups` again on load (`None`:
    /// no auth file, or stored before owners were recorded).
    pub created_by: Option<String>,
    /// The consumer protocol's part (protocol-v1 §7), for a group that speaks it: then
    /// `generation` is its group epoch and `members` its classic members (none unless the group
    /// was upgraded from a classic one). `None` for a classic group.
    pub consumer: Option<ConsumerGroupRecord>,
    /// Each partition's present (or last) owner and its ownership epoch (protocol §6.23), so
    /// that an epoch is never reused, across a restart or a failover. Sorted by topic, then
    /// partition.
    pub ownership: Vec<OwnershipRecord>,
}

/// Who owns (or last owned) one partition of a group, and since which ownership epoch. The
/// epoch rises each time the partition gets another owner and is never reused.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnershipRecord {
    pub topic: String,
    pub partition: i32,
    pub epoch: i32,
    /// The member id of the owner.
    pub owner: String,
}

/// What wrote an offset history entry (stored as its number, never renumbered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistoryKind {
    /// An OffsetCommit (0).
    #[default]
    Commit,
    /// An OffsetReset (1).
    Reset,
    /// An offset brought back from the expiry quarantine (2), by OffsetRestore or a join.
    Restore,
}

impl HistoryKind {
    pub const fn number(self) -> u8 {
        match self {
            HistoryKind::Commit => 0,
            HistoryKind::Reset => 1,
            HistoryKind::Restore => 2,
        }
    }

    pub const fn from_number(n: u8) -> Option<Self> {
        match n {
            0 => Some(HistoryKind::Commit),
            1 => Some(HistoryKind::Reset),
            2 => Some(HistoryKind::Restore),
            _ => None,
        }
    }

    /// Its name on the wire (protocol §6.24).
    pub const fn name(self) -> &'static str {
        match self {
            HistoryKind::Commit => "commit",
            HistoryKind::Reset => "reset",
            HistoryKind::Restore => "restore",
        }
    }
}

/// One change of a partition's committed offset, as its history keeps it (protocol §6.24).
/// The ids are shared with the member (or the request) that wrote it: one allocation per
/// member, not per entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistoryEntry {
    /// Rises with each entry of the partition; the store's key.
    pub seq: u64,
    pub kind: HistoryKind,
    /// The offset from then on; -1: removed (by a reset to a time before any commit).
    pub offset: i64,
    pub metadata: Option<String>,
    pub at_ms: Millis,
    /// The committing member, or the principal of a reset or restore (empty if none).
    pub member_id: Arc<str>,
    pub client_id: Arc<str>,
    pub client_host: Arc<str>,
    /// The generation (or member epoch) the commit named; -1 outside any generation.
    pub generation: i32,
}

impl HistoryEntry {
    /// What the entry weighs against the history's byte budget (`offset_history_bytes`): its
    /// variable parts and a fixed 48 bytes for the rest.
    pub fn weight(&self) -> usize {
        48 + self.metadata.as_ref().map_or(0, String::len)
            + self.member_id.len()
            + self.client_id.len()
            + self.client_host.len()
    }
}

/// A history entry of one partition, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryWrite {
    pub topic: Arc<str>,
    pub partition: i32,
    pub entry: HistoryEntry,
}

/// Drop a partition's history entries with a sequence number below `below_seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryTrim {
    pub topic: Arc<str>,
    pub partition: i32,
    pub below_seq: u64,
}

/// An offset past retention, held in the expiry quarantine until `quarantined_at` plus the
/// grace period (`offsets_quarantine_minutes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantinedOffset {
    pub write: OffsetWrite,
    pub quarantined_at: Millis,
}

/// The durable part of a consumer-protocol group (protocol-v1 §7): its target assignment and
/// each member's epoch, current assignment and reconciliation state, so that a restart or a
/// failover resumes with the same epochs (none is ever reused).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupRecord {
    /// The epoch of the target assignment (≤ the group epoch).
    pub assignment_epoch: i32,
    /// The server assignor the target was computed with (`uniform` or `range`).
    pub assignor: String,
    pub members: Vec<ConsumerMemberRecord>,
}

/// One member of a [`ConsumerGroupRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerMemberRecord {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// The principal whose `max_members` the member counts against, charged again on load.
    pub principal: Option<String>,
    pub rebalance_timeout_ms: u32,
    pub subscribed_topics: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// The assignor the member asked for, if any.
    pub server_assignor: Option<String>,
    /// 0 Stable, 1 UnrevokedPartitions, 2 UnreleasedPartitions (never renumbered).
    pub state: u8,
    /// Its epoch (-2: a static member on a temporary leave).
    pub member_epoch: i32,
    /// The epoch before its last bump (a heartbeat whose answer was lost may still carry it).
    pub previous_member_epoch: i32,
    /// What it owns now.
    pub assigned: Vec<TopicPartitions>,
    /// What it was asked to give up and still reports.
    pub pending_revocation: Vec<TopicPartitions>,
    /// Its share of the target assignment.
    pub target: Vec<TopicPartitions>,
    /// A member that still speaks the classic protocol (a group upgraded online): what it
    /// keeps of its JoinGroup.
    pub classic: Option<ClassicMemberRecord>,
}

/// What a classic member inside a consumer group keeps of its JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberRecord {
    pub session_timeout_ms: u32,
    pub assignors: Vec<AssignorMetadata>,
}

impl GroupRecord {
    /// The record of a group that never had one written: Empty at generation 0 since `now`
    /// (a group that only ever had simple commits has offsets but no record).
    pub fn empty(group_id: String, now: Millis) -> Self {
        GroupRecord {
            group_id,
            state: GroupState::Empty,
            generation: 0,
            assignor: None,
            leader: None,
            members: Vec::new(),
            state_since_ms: now,
            created_by: None,
            consumer: None,
            ownership: Vec::new(),
        }
    }
}

/// One member of a [`GroupRecord`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u32,
    pub rebalance_timeout_ms: u32,
    pub topics: Vec<String>,
    pub assignors: Vec<AssignorMetadata>,
    pub owned_partitions: Vec<TopicPartitions>,
    pub assignment: Vec<TopicPartitions>,
    pub assignment_user_data: Vec<u8>,
    /// The principal whose `max_members` the member counts against, charged again on load.
    pub principal: Option<String>,
}
