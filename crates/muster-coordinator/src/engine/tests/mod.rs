//! Engine tests: the group state machine driven by hand, with time as a plain number (no runtime,
//! no sleeping). Each test pins one rule of protocol §6; the cases follow Kafka's
//! `GroupCoordinatorTest` where Kafka has the rule. `props.rs` drives random operation sequences
//! and checks the engine's invariants after every step.
//!
//! This file is the one shared harness: the [`Harness`] owns a `Group<u32>` (reply tokens are
//! request numbers), a topic catalog, the clock and the uuid counter, and collects every reply
//! the engine hands back, failing the test at once if a token is ever answered twice. Each
//! behaviour's tests are a file of their own, named after the engine file they exercise.

mod absent;
mod admin;
mod barrier;
mod heartbeat;
mod history;
mod join;
mod journal;
mod layout;
mod leave;
mod limits;
mod offsets;
mod ownership;
mod park;
mod persist;
mod props;
mod protect;
mod purity;
mod quarantine;
mod quotas;
mod reset;
mod static_members;
mod sync;
mod timers;
mod topic_access;

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
use crate::actors::Ledger;
use crate::config::GroupConfig;
use crate::quota::Quotas;
use crate::storage::records::OffsetWrite;
use crate::storage::Mutation;

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
        // The ownership check, history and the quarantine are tested on their own
        // (`ownership.rs`, `history.rs`, `quarantine.rs`); here a commit is judged by its
        // member and generation alone, writes only offsets, and retention deletes.
        offsets: crate::config::OffsetsConfig {
            ownership_check: false,
            history_entries: 0,
            quarantine_ms: 0,
            ..crate::config::OffsetsConfig::default()
        },
        ..GroupConfig::default()
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
    /// The timer an actor would have armed from the effects' deadlines.
    armed: Option<Millis>,
    /// Offsets the engine said expired.
    expired: Vec<(String, i32)>,
    /// Every principal's quota (restarts charge loaded members here).
    quotas: Quotas,
    /// The shell's counters, as a group actor carries out the effects' ledger requests.
    ledger: Ledger,
    /// The journal mutations written with the group's record, in order.
    journal_writes: Vec<Mutation>,
    /// The batches of offset writes ([`Write::Commit`]) and best-effort writes, in order.
    commit_batches: Vec<Vec<Mutation>>,
    best_effort: Vec<Vec<Mutation>>,
}

/// A group goes as its actor stops: whatever it holds goes back to the counters.
impl Drop for Harness {
    fn drop(&mut self) {
        self.ledger.apply(self.group.release_all());
    }
}

impl Harness {
    fn new() -> Self {
        Self::with_config(config())
    }

    fn with_config(config: GroupConfig) -> Self {
        let quotas = Quotas::default();
        let ledger = Ledger::new(quotas.clone(), config.limits.max_pending_member_ids);
        Self::with_ledger(config, quotas, ledger)
    }

    /// A harness whose group draws on `ledger` (shared with other harnesses, as every group of
    /// a server shares one).
    fn with_ledger(config: GroupConfig, quotas: Quotas, ledger: Ledger) -> Self {
        let config = Arc::new(config);
        let mut catalog = HashMap::new();
        catalog.insert("t1".to_owned(), 6);
        catalog.insert("t2".to_owned(), 2);
        let mut h = Harness {
            group: Group::new(GROUP.to_owned(), Arc::clone(&config), 0),
            config,
            catalog,
            now: 0,
            uuids: 0,
            tokens: 0,
            replies: Vec::new(),
            answered: HashSet::new(),
            events: Vec::new(),
            persisted: false,
            client: ClientInfo {
                client_id: "client".into(),
                client_host: "/10.0.0.1".into(),
                access: Default::default(),
            },
            sent_joins: HashMap::new(),
            last_join: HashMap::new(),
            armed: None,
            expired: Vec::new(),
            quotas,
            ledger,
            journal_writes: Vec::new(),
            commit_batches: Vec::new(),
            best_effort: Vec::new(),
        };
        // As a group actor does when it starts.
        let first = h.group.next_deadline();
        h.arm(first);
        h
    }

    /// Keeps the timer an actor would arm: the earliest deadline reported since the last tick.
    fn arm(&mut self, deadline: Option<Millis>) {
        if let Some(d) = deadline {
            self.armed = Some(self.armed.map_or(d, |a| a.min(d)));
        }
    }

    /// Carries out what an engine call returned as a group actor would, with every write
    /// durable at once: replies (a record write's once it is "durable"), ledger requests, the
    /// timer; checks that no token is answered twice. A commit's write is reported back
    /// durable; its offsets are returned.
    fn collect(&mut self, effects: Effects<u32>) -> Vec<OffsetWrite> {
        let mut committed = Vec::new();
        let Effects {
            mut replies,
            writes,
            deadline,
            mut events,
            ledger,
            ..
        } = effects;
        self.ledger.apply(ledger);
        self.events.append(&mut events);
        self.arm(deadline);
        for write in writes {
            match write {
                Write::Record {
                    batch,
                    replies: waiting,
                } => {
                    self.persisted = true;
                    self.journal_writes.extend(
                        batch
                            .into_iter()
                            .filter(|m| matches!(m, Mutation::PutRebalances { .. })),
                    );
                    replies.extend(waiting);
                    // Durable at once: the engine may hand out the next record write.
                    let next = self.group.record_written(Ok(()));
                    committed.extend(self.collect(next));
                }
                Write::Commit { batch, commit } => {
                    self.commit_batches.push(batch);
                    committed.extend(commit.offsets.iter().cloned());
                    let done = self.group.commit_written(commit, Ok(()));
                    self.collect(done);
                }
                Write::BestEffort(batch) => {
                    for m in &batch {
                        if let Mutation::DeleteOffsets { partitions, .. } = m {
                            self.expired.extend(partitions.iter().cloned());
                        }
                    }
                    self.best_effort.push(batch);
                }
            }
        }
        self.record_replies(replies);
        committed
    }

    fn record_replies(&mut self, replies: Vec<(u32, Response)>) {
        for (token, response) in replies {
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
        let grants = self
            .ledger
            .reserve_for_join(&self.group, &req, &self.client);
        let effects = self.group.join(cx, req, &self.client, fresh, grants, token);
        self.collect(effects);
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
        let effects = self.group.sync(cx, req, token);
        self.collect(effects);
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
        self.leave_req(req)
    }

    fn leave_req(&mut self, req: LeaveGroupRequest) -> LeaveGroupResponse {
        let token = self.next_token();
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        let effects = self.group.leave(cx, req, token);
        self.collect(effects);
        match self.reply_for(token) {
            Some(Response::LeaveGroup(r)) => r,
            other => panic!("not a LeaveGroup answer: {other:?}"),
        }
    }

    fn commit(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        topics: Vec<OffsetCommitTopic>,
    ) -> (OffsetCommitResponse, Vec<OffsetWrite>) {
        let token = self.next_token();
        let effects = self.group.commit_offsets(
            self.now,
            OffsetCommitRequest {
                group_id: GROUP.to_owned(),
                generation_id: generation,
                member_id: member_id.to_owned(),
                group_instance_id: instance.map(str::to_owned),
                topics,
            },
            &self.client,
            token,
        );
        let written = self.collect(effects);
        match self.reply_for(token) {
            Some(Response::OffsetCommit(r)) => (r, written),
            other => panic!("not an OffsetCommit answer: {other:?}"),
        }
    }

    /// DeleteGroups on the group: its code, the deletion's units given back.
    fn delete(&mut self) -> ErrorCode {
        match self.group.delete(self.now) {
            Ok(effects) => {
                let deletes = |w: &Write<u32>| match w {
                    Write::Record { batch, .. } => matches!(
                        batch.as_slice(),
                        [Mutation::DeleteGroup { group_id }] if group_id == GROUP
                    ),
                    _ => false,
                };
                assert!(effects.writes.iter().any(deletes), "{effects:?}");
                self.collect(effects);
                ErrorCode::None
            }
            Err(code) => code,
        }
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
        let effects = self.group.tick(cx);
        self.collect(effects);
    }

    fn advance(&mut self, ms: Millis) {
        self.tick_to(self.now + ms);
    }

    fn topics_changed(&mut self, topics: &[&str]) {
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        let effects = self.group.topics_changed(cx, &strings(topics));
        self.collect(effects);
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

    /// `n` dynamic members got MEMBER_ID_REQUIRED and joined, and the barrier closed: the group
    /// is CompletingRebalance and nobody has synced. Returns the member ids in the order they
    /// were handed out.
    fn join_all(&mut self, n: usize) -> Vec<String> {
        let ids: Vec<String> = (0..n).map(|_| self.member_id_required()).collect();
        for id in &ids {
            self.rejoin(id);
        }
        self.complete_rebalance();
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
        let (group, counted) = Group::restore(record, offsets, Arc::clone(&self.config), self.now);
        // The old process's units went with it; the restored group counts what it holds.
        let mut old = std::mem::replace(&mut self.group, group);
        self.ledger.apply(old.release_all());
        self.ledger.apply(counted);
        self.replies.clear();
        self.armed = None;
        self.arm(self.group.next_deadline());
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
