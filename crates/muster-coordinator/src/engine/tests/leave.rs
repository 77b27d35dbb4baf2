//! LeaveGroup: per-member results and held requests of leaving members (protocol §6.11).

use super::*;

// ------------------------------------------------------------------------------- LeaveGroup

#[test]
fn leave_group_batch_has_per_member_results() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    h.join_static("s1");
    h.join_static("s2");
    let answers = h.complete_rebalance();
    assert_eq!(answers.len(), 4);
    h.sync_all();
    h.take_replies();
    let described = h.describe();
    let static_id = |instance: &str| {
        described
            .members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(instance))
            .expect("static member")
            .member_id
            .clone()
    };
    let s1 = static_id("s1");
    let s2 = static_id("s2");
    assert_eq!(h.state(), GroupState::Stable);
    let pending = h.member_id_required();
    h.take_persist();

    let r = h.leave(&[
        (&ids[0], None),
        ("ghost", None),
        (&ids[1], Some("s1")),
        ("", Some("s2")),
        (&pending, None),
        ("", Some("nobody")),
    ]);
    let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
    assert_eq!(
        codes,
        vec![
            0,
            code(ErrorCode::UnknownMemberId),
            code(ErrorCode::FencedInstanceId),
            0,
            0,
            code(ErrorCode::UnknownMemberId),
        ]
    );
    assert_eq!(r.members[3].group_instance_id.as_deref(), Some("s2"));
    assert_eq!(r.error_code, 0);
    assert!(!h.group.has_member(&ids[0]));
    assert!(!h.group.has_member(&s2));
    assert!(h.group.has_member(&ids[1]));
    assert!(h.group.has_member(&s1));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(h.take_persist());
    // The pending id is forgotten.
    let t = h.join(&pending, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, code(ErrorCode::UnknownMemberId));
}

#[test]
fn leave_answers_held_requests() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let leader = h.leader();
    let followers = h.followers(&ids);
    // A held join.
    let tj = h.rejoin(&leader);
    assert!(!h.is_answered(tj));
    h.leave(&[(&leader, None)]);
    assert_eq!(
        h.join_reply(tj).error_code,
        code(ErrorCode::UnknownMemberId)
    );
    // A held sync.
    h.complete_rebalance();
    let generation = h.generation();
    let new_leader = h.leader();
    let follower = followers
        .iter()
        .find(|f| **f != new_leader)
        .expect("two followers")
        .clone();
    let ts = h.sync(&follower, generation, Vec::new());
    assert!(!h.is_answered(ts));
    h.leave(&[(&follower, None)]);
    assert_eq!(
        h.sync_reply(ts).error_code,
        code(ErrorCode::UnknownMemberId)
    );
    assert_eq!(h.state(), GroupState::PreparingRebalance);
}
