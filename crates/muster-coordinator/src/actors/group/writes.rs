//! How a group actor makes its engine's writes durable ([`Write`]): the group's record
//! (one at a time, as the engine hands them out; rolled back to what is durable when it fails),
//! offset commits (concurrent, answered by the engine once durable), best-effort deletes, a
//! DeleteGroups deletion; and, in cluster mode, letting go of a group another node took over.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use muster_protocol::error_answers::error_like;
use muster_protocol::{ErrorCode, Response};
use tracing::{debug, error, info};

use super::GroupActor;
use crate::actors::messages::Forget;
use crate::actors::reply::{send_grouped, ReplyTo};
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
        // The store will refuse the same batch again (a value too large, an atomic change over
        // its transaction limit): a retriable code would have the client retry forever.
        StoreError::Rejected(_) => ErrorCode::InvalidRequest,
        _ => ErrorCode::CoordinatorNotAvailable,
    }
}

/// Someone waiting for the group's deletion to be durable (a DeleteGroups): told NONE, or the
/// code its failure is answered with.
pub(super) type Waiter = tokio::sync::oneshot::Sender<ErrorCode>;

impl GroupActor {
    /// Writes the group's record (or its deletion), then sends `replies` and reports the
    /// outcome to the engine, which hands out the next record write if calls meanwhile changed
    /// the record (it gives out one at a time, so a record never lands after the group's
    /// deletion). A durable deletion tells the DeleteGroups waiting for it.
    pub(super) fn write_record(
        &mut self,
        batch: Vec<Mutation>,
        replies: Vec<(ReplyTo, Response)>,
        ctx: &mut Context<Self>,
    ) {
        let deletes = batch
            .iter()
            .any(|m| matches!(m, Mutation::DeleteGroup { .. }));
        let durable = self.env.store.apply(batch);
        self.jobs += 1;
        let fut = durable.into_actor(self).map(move |result, act, ctx| {
            act.jobs -= 1;
            match result {
                Ok(()) => {
                    send_grouped(replies);
                    if deletes {
                        for waiter in act.deletion_waiters.drain(..) {
                            let _ = waiter.send(ErrorCode::None);
                        }
                    }
                    let effects = act.group.record_written(Ok(()));
                    act.carry_out(effects, ctx);
                }
                Err(e)
                    if act.relinquished || failed_write_code(&e) == ErrorCode::NotCoordinator =>
                {
                    // Another node owns the group now: what it holds is the truth, never
                    // reloaded here. The supervisor is told by the ownership loop and
                    // relinquishes the group; until then it answers NOT_COORDINATOR.
                    info!(group_id = %logsafe(act.group.group_id()), error = %e,
                        "group metadata refused: another node coordinates the group now");
                    act.fail_waiting(replies, ErrorCode::NotCoordinator, ctx);
                    act.give_up(ctx);
                    return;
                }
                Err(e) => {
                    error!(group_id = %logsafe(act.group.group_id()), error = %e,
                        "group metadata not durable; answering COORDINATOR_NOT_AVAILABLE and \
                         rolling back to the durable record");
                    act.fail_waiting(replies, ErrorCode::CoordinatorNotAvailable, ctx);
                    act.roll_back(ctx);
                    return;
                }
            }
            if act.relinquished {
                act.stop_if_drained(ctx);
            } else if act.group.state() == GroupState::Dead && !act.group.record_write_in_flight() {
                // Removed (retention or DeleteGroups) and now deleted from storage: the
                // supervisor forgets us and requests still addressed here are answered by the
                // drop guard.
                act.env.supervisor.forget.do_send(Forget { key: act.key });
                ctx.stop();
            } else {
                act.settle(ctx);
            }
        });
        ctx.spawn(fut);
    }

    /// A record write failed: its replies, those the engine owed to the next record write (they
    /// depend on this one's state too) and any DeleteGroups waiting are answered with `code`.
    fn fail_waiting(
        &mut self,
        replies: Vec<(ReplyTo, Response)>,
        code: ErrorCode,
        ctx: &mut Context<Self>,
    ) {
        send_grouped(
            replies
                .into_iter()
                .map(|(to, response)| {
                    let failed = error_like(&response, code);
                    (to, failed)
                })
                .collect(),
        );
        for waiter in self.deletion_waiters.drain(..) {
            let _ = waiter.send(code);
        }
        let effects = self.group.record_written(Err(code));
        self.carry_out(effects, ctx);
    }

    /// Offsets are answered only once durable, and only then visible to OffsetFetch: the
    /// engine does both when handed the commit back — in the order the commits were handed to
    /// the store ([`CommitQueue`]), which is the order the store applies them in.
    pub(super) fn write_commit(
        &mut self,
        batch: Vec<Mutation>,
        commit: PendingCommit<ReplyTo>,
        ctx: &mut Context<Self>,
    ) {
        let submitted = Instant::now();
        let partitions = commit.partitions();
        let durable = self.env.store.apply(batch);
        let id = self.commits.push(commit);
        self.jobs += 1;
        let fut = durable.into_actor(self).map(move |result, act, ctx| {
            act.jobs -= 1;
            let result = match result {
                Ok(()) => {
                    crate::metrics::storage_write(submitted.elapsed().as_secs_f64());
                    crate::metrics::offsets_committed(partitions);
                    Ok(())
                }
                Err(e) => {
                    error!(group_id = %logsafe(act.group.group_id()), error = %e, "offset commit not durable");
                    Err(failed_write_code(&e))
                }
            };
            act.commits.done(id, result);
            while let Some((commit, result)) = act.commits.pop_ready() {
                let effects = act.group.commit_written(commit, result);
                act.carry_out(effects, ctx);
            }
            act.stop_if_drained(ctx);
            act.settle(ctx);
        });
        ctx.spawn(fut);
    }

    /// Nobody waits on this write; a failure only means the offsets come back after a restart
    /// and expire again.
    pub(super) fn write_best_effort(&mut self, batch: Vec<Mutation>, ctx: &mut Context<Self>) {
        let durable = self.env.store.apply(batch);
        self.best_effort_in_flight += 1;
        self.jobs += 1;
        ctx.spawn(durable.into_actor(self).map(|result, act, ctx| {
            act.best_effort_in_flight -= 1;
            act.jobs -= 1;
            if let Err(e) = result {
                // Expired offsets, the quarantine, held-back history: what is on disk
                // comes back after a restart and is done again (`Write::BestEffort`).
                error!(group_id = %logsafe(act.group.group_id()), error = %e, "best-effort write failed (expired offsets, quarantine or offset history)");
            }
            act.stop_if_drained(ctx);
            act.settle(ctx);
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
        if !self.relinquished
            || self.group.record_write_in_flight()
            || self.group.commits_in_flight() > 0
            || self.best_effort_in_flight > 0
        {
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
    pub(super) fn reload(&mut self, ctx: &mut Context<Self>) {
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
        group.restore_offset_records(stored.history, stored.quarantine);
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
        self.settle(ctx);
    }
}

/// Offset writes (commits, resets, restores) in the order they were handed to the store, with
/// their outcomes as they arrive. The store applies batches in that order, but the actor may
/// see two completions of one poll in another (actix runs spawned futures as they are
/// ready): told in that order, the engine would let an older commit's offset replace a newer
/// one in memory, and OffsetFetch would answer an offset older than one already acknowledged
/// (issue #23's parking work found it: 30 pipelined commits of a partition, a fetch answered
/// 2). So each outcome waits until those before it are known.
#[derive(Default)]
pub(super) struct CommitQueue {
    /// The number of the front slot.
    first: u64,
    slots: std::collections::VecDeque<Slot>,
}

type Slot = (
    Option<PendingCommit<ReplyTo>>,
    Option<Result<(), ErrorCode>>,
);

impl CommitQueue {
    /// Queues a commit handed to the store; its number.
    fn push(&mut self, commit: PendingCommit<ReplyTo>) -> u64 {
        let id = self.first + self.slots.len() as u64;
        self.slots.push_back((Some(commit), None));
        id
    }

    /// The outcome of commit `id`.
    fn done(&mut self, id: u64, result: Result<(), ErrorCode>) {
        let slot = id
            .checked_sub(self.first)
            .and_then(|at| usize::try_from(at).ok())
            .and_then(|at| self.slots.get_mut(at));
        if let Some(slot) = slot {
            slot.1 = Some(result);
        }
    }

    /// The front commit and its outcome, once known.
    fn pop_ready(&mut self) -> Option<(PendingCommit<ReplyTo>, Result<(), ErrorCode>)> {
        if !self
            .slots
            .front()
            .is_some_and(|(_, result)| result.is_some())
        {
            return None;
        }
        let (commit, result) = self.slots.pop_front()?;
        self.first += 1;
        Some((commit?, result?))
    }
}
