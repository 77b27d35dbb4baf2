//! The `range` assignor, after Kafka 4's `RangeAssignorTest` (server side): ranges per topic,
//! co-partitioning, stickiness within each member's share.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::consumer::{assign_range, AssignmentSpec, Partitions, Target};

fn subs(of: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
    of.iter()
        .map(|(m, ts)| {
            (
                (*m).to_owned(),
                ts.iter().map(|t| (*t).to_owned()).collect(),
            )
        })
        .collect()
}

fn counts(of: &[(&str, i32)]) -> BTreeMap<String, i32> {
    of.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
}

fn parts(of: &[(&str, &[i32])]) -> Partitions {
    of.iter()
        .map(|(t, ps)| ((*t).to_owned(), ps.iter().copied().collect()))
        .collect()
}

fn assign(
    members: &BTreeMap<String, BTreeSet<String>>,
    partition_counts: &BTreeMap<String, i32>,
    current: &Target,
) -> Target {
    assign_range(&AssignmentSpec {
        members,
        partition_counts,
        current,
    })
}

#[test]
fn one_consumer_one_topic_takes_it_all() {
    let t = assign(
        &subs(&[("a", &["t1"])]),
        &counts(&[("t1", 3)]),
        &Target::new(),
    );
    assert_eq!(t["a"], parts(&[("t1", &[0, 1, 2])]));
}

#[test]
fn ranges_go_first_to_the_members_earliest_in_order() {
    let members = subs(&[("a", &["t1"]), ("b", &["t1"]), ("c", &["t1"])]);
    let t = assign(&members, &counts(&[("t1", 7)]), &Target::new());
    assert_eq!(t["a"], parts(&[("t1", &[0, 1, 2])]));
    assert_eq!(t["b"], parts(&[("t1", &[3, 4])]));
    assert_eq!(t["c"], parts(&[("t1", &[5, 6])]));
}

#[test]
fn co_partitioned_topics_give_a_member_the_same_numbers() {
    let members = subs(&[("a", &["t1", "t2"]), ("b", &["t1", "t2"])]);
    let t = assign(&members, &counts(&[("t1", 4), ("t2", 4)]), &Target::new());
    assert_eq!(t["a"], parts(&[("t1", &[0, 1]), ("t2", &[0, 1])]));
    assert_eq!(t["b"], parts(&[("t1", &[2, 3]), ("t2", &[2, 3])]));
}

#[test]
fn more_members_than_partitions_leaves_some_with_none() {
    let members = subs(&[("a", &["t1"]), ("b", &["t1"]), ("c", &["t1"])]);
    let t = assign(&members, &counts(&[("t1", 2)]), &Target::new());
    assert_eq!(t["a"], parts(&[("t1", &[0])]));
    assert_eq!(t["b"], parts(&[("t1", &[1])]));
    assert_eq!(t["c"], Partitions::new());
}

#[test]
fn a_topic_is_shared_only_by_its_subscribers() {
    let members = subs(&[("a", &["t1", "t2"]), ("b", &["t1"])]);
    let t = assign(&members, &counts(&[("t1", 2), ("t2", 3)]), &Target::new());
    assert_eq!(t["a"], parts(&[("t1", &[0]), ("t2", &[0, 1, 2])]));
    assert_eq!(t["b"], parts(&[("t1", &[1])]));
}

#[test]
fn a_new_member_takes_its_share_and_the_others_keep_theirs() {
    let two = subs(&[("a", &["t1"]), ("c", &["t1"])]);
    let before = assign(&two, &counts(&[("t1", 6)]), &Target::new());
    assert_eq!(before["a"], parts(&[("t1", &[0, 1, 2])]));
    assert_eq!(before["c"], parts(&[("t1", &[3, 4, 5])]));
    let three = subs(&[("a", &["t1"]), ("b", &["t1"]), ("c", &["t1"])]);
    let after = assign(&three, &counts(&[("t1", 6)]), &before);
    // a and c keep their lowest two each; b gets what they gave up.
    assert_eq!(after["a"], parts(&[("t1", &[0, 1])]));
    assert_eq!(after["c"], parts(&[("t1", &[3, 4])]));
    assert_eq!(after["b"], parts(&[("t1", &[2, 5])]));
}

#[test]
fn a_member_that_had_more_keeps_an_extra_partition_while_they_last() {
    let members = subs(&[("a", &["t1"]), ("b", &["t1"])]);
    let current: Target = [
        ("a".to_owned(), parts(&[("t1", &[0, 1, 2, 3])])),
        ("b".to_owned(), parts(&[("t1", &[4])])),
    ]
    .into();
    let t = assign(&members, &counts(&[("t1", 5)]), &current);
    assert_eq!(t["a"], parts(&[("t1", &[0, 1, 2])]));
    assert_eq!(t["b"], parts(&[("t1", &[3, 4])]));
}

#[test]
fn partitions_that_no_longer_exist_are_not_kept() {
    let members = subs(&[("a", &["t1"]), ("b", &["t1"])]);
    let current: Target = [
        ("a".to_owned(), parts(&[("t1", &[0, 1, 7, 8])])),
        ("b".to_owned(), parts(&[("t1", &[2, 3])])),
    ]
    .into();
    let t = assign(&members, &counts(&[("t1", 4)]), &current);
    assert_eq!(t["a"], parts(&[("t1", &[0, 1])]));
    assert_eq!(t["b"], parts(&[("t1", &[2, 3])]));
}
