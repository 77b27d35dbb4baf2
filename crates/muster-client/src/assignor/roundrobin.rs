//! Kafka's `RoundRobinAssignor`: every partition of every subscribed topic, sorted by topic
//! then number, dealt in turn to the members (in Kafka's member order), skipping members not
//! subscribed to the partition's topic.

use std::collections::BTreeMap;

use super::{
    finish, partition_count, sorted_members, Assignor, GroupAssignment, MemberSubscription,
};
use crate::partition::TopicPartition;

pub(crate) const NAME: &str = "roundrobin";

/// Kafka's round-robin assignor (eager). Its assignments are exactly Kafka's.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
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
        if sorted.is_empty() {
            return finish(members, flat);
        }
        // Kafka's CircularIterator: `next` is the member the next partition is offered to.
        let mut next = 0usize;
        for topic in partitions_per_topic.keys() {
            // Only topics someone subscribes to (this also guarantees the skip loop ends).
            if !sorted.iter().any(|m| m.subscribes_to(topic)) {
                continue;
            }
            for partition in 0..partition_count(partitions_per_topic, topic) {
                while !sorted[next].subscribes_to(topic) {
                    next = (next + 1) % sorted.len();
                }
                flat.entry(sorted[next].member_id.clone())
                    .or_default()
                    .push(TopicPartition::new(topic.clone(), partition));
                next = (next + 1) % sorted.len();
            }
        }
        finish(members, flat)
    }
}
