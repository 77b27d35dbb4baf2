//! ConsumerGroupHeartbeat (protocol-v1 §7; Kafka 4's `GroupMetadataManager.
//! consumerGroupHeartbeat`): the consumer protocol's one request. It validates the request,
//! finds or creates the member (joins, static takeovers), fences stale epochs, applies
//! subscription changes (bumping the group epoch), reconciles the member one step toward its
//! target and answers with its epoch and, whenever it changed, its whole assignment. Leaves
//! (epochs -1 and -2) are `leave.rs`'s.

use std::collections::BTreeSet;
use std::sync::Arc;

use muster_protocol::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ErrorCode, Response,
};
use uuid::Uuid;

use super::group::{
    from_wire, is_subset, to_wire, ConsumerMember, ConsumerPart, LEAVE_EPOCH, LEAVE_STATIC_EPOCH,
};
use super::journal::kind;
use super::reconcile::{MemberState, Reconcile};
use super::target::{compile_regex, resolve, ASSIGNORS};
use crate::engine::effects::{Grant, LedgerRequest};
use crate::engine::{ClientInfo, Ctx, Effects, Group, GroupState, MemberClient};

/// Longest member id a consumer-protocol member may choose (protocol-v1 §7 "Join").
pub const MAX_MEMBER_ID_BYTES: usize = 64;

/// A refusal: the code and, where it helps, why.
type Refusal = (ErrorCode, Option<String>);

fn refuse(code: ErrorCode, why: impl Into<String>) -> Refusal {
    (code, Some(why.into()))
}

impl<R> Group<R> {
    /// Whether a ConsumerGroupHeartbeat of a new member would need a unit of its principal's
    /// `max_members` (the shell reserves it before the call, as for a JoinGroup).
    pub fn consumer_join_needs_unit(
        &self,
        req: &ConsumerGroupHeartbeatRequest,
        client: &ClientInfo,
    ) -> bool {
        if req.member_epoch != 0 || client.charge().is_none() {
            return false;
        }
        let known = self.consumer.as_deref().is_some_and(|part| {
            part.members.contains_key(req.member_id.as_str())
                || req
                    .group_instance_id
                    .as_ref()
                    .is_some_and(|i| part.statics.contains_key(i))
        });
        !known
    }

    /// One ConsumerGroupHeartbeat. `member_unit` is the reservation the shell made when
    /// [`Group::consumer_join_needs_unit`] asked for one; `fresh_id` names a member that joins
    /// with an empty member id.
    pub fn consumer_heartbeat(
        &mut self,
        cx: Ctx<'_>,
        req: ConsumerGroupHeartbeatRequest,
        client: &ClientInfo,
        mut member_unit: Grant,
        fresh_id: Uuid,
        reply: R,
    ) -> Effects<R> {
        let mut out = Effects::default();
        let (response, may_wait) =
            match self.heartbeat_step(cx, req, client, &mut member_unit, fresh_id, &mut out) {
                Ok(answer) => answer,
                Err((code, message)) => (
                    ConsumerGroupHeartbeatResponse {
                        error_code: code.code(),
                        error_message: message,
                        ..ConsumerGroupHeartbeatResponse::default()
                    },
                    None,
                ),
            };
        if member_unit == Grant::Granted {
            if let Some(principal) = client.charge() {
                out.ledger
                    .push(LedgerRequest::ReturnMemberUnit(principal.clone()));
            }
        }
        // A member waiting for a partition another still holds is answered once it is
        // released (`wait.rs`), unless this answer tells it something new.
        let reply = match may_wait {
            Some(member_id) => self.hold_if_waiting(&member_id, reply, cx.now),
            None => Some(reply),
        };
        if let Some(reply) = reply {
            out.reply(reply, Response::ConsumerGroupHeartbeat(response));
        }
        self.resume_assignment(cx, &mut out);
        self.answer_waiters(cx, &mut out);
        if out.persist {
            // Only a change can move the state or bring a deadline forward (a new member's
            // session, a revocation's rebalance timeout); the steady heartbeat scans nothing.
            self.refresh_consumer_state(cx.now);
            self.note_consumer_deadline();
        }
        self.seal(out)
    }

    fn heartbeat_step(
        &mut self,
        cx: Ctx<'_>,
        req: ConsumerGroupHeartbeatRequest,
        client: &ClientInfo,
        member_unit: &mut Grant,
        fresh_id: Uuid,
        out: &mut Effects<R>,
    ) -> Result<(ConsumerGroupHeartbeatResponse, Option<Arc<str>>), Refusal> {
        validate(&req)?;
        if self.consumer.is_none() && req.member_epoch != 0 {
            // Only a join may turn a group into a consumer group.
            return Err((ErrorCode::UnknownMemberId, None));
        }
        self.take_consumer_protocol()?;
        match req.member_epoch {
            LEAVE_EPOCH | LEAVE_STATIC_EPOCH => {
                return self.consumer_leave(cx, &req, out).map(|r| (r, None))
            }
            _ => {}
        }
        let interval = self.config.consumer.heartbeat_interval_ms as i32;
        let joining = req.member_epoch == 0;
        let member_id: Arc<str> = if req.member_id.is_empty() {
            fresh_id.to_string().into()
        } else {
            req.member_id.as_str().into()
        };
        let mut changed_subscription = false;
        let mut new_member = false;
        if joining {
            let (_, joined_now) =
                self.join_consumer(cx, &member_id, &req, client, member_unit, out)?;
            new_member = joined_now;
        } else {
            self.check_member_epoch(&member_id, &req)?;
        }
        let Some(part) = self.consumer.as_deref_mut() else {
            return Err((ErrorCode::UnknownServerError, None));
        };
        let Some(member) = part.members.get_mut(&*member_id) else {
            return Err((ErrorCode::UnknownMemberId, None));
        };
        member.last_heard = cx.now;
        member.left = false;
        // What the member asked to change (None = unchanged).
        if req.rebalance_timeout_ms >= 0
            && member.rebalance_timeout_ms != req.rebalance_timeout_ms as u32
        {
            member.rebalance_timeout_ms = req.rebalance_timeout_ms as u32;
            out.persist = true;
        }
        if let Some(rack) = &req.rack_id {
            if member.rack_id.as_ref() != Some(rack) {
                member.rack_id = Some(rack.clone());
                out.persist = true;
            }
        }
        if let Some(topics) = req.subscribed_topics {
            let mut topics = topics;
            topics.sort_unstable();
            topics.dedup();
            if member.subscribed_topics != topics {
                member.subscribed_topics = topics;
                changed_subscription = true;
            }
        }
        if let Some(regex) = req.subscribed_topic_regex {
            let regex = (!regex.is_empty()).then_some(regex);
            if member.regex != regex {
                member.regex = regex;
                changed_subscription = true;
            }
        }
        if let Some(assignor) = req.server_assignor {
            if member.server_assignor.as_deref() != Some(&assignor) {
                member.server_assignor = Some(assignor);
                changed_subscription = true;
            }
        }
        if new_member {
            // Quarantined offsets come back before the member can fetch them.
            let restored = self.restore_on_join(cx.now, &member_id, client, out);
            let cause = self.consumer_cause(kind::MEMBER_JOINED, Some(&member_id), restored);
            self.bump_group_epoch(cx, cause, out);
        } else if changed_subscription {
            let detail = Some("subscription changed".to_owned());
            let cause = self.consumer_cause(kind::METADATA_CHANGED, Some(&member_id), detail);
            self.bump_group_epoch(cx, cause, out);
        }
        let assignment_changed = self.reconcile_member(
            cx,
            &member_id,
            req.owned_partitions.as_deref(),
            changed_subscription && !new_member,
            out,
        );
        let Some(member) = self
            .consumer
            .as_deref()
            .and_then(|p| p.members.get(&*member_id))
        else {
            return Err((ErrorCode::UnknownMemberId, None));
        };
        // Kafka's rule: the whole assignment goes back on a join, when the member reported what
        // it owns, and whenever it changed.
        let send_assignment = joining || req.owned_partitions.is_some() || assignment_changed;
        let response = ConsumerGroupHeartbeatResponse {
            error_code: ErrorCode::None.code(),
            error_message: None,
            member_id: member_id.to_string(),
            member_epoch: member.assignment.epoch,
            heartbeat_interval_ms: interval,
            assignment: send_assignment.then(|| to_wire(&member.assignment.assigned)),
        };
        // Nothing new for it: it may wait for a release (`wait.rs`). Its answer, if held, is
        // rebuilt then, with the assignment if it changed.
        let may_wait =
            (!joining && !assignment_changed && !changed_subscription).then_some(member_id);
        Ok((response, may_wait))
    }

    /// The group speaks the consumer protocol from now on if it does not already: an Empty
    /// classic group takes either protocol (protocol-v1 §7); a classic group with members is
    /// not a consumer group (Kafka 4's answer while it cannot be upgraded).
    pub(in crate::engine) fn take_consumer_protocol(&mut self) -> Result<(), Refusal> {
        if self.consumer.is_some() {
            return Ok(());
        }
        if !self.members.is_empty() || !self.pending.is_empty() {
            return self
                .upgrade_to_consumer()
                .map_err(super::migrate::not_upgradable);
        }
        let assignor = self.config.consumer.default_assignor.clone();
        self.consumer = Some(Box::new(ConsumerPart::new(assignor, self.generation)));
        self.assignor = None;
        self.leader = None;
        Ok(())
    }

    /// A member joining (epoch 0): a new member, a known one rejoining (after it was fenced,
    /// it gives everything up and starts again from what the group holds for it), or a static
    /// member's new incarnation taking over its instance. Returns the member id and whether the
    /// group's membership changed.
    fn join_consumer(
        &mut self,
        cx: Ctx<'_>,
        member_id: &Arc<str>,
        req: &ConsumerGroupHeartbeatRequest,
        client: &ClientInfo,
        member_unit: &mut Grant,
        out: &mut Effects<R>,
    ) -> Result<(Arc<str>, bool), Refusal> {
        let full = self.config.is_full(self.member_count());
        let Some(part) = self.consumer.as_deref_mut() else {
            return Err((ErrorCode::UnknownServerError, None));
        };
        if !part.members.contains_key(&**member_id) {
            // A member that is new to the group (or a static member's new incarnation) says
            // everything on its first heartbeat. A known member at epoch 0 (it rejoins after
            // being fenced, or its first target is still being computed) need not repeat it.
            check_first_heartbeat(req)?;
        }
        if let Some(instance) = &req.group_instance_id {
            if let Some(old_id) = part.statics.get(instance).cloned() {
                if old_id == *member_id {
                    return Ok((old_id, false));
                }
                let old_left = part.members.get(&*old_id).is_some_and(|m| m.left);
                if !old_left {
                    return Err(refuse(
                        ErrorCode::UnreleasedInstanceId,
                        format!("static member {instance} has not released its instance id"),
                    ));
                }
                // The new incarnation takes over the old one's epoch and partitions, without
                // a rebalance (Kafka's static member replacement).
                let client = MemberClient::from(client);
                if !part.take_over(
                    instance,
                    &old_id,
                    member_id,
                    client,
                    cx.now,
                    &mut self.tenure,
                ) {
                    return Err((ErrorCode::UnknownServerError, None));
                }
                out.persist = true;
                return Ok((Arc::clone(member_id), false));
            }
        }
        if part.members.contains_key(&**member_id) {
            return Ok((Arc::clone(member_id), false));
        }
        if full {
            return Err((ErrorCode::GroupMaxSizeReached, None));
        }
        let charge = match (client.charge(), *member_unit) {
            (Some(_), Grant::Refused) => return Err((ErrorCode::QuotaExceeded, None)),
            (Some(principal), Grant::Granted) => {
                *member_unit = Grant::NotAsked;
                Some(principal.clone())
            }
            _ => None,
        };
        let mut member =
            ConsumerMember::new(Arc::clone(member_id), MemberClient::from(client), cx.now);
        member.charge = charge;
        member.instance_id = req.group_instance_id.clone();
        if let Some(instance) = &req.group_instance_id {
            part.statics.insert(instance.clone(), Arc::clone(member_id));
        }
        part.members.insert(Arc::clone(member_id), Box::new(member));
        out.persist = true;
        let _ = cx;
        Ok((Arc::clone(member_id), true))
    }

    /// Kafka's `throwIfMemberEpochIsInvalid`: an epoch ahead of the member's is fenced; one
    /// behind is accepted only if it is the member's previous epoch and it reports nothing
    /// beyond what it owns (the answer with the new epoch was lost).
    fn check_member_epoch(
        &self,
        member_id: &str,
        req: &ConsumerGroupHeartbeatRequest,
    ) -> Result<(), Refusal> {
        let member = self
            .consumer
            .as_deref()
            .and_then(|p| p.members.get(member_id))
            .ok_or((ErrorCode::UnknownMemberId, None))?;
        if req.group_instance_id.is_some() && member.instance_id != req.group_instance_id {
            return Err((ErrorCode::FencedInstanceId, None));
        }
        if member.left {
            return Err(refuse(
                ErrorCode::FencedMemberEpoch,
                "the static member left; rejoin with epoch 0",
            ));
        }
        let epoch = member.assignment.epoch;
        if req.member_epoch > epoch {
            return Err(refuse(
                ErrorCode::FencedMemberEpoch,
                format!(
                    "epoch {} is ahead of the member's epoch {epoch}",
                    req.member_epoch
                ),
            ));
        }
        if req.member_epoch < epoch {
            let lost_answer = req.member_epoch == member.previous_epoch
                && req
                    .owned_partitions
                    .as_deref()
                    .is_some_and(|owned| is_subset(owned, &member.assignment.assigned));
            if !lost_answer {
                return Err(refuse(
                    ErrorCode::FencedMemberEpoch,
                    format!(
                        "epoch {} is behind the member's epoch {epoch}",
                        req.member_epoch
                    ),
                ));
            }
        }
        Ok(())
    }

    /// One reconciliation step of `member_id` (protocol-v1 §7 "Epochs"; `reconcile.rs`):
    /// returns whether what it owns changed. A member already at the target (the steady
    /// heartbeat) is answered without resolving anything.
    pub(in crate::engine) fn reconcile_member(
        &mut self,
        cx: Ctx<'_>,
        member_id: &Arc<str>,
        owned: Option<&[muster_protocol::TopicPartitions]>,
        enforce_subscription: bool,
        out: &mut Effects<R>,
    ) -> bool {
        let Some(part) = self.consumer.as_deref_mut() else {
            return false;
        };
        let Some(member) = part.members.get(&**member_id) else {
            return false;
        };
        if !enforce_subscription && member.at_target(part.assignment_epoch) {
            return false;
        }
        let subscribed: BTreeSet<String> = resolve(
            cx.topics,
            &member.subscribed_topics,
            member.regex.as_deref(),
        )
        .into_keys()
        .collect();
        let held = |topic: &str, p: i32| part.held_by_other(member_id, topic, p);
        let next = member.assignment.reconcile(&Reconcile {
            target_epoch: part.assignment_epoch,
            target: &member.target,
            subscribed: &subscribed,
            held: &held,
            owned,
            enforce_subscription,
        });
        let Some(next) = next else {
            return false;
        };
        let old = member.assignment.clone();
        part.move_ownership(
            member_id,
            &[&old.assigned, &old.pending_revocation],
            &[&next.assigned, &next.pending_revocation],
            Some((&mut self.tenure, next.epoch)),
        );
        let Some(member) = part.members.get_mut(&**member_id) else {
            return false;
        };
        if next.epoch != old.epoch {
            member.previous_epoch = old.epoch;
        }
        let assignment_changed = next.assigned != old.assigned;
        member.revoking_since = match (next.state, member.revoking_since) {
            (MemberState::UnrevokedPartitions, Some(since)) => Some(since),
            (MemberState::UnrevokedPartitions, None) => {
                let due = cx.now + u64::from(member.rebalance_timeout_ms);
                self.new_deadline = Some(self.new_deadline.map_or(due, |d| d.min(due)));
                Some(cx.now)
            }
            _ => None,
        };
        member.assignment = next;
        out.persist = true;
        assignment_changed
    }

    /// Enters the state the consumer part is in (protocol-v1 §7 "States").
    pub(in crate::engine) fn refresh_consumer_state(&mut self, now: crate::engine::Millis) {
        let Some(part) = self.consumer.as_deref() else {
            return;
        };
        let state = if part.members.is_empty() {
            GroupState::Empty
        } else if part.assignment_epoch < self.generation {
            GroupState::Assigning
        } else if !part.reconciled() {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        };
        self.set_state(state, now);
    }
}

/// What a member's first heartbeat must carry (Kafka's checks for epoch 0).
fn check_first_heartbeat(req: &ConsumerGroupHeartbeatRequest) -> Result<(), Refusal> {
    if req.rebalance_timeout_ms < 0 {
        return Err(refuse(
            ErrorCode::InvalidRequest,
            "rebalance_timeout_ms must be given when joining",
        ));
    }
    if req.subscribed_topics.is_none() && req.subscribed_topic_regex.is_none() {
        return Err(refuse(
            ErrorCode::InvalidRequest,
            "subscribed_topics or subscribed_topic_regex must be given when joining",
        ));
    }
    Ok(())
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`, and the assignor name.
fn validate(req: &ConsumerGroupHeartbeatRequest) -> Result<(), Refusal> {
    if req.member_id.len() > MAX_MEMBER_ID_BYTES {
        return Err(refuse(
            ErrorCode::InvalidRequest,
            format!("member ids are at most {MAX_MEMBER_ID_BYTES} bytes"),
        ));
    }
    if req.group_instance_id.as_deref() == Some("") {
        return Err(refuse(
            ErrorCode::InvalidRequest,
            "an instance id can't be empty",
        ));
    }
    match req.member_epoch {
        0 if req
            .owned_partitions
            .as_ref()
            .is_some_and(|o| !from_wire(o).is_empty()) =>
        {
            return Err(refuse(
                ErrorCode::InvalidRequest,
                "owned_partitions must be empty when joining",
            ));
        }
        0 => {}
        LEAVE_STATIC_EPOCH if req.group_instance_id.is_none() => {
            return Err(refuse(
                ErrorCode::InvalidRequest,
                "member epoch -2 is a static member's leave: give its instance id",
            ));
        }
        epoch if epoch < LEAVE_STATIC_EPOCH => {
            return Err(refuse(
                ErrorCode::InvalidRequest,
                format!("no member epoch {epoch}"),
            ));
        }
        _ if req.member_id.is_empty() => {
            return Err(refuse(
                ErrorCode::InvalidRequest,
                "member_id can't be empty",
            ));
        }
        _ => {}
    }
    if let Some(assignor) = &req.server_assignor {
        if !ASSIGNORS.contains(&assignor.as_str()) {
            return Err(refuse(
                ErrorCode::UnsupportedAssignor,
                format!("no server assignor {assignor:?}: uniform or range"),
            ));
        }
    }
    if let Some(regex) = req
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        if let Err(e) = compile_regex(regex) {
            return Err(refuse(
                ErrorCode::InvalidRequest,
                format!("subscribed_topic_regex does not compile: {e}"),
            ));
        }
    }
    Ok(())
}
