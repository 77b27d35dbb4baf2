//! proptest generators for the consumer-protocol messages (protocol-v1 §7) and GroupSimulate.
//! `strategies.rs`'s `request()` and `response()` give each its own arm, so that the round-trip
//! and bincode-compatibility properties cover them as often as any other variant.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use super::{opt_text, text, texts, topic_info, topic_partitions, tps};
use crate::*;

pub fn heartbeat_request() -> impl Strategy<Value = ConsumerGroupHeartbeatRequest> {
    (
        (text(), text(), any::<i32>(), opt_text(), opt_text()),
        (
            any::<i32>(),
            option::of(texts()),
            opt_text(),
            opt_text(),
            option::of(tps()),
        ),
    )
        .prop_map(
            |(
                (group_id, member_id, member_epoch, group_instance_id, rack_id),
                (
                    rebalance_timeout_ms,
                    subscribed_topics,
                    subscribed_topic_regex,
                    server_assignor,
                    owned_partitions,
                ),
            )| ConsumerGroupHeartbeatRequest {
                group_id,
                member_id,
                member_epoch,
                group_instance_id,
                rack_id,
                rebalance_timeout_ms,
                subscribed_topics,
                subscribed_topic_regex,
                server_assignor,
                owned_partitions,
            },
        )
}

pub fn simulate_request() -> impl Strategy<Value = GroupSimulateRequest> {
    (text(), texts(), any::<u32>(), vec(topic_info(), 0..3)).prop_map(
        |(group_id, remove_members, add_members, partitions)| GroupSimulateRequest {
            group_id,
            remove_members,
            add_members,
            partitions,
        },
    )
}

pub fn heartbeat_response() -> impl Strategy<Value = ConsumerGroupHeartbeatResponse> {
    (
        any::<i16>(),
        opt_text(),
        text(),
        any::<i32>(),
        any::<i32>(),
        option::of(tps()),
    )
        .prop_map(
            |(
                error_code,
                error_message,
                member_id,
                member_epoch,
                heartbeat_interval_ms,
                assignment,
            )| {
                ConsumerGroupHeartbeatResponse {
                    error_code,
                    error_message,
                    member_id,
                    member_epoch,
                    heartbeat_interval_ms,
                    assignment,
                }
            },
        )
}

fn consumer_member() -> impl Strategy<Value = ConsumerMember> {
    (
        (text(), opt_text(), opt_text(), any::<i32>(), text()),
        (text(), texts(), opt_text(), tps(), tps()),
    )
        .prop_map(
            |(
                (member_id, group_instance_id, rack_id, member_epoch, client_id),
                (
                    client_host,
                    subscribed_topics,
                    subscribed_topic_regex,
                    assignment,
                    target_assignment,
                ),
            )| ConsumerMember {
                member_id,
                group_instance_id,
                rack_id,
                member_epoch,
                client_id,
                client_host,
                subscribed_topics,
                subscribed_topic_regex,
                assignment,
                target_assignment,
            },
        )
}

pub fn described_consumer_group() -> impl Strategy<Value = DescribedConsumerGroup> {
    (
        any::<i16>(),
        text(),
        text(),
        any::<i32>(),
        any::<i32>(),
        text(),
        vec(consumer_member(), 0..3),
    )
        .prop_map(
            |(error_code, group_id, state, group_epoch, assignment_epoch, assignor, members)| {
                DescribedConsumerGroup {
                    error_code,
                    group_id,
                    state,
                    group_epoch,
                    assignment_epoch,
                    assignor,
                    members,
                }
            },
        )
}

fn simulated_member() -> impl Strategy<Value = SimulatedMember> {
    (
        text(),
        text(),
        vec(topic_partitions(), 0..2),
        vec(topic_partitions(), 0..2),
        vec(topic_partitions(), 0..2),
    )
        .prop_map(|(member_id, change, kept, lost, gained)| SimulatedMember {
            member_id,
            change,
            kept,
            lost,
            gained,
        })
}

pub fn simulate_response() -> impl Strategy<Value = GroupSimulateResponse> {
    (
        any::<i16>(),
        opt_text(),
        text(),
        vec(simulated_member(), 0..3),
        any::<u32>(),
    )
        .prop_map(
            |(error_code, error_message, assignor, members, stopped_partitions)| {
                GroupSimulateResponse {
                    error_code,
                    error_message,
                    assignor,
                    members,
                    stopped_partitions,
                }
            },
        )
}
