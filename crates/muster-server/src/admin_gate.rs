//! The server-wide bound on admin requests in flight (`max_admin_requests_in_flight`, protocol
//! §6.18): DescribeGroups, ListGroups, DeleteGroups, CreateTopics, DescribeTopics,
//! GroupHistory and GroupDiagnosis, from every connection and from the dashboard. (Requests,
//! not the admin HTTP listener: that is `admin.rs`.)
//!
//! Why: every admin request is answered by the one supervisor, whose mailbox takes whatever it
//! is sent (routing must never wait behind it). Each connection bounds its own requests in
//! flight, but together the connections could queue `max_connections × max_in_flight` admin
//! requests there, each holding its request and later its answer. Group requests do not need
//! this: they spread over the group actors and a session sends its batches as they come.
//!
//! How: a request takes a permit before it is sent to the supervisor. The permit rides in the
//! request's reply path and is given back when the request is answered, whoever answers it:
//! the supervisor, a group, or the reply's drop guard when the request is lost on the way
//! (it answers COORDINATOR_NOT_AVAILABLE). With every permit taken the request is answered at
//! once, RESOURCE_LIMIT_REACHED (retriable): it never waits in a queue of its own either.

use std::sync::Arc;

use muster_coordinator::actors::{Answer, Replies, ReplySink, ReplyTo, Ticket};
use muster_protocol::{ErrorCode, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The server's admin requests in flight, shared (a clone is the same count) by the sessions
/// and the dashboard.
#[derive(Debug, Clone)]
pub struct AdminGate {
    permits: Arc<Semaphore>,
    max: usize,
}

impl AdminGate {
    /// A gate that lets `max` admin requests be in flight at once (at least 1).
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        AdminGate {
            permits: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// The reply path for one admin request to the connection behind `to`: it holds one of
    /// the gate's permits until the request is answered. With every permit taken, `None`:
    /// `ticket` has then been answered RESOURCE_LIMIT_REACHED through `to`, and the request
    /// must not be sent.
    pub fn admit(&self, to: Replies, ticket: Ticket) -> Option<ReplyTo> {
        // `try_acquire_owned` fails only with no permit free: the semaphore is never closed.
        match Arc::clone(&self.permits).try_acquire_owned() {
            Ok(permit) => {
                let holding: Replies = Arc::new(Holding {
                    to,
                    _permit: permit,
                });
                Some(ReplyTo::new(holding, ticket))
            }
            Err(_) => {
                to.send(ticket.answer(self.full()));
                None
            }
        }
    }

    /// Admin requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.max.saturating_sub(self.permits.available_permits())
    }

    /// Most admin requests in flight at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The answer to a request that found every permit taken.
    fn full(&self) -> Response {
        Response::error(
            ErrorCode::ResourceLimitReached,
            format!(
                "too many admin requests in flight on this server ({}): retry",
                self.max
            ),
        )
    }
}

/// A connection's sink and the permit of the one request answered through it. A [`ReplyTo`]
/// lets go of its sink as soon as it has answered (or, dropped unanswered, once it has
/// answered COORDINATOR_NOT_AVAILABLE), so the permit goes back with the answer.
#[derive(Debug)]
struct Holding {
    to: Replies,
    _permit: OwnedSemaphorePermit,
}

impl ReplySink for Holding {
    fn send(&self, answer: Answer) {
        self.to.send(answer);
    }

    fn send_all(&self, answers: Vec<Answer>) {
        self.to.send_all(answers);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Instant;

    use muster_protocol::ListGroupsResponse;

    use super::*;

    /// A connection that records the answers it is sent.
    #[derive(Debug, Default)]
    struct Recorded(Mutex<Vec<Answer>>);

    impl ReplySink for Recorded {
        fn send(&self, answer: Answer) {
            self.0.lock().expect("not poisoned").push(answer);
        }

        fn send_all(&self, answers: Vec<Answer>) {
            self.0.lock().expect("not poisoned").extend(answers);
        }
    }

    impl Recorded {
        /// (correlation id, error code) of each answer so far.
        fn seen(&self) -> Vec<(u32, i16)> {
            self.0
                .lock()
                .expect("not poisoned")
                .iter()
                .map(|a| (a.ticket.correlation_id, a.response.error_code()))
                .collect()
        }
    }

    fn ticket(correlation_id: u32) -> Ticket {
        Ticket {
            correlation_id,
            request_tag: 0,
            arrived: Instant::now(),
        }
    }

    fn listed() -> Response {
        Response::ListGroups(ListGroupsResponse {
            error_code: ErrorCode::None.code(),
            groups: Vec::new(),
        })
    }

    #[test]
    fn past_the_bound_a_request_is_answered_at_once_and_an_answer_frees_a_permit() {
        let sink = Arc::new(Recorded::default());
        let to: Replies = sink.clone();
        let gate = AdminGate::new(2);
        let first = gate
            .admit(Arc::clone(&to), ticket(1))
            .expect("a permit is free");
        let second = gate
            .admit(Arc::clone(&to), ticket(2))
            .expect("a permit is free");
        assert_eq!(gate.in_flight(), 2);
        assert!(sink.seen().is_empty(), "admitted requests are not answered");

        // Full: answered at once, and never admitted.
        assert!(gate.admit(Arc::clone(&to), ticket(3)).is_none());
        assert_eq!(gate.in_flight(), 2, "a refused request takes no permit");
        let full = ErrorCode::ResourceLimitReached.code();
        assert_eq!(sink.seen(), [(3, full)]);
        let message = match &sink.0.lock().expect("not poisoned")[0].response {
            Response::Error(e) => e.message.clone(),
            other => panic!("expected Error, got {other:?}"),
        };
        assert!(
            message.contains("too many admin requests in flight"),
            "{message}"
        );
        assert!(message.contains("(2)"), "names the bound: {message}");

        // Answering gives the permit back: the next request is admitted.
        first.send(listed());
        assert_eq!(gate.in_flight(), 1);
        let fourth = gate
            .admit(Arc::clone(&to), ticket(4))
            .expect("freed by the answer");
        assert!(gate.admit(Arc::clone(&to), ticket(5)).is_none());

        // So does a request lost unanswered (its reply's drop guard answers it).
        drop(second);
        assert_eq!(gate.in_flight(), 1);
        drop(fourth);
        assert_eq!(gate.in_flight(), 0);
        let lost = ErrorCode::CoordinatorNotAvailable.code();
        assert_eq!(
            sink.seen(),
            [
                (3, full),
                (1, ErrorCode::None.code()),
                (5, full),
                (2, lost),
                (4, lost)
            ]
        );
    }

    #[test]
    fn clones_share_one_count_and_the_bound_is_at_least_one() {
        let to: Replies = Arc::new(Recorded::default());
        let gate = AdminGate::new(0);
        assert_eq!(gate.max(), 1);
        let other = gate.clone();
        let held = gate.admit(Arc::clone(&to), ticket(1)).expect("one permit");
        assert!(other.admit(Arc::clone(&to), ticket(2)).is_none());
        drop(held);
        assert!(other.admit(to, ticket(3)).is_some());
    }
}
