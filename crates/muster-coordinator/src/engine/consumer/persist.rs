//! The durable form of a consumer-protocol group (protocol-v1 §7; the classic part is
//! `../persist.rs`'s): epochs, the target and every member's current assignment and
//! reconciliation state, so that a restart or a failover resumes with the same epochs.

use std::sync::Arc;

use super::group::{from_wire, to_wire, ClassicMember, ConsumerMember, ConsumerPart};
use super::reconcile::{MemberAssignment, MemberState};
use crate::engine::effects::LedgerRequest;
use crate::engine::{Group, MemberClient, Millis, PrincipalName};
use crate::storage::records::{ClassicMemberRecord, ConsumerGroupRecord, ConsumerMemberRecord};

fn state_number(state: MemberState) -> u8 {
    match state {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

fn state_of(number: u8) -> MemberState {
    match number {
        1 => MemberState::UnrevokedPartitions,
        2 => MemberState::UnreleasedPartitions,
        // The codec refuses other numbers; 0 is Stable.
        _ => MemberState::Stable,
    }
}

impl ConsumerPart {
    pub fn to_record(&self) -> ConsumerGroupRecord {
        let mut members: Vec<ConsumerMemberRecord> = self
            .members
            .values()
            .map(|m| ConsumerMemberRecord {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                client_id: m.client.client_id.to_string(),
                client_host: m.client.client_host.to_string(),
                principal: m.charge.as_ref().map(|p| p.as_str().to_owned()),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                subscribed_topics: m.subscribed_topics.clone(),
                subscribed_topic_regex: m.regex.clone(),
                server_assignor: m.server_assignor.clone(),
                state: state_number(m.assignment.state),
                member_epoch: m.shown_epoch(),
                previous_member_epoch: m.previous_epoch,
                assigned: to_wire(&m.assignment.assigned),
                pending_revocation: to_wire(&m.assignment.pending_revocation),
                target: to_wire(&m.target),
                classic: m.classic.as_deref().map(|c| ClassicMemberRecord {
                    session_timeout_ms: c.session_timeout_ms,
                    assignors: c.assignors.to_vec(),
                }),
            })
            .collect();
        members.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
        ConsumerGroupRecord {
            assignment_epoch: self.assignment_epoch,
            assignor: self.assignor.clone(),
            members,
        }
    }

    /// Rebuilds the part from its record: every session starts afresh at `now`; a member
    /// recorded on a static leave (epoch -2) is still on it. Units of recorded principals come
    /// back as ledger requests (what exists is counted).
    pub fn restore(
        record: ConsumerGroupRecord,
        now: Millis,
        ledger: &mut Vec<LedgerRequest>,
    ) -> Self {
        let mut part = ConsumerPart::new(record.assignor, record.assignment_epoch);
        for r in record.members {
            let member_id: Arc<str> = r.member_id.into();
            let client = MemberClient {
                client_id: r.client_id.into(),
                client_host: r.client_host.into(),
            };
            let mut m = ConsumerMember::new(Arc::clone(&member_id), client, now);
            m.charge = r.principal.map(|p| PrincipalName::new(&p));
            if let Some(p) = &m.charge {
                ledger.push(LedgerRequest::CountMemberUnit(p.clone()));
            }
            m.instance_id = r.group_instance_id;
            m.rack_id = r.rack_id;
            m.rebalance_timeout_ms = r.rebalance_timeout_ms;
            m.subscribed_topics = r.subscribed_topics;
            m.regex = r.subscribed_topic_regex;
            m.server_assignor = r.server_assignor;
            m.left = r.member_epoch == super::group::LEAVE_STATIC_EPOCH;
            let epoch = if m.left {
                r.previous_member_epoch
            } else {
                r.member_epoch
            };
            m.previous_epoch = r.previous_member_epoch;
            m.assignment = MemberAssignment {
                state: state_of(r.state),
                epoch,
                assigned: from_wire(&r.assigned),
                pending_revocation: from_wire(&r.pending_revocation),
            };
            if m.assignment.state == MemberState::UnrevokedPartitions {
                // Its rebalance timeout runs afresh from the load, like its session.
                m.revoking_since = Some(now);
            }
            m.target = from_wire(&r.target);
            m.classic = r.classic.map(|c| {
                Box::new(ClassicMember {
                    session_timeout_ms: c.session_timeout_ms,
                    assignors: c.assignors.into_boxed_slice(),
                })
            });
            if let Some(instance) = &m.instance_id {
                part.statics
                    .insert(instance.clone(), Arc::clone(&member_id));
            }
            let holds = [&m.assignment.assigned, &m.assignment.pending_revocation];
            part.move_ownership(&member_id, &[], &holds, None);
            part.members.insert(member_id, Box::new(m));
        }
        part
    }
}

impl<R> Group<R> {
    /// The consumer part of this group's record, if it speaks the consumer protocol.
    pub(in crate::engine) fn consumer_record(&self) -> Option<ConsumerGroupRecord> {
        self.consumer.as_deref().map(ConsumerPart::to_record)
    }
}
