//! Kafka's `RangeAssignor`: topic by topic, the members subscribed to the topic (in Kafka's
//! member order) split its partitions into contiguous ranges, the first `n % m` members taking
//! one partition more.

use std::collections::BTreeMap;

use super::{
    finish, partition_count, sorted_members, Assignor, GroupAssignment, MemberSubscription,
};
use crate::partition::TopicPartition;

pub(crate) const NAME: &str = "range";

/// Kafka's range assignor (eager). Its assignments are exactly Kafka's (without racks).
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &str {
        NAME
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions_per_topic: &BTreeMap<String, i32>,
    ) -> GroupAssignment {
        let sorted = sorted_members(members);
        let mut flat: BTreeMap<String, Vec<TopicPartition>> = BTreeMap::new();
        for topic in partitions_per_topic.keys() {
            let subscribers: Vec<&MemberSubscription> = sorted
                .iter()
                .copied()
                .filter(|m| m.subscribes_to(topic))
                .collect();
            if subscribers.is_empty() {
                continue;
            }
            let partitions = partition_count(partitions_per_topic, topic);
            let count = i32::try_from(subscribers.len()).unwrap_or(i32::MAX);
            let (per_member, extra) = (partitions / count, partitions % count);
            for (i, member) in (0..).zip(&subscribers) {
                let start = per_member * i + i.min(extra);
                let len = per_member + i32::from(i < extra);
                flat.entry(member.member_id.clone())
                    .or_default()
                    .extend((start..start + len).map(|p| TopicPartition::new(topic.clone(), p)));
            }
        }
        finish(members, flat)
    }
}
