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

// ------------------------------------------------------------------ record writes in order

/// A LeaveGroup sent straight to the engine, its write left for the test to complete.
fn leave_held(h: &mut Harness, member_id: &str) -> (u32, Effects<u32>) {
    let token = h.next_token();
    let req = LeaveGroupRequest {
        group_id: GROUP.into(),
        members: vec![LeavingMember {
            member_id: member_id.to_owned(),
            group_instance_id: None,
            reason: None,
        }],
    };
    let cx = Ctx {
        now: h.now,
        topics: &h.catalog,
    };
    (token, h.group.leave(cx, req, token))
}

fn record_writes(effects: &Effects<u32>) -> Vec<&Vec<Mutation>> {
    effects
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::Record { batch, .. } => Some(batch),
            _ => None,
        })
        .collect()
}

/// While a record write is in flight, further changes build no record: their replies wait for
/// the next write, built once the first is done, from the state then (a burst of leaves of a
/// large group costs two records, not one each).
#[test]
fn changes_during_a_record_write_share_the_next_one_built_from_the_latest_state() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let (_, first) = leave_held(&mut h, &ids[0]);
    assert_eq!(record_writes(&first).len(), 1);
    let (t1, second) = leave_held(&mut h, &ids[1]);
    let (t2, third) = leave_held(&mut h, &ids[2]);
    for later in [&second, &third] {
        assert!(
            record_writes(later).is_empty(),
            "one record write at a time"
        );
        assert!(later.replies.is_empty(), "answered with the next write");
        assert!(
            later.changed_group(),
            "the shell still refreshes what it shows"
        );
    }
    let next = h.group.record_written(Ok(()));
    let writes = record_writes(&next);
    assert_eq!(writes.len(), 1);
    let Some(Mutation::PutGroup(record)) = writes[0].first() else {
        panic!("the next write carries the record: {:?}", writes[0]);
    };
    assert!(record.members.is_empty(), "built from the latest state");
    let answered: Vec<u32> = next
        .writes
        .iter()
        .flat_map(|w| match w {
            Write::Record { replies, .. } => replies.iter().map(|(t, _)| *t).collect(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(answered, vec![t1, t2]);
    assert!(h.group.record_write_in_flight());
    let done = h.group.record_written(Ok(()));
    assert!(done.writes.is_empty() && !h.group.record_write_in_flight());
}

/// A failed record write fails the replies owed to the next one too (they depend on its state).
#[test]
fn a_failed_record_write_fails_the_replies_owed_to_the_next() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let (_, _first) = leave_held(&mut h, &ids[0]);
    let (t, _second) = leave_held(&mut h, &ids[1]);
    let failed = h
        .group
        .record_written(Err(ErrorCode::CoordinatorNotAvailable));
    assert!(failed.writes.is_empty(), "nothing more is written");
    let [(token, Response::LeaveGroup(answer))] = failed.replies.as_slice() else {
        panic!("the owed reply is answered: {failed:?}");
    };
    assert_eq!(*token, t);
    assert_eq!(answer.error_code, code(ErrorCode::CoordinatorNotAvailable));
}

/// DeleteGroups is a record write in the group's order: one queued before it is written first,
/// and the deletion comes last (a record never lands after it and brings the group back).
#[test]
fn a_deletion_is_written_after_the_record_changes_before_it() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let (_, first) = leave_held(&mut h, &ids[0]);
    assert_eq!(record_writes(&first).len(), 1);
    let (_, _second) = leave_held(&mut h, &ids[1]);
    let deleted = h.group.delete(h.now).expect("an Empty group");
    assert!(
        record_writes(&deleted).is_empty(),
        "waits for the write in flight"
    );
    let next = h.group.record_written(Ok(()));
    let writes = record_writes(&next);
    assert!(
        matches!(writes.as_slice(), [batch] if matches!(batch.as_slice(), [Mutation::DeleteGroup { .. }])),
        "the deletion alone, last: {writes:?}"
    );
}
