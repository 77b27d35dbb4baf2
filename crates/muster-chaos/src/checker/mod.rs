//! The history checker: reads the workers' histories and the runner's record of a run and
//! reports every violation of the properties below (docs/reliability.md, "Chaos harness",
//! states them for users). "Before" is real time on the one monotonic clock: event A is
//! before event B when A was *recorded* before B was *started* (a commit's `done` before
//! another's `sent`), so no rule depends on how long a message took on the way.
//!
//! Strict safety rules (any hit is a violation):
//!
//! - **fenced-commit**: no commit is acknowledged for partition p with ownership epoch e if
//!   it was sent after another member's `Assigned` of p with an epoch above e. Once a new
//!   owner has been told it owns p, the old one's writes must be refused. This is the
//!   property ownership epochs exist for; a wall-clock overlap of ownership alone is not.
//! - **offset-went-back**: an acknowledged commit of p is never followed by an acknowledged
//!   commit of p with a smaller offset (workers only ever commit above what they fetched on
//!   assignment, so a smaller one means an acknowledged commit was overwritten by an older
//!   one, or a new owner read a stale offset).
//! - **commit-lost**: after the run, each partition's committed offset (OffsetFetch) is at
//!   least the largest offset ever acknowledged for it.
//! - **history-went-back**: the server's offset history of p (oldest first) never has a
//!   commit with a smaller offset after a larger one (the runs make no resets).
//! - **generation-went-back**: per member id, the generations (consumer protocol: member
//!   epochs) it saw and had commits acknowledged in never decrease; and in a classic group,
//!   an acknowledged commit never carries a smaller generation than one acknowledged before
//!   it was sent (the server accepts only the current generation, which only rises).
//! - **epoch-reused** / **epoch-went-back**: two different members never own p with the same
//!   ownership epoch; one member's epochs of p never decrease.
//! - **not-settled**: after the nemesis stopped and healed everything, every group settled
//!   within the bound (runner's measurement), and at the end each partition was owned by
//!   exactly one member and had a commit acknowledged within the last `flow_window`.
//!
//! Ownership overlap (two members counting p as theirs at the same instant) is **allowed**
//! where the lease and session rules allow it: the older owner (lower epoch) is a zombie
//! that has not noticed yet. It can only notice through the coordinator, so an overlap is
//! excused when, within `notice_bound` before it started and until it ended, the older
//! owner's worker was paused, cut or killed, or any musterd node or etcd member was faulted
//! (its coordinator may have been the one). Any other overlap is an **overlap** violation.

mod tenure;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::clock::ms;
use crate::history::{Event, Fault, History, RunRecord};
pub use tenure::{group_view, Acked, End, GroupView, Tenure};

/// The rule a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    FencedCommit,
    OffsetWentBack,
    CommitLost,
    HistoryWentBack,
    GenerationWentBack,
    EpochReused,
    EpochWentBack,
    Overlap,
    NotSettled,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::FencedCommit => "fenced-commit",
            Rule::OffsetWentBack => "offset-went-back",
            Rule::CommitLost => "commit-lost",
            Rule::HistoryWentBack => "history-went-back",
            Rule::GenerationWentBack => "generation-went-back",
            Rule::EpochReused => "epoch-reused",
            Rule::EpochWentBack => "epoch-went-back",
            Rule::Overlap => "overlap",
            Rule::NotSettled => "not-settled",
        })
    }
}

/// One violation, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: Rule,
    pub group: String,
    /// When the offending event happened (for "caught after how long").
    pub t: u64,
    pub detail: String,
}

/// The checker's knobs (docs/reliability.md gives the values a run uses and why).
#[derive(Debug, Clone, Copy)]
pub struct CheckConfig {
    /// How long a zombie may take to notice it lost its membership (module docs).
    pub notice_bound_ns: u64,
    /// At the end, every partition must have had a commit acknowledged this recently.
    pub flow_window_ns: u64,
}

/// What was checked, and what was found.
#[derive(Debug, Default)]
pub struct Report {
    pub histories: usize,
    pub events: usize,
    pub acked_offsets: usize,
    pub commits_failed: usize,
    pub not_owned: usize,
    pub tenures: usize,
    pub overlaps: usize,
    pub overlaps_excused: usize,
    pub violations: Vec<Violation>,
}

impl Report {
    pub fn counts(&self) -> BTreeMap<Rule, usize> {
        let mut counts = BTreeMap::new();
        for v in &self.violations {
            *counts.entry(v.rule).or_insert(0) += 1;
        }
        counts
    }
}

/// Checks a run (module docs).
pub fn check(record: &RunRecord, histories: &[History], config: &CheckConfig) -> Report {
    let mut report = Report {
        histories: histories.len(),
        events: histories.iter().map(|h| h.events.len()).sum(),
        ..Report::default()
    };
    let at = |t: u64| format!("{:.0} ms", ms(t.saturating_sub(record.started)));
    for (group, protocol) in &record.groups {
        let view = group_view(group, histories, record);
        report.tenures += view.tenures.values().map(Vec::len).sum::<usize>();
        report.acked_offsets += view.acked.values().map(Vec::len).sum::<usize>();
        report.commits_failed += view.commits_failed;
        report.not_owned += view.not_owned;
        let mut add = |rule: Rule, t: u64, detail: String| {
            report.violations.push(Violation {
                rule,
                group: group.clone(),
                t,
                detail,
            })
        };
        fenced_commits(&view, &at, &mut add);
        offsets_go_forward(&view, &at, &mut add);
        if protocol == "classic" {
            classic_generations_go_forward(&view, &at, &mut add);
        }
        final_offsets(&view, record.finals.get(group), record.stopped, &mut add);
        epochs(&view, &at, &mut add);
        let (overlaps, excused) = overlaps(&view, &record.faults, config, &at, &mut add);
        report.overlaps += overlaps;
        report.overlaps_excused += excused;
        settled(group, &view, record, config, &at, &mut add);
        member_generations(group, histories, &at, &mut add);
    }
    report
}

/// fenced-commit (module docs).
fn fenced_commits(
    view: &GroupView,
    at: &dyn Fn(u64) -> String,
    add: &mut dyn FnMut(Rule, u64, String),
) {
    for (p, acked) in &view.acked {
        let Some(tenures) = view.tenures.get(p) else {
            continue;
        };
        // For each prefix of tenures (by start), the one with the highest epoch.
        let mut best: Vec<usize> = Vec::with_capacity(tenures.len());
        for (i, t) in tenures.iter().enumerate() {
            let keep = match best.last() {
                Some(&b) if tenures[b].epoch >= t.epoch => b,
                _ => i,
            };
            best.push(keep);
        }
        for c in acked {
            let started_before = tenures.partition_point(|t| t.start < c.sent);
            let Some(&b) = started_before.checked_sub(1).and_then(|i| best.get(i)) else {
                continue;
            };
            let newer = &tenures[b];
            if newer.epoch > c.epoch && newer.member_id != c.member_id {
                add(
                    Rule::FencedCommit,
                    c.done,
                    format!(
                        "partition {p}: {} had offset {} acknowledged with epoch {} (sent {}, \
                         acked {}), but {} had been assigned it with epoch {} at {}",
                        c.who,
                        c.offset,
                        c.epoch,
                        at(c.sent),
                        at(c.done),
                        newer.who,
                        newer.epoch,
                        at(newer.start)
                    ),
                );
            }
        }
    }
}

/// offset-went-back (module docs).
fn offsets_go_forward(
    view: &GroupView,
    at: &dyn Fn(u64) -> String,
    add: &mut dyn FnMut(Rule, u64, String),
) {
    for (p, acked) in &view.acked {
        // `acked` is sorted by `done`; the prefix maximum of offsets by `done`.
        let mut best: Vec<usize> = Vec::with_capacity(acked.len());
        for (i, c) in acked.iter().enumerate() {
            let keep = match best.last() {
                Some(&b) if acked[b].offset >= c.offset => b,
                _ => i,
            };
            best.push(keep);
        }
        for c in acked {
            let before = acked.partition_point(|a| a.done < c.sent);
            let Some(&b) = before.checked_sub(1).and_then(|i| best.get(i)) else {
                continue;
            };
            let earlier = &acked[b];
            if earlier.offset > c.offset {
                add(
                    Rule::OffsetWentBack,
                    c.done,
                    format!(
                        "partition {p}: {} had offset {} acknowledged at {}, then {} had offset \
                         {} acknowledged (sent {})",
                        earlier.who,
                        earlier.offset,
                        at(earlier.done),
                        c.who,
                        c.offset,
                        at(c.sent)
                    ),
                );
            }
        }
    }
}

/// generation-went-back, the classic group's part (module docs).
fn classic_generations_go_forward(
    view: &GroupView,
    at: &dyn Fn(u64) -> String,
    add: &mut dyn FnMut(Rule, u64, String),
) {
    let mut all: Vec<&Acked> = view.acked.values().flatten().collect();
    all.sort_by_key(|a| (a.done, a.sent));
    let mut best: Vec<usize> = Vec::with_capacity(all.len());
    for (i, c) in all.iter().enumerate() {
        let keep = match best.last() {
            Some(&b) if all[b].generation >= c.generation => b,
            _ => i,
        };
        best.push(keep);
    }
    for c in &all {
        let before = all.partition_point(|a| a.done < c.sent);
        let Some(&b) = before.checked_sub(1).and_then(|i| best.get(i)) else {
            continue;
        };
        let earlier = all[b];
        if earlier.generation > c.generation {
            add(
                Rule::GenerationWentBack,
                c.done,
                format!(
                    "{} had a commit acknowledged in generation {} at {}, then {} had one \
                     acknowledged in generation {} (sent {})",
                    earlier.who,
                    earlier.generation,
                    at(earlier.done),
                    c.who,
                    c.generation,
                    at(c.sent)
                ),
            );
        }
    }
}

/// generation-went-back, per member id (module docs).
fn member_generations(
    group: &str,
    histories: &[History],
    at: &dyn Fn(u64) -> String,
    add: &mut dyn FnMut(Rule, u64, String),
) {
    for h in histories.iter().filter(|h| h.group == group) {
        let mut seen: BTreeMap<&str, (i32, u64)> = BTreeMap::new();
        for event in &h.events {
            let (member_id, generation, t) = match event {
                // Not `Assigned`: it carries the generation it was emitted in, and may be
                // handled after the worker already saw the next one.
                Event::Member {
                    t,
                    member_id,
                    generation,
                } => (member_id, *generation, *t),
                Event::Commit {
                    done,
                    member_id,
                    generation,
                    outcome: crate::history::Outcome::Acked,
                    ..
                } => (member_id, *generation, *done),
                _ => continue,
            };
            // -1 and 0 mean "no generation yet" / "rejoining", not a generation.
            if generation <= 0 || member_id.is_empty() {
                continue;
            }
            match seen.get(member_id.as_str()) {
                Some(&(before, t_before)) if before > generation => add(
                    Rule::GenerationWentBack,
                    t,
                    format!(
                        "{} member {member_id}: generation {before} at {}, then {generation} \
                         at {}",
                        h.name(),
                        at(t_before),
                        at(t)
                    ),
                ),
                _ => {
                    seen.insert(member_id, (generation, t));
                }
            }
        }
    }
}

/// commit-lost and history-went-back (module docs).
fn final_offsets(
    view: &GroupView,
    last: Option<&crate::history::FinalState>,
    stopped: u64,
    add: &mut dyn FnMut(Rule, u64, String),
) {
    let empty = crate::history::FinalState::default();
    let last = last.unwrap_or(&empty);
    for (p, acked) in &view.acked {
        let Some(top) = acked.iter().max_by_key(|a| a.offset) else {
            continue;
        };
        match last.offsets.get(p) {
            Some(&o) if o >= top.offset => {}
            found => add(
                Rule::CommitLost,
                stopped,
                format!(
                    "partition {p}: offset {} was acknowledged to {}, the final committed offset \
                     is {}",
                    top.offset,
                    top.who,
                    found.map_or("none".to_owned(), i64::to_string)
                ),
            ),
        }
    }
    for (p, entries) in &last.history {
        let mut high: Option<&(String, i64, String, i32)> = None;
        for entry in entries {
            if entry.0 != "commit" {
                // A reset may go back (the runs make none; any other kind resets the bar).
                high = None;
                continue;
            }
            match high {
                Some(h) if h.1 > entry.1 => add(
                    Rule::HistoryWentBack,
                    stopped,
                    format!(
                        "partition {p}: the offset history has {} (member {}, generation {}) \
                         after {} (member {}, generation {})",
                        entry.1, entry.2, entry.3, h.1, h.2, h.3
                    ),
                ),
                _ => high = Some(entry),
            }
        }
    }
}

/// epoch-reused and epoch-went-back (module docs).
fn epochs(view: &GroupView, at: &dyn Fn(u64) -> String, add: &mut dyn FnMut(Rule, u64, String)) {
    for (p, tenures) in &view.tenures {
        let mut owners: BTreeMap<i32, &Tenure> = BTreeMap::new();
        let mut last: BTreeMap<&str, &Tenure> = BTreeMap::new();
        for t in tenures {
            match owners.get(&t.epoch) {
                Some(other) if other.member_id != t.member_id => add(
                    Rule::EpochReused,
                    t.start,
                    format!(
                        "partition {p}: epoch {} given to {} (member {}) at {} and to {} (member \
                         {}) at {}",
                        t.epoch,
                        other.who,
                        other.member_id,
                        at(other.start),
                        t.who,
                        t.member_id,
                        at(t.start)
                    ),
                ),
                Some(_) => {}
                None => {
                    owners.insert(t.epoch, t);
                }
            }
            if let Some(before) = last.get(t.member_id.as_str()) {
                if before.epoch > t.epoch {
                    add(
                        Rule::EpochWentBack,
                        t.start,
                        format!(
                            "partition {p}: {} owned it with epoch {} at {}, then with epoch {} \
                             at {}",
                            t.who,
                            before.epoch,
                            at(before.start),
                            t.epoch,
                            at(t.start)
                        ),
                    );
                }
            }
            last.insert(&t.member_id, t);
        }
    }
}

/// Ownership overlaps, excused or not (module docs). Returns (overlaps, excused).
fn overlaps(
    view: &GroupView,
    faults: &[Fault],
    config: &CheckConfig,
    at: &dyn Fn(u64) -> String,
    add: &mut dyn FnMut(Rule, u64, String),
) -> (usize, usize) {
    let (mut total, mut excused) = (0, 0);
    for (p, tenures) in &view.tenures {
        for (i, a) in tenures.iter().enumerate() {
            for b in &tenures[i + 1..] {
                if b.start >= a.end {
                    // Sorted by start: no later tenure overlaps `a` either.
                    break;
                }
                if b.member_id == a.member_id {
                    continue;
                }
                total += 1;
                let (older, newer) = if a.epoch <= b.epoch { (a, b) } else { (b, a) };
                let from = a.start.max(b.start);
                let to = a.end.min(b.end);
                let window = (from.saturating_sub(config.notice_bound_ns), to);
                let relevant = |f: &&Fault| {
                    f.target.starts_with("node:")
                        || f.target.starts_with("etcd:")
                        || f.target
                            .strip_prefix("worker:")
                            .and_then(|w| w.rsplit('/').next())
                            .is_some_and(|w| w == older.worker)
                };
                let excuse = faults
                    .iter()
                    .filter(relevant)
                    .find(|f| f.start <= window.1 && f.end >= window.0);
                if excuse.is_some() {
                    excused += 1;
                    continue;
                }
                add(
                    Rule::Overlap,
                    from,
                    format!(
                        "partition {p}: {} (epoch {}, {}..{}, ended {:?}) and {} (epoch {}, \
                         {}..{}) both owned it from {} to {} with no fault to excuse the older",
                        older.who,
                        older.epoch,
                        at(older.start),
                        at(older.end),
                        older.how,
                        newer.who,
                        newer.epoch,
                        at(newer.start),
                        at(newer.end),
                        at(from),
                        at(to)
                    ),
                );
            }
        }
    }
    (total, excused)
}

/// not-settled (module docs).
fn settled(
    group: &str,
    view: &GroupView,
    record: &RunRecord,
    config: &CheckConfig,
    at: &dyn Fn(u64) -> String,
    add: &mut dyn FnMut(Rule, u64, String),
) {
    match record.settled.iter().find(|s| s.group == group) {
        Some(s) if s.after_ns.is_some_and(|a| a <= record.settle_bound_ns) => {}
        found => add(
            Rule::NotSettled,
            record.healed,
            format!(
                "the group did not settle within {:.0} ms after everything was healed at {} \
                 (measured: {:?})",
                ms(record.settle_bound_ns),
                at(record.healed),
                found.and_then(|s| s.after_ns).map(ms)
            ),
        ),
    }
    let end = record.stopped;
    let mut unowned = BTreeSet::new();
    for p in 0..record.partitions {
        let owners: Vec<&Tenure> = view
            .tenures
            .get(&p)
            .map(|ts| {
                ts.iter()
                    .filter(|t| t.start < end && t.end >= end)
                    .collect()
            })
            .unwrap_or_default();
        if owners.len() != 1 {
            add(
                Rule::NotSettled,
                end,
                format!(
                    "partition {p} had {} owners when the run stopped at {}: {:?}",
                    owners.len(),
                    at(end),
                    owners.iter().map(|t| &t.who).collect::<Vec<_>>()
                ),
            );
            unowned.insert(p);
            continue;
        }
        let flowing = view.acked.get(&p).is_some_and(|acked| {
            acked
                .iter()
                .any(|a| a.done <= end && a.done + config.flow_window_ns >= end)
        });
        if !flowing {
            add(
                Rule::NotSettled,
                end,
                format!(
                    "partition {p} had no commit acknowledged in the {:.0} ms before the run \
                     stopped",
                    ms(config.flow_window_ns)
                ),
            );
        }
    }
}
