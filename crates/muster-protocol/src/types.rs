//! The message types of protocol v1, field for field and variant for variant as in
//! `docs/protocol.md` §3: the frames, the `Request` and `Response` enums and each request's
//! and response's own struct (the structures they share are `shared.rs`'s). Field order and
//! variant order are the wire format: never reorder, only append variants at the end of an
//! enum.
//!
//! Every `error_code` is kept as a raw `i16` so that a peer newer than us (with codes we do not
//! know) still decodes; [`crate::ErrorCode`] names the values we use.

use wincode::{SchemaRead, SchemaWrite};

use crate::consumer::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupSimulateRequest, GroupSimulateResponse,
};
use crate::insight::{
    GroupDiagnosisRequest, GroupDiagnosisResponse, GroupHistoryRequest, GroupHistoryResponse,
};
use crate::offsets::{
    OffsetHistoryRequest, OffsetHistoryResponse, OffsetResetRequest, OffsetResetResponse,
    OffsetRestoreRequest, OffsetRestoreResponse, OwnershipEpochsRequest, OwnershipEpochsResponse,
};
use crate::shared::{
    AssignorMetadata, ClusterNode, DescribedGroup, FetchedTopic, GroupResult, JoinedMember,
    LeaveResult, LeavingMember, ListedGroup, MemberAssignment, OffsetCommitTopic, PartitionResults,
    TopicInfo, TopicPartitions, TopicResult,
};
use crate::ErrorCode;

/// Client → server payload.
#[derive(Debug, Clone, PartialEq, Eq, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct RequestFrame {
    pub correlation_id: u32,
    pub request: Request,
}

/// Server → client payload.
#[derive(Debug, Clone, PartialEq, Eq, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ResponseFrame {
    pub correlation_id: u32,
    pub response: Response,
}

/// Every request, in wire order (variant index = tag).
#[derive(Debug, Clone, PartialEq, Eq, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub enum Request {
    Hello(HelloRequest),
    JoinGroup(JoinGroupRequest),
    SyncGroup(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
    CreateTopics(CreateTopicsRequest),
    DescribeTopics(DescribeTopicsRequest),
    FindCoordinator(FindCoordinatorRequest),
    DescribeCluster(DescribeClusterRequest),
    GroupHistory(GroupHistoryRequest),
    GroupDiagnosis(GroupDiagnosisRequest),
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest),
    ConsumerGroupDescribe(ConsumerGroupDescribeRequest),
    GroupSimulate(GroupSimulateRequest),
    OwnershipEpochs(OwnershipEpochsRequest),
    OffsetHistory(OffsetHistoryRequest),
    OffsetReset(OffsetResetRequest),
    OffsetRestore(OffsetRestoreRequest),
}

#[derive(Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct HelloRequest {
    pub protocol_version: u16,
    pub client_id: String,
    /// A bearer secret: never shown by `Debug` (a logged request must not leak it).
    pub auth_token: Option<String>,
}

impl std::fmt::Debug for HelloRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HelloRequest")
            .field("protocol_version", &self.protocol_version)
            .field("client_id", &self.client_id)
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct JoinGroupRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub session_timeout_ms: u32,
    pub rebalance_timeout_ms: u32,
    pub topics: Vec<String>,
    pub assignors: Vec<AssignorMetadata>,
    pub owned_partitions: Vec<TopicPartitions>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub assignor: Option<String>,
    /// Leader only; other members send an empty list.
    pub assignments: Vec<MemberAssignment>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct LeaveGroupRequest {
    pub group_id: String,
    pub members: Vec<LeavingMember>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetCommitRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<OffsetCommitTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetFetchRequest {
    pub group_id: String,
    /// `None` = every committed partition of the group.
    pub topics: Option<Vec<TopicPartitions>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DescribeGroupsRequest {
    pub group_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ListGroupsRequest {
    /// Empty = every state.
    pub states: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DeleteGroupsRequest {
    pub group_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct CreateTopicsRequest {
    /// Create each topic, or raise its partition count.
    pub topics: Vec<TopicInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DescribeTopicsRequest {
    /// `None` = every topic.
    pub topics: Option<Vec<String>>,
}

/// Which node coordinates a group (protocol §6.19). Not a group request: any node
/// answers it, whether or not it coordinates the group.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FindCoordinatorRequest {
    /// A group id.
    pub key: String,
}

/// The live nodes of the cluster and the shards each owns. Has no fields: it encodes as its
/// tag alone.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DescribeClusterRequest {}

/// Every response, in wire order (variant index = tag).
#[derive(Debug, Clone, PartialEq, Eq, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub enum Response {
    Hello(HelloResponse),
    JoinGroup(JoinGroupResponse),
    SyncGroup(SyncGroupResponse),
    Heartbeat(HeartbeatResponse),
    LeaveGroup(LeaveGroupResponse),
    OffsetCommit(OffsetCommitResponse),
    OffsetFetch(OffsetFetchResponse),
    DescribeGroups(DescribeGroupsResponse),
    ListGroups(ListGroupsResponse),
    DeleteGroups(DeleteGroupsResponse),
    CreateTopics(CreateTopicsResponse),
    DescribeTopics(DescribeTopicsResponse),
    Error(ErrorResponse),
    FindCoordinator(FindCoordinatorResponse),
    DescribeCluster(DescribeClusterResponse),
    GroupHistory(GroupHistoryResponse),
    GroupDiagnosis(GroupDiagnosisResponse),
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatResponse),
    ConsumerGroupDescribe(ConsumerGroupDescribeResponse),
    GroupSimulate(GroupSimulateResponse),
    OwnershipEpochs(OwnershipEpochsResponse),
    OffsetHistory(OffsetHistoryResponse),
    OffsetReset(OffsetResetResponse),
    OffsetRestore(OffsetRestoreResponse),
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct HelloResponse {
    pub error_code: i16,
    pub min_version: u16,
    pub max_version: u16,
    pub server_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct JoinGroupResponse {
    pub error_code: i16,
    pub generation_id: i32,
    pub assignor: Option<String>,
    pub leader_id: String,
    pub member_id: String,
    pub skip_assignment: bool,
    /// Leader only, else empty.
    pub members: Vec<JoinedMember>,
    /// Leader only: the subscribed topics that exist in the catalog.
    pub topics: Vec<TopicInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct SyncGroupResponse {
    pub error_code: i16,
    pub assignor: Option<String>,
    pub partitions: Vec<TopicPartitions>,
    pub user_data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct HeartbeatResponse {
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct LeaveGroupResponse {
    pub error_code: i16,
    pub members: Vec<LeaveResult>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetCommitResponse {
    pub error_code: i16,
    pub topics: Vec<PartitionResults>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct OffsetFetchResponse {
    pub error_code: i16,
    pub topics: Vec<FetchedTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DescribeGroupsResponse {
    pub groups: Vec<DescribedGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ListGroupsResponse {
    pub error_code: i16,
    pub groups: Vec<ListedGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DeleteGroupsResponse {
    pub results: Vec<GroupResult>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct CreateTopicsResponse {
    pub results: Vec<TopicResult>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DescribeTopicsResponse {
    pub error_code: i16,
    pub topics: Vec<TopicInfo>,
}

/// The node that coordinates the requested group, as clients should reach it. On an error
/// the other fields are empty (port 0).
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FindCoordinatorResponse {
    pub error_code: i16,
    pub node_id: String,
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DescribeClusterResponse {
    pub error_code: i16,
    /// The cluster's name (`cluster_name`).
    pub cluster: String,
    /// The number of shards groups are spread over (1 for a single node).
    pub shards: u32,
    /// The live nodes.
    pub nodes: Vec<ClusterNode>,
}

/// A request-level failure, for any request.
#[derive(Debug, Clone, PartialEq, Eq, Default, SchemaWrite, SchemaRead)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ErrorResponse {
    pub error_code: i16,
    pub message: String,
}

// ---------------------------------------------------------------------------------------------
// Helpers. None of these change the wire format.
// ---------------------------------------------------------------------------------------------

impl RequestFrame {
    pub fn new(correlation_id: u32, request: impl Into<Request>) -> Self {
        RequestFrame {
            correlation_id,
            request: request.into(),
        }
    }
}

impl ResponseFrame {
    pub fn new(correlation_id: u32, response: impl Into<Response>) -> Self {
        ResponseFrame {
            correlation_id,
            response: response.into(),
        }
    }
}

/// Implements `name()`/`tag()` for a wire enum and `From<Inner>` for each of its variants, from
/// one list so that the names and tags cannot drift from the variants.
macro_rules! wire_enum_helpers {
    ($enum:ident { $($tag:literal => $variant:ident($inner:ident)),* $(,)? }) => {
        impl $enum {
            /// The variant's name as in `docs/protocol.md` (e.g. `"JoinGroup"`), for logs and
            /// metrics.
            pub const fn name(&self) -> &'static str {
                match self {
                    $($enum::$variant(_) => stringify!($variant),)*
                }
            }

            /// The variant's wire tag (its index in protocol §3).
            pub const fn tag(&self) -> u32 {
                match self {
                    $($enum::$variant(_) => $tag,)*
                }
            }
        }

        $(
            impl From<$inner> for $enum {
                #[inline]
                fn from(inner: $inner) -> Self {
                    $enum::$variant(inner)
                }
            }
        )*
    };
}

wire_enum_helpers!(Request {
    0 => Hello(HelloRequest),
    1 => JoinGroup(JoinGroupRequest),
    2 => SyncGroup(SyncGroupRequest),
    3 => Heartbeat(HeartbeatRequest),
    4 => LeaveGroup(LeaveGroupRequest),
    5 => OffsetCommit(OffsetCommitRequest),
    6 => OffsetFetch(OffsetFetchRequest),
    7 => DescribeGroups(DescribeGroupsRequest),
    8 => ListGroups(ListGroupsRequest),
    9 => DeleteGroups(DeleteGroupsRequest),
    10 => CreateTopics(CreateTopicsRequest),
    11 => DescribeTopics(DescribeTopicsRequest),
    12 => FindCoordinator(FindCoordinatorRequest),
    13 => DescribeCluster(DescribeClusterRequest),
    14 => GroupHistory(GroupHistoryRequest),
    15 => GroupDiagnosis(GroupDiagnosisRequest),
    16 => ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest),
    17 => ConsumerGroupDescribe(ConsumerGroupDescribeRequest),
    18 => GroupSimulate(GroupSimulateRequest),
    19 => OwnershipEpochs(OwnershipEpochsRequest),
    20 => OffsetHistory(OffsetHistoryRequest),
    21 => OffsetReset(OffsetResetRequest),
    22 => OffsetRestore(OffsetRestoreRequest),
});

wire_enum_helpers!(Response {
    0 => Hello(HelloResponse),
    1 => JoinGroup(JoinGroupResponse),
    2 => SyncGroup(SyncGroupResponse),
    3 => Heartbeat(HeartbeatResponse),
    4 => LeaveGroup(LeaveGroupResponse),
    5 => OffsetCommit(OffsetCommitResponse),
    6 => OffsetFetch(OffsetFetchResponse),
    7 => DescribeGroups(DescribeGroupsResponse),
    8 => ListGroups(ListGroupsResponse),
    9 => DeleteGroups(DeleteGroupsResponse),
    10 => CreateTopics(CreateTopicsResponse),
    11 => DescribeTopics(DescribeTopicsResponse),
    12 => Error(ErrorResponse),
    13 => FindCoordinator(FindCoordinatorResponse),
    14 => DescribeCluster(DescribeClusterResponse),
    15 => GroupHistory(GroupHistoryResponse),
    16 => GroupDiagnosis(GroupDiagnosisResponse),
    17 => ConsumerGroupHeartbeat(ConsumerGroupHeartbeatResponse),
    18 => ConsumerGroupDescribe(ConsumerGroupDescribeResponse),
    19 => GroupSimulate(GroupSimulateResponse),
    20 => OwnershipEpochs(OwnershipEpochsResponse),
    21 => OffsetHistory(OffsetHistoryResponse),
    22 => OffsetReset(OffsetResetResponse),
    23 => OffsetRestore(OffsetRestoreResponse),
});

impl Request {
    /// The one group this request is addressed to, and whose coordinator answers it: the
    /// `group_id` of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
    /// ConsumerGroupHeartbeat and OwnershipEpochs (which need `read` on the group), and of
    /// OffsetHistory, OffsetReset and OffsetRestore, routed to the group like OffsetCommit but
    /// authorized with their own rights (protocol §5): OffsetHistory, and OffsetReset and
    /// OffsetRestore without `execute` (a dry run), need `read` on the group; OffsetReset and
    /// OffsetRestore with `execute` need `delete` on it; each also needs `read` on every topic
    /// it touches. `None` for Hello, the topic requests, the admin requests that name any
    /// number of groups (DescribeGroups, ListGroups, DeleteGroups, ConsumerGroupDescribe), even
    /// one, the admin requests about one group (GroupHistory, GroupDiagnosis, GroupSimulate:
    /// authorized as admin requests, with `describe`), and the cluster requests:
    /// FindCoordinator's `key` is a group id, but any node answers it, so it is not routed to
    /// the group.
    pub fn group_id(&self) -> Option<&str> {
        match self {
            Request::JoinGroup(r) => Some(&r.group_id),
            Request::SyncGroup(r) => Some(&r.group_id),
            Request::Heartbeat(r) => Some(&r.group_id),
            Request::LeaveGroup(r) => Some(&r.group_id),
            Request::OffsetCommit(r) => Some(&r.group_id),
            Request::OffsetFetch(r) => Some(&r.group_id),
            Request::ConsumerGroupHeartbeat(r) => Some(&r.group_id),
            Request::OwnershipEpochs(r) => Some(&r.group_id),
            Request::OffsetHistory(r) => Some(&r.group_id),
            Request::OffsetReset(r) => Some(&r.group_id),
            Request::OffsetRestore(r) => Some(&r.group_id),
            Request::Hello(_)
            | Request::DescribeGroups(_)
            | Request::ListGroups(_)
            | Request::DeleteGroups(_)
            | Request::CreateTopics(_)
            | Request::DescribeTopics(_)
            | Request::FindCoordinator(_)
            | Request::DescribeCluster(_)
            | Request::GroupHistory(_)
            | Request::GroupDiagnosis(_)
            | Request::ConsumerGroupDescribe(_)
            | Request::GroupSimulate(_) => None,
        }
    }
}

impl Response {
    /// A request-level failure (`Response::Error`), valid as the answer to any request.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        Response::Error(ErrorResponse {
            error_code: code.code(),
            message: message.into(),
        })
    }

    /// The response's top-level error code; responses that only carry per-item codes
    /// (DescribeGroups, DeleteGroups, CreateTopics) answer 0.
    pub const fn error_code(&self) -> i16 {
        match self {
            Response::Hello(r) => r.error_code,
            Response::JoinGroup(r) => r.error_code,
            Response::SyncGroup(r) => r.error_code,
            Response::Heartbeat(r) => r.error_code,
            Response::LeaveGroup(r) => r.error_code,
            Response::OffsetCommit(r) => r.error_code,
            Response::OffsetFetch(r) => r.error_code,
            Response::ListGroups(r) => r.error_code,
            Response::DescribeTopics(r) => r.error_code,
            Response::Error(r) => r.error_code,
            Response::FindCoordinator(r) => r.error_code,
            Response::DescribeCluster(r) => r.error_code,
            Response::GroupHistory(r) => r.error_code,
            Response::GroupDiagnosis(r) => r.error_code,
            Response::ConsumerGroupHeartbeat(r) => r.error_code,
            Response::GroupSimulate(r) => r.error_code,
            Response::OwnershipEpochs(r) => r.error_code,
            Response::OffsetHistory(r) => r.error_code,
            Response::OffsetReset(r) => r.error_code,
            Response::OffsetRestore(r) => r.error_code,
            Response::DescribeGroups(_)
            | Response::DeleteGroups(_)
            | Response::CreateTopics(_)
            | Response::ConsumerGroupDescribe(_) => 0,
        }
    }
}

/// The names of the request variants, indexed by wire tag (for metrics labels).
pub const REQUEST_NAMES: [&str; 23] = [
    "Hello",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "DescribeGroups",
    "ListGroups",
    "DeleteGroups",
    "CreateTopics",
    "DescribeTopics",
    "FindCoordinator",
    "DescribeCluster",
    "GroupHistory",
    "GroupDiagnosis",
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
    "GroupSimulate",
    "OwnershipEpochs",
    "OffsetHistory",
    "OffsetReset",
    "OffsetRestore",
];
