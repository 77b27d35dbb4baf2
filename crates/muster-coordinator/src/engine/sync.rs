//! SyncGroup (protocol §5 "SyncGroup"): held syncs in CompletingRebalance, the leader's
//! assignment, going Stable, and who still owes a SyncGroup.

use muster_protocol::{ErrorCode, Response, SyncGroupRequest, SyncGroupResponse};

use super::answers::sync_error;
use super::{Ctx, Group, GroupState, Millis, Output, NONE};

impl<R> Group<R> {
    /// SyncGroup (protocol §5 "SyncGroup").
    pub fn sync(&mut self, cx: Ctx<'_>, req: SyncGroupRequest, reply: R, out: &mut Output<R>) {
        if self.state == GroupState::Dead {
            return out.reply(reply, sync_error(ErrorCode::CoordinatorNotAvailable));
        }
        if let Err(code) = self.check_member(&req.member_id, req.group_instance_id.as_deref()) {
            return out.reply(reply, sync_error(code));
        }
        self.heard_from(&req.member_id, cx.now);
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
                    self.apply_assignment(req.assignments, cx.now, out);
                }
            }
            GroupState::Stable => {
                self.synced(&req.member_id);
                let response = self
                    .members
                    .get(req.member_id.as_str())
                    .map(|m| self.sync_response(m))
                    .unwrap_or_else(|| sync_error(ErrorCode::UnknownMemberId));
                out.reply(reply, response);
            }
            GroupState::Empty | GroupState::Dead => {
                out.reply(reply, sync_error(ErrorCode::UnknownMemberId));
            }
        }
    }

    pub(super) fn synced(&mut self, member_id: &str) {
        if let Some(m) = self.members.get_mut(member_id) {
            if m.pending_sync {
                m.pending_sync = false;
                self.num_pending_sync -= 1;
            }
        }
        if self.num_pending_sync == 0 && self.sync_deadline.is_some() {
            self.sync_deadline = None;
        }
    }

    /// The leader's assignment: store it (members left out get an empty one), go Stable, and
    /// release every held SyncGroup.
    pub(super) fn apply_assignment(
        &mut self,
        assignments: Vec<muster_protocol::MemberAssignment>,
        now: Millis,
        out: &mut Output<R>,
    ) {
        for m in self.members.values_mut() {
            m.clear_assignment();
        }
        for a in assignments {
            if let Some(m) = self.members.get_mut(a.member_id.as_str()) {
                m.assignment = a.partitions.into_boxed_slice();
                m.assignment_user_data = a.user_data.into_boxed_slice();
            }
        }
        self.set_state(GroupState::Stable, now);
        out.persist = true;
        let assignor = self.assignor.clone();
        for m in self.members.values_mut() {
            if let Some(r) = m.awaiting_sync.take() {
                m.last_heard = now;
                out.reply(
                    r,
                    Response::SyncGroup(SyncGroupResponse {
                        error_code: NONE,
                        assignor: assignor.clone(),
                        partitions: m.assignment.to_vec(),
                        user_data: m.assignment_user_data.to_vec(),
                    }),
                );
            }
        }
        if let Some(shortest) = self.members.values().map(|m| m.session_timeout_ms).min() {
            self.note_deadline(now + Millis::from(shortest));
        }
    }
}
