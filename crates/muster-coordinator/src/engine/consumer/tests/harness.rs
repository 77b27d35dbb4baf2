//! The consumer-protocol engine's test harness: a `Group<u32>` driven by hand, time a plain
//! number, every write durable at once, every reply collected (a token answered twice fails
//! the test).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use muster_protocol::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ErrorCode,
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic, Response, TopicPartitions,
};
use uuid::Uuid;

use crate::config::GroupConfig;
use crate::engine::{ClientInfo, Ctx, Effects, Event, Grant, Group, Millis, Write};
use crate::storage::records::GroupRecord;
use crate::storage::Mutation;

pub const GROUP: &str = "cg";
pub const SESSION: u32 = 45_000;
pub const REBALANCE: i32 = 30_000;

pub struct Cg {
    pub group: Group<u32>,
    pub config: Arc<GroupConfig>,
    pub catalog: HashMap<String, i32>,
    pub now: Millis,
    tokens: u32,
    uuids: u128,
    answered: HashSet<u32>,
    pub events: Vec<Event>,
    /// The last record written.
    pub record: Option<GroupRecord>,
    pub client: ClientInfo,
    /// Keep the assignment jobs the engine hands out (in `jobs`) instead of running them.
    pub hold_jobs: bool,
    pub jobs: Vec<crate::engine::consumer::AssignmentJob>,
    /// Keep record writes in flight (their waiting replies in `records`) until
    /// [`Cg::land_record`] instead of making them durable at once.
    pub hold_records: bool,
    records: Vec<Vec<(u32, Response)>>,
    /// Held heartbeats (`wait.rs`): token → member id; and their answers once they came.
    held: HashMap<u32, String>,
    late: HashMap<u32, ConsumerGroupHeartbeatResponse>,
}

/// What [`Cg::send`] returns for a heartbeat the engine holds (not a wire code).
pub const HELD: i16 = i16::MIN;

pub fn tp(topic: &str, partitions: &[i32]) -> TopicPartitions {
    TopicPartitions {
        topic: topic.to_owned(),
        partitions: partitions.to_vec(),
    }
}

/// A set of partitions as `topic → partitions`.
pub fn set(of: &[TopicPartitions]) -> BTreeMap<String, BTreeSet<i32>> {
    let mut out: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for t in of {
        if !t.partitions.is_empty() {
            out.entry(t.topic.clone())
                .or_default()
                .extend(t.partitions.iter().copied());
        }
    }
    out
}

pub fn count(of: &[TopicPartitions]) -> usize {
    of.iter().map(|t| t.partitions.len()).sum()
}

impl Cg {
    pub fn new() -> Self {
        Self::with_config(GroupConfig::default())
    }

    pub fn with_config(config: GroupConfig) -> Self {
        let config = Arc::new(config);
        let mut catalog = HashMap::new();
        catalog.insert("foo".to_owned(), 6);
        catalog.insert("bar".to_owned(), 3);
        Cg {
            group: Group::new(GROUP.to_owned(), Arc::clone(&config), 0),
            config,
            catalog,
            now: 0,
            tokens: 0,
            uuids: 0,
            answered: HashSet::new(),
            events: Vec::new(),
            record: None,
            client: ClientInfo {
                client_id: "client".into(),
                client_host: "/10.0.0.1".into(),
                access: Default::default(),
            },
            hold_jobs: false,
            jobs: Vec::new(),
            hold_records: false,
            records: Vec::new(),
            held: HashMap::new(),
            late: HashMap::new(),
        }
    }

    /// Carries out effects as a group actor would, every write durable at once; returns the
    /// replies.
    pub fn collect(&mut self, effects: Effects<u32>) -> Vec<(u32, Response)> {
        let replies = self.gather(effects);
        for (token, response) in &replies {
            assert!(self.answered.insert(*token), "token {token} answered twice");
            if let (true, Response::ConsumerGroupHeartbeat(r)) =
                (self.held.contains_key(token), response)
            {
                self.late.insert(*token, r.clone());
            }
        }
        replies
    }

    fn gather(&mut self, effects: Effects<u32>) -> Vec<(u32, Response)> {
        let Effects {
            mut replies,
            writes,
            mut events,
            assignment,
            ..
        } = effects;
        self.events.append(&mut events);
        if let Some(job) = assignment {
            if self.hold_jobs {
                self.jobs.push(job);
            } else {
                let computed = job.run();
                let cx = Ctx {
                    now: self.now,
                    topics: &self.catalog,
                };
                let done = self.group.target_computed(cx, computed);
                replies.extend(self.gather(done));
            }
        }
        for write in writes {
            match write {
                Write::Record {
                    batch,
                    replies: waiting,
                } => {
                    for m in batch {
                        if let Mutation::PutGroup(r) = m {
                            self.record = Some(r);
                        }
                    }
                    if self.hold_records {
                        self.records.push(waiting);
                        continue;
                    }
                    replies.extend(waiting);
                    let next = self.group.record_written(Ok(()));
                    replies.extend(self.gather(next));
                }
                Write::Commit { commit, .. } => {
                    let done = self.group.commit_written(commit, Ok(()));
                    replies.extend(self.gather(done));
                }
                Write::BestEffort(_) => {}
            }
        }
        replies
    }

    /// Makes the oldest record write held by `hold_records` durable; the replies that went out
    /// then (its own, and any that waited for it).
    pub fn land_record(&mut self) -> Vec<(u32, Response)> {
        assert!(!self.records.is_empty(), "no record write in flight");
        let mut replies = self.records.remove(0);
        let next = self.group.record_written(Ok(()));
        replies.extend(self.gather(next));
        for (token, response) in &replies {
            assert!(self.answered.insert(*token), "token {token} answered twice");
            if let (true, Response::ConsumerGroupHeartbeat(r)) =
                (self.held.contains_key(token), response)
            {
                self.late.insert(*token, r.clone());
            }
        }
        replies
    }

    /// Record writes held in flight (`hold_records`).
    pub fn records_in_flight(&self) -> usize {
        self.records.len()
    }

    pub fn request(member_id: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest {
            group_id: GROUP.to_owned(),
            member_id: member_id.to_owned(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            ..ConsumerGroupHeartbeatRequest::default()
        }
    }

    /// A first heartbeat (epoch 0) subscribing to `topics`.
    pub fn join_request(member_id: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest {
            rebalance_timeout_ms: REBALANCE,
            subscribed_topics: Some(topics.iter().map(|t| (*t).to_owned()).collect()),
            owned_partitions: Some(Vec::new()),
            ..Self::request(member_id, 0)
        }
    }

    /// Sends one heartbeat; returns its answer.
    pub fn send(&mut self, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
        let member = req.member_id.clone();
        self.tokens += 1;
        let token = self.tokens;
        self.uuids += 1;
        let fresh = Uuid::from_u128(self.uuids);
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        let effects =
            self.group
                .consumer_heartbeat(cx, req, &self.client, Grant::NotAsked, fresh, token);
        let replies = self.collect(effects);
        let mut mine = replies.into_iter().filter(|(t, _)| *t == token);
        match mine.next() {
            Some((_, Response::ConsumerGroupHeartbeat(r))) => r,
            None => {
                // Held: its member waits for a partition (`wait.rs`).
                self.held.insert(token, member);
                ConsumerGroupHeartbeatResponse {
                    error_code: HELD,
                    ..ConsumerGroupHeartbeatResponse::default()
                }
            }
            other => panic!("not a heartbeat answer: {other:?}"),
        }
    }

    /// The answer to a held heartbeat of `member_id`, once it came.
    pub fn late_answer(&mut self, member_id: &str) -> Option<ConsumerGroupHeartbeatResponse> {
        let token = self
            .held
            .iter()
            .find(|(_, m)| m.as_str() == member_id)
            .map(|(t, _)| *t)?;
        let answer = self.late.remove(&token)?;
        self.held.remove(&token);
        Some(answer)
    }

    /// Whether `member_id` has a heartbeat held.
    pub fn is_held(&self, member_id: &str) -> bool {
        self.held.values().any(|m| m == member_id)
    }

    pub fn join(&mut self, member_id: &str, topics: &[&str]) -> ConsumerGroupHeartbeatResponse {
        let r = self.send(Self::join_request(member_id, topics));
        assert_eq!(r.error_code, 0, "join of {member_id}: {r:?}");
        r
    }

    /// A heartbeat at `epoch` reporting `owned`.
    pub fn beat(
        &mut self,
        member_id: &str,
        epoch: i32,
        owned: &[TopicPartitions],
    ) -> ConsumerGroupHeartbeatResponse {
        self.send(ConsumerGroupHeartbeatRequest {
            owned_partitions: Some(owned.to_vec()),
            ..Self::request(member_id, epoch)
        })
    }

    pub fn tick(&mut self) {
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        let effects = self.group.tick(cx);
        self.collect(effects);
    }

    pub fn set_partitions(&mut self, topic: &str, partitions: i32) {
        self.catalog.insert(topic.to_owned(), partitions);
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        let effects = self.group.topics_changed(cx, &[topic.to_owned()]);
        self.collect(effects);
    }

    /// A reply token never handed out before.
    pub fn next_token(&mut self) -> u32 {
        self.tokens += 1;
        self.tokens
    }

    pub fn commit(&mut self, member_id: &str, generation: i32) -> i16 {
        self.tokens += 1;
        let token = self.tokens;
        let req = OffsetCommitRequest {
            group_id: GROUP.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            group_instance_id: None,
            topics: vec![OffsetCommitTopic {
                topic: "foo".to_owned(),
                partitions: vec![OffsetCommitPartition {
                    partition: 0,
                    offset: 42,
                    metadata: None,
                }],
            }],
        };
        let client = self.client.clone();
        let effects = self.group.commit_offsets(self.now, req, &client, token);
        let replies = self.collect(effects);
        match replies.into_iter().find(|(t, _)| *t == token) {
            Some((_, Response::OffsetCommit(r))) => r.error_code,
            other => panic!("no commit answer: {other:?}"),
        }
    }

    /// Runs the member's loop once: heartbeats reporting what it owned before the answer, and
    /// returns what it owns after (the answer's assignment when it carries one).
    /// A client sends its next heartbeat only once the last was answered: a member whose
    /// heartbeat is held applies its answer if it came, else does nothing this round.
    pub fn step(&mut self, member_id: &str, epoch: &mut i32, owned: &mut Vec<TopicPartitions>) {
        let r = if self.is_held(member_id) {
            match self.late_answer(member_id) {
                Some(r) => r,
                None => return,
            }
        } else {
            let r = self.beat(member_id, *epoch, owned);
            if r.error_code == HELD {
                return;
            }
            r
        };
        assert_eq!(r.error_code, 0, "{member_id}: {r:?}");
        *epoch = r.member_epoch;
        if let Some(a) = r.assignment {
            *owned = a;
        }
    }
}

pub fn code(c: ErrorCode) -> i16 {
    c.code()
}

/// Classic requests, for groups that change protocol.
impl Cg {
    pub fn classic_join(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        owned: &[TopicPartitions],
    ) -> muster_protocol::JoinGroupResponse {
        match self.classic_join_held(member_id, instance, owned) {
            Some(r) => r,
            None => panic!("the join of {member_id:?} is held"),
        }
    }

    /// A JoinGroup, which a barrier may hold (`None`).
    pub fn classic_join_held(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        owned: &[TopicPartitions],
    ) -> Option<muster_protocol::JoinGroupResponse> {
        self.tokens += 1;
        let token = self.tokens;
        self.uuids += 1;
        let req = muster_protocol::JoinGroupRequest {
            group_id: GROUP.into(),
            member_id: member_id.into(),
            group_instance_id: instance.map(str::to_owned),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            topics: vec!["foo".into()],
            assignors: vec![muster_protocol::AssignorMetadata {
                name: "cooperative-sticky".into(),
                user_data: vec![],
            }],
            owned_partitions: owned.to_vec(),
            reason: None,
        };
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        let client = self.client.clone();
        let effects = self.group.join(
            cx,
            req,
            &client,
            Uuid::from_u128(self.uuids),
            Default::default(),
            token,
        );
        match self.collect(effects).into_iter().find(|(t, _)| *t == token) {
            Some((_, Response::JoinGroup(r))) => Some(r),
            None => None,
            other => panic!("not a join answer: {other:?}"),
        }
    }

    pub fn classic_sync(
        &mut self,
        member_id: &str,
        generation: i32,
        assignments: Vec<muster_protocol::MemberAssignment>,
    ) -> muster_protocol::SyncGroupResponse {
        self.tokens += 1;
        let token = self.tokens;
        let req = muster_protocol::SyncGroupRequest {
            group_id: GROUP.into(),
            generation_id: generation,
            member_id: member_id.into(),
            group_instance_id: None,
            assignor: None,
            assignments,
        };
        let cx = Ctx {
            now: self.now,
            topics: &self.catalog,
        };
        let effects = self.group.sync(cx, req, token);
        match self.collect(effects).into_iter().find(|(t, _)| *t == token) {
            Some((_, Response::SyncGroup(r))) => r,
            other => panic!("no sync answer: {other:?}"),
        }
    }

    pub fn classic_heartbeat(&mut self, member_id: &str, generation: i32) -> i16 {
        let req = muster_protocol::HeartbeatRequest {
            group_id: GROUP.into(),
            generation_id: generation,
            member_id: member_id.into(),
            group_instance_id: None,
        };
        self.group.heartbeat(self.now, &req).code()
    }
}
