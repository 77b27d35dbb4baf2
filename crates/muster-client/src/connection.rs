//! One logical connection to a Muster server: TCP connect and `Hello`, correlation ids, many
//! requests in flight at once, per-request timeouts, and reconnecting with exponential backoff.
//!
//! # How it works
//!
//! ```text
//!  callers ──send()──▶ waiters: correlation id → oneshot ◀──── reader task ◀── FramedRead ◀─┐
//!     │                                                       (dispatch by id,             │ TCP
//!     └── encoded payload ──▶ mpsc ──▶ writer task ──▶ FramedWrite ─────────────────────────┘
//! ```
//!
//! Frames are cut by `tokio_util`'s `LengthDelimitedCodec` (big-endian `u32` prefix, with the
//! maximum frame length checked before the payload is buffered); payloads are encoded and
//! decoded by `muster-protocol`. The server may answer out of order (a held `JoinGroup` does
//! not delay a `Heartbeat`), so the reader task hands each answer to the waiter registered
//! under its correlation id. A payload that does not decode fails only the request named by its
//! first four bytes; a broken socket fails every request in flight with
//! [`ClientError::Disconnected`] (or the I/O error).
//!
//! With [`ConnectionConfig::tls`] the TCP stream is wrapped in TLS (tokio-rustls) before
//! `Hello`; a handshake the server or the client refuses fails the request at once
//! ([`ClientError::Tls`]), without retrying.
//!
//! The socket behind a [`Connection`] is a *link*. When a link breaks, the next request opens
//! a new one (connect + `Hello`); consecutive failures back off exponentially
//! ([`ConnectionConfig::backoff`]) within that request's deadline. Requests are never resent
//! automatically: whether a retry is safe is the caller's decision. A link can also be dead
//! without the OS noticing (a cut network keeps a TCP connection "open" for many minutes): a
//! request that times out with not one frame arriving on its link for at least
//! [`SILENT_SOCKET`] — while it waited, or since an earlier request on the link timed out as
//! silently — closes that link, as Kafka's client closes a connection on a request timeout,
//! so a member on it reconnects and rejoins instead of waiting forever. (Counting across
//! requests matters: requests with timeouts shorter than [`SILENT_SOCKET`], one after
//! another, would otherwise keep a dead socket for ever.)

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use muster_protocol::{
    correlation_hint, decode_response, encode_request_payload, HelloRequest, Request, RequestFrame,
    Response, DEFAULT_MAX_FRAME_BYTES, PROTOCOL_VERSION,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};
use tracing::{debug, warn};

use crate::backoff::Backoff;
use crate::error::ClientError;
use crate::tls::{TlsConfig, TlsError};

/// How to reach the server and how patient to be. Its `Debug` never shows the token.
#[derive(Clone)]
pub struct ConnectionConfig {
    /// `host:port` of the server.
    pub addr: String,
    /// Sent in `Hello`; the server builds member ids from it (`{client_id}-{uuid}`).
    pub client_id: String,
    /// For servers configured with tokens.
    pub auth_token: Option<String>,
    /// Default timeout of one request (connecting included). Default 30 s.
    pub request_timeout: Duration,
    /// Timeout of one TCP connect. Default 10 s.
    pub connect_timeout: Duration,
    /// Largest frame accepted from the server and sent to it. Default 1 MiB, the server's
    /// default `max_frame_bytes`.
    pub max_frame_bytes: u32,
    /// Delays between consecutive failed connection attempts.
    pub backoff: Backoff,
    /// TLS to the server; `None` = plaintext.
    pub tls: Option<TlsConfig>,
}

impl std::fmt::Debug for ConnectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionConfig")
            .field("addr", &self.addr)
            .field("client_id", &self.client_id)
            // A bearer secret: a logged config must not leak it.
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("backoff", &self.backoff)
            .field("tls", &self.tls)
            .finish()
    }
}

impl ConnectionConfig {
    pub fn new(addr: impl Into<String>) -> Self {
        ConnectionConfig {
            addr: addr.into(),
            client_id: "muster-client".to_owned(),
            auth_token: None,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            backoff: Backoff::default(),
            tls: None,
        }
    }

    pub fn client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = client_id.into();
        self
    }

    pub fn auth_token(mut self, token: impl Into<String>) -> Self {
        self.auth_token = Some(token.into());
        self
    }

    /// Speak TLS to the server ([`TlsConfig`]: the CA to trust, a client certificate for
    /// servers that require one, the server name).
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    pub fn max_frame_bytes(mut self, max: u32) -> Self {
        self.max_frame_bytes = max;
        self
    }

    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }
}

/// A connection to a Muster server, shared by cloning (all clones use one socket).
///
/// Dropping the last clone closes the socket. Membership is not tied to a connection: the
/// server forgets a member only when its session expires or it leaves.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.inner.config.addr)
            .field("client_id", &self.inner.config.client_id)
            .field("connected", &self.is_connected())
            .finish()
    }
}

struct Inner {
    config: ConnectionConfig,
    next_correlation_id: AtomicU32,
    current: Mutex<Option<Arc<Link>>>,
    reconnect: tokio::sync::Mutex<ReconnectState>,
    server_id: Mutex<String>,
}

/// How hard a request tries to open a link when there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reconnect {
    /// Attempt after attempt, with backoff, until the request's deadline.
    UntilDeadline,
    /// One attempt.
    Once,
}

#[derive(Default)]
struct ReconnectState {
    /// Consecutive failed attempts to open a link (0 once one succeeds).
    failures: u32,
    last_error: Option<ClientError>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these locks stays consistent across a panic (single assignments).
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Connection {
    /// Connects and says `Hello`. Fails at once (no retry) if the server cannot be reached or
    /// refuses the `Hello`; later requests reconnect by themselves.
    pub async fn connect(config: ConnectionConfig) -> Result<Connection, ClientError> {
        let connection = Connection {
            inner: Arc::new(Inner {
                config,
                next_correlation_id: AtomicU32::new(1),
                current: Mutex::new(None),
                reconnect: tokio::sync::Mutex::new(ReconnectState::default()),
                server_id: Mutex::new(String::new()),
            }),
        };
        let link = connection.open_link().await?;
        *lock(&connection.inner.current) = Some(link);
        Ok(connection)
    }

    /// The configuration this connection was made with.
    pub fn config(&self) -> &ConnectionConfig {
        &self.inner.config
    }

    /// The `server_id` of the last successful `Hello`.
    pub fn server_id(&self) -> String {
        lock(&self.inner.server_id).clone()
    }

    /// Whether a socket is open right now (a closed one is reopened by the next request).
    pub fn is_connected(&self) -> bool {
        lock(&self.inner.current)
            .as_ref()
            .is_some_and(|link| link.shared.is_alive())
    }

    /// Closes the current socket; requests in flight fail with
    /// [`ClientError::Disconnected`]. The next request reconnects.
    pub fn disconnect(&self) {
        if let Some(link) = lock(&self.inner.current).take() {
            link.shutdown(ClientError::Disconnected);
        }
    }

    /// Sends `request` and waits for its answer, within the default request timeout.
    pub async fn send(&self, request: impl Into<Request>) -> Result<Response, ClientError> {
        self.send_timeout(request, self.inner.config.request_timeout)
            .await
    }

    /// Sends `request` and waits for its answer for at most `timeout` (reconnecting included).
    ///
    /// A `Response::Error` answer becomes [`ClientError::Protocol`]; any other response is
    /// returned as is (its own `error_code` is the caller's to check).
    pub async fn send_timeout(
        &self,
        request: impl Into<Request>,
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        self.send_within(
            request.into(),
            timeout,
            Reconnect::UntilDeadline,
            SILENT_SOCKET,
        )
        .await
    }

    /// As [`Connection::send_timeout`], but a broken link gets one reconnect attempt, without
    /// backoff: a request routed to a group's coordinator fails fast when that node is gone,
    /// so that its caller finds the coordinator again instead of waiting on a dead address.
    pub(crate) async fn send_once(
        &self,
        request: impl Into<Request>,
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        self.send_within(request.into(), timeout, Reconnect::Once, SILENT_SOCKET)
            .await
    }

    /// As [`Connection::send_once`], for a request the server answers at once whatever the
    /// group's state (a Heartbeat): waiting the whole `timeout` with not one frame arriving on
    /// the socket retires it however short `timeout` is, so that a member behind a cut-off
    /// coordinator notices within a bound derived from its session timeout (issue #24), not
    /// [`SILENT_SOCKET`].
    pub(crate) async fn send_once_expecting_an_answer(
        &self,
        request: impl Into<Request>,
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        self.send_within(request.into(), timeout, Reconnect::Once, timeout)
            .await
    }

    async fn send_within(
        &self,
        request: Request,
        timeout: Duration,
        reconnect: Reconnect,
        silent_for: Duration,
    ) -> Result<Response, ClientError> {
        let name = request.name();
        let started = Instant::now();
        let deadline = started + timeout;
        let timed_out = || ClientError::Timeout {
            request: name,
            after: timeout,
        };
        let link = match tokio::time::timeout_at(deadline, self.link(deadline, reconnect)).await {
            Ok(link) => link?,
            Err(_) => return Err(timed_out()),
        };
        let heard_before = link.shared.received.load(Ordering::Relaxed);
        let call = link.call(self.next_correlation_id(), request, self.max_frame());
        match tokio::time::timeout_at(deadline, call).await {
            Ok(Ok(Response::Error(e))) => Err(ClientError::protocol(
                e.error_code,
                format!("{name}: {}", e.message),
            )),
            Ok(result) => result,
            Err(_) => {
                let silent = link.shared.received.load(Ordering::Relaxed) == heard_before;
                let silent_since = silent.then(|| link.shared.silent_since(started));
                if silent_since.is_some_and(|since| since.elapsed() >= silent_for) {
                    // Not a word from the server on this socket for a long wait: it is likely
                    // dead without the OS knowing (a cut network leaves a TCP connection
                    // "open" for many minutes, and a member on it would never rejoin). Close
                    // it, as Kafka's client does on a request timeout, so the next request
                    // reconnects. A socket that answered anything meanwhile stays, and so does
                    // one silent for less than `silent_for` (a busy server, not a dead socket),
                    // counted from the first of the requests that timed out in a row without
                    // a frame arriving.
                    warn!(
                        addr = %self.inner.config.addr,
                        request = name,
                        ?timeout,
                        "nothing heard from the server while waiting; reconnecting"
                    );
                    self.retire(&link);
                }
                Err(timed_out())
            }
        }
    }

    /// Closes `link` and, if it is still the current one, forgets it (the next request opens
    /// a new one).
    fn retire(&self, link: &Arc<Link>) {
        {
            let mut current = lock(&self.inner.current);
            if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, link)) {
                current.take();
            }
        }
        link.shutdown(ClientError::Disconnected);
    }

    fn max_frame(&self) -> usize {
        usize::try_from(self.inner.config.max_frame_bytes).unwrap_or(usize::MAX)
    }

    fn next_correlation_id(&self) -> u32 {
        loop {
            let id = self
                .inner
                .next_correlation_id
                .fetch_add(1, Ordering::Relaxed);
            // 0 is what the server uses for connection-level errors; never use it.
            if id != 0 {
                return id;
            }
        }
    }

    fn current_link(&self) -> Option<Arc<Link>> {
        lock(&self.inner.current)
            .as_ref()
            .filter(|link| link.shared.is_alive())
            .cloned()
    }

    /// The live link, or a new one: with [`Reconnect::UntilDeadline`], with backoff between
    /// failed attempts within `deadline`; with [`Reconnect::Once`], one attempt at once.
    async fn link(
        &self,
        deadline: Instant,
        reconnect: Reconnect,
    ) -> Result<Arc<Link>, ClientError> {
        if let Some(link) = self.current_link() {
            return Ok(link);
        }
        let mut state = self.inner.reconnect.lock().await;
        // Another caller may have reconnected while this one waited for the lock.
        if let Some(link) = self.current_link() {
            return Ok(link);
        }
        loop {
            if state.failures > 0 && reconnect == Reconnect::UntilDeadline {
                let delay = self.inner.config.backoff.next_delay(state.failures - 1);
                if Instant::now() + delay >= deadline {
                    return Err(state
                        .last_error
                        .clone()
                        .unwrap_or(ClientError::Disconnected));
                }
                debug!(
                    addr = %self.inner.config.addr,
                    attempt = state.failures,
                    ?delay,
                    "backing off before reconnecting"
                );
                tokio::time::sleep(delay).await;
            }
            match self.open_link().await {
                Ok(link) => {
                    state.failures = 0;
                    state.last_error = None;
                    *lock(&self.inner.current) = Some(Arc::clone(&link));
                    return Ok(link);
                }
                // A refused Hello (authentication, version) will not get better by retrying.
                Err(err) if !err.is_transport() => return Err(err),
                Err(err) => {
                    debug!(addr = %self.inner.config.addr, error = %err, "reconnect failed");
                    state.failures = state.failures.saturating_add(1);
                    if reconnect == Reconnect::Once {
                        return Err(err);
                    }
                    state.last_error = Some(err);
                }
            }
        }
    }

    /// Opens a socket and says `Hello` on it.
    async fn open_link(&self) -> Result<Arc<Link>, ClientError> {
        let config = &self.inner.config;
        let stream = tokio::time::timeout(config.connect_timeout, TcpStream::connect(&config.addr))
            .await
            .map_err(|_| ClientError::Timeout {
                request: "connect",
                after: config.connect_timeout,
            })??;
        stream.set_nodelay(true)?;
        let peer = stream.peer_addr().ok();
        let link = match &config.tls {
            None => {
                let (read, write) = stream.into_split();
                Link::start(read, write, peer, self.max_frame())
            }
            Some(tls) => {
                let (tls_config, name) = tls.for_addr(&config.addr)?;
                let connector = tokio_rustls::TlsConnector::from(tls_config);
                let stream =
                    tokio::time::timeout(config.connect_timeout, connector.connect(name, stream))
                        .await
                        .map_err(|_| ClientError::Timeout {
                            request: "TLS handshake",
                            after: config.connect_timeout,
                        })?
                        .map_err(|e| handshake_error(&config.addr, e))?;
                let (read, write) = tokio::io::split(stream);
                Link::start(read, write, peer, self.max_frame())
            }
        };
        let hello = HelloRequest {
            protocol_version: PROTOCOL_VERSION,
            client_id: config.client_id.clone(),
            auth_token: config.auth_token.clone(),
        };
        let answer = tokio::time::timeout(
            config.request_timeout,
            link.call(self.next_correlation_id(), hello.into(), self.max_frame()),
        )
        .await
        .map_err(|_| ClientError::Timeout {
            request: "Hello",
            after: config.request_timeout,
        })??;
        match answer {
            Response::Hello(h) if h.error_code == 0 => {
                debug!(server_id = %h.server_id, ?peer, "connected");
                *lock(&self.inner.server_id) = h.server_id;
                Ok(link)
            }
            Response::Hello(h) => Err(ClientError::protocol(
                h.error_code,
                format!(
                    "Hello (protocol version {PROTOCOL_VERSION}; the server supports {}..={})",
                    h.min_version, h.max_version
                ),
            )),
            Response::Error(e) => Err(ClientError::protocol(
                e.error_code,
                format!("Hello: {}", e.message),
            )),
            other => Err(ClientError::Unexpected(other.name())),
        }
    }

    /// The address of the server, once resolved by a successful connect.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        lock(&self.inner.current).as_ref().and_then(|l| l.peer)
    }
}

type Waiter = oneshot::Sender<Result<Response, ClientError>>;

/// One socket: the writer task, the reader task, and the requests waiting for answers.
struct Link {
    outgoing: mpsc::Sender<Bytes>,
    shared: Arc<LinkShared>,
    tasks: [AbortHandle; 2],
    peer: Option<SocketAddr>,
}

struct LinkShared {
    waiters: Mutex<HashMap<u32, Waiter>>,
    alive: AtomicBool,
    /// Frames read so far: a request that times out with this unchanged since it was sent
    /// heard nothing at all from the server meanwhile.
    received: AtomicU64,
    /// When the link opened: the origin of `silent_since_ms`.
    opened: Instant,
    /// When the first request that timed out without a frame arriving since was sent, in
    /// milliseconds after `opened`; [`NOT_SILENT`] once a frame arrives.
    silent_since_ms: AtomicU64,
}

/// `LinkShared::silent_since_ms` with nothing to count from.
const NOT_SILENT: u64 = u64::MAX;

impl LinkShared {
    /// A request started at `sent_at` timed out with no frame arriving meanwhile: since when
    /// the link has been silent (that request's start, or an earlier silent one's).
    fn silent_since(&self, sent_at: Instant) -> Instant {
        let sent_ms = u64::try_from(sent_at.saturating_duration_since(self.opened).as_millis())
            .unwrap_or(NOT_SILENT - 1);
        let earlier = self.silent_since_ms.fetch_min(sent_ms, Ordering::Relaxed);
        if earlier == NOT_SILENT {
            // (Not rounded to the link's opening: a request may have started before it.)
            sent_at
        } else {
            sent_at.min(self.opened + Duration::from_millis(earlier))
        }
    }

    /// A frame arrived: the link is not silent.
    fn heard(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
        if self.silent_since_ms.load(Ordering::Relaxed) != NOT_SILENT {
            self.silent_since_ms.store(NOT_SILENT, Ordering::Relaxed);
        }
    }

    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Marks the link dead and fails every waiting request with `err`.
    fn fail_all(&self, err: ClientError) {
        let waiters = {
            let mut waiters = lock(&self.waiters);
            self.alive.store(false, Ordering::Release);
            std::mem::take(&mut *waiters)
        };
        for (_, waiter) in waiters {
            let _ = waiter.send(Err(err.clone()));
        }
    }

    fn take(&self, correlation_id: u32) -> Option<Waiter> {
        lock(&self.waiters).remove(&correlation_id)
    }
}

/// Removes a request's waiter when the caller stops waiting (timeout, cancellation).
struct WaiterGuard<'a> {
    shared: &'a LinkShared,
    correlation_id: u32,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.shared.take(self.correlation_id);
    }
}

/// A request that waited at least this long without the server sending anything at all on
/// its socket closes that socket ([`Connection::send_timeout`]).
pub const SILENT_SOCKET: Duration = Duration::from_secs(10);

/// How many encoded requests may queue for the writer before senders wait.
const OUTGOING_QUEUE: usize = 256;

impl Link {
    fn start<R, W>(read: R, write: W, peer: Option<SocketAddr>, max_frame: usize) -> Arc<Link>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let mut codec = LengthDelimitedCodec::builder();
        codec
            .big_endian()
            .length_field_type::<u32>()
            .max_frame_length(max_frame);
        let frames_in = codec.new_read(read);
        let frames_out = codec.new_write(write);
        let shared = Arc::new(LinkShared {
            waiters: Mutex::new(HashMap::new()),
            alive: AtomicBool::new(true),
            received: AtomicU64::new(0),
            opened: Instant::now(),
            silent_since_ms: AtomicU64::new(NOT_SILENT),
        });
        let (outgoing, queue) = mpsc::channel(OUTGOING_QUEUE);
        let reader = tokio::spawn(read_loop(frames_in, Arc::clone(&shared)));
        let writer = tokio::spawn(write_loop(frames_out, queue, Arc::clone(&shared)));
        Arc::new(Link {
            outgoing,
            shared,
            tasks: [reader.abort_handle(), writer.abort_handle()],
            peer,
        })
    }

    fn shutdown(&self, reason: ClientError) {
        self.shared.fail_all(reason);
        for task in &self.tasks {
            task.abort();
        }
    }

    async fn call(
        &self,
        correlation_id: u32,
        request: Request,
        max_frame: usize,
    ) -> Result<Response, ClientError> {
        let frame = RequestFrame {
            correlation_id,
            request,
        };
        let mut payload = Vec::new();
        encode_request_payload(&frame, &mut payload)?;
        if payload.len() > max_frame {
            return Err(ClientError::Config(format!(
                "{} request of {} bytes exceeds the frame limit of {max_frame} bytes",
                frame.request.name(),
                payload.len()
            )));
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut waiters = lock(&self.shared.waiters);
            if !self.shared.is_alive() {
                return Err(ClientError::Disconnected);
            }
            waiters.insert(correlation_id, tx);
        }
        let _guard = WaiterGuard {
            shared: &self.shared,
            correlation_id,
        };
        self.outgoing
            .send(Bytes::from(payload))
            .await
            .map_err(|_| ClientError::Disconnected)?;
        rx.await.unwrap_or(Err(ClientError::Disconnected))
    }
}

/// A failed TLS handshake: a TLS error (untrusted certificate, name mismatch, refused client
/// certificate) is [`ClientError::Tls`], not retried; a broken socket stays an I/O error.
fn handshake_error(addr: &str, e: std::io::Error) -> ClientError {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls) => ClientError::from(TlsError::Handshake {
            addr: addr.to_owned(),
            reason: tls.to_string(),
        }),
        None => ClientError::from(e),
    }
}

/// A read that failed: a TLS error (with TLS 1.3 a refused client certificate arrives as an
/// alert after the handshake, on the first read) is [`ClientError::Tls`], not retried.
fn session_error(e: std::io::Error) -> ClientError {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls) => ClientError::from(TlsError::Session {
            reason: tls.to_string(),
        }),
        None => ClientError::from(e),
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.shutdown(ClientError::Disconnected);
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut frames: FramedRead<R, LengthDelimitedCodec>,
    shared: Arc<LinkShared>,
) {
    let reason = loop {
        let payload = match frames.next().await {
            None => break ClientError::Disconnected,
            Some(Err(err)) => break session_error(err),
            Some(Ok(payload)) => payload,
        };
        shared.heard();
        match decode_response(&payload) {
            Ok(frame) => {
                if let (0, Response::Error(e)) = (frame.correlation_id, &frame.response) {
                    // A connection-level refusal (frame too large, request before Hello): the
                    // server closes the socket after it.
                    warn!(code = e.error_code, message = %e.message, "server refused the connection");
                    break ClientError::protocol(
                        e.error_code,
                        format!("connection: {}", e.message),
                    );
                }
                match shared.take(frame.correlation_id) {
                    Some(waiter) => {
                        let _ = waiter.send(Ok(frame.response));
                    }
                    None => debug!(
                        correlation_id = frame.correlation_id,
                        response = frame.response.name(),
                        "answer to a request nobody waits for (timed out or cancelled)"
                    ),
                }
            }
            Err(err) => {
                // The framing is intact; only the request this payload answers fails.
                let correlation_id = correlation_hint(&payload);
                warn!(correlation_id, error = %err, "undecodable response");
                if let Some(waiter) = shared.take(correlation_id) {
                    let _ = waiter.send(Err(ClientError::Decode(err)));
                }
            }
        }
    };
    debug!(reason = %reason, "connection closed");
    shared.fail_all(reason);
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut frames: FramedWrite<W, LengthDelimitedCodec>,
    mut queue: mpsc::Receiver<Bytes>,
    shared: Arc<LinkShared>,
) {
    while let Some(first) = queue.recv().await {
        let mut result = frames.feed(first).await;
        // Write whatever else is already queued before one flush.
        while result.is_ok() {
            match queue.try_recv() {
                Ok(more) => result = frames.feed(more).await,
                Err(_) => break,
            }
        }
        if result.is_ok() {
            result = SinkExt::<Bytes>::flush(&mut frames).await;
        }
        if let Err(err) = result {
            shared.fail_all(ClientError::from(err));
            return;
        }
    }
}
