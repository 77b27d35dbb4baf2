//! The per-request limits of the admin requests the supervisor answers (protocol §6.18):
//! how many group ids or topics one request may name, and the helpers that keep a request's
//! cost proportional to its distinct entries (repeated ids answered once, the ListGroups state
//! filter as a bitset).

use std::collections::HashSet;

use muster_protocol::{ErrorCode, GroupState, Request, Response};

use crate::config::Limits;
use crate::engine::ProcessKeys;

/// The answer to an admin request that names more groups or topics than one request may, or
/// `None` if it is within the limits.
pub(super) fn check(request: &Request, limits: &Limits) -> Option<Response> {
    let (what, n, max) = match request {
        Request::DescribeGroups(r) => ("groups", r.group_ids.len(), limits.max_groups_per_request),
        Request::DeleteGroups(r) => ("groups", r.group_ids.len(), limits.max_groups_per_request),
        Request::ConsumerGroupDescribe(r) => {
            ("groups", r.group_ids.len(), limits.max_groups_per_request)
        }
        // A simulation's cost grows with the members it adds or removes and the topics it grows.
        Request::GroupSimulate(r) => (
            "members and topics",
            r.remove_members
                .len()
                .saturating_add(r.add_members as usize)
                .saturating_add(r.partitions.len()),
            crate::config::MAX_ENCODABLE_GROUP_SIZE,
        ),
        Request::CreateTopics(r) => ("topics", r.topics.len(), limits.max_topics_per_request),
        Request::DescribeTopics(r) => (
            "topics",
            r.topics.as_ref().map_or(0, Vec::len),
            limits.max_topics_per_request,
        ),
        _ => return None,
    };
    (n > max).then(|| {
        Response::error(
            ErrorCode::RequestLimitExceeded,
            format!("{n} {what} in one request; the limit is {max}"),
        )
    })
}

/// `ids` without repeats, in the order each was first named.
pub(super) fn distinct(ids: Vec<String>) -> Vec<String> {
    let mut seen: HashSet<String, ProcessKeys> = HashSet::default();
    ids.into_iter()
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// A state's bit in a ListGroups filter.
pub(super) fn state_bit(state: GroupState) -> u8 {
    1 << state as u8
}

#[cfg(test)]
mod tests {
    use muster_protocol::{DescribeGroupsRequest, ListGroupsRequest};

    use super::*;

    #[test]
    fn repeated_ids_are_kept_once_in_order() {
        let ids = ["b", "a", "b", "c", "a"].map(String::from).to_vec();
        assert_eq!(distinct(ids), ["b", "a", "c"].map(String::from).to_vec());
    }

    #[test]
    fn every_state_has_its_own_bit() {
        let all = GroupState::ALL.iter().fold(0u8, |m, s| {
            assert_eq!(m & state_bit(*s), 0, "{s}");
            m | state_bit(*s)
        });
        assert_eq!(all.count_ones(), 7);
    }

    #[test]
    fn only_lists_over_the_limit_are_refused() {
        let limits = Limits {
            max_groups_per_request: 2,
            ..Limits::default()
        };
        let describe = |n: usize| {
            Request::DescribeGroups(DescribeGroupsRequest {
                group_ids: vec!["g".into(); n],
            })
        };
        assert!(check(&describe(2), &limits).is_none());
        let Some(Response::Error(e)) = check(&describe(3), &limits) else {
            panic!("three ids refused");
        };
        assert_eq!(e.error_code, ErrorCode::RequestLimitExceeded.code());
        let list = Request::ListGroups(ListGroupsRequest { states: vec![] });
        assert!(check(&list, &limits).is_none());
    }
}
