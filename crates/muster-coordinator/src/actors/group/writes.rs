//! How a group actor makes its engine's writes durable ([`Write`]): the group's record
//! (ordered, coalesced while one is in flight, rolled back to what is durable when it fails),
//! offset commits (concurrent, answered by the engine once durable), best-effort deletes, a
//! DeleteGroups deletion; and, in cluster mode, letting go of a group another node took over.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use muster_protocol::{ErrorCode, Response};
use tracing::{debug, error, info};

use super::GroupActor;
use crate::actors::messages::Forget;
use crate::actors::reply::ReplyTo;
use muster_protocol::error_answers::error_like;

use crate::engine::{Ctx, Effects, Group, GroupState, PendingCommit};
use crate::logsafe::logsafe;
use crate::storage::{GroupRecord, Mutation, StoreError};

/// How often a group whose write failed tries to reload its durable record (it fails fast
/// while the store is recovering).
const RELOAD_RETRY: Duration = Duration::from_millis(200);

/// The answer for requests whose write failed: a write refused because another node owns the
/// group's shard now means "ask FindCoordinator again", not "retry here".
fn failed_write_code(error: &StoreError) -> ErrorCode {
    match error {
        StoreError::Fenced { .. } | StoreError::NotOwner { .. } => ErrorCode::NotCoordinator,
        _ => ErrorCode::CoordinatorNotAvailable,
    }
}

/// Record writes queued behind the one in flight, as one: its batch, the replies waiting for
/// it, and who else waits for it (a DeleteGroups, told the outcome's code).
#[derive(Default)]
pub(super) struct QueuedRecord {
    batch: Vec<Mutation>,
    replies: Vec<(ReplyTo, Response)>,
    waiters: Vec<Waiter>,
}

/// Someone waiting for a record write (a DeleteGroups): told NONE once it is durable, or the
/// code its failure is answered with.
pub(super) type Waiter = tokio::sync::oneshot::Sender<ErrorCode>;

/// Adds `batch` to record writes queued behind the one in flight: the later record (or the
/// group's deletion) supersedes an earlier one; journal entries add up, in order.
fn coalesce(queued: &mut Vec<Mutation>, batch: Vec<Mutation>) {
    for mutation in batch {
        if matches!(
            mutation,
            Mutation::PutGroup(_) | Mutation::DeleteGroup { .. }
        ) {
            queued.retain(|m| !matches!(m, Mutation::PutGroup(_)));
        }
        queued.push(mutation);
    }
}

impl GroupActor {
    /// Writes the group's record (or its deletion), then sends `replies` and tells `waiters`.
    /// Record writes are ordered: while one is in flight, later ones are coalesced into the next
    /// (which carries the latest record, or the deletion that supersedes it), so a record can
    /// never land after the group's deletion.
    pub(super) fn write_record(
        &mut self,
        batch: Vec<Mutation>,
        replies: Vec<(ReplyTo, Response)>,
        waiters: Vec<Waiter>,
        ctx: &mut Context<Self>,
    ) {
        if self.record_in_flight {
            let queued = self.record_next.get_or_insert_with(QueuedRecord::default);
            coalesce(&mut queued.batch, batch);
            queued.replies.extend(replies);
            queued.waiters.extend(waiters);
            return;
        }
        self.record_in_flight = true;
        let durable = self.env.store.apply(batch);
        let fut = durable.into_actor(self).map(move |result, act, ctx| {
            act.record_in_flight = false;
            match result {
                Ok(()) => {
                    for (to, response) in replies {
                        to.send(response);
                    }
                    for waiter in waiters {
                        let _ = waiter.send(ErrorCode::None);
                    }
                }
                Err(e)
                    if act.relinquished || failed_write_code(&e) == ErrorCode::NotCoordinator =>
                {
                    // Another node owns the group now: what it holds is the truth, never
                    // reloaded here. The supervisor is told by the ownership loop and
                    // relinquishes the group; until then it answers NOT_COORDINATOR.
                    info!(group_id = %logsafe(act.group.group_id()), error = %e,
                        "group metadata refused: another node coordinates the group now");
                    act.fail_waiting(replies, waiters, ErrorCode::NotCoordinator);
                    act.give_up(ctx);
                    return;
                }
                Err(e) => {
                    error!(group_id = %logsafe(act.group.group_id()), error = %e,
                        "group metadata not durable; answering COORDINATOR_NOT_AVAILABLE and \
                         rolling back to the durable record");
                    act.fail_waiting(replies, waiters, ErrorCode::CoordinatorNotAvailable);
                    act.roll_back(ctx);
                    return;
                }
            }
            if let Some(QueuedRecord {
                batch,
                replies,
                waiters,
            }) = act.record_next.take()
            {
                act.write_record(batch, replies, waiters, ctx);
            } else if act.relinquished {
                act.stop_if_drained(ctx);
            } else if act.group.state() == GroupState::Dead {
                // Removed (retention or DeleteGroups) and now deleted from storage: the
                // supervisor forgets us and requests still addressed here are answered by the
                // drop guard.
                act.env.supervisor.forget.do_send(Forget { key: act.key });
                ctx.stop();
            }
        });
        ctx.spawn(fut);
    }

    /// Answers `replies` and `waiters`, and those queued for the next record write (they
    /// depend on this one's state too), with `code`; nothing queued is written any more.
    fn fail_waiting(
        &mut self,
        replies: Vec<(ReplyTo, Response)>,
        waiters: Vec<Waiter>,
        code: ErrorCode,
    ) {
        let next = self.record_next.take().unwrap_or_default();
        for (to, response) in replies.into_iter().chain(next.replies) {
            to.send(error_like(&response, code));
        }
        for waiter in waiters.into_iter().chain(next.waiters) {
            let _ = waiter.send(code);
        }
    }

    /// Offsets are answered only once durable, and only then visible to OffsetFetch: the
    /// engine does both when handed the commit back.
    pub(super) fn write_commit(
        &mut self,
        batch: Vec<Mutation>,
        commit: PendingCommit<ReplyTo>,
        ctx: &mut Context<Self>,
    ) {
        let submitted = Instant::now();
        let durable = self.env.store.apply(batch);
        let fut = durable.into_actor(self).map(move |result, act, ctx| {
            let result = match result {
                Ok(()) => {
                    crate::metrics::storage_write(submitted.elapsed().as_secs_f64());
                    crate::metrics::offsets_committed(commit.partitions());
                    Ok(())
                }
                Err(e) => {
                    error!(group_id = %logsafe(act.group.group_id()), error = %e, "offset commit not durable");
                    Err(failed_write_code(&e))
                }
            };
            let effects = act.group.commit_written(commit, result);
            act.carry_out(effects, ctx);
            act.stop_if_drained(ctx);
        });
        ctx.spawn(fut);
    }

    /// Nobody waits on this write; a failure only means the offsets come back after a restart
    /// and expire again.
    pub(super) fn write_best_effort(&mut self, batch: Vec<Mutation>, ctx: &mut Context<Self>) {
        let durable = self.env.store.apply(batch);
        ctx.spawn(durable.into_actor(self).map(|result, act, _| {
            if let Err(e) = result {
                error!(group_id = %logsafe(act.group.group_id()), error = %e, "expired offsets not deleted");
            }
        }));
    }

    /// This node stops coordinating the group: held requests are answered NOT_COORDINATOR,
    /// and so is everything from now on.
    pub(super) fn give_up(&mut self, ctx: &mut Context<Self>) {
        self.relinquished = true;
        let effects = self.group.abort_held(ErrorCode::NotCoordinator);
        self.carry_out(effects, ctx);
        self.stop_if_drained(ctx);
    }

    /// Once relinquished and with no write in flight, tells whoever waits and stops.
    pub(super) fn stop_if_drained(&mut self, ctx: &mut Context<Self>) {
        if !self.relinquished || self.record_in_flight || self.group.commits_in_flight() > 0 {
            return;
        }
        if self.drained.is_empty() {
            // Given up on its own (a fenced write): the supervisor still routes here until the
            // ownership loop relinquishes the shard, so keep answering NOT_COORDINATOR.
            return;
        }
        for waiter in self.drained.drain(..) {
            let _ = waiter.send(());
        }
        ctx.stop();
    }

    /// A write of the group's record failed: what the engine holds is ahead of disk. Answers
    /// the held requests, then reloads the durable record.
    pub(super) fn roll_back(&mut self, ctx: &mut Context<Self>) {
        let effects = self.group.abort_held(ErrorCode::CoordinatorNotAvailable);
        self.carry_out(effects, ctx);
        self.reloading = true;
        self.reload(ctx);
    }

    /// Rebuilds the group from what the store holds (as at startup: sessions start afresh),
    /// or tries again shortly while the store is recovering.
    fn reload(&mut self, ctx: &mut Context<Self>) {
        if self.relinquished {
            // Another node has the group now: nothing to reload, only to stop.
            self.reloading = false;
            self.stop_if_drained(ctx);
            return;
        }
        let stored = match self.env.store.load_group(self.group.group_id()) {
            Ok(stored) => stored,
            Err(e) => {
                debug!(group_id = self.group.group_id(), error = %e, "durable record not readable yet");
                ctx.run_later(RELOAD_RETRY, |act, ctx| act.reload(ctx));
                return;
            }
        };
        let now = self.env.clock.now();
        // Never written: the group is what a new one would be, with its offsets.
        let record = stored
            .record
            .unwrap_or_else(|| GroupRecord::empty(self.group.group_id().to_owned(), now));
        let config = Arc::clone(&self.env.config);
        let (mut group, counted) = Group::restore(record, stored.offsets, config, now);
        group.restore_journal(stored.journal);
        group.replaces(&self.group);
        self.env.ledger.apply(self.group.release_all());
        self.env.ledger.apply(counted);
        self.group = group;
        self.reloading = false;
        // The restored group reports its full next deadline; whatever the supervisor holds for
        // us fires early at worst.
        self.armed = None;
        if let Some(at) = self.group.next_deadline() {
            self.arm(at);
        }
        info!(
            group_id = self.group.group_id(),
            generation = self.group.generation(),
            state = self.group.state().as_str(),
            "group rolled back to its durable record"
        );
        let missed = std::mem::take(&mut self.missed_topics);
        let effects = if missed.is_empty() {
            Effects::default()
        } else {
            let cx = Ctx {
                now,
                topics: self.env.catalog.as_ref(),
            };
            self.group.topics_changed(cx, &missed)
        };
        // Carried out even when empty: the supervisor hears the restored state and size (it
        // was told of the state the failed write would have made).
        self.carry_out(effects, ctx);
    }
}
