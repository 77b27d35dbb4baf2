//! Test helpers: start the real server on `127.0.0.1:0` and talk to it over TCP with a raw
//! protocol connection (many requests in flight, answers matched by correlation id).
//!
//! - [`start_server`] / [`start_server_with`]: a server on its own thread, with short timeouts
//!   from [`fast_config`];
//! - [`Conn`]: one connection; [`Conn::send`] pipelines, [`Conn::call`] waits, [`Conn::write_raw`]
//!   and [`frame`] / [`payload`] build malformed input;
//! - request builders (`join_group`, `heartbeat`, `commit`, ...) and `as_*` accessors that
//!   unwrap a response of the expected kind or fail the test;
//! - [`Member`] and [`form_group`]: members that completed a rebalance, each on its own
//!   connection, for tests that start from a Stable group.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context as _, Result};
use muster_coordinator::storage::MemoryStore;
use muster_coordinator::GroupConfig;
use muster_protocol::*;
use muster_server::{spawn, ServerOptions, ServerThread};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};

/// How long a test waits for any one answer before failing.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Session and rebalance timeout for members whose timeouts a test does not exercise.
pub const LONG_MS: u32 = 10_000;

/// The topic every member subscribes to unless a test says otherwise.
pub const TOPIC: &str = "orders";

/// Group rules with short timeouts so time-driven behaviour shows up quickly over TCP.
pub fn fast_config() -> GroupConfig {
    GroupConfig {
        min_session_timeout_ms: 100,
        max_session_timeout_ms: 60_000,
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

pub fn start_server(config: GroupConfig) -> ServerThread {
    start_server_with(config, |_| {})
}

/// Starts a server after `tweak` adjusted its options (frame limit, in-flight cap, ...).
pub fn start_server_with(
    config: GroupConfig,
    tweak: impl FnOnce(&mut ServerOptions),
) -> ServerThread {
    let mut options = ServerOptions::new("127.0.0.1:0", Arc::new(MemoryStore::new()));
    options.group = config;
    options.workers = 2;
    tweak(&mut options);
    spawn(options).expect("server starts")
}

// ---------------------------------------------------------------------------------- Conn

type Waiters = Arc<Mutex<HashMap<u32, oneshot::Sender<Response>>>>;
type Received = Arc<Mutex<Vec<(u32, Response)>>>;

/// One client connection.
pub struct Conn {
    write: Box<dyn AsyncWrite + Send + Unpin>,
    /// The task reading answers; it owns the read half, so dropping the connection stops it
    /// (a stream split in two closes only when both halves are gone).
    reader: tokio::task::AbortHandle,
    waiters: Waiters,
    received: Received,
    next: AtomicU32,
    closed: watch::Receiver<bool>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Conn {
    /// Connects without saying Hello.
    pub async fn connect_raw(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        Ok(Conn::from_halves(read, write))
    }

    /// A connection over any established byte stream (plain TCP, or TLS over it), without a
    /// Hello: what a test that swaps the transport builds its connections with.
    pub fn over<S>(stream: S) -> Conn
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (read, write) = tokio::io::split(stream);
        Conn::from_halves(read, write)
    }

    fn from_halves<R, W>(mut read: R, write: W) -> Conn
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let waiters: Waiters = Arc::default();
        let received: Received = Arc::default();
        let (closed_tx, closed) = watch::channel(false);
        let (w, log) = (Arc::clone(&waiters), Arc::clone(&received));
        let reader = tokio::spawn(async move {
            loop {
                let mut len = [0u8; 4];
                if read.read_exact(&mut len).await.is_err() {
                    break;
                }
                let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
                if read.read_exact(&mut payload).await.is_err() {
                    break;
                }
                let frame = decode_response(&payload).expect("server sends valid frames");
                log.lock()
                    .expect("lock")
                    .push((frame.correlation_id, frame.response.clone()));
                if let Some(tx) = w.lock().expect("lock").remove(&frame.correlation_id) {
                    let _ = tx.send(frame.response);
                }
            }
            w.lock().expect("lock").clear();
            let _ = closed_tx.send(true);
        });
        Conn {
            write: Box::new(write),
            waiters,
            received,
            next: AtomicU32::new(1),
            closed,
            reader: reader.abort_handle(),
        }
    }

    /// Connects and says Hello.
    pub async fn connect(addr: SocketAddr, client_id: &str) -> Result<Conn> {
        let mut conn = Conn::connect_raw(addr).await?;
        let hello = as_hello(conn.call(hello(1, client_id)).await?);
        ensure!(hello.error_code == 0, "hello refused: {hello:?}");
        Ok(conn)
    }

    /// Connects clients `{prefix}-{i}` for every `i` in `ids` at once, each after its Hello.
    pub async fn connect_many(
        addr: SocketAddr,
        prefix: &str,
        ids: std::ops::Range<usize>,
    ) -> Result<Vec<Conn>> {
        let n = ids.len();
        let first = ids.start;
        let mut set = tokio::task::JoinSet::new();
        for i in ids {
            let client_id = format!("{prefix}-{i}");
            set.spawn(async move { (i - first, Conn::connect(addr, &client_id).await) });
        }
        let mut conns: Vec<Option<Conn>> = (0..n).map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            let (i, conn) = joined?;
            conns[i] = Some(conn?);
        }
        Ok(conns.into_iter().flatten().collect())
    }

    /// Sends a request and returns a receiver for its answer (so tests can pipeline).
    pub async fn send(&mut self, request: Request) -> Result<oneshot::Receiver<Response>> {
        let correlation_id = self.next.fetch_add(1, Ordering::Relaxed);
        self.send_with_id(correlation_id, request).await
    }

    pub async fn send_with_id(
        &mut self,
        correlation_id: u32,
        request: Request,
    ) -> Result<oneshot::Receiver<Response>> {
        let rx = self.expect(correlation_id);
        self.write_raw(&frame(&payload(correlation_id, request)))
            .await?;
        Ok(rx)
    }

    pub async fn call(&mut self, request: Request) -> Result<Response> {
        let rx = self.send(request).await?;
        wait(rx).await
    }

    /// Writes raw bytes (for malformed-input tests).
    pub async fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.write.write_all(bytes).await?;
        Ok(())
    }

    /// Registers interest in a correlation id without sending anything.
    pub fn expect(&self, correlation_id: u32) -> oneshot::Receiver<Response> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .expect("lock")
            .insert(correlation_id, tx);
        rx
    }

    /// Waits until the server closes the connection.
    pub async fn closed(&self) -> Result<()> {
        let mut closed = self.closed.clone();
        tokio::time::timeout(ANSWER_TIMEOUT, closed.wait_for(|c| *c))
            .await
            .map_err(|_| anyhow!("connection not closed"))?
            .map_err(|_| anyhow!("connection reader vanished"))?;
        Ok(())
    }

    /// Every frame the server sent on this connection so far, in arrival order.
    pub fn received(&self) -> Vec<(u32, Response)> {
        self.received.lock().expect("lock").clone()
    }

    /// Whether the server has closed the connection (so far).
    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }
}

pub async fn wait(rx: oneshot::Receiver<Response>) -> Result<Response> {
    wait_for(rx, ANSWER_TIMEOUT).await
}

pub async fn wait_for(rx: oneshot::Receiver<Response>, limit: Duration) -> Result<Response> {
    tokio::time::timeout(limit, rx)
        .await
        .context("no answer in time")?
        .map_err(|_| anyhow!("connection closed before the answer"))
}

/// Fails the test if `rx` already has its answer (or lost its connection); does not wait.
#[track_caller]
pub fn assert_pending(rx: &mut oneshot::Receiver<Response>, what: &str) {
    match rx.try_recv() {
        Err(oneshot::error::TryRecvError::Empty) => {}
        Ok(answer) => panic!("{what} was answered too early: {answer:?}"),
        Err(oneshot::error::TryRecvError::Closed) => panic!("{what}: connection closed"),
    }
}

/// The payload (no length prefix) of a request frame.
pub fn payload(correlation_id: u32, request: Request) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_request_payload(&RequestFrame::new(correlation_id, request), &mut buf)
        .expect("test requests encode");
    buf
}

/// `payload` behind its big-endian length prefix.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("test payloads are small");
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

// ------------------------------------------------------------------------- requests

pub fn hello(version: u16, client_id: &str) -> Request {
    Request::Hello(HelloRequest {
        protocol_version: version,
        client_id: client_id.into(),
        auth_token: None,
    })
}

pub fn range_assignor() -> Vec<AssignorMetadata> {
    vec![AssignorMetadata {
        name: "range".into(),
        user_data: vec![],
    }]
}

/// A JoinGroup subscribed to [`TOPIC`] with the range assignor; adjust fields as needed.
pub fn join_group(
    group: &str,
    member_id: &str,
    session_ms: u32,
    rebalance_ms: u32,
) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.into(),
        member_id: member_id.into(),
        group_instance_id: None,
        session_timeout_ms: session_ms,
        rebalance_timeout_ms: rebalance_ms,
        topics: vec![TOPIC.into()],
        assignors: range_assignor(),
        owned_partitions: vec![],
        reason: None,
    }
}

pub fn join_request(group: &str, member_id: &str, session_ms: u32, rebalance_ms: u32) -> Request {
    join_group(group, member_id, session_ms, rebalance_ms).into()
}

pub fn heartbeat(group: &str, generation: i32, member_id: &str) -> Request {
    Request::Heartbeat(HeartbeatRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
    })
}

pub fn sync_request(
    group: &str,
    generation: i32,
    member_id: &str,
    assignments: Vec<MemberAssignment>,
) -> Request {
    Request::SyncGroup(SyncGroupRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
        assignor: None,
        assignments,
    })
}

/// `member_id` gets partitions `partitions` of [`TOPIC`].
pub fn assignment(member_id: &str, partitions: Vec<i32>) -> MemberAssignment {
    MemberAssignment {
        member_id: member_id.into(),
        partitions: vec![TopicPartitions {
            topic: TOPIC.into(),
            partitions,
        }],
        user_data: vec![],
    }
}

pub fn leave(group: &str, member_ids: &[&str]) -> Request {
    Request::LeaveGroup(LeaveGroupRequest {
        group_id: group.into(),
        members: member_ids
            .iter()
            .map(|m| LeavingMember {
                member_id: (*m).into(),
                group_instance_id: None,
                reason: None,
            })
            .collect(),
    })
}

/// An OffsetCommit of `(topic, partition, offset, metadata)` entries, one topic entry each.
pub fn commit(
    group: &str,
    generation: i32,
    member_id: &str,
    offsets: &[(&str, i32, i64, Option<String>)],
) -> Request {
    let mut topics: Vec<OffsetCommitTopic> = Vec::new();
    for (topic, partition, offset, metadata) in offsets {
        let entry = OffsetCommitPartition {
            partition: *partition,
            offset: *offset,
            metadata: metadata.clone(),
        };
        match topics.iter_mut().find(|t| t.topic == *topic) {
            Some(t) => t.partitions.push(entry),
            None => topics.push(OffsetCommitTopic {
                topic: (*topic).into(),
                partitions: vec![entry],
            }),
        }
    }
    Request::OffsetCommit(OffsetCommitRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
        topics,
    })
}

/// OffsetFetch of `(topic, partitions)`, or of everything committed with `None`.
pub fn fetch(group: &str, topics: Option<&[(&str, &[i32])]>) -> Request {
    Request::OffsetFetch(OffsetFetchRequest {
        group_id: group.into(),
        topics: topics.map(|ts| {
            ts.iter()
                .map(|(topic, partitions)| TopicPartitions {
                    topic: (*topic).into(),
                    partitions: partitions.to_vec(),
                })
                .collect()
        }),
    })
}

pub fn describe_groups(group_ids: &[&str]) -> Request {
    Request::DescribeGroups(DescribeGroupsRequest {
        group_ids: group_ids.iter().map(|g| (*g).into()).collect(),
    })
}

pub fn list_groups(states: &[&str]) -> Request {
    Request::ListGroups(ListGroupsRequest {
        states: states.iter().map(|s| (*s).into()).collect(),
    })
}

pub fn delete_groups(group_ids: &[&str]) -> Request {
    Request::DeleteGroups(DeleteGroupsRequest {
        group_ids: group_ids.iter().map(|g| (*g).into()).collect(),
    })
}

pub fn create_topics(topics: &[(&str, i32)]) -> Request {
    Request::CreateTopics(CreateTopicsRequest {
        topics: topics
            .iter()
            .map(|(topic, partitions)| TopicInfo {
                topic: (*topic).into(),
                partitions: *partitions,
            })
            .collect(),
    })
}

pub fn describe_topics(topics: Option<&[&str]>) -> Request {
    Request::DescribeTopics(DescribeTopicsRequest {
        topics: topics.map(|ts| ts.iter().map(|t| (*t).into()).collect()),
    })
}

pub fn find_coordinator(key: &str) -> Request {
    Request::FindCoordinator(FindCoordinatorRequest { key: key.into() })
}

pub fn describe_cluster() -> Request {
    Request::DescribeCluster(DescribeClusterRequest {})
}

// ------------------------------------------------------------------------ responses

macro_rules! accessors {
    ($($name:ident => $variant:ident($ty:ty)),* $(,)?) => {
        $(
            #[track_caller]
            pub fn $name(r: Response) -> $ty {
                match r {
                    Response::$variant(inner) => inner,
                    other => panic!(concat!("expected ", stringify!($variant), ", got {:?}"), other),
                }
            }
        )*
    };
}

accessors! {
    as_hello => Hello(HelloResponse),
    as_join => JoinGroup(JoinGroupResponse),
    as_sync => SyncGroup(SyncGroupResponse),
    as_leave => LeaveGroup(LeaveGroupResponse),
    as_commit => OffsetCommit(OffsetCommitResponse),
    as_fetch => OffsetFetch(OffsetFetchResponse),
    as_describe => DescribeGroups(DescribeGroupsResponse),
    as_list => ListGroups(ListGroupsResponse),
    as_delete => DeleteGroups(DeleteGroupsResponse),
    as_create_topics => CreateTopics(CreateTopicsResponse),
    as_describe_topics => DescribeTopics(DescribeTopicsResponse),
    as_error => Error(ErrorResponse),
    as_find_coordinator => FindCoordinator(FindCoordinatorResponse),
    as_describe_cluster => DescribeCluster(DescribeClusterResponse),
}

#[track_caller]
pub fn as_heartbeat(r: Response) -> i16 {
    match r {
        Response::Heartbeat(h) => h.error_code,
        other => panic!("expected Heartbeat, got {other:?}"),
    }
}

/// The wire value of `code` (reads better in assertions).
pub const fn code(code: ErrorCode) -> i16 {
    code.code()
}

/// Per-partition codes of an OffsetCommit answer, in answer order: `(topic, partition, code)`.
pub fn commit_codes(r: &OffsetCommitResponse) -> Vec<(String, i32, i16)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic.clone(), p.partition, p.error_code))
        })
        .collect()
}

/// Committed offsets of an OffsetFetch answer: `(topic, partition) -> (offset, metadata)`.
pub fn fetched(r: &OffsetFetchResponse) -> HashMap<(String, i32), (i64, Option<String>)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                assert_eq!(p.error_code, 0, "fetch of {}/{}", t.topic, p.partition);
                (
                    (t.topic.clone(), p.partition),
                    (p.offset, p.metadata.clone()),
                )
            })
        })
        .collect()
}

/// The one group a DescribeGroups of one id answered.
pub async fn describe_one(conn: &mut Conn, group: &str) -> Result<DescribedGroup> {
    let mut described = as_describe(conn.call(describe_groups(&[group])).await?);
    ensure!(
        described.groups.len() == 1,
        "one group described: {described:?}"
    );
    Ok(described.groups.remove(0))
}

// -------------------------------------------------------------------------- members

/// A member of a group, on its own connection.
pub struct Member {
    pub conn: Conn,
    pub group: String,
    pub id: String,
    pub generation: i32,
    pub session_ms: u32,
    pub rebalance_ms: u32,
}

impl Member {
    /// Asks for a member id (the MEMBER_ID_REQUIRED step); the member has not joined yet.
    pub async fn pending(
        mut conn: Conn,
        group: &str,
        session_ms: u32,
        rebalance_ms: u32,
    ) -> Result<Member> {
        let first = as_join(
            conn.call(join_request(group, "", session_ms, rebalance_ms))
                .await?,
        );
        ensure!(
            first.error_code == code(ErrorCode::MemberIdRequired),
            "expected MEMBER_ID_REQUIRED, got {first:?}"
        );
        ensure!(
            !first.member_id.is_empty(),
            "MEMBER_ID_REQUIRED without an id"
        );
        Ok(Member {
            conn,
            group: group.into(),
            id: first.member_id,
            generation: -1,
            session_ms,
            rebalance_ms,
        })
    }

    /// Sends this member's JoinGroup (held at the barrier until the rebalance completes).
    pub async fn send_join(&mut self) -> Result<oneshot::Receiver<Response>> {
        let request = join_request(&self.group, &self.id, self.session_ms, self.rebalance_ms);
        self.conn.send(request).await
    }

    /// Joins and waits for the barrier; remembers the new generation.
    pub async fn join(&mut self) -> Result<JoinGroupResponse> {
        let rx = self.send_join().await?;
        self.joined(rx).await
    }

    /// Waits for a JoinGroup sent with [`Member::send_join`]; remembers the new generation.
    pub async fn joined(&mut self, rx: oneshot::Receiver<Response>) -> Result<JoinGroupResponse> {
        let joined = as_join(wait(rx).await?);
        ensure!(
            joined.error_code == 0,
            "{} join refused: {joined:?}",
            self.id
        );
        self.generation = joined.generation_id;
        Ok(joined)
    }

    pub async fn send_sync(
        &mut self,
        assignments: Vec<MemberAssignment>,
    ) -> Result<oneshot::Receiver<Response>> {
        let request = sync_request(&self.group, self.generation, &self.id, assignments);
        self.conn.send(request).await
    }

    pub async fn sync(&mut self, assignments: Vec<MemberAssignment>) -> Result<SyncGroupResponse> {
        let rx = self.send_sync(assignments).await?;
        Ok(as_sync(wait(rx).await?))
    }

    pub async fn heartbeat(&mut self) -> Result<i16> {
        let request = heartbeat(&self.group, self.generation, &self.id);
        Ok(as_heartbeat(self.conn.call(request).await?))
    }

    /// Heartbeats every 20 ms until the answer is `want` (returns how long that took), failing
    /// on any other non-NONE answer or after `limit`.
    pub async fn heartbeat_until(&mut self, want: ErrorCode, limit: Duration) -> Result<Duration> {
        let start = Instant::now();
        loop {
            let got = self.heartbeat().await?;
            if got == want.code() {
                return Ok(start.elapsed());
            }
            ensure!(
                got == 0,
                "{}: heartbeat answered {got} while waiting for {want:?}",
                self.id
            );
            ensure!(
                start.elapsed() < limit,
                "{}: no {want:?} within {limit:?}",
                self.id
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Heartbeats every member every 20 ms until each has been answered `want` (keeping them all
/// alive meanwhile); fails on any other non-NONE answer or after `limit`.
pub async fn heartbeat_all_until(
    members: &mut [Member],
    want: ErrorCode,
    limit: Duration,
) -> Result<()> {
    let start = Instant::now();
    let mut seen = vec![false; members.len()];
    loop {
        for (m, seen) in members.iter_mut().zip(seen.iter_mut()) {
            let got = m.heartbeat().await?;
            ensure!(
                got == 0 || got == want.code(),
                "{}: heartbeat answered {got}",
                m.id
            );
            *seen |= got == want.code();
        }
        if seen.iter().all(|s| *s) {
            return Ok(());
        }
        ensure!(
            start.elapsed() < limit,
            "no {want:?} for every member within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends every member's JoinGroup at once and waits for all the answers (in member order).
pub async fn rejoin_all(members: &mut [Member]) -> Result<Vec<JoinGroupResponse>> {
    let mut held = Vec::with_capacity(members.len());
    for m in members.iter_mut() {
        held.push(m.send_join().await?);
    }
    let mut answers = Vec::with_capacity(members.len());
    for (m, rx) in members.iter_mut().zip(held) {
        answers.push(m.joined(rx).await?);
    }
    Ok(answers)
}

/// The members of a JoinGroup answer's member list, sorted.
pub fn member_ids(joined: &JoinGroupResponse) -> Vec<String> {
    let mut ids: Vec<String> = joined.members.iter().map(|m| m.member_id.clone()).collect();
    ids.sort();
    ids
}

/// Forms a Stable group of `n` members, each on its own connection (client ids `{group}-{i}`),
/// deterministically whatever the initial rebalance delay: member 0 joins alone and syncs; the
/// others then take member ids (pending ids hold an ordinary barrier), join, and member 0
/// rejoins. Member 0 is the leader; member `i` owns partition `i` of [`TOPIC`].
pub async fn form_group(
    addr: SocketAddr,
    group: &str,
    n: usize,
    session_ms: u32,
    rebalance_ms: u32,
) -> Result<Vec<Member>> {
    ensure!(n >= 1, "a group needs a member");
    let first_conn = Conn::connect(addr, &format!("{group}-0")).await?;
    let mut first = Member::pending(first_conn, group, session_ms, rebalance_ms).await?;
    let leader_id = first.id.clone();
    let joined = first.join().await?;
    ensure!(
        joined.leader_id == leader_id,
        "the first member leads: {joined:?}"
    );
    let synced = first.sync(vec![assignment(&leader_id, vec![0])]).await?;
    ensure!(synced.error_code == 0, "first sync: {synced:?}");
    let mut members = vec![first];
    if n == 1 {
        return Ok(members);
    }
    for conn in Conn::connect_many(addr, group, 1..n).await? {
        members.push(Member::pending(conn, group, session_ms, rebalance_ms).await?);
    }
    let answers = rejoin_all(&mut members).await?;
    for (m, joined) in members.iter().zip(answers) {
        ensure!(
            joined.leader_id == leader_id,
            "member 0 keeps leading: {joined:?}"
        );
        if m.id == leader_id {
            ensure!(
                joined.members.len() == n,
                "leader sees {n} members: {joined:?}"
            );
        }
    }
    let assignments: Vec<MemberAssignment> = members
        .iter()
        .enumerate()
        .map(|(i, m)| assignment(&m.id, vec![i32::try_from(i).expect("small")]))
        .collect();
    let mut syncs = Vec::with_capacity(n);
    for (i, m) in members.iter_mut().enumerate() {
        let mine = if i == 0 {
            assignments.clone()
        } else {
            Vec::new()
        };
        syncs.push(m.send_sync(mine).await?);
    }
    for (i, rx) in syncs.into_iter().enumerate() {
        let synced = as_sync(wait(rx).await?);
        ensure!(synced.error_code == 0, "member {i} sync: {synced:?}");
    }
    Ok(members)
}

/// This process's resident memory in bytes (Linux; 0 if unreadable). The test server runs in
/// the test's own process, so hostile-client tests watch it grow with this.
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
