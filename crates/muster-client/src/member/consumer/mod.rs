//! The consumer protocol's membership task (protocol-v1 §7, Kafka 4's KIP-848): one loop that
//! joins, heartbeats, reconciles and leaves with ConsumerGroupHeartbeat alone, in place of the
//! classic protocol's membership and heartbeat tasks. The state it drives lives in `state`.
//!
//! ```text
//!   join: epoch 0, own UUID, full state ──NONE──▶ member at epoch N ── heartbeat every interval
//!     ▲                                              │ (the server's; at once when there is news)
//!     │                                              │ assignment: Revoked (awaited) → report
//!     │ FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID:     │   the smaller set → Assigned → report
//!     └── Lost (awaited), same member id ◀───────────┘
//!   coordinator lost (a coordinator code, no answer): find it, resend the full state, same
//!   member id and epoch (no rebalance); UNRELEASED_INSTANCE_ID and unknown codes: back off;
//!   UNSUPPORTED_ASSIGNOR, GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST, …: stop (Event::Error)
//! ```
//!
//! Before each `Assigned` of new partitions the member asks their ownership epochs
//! (OwnershipEpochs, module `epochs`), within the heartbeat interval (1 s at least): the loop
//! waits for that answer, so a missing one delays the next heartbeat, never by more than an
//! interval. A commit refused `PARTITION_NOT_OWNED` at the member's epoch drops the partitions
//! it still counted as its own (`Lost`, not awaited) and heartbeats at once to report it.
//!
//! One heartbeat is in flight at a time, as in Kafka's client. Heartbeats go on while the
//! application handles a `Revoked` (reporting the partitions as still owned); a `Lost` stops
//! them, since a fenced member is no longer in the group until it rejoins. `close()` emits a
//! final `Revoked` (not awaited) and leaves with epoch -1, or -2 for a static member, which
//! keeps its assignment for a restart within its session.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use muster_protocol::{
    ConsumerGroupHeartbeatResponse, ErrorCode, OwnershipEpochsRequest, Response,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, trace, warn};

use super::epochs::{self, OwnershipBook};
use super::route::{lost, RouteView};
use super::{CloseReply, Event, MemberConfig, MemberState, Partitions, Phase, Signal};
use crate::error::{ClientError, ErrorCodeExt};
use crate::partition::{display_partitions, TopicPartition};
use state::{ConsumerState, Sent, Step, LEAVE_EPOCH, STATIC_LEAVE_EPOCH};

mod state;

/// A heartbeat on its way: the answer to come, and what it carried.
type InFlight = (
    Pin<Box<dyn Future<Output = Result<Response, ClientError>> + Send>>,
    Sent,
);

/// A `Revoked` the application holds: dropped (or the deadline passed) when this resolves.
type Revocation = (oneshot::Receiver<()>, Instant);

pub(in crate::member) struct ConsumerTask {
    route: RouteView,
    config: Arc<MemberConfig>,
    state: watch::Sender<MemberState>,
    events: mpsc::UnboundedSender<Event>,
    signals: mpsc::UnboundedReceiver<Signal>,
    member: ConsumerState,
    /// The server's heartbeat interval (the configured one until it says).
    interval: Duration,
    /// Consecutive failed heartbeats, for the retry backoff.
    failures: u32,
    /// Whether a heartbeat ever went out (a member that never did has nothing to leave).
    sent_any: bool,
    /// The `ConsumerState::view_version` last published.
    published: Option<u64>,
    /// The ownership epochs of what the member owns, shared with the handle.
    book: Arc<OwnershipBook>,
}

/// The shortest wait for the ownership epochs, whatever the heartbeat interval.
const MIN_EPOCHS_WAIT: Duration = Duration::from_secs(1);

pub(in crate::member) async fn run(mut task: ConsumerTask, close: oneshot::Receiver<CloseReply>) {
    let outcome = tokio::select! {
        request = close => Ok(request.ok()),
        fatal = task.membership() => Err(fatal),
    };
    match outcome {
        Ok(Some(reply)) => {
            let result = task.close().await;
            let _ = reply.send(result);
        }
        // The handle was dropped: it aborts this task too.
        Ok(None) => {}
        Err(fatal) => {
            warn!(group_id = %task.config.group_id, member_id = %task.member.member_id(), error = %fatal, "member stopped");
            let lost = task.member.give_up();
            let epochs = task.book.of(&lost);
            task.book.set_owned([]);
            task.state.send_modify(|s| {
                s.phase = Phase::Failed;
                s.generation_id = -1;
                s.assignment.clear();
            });
            if !lost.is_empty() {
                let epoch = task.member.epoch();
                task.emit_lost_and_wait(lost, epoch, epochs).await;
            }
            let _ = task.events.send(Event::Error(fatal));
        }
    }
}

impl ConsumerTask {
    pub(in crate::member) fn new(
        route: RouteView,
        config: Arc<MemberConfig>,
        state: watch::Sender<MemberState>,
        events: mpsc::UnboundedSender<Event>,
        signals: mpsc::UnboundedReceiver<Signal>,
        member_id: String,
        book: Arc<OwnershipBook>,
    ) -> Self {
        ConsumerTask {
            route,
            interval: config.effective_heartbeat_interval(),
            config,
            state,
            events,
            signals,
            member: ConsumerState::new(member_id),
            failures: 0,
            sent_any: false,
            published: None,
            book,
        }
    }

    /// Runs the membership until a fatal error (closing cancels it from outside).
    async fn membership(&mut self) -> ClientError {
        if !self.route.found() {
            if let Err(fatal) = self.route.refind().await {
                return fatal;
            }
        }
        let mut next = Instant::now(); // The join goes out at once.
        let mut in_flight: Option<InFlight> = None;
        let mut revocation: Option<Revocation> = None;
        // A commit met a stale epoch: heartbeat as soon as the one in flight is answered.
        let mut hurry = false;
        // For the revocation branch, which runs while `self.signals` is borrowed mutably.
        let group_id = self.config.group_id.clone();
        loop {
            if revocation.is_none() {
                let was_reconciling = self.member.reconciling();
                if let Some(step) = self.member.next_step() {
                    match step {
                        Step::Revoke(partitions) => revocation = Some(self.revoke(partitions)),
                        Step::Assign(partitions) => self.assign(partitions).await,
                    }
                    self.publish();
                    if self.member.has_news() {
                        next = Instant::now();
                    }
                    continue;
                }
                if was_reconciling && !self.member.reconciling() {
                    // A target reached without a step (a revocation only, now acknowledged):
                    // Stable now, not at the next heartbeat's answer.
                    self.publish();
                }
            }
            tokio::select! {
                result = async {
                    match in_flight.as_mut() {
                        Some((answer, _)) => answer.await,
                        None => std::future::pending().await,
                    }
                }, if in_flight.is_some() => {
                    let Some((_, sent)) = in_flight.take() else { continue };
                    match self.on_answer(sent, result, &mut revocation).await {
                        Ok(at) if hurry => {
                            hurry = false;
                            next = at.min(Instant::now());
                        }
                        Ok(at) => next = at,
                        Err(fatal) => return fatal,
                    }
                }
                () = async {
                    if let Some((ack, deadline)) = revocation.as_mut() {
                        wait_ack(&group_id, ack, *deadline).await;
                    }
                }, if revocation.is_some() => {
                    revocation = None;
                    self.member.revocation_done();
                    self.publish();
                    next = Instant::now(); // Report the smaller set at once.
                }
                () = tokio::time::sleep_until(next), if in_flight.is_none() => {
                    in_flight = Some(self.send());
                }
                Some(signal) = self.signals.recv() => {
                    if signal.member_id == self.member.member_id()
                        && signal.generation == self.member.epoch()
                    {
                        debug!(group_id = %self.config.group_id, code = %signal.code, "a commit was refused; heartbeating now");
                        if signal.code == ErrorCode::PartitionNotOwned {
                            self.not_owned(&signal.partitions);
                        }
                        if in_flight.is_some() {
                            hurry = true;
                        } else {
                            next = Instant::now();
                        }
                    }
                }
            }
        }
    }

    /// Sends the next heartbeat (to the coordinator as the route knows it now).
    fn send(&mut self) -> InFlight {
        let (request, sent) = self.member.heartbeat(&self.config);
        trace!(
            group_id = %self.config.group_id, member_id = %request.member_id,
            epoch = request.member_epoch, full = request.subscribed_topics.is_some(),
            reports = request.owned_partitions.is_some(), "ConsumerGroupHeartbeat"
        );
        self.sent_any = true;
        let connection = self.route.connection().clone();
        let timeout = connection.config().request_timeout;
        let answer = Box::pin(async move { connection.send_once(request, timeout).await });
        (answer, sent)
    }

    /// Handles the outcome of a heartbeat; returns when to send the next one, or a fatal error.
    async fn on_answer(
        &mut self,
        sent: Sent,
        result: Result<Response, ClientError>,
        revocation: &mut Option<Revocation>,
    ) -> Result<Instant, ClientError> {
        let group_id = self.config.group_id.as_str();
        if lost(&result) {
            // Same member id and epoch at the new coordinator, with the full state: it may
            // not have heard the last heartbeats. No rebalance.
            debug!(%group_id, epoch = self.member.epoch(), "heartbeat: coordinator lost; finding it again");
            self.member.failed();
            self.route.refind().await?;
            return Ok(Instant::now());
        }
        self.route.answered();
        let answer = match result {
            Ok(Response::ConsumerGroupHeartbeat(answer)) => answer,
            Ok(other) => {
                warn!(%group_id, response = other.name(), "unexpected answer to ConsumerGroupHeartbeat");
                self.member.failed();
                return Ok(self.back_off());
            }
            Err(err) => match err.code() {
                // `Response::Error`: handled as the same code in a heartbeat answer would be.
                Some(code) if is_fatal(code) => return Err(err),
                Some(code) => ConsumerGroupHeartbeatResponse {
                    error_code: code,
                    error_message: Some(err.to_string()),
                    ..ConsumerGroupHeartbeatResponse::default()
                },
                None => {
                    warn!(%group_id, error = %err, "heartbeat failed");
                    self.member.failed();
                    return Ok(self.back_off());
                }
            },
        };
        let code = answer.error_code;
        match ErrorCode::from_code(code) {
            Some(ErrorCode::None) => {
                self.failures = 0;
                if let Ok(ms @ 1..) = u64::try_from(answer.heartbeat_interval_ms) {
                    self.interval = Duration::from_millis(ms);
                }
                let before = self.member.epoch();
                self.member.on_member(sent, answer);
                if self.member.epoch() != before {
                    debug!(%group_id, member_id = %self.member.member_id(), epoch = self.member.epoch(), "member epoch");
                }
                self.publish();
                Ok(if self.member.has_news() {
                    Instant::now()
                } else {
                    Instant::now() + self.interval
                })
            }
            Some(c @ (ErrorCode::FencedMemberEpoch | ErrorCode::UnknownMemberId)) => {
                info!(%group_id, member_id = %self.member.member_id(), epoch = self.member.epoch(), code = %c, "fenced; rejoining");
                self.fenced(revocation).await;
                // At once, unless the last rejoin was fenced too (a server in a loop).
                let again = if self.failures == 0 {
                    Instant::now()
                } else {
                    self.back_off()
                };
                self.failures = self.failures.max(1);
                Ok(again)
            }
            Some(ErrorCode::UnreleasedInstanceId) => {
                // The instance id's previous member still holds partitions: wait for it to
                // leave or expire (Kafka's client gives up here; retrying lets a restarted
                // static member in once its predecessor's session ends).
                warn!(%group_id, instance_id = ?self.config.group_instance_id, "instance id not released yet; retrying");
                self.member.failed();
                Ok(self.back_off())
            }
            Some(c) if is_fatal(c.code()) => Err(ClientError::protocol(
                code,
                match answer.error_message {
                    Some(message) => format!("ConsumerGroupHeartbeat group {group_id}: {message}"),
                    None => format!("ConsumerGroupHeartbeat group {group_id}"),
                },
            )),
            _ => {
                debug!(%group_id, code, message = ?answer.error_message, "heartbeat refused; retrying");
                self.member.failed();
                Ok(self.back_off())
            }
        }
    }

    /// Fenced: let a revocation in progress finish, then lose everything (the application is
    /// told, and the member waits for it) and go back to joining, keeping the member id.
    async fn fenced(&mut self, revocation: &mut Option<Revocation>) {
        if let Some((mut ack, deadline)) = revocation.take() {
            wait_ack(&self.config.group_id, &mut ack, deadline).await;
            self.member.revocation_done();
        }
        let epoch = self.member.epoch(); // The epoch the partitions were owned in.
        let lost = self.member.fence();
        let epochs = self.book.of(&lost);
        self.publish();
        if !lost.is_empty() {
            self.emit_lost_and_wait(lost, epoch, epochs).await;
        }
    }

    fn back_off(&mut self) -> Instant {
        let delay = self.config.retry_backoff.next_delay(self.failures);
        self.failures = self.failures.saturating_add(1);
        Instant::now() + delay
    }

    /// Emits `Revoked` for `partitions`; the returned receiver resolves when it is dropped.
    fn revoke(&self, partitions: Vec<TopicPartition>) -> Revocation {
        info!(group_id = %self.config.group_id, epoch = self.member.epoch(), partitions = %display_partitions(&partitions), "revoked");
        let (ack, acked) = oneshot::channel();
        // Still in the book (the published state drops them next); it goes with them.
        let epochs = self.book.of(&partitions);
        // Unsent (nobody listens), the event is dropped here, which acknowledges it.
        let _ = self.events.send(Event::Revoked(
            Partitions::new(partitions, self.member.epoch(), Some(ack)).with_epochs(epochs),
        ));
        (acked, Instant::now() + self.config.rebalance_timeout)
    }

    /// Emits `Assigned` for `partitions`, with their ownership epochs, asked first (module
    /// docs) when some are not known.
    async fn assign(&mut self, partitions: Vec<TopicPartition>) {
        info!(group_id = %self.config.group_id, epoch = self.member.epoch(), partitions = %display_partitions(&partitions), "assigned");
        self.book.set_owned(self.member.owned());
        if self.book.missing(self.member.owned().iter()) {
            let request = OwnershipEpochsRequest {
                group_id: self.config.group_id.clone(),
                generation_id: self.member.epoch(),
                member_id: self.member.member_id().to_owned(),
                group_instance_id: self.config.group_instance_id.clone(),
            };
            let timeout = self
                .interval
                .max(MIN_EPOCHS_WAIT)
                .min(self.route.connection().config().request_timeout);
            if let Some(epochs) = epochs::ask(&mut self.route, request, timeout).await {
                self.book.accept(&epochs);
            }
        }
        let epochs = self.book.of(&partitions);
        let _ = self.events.send(Event::Assigned(
            Partitions::new(partitions, self.member.epoch(), None).with_epochs(epochs),
        ));
    }

    /// A commit at the member's epoch was refused `PARTITION_NOT_OWNED` for `refused`: those
    /// it still counts as its own are lost (not awaited: another member owns them).
    fn not_owned(&mut self, refused: &[TopicPartition]) {
        let lost = self.member.disown(refused);
        if lost.is_empty() {
            return;
        }
        warn!(group_id = %self.config.group_id, epoch = self.member.epoch(), partitions = %display_partitions(&lost), "partitions not owned (PARTITION_NOT_OWNED); lost");
        let epochs = self.book.of(&lost);
        self.publish();
        let payload = Partitions::new(lost, self.member.epoch(), None).with_epochs(epochs);
        let _ = self.events.send(Event::Lost(payload));
    }

    /// Emits `Lost` (with the partitions' ownership `epochs`) and waits until the application
    /// drops it (at most the rebalance timeout).
    async fn emit_lost_and_wait(
        &self,
        partitions: Vec<TopicPartition>,
        epoch: i32,
        epochs: std::collections::BTreeMap<TopicPartition, i32>,
    ) {
        info!(group_id = %self.config.group_id, epoch, partitions = %display_partitions(&partitions), "partitions lost");
        let (ack, mut acked) = oneshot::channel();
        let event = Event::Lost(Partitions::new(partitions, epoch, Some(ack)).with_epochs(epochs));
        if self.events.send(event).is_ok() {
            let deadline = Instant::now() + self.config.rebalance_timeout;
            wait_ack(&self.config.group_id, &mut acked, deadline).await;
        }
    }

    /// Publishes the member's state when it changed (a steady heartbeat publishes nothing).
    fn publish(&mut self) {
        let joined = self.member.joined();
        let phase = match (joined, self.member.reconciling()) {
            (false, _) => Phase::Joining,
            (true, true) => Phase::Syncing,
            (true, false) => Phase::Stable,
        };
        let generation = if joined { self.member.epoch() } else { -1 };
        let version = self.member.view_version();
        let assignment = (self.published != Some(version)).then(|| {
            self.book.set_owned(self.member.owned());
            self.member.owned().iter().cloned().collect::<Vec<_>>()
        });
        self.published = Some(version);
        let member_id = self.member.member_id();
        let assignor = &self.config.server_assignor;
        self.state.send_if_modified(|s| {
            let mut changed = false;
            if s.phase != phase {
                s.phase = phase;
                changed = true;
            }
            if s.generation_id != generation {
                s.generation_id = generation;
                changed = true;
            }
            if s.member_id != member_id {
                member_id.clone_into(&mut s.member_id);
                changed = true;
            }
            if &s.assignor != assignor {
                s.assignor.clone_from(assignor);
                changed = true;
            }
            if let Some(assignment) = assignment {
                s.assignment = assignment;
                changed = true;
            }
            changed
        });
    }

    /// `close()`: final revocation (not awaited), then the leave heartbeat: epoch -1, or -2
    /// for a static member (see [`MemberConfig::leave_group_on_close`]).
    async fn close(&mut self) -> Result<(), ClientError> {
        let owned = self.member.give_up();
        let epochs = self.book.of(&owned);
        self.book.set_owned([]);
        self.state.send_modify(|s| {
            s.phase = Phase::Closed;
            s.assignment.clear();
        });
        if !owned.is_empty() {
            let _ = self.events.send(Event::Revoked(
                Partitions::new(owned, self.member.epoch(), None).with_epochs(epochs),
            ));
        }
        let epoch = match (
            self.config.leaves_on_close(),
            self.config.group_instance_id.is_some(),
        ) {
            (true, _) => LEAVE_EPOCH,
            (false, true) => STATIC_LEAVE_EPOCH,
            (false, false) => return Ok(()), // The session expires on the server.
        };
        if !self.sent_any {
            return Ok(());
        }
        let group_id = self.config.group_id.as_str();
        info!(%group_id, member_id = %self.member.member_id(), epoch, "leaving the group");
        let request = self.member.leave(&self.config, epoch);
        let deadline = Instant::now() + self.route.connection().config().request_timeout;
        let response = self.route.call(request, deadline).await?;
        let Response::ConsumerGroupHeartbeat(answer) = response else {
            return Err(ClientError::Unexpected(response.name()));
        };
        match ErrorCode::from_code(answer.error_code) {
            // Already gone (fenced, expired) is as good as leaving.
            Some(ErrorCode::None | ErrorCode::UnknownMemberId | ErrorCode::FencedMemberEpoch) => {
                Ok(())
            }
            _ => Err(ClientError::protocol(
                answer.error_code,
                format!("ConsumerGroupHeartbeat (leave) group {group_id}"),
            )),
        }
    }
}

/// Waits until the application drops a `Revoked` or `Lost`, at most until `deadline`.
async fn wait_ack(group_id: &str, ack: &mut oneshot::Receiver<()>, deadline: Instant) {
    if tokio::time::timeout_at(deadline, ack).await.is_err() {
        warn!(%group_id, "revocation not handled within the rebalance timeout; going on");
    }
}

/// An answer after which a consumer-protocol member cannot go on (Kafka's client stops on
/// these too): a refused configuration, identity or authorization, or a server that does not
/// speak the consumer protocol (INVALID_REQUEST).
fn is_fatal(code: i16) -> bool {
    ErrorCode::from_code(code).is_some_and(|c| {
        c.is_fatal_for_member()
            || matches!(
                c,
                ErrorCode::UnsupportedAssignor
                    | ErrorCode::InvalidRequest
                    | ErrorCode::GroupAuthorizationFailed
            )
    })
}
