//! The rebalance journal (protocol §6.20): for each completed rebalance, why it started (with
//! the member that caused it), how long its barrier and its sync took, whom the barrier waited
//! for, who came and went, and which partitions changed owner.
//!
//! Everything here runs at rebalance events only (a barrier opening or closing, a member
//! rejoining during a barrier, a member removed, the leader's assignment): never on the
//! heartbeat path. A group that never rebalanced holds no [`Insight`] at all.
//!
//! Memory is bounded per group: `journal_size` entries, each with its member lists capped at
//! [`MAX_LISTED`] ids and its assignment changes at [`MAX_LISTED_PARTITIONS`] partitions (what
//! is left out is counted in `omitted`); one copy of the last assignment (the "before" of the
//! next diff); while a barrier is open, one rejoin time per member it waits for.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use muster_protocol::{MemberChange, MemberWait, RebalanceCause, RebalanceRecord, TopicPartitions};

use super::journal_entries::JournalEntries;
use super::{
    Effects, Event, Group, GroupState, Map, Member, Millis, RebalanceTrigger, TopicLookup,
};
use crate::storage::Mutation;

/// Most member ids one list of a journal entry holds (`waited_for`, `evicted`, `joined`,
/// `left`, `changes`): a 1000-member group's entries stay a few KB.
pub const MAX_LISTED: usize = 100;
/// Most partitions one entry's `changes` list, and one diagnosis's `unowned` list, hold.
pub const MAX_LISTED_PARTITIONS: usize = 1_000;

/// The kinds of [`RebalanceCause`] (protocol §6.20).
pub mod kind {
    pub const MEMBER_JOINED: &str = "member_joined";
    pub const METADATA_CHANGED: &str = "metadata_changed";
    pub const LEADER_REJOINED: &str = "leader_rejoined";
    pub const MEMBER_FENCED: &str = "member_fenced";
    pub const MEMBER_LEFT: &str = "member_left";
    pub const SESSION_EXPIRED: &str = "session_expired";
    pub const SYNC_TIMEOUT: &str = "sync_timeout";
    pub const TOPIC_CHANGE: &str = "topic_change";
    pub const COORDINATOR_RESTART: &str = "coordinator_restart";
}

/// `kind` as one of the [`kind`] constants (a bounded metrics label), `"other"` if unknown.
fn static_kind(k: &str) -> &'static str {
    use kind::*;
    [
        MEMBER_JOINED,
        METADATA_CHANGED,
        LEADER_REJOINED,
        MEMBER_FENCED,
        MEMBER_LEFT,
        SESSION_EXPIRED,
        SYNC_TIMEOUT,
        TOPIC_CHANGE,
        COORDINATOR_RESTART,
    ]
    .into_iter()
    .find(|known| *known == k)
    .unwrap_or("other")
}

/// The cause kind a trigger names when no member hint says more.
pub(super) const fn kind_of(trigger: RebalanceTrigger) -> &'static str {
    match trigger {
        RebalanceTrigger::Join => kind::MEMBER_JOINED,
        RebalanceTrigger::MetadataChange => kind::METADATA_CHANGED,
        RebalanceTrigger::Leave => kind::MEMBER_LEFT,
        RebalanceTrigger::SessionExpiry => kind::SESSION_EXPIRED,
        RebalanceTrigger::SyncTimeout => kind::SYNC_TIMEOUT,
        RebalanceTrigger::TopicChange => kind::TOPIC_CHANGE,
    }
}

/// What a group knows about its rebalances, beyond what the protocol needs.
#[derive(Debug, Default)]
pub(super) struct Insight {
    /// Completed rebalances, oldest first, at most `journal_size` (kept encoded:
    /// `journal_entries.rs`).
    pub(super) entries: JournalEntries,
    /// How many of the newest entries changed since they were last handed out for writing.
    unwritten: usize,
    /// Generations dropped from `entries` whose stored copies are still to be deleted.
    dropped: Vec<i32>,
    /// The member that will have caused the next rebalance, noted just before it starts.
    /// (Boxed, as `progress`: set around rebalances only, and every group with members
    /// keeps an `Insight` for as long as it lives.)
    hint: Option<Box<RebalanceCause>>,
    /// The rebalance in progress, from its barrier opening to its assignment.
    pub(super) progress: Option<Box<Progress>>,
    /// The last assignment a leader handed out (member → partitions): the "before" of the
    /// next diff.
    baseline: Vec<(Arc<str>, Box<[TopicPartitions]>)>,
    /// The members of the last generation.
    last_members: Vec<Arc<str>>,
    /// When the latest rebalances started, oldest first (at most `storm_rebalances + 1`).
    starts: VecDeque<Millis>,
    /// Subscribed partitions nobody owns in the last assignment, and since when.
    pub(super) unowned: Vec<TopicPartitions>,
    pub(super) unowned_count: usize,
    pub(super) unowned_since: Option<Millis>,
}

/// A rebalance whose barrier opened and whose assignment has not come yet.
#[derive(Debug)]
pub(super) struct Progress {
    pub(super) cause: RebalanceCause,
    pub(super) started_at: Millis,
    /// Members present when the barrier opened → when each rejoined.
    waited: Map<Arc<str>, Option<Millis>>,
    /// When the barrier closed (the generation it reached is then the newest entry's).
    pub(super) closed_at: Option<Millis>,
}

impl Insight {
    /// Keeps `entry` as the newest of at most `keep` entries (the oldest dropped, its stored
    /// copy to be deleted with the next record write).
    pub(super) fn push_entry(&mut self, entry: RebalanceRecord, keep: usize) {
        if keep == 0 {
            return;
        }
        self.entries.push(&entry, keep, &mut self.dropped);
        self.unwritten = (self.unwritten + 1).min(keep);
    }

    /// A rebalance started at `now` (for the storm detector, which keeps `threshold + 1`).
    pub(super) fn note_start(&mut self, now: Millis, threshold: u32) {
        self.starts.push_back(now);
        while self.starts.len() > threshold as usize + 1 {
            self.starts.pop_front();
        }
    }

    /// Swaps in the members of the newest generation; returns the previous ones.
    pub(super) fn replace_last_members(&mut self, members: Vec<Arc<str>>) -> Vec<Arc<str>> {
        std::mem::replace(&mut self.last_members, members)
    }

    /// Whether more than `threshold` rebalances started within `window_ms` before `now`, and
    /// how many did (counted up to `threshold + 1`).
    pub(super) fn storm(&self, now: Millis, threshold: u32, window_ms: Millis) -> (bool, u32) {
        let since = now.saturating_sub(window_ms);
        let n = self.starts.iter().filter(|&&t| t >= since).count();
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        (n > threshold, n)
    }
}

/// A cause naming `m`.
fn member_cause<R>(kind: &str, m: &Member<R>) -> RebalanceCause {
    RebalanceCause {
        kind: kind.to_owned(),
        member_id: m.member_id.to_string(),
        client_id: m.client.client_id.to_string(),
        client_host: m.client.client_host.to_string(),
        detail: None,
    }
}

/// Adds every partition of `tps` to `owners` as owned by `member`.
fn own<'a>(
    owners: &mut BTreeMap<(&'a str, i32), &'a str>,
    member: &'a str,
    tps: &'a [TopicPartitions],
) {
    for tp in tps {
        for &p in &tp.partitions {
            owners.insert((tp.topic.as_str(), p), member);
        }
    }
}

/// Groups `(topic, partition)` pairs (sorted) into per-topic lists.
fn to_topic_partitions<'a>(pairs: impl Iterator<Item = (&'a str, i32)>) -> Vec<TopicPartitions> {
    let mut out: Vec<TopicPartitions> = Vec::new();
    for (topic, p) in pairs {
        match out.last_mut() {
            Some(last) if last.topic == topic => last.partitions.push(p),
            _ => out.push(TopicPartitions {
                topic: topic.to_owned(),
                partitions: vec![p],
            }),
        }
    }
    out
}

/// The diff between two assignments: how many partitions changed owner (to or from no owner
/// included), per member what it gained and lost (capped), and how much the caps left out.
pub(super) fn diff(
    before: &[(Arc<str>, Box<[TopicPartitions]>)],
    after: &[(Arc<str>, Box<[TopicPartitions]>)],
) -> (u32, Vec<MemberChange>, u32) {
    let mut old = BTreeMap::new();
    for (m, tps) in before {
        own(&mut old, m, tps);
    }
    let mut new = BTreeMap::new();
    for (m, tps) in after {
        own(&mut new, m, tps);
    }
    let mut gained: BTreeMap<&str, Vec<(&str, i32)>> = BTreeMap::new();
    let mut revoked: BTreeMap<&str, Vec<(&str, i32)>> = BTreeMap::new();
    let keys: BTreeSet<(&str, i32)> = old.keys().chain(new.keys()).copied().collect();
    let mut moved = 0u32;
    for key in keys {
        let (was, is) = (old.get(&key), new.get(&key));
        if was != is {
            moved = moved.saturating_add(1);
            if let Some(m) = was {
                revoked.entry(m).or_default().push(key);
            }
            if let Some(m) = is {
                gained.entry(m).or_default().push(key);
            }
        }
    }
    let members: BTreeSet<&str> = gained.keys().chain(revoked.keys()).copied().collect();
    let mut changes = Vec::new();
    let mut omitted = 0u32;
    let mut budget = MAX_LISTED_PARTITIONS;
    for m in members {
        let g = gained.remove(m).unwrap_or_default();
        let r = revoked.remove(m).unwrap_or_default();
        let size = g.len() + r.len();
        if changes.len() >= MAX_LISTED || size > budget {
            omitted = omitted.saturating_add(1);
            continue;
        }
        budget -= size;
        changes.push(MemberChange {
            member_id: m.to_owned(),
            gained: to_topic_partitions(g.into_iter()),
            revoked: to_topic_partitions(r.into_iter()),
        });
    }
    (moved, changes, omitted)
}

/// `ids`, sorted and capped at [`MAX_LISTED`]; adds what was left out to `omitted`.
pub(super) fn capped(mut ids: Vec<String>, omitted: &mut u32) -> Vec<String> {
    ids.sort_unstable();
    if ids.len() > MAX_LISTED {
        *omitted =
            omitted.saturating_add(u32::try_from(ids.len() - MAX_LISTED).unwrap_or(u32::MAX));
        ids.truncate(MAX_LISTED);
    }
    ids
}

impl<R> Group<R> {
    pub(super) fn insight_mut(&mut self) -> &mut Insight {
        self.insight.get_or_insert_with(Box::default)
    }

    /// Notes that `member_id` (a member of the group) is about to cause a rebalance of
    /// `kind` (or of the trigger's kind).
    pub(super) fn hint_cause(&mut self, member_id: &str, kind: Option<&str>) {
        let Some(m) = self.members.get(member_id) else {
            return;
        };
        let cause = member_cause(kind.unwrap_or(""), m);
        self.insight_mut().hint = Some(Box::new(cause));
    }

    /// A member is being removed: if it leads to a rebalance, it caused it (the first one
    /// removed, if several go at once).
    pub(super) fn hint_removed(&mut self, m: &Member<R>) {
        let insight = self.insight.get_or_insert_with(Box::default);
        if insight.hint.is_none() {
            insight.hint = Some(Box::new(member_cause("", m)));
        }
    }

    /// Adds `detail` to the cause noted for the next rebalance.
    pub(super) fn hint_detail(&mut self, detail: Option<String>) {
        if let Some(hint) = self.insight.as_mut().and_then(|i| i.hint.as_mut()) {
            if hint.detail.is_none() {
                hint.detail = detail;
            }
        }
    }

    /// The next rebalance is for a partition count change of `topics`.
    pub(super) fn insight_hint_topics(&mut self, topics: &[&str]) {
        self.insight_mut().hint = Some(Box::new(RebalanceCause {
            kind: kind::TOPIC_CHANGE.to_owned(),
            detail: Some(topics.join(",")),
            ..RebalanceCause::default()
        }));
    }

    /// The barrier opened at `now` because of `trigger`: remember why and whom it waits for.
    pub(super) fn journal_barrier_opened(&mut self, trigger: RebalanceTrigger, now: Millis) {
        self.journal_barrier_opened_as(kind_of(trigger), now);
    }

    pub(super) fn journal_barrier_opened_as(&mut self, default_kind: &str, now: Millis) {
        let waited: Map<Arc<str>, Option<Millis>> = self
            .members
            .values()
            .map(|m| {
                (
                    Arc::clone(&m.member_id),
                    m.awaiting_join.is_some().then_some(now),
                )
            })
            .collect();
        let threshold = self.config.storm_rebalances as usize;
        let insight = self.insight.get_or_insert_with(Box::default);
        let mut cause = insight.hint.take().map(|h| *h).unwrap_or_default();
        if cause.kind.is_empty() {
            cause.kind = default_kind.to_owned();
        }
        insight.progress = Some(Box::new(Progress {
            cause,
            started_at: now,
            waited,
            closed_at: None,
        }));
        insight.starts.push_back(now);
        while insight.starts.len() > threshold + 1 {
            insight.starts.pop_front();
        }
    }

    /// `member_id` rejoined at `now` while a barrier is open.
    pub(super) fn journal_rejoined(&mut self, member_id: &str, now: Millis) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let waited = self
            .insight
            .as_mut()
            .and_then(|i| i.progress.as_mut())
            .and_then(|p| p.waited.get_mut(member_id));
        if let Some(at @ None) = waited {
            *at = Some(now);
        }
    }

    /// The barrier closed at `now` with a new generation (already set); `evicted` were
    /// removed at it. Records the journal entry (its sync part comes with the assignment).
    pub(super) fn journal_barrier_closed(
        &mut self,
        now: Millis,
        evicted: Vec<String>,
        out: &mut Effects<R>,
    ) {
        let keep = self.config.journal_size as usize;
        let members: Vec<Arc<str>> = self.members.keys().cloned().collect();
        let generation = self.generation;
        let assignor = self.assignor.clone();
        let leader_id = self.leader.as_deref().unwrap_or_default().to_owned();
        let Some(insight) = self.insight.as_mut() else {
            return;
        };
        insight.hint = None;
        let Some(progress) = insight.progress.as_mut() else {
            return;
        };
        progress.closed_at = Some(now);
        let started_at = progress.started_at;
        let mut omitted = 0u32;
        let mut waits: Vec<(Arc<str>, Option<Millis>)> = progress
            .waited
            .iter()
            .map(|(id, at)| (Arc::clone(id), *at))
            .collect();
        // The slowest first (never rejoined before all), then by id: the cap keeps those.
        waits.sort_unstable_by(|a, b| match (a.1, b.1) {
            (None, None) => a.0.cmp(&b.0),
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => y.cmp(&x).then_with(|| a.0.cmp(&b.0)),
        });
        if waits.len() > MAX_LISTED {
            omitted =
                omitted.saturating_add(u32::try_from(waits.len() - MAX_LISTED).unwrap_or(u32::MAX));
            waits.truncate(MAX_LISTED);
        }
        let waited_for = waits
            .into_iter()
            .map(|(id, at)| MemberWait {
                member_id: id.to_string(),
                rejoin_ms: at.map(|t| t.saturating_sub(started_at)),
            })
            .collect();
        let last: BTreeSet<&str> = insight.last_members.iter().map(|m| &**m).collect();
        let current: BTreeSet<&str> = members.iter().map(|m| &**m).collect();
        let joined = current.difference(&last).map(|s| (*s).to_owned()).collect();
        let left = last.difference(&current).map(|s| (*s).to_owned()).collect();
        let entry = RebalanceRecord {
            generation_id: generation,
            trigger: progress.cause.clone(),
            started_at_ms: started_at,
            barrier_ms: now.saturating_sub(started_at),
            sync_ms: None,
            assignor,
            leader_id,
            members: u32::try_from(members.len()).unwrap_or(u32::MAX),
            waited_for,
            evicted: capped(evicted, &mut omitted),
            joined: capped(joined, &mut omitted),
            left: capped(left, &mut omitted),
            moved: None,
            changes: Vec::new(),
            omitted,
        };
        insight.last_members = members;
        insight.push_entry(entry, keep);
        if self.members.is_empty() {
            // No assignment will come: everything the last one gave out is revoked.
            self.journal_assigned(now, None, out);
        }
    }

    /// The leader's assignment was applied at `now` (or, with no members left, none will
    /// come): completes the newest entry with the sync time and the diff, and works out which
    /// subscribed partitions nobody owns. Tells `out` how long the whole rebalance took.
    pub(super) fn journal_assigned(
        &mut self,
        now: Millis,
        topics: Option<&dyn TopicLookup>,
        out: &mut Effects<R>,
    ) {
        let after: Vec<(Arc<str>, Box<[TopicPartitions]>)> = self
            .members
            .values()
            .filter(|m| !m.assignment.is_empty())
            .map(|m| (Arc::clone(&m.member_id), m.assignment.clone()))
            .collect();
        let unowned = topics
            .map(|t| self.unowned_partitions(t))
            .unwrap_or_default();
        let generation = self.generation;
        let Some(insight) = self.insight.as_mut() else {
            return;
        };
        let Some(progress) = insight.progress.take() else {
            return;
        };
        out.events.push(Event::RebalanceFinished {
            kind: static_kind(&progress.cause.kind),
            total_ms: now.saturating_sub(progress.started_at),
        });
        let closed_at = progress.closed_at.unwrap_or(now);
        let (moved, changes, omitted) = diff(&insight.baseline, &after);
        insight.baseline = after;
        let completed = insight.entries.update_newest(generation, |entry| {
            if topics.is_some() {
                entry.sync_ms = Some(now.saturating_sub(closed_at));
            }
            entry.moved = Some(moved);
            entry.changes = changes;
            entry.omitted = entry.omitted.saturating_add(omitted);
        });
        if completed {
            insight.unwritten = insight.unwritten.max(1);
        }
        let (list, count) = unowned;
        if count == 0 {
            insight.unowned_since = None;
        } else if insight.unowned_count == 0 {
            insight.unowned_since = Some(now);
        }
        insight.unowned = list;
        insight.unowned_count = count;
    }

    /// Partitions of the topics members subscribe to (that exist in the catalog) that no
    /// member's assignment holds: the list (capped) and the full count.
    fn unowned_partitions(&self, topics: &dyn TopicLookup) -> (Vec<TopicPartitions>, usize) {
        let subscribed: BTreeSet<&str> = self
            .members
            .values()
            .flat_map(|m| m.topics.iter().map(String::as_str))
            .collect();
        let mut owned: BTreeSet<(&str, i32)> = BTreeSet::new();
        for m in self.members.values() {
            for tp in m.assignment.iter() {
                owned.extend(tp.partitions.iter().map(|&p| (tp.topic.as_str(), p)));
            }
        }
        let mut count = 0usize;
        let mut listed = Vec::new();
        for topic in subscribed {
            let partitions = topics.partitions(topic).unwrap_or(0).max(0);
            for p in 0..partitions {
                if !owned.contains(&(topic, p)) {
                    count += 1;
                    if listed.len() < MAX_LISTED_PARTITIONS {
                        listed.push((topic, p));
                    }
                }
            }
        }
        (to_topic_partitions(listed.into_iter()), count)
    }

    /// The journal entries changed since the last call (and the generations dropped from it),
    /// as one mutation to write beside the group's record; `None` if nothing changed.
    pub(super) fn journal_changes(&mut self) -> Option<Mutation> {
        let insight = self.insight.as_mut()?;
        if insight.unwritten == 0 && insight.dropped.is_empty() {
            return None;
        }
        let from = insight.entries.len().saturating_sub(insight.unwritten);
        let entries = insight.entries.starting_at(from);
        insight.unwritten = 0;
        Some(Mutation::PutRebalances {
            group_id: self.group_id.to_string(),
            entries,
            dropped: std::mem::take(&mut insight.dropped),
        })
    }

    /// The journal, newest first: at most `limit` entries (0: all).
    pub fn history(&self, limit: u32) -> Vec<RebalanceRecord> {
        let Some(insight) = self.insight.as_ref() else {
            return Vec::new();
        };
        let limit = if limit == 0 {
            usize::MAX
        } else {
            limit as usize
        };
        insight.entries.newest_first(limit)
    }

    /// Puts back the stored journal of a restored group (see [`Group::restore`]): entries
    /// beyond `journal_size` are dropped (and deleted from storage with the next write).
    pub fn restore_journal(&mut self, mut entries: Vec<RebalanceRecord>) {
        if entries.is_empty() {
            return;
        }
        let keep = self.config.journal_size as usize;
        entries.sort_by_key(|e| e.generation_id);
        let excess = entries.len().saturating_sub(keep);
        let insight = self.insight_mut();
        insight.dropped = entries[..excess].iter().map(|e| e.generation_id).collect();
        insight.entries.replace(entries.into_iter().skip(excess));
    }

    /// What a restored group knows without its journal: the last assignment and members.
    pub(super) fn restore_insight(&mut self) {
        if self.members.is_empty() {
            return;
        }
        let insight = Insight {
            baseline: self
                .members
                .values()
                .filter(|m| !m.assignment.is_empty())
                .map(|m| (Arc::clone(&m.member_id), m.assignment.clone()))
                .collect(),
            last_members: self.members.keys().cloned().collect(),
            ..Insight::default()
        };
        self.insight = Some(Box::new(insight));
    }
}
