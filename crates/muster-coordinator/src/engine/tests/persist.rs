//! The group record and restoring from it after a restart (protocol §6.17).

use super::*;

// ---------------------------------------------------------------------- record and restore

#[test]
fn restored_stable_group_carries_on() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let leader = h.leader();
    let before = h.describe();
    let (_, w) = h.commit(
        &ids[0],
        None,
        generation,
        vec![commit_topic("t1", &[(0, 9, None)])],
    );
    h.advance(5_000);
    h.restart(w);

    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.generation(), generation);
    assert_eq!(h.leader(), leader);
    assert_eq!(h.group.assignor(), Some("range"));
    let after = h.describe();
    assert_eq!(after.members.len(), 2);
    for (b, a) in before.members.iter().zip(&after.members) {
        assert_eq!(b.member_id, a.member_id);
        assert_eq!(b.assignment, a.assignment);
        assert_eq!(b.topics, a.topics);
        assert_eq!(a.last_seen_ms_ago, 0, "sessions start at load time");
    }
    for id in &ids {
        assert_eq!(h.heartbeat(id, generation), ErrorCode::None);
        let t = h.sync(id, generation, Vec::new());
        let r = h.sync_reply(t);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.partitions, h.described(id).assignment);
        assert!(!r.partitions.is_empty());
    }
    let f = h.group.fetch_offsets(
        &OffsetFetchRequest {
            group_id: GROUP.into(),
            topics: None,
        },
        &Access::open(),
    );
    assert_eq!(f.topics[0].partitions[0].offset, 9);
    // An unchanged follower rejoin is still answered from the current generation.
    let follower = h.followers(&ids)[0].clone();
    let t = h.rejoin(&follower);
    assert_eq!(h.join_reply(t).generation_id, generation);
}

#[test]
fn restored_mid_rebalance_group_is_preparing() {
    for completing in [false, true] {
        let mut h = Harness::new();
        let ids = h.form_group(2);
        let leader = h.leader();
        h.rejoin(&leader);
        if completing {
            h.complete_rebalance();
            assert_eq!(h.state(), GroupState::CompletingRebalance);
        } else {
            assert_eq!(h.state(), GroupState::PreparingRebalance);
        }
        let generation = h.generation();
        h.restart(Vec::new());
        assert_eq!(h.state(), GroupState::PreparingRebalance);
        assert_eq!(h.generation(), generation);
        assert_eq!(h.group.member_count(), 2);
        let answers = h.complete_rebalance();
        assert_eq!(answers.len(), 2);
        assert_eq!(h.generation(), generation + 1, "never reused");
        assert!(ids.iter().all(|id| answers.contains_key(id)));
    }
}

#[test]
fn restored_sessions_start_at_load_time() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    // Long silent before the crash: their sessions would have expired by now.
    h.now += 3 * Millis::from(SESSION);
    h.restart(Vec::new());
    let loaded = h.now;
    h.tick_to(loaded);
    h.tick_to(loaded + Millis::from(SESSION) - 1);
    assert!(ids.iter().all(|id| h.group.has_member(id)));
    assert_eq!(h.state(), GroupState::Stable);
    h.tick_to(loaded + Millis::from(SESSION));
    assert_eq!(h.group.member_count(), 0);
}

#[test]
fn record_carries_statics_and_subscriptions() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    let record = h.group.to_record();
    assert_eq!(record.state, GroupState::Stable);
    assert_eq!(record.leader.as_deref(), Some(s1.as_str()));
    let m2 = record
        .members
        .iter()
        .find(|m| m.member_id == s2)
        .expect("in the record");
    assert_eq!(m2.group_instance_id.as_deref(), Some("s2"));
    assert_eq!(m2.topics, strings(&["t1"]));
    assert_eq!(m2.rebalance_timeout_ms, REBALANCE);
    h.restart(Vec::new());
    // The static binding survives: a takeover still works, and the old id is fenced.
    let t = h.join("", Some("s2"), &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(
        h.heartbeat_static(&s2, "s2", h.generation()),
        ErrorCode::FencedInstanceId
    );
}

/// The leader field shares the leader member's id, also after a restart.
#[test]
fn restored_leader_shares_its_member_id() {
    let mut h = Harness::new();
    h.form_group(3);
    let record = h.group.to_record();
    let (restored, _): (Group<u32>, _) = Group::restore(record, Vec::new(), Arc::new(config()), 0);
    let leader = restored.leader.clone().expect("a leader");
    let member = restored
        .members
        .get(&*leader)
        .expect("the leader is a member");
    assert!(Arc::ptr_eq(&leader, &member.member_id));
    assert!(Arc::ptr_eq(
        &leader,
        restored.members.get_key_value(&*leader).expect("key").0
    ));
}
