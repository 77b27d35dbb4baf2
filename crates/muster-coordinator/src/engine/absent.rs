//! What each request gets when its group does not exist (protocol §6.1: only a JoinGroup with
//! an empty member id, or a simple OffsetCommit with generation -1, creates a group). Whether
//! the group id is valid at all is the wire's rule, `muster_protocol::validate_group_id`.

use muster_protocol::error_answers::{
    commit_error, join_error, leave_error, limit_error, sync_error,
};
use muster_protocol::{
    ErrorCode, HeartbeatResponse, OffsetHistoryResponse, OffsetResetResponse,
    OffsetRestoreResponse, OwnershipEpochsResponse, Request, Response,
};

use super::join::check_session_timeout;
use super::limits::check_request;
use super::offsets::fetch_from;
use super::topic_access::{commits_nothing_readable, deny_unreadable};
use crate::access::Access;
use crate::config::GroupConfig;

/// What to do with a group-scoped request whose group does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbsentGroup {
    /// Create the group and hand it the request.
    Create,
    /// Answer with this, creating nothing.
    Answer(Response),
}

/// The answer a request gets when its group does not exist, or [`AbsentGroup::Create`].
/// `access` decides which topics of an offset request are answered TOPIC_AUTHORIZATION_FAILED
/// (`topic_access.rs`); a simple commit that may read none of its topics creates no group.
pub fn absent_group(request: &Request, config: &GroupConfig, access: &Access) -> AbsentGroup {
    if let Err(code) = check_request(&config.limits, request) {
        return AbsentGroup::Answer(limit_error(request, code));
    }
    let unknown_member = ErrorCode::UnknownMemberId;
    let answer = match request {
        Request::JoinGroup(r) => {
            if let Err(code) = check_session_timeout(config, r.session_timeout_ms) {
                join_error(code, &r.member_id)
            } else if r.member_id.is_empty() {
                return AbsentGroup::Create;
            } else {
                join_error(unknown_member, &r.member_id)
            }
        }
        // A member joins with epoch 0, which creates the group (protocol-v1 §7 "Join").
        Request::ConsumerGroupHeartbeat(r) if r.member_epoch == 0 => return AbsentGroup::Create,
        Request::ConsumerGroupHeartbeat(r) => {
            Response::ConsumerGroupHeartbeat(muster_protocol::ConsumerGroupHeartbeatResponse {
                error_code: unknown_member.code(),
                member_id: r.member_id.clone(),
                member_epoch: r.member_epoch,
                ..Default::default()
            })
        }
        Request::SyncGroup(_) => sync_error(unknown_member),
        Request::Heartbeat(_) => Response::Heartbeat(HeartbeatResponse {
            error_code: unknown_member.code(),
        }),
        // Per member, as Kafka answers a LeaveGroup for a group it does not have.
        Request::LeaveGroup(r) => leave_error(
            ErrorCode::None,
            unknown_member,
            r.members
                .iter()
                .map(|m| (m.member_id.as_str(), m.group_instance_id.as_deref())),
        ),
        Request::OffsetCommit(r) => {
            let mut response = if r.generation_id >= 0 {
                commit_error(ErrorCode::IllegalGeneration, r)
            } else if r.member_id.is_empty() && r.group_instance_id.is_none() {
                if !commits_nothing_readable(r, access) {
                    return AbsentGroup::Create;
                }
                // Every topic denied: nothing to write, so no group to create for it.
                commit_error(ErrorCode::None, r)
            } else {
                // Kafka would create the group and then refuse the unknown member; we refuse
                // without leaving an empty group behind.
                commit_error(unknown_member, r)
            };
            deny_unreadable(&mut response, access);
            Response::OffsetCommit(response)
        }
        Request::OffsetFetch(r) => Response::OffsetFetch(fetch_from(None, r, access)),
        Request::OwnershipEpochs(_) => Response::OwnershipEpochs(OwnershipEpochsResponse {
            error_code: unknown_member.code(),
            generation_id: -1,
            topics: Vec::new(),
        }),
        Request::OffsetHistory(_) => Response::OffsetHistory(OffsetHistoryResponse {
            error_code: ErrorCode::GroupIdNotFound.code(),
            ..OffsetHistoryResponse::default()
        }),
        Request::OffsetReset(r) => Response::OffsetReset(OffsetResetResponse {
            error_code: ErrorCode::GroupIdNotFound.code(),
            error_message: Some(format!("no group {}", r.group_id)),
            ..OffsetResetResponse::default()
        }),
        Request::OffsetRestore(r) => Response::OffsetRestore(OffsetRestoreResponse {
            error_code: ErrorCode::GroupIdNotFound.code(),
            error_message: Some(format!("no group {}", r.group_id)),
            ..OffsetRestoreResponse::default()
        }),
        other => Response::error(
            ErrorCode::InvalidRequest,
            format!("{} is not addressed to one group", other.name()),
        ),
    };
    AbsentGroup::Answer(answer)
}
