//! Reconciliation, case by case as Kafka 4's `CurrentAssignmentBuilderTest` (topic names where
//! Kafka has topic ids; "held" where Kafka asks a partition's current epoch, -1 meaning free).

use std::collections::BTreeSet;

use muster_protocol::TopicPartitions;

use crate::engine::consumer::{MemberAssignment, MemberState, Partitions, Reconcile};

fn parts(topics: &[(&str, &[i32])]) -> Partitions {
    topics
        .iter()
        .map(|(t, ps)| ((*t).to_owned(), ps.iter().copied().collect()))
        .collect()
}

fn owned(topics: &[(&str, &[i32])]) -> Vec<TopicPartitions> {
    topics
        .iter()
        .map(|(t, ps)| TopicPartitions {
            topic: (*t).to_owned(),
            partitions: ps.to_vec(),
        })
        .collect()
}

fn subscribed(topics: &[&str]) -> BTreeSet<String> {
    topics.iter().map(|t| (*t).to_owned()).collect()
}

fn member(
    state: MemberState,
    epoch: i32,
    assigned: &[(&str, &[i32])],
    revoking: &[(&str, &[i32])],
) -> MemberAssignment {
    MemberAssignment {
        state,
        epoch,
        assigned: parts(assigned),
        pending_revocation: parts(revoking),
    }
}

const BOTH: &[&str] = &["topic1", "topic2"];
const FREE: &dyn Fn(&str, i32) -> bool = &|_, _| false;
const HELD: &dyn Fn(&str, i32) -> bool = &|_, _| true;

/// Reconciles `m` toward `target` at `epoch`; `None` (no change) is returned as `m` itself.
fn step(
    m: &MemberAssignment,
    epoch: i32,
    target: &[(&str, &[i32])],
    held: &dyn Fn(&str, i32) -> bool,
    reported: Option<&[TopicPartitions]>,
) -> MemberAssignment {
    let target = parts(target);
    let subscribed = subscribed(BOTH);
    let r = Reconcile {
        target_epoch: epoch,
        target: &target,
        subscribed: &subscribed,
        held,
        owned: reported,
        enforce_subscription: false,
    };
    m.reconcile(&r).unwrap_or_else(|| m.clone())
}

#[test]
fn stable_to_stable() {
    let m = member(
        MemberState::Stable,
        10,
        &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5, 6])],
        &[],
    );
    let next = step(
        &m,
        11,
        &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5, 6])],
        HELD,
        None,
    );
    assert_eq!(
        next,
        member(
            MemberState::Stable,
            11,
            &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5, 6])],
            &[]
        )
    );
}

#[test]
fn stable_to_stable_with_new_partitions() {
    let m = member(
        MemberState::Stable,
        10,
        &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5, 6])],
        &[],
    );
    let next = step(
        &m,
        11,
        &[("topic1", &[1, 2, 3, 4]), ("topic2", &[4, 5, 6, 7])],
        FREE,
        None,
    );
    assert_eq!(
        next,
        member(
            MemberState::Stable,
            11,
            &[("topic1", &[1, 2, 3, 4]), ("topic2", &[4, 5, 6, 7])],
            &[]
        )
    );
}

#[test]
fn stable_to_unrevoked_partitions() {
    let m = member(
        MemberState::Stable,
        10,
        &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5, 6])],
        &[],
    );
    let next = step(
        &m,
        11,
        &[("topic1", &[2, 3, 4]), ("topic2", &[5, 6, 7])],
        FREE,
        None,
    );
    // Revoke first, at the old epoch; nothing new yet.
    assert_eq!(
        next,
        member(
            MemberState::UnrevokedPartitions,
            10,
            &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
            &[("topic1", &[1]), ("topic2", &[4])]
        )
    );
}

#[test]
fn stable_to_unreleased_partitions() {
    let m = member(
        MemberState::Stable,
        10,
        &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5, 6])],
        &[],
    );
    let next = step(
        &m,
        11,
        &[("topic1", &[1, 2, 3, 4]), ("topic2", &[4, 5, 6, 7])],
        HELD,
        None,
    );
    assert_eq!(
        next,
        member(
            MemberState::UnreleasedPartitions,
            11,
            &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5, 6])],
            &[]
        )
    );
}

#[test]
fn stable_to_unreleased_partitions_with_owned_partitions_not_having_revoked_partitions() {
    let m = member(
        MemberState::Stable,
        10,
        &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5, 6])],
        &[],
    );
    let held = |topic: &str, _| topic == "topic2";
    let reported = owned(&[]);
    let next = step(
        &m,
        11,
        &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5, 7])],
        &held,
        Some(&reported),
    );
    // 6 goes (already not reported), 7 is held by another: wait for it at the new epoch.
    assert_eq!(
        next,
        member(
            MemberState::UnreleasedPartitions,
            11,
            &[("topic1", &[1, 2, 3]), ("topic2", &[4, 5])],
            &[]
        )
    );
}

#[test]
fn unrevoked_partitions_to_stable() {
    let m = member(
        MemberState::UnrevokedPartitions,
        10,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        &[("topic1", &[1]), ("topic2", &[4])],
    );
    let reported = owned(&[("topic1", &[2, 3]), ("topic2", &[5, 6])]);
    let next = step(
        &m,
        11,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        FREE,
        Some(&reported),
    );
    assert_eq!(
        next,
        member(
            MemberState::Stable,
            11,
            &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
            &[]
        )
    );
}

#[test]
fn remains_in_unrevoked_partitions() {
    let m = member(
        MemberState::UnrevokedPartitions,
        10,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        &[("topic1", &[1]), ("topic2", &[4])],
    );
    let target: &[(&str, &[i32])] = &[("topic1", &[3]), ("topic2", &[6])];
    // Not reported at all: still taken to hold what it must give up.
    assert_eq!(step(&m, 12, target, FREE, None), m);
    // Still reporting a partition it must give up (1, then 4).
    let still_1 = owned(&[("topic1", &[1, 2, 3]), ("topic2", &[5, 6])]);
    assert_eq!(step(&m, 12, target, FREE, Some(&still_1)), m);
    let still_4 = owned(&[("topic1", &[2, 3]), ("topic2", &[4, 5, 6])]);
    assert_eq!(step(&m, 12, target, FREE, Some(&still_4)), m);
}

#[test]
fn unrevoked_partitions_to_unrevoked_partitions() {
    let m = member(
        MemberState::UnrevokedPartitions,
        10,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        &[("topic1", &[1]), ("topic2", &[4])],
    );
    let reported = owned(&[("topic1", &[2, 3]), ("topic2", &[5, 6])]);
    let next = step(
        &m,
        12,
        &[("topic1", &[3]), ("topic2", &[6])],
        FREE,
        Some(&reported),
    );
    // It let 1 and 4 go; the newer target takes 2 and 5 too: revoke again, same epoch.
    assert_eq!(
        next,
        member(
            MemberState::UnrevokedPartitions,
            10,
            &[("topic1", &[3]), ("topic2", &[6])],
            &[("topic1", &[2]), ("topic2", &[5])]
        )
    );
}

#[test]
fn unrevoked_partitions_to_unreleased_partitions() {
    let m = member(
        MemberState::UnrevokedPartitions,
        11,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        &[],
    );
    let reported = owned(&[("topic1", &[2, 3]), ("topic2", &[5, 6])]);
    let next = step(
        &m,
        11,
        &[("topic1", &[2, 3, 4]), ("topic2", &[5, 6, 7])],
        HELD,
        Some(&reported),
    );
    assert_eq!(
        next,
        member(
            MemberState::UnreleasedPartitions,
            11,
            &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
            &[]
        )
    );
}

#[test]
fn unrevoked_partitions_to_stable_with_returned_partitions_pending_revocation() {
    // Partition 4 is being given up by this member but is back in the newest target: the
    // member's own pending revocation does not count as "held by another".
    let m = member(
        MemberState::UnrevokedPartitions,
        10,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        &[("topic1", &[4])],
    );
    let held = |topic: &str, p: i32| match topic {
        "topic1" => matches!(p, 2..=4),
        "topic2" => matches!(p, 5 | 6),
        _ => false,
    };
    let reported = owned(&[("topic1", &[2, 3]), ("topic2", &[5, 6])]);
    let next = step(
        &m,
        12,
        &[("topic1", &[2, 3, 4]), ("topic2", &[5, 6, 7])],
        &held,
        Some(&reported),
    );
    assert_eq!(
        next,
        member(
            MemberState::Stable,
            12,
            &[("topic1", &[2, 3, 4]), ("topic2", &[5, 6, 7])],
            &[]
        )
    );
}

#[test]
fn unreleased_partitions_to_stable() {
    let m = member(
        MemberState::UnreleasedPartitions,
        11,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        &[],
    );
    let next = step(
        &m,
        12,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        HELD,
        None,
    );
    assert_eq!(
        next,
        member(
            MemberState::Stable,
            12,
            &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
            &[]
        )
    );
}

#[test]
fn unreleased_partitions_to_stable_with_new_partitions() {
    let m = member(
        MemberState::UnreleasedPartitions,
        11,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        &[],
    );
    let next = step(
        &m,
        11,
        &[("topic1", &[2, 3, 4]), ("topic2", &[5, 6, 7])],
        FREE,
        None,
    );
    assert_eq!(
        next,
        member(
            MemberState::Stable,
            11,
            &[("topic1", &[2, 3, 4]), ("topic2", &[5, 6, 7])],
            &[]
        )
    );
}

#[test]
fn unreleased_partitions_to_unreleased_partitions() {
    let m = member(
        MemberState::UnreleasedPartitions,
        11,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        &[],
    );
    let target: &[(&str, &[i32])] = &[("topic1", &[2, 3, 4]), ("topic2", &[5, 6, 7])];
    let unchanged = {
        let target = parts(target);
        let subscribed = subscribed(BOTH);
        m.reconcile(&Reconcile {
            target_epoch: 11,
            target: &target,
            subscribed: &subscribed,
            held: HELD,
            owned: None,
            enforce_subscription: false,
        })
    };
    assert_eq!(unchanged, None, "still waiting: no change to write");
}

#[test]
fn unreleased_partitions_to_unrevoked_partitions() {
    let m = member(
        MemberState::UnreleasedPartitions,
        11,
        &[("topic1", &[2, 3]), ("topic2", &[5, 6])],
        &[],
    );
    let next = step(&m, 12, &[("topic1", &[3]), ("topic2", &[6])], HELD, None);
    assert_eq!(
        next,
        member(
            MemberState::UnrevokedPartitions,
            11,
            &[("topic1", &[3]), ("topic2", &[6])],
            &[("topic1", &[2]), ("topic2", &[5])]
        )
    );
}

/// Kafka's `testUnsubscribeToStable` family: a member at its target whose subscription lost a
/// topic gives that topic's partitions up without waiting for a new target.
#[test]
fn subscription_change_revokes_an_unsubscribed_topic_at_once() {
    let m = member(
        MemberState::Stable,
        10,
        &[("topic1", &[1, 2]), ("topic2", &[3])],
        &[],
    );
    let target = parts(&[("topic1", &[1, 2]), ("topic2", &[3])]);
    let only_topic1 = subscribed(&["topic1"]);
    let reported = owned(&[("topic1", &[1, 2]), ("topic2", &[3])]);
    let next = m
        .reconcile(&Reconcile {
            target_epoch: 10,
            target: &target,
            subscribed: &only_topic1,
            held: FREE,
            owned: Some(&reported),
            enforce_subscription: true,
        })
        .expect("topic2 must go");
    assert_eq!(
        next,
        member(
            MemberState::UnrevokedPartitions,
            10,
            &[("topic1", &[1, 2])],
            &[("topic2", &[3])]
        )
    );
    // Without enforcement it waits for the next target.
    let waits = m.reconcile(&Reconcile {
        target_epoch: 10,
        target: &target,
        subscribed: &only_topic1,
        held: FREE,
        owned: Some(&reported),
        enforce_subscription: false,
    });
    assert_eq!(waits, None);
}

/// A partition never goes to two members: whatever the target, a member takes a partition only
/// when no member holds it (or it is its own, being given up).
#[test]
fn a_held_partition_is_never_taken() {
    let m = MemberAssignment::joining();
    let held = |topic: &str, p: i32| topic == "topic1" && p % 2 == 0;
    let next = step(
        &m,
        3,
        &[("topic1", &[0, 1, 2, 3]), ("topic2", &[0])],
        &held,
        None,
    );
    assert_eq!(next.epoch, 3);
    assert_eq!(next.state, MemberState::UnreleasedPartitions);
    assert_eq!(
        next.assigned,
        parts(&[("topic1", &[1, 3]), ("topic2", &[0])])
    );
}
