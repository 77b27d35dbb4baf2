//! Golden vectors: every ```` ```hex <name> ```` block of `docs/protocol.md` is the whole frame
//! (length prefix included) of the value of the same name in the table below. The test fails if
//! the bytes differ, if a block has no value here, or if a value here has no block in the doc,
//! so the worked examples that client authors copy cannot drift from the code.
//!
//! Block syntax: hex bytes separated by whitespace; `#` starts a comment to the end of the line.

use std::collections::BTreeMap;

use muster_protocol::*;

/// A member id as the server makes them (`{client_id}-{uuid}`).
const MEMBER: &str = "c1-3f2a8e4c-1b2d-4e5f-9a0b-1c2d3e4f5a6b";

/// A consumer-protocol member id, as the member chooses it (a random UUID).
const CONSUMER: &str = "9f1c2b3a-4d5e-4f60-8a7b-6c5d4e3f2a1b";

#[derive(Debug, PartialEq)]
enum Golden {
    Req(RequestFrame),
    Resp(ResponseFrame),
}

fn orders_0_1_2() -> Vec<TopicPartitions> {
    orders(&[0, 1, 2])
}

fn orders(partitions: &[i32]) -> Vec<TopicPartitions> {
    vec![TopicPartitions {
        topic: "orders".into(),
        partitions: partitions.to_vec(),
    }]
}

fn table() -> BTreeMap<&'static str, Golden> {
    use Golden::{Req, Resp};
    BTreeMap::from([
        (
            "hello-request",
            Req(RequestFrame::new(
                1,
                HelloRequest {
                    protocol_version: 1,
                    client_id: "billing-consumer".into(),
                    auth_token: Some("s3cret".into()),
                },
            )),
        ),
        (
            "hello-response",
            Resp(ResponseFrame::new(
                1,
                HelloResponse {
                    error_code: ErrorCode::None.code(),
                    min_version: 1,
                    max_version: 1,
                    server_id: "7f3c9a2e-5b1d-4c8f-a6e0-3d2b1c9f8e47".into(),
                },
            )),
        ),
        (
            "join-group-request",
            Req(RequestFrame::new(
                2,
                JoinGroupRequest {
                    group_id: "orders".into(),
                    member_id: String::new(),
                    group_instance_id: None,
                    session_timeout_ms: 10_000,
                    rebalance_timeout_ms: 30_000,
                    topics: vec!["orders".into()],
                    assignors: vec![AssignorMetadata {
                        name: "range".into(),
                        user_data: vec![],
                    }],
                    owned_partitions: vec![],
                    reason: None,
                },
            )),
        ),
        (
            "join-group-member-id-required",
            Resp(ResponseFrame::new(
                2,
                JoinGroupResponse {
                    error_code: ErrorCode::MemberIdRequired.code(),
                    generation_id: -1,
                    assignor: None,
                    leader_id: String::new(),
                    member_id: MEMBER.into(),
                    skip_assignment: false,
                    members: vec![],
                    topics: vec![],
                },
            )),
        ),
        (
            "join-group-response",
            Resp(ResponseFrame::new(
                3,
                JoinGroupResponse {
                    error_code: ErrorCode::None.code(),
                    generation_id: 1,
                    assignor: Some("range".into()),
                    leader_id: MEMBER.into(),
                    member_id: MEMBER.into(),
                    skip_assignment: false,
                    members: vec![JoinedMember {
                        member_id: MEMBER.into(),
                        group_instance_id: None,
                        topics: vec!["orders".into()],
                        user_data: vec![],
                        owned_partitions: vec![],
                    }],
                    topics: vec![TopicInfo {
                        topic: "orders".into(),
                        partitions: 3,
                    }],
                },
            )),
        ),
        (
            "sync-group-request",
            Req(RequestFrame::new(
                4,
                SyncGroupRequest {
                    group_id: "orders".into(),
                    generation_id: 1,
                    member_id: MEMBER.into(),
                    group_instance_id: None,
                    assignor: Some("range".into()),
                    assignments: vec![MemberAssignment {
                        member_id: MEMBER.into(),
                        partitions: orders_0_1_2(),
                        user_data: vec![],
                    }],
                },
            )),
        ),
        (
            "sync-group-response",
            Resp(ResponseFrame::new(
                4,
                SyncGroupResponse {
                    error_code: ErrorCode::None.code(),
                    assignor: Some("range".into()),
                    partitions: orders_0_1_2(),
                    user_data: vec![],
                },
            )),
        ),
        (
            "heartbeat-request",
            Req(RequestFrame::new(
                5,
                HeartbeatRequest {
                    group_id: "orders".into(),
                    generation_id: 1,
                    member_id: MEMBER.into(),
                    group_instance_id: None,
                },
            )),
        ),
        (
            "heartbeat-response",
            Resp(ResponseFrame::new(
                5,
                HeartbeatResponse {
                    error_code: ErrorCode::RebalanceInProgress.code(),
                },
            )),
        ),
        (
            "offset-commit-request",
            Req(RequestFrame::new(
                6,
                OffsetCommitRequest {
                    group_id: "orders".into(),
                    generation_id: 1,
                    member_id: MEMBER.into(),
                    group_instance_id: None,
                    topics: vec![OffsetCommitTopic {
                        topic: "orders".into(),
                        partitions: vec![
                            OffsetCommitPartition {
                                partition: 0,
                                offset: 42,
                                metadata: None,
                            },
                            OffsetCommitPartition {
                                partition: 1,
                                offset: 7,
                                metadata: Some("host-a".into()),
                            },
                        ],
                    }],
                },
            )),
        ),
        (
            "offset-fetch-response",
            Resp(ResponseFrame::new(
                7,
                OffsetFetchResponse {
                    error_code: ErrorCode::None.code(),
                    topics: vec![FetchedTopic {
                        topic: "orders".into(),
                        partitions: vec![
                            FetchedPartition {
                                partition: 0,
                                offset: 42,
                                metadata: None,
                                error_code: 0,
                            },
                            FetchedPartition {
                                partition: 2,
                                offset: -1,
                                metadata: None,
                                error_code: 0,
                            },
                        ],
                    }],
                },
            )),
        ),
        (
            "find-coordinator-request",
            Req(RequestFrame::new(
                8,
                FindCoordinatorRequest {
                    key: "orders".into(),
                },
            )),
        ),
        (
            "find-coordinator-response",
            Resp(ResponseFrame::new(
                8,
                FindCoordinatorResponse {
                    error_code: ErrorCode::None.code(),
                    node_id: "muster-1".into(),
                    host: "10.0.0.7".into(),
                    port: 7450,
                },
            )),
        ),
        (
            "describe-cluster-request",
            Req(RequestFrame::new(9, DescribeClusterRequest {})),
        ),
        (
            "describe-cluster-response",
            Resp(ResponseFrame::new(
                9,
                DescribeClusterResponse {
                    error_code: ErrorCode::None.code(),
                    cluster: "muster".into(),
                    shards: 1,
                    nodes: vec![ClusterNode {
                        node_id: "muster-1".into(),
                        host: "10.0.0.7".into(),
                        port: 7450,
                        shards: vec![0],
                    }],
                },
            )),
        ),
        (
            "group-history-request",
            Req(RequestFrame::new(
                10,
                GroupHistoryRequest {
                    group_id: "orders".into(),
                    limit: 5,
                },
            )),
        ),
        (
            "group-history-response",
            Resp(ResponseFrame::new(
                10,
                GroupHistoryResponse {
                    error_code: ErrorCode::GroupIdNotFound.code(),
                    rebalances: Vec::new(),
                },
            )),
        ),
        (
            "group-diagnosis-request",
            Req(RequestFrame::new(
                11,
                GroupDiagnosisRequest {
                    group_id: "orders".into(),
                },
            )),
        ),
        (
            "group-diagnosis-response",
            Resp(ResponseFrame::new(
                11,
                GroupDiagnosisResponse {
                    error_code: ErrorCode::None.code(),
                    state: "Stable".into(),
                    generation_id: 3,
                    now_ms: 1_700_000_000_000,
                    rebalance: None,
                    unowned: Vec::new(),
                    unowned_since_ms: None,
                    storm: false,
                    rebalances_in_window: 1,
                    storm_threshold: 5,
                    storm_window_ms: 300_000,
                },
            )),
        ),
        (
            "consumer-group-heartbeat-request",
            Req(RequestFrame::new(
                12,
                ConsumerGroupHeartbeatRequest {
                    group_id: "orders".into(),
                    member_id: CONSUMER.into(),
                    member_epoch: 0,
                    group_instance_id: None,
                    rack_id: None,
                    rebalance_timeout_ms: 300_000,
                    subscribed_topics: Some(vec!["orders".into()]),
                    subscribed_topic_regex: None,
                    server_assignor: None,
                    owned_partitions: Some(Vec::new()),
                },
            )),
        ),
        (
            "consumer-group-heartbeat-response",
            Resp(ResponseFrame::new(
                12,
                ConsumerGroupHeartbeatResponse {
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                    member_id: CONSUMER.into(),
                    member_epoch: 1,
                    heartbeat_interval_ms: 5_000,
                    assignment: Some(orders_0_1_2()),
                },
            )),
        ),
        (
            "consumer-group-heartbeat-fenced",
            Resp(ResponseFrame::new(
                13,
                ConsumerGroupHeartbeatResponse {
                    error_code: ErrorCode::FencedMemberEpoch.code(),
                    error_message: None,
                    member_id: String::new(),
                    member_epoch: 0,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                },
            )),
        ),
        (
            "consumer-group-describe-request",
            Req(RequestFrame::new(
                14,
                ConsumerGroupDescribeRequest {
                    group_ids: vec!["orders".into()],
                },
            )),
        ),
        (
            "consumer-group-describe-response",
            Resp(ResponseFrame::new(
                14,
                ConsumerGroupDescribeResponse {
                    groups: vec![DescribedConsumerGroup {
                        error_code: ErrorCode::None.code(),
                        group_id: "orders".into(),
                        state: "Stable".into(),
                        group_epoch: 1,
                        assignment_epoch: 1,
                        assignor: "uniform".into(),
                        members: vec![ConsumerMember {
                            member_id: CONSUMER.into(),
                            group_instance_id: None,
                            rack_id: None,
                            member_epoch: 1,
                            client_id: "c1".into(),
                            client_host: "10.0.0.8".into(),
                            subscribed_topics: vec!["orders".into()],
                            subscribed_topic_regex: None,
                            assignment: orders_0_1_2(),
                            target_assignment: orders_0_1_2(),
                        }],
                    }],
                },
            )),
        ),
        (
            "group-simulate-request",
            Req(RequestFrame::new(
                15,
                GroupSimulateRequest {
                    group_id: "orders".into(),
                    remove_members: Vec::new(),
                    add_members: 1,
                    partitions: Vec::new(),
                },
            )),
        ),
        (
            "group-simulate-response",
            Resp(ResponseFrame::new(
                15,
                GroupSimulateResponse {
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                    assignor: "uniform".into(),
                    members: vec![
                        SimulatedMember {
                            member_id: CONSUMER.into(),
                            change: "staying".into(),
                            kept: orders(&[0, 1]),
                            lost: orders(&[2]),
                            gained: Vec::new(),
                        },
                        SimulatedMember {
                            member_id: "new-1".into(),
                            change: "added".into(),
                            kept: Vec::new(),
                            lost: Vec::new(),
                            gained: orders(&[2]),
                        },
                    ],
                    stopped_partitions: 1,
                },
            )),
        ),
        (
            "ownership-epochs-request",
            Req(RequestFrame::new(
                16,
                OwnershipEpochsRequest {
                    group_id: "orders".into(),
                    generation_id: 3,
                    member_id: MEMBER.into(),
                    group_instance_id: None,
                },
            )),
        ),
        (
            "ownership-epochs-response",
            Resp(ResponseFrame::new(
                16,
                OwnershipEpochsResponse {
                    error_code: ErrorCode::None.code(),
                    generation_id: 3,
                    topics: vec![TopicEpochs {
                        topic: "orders".into(),
                        partitions: vec![
                            PartitionEpoch {
                                partition: 0,
                                epoch: 1,
                            },
                            PartitionEpoch {
                                partition: 1,
                                epoch: 1,
                            },
                            PartitionEpoch {
                                partition: 2,
                                epoch: 3,
                            },
                        ],
                    }],
                },
            )),
        ),
        (
            "offset-history-request",
            Req(RequestFrame::new(
                17,
                OffsetHistoryRequest {
                    group_id: "orders".into(),
                    topic: Some("orders".into()),
                    partition: Some(0),
                    limit: 1,
                },
            )),
        ),
        (
            "offset-history-response",
            Resp(ResponseFrame::new(
                17,
                OffsetHistoryResponse {
                    error_code: ErrorCode::None.code(),
                    topics: vec![TopicHistory {
                        topic: "orders".into(),
                        partitions: vec![PartitionHistory {
                            partition: 0,
                            error_code: ErrorCode::None.code(),
                            entries: vec![OffsetHistoryEntry {
                                seq: 7,
                                kind: "commit".into(),
                                offset: 42,
                                metadata: None,
                                committed_at_ms: 1_700_000_000_000,
                                member_id: MEMBER.into(),
                                client_id: "c1".into(),
                                client_host: "10.0.0.8".into(),
                                generation_id: 1,
                            }],
                        }],
                    }],
                    omitted: 0,
                },
            )),
        ),
        (
            "offset-reset-request",
            Req(RequestFrame::new(
                18,
                OffsetResetRequest {
                    group_id: "orders".into(),
                    to: ResetTo::Time {
                        at_ms: 1_699_999_999_000,
                    },
                    topics: Vec::new(),
                    execute: false,
                },
            )),
        ),
        (
            "offset-reset-response",
            Resp(ResponseFrame::new(
                18,
                OffsetResetResponse {
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                    executed: false,
                    recorded_at_ms: 0,
                    topics: vec![ResetTopic {
                        topic: "orders".into(),
                        partitions: vec![ResetPartition {
                            partition: 0,
                            current: 42,
                            new: 40,
                            error_code: ErrorCode::None.code(),
                        }],
                    }],
                },
            )),
        ),
        (
            "offset-restore-request",
            Req(RequestFrame::new(
                19,
                OffsetRestoreRequest {
                    group_id: "orders".into(),
                    execute: true,
                },
            )),
        ),
        (
            "offset-restore-response",
            Resp(ResponseFrame::new(
                19,
                OffsetRestoreResponse {
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                    executed: true,
                    quarantined_at_ms: 1_700_000_000_000,
                    drop_at_ms: 1_700_604_800_000,
                    topics: vec![FetchedTopic {
                        topic: "orders".into(),
                        partitions: vec![FetchedPartition {
                            partition: 0,
                            offset: 42,
                            metadata: None,
                            error_code: ErrorCode::None.code(),
                        }],
                    }],
                },
            )),
        ),
        (
            "error-message-too-large",
            Resp(ResponseFrame::new(
                0,
                Response::error(ErrorCode::MessageTooLarge, "frame too large"),
            )),
        ),
    ])
}

/// Every `hex <name>` block of the document, in order, as (name, bytes).
fn hex_blocks(doc: &str) -> Vec<(String, Vec<u8>)> {
    let mut blocks = Vec::new();
    let mut lines = doc.lines().enumerate();
    while let Some((start, line)) = lines.next() {
        let Some(name) = line.trim().strip_prefix("```hex ") else {
            continue;
        };
        let name = name.trim().to_owned();
        let mut bytes = Vec::new();
        let mut closed = false;
        for (n, line) in lines.by_ref() {
            if line.trim() == "```" {
                closed = true;
                break;
            }
            let data = line.split('#').next().unwrap_or_default();
            for token in data.split_whitespace() {
                let decoded = hex::decode(token).unwrap_or_else(|e| {
                    panic!("block {name:?}, line {}: bad hex {token:?}: {e}", n + 1)
                });
                bytes.extend(decoded);
            }
        }
        assert!(
            closed,
            "block {name:?} opened on line {} is not closed",
            start + 1
        );
        blocks.push((name, bytes));
    }
    blocks
}

fn encode(value: &Golden) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        Golden::Req(f) => encode_request(f, &mut out),
        Golden::Resp(f) => encode_response(f, &mut out),
    }
    .expect("golden values encode");
    out
}

#[test]
fn doc_hex_examples_match_the_codec() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/protocol.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let blocks = hex_blocks(&doc);
    let table = table();

    let mut seen = Vec::new();
    for (name, bytes) in &blocks {
        assert!(
            !seen.contains(name),
            "block {name:?} appears twice in the doc"
        );
        seen.push(name.clone());
        let value = table
            .get(name.as_str())
            .unwrap_or_else(|| panic!("doc block {name:?} has no value in tests/golden.rs"));

        // The doc's bytes are exactly our encoding of the value...
        let ours = encode(value);
        assert_eq!(
            hex::encode(bytes),
            hex::encode(&ours),
            "block {name:?}: doc bytes (left) differ from the encoding (right)"
        );

        // ...and they decode back to it through the receiving side's path.
        let (payload, consumed) = split_frame(bytes, DEFAULT_MAX_FRAME_BYTES)
            .unwrap_or_else(|e| panic!("block {name:?}: {e}"))
            .unwrap_or_else(|| panic!("block {name:?}: not a whole frame"));
        assert_eq!(
            consumed,
            bytes.len(),
            "block {name:?}: bytes after the frame"
        );
        let decoded = match value {
            Golden::Req(_) => decode_request(payload).map(Golden::Req),
            Golden::Resp(_) => decode_response(payload).map(Golden::Resp),
        };
        assert_eq!(decoded.as_ref(), Ok(value), "block {name:?}: decode");
    }
    for name in table.keys() {
        assert!(
            seen.iter().any(|s| s == name),
            "value {name:?} has no ```hex {name} block in docs/protocol.md"
        );
    }
}

#[test]
fn block_parser_reads_comments_and_whitespace() {
    let doc = "text\n```hex a\n00 01 # c\n  ff\n# only a comment\n```\n```rust\n```\n";
    assert_eq!(hex_blocks(doc), vec![("a".to_owned(), vec![0, 1, 0xff])]);
}
