//! The membership task: the join → sync → stable cycle of one group member.
//!
//! ```text
//!            ┌────────────────────────────── rejoin ◀──────────────────────────────┐
//!            ▼                                                                     │
//!  (eager: revoke all) → JoinGroup ──NONE──▶ (leader: assign) SyncGroup ──NONE──▶ apply
//!            ▲   │ MEMBER_ID_REQUIRED: retry with the id at once                   │
//!            │   │ UNKNOWN_MEMBER_ID: lose partitions, forget the id               ▼
//!            │   │ coordinator / transport errors: back off                      Stable ── heartbeat
//!            └───┘ fatal (FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, …): stop   signals
//! ```
//!
//! *Apply* computes what was revoked (owned − new) and added (new − owned), emits
//! [`Event::Revoked`] and waits for the application to drop it, asks the ownership epochs of
//! what it now owns (OwnershipEpochs, when some are not known; module `epochs`), then emits
//! [`Event::Assigned`] with them. A cooperative member that revoked anything rejoins at once,
//! so the follow-up rebalance can hand those partitions to their new owner.
//!
//! A commit refused with `PARTITION_NOT_OWNED` (signalled by the handle) in the current
//! generation: the partitions the member still counted as its own are dropped and reported
//! `Lost`, without waiting (their new owner has them); the member stays in its generation.
//!
//! What the server's answers mean here (Kafka's `ConsumerCoordinator`):
//! `REBALANCE_IN_PROGRESS` → rejoin; `ILLEGAL_GENERATION` → the partitions are lost, rejoin
//! with the same member id; `UNKNOWN_MEMBER_ID` → the partitions are lost, rejoin with an empty
//! member id; `FENCED_INSTANCE_ID` → lost, and the member stops with an [`Event::Error`].
//!
//! Every request goes through the route (module `route`): when the coordinator fails or moves
//! (a coordinator error code, a broken or silent link), the same request is resent to the new
//! coordinator within its deadline — a JoinGroup held at a barrier with the same member id, a
//! SyncGroup with the same generation (and the leader's assignments), a LeaveGroup — and the
//! cycle above only sees the new coordinator's answer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use muster_protocol::{
    AssignorMetadata, ErrorCode, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeavingMember, MemberAssignment, OwnershipEpochsRequest, Response, SyncGroupRequest,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::epochs::{self, OwnershipBook};
use super::route::RouteView;
use super::{CloseReply, Event, MemberConfig, MemberState, Partitions, Phase, Signal};
use crate::assignor::{MemberSubscription, RebalanceProtocol};
use crate::error::{ClientError, ErrorCodeExt};
use crate::partition::{display_partitions, flatten_partitions, group_partitions, TopicPartition};

/// How much longer than the rebalance timeout a JoinGroup or SyncGroup may be held before the
/// member gives up on the answer (Kafka waits the rebalance timeout plus 5 s).
const HELD_REQUEST_MARGIN: Duration = Duration::from_secs(5);

pub(super) struct MemberTask {
    route: RouteView,
    config: Arc<MemberConfig>,
    protocol: RebalanceProtocol,
    state: watch::Sender<MemberState>,
    events: mpsc::UnboundedSender<Event>,
    signals: mpsc::UnboundedReceiver<Signal>,
    member_id: String,
    generation: i32,
    owned: BTreeSet<TopicPartition>,
    /// The last assignment and its generation, for the assignors' user data (an eager member
    /// has revoked it by the time it rejoins, but sticky assignors want it).
    history: (Vec<TopicPartition>, i32),
    /// Consecutive failed attempts, for the retry backoff.
    failures: u32,
    /// Why the next JoinGroup is sent (for the server's logs).
    reason: String,
    /// The ownership epochs of `owned`, shared with the handle.
    book: Arc<OwnershipBook>,
}

/// What to do after a SyncGroup.
enum AfterSync {
    /// Assigned: apply the assignment.
    Assigned(BTreeSet<TopicPartition>),
    /// Rejoin keeping the generation (REBALANCE_IN_PROGRESS, transport trouble).
    Rejoin,
    /// The membership is stale: lose the partitions and rejoin.
    Lost { forget_member_id: bool },
}

pub(super) async fn run(
    mut task: MemberTask,
    close: oneshot::Receiver<CloseReply>,
    heartbeat: AbortHandle,
) {
    let outcome = tokio::select! {
        request = close => Ok(request.ok()),
        fatal = task.membership() => Err(fatal),
    };
    match outcome {
        Ok(Some(reply)) => {
            let result = task.close().await;
            heartbeat.abort();
            let _ = reply.send(result);
        }
        // The handle was dropped: it aborts this task too.
        Ok(None) => heartbeat.abort(),
        Err(fatal) => {
            warn!(group_id = %task.config.group_id, error = %fatal, "member stopped");
            task.lose(false).await;
            task.publish(|s| s.phase = Phase::Failed);
            heartbeat.abort();
            let _ = task.events.send(Event::Error(fatal));
        }
    }
}

impl MemberTask {
    pub(super) fn new(
        route: RouteView,
        config: Arc<MemberConfig>,
        state: watch::Sender<MemberState>,
        events: mpsc::UnboundedSender<Event>,
        signals: mpsc::UnboundedReceiver<Signal>,
        book: Arc<OwnershipBook>,
    ) -> Self {
        MemberTask {
            protocol: config.rebalance_protocol(),
            route,
            config,
            state,
            events,
            signals,
            member_id: String::new(),
            generation: -1,
            owned: BTreeSet::new(),
            history: (Vec::new(), -1),
            failures: 0,
            reason: "initial join".to_owned(),
            book,
        }
    }

    fn publish(&self, change: impl FnOnce(&mut MemberState)) {
        self.state.send_modify(change);
    }

    /// Publishes what the member owns (and forgets the epochs of what it no longer owns).
    fn publish_owned(&self) {
        self.book.set_owned(&self.owned);
        let owned: Vec<TopicPartition> = self.owned.iter().cloned().collect();
        self.publish(|s| s.assignment = owned);
    }

    /// Runs the membership until a fatal error (closing cancels it from outside).
    async fn membership(&mut self) -> ClientError {
        loop {
            let joined = match self.join().await {
                Ok(joined) => joined,
                Err(fatal) => return fatal,
            };
            match self.sync(joined).await {
                Ok(AfterSync::Assigned(assignment)) => {
                    if self.apply(assignment).await {
                        self.reason = "revoked partitions for a cooperative rebalance".into();
                        continue;
                    }
                }
                Ok(AfterSync::Rejoin) => continue,
                Ok(AfterSync::Lost { forget_member_id }) => {
                    self.lose(forget_member_id).await;
                    continue;
                }
                Err(fatal) => return fatal,
            }
            if let Err(fatal) = self.stable().await {
                return fatal;
            }
        }
    }

    /// Waits in Stable for a signal that calls for a rejoin.
    async fn stable(&mut self) -> Result<(), ClientError> {
        loop {
            let Some(signal) = self.signals.recv().await else {
                // Only possible once the handle is gone, and then this task is aborted.
                return std::future::pending().await;
            };
            if signal.generation != self.generation || signal.member_id != self.member_id {
                continue; // About an earlier generation.
            }
            if signal.code == ErrorCode::PartitionNotOwned {
                self.not_owned(&signal.partitions);
                continue;
            }
            self.reason = format!("{} in generation {}", signal.code.name(), self.generation);
            match signal.code {
                ErrorCode::RebalanceInProgress => return Ok(()),
                ErrorCode::IllegalGeneration => {
                    self.lose(false).await;
                    return Ok(());
                }
                ErrorCode::UnknownMemberId => {
                    self.lose(true).await;
                    return Ok(());
                }
                ErrorCode::FencedInstanceId => {
                    return Err(ClientError::protocol(
                        signal.code.code(),
                        format!("group {}: instance id taken over", self.config.group_id),
                    ));
                }
                _ => {}
            }
        }
    }

    /// A commit in the current generation was refused `PARTITION_NOT_OWNED` for `refused`:
    /// those the member still counts as its own are lost (not awaited: another member owns
    /// them). The generation goes on.
    fn not_owned(&mut self, refused: &[TopicPartition]) {
        let lost: Vec<TopicPartition> = refused
            .iter()
            .filter(|tp| self.owned.contains(tp))
            .cloned()
            .collect();
        if lost.is_empty() {
            return;
        }
        warn!(group_id = %self.config.group_id, generation = self.generation, partitions = %display_partitions(&lost), "partitions not owned (PARTITION_NOT_OWNED); lost");
        let epochs = self.book.of(&lost);
        for tp in &lost {
            self.owned.remove(tp);
        }
        self.publish_owned();
        let payload = Partitions::new(lost, self.generation, None).with_epochs(epochs);
        let _ = self.events.send(Event::Lost(payload));
    }

    /// Emits `Revoked` or `Lost` for `partitions` (with their ownership `epochs`) and waits
    /// until the application drops the event (at most the rebalance timeout).
    async fn emit_and_wait(
        &self,
        lost: bool,
        partitions: Vec<TopicPartition>,
        epochs: BTreeMap<TopicPartition, i32>,
    ) {
        let (ack, acked) = oneshot::channel();
        let payload = Partitions::new(partitions, self.generation, Some(ack)).with_epochs(epochs);
        let event = if lost {
            Event::Lost(payload)
        } else {
            Event::Revoked(payload)
        };
        if self.events.send(event).is_err() {
            return; // Nobody listens.
        }
        if tokio::time::timeout(self.config.rebalance_timeout, acked)
            .await
            .is_err()
        {
            warn!(
                group_id = %self.config.group_id,
                "revocation not handled within the rebalance timeout; going on"
            );
        }
    }

    /// The membership is stale: the partitions are lost (the application is told and must
    /// stop work on them), the generation is reset, and with `forget_member_id` the member id
    /// too.
    async fn lose(&mut self, forget_member_id: bool) {
        if !self.owned.is_empty() {
            let lost: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
            info!(group_id = %self.config.group_id, partitions = %display_partitions(&lost), "partitions lost");
            let epochs = self.book.of(&lost);
            self.publish_owned();
            self.emit_and_wait(true, lost, epochs).await;
        }
        self.history = (Vec::new(), -1);
        self.generation = -1;
        if forget_member_id {
            self.member_id.clear();
        }
        let (member_id, generation) = (self.member_id.clone(), self.generation);
        self.publish(|s| {
            s.member_id = member_id;
            s.generation_id = generation;
        });
    }

    async fn back_off(&mut self) {
        let delay = self.config.retry_backoff.next_delay(self.failures);
        self.failures = self.failures.saturating_add(1);
        tokio::time::sleep(delay).await;
    }

    fn join_request(&self) -> JoinGroupRequest {
        let (previous, previous_generation) = &self.history;
        let millis = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        JoinGroupRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            session_timeout_ms: millis(self.config.session_timeout),
            rebalance_timeout_ms: millis(self.config.rebalance_timeout),
            topics: self.config.topics.clone(),
            assignors: self
                .config
                .assignors
                .iter()
                .map(|a| AssignorMetadata {
                    name: a.name().to_owned(),
                    user_data: a.user_data(previous, *previous_generation),
                })
                .collect(),
            owned_partitions: group_partitions(&self.owned),
            reason: Some(self.reason.clone()),
        }
    }

    /// Sends JoinGroup until it succeeds; only fatal errors come back as `Err`.
    async fn join(&mut self) -> Result<JoinGroupResponse, ClientError> {
        if self.protocol == RebalanceProtocol::Eager && !self.owned.is_empty() {
            let revoked: Vec<TopicPartition> =
                std::mem::take(&mut self.owned).into_iter().collect();
            debug!(group_id = %self.config.group_id, partitions = %display_partitions(&revoked), "revoking before rejoining");
            let epochs = self.book.of(&revoked);
            self.publish_owned();
            self.emit_and_wait(false, revoked, epochs).await;
        }
        // Signals about the generation being left are moot now.
        while self.signals.try_recv().is_ok() {}
        let group_id = self.config.group_id.clone();
        loop {
            self.publish(|s| s.phase = Phase::Joining);
            let request = self.join_request();
            let deadline = Instant::now() + self.config.rebalance_timeout + HELD_REQUEST_MARGIN;
            debug!(%group_id, member_id = %self.member_id, reason = %self.reason, "JoinGroup");
            let answer = match self.route.call(request, deadline).await {
                Ok(Response::JoinGroup(answer)) => answer,
                Ok(other) => {
                    warn!(%group_id, response = other.name(), "unexpected answer to JoinGroup");
                    self.back_off().await;
                    continue;
                }
                Err(err) => {
                    if err.error_code().is_some_and(|c| c.is_fatal_for_member()) {
                        return Err(err);
                    }
                    debug!(%group_id, error = %err, "JoinGroup failed; retrying");
                    self.back_off().await;
                    continue;
                }
            };
            let code = ErrorCode::from_code(answer.error_code);
            match code {
                Some(ErrorCode::None) => {
                    self.failures = 0;
                    return Ok(answer);
                }
                Some(ErrorCode::MemberIdRequired) => {
                    // KIP-394: rejoin at once with the id the server gave.
                    self.member_id = answer.member_id;
                    let member_id = self.member_id.clone();
                    self.publish(|s| s.member_id = member_id);
                }
                Some(ErrorCode::UnknownMemberId) => {
                    let had_id = !self.member_id.is_empty();
                    self.lose(true).await;
                    if !had_id {
                        self.back_off().await; // Not expected for an empty id: do not spin.
                    }
                }
                Some(ErrorCode::IllegalGeneration) => {
                    self.lose(false).await;
                    self.back_off().await;
                }
                Some(c) if c.is_fatal_for_member() => {
                    return Err(ClientError::protocol(
                        answer.error_code,
                        format!("JoinGroup group {group_id}"),
                    ));
                }
                _ => {
                    // REBALANCE_IN_PROGRESS (a later JoinGroup superseded this one),
                    // coordinator errors, codes this version does not know: retry.
                    debug!(%group_id, code = answer.error_code, "JoinGroup refused; retrying");
                    self.back_off().await;
                }
            }
        }
    }

    /// Computes the assignment as the leader, then sends SyncGroup.
    async fn sync(&mut self, joined: JoinGroupResponse) -> Result<AfterSync, ClientError> {
        let group_id = self.config.group_id.clone();
        self.member_id = joined.member_id.clone();
        self.generation = joined.generation_id;
        let is_leader = joined.leader_id == joined.member_id;
        info!(
            %group_id, member_id = %self.member_id, generation = self.generation,
            leader = is_leader, assignor = ?joined.assignor, "joined"
        );
        {
            let (member_id, generation) = (self.member_id.clone(), self.generation);
            let (leader_id, assignor) = (joined.leader_id.clone(), joined.assignor.clone());
            self.publish(|s| {
                s.phase = Phase::Syncing;
                s.member_id = member_id;
                s.generation_id = generation;
                s.leader_id = leader_id;
                s.assignor = assignor;
            });
        }
        let assignments = if is_leader && !joined.skip_assignment {
            self.assign(&joined)?
        } else {
            Vec::new()
        };
        let request = SyncGroupRequest {
            group_id: group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            assignor: joined.assignor,
            assignments,
        };
        let deadline = Instant::now() + self.config.rebalance_timeout + HELD_REQUEST_MARGIN;
        let answer = match self.route.call(request, deadline).await {
            Ok(Response::SyncGroup(answer)) => answer,
            Ok(other) => {
                warn!(%group_id, response = other.name(), "unexpected answer to SyncGroup");
                self.back_off().await;
                return Ok(AfterSync::Rejoin);
            }
            Err(err) => {
                if err.error_code().is_some_and(|c| c.is_fatal_for_member()) {
                    return Err(err);
                }
                debug!(%group_id, error = %err, "SyncGroup failed; rejoining");
                self.reason = format!("SyncGroup failed: {err}");
                self.back_off().await;
                return Ok(AfterSync::Rejoin);
            }
        };
        let code = ErrorCode::from_code(answer.error_code);
        self.reason = format!(
            "SyncGroup answered {} in generation {}",
            code.map_or("an unknown code", ErrorCode::name),
            self.generation
        );
        Ok(match code {
            Some(ErrorCode::None) => {
                self.failures = 0;
                AfterSync::Assigned(flatten_partitions(&answer.partitions))
            }
            Some(ErrorCode::RebalanceInProgress) => AfterSync::Rejoin,
            Some(ErrorCode::IllegalGeneration) => AfterSync::Lost {
                forget_member_id: false,
            },
            Some(ErrorCode::UnknownMemberId) => AfterSync::Lost {
                forget_member_id: true,
            },
            Some(c) if c.is_fatal_for_member() => {
                return Err(ClientError::protocol(
                    answer.error_code,
                    format!("SyncGroup group {group_id}"),
                ));
            }
            _ => {
                self.back_off().await;
                AfterSync::Rejoin
            }
        })
    }

    /// The leader's assignment, one entry per member.
    fn assign(&self, joined: &JoinGroupResponse) -> Result<Vec<MemberAssignment>, ClientError> {
        let name = joined.assignor.clone().unwrap_or_default();
        let assignor = self
            .config
            .assignors
            .iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| ClientError::UnknownAssignor(name.clone()))?;
        let members: Vec<MemberSubscription> =
            joined.members.iter().cloned().map(Into::into).collect();
        let counts = joined
            .topics
            .iter()
            .map(|t| (t.topic.clone(), t.partitions))
            .collect();
        let mut result = assignor.assign(&members, &counts);
        debug!(group_id = %self.config.group_id, assignor = %name, members = members.len(), "computed assignment");
        Ok(members
            .into_iter()
            .map(|m| MemberAssignment {
                partitions: result.remove(&m.member_id).unwrap_or_default(),
                member_id: m.member_id,
                user_data: Vec::new(),
            })
            .collect())
    }

    /// Applies a new assignment: revoke what went away (and wait for the application), then
    /// announce what was added, with the ownership epochs asked first. Returns whether a
    /// cooperative follow-up rejoin is needed.
    async fn apply(&mut self, assignment: BTreeSet<TopicPartition>) -> bool {
        // Before anything is published, so that the assignment comes with its epochs.
        let epochs = self.ask_epochs(&assignment).await;
        let revoked: Vec<TopicPartition> = self.owned.difference(&assignment).cloned().collect();
        let added: Vec<TopicPartition> = assignment.difference(&self.owned).cloned().collect();
        self.publish(|s| s.phase = Phase::Stable);
        if !revoked.is_empty() {
            info!(group_id = %self.config.group_id, generation = self.generation, partitions = %display_partitions(&revoked), "revoked");
            let epochs = self.book.of(&revoked);
            for tp in &revoked {
                self.owned.remove(tp);
            }
            self.publish_owned();
            self.emit_and_wait(false, revoked.clone(), epochs).await;
        }
        info!(group_id = %self.config.group_id, generation = self.generation, partitions = %display_partitions(&added), "assigned");
        self.owned = assignment;
        self.book.set_owned(&self.owned);
        if let Some(epochs) = epochs {
            self.book.accept(&epochs);
        }
        self.publish_owned();
        self.history = (self.owned.iter().cloned().collect(), self.generation);
        let epochs = self.book.of(&added);
        let _ = self.events.send(Event::Assigned(
            Partitions::new(added, self.generation, None).with_epochs(epochs),
        ));
        self.protocol == RebalanceProtocol::Cooperative && !revoked.is_empty()
    }

    /// The ownership epochs of the generation's `assignment`, asked unless all are known
    /// (module `epochs`); `None` when asking failed, which only leaves them unknown. Within
    /// the request timeout: the heartbeat task keeps the session meanwhile.
    async fn ask_epochs(
        &mut self,
        assignment: &BTreeSet<TopicPartition>,
    ) -> Option<Vec<muster_protocol::TopicEpochs>> {
        if !self.book.missing(assignment.iter()) {
            return None;
        }
        let request = OwnershipEpochsRequest {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
        };
        let timeout = self.route.connection().config().request_timeout;
        epochs::ask(&mut self.route, request, timeout).await
    }

    /// `close()`: final revocation (not awaited), LeaveGroup unless static.
    async fn close(&mut self) -> Result<(), ClientError> {
        let owned: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
        let epochs = self.book.of(&owned);
        self.book.set_owned([]);
        self.publish(|s| {
            s.phase = Phase::Closed;
            s.assignment.clear();
        });
        if !owned.is_empty() {
            let _ = self.events.send(Event::Revoked(
                Partitions::new(owned, self.generation, None).with_epochs(epochs),
            ));
        }
        if !self.config.leaves_on_close() || self.member_id.is_empty() {
            return Ok(());
        }
        let group_id = self.config.group_id.clone();
        info!(%group_id, member_id = %self.member_id, "leaving the group");
        let request = LeaveGroupRequest {
            group_id: group_id.clone(),
            members: vec![LeavingMember {
                member_id: self.member_id.clone(),
                group_instance_id: self.config.group_instance_id.clone(),
                reason: Some("the member is closing".to_owned()),
            }],
        };
        let deadline = Instant::now() + self.route.connection().config().request_timeout;
        let response = self.route.call(request, deadline).await?;
        let Response::LeaveGroup(answer) = response else {
            return Err(ClientError::Unexpected(response.name()));
        };
        // Already gone (session expired) is as good as leaving.
        let gone = |code: i16| code == 0 || code == ErrorCode::UnknownMemberId.code();
        if !gone(answer.error_code) {
            return Err(ClientError::protocol(
                answer.error_code,
                format!("LeaveGroup group {group_id}"),
            ));
        }
        for m in &answer.members {
            if !gone(m.error_code) {
                return Err(ClientError::protocol(
                    m.error_code,
                    format!("LeaveGroup group {group_id} member {}", m.member_id),
                ));
            }
        }
        Ok(())
    }
}
