//! The shared structures of protocol §3.2: the parts that requests and responses (and the
//! rebalance-insight messages, `insight.rs`) are made of. As in `types.rs`, field order is the
//! wire format: never reorder.

use wincode::{SchemaRead, SchemaWrite};

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicPartitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

/// One assignor the member supports, with the member's user data for it (by preference).
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct AssignorMetadata {
    pub name: String,
    pub user_data: Vec<u8>,
}

/// A topic of the server's catalog.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicInfo {
    pub topic: String,
    pub partitions: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct MemberAssignment {
    pub member_id: String,
    pub partitions: Vec<TopicPartitions>,
    pub user_data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetCommitTopic {
    pub topic: String,
    pub partitions: Vec<OffsetCommitPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetCommitPartition {
    pub partition: i32,
    pub offset: i64,
    pub metadata: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<String>,
    /// The member's user data for the chosen assignor.
    pub user_data: Vec<u8>,
    pub owned_partitions: Vec<TopicPartitions>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct LeaveResult {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct PartitionResults {
    pub topic: String,
    pub partitions: Vec<PartitionResult>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct PartitionResult {
    pub partition: i32,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FetchedTopic {
    pub topic: String,
    pub partitions: Vec<FetchedPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FetchedPartition {
    pub partition: i32,
    /// -1: nothing committed.
    pub offset: i64,
    pub metadata: Option<String>,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DescribedGroup {
    pub error_code: i16,
    pub group_id: String,
    pub state: String,
    pub generation_id: i32,
    pub assignor: Option<String>,
    pub leader_id: String,
    pub members: Vec<DescribedMember>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub topics: Vec<String>,
    pub assignment: Vec<TopicPartitions>,
    pub session_timeout_ms: u32,
    pub last_seen_ms_ago: u64,
    pub holding_rebalance: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ListedGroup {
    pub group_id: String,
    pub state: String,
    pub members: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct GroupResult {
    pub group_id: String,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicResult {
    pub topic: String,
    pub error_code: i16,
}

/// One live node of a cluster: where clients reach it, and the shards it owns.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ClusterNode {
    pub node_id: String,
    pub host: String,
    pub port: u16,
    pub shards: Vec<u32>,
}
