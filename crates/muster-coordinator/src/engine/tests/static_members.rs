//! Static membership: takeovers, fencing, and the vote (protocol §6.12).

use super::*;

// ------------------------------------------------------------------------ static membership

#[test]
fn static_follower_takeover_keeps_the_assignment_without_rebalance() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    assert_eq!(s2, format!("s2-{}", Uuid::from_u128(2)));
    let generation = h.generation();
    let before = h.described(&s2).assignment;
    assert!(!before.is_empty());

    let t = h.join("", Some("s2"), &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_ne!(r.member_id, s2);
    assert!(r.member_id.starts_with("s2-"));
    assert_eq!(r.generation_id, generation);
    assert_eq!(r.leader_id, s1);
    assert!(!r.skip_assignment);
    assert!(r.members.is_empty());
    assert_eq!(h.state(), GroupState::Stable);
    assert!(h.take_persist(), "the new member id must be durable");
    assert!(!h
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::RebalanceStarted { .. })));

    let new_id = r.member_id;
    let t = h.sync(&new_id, generation, Vec::new());
    let s = h.sync_reply(t);
    assert_eq!(s.error_code, 0);
    assert_eq!(s.partitions, before);

    // The old id is fenced with its instance id, unknown without.
    assert_eq!(
        h.heartbeat_static(&s2, "s2", generation),
        ErrorCode::FencedInstanceId
    );
    assert_eq!(h.heartbeat(&s2, generation), ErrorCode::UnknownMemberId);
    let t = h.join(&s2, Some("s2"), &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::FencedInstanceId)
    );
    let (c, _) = h.commit(
        &s2,
        Some("s2"),
        generation,
        vec![commit_topic("t1", &[(0, 1, None)])],
    );
    assert_eq!(c.error_code, code(ErrorCode::FencedInstanceId));
    assert_eq!(
        h.heartbeat_static(&new_id, "s2", generation),
        ErrorCode::None
    );
}

#[test]
fn static_leader_takeover_gets_skip_assignment_and_the_member_list() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    let generation = h.generation();
    let t = h.join("", Some("s1"), &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert!(r.skip_assignment);
    assert_ne!(r.member_id, s1);
    assert_eq!(r.leader_id, r.member_id);
    assert_eq!(r.generation_id, generation);
    let mut listed: Vec<String> = r.members.iter().map(|m| m.member_id.clone()).collect();
    listed.sort();
    let mut expected = vec![r.member_id.clone(), s2];
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.leader(), r.member_id);
}

#[test]
fn static_takeover_fences_a_held_join_at_once() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    let old = h.rejoin(&s2);
    assert!(h.is_answered(old), "unchanged follower: answered at once");
    h.take_replies();
    // s2's old id starts a rebalance (new topics) and is held until s1 rejoins.
    let held = h.rejoin_with(&s2, |r| r.topics = strings(&["t1", "t2"]));
    assert!(!h.is_answered(held));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    // The takeover fences the held join at once.
    let t = h.join("", Some("s2"), &["t1", "t2"], &["range"]);
    let fenced = h.join_reply(held);
    assert_eq!(fenced.error_code, code(ErrorCode::FencedInstanceId));
    assert_eq!(fenced.member_id, s2);
    assert!(
        !h.is_answered(t),
        "the new id waits at the barrier in its place"
    );
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.rejoin(&s1);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert!(r.member_id.starts_with("s2-") && r.member_id != s2);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

#[test]
fn static_takeover_fences_a_held_sync_and_rebalances_in_completing_rebalance() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    h.rejoin(&s1);
    h.rejoin(&s2);
    h.take_replies();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let generation = h.generation();
    let held = h.sync(&s2, generation, Vec::new());
    assert!(!h.is_answered(held));
    let t = h.join("", Some("s2"), &["t1"], &["range"]);
    assert_eq!(
        h.sync_reply(held).error_code,
        code(ErrorCode::FencedInstanceId)
    );
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(!h.is_answered(t), "the new id waits at the barrier");
    h.rejoin(&s1);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, generation + 1);
}

#[test]
fn static_takeover_that_changes_the_vote_rebalances() {
    let mut h = Harness::new();
    let (_s1, _s2) = static_pair_with(&mut h, &["range", "roundrobin"]);
    assert_eq!(h.group.assignor(), Some("range"));
    // Same assignors, other user data: the vote stands, no rebalance.
    let mut req = Harness::join_req("", Some("s2"), &["t1"], &["range", "roundrobin"]);
    req.assignors[0].user_data = b"changed".to_vec();
    let t = h.send_join(req);
    assert_eq!(h.join_reply(t).error_code, 0);
    assert_eq!(h.state(), GroupState::Stable);
    // Dropping "range" changes the vote: rebalance.
    let t = h.join("", Some("s2"), &["t1"], &["roundrobin"]);
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let answers = h.complete_rebalance();
    assert!(answers
        .values()
        .all(|r| r.assignor.as_deref() == Some("roundrobin")));
}

#[test]
fn static_takeover_with_incompatible_assignors_is_refused() {
    let mut h = Harness::new();
    let (_s1, s2) = static_pair(&mut h);
    let t = h.join("", Some("s2"), &["t1"], &["sticky"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::InconsistentGroupProtocol)
    );
    assert!(h.group.has_member(&s2), "the old id stays");
}
