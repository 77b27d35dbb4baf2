//! Membership bookkeeping every rule family shares: checking a member (and instance) id,
//! "heard from" (protocol §6.10), removing a member, and the assignor support
//! count behind the protocol check and the vote (protocol §6.3, §6.6).

use std::collections::HashMap;

use muster_protocol::{AssignorMetadata, ErrorCode};

use super::answers::{join_error, sync_error};
use super::effects::LedgerRequest;
use super::{Effects, Event, Group, Member, Millis};

impl<R> Group<R> {
    /// Whether `assignors` has one in common with every current member (other than `except`).
    /// O(assignors · log(names)), from `assignor_support` (sorted by name): linear in the
    /// request, whatever the members name.
    pub(super) fn supports_assignors(
        &self,
        assignors: &[AssignorMetadata],
        except: Option<&str>,
    ) -> bool {
        let excepted = except.and_then(|id| self.members.get(id));
        let others = self.members.len() - usize::from(excepted.is_some());
        let answer = !assignors.is_empty()
            && assignors.iter().any(|a| {
                let supporters = Self::support_of(&self.assignor_support, &a.name);
                let own = usize::from(excepted.is_some_and(|m| m.supports(&a.name)));
                supporters.saturating_sub(own) == others
            });
        debug_assert_eq!(
            answer,
            !assignors.is_empty()
                && assignors.iter().any(|a| {
                    self.members
                        .values()
                        .filter(|m| Some(&*m.member_id) != except)
                        .all(|m| m.supports(&a.name))
                }),
            "assignor_support out of step with the members"
        );
        answer
    }

    /// How many members support `name`, from the sorted `support` list.
    pub(super) fn support_of(support: &[(String, usize)], name: &str) -> usize {
        support
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .map_or(0, |at| support[at].1)
    }

    /// Counts (`add`) or uncounts one member's assignors in `support` (kept sorted by name); a
    /// name the member lists twice counts once. O(k log k + k log S) for k assignors, not
    /// O(k²): the names are sorted and deduplicated first.
    pub(super) fn count_support(
        support: &mut Vec<(String, usize)>,
        assignors: &[AssignorMetadata],
        add: bool,
    ) {
        let mut names: Vec<&str> = assignors.iter().map(|a| a.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let at = support.binary_search_by(|(n, _)| n.as_str().cmp(name));
            match (at, add) {
                (Ok(at), true) => support[at].1 += 1,
                (Err(at), true) => {
                    // Exactly: groups offer one to three assignors, and a first `insert` would
                    // reserve four slots (128 bytes) in every group.
                    support.reserve_exact(1);
                    support.insert(at, (name.to_owned(), 1));
                }
                (Ok(at), false) => {
                    support[at].1 -= 1;
                    if support[at].1 == 0 {
                        support.remove(at);
                    }
                }
                (Err(_), false) => {}
            }
        }
    }

    /// Checks a non-empty member id (and instance id, if given) against the group.
    pub(super) fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
        self.check_instance(member_id, instance_id)?;
        match self.members.get(member_id) {
            None => Err(ErrorCode::UnknownMemberId),
            Some(m) => Self::check_bound_instance(m, instance_id),
        }
    }

    /// As [`Group::check_member`], and the member's session is refreshed at `now`: one lookup
    /// of the member, not two (a heartbeat's member id is hashed with SipHash; the second
    /// lookup was 7 % of a heartbeat's instructions, docs/benchmarks.md).
    pub(super) fn check_and_hear(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now: Millis,
    ) -> Result<(), ErrorCode> {
        self.check_instance(member_id, instance_id)?;
        match self.members.get_mut(member_id) {
            None => Err(ErrorCode::UnknownMemberId),
            Some(m) => {
                Self::check_bound_instance(m, instance_id)?;
                m.last_heard = now;
                Ok(())
            }
        }
    }

    /// A static instance id bound to another member fences this one.
    fn check_instance(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
        match instance_id.and_then(|instance| self.statics.get(instance)) {
            Some(bound) if **bound != *member_id => Err(ErrorCode::FencedInstanceId),
            _ => Ok(()),
        }
    }

    /// A member bound to another instance id (or to none) than the request names is fenced.
    fn check_bound_instance(m: &Member<R>, instance_id: Option<&str>) -> Result<(), ErrorCode> {
        if instance_id.is_some() && m.instance_id.as_deref() != instance_id {
            Err(ErrorCode::FencedInstanceId)
        } else {
            Ok(())
        }
    }

    /// Removes a member, answering its held requests UNKNOWN_MEMBER_ID and giving its quota
    /// unit back. Does not rebalance.
    pub(super) fn remove_member(&mut self, member_id: &str, out: &mut Effects<R>) -> bool {
        let Some(mut m) = self.members.remove(member_id) else {
            return false;
        };
        if let Some(principal) = m.charge.take() {
            out.ledger.push(LedgerRequest::ReturnMemberUnit(principal));
        }
        self.hint_removed(&m);
        Self::count_support(&mut self.assignor_support, &m.assignors, false);
        if m.answer_held(ErrorCode::UnknownMemberId, out) {
            self.num_awaiting_join -= 1;
        }
        if let Some(window) = self.sync_window.as_mut() {
            window.pending.remove(member_id);
        }
        if let Some(instance) = &m.instance_id {
            if self.statics.get(&**instance).map(|id| &**id) == Some(member_id) {
                self.statics.remove(&**instance);
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            // Kafka hands leadership on at once; the barrier may still pick a rejoined member.
            self.leader = self.members.keys().min().cloned();
        }
        out.persist = true;
        true
    }

    /// Removes the members the group gave up on (`member_ids`: laggards at the barrier or at
    /// the sync deadline) and tells the operator with `event`. Does not rebalance; says whether
    /// anyone went.
    pub(super) fn evict(
        &mut self,
        member_ids: Vec<String>,
        out: &mut Effects<R>,
        event: impl FnOnce(Vec<String>) -> Event,
    ) -> bool {
        if member_ids.is_empty() {
            return false;
        }
        for id in &member_ids {
            self.remove_member(id, out);
        }
        out.events.push(event(member_ids));
        true
    }

    /// Kafka's `selectProtocol`: among assignors every member supports, each member votes for
    /// its most preferred one; most votes wins (ties go to the name first in order).
    pub(super) fn select_assignor(&self) -> Option<String> {
        let first = self.members.values().next()?;
        // Supported by every member: the support count says so in O(log names), not O(members).
        let everyone = self.members.len();
        let candidates: Vec<&str> = first
            .assignors
            .iter()
            .map(|a| a.name.as_str())
            .filter(|name| Self::support_of(&self.assignor_support, name) == everyone)
            .collect();
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            if let Some(choice) = m
                .assignors
                .iter()
                .map(|a| a.name.as_str())
                .find(|n| candidates.contains(n))
            {
                *votes.entry(choice).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(name, _)| name.to_owned())
    }
}

impl<R> Member<R> {
    /// Answers the member's held JoinGroup and SyncGroup, if any, with `code` (it is removed,
    /// fenced, or the server shuts down). Says whether a JoinGroup was held: the group counts
    /// those.
    pub(super) fn answer_held(&mut self, code: ErrorCode, out: &mut Effects<R>) -> bool {
        let held_join = self.awaiting_join.take();
        let had_join = held_join.is_some();
        if let Some(r) = held_join {
            out.reply(r, join_error(code, &self.member_id));
        }
        if let Some(r) = self.awaiting_sync.take() {
            out.reply(r, sync_error(code));
        }
        had_join
    }
}
