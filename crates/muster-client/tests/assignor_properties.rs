//! Properties of every built-in assignor, on random groups (proptest):
//!
//! - validity: each partition of a subscribed, existing topic is assigned exactly once, and
//!   only to a member subscribed to its topic; every member gets an entry;
//! - balance with equal subscriptions: counts differ by at most one (per topic for `range`,
//!   whose ranges favour the same members on every topic, as Kafka's do);
//! - for the sticky assignors: local balance with any subscriptions (Kafka's
//!   `verifyValidityAndBalance`), nothing moves when members and partitions are unchanged, and
//!   survivors keep their partitions when a member leaves;
//! - for `cooperative-sticky`: across rounds of (assign → owners revoke → assign), no
//!   partition is ever given to a new owner while another member still owns it, and the
//!   assignment converges to a complete one.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use muster_client::partition::{flatten_partitions, group_partitions};
use muster_client::{
    Assignor, CooperativeStickyAssignor, GroupAssignment, MemberSubscription, RangeAssignor,
    RoundRobinAssignor, StickyAssignor, TopicPartition,
};
use proptest::prelude::*;

const TOPICS: [&str; 4] = ["t0", "t1", "t2", "t3"];

/// A random group: partition counts (some topics absent), members with random ids (some
/// static) and random non-empty subscriptions (which may include an absent topic).
#[derive(Debug, Clone)]
struct Group {
    topics: BTreeMap<String, i32>,
    members: Vec<MemberSubscription>,
}

fn group(equal_subscriptions: bool) -> impl Strategy<Value = Group> {
    let counts = proptest::collection::vec(prop::option::weighted(0.85, 0..13i32), TOPICS.len());
    let members = proptest::collection::vec(
        (
            0u32..1000,
            prop::option::weighted(0.3, 0u32..1000),
            proptest::collection::btree_set(0..TOPICS.len(), 1..=TOPICS.len()),
        ),
        1..8,
    );
    let all_topics = proptest::collection::btree_set(0..TOPICS.len(), 1..=TOPICS.len());
    (counts, members, all_topics).prop_map(move |(counts, members, shared)| {
        let topics = counts
            .iter()
            .zip(TOPICS)
            .filter_map(|(n, t)| n.map(|n| (t.to_owned(), n)))
            .collect();
        let mut seen = BTreeSet::new();
        let members = members
            .into_iter()
            .filter(|(id, _, _)| seen.insert(*id))
            .map(|(id, instance, subs)| {
                let subs = if equal_subscriptions {
                    shared.clone()
                } else {
                    subs
                };
                let mut m = MemberSubscription::new(
                    format!("member-{id:03}"),
                    subs.iter().map(|&i| TOPICS[i]),
                );
                if let Some(i) = instance {
                    m = m.with_instance_id(format!("instance-{i:03}-{id}"));
                }
                m
            })
            .collect();
        Group { topics, members }
    })
}

fn all_assignors() -> [&'static dyn Assignor; 4] {
    [
        &RangeAssignor,
        &RoundRobinAssignor,
        &StickyAssignor,
        &CooperativeStickyAssignor,
    ]
}

fn flat(r: &GroupAssignment, member: &str) -> BTreeSet<TopicPartition> {
    flatten_partitions(&r[member])
}

/// Every partition at most once, only to subscribers, only existing partitions; with
/// `complete`, every partition of a subscribed topic exactly once.
fn check_valid(g: &Group, r: &GroupAssignment, complete: bool) -> Result<(), TestCaseError> {
    prop_assert_eq!(r.len(), g.members.len());
    let mut seen = BTreeSet::new();
    for m in &g.members {
        for tp in flat(r, &m.member_id) {
            prop_assert!(m.subscribes_to(&tp.topic), "{} got {}", m.member_id, tp);
            prop_assert!(
                tp.partition >= 0 && tp.partition < *g.topics.get(&tp.topic).unwrap_or(&0)
            );
            prop_assert!(seen.insert(tp.clone()), "{} assigned twice", tp);
        }
    }
    if complete {
        for (topic, n) in &g.topics {
            if g.members.iter().any(|m| m.subscribes_to(topic)) {
                for p in 0..*n {
                    prop_assert!(
                        seen.contains(&TopicPartition::new(topic.clone(), p)),
                        "{}-{} unassigned",
                        topic,
                        p
                    );
                }
            }
        }
    }
    Ok(())
}

fn spread(counts: impl Iterator<Item = usize>) -> usize {
    let counts: Vec<usize> = counts.collect();
    counts.iter().max().unwrap_or(&0) - counts.iter().min().unwrap_or(&0)
}

/// Kafka's balance check: nobody holds two more than a member that could take its topic.
fn check_locally_balanced(g: &Group, r: &GroupAssignment) -> Result<(), TestCaseError> {
    for a in &g.members {
        for b in &g.members {
            let (fa, fb) = (flat(r, &a.member_id), flat(r, &b.member_id));
            if fa.len() > fb.len() + 1 {
                for tp in &fa {
                    prop_assert!(
                        !b.subscribes_to(&tp.topic),
                        "{} could give {} to {}",
                        a.member_id,
                        tp,
                        b.member_id
                    );
                }
            }
        }
    }
    Ok(())
}

/// The members as they rejoin after `r` was applied in `generation`: the sticky assignor
/// learns ownership from user data, the cooperative one from `owned_partitions`.
fn rejoin(
    assignor: &dyn Assignor,
    members: &[MemberSubscription],
    r: &GroupAssignment,
    generation: i32,
) -> Vec<MemberSubscription> {
    members
        .iter()
        .map(|m| {
            let owned = r.get(&m.member_id).cloned().unwrap_or_default();
            let owned_flat: Vec<TopicPartition> = flatten_partitions(&owned).into_iter().collect();
            m.clone()
                .with_owned(owned)
                .with_user_data(assignor.user_data(&owned_flat, generation))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn every_assignor_is_valid_and_complete(g in group(false)) {
        for a in all_assignors() {
            let r = a.assign(&g.members, &g.topics);
            check_valid(&g, &r, true)?;
        }
    }

    #[test]
    fn equal_subscriptions_are_balanced(g in group(true)) {
        for a in all_assignors() {
            let r = a.assign(&g.members, &g.topics);
            check_valid(&g, &r, true)?;
            if a.name() == "range" {
                for topic in g.topics.keys() {
                    let per_member = g.members.iter().map(|m| {
                        flat(&r, &m.member_id).iter().filter(|tp| &tp.topic == topic).count()
                    });
                    prop_assert!(spread(per_member) <= 1, "range on {}: {:?}", topic, r);
                }
            } else {
                let counts = g.members.iter().map(|m| flat(&r, &m.member_id).len());
                prop_assert!(spread(counts) <= 1, "{}: {:?}", a.name(), r);
            }
        }
    }

    #[test]
    fn sticky_is_locally_balanced(g in group(false)) {
        for a in [&StickyAssignor as &dyn Assignor, &CooperativeStickyAssignor] {
            check_locally_balanced(&g, &a.assign(&g.members, &g.topics))?;
        }
    }

    #[test]
    fn sticky_moves_nothing_when_nothing_changed(g in group(false)) {
        for a in [&StickyAssignor as &dyn Assignor, &CooperativeStickyAssignor] {
            let first = a.assign(&g.members, &g.topics);
            let again = a.assign(&rejoin(a, &g.members, &first, 1), &g.topics);
            prop_assert_eq!(&first, &again, "{}", a.name());
        }
    }

    #[test]
    fn sticky_survivors_keep_their_partitions(g in group(true), leaver in any::<prop::sample::Index>()) {
        prop_assume!(g.members.len() >= 2);
        for a in [&StickyAssignor as &dyn Assignor, &CooperativeStickyAssignor] {
            let first = a.assign(&g.members, &g.topics);
            let mut members = rejoin(a, &g.members, &first, 1);
            let gone = members.remove(leaver.index(members.len()));
            let survivors = Group { topics: g.topics.clone(), members };
            let second = a.assign(&survivors.members, &survivors.topics);
            check_valid(&survivors, &second, true)?;
            for m in &survivors.members {
                let before = flat(&first, &m.member_id);
                let after = flat(&second, &m.member_id);
                prop_assert!(before.is_subset(&after), "{} lost partitions when {} left", m.member_id, gone.member_id);
            }
        }
    }

    #[test]
    fn cooperative_never_double_assigns_and_converges(
        g in group(false),
        previous in proptest::collection::vec((0usize..8, 0usize..TOPICS.len(), 0i32..13), 0..30),
        joiners in 0usize..3,
    ) {
        // Start from an arbitrary valid, disjoint ownership (as after earlier rebalances),
        // held by a prefix of the members; the rest are newcomers.
        let mut owned: BTreeMap<String, BTreeSet<TopicPartition>> = BTreeMap::new();
        let mut taken = BTreeSet::new();
        let holders = g.members.len().saturating_sub(joiners).max(1);
        for (who, topic, p) in previous {
            let m = &g.members[who % holders];
            let tp = TopicPartition::new(TOPICS[topic], p);
            if m.subscribes_to(&tp.topic) && p < *g.topics.get(&tp.topic).unwrap_or(&0) && taken.insert(tp.clone()) {
                owned.entry(m.member_id.clone()).or_default().insert(tp);
            }
        }
        let a = CooperativeStickyAssignor;
        for (generation, round) in (1..).zip(0..4) {
            let members: Vec<MemberSubscription> = g.members.iter().map(|m| {
                let mine = owned.get(&m.member_id).cloned().unwrap_or_default();
                let list: Vec<TopicPartition> = mine.iter().cloned().collect();
                m.clone().with_owned(group_partitions(&mine)).with_user_data(a.user_data(&list, generation))
            }).collect();
            let r = a.assign(&members, &g.topics);
            check_valid(&g, &r, false)?;
            // Safety: nothing new to a member while someone else owns it.
            for m in &g.members {
                let mine = owned.get(&m.member_id).cloned().unwrap_or_default();
                for tp in flat(&r, &m.member_id).difference(&mine) {
                    for (other, theirs) in &owned {
                        prop_assert!(other == &m.member_id || !theirs.contains(tp),
                            "round {}: {} given to {} while {} owns it", round, tp, m.member_id, other);
                    }
                }
            }
            // Every member revokes what it lost and takes what it got.
            let next: BTreeMap<String, BTreeSet<TopicPartition>> =
                g.members.iter().map(|m| (m.member_id.clone(), flat(&r, &m.member_id))).collect();
            let stable = next == owned
                || (owned.values().all(BTreeSet::is_empty) && next.values().all(BTreeSet::is_empty));
            owned = next;
            if stable && round > 0 {
                break;
            }
        }
        // Converged: a complete, balanced assignment that the next round leaves alone.
        let final_view: GroupAssignment = owned.iter().map(|(m, s)| (m.clone(), group_partitions(s))).collect();
        check_valid(&g, &final_view, true)?;
        check_locally_balanced(&g, &final_view)?;
    }
}
