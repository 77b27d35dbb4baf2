//! The expiry quarantine (protocol §6.25; `quarantine.rs`): retention moves offsets out of
//! sight instead of deleting them, holds the group while it has any, drops them after the
//! grace period; OffsetRestore and restore on join bring them back.

use muster_protocol::{ConsumerGroupHeartbeatRequest, OffsetRestoreResponse};

use super::protect::{
    entries, fetch_all, offsets, principal, restore, simple_commit, simple_commit_with,
    take_commit, with_offsets,
};
use super::*;
use crate::access::Operation;
use crate::config::OffsetsConfig;
use crate::storage::QuarantinedOffset;

const RETENTION: Millis = 1_000;
const GRACE: Millis = 2_000;

fn held(restore_on_join: bool, grace: Millis) -> GroupConfig {
    GroupConfig {
        offsets_retention_ms: RETENTION,
        empty_group_removal_ms: 500,
        ..with_offsets(OffsetsConfig {
            ownership_check: false,
            quarantine_ms: grace,
            restore_on_join,
            ..OffsetsConfig::default()
        })
    }
}

/// t1/0 = 10 "m" and t1/1 = 11 committed at 0, quarantined at 1000 (to drop at 3000).
fn quarantined(restore_on_join: bool) -> Harness {
    let mut h = Harness::with_config(held(restore_on_join, GRACE));
    simple_commit_with(&mut h, "t1", 0, 10, Some("m"));
    simple_commit(&mut h, "t1", 1, 11);
    h.tick_to(RETENTION);
    assert!(offsets(&h).is_empty());
    assert_eq!(h.group.quarantined_partitions(), 2);
    h.take_events();
    h.best_effort.clear();
    h.commit_batches.clear();
    h
}

/// What OffsetRestore lists: `(topic, partition, offset)`.
fn listed(r: &OffsetRestoreResponse) -> Vec<(String, i32, i64)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.clone(), p.partition, p.offset))
        })
        .collect()
}

fn both() -> Vec<(String, i32, i64)> {
    vec![("t1".to_owned(), 0, 10), ("t1".to_owned(), 1, 11)]
}

fn partitions(ps: &[(&str, i32)]) -> Vec<(String, i32)> {
    ps.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect()
}

/// The restore's batch: offsets put (with their commit time), the quarantine's partitions
/// removed, `restore` history entries.
fn assert_restore_batch(batch: &[Mutation], at: Millis, restored: &[(&str, i32)]) {
    let [Mutation::PutOffsets { offsets: put, .. }, Mutation::DeleteQuarantine {
        partitions: out, ..
    }, Mutation::PutHistory { entries, .. }] = batch
    else {
        panic!("offsets, quarantine, history: {batch:?}");
    };
    let mut put: Vec<(String, i32)> = put
        .iter()
        .inspect(|w| assert_eq!(w.committed.commit_timestamp_ms, at))
        .map(|w| (w.topic.to_string(), w.partition))
        .collect();
    put.sort();
    assert_eq!(put, partitions(restored));
    let mut out = out.clone();
    out.sort();
    assert_eq!(out, partitions(restored));
    assert!(entries.iter().all(|w| w.entry.kind.name() == "restore"));
    assert_eq!(entries.len(), restored.len());
}

#[test]
fn retention_moves_offsets_into_the_quarantine_out_of_sight() {
    let mut h = Harness::with_config(held(true, GRACE));
    simple_commit_with(&mut h, "t1", 0, 10, Some("m"));
    simple_commit(&mut h, "t1", 1, 11);
    h.now = 500;
    simple_commit(&mut h, "t2", 0, 12);
    h.tick_to(RETENTION);
    assert_eq!(offsets(&h), vec![("t2".to_owned(), 0, 12)]);
    let [Mutation::DeleteOffsets {
        partitions: gone, ..
    }, Mutation::PutQuarantine { offsets: moved, .. }] = h.best_effort.as_slice()[0].as_slice()
    else {
        panic!("one best-effort write: {:?}", h.best_effort);
    };
    let mut gone = gone.clone();
    gone.sort();
    assert_eq!(gone, partitions(&[("t1", 0), ("t1", 1)]));
    assert_eq!(moved.len(), 2);
    assert!(moved.iter().all(|q| q.quarantined_at == RETENTION));
    assert!(h.take_events().contains(&Event::OffsetsQuarantined {
        partitions: 2,
        first: true,
        drop_at: RETENTION + GRACE,
    }));
    assert_ne!(h.state(), GroupState::Dead);
    // The next one joins a quarantine that holds something: not the first.
    h.tick_to(1_500);
    assert!(offsets(&h).is_empty());
    assert!(h.take_events().contains(&Event::OffsetsQuarantined {
        partitions: 1,
        first: false,
        drop_at: 1_500 + GRACE,
    }));
    let r = restore(&mut h, false);
    assert_eq!((r.error_code, r.executed), (0, false));
    assert_eq!(
        listed(&r),
        vec![
            ("t1".to_owned(), 0, 10),
            ("t1".to_owned(), 1, 11),
            ("t2".to_owned(), 0, 12)
        ]
    );
    assert_eq!(r.topics[0].partitions[0].metadata.as_deref(), Some("m"));
    assert_eq!(
        (r.quarantined_at_ms, r.drop_at_ms),
        (RETENTION, RETENTION + GRACE)
    );
}

#[test]
fn the_quarantine_holds_the_group_until_it_is_dropped() {
    let mut h = quarantined(true);
    // The group wakes for the drop, not before (and not in a loop at its removal time).
    assert_eq!(h.group.next_deadline(), Some(RETENTION + GRACE));
    assert_eq!(h.armed, Some(RETENTION + GRACE));
    h.tick_to(RETENTION + GRACE - 1);
    assert_eq!(h.group.quarantined_partitions(), 2);
    assert_ne!(h.state(), GroupState::Dead);
    assert!(h.best_effort.is_empty());
    h.tick_to(RETENTION + GRACE);
    assert_eq!(h.group.quarantined_partitions(), 0);
    let events = h.take_events();
    assert!(events.contains(&Event::QuarantineDropped { partitions: 2 }));
    let [Mutation::DeleteQuarantine {
        partitions: dropped,
        ..
    }] = h.best_effort[0].as_slice()
    else {
        panic!("a drop: {:?}", h.best_effort);
    };
    let mut dropped = dropped.clone();
    dropped.sort();
    assert_eq!(dropped, partitions(&[("t1", 0), ("t1", 1)]));
    // Nothing left: the group goes in the same tick.
    assert_eq!(h.state(), GroupState::Dead);
    assert!(h.take_persist());
    assert!(events.contains(&Event::GroupRemoved));
}

#[test]
fn without_a_grace_period_retention_deletes_as_before() {
    let mut h = Harness::with_config(held(true, 0));
    simple_commit(&mut h, "t1", 0, 10);
    h.tick_to(RETENTION);
    assert_eq!(
        h.best_effort,
        vec![vec![Mutation::DeleteOffsets {
            group_id: GROUP.to_owned(),
            partitions: partitions(&[("t1", 0)]),
        }]]
    );
    assert_eq!(h.group.quarantined_partitions(), 0);
    let events = h.take_events();
    assert!(events.contains(&Event::OffsetsExpired { partitions: 1 }));
    assert!(events.contains(&Event::GroupRemoved));
    assert_eq!(h.state(), GroupState::Dead);
}

/// An executed OffsetRestore: its token, its write's batch and pending commit.
fn restore_in_flight(h: &mut Harness) -> (u32, Vec<Mutation>, PendingCommit<u32>) {
    let token = h.next_token();
    let client = h.client.clone();
    let req = muster_protocol::OffsetRestoreRequest {
        group_id: GROUP.to_owned(),
        execute: true,
    };
    let effects = h.group.restore_offsets(h.now, req, &client, token);
    assert!(effects.replies.is_empty(), "answered once durable");
    let (batch, pending) = take_commit(h, effects).expect("a write");
    (token, batch, pending)
}

#[test]
fn offset_restore_lists_then_brings_them_back_once_durable() {
    let mut h = quarantined(true);
    h.now = 1_200;
    let listed_first = restore(&mut h, false);
    assert_eq!(listed(&listed_first), both());
    assert_eq!(h.group.quarantined_partitions(), 2, "a dry run keeps them");
    let (token, batch, pending) = restore_in_flight(&mut h);
    assert_restore_batch(&batch, 1_200, &[("t1", 0), ("t1", 1)]);
    assert!(offsets(&h).is_empty(), "not before it is durable");
    let done = h.group.commit_written(pending, Ok(()));
    h.collect(done);
    let Some(Response::OffsetRestore(r)) = h.reply_for(token) else {
        panic!("answered once durable");
    };
    assert_eq!((r.error_code, r.executed), (0, true));
    assert_eq!(listed(&r), both());
    assert_eq!(offsets(&h), both());
    assert_eq!(
        fetch_all(&h).topics[0].partitions[0].metadata.as_deref(),
        Some("m")
    );
    assert_eq!(h.group.quarantined_partitions(), 0);
    assert_eq!(entries(&h, "t1", 0)[0].1, 10);
    assert!(h.take_events().contains(&Event::OffsetsRestored {
        partitions: 2,
        by: "command"
    }));
    // Retention starts again from the restore.
    h.tick_to(1_200 + RETENTION - 1);
    assert_eq!(offsets(&h), both());
    h.tick_to(1_200 + RETENTION);
    assert!(offsets(&h).is_empty());
    assert_eq!(h.group.quarantined_partitions(), 2);
}

#[test]
fn a_failed_restore_puts_them_back_in_the_quarantine() {
    let mut h = quarantined(true);
    let before = restore(&mut h, false);
    let (token, _, pending) = restore_in_flight(&mut h);
    assert_eq!(
        h.group.quarantined_partitions(),
        0,
        "taken out while written"
    );
    // A tick while it is written: nothing to wake the group for then.
    h.tick_to(1_100);
    assert_eq!(h.armed, None);
    let done = h
        .group
        .commit_written(pending, Err(ErrorCode::NotCoordinator));
    h.collect(done);
    let Some(Response::OffsetRestore(r)) = h.reply_for(token) else {
        panic!("answered with the failure");
    };
    assert_eq!(
        (r.error_code, r.executed),
        (ErrorCode::NotCoordinator.code(), false)
    );
    assert!(offsets(&h).is_empty());
    // Back, with the same drop time, and the group wakes for it.
    assert_eq!(restore(&mut h, false), before);
    assert_eq!(h.group.next_deadline(), Some(RETENTION + GRACE));
    assert_eq!(h.armed, Some(RETENTION + GRACE));
    h.tick_to(RETENTION + GRACE);
    assert_eq!(h.group.quarantined_partitions(), 0);
}

#[test]
fn restoring_needs_delete_on_the_group_and_read_on_each_topic() {
    let mut h = quarantined(true);
    h.now = 1_100;
    simple_commit(&mut h, "t2", 0, 12);
    h.tick_to(2_100);
    assert_eq!(h.group.quarantined_partitions(), 3);
    h.client.access = principal(&["t1", "t2"], &[Operation::Read, Operation::Describe]);
    let r = restore(&mut h, true);
    assert_eq!(
        (r.error_code, r.executed),
        (ErrorCode::GroupAuthorizationFailed.code(), false)
    );
    assert_eq!(restore(&mut h, false).error_code, 0, "listing is allowed");
    assert_eq!(h.group.quarantined_partitions(), 3);
    // t2 unreadable: it stays.
    h.client.access = principal(&["t1"], &[Operation::Delete]);
    let r = restore(&mut h, true);
    assert_eq!((r.error_code, r.executed), (0, true));
    assert_eq!(offsets(&h), both());
    assert_eq!(h.group.quarantined_partitions(), 1);
    h.client.access = Access::default();
    assert_eq!(
        listed(&restore(&mut h, false)),
        vec![("t2".to_owned(), 0, 12)]
    );
}

#[test]
fn a_joining_classic_member_gets_them_back_at_once() {
    let mut h = quarantined(true);
    h.now = 1_300;
    let id = h.member_id_required();
    assert!(offsets(&h).is_empty(), "a pending id is not a member yet");
    h.rejoin(&id);
    // Visible before the barrier completes: the member may fetch first.
    assert_eq!(offsets(&h), both());
    assert_eq!(h.group.quarantined_partitions(), 0);
    assert_eq!(h.best_effort.len(), 1, "{:?}", h.best_effort);
    assert_restore_batch(&h.best_effort[0], 1_300, &[("t1", 0), ("t1", 1)]);
    assert!(h.take_events().contains(&Event::OffsetsRestored {
        partitions: 2,
        by: "join"
    }));
    let entry = h.group.history(1).pop().expect("a journal entry");
    let detail = entry.trigger.detail.unwrap_or_default();
    assert!(
        detail.contains("2 quarantined offsets restored"),
        "{detail}"
    );
    assert_eq!(entries(&h, "t1", 1)[0].1, 11);
}

#[test]
fn a_joining_consumer_protocol_member_gets_them_back_at_once() {
    let mut h = quarantined(true);
    h.now = 1_300;
    let token = h.next_token();
    let cx = Ctx {
        now: h.now,
        topics: &h.catalog,
    };
    let client = h.client.clone();
    let effects = h.group.consumer_heartbeat(
        cx,
        ConsumerGroupHeartbeatRequest {
            group_id: GROUP.to_owned(),
            member_id: "c".to_owned(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topics: Some(strings(&["t1"])),
            owned_partitions: Some(Vec::new()),
            ..ConsumerGroupHeartbeatRequest::default()
        },
        &client,
        Grant::NotAsked,
        Uuid::from_u128(99),
        token,
    );
    h.collect(effects);
    let Some(Response::ConsumerGroupHeartbeat(r)) = h.reply_for(token) else {
        panic!("answered");
    };
    assert_eq!(r.error_code, 0);
    assert_eq!(offsets(&h), both());
    assert_eq!(h.best_effort.len(), 1, "{:?}", h.best_effort);
    assert_restore_batch(&h.best_effort[0], 1_300, &[("t1", 0), ("t1", 1)]);
    let entry = h.group.history(1).pop().expect("a journal entry");
    let detail = entry.trigger.detail.unwrap_or_default();
    assert!(detail.contains("restored"), "{detail}");
}

#[test]
fn with_restore_on_join_off_they_stay_quarantined() {
    let mut h = quarantined(false);
    let id = h.member_id_required();
    h.rejoin(&id);
    assert!(offsets(&h).is_empty());
    assert_eq!(h.group.quarantined_partitions(), 2);
    assert!(h.best_effort.is_empty());
    // A group with members keeps its quarantine until the drop.
    h.complete_rebalance();
    h.sync_all();
    h.tick_to(RETENTION + GRACE);
    assert_eq!(h.group.quarantined_partitions(), 0);
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn a_restore_does_not_overwrite_an_offset_committed_since() {
    let mut h = quarantined(true);
    h.now = 1_500;
    simple_commit(&mut h, "t1", 0, 99);
    assert_eq!(
        listed(&restore(&mut h, false)),
        vec![("t1".to_owned(), 1, 11)]
    );
    let id = h.member_id_required();
    h.rejoin(&id);
    assert_eq!(
        offsets(&h),
        vec![("t1".to_owned(), 0, 99), ("t1".to_owned(), 1, 11)]
    );
    assert_eq!(h.group.quarantined_partitions(), 0, "the stale one is gone");
    // By command, too.
    let mut h = quarantined(true);
    simple_commit(&mut h, "t1", 1, 77);
    let r = restore(&mut h, true);
    assert_eq!((r.error_code, r.executed), (0, true));
    assert_eq!(
        offsets(&h),
        vec![("t1".to_owned(), 0, 10), ("t1".to_owned(), 1, 77)]
    );
    assert_eq!(h.group.quarantined_partitions(), 0);
}

#[test]
fn the_quarantine_survives_a_restart() {
    let mut h = quarantined(true);
    // What the store holds beside the record: the quarantine, as listed.
    let before = restore(&mut h, false);
    let held: Vec<QuarantinedOffset> = before
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| QuarantinedOffset {
                write: OffsetWrite {
                    topic: t.topic.as_str().into(),
                    partition: p.partition,
                    committed: crate::storage::CommittedOffset {
                        offset: p.offset,
                        metadata: p.metadata.clone(),
                        commit_timestamp_ms: 0,
                    },
                },
                quarantined_at: RETENTION,
            })
        })
        .collect();
    h.restart(Vec::new());
    h.group.restore_offset_records(Vec::new(), held);
    h.arm(h.group.next_deadline());
    assert_eq!(restore(&mut h, false), before);
    assert_eq!(h.group.next_deadline(), Some(RETENTION + GRACE));
    h.tick_to(RETENTION + GRACE);
    assert_eq!(h.group.quarantined_partitions(), 0);
}

#[test]
fn a_partition_quarantined_again_keeps_its_newest_offset() {
    let mut h = quarantined(true);
    h.now = 1_500;
    simple_commit(&mut h, "t1", 0, 99);
    h.tick_to(1_500 + RETENTION);
    assert!(offsets(&h).is_empty());
    assert_eq!(h.group.quarantined_partitions(), 2);
    let r = restore(&mut h, false);
    assert_eq!(
        listed(&r),
        vec![("t1".to_owned(), 0, 99), ("t1".to_owned(), 1, 11)]
    );
    // t1/1 goes at its own drop time; t1/0 later, with its second quarantine.
    h.tick_to(RETENTION + GRACE);
    assert_eq!(
        listed(&restore(&mut h, false)),
        vec![("t1".to_owned(), 0, 99)]
    );
    assert_eq!(h.group.next_deadline(), Some(1_500 + RETENTION + GRACE));
}
