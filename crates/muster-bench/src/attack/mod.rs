//! The hostile client of `hostile` ([`crate::scenario::hostile`]): ten attacks, each run by one
//! client (over at most a few connections, or many for the connection floods), each bounded in
//! time (it stops at its deadline) and in count, and each aimed only at the server under test.
//!
//! An attacker never fails on what the server does to it: an answer of any kind, an error
//! code, a closed connection or a refused one are all "the server defended itself", counted in
//! [`Outcomes`], and the attacker carries on (reconnecting when it must). Only the bench's own
//! faults (it cannot encode a frame) end an attack early.
//!
//! Most attacks go through `hammer`: `connections` raw connections, each keeping at most
//! `depth` frames in flight, with a reader task that counts every answer by request and error
//! code, and the bytes sent and answered (`request_bytes`, `answer_bytes`: the amplification).
//! The rest have their own loops: the pipelining clients that never read, join/leave churn and
//! the connection flood (`sessions.rs`), slowloris and slow readers on the admin port
//! (`admin.rs`), the TLS handshake flood (`tls.rs`). The oversized and repetitive requests are
//! in `requests.rs`, the amplifying ones in `amplify.rs`.

mod admin;
mod amplify;
mod requests;
mod sessions;
mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures_util::StreamExt as _;
use muster_protocol::{
    decode_response, encode_request, AssignorMetadata, ErrorCode, JoinGroupRequest,
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic, Request, RequestFrame, Response,
};
use serde::Serialize;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::codec::FramedRead;

use crate::client::{codec, hello, MAX_RESPONSE_BYTES};
use crate::transport::connect_tcp;

/// The attacks, in the order `hostile` runs them by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attack {
    /// Max-size frames that do not decode, in a loop.
    Garbage,
    /// OffsetCommit with a frame-sized topic name and as many partitions as fit.
    BigCommit,
    /// DescribeGroups and OffsetFetch naming one group or partition many times over.
    Repeats,
    /// Pipelined OffsetFetch requests with big answers, whose answers are never read.
    NonReader,
    /// JoinGroup floods: pending member ids in one group, and new groups.
    JoinFlood,
    /// Frame-sized client id, group id, member id and instance id.
    HugeIds,
    /// Join/leave churn on one group: a rebalance storm.
    Churn,
    /// CreateTopics with huge partition counts, and as many topics as fit.
    BigTopics,
    /// Connections up to the flood limit, held open.
    ConnFlood,
    /// Half-sent HTTP headers on the admin port, on many connections.
    Slowloris,
    /// Every request kind that names many things, at its limit, pipelined.
    Amplify,
    /// GroupSimulate adding the most members to a topic grown to i32::MAX partitions.
    Simulate,
    /// Pipelined requests with big answers that take no large-answer slot, never read.
    NonReaderMore,
    /// Whole admin requests whose answers are read a few bytes at a time.
    SlowRead,
    /// Short-lived connections, each a full TLS handshake (needs a TLS server).
    TlsFlood,
}

impl Attack {
    pub const ALL: [Attack; 15] = [
        Attack::Garbage,
        Attack::BigCommit,
        Attack::Repeats,
        Attack::NonReader,
        Attack::JoinFlood,
        Attack::HugeIds,
        Attack::Churn,
        Attack::BigTopics,
        Attack::ConnFlood,
        Attack::Slowloris,
        Attack::Amplify,
        Attack::Simulate,
        Attack::NonReaderMore,
        Attack::SlowRead,
        Attack::TlsFlood,
    ];

    /// The attacks a run makes when none are named on a plaintext server: all but the TLS
    /// flood, which needs a TLS server (`hostile --tls`).
    pub fn defaults() -> Vec<Attack> {
        Attack::ALL
            .into_iter()
            .filter(|a| *a != Attack::TlsFlood)
            .collect()
    }

    pub const fn name(self) -> &'static str {
        match self {
            Attack::Garbage => "garbage",
            Attack::BigCommit => "big-commit",
            Attack::Repeats => "repeats",
            Attack::NonReader => "non-reader",
            Attack::JoinFlood => "join-flood",
            Attack::HugeIds => "huge-ids",
            Attack::Churn => "churn",
            Attack::BigTopics => "big-topics",
            Attack::ConnFlood => "conn-flood",
            Attack::Slowloris => "slowloris",
            Attack::Amplify => "amplify",
            Attack::Simulate => "simulate",
            Attack::NonReaderMore => "non-reader-more",
            Attack::SlowRead => "slow-read",
            Attack::TlsFlood => "tls-flood",
        }
    }

    /// The attack of a name (as [`Attack::name`] gives it, or its number 1..=15).
    pub fn parse(s: &str) -> Result<Attack> {
        let s = s.trim();
        if let Ok(n) = s.parse::<usize>() {
            if let Some(a) = n.checked_sub(1).and_then(|i| Attack::ALL.get(i)) {
                return Ok(*a);
            }
        }
        Attack::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .with_context(|| {
                format!(
                    "no attack {s:?}; the attacks are {}",
                    Attack::ALL.map(Attack::name).join(", ")
                )
            })
    }
}

/// Where and how hard an attack hits.
#[derive(Debug, Clone)]
pub struct Env {
    pub addr: SocketAddr,
    /// The server's admin listener (for slowloris), if it has one.
    pub admin: Option<SocketAddr>,
    /// Prefix of every group and topic the attacker names.
    pub run_id: String,
    /// A victim's group, for the attacks that read other groups.
    pub victim_group: String,
    /// Connections an attack uses (the floods excepted).
    pub connections: usize,
    /// Connections the connection flood opens at most.
    pub flood_connections: usize,
    /// Connections slowloris keeps open on the admin port.
    pub admin_connections: usize,
    /// The server's frame limit (payload bytes).
    pub max_frame: usize,
    /// Requests (or connections) an attack sends at most.
    pub max_requests: u64,
    /// The attack stops here.
    pub deadline: Instant,
}

/// What the server did to one attack.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcomes {
    /// Frames (or, for the floods, connection attempts) sent.
    pub sent: u64,
    /// Answers, by `Request:ERROR_CODE` (the first per-item code for responses with only
    /// per-item codes; an unknown code by its number).
    pub answers: BTreeMap<String, u64>,
    /// Connections the server closed (or reset) under the attacker.
    pub disconnects: u64,
    /// Connections the attacker could not open (or whose Hello was refused).
    pub connect_failures: u64,
    /// Times the attacker gave up waiting (for an answer or a write) and reconnected.
    pub stalls: u64,
    /// Attack-specific figures (e.g. connections held open, admin probes).
    pub extra: BTreeMap<&'static str, u64>,
}

/// [`Outcomes`] shared by an attack's tasks.
#[derive(Clone, Default)]
pub struct Tally(Arc<Mutex<Outcomes>>);

impl Tally {
    fn with<T>(&self, f: impl FnOnce(&mut Outcomes) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn answer(&self, response: &Response) {
        let label = label(response);
        self.with(|o| *o.answers.entry(label).or_default() += 1);
    }

    fn bump(&self, what: impl FnOnce(&mut Outcomes) -> &mut u64) {
        self.with(|o| *what(o) += 1);
    }

    fn extra(&self, key: &'static str, f: impl FnOnce(&mut u64)) {
        self.with(|o| f(o.extra.entry(key).or_default()));
    }

    pub fn snapshot(&self) -> Outcomes {
        self.with(|o| o.clone())
    }
}

/// `Request:ERROR_CODE` of an answer.
fn label(response: &Response) -> String {
    let code = match response {
        Response::DescribeGroups(r) => r.groups.first().map_or(0, |g| g.error_code),
        Response::CreateTopics(r) => r.results.first().map_or(0, |t| t.error_code),
        Response::DeleteGroups(r) => r.results.first().map_or(0, |g| g.error_code),
        Response::OffsetCommit(r) if r.error_code == 0 => r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(0, |p| p.error_code),
        other => other.error_code(),
    };
    let code = ErrorCode::from_code(code).map_or_else(|| code.to_string(), |c| c.name().into());
    format!("{}:{code}", response.name())
}

/// Runs `attack` until `env.deadline` (or its count limit), counting into `tally`.
pub async fn run(attack: Attack, env: &Env, tally: &Tally) -> Result<()> {
    match attack {
        Attack::Garbage => requests::garbage(env, tally).await,
        Attack::BigCommit => requests::big_commit(env, tally).await,
        Attack::Repeats => requests::repeats(env, tally).await,
        Attack::NonReader => sessions::non_reader(env, tally).await,
        Attack::JoinFlood => requests::join_flood(env, tally).await,
        Attack::HugeIds => requests::huge_ids(env, tally).await,
        Attack::Churn => sessions::churn(env, tally).await,
        Attack::BigTopics => requests::big_topics(env, tally).await,
        Attack::ConnFlood => sessions::conn_flood(env, tally).await,
        Attack::Slowloris => admin::slowloris(env, tally).await,
        Attack::Amplify => amplify::amplify(env, tally).await,
        Attack::Simulate => amplify::simulate(env, tally).await,
        Attack::NonReaderMore => sessions::non_reader_more(env, tally).await,
        Attack::SlowRead => admin::slow_read(env, tally).await,
        Attack::TlsFlood => tls::tls_flood(env, tally).await,
    }
}

// ------------------------------------------------------------------------------------------
// Frames
// ------------------------------------------------------------------------------------------

/// A whole frame (length prefix and payload), shared between sends.
type Frame = Arc<Vec<u8>>;

fn frame(request: impl Into<Request>) -> Result<Frame> {
    let mut buf = Vec::new();
    encode_request(&RequestFrame::new(1, request), &mut buf)?;
    Ok(Arc::new(buf))
}

/// Sets a frame's length prefix from its length.
fn fix_prefix(buf: &mut [u8]) -> Result<()> {
    let len = u32::try_from(buf.len().saturating_sub(4))?;
    buf.get_mut(..4)
        .context("frame shorter than its prefix")?
        .copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Pseudo-random bytes (xorshift; the bench needs noise, not quality).
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A string of `len` bytes, distinct per `i` (its decimal digits up front).
fn long_id(prefix: &str, i: u64, len: usize) -> String {
    let mut s = format!("{prefix}{i}-");
    let fill = len.saturating_sub(s.len());
    s.push_str(&"x".repeat(fill));
    s
}

fn join(group_id: String, member_id: String, instance: Option<String>) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id,
        member_id,
        group_instance_id: instance,
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 1_000,
        topics: vec!["atk".to_owned()],
        assignors: vec![AssignorMetadata {
            name: crate::member::ASSIGNOR.to_owned(),
            user_data: Vec::new(),
        }],
        owned_partitions: Vec::new(),
        reason: None,
    }
}

fn commit(group: &str, topic: String, partitions: Vec<OffsetCommitPartition>) -> Request {
    Request::OffsetCommit(OffsetCommitRequest {
        group_id: group.to_owned(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic { topic, partitions }],
    })
}

// ------------------------------------------------------------------------------------------
// Connections
// ------------------------------------------------------------------------------------------

/// Time an attacker waits for an answer (or for a write to go through) before it counts a
/// stall and reconnects.
const STALL: Duration = Duration::from_secs(2);

/// Connects and says Hello with `client_id`; `None` (counted) if the server refuses.
async fn open(addr: SocketAddr, client_id: &str, tally: &Tally) -> Option<TcpStream> {
    let attempt = async {
        let mut stream = connect_tcp(addr).await?;
        hello(&mut stream, client_id, None).await?;
        anyhow::Ok(stream)
    };
    match tokio::time::timeout(STALL, attempt).await {
        Ok(Ok(stream)) => Some(stream),
        // Out of file descriptors here, in the bench: not the server's doing.
        Ok(Err(e))
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .and_then(std::io::Error::raw_os_error)
                    == Some(24)
            }) =>
        {
            tally.extra("bench_out_of_file_descriptors", |n| *n += 1);
            None
        }
        _ => {
            tally.bump(|o| &mut o.connect_failures);
            None
        }
    }
}

/// How [`hammer`] drives its connections.
struct Hammer {
    connections: usize,
    /// Frames in flight per connection.
    depth: usize,
    /// The Hello client id, per connection opened (`i` counts connections).
    client_id: Arc<dyn Fn(u64) -> String + Send + Sync>,
    /// Reconnect after this many frames on one connection (0: never).
    recycle_after: u64,
    /// The frame of request number `i`.
    next: Arc<dyn Fn(u64) -> Result<Frame> + Send + Sync>,
}

/// `h.connections` connections sending `h.next` frames, `h.depth` in flight each, until the
/// deadline or `env.max_requests` frames; every answer counted, every disconnect or stall
/// followed by a new connection.
async fn hammer(env: &Env, tally: &Tally, h: Hammer) -> Result<()> {
    let sent = Arc::new(AtomicU64::new(0));
    let opened = Arc::new(AtomicU64::new(0));
    let h = Arc::new(h);
    let mut tasks = Vec::new();
    for _ in 0..h.connections.max(1) {
        let (env, tally, h, sent, opened) = (
            env.clone(),
            tally.clone(),
            Arc::clone(&h),
            Arc::clone(&sent),
            Arc::clone(&opened),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < env.deadline && sent.load(Ordering::Relaxed) < env.max_requests {
                let client_id = (h.client_id)(opened.fetch_add(1, Ordering::Relaxed));
                let Some(stream) = open(env.addr, &client_id, &tally).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                hammer_one(&env, &tally, &h, &sent, stream).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// One connection of [`hammer`], until it closes, stalls or the attack ends.
async fn hammer_one(
    env: &Env,
    tally: &Tally,
    h: &Hammer,
    sent: &AtomicU64,
    stream: TcpStream,
) -> Result<()> {
    let (read, mut write) = stream.into_split();
    let permits = Arc::new(Semaphore::new(h.depth.max(1)));
    let reader = {
        let (permits, tally) = (Arc::clone(&permits), tally.clone());
        tokio::spawn(async move {
            let mut frames = FramedRead::new(read, codec(MAX_RESPONSE_BYTES));
            while let Some(Ok(frame)) = frames.next().await {
                tally.extra("answer_bytes", |n| *n += frame.len() as u64);
                match decode_response(&frame) {
                    Ok(answer) => tally.answer(&answer.response),
                    Err(_) => tally.extra("undecodable_answers", |n| *n += 1),
                }
                permits.add_permits(1);
            }
            // Closed: the writer learns it from the closed semaphore.
            permits.close();
        })
    };
    let mut on_this = 0u64;
    loop {
        let now = Instant::now();
        if now >= env.deadline || sent.load(Ordering::Relaxed) >= env.max_requests {
            break;
        }
        if h.recycle_after > 0 && on_this >= h.recycle_after {
            break;
        }
        let limit = STALL.min(env.deadline - now);
        match tokio::time::timeout(limit, permits.acquire()).await {
            Ok(Ok(permit)) => permit.forget(),
            Ok(Err(_)) => {
                tally.bump(|o| &mut o.disconnects);
                break;
            }
            Err(_) => {
                if Instant::now() < env.deadline {
                    tally.bump(|o| &mut o.stalls);
                }
                break;
            }
        }
        let i = sent.fetch_add(1, Ordering::Relaxed);
        let frame = (h.next)(i)?;
        match tokio::time::timeout(STALL, write.write_all(&frame)).await {
            Ok(Ok(())) => {
                on_this += 1;
                tally.with(|o| {
                    o.sent += 1;
                    *o.extra.entry("request_bytes").or_default() += frame.len() as u64;
                });
            }
            Ok(Err(_)) => {
                tally.bump(|o| &mut o.disconnects);
                break;
            }
            Err(_) => {
                tally.bump(|o| &mut o.stalls);
                break;
            }
        }
    }
    reader.abort();
    Ok(())
}

fn fixed_client(id: &'static str) -> Arc<dyn Fn(u64) -> String + Send + Sync> {
    Arc::new(move |_| id.to_owned())
}
