//! The group engine alone, no actors, no sockets (criterion).
//!
//! ```text
//! cargo bench -p muster-coordinator --bench engine [-- FILTER]
//! ```
//!
//! - `barrier/1000`: a Stable group of 1 000 members rebalances: the leader rejoins (which
//!   starts the rebalance) and the 999 others rejoin; the last join completes the barrier and
//!   produces the 1 000 JoinGroup answers (the leader's with the member list). Measured: the
//!   1 000 `join` calls, barrier completion included.
//! - `sync/1000`: the SyncGroup round after that barrier: 999 followers' syncs are held, then
//!   the leader's sync with a round-robin assignment releases all 1 000 answers.
//! - `heartbeat/1000`: one heartbeat of a member of a Stable 1 000-member group.
//! - `uniform/1000x10000`: the consumer protocol's `uniform` assignor computing the target of a
//!   1 000-member group on 10 000 partitions when one member has just joined (999 keep what
//!   they had; the newcomer takes its share).
//! - `consumer_heartbeat/1000`: one heartbeat of a member of a Stable 1 000-member
//!   consumer-protocol group, at its target (the steady heartbeat).
//! - `consumer_join/1000x10000`: one member joins a Stable consumer-protocol group of 999 on
//!   10 000 partitions: the group epoch bump, the `uniform` target, the journal entry, the
//!   newcomer's first reconciliation step and the record of the 1 000 members to write —
//!   everything that join costs the group's turn.
//! - `tick/10000`: a timer tick on a Stable 10 000-member group with nothing due (what every
//!   group pays when its early wake-up fires: one scan of the members' deadlines).
//!
//! Short by design (2 s per benchmark).

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use muster_coordinator::actors::Ledger;
use muster_coordinator::engine::{ClientInfo, Ctx, Effects, Group, GroupState, Write};
use muster_coordinator::quota::Quotas;
use muster_coordinator::GroupConfig;
use muster_protocol::{
    AssignorMetadata, ConsumerGroupHeartbeatRequest, HeartbeatRequest, JoinGroupRequest,
    MemberAssignment, Response, SyncGroupRequest, TopicPartitions,
};
use uuid::Uuid;

const TOPIC: &str = "orders";

fn config() -> Arc<GroupConfig> {
    Arc::new(GroupConfig {
        initial_rebalance_delay_ms: 100,
        ..GroupConfig::default()
    })
}

fn catalog() -> HashMap<String, i32> {
    HashMap::from([(TOPIC.to_owned(), 1_000)])
}

fn join_request(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: "bench".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 60_000,
        topics: vec![TOPIC.into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: Vec::new(),
        }],
        owned_partitions: Vec::new(),
        reason: None,
    }
}

fn client() -> ClientInfo {
    ClientInfo {
        client_id: Arc::from("consumer"),
        client_host: Arc::from("10.0.0.7"),
        access: Default::default(),
    }
}

/// The shell's counters, as a server has them.
fn ledger() -> Ledger {
    Ledger::new(
        Quotas::default(),
        GroupConfig::default().limits.max_pending_member_ids,
    )
}

/// Carries a call's writes out as durable at once, as the group actor does once its store
/// answers: every reply the call released, waiting or not.
fn durable(group: &mut Group<usize>, effects: Effects<usize>) -> Vec<(usize, Response)> {
    let mut replies = effects.replies;
    for write in effects.writes {
        if let Write::Record {
            replies: waiting, ..
        } = write
        {
            replies.extend(waiting);
            let next = group.record_written(Ok(()));
            replies.extend(durable(group, next));
        }
    }
    replies
}

/// One JoinGroup as the group actor makes it: reserve what the engine may need, call it, give
/// back what it returned.
fn join(
    group: &mut Group<usize>,
    ledger: &Ledger,
    cx: Ctx<'_>,
    member_id: &str,
    client: &ClientInfo,
    fresh: Uuid,
    token: usize,
) -> Vec<(usize, Response)> {
    let req = join_request(member_id);
    let grants = ledger.reserve_for_join(group, &req, client);
    let mut effects = group.join(cx, req, client, fresh, grants, token);
    ledger.apply(std::mem::take(&mut effects.ledger));
    durable(group, effects)
}

/// A Stable group of `n` members at time 1 000; returns it, the member ids and the generation.
fn stable_group(n: usize) -> (Group<usize>, Vec<String>, i32, String) {
    let catalog = catalog();
    let client = client();
    let ledger = ledger();
    let mut now = 1_000;
    let mut group: Group<usize> = Group::new("bench".into(), config(), now);
    let cx = |now| Ctx {
        now,
        topics: &catalog,
    };
    // MEMBER_ID_REQUIRED for everyone, then the real joins inside the initial delay.
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let effects = join(&mut group, &ledger, cx(now), "", &client, Uuid::new_v4(), i);
        let id = match effects.first() {
            Some((_, Response::JoinGroup(r))) => Some(r.member_id.clone()),
            _ => None,
        };
        ids.extend(id);
    }
    for (i, id) in ids.iter().enumerate() {
        let _ = join(&mut group, &ledger, cx(now), id, &client, Uuid::nil(), i);
    }
    // The initial delay is extended once (members arrived in its window), then fires.
    let mut last = Vec::new();
    for _ in 0..10 {
        now += 100;
        let effects = group.tick(cx(now));
        last = durable(&mut group, effects);
        if group.state() != GroupState::PreparingRebalance {
            break;
        }
    }
    let (generation, leader) = last
        .iter()
        .find_map(|(_, r)| match r {
            Response::JoinGroup(j) if j.error_code == 0 => {
                Some((j.generation_id, j.leader_id.clone()))
            }
            _ => None,
        })
        .unwrap_or((-1, String::new()));
    let _ = sync_all(&mut group, &ids, &leader, generation, now);
    assert_eq!(group.state(), GroupState::Stable, "setup failed");
    (group, ids, generation, leader)
}

/// Followers sync first (held), then the leader with a round-robin assignment; returns the
/// answers the leader's sync released (every member's).
fn sync_all(
    group: &mut Group<usize>,
    ids: &[String],
    leader: &str,
    generation: i32,
    now: u64,
) -> Vec<(usize, Response)> {
    let catalog = catalog();
    let cx = Ctx {
        now,
        topics: &catalog,
    };
    let sync = |member_id: &str, assignments: Vec<MemberAssignment>| SyncGroupRequest {
        group_id: "bench".into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
        assignor: None,
        assignments,
    };
    for (i, id) in ids.iter().enumerate().filter(|(_, id)| *id != leader) {
        let effects = group.sync(cx, sync(id, Vec::new()), i);
        durable(group, effects);
    }
    let assignments = ids
        .iter()
        .enumerate()
        .map(|(i, id)| MemberAssignment {
            member_id: id.clone(),
            partitions: vec![TopicPartitions {
                topic: TOPIC.into(),
                partitions: vec![i32::try_from(i).unwrap_or(0)],
            }],
            user_data: Vec::new(),
        })
        .collect();
    let effects = group.sync(cx, sync(leader, assignments), usize::MAX);
    durable(group, effects)
}

/// Every member rejoins (leader first): the barrier completes on the last one.
fn rebalance(group: &mut Group<usize>, ids: &[String], leader: &str, now: u64) -> usize {
    let catalog = catalog();
    let client = client();
    let ledger = ledger();
    let cx = Ctx {
        now,
        topics: &catalog,
    };
    let order =
        std::iter::once(leader).chain(ids.iter().map(String::as_str).filter(|id| *id != leader));
    let mut answered = 0;
    for (i, id) in order.enumerate() {
        answered += join(group, &ledger, cx, id, &client, Uuid::nil(), i).len();
    }
    answered
}

fn bench_barrier(c: &mut Criterion) {
    let n = 1_000;
    c.bench_function("barrier/1000", |b| {
        b.iter_batched(
            || stable_group(n),
            |(mut group, ids, _, leader)| {
                let answered = rebalance(&mut group, &ids, &leader, 2_000);
                assert_eq!(answered, n);
                group
            },
            BatchSize::PerIteration,
        )
    });
    c.bench_function("sync/1000", |b| {
        b.iter_batched(
            || {
                let (mut group, ids, generation, leader) = stable_group(n);
                rebalance(&mut group, &ids, &leader, 2_000);
                let leader = group.leader().unwrap_or_default().to_owned();
                (group, ids, generation + 1, leader)
            },
            |(mut group, ids, generation, leader)| {
                let answers = sync_all(&mut group, &ids, &leader, generation, 2_000);
                assert_eq!(answers.len(), n);
                group
            },
            BatchSize::PerIteration,
        )
    });
}

fn bench_heartbeat(c: &mut Criterion) {
    let (mut group, ids, generation, _) = stable_group(1_000);
    let requests: Vec<HeartbeatRequest> = ids
        .iter()
        .map(|id| HeartbeatRequest {
            group_id: "bench".into(),
            generation_id: generation,
            member_id: id.clone(),
            group_instance_id: None,
        })
        .collect();
    let mut next = 0usize;
    let mut now = 2_000;
    c.bench_function("heartbeat/1000", |b| {
        b.iter(|| {
            next = (next + 1) % requests.len();
            now += 1;
            black_box(group.heartbeat(now, black_box(&requests[next])))
        })
    });
}

fn bench_tick(c: &mut Criterion) {
    let (mut group, _, _, _) = stable_group(10_000);
    let catalog = catalog();
    c.bench_function("tick/10000", |b| {
        b.iter(|| {
            // Well before any session is due: a tick that finds nothing to do.
            black_box(group.tick(Ctx {
                now: 2_000,
                topics: &catalog,
            }))
        })
    });
}

fn bench_uniform(c: &mut Criterion) {
    use std::collections::{BTreeMap, BTreeSet};

    use muster_coordinator::engine::consumer::{assign_uniform, AssignmentSpec, Target};

    let subscribe = |n: usize| -> BTreeMap<String, BTreeSet<String>> {
        (0..n)
            .map(|i| (format!("member-{i:04}"), BTreeSet::from([TOPIC.to_owned()])))
            .collect()
    };
    let counts = BTreeMap::from([(TOPIC.to_owned(), 10_000)]);
    let before = subscribe(999);
    let formed = assign_uniform(&AssignmentSpec {
        members: &before,
        partition_counts: &counts,
        current: &Target::new(),
    });
    let after = subscribe(1_000);
    c.bench_function("uniform/1000x10000", |b| {
        b.iter(|| {
            black_box(assign_uniform(&AssignmentSpec {
                members: &after,
                partition_counts: &counts,
                current: &formed,
            }))
        })
    });
}

/// A Stable consumer-protocol group of 999 members on 10 000 partitions, every member at the
/// target (built from a record, as a restart would).
fn consumer_group() -> Group<u32> {
    use std::collections::{BTreeMap, BTreeSet};

    use muster_coordinator::engine::consumer::{assign_uniform, AssignmentSpec, Target};
    use muster_coordinator::storage::{ConsumerGroupRecord, ConsumerMemberRecord, GroupRecord};

    let members: BTreeMap<String, BTreeSet<String>> = (0..999)
        .map(|i| (format!("member-{i:04}"), BTreeSet::from([TOPIC.to_owned()])))
        .collect();
    let counts = BTreeMap::from([(TOPIC.to_owned(), 10_000)]);
    let target = assign_uniform(&AssignmentSpec {
        members: &members,
        partition_counts: &counts,
        current: &Target::new(),
    });
    let wire = |ps: &muster_coordinator::engine::consumer::Partitions| -> Vec<TopicPartitions> {
        ps.iter()
            .map(|(t, p)| TopicPartitions {
                topic: t.clone(),
                partitions: p.iter().copied().collect(),
            })
            .collect()
    };
    let record = GroupRecord {
        consumer: Some(ConsumerGroupRecord {
            assignment_epoch: 999,
            assignor: "uniform".into(),
            members: target
                .iter()
                .map(|(id, share)| ConsumerMemberRecord {
                    member_id: id.clone(),
                    client_id: "consumer".into(),
                    client_host: "10.0.0.7".into(),
                    rebalance_timeout_ms: 60_000,
                    subscribed_topics: vec![TOPIC.into()],
                    member_epoch: 999,
                    previous_member_epoch: 998,
                    assigned: wire(share),
                    target: wire(share),
                    ..ConsumerMemberRecord::default()
                })
                .collect(),
        }),
        state: GroupState::Stable,
        generation: 999,
        ..GroupRecord::empty("bench".into(), 0)
    };
    Group::restore(record, Vec::new(), config(), 0).0
}

fn consumer_heartbeat(member_id: &str, epoch: i32, join: bool) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest {
        group_id: "bench".into(),
        member_id: member_id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: if join { 60_000 } else { -1 },
        subscribed_topics: join.then(|| vec![TOPIC.into()]),
        ..ConsumerGroupHeartbeatRequest::default()
    }
}

fn bench_consumer(c: &mut Criterion) {
    let topics = HashMap::from([(TOPIC.to_owned(), 10_000)]);
    let client = client();
    let mut group = consumer_group();
    c.bench_function("consumer_heartbeat/1000", |b| {
        b.iter(|| {
            let cx = Ctx {
                now: 1,
                topics: &topics,
            };
            let req = consumer_heartbeat("member-0500", 999, false);
            black_box(group.consumer_heartbeat(
                cx,
                req,
                &client,
                Default::default(),
                Uuid::nil(),
                1,
            ))
        })
    });
    c.bench_function("consumer_join/1000x10000", |b| {
        b.iter_batched(
            consumer_group,
            |mut group| {
                let cx = Ctx {
                    now: 1,
                    topics: &topics,
                };
                let req = consumer_heartbeat("member-new", 0, true);
                black_box(group.consumer_heartbeat(
                    cx,
                    req,
                    &client,
                    Default::default(),
                    Uuid::nil(),
                    1,
                ))
            },
            BatchSize::LargeInput,
        )
    });
}

fn short() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = engine;
    config = short();
    targets = bench_barrier, bench_heartbeat, bench_tick, bench_uniform, bench_consumer
}
criterion_main!(engine);
