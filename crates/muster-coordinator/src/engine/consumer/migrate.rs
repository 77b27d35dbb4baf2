//! Migration between the protocols, as Kafka 4 does it (protocol-v1 §7 "One group, one protocol
//! at a time"; `group.consumer.migration.policy` = bidirectional):
//!
//! - **Upgrade**: a consumer-protocol member joining a classic group that has members turns it
//!   into a consumer group online, if the classic group is Stable (a group mid-rebalance is
//!   refused, as Kafka refuses it: the joiner retries). Each classic member becomes a member of
//!   the consumer part at the classic generation, owning what the last assignment gave it, with
//!   that as its target: nothing moves until the joiner's epoch bump computes the new target.
//! - **Downgrade**: when the last consumer-protocol member leaves and classic members remain,
//!   the group is classic again: its members keep what they own and a classic rebalance starts
//!   at once (they rejoin, and the leader assigns as before).
//!
//! The generation is the group epoch throughout, so no epoch or generation is reused; offsets
//! are the group's and carry over both ways.

use std::sync::Arc;

use muster_protocol::ErrorCode;

use super::group::{from_wire, to_wire, ClassicMember, ConsumerMember, ConsumerPart};
use super::reconcile::{MemberAssignment, MemberState};
use crate::engine::{Ctx, Effects, Group, GroupState, Member, RebalanceTrigger};

impl<R> Group<R> {
    /// Turns a Stable classic group into a consumer group (see the module docs). `Err`: the
    /// group cannot be upgraded now.
    pub(in crate::engine) fn upgrade_to_consumer(&mut self) -> Result<(), String> {
        if self.state != GroupState::Stable || !self.pending.is_empty() {
            return Err(format!(
                "group {} is a classic group in {}: it can be upgraded to the consumer protocol \
                 only when Stable; retry",
                self.group_id, self.state
            ));
        }
        let default = self.config.consumer.default_assignor.clone();
        let mut part = ConsumerPart::new(default, self.generation);
        let generation = self.generation;
        for (id, m) in self.members.drain() {
            let mut cm = ConsumerMember::new(Arc::clone(&id), m.client.clone(), m.last_heard);
            cm.instance_id = m.instance_id.as_deref().map(str::to_owned);
            cm.charge = m.charge.clone();
            cm.rebalance_timeout_ms = m.rebalance_timeout_ms;
            cm.subscribed_topics = m.topics.to_vec();
            let assigned = from_wire(&m.assignment);
            cm.assignment = MemberAssignment {
                state: MemberState::Stable,
                epoch: generation,
                assigned: assigned.clone(),
                pending_revocation: Default::default(),
            };
            cm.previous_epoch = generation;
            cm.target = assigned;
            cm.classic = Some(Box::new(ClassicMember {
                session_timeout_ms: m.session_timeout_ms,
                assignors: m.assignors.clone(),
            }));
            if let Some(instance) = &cm.instance_id {
                part.statics.insert(instance.clone(), Arc::clone(&id));
            }
            let holds = [&cm.assignment.assigned];
            // The same members keep the same partitions: their epochs stand.
            part.move_ownership(&id, &[], &holds, None);
            part.members.insert(id, Box::new(cm));
        }
        self.statics.clear();
        self.assignor_support.clear();
        self.num_awaiting_join = 0;
        self.sync_window = None;
        self.leader = None;
        self.assignor = None;
        self.consumer = Some(Box::new(part));
        Ok(())
    }

    /// After a consumer-protocol member went: if only classic members remain, the group is
    /// classic again and rebalances (see the module docs).
    pub(in crate::engine) fn maybe_downgrade(&mut self, cx: Ctx<'_>, out: &mut Effects<R>) {
        let Some(part) = self.consumer.as_deref() else {
            return;
        };
        if part.members.is_empty() || part.members.values().any(|m| m.classic.is_none()) {
            return;
        }
        let Some(part) = self.consumer.take() else {
            return;
        };
        let part = *part;
        for (id, cm) in part.members {
            let cm = *cm;
            let classic = cm.classic.as_deref().cloned();
            let mut member =
                Member::new(Arc::clone(&id), cm.instance_id.clone(), cm.client, cx.now);
            member.rebalance_timeout_ms = cm.rebalance_timeout_ms;
            member.topics = cm.subscribed_topics.into_boxed_slice();
            if let Some(c) = classic {
                member.session_timeout_ms = c.session_timeout_ms;
                member.assignors = c.assignors;
            }
            member.assignment = to_wire(&cm.assignment.assigned).into_boxed_slice();
            member.charge = cm.charge;
            member.last_heard = cm.last_heard;
            if let Some(instance) = &cm.instance_id {
                self.statics.insert(instance.clone(), Arc::clone(&id));
            }
            Self::count_support(&mut self.assignor_support, &member.assignors, true);
            self.members.insert(id, Box::new(member));
        }
        self.assignor = self.select_assignor();
        self.leader = self.members.keys().min().cloned();
        self.members_at_last_generation = self.members.len();
        out.persist = true;
        // Stable at the current generation; the rebalance that follows moves everyone to a
        // classic assignment made by their leader.
        self.set_state(GroupState::Stable, cx.now);
        self.prepare_rebalance(cx, RebalanceTrigger::MetadataChange, out);
    }

    /// Whether the group may answer a classic request through its consumer part.
    pub(in crate::engine) fn classic_in_consumer(&self) -> bool {
        self.consumer
            .as_deref()
            .is_some_and(|p| !p.members.is_empty())
    }
}

/// The refusal of a consumer-protocol member that cannot join a classic group now.
pub(super) fn not_upgradable(why: String) -> (ErrorCode, Option<String>) {
    (ErrorCode::GroupIdNotFound, Some(why))
}
