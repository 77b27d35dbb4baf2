//! Where one member's group requests go: its group's coordinator, found with FindCoordinator
//! through the [`Client`], cached, shared by the member's tasks and its handle, and found
//! again when it fails.
//!
//! A request whose outcome says the coordinator is lost ([`coordinator_lost`]: a coordinator
//! error code, a broken link, a silent socket, a timeout) makes the route find the coordinator
//! again, and the request is resent there *as it was*: same member id, same generation, same
//! payload. A failover is invisible to the group protocol: the member neither rejoins nor
//! resets its assignment. Only the answers of the new coordinator (`UNKNOWN_MEMBER_ID`,
//! `ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS`, …) change the membership, as they always do.
//!
//! One lookup at a time: callers that met the same lost coordinator wait for the first one's
//! lookup and then use its result (the *epoch* of the coordinator they failed on tells). The
//! first lookup after requests were answered is immediate; the following ones back off (the
//! member's `retry_backoff`, capped at 250 ms) until the coordinator answers a request again,
//! so that nodes disagreeing about an owner are not asked in a tight loop.
//!
//! The heartbeat path stays as cheap as before: a [`RouteView`] keeps its own clone of the
//! current connection and checks one atomic (the watch channel's version) per request.
//!
//! The consumer protocol's ConsumerGroupHeartbeat is routed the same way ([`lost`] reads its
//! answer's code too), but its loop (module `consumer`) finds the coordinator itself and
//! resends a heartbeat carrying the member's full state, rather than the same request.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use muster_protocol::{ErrorCode, Request, Response};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info};

use crate::backoff::Backoff;
use crate::client::{coordinator_lost, Client};
use crate::cluster::Node;
use crate::connection::Connection;
use crate::error::{ClientError, ErrorCodeExt};

/// The coordinator in force.
#[derive(Clone)]
pub(crate) struct Target {
    /// Bumped at every lookup that succeeds.
    epoch: u64,
    connection: Connection,
    /// `None` until the first lookup.
    node: Option<Node>,
}

pub(crate) struct Route {
    client: Client,
    group_id: String,
    backoff: Backoff,
    current: watch::Sender<Target>,
    lookup: tokio::sync::Mutex<()>,
    /// Lookups since the coordinator last answered a request.
    failures: AtomicU32,
}

impl Route {
    pub(crate) fn new(client: Client, group_id: String, backoff: Backoff) -> Arc<Route> {
        let backoff = lookup_backoff(backoff);
        let target = Target {
            epoch: 0,
            connection: client.primary().clone(),
            node: None,
        };
        Arc::new(Route {
            client,
            group_id,
            backoff,
            current: watch::Sender::new(target),
            lookup: tokio::sync::Mutex::new(()),
            failures: AtomicU32::new(0),
        })
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// A view for one task (or one call of the handle).
    pub(crate) fn view(self: &Arc<Self>) -> RouteView {
        let rx = self.current.subscribe();
        let target = rx.borrow().clone();
        RouteView {
            route: Arc::clone(self),
            rx,
            target,
        }
    }

    /// The coordinator now, if one was found.
    pub(crate) fn node(&self) -> Option<Node> {
        self.current.borrow().node.clone()
    }

    /// Finds the coordinator again, unless another caller already did since `failed_epoch`.
    /// Retries (with backoff) until a lookup succeeds; only an error that will not get better
    /// (fatal for a member: an invalid group id, refused credentials; TLS) is returned.
    async fn find(&self, failed_epoch: u64) -> Result<(), ClientError> {
        let _one_at_a_time = self.lookup.lock().await;
        if self.current.borrow().epoch != failed_epoch {
            return Ok(());
        }
        loop {
            let attempt = self.failures.fetch_add(1, Ordering::Relaxed);
            if attempt > 0 {
                tokio::time::sleep(self.backoff.next_delay(attempt - 1)).await;
            }
            let lost = self.node().map(|node| node.address());
            match self
                .client
                .find_coordinator_avoiding(&self.group_id, lost.as_deref())
                .await
            {
                Ok((node, connection)) => {
                    let previous = self.node();
                    if previous.as_ref() != Some(&node) {
                        info!(group_id = %self.group_id, coordinator = %node, "coordinator found");
                    }
                    self.current.send_modify(|t| {
                        t.epoch += 1;
                        t.connection = connection;
                        t.node = Some(node);
                    });
                    return Ok(());
                }
                Err(err) if is_fatal(&err) => return Err(err),
                Err(err) => {
                    debug!(group_id = %self.group_id, error = %err, attempt, "coordinator lookup failed; retrying");
                }
            }
        }
    }
}

/// A lookup error that retrying will not cure.
fn is_fatal(err: &ClientError) -> bool {
    matches!(err, ClientError::Tls(_) | ClientError::Config(_))
        || err.error_code().is_some_and(|c| c.is_fatal_for_member())
}

/// One task's view of the route.
pub(crate) struct RouteView {
    route: Arc<Route>,
    rx: watch::Receiver<Target>,
    target: Target,
}

impl RouteView {
    /// The coordinator's connection. Costs one atomic load unless the coordinator changed.
    pub(crate) fn connection(&mut self) -> &Connection {
        if self.rx.has_changed().unwrap_or(false) {
            self.target = self.rx.borrow_and_update().clone();
        }
        &self.target.connection
    }

    /// The coordinator failed this view's last request: find it (again).
    pub(crate) async fn refind(&mut self) -> Result<(), ClientError> {
        self.route.find(self.target.epoch).await?;
        self.target = self.rx.borrow_and_update().clone();
        Ok(())
    }

    /// Whether a coordinator was found for this view (none before the first lookup).
    pub(crate) fn found(&self) -> bool {
        self.target.node.is_some()
    }

    /// The coordinator answered: lookups start without delay again.
    pub(crate) fn answered(&self) {
        if self.route.failures.load(Ordering::Relaxed) != 0 {
            self.route.failures.store(0, Ordering::Relaxed);
        }
    }

    /// Sends `request` to the group's coordinator and returns its answer, finding the
    /// coordinator first if none was found yet, and again (then resending the same request)
    /// whenever the outcome says it is lost, until `deadline`. After the deadline the last
    /// outcome is returned.
    pub(crate) async fn call(
        &mut self,
        request: impl Into<Request>,
        deadline: Instant,
    ) -> Result<Response, ClientError> {
        let request = request.into();
        if self.target.node.is_none() {
            self.refind_until(deadline).await?;
        }
        loop {
            let timeout = deadline.saturating_duration_since(Instant::now());
            let result = self.connection().send_once(request.clone(), timeout).await;
            if !lost(&result) {
                self.answered();
                return result;
            }
            if Instant::now() >= deadline {
                return result;
            }
            debug!(
                group_id = %self.route.group_id,
                request = request.name(),
                outcome = %describe(&result),
                "coordinator lost; finding it again"
            );
            self.refind_until(deadline).await?;
        }
    }

    async fn refind_until(&mut self, deadline: Instant) -> Result<(), ClientError> {
        match tokio::time::timeout_at(deadline, self.refind()).await {
            Ok(found) => found,
            Err(_) => Err(ClientError::Timeout {
                request: "FindCoordinator",
                after: self.route.client.connection_config().request_timeout,
            }),
        }
    }
}

/// Whether a group request's outcome means its coordinator is lost: [`coordinator_lost`], and
/// also a ConsumerGroupHeartbeat answered with a coordinator code (`coordinator_lost` reads the
/// top-level code of the classic group answers only).
pub(crate) fn lost(result: &Result<Response, ClientError>) -> bool {
    coordinator_lost(result)
        || matches!(
            result,
            Ok(Response::ConsumerGroupHeartbeat(answer))
                if ErrorCode::from_code(answer.error_code).is_some_and(|c| c.is_coordinator_error())
        )
}

fn describe(result: &Result<Response, ClientError>) -> String {
    match result {
        Ok(response) => format!("{} with a coordinator error", response.name()),
        Err(err) => err.to_string(),
    }
}

/// The longest pause between two lookups of the coordinator.
const LOOKUP_MAX: Duration = Duration::from_millis(250);

/// The member's backoff as coordinator lookups use it: capped at [`LOOKUP_MAX`]. A failover
/// ends at an instant the client cannot know (when etcd expires the dead node's lease, up to
/// a lease TTL after it died), and every moment a lookup waits past it adds to the member's
/// failover time: doubling up to the member's 2 s would add up to 2 s. Any node answers
/// FindCoordinator from memory, so four lookups a second per member cost the cluster little.
fn lookup_backoff(member: Backoff) -> Backoff {
    Backoff {
        max: member.max.min(LOOKUP_MAX),
        ..member
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_protocol::ConsumerGroupHeartbeatResponse;

    #[test]
    fn coordinator_lookups_pause_at_most_a_quarter_second() {
        let member = Backoff::fixed_exponential(Duration::from_millis(50), Duration::from_secs(2));
        let lookups = lookup_backoff(member);
        let delays: Vec<_> = (0..6).map(|n| lookups.delay(n).as_millis()).collect();
        assert_eq!(delays, [50, 100, 200, 250, 250, 250]);
        // A member that asked for shorter pauses keeps them.
        let short =
            Backoff::fixed_exponential(Duration::from_millis(10), Duration::from_millis(40));
        assert_eq!(lookup_backoff(short), short);
    }

    #[test]
    fn a_consumer_heartbeat_answered_with_a_coordinator_code_loses_the_coordinator() {
        let answer = |code: ErrorCode| {
            Ok(Response::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatResponse {
                    error_code: code.code(),
                    ..ConsumerGroupHeartbeatResponse::default()
                },
            ))
        };
        for code in [
            ErrorCode::NotCoordinator,
            ErrorCode::CoordinatorNotAvailable,
            ErrorCode::CoordinatorLoadInProgress,
        ] {
            assert!(lost(&answer(code)), "{code}");
        }
        assert!(!lost(&answer(ErrorCode::None)));
        assert!(!lost(&answer(ErrorCode::FencedMemberEpoch)));
        assert!(lost(&Err(ClientError::Disconnected)));
    }
}
