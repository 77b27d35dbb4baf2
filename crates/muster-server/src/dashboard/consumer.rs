//! What the dashboard's group page adds for a consumer-protocol group (protocol-v1 §7): the
//! group epoch and the target assignment's epoch, and per member its epoch, its target, the
//! partitions it still has to give up (owned, not in its target) and those it waits for (in
//! its target, still owned by another member). Asked as a ConsumerGroupDescribe with the
//! page's principal, like the rest of the page; a classic group has none (`null`).

use std::collections::{BTreeMap, BTreeSet};

use muster_coordinator::access::Access;
use muster_protocol::view::AssignedPartitions;
use muster_protocol::{
    ConsumerGroupDescribeRequest, DescribedConsumerGroup, ErrorCode, Request, Response as Wire,
    TopicPartitions,
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

/// The partitions of `a` not in `b`.
fn minus(a: &[TopicPartitions], b: &[TopicPartitions]) -> Vec<AssignedPartitions> {
    let mut other: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    for tp in b {
        other
            .entry(tp.topic.as_str())
            .or_default()
            .extend(tp.partitions.iter().copied());
    }
    a.iter()
        .filter_map(|tp| {
            let left: Vec<i32> = tp
                .partitions
                .iter()
                .copied()
                .filter(|p| !other.get(tp.topic.as_str()).is_some_and(|s| s.contains(p)))
                .collect();
            (!left.is_empty()).then(|| AssignedPartitions {
                topic: tp.topic.clone(),
                partitions: left,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(topic: &str, partitions: &[i32]) -> TopicPartitions {
        TopicPartitions {
            topic: topic.into(),
            partitions: partitions.to_vec(),
        }
    }

    #[test]
    fn revoking_and_awaiting_are_the_two_differences() {
        let owned = [tp("a", &[0, 1, 2]), tp("b", &[0])];
        let target = [tp("a", &[2, 3]), tp("c", &[1])];
        let revoking = minus(&owned, &target);
        assert_eq!(revoking.len(), 2);
        assert_eq!(revoking[0].partitions, vec![0, 1]);
        assert_eq!(revoking[1].topic, "b");
        let awaiting = minus(&target, &owned);
        assert_eq!(awaiting[0].partitions, vec![3]);
        assert_eq!(awaiting[1].topic, "c");
    }
}
