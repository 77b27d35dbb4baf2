//! The hostile client of `hostile` ([`crate::scenario::hostile`]): ten attacks, each run by one
//! client (over at most a few connections, or many for the connection floods), each bounded in
//! time (it stops at its deadline) and in count, and each aimed only at the server under test.
//!
//! An attacker never fails on what the server does to it: an answer of any kind, an error
//! code, a closed connection or a refused one are all "the server defended itself", counted in
//! [`Outcomes`], and the attacker carries on (reconnecting when it must). Only the bench's own
//! faults (it cannot encode a frame) end an attack early.
//!
//! Most attacks go through [`hammer`]: `connections` raw connections, each keeping at most
//! `depth` frames in flight, with a reader task that counts every answer by request and error
//! code. The rest (the pipelining client that never reads, join/leave churn, the connection
//! flood and slowloris on the admin port) have their own loops.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use futures_util::StreamExt as _;
use muster_protocol::{
    decode_response, encode_request, AssignorMetadata, CreateTopicsRequest, DescribeGroupsRequest,
    ErrorCode, HelloRequest, JoinGroupRequest, LeaveGroupRequest, LeavingMember,
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic, OffsetFetchRequest, Request,
    RequestFrame, Response, TopicInfo, TopicPartitions, PROTOCOL_VERSION,
};
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::codec::FramedRead;

use crate::client::{codec, connect_stream, Conn, MAX_RESPONSE_BYTES};

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
}

impl Attack {
    pub const ALL: [Attack; 10] = [
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
    ];

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
        }
    }

    /// The attack of a name (as [`Attack::name`] gives it, or its number 1..=10).
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
        Attack::Garbage => garbage(env, tally).await,
        Attack::BigCommit => big_commit(env, tally).await,
        Attack::Repeats => repeats(env, tally).await,
        Attack::NonReader => non_reader(env, tally).await,
        Attack::JoinFlood => join_flood(env, tally).await,
        Attack::HugeIds => huge_ids(env, tally).await,
        Attack::Churn => churn(env, tally).await,
        Attack::BigTopics => big_topics(env, tally).await,
        Attack::ConnFlood => conn_flood(env, tally).await,
        Attack::Slowloris => slowloris(env, tally).await,
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
        let mut stream = connect_stream(addr).await?;
        let mut buf = Vec::new();
        encode_request(
            &RequestFrame::new(
                0,
                HelloRequest {
                    protocol_version: PROTOCOL_VERSION,
                    client_id: client_id.to_owned(),
                    auth_token: None,
                },
            ),
            &mut buf,
        )?;
        stream.write_all(&buf).await?;
        let mut frames = FramedRead::new(&mut stream, codec(MAX_RESPONSE_BYTES));
        let answer = frames.next().await.context("closed before Hello")??;
        match decode_response(&answer)?.response {
            Response::Hello(h) if h.error_code == ErrorCode::None.code() => {}
            other => bail!("Hello refused: {other:?}"),
        }
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
                tally.bump(|o| &mut o.sent);
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

// ------------------------------------------------------------------------------------------
// The attacks
// ------------------------------------------------------------------------------------------

/// (1) Max-size frames that do not decode: noise; a DescribeGroups whose id count claims
/// 2^40; a valid Heartbeat followed by a frame's worth of trailing bytes.
async fn garbage(env: &Env, tally: &Tally) -> Result<()> {
    let max = env.max_frame;
    let mut templates: Vec<Frame> = Vec::new();
    let mut noisy = vec![0u8; 4];
    noisy.extend(noise(max, 0x9e37_79b9_7f4a_7c15));
    fix_prefix(&mut noisy)?;
    templates.push(Arc::new(noisy));
    let mut huge_len = frame(DescribeGroupsRequest {
        group_ids: Vec::new(),
    })?
    .to_vec();
    let at = huge_len.len().saturating_sub(8);
    if let Some(tail) = huge_len.get_mut(at..) {
        tail.copy_from_slice(&(1u64 << 40).to_le_bytes());
    }
    huge_len.resize(max + 4, 0);
    fix_prefix(&mut huge_len)?;
    templates.push(Arc::new(huge_len));
    let mut trailing = frame(muster_protocol::HeartbeatRequest {
        group_id: env.victim_group.clone(),
        generation_id: 1,
        member_id: "m".to_owned(),
        group_instance_id: None,
    })?
    .to_vec();
    trailing.resize(max + 4, 0xff);
    fix_prefix(&mut trailing)?;
    templates.push(Arc::new(trailing));
    let templates = Arc::new(templates);
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 4,
            client_id: fixed_client("atk-garbage"),
            recycle_after: 0,
            next: Arc::new(move |i| {
                let k = usize::try_from(i).unwrap_or(0) % templates.len();
                templates.get(k).cloned().context("no template")
            }),
        },
    )
    .await
}

/// (2) OffsetCommit (generation -1, to an Empty group) with a topic name of half a frame
/// and as many partitions as fill the other half.
async fn big_commit(env: &Env, tally: &Tally) -> Result<()> {
    let topic_len = env.max_frame / 2;
    // partition i32 + offset i64 + metadata None (1 byte).
    let partitions = (env.max_frame - topic_len).saturating_sub(512) / 13;
    let group = format!("{}-atk-commit", env.run_id);
    let request = commit(
        &group,
        long_id("t", 0, topic_len),
        (0..i32::try_from(partitions)?)
            .map(|p| OffsetCommitPartition {
                partition: p,
                offset: 1,
                metadata: None,
            })
            .collect(),
    );
    let template = frame(request)?;
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 1,
            client_id: fixed_client("atk-commit"),
            recycle_after: 0,
            next: Arc::new(move |_| -> Result<Frame> { Ok(Arc::clone(&template)) }),
        },
    )
    .await
}

/// Commits `partitions` partitions of topic `atk` with `metadata_len` bytes of metadata each
/// to `group` (a few requests, each under the frame limit), so that fetches have big answers.
async fn seed_offsets(
    env: &Env,
    tally: &Tally,
    group: &str,
    partitions: i32,
    metadata_len: usize,
) -> Result<()> {
    let Ok(conn) = Conn::connect(env.addr, "atk-seed").await else {
        tally.bump(|o| &mut o.connect_failures);
        return Ok(());
    };
    let per_request = i32::try_from((env.max_frame / 2 / (metadata_len + 32)).max(1))?;
    let metadata = "m".repeat(metadata_len);
    let mut start = 0;
    while start < partitions {
        let end = partitions.min(start + per_request);
        let request = commit(
            group,
            "atk".to_owned(),
            (start..end)
                .map(|p| OffsetCommitPartition {
                    partition: p,
                    offset: 1,
                    metadata: Some(metadata.clone()),
                })
                .collect(),
        );
        match conn.call_within(Duration::from_secs(10), request).await {
            Ok(answer) => tally.answer(&answer),
            Err(_) => {
                tally.bump(|o| &mut o.stalls);
                return Ok(());
            }
        }
        start = end;
    }
    Ok(())
}

/// (3) DescribeGroups naming a victim's group as many times as fit, and OffsetFetch naming one
/// partition (with 1 000 bytes of stored metadata) as many times as fit, alternately.
async fn repeats(env: &Env, tally: &Tally) -> Result<()> {
    let group = format!("{}-atk-repeats", env.run_id);
    seed_offsets(env, tally, &group, 1, 1_000).await?;
    let ids = env.max_frame.saturating_sub(512) / (env.victim_group.len() + 8);
    let describe = frame(DescribeGroupsRequest {
        group_ids: vec![env.victim_group.clone(); ids],
    })?;
    let fetch = frame(OffsetFetchRequest {
        group_id: group,
        topics: Some(vec![TopicPartitions {
            topic: "atk".to_owned(),
            partitions: vec![0; env.max_frame.saturating_sub(512) / 4],
        }]),
    })?;
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 1,
            client_id: fixed_client("atk-repeats"),
            recycle_after: 0,
            next: Arc::new(move |i| -> Result<Frame> {
                Ok(Arc::clone(if i % 2 == 0 { &describe } else { &fetch }))
            }),
        },
    )
    .await
}

/// (4) A client that pipelines OffsetFetch requests for a group with 1 000 committed
/// partitions of 1 000 bytes of metadata each (answers of about 1 MB) and never reads.
async fn non_reader(env: &Env, tally: &Tally) -> Result<()> {
    let group = format!("{}-atk-nonreader", env.run_id);
    seed_offsets(env, tally, &group, 1_000, 1_000).await?;
    let fetch = frame(OffsetFetchRequest {
        group_id: group,
        topics: None,
    })?;
    let sent = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..env.connections.max(1) {
        let (env, tally, fetch, sent) = (
            env.clone(),
            tally.clone(),
            Arc::clone(&fetch),
            Arc::clone(&sent),
        );
        tasks.push(tokio::spawn(async move {
            // Held (unread) until the attack ends, so the server keeps what it buffered.
            let mut held = Vec::new();
            while Instant::now() < env.deadline && sent.load(Ordering::Relaxed) < env.max_requests {
                let Some(mut stream) = open(env.addr, "atk-nonreader", &tally).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                loop {
                    let now = Instant::now();
                    if now >= env.deadline || sent.load(Ordering::Relaxed) >= env.max_requests {
                        break;
                    }
                    // Many requests per write: the point is to have many in flight.
                    let mut batch = Vec::with_capacity(fetch.len() * 64);
                    for _ in 0..64 {
                        batch.extend_from_slice(&fetch);
                    }
                    match tokio::time::timeout(env.deadline - now, stream.write_all(&batch)).await {
                        Ok(Ok(())) => {
                            sent.fetch_add(64, Ordering::Relaxed);
                            tally.with(|o| o.sent += 64);
                        }
                        Ok(Err(_)) => {
                            tally.bump(|o| &mut o.disconnects);
                            break;
                        }
                        // The server stopped reading us: it is holding back, which is fine.
                        Err(_) => {
                            tally.extra("writes_blocked_until_deadline", |n| *n += 1);
                            break;
                        }
                    }
                }
                held.push(stream);
            }
            tally.extra("connections", |n| *n += held.len() as u64);
        }));
    }
    for task in tasks {
        task.await?;
    }
    Ok(())
}

/// (5) JoinGroup with no member id, pipelined: to one group (pending member ids pile up) and
/// to a new group each time, alternately.
async fn join_flood(env: &Env, tally: &Tally) -> Result<()> {
    let run_id = env.run_id.clone();
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 32,
            client_id: fixed_client("atk-flood"),
            recycle_after: 0,
            next: Arc::new(move |i| {
                let group = if i % 2 == 0 {
                    format!("{run_id}-atk-flood")
                } else {
                    format!("{run_id}-atk-new-{i}")
                };
                frame(join(group, String::new(), None))
            }),
        },
    )
    .await
}

/// (6) Frame-sized ids: the Hello client id (which the server puts into member ids), a new
/// group's id, an unknown member id, and a static member's instance id, each nearly a frame
/// and each new.
async fn huge_ids(env: &Env, tally: &Tally) -> Result<()> {
    let len = env.max_frame.saturating_sub(1_024);
    let hello_len = env.max_frame.saturating_sub(256);
    let group = format!("{}-atk-ids", env.run_id);
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 4,
            client_id: Arc::new(move |i| long_id("c", i, hello_len)),
            // New connections keep new client ids coming.
            recycle_after: 16,
            next: Arc::new(move |i| {
                let request = match i % 3 {
                    0 => join(long_id("g", i, len), String::new(), None),
                    1 => join(group.clone(), long_id("m", i, len), None),
                    _ => join(group.clone(), String::new(), Some(long_id("i", i, len))),
                };
                frame(request)
            }),
        },
    )
    .await
}

/// (7) `connections` members join one group and leave it again, over and over: every join and
/// every leave starts a rebalance of that group.
async fn churn(env: &Env, tally: &Tally) -> Result<()> {
    let group = format!("{}-atk-churn", env.run_id);
    let sent = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..env.connections.max(1) {
        let (env, tally, group, sent) =
            (env.clone(), tally.clone(), group.clone(), Arc::clone(&sent));
        tasks.push(tokio::spawn(async move {
            'connect: while Instant::now() < env.deadline {
                let Ok(conn) = Conn::connect(env.addr, "atk-churn").await else {
                    tally.bump(|o| &mut o.connect_failures);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let mut member_id = String::new();
                while Instant::now() < env.deadline
                    && sent.fetch_add(1, Ordering::Relaxed) < env.max_requests
                {
                    tally.bump(|o| &mut o.sent);
                    let answer = match conn
                        .call_within(STALL, join(group.clone(), member_id.clone(), None))
                        .await
                    {
                        Ok(answer) => answer,
                        Err(_) => {
                            tally.bump(|o| &mut o.stalls);
                            continue 'connect;
                        }
                    };
                    tally.answer(&answer);
                    let Response::JoinGroup(joined) = answer else {
                        continue;
                    };
                    if joined.error_code == ErrorCode::MemberIdRequired.code() {
                        member_id = joined.member_id;
                        continue;
                    }
                    if joined.error_code != ErrorCode::None.code() {
                        member_id.clear();
                        continue;
                    }
                    tally.extra("max_generation", |g| {
                        *g = (*g).max(u64::try_from(joined.generation_id).unwrap_or(0));
                    });
                    tally.bump(|o| &mut o.sent);
                    let leave = LeaveGroupRequest {
                        group_id: group.clone(),
                        members: vec![LeavingMember {
                            member_id: std::mem::take(&mut member_id),
                            group_instance_id: None,
                            reason: None,
                        }],
                    };
                    match conn.call_within(STALL, leave).await {
                        Ok(answer) => tally.answer(&answer),
                        Err(_) => {
                            tally.bump(|o| &mut o.stalls);
                            continue 'connect;
                        }
                    }
                }
                break;
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    Ok(())
}

/// (8) CreateTopics: one new topic with i32::MAX partitions, and as many new topics as fit
/// in a frame with i32::MAX partitions each, alternately.
async fn big_topics(env: &Env, tally: &Tally) -> Result<()> {
    let max = env.max_frame;
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 1,
            client_id: fixed_client("atk-topics"),
            recycle_after: 0,
            next: Arc::new(move |i| {
                let topics = if i % 2 == 0 {
                    vec![TopicInfo {
                        topic: format!("atk-big-{i}"),
                        partitions: i32::MAX,
                    }]
                } else {
                    // Name (8-byte length + ~16 bytes) + partitions (4 bytes).
                    (0..max.saturating_sub(512) / 32)
                        .map(|j| TopicInfo {
                            topic: format!("atk-{i}-{j}"),
                            partitions: i32::MAX,
                        })
                        .collect()
                };
                frame(CreateTopicsRequest { topics })
            }),
        },
    )
    .await
}

/// (9) Opens connections (with Hello), 256 at a time, up to `flood_connections` or until the
/// server refuses, and holds them until the deadline.
async fn conn_flood(env: &Env, tally: &Tally) -> Result<()> {
    let mut held: Vec<TcpStream> = Vec::new();
    let limit = env
        .flood_connections
        .min(usize::try_from(env.max_requests)?);
    let mut attempts = 0usize;
    while attempts < limit && Instant::now() < env.deadline {
        let batch = 256.min(limit - attempts);
        attempts += batch;
        let opens = (0..batch).map(|_| open(env.addr, "atk-conn", tally));
        for stream in futures_util::future::join_all(opens).await {
            tally.bump(|o| &mut o.sent);
            held.extend(stream);
        }
    }
    tally.extra("connections_open_peak", |n| *n = held.len() as u64);
    // Hold them; count the ones the server closes meanwhile.
    let now = Instant::now();
    if now < env.deadline {
        tokio::time::sleep(env.deadline - now).await;
    }
    // Closed by the server: end of stream or a reset (an open idle socket would block).
    let closed = held
        .iter()
        .filter(|s| match s.try_read(&mut [0u8; 1]) {
            Ok(n) => n == 0,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        })
        .count() as u64;
    tally.with(|o| o.disconnects += closed);
    Ok(())
}

/// (10) Slowloris on the admin port: `admin_connections` connections each send half a request
/// head, then one more header byte a second (reconnecting when the server closes them); a
/// probe meanwhile asks `/readyz` properly every 200 ms.
async fn slowloris(env: &Env, tally: &Tally) -> Result<()> {
    let Some(admin) = env.admin else {
        tally.extra("skipped_no_admin_listener", |n| *n = 1);
        return Ok(());
    };
    let open_now = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let count = env
        .admin_connections
        .min(usize::try_from(env.max_requests)?);
    for k in 0..count {
        let (env, tally, open_now) = (env.clone(), tally.clone(), Arc::clone(&open_now));
        tasks.push(tokio::spawn(async move {
            // Spread the connects over the first second.
            tokio::time::sleep(Duration::from_micros(1_000_000 * k as u64 / count as u64)).await;
            while Instant::now() < env.deadline {
                let Ok(Ok(mut stream)) =
                    tokio::time::timeout(STALL, TcpStream::connect(admin)).await
                else {
                    tally.bump(|o| &mut o.connect_failures);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                tally.bump(|o| &mut o.sent);
                let now_open = open_now.fetch_add(1, Ordering::Relaxed) + 1;
                tally.extra("admin_connections_open_peak", |n| *n = (*n).max(now_open));
                let mut closed = stream
                    .write_all(b"GET /metrics HTTP/1.1\r\nHost: muster\r\nX-Slow: ")
                    .await
                    .is_err();
                let mut buf = [0u8; 512];
                while !closed && Instant::now() < env.deadline {
                    tokio::select! {
                        read = stream.read(&mut buf) => closed = !matches!(read, Ok(n) if n > 0),
                        () = tokio::time::sleep(Duration::from_secs(1)) => {
                            closed = stream.write_all(b"a").await.is_err();
                        }
                    }
                }
                open_now.fetch_sub(1, Ordering::Relaxed);
                if closed {
                    tally.bump(|o| &mut o.disconnects);
                }
            }
        }));
    }
    // The probe: what a load balancer's health check sees meanwhile.
    while Instant::now() < env.deadline {
        let started = Instant::now();
        let probe = async {
            let mut stream = TcpStream::connect(admin).await?;
            stream
                .write_all(b"GET /readyz HTTP/1.1\r\nHost: muster\r\nConnection: close\r\n\r\n")
                .await?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await?;
            anyhow::Ok(answer.starts_with(b"HTTP/1.1 200"))
        };
        let ok = matches!(tokio::time::timeout(STALL, probe).await, Ok(Ok(true)));
        let ms = started.elapsed().as_millis() as u64;
        tally.extra(if ok { "probe_ok" } else { "probe_failed" }, |n| *n += 1);
        tally.extra("probe_max_ms", |n| *n = (*n).max(ms));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for task in tasks {
        task.await?;
    }
    Ok(())
}
