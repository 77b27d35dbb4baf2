//! The message types of rebalance insight (protocol §6.20): GroupHistory (a group's rebalance
//! journal) and GroupDiagnosis (what a group waits for right now), with their parts. As in
//! `types.rs`, field order is the wire format: never reorder, only append.

use wincode::{SchemaRead, SchemaWrite};

use crate::shared::TopicPartitions;

/// The rebalance journal of one group (protocol §6.20): its last rebalances, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct GroupHistoryRequest {
    pub group_id: String,
    /// At most this many entries (the newest); 0 = every entry the server keeps.
    pub limit: u32,
}

/// What one group is waiting for right now (protocol §6.20): the members a rebalance in
/// progress waits for, subscribed partitions nobody owns, a rebalance storm.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct GroupDiagnosisRequest {
    pub group_id: String,
}

/// The answer to GroupHistory. On an error the list is empty.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct GroupHistoryResponse {
    pub error_code: i16,
    /// Newest first.
    pub rebalances: Vec<RebalanceRecord>,
}

/// One completed rebalance of a group's journal (protocol §6.20). Times are milliseconds since
/// the Unix epoch on the server's clock; lists of member ids are capped (`omitted_*` say how
/// many were left out).
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct RebalanceRecord {
    /// The generation this rebalance reached.
    pub generation_id: i32,
    pub trigger: RebalanceCause,
    /// When the join barrier opened.
    pub started_at_ms: u64,
    /// How long the join barrier was open.
    pub barrier_ms: u64,
    /// From the barrier closing to the leader's assignment (SyncGroup). `None`: the
    /// generation never got an assignment (another rebalance came first, or it has no members).
    pub sync_ms: Option<u64>,
    /// The assignor the vote chose (`None` for a generation with no members).
    pub assignor: Option<String>,
    pub leader_id: String,
    /// Members in the generation reached.
    pub members: u32,
    /// Members of the previous generation the barrier waited for, and when each rejoined.
    pub waited_for: Vec<MemberWait>,
    /// Dynamic members removed at the barrier for not rejoining in time.
    pub evicted: Vec<String>,
    /// Members in this generation that were not in the previous one.
    pub joined: Vec<String>,
    /// Members of the previous generation that are not in this one.
    pub left: Vec<String>,
    /// Partitions whose owner changed between the previous assignment and this one (to or
    /// from no owner included). `None` while `sync_ms` is `None`.
    pub moved: Option<u32>,
    /// Per member: partitions gained and revoked (members with no change are not listed).
    pub changes: Vec<MemberChange>,
    /// Entries left out of `waited_for`, `evicted`, `joined`, `left` and `changes` (and
    /// partitions left out of `changes`) by the caps.
    pub omitted: u32,
}

/// Why a rebalance started. `kind` is one of `member_joined`, `metadata_changed`,
/// `member_fenced`, `member_left`, `session_expired`, `sync_timeout`, `topic_change`,
/// `coordinator_restart` (protocol §6.20; a client treats an unknown kind as opaque text).
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct RebalanceCause {
    pub kind: String,
    /// The member that caused it, where one did (empty strings otherwise).
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    /// More about it: the LeaveGroup or JoinGroup reason, the topic that changed.
    pub detail: Option<String>,
}

/// A member a barrier waited for.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct MemberWait {
    pub member_id: String,
    /// How long after the barrier opened it rejoined; `None`: it never did.
    pub rejoin_ms: Option<u64>,
}

/// What one member gained and lost in a rebalance.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct MemberChange {
    pub member_id: String,
    pub gained: Vec<TopicPartitions>,
    pub revoked: Vec<TopicPartitions>,
}

/// The answer to GroupDiagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct GroupDiagnosisResponse {
    pub error_code: i16,
    /// As DescribeGroups names states.
    pub state: String,
    pub generation_id: i32,
    /// The server's clock when it answered (ms since the Unix epoch): the other times are on
    /// the same clock.
    pub now_ms: u64,
    /// PreparingRebalance or CompletingRebalance: what the rebalance waits for. Boxed (the
    /// bytes are those of `Option<RebalanceWait>`) so that `Response` stays as small as it
    /// was: every answer, heartbeats included, is a `Response`.
    pub rebalance: Option<Box<RebalanceWait>>,
    /// Stable: partitions of subscribed topics that no member owns.
    pub unowned: Vec<TopicPartitions>,
    /// Since when `unowned` has been non-empty.
    pub unowned_since_ms: Option<u64>,
    /// More than `storm_threshold` rebalances started within the last `storm_window_ms`.
    pub storm: bool,
    pub rebalances_in_window: u32,
    pub storm_threshold: u32,
    pub storm_window_ms: u64,
}

/// A rebalance in progress and who it waits for.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct RebalanceWait {
    /// `join` (PreparingRebalance: members must rejoin) or `sync` (CompletingRebalance:
    /// members must send SyncGroup; the leader its assignment).
    pub phase: String,
    pub trigger: RebalanceCause,
    /// When the rebalance started (the barrier opened).
    pub started_at_ms: u64,
    /// When this phase started waiting (the barrier opened, or it closed for `sync`).
    pub phase_since_ms: u64,
    /// When the phase gives up: the barrier closes without the laggards, or the sync window
    /// ends and those that did not sync are removed. `None` while a restart's barrier has no
    /// deadline yet.
    pub deadline_ms: Option<u64>,
    /// Past half its timeout (when the server logs the WARN).
    pub stuck: bool,
    /// Who has not rejoined (join) or synced (sync) yet (capped; `omitted` left out).
    pub waiting_for: Vec<WaitingMember>,
    pub omitted: u32,
    /// Member ids handed out with MEMBER_ID_REQUIRED that the barrier also waits for.
    pub pending_joins: u32,
}

/// A member a rebalance in progress waits for.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct WaitingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// When the server last heard from it.
    pub last_heard_ms: u64,
    /// Whether it is the leader (in `sync`, the one whose assignment everyone waits for).
    pub leader: bool,
}
