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
//! - `tick/10000`: a timer tick on a Stable 10 000-member group with nothing due (what every
//!   group pays when its early wake-up fires: one scan of the members' deadlines).
//!
//! Short by design (2 s per benchmark).

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use muster_coordinator::engine::{ClientInfo, Ctx, Group, GroupState, Output};
use muster_coordinator::GroupConfig;
use muster_protocol::{
    AssignorMetadata, HeartbeatRequest, JoinGroupRequest, MemberAssignment, Response,
    SyncGroupRequest, TopicPartitions,
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

/// A Stable group of `n` members at time 1 000; returns it, the member ids and the generation.
fn stable_group(n: usize) -> (Group<usize>, Vec<String>, i32, String) {
    let catalog = catalog();
    let client = client();
    let mut now = 1_000;
    let mut group: Group<usize> = Group::new("bench".into(), config(), now);
    let mut out = Output::default();
    let cx = |now| Ctx {
        now,
        topics: &catalog,
    };
    // MEMBER_ID_REQUIRED for everyone, then the real joins inside the initial delay.
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        out.clear();
        group.join(
            cx(now),
            join_request(""),
            &client,
            Uuid::new_v4(),
            i,
            &mut out,
        );
        if let Some((_, Response::JoinGroup(r))) = out.replies.first() {
            ids.push(r.member_id.clone());
        }
    }
    for (i, id) in ids.iter().enumerate() {
        out.clear();
        group.join(
            cx(now),
            join_request(id),
            &client,
            Uuid::new_v4(),
            i,
            &mut out,
        );
    }
    // The initial delay is extended once (members arrived in its window), then fires.
    for _ in 0..10 {
        now += 100;
        out.clear();
        group.tick(cx(now), &mut out);
        if group.state() != GroupState::PreparingRebalance {
            break;
        }
    }
    let (generation, leader) = out
        .replies
        .iter()
        .find_map(|(_, r)| match r {
            Response::JoinGroup(j) if j.error_code == 0 => {
                Some((j.generation_id, j.leader_id.clone()))
            }
            _ => None,
        })
        .unwrap_or((-1, String::new()));
    sync_all(&mut group, &ids, &leader, generation, now, &mut out);
    assert_eq!(group.state(), GroupState::Stable, "setup failed");
    (group, ids, generation, leader)
}

/// Followers sync first (held), then the leader with a round-robin assignment.
fn sync_all(
    group: &mut Group<usize>,
    ids: &[String],
    leader: &str,
    generation: i32,
    now: u64,
    out: &mut Output<usize>,
) {
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
        out.clear();
        group.sync(cx, sync(id, Vec::new()), i, out);
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
    out.clear();
    group.sync(cx, sync(leader, assignments), usize::MAX, out);
}

/// Every member rejoins (leader first): the barrier completes on the last one.
fn rebalance(group: &mut Group<usize>, ids: &[String], leader: &str, now: u64) -> usize {
    let catalog = catalog();
    let client = client();
    let mut out = Output::default();
    let cx = Ctx {
        now,
        topics: &catalog,
    };
    let order =
        std::iter::once(leader).chain(ids.iter().map(String::as_str).filter(|id| *id != leader));
    let mut answered = 0;
    for (i, id) in order.enumerate() {
        out.clear();
        group.join(cx, join_request(id), &client, Uuid::nil(), i, &mut out);
        answered += out.replies.len();
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
                let mut out = Output::default();
                sync_all(&mut group, &ids, &leader, generation, 2_000, &mut out);
                assert_eq!(out.replies.len(), n);
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
    let mut out = Output::default();
    c.bench_function("tick/10000", |b| {
        b.iter(|| {
            out.clear();
            // Well before any session is due: a tick that finds nothing to do.
            group.tick(
                Ctx {
                    now: 2_000,
                    topics: &catalog,
                },
                &mut out,
            );
            black_box(group.take_new_deadline())
        })
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
    targets = bench_barrier, bench_heartbeat, bench_tick
}
criterion_main!(engine);
