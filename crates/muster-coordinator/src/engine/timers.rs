//! Everything that happens because time passed (protocol §6.10, the deadlines of
//! §6.5 and §6.8, pending ids forgotten: §6.4) and offset retention with the removal of
//! abandoned groups (Kafka's offset expiration; `GroupConfig::offsets_retention_ms`).

use super::effects::LedgerRequest;
use super::{Ctx, Effects, Event, Group, GroupState, Millis, RebalanceTrigger};
use crate::config::GroupConfig;

impl<R> Group<R> {
    /// The earliest time at which [`Group::tick`] has work to do.
    pub fn next_deadline(&self) -> Option<Millis> {
        let cap = self.config.new_member_join_timeout_ms;
        let members = self.members.values().filter_map(|m| m.deadline(cap));
        let pending = self.pending.values().map(|p| p.expires);
        members
            .chain(pending)
            .chain(self.barrier.as_ref().and_then(|b| b.deadline))
            .chain(self.barrier.as_ref().and_then(|b| b.warn_at))
            .chain(self.sync_window.as_ref().map(|w| w.deadline))
            .chain(self.retention_deadline())
            .chain(self.quarantine_deadline())
            .chain(self.history_due())
            .chain(self.consumer_deadline())
            .min()
    }

    /// The earliest deadline that changes since the last call introduced (`None`: nothing
    /// earlier than before): what a call's [`Effects::deadline`] reports. Lets the shell keep a
    /// timer armed at or before [`Group::next_deadline`] without scanning every member after
    /// every request; after [`Group::tick`] it is the full next deadline. Heartbeats only push
    /// deadlines later, so they never produce one.
    pub(super) fn moved_deadline(&mut self) -> Option<Millis> {
        self.new_deadline.take()
    }

    pub(super) fn note_deadline(&mut self, at: Millis) {
        self.new_deadline = Some(self.new_deadline.map_or(at, |d| d.min(at)));
    }

    /// Runs every timer due at `now`: pending ids and sessions expire, the barrier and the
    /// pending-sync window close.
    pub fn tick(&mut self, cx: Ctx<'_>) -> Effects<R> {
        let mut out = Effects::default();
        if self.state != GroupState::Dead {
            self.expire_consumer_members(cx, &mut out);
            self.run_timers(cx, &mut out);
        }
        self.seal(out)
    }

    fn run_timers(&mut self, cx: Ctx<'_>, out: &mut Effects<R>) {
        let now = cx.now;
        let before = self.pending.len();
        self.pending.retain(|_, p| {
            let keep = p.expires > now;
            if !keep {
                if let Some(principal) = p.charge.take() {
                    out.ledger.push(LedgerRequest::ReturnMemberUnit(principal));
                }
            }
            keep
        });
        let forgot_pending = self.pending.len() != before;
        if forgot_pending {
            out.ledger
                .push(LedgerRequest::ReturnPendingIds(before - self.pending.len()));
        }

        // Session expiry and the new-member cap.
        let cap = self.config.new_member_join_timeout_ms;
        let mut expired: Vec<(String, bool, Millis)> = self
            .members
            .values()
            .filter(|m| m.deadline(cap).is_some_and(|d| d <= now))
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.awaiting_join.is_some(),
                    now.saturating_sub(m.last_heard),
                )
            })
            .collect();
        expired.sort_unstable();
        let removed_any = !expired.is_empty();
        for (member_id, new_member_held, age) in expired {
            self.remove_member(&member_id, out);
            out.events.push(if new_member_held {
                Event::NewMemberTimedOut { member_id }
            } else {
                Event::MemberExpired {
                    member_id,
                    last_heard_ms_ago: age,
                }
            });
        }
        if removed_any {
            self.after_removal(cx, RebalanceTrigger::SessionExpiry, out);
        } else if forgot_pending {
            self.maybe_complete_join(cx, out);
        }

        if self.sync_window.as_ref().is_some_and(|w| w.deadline <= now) {
            let window = self.sync_window.take();
            if matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            ) {
                let mut laggards: Vec<String> = window
                    .iter()
                    .flat_map(|w| w.pending.iter().map(|id| id.to_string()))
                    .collect();
                laggards.sort_unstable();
                if self.evict(laggards, out, |member_ids| Event::EvictedAtSync {
                    member_ids,
                }) {
                    self.after_removal(cx, RebalanceTrigger::SyncTimeout, out);
                }
            }
        }

        // Last: a rebalance started above (with no members left, its timeout is 0) closes in
        // this same tick rather than leaving a deadline that is already due.
        if self.state == GroupState::PreparingRebalance
            && self
                .barrier
                .as_ref()
                .and_then(|b| b.deadline)
                .is_some_and(|d| d <= now)
        {
            self.on_join_deadline(cx, out);
        }
        let warning = self.barrier.as_mut().and_then(|b| b.take_due_warning(now));
        if let Some(elapsed_ms) = warning {
            if self.state == GroupState::PreparingRebalance {
                let mut waiting: Vec<String> = self
                    .members
                    .values()
                    .filter(|m| m.awaiting_join.is_none())
                    .map(|m| m.member_id.to_string())
                    .chain(self.pending.keys().cloned())
                    .collect();
                waiting.sort_unstable();
                if !waiting.is_empty() {
                    out.events.push(Event::BarrierSlow {
                        waiting_for: waiting,
                        elapsed_ms,
                    });
                }
            }
        }
        // Drops first: a group whose quarantine empties now is removed in the same tick.
        self.drop_quarantined(now, out);
        self.flush_history(Some(now), out);
        self.run_retention(now, out);
        // The caller's timer for this group was consumed by this tick.
        self.rearm();
    }

    /// The caller holds no timer for this group (a tick consumed it, or the group was just
    /// restored after a restart): the next new deadline is the full next deadline.
    pub(super) fn rearm(&mut self) {
        self.new_deadline = self.next_deadline();
    }

    /// The group entered Empty (or was created) at `now`: its retention clocks start. Wakes at
    /// the sooner of the two retention periods and lets the tick work out the rest.
    pub(super) fn note_retention_start(&mut self, now: Millis) {
        let soonest = self
            .config
            .offsets_retention_ms
            .min(self.config.empty_group_removal_ms);
        self.note_deadline(now.saturating_add(soonest));
    }

    /// Retention is held while commits of this group are in flight (handed to the shell, not
    /// yet durable, so not yet visible): expiring the partition's older offset, or removing a
    /// group that seems to have none, would queue a delete behind the commit and erase an
    /// offset about to be acknowledged. `in_flight` moves by one; when the last is back, the
    /// retention deadline is armed again.
    pub(super) fn count_commit(&mut self, in_flight: bool) {
        if in_flight {
            self.commits_in_flight += 1;
            return;
        }
        self.commits_in_flight = self.commits_in_flight.saturating_sub(1);
        if self.commits_in_flight == 0 {
            if let Some(at) = self.retention_deadline() {
                self.note_deadline(at);
            }
        }
    }

    /// OffsetCommits handed to the shell and not yet reported back.
    pub fn commits_in_flight(&self) -> u32 {
        self.commits_in_flight
    }

    /// When retention next has work (Empty groups only): the oldest offset's expiry, or the
    /// removal of a group with nothing left (its quarantine empty too).
    pub(super) fn retention_deadline(&self) -> Option<Millis> {
        if !self.retention_runs() {
            return None;
        }
        let oldest = self
            .offsets
            .values()
            .flat_map(|parts| parts.values())
            .map(|o| o.commit_timestamp_ms)
            .min();
        retention_due(
            &self.config,
            self.state_since,
            oldest,
            !self.quarantine.is_empty(),
        )
    }
    /// Retention runs only while the group is Empty with no member id pending (a pending id
    /// is a consumer on its way in), and not while a commit of this group is being written (a
    /// delete queued now would land behind it).
    fn retention_runs(&self) -> bool {
        self.state == GroupState::Empty && self.pending.is_empty() && self.commits_in_flight == 0
    }

    /// When an offset committed at `committed_at` expires ([`offset_expiry`]).
    fn offset_expiry(&self, committed_at: Millis) -> Millis {
        offset_expiry(&self.config, self.state_since, committed_at)
    }

    /// When an Empty group with no offsets left is removed ([`removal_due`]).
    fn removal_due(&self) -> Millis {
        removal_due(&self.config, self.state_since)
    }

    /// Offset retention and removal of abandoned groups (Kafka's offset expiration;
    /// docs/protocol.md has no retention rule, the setting is docs/operations.md's
    /// `offsets_retention_minutes`): an offset expires once the group has been Empty, and the
    /// offset unchanged, for the retention period; a group left Empty with no offsets is removed
    /// (state Dead, `persist` set so the caller deletes it durably).
    pub(super) fn run_retention(&mut self, now: Millis, out: &mut Effects<R>) {
        if !self.retention_runs() {
            return;
        }
        // Nothing expires before the group has been Empty for the whole period; from then on,
        // exactly the offsets whose `offset_expiry` has passed, i.e. committed at or before
        // `now - retention`.
        if self.offset_expiry(self.state_since) <= now {
            let retention = self.config.offsets_retention_ms;
            let expired = self.expire_offsets(now.saturating_sub(retention));
            self.quarantine_expired(expired, now, out);
        }
        if self.offsets.is_empty() && self.quarantine.is_empty() && self.removal_due() <= now {
            self.set_state(GroupState::Dead, now);
            out.persist = true;
            out.events.push(Event::GroupRemoved);
        }
    }
}

/// When retention next has work for an Empty group that went Empty at `state_since`: its
/// oldest offset's expiry (`oldest_commit`: when that offset was committed), or, with no
/// offset left, its removal — unless it has a quarantine (`quarantined`), whose drop wakes it
/// instead of a removal time long past, which would have the shell tick it again at once.
/// Shared with the deadline of a group loaded parked (`park.rs`), which has no engine.
pub(super) fn retention_due(
    config: &GroupConfig,
    state_since: Millis,
    oldest_commit: Option<Millis>,
    quarantined: bool,
) -> Option<Millis> {
    match oldest_commit {
        Some(committed_at) => Some(offset_expiry(config, state_since, committed_at)),
        None if quarantined => None,
        None => Some(removal_due(config, state_since)),
    }
}

/// When an offset committed at `committed_at` expires: the retention period after the later
/// of its commit and the group's entering Empty (`state_since`).
fn offset_expiry(config: &GroupConfig, state_since: Millis, committed_at: Millis) -> Millis {
    committed_at
        .max(state_since)
        .saturating_add(config.offsets_retention_ms)
}

/// When an Empty group (since `state_since`) with no offsets left is removed.
fn removal_due(config: &GroupConfig, state_since: Millis) -> Millis {
    state_since.saturating_add(config.empty_group_removal_ms)
}
