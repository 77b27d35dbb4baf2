//! Heartbeat answers by state, and which requests refresh a session (protocol §6.9).

use super::*;

// -------------------------------------------------------------------------------- Heartbeat

#[test]
fn heartbeat_answers_by_state() {
    let mut h = Harness::new();
    assert_eq!(h.heartbeat("anyone", 0), ErrorCode::UnknownMemberId);
    let ids = h.form_group(2);
    let generation = h.generation();
    assert_eq!(h.heartbeat("ghost", generation), ErrorCode::UnknownMemberId);
    assert_eq!(h.heartbeat(&ids[0], generation), ErrorCode::None);
    assert_eq!(
        h.heartbeat(&ids[0], generation + 1),
        ErrorCode::IllegalGeneration
    );
    let leader = h.leader();
    h.rejoin(&leader);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(
        h.heartbeat(&ids[1], generation),
        ErrorCode::RebalanceInProgress
    );
    h.complete_rebalance();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    assert_eq!(h.heartbeat(&ids[1], generation + 1), ErrorCode::None);
    assert_eq!(
        h.heartbeat(&ids[1], generation),
        ErrorCode::IllegalGeneration
    );

    // Empty again: everyone is unknown.
    h.leave(&[(&ids[0], None), (&ids[1], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(
        h.heartbeat(&ids[0], h.generation()),
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn a_member_that_only_heartbeats_never_expires() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let generation = h.generation();
    for _ in 0..40 {
        h.advance(Millis::from(SESSION) - 1);
        assert_eq!(h.heartbeat(&ids[0], generation), ErrorCode::None);
    }
    assert_eq!(h.state(), GroupState::Stable);
    let last = h.now;
    h.tick_to(last + Millis::from(SESSION) - 1);
    assert!(h.group.has_member(&ids[0]));
    h.tick_to(last + Millis::from(SESSION));
    assert!(!h.group.has_member(&ids[0]));
}

#[test]
fn join_sync_and_commit_refresh_the_session() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let follower = h.followers(&ids)[0].clone();
    let leader = h.leader();
    let keep_leader = |h: &mut Harness| {
        assert_eq!(h.heartbeat(&leader, generation), ErrorCode::None);
    };
    let session = Millis::from(SESSION);

    // An OffsetCommit refreshes.
    h.advance(session - 1);
    keep_leader(&mut h);
    let (r, _) = h.commit(
        &follower,
        None,
        generation,
        vec![commit_topic("t1", &[(0, 1, None)])],
    );
    assert_eq!(r.error_code, 0);
    h.advance(session - 1);
    keep_leader(&mut h);
    assert!(h.group.has_member(&follower));

    // A SyncGroup refreshes.
    let t = h.sync(&follower, generation, Vec::new());
    assert_eq!(h.sync_reply(t).error_code, 0);
    h.advance(session - 1);
    keep_leader(&mut h);
    assert!(h.group.has_member(&follower));

    // An unchanged JoinGroup refreshes.
    let t = h.rejoin(&follower);
    assert_eq!(h.join_reply(t).generation_id, generation);
    h.advance(session - 1);
    keep_leader(&mut h);
    assert!(h.group.has_member(&follower));

    // A refused request whose member id checks out still counts as heard from.
    assert_eq!(
        h.heartbeat(&follower, generation + 5),
        ErrorCode::IllegalGeneration
    );
    h.advance(session - 1);
    keep_leader(&mut h);
    assert!(h.group.has_member(&follower));

    h.advance(1);
    assert!(!h.group.has_member(&follower));
}
