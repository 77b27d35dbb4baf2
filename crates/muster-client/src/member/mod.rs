//! Group membership: [`MemberConfig`] (the builder), [`GroupMember`] (the handle the
//! application keeps), and the [`Events`] stream through which it learns which partitions it
//! owns, in the style of Kafka's `ConsumerRebalanceListener`. A member speaks one of two group
//! protocols ([`GroupProtocol`]): the classic one (JoinGroup / SyncGroup / Heartbeat, the
//! default) or the consumer protocol (ConsumerGroupHeartbeat, Kafka 4's KIP-848). The handle and
//! the events are the same for both.
//!
//! # The classic protocol
//!
//! Starting a member spawns two tasks on the current Tokio runtime:
//!
//! - the *membership task* (module `task`) joins the group (handling `MEMBER_ID_REQUIRED`), runs
//!   the chosen assignor when it is the leader, syncs, applies the assignment (emitting
//!   [`Event::Revoked`] / [`Event::Assigned`]), and rejoins when told to;
//! - the *heartbeat task* (module `heartbeat`) heartbeats every `heartbeat_interval` while the
//!   member has a generation, and reports `REBALANCE_IN_PROGRESS`, `ILLEGAL_GENERATION`,
//!   `UNKNOWN_MEMBER_ID` and `FENCED_INSTANCE_ID` to the membership task.
//!
//! # The consumer protocol
//!
//! With [`GroupProtocol::Consumer`] one task (module `consumer`) does it all: it joins with
//! epoch 0 and a member id it made (a random UUID, kept for the member's life), sending its
//! subscription and [`MemberConfig::server_assignor`]; the server computes every assignment
//! (there is no client-side assignor and no leader) and each member reconciles toward its own
//! share at its own pace, with no group-wide barrier. The member heartbeats at the interval the
//! server gives, and at once when it has news (it finished a revocation, or took new
//! partitions). An answer that carries an assignment first revokes what it no longer holds
//! ([`Event::Revoked`], awaited), reports the smaller set, then announces what was added
//! ([`Event::Assigned`]). `FENCED_MEMBER_EPOCH` or `UNKNOWN_MEMBER_ID` → [`Event::Lost`] for
//! everything, and a rejoin with epoch 0 and the same member id. [`MemberState::generation_id`]
//! is the member epoch. The session timeout is the server's setting (not sent), and the
//! configured heartbeat interval only applies until the server's first answer.
//!
//! Offsets are committed and fetched directly from the handle (not through the membership
//! task), fenced by the member's current generation (classic) or member epoch (consumer
//! protocol) and member id, so an application may commit while it handles a revocation. The
//! server also checks that the member owns each partition it commits: one it does not is
//! refused (`PARTITION_NOT_OWNED`, [`ClientError::PartitionsNotOwned`]), the member has lost it,
//! and the application must stop processing it.
//!
//! # Ownership epochs
//!
//! Each partition a member owns has an *ownership epoch* (module `epochs`): a fencing token
//! that rises every time the partition gets another owner and is never reused in the group.
//! After every assignment the member asks the server for them (OwnershipEpochs), before it
//! emits [`Event::Assigned`], which carries them ([`Partitions::ownership_epoch`]);
//! [`GroupMember::ownership_epoch`] reads them at any time, and `Revoked` and `Lost` carry the
//! epochs the partitions had. Store the epoch beside what a partition's processing writes, and
//! refuse a write that carries an older one: a member that lost the partition without knowing
//! it cannot overwrite its successor's work (docs/offsets.md). Failing to get them does not
//! affect membership: the epochs are unknown (`None`) until the next assignment, or
//! [`GroupMember::fetch_ownership_epochs`].
//!
//! Every group request goes to the group's coordinator (module `route`): found with
//! FindCoordinator from the client's bootstrap list before the first JoinGroup (or
//! ConsumerGroupHeartbeat), and found again when it fails or moves, with the request resent
//! there with the same member id and generation (epoch), so that a failover causes no
//! rebalance.
//!
//! # Revocations wait for the application
//!
//! [`Event::Revoked`] and [`Event::Lost`] carry [`Partitions`] that the membership task waits
//! on: it does not rejoin (eager), move on (cooperative) or report the release to the server
//! (consumer protocol) until the application has dropped the value, or the rebalance timeout
//! has passed. Handle the event (stop work on those partitions, commit), then drop it.
//! Heartbeats go on meanwhile. `close()` is the exception: it emits a final `Revoked` without
//! waiting, since the application has already stopped.
//!
//! The builder and its checks are module `config`, which depends on none of the tasks;
//! [`MemberConfig::start`] is here, beside the handle it returns.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use muster_protocol::ErrorCode;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::client::Client;
use crate::cluster::Node;
use crate::error::ClientError;
use crate::offsets::{self, Committer};
use crate::partition::{OffsetAndMetadata, TopicPartition};
use epochs::OwnershipBook;

mod config;
mod consumer;
mod epochs;
mod heartbeat;
mod route;
mod task;

pub use config::{GroupProtocol, MemberConfig};

impl MemberConfig {
    /// Starts the member: it finds its group's coordinator and joins in the background.
    /// Events arrive on the returned [`Events`]. Must be called within a Tokio runtime.
    ///
    /// `client` is a [`Client`] (a bootstrap list) or a [`crate::Connection`] (a bootstrap
    /// list of its one address).
    pub fn start(self, client: impl Into<Client>) -> Result<(GroupMember, Events), ClientError> {
        self.validate()?;
        let client = client.into();
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ClientError::Config("start() must be called within a Tokio runtime".into())
        })?;
        let route = route::Route::new(client, self.group_id.clone(), self.retry_backoff);
        let book = Arc::new(OwnershipBook::default());
        let config = Arc::new(self);
        let (state_tx, state_rx) = watch::channel(MemberState::initial());
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (signals_tx, signals_rx) = mpsc::unbounded_channel();
        let (close_tx, close_rx) = oneshot::channel();
        let (task, heartbeat) = match config.group_protocol {
            GroupProtocol::Classic => {
                let heartbeat = runtime.spawn(heartbeat::run(
                    route.view(),
                    Arc::clone(&config),
                    state_rx.clone(),
                    signals_tx.clone(),
                ));
                let membership = task::MemberTask::new(
                    route.view(),
                    Arc::clone(&config),
                    state_tx,
                    events_tx,
                    signals_rx,
                    Arc::clone(&book),
                );
                let task = runtime.spawn(task::run(membership, close_rx, heartbeat.abort_handle()));
                (task, Some(heartbeat))
            }
            GroupProtocol::Consumer => {
                // Chosen here, as Kafka 4's clients do, and kept across fencing and rejoins.
                let member_id = uuid::Uuid::new_v4().to_string();
                state_tx.send_modify(|s| s.member_id.clone_from(&member_id));
                let membership = consumer::ConsumerTask::new(
                    route.view(),
                    Arc::clone(&config),
                    state_tx,
                    events_tx,
                    signals_rx,
                    member_id,
                    Arc::clone(&book),
                );
                (runtime.spawn(consumer::run(membership, close_rx)), None)
            }
        };
        Ok((
            GroupMember {
                config,
                route,
                book,
                state: state_rx,
                signals: signals_tx,
                close: Some(close_tx),
                task: Some(task),
                heartbeat,
            },
            Events { rx: events_rx },
        ))
    }
}

/// Where a member is in the group protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Sending JoinGroup, or waiting at the barrier. Consumer protocol: joining with epoch 0
    /// (at first, and after being fenced).
    Joining,
    /// Joined a generation; waiting for the assignment. Consumer protocol: has an epoch, and
    /// is reconciling toward the assignment the server gave it (a revocation in progress,
    /// partitions not yet taken, or a change the server has not acknowledged yet).
    Syncing,
    /// Has its assignment for the current generation (consumer protocol: owns exactly what
    /// the server last assigned it, and the server has heard so).
    Stable,
    /// `close()` was called.
    Closed,
    /// Stopped after a fatal error (see the [`Event::Error`] it emitted).
    Failed,
}

/// A snapshot of a member's view of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberState {
    pub phase: Phase,
    /// Empty until the server gives one (consumer protocol: the member's own UUID from the
    /// start).
    pub member_id: String,
    /// -1 until the first join completes, and after the membership is lost. Consumer
    /// protocol: the member epoch.
    pub generation_id: i32,
    /// Empty for a consumer-protocol member (the server assigns).
    pub leader_id: String,
    /// The group's assignor (consumer protocol: the configured server assignor, if any).
    pub assignor: Option<String>,
    /// The partitions the member owns now.
    pub assignment: Vec<TopicPartition>,
}

impl MemberState {
    fn initial() -> Self {
        MemberState {
            phase: Phase::Joining,
            member_id: String::new(),
            generation_id: -1,
            leader_id: String::new(),
            assignor: None,
            assignment: Vec::new(),
        }
    }

    pub fn is_leader(&self) -> bool {
        !self.member_id.is_empty() && self.member_id == self.leader_id
    }
}

/// A request from the heartbeat task (or a failed commit) to the membership task: the server
/// answered `code` to a request made as `member_id` in `generation`.
#[derive(Debug)]
pub(crate) struct Signal {
    pub generation: i32,
    pub member_id: String,
    pub code: ErrorCode,
    /// `PARTITION_NOT_OWNED`: the partitions refused (empty for the other codes).
    pub partitions: Vec<TopicPartition>,
}

type CloseReply = oneshot::Sender<Result<(), ClientError>>;

/// A member of a group. Dropping it without [`GroupMember::close`] stops it at once without
/// leaving the group (as if the process died): the server removes it when its session expires.
pub struct GroupMember {
    config: Arc<MemberConfig>,
    route: Arc<route::Route>,
    book: Arc<OwnershipBook>,
    state: watch::Receiver<MemberState>,
    signals: mpsc::UnboundedSender<Signal>,
    close: Option<oneshot::Sender<CloseReply>>,
    task: Option<JoinHandle<()>>,
    /// The classic protocol's heartbeat task (a consumer-protocol member has none).
    heartbeat: Option<JoinHandle<()>>,
}

impl fmt::Debug for GroupMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupMember")
            .field("config", &self.config)
            .field("state", &*self.state.borrow())
            .finish()
    }
}

impl GroupMember {
    pub fn config(&self) -> &MemberConfig {
        &self.config
    }

    /// The member's current view of the group.
    pub fn state(&self) -> MemberState {
        self.state.borrow().clone()
    }

    /// A receiver that sees every change of [`GroupMember::state`].
    pub fn watch_state(&self) -> watch::Receiver<MemberState> {
        self.state.clone()
    }

    pub fn member_id(&self) -> String {
        self.state.borrow().member_id.clone()
    }

    pub fn generation(&self) -> i32 {
        self.state.borrow().generation_id
    }

    /// The group's coordinator as last found (`None` before the first lookup).
    pub fn coordinator(&self) -> Option<Node> {
        self.route.node()
    }

    /// The client the member reaches the cluster through.
    pub fn client(&self) -> &Client {
        self.route.client()
    }

    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.state.borrow().assignment.clone()
    }

    /// The ownership epoch of `tp`, a partition the member owns (module docs): the fencing
    /// token to store beside what processing the partition writes. `None` for a partition the
    /// member does not own, and while the epoch is not known (it is asked after each
    /// assignment, before [`Event::Assigned`]; see
    /// [`GroupMember::fetch_ownership_epochs`] if that failed).
    pub fn ownership_epoch(&self, tp: &TopicPartition) -> Option<i32> {
        self.book.get(tp)
    }

    /// The known ownership epochs of the partitions the member owns.
    pub fn ownership_epochs(&self) -> BTreeMap<TopicPartition, i32> {
        self.book.snapshot()
    }

    /// Asks the coordinator now for the ownership epochs of the partitions the member owns
    /// (OwnershipEpochs, sent like a commit: the current generation or member epoch, and the
    /// member id), keeps them, and returns every epoch known afterwards. For when the member's
    /// own request after an assignment failed (the epochs are then `None`).
    ///
    /// An answer that arrives after a partition left the member is not kept (it may describe
    /// a tenure that has ended). The server's refusals are returned as errors:
    /// `ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS` (classic, while a rebalance completes),
    /// `STALE_MEMBER_EPOCH` (consumer protocol), `UNKNOWN_MEMBER_ID`; they change nothing
    /// (heartbeats deal with the membership).
    pub async fn fetch_ownership_epochs(
        &self,
    ) -> Result<BTreeMap<TopicPartition, i32>, ClientError> {
        let committer = self.committer()?;
        let request = muster_protocol::OwnershipEpochsRequest {
            group_id: committer.group_id,
            generation_id: committer.generation_id,
            member_id: committer.member_id,
            group_instance_id: committer.group_instance_id,
        };
        let version = self.book.version();
        let response = self.route.view().call(request, self.deadline()).await?;
        let topics = epochs::parse(&self.config.group_id, response)?;
        self.book.record(version, &topics);
        Ok(self.book.snapshot())
    }

    /// Waits until `predicate` holds for the state, at most `timeout`.
    pub async fn wait_for_state(
        &self,
        timeout: Duration,
        mut predicate: impl FnMut(&MemberState) -> bool,
    ) -> Result<MemberState, ClientError> {
        let mut rx = self.state.clone();
        let result = tokio::time::timeout(timeout, async {
            rx.wait_for(|s| predicate(s)).await.map(|s| s.clone())
        })
        .await;
        match result {
            Ok(Ok(state)) => Ok(state),
            Ok(Err(_)) => Err(ClientError::Closed),
            Err(_) => Err(ClientError::Timeout {
                request: "wait_for_state",
                after: timeout,
            }),
        }
    }

    fn committer(&self) -> Result<Committer, ClientError> {
        let state = self.state.borrow();
        let usable = !state.member_id.is_empty()
            && state.generation_id >= 0
            && !matches!(state.phase, Phase::Closed | Phase::Failed);
        if !usable {
            return Err(ClientError::NotMember {
                group_id: self.config.group_id.clone(),
            });
        }
        Ok(Committer {
            group_id: self.config.group_id.clone(),
            generation_id: state.generation_id,
            member_id: state.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
        })
    }

    /// Commits offsets as this member, fenced by its current generation (consumer protocol:
    /// its member epoch, sent as the generation) and member id.
    ///
    /// Sent to the group's coordinator; if it fails or moves before answering, the same
    /// commit (same generation and member id) is sent to the new coordinator, within the
    /// connection's request timeout (a commit is idempotent, so resending one whose answer
    /// was lost is safe).
    ///
    /// Allowed while the group is Stable or preparing a rebalance (so offsets can be committed
    /// while handling [`Event::Revoked`]); while a rebalance completes the server answers
    /// `REBALANCE_IN_PROGRESS`. An answer that means the membership is stale
    /// (`ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`) is returned as the
    /// error and also makes the member rejoin (or stop, when fenced).
    ///
    /// Consumer protocol: `STALE_MEMBER_EPOCH` means the member's epoch moved on (or is about
    /// to) since the commit was built; it is returned, and the member heartbeats at once, so a
    /// retry after the next heartbeat carries the current epoch. (`UNKNOWN_MEMBER_ID` and
    /// `FENCED_MEMBER_EPOCH` also make it heartbeat at once; the heartbeat's answer decides.)
    ///
    /// A partition the member does not own in its generation (epoch) is refused with
    /// `PARTITION_NOT_OWNED`, the others are committed, and the error is
    /// [`ClientError::PartitionsNotOwned`] naming every refused partition: the member has lost
    /// them (typically a late commit of partitions already revoked, or a process that missed a
    /// rebalance). Stop processing them and do not retry. If the member still counted any of
    /// them as its own, it drops them and emits [`Event::Lost`] for them (not awaited: their
    /// new owner has them already).
    pub async fn commit_offsets<O: Into<OffsetAndMetadata>>(
        &self,
        offsets: impl IntoIterator<Item = (TopicPartition, O)>,
    ) -> Result<(), ClientError> {
        let committer = self.committer()?;
        let (generation, member_id) = (committer.generation_id, committer.member_id.clone());
        let offsets: BTreeMap<TopicPartition, OffsetAndMetadata> =
            offsets.into_iter().map(|(tp, o)| (tp, o.into())).collect();
        if offsets.is_empty() {
            return Ok(());
        }
        let request = offsets::commit_request(committer, offsets);
        let response = self.route.view().call(request, self.deadline()).await?;
        let result = offsets::check_commit(&self.config.group_id, response);
        if let Err(ClientError::PartitionsNotOwned { partitions, .. }) = &result {
            let _ = self.signals.send(Signal {
                generation,
                member_id,
                code: ErrorCode::PartitionNotOwned,
                partitions: partitions.clone(),
            });
            return result;
        }
        if let Some(code) = result.as_ref().err().and_then(ClientError::error_code) {
            // Not REBALANCE_IN_PROGRESS: during CompletingRebalance it only means "wait for
            // the assignment", and heartbeats report a rebalance being prepared anyway.
            let concerns_membership = match self.config.group_protocol {
                GroupProtocol::Classic => matches!(
                    code,
                    ErrorCode::IllegalGeneration
                        | ErrorCode::UnknownMemberId
                        | ErrorCode::FencedInstanceId
                ),
                GroupProtocol::Consumer => matches!(
                    code,
                    ErrorCode::StaleMemberEpoch
                        | ErrorCode::FencedMemberEpoch
                        | ErrorCode::UnknownMemberId
                ),
            };
            if concerns_membership {
                let _ = self.signals.send(Signal {
                    generation,
                    member_id,
                    code,
                    partitions: Vec::new(),
                });
            }
        }
        result
    }

    /// The group's committed offsets for `partitions` (`None`: every committed partition).
    /// Partitions without a commit are absent from the answer.
    pub async fn fetch_offsets(
        &self,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<BTreeMap<TopicPartition, OffsetAndMetadata>, ClientError> {
        let request = offsets::fetch_request(&self.config.group_id, partitions);
        let response = self.route.view().call(request, self.deadline()).await?;
        offsets::parse_fetch(&self.config.group_id, response)
    }

    /// When a request from the handle started now gives up.
    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.route.client().connection_config().request_timeout
    }

    /// Stops the member: emits a final [`Event::Revoked`] for what it owns (without waiting
    /// for it to be handled), stops heartbeating, and sends LeaveGroup unless the member is
    /// static (see [`MemberConfig::leave_group_on_close`]). Consumer protocol: a heartbeat
    /// with epoch -1 leaves, or -2 for a static member. The event stream ends afterwards.
    pub async fn close(mut self) -> Result<(), ClientError> {
        let mut result = Ok(());
        if let Some(close) = self.close.take() {
            let (reply_tx, reply_rx) = oneshot::channel();
            if close.send(reply_tx).is_ok() {
                result = reply_rx.await.unwrap_or(Ok(()));
            }
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        if let Some(heartbeat) = &self.heartbeat {
            heartbeat.abort();
        }
        result
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        if let Some(heartbeat) = &self.heartbeat {
            heartbeat.abort();
        }
    }
}

/// Partitions handed to the application with an event. For [`Event::Revoked`] and
/// [`Event::Lost`], the member waits until this value is dropped (see the module docs).
pub struct Partitions {
    partitions: Vec<TopicPartition>,
    generation: i32,
    epochs: BTreeMap<TopicPartition, i32>,
    ack: Option<oneshot::Sender<()>>,
}

impl Partitions {
    pub(crate) fn new(
        partitions: Vec<TopicPartition>,
        generation: i32,
        ack: Option<oneshot::Sender<()>>,
    ) -> Self {
        Partitions {
            partitions,
            generation,
            epochs: BTreeMap::new(),
            ack,
        }
    }

    /// With the ownership epochs of (some of) the partitions.
    pub(crate) fn with_epochs(mut self, epochs: BTreeMap<TopicPartition, i32>) -> Self {
        self.epochs = epochs;
        self
    }

    /// The ownership epoch of `tp`, one of these partitions (module docs): for `Assigned`, the
    /// epoch the member owns it with from now on; for `Revoked` and `Lost`, the one it owned
    /// it with. `None` when it is not known (the member could not ask the server).
    pub fn ownership_epoch(&self, tp: &TopicPartition) -> Option<i32> {
        self.epochs.get(tp).copied()
    }

    /// The known ownership epochs of these partitions.
    pub fn ownership_epochs(&self) -> &BTreeMap<TopicPartition, i32> {
        &self.epochs
    }

    /// The generation of the member when the event was emitted.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    pub fn partitions(&self) -> &[TopicPartition] {
        &self.partitions
    }

    /// The partitions; lets the member go on, as dropping does.
    pub fn into_vec(mut self) -> Vec<TopicPartition> {
        std::mem::take(&mut self.partitions)
    }
}

impl Deref for Partitions {
    type Target = [TopicPartition];

    fn deref(&self) -> &[TopicPartition] {
        &self.partitions
    }
}

impl fmt::Debug for Partitions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Partitions")
            .field("partitions", &self.partitions)
            .field("generation", &self.generation)
            .field("epochs", &self.epochs)
            .field("awaited", &self.ack.is_some())
            .finish()
    }
}

impl Drop for Partitions {
    fn drop(&mut self) {
        if let Some(ack) = self.ack.take() {
            let _ = ack.send(());
        }
    }
}

/// What happens to a member's partitions (Kafka's `ConsumerRebalanceListener` callbacks).
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// Partitions now owned, after a rebalance completed. Eager: the whole new assignment;
    /// cooperative: only the partitions added (possibly none). Emitted after every completed
    /// rebalance. Consumer protocol: the partitions added by the server's assignment; emitted
    /// whenever some are, and after each join even if none are. Carries their ownership
    /// epochs ([`Partitions::ownership_epoch`]), asked just before.
    Assigned(Partitions),
    /// Partitions given up in an orderly way (commit their offsets before dropping the value).
    Revoked(Partitions),
    /// Partitions lost without a chance to commit: the membership was reset
    /// (`UNKNOWN_MEMBER_ID`, `ILLEGAL_GENERATION`) or fenced (`FENCED_INSTANCE_ID`; consumer
    /// protocol: `FENCED_MEMBER_EPOCH`), or a commit found the member no longer owns them
    /// (`PARTITION_NOT_OWNED`, [`ClientError::PartitionsNotOwned`]; that `Lost` is not
    /// awaited). Others may own them already.
    Lost(Partitions),
    /// A fatal error: the member has stopped, and the stream ends after this event.
    Error(ClientError),
}

/// The stream of a member's [`Event`]s; ends when the member is closed or has failed.
#[derive(Debug)]
pub struct Events {
    rx: mpsc::UnboundedReceiver<Event>,
}

impl Events {
    /// The next event, or `None` once the member has stopped.
    pub async fn recv(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// The next event if one is ready.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.rx.try_recv().ok()
    }
}

impl futures_util::Stream for Events {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.rx.poll_recv(cx)
    }
}
