//! The consumer protocol's group engine (protocol-v1 §7, Kafka 4's KIP-848) driven by arbitrary
//! sequences of ConsumerGroupHeartbeats, leaves, offset commits, clock advances, timer ticks,
//! topic growth, crash-restarts, assignment jobs run late or out of order, and classic members
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) before, during and after an online upgrade.
//!
//! Each of a few client slots is one process at a time (a `restart` flag starts a new one,
//! with a new member id, or the same instance id for a static slot), and believes it owns what
//! its answers told it: an honest client reports exactly that, applies every answer (gives up
//! what the answer no longer lists, takes what it newly lists), and drops everything when it
//! is fenced, leaves, or is removed by the server (its own session timer). A dishonest
//! heartbeat (a stale or random epoch, a made-up owned set) taints the slot until it rejoins
//! from scratch. Invariants checked after every step:
//!
//! - among honest clients no partition is believed owned by two at once (the protocol's
//!   safety property: a partition reaches its next owner only after the previous one stopped
//!   reporting it, or was removed), and while the group speaks the consumer protocol, every
//!   partition an honest client believes it owns is one the server lists under that member;
//! - the server's own view (ConsumerGroupDescribe) never lists a partition under two members;
//! - the group epoch never decreases, even across a restart (which restores the last record
//!   written; clients keep their beliefs); every member's epoch is at most the assignment
//!   epoch, which is at most the group epoch;
//! - every reply token is answered exactly once; a ConsumerGroupHeartbeat held for a member
//!   waiting for a partition (the long poll, `wait.rs`) is answered by the end of its
//!   heartbeat interval (at most 10 s): after a tick at or past that, none is still held; a
//!   ConsumerGroupHeartbeat answered NONE carries an epoch ≥ 0 unless it was a leave; an offset
//!   commit at the epoch the member last heard, of a partition its OwnershipEpochs lists, is
//!   accepted, and a commit is written exactly when it is accepted;
//! - after a tick at `now`, no deadline is left at or before `now`.
#![no_main]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use muster_coordinator::engine::consumer::AssignmentJob;
use muster_coordinator::engine::{ClientInfo, Ctx, Effects, Grant, Group, Write};
use muster_coordinator::storage::{GroupRecord, Mutation, OffsetWrite};
use muster_coordinator::{ConsumerConfig, GroupConfig};
use muster_protocol::{
    AssignorMetadata, ConsumerGroupHeartbeatRequest, ErrorCode, HeartbeatRequest, JoinGroupRequest,
    JoinedMember, LeaveGroupRequest, LeavingMember, MemberAssignment, OffsetCommitPartition,
    OffsetCommitRequest, OffsetCommitTopic, OwnershipEpochsRequest, Response, SyncGroupRequest,
    TopicPartitions,
};
use uuid::Uuid;

const GROUP: &str = "g";
/// Client slots: 0 and 1 dynamic, 2 and 3 static.
const SLOTS: usize = 4;
/// Topics a subscription may name; `t2` does not exist until it grows, `zz` never does.
const NAMES: [&str; 4] = ["t0", "t1", "t2", "zz"];
const REGEXES: [&str; 7] = ["t.*", "t[12]", "t2", ".*", "t.*", "(", ""];
const SERVER_ASSIGNORS: [&str; 6] = ["uniform", "range", "uniform", "range", "bogus", ""];
const MAX_PARTITIONS: i32 = 8;
/// Most ops one input runs.
const MAX_OPS: usize = 256;
/// The longest the engine holds a ConsumerGroupHeartbeat (`engine/consumer/wait.rs`).
const MAX_HOLD_MS: u64 = 10_000;

/// The engine's context at the model's clock (a macro, so that it borrows only the fields it
/// reads while the group is borrowed mutably).
macro_rules! cx {
    ($model:expr) => {
        Ctx {
            now: $model.now,
            topics: &$model.catalog,
        }
    };
}

/// A partition, and a set of them as a client holds it.
type Tp = (String, i32);
type Owned = BTreeSet<Tp>;

/// What a heartbeat may say about the subscription (`None` fields: unchanged).
#[derive(Debug)]
struct Sub {
    /// A mask over [`NAMES`].
    topics: Option<u8>,
    regex: Option<u8>,
    assignor: Option<u8>,
}

#[derive(Debug)]
enum Op {
    /// A ConsumerGroupHeartbeat at epoch 0. `restart`: a new process (a new member id, or a
    /// static slot's new incarnation); else a rejoin with the same id. The client owns nothing
    /// when it joins.
    Join {
        who: u8,
        restart: bool,
        empty_id: bool,
        sub: Sub,
        rebalance: u8,
        lose_answer: bool,
    },
    /// A ConsumerGroupHeartbeat. Honest: at the epoch the client last heard, reporting what it
    /// owns (or not reporting); a fenced honest client rejoins instead. Dishonest: `epoch`
    /// picks a stale, ahead, previous or random epoch and `owned_mask` a made-up owned set.
    /// `lose_answer`: the server handles it but the answer never arrives.
    Heartbeat {
        who: u8,
        honest: bool,
        report_owned: bool,
        epoch: u8,
        owned_mask: u16,
        change: Option<Sub>,
        lose_answer: bool,
    },
    /// Epoch -1, or -2 (a static slot's temporary leave); a classic slot sends LeaveGroup.
    Leave {
        who: u8,
        temporary: bool,
    },
    Commit {
        who: u8,
        delta: i8,
    },
    Advance {
        ms: u16,
    },
    /// A tick at the group's next deadline.
    Tick,
    /// Every client takes one honest turn, as its loop would: a consumer client that is a
    /// member heartbeats reporting what it owns; a classic one heartbeats, and rejoins and
    /// syncs when told to rebalance.
    Round,
    /// A topic gains partitions (`t2` is created when it first grows).
    Grow {
        topic: u8,
        by: u8,
    },
    /// A crash and restart: the group is restored from the last record written; clients keep
    /// what they believe; held classic requests die with their connections; assignment jobs
    /// still out come back to the new group (as when a group actor reloads its group).
    Restart,
    /// Hands back one held assignment job's result.
    RunJob {
        which: u8,
    },
    /// A JoinGroup of a cooperative classic client (a protocol switch is a new process).
    ClassicJoin {
        who: u8,
        restart: bool,
        topics: u8,
    },
    ClassicSync {
        who: u8,
    },
    ClassicHeartbeat {
        who: u8,
        delta: i8,
    },
}

/// Three bytes, each field mostly absent or valid.
impl<'a> Arbitrary<'a> for Sub {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let [topics, regex, assignor] = u.arbitrary::<[u8; 3]>()?;
        Ok(Sub {
            topics: (topics & 0x80 == 0).then_some(topics & 0x0f),
            regex: (regex >= 0xa0).then_some(regex),
            assignor: (assignor >= 0x80).then_some(assignor),
        })
    }
}

/// A one-byte kind (heartbeats the most frequent), then only the bytes that kind reads: short
/// inputs make long sequences.
impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let kind = u.arbitrary::<u8>()? % 32;
        Ok(match kind {
            0..=7 => {
                let who = u.arbitrary()?;
                let flags = u.arbitrary::<u8>()?;
                let honest = flags & 0b11 != 0b11;
                let (epoch, owned_mask) = if honest {
                    (0, 0)
                } else {
                    (u.arbitrary()?, u.arbitrary()?)
                };
                let change = if flags & 0x40 != 0 {
                    Some(u.arbitrary()?)
                } else {
                    None
                };
                Op::Heartbeat {
                    who,
                    honest,
                    report_owned: flags & 0b1100 != 0,
                    epoch,
                    owned_mask,
                    change,
                    lose_answer: flags & 0x30 == 0x30,
                }
            }
            10..=13 => {
                let who = u.arbitrary()?;
                let flags = u.arbitrary::<u8>()?;
                Op::Join {
                    who,
                    restart: flags & 1 != 0,
                    empty_id: flags & 0b110 == 0b110,
                    sub: u.arbitrary()?,
                    rebalance: flags >> 4,
                    lose_answer: flags & 0b1000 != 0 && flags & 0x80 != 0,
                }
            }
            14 | 15 => Op::Leave {
                who: u.arbitrary()?,
                temporary: u.arbitrary()?,
            },
            16 | 17 => Op::Commit {
                who: u.arbitrary()?,
                delta: u.arbitrary()?,
            },
            18 | 19 => Op::Advance { ms: u.arbitrary()? },
            8 | 9 | 31 => Op::Round,
            20 => Op::Tick,
            21 => {
                let b = u.arbitrary::<u8>()?;
                Op::Grow {
                    topic: b & 0x7f,
                    by: b >> 7,
                }
            }
            22 => Op::Restart,
            23 | 24 => Op::RunJob {
                which: u.arbitrary()?,
            },
            25 | 26 => {
                let who = u.arbitrary()?;
                let b = u.arbitrary::<u8>()?;
                Op::ClassicJoin {
                    who,
                    restart: b & 0x80 != 0,
                    topics: b & 0x07,
                }
            }
            27 | 28 => Op::ClassicSync {
                who: u.arbitrary()?,
            },
            _ => Op::ClassicHeartbeat {
                who: u.arbitrary()?,
                delta: u.arbitrary()?,
            },
        })
    }
}

#[derive(Debug)]
struct Input {
    initial_delay: bool,
    short_session: bool,
    /// 0: every target is an assignment job; 1: only a larger one; else none.
    inline: u8,
    /// Run assignment jobs at once instead of holding them for `RunJob`.
    auto_jobs: bool,
    ops: Vec<Op>,
}

/// One byte of settings, then ops until the data runs out (a derived `Vec` would spend a
/// keep-going byte per op, and end the sequence at the first even one).
impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let settings = u.arbitrary::<u8>()?;
        let mut ops = Vec::new();
        while !u.is_empty() && ops.len() < MAX_OPS {
            ops.push(u.arbitrary()?);
        }
        Ok(Input {
            initial_delay: settings & 1 != 0,
            short_session: settings & 2 != 0,
            inline: (settings >> 2) & 3,
            auto_jobs: settings & 0x10 != 0,
            ops,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Consumer,
    Classic,
}

/// One client process (see the module docs).
#[derive(Debug)]
struct Slot {
    protocol: Protocol,
    instance: Option<String>,
    incarnation: u32,
    /// The member id it uses (`None`: it asks the server for one).
    id: Option<String>,
    /// Its member epoch (consumer) or generation (classic), as last heard.
    epoch: i32,
    previous_epoch: i32,
    owned: Owned,
    honest: bool,
    /// No answer was lost since it last heard its epoch: the server holds the same epoch.
    exact: bool,
    /// It must (re)join before anything else: it was fenced, removed, or left.
    fenced: bool,
    /// The subscription it last asked for (a rejoin repeats it): topic names, regex, assignor.
    topics: Option<Vec<String>>,
    regex: Option<String>,
    assignor: Option<String>,
    /// A request held by the server (a classic JoinGroup or SyncGroup, a ConsumerGroupHeartbeat
    /// long poll): an honest client sends nothing else until it is answered.
    busy: bool,
    /// A classic leader's view of its generation: the members to assign.
    leader_view: Option<(i32, Vec<JoinedMember>)>,
    /// The topics a classic client subscribes to (a mask over `t0`..`t2`).
    classic_topics: u8,
}

impl Slot {
    fn new(index: usize) -> Self {
        Slot {
            protocol: Protocol::Consumer,
            instance: (index >= 2).then(|| format!("s{index}")),
            incarnation: 0,
            id: None,
            epoch: 0,
            previous_epoch: 0,
            owned: Owned::new(),
            honest: true,
            exact: true,
            fenced: true,
            topics: None,
            regex: None,
            assignor: None,
            busy: false,
            leader_view: None,
            classic_topics: 0,
        }
    }

    /// A new process in this slot: it owns nothing and has no member id yet (a static one
    /// keeps its instance id).
    fn restart(&mut self, protocol: Protocol) {
        self.protocol = protocol;
        self.incarnation += 1;
        self.id = None;
        self.epoch = 0;
        self.previous_epoch = 0;
        self.owned.clear();
        self.honest = true;
        self.exact = true;
        self.fenced = true;
        self.busy = false;
        self.leader_view = None;
    }

    /// Drops everything it owns (fenced, removed, leaving): it must rejoin.
    fn lose_all(&mut self) {
        self.owned.clear();
        self.fenced = true;
        self.leader_view = None;
    }
}

/// What an answer is for. An answer to a process that is gone (its slot restarted) is checked
/// and dropped.
#[derive(Debug)]
enum Pending {
    Consumer {
        slot: usize,
        incarnation: u32,
        leave: bool,
        lose_answer: bool,
        /// When it was sent: a held one is answered within its hold.
        sent: u64,
    },
    ClassicJoin {
        slot: usize,
        incarnation: u32,
    },
    ClassicSync {
        slot: usize,
        incarnation: u32,
    },
    ClassicLeave {
        slot: usize,
        incarnation: u32,
    },
    Commit,
}

struct Model {
    group: Group<u32>,
    config: Arc<GroupConfig>,
    now: u64,
    catalog: HashMap<String, i32>,
    client: ClientInfo,
    slots: Vec<Slot>,
    next_token: u32,
    /// Tokens handed out and not answered yet, with what they are for.
    outstanding: HashMap<u32, Pending>,
    auto_jobs: bool,
    jobs: Vec<AssignmentJob>,
    /// What a crash keeps: the last record written and the offsets committed.
    durable: Option<GroupRecord>,
    durable_offsets: Vec<OffsetWrite>,
    /// The highest group epoch seen.
    epoch_seen: i32,
}

fn to_wire(owned: &Owned) -> Vec<TopicPartitions> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, p) in owned {
        by_topic.entry(topic).or_default().push(*p);
    }
    by_topic
        .into_iter()
        .map(|(topic, partitions)| TopicPartitions {
            topic: topic.to_owned(),
            partitions,
        })
        .collect()
}

fn from_wire(partitions: &[TopicPartitions]) -> Owned {
    partitions
        .iter()
        .flat_map(|tp| tp.partitions.iter().map(|&p| (tp.topic.clone(), p)))
        .collect()
}

fn subset(mask: u8, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect()
}

fn pick<'a>(choices: &[&'a str], i: u8) -> &'a str {
    choices[usize::from(i) % choices.len()]
}

/// The engine answers only codes the protocol knows.
fn code(c: i16) -> ErrorCode {
    ErrorCode::from_code(c).unwrap_or_else(|| panic!("unknown error code {c}"))
}

impl Model {
    fn new(input: &Input) -> Self {
        let config = Arc::new(GroupConfig {
            initial_rebalance_delay_ms: if input.initial_delay { 3_000 } else { 0 },
            consumer: ConsumerConfig {
                session_timeout_ms: if input.short_session { 10_000 } else { 45_000 },
                inline_assignment_limit: match input.inline % 3 {
                    0 => 0,
                    1 => 6,
                    _ => 100_000,
                },
                ..ConsumerConfig::default()
            },
            ..GroupConfig::default()
        });
        let catalog = HashMap::from([("t0".to_owned(), 2), ("t1".to_owned(), 3)]);
        Model {
            group: Group::new(GROUP.to_owned(), Arc::clone(&config), 0),
            config,
            now: 0,
            catalog,
            client: ClientInfo {
                client_id: "fuzz".into(),
                client_host: "127.0.0.1".into(),
                access: Default::default(),
            },
            slots: (0..SLOTS).map(Slot::new).collect(),
            next_token: 0,
            outstanding: HashMap::new(),
            auto_jobs: input.auto_jobs,
            jobs: Vec::new(),
            durable: None,
            durable_offsets: Vec::new(),
            epoch_seen: 0,
        }
    }

    fn token(&mut self, pending: Pending) -> u32 {
        self.next_token += 1;
        self.outstanding.insert(self.next_token, pending);
        self.next_token
    }

    /// Every partition that exists, in a fixed order.
    fn all_partitions(&self) -> Vec<Tp> {
        let mut all: Vec<Tp> = self
            .catalog
            .iter()
            .flat_map(|(t, &n)| (0..n).map(move |p| (t.clone(), p)))
            .collect();
        all.sort();
        all
    }

    /// Carries out an engine call's effects as the group actor does, every write durable at
    /// once; answers are checked and applied to the clients.
    fn carry_out(&mut self, effects: Effects<u32>) {
        let Effects {
            replies,
            writes,
            assignment,
            ..
        } = effects;
        let mut replies = replies;
        let mut nested = Vec::new();
        for write in writes {
            match write {
                Write::Record {
                    batch,
                    replies: waiting,
                } => {
                    self.keep(batch);
                    replies.extend(waiting);
                    nested.push(self.group.record_written(Ok(())));
                }
                Write::Commit { batch, commit } => {
                    self.keep(batch);
                    nested.push(self.group.commit_written(commit, Ok(())));
                }
                Write::BestEffort(_) => {}
            }
        }
        for (token, response) in replies {
            let Some(pending) = self.outstanding.remove(&token) else {
                panic!("reply token {token} answered twice or never issued: {response:?}");
            };
            self.learn(pending, &response);
        }
        for next in nested {
            self.carry_out(next);
        }
        if let Some(job) = assignment {
            if self.auto_jobs {
                let computed = job.run();
                let done = self.group.target_computed(cx!(self), computed);
                self.carry_out(done);
            } else {
                self.jobs.push(job);
            }
        }
    }

    fn keep(&mut self, batch: Vec<Mutation>) {
        for m in batch {
            match m {
                Mutation::PutGroup(record) => self.durable = Some(record),
                // A removed group's last state: a restart must still not go back below an
                // epoch already served.
                Mutation::DeleteGroup { .. } => self.durable = Some(self.group.to_record()),
                Mutation::PutOffsets { offsets, .. } => self.durable_offsets.extend(offsets),
                _ => {}
            }
        }
    }

    /// A client applies its answer.
    fn learn(&mut self, pending: Pending, response: &Response) {
        let generation = self.group.generation();
        match pending {
            Pending::Consumer {
                slot,
                incarnation,
                leave,
                lose_answer,
                sent: _,
            } => {
                let Response::ConsumerGroupHeartbeat(r) = response else {
                    panic!("not a heartbeat answer: {response:?}");
                };
                let error = code(r.error_code);
                if error == ErrorCode::None && !leave {
                    assert!(
                        r.member_epoch >= 0,
                        "NONE with epoch {}: {r:?}",
                        r.member_epoch
                    );
                    assert!(!r.member_id.is_empty(), "NONE without a member id: {r:?}");
                    assert!(
                        r.member_epoch <= generation,
                        "answered epoch {} above the group epoch {generation}",
                        r.member_epoch
                    );
                }
                let s = &mut self.slots[slot];
                if s.incarnation != incarnation {
                    return;
                }
                s.busy = false;
                if lose_answer || leave {
                    return;
                }
                match error {
                    ErrorCode::None => {
                        s.id = Some(r.member_id.clone());
                        if r.member_epoch != s.epoch {
                            s.previous_epoch = s.epoch;
                        }
                        s.epoch = r.member_epoch;
                        s.exact = true;
                        s.fenced = false;
                        if let Some(assignment) = &r.assignment {
                            s.owned = from_wire(assignment);
                        }
                    }
                    ErrorCode::FencedMemberEpoch | ErrorCode::UnknownMemberId => {
                        s.lose_all();
                        s.epoch = 0;
                    }
                    _ => {}
                }
            }
            Pending::ClassicJoin { slot, incarnation } => {
                let Response::JoinGroup(j) = response else {
                    panic!("not a join answer: {response:?}");
                };
                let s = &mut self.slots[slot];
                if s.incarnation != incarnation {
                    return;
                }
                s.busy = false;
                match code(j.error_code) {
                    ErrorCode::None => {
                        s.id = Some(j.member_id.clone());
                        s.previous_epoch = s.epoch;
                        s.epoch = j.generation_id;
                        s.exact = true;
                        s.fenced = false;
                        s.leader_view =
                            (!j.members.is_empty()).then(|| (j.generation_id, j.members.clone()));
                    }
                    ErrorCode::MemberIdRequired => s.id = Some(j.member_id.clone()),
                    ErrorCode::UnknownMemberId | ErrorCode::FencedInstanceId => {
                        s.lose_all();
                        s.id = None;
                    }
                    ErrorCode::IllegalGeneration => s.lose_all(),
                    _ => {}
                }
            }
            Pending::ClassicSync { slot, incarnation } => {
                let Response::SyncGroup(sg) = response else {
                    panic!("not a sync answer: {response:?}");
                };
                let s = &mut self.slots[slot];
                if s.incarnation != incarnation {
                    return;
                }
                s.busy = false;
                match code(sg.error_code) {
                    // Cooperative: it gives up what is no longer listed, takes what is new.
                    ErrorCode::None => s.owned = from_wire(&sg.partitions),
                    ErrorCode::UnknownMemberId | ErrorCode::FencedInstanceId => {
                        s.lose_all();
                        s.id = None;
                    }
                    ErrorCode::IllegalGeneration => s.lose_all(),
                    _ => {}
                }
            }
            Pending::ClassicLeave { slot, incarnation } => {
                let Response::LeaveGroup(_) = response else {
                    panic!("not a leave answer: {response:?}");
                };
                let s = &mut self.slots[slot];
                if s.incarnation == incarnation {
                    s.busy = false;
                }
            }
            Pending::Commit => {
                let Response::OffsetCommit(_) = response else {
                    panic!("not a commit answer: {response:?}");
                };
            }
        }
    }

    /// Sends one ConsumerGroupHeartbeat; its client waits while it is held.
    fn send_heartbeat(
        &mut self,
        slot: usize,
        req: ConsumerGroupHeartbeatRequest,
        lose_answer: bool,
    ) {
        let leave = req.member_epoch < 0;
        let token = self.token(Pending::Consumer {
            slot,
            incarnation: self.slots[slot].incarnation,
            leave,
            lose_answer,
            sent: self.now,
        });
        self.slots[slot].busy = true;
        let fresh = Uuid::from_u128(u128::from(token));
        let client = self.client.clone();
        let effects =
            self.group
                .consumer_heartbeat(cx!(self), req, &client, Grant::NotAsked, fresh, token);
        self.carry_out(effects);
        if leave {
            assert!(
                !self.outstanding.contains_key(&token),
                "a leave is answered in its call"
            );
        }
    }

    fn join(
        &mut self,
        who: usize,
        restart: bool,
        empty_id: bool,
        sub: &Sub,
        rebalance: u8,
        lose: bool,
    ) {
        let s = &mut self.slots[who];
        if restart || s.protocol == Protocol::Classic {
            // A new process: what the old one still waits for is answered to nobody.
            s.restart(Protocol::Consumer);
        }
        if s.busy {
            return;
        }
        // A client joins owning nothing: whatever it had, it gave up when it was fenced.
        s.lose_all();
        s.honest = true;
        s.exact = true;
        if s.id.is_none() && !empty_id {
            s.id = Some(format!("m{who}-{}", s.incarnation));
        }
        let mut req = self.request(who, 0, Some(Vec::new()), Some(sub));
        req.rebalance_timeout_ms = match rebalance % 4 {
            3 => -1,
            r => [5_000, 30_000, 60_000][usize::from(r)],
        };
        self.send_heartbeat(who, req, lose);
    }

    /// A heartbeat request of `who` with its stored subscription, overridden by `change`.
    fn request(
        &mut self,
        who: usize,
        epoch: i32,
        owned: Option<Vec<TopicPartitions>>,
        change: Option<&Sub>,
    ) -> ConsumerGroupHeartbeatRequest {
        let s = &mut self.slots[who];
        let mut req = ConsumerGroupHeartbeatRequest {
            group_id: GROUP.to_owned(),
            member_id: s.id.clone().unwrap_or_default(),
            member_epoch: epoch,
            group_instance_id: s.instance.clone(),
            rack_id: None,
            rebalance_timeout_ms: if epoch == 0 { 30_000 } else { -1 },
            subscribed_topics: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            owned_partitions: owned,
        };
        if epoch == 0 {
            // A rejoin repeats what it subscribed to.
            req.subscribed_topics = s.topics.clone();
            req.subscribed_topic_regex = s.regex.clone();
            req.server_assignor = s.assignor.clone();
        }
        if let Some(change) = change {
            if let Some(t) = change.topics {
                let topics = subset(t, &NAMES);
                s.topics = Some(topics.clone());
                req.subscribed_topics = Some(topics);
            }
            if let Some(r) = change.regex {
                let regex = pick(&REGEXES, r).to_owned();
                s.regex = Some(regex.clone());
                req.subscribed_topic_regex = Some(regex);
            }
            if let Some(a) = change.assignor {
                let assignor = pick(&SERVER_ASSIGNORS, a).to_owned();
                s.assignor = Some(assignor.clone());
                req.server_assignor = Some(assignor);
            }
        }
        req
    }

    #[allow(clippy::too_many_arguments)]
    fn heartbeat(
        &mut self,
        who: usize,
        honest: bool,
        report_owned: bool,
        epoch_pick: u8,
        owned_mask: u16,
        change: Option<&Sub>,
        lose: bool,
    ) {
        let s = &self.slots[who];
        if s.protocol == Protocol::Classic {
            self.classic_heartbeat(who, 0);
            return;
        }
        // Only a lying client sends while it waits for an answer.
        if s.busy && honest {
            return;
        }
        if honest && s.fenced {
            // An honest client that was fenced rejoins.
            let sub = Sub {
                topics: None,
                regex: None,
                assignor: None,
            };
            return self.join(who, false, false, &sub, 1, lose);
        }
        let (epoch, owned) = if honest {
            (s.epoch, report_owned.then(|| to_wire(&s.owned)))
        } else {
            let epoch = match epoch_pick % 6 {
                0 => s.epoch - 1,
                1 => s.epoch + 1,
                2 => s.previous_epoch,
                3 => i32::from(epoch_pick >> 3),
                4 => -3,
                _ => s.epoch,
            };
            let all = self.all_partitions();
            let made_up: Owned = all
                .into_iter()
                .enumerate()
                .filter(|(i, _)| owned_mask & (1 << (i % 16)) != 0)
                .map(|(_, tp)| tp)
                .collect();
            (epoch, report_owned.then(|| to_wire(&made_up)))
        };
        if !honest {
            self.slots[who].honest = false;
        }
        if lose {
            self.slots[who].exact = false;
        }
        let req = self.request(who, epoch, owned, change);
        self.send_heartbeat(who, req, lose);
    }

    fn leave(&mut self, who: usize, temporary: bool) {
        let s = &mut self.slots[who];
        if s.busy {
            return;
        }
        // A leaving client gives everything up first.
        s.lose_all();
        match s.protocol {
            Protocol::Consumer => {
                let epoch = if temporary && s.instance.is_some() {
                    -2
                } else {
                    -1
                };
                let req = self.request(who, epoch, None, None);
                self.send_heartbeat(who, req, false);
            }
            Protocol::Classic => {
                let req = LeaveGroupRequest {
                    group_id: GROUP.to_owned(),
                    members: vec![LeavingMember {
                        member_id: s.id.clone().unwrap_or_default(),
                        group_instance_id: s.instance.clone(),
                        reason: None,
                    }],
                };
                if s.instance.is_none() {
                    s.id = None;
                }
                let incarnation = s.incarnation;
                let token = self.token(Pending::ClassicLeave {
                    slot: who,
                    incarnation,
                });
                self.slots[who].busy = true;
                let effects = self.group.leave(cx!(self), req, token);
                self.carry_out(effects);
            }
        }
    }

    fn commit(&mut self, who: usize, delta: i8) {
        let s = &self.slots[who];
        if s.busy {
            return;
        }
        let member_id = s.id.clone().unwrap_or_default();
        let generation = if member_id.is_empty() {
            -1
        } else {
            s.epoch.saturating_add(i32::from(delta.clamp(-1, 1)))
        };
        // A member at the epoch it last heard, which the server still holds, commits.
        let must_pass = delta == 0
            && !member_id.is_empty()
            && s.exact
            && !s.fenced
            && self.group.is_consumer_group()
            && self
                .group
                .describe_consumer()
                .members
                .iter()
                .any(|m| m.member_id == member_id && m.member_epoch >= 0);
        let req = OffsetCommitRequest {
            group_id: GROUP.to_owned(),
            generation_id: generation,
            member_id,
            group_instance_id: s.instance.clone(),
            topics: vec![OffsetCommitTopic {
                topic: "t0".to_owned(),
                partitions: vec![OffsetCommitPartition {
                    partition: 0,
                    offset: i64::from(self.next_token),
                    metadata: None,
                }],
            }],
        };
        // With the ownership check (protocol §6.13), only what the member owns: a partition
        // its OwnershipEpochs lists (asked as the commit is, at the same instant).
        let must_pass = must_pass && self.owns(&req, "t0", 0);
        let token = self.token(Pending::Commit);
        let effects = self
            .group
            .commit_offsets(self.now, req, &self.client, token);
        let writes = effects
            .writes
            .iter()
            .filter(|w| matches!(w, Write::Commit { .. }))
            .count();
        let answer = match effects.replies.as_slice() {
            // The request's code, else its one partition's (PARTITION_NOT_OWNED comes alone).
            [(t, Response::OffsetCommit(a))] if *t == token => match a.error_code {
                0 => a
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code)
                    .next()
                    .unwrap_or(0),
                code => code,
            },
            // Accepted: answered once its write is durable.
            [] if writes == 1 => 0,
            other => panic!("a commit is answered once: {other:?}"),
        };
        assert!(
            (answer == 0) == (writes == 1),
            "a commit is written exactly when it is accepted: {answer}, {writes} writes"
        );
        assert!(
            !must_pass || answer == 0,
            "a commit at the member's epoch {generation} was refused with {answer}"
        );
        self.carry_out(effects);
        assert!(
            !self.outstanding.contains_key(&token),
            "commit not answered"
        );
    }

    /// Whether the committing member's OwnershipEpochs lists `topic`-`partition`.
    fn owns(&mut self, req: &OffsetCommitRequest, topic: &str, partition: i32) -> bool {
        let answer = self.group.ownership_epochs(
            self.now,
            &OwnershipEpochsRequest {
                group_id: GROUP.to_owned(),
                generation_id: req.generation_id,
                member_id: req.member_id.clone(),
                group_instance_id: req.group_instance_id.clone(),
            },
        );
        answer.error_code == 0
            && answer
                .topics
                .iter()
                .any(|t| t.topic == topic && t.partitions.iter().any(|p| p.partition == partition))
    }

    fn classic_join(&mut self, who: usize, restart: bool, topics: u8) {
        let s = &mut self.slots[who];
        if restart || s.protocol == Protocol::Consumer {
            s.restart(Protocol::Classic);
        }
        if s.busy {
            return;
        }
        s.classic_topics = topics;
        let req = JoinGroupRequest {
            group_id: GROUP.to_owned(),
            member_id: s.id.clone().unwrap_or_default(),
            group_instance_id: s.instance.clone(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            topics: subset(topics, &NAMES[..3]),
            assignors: vec![AssignorMetadata {
                name: "cooperative-sticky".to_owned(),
                user_data: Vec::new(),
            }],
            owned_partitions: to_wire(&s.owned),
            reason: None,
        };
        s.busy = true;
        let incarnation = s.incarnation;
        let token = self.token(Pending::ClassicJoin {
            slot: who,
            incarnation,
        });
        let client = self.client.clone();
        let fresh = Uuid::from_u128(u128::from(token));
        let effects = self
            .group
            .join(cx!(self), req, &client, fresh, Default::default(), token);
        self.carry_out(effects);
    }

    fn classic_sync(&mut self, who: usize) {
        let s = &self.slots[who];
        if s.busy || s.protocol != Protocol::Classic {
            return;
        }
        let member_id = s.id.clone().unwrap_or_default();
        let leads = self.group.leader() == Some(member_id.as_str());
        let assignments = match &s.leader_view {
            Some((generation, members)) if leads && *generation == s.epoch => {
                self.cooperative_assignment(members)
            }
            _ => Vec::new(),
        };
        let req = SyncGroupRequest {
            group_id: GROUP.to_owned(),
            generation_id: s.epoch,
            member_id,
            group_instance_id: s.instance.clone(),
            assignor: None,
            assignments,
        };
        self.slots[who].busy = true;
        let incarnation = self.slots[who].incarnation;
        let token = self.token(Pending::ClassicSync {
            slot: who,
            incarnation,
        });
        let effects = self.group.sync(cx!(self), req, token);
        self.carry_out(effects);
    }

    /// A cooperative leader's assignment: a partition stays with the member that reports
    /// owning it (or with nobody this generation if that member no longer subscribes to its
    /// topic: it is given up first); the rest go round the subscribers.
    fn cooperative_assignment(&self, members: &[JoinedMember]) -> Vec<MemberAssignment> {
        let mut out: Vec<(String, Owned)> = members
            .iter()
            .map(|m| (m.member_id.clone(), Owned::new()))
            .collect();
        let mut owner: HashMap<Tp, usize> = HashMap::new();
        for (i, m) in members.iter().enumerate() {
            for tp in from_wire(&m.owned_partitions) {
                owner.entry(tp).or_insert(i);
            }
        }
        let mut next = 0usize;
        for tp in self.all_partitions() {
            let subscribers: Vec<usize> = (0..members.len())
                .filter(|&i| members[i].topics.contains(&tp.0))
                .collect();
            match owner.get(&tp) {
                Some(&i) if subscribers.contains(&i) => {
                    out[i].1.insert(tp);
                }
                Some(_) => {}
                None if subscribers.is_empty() => {}
                None => {
                    let i = subscribers[next % subscribers.len()];
                    next += 1;
                    out[i].1.insert(tp);
                }
            }
        }
        out.into_iter()
            .map(|(member_id, owned)| MemberAssignment {
                member_id,
                partitions: to_wire(&owned),
                user_data: Vec::new(),
            })
            .collect()
    }

    /// A classic Heartbeat; returns its answer.
    fn classic_heartbeat(&mut self, who: usize, delta: i8) -> ErrorCode {
        let s = &mut self.slots[who];
        if s.busy || s.protocol != Protocol::Classic {
            return ErrorCode::None;
        }
        let req = HeartbeatRequest {
            group_id: GROUP.to_owned(),
            generation_id: s.epoch.saturating_add(i32::from(delta.clamp(-1, 1))),
            member_id: s.id.clone().unwrap_or_default(),
            group_instance_id: s.instance.clone(),
        };
        let answer = self.group.heartbeat(self.now, &req);
        match answer {
            ErrorCode::UnknownMemberId | ErrorCode::FencedInstanceId => {
                s.lose_all();
                s.id = None;
            }
            ErrorCode::IllegalGeneration => s.lose_all(),
            _ => {}
        }
        answer
    }

    fn round(&mut self) {
        for who in 0..SLOTS {
            let s = &self.slots[who];
            if s.busy || s.fenced || s.id.is_none() {
                continue;
            }
            match s.protocol {
                Protocol::Consumer => self.heartbeat(who, true, true, 0, 0, None, false),
                Protocol::Classic => {
                    if self.classic_heartbeat(who, 0) == ErrorCode::RebalanceInProgress {
                        let topics = self.slots[who].classic_topics;
                        self.classic_join(who, false, topics);
                        self.classic_sync(who);
                    }
                }
            }
        }
    }

    fn restart(&mut self) {
        self.now += 1;
        let restored = match self.durable.clone() {
            Some(record) => {
                let offsets = self.durable_offsets.clone();
                Group::restore(record, offsets, Arc::clone(&self.config), self.now).0
            }
            None => Group::new(GROUP.to_owned(), Arc::clone(&self.config), self.now),
        };
        self.group = restored;
        // Held requests died with the connections; their clients may ask again.
        self.outstanding.clear();
        for s in &mut self.slots {
            s.busy = false;
        }
    }

    fn run_job(&mut self, which: u8) {
        if self.jobs.is_empty() {
            return;
        }
        let job = self.jobs.remove(usize::from(which) % self.jobs.len());
        let computed = job.run();
        let effects = self.group.target_computed(cx!(self), computed);
        self.carry_out(effects);
    }

    fn step(&mut self, op: &Op) {
        let mut ticked = false;
        match *op {
            Op::Join {
                who,
                restart,
                empty_id,
                ref sub,
                rebalance,
                lose_answer,
            } => self.join(
                usize::from(who) % SLOTS,
                restart,
                empty_id,
                sub,
                rebalance,
                lose_answer,
            ),
            Op::Heartbeat {
                who,
                honest,
                report_owned,
                epoch,
                owned_mask,
                ref change,
                lose_answer,
            } => self.heartbeat(
                usize::from(who) % SLOTS,
                honest,
                report_owned,
                epoch,
                owned_mask,
                change.as_ref(),
                lose_answer,
            ),
            Op::Leave { who, temporary } => self.leave(usize::from(who) % SLOTS, temporary),
            Op::Commit { who, delta } => self.commit(usize::from(who) % SLOTS, delta),
            Op::Advance { ms } => {
                self.now += u64::from(ms);
                let effects = self.group.tick(cx!(self));
                self.carry_out(effects);
                ticked = true;
            }
            Op::Tick => {
                if let Some(deadline) = self.group.next_deadline() {
                    self.now = self.now.max(deadline);
                    let effects = self.group.tick(cx!(self));
                    self.carry_out(effects);
                    ticked = true;
                }
            }
            Op::Grow { topic, by } => {
                let topic = NAMES[usize::from(topic) % 3].to_owned();
                let count = self.catalog.get(&topic).copied().unwrap_or(0);
                let grown = (count + 1 + i32::from(by % 2)).min(MAX_PARTITIONS);
                if grown > count {
                    self.catalog.insert(topic.clone(), grown);
                    let effects = self.group.topics_changed(cx!(self), &[topic]);
                    self.carry_out(effects);
                }
            }
            Op::Round => self.round(),
            Op::Restart => self.restart(),
            Op::RunJob { which } => self.run_job(which),
            Op::ClassicJoin {
                who,
                restart,
                topics,
            } => self.classic_join(usize::from(who) % SLOTS, restart, topics),
            Op::ClassicSync { who } => self.classic_sync(usize::from(who) % SLOTS),
            Op::ClassicHeartbeat { who, delta } => {
                self.classic_heartbeat(usize::from(who) % SLOTS, delta);
            }
        }
        self.forget_removed();
        self.check(ticked);
    }

    /// A client the server no longer holds as a member gives everything up (in a real client
    /// its own session timer does; it learns it was removed on its next request).
    fn forget_removed(&mut self) {
        let present: HashSet<String> = if self.group.is_consumer_group() {
            self.group
                .describe_consumer()
                .members
                .into_iter()
                .filter(|m| m.member_epoch >= 0)
                .map(|m| m.member_id)
                .collect()
        } else {
            self.group
                .describe(self.now)
                .members
                .into_iter()
                .map(|m| m.member_id)
                .collect()
        };
        for s in &mut self.slots {
            if s.id.as_ref().is_none_or(|id| !present.contains(id)) {
                s.lose_all();
            }
        }
    }

    fn check(&mut self, ticked: bool) {
        let generation = self.group.generation();
        assert!(
            generation >= self.epoch_seen,
            "the group epoch went from {} down to {generation}",
            self.epoch_seen
        );
        self.epoch_seen = generation;

        // Honest clients never believe they own one partition at once.
        let mut believed: HashMap<&Tp, usize> = HashMap::new();
        for (i, s) in self.slots.iter().enumerate() {
            if !s.honest {
                continue;
            }
            for tp in &s.owned {
                if let Some(other) = believed.insert(tp, i) {
                    panic!(
                        "{}-{} is believed owned by clients {other} and {i}: {:#?}",
                        tp.0, tp.1, self.slots
                    );
                }
            }
        }

        if self.group.is_consumer_group() {
            let described = self.group.describe_consumer();
            assert_eq!(described.group_epoch, generation);
            assert!(
                described.assignment_epoch <= generation,
                "assignment epoch {} above the group epoch {generation}",
                described.assignment_epoch
            );
            let mut holds: HashMap<Tp, &str> = HashMap::new();
            let mut by_member: HashMap<&str, Owned> = HashMap::new();
            for m in &described.members {
                assert!(
                    m.member_epoch <= described.assignment_epoch,
                    "member {} at epoch {} beyond the assignment epoch {}",
                    m.member_id,
                    m.member_epoch,
                    described.assignment_epoch
                );
                let owned = from_wire(&m.assignment);
                for tp in &owned {
                    if let Some(other) = holds.insert(tp.clone(), &m.member_id) {
                        panic!(
                            "the server lists {}-{} under {other} and {}: {described:#?}",
                            tp.0, tp.1, m.member_id
                        );
                    }
                }
                by_member.insert(&m.member_id, owned);
            }
            // What an honest client believes it owns, the server knows it holds.
            for (i, s) in self.slots.iter().enumerate() {
                let (true, Some(id)) = (s.honest, s.id.as_deref()) else {
                    continue;
                };
                if s.owned.is_empty() {
                    continue;
                }
                let server = by_member.get(id).cloned().unwrap_or_default();
                let unknown: Vec<&Tp> = s.owned.difference(&server).collect();
                assert!(
                    unknown.is_empty(),
                    "client {i} ({id}) believes it owns {unknown:?}, which the server does not \
                     list under it: {described:#?}"
                );
            }
        }

        if ticked {
            let now = self.now;
            let hold = u64::from(self.config.consumer.heartbeat_interval_ms).min(MAX_HOLD_MS);
            for pending in self.outstanding.values() {
                if let Pending::Consumer { sent, .. } = pending {
                    assert!(
                        sent + hold > now,
                        "a ConsumerGroupHeartbeat sent at {sent} is still held after a tick at \
                         {now}: {pending:?}"
                    );
                }
            }
            assert!(
                self.group.next_deadline().is_none_or(|d| d > now),
                "after tick({now}) a deadline {:?} is still due",
                self.group.next_deadline()
            );
        }
    }

    /// The end of the run: the actor answers whatever is still held when it stops.
    fn finish(mut self) {
        let out = self.group.abort_held(ErrorCode::CoordinatorNotAvailable);
        self.carry_out(out);
        assert!(
            self.outstanding.is_empty(),
            "requests never answered: {:?}",
            self.outstanding
        );
    }
}

fuzz_target!(|input: Input| {
    let mut model = Model::new(&input);
    for op in &input.ops {
        model.step(op);
    }
    model.finish();
});
