//! The way back to a connection, as far as the coordinator needs it: a [`ReplySink`] that takes
//! [`Answer`]s, and a [`Ticket`] per request that the coordinator carries from request to answer
//! without reading it. The connection (the server's session) owns the concrete channel, the
//! framing and the in-flight bookkeeping behind the sink.
//!
//! A request travels either alone with a [`ReplyTo`] or in a [`super::GroupBatch`] that holds
//! the connection's sink once for all its requests. Every request is answered exactly once: a
//! `ReplyTo` or a batch dropped unanswered (its group actor stopped with the request still
//! queued) answers COORDINATOR_NOT_AVAILABLE by itself, so a client is never left waiting on a
//! request the server lost.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use muster_protocol::{ErrorCode, Response};

/// A connection's note of one request, handed back with its answer: which request it was
/// (correlation id, wire tag) and when it arrived. The coordinator only carries it.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    pub correlation_id: u32,
    /// The request's wire tag ([`muster_protocol::Request::tag`]).
    pub request_tag: u32,
    /// When the request arrived (for latency metrics).
    pub arrived: Instant,
}

impl Ticket {
    /// The answer to this request.
    pub fn answer(self, response: Response) -> Answer {
        Answer {
            ticket: self,
            response,
        }
    }
}

/// A response and the request it answers.
#[derive(Debug)]
pub struct Answer {
    pub ticket: Ticket,
    pub response: Response,
}

/// Where a connection takes its answers, in whatever order they complete (each carries its
/// request's correlation id). Implemented by the server's per-connection writer; shared as one
/// [`Replies`] per connection, so handing it to a request or a batch is a reference count,
/// never an allocation. A closed connection drops what it is sent.
pub trait ReplySink: fmt::Debug + Send + Sync + 'static {
    /// One answer.
    fn send(&self, answer: Answer);
    /// The answers to requests handled together, in one go (one channel operation and one
    /// writer wake-up for all of them).
    fn send_all(&self, answers: Vec<Answer>);
}

/// A connection's [`ReplySink`], shared.
pub type Replies = Arc<dyn ReplySink>;

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
    to: Option<Replies>,
    ticket: Ticket,
}

impl ReplyTo {
    pub fn new(to: Replies, ticket: Ticket) -> Self {
        Self {
            to: Some(to),
            ticket,
        }
    }

    /// Sends the answer. A closed connection simply drops it.
    pub fn send(mut self, response: Response) {
        self.deliver(response);
    }

    fn deliver(&mut self, response: Response) {
        if let Some(to) = self.to.take() {
            to.send(self.ticket.answer(response));
        }
    }
}

/// Sends many answers at once, with one [`ReplySink::send_all`] per connection among them. A
/// barrier's answers go to as many members as the group has, over far fewer connections: this
/// makes their fan-out one channel operation and one writer wake-up per connection, not per
/// member (the wake-ups were ~9 % of the server's samples in a 1 000-member rebalance).
/// Answers to one connection keep their order.
pub fn send_grouped(replies: Vec<(ReplyTo, Response)>) {
    if replies.len() <= 1 {
        for (to, response) in replies {
            to.send(response);
        }
        return;
    }
    let mut by_sink: Vec<(Replies, Vec<Answer>)> = Vec::new();
    // Keyed by the sink's address: one per connection.
    let mut index: HashMap<*const (), usize> = HashMap::new();
    for (mut to, response) in replies {
        // Taken: the emptied `ReplyTo` answers nothing when dropped.
        let Some(sink) = to.to.take() else {
            continue;
        };
        let answer = to.ticket.answer(response);
        let key = Arc::as_ptr(&sink).cast::<()>();
        match index.get(&key) {
            Some(&at) => {
                if let Some((_, answers)) = by_sink.get_mut(at) {
                    answers.push(answer);
                }
            }
            None => {
                index.insert(key, by_sink.len());
                by_sink.push((sink, vec![answer]));
            }
        }
    }
    for (sink, mut answers) in by_sink {
        if answers.len() == 1 {
            sink.send(answers.swap_remove(0));
        } else {
            sink.send_all(answers);
        }
    }
}

impl Drop for ReplyTo {
    fn drop(&mut self) {
        if self.to.is_some() {
            self.deliver(lost());
        }
    }
}

/// A sink that records what it is sent, for tests of the answer-exactly-once guarantee.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// Each `send` (a batch of one) or `send_all`, in order.
    pub sends: std::sync::Mutex<Vec<Vec<Answer>>>,
}

#[cfg(test)]
impl ReplySink for Recorded {
    fn send(&self, answer: Answer) {
        self.sends
            .lock()
            .expect("test sink not poisoned")
            .push(vec![answer]);
    }

    fn send_all(&self, answers: Vec<Answer>) {
        self.sends
            .lock()
            .expect("test sink not poisoned")
            .push(answers);
    }
}

/// Tests: a heartbeat's ticket with this correlation id.
#[cfg(test)]
pub(crate) fn ticket(correlation_id: u32) -> Ticket {
    Ticket {
        correlation_id,
        request_tag: 3,
        arrived: Instant::now(),
    }
}

#[cfg(test)]
mod tests {
    use muster_protocol::{HeartbeatResponse, Response};

    use super::*;

    #[test]
    fn a_reply_answers_once_and_a_dropped_one_answers_lost() {
        let sink = Arc::new(Recorded::default());
        let replies: Replies = sink.clone();
        ReplyTo::new(Arc::clone(&replies), ticket(1)).send(Response::Heartbeat(
            HeartbeatResponse {
                error_code: ErrorCode::None.code(),
            },
        ));
        drop(ReplyTo::new(replies, ticket(2)));
        let sends = sink.sends.lock().expect("not poisoned");
        let seen: Vec<(u32, i16)> = sends
            .iter()
            .flatten()
            .map(|a| (a.ticket.correlation_id, a.response.error_code()))
            .collect();
        assert_eq!(
            seen,
            [
                (1, ErrorCode::None.code()),
                (2, ErrorCode::CoordinatorNotAvailable.code())
            ]
        );
    }

    #[test]
    fn grouped_answers_go_once_per_connection_in_order() {
        let ok = || {
            Response::Heartbeat(HeartbeatResponse {
                error_code: ErrorCode::None.code(),
            })
        };
        let a = Arc::new(Recorded::default());
        let b = Arc::new(Recorded::default());
        let (to_a, to_b): (Replies, Replies) = (a.clone(), b.clone());
        send_grouped(vec![
            (ReplyTo::new(Arc::clone(&to_a), ticket(1)), ok()),
            (ReplyTo::new(Arc::clone(&to_b), ticket(2)), ok()),
            (ReplyTo::new(Arc::clone(&to_a), ticket(3)), ok()),
            (ReplyTo::new(to_a, ticket(4)), ok()),
        ]);
        let ids = |sink: &Recorded| -> Vec<Vec<u32>> {
            sink.sends
                .lock()
                .expect("not poisoned")
                .iter()
                .map(|sent| sent.iter().map(|x| x.ticket.correlation_id).collect())
                .collect()
        };
        assert_eq!(ids(&a), [vec![1, 3, 4]], "one send_all, in order");
        assert_eq!(ids(&b), [vec![2]], "exactly once, nothing lost");
    }
}
