//! The sticky assignors: `sticky` (eager) and `cooperative-sticky` (cooperative, KIP-429).
//!
//! # Goals, in order
//!
//! 1. every partition of a subscribed topic goes to exactly one subscriber;
//! 2. balance: no member could give a partition to another subscriber of its topic that holds
//!    two or more partitions fewer (so with equal subscriptions the counts differ by at most
//!    one);
//! 3. stickiness: a partition stays with its previous owner unless balance needs it elsewhere.
//!
//! # Algorithm (ours, not a port of Kafka's)
//!
//! 1. *Claims.* Each member's previous partitions are kept where still valid: the partition
//!    exists and the member still subscribes to its topic. Two members claiming one partition
//!    are resolved by the generation their claim comes from (the higher wins; on a tie, the
//!    first in Kafka's member order).
//! 2. *Fill.* Unclaimed partitions, those with the fewest possible consumers first, each go to
//!    the subscriber that holds the fewest partitions (ties: member order). For equal
//!    subscriptions and no history this deals partitions out in turn, which is Kafka's result.
//! 3. *Balance.* While some member holds two or more partitions more than a subscriber of one
//!    of its topics, it gives that subscriber one partition, newly filled ones before kept
//!    ones. Each move lowers the sum of squared counts, so this ends.
//!
//! With unchanged members and partitions the result of a previous run is already balanced and
//! nothing moves; when a member leaves, only its partitions are dealt out (with equal
//! subscriptions the survivors keep all theirs).
//!
//! # Where previous ownership comes from
//!
//! - `sticky` (eager): eager members revoke everything before rejoining, so their `JoinGroup`
//!   carries no owned partitions. Like Kafka's `StickyAssignor`, the member puts its previous
//!   assignment *and its generation* in the assignor's user data ([`StickyUserData`]). When a
//!   member's user data is empty, its `owned_partitions` are used instead.
//! - `cooperative-sticky`: members keep their partitions through the rebalance and list them in
//!   `owned_partitions`; the user data carries only the generation, for resolving conflicting
//!   claims (Kafka's `CooperativeStickyAssignor` does the same).
//!
//! # Cooperative rule
//!
//! After computing the target assignment, `cooperative-sticky` withholds from each member
//! every partition it does not own yet but that another member claims in `owned_partitions`:
//! that owner is told to give it up (it is not in the owner's new assignment), revokes it and
//! rejoins, and the follow-up rebalance hands it to its new owner. A partition is therefore
//! never assigned to a new member while another still owns it.
//!
//! # User data format
//!
//! ```text
//! version: u8 = 1 | generation: i32 BE | topic count: u32 BE |
//!   per topic: name length: u16 BE | name: UTF-8 | partition count: u32 BE | partitions: i32 BE…
//! ```

use std::collections::{BTreeMap, BTreeSet};

use super::{
    finish, member_order, partition_count, Assignor, GroupAssignment, MemberSubscription,
    RebalanceProtocol,
};
use crate::partition::{flatten_partitions, group_partitions, TopicPartition};

pub(crate) const STICKY: &str = "sticky";
pub(crate) const COOPERATIVE_STICKY: &str = "cooperative-sticky";

/// The sticky assignor (eager): balanced, and keeps partitions with their previous owners,
/// which it learns from the members' user data.
#[derive(Debug, Clone, Copy, Default)]
pub struct StickyAssignor;

/// The cooperative sticky assignor: as [`StickyAssignor`], but members keep their partitions
/// through a rebalance, and a partition that moves is first revoked by its owner and assigned
/// to its new owner only in the follow-up rebalance.
#[derive(Debug, Clone, Copy, Default)]
pub struct CooperativeStickyAssignor;

impl Assignor for StickyAssignor {
    fn name(&self) -> &str {
        STICKY
    }

    fn user_data(&self, owned: &[TopicPartition], generation: i32) -> Vec<u8> {
        StickyUserData {
            generation,
            partitions: owned.to_vec(),
        }
        .encode()
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions_per_topic: &BTreeMap<String, i32>,
    ) -> GroupAssignment {
        let claims = members
            .iter()
            .map(|m| match StickyUserData::decode(&m.user_data) {
                Some(data) if !m.user_data.is_empty() => Claim {
                    generation: data.generation,
                    partitions: data.partitions.into_iter().collect(),
                },
                _ => Claim {
                    generation: -1,
                    partitions: flatten_partitions(&m.owned_partitions),
                },
            })
            .collect::<Vec<_>>();
        let target = sticky_assign(members, &claims, partitions_per_topic);
        finish(members, target)
    }
}

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &str {
        COOPERATIVE_STICKY
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    fn user_data(&self, _owned: &[TopicPartition], generation: i32) -> Vec<u8> {
        StickyUserData {
            generation,
            partitions: Vec::new(),
        }
        .encode()
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions_per_topic: &BTreeMap<String, i32>,
    ) -> GroupAssignment {
        let claims = members
            .iter()
            .map(|m| Claim {
                generation: StickyUserData::decode(&m.user_data).map_or(-1, |d| d.generation),
                partitions: flatten_partitions(&m.owned_partitions),
            })
            .collect::<Vec<_>>();
        let mut target = sticky_assign(members, &claims, partitions_per_topic);
        withhold_partitions_in_transfer(members, &claims, &mut target);
        finish(members, target)
    }
}

/// A member's previous partitions and the generation they come from.
struct Claim {
    generation: i32,
    partitions: BTreeSet<TopicPartition>,
}

/// The cooperative rule: a member gets no partition that another member still owns and is
/// about to revoke.
fn withhold_partitions_in_transfer(
    members: &[MemberSubscription],
    claims: &[Claim],
    target: &mut BTreeMap<String, Vec<TopicPartition>>,
) {
    let mut claimants: BTreeMap<&TopicPartition, Vec<&str>> = BTreeMap::new();
    for (member, claim) in members.iter().zip(claims) {
        for tp in &claim.partitions {
            claimants
                .entry(tp)
                .or_default()
                .push(member.member_id.as_str());
        }
    }
    for (member, claim) in members.iter().zip(claims) {
        if let Some(assigned) = target.get_mut(&member.member_id) {
            assigned.retain(|tp| {
                claim.partitions.contains(tp)
                    || claimants
                        .get(tp)
                        .is_none_or(|owners| owners.iter().all(|o| *o == member.member_id))
            });
        }
    }
}

/// Steps 1 to 3 of the module docs. `claims[i]` belongs to `members[i]`.
fn sticky_assign(
    members: &[MemberSubscription],
    claims: &[Claim],
    partitions_per_topic: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    // Members in Kafka's order; `idx` below indexes this order.
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&a, &b| member_order(&members[a], &members[b]));
    let subs: Vec<&MemberSubscription> = order.iter().map(|&i| &members[i]).collect();
    let member_claims: Vec<&Claim> = order.iter().map(|&i| &claims[i]).collect();

    // Topic → indexes of its subscribers; only topics that exist and have subscribers.
    let mut subscribers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for topic in partitions_per_topic.keys() {
        let list: Vec<usize> = (0..subs.len())
            .filter(|&i| subs[i].subscribes_to(topic))
            .collect();
        if !list.is_empty() {
            subscribers.insert(topic.as_str(), list);
        }
    }
    let all: Vec<TopicPartition> = subscribers
        .keys()
        .flat_map(|topic| {
            (0..partition_count(partitions_per_topic, topic))
                .map(|p| TopicPartition::new(*topic, p))
        })
        .collect();

    // 1. Claims: highest generation wins, then member order.
    let mut owner: BTreeMap<&TopicPartition, (i32, usize)> = BTreeMap::new();
    for (idx, claim) in member_claims.iter().enumerate() {
        for tp in &claim.partitions {
            let valid = subscribers
                .get(tp.topic.as_str())
                .is_some_and(|list| list.contains(&idx))
                && tp.partition >= 0
                && tp.partition < partition_count(partitions_per_topic, &tp.topic);
            if !valid {
                continue;
            }
            match owner.get(tp) {
                Some(&(generation, _)) if generation >= claim.generation => {}
                _ => {
                    owner.insert(tp, (claim.generation, idx));
                }
            }
        }
    }
    let mut assigned: Vec<BTreeSet<TopicPartition>> = vec![BTreeSet::new(); subs.len()];
    // Partitions given in this run rather than kept (moved first when balancing).
    let mut fresh: Vec<BTreeSet<TopicPartition>> = vec![BTreeSet::new(); subs.len()];
    for (tp, &(_, idx)) in &owner {
        assigned[idx].insert((*tp).clone());
    }

    // 2. Fill: fewest possible consumers first, to the least loaded subscriber.
    let mut unclaimed: Vec<&TopicPartition> =
        all.iter().filter(|tp| !owner.contains_key(tp)).collect();
    let consumers_of = |tp: &TopicPartition| subscribers.get(tp.topic.as_str()).map_or(0, Vec::len);
    unclaimed.sort_by(|a, b| consumers_of(a).cmp(&consumers_of(b)).then_with(|| a.cmp(b)));
    for tp in unclaimed {
        let Some(list) = subscribers.get(tp.topic.as_str()) else {
            continue;
        };
        if let Some(&idx) = list.iter().min_by_key(|&&i| (assigned[i].len(), i)) {
            assigned[idx].insert(tp.clone());
            fresh[idx].insert(tp.clone());
        }
    }

    // 3. Balance by single moves from a member to a subscriber with two or more fewer.
    while let Some((from, to, tp)) = find_move(&subscribers, &assigned, &fresh) {
        assigned[from].remove(&tp);
        fresh[from].remove(&tp);
        assigned[to].insert(tp.clone());
        fresh[to].insert(tp);
    }

    subs.iter()
        .zip(assigned)
        .map(|(m, set)| (m.member_id.clone(), set.into_iter().collect()))
        .collect()
}

/// The next balancing move: from the most loaded member that has one, the first partition
/// (freshly filled ones first, then kept ones, highest first) whose topic has a subscriber
/// holding two or more partitions fewer; it goes to the least loaded such subscriber.
fn find_move(
    subscribers: &BTreeMap<&str, Vec<usize>>,
    assigned: &[BTreeSet<TopicPartition>],
    fresh: &[BTreeSet<TopicPartition>],
) -> Option<(usize, usize, TopicPartition)> {
    let loads: Vec<usize> = assigned.iter().map(BTreeSet::len).collect();
    let global_min = loads.iter().copied().min()?;
    // The least loaded subscriber of each topic (ties: member order). A member can give a
    // partition away only to this one: if it is the least loaded itself, nobody has fewer.
    let least: BTreeMap<&str, usize> = subscribers
        .iter()
        .filter_map(|(topic, list)| {
            list.iter()
                .copied()
                .min_by_key(|&i| (loads[i], i))
                .map(|i| (*topic, i))
        })
        .collect();
    let mut by_load: Vec<usize> = (0..assigned.len()).collect();
    by_load.sort_by_key(|&i| (std::cmp::Reverse(loads[i]), i));
    for from in by_load {
        if loads[from] < global_min + 2 {
            break; // Nobody from here on holds two more than anyone.
        }
        let kept = assigned[from]
            .iter()
            .rev()
            .filter(|tp| !fresh[from].contains(*tp));
        for tp in fresh[from].iter().rev().chain(kept) {
            if let Some(&to) = least.get(tp.topic.as_str()) {
                if loads[from] > loads[to] + 1 {
                    return Some((from, to, tp.clone()));
                }
            }
        }
    }
    None
}

/// What a sticky member sends as user data: its previous assignment (empty for
/// `cooperative-sticky`, whose members send `owned_partitions`) and the generation it is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StickyUserData {
    pub generation: i32,
    pub partitions: Vec<TopicPartition>,
}

const USER_DATA_VERSION: u8 = 1;

impl StickyUserData {
    /// The format in the module docs.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![USER_DATA_VERSION];
        out.extend_from_slice(&self.generation.to_be_bytes());
        // Topic names longer than u16::MAX bytes cannot exist (the server allows 249).
        let grouped: Vec<_> = group_partitions(&self.partitions)
            .into_iter()
            .filter(|tp| u16::try_from(tp.topic.len()).is_ok())
            .collect();
        out.extend_from_slice(
            &u32::try_from(grouped.len())
                .unwrap_or(u32::MAX)
                .to_be_bytes(),
        );
        for tp in &grouped {
            let name_len = u16::try_from(tp.topic.len()).unwrap_or(u16::MAX);
            out.extend_from_slice(&name_len.to_be_bytes());
            out.extend_from_slice(tp.topic.as_bytes());
            let count = u32::try_from(tp.partitions.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&count.to_be_bytes());
            for p in &tp.partitions {
                out.extend_from_slice(&p.to_be_bytes());
            }
        }
        out
    }

    /// Decodes [`StickyUserData::encode`]'s format; `None` for anything else (a member whose
    /// user data is unreadable simply has no history). Never panics, never allocates more than
    /// the input's size.
    pub fn decode(bytes: &[u8]) -> Option<StickyUserData> {
        let mut r = Reader(bytes);
        if r.take::<1>()? != [USER_DATA_VERSION] {
            return None;
        }
        let generation = i32::from_be_bytes(r.take()?);
        let topics = u32::from_be_bytes(r.take()?);
        let mut partitions = Vec::new();
        for _ in 0..topics {
            let name_len = usize::from(u16::from_be_bytes(r.take()?));
            let name = std::str::from_utf8(r.slice(name_len)?).ok()?.to_owned();
            let count = u32::from_be_bytes(r.take()?);
            for _ in 0..count {
                partitions.push(TopicPartition::new(
                    name.clone(),
                    i32::from_be_bytes(r.take()?),
                ));
            }
        }
        r.0.is_empty().then_some(StickyUserData {
            generation,
            partitions,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    fn slice(&mut self, len: usize) -> Option<&'a [u8]> {
        let head = self.0.get(..len)?;
        self.0 = &self.0[len..];
        Some(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_protocol::TopicPartitions;

    fn tps(topic: &str, partitions: &[i32]) -> TopicPartitions {
        TopicPartitions {
            topic: topic.into(),
            partitions: partitions.to_vec(),
        }
    }

    #[test]
    fn user_data_round_trips_and_rejects_garbage() {
        let data = StickyUserData {
            generation: 7,
            partitions: vec![
                TopicPartition::new("b", 2),
                TopicPartition::new("a", 0),
                TopicPartition::new("a", 1),
            ],
        };
        let bytes = data.encode();
        let back = StickyUserData::decode(&bytes).expect("decodes");
        assert_eq!(back.generation, 7);
        assert_eq!(
            back.partitions,
            vec![
                TopicPartition::new("a", 0),
                TopicPartition::new("a", 1),
                TopicPartition::new("b", 2)
            ]
        );
        for cut in 0..bytes.len() {
            assert_eq!(StickyUserData::decode(&bytes[..cut]), None, "prefix {cut}");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(StickyUserData::decode(&trailing), None);
        // A huge declared count with no data behind it fails without allocating for it.
        let hostile = [1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(StickyUserData::decode(&hostile), None);
    }

    #[test]
    fn cooperative_withholds_partitions_that_change_owner() {
        // c1 owned everything; c2 joins. Balance wants t-2 and t-3 on c2, but c1 must revoke
        // them first: c2 gets nothing now, and c1 keeps only what stays with it.
        let owned = vec![tps("t", &[0, 1, 2, 3])];
        let gen = CooperativeStickyAssignor.user_data(
            &flatten_partitions(&owned).into_iter().collect::<Vec<_>>(),
            3,
        );
        let members = vec![
            MemberSubscription::new("c1", ["t"])
                .with_owned(owned)
                .with_user_data(gen),
            MemberSubscription::new("c2", ["t"]),
        ];
        let counts = BTreeMap::from([("t".to_owned(), 4)]);
        let first = CooperativeStickyAssignor.assign(&members, &counts);
        assert_eq!(first["c1"], vec![tps("t", &[0, 1])]);
        assert_eq!(first["c2"], vec![]);
        // Follow-up: c1 revoked t-2 and t-3 and rejoined owning only t-0, t-1.
        let members = vec![
            members[0].clone().with_owned(first["c1"].clone()),
            members[1].clone(),
        ];
        let second = CooperativeStickyAssignor.assign(&members, &counts);
        assert_eq!(second["c1"], vec![tps("t", &[0, 1])]);
        assert_eq!(second["c2"], vec![tps("t", &[2, 3])]);
    }

    #[test]
    fn higher_generation_wins_a_conflicting_claim() {
        let stale = StickyAssignor.user_data(&[TopicPartition::new("t", 0)], 1);
        let current = StickyAssignor.user_data(&[TopicPartition::new("t", 0)], 2);
        let members = vec![
            MemberSubscription::new("a", ["t"]).with_user_data(stale),
            MemberSubscription::new("b", ["t"]).with_user_data(current),
        ];
        let counts = BTreeMap::from([("t".to_owned(), 2)]);
        let result = StickyAssignor.assign(&members, &counts);
        assert_eq!(result["b"], vec![tps("t", &[0])]);
        assert_eq!(result["a"], vec![tps("t", &[1])]);
    }
}
