//! One consumer group as an actor: a thin shell that hands each message and the current time
//! to its [`Group`] engine and carries out what comes back — replies, durable writes, timer
//! requests to the supervisor, status updates and operator logs.
//!
//! In-memory state never runs ahead of disk for long: when a write of the group's record
//! fails, every request that waited on it (and every held JoinGroup/SyncGroup) is answered
//! COORDINATOR_NOT_AVAILABLE and the group reloads what is durable ([`Store::load_group`]),
//! retrying until the store has recovered; meanwhile it answers COORDINATOR_NOT_AVAILABLE to
//! everything, so nothing acts on the generation that was never written. The last durable
//! record is read back rather than kept: an idle group holds no second copy of itself.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use muster_protocol::error_answers::{error_for, error_like};
use muster_protocol::{ErrorCode, HeartbeatRequest, HeartbeatResponse, Request, Response};
use tracing::{debug, error, info, warn};
use uuid::Uuid;

use super::messages::{
    AbortHeld, ArmTimer, Delete, Describe, Forget, GroupBatch, GroupCall, GroupInbox, Relinquish,
    StatusChanged, Tick, TopicsChanged,
};
use super::reply::ReplyTo;

mod insight;
mod log;

use self::log::log_event;
use crate::access::ResourceType;
use crate::catalog::TopicCatalog;
use crate::clock::Clock;
use crate::config::GroupConfig;
use crate::engine::{unreadable_topics, Ctx, Group, GroupState, Millis, Output};
use crate::logsafe::logsafe;
use crate::quota::Quotas;
use crate::storage::{Mutation, Store, StoreError};

/// What every group actor shares.
pub(crate) struct GroupEnv {
    pub store: Arc<dyn Store>,
    /// For rebuilding a group from its durable record after a failed write.
    pub config: Arc<GroupConfig>,
    pub catalog: Arc<TopicCatalog>,
    pub clock: Clock,
    /// Every principal's quota: a group rebuilt from its record charges its members again.
    pub quotas: Quotas,
    /// Which shards this node serves (cluster mode; a single node serves its one shard).
    pub placement: Arc<dyn super::placement::Placement>,
    /// The supervisor, as the three messages a group sends it (made once, shared by every
    /// group: a group never clones them).
    pub supervisor: SupervisorLink,
}

/// The supervisor as a group reaches it: [`Recipient`]s, so that this module does not name
/// the supervisor (which creates group actors and so depends on this module).
pub(crate) struct SupervisorLink {
    pub arm_timer: Recipient<ArmTimer>,
    pub status_changed: Recipient<StatusChanged>,
    pub forget: Recipient<Forget>,
}

/// The actor hosting one group.
pub struct GroupActor {
    key: u64,
    /// The group's shard ([`GroupEnv::placement`]).
    shard: u32,
    group: Group<ReplyTo>,
    env: Arc<GroupEnv>,
    /// The wake-up the supervisor holds for us (at or before our next deadline).
    armed: Option<Millis>,
    persist_in_flight: bool,
    /// Replies waiting for the write after the one in flight.
    persist_next: Option<Vec<(ReplyTo, Response)>>,
    status: (GroupState, u32),
    /// OffsetCommits submitted to the store and not yet answered: retention waits for them.
    commits_in_flight: u32,
    /// A write of the group's record failed and the durable record is not reloaded yet.
    reloading: bool,
    /// Topics whose partition count changed while reloading (rare; empty otherwise).
    missed_topics: Vec<String>,
    /// The group's creator may not be on disk yet: a group made by an OffsetCommit has offsets
    /// but no record until a member joins, and a restart would then charge no one for it. The
    /// first commit of such a group writes its (member-less) record too.
    owner_unrecorded: bool,
    /// Cluster mode: this node no longer coordinates the group (its shard was given away or
    /// taken over). Everything is answered NOT_COORDINATOR; nothing is written any more.
    relinquished: bool,
    /// Who waits for the writes in flight to finish before the actor stops ([`Relinquish`]).
    drained: Vec<tokio::sync::oneshot::Sender<()>>,
    /// What this group last told the rebalance-insight metrics (`sync_insight`).
    insight: InsightShown,
}

/// The answer for requests whose write failed: a write refused because another node owns the
/// group's shard now means "ask FindCoordinator again", not "retry here".
fn failed_write_code(error: &StoreError) -> ErrorCode {
    match error {
        StoreError::Fenced { .. } | StoreError::NotOwner { .. } => ErrorCode::NotCoordinator,
        _ => ErrorCode::CoordinatorNotAvailable,
    }
}

/// The group's share of the insight gauges (groups stuck, groups with unowned partitions,
/// open barriers), as last reported: changes are reported as they happen, and taken back
/// when the actor stops.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct InsightShown {
    stuck: bool,
    unowned: bool,
    barrier_since: Option<Millis>,
}

/// How often a group whose write failed tries to reload its durable record (it fails fast
/// while the store is recovering).
const RELOAD_RETRY: Duration = Duration::from_millis(200);

impl GroupActor {
    pub(crate) fn new(key: u64, group: Group<ReplyTo>, env: Arc<GroupEnv>) -> Self {
        let status = (group.state(), group.member_count() as u32);
        let owner_unrecorded = group.created_by().is_some();
        let shard = env.placement.shard_of(group.group_id());
        Self {
            key,
            shard,
            group,
            env,
            armed: None,
            persist_in_flight: false,
            persist_next: None,
            status,
            commits_in_flight: 0,
            reloading: false,
            missed_topics: Vec::new(),
            owner_unrecorded,
            relinquished: false,
            drained: Vec::new(),
            insight: InsightShown::default(),
        }
    }

    /// Reports changes of the group's insight gauges. Called only after calls that emitted
    /// events or changed the record (rebalance events): never after a plain heartbeat.
    fn sync_insight(&mut self) {
        let shown = InsightShown {
            stuck: self.group.is_stuck(),
            unowned: self.group.unowned_partition_count() > 0,
            barrier_since: self.group.barrier_started_at(),
        };
        self.show_insight(shown);
    }

    fn show_insight(&mut self, shown: InsightShown) {
        let was = self.insight;
        if shown == was {
            return;
        }
        if shown.stuck != was.stuck {
            crate::metrics::groups_stuck(if shown.stuck { 1.0 } else { -1.0 });
        }
        if shown.unowned != was.unowned {
            crate::metrics::groups_unowned(if shown.unowned { 1.0 } else { -1.0 });
            if shown.unowned {
                warn!(
                    group_id = %logsafe(self.group.group_id()),
                    generation = self.group.generation(),
                    partitions = self.group.unowned_partition_count(),
                    "subscribed partitions that no member owns (see `muster groups why`)"
                );
            }
        }
        if shown.barrier_since != was.barrier_since {
            crate::metrics::barrier_open(self.key, shown.barrier_since);
        }
        self.insight = shown;
    }

    fn handle_call(&mut self, call: GroupCall, ctx: &mut Context<Self>) {
        let now = self.env.clock.now();
        let GroupCall {
            request,
            reply,
            client,
        } = call;
        let serving = self.env.placement.serving(self.shard);
        if self.reloading || self.relinquished || !serving {
            let code = if self.relinquished || !serving {
                ErrorCode::NotCoordinator
            } else {
                ErrorCode::CoordinatorNotAvailable
            };
            reply.send(error_for(&request, code));
            return;
        }
        // Borrows the catalog beside `self.group`: no reference-count traffic on the shared
        // `Arc` per request.
        let cx = Ctx {
            now,
            topics: self.env.catalog.as_ref(),
        };
        let mut out = Output::default();
        crate::metrics::authorization_denials(
            ResourceType::Topic.name(),
            unreadable_topics(&request, &client.access),
        );
        match request {
            Request::Heartbeat(r) => {
                // The hot path: answered at once, no allocation, no timer work.
                reply.send(self.heartbeat(now, &r, serving));
                return;
            }
            Request::JoinGroup(r) => {
                self.group
                    .join(cx, r, &client, Uuid::new_v4(), reply, &mut out)
            }
            Request::SyncGroup(r) => self.group.sync(cx, r, reply, &mut out),
            Request::LeaveGroup(r) => {
                let response = self.group.leave(cx, r, &mut out);
                out.replies.push((reply, Response::LeaveGroup(response)));
            }
            Request::OffsetCommit(r) => {
                let (response, writes) = self.group.commit_offsets(now, r, &client.access);
                if writes.is_empty() {
                    reply.send(Response::OffsetCommit(response));
                } else {
                    self.commit(response, writes, reply, ctx);
                }
            }
            Request::OffsetFetch(r) => {
                reply.send(Response::OffsetFetch(
                    self.group.fetch_offsets(&r, &client.access),
                ));
                return;
            }
            other => reply.send(Response::error(
                ErrorCode::InvalidRequest,
                format!("{} is not a group request", other.name()),
            )),
        }
        self.finish(out, ctx);
    }

    /// A heartbeat's answer (a heartbeat changes nothing the actor must carry out: only the
    /// member's last-heard time, which pushes deadlines later).
    fn heartbeat(&mut self, now: Millis, request: &HeartbeatRequest, serving: bool) -> Response {
        let code = if self.reloading {
            ErrorCode::CoordinatorNotAvailable
        } else if self.relinquished || !serving {
            ErrorCode::NotCoordinator
        } else {
            self.group.heartbeat(now, request)
        };
        Response::Heartbeat(HeartbeatResponse {
            error_code: code.code(),
        })
    }

    /// Offsets are answered only once durable, and only then visible to OffsetFetch.
    fn commit(
        &mut self,
        response: muster_protocol::OffsetCommitResponse,
        writes: Vec<crate::storage::OffsetWrite>,
        reply: ReplyTo,
        ctx: &mut Context<Self>,
    ) {
        let submitted = std::time::Instant::now();
        let mut mutations = Vec::with_capacity(2);
        let records_owner = self.owner_unrecorded
            && !self.persist_in_flight
            && self.group.generation() == 0
            && self.group.member_count() == 0;
        if records_owner {
            // A group without members: its record is its creator and nothing a write in
            // flight could be behind.
            mutations.push(Mutation::PutGroup(self.group.to_record()));
            self.owner_unrecorded = false;
        }
        mutations.push(Mutation::PutOffsets {
            group_id: self.group.group_id().to_owned(),
            offsets: writes.clone(),
        });
        let durable = self.env.store.apply(mutations);
        // Retention must not delete an offset of this group behind this write (the delete would
        // land after it, and the offset would be gone once acknowledged).
        self.commits_in_flight += 1;
        self.group.hold_retention(true);
        let fut = durable.into_actor(self).map(move |result, act, ctx| {
            match result {
                Ok(()) => {
                    crate::metrics::storage_write(submitted.elapsed().as_secs_f64());
                    crate::metrics::offsets_committed(writes.len());
                    act.group.apply_offsets(writes);
                    reply.send(Response::OffsetCommit(response));
                }
                Err(e) => {
                    // The owner did not reach the disk either: the next commit tries again.
                    act.owner_unrecorded |= records_owner;
                    error!(group_id = %logsafe(act.group.group_id()), error = %e, "offset commit not durable");
                    let failed =
                        error_like(&Response::OffsetCommit(response), failed_write_code(&e));
                    reply.send(failed);
                }
            }
            act.commits_in_flight -= 1;
            if act.commits_in_flight == 0 && !act.relinquished {
                act.group.hold_retention(false);
                act.finish(Output::default(), ctx);
            }
            act.stop_if_drained(ctx);
        });
        ctx.spawn(fut);
    }

    /// Carries out what the engine asked for in `out`.
    /// A fresh `Output` per call, not a field reused: an idle group then keeps neither the
    /// vectors' capacity nor the field.
    fn finish(&mut self, out: Output<ReplyTo>, ctx: &mut Context<Self>) {
        let rebalance_event = out.persist || !out.events.is_empty();
        for event in out.events {
            log_event(self.group.group_id(), &event);
        }
        if rebalance_event {
            self.sync_insight();
        }
        if !out.expired_offsets.is_empty() {
            // Nobody waits on this write; a failure only means the offsets come back after a
            // restart and expire again.
            let partitions = out.expired_offsets;
            let durable = self.env.store.apply(vec![Mutation::DeleteOffsets {
                group_id: self.group.group_id().to_owned(),
                partitions,
            }]);
            ctx.spawn(durable.into_actor(self).map(|result, act, _| {
                if let Err(e) = result {
                    error!(group_id = %logsafe(act.group.group_id()), error = %e, "expired offsets not deleted");
                }
            }));
        }
        if out.persist {
            self.persist(out.replies, ctx);
        } else {
            for (to, response) in out.replies {
                to.send(response);
            }
        }
        if let Some(at) = self.group.take_new_deadline() {
            if self.armed.is_none_or(|armed| at < armed) {
                self.armed = Some(at);
                self.env
                    .supervisor
                    .arm_timer
                    .do_send(ArmTimer { key: self.key, at });
            }
        }
        let status = (self.group.state(), self.group.member_count() as u32);
        if status != self.status {
            self.status = status;
            self.env.supervisor.status_changed.do_send(StatusChanged {
                key: self.key,
                state: status.0,
                members: status.1,
            });
        }
    }

    /// Writes the group's record, then sends `replies`. Writes are coalesced: while one is in
    /// flight, later requests share the next one (which snapshots the latest state).
    fn persist(&mut self, replies: Vec<(ReplyTo, Response)>, ctx: &mut Context<Self>) {
        if self.persist_in_flight {
            self.persist_next
                .get_or_insert_with(Vec::new)
                .extend(replies);
            return;
        }
        self.persist_in_flight = true;
        self.owner_unrecorded = false;
        let mut batch = Vec::with_capacity(2);
        if self.group.state() == GroupState::Dead {
            batch.push(Mutation::DeleteGroup {
                group_id: self.group.group_id().to_owned(),
            });
        } else {
            batch.push(Mutation::PutGroup(self.group.to_record()));
            // The journal entries that changed ride in the same batch (protocol §6.20).
            batch.extend(self.group.take_journal_write());
        }
        let durable = self.env.store.apply(batch);
        let fut = durable.into_actor(self).map(move |result, act, ctx| {
            act.persist_in_flight = false;
            match result {
                Ok(()) => {
                    for (to, response) in replies {
                        to.send(response);
                    }
                }
                Err(e)
                    if act.relinquished || failed_write_code(&e) == ErrorCode::NotCoordinator =>
                {
                    // Another node owns the group now: what it holds is the truth, never
                    // reloaded here. The supervisor is told by the ownership loop and
                    // relinquishes the group; until then it answers NOT_COORDINATOR.
                    info!(group_id = %logsafe(act.group.group_id()), error = %e,
                        "group metadata refused: another node coordinates the group now");
                    let next = act.persist_next.take().unwrap_or_default();
                    for (to, response) in replies.into_iter().chain(next) {
                        to.send(error_like(&response, ErrorCode::NotCoordinator));
                    }
                    act.give_up(ctx);
                    return;
                }
                Err(e) => {
                    error!(group_id = %logsafe(act.group.group_id()), error = %e,
                        "group metadata not durable; answering COORDINATOR_NOT_AVAILABLE and \
                         rolling back to the durable record");
                    // The replies waiting for the next write depend on this one's state too.
                    let next = act.persist_next.take().unwrap_or_default();
                    for (to, response) in replies.into_iter().chain(next) {
                        to.send(error_like(&response, ErrorCode::CoordinatorNotAvailable));
                    }
                    act.roll_back(ctx);
                    return;
                }
            }
            if let Some(next) = act.persist_next.take() {
                act.persist(next, ctx);
            } else if act.relinquished {
                act.stop_if_drained(ctx);
            } else if act.group.state() == GroupState::Dead {
                // Removed by retention and now deleted from storage: the supervisor forgets us
                // and requests still addressed here are answered by the drop guard.
                act.env.supervisor.forget.do_send(Forget { key: act.key });
                ctx.stop();
            }
        });
        ctx.spawn(fut);
    }

    /// This node stops coordinating the group: held requests are answered NOT_COORDINATOR,
    /// and so is everything from now on.
    fn give_up(&mut self, ctx: &mut Context<Self>) {
        self.relinquished = true;
        let mut out = Output::default();
        self.group.abort_held(ErrorCode::NotCoordinator, &mut out);
        for (to, response) in out.replies {
            to.send(response);
        }
        self.stop_if_drained(ctx);
    }

    /// Once relinquished and with no write in flight, tells whoever waits and stops.
    fn stop_if_drained(&mut self, ctx: &mut Context<Self>) {
        if !self.relinquished || self.persist_in_flight || self.commits_in_flight > 0 {
            return;
        }
        if self.drained.is_empty() {
            // Given up on its own (a fenced write): the supervisor still routes here until the
            // ownership loop relinquishes the shard, so keep answering NOT_COORDINATOR.
            return;
        }
        for waiter in self.drained.drain(..) {
            let _ = waiter.send(());
        }
        ctx.stop();
    }

    /// A write of the group's record failed: what the engine holds is ahead of disk. Answers
    /// the held requests, then reloads the durable record.
    fn roll_back(&mut self, ctx: &mut Context<Self>) {
        let mut out = Output::default();
        self.group
            .abort_held(ErrorCode::CoordinatorNotAvailable, &mut out);
        for (to, response) in out.replies {
            to.send(response);
        }
        self.reloading = true;
        self.reload(ctx);
    }

    /// Rebuilds the group from what the store holds (as at startup: sessions start afresh),
    /// or tries again shortly while the store is recovering.
    fn reload(&mut self, ctx: &mut Context<Self>) {
        if self.relinquished {
            // Another node has the group now: nothing to reload, only to stop.
            self.reloading = false;
            self.stop_if_drained(ctx);
            return;
        }
        let stored = match self.env.store.load_group(self.group.group_id()) {
            Ok(stored) => stored,
            Err(e) => {
                debug!(group_id = self.group.group_id(), error = %e, "durable record not readable yet");
                ctx.run_later(RELOAD_RETRY, |act, ctx| act.reload(ctx));
                return;
            }
        };
        let now = self.env.clock.now();
        let config = Arc::clone(&self.env.config);
        let mut group = match stored.record {
            Some(record) => Group::restore(record, stored.offsets, config, &self.env.quotas, now),
            None => {
                // Never written: the group is what a new one would be, with its offsets.
                let mut group = Group::new(self.group.group_id().to_owned(), config, now);
                group.apply_offsets(stored.offsets);
                group
            }
        };
        group.restore_journal(stored.journal);
        // The creator is the registry's record of who holds the group's unit: it outlives
        // what the store held.
        group.set_created_by(self.group.created_by().cloned());
        if self.commits_in_flight > 0 {
            group.hold_retention(true);
        }
        self.group = group;
        self.reloading = false;
        // The restored group reports its full next deadline; whatever the supervisor holds for
        // us fires early at worst.
        self.armed = None;
        info!(
            group_id = self.group.group_id(),
            generation = self.group.generation(),
            state = self.group.state().as_str(),
            "group rolled back to its durable record"
        );
        let mut out = Output::default();
        let missed = std::mem::take(&mut self.missed_topics);
        if !missed.is_empty() {
            let cx = Ctx {
                now,
                topics: self.env.catalog.as_ref(),
            };
            self.group.topics_changed(cx, &missed, &mut out);
        }
        self.finish(out, ctx);
    }
}

impl Actor for GroupActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // A restored group may have deadlines (barrier, sessions) from the start.
        ctx.set_mailbox_capacity(1024);
        self.finish(Output::default(), ctx);
        self.sync_insight();
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        // A stopped group is stuck, unowned or rebalancing no more.
        self.show_insight(InsightShown::default());
    }
}

impl Handler<GroupCall> for GroupActor {
    type Result = ();

    fn handle(&mut self, call: GroupCall, ctx: &mut Self::Context) {
        self.handle_call(call, ctx);
    }
}

impl Handler<GroupBatch> for GroupActor {
    type Result = ();

    /// Heartbeats — most of what a busy connection sends — are answered together in one
    /// message to the connection's writer; every other request goes through
    /// [`GroupActor::handle_call`] one by one, in order.
    fn handle(&mut self, mut batch: GroupBatch, ctx: &mut Self::Context) {
        let now = self.env.clock.now();
        // Asked once per batch: a batch is handled in one go, at one instant.
        let serving = self.env.placement.serving(self.shard);
        let calls = batch.take_calls();
        let mut answers = Vec::new();
        for (request, ticket) in calls {
            match request {
                Request::Heartbeat(r) => {
                    answers.push(ticket.answer(self.heartbeat(now, &r, serving)))
                }
                request => {
                    let call = GroupCall {
                        request,
                        reply: ReplyTo::new(Arc::clone(&batch.replies), ticket),
                        client: batch.client.clone(),
                    };
                    self.handle_call(call, ctx);
                }
            }
        }
        match answers.len() {
            0 => {}
            1 => batch.replies.send(answers.swap_remove(0)),
            _ => batch.replies.send_all(answers),
        }
    }
}

/// How a session reaches a group actor without naming it (see [`GroupInbox`]).
impl GroupInbox for Addr<GroupActor> {
    #[allow(clippy::result_large_err)] // as the trait: actix's own `try_send` signature
    fn try_call(&self, call: GroupCall) -> Result<(), SendError<GroupCall>> {
        self.try_send(call)
    }

    fn call(&self, call: GroupCall) {
        self.do_send(call);
    }

    fn try_batch(&self, batch: GroupBatch) -> Result<(), SendError<GroupBatch>> {
        self.try_send(batch)
    }

    fn batch(&self, batch: GroupBatch) {
        self.do_send(batch);
    }

    fn connected(&self) -> bool {
        Addr::connected(self)
    }
}

impl Handler<Tick> for GroupActor {
    type Result = ();

    fn handle(&mut self, _: Tick, ctx: &mut Self::Context) {
        // The supervisor consumed our entry; the tick hands back the full next deadline.
        self.armed = None;
        if self.reloading || self.relinquished || !self.env.placement.serving(self.shard) {
            // The reload arms anew; a relinquished group has nothing left to time; and a node
            // past its lease deadline expires no session (another node may hold the group now:
            // its rebalance here would be a phantom, refused by etcd anyway).
            return;
        }
        let cx = Ctx {
            now: self.env.clock.now(),
            topics: self.env.catalog.as_ref(),
        };
        let mut out = Output::default();
        self.group.tick(cx, &mut out);
        self.finish(out, ctx);
    }
}

impl Handler<Describe> for GroupActor {
    type Result = MessageResult<Describe>;

    fn handle(&mut self, _: Describe, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.group.describe(self.env.clock.now()))
    }
}

impl Handler<Delete> for GroupActor {
    type Result = ResponseActFuture<Self, ErrorCode>;

    fn handle(&mut self, _: Delete, _: &mut Self::Context) -> Self::Result {
        if self.relinquished {
            return Box::pin(actix::fut::ready(ErrorCode::NotCoordinator));
        }
        if self.reloading {
            return Box::pin(actix::fut::ready(ErrorCode::CoordinatorNotAvailable));
        }
        let code = self.group.delete(self.env.clock.now());
        if code != ErrorCode::None {
            return Box::pin(actix::fut::ready(code));
        }
        let durable = self.env.store.apply(vec![Mutation::DeleteGroup {
            group_id: self.group.group_id().to_owned(),
        }]);
        Box::pin(durable.into_actor(self).map(|result, act, ctx| match result {
            Ok(()) => {
                info!(group_id = %logsafe(act.group.group_id()), "group deleted");
                ctx.stop();
                ErrorCode::None
            }
            Err(e) if act.relinquished || failed_write_code(&e) == ErrorCode::NotCoordinator => {
                act.give_up(ctx);
                ErrorCode::NotCoordinator
            }
            Err(e) => {
                error!(group_id = %logsafe(act.group.group_id()), error = %e, "group deletion not durable");
                // The engine already marked the group Dead: back to what is durable.
                act.roll_back(ctx);
                ErrorCode::CoordinatorNotAvailable
            }
        }))
    }
}

impl Handler<TopicsChanged> for GroupActor {
    type Result = ();

    fn handle(&mut self, msg: TopicsChanged, ctx: &mut Self::Context) {
        if self.relinquished {
            return;
        }
        if self.reloading {
            // Applied to the reloaded group instead.
            self.missed_topics.extend(msg.0.iter().cloned());
            return;
        }
        let cx = Ctx {
            now: self.env.clock.now(),
            topics: self.env.catalog.as_ref(),
        };
        let mut out = Output::default();
        self.group.topics_changed(cx, &msg.0, &mut out);
        self.finish(out, ctx);
    }
}

impl Handler<Relinquish> for GroupActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Relinquish, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.drained.push(tx);
        self.give_up(ctx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Handler<AbortHeld> for GroupActor {
    type Result = ();

    fn handle(&mut self, _: AbortHeld, ctx: &mut Self::Context) {
        let mut out = Output::default();
        self.group
            .abort_held(ErrorCode::CoordinatorNotAvailable, &mut out);
        self.finish(out, ctx);
    }
}
