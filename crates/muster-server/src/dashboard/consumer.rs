//! What the dashboard's group page adds for a consumer-protocol group (protocol-v1 §7): the
//! group epoch and the target assignment's epoch, and per member its epoch, its target, the
//! partitions it still has to give up (owned, not in its target) and those it waits for (in
//! its target, still owned by another member). Asked as a ConsumerGroupDescribe with the
//! page's principal, like the rest of the page; a classic group has none (`null`).

use muster_coordinator::access::Access;
use muster_protocol::view::{partitions_minus as minus, AssignedPartitions};
use muster_protocol::{
    ConsumerGroupDescribeRequest, DescribedConsumerGroup, ErrorCode, Request, Response as Wire,
};
use serde::Serialize;

use super::ask::{ask, Backend};

/// The consumer protocol's part of the group page (`consumer` in `/api/groups/<id>`).
#[derive(Debug, Serialize)]
pub(super) struct ConsumerView {
    group_epoch: i32,
    assignment_epoch: i32,
    members: Vec<ConsumerMemberView>,
}

#[derive(Debug, Serialize)]
struct ConsumerMemberView {
    member_id: String,
    /// -2: a static member on a temporary leave.
    member_epoch: i32,
    subscribed_topic_regex: Option<String>,
    target: Vec<AssignedPartitions>,
    /// Owned, not in its target: what it has been asked to give up.
    revoking: Vec<AssignedPartitions>,
    /// In its target, not owned yet: what it waits for another member to give up.
    awaiting: Vec<AssignedPartitions>,
}

/// The consumer view of `group_id`, or `None` for a classic group (or one that went).
pub(super) async fn for_group(
    backend: &Backend,
    access: &Access,
    group_id: &str,
) -> Option<ConsumerView> {
    let request = Request::ConsumerGroupDescribe(ConsumerGroupDescribeRequest {
        group_ids: vec![group_id.to_owned()],
    });
    match ask(backend, request, access.clone()).await {
        Ok(Wire::ConsumerGroupDescribe(mut r)) if r.groups.len() == 1 => {
            let g = r.groups.remove(0);
            (g.error_code == ErrorCode::None.code()).then(|| view(g))
        }
        _ => None,
    }
}

fn view(g: DescribedConsumerGroup) -> ConsumerView {
    ConsumerView {
        group_epoch: g.group_epoch,
        assignment_epoch: g.assignment_epoch,
        members: g
            .members
            .into_iter()
            .map(|m| ConsumerMemberView {
                revoking: minus(&m.assignment, &m.target_assignment),
                awaiting: minus(&m.target_assignment, &m.assignment),
                member_id: m.member_id,
                member_epoch: m.member_epoch,
                subscribed_topic_regex: m.subscribed_topic_regex,
                target: m.target_assignment.into_iter().map(Into::into).collect(),
            })
            .collect(),
    }
}
