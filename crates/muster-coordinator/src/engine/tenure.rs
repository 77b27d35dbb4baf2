//! Partition ownership and its epochs (protocol §6.23): who owns (or last owned) each partition
//! of the group, and the ownership epoch, a fencing token that rises each time the partition
//! gets another owner and is never reused.
//!
//! One map serves both protocols. A classic member owns what the leader's SyncGroup gave it
//! (`sync.rs`), and keeps owning a partition the cooperative protocol takes from it until the
//! generation that gives it to someone else: that is when it commits the partition's last
//! offsets (Kafka's `onPartitionsRevoked`). A consumer-protocol member owns what it holds
//! (its assigned and pending-revocation partitions, `consumer/group.rs`'s `move_ownership`):
//! a partition reaches its next owner only once the previous one released it. A static
//! member's new incarnation takes its partitions over with new epochs: the old process may
//! still be running.
//!
//! The epoch a partition gets is `max(previous + 1, generation)`, the generation (or member
//! epoch) in which its new owner got it: strictly rising, and, as generations are never reused,
//! a partition that leaves and comes back to a group's members never repeats one. The map is in
//! the group's record, so a restart or a failover continues from it.
//!
//! OffsetCommit's ownership check (`offsets.rs`, `ownership_check`) asks [`Tenure::owns`].

use std::sync::Arc;

use muster_protocol::{
    ErrorCode, OwnershipEpochsRequest, OwnershipEpochsResponse, PartitionEpoch, TopicEpochs,
    TopicPartitions,
};

use super::{Group, Map, Millis, NONE};
use crate::storage::OwnershipRecord;

/// A partition's owner and ownership epoch.
#[derive(Debug, Clone)]
struct Owner {
    epoch: i32,
    member: Arc<str>,
}

/// Who owns each partition of a group, and since which epoch.
#[derive(Debug, Default)]
pub(super) struct Tenure {
    owners: Map<Box<str>, Map<i32, Owner>>,
}

impl Tenure {
    /// `member` owns `partition` of `topic` from `generation` on: a new owner gets a new epoch;
    /// the present owner keeps its own. Returns whether anything changed.
    pub(super) fn grant(
        &mut self,
        member: &Arc<str>,
        topic: &str,
        partition: i32,
        generation: i32,
    ) -> bool {
        let partitions = match self.owners.get_mut(topic) {
            Some(p) => p,
            None => self.owners.entry(Box::from(topic)).or_default(),
        };
        match partitions.get_mut(&partition) {
            Some(owner) if owner.member == *member => false,
            Some(owner) => {
                owner.epoch = owner.epoch.saturating_add(1).max(generation);
                owner.member = Arc::clone(member);
                true
            }
            None => {
                partitions.insert(
                    partition,
                    Owner {
                        epoch: generation.max(1),
                        member: Arc::clone(member),
                    },
                );
                true
            }
        }
    }

    /// [`Tenure::grant`] for every partition of a classic assignment.
    pub(super) fn grant_all(
        &mut self,
        member: &Arc<str>,
        assignment: &[TopicPartitions],
        generation: i32,
    ) -> bool {
        let mut changed = false;
        for t in assignment {
            for &p in &t.partitions {
                changed |= self.grant(member, &t.topic, p, generation);
            }
        }
        changed
    }

    /// Whether `member` owns `partition` of `topic`.
    pub(super) fn owns(&self, member: &str, topic: &str, partition: i32) -> bool {
        self.owners
            .get(topic)
            .and_then(|p| p.get(&partition))
            .is_some_and(|o| &*o.member == member)
    }

    /// The epochs of the partitions `member` owns among `candidates` (its assignment), sorted.
    pub(super) fn epochs<'a>(
        &self,
        member: &str,
        candidates: impl Iterator<Item = (&'a str, i32)>,
    ) -> Vec<TopicEpochs> {
        let mut found: std::collections::BTreeMap<&str, Vec<PartitionEpoch>> =
            std::collections::BTreeMap::new();
        for (topic, partition) in candidates {
            let Some(owner) = self.owners.get(topic).and_then(|p| p.get(&partition)) else {
                continue;
            };
            if &*owner.member == member {
                found.entry(topic).or_default().push(PartitionEpoch {
                    partition,
                    epoch: owner.epoch,
                });
            }
        }
        found
            .into_iter()
            .map(|(topic, mut partitions)| {
                partitions.sort_unstable_by_key(|p| p.partition);
                partitions.dedup_by_key(|p| p.partition);
                TopicEpochs {
                    topic: topic.to_owned(),
                    partitions,
                }
            })
            .collect()
    }

    /// The partitions `member` owns (any assignment), sorted: for a member whose assignment
    /// the group does not keep in one place.
    pub(super) fn all_of(&self, member: &str) -> Vec<TopicEpochs> {
        let mut topics: Vec<TopicEpochs> = self
            .owners
            .iter()
            .filter_map(|(topic, parts)| {
                let mut partitions: Vec<PartitionEpoch> = parts
                    .iter()
                    .filter(|(_, o)| &*o.member == member)
                    .map(|(&partition, o)| PartitionEpoch {
                        partition,
                        epoch: o.epoch,
                    })
                    .collect();
                if partitions.is_empty() {
                    return None;
                }
                partitions.sort_unstable_by_key(|p| p.partition);
                Some(TopicEpochs {
                    topic: topic.to_string(),
                    partitions,
                })
            })
            .collect();
        topics.sort_unstable_by(|a, b| a.topic.cmp(&b.topic));
        topics
    }

    /// The durable form, sorted by topic and partition.
    pub(super) fn to_records(&self) -> Vec<OwnershipRecord> {
        let mut records: Vec<OwnershipRecord> = self
            .owners
            .iter()
            .flat_map(|(topic, parts)| {
                parts.iter().map(move |(&partition, o)| OwnershipRecord {
                    topic: topic.to_string(),
                    partition,
                    epoch: o.epoch,
                    owner: o.member.to_string(),
                })
            })
            .collect();
        records.sort_unstable_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        records
    }

    /// Rebuilds the map from its durable form; owners that are members share their id's
    /// allocation through `intern`.
    pub(super) fn restore(
        records: Vec<OwnershipRecord>,
        mut intern: impl FnMut(&str) -> Option<Arc<str>>,
    ) -> Self {
        let mut tenure = Tenure::default();
        for r in records {
            let member = intern(&r.owner).unwrap_or_else(|| Arc::from(r.owner.as_str()));
            tenure
                .owners
                .entry(r.topic.into_boxed_str())
                .or_default()
                .insert(
                    r.partition,
                    Owner {
                        epoch: r.epoch,
                        member,
                    },
                );
        }
        tenure
    }
}

impl<R> Group<R> {
    /// OwnershipEpochs (protocol §6.23): the epochs of every partition the member owns,
    /// checked as its OffsetCommit would be. A query with one side effect: the member is
    /// heard from.
    pub fn ownership_epochs(
        &mut self,
        now: Millis,
        req: &OwnershipEpochsRequest,
    ) -> OwnershipEpochsResponse {
        let refused = |code: ErrorCode| OwnershipEpochsResponse {
            error_code: code.code(),
            generation_id: -1,
            topics: Vec::new(),
        };
        if req.member_id.is_empty() {
            return refused(ErrorCode::UnknownMemberId);
        }
        let member = match self.check_member_request(
            now,
            &req.member_id,
            req.generation_id,
            req.group_instance_id.as_deref(),
        ) {
            Ok(Some(member)) => member,
            Ok(None) => return refused(ErrorCode::UnknownMemberId),
            Err(code) => return refused(code),
        };
        let topics = match self.members.get(&*member) {
            // A classic member: its assignment, and what it keeps owning past it until
            // another member is given it (the cooperative hand-over).
            Some(_) => self.tenure.all_of(&member),
            None => {
                let part = self.consumer.as_deref();
                match part.and_then(|p| p.members.get(&*member)) {
                    Some(m) => self.tenure.epochs(
                        &member,
                        [&m.assignment.assigned, &m.assignment.pending_revocation]
                            .into_iter()
                            .flat_map(|set| {
                                set.iter().flat_map(|(topic, ps)| {
                                    ps.iter().map(move |&p| (topic.as_str(), p))
                                })
                            }),
                    ),
                    None => Vec::new(),
                }
            }
        };
        OwnershipEpochsResponse {
            error_code: NONE,
            generation_id: req.generation_id,
            topics,
        }
    }

    /// The ownership map's durable form (for the group's record).
    pub(super) fn ownership_record(&self) -> Vec<OwnershipRecord> {
        self.tenure.to_records()
    }
}
