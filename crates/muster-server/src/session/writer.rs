//! The writer half of a connection and its protocol: the [`Outbox`] (the connection's
//! [`ReplySink`], which the coordinator's actors answer through), the [`ToWriter`] messages on
//! its channel, and the writer task that batches whatever answers are ready into one write and
//! gives the answered requests' in-flight slots back once their bytes are on the wire.
//!
//! In-flight bookkeeping lives here, not in the coordinator: every answer that comes through
//! the sink (`One`, `Many`) is to a request that took a slot; the session's own answers to
//! frames that never took one go as `Unslotted`.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use muster_coordinator::actors::{Answer, ReplySink};
use muster_protocol::{encode_response, ErrorCode, Response, ResponseFrame};
use tokio::io::{AsyncWriteExt, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tracing::info;

use crate::telemetry::RequestMetrics;

/// Bytes the writer gathers from ready responses before one write.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// The writer buffer's capacity kept between writes.
const WRITE_BUF_KEEP: usize = 8 * 1024;

/// What a connection's writer receives.
#[derive(Debug)]
pub(crate) enum ToWriter {
    /// The answer to one request holding an in-flight slot.
    One(Answer),
    /// The answers to a batch of requests handled together, each holding a slot (one channel
    /// operation and one wake-up for all of them).
    Many(Vec<Answer>),
    /// An answer to a frame that never took an in-flight slot (an oversize frame).
    Unslotted(Answer),
}

/// The sending end of a connection's writer channel: what the session and, as the
/// connection's [`ReplySink`], the coordinator's actors answer through. One per connection,
/// shared (an `Arc` clone per batch or held request, never an allocation).
#[derive(Debug)]
pub(crate) struct Outbox(mpsc::UnboundedSender<ToWriter>);

impl Outbox {
    pub(crate) fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<ToWriter>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Arc::new(Self(tx)), rx)
    }

    /// Queues `msg` for the writer. A closed connection simply drops it.
    pub(crate) fn push(&self, msg: ToWriter) {
        let _ = self.0.send(msg);
    }
}

impl ReplySink for Outbox {
    fn send(&self, answer: Answer) {
        self.push(ToWriter::One(answer));
    }

    fn send_all(&self, answers: Vec<Answer>) {
        self.push(ToWriter::Many(answers));
    }
}

/// Writes responses as they come, batching whatever is ready into one write, and gives the
/// answered requests' in-flight slots back once their bytes are written. On `close` it writes
/// what is already queued and shuts the socket.
pub(crate) async fn write_responses(
    mut write: WriteHalf<TcpStream>,
    mut rx: mpsc::UnboundedReceiver<ToWriter>,
    permits: Arc<Semaphore>,
    mut close: oneshot::Receiver<()>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let mut out = Encoder::new();
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
    fn new() -> Self {
        Self {
            buf: Vec::with_capacity(WRITE_BUF_KEEP),
            answered: 0,
            now: Instant::now(),
            metrics: RequestMetrics::new(),
        }
    }

    fn push(&mut self, next: ToWriter) {
        match next {
            ToWriter::One(answer) => {
                self.answered += 1;
                self.encode(answer);
            }
            ToWriter::Many(answers) => {
                self.answered += answers.len();
                for answer in answers {
                    self.encode(answer);
                }
            }
            ToWriter::Unslotted(answer) => self.encode(answer),
        }
    }

    fn encode(&mut self, Answer { ticket, response }: Answer) {
        let latency = self.now.saturating_duration_since(ticket.arrived);
        self.metrics.record(ticket.request_tag, &response, latency);
        let frame = ResponseFrame {
            correlation_id: ticket.correlation_id,
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
    }
}

#[cfg(test)]
mod tests {
    use muster_coordinator::actors::Ticket;
    use muster_protocol::{decode_response, HeartbeatResponse};

    use super::*;

    fn answer(correlation_id: u32) -> Answer {
        Ticket {
            correlation_id,
            request_tag: 3,
            arrived: Instant::now(),
        }
        .answer(Response::Heartbeat(HeartbeatResponse {
            error_code: ErrorCode::None.code(),
        }))
    }

    #[test]
    fn answers_through_the_sink_give_their_slots_back_unslotted_ones_do_not() {
        let (outbox, mut rx) = Outbox::new();
        outbox.send(answer(1));
        outbox.send_all(vec![answer(2), answer(3)]);
        outbox.push(ToWriter::Unslotted(answer(4)));
        let mut out = Encoder::new();
        while let Ok(next) = rx.try_recv() {
            out.push(next);
        }
        assert_eq!(out.answered, 3);
        // Four frames, in the order queued, each with its correlation id.
        let mut ids = Vec::new();
        let mut rest = &out.buf[..];
        while rest.len() >= 4 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let frame = decode_response(&rest[4..4 + len]).expect("a response frame");
            ids.push(frame.correlation_id);
            rest = &rest[4 + len..];
        }
        assert_eq!(ids, [1, 2, 3, 4]);
    }
}
