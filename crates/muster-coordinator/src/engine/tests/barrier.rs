//! The join barrier: the initial rebalance delay, completing early or at the timeout,
//! laggards, generations, the assignor vote and the leader, and the half-way warning
//! (protocol §6.5, §6.6).

use super::*;

// -------------------------------------------------------------------- initial rebalance delay

#[test]
fn initial_delay_waits_even_when_everyone_joined() {
    let mut h = Harness::with_config(with_delay(3_000));
    let id = h.member_id_required();
    let t = h.join(&id, None, &["t1"], &["range"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(h.group.next_deadline(), Some(3_000));
    h.tick_to(2_999);
    assert!(!h.is_answered(t), "a plain timer: no early completion");
    h.tick_to(3_000);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader_id, id);
}

#[test]
fn initial_delay_extended_when_a_member_arrives_in_the_window() {
    let mut h = Harness::with_config(with_delay(3_000));
    let a = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range"]);
    h.tick_to(1_000);
    let b = h.member_id_required();
    h.tick_to(1_500);
    let tb = h.join(&b, None, &["t1"], &["range"]);
    h.tick_to(3_000);
    assert!(!h.is_answered(ta), "extended by another delay");
    assert_eq!(h.group.next_deadline(), Some(6_000));
    h.tick_to(5_999);
    assert!(!h.is_answered(ta));
    h.tick_to(6_000);
    let ra = h.join_reply(ta);
    let rb = h.join_reply(tb);
    assert_eq!((ra.error_code, rb.error_code), (0, 0));
    assert_eq!(ra.generation_id, 1);
    assert_eq!(ra.members.len() + rb.members.len(), 2);
}

#[test]
fn initial_delay_extended_by_member_id_required_but_completes_without_pending_ids() {
    let mut h = Harness::with_config(with_delay(3_000));
    let a = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range"]);
    h.tick_to(2_000);
    let b = h.member_id_required(); // never rejoins within the window
    h.tick_to(3_000);
    assert!(
        !h.is_answered(ta),
        "a MEMBER_ID_REQUIRED in the window extends it"
    );
    h.tick_to(6_000);
    let r = h.join_reply(ta);
    assert_eq!(
        r.error_code, 0,
        "the timer fired: no waiting for the pending id"
    );
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.members.len(), 1);
    // The pending id joins the next generation.
    let tb = h.join(&b, None, &["t1"], &["range"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.rejoin(&a);
    let rb = h.join_reply(tb);
    assert_eq!(rb.error_code, 0);
    assert_eq!(rb.generation_id, 2);
}

#[test]
fn initial_delay_not_extended_by_a_member_joining_again() {
    let mut h = Harness::with_config(with_delay(3_000));
    let a = h.member_id_required();
    let first = h.join(&a, None, &["t1"], &["range"]);
    h.tick_to(1_000);
    // The same member sends JoinGroup again: the held one is superseded, the window stays.
    let second = h.rejoin(&a);
    assert_eq!(
        h.join_reply(first).error_code,
        code(ErrorCode::RebalanceInProgress)
    );
    h.tick_to(3_000);
    let r = h.join_reply(second);
    assert_eq!((r.error_code, r.generation_id), (0, 1));
}

#[test]
fn initial_delay_never_runs_past_the_rebalance_timeout() {
    let mut h = Harness::with_config(with_delay(3_000));
    let a = h.member_id_required();
    let ta = h.send_join(JoinGroupRequest {
        rebalance_timeout_ms: 5_000,
        ..Harness::join_req(&a, None, &["t1"], &["range"])
    });
    // Newcomers keep arriving all the time.
    for t in [1_000, 2_000, 3_000, 3_500, 4_500] {
        h.tick_to(t);
        if t != 3_000 {
            h.member_id_required();
        }
    }
    h.tick_to(4_999);
    assert!(!h.is_answered(ta));
    h.tick_to(5_000);
    assert_eq!(h.join_reply(ta).error_code, 0);
}

#[test]
fn zero_initial_delay_completes_the_first_join_at_once() {
    let mut h = Harness::new();
    let a = h.member_id_required();
    let t = h.join(&a, None, &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, 1);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

// ---------------------------------------------------------------------------------- barrier

#[test]
fn barrier_completes_early_when_every_member_rejoined() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let generation = h.generation();
    let leader = h.leader();
    let followers = h.followers(&ids);
    let tl = h.rejoin(&leader);
    let t1 = h.rejoin(&followers[0]);
    assert!(!h.is_answered(tl) && !h.is_answered(t1));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let t2 = h.rejoin(&followers[1]);
    for t in [tl, t1, t2] {
        let r = h.join_reply(t);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.generation_id, generation + 1);
    }
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

#[test]
fn barrier_timeout_is_the_max_over_members_and_removes_dynamic_laggards() {
    let mut h = Harness::new();
    // The third member asks for a longer rebalance timeout than the others.
    let ids = h.form_group_with(3, |i, r| {
        if i == 2 {
            r.rebalance_timeout_ms = 40_000;
        }
    });
    let generation = h.generation();
    let leader = h.leader();
    assert_eq!(leader, ids[0], "the first member formed the group");
    let start = h.now;
    let tl = h.rejoin(&leader);
    let tb = h.rejoin(&ids[2]);
    // The laggard keeps its session alive but never rejoins.
    let laggard = ids[1].clone();
    while h.now < start + 39_000 {
        h.advance(3_000);
        assert_eq!(
            h.heartbeat(&laggard, generation),
            ErrorCode::RebalanceInProgress
        );
    }
    h.tick_to(start + 39_999);
    assert!(
        !h.is_answered(tl),
        "the barrier waits for the longest rebalance timeout"
    );
    h.tick_to(start + 40_000);
    let rl = h.join_reply(tl);
    let rb = h.join_reply(tb);
    assert_eq!((rl.error_code, rb.error_code), (0, 0));
    assert_eq!(rl.generation_id, generation + 1);
    assert_eq!(rl.members.len(), 2);
    assert!(!h.group.has_member(&laggard));
    assert!(h.take_events().contains(&Event::EvictedAtBarrier {
        member_ids: vec![laggard.clone()]
    }));
    assert_eq!(
        h.heartbeat(&laggard, generation),
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn static_member_missing_the_barrier_is_not_removed() {
    let mut h = Harness::new();
    let a = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(ta).generation_id, 1);
    let ts = h.join_static("s1");
    h.rejoin(&a);
    let s = h.join_reply(ts).member_id;
    h.sync_all();
    h.take_replies();
    assert_eq!(h.state(), GroupState::Stable);
    let generation = h.generation();

    let start = h.now;
    let ta = h.rejoin_with(&a, |r| r.topics = strings(&["t1", "t2"]));
    while h.now < start + Millis::from(REBALANCE) - 3_000 {
        h.advance(3_000);
        h.heartbeat_static(&s, "s1", generation);
    }
    h.tick_to(start + Millis::from(REBALANCE));
    let r = h.join_reply(ta);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, generation + 1);
    assert!(
        h.group.has_member(&s),
        "static members stay past a missed barrier"
    );
    assert_eq!(r.members.len(), 2, "and are in the leader's member list");
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // Only their session removes them.
    let last_heard = h.now - h.described(&s).last_seen_ms_ago;
    h.tick_to(last_heard + Millis::from(SESSION));
    assert!(!h.group.has_member(&s));
}

// ------------------------------------------------------------------------------- generations

#[test]
fn generation_moves_up_and_is_never_reset() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    assert!(generation >= 1);
    h.leave(&[(&ids[0], None)]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.leave(&[(&ids[1], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(
        h.generation(),
        generation + 1,
        "an empty rebalance still counts"
    );
    assert_eq!(h.group.leader(), None);

    let c = h.member_id_required();
    let t = h.join(&c, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).generation_id, generation + 2);
}

// ------------------------------------------------------------------------ assignor and leader

#[test]
fn assignor_vote_member_list_and_topics() {
    let mut h = Harness::with_config(with_delay(1_000));
    let a = h.member_id_required();
    let b = h.member_id_required();
    let c = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range", "roundrobin"]);
    let tb = h.join(&b, None, &["t2", "missing"], &["roundrobin", "range"]);
    let tc = h.join(&c, None, &["t1"], &["sticky", "roundrobin", "range"]);
    h.complete_rebalance_by_ticking();
    let answers: Vec<JoinGroupResponse> =
        [ta, tb, tc].into_iter().map(|t| h.join_reply(t)).collect();
    let leader = h.leader();
    assert_eq!(leader, a, "the first member is the leader");
    for r in &answers {
        assert_eq!(r.error_code, 0);
        // a votes range; b and c vote roundrobin (sticky is not supported by all).
        assert_eq!(r.assignor.as_deref(), Some("roundrobin"));
        assert_eq!(r.leader_id, leader);
    }
    let lr = &answers[0];
    let members: Vec<(String, Vec<u8>, Vec<String>)> = lr
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.user_data.clone(), m.topics.clone()))
        .collect();
    let mut expected = vec![
        (a.clone(), b"ud-roundrobin".to_vec(), strings(&["t1"])),
        (
            b.clone(),
            b"ud-roundrobin".to_vec(),
            strings(&["t2", "missing"]),
        ),
        (c.clone(), b"ud-roundrobin".to_vec(), strings(&["t1"])),
    ];
    expected.sort();
    let mut members = members;
    members.sort();
    assert_eq!(members, expected);
    assert_eq!(
        lr.topics,
        vec![
            TopicInfo {
                topic: "t1".into(),
                partitions: 6
            },
            TopicInfo {
                topic: "t2".into(),
                partitions: 2
            },
        ],
        "catalog entries of subscribed topics that exist"
    );
    for r in &answers[1..] {
        assert!(r.members.is_empty() && r.topics.is_empty());
        assert!(!r.skip_assignment);
    }
    assert_eq!(h.group.assignor(), Some("roundrobin"));
}

#[test]
fn assignor_vote_user_data_differs_per_member() {
    // The member list carries each member's own user data for the chosen assignor.
    let mut h = Harness::new();
    let a = h.member_id_required();
    let mut req = Harness::join_req(&a, None, &["t1"], &[]);
    req.assignors = vec![
        AssignorMetadata {
            name: "range".into(),
            user_data: vec![1],
        },
        AssignorMetadata {
            name: "roundrobin".into(),
            user_data: vec![2],
        },
    ];
    let t = h.send_join(req);
    let r = h.join_reply(t);
    assert_eq!(r.assignor.as_deref(), Some("range"));
    assert_eq!(r.members[0].user_data, vec![1]);
}

#[test]
fn leader_is_kept_when_it_rejoins() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let leader = h.leader();
    // Rejoin the followers first, the leader last.
    let followers = h.followers(&ids);
    h.rejoin_with(&followers[0], |r| r.topics = strings(&["t2"]));
    h.rejoin(&followers[1]);
    let t = h.rejoin(&leader);
    let r = h.join_reply(t);
    assert_eq!(r.leader_id, leader);
    assert_eq!(r.members.len(), 3);
}

#[test]
fn leader_is_replaced_when_it_does_not_rejoin() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let generation = h.generation();
    let leader = h.leader();
    let followers = h.followers(&ids);
    let start = h.now;
    let t0 = h.rejoin_with(&followers[0], |r| r.topics = strings(&["t2"]));
    let t1 = h.rejoin(&followers[1]);
    while h.now + 3_000 < start + Millis::from(REBALANCE) {
        h.advance(3_000);
        h.heartbeat(&leader, generation);
    }
    h.tick_to(start + Millis::from(REBALANCE));
    let r0 = h.join_reply(t0);
    let r1 = h.join_reply(t1);
    assert!(!h.group.has_member(&leader));
    assert!(followers.contains(&r0.leader_id));
    assert_eq!(r0.leader_id, r1.leader_id);
    let new_leader_answer = if r0.leader_id == r0.member_id {
        &r0
    } else {
        &r1
    };
    assert_eq!(new_leader_answer.members.len(), 2);
}

#[test]
fn a_barrier_past_half_its_timeout_names_who_it_waits_for() {
    let mut h = Harness::new();
    let members = h.form_group(2);
    // A third member joins: the barrier now waits for the two old members to rejoin.
    let newcomer = h.member_id_required();
    let _ = h.join(&newcomer, None, &["t1"], &["range"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let _ = h.rejoin(&members[0]);
    h.take_events();
    let generation = h.generation();
    // The laggard stays alive (heartbeats) but does not rejoin.
    let half = u64::from(REBALANCE) / 2;
    for _ in 0..2 {
        h.advance(half / 3);
        assert_eq!(
            h.heartbeat(&members[1], generation),
            ErrorCode::RebalanceInProgress
        );
    }
    h.tick_to(half - 1);
    assert!(!h
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::BarrierSlow { .. })));
    assert!(
        h.armed <= Some(half),
        "the half-way warning is on the timer"
    );
    h.tick_to(half);
    let slow: Vec<Event> = h
        .take_events()
        .into_iter()
        .filter(|e| matches!(e, Event::BarrierSlow { .. }))
        .collect();
    assert_eq!(
        slow,
        vec![Event::BarrierSlow {
            waiting_for: vec![members[1].clone()],
            elapsed_ms: u64::from(REBALANCE) / 2,
        }]
    );
}
