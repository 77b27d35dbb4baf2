//! Topic authorization of OffsetCommit and OffsetFetch (protocol §5 "Authorization"): as in
//! Kafka, every topic such a request names needs `read` on it; each partition of a topic the
//! principal may not read is answered TOPIC_AUTHORIZATION_FAILED and the other topics are
//! processed; an OffsetFetch of every committed topic leaves out the ones it may not read.
//!
//! The rule is applied inside the engine because only the engine knows where in its answer a
//! topic's partitions go; it is a pure function of the connection's [`Access`], which arrives
//! with the request in its `ClientInfo`.

use muster_protocol::error_answers::error_for;
use muster_protocol::{ErrorCode, OffsetCommitResponse, Request, Response};

use crate::access::{Access, Operation, ResourceType};

/// Whether the connection may read (commit or fetch offsets of) `topic`.
pub(super) fn may_read(access: &Access, topic: &str) -> bool {
    access.allows(ResourceType::Topic, topic, Operation::Read)
}

/// Puts TOPIC_AUTHORIZATION_FAILED on every partition of an unreadable topic in a commit
/// answer that failed as a whole: the denial is the first thing said about such a topic,
/// whatever else is wrong with the request.
pub(super) fn deny_unreadable(response: &mut OffsetCommitResponse, access: &Access) {
    if access.is_open() {
        return;
    }
    let denied = ErrorCode::TopicAuthorizationFailed.code();
    for topic in response
        .topics
        .iter_mut()
        .filter(|t| !may_read(access, &t.topic))
    {
        for p in &mut topic.partitions {
            p.error_code = denied;
        }
    }
}

/// The answer to a group request refused as a whole before it reached a group (an invalid id,
/// another node's group, the server's or the principal's group limit): [`error_for`],
/// with an OffsetCommit's unreadable topics answered TOPIC_AUTHORIZATION_FAILED all the same
/// (the denial comes first, protocol §5 "Authorization").
pub fn refusal_for(request: &Request, code: ErrorCode, access: &Access) -> Response {
    let mut response = error_for(request, code);
    if let Response::OffsetCommit(commit) = &mut response {
        deny_unreadable(commit, access);
    }
    response
}

/// Whether a simple OffsetCommit names topics and may read none of them: it would write
/// nothing, so it must not create its group (Kafka answers it without asking the coordinator).
pub(super) fn commits_nothing_readable(
    request: &muster_protocol::OffsetCommitRequest,
    access: &Access,
) -> bool {
    !request.topics.is_empty() && request.topics.iter().all(|t| !may_read(access, &t.topic))
}

/// How many topics named in `request` (an OffsetCommit or an OffsetFetch with a topic list)
/// the connection may not read: each is one authorization denial for the metrics. The topics
/// an OffsetFetch of everything leaves out are not denials (nothing was asked by name), as a
/// ListGroups that lists fewer groups is not.
pub fn unreadable_topics(request: &Request, access: &Access) -> usize {
    if access.is_open() {
        return 0;
    }
    let denied = |topic: &str| !may_read(access, topic);
    match request {
        Request::OffsetCommit(r) => r.topics.iter().filter(|t| denied(&t.topic)).count(),
        Request::OffsetFetch(r) => r
            .topics
            .iter()
            .flatten()
            .filter(|t| denied(&t.topic))
            .count(),
        _ => 0,
    }
}
