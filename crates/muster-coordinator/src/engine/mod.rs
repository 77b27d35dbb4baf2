//! The group engine: one consumer group's membership, generation and offsets as a pure,
//! deterministic state machine (protocol §5; Kafka's classic `GroupCoordinator` is the reference).
//!
//! It does no I/O, reads no clock and knows nothing of actix. Every call passes `now`
//! (milliseconds); requests that must be answered later (JoinGroup at the barrier, SyncGroup
//! until the leader's assignment) carry an opaque reply token `R` that the engine hands back in
//! [`Output::replies`] when it answers. Timers are the caller's job: after a change it asks
//! [`Group::next_deadline`] and delivers [`Group::tick`] at that time. Whether a change must reach
//! stable storage before its replies leave is said by [`Output::persist`].
//!
//! Rules that need no group (id validation, requests for a group that does not exist) are the
//! free functions at the bottom, so that every protocol rule lives in this module.

mod absent;
#[cfg(test)]
mod tests;

pub use absent::{
    absent_group, error_for, error_like, group_of, validate_group_id, AbsentGroup,
    MAX_GROUP_ID_BYTES,
};

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use muster_protocol::{
    AssignorMetadata, DescribedGroup, DescribedMember, ErrorCode, FetchedPartition, FetchedTopic,
    HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, JoinedMember, LeaveGroupRequest,
    LeaveGroupResponse, LeaveResult, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, PartitionResult, PartitionResults, Response, SyncGroupRequest,
    SyncGroupResponse, TopicInfo, TopicPartitions,
};
use uuid::Uuid;

use crate::config::GroupConfig;
use crate::storage::{CommittedOffset, GroupRecord, MemberRecord, OffsetWrite};

/// Milliseconds on the coordinator's clock (monotonic while the process runs).
pub type Millis = u64;

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

/// The life-cycle states of protocol §5 (shared with clients through the protocol crate).
pub use muster_protocol::GroupState;

/// Why a rebalance started (for operators' logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceTrigger {
    /// A new member joined.
    Join,
    /// A member rejoined with other topics or assignors, the leader rejoined, or a static
    /// member's takeover changed the assignor vote.
    MetadataChange,
    /// A member left with LeaveGroup.
    Leave,
    /// A member's session expired.
    SessionExpiry,
    /// Members did not send SyncGroup within the rebalance timeout.
    SyncTimeout,
    /// The partition count of a subscribed topic changed.
    TopicChange,
}

impl RebalanceTrigger {
    pub const fn as_str(self) -> &'static str {
        match self {
            RebalanceTrigger::Join => "join",
            RebalanceTrigger::MetadataChange => "metadata change",
            RebalanceTrigger::Leave => "leave",
            RebalanceTrigger::SessionExpiry => "session expiry",
            RebalanceTrigger::SyncTimeout => "sync timeout",
            RebalanceTrigger::TopicChange => "topic change",
        }
    }
}

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
    /// Offsets of an Empty group reached the retention period and were dropped.
    OffsetsExpired { partitions: usize },
    /// An Empty group with no offsets left was removed.
    GroupRemoved,
    /// Dynamic members that did not rejoin before the barrier's rebalance timeout.
    EvictedAtBarrier { member_ids: Vec<String> },
    /// Members that did not send SyncGroup within the rebalance timeout.
    EvictedAtSync { member_ids: Vec<String> },
}

/// Looks up partition counts in the server's topic catalog.
pub trait TopicLookup {
    fn partitions(&self, topic: &str) -> Option<i32>;
}

impl TopicLookup for HashMap<String, i32> {
    fn partitions(&self, topic: &str) -> Option<i32> {
        self.get(topic).copied()
    }
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
}

/// What one engine call asks its caller to do. An empty `Output` allocates nothing, so a caller
/// may make a fresh one per call (the group actor does: an idle group keeps none).
#[derive(Debug)]
pub struct Output<R> {
    /// Answers to send, in order. If `persist` is set they must wait until the group's record
    /// (see [`Group::to_record`]) is durable.
    pub replies: Vec<(R, Response)>,
    /// The group's record changed in a way that must survive a crash.
    pub persist: bool,
    /// For the operator.
    pub events: Vec<Event>,
    /// Offsets that expired (retention) and must be deleted from storage.
    pub expired_offsets: Vec<(String, i32)>,
}

impl<R> Default for Output<R> {
    fn default() -> Self {
        Self {
            expired_offsets: Vec::new(),
            replies: Vec::new(),
            persist: false,
            events: Vec::new(),
        }
    }
}

impl<R> Output<R> {
    pub fn clear(&mut self) {
        self.replies.clear();
        self.persist = false;
        self.events.clear();
        self.expired_offsets.clear();
    }

    fn reply(&mut self, to: R, response: Response) {
        self.replies.push((to, response));
    }
}

/// One member. Kept small: a group holds one per consumer, idle or not. The id is shared with
/// the group's map key (and the leader field); lists are boxed slices (no spare capacity, 16
/// bytes instead of 24), so the box is 192 bytes, not 256 (jemalloc size classes).
#[derive(Debug)]
struct Member<R> {
    member_id: Arc<str>,
    instance_id: Option<Box<str>>,
    client: ClientInfo,
    session_timeout_ms: u32,
    rebalance_timeout_ms: u32,
    topics: Box<[String]>,
    assignors: Box<[AssignorMetadata]>,
    owned_partitions: Box<[TopicPartitions]>,
    assignment: Box<[TopicPartitions]>,
    assignment_user_data: Box<[u8]>,
    last_heard: Millis,
    /// Joined but not yet answered by a completed barrier (the 5-minute cap applies).
    is_new: bool,
    joined_at: Millis,
    awaiting_join: Held<R>,
    awaiting_sync: Held<R>,
    /// Has not sent SyncGroup since the last barrier completed.
    pending_sync: bool,
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
    fn deadline(&self, new_member_join_timeout_ms: u32) -> Option<Millis> {
        if self.awaiting_join.is_some() {
            // Held members count as heard from, except a brand-new member's first join.
            self.is_new
                .then(|| self.joined_at + Millis::from(new_member_join_timeout_ms))
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

/// The initial-rebalance-delay window (protocol §5: a plain timer, extended while new members
/// arrive, never past the rebalance timeout).
#[derive(Debug, Clone, Copy)]
struct InitialDelay {
    remaining_ms: Millis,
    new_member_added: bool,
}

/// Bookkeeping of the rebalance in progress, for the operator's log line.
#[derive(Debug, Clone, Copy)]
struct RebalanceInfo {
    started_at: Millis,
    trigger: RebalanceTrigger,
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
    pending: Map<String, Millis>,
    /// Assignor name → how many members support it, so that a join's protocol check costs
    /// O(its assignors), not O(members) (a barrier of N joins was O(N²)). A short list: groups
    /// offer one to three assignors.
    assignor_support: Vec<(String, usize)>,
    num_awaiting_join: usize,
    num_pending_sync: usize,
    join_deadline: Option<Millis>,
    /// Half-way through an ordinary barrier: warn the operator about who holds it up.
    barrier_warn_at: Option<Millis>,
    initial_delay: Option<InitialDelay>,
    sync_deadline: Option<Millis>,
    rebalance: Option<RebalanceInfo>,
    /// Members when the last barrier completed (to count who came and went since).
    members_at_last_generation: usize,
    /// When the group entered its current state (retention counts from entering Empty).
    state_since: Millis,
    offsets: Offsets,
    /// Set when a change may have moved the next deadline earlier.
    new_deadline: Option<Millis>,
}

impl<R> Group<R> {
    /// A new, Empty group at generation 0.
    pub fn new(group_id: String, config: Arc<GroupConfig>, now: Millis) -> Self {
        // A new group starts Empty: its retention clock runs from creation.
        let retention_check = now.saturating_add(
            config
                .offsets_retention_ms
                .min(config.empty_group_removal_ms),
        );
        Self {
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
            num_pending_sync: 0,
            join_deadline: None,
            barrier_warn_at: None,
            initial_delay: None,
            sync_deadline: None,
            rebalance: None,
            members_at_last_generation: 0,
            state_since: now,
            offsets: Map::default(),
            new_deadline: Some(retention_check),
        }
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

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    pub fn has_offsets(&self) -> bool {
        !self.offsets.is_empty()
    }

    /// When the group entered its current state.
    pub fn state_since(&self) -> Millis {
        self.state_since
    }

    /// Whether any member subscribes to one of `topics`.
    pub fn subscribes_to_any(&self, topics: &[String]) -> bool {
        self.members
            .values()
            .any(|m| m.topics.iter().any(|t| topics.contains(t)))
    }

    // ---------------------------------------------------------------- JoinGroup

    /// JoinGroup (protocol §5 "JoinGroup", "Barrier", "Static membership").
    /// `fresh` seeds a new member id if one is needed.
    pub fn join(
        &mut self,
        cx: Ctx<'_>,
        req: JoinGroupRequest,
        client: &ClientInfo,
        fresh: Uuid,
        reply: R,
        out: &mut Output<R>,
    ) {
        let now = cx.now;
        if let Some(code) = self.check_session_timeout(&req) {
            return out.reply(reply, join_error(code, &req.member_id));
        }
        if self.state == GroupState::Dead {
            return out.reply(
                reply,
                join_error(ErrorCode::CoordinatorNotAvailable, &req.member_id),
            );
        }

        if req.member_id.is_empty() {
            self.join_unknown_member(cx, req, client, fresh, reply, out);
            return;
        }

        if self.pending.contains_key(&req.member_id) {
            // A pending id is not a member yet: size and protocol checks apply, and a refusal
            // keeps the id pending (it may rejoin with better assignors).
            if !self.accepts_new_member() {
                return out.reply(
                    reply,
                    join_error(ErrorCode::GroupMaxSizeReached, &req.member_id),
                );
            }
            if !self.supports_assignors(&req.assignors, None) {
                return out.reply(
                    reply,
                    join_error(ErrorCode::InconsistentGroupProtocol, &req.member_id),
                );
            }
            self.pending.remove(&req.member_id);
            if self.pending.is_empty() {
                // A join storm leaves a table sized for all its pending ids; free it once the
                // last one has joined, rather than keep it in every idle group.
                self.pending.shrink_to_fit();
            }
            let member_id = req.member_id.clone();
            self.add_member(cx, member_id, req, client, reply, out);
            return;
        }

        if let Err(code) = self.check_member(&req.member_id, req.group_instance_id.as_deref()) {
            return out.reply(reply, join_error(code, &req.member_id));
        }
        self.heard_from(&req.member_id, now);
        if !self.supports_assignors(&req.assignors, Some(&req.member_id)) {
            return out.reply(
                reply,
                join_error(ErrorCode::InconsistentGroupProtocol, &req.member_id),
            );
        }

        let member_id = req.member_id.clone();
        match self.state {
            GroupState::PreparingRebalance => {
                self.update_member_and_await(cx, &member_id, req, reply, out);
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                let unchanged = self
                    .members
                    .get(member_id.as_str())
                    .is_some_and(|m| m.same_metadata(&req));
                let is_leader = self.leader.as_deref() == Some(member_id.as_str());
                let answer_now = if self.state == GroupState::Stable {
                    unchanged && !is_leader
                } else {
                    unchanged
                };
                if answer_now {
                    // A lost JoinGroup response being retried: give back the current generation.
                    let response = self.join_response(&member_id, is_leader, false, cx);
                    out.reply(reply, response);
                } else {
                    self.update_member_and_await(cx, &member_id, req, reply, out);
                    self.prepare_rebalance(cx, RebalanceTrigger::MetadataChange, out);
                }
            }
            // Known members do not exist in Empty or Dead groups; `check_member` refused them.
            GroupState::Empty | GroupState::Dead => {
                out.reply(reply, join_error(ErrorCode::UnknownMemberId, &member_id));
            }
        }
    }

    fn join_unknown_member(
        &mut self,
        cx: Ctx<'_>,
        req: JoinGroupRequest,
        client: &ClientInfo,
        fresh: Uuid,
        reply: R,
        out: &mut Output<R>,
    ) {
        let known_instance = req
            .group_instance_id
            .as_ref()
            .and_then(|i| self.statics.get(i))
            .map(|id| id.to_string());
        if let Some(old_member_id) = known_instance {
            if !self.supports_assignors(&req.assignors, Some(&old_member_id)) {
                return out.reply(reply, join_error(ErrorCode::InconsistentGroupProtocol, ""));
            }
            self.static_takeover(cx, old_member_id, req, client, fresh, reply, out);
            return;
        }
        if !self.accepts_new_member() {
            return out.reply(reply, join_error(ErrorCode::GroupMaxSizeReached, ""));
        }
        if !self.supports_assignors(&req.assignors, None) {
            return out.reply(reply, join_error(ErrorCode::InconsistentGroupProtocol, ""));
        }
        if let Some(instance) = req.group_instance_id.as_deref() {
            // A new static member joins directly, without MEMBER_ID_REQUIRED (as in Kafka).
            let member_id = format!("{instance}-{fresh}");
            self.add_member(cx, member_id, req, client, reply, out);
            return;
        }
        let member_id = format!("{}-{}", client.client_id, fresh);
        let expires = cx.now + Millis::from(req.session_timeout_ms);
        self.pending.insert(member_id.clone(), expires);
        self.note_deadline(expires);
        if let Some(delay) = self.initial_delay.as_mut() {
            delay.new_member_added = true;
        }
        out.reply(reply, join_error(ErrorCode::MemberIdRequired, &member_id));
    }

    fn check_session_timeout(&self, req: &JoinGroupRequest) -> Option<ErrorCode> {
        let t = req.session_timeout_ms;
        (t < self.config.min_session_timeout_ms || t > self.config.max_session_timeout_ms)
            .then_some(ErrorCode::InvalidSessionTimeout)
    }

    /// Whether a member the group does not know yet may join (protocol §5, Kafka's
    /// `acceptJoiningMember`).
    fn accepts_new_member(&self) -> bool {
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => !self.config.is_full(self.num_awaiting_join),
            GroupState::CompletingRebalance | GroupState::Stable => {
                !self.config.is_full(self.members.len())
            }
        }
    }

    /// Whether `assignors` has one in common with every current member (other than `except`).
    /// O(assignors), from `assignor_support`.
    fn supports_assignors(&self, assignors: &[AssignorMetadata], except: Option<&str>) -> bool {
        let excepted = except.and_then(|id| self.members.get(id));
        let others = self.members.len() - usize::from(excepted.is_some());
        let answer = !assignors.is_empty()
            && assignors.iter().any(|a| {
                let supporters = self
                    .assignor_support
                    .iter()
                    .find(|(name, _)| *name == a.name)
                    .map_or(0, |(_, n)| *n);
                let own = usize::from(excepted.is_some_and(|m| m.supports(&a.name)));
                supporters.saturating_sub(own) == others
            });
        debug_assert_eq!(
            answer,
            !assignors.is_empty()
                && assignors.iter().any(|a| {
                    self.members
                        .values()
                        .filter(|m| Some(&*m.member_id) != except)
                        .all(|m| m.supports(&a.name))
                }),
            "assignor_support out of step with the members"
        );
        answer
    }

    /// Counts (`add`) or uncounts one member's assignors in `support`; a name the member lists
    /// twice counts once.
    fn count_support(
        support: &mut Vec<(String, usize)>,
        assignors: &[AssignorMetadata],
        add: bool,
    ) {
        for (i, a) in assignors.iter().enumerate() {
            if assignors.iter().take(i).any(|b| b.name == a.name) {
                continue;
            }
            let at = support.iter().position(|(name, _)| *name == a.name);
            match (at, add) {
                (Some(at), true) => {
                    if let Some((_, n)) = support.get_mut(at) {
                        *n += 1;
                    }
                }
                (None, true) => {
                    // Exactly: groups offer one to three assignors, and a first `push` would
                    // reserve four slots (128 bytes) in every group.
                    support.reserve_exact(1);
                    support.push((a.name.clone(), 1));
                }
                (Some(at), false) => {
                    if let Some((_, n)) = support.get_mut(at) {
                        *n -= 1;
                        if *n == 0 {
                            support.swap_remove(at);
                        }
                    }
                }
                (None, false) => {}
            }
        }
    }

    /// Checks a non-empty member id (and instance id, if given) against the group.
    fn check_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
        if let Some(instance) = instance_id {
            if let Some(bound) = self.statics.get(instance) {
                if **bound != *member_id {
                    return Err(ErrorCode::FencedInstanceId);
                }
            }
        }
        match self.members.get(member_id) {
            None => Err(ErrorCode::UnknownMemberId),
            Some(m) if instance_id.is_some() && m.instance_id.as_deref() != instance_id => {
                Err(ErrorCode::FencedInstanceId)
            }
            Some(_) => Ok(()),
        }
    }

    fn heard_from(&mut self, member_id: &str, now: Millis) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_heard = now;
        }
    }

    fn add_member(
        &mut self,
        cx: Ctx<'_>,
        member_id: String,
        req: JoinGroupRequest,
        client: &ClientInfo,
        reply: R,
        out: &mut Output<R>,
    ) {
        let now = cx.now;
        let member_id: Arc<str> = member_id.into();
        if let Some(instance) = &req.group_instance_id {
            self.statics
                .insert(instance.clone(), Arc::clone(&member_id));
        }
        if self.leader.is_none() {
            self.leader = Some(Arc::clone(&member_id));
        }
        let member = Member {
            member_id: Arc::clone(&member_id),
            instance_id: req.group_instance_id.map(String::into_boxed_str),
            client: client.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            topics: req.topics.into_boxed_slice(),
            assignors: req.assignors.into_boxed_slice(),
            owned_partitions: req.owned_partitions.into_boxed_slice(),
            assignment: Box::default(),
            assignment_user_data: Box::default(),
            last_heard: now,
            is_new: true,
            joined_at: now,
            awaiting_join: Held::some(reply),
            awaiting_sync: Held::none(),
            pending_sync: false,
        };
        Self::count_support(&mut self.assignor_support, &member.assignors, true);
        self.members.insert(member_id, Box::new(member));
        self.num_awaiting_join += 1;
        self.note_deadline(now + Millis::from(self.config.new_member_join_timeout_ms));
        if let Some(delay) = self.initial_delay.as_mut() {
            delay.new_member_added = true;
        }
        if self.state == GroupState::PreparingRebalance {
            self.maybe_complete_join(cx, out);
        } else {
            self.prepare_rebalance(cx, RebalanceTrigger::Join, out);
        }
    }

    /// Stores a known member's new metadata and holds its join at the barrier.
    fn update_member_and_await(
        &mut self,
        cx: Ctx<'_>,
        member_id: &str,
        req: JoinGroupRequest,
        reply: R,
        out: &mut Output<R>,
    ) {
        let Some(m) = self.members.get_mut(member_id) else {
            return out.reply(reply, join_error(ErrorCode::UnknownMemberId, member_id));
        };
        if *m.assignors != *req.assignors {
            Self::count_support(&mut self.assignor_support, &m.assignors, false);
            Self::count_support(&mut self.assignor_support, &req.assignors, true);
        }
        m.update_from(req);
        if let Some(old) = m.awaiting_join.replace(reply) {
            // A second JoinGroup while the first is held: the first is superseded.
            out.reply(old, join_error(ErrorCode::RebalanceInProgress, member_id));
        } else {
            self.num_awaiting_join += 1;
        }
        if self.state == GroupState::PreparingRebalance {
            self.maybe_complete_join(cx, out);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn static_takeover(
        &mut self,
        cx: Ctx<'_>,
        old_member_id: String,
        req: JoinGroupRequest,
        client: &ClientInfo,
        fresh: Uuid,
        reply: R,
        out: &mut Output<R>,
    ) {
        let instance = req.group_instance_id.clone().unwrap_or_default();
        let new_member_id: Arc<str> = format!("{instance}-{fresh}").into();
        let Some(mut member) = self.members.remove(old_member_id.as_str()) else {
            // The static map and the member map disagree; should be impossible. Treat as new.
            self.statics.remove(&instance);
            let member_id = new_member_id.to_string();
            self.add_member(cx, member_id, req, client, reply, out);
            return;
        };
        // The old id's held requests are fenced at once.
        if let Some(r) = member.awaiting_join.take() {
            self.num_awaiting_join -= 1;
            out.reply(r, join_error(ErrorCode::FencedInstanceId, &old_member_id));
        }
        if let Some(r) = member.awaiting_sync.take() {
            out.reply(r, sync_error(ErrorCode::FencedInstanceId));
        }
        let old_assignors = std::mem::take(&mut member.assignors);
        member.member_id = new_member_id.clone();
        member.client = client.clone();
        member.last_heard = cx.now;
        member.update_from(req);
        let assignors_changed = *member.assignors != *old_assignors;
        if assignors_changed {
            Self::count_support(&mut self.assignor_support, &old_assignors, false);
            Self::count_support(&mut self.assignor_support, &member.assignors, true);
        }
        self.statics.insert(instance, Arc::clone(&new_member_id));
        let was_leader = self.leader.as_deref() == Some(old_member_id.as_str());
        if was_leader {
            self.leader = Some(Arc::clone(&new_member_id));
        }
        let session_due = cx.now + Millis::from(member.session_timeout_ms);
        self.members.insert(Arc::clone(&new_member_id), member);
        self.note_deadline(session_due);
        out.persist = true;

        match self.state {
            GroupState::Stable => {
                let vote_unchanged =
                    !assignors_changed || self.select_assignor().as_deref() == self.assignor();
                if vote_unchanged {
                    let response = self.join_response(&new_member_id, was_leader, was_leader, cx);
                    out.reply(reply, response);
                } else {
                    self.update_member_await_only(&new_member_id, reply);
                    self.prepare_rebalance(cx, RebalanceTrigger::MetadataChange, out);
                }
            }
            GroupState::CompletingRebalance => {
                self.update_member_await_only(&new_member_id, reply);
                self.prepare_rebalance(cx, RebalanceTrigger::MetadataChange, out);
            }
            GroupState::PreparingRebalance => {
                self.update_member_await_only(&new_member_id, reply);
                self.maybe_complete_join(cx, out);
            }
            GroupState::Empty | GroupState::Dead => {
                // A static member is never kept in an Empty group; answer defensively.
                out.reply(
                    reply,
                    join_error(ErrorCode::UnknownMemberId, &new_member_id),
                );
            }
        }
    }

    fn update_member_await_only(&mut self, member_id: &str, reply: R) {
        if let Some(m) = self.members.get_mut(member_id) {
            if m.awaiting_join.replace(reply).is_none() {
                self.num_awaiting_join += 1;
            }
        }
    }

    /// The JoinGroup answer for the current generation. The leader gets the member list.
    fn join_response(
        &self,
        member_id: &str,
        with_members: bool,
        skip_assignment: bool,
        cx: Ctx<'_>,
    ) -> Response {
        let (members, topics) = if with_members {
            (self.joined_members(), self.subscribed_topics(cx.topics))
        } else {
            (Vec::new(), Vec::new())
        };
        Response::JoinGroup(JoinGroupResponse {
            error_code: NONE,
            generation_id: self.generation,
            assignor: self.assignor.clone(),
            leader_id: self.leader.as_deref().unwrap_or_default().to_owned(),
            member_id: member_id.to_owned(),
            skip_assignment,
            members,
            topics,
        })
    }

    fn joined_members(&self) -> Vec<JoinedMember> {
        let assignor = self.assignor.as_deref().unwrap_or_default();
        let mut list: Vec<JoinedMember> = self
            .members
            .values()
            .map(|m| JoinedMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.as_deref().map(str::to_owned),
                topics: m.topics.to_vec(),
                user_data: m.user_data_for(assignor),
                owned_partitions: m.owned_partitions.to_vec(),
            })
            .collect();
        list.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
        list
    }

    fn subscribed_topics(&self, catalog: &dyn TopicLookup) -> Vec<TopicInfo> {
        let mut names: Vec<&str> = self
            .members
            .values()
            .flat_map(|m| m.topics.iter().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .filter_map(|t| {
                catalog.partitions(t).map(|partitions| TopicInfo {
                    topic: t.to_owned(),
                    partitions,
                })
            })
            .collect()
    }

    /// Kafka's `selectProtocol`: among assignors every member supports, each member votes for
    /// its most preferred one; most votes wins (ties go to the name first in order).
    fn select_assignor(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .assignors
            .iter()
            .map(|a| a.name.as_str())
            .filter(|name| self.members.values().all(|m| m.supports(name)))
            .collect();
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            if let Some(choice) = m
                .assignors
                .iter()
                .map(|a| a.name.as_str())
                .find(|n| candidates.contains(n))
            {
                *votes.entry(choice).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(name, _)| name.to_owned())
    }

    // ---------------------------------------------------------------- barrier

    /// Moves the group to PreparingRebalance (Kafka's `prepareRebalance`).
    fn prepare_rebalance(&mut self, cx: Ctx<'_>, trigger: RebalanceTrigger, out: &mut Output<R>) {
        let now = cx.now;
        match self.state {
            GroupState::PreparingRebalance | GroupState::Dead => return,
            GroupState::CompletingRebalance => {
                // Held syncs are told to rejoin; the half-made assignment is dropped.
                let mut released = None::<Millis>;
                for m in self.members.values_mut() {
                    if let Some(r) = m.awaiting_sync.take() {
                        out.reply(r, sync_error(ErrorCode::RebalanceInProgress));
                        // Heard from while held (protocol §5 "Session expiry"; Kafka's
                        // `propagateAssignment` reschedules the heartbeat): its session runs
                        // from this answer, not from when it sent the SyncGroup.
                        m.last_heard = now;
                        let due = now + Millis::from(m.session_timeout_ms);
                        released = Some(released.map_or(due, |d| d.min(due)));
                    }
                    m.clear_assignment();
                }
                if let Some(due) = released {
                    self.note_deadline(due);
                }
            }
            GroupState::Empty | GroupState::Stable => {}
        }
        for m in self.members.values_mut() {
            m.pending_sync = false;
        }
        self.num_pending_sync = 0;
        self.sync_deadline = None;
        let rebalance_timeout = self.rebalance_timeout_ms();
        // A zero initial delay is a timer that fires at once: the join completes now.
        let mut fires_now = false;
        if self.state == GroupState::Empty {
            let delay = Millis::from(self.config.initial_rebalance_delay_ms).min(rebalance_timeout);
            if delay == 0 {
                self.initial_delay = None;
                self.join_deadline = None;
                fires_now = true;
            } else {
                self.initial_delay = Some(InitialDelay {
                    remaining_ms: rebalance_timeout - delay,
                    new_member_added: false,
                });
                self.join_deadline = Some(now + delay);
            }
        } else {
            self.initial_delay = None;
            self.join_deadline = Some(now + rebalance_timeout);
            let warn_at = now + rebalance_timeout / 2;
            self.barrier_warn_at = Some(warn_at);
            self.note_deadline(warn_at);
        }
        self.rebalance = Some(RebalanceInfo {
            started_at: now,
            trigger,
        });
        self.set_state(GroupState::PreparingRebalance, now);
        if let Some(due) = self.join_deadline {
            self.note_deadline(due);
        }
        out.persist = true;
        out.events.push(Event::RebalanceStarted {
            trigger,
            generation: self.generation,
        });
        if fires_now {
            self.complete_join(cx, out);
        } else {
            self.maybe_complete_join(cx, out);
        }
    }

    fn rebalance_timeout_ms(&self) -> Millis {
        self.members
            .values()
            .map(|m| Millis::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Completes the barrier early once every member and pending id has rejoined (never during
    /// the initial delay, which is a plain timer).
    fn maybe_complete_join(&mut self, cx: Ctx<'_>, out: &mut Output<R>) {
        if self.state == GroupState::PreparingRebalance
            && self.initial_delay.is_none()
            && self.num_awaiting_join == self.members.len()
            && self.pending.is_empty()
        {
            self.complete_join(cx, out);
        }
    }

    /// The barrier closes: laggards go, the generation moves on, held joins are answered.
    fn complete_join(&mut self, cx: Ctx<'_>, out: &mut Output<R>) {
        let now = cx.now;
        // Dynamic members that did not rejoin are removed; static ones stay (protocol §5).
        let laggards: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
            .map(|m| m.member_id.to_string())
            .collect();
        if !laggards.is_empty() {
            for id in &laggards {
                self.remove_member(id, out);
            }
            out.events.push(Event::EvictedAtBarrier {
                member_ids: laggards,
            });
        }

        if !self.members.is_empty() && self.num_awaiting_join == 0 {
            // Only static members that did not rejoin remain: wait another rebalance timeout
            // for them to rejoin or for their sessions to expire (as Kafka does).
            let due = now + self.rebalance_timeout_ms();
            self.join_deadline = Some(due);
            self.initial_delay = None;
            self.note_deadline(due);
            return;
        }

        self.join_deadline = None;
        self.barrier_warn_at = None;
        self.initial_delay = None;
        self.generation += 1;
        out.persist = true;
        let info = self.rebalance.take();
        let trigger = info.map_or(RebalanceTrigger::Join, |i| i.trigger);
        let barrier_ms = info.map_or(0, |i| now.saturating_sub(i.started_at));
        // Members that joined during this rebalance are the ones still marked new.
        let added = self
            .members
            .values()
            .filter(|m| m.is_new && m.awaiting_join.is_some())
            .count();
        let removed = (self.members_at_last_generation + added).saturating_sub(self.members.len());
        self.members_at_last_generation = self.members.len();

        if self.members.is_empty() {
            self.assignor = None;
            self.leader = None;
            self.set_state(GroupState::Empty, now);
            out.events.push(Event::RebalanceCompleted {
                generation: self.generation,
                members: 0,
                assignor: None,
                barrier_ms,
                trigger,
                added,
                removed,
            });
            return;
        }

        self.assignor = self.select_assignor();
        let leader_rejoined = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .is_some_and(|m| m.awaiting_join.is_some());
        if !leader_rejoined {
            self.leader = self
                .members
                .values()
                .filter(|m| m.awaiting_join.is_some())
                .map(|m| &m.member_id)
                .min()
                .cloned();
        }
        self.set_state(GroupState::CompletingRebalance, now);

        let leader = self.leader.clone().unwrap_or_default();
        let leader_response = self.join_response(&leader, true, false, cx);
        let generation = self.generation;
        let assignor = self.assignor.clone();
        let members_now = self.members.len();
        let mut answered = 0;
        for m in self.members.values_mut() {
            m.clear_assignment();
            // Only members that rejoined are expected to sync; a static member that missed
            // the barrier is not removed for it (protocol §5 "Static membership").
            if let Some(r) = m.awaiting_join.take() {
                answered += 1;
                m.pending_sync = true;
                m.is_new = false;
                m.last_heard = now;
                let response = if m.member_id == leader {
                    leader_response.clone()
                } else {
                    Response::JoinGroup(JoinGroupResponse {
                        error_code: NONE,
                        generation_id: generation,
                        assignor: assignor.clone(),
                        leader_id: leader.to_string(),
                        member_id: m.member_id.to_string(),
                        skip_assignment: false,
                        members: Vec::new(),
                        topics: Vec::new(),
                    })
                };
                out.reply(r, response);
            }
        }
        self.num_awaiting_join = 0;
        self.num_pending_sync = answered;
        let sync_due = now + self.rebalance_timeout_ms();
        self.sync_deadline = Some(sync_due);
        self.note_deadline(sync_due);
        // Answered members' sessions run again from now.
        if let Some(shortest) = self.members.values().map(|m| m.session_timeout_ms).min() {
            self.note_deadline(now + Millis::from(shortest));
        }
        out.events.push(Event::RebalanceCompleted {
            generation,
            members: members_now,
            assignor,
            barrier_ms,
            trigger,
            added,
            removed,
        });
    }

    /// Removes a member, answering its held requests UNKNOWN_MEMBER_ID. Does not rebalance.
    fn remove_member(&mut self, member_id: &str, out: &mut Output<R>) -> bool {
        let Some(mut m) = self.members.remove(member_id) else {
            return false;
        };
        Self::count_support(&mut self.assignor_support, &m.assignors, false);
        if let Some(r) = m.awaiting_join.take() {
            self.num_awaiting_join -= 1;
            out.reply(r, join_error(ErrorCode::UnknownMemberId, member_id));
        }
        if let Some(r) = m.awaiting_sync.take() {
            out.reply(r, sync_error(ErrorCode::UnknownMemberId));
        }
        if m.pending_sync {
            self.num_pending_sync -= 1;
        }
        if let Some(instance) = &m.instance_id {
            if self.statics.get(&**instance).map(|id| &**id) == Some(member_id) {
                self.statics.remove(&**instance);
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            // Kafka hands leadership on at once; the barrier may still pick a rejoined member.
            self.leader = self.members.keys().min().cloned();
        }
        out.persist = true;
        true
    }

    /// After members were removed: rebalance, or let the barrier re-check (Kafka's
    /// `removeMemberAndUpdateGroup`).
    fn after_removal(&mut self, cx: Ctx<'_>, trigger: RebalanceTrigger, out: &mut Output<R>) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(cx, trigger, out)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(cx, out),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    fn set_state(&mut self, state: GroupState, now: Millis) {
        if self.state != state {
            self.state = state;
            self.state_since = now;
            if state == GroupState::Empty {
                // Retention clocks start now; wake early and let the tick work out the rest.
                let soonest = self
                    .config
                    .offsets_retention_ms
                    .min(self.config.empty_group_removal_ms);
                self.note_deadline(now.saturating_add(soonest));
            }
        }
    }

    /// When retention next has work (Empty groups only): the oldest offset's expiry, or the
    /// removal of a group with nothing left.
    fn retention_deadline(&self) -> Option<Millis> {
        if self.state != GroupState::Empty || !self.pending.is_empty() {
            return None;
        }
        let oldest = self
            .offsets
            .values()
            .flat_map(|parts| parts.values())
            .map(|o| o.commit_timestamp_ms)
            .min();
        Some(match oldest {
            Some(ts) => ts
                .max(self.state_since)
                .saturating_add(self.config.offsets_retention_ms),
            None => self
                .state_since
                .saturating_add(self.config.empty_group_removal_ms),
        })
    }

    /// Offset retention and removal of abandoned groups (protocol §5 via Kafka's offset
    /// expiration): an offset expires once the group has been Empty, and the offset unchanged,
    /// for the retention period; a group left Empty with no offsets is removed (state Dead,
    /// `persist` set so the caller deletes it durably).
    fn run_retention(&mut self, now: Millis, out: &mut Output<R>) {
        if self.state != GroupState::Empty || !self.pending.is_empty() {
            return;
        }
        let retention = self.config.offsets_retention_ms;
        if self.state_since.saturating_add(retention) <= now {
            let expired = self.expire_offsets(now.saturating_sub(retention));
            if !expired.is_empty() {
                out.events.push(Event::OffsetsExpired {
                    partitions: expired.len(),
                });
                out.expired_offsets.extend(expired);
            }
        }
        if self.offsets.is_empty()
            && self
                .state_since
                .saturating_add(self.config.empty_group_removal_ms)
                <= now
        {
            self.set_state(GroupState::Dead, now);
            out.persist = true;
            out.events.push(Event::GroupRemoved);
        }
    }

    // ---------------------------------------------------------------- SyncGroup

    /// SyncGroup (protocol §5 "SyncGroup").
    pub fn sync(&mut self, cx: Ctx<'_>, req: SyncGroupRequest, reply: R, out: &mut Output<R>) {
        if self.state == GroupState::Dead {
            return out.reply(reply, sync_error(ErrorCode::CoordinatorNotAvailable));
        }
        if let Err(code) = self.check_member(&req.member_id, req.group_instance_id.as_deref()) {
            return out.reply(reply, sync_error(code));
        }
        self.heard_from(&req.member_id, cx.now);
        if req.generation_id != self.generation {
            return out.reply(reply, sync_error(ErrorCode::IllegalGeneration));
        }
        if req.assignor.is_some() && req.assignor != self.assignor {
            return out.reply(reply, sync_error(ErrorCode::InconsistentGroupProtocol));
        }
        match self.state {
            GroupState::PreparingRebalance => {
                out.reply(reply, sync_error(ErrorCode::RebalanceInProgress));
            }
            GroupState::CompletingRebalance => {
                self.synced(&req.member_id);
                if let Some(m) = self.members.get_mut(req.member_id.as_str()) {
                    if let Some(old) = m.awaiting_sync.replace(reply) {
                        out.reply(old, sync_error(ErrorCode::RebalanceInProgress));
                    }
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    self.apply_assignment(req.assignments, cx.now, out);
                }
            }
            GroupState::Stable => {
                self.synced(&req.member_id);
                let response = self
                    .members
                    .get(req.member_id.as_str())
                    .map(|m| self.sync_response(m))
                    .unwrap_or_else(|| sync_error(ErrorCode::UnknownMemberId));
                out.reply(reply, response);
            }
            GroupState::Empty | GroupState::Dead => {
                out.reply(reply, sync_error(ErrorCode::UnknownMemberId));
            }
        }
    }

    fn synced(&mut self, member_id: &str) {
        if let Some(m) = self.members.get_mut(member_id) {
            if m.pending_sync {
                m.pending_sync = false;
                self.num_pending_sync -= 1;
            }
        }
        if self.num_pending_sync == 0 && self.sync_deadline.is_some() {
            self.sync_deadline = None;
        }
    }

    fn sync_response(&self, m: &Member<R>) -> Response {
        Response::SyncGroup(SyncGroupResponse {
            error_code: NONE,
            assignor: self.assignor.clone(),
            partitions: m.assignment.to_vec(),
            user_data: m.assignment_user_data.to_vec(),
        })
    }

    /// The leader's assignment: store it (members left out get an empty one), go Stable, and
    /// release every held SyncGroup.
    fn apply_assignment(
        &mut self,
        assignments: Vec<muster_protocol::MemberAssignment>,
        now: Millis,
        out: &mut Output<R>,
    ) {
        for m in self.members.values_mut() {
            m.clear_assignment();
        }
        for a in assignments {
            if let Some(m) = self.members.get_mut(a.member_id.as_str()) {
                m.assignment = a.partitions.into_boxed_slice();
                m.assignment_user_data = a.user_data.into_boxed_slice();
            }
        }
        self.set_state(GroupState::Stable, now);
        out.persist = true;
        let assignor = self.assignor.clone();
        for m in self.members.values_mut() {
            if let Some(r) = m.awaiting_sync.take() {
                m.last_heard = now;
                out.reply(
                    r,
                    Response::SyncGroup(SyncGroupResponse {
                        error_code: NONE,
                        assignor: assignor.clone(),
                        partitions: m.assignment.to_vec(),
                        user_data: m.assignment_user_data.to_vec(),
                    }),
                );
            }
        }
        if let Some(shortest) = self.members.values().map(|m| m.session_timeout_ms).min() {
            self.note_deadline(now + Millis::from(shortest));
        }
    }

    // ---------------------------------------------------------------- Heartbeat

    /// Heartbeat (protocol §5 "Heartbeat"): answered at once; returns the error code.
    pub fn heartbeat(&mut self, now: Millis, req: &HeartbeatRequest) -> ErrorCode {
        match self.state {
            GroupState::Dead => return ErrorCode::CoordinatorNotAvailable,
            GroupState::Empty => return ErrorCode::UnknownMemberId,
            _ => {}
        }
        if let Err(code) = self.check_member(&req.member_id, req.group_instance_id.as_deref()) {
            return code;
        }
        // Refreshing a session only pushes its deadline later: no timer work needed.
        self.heard_from(&req.member_id, now);
        if req.generation_id != self.generation {
            return ErrorCode::IllegalGeneration;
        }
        if self.state == GroupState::PreparingRebalance {
            ErrorCode::RebalanceInProgress
        } else {
            ErrorCode::None
        }
    }

    // ---------------------------------------------------------------- LeaveGroup

    /// LeaveGroup (protocol §5 "LeaveGroup"): per-member results at once; held requests of the
    /// leaving members are answered through `out`.
    pub fn leave(
        &mut self,
        cx: Ctx<'_>,
        req: LeaveGroupRequest,
        out: &mut Output<R>,
    ) -> LeaveGroupResponse {
        let mut results = Vec::with_capacity(req.members.len());
        let mut removed_any = false;
        let mut forgot_pending = false;
        for leaving in req.members {
            let code = if self.state == GroupState::Dead {
                ErrorCode::CoordinatorNotAvailable
            } else if leaving.member_id.is_empty() {
                match leaving
                    .group_instance_id
                    .as_ref()
                    .and_then(|i| self.statics.get(i))
                    .cloned()
                {
                    Some(member_id) => {
                        removed_any |= self.remove_member(&member_id, out);
                        ErrorCode::None
                    }
                    None => ErrorCode::UnknownMemberId,
                }
            } else if self.pending.remove(&leaving.member_id).is_some() {
                forgot_pending = true;
                ErrorCode::None
            } else {
                match self.check_member(&leaving.member_id, leaving.group_instance_id.as_deref()) {
                    Ok(()) => {
                        removed_any |= self.remove_member(&leaving.member_id, out);
                        ErrorCode::None
                    }
                    Err(code) => code,
                }
            };
            results.push(LeaveResult {
                member_id: leaving.member_id,
                group_instance_id: leaving.group_instance_id,
                error_code: code.code(),
            });
        }
        if removed_any {
            self.after_removal(cx, RebalanceTrigger::Leave, out);
        } else if forgot_pending {
            self.maybe_complete_join(cx, out);
            if let Some(due) = self.retention_deadline() {
                self.note_deadline(due);
            }
        }
        LeaveGroupResponse {
            error_code: NONE,
            members: results,
        }
    }

    // ---------------------------------------------------------------- timers

    /// The earliest time at which [`Group::tick`] has work to do.
    pub fn next_deadline(&self) -> Option<Millis> {
        let cap = self.config.new_member_join_timeout_ms;
        let members = self.members.values().filter_map(|m| m.deadline(cap));
        let pending = self.pending.values().copied();
        members
            .chain(pending)
            .chain(self.join_deadline)
            .chain(self.sync_deadline)
            .chain(self.barrier_warn_at)
            .chain(self.retention_deadline())
            .min()
    }

    /// The earliest deadline that changes since the last call introduced (`None`: nothing
    /// earlier than before). Lets the caller keep a timer armed at or before
    /// [`Group::next_deadline`] without scanning every member after every request; after
    /// [`Group::tick`] it is the full next deadline. Heartbeats only push deadlines later, so
    /// they never produce one.
    pub fn take_new_deadline(&mut self) -> Option<Millis> {
        self.new_deadline.take()
    }

    fn note_deadline(&mut self, at: Millis) {
        self.new_deadline = Some(self.new_deadline.map_or(at, |d| d.min(at)));
    }

    /// Runs every timer due at `now`: pending ids and sessions expire, the barrier and the
    /// pending-sync window close.
    pub fn tick(&mut self, cx: Ctx<'_>, out: &mut Output<R>) {
        let now = cx.now;
        if self.state == GroupState::Dead {
            return;
        }
        let before = self.pending.len();
        self.pending.retain(|_, deadline| *deadline > now);
        let forgot_pending = self.pending.len() != before;

        // Session expiry and the new-member cap.
        let cap = self.config.new_member_join_timeout_ms;
        let mut expired: Vec<(String, bool, Millis)> = self
            .members
            .values()
            .filter(|m| m.deadline(cap).is_some_and(|d| d <= now))
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.awaiting_join.is_some(),
                    now.saturating_sub(m.last_heard),
                )
            })
            .collect();
        expired.sort_unstable();
        let removed_any = !expired.is_empty();
        for (member_id, new_member_held, age) in expired {
            self.remove_member(&member_id, out);
            out.events.push(if new_member_held {
                Event::NewMemberTimedOut { member_id }
            } else {
                Event::MemberExpired {
                    member_id,
                    last_heard_ms_ago: age,
                }
            });
        }
        if removed_any {
            self.after_removal(cx, RebalanceTrigger::SessionExpiry, out);
        } else if forgot_pending {
            self.maybe_complete_join(cx, out);
        }

        if self.sync_deadline.is_some_and(|d| d <= now) {
            self.sync_deadline = None;
            if matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            ) {
                let mut laggards: Vec<String> = self
                    .members
                    .values()
                    .filter(|m| m.pending_sync)
                    .map(|m| m.member_id.to_string())
                    .collect();
                if !laggards.is_empty() {
                    laggards.sort_unstable();
                    for id in &laggards {
                        self.remove_member(id, out);
                    }
                    out.events.push(Event::EvictedAtSync {
                        member_ids: laggards,
                    });
                    self.after_removal(cx, RebalanceTrigger::SyncTimeout, out);
                }
            }
        }

        // Last: a rebalance started above (with no members left, its timeout is 0) closes in
        // this same tick rather than leaving a deadline that is already due.
        if self.state == GroupState::PreparingRebalance
            && self.join_deadline.is_some_and(|d| d <= now)
        {
            self.on_join_deadline(cx, out);
        }
        if self.barrier_warn_at.is_some_and(|d| d <= now) {
            self.barrier_warn_at = None;
            if self.state == GroupState::PreparingRebalance {
                let mut waiting: Vec<String> = self
                    .members
                    .values()
                    .filter(|m| m.awaiting_join.is_none())
                    .map(|m| m.member_id.to_string())
                    .chain(self.pending.keys().cloned())
                    .collect();
                waiting.sort_unstable();
                if !waiting.is_empty() {
                    out.events.push(Event::BarrierSlow {
                        waiting_for: waiting,
                        elapsed_ms: self
                            .rebalance
                            .map_or(0, |r| now.saturating_sub(r.started_at)),
                    });
                }
            }
        }
        self.run_retention(now, out);
        // The caller's timer for this group was consumed by this tick: hand it the full next
        // deadline to arm.
        self.new_deadline = self.next_deadline();
    }

    fn on_join_deadline(&mut self, cx: Ctx<'_>, out: &mut Output<R>) {
        if let Some(delay) = self.initial_delay {
            if delay.new_member_added && delay.remaining_ms > 0 {
                let step =
                    Millis::from(self.config.initial_rebalance_delay_ms).min(delay.remaining_ms);
                self.initial_delay = Some(InitialDelay {
                    remaining_ms: delay.remaining_ms - step,
                    new_member_added: false,
                });
                self.join_deadline = Some(cx.now + step);
                self.note_deadline(cx.now + step);
                return;
            }
        }
        self.complete_join(cx, out);
    }

    // ---------------------------------------------------------------- topics

    /// The partition count of `topics` changed: subscribed groups rebalance (protocol §5
    /// "Topics"). A group already preparing picks the new counts up when its barrier closes.
    pub fn topics_changed(&mut self, cx: Ctx<'_>, topics: &[String], out: &mut Output<R>) {
        if matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance
        ) && self.subscribes_to_any(topics)
        {
            self.prepare_rebalance(cx, RebalanceTrigger::TopicChange, out);
        }
    }

    // ---------------------------------------------------------------- offsets

    /// OffsetCommit (protocol §5 "OffsetCommit"). Returns the answer and the offsets to make
    /// durable; the answer must not leave before they are, and [`Group::apply_offsets`] must
    /// then be called with them.
    pub fn commit_offsets(
        &mut self,
        now: Millis,
        req: OffsetCommitRequest,
    ) -> (OffsetCommitResponse, Vec<OffsetWrite>) {
        if let Err(code) = self.check_commit(now, &req) {
            return (commit_error(code, &req), Vec::new());
        }
        let max_metadata = self.config.max_offset_metadata_bytes;
        let mut writes = Vec::new();
        let mut topics = Vec::with_capacity(req.topics.len());
        for t in req.topics {
            let mut results = Vec::with_capacity(t.partitions.len());
            for p in t.partitions {
                let too_large = p.metadata.as_ref().is_some_and(|m| m.len() > max_metadata);
                let code = if too_large {
                    ErrorCode::OffsetMetadataTooLarge
                } else {
                    writes.push(OffsetWrite {
                        topic: t.topic.clone(),
                        partition: p.partition,
                        committed: CommittedOffset {
                            offset: p.offset,
                            metadata: p.metadata,
                            commit_timestamp_ms: now,
                        },
                    });
                    ErrorCode::None
                };
                results.push(PartitionResult {
                    partition: p.partition,
                    error_code: code.code(),
                });
            }
            topics.push(PartitionResults {
                topic: t.topic,
                partitions: results,
            });
        }
        (
            OffsetCommitResponse {
                error_code: NONE,
                topics,
            },
            writes,
        )
    }

    fn check_commit(&mut self, now: Millis, req: &OffsetCommitRequest) -> Result<(), ErrorCode> {
        if self.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        let simple =
            req.generation_id < 0 && req.member_id.is_empty() && req.group_instance_id.is_none();
        if simple {
            // A commit from outside any generation is only for groups nobody is in.
            return if self.state == GroupState::Empty {
                Ok(())
            } else {
                Err(ErrorCode::UnknownMemberId)
            };
        }
        self.check_member(&req.member_id, req.group_instance_id.as_deref())?;
        self.heard_from(&req.member_id, now);
        if req.generation_id != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        match self.state {
            GroupState::CompletingRebalance => Err(ErrorCode::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// Makes committed offsets visible to OffsetFetch, once durable.
    pub fn apply_offsets(&mut self, writes: Vec<OffsetWrite>) {
        for w in writes {
            self.offsets
                .entry(w.topic)
                .or_default()
                .insert(w.partition, w.committed);
        }
    }

    /// OffsetFetch (protocol §5 "OffsetFetch"): any state; no commit → offset -1.
    pub fn fetch_offsets(&self, req: &OffsetFetchRequest) -> OffsetFetchResponse {
        fetch_from(Some(&self.offsets), req)
    }

    /// Drops offsets committed at or before `cutoff` (retention); returns what was dropped.
    pub fn expire_offsets(&mut self, cutoff: Millis) -> Vec<(String, i32)> {
        let mut dropped = Vec::new();
        self.offsets.retain(|topic, parts| {
            parts.retain(|p, o| {
                let keep = o.commit_timestamp_ms > cutoff;
                if !keep {
                    dropped.push((topic.clone(), *p));
                }
                keep
            });
            !parts.is_empty()
        });
        dropped
    }

    // ---------------------------------------------------------------- admin

    /// DescribeGroups entry for this group.
    pub fn describe(&self, now: Millis) -> DescribedGroup {
        let mut members: Vec<DescribedMember> = self
            .members
            .values()
            .map(|m| {
                let held = m.awaiting_join.is_some() || m.awaiting_sync.is_some();
                let holding = match self.state {
                    GroupState::PreparingRebalance => m.awaiting_join.is_none(),
                    GroupState::CompletingRebalance => m.pending_sync,
                    _ => false,
                };
                DescribedMember {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.instance_id.as_deref().map(str::to_owned),
                    client_id: m.client.client_id.to_string(),
                    client_host: m.client.client_host.to_string(),
                    topics: m.topics.to_vec(),
                    assignment: m.assignment.to_vec(),
                    session_timeout_ms: m.session_timeout_ms,
                    last_seen_ms_ago: if held {
                        0
                    } else {
                        now.saturating_sub(m.last_heard)
                    },
                    holding_rebalance: holding,
                }
            })
            .collect();
        members.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
        DescribedGroup {
            error_code: NONE,
            group_id: self.group_id.to_string(),
            state: self.state.as_str().to_owned(),
            generation_id: self.generation,
            assignor: self.assignor.clone(),
            leader_id: self.leader.as_deref().unwrap_or_default().to_owned(),
            members,
        }
    }

    /// DeleteGroups: only an Empty group may go; it becomes Dead and its offsets are gone.
    pub fn delete(&mut self, now: Millis) -> ErrorCode {
        match self.state {
            GroupState::Empty => {
                self.offsets.clear();
                self.pending.clear();
                self.set_state(GroupState::Dead, now);
                ErrorCode::None
            }
            GroupState::Dead => ErrorCode::GroupIdNotFound,
            _ => ErrorCode::NonEmptyGroup,
        }
    }

    /// Answers every held request with `code` (shutdown: clients retry elsewhere or later).
    pub fn abort_held(&mut self, code: ErrorCode, out: &mut Output<R>) {
        for m in self.members.values_mut() {
            if let Some(r) = m.awaiting_join.take() {
                self.num_awaiting_join -= 1;
                out.reply(r, join_error(code, &m.member_id));
            }
            if let Some(r) = m.awaiting_sync.take() {
                out.reply(r, sync_error(code));
            }
        }
    }

    // ---------------------------------------------------------------- persistence

    /// The durable form of this group's metadata (protocol §5 "Durability").
    pub fn to_record(&self) -> GroupRecord {
        let mut members: Vec<MemberRecord> = self
            .members
            .values()
            .map(|m| MemberRecord {
                member_id: m.member_id.to_string(),
                group_instance_id: m.instance_id.as_deref().map(str::to_owned),
                client_id: m.client.client_id.to_string(),
                client_host: m.client.client_host.to_string(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                topics: m.topics.to_vec(),
                assignors: m.assignors.to_vec(),
                owned_partitions: m.owned_partitions.to_vec(),
                assignment: m.assignment.to_vec(),
                assignment_user_data: m.assignment_user_data.to_vec(),
            })
            .collect();
        members.sort_unstable_by(|a, b| a.member_id.cmp(&b.member_id));
        GroupRecord {
            group_id: self.group_id.to_string(),
            state: self.state,
            generation: self.generation,
            assignor: self.assignor.clone(),
            leader: self.leader.as_deref().map(str::to_owned),
            members,
            state_since_ms: self.state_since,
        }
    }

    /// Rebuilds a group from its record and offsets after a restart. Every session starts
    /// afresh at `now`; a group caught mid-rebalance comes back in PreparingRebalance.
    pub fn restore(
        record: GroupRecord,
        offsets: Vec<OffsetWrite>,
        config: Arc<GroupConfig>,
        now: Millis,
    ) -> Self {
        let mut group = Group::new(record.group_id, config, now);
        group.generation = record.generation;
        group.assignor = record.assignor;
        group.leader = record.leader.map(Arc::from);
        group.state_since = record.state_since_ms;
        for m in record.members {
            let member_id: Arc<str> = match &group.leader {
                // The leader field shares the leader's allocation.
                Some(leader) if **leader == *m.member_id => Arc::clone(leader),
                _ => m.member_id.into(),
            };
            if let Some(instance) = &m.group_instance_id {
                group
                    .statics
                    .insert(instance.clone(), Arc::clone(&member_id));
            }
            Self::count_support(&mut group.assignor_support, &m.assignors, true);
            group.members.insert(
                Arc::clone(&member_id),
                Box::new(Member {
                    member_id,
                    instance_id: m.group_instance_id.map(String::into_boxed_str),
                    client: ClientInfo {
                        client_id: m.client_id.into(),
                        client_host: m.client_host.into(),
                    },
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    topics: m.topics.into_boxed_slice(),
                    assignors: m.assignors.into_boxed_slice(),
                    owned_partitions: m.owned_partitions.into_boxed_slice(),
                    assignment: m.assignment.into_boxed_slice(),
                    assignment_user_data: m.assignment_user_data.into_boxed_slice(),
                    last_heard: now,
                    is_new: false,
                    joined_at: now,
                    awaiting_join: Held::none(),
                    awaiting_sync: Held::none(),
                    pending_sync: false,
                }),
            );
        }
        group.apply_offsets(offsets);
        group.members_at_last_generation = group.members.len();
        group.state = match (record.state, group.members.is_empty()) {
            (_, true) => GroupState::Empty,
            (GroupState::Stable, false) => GroupState::Stable,
            _ => GroupState::PreparingRebalance,
        };
        if group.state == GroupState::PreparingRebalance {
            // Held requests were lost with the old process; members rejoin within the
            // rebalance timeout or are evicted as at any barrier.
            group.join_deadline = Some(now + group.rebalance_timeout_ms());
            group.rebalance = Some(RebalanceInfo {
                started_at: now,
                trigger: RebalanceTrigger::MetadataChange,
            });
        }
        group.new_deadline = group.next_deadline();
        group
    }
}

pub(crate) fn join_error(code: ErrorCode, member_id: &str) -> Response {
    Response::JoinGroup(JoinGroupResponse {
        error_code: code.code(),
        generation_id: -1,
        assignor: None,
        leader_id: String::new(),
        member_id: member_id.to_owned(),
        skip_assignment: false,
        members: Vec::new(),
        topics: Vec::new(),
    })
}

pub(crate) fn sync_error(code: ErrorCode) -> Response {
    Response::SyncGroup(SyncGroupResponse {
        error_code: code.code(),
        assignor: None,
        partitions: Vec::new(),
        user_data: Vec::new(),
    })
}

/// A request-level OffsetCommit failure: on the top level and on every partition.
pub(crate) fn commit_error(code: ErrorCode, req: &OffsetCommitRequest) -> OffsetCommitResponse {
    OffsetCommitResponse {
        error_code: code.code(),
        topics: req
            .topics
            .iter()
            .map(|t| PartitionResults {
                topic: t.topic.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| PartitionResult {
                        partition: p.partition,
                        error_code: code.code(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// OffsetFetch over a group's offsets (`None`: the group does not exist).
pub(crate) fn fetch_from(
    offsets: Option<&Offsets>,
    req: &OffsetFetchRequest,
) -> OffsetFetchResponse {
    let lookup = |topic: &str, partition: i32| {
        offsets
            .and_then(|o| o.get(topic))
            .and_then(|p| p.get(&partition))
    };
    let topics = match &req.topics {
        Some(wanted) => wanted
            .iter()
            .map(|t| FetchedTopic {
                topic: t.topic.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|&p| fetched(p, lookup(&t.topic, p)))
                    .collect(),
            })
            .collect(),
        None => {
            let mut all: Vec<FetchedTopic> = offsets
                .into_iter()
                .flatten()
                .map(|(topic, parts)| {
                    let mut partitions: Vec<FetchedPartition> =
                        parts.iter().map(|(&p, o)| fetched(p, Some(o))).collect();
                    partitions.sort_unstable_by_key(|p| p.partition);
                    FetchedTopic {
                        topic: topic.clone(),
                        partitions,
                    }
                })
                .collect();
            all.sort_unstable_by(|a, b| a.topic.cmp(&b.topic));
            all
        }
    };
    OffsetFetchResponse {
        error_code: NONE,
        topics,
    }
}

fn fetched(partition: i32, committed: Option<&CommittedOffset>) -> FetchedPartition {
    match committed {
        Some(c) => FetchedPartition {
            partition,
            offset: c.offset,
            metadata: c.metadata.clone(),
            error_code: NONE,
        },
        None => FetchedPartition {
            partition,
            offset: -1,
            metadata: None,
            error_code: NONE,
        },
    }
}
