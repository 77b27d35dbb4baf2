//! The members' own views of one change, and what they add up to: who owns which partition
//! when (as each member reports it), which partitions stop and for how long, which members
//! lose a partition or have to do anything but heartbeat, and their heartbeat latency before
//! and during the change. Both protocols' drivers feed it the same way; nothing here asks the
//! server.
//!
//! A partition **stops** when its holder stops owning it (revoked, lost, or given up with an
//! eager rebalance or a leave) and **restarts** when a member starts owning it; the gap is its
//! downtime. A partition held by two members at once is counted as an overlap (the protocols
//! promise there are none).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use crate::stats::{Latencies, LatencySummary};

/// Where the views are: heartbeat latencies go to the baseline or to the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    Idle,
    Baseline,
    Change,
}

/// What one change came to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Change {
    /// The subject's first request (the newcomer's JoinGroup or first heartbeat; the leave) →
    /// the subject owns what it ends with (the newcomer's share; for a leave: nothing).
    pub subject_ms: f64,
    /// Change start → the last stopped partition owned again (0 if none stopped).
    pub all_owned_ms: f64,
    /// Change start → the group settled (every member at the new generation or epoch, every
    /// partition owned).
    pub settled_ms: f64,
    /// Partitions that stopped at least once during the change.
    pub stopped: usize,
    /// Partitions whose owner at the end is not their owner at the start.
    pub moved: usize,
    /// Partitions stopped that did not move (an eager rebalance's cost).
    pub stopped_not_moved: usize,
    /// Partitions owned by nobody once the change settled.
    pub unowned_at_end: usize,
    /// Times a partition was held by two members at once.
    pub overlaps: usize,
    /// The members there before the change, the subject excepted.
    pub others: usize,
    /// Of those, how many stopped owning any partition.
    pub others_lost: usize,
    /// Of those, how many did anything but heartbeat (rejoin, sync, revoke, take, acknowledge).
    pub others_acted: usize,
    /// Of those, how many a moved partition left (its owner at the start).
    pub donors: usize,
    /// Of those, how many a moved partition went to (its owner at the end).
    pub receivers: usize,
    /// Others neither donor nor receiver that still lost a partition.
    pub uninvolved_lost: usize,
    /// Others neither donor nor receiver that did anything but heartbeat.
    pub uninvolved_acted: usize,
}

/// The views, kept while the members run.
pub struct Views {
    partitions: usize,
    /// Per member index: what it owns.
    owned: Vec<BTreeSet<i32>>,
    /// Per member index: when what it owns last changed.
    last_change: Vec<Option<Instant>>,
    /// Per partition: how many members hold it.
    holders: Vec<u16>,
    /// Per partition: its only holder, when it has exactly one.
    owner: Vec<Option<usize>>,
    /// Partitions with exactly one holder.
    owned_once: usize,
    window: Window,
    start: Option<Instant>,
    /// Owners when the change started.
    before: Vec<Option<usize>>,
    /// Per partition: when it stopped, while it is stopped in the change.
    stopped_at: Vec<Option<Instant>>,
    stopped: BTreeSet<i32>,
    last_restart: Option<Instant>,
    overlaps: usize,
    /// Members that lost a partition / did anything but heartbeat, in the change.
    lost: BTreeSet<usize>,
    acted: BTreeSet<usize>,
    /// The change's subject (the newcomer or the leaver): not one of the "others".
    subject: Option<usize>,
    subject_first: Option<Instant>,
    downtime: Latencies,
    baseline_heartbeats: Latencies,
    change_heartbeats: Latencies,
}

/// A change and what the other members' heartbeats and the stopped partitions saw in it.
#[derive(Debug, Clone)]
pub struct Measured {
    pub change: Change,
    /// The other members' heartbeats answered during the change.
    pub heartbeats: LatencySummary,
    /// Each stop of a partition: stopped → owned again.
    pub downtime: LatencySummary,
}

impl Views {
    pub fn new(partitions: usize) -> Result<Self> {
        Ok(Views {
            partitions,
            owned: Vec::new(),
            last_change: Vec::new(),
            holders: vec![0; partitions],
            owner: vec![None; partitions],
            owned_once: 0,
            window: Window::Idle,
            start: None,
            before: Vec::new(),
            stopped_at: vec![None; partitions],
            stopped: BTreeSet::new(),
            last_restart: None,
            overlaps: 0,
            lost: BTreeSet::new(),
            acted: BTreeSet::new(),
            subject: None,
            subject_first: None,
            downtime: Latencies::new()?,
            baseline_heartbeats: Latencies::new()?,
            change_heartbeats: Latencies::new()?,
        })
    }

    /// Every partition is held by exactly one member.
    pub fn fully_owned(&self) -> bool {
        self.owned_once == self.partitions
    }

    pub fn owned(&self, member: usize) -> usize {
        self.owned.get(member).map_or(0, BTreeSet::len)
    }

    fn slot(&mut self, member: usize) {
        if self.owned.len() <= member {
            self.owned.resize_with(member + 1, BTreeSet::new);
            self.last_change.resize(member + 1, None);
        }
    }

    fn index(&self, p: i32) -> Option<usize> {
        usize::try_from(p).ok().filter(|&i| i < self.partitions)
    }

    /// `member` starts owning `partitions` at `at`.
    pub fn add(&mut self, member: usize, at: Instant, partitions: impl IntoIterator<Item = i32>) {
        self.slot(member);
        for p in partitions {
            let Some(i) = self.index(p) else { continue };
            if !self.owned[member].insert(p) {
                continue;
            }
            self.last_change[member] = Some(at);
            self.holders[i] += 1;
            match self.holders[i] {
                1 => {
                    self.owned_once += 1;
                    self.owner[i] = Some(member);
                    if let Some(since) = self.stopped_at[i].take() {
                        self.downtime.record(at.saturating_duration_since(since));
                        self.last_restart = Some(self.last_restart.map_or(at, |t| t.max(at)));
                    }
                }
                2 => {
                    self.owned_once -= 1;
                    self.owner[i] = None;
                    self.overlaps += 1;
                }
                _ => self.overlaps += 1,
            }
        }
    }

    /// `member` stops owning `partitions` at `at`.
    pub fn remove(
        &mut self,
        member: usize,
        at: Instant,
        partitions: impl IntoIterator<Item = i32>,
    ) {
        self.slot(member);
        let mut lost_any = false;
        for p in partitions {
            let Some(i) = self.index(p) else { continue };
            if !self.owned[member].remove(&p) {
                continue;
            }
            lost_any = true;
            self.last_change[member] = Some(at);
            self.holders[i] -= 1;
            match self.holders[i] {
                0 => {
                    self.owned_once -= 1;
                    self.owner[i] = None;
                    if self.window == Window::Change {
                        self.stopped_at[i] = Some(at);
                        self.stopped.insert(p);
                    }
                }
                1 => {
                    self.owned_once += 1;
                    self.owner[i] = (0..self.owned.len()).find(|&m| self.owned[m].contains(&p));
                }
                _ => {}
            }
        }
        if lost_any && self.window == Window::Change {
            self.lost.insert(member);
        }
    }

    /// `member` owns exactly `partitions` from `at` on (a classic SyncGroup answer; an empty
    /// set: an eager member's revocation of everything).
    pub fn set(&mut self, member: usize, at: Instant, partitions: &[i32]) {
        self.slot(member);
        let now: BTreeSet<i32> = partitions.iter().copied().collect();
        let gone: Vec<i32> = self.owned[member].difference(&now).copied().collect();
        let new: Vec<i32> = now.difference(&self.owned[member]).copied().collect();
        self.remove(member, at, gone);
        self.add(member, at, new);
    }

    /// `member` did something other than heartbeat.
    pub fn acted(&mut self, member: usize) {
        if self.window == Window::Change {
            self.acted.insert(member);
        }
    }

    /// A heartbeat of `member`, sent at `sent` and answered at `at`.
    pub fn heartbeat(&mut self, member: usize, sent: Instant, at: Instant) {
        let latency = at.saturating_duration_since(sent);
        match self.window {
            Window::Baseline => self.baseline_heartbeats.record(latency),
            Window::Change if self.subject != Some(member) => {
                self.change_heartbeats.record(latency);
            }
            _ => {}
        }
    }

    /// The subject sent its first request of the change at `at` (only the first counts).
    pub fn subject_request(&mut self, at: Instant) {
        self.subject_first.get_or_insert(at);
    }

    pub fn subject(&self) -> Option<usize> {
        self.subject
    }

    /// Heartbeats from now on are the baseline (cleared).
    pub fn begin_baseline(&mut self) -> Result<()> {
        self.window = Window::Baseline;
        self.baseline_heartbeats = Latencies::new()?;
        Ok(())
    }

    /// The baseline's heartbeat latency.
    pub fn baseline(&self) -> LatencySummary {
        self.baseline_heartbeats.summary()
    }

    /// The change starts now; `subject` is the newcomer or the leaver.
    pub fn begin_change(&mut self, subject: usize) -> Result<Instant> {
        let start = Instant::now();
        self.downtime = Latencies::new()?;
        self.change_heartbeats = Latencies::new()?;
        self.window = Window::Change;
        self.start = Some(start);
        self.before = self.owner.clone();
        self.stopped_at.iter_mut().for_each(|s| *s = None);
        self.stopped.clear();
        self.last_restart = None;
        self.overlaps = 0;
        self.lost.clear();
        self.acted.clear();
        self.subject = Some(subject);
        self.subject_first = None;
        Ok(start)
    }

    /// The change settled at `at`; `others` are the members there before it, the subject
    /// excepted.
    pub fn end_change(&mut self, at: Instant, others: &[usize]) -> Measured {
        let start = self.start.take().unwrap_or(at);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let subject_ms = match (self.subject, self.subject_first) {
            (Some(s), Some(first)) => self
                .last_change
                .get(s)
                .copied()
                .flatten()
                .map_or(0.0, |t| ms(t.saturating_duration_since(first))),
            _ => 0.0,
        };
        let moved = (0..self.partitions)
            .filter(|&i| self.owner[i] != self.before.get(i).copied().flatten())
            .count();
        let stopped_not_moved = self
            .stopped
            .iter()
            .filter_map(|&p| self.index(p))
            .filter(|&i| self.owner[i].is_some() && self.owner[i] == self.before[i])
            .count();
        let mut donors = BTreeSet::new();
        let mut receivers = BTreeSet::new();
        for i in 0..self.partitions {
            let was = self.before.get(i).copied().flatten();
            if self.owner[i] != was {
                donors.extend(was);
                receivers.extend(self.owner[i]);
            }
        }
        let count = |pred: &dyn Fn(usize) -> bool| others.iter().filter(|&&m| pred(m)).count();
        let involved = |m: usize| donors.contains(&m) || receivers.contains(&m);
        let others_lost = count(&|m| self.lost.contains(&m));
        let others_acted = count(&|m| self.acted.contains(&m));
        let uninvolved_lost = count(&|m| self.lost.contains(&m) && !involved(m));
        let uninvolved_acted = count(&|m| self.acted.contains(&m) && !involved(m));
        let in_donors = count(&|m| donors.contains(&m));
        let in_receivers = count(&|m| receivers.contains(&m));
        self.window = Window::Idle;
        let change = Change {
            subject_ms,
            all_owned_ms: self
                .last_restart
                .map_or(0.0, |t| ms(t.saturating_duration_since(start))),
            settled_ms: ms(at.saturating_duration_since(start)),
            stopped: self.stopped.len(),
            moved,
            stopped_not_moved,
            unowned_at_end: self.holders.iter().filter(|&&h| h == 0).count(),
            overlaps: self.overlaps,
            others: others.len(),
            others_lost,
            others_acted,
            donors: in_donors,
            receivers: in_receivers,
            uninvolved_lost,
            uninvolved_acted,
        };
        Measured {
            change,
            heartbeats: self.change_heartbeats.summary(),
            downtime: self.downtime.summary(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_partition_stops_once_and_is_counted_with_its_downtime() -> Result<()> {
        let mut v = Views::new(4)?;
        let t0 = Instant::now();
        v.add(0, t0, [0, 1]);
        v.add(1, t0, [2, 3]);
        assert!(v.fully_owned());
        v.begin_change(2)?;
        let t1 = t0 + Duration::from_millis(10);
        v.remove(1, t1, [3]);
        v.acted(1);
        let t2 = t0 + Duration::from_millis(30);
        v.add(2, t2, [3]);
        assert!(v.fully_owned());
        let m = v.end_change(t2, &[0, 1]);
        let c = &m.change;
        assert_eq!((c.stopped, c.moved, c.stopped_not_moved), (1, 1, 0));
        assert_eq!((c.others, c.others_lost, c.others_acted), (2, 1, 1));
        assert_eq!((c.donors, c.receivers), (1, 0));
        assert_eq!((c.uninvolved_lost, c.uninvolved_acted), (0, 0));
        assert_eq!((c.overlaps, c.unowned_at_end), (0, 0));
        assert_eq!(m.downtime.count, 1);
        Ok(())
    }

    #[test]
    fn an_eager_revocation_stops_partitions_that_come_back_to_their_owner() -> Result<()> {
        let mut v = Views::new(2)?;
        let t0 = Instant::now();
        v.set(0, t0, &[0]);
        v.set(1, t0, &[1]);
        v.begin_change(2)?;
        v.set(0, t0, &[]);
        v.set(1, t0, &[]);
        v.set(0, t0, &[0]);
        v.set(1, t0, &[1]);
        let c = v.end_change(t0, &[0, 1]).change;
        assert_eq!((c.stopped, c.moved, c.stopped_not_moved), (2, 0, 2));
        assert_eq!(c.others_lost, 2);
        assert_eq!((c.donors, c.uninvolved_lost), (0, 2));
        Ok(())
    }

    #[test]
    fn two_holders_are_an_overlap() -> Result<()> {
        let mut v = Views::new(1)?;
        let t0 = Instant::now();
        v.add(0, t0, [0]);
        v.add(1, t0, [0]);
        assert!(!v.fully_owned());
        v.remove(0, t0, [0]);
        assert!(v.fully_owned());
        v.begin_change(1)?;
        let c = v.end_change(t0, &[0]).change;
        assert_eq!(c.moved, 0);
        Ok(())
    }
}
