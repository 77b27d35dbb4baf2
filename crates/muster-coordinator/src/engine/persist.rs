//! The durable form of a group (protocol §6.17): to a [`GroupRecord`] and back after
//! a restart. The records are storage's (`storage::records`); the engine only builds and reads
//! them.

use std::sync::Arc;

use super::barrier::Barrier;
use muster_protocol::error_answers::error_like;
use muster_protocol::ErrorCode;

use super::effects::{Effects, LedgerRequest, Write};
use super::journal::kind as cause_kind;
use super::tenure::Tenure;
use super::{Group, GroupState, Member, MemberClient, Owed, PrincipalName, RebalanceTrigger};
use crate::config::GroupConfig;
use crate::storage::records::{GroupRecord, MemberRecord, OffsetWrite};
use crate::storage::Mutation;
use crate::types::Millis;

impl<R> Group<R> {
    /// The durable form of this group's metadata (protocol §6.17).
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
                principal: m.charge.as_ref().map(|p| p.as_str().to_owned()),
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
            created_by: self.created_by.as_deref().map(str::to_owned),
            consumer: self.consumer_record(),
            ownership: self.ownership_record(),
        }
    }

    /// Rebuilds a group from its record and offsets after a restart. Every session starts
    /// afresh at `now`; a group caught mid-rebalance comes back in PreparingRebalance. Each
    /// member with a recorded principal counts against that principal's `max_members` in
    /// `quotas` again, whatever its limit (what exists is counted, never refused); the group's
    /// own unit is its registry's to charge (see [`Group::created_by`]).
    pub fn restore(
        record: GroupRecord,
        offsets: Vec<OffsetWrite>,
        config: Arc<GroupConfig>,
        now: Millis,
    ) -> (Self, Vec<LedgerRequest>) {
        let mut group = Group::new(record.group_id, config, now);
        group.set_created_by(record.created_by.map(Arc::from));
        let mut ledger = Vec::new();
        let mut last_name: Option<PrincipalName> = None;
        group.generation = record.generation;
        group.assignor = record.assignor;
        group.leader = record.leader.map(Arc::from);
        group.state_since = record.state_since_ms;
        if let Some(consumer) = record.consumer {
            group.consumer = Some(Box::new(super::consumer::ConsumerPart::restore(
                consumer,
                now,
                &mut ledger,
            )));
        }
        for mut m in record.members {
            let principal = m.principal.take();
            let mut member = Member::from_record(m, group.leader.as_ref(), now);
            // Members of one group are mostly one principal's: they share one name.
            member.charge = principal.map(|p| match &last_name {
                Some(name) if name.as_str() == p => name.clone(),
                _ => PrincipalName::new(&p),
            });
            if let Some(principal) = &member.charge {
                last_name = Some(principal.clone());
                ledger.push(LedgerRequest::CountMemberUnit(principal.clone()));
            }
            if let Some(instance) = &member.instance_id {
                group
                    .statics
                    .insert(instance.to_string(), Arc::clone(&member.member_id));
            }
            Self::count_support(&mut group.assignor_support, &member.assignors, true);
            group
                .members
                .insert(Arc::clone(&member.member_id), Box::new(member));
        }
        group.apply_offsets(offsets);
        let tenure = Tenure::restore(record.ownership, |owner| {
            group
                .members
                .get_key_value(owner)
                .map(|(id, _)| Arc::clone(id))
                .or_else(|| {
                    let part = group.consumer.as_deref()?;
                    part.members
                        .get_key_value(owner)
                        .map(|(id, _)| Arc::clone(id))
                })
        });
        group.tenure = tenure;
        group.members_at_last_generation = group.members.len();
        group.restore_insight();
        if group.consumer.is_some() {
            // No barrier to reopen: each member reconciles on its next heartbeat.
            group.state = record.state;
            group.refresh_consumer_state(now);
            group.rearm();
            return (group, ledger);
        }
        group.state = match (record.state, group.members.is_empty()) {
            (_, true) => GroupState::Empty,
            (GroupState::Stable, false) => GroupState::Stable,
            _ => GroupState::PreparingRebalance,
        };
        if group.state == GroupState::PreparingRebalance {
            // Held requests were lost with the old process; members rejoin within the
            // rebalance timeout or are evicted as at any barrier.
            let mut barrier = Barrier::new(now, RebalanceTrigger::MetadataChange);
            barrier.deadline = Some(now + group.rebalance_timeout_ms());
            group.barrier = Some(Box::new(barrier));
            group.journal_barrier_opened_as(cause_kind::COORDINATOR_RESTART, now);
        }
        group.rearm();
        (group, ledger)
    }

    /// This group is the reload of `old` (a write failed and the durable record was read back):
    /// it carries over what the record does not hold — the creator, which the registry holds
    /// the unit of, and the commits still being written (retention waits for them).
    pub fn replaces(&mut self, old: &Group<R>) {
        self.set_created_by(old.created_by.clone());
        self.commits_in_flight = old.commits_in_flight;
    }

    /// Ends an engine call: if the call changed the group's record (`persist`), its replies wait
    /// for a record write — a new one built from the state now, or, while one is in flight, the
    /// next one, built when that is done ([`Group::record_written`]), so a burst of changes
    /// during one write costs one more record, not one each. Expired offsets become a
    /// best-effort delete; the deadline the call moved earlier is reported. Every entry point
    /// that can change the group's record returns through here (`abort_held` changes nothing
    /// durable).
    pub(super) fn seal(&mut self, mut out: Effects<R>) -> Effects<R> {
        if out.persist {
            out.persist = false;
            out.record_changed = true;
            self.owner_unrecorded = false;
            let replies = std::mem::take(&mut out.replies);
            if self.record_in_flight {
                self.record_owed
                    .get_or_insert_with(|| Box::new(Owed(Vec::new())))
                    .0
                    .extend(replies);
            } else {
                let batch = self.record_batch();
                self.record_in_flight = true;
                out.writes.push(Write::Record { batch, replies });
            }
        } else if self.record_in_flight && self.consumer.is_some() && !out.replies.is_empty() {
            // A consumer-protocol answer carries the member's epoch and assignment as they are
            // now, which an earlier call changed and a record write not yet durable holds: it
            // waits for that write, as the changing call's own answer does. Otherwise a
            // coordinator lost before the write lands has served an epoch the next one never
            // saw, and hands out the same number again (the chaos harness's finding: a member
            // epoch 216 answered, then 215 after the failover). Changes made while the write
            // was in flight are owed to the next one: then the answer waits for that.
            let replies = std::mem::take(&mut out.replies);
            let wait = match self.record_owed.as_mut() {
                Some(owed) => owed,
                None => self
                    .record_awaited
                    .get_or_insert_with(|| Box::new(Owed(Vec::new()))),
            };
            wait.0.extend(replies);
        }
        if !out.expired_offsets.is_empty() {
            out.writes
                .push(Write::BestEffort(vec![Mutation::DeleteOffsets {
                    group_id: self.group_id.to_string(),
                    partitions: std::mem::take(&mut out.expired_offsets),
                }]));
        }
        if !out.quarantined.is_empty() {
            let moved = std::mem::take(&mut out.quarantined);
            out.writes.push(Write::BestEffort(vec![
                Mutation::DeleteOffsets {
                    group_id: self.group_id.to_string(),
                    partitions: moved
                        .iter()
                        .map(|q| (q.write.topic.to_string(), q.write.partition))
                        .collect(),
                },
                Mutation::PutQuarantine {
                    group_id: self.group_id.to_string(),
                    offsets: moved,
                },
            ]));
        }
        out.deadline = self.moved_deadline();
        out
    }

    /// The group's record as it is now, with the journal entries that changed (protocol
    /// §6.20), or its deletion once Dead.
    fn record_batch(&mut self) -> Vec<Mutation> {
        if self.state == GroupState::Dead {
            return vec![Mutation::DeleteGroup {
                group_id: self.group_id.to_string(),
            }];
        }
        let mut batch = vec![Mutation::PutGroup(self.to_record())];
        batch.extend(self.journal_changes());
        batch
    }

    /// The record write in flight is durable (`Ok`) or failed with the code its replies got:
    /// the next one owed is started (from the latest state), or its replies are answered with
    /// the failure. On a failure the shell rebuilds the group from storage.
    pub fn record_written(&mut self, result: Result<(), ErrorCode>) -> Effects<R> {
        self.record_in_flight = false;
        let mut out = Effects::default();
        let awaited = self.record_awaited.take().map(|a| a.0).unwrap_or_default();
        if let Some(owed) = self.record_owed.take() {
            match result {
                Ok(()) => {
                    out.replies = owed.0;
                    out.persist = true;
                }
                Err(code) => {
                    for (to, response) in owed.0 {
                        out.reply(to, error_like(&response, code));
                    }
                }
            }
        }
        let mut out = self.seal(out);
        // The answers that waited for this write only (`record_awaited`) go now.
        for (to, response) in awaited {
            match result {
                Ok(()) => out.reply(to, response),
                Err(code) => out.reply(to, error_like(&response, code)),
            }
        }
        out
    }

    /// Whether a record write is in flight (the shell waits for it before letting go of the
    /// group).
    pub fn record_write_in_flight(&self) -> bool {
        self.record_in_flight
    }
}

impl<R> Member<R> {
    /// A member as its record left it, heard from at `now` and holding nothing. Its id shares
    /// the allocation of the group's `leader` field if it is the leader.
    fn from_record(m: MemberRecord, leader: Option<&Arc<str>>, now: Millis) -> Self {
        let member_id: Arc<str> = match leader {
            Some(leader) if **leader == *m.member_id => Arc::clone(leader),
            _ => m.member_id.into(),
        };
        let client = MemberClient {
            client_id: m.client_id.into(),
            client_host: m.client_host.into(),
        };
        let mut member = Member::new(member_id, m.group_instance_id, client, now);
        member.session_timeout_ms = m.session_timeout_ms;
        member.rebalance_timeout_ms = m.rebalance_timeout_ms;
        member.topics = m.topics.into_boxed_slice();
        member.assignors = m.assignors.into_boxed_slice();
        member.owned_partitions = m.owned_partitions.into_boxed_slice();
        member.assignment = m.assignment.into_boxed_slice();
        member.assignment_user_data = m.assignment_user_data.into_boxed_slice();
        member
    }
}
