//! Migration (`migrate.rs`, `classic.rs`), after Kafka 4's `GroupMetadataManagerTest`
//! online-upgrade and downgrade cases.

use muster_protocol::{ErrorCode, MemberAssignment};

use super::harness::{count, set, tp, Cg};
use crate::config::GroupConfig;
use crate::engine::GroupState;

/// A Stable classic group with one static member owning all of foo.
fn classic_group() -> (Cg, String, i32) {
    let mut cg = Cg::with_config(GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    });
    let joined = cg.classic_join("", Some("pod-0"), &[]);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let id = joined.member_id.clone();
    let synced = cg.classic_sync(
        &id,
        joined.generation_id,
        vec![MemberAssignment {
            member_id: id.clone(),
            partitions: vec![tp("foo", &[0, 1, 2, 3, 4, 5])],
            user_data: vec![],
        }],
    );
    assert_eq!(synced.error_code, 0);
    assert_eq!(cg.group.state(), GroupState::Stable);
    (cg, id, joined.generation_id)
}

/// Kafka: testOnlineMigrationFromClassicToConsumer — a consumer member joining a Stable
/// classic group upgrades it; the classic member gives up its share first (told by
/// REBALANCE_IN_PROGRESS, answered without a barrier), and only then does the newcomer get it.
#[test]
fn online_upgrade_from_classic_to_consumer() {
    let (mut cg, classic, generation) = classic_group();
    let r = cg.join("c", &["foo"]);
    assert!(cg.group.is_consumer_group());
    assert!(
        r.assignment.unwrap_or_default().is_empty(),
        "foo is still the classic member's"
    );
    let mut c_epoch = r.member_epoch;
    assert_eq!(c_epoch, generation + 1);
    // The classic member is told to rejoin.
    assert_eq!(
        cg.classic_heartbeat(&classic, generation),
        ErrorCode::RebalanceInProgress.code()
    );
    // It rejoins still owning everything: answered at once at its epoch, as its own leader
    // with nothing to compute; its sync gives it only what it keeps.
    let all = [tp("foo", &[0, 1, 2, 3, 4, 5])];
    let j = cg.classic_join(&classic, Some("pod-0"), &all);
    assert_eq!((j.error_code, j.generation_id), (0, generation));
    assert!(j.skip_assignment && j.leader_id == classic);
    let s = cg.classic_sync(&classic, j.generation_id, vec![]);
    let kept = s.partitions.clone();
    assert_eq!(count(&kept), 3);
    // The newcomer still waits: the classic member has not confirmed.
    let r = cg.beat("c", c_epoch, &[]);
    c_epoch = r.member_epoch;
    assert!(r.assignment.unwrap_or_default().is_empty());
    // Cooperative: it rejoins having given the rest up, and reaches the new epoch.
    let j = cg.classic_join(&classic, Some("pod-0"), &kept);
    assert_eq!(j.generation_id, generation + 1);
    assert_eq!(cg.classic_heartbeat(&classic, j.generation_id), 0);
    let r = cg.beat("c", c_epoch, &[]);
    let c_owned = r.assignment.unwrap_or_default();
    assert_eq!(count(&c_owned), 3);
    let mine = set(&kept);
    assert!(set(&c_owned)["foo"].is_disjoint(&mine["foo"]));
    assert_eq!(cg.group.state(), GroupState::Stable);
    // Offsets: the classic member commits at its epoch.
    assert_eq!(cg.commit(&classic, generation + 1), 0);
    assert_eq!(
        cg.commit(&classic, generation),
        ErrorCode::IllegalGeneration.code()
    );
}

/// Kafka: testOnlineMigrationFromConsumerToClassic (downgrade) — when the last
/// consumer-protocol member leaves, the group is classic again and rebalances; no generation
/// is reused.
#[test]
fn downgrade_when_the_last_consumer_member_leaves() {
    let (mut cg, classic, generation) = classic_group();
    cg.join("c", &["foo"]);
    // The classic member reconciles to c's epoch (it gives up c's share, rejoining).
    let all = [tp("foo", &[0, 1, 2, 3, 4, 5])];
    let j = cg.classic_join(&classic, Some("pod-0"), &all);
    let kept = cg
        .classic_sync(&classic, j.generation_id, vec![])
        .partitions;
    let j = cg.classic_join(&classic, Some("pod-0"), &kept);
    assert_eq!(j.generation_id, generation + 1);
    let left = cg.send(Cg::request("c", -1));
    assert_eq!(left.error_code, 0);
    assert!(!cg.group.is_consumer_group());
    assert_eq!(cg.group.state(), GroupState::PreparingRebalance);
    // No bump before the conversion: the classic member's generation is still the group's,
    // so it is asked to rejoin (and keeps its partitions meanwhile), not fenced.
    assert_eq!(cg.group.generation(), generation + 1);
    assert_eq!(
        cg.classic_heartbeat(&classic, generation + 1),
        ErrorCode::RebalanceInProgress.code()
    );
    // The classic member rejoins and leads a classic rebalance as before.
    let j = cg.classic_join(&classic, Some("pod-0"), &[]);
    assert_eq!(j.error_code, 0);
    assert!(j.generation_id > generation + 1, "never reused: {j:?}");
    assert_eq!(j.leader_id, classic);
}

/// A classic group mid-rebalance cannot be upgraded now; the joiner is told why and retries.
#[test]
fn a_rebalancing_classic_group_is_not_upgraded() {
    let (mut cg, _classic, _) = classic_group();
    // A second classic member opens a barrier.
    assert!(
        cg.classic_join_held("", Some("pod-1"), &[]).is_none(),
        "held at the barrier"
    );
    assert_eq!(cg.group.state(), GroupState::PreparingRebalance);
    let r = cg.send(Cg::join_request("c", &["foo"]));
    assert_eq!(r.error_code, ErrorCode::GroupIdNotFound.code());
    assert!(r.error_message.unwrap_or_default().contains("Stable"));
    assert!(!cg.group.is_consumer_group());
    // A heartbeat other than a join never turns a group into a consumer group.
    assert_eq!(
        cg.beat("c", 3, &[]).error_code,
        ErrorCode::UnknownMemberId.code()
    );
}

/// A classic member inside an upgraded group is still one after a restart (its JoinGroup's
/// session timeout and assignors are recorded).
#[test]
fn classic_members_of_an_upgraded_group_survive_a_restart() {
    let (mut cg, classic, generation) = classic_group();
    cg.join("c", &["foo"]);
    let record = cg.record.clone().expect("written");
    let (restored, _) =
        crate::engine::Group::<u32>::restore(record, Vec::new(), cg.config.clone(), cg.now);
    cg.group = restored;
    assert!(cg.group.is_consumer_group());
    assert_eq!(
        cg.classic_heartbeat(&classic, generation),
        ErrorCode::RebalanceInProgress.code()
    );
    let j = cg.classic_join(&classic, Some("pod-0"), &[tp("foo", &[0, 1, 2, 3, 4, 5])]);
    assert_eq!(
        (j.error_code, j.assignor.as_deref()),
        (0, Some("cooperative-sticky"))
    );
}
