//! One hand-built, non-trivial value per message type (Some and None, empty and non-empty
//! sequences, non-ASCII strings, extreme integers), plus the all-defaults value of each. The
//! consumer-protocol messages and GroupSimulate have theirs in `samples/consumer.rs`, the
//! offset-protection messages in `samples/offsets.rs`.

use crate::*;

mod consumer;
mod offsets;
pub use consumer::*;
pub use offsets::*;

pub fn tp(topic: &str, partitions: &[i32]) -> TopicPartitions {
    TopicPartitions {
        topic: topic.into(),
        partitions: partitions.to_vec(),
    }
}

pub fn req(correlation_id: u32, request: impl Into<Request>) -> RequestFrame {
    RequestFrame::new(correlation_id, request)
}

pub fn resp(correlation_id: u32, response: impl Into<Response>) -> ResponseFrame {
    ResponseFrame::new(correlation_id, response)
}

pub fn hello_request() -> RequestFrame {
    req(
        1,
        HelloRequest {
            protocol_version: PROTOCOL_VERSION,
            client_id: "consumer-Ωμέγα".into(),
            auth_token: Some("s3cr3t-🔑".into()),
        },
    )
}

pub fn join_group_request() -> RequestFrame {
    req(
        u32::MAX,
        JoinGroupRequest {
            group_id: "orders-ü".into(),
            member_id: String::new(),
            group_instance_id: Some("pod-0".into()),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 300_000,
            topics: vec!["orders".into(), "returns".into()],
            assignors: vec![
                AssignorMetadata {
                    name: "cooperative-sticky".into(),
                    user_data: vec![0, 1, 2, 255],
                },
                AssignorMetadata {
                    name: "range".into(),
                    user_data: vec![],
                },
            ],
            owned_partitions: vec![tp("orders", &[0, 2, i32::MAX]), tp("returns", &[])],
            reason: None,
        },
    )
}

pub fn sync_group_request() -> RequestFrame {
    req(
        3,
        SyncGroupRequest {
            group_id: "orders".into(),
            generation_id: 7,
            member_id: "c-1".into(),
            group_instance_id: None,
            assignor: Some("range".into()),
            assignments: vec![
                MemberAssignment {
                    member_id: "c-1".into(),
                    partitions: vec![tp("orders", &[0, 1])],
                    user_data: vec![9],
                },
                MemberAssignment {
                    member_id: "c-2 ✓".into(),
                    partitions: vec![],
                    user_data: vec![],
                },
            ],
        },
    )
}

pub fn heartbeat_request() -> RequestFrame {
    req(
        4,
        HeartbeatRequest {
            group_id: "orders".into(),
            generation_id: -1,
            member_id: "c-1".into(),
            group_instance_id: Some("実例".into()),
        },
    )
}

pub fn leave_group_request() -> RequestFrame {
    req(
        5,
        LeaveGroupRequest {
            group_id: "orders".into(),
            members: vec![
                LeavingMember {
                    member_id: "c-1".into(),
                    group_instance_id: None,
                    reason: Some("shutting down".into()),
                },
                LeavingMember {
                    member_id: String::new(),
                    group_instance_id: Some("pod-3".into()),
                    reason: None,
                },
            ],
        },
    )
}

pub fn offset_commit_request() -> RequestFrame {
    req(
        6,
        OffsetCommitRequest {
            group_id: "orders".into(),
            generation_id: 12,
            member_id: "c-1".into(),
            group_instance_id: None,
            topics: vec![
                OffsetCommitTopic {
                    topic: "orders".into(),
                    partitions: vec![
                        OffsetCommitPartition {
                            partition: 0,
                            offset: i64::MAX,
                            metadata: Some("host=α".into()),
                        },
                        OffsetCommitPartition {
                            partition: 1,
                            offset: 0,
                            metadata: None,
                        },
                    ],
                },
                OffsetCommitTopic {
                    topic: "empty".into(),
                    partitions: vec![],
                },
            ],
        },
    )
}

pub fn offset_fetch_request() -> RequestFrame {
    req(
        7,
        OffsetFetchRequest {
            group_id: "orders".into(),
            topics: Some(vec![tp("orders", &[0, 1, 2]), tp("x", &[])]),
        },
    )
}

pub fn describe_groups_request() -> RequestFrame {
    req(
        8,
        DescribeGroupsRequest {
            group_ids: vec!["orders".into(), "gröup".into(), String::new()],
        },
    )
}

pub fn list_groups_request() -> RequestFrame {
    req(
        9,
        ListGroupsRequest {
            states: vec!["Stable".into(), "Empty".into()],
        },
    )
}

pub fn delete_groups_request() -> RequestFrame {
    req(
        10,
        DeleteGroupsRequest {
            group_ids: vec!["old".into()],
        },
    )
}

pub fn create_topics_request() -> RequestFrame {
    req(
        11,
        CreateTopicsRequest {
            topics: vec![
                TopicInfo {
                    topic: "orders".into(),
                    partitions: 12,
                },
                TopicInfo {
                    topic: "bad".into(),
                    partitions: i32::MIN,
                },
            ],
        },
    )
}

pub fn describe_topics_request() -> RequestFrame {
    req(
        12,
        DescribeTopicsRequest {
            topics: Some(vec!["orders".into(), String::new()]),
        },
    )
}

pub fn find_coordinator_request() -> RequestFrame {
    req(
        13,
        FindCoordinatorRequest {
            key: "orders-ü".into(),
        },
    )
}

pub fn describe_cluster_request() -> RequestFrame {
    req(u32::MAX - 1, DescribeClusterRequest {})
}

pub fn group_history_request() -> RequestFrame {
    req(
        14,
        GroupHistoryRequest {
            group_id: "orders-ü".into(),
            limit: u32::MAX,
        },
    )
}

pub fn group_diagnosis_request() -> RequestFrame {
    req(
        15,
        GroupDiagnosisRequest {
            group_id: "orders-ü".into(),
        },
    )
}

pub fn hello_response() -> ResponseFrame {
    resp(
        1,
        HelloResponse {
            error_code: ErrorCode::UnsupportedVersion.code(),
            min_version: MIN_PROTOCOL_VERSION,
            max_version: MAX_PROTOCOL_VERSION,
            server_id: "musterd-✓".into(),
        },
    )
}

pub fn join_group_response() -> ResponseFrame {
    resp(
        u32::MAX,
        JoinGroupResponse {
            error_code: 0,
            generation_id: i32::MAX,
            assignor: Some("range".into()),
            leader_id: "c-1".into(),
            member_id: "c-1".into(),
            skip_assignment: true,
            members: vec![
                JoinedMember {
                    member_id: "c-1".into(),
                    group_instance_id: Some("pod-0".into()),
                    topics: vec!["orders".into()],
                    user_data: vec![1, 2, 3],
                    owned_partitions: vec![tp("orders", &[0])],
                },
                JoinedMember {
                    member_id: "c-2".into(),
                    group_instance_id: None,
                    topics: vec![],
                    user_data: vec![],
                    owned_partitions: vec![],
                },
            ],
            topics: vec![TopicInfo {
                topic: "orders".into(),
                partitions: 3,
            }],
        },
    )
}

pub fn sync_group_response() -> ResponseFrame {
    resp(
        3,
        SyncGroupResponse {
            error_code: 0,
            assignor: Some("range".into()),
            partitions: vec![tp("orders", &[0, 1]), tp("ünïcode", &[-1])],
            user_data: vec![0xde, 0xad],
        },
    )
}

pub fn heartbeat_response() -> ResponseFrame {
    resp(
        4,
        HeartbeatResponse {
            error_code: ErrorCode::RebalanceInProgress.code(),
        },
    )
}

pub fn leave_group_response() -> ResponseFrame {
    resp(
        5,
        LeaveGroupResponse {
            error_code: 0,
            members: vec![
                LeaveResult {
                    member_id: "c-1".into(),
                    group_instance_id: None,
                    error_code: 0,
                },
                LeaveResult {
                    member_id: String::new(),
                    group_instance_id: Some("pod-3".into()),
                    error_code: ErrorCode::UnknownMemberId.code(),
                },
            ],
        },
    )
}

pub fn offset_commit_response() -> ResponseFrame {
    resp(
        6,
        OffsetCommitResponse {
            error_code: 0,
            topics: vec![PartitionResults {
                topic: "orders".into(),
                partitions: vec![
                    PartitionResult {
                        partition: 0,
                        error_code: 0,
                    },
                    PartitionResult {
                        partition: 1,
                        error_code: ErrorCode::OffsetMetadataTooLarge.code(),
                    },
                ],
            }],
        },
    )
}

pub fn offset_fetch_response() -> ResponseFrame {
    resp(
        7,
        OffsetFetchResponse {
            error_code: 0,
            topics: vec![FetchedTopic {
                topic: "orders".into(),
                partitions: vec![
                    FetchedPartition {
                        partition: 0,
                        offset: 42,
                        metadata: Some("m€ta".into()),
                        error_code: 0,
                    },
                    FetchedPartition {
                        partition: 1,
                        offset: -1,
                        metadata: None,
                        error_code: 0,
                    },
                ],
            }],
        },
    )
}

pub fn describe_groups_response() -> ResponseFrame {
    resp(
        8,
        DescribeGroupsResponse {
            groups: vec![
                DescribedGroup {
                    error_code: 0,
                    group_id: "orders".into(),
                    state: "CompletingRebalance".into(),
                    generation_id: 4,
                    assignor: Some("range".into()),
                    leader_id: "c-1".into(),
                    members: vec![DescribedMember {
                        member_id: "c-1".into(),
                        group_instance_id: Some("pod-0".into()),
                        client_id: "cli".into(),
                        client_host: "/127.0.0.1:5000".into(),
                        topics: vec!["orders".into()],
                        assignment: vec![tp("orders", &[0, 1, 2])],
                        session_timeout_ms: 45_000,
                        last_seen_ms_ago: u64::MAX,
                        holding_rebalance: true,
                    }],
                },
                DescribedGroup {
                    error_code: 0,
                    group_id: "nope".into(),
                    state: "Dead".into(),
                    generation_id: 0,
                    assignor: None,
                    leader_id: String::new(),
                    members: vec![],
                },
            ],
        },
    )
}

pub fn list_groups_response() -> ResponseFrame {
    resp(
        9,
        ListGroupsResponse {
            error_code: 0,
            groups: vec![ListedGroup {
                group_id: "orders".into(),
                state: "Stable".into(),
                members: 3,
            }],
        },
    )
}

pub fn delete_groups_response() -> ResponseFrame {
    resp(
        10,
        DeleteGroupsResponse {
            results: vec![
                GroupResult {
                    group_id: "old".into(),
                    error_code: 0,
                },
                GroupResult {
                    group_id: "busy".into(),
                    error_code: ErrorCode::NonEmptyGroup.code(),
                },
            ],
        },
    )
}

pub fn create_topics_response() -> ResponseFrame {
    resp(
        11,
        CreateTopicsResponse {
            results: vec![TopicResult {
                topic: "bad name".into(),
                error_code: ErrorCode::InvalidTopic.code(),
            }],
        },
    )
}

pub fn describe_topics_response() -> ResponseFrame {
    resp(
        12,
        DescribeTopicsResponse {
            error_code: 0,
            topics: vec![TopicInfo {
                topic: "orders".into(),
                partitions: 3,
            }],
        },
    )
}

pub fn error_response() -> ResponseFrame {
    resp(
        0,
        Response::error(
            ErrorCode::MessageTooLarge,
            "frame of 4294967295 bytes — too large",
        ),
    )
}

pub fn find_coordinator_response() -> ResponseFrame {
    resp(
        13,
        FindCoordinatorResponse {
            error_code: 0,
            node_id: "node-β".into(),
            host: "muster-1.example".into(),
            port: u16::MAX,
        },
    )
}

pub fn describe_cluster_response() -> ResponseFrame {
    resp(
        u32::MAX - 1,
        DescribeClusterResponse {
            error_code: 0,
            cluster: "prod-✓".into(),
            shards: 64,
            nodes: vec![
                ClusterNode {
                    node_id: "a".into(),
                    host: "10.0.0.1".into(),
                    port: 9092,
                    shards: vec![0, 2, u32::MAX],
                },
                ClusterNode {
                    node_id: String::new(),
                    host: "::1".into(),
                    port: 0,
                    shards: vec![],
                },
            ],
        },
    )
}

pub fn group_history_response() -> ResponseFrame {
    resp(
        14,
        GroupHistoryResponse {
            error_code: 0,
            rebalances: vec![
                RebalanceRecord {
                    generation_id: i32::MAX,
                    trigger: RebalanceCause {
                        kind: "session_expired".into(),
                        member_id: "m-2".into(),
                        client_id: "worker-β".into(),
                        client_host: "10.0.0.7".into(),
                        detail: None,
                    },
                    started_at_ms: u64::MAX,
                    barrier_ms: 3_000,
                    sync_ms: Some(12),
                    assignor: Some("range".into()),
                    leader_id: "m-1".into(),
                    members: 2,
                    waited_for: vec![
                        MemberWait {
                            member_id: "m-1".into(),
                            rejoin_ms: Some(0),
                        },
                        MemberWait {
                            member_id: "m-3".into(),
                            rejoin_ms: None,
                        },
                    ],
                    evicted: vec!["m-3".into()],
                    joined: vec![],
                    left: vec!["m-2".into(), "m-3".into()],
                    moved: Some(4),
                    changes: vec![MemberChange {
                        member_id: "m-1".into(),
                        gained: vec![tp("orders", &[2, 3])],
                        revoked: vec![tp("orders", &[i32::MAX])],
                    }],
                    omitted: u32::MAX,
                },
                RebalanceRecord::default(),
            ],
        },
    )
}

pub fn group_diagnosis_response() -> ResponseFrame {
    resp(
        15,
        GroupDiagnosisResponse {
            error_code: 0,
            state: "PreparingRebalance".into(),
            generation_id: -1,
            now_ms: u64::MAX,
            rebalance: Some(Box::new(RebalanceWait {
                phase: "join".into(),
                trigger: RebalanceCause {
                    kind: "member_left".into(),
                    member_id: "m-2".into(),
                    client_id: "ü".into(),
                    client_host: "::1".into(),
                    detail: Some("shutting down".into()),
                },
                started_at_ms: 1,
                phase_since_ms: 2,
                deadline_ms: Some(u64::MAX),
                stuck: true,
                waiting_for: vec![WaitingMember {
                    member_id: "m-3".into(),
                    group_instance_id: Some("pod-3".into()),
                    client_id: "worker".into(),
                    client_host: "10.0.0.8".into(),
                    last_heard_ms: 0,
                    leader: true,
                }],
                omitted: 7,
                pending_joins: u32::MAX,
            })),
            unowned: vec![tp("orders", &[0])],
            unowned_since_ms: Some(5),
            storm: true,
            rebalances_in_window: 9,
            storm_threshold: 5,
            storm_window_ms: 300_000,
        },
    )
}
