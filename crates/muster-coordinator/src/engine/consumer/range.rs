//! The `range` server assignor (protocol-v1 §7 "Server assignors"; Kafka 4's server-side
//! `RangeAssignor`): topic by topic, its subscribers (in member-id order) share its partitions
//! in ranges, `count / n` each and one more for the first `count % n` — so topics with the same
//! partition count and subscribers are co-partitioned (a member gets the same partition numbers
//! of each, for joins) — and sticky: a member keeps the lowest partitions it had, up to its
//! share, before anything is dealt.

use std::collections::{BTreeMap, BTreeSet};

use super::{AssignmentSpec, Partitions, Target};

/// Computes the `range` target.
pub fn assign_range(spec: &AssignmentSpec<'_>) -> Target {
    let mut target: Target = spec
        .members
        .keys()
        .map(|m| (m.clone(), Partitions::new()))
        .collect();
    let mut subscribers: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for (member, topics) in spec.members {
        for topic in topics {
            subscribers.entry(topic.as_str()).or_default().push(member);
        }
    }
    let empty = BTreeSet::new();
    for (topic, members) in subscribers {
        let count = spec
            .partition_counts
            .get(topic)
            .copied()
            .unwrap_or(0)
            .max(0);
        if count == 0 {
            continue;
        }
        let share = count as usize / members.len();
        let mut extra = count as usize % members.len();
        let mut kept: BTreeSet<i32> = BTreeSet::new();
        // (member, how many more it needs to reach its share; negative: it had more)
        let mut short: Vec<(&String, usize)> = Vec::new();
        for member in &members {
            let had: Vec<i32> = spec
                .current
                .get(*member)
                .and_then(|parts| parts.get(topic))
                .unwrap_or(&empty)
                .iter()
                .copied()
                .filter(|&p| p < count && !kept.contains(&p))
                .collect();
            let keep = had.len().min(share);
            let mine = target
                .get_mut(*member)
                .map(|parts| parts.entry(topic.to_owned()).or_default());
            let Some(mine) = mine else { continue };
            mine.extend(&had[..keep]);
            kept.extend(&had[..keep]);
            if had.len() > share && extra > 0 {
                // It had more: it keeps one of the extra partitions too.
                extra -= 1;
                mine.insert(had[share]);
                kept.insert(had[share]);
            } else {
                short.push((member, share - keep));
            }
        }
        let mut free = (0..count).filter(|p| !kept.contains(p));
        for (member, mut needs) in short {
            if extra > 0 {
                needs += 1;
                extra -= 1;
            }
            if let Some(mine) = target.get_mut(member) {
                let entry = mine.entry(topic.to_owned()).or_default();
                entry.extend(free.by_ref().take(needs));
            }
        }
    }
    for parts in target.values_mut() {
        parts.retain(|_, ps| !ps.is_empty());
    }
    target
}
