//! The durable form of a group (protocol §5 "Durability"): to a [`GroupRecord`] and back after
//! a restart. The records are storage's (`storage::records`); the engine only builds and reads
//! them.

use std::sync::Arc;

use super::{ClientInfo, Group, GroupState, Held, Member, RebalanceInfo, RebalanceTrigger};
use crate::config::GroupConfig;
use crate::storage::records::{GroupRecord, MemberRecord, OffsetWrite};
use crate::types::Millis;

impl<R> Group<R> {
    /// The durable form of this group's metadata (protocol §5 "Durability").
    pub fn to_record(&self) -> GroupRecord {
        let mut members: Vec<MemberRecord> = self
            .members
            .values()
            .map(|m| MemberRecord {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.as_deref().map(str::to_owned),
                client_id: m.client.client_id.to_string(),
                client_host: m.client.client_host.to_string(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                topics: m.topics.to_vec(),
                assignors: m.assignors.to_vec(),
                owned_partitions: m.owned_partitions.to_vec(),
                assignment: m.assignment.to_vec(),
                assignment_user_data: m.assignment_user_data.to_vec(),
            })
            .collect();
        members.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
        GroupRecord {
            group_id: self.group_id.to_string(),
            state: self.state,
            generation: self.generation,
            assignor: self.assignor.clone(),
            leader: self.leader.as_deref().map(str::to_owned),
            members,
            state_since_ms: self.state_since,
        }
    }

    /// Rebuilds a group from its record and offsets after a restart. Every session starts
    /// afresh at `now`; a group caught mid-rebalance comes back in PreparingRebalance.
    pub fn restore(
        record: GroupRecord,
        offsets: Vec<OffsetWrite>,
        config: Arc<GroupConfig>,
        now: Millis,
    ) -> Self {
        let mut group = Group::new(record.group_id, config, now);
        group.generation = record.generation;
        group.assignor = record.assignor;
        group.leader = record.leader.map(Arc::from);
        group.state_since = record.state_since_ms;
        for m in record.members {
            let member_id: Arc<str> = match &group.leader {
                // The leader field shares the leader's allocation.
                Some(leader) if **leader == *m.member_id => Arc::clone(leader),
                _ => m.member_id.into(),
            };
            if let Some(instance) = &m.group_instance_id {
                group
                    .statics
                    .insert(instance.clone(), Arc::clone(&member_id));
            }
            Self::count_support(&mut group.assignor_support, &m.assignors, true);
            group.members.insert(
                Arc::clone(&member_id),
                Box::new(Member {
                    member_id,
                    instance_id: m.group_instance_id.map(String::into_boxed_str),
                    client: ClientInfo {
                        client_id: m.client_id.into(),
                        client_host: m.client_host.into(),
                    },
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    topics: m.topics.into_boxed_slice(),
                    assignors: m.assignors.into_boxed_slice(),
                    owned_partitions: m.owned_partitions.into_boxed_slice(),
                    assignment: m.assignment.into_boxed_slice(),
                    assignment_user_data: m.assignment_user_data.into_boxed_slice(),
                    last_heard: now,
                    is_new: false,
                    joined_at: now,
                    awaiting_join: Held::none(),
                    awaiting_sync: Held::none(),
                    pending_sync: false,
                }),
            );
        }
        group.apply_offsets(offsets);
        group.members_at_last_generation = group.members.len();
        group.state = match (record.state, group.members.is_empty()) {
            (_, true) => GroupState::Empty,
            (GroupState::Stable, false) => GroupState::Stable,
            _ => GroupState::PreparingRebalance,
        };
        if group.state == GroupState::PreparingRebalance {
            // Held requests were lost with the old process; members rejoin within the
            // rebalance timeout or are evicted as at any barrier.
            group.join_deadline = Some(now + group.rebalance_timeout_ms());
            group.rebalance = Some(RebalanceInfo {
                started_at: now,
                trigger: RebalanceTrigger::MetadataChange,
            });
        }
        group.new_deadline = group.next_deadline();
        group
    }
}
