//! The polite member of `hostile`: one client beside the victims that does what a real consumer
//! does, over and over, while each attack runs — it rejoins its group (a new generation), syncs
//! as the group's leader, commits its partitions with its generation and member id (the
//! ownership check runs), and heartbeats once, then starts the next cycle after a short pause.
//! Each step's latency and the whole cycle's are recorded in the phase it finished in, so the
//! report shows whether a member could still join, sync and commit during each attack, and
//! how fast.
//!
//! Its group has only this member, so no barrier wait is in its latency: a rejoin of the sole
//! member of a Stable group completes at once. A step not answered within [`LIMIT`] counts as a
//! timeout (and as `LIMIT` of latency); any error starts the next cycle from a fresh member id
//! on a fresh connection.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use muster_protocol::{
    AssignorMetadata, ErrorCode, HeartbeatRequest, JoinGroupRequest, MemberAssignment,
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic, Request, Response,
    SyncGroupRequest, TopicPartitions,
};
use serde::Serialize;

use crate::client::Conn;
use crate::stats::{Latencies, LatencySummary};

/// How long the polite member waits for one answer.
pub(super) const LIMIT: Duration = Duration::from_secs(2);

/// Pause between two cycles: a consumer commits a few times a second, not flat out.
const PAUSE: Duration = Duration::from_millis(100);

/// The topic the polite member commits (4 partitions, all its own).
const TOPIC: &str = "bench-polite";
const PARTITIONS: i32 = 4;

/// The steps of one cycle, in order.
const STEPS: [&str; 4] = ["join", "sync", "commit", "heartbeat"];

#[derive(Debug)]
struct Phase {
    steps: Vec<Latencies>,
    cycle: Latencies,
    cycles: u64,
    errors: BTreeMap<String, u64>,
}

/// What the polite member measured, by phase.
#[derive(Default)]
pub(super) struct Book {
    phase: AtomicUsize,
    phases: Mutex<Vec<Phase>>,
}

/// The polite member's figures of one phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PoliteFigures {
    /// Whole cycles completed (join, sync, commit, heartbeat all answered NONE).
    pub cycles: u64,
    pub cycle: LatencySummary,
    /// Per step: join, sync, commit, heartbeat.
    pub steps: BTreeMap<&'static str, LatencySummary>,
    /// Failed steps, by `step:ERROR` (`timeout`, `disconnected`, or the error code's name).
    pub errors: BTreeMap<String, u64>,
}

impl Book {
    /// Starts recording into phase `index` (the victims' book's index, so both line up).
    pub(super) fn begin(&self, index: usize) -> Result<()> {
        let mut phases = self.phases.lock().unwrap_or_else(PoisonError::into_inner);
        while phases.len() <= index {
            phases.push(Phase {
                steps: STEPS
                    .iter()
                    .map(|_| Latencies::new())
                    .collect::<Result<_>>()?,
                cycle: Latencies::new()?,
                cycles: 0,
                errors: BTreeMap::new(),
            });
        }
        self.phase.store(index, Ordering::Relaxed);
        Ok(())
    }

    fn with(&self, f: impl FnOnce(&mut Phase)) {
        let phase = self.phase.load(Ordering::Relaxed);
        let mut phases = self.phases.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = phases.get_mut(phase) {
            f(p);
        }
    }

    fn step(&self, step: usize, elapsed: Duration) {
        self.with(|p| {
            if let Some(l) = p.steps.get_mut(step) {
                l.record(elapsed);
            }
        });
    }

    fn failed(&self, step: usize, label: &str, elapsed: Duration) {
        let name = STEPS.get(step).copied().unwrap_or("?");
        self.with(|p| {
            if label == "timeout" {
                if let Some(l) = p.steps.get_mut(step) {
                    l.record(elapsed);
                }
            }
            *p.errors.entry(format!("{name}:{label}")).or_default() += 1;
        });
    }

    fn cycle(&self, elapsed: Duration) {
        self.with(|p| {
            p.cycles += 1;
            p.cycle.record(elapsed);
        });
    }

    pub(super) fn figures(&self, index: usize) -> PoliteFigures {
        let phases = self.phases.lock().unwrap_or_else(PoisonError::into_inner);
        phases
            .get(index)
            .map_or_else(PoliteFigures::default, |p| PoliteFigures {
                cycles: p.cycles,
                cycle: p.cycle.summary(),
                steps: STEPS
                    .iter()
                    .zip(&p.steps)
                    .map(|(name, l)| (*name, l.summary()))
                    .collect(),
                errors: p.errors.clone(),
            })
    }
}

/// Runs the polite member against `addr` until aborted (the task is aborted with its server's
/// victims).
pub(super) fn spawn(
    addr: SocketAddr,
    group: String,
    book: Arc<Book>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut offset = 0i64;
        loop {
            let Ok(conn) = Conn::connect(addr, "bench-polite").await else {
                book.failed(0, "connect", Duration::ZERO);
                tokio::time::sleep(PAUSE).await;
                continue;
            };
            let mut member = Member {
                conn,
                group: group.clone(),
                member_id: String::new(),
                book: Arc::clone(&book),
            };
            // Cycles on this connection until one fails.
            while member.cycle(&mut offset).await.is_ok() {
                tokio::time::sleep(PAUSE).await;
            }
            tokio::time::sleep(PAUSE).await;
        }
    })
}

struct Member {
    conn: Conn,
    group: String,
    member_id: String,
    book: Arc<Book>,
}

impl Member {
    /// One request of step `step`, timed; its answer if it came.
    async fn call(&self, step: usize, request: Request) -> Result<(Response, Duration)> {
        let started = Instant::now();
        match self.conn.call_within(LIMIT, request).await {
            Ok(answer) => Ok((answer, started.elapsed())),
            Err(e) => {
                let label = if e.to_string().starts_with("no answer") {
                    "timeout"
                } else {
                    "disconnected"
                };
                self.book.failed(step, label, started.elapsed());
                bail!("{label}")
            }
        }
    }

    /// Counts a NONE answer of step `step`, or the error it carried.
    fn check(&self, step: usize, code: i16, elapsed: Duration) -> Result<()> {
        if code == ErrorCode::None.code() {
            self.book.step(step, elapsed);
            return Ok(());
        }
        let label =
            ErrorCode::from_code(code).map_or_else(|| code.to_string(), |c| c.name().to_owned());
        self.book.failed(step, &label, elapsed);
        bail!("{label}")
    }

    async fn cycle(&mut self, offset: &mut i64) -> Result<()> {
        let started = Instant::now();
        let join = |member_id: String| JoinGroupRequest {
            group_id: self.group.clone(),
            member_id,
            group_instance_id: None,
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            topics: vec![TOPIC.to_owned()],
            assignors: vec![AssignorMetadata {
                name: crate::member::ASSIGNOR.to_owned(),
                user_data: Vec::new(),
            }],
            owned_partitions: Vec::new(),
            reason: None,
        };
        let (answer, mut elapsed) = self.call(0, join(self.member_id.clone()).into()).await?;
        let Response::JoinGroup(mut joined) = answer else {
            self.book.failed(0, "unexpected answer", elapsed);
            bail!("unexpected answer");
        };
        if joined.error_code == ErrorCode::MemberIdRequired.code() {
            self.member_id = joined.member_id;
            let (answer, more) = self.call(0, join(self.member_id.clone()).into()).await?;
            elapsed += more;
            let Response::JoinGroup(again) = answer else {
                self.book.failed(0, "unexpected answer", elapsed);
                bail!("unexpected answer");
            };
            joined = again;
        }
        self.check(0, joined.error_code, elapsed)?;
        let generation = joined.generation_id;

        let sync = SyncGroupRequest {
            group_id: self.group.clone(),
            generation_id: generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            assignor: Some(crate::member::ASSIGNOR.to_owned()),
            assignments: vec![MemberAssignment {
                member_id: self.member_id.clone(),
                partitions: vec![TopicPartitions {
                    topic: TOPIC.to_owned(),
                    partitions: (0..PARTITIONS).collect(),
                }],
                user_data: Vec::new(),
            }],
        };
        let (answer, elapsed) = self.call(1, sync.into()).await?;
        self.check(1, answer.error_code(), elapsed)?;

        *offset += 1;
        let commit = OffsetCommitRequest {
            group_id: self.group.clone(),
            generation_id: generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            topics: vec![OffsetCommitTopic {
                topic: TOPIC.to_owned(),
                partitions: (0..PARTITIONS)
                    .map(|partition| OffsetCommitPartition {
                        partition,
                        offset: *offset,
                        metadata: None,
                    })
                    .collect(),
            }],
        };
        let (answer, elapsed) = self.call(2, commit.into()).await?;
        // The first partition's code stands for the rest (they are all the member's own).
        let code = match &answer {
            Response::OffsetCommit(r) if r.error_code == ErrorCode::None.code() => r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code)
                .find(|c| *c != ErrorCode::None.code())
                .unwrap_or(0),
            other => other.error_code(),
        };
        self.check(2, code, elapsed)?;

        let heartbeat = HeartbeatRequest {
            group_id: self.group.clone(),
            generation_id: generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
        };
        let (answer, elapsed) = self.call(3, heartbeat.into()).await?;
        self.check(3, answer.error_code(), elapsed)?;
        self.book.cycle(started.elapsed());
        Ok(())
    }
}
