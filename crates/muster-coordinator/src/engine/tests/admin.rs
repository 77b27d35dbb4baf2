//! DescribeGroups, DeleteGroups, topic changes, and answering held requests at shutdown
//! (protocol §6.15, §6.16).

use super::*;

// -------------------------------------------------------------------------- DescribeGroups

#[test]
fn describe_names_the_members_a_rebalance_waits_for() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let generation = h.generation();
    let leader = h.leader();
    let followers = h.followers(&ids);
    let d = h.describe();
    assert_eq!(d.state, "Stable");
    assert!(d.members.iter().all(|m| !m.holding_rebalance));
    assert_eq!(d.leader_id, leader);
    assert_eq!(d.generation_id, generation);
    assert_eq!(d.members[0].client_id, "client");
    assert_eq!(d.members[0].client_host, "/10.0.0.1");
    assert_eq!(d.members[0].session_timeout_ms, SESSION);

    h.advance(1_000);
    h.rejoin(&leader);
    h.advance(500);
    h.heartbeat(&followers[0], generation);
    h.advance(250);
    let d = h.describe();
    assert_eq!(d.state, "PreparingRebalance");
    let m = |id: &str| {
        d.members
            .iter()
            .find(|m| m.member_id == id)
            .expect("member")
    };
    assert!(!m(&leader).holding_rebalance);
    assert_eq!(
        m(&leader).last_seen_ms_ago,
        0,
        "held: heard from while waiting"
    );
    assert!(m(&followers[0]).holding_rebalance);
    assert_eq!(m(&followers[0]).last_seen_ms_ago, 250);
    assert!(m(&followers[1]).holding_rebalance);
    assert_eq!(m(&followers[1]).last_seen_ms_ago, 1_750);

    h.rejoin(&followers[0]);
    h.rejoin(&followers[1]);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let t = h.sync(&followers[0], generation + 1, Vec::new());
    assert!(!h.is_answered(t));
    h.advance(100);
    let d = h.describe();
    let m = |id: &str| {
        d.members
            .iter()
            .find(|m| m.member_id == id)
            .expect("member")
    };
    assert!(m(&leader).holding_rebalance, "has not synced");
    assert_eq!(m(&leader).last_seen_ms_ago, 100);
    assert!(!m(&followers[0]).holding_rebalance, "synced, held");
    assert_eq!(m(&followers[0]).last_seen_ms_ago, 0);
    assert!(m(&followers[1]).holding_rebalance);
}

// ------------------------------------------------------------------------- delete and topics

#[test]
fn delete_only_an_empty_group() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    assert_eq!(h.delete(), ErrorCode::NonEmptyGroup);
    assert_eq!(h.state(), GroupState::Stable);
    h.leave(&[(&ids[0], None)]);
    let _ = h.commit("", None, -1, vec![commit_topic("t1", &[(0, 1, None)])]);
    assert_eq!(h.delete(), ErrorCode::None);
    assert_eq!(h.state(), GroupState::Dead);
    assert!(!h.group.has_offsets());
    assert_eq!(h.delete(), ErrorCode::GroupIdNotFound);
}

#[test]
fn topic_change_rebalances_subscribed_groups_only() {
    let mut h = Harness::new();
    h.form_group(2);
    h.topics_changed(&["t2", "other"]);
    assert_eq!(h.state(), GroupState::Stable, "not subscribed");
    h.topics_changed(&["t1"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        Event::RebalanceStarted {
            trigger: RebalanceTrigger::TopicChange,
            ..
        }
    )));
}

// ------------------------------------------------------------------ helpers for the actors

#[test]
fn abort_held_answers_every_held_request() {
    let unavailable = code(ErrorCode::CoordinatorNotAvailable);
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let leader = h.leader();
    let followers = h.followers(&ids);
    // Held JoinGroups (PreparingRebalance).
    let tl = h.rejoin(&leader);
    let tf = h.rejoin(&followers[0]);
    assert!(!h.is_answered(tl) && !h.is_answered(tf));
    let effects = h.group.abort_held(ErrorCode::CoordinatorNotAvailable);
    assert!(
        effects.writes.is_empty(),
        "aborting changes nothing durable"
    );
    h.collect(effects);
    for (t, id) in [(tl, &leader), (tf, &followers[0])] {
        let r = h.join_reply(t);
        assert_eq!(
            (r.error_code, r.member_id.as_str()),
            (unavailable, id.as_str())
        );
    }
    assert_eq!(h.group.num_awaiting_join, 0);
    assert_eq!(h.state(), GroupState::PreparingRebalance);

    // Held SyncGroups (CompletingRebalance).
    h.complete_rebalance();
    let generation = h.generation();
    let new_leader = h.leader();
    let held: Vec<u32> = h
        .describe()
        .members
        .iter()
        .filter(|m| m.member_id != new_leader)
        .map(|m| m.member_id.clone())
        .collect::<Vec<_>>()
        .iter()
        .map(|id| h.sync(id, generation, Vec::new()))
        .collect();
    assert_eq!(held.len(), 2);
    assert!(held.iter().all(|t| !h.is_answered(*t)));
    let effects = h.group.abort_held(ErrorCode::CoordinatorNotAvailable);
    assert!(
        effects.writes.is_empty(),
        "aborting changes nothing durable"
    );
    h.collect(effects);
    for t in held {
        assert_eq!(h.sync_reply(t).error_code, unavailable);
    }
}
