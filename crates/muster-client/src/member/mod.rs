//! Group membership: [`MemberConfig`] (the builder), [`GroupMember`] (the handle the
//! application keeps), and the [`Events`] stream through which it learns which partitions it
//! owns, in the style of Kafka's `ConsumerRebalanceListener`.
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
//! Offsets are committed and fetched directly from the handle (not through the membership
//! task), fenced by the member's current generation and member id, so an application may
//! commit while it handles a revocation.
//!
//! Every group request goes to the group's coordinator (module `route`): found with
//! FindCoordinator from the client's bootstrap list before the first JoinGroup, and found
//! again when it fails or moves, with the request resent there unchanged, so that a failover
//! causes no rebalance.
//!
//! # Revocations wait for the application
//!
//! [`Event::Revoked`] and [`Event::Lost`] carry [`Partitions`] that the membership task waits
//! on: it does not rejoin (eager) or move on (cooperative) until the application has dropped
//! the value, or the rebalance timeout has passed. Handle the event (stop work on those
//! partitions, commit), then drop it. Heartbeats go on meanwhile. `close()` is the exception:
//! it emits a final `Revoked` without waiting, since the application has already stopped.

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

use crate::assignor::{self, Assignor, RebalanceProtocol};
use crate::backoff::Backoff;
use crate::client::Client;
use crate::cluster::Node;
use crate::error::ClientError;
use crate::offsets::{self, Committer};
use crate::partition::{OffsetAndMetadata, TopicPartition};

mod heartbeat;
mod route;
mod task;

/// Configuration of a group member. Build it with [`MemberConfig::new`] and the chained
/// setters, then [`MemberConfig::start`] it.
#[derive(Clone)]
pub struct MemberConfig {
    pub(crate) group_id: String,
    pub(crate) topics: Vec<String>,
    pub(crate) session_timeout: Duration,
    pub(crate) rebalance_timeout: Duration,
    pub(crate) heartbeat_interval: Option<Duration>,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) assignors: Vec<Arc<dyn Assignor>>,
    pub(crate) leave_group_on_close: Option<bool>,
    pub(crate) retry_backoff: Backoff,
}

impl fmt::Debug for MemberConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemberConfig")
            .field("group_id", &self.group_id)
            .field("topics", &self.topics)
            .field("session_timeout", &self.session_timeout)
            .field("rebalance_timeout", &self.rebalance_timeout)
            .field("heartbeat_interval", &self.effective_heartbeat_interval())
            .field("group_instance_id", &self.group_instance_id)
            .field("assignors", &self.assignor_list())
            .field("leave_group_on_close", &self.leaves_on_close())
            .finish()
    }
}

impl MemberConfig {
    /// A member of `group_id` subscribing to `topics`, with Kafka's defaults: session timeout
    /// 10 s, rebalance timeout 60 s, heartbeat every session / 3, assignors `range` then
    /// `cooperative-sticky` (so the eager protocol, as in Kafka 3.x).
    pub fn new<S: Into<String>>(
        group_id: impl Into<String>,
        topics: impl IntoIterator<Item = S>,
    ) -> Self {
        MemberConfig {
            group_id: group_id.into(),
            topics: topics.into_iter().map(Into::into).collect(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(60),
            heartbeat_interval: None,
            group_instance_id: None,
            assignors: vec![
                Arc::new(assignor::RangeAssignor),
                Arc::new(assignor::CooperativeStickyAssignor),
            ],
            leave_group_on_close: None,
            retry_backoff: Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_secs(2),
                multiplier: 2,
                jitter: 0.2,
            },
        }
    }

    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    pub fn rebalance_timeout(mut self, timeout: Duration) -> Self {
        self.rebalance_timeout = timeout;
        self
    }

    /// Default: a third of the session timeout.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = Some(interval);
        self
    }

    /// Makes the member static (KIP-345): a restart within the session timeout gets its
    /// partitions back without a rebalance.
    pub fn group_instance_id(mut self, instance_id: impl Into<String>) -> Self {
        self.group_instance_id = Some(instance_id.into());
        self
    }

    /// The assignors this member supports, by preference (replaces the default list).
    pub fn assignors(mut self, assignors: Vec<Arc<dyn Assignor>>) -> Self {
        self.assignors = assignors;
        self
    }

    /// The built-in assignors with these names, by preference (replaces the default list).
    pub fn assignor_names<S: AsRef<str>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Self, ClientError> {
        self.assignors = names
            .into_iter()
            .map(|n| {
                assignor::builtin(n.as_ref()).ok_or_else(|| {
                    ClientError::Config(format!("no assignor named {:?}", n.as_ref()))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// Whether `close()` sends LeaveGroup. Default: yes for dynamic members, no for static
    /// ones (as in Kafka, so that a restart causes no rebalance).
    pub fn leave_group_on_close(mut self, leave: bool) -> Self {
        self.leave_group_on_close = Some(leave);
        self
    }

    /// Delays between retries of a failed JoinGroup / SyncGroup, and between consecutive
    /// lookups of the coordinator.
    pub fn retry_backoff(mut self, backoff: Backoff) -> Self {
        self.retry_backoff = backoff;
        self
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn topics(&self) -> &[String] {
        &self.topics
    }

    /// The heartbeat interval in force (the configured one, or session timeout / 3).
    pub fn effective_heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval.unwrap_or(self.session_timeout / 3)
    }

    /// Whether `close()` sends LeaveGroup (the configured choice, or "if dynamic").
    pub fn leaves_on_close(&self) -> bool {
        self.leave_group_on_close
            .unwrap_or(self.group_instance_id.is_none())
    }

    /// The names of the configured assignors, by preference.
    pub fn assignor_list(&self) -> Vec<String> {
        self.assignors.iter().map(|a| a.name().to_owned()).collect()
    }

    /// Cooperative only if every assignor is (Kafka's rule).
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        if !self.assignors.is_empty()
            && self
                .assignors
                .iter()
                .all(|a| a.protocol() == RebalanceProtocol::Cooperative)
        {
            RebalanceProtocol::Cooperative
        } else {
            RebalanceProtocol::Eager
        }
    }

    fn validate(&self) -> Result<(), ClientError> {
        let bad = |msg: String| Err(ClientError::Config(msg));
        if self.group_id.is_empty() {
            return bad("the group id is empty".into());
        }
        if self.assignors.is_empty() {
            return bad("no assignor configured".into());
        }
        let mut names = self.assignor_list();
        names.sort();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return bad(format!("assignor names repeat: {names:?}"));
        }
        for (what, value) in [
            ("session timeout", self.session_timeout),
            ("rebalance timeout", self.rebalance_timeout),
        ] {
            if value.is_zero() || u32::try_from(value.as_millis()).is_err() {
                return bad(format!("{what} {value:?} is not 1 ms ..= u32::MAX ms"));
            }
        }
        let hb = self.effective_heartbeat_interval();
        if hb.is_zero() || hb >= self.session_timeout {
            return bad(format!(
                "heartbeat interval {hb:?} must be positive and below the session timeout {:?}",
                self.session_timeout
            ));
        }
        Ok(())
    }

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
        let config = Arc::new(self);
        let (state_tx, state_rx) = watch::channel(MemberState::initial());
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (signals_tx, signals_rx) = mpsc::unbounded_channel();
        let (close_tx, close_rx) = oneshot::channel();
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
        );
        let task = runtime.spawn(task::run(membership, close_rx, heartbeat.abort_handle()));
        Ok((
            GroupMember {
                config,
                route,
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
    /// Sending JoinGroup, or waiting at the barrier.
    Joining,
    /// Joined a generation; waiting for the assignment.
    Syncing,
    /// Has its assignment for the current generation.
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
    /// Empty until the server gives one.
    pub member_id: String,
    /// -1 until the first join completes, and after the membership is lost.
    pub generation_id: i32,
    pub leader_id: String,
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
}

type CloseReply = oneshot::Sender<Result<(), ClientError>>;

/// A member of a group. Dropping it without [`GroupMember::close`] stops it at once without
/// leaving the group (as if the process died): the server removes it when its session expires.
pub struct GroupMember {
    config: Arc<MemberConfig>,
    route: Arc<route::Route>,
    state: watch::Receiver<MemberState>,
    signals: mpsc::UnboundedSender<Signal>,
    close: Option<oneshot::Sender<CloseReply>>,
    task: Option<JoinHandle<()>>,
    heartbeat: JoinHandle<()>,
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

    /// Commits offsets as this member, fenced by its current generation and member id.
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
        if let Some(code) = result.as_ref().err().and_then(ClientError::error_code) {
            // Not REBALANCE_IN_PROGRESS: during CompletingRebalance it only means "wait for
            // the assignment", and heartbeats report a rebalance being prepared anyway.
            if matches!(
                code,
                ErrorCode::IllegalGeneration
                    | ErrorCode::UnknownMemberId
                    | ErrorCode::FencedInstanceId
            ) {
                let _ = self.signals.send(Signal {
                    generation,
                    member_id,
                    code,
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
    /// static (see [`MemberConfig::leave_group_on_close`]). The event stream ends afterwards.
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
        self.heartbeat.abort();
        result
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        self.heartbeat.abort();
    }
}

/// Partitions handed to the application with an event. For [`Event::Revoked`] and
/// [`Event::Lost`], the member waits until this value is dropped (see the module docs).
pub struct Partitions {
    partitions: Vec<TopicPartition>,
    generation: i32,
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
            ack,
        }
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
    /// rebalance.
    Assigned(Partitions),
    /// Partitions given up in an orderly way (commit their offsets before dropping the value).
    Revoked(Partitions),
    /// Partitions lost without a chance to commit: the membership was reset
    /// (`UNKNOWN_MEMBER_ID`, `ILLEGAL_GENERATION`) or fenced. Others may own them already.
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
