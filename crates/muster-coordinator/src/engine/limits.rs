//! Request limits (protocol §6.18 "Limits"): every id, name and list a group request carries is
//! checked against [`Limits`] before the group spends anything on it, so a request's cost is
//! bounded by the settings, not only by the frame size. Checked by the group's own methods and
//! by [`super::absent_group`] (a group that does not exist yet), with the same answers.
//!
//! The server-wide budget of pending member ids is the shell's to count (`actors/ledger.rs`):
//! the engine is handed a reserved id as a [`super::Grants`].

use muster_protocol::{
    ErrorCode, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, OffsetHistoryRequest, OffsetResetRequest, Request, SyncGroupRequest,
};

use crate::catalog::MAX_TOPIC_NAME_BYTES;
use crate::config::Limits;

const OVER: ErrorCode = ErrorCode::RequestLimitExceeded;

fn at_most(len: usize, max: usize) -> Result<(), ErrorCode> {
    if len > max {
        Err(OVER)
    } else {
        Ok(())
    }
}

fn ids(limits: &Limits, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
    at_most(member_id.len(), limits.max_member_id_bytes)?;
    at_most(
        instance_id.map_or(0, str::len),
        limits.max_instance_id_bytes,
    )
}

/// JoinGroup: ids, reason, rebalance timeout, assignors (count, names, user data), subscribed
/// topics (count; a name longer than any topic can be is INVALID_TOPIC), owned partitions.
pub fn check_join(limits: &Limits, req: &JoinGroupRequest) -> Result<(), ErrorCode> {
    ids(limits, &req.member_id, req.group_instance_id.as_deref())?;
    at_most(
        req.reason.as_deref().map_or(0, str::len),
        limits.max_reason_bytes,
    )?;
    if req.rebalance_timeout_ms > limits.max_rebalance_timeout_ms {
        return Err(OVER);
    }
    at_most(req.assignors.len(), limits.max_assignors)?;
    let mut user_data = 0usize;
    for a in &req.assignors {
        at_most(a.name.len(), limits.max_assignor_name_bytes)?;
        user_data = user_data.saturating_add(a.user_data.len());
    }
    at_most(user_data, limits.max_assignor_metadata_bytes)?;
    at_most(req.topics.len(), limits.max_subscribed_topics)?;
    if req.topics.iter().any(|t| t.len() > MAX_TOPIC_NAME_BYTES) {
        return Err(ErrorCode::InvalidTopic);
    }
    at_most(req.owned_partitions.len(), limits.max_subscribed_topics)?;
    if req
        .owned_partitions
        .iter()
        .any(|t| t.topic.len() > MAX_TOPIC_NAME_BYTES)
    {
        return Err(ErrorCode::InvalidTopic);
    }
    let owned = req
        .owned_partitions
        .iter()
        .fold(0usize, |n, t| n.saturating_add(t.partitions.len()));
    at_most(owned, limits.max_partitions_per_request)
}

/// Longest regular expression a consumer-protocol member may subscribe with, in bytes.
pub const MAX_SUBSCRIPTION_REGEX_BYTES: usize = 1_024;

/// ConsumerGroupHeartbeat (protocol-v1 §7): ids, the subscription (topic count and names, the
/// regex's length), the assignor name, the owned partitions and the rebalance timeout.
pub fn check_consumer_heartbeat(
    limits: &Limits,
    req: &muster_protocol::ConsumerGroupHeartbeatRequest,
) -> Result<(), ErrorCode> {
    ids(limits, &req.member_id, req.group_instance_id.as_deref())?;
    at_most(
        req.rack_id.as_deref().map_or(0, str::len),
        limits.max_instance_id_bytes,
    )?;
    if req.rebalance_timeout_ms > 0
        && req.rebalance_timeout_ms as u32 > limits.max_rebalance_timeout_ms
    {
        return Err(OVER);
    }
    if let Some(topics) = &req.subscribed_topics {
        at_most(topics.len(), limits.max_subscribed_topics)?;
        if topics.iter().any(|t| t.len() > MAX_TOPIC_NAME_BYTES) {
            return Err(ErrorCode::InvalidTopic);
        }
    }
    at_most(
        req.subscribed_topic_regex.as_deref().map_or(0, str::len),
        MAX_SUBSCRIPTION_REGEX_BYTES,
    )?;
    at_most(
        req.server_assignor.as_deref().map_or(0, str::len),
        limits.max_assignor_name_bytes,
    )?;
    if let Some(owned) = &req.owned_partitions {
        at_most(owned.len(), limits.max_subscribed_topics)?;
        if owned.iter().any(|t| t.topic.len() > MAX_TOPIC_NAME_BYTES) {
            return Err(ErrorCode::InvalidTopic);
        }
        let partitions = owned
            .iter()
            .fold(0usize, |n, t| n.saturating_add(t.partitions.len()));
        at_most(partitions, limits.max_partitions_per_request)?;
    }
    Ok(())
}

/// SyncGroup: ids (the leader's assignments are only kept for members the group has).
pub fn check_sync(limits: &Limits, req: &SyncGroupRequest) -> Result<(), ErrorCode> {
    ids(limits, &req.member_id, req.group_instance_id.as_deref())
}

/// Heartbeat: ids only (two comparisons: this is the hot path).
pub fn check_heartbeat(limits: &Limits, req: &HeartbeatRequest) -> Result<(), ErrorCode> {
    ids(limits, &req.member_id, req.group_instance_id.as_deref())
}

/// LeaveGroup: each member's ids and reason.
pub fn check_leave(limits: &Limits, req: &LeaveGroupRequest) -> Result<(), ErrorCode> {
    for m in &req.members {
        ids(limits, &m.member_id, m.group_instance_id.as_deref())?;
        at_most(
            m.reason.as_deref().map_or(0, str::len),
            limits.max_reason_bytes,
        )?;
    }
    Ok(())
}

/// OffsetCommit: ids, partitions in all (a topic name longer than any topic can be is
/// INVALID_TOPIC: it is copied into every stored key of the commit).
pub fn check_commit(limits: &Limits, req: &OffsetCommitRequest) -> Result<(), ErrorCode> {
    ids(limits, &req.member_id, req.group_instance_id.as_deref())?;
    let mut partitions = 0usize;
    for t in &req.topics {
        if t.topic.len() > MAX_TOPIC_NAME_BYTES {
            return Err(ErrorCode::InvalidTopic);
        }
        partitions = partitions.saturating_add(t.partitions.len());
    }
    at_most(partitions, limits.max_partitions_per_request)
}

/// OffsetFetch: partitions in all.
pub fn check_fetch(limits: &Limits, req: &OffsetFetchRequest) -> Result<(), ErrorCode> {
    let Some(topics) = &req.topics else {
        return Ok(());
    };
    let mut partitions = 0usize;
    for t in topics {
        if t.topic.len() > MAX_TOPIC_NAME_BYTES {
            return Err(ErrorCode::InvalidTopic);
        }
        partitions = partitions.saturating_add(t.partitions.len().max(1));
    }
    at_most(partitions, limits.max_partitions_per_request)
}

/// OffsetReset names topics and partitions as OffsetFetch does (protocol §6.24), and
/// OffsetHistory at most one topic: the same bounds.
pub fn check_reset(limits: &Limits, req: &OffsetResetRequest) -> Result<(), ErrorCode> {
    let mut partitions = 0usize;
    for t in &req.topics {
        if t.topic.len() > MAX_TOPIC_NAME_BYTES {
            return Err(ErrorCode::InvalidTopic);
        }
        partitions = partitions.saturating_add(t.partitions.len().max(1));
    }
    at_most(partitions, limits.max_partitions_per_request)
}

fn check_history(req: &OffsetHistoryRequest) -> Result<(), ErrorCode> {
    match &req.topic {
        Some(t) if t.len() > MAX_TOPIC_NAME_BYTES => Err(ErrorCode::InvalidTopic),
        _ => Ok(()),
    }
}

/// The check of [`check_join`] and its siblings for any group request (others pass).
pub fn check_request(limits: &Limits, request: &Request) -> Result<(), ErrorCode> {
    match request {
        Request::JoinGroup(r) => check_join(limits, r),
        Request::SyncGroup(r) => check_sync(limits, r),
        Request::Heartbeat(r) => check_heartbeat(limits, r),
        Request::LeaveGroup(r) => check_leave(limits, r),
        Request::OffsetCommit(r) => check_commit(limits, r),
        Request::OffsetFetch(r) => check_fetch(limits, r),
        Request::ConsumerGroupHeartbeat(r) => check_consumer_heartbeat(limits, r),
        Request::OwnershipEpochs(r) => ids(limits, &r.member_id, r.group_instance_id.as_deref()),
        Request::OffsetHistory(r) => check_history(r),
        Request::OffsetReset(r) => check_reset(limits, r),
        _ => Ok(()),
    }
}

/// At most `max_bytes` of `s`, cut at a character boundary (generated member ids start with
/// the client id: a long client id must not make every id it is given long).
pub(super) fn truncated(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
