//! Error answers in each request's own shape: a JoinGroup is refused with a JoinGroup answer,
//! a LeaveGroup with a result per member, an OffsetCommit with the code on every partition.
//! A client reads a group request's answer by its type, so a refusal that came back as a bare
//! `Response::Error` would be read as a broken server (protocol §3.4, §6.18). The consumer
//! protocol's answers (§6.21) are refused as Kafka 4 refuses them: a ConsumerGroupHeartbeat with
//! the code alone, a ConsumerGroupDescribe with one `Dead` entry per group; a GroupSimulate
//! (§6.22) with the code and nothing simulated. The offset-protection answers (§6.23–§6.25)
//! with the code and nothing else: no epochs, no history, nothing reset or restored.
//!
//! Pure functions from a request (or an answer) and an [`ErrorCode`] to an answer: who refuses
//! and why (the coordinator, the session's authorization, a cluster node that is not the
//! group's coordinator) is their callers' business.

use std::collections::HashSet;

use crate::{
    ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse, DescribedConsumerGroup,
    ErrorCode, GroupSimulateResponse, GroupState, HeartbeatResponse, JoinGroupResponse,
    LeaveGroupResponse, LeaveResult, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchResponse, OffsetHistoryResponse, OffsetResetResponse, OffsetRestoreResponse,
    OwnershipEpochsResponse, PartitionResult, PartitionResults, Request, Response,
    SyncGroupResponse,
};

/// The error answer of the right type for a group-scoped request (e.g. INVALID_GROUP_ID);
/// `Response::Error` for any other request.
pub fn error_for(request: &Request, code: ErrorCode) -> Response {
    match request {
        Request::JoinGroup(r) => join_error(code, &r.member_id),
        Request::SyncGroup(_) => sync_error(code),
        Request::Heartbeat(_) => Response::Heartbeat(HeartbeatResponse {
            error_code: code.code(),
        }),
        Request::LeaveGroup(r) => leave_error(
            code,
            code,
            r.members
                .iter()
                .map(|m| (m.member_id.as_str(), m.group_instance_id.as_deref())),
        ),
        Request::OffsetCommit(r) => Response::OffsetCommit(commit_error(code, r)),
        Request::OffsetFetch(_) => Response::OffsetFetch(OffsetFetchResponse {
            error_code: code.code(),
            topics: Vec::new(),
        }),
        Request::ConsumerGroupHeartbeat(_) => consumer_heartbeat_error(code),
        Request::ConsumerGroupDescribe(r) => {
            consumer_describe_error(code, r.group_ids.iter().map(String::as_str))
        }
        Request::GroupSimulate(_) => simulate_error(code, None),
        Request::OwnershipEpochs(_) => epochs_error(code),
        Request::OffsetHistory(_) => history_error(code),
        Request::OffsetReset(_) => reset_error(code, None),
        Request::OffsetRestore(_) => restore_error(code, None),
        _ => Response::error(code, code.name()),
    }
}

/// The answer to a request over a limit of protocol §6.18: as [`error_for`], but the ids that
/// may be what is over the limit are not echoed (JoinGroup's member id, LeaveGroup's members),
/// and a ConsumerGroupDescribe or GroupSimulate that asks for too much is answered
/// `Response::Error`, as DescribeGroups is (§6.15, §6.18). A ConsumerGroupHeartbeat's refusal,
/// and those of the offset-protection requests, echo no id anyway: they are [`error_for`]'s.
pub fn limit_error(request: &Request, code: ErrorCode) -> Response {
    match request {
        Request::JoinGroup(_) => join_error(code, ""),
        Request::LeaveGroup(_) => Response::LeaveGroup(LeaveGroupResponse {
            error_code: code.code(),
            members: Vec::new(),
        }),
        Request::ConsumerGroupDescribe(_) | Request::GroupSimulate(_) => {
            Response::error(code, code.name())
        }
        other => error_for(other, code),
    }
}

/// The same kind of answer as `response`, carrying `code` instead (for failures found after
/// the answer was made, such as a write that did not become durable).
pub fn error_like(response: &Response, code: ErrorCode) -> Response {
    match response {
        Response::JoinGroup(r) => join_error(code, &r.member_id),
        Response::SyncGroup(_) => sync_error(code),
        Response::Heartbeat(_) => Response::Heartbeat(HeartbeatResponse {
            error_code: code.code(),
        }),
        Response::LeaveGroup(r) => leave_error(
            code,
            code,
            r.members
                .iter()
                .map(|m| (m.member_id.as_str(), m.group_instance_id.as_deref())),
        ),
        Response::OffsetCommit(r) => {
            let mut failed = r.clone();
            failed.error_code = code.code();
            for p in failed
                .topics
                .iter_mut()
                .flat_map(|t| t.partitions.iter_mut())
            {
                p.error_code = code.code();
            }
            Response::OffsetCommit(failed)
        }
        Response::ConsumerGroupHeartbeat(_) => consumer_heartbeat_error(code),
        Response::ConsumerGroupDescribe(r) => {
            consumer_describe_error(code, r.groups.iter().map(|g| g.group_id.as_str()))
        }
        Response::GroupSimulate(_) => simulate_error(code, None),
        Response::OwnershipEpochs(_) => epochs_error(code),
        Response::OffsetHistory(_) => history_error(code),
        Response::OffsetReset(_) => reset_error(code, None),
        Response::OffsetRestore(_) => restore_error(code, None),
        _ => Response::error(code, code.name()),
    }
}

/// A failed JoinGroup: no generation (-1), no leader, no members; `member_id` echoed.
pub fn join_error(code: ErrorCode, member_id: &str) -> Response {
    Response::JoinGroup(JoinGroupResponse {
        error_code: code.code(),
        generation_id: -1,
        assignor: None,
        leader_id: String::new(),
        member_id: member_id.to_owned(),
        skip_assignment: false,
        members: Vec::new(),
        topics: Vec::new(),
    })
}

/// A failed SyncGroup: no assignment.
pub fn sync_error(code: ErrorCode) -> Response {
    Response::SyncGroup(SyncGroupResponse {
        error_code: code.code(),
        assignor: None,
        partitions: Vec::new(),
        user_data: Vec::new(),
    })
}

/// A refused ConsumerGroupHeartbeat, as Kafka 4 refuses one (its `getErrorResponse`): the
/// code and nothing else. No member id (Kafka: null), epoch 0, no heartbeat interval, no
/// assignment: a client reads only `error_code` (protocol §6.21), and keeps its own member id
/// and epoch. Nothing from the request is echoed, so an id over a limit never comes back.
pub fn consumer_heartbeat_error(code: ErrorCode) -> Response {
    Response::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatResponse {
        error_code: code.code(),
        error_message: None,
        member_id: String::new(),
        member_epoch: 0,
        heartbeat_interval_ms: 0,
        assignment: None,
    })
}

/// One consumer group that cannot be described (protocol §6.21): `code`, state `Dead`, both
/// epochs -1, no assignor, no members. The shape of an unknown or classic group
/// (GROUP_ID_NOT_FOUND), of a denied one (GROUP_AUTHORIZATION_FAILED), of an invalid id, and of
/// a group another node coordinates; as DescribeGroups' `Dead` entry, with -1 for "no epoch".
pub fn dead_consumer_group(group_id: &str, code: ErrorCode) -> DescribedConsumerGroup {
    DescribedConsumerGroup {
        error_code: code.code(),
        group_id: group_id.to_owned(),
        state: GroupState::Dead.as_str().to_owned(),
        group_epoch: -1,
        assignment_epoch: -1,
        assignor: String::new(),
        members: Vec::new(),
    }
}

/// A ConsumerGroupDescribe refused as a whole: one [`dead_consumer_group`] with `code` per
/// distinct group id, in the order each was first named (protocol §6.21, as DescribeGroups
/// answers in §6.15; Kafka answers every asked id with the code).
pub fn consumer_describe_error<'a>(
    code: ErrorCode,
    group_ids: impl Iterator<Item = &'a str>,
) -> Response {
    let mut seen = HashSet::new();
    Response::ConsumerGroupDescribe(ConsumerGroupDescribeResponse {
        groups: group_ids
            .filter(|id| seen.insert(*id))
            .map(|id| dead_consumer_group(id, code))
            .collect(),
    })
}

/// A refused GroupSimulate (protocol §6.22): the code, `message` if there are words for it
/// (e.g. why a classic group's assignor cannot be computed), nothing simulated.
pub fn simulate_error(code: ErrorCode, message: Option<String>) -> Response {
    Response::GroupSimulate(GroupSimulateResponse {
        error_code: code.code(),
        error_message: message,
        assignor: String::new(),
        members: Vec::new(),
        stopped_partitions: 0,
    })
}

/// A refused OwnershipEpochs (protocol §6.23): the code, generation -1 (none, as a refused
/// JoinGroup's), no epochs.
pub fn epochs_error(code: ErrorCode) -> Response {
    Response::OwnershipEpochs(OwnershipEpochsResponse {
        error_code: code.code(),
        generation_id: -1,
        topics: Vec::new(),
    })
}

/// A refused OffsetHistory (protocol §6.24): the code, no history, nothing omitted.
pub fn history_error(code: ErrorCode) -> Response {
    Response::OffsetHistory(OffsetHistoryResponse {
        error_code: code.code(),
        topics: Vec::new(),
        omitted: 0,
    })
}

/// A refused OffsetReset (protocol §6.24): the code, `message` if there are words for it (the
/// members of a group that is not Empty, the partitions whose history does not reach back),
/// nothing executed, no partitions.
pub fn reset_error(code: ErrorCode, message: Option<String>) -> Response {
    Response::OffsetReset(OffsetResetResponse {
        error_code: code.code(),
        error_message: message,
        executed: false,
        recorded_at_ms: 0,
        topics: Vec::new(),
    })
}

/// A refused OffsetRestore (protocol §6.25): the code, `message` if there are words for it,
/// nothing executed, no quarantine times, no offsets.
pub fn restore_error(code: ErrorCode, message: Option<String>) -> Response {
    Response::OffsetRestore(OffsetRestoreResponse {
        error_code: code.code(),
        error_message: message,
        executed: false,
        quarantined_at_ms: 0,
        drop_at_ms: 0,
        topics: Vec::new(),
    })
}

/// An OffsetCommit refused as a whole: `code` at the top level and on every partition named
/// (protocol §6.13: a request-level error is given both ways).
pub fn commit_error(code: ErrorCode, req: &OffsetCommitRequest) -> OffsetCommitResponse {
    OffsetCommitResponse {
        error_code: code.code(),
        topics: req
            .topics
            .iter()
            .map(|t| PartitionResults {
                topic: t.topic.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| PartitionResult {
                        partition: p.partition,
                        error_code: code.code(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// A LeaveGroup answer with `top` at the top level and `each` for every listed member, given
/// as `(member_id, group_instance_id)`.
pub fn leave_error<'a>(
    top: ErrorCode,
    each: ErrorCode,
    members: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Response {
    Response::LeaveGroup(LeaveGroupResponse {
        error_code: top.code(),
        members: members
            .map(|(member_id, instance_id)| LeaveResult {
                member_id: member_id.to_owned(),
                group_instance_id: instance_id.map(str::to_owned),
                error_code: each.code(),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerMember,
        FetchedPartition, FetchedTopic, GroupSimulateRequest, JoinGroupRequest, LeaveGroupRequest,
        LeavingMember, OffsetCommitPartition, OffsetCommitTopic, OffsetHistoryRequest,
        OffsetResetRequest, OffsetRestoreRequest, OwnershipEpochsRequest, PartitionEpoch,
        ResetPartition, ResetTo, ResetTopic, SimulatedMember, TopicEpochs, TopicPartitions,
    };

    fn commit_request() -> OffsetCommitRequest {
        let partition = |partition| OffsetCommitPartition {
            partition,
            offset: 1,
            metadata: None,
        };
        OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: vec![
                OffsetCommitTopic {
                    topic: "t1".into(),
                    partitions: vec![partition(0), partition(1)],
                },
                OffsetCommitTopic {
                    topic: "t2".into(),
                    partitions: vec![partition(0)],
                },
            ],
        }
    }

    fn leave_request() -> Request {
        Request::LeaveGroup(LeaveGroupRequest {
            group_id: "g".into(),
            members: vec![LeavingMember {
                member_id: "a".into(),
                group_instance_id: Some("i".into()),
                reason: None,
            }],
        })
    }

    #[test]
    fn error_answers_have_the_request_shape() {
        let bad = ErrorCode::InvalidGroupId.code();
        match error_for(&leave_request(), ErrorCode::InvalidGroupId) {
            Response::LeaveGroup(r) => {
                assert_eq!(r.error_code, bad);
                assert_eq!(r.members[0].error_code, bad);
                assert_eq!(r.members[0].group_instance_id.as_deref(), Some("i"));
            }
            other => panic!("{other:?}"),
        }
        let join = Request::JoinGroup(JoinGroupRequest {
            group_id: "g".into(),
            member_id: "m-1".into(),
            ..JoinGroupRequest::default()
        });
        match error_for(&join, ErrorCode::InvalidGroupId) {
            Response::JoinGroup(r) => {
                assert_eq!((r.error_code, r.member_id.as_str()), (bad, "m-1"));
                assert_eq!(r.generation_id, -1);
            }
            other => panic!("{other:?}"),
        }
        match error_for(
            &Request::OffsetCommit(commit_request()),
            ErrorCode::InvalidGroupId,
        ) {
            Response::OffsetCommit(r) => {
                assert_eq!(r.error_code, bad);
                let codes: Vec<i16> = r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect();
                assert_eq!(codes, [bad; 3]);
            }
            other => panic!("{other:?}"),
        }
        // A request about no one group gets the generic error answer.
        assert_eq!(
            error_for(
                &Request::DescribeGroups(Default::default()),
                ErrorCode::InvalidGroupId
            ),
            Response::error(ErrorCode::InvalidGroupId, "INVALID_GROUP_ID")
        );
    }

    #[test]
    fn a_limit_answer_echoes_no_id() {
        let over = ErrorCode::RequestLimitExceeded;
        let join = Request::JoinGroup(JoinGroupRequest {
            member_id: "m".repeat(300),
            ..JoinGroupRequest::default()
        });
        match limit_error(&join, over) {
            Response::JoinGroup(r) => {
                assert_eq!(r.error_code, over.code());
                assert!(r.member_id.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            limit_error(&leave_request(), over),
            Response::LeaveGroup(LeaveGroupResponse {
                error_code: over.code(),
                members: Vec::new(),
            })
        );
    }

    #[test]
    fn a_failed_commit_answer_carries_the_error_everywhere() {
        // An answer with a per-partition failure, whose write then failed as a whole.
        let mut answer = commit_error(ErrorCode::None, &commit_request());
        answer.topics[0].partitions[1].error_code = ErrorCode::OffsetMetadataTooLarge.code();
        let failed = error_like(
            &Response::OffsetCommit(answer),
            ErrorCode::CoordinatorNotAvailable,
        );
        match failed {
            Response::OffsetCommit(r) => {
                let c = ErrorCode::CoordinatorNotAvailable.code();
                assert_eq!(r.error_code, c);
                assert_eq!(r.topics[0].partitions.len(), 2);
                assert!(r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .all(|p| p.error_code == c));
            }
            other => panic!("{other:?}"),
        }
    }

    fn orders(partitions: &[i32]) -> Vec<TopicPartitions> {
        vec![TopicPartitions {
            topic: "orders".into(),
            partitions: partitions.to_vec(),
        }]
    }

    /// Kafka 4's `ConsumerGroupHeartbeatRequest.getErrorResponse`: the code, and the defaults
    /// of every other field (no member id, epoch 0, no interval, no assignment).
    fn refused_heartbeat(code: ErrorCode) -> Response {
        Response::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatResponse {
            error_code: code.code(),
            error_message: None,
            member_id: String::new(),
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    #[test]
    fn a_refused_consumer_heartbeat_carries_the_code_alone() {
        let denied = ErrorCode::GroupAuthorizationFailed;
        let heartbeat = Request::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest {
            group_id: "g".into(),
            member_id: "9f1c2b3a-4d5e-4f60-8a7b-6c5d4e3f2a1b".into(),
            member_epoch: 7,
            owned_partitions: Some(orders(&[0, 1])),
            ..ConsumerGroupHeartbeatRequest::default()
        });
        assert_eq!(error_for(&heartbeat, denied), refused_heartbeat(denied));
        assert_eq!(error_for(&heartbeat, denied).error_code(), 30);
        // Over a limit: the same, so an oversized member id is not sent back.
        let over = ErrorCode::RequestLimitExceeded;
        let long = Request::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest {
            member_id: "m".repeat(300),
            ..ConsumerGroupHeartbeatRequest::default()
        });
        assert_eq!(limit_error(&long, over), refused_heartbeat(over));
        // A heartbeat answered, then refused (its change was not stored): nothing of the answer
        // survives, not the member id the server made nor the assignment.
        let answered = Response::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatResponse {
            error_code: 0,
            error_message: None,
            member_id: "made-by-the-server".into(),
            member_epoch: 3,
            heartbeat_interval_ms: 5_000,
            assignment: Some(orders(&[2])),
        });
        let lost = ErrorCode::CoordinatorNotAvailable;
        assert_eq!(error_like(&answered, lost), refused_heartbeat(lost));
    }

    #[test]
    fn a_refused_consumer_describe_has_a_dead_entry_per_group() {
        let code = ErrorCode::NotCoordinator;
        let describe = Request::ConsumerGroupDescribe(ConsumerGroupDescribeRequest {
            group_ids: vec!["a".into(), "b".into(), "a".into(), String::new()],
        });
        let groups = match error_for(&describe, code) {
            Response::ConsumerGroupDescribe(r) => r.groups,
            other => panic!("{other:?}"),
        };
        // Each distinct id once, in the order first named; every entry Dead, without epochs.
        let ids: Vec<&str> = groups.iter().map(|g| g.group_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", ""]);
        for g in &groups {
            assert_eq!(*g, dead_consumer_group(&g.group_id, code));
            assert_eq!((g.error_code, g.state.as_str()), (16, "Dead"));
            assert_eq!((g.group_epoch, g.assignment_epoch), (-1, -1));
            assert!(g.assignor.is_empty() && g.members.is_empty());
        }
        // Too many ids: one request-level error, as for DescribeGroups.
        let over = ErrorCode::RequestLimitExceeded;
        assert_eq!(
            limit_error(&describe, over),
            Response::error(over, "REQUEST_LIMIT_EXCEEDED")
        );
        // An answer that then failed: the same ids, each with the code, no members left.
        let answered = Response::ConsumerGroupDescribe(ConsumerGroupDescribeResponse {
            groups: vec![DescribedConsumerGroup {
                group_id: "a".into(),
                state: "Stable".into(),
                group_epoch: 4,
                assignment_epoch: 4,
                assignor: "uniform".into(),
                members: vec![ConsumerMember::default()],
                ..DescribedConsumerGroup::default()
            }],
        });
        let lost = ErrorCode::CoordinatorNotAvailable;
        assert_eq!(
            error_like(&answered, lost),
            Response::ConsumerGroupDescribe(ConsumerGroupDescribeResponse {
                groups: vec![dead_consumer_group("a", lost)],
            })
        );
    }

    #[test]
    fn a_refused_simulation_carries_the_code_and_nothing_simulated() {
        let code = ErrorCode::GroupAuthorizationFailed;
        let simulate = Request::GroupSimulate(GroupSimulateRequest {
            group_id: "g".into(),
            remove_members: vec!["m-1".into()],
            add_members: 2,
            partitions: Vec::new(),
        });
        let refused = Response::GroupSimulate(GroupSimulateResponse {
            error_code: code.code(),
            error_message: None,
            assignor: String::new(),
            members: Vec::new(),
            stopped_partitions: 0,
        });
        assert_eq!(error_for(&simulate, code), refused);
        // Too many members and topics: one request-level error (protocol §6.18).
        let over = ErrorCode::RequestLimitExceeded;
        assert_eq!(
            limit_error(&simulate, over),
            Response::error(over, "REQUEST_LIMIT_EXCEEDED")
        );
        // A server with words for the refusal gives them.
        let why = "the group's assignor \"custom\" is not one the server computes";
        match simulate_error(ErrorCode::InvalidRequest, Some(why.into())) {
            Response::GroupSimulate(r) => {
                assert_eq!(r.error_code, 42);
                assert_eq!(r.error_message.as_deref(), Some(why));
                assert!(r.members.is_empty() && r.assignor.is_empty());
            }
            other => panic!("{other:?}"),
        }
        // An answer that then failed keeps none of what it simulated.
        let answered = Response::GroupSimulate(GroupSimulateResponse {
            assignor: "uniform".into(),
            members: vec![SimulatedMember::default()],
            stopped_partitions: 3,
            ..GroupSimulateResponse::default()
        });
        let lost = ErrorCode::CoordinatorNotAvailable;
        assert_eq!(error_like(&answered, lost).error_code(), 15);
        assert_eq!(error_like(&answered, lost), simulate_error(lost, None));
    }

    /// The four offset-protection requests, each with ids and topics that a refusal must not
    /// carry back.
    fn offset_requests() -> [Request; 4] {
        [
            Request::OwnershipEpochs(OwnershipEpochsRequest {
                group_id: "g".into(),
                generation_id: 7,
                member_id: "m".repeat(300),
                group_instance_id: Some("i".into()),
            }),
            Request::OffsetHistory(OffsetHistoryRequest {
                group_id: "g".into(),
                topic: Some("orders".into()),
                partition: Some(0),
                limit: 5,
            }),
            Request::OffsetReset(OffsetResetRequest {
                group_id: "g".into(),
                to: ResetTo::Time { at_ms: 1 },
                topics: orders(&[0, 1]),
                execute: true,
            }),
            Request::OffsetRestore(OffsetRestoreRequest {
                group_id: "g".into(),
                execute: true,
            }),
        ]
    }

    #[test]
    fn offset_refusals_carry_the_code_and_nothing_else() {
        let code = ErrorCode::GroupAuthorizationFailed;
        let [epochs, history, reset, restore] = offset_requests();
        assert_eq!(
            error_for(&epochs, code),
            Response::OwnershipEpochs(OwnershipEpochsResponse {
                error_code: 30,
                generation_id: -1,
                topics: Vec::new(),
            })
        );
        assert_eq!(
            error_for(&history, code),
            Response::OffsetHistory(OffsetHistoryResponse {
                error_code: 30,
                topics: Vec::new(),
                omitted: 0,
            })
        );
        assert_eq!(
            error_for(&reset, code),
            Response::OffsetReset(OffsetResetResponse {
                error_code: 30,
                error_message: None,
                executed: false,
                recorded_at_ms: 0,
                topics: Vec::new(),
            })
        );
        assert_eq!(
            error_for(&restore, code),
            Response::OffsetRestore(OffsetRestoreResponse {
                error_code: 30,
                error_message: None,
                executed: false,
                quarantined_at_ms: 0,
                drop_at_ms: 0,
                topics: Vec::new(),
            })
        );
        // Each in its own answer's shape, and over a limit the same (nothing is echoed).
        let over = ErrorCode::RequestLimitExceeded;
        for request in offset_requests() {
            let refused = error_for(&request, code);
            assert_eq!(refused.name(), request.name());
            assert_eq!(refused.error_code(), 30);
            assert_eq!(limit_error(&request, over), error_for(&request, over));
        }
        // A server with words for the refusal gives them.
        let why = "the group has members: m-1 (1 in all)";
        match reset_error(ErrorCode::NonEmptyGroup, Some(why.into())) {
            Response::OffsetReset(r) => {
                assert_eq!((r.error_code, r.executed), (68, false));
                assert_eq!(r.error_message.as_deref(), Some(why));
            }
            other => panic!("{other:?}"),
        }
        match restore_error(ErrorCode::GroupIdNotFound, Some(why.into())) {
            Response::OffsetRestore(r) => {
                assert_eq!((r.error_code, r.executed), (69, false));
                assert_eq!(r.error_message.as_deref(), Some(why));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failed_offset_answer_keeps_nothing_it_carried() {
        // Answers made, then refused (e.g. the reset or the restore was not written durably):
        // nothing of them survives, in particular no `executed: true`.
        let lost = ErrorCode::CoordinatorNotAvailable;
        let epochs = Response::OwnershipEpochs(OwnershipEpochsResponse {
            error_code: 0,
            generation_id: 4,
            topics: vec![TopicEpochs {
                topic: "orders".into(),
                partitions: vec![PartitionEpoch {
                    partition: 0,
                    epoch: 4,
                }],
            }],
        });
        assert_eq!(error_like(&epochs, lost), epochs_error(lost));
        let history = Response::OffsetHistory(OffsetHistoryResponse {
            omitted: 3,
            ..OffsetHistoryResponse::default()
        });
        assert_eq!(error_like(&history, lost), history_error(lost));
        let reset = Response::OffsetReset(OffsetResetResponse {
            error_code: 0,
            error_message: None,
            executed: true,
            recorded_at_ms: 1_700_000_000_000,
            topics: vec![ResetTopic {
                topic: "orders".into(),
                partitions: vec![ResetPartition {
                    partition: 0,
                    current: 42,
                    new: 7,
                    error_code: 0,
                }],
            }],
        });
        assert_eq!(error_like(&reset, lost), reset_error(lost, None));
        let restore = Response::OffsetRestore(OffsetRestoreResponse {
            error_code: 0,
            error_message: None,
            executed: true,
            quarantined_at_ms: 1,
            drop_at_ms: 2,
            topics: vec![FetchedTopic {
                topic: "orders".into(),
                partitions: vec![FetchedPartition {
                    partition: 0,
                    offset: 42,
                    metadata: None,
                    error_code: 0,
                }],
            }],
        });
        assert_eq!(error_like(&restore, lost), restore_error(lost, None));
        for answer in [epochs, history, reset, restore] {
            assert_eq!(error_like(&answer, lost).error_code(), 15);
        }
    }
}
