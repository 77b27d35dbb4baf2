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
