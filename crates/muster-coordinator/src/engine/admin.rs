//! Operator requests and server events (protocol §6.15, §6.16), and the shutdown answer to
//! every held request.

use muster_protocol::{DescribedGroup, DescribedMember, ErrorCode};

use super::effects::LedgerRequest;
use super::{Ctx, Effects, Group, GroupState, Millis, RebalanceTrigger, NONE};

impl<R> Group<R> {
    /// DescribeGroups entry for this group.
    pub fn describe(&self, now: Millis) -> DescribedGroup {
        if let Some(described) = self.describe_consumer_classic(now) {
            return described;
        }
        let mut members: Vec<DescribedMember> = self
            .members
            .values()
            .map(|m| {
                let held = m.awaiting_join.is_some() || m.awaiting_sync.is_some();
                let holding = match self.state {
                    GroupState::PreparingRebalance => m.awaiting_join.is_none(),
                    GroupState::CompletingRebalance => self.owes_sync(&m.member_id),
                    _ => false,
                };
                DescribedMember {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.instance_id.as_deref().map(str::to_owned),
                    client_id: m.client.client_id.to_string(),
                    client_host: m.client.client_host.to_string(),
                    topics: m.topics.to_vec(),
                    assignment: m.assignment.to_vec(),
                    session_timeout_ms: m.session_timeout_ms,
                    last_seen_ms_ago: if held {
                        0
                    } else {
                        now.saturating_sub(m.last_heard)
                    },
                    holding_rebalance: holding,
                }
            })
            .collect();
        members.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
        DescribedGroup {
            error_code: NONE,
            group_id: self.group_id.to_string(),
            state: self.state.as_str().to_owned(),
            generation_id: self.generation,
            assignor: self.assignor.clone(),
            leader_id: self.leader.as_deref().unwrap_or_default().to_owned(),
            members,
        }
    }

    /// DeleteGroups: only an Empty group may go; it becomes Dead and its offsets are gone.
    /// DeleteGroups of this group: only an Empty one. Its deletion is a record write in the
    /// group's order (a record changed before it is never written after it).
    pub fn delete(&mut self, now: Millis) -> Result<Effects<R>, ErrorCode> {
        match self.state {
            GroupState::Empty => {
                self.offsets.clear();
                let mut out = Effects::default();
                let pending: Vec<String> = self.pending.keys().cloned().collect();
                for id in pending {
                    self.forget_pending(&id, &mut out);
                }
                self.set_state(GroupState::Dead, now);
                out.persist = true;
                Ok(self.seal(out))
            }
            GroupState::Dead => Err(ErrorCode::GroupIdNotFound),
            _ => Err(ErrorCode::NonEmptyGroup),
        }
    }

    /// Answers every held request with `code` (shutdown: clients retry elsewhere or later).
    pub fn abort_held(&mut self, code: ErrorCode) -> Effects<R> {
        let mut out = Effects::default();
        for m in self.members.values_mut() {
            if m.answer_held(code, &mut out) {
                self.num_awaiting_join -= 1;
            }
        }
        self.abort_waiters(code, None, &mut out);
        // Nothing changed that must be written: the answers leave at once.
        out
    }

    /// The group goes (its actor stops, or a reload replaces it): every unit of the shell's
    /// counters it holds comes back — its members' and pending ids' `max_members` units and
    /// the pending ids themselves. Its members are not answered (held requests go with their
    /// tokens); a second call returns nothing.
    pub fn release_all(&mut self) -> Vec<LedgerRequest> {
        let mut ledger: Vec<LedgerRequest> = self
            .members
            .values_mut()
            .filter_map(|m| m.charge.take())
            .chain(self.pending.values_mut().filter_map(|p| p.charge.take()))
            .map(LedgerRequest::ReturnMemberUnit)
            .collect();
        if let Some(part) = self.consumer.as_deref_mut() {
            ledger.extend(
                part.members
                    .values_mut()
                    .filter_map(|m| m.charge.take())
                    .map(LedgerRequest::ReturnMemberUnit),
            );
        }
        if !self.pending.is_empty() {
            ledger.push(LedgerRequest::ReturnPendingIds(self.pending.len()));
            self.pending.clear();
        }
        ledger
    }

    /// The partition count of `topics` changed: subscribed groups rebalance (protocol §6.16). A
    /// group already preparing picks the new counts up when its barrier closes.
    pub fn topics_changed(&mut self, cx: Ctx<'_>, topics: &[String]) -> Effects<R> {
        let mut out = Effects::default();
        if !self.consumer_topics_changed(cx, topics, &mut out) {
            self.rebalance_for_topics(cx, topics, &mut out);
        }
        self.seal(out)
    }

    fn rebalance_for_topics(&mut self, cx: Ctx<'_>, topics: &[String], out: &mut Effects<R>) {
        if matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance
        ) && self.subscribes_to_any(topics)
        {
            let changed: Vec<&str> = topics
                .iter()
                .filter(|t| self.members.values().any(|m| m.topics.contains(t)))
                .map(String::as_str)
                .take(10)
                .collect();
            self.insight_hint_topics(&changed);
            self.prepare_rebalance(cx, RebalanceTrigger::TopicChange, out);
        }
    }

    /// Whether any member subscribes to one of `topics`.
    fn subscribes_to_any(&self, topics: &[String]) -> bool {
        self.members
            .values()
            .any(|m| m.topics.iter().any(|t| topics.contains(t)))
    }
}
