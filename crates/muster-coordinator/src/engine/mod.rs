//! The group engine: one consumer group's membership, generation and offsets as a pure,
//! deterministic state machine (protocol §6; Kafka's classic `GroupCoordinator` is the reference).
//!
//! It does no I/O, reads no clock, holds no shared counter and knows nothing of actix, tokio or
//! metrics (a test reads these files to keep it so). Every entry point takes the message and
//! `now` (milliseconds) and returns one [`Effects`]: the replies to send, the writes to make
//! durable with the replies that wait for each, the next deadline, events, and units of the
//! shell's counters to give back (`effects.rs` says how a shell carries them out). Requests
//! answered later (JoinGroup at the barrier, SyncGroup until the leader's assignment) carry an
//! opaque reply token `R` that comes back in a later call's effects. Heartbeat is the one
//! exception: its only effect is its answer, so it returns the code (the hot path allocates
//! nothing). Queries (`describe`, `history`, `diagnose`, `next_deadline`) change nothing.
//!
//! This module holds the group's data ([`Group`], `Member`); each rule family is an
//! `impl Group` block of its own file. Where each rule of protocol §6 lives:
//!
//! | protocol §6 rule                                  | file           |
//! |---------------------------------------------------|----------------|
//! | States (entering a state)                         | `mod.rs`       |
//! | A group that does not exist                       | `absent.rs`    |
//! | JoinGroup checks, pending ids                     | `join.rs`      |
//! | `max_members` (§5 "Quotas"): members, pending ids | `join.rs`      |
//! | Request limits, pending-id budget                 | `limits.rs`    |
//! | Unchanged follower; Static membership             | `join.rs`      |
//! | Barrier, initial delay, generation, vote          | `barrier.rs`   |
//! | JoinGroup / SyncGroup answer shapes               | `answers.rs`   |
//! | SyncGroup, the pending-sync window                | `sync.rs`      |
//! | Heartbeat                                         | `heartbeat.rs` |
//! | "Heard from", removal, assignor support           | `member.rs`    |
//! | Session expiry, deadlines; retention              | `timers.rs`    |
//! | LeaveGroup                                        | `leave.rs`     |
//! | OffsetCommit, OffsetFetch                         | `offsets.rs`   |
//! | Ownership, ownership epochs (§6.23)               | `tenure.rs`    |
//! | Offset history, OffsetHistory (§6.24)             | `history.rs`   |
//! | OffsetReset (§6.24)                               | `reset.rs`     |
//! | Expiry quarantine, OffsetRestore (§6.25)          | `quarantine.rs`|
//! | DescribeGroups, DeleteGroups, Topics              | `admin.rs`     |
//! | What a call returns (effects, grants)             | `effects.rs`   |
//! | Durability (records, sealing a call)              | `persist.rs`   |
//! | Whether a group may be parked (no actor)          | `park.rs`      |
//! | Rebalance journal (§6.20)                         | `journal.rs` (entries kept encoded: `journal_entries.rs`) |
//! | Stuck detector, GroupDiagnosis (§6.20)            | `diagnosis.rs` |

mod absent;
mod admin;
mod answers;
mod barrier;
pub mod consumer;
mod diagnosis;
mod effects;
mod heartbeat;
mod history;
mod join;
mod journal;
mod journal_entries;
mod leave;
mod limits;
mod member;
mod offsets;
mod park;
mod persist;
mod quarantine;
mod reset;
mod sync;
mod tenure;
#[cfg(test)]
mod tests;
mod timers;
mod topic_access;

pub use absent::{absent_group, AbsentGroup};
pub use effects::{Effects, Grant, Grants, JoinNeeds, LedgerRequest, PendingCommit, Write};
pub use journal::{kind as cause_kind, MAX_LISTED, MAX_LISTED_PARTITIONS};
pub use limits::check_request;
pub use park::{parked_deadline, StoredParts};
pub use topic_access::{refusal_for, unreadable_topics};

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::num::NonZeroU64;
use std::sync::{Arc, OnceLock};

use muster_protocol::{AssignorMetadata, ErrorCode, JoinGroupRequest, Response, TopicPartitions};

use crate::access::Access;
use crate::config::GroupConfig;
use crate::storage::records::CommittedOffset;
/// Re-exported: the engine's callers have always found them here.
pub use crate::types::{GroupState, Millis, PrincipalName, RebalanceTrigger, TopicLookup};
use barrier::Barrier;
use journal::Insight;
use sync::SyncWindow;

/// The hasher of every map a group keeps: std's SipHash with random keys, as `RandomState`,
/// but the keys are drawn once per process instead of stored in every map. A `RandomState` is
/// 16 bytes; a group keeps several maps and a server keeps one group per consumer group, idle
/// or not. Still keyed by a secret, so client-chosen ids (instance ids, member ids, topics)
/// cannot be used to flood a table.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessKeys;

impl BuildHasher for ProcessKeys {
    type Hasher = std::collections::hash_map::DefaultHasher;

    fn build_hasher(&self) -> Self::Hasher {
        static KEYS: OnceLock<RandomState> = OnceLock::new();
        KEYS.get_or_init(RandomState::new).build_hasher()
    }
}

/// A `HashMap` with [`ProcessKeys`] (no per-map hasher state).
pub type Map<K, V> = HashMap<K, V, ProcessKeys>;

/// A group's committed offsets: topic → partition → offset.
pub type Offsets = Map<String, Map<i32, CommittedOffset>>;

const NONE: i16 = ErrorCode::None.code();

/// Things worth telling an operator, emitted alongside replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    RebalanceStarted {
        trigger: RebalanceTrigger,
        generation: i32,
    },
    /// A join barrier completed: `generation` is the new generation.
    RebalanceCompleted {
        generation: i32,
        members: usize,
        assignor: Option<String>,
        barrier_ms: Millis,
        trigger: RebalanceTrigger,
        added: usize,
        removed: usize,
    },
    /// A member was removed because it was not heard from within its session timeout.
    MemberExpired {
        member_id: String,
        last_heard_ms_ago: Millis,
    },
    /// A brand-new member's held JoinGroup passed the new-member cap and was refused.
    NewMemberTimedOut { member_id: String },
    /// A barrier is past half its rebalance timeout, still waiting for these members (or
    /// pending ids) to rejoin.
    BarrierSlow {
        waiting_for: Vec<String>,
        elapsed_ms: Millis,
    },
    /// A consumer-protocol group's target assignment was computed at `epoch` (protocol-v1 §7):
    /// `moved` partitions have a new target owner.
    TargetAssigned {
        epoch: i32,
        members: usize,
        assignor: String,
        moved: usize,
        trigger: &'static str,
    },
    /// A consumer-protocol member kept partitions it was asked to give up past its rebalance
    /// timeout and was removed.
    RevocationTimedOut { member_id: String },
    /// Offsets of an Empty group reached the retention period and were dropped (no
    /// quarantine: `offsets_quarantine_minutes` is 0).
    OffsetsExpired { partitions: usize },
    /// Offsets of an Empty group reached the retention period and moved to the quarantine
    /// (protocol §6.25); `first`: the quarantine was empty (the shell's one WARN).
    OffsetsQuarantined {
        partitions: usize,
        first: bool,
        drop_at: Millis,
    },
    /// Quarantined offsets were dropped for good after the grace period.
    QuarantineDropped { partitions: usize },
    /// Quarantined offsets were brought back, `by` `command` (OffsetRestore) or `join`.
    OffsetsRestored { partitions: usize, by: &'static str },
    /// An OffsetReset was executed by this principal.
    OffsetsReset { partitions: usize, by: String },
    /// A member's commit named partitions it does not own (PARTITION_NOT_OWNED).
    CommitNotOwned {
        member_id: String,
        partitions: usize,
    },
    /// An Empty group with no offsets left was removed.
    GroupRemoved,
    /// Dynamic members that did not rejoin before the barrier's rebalance timeout.
    EvictedAtBarrier { member_ids: Vec<String> },
    /// Members that did not send SyncGroup within the rebalance timeout.
    EvictedAtSync { member_ids: Vec<String> },
    /// A rebalance got its assignment (or ended with no members), `total_ms` after its
    /// barrier opened; `kind` is its journal cause kind.
    RebalanceFinished {
        kind: &'static str,
        total_ms: Millis,
    },
}

/// What the engine needs from the outside world for one call.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub now: Millis,
    pub topics: &'a dyn TopicLookup,
}

/// Who sent a request: kept on the member for DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientInfo {
    pub client_id: Arc<str>,
    pub client_host: Arc<str>,
    /// What the connection's principal may do (topic checks in offsets) and the quota its
    /// members and pending ids count against.
    pub access: Access,
}

impl ClientInfo {
    /// The principal whose `max_members` a member or pending id this client makes is charged
    /// to (`None` without an auth file).
    fn charge(&self) -> Option<&PrincipalName> {
        self.access.quota_principal()
    }

    /// Whether `held` (a pending id's or a static member's charge) is already this client's
    /// principal's, so that it taking the id over needs no new unit.
    fn already_charged(&self, held: Option<&PrincipalName>) -> bool {
        self.charge() == held
    }
}

/// Replies owed to the next record write (see `Group::record_owed`).
#[derive(Debug)]
struct Owed<R>(Vec<(R, Response)>);

/// One member. Kept small: a group holds one per consumer, idle or not. The id is shared with
/// the group's map key (and the leader field); lists are boxed slices (no spare capacity, 16
/// bytes instead of 24); the client keeps no `Access` (nothing reads it after the join) and
/// "new since" is one word: so the box is 192 bytes, not 256 (jemalloc size classes).
#[derive(Debug)]
struct Member<R> {
    member_id: Arc<str>,
    instance_id: Option<Box<str>>,
    client: MemberClient,
    session_timeout_ms: u32,
    rebalance_timeout_ms: u32,
    topics: Box<[String]>,
    assignors: Box<[AssignorMetadata]>,
    owned_partitions: Box<[TopicPartitions]>,
    assignment: Box<[TopicPartitions]>,
    assignment_user_data: Box<[u8]>,
    last_heard: Millis,
    /// Joined but not yet answered by a completed barrier (the 5-minute cap applies): when.
    new_since: NewSince,
    awaiting_join: Held<R>,
    awaiting_sync: Held<R>,
    /// The principal whose `max_members` unit it holds (none without an auth file, or for a
    /// member loaded with no recorded principal); given back (a [`LedgerRequest`]) by
    /// `remove_member`, the one way out of the member map, or by `release_all`.
    charge: Option<PrincipalName>,
}

/// A member id handed out with MEMBER_ID_REQUIRED, not yet joined.
#[derive(Debug)]
struct Pending {
    /// When it is forgotten.
    expires: Millis,
    /// The principal whose `max_members` unit it holds (passed on to the member it becomes).
    charge: Option<PrincipalName>,
}

/// What a member keeps of the client that joined it (for DescribeGroups and its record).
#[derive(Debug, Clone)]
struct MemberClient {
    client_id: Arc<str>,
    client_host: Arc<str>,
}

impl From<&ClientInfo> for MemberClient {
    fn from(client: &ClientInfo) -> Self {
        MemberClient {
            client_id: Arc::clone(&client.client_id),
            client_host: Arc::clone(&client.client_host),
        }
    }
}

/// When a brand-new member joined, while it is new: the time plus one in a `NonZeroU64`, so
/// that "not new" costs no tag (8 bytes where a flag and a time took 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NewSince(Option<NonZeroU64>);

impl NewSince {
    const NOT_NEW: NewSince = NewSince(None);

    fn at(now: Millis) -> Self {
        NewSince(Some(NonZeroU64::MIN.saturating_add(now)))
    }

    fn is_new(self) -> bool {
        self.0.is_some()
    }

    /// When it joined, if it is new.
    fn get(self) -> Option<Millis> {
        self.0.map(|t| t.get() - 1)
    }
}

/// A held request's reply token, boxed: a member spends most of its life holding nothing, and
/// a reply token (the server's `ReplyTo`) is ~50 bytes, twice per member. The same methods as
/// the `Option` it wraps.
#[derive(Debug)]
struct Held<R>(Option<Box<R>>);

impl<R> Held<R> {
    fn none() -> Self {
        Held(None)
    }

    fn some(reply: R) -> Self {
        Held(Some(Box::new(reply)))
    }

    fn is_some(&self) -> bool {
        self.0.is_some()
    }

    fn is_none(&self) -> bool {
        self.0.is_none()
    }

    fn take(&mut self) -> Option<R> {
        self.0.take().map(|r| *r)
    }

    fn replace(&mut self, reply: R) -> Option<R> {
        self.0.replace(Box::new(reply)).map(|r| *r)
    }
}

impl<R> Member<R> {
    /// A member heard from at `now`, with no subscription, assignment or held request yet: the
    /// one place a member is made (a join fills it from its request, a restart from its record).
    fn new(
        member_id: Arc<str>,
        instance_id: Option<String>,
        client: MemberClient,
        now: Millis,
    ) -> Self {
        Member {
            member_id,
            instance_id: instance_id.map(String::into_boxed_str),
            client,
            session_timeout_ms: 0,
            rebalance_timeout_ms: 0,
            topics: Box::default(),
            assignors: Box::default(),
            owned_partitions: Box::default(),
            assignment: Box::default(),
            assignment_user_data: Box::default(),
            last_heard: now,
            new_since: NewSince::NOT_NEW,
            awaiting_join: Held::none(),
            awaiting_sync: Held::none(),
            charge: None,
        }
    }

    fn deadline(&self, new_member_join_timeout_ms: u32) -> Option<Millis> {
        if self.awaiting_join.is_some() {
            // Held members count as heard from, except a brand-new member's first join.
            self.new_since
                .get()
                .map(|joined| joined + Millis::from(new_member_join_timeout_ms))
        } else if self.awaiting_sync.is_some() {
            None
        } else {
            Some(self.last_heard + Millis::from(self.session_timeout_ms))
        }
    }

    fn same_metadata(&self, req: &JoinGroupRequest) -> bool {
        *self.topics == *req.topics
            && *self.assignors == *req.assignors
            && *self.owned_partitions == *req.owned_partitions
    }

    fn supports(&self, assignor: &str) -> bool {
        self.assignors.iter().any(|a| a.name == assignor)
    }

    fn user_data_for(&self, assignor: &str) -> Vec<u8> {
        self.assignors
            .iter()
            .find(|a| a.name == assignor)
            .map(|a| a.user_data.clone())
            .unwrap_or_default()
    }

    /// Forgets the assignment of the last generation.
    fn clear_assignment(&mut self) {
        self.assignment = Box::default();
        self.assignment_user_data = Box::default();
    }

    fn update_from(&mut self, req: JoinGroupRequest) {
        self.session_timeout_ms = req.session_timeout_ms;
        self.rebalance_timeout_ms = req.rebalance_timeout_ms;
        self.topics = req.topics.into_boxed_slice();
        self.assignors = req.assignors.into_boxed_slice();
        self.owned_partitions = req.owned_partitions.into_boxed_slice();
    }
}

/// One consumer group. `R` is the caller's reply token for held requests.
#[derive(Debug)]
pub struct Group<R> {
    /// Shared with the supervisor's registry (one allocation per group id).
    group_id: Arc<str>,
    config: Arc<GroupConfig>,
    state: GroupState,
    generation: i32,
    assignor: Option<String>,
    /// Shares its allocation with the leader's member id.
    leader: Option<Arc<str>>,
    /// Boxed: a `Member` is a few hundred bytes and a hash table keeps up to twice as many
    /// slots as entries; boxed, a slot is 32 bytes (heap profile: ~130 bytes less per member).
    members: Map<Arc<str>, Box<Member<R>>>,
    /// instance id → member id of static members.
    statics: Map<String, Arc<str>>,
    /// member ids handed out with MEMBER_ID_REQUIRED → when they are forgotten.
    pending: Map<String, Pending>,
    /// Assignor name → how many members support it, so that a join's protocol check costs
    /// O(its assignors), not O(members) (a barrier of N joins was O(N²)). A short list: groups
    /// offer one to three assignors.
    assignor_support: Vec<(String, usize)>,
    /// Members holding a JoinGroup (kept on the member), so the barrier's check is O(1).
    num_awaiting_join: usize,
    /// The rebalance in progress: `Some` exactly while the group is PreparingRebalance. Boxed,
    /// like the sync window: most groups are idle, and an idle group pays 8 bytes for each.
    barrier: Option<Box<Barrier>>,
    /// Who still owes a SyncGroup since the last barrier closed, and until when.
    sync_window: Option<Box<SyncWindow>>,
    /// Members when the last barrier completed (to count who came and went since).
    members_at_last_generation: usize,
    /// When the group entered its current state (retention counts from entering Empty).
    state_since: Millis,
    offsets: Offsets,
    /// Set when a change may have moved the next deadline earlier (reported by the call's
    /// effects).
    new_deadline: Option<Millis>,
    /// OffsetCommits handed to the shell ([`Write::Commit`]) and not yet reported back:
    /// retention waits for them (an expiry landing behind an acknowledged commit would lose it).
    commits_in_flight: u32,
    /// A record write handed to the shell ([`Write::Record`]) and not yet reported back by
    /// [`Group::record_written`]: record writes are ordered, one at a time.
    record_in_flight: bool,
    /// Replies of calls that changed the record while one was being written: the next record
    /// write (built from the latest state when the one in flight is done) carries them. Boxed:
    /// only a group written twice within one write's time has one.
    record_owed: Option<Box<Owed<R>>>,
    /// Consumer-protocol replies of calls that changed nothing durable, given while a record
    /// write was in flight and none owed: they carry member epochs and assignments that write
    /// holds, so they wait for it to be durable (not for another one). Boxed, as `record_owed`.
    record_awaited: Option<Box<Owed<R>>>,
    /// The group has a creator its durable record may not hold yet: a group made by an
    /// OffsetCommit has offsets but no record until a member joins, and a restart would then
    /// charge no one for it. Its first commit writes the (member-less) record too.
    owner_unrecorded: bool,
    /// The principal that created the group (recorded, so that a restart charges its
    /// `max_groups` again); the unit itself is held by the caller's registry.
    created_by: Option<Arc<str>>,
    /// The rebalance journal and what the stuck detector needs (`journal.rs`); `None` until
    /// the group's first rebalance. Boxed: most groups are idle.
    insight: Option<Box<Insight>>,
    /// The consumer protocol's part (`consumer/`): `Some` exactly while the group speaks it.
    /// Boxed: a classic group pays one word for it.
    consumer: Option<Box<consumer::ConsumerPart>>,
    /// Consumer-protocol heartbeats held until a partition their member waits for is released
    /// (`consumer/wait.rs`). Empty unless a member waits.
    consumer_waiters: Vec<consumer::Waiter<R>>,
    /// Who owns each partition and its ownership epoch (`tenure.rs`).
    tenure: tenure::Tenure,
    /// Each partition's offset history (`history.rs`).
    history: history::Histories,
    /// Commits' history entries not written yet (`offset_history_flush_ms`, `history.rs`).
    history_unwritten: history::Unwritten,
    /// Offsets past retention, until dropped or restored (`quarantine.rs`).
    quarantine: Vec<crate::storage::QuarantinedOffset>,
}

impl<R> Group<R> {
    /// A new, Empty group at generation 0.
    pub fn new(group_id: String, config: Arc<GroupConfig>, now: Millis) -> Self {
        let mut group = Self {
            group_id: group_id.into(),
            config,
            state: GroupState::Empty,
            generation: 0,
            assignor: None,
            leader: None,
            members: Map::default(),
            statics: Map::default(),
            pending: Map::default(),
            assignor_support: Vec::new(),
            num_awaiting_join: 0,
            barrier: None,
            sync_window: None,
            members_at_last_generation: 0,
            state_since: now,
            offsets: Map::default(),
            new_deadline: None,
            commits_in_flight: 0,
            record_in_flight: false,
            record_owed: None,
            record_awaited: None,
            owner_unrecorded: false,
            created_by: None,
            insight: None,
            consumer: None,
            consumer_waiters: Vec::new(),
            tenure: tenure::Tenure::default(),
            history: Map::default(),
            history_unwritten: history::Unwritten::default(),
            quarantine: Vec::new(),
        };
        // A new group starts Empty: its retention clock runs from creation.
        group.note_retention_start(now);
        group
    }

    /// Records the principal that created the group (see [`Group::created_by`]).
    pub fn set_created_by(&mut self, principal: Option<Arc<str>>) {
        self.owner_unrecorded = principal.is_some();
        self.created_by = principal;
    }

    /// The principal that created the group, if known (none without an auth file, or for a
    /// group stored before owners were recorded).
    pub fn created_by(&self) -> Option<&Arc<str>> {
        self.created_by.as_ref()
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The group id's shared allocation (for registries that key on it).
    pub fn shared_group_id(&self) -> &Arc<str> {
        &self.group_id
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn generation(&self) -> i32 {
        self.generation
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    pub fn assignor(&self) -> Option<&str> {
        self.assignor.as_deref()
    }

    /// Members of either protocol (pending ids not counted).
    pub fn member_count(&self) -> usize {
        self.members.len() + self.consumer.as_deref().map_or(0, |p| p.members.len())
    }

    /// When the group entered its current state.
    pub fn state_since(&self) -> Millis {
        self.state_since
    }

    #[cfg(test)]
    pub(super) fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    #[cfg(test)]
    pub(super) fn set_generation_for_test(&mut self, generation: i32) {
        self.generation = generation;
    }

    #[cfg(test)]
    pub(super) fn has_offsets(&self) -> bool {
        !self.offsets.is_empty()
    }

    /// Enters `state` (protocol §6.1); entering Empty starts the retention clocks.
    fn set_state(&mut self, state: GroupState, now: Millis) {
        if self.state != state {
            self.state = state;
            self.state_since = now;
            if state == GroupState::Empty {
                self.note_retention_start(now);
            }
        }
    }
}
