//! The group engine driven by arbitrary sequences of requests, clock advances, timer ticks,
//! topic changes and crash-restarts, checking after every step the invariants protocol §6
//! promises:
//!
//! - the generation never decreases, and never falls below a generation already handed to a
//!   client, even across a crash that loses everything not persisted (a restart restores the
//!   last record the engine asked to persist, as the group actor does);
//! - every held request is answered exactly once (no reply token answered twice or invented;
//!   at the end, `abort_held` answers whatever is still held);
//! - no partition is in two members' SyncGroup assignments of one generation (the fuzzing
//!   leader always hands out a partition to one member; the engine must never mix the
//!   assignments of two generations or two syncs); a static member is its instance id, whose
//!   assignment passes to the new member id on a takeover within the generation;
//! - the state agrees with the members (Empty has none; Stable and CompletingRebalance have a
//!   leader that is a member), and after a tick at `now` no deadline is left at or before `now`;
//! - offsets (protocol §6.13, §6.23–§6.25): a commit is written exactly when a partition of it
//!   is accepted; no partition is in two members' OwnershipEpochs answers; an OffsetReset is
//!   refused while the group has members, and once executed OffsetFetch shows exactly the
//!   offsets it answered; an executed OffsetRestore makes visible exactly what it listed; an
//!   OffsetHistory answer lists each partition's entries newest first, within the budget.
#![no_main]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use muster_coordinator::actors::Ledger;
use muster_coordinator::engine::{ClientInfo, Ctx, Effects, Group, Write};
use muster_coordinator::quota::Quotas;
use muster_coordinator::storage::{GroupRecord, Mutation, OffsetWrite};
use muster_coordinator::GroupConfig;
use muster_protocol::{
    AssignorMetadata, ErrorCode, GroupState, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    LeavingMember, MemberAssignment, OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic,
    Response, SyncGroupRequest, TopicPartitions,
};
use uuid::Uuid;

#[path = "engine/offsets.rs"]
mod offsets;

const GROUP: &str = "g";
const TOPICS: [&str; 2] = ["t0", "t1"];
const ASSIGNORS: [&str; 2] = ["range", "roundrobin"];

#[derive(Debug, Arbitrary)]
enum Op {
    /// `who`: an index into the member ids learned so far; past the end = an empty member id.
    Join {
        who: u8,
        instance: Option<u8>,
        topics: u8,
        assignors: u8,
        session: u8,
        rebalance: u8,
    },
    Sync {
        who: u8,
        generation_delta: i8,
    },
    Heartbeat {
        who: u8,
        generation_delta: i8,
    },
    Leave {
        who: u8,
        by_instance: bool,
    },
    Commit {
        who: u8,
        generation_delta: i8,
    },
    Advance {
        ms: u16,
    },
    TickDeadline,
    TopicsChanged {
        partitions: u8,
    },
    /// A crash and restart: everything not persisted is lost; held requests die with their
    /// connections (the real server answers them when their `ReplyTo` drops).
    Restart,
    /// OffsetReset of every partition: `to` picks a time (`value` seconds from now), the
    /// earliest recorded, a shift by `value`, or the offset `value`.
    Reset {
        to: u8,
        value: i16,
        execute: bool,
    },
    Restore {
        execute: bool,
    },
    /// OwnershipEpochs of one member (then every member's, checked for overlaps).
    Epochs {
        who: u8,
        generation_delta: i8,
    },
    History {
        limit: u8,
    },
}

#[derive(Debug, Arbitrary)]
struct Input {
    initial_delay: bool,
    ops: Vec<Op>,
}

struct Model {
    group: Group<u32>,
    config: Arc<GroupConfig>,
    now: u64,
    catalog: HashMap<String, i32>,
    next_token: u32,
    outstanding: HashSet<u32>,
    /// Member ids in the order the engine handed them out, and each one's instance id.
    known: Vec<(String, Option<String>)>,
    /// Each member's generation as it last learned it.
    generations: HashMap<String, i32>,
    /// The last member list a leader received, by generation.
    leader_view: BTreeMap<i32, Vec<String>>,
    /// Partition → member, per generation, from successful SyncGroup answers.
    owners: BTreeMap<i32, HashMap<(String, i32), String>>,
    /// SyncGroups not answered yet: token → (generation synced with, member).
    pending_syncs: HashMap<u32, (i32, String)>,
    /// JoinGroups not answered yet: token → the instance id they carried.
    join_instances: HashMap<u32, Option<String>>,
    highest_served: i32,
    last_generation: i32,
    /// What a crash keeps: the last record persisted and the offsets applied.
    durable: Option<GroupRecord>,
    durable_offsets: Vec<OffsetWrite>,
    client: ClientInfo,
    /// The shell's counters (pending ids), as the group actor keeps them.
    ledger: Ledger,
}

impl Model {
    fn new(initial_delay: bool) -> Self {
        let config = Arc::new(GroupConfig {
            initial_rebalance_delay_ms: if initial_delay { 3_000 } else { 0 },
            ..GroupConfig::default()
        });
        let catalog = HashMap::from([("t0".to_owned(), 4), ("t1".to_owned(), 2)]);
        let ledger = Ledger::new(Quotas::default(), config.limits.max_pending_member_ids);
        Self {
            group: Group::new(GROUP.to_owned(), Arc::clone(&config), 0),
            config,
            now: 0,
            catalog,
            next_token: 0,
            outstanding: HashSet::new(),
            known: Vec::new(),
            generations: HashMap::new(),
            leader_view: BTreeMap::new(),
            owners: BTreeMap::new(),
            pending_syncs: HashMap::new(),
            join_instances: HashMap::new(),
            highest_served: 0,
            last_generation: 0,
            durable: None,
            durable_offsets: Vec::new(),
            client: ClientInfo {
                client_id: "fuzz".into(),
                client_host: "127.0.0.1".into(),
                access: Default::default(),
            },
            ledger,
        }
    }

    fn token(&mut self) -> u32 {
        self.next_token += 1;
        self.outstanding.insert(self.next_token);
        self.next_token
    }

    fn pick(&self, who: u8) -> Option<(String, Option<String>)> {
        self.known.get(usize::from(who)).cloned()
    }

    fn generation_of(&self, member: &str, delta: i8) -> i32 {
        self.generations
            .get(member)
            .copied()
            .unwrap_or(-1)
            .saturating_add(i32::from(delta.clamp(-1, 1)))
    }

    /// Carries out an engine call's effects as the group actor does, every write durable at
    /// once: a record write first, then its replies; a commit handed back written. Returns
    /// what was answered.
    fn carry_out(&mut self, effects: Effects<u32>) -> Vec<(u32, Response)> {
        let Effects {
            mut replies,
            writes,
            ledger,
            ..
        } = effects;
        self.ledger.apply(ledger);
        // Answers of calls made while carrying these out (a commit handed back), already
        // checked by their own `carry_out`.
        let mut nested = Vec::new();
        for write in writes {
            match write {
                Write::Record {
                    batch,
                    replies: waiting,
                } => {
                    for m in batch {
                        match m {
                            Mutation::PutGroup(record) => self.durable = Some(record),
                            // A removed group's last state: a restart must still not go back
                            // below a generation already served.
                            Mutation::DeleteGroup { .. } => {
                                self.durable = Some(self.group.to_record())
                            }
                            _ => {}
                        }
                    }
                    replies.extend(waiting);
                    // Durable at once: the engine may hand out the next record write.
                    let next = self.group.record_written(Ok(()));
                    nested.extend(self.carry_out(next));
                }
                Write::Commit { batch, commit } => {
                    for m in batch {
                        if let Mutation::PutOffsets { offsets, .. } = m {
                            self.durable_offsets.extend(offsets);
                        }
                    }
                    let done = self.group.commit_written(commit, Ok(()));
                    nested.extend(self.carry_out(done));
                }
                Write::BestEffort(_) => {}
            }
        }
        for (token, response) in &replies {
            assert!(
                self.outstanding.remove(token),
                "reply token {token} answered twice or never issued: {response:?}"
            );
            self.learn(*token, response);
        }
        replies.extend(nested);
        replies
    }

    fn learn(&mut self, token: u32, response: &Response) {
        match response {
            Response::JoinGroup(j) => {
                let instance = self.join_instances.remove(&token).flatten();
                if !j.member_id.is_empty() && !self.known.iter().any(|(m, _)| *m == j.member_id) {
                    self.known.push((j.member_id.clone(), instance));
                }
                if j.error_code == ErrorCode::None.code() {
                    assert!(
                        j.generation_id <= self.group.generation(),
                        "join answered generation {} above the group's {}",
                        j.generation_id,
                        self.group.generation()
                    );
                    self.highest_served = self.highest_served.max(j.generation_id);
                    self.generations
                        .insert(j.member_id.clone(), j.generation_id);
                    if !j.members.is_empty() {
                        let mut members: Vec<String> =
                            j.members.iter().map(|m| m.member_id.clone()).collect();
                        members.sort();
                        self.leader_view.insert(j.generation_id, members);
                    }
                }
            }
            Response::SyncGroup(_) | Response::Heartbeat(_) | Response::OffsetCommit(_) => {}
            _ => {}
        }
    }

    fn record_assignment(&mut self, generation: i32, member: &str, partitions: &[TopicPartitions]) {
        // A static member is its instance id: one that rejoins under a new member id (a
        // takeover, e.g. after a restart) keeps the generation and its assignment, and the
        // old member id is fenced (KIP-345). Two member ids of one instance holding the same
        // partition in one generation is that, not a double assignment.
        let member = self
            .known
            .iter()
            .find(|(m, _)| m == member)
            .and_then(|(_, instance)| instance.clone())
            .map_or_else(
                || member.to_owned(),
                |instance| format!("instance {instance}"),
            );
        let member = member.as_str();
        let owners = self.owners.entry(generation).or_default();
        for tp in partitions {
            for &p in &tp.partitions {
                let key = (tp.topic.clone(), p);
                match owners.get(&key) {
                    Some(other) if other != member => panic!(
                        "{}-{p} assigned to both {other} and {member} in generation {generation}",
                        tp.topic
                    ),
                    _ => {
                        owners.insert(key, member.to_owned());
                    }
                }
            }
        }
    }

    /// The fuzzing leader's assignment: each partition to exactly one member, a function of
    /// the generation and the member list the leader was given.
    fn assignment(&self, generation: i32) -> Vec<MemberAssignment> {
        let Some(members) = self.leader_view.get(&generation) else {
            return Vec::new();
        };
        let mut out: Vec<MemberAssignment> = members
            .iter()
            .map(|m| MemberAssignment {
                member_id: m.clone(),
                partitions: Vec::new(),
                user_data: Vec::new(),
            })
            .collect();
        if out.is_empty() {
            return out;
        }
        let mut i = usize::try_from(generation.unsigned_abs()).unwrap_or(0);
        for topic in TOPICS {
            let count = self.catalog.get(topic).copied().unwrap_or(0);
            for p in 0..count {
                let slot = &mut out[i % members.len()];
                match slot.partitions.iter_mut().find(|tp| tp.topic == topic) {
                    Some(tp) => tp.partitions.push(p),
                    None => slot.partitions.push(TopicPartitions {
                        topic: topic.to_owned(),
                        partitions: vec![p],
                    }),
                }
                i += 1;
            }
        }
        out
    }

    fn step(&mut self, op: &Op) {
        let mut ticked = false;
        let out = match *op {
            Op::Join {
                who,
                instance,
                topics,
                assignors,
                session,
                rebalance,
            } => {
                let (member_id, known_instance) = self.pick(who).unwrap_or_default();
                let group_instance_id =
                    known_instance.or_else(|| instance.map(|i| format!("i{}", i % 3)));
                let request = JoinGroupRequest {
                    group_id: GROUP.to_owned(),
                    member_id,
                    group_instance_id,
                    session_timeout_ms: [5_000, 6_000, 30_000][usize::from(session % 3)],
                    rebalance_timeout_ms: [6_000, 60_000][usize::from(rebalance % 2)],
                    topics: subset(&TOPICS, topics),
                    assignors: subset(&ASSIGNORS, assignors)
                        .into_iter()
                        .map(|name| AssignorMetadata {
                            name,
                            user_data: Vec::new(),
                        })
                        .collect(),
                    owned_partitions: Vec::new(),
                    reason: None,
                };
                let token = self.token();
                self.join_instances
                    .insert(token, request.group_instance_id.clone());
                let fresh = Uuid::from_u128(u128::from(self.next_token));
                let cx = Ctx {
                    now: self.now,
                    topics: &self.catalog,
                };
                let grants = self
                    .ledger
                    .reserve_for_join(&self.group, &request, &self.client);
                self.group
                    .join(cx, request, &self.client, fresh, grants, token)
            }
            Op::Sync {
                who,
                generation_delta,
            } => {
                let Some((member_id, group_instance_id)) = self.pick(who) else {
                    return;
                };
                let generation_id = self.generation_of(&member_id, generation_delta);
                let assignments = if self.group.leader() == Some(member_id.as_str()) {
                    self.assignment(generation_id)
                } else {
                    Vec::new()
                };
                let token = self.token();
                let cx = Ctx {
                    now: self.now,
                    topics: &self.catalog,
                };
                let request = SyncGroupRequest {
                    group_id: GROUP.to_owned(),
                    generation_id,
                    member_id: member_id.clone(),
                    group_instance_id,
                    assignor: None,
                    assignments,
                };
                // Record every successful SyncGroup answer against the generation its member
                // synced with (held answers arrive in a later call: see `sync_answers`).
                self.pending_syncs.insert(token, (generation_id, member_id));
                self.group.sync(cx, request, token)
            }
            Op::Heartbeat {
                who,
                generation_delta,
            } => {
                let Some((member_id, group_instance_id)) = self.pick(who) else {
                    return;
                };
                let generation_id = self.generation_of(&member_id, generation_delta);
                let request = HeartbeatRequest {
                    group_id: GROUP.to_owned(),
                    generation_id,
                    member_id,
                    group_instance_id,
                };
                let _ = self.group.heartbeat(self.now, &request);
                Effects::default()
            }
            Op::Leave { who, by_instance } => {
                let Some((member_id, group_instance_id)) = self.pick(who) else {
                    return;
                };
                let member_id = if by_instance && group_instance_id.is_some() {
                    String::new()
                } else {
                    member_id
                };
                let token = self.token();
                let cx = Ctx {
                    now: self.now,
                    topics: &self.catalog,
                };
                let request = LeaveGroupRequest {
                    group_id: GROUP.to_owned(),
                    members: vec![LeavingMember {
                        member_id,
                        group_instance_id,
                        reason: None,
                    }],
                };
                self.group.leave(cx, request, token)
            }
            Op::Commit {
                who,
                generation_delta,
            } => {
                let (member_id, group_instance_id) = self.pick(who).unwrap_or_default();
                let generation_id = if member_id.is_empty() {
                    -1
                } else {
                    self.generation_of(&member_id, generation_delta)
                };
                let request = OffsetCommitRequest {
                    group_id: GROUP.to_owned(),
                    generation_id,
                    member_id,
                    group_instance_id,
                    topics: vec![OffsetCommitTopic {
                        topic: "t0".to_owned(),
                        partitions: vec![OffsetCommitPartition {
                            partition: 0,
                            offset: i64::from(self.next_token),
                            metadata: None,
                        }],
                    }],
                };
                let token = self.token();
                let effects = self
                    .group
                    .commit_offsets(self.now, request, &self.client, token);
                let writes = effects.writes.len();
                let answered = self.carry_out(effects);
                let answer = match answered.as_slice() {
                    [(t, Response::OffsetCommit(answer))] if *t == token => answer,
                    other => panic!("a commit is answered once: {other:?}"),
                };
                // A partition may be refused alone (PARTITION_NOT_OWNED): written is accepted.
                let accepted = answer.error_code == 0
                    && answer
                        .topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .any(|p| p.error_code == 0);
                assert!(
                    accepted == (writes == 1),
                    "a commit is written exactly when it is accepted: {answer:?}"
                );
                Effects::default()
            }
            Op::Reset { to, value, execute } => {
                self.reset(to, value, execute);
                Effects::default()
            }
            Op::Restore { execute } => {
                self.restore(execute);
                Effects::default()
            }
            Op::Epochs {
                who,
                generation_delta,
            } => {
                if let Some((member_id, instance)) = self.pick(who) {
                    let generation_id = self.generation_of(&member_id, generation_delta);
                    let _ = self.epochs(&member_id, instance, generation_id);
                }
                self.epochs_do_not_overlap();
                Effects::default()
            }
            Op::History { limit } => {
                self.history(limit);
                Effects::default()
            }
            Op::Advance { ms } => {
                self.now += u64::from(ms);
                let cx = Ctx {
                    now: self.now,
                    topics: &self.catalog,
                };
                ticked = true;
                self.group.tick(cx)
            }
            Op::TickDeadline => {
                if let Some(deadline) = self.group.next_deadline() {
                    self.now = self.now.max(deadline);
                    let cx = Ctx {
                        now: self.now,
                        topics: &self.catalog,
                    };
                    ticked = true;
                    self.group.tick(cx)
                } else {
                    Effects::default()
                }
            }
            Op::TopicsChanged { partitions } => {
                self.catalog
                    .insert("t1".to_owned(), 2 + i32::from(partitions % 4));
                let cx = Ctx {
                    now: self.now,
                    topics: &self.catalog,
                };
                self.group.topics_changed(cx, &["t1".to_owned()])
            }
            Op::Restart => {
                self.now += 1;
                let restored = match self.durable.clone() {
                    Some(record) => {
                        let config = Arc::clone(&self.config);
                        let offsets = self.durable_offsets.clone();
                        Group::restore(record, offsets, config, self.now).0
                    }
                    None => Group::new(GROUP.to_owned(), Arc::clone(&self.config), self.now),
                };
                // A new process: its counters start afresh.
                self.group = restored;
                self.ledger =
                    Ledger::new(Quotas::default(), self.config.limits.max_pending_member_ids);
                // Held requests died with the process (their connections are answered by the
                // dropped reply guards); nothing of the old process may answer them now.
                self.outstanding.clear();
                self.pending_syncs.clear();
                self.join_instances.clear();
                assert!(
                    self.group.generation() >= self.highest_served,
                    "after a restart the generation is {} but {} was already served",
                    self.group.generation(),
                    self.highest_served
                );
                self.last_generation = self.group.generation();
                return;
            }
        };
        let answered = self.carry_out(out);
        for (token, response) in answered {
            if let (Some((generation, member)), Response::SyncGroup(s)) =
                (self.pending_syncs.remove(&token), &response)
            {
                if s.error_code == ErrorCode::None.code() {
                    self.record_assignment(generation, &member, &s.partitions);
                }
            }
        }
        self.check(ticked);
    }

    fn check(&mut self, ticked: bool) {
        let g = &self.group;
        assert!(
            g.generation() >= self.last_generation,
            "generation went from {} down to {}",
            self.last_generation,
            g.generation()
        );
        assert!(g.generation() >= self.highest_served);
        self.last_generation = g.generation();
        match g.state() {
            GroupState::Empty => assert_eq!(g.member_count(), 0, "members in an Empty group"),
            GroupState::Stable | GroupState::CompletingRebalance => {
                let leader = g.leader().expect("a leader in Stable/CompletingRebalance");
                let described = g.describe(self.now);
                assert!(
                    described.members.iter().any(|m| m.member_id == leader),
                    "the leader {leader} is not a member"
                );
            }
            _ => {}
        }
        if ticked {
            let now = self.now;
            assert!(
                g.next_deadline().is_none_or(|d| d > now),
                "after tick({now}) a deadline {:?} is still due",
                g.next_deadline()
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

fn subset(names: &[&str], mask: u8) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect()
}

fuzz_target!(|input: Input| {
    let mut model = Model::new(input.initial_delay);
    for op in input.ops.iter().take(200) {
        model.step(op);
    }
    model.finish();
});
