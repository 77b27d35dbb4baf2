//! Test helpers: start the real server on `127.0.0.1:0` and talk to it over TCP with a raw
//! protocol connection (many requests in flight, answers matched by correlation id).
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use muster_coordinator::storage::MemoryStore;
use muster_coordinator::GroupConfig;
use muster_protocol::*;
use muster_server::{spawn, ServerOptions, ServerThread};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// How long a test waits for any one answer before failing.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

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
    let mut options = ServerOptions::new("127.0.0.1:0", Arc::new(MemoryStore::new()));
    options.group = config;
    options.workers = 2;
    spawn(options).expect("server starts")
}

type Waiters = Arc<Mutex<HashMap<u32, oneshot::Sender<Response>>>>;

/// One client connection.
pub struct Conn {
    write: OwnedWriteHalf,
    waiters: Waiters,
    next: AtomicU32,
    closed: Arc<tokio::sync::Notify>,
}

impl Conn {
    /// Connects without saying Hello.
    pub async fn connect_raw(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (mut read, write) = stream.into_split();
        let waiters: Waiters = Arc::default();
        let closed = Arc::new(tokio::sync::Notify::new());
        let (w, c) = (Arc::clone(&waiters), Arc::clone(&closed));
        tokio::spawn(async move {
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
                if let Some(tx) = w.lock().expect("lock").remove(&frame.correlation_id) {
                    let _ = tx.send(frame.response);
                }
            }
            w.lock().expect("lock").clear();
            c.notify_waiters();
            c.notify_one();
        });
        Ok(Conn {
            write,
            waiters,
            next: AtomicU32::new(1),
            closed,
        })
    }

    /// Connects and says Hello.
    pub async fn connect(addr: SocketAddr, client_id: &str) -> Result<Conn> {
        let mut conn = Conn::connect_raw(addr).await?;
        let hello = conn
            .call(Request::Hello(HelloRequest {
                protocol_version: 1,
                client_id: client_id.into(),
                auth_token: None,
            }))
            .await?;
        match hello {
            Response::Hello(h) if h.error_code == 0 => Ok(conn),
            other => bail!("hello refused: {other:?}"),
        }
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
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().expect("lock").insert(correlation_id, tx);
        let mut buf = Vec::new();
        encode_request(&RequestFrame { correlation_id, request }, &mut buf)?;
        self.write.write_all(&buf).await?;
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
        self.waiters.lock().expect("lock").insert(correlation_id, tx);
        rx
    }

    /// Waits until the server closes the connection.
    pub async fn closed(&self) -> Result<()> {
        tokio::time::timeout(ANSWER_TIMEOUT, self.closed.notified())
            .await
            .map_err(|_| anyhow!("connection not closed"))
    }
}

pub async fn wait(rx: oneshot::Receiver<Response>) -> Result<Response> {
    tokio::time::timeout(ANSWER_TIMEOUT, rx)
        .await
        .context("no answer in time")?
        .map_err(|_| anyhow!("connection closed before the answer"))
}

pub fn range_assignor() -> Vec<AssignorMetadata> {
    vec![AssignorMetadata {
        name: "range".into(),
        user_data: vec![],
    }]
}

pub fn join_request(group: &str, member_id: &str, session_ms: u32, rebalance_ms: u32) -> Request {
    Request::JoinGroup(JoinGroupRequest {
        group_id: group.into(),
        member_id: member_id.into(),
        group_instance_id: None,
        session_timeout_ms: session_ms,
        rebalance_timeout_ms: rebalance_ms,
        topics: vec!["orders".into()],
        assignors: range_assignor(),
        owned_partitions: vec![],
        reason: None,
    })
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

pub fn as_join(r: Response) -> JoinGroupResponse {
    match r {
        Response::JoinGroup(j) => j,
        other => panic!("expected JoinGroup, got {other:?}"),
    }
}

pub fn as_sync(r: Response) -> SyncGroupResponse {
    match r {
        Response::SyncGroup(s) => s,
        other => panic!("expected SyncGroup, got {other:?}"),
    }
}

pub fn as_heartbeat(r: Response) -> i16 {
    match r {
        Response::Heartbeat(h) => h.error_code,
        other => panic!("expected Heartbeat, got {other:?}"),
    }
}
