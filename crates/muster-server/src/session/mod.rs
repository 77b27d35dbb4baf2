//! One client connection: a session actor that reads frames, enforces the connection rules of
//! protocol §1 and §5 (Hello first, frame limits, undecodable payloads), and dispatches each
//! request to its group (see `routing.rs`) or, for admin requests, the supervisor; it answers the
//! cluster requests (FindCoordinator, DescribeCluster) itself, from this node's identity
//! (`node.rs`), without touching a group. Its lifecycle: it is counted in by the listener
//! ([`ConnectionSlot`]), starts its reader (`burst.rs`) and its writer task (`writer.rs`) in
//! `started`, and on stop sends what it gathered before closing.
//!
//! Backpressure: each request takes a slot from the connection's in-flight semaphore, released
//! by the writer when its response has been written. With every slot taken the session stops
//! reading, so a client that floods requests or never reads its responses holds a bounded
//! amount of memory. The writer also takes every free slot while the connection's unwritten
//! answers are over `max_buffered_response_bytes` (so the session stops reading then too), and
//! ends the connection when the client takes no byte for `write_timeout_ms`.
//!
//! Requests whose answer can be large (OffsetFetch, DescribeGroups, ListGroups, DescribeTopics,
//! the offset-history and group-insight requests: [`takes_large_slot`]) also take one of the connection's `max_in_flight_large` slots, given
//! back by the writer once that answer is written; with none free the session stops reading
//! the same way. So a client that pipelines them without reading gets only that many ~1 MB
//! answers built for it, not `max_in_flight`. Other requests pay only the tag check.
//!
//! Admin requests (the ones the supervisor answers) also need a permit of the server-wide
//! [`AdminGate`], given back when they are answered; with none free one is answered
//! RESOURCE_LIMIT_REACHED at once and reading goes on.

mod auth;
mod burst;
mod routing;
mod writer;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use bytes::BytesMut;
use metrics::{counter, gauge};
use muster_coordinator::access::Access;
use muster_coordinator::actors::{AdminCall, ReplyTo, Supervisor, Ticket};
use muster_coordinator::engine::ClientInfo;
use muster_protocol::{
    check_frame_length, correlation_hint, decode_request, ErrorCode, Request, RequestFrame,
    Response,
};
use tokio::io::WriteHalf;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use tracing::{debug, warn};

use self::burst::{Bursts, Incoming};
use self::routing::Router;
use self::writer::{takes_large_slot, write_responses, Outbox, ToWriter, WriteEnd, WriterLimits};
use crate::admin_gate::AdminGate;
use crate::auth::{Auth, SessionAuth};
use crate::connection_limits::ConnectionLimits;
use crate::node::NodeIdentity;
pub use crate::telemetry::NO_REQUEST;
use crate::tls::ClientStream;

/// Settings and state every session shares.
pub struct SessionSettings {
    pub max_frame_bytes: u32,
    pub max_in_flight: usize,
    pub max_connections: usize,
    pub idle_timeout: Option<Duration>,
    /// Each connection's bound on unwritten answers and its write timeout.
    pub(crate) writer: WriterLimits,
    pub server_id: String,
    /// This node's id, advertised address and cluster name: what FindCoordinator and
    /// DescribeCluster answer.
    pub node: NodeIdentity,
    /// Cluster mode: the cluster as last read, which FindCoordinator and DescribeCluster
    /// answer from instead of `node` alone.
    pub cluster: Option<Arc<crate::cluster::view::ClusterView>>,
    /// Authentication and the rules in force (open without an auth file).
    pub auth: Arc<Auth>,
    pub supervisor: Addr<Supervisor>,
    /// Longest client id Hello may carry (protocol §6.18); `Limits::default()`'s unless set.
    pub max_client_id_bytes: usize,
    /// The server's admin requests in flight (shared with the dashboard); a gate of
    /// `Limits::default()`'s size unless set.
    pub admin_gate: AdminGate,
    /// Connections open now (the listener counts them in, sessions count themselves out).
    pub open_connections: AtomicUsize,
    shutdown: watch::Sender<bool>,
}

impl SessionSettings {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        max_frame_bytes: u32,
        max_in_flight: usize,
        max_connections: usize,
        idle_timeout: Option<Duration>,
        server_id: String,
        node: NodeIdentity,
        auth: Arc<Auth>,
        supervisor: Addr<Supervisor>,
    ) -> Self {
        Self {
            max_frame_bytes,
            max_in_flight,
            max_connections,
            idle_timeout,
            writer: WriterLimits::from(&ConnectionLimits::default()),
            server_id,
            node,
            cluster: None,
            auth,
            supervisor,
            max_client_id_bytes: muster_coordinator::Limits::default().max_client_id_bytes,
            admin_gate: AdminGate::new(
                muster_coordinator::Limits::default().max_admin_requests_in_flight,
            ),
            open_connections: AtomicUsize::new(0),
            shutdown: watch::channel(false).0,
        }
    }

    /// Each connection's bound on unwritten answers and its write timeout.
    pub fn with_limits(mut self, limits: &ConnectionLimits) -> Self {
        self.writer = WriterLimits::from(limits);
        self
    }

    /// Tells every session to write what it has queued and close.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Turns true when shutdown begins (a connection still in its TLS handshake gives up).
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

/// One counted connection: counted in by the listener, out when dropped (whatever way the
/// session ends, even if it never started). It also holds a clone of the listener's
/// `running` sender, which graceful shutdown waits on: once the listener and every connection
/// (its session and its writer task, which takes a clone of its own) dropped theirs, the
/// server's receiver sees the channel close.
pub struct ConnectionSlot {
    settings: Arc<SessionSettings>,
    running: mpsc::Sender<()>,
}

impl ConnectionSlot {
    /// The settings of the server that counted this connection in.
    pub(crate) fn settings(&self) -> &Arc<SessionSettings> {
        &self.settings
    }

    /// Counts a connection in, unless the server is at `max_connections`.
    pub fn acquire(
        settings: &Arc<SessionSettings>,
        running: &mpsc::Sender<()>,
    ) -> Option<ConnectionSlot> {
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
        Some(ConnectionSlot {
            settings: Arc::clone(settings),
            running: running.clone(),
        })
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.settings
            .open_connections
            .fetch_sub(1, Ordering::AcqRel);
        gauge!("muster_connections_open").decrement(1.0);
    }
}

pub struct Session {
    settings: Arc<SessionSettings>,
    slot: ConnectionSlot,
    last_frame: Instant,
    /// When the current burst of frames was read (the arrival time of each of its requests).
    burst_at: Option<Instant>,
    /// `connection`, `peer` and (after Hello) `client_id`: the parent of every event this
    /// session logs. Named as the parent per event rather than entered per frame, which cost
    /// ~15 % of pipelined heartbeat throughput (docs/benchmarks.md).
    span: tracing::Span,
    client: ClientInfo,
    /// The peer's address (failed Hellos are slowed down per address).
    peer: SocketAddr,
    /// The verified client certificate's subject common name (mTLS), if any.
    certificate_name: Option<String>,
    /// The principal and the auth-file epoch it was looked up at.
    auth: SessionAuth,
    /// This connection's place in its principal's `max_connections` (from a successful Hello).
    principal_slot: Option<crate::auth::ConnectionSlot>,
    greeted: bool,
    /// The writer's channel; also the connection's reply sink for the coordinator.
    out: Arc<Outbox>,
    /// In-flight slots: one taken per request read (and forgotten), given back by the writer
    /// once the answer is written.
    permits: Arc<Semaphore>,
    /// Large-answer slots ([`takes_large_slot`]): one taken (and forgotten) per such request,
    /// besides its in-flight slot, given back by the writer once its answer is written.
    large: Arc<Semaphore>,
    /// Where group requests go: the group inbox cache, routed and held requests, the batch.
    router: Router,
    reader: Option<FramedRead<tokio::io::ReadHalf<ClientStream>, LengthDelimitedCodec>>,
    writer: Option<(WriteHalf<ClientStream>, mpsc::UnboundedReceiver<ToWriter>)>,
    close_tx: Option<oneshot::Sender<()>>,
    closing: bool,
}

impl Session {
    /// `certificate_name`: the verified client certificate's subject common name (mTLS).
    pub fn new(
        id: u64,
        stream: ClientStream,
        certificate_name: Option<String>,
        peer: SocketAddr,
        slot: ConnectionSlot,
    ) -> Self {
        let settings = Arc::clone(&slot.settings);
        let (read, write) = tokio::io::split(stream);
        let codec = LengthDelimitedCodec::builder()
            .big_endian()
            .length_field_length(4)
            .max_frame_length(settings.max_frame_bytes as usize)
            .new_codec();
        let (out, rx) = Outbox::new();
        let permits = Arc::new(Semaphore::new(settings.max_in_flight));
        let large = Arc::new(Semaphore::new(settings.writer.max_in_flight_large));
        Self {
            slot,
            last_frame: Instant::now(),
            burst_at: None,
            span: tracing::info_span!(
                "connection",
                connection = id,
                peer = %peer,
                client_id = tracing::field::Empty,
                principal = tracing::field::Empty
            ),
            client: ClientInfo {
                client_id: Arc::from(""),
                client_host: Arc::from(peer.ip().to_string()),
                access: Access::open(),
            },
            settings,
            peer,
            certificate_name,
            auth: SessionAuth::open(),
            principal_slot: None,
            greeted: false,
            out,
            permits,
            large,
            router: Router::default(),
            reader: Some(FramedRead::new(read, codec)),
            writer: Some((write, rx)),
            close_tx: None,
            closing: false,
        }
    }

    /// The answer path for a request handed to the coordinator.
    fn reply(&self, ticket: Ticket) -> ReplyTo {
        ReplyTo::new(self.out.clone(), ticket)
    }

    /// Answers a request (holding an in-flight slot) the session handles itself.
    fn answer(&self, ticket: Ticket, response: Response) {
        self.out.push(ToWriter::One(ticket.answer(response)));
    }

    /// Sends a last answer and closes the connection once it is written.
    fn close_with(&mut self, last: ToWriter, ctx: &mut Context<Self>) {
        self.out.push(last);
        self.closing = true;
        if let Some(close) = self.close_tx.take() {
            let _ = close.send(());
        }
        ctx.stop();
    }

    /// Handles one frame holding an in-flight slot, once the principal's request rate allows:
    /// over its `max_requests_per_s`, the connection is not read (ctx.wait) until then.
    fn admit(&mut self, frame: BytesMut, started: Instant, ctx: &mut Context<Self>) {
        let Some(rate) = self.over_rate() else {
            return self.on_frame(frame, started, ctx);
        };
        // Send what is gathered first: held back, it would wait for the throttle too.
        self.flush(ctx);
        self.route_held(ctx);
        let waiting = Instant::now();
        ctx.wait(
            async move { rate.admit().await }
                .into_actor(self)
                .map(move |(), act, ctx| {
                    act.throttled(waiting.elapsed());
                    act.on_frame(frame, started, ctx)
                }),
        );
    }

    /// Handles one frame, which holds an in-flight slot.
    fn on_frame(&mut self, frame: BytesMut, started: Instant, ctx: &mut Context<Self>) {
        if self.closing {
            // Never answered: its slot goes straight back.
            self.permits.add_permits(1);
            return;
        }
        let ticket = |correlation_id, request_tag| Ticket {
            correlation_id,
            request_tag,
            arrived: started,
        };
        // The codec already refused lengths over the limit before reading them; the protocol
        // crate's rule also refuses 0 (every payload holds at least a correlation id). A frame
        // is at most `max_frame_bytes`, so its length fits a u32.
        let declared = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        if let Err(e) = check_frame_length(declared, self.slot.settings.max_frame_bytes) {
            warn!(parent: &self.span, error = %e, "bad frame length; closing");
            let last = ticket(0, NO_REQUEST).answer(too_large(&e.to_string()));
            return self.close_with(ToWriter::One(last), ctx);
        }
        let RequestFrame {
            correlation_id,
            request,
        } = match decode_request(&frame) {
            Ok(decoded) => decoded,
            Err(e) => {
                debug!(parent: &self.span, error = %e, "undecodable request");
                let response = Response::error(ErrorCode::InvalidRequest, e.to_string());
                return self.answer(ticket(correlation_hint(&frame), NO_REQUEST), response);
            }
        };
        let ticket = ticket(correlation_id, request.tag());
        let large_slot_free = || match self.large.try_acquire() {
            // The slot is given back by the writer once the answer is written.
            Ok(permit) => {
                permit.forget();
                true
            }
            Err(_) => false,
        };
        if takes_large_slot(ticket.request_tag) && !large_slot_free() {
            // Every large-answer slot is taken: as at `max_in_flight`, send what is gathered
            // and held (their answers free slots), then stop reading (ctx.wait) until one of
            // the large answers is written.
            self.flush(ctx);
            self.route_held(ctx);
            let large = Arc::clone(&self.large);
            ctx.wait(
                async move { large.acquire().await.map(|permit| permit.forget()) }
                    .into_actor(self)
                    .map(move |acquired, act, ctx| match acquired {
                        Ok(()) if !act.closing => act.on_request(request, ticket, ctx),
                        Ok(()) => {}
                        Err(_) => ctx.stop(),
                    }),
            );
            return;
        }
        self.on_request(request, ticket, ctx);
    }

    /// Handles one decoded request, which holds an in-flight slot (and, if
    /// [`takes_large_slot`], a large-answer slot).
    fn on_request(&mut self, request: Request, ticket: Ticket, ctx: &mut Context<Self>) {
        match request {
            Request::Hello(hello) => self.hello(hello, ticket, ctx),
            _ if !self.greeted => {
                let response =
                    Response::error(ErrorCode::IllegalState, "the first request must be Hello");
                self.close_with(ToWriter::One(ticket.answer(response)), ctx);
            }
            Request::JoinGroup(_)
            | Request::SyncGroup(_)
            | Request::Heartbeat(_)
            | Request::LeaveGroup(_)
            | Request::OffsetCommit(_)
            | Request::OffsetFetch(_)
            | Request::ConsumerGroupHeartbeat(_)
            | Request::OwnershipEpochs(_)
            | Request::OffsetHistory(_)
            | Request::OffsetReset(_)
            | Request::OffsetRestore(_) => {
                self.refresh_identity();
                if self.may_touch_group(&request, &ticket) {
                    self.dispatch_to_group(request, ticket, ctx);
                }
            }
            Request::DescribeGroups(_)
            | Request::ListGroups(_)
            | Request::DeleteGroups(_)
            | Request::CreateTopics(_)
            | Request::DescribeTopics(_)
            | Request::GroupHistory(_)
            | Request::GroupDiagnosis(_)
            | Request::ConsumerGroupDescribe(_)
            | Request::GroupSimulate(_) => {
                self.refresh_identity();
                // Past the server's bound on admin requests in flight the gate answers at once
                // (RESOURCE_LIMIT_REACHED) and nothing is sent: the supervisor's mailbox takes
                // whatever it is sent (`admin_gate.rs`).
                let to = self.out.clone();
                if let Some(reply) = self.settings.admin_gate.admit(to, ticket) {
                    let access = self.client.access.clone();
                    self.settings.supervisor.do_send(AdminCall {
                        request,
                        reply,
                        access,
                    });
                }
            }
            // Open to every authenticated principal (protocol §6.19: a client must be able to
            // find its coordinator whatever its ACLs), so there is no access check; a single
            // node answers from its own identity, without the supervisor.
            Request::FindCoordinator(find) => {
                let response = match &self.settings.cluster {
                    Some(cluster) => cluster.find_coordinator(&find),
                    None => self.settings.node.find_coordinator(&find),
                };
                self.answer(ticket, Response::FindCoordinator(response));
            }
            Request::DescribeCluster(_) => {
                let response = match &self.settings.cluster {
                    Some(cluster) => cluster.describe_cluster(),
                    None => self.settings.node.describe_cluster(),
                };
                self.answer(ticket, Response::DescribeCluster(response));
            }
        }
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
            let large = Arc::clone(&self.large);
            // Shutdown waits for the writer too: it may outlive the session while it writes
            // what is queued.
            let running = self.slot.running.clone();
            let limits = self.settings.writer;
            // Closed when the writer ends: a session waiting (ctx.wait) for a slot the writer
            // will never give back gets an error and stops, instead of waiting forever (it
            // handles no WriterDone while it waits).
            let slots = (Arc::clone(&permits), Arc::clone(&large));
            actix::spawn(async move {
                match write_responses(write, rx, permits, large, limits, close_rx, shutdown).await {
                    Ok(()) => {}
                    Err(WriteEnd::Io(e)) => {
                        debug!(parent: &span, error = %e, "connection write failed");
                    }
                    Err(e @ WriteEnd::Timeout(_)) => {
                        counter!("muster_connections_closed_total", "reason" => "write_timeout")
                            .increment(1);
                        warn!(parent: &span, error = %e, "slow reader; connection closed");
                    }
                    Err(e @ WriteEnd::Overflow(_)) => {
                        counter!("muster_connections_closed_total", "reason" => "response_buffer")
                            .increment(1);
                        warn!(parent: &span, error = %e, "client not reading; connection closed");
                    }
                }
                slots.0.close();
                slots.1.close();
                session.do_send(WriterDone);
                drop(running);
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
                let last = Ticket {
                    correlation_id: 0,
                    request_tag: NO_REQUEST,
                    arrived: now,
                }
                .answer(too_large(&e.to_string()));
                return self.close_with(ToWriter::Unslotted(last), ctx);
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
            Ok(()) => self.admit(frame, now, ctx),
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
                            Ok(()) => act.admit(frame, now, ctx),
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

/// The writer task ended (the socket closed or failed, or everything queued was written on
/// close): the session ends with it.
#[derive(Message)]
#[rtype(result = "()")]
struct WriterDone;

impl Handler<WriterDone> for Session {
    type Result = ();

    fn handle(&mut self, _: WriterDone, ctx: &mut Self::Context) {
        ctx.stop();
    }
}
