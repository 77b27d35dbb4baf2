//! Rules that apply before a group exists: group-id validation, and what each request gets
//! when its group does not exist (protocol §5: only a JoinGroup with an empty member id, or a
//! simple OffsetCommit with generation -1, creates a group).

use muster_protocol::{
    ErrorCode, HeartbeatResponse, LeaveGroupResponse, LeaveResult, Request, Response,
};

use super::answers::{join_error, sync_error};
use super::join::check_session_timeout;
use super::limits::check_request;
use super::offsets::{commit_error, fetch_from};
use super::topic_access::{commits_nothing_readable, deny_unreadable};
use crate::access::Access;
use crate::config::GroupConfig;

/// Longest group id, in bytes.
pub const MAX_GROUP_ID_BYTES: usize = 255;

/// Protocol §5 "Group id": 1..=255 bytes, no control characters.
pub fn validate_group_id(group_id: &str) -> Result<(), ErrorCode> {
    if group_id.is_empty()
        || group_id.len() > MAX_GROUP_ID_BYTES
        || group_id.chars().any(char::is_control)
    {
        Err(ErrorCode::InvalidGroupId)
    } else {
        Ok(())
    }
}

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
        other => Response::error(
            ErrorCode::InvalidRequest,
            format!("{} is not addressed to one group", other.name()),
        ),
    };
    AbsentGroup::Answer(answer)
}

/// The error answer of the right type for a group-scoped request (e.g. INVALID_GROUP_ID).
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
        Request::OffsetFetch(_) => Response::OffsetFetch(muster_protocol::OffsetFetchResponse {
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
/// the engine answered, such as a write that did not become durable).
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

/// A LeaveGroup answer with `top` at the top level and `each` for every listed member.
fn leave_error<'a>(
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
