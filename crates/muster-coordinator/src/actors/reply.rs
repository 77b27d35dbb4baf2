//! The way back to a connection: every request carries a [`Slot`] (which request it was), and
//! travels either alone with a [`ReplyTo`] or in a [`super::GroupBatch`] that holds the
//! connection's channel once for all its requests. Every request is answered exactly once:
//! a `ReplyTo` or a batch dropped unanswered (its group actor stopped with the request still
//! queued) answers COORDINATOR_NOT_AVAILABLE by itself, so a client is never left waiting on a
//! request the server lost.

use std::time::Instant;

use muster_protocol::{ErrorCode, Response};
use tokio::sync::mpsc::UnboundedSender;

/// What a connection's writer receives: one answer, or the answers to a batch of requests
/// handled together (one channel operation and one wake-up for all of them).
#[derive(Debug)]
pub enum ToWriter {
    One(Outgoing),
    Many(Vec<Outgoing>),
}

/// The sending end of a connection's writer channel.
pub type WriterTx = UnboundedSender<ToWriter>;

/// A response on its way to a connection's writer.
#[derive(Debug)]
pub struct Outgoing {
    pub response: Response,
    pub slot: Slot,
}

/// One request, as far as its answer is concerned.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    pub correlation_id: u32,
    /// Whether the request holds one of the connection's in-flight slots, which the writer
    /// gives back once the answer is written (that is what bounds a connection's buffered
    /// responses). Answers to frames that were never dispatched hold none.
    pub in_flight: bool,
    /// The request's wire tag ([`muster_protocol::Request::tag`]), or [`NO_REQUEST`] for
    /// answers to frames that never decoded.
    pub request_tag: u32,
    /// When the request arrived (for latency metrics).
    pub started: Instant,
}

impl Slot {
    /// The answer to this request.
    pub fn answer(self, response: Response) -> Outgoing {
        Outgoing {
            response,
            slot: self,
        }
    }
}

/// [`Slot::request_tag`] of an answer to a frame that never decoded into a request.
pub const NO_REQUEST: u32 = u32::MAX;

/// The answer to a request the server lost before handling it.
pub(crate) fn lost() -> Response {
    Response::error(
        ErrorCode::CoordinatorNotAvailable,
        "the group was being moved or deleted; retry",
    )
}

/// Where to send the answer to one request.
#[derive(Debug)]
pub struct ReplyTo {
    tx: Option<WriterTx>,
    slot: Slot,
}

impl ReplyTo {
    pub fn new(tx: WriterTx, slot: Slot) -> Self {
        Self { tx: Some(tx), slot }
    }

    pub fn correlation_id(&self) -> u32 {
        self.slot.correlation_id
    }

    /// Sends the answer. A closed connection simply drops it.
    pub fn send(mut self, response: Response) {
        self.deliver(response);
    }

    fn deliver(&mut self, response: Response) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(ToWriter::One(self.slot.answer(response)));
        }
    }
}

impl Drop for ReplyTo {
    fn drop(&mut self) {
        if self.tx.is_some() {
            self.deliver(lost());
        }
    }
}
