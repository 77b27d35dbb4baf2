//! SyncGroup: refusals, held syncs until the leader assigns, and members that never sync
//! (protocol §6.8).

use super::*;

// -------------------------------------------------------------------------------- SyncGroup

#[test]
fn sync_refusals() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let t = h.sync("ghost", generation, Vec::new());
    assert_eq!(h.sync_reply(t).error_code, code(ErrorCode::UnknownMemberId));
    let t = h.sync(&ids[0], generation + 1, Vec::new());
    assert_eq!(
        h.sync_reply(t).error_code,
        code(ErrorCode::IllegalGeneration)
    );
    let t = h.sync(&ids[0], generation - 1, Vec::new());
    assert_eq!(
        h.sync_reply(t).error_code,
        code(ErrorCode::IllegalGeneration)
    );
    // Unknown member is said before a wrong generation.
    let t = h.sync("ghost", generation + 7, Vec::new());
    assert_eq!(h.sync_reply(t).error_code, code(ErrorCode::UnknownMemberId));

    let leader = h.leader();
    h.rejoin(&leader);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let t = h.sync(&ids[1], generation, Vec::new());
    assert_eq!(
        h.sync_reply(t).error_code,
        code(ErrorCode::RebalanceInProgress)
    );
}

#[test]
fn sync_holds_followers_until_the_leader_assigns() {
    let mut h = Harness::new();
    let ids = h.join_all(3);
    let generation = h.generation();
    let leader = h.leader();
    let followers = h.followers(&ids);
    h.take_persist();

    let tf = h.sync(&followers[0], generation, Vec::new());
    assert!(!h.is_answered(tf), "held until the leader's assignment");
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    assert!(!h.take_persist());

    // The leader leaves followers[1] out.
    let tl = h.sync(
        &leader,
        generation,
        vec![
            assign(&leader, vec![tp("t1", &[0, 1, 2])]),
            assign(&followers[0], vec![tp("t1", &[3, 4, 5])]),
            assign("not-a-member", vec![tp("t2", &[0])]),
        ],
    );
    assert_eq!(h.state(), GroupState::Stable);
    assert!(
        h.take_persist(),
        "the assignment must be durable before the answers"
    );
    let rl = h.sync_reply(tl);
    let rf = h.sync_reply(tf);
    assert_eq!(rl.error_code, 0);
    assert_eq!(rl.partitions, vec![tp("t1", &[0, 1, 2])]);
    assert_eq!(rl.assignor.as_deref(), Some("range"));
    assert_eq!(rf.partitions, vec![tp("t1", &[3, 4, 5])]);
    assert_eq!(rf.user_data, followers[0].as_bytes());

    // A follower syncing after Stable is answered at once.
    let t = h.sync(&followers[1], generation, Vec::new());
    let r = h.sync_reply(t);
    assert_eq!(r.error_code, 0);
    assert!(r.partitions.is_empty(), "left out: empty assignment");
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn sync_with_another_assignor_is_inconsistent() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let generation = h.generation();
    let t = h.send_sync(SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: ids[0].clone(),
        group_instance_id: None,
        assignor: Some("roundrobin".into()),
        assignments: Vec::new(),
    });
    assert_eq!(
        h.sync_reply(t).error_code,
        code(ErrorCode::InconsistentGroupProtocol)
    );
}

#[test]
fn leader_that_never_syncs_is_removed_and_the_group_rebalances() {
    let mut h = Harness::new();
    let ids = h.join_all(3);
    let generation = h.generation();
    let completed_at = h.now;
    let leader = h.leader();
    let followers = h.followers(&ids);
    let held: Vec<u32> = followers
        .iter()
        .map(|f| h.sync(f, generation, Vec::new()))
        .collect();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // Sessions are shorter than the rebalance timeout; held members do not expire meanwhile.
    // The leader is alive (it heartbeats) but never sends SyncGroup.
    while h.now + 3_000 < completed_at + Millis::from(REBALANCE) {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&leader, generation), ErrorCode::None);
    }
    h.tick_to(completed_at + Millis::from(REBALANCE) - 1);
    assert!(held.iter().all(|t| !h.is_answered(*t)));
    assert_eq!(h.group.member_count(), 3);
    h.tick_to(completed_at + Millis::from(REBALANCE));
    assert!(!h.group.has_member(&leader));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    for t in held {
        assert_eq!(
            h.sync_reply(t).error_code,
            code(ErrorCode::RebalanceInProgress)
        );
    }
    assert!(h.take_events().contains(&Event::EvictedAtSync {
        member_ids: vec![leader.clone()]
    }));
    // The followers were heard from while held: their sessions run from the answer.
    assert!(h.group.next_deadline().is_some_and(|d| d > h.now));
    h.tick_to(h.now);
    assert!(followers.iter().all(|f| h.group.has_member(f)));
    // They rejoin and form the next generation without the old leader.
    let answers = h.complete_rebalance();
    assert_eq!(answers.len(), 2);
    assert!(followers.contains(&h.leader()));
    assert_eq!(h.generation(), generation + 1);
}

#[test]
fn last_member_evicted_at_sync_empties_the_group_in_the_same_tick() {
    let mut h = Harness::new();
    let a = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(ta).generation_id, 1);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // A pending id that outlives the sync window.
    let tp = h.send_join(JoinGroupRequest {
        session_timeout_ms: 100_000,
        ..Harness::join_req("", None, &["t1"], &["range"])
    });
    let pending_expiry = h.now + 100_000;
    assert_eq!(
        h.join_reply(tp).error_code,
        code(ErrorCode::MemberIdRequired)
    );
    // The only member heartbeats but never syncs.
    while h.now + 3_000 < Millis::from(REBALANCE) {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&a, 1), ErrorCode::None);
    }
    h.tick_to(Millis::from(REBALANCE));
    assert!(!h.group.has_member(&a));
    // The rebalance that eviction started has no members (timeout 0): it closes in this tick.
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(h.generation(), 2);
    assert_eq!(h.group.next_deadline(), Some(pending_expiry));
}

#[test]
fn follower_that_never_syncs_is_removed_after_the_rebalance_timeout() {
    let mut h = Harness::new();
    let ids = h.join_all(2);
    let generation = h.generation();
    let leader = h.leader();
    let follower = h.followers(&ids)[0].clone();
    let start = h.now;
    h.sync(
        &leader,
        generation,
        vec![assign(&leader, vec![tp("t1", &[0])])],
    );
    assert_eq!(h.state(), GroupState::Stable);
    // The follower heartbeats but never syncs.
    while h.now + 3_000 < start + Millis::from(REBALANCE) {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&follower, generation), ErrorCode::None);
        assert_eq!(h.heartbeat(&leader, generation), ErrorCode::None);
    }
    h.tick_to(start + Millis::from(REBALANCE));
    assert!(!h.group.has_member(&follower));
    assert!(h.group.has_member(&leader));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
}
