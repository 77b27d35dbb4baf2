//! The message types of the consumer protocol (protocol-v1 §7, Kafka 4's KIP-848;
//! docs/protocol.md §6.21): ConsumerGroupHeartbeat and ConsumerGroupDescribe, and the dry-run
//! rebalance GroupSimulate (docs/protocol.md §6.22), with their parts. As in `types.rs`, field
//! order is the wire format: never reorder, only append.

use wincode::{SchemaRead, SchemaWrite};

use crate::shared::{TopicInfo, TopicPartitions};

/// A consumer-protocol member's one request (protocol-v1 §7): it joins (epoch 0), heartbeats
/// (its epoch), reports what it owns, changes its subscription, and leaves (epoch -1, or -2 for
/// a static member's temporary leave). `None` fields are unchanged since the last heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ConsumerGroupHeartbeatRequest {
    pub group_id: String,
    /// Chosen by the member (a UUID, 1..=64 bytes), or empty on its first heartbeat for the
    /// server to choose.
    pub member_id: String,
    /// 0 to join, the member's epoch to heartbeat, -1 to leave, -2 for a static member's
    /// temporary leave.
    pub member_epoch: i32,
    pub group_instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 = unchanged.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topics: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    /// `uniform` or `range`; `None` = unchanged (or the server's default).
    pub server_assignor: Option<String>,
    pub owned_partitions: Option<Vec<TopicPartitions>>,
}

/// Describes consumer-protocol groups (protocol-v1 §7): epochs, and per member its current and
/// target assignment.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ConsumerGroupDescribeRequest {
    pub group_ids: Vec<String>,
}

/// The answer to a ConsumerGroupHeartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ConsumerGroupHeartbeatResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// `Some`: the member's whole assignment now (sent whenever it changed); `None`: unchanged.
    pub assignment: Option<Vec<TopicPartitions>>,
}

/// The answer to ConsumerGroupDescribe: one entry per asked group, in the order asked.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ConsumerGroupDescribeResponse {
    pub groups: Vec<DescribedConsumerGroup>,
}

/// One consumer group, as ConsumerGroupDescribe shows it. An unknown group is `Dead` with
/// GROUP_ID_NOT_FOUND; a classic group is answered GROUP_ID_NOT_FOUND too (as Kafka 4 does);
/// [`crate::error_answers::dead_consumer_group`] makes such an entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DescribedConsumerGroup {
    pub error_code: i16,
    pub group_id: String,
    /// `Empty`, `Assigning`, `Reconciling`, `Stable` or `Dead`.
    pub state: String,
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<ConsumerMember>,
}

/// One member of a described consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ConsumerMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topics: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// What the member owns now.
    pub assignment: Vec<TopicPartitions>,
    /// Its share of the group's target assignment.
    pub target_assignment: Vec<TopicPartitions>,
}

/// A dry-run rebalance (docs/protocol.md §6.22): what the group's assignor would move if these
/// changes happened together. Nothing changes in the group.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct GroupSimulateRequest {
    pub group_id: String,
    /// Members that would leave.
    pub remove_members: Vec<String>,
    /// How many members would join, each subscribed to every topic the group subscribes to.
    pub add_members: u32,
    /// Topics whose partition count would become this (a topic the catalog lacks is created).
    pub partitions: Vec<TopicInfo>,
}

/// The answer to GroupSimulate.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct GroupSimulateResponse {
    pub error_code: i16,
    /// Why, in words, when `error_code` is not NONE (e.g. a classic group whose assignor the
    /// server cannot compute).
    pub error_message: Option<String>,
    /// The assignor the simulation ran.
    pub assignor: String,
    /// Every member after the change (staying, and the `added` ones named `new-1`, `new-2`, …)
    /// and every removed one, sorted by member id.
    pub members: Vec<SimulatedMember>,
    /// Partitions that would stop (change owner, or lose their owner): those that move.
    pub stopped_partitions: u32,
}

/// One member in a dry-run rebalance.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct SimulatedMember {
    pub member_id: String,
    /// `staying`, `added` or `removed`.
    pub change: String,
    pub kept: Vec<TopicPartitions>,
    pub lost: Vec<TopicPartitions>,
    pub gained: Vec<TopicPartitions>,
}
