//! Error answers in each request's own shape: a JoinGroup is refused with a JoinGroup answer,
//! a LeaveGroup with a result per member, an OffsetCommit with the code on every partition.
//! A client reads a group request's answer by its type, so a refusal that came back as a bare
//! `Response::Error` would be read as a broken server (protocol §3.4, §6.18).
//!
//! Pure functions from a request (or an answer) and an [`ErrorCode`] to an answer: who refuses
//! and why (the coordinator, the session's authorization, a cluster node that is not the
//! group's coordinator) is their callers' business.

use crate::{
    ErrorCode, HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, LeaveResult,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchResponse, PartitionResult,
    PartitionResults, Request, Response, SyncGroupResponse,
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
        _ => Response::error(code, code.name()),
    }
}

/// The answer to a request over a limit of protocol §6.18: as [`error_for`], but the ids that
/// may be what is over the limit are not echoed (JoinGroup's member id, LeaveGroup's members).
pub fn limit_error(request: &Request, code: ErrorCode) -> Response {
    match request {
        Request::JoinGroup(_) => join_error(code, ""),
        Request::LeaveGroup(_) => Response::LeaveGroup(LeaveGroupResponse {
            error_code: code.code(),
            members: Vec::new(),
        }),
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
        JoinGroupRequest, LeaveGroupRequest, LeavingMember, OffsetCommitPartition,
        OffsetCommitTopic,
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
}
