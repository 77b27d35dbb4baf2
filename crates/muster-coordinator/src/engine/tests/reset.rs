//! OffsetReset (protocol §6.24; `reset.rs`): only while Empty; to a time, the earliest
//! recorded, a shift or an offset; the whole reset or nothing; one write, answered once
//! durable; a reset to just before it undoes it.

use muster_protocol::{OffsetFetchResponse, OffsetResetResponse, ResetTo};

use super::protect::{
    fetch_all, offsets, principal, reset, reset_req, simple_commit_with, take_commit, with_offsets,
};
use super::*;
use crate::access::Operation;
use crate::config::OffsetsConfig;

const NON_EMPTY: i16 = ErrorCode::NonEmptyGroup.code();
const INVALID: i16 = ErrorCode::InvalidRequest.code();

fn kept(entries: u32) -> GroupConfig {
    with_offsets(OffsetsConfig {
        ownership_check: false,
        history_entries: entries,
        quarantine_ms: 0,
        ..OffsetsConfig::default()
    })
}

/// Commits at known times: t1/0 = 10 "a" @1000, 11 "b" @2000, 12 @3000; t1/1 = 20 @1000,
/// 21 @3000; t2/0 = 5 @4000. The clock is left at 10 000.
fn committed(entries: u32) -> Harness {
    let mut h = Harness::with_config(kept(entries));
    h.now = 1_000;
    simple_commit_with(&mut h, "t1", 0, 10, Some("a"));
    simple_commit_with(&mut h, "t1", 1, 20, None);
    h.now = 2_000;
    simple_commit_with(&mut h, "t1", 0, 11, Some("b"));
    h.now = 3_000;
    simple_commit_with(&mut h, "t1", 0, 12, None);
    simple_commit_with(&mut h, "t1", 1, 21, None);
    h.now = 4_000;
    simple_commit_with(&mut h, "t2", 0, 5, None);
    h.now = 10_000;
    h.commit_batches.clear();
    h
}

fn everything(to: ResetTo, execute: bool) -> muster_protocol::OffsetResetRequest {
    reset_req(to, Vec::new(), execute)
}

/// `(topic, partition, current, new, code)` of each partition of an answer.
fn rows(r: &OffsetResetResponse) -> Vec<(String, i32, i64, i64, i16)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.clone(), p.partition, p.current, p.new, p.error_code))
        })
        .collect()
}

fn row(topic: &str, partition: i32, current: i64, new: i64) -> (String, i32, i64, i64, i16) {
    (topic.to_owned(), partition, current, new, 0)
}

#[test]
fn refused_while_the_group_has_members_naming_them() {
    let mut h = committed(100);
    let ids = h.form_group(12);
    let before = offsets(&h);
    for execute in [false, true] {
        let r = reset(&mut h, everything(ResetTo::Offset { offset: 0 }, execute));
        assert_eq!((r.error_code, r.executed), (NON_EMPTY, false));
        assert!(r.topics.is_empty());
        let message = r.error_message.expect("a message");
        let mut sorted = ids.clone();
        sorted.sort();
        for id in &sorted[..10] {
            assert!(message.contains(id.as_str()), "{message}");
        }
        assert!(!message.contains(sorted[10].as_str()), "{message}");
        assert!(message.contains("12 member(s)"), "{message}");
        assert!(message.contains("and 2 more"), "{message}");
    }
    assert!(h.commit_batches.is_empty());
    assert_eq!(offsets(&h), before);
}

#[test]
fn to_a_time_takes_the_newest_entry_at_or_before_it() {
    let mut h = committed(100);
    let at = |h: &mut Harness, at_ms| rows(&reset(h, everything(ResetTo::Time { at_ms }, false)));
    // Exactly at an entry's time: that entry. t2/0 was first committed later: removed (-1).
    assert_eq!(
        at(&mut h, 2_000),
        vec![
            row("t1", 0, 12, 11),
            row("t1", 1, 21, 20),
            row("t2", 0, 5, -1)
        ]
    );
    assert_eq!(
        at(&mut h, 1_999),
        vec![
            row("t1", 0, 12, 10),
            row("t1", 1, 21, 20),
            row("t2", 0, 5, -1)
        ]
    );
    assert_eq!(
        at(&mut h, 3_000),
        vec![
            row("t1", 0, 12, 12),
            row("t1", 1, 21, 21),
            row("t2", 0, 5, -1)
        ]
    );
    assert_eq!(
        at(&mut h, 4_000),
        vec![
            row("t1", 0, 12, 12),
            row("t1", 1, 21, 21),
            row("t2", 0, 5, 5)
        ]
    );
    // Before every commit: every partition removed, the histories being whole.
    assert_eq!(
        at(&mut h, 999),
        vec![
            row("t1", 0, 12, -1),
            row("t1", 1, 21, -1),
            row("t2", 0, 5, -1)
        ]
    );
    // Executed: the offsets (with their metadata) are those of then.
    let r = reset(&mut h, everything(ResetTo::Time { at_ms: 2_000 }, true));
    assert_eq!((r.error_code, r.executed), (0, true));
    assert_eq!(r.recorded_at_ms, 10_000);
    assert_eq!(
        offsets(&h),
        vec![("t1".to_owned(), 0, 11), ("t1".to_owned(), 1, 20)]
    );
    let fetched = fetch_all(&h);
    assert_eq!(
        fetched.topics[0].partitions[0].metadata.as_deref(),
        Some("b")
    );
    let r = h.group.fetch_offsets(
        &OffsetFetchRequest {
            group_id: GROUP.to_owned(),
            topics: Some(vec![tp("t2", &[0])]),
        },
        &Access::default(),
    );
    assert_eq!(r.topics[0].partitions[0].offset, -1, "removed");
}

#[test]
fn a_trimmed_history_refuses_the_whole_reset_and_writes_nothing() {
    // Two entries a partition: t1/0 has lost its 1000 entry, t1/1 has both of its own.
    let mut h = committed(2);
    let before = offsets(&h);
    for execute in [false, true] {
        let r = reset(&mut h, everything(ResetTo::Time { at_ms: 1_500 }, execute));
        assert_eq!(
            (r.error_code, r.executed, r.recorded_at_ms),
            (INVALID, false, 0)
        );
        let message = r.error_message.clone().expect("a message");
        assert!(message.contains("t1:0"), "{message}");
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(
            rows(&r),
            vec![
                ("t1".to_owned(), 0, 12, -1, unknown),
                row("t1", 1, 21, 20),
                row("t2", 0, 5, -1)
            ]
        );
    }
    assert!(h.commit_batches.is_empty());
    assert_eq!(offsets(&h), before);
    // Narrowed to the partitions it can answer for, it goes.
    let r = reset(
        &mut h,
        reset_req(
            ResetTo::Time { at_ms: 1_500 },
            vec![tp("t1", &[1]), tp("t2", &[])],
            true,
        ),
    );
    assert_eq!((r.error_code, r.executed), (0, true));
    assert_eq!(
        offsets(&h),
        vec![("t1".to_owned(), 0, 12), ("t1".to_owned(), 1, 20)]
    );
}

#[test]
fn a_dry_run_answers_and_changes_nothing() {
    let mut h = committed(100);
    let fetched = fetch_all(&h);
    let history = h.group.offset_history(
        &muster_protocol::OffsetHistoryRequest {
            group_id: GROUP.to_owned(),
            topic: None,
            partition: None,
            limit: 0,
        },
        &Access::default(),
    );
    let token = h.next_token();
    let client = h.client.clone();
    let effects = h.group.reset_offsets(
        h.now,
        everything(ResetTo::Offset { offset: 0 }, false),
        &client,
        token,
    );
    assert!(effects.writes.is_empty(), "{effects:?}");
    assert_eq!(h.group.commits_in_flight(), 0);
    h.collect(effects);
    let Some(Response::OffsetReset(r)) = h.reply_for(token) else {
        panic!("answered at once");
    };
    assert_eq!((r.error_code, r.executed, r.recorded_at_ms), (0, false, 0));
    assert_eq!(rows(&r).len(), 3);
    assert_eq!(fetch_all(&h), fetched);
    let after = h.group.offset_history(
        &muster_protocol::OffsetHistoryRequest {
            group_id: GROUP.to_owned(),
            topic: None,
            partition: None,
            limit: 0,
        },
        &Access::default(),
    );
    assert_eq!(after, history);
}

/// Sends an executed reset; returns its token, its one write's batch and pending commit.
fn reset_in_flight(
    h: &mut Harness,
    req: muster_protocol::OffsetResetRequest,
) -> (u32, Vec<Mutation>, PendingCommit<u32>) {
    let token = h.next_token();
    let client = h.client.clone();
    let effects = h.group.reset_offsets(h.now, req, &client, token);
    assert!(effects.replies.is_empty(), "answered only once durable");
    assert_eq!(effects.writes.len(), 1, "one write: {effects:?}");
    let (batch, pending) = take_commit(h, effects).expect("an offset write");
    assert!(!h.is_answered(token));
    (token, batch, pending)
}

#[test]
fn an_executed_reset_is_one_write_answered_once_durable() {
    let mut h = committed(100);
    let before = fetch_all(&h);
    let (token, batch, pending) =
        reset_in_flight(&mut h, everything(ResetTo::Time { at_ms: 2_000 }, true));
    let [Mutation::PutOffsets { offsets: put, .. }, Mutation::DeleteOffsets { partitions, .. }, Mutation::PutHistory { entries, trim, .. }] =
        batch.as_slice()
    else {
        panic!("offsets put and removed, and their history, in one batch: {batch:?}");
    };
    let put: Vec<(&str, i32, i64, u64)> = put
        .iter()
        .map(|w| {
            (
                &*w.topic,
                w.partition,
                w.committed.offset,
                w.committed.commit_timestamp_ms,
            )
        })
        .collect();
    assert_eq!(put, vec![("t1", 0, 11, 10_000), ("t1", 1, 20, 10_000)]);
    assert_eq!(partitions, &vec![("t2".to_owned(), 0)]);
    assert!(trim.is_empty());
    let history: Vec<(&str, i32, i64, &str)> = entries
        .iter()
        .map(|w| (&*w.topic, w.partition, w.entry.offset, w.entry.kind.name()))
        .collect();
    assert_eq!(
        history,
        vec![
            ("t1", 0, 11, "reset"),
            ("t1", 1, 20, "reset"),
            ("t2", 0, -1, "reset")
        ]
    );
    assert!(entries.iter().all(|w| w.entry.at_ms == 10_000));
    // Nothing shows before the write is durable.
    assert_eq!(fetch_all(&h), before);
    let done = h.group.commit_written(pending, Ok(()));
    h.collect(done);
    let Some(Response::OffsetReset(r)) = h.reply_for(token) else {
        panic!("answered once durable");
    };
    assert_eq!((r.error_code, r.executed), (0, true));
    assert_eq!(
        offsets(&h),
        vec![("t1".to_owned(), 0, 11), ("t1".to_owned(), 1, 20)]
    );
    assert!(h
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::OffsetsReset { partitions: 3, .. })));
}

#[test]
fn a_reset_whose_write_failed_changes_nothing() {
    let mut h = committed(100);
    let before = fetch_all(&h);
    let seqs_before = super::protect::entries(&h, "t1", 0);
    let (token, _, pending) =
        reset_in_flight(&mut h, everything(ResetTo::Offset { offset: 0 }, true));
    let done = h
        .group
        .commit_written(pending, Err(ErrorCode::NotCoordinator));
    h.collect(done);
    let Some(Response::OffsetReset(r)) = h.reply_for(token) else {
        panic!("answered with the failure");
    };
    assert_eq!(
        (r.error_code, r.executed),
        (ErrorCode::NotCoordinator.code(), false)
    );
    assert!(r.error_message.is_some());
    assert_eq!(fetch_all(&h), before);
    assert_eq!(super::protect::entries(&h, "t1", 0), seqs_before);
    assert_eq!(h.group.commits_in_flight(), 0);
    // The retry goes through.
    let r = reset(&mut h, everything(ResetTo::Offset { offset: 0 }, true));
    assert_eq!((r.error_code, r.executed), (0, true));
    assert_eq!(super::protect::entries(&h, "t1", 0)[0], (3, 0));
}

/// Resets to just before `r` was recorded: the answer before `r`, exactly.
fn undo(h: &mut Harness, r: &OffsetResetResponse) -> OffsetResetResponse {
    assert!(r.executed);
    reset(
        h,
        everything(
            ResetTo::Time {
                at_ms: r.recorded_at_ms - 1,
            },
            true,
        ),
    )
}

fn encoded(r: &OffsetFetchResponse) -> Vec<u8> {
    let frame = muster_protocol::ResponseFrame {
        correlation_id: 1,
        response: Response::OffsetFetch(r.clone()),
    };
    let mut bytes = Vec::new();
    muster_protocol::encode_response_payload(&frame, &mut bytes)
        .expect("an OffsetFetch answer encodes");
    bytes
}

#[test]
fn a_reset_to_just_before_a_reset_undoes_it_exactly() {
    let mut h = committed(100);
    let original = fetch_all(&h);
    let first = reset(&mut h, everything(ResetTo::Time { at_ms: 1_500 }, true));
    assert_eq!(first.error_code, 0);
    let after_first = fetch_all(&h);
    assert_ne!(after_first, original);
    // In the same millisecond: the second reset is recorded after the first.
    let second = undo(&mut h, &first);
    assert_eq!(second.error_code, 0, "{second:?}");
    assert!(second.recorded_at_ms > first.recorded_at_ms);
    assert_eq!(fetch_all(&h), original);
    assert_eq!(encoded(&fetch_all(&h)), encoded(&original));
    // And the undo of the undo is the first reset again.
    let third = undo(&mut h, &second);
    assert_eq!(third.error_code, 0);
    assert_eq!(fetch_all(&h), after_first);
    h.now += 50;
    let fourth = undo(&mut h, &third);
    assert_eq!(fourth.recorded_at_ms, h.now);
    assert_eq!(encoded(&fetch_all(&h)), encoded(&original));
}

#[test]
fn shift_by_clamps_at_zero_and_keeps_the_metadata() {
    let mut h = committed(100);
    h.now = 10_000;
    simple_commit_with(&mut h, "t1", 0, 12, Some("keep"));
    let r = reset(&mut h, everything(ResetTo::ShiftBy { delta: -11 }, false));
    assert_eq!(
        rows(&r),
        vec![
            row("t1", 0, 12, 1),
            row("t1", 1, 21, 10),
            row("t2", 0, 5, 0)
        ]
    );
    let r = reset(
        &mut h,
        reset_req(
            ResetTo::ShiftBy { delta: i64::MIN },
            vec![tp("t1", &[0])],
            true,
        ),
    );
    assert_eq!((r.error_code, r.executed), (0, true));
    let r = reset(
        &mut h,
        reset_req(ResetTo::ShiftBy { delta: 7 }, vec![tp("t1", &[0])], true),
    );
    assert_eq!(rows(&r), vec![row("t1", 0, 0, 7)]);
    let fetched = fetch_all(&h);
    assert_eq!(fetched.topics[0].partitions[0].offset, 7);
    assert_eq!(
        fetched.topics[0].partitions[0].metadata.as_deref(),
        Some("keep")
    );
    // A partition with no offset cannot be shifted: the whole reset is refused.
    let r = reset(
        &mut h,
        reset_req(ResetTo::ShiftBy { delta: 1 }, vec![tp("t1", &[0, 4])], true),
    );
    assert_eq!((r.error_code, r.executed), (INVALID, false));
    assert_eq!(fetch_all(&h).topics[0].partitions[0].offset, 7);
}

#[test]
fn to_an_offset_and_to_the_earliest_recorded() {
    let mut h = committed(100);
    let r = reset(&mut h, everything(ResetTo::Offset { offset: -1 }, true));
    assert_eq!((r.error_code, r.executed), (INVALID, false));
    assert!(h.commit_batches.is_empty());
    let r = reset(&mut h, everything(ResetTo::EarliestRecorded, false));
    assert_eq!(
        rows(&r),
        vec![
            row("t1", 0, 12, 10),
            row("t1", 1, 21, 20),
            row("t2", 0, 5, 5)
        ]
    );
    let r = reset(
        &mut h,
        reset_req(ResetTo::Offset { offset: 3 }, vec![tp("t2", &[0, 1])], true),
    );
    assert_eq!(rows(&r), vec![row("t2", 0, 5, 3), row("t2", 1, -1, 3)]);
    assert_eq!(
        offsets(&h)[2..],
        [("t2".to_owned(), 0, 3), ("t2".to_owned(), 1, 3)]
    );
}

#[test]
fn executing_needs_delete_on_the_group_a_dry_run_does_not() {
    let mut h = committed(100);
    let before = offsets(&h);
    h.client.access = principal(&["t1", "t2"], &[Operation::Read, Operation::Describe]);
    let r = reset(&mut h, everything(ResetTo::Offset { offset: 0 }, true));
    assert_eq!(
        (r.error_code, r.executed),
        (ErrorCode::GroupAuthorizationFailed.code(), false)
    );
    assert!(h.commit_batches.is_empty());
    let r = reset(&mut h, everything(ResetTo::Offset { offset: 0 }, false));
    assert_eq!((r.error_code, rows(&r).len()), (0, 3));
    assert_eq!(offsets(&h), before);
    // With delete, but t2 unreadable: t2 is refused and left alone, t1 is reset.
    h.client.access = principal(&["t1"], &[Operation::Delete]);
    let r = reset(&mut h, everything(ResetTo::Offset { offset: 0 }, true));
    assert_eq!((r.error_code, r.executed), (0, true));
    let denied = ErrorCode::TopicAuthorizationFailed.code();
    assert_eq!(
        rows(&r),
        vec![
            row("t1", 0, 12, 0),
            row("t1", 1, 21, 0),
            ("t2".to_owned(), 0, -1, -1, denied)
        ]
    );
    assert_eq!(
        offsets(&h),
        vec![
            ("t1".to_owned(), 0, 0),
            ("t1".to_owned(), 1, 0),
            ("t2".to_owned(), 0, 5)
        ]
    );
}
