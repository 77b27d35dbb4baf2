//! Encode and decode of every message type (criterion).
//!
//! ```text
//! cargo bench -p muster-protocol --bench codec [-- FILTER]
//! ```
//!
//! Each message is a typical one: a consumer with one topic and one assignor, a group of 10
//! members where a list is involved, 10 partitions in offset requests. `encode` appends the whole
//! frame (length prefix included) to a reused buffer, as the server's connection writer does;
//! `decode` turns the payload (prefix excluded) back into the value, as the session does.
//! Short by design (2 s per benchmark); pass criterion's `--measurement-time` for more.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use muster_protocol::*;

const GROUP: &str = "orders-consumers";
const MEMBER: &str = "consumer-1-5d1f0a52-8a6e-4f6b-9d1e-2b7c3a9e4f10";
/// A consumer-protocol member id, as the member chooses it.
const CONSUMER: &str = "5d1f0a52-8a6e-4f6b-9d1e-2b7c3a9e4f10";

fn member(i: usize) -> String {
    format!("consumer-{i}-5d1f0a52-8a6e-4f6b-9d1e-{i:012}")
}

fn partitions(n: i32) -> Vec<TopicPartitions> {
    vec![TopicPartitions {
        topic: "orders".into(),
        partitions: (0..n).collect(),
    }]
}

fn requests() -> Vec<(&'static str, Request)> {
    vec![
        (
            "Hello",
            HelloRequest {
                protocol_version: PROTOCOL_VERSION,
                client_id: "consumer-1".into(),
                auth_token: None,
            }
            .into(),
        ),
        (
            "JoinGroup",
            JoinGroupRequest {
                group_id: GROUP.into(),
                member_id: MEMBER.into(),
                group_instance_id: None,
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 60_000,
                topics: vec!["orders".into()],
                assignors: vec![AssignorMetadata {
                    name: "cooperative-sticky".into(),
                    user_data: vec![0; 16],
                }],
                owned_partitions: partitions(3),
                reason: None,
            }
            .into(),
        ),
        (
            "SyncGroup(leader, 10 members)",
            SyncGroupRequest {
                group_id: GROUP.into(),
                generation_id: 7,
                member_id: MEMBER.into(),
                group_instance_id: None,
                assignor: Some("cooperative-sticky".into()),
                assignments: (0..10)
                    .map(|i| MemberAssignment {
                        member_id: member(i),
                        partitions: vec![TopicPartitions {
                            topic: "orders".into(),
                            partitions: vec![i as i32 * 3, i as i32 * 3 + 1, i as i32 * 3 + 2],
                        }],
                        user_data: Vec::new(),
                    })
                    .collect(),
            }
            .into(),
        ),
        (
            "Heartbeat",
            HeartbeatRequest {
                group_id: GROUP.into(),
                generation_id: 7,
                member_id: MEMBER.into(),
                group_instance_id: None,
            }
            .into(),
        ),
        (
            "LeaveGroup",
            LeaveGroupRequest {
                group_id: GROUP.into(),
                members: vec![LeavingMember {
                    member_id: MEMBER.into(),
                    group_instance_id: None,
                    reason: Some("shutting down".into()),
                }],
            }
            .into(),
        ),
        (
            "OffsetCommit(10 partitions)",
            OffsetCommitRequest {
                group_id: GROUP.into(),
                generation_id: 7,
                member_id: MEMBER.into(),
                group_instance_id: None,
                topics: vec![OffsetCommitTopic {
                    topic: "orders".into(),
                    partitions: (0..10)
                        .map(|p| OffsetCommitPartition {
                            partition: p,
                            offset: 1_000_000 + i64::from(p),
                            metadata: None,
                        })
                        .collect(),
                }],
            }
            .into(),
        ),
        (
            "OffsetFetch",
            OffsetFetchRequest {
                group_id: GROUP.into(),
                topics: Some(partitions(10)),
            }
            .into(),
        ),
        (
            "DescribeGroups",
            DescribeGroupsRequest {
                group_ids: vec![GROUP.into()],
            }
            .into(),
        ),
        (
            "ListGroups",
            ListGroupsRequest { states: Vec::new() }.into(),
        ),
        (
            "DeleteGroups",
            DeleteGroupsRequest {
                group_ids: vec![GROUP.into()],
            }
            .into(),
        ),
        (
            "CreateTopics",
            CreateTopicsRequest {
                topics: vec![TopicInfo {
                    topic: "orders".into(),
                    partitions: 30,
                }],
            }
            .into(),
        ),
        (
            "DescribeTopics",
            DescribeTopicsRequest { topics: None }.into(),
        ),
        (
            "FindCoordinator",
            FindCoordinatorRequest {
                key: "orders".into(),
            }
            .into(),
        ),
        ("DescribeCluster", DescribeClusterRequest {}.into()),
        (
            // A steady consumer-protocol heartbeat: nothing changed, so every optional field
            // is None (protocol §6.21).
            "ConsumerGroupHeartbeat",
            ConsumerGroupHeartbeatRequest {
                group_id: GROUP.into(),
                member_id: CONSUMER.into(),
                member_epoch: 12,
                rebalance_timeout_ms: -1,
                ..ConsumerGroupHeartbeatRequest::default()
            }
            .into(),
        ),
    ]
}

fn responses() -> Vec<(&'static str, Response)> {
    let joined = |i: usize| JoinedMember {
        member_id: member(i),
        group_instance_id: None,
        topics: vec!["orders".into()],
        user_data: vec![0; 16],
        owned_partitions: Vec::new(),
    };
    vec![
        (
            "Hello",
            HelloResponse {
                error_code: 0,
                min_version: 1,
                max_version: 1,
                server_id: "3f0b7c8e-1d2a-4b5c-9e8f-7a6b5c4d3e2f".into(),
            }
            .into(),
        ),
        (
            "JoinGroup(follower)",
            JoinGroupResponse {
                error_code: 0,
                generation_id: 7,
                assignor: Some("cooperative-sticky".into()),
                leader_id: member(0),
                member_id: MEMBER.into(),
                skip_assignment: false,
                members: Vec::new(),
                topics: Vec::new(),
            }
            .into(),
        ),
        (
            "JoinGroup(leader, 10 members)",
            JoinGroupResponse {
                error_code: 0,
                generation_id: 7,
                assignor: Some("cooperative-sticky".into()),
                leader_id: member(0),
                member_id: member(0),
                skip_assignment: false,
                members: (0..10).map(joined).collect(),
                topics: vec![TopicInfo {
                    topic: "orders".into(),
                    partitions: 30,
                }],
            }
            .into(),
        ),
        (
            "SyncGroup",
            SyncGroupResponse {
                error_code: 0,
                assignor: Some("cooperative-sticky".into()),
                partitions: partitions(3),
                user_data: Vec::new(),
            }
            .into(),
        ),
        ("Heartbeat", HeartbeatResponse { error_code: 0 }.into()),
        (
            "LeaveGroup",
            LeaveGroupResponse {
                error_code: 0,
                members: vec![LeaveResult {
                    member_id: MEMBER.into(),
                    group_instance_id: None,
                    error_code: 0,
                }],
            }
            .into(),
        ),
        (
            "OffsetCommit(10 partitions)",
            OffsetCommitResponse {
                error_code: 0,
                topics: vec![PartitionResults {
                    topic: "orders".into(),
                    partitions: (0..10)
                        .map(|partition| PartitionResult {
                            partition,
                            error_code: 0,
                        })
                        .collect(),
                }],
            }
            .into(),
        ),
        (
            "OffsetFetch(10 partitions)",
            OffsetFetchResponse {
                error_code: 0,
                topics: vec![FetchedTopic {
                    topic: "orders".into(),
                    partitions: (0..10)
                        .map(|partition| FetchedPartition {
                            partition,
                            offset: 1_000_000,
                            metadata: None,
                            error_code: 0,
                        })
                        .collect(),
                }],
            }
            .into(),
        ),
        (
            "DescribeGroups(10 members)",
            DescribeGroupsResponse {
                groups: vec![DescribedGroup {
                    error_code: 0,
                    group_id: GROUP.into(),
                    state: "Stable".into(),
                    generation_id: 7,
                    assignor: Some("cooperative-sticky".into()),
                    leader_id: member(0),
                    members: (0..10)
                        .map(|i| DescribedMember {
                            member_id: member(i),
                            group_instance_id: None,
                            client_id: format!("consumer-{i}"),
                            client_host: "10.0.0.7".into(),
                            topics: vec!["orders".into()],
                            assignment: partitions(3),
                            session_timeout_ms: 10_000,
                            last_seen_ms_ago: 1_200,
                            holding_rebalance: false,
                        })
                        .collect(),
                }],
            }
            .into(),
        ),
        (
            "ListGroups(10 groups)",
            ListGroupsResponse {
                error_code: 0,
                groups: (0..10)
                    .map(|i| ListedGroup {
                        group_id: format!("group-{i}"),
                        state: "Stable".into(),
                        members: 10,
                    })
                    .collect(),
            }
            .into(),
        ),
        (
            "DeleteGroups",
            DeleteGroupsResponse {
                results: vec![GroupResult {
                    group_id: GROUP.into(),
                    error_code: 0,
                }],
            }
            .into(),
        ),
        (
            "CreateTopics",
            CreateTopicsResponse {
                results: vec![TopicResult {
                    topic: "orders".into(),
                    error_code: 0,
                }],
            }
            .into(),
        ),
        (
            "DescribeTopics",
            DescribeTopicsResponse {
                error_code: 0,
                topics: vec![TopicInfo {
                    topic: "orders".into(),
                    partitions: 30,
                }],
            }
            .into(),
        ),
        (
            "Error",
            Response::error(ErrorCode::InvalidRequest, "unknown request tag 99"),
        ),
        (
            "ConsumerGroupHeartbeat (a new assignment, 10 partitions)",
            ConsumerGroupHeartbeatResponse {
                error_code: 0,
                error_message: None,
                member_id: CONSUMER.into(),
                member_epoch: 13,
                heartbeat_interval_ms: 5_000,
                assignment: Some(partitions(10)),
            }
            .into(),
        ),
        (
            "FindCoordinator",
            FindCoordinatorResponse {
                error_code: 0,
                node_id: "muster-1".into(),
                host: "10.0.0.7".into(),
                port: 7450,
            }
            .into(),
        ),
        (
            "DescribeCluster (answer: 3 nodes, 64 shards)",
            DescribeClusterResponse {
                error_code: 0,
                cluster: "muster".into(),
                shards: 64,
                nodes: (0..3u32)
                    .map(|n| ClusterNode {
                        node_id: format!("muster-{n}"),
                        host: format!("10.0.0.{n}"),
                        port: 7450,
                        shards: (0..64).filter(|s| s % 3 == n).collect(),
                    })
                    .collect(),
            }
            .into(),
        ),
    ]
}

fn bench_requests(c: &mut Criterion) {
    let mut group = c.benchmark_group("request");
    for (name, request) in requests() {
        let frame = RequestFrame::new(42, request);
        let mut payload = Vec::new();
        if encode_request_payload(&frame, &mut payload).is_err() {
            continue;
        }
        group.throughput(Throughput::Bytes(payload.len() as u64));
        let mut buf = Vec::with_capacity(64 * 1024);
        group.bench_function(format!("encode/{name}"), |b| {
            b.iter(|| {
                buf.clear();
                let _ = encode_request(black_box(&frame), &mut buf);
                black_box(buf.len())
            })
        });
        group.bench_function(format!("decode/{name}"), |b| {
            b.iter(|| black_box(decode_request(black_box(&payload))))
        });
    }
    group.finish();
}

fn bench_responses(c: &mut Criterion) {
    let mut group = c.benchmark_group("response");
    for (name, response) in responses() {
        let frame = ResponseFrame::new(42, response);
        let mut payload = Vec::new();
        if encode_response_payload(&frame, &mut payload).is_err() {
            continue;
        }
        group.throughput(Throughput::Bytes(payload.len() as u64));
        let mut buf = Vec::with_capacity(64 * 1024);
        group.bench_function(format!("encode/{name}"), |b| {
            b.iter(|| {
                buf.clear();
                let _ = encode_response(black_box(&frame), &mut buf);
                black_box(buf.len())
            })
        });
        group.bench_function(format!("decode/{name}"), |b| {
            b.iter(|| black_box(decode_response(black_box(&payload))))
        });
    }
    group.finish();
}

fn short() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = codec;
    config = short();
    targets = bench_requests, bench_responses
}
criterion_main!(codec);
