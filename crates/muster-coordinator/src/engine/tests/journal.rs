//! The rebalance journal and the stuck detector (protocol §6.20; `journal.rs`,
//! `diagnosis.rs`).

use super::*;
use crate::storage::Mutation;

fn newest(h: &Harness) -> muster_protocol::RebalanceRecord {
    h.group.history(1).pop().expect("a journal entry")
}

#[test]
fn a_session_expiry_is_journaled_naming_the_member_with_what_moved() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let leader = h.leader();
    let gone = h.followers(&ids)[0].clone();
    let generation = h.generation();
    let first = newest(&h);
    assert_eq!(first.trigger.kind, "member_joined");
    assert_eq!(first.generation_id, generation);
    assert_eq!(first.members, 3);
    assert_eq!(
        first.moved,
        Some(3),
        "three partitions got their first owner"
    );
    // Everyone but `gone` keeps heartbeating; its session runs out.
    let start = h.now;
    while h.now < start + Millis::from(SESSION) {
        h.advance(2_000);
        for id in ids.iter().filter(|id| **id != gone) {
            h.heartbeat(id, generation);
        }
        h.tick_to(h.now);
    }
    assert!(!h.group.has_member(&gone));
    let expired_at = h.now;
    h.complete_rebalance();
    h.advance(7);
    h.sync_all();
    let entry = newest(&h);
    assert_eq!(entry.generation_id, generation + 1);
    assert_eq!(entry.trigger.kind, "session_expired");
    assert_eq!(entry.trigger.member_id, gone);
    assert_eq!(entry.trigger.client_host, "/10.0.0.1");
    assert_eq!(entry.left, vec![gone.clone()]);
    assert!(entry.joined.is_empty());
    assert_eq!(entry.members, 2);
    assert_eq!(entry.started_at_ms, expired_at);
    assert_eq!(entry.sync_ms, Some(7));
    assert_eq!(entry.leader_id, leader);
    // Partition i goes to member i in id order: the partition of the member that went is
    // revoked (its owner is gone) and whatever shifted moved too.
    let moved = entry.moved.expect("the assignment came");
    assert!(moved >= 1, "{entry:?}");
    let revoked_from_gone = entry
        .changes
        .iter()
        .find(|c| c.member_id == gone)
        .expect("the member that went lost its partition");
    assert_eq!(revoked_from_gone.revoked.len(), 1);
    assert!(revoked_from_gone.gained.is_empty());
    // Both survivors rejoined at once: the barrier waited for them only.
    assert_eq!(entry.waited_for.len(), 2);
    assert!(entry.waited_for.iter().all(|w| w.rejoin_ms.is_some()));
}

#[test]
fn a_member_that_does_not_rejoin_is_who_the_barrier_waits_for_until_it_gives_up() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let leader = h.leader();
    let laggard = h.followers(&ids)[0].clone();
    let start = h.now;
    // The leader rejoins with another subscription: a rebalance the others must rejoin.
    h.rejoin_with(&leader, |r| r.topics = strings(&["t1", "t2"]));
    for id in ids.iter().filter(|id| **id != leader && **id != laggard) {
        h.rejoin(id);
    }
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let d = h.group.diagnose(h.now);
    let wait = d.rebalance.expect("a rebalance in progress");
    assert_eq!(wait.phase, "join");
    assert_eq!(wait.trigger.kind, "leader_rejoined");
    assert_eq!(wait.trigger.member_id, leader);
    assert_eq!(
        wait.waiting_for
            .iter()
            .map(|m| m.member_id.as_str())
            .collect::<Vec<_>>(),
        vec![laggard.as_str()]
    );
    assert_eq!(wait.deadline_ms, Some(start + Millis::from(REBALANCE)));
    assert!(!wait.stuck);
    assert!(!h.group.is_stuck());
    assert_eq!(h.group.barrier_started_at(), Some(start));

    // The laggard keeps heartbeating (its session lives on) but never rejoins.
    let generation = h.generation();
    while h.now + 3_000 < start + Millis::from(REBALANCE / 2) {
        h.advance(3_000);
        h.heartbeat(&laggard, generation);
        h.tick_to(h.now);
    }
    assert!(!h.group.is_stuck());
    // Half-way: stuck, with one WARN naming the laggard.
    h.tick_to(start + Millis::from(REBALANCE / 2));
    assert!(h.group.is_stuck());
    assert!(
        h.group
            .diagnose(h.now)
            .rebalance
            .expect("in progress")
            .stuck
    );
    let events = h.take_events();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::BarrierSlow { waiting_for, .. } if *waiting_for == vec![laggard.clone()]))
            .count(),
        1,
        "{events:?}"
    );
    h.heartbeat(&laggard, generation);
    h.tick_to(start + Millis::from(REBALANCE / 2) + 1_000);
    assert!(!h
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::BarrierSlow { .. })));

    // The barrier gives up: the laggard is evicted, and the journal says so.
    while h.now + 3_000 < start + Millis::from(REBALANCE) {
        h.advance(3_000);
        h.heartbeat(&laggard, generation);
        h.tick_to(h.now);
    }
    h.tick_to(start + Millis::from(REBALANCE));
    assert!(!h.group.has_member(&laggard));
    assert!(!h.group.is_stuck());
    assert_eq!(h.group.barrier_started_at(), None);
    let entry = newest(&h);
    assert_eq!(entry.evicted, vec![laggard.clone()]);
    assert_eq!(entry.left, vec![laggard.clone()]);
    assert_eq!(entry.barrier_ms, Millis::from(REBALANCE));
    assert_eq!(entry.sync_ms, None, "no assignment yet");
    assert_eq!(entry.moved, None);
    let slowest = &entry.waited_for[0];
    assert_eq!(slowest.member_id, laggard);
    assert_eq!(slowest.rejoin_ms, None);
    // CompletingRebalance: waiting for the leader's SyncGroup.
    let d = h.group.diagnose(h.now);
    let wait = d.rebalance.expect("sync phase");
    assert_eq!(wait.phase, "sync");
    assert!(wait.waiting_for[0].leader);
}

#[test]
fn partitions_the_leader_left_out_are_unowned_since_the_assignment() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    // form_group gives partition i of t1 (6 partitions) to member i: 4 are nobody's.
    let d = h.group.diagnose(h.now);
    assert_eq!(d.state, "Stable");
    assert_eq!(h.group.unowned_partition_count(), 4);
    assert_eq!(d.unowned, vec![tp("t1", &[2, 3, 4, 5])]);
    let since = d.unowned_since_ms.expect("since the sync");
    // A later rebalance that assigns everything clears it.
    h.advance(1_000);
    h.rejoin_with(&ids[0], |r| r.topics = strings(&["t1"]));
    let leader = h.leader();
    h.rejoin_with(&ids[1], |r| r.topics = strings(&["t1"]));
    h.complete_rebalance();
    let generation = h.generation();
    let all: Vec<MemberAssignment> = vec![
        assign(&ids[0], vec![tp("t1", &[0, 1, 2])]),
        assign(&ids[1], vec![tp("t1", &[3, 4, 5])]),
    ];
    h.sync(&leader, generation, all);
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.group.unowned_partition_count(), 0);
    let d = h.group.diagnose(h.now);
    assert!(d.unowned.is_empty());
    assert_eq!(d.unowned_since_ms, None);
    assert!(since < h.now);
    // Before: one partition each of 0 and 1 (by member id); after: 0-2 and 3-5. Whichever
    // order the ids sort in, one of 0 and 1 changed owner and 2-5 got their first: 5.
    assert_eq!(newest(&h).moved, Some(5));
}

#[test]
fn more_rebalances_than_the_threshold_within_the_window_is_a_storm() {
    let mut h = Harness::with_config(GroupConfig {
        storm_rebalances: 2,
        storm_window_ms: 10_000,
        ..config()
    });
    let ids = h.form_group(1);
    assert!(!h.group.diagnose(h.now).storm);
    for topics in [&["t1", "t2"][..], &["t1"][..]] {
        h.advance(1_000);
        h.rejoin_with(&ids[0], |r| r.topics = strings(topics));
        h.complete_rebalance();
        h.sync_all();
    }
    let d = h.group.diagnose(h.now);
    assert!(d.storm, "{d:?}");
    assert_eq!(d.rebalances_in_window, 3);
    // Once the window has passed, the storm is over.
    let d = h.group.diagnose(h.now + 10_000);
    assert!(!d.storm);
}

#[test]
fn the_journal_keeps_the_last_journal_size_entries_and_says_what_to_delete() {
    let mut h = Harness::with_config(GroupConfig {
        journal_size: 2,
        ..config()
    });
    let ids = h.form_group(1);
    let first = h.generation();
    // The journal rides with the group's record writes: what they carried, merged.
    let (entries, dropped) = h.journal_changess();
    assert_eq!(entries, vec![first], "the first rebalance is written");
    assert!(dropped.is_empty());
    h.heartbeat(&ids[0], first);
    assert_eq!(h.journal_changess(), (vec![], vec![]), "written once");
    for topics in [&["t1", "t2"][..], &["t1"][..]] {
        h.rejoin_with(&ids[0], |r| r.topics = strings(topics));
        h.complete_rebalance();
        h.sync_all();
    }
    let history = h.group.history(0);
    assert_eq!(
        history.iter().map(|e| e.generation_id).collect::<Vec<_>>(),
        vec![first + 2, first + 1],
        "newest first"
    );
    assert_eq!(h.group.history(1).len(), 1);
    let (entries, dropped) = h.journal_changess();
    assert_eq!(
        entries,
        vec![first + 1, first + 2],
        "two rebalances written"
    );
    assert_eq!(dropped, vec![first]);
}

impl Harness {
    /// The generations the record writes since the last call put into the journal, and those
    /// they deleted from it, each once, in order.
    fn journal_changess(&mut self) -> (Vec<i32>, Vec<i32>) {
        let mut entries = Vec::new();
        let mut dropped = Vec::new();
        for m in std::mem::take(&mut self.journal_writes) {
            if let Mutation::PutRebalances {
                entries: e,
                dropped: d,
                ..
            } = m
            {
                entries.extend(e.iter().map(|e| e.generation_id));
                dropped.extend(d);
            }
        }
        entries.sort_unstable();
        entries.dedup();
        dropped.sort_unstable();
        dropped.dedup();
        (entries, dropped)
    }
}

#[test]
fn a_restart_keeps_the_journal_and_a_rebalance_in_progress_names_the_restart() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let journal = h.group.history(0);
    h.rejoin(&h.leader());
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.restart(Vec::new());
    h.group.restore_journal(journal.clone());
    assert_eq!(h.group.history(0), journal);
    let d = h.group.diagnose(h.now);
    let wait = d.rebalance.expect("back in PreparingRebalance");
    assert_eq!(wait.trigger.kind, "coordinator_restart");
    assert_eq!(wait.waiting_for.len(), ids.len());
    h.complete_rebalance();
    h.sync_all();
    let entry = newest(&h);
    assert_eq!(entry.trigger.kind, "coordinator_restart");
    assert_eq!(
        entry.moved,
        Some(0),
        "the same assignment as before the restart"
    );
}

#[test]
fn a_leave_is_journaled_with_its_reason() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let leaving = ids[1].clone();
    let response = h.leave_req(LeaveGroupRequest {
        group_id: GROUP.into(),
        members: vec![LeavingMember {
            member_id: leaving.clone(),
            group_instance_id: None,
            reason: Some("shutting down".into()),
        }],
    });
    assert_eq!(response.error_code, 0);
    h.complete_rebalance();
    h.sync_all();
    let entry = newest(&h);
    assert_eq!(entry.trigger.kind, "member_left");
    assert_eq!(entry.trigger.member_id, leaving);
    assert_eq!(entry.trigger.detail.as_deref(), Some("shutting down"));
}
