//! The consumer-protocol group engine (`heartbeat.rs`, `leave.rs`, `target.rs`, `expiry.rs`,
//! `topics.rs`, `offsets.rs`, `persist.rs`), each case named after the Kafka 4
//! `GroupMetadataManagerTest` case it follows.

use std::collections::BTreeSet;

use muster_protocol::{ConsumerGroupHeartbeatRequest, ErrorCode};

use super::harness::{code, count, set, tp, Cg, REBALANCE, SESSION};
use crate::engine::{Event, Group, GroupState};

/// Kafka: testConsumerHeartbeatRequestValidation.
#[test]
fn consumer_heartbeat_request_validation() {
    let mut cg = Cg::new();
    // Joining needs a rebalance timeout and a subscription.
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        rebalance_timeout_ms: -1,
        ..Cg::join_request("m", &["foo"])
    });
    assert_eq!(r.error_code, code(ErrorCode::InvalidRequest));
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        subscribed_topics: None,
        ..Cg::join_request("m", &["foo"])
    });
    assert_eq!(r.error_code, code(ErrorCode::InvalidRequest));
    // Owned partitions must be empty when joining.
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        owned_partitions: Some(vec![tp("foo", &[0])]),
        ..Cg::join_request("m", &["foo"])
    });
    assert_eq!(r.error_code, code(ErrorCode::InvalidRequest));
    // An epoch other than 0 needs a member id; -2 needs an instance id; nothing below -2.
    let r = cg.send(Cg::request("", 3));
    assert_eq!(r.error_code, code(ErrorCode::InvalidRequest));
    let r = cg.send(Cg::request("m", -2));
    assert_eq!(r.error_code, code(ErrorCode::InvalidRequest));
    let r = cg.send(Cg::request("m", -3));
    assert_eq!(r.error_code, code(ErrorCode::InvalidRequest));
    // Member ids are at most 64 bytes.
    let r = cg.send(Cg::join_request(&"m".repeat(65), &["foo"]));
    assert_eq!(r.error_code, code(ErrorCode::InvalidRequest));
    // An unknown assignor, a regex that does not compile.
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        server_assignor: Some("sticky".into()),
        ..Cg::join_request("m", &["foo"])
    });
    assert_eq!(r.error_code, code(ErrorCode::UnsupportedAssignor));
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        subscribed_topic_regex: Some("foo(".into()),
        ..Cg::join_request("m", &["foo"])
    });
    assert_eq!(r.error_code, code(ErrorCode::InvalidRequest));
    assert!(r.error_message.is_some());
    // None of it made a member.
    assert_eq!(cg.group.member_count(), 0);
}

/// Kafka: testMemberIdGeneration.
#[test]
fn member_id_generation() {
    let mut cg = Cg::new();
    let r = cg.join("", &["foo"]);
    assert_eq!(r.member_id.len(), 36, "a UUID: {r:?}");
    assert_eq!(r.member_epoch, 1);
}

/// Kafka: testUnknownMemberIdJoinsConsumerGroup / testMemberEpochValidation (unknown member).
#[test]
fn unknown_member_id_is_refused() {
    let mut cg = Cg::new();
    cg.join("a", &["foo"]);
    let r = cg.beat("nobody", 1, &[]);
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
}

/// Kafka: testMemberJoinsEmptyConsumerGroup.
#[test]
fn member_joins_empty_consumer_group() {
    let mut cg = Cg::new();
    let r = cg.join("a", &["foo", "bar"]);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.heartbeat_interval_ms, 5_000);
    let assigned = r.assignment.expect("the whole assignment on join");
    assert_eq!(
        set(&assigned),
        set(&[tp("bar", &[0, 1, 2]), tp("foo", &[0, 1, 2, 3, 4, 5])])
    );
    assert_eq!(cg.group.generation(), 1);
    assert_eq!(cg.group.state(), GroupState::Stable);
    assert!(cg.group.is_consumer_group());
    assert!(cg
        .events
        .iter()
        .any(|e| matches!(e, Event::TargetAssigned { epoch: 1, .. })));
}

/// Kafka: testConsumerGroupMemberEpochValidation.
#[test]
fn consumer_group_member_epoch_validation() {
    let mut cg = Cg::new();
    let a = cg.join("a", &["foo"]).assignment.unwrap_or_default();
    // Ahead of the member's epoch: fenced.
    assert_eq!(
        cg.beat("a", 2, &a).error_code,
        code(ErrorCode::FencedMemberEpoch)
    );
    // A second member moves the group to epoch 2; a reaches it once it gave up its share.
    cg.join("b", &["foo"]);
    let r = cg.beat("a", 1, &a);
    assert_eq!(r.member_epoch, 1, "revoking at its epoch first: {r:?}");
    let kept = r.assignment.unwrap_or_default();
    let r = cg.beat("a", 1, &kept);
    assert_eq!(r.member_epoch, 2);
    // The answer with epoch 2 was lost: epoch 1 (its previous one) with a subset of what it
    // owns is accepted...
    assert_eq!(cg.beat("a", 1, &kept).error_code, 0);
    // ...but not with partitions it does not own, nor an older epoch.
    assert_eq!(
        cg.beat("a", 1, &[tp("foo", &[0, 1, 2, 3, 4, 5])])
            .error_code,
        code(ErrorCode::FencedMemberEpoch)
    );
    // Epoch 0 with its member id is a rejoin (after being fenced): the member gets what the
    // group holds for it, with its current epoch.
    let r = cg.send(Cg::join_request("a", &["foo"]));
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(set(&r.assignment.unwrap_or_default()), set(&kept));
}

/// Kafka: testNewJoiningMemberTriggersNewTargetAssignment — revocation before assignment: the
/// newcomer gets a partition only once its previous owner stopped reporting it, and no
/// partition ever has two owners.
#[test]
fn new_joining_member_triggers_new_target_assignment() {
    let mut cg = Cg::new();
    let mut a_owned = cg.join("a", &["foo", "bar"]).assignment.unwrap_or_default();
    let mut a_epoch = 1;
    let b = cg.join("b", &["foo", "bar"]);
    assert_eq!(b.member_epoch, 2);
    let mut b_owned = b.assignment.unwrap_or_default();
    assert!(b_owned.is_empty(), "everything is still a's: {b_owned:?}");
    let mut b_epoch = 2;
    let disjoint = |x: &[muster_protocol::TopicPartitions],
                    y: &[muster_protocol::TopicPartitions]| {
        let x = set(x);
        let y = set(y);
        x.iter()
            .all(|(t, ps)| y.get(t).is_none_or(|qs| ps.is_disjoint(qs)))
    };
    // a revokes first (stays at epoch 1), then moves to epoch 2.
    cg.step("a", &mut a_epoch, &mut a_owned);
    assert_eq!(a_epoch, 1);
    assert_eq!(count(&a_owned), 5, "a keeps its share only: {a_owned:?}");
    assert_eq!(cg.group.state(), GroupState::Reconciling);
    // b cannot have them yet: a has not confirmed.
    cg.step("b", &mut b_epoch, &mut b_owned);
    assert!(disjoint(&a_owned, &b_owned));
    cg.step("a", &mut a_epoch, &mut a_owned);
    assert_eq!(a_epoch, 2);
    cg.step("b", &mut b_epoch, &mut b_owned);
    assert_eq!(count(&b_owned), 4);
    assert!(disjoint(&a_owned, &b_owned));
    assert_eq!(cg.group.state(), GroupState::Stable);
}

/// Kafka: testLeavingMemberBumpsGroupEpoch.
#[test]
fn leaving_member_bumps_group_epoch() {
    let mut cg = Cg::new();
    cg.join("a", &["foo"]);
    cg.join("b", &["foo"]);
    let r = cg.send(Cg::request("b", -1));
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    assert_eq!(cg.group.generation(), 3);
    assert_eq!(cg.group.member_count(), 1);
    // Everything is a's again at epoch 3.
    let r = cg.beat("a", 1, &[tp("foo", &[0, 1, 2, 3, 4, 5])]);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(count(&r.assignment.unwrap_or_default()), 6);
    // The last one leaving empties the group.
    let r = cg.send(Cg::request("a", -1));
    assert_eq!(r.error_code, 0);
    assert_eq!(cg.group.state(), GroupState::Empty);
    assert_eq!(cg.group.generation(), 4);
    // Leaving twice: unknown.
    assert_eq!(
        cg.send(Cg::request("a", -1)).error_code,
        code(ErrorCode::UnknownMemberId)
    );
}

/// Kafka: testUpdatingSubscriptionTriggersNewTargetAssignment.
#[test]
fn updating_subscription_triggers_new_target_assignment() {
    let mut cg = Cg::new();
    let owned = cg.join("a", &["foo"]).assignment.unwrap_or_default();
    assert_eq!(count(&owned), 6);
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        subscribed_topics: Some(vec!["foo".into(), "bar".into()]),
        owned_partitions: Some(owned),
        ..Cg::request("a", 1)
    });
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(&r.assignment.unwrap_or_default()), 9);
    // Unsubscribing from foo: its partitions are revoked first.
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        subscribed_topics: Some(vec!["bar".into()]),
        owned_partitions: Some(vec![tp("foo", &[0, 1, 2, 3, 4, 5]), tp("bar", &[0, 1, 2])]),
        ..Cg::request("a", 2)
    });
    assert_eq!(r.member_epoch, 2, "revoking: {r:?}");
    assert_eq!(
        set(&r.assignment.unwrap_or_default()),
        set(&[tp("bar", &[0, 1, 2])])
    );
    let r = cg.beat("a", 2, &[tp("bar", &[0, 1, 2])]);
    assert_eq!(r.member_epoch, 3);
}

/// Kafka: testSubscriptionUpgradeWhenPartitionsChange (partition metadata refresh): a
/// subscribed topic growing raises the epoch and the new partitions are handed out.
#[test]
fn subscribed_topic_partition_growth_bumps_epoch() {
    let mut cg = Cg::new();
    let owned = cg.join("a", &["bar"]).assignment.unwrap_or_default();
    cg.set_partitions("bar", 5);
    assert_eq!(cg.group.generation(), 2);
    let r = cg.beat("a", 1, &owned);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(
        set(&r.assignment.unwrap_or_default()),
        set(&[tp("bar", &[0, 1, 2, 3, 4])])
    );
    // A topic nobody subscribes to changes nothing.
    cg.set_partitions("other", 4);
    assert_eq!(cg.group.generation(), 2);
}

/// Kafka: testConsumerGroupHeartbeatWithRegex (regex subscriptions against the catalog,
/// including topics created later).
#[test]
fn regex_subscription_follows_the_catalog() {
    let mut cg = Cg::new();
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        subscribed_topics: None,
        subscribed_topic_regex: Some("fo.*".into()),
        ..Cg::join_request("a", &[])
    });
    assert_eq!(
        set(&r.assignment.unwrap_or_default()),
        set(&[tp("foo", &[0, 1, 2, 3, 4, 5])])
    );
    cg.set_partitions("four", 2);
    assert_eq!(cg.group.generation(), 2);
    let r = cg.beat("a", 1, &[tp("foo", &[0, 1, 2, 3, 4, 5])]);
    assert_eq!(count(&r.assignment.unwrap_or_default()), 8);
    // The regex is anchored: "xfoo" does not match "fo.*".
    cg.set_partitions("xfoo", 2);
    assert_eq!(cg.group.generation(), 2);
}

/// Kafka: testGroupEpochBumpWhenNewStaticMemberJoins and
/// testShouldThrownUnreleasedInstanceIdExceptionWhenNewMemberJoinsWithInUseInstanceId.
#[test]
fn static_member_instance_id_in_use_is_unreleased() {
    let mut cg = Cg::new();
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        group_instance_id: Some("pod-0".into()),
        ..Cg::join_request("a", &["foo"])
    });
    assert_eq!(r.member_epoch, 1);
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        group_instance_id: Some("pod-0".into()),
        ..Cg::join_request("a2", &["foo"])
    });
    assert_eq!(r.error_code, code(ErrorCode::UnreleasedInstanceId));
}

/// Kafka: testNoGroupEpochBumpWhenStaticMemberTemporarilyLeaves and
/// testStaticMemberGetsBackAssignmentUponRejoin.
#[test]
fn static_member_gets_back_assignment_upon_rejoin() {
    let mut cg = Cg::new();
    let join = |id: &str| ConsumerGroupHeartbeatRequest {
        group_instance_id: Some("pod-0".into()),
        ..Cg::join_request(id, &["foo"])
    };
    cg.send(join("a"));
    let b_owned = cg.join("b", &["foo"]).assignment.unwrap_or_default();
    let r = cg.beat("a", 1, &[tp("foo", &[0, 1, 2, 3, 4, 5])]);
    let kept = r.assignment.unwrap_or_default();
    let r = cg.beat("a", 1, &kept);
    assert_eq!(r.member_epoch, 2);
    let epoch = cg.group.generation();
    // A temporary leave: no epoch bump, the partitions are kept for the instance.
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        group_instance_id: Some("pod-0".into()),
        ..Cg::request("a", -2)
    });
    assert_eq!((r.error_code, r.member_epoch), (0, -2));
    assert_eq!(cg.group.generation(), epoch);
    // b cannot get them meanwhile.
    let r = cg.beat("b", 2, &b_owned);
    assert!(
        set(&r.assignment.unwrap_or(b_owned))
            .values()
            .map(BTreeSet::len)
            .sum::<usize>()
            <= 3
    );
    // The new incarnation takes the same partitions back, without a rebalance.
    let r = cg.send(join("a-new"));
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(set(&r.assignment.unwrap_or_default()), set(&kept));
    assert_eq!(cg.group.generation(), epoch);
    // The old id is gone.
    assert_eq!(
        cg.beat("a", 2, &kept).error_code,
        code(ErrorCode::UnknownMemberId)
    );
}

/// Kafka: testSessionTimeoutExpiration.
#[test]
fn session_timeout_expiration() {
    let mut cg = Cg::new();
    cg.join("a", &["foo"]);
    cg.join("b", &["foo"]);
    cg.now += u64::from(SESSION) - 1;
    cg.beat("b", 2, &[]);
    cg.tick();
    assert_eq!(cg.group.member_count(), 2);
    cg.now += 1;
    cg.tick();
    assert_eq!(cg.group.member_count(), 1, "a expired");
    assert_eq!(cg.group.generation(), 3);
    assert!(cg
        .events
        .iter()
        .any(|e| matches!(e, Event::MemberExpired { member_id, .. } if member_id == "a")));
    // b now gets everything.
    let r = cg.beat("b", 2, &[]);
    assert_eq!(count(&r.assignment.unwrap_or_default()), 6);
}

/// Kafka: testRebalanceTimeoutExpiration — a member that keeps partitions it must give up past
/// its rebalance timeout is removed, and the partitions go to the member waiting for them.
#[test]
fn rebalance_timeout_expiration() {
    let mut cg = Cg::new();
    let owned = cg.join("a", &["foo"]).assignment.unwrap_or_default();
    cg.join("b", &["foo"]);
    let r = cg.beat("a", 1, &owned);
    assert_eq!(r.member_epoch, 1, "asked to revoke");
    // a keeps heartbeating (its session is fine) but never gives anything up.
    for _ in 0..5 {
        cg.now += (REBALANCE as u64) / 6;
        cg.beat("a", 1, &owned);
        cg.beat("b", 2, &[]);
        cg.tick();
    }
    assert_eq!(cg.group.member_count(), 2);
    cg.now += (REBALANCE as u64) / 6;
    cg.tick();
    assert_eq!(cg.group.member_count(), 1, "a removed");
    assert!(cg
        .events
        .iter()
        .any(|e| matches!(e, Event::RevocationTimedOut { member_id } if member_id == "a")));
    assert_eq!(
        cg.beat("a", 1, &owned).error_code,
        code(ErrorCode::UnknownMemberId)
    );
    let r = cg.beat("b", 2, &[]);
    assert_eq!(count(&r.assignment.unwrap_or_default()), 6);
}

/// Kafka: testConsumerGroupHeartbeatWithServerAssignor (assignor choice): the assignor most
/// members ask for is used; without one, the server's default.
#[test]
fn assignor_choice_follows_the_members() {
    let mut cg = Cg::new();
    cg.join("a", &["foo", "bar"]);
    assert_eq!(cg.group.describe_consumer().assignor, "uniform");
    let r = cg.send(ConsumerGroupHeartbeatRequest {
        server_assignor: Some("range".into()),
        ..Cg::join_request("b", &["foo", "bar"])
    });
    assert_eq!(r.error_code, 0);
    assert_eq!(cg.group.describe_consumer().assignor, "range");
    // Range co-partitions: each member's share of foo and bar start at the same partitions.
    let d = cg.group.describe_consumer();
    let first = &d.members[0].target_assignment;
    assert_eq!(
        set(first)["bar"].iter().next(),
        set(first)["foo"].iter().next()
    );
}

/// Kafka: testConsumerGroupOffsetCommitWithStaleMemberEpoch.
#[test]
fn offset_commit_checks_member_epoch() {
    let mut cg = Cg::new();
    cg.join("a", &["foo"]);
    assert_eq!(cg.commit("a", 1), 0);
    assert_eq!(cg.commit("a", 0), code(ErrorCode::StaleMemberEpoch));
    assert_eq!(cg.commit("a", 2), code(ErrorCode::FencedMemberEpoch));
    assert_eq!(cg.commit("zombie", 1), code(ErrorCode::UnknownMemberId));
    // A simple commit needs a group with no members.
    assert_eq!(cg.commit("", -1), code(ErrorCode::UnknownMemberId));
}

/// One group, one protocol at a time: an Empty classic group takes the consumer protocol, an
/// Empty consumer group takes a classic member, offsets carry over, epochs continue.
#[test]
fn empty_groups_take_either_protocol() {
    let mut cg = Cg::new();
    cg.join("a", &["foo"]);
    assert_eq!(cg.commit("a", 1), 0);
    cg.send(Cg::request("a", -1));
    assert_eq!(cg.group.state(), GroupState::Empty);
    let epoch = cg.group.generation();
    // A classic member arrives: the group is classic again, with its offsets.
    let join = muster_protocol::JoinGroupRequest {
        group_id: "cg".into(),
        member_id: String::new(),
        // A static member joins at once (no MEMBER_ID_REQUIRED round trip).
        group_instance_id: Some("pod-c".into()),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        topics: vec!["foo".into()],
        assignors: vec![muster_protocol::AssignorMetadata {
            name: "range".into(),
            user_data: vec![],
        }],
        owned_partitions: vec![],
        reason: None,
    };
    let cx = crate::engine::Ctx {
        now: cg.now,
        topics: &cg.catalog,
    };
    let client = cg.client.clone();
    let effects = cg.group.join(
        cx,
        join,
        &client,
        uuid::Uuid::from_u128(99),
        Default::default(),
        1_000,
    );
    cg.collect(effects);
    assert!(!cg.group.is_consumer_group());
    assert!(cg.group.generation() >= epoch, "never reused");
    assert_eq!(cg.group.member_count(), 1);
    // With a classic member in it, a consumer member is refused (no online upgrade yet).
    let r = cg.send(Cg::join_request("c", &["foo"]));
    assert_eq!(r.error_code, code(ErrorCode::GroupIdNotFound));
}

/// Durable like classic groups: epochs, target and current assignments survive a restart.
#[test]
fn epochs_and_assignments_survive_a_restart() {
    let mut cg = Cg::new();
    let a = cg.join("a", &["foo"]).assignment.unwrap_or_default();
    cg.join("b", &["foo"]);
    let r = cg.beat("a", 1, &a);
    let kept = r.assignment.unwrap_or_default();
    let record = cg.record.clone().expect("written");
    assert!(record.consumer.is_some());
    let (restored, _ledger) = Group::<u32>::restore(record, Vec::new(), cg.config.clone(), cg.now);
    cg.group = restored;
    assert_eq!(cg.group.generation(), 2);
    assert_eq!(cg.group.state(), GroupState::Reconciling);
    let d = cg.group.describe_consumer();
    assert_eq!(d.group_epoch, 2);
    assert_eq!(d.assignment_epoch, 2);
    // a finishes its revocation against the restored group; b then gets its share.
    let r = cg.beat("a", 1, &kept);
    assert_eq!(r.member_epoch, 2);
    let r = cg.beat("b", 2, &[]);
    assert_eq!(count(&r.assignment.unwrap_or_default()), 3);
    // The next epoch is 3, not a reused one.
    cg.join("c", &["foo"]);
    assert_eq!(cg.group.generation(), 3);
}

/// DescribeGroups and ConsumerGroupDescribe of a consumer group.
#[test]
fn describe_shows_epochs_and_targets() {
    let mut cg = Cg::new();
    cg.join("a", &["foo"]);
    cg.join("b", &["foo"]);
    let d = cg.group.describe_consumer();
    assert_eq!(
        (d.state.as_str(), d.group_epoch, d.assignment_epoch),
        ("Reconciling", 2, 2)
    );
    let a = d.members.iter().find(|m| m.member_id == "a").expect("a");
    assert_eq!(a.member_epoch, 1);
    assert_eq!(count(&a.assignment), 6);
    assert_eq!(count(&a.target_assignment), 3);
    let classic = cg.group.describe(cg.now);
    assert_eq!(classic.generation_id, 2);
    assert_eq!(classic.state, "Reconciling");
    assert!(classic.members.iter().any(|m| m.holding_rebalance));
}

/// The journal (protocol §6.20) records each epoch bump with its trigger and member, who
/// joined and left, and what moved in the target per member.
#[test]
fn each_epoch_bump_is_journaled_with_what_moved() {
    let mut cg = Cg::new();
    cg.join("a", &["foo"]);
    cg.join("b", &["foo"]);
    let history = cg.group.history(0);
    assert_eq!(history.len(), 2);
    let newest = &history[0];
    assert_eq!(newest.generation_id, 2);
    assert_eq!(newest.trigger.kind, "member_joined");
    assert_eq!(newest.trigger.member_id, "b");
    assert_eq!(newest.joined, vec!["b".to_owned()]);
    assert_eq!(newest.moved, Some(3));
    let b = newest
        .changes
        .iter()
        .find(|c| c.member_id == "b")
        .expect("b gained");
    assert_eq!(count(&b.gained), 3);
    let a = newest
        .changes
        .iter()
        .find(|c| c.member_id == "a")
        .expect("a lost");
    assert_eq!(count(&a.revoked), 3);
    cg.send(Cg::request("b", -1));
    let newest = &cg.group.history(1)[0];
    assert_eq!(
        (newest.trigger.kind.as_str(), newest.left.clone()),
        ("member_left", vec!["b".to_owned()])
    );
    // The journal is written with the record.
    let record = cg.record.clone().expect("written");
    assert_eq!(record.generation, 3);
}

/// GroupDiagnosis of a Reconciling group names the member still holding partitions another
/// waits for, and since when.
#[test]
fn diagnosis_names_the_member_holding_partitions() {
    let mut cg = Cg::new();
    let a = cg.join("a", &["foo"]).assignment.unwrap_or_default();
    cg.join("b", &["foo"]);
    cg.now = 1_000;
    cg.beat("a", 1, &a);
    cg.now = 20_000;
    let d = cg.group.diagnose(cg.now);
    assert_eq!(d.state, "Reconciling");
    let wait = d.rebalance.expect("reconciling");
    assert_eq!(wait.phase, "reconcile");
    assert_eq!(wait.phase_since_ms, 1_000);
    assert_eq!(wait.deadline_ms, Some(1_000 + REBALANCE as u64));
    assert!(wait.stuck, "past half its rebalance timeout");
    assert_eq!(wait.waiting_for.len(), 1);
    assert_eq!(wait.waiting_for[0].member_id, "a");
}

/// A new member's session deadline is reported to the shell (which arms its timer only for
/// what the effects report): without it, an idle group's timer would not fire at its expiry.
#[test]
fn a_new_members_session_deadline_is_reported() {
    let mut cg = Cg::new();
    let cx = crate::engine::Ctx {
        now: 0,
        topics: &cg.catalog,
    };
    let effects = cg.group.consumer_heartbeat(
        cx,
        Cg::join_request("a", &["foo"]),
        &cg.client.clone(),
        crate::engine::Grant::NotAsked,
        uuid::Uuid::nil(),
        1,
    );
    assert_eq!(effects.deadline, Some(u64::from(SESSION)));
    cg.collect(effects);
}
