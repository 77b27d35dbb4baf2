//! The message types of Muster's offset protection (docs/protocol.md §6.23–§6.25): a member
//! reading its partitions' ownership epochs (fencing tokens), a group's offset history, a
//! point-in-time reset of an Empty group's offsets and the restore of offsets held in the
//! expiry quarantine. As in `types.rs`, field order is the wire format: never reorder, only
//! append.

use wincode::{SchemaRead, SchemaWrite};

use crate::shared::{FetchedTopic, TopicPartitions};

/// A member asks for the ownership epochs of the partitions it owns (docs/protocol.md §6.23).
/// Sent like a Heartbeat: `generation_id` is the classic generation, or the consumer
/// protocol's member epoch.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OwnershipEpochsRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// The answer to OwnershipEpochs: every partition the member owns, with its epoch.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OwnershipEpochsResponse {
    pub error_code: i16,
    /// The generation (or member epoch) the answer is for; -1 on an error.
    pub generation_id: i32,
    pub topics: Vec<TopicEpochs>,
}

/// The ownership epochs of one topic's partitions.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicEpochs {
    pub topic: String,
    pub partitions: Vec<PartitionEpoch>,
}

/// One partition's ownership epoch: it rose when the partition got its present owner and
/// is never reused for the partition in the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct PartitionEpoch {
    pub partition: i32,
    pub epoch: i32,
}

/// A group's offset history (docs/protocol.md §6.24): each partition's last commits, resets
/// and restores, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetHistoryRequest {
    pub group_id: String,
    /// `None`: every topic.
    pub topic: Option<String>,
    /// `None`: every partition (of `topic`, or of every topic).
    pub partition: Option<i32>,
    /// At most this many entries per partition (the newest); 0 = every entry kept.
    pub limit: u32,
}

/// The answer to OffsetHistory.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetHistoryResponse {
    pub error_code: i16,
    /// Sorted by topic.
    pub topics: Vec<TopicHistory>,
    /// Entries left out because the answer reached the server's cap (ask per topic or
    /// partition, or with a `limit`, to see them).
    pub omitted: u32,
}

/// One topic's history.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicHistory {
    pub topic: String,
    /// Sorted by partition.
    pub partitions: Vec<PartitionHistory>,
}

/// One partition's history, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct PartitionHistory {
    pub partition: i32,
    /// TOPIC_AUTHORIZATION_FAILED for a topic the principal may not read (no entries then).
    pub error_code: i16,
    pub entries: Vec<OffsetHistoryEntry>,
}

/// One change of a partition's committed offset.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetHistoryEntry {
    /// Rises with each entry of the partition (gaps are commits that failed to write).
    pub seq: u64,
    /// `commit`, `reset` or `restore` (a client treats an unknown kind as opaque text).
    pub kind: String,
    /// The offset from then on; -1: the reset removed the partition's offset.
    pub offset: i64,
    pub metadata: Option<String>,
    /// When it was written, on the server's clock (ms since the Unix epoch).
    pub committed_at_ms: u64,
    /// Who wrote it: the committing member (empty for a commit from outside any generation),
    /// or for a reset or restore, the principal (empty without an auth file).
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    /// The generation (or member epoch) the commit named; -1 outside any generation.
    pub generation_id: i32,
}

/// Where OffsetReset puts each partition (docs/protocol.md §6.24).
#[derive(Debug, Clone, PartialEq, Eq, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub enum ResetTo {
    /// The offset the partition had at this time (ms since the Unix epoch): its newest
    /// history entry at or before it.
    Time { at_ms: u64 },
    /// The oldest offset the history holds.
    EarliestRecorded,
    /// The committed offset plus `delta` (at least 0).
    ShiftBy { delta: i64 },
    /// This offset.
    Offset { offset: i64 },
}

/// Reset an Empty group's committed offsets (docs/protocol.md §6.24).
#[derive(Debug, Clone, PartialEq, Eq, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetResetRequest {
    pub group_id: String,
    pub to: ResetTo,
    /// Which partitions: an empty list = every partition the group has an offset or history
    /// for; an entry with no partitions = every such partition of that topic.
    pub topics: Vec<TopicPartitions>,
    /// `false`: a dry run (answer what would change, change nothing).
    pub execute: bool,
}

/// The answer to OffsetReset: per partition, the offset now and the offset after the reset.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetResetResponse {
    pub error_code: i16,
    /// Why the request failed, for people (e.g. the members of a group that is not Empty).
    pub error_message: Option<String>,
    /// Whether the offsets were changed (durably, all at once).
    pub executed: bool,
    /// The time the reset's history entries carry (a reset to a time just before it undoes
    /// it); 0 for a dry run.
    pub recorded_at_ms: u64,
    pub topics: Vec<ResetTopic>,
}

/// One topic of a reset.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ResetTopic {
    pub topic: String,
    pub partitions: Vec<ResetPartition>,
}

/// One partition of a reset.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ResetPartition {
    pub partition: i32,
    /// The committed offset before (-1: none).
    pub current: i64,
    /// The committed offset after (-1: none).
    pub new: i64,
    /// NONE; UNKNOWN_TOPIC_OR_PARTITION when it cannot be reset (its history does not reach
    /// back to the time asked, or it has no offset to shift): then nothing is executed; or
    /// TOPIC_AUTHORIZATION_FAILED for a topic the principal may not read (left unchanged,
    /// `current` and `new` -1, the other partitions reset).
    pub error_code: i16,
}

/// Bring back a group's offsets from the expiry quarantine (docs/protocol.md §6.25).
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetRestoreRequest {
    pub group_id: String,
    /// `false`: only list what the quarantine holds.
    pub execute: bool,
}

/// The answer to OffsetRestore: what the quarantine held (and, when executed, no longer holds).
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetRestoreResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub executed: bool,
    /// When the oldest of them entered the quarantine (0: it is empty).
    pub quarantined_at_ms: u64,
    /// When the first of them will be dropped for good (0: it is empty).
    pub drop_at_ms: u64,
    pub topics: Vec<FetchedTopic>,
}
