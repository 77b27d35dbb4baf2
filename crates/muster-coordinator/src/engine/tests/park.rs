//! Whether a group may be parked (`park.rs`): only once nothing but its data is left; and a
//! parked group read back from the store ([`Group::unpark`]) is the group that was parked.

use super::*;
use crate::storage::records::GroupRecord;

/// A simple commit of `offset` to t1/0, handed to the shell and not yet reported durable.
fn commit_unwritten(h: &mut Harness, offset: i64) -> PendingCommit<u32> {
    let token = h.next_token();
    let effects = h.group.commit_offsets(
        h.now,
        OffsetCommitRequest {
            group_id: GROUP.to_owned(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: vec![commit_topic("t1", &[(0, offset, None)])],
        },
        &ClientInfo::default(),
        token,
    );
    match effects.writes.into_iter().next() {
        Some(Write::Commit { commit, .. }) => commit,
        other => panic!("a commit write, not {other:?}"),
    }
}

#[test]
fn a_new_group_and_a_group_with_only_offsets_are_parkable() {
    let mut h = Harness::new();
    assert!(h.group.is_parkable());
    let (r, _) = h.commit("", None, -1, vec![commit_topic("t1", &[(0, 5, None)])]);
    assert_eq!(r.error_code, 0);
    assert!(h.group.has_offsets());
    assert!(h.group.is_parkable());
}

#[test]
fn members_keep_a_group_awake_until_the_last_one_leaves() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    assert_eq!(h.state(), GroupState::Stable);
    assert!(!h.group.is_parkable());
    h.leave(&[(&ids[0], None)]);
    assert!(!h.group.is_parkable(), "one member left");
    h.leave(&[(&ids[1], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    assert!(h.group.is_parkable());
}

#[test]
fn a_pending_member_id_keeps_a_group_awake() {
    let mut h = Harness::new();
    let id = h.member_id_required();
    assert_eq!(h.state(), GroupState::Empty);
    assert!(
        !h.group.is_parkable(),
        "{id} is pending: a deadline and a unit"
    );
    // Forgotten at its deadline: nothing left but data.
    let expires = h.group.next_deadline().expect("the pending id's deadline");
    h.tick_to(expires);
    assert!(h.group.is_parkable());
}

#[test]
fn a_commit_in_flight_keeps_a_group_awake_until_it_is_written() {
    let mut h = Harness::new();
    let commit = commit_unwritten(&mut h, 7);
    assert!(!h.group.is_parkable());
    let done = h.group.commit_written(commit, Ok(()));
    h.collect(done);
    assert!(h.group.is_parkable());
}

#[test]
fn held_back_offset_history_keeps_a_group_awake_until_flushed() {
    let mut h = Harness::with_config(GroupConfig {
        offsets: crate::config::OffsetsConfig {
            history_entries: 10,
            history_flush_ms: 100,
            ..config().offsets
        },
        ..config()
    });
    let (r, _) = h.commit("", None, -1, vec![commit_topic("t1", &[(0, 5, None)])]);
    assert_eq!(r.error_code, 0);
    assert!(
        !h.group.is_parkable(),
        "its history entry is not written yet"
    );
    h.advance(100);
    assert!(h.group.is_parkable());
}

#[test]
fn a_parkable_group_has_nothing_to_do_when_topics_change() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    h.leave(&[(&ids[0], None)]);
    let (r, _) = h.commit("", None, -1, vec![commit_topic("t1", &[(0, 5, None)])]);
    assert_eq!(r.error_code, 0);
    assert!(h.group.is_parkable());
    h.catalog.insert("t1".to_owned(), 12);
    let cx = Ctx {
        now: h.now,
        topics: &h.catalog,
    };
    let effects = h.group.topics_changed(cx, &strings(&["t1"]));
    assert!(effects.replies.is_empty() && effects.writes.is_empty() && effects.events.is_empty());
    assert!(effects.deadline.is_none() && effects.ledger.is_empty());
    assert!(effects.assignment.is_none());
    assert!(h.group.is_parkable());
}

/// Retention of 10 s and removal of abandoned groups 20 s after they went Empty.
fn retention() -> GroupConfig {
    GroupConfig {
        offsets_retention_ms: 10_000,
        empty_group_removal_ms: 20_000,
        ..config()
    }
}

/// What the store holds for the harness's group: its record if `recorded`, and `offsets`.
fn stored(h: &Harness, recorded: bool, offsets: Vec<OffsetWrite>) -> StoredParts {
    StoredParts {
        record: recorded.then(|| h.group.to_record()),
        offsets,
        journal: Vec::new(),
        history: Vec::new(),
        quarantine: Vec::new(),
    }
}

#[test]
fn a_group_of_simple_commits_read_back_expires_its_offsets_when_it_would_have() {
    let mut h = Harness::with_config(retention());
    h.advance(1_000);
    let (r, offsets) = h.commit("", None, -1, vec![commit_topic("t1", &[(0, 5, None)])]);
    assert_eq!(r.error_code, 0);
    assert!(h.group.is_parkable());
    let due = h.group.next_deadline().expect("retention's deadline");
    assert_eq!(due, 11_000, "the commit at 1 s expires 10 s later");
    // Woken 5 s later (say, by the same deadline armed early): the store has no record of
    // it, only its offset. Restored as at startup, it would be Empty since now, and its
    // offset would expire 10 s after the wake instead.
    h.advance(5_000);
    let at_startup: (Group<u32>, _) = Group::restore(
        GroupRecord::empty(GROUP.to_owned(), h.now),
        offsets.clone(),
        Arc::clone(&h.config),
        h.now,
    );
    assert_eq!(at_startup.0.next_deadline(), Some(h.now + 10_000));
    let (mut woken, counted): (Group<u32>, _) = Group::unpark(
        GROUP.to_owned(),
        stored(&h, false, offsets),
        h.group.state_since(),
        None,
        Arc::clone(&h.config),
        h.now,
    );
    assert!(counted.is_empty());
    assert!(woken.is_parkable());
    assert_eq!(woken.next_deadline(), Some(due));
    assert_eq!(woken.describe(h.now), h.group.describe(h.now));
    // At the deadline, the woken group expires the offset as the parked one would have.
    let cx = Ctx {
        now: due,
        topics: &h.catalog,
    };
    let effects = woken.tick(cx);
    let expired: Vec<_> = effects
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::BestEffort(batch) => Some(batch),
            _ => None,
        })
        .flatten()
        .filter_map(|m| match m {
            Mutation::DeleteOffsets { partitions, .. } => Some(partitions.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(expired, vec![vec![("t1".to_owned(), 0)]]);
}

#[test]
fn a_group_whose_members_left_reads_back_as_it_was() {
    let mut h = Harness::with_config(retention());
    let ids = h.form_group(2);
    let generation = h.generation();
    let (r, offsets) = h.commit(
        &ids[0],
        None,
        generation,
        vec![commit_topic("t1", &[(0, 9, None)])],
    );
    assert_eq!(r.error_code, 0);
    h.advance(2_000);
    h.leave(&[(&ids[0], None), (&ids[1], None)]);
    assert!(h.group.is_parkable());
    h.advance(3_000);
    let (woken, counted): (Group<u32>, _) = Group::unpark(
        GROUP.to_owned(),
        stored(&h, true, offsets),
        h.group.state_since(),
        Some(Arc::from("alice")),
        Arc::clone(&h.config),
        h.now,
    );
    assert!(counted.is_empty(), "no member to count");
    assert!(woken.is_parkable());
    assert_eq!(woken.generation(), h.group.generation());
    assert_eq!(woken.state_since(), h.group.state_since());
    assert_eq!(woken.describe(h.now), h.group.describe(h.now));
    // Its offset expires 10 s after the group went Empty (later than the commit).
    assert_eq!(woken.next_deadline(), h.group.next_deadline());
    assert_eq!(woken.next_deadline(), Some(h.group.state_since() + 10_000));
    // The creator the shell holds the unit of, which the record did not name.
    assert_eq!(woken.created_by().map(|p| &**p), Some("alice"));
}

#[test]
fn a_summary_gives_the_deadline_the_restored_group_would_have() {
    let config = Arc::new(GroupConfig {
        offsets: crate::config::OffsetsConfig {
            quarantine_ms: 7_000,
            ..retention().offsets
        },
        ..retention()
    });
    let now = 50_000;
    let written = |partition: i32, committed_at: Millis| OffsetWrite {
        topic: "t1".into(),
        partition,
        committed: crate::storage::records::CommittedOffset {
            offset: 1,
            metadata: None,
            commit_timestamp_ms: committed_at,
        },
    };
    let quarantined = |partition: i32, at: Millis| crate::storage::QuarantinedOffset {
        write: written(partition, at - 100),
        quarantined_at: at,
    };
    let mut cases = 0;
    // Empty since 30 s (a record) or since the load (none); offsets committed before or after
    // it went Empty, or none; a quarantine or none.
    for state_since in [Some(30_000), None] {
        for commits in [vec![], vec![20_000, 25_000], vec![40_000, 45_000]] {
            for quarantine in [vec![], vec![41_000, 44_000]] {
                let record = match state_since {
                    Some(at) => GroupRecord {
                        state_since_ms: at,
                        ..GroupRecord::empty(GROUP.to_owned(), 0)
                    },
                    None => GroupRecord::empty(GROUP.to_owned(), now),
                };
                let since = record.state_since_ms;
                let offsets = (0..).zip(&commits).map(|(p, &at)| written(p, at)).collect();
                let (mut group, _): (Group<u32>, _) =
                    Group::restore(record, offsets, Arc::clone(&config), now);
                let held = (10..)
                    .zip(&quarantine)
                    .map(|(p, &at)| quarantined(p, at))
                    .collect();
                group.restore_offset_records(Vec::new(), held);
                assert!(group.is_parkable());
                let summary = parked_deadline(
                    &config,
                    since,
                    commits.iter().copied().min(),
                    quarantine.iter().copied().min(),
                );
                assert_eq!(
                    summary,
                    group.next_deadline(),
                    "Empty since {since}, commits {commits:?}, quarantine {quarantine:?}"
                );
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 12);
}
