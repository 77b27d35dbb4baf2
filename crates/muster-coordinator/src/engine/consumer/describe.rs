//! How a consumer-protocol group is shown (protocol-v1 §7 "States"): ConsumerGroupDescribe
//! (epochs, each member's current and target assignment) and DescribeGroups (the group epoch as
//! `generation_id`, each member's current assignment). A member's current assignment is what
//! it holds: partitions it was asked to give up and still reports count (Kafka shows only the
//! assigned ones; showing both is what lets an operator see who still holds a partition
//! another member waits for).

use muster_protocol::{
    ConsumerMember, DescribedConsumerGroup, DescribedGroup, DescribedMember, ErrorCode,
};

use super::group::to_wire;
use crate::engine::{Group, Millis};

impl<R> Group<R> {
    /// Whether the group speaks the consumer protocol.
    pub fn is_consumer_group(&self) -> bool {
        self.consumer.is_some()
    }

    /// ConsumerGroupDescribe of this group: GROUP_ID_NOT_FOUND for a classic group (as Kafka 4
    /// answers).
    pub fn describe_consumer(&self) -> DescribedConsumerGroup {
        let Some(part) = self.consumer.as_deref() else {
            return DescribedConsumerGroup {
                error_code: ErrorCode::GroupIdNotFound.code(),
                group_id: self.group_id.to_string(),
                state: "Dead".to_owned(),
                group_epoch: -1,
                assignment_epoch: -1,
                ..DescribedConsumerGroup::default()
            };
        };
        let mut members: Vec<ConsumerMember> = part
            .members
            .values()
            .map(|m| ConsumerMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                member_epoch: m.shown_epoch(),
                client_id: m.client.client_id.to_string(),
                client_host: m.client.client_host.to_string(),
                subscribed_topics: m.subscribed_topics.clone(),
                subscribed_topic_regex: m.regex.clone(),
                assignment: to_wire(&m.holds()),
                target_assignment: to_wire(&m.target),
            })
            .collect();
        members.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
        DescribedConsumerGroup {
            error_code: ErrorCode::None.code(),
            group_id: self.group_id.to_string(),
            state: self.state.as_str().to_owned(),
            group_epoch: self.generation,
            assignment_epoch: part.assignment_epoch,
            assignor: part.assignor.clone(),
            members,
        }
    }

    /// DescribeGroups of a consumer group (`admin.rs` asks when the group has a consumer part):
    /// a member holds the group up while it is not at the target.
    pub(in crate::engine) fn describe_consumer_classic(
        &self,
        now: Millis,
    ) -> Option<DescribedGroup> {
        let part = self.consumer.as_deref()?;
        let session = self.config.consumer.session_timeout_ms;
        let mut members: Vec<DescribedMember> = part
            .members
            .values()
            .map(|m| DescribedMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client.client_id.to_string(),
                client_host: m.client.client_host.to_string(),
                topics: m.subscribed_topics.clone(),
                assignment: to_wire(&m.holds()),
                session_timeout_ms: session,
                last_seen_ms_ago: now.saturating_sub(m.last_heard),
                holding_rebalance: !m.at_target(part.assignment_epoch),
            })
            .collect();
        members.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
        Some(DescribedGroup {
            error_code: ErrorCode::None.code(),
            group_id: self.group_id.to_string(),
            state: self.state.as_str().to_owned(),
            generation_id: self.generation,
            assignor: Some(part.assignor.clone()),
            leader_id: String::new(),
            members,
        })
    }
}
