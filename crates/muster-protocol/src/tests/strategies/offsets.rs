//! proptest generators for the offset-protection messages (docs/protocol.md §6.23–§6.25).
//! `strategies.rs`'s `request()` and `response()` give each its own arm, so that the round-trip
//! and bincode-compatibility properties cover them as often as any other variant.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use super::{fetched_topic, opt_text, text, tps};
use crate::*;

pub fn ownership_epochs_request() -> impl Strategy<Value = OwnershipEpochsRequest> {
    (text(), any::<i32>(), text(), opt_text()).prop_map(
        |(group_id, generation_id, member_id, group_instance_id)| OwnershipEpochsRequest {
            group_id,
            generation_id,
            member_id,
            group_instance_id,
        },
    )
}

pub fn offset_history_request() -> impl Strategy<Value = OffsetHistoryRequest> {
    (text(), opt_text(), option::of(any::<i32>()), any::<u32>()).prop_map(
        |(group_id, topic, partition, limit)| OffsetHistoryRequest {
            group_id,
            topic,
            partition,
            limit,
        },
    )
}

fn reset_to() -> impl Strategy<Value = ResetTo> {
    prop_oneof![
        any::<u64>().prop_map(|at_ms| ResetTo::Time { at_ms }),
        Just(ResetTo::EarliestRecorded),
        any::<i64>().prop_map(|delta| ResetTo::ShiftBy { delta }),
        any::<i64>().prop_map(|offset| ResetTo::Offset { offset }),
    ]
}

pub fn offset_reset_request() -> impl Strategy<Value = OffsetResetRequest> {
    (text(), reset_to(), tps(), any::<bool>()).prop_map(|(group_id, to, topics, execute)| {
        OffsetResetRequest {
            group_id,
            to,
            topics,
            execute,
        }
    })
}

pub fn offset_restore_request() -> impl Strategy<Value = OffsetRestoreRequest> {
    (text(), any::<bool>())
        .prop_map(|(group_id, execute)| OffsetRestoreRequest { group_id, execute })
}

pub fn ownership_epochs_response() -> impl Strategy<Value = OwnershipEpochsResponse> {
    let partition = (any::<i32>(), any::<i32>())
        .prop_map(|(partition, epoch)| PartitionEpoch { partition, epoch });
    let topic = (text(), vec(partition, 0..3))
        .prop_map(|(topic, partitions)| TopicEpochs { topic, partitions });
    (any::<i16>(), any::<i32>(), vec(topic, 0..3)).prop_map(
        |(error_code, generation_id, topics)| OwnershipEpochsResponse {
            error_code,
            generation_id,
            topics,
        },
    )
}

fn history_entry() -> impl Strategy<Value = OffsetHistoryEntry> {
    (
        (any::<u64>(), text(), any::<i64>(), opt_text(), any::<u64>()),
        (text(), text(), text(), any::<i32>()),
    )
        .prop_map(
            |(
                (seq, kind, offset, metadata, committed_at_ms),
                (member_id, client_id, client_host, generation_id),
            )| OffsetHistoryEntry {
                seq,
                kind,
                offset,
                metadata,
                committed_at_ms,
                member_id,
                client_id,
                client_host,
                generation_id,
            },
        )
}

pub fn offset_history_response() -> impl Strategy<Value = OffsetHistoryResponse> {
    let partition = (any::<i32>(), any::<i16>(), vec(history_entry(), 0..3)).prop_map(
        |(partition, error_code, entries)| PartitionHistory {
            partition,
            error_code,
            entries,
        },
    );
    let topic = (text(), vec(partition, 0..3))
        .prop_map(|(topic, partitions)| TopicHistory { topic, partitions });
    (any::<i16>(), vec(topic, 0..3), any::<u32>()).prop_map(|(error_code, topics, omitted)| {
        OffsetHistoryResponse {
            error_code,
            topics,
            omitted,
        }
    })
}

pub fn offset_reset_response() -> impl Strategy<Value = OffsetResetResponse> {
    let partition = (any::<i32>(), any::<i64>(), any::<i64>(), any::<i16>()).prop_map(
        |(partition, current, new, error_code)| ResetPartition {
            partition,
            current,
            new,
            error_code,
        },
    );
    let topic = (text(), vec(partition, 0..3))
        .prop_map(|(topic, partitions)| ResetTopic { topic, partitions });
    (
        any::<i16>(),
        opt_text(),
        any::<bool>(),
        any::<u64>(),
        vec(topic, 0..3),
    )
        .prop_map(
            |(error_code, error_message, executed, recorded_at_ms, topics)| OffsetResetResponse {
                error_code,
                error_message,
                executed,
                recorded_at_ms,
                topics,
            },
        )
}

pub fn offset_restore_response() -> impl Strategy<Value = OffsetRestoreResponse> {
    (
        any::<i16>(),
        opt_text(),
        any::<bool>(),
        any::<u64>(),
        any::<u64>(),
        vec(fetched_topic(), 0..3),
    )
        .prop_map(
            |(error_code, error_message, executed, quarantined_at_ms, drop_at_ms, topics)| {
                OffsetRestoreResponse {
                    error_code,
                    error_message,
                    executed,
                    quarantined_at_ms,
                    drop_at_ms,
                    topics,
                }
            },
        )
}
