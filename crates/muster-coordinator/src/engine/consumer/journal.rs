//! The rebalance journal and the stuck detector for consumer-protocol groups (protocol §6.20,
//! protocol-v1 §7): each group epoch bump is a journal entry with its trigger (and the member
//! that caused it), who joined and left, and which partitions moved in the target, per member;
//! GroupDiagnosis of a Reconciling group names the members still holding partitions another
//! member waits for, longest-holding first, and since when.

use std::collections::BTreeSet;
use std::sync::Arc;

use muster_protocol::{
    RebalanceCause, RebalanceRecord, RebalanceWait, TopicPartitions, WaitingMember,
};

use super::group::to_wire;
use crate::engine::journal::{capped, diff, MAX_LISTED};
use crate::engine::{Group, GroupState, Millis};

/// The kind of journal cause a consumer-protocol epoch bump records (protocol §6.20's kinds,
/// plus `revocation_timeout`).
pub mod kind {
    pub use crate::engine::journal::kind::{
        COORDINATOR_RESTART, MEMBER_JOINED, MEMBER_LEFT, METADATA_CHANGED, SESSION_EXPIRED,
        TOPIC_CHANGE,
    };
    pub const REVOCATION_TIMEOUT: &str = "revocation_timeout";
}

/// `kind` as one of the [`kind`] constants (a bounded metrics and log label).
pub(super) fn static_kind(k: &str) -> &'static str {
    use kind::*;
    [
        MEMBER_JOINED,
        MEMBER_LEFT,
        METADATA_CHANGED,
        SESSION_EXPIRED,
        TOPIC_CHANGE,
        REVOCATION_TIMEOUT,
        COORDINATOR_RESTART,
    ]
    .into_iter()
    .find(|known| *known == k)
    .unwrap_or("other")
}

/// Every member's target, as the journal diffs them.
pub(super) type Targets = Vec<(Arc<str>, Box<[TopicPartitions]>)>;

impl<R> Group<R> {
    /// A cause of `kind`, naming `member_id` if it is a member of the consumer part.
    pub(in crate::engine) fn consumer_cause(
        &self,
        kind: &str,
        member_id: Option<&str>,
        detail: Option<String>,
    ) -> RebalanceCause {
        let member = member_id.and_then(|id| self.consumer.as_deref()?.members.get(id));
        RebalanceCause {
            kind: kind.to_owned(),
            member_id: member_id.unwrap_or_default().to_owned(),
            client_id: member
                .map(|m| m.client.client_id.to_string())
                .unwrap_or_default(),
            client_host: member
                .map(|m| m.client.client_host.to_string())
                .unwrap_or_default(),
            detail,
        }
    }

    /// Every member's target now.
    pub(super) fn targets(&self) -> Targets {
        let Some(part) = self.consumer.as_deref() else {
            return Vec::new();
        };
        part.members
            .values()
            .filter(|m| !m.target.is_empty())
            .map(|m| {
                (
                    Arc::clone(&m.member_id),
                    to_wire(&m.target).into_boxed_slice(),
                )
            })
            .collect()
    }

    /// Journals the target of group epoch `epoch`, whose first change happened at `now`:
    /// `before` is every member's target before it.
    pub(super) fn journal_epoch(
        &mut self,
        epoch: i32,
        cause: RebalanceCause,
        now: Millis,
        before: &Targets,
    ) {
        let keep = self.config.journal_size as usize;
        let threshold = self.config.storm_rebalances;
        let after = self.targets();
        let (moved, changes, mut omitted) = diff(before, &after);
        let Some(part) = self.consumer.as_deref() else {
            return;
        };
        let members: Vec<Arc<str>> = part.members.keys().cloned().collect();
        let assignor = Some(part.assignor.clone());
        let insight = self.insight_mut();
        let last = insight.replace_last_members(members.clone());
        let last: BTreeSet<&str> = last.iter().map(|m| &**m).collect();
        let current: BTreeSet<&str> = members.iter().map(|m| &**m).collect();
        let joined = current.difference(&last).map(|s| (*s).to_owned()).collect();
        let left = last.difference(&current).map(|s| (*s).to_owned()).collect();
        let entry = RebalanceRecord {
            generation_id: epoch,
            trigger: cause,
            started_at_ms: now,
            // No barrier: the target is computed at once, and each member reconciles on its
            // own heartbeats.
            barrier_ms: 0,
            sync_ms: Some(0),
            assignor,
            leader_id: String::new(),
            members: u32::try_from(members.len()).unwrap_or(u32::MAX),
            waited_for: Vec::new(),
            evicted: Vec::new(),
            joined: capped(joined, &mut omitted),
            left: capped(left, &mut omitted),
            moved: Some(moved),
            changes,
            omitted,
        };
        insight.note_start(now, threshold);
        insight.push_entry(entry, keep);
    }

    /// GroupDiagnosis of a consumer group: while Reconciling, the members that still hold
    /// partitions they were asked to give up (which other members wait for), longest-holding
    /// first; the phase is `reconcile`, its deadline the first rebalance timeout to end.
    pub(in crate::engine) fn consumer_wait(&self, now: Millis) -> Option<Box<RebalanceWait>> {
        let part = self.consumer.as_deref()?;
        if self.state != GroupState::Reconciling && self.state != GroupState::Assigning {
            return None;
        }
        let newest = self.insight.as_ref().and_then(|i| i.entries.newest());
        let started_at_ms = newest
            .as_ref()
            .map_or(self.state_since, |e| e.started_at_ms);
        let trigger = newest.map(|e| e.trigger).unwrap_or_default();
        let mut holders: Vec<_> = part
            .members
            .values()
            .filter_map(|m| m.revoking_since.map(|since| (since, m)))
            .collect();
        holders.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.member_id.cmp(&b.1.member_id)));
        let deadline_ms = holders
            .iter()
            .map(|(since, m)| since + Millis::from(m.rebalance_timeout_ms))
            .min();
        let phase_since_ms = holders.first().map_or(started_at_ms, |(since, _)| *since);
        let stuck = holders.iter().any(|(since, m)| {
            now.saturating_sub(*since) * 2 > Millis::from(m.rebalance_timeout_ms)
        });
        let omitted = holders.len().saturating_sub(MAX_LISTED);
        let waiting_for = holders
            .into_iter()
            .take(MAX_LISTED)
            .map(|(_, m)| WaitingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client.client_id.to_string(),
                client_host: m.client.client_host.to_string(),
                last_heard_ms: m.last_heard,
                leader: false,
            })
            .collect();
        Some(Box::new(RebalanceWait {
            phase: "reconcile".to_owned(),
            trigger,
            started_at_ms,
            phase_since_ms,
            deadline_ms,
            stuck,
            waiting_for,
            omitted: u32::try_from(omitted).unwrap_or(u32::MAX),
            pending_joins: 0,
        }))
    }
}
