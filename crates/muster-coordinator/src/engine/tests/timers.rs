//! Time passing: session expiry and the new-member cap (protocol §6.10), and
//! offset retention with the removal of abandoned groups.

use super::*;

// --------------------------------------------------------------------------- session expiry

#[test]
fn session_expiry_removes_the_member_and_rebalances() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let leader = h.leader();
    let follower = h.followers(&ids)[0].clone();
    let start = h.now;
    h.advance(5_000);
    h.heartbeat(&leader, generation);
    h.tick_to(start + Millis::from(SESSION) - 1);
    assert!(h.group.has_member(&follower));
    h.tick_to(start + Millis::from(SESSION));
    assert!(!h.group.has_member(&follower));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let events = h.take_events();
    assert!(events.contains(&Event::MemberExpired {
        member_id: follower.clone(),
        last_heard_ms_ago: Millis::from(SESSION),
    }));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::RebalanceStarted {
            trigger: RebalanceTrigger::SessionExpiry,
            ..
        }
    )));
    assert_eq!(
        h.heartbeat(&leader, generation),
        ErrorCode::RebalanceInProgress
    );
}

#[test]
fn held_join_is_not_expired() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let leader = h.leader();
    let follower = h.followers(&ids)[0].clone();
    let start = h.now;
    // The leader's join is held for the whole rebalance timeout (3 x its session timeout);
    // the follower keeps heartbeating without rejoining.
    let t = h.rejoin(&leader);
    while h.now + 3_000 < start + Millis::from(REBALANCE) {
        h.advance(3_000);
        h.heartbeat(&follower, generation);
        assert!(h.group.has_member(&leader));
    }
    h.tick_to(start + Millis::from(REBALANCE));
    assert_eq!(h.join_reply(t).error_code, 0);
    assert!(h.group.has_member(&leader));
    assert!(!h.group.has_member(&follower));
}

#[test]
fn new_member_held_join_is_capped() {
    let mut h = Harness::new();
    // A static member with a long rebalance timeout that will not rejoin keeps the barrier open.
    let ts = h.send_join(JoinGroupRequest {
        session_timeout_ms: 900_000,
        rebalance_timeout_ms: 600_000,
        ..Harness::join_req("", Some("s1"), &["t1"], &["range"])
    });
    let s = h.join_reply(ts).member_id;
    h.sync_all();
    h.take_replies();
    assert_eq!(h.state(), GroupState::Stable);

    let n = h.member_id_required();
    let start = h.now;
    let tn = h.send_join(JoinGroupRequest {
        rebalance_timeout_ms: 600_000,
        ..Harness::join_req(&n, None, &["t1"], &["range"])
    });
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.tick_to(start + 299_999);
    assert!(!h.is_answered(tn));
    h.tick_to(start + 300_000);
    let r = h.join_reply(tn);
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    assert!(!h.group.has_member(&n));
    assert!(h.group.has_member(&s));
    assert!(h
        .take_events()
        .contains(&Event::NewMemberTimedOut { member_id: n }));
}

#[test]
fn offsets_expire_by_commit_time_and_state_since_tracks_empty() {
    let mut h = Harness::new();
    let _ = h.commit("", None, -1, vec![commit_topic("t1", &[(0, 1, None)])]);
    h.now = 100;
    let _ = h.commit("", None, -1, vec![commit_topic("t1", &[(1, 2, None)])]);
    let taken = |expired: Vec<crate::storage::OffsetWrite>| -> Vec<(String, i32)> {
        expired
            .into_iter()
            .map(|w| (w.topic.to_string(), w.partition))
            .collect()
    };
    assert_eq!(
        taken(h.group.expire_offsets(50)),
        vec![("t1".to_owned(), 0)]
    );
    assert!(h.group.has_offsets());
    assert_eq!(
        taken(h.group.expire_offsets(100)),
        vec![("t1".to_owned(), 1)]
    );
    assert!(!h.group.has_offsets());

    let ids = h.form_group(1);
    h.advance(700);
    h.leave(&[(&ids[0], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(
        h.group.state_since(),
        800,
        "retention counts from entering Empty"
    );
}

// ------------------------------------------------------------------------------ retention

fn retention_config() -> GroupConfig {
    GroupConfig {
        offsets_retention_ms: 1_000,
        empty_group_removal_ms: 500,
        ..config()
    }
}

impl Harness {
    /// A simple (generation -1) commit of `offset` to t1/`partition`, applied as durable.
    fn simple_commit(&mut self, partition: i32, offset: i64) {
        let (response, _) = self.commit(
            "",
            None,
            -1,
            vec![commit_topic("t1", &[(partition, offset, None)])],
        );
        assert_eq!(response.error_code, code(ErrorCode::None));
    }

    fn committed(&self) -> Vec<(String, i32, i64)> {
        let fetched = self.group.fetch_offsets(
            &OffsetFetchRequest {
                group_id: GROUP.to_owned(),
                topics: None,
            },
            &Access::open(),
        );
        fetched
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic;
                t.partitions
                    .into_iter()
                    .map(move |p| (topic.clone(), p.partition, p.offset))
            })
            .collect()
    }
}

#[test]
fn a_new_group_arms_its_retention_timer() {
    let h = Harness::with_config(retention_config());
    assert_eq!(
        h.armed,
        Some(500),
        "removal of an abandoned empty group is scheduled"
    );
}

#[test]
fn offsets_of_an_empty_group_expire_after_retention_then_the_group_goes() {
    let mut h = Harness::with_config(retention_config());
    h.simple_commit(0, 10);
    h.tick_to(999);
    assert_eq!(h.committed(), vec![("t1".to_owned(), 0, 10)]);
    assert!(h.expired.is_empty());
    assert!(h.group.next_deadline() <= Some(1_000));
    h.tick_to(1_000);
    assert!(h.committed().is_empty());
    assert_eq!(h.expired, vec![("t1".to_owned(), 0)]);
    assert_eq!(
        h.state(),
        GroupState::Dead,
        "an empty group with no offsets is removed"
    );
    assert!(h.take_persist(), "removal must be made durable");
    assert!(h.take_events().contains(&Event::GroupRemoved));
}

#[test]
fn offsets_do_not_expire_while_the_group_has_members() {
    let mut h = Harness::with_config(retention_config());
    h.simple_commit(0, 10);
    let members = h.form_group(1);
    h.tick_to(5_000);
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.committed().len(), 1, "a live group keeps its offsets");
    // The last member leaves: the retention clock starts now.
    h.leave(&[(members[0].as_str(), None)]);
    assert_eq!(h.state(), GroupState::Empty);
    let emptied = h.now;
    h.tick_to(emptied + 999);
    assert_eq!(h.committed().len(), 1);
    h.tick_to(emptied + 1_000);
    assert!(h.committed().is_empty());
}

#[test]
fn a_commit_while_empty_restarts_its_own_clock_and_pending_members_keep_the_group() {
    let mut h = Harness::with_config(retention_config());
    h.simple_commit(0, 1);
    h.now = 800;
    h.simple_commit(1, 2);
    h.tick_to(1_000);
    assert_eq!(h.committed(), vec![("t1".to_owned(), 1, 2)]);
    // A member id handed out (MEMBER_ID_REQUIRED) keeps the group alive while pending.
    let pending = h.member_id_required();
    h.tick_to(1_800);
    assert_eq!(
        h.committed(),
        vec![("t1".to_owned(), 1, 2)],
        "pending ids pause retention"
    );
    // The pending id expires with its session; then retention resumes.
    h.tick_to(h.now + u64::from(SESSION));
    assert!(!pending.is_empty());
    assert!(h.committed().is_empty());
    assert_eq!(h.state(), GroupState::Dead);
}
