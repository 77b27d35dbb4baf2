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
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use actix::prelude::*;
use bytes::BytesMut;
use futures_util::Stream;
use metrics::gauge;
use muster_coordinator::actors::{
    AdminCall, GroupAddr, GroupBatch, GroupCall, Outgoing, ReplyTo, Route, Slot, Supervisor,
    ToWriter, WriterTx, NO_REQUEST,
};
use muster_coordinator::engine::{group_of, ClientInfo};
use muster_protocol::{
    correlation_hint, decode_request, encode_response, ErrorCode, HelloRequest, HelloResponse,
    Request, RequestFrame, Response, ResponseFrame, MAX_PROTOCOL_VERSION, MIN_PROTOCOL_VERSION,
};
use tokio::io::{AsyncWriteExt, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
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

/// The writer buffer's capacity kept between writes.
const WRITE_BUF_KEEP: usize = 8 * 1024;

/// Most requests one [`GroupBatch`] carries (a group actor handles a batch in one go; this
/// bounds how long other groups on its arbiter wait behind it).
const MAX_BATCH: usize = 64;

/// What the session reads: frames, and a mark whenever the socket has nothing more to read
/// for now (the end of a burst), when the session sends the group requests it gathered.
enum Incoming {
    Frame(Result<BytesMut, io::Error>),
    Drained,
}

/// Turns the frame stream into [`Incoming`]: after one or more frames, a [`Incoming::Drained`]
/// as soon as the next frame is not there yet.
struct Bursts<S> {
    frames: S,
    in_burst: bool,
    ended: bool,
    /// A frame of this burst was larger than [`READ_BUF_KEEP`].
    large: bool,
}

impl<S> Bursts<S> {
    fn new(frames: S) -> Self {
        Self {
            frames,
            in_burst: false,
            ended: false,
            large: false,
        }
    }
}

/// Read-buffer capacity a connection keeps once a burst with a larger frame is over.
const READ_BUF_KEEP: usize = 64 * 1024;

/// A frame source whose read buffer can be given back between bursts.
trait TrimBuffer {
    fn trim(&mut self);
}

impl TrimBuffer for FramedRead<tokio::io::ReadHalf<TcpStream>, LengthDelimitedCodec> {
    /// One large frame (a 10 000-member leader's SyncGroup is ~1 MB) grows the read buffer, and
    /// the buffer would keep that allocation for the connection's life: start a new one.
    fn trim(&mut self) {
        if self.read_buffer().is_empty() {
            *self.read_buffer_mut() = BytesMut::with_capacity(8 * 1024);
        }
    }
}

impl<S> Stream for Bursts<S>
where
    S: Stream<Item = Result<BytesMut, io::Error>> + TrimBuffer + Unpin,
{
    type Item = Incoming;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Incoming>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let next = Pin::new(&mut self.frames).poll_next(cx);
        match next {
            Poll::Ready(Some(frame)) => {
                self.in_burst = true;
                if frame.as_ref().is_ok_and(|f| f.len() > READ_BUF_KEEP) {
                    self.large = true;
                }
                return Poll::Ready(Some(Incoming::Frame(frame)));
            }
            Poll::Ready(None) => self.ended = true,
            Poll::Pending => {}
        }
        if self.in_burst {
            self.in_burst = false;
            if std::mem::take(&mut self.large) {
                self.frames.trim();
            }
            Poll::Ready(Some(Incoming::Drained))
        } else if self.ended {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    }
}

/// A group a connection reaches through the supervisor. Its requests must not overtake each
/// other: until every routed one is handled, nothing goes to the group directly.
#[derive(Default)]
struct Routing {
    /// Requests routed and not yet handled by the supervisor.
    outstanding: u32,
    /// The group's id and address, once a routed request found the group.
    found: Option<(Arc<str>, GroupAddr)>,
    /// Requests that came after the group was found: held (neither routed nor sent) until the
    /// outstanding ones are handled, then sent to the group in order. Routing them instead
    /// could go on for as long as the client keeps requests in flight.
    held: Vec<(Request, Slot)>,
}

/// Group requests of the current burst bound for one group, not yet sent.
struct PendingBatch {
    addr: GroupAddr,
    calls: Vec<(Request, Slot)>,
}

pub struct Session {
    settings: Arc<SessionSettings>,
    _slot: ConnectionSlot,
    last_frame: Instant,
    /// When the current burst of frames was read (the arrival time of each of its requests).
    burst_at: Option<Instant>,
    /// `connection`, `peer` and (after Hello) `client_id`: the parent of every event this
    /// session logs. Named as the parent per event rather than entered per frame, which cost
    /// ~15 % of pipelined heartbeat throughput (docs/benchmarks.md).
    span: tracing::Span,
    client: ClientInfo,
    greeted: bool,
    tx: WriterTx,
    /// In-flight slots: one taken per request read (and forgotten), given back by the writer
    /// once the answer is written.
    permits: Arc<Semaphore>,
    /// Group id → address, both shared with the supervisor's registry (an entry costs this
    /// map's slot, not copies).
    groups: HashMap<Arc<str>, GroupAddr>,
    /// Groups this connection is reaching through the supervisor (not cached yet).
    routing: HashMap<String, Routing>,
    batch: Option<PendingBatch>,
    reader: Option<FramedRead<tokio::io::ReadHalf<TcpStream>, LengthDelimitedCodec>>,
    writer: Option<(WriteHalf<TcpStream>, mpsc::UnboundedReceiver<ToWriter>)>,
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
            burst_at: None,
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
            routing: HashMap::new(),
            batch: None,
            reader: Some(FramedRead::new(read, codec)),
            writer: Some((write, rx)),
            close_tx: None,
            closing: false,
        }
    }

    fn reply(&self, slot: Slot) -> ReplyTo {
        ReplyTo::new(self.tx.clone(), slot)
    }

    /// One request on its way to its group alone (not in a batch).
    fn group_call(&self, request: Request, slot: Slot) -> GroupCall {
        GroupCall {
            request,
            reply: self.reply(slot),
            client: self.client.clone(),
        }
    }

    /// An answer path for a frame that never took an in-flight slot.
    fn reply_unslotted(&self, correlation_id: u32) -> ReplyTo {
        self.reply(Slot {
            correlation_id,
            in_flight: false,
            request_tag: NO_REQUEST,
            started: Instant::now(),
        })
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

    /// Handles one frame, which holds an in-flight slot.
    fn on_frame(&mut self, frame: BytesMut, started: Instant, ctx: &mut Context<Self>) {
        if self.closing {
            // Never answered: its slot goes straight back.
            self.permits.add_permits(1);
            return;
        }
        let slot = |correlation_id, request_tag| Slot {
            correlation_id,
            in_flight: true,
            request_tag,
            started,
        };
        if frame.is_empty() {
            warn!(parent: &self.span, "zero-length frame; closing");
            let reply = self.reply(slot(0, NO_REQUEST));
            return self.close_with(reply, too_large("frame length 0"), ctx);
        }
        let RequestFrame {
            correlation_id,
            request,
        } = match decode_request(&frame) {
            Ok(decoded) => decoded,
            Err(e) => {
                debug!(parent: &self.span, error = %e, "undecodable request");
                let reply = self.reply(slot(correlation_hint(&frame), NO_REQUEST));
                reply.send(Response::error(ErrorCode::InvalidRequest, e.to_string()));
                return;
            }
        };
        let slot = slot(correlation_id, request.tag());
        match request {
            Request::Hello(hello) => self.hello(hello, self.reply(slot), ctx),
            _ if !self.greeted => {
                let reply = self.reply(slot);
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
            | Request::OffsetFetch(_) => self.dispatch_to_group(request, slot, ctx),
            Request::DescribeGroups(_)
            | Request::ListGroups(_)
            | Request::DeleteGroups(_)
            | Request::CreateTopics(_)
            | Request::DescribeTopics(_) => {
                let reply = self.reply(slot);
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

    /// A group request joins the batch for its group, which is sent at the end of the burst
    /// (or when full, or when a request for another group comes). A group this connection has
    /// not reached yet is routed through the supervisor, which returns its address.
    fn dispatch_to_group(&mut self, request: Request, slot: Slot, ctx: &mut Context<Self>) {
        let Some(group_id) = group_of(&request) else {
            return self.reply(slot).send(Response::error(
                ErrorCode::InvalidRequest,
                "not a group request",
            ));
        };
        if let Some(batch) = &mut self.batch {
            if group_of(&batch.calls[0].0) == Some(group_id) {
                batch.calls.push((request, slot));
                if batch.calls.len() >= MAX_BATCH {
                    self.flush(ctx);
                }
                return;
            }
            self.flush(ctx);
        }
        if let Some(addr) = self.groups.get(group_id) {
            if addr.connected() {
                self.batch = Some(PendingBatch {
                    addr: Arc::clone(addr),
                    calls: vec![(request, slot)],
                });
                return;
            }
        }
        if let Some(routing) = self.routing.get_mut(group_id) {
            if routing.found.is_some() {
                routing.held.push((request, slot));
                return;
            }
        }
        let call = self.group_call(request, slot);
        self.route(call, ctx);
    }

    /// Sends the batch gathered so far to its group.
    fn flush(&mut self, ctx: &mut Context<Self>) {
        let Some(PendingBatch { addr, mut calls }) = self.batch.take() else {
            return;
        };
        let unsent = if calls.len() == 1 {
            // Alone: the per-request message (no batch vector on either side).
            let Some((request, slot)) = calls.pop() else {
                return;
            };
            let call = self.group_call(request, slot);
            match addr.try_send(call) {
                Ok(()) => return,
                // A busy group: queue anyway; this connection's in-flight cap bounds it.
                Err(SendError::Full(call)) => return addr.do_send(call),
                Err(SendError::Closed(call)) => vec![call],
            }
        } else {
            let batch = GroupBatch {
                tx: self.tx.clone(),
                client: self.client.clone(),
                calls,
            };
            match addr.try_send(batch) {
                Ok(()) => return,
                Err(SendError::Full(batch)) => return addr.do_send(batch),
                Err(SendError::Closed(mut batch)) => batch
                    .take_calls()
                    .into_iter()
                    .map(|(request, slot)| self.group_call(request, slot))
                    .collect(),
            }
        };
        // The group's actor stopped (the group was deleted or removed): route afresh.
        for call in unsent {
            self.route(call, ctx);
        }
    }

    /// Sends every held request through the supervisor, behind the routed ones it waits for
    /// (in order, as the supervisor handles its mailbox in order).
    fn route_held(&mut self, ctx: &mut Context<Self>) {
        let held: Vec<_> = self
            .routing
            .values_mut()
            .flat_map(|routing| std::mem::take(&mut routing.held))
            .collect();
        for (request, slot) in held {
            let call = self.group_call(request, slot);
            self.route(call, ctx);
        }
    }

    fn route(&mut self, call: GroupCall, ctx: &mut Context<Self>) {
        let group_id = group_of(&call.request).unwrap_or_default().to_owned();
        self.groups.remove(group_id.as_str());
        self.routing
            .entry(group_id.clone())
            .or_default()
            .outstanding += 1;
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
            let found = routed.await.ok().flatten();
            session.do_send(Routed { group_id, found });
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
            ctx.add_stream(Bursts::new(reader));
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
            let permits = Arc::clone(&self.permits);
            actix::spawn(async move {
                if let Err(e) = write_responses(write, rx, permits, close_rx, shutdown).await {
                    debug!(parent: &span, error = %e, "connection write failed");
                }
                session.do_send(WriterDone);
            });
        }
    }

    fn stopped(&mut self, ctx: &mut Self::Context) {
        // Requests read before the connection ended still reach their groups (a LeaveGroup
        // sent just before closing, say); their answers have nowhere to go. Held ones go
        // through the supervisor, behind the routed ones they wait for.
        self.flush(ctx);
        self.route_held(ctx);
        if let Some(close) = self.close_tx.take() {
            let _ = close.send(());
        }
        debug!(parent: &self.span, "connection closed");
    }
}

impl StreamHandler<Incoming> for Session {
    fn handle(&mut self, item: Incoming, ctx: &mut Self::Context) {
        let item = match item {
            Incoming::Frame(item) => item,
            Incoming::Drained => {
                self.burst_at = None;
                return self.flush(ctx);
            }
        };
        // One clock read per burst: its frames arrived together.
        let now = *self.burst_at.get_or_insert_with(Instant::now);
        self.last_frame = now;
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
        let acquired = self.permits.try_acquire().map(|permit| permit.forget());
        match acquired {
            // The slot is given back by the writer (Semaphore::add_permits) once the answer is
            // written.
            Ok(()) => self.on_frame(frame, now, ctx),
            Err(_) => {
                // Every slot is taken: send what this burst gathered and what is held (their
                // answers are what frees slots; a held request would otherwise wait for a
                // message the session does not read while it waits), then stop reading
                // (ctx.wait) until a response is written.
                self.flush(ctx);
                self.route_held(ctx);
                let permits = Arc::clone(&self.permits);
                ctx.wait(
                    async move { permits.acquire().await.map(|permit| permit.forget()) }
                        .into_actor(self)
                        .map(move |acquired, act, ctx| match acquired {
                            Ok(()) => act.on_frame(frame, now, ctx),
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

/// The supervisor handled a request this session routed (and, if the group exists, returned
/// its id and address). Once every routed request for the group is handled, later requests go
/// to the group directly.
#[derive(Message)]
#[rtype(result = "()")]
struct Routed {
    group_id: String,
    found: Option<(Arc<str>, GroupAddr)>,
}

impl Handler<Routed> for Session {
    type Result = ();

    fn handle(&mut self, msg: Routed, ctx: &mut Self::Context) {
        let Some(routing) = self.routing.get_mut(msg.group_id.as_str()) else {
            return;
        };
        routing.outstanding = routing.outstanding.saturating_sub(1);
        if routing.found.is_none() {
            routing.found = msg.found;
        }
        if routing.outstanding > 0 {
            return;
        }
        let Some(Routing { found, held, .. }) = self.routing.remove(msg.group_id.as_str()) else {
            return;
        };
        // Only requests after the group was found are held.
        let Some((group_id, addr)) = found else {
            return;
        };
        if self.groups.len() >= GROUP_CACHE_LIMIT {
            self.groups.clear();
        }
        self.groups.insert(group_id, Arc::clone(&addr));
        if !held.is_empty() {
            self.flush(ctx);
            self.batch = Some(PendingBatch { addr, calls: held });
            self.flush(ctx);
        }
    }
}

impl Handler<WriterDone> for Session {
    type Result = ();

    fn handle(&mut self, _: WriterDone, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

/// Writes responses as they come, batching whatever is ready into one write, and gives the
/// answered requests' in-flight slots back once their bytes are written. On `close` it writes
/// what is already queued and shuts the socket.
async fn write_responses(
    mut write: WriteHalf<TcpStream>,
    mut rx: mpsc::UnboundedReceiver<ToWriter>,
    permits: Arc<Semaphore>,
    mut close: oneshot::Receiver<()>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let mut out = Encoder {
        buf: Vec::with_capacity(WRITE_BUF_KEEP),
        answered: 0,
        now: Instant::now(),
        metrics: RequestMetrics::new(),
    };
    loop {
        let first = tokio::select! {
            biased;
            msg = rx.recv() => msg,
            _ = &mut close => None,
            _ = shutdown.wait_for(|down| *down) => None,
        };
        out.now = Instant::now();
        let Some(first) = first else {
            // Closing (or shutting down): write what is already queued, then close the socket.
            while let Ok(next) = rx.try_recv() {
                out.push(next);
            }
            write.write_all(&out.buf).await?;
            write.shutdown().await?;
            return Ok(());
        };
        out.push(first);
        while out.buf.len() < WRITE_BATCH_BYTES {
            match rx.try_recv() {
                Ok(next) => out.push(next),
                Err(_) => break,
            }
        }
        out.metrics.flush();
        write.write_all(&out.buf).await?;
        out.buf.clear();
        // One large answer (a 10 000-member leader's JoinGroup is ~1 MB) grows the buffer; the
        // connection should not keep that high-water mark for the rest of its life.
        out.buf.shrink_to(WRITE_BUF_KEEP);
        // The responses are on the wire: their in-flight slots are free again.
        permits.add_permits(std::mem::take(&mut out.answered));
    }
}

/// The writer's buffer of encoded answers not yet written.
struct Encoder {
    buf: Vec<u8>,
    /// In-flight slots the answers in `buf` hold.
    answered: usize,
    /// When this round of answers was taken (one clock read per write for their latencies).
    now: Instant,
    metrics: RequestMetrics,
}

impl Encoder {
    fn push(&mut self, next: ToWriter) {
        match next {
            ToWriter::One(answer) => self.encode(answer),
            ToWriter::Many(answers) => {
                for answer in answers {
                    self.encode(answer);
                }
            }
        }
    }

    fn encode(&mut self, Outgoing { response, slot }: Outgoing) {
        let latency = self.now.saturating_duration_since(slot.started);
        self.metrics.record(slot.request_tag, &response, latency);
        let frame = ResponseFrame {
            correlation_id: slot.correlation_id,
            response,
        };
        let start = self.buf.len();
        if let Err(e) = encode_response(&frame, &mut self.buf) {
            // Only a response over 4 GiB could fail; answer with an error instead of nothing.
            self.buf.truncate(start);
            info!(error = %e, "response could not be encoded");
            let fallback = ResponseFrame {
                correlation_id: frame.correlation_id,
                response: Response::error(ErrorCode::UnknownServerError, "response too large"),
            };
            let _ = encode_response(&fallback, &mut self.buf);
        }
        self.answered += usize::from(slot.in_flight);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;

    use futures_util::StreamExt;

    use super::*;

    /// What the next poll of the scripted frame stream returns.
    enum Step {
        Frame(usize),
        NotYet,
        End,
    }

    /// Frames of the given sizes, filled with `x`; records polls' outcomes and trims in `log`.
    struct Scripted {
        steps: VecDeque<Step>,
        log: Rc<RefCell<Vec<String>>>,
    }

    impl Stream for Scripted {
        type Item = Result<BytesMut, io::Error>;

        fn poll_next(
            mut self: Pin<&mut Self>,
            cx: &mut TaskContext<'_>,
        ) -> Poll<Option<Self::Item>> {
            match self.steps.pop_front() {
                Some(Step::Frame(len)) => {
                    Poll::Ready(Some(Ok(BytesMut::from(&vec![b'x'; len][..]))))
                }
                Some(Step::NotYet) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Some(Step::End) | None => Poll::Ready(None),
            }
        }
    }

    impl TrimBuffer for Scripted {
        fn trim(&mut self) {
            self.log.borrow_mut().push("trim".into());
        }
    }

    /// Polls `steps` through [`Bursts`] ten times; returns what came out (frames by length).
    fn run(steps: Vec<Step>) -> Vec<String> {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut bursts = Bursts::new(Scripted {
            steps: steps.into(),
            log: Rc::clone(&log),
        });
        let waker = futures_util::task::noop_waker();
        let mut cx = TaskContext::from_waker(&waker);
        for _ in 0..10 {
            let seen = match bursts.poll_next_unpin(&mut cx) {
                Poll::Ready(Some(Incoming::Frame(Ok(f)))) => f.len().to_string(),
                Poll::Ready(Some(Incoming::Frame(Err(e)))) => format!("error {e}"),
                Poll::Ready(Some(Incoming::Drained)) => "|".into(),
                Poll::Ready(None) => "end".into(),
                Poll::Pending => "pending".into(),
            };
            log.borrow_mut().push(seen);
        }
        log.take()
    }

    #[test]
    fn a_burst_ends_when_the_next_frame_is_not_there_yet_and_at_the_end() {
        let seen = run(vec![
            Step::Frame(1),
            Step::Frame(2),
            Step::NotYet,
            Step::NotYet,
            Step::Frame(3),
            Step::End,
        ]);
        assert_eq!(
            seen,
            ["1", "2", "|", "pending", "3", "|", "end", "end", "end", "end"]
        );
    }

    #[test]
    fn the_read_buffer_is_trimmed_after_a_burst_with_a_large_frame() {
        let large = READ_BUF_KEEP + 1;
        let seen = run(vec![
            Step::Frame(10),
            Step::NotYet,
            Step::Frame(large),
            Step::Frame(10),
            Step::NotYet,
            Step::Frame(READ_BUF_KEEP),
            Step::End,
        ]);
        let large = large.to_string();
        let keep = READ_BUF_KEEP.to_string();
        assert_eq!(
            seen,
            ["10", "|", &large, "10", "trim", "|", &keep, "|", "end", "end", "end"]
        );
    }
}
