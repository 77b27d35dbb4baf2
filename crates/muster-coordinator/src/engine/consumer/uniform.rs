//! The `uniform` server assignor (protocol-v1 §7 "Server assignors", the default; Kafka 4's
//! `UniformAssignor`): every partition of the subscribed topics goes to exactly one member that
//! subscribes to it, as evenly as the subscriptions allow, and sticky — a change moves only
//! what must move.
//!
//! - **Same subscription everywhere** (the usual case): counts differ by at most one. Each
//!   member keeps what it had up to its share (members that had more keep one extra while the
//!   remainder lasts); the rest is dealt to the members below their share, fewest first. When a
//!   member joins a group of N, about P/(N+1) partitions move, all to it; when one leaves, only
//!   its partitions move. O(P log N).
//! - **Different subscriptions**: each member keeps what it may still have; the rest goes,
//!   most constrained partition first, to the least loaded member that subscribes; then, while
//!   a member can pass a partition along a chain of subscribers to one with at least two
//!   fewer, it does. Balanced as far as the subscriptions allow.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::Partitions;

/// What an assignor is asked: the members' subscriptions (topics that exist), the topics'
/// partition counts, and the current target (for stickiness).
pub struct AssignmentSpec<'a> {
    pub members: &'a BTreeMap<String, BTreeSet<String>>,
    pub partition_counts: &'a BTreeMap<String, i32>,
    pub current: &'a BTreeMap<String, Partitions>,
}

/// The target: every member's partitions (members with none included).
pub type Target = BTreeMap<String, Partitions>;

/// Computes the `uniform` target.
pub fn assign_uniform(spec: &AssignmentSpec<'_>) -> Target {
    let members: Vec<&String> = spec.members.keys().collect();
    if members.is_empty() {
        return Target::new();
    }
    let first = &spec.members[members[0]];
    if spec.members.values().all(|topics| topics == first) {
        homogeneous(spec, &members, first)
    } else {
        heterogeneous(spec, &members)
    }
}

/// One topic-partition.
type Tp<'a> = (&'a str, i32);

fn count_of(spec: &AssignmentSpec<'_>, topic: &str) -> i32 {
    spec.partition_counts
        .get(topic)
        .copied()
        .unwrap_or(0)
        .max(0)
}

/// The current partitions of `member` that still exist and that it still subscribes to.
fn still_valid<'a>(
    spec: &'a AssignmentSpec<'_>,
    member: &str,
    subscribed: &'a BTreeSet<String>,
) -> impl Iterator<Item = Tp<'a>> + 'a {
    spec.current
        .get(member)
        .into_iter()
        .flat_map(|parts| parts.iter())
        .filter(move |(topic, _)| subscribed.contains(*topic))
        .flat_map(move |(topic, ps)| {
            let count = count_of(spec, topic);
            ps.iter()
                .copied()
                .filter(move |&p| p < count)
                .map(move |p| (topic.as_str(), p))
        })
}

fn into_target(members: &[&String], assigned: Vec<Vec<Tp<'_>>>) -> Target {
    members
        .iter()
        .zip(assigned)
        .map(|(member, tps)| {
            let mut parts = Partitions::new();
            for (topic, p) in tps {
                parts.entry(topic.to_owned()).or_default().insert(p);
            }
            ((*member).clone(), parts)
        })
        .collect()
}

fn homogeneous<'a>(
    spec: &'a AssignmentSpec<'_>,
    members: &[&'a String],
    topics: &'a BTreeSet<String>,
) -> Target {
    let total: usize = topics.iter().map(|t| count_of(spec, t) as usize).sum();
    let n = members.len();
    let share = total / n;
    let mut extra = total % n;
    let mut taken: HashSet<Tp<'a>> = HashSet::with_capacity(total);
    let mut assigned: Vec<Vec<Tp<'a>>> = Vec::with_capacity(n);
    // Keep what each member had, up to its share (one more while the remainder lasts).
    for member in members {
        let mut kept: Vec<Tp<'a>> = Vec::new();
        for tp in still_valid(spec, member, topics) {
            if kept.len() < share || (kept.len() == share && extra > 0) {
                if taken.insert(tp) {
                    if kept.len() == share {
                        extra -= 1;
                    }
                    kept.push(tp);
                }
            } else {
                break;
            }
        }
        assigned.push(kept);
    }
    // Deal the rest: first up to the share, fewest first; then the remainder, one each.
    let mut free = topics
        .iter()
        .flat_map(|t| (0..count_of(spec, t)).map(move |p| (t.as_str(), p)))
        .filter(|tp| !taken.contains(tp));
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (assigned[i].len(), i));
    for &i in &order {
        while assigned[i].len() < share {
            match free.next() {
                Some(tp) => assigned[i].push(tp),
                None => break,
            }
        }
    }
    for &i in &order {
        if extra == 0 {
            break;
        }
        if assigned[i].len() == share {
            if let Some(tp) = free.next() {
                assigned[i].push(tp);
                extra -= 1;
            }
        }
    }
    debug_assert!(free.next().is_none(), "every partition is dealt");
    into_target(members, assigned)
}

fn heterogeneous<'a>(spec: &'a AssignmentSpec<'_>, members: &[&'a String]) -> Target {
    let subscribers: BTreeMap<&str, Vec<usize>> = {
        let mut by_topic: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, member) in members.iter().enumerate() {
            for topic in &spec.members[*member] {
                by_topic.entry(topic.as_str()).or_default().push(i);
            }
        }
        by_topic
    };
    let mut taken: HashSet<Tp<'a>> = HashSet::new();
    let mut assigned: Vec<Vec<Tp<'a>>> = members
        .iter()
        .map(|member| {
            still_valid(spec, member, &spec.members[*member])
                .filter(|tp| taken.insert(*tp))
                .collect()
        })
        .collect();
    // The rest, most constrained first, each to its least loaded subscriber.
    let mut free: Vec<Tp<'a>> = subscribers
        .keys()
        .flat_map(|t| (0..count_of(spec, t)).map(move |p| (*t, p)))
        .filter(|tp| !taken.contains(tp))
        .collect();
    free.sort_by_key(|(t, p)| (subscribers[t].len(), *t, *p));
    for tp in free {
        let least = subscribers[tp.0]
            .iter()
            .copied()
            .min_by_key(|&i| (assigned[i].len(), i));
        if let Some(i) = least {
            assigned[i].push(tp);
        }
    }
    // Even out: while some member can pass a partition along a chain of subscribers (each
    // hands one on to the next) to a member with at least two fewer, do so. Each shift lowers
    // the sum of squared counts, so this ends; when it does, no member could lose a partition
    // to a less loaded one by any chain, the best the subscriptions allow.
    loop {
        let mut by_load: Vec<usize> = (0..members.len()).collect();
        by_load.sort_by_key(|&i| (std::cmp::Reverse(assigned[i].len()), i));
        let shifted = by_load
            .iter()
            .find_map(|&heavy| chain_from(heavy, &assigned, &subscribers));
        let Some(chain) = shifted else {
            break;
        };
        for (from, to, tp) in chain {
            if let Some(k) = assigned[from].iter().position(|x| *x == tp) {
                assigned[from].swap_remove(k);
                assigned[to].push(tp);
            }
        }
    }
    into_target(members, assigned)
}

/// A chain of hand-overs from `heavy` to a member with at least two fewer partitions, found
/// breadth first (shortest): each step `(from, to, tp)` passes one of `from`'s partitions to a
/// member subscribed to its topic. `None` when no such member is reachable.
fn chain_from<'a>(
    heavy: usize,
    assigned: &[Vec<Tp<'a>>],
    subscribers: &BTreeMap<&str, Vec<usize>>,
) -> Option<Vec<(usize, usize, Tp<'a>)>> {
    let load = assigned[heavy].len();
    let mut came_from: Vec<Option<(usize, Tp<'a>)>> = vec![None; assigned.len()];
    let mut seen = vec![false; assigned.len()];
    seen[heavy] = true;
    let mut queue = std::collections::VecDeque::from([heavy]);
    while let Some(u) = queue.pop_front() {
        for &tp in &assigned[u] {
            for &v in &subscribers[tp.0] {
                if seen[v] {
                    continue;
                }
                seen[v] = true;
                came_from[v] = Some((u, tp));
                if assigned[v].len() + 2 <= load {
                    let mut chain = Vec::new();
                    let mut at = v;
                    while let Some((from, tp)) = came_from[at] {
                        chain.push((from, at, tp));
                        at = from;
                    }
                    chain.reverse();
                    return Some(chain);
                }
                queue.push_back(v);
            }
        }
    }
    None
}
