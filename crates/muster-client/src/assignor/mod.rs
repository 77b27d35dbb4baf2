//! Partition assignors: the [`Assignor`] trait that the group leader runs over the members'
//! subscriptions, and the four built-in strategies, `range`, `roundrobin`, `sticky` and
//! `cooperative-sticky`.
//!
//! An assignor is pure: it takes the members (subscriptions, the user data each member sent
//! for this assignor, the partitions each member says it owns) and the partition count of each
//! subscribed topic, and returns every member's partitions. The leader of a generation runs the
//! assignor the group chose; the others never do.
//!
//! [`RangeAssignor`] and [`RoundRobinAssignor`] reproduce Kafka's assignments exactly.
//! [`StickyAssignor`] and [`CooperativeStickyAssignor`] follow Kafka's goals (balance first,
//! then keep partitions where they are) with their own algorithm; see [`sticky`] for it and for
//! where each learns previous ownership.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use muster_protocol::{JoinedMember, TopicPartitions};

use crate::partition::TopicPartition;

mod range;
mod roundrobin;
pub mod sticky;

pub use range::RangeAssignor;
pub use roundrobin::RoundRobinAssignor;
pub use sticky::{CooperativeStickyAssignor, StickyAssignor};

/// How members give up partitions during a rebalance (Kafka's `RebalanceProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RebalanceProtocol {
    /// Every member revokes all its partitions before it rejoins.
    Eager,
    /// Members keep their partitions through the rebalance and revoke only those the new
    /// assignment takes away (KIP-429).
    Cooperative,
}

/// One member as the leader sees it in its `JoinGroup` answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSubscription {
    pub member_id: String,
    /// Set for static members.
    pub group_instance_id: Option<String>,
    /// The topics the member subscribes to.
    pub topics: Vec<String>,
    /// What the member's [`Assignor::user_data`] produced for the chosen assignor.
    pub user_data: Vec<u8>,
    /// The partitions the member says it owns (cooperative members; eager members revoke
    /// everything before rejoining and send none).
    pub owned_partitions: Vec<TopicPartitions>,
}

impl MemberSubscription {
    /// A dynamic member with no user data and no owned partitions.
    pub fn new<S: Into<String>>(
        member_id: impl Into<String>,
        topics: impl IntoIterator<Item = S>,
    ) -> Self {
        MemberSubscription {
            member_id: member_id.into(),
            topics: topics.into_iter().map(Into::into).collect(),
            ..MemberSubscription::default()
        }
    }

    pub fn with_instance_id(mut self, instance_id: impl Into<String>) -> Self {
        self.group_instance_id = Some(instance_id.into());
        self
    }

    pub fn with_owned(mut self, owned: Vec<TopicPartitions>) -> Self {
        self.owned_partitions = owned;
        self
    }

    pub fn with_user_data(mut self, user_data: Vec<u8>) -> Self {
        self.user_data = user_data;
        self
    }

    pub fn subscribes_to(&self, topic: &str) -> bool {
        self.topics.iter().any(|t| t == topic)
    }
}

impl From<JoinedMember> for MemberSubscription {
    fn from(m: JoinedMember) -> Self {
        MemberSubscription {
            member_id: m.member_id,
            group_instance_id: m.group_instance_id,
            topics: m.topics,
            user_data: m.user_data,
            owned_partitions: m.owned_partitions,
        }
    }
}

/// Every member's partitions, by member id. Each list is grouped by topic (topics in order,
/// partitions ascending). Every member of the input appears, with an empty list if need be.
pub type GroupAssignment = BTreeMap<String, Vec<TopicPartitions>>;

/// A partition assignment strategy. Implement it to plug in your own; list it in
/// [`crate::MemberConfig::assignors`] of every member of the group.
pub trait Assignor: Send + Sync {
    /// The name members vote with (must be the same in every member of a group).
    fn name(&self) -> &str;

    /// Eager or cooperative. A member uses the cooperative protocol only if *every* assignor
    /// in its list is cooperative (as Kafka does).
    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    /// The user data this member sends with its `JoinGroup` for this assignor. `owned` is
    /// what the member held before this rebalance (for an eager member: what it just revoked)
    /// and `generation` the generation that assignment came from (-1 before the first).
    fn user_data(&self, owned: &[TopicPartition], generation: i32) -> Vec<u8> {
        let _ = (owned, generation);
        Vec::new()
    }

    /// The assignment of the partitions of `partitions_per_topic` (topic → partition count,
    /// only topics that exist) among `members`. Each partition of a topic that at least one
    /// member subscribes to should go to exactly one subscriber.
    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions_per_topic: &BTreeMap<String, i32>,
    ) -> GroupAssignment;
}

/// The built-in assignor called `name`: `range`, `roundrobin`, `sticky` or
/// `cooperative-sticky`.
pub fn builtin(name: &str) -> Option<Arc<dyn Assignor>> {
    Some(match name {
        range::NAME => Arc::new(RangeAssignor),
        roundrobin::NAME => Arc::new(RoundRobinAssignor),
        sticky::STICKY => Arc::new(StickyAssignor),
        sticky::COOPERATIVE_STICKY => Arc::new(CooperativeStickyAssignor),
        _ => return None,
    })
}

/// Kafka's member order (`AbstractPartitionAssignor.MemberInfo.compareTo`): static members
/// first, by group instance id; then dynamic members, by member id.
pub fn member_order(a: &MemberSubscription, b: &MemberSubscription) -> Ordering {
    match (&a.group_instance_id, &b.group_instance_id) {
        (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// `members` sorted by [`member_order`].
pub(crate) fn sorted_members(members: &[MemberSubscription]) -> Vec<&MemberSubscription> {
    let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
    sorted.sort_by(|a, b| member_order(a, b));
    sorted
}

/// Turns flat per-member lists into a [`GroupAssignment`] with an entry for every member.
pub(crate) fn finish(
    members: &[MemberSubscription],
    mut flat: BTreeMap<String, Vec<TopicPartition>>,
) -> GroupAssignment {
    members
        .iter()
        .map(|m| {
            let partitions = flat.remove(&m.member_id).unwrap_or_default();
            (
                m.member_id.clone(),
                crate::partition::group_partitions(&partitions),
            )
        })
        .collect()
}

/// The partition count of `topic`, or 0 when it does not exist (negative counts are treated
/// as 0).
pub(crate) fn partition_count(partitions_per_topic: &BTreeMap<String, i32>, topic: &str) -> i32 {
    partitions_per_topic.get(topic).copied().unwrap_or(0).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_members_sort_first_by_instance_id() {
        let mut members = [
            MemberSubscription::new("consumer-a", ["t"]),
            MemberSubscription::new("consumer-b", ["t"]).with_instance_id("instance2"),
            MemberSubscription::new("consumer-c", ["t"]).with_instance_id("instance1"),
            MemberSubscription::new("consumer-0", ["t"]),
        ];
        members.sort_by(member_order);
        let ids: Vec<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
        assert_eq!(
            ids,
            ["consumer-c", "consumer-b", "consumer-0", "consumer-a"]
        );
    }

    #[test]
    fn builtins_by_name() {
        for name in ["range", "roundrobin", "sticky", "cooperative-sticky"] {
            assert_eq!(
                builtin(name).map(|a| a.name().to_owned()).as_deref(),
                Some(name)
            );
        }
        assert!(builtin("nope").is_none());
        assert_eq!(
            builtin("cooperative-sticky").map(|a| a.protocol()),
            Some(RebalanceProtocol::Cooperative)
        );
        assert_eq!(
            builtin("sticky").map(|a| a.protocol()),
            Some(RebalanceProtocol::Eager)
        );
    }
}
