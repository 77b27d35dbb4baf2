//! The join barrier (protocol §6.5, §6.6): entering PreparingRebalance, the initial
//! rebalance delay, completing early or at the rebalance timeout, evicting dynamic laggards,
//! the new generation, the assignor vote's result and the leader, and the held JoinGroup answers.
//!
//! What only a barrier needs (its deadline, the half-way warning, the initial delay, why and
//! when it started) is a [`Barrier`], held by the group exactly while it is PreparingRebalance:
//! closing the barrier drops it.

use std::sync::Arc;

use muster_protocol::ErrorCode;

use super::answers::sync_error;
use super::sync::{MemberSet, SyncWindow};
use super::{Ctx, Effects, Event, Group, GroupState, Millis, NewSince, RebalanceTrigger};

/// The state of a rebalance in progress (PreparingRebalance). Held joins stay on their members:
/// a join is held before its barrier opens (the join that starts it) and can be answered while
/// it stays open (shutdown).
#[derive(Debug, Clone, Copy)]
pub(super) struct Barrier {
    /// For the operator's log line.
    pub(super) started_at: Millis,
    pub(super) trigger: RebalanceTrigger,
    /// When the barrier closes (or the initial delay's next step ends). `None` only while a
    /// zero initial delay closes it at once.
    pub(super) deadline: Option<Millis>,
    /// Half-way through an ordinary barrier: warn the operator about who holds it up.
    pub(super) warn_at: Option<Millis>,
    /// Since the half-way warning: the group is stuck (protocol §6.20).
    pub(super) stuck_since: Option<Millis>,
    pub(super) initial_delay: Option<InitialDelay>,
}

impl Barrier {
    /// A barrier opened at `now`, with no deadline yet.
    pub(super) fn new(now: Millis, trigger: RebalanceTrigger) -> Self {
        Barrier {
            started_at: now,
            trigger,
            deadline: None,
            warn_at: None,
            stuck_since: None,
            initial_delay: None,
        }
    }

    /// If the half-way warning is due at `now`: disarms it (it is given once) and returns how
    /// long the barrier has been open.
    pub(super) fn take_due_warning(&mut self, now: Millis) -> Option<Millis> {
        let due = self.warn_at.is_some_and(|d| d <= now);
        if due {
            self.warn_at = None;
            self.stuck_since = Some(now);
        }
        due.then(|| now.saturating_sub(self.started_at))
    }
}

/// The initial-rebalance-delay window (protocol §6.5: a plain timer, extended while new members
/// arrive, never past the rebalance timeout).
#[derive(Debug, Clone, Copy)]
pub(super) struct InitialDelay {
    pub(super) remaining_ms: Millis,
    pub(super) new_member_added: bool,
}

impl<R> Group<R> {
    /// Moves the group to PreparingRebalance (Kafka's `prepareRebalance`).
    pub(super) fn prepare_rebalance(
        &mut self,
        cx: Ctx<'_>,
        trigger: RebalanceTrigger,
        out: &mut Effects<R>,
    ) {
        let now = cx.now;
        match self.state {
            GroupState::PreparingRebalance | GroupState::Dead => return,
            // The consumer protocol's states: no classic rebalance (`consumer/`).
            GroupState::Assigning | GroupState::Reconciling => return,
            GroupState::CompletingRebalance => {
                // Held syncs are told to rejoin; the half-made assignment is dropped.
                let mut released = None::<Millis>;
                for m in self.members.values_mut() {
                    if let Some(r) = m.awaiting_sync.take() {
                        out.reply(r, sync_error(ErrorCode::RebalanceInProgress));
                        // Heard from while held (protocol §6.10; Kafka's
                        // `propagateAssignment` reschedules the heartbeat): its session runs
                        // from this answer, not from when it sent the SyncGroup.
                        m.last_heard = now;
                        let due = now + Millis::from(m.session_timeout_ms);
                        released = Some(released.map_or(due, |d| d.min(due)));
                    }
                    m.clear_assignment();
                }
                if let Some(due) = released {
                    self.note_deadline(due);
                }
            }
            GroupState::Empty | GroupState::Stable => {}
        }
        // Nobody owes a SyncGroup for a generation that is being replaced.
        self.sync_window = None;
        let rebalance_timeout = self.rebalance_timeout_ms();
        let mut barrier = Barrier::new(now, trigger);
        if self.state == GroupState::Empty {
            // A zero initial delay is a timer that fires at once: the join completes now.
            let delay = Millis::from(self.config.initial_rebalance_delay_ms).min(rebalance_timeout);
            if delay > 0 {
                barrier.initial_delay = Some(InitialDelay {
                    remaining_ms: rebalance_timeout - delay,
                    new_member_added: false,
                });
                barrier.deadline = Some(now + delay);
            }
        } else {
            barrier.deadline = Some(now + rebalance_timeout);
            let warn_at = now + rebalance_timeout / 2;
            barrier.warn_at = Some(warn_at);
            self.note_deadline(warn_at);
        }
        let deadline = barrier.deadline;
        self.barrier = Some(Box::new(barrier));
        self.set_state(GroupState::PreparingRebalance, now);
        self.journal_barrier_opened(trigger, now);
        if let Some(due) = deadline {
            self.note_deadline(due);
        }
        out.persist = true;
        out.events.push(Event::RebalanceStarted {
            trigger,
            generation: self.generation,
        });
        if deadline.is_none() {
            self.complete_join(cx, out);
        } else {
            self.maybe_complete_join(cx, out);
        }
    }

    pub(super) fn rebalance_timeout_ms(&self) -> Millis {
        self.members
            .values()
            .map(|m| Millis::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// A member new to the group arrived: an initial delay in progress is extended once more.
    pub(super) fn note_new_member(&mut self) {
        if let Some(delay) = self.barrier.as_mut().and_then(|b| b.initial_delay.as_mut()) {
            delay.new_member_added = true;
        }
    }

    /// Completes the barrier early once every member and pending id has rejoined (never during
    /// the initial delay, which is a plain timer).
    pub(super) fn maybe_complete_join(&mut self, cx: Ctx<'_>, out: &mut Effects<R>) {
        if self.state == GroupState::PreparingRebalance
            && self
                .barrier
                .as_ref()
                .is_none_or(|b| b.initial_delay.is_none())
            && self.num_awaiting_join == self.members.len()
            && self.pending.is_empty()
        {
            self.complete_join(cx, out);
        }
    }

    /// A group can hold more members than its cap at a barrier (members that had not rejoined
    /// when newcomers were let in come back): the newest members go, answered
    /// GROUP_MAX_SIZE_REACHED, so that no generation is over the cap (and so every answer that
    /// lists the members still encodes).
    fn shed_over_size(&mut self, out: &mut Effects<R>) {
        let cap = self.config.effective_max_group_size();
        if self.members.len() <= cap {
            return;
        }
        let mut newest: Vec<(Millis, Arc<str>)> = self
            .members
            .values()
            .filter_map(|m| Some((m.new_since.get()?, Arc::clone(&m.member_id))))
            .collect();
        newest.sort_unstable_by(|a, b| b.cmp(a));
        let excess = self.members.len() - cap;
        for (_, id) in newest.into_iter().take(excess) {
            if let Some(m) = self.members.get_mut(&id) {
                if m.answer_held(ErrorCode::GroupMaxSizeReached, out) {
                    self.num_awaiting_join -= 1;
                }
            }
            self.remove_member(&id, out);
        }
    }

    /// The generation counter is at `i32::MAX` (protocol §6.18): no new generation can be
    /// made, so the rebalance is refused. Every member is answered RESOURCE_LIMIT_REACHED and
    /// removed, and the group is left Empty at its last generation, where a JoinGroup is
    /// refused the same way; an operator deletes the group to start over.
    pub(super) fn exhaust_generation(&mut self, now: Millis, out: &mut Effects<R>) {
        let code = ErrorCode::ResourceLimitReached;
        for m in self.members.values_mut() {
            if m.answer_held(code, out) {
                self.num_awaiting_join -= 1;
            }
        }
        let ids: Vec<Arc<str>> = self.members.keys().cloned().collect();
        for id in ids {
            self.remove_member(&id, out);
        }
        let pending: Vec<String> = self.pending.keys().cloned().collect();
        for id in pending {
            self.forget_pending(&id, out);
        }
        self.sync_window = None;
        self.assignor = None;
        self.leader = None;
        self.set_state(GroupState::Empty, now);
        out.persist = true;
    }

    /// The barrier closes: laggards go, the generation moves on, held joins are answered.
    pub(super) fn complete_join(&mut self, cx: Ctx<'_>, out: &mut Effects<R>) {
        let now = cx.now;
        // Dynamic members that did not rejoin are removed; static ones stay (protocol §6.5,
        // §6.12).
        let laggards: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
            .map(|m| m.member_id.to_string())
            .collect();
        let evicted = laggards.clone();
        self.evict(laggards, out, |member_ids| Event::EvictedAtBarrier {
            member_ids,
        });

        if !self.members.is_empty() && self.num_awaiting_join == 0 {
            // Only static members that did not rejoin remain: wait another rebalance timeout
            // for them to rejoin or for their sessions to expire (as Kafka does).
            let due = now + self.rebalance_timeout_ms();
            if let Some(barrier) = self.barrier.as_mut() {
                barrier.deadline = Some(due);
                barrier.initial_delay = None;
            }
            self.note_deadline(due);
            return;
        }

        self.shed_over_size(out);
        let barrier = self.barrier.take();
        let Some(next) = self.generation.checked_add(1) else {
            self.exhaust_generation(now, out);
            return;
        };
        self.generation = next;
        out.persist = true;
        let trigger = barrier
            .as_ref()
            .map_or(RebalanceTrigger::Join, |b| b.trigger);
        let barrier_ms = barrier.map_or(0, |b| now.saturating_sub(b.started_at));
        // Members that joined during this rebalance are the ones still marked new.
        let added = self
            .members
            .values()
            .filter(|m| m.new_since.is_new() && m.awaiting_join.is_some())
            .count();
        let removed = (self.members_at_last_generation + added).saturating_sub(self.members.len());
        self.members_at_last_generation = self.members.len();

        if self.members.is_empty() {
            self.assignor = None;
            self.leader = None;
            self.set_state(GroupState::Empty, now);
            self.journal_barrier_closed(now, evicted, out);
            out.events.push(Event::RebalanceCompleted {
                generation: self.generation,
                members: 0,
                assignor: None,
                barrier_ms,
                trigger,
                added,
                removed,
            });
            return;
        }

        self.assignor = self.select_assignor();
        let leader_rejoined = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .is_some_and(|m| m.awaiting_join.is_some());
        if !leader_rejoined {
            self.leader = self
                .members
                .values()
                .filter(|m| m.awaiting_join.is_some())
                .map(|m| &m.member_id)
                .min()
                .cloned();
        }
        self.set_state(GroupState::CompletingRebalance, now);
        self.journal_barrier_closed(now, evicted, out);

        // Only members that rejoined are expected to sync; a static member that missed the
        // barrier is not removed for it (protocol §6.12).
        let mut answered = Vec::new();
        for m in self.members.values_mut() {
            m.clear_assignment();
            if let Some(r) = m.awaiting_join.take() {
                m.new_since = NewSince::NOT_NEW;
                m.last_heard = now;
                answered.push((Arc::clone(&m.member_id), r));
            }
        }
        self.num_awaiting_join = 0;
        let leader = self.leader.clone().unwrap_or_default();
        let mut owe_sync = MemberSet::default();
        for (member_id, r) in answered {
            let is_leader = member_id == leader;
            out.reply(r, self.join_response(&member_id, is_leader, false, cx));
            owe_sync.insert(member_id);
        }
        let sync_due = now + self.rebalance_timeout_ms();
        self.sync_window = Some(Box::new(SyncWindow {
            deadline: sync_due,
            pending: owe_sync,
        }));
        self.note_deadline(sync_due);
        // Answered members' sessions run again from now.
        if let Some(shortest) = self.members.values().map(|m| m.session_timeout_ms).min() {
            self.note_deadline(now + Millis::from(shortest));
        }
        out.events.push(Event::RebalanceCompleted {
            generation: self.generation,
            members: self.members.len(),
            assignor: self.assignor.clone(),
            barrier_ms,
            trigger,
            added,
            removed,
        });
    }

    /// After members were removed: rebalance, or let the barrier re-check (Kafka's
    /// `removeMemberAndUpdateGroup`).
    pub(super) fn after_removal(
        &mut self,
        cx: Ctx<'_>,
        trigger: RebalanceTrigger,
        out: &mut Effects<R>,
    ) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(cx, trigger, out)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(cx, out),
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling => {}
        }
    }

    /// The barrier's deadline passed: the initial delay takes another step if a new member
    /// arrived during the last one, otherwise the barrier closes.
    pub(super) fn on_join_deadline(&mut self, cx: Ctx<'_>, out: &mut Effects<R>) {
        let step_config = Millis::from(self.config.initial_rebalance_delay_ms);
        if let Some(barrier) = self.barrier.as_mut() {
            if let Some(delay) = barrier.initial_delay {
                if delay.new_member_added && delay.remaining_ms > 0 {
                    let step = step_config.min(delay.remaining_ms);
                    barrier.initial_delay = Some(InitialDelay {
                        remaining_ms: delay.remaining_ms - step,
                        new_member_added: false,
                    });
                    barrier.deadline = Some(cx.now + step);
                    self.note_deadline(cx.now + step);
                    return;
                }
            }
        }
        self.complete_join(cx, out);
    }
}
