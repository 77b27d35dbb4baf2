//! The network front end: an actor that accepts TCP connections and starts one
//! [`Session`] per connection, spreading them round-robin over the worker arbiters.
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
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::session::{ConnectionSlot, Session, SessionSettings};

pub struct Listener {
    listener: Option<TcpListener>,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: usize,
    next_connection: u64,
    settings: Arc<SessionSettings>,
    /// Cloned into every admitted connection; `None` once accepting stopped.
    running: Option<mpsc::Sender<()>>,
}

impl Listener {
    /// `running`: the sender whose receiver sees the channel close once the listener has
    /// stopped and every connection it admitted has ended.
    pub fn new(
        listener: TcpListener,
        arbiters: Vec<ArbiterHandle>,
        settings: Arc<SessionSettings>,
        running: mpsc::Sender<()>,
    ) -> Self {
        Self {
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
            let accepts = stream::unfold(listener, |listener| async move {
                let accepted = listener.accept().await;
                Some((accepted, listener))
            });
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

impl StreamHandler<io::Result<(TcpStream, SocketAddr)>> for Listener {
    fn handle(&mut self, item: io::Result<(TcpStream, SocketAddr)>, _: &mut Self::Context) {
        let (stream, peer) = match item {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: keep listening.
                warn!(error = %e, "accept failed");
                return;
            }
        };
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
        if self.arbiters.is_empty() {
            Session::create(move |_| Session::new(id, stream, peer, slot));
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
            Ok(stream) => {
                Session::create(move |_| Session::new(id, stream, peer, slot));
            }
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
