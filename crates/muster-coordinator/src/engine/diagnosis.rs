//! The stuck detector (protocol §6.20, GroupDiagnosis): what a group waits for at `now`.
//!
//! - PreparingRebalance: the members that have not rejoined (and the pending ids the barrier
//!   also waits for), since when, and when the barrier gives up on them. The group is *stuck*
//!   once the barrier is past half its rebalance timeout: when the server logs its one WARN.
//! - CompletingRebalance: the members that have not sent SyncGroup (the leader first: everyone
//!   waits for its assignment), and when the sync window ends; stuck past half that window.
//! - Stable: subscribed partitions that no member owns (worked out once, when the assignment
//!   came: never on the heartbeat path), and since when.
//! - Any state: a rebalance storm, more than `storm_rebalances` rebalances started within
//!   `storm_window_ms`.
//!
//! Pure: `now` is an argument; nothing here changes the group.

use muster_protocol::{GroupDiagnosisResponse, RebalanceCause, RebalanceWait, WaitingMember};

use super::journal::MAX_LISTED;
use super::{Group, GroupState, Member, Millis, NONE};

impl<R> Group<R> {
    /// GroupDiagnosis (protocol §6.20) at `now`.
    pub fn diagnose(&self, now: Millis) -> GroupDiagnosisResponse {
        let (storm, rebalances_in_window) = self.insight.as_ref().map_or((false, 0), |i| {
            i.storm(
                now,
                self.config.storm_rebalances,
                self.config.storm_window_ms,
            )
        });
        let (unowned, unowned_since_ms) = match (&self.insight, self.state) {
            (Some(i), GroupState::Stable) if i.unowned_count > 0 => {
                (i.unowned.clone(), i.unowned_since)
            }
            _ => (Vec::new(), None),
        };
        GroupDiagnosisResponse {
            error_code: NONE,
            state: self.state.as_str().to_owned(),
            generation_id: self.generation,
            now_ms: now,
            rebalance: match self.consumer_wait(now) {
                Some(wait) => Some(wait),
                None => self.rebalance_wait(now),
            },
            unowned,
            unowned_since_ms,
            storm,
            rebalances_in_window,
            storm_threshold: self.config.storm_rebalances,
            storm_window_ms: self.config.storm_window_ms,
        }
    }

    /// Whether a barrier is past half its rebalance timeout (the WARN was logged): what the
    /// "groups stuck" gauge counts.
    pub fn is_stuck(&self) -> bool {
        self.state == GroupState::PreparingRebalance
            && self
                .barrier
                .as_ref()
                .is_some_and(|b| b.stuck_since.is_some())
    }

    /// When the open barrier opened (PreparingRebalance only).
    pub fn barrier_started_at(&self) -> Option<Millis> {
        self.barrier.as_ref().map(|b| b.started_at)
    }

    /// Subscribed partitions no member owns in a Stable group (as of the last assignment).
    pub fn unowned_partition_count(&self) -> usize {
        match (&self.insight, self.state) {
            (Some(i), GroupState::Stable) => i.unowned_count,
            _ => 0,
        }
    }

    fn rebalance_wait(&self, now: Millis) -> Option<Box<RebalanceWait>> {
        let progress = self.insight.as_ref().and_then(|i| i.progress.as_ref());
        let trigger = progress
            .map(|p| p.cause.clone())
            .unwrap_or_else(|| RebalanceCause {
                kind: "unknown".to_owned(),
                ..RebalanceCause::default()
            });
        match self.state {
            GroupState::PreparingRebalance => {
                let barrier = self.barrier.as_ref()?;
                let waiting = self
                    .members
                    .values()
                    .filter(|m| m.awaiting_join.is_none())
                    .map(|m| &**m)
                    .collect();
                let (waiting_for, omitted) = self.waiting(waiting);
                Some(Box::new(RebalanceWait {
                    phase: "join".to_owned(),
                    trigger,
                    started_at_ms: barrier.started_at,
                    phase_since_ms: barrier.started_at,
                    deadline_ms: barrier.deadline,
                    stuck: barrier.stuck_since.is_some(),
                    waiting_for,
                    omitted,
                    pending_joins: u32::try_from(self.pending.len()).unwrap_or(u32::MAX),
                }))
            }
            GroupState::CompletingRebalance => {
                let window = self.sync_window.as_ref();
                let waiting = self
                    .members
                    .values()
                    .filter(|m| window.is_some_and(|w| w.pending.contains(&m.member_id)))
                    .map(|m| &**m)
                    .collect();
                let (waiting_for, omitted) = self.waiting(waiting);
                let since = progress
                    .and_then(|p| p.closed_at)
                    .unwrap_or(self.state_since);
                let deadline = window.map(|w| w.deadline);
                let stuck = deadline.is_some_and(|d| now >= since + d.saturating_sub(since) / 2);
                Some(Box::new(RebalanceWait {
                    phase: "sync".to_owned(),
                    trigger,
                    started_at_ms: progress.map_or(since, |p| p.started_at),
                    phase_since_ms: since,
                    deadline_ms: deadline,
                    stuck,
                    waiting_for,
                    omitted,
                    pending_joins: 0,
                }))
            }
            GroupState::Empty | GroupState::Stable | GroupState::Dead => None,
            GroupState::Assigning | GroupState::Reconciling => None,
        }
    }

    /// The members waited for, the leader first then by id, capped at [`MAX_LISTED`]; and
    /// how many the cap left out.
    fn waiting(&self, mut members: Vec<&Member<R>>) -> (Vec<WaitingMember>, u32) {
        let leader = self.leader.as_deref();
        members.sort_unstable_by(|a, b| {
            let a_leads = Some(&*a.member_id) == leader;
            let b_leads = Some(&*b.member_id) == leader;
            b_leads
                .cmp(&a_leads)
                .then_with(|| a.member_id.cmp(&b.member_id))
        });
        let omitted = u32::try_from(members.len().saturating_sub(MAX_LISTED)).unwrap_or(u32::MAX);
        let listed = members
            .into_iter()
            .take(MAX_LISTED)
            .map(|m| WaitingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.as_deref().map(str::to_owned),
                client_id: m.client.client_id.to_string(),
                client_host: m.client.client_host.to_string(),
                last_heard_ms: m.last_heard,
                leader: Some(&*m.member_id) == leader,
            })
            .collect();
        (listed, omitted)
    }
}
