//! The join barrier (protocol §5 "Barrier"): entering PreparingRebalance, the initial
//! rebalance delay, completing early or at the rebalance timeout, evicting dynamic laggards,
//! the new generation, the assignor vote's result and the leader, and the held JoinGroup answers.

use muster_protocol::{ErrorCode, JoinGroupResponse, Response};

use super::answers::sync_error;
use super::{Ctx, Event, Group, GroupState, Millis, Output, RebalanceTrigger, NONE};

impl<R> Group<R> {
    /// Moves the group to PreparingRebalance (Kafka's `prepareRebalance`).
    pub(super) fn prepare_rebalance(
        &mut self,
        cx: Ctx<'_>,
        trigger: RebalanceTrigger,
        out: &mut Output<R>,
    ) {
        let now = cx.now;
        match self.state {
            GroupState::PreparingRebalance | GroupState::Dead => return,
            GroupState::CompletingRebalance => {
                // Held syncs are told to rejoin; the half-made assignment is dropped.
                let mut released = None::<Millis>;
                for m in self.members.values_mut() {
                    if let Some(r) = m.awaiting_sync.take() {
                        out.reply(r, sync_error(ErrorCode::RebalanceInProgress));
                        // Heard from while held (protocol §5 "Session expiry"; Kafka's
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
        for m in self.members.values_mut() {
            m.pending_sync = false;
        }
        self.num_pending_sync = 0;
        self.sync_deadline = None;
        let rebalance_timeout = self.rebalance_timeout_ms();
        // A zero initial delay is a timer that fires at once: the join completes now.
        let mut fires_now = false;
        if self.state == GroupState::Empty {
            let delay = Millis::from(self.config.initial_rebalance_delay_ms).min(rebalance_timeout);
            if delay == 0 {
                self.initial_delay = None;
                self.join_deadline = None;
                fires_now = true;
            } else {
                self.initial_delay = Some(InitialDelay {
                    remaining_ms: rebalance_timeout - delay,
                    new_member_added: false,
                });
                self.join_deadline = Some(now + delay);
            }
        } else {
            self.initial_delay = None;
            self.join_deadline = Some(now + rebalance_timeout);
            let warn_at = now + rebalance_timeout / 2;
            self.barrier_warn_at = Some(warn_at);
            self.note_deadline(warn_at);
        }
        self.rebalance = Some(RebalanceInfo {
            started_at: now,
            trigger,
        });
        self.set_state(GroupState::PreparingRebalance, now);
        if let Some(due) = self.join_deadline {
            self.note_deadline(due);
        }
        out.persist = true;
        out.events.push(Event::RebalanceStarted {
            trigger,
            generation: self.generation,
        });
        if fires_now {
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

    /// Completes the barrier early once every member and pending id has rejoined (never during
    /// the initial delay, which is a plain timer).
    pub(super) fn maybe_complete_join(&mut self, cx: Ctx<'_>, out: &mut Output<R>) {
        if self.state == GroupState::PreparingRebalance
            && self.initial_delay.is_none()
            && self.num_awaiting_join == self.members.len()
            && self.pending.is_empty()
        {
            self.complete_join(cx, out);
        }
    }

    /// The barrier closes: laggards go, the generation moves on, held joins are answered.
    pub(super) fn complete_join(&mut self, cx: Ctx<'_>, out: &mut Output<R>) {
        let now = cx.now;
        // Dynamic members that did not rejoin are removed; static ones stay (protocol §5).
        let laggards: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
            .map(|m| m.member_id.to_string())
            .collect();
        if !laggards.is_empty() {
            for id in &laggards {
                self.remove_member(id, out);
            }
            out.events.push(Event::EvictedAtBarrier {
                member_ids: laggards,
            });
        }

        if !self.members.is_empty() && self.num_awaiting_join == 0 {
            // Only static members that did not rejoin remain: wait another rebalance timeout
            // for them to rejoin or for their sessions to expire (as Kafka does).
            let due = now + self.rebalance_timeout_ms();
            self.join_deadline = Some(due);
            self.initial_delay = None;
            self.note_deadline(due);
            return;
        }

        self.join_deadline = None;
        self.barrier_warn_at = None;
        self.initial_delay = None;
        self.generation += 1;
        out.persist = true;
        let info = self.rebalance.take();
        let trigger = info.map_or(RebalanceTrigger::Join, |i| i.trigger);
        let barrier_ms = info.map_or(0, |i| now.saturating_sub(i.started_at));
        // Members that joined during this rebalance are the ones still marked new.
        let added = self
            .members
            .values()
            .filter(|m| m.is_new && m.awaiting_join.is_some())
            .count();
        let removed = (self.members_at_last_generation + added).saturating_sub(self.members.len());
        self.members_at_last_generation = self.members.len();

        if self.members.is_empty() {
            self.assignor = None;
            self.leader = None;
            self.set_state(GroupState::Empty, now);
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

        let leader = self.leader.clone().unwrap_or_default();
        let leader_response = self.join_response(&leader, true, false, cx);
        let generation = self.generation;
        let assignor = self.assignor.clone();
        let members_now = self.members.len();
        let mut answered = 0;
        for m in self.members.values_mut() {
            m.clear_assignment();
            // Only members that rejoined are expected to sync; a static member that missed
            // the barrier is not removed for it (protocol §5 "Static membership").
            if let Some(r) = m.awaiting_join.take() {
                answered += 1;
                m.pending_sync = true;
                m.is_new = false;
                m.last_heard = now;
                let response = if m.member_id == leader {
                    leader_response.clone()
                } else {
                    Response::JoinGroup(JoinGroupResponse {
                        error_code: NONE,
                        generation_id: generation,
                        assignor: assignor.clone(),
                        leader_id: leader.to_string(),
                        member_id: m.member_id.to_string(),
                        skip_assignment: false,
                        members: Vec::new(),
                        topics: Vec::new(),
                    })
                };
                out.reply(r, response);
            }
        }
        self.num_awaiting_join = 0;
        self.num_pending_sync = answered;
        let sync_due = now + self.rebalance_timeout_ms();
        self.sync_deadline = Some(sync_due);
        self.note_deadline(sync_due);
        // Answered members' sessions run again from now.
        if let Some(shortest) = self.members.values().map(|m| m.session_timeout_ms).min() {
            self.note_deadline(now + Millis::from(shortest));
        }
        out.events.push(Event::RebalanceCompleted {
            generation,
            members: members_now,
            assignor,
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
        out: &mut Output<R>,
    ) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(cx, trigger, out)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(cx, out),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    pub(super) fn on_join_deadline(&mut self, cx: Ctx<'_>, out: &mut Output<R>) {
        if let Some(delay) = self.initial_delay {
            if delay.new_member_added && delay.remaining_ms > 0 {
                let step =
                    Millis::from(self.config.initial_rebalance_delay_ms).min(delay.remaining_ms);
                self.initial_delay = Some(InitialDelay {
                    remaining_ms: delay.remaining_ms - step,
                    new_member_added: false,
                });
                self.join_deadline = Some(cx.now + step);
                self.note_deadline(cx.now + step);
                return;
            }
        }
        self.complete_join(cx, out);
    }
}

/// The initial-rebalance-delay window (protocol §5: a plain timer, extended while new members
/// arrive, never past the rebalance timeout).
#[derive(Debug, Clone, Copy)]
pub(super) struct InitialDelay {
    pub(super) remaining_ms: Millis,
    pub(super) new_member_added: bool,
}

/// Bookkeeping of the rebalance in progress, for the operator's log line.
#[derive(Debug, Clone, Copy)]
pub(super) struct RebalanceInfo {
    pub(super) started_at: Millis,
    pub(super) trigger: RebalanceTrigger,
}
