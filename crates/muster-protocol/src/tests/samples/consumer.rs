//! The samples of the consumer-protocol messages (protocol-v1 §7, docs/protocol.md §6.21) and
//! of GroupSimulate (§6.22), one non-trivial value each, in the style of `samples.rs`.

use super::{req, resp, tp};
use crate::*;

pub fn consumer_group_heartbeat_request() -> RequestFrame {
    req(
        16,
        ConsumerGroupHeartbeatRequest {
            group_id: "orders-ü".into(),
            member_id: "9f1c2b3a-4d5e-4f60-8a7b-6c5d4e3f2a1b".into(),
            member_epoch: i32::MAX,
            group_instance_id: Some("pod-0".into()),
            rack_id: None,
            rebalance_timeout_ms: -1,
            subscribed_topics: Some(vec!["orders".into(), "retörns".into()]),
            subscribed_topic_regex: None,
            server_assignor: Some("uniform".into()),
            owned_partitions: Some(vec![tp("orders", &[0, i32::MAX]), tp("x", &[])]),
        },
    )
}

pub fn consumer_group_describe_request() -> RequestFrame {
    req(
        17,
        ConsumerGroupDescribeRequest {
            group_ids: vec!["orders".into(), "gröup".into(), String::new()],
        },
    )
}

pub fn group_simulate_request() -> RequestFrame {
    req(
        18,
        GroupSimulateRequest {
            group_id: "orders-ü".into(),
            remove_members: vec!["m-1".into(), "ü-2".into()],
            add_members: u32::MAX,
            partitions: vec![
                TopicInfo {
                    topic: "orders".into(),
                    partitions: 12,
                },
                TopicInfo {
                    topic: "new".into(),
                    partitions: i32::MIN,
                },
            ],
        },
    )
}

pub fn consumer_group_heartbeat_response() -> ResponseFrame {
    resp(
        16,
        ConsumerGroupHeartbeatResponse {
            error_code: ErrorCode::None.code(),
            error_message: None,
            member_id: "9f1c2b3a-4d5e-4f60-8a7b-6c5d4e3f2a1b".into(),
            member_epoch: i32::MAX,
            heartbeat_interval_ms: 5_000,
            assignment: Some(vec![tp("orders", &[0, 1]), tp("ünïcode", &[])]),
        },
    )
}

pub fn consumer_group_describe_response() -> ResponseFrame {
    resp(
        17,
        ConsumerGroupDescribeResponse {
            groups: vec![
                DescribedConsumerGroup {
                    error_code: ErrorCode::None.code(),
                    group_id: "orders".into(),
                    state: "Reconciling".into(),
                    group_epoch: i32::MAX,
                    assignment_epoch: 4,
                    assignor: "range".into(),
                    members: vec![
                        ConsumerMember {
                            member_id: "m-1".into(),
                            group_instance_id: Some("pod-0".into()),
                            rack_id: Some("rack-α".into()),
                            member_epoch: 4,
                            client_id: "cli".into(),
                            client_host: "10.0.0.8".into(),
                            subscribed_topics: vec!["orders".into()],
                            subscribed_topic_regex: Some("ord.*".into()),
                            assignment: vec![tp("orders", &[0, 1, 2])],
                            target_assignment: vec![tp("orders", &[0])],
                        },
                        ConsumerMember::default(),
                    ],
                },
                DescribedConsumerGroup {
                    error_code: ErrorCode::GroupIdNotFound.code(),
                    group_id: "classic".into(),
                    state: "Dead".into(),
                    group_epoch: -1,
                    assignment_epoch: -1,
                    assignor: String::new(),
                    members: vec![],
                },
            ],
        },
    )
}

pub fn group_simulate_response() -> ResponseFrame {
    resp(
        18,
        GroupSimulateResponse {
            error_code: ErrorCode::None.code(),
            // Not what a server sends beside NONE: here only so that a sample covers `Some`.
            error_message: Some("ünïcode".into()),
            assignor: "uniform".into(),
            members: vec![
                SimulatedMember {
                    member_id: "m-1".into(),
                    change: "staying".into(),
                    kept: vec![tp("orders", &[0])],
                    lost: vec![tp("orders", &[1, i32::MAX])],
                    gained: vec![],
                },
                SimulatedMember {
                    member_id: "new-1".into(),
                    change: "added".into(),
                    kept: vec![],
                    lost: vec![],
                    gained: vec![tp("orders", &[1]), tp("new", &[0])],
                },
            ],
            stopped_partitions: u32::MAX,
        },
    )
}
