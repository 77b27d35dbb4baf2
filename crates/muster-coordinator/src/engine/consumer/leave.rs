//! Members leaving a consumer-protocol group (protocol-v1 §7 "Leave", "Fencing"): a leave with
//! epoch -1, a static member's temporary leave with -2 (its partitions are kept for its
//! instance), and removals by the coordinator (session expiry, a revocation past the rebalance
//! timeout). Every removal frees the member's partitions and raises the group epoch.

use std::sync::Arc;

use muster_protocol::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ErrorCode};

use super::group::LEAVE_STATIC_EPOCH;
use super::Partitions;
use crate::engine::effects::LedgerRequest;
use crate::engine::{Ctx, Effects, Group};

impl<R> Group<R> {
    /// A heartbeat with epoch -1 or -2 (`heartbeat.rs` validated it).
    pub(super) fn consumer_leave(
        &mut self,
        cx: Ctx<'_>,
        req: &ConsumerGroupHeartbeatRequest,
        out: &mut Effects<R>,
    ) -> Result<ConsumerGroupHeartbeatResponse, (ErrorCode, Option<String>)> {
        let Some(part) = self.consumer.as_deref_mut() else {
            return Err((ErrorCode::UnknownMemberId, None));
        };
        let member_id = part
            .leaving(&req.member_id, req.group_instance_id.as_deref())
            .map_err(|code| (code, None))?;
        let answer = ConsumerGroupHeartbeatResponse {
            error_code: ErrorCode::None.code(),
            member_id: member_id.to_string(),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            ..ConsumerGroupHeartbeatResponse::default()
        };
        if req.member_epoch == LEAVE_STATIC_EPOCH {
            if let Some(m) = part.members.get_mut(&*member_id) {
                m.left = true;
                m.last_heard = cx.now;
                out.persist = true;
            }
            return Ok(answer);
        }
        self.remove_consumer_member(cx, &member_id, super::journal::kind::MEMBER_LEFT, out);
        Ok(answer)
    }

    /// Removes a member: its partitions are free, its unit given back, the group epoch rises.
    pub(in crate::engine) fn remove_consumer_member(
        &mut self,
        cx: Ctx<'_>,
        member_id: &Arc<str>,
        kind: &str,
        out: &mut Effects<R>,
    ) {
        let cause = self.consumer_cause(kind, Some(member_id), None);
        self.abort_waiters(ErrorCode::UnknownMemberId, Some(member_id), out);
        let Some(part) = self.consumer.as_deref_mut() else {
            return;
        };
        let Some(member) = part.members.remove(&**member_id) else {
            return;
        };
        let nothing = Partitions::new();
        part.move_ownership(
            member_id,
            &[
                &member.assignment.assigned,
                &member.assignment.pending_revocation,
            ],
            &[&nothing],
            None,
        );
        if let Some(instance) = &member.instance_id {
            if part.statics.get(instance).is_some_and(|id| id == member_id) {
                part.statics.remove(instance);
            }
        }
        if let Some(principal) = member.charge {
            out.ledger.push(LedgerRequest::ReturnMemberUnit(principal));
        }
        let only_classic_left = member.classic.is_none()
            && !part.members.is_empty()
            && part.members.values().all(|m| m.classic.is_some());
        if only_classic_left {
            // The last consumer-protocol member went: the group is classic again at the epoch
            // its members hold, and the classic rebalance that follows is the change (Kafka 4
            // converts instead of bumping: a bump first would answer the members' heartbeats
            // ILLEGAL_GENERATION and make them lose their partitions).
            self.maybe_downgrade(cx, out);
            return;
        }
        self.bump_group_epoch(cx, cause, out);
    }
}
