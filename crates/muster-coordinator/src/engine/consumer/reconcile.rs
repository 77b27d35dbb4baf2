//! Reconciling one consumer-protocol member toward its target assignment (protocol-v1 §7
//! "Epochs"; Kafka 4's `CurrentAssignmentBuilder` is the reference): partitions leave first,
//! and a partition joins a member only once its previous owner stopped reporting it. No global
//! barrier: each member moves on its own heartbeats.
//!
//! A member is in one of three states ([`MemberState`]):
//! - **Stable**: it holds its epoch's partitions, nothing to give up, nothing waiting.
//! - **UnrevokedPartitions**: it was asked to give some partitions up. It stays at its epoch (so
//!   what it still holds is not handed out) until its heartbeat's owned partitions no longer
//!   name any of them.
//! - **UnreleasedPartitions**: it moved to the target epoch, but some of its target partitions
//!   are still held by another member; it gets each once that member lets go.
//!
//! Pure: the group supplies who holds what ([`Reconcile::held`]) and what the member reported.

use std::collections::{BTreeMap, BTreeSet};

use muster_protocol::TopicPartitions;

/// Partitions by topic, sorted (a member's assignment, a target, a set to revoke).
pub type Partitions = BTreeMap<String, BTreeSet<i32>>;

/// Where a member stands in reconciling toward its target (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
}

/// What a member holds, as the group records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAssignment {
    pub state: MemberState,
    /// The member's epoch: the target epoch it has reached.
    pub epoch: i32,
    /// The partitions it owns now (what its heartbeat answer tells it).
    pub assigned: Partitions,
    /// Partitions it was asked to give up and has not yet stopped reporting.
    pub pending_revocation: Partitions,
}

/// What a member is reconciled against, for one heartbeat (or one change of the target).
pub struct Reconcile<'a> {
    /// The target assignment's epoch.
    pub target_epoch: i32,
    /// The member's share of the target assignment.
    pub target: &'a Partitions,
    /// The topics the member subscribes to that exist (by name or through its regex): a
    /// partition of any other topic is given up.
    pub subscribed: &'a BTreeSet<String>,
    /// Whether a partition is held by a member now (any member: the member's own pending
    /// revocations are told apart here). Kafka asks the partition's owner epoch.
    pub held: &'a dyn Fn(&str, i32) -> bool,
    /// The partitions the member's heartbeat reported owning; `None` when it did not say
    /// (then it is taken to still own everything it was asked to revoke).
    pub owned: Option<&'a [TopicPartitions]>,
    /// Strip no-longer-subscribed topics from a member at its target epoch (after its
    /// subscription changed) without waiting for a new target.
    pub enforce_subscription: bool,
}

impl MemberAssignment {
    /// A member that has just joined: epoch 0, nothing held.
    pub fn joining() -> Self {
        MemberAssignment {
            state: MemberState::Stable,
            epoch: 0,
            assigned: Partitions::new(),
            pending_revocation: Partitions::new(),
        }
    }

    /// The member's next state, or `None` when it stays as it is.
    pub fn reconcile(&self, r: &Reconcile<'_>) -> Option<MemberAssignment> {
        match self.state {
            MemberState::Stable if self.epoch != r.target_epoch => self.next_assignment(r),
            MemberState::Stable if r.enforce_subscription => self.drop_unsubscribed(r),
            MemberState::Stable => None,
            MemberState::UnrevokedPartitions => {
                if owns_any(r.owned, &self.pending_revocation) {
                    // Not all given up yet: only a subscription change can move it.
                    if r.enforce_subscription {
                        self.drop_unsubscribed(r)
                    } else {
                        None
                    }
                } else {
                    self.next_assignment(r)
                }
            }
            // Partitions it waits for are given as they are released.
            MemberState::UnreleasedPartitions => self.next_assignment(r),
        }
        .filter(|next| next != self)
    }

    /// Moves partitions of topics the member no longer subscribes to into pending revocation,
    /// leaving the rest (faster than a full reconciliation, for a subscription change).
    fn drop_unsubscribed(&self, r: &Reconcile<'_>) -> Option<MemberAssignment> {
        let mut assigned = self.assigned.clone();
        let mut pending = self.pending_revocation.clone();
        if r.subscribed.is_empty() && self.pending_revocation.is_empty() {
            pending = std::mem::take(&mut assigned);
        } else {
            for (topic, partitions) in &self.assigned {
                if !r.subscribed.contains(topic) {
                    assigned.remove(topic);
                    pending
                        .entry(topic.clone())
                        .or_default()
                        .extend(partitions.iter().copied());
                }
            }
        }
        if assigned == self.assigned {
            return None;
        }
        if !pending.is_empty() && owns_any(r.owned, &pending) {
            Some(MemberAssignment {
                state: MemberState::UnrevokedPartitions,
                epoch: self.epoch,
                assigned,
                pending_revocation: pending,
            })
        } else {
            // What left was already given up: only the assignment shrinks.
            Some(MemberAssignment {
                assigned,
                ..self.clone()
            })
        }
    }

    /// The full step toward the target: keep what stays, give up what goes (first), then take
    /// what is free.
    fn next_assignment(&self, r: &Reconcile<'_>) -> Option<MemberAssignment> {
        let mut assigned = Partitions::new();
        let mut revoke = Partitions::new();
        let mut take = Partitions::new();
        let mut unreleased = false;
        let empty = BTreeSet::new();
        let topics: BTreeSet<&String> = r.target.keys().chain(self.assigned.keys()).collect();
        for topic in topics {
            let target = if r.subscribed.contains(topic) {
                r.target.get(topic).unwrap_or(&empty)
            } else {
                &empty
            };
            let current = self.assigned.get(topic).unwrap_or(&empty);
            let keep: BTreeSet<i32> = current.intersection(target).copied().collect();
            let gone: BTreeSet<i32> = current.difference(&keep).copied().collect();
            let ours_to_revoke = self.pending_revocation.get(topic);
            let mut wanted = BTreeSet::new();
            for &p in target.difference(&keep) {
                // A partition this member itself is giving up is not "held by another".
                let mine = ours_to_revoke.is_some_and(|s| s.contains(&p));
                if (r.held)(topic, p) && !mine {
                    unreleased = true;
                } else {
                    wanted.insert(p);
                }
            }
            if !keep.is_empty() {
                assigned.insert(topic.clone(), keep);
            }
            if !gone.is_empty() {
                revoke.insert(topic.clone(), gone);
            }
            if !wanted.is_empty() {
                take.insert(topic.clone(), wanted);
            }
        }
        let next = if !revoke.is_empty() && owns_any(r.owned, &revoke) {
            // Give up first, at the current epoch: nothing new until the member has let go.
            MemberAssignment {
                state: MemberState::UnrevokedPartitions,
                epoch: self.epoch,
                assigned,
                pending_revocation: revoke,
            }
        } else {
            for (topic, partitions) in take {
                assigned.entry(topic).or_default().extend(partitions);
            }
            MemberAssignment {
                state: if unreleased {
                    MemberState::UnreleasedPartitions
                } else {
                    MemberState::Stable
                },
                epoch: r.target_epoch,
                assigned,
                pending_revocation: Partitions::new(),
            }
        };
        Some(next)
    }
}

/// Whether the member's reported partitions still include any of `revoking` (`None`: it did
/// not report, so it is taken to still hold them).
fn owns_any(owned: Option<&[TopicPartitions]>, revoking: &Partitions) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|t| {
        revoking
            .get(&t.topic)
            .is_some_and(|r| t.partitions.iter().any(|p| r.contains(p)))
    })
}
