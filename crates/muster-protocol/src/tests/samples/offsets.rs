//! The samples of the offset-protection messages (docs/protocol.md §6.23–§6.25): one
//! non-trivial value each, in the style of `samples.rs` (Some and None, empty and non-empty
//! sequences, non-ASCII strings, extreme integers).

use super::{req, resp, tp};
use crate::*;

pub fn ownership_epochs_request() -> RequestFrame {
    req(
        19,
        OwnershipEpochsRequest {
            group_id: "orders-ü".into(),
            generation_id: i32::MAX,
            member_id: "c-1".into(),
            group_instance_id: Some("pod-0".into()),
        },
    )
}

pub fn offset_history_request() -> RequestFrame {
    req(
        20,
        OffsetHistoryRequest {
            group_id: "orders".into(),
            topic: Some("ördërs".into()),
            partition: Some(i32::MIN),
            limit: u32::MAX,
        },
    )
}

pub fn offset_reset_request() -> RequestFrame {
    req(
        21,
        OffsetResetRequest {
            group_id: "orders".into(),
            to: ResetTo::ShiftBy { delta: i64::MIN },
            topics: vec![tp("orders", &[0, i32::MAX]), tp("ünïcode", &[])],
            execute: true,
        },
    )
}

pub fn offset_restore_request() -> RequestFrame {
    req(
        u32::MAX,
        OffsetRestoreRequest {
            group_id: "gröup".into(),
            execute: true,
        },
    )
}

pub fn ownership_epochs_response() -> ResponseFrame {
    resp(
        19,
        OwnershipEpochsResponse {
            error_code: ErrorCode::None.code(),
            generation_id: i32::MAX,
            topics: vec![
                TopicEpochs {
                    topic: "orders".into(),
                    partitions: vec![
                        PartitionEpoch {
                            partition: 0,
                            epoch: 1,
                        },
                        PartitionEpoch {
                            partition: i32::MAX,
                            epoch: i32::MAX,
                        },
                    ],
                },
                TopicEpochs {
                    topic: "ünïcode".into(),
                    partitions: vec![],
                },
            ],
        },
    )
}

pub fn offset_history_response() -> ResponseFrame {
    resp(
        20,
        OffsetHistoryResponse {
            error_code: ErrorCode::None.code(),
            topics: vec![
                TopicHistory {
                    topic: "orders".into(),
                    partitions: vec![
                        PartitionHistory {
                            partition: 0,
                            error_code: ErrorCode::None.code(),
                            entries: vec![
                                OffsetHistoryEntry {
                                    seq: u64::MAX,
                                    kind: "reset".into(),
                                    offset: -1,
                                    metadata: None,
                                    committed_at_ms: u64::MAX,
                                    member_id: "ops-ü".into(),
                                    client_id: "muster-cli".into(),
                                    client_host: "::1".into(),
                                    generation_id: -1,
                                },
                                OffsetHistoryEntry {
                                    seq: 0,
                                    kind: "commit".into(),
                                    offset: i64::MAX,
                                    metadata: Some("m€ta".into()),
                                    committed_at_ms: 0,
                                    member_id: "c-1".into(),
                                    client_id: "cli".into(),
                                    client_host: "10.0.0.8".into(),
                                    generation_id: i32::MAX,
                                },
                            ],
                        },
                        PartitionHistory {
                            partition: i32::MAX,
                            error_code: ErrorCode::None.code(),
                            entries: vec![],
                        },
                    ],
                },
                TopicHistory {
                    topic: "secret".into(),
                    partitions: vec![PartitionHistory {
                        partition: 0,
                        error_code: ErrorCode::TopicAuthorizationFailed.code(),
                        entries: vec![],
                    }],
                },
            ],
            omitted: u32::MAX,
        },
    )
}

pub fn offset_reset_response() -> ResponseFrame {
    resp(
        21,
        OffsetResetResponse {
            error_code: ErrorCode::InvalidRequest.code(),
            error_message: Some("history of orders-1 does not reach back — ü".into()),
            executed: false,
            recorded_at_ms: u64::MAX,
            topics: vec![ResetTopic {
                topic: "orders".into(),
                partitions: vec![
                    ResetPartition {
                        partition: 0,
                        current: i64::MAX,
                        new: -1,
                        error_code: ErrorCode::None.code(),
                    },
                    ResetPartition {
                        partition: 1,
                        current: -1,
                        new: -1,
                        error_code: ErrorCode::UnknownTopicOrPartition.code(),
                    },
                ],
            }],
        },
    )
}

pub fn offset_restore_response() -> ResponseFrame {
    resp(
        u32::MAX,
        OffsetRestoreResponse {
            error_code: ErrorCode::None.code(),
            error_message: None,
            executed: true,
            quarantined_at_ms: 1,
            drop_at_ms: u64::MAX,
            topics: vec![FetchedTopic {
                topic: "orders".into(),
                partitions: vec![
                    FetchedPartition {
                        partition: 0,
                        offset: 42,
                        metadata: Some("m€ta".into()),
                        error_code: ErrorCode::None.code(),
                    },
                    FetchedPartition {
                        partition: 1,
                        offset: i64::MAX,
                        metadata: None,
                        error_code: ErrorCode::None.code(),
                    },
                ],
            }],
        },
    )
}

/// One request per [`ResetTo`] variant (the sample above is `ShiftBy`), so that each variant's
/// encoding is round-tripped and compared with bincode.
pub fn reset_targets() -> [ResetTo; 4] {
    [
        ResetTo::Time { at_ms: u64::MAX },
        ResetTo::EarliestRecorded,
        ResetTo::ShiftBy { delta: -1 },
        ResetTo::Offset { offset: i64::MAX },
    ]
}
