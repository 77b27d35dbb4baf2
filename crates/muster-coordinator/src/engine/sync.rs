//! SyncGroup (protocol §6.8): held syncs in CompletingRebalance, the leader's
//! assignment, going Stable, and who still owes a SyncGroup.
//!
//! Who still owes a SyncGroup, and until when, is a [`SyncWindow`]: opened when a barrier
//! closes, it lasts through CompletingRebalance and into Stable (a follower may sync after the
//! leader's assignment) until every member has synced or its deadline passes; a new barrier
//! drops it.

use std::collections::HashSet;
use std::sync::Arc;

use muster_protocol::{ErrorCode, SyncGroupRequest};

use super::answers::{sync_error, sync_response};
use super::limits::check_sync;
use super::{Ctx, Effects, Group, GroupState, Millis, ProcessKeys};

/// A set of member ids (keyed like every map of a group).
pub(super) type MemberSet = HashSet<Arc<str>, ProcessKeys>;

/// The members that were answered by the last barrier and have not sent SyncGroup since.
#[derive(Debug)]
pub(super) struct SyncWindow {
    /// Members still in `pending` at this time are removed and the group rebalances.
    pub(super) deadline: Millis,
    pub(super) pending: MemberSet,
}

impl<R> Group<R> {
    /// SyncGroup (protocol §6.8).
    pub fn sync(&mut self, cx: Ctx<'_>, req: SyncGroupRequest, reply: R) -> Effects<R> {
        let mut out = Effects::default();
        self.sync_inner(cx, req, reply, &mut out);
        self.seal(out)
    }

    fn sync_inner(&mut self, cx: Ctx<'_>, req: SyncGroupRequest, reply: R, out: &mut Effects<R>) {
        if let Err(code) = check_sync(&self.config.limits, &req) {
            return out.reply(reply, sync_error(code));
        }
        if self.state == GroupState::Dead {
            return out.reply(reply, sync_error(ErrorCode::CoordinatorNotAvailable));
        }
        if self.consumer.is_some() {
            let response = self.classic_sync_to_consumer(cx.now, &req);
            return out.reply(reply, response);
        }
        if let Err(code) =
            self.check_and_hear(&req.member_id, req.group_instance_id.as_deref(), cx.now)
        {
            return out.reply(reply, sync_error(code));
        }
        if req.generation_id != self.generation {
            return out.reply(reply, sync_error(ErrorCode::IllegalGeneration));
        }
        if req.assignor.is_some() && req.assignor != self.assignor {
            return out.reply(reply, sync_error(ErrorCode::InconsistentGroupProtocol));
        }
        match self.state {
            GroupState::PreparingRebalance => {
                out.reply(reply, sync_error(ErrorCode::RebalanceInProgress));
            }
            GroupState::CompletingRebalance => {
                self.synced(&req.member_id);
                if let Some(m) = self.members.get_mut(req.member_id.as_str()) {
                    if let Some(old) = m.awaiting_sync.replace(reply) {
                        out.reply(old, sync_error(ErrorCode::RebalanceInProgress));
                    }
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    self.apply_assignment(req.assignments, cx, out);
                }
            }
            GroupState::Stable => {
                self.synced(&req.member_id);
                let response = self
                    .members
                    .get(req.member_id.as_str())
                    .map(|m| sync_response(&self.assignor, m))
                    .unwrap_or_else(|| sync_error(ErrorCode::UnknownMemberId));
                out.reply(reply, response);
            }
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling => {
                out.reply(reply, sync_error(ErrorCode::UnknownMemberId));
            }
        }
    }

    /// `member_id` sent SyncGroup: it owes none any more; the window closes once nobody does.
    pub(super) fn synced(&mut self, member_id: &str) {
        if let Some(window) = self.sync_window.as_mut() {
            window.pending.remove(member_id);
            if window.pending.is_empty() {
                self.sync_window = None;
            }
        }
    }

    /// Whether the last barrier answered `member_id` and it has not sent SyncGroup since.
    pub(super) fn owes_sync(&self, member_id: &str) -> bool {
        self.sync_window
            .as_ref()
            .is_some_and(|w| w.pending.contains(member_id))
    }

    /// The leader's assignment: store it (members left out get an empty one), go Stable, and
    /// release every held SyncGroup.
    pub(super) fn apply_assignment(
        &mut self,
        assignments: Vec<muster_protocol::MemberAssignment>,
        cx: Ctx<'_>,
        out: &mut Effects<R>,
    ) {
        let now = cx.now;
        for m in self.members.values_mut() {
            m.clear_assignment();
        }
        for a in assignments {
            if let Some(m) = self.members.get_mut(a.member_id.as_str()) {
                m.assignment = a.partitions.into_boxed_slice();
                m.assignment_user_data = a.user_data.into_boxed_slice();
            }
        }
        // The members own what they were given from this generation on (`tenure.rs`).
        for m in self.members.values() {
            self.tenure
                .grant_all(&m.member_id, &m.assignment, self.generation);
        }
        self.set_state(GroupState::Stable, now);
        self.journal_assigned(now, Some(cx.topics), out);
        out.persist = true;
        for m in self.members.values_mut() {
            if let Some(r) = m.awaiting_sync.take() {
                m.last_heard = now;
                out.reply(r, sync_response(&self.assignor, m));
            }
        }
        if let Some(shortest) = self.members.values().map(|m| m.session_timeout_ms).min() {
            self.note_deadline(now + Millis::from(shortest));
        }
    }
}
