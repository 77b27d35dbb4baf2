//! Asking the supervisor an admin request as a client's connection would (the same
//! [`AdminCall`], so the same authorization applies, through the same [`AdminGate`], so the
//! same server-wide bound on admin requests in flight), and awaiting its one answer: what the
//! group page (`api.rs`) and its journal and diagnosis (`insight.rs`) both ask through.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use actix::Addr;
use muster_coordinator::access::Access;
use muster_coordinator::actors::{AdminCall, Answer, Replies, ReplySink, Supervisor, Ticket};
use muster_protocol::{Request, Response as Wire};
use tokio::sync::oneshot;

use crate::admin_gate::AdminGate;

/// What the dashboard asks: the supervisor, and the gate every admin request passes.
#[derive(Debug)]
pub(super) struct Backend {
    pub supervisor: Addr<Supervisor>,
    pub gate: AdminGate,
}

/// The one answer to one [`AdminCall`], handed to whoever awaits it.
#[derive(Debug)]
struct OneAnswer(Mutex<Option<oneshot::Sender<Wire>>>);

impl ReplySink for OneAnswer {
    fn send(&self, answer: Answer) {
        let sender = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(sender) = sender {
            let _ = sender.send(answer.response);
        }
    }

    fn send_all(&self, answers: Vec<Answer>) {
        for answer in answers {
            self.send(answer);
        }
    }
}

/// Asks the supervisor an admin request as a client's connection would, with `access`. With
/// the server's admin requests in flight at their bound, the answer is RESOURCE_LIMIT_REACHED,
/// at once, as a client's would be.
pub(super) async fn ask(
    backend: &Backend,
    request: Request,
    access: Access,
) -> Result<Wire, &'static str> {
    let (sender, answer) = oneshot::channel();
    let ticket = Ticket {
        correlation_id: 0,
        request_tag: request.tag(),
        arrived: Instant::now(),
    };
    let to: Replies = Arc::new(OneAnswer(Mutex::new(Some(sender))));
    if let Some(reply) = backend.gate.admit(to, ticket) {
        backend
            .supervisor
            .try_send(AdminCall {
                request,
                reply,
                access,
            })
            .map_err(|_| "the server is stopping")?;
    }
    answer.await.map_err(|_| "the server is stopping")
}
