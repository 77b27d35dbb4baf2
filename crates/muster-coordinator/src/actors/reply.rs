//! The way back to a connection: every request carries a [`ReplyTo`], and every `ReplyTo` is
//! answered exactly once. One dropped unanswered (its group actor stopped with the request
//! still queued) answers COORDINATOR_NOT_AVAILABLE by itself, so a client is never left
//! waiting on a request the server lost.

use std::time::Instant;

use muster_protocol::{ErrorCode, Response};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::OwnedSemaphorePermit;

/// A response on its way to a connection's writer. The permit is the connection's
/// in-flight slot; the writer releases it once the bytes are written, which is what bounds a
/// connection's buffered responses.
#[derive(Debug)]
pub struct Outgoing {
    pub correlation_id: u32,
    pub response: Response,
    pub permit: Option<OwnedSemaphorePermit>,
    /// The request's wire tag ([`muster_protocol::Request::tag`]), or [`NO_REQUEST`] for
    /// answers to frames that never decoded.
    pub request_tag: u32,
    /// When the request arrived (for latency metrics).
    pub started: Instant,
}

/// [`Outgoing::request_tag`] of an answer to a frame that never decoded into a request.
pub const NO_REQUEST: u32 = u32::MAX;

/// Where to send the answer to one request.
#[derive(Debug)]
pub struct ReplyTo {
    tx: Option<UnboundedSender<Outgoing>>,
    correlation_id: u32,
    permit: Option<OwnedSemaphorePermit>,
    request_tag: u32,
    started: Instant,
}

impl ReplyTo {
    /// `request_tag` is the request's wire tag, or [`NO_REQUEST`].
    pub fn new(
        tx: UnboundedSender<Outgoing>,
        correlation_id: u32,
        permit: Option<OwnedSemaphorePermit>,
        request_tag: u32,
    ) -> Self {
        Self {
            tx: Some(tx),
            correlation_id,
            permit,
            request_tag,
            started: Instant::now(),
        }
    }

    pub fn correlation_id(&self) -> u32 {
        self.correlation_id
    }

    /// Sends the answer. A closed connection simply drops it.
    pub fn send(mut self, response: Response) {
        self.deliver(response);
    }

    fn deliver(&mut self, response: Response) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Outgoing {
                correlation_id: self.correlation_id,
                response,
                permit: self.permit.take(),
                request_tag: self.request_tag,
                started: self.started,
            });
        }
    }
}

impl Drop for ReplyTo {
    fn drop(&mut self) {
        if self.tx.is_some() {
            self.deliver(Response::error(
                ErrorCode::CoordinatorNotAvailable,
                "the group was being moved or deleted; retry",
            ));
        }
    }
}
