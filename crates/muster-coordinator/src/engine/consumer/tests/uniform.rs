//! The `uniform` assignor: each partition to exactly one subscriber, balanced, sticky (the
//! properties Kafka 4's `UniformHomogeneousAssignmentBuilderTest` and
//! `UniformHeterogeneousAssignmentBuilderTest` check).

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::consumer::{assign_range, assign_uniform, AssignmentSpec, Partitions, Target};

fn topics(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|t| (*t).to_owned()).collect()
}

fn members(n: usize, subscribed: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    (0..n)
        .map(|i| (format!("m{i:04}"), topics(subscribed)))
        .collect()
}

fn counts(of: &[(&str, i32)]) -> BTreeMap<String, i32> {
    of.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
}

fn assign(
    members: &BTreeMap<String, BTreeSet<String>>,
    partition_counts: &BTreeMap<String, i32>,
    current: &Target,
) -> Target {
    assign_uniform(&AssignmentSpec {
        members,
        partition_counts,
        current,
    })
}

fn sizes(target: &Target) -> Vec<usize> {
    target
        .values()
        .map(|p| p.values().map(BTreeSet::len).sum())
        .collect()
}

/// Every partition of every subscribed topic is assigned exactly once, to a subscriber.
pub(super) fn assert_exactly_once(
    target: &Target,
    members: &BTreeMap<String, BTreeSet<String>>,
    partition_counts: &BTreeMap<String, i32>,
) {
    let mut seen = BTreeSet::new();
    for (member, parts) in target {
        for (topic, ps) in parts {
            assert!(
                members[member].contains(topic),
                "{member} got {topic} unsubscribed"
            );
            for p in ps {
                assert!(*p < partition_counts[topic], "{topic}-{p} does not exist");
                assert!(
                    seen.insert((topic.clone(), *p)),
                    "{topic}-{p} assigned twice"
                );
            }
        }
    }
    let subscribed: BTreeSet<&String> = members.values().flatten().collect();
    let expected: usize = subscribed
        .iter()
        .map(|t| partition_counts.get(*t).copied().unwrap_or(0) as usize)
        .sum();
    assert_eq!(
        seen.len(),
        expected,
        "every subscribed partition is assigned"
    );
}

/// How many partitions changed owner between two targets.
fn moved(before: &Target, after: &Target) -> usize {
    let owner = |t: &Target| -> BTreeMap<(String, i32), String> {
        t.iter()
            .flat_map(|(m, parts)| {
                parts.iter().flat_map(move |(topic, ps)| {
                    ps.iter().map(move |p| ((topic.clone(), *p), m.clone()))
                })
            })
            .collect()
    };
    let (b, a) = (owner(before), owner(after));
    a.iter().filter(|(tp, m)| b.get(*tp) != Some(*m)).count()
}

#[test]
fn one_member_subscribed_to_no_topic_gets_nothing() {
    let members = members(1, &[]);
    let target = assign(&members, &counts(&[("t1", 3)]), &Target::new());
    assert_eq!(target["m0000"], Partitions::new());
}

#[test]
fn homogeneous_members_are_balanced_within_one_partition() {
    for (n, partitions) in [(1, 7), (3, 7), (3, 3), (5, 3), (10, 900), (7, 100)] {
        let members = members(n, &["t1", "t2"]);
        let counts = counts(&[("t1", partitions), ("t2", partitions / 2 + 1)]);
        let target = assign(&members, &counts, &Target::new());
        assert_exactly_once(&target, &members, &counts);
        let sizes = sizes(&target);
        let (min, max) = (sizes.iter().min(), sizes.iter().max());
        assert!(
            max.zip(min).is_some_and(|(max, min)| max - min <= 1),
            "{n} members: {sizes:?}"
        );
    }
}

#[test]
fn a_joining_member_takes_only_its_share_and_nobody_else_moves() {
    let counts = counts(&[("t1", 10_000)]);
    let before_members = members(999, &["t1"]);
    let before = assign(&before_members, &counts, &Target::new());
    let after_members = members(1_000, &["t1"]);
    let after = assign(&after_members, &counts, &before);
    assert_exactly_once(&after, &after_members, &counts);
    // 10 000 over 1 000: the newcomer gets 10, all taken from others; nothing else moves.
    assert_eq!(sizes(&after).iter().max(), Some(&10));
    assert_eq!(moved(&before, &after), 10);
    let newcomer = &after["m0999"];
    assert_eq!(newcomer.values().map(BTreeSet::len).sum::<usize>(), 10);
}

#[test]
fn a_leaving_member_s_partitions_are_the_only_ones_that_move() {
    let counts = counts(&[("t1", 90), ("t2", 10)]);
    let all = members(10, &["t1", "t2"]);
    let before = assign(&all, &counts, &Target::new());
    let mut fewer = all.clone();
    fewer.remove("m0003");
    let after = assign(&fewer, &counts, &before);
    assert_exactly_once(&after, &fewer, &counts);
    let left: usize = before["m0003"].values().map(BTreeSet::len).sum();
    assert_eq!(moved(&before, &after), left);
    let sizes = sizes(&after);
    assert!(sizes
        .iter()
        .max()
        .zip(sizes.iter().min())
        .is_some_and(|(a, b)| a - b <= 1));
}

#[test]
fn an_unchanged_group_keeps_its_target() {
    let counts = counts(&[("t1", 13), ("t2", 4)]);
    let members = members(4, &["t1", "t2"]);
    let first = assign(&members, &counts, &Target::new());
    assert_eq!(assign(&members, &counts, &first), first);
}

#[test]
fn a_topic_that_shrinks_or_vanishes_drops_out_of_the_target() {
    let members = members(2, &["t1", "t2"]);
    let before = assign(&members, &counts(&[("t1", 4), ("t2", 4)]), &Target::new());
    // t2 deleted (not in the counts), t1 down to 2.
    let counts = counts(&[("t1", 2)]);
    let after = assign(&members, &counts, &before);
    assert_exactly_once(&after, &members, &counts);
    assert_eq!(sizes(&after), vec![1, 1]);
}

#[test]
fn heterogeneous_subscriptions_go_only_to_subscribers_and_even_out() {
    let mut members = BTreeMap::new();
    members.insert("a".to_owned(), topics(&["t1", "t2"]));
    members.insert("b".to_owned(), topics(&["t1"]));
    members.insert("c".to_owned(), topics(&["t2", "t3"]));
    let counts = counts(&[("t1", 6), ("t2", 6), ("t3", 3)]);
    let target = assign(&members, &counts, &Target::new());
    assert_exactly_once(&target, &members, &counts);
    // 15 partitions, every topic shared: 5 each is reachable.
    assert_eq!(sizes(&target), vec![5, 5, 5]);
    // Sticky: the same question gives the same answer.
    assert_eq!(assign(&members, &counts, &target), target);
}

#[test]
fn a_topic_only_one_member_subscribes_to_is_all_its() {
    let mut members = BTreeMap::new();
    members.insert("a".to_owned(), topics(&["t1", "solo"]));
    members.insert("b".to_owned(), topics(&["t1"]));
    let counts = counts(&[("t1", 2), ("solo", 8)]);
    let target = assign(&members, &counts, &Target::new());
    assert_exactly_once(&target, &members, &counts);
    assert_eq!(target["a"]["solo"].len(), 8);
    // b gets both of t1: the most the subscriptions allow toward balance.
    assert_eq!(target["b"]["t1"].len(), 2);
}

mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any subscriptions, any earlier target (even one naming gone topics or partitions,
        /// or one partition twice): every subscribed partition is assigned exactly once, to a
        /// subscriber, by `uniform` and by `range`; for `uniform`, with one subscription for all, counts differ by at most one; and asking
        /// again with the result changes nothing.
        #[test]
        fn every_partition_once_balanced_and_stable(
            subs in prop::collection::vec(prop::collection::btree_set(0usize..4, 0..4), 1..12),
            topic_sizes in prop::collection::vec(0i32..20, 4),
            earlier in prop::collection::vec((0usize..12, 0usize..5, 0i32..25), 0..40),
            same in any::<bool>(),
        ) {
            let names = ["t0", "t1", "t2", "t3"];
            let members: BTreeMap<String, BTreeSet<String>> = subs
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let s = if same { &subs[0] } else { s };
                    (format!("m{i:02}"), s.iter().map(|t| names[*t].to_owned()).collect())
                })
                .collect();
            // t3 never exists; the others have `topic_sizes` partitions.
            let counts: BTreeMap<String, i32> =
                (0..3).map(|i| (names[i].to_owned(), topic_sizes[i])).collect();
            let mut current = Target::new();
            for (m, t, p) in earlier {
                let topic = ["t0", "t1", "t2", "t3", "gone"][t];
                current
                    .entry(format!("m{:02}", m % subs.len()))
                    .or_default()
                    .entry(topic.to_owned())
                    .or_default()
                    .insert(p);
            }
            let range = assign_range(&AssignmentSpec {
                members: &members,
                partition_counts: &counts,
                current: &current,
            });
            assert_exactly_once(&range, &members, &counts);
            let target = assign(&members, &counts, &current);
            assert_exactly_once(&target, &members, &counts);
            if same {
                let sizes = sizes(&target);
                let spread = sizes.iter().max().zip(sizes.iter().min()).map(|(a, b)| a - b);
                prop_assert!(spread.unwrap_or(0) <= 1, "{sizes:?}");
            }
            prop_assert_eq!(assign(&members, &counts, &target), target);
        }
    }
}
