//! Offset history (protocol §6.24; `history.rs`): an entry per durable commit, trimmed by
//! count and bytes in memory and in the store's write, and the OffsetHistory query.

use muster_protocol::{OffsetHistoryResponse, OffsetResetRequest, ResetTo};

use super::protect::{
    commit_batch, entries, history_of, principal, simple_commit, simple_commit_with, take_commit,
    with_offsets,
};
use super::*;
use crate::config::OffsetsConfig;
use crate::engine::history::MAX_HISTORY_ANSWER;
use crate::storage::{HistoryKind, HistoryTrim, HistoryWrite};

fn kept(entries: u32, bytes: usize) -> GroupConfig {
    with_offsets(OffsetsConfig {
        ownership_check: false,
        history_entries: entries,
        history_bytes: bytes,
        history_flush_ms: 0,
        quarantine_ms: 0,
        restore_on_join: false,
    })
}

/// The `PutHistory` of a batch: its entries and trims.
fn put_history(batch: &[Mutation]) -> Option<(Vec<HistoryWrite>, Vec<HistoryTrim>)> {
    batch.iter().find_map(|m| match m {
        Mutation::PutHistory {
            group_id,
            entries,
            trim,
        } => {
            assert_eq!(group_id, GROUP);
            Some((entries.clone(), trim.clone()))
        }
        _ => None,
    })
}

/// A simple commit of `offset` to t1/0 with `metadata`: the trims its write carried.
fn commit_trims(h: &mut Harness, offset: i64, metadata: Option<&str>) -> Vec<(i32, u64)> {
    let (r, batch) = commit_batch(
        h,
        "",
        -1,
        vec![commit_topic(
            "t1",
            &[(0, offset, metadata.map(str::to_owned))],
        )],
    );
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    let (entries, trims) = put_history(&batch.expect("written")).expect("with history");
    assert_eq!(entries.len(), 1);
    trims
        .iter()
        .map(|t| {
            assert_eq!(&*t.topic, "t1");
            (t.partition, t.below_seq)
        })
        .collect()
}

fn everything(h: &Harness) -> OffsetHistoryResponse {
    history_of(h, None, None, 0, &Access::default())
}

/// `(topic, partition, [seq...])` of an answer, newest entry first.
fn shape(r: &OffsetHistoryResponse) -> Vec<(String, i32, Vec<u64>)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.topic.clone(),
                    p.partition,
                    p.entries.iter().map(|e| e.seq).collect(),
                )
            })
        })
        .collect()
}

#[test]
fn each_durable_commit_adds_an_entry_saying_who_wrote_it() {
    let mut h = Harness::with_config(kept(100, 64 << 10));
    h.now = 1_000;
    let (_, batch) = commit_batch(
        &mut h,
        "",
        -1,
        vec![commit_topic("t1", &[(0, 5, Some("m".into()))])],
    );
    let (written, trims) = put_history(&batch.expect("written")).expect("with history");
    assert!(trims.is_empty());
    assert_eq!(written.len(), 1);
    assert_eq!((&*written[0].topic, written[0].partition), ("t1", 0));
    assert_eq!(written[0].entry.kind, HistoryKind::Commit);

    let ids = h.form_group(1);
    let member = ids[0].clone();
    let generation = h.generation();
    h.now = 2_000;
    // The member's own client is recorded, whichever connection the commit came on.
    h.client.client_id = "another-connection".into();
    let (r, _) = commit_batch(
        &mut h,
        &member,
        generation,
        vec![commit_topic("t1", &[(0, 9, None)])],
    );
    assert_eq!(r.topics[0].partitions[0].error_code, 0);

    let answer = everything(&h);
    assert_eq!(answer.error_code, 0);
    assert_eq!(answer.omitted, 0);
    let log = &answer.topics[0].partitions[0];
    assert_eq!((answer.topics[0].topic.as_str(), log.partition), ("t1", 0));
    let [newest, oldest] = log.entries.as_slice() else {
        panic!("two entries: {log:?}");
    };
    assert_eq!(
        (oldest.seq, oldest.kind.as_str(), oldest.offset),
        (0, "commit", 5)
    );
    assert_eq!(oldest.metadata.as_deref(), Some("m"));
    assert_eq!(oldest.committed_at_ms, 1_000);
    assert_eq!(
        (
            oldest.member_id.as_str(),
            oldest.client_id.as_str(),
            oldest.client_host.as_str(),
            oldest.generation_id
        ),
        ("", "client", "/10.0.0.1", -1)
    );
    assert_eq!(
        (newest.seq, newest.offset, newest.committed_at_ms),
        (1, 9, 2_000)
    );
    assert_eq!(
        (
            newest.member_id.as_str(),
            newest.client_id.as_str(),
            newest.generation_id
        ),
        (member.as_str(), "client", generation)
    );
}

#[test]
fn a_failed_write_adds_nothing_and_leaves_the_history_whole() {
    let mut h = Harness::with_config(kept(100, 64 << 10));
    let token = h.next_token();
    let effects = h.group.commit_offsets(
        h.now,
        OffsetCommitRequest {
            group_id: GROUP.to_owned(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: vec![commit_topic("t1", &[(0, 5, None)])],
        },
        &ClientInfo::default(),
        token,
    );
    let (batch, pending) = take_commit(&mut h, effects).expect("a commit write");
    assert!(put_history(&batch).is_some());
    // Not visible while in flight either.
    assert!(everything(&h).topics.is_empty());
    let done = h
        .group
        .commit_written(pending, Err(ErrorCode::NotCoordinator));
    h.collect(done);
    assert!(h.reply_for(token).is_some());
    assert!(everything(&h).topics.is_empty(), "{:?}", everything(&h));
    // The first durable entry is the partition's first: its history is complete (seq 0).
    simple_commit(&mut h, "t1", 0, 6);
    assert_eq!(entries(&h, "t1", 0), vec![(0, 6)]);
}

#[test]
fn the_history_keeps_the_last_entries_and_trims_the_store_alike() {
    let mut h = Harness::with_config(kept(3, 64 << 10));
    for offset in 0..3 {
        assert!(commit_trims(&mut h, offset, None).is_empty());
    }
    assert_eq!(commit_trims(&mut h, 3, None), vec![(0, 1)]);
    assert_eq!(commit_trims(&mut h, 4, None), vec![(0, 2)]);
    assert_eq!(entries(&h, "t1", 0), vec![(4, 4), (3, 3), (2, 2)]);
    // Another partition has a budget of its own.
    simple_commit(&mut h, "t1", 1, 0);
    assert_eq!(entries(&h, "t1", 1), vec![(0, 0)]);
    assert_eq!(entries(&h, "t1", 0).len(), 3);
}

#[test]
fn the_history_keeps_within_its_bytes() {
    // A simple commit's entry weighs 48 + "client" + "/10.0.0.1" + its metadata = 63 + m.
    let mut h = Harness::with_config(kept(100, 200));
    let m37 = "x".repeat(37);
    assert!(commit_trims(&mut h, 0, Some(&m37)).is_empty());
    assert!(
        commit_trims(&mut h, 1, Some(&m37)).is_empty(),
        "200 bytes fit"
    );
    assert_eq!(commit_trims(&mut h, 2, Some(&m37)), vec![(0, 1)]);
    assert_eq!(entries(&h, "t1", 0), vec![(2, 2), (1, 1)]);
    // Small entries: one big one goes and several fit.
    assert_eq!(commit_trims(&mut h, 3, None), vec![(0, 2)]);
    assert_eq!(entries(&h, "t1", 0), vec![(3, 3), (2, 2)]);
    // 100 + 63 + 63 > 200: the last big one goes; then three small ones fit (189).
    assert_eq!(commit_trims(&mut h, 4, None), vec![(0, 3)]);
    assert!(commit_trims(&mut h, 5, None).is_empty());
    assert_eq!(entries(&h, "t1", 0), vec![(5, 5), (4, 4), (3, 3)]);
}

#[test]
fn an_entry_over_the_byte_budget_is_kept_alone() {
    let mut h = Harness::with_config(kept(100, 200));
    simple_commit(&mut h, "t1", 0, 0);
    simple_commit(&mut h, "t1", 0, 1);
    let big = "x".repeat(300);
    assert_eq!(commit_trims(&mut h, 2, Some(&big)), vec![(0, 2)]);
    assert_eq!(entries(&h, "t1", 0), vec![(2, 2)]);
    assert_eq!(commit_trims(&mut h, 3, None), vec![(0, 3)]);
    assert_eq!(entries(&h, "t1", 0), vec![(3, 3)]);
}

/// t1/0 has 3 entries, t1/1 two, t2/1 one.
fn three_partitions() -> Harness {
    let mut h = Harness::with_config(kept(100, 64 << 10));
    for offset in 0..3 {
        simple_commit(&mut h, "t1", 0, offset);
    }
    for offset in 0..2 {
        simple_commit(&mut h, "t1", 1, offset);
    }
    simple_commit(&mut h, "t2", 1, 0);
    h
}

#[test]
fn limit_and_filters() {
    let h = three_partitions();
    let all = || Access::default();
    assert_eq!(
        shape(&everything(&h)),
        vec![
            ("t1".into(), 0, vec![2, 1, 0]),
            ("t1".into(), 1, vec![1, 0]),
            ("t2".into(), 1, vec![0]),
        ]
    );
    assert_eq!(
        shape(&history_of(&h, None, None, 2, &all())),
        vec![
            ("t1".into(), 0, vec![2, 1]),
            ("t1".into(), 1, vec![1, 0]),
            ("t2".into(), 1, vec![0]),
        ]
    );
    assert_eq!(
        shape(&history_of(&h, Some("t1"), None, 1, &all())),
        vec![("t1".into(), 0, vec![2]), ("t1".into(), 1, vec![1])]
    );
    assert_eq!(
        shape(&history_of(&h, Some("t1"), Some(1), 0, &all())),
        vec![("t1".into(), 1, vec![1, 0])]
    );
    // A partition across topics: only the topics that have it.
    let r = history_of(&h, None, Some(0), 0, &all());
    assert_eq!(shape(&r), vec![("t1".into(), 0, vec![2, 1, 0])]);
    assert_eq!(r.topics.len(), 1, "{r:?}");
    assert!(history_of(&h, Some("nope"), None, 0, &all())
        .topics
        .is_empty());
    assert!(history_of(&h, Some("t1"), Some(9), 0, &all())
        .topics
        .is_empty());
}

#[test]
fn an_unreadable_topic_is_refused_per_partition() {
    let h = three_partitions();
    let r = history_of(&h, None, None, 0, &principal(&["t1"], &[]));
    assert_eq!(r.error_code, 0);
    let t2 = r.topics.iter().find(|t| t.topic == "t2").expect("t2 named");
    assert_eq!(t2.partitions.len(), 1);
    assert_eq!(
        t2.partitions[0].error_code,
        ErrorCode::TopicAuthorizationFailed.code()
    );
    assert!(t2.partitions[0].entries.is_empty(), "no entries leak");
    let t1 = r.topics.iter().find(|t| t.topic == "t1").expect("t1 named");
    assert!(t1.partitions.iter().all(|p| p.error_code == 0));
    assert_eq!(t1.partitions[0].entries.len(), 3);
}

#[test]
fn the_answer_is_capped_and_counts_what_it_left_out() {
    let mut h = Harness::with_config(kept(100, 64 << 10));
    let extra = 25;
    let wide: Vec<(i32, i64, Option<String>)> = (0..(MAX_HISTORY_ANSWER + extra) as i32)
        .map(|p| (p, 1, None))
        .collect();
    let (r, _) = commit_batch(&mut h, "", -1, vec![commit_topic("t1", &wide)]);
    assert!(r.topics[0].partitions.iter().all(|p| p.error_code == 0));
    let answer = everything(&h);
    let shown: usize = answer.topics[0]
        .partitions
        .iter()
        .map(|p| p.entries.len())
        .sum();
    assert_eq!(shown, MAX_HISTORY_ANSWER);
    assert_eq!(answer.omitted, extra as u32);
    // A narrower question gets everything it asks for.
    let one = history_of(&h, Some("t1"), Some(10_010), 0, &Access::default());
    assert_eq!(
        (one.omitted, shape(&one)),
        (0, vec![("t1".into(), 10_010, vec![0])])
    );
}

#[test]
fn the_history_survives_a_restart_and_goes_on_from_its_sequence() {
    let mut h = Harness::with_config(kept(100, 64 << 10));
    simple_commit_with(&mut h, "t1", 0, 1, Some("a"));
    simple_commit(&mut h, "t1", 0, 2);
    simple_commit(&mut h, "t1", 1, 3);
    let stored: Vec<HistoryWrite> = std::mem::take(&mut h.commit_batches)
        .iter()
        .filter_map(|b| put_history(b))
        .flat_map(|(entries, _)| entries)
        .collect();
    let before = everything(&h);
    let offsets = vec![
        OffsetWrite {
            topic: "t1".into(),
            partition: 0,
            committed: crate::storage::CommittedOffset {
                offset: 2,
                metadata: None,
                commit_timestamp_ms: 0,
            },
        },
        // An offset committed before history was kept.
        OffsetWrite {
            topic: "t2".into(),
            partition: 0,
            committed: crate::storage::CommittedOffset {
                offset: 4,
                metadata: None,
                commit_timestamp_ms: 0,
            },
        },
    ];
    h.restart(offsets);
    h.group.restore_offset_records(stored, Vec::new());
    assert_eq!(everything(&h), before);
    simple_commit(&mut h, "t1", 0, 5);
    assert_eq!(entries(&h, "t1", 0), vec![(2, 5), (1, 2), (0, 1)]);
    // The partition with no history never claims its first entry.
    simple_commit(&mut h, "t2", 0, 6);
    assert_eq!(entries(&h, "t2", 0), vec![(1, 6)]);
}

/// History written `flush_ms` after the commits, gathered (`offset_history_flush_ms`).
fn deferred(entries: u32, flush_ms: u64) -> GroupConfig {
    GroupConfig {
        offsets: OffsetsConfig {
            history_flush_ms: flush_ms,
            ..kept(entries, 64 << 10).offsets
        },
        ..kept(entries, 64 << 10)
    }
}

#[test]
fn deferred_history_is_written_once_for_many_commits_at_its_deadline() {
    let mut h = Harness::with_config(deferred(3, 100));
    h.now = 1_000;
    for offset in 1..=5 {
        let (_, batch) = commit_batch(
            &mut h,
            "",
            -1,
            vec![commit_topic("t1", &[(0, offset, None)])],
        );
        // The commit's own write holds only its offset.
        assert!(put_history(&batch.expect("written")).is_none());
        h.now += 10;
    }
    // Visible at once in memory: the last three (the history keeps 3).
    let shown: Vec<u64> = everything(&h).topics[0].partitions[0]
        .entries
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(shown, [4, 3, 2]);
    assert!(
        h.best_effort.iter().all(|b| put_history(b).is_none()),
        "nothing written yet"
    );
    assert!(h.group.next_deadline().is_some_and(|d| d <= 1_100));
    h.tick_to(1_100);
    let writes: Vec<_> = h
        .best_effort
        .iter()
        .filter_map(|b| put_history(b))
        .collect();
    let [(entries, trims)] = writes.as_slice() else {
        panic!("one history write: {writes:?}");
    };
    // What the memory no longer holds is neither written nor kept.
    let seqs: Vec<u64> = entries.iter().map(|w| w.entry.seq).collect();
    assert_eq!(seqs, [2, 3, 4]);
    let trims: Vec<(i32, u64)> = trims.iter().map(|t| (t.partition, t.below_seq)).collect();
    assert_eq!(trims, [(0, 2)]);
    // Nothing is held back any more: no history deadline.
    assert!(h.group.next_deadline().is_none_or(|d| d > 1_100));
}

#[test]
fn a_reset_writes_the_entries_held_back_before_its_own() {
    let mut h = Harness::with_config(deferred(100, 10_000));
    h.now = 1_000;
    let _ = commit_batch(&mut h, "", -1, vec![commit_topic("t1", &[(0, 7, None)])]);
    h.now = 1_010;
    let token = h.next_token();
    let effects = h.group.reset_offsets(
        h.now,
        OffsetResetRequest {
            group_id: GROUP.to_owned(),
            to: ResetTo::Offset { offset: 3 },
            topics: Vec::new(),
            execute: true,
        },
        &h.client.clone(),
        token,
    );
    let before = h.commit_batches.len();
    let _ = h.collect(effects);
    let batch = h.commit_batches[before].clone();
    let histories: Vec<Vec<u64>> = batch
        .iter()
        .filter_map(|m| match m {
            Mutation::PutHistory { entries, .. } => {
                Some(entries.iter().map(|w| w.entry.seq).collect())
            }
            _ => None,
        })
        .collect();
    // The commit's entry (seq 0) first, then the reset's (seq 1), in one atomic write.
    assert_eq!(histories, [vec![0], vec![1]]);
}

/// A stop (shutdown, or the shard handed over) writes what is held back at once, due or not,
/// and leaves nothing held back; with nothing held back it writes nothing.
#[test]
fn held_back_history_is_written_at_once_when_the_group_stops_here() {
    let mut h = Harness::with_config(deferred(100, 60_000));
    h.now = 1_000;
    for (partition, offset) in [(0, 7), (1, 8), (0, 9)] {
        let _ = commit_batch(
            &mut h,
            "",
            -1,
            vec![commit_topic("t1", &[(partition, offset, None)])],
        );
    }
    assert!(h.best_effort.iter().all(|b| put_history(b).is_none()));
    let effects = h.group.write_held_history();
    let writes: Vec<_> = effects
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::BestEffort(batch) => Some(batch.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(writes.len(), 1, "one best-effort write: {writes:?}");
    let (entries, trims) = put_history(&writes[0]).expect("a history write");
    let written: Vec<(i32, u64, i64)> = entries
        .iter()
        .map(|w| (w.partition, w.entry.seq, w.entry.offset))
        .collect();
    assert_eq!(written, [(0, 0, 7), (0, 1, 9), (1, 0, 8)]);
    assert!(trims.is_empty());
    assert!(
        h.group.next_deadline().is_none_or(|d| d > 61_000),
        "no history deadline left"
    );
    assert!(h.group.write_held_history().writes.is_empty());
}
