//! A member waiting for partitions that another member still holds (protocol-v1 §7
//! "Epochs": it gets each only once its previous owner stopped reporting it). Its heartbeat is
//! held — a long poll — and answered the moment one of them is released (its previous owner's
//! heartbeat confirmed the revocation, or that owner was removed), when a new target changes
//! what it waits for, or after one heartbeat interval (at most [`MAX_HOLD_MS`]) at the latest.
//! Without it, a newcomer would learn of a release only at its next regular heartbeat: up to a
//! whole interval later, for every partition that moves.
//!
//! Cheap: only members in `UnreleasedPartitions` wait (in a join, the newcomers), and waiters
//! are looked at only when a partition was released, a target applied, or a waiter's time is up.

use std::sync::Arc;

use muster_protocol::{ConsumerGroupHeartbeatResponse, ErrorCode, Response};

use super::group::to_wire;
use super::reconcile::MemberState;
use crate::engine::{Ctx, Effects, Group, Millis};

/// The longest a heartbeat is held, whatever the heartbeat interval (a client's request
/// timeout must not expire on it: muster-client's is 30 s).
pub const MAX_HOLD_MS: Millis = 10_000;

/// A held heartbeat.
#[derive(Debug)]
pub(in crate::engine) struct Waiter<R> {
    pub member_id: Arc<str>,
    pub reply: R,
    /// When it is answered whatever happened.
    pub until: Millis,
}

impl<R> Group<R> {
    /// Holds `reply` (the heartbeat of `member_id`, which changed nothing the member must hear
    /// now) if the member waits for partitions another member holds; gives it back otherwise.
    pub(super) fn hold_if_waiting(
        &mut self,
        member_id: &Arc<str>,
        reply: R,
        now: Millis,
    ) -> Option<R> {
        let interval = Millis::from(self.config.consumer.heartbeat_interval_ms).min(MAX_HOLD_MS);
        let waiting = self
            .consumer
            .as_deref()
            .and_then(|p| p.members.get(&**member_id))
            .is_some_and(|m| m.assignment.state == MemberState::UnreleasedPartitions);
        if !waiting
            || self
                .consumer_waiters
                .iter()
                .any(|w| w.member_id == *member_id)
        {
            return Some(reply);
        }
        let until = now + interval;
        self.consumer_waiters.push(Waiter {
            member_id: Arc::clone(member_id),
            reply,
            until,
        });
        self.note_deadline(until);
        None
    }

    /// Answers the waiters that can take a partition now (after a release or a new target),
    /// and those whose time is up.
    pub(in crate::engine) fn answer_waiters(&mut self, cx: Ctx<'_>, out: &mut Effects<R>) {
        let released = self
            .consumer
            .as_deref_mut()
            .is_some_and(|p| std::mem::take(&mut p.released));
        let due = self.consumer_waiters.iter().any(|w| w.until <= cx.now);
        if self.consumer_waiters.is_empty() || !(released || due) {
            return;
        }
        let interval = self.config.consumer.heartbeat_interval_ms as i32;
        let waiters = std::mem::take(&mut self.consumer_waiters);
        for w in waiters {
            let changed = self.reconcile_member(cx, &w.member_id, None, false, out);
            if !changed && w.until > cx.now {
                self.consumer_waiters.push(w);
                continue;
            }
            let response = match self
                .consumer
                .as_deref()
                .and_then(|p| p.members.get(&*w.member_id))
            {
                Some(m) => ConsumerGroupHeartbeatResponse {
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                    member_id: w.member_id.to_string(),
                    member_epoch: m.assignment.epoch,
                    heartbeat_interval_ms: interval,
                    assignment: changed.then(|| to_wire(&m.assignment.assigned)),
                },
                None => ConsumerGroupHeartbeatResponse {
                    error_code: ErrorCode::UnknownMemberId.code(),
                    ..ConsumerGroupHeartbeatResponse::default()
                },
            };
            out.reply(w.reply, Response::ConsumerGroupHeartbeat(response));
        }
    }

    /// Answers every held heartbeat with `code` (the group goes, or this node stops
    /// coordinating it), or, for `member_id` alone, its own (it left, or was removed).
    pub(in crate::engine) fn abort_waiters(
        &mut self,
        code: ErrorCode,
        member_id: Option<&str>,
        out: &mut Effects<R>,
    ) {
        let waiters = std::mem::take(&mut self.consumer_waiters);
        for w in waiters {
            if member_id.is_some_and(|id| *w.member_id != *id) {
                self.consumer_waiters.push(w);
                continue;
            }
            let response = ConsumerGroupHeartbeatResponse {
                error_code: code.code(),
                member_id: w.member_id.to_string(),
                ..ConsumerGroupHeartbeatResponse::default()
            };
            out.reply(w.reply, Response::ConsumerGroupHeartbeat(response));
        }
    }

    /// The earliest time a held heartbeat must be answered.
    pub(in crate::engine) fn waiters_deadline(&self) -> Option<Millis> {
        self.consumer_waiters.iter().map(|w| w.until).min()
    }
}
