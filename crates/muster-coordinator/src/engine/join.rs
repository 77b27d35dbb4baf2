//! JoinGroup (protocol §6.3, §6.4, the join half of §6.12, and §6.7): the checks in their
//! order, MEMBER_ID_REQUIRED and pending ids, new members, known members rejoining, and a static
//! instance taking over its old member id.

use std::sync::Arc;

use muster_protocol::{ErrorCode, JoinGroupRequest};
use uuid::Uuid;

use super::answers::join_error;
use super::effects::{Grant, Grants, JoinNeeds, LedgerRequest};
use super::limits::{check_join, truncated};
use super::{
    ClientInfo, Ctx, Effects, Group, GroupState, Held, Member, Millis, NewSince, Pending,
    PrincipalName, RebalanceTrigger,
};
use crate::config::GroupConfig;

/// Generated member ids start with at most this many bytes of the client id (or instance id),
/// then `-` and a UUID: at most 101 bytes, under the floor of `max_member_id_bytes` (128), so
/// an id the server gave out is never over the member-id limit.
pub(super) const MEMBER_ID_PREFIX_BYTES: usize = 64;

impl<R> Group<R> {
    /// What a JoinGroup from `client` may need from the shell's counters, asked before
    /// [`Group::join`] so the shell can reserve it: a unit of the principal's `max_members`
    /// when the join may add a member or take over an id charged to someone else, and one of
    /// the server's pending ids when it may be answered MEMBER_ID_REQUIRED. Never less than the
    /// join uses (what it does not use comes back in its effects).
    pub fn join_needs(&self, req: &JoinGroupRequest, client: &ClientInfo) -> JoinNeeds {
        let takes_over = |held: Option<&PrincipalName>| {
            client.charge().is_some() && !client.already_charged(held)
        };
        if !req.member_id.is_empty() {
            let pending = self.pending.get(&req.member_id);
            return JoinNeeds {
                member_unit: pending.is_some_and(|p| takes_over(p.charge.as_ref())),
                pending_id: false,
            };
        }
        match req.group_instance_id.as_ref() {
            Some(instance) => match self.statics.get(instance) {
                Some(member_id) => {
                    let held = self.members.get(member_id).and_then(|m| m.charge.as_ref());
                    JoinNeeds {
                        member_unit: takes_over(held),
                        pending_id: false,
                    }
                }
                None => JoinNeeds {
                    member_unit: takes_over(None),
                    pending_id: false,
                },
            },
            None => JoinNeeds {
                member_unit: takes_over(None),
                pending_id: true,
            },
        }
    }

    /// JoinGroup (protocol §6.3-§6.5, §6.12).
    /// `fresh` seeds a new member id if one is needed; `grants` is what the shell reserved for
    /// [`Group::join_needs`].
    pub fn join(
        &mut self,
        cx: Ctx<'_>,
        req: JoinGroupRequest,
        client: &ClientInfo,
        fresh: Uuid,
        grants: Grants,
        reply: R,
    ) -> Effects<R> {
        let mut out = Effects::default();
        let mut grants = grants;
        self.join_inner(cx, req, client, fresh, &mut grants, reply, &mut out);
        if grants.member_unit == Grant::Granted {
            if let Some(principal) = client.charge() {
                out.ledger
                    .push(LedgerRequest::ReturnMemberUnit(principal.clone()));
            }
        }
        if grants.pending_id == Grant::Granted {
            out.ledger.push(LedgerRequest::ReturnPendingIds(1));
        }
        self.seal(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn join_inner(
        &mut self,
        cx: Ctx<'_>,
        req: JoinGroupRequest,
        client: &ClientInfo,
        fresh: Uuid,
        grants: &mut Grants,
        reply: R,
        out: &mut Effects<R>,
    ) {
        let now = cx.now;
        if let Err(code) = check_join(&self.config.limits, &req) {
            // The ids are not echoed: they may be what is over the limit.
            return out.reply(reply, join_error(code, ""));
        }
        if let Err(code) = check_session_timeout(&self.config, req.session_timeout_ms) {
            return out.reply(reply, join_error(code, &req.member_id));
        }
        if self.generation == i32::MAX {
            // The generation counter is exhausted: no rebalance can start (protocol §6.18).
            return out.reply(
                reply,
                join_error(ErrorCode::ResourceLimitReached, &req.member_id),
            );
        }
        if self.state == GroupState::Dead {
            return out.reply(
                reply,
                join_error(ErrorCode::CoordinatorNotAvailable, &req.member_id),
            );
        }

        if self.classic_in_consumer() {
            // A consumer group answers its classic members itself (protocol-v1 §7 migration).
            let response = self.classic_join_to_consumer(cx, req, client, fresh, grants, out);
            self.answer_waiters(cx, out);
            self.refresh_consumer_state(now);
            self.note_consumer_deadline();
            return out.reply(reply, response);
        }
        if self.consumer.take().is_some() {
            // An Empty group takes either protocol: it is classic again (offsets stay).
            out.persist = true;
        }
        if req.member_id.is_empty() {
            self.join_unknown_member(cx, req, client, fresh, grants, reply, out);
            return;
        }

        if self.pending.contains_key(&req.member_id) {
            // A pending id is not a member yet: size and protocol checks apply, and a refusal
            // keeps the id pending (it may rejoin with better assignors).
            if !self.accepts_new_member(true) {
                return out.reply(
                    reply,
                    join_error(ErrorCode::GroupMaxSizeReached, &req.member_id),
                );
            }
            if !self.supports_assignors(&req.assignors, None) {
                return out.reply(
                    reply,
                    join_error(ErrorCode::InconsistentGroupProtocol, &req.member_id),
                );
            }
            // The id's unit becomes the member's (a pending id already counts as one).
            let held = self
                .pending
                .get_mut(&req.member_id)
                .map(|p| charge_for_takeover(client, &mut p.charge, grants));
            let charge = match held {
                Some(Ok(charge)) => charge,
                Some(Err(code)) => return out.reply(reply, join_error(code, &req.member_id)),
                None => None,
            };
            self.forget_pending(&req.member_id, out);
            let member_id = req.member_id.clone();
            self.add_member(cx, member_id, req, client, charge, reply, out);
            return;
        }

        if let Err(code) =
            self.check_and_hear(&req.member_id, req.group_instance_id.as_deref(), now)
        {
            return out.reply(reply, join_error(code, &req.member_id));
        }
        if !self.supports_assignors(&req.assignors, Some(&req.member_id)) {
            return out.reply(
                reply,
                join_error(ErrorCode::InconsistentGroupProtocol, &req.member_id),
            );
        }

        let member_id = req.member_id.clone();
        match self.state {
            GroupState::PreparingRebalance => {
                self.update_member_and_await(cx, &member_id, req, reply, out);
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                let unchanged = self
                    .members
                    .get(member_id.as_str())
                    .is_some_and(|m| m.same_metadata(&req));
                let is_leader = self.leader.as_deref() == Some(member_id.as_str());
                let answer_now = if self.state == GroupState::Stable {
                    unchanged && !is_leader
                } else {
                    unchanged
                };
                if answer_now {
                    // A lost JoinGroup response being retried: give back the current generation.
                    let response = self.join_response(&member_id, is_leader, false, cx);
                    out.reply(reply, response);
                } else {
                    let reason = req.reason.clone();
                    self.update_member_and_await(cx, &member_id, req, reply, out);
                    let kind = is_leader.then_some(super::journal::kind::LEADER_REJOINED);
                    self.hint_cause(&member_id, kind);
                    self.hint_detail(reason);
                    self.prepare_rebalance(cx, RebalanceTrigger::MetadataChange, out);
                }
            }
            // Known members do not exist in Empty or Dead groups; `check_member` refused them.
            // A consumer-protocol group has no classic members to rejoin.
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling => {
                out.reply(reply, join_error(ErrorCode::UnknownMemberId, &member_id));
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn join_unknown_member(
        &mut self,
        cx: Ctx<'_>,
        req: JoinGroupRequest,
        client: &ClientInfo,
        fresh: Uuid,
        grants: &mut Grants,
        reply: R,
        out: &mut Effects<R>,
    ) {
        let known_instance = req
            .group_instance_id
            .as_ref()
            .and_then(|i| self.statics.get(i))
            .map(|id| id.to_string());
        if let Some(old_member_id) = known_instance {
            if !self.supports_assignors(&req.assignors, Some(&old_member_id)) {
                return out.reply(reply, join_error(ErrorCode::InconsistentGroupProtocol, ""));
            }
            self.static_takeover(cx, old_member_id, req, client, fresh, grants, reply, out);
            return;
        }
        if !self.accepts_new_member(false) {
            return out.reply(reply, join_error(ErrorCode::GroupMaxSizeReached, ""));
        }
        if !self.supports_assignors(&req.assignors, None) {
            return out.reply(reply, join_error(ErrorCode::InconsistentGroupProtocol, ""));
        }
        // The principal's quota is checked after the group's own checks (size, protocol), as
        // Kafka checks a group before a client quota; before the server-wide pending budget,
        // so an over-quota principal does not spend the server's pending ids.
        let charge = match take_member_unit(client, grants) {
            Ok(charge) => charge,
            Err(code) => return out.reply(reply, join_error(code, "")),
        };
        if let Some(instance) = req.group_instance_id.as_deref() {
            // A new static member joins directly, without MEMBER_ID_REQUIRED (as in Kafka).
            let member_id = format!("{}-{fresh}", truncated(instance, MEMBER_ID_PREFIX_BYTES));
            self.add_member(cx, member_id, req, client, charge, reply, out);
            return;
        }
        if std::mem::take(&mut grants.pending_id) != Grant::Granted {
            // Every pending id of the server is taken (protocol §6.18). The unit just taken
            // goes back.
            if let Some(principal) = charge {
                out.ledger.push(LedgerRequest::ReturnMemberUnit(principal));
            }
            return out.reply(reply, join_error(ErrorCode::ResourceLimitReached, ""));
        }
        let member_id = format!(
            "{}-{}",
            truncated(&client.client_id, MEMBER_ID_PREFIX_BYTES),
            fresh
        );
        let expires = cx.now + Millis::from(req.session_timeout_ms);
        self.pending
            .insert(member_id.clone(), Pending { expires, charge });
        self.note_deadline(expires);
        self.note_new_member();
        out.reply(reply, join_error(ErrorCode::MemberIdRequired, &member_id));
    }

    /// Whether a member the group does not know yet may join (protocol §6.3, check 4; Kafka's
    /// `acceptJoiningMember`). Pending ids count against the size cap, as in Kafka (other than
    /// the joiner's own, if `joiner_is_pending`): otherwise MEMBER_ID_REQUIRED would hand out
    /// ids without bound.
    pub(super) fn accepts_new_member(&self, joiner_is_pending: bool) -> bool {
        let members = match self.state {
            GroupState::Empty | GroupState::Dead => 0,
            GroupState::Assigning | GroupState::Reconciling => self.members.len(),
            GroupState::PreparingRebalance => self.num_awaiting_join,
            GroupState::CompletingRebalance | GroupState::Stable => self.members.len(),
        };
        let pending = self.pending.len() - usize::from(joiner_is_pending);
        !self.config.is_full(members + pending)
    }

    /// Forgets a pending id (it joined, left or expired) and gives its units back (the
    /// server's pending id; its principal's `max_members` unit unless a joining member took it
    /// over); says whether it was pending.
    pub(super) fn forget_pending(&mut self, member_id: &str, out: &mut Effects<R>) -> bool {
        let Some(pending) = self.pending.remove(member_id) else {
            return false;
        };
        out.ledger.push(LedgerRequest::ReturnPendingIds(1));
        if let Some(principal) = pending.charge {
            out.ledger.push(LedgerRequest::ReturnMemberUnit(principal));
        }
        if self.pending.is_empty() {
            // A join storm leaves a table sized for all its pending ids; free it once the
            // last one has gone, rather than keep it in every idle group.
            self.pending.shrink_to_fit();
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_member(
        &mut self,
        cx: Ctx<'_>,
        member_id: String,
        mut req: JoinGroupRequest,
        client: &ClientInfo,
        charge: Option<PrincipalName>,
        reply: R,
        out: &mut Effects<R>,
    ) {
        let now = cx.now;
        let member_id: Arc<str> = member_id.into();
        if let Some(instance) = &req.group_instance_id {
            self.statics
                .insert(instance.clone(), Arc::clone(&member_id));
        }
        if self.leader.is_none() {
            self.leader = Some(Arc::clone(&member_id));
        }
        let instance_id = req.group_instance_id.take();
        let reason = req.reason.clone();
        let mut member = Member::new(Arc::clone(&member_id), instance_id, client.into(), now);
        member.update_from(req);
        member.new_since = NewSince::at(now);
        member.charge = charge;
        member.awaiting_join = Held::some(reply);
        Self::count_support(&mut self.assignor_support, &member.assignors, true);
        self.members
            .insert(Arc::clone(&member_id), Box::new(member));
        self.num_awaiting_join += 1;
        self.note_deadline(now + Millis::from(self.config.new_member_join_timeout_ms));
        self.note_new_member();
        // Quarantined offsets come back before the member can fetch them (`quarantine.rs`).
        let restored = self.restore_on_join(now, &member_id, client, out);
        if self.state == GroupState::PreparingRebalance {
            self.maybe_complete_join(cx, out);
        } else {
            self.hint_cause(&member_id, None);
            self.hint_detail(join_detail(reason, restored));
            self.prepare_rebalance(cx, RebalanceTrigger::Join, out);
        }
    }

    /// Stores a known member's new metadata and holds its join at the barrier.
    pub(super) fn update_member_and_await(
        &mut self,
        cx: Ctx<'_>,
        member_id: &str,
        req: JoinGroupRequest,
        reply: R,
        out: &mut Effects<R>,
    ) {
        let Some(m) = self.members.get_mut(member_id) else {
            return out.reply(reply, join_error(ErrorCode::UnknownMemberId, member_id));
        };
        if *m.assignors != *req.assignors {
            Self::count_support(&mut self.assignor_support, &m.assignors, false);
            Self::count_support(&mut self.assignor_support, &req.assignors, true);
        }
        m.update_from(req);
        if let Some(old) = m.awaiting_join.replace(reply) {
            // A second JoinGroup while the first is held: the first is superseded.
            out.reply(old, join_error(ErrorCode::RebalanceInProgress, member_id));
        } else {
            self.num_awaiting_join += 1;
            self.journal_rejoined(member_id, cx.now);
        }
        if self.state == GroupState::PreparingRebalance {
            self.maybe_complete_join(cx, out);
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn static_takeover(
        &mut self,
        cx: Ctx<'_>,
        old_member_id: String,
        req: JoinGroupRequest,
        client: &ClientInfo,
        fresh: Uuid,
        grants: &mut Grants,
        reply: R,
        out: &mut Effects<R>,
    ) {
        let instance = req.group_instance_id.clone().unwrap_or_default();
        let new_member_id: Arc<str> =
            format!("{}-{fresh}", truncated(&instance, MEMBER_ID_PREFIX_BYTES)).into();
        // The instance's unit stays if the same principal takes it over; another principal
        // needs one of its own (refused at its limit before anything changes).
        let mut held = None;
        let slot = match self.members.get_mut(old_member_id.as_str()) {
            Some(member) => charge_for_takeover(client, &mut member.charge, grants),
            None => charge_for_takeover(client, &mut held, grants),
        };
        let charge = match slot {
            Ok(charge) => charge,
            Err(code) => return out.reply(reply, join_error(code, "")),
        };
        let Some(mut member) = self.members.remove(old_member_id.as_str()) else {
            // The static map and the member map disagree; should be impossible. Treat as new.
            self.statics.remove(&instance);
            let member_id = new_member_id.to_string();
            self.add_member(cx, member_id, req, client, charge, reply, out);
            return;
        };
        // Another principal took the instance over: the old principal's unit goes back.
        if let Some(old) = std::mem::replace(&mut member.charge, charge) {
            out.ledger.push(LedgerRequest::ReturnMemberUnit(old));
        }
        // The old id's held requests are fenced at once.
        if member.answer_held(ErrorCode::FencedInstanceId, out) {
            self.num_awaiting_join -= 1;
        }
        let old_assignors = std::mem::take(&mut member.assignors);
        member.member_id = new_member_id.clone();
        member.client = client.into();
        member.last_heard = cx.now;
        member.update_from(req);
        let assignors_changed = *member.assignors != *old_assignors;
        if assignors_changed {
            Self::count_support(&mut self.assignor_support, &old_assignors, false);
            Self::count_support(&mut self.assignor_support, &member.assignors, true);
        }
        self.statics.insert(instance, Arc::clone(&new_member_id));
        if let Some(window) = self.sync_window.as_mut() {
            // The new id owes the SyncGroup the old one did.
            if window.pending.remove(old_member_id.as_str()) {
                window.pending.insert(Arc::clone(&new_member_id));
            }
        }
        let was_leader = self.leader.as_deref() == Some(old_member_id.as_str());
        if was_leader {
            self.leader = Some(Arc::clone(&new_member_id));
        }
        let session_due = cx.now + Millis::from(member.session_timeout_ms);
        // The new incarnation owns the old one's partitions with new epochs: the old process
        // may still be running (`tenure.rs`).
        self.tenure
            .grant_all(&new_member_id, &member.assignment, self.generation);
        self.members.insert(Arc::clone(&new_member_id), member);
        self.note_deadline(session_due);
        out.persist = true;

        match self.state {
            GroupState::Stable => {
                let vote_unchanged =
                    !assignors_changed || self.select_assignor().as_deref() == self.assignor();
                if vote_unchanged {
                    let response = self.join_response(&new_member_id, was_leader, was_leader, cx);
                    out.reply(reply, response);
                } else {
                    self.update_member_await_only(&new_member_id, reply);
                    self.hint_cause(&new_member_id, Some(super::journal::kind::MEMBER_FENCED));
                    self.hint_detail(Some(format!("replaced member {old_member_id}")));
                    self.prepare_rebalance(cx, RebalanceTrigger::MetadataChange, out);
                }
            }
            GroupState::CompletingRebalance => {
                self.update_member_await_only(&new_member_id, reply);
                self.hint_cause(&new_member_id, Some(super::journal::kind::MEMBER_FENCED));
                self.hint_detail(Some(format!("replaced member {old_member_id}")));
                self.prepare_rebalance(cx, RebalanceTrigger::MetadataChange, out);
            }
            GroupState::PreparingRebalance => {
                self.update_member_await_only(&new_member_id, reply);
                self.maybe_complete_join(cx, out);
            }
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling => {
                // A static member is never kept in an Empty group; answer defensively.
                out.reply(
                    reply,
                    join_error(ErrorCode::UnknownMemberId, &new_member_id),
                );
            }
        }
    }

    pub(super) fn update_member_await_only(&mut self, member_id: &str, reply: R) {
        let rejoined_at = self.members.get_mut(member_id).and_then(|m| {
            let first = m.awaiting_join.replace(reply).is_none();
            first.then_some(m.last_heard)
        });
        if let Some(at) = rejoined_at {
            self.num_awaiting_join += 1;
            self.journal_rejoined(member_id, at);
        }
    }
}

/// Takes the unit of `client`'s principal's `max_members` that the shell reserved (`None`
/// without a quota); QUOTA_EXCEEDED if it was refused (protocol §5 "Quotas").
fn take_member_unit(
    client: &ClientInfo,
    grants: &mut Grants,
) -> Result<Option<PrincipalName>, ErrorCode> {
    let Some(principal) = client.charge() else {
        return Ok(None);
    };
    match std::mem::take(&mut grants.member_unit) {
        Grant::Granted => Ok(Some(principal.clone())),
        // `join_needs` asks for every unit a join can take; not asked means the shell could
        // not reserve one.
        Grant::Refused | Grant::NotAsked => Err(ErrorCode::QuotaExceeded),
    }
}

/// The charge a member keeps when `client` takes over an id charged to `held`: `held` if it
/// is already this principal's, else a unit of its own (refused at the limit like a new
/// member; `held` then stays where it is, for the caller to give back).
fn charge_for_takeover(
    client: &ClientInfo,
    held: &mut Option<PrincipalName>,
    grants: &mut Grants,
) -> Result<Option<PrincipalName>, ErrorCode> {
    if client.already_charged(held.as_ref()) {
        Ok(held.take())
    } else {
        take_member_unit(client, grants)
    }
}

/// Protocol §6.3: a session timeout outside the server's [min, max] is refused first
/// (also when the group does not exist).
pub(super) fn check_session_timeout(
    config: &GroupConfig,
    timeout_ms: u32,
) -> Result<(), ErrorCode> {
    if timeout_ms < config.min_session_timeout_ms || timeout_ms > config.max_session_timeout_ms {
        Err(ErrorCode::InvalidSessionTimeout)
    } else {
        Ok(())
    }
}

/// What a join's journal entry says of it: the member's reason, and the quarantined offsets
/// its join restored.
pub(super) fn join_detail(reason: Option<String>, restored: Option<String>) -> Option<String> {
    match (reason, restored) {
        (Some(reason), Some(restored)) => Some(format!("{reason}; {restored}")),
        (reason, restored) => reason.or(restored),
    }
}
