//! Engine tests: the group state machine driven by hand, with time as a plain number (no runtime,
//! no sleeping). Each test pins one rule of protocol §5; the cases follow Kafka's
//! `GroupCoordinatorTest` where Kafka has the rule. The property test at the bottom drives random
//! operation sequences and checks the engine's invariants after every step.
//!
//! The [`Harness`] owns a `Group<u32>` (reply tokens are request numbers), a topic catalog, the
//! clock and the uuid counter, and collects every reply the engine hands back, failing the test
//! at once if a token is ever answered twice.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use muster_protocol::{
    AssignorMetadata, DescribedGroup, DescribedMember, ErrorCode, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, LeavingMember,
    MemberAssignment, OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse,
    OffsetCommitTopic, OffsetFetchRequest, Request, Response, SyncGroupRequest, SyncGroupResponse,
    TopicInfo, TopicPartitions,
};
use proptest::prelude::*;
use uuid::Uuid;

use super::*;
use crate::config::GroupConfig;
use crate::storage::OffsetWrite;

const SESSION: u32 = 10_000;
const REBALANCE: u32 = 30_000;
const GROUP: &str = "g";

fn config() -> GroupConfig {
    GroupConfig {
        min_session_timeout_ms: 1_000,
        max_session_timeout_ms: 1_000_000,
        initial_rebalance_delay_ms: 0,
        max_group_size: 0,
        new_member_join_timeout_ms: 300_000,
        max_offset_metadata_bytes: 4_096,
        // Retention is tested on its own (`retention_config`); elsewhere groups live on.
        offsets_retention_ms: 1_000_000_000_000,
        empty_group_removal_ms: 1_000_000_000_000,
    }
}

fn with_delay(delay_ms: u32) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: delay_ms,
        ..config()
    }
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| (*s).to_owned()).collect()
}

/// Assignors by preference; each carries user data naming it, so tests can see whose data a
/// member list carries.
fn assignors(names: &[&str]) -> Vec<AssignorMetadata> {
    names
        .iter()
        .map(|n| AssignorMetadata {
            name: (*n).to_owned(),
            user_data: format!("ud-{n}").into_bytes(),
        })
        .collect()
}

fn tp(topic: &str, partitions: &[i32]) -> TopicPartitions {
    TopicPartitions {
        topic: topic.to_owned(),
        partitions: partitions.to_vec(),
    }
}

fn assign(member_id: &str, partitions: Vec<TopicPartitions>) -> MemberAssignment {
    MemberAssignment {
        member_id: member_id.to_owned(),
        partitions,
        user_data: member_id.as_bytes().to_vec(),
    }
}

fn commit_topic(topic: &str, partitions: &[(i32, i64, Option<String>)]) -> OffsetCommitTopic {
    OffsetCommitTopic {
        topic: topic.to_owned(),
        partitions: partitions
            .iter()
            .map(|(p, o, m)| OffsetCommitPartition {
                partition: *p,
                offset: *o,
                metadata: m.clone(),
            })
            .collect(),
    }
}

fn code(c: ErrorCode) -> i16 {
    c.code()
}

// ------------------------------------------------------------------------------------ harness

struct Harness {
    group: Group<u32>,
    config: Arc<GroupConfig>,
    catalog: HashMap<String, i32>,
    now: Millis,
    uuids: u128,
    tokens: u32,
    out: Output<u32>,
    /// Replies not yet looked at.
    replies: Vec<(u32, Response)>,
    answered: HashSet<u32>,
    events: Vec<Event>,
    persisted: bool,
    client: ClientInfo,
    /// JoinGroup requests by token, to learn each member's request once it is answered.
    sent_joins: HashMap<u32, JoinGroupRequest>,
    /// The last JoinGroup each member id was answered for (for `rejoin`).
    last_join: HashMap<String, JoinGroupRequest>,
    /// The timer an actor would have armed from [`Group::take_new_deadline`].
    armed: Option<Millis>,
    /// Offsets the engine said expired.
    expired: Vec<(String, i32)>,
}

impl Harness {
    fn new() -> Self {
        Self::with_config(config())
    }

    fn with_config(config: GroupConfig) -> Self {
        let config = Arc::new(config);
        let mut catalog = HashMap::new();
        catalog.insert("t1".to_owned(), 6);
        catalog.insert("t2".to_owned(), 2);
        Harness {
            group: Group::new(GROUP.to_owned(), Arc::clone(&config), 0),
            config,
            catalog,
            now: 0,
            uuids: 0,
            tokens: 0,
            out: Output::default(),
            replies: Vec::new(),
            answered: HashSet::new(),
            events: Vec::new(),
            persisted: false,
            client: ClientInfo {
                client_id: "client".into(),
                client_host: "/10.0.0.1".into(),
            },
            sent_joins: HashMap::new(),
            last_join: HashMap::new(),
            armed: None,
            expired: Vec::new(),
        }
    }

    /// Keeps the timer an actor would arm: the earliest new deadline since the last tick.
    fn arm_timer(&mut self) {
        if let Some(d) = self.group.take_new_deadline() {
            self.armed = Some(self.armed.map_or(d, |a| a.min(d)));
        }
    }

    /// Moves what the last engine call produced into the harness, checking that no token is
    /// answered twice.
    fn collect(&mut self) {
        for (token, response) in self.out.replies.drain(..) {
            assert!(
                self.answered.insert(token),
                "token {token} answered twice (second: {response:?})"
            );
            if let (Some(req), Response::JoinGroup(r)) = (self.sent_joins.remove(&token), &response)
            {
                let learned = r.error_code == code(ErrorCode::None)
                    || r.error_code == code(ErrorCode::MemberIdRequired);
                if learned {
                    let mut req = req;
                    req.member_id = r.member_id.clone();
                    self.last_join.insert(r.member_id.clone(), req);
                }
            }
            self.replies.push((token, response));
        }
        self.persisted |= self.out.persist;
        self.events.append(&mut self.out.events);
        self.expired.append(&mut self.out.expired_offsets);
        self.out.clear();
        self.arm_timer();
    }

    fn next_token(&mut self) -> u32 {
        self.tokens += 1;
        self.tokens
    }

    fn next_uuid(&mut self) -> Uuid {
        self.uuids += 1;
        Uuid::from_u128(self.uuids)
    }

    fn join_req(
        member_id: &str,
        instance: Option<&str>,
        topics: &[&str],
        assignor_names: &[&str],
    ) -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: GROUP.to_owned(),
            member_id: member_id.to_owned(),
            group_instance_id: instance.map(str::to_owned),
            session_timeout_ms: SESSION,
            rebalance_timeout_ms: REBALANCE,
            topics: strings(topics),
            assignors: assignors(assignor_names),
            owned_partitions: Vec::new(),
            reason: None,
        }
    }

    fn send_join(&mut self, req: JoinGroupRequest) -> u32 {
        let token = self.next_token();
        let fresh = self.next_uuid();
        self.sent_joins.insert(token, req.clone());
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        self.group
            .join(cx, req, &self.client, fresh, token, &mut self.out);
        self.collect();
        token
    }

    fn join(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        topics: &[&str],
        assignor_names: &[&str],
    ) -> u32 {
        self.send_join(Self::join_req(member_id, instance, topics, assignor_names))
    }

    /// Sends the same JoinGroup the member was last answered for.
    fn rejoin(&mut self, member_id: &str) -> u32 {
        let req = self
            .last_join
            .get(member_id)
            .unwrap_or_else(|| panic!("no earlier join of {member_id}"))
            .clone();
        self.send_join(req)
    }

    /// Rejoins with the earlier request changed by `f`.
    fn rejoin_with(&mut self, member_id: &str, f: impl FnOnce(&mut JoinGroupRequest)) -> u32 {
        let mut req = self.last_join[member_id].clone();
        f(&mut req);
        self.send_join(req)
    }

    /// A fresh member id handed out with MEMBER_ID_REQUIRED (pending until it rejoins).
    fn member_id_required(&mut self) -> String {
        let t = self.join("", None, &["t1"], &["range"]);
        let r = self.join_reply(t);
        assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired), "{r:?}");
        r.member_id
    }

    fn send_sync(&mut self, req: SyncGroupRequest) -> u32 {
        let token = self.next_token();
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        self.group.sync(cx, req, token, &mut self.out);
        self.collect();
        token
    }

    fn sync(
        &mut self,
        member_id: &str,
        generation: i32,
        assignments: Vec<MemberAssignment>,
    ) -> u32 {
        self.send_sync(SyncGroupRequest {
            group_id: GROUP.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            group_instance_id: None,
            assignor: None,
            assignments,
        })
    }

    fn heartbeat_req(&mut self, req: &HeartbeatRequest) -> ErrorCode {
        self.group.heartbeat(self.now, req)
    }

    fn heartbeat(&mut self, member_id: &str, generation: i32) -> ErrorCode {
        self.heartbeat_req(&HeartbeatRequest {
            group_id: GROUP.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            group_instance_id: None,
        })
    }

    fn heartbeat_static(&mut self, member_id: &str, instance: &str, generation: i32) -> ErrorCode {
        self.heartbeat_req(&HeartbeatRequest {
            group_id: GROUP.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            group_instance_id: Some(instance.to_owned()),
        })
    }

    fn leave(&mut self, members: &[(&str, Option<&str>)]) -> LeaveGroupResponse {
        let req = LeaveGroupRequest {
            group_id: GROUP.to_owned(),
            members: members
                .iter()
                .map(|(m, i)| LeavingMember {
                    member_id: (*m).to_owned(),
                    group_instance_id: i.map(str::to_owned),
                    reason: None,
                })
                .collect(),
        };
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        let response = self.group.leave(cx, req, &mut self.out);
        self.collect();
        response
    }

    fn commit(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        topics: Vec<OffsetCommitTopic>,
    ) -> (OffsetCommitResponse, Vec<OffsetWrite>) {
        self.group.commit_offsets(
            self.now,
            OffsetCommitRequest {
                group_id: GROUP.to_owned(),
                generation_id: generation,
                member_id: member_id.to_owned(),
                group_instance_id: instance.map(str::to_owned),
                topics,
            },
        )
    }

    fn tick_to(&mut self, t: Millis) {
        assert!(t >= self.now, "time runs forward ({t} < {})", self.now);
        self.now = t;
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        // The tick consumes the armed timer and reports the full next deadline.
        self.armed = None;
        self.group.tick(cx, &mut self.out);
        self.collect();
    }

    fn advance(&mut self, ms: Millis) {
        self.tick_to(self.now + ms);
    }

    fn topics_changed(&mut self, topics: &[&str]) {
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        self.group
            .topics_changed(cx, &strings(topics), &mut self.out);
        self.collect();
    }

    fn take_replies(&mut self) -> Vec<(u32, Response)> {
        std::mem::take(&mut self.replies)
    }

    fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn take_persist(&mut self) -> bool {
        std::mem::take(&mut self.persisted)
    }

    /// The reply to `token`, if it has been answered (and not looked at before).
    fn reply_for(&mut self, token: u32) -> Option<Response> {
        let at = self.replies.iter().position(|(t, _)| *t == token)?;
        Some(self.replies.remove(at).1)
    }

    fn join_reply(&mut self, token: u32) -> JoinGroupResponse {
        match self.reply_for(token) {
            Some(Response::JoinGroup(r)) => r,
            other => panic!("expected a JoinGroup answer to {token}, got {other:?}"),
        }
    }

    fn sync_reply(&mut self, token: u32) -> SyncGroupResponse {
        match self.reply_for(token) {
            Some(Response::SyncGroup(r)) => r,
            other => panic!("expected a SyncGroup answer to {token}, got {other:?}"),
        }
    }

    fn is_answered(&self, token: u32) -> bool {
        self.answered.contains(&token)
    }

    fn describe(&self) -> DescribedGroup {
        self.group.describe(self.now)
    }

    fn described(&self, member_id: &str) -> DescribedMember {
        self.describe()
            .members
            .into_iter()
            .find(|m| m.member_id == member_id)
            .unwrap_or_else(|| panic!("{member_id} is not a member"))
    }

    fn state(&self) -> GroupState {
        self.group.state()
    }

    fn generation(&self) -> i32 {
        self.group.generation()
    }

    fn leader(&self) -> String {
        self.group
            .leader()
            .expect("the group has a leader")
            .to_owned()
    }

    /// Drives a rebalance in progress to CompletingRebalance the way clients would: members the
    /// barrier waits for rejoin with their last request; otherwise time moves to the next
    /// deadline. Returns the JoinGroup answers of the completed generation, by member id.
    fn complete_rebalance(&mut self) -> HashMap<String, JoinGroupResponse> {
        let mut tokens: HashMap<String, u32> = HashMap::new();
        for _ in 0..50 {
            if self.state() != GroupState::PreparingRebalance {
                break;
            }
            let holding: Vec<String> = self
                .describe()
                .members
                .into_iter()
                .filter(|m| m.holding_rebalance)
                .map(|m| m.member_id)
                .collect();
            if holding.is_empty() {
                let deadline = self
                    .group
                    .next_deadline()
                    .expect("a barrier has a deadline");
                self.tick_to(deadline.max(self.now));
            } else {
                for id in holding {
                    let t = self.rejoin(&id);
                    tokens.insert(id, t);
                }
            }
        }
        assert_eq!(self.state(), GroupState::CompletingRebalance);
        let generation = self.generation();
        let mut answers = HashMap::new();
        let replies = self.take_replies();
        for (_, response) in replies {
            if let Response::JoinGroup(r) = response {
                if r.error_code == code(ErrorCode::None) && r.generation_id == generation {
                    answers.insert(r.member_id.clone(), r);
                }
            }
        }
        answers
    }

    /// The leader syncs first, giving member `i` (in member-id order) partition `i` of `t1`;
    /// then every follower syncs. Returns every SyncGroup answer by member id.
    fn sync_all(&mut self) -> HashMap<String, SyncGroupResponse> {
        let generation = self.generation();
        let leader = self.leader();
        let ids: Vec<String> = self
            .describe()
            .members
            .into_iter()
            .map(|m| m.member_id)
            .collect();
        let assignments: Vec<MemberAssignment> = ids
            .iter()
            .zip(0..)
            .map(|(id, i)| assign(id, vec![tp("t1", &[i])]))
            .collect();
        let mut tokens = vec![(leader.clone(), self.sync(&leader, generation, assignments))];
        for id in ids.iter().filter(|id| **id != leader) {
            tokens.push((id.clone(), self.sync(id, generation, Vec::new())));
        }
        tokens
            .into_iter()
            .map(|(id, t)| (id, self.sync_reply(t)))
            .collect()
    }

    /// A Stable group of `n` dynamic members (each got MEMBER_ID_REQUIRED, then joined), with
    /// every member synced. Returns the member ids in the order they were handed out.
    fn form_group(&mut self, n: usize) -> Vec<String> {
        self.form_group_with(n, |_, _| {})
    }

    /// [`Harness::form_group`], with member `i`'s JoinGroup changed by `f(i, ..)`.
    fn form_group_with(
        &mut self,
        n: usize,
        f: impl Fn(usize, &mut JoinGroupRequest),
    ) -> Vec<String> {
        let ids: Vec<String> = (0..n).map(|_| self.member_id_required()).collect();
        for (i, id) in ids.iter().enumerate() {
            let mut req = self.last_join[id].clone();
            f(i, &mut req);
            self.send_join(req);
        }
        self.complete_rebalance();
        let synced = self.sync_all();
        assert!(synced.values().all(|r| r.error_code == 0), "{synced:?}");
        assert_eq!(self.state(), GroupState::Stable);
        assert_eq!(self.group.member_count(), n);
        self.take_replies();
        self.take_events();
        self.take_persist();
        ids
    }

    /// Ticks deadlines until the barrier closes (no rejoins).
    fn complete_rebalance_by_ticking(&mut self) {
        for _ in 0..50 {
            if self.state() != GroupState::PreparingRebalance {
                return;
            }
            let d = self
                .group
                .next_deadline()
                .expect("a barrier has a deadline");
            self.tick_to(d.max(self.now));
        }
        panic!("the barrier never closed");
    }

    /// Simulates a restart at the current time: the group is rebuilt from its record and
    /// offsets. Held requests die with the old process.
    fn restart(&mut self, offsets: Vec<OffsetWrite>) {
        let record = self.group.to_record();
        self.group = Group::restore(record, offsets, Arc::clone(&self.config), self.now);
        self.replies.clear();
        self.armed = None;
        self.arm_timer();
    }

    /// A static member's first join (new instance ids join without MEMBER_ID_REQUIRED).
    fn join_static(&mut self, instance: &str) -> u32 {
        self.join("", Some(instance), &["t1"], &["range"])
    }

    fn followers(&self, ids: &[String]) -> Vec<String> {
        let leader = self.leader();
        ids.iter().filter(|id| **id != leader).cloned().collect()
    }
}

// -------------------------------------------------------------------------- JoinGroup checks

#[test]
fn join_refuses_session_timeout_outside_bounds() {
    let mut h = Harness::new();
    for timeout in [999, 1_000_001] {
        let t = h.send_join(JoinGroupRequest {
            session_timeout_ms: timeout,
            ..Harness::join_req("", None, &["t1"], &["range"])
        });
        let r = h.join_reply(t);
        assert_eq!(r.error_code, code(ErrorCode::InvalidSessionTimeout));
        assert_eq!(r.member_id, "");
    }
    // The bounds themselves are fine.
    for timeout in [1_000, 1_000_000] {
        let t = h.send_join(JoinGroupRequest {
            session_timeout_ms: timeout,
            ..Harness::join_req("", None, &["t1"], &["range"])
        });
        assert_eq!(
            h.join_reply(t).error_code,
            code(ErrorCode::MemberIdRequired)
        );
    }
    // Checked before the member id: an unknown id with a bad timeout hears about the timeout.
    let t = h.send_join(JoinGroupRequest {
        session_timeout_ms: 1,
        ..Harness::join_req("ghost", None, &["t1"], &["range"])
    });
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::InvalidSessionTimeout));
    assert_eq!(r.member_id, "ghost");
    assert_eq!(h.state(), GroupState::Empty);
}

#[test]
fn join_full_group_refused_before_assignor_check() {
    let mut h = Harness::with_config(GroupConfig {
        max_group_size: 2,
        ..config()
    });
    h.form_group(2);
    // Incompatible assignors, but the group is full: that is said first, and no id is given.
    let t = h.join("", None, &["t1"], &["sticky"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::GroupMaxSizeReached));
    assert_eq!(r.member_id, "");
    let t = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
    // A new static member is refused the same way.
    let t = h.join_static("s1");
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.group.member_count(), 2);
}

#[test]
fn join_without_common_assignor_is_inconsistent() {
    let mut h = Harness::new();
    // Empty assignors, even on an Empty group.
    let t = h.join("", None, &["t1"], &[]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
    assert_eq!(r.member_id, "", "refused before a member id is handed out");

    h.form_group(1);
    let t = h.join("", None, &["t1"], &["roundrobin"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
    assert_eq!(r.member_id, "");
    let t = h.join("", None, &["t1"], &[]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::InconsistentGroupProtocol)
    );
    // One assignor in common is enough.
    let t = h.join("", None, &["t1"], &["roundrobin", "range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::MemberIdRequired)
    );
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn join_with_empty_member_id_gets_member_id_required() {
    let mut h = Harness::new();
    let t = h.join("", None, &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
    assert_eq!(r.member_id, format!("client-{}", Uuid::from_u128(1)));
    assert_eq!(r.generation_id, -1);
    // Nothing else happened: the group is still Empty at generation 0.
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(h.generation(), 0);
    assert_eq!(h.group.member_count(), 0);
}

#[test]
fn join_with_unknown_member_id_is_refused() {
    let mut h = Harness::new();
    let t = h.join("ghost", None, &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    assert_eq!(r.member_id, "ghost");
    assert_eq!(h.state(), GroupState::Empty);

    h.form_group(1);
    let t = h.join("ghost", None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, code(ErrorCode::UnknownMemberId));
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn pending_id_with_bad_assignors_keeps_its_id() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let newcomer = h.member_id_required();

    let t = h.join(&newcomer, None, &["t1"], &["roundrobin"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::InconsistentGroupProtocol));
    assert_eq!(r.member_id, newcomer);
    assert_eq!(
        h.state(),
        GroupState::Stable,
        "a refusal starts no rebalance"
    );

    // Its id is still good: a compatible rejoin gets in.
    let t = h.join(&newcomer, None, &["t1"], &["range"]);
    assert!(!h.is_answered(t), "held at the barrier");
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.rejoin(&ids[0]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_id, newcomer);
    assert_eq!(h.group.member_count(), 2);
}

// ------------------------------------------------------------------------------- pending ids

#[test]
fn pending_id_expires_after_session_timeout() {
    let mut h = Harness::new();
    let id = h.member_id_required();
    assert_eq!(h.group.next_deadline(), Some(Millis::from(SESSION)));
    h.tick_to(Millis::from(SESSION) - 1);
    let early = h.member_id_required();
    h.tick_to(Millis::from(SESSION));
    let t = h.join(&id, None, &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    assert_eq!(h.state(), GroupState::Empty);
    // The id handed out later is still pending and may join.
    let t = h.join(&early, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, 0);
}

#[test]
fn pending_id_holds_ordinary_barrier_until_it_rejoins() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let pending = h.member_id_required();
    // The leader rejoining starts a rebalance; it would complete at once but for the pending id.
    let t = h.rejoin(&ids[0]);
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let t2 = h.join(&pending, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, 0);
    assert_eq!(h.join_reply(t2).error_code, 0);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    assert_eq!(h.group.member_count(), 2);
}

#[test]
fn pending_id_holds_ordinary_barrier_until_it_expires() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    h.advance(1_000);
    let _pending = h.member_id_required();
    let expires = h.now + Millis::from(SESSION);
    let t = h.rejoin(&ids[0]);
    h.tick_to(expires - 1);
    assert!(!h.is_answered(t));
    h.tick_to(expires);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.members.len(), 1);
    assert!(
        expires < Millis::from(REBALANCE),
        "completed before the rebalance timeout"
    );
}

#[test]
fn pending_id_holds_ordinary_barrier_until_it_leaves() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let pending = h.member_id_required();
    let t = h.rejoin(&ids[0]);
    assert!(!h.is_answered(t));
    let left = h.leave(&[(&pending, None)]);
    assert_eq!(left.members[0].error_code, 0);
    assert_eq!(h.join_reply(t).error_code, 0);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

// -------------------------------------------------------------------- initial rebalance delay

#[test]
fn initial_delay_waits_even_when_everyone_joined() {
    let mut h = Harness::with_config(with_delay(3_000));
    let id = h.member_id_required();
    let t = h.join(&id, None, &["t1"], &["range"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(h.group.next_deadline(), Some(3_000));
    h.tick_to(2_999);
    assert!(!h.is_answered(t), "a plain timer: no early completion");
    h.tick_to(3_000);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader_id, id);
}

#[test]
fn initial_delay_extended_when_a_member_arrives_in_the_window() {
    let mut h = Harness::with_config(with_delay(3_000));
    let a = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range"]);
    h.tick_to(1_000);
    let b = h.member_id_required();
    h.tick_to(1_500);
    let tb = h.join(&b, None, &["t1"], &["range"]);
    h.tick_to(3_000);
    assert!(!h.is_answered(ta), "extended by another delay");
    assert_eq!(h.group.next_deadline(), Some(6_000));
    h.tick_to(5_999);
    assert!(!h.is_answered(ta));
    h.tick_to(6_000);
    let ra = h.join_reply(ta);
    let rb = h.join_reply(tb);
    assert_eq!((ra.error_code, rb.error_code), (0, 0));
    assert_eq!(ra.generation_id, 1);
    assert_eq!(ra.members.len() + rb.members.len(), 2);
}

#[test]
fn initial_delay_extended_by_member_id_required_but_completes_without_pending_ids() {
    let mut h = Harness::with_config(with_delay(3_000));
    let a = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range"]);
    h.tick_to(2_000);
    let b = h.member_id_required(); // never rejoins within the window
    h.tick_to(3_000);
    assert!(
        !h.is_answered(ta),
        "a MEMBER_ID_REQUIRED in the window extends it"
    );
    h.tick_to(6_000);
    let r = h.join_reply(ta);
    assert_eq!(
        r.error_code, 0,
        "the timer fired: no waiting for the pending id"
    );
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.members.len(), 1);
    // The pending id joins the next generation.
    let tb = h.join(&b, None, &["t1"], &["range"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.rejoin(&a);
    let rb = h.join_reply(tb);
    assert_eq!(rb.error_code, 0);
    assert_eq!(rb.generation_id, 2);
}

#[test]
fn initial_delay_not_extended_by_a_member_joining_again() {
    let mut h = Harness::with_config(with_delay(3_000));
    let a = h.member_id_required();
    let first = h.join(&a, None, &["t1"], &["range"]);
    h.tick_to(1_000);
    // The same member sends JoinGroup again: the held one is superseded, the window stays.
    let second = h.rejoin(&a);
    assert_eq!(
        h.join_reply(first).error_code,
        code(ErrorCode::RebalanceInProgress)
    );
    h.tick_to(3_000);
    let r = h.join_reply(second);
    assert_eq!((r.error_code, r.generation_id), (0, 1));
}

#[test]
fn initial_delay_never_runs_past_the_rebalance_timeout() {
    let mut h = Harness::with_config(with_delay(3_000));
    let a = h.member_id_required();
    let ta = h.send_join(JoinGroupRequest {
        rebalance_timeout_ms: 5_000,
        ..Harness::join_req(&a, None, &["t1"], &["range"])
    });
    // Newcomers keep arriving all the time.
    for t in [1_000, 2_000, 3_000, 3_500, 4_500] {
        h.tick_to(t);
        if t != 3_000 {
            h.member_id_required();
        }
    }
    h.tick_to(4_999);
    assert!(!h.is_answered(ta));
    h.tick_to(5_000);
    assert_eq!(h.join_reply(ta).error_code, 0);
}

#[test]
fn zero_initial_delay_completes_the_first_join_at_once() {
    let mut h = Harness::new();
    let a = h.member_id_required();
    let t = h.join(&a, None, &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, 1);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

// ---------------------------------------------------------------------------------- barrier

#[test]
fn barrier_completes_early_when_every_member_rejoined() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let generation = h.generation();
    let leader = h.leader();
    let followers = h.followers(&ids);
    let tl = h.rejoin(&leader);
    let t1 = h.rejoin(&followers[0]);
    assert!(!h.is_answered(tl) && !h.is_answered(t1));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let t2 = h.rejoin(&followers[1]);
    for t in [tl, t1, t2] {
        let r = h.join_reply(t);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.generation_id, generation + 1);
    }
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

#[test]
fn barrier_timeout_is_the_max_over_members_and_removes_dynamic_laggards() {
    let mut h = Harness::new();
    // The third member asks for a longer rebalance timeout than the others.
    let ids = h.form_group_with(3, |i, r| {
        if i == 2 {
            r.rebalance_timeout_ms = 40_000;
        }
    });
    let generation = h.generation();
    let leader = h.leader();
    assert_eq!(leader, ids[0], "the first member formed the group");
    let start = h.now;
    let tl = h.rejoin(&leader);
    let tb = h.rejoin(&ids[2]);
    // The laggard keeps its session alive but never rejoins.
    let laggard = ids[1].clone();
    while h.now < start + 39_000 {
        h.advance(3_000);
        assert_eq!(
            h.heartbeat(&laggard, generation),
            ErrorCode::RebalanceInProgress
        );
    }
    h.tick_to(start + 39_999);
    assert!(
        !h.is_answered(tl),
        "the barrier waits for the longest rebalance timeout"
    );
    h.tick_to(start + 40_000);
    let rl = h.join_reply(tl);
    let rb = h.join_reply(tb);
    assert_eq!((rl.error_code, rb.error_code), (0, 0));
    assert_eq!(rl.generation_id, generation + 1);
    assert_eq!(rl.members.len(), 2);
    assert!(!h.group.has_member(&laggard));
    assert!(h.take_events().contains(&Event::EvictedAtBarrier {
        member_ids: vec![laggard.clone()]
    }));
    assert_eq!(
        h.heartbeat(&laggard, generation),
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn static_member_missing_the_barrier_is_not_removed() {
    let mut h = Harness::new();
    let a = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(ta).generation_id, 1);
    let ts = h.join_static("s1");
    h.rejoin(&a);
    let s = h.join_reply(ts).member_id;
    h.sync_all();
    h.take_replies();
    assert_eq!(h.state(), GroupState::Stable);
    let generation = h.generation();

    let start = h.now;
    let ta = h.rejoin_with(&a, |r| r.topics = strings(&["t1", "t2"]));
    while h.now < start + Millis::from(REBALANCE) - 3_000 {
        h.advance(3_000);
        h.heartbeat_static(&s, "s1", generation);
    }
    h.tick_to(start + Millis::from(REBALANCE));
    let r = h.join_reply(ta);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, generation + 1);
    assert!(
        h.group.has_member(&s),
        "static members stay past a missed barrier"
    );
    assert_eq!(r.members.len(), 2, "and are in the leader's member list");
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // Only their session removes them.
    let last_heard = h.now - h.described(&s).last_seen_ms_ago;
    h.tick_to(last_heard + Millis::from(SESSION));
    assert!(!h.group.has_member(&s));
}

// ------------------------------------------------------------------------------- generations

#[test]
fn generation_moves_up_and_is_never_reset() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    assert!(generation >= 1);
    h.leave(&[(&ids[0], None)]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.leave(&[(&ids[1], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(
        h.generation(),
        generation + 1,
        "an empty rebalance still counts"
    );
    assert_eq!(h.group.leader(), None);

    let c = h.member_id_required();
    let t = h.join(&c, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).generation_id, generation + 2);
}

// ------------------------------------------------------------------------ assignor and leader

#[test]
fn assignor_vote_member_list_and_topics() {
    let mut h = Harness::with_config(with_delay(1_000));
    let a = h.member_id_required();
    let b = h.member_id_required();
    let c = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range", "roundrobin"]);
    let tb = h.join(&b, None, &["t2", "missing"], &["roundrobin", "range"]);
    let tc = h.join(&c, None, &["t1"], &["sticky", "roundrobin", "range"]);
    h.complete_rebalance_by_ticking();
    let answers: Vec<JoinGroupResponse> =
        [ta, tb, tc].into_iter().map(|t| h.join_reply(t)).collect();
    let leader = h.leader();
    assert_eq!(leader, a, "the first member is the leader");
    for r in &answers {
        assert_eq!(r.error_code, 0);
        // a votes range; b and c vote roundrobin (sticky is not supported by all).
        assert_eq!(r.assignor.as_deref(), Some("roundrobin"));
        assert_eq!(r.leader_id, leader);
    }
    let lr = &answers[0];
    let members: Vec<(String, Vec<u8>, Vec<String>)> = lr
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.user_data.clone(), m.topics.clone()))
        .collect();
    let mut expected = vec![
        (a.clone(), b"ud-roundrobin".to_vec(), strings(&["t1"])),
        (
            b.clone(),
            b"ud-roundrobin".to_vec(),
            strings(&["t2", "missing"]),
        ),
        (c.clone(), b"ud-roundrobin".to_vec(), strings(&["t1"])),
    ];
    expected.sort();
    let mut members = members;
    members.sort();
    assert_eq!(members, expected);
    assert_eq!(
        lr.topics,
        vec![
            TopicInfo {
                topic: "t1".into(),
                partitions: 6
            },
            TopicInfo {
                topic: "t2".into(),
                partitions: 2
            },
        ],
        "catalog entries of subscribed topics that exist"
    );
    for r in &answers[1..] {
        assert!(r.members.is_empty() && r.topics.is_empty());
        assert!(!r.skip_assignment);
    }
    assert_eq!(h.group.assignor(), Some("roundrobin"));
}

#[test]
fn assignor_vote_user_data_differs_per_member() {
    // The member list carries each member's own user data for the chosen assignor.
    let mut h = Harness::new();
    let a = h.member_id_required();
    let mut req = Harness::join_req(&a, None, &["t1"], &[]);
    req.assignors = vec![
        AssignorMetadata {
            name: "range".into(),
            user_data: vec![1],
        },
        AssignorMetadata {
            name: "roundrobin".into(),
            user_data: vec![2],
        },
    ];
    let t = h.send_join(req);
    let r = h.join_reply(t);
    assert_eq!(r.assignor.as_deref(), Some("range"));
    assert_eq!(r.members[0].user_data, vec![1]);
}

#[test]
fn leader_is_kept_when_it_rejoins() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let leader = h.leader();
    // Rejoin the followers first, the leader last.
    let followers = h.followers(&ids);
    h.rejoin_with(&followers[0], |r| r.topics = strings(&["t2"]));
    h.rejoin(&followers[1]);
    let t = h.rejoin(&leader);
    let r = h.join_reply(t);
    assert_eq!(r.leader_id, leader);
    assert_eq!(r.members.len(), 3);
}

#[test]
fn leader_is_replaced_when_it_does_not_rejoin() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let generation = h.generation();
    let leader = h.leader();
    let followers = h.followers(&ids);
    let start = h.now;
    let t0 = h.rejoin_with(&followers[0], |r| r.topics = strings(&["t2"]));
    let t1 = h.rejoin(&followers[1]);
    while h.now + 3_000 < start + Millis::from(REBALANCE) {
        h.advance(3_000);
        h.heartbeat(&leader, generation);
    }
    h.tick_to(start + Millis::from(REBALANCE));
    let r0 = h.join_reply(t0);
    let r1 = h.join_reply(t1);
    assert!(!h.group.has_member(&leader));
    assert!(followers.contains(&r0.leader_id));
    assert_eq!(r0.leader_id, r1.leader_id);
    let new_leader_answer = if r0.leader_id == r0.member_id {
        &r0
    } else {
        &r1
    };
    assert_eq!(new_leader_answer.members.len(), 2);
}

// ------------------------------------------------------------------- rejoining a formed group

#[test]
fn unchanged_follower_rejoin_in_stable_gets_the_current_generation() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let follower = h.followers(&ids)[0].clone();
    let t = h.rejoin(&follower);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, generation);
    assert_eq!(r.leader_id, h.leader());
    assert!(r.members.is_empty());
    assert_eq!(h.state(), GroupState::Stable);
    // Its SyncGroup gets the assignment it had.
    let t = h.sync(&follower, generation, Vec::new());
    let s = h.sync_reply(t);
    assert_eq!(s.error_code, 0);
    assert_eq!(s.partitions.len(), 1);
}

#[test]
fn leader_rejoin_in_stable_triggers_a_rebalance() {
    let mut h = Harness::new();
    h.form_group(2);
    let leader = h.leader();
    let t = h.rejoin(&leader);
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        Event::RebalanceStarted {
            trigger: RebalanceTrigger::MetadataChange,
            ..
        }
    )));
}

#[test]
fn changed_topics_trigger_a_rebalance() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let follower = h.followers(&ids)[0].clone();
    let t = h.rejoin_with(&follower, |r| r.topics = strings(&["t1", "t2"]));
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let answers = h.complete_rebalance();
    assert_eq!(answers[&follower].generation_id, h.generation());
    let leader = h.leader();
    let subscribed: Vec<String> = answers[&leader]
        .members
        .iter()
        .find(|m| m.member_id == follower)
        .expect("listed")
        .topics
        .clone();
    assert_eq!(subscribed, strings(&["t1", "t2"]));
}

#[test]
fn changed_assignors_trigger_a_rebalance() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let follower = h.followers(&ids)[0].clone();
    h.rejoin_with(&follower, |r| {
        r.assignors = assignors(&["roundrobin", "range"])
    });
    assert_eq!(h.state(), GroupState::PreparingRebalance);
}

#[test]
fn unchanged_member_in_completing_rebalance_gets_the_current_generation() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let leader = h.leader();
    let follower = h.followers(&ids)[0].clone();
    h.rejoin(&leader);
    h.rejoin(&follower);
    h.take_replies();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let generation = h.generation();

    let t = h.rejoin(&follower);
    let r = h.join_reply(t);
    assert_eq!((r.error_code, r.generation_id), (0, generation));
    assert!(r.members.is_empty());
    // The leader too, and it gets the member list again.
    let t = h.rejoin(&leader);
    let r = h.join_reply(t);
    assert_eq!((r.error_code, r.generation_id), (0, generation));
    assert_eq!(r.members.len(), 2);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // A changed member starts a new rebalance.
    h.rejoin_with(&follower, |r| r.topics = strings(&["t2"]));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
}

// -------------------------------------------------------------------------------- SyncGroup

#[test]
fn sync_refusals() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let t = h.sync("ghost", generation, Vec::new());
    assert_eq!(h.sync_reply(t).error_code, code(ErrorCode::UnknownMemberId));
    let t = h.sync(&ids[0], generation + 1, Vec::new());
    assert_eq!(
        h.sync_reply(t).error_code,
        code(ErrorCode::IllegalGeneration)
    );
    let t = h.sync(&ids[0], generation - 1, Vec::new());
    assert_eq!(
        h.sync_reply(t).error_code,
        code(ErrorCode::IllegalGeneration)
    );
    // Unknown member is said before a wrong generation.
    let t = h.sync("ghost", generation + 7, Vec::new());
    assert_eq!(h.sync_reply(t).error_code, code(ErrorCode::UnknownMemberId));

    let leader = h.leader();
    h.rejoin(&leader);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let t = h.sync(&ids[1], generation, Vec::new());
    assert_eq!(
        h.sync_reply(t).error_code,
        code(ErrorCode::RebalanceInProgress)
    );
}

#[test]
fn sync_holds_followers_until_the_leader_assigns() {
    let mut h = Harness::new();
    let ids: Vec<String> = (0..3).map(|_| h.member_id_required()).collect();
    for id in &ids {
        h.rejoin(id);
    }
    h.complete_rebalance();
    let generation = h.generation();
    let leader = h.leader();
    let followers = h.followers(&ids);
    h.take_persist();

    let tf = h.sync(&followers[0], generation, Vec::new());
    assert!(!h.is_answered(tf), "held until the leader's assignment");
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    assert!(!h.take_persist());

    // The leader leaves followers[1] out.
    let tl = h.sync(
        &leader,
        generation,
        vec![
            assign(&leader, vec![tp("t1", &[0, 1, 2])]),
            assign(&followers[0], vec![tp("t1", &[3, 4, 5])]),
            assign("not-a-member", vec![tp("t2", &[0])]),
        ],
    );
    assert_eq!(h.state(), GroupState::Stable);
    assert!(
        h.take_persist(),
        "the assignment must be durable before the answers"
    );
    let rl = h.sync_reply(tl);
    let rf = h.sync_reply(tf);
    assert_eq!(rl.error_code, 0);
    assert_eq!(rl.partitions, vec![tp("t1", &[0, 1, 2])]);
    assert_eq!(rl.assignor.as_deref(), Some("range"));
    assert_eq!(rf.partitions, vec![tp("t1", &[3, 4, 5])]);
    assert_eq!(rf.user_data, followers[0].as_bytes());

    // A follower syncing after Stable is answered at once.
    let t = h.sync(&followers[1], generation, Vec::new());
    let r = h.sync_reply(t);
    assert_eq!(r.error_code, 0);
    assert!(r.partitions.is_empty(), "left out: empty assignment");
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn sync_with_another_assignor_is_inconsistent() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let generation = h.generation();
    let t = h.send_sync(SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: ids[0].clone(),
        group_instance_id: None,
        assignor: Some("roundrobin".into()),
        assignments: Vec::new(),
    });
    assert_eq!(
        h.sync_reply(t).error_code,
        code(ErrorCode::InconsistentGroupProtocol)
    );
}

#[test]
fn leader_that_never_syncs_is_removed_and_the_group_rebalances() {
    let mut h = Harness::new();
    let ids: Vec<String> = (0..3).map(|_| h.member_id_required()).collect();
    for id in &ids {
        h.rejoin(id);
    }
    h.complete_rebalance();
    let generation = h.generation();
    let completed_at = h.now;
    let leader = h.leader();
    let followers = h.followers(&ids);
    let held: Vec<u32> = followers
        .iter()
        .map(|f| h.sync(f, generation, Vec::new()))
        .collect();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // Sessions are shorter than the rebalance timeout; held members do not expire meanwhile.
    // The leader is alive (it heartbeats) but never sends SyncGroup.
    while h.now + 3_000 < completed_at + Millis::from(REBALANCE) {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&leader, generation), ErrorCode::None);
    }
    h.tick_to(completed_at + Millis::from(REBALANCE) - 1);
    assert!(held.iter().all(|t| !h.is_answered(*t)));
    assert_eq!(h.group.member_count(), 3);
    h.tick_to(completed_at + Millis::from(REBALANCE));
    assert!(!h.group.has_member(&leader));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    for t in held {
        assert_eq!(
            h.sync_reply(t).error_code,
            code(ErrorCode::RebalanceInProgress)
        );
    }
    assert!(h.take_events().contains(&Event::EvictedAtSync {
        member_ids: vec![leader.clone()]
    }));
    // The followers were heard from while held: their sessions run from the answer.
    assert!(h.group.next_deadline().is_some_and(|d| d > h.now));
    h.tick_to(h.now);
    assert!(followers.iter().all(|f| h.group.has_member(f)));
    // They rejoin and form the next generation without the old leader.
    let answers = h.complete_rebalance();
    assert_eq!(answers.len(), 2);
    assert!(followers.contains(&h.leader()));
    assert_eq!(h.generation(), generation + 1);
}

#[test]
fn last_member_evicted_at_sync_empties_the_group_in_the_same_tick() {
    let mut h = Harness::new();
    let a = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(ta).generation_id, 1);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // A pending id that outlives the sync window.
    let tp = h.send_join(JoinGroupRequest {
        session_timeout_ms: 100_000,
        ..Harness::join_req("", None, &["t1"], &["range"])
    });
    let pending_expiry = h.now + 100_000;
    assert_eq!(
        h.join_reply(tp).error_code,
        code(ErrorCode::MemberIdRequired)
    );
    // The only member heartbeats but never syncs.
    while h.now + 3_000 < Millis::from(REBALANCE) {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&a, 1), ErrorCode::None);
    }
    h.tick_to(Millis::from(REBALANCE));
    assert!(!h.group.has_member(&a));
    // The rebalance that eviction started has no members (timeout 0): it closes in this tick.
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(h.generation(), 2);
    assert_eq!(h.group.next_deadline(), Some(pending_expiry));
}

#[test]
fn follower_that_never_syncs_is_removed_after_the_rebalance_timeout() {
    let mut h = Harness::new();
    let ids: Vec<String> = (0..2).map(|_| h.member_id_required()).collect();
    for id in &ids {
        h.rejoin(id);
    }
    h.complete_rebalance();
    let generation = h.generation();
    let leader = h.leader();
    let follower = h.followers(&ids)[0].clone();
    let start = h.now;
    h.sync(
        &leader,
        generation,
        vec![assign(&leader, vec![tp("t1", &[0])])],
    );
    assert_eq!(h.state(), GroupState::Stable);
    // The follower heartbeats but never syncs.
    while h.now + 3_000 < start + Millis::from(REBALANCE) {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&follower, generation), ErrorCode::None);
        assert_eq!(h.heartbeat(&leader, generation), ErrorCode::None);
    }
    h.tick_to(start + Millis::from(REBALANCE));
    assert!(!h.group.has_member(&follower));
    assert!(h.group.has_member(&leader));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
}

// -------------------------------------------------------------------------------- Heartbeat

#[test]
fn heartbeat_answers_by_state() {
    let mut h = Harness::new();
    assert_eq!(h.heartbeat("anyone", 0), ErrorCode::UnknownMemberId);
    let ids = h.form_group(2);
    let generation = h.generation();
    assert_eq!(h.heartbeat("ghost", generation), ErrorCode::UnknownMemberId);
    assert_eq!(h.heartbeat(&ids[0], generation), ErrorCode::None);
    assert_eq!(
        h.heartbeat(&ids[0], generation + 1),
        ErrorCode::IllegalGeneration
    );
    let leader = h.leader();
    h.rejoin(&leader);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(
        h.heartbeat(&ids[1], generation),
        ErrorCode::RebalanceInProgress
    );
    h.complete_rebalance();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    assert_eq!(h.heartbeat(&ids[1], generation + 1), ErrorCode::None);
    assert_eq!(
        h.heartbeat(&ids[1], generation),
        ErrorCode::IllegalGeneration
    );

    // Empty again: everyone is unknown.
    h.leave(&[(&ids[0], None), (&ids[1], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(
        h.heartbeat(&ids[0], h.generation()),
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn a_member_that_only_heartbeats_never_expires() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let generation = h.generation();
    for _ in 0..40 {
        h.advance(Millis::from(SESSION) - 1);
        assert_eq!(h.heartbeat(&ids[0], generation), ErrorCode::None);
    }
    assert_eq!(h.state(), GroupState::Stable);
    let last = h.now;
    h.tick_to(last + Millis::from(SESSION) - 1);
    assert!(h.group.has_member(&ids[0]));
    h.tick_to(last + Millis::from(SESSION));
    assert!(!h.group.has_member(&ids[0]));
}

#[test]
fn join_sync_and_commit_refresh_the_session() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let follower = h.followers(&ids)[0].clone();
    let leader = h.leader();
    let keep_leader = |h: &mut Harness| {
        assert_eq!(h.heartbeat(&leader, generation), ErrorCode::None);
    };
    let session = Millis::from(SESSION);

    // An OffsetCommit refreshes.
    h.advance(session - 1);
    keep_leader(&mut h);
    let (r, _) = h.commit(
        &follower,
        None,
        generation,
        vec![commit_topic("t1", &[(0, 1, None)])],
    );
    assert_eq!(r.error_code, 0);
    h.advance(session - 1);
    keep_leader(&mut h);
    assert!(h.group.has_member(&follower));

    // A SyncGroup refreshes.
    let t = h.sync(&follower, generation, Vec::new());
    assert_eq!(h.sync_reply(t).error_code, 0);
    h.advance(session - 1);
    keep_leader(&mut h);
    assert!(h.group.has_member(&follower));

    // An unchanged JoinGroup refreshes.
    let t = h.rejoin(&follower);
    assert_eq!(h.join_reply(t).generation_id, generation);
    h.advance(session - 1);
    keep_leader(&mut h);
    assert!(h.group.has_member(&follower));

    // A refused request whose member id checks out still counts as heard from.
    assert_eq!(
        h.heartbeat(&follower, generation + 5),
        ErrorCode::IllegalGeneration
    );
    h.advance(session - 1);
    keep_leader(&mut h);
    assert!(h.group.has_member(&follower));

    h.advance(1);
    assert!(!h.group.has_member(&follower));
}

// --------------------------------------------------------------------------- session expiry

#[test]
fn session_expiry_removes_the_member_and_rebalances() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let leader = h.leader();
    let follower = h.followers(&ids)[0].clone();
    let start = h.now;
    h.advance(5_000);
    h.heartbeat(&leader, generation);
    h.tick_to(start + Millis::from(SESSION) - 1);
    assert!(h.group.has_member(&follower));
    h.tick_to(start + Millis::from(SESSION));
    assert!(!h.group.has_member(&follower));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let events = h.take_events();
    assert!(events.contains(&Event::MemberExpired {
        member_id: follower.clone(),
        last_heard_ms_ago: Millis::from(SESSION),
    }));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::RebalanceStarted {
            trigger: RebalanceTrigger::SessionExpiry,
            ..
        }
    )));
    assert_eq!(
        h.heartbeat(&leader, generation),
        ErrorCode::RebalanceInProgress
    );
}

#[test]
fn held_join_is_not_expired() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let leader = h.leader();
    let follower = h.followers(&ids)[0].clone();
    let start = h.now;
    // The leader's join is held for the whole rebalance timeout (3 x its session timeout);
    // the follower keeps heartbeating without rejoining.
    let t = h.rejoin(&leader);
    while h.now + 3_000 < start + Millis::from(REBALANCE) {
        h.advance(3_000);
        h.heartbeat(&follower, generation);
        assert!(h.group.has_member(&leader));
    }
    h.tick_to(start + Millis::from(REBALANCE));
    assert_eq!(h.join_reply(t).error_code, 0);
    assert!(h.group.has_member(&leader));
    assert!(!h.group.has_member(&follower));
}

#[test]
fn new_member_held_join_is_capped() {
    let mut h = Harness::new();
    // A static member with a long rebalance timeout that will not rejoin keeps the barrier open.
    let ts = h.send_join(JoinGroupRequest {
        session_timeout_ms: 900_000,
        rebalance_timeout_ms: 600_000,
        ..Harness::join_req("", Some("s1"), &["t1"], &["range"])
    });
    let s = h.join_reply(ts).member_id;
    h.sync_all();
    h.take_replies();
    assert_eq!(h.state(), GroupState::Stable);

    let n = h.member_id_required();
    let start = h.now;
    let tn = h.send_join(JoinGroupRequest {
        rebalance_timeout_ms: 600_000,
        ..Harness::join_req(&n, None, &["t1"], &["range"])
    });
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.tick_to(start + 299_999);
    assert!(!h.is_answered(tn));
    h.tick_to(start + 300_000);
    let r = h.join_reply(tn);
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    assert!(!h.group.has_member(&n));
    assert!(h.group.has_member(&s));
    assert!(h
        .take_events()
        .contains(&Event::NewMemberTimedOut { member_id: n }));
}

// ------------------------------------------------------------------------------- LeaveGroup

#[test]
fn leave_group_batch_has_per_member_results() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    h.join_static("s1");
    h.join_static("s2");
    let answers = h.complete_rebalance();
    assert_eq!(answers.len(), 4);
    h.sync_all();
    h.take_replies();
    let described = h.describe();
    let static_id = |instance: &str| {
        described
            .members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(instance))
            .expect("static member")
            .member_id
            .clone()
    };
    let s1 = static_id("s1");
    let s2 = static_id("s2");
    assert_eq!(h.state(), GroupState::Stable);
    let pending = h.member_id_required();
    h.take_persist();

    let r = h.leave(&[
        (&ids[0], None),
        ("ghost", None),
        (&ids[1], Some("s1")),
        ("", Some("s2")),
        (&pending, None),
        ("", Some("nobody")),
    ]);
    let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
    assert_eq!(
        codes,
        vec![
            0,
            code(ErrorCode::UnknownMemberId),
            code(ErrorCode::FencedInstanceId),
            0,
            0,
            code(ErrorCode::UnknownMemberId),
        ]
    );
    assert_eq!(r.members[3].group_instance_id.as_deref(), Some("s2"));
    assert_eq!(r.error_code, 0);
    assert!(!h.group.has_member(&ids[0]));
    assert!(!h.group.has_member(&s2));
    assert!(h.group.has_member(&ids[1]));
    assert!(h.group.has_member(&s1));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(h.take_persist());
    // The pending id is forgotten.
    let t = h.join(&pending, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(t).error_code, code(ErrorCode::UnknownMemberId));
}

#[test]
fn leave_answers_held_requests() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let leader = h.leader();
    let followers = h.followers(&ids);
    // A held join.
    let tj = h.rejoin(&leader);
    assert!(!h.is_answered(tj));
    h.leave(&[(&leader, None)]);
    assert_eq!(
        h.join_reply(tj).error_code,
        code(ErrorCode::UnknownMemberId)
    );
    // A held sync.
    h.complete_rebalance();
    let generation = h.generation();
    let new_leader = h.leader();
    let follower = followers
        .iter()
        .find(|f| **f != new_leader)
        .expect("two followers")
        .clone();
    let ts = h.sync(&follower, generation, Vec::new());
    assert!(!h.is_answered(ts));
    h.leave(&[(&follower, None)]);
    assert_eq!(
        h.sync_reply(ts).error_code,
        code(ErrorCode::UnknownMemberId)
    );
    assert_eq!(h.state(), GroupState::PreparingRebalance);
}

// ------------------------------------------------------------------------ static membership

/// A Stable group of two static members, "s1" (leader) and "s2". Returns their member ids.
fn static_pair(h: &mut Harness) -> (String, String) {
    static_pair_with(h, &["range"])
}

fn static_pair_with(h: &mut Harness, assignor_names: &[&str]) -> (String, String) {
    let t1 = h.join("", Some("s1"), &["t1"], assignor_names);
    let s1 = h.join_reply(t1).member_id;
    let t2 = h.join("", Some("s2"), &["t1"], assignor_names);
    assert!(!h.is_answered(t2));
    h.rejoin(&s1);
    let s2 = h.join_reply(t2).member_id;
    assert_eq!(h.leader(), s1);
    h.sync_all();
    h.take_replies();
    h.take_events();
    h.take_persist();
    assert_eq!(h.state(), GroupState::Stable);
    (s1, s2)
}

#[test]
fn static_follower_takeover_keeps_the_assignment_without_rebalance() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    assert_eq!(s2, format!("s2-{}", Uuid::from_u128(2)));
    let generation = h.generation();
    let before = h.described(&s2).assignment;
    assert!(!before.is_empty());

    let t = h.join("", Some("s2"), &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_ne!(r.member_id, s2);
    assert!(r.member_id.starts_with("s2-"));
    assert_eq!(r.generation_id, generation);
    assert_eq!(r.leader_id, s1);
    assert!(!r.skip_assignment);
    assert!(r.members.is_empty());
    assert_eq!(h.state(), GroupState::Stable);
    assert!(h.take_persist(), "the new member id must be durable");
    assert!(!h
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::RebalanceStarted { .. })));

    let new_id = r.member_id;
    let t = h.sync(&new_id, generation, Vec::new());
    let s = h.sync_reply(t);
    assert_eq!(s.error_code, 0);
    assert_eq!(s.partitions, before);

    // The old id is fenced with its instance id, unknown without.
    assert_eq!(
        h.heartbeat_static(&s2, "s2", generation),
        ErrorCode::FencedInstanceId
    );
    assert_eq!(h.heartbeat(&s2, generation), ErrorCode::UnknownMemberId);
    let t = h.join(&s2, Some("s2"), &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::FencedInstanceId)
    );
    let (c, _) = h.commit(
        &s2,
        Some("s2"),
        generation,
        vec![commit_topic("t1", &[(0, 1, None)])],
    );
    assert_eq!(c.error_code, code(ErrorCode::FencedInstanceId));
    assert_eq!(
        h.heartbeat_static(&new_id, "s2", generation),
        ErrorCode::None
    );
}

#[test]
fn static_leader_takeover_gets_skip_assignment_and_the_member_list() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    let generation = h.generation();
    let t = h.join("", Some("s1"), &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert!(r.skip_assignment);
    assert_ne!(r.member_id, s1);
    assert_eq!(r.leader_id, r.member_id);
    assert_eq!(r.generation_id, generation);
    let mut listed: Vec<String> = r.members.iter().map(|m| m.member_id.clone()).collect();
    listed.sort();
    let mut expected = vec![r.member_id.clone(), s2];
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.leader(), r.member_id);
}

#[test]
fn static_takeover_fences_a_held_join_at_once() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    let old = h.rejoin(&s2);
    assert!(h.is_answered(old), "unchanged follower: answered at once");
    h.take_replies();
    // s2's old id starts a rebalance (new topics) and is held until s1 rejoins.
    let held = h.rejoin_with(&s2, |r| r.topics = strings(&["t1", "t2"]));
    assert!(!h.is_answered(held));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    // The takeover fences the held join at once.
    let t = h.join("", Some("s2"), &["t1", "t2"], &["range"]);
    let fenced = h.join_reply(held);
    assert_eq!(fenced.error_code, code(ErrorCode::FencedInstanceId));
    assert_eq!(fenced.member_id, s2);
    assert!(
        !h.is_answered(t),
        "the new id waits at the barrier in its place"
    );
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.rejoin(&s1);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert!(r.member_id.starts_with("s2-") && r.member_id != s2);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

#[test]
fn static_takeover_fences_a_held_sync_and_rebalances_in_completing_rebalance() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    h.rejoin(&s1);
    h.rejoin(&s2);
    h.take_replies();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let generation = h.generation();
    let held = h.sync(&s2, generation, Vec::new());
    assert!(!h.is_answered(held));
    let t = h.join("", Some("s2"), &["t1"], &["range"]);
    assert_eq!(
        h.sync_reply(held).error_code,
        code(ErrorCode::FencedInstanceId)
    );
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(!h.is_answered(t), "the new id waits at the barrier");
    h.rejoin(&s1);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, generation + 1);
}

#[test]
fn static_takeover_that_changes_the_vote_rebalances() {
    let mut h = Harness::new();
    let (_s1, _s2) = static_pair_with(&mut h, &["range", "roundrobin"]);
    assert_eq!(h.group.assignor(), Some("range"));
    // Same assignors, other user data: the vote stands, no rebalance.
    let mut req = Harness::join_req("", Some("s2"), &["t1"], &["range", "roundrobin"]);
    req.assignors[0].user_data = b"changed".to_vec();
    let t = h.send_join(req);
    assert_eq!(h.join_reply(t).error_code, 0);
    assert_eq!(h.state(), GroupState::Stable);
    // Dropping "range" changes the vote: rebalance.
    let t = h.join("", Some("s2"), &["t1"], &["roundrobin"]);
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let answers = h.complete_rebalance();
    assert!(answers
        .values()
        .all(|r| r.assignor.as_deref() == Some("roundrobin")));
}

#[test]
fn static_takeover_with_incompatible_assignors_is_refused() {
    let mut h = Harness::new();
    let (_s1, s2) = static_pair(&mut h);
    let t = h.join("", Some("s2"), &["t1"], &["sticky"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::InconsistentGroupProtocol)
    );
    assert!(h.group.has_member(&s2), "the old id stays");
}

// ------------------------------------------------------------------------- group size limit

#[test]
fn max_size_counts_members_or_awaiting_members_by_state() {
    let mut h = Harness::with_config(GroupConfig {
        max_group_size: 2,
        ..config()
    });
    // An Empty group always accepts.
    let a = h.member_id_required();
    let b = h.member_id_required();
    let c = h.member_id_required();
    let ta = h.join(&a, None, &["t1"], &["range"]);
    assert_eq!(h.join_reply(ta).error_code, 0);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // CompletingRebalance: one member, room for one more.
    let tb = h.join(&b, None, &["t1"], &["range"]);
    assert!(!h.is_answered(tb));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    // PreparingRebalance counts members waiting at the barrier: b only (a has not rejoined).
    let td = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(td).error_code,
        code(ErrorCode::MemberIdRequired)
    );
    h.rejoin(&a);
    // Now two are waiting (the barrier still waits for the pending ids c and d).
    let te = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(te).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
    let tc = h.join(&c, None, &["t1"], &["range"]);
    let rc = h.join_reply(tc);
    assert_eq!(rc.error_code, code(ErrorCode::GroupMaxSizeReached));
    assert_eq!(rc.member_id, c);
    assert_eq!(h.group.member_count(), 2);
}

#[test]
fn max_size_in_stable_counts_members() {
    let mut h = Harness::with_config(GroupConfig {
        max_group_size: 3,
        ..config()
    });
    h.form_group(2);
    let p = h.member_id_required();
    let t = h.join(&p, None, &["t1"], &["range"]);
    assert!(!h.is_answered(t));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.complete_rebalance();
    h.sync_all();
    assert_eq!(h.group.member_count(), 3);
    let t = h.join("", None, &["t1"], &["range"]);
    assert_eq!(
        h.join_reply(t).error_code,
        code(ErrorCode::GroupMaxSizeReached)
    );
}

// ---------------------------------------------------------------------------- offset commit

#[test]
fn simple_commit_on_an_empty_group_is_accepted() {
    let mut h = Harness::new();
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![commit_topic(
            "t1",
            &[(0, 10, Some("m".into())), (1, 11, None)],
        )],
    );
    assert_eq!(r.error_code, 0);
    assert!(r.topics[0].partitions.iter().all(|p| p.error_code == 0));
    assert_eq!(writes.len(), 2);
    assert_eq!(writes[0].committed.commit_timestamp_ms, h.now);
    assert!(!h.group.has_offsets(), "visible only once applied");
    h.group.apply_offsets(writes);
    assert!(h.group.has_offsets());
    assert_eq!(h.state(), GroupState::Empty);
}

#[test]
fn simple_commit_on_a_non_empty_group_is_refused_everywhere() {
    let mut h = Harness::new();
    h.form_group(1);
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic("t1", &[(0, 10, None), (1, 11, None)]),
            commit_topic("t2", &[(0, 1, None)]),
        ],
    );
    let unknown = code(ErrorCode::UnknownMemberId);
    assert_eq!(r.error_code, unknown);
    assert_eq!(r.topics.len(), 2);
    assert!(r
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .all(|p| p.error_code == unknown));
    assert_eq!(r.topics[0].partitions.len(), 2);
    assert!(writes.is_empty());
}

#[test]
fn commit_checks_the_member_then_the_generation() {
    let mut h = Harness::new();
    let (s1, _s2) = static_pair(&mut h);
    let generation = h.generation();
    let topics = || vec![commit_topic("t1", &[(0, 5, None)])];
    let (r, w) = h.commit("ghost", None, generation + 3, topics());
    assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
    assert!(w.is_empty());
    let (r, _) = h.commit("ghost", Some("s1"), generation + 3, topics());
    assert_eq!(r.error_code, code(ErrorCode::FencedInstanceId));
    assert_eq!(r.topics[0].partitions[0].error_code, r.error_code);
    let (r, _) = h.commit(&s1, Some("s2"), generation, topics());
    assert_eq!(r.error_code, code(ErrorCode::FencedInstanceId));
    let (r, _) = h.commit(&s1, Some("s1"), generation + 3, topics());
    assert_eq!(r.error_code, code(ErrorCode::IllegalGeneration));
    assert_eq!(r.topics[0].partitions[0].error_code, r.error_code);
    let (r, w) = h.commit(&s1, Some("s1"), generation, topics());
    assert_eq!(r.error_code, 0);
    assert_eq!(w.len(), 1);
    // Generation -1 with a member id is a member commit: the generation is wrong.
    let (r, _) = h.commit(&s1, None, -1, topics());
    assert_eq!(r.error_code, code(ErrorCode::IllegalGeneration));
}

#[test]
fn commit_by_state() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let topics = || vec![commit_topic("t1", &[(0, 5, None)])];
    let (r, _) = h.commit(&ids[0], None, generation, topics());
    assert_eq!(r.error_code, 0, "Stable");
    let leader = h.leader();
    h.rejoin(&leader);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let (r, w) = h.commit(&ids[1], None, generation, topics());
    assert_eq!(r.error_code, 0, "PreparingRebalance: finishing owned work");
    assert_eq!(w.len(), 1);
    h.complete_rebalance();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let (r, w) = h.commit(&ids[1], None, generation + 1, topics());
    assert_eq!(r.error_code, code(ErrorCode::RebalanceInProgress));
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        code(ErrorCode::RebalanceInProgress)
    );
    assert!(w.is_empty());
}

#[test]
fn oversized_metadata_is_refused_on_its_partition_only() {
    let mut h = Harness::new();
    let (r, writes) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic(
                "t1",
                &[
                    (0, 1, Some("x".repeat(4_097))),
                    (1, 2, Some("y".repeat(4_096))),
                ],
            ),
            commit_topic("t2", &[(0, 3, None)]),
        ],
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        code(ErrorCode::OffsetMetadataTooLarge)
    );
    assert_eq!(r.topics[0].partitions[1].error_code, 0);
    assert_eq!(r.topics[1].partitions[0].error_code, 0);
    let written: Vec<(String, i32)> = writes
        .iter()
        .map(|w| (w.topic.clone(), w.partition))
        .collect();
    assert_eq!(written, vec![("t1".into(), 1), ("t2".into(), 0)]);
}

#[test]
fn fetch_returns_applied_offsets() {
    let mut h = Harness::new();
    let (_, writes) = h.commit(
        "",
        None,
        -1,
        vec![
            commit_topic("zeta", &[(2, 20, None), (0, 10, Some("meta".into()))]),
            commit_topic("alpha", &[(1, 7, None)]),
        ],
    );
    h.group.apply_offsets(writes);
    let fetched = h.group.fetch_offsets(&OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: Some(vec![tp("zeta", &[0, 1]), tp("nothing", &[3])]),
    });
    assert_eq!(fetched.error_code, 0);
    let zeta = &fetched.topics[0];
    assert_eq!(zeta.topic, "zeta");
    assert_eq!(
        (
            zeta.partitions[0].offset,
            zeta.partitions[0].metadata.as_deref()
        ),
        (10, Some("meta"))
    );
    assert_eq!(
        (zeta.partitions[1].offset, zeta.partitions[1].error_code),
        (-1, 0)
    );
    assert_eq!(fetched.topics[1].partitions[0].offset, -1);
    assert_eq!(fetched.topics[1].partitions[0].partition, 3);

    let all = h.group.fetch_offsets(&OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: None,
    });
    let flat: Vec<(String, i32, i64)> = all
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic.clone(), p.partition, p.offset))
        })
        .collect();
    assert_eq!(
        flat,
        vec![
            ("alpha".into(), 1, 7),
            ("zeta".into(), 0, 10),
            ("zeta".into(), 2, 20),
        ]
    );
}

#[test]
fn offsets_survive_membership_changes() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    let generation = h.generation();
    let (_, w) = h.commit(
        &ids[0],
        None,
        generation,
        vec![commit_topic("t1", &[(0, 42, None)])],
    );
    h.group.apply_offsets(w);
    h.leave(&[(&ids[0], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    let f = h.group.fetch_offsets(&OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: None,
    });
    assert_eq!(f.topics[0].partitions[0].offset, 42);
}

// -------------------------------------------------------------------------- DescribeGroups

#[test]
fn describe_names_the_members_a_rebalance_waits_for() {
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let generation = h.generation();
    let leader = h.leader();
    let followers = h.followers(&ids);
    let d = h.describe();
    assert_eq!(d.state, "Stable");
    assert!(d.members.iter().all(|m| !m.holding_rebalance));
    assert_eq!(d.leader_id, leader);
    assert_eq!(d.generation_id, generation);
    assert_eq!(d.members[0].client_id, "client");
    assert_eq!(d.members[0].client_host, "/10.0.0.1");
    assert_eq!(d.members[0].session_timeout_ms, SESSION);

    h.advance(1_000);
    h.rejoin(&leader);
    h.advance(500);
    h.heartbeat(&followers[0], generation);
    h.advance(250);
    let d = h.describe();
    assert_eq!(d.state, "PreparingRebalance");
    let m = |id: &str| {
        d.members
            .iter()
            .find(|m| m.member_id == id)
            .expect("member")
    };
    assert!(!m(&leader).holding_rebalance);
    assert_eq!(
        m(&leader).last_seen_ms_ago,
        0,
        "held: heard from while waiting"
    );
    assert!(m(&followers[0]).holding_rebalance);
    assert_eq!(m(&followers[0]).last_seen_ms_ago, 250);
    assert!(m(&followers[1]).holding_rebalance);
    assert_eq!(m(&followers[1]).last_seen_ms_ago, 1_750);

    h.rejoin(&followers[0]);
    h.rejoin(&followers[1]);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let t = h.sync(&followers[0], generation + 1, Vec::new());
    assert!(!h.is_answered(t));
    h.advance(100);
    let d = h.describe();
    let m = |id: &str| {
        d.members
            .iter()
            .find(|m| m.member_id == id)
            .expect("member")
    };
    assert!(m(&leader).holding_rebalance, "has not synced");
    assert_eq!(m(&leader).last_seen_ms_ago, 100);
    assert!(!m(&followers[0]).holding_rebalance, "synced, held");
    assert_eq!(m(&followers[0]).last_seen_ms_ago, 0);
    assert!(m(&followers[1]).holding_rebalance);
}

// ------------------------------------------------------------------------- delete and topics

#[test]
fn delete_only_an_empty_group() {
    let mut h = Harness::new();
    let ids = h.form_group(1);
    assert_eq!(h.group.delete(h.now), ErrorCode::NonEmptyGroup);
    assert_eq!(h.state(), GroupState::Stable);
    h.leave(&[(&ids[0], None)]);
    let (_, w) = h.commit("", None, -1, vec![commit_topic("t1", &[(0, 1, None)])]);
    h.group.apply_offsets(w);
    assert_eq!(h.group.delete(h.now), ErrorCode::None);
    assert_eq!(h.state(), GroupState::Dead);
    assert!(!h.group.has_offsets());
    assert_eq!(h.group.delete(h.now), ErrorCode::GroupIdNotFound);
}

#[test]
fn topic_change_rebalances_subscribed_groups_only() {
    let mut h = Harness::new();
    h.form_group(2);
    h.topics_changed(&["t2", "other"]);
    assert_eq!(h.state(), GroupState::Stable, "not subscribed");
    h.topics_changed(&["t1"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        Event::RebalanceStarted {
            trigger: RebalanceTrigger::TopicChange,
            ..
        }
    )));
}

// --------------------------------------------------------------------------- absent groups

#[test]
fn absent_group_answers() {
    let cfg = config();
    let join = |member_id: &str| {
        Request::JoinGroup(Harness::join_req(member_id, None, &["t1"], &["range"]))
    };
    assert_eq!(absent_group(&join(""), &cfg), AbsentGroup::Create);
    let expect_answer = |req: &Request| match absent_group(req, &cfg) {
        AbsentGroup::Answer(r) => r,
        AbsentGroup::Create => panic!("{req:?} must not create a group"),
    };
    match expect_answer(&join("someone")) {
        Response::JoinGroup(r) => {
            assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId));
            assert_eq!(r.member_id, "someone");
        }
        other => panic!("{other:?}"),
    }
    let mut bad_timeout = Harness::join_req("", None, &["t1"], &["range"]);
    bad_timeout.session_timeout_ms = 1;
    match expect_answer(&Request::JoinGroup(bad_timeout)) {
        Response::JoinGroup(r) => {
            assert_eq!(r.error_code, code(ErrorCode::InvalidSessionTimeout))
        }
        other => panic!("{other:?}"),
    }
    let hb = Request::Heartbeat(HeartbeatRequest {
        group_id: GROUP.into(),
        generation_id: 1,
        member_id: "m".into(),
        group_instance_id: None,
    });
    assert_eq!(
        expect_answer(&hb),
        Response::Heartbeat(muster_protocol::HeartbeatResponse {
            error_code: code(ErrorCode::UnknownMemberId)
        })
    );
    let sync = Request::SyncGroup(SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id: 1,
        member_id: "m".into(),
        ..SyncGroupRequest::default()
    });
    match expect_answer(&sync) {
        Response::SyncGroup(r) => assert_eq!(r.error_code, code(ErrorCode::UnknownMemberId)),
        other => panic!("{other:?}"),
    }
    let leave = Request::LeaveGroup(LeaveGroupRequest {
        group_id: GROUP.into(),
        members: vec![
            LeavingMember {
                member_id: "a".into(),
                ..LeavingMember::default()
            },
            LeavingMember {
                member_id: String::new(),
                group_instance_id: Some("i".into()),
                reason: None,
            },
        ],
    });
    match expect_answer(&leave) {
        Response::LeaveGroup(r) => {
            assert_eq!(r.members.len(), 2);
            assert!(r
                .members
                .iter()
                .all(|m| m.error_code == code(ErrorCode::UnknownMemberId)));
            assert_eq!(r.members[1].group_instance_id.as_deref(), Some("i"));
        }
        other => panic!("{other:?}"),
    }
    let commit = |generation: i32, member_id: &str| {
        Request::OffsetCommit(OffsetCommitRequest {
            group_id: GROUP.into(),
            generation_id: generation,
            member_id: member_id.into(),
            group_instance_id: None,
            topics: vec![
                commit_topic("t1", &[(0, 1, None), (1, 1, None)]),
                commit_topic("t2", &[(0, 1, None)]),
            ],
        })
    };
    for generation in [0, 3] {
        match expect_answer(&commit(generation, "m")) {
            Response::OffsetCommit(r) => {
                let illegal = code(ErrorCode::IllegalGeneration);
                assert_eq!(r.error_code, illegal);
                let codes: Vec<i16> = r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect();
                assert_eq!(codes, vec![illegal; 3]);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(absent_group(&commit(-1, ""), &cfg), AbsentGroup::Create);
    let fetch = Request::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: Some(vec![tp("t1", &[0, 4])]),
    });
    match expect_answer(&fetch) {
        Response::OffsetFetch(r) => {
            assert_eq!(r.error_code, 0);
            assert!(r.topics[0]
                .partitions
                .iter()
                .all(|p| p.offset == -1 && p.error_code == 0));
            assert_eq!(r.topics[0].partitions.len(), 2);
        }
        other => panic!("{other:?}"),
    }
    let fetch_all = Request::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: None,
    });
    match expect_answer(&fetch_all) {
        Response::OffsetFetch(r) => assert!(r.topics.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn group_id_validation() {
    assert_eq!(validate_group_id(""), Err(ErrorCode::InvalidGroupId));
    assert_eq!(validate_group_id(&"g".repeat(255)), Ok(()));
    assert_eq!(
        validate_group_id(&"g".repeat(256)),
        Err(ErrorCode::InvalidGroupId)
    );
    // 255 bytes, counted in bytes not characters.
    assert_eq!(
        validate_group_id(&"é".repeat(128)),
        Err(ErrorCode::InvalidGroupId)
    );
    assert_eq!(validate_group_id("a\nb"), Err(ErrorCode::InvalidGroupId));
    assert_eq!(validate_group_id("a\u{7f}"), Err(ErrorCode::InvalidGroupId));
    assert_eq!(validate_group_id("\0"), Err(ErrorCode::InvalidGroupId));
    assert_eq!(validate_group_id("orders-consumers.v2 ü"), Ok(()));
}

// ---------------------------------------------------------------------- record and restore

#[test]
fn restored_stable_group_carries_on() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    let generation = h.generation();
    let leader = h.leader();
    let before = h.describe();
    let (_, w) = h.commit(
        &ids[0],
        None,
        generation,
        vec![commit_topic("t1", &[(0, 9, None)])],
    );
    h.group.apply_offsets(w.clone());
    h.advance(5_000);
    h.restart(w);

    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.generation(), generation);
    assert_eq!(h.leader(), leader);
    assert_eq!(h.group.assignor(), Some("range"));
    let after = h.describe();
    assert_eq!(after.members.len(), 2);
    for (b, a) in before.members.iter().zip(&after.members) {
        assert_eq!(b.member_id, a.member_id);
        assert_eq!(b.assignment, a.assignment);
        assert_eq!(b.topics, a.topics);
        assert_eq!(a.last_seen_ms_ago, 0, "sessions start at load time");
    }
    for id in &ids {
        assert_eq!(h.heartbeat(id, generation), ErrorCode::None);
        let t = h.sync(id, generation, Vec::new());
        let r = h.sync_reply(t);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.partitions, h.described(id).assignment);
        assert!(!r.partitions.is_empty());
    }
    let f = h.group.fetch_offsets(&OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: None,
    });
    assert_eq!(f.topics[0].partitions[0].offset, 9);
    // An unchanged follower rejoin is still answered from the current generation.
    let follower = h.followers(&ids)[0].clone();
    let t = h.rejoin(&follower);
    assert_eq!(h.join_reply(t).generation_id, generation);
}

#[test]
fn restored_mid_rebalance_group_is_preparing() {
    for completing in [false, true] {
        let mut h = Harness::new();
        let ids = h.form_group(2);
        let leader = h.leader();
        h.rejoin(&leader);
        if completing {
            h.complete_rebalance();
            assert_eq!(h.state(), GroupState::CompletingRebalance);
        } else {
            assert_eq!(h.state(), GroupState::PreparingRebalance);
        }
        let generation = h.generation();
        h.restart(Vec::new());
        assert_eq!(h.state(), GroupState::PreparingRebalance);
        assert_eq!(h.generation(), generation);
        assert_eq!(h.group.member_count(), 2);
        let answers = h.complete_rebalance();
        assert_eq!(answers.len(), 2);
        assert_eq!(h.generation(), generation + 1, "never reused");
        assert!(ids.iter().all(|id| answers.contains_key(id)));
    }
}

#[test]
fn restored_sessions_start_at_load_time() {
    let mut h = Harness::new();
    let ids = h.form_group(2);
    // Long silent before the crash: their sessions would have expired by now.
    h.now += 3 * Millis::from(SESSION);
    h.restart(Vec::new());
    let loaded = h.now;
    h.tick_to(loaded);
    h.tick_to(loaded + Millis::from(SESSION) - 1);
    assert!(ids.iter().all(|id| h.group.has_member(id)));
    assert_eq!(h.state(), GroupState::Stable);
    h.tick_to(loaded + Millis::from(SESSION));
    assert_eq!(h.group.member_count(), 0);
}

#[test]
fn record_carries_statics_and_subscriptions() {
    let mut h = Harness::new();
    let (s1, s2) = static_pair(&mut h);
    let record = h.group.to_record();
    assert_eq!(record.state, GroupState::Stable);
    assert_eq!(record.leader.as_deref(), Some(s1.as_str()));
    let m2 = record
        .members
        .iter()
        .find(|m| m.member_id == s2)
        .expect("in the record");
    assert_eq!(m2.group_instance_id.as_deref(), Some("s2"));
    assert_eq!(m2.topics, strings(&["t1"]));
    assert_eq!(m2.rebalance_timeout_ms, REBALANCE);
    h.restart(Vec::new());
    // The static binding survives: a takeover still works, and the old id is fenced.
    let t = h.join("", Some("s2"), &["t1"], &["range"]);
    let r = h.join_reply(t);
    assert_eq!(r.error_code, 0);
    assert_eq!(
        h.heartbeat_static(&s2, "s2", h.generation()),
        ErrorCode::FencedInstanceId
    );
}

// ---------------------------------------------------------------------------- property test

/// One step a client (or the clock) takes.
#[derive(Debug, Clone)]
enum Op {
    /// A new dynamic client asks for a member id.
    NewMember,
    /// Known id `i` (pending or member) joins with its last request; `changed` flips its topics.
    Join {
        i: usize,
        changed: bool,
    },
    /// Static instance `k` joins with an empty member id (first join or takeover).
    StaticJoin {
        k: usize,
        short_session: bool,
    },
    /// Known id `i` syncs at the generation it last learned (the leader assigns).
    Sync {
        i: usize,
    },
    Heartbeat {
        i: usize,
    },
    Commit {
        i: usize,
    },
    Leave {
        i: usize,
    },
    Advance {
        ms: Millis,
    },
    /// Time moves to the group's next deadline.
    TickDeadline,
    /// A well-behaved client moves the rebalance on: a member the barrier waits for rejoins,
    /// or the leader (else a follower) syncs. Steers runs into CompletingRebalance and Stable.
    Cooperate {
        i: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::NewMember),
        4 => (0usize..8, any::<bool>()).prop_map(|(i, c)| Op::Join { i, changed: c && i % 3 == 0 }),
        1 => (0usize..2, any::<bool>()).prop_map(|(k, s)| Op::StaticJoin { k, short_session: s }),
        4 => (0usize..8).prop_map(|i| Op::Sync { i }),
        2 => (0usize..8).prop_map(|i| Op::Heartbeat { i }),
        1 => (0usize..8).prop_map(|i| Op::Commit { i }),
        1 => (0usize..8).prop_map(|i| Op::Leave { i }),
        2 => prop::sample::select(vec![1, 700, 3_000, 9_000, 25_000]).prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::TickDeadline),
        5 => (0usize..8).prop_map(|i| Op::Cooperate { i }),
    ]
}

/// What clients know, to make plausible requests and to check the engine against.
#[derive(Default)]
struct Model {
    /// Every id handed out, in order (ops pick one by index).
    ids: Vec<String>,
    /// The generation each id last learned from a JoinGroup answer.
    generation: HashMap<String, i32>,
    /// The assignment of the leader's last SyncGroup that took effect.
    assignment: HashMap<String, Vec<TopicPartitions>>,
}

impl Model {
    fn pick(&self, i: usize) -> Option<String> {
        (!self.ids.is_empty()).then(|| self.ids[i % self.ids.len()].clone())
    }

    fn learn(&mut self, replies: &[(u32, Response)]) {
        for (_, r) in replies {
            if let Response::JoinGroup(j) = r {
                let learned =
                    j.error_code == 0 || j.error_code == code(ErrorCode::MemberIdRequired);
                if learned && !self.ids.contains(&j.member_id) {
                    self.ids.push(j.member_id.clone());
                }
                if j.error_code == 0 {
                    self.generation.insert(j.member_id.clone(), j.generation_id);
                }
            }
        }
    }
}

/// The concrete step a cooperative client takes now (see [`Op::Cooperate`]).
fn cooperate(h: &Harness, model: &Model, i: usize) -> Op {
    let index_of = |id: &str| model.ids.iter().position(|x| x == id);
    let members = h.describe().members;
    let pick = |ids: Vec<&str>| -> Option<usize> {
        (!ids.is_empty())
            .then(|| ids[i % ids.len()])
            .and_then(index_of)
    };
    let chosen = match h.state() {
        GroupState::PreparingRebalance => pick(
            members
                .iter()
                .filter(|m| m.holding_rebalance && h.last_join.contains_key(&m.member_id))
                .map(|m| m.member_id.as_str())
                .collect(),
        )
        .map(|i| Op::Join { i, changed: false }),
        GroupState::CompletingRebalance | GroupState::Stable => {
            let leader = h.group.leader().unwrap_or_default();
            let leader_pending = members
                .iter()
                .any(|m| m.member_id == leader && m.holding_rebalance);
            if leader_pending {
                index_of(leader).map(|i| Op::Sync { i })
            } else {
                pick(members.iter().map(|m| m.member_id.as_str()).collect()).map(|i| Op::Sync { i })
            }
        }
        GroupState::Empty | GroupState::Dead => None,
    };
    chosen.unwrap_or(Op::Join { i, changed: false })
}

fn run_ops(delay: u32, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut h = Harness::with_config(with_delay(delay));
    let mut model = Model::default();
    let mut last_generation = h.generation();
    for op in ops {
        let op = match op {
            Op::Cooperate { i } => cooperate(&h, &model, i),
            other => other,
        };
        let before = h.state();
        let mut ticked = false;
        match op.clone() {
            Op::NewMember => {
                h.join("", None, &["t1"], &["range", "roundrobin"]);
            }
            Op::Join { i, changed } => {
                if let Some(id) = model.pick(i) {
                    if h.last_join.contains_key(&id) {
                        h.rejoin_with(&id, |r| {
                            if changed {
                                r.topics = if r.topics.len() == 1 {
                                    strings(&["t1", "t2"])
                                } else {
                                    strings(&["t1"])
                                };
                            }
                        });
                    }
                }
            }
            Op::StaticJoin { k, short_session } => {
                let instance = format!("s{k}");
                let old = h.group.statics.get(&instance).map(|id| id.to_string());
                let t = h.send_join(JoinGroupRequest {
                    session_timeout_ms: if short_session { 5_000 } else { 40_000 },
                    rebalance_timeout_ms: if short_session { 30_000 } else { 20_000 },
                    ..Harness::join_req("", Some(&instance), &["t1"], &["range", "roundrobin"])
                });
                // A takeover answered at once in Stable keeps the old assignment.
                if let Some(Response::JoinGroup(r)) = h
                    .replies
                    .iter()
                    .find(|(tk, _)| *tk == t)
                    .map(|(_, r)| r.clone())
                {
                    if r.error_code == 0
                        && before == GroupState::Stable
                        && h.state() == GroupState::Stable
                    {
                        let old = old.expect("a takeover answered at once replaces a member");
                        if let Some(a) = model.assignment.remove(&old) {
                            model.assignment.insert(r.member_id.clone(), a);
                        }
                    }
                }
            }
            Op::Sync { i } => {
                if let Some(id) = model.pick(i) {
                    let generation = model.generation.get(&id).copied().unwrap_or(-1);
                    let is_leader = h.group.leader() == Some(id.as_str());
                    let assignments: Vec<MemberAssignment> = if is_leader {
                        h.describe()
                            .members
                            .iter()
                            .zip(0..)
                            .filter(|(_, n)| n % 3 != 2) // leave some members out
                            .map(|(m, n)| assign(&m.member_id, vec![tp("t1", &[n, generation])]))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    let applies = is_leader
                        && before == GroupState::CompletingRebalance
                        && generation == h.generation();
                    let t = h.sync(&id, generation, assignments.clone());
                    if applies {
                        let leader_answer = h
                            .replies
                            .iter()
                            .find(|(tk, _)| *tk == t)
                            .map(|(_, r)| r.clone());
                        prop_assert!(
                            matches!(&leader_answer, Some(Response::SyncGroup(s)) if s.error_code == 0),
                            "the leader's sync in CompletingRebalance is answered at once: {leader_answer:?}"
                        );
                        prop_assert_eq!(h.state(), GroupState::Stable);
                        model.assignment = assignments
                            .into_iter()
                            .map(|a| (a.member_id, a.partitions))
                            .collect();
                    }
                }
            }
            Op::Heartbeat { i } => {
                if let Some(id) = model.pick(i) {
                    let generation = model.generation.get(&id).copied().unwrap_or(-1);
                    h.heartbeat(&id, generation);
                }
            }
            Op::Commit { i } => {
                if let Some(id) = model.pick(i) {
                    let generation = model.generation.get(&id).copied().unwrap_or(-1);
                    let (r, w) = h.commit(
                        &id,
                        None,
                        generation,
                        vec![commit_topic("t1", &[(0, 1, None)])],
                    );
                    prop_assert!(r.error_code != 0 || w.len() == 1);
                    prop_assert!(r.error_code == 0 || w.is_empty());
                    h.group.apply_offsets(w);
                }
            }
            Op::Leave { i } => {
                if let Some(id) = model.pick(i) {
                    h.leave(&[(&id, None)]);
                }
            }
            Op::Advance { ms } => {
                h.advance(ms);
                ticked = true;
            }
            Op::TickDeadline => {
                if let Some(d) = h.group.next_deadline() {
                    h.tick_to(d.max(h.now));
                    ticked = true;
                }
            }
            Op::Cooperate { .. } => unreachable!("resolved above"),
        }
        let replies = h.take_replies();
        model.learn(&replies);
        for (_, r) in &replies {
            if let Response::JoinGroup(j) = r {
                if j.error_code == 0 {
                    prop_assert!(j.generation_id <= h.generation());
                }
            }
        }

        // Invariants.
        let persisted = h.take_persist();
        let g = &h.group;
        prop_assert!(
            g.generation() >= last_generation,
            "generation went down after {op:?}"
        );
        if g.generation() != last_generation
            || (g.state() == GroupState::Stable && before != GroupState::Stable)
        {
            prop_assert!(
                persisted,
                "a new generation or assignment was not persisted"
            );
        }
        last_generation = g.generation();
        if g.state() == GroupState::Empty {
            prop_assert_eq!(g.member_count(), 0);
        }
        if g.member_count() == 0 {
            prop_assert!(
                matches!(
                    g.state(),
                    GroupState::Empty | GroupState::PreparingRebalance | GroupState::Dead
                ),
                "no members in {:?}",
                g.state()
            );
            if g.state() == GroupState::PreparingRebalance {
                prop_assert!(
                    g.next_deadline().is_some(),
                    "a memberless barrier must close"
                );
            }
        }
        if matches!(
            g.state(),
            GroupState::Stable | GroupState::CompletingRebalance
        ) {
            let leader = g.leader().expect("a leader");
            prop_assert!(g.has_member(leader));
            let assignor = g.assignor().expect("an assignor");
            prop_assert!(g.members.values().all(|m| m.supports(assignor)));
        }
        if g.state() == GroupState::Stable {
            for m in h.describe().members {
                let expected = model
                    .assignment
                    .get(&m.member_id)
                    .cloned()
                    .unwrap_or_default();
                prop_assert_eq!(&m.assignment, &expected, "assignment of {}", m.member_id);
            }
        }
        let awaiting = g
            .members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count();
        prop_assert_eq!(g.num_awaiting_join, awaiting);
        let pending_sync = g.members.values().filter(|m| m.pending_sync).count();
        prop_assert_eq!(g.num_pending_sync, pending_sync);
        if g.state() != GroupState::PreparingRebalance {
            prop_assert_eq!(awaiting, 0, "held joins outside a barrier");
        }
        if g.state() != GroupState::CompletingRebalance {
            prop_assert!(g.members.values().all(|m| m.awaiting_sync.is_none()));
        }
        for s in g.statics.values() {
            prop_assert!(g.has_member(s), "static binding to a non-member");
        }
        // An actor arming its timer from `take_new_deadline` never sleeps past a deadline.
        h.arm_timer();
        if let Some(next) = h.group.next_deadline() {
            prop_assert!(
                h.armed.is_some_and(|a| a <= next),
                "armed timer {:?} is later than the next deadline {next} after {op:?}",
                h.armed
            );
        }
        if ticked {
            let now = h.now;
            prop_assert!(
                h.group.next_deadline().is_none_or(|d| d > now),
                "after tick({now}) the next deadline is {:?}",
                h.group.next_deadline()
            );
        }
    }
    Ok(())
}

/// 128 cases by default so the suite stays fast; `PROPTEST_CASES=20000` for a deeper search.
fn prop_config() -> ProptestConfig {
    let default = ProptestConfig::default();
    ProptestConfig {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            default.cases
        } else {
            128
        },
        failure_persistence: None,
        ..default
    }
}

proptest! {
    #![proptest_config(prop_config())]

    #[test]
    fn engine_invariants_hold(delay in prop::sample::select(vec![0u32, 3_000]),
                              ops in prop::collection::vec(op(), 1..80)) {
        run_ops(delay, ops)?;
    }
}

// ------------------------------------------------------------------ helpers for the actors

#[test]
fn abort_held_answers_every_held_request() {
    let unavailable = code(ErrorCode::CoordinatorNotAvailable);
    let mut h = Harness::new();
    let ids = h.form_group(3);
    let leader = h.leader();
    let followers = h.followers(&ids);
    // Held JoinGroups (PreparingRebalance).
    let tl = h.rejoin(&leader);
    let tf = h.rejoin(&followers[0]);
    assert!(!h.is_answered(tl) && !h.is_answered(tf));
    h.group
        .abort_held(ErrorCode::CoordinatorNotAvailable, &mut h.out);
    h.collect();
    for (t, id) in [(tl, &leader), (tf, &followers[0])] {
        let r = h.join_reply(t);
        assert_eq!(
            (r.error_code, r.member_id.as_str()),
            (unavailable, id.as_str())
        );
    }
    assert_eq!(h.group.num_awaiting_join, 0);
    assert_eq!(h.state(), GroupState::PreparingRebalance);

    // Held SyncGroups (CompletingRebalance).
    h.complete_rebalance();
    let generation = h.generation();
    let new_leader = h.leader();
    let held: Vec<u32> = h
        .describe()
        .members
        .iter()
        .filter(|m| m.member_id != new_leader)
        .map(|m| m.member_id.clone())
        .collect::<Vec<_>>()
        .iter()
        .map(|id| h.sync(id, generation, Vec::new()))
        .collect();
    assert_eq!(held.len(), 2);
    assert!(held.iter().all(|t| !h.is_answered(*t)));
    h.group
        .abort_held(ErrorCode::CoordinatorNotAvailable, &mut h.out);
    h.collect();
    for t in held {
        assert_eq!(h.sync_reply(t).error_code, unavailable);
    }
}

#[test]
fn offsets_expire_by_commit_time_and_state_since_tracks_empty() {
    let mut h = Harness::new();
    let (_, w) = h.commit("", None, -1, vec![commit_topic("t1", &[(0, 1, None)])]);
    h.group.apply_offsets(w);
    h.now = 100;
    let (_, w) = h.commit("", None, -1, vec![commit_topic("t1", &[(1, 2, None)])]);
    h.group.apply_offsets(w);
    assert_eq!(h.group.expire_offsets(50), vec![("t1".to_owned(), 0)]);
    assert!(h.group.has_offsets());
    assert_eq!(h.group.expire_offsets(100), vec![("t1".to_owned(), 1)]);
    assert!(!h.group.has_offsets());

    let ids = h.form_group(1);
    h.advance(700);
    h.leave(&[(&ids[0], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(
        h.group.state_since(),
        800,
        "retention counts from entering Empty"
    );
}

#[test]
fn error_answers_have_the_request_shape() {
    let leave = Request::LeaveGroup(LeaveGroupRequest {
        group_id: GROUP.into(),
        members: vec![LeavingMember {
            member_id: "a".into(),
            group_instance_id: Some("i".into()),
            reason: None,
        }],
    });
    assert_eq!(group_of(&leave), Some(GROUP));
    let bad = code(ErrorCode::InvalidGroupId);
    match error_for(&leave, ErrorCode::InvalidGroupId) {
        Response::LeaveGroup(r) => {
            assert_eq!(r.error_code, bad);
            assert_eq!(r.members[0].error_code, bad);
            assert_eq!(r.members[0].group_instance_id.as_deref(), Some("i"));
        }
        other => panic!("{other:?}"),
    }
    let join = Request::JoinGroup(Harness::join_req("m-1", None, &["t1"], &["range"]));
    match error_for(&join, ErrorCode::InvalidGroupId) {
        Response::JoinGroup(r) => assert_eq!((r.error_code, r.member_id.as_str()), (bad, "m-1")),
        other => panic!("{other:?}"),
    }

    // A commit answer whose write failed becomes the same answer with the error everywhere.
    let mut h = Harness::new();
    let (answer, _) = h.commit(
        "",
        None,
        -1,
        vec![commit_topic(
            "t1",
            &[(0, 1, None), (1, 1, Some("x".repeat(5_000)))],
        )],
    );
    let failed = error_like(
        &Response::OffsetCommit(answer),
        ErrorCode::CoordinatorNotAvailable,
    );
    match failed {
        Response::OffsetCommit(r) => {
            let c = code(ErrorCode::CoordinatorNotAvailable);
            assert_eq!(r.error_code, c);
            assert_eq!(r.topics[0].partitions.len(), 2);
            assert!(r.topics[0].partitions.iter().all(|p| p.error_code == c));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(group_of(&Request::DescribeGroups(Default::default())), None);
}

// ------------------------------------------------------------------------------ retention

fn retention_config() -> GroupConfig {
    GroupConfig {
        offsets_retention_ms: 1_000,
        empty_group_removal_ms: 500,
        ..config()
    }
}

impl Harness {
    /// A simple (generation -1) commit of `offset` to t1/`partition`, applied as durable.
    fn simple_commit(&mut self, partition: i32, offset: i64) {
        let (response, writes) = self.commit(
            "",
            None,
            -1,
            vec![commit_topic("t1", &[(partition, offset, None)])],
        );
        assert_eq!(response.error_code, code(ErrorCode::None));
        self.group.apply_offsets(writes);
        self.arm_timer();
    }

    fn committed(&self) -> Vec<(String, i32, i64)> {
        let fetched = self.group.fetch_offsets(&OffsetFetchRequest {
            group_id: GROUP.to_owned(),
            topics: None,
        });
        fetched
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic;
                t.partitions
                    .into_iter()
                    .map(move |p| (topic.clone(), p.partition, p.offset))
            })
            .collect()
    }
}

#[test]
fn a_new_group_arms_its_retention_timer() {
    let mut h = Harness::with_config(retention_config());
    h.arm_timer();
    assert_eq!(
        h.armed,
        Some(500),
        "removal of an abandoned empty group is scheduled"
    );
}

#[test]
fn offsets_of_an_empty_group_expire_after_retention_then_the_group_goes() {
    let mut h = Harness::with_config(retention_config());
    h.simple_commit(0, 10);
    h.tick_to(999);
    assert_eq!(h.committed(), vec![("t1".to_owned(), 0, 10)]);
    assert!(h.expired.is_empty());
    assert!(h.group.next_deadline() <= Some(1_000));
    h.tick_to(1_000);
    assert!(h.committed().is_empty());
    assert_eq!(h.expired, vec![("t1".to_owned(), 0)]);
    assert_eq!(
        h.state(),
        GroupState::Dead,
        "an empty group with no offsets is removed"
    );
    assert!(h.take_persist(), "removal must be made durable");
    assert!(h.take_events().contains(&Event::GroupRemoved));
}

#[test]
fn offsets_do_not_expire_while_the_group_has_members() {
    let mut h = Harness::with_config(retention_config());
    h.simple_commit(0, 10);
    let members = h.form_group(1);
    h.tick_to(5_000);
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.committed().len(), 1, "a live group keeps its offsets");
    // The last member leaves: the retention clock starts now.
    h.leave(&[(members[0].as_str(), None)]);
    assert_eq!(h.state(), GroupState::Empty);
    let emptied = h.now;
    h.tick_to(emptied + 999);
    assert_eq!(h.committed().len(), 1);
    h.tick_to(emptied + 1_000);
    assert!(h.committed().is_empty());
}

#[test]
fn a_commit_while_empty_restarts_its_own_clock_and_pending_members_keep_the_group() {
    let mut h = Harness::with_config(retention_config());
    h.simple_commit(0, 1);
    h.now = 800;
    h.simple_commit(1, 2);
    h.tick_to(1_000);
    assert_eq!(h.committed(), vec![("t1".to_owned(), 1, 2)]);
    // A member id handed out (MEMBER_ID_REQUIRED) keeps the group alive while pending.
    let pending = h.member_id_required();
    h.tick_to(1_800);
    assert_eq!(
        h.committed(),
        vec![("t1".to_owned(), 1, 2)],
        "pending ids pause retention"
    );
    // The pending id expires with its session; then retention resumes.
    h.tick_to(h.now + u64::from(SESSION));
    assert!(!pending.is_empty());
    assert!(h.committed().is_empty());
    assert_eq!(h.state(), GroupState::Dead);
}

#[test]
fn a_barrier_past_half_its_timeout_names_who_it_waits_for() {
    let mut h = Harness::new();
    let members = h.form_group(2);
    // A third member joins: the barrier now waits for the two old members to rejoin.
    let newcomer = h.member_id_required();
    let _ = h.join(&newcomer, None, &["t1"], &["range"]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let _ = h.rejoin(&members[0]);
    h.take_events();
    let generation = h.generation();
    // The laggard stays alive (heartbeats) but does not rejoin.
    let half = u64::from(REBALANCE) / 2;
    for _ in 0..2 {
        h.advance(half / 3);
        assert_eq!(
            h.heartbeat(&members[1], generation),
            ErrorCode::RebalanceInProgress
        );
    }
    h.tick_to(half - 1);
    assert!(!h
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::BarrierSlow { .. })));
    assert!(
        h.armed <= Some(half),
        "the half-way warning is on the timer"
    );
    h.tick_to(half);
    let slow: Vec<Event> = h
        .take_events()
        .into_iter()
        .filter(|e| matches!(e, Event::BarrierSlow { .. }))
        .collect();
    assert_eq!(
        slow,
        vec![Event::BarrierSlow {
            waiting_for: vec![members[1].clone()],
            elapsed_ms: u64::from(REBALANCE) / 2,
        }]
    );
}

/// A group keeps one `Member` per consumer, idle or not: keep the box in jemalloc's 192-byte
/// size class, whatever the reply token.
#[test]
fn member_record_stays_small() {
    assert!(std::mem::size_of::<Member<u32>>() <= 192);
    assert!(std::mem::size_of::<Member<[u8; 64]>>() <= 192);
    assert_eq!(std::mem::size_of::<ProcessKeys>(), 0);
}

/// The leader field shares the leader member's id, also after a restart.
#[test]
fn restored_leader_shares_its_member_id() {
    let mut h = Harness::new();
    h.form_group(3);
    let record = h.group.to_record();
    let restored: Group<u32> = Group::restore(record, Vec::new(), Arc::new(config()), 0);
    let leader = restored.leader.clone().expect("a leader");
    let member = restored
        .members
        .get(&*leader)
        .expect("the leader is a member");
    assert!(Arc::ptr_eq(&leader, &member.member_id));
    assert!(Arc::ptr_eq(
        &leader,
        restored.members.get_key_value(&*leader).expect("key").0
    ));
}
