//! Which shards a node should claim and which it should give away, from what it sees of the
//! cluster: the live nodes and each shard's owner. Pure (no etcd, no clock): the ownership loop
//! in musterd feeds it what it read and carries out the answer.
//!
//! Every live node has a *target*: the shards split as evenly as they go, nodes in id order
//! taking one extra while the remainder lasts (64 shards on 3 nodes: 22, 21, 21). Targets sum
//! to the shard count, so:
//! - a node under its target claims unowned shards (etcd decides races: a claim is a create
//!   that fails when the key exists), never past its target;
//! - a node over its target (a node joined, so targets fell) gives its excess away, and the
//!   nodes under theirs claim what it released. The excess of the nodes over their targets is
//!   exactly what the others miss, so nothing is given away twice.
//!
//! Nodes that see different node lists for a moment compute different targets; the claims
//! they race for are decided by etcd, and the next read settles the counts.

use std::collections::BTreeMap;

/// What the ownership loop should do now.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Moves {
    /// Unowned shards to try to claim, best first.
    pub claim: Vec<u32>,
    /// Shards of ours to hand over.
    pub release: Vec<u32>,
}

/// `nodes`: the live node ids (any order); `owners`: each owned shard's owner (a shard absent
/// is unowned; an owner that is not a live node still holds its key until its lease expires,
/// so the shard counts as owned); `me`: this node. `busy`: shards of ours being loaded or
/// released right now (neither claimed again nor released twice).
pub fn plan(
    shards: u32,
    nodes: &[String],
    owners: &BTreeMap<u32, String>,
    me: &str,
    busy: &[u32],
) -> Moves {
    let mut sorted: Vec<&str> = nodes.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let Some(my_index) = sorted.iter().position(|n| *n == me) else {
        // Not registered (yet, or any more): nothing is ours to take.
        return Moves::default();
    };
    let n = sorted.len() as u32;
    let target = |index: usize| shards / n + u32::from((index as u32) < shards % n);
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for owner in owners.values() {
        *counts.entry(owner.as_str()).or_default() += 1;
    }
    let mine: Vec<u32> = owners
        .iter()
        .filter(|(_, owner)| owner.as_str() == me)
        .map(|(&shard, _)| shard)
        .collect();
    let my_count = mine.len() as u32;
    let my_target = target(my_index);
    let mut moves = Moves::default();
    if my_count < my_target {
        // Start at a different place per node, so that nodes starting together race less.
        let start = (u64::from(shards) * my_index as u64 / u64::from(n)) as u32;
        moves.claim = (0..shards)
            .map(|i| (start + i) % shards.max(1))
            .filter(|s| !owners.contains_key(s) && !busy.contains(s))
            .take((my_target - my_count) as usize)
            .collect();
    } else if my_count > my_target {
        // Only when a live node is under its target: nodes that are gone (their keys still
        // held until their leases expire) are nobody to give to.
        let deficit: u32 = sorted
            .iter()
            .enumerate()
            .map(|(i, node)| target(i).saturating_sub(counts.get(node).copied().unwrap_or(0)))
            .sum();
        let unowned = shards.saturating_sub(owners.len() as u32);
        let wanted = deficit.saturating_sub(unowned);
        let excess = (my_count - my_target).min(wanted);
        // The highest-numbered first: a deterministic choice, which the tests can state.
        moves.release = mine
            .iter()
            .rev()
            .filter(|s| !busy.contains(s))
            .take(excess as usize)
            .copied()
            .collect();
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    /// Runs the planner for every node in turn, applying its moves at once, until nothing
    /// moves; returns each node's count.
    fn settle(shards: u32, live: &[&str], owners: &mut BTreeMap<u32, String>) -> Vec<u32> {
        let live = nodes(live);
        for _ in 0..100 {
            let mut moved = false;
            for me in &live {
                let m = plan(shards, &live, owners, me, &[]);
                for s in m.release {
                    owners.remove(&s);
                    moved = true;
                }
                for s in m.claim {
                    owners.entry(s).or_insert_with(|| me.clone());
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        live.iter()
            .map(|n| owners.values().filter(|o| *o == n).count() as u32)
            .collect()
    }

    #[test]
    fn three_nodes_split_64_shards_22_21_21() {
        let mut owners = BTreeMap::new();
        assert_eq!(settle(64, &["a", "b", "c"], &mut owners), vec![22, 21, 21]);
        assert_eq!(owners.len(), 64);
    }

    #[test]
    fn a_node_alone_takes_everything_then_shares_when_others_join() {
        let mut owners = BTreeMap::new();
        assert_eq!(settle(64, &["b"], &mut owners), vec![64]);
        let before = owners.clone();
        assert_eq!(settle(64, &["a", "b"], &mut owners), vec![32, 32]);
        // Only what had to move moved: b kept 32 of its shards.
        let kept = owners
            .iter()
            .filter(|(s, o)| before.get(s) == Some(o))
            .count();
        assert_eq!(kept, 32);
        assert_eq!(settle(64, &["a", "b", "c"], &mut owners), vec![22, 21, 21]);
    }

    #[test]
    fn a_dead_nodes_shards_go_to_the_survivors() {
        let mut owners = BTreeMap::new();
        settle(64, &["a", "b", "c"], &mut owners);
        // c died: its lease expired and etcd deleted its keys.
        owners.retain(|_, o| o != "c");
        assert_eq!(settle(64, &["a", "b"], &mut owners), vec![32, 32]);
    }

    #[test]
    fn nothing_is_released_to_a_node_that_is_gone_but_still_holds_keys() {
        let mut owners = BTreeMap::new();
        settle(8, &["a", "b"], &mut owners);
        // b is no longer registered, its owner keys not yet expired: a is over its target of 8?
        // No: a's target is now 8 and it holds 4; it claims nothing (nothing unowned) and
        // releases nothing.
        let m = plan(8, &nodes(&["a"]), &owners, "a", &[]);
        assert_eq!(m, Moves::default());
    }

    #[test]
    fn an_unregistered_node_does_nothing() {
        let m = plan(8, &nodes(&["a"]), &BTreeMap::new(), "z", &[]);
        assert_eq!(m, Moves::default());
    }

    #[test]
    fn busy_shards_are_neither_claimed_nor_released_again() {
        let m = plan(4, &nodes(&["a"]), &BTreeMap::new(), "a", &[1, 2]);
        assert_eq!(m.claim, vec![0, 3]);
        let owners: BTreeMap<u32, String> = (0..4).map(|s| (s, "a".to_string())).collect();
        let m = plan(4, &nodes(&["a", "b"]), &owners, "a", &[3]);
        assert_eq!(m.release, vec![2, 1]);
    }

    #[test]
    fn more_nodes_than_shards_leaves_some_nodes_without() {
        let mut owners = BTreeMap::new();
        assert_eq!(settle(2, &["a", "b", "c"], &mut owners), vec![1, 1, 0]);
    }
}
