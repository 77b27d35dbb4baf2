//! One client connection: a session actor that reads frames, enforces the connection rules of
//! protocol §1 (Hello first, frame limits, undecodable payloads), and dispatches each request
//! to its group actor (address cached per group after the first request) or the supervisor;
//! and a writer task that sends the responses, in whatever order they complete.
//!
//! Backpressure: each request takes a slot from the connection's in-flight semaphore, released
//! when its response has been written. With every slot taken the session stops reading, so a
//! client that floods requests or never reads its responses holds a bounded amount of memory.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use bytes::BytesMut;
use metrics::gauge;
use muster_coordinator::actors::{
    AdminCall, GroupActor, GroupCall, Outgoing, ReplyTo, Route, Supervisor, NO_REQUEST,
};
use muster_coordinator::engine::{group_of, ClientInfo};
use muster_protocol::{
    correlation_hint, decode_request, encode_response, ErrorCode, HelloRequest, HelloResponse,
    Request, RequestFrame, Response, ResponseFrame, MAX_PROTOCOL_VERSION, MIN_PROTOCOL_VERSION,
};
use tokio::io::{AsyncWriteExt, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use tracing::{debug, info, warn};

use crate::auth::Authenticator;
use crate::telemetry::RequestMetrics;

/// Settings and state every session shares.
pub struct SessionSettings {
    pub max_frame_bytes: u32,
    pub max_in_flight: usize,
    pub max_connections: usize,
    pub idle_timeout: Option<Duration>,
    pub server_id: String,
    pub authenticator: Arc<dyn Authenticator>,
    pub supervisor: Addr<Supervisor>,
    /// Connections open now (the listener counts them in, sessions count themselves out).
    pub open_connections: AtomicUsize,
    shutdown: watch::Sender<bool>,
}

impl SessionSettings {
    pub fn new(
        max_frame_bytes: u32,
        max_in_flight: usize,
        max_connections: usize,
        idle_timeout: Option<Duration>,
        server_id: String,
        authenticator: Arc<dyn Authenticator>,
        supervisor: Addr<Supervisor>,
    ) -> Self {
        Self {
            max_frame_bytes,
            max_in_flight,
            max_connections,
            idle_timeout,
            server_id,
            authenticator,
            supervisor,
            open_connections: AtomicUsize::new(0),
            shutdown: watch::channel(false).0,
        }
    }

    /// Tells every session to write what it has queued and close.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }
}

/// One counted connection: counted in by the listener, out when dropped (whatever way the
/// session ends, even if it never started).
pub struct ConnectionSlot(Arc<SessionSettings>);

impl ConnectionSlot {
    /// Counts a connection in, unless the server is at `max_connections`.
    pub fn acquire(settings: &Arc<SessionSettings>) -> Option<ConnectionSlot> {
        let admitted = settings
            .open_connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < settings.max_connections).then_some(open + 1)
            })
            .is_ok();
        if !admitted {
            return None;
        }
        gauge!("muster_connections_open").increment(1.0);
        Some(ConnectionSlot(Arc::clone(settings)))
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::AcqRel);
        gauge!("muster_connections_open").decrement(1.0);
    }
}

/// Most group addresses one connection caches (a consumer talks to one or two groups; an admin
/// tool may touch many, and then the cache simply starts over).
const GROUP_CACHE_LIMIT: usize = 256;

/// Bytes the writer gathers from ready responses before one write.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

pub struct Session {
    settings: Arc<SessionSettings>,
    _slot: ConnectionSlot,
    last_frame: Instant,
    /// `connection`, `peer` and (after Hello) `client_id`: the parent of every event this
    /// session logs. Named as the parent per event rather than entered per frame, which cost
    /// ~15 % of pipelined heartbeat throughput (docs/benchmarks.md).
    span: tracing::Span,
    client: ClientInfo,
    greeted: bool,
    tx: mpsc::UnboundedSender<Outgoing>,
    permits: Arc<Semaphore>,
    groups: HashMap<String, Addr<GroupActor>>,
    reader: Option<FramedRead<tokio::io::ReadHalf<TcpStream>, LengthDelimitedCodec>>,
    writer: Option<(WriteHalf<TcpStream>, mpsc::UnboundedReceiver<Outgoing>)>,
    close_tx: Option<oneshot::Sender<()>>,
    closing: bool,
}

impl Session {
    pub fn new(id: u64, stream: TcpStream, peer: SocketAddr, slot: ConnectionSlot) -> Self {
        let settings = Arc::clone(&slot.0);
        let (read, write) = tokio::io::split(stream);
        let codec = LengthDelimitedCodec::builder()
            .big_endian()
            .length_field_length(4)
            .max_frame_length(settings.max_frame_bytes as usize)
            .new_codec();
        let (tx, rx) = mpsc::unbounded_channel();
        let permits = Arc::new(Semaphore::new(settings.max_in_flight));
        Self {
            _slot: slot,
            last_frame: Instant::now(),
            span: tracing::info_span!(
                "connection",
                connection = id,
                peer = %peer,
                client_id = tracing::field::Empty
            ),
            client: ClientInfo {
                client_id: Arc::from(""),
                client_host: Arc::from(peer.ip().to_string()),
            },
            settings,
            greeted: false,
            tx,
            permits,
            groups: HashMap::new(),
            reader: Some(FramedRead::new(read, codec)),
            writer: Some((write, rx)),
            close_tx: None,
            closing: false,
        }
    }

    fn reply_to(&self, correlation_id: u32, permit: OwnedSemaphorePermit, tag: u32) -> ReplyTo {
        ReplyTo::new(self.tx.clone(), correlation_id, Some(permit), tag)
    }

    /// An answer path that holds no in-flight slot (for answers to frames never dispatched).
    fn reply_unslotted(&self, correlation_id: u32) -> ReplyTo {
        ReplyTo::new(self.tx.clone(), correlation_id, None, NO_REQUEST)
    }

    /// Sends a last response and closes the connection once it is written. The response goes
    /// through `reply` itself: dropping a `ReplyTo` unanswered would send
    /// COORDINATOR_NOT_AVAILABLE first.
    fn close_with(&mut self, reply: ReplyTo, response: Response, ctx: &mut Context<Self>) {
        reply.send(response);
        self.closing = true;
        if let Some(close) = self.close_tx.take() {
            let _ = close.send(());
        }
        ctx.stop();
    }

    fn on_frame(&mut self, frame: BytesMut, permit: OwnedSemaphorePermit, ctx: &mut Context<Self>) {
        if self.closing {
            return;
        }
        if frame.is_empty() {
            warn!(parent: &self.span, "zero-length frame; closing");
            let reply = self.reply_unslotted(0);
            return self.close_with(reply, too_large("frame length 0"), ctx);
        }
        let RequestFrame {
            correlation_id,
            request,
        } = match decode_request(&frame) {
            Ok(decoded) => decoded,
            Err(e) => {
                debug!(parent: &self.span, error = %e, "undecodable request");
                let reply = self.reply_to(correlation_hint(&frame), permit, NO_REQUEST);
                reply.send(Response::error(ErrorCode::InvalidRequest, e.to_string()));
                return;
            }
        };
        let reply = self.reply_to(correlation_id, permit, request.tag());
        match request {
            Request::Hello(hello) => self.hello(hello, reply, ctx),
            _ if !self.greeted => {
                self.close_with(
                    reply,
                    Response::error(ErrorCode::IllegalState, "the first request must be Hello"),
                    ctx,
                );
            }
            Request::JoinGroup(_)
            | Request::SyncGroup(_)
            | Request::Heartbeat(_)
            | Request::LeaveGroup(_)
            | Request::OffsetCommit(_)
            | Request::OffsetFetch(_) => self.dispatch_to_group(request, reply, ctx),
            Request::DescribeGroups(_)
            | Request::ListGroups(_)
            | Request::DeleteGroups(_)
            | Request::CreateTopics(_)
            | Request::DescribeTopics(_) => {
                self.settings
                    .supervisor
                    .do_send(AdminCall { request, reply });
            }
        }
    }

    fn hello(&mut self, hello: HelloRequest, reply: ReplyTo, ctx: &mut Context<Self>) {
        let answer = |error: ErrorCode, settings: &SessionSettings| {
            Response::Hello(HelloResponse {
                error_code: error.code(),
                min_version: MIN_PROTOCOL_VERSION,
                max_version: MAX_PROTOCOL_VERSION,
                server_id: settings.server_id.clone(),
            })
        };
        if !(MIN_PROTOCOL_VERSION..=MAX_PROTOCOL_VERSION).contains(&hello.protocol_version) {
            // The connection stays open for a second Hello with a version we speak.
            return reply.send(answer(ErrorCode::UnsupportedVersion, &self.settings));
        }
        if let Err(e) = self
            .settings
            .authenticator
            .authenticate(hello.auth_token.as_deref())
        {
            warn!(parent: &self.span, reason = %e, "authentication failed");
            let response = answer(ErrorCode::AuthenticationFailed, &self.settings);
            return self.close_with(reply, response, ctx);
        }
        self.greeted = true;
        self.span.record("client_id", hello.client_id.as_str());
        self.client.client_id = Arc::from(hello.client_id.as_str());
        debug!(parent: &self.span, "hello");
        reply.send(answer(ErrorCode::None, &self.settings));
    }

    fn dispatch_to_group(&mut self, request: Request, reply: ReplyTo, ctx: &mut Context<Self>) {
        let Some(group_id) = group_of(&request) else {
            return reply.send(Response::error(
                ErrorCode::InvalidRequest,
                "not a group request",
            ));
        };
        let cached = self.groups.get(group_id).cloned();
        let mut call = GroupCall {
            request,
            reply,
            client: self.client.clone(),
        };
        if let Some(addr) = cached {
            match addr.try_send(call) {
                Ok(()) => return,
                // A busy group: queue anyway; this connection's in-flight cap bounds it.
                Err(SendError::Full(back)) => return addr.do_send(back),
                Err(SendError::Closed(back)) => call = back,
            }
        }
        let group_id = group_of(&call.request).unwrap_or_default().to_owned();
        self.groups.remove(&group_id);
        let route = Route {
            group_id: group_id.clone(),
            call,
        };
        // The request must not be tied to this session's lifetime: actix skips a message whose
        // sender dropped the answer future, so a request routed just before the client closed
        // (a LeaveGroup on shutdown, say) would be lost with the session's futures.
        let routed = self.settings.supervisor.send(route);
        let session = ctx.address();
        actix::spawn(async move {
            if let Ok(Some(addr)) = routed.await {
                session.do_send(CacheGroup { group_id, addr });
            }
        });
    }
}

fn too_large(message: &str) -> Response {
    Response::error(ErrorCode::MessageTooLarge, message)
}

impl Actor for Session {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        debug!(parent: &self.span, "connection opened");
        if let Some(reader) = self.reader.take() {
            ctx.add_stream(reader);
        }
        if let Some(idle) = self.settings.idle_timeout {
            let every = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(30));
            ctx.run_interval(every, move |act, ctx| {
                let in_flight = act.settings.max_in_flight - act.permits.available_permits();
                if in_flight == 0 && act.last_frame.elapsed() >= idle {
                    debug!(parent: &act.span, "idle connection closed");
                    act.closing = true;
                    ctx.stop();
                }
            });
        }
        if let Some((write, rx)) = self.writer.take() {
            let (close_tx, close_rx) = oneshot::channel();
            self.close_tx = Some(close_tx);
            let session = ctx.address();
            let shutdown = self.settings.shutdown.subscribe();
            let span = self.span.clone();
            actix::spawn(async move {
                if let Err(e) = write_responses(write, rx, close_rx, shutdown).await {
                    debug!(parent: &span, error = %e, "connection write failed");
                }
                session.do_send(WriterDone);
            });
        }
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        if let Some(close) = self.close_tx.take() {
            let _ = close.send(());
        }
        debug!(parent: &self.span, "connection closed");
    }
}

impl StreamHandler<Result<BytesMut, io::Error>> for Session {
    fn handle(&mut self, item: Result<BytesMut, io::Error>, ctx: &mut Self::Context) {
        self.last_frame = Instant::now();
        let frame = match item {
            Ok(frame) => frame,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                // LengthDelimitedCodec refuses a declared length over the limit before
                // allocating anything for it.
                warn!(parent: &self.span, error = %e, "oversize frame; closing");
                let reply = self.reply_unslotted(0);
                return self.close_with(reply, too_large(&e.to_string()), ctx);
            }
            Err(e) => {
                debug!(parent: &self.span, error = %e, "read failed");
                return ctx.stop();
            }
        };
        match Arc::clone(&self.permits).try_acquire_owned() {
            Ok(permit) => self.on_frame(frame, permit, ctx),
            Err(_) => {
                // Every slot is taken: stop reading (ctx.wait) until a response is written.
                let permits = Arc::clone(&self.permits);
                ctx.wait(
                    async move { permits.acquire_owned().await }
                        .into_actor(self)
                        .map(move |permit, act, ctx| match permit {
                            Ok(permit) => act.on_frame(frame, permit, ctx),
                            Err(_) => ctx.stop(),
                        }),
                );
            }
        }
    }

    fn finished(&mut self, ctx: &mut Self::Context) {
        // The client closed its side; responses still in flight have nowhere to go.
        ctx.stop();
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct WriterDone;

/// The supervisor routed a request of this session to `addr`: later requests for the group
/// go there directly.
#[derive(Message)]
#[rtype(result = "()")]
struct CacheGroup {
    group_id: String,
    addr: Addr<GroupActor>,
}

impl Handler<CacheGroup> for Session {
    type Result = ();

    fn handle(&mut self, msg: CacheGroup, _: &mut Self::Context) {
        if self.groups.len() >= GROUP_CACHE_LIMIT {
            self.groups.clear();
        }
        self.groups.insert(msg.group_id, msg.addr);
    }
}

impl Handler<WriterDone> for Session {
    type Result = ();

    fn handle(&mut self, _: WriterDone, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

/// Writes responses as they come, batching whatever is ready into one write. On `close`
/// it writes what is already queued and shuts the socket.
async fn write_responses(
    mut write: WriteHalf<TcpStream>,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    mut close: oneshot::Receiver<()>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let metrics = RequestMetrics::new();
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    let mut permits: Vec<OwnedSemaphorePermit> = Vec::new();
    loop {
        let first = tokio::select! {
            biased;
            msg = rx.recv() => msg,
            _ = &mut close => None,
            _ = shutdown.wait_for(|down| *down) => None,
        };
        let Some(first) = first else {
            // Closing (or shutting down): write what is already queued, then close the socket.
            while let Ok(out) = rx.try_recv() {
                encode(&mut buf, out, &mut permits, &metrics);
            }
            write.write_all(&buf).await?;
            write.shutdown().await?;
            return Ok(());
        };
        encode(&mut buf, first, &mut permits, &metrics);
        while buf.len() < WRITE_BATCH_BYTES {
            match rx.try_recv() {
                Ok(out) => encode(&mut buf, out, &mut permits, &metrics),
                Err(_) => break,
            }
        }
        write.write_all(&buf).await?;
        buf.clear();
        // The responses are on the wire: their in-flight slots are free again.
        permits.clear();
    }
}

fn encode(
    buf: &mut Vec<u8>,
    out: Outgoing,
    permits: &mut Vec<OwnedSemaphorePermit>,
    metrics: &RequestMetrics,
) {
    metrics.record(out.request_tag, &out.response, out.started);
    let frame = ResponseFrame {
        correlation_id: out.correlation_id,
        response: out.response,
    };
    let start = buf.len();
    if let Err(e) = encode_response(&frame, buf) {
        // Only a response over 4 GiB could fail; answer with an error instead of nothing.
        buf.truncate(start);
        info!(error = %e, "response could not be encoded");
        let fallback = ResponseFrame {
            correlation_id: frame.correlation_id,
            response: Response::error(ErrorCode::UnknownServerError, "response too large"),
        };
        let _ = encode_response(&fallback, buf);
    }
    if let Some(p) = out.permit {
        permits.push(p);
    }
}
