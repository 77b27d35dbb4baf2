//! The checker on hand-made histories: a clean one passes, and for every rule a history that
//! breaks it (and only it, where possible) is caught.

use super::*;
use crate::history::{CommitEntry, Event, FinalState, History, Killed, Outcome, RunRecord, Settle};

const MS: u64 = 1_000_000;

fn config() -> CheckConfig {
    CheckConfig {
        notice_bound_ns: 1_000 * MS,
        flow_window_ns: 1_000 * MS,
    }
}

/// A history of `worker` (member id = worker name) in group `g`.
struct H(Vec<Event>);

impl H {
    fn new(worker: &str) -> H {
        H(vec![Event::Start {
            t: 0,
            group: "g".into(),
            worker: worker.into(),
            incarnation: 0,
            pid: 1,
            protocol: "classic".into(),
        }])
    }
    fn member(&self) -> String {
        match &self.0[0] {
            Event::Start { worker, .. } => worker.clone(),
            _ => String::new(),
        }
    }
    fn gen(mut self, t: u64, generation: i32) -> H {
        let member_id = self.member();
        self.0.push(Event::Member {
            t: t * MS,
            member_id,
            generation,
        });
        self
    }
    fn assigned(mut self, t: u64, generation: i32, partitions: &[(i32, i32)]) -> H {
        let member_id = self.member();
        self.0.push(Event::Assigned {
            t: t * MS,
            member_id,
            generation,
            partitions: partitions.to_vec(),
        });
        self
    }
    fn revoked(mut self, t: u64, generation: i32, partitions: &[i32]) -> H {
        let member_id = self.member();
        self.0.push(Event::Revoked {
            t: t * MS,
            member_id,
            generation,
            partitions: partitions.to_vec(),
        });
        self
    }
    fn lost(mut self, t: u64, partitions: &[i32]) -> H {
        let member_id = self.member();
        self.0.push(Event::Lost {
            t: t * MS,
            member_id,
            generation: 1,
            partitions: partitions.to_vec(),
        });
        self
    }
    /// An acknowledged commit of (partition, offset, epoch)s, sent at `sent`, acked 1 ms later.
    fn commit(mut self, sent: u64, generation: i32, offsets: &[(i32, i64, i32)]) -> H {
        let member_id = self.member();
        self.0.push(Event::Commit {
            sent: sent * MS,
            done: (sent + 1) * MS,
            member_id,
            generation,
            offsets: offsets
                .iter()
                .map(|&(partition, offset, epoch)| CommitEntry {
                    partition,
                    offset,
                    epoch,
                })
                .collect(),
            outcome: Outcome::Acked,
        });
        self
    }
    fn done(self) -> History {
        History::from_events(self.0).expect("starts with Start")
    }
}

/// A record of a run of one classic group with `partitions` partitions that stopped at
/// 10 s and settled, with `finals` as the final offsets.
fn record(partitions: i32, finals: &[(i32, i64)]) -> RunRecord {
    let mut r = RunRecord {
        seed: 1,
        partitions,
        started: 0,
        healed: 8_000 * MS,
        settle_bound_ns: 60_000 * MS,
        stopped: 10_000 * MS,
        ..RunRecord::default()
    };
    r.groups.insert("g".into(), "classic".into());
    r.settled.push(Settle {
        group: "g".into(),
        after_ns: Some(500 * MS),
    });
    r.finals.insert(
        "g".into(),
        FinalState {
            offsets: finals.iter().copied().collect(),
            history: Default::default(),
        },
    );
    r
}

fn rules(report: &Report) -> Vec<Rule> {
    let mut rules: Vec<Rule> = report.violations.iter().map(|v| v.rule).collect();
    rules.sort();
    rules.dedup();
    rules
}

/// w1 owns partition 0 (epoch 1), hands it over in order to w2 (epoch 2) at generation 2;
/// offsets rise throughout and w2 commits until the end.
fn clean() -> (RunRecord, Vec<History>) {
    let w1 = H::new("w1")
        .gen(10, 1)
        .assigned(10, 1, &[(0, 1)])
        .commit(100, 1, &[(0, 5, 1)])
        .commit(200, 1, &[(0, 7, 1)])
        .revoked(300, 1, &[0])
        .gen(400, 2)
        .assigned(400, 2, &[])
        .commit(9_500, 2, &[]);
    let w2 = H::new("w2")
        .gen(400, 2)
        .assigned(400, 2, &[(0, 2)])
        .commit(500, 2, &[(0, 9, 2)])
        .commit(9_800, 2, &[(0, 12, 2)]);
    (record(1, &[(0, 12)]), vec![w1.done(), w2.done()])
}

#[test]
fn a_clean_history_passes() {
    let (r, hs) = clean();
    let report = check(&r, &hs, &config());
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.histories, 2);
    assert_eq!(report.tenures, 2);
    assert_eq!(report.acked_offsets, 4);
    assert_eq!(report.overlaps, 0);
}

#[test]
fn a_zombie_commit_acknowledged_after_the_new_owner_took_over_is_fenced_commit() {
    let (mut r, mut hs) = clean();
    // w1 keeps committing after w2 was assigned the partition with epoch 2 at 400 ms, and
    // the server acknowledges it (a broken fence).
    hs[0] = H::new("w1")
        .gen(10, 1)
        .assigned(10, 1, &[(0, 1)])
        .commit(100, 1, &[(0, 5, 1)])
        .commit(600, 1, &[(0, 8, 1)])
        .lost(700, &[0])
        .done();
    r.faults.push(Fault {
        kind: "pause".into(),
        target: "worker:g/w1".into(),
        start: 300 * MS,
        end: 550 * MS,
        quorum_loss: false,
    });
    let report = check(&r, &hs, &config());
    // In generation 1 after w2's commit in generation 2: the classic generation went back
    // for the server too.
    assert_eq!(
        rules(&report),
        vec![
            Rule::FencedCommit,
            Rule::OffsetWentBack,
            Rule::GenerationWentBack
        ]
    );
}

#[test]
fn an_older_offset_acknowledged_after_a_newer_one_is_offset_went_back() {
    let (r, mut hs) = clean();
    // w2 read a stale offset on assignment and commits below w1's 7.
    hs[1] = H::new("w2")
        .gen(400, 2)
        .assigned(400, 2, &[(0, 2)])
        .commit(500, 2, &[(0, 6, 2)])
        .commit(9_800, 2, &[(0, 12, 2)])
        .done();
    let report = check(&r, &hs, &config());
    assert_eq!(rules(&report), vec![Rule::OffsetWentBack]);
}

#[test]
fn a_final_offset_below_an_acknowledged_one_is_commit_lost() {
    let (mut r, hs) = clean();
    r.finals.get_mut("g").expect("g").offsets.insert(0, 9);
    assert_eq!(rules(&check(&r, &hs, &config())), vec![Rule::CommitLost]);
    r.finals.get_mut("g").expect("g").offsets.clear();
    assert_eq!(rules(&check(&r, &hs, &config())), vec![Rule::CommitLost]);
}

#[test]
fn an_offset_history_that_goes_back_is_history_went_back() {
    let (mut r, hs) = clean();
    let entry = |o: i64| ("commit".to_owned(), o, "w".to_owned(), 1);
    let history = &mut r.finals.get_mut("g").expect("g").history;
    history.insert(0, vec![entry(5), entry(9), entry(7), entry(12)]);
    assert_eq!(
        rules(&check(&r, &hs, &config())),
        vec![Rule::HistoryWentBack]
    );
    // A reset in between may go back.
    let history = &mut r.finals.get_mut("g").expect("g").history;
    history.insert(
        0,
        vec![
            entry(9),
            ("reset".to_owned(), 3, String::new(), -1),
            entry(4),
        ],
    );
    assert!(check(&r, &hs, &config()).violations.is_empty());
}

#[test]
fn a_generation_that_goes_back_is_generation_went_back() {
    let (r, mut hs) = clean();
    // Per member: w2 sees generation 3, then 2.
    hs[1] = H::new("w2")
        .gen(400, 2)
        .assigned(400, 2, &[(0, 2)])
        .gen(450, 3)
        .gen(460, 2)
        .commit(500, 2, &[(0, 9, 2)])
        .commit(9_800, 2, &[(0, 12, 2)])
        .done();
    assert_eq!(
        rules(&check(&r, &hs, &config())),
        vec![Rule::GenerationWentBack]
    );
    // Across members of a classic group: w2 has a commit acknowledged in generation 3, then
    // w1 one in generation 2 (each member's own sequence never goes back).
    let (mut r, mut hs) = clean();
    r.partitions = 2;
    r.finals.get_mut("g").expect("g").offsets.insert(1, 3);
    hs[0] = H::new("w1")
        .gen(10, 1)
        .assigned(10, 1, &[(0, 1)])
        .commit(100, 1, &[(0, 5, 1)])
        .commit(200, 1, &[(0, 7, 1)])
        .revoked(300, 1, &[0])
        .gen(400, 2)
        .assigned(400, 2, &[(1, 2)])
        .commit(9_500, 2, &[(1, 3, 2)])
        .done();
    hs[1] = H::new("w2")
        .gen(400, 3)
        .assigned(400, 3, &[(0, 3)])
        .commit(500, 3, &[(0, 9, 3)])
        .commit(9_800, 3, &[(0, 12, 3)])
        .done();
    assert_eq!(
        rules(&check(&r, &hs, &config())),
        vec![Rule::GenerationWentBack]
    );
}

#[test]
fn one_epoch_for_two_members_is_epoch_reused_and_a_falling_epoch_is_epoch_went_back() {
    let (r, mut hs) = clean();
    hs[1] = H::new("w2")
        .gen(400, 2)
        .assigned(400, 2, &[(0, 1)])
        .commit(500, 2, &[(0, 9, 1)])
        .commit(9_800, 2, &[(0, 12, 1)])
        .done();
    assert_eq!(rules(&check(&r, &hs, &config())), vec![Rule::EpochReused]);

    let (r, mut hs) = clean();
    hs[1] = H::new("w2")
        .gen(400, 2)
        .assigned(400, 2, &[(0, 3)])
        .commit(500, 2, &[(0, 9, 3)])
        .revoked(600, 2, &[0])
        .assigned(700, 2, &[(0, 2)])
        .commit(9_800, 2, &[(0, 12, 2)])
        .done();
    assert_eq!(rules(&check(&r, &hs, &config())), vec![Rule::EpochWentBack]);
}

#[test]
fn an_overlap_is_a_violation_unless_a_fault_excuses_the_older_owner() {
    let (mut r, mut hs) = clean();
    // w1 notices only at 900 ms that it lost partition 0, which w2 owns since 400 ms; it
    // committed nothing meanwhile (no fenced effect), but nothing excuses the overlap.
    hs[0] = H::new("w1")
        .gen(10, 1)
        .assigned(10, 1, &[(0, 1)])
        .commit(100, 1, &[(0, 5, 1)])
        .lost(900, &[0])
        .done();
    let report = check(&r, &hs, &config());
    assert_eq!(rules(&report), vec![Rule::Overlap]);
    assert_eq!((report.overlaps, report.overlaps_excused), (1, 0));
    // Another worker's pause excuses nothing.
    r.faults.push(Fault {
        kind: "pause".into(),
        target: "worker:g/w9".into(),
        start: 200 * MS,
        end: 500 * MS,
        quorum_loss: false,
    });
    assert_eq!(rules(&check(&r, &hs, &config())), vec![Rule::Overlap]);
    // w1 was cut off: it is a zombie that had not noticed yet.
    r.faults.push(Fault {
        kind: "cut".into(),
        target: "worker:g/w1".into(),
        start: 200 * MS,
        end: 500 * MS,
        quorum_loss: false,
    });
    let report = check(&r, &hs, &config());
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!((report.overlaps, report.overlaps_excused), (1, 1));
}

#[test]
fn a_kill_ends_a_tenure() {
    let (mut r, mut hs) = clean();
    // w1 never says it let go: without its kill recorded it overlaps w2 until the end.
    hs[0] = H::new("w1")
        .gen(10, 1)
        .assigned(10, 1, &[(0, 1)])
        .commit(100, 1, &[(0, 5, 1)])
        .done();
    let report = check(&r, &hs, &config());
    assert!(rules(&report).contains(&Rule::Overlap), "{report:?}");
    assert!(rules(&report).contains(&Rule::NotSettled), "{report:?}");
    r.killed.push(Killed {
        group: "g".into(),
        worker: "w1".into(),
        incarnation: 0,
        t: 150 * MS,
    });
    let report = check(&r, &hs, &config());
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

#[test]
fn a_group_that_never_settles_is_not_settled() {
    let (mut r, hs) = clean();
    r.settled[0].after_ns = None;
    assert_eq!(rules(&check(&r, &hs, &config())), vec![Rule::NotSettled]);

    // Settled in time, but partition 0 went without commits at the end...
    let (r, mut hs) = clean();
    hs[1] = H::new("w2")
        .gen(400, 2)
        .assigned(400, 2, &[(0, 2)])
        .commit(500, 2, &[(0, 9, 2)])
        .done();
    let mut r2 = r.clone();
    r2.finals.get_mut("g").expect("g").offsets.insert(0, 9);
    assert_eq!(rules(&check(&r2, &hs, &config())), vec![Rule::NotSettled]);
    // ... or had no owner at all (partition 1 of 2).
    let (mut r, hs) = clean();
    r.partitions = 2;
    assert_eq!(rules(&check(&r, &hs, &config())), vec![Rule::NotSettled]);
}
