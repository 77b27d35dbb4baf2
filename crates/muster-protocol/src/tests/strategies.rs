//! proptest generators for every wire type. Sizes are kept small (short strings, at most a few
//! elements per sequence) so that a few hundred cases run in well under a second. The
//! consumer-protocol messages and GroupSimulate have theirs in `strategies/consumer.rs`, the
//! offset-protection messages in `strategies/offsets.rs`.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use crate::*;

mod consumer;
mod offsets;

/// Short strings of arbitrary Unicode scalar values (including multi-byte ones).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9._-]{1,12}",
        any::<char>().prop_map(String::from),
        "\\PC{0,8}",
    ]
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    option::of(text())
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..6)
}

fn texts() -> impl Strategy<Value = Vec<String>> {
    vec(text(), 0..4)
}

fn topic_partitions() -> impl Strategy<Value = TopicPartitions> {
    (text(), vec(any::<i32>(), 0..4))
        .prop_map(|(topic, partitions)| TopicPartitions { topic, partitions })
}

fn tps() -> impl Strategy<Value = Vec<TopicPartitions>> {
    vec(topic_partitions(), 0..3)
}

fn topic_info() -> impl Strategy<Value = TopicInfo> {
    (text(), any::<i32>()).prop_map(|(topic, partitions)| TopicInfo { topic, partitions })
}

fn assignor_metadata() -> impl Strategy<Value = AssignorMetadata> {
    (text(), bytes()).prop_map(|(name, user_data)| AssignorMetadata { name, user_data })
}

fn member_assignment() -> impl Strategy<Value = MemberAssignment> {
    (text(), tps(), bytes()).prop_map(|(member_id, partitions, user_data)| MemberAssignment {
        member_id,
        partitions,
        user_data,
    })
}

fn leaving_member() -> impl Strategy<Value = LeavingMember> {
    (text(), opt_text(), opt_text()).prop_map(|(member_id, group_instance_id, reason)| {
        LeavingMember {
            member_id,
            group_instance_id,
            reason,
        }
    })
}

fn offset_commit_topic() -> impl Strategy<Value = OffsetCommitTopic> {
    let partition =
        (any::<i32>(), any::<i64>(), opt_text()).prop_map(|(partition, offset, metadata)| {
            OffsetCommitPartition {
                partition,
                offset,
                metadata,
            }
        });
    (text(), vec(partition, 0..3))
        .prop_map(|(topic, partitions)| OffsetCommitTopic { topic, partitions })
}

pub fn request() -> impl Strategy<Value = Request> {
    let hello =
        (any::<u16>(), text(), opt_text()).prop_map(|(protocol_version, client_id, auth_token)| {
            HelloRequest {
                protocol_version,
                client_id,
                auth_token,
            }
        });
    let join = (
        (text(), text(), opt_text(), any::<u32>(), any::<u32>()),
        (texts(), vec(assignor_metadata(), 0..3), tps(), opt_text()),
    )
        .prop_map(
            |(
                (group_id, member_id, group_instance_id, session_timeout_ms, rebalance_timeout_ms),
                (topics, assignors, owned_partitions, reason),
            )| JoinGroupRequest {
                group_id,
                member_id,
                group_instance_id,
                session_timeout_ms,
                rebalance_timeout_ms,
                topics,
                assignors,
                owned_partitions,
                reason,
            },
        );
    let sync = (
        text(),
        any::<i32>(),
        text(),
        opt_text(),
        opt_text(),
        vec(member_assignment(), 0..3),
    )
        .prop_map(
            |(group_id, generation_id, member_id, group_instance_id, assignor, assignments)| {
                SyncGroupRequest {
                    group_id,
                    generation_id,
                    member_id,
                    group_instance_id,
                    assignor,
                    assignments,
                }
            },
        );
    let heartbeat = (text(), any::<i32>(), text(), opt_text()).prop_map(
        |(group_id, generation_id, member_id, group_instance_id)| HeartbeatRequest {
            group_id,
            generation_id,
            member_id,
            group_instance_id,
        },
    );
    let leave = (text(), vec(leaving_member(), 0..3))
        .prop_map(|(group_id, members)| LeaveGroupRequest { group_id, members });
    let commit = (
        text(),
        any::<i32>(),
        text(),
        opt_text(),
        vec(offset_commit_topic(), 0..3),
    )
        .prop_map(
            |(group_id, generation_id, member_id, group_instance_id, topics)| OffsetCommitRequest {
                group_id,
                generation_id,
                member_id,
                group_instance_id,
                topics,
            },
        );
    let fetch = (text(), option::of(tps()))
        .prop_map(|(group_id, topics)| OffsetFetchRequest { group_id, topics });
    prop_oneof![
        hello.prop_map(Request::Hello),
        join.prop_map(Request::JoinGroup),
        sync.prop_map(Request::SyncGroup),
        heartbeat.prop_map(Request::Heartbeat),
        leave.prop_map(Request::LeaveGroup),
        commit.prop_map(Request::OffsetCommit),
        fetch.prop_map(Request::OffsetFetch),
        texts().prop_map(|group_ids| Request::DescribeGroups(DescribeGroupsRequest { group_ids })),
        texts().prop_map(|states| Request::ListGroups(ListGroupsRequest { states })),
        texts().prop_map(|group_ids| Request::DeleteGroups(DeleteGroupsRequest { group_ids })),
        vec(topic_info(), 0..3)
            .prop_map(|topics| Request::CreateTopics(CreateTopicsRequest { topics })),
        option::of(texts())
            .prop_map(|topics| Request::DescribeTopics(DescribeTopicsRequest { topics })),
        text().prop_map(|key| Request::FindCoordinator(FindCoordinatorRequest { key })),
        Just(Request::DescribeCluster(DescribeClusterRequest {})),
        (text(), any::<u32>()).prop_map(|(group_id, limit)| Request::GroupHistory(
            GroupHistoryRequest { group_id, limit }
        )),
        text().prop_map(|group_id| Request::GroupDiagnosis(GroupDiagnosisRequest { group_id })),
        consumer::heartbeat_request().prop_map(Request::ConsumerGroupHeartbeat),
        texts().prop_map(|group_ids| Request::ConsumerGroupDescribe(
            ConsumerGroupDescribeRequest { group_ids }
        )),
        consumer::simulate_request().prop_map(Request::GroupSimulate),
        offsets::ownership_epochs_request().prop_map(Request::OwnershipEpochs),
        offsets::offset_history_request().prop_map(Request::OffsetHistory),
        offsets::offset_reset_request().prop_map(Request::OffsetReset),
        offsets::offset_restore_request().prop_map(Request::OffsetRestore),
    ]
}

pub fn request_frame() -> impl Strategy<Value = RequestFrame> {
    (any::<u32>(), request()).prop_map(|(correlation_id, request)| RequestFrame {
        correlation_id,
        request,
    })
}

fn joined_member() -> impl Strategy<Value = JoinedMember> {
    (text(), opt_text(), texts(), bytes(), tps()).prop_map(
        |(member_id, group_instance_id, topics, user_data, owned_partitions)| JoinedMember {
            member_id,
            group_instance_id,
            topics,
            user_data,
            owned_partitions,
        },
    )
}

fn described_member() -> impl Strategy<Value = DescribedMember> {
    (
        (text(), opt_text(), text(), text(), texts()),
        (tps(), any::<u32>(), any::<u64>(), any::<bool>()),
    )
        .prop_map(
            |(
                (member_id, group_instance_id, client_id, client_host, topics),
                (assignment, session_timeout_ms, last_seen_ms_ago, holding_rebalance),
            )| DescribedMember {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                topics,
                assignment,
                session_timeout_ms,
                last_seen_ms_ago,
                holding_rebalance,
            },
        )
}

fn described_group() -> impl Strategy<Value = DescribedGroup> {
    (
        any::<i16>(),
        text(),
        text(),
        any::<i32>(),
        opt_text(),
        text(),
        vec(described_member(), 0..3),
    )
        .prop_map(
            |(error_code, group_id, state, generation_id, assignor, leader_id, members)| {
                DescribedGroup {
                    error_code,
                    group_id,
                    state,
                    generation_id,
                    assignor,
                    leader_id,
                    members,
                }
            },
        )
}

fn cluster_node() -> impl Strategy<Value = ClusterNode> {
    (text(), text(), any::<u16>(), vec(any::<u32>(), 0..4)).prop_map(
        |(node_id, host, port, shards)| ClusterNode {
            node_id,
            host,
            port,
            shards,
        },
    )
}

fn fetched_topic() -> impl Strategy<Value = FetchedTopic> {
    let partition = (any::<i32>(), any::<i64>(), opt_text(), any::<i16>()).prop_map(
        |(partition, offset, metadata, error_code)| FetchedPartition {
            partition,
            offset,
            metadata,
            error_code,
        },
    );
    (text(), vec(partition, 0..3))
        .prop_map(|(topic, partitions)| FetchedTopic { topic, partitions })
}

pub fn response() -> impl Strategy<Value = Response> {
    let hello = (any::<i16>(), any::<u16>(), any::<u16>(), text()).prop_map(
        |(error_code, min_version, max_version, server_id)| HelloResponse {
            error_code,
            min_version,
            max_version,
            server_id,
        },
    );
    let join = (
        (any::<i16>(), any::<i32>(), opt_text(), text(), text()),
        (
            any::<bool>(),
            vec(joined_member(), 0..3),
            vec(topic_info(), 0..3),
        ),
    )
        .prop_map(
            |(
                (error_code, generation_id, assignor, leader_id, member_id),
                (skip_assignment, members, topics),
            )| JoinGroupResponse {
                error_code,
                generation_id,
                assignor,
                leader_id,
                member_id,
                skip_assignment,
                members,
                topics,
            },
        );
    let sync = (any::<i16>(), opt_text(), tps(), bytes()).prop_map(
        |(error_code, assignor, partitions, user_data)| SyncGroupResponse {
            error_code,
            assignor,
            partitions,
            user_data,
        },
    );
    let leave_result = (text(), opt_text(), any::<i16>()).prop_map(
        |(member_id, group_instance_id, error_code)| LeaveResult {
            member_id,
            group_instance_id,
            error_code,
        },
    );
    let leave = (any::<i16>(), vec(leave_result, 0..3)).prop_map(|(error_code, members)| {
        LeaveGroupResponse {
            error_code,
            members,
        }
    });
    let partition_results = (
        text(),
        vec(
            (any::<i32>(), any::<i16>()).prop_map(|(partition, error_code)| PartitionResult {
                partition,
                error_code,
            }),
            0..3,
        ),
    )
        .prop_map(|(topic, partitions)| PartitionResults { topic, partitions });
    let commit = (any::<i16>(), vec(partition_results, 0..3))
        .prop_map(|(error_code, topics)| OffsetCommitResponse { error_code, topics });
    let fetch = (any::<i16>(), vec(fetched_topic(), 0..3))
        .prop_map(|(error_code, topics)| OffsetFetchResponse { error_code, topics });
    let listed =
        (text(), text(), any::<u32>()).prop_map(|(group_id, state, members)| ListedGroup {
            group_id,
            state,
            members,
        });
    let list = (any::<i16>(), vec(listed, 0..3))
        .prop_map(|(error_code, groups)| ListGroupsResponse { error_code, groups });
    let group_result = (text(), any::<i16>()).prop_map(|(group_id, error_code)| GroupResult {
        group_id,
        error_code,
    });
    let topic_result =
        (text(), any::<i16>()).prop_map(|(topic, error_code)| TopicResult { topic, error_code });
    let describe_topics = (any::<i16>(), vec(topic_info(), 0..3))
        .prop_map(|(error_code, topics)| DescribeTopicsResponse { error_code, topics });
    let error = (any::<i16>(), text()).prop_map(|(error_code, message)| ErrorResponse {
        error_code,
        message,
    });
    let find_coordinator = (any::<i16>(), text(), text(), any::<u16>()).prop_map(
        |(error_code, node_id, host, port)| FindCoordinatorResponse {
            error_code,
            node_id,
            host,
            port,
        },
    );
    let describe_cluster = (
        any::<i16>(),
        text(),
        any::<u32>(),
        vec(cluster_node(), 0..3),
    )
        .prop_map(
            |(error_code, cluster, shards, nodes)| DescribeClusterResponse {
                error_code,
                cluster,
                shards,
                nodes,
            },
        );
    let history =
        (any::<i16>(), vec(rebalance_record(), 0..3)).prop_map(|(error_code, rebalances)| {
            GroupHistoryResponse {
                error_code,
                rebalances,
            }
        });
    prop_oneof![
        hello.prop_map(Response::Hello),
        join.prop_map(Response::JoinGroup),
        sync.prop_map(Response::SyncGroup),
        any::<i16>().prop_map(|error_code| Response::Heartbeat(HeartbeatResponse { error_code })),
        leave.prop_map(Response::LeaveGroup),
        commit.prop_map(Response::OffsetCommit),
        fetch.prop_map(Response::OffsetFetch),
        vec(described_group(), 0..3)
            .prop_map(|groups| Response::DescribeGroups(DescribeGroupsResponse { groups })),
        list.prop_map(Response::ListGroups),
        vec(group_result, 0..3)
            .prop_map(|results| Response::DeleteGroups(DeleteGroupsResponse { results })),
        vec(topic_result, 0..3)
            .prop_map(|results| Response::CreateTopics(CreateTopicsResponse { results })),
        describe_topics.prop_map(Response::DescribeTopics),
        error.prop_map(Response::Error),
        find_coordinator.prop_map(Response::FindCoordinator),
        describe_cluster.prop_map(Response::DescribeCluster),
        history.prop_map(Response::GroupHistory),
        group_diagnosis().prop_map(Response::GroupDiagnosis),
        consumer::heartbeat_response().prop_map(Response::ConsumerGroupHeartbeat),
        vec(consumer::described_consumer_group(), 0..3).prop_map(|groups| {
            Response::ConsumerGroupDescribe(ConsumerGroupDescribeResponse { groups })
        }),
        consumer::simulate_response().prop_map(Response::GroupSimulate),
        offsets::ownership_epochs_response().prop_map(Response::OwnershipEpochs),
        offsets::offset_history_response().prop_map(Response::OffsetHistory),
        offsets::offset_reset_response().prop_map(Response::OffsetReset),
        offsets::offset_restore_response().prop_map(Response::OffsetRestore),
    ]
}

fn rebalance_cause() -> impl Strategy<Value = RebalanceCause> {
    (text(), text(), text(), text(), option::of(text())).prop_map(
        |(kind, member_id, client_id, client_host, detail)| RebalanceCause {
            kind,
            member_id,
            client_id,
            client_host,
            detail,
        },
    )
}

fn rebalance_record() -> impl Strategy<Value = RebalanceRecord> {
    let wait = (text(), option::of(any::<u64>())).prop_map(|(member_id, rejoin_ms)| MemberWait {
        member_id,
        rejoin_ms,
    });
    let change = (
        text(),
        vec(topic_partitions(), 0..2),
        vec(topic_partitions(), 0..2),
    )
        .prop_map(|(member_id, gained, revoked)| MemberChange {
            member_id,
            gained,
            revoked,
        });
    let head = (
        any::<i32>(),
        rebalance_cause(),
        any::<u64>(),
        any::<u64>(),
        option::of(any::<u64>()),
        option::of(text()),
        text(),
        any::<u32>(),
    );
    let lists = (
        vec(wait, 0..3),
        texts(),
        texts(),
        texts(),
        option::of(any::<u32>()),
        vec(change, 0..2),
        any::<u32>(),
    );
    (head, lists).prop_map(
        |(
            (
                generation_id,
                trigger,
                started_at_ms,
                barrier_ms,
                sync_ms,
                assignor,
                leader_id,
                members,
            ),
            (waited_for, evicted, joined, left, moved, changes, omitted),
        )| RebalanceRecord {
            generation_id,
            trigger,
            started_at_ms,
            barrier_ms,
            sync_ms,
            assignor,
            leader_id,
            members,
            waited_for,
            evicted,
            joined,
            left,
            moved,
            changes,
            omitted,
        },
    )
}

fn group_diagnosis() -> impl Strategy<Value = GroupDiagnosisResponse> {
    let waiting = (
        text(),
        option::of(text()),
        text(),
        text(),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(
            |(member_id, group_instance_id, client_id, client_host, last_heard_ms, leader)| {
                WaitingMember {
                    member_id,
                    group_instance_id,
                    client_id,
                    client_host,
                    last_heard_ms,
                    leader,
                }
            },
        );
    let wait = (
        text(),
        rebalance_cause(),
        any::<u64>(),
        any::<u64>(),
        option::of(any::<u64>()),
        any::<bool>(),
        vec(waiting, 0..3),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |(
                phase,
                trigger,
                started_at_ms,
                phase_since_ms,
                deadline_ms,
                stuck,
                waiting_for,
                omitted,
                pending_joins,
            )| RebalanceWait {
                phase,
                trigger,
                started_at_ms,
                phase_since_ms,
                deadline_ms,
                stuck,
                waiting_for,
                omitted,
                pending_joins,
            },
        );
    (
        any::<i16>(),
        text(),
        any::<i32>(),
        any::<u64>(),
        option::of(wait.prop_map(Box::new)),
        vec(topic_partitions(), 0..3),
        option::of(any::<u64>()),
        any::<bool>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
    )
        .prop_map(
            |(
                error_code,
                state,
                generation_id,
                now_ms,
                rebalance,
                unowned,
                unowned_since_ms,
                storm,
                rebalances_in_window,
                storm_threshold,
                storm_window_ms,
            )| GroupDiagnosisResponse {
                error_code,
                state,
                generation_id,
                now_ms,
                rebalance,
                unowned,
                unowned_since_ms,
                storm,
                rebalances_in_window,
                storm_threshold,
                storm_window_ms,
            },
        )
}

pub fn response_frame() -> impl Strategy<Value = ResponseFrame> {
    (any::<u32>(), response()).prop_map(|(correlation_id, response)| ResponseFrame {
        correlation_id,
        response,
    })
}
