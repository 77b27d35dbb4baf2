//! Whether a group may be parked (`park.rs`): only once nothing but its data is left.

use super::*;

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
