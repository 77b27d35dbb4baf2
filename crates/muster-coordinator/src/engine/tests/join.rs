//! JoinGroup: the checks in their order, pending ids (MEMBER_ID_REQUIRED), known members
//! rejoining a formed group, and the group size limit (protocol §6.3, §6.4, §6.7).

use super::*;

// -------------------------------------------------------------------------- JoinGroup checks

#[test]
fn join_refuses_session_timeout_outside_bounds() {
    let mut h = Harness::new();
    for timeout in [999, 1_000_001] {
        let t = h.send_join(JoinGroupRequest {
            session_timeout_ms: timeout,
            ..Harness::join_req("", None, &["t1"], &["range"])
        });
        let r = h.join_reply(t);
        assert_eq!(r.error_code, code(ErrorCode::InvalidSessionTimeout));
        assert_eq!(r.member_id, "");
    }
    // The bounds themselves are fine.
    for timeout in [1_000, 1_000_000] {
        let t = h.send_join(JoinGroupRequest {
            session_timeout_ms: timeout,
            ..Harness::join_req("", None, &["t1"], &["range"])
        });
        assert_eq!(
            h.join_reply(t).error_code,
            code(ErrorCode::MemberIdRequired)
        );
    }
    // Checked before the member id: an unknown id with a bad timeout hears about the timeout.
    let t = h.send_join(JoinGroupRequest {
        session_timeout_ms: 1,
        ..Harness::join_req("ghost", None, &["t1"], &["range"])
    });
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::InvalidSessionTimeout));
    assert_eq!(r.member_id, "ghost");
    assert_eq!(h.state(), GroupState::Empty);
}

#[test]
fn join_full_group_refused_before_assignor_check() {
    let mut h = Harness::with_config(GroupConfig {
        max_group_size: 2,
        ..config()
    });
    h.form_group(2);
    // Incompatible assignors, but the group is full: that is said first, and no id is given.
    let t = h.join("", None, &["t1"], &["sticky"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::GroupMaxSizeReached));
    assert_eq!(r.member_id, "");
    let t = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
    // A new static member is refused the same way.
    let t = h.join_static("s1");
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.group.member_count(), 2);
}

#[test]
fn join_without_common_assignor_is_inconsistent() {
    let mut h = Harness::new();
    // Empty assignors, even on an Empty group.
    let t = h.join("", None, &["t1"], &[]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
    assert_eq!(r.member_id, "", "refused before a member id is handed out");

    h.form_group(1);
    let t = h.join("", None, &["t1"], &["roundrobin"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
    assert_eq!(r.member_id, "");
    let t = h.join("", None, &["t1"], &[]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::InconsistentGroupProtocol)
    );
    // One assignor in common is enough.
    let t = h.join("", None, &["t1"], &["roundrobin", "range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::MemberIdRequired)
    );
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn join_with_empty_member_id_gets_member_id_required() {
    let mut h = Harness::new();
    let t = h.join("", None, &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
    assert_eq!(r.member_id, format!("client-{}", Uuid::from_u128(1)));
    assert_eq!(r.generation_id, -1);
    // Nothing else happened: the group is still Empty at generation 0.
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(h.generation(), 0);
    assert_eq!(h.group.member_count(), 0);
}

#[test]
fn join_with_unknown_member_id_is_refused() {
    let mut h = Harness::new();
    let t = h.join("ghost", None, &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    assert_eq!(r.member_id, "ghost");
    assert_eq!(h.state(), GroupState::Empty);

    h.form_group(1);
    let t = h.join("ghost", None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, code(ErrorCode::UnknownMemberId));
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn pending_id_with_bad_assignors_keeps_its_id() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let newcomer = h.member_id_required();

    let t = h.join(&newcomer, None, &["t1"], &["roundrobin"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
    assert_eq!(r.member_id, newcomer);
    assert_eq!(
        h.state(),
        GroupState::Stable,
        "a refusal starts no rebalance"
    );

    // Its id is still good: a compatible rejoin gets in.
    let t = h.join(&newcomer, None, &["t1"], &["range"]);
    assert!(!h.is_answered(t), "held at the barrier");
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.rejoin(&ids[0]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_id, newcomer);
    assert_eq!(h.group.member_count(), 2);
}

// ------------------------------------------------------------------------------- pending ids

#[test]
fn pending_id_expires_after_session_timeout() {
    let mut h = Harness::new();
    let id = h.member_id_required();
    assert_eq!(h.group.next_deadline(), Some(Millis::from(SESSION)));
    h.tick_to(Millis::from(SESSION) - 1);
    let early = h.member_id_required();
    h.tick_to(Millis::from(SESSION));
    let t = h.join(&id, None, &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    assert_eq!(h.state(), GroupState::Empty);
    // The id handed out later is still pending and may join.
    let t = h.join(&early, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, 0);
}

#[test]
fn pending_id_holds_ordinary_barrier_until_it_rejoins() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let pending = h.member_id_required();
    // The leader rejoining starts a rebalance; it would complete at once but for the pending id.
    let t = h.rejoin(&ids[0]);
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let t2 = h.join(&pending, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, 0);
    assert_eq!(h.join_reply(t2).error_code, 0);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    assert_eq!(h.group.member_count(), 2);
}

#[test]
fn pending_id_holds_ordinary_barrier_until_it_expires() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    h.advance(1_000);
    let _pending = h.member_id_required();
    let expires = h.now + Millis::from(SESSION);
    let t = h.rejoin(&ids[0]);
    h.tick_to(expires - 1);
    assert!(!h.is_answered(t));
    h.tick_to(expires);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.members.len(), 1);
    assert!(
        expires < Millis::from(REBALANCE),
        "completed before the rebalance timeout"
    );
}

#[test]
fn pending_id_holds_ordinary_barrier_until_it_leaves() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let pending = h.member_id_required();
    let t = h.rejoin(&ids[0]);
    assert!(!h.is_answered(t));
    let left = h.leave(&[(&pending, None)]);
    assert_eq!(left.members[0].error_code, 0);
    assert_eq!(h.join_reply(t).error_code, 0);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

// ------------------------------------------------------------------- rejoining a formed group

#[test]
fn unchanged_follower_rejoin_in_stable_gets_the_current_generation() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let follower = h.followers(&ids)[0].clone();
    let t = h.rejoin(&follower);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, generation);
    assert_eq!(r.leader_id, h.leader());
    assert!(r.members.is_empty());
    assert_eq!(h.state(), GroupState::Stable);
    // Its SyncGroup gets the assignment it had.
    let t = h.sync(&follower, generation, Vec::new());
    let s = h.sync_reply(t);
    assert_eq!(s.error_code, 0);
    assert_eq!(s.partitions.len(), 1);
}

#[test]
fn leader_rejoin_in_stable_triggers_a_rebalance() {
    let mut h = Harness::new();
    h.form_group(2);
    let leader = h.leader();
    let t = h.rejoin(&leader);
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        Event::RebalanceStarted {
            trigger: RebalanceTrigger::MetadataChange,
            ..
        }
    )));
}

#[test]
fn changed_topics_trigger_a_rebalance() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let follower = h.followers(&ids)[0].clone();
    let t = h.rejoin_with(&follower, |r| r.topics = strings(&["t1", "t2"]));
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let answers = h.complete_rebalance();
    assert_eq!(answers[&follower].generation_id, h.generation());
    let leader = h.leader();
    let subscribed: Vec<String> = answers[&leader]
        .members
        .iter()
        .find(|m| m.member_id == follower)
        .expect("listed")
        .topics
        .clone();
    assert_eq!(subscribed, strings(&["t1", "t2"]));
}

#[test]
fn changed_assignors_trigger_a_rebalance() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let follower = h.followers(&ids)[0].clone();
    h.rejoin_with(&follower, |r| {
        r.assignors = assignors(&["roundrobin", "range"])
    });
    assert_eq!(h.state(), GroupState::PreparingRebalance);
}

#[test]
fn unchanged_member_in_completing_rebalance_gets_the_current_generation() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let leader = h.leader();
    let follower = h.followers(&ids)[0].clone();
    h.rejoin(&leader);
    h.rejoin(&follower);
    h.take_replies();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let generation = h.generation();

    let t = h.rejoin(&follower);
    let r = h.join_reply(t);
    assert_eq!((r.error_code, r.generation_id), (0, generation));
    assert!(r.members.is_empty());
    // The leader too, and it gets the member list again.
    let t = h.rejoin(&leader);
    let r = h.join_reply(t);
    assert_eq!((r.error_code, r.generation_id), (0, generation));
    assert_eq!(r.members.len(), 2);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // A changed member starts a new rebalance.
    h.rejoin_with(&follower, |r| r.topics = strings(&["t2"]));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
}

// ------------------------------------------------------------------------- group size limit

#[test]
fn max_size_counts_members_or_awaiting_members_by_state() {
    let mut h = Harness::with_config(GroupConfig {
        max_group_size: 2,
        ..config()
    });
    // Pending ids count (as in Kafka): two fill an Empty group of two.
    let a = h.member_id_required();
    let b = h.member_id_required();
    let tx = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(tx).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
    let ta = h.join(&a, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(ta).error_code, 0);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // CompletingRebalance: one member and b's pending id: full for newcomers, but b may join.
    let tx = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(tx).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
    let tb = h.join(&b, None, &["t1"], &["range"]);
    assert!(!h.is_answered(tb));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    // PreparingRebalance counts members waiting at the barrier: b only (a has not rejoined).
    let td = h.join("", None, &["t1"], &["range"]);
    let d = h.join_reply(td);
    assert_eq!(d.error_code, code(ErrorCode::MemberIdRequired));
    h.rejoin(&a);
    // Now two are waiting (the barrier still waits for the pending id d).
    let te = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(te).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
    let tc = h.join(&d.member_id, None, &["t1"], &["range"]);
    let rc = h.join_reply(tc);
    assert_eq!(rc.error_code, code(ErrorCode::GroupMaxSizeReached));
    assert_eq!(rc.member_id, d.member_id);
    assert_eq!(h.group.member_count(), 2);
}

#[test]
fn max_size_in_stable_counts_members() {
    let mut h = Harness::with_config(GroupConfig {
        max_group_size: 3,
        ..config()
    });
    h.form_group(2);
    let p = h.member_id_required();
    let t = h.join(&p, None, &["t1"], &["range"]);
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.complete_rebalance();
    h.sync_all();
    assert_eq!(h.group.member_count(), 3);
    let t = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
}
