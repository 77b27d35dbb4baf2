//! What a consumer-protocol group holds (protocol-v1 §7): its members with their epochs,
//! subscriptions, current and target assignments, and who holds which partition now — the
//! "partition epochs" of Kafka 4's `ConsumerGroup`, which reconciliation asks before handing a
//! partition out. The rules that change them are in the files named after them.

use std::collections::BTreeMap;
use std::sync::Arc;

use muster_protocol::{AssignorMetadata, ErrorCode, JoinGroupRequest, TopicPartitions};

use super::reconcile::{MemberAssignment, MemberState, Partitions};
use crate::engine::tenure::Tenure;
use crate::engine::{Map, MemberClient, Millis, PrincipalName};

/// The epoch a static member reports while on a temporary leave (protocol-v1 §7 "Leave").
pub const LEAVE_STATIC_EPOCH: i32 = -2;
/// The epoch a member leaves with.
pub const LEAVE_EPOCH: i32 = -1;
/// Most epoch-bump causes kept while a target is computed off the group's turn.
pub const MAX_PENDING_CAUSES: usize = 64;

/// The consumer protocol's part of a group. A group has one exactly while it speaks the consumer
/// protocol; its group epoch is the group's `generation` (one counter for both protocols, so
/// that no epoch is ever reused, even across a switch of protocol).
#[derive(Debug)]
pub(in crate::engine) struct ConsumerPart {
    /// The server assignor of the current target (`uniform` or `range`).
    pub assignor: String,
    /// The epoch of the target assignment: the group epoch it was computed at.
    pub assignment_epoch: i32,
    pub members: Map<Arc<str>, Box<ConsumerMember>>,
    /// Instance id → member id of static members.
    pub statics: Map<String, Arc<str>>,
    /// Who holds each partition now (assigned, or asked to give it up and still reporting it):
    /// topic → partition → member. A partition is handed to its next owner only once it has
    /// no entry here.
    pub owners: Map<String, Map<i32, Arc<str>>>,
    /// The group epoch a target is being computed for off the group's turn (`assign.rs`).
    pub assigning: Option<i32>,
    /// A partition was released (or a target applied) since waiting heartbeats were last
    /// looked at (`wait.rs`).
    pub released: bool,
    /// Why the group epoch rose since the last target, and when, by epoch (for the journal).
    /// Bounded: past [`MAX_PENDING_CAUSES`] the newest entry covers the later epochs too.
    pub pending_causes: std::collections::VecDeque<(i32, muster_protocol::RebalanceCause, Millis)>,
}

/// One consumer-protocol member.
#[derive(Debug)]
pub(in crate::engine) struct ConsumerMember {
    pub member_id: Arc<str>,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client: MemberClient,
    /// The principal whose `max_members` unit it holds.
    pub charge: Option<PrincipalName>,
    pub rebalance_timeout_ms: u32,
    pub subscribed_topics: Vec<String>,
    pub regex: Option<String>,
    /// The assignor it asked for.
    pub server_assignor: Option<String>,
    /// Its epoch, what it owns, what it is giving up.
    pub assignment: MemberAssignment,
    /// Its epoch before the last bump: a heartbeat whose answer was lost still carries it.
    pub previous_epoch: i32,
    /// Its share of the target assignment.
    pub target: Partitions,
    pub last_heard: Millis,
    /// Since when it has been asked to give partitions up (its rebalance timeout runs from
    /// here); `None` unless it is `UnrevokedPartitions`.
    pub revoking_since: Option<Millis>,
    /// A static member on a temporary leave (epoch -2): its partitions are kept for its
    /// instance until its session expires.
    pub left: bool,
    /// A member that speaks the classic protocol (a group upgraded online: `migrate.rs`).
    pub classic: Option<Box<ClassicMember>>,
}

impl ConsumerPart {
    pub fn new(assignor: String, assignment_epoch: i32) -> Self {
        ConsumerPart {
            assignor,
            assignment_epoch,
            members: Map::default(),
            statics: Map::default(),
            owners: Map::default(),
            assigning: None,
            released: false,
            pending_causes: Default::default(),
        }
    }

    /// Whether a member other than `member` holds `topic`-`partition` now.
    pub fn held_by_other(&self, member: &str, topic: &str, partition: i32) -> bool {
        self.owners
            .get(topic)
            .and_then(|p| p.get(&partition))
            .is_some_and(|owner| &**owner != member)
    }

    /// Records that `member` now holds `now_holds` (its assigned and pending-revocation
    /// partitions), where it held `held` before: partitions it let go are free for their next
    /// owner.
    /// Newly held partitions get their ownership epochs in `tenure`, at `epoch` (the member's
    /// epoch); `None` for a restart, which restores the epochs from the record.
    pub(in crate::engine) fn move_ownership(
        &mut self,
        member: &Arc<str>,
        held: &[&Partitions],
        now_holds: &[&Partitions],
        mut tenure: Option<(&mut Tenure, i32)>,
    ) {
        for set in held {
            for (topic, partitions) in set.iter() {
                for p in partitions {
                    if now_holds
                        .iter()
                        .any(|s| s.get(topic).is_some_and(|ps| ps.contains(p)))
                    {
                        continue;
                    }
                    if let Some(owners) = self.owners.get_mut(topic.as_str()) {
                        if owners.get(p).is_some_and(|o| o == member) {
                            owners.remove(p);
                            self.released = true;
                        }
                        if owners.is_empty() {
                            self.owners.remove(topic.as_str());
                        }
                    }
                }
            }
        }
        for set in now_holds {
            for (topic, partitions) in set.iter() {
                let owners = self.owners.entry(topic.clone()).or_default();
                for &p in partitions {
                    owners.insert(p, Arc::clone(member));
                    if let Some((tenure, epoch)) = tenure.as_mut() {
                        tenure.grant(member, topic, p, *epoch);
                    }
                }
            }
        }
    }

    /// A static member's new incarnation `new_id` (of `client`, heard from at `now`) takes over
    /// `old_id`'s epoch, partitions and target under `instance`, without a rebalance (Kafka's
    /// static member replacement). `false`: `old_id` is not a member.
    pub(in crate::engine) fn take_over(
        &mut self,
        instance: &str,
        old_id: &Arc<str>,
        new_id: &Arc<str>,
        client: MemberClient,
        now: Millis,
        tenure: &mut Tenure,
    ) -> bool {
        let Some(mut member) = self.members.remove(&**old_id) else {
            return false;
        };
        let nothing = Partitions::new();
        let holds = [
            &member.assignment.assigned,
            &member.assignment.pending_revocation,
        ];
        self.move_ownership(old_id, &holds, &[&nothing], None);
        // New epochs: the old incarnation may still be running.
        let epoch = member.assignment.epoch;
        self.move_ownership(new_id, &[], &holds, Some((tenure, epoch)));
        member.member_id = Arc::clone(new_id);
        member.client = client;
        member.left = false;
        member.last_heard = now;
        self.statics.insert(instance.to_owned(), Arc::clone(new_id));
        self.members.insert(Arc::clone(new_id), member);
        true
    }

    /// The member a leave names: by its id, or a static member by its instance id alone (with
    /// an id, they must agree: FENCED_INSTANCE_ID otherwise).
    pub fn leaving(&self, member_id: &str, instance: Option<&str>) -> Result<Arc<str>, ErrorCode> {
        match instance {
            Some(instance) => match self.statics.get(instance) {
                Some(id) if member_id.is_empty() || **id == *member_id => Ok(Arc::clone(id)),
                Some(_) => Err(ErrorCode::FencedInstanceId),
                None => Err(ErrorCode::UnknownMemberId),
            },
            None => self
                .members
                .get_key_value(member_id)
                .map(|(id, _)| Arc::clone(id))
                .ok_or(ErrorCode::UnknownMemberId),
        }
    }

    /// Whether every member is at the target epoch with nothing to give up or wait for.
    pub fn reconciled(&self) -> bool {
        self.members
            .values()
            .all(|m| m.at_target(self.assignment_epoch))
    }
}

impl ConsumerMember {
    pub fn new(member_id: Arc<str>, client: MemberClient, now: Millis) -> Self {
        ConsumerMember {
            member_id,
            instance_id: None,
            rack_id: None,
            client,
            charge: None,
            rebalance_timeout_ms: 0,
            subscribed_topics: Vec::new(),
            regex: None,
            server_assignor: None,
            assignment: MemberAssignment::joining(),
            previous_epoch: 0,
            target: Partitions::new(),
            last_heard: now,
            revoking_since: None,
            left: false,
            classic: None,
        }
    }

    /// Its session timeout: a classic member's own, else the server's (`session_timeout_ms`).
    pub fn session_timeout(&self, session_timeout_ms: u32) -> u32 {
        self.classic
            .as_deref()
            .map_or(session_timeout_ms, |c| c.session_timeout_ms)
    }

    /// What it holds now: its assignment and what it was asked to give up but still reports
    /// (what describe shows, so that an operator sees who still holds a partition).
    pub fn holds(&self) -> Partitions {
        let mut holds = self.assignment.assigned.clone();
        for (topic, ps) in &self.assignment.pending_revocation {
            holds
                .entry(topic.clone())
                .or_default()
                .extend(ps.iter().copied());
        }
        holds
    }

    /// The epoch it is shown with (-2 while on a static leave).
    pub fn shown_epoch(&self) -> i32 {
        if self.left {
            LEAVE_STATIC_EPOCH
        } else {
            self.assignment.epoch
        }
    }

    /// At the target epoch, owning exactly what it may own now.
    pub fn at_target(&self, assignment_epoch: i32) -> bool {
        self.assignment.state == MemberState::Stable && self.assignment.epoch == assignment_epoch
    }

    /// When a timer must look at it: its session, and its rebalance timeout while it is asked
    /// to give partitions up.
    pub fn deadline(&self, session_timeout_ms: u32) -> Millis {
        let session = self.last_heard + Millis::from(self.session_timeout(session_timeout_ms));
        match self.revoking_since {
            Some(since) => session.min(since + Millis::from(self.rebalance_timeout_ms)),
            None => session,
        }
    }
}

/// Partitions as the wire lists them (sorted by topic, partitions ascending).
pub fn to_wire(partitions: &Partitions) -> Vec<TopicPartitions> {
    partitions
        .iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(topic, ps)| TopicPartitions {
            topic: topic.clone(),
            partitions: ps.iter().copied().collect(),
        })
        .collect()
}

/// Partitions from the wire (duplicates merged).
pub fn from_wire(partitions: &[TopicPartitions]) -> Partitions {
    let mut out: Partitions = BTreeMap::new();
    for tp in partitions {
        if tp.partitions.is_empty() {
            continue;
        }
        out.entry(tp.topic.clone())
            .or_default()
            .extend(tp.partitions.iter().copied());
    }
    out
}

/// Whether every partition of `owned` is in `assigned`.
pub fn is_subset(owned: &[TopicPartitions], assigned: &Partitions) -> bool {
    owned.iter().all(|tp| {
        tp.partitions.is_empty()
            || assigned
                .get(&tp.topic)
                .is_some_and(|ps| tp.partitions.iter().all(|p| ps.contains(p)))
    })
}

/// What a classic member inside a consumer group keeps of its JoinGroup (it goes on speaking
/// JoinGroup, SyncGroup and Heartbeat: `classic.rs`).
#[derive(Debug, Clone)]
pub(in crate::engine) struct ClassicMember {
    pub session_timeout_ms: u32,
    pub assignors: Box<[AssignorMetadata]>,
}

impl ClassicMember {
    pub fn from_join(req: &JoinGroupRequest) -> Self {
        ClassicMember {
            session_timeout_ms: req.session_timeout_ms,
            assignors: req.assignors.clone().into_boxed_slice(),
        }
    }

    /// The protocol name its answers carry: its preferred assignor (whether it revokes
    /// eagerly or cooperatively follows from it, in the client).
    pub fn protocol(&self) -> Option<String> {
        self.assignors.first().map(|a| a.name.clone())
    }
}
