//! LeaveGroup (protocol §6.11): per-member results, static members by instance id,
//! pending ids forgotten, and the rebalance of those who remain.

use muster_protocol::{ErrorCode, LeaveGroupRequest, LeaveGroupResponse, LeaveResult, Response};

use super::limits::check_leave;
use super::{Ctx, Effects, Group, GroupState, RebalanceTrigger, NONE};

impl<R> Group<R> {
    /// LeaveGroup (protocol §6.11): per-member results at once; held requests of the
    /// leaving members are answered through `out`.
    pub fn leave(&mut self, cx: Ctx<'_>, req: LeaveGroupRequest, reply: R) -> Effects<R> {
        let mut out = Effects::default();
        let response = self.leave_members(cx, req, &mut out);
        out.reply(reply, Response::LeaveGroup(response));
        self.seal(out)
    }

    fn leave_members(
        &mut self,
        cx: Ctx<'_>,
        req: LeaveGroupRequest,
        out: &mut Effects<R>,
    ) -> LeaveGroupResponse {
        if let Err(code) = check_leave(&self.config.limits, &req) {
            return LeaveGroupResponse {
                error_code: code.code(),
                members: Vec::new(),
            };
        }
        if self.consumer.is_some() && self.state != GroupState::Dead {
            let response = self.classic_leave_from_consumer(cx, req, out);
            self.answer_waiters(cx, out);
            self.refresh_consumer_state(cx.now);
            return response;
        }
        let mut results = Vec::with_capacity(req.members.len());
        let mut removed_any = false;
        let mut forgot_pending = false;
        for leaving in req.members {
            let removed_before = removed_any;
            let code = if self.state == GroupState::Dead {
                ErrorCode::CoordinatorNotAvailable
            } else if leaving.member_id.is_empty() {
                match leaving
                    .group_instance_id
                    .as_ref()
                    .and_then(|i| self.statics.get(i))
                    .cloned()
                {
                    Some(member_id) => {
                        removed_any |= self.remove_member(&member_id, out);
                        ErrorCode::None
                    }
                    None => ErrorCode::UnknownMemberId,
                }
            } else if self.forget_pending(&leaving.member_id, out) {
                forgot_pending = true;
                ErrorCode::None
            } else {
                match self.check_member(&leaving.member_id, leaving.group_instance_id.as_deref()) {
                    Ok(()) => {
                        removed_any |= self.remove_member(&leaving.member_id, out);
                        ErrorCode::None
                    }
                    Err(code) => code,
                }
            };
            if removed_any && !removed_before {
                // The first member removed is the one the journal names, with its reason.
                self.hint_detail(leaving.reason.clone());
            }
            results.push(LeaveResult {
                member_id: leaving.member_id,
                group_instance_id: leaving.group_instance_id,
                error_code: code.code(),
            });
        }
        if removed_any {
            self.after_removal(cx, RebalanceTrigger::Leave, out);
        } else if forgot_pending {
            self.maybe_complete_join(cx, out);
            if let Some(due) = self.retention_deadline() {
                self.note_deadline(due);
            }
        }
        LeaveGroupResponse {
            error_code: NONE,
            members: results,
        }
    }
}
