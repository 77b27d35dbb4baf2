//! The network front end: an actor that accepts TCP connections and starts one
//! [`Session`] per connection, spreading them round-robin over the worker arbiters. With TLS,
//! the handshake runs on the connection's worker (bounded by the handshake timeout), never in
//! the accept loop; a connection counts against `max_connections` from its accept on, handshake
//! included.
//!
//! It holds the `running` sender that graceful shutdown waits on (mini-redis's
//! `shutdown_complete_tx`): every connection it admits takes a clone, and it drops its own
//! when it stops accepting, so the server's receiver closes once the last connection is gone.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use actix::prelude::*;
use futures_util::stream;
use metrics::counter;
use muster_protocol::{encode_response, ErrorCode, Response, ResponseFrame};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::session::{ConnectionSlot, Session, SessionSettings};
use crate::tls::{self, TlsSettings};

pub struct Listener {
    listener: Option<TcpListener>,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: usize,
    next_connection: u64,
    settings: Arc<SessionSettings>,
    /// Cloned into every admitted connection; `None` once accepting stopped.
    running: Option<mpsc::Sender<()>>,
    /// TLS for every connection, if configured.
    tls: Option<TlsSettings>,
}

impl Listener {
    /// `running`: the sender whose receiver sees the channel close once the listener has
    /// stopped and every connection it admitted has ended.
    pub fn new(
        listener: TcpListener,
        arbiters: Vec<ArbiterHandle>,
        settings: Arc<SessionSettings>,
        running: mpsc::Sender<()>,
        tls: Option<TlsSettings>,
    ) -> Self {
        Self {
            tls,
            listener: Some(listener),
            arbiters,
            next_arbiter: 0,
            next_connection: 1,
            settings,
            running: Some(running),
        }
    }
}

impl Actor for Listener {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if let Some(listener) = self.listener.take() {
            let accepts = stream::unfold(
                (listener, AcceptBackoff::new("client")),
                |(listener, mut backoff)| async move {
                    loop {
                        match listener.accept().await {
                            Ok(accepted) => {
                                backoff.succeeded();
                                return Some((accepted, (listener, backoff)));
                            }
                            Err(e) => {
                                if let Some(pause) = backoff.failed(&e) {
                                    tokio::time::sleep(pause).await;
                                }
                            }
                        }
                    }
                },
            );
            ctx.add_stream(accepts);
        }
    }
}

/// Stop accepting connections (graceful shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopAccepting;

impl Handler<StopAccepting> for Listener {
    type Result = ();

    fn handle(&mut self, _: StopAccepting, ctx: &mut Self::Context) {
        // Now, not when the actor is dropped: shutdown waits for the last sender to go.
        self.running = None;
        ctx.stop();
    }
}

impl StreamHandler<(TcpStream, SocketAddr)> for Listener {
    fn handle(&mut self, (stream, peer): (TcpStream, SocketAddr), _: &mut Self::Context) {
        let Some(running) = &self.running else {
            // Accepted just as accepting stopped: shutdown no longer waits for it.
            return;
        };
        let _ = stream.set_nodelay(true);
        counter!("muster_connections_total").increment(1);
        let Some(slot) = ConnectionSlot::acquire(&self.settings, running) else {
            counter!("muster_connections_rejected_total", "reason" => "max_connections")
                .increment(1);
            warn!(%peer, max = self.settings.max_connections, "connection refused: too many connections");
            actix::spawn(refuse(stream));
            return;
        };
        let id = self.next_connection;
        self.next_connection += 1;
        let tls = self.tls.clone();
        if self.arbiters.is_empty() {
            open(id, stream, peer, slot, tls);
            return;
        }
        // A tokio socket is bound to its runtime: move it to the worker as a std socket.
        let std_stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "could not hand the connection to a worker");
                return;
            }
        };
        let arbiter = &self.arbiters[self.next_arbiter % self.arbiters.len()];
        self.next_arbiter = self.next_arbiter.wrapping_add(1);
        let started = arbiter.spawn_fn(move || match TcpStream::from_std(std_stream) {
            Ok(stream) => open(id, stream, peer, slot, tls),
            Err(e) => warn!(error = %e, "could not adopt the connection on its worker"),
        });
        if !started {
            debug!(
                connection = id,
                "worker arbiter is gone; connection dropped"
            );
        }
    }

    fn finished(&mut self, _: &mut Self::Context) {}
}

/// Starts the connection's session on the current arbiter, after its TLS handshake if TLS is
/// on. A failed handshake (counted and logged by [`tls::accept`]) just drops the connection
/// and its slot.
fn open(
    id: u64,
    stream: TcpStream,
    peer: SocketAddr,
    slot: ConnectionSlot,
    tls: Option<TlsSettings>,
) {
    let Some(tls) = tls else {
        Session::create(move |_| Session::new(id, stream.into(), None, peer, slot));
        return;
    };
    // Shutdown does not wait for handshakes: a stalled one would hold it up to its timeout.
    let mut shutdown = slot.settings().shutdown_signal();
    actix::spawn(async move {
        let config = tls.clients.get();
        let handshake = tls::accept(&config, tls.handshake_timeout, stream, peer, "client");
        let accepted = tokio::select! {
            accepted = handshake => accepted,
            _ = shutdown.wait_for(|down| *down) => return,
        };
        if let Ok(accepted) = accepted {
            let name = accepted.certificate_name;
            Session::create(move |_| Session::new(id, accepted.stream, name, peer, slot));
        }
    });
}

/// Shortest pause after an accept that failed for want of resources.
const ACCEPT_PAUSE_MIN: Duration = Duration::from_millis(10);

/// Longest pause between accepts while they keep failing.
const ACCEPT_PAUSE_MAX: Duration = Duration::from_secs(1);

/// An accept loop's back-off. When the process runs out of file descriptors (EMFILE, ENFILE)
/// or memory for sockets, the listening socket stays readable and every accept fails at once:
/// retrying at once spins a core and writes a log line per attempt. Instead the loop pauses,
/// 10 ms doubling to 1 s while failures last, back to none on the first success; and it logs
/// one WARN when an episode starts and one, with the count of failures, when it ends.
pub(crate) struct AcceptBackoff {
    listener: &'static str,
    failures: u64,
    pause: Duration,
    since: Option<Instant>,
}

impl AcceptBackoff {
    pub(crate) fn new(listener: &'static str) -> Self {
        Self {
            listener,
            failures: 0,
            pause: Duration::ZERO,
            since: None,
        }
    }

    /// An accept failed: how long to pause before the next one (`None`: the failure was the
    /// connection's own, accept again at once).
    pub(crate) fn failed(&mut self, e: &io::Error) -> Option<Duration> {
        counter!("muster_accept_errors_total", "listener" => self.listener).increment(1);
        if matches!(
            e.kind(),
            io::ErrorKind::ConnectionAborted
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::Interrupted
                | io::ErrorKind::WouldBlock
        ) {
            debug!(listener = self.listener, error = %e, "accept failed");
            return None;
        }
        self.failures += 1;
        if self.since.is_none() {
            warn!(
                listener = self.listener,
                error = %e,
                "accept failing (out of file descriptors?); backing off until it works again"
            );
            self.since = Some(Instant::now());
            self.pause = ACCEPT_PAUSE_MIN;
        } else {
            self.pause = (self.pause * 2).min(ACCEPT_PAUSE_MAX);
        }
        Some(self.pause)
    }

    /// An accept worked: ends a back-off episode, if one was on.
    pub(crate) fn succeeded(&mut self) {
        if let Some(since) = self.since.take() {
            warn!(
                listener = self.listener,
                failures = self.failures,
                for_ms = since.elapsed().as_millis() as u64,
                "accepting again after failed accepts"
            );
            self.failures = 0;
            self.pause = Duration::ZERO;
        }
    }
}

/// Answers TOO_MANY_CONNECTIONS (correlation id 0) and closes, without starting a session.
async fn refuse(mut stream: TcpStream) {
    let frame = ResponseFrame {
        correlation_id: 0,
        response: Response::error(ErrorCode::TooManyConnections, "too many connections"),
    };
    let mut buf = Vec::new();
    if encode_response(&frame, &mut buf).is_ok() {
        let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&buf)).await;
    }
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_back_off_doubling_to_a_second_and_reset_on_success() {
        let mut backoff = AcceptBackoff::new("test");
        let emfile = io::Error::other("Too many open files (os error 24)");
        let pauses: Vec<u64> = (0..10)
            .map(|_| backoff.failed(&emfile).map_or(0, |p| p.as_millis() as u64))
            .collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        assert_eq!(backoff.failures, 10);
        backoff.succeeded();
        assert_eq!(backoff.failures, 0);
        assert_eq!(
            backoff.failed(&emfile),
            Some(ACCEPT_PAUSE_MIN),
            "a new episode starts small"
        );
        // A connection that failed on its own (reset before it was accepted) costs no pause.
        let aborted = io::Error::from(io::ErrorKind::ConnectionAborted);
        assert_eq!(backoff.failed(&aborted), None);
    }
}
