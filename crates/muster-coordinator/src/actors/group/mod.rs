//! One consumer group as an actor: a thin shell that hands each message and the current time
//! to its [`Group`] engine and carries out the [`Effects`] that come back (`carry_out`):
//! replies, durable writes (`writes.rs`), units of the server's counters (`ledger.rs`), timer
//! requests to the supervisor, status updates and operator logs (`log.rs`).
//!
//! In-memory state never runs ahead of disk for long: when a write of the group's record
//! fails, every request that waited on it (and every held JoinGroup/SyncGroup) is answered
//! COORDINATOR_NOT_AVAILABLE and the group reloads what is durable ([`Store::load_group`]),
//! retrying until the store has recovered; meanwhile it answers COORDINATOR_NOT_AVAILABLE to
//! everything, so nothing acts on the generation that was never written. The last durable
//! record is read back rather than kept: an idle group holds no second copy of itself.

use std::sync::Arc;

use actix::prelude::*;
use muster_protocol::error_answers::error_for;
use muster_protocol::{ErrorCode, HeartbeatRequest, HeartbeatResponse, Request, Response};
use tracing::{info, warn};
use uuid::Uuid;

use super::ledger::Ledger;
use super::messages::{
    AbortHeld, ArmTimer, Delete, Describe, DescribeConsumer, Forget, GroupBatch, GroupCall,
    GroupInbox, Relinquish, Simulate, StatusChanged, Tick, TopicsChanged,
};
use super::reply::{send_grouped, ReplyTo};

mod assign;
mod insight;
mod log;
mod park;
mod writes;

pub(crate) use self::insight::summarize;
pub(crate) use self::park::{
    answer_parked, is_parked_query, Handover, ParkOffer, Parked, Reader, StoredIndex, TakeEngine,
};

use self::writes::Waiter;

use self::log::log_event;
use crate::access::ResourceType;
use crate::catalog::TopicCatalog;
use crate::clock::Clock;
use crate::config::GroupConfig;
use crate::engine::{unreadable_topics, Ctx, Effects, Group, GroupState, Millis, Write};
use crate::logsafe::logsafe;
use crate::storage::Store;

/// What every group actor shares.
pub(crate) struct GroupEnv {
    pub store: Arc<dyn Store>,
    /// For rebuilding a group from its durable record after a failed write.
    pub config: Arc<GroupConfig>,
    pub catalog: Arc<TopicCatalog>,
    pub clock: Clock,
    /// The server's pending-id budget and principals' member quotas, which engines draw on.
    pub ledger: Ledger,
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
    pub park: Recipient<ParkOffer>,
    /// Where a parked group's forwarder re-routes what still reaches it (`park.rs`).
    pub reroute: Recipient<super::messages::Route>,
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
    /// DeleteGroups waiting for the group's deletion to be durable (`writes.rs`).
    deletion_waiters: Vec<Waiter>,
    status: (GroupState, u32),
    /// A write of the group's record failed and the durable record is not reloaded yet.
    reloading: bool,
    /// Topics whose partition count changed while reloading (rare; empty otherwise).
    missed_topics: Vec<String>,
    /// Cluster mode: this node no longer coordinates the group (its shard was given away or
    /// taken over). Everything is answered NOT_COORDINATOR; nothing is written any more.
    relinquished: bool,
    /// Who waits for the writes in flight to finish before the actor stops ([`Relinquish`]).
    drained: Vec<tokio::sync::oneshot::Sender<()>>,
    /// Best-effort writes (expired offsets, quarantine, held-back history) not finished yet:
    /// a relinquished group waits for them too, so a handover loses none of its history.
    best_effort_in_flight: usize,
    /// Offset writes in flight, told to the engine in submission order (`writes.rs`).
    commits: writes::CommitQueue,
    /// What this group last told the rebalance-insight metrics (`sync_insight`).
    insight: InsightShown,
    /// When the group last had a request (`park.rs`: it parks `park_after_ms` after).
    quiet_since: Millis,
    /// Futures spawned on the actor's context and not yet done (writes, assignment jobs): a
    /// group parks only with none, as their outcome comes back to it.
    jobs: u32,
    /// A [`ParkOffer`] is with the supervisor, not answered yet (`park.rs`).
    offered: bool,
    /// The engine went to the supervisor (parked): `group` is an empty stand-in, and the
    /// actor only forwards what sessions that cached its inbox still send (`park.rs`). The
    /// supervisor sends it nothing any more, so only GroupCall and GroupBatch reach it.
    forwarding: bool,
}

/// The group's share of the insight gauges (groups stuck, groups with unowned partitions,
/// open barriers), as last reported: changes are reported as they happen, and taken back
/// when the actor stops.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct InsightShown {
    stuck: bool,
    unowned: bool,
    barrier_since: Option<Millis>,
    /// Partitions in the expiry quarantine.
    quarantined: usize,
}

impl GroupActor {
    pub(crate) fn new(key: u64, group: Group<ReplyTo>, env: Arc<GroupEnv>) -> Self {
        let status = (group.state(), group.member_count() as u32);
        let shard = env.placement.shard_of(group.group_id());
        let quiet_since = env.clock.now();
        Self {
            key,
            shard,
            group,
            env,
            armed: None,
            deletion_waiters: Vec::new(),
            status,
            reloading: false,
            missed_topics: Vec::new(),
            relinquished: false,
            drained: Vec::new(),
            best_effort_in_flight: 0,
            commits: writes::CommitQueue::default(),
            insight: InsightShown::default(),
            quiet_since,
            jobs: 0,
            offered: false,
            forwarding: false,
        }
    }

    /// Reports changes of the group's insight gauges. Called only after calls that emitted
    /// events or changed the record (rebalance events): never after a plain heartbeat.
    fn sync_insight(&mut self) {
        let shown = InsightShown {
            stuck: self.group.is_stuck(),
            unowned: self.group.unowned_partition_count() > 0,
            barrier_since: self.group.barrier_started_at(),
            quarantined: self.group.quarantined_partitions(),
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
        if shown.quarantined != was.quarantined {
            crate::metrics::quarantine_size(self.key, shown.quarantined);
        }
        self.insight = shown;
    }

    /// Every request but a heartbeat: one engine call, then its effects carried out.
    fn handle_call(&mut self, call: GroupCall, ctx: &mut Context<Self>) {
        let now = self.env.clock.now();
        self.quiet_since = now;
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
        crate::metrics::authorization_denials(
            ResourceType::Topic.name(),
            unreadable_topics(&request, &client.access),
        );
        if let Request::Heartbeat(r) = &request {
            // The hot path: answered at once, no allocation, no timer work.
            reply.send(self.heartbeat(now, r, serving));
            return;
        }
        // Borrows the catalog beside `self.group` (disjoint fields): no reference-count
        // traffic on the shared `Arc` per request.
        let env = &self.env;
        let cx = Ctx {
            now,
            topics: env.catalog.as_ref(),
        };
        let effects = match request {
            Request::JoinGroup(r) => {
                let grants = env.ledger.reserve_for_join(&self.group, &r, &client);
                self.group
                    .join(cx, r, &client, Uuid::new_v4(), grants, reply)
            }
            Request::ConsumerGroupHeartbeat(r) => {
                let unit = env.ledger.reserve_member_unit(
                    self.group.consumer_join_needs_unit(&r, &client),
                    &client.access,
                );
                self.group
                    .consumer_heartbeat(cx, r, &client, unit, Uuid::new_v4(), reply)
            }
            Request::SyncGroup(r) => self.group.sync(cx, r, reply),
            Request::LeaveGroup(r) => self.group.leave(cx, r, reply),
            Request::OffsetCommit(r) => self.group.commit_offsets(now, r, &client, reply),
            Request::OffsetFetch(r) => {
                // A query: it changes nothing.
                let fetched = self.group.fetch_offsets(&r, &client.access);
                reply.send(Response::OffsetFetch(fetched));
                return;
            }
            Request::OwnershipEpochs(r) => {
                // A query (the member is heard from, which only pushes deadlines later).
                let epochs = self.group.ownership_epochs(now, &r);
                reply.send(Response::OwnershipEpochs(epochs));
                return;
            }
            Request::OffsetHistory(r) => {
                let history = self.group.offset_history(&r, &client.access);
                reply.send(Response::OffsetHistory(history));
                return;
            }
            Request::OffsetReset(r) => self.group.reset_offsets(now, r, &client, reply),
            Request::OffsetRestore(r) => self.group.restore_offsets(now, r, &client, reply),
            // Heartbeats were answered above.
            other => {
                reply.send(Response::error(
                    ErrorCode::InvalidRequest,
                    format!("{} is not a group request", other.name()),
                ));
                return;
            }
        };
        self.carry_out(effects, ctx);
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

    /// Carries out what the engine asked for, in the order [`Effects`] gives.
    fn carry_out(&mut self, effects: Effects<ReplyTo>, ctx: &mut Context<Self>) {
        let changed = effects.changed_group();
        let Effects {
            replies,
            writes,
            deadline,
            events,
            ledger,
            assignment,
            ..
        } = effects;
        for event in &events {
            log_event(self.group.group_id(), event);
        }
        if changed {
            self.sync_insight();
        }
        self.env.ledger.apply(ledger);
        send_grouped(replies);
        for write in writes {
            match write {
                Write::Record { batch, replies } => self.write_record(batch, replies, ctx),
                Write::Commit { batch, commit } => self.write_commit(batch, commit, ctx),
                Write::BestEffort(batch) => self.write_best_effort(batch, ctx),
            }
        }
        if let Some(job) = assignment {
            self.compute_target(job, ctx);
        }
        if let Some(at) = deadline {
            self.arm(at);
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

    /// Asks the supervisor for a wake-up at `at`, unless one at or before it is held.
    fn arm(&mut self, at: Millis) {
        if self.armed.is_none_or(|armed| at < armed) {
            self.armed = Some(at);
            self.env
                .supervisor
                .arm_timer
                .do_send(ArmTimer { key: self.key, at });
        }
    }
}

impl Actor for GroupActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // A restored group may have deadlines (barrier, sessions) from the start.
        ctx.set_mailbox_capacity(1024);
        if self.reloading {
            // A parked group whose data could not be read back (`park.rs`): read it now, or
            // once the store has recovered.
            self.reload(ctx);
            return;
        }
        if let Some(at) = self.group.next_deadline() {
            self.arm(at);
        }
        self.sync_insight();
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        // A stopped group is stuck, unowned or rebalancing no more.
        self.show_insight(InsightShown::default());
    }
}

/// Whatever way the group goes (stopped, dropped, or a handler unwinding), the units its
/// members and pending ids hold go back to the server's counters. A second call returns
/// nothing.
impl Drop for GroupActor {
    fn drop(&mut self) {
        self.env.ledger.apply(self.group.release_all());
    }
}

impl Handler<GroupCall> for GroupActor {
    type Result = ();

    fn handle(&mut self, call: GroupCall, ctx: &mut Self::Context) {
        if self.forwarding {
            return self.forward(call);
        }
        self.handle_call(call, ctx);
        self.settle(ctx);
    }
}

impl Handler<GroupBatch> for GroupActor {
    type Result = ();

    /// Heartbeats — most of what a busy connection sends — are answered together in one
    /// message to the connection's writer; every other request goes through
    /// [`GroupActor::handle_call`] one by one, in order.
    fn handle(&mut self, mut batch: GroupBatch, ctx: &mut Self::Context) {
        if self.forwarding {
            return self.forward_batch(batch);
        }
        let now = self.env.clock.now();
        self.quiet_since = now;
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
        self.settle(ctx);
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
        if self.forwarding
            || self.reloading
            || self.relinquished
            || !self.env.placement.serving(self.shard)
        {
            // The reload arms anew; a relinquished group has nothing left to time; and a node
            // past its lease deadline expires no session (another node may hold the group now:
            // its rebalance here would be a phantom, refused by etcd anyway).
            return;
        }
        let cx = Ctx {
            now: self.env.clock.now(),
            topics: self.env.catalog.as_ref(),
        };
        let effects = self.group.tick(cx);
        self.carry_out(effects, ctx);
        self.settle(ctx);
    }
}

impl Handler<Describe> for GroupActor {
    type Result = MessageResult<Describe>;

    fn handle(&mut self, _: Describe, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.group.describe(self.env.clock.now()))
    }
}

impl Handler<DescribeConsumer> for GroupActor {
    type Result = MessageResult<DescribeConsumer>;

    fn handle(&mut self, _: DescribeConsumer, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.group.describe_consumer())
    }
}

impl Handler<Simulate> for GroupActor {
    type Result = MessageResult<Simulate>;

    fn handle(&mut self, Simulate(request): Simulate, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.group.simulate(&request, self.env.catalog.as_ref()))
    }
}

impl Handler<Delete> for GroupActor {
    /// Not tied to the actor: the group's actor stops once the deletion is durable, and the
    /// answer must still reach the supervisor.
    type Result = ResponseFuture<ErrorCode>;

    fn handle(&mut self, _: Delete, ctx: &mut Self::Context) -> Self::Result {
        // A forwarder has no group to delete (the supervisor sends it nothing: retriable).
        if self.forwarding {
            return Box::pin(std::future::ready(ErrorCode::CoordinatorNotAvailable));
        }
        if self.relinquished {
            return Box::pin(std::future::ready(ErrorCode::NotCoordinator));
        }
        if self.reloading {
            return Box::pin(std::future::ready(ErrorCode::CoordinatorNotAvailable));
        }
        let effects = match self.group.delete(self.env.clock.now()) {
            Ok(effects) => effects,
            Err(code) => return Box::pin(std::future::ready(code)),
        };
        // The deletion is a record write in the group's order: answered once it is durable.
        let (done, outcome) = tokio::sync::oneshot::channel();
        self.deletion_waiters.push(done);
        self.carry_out(effects, ctx);
        let group_id = logsafe(self.group.group_id()).to_string();
        Box::pin(async move {
            let code = outcome.await.unwrap_or(ErrorCode::CoordinatorNotAvailable);
            if code == ErrorCode::None {
                info!(%group_id, "group deleted");
            }
            code
        })
    }
}

impl Handler<TopicsChanged> for GroupActor {
    type Result = ();

    fn handle(&mut self, msg: TopicsChanged, ctx: &mut Self::Context) {
        if self.relinquished || self.forwarding {
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
        let effects = self.group.topics_changed(cx, &msg.0);
        self.carry_out(effects, ctx);
        self.settle(ctx);
    }
}

impl Handler<Relinquish> for GroupActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Relinquish, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.drained.push(tx);
        // The history held back for `offset_history_flush_ms` is written while the shard is
        // still this node's (the drain waits for it): its next owner loads it.
        if !self.relinquished {
            let effects = self.group.write_held_history();
            self.carry_out(effects, ctx);
        }
        self.give_up(ctx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Handler<AbortHeld> for GroupActor {
    type Result = ();

    fn handle(&mut self, _: AbortHeld, ctx: &mut Self::Context) {
        let effects = self.group.abort_held(ErrorCode::CoordinatorNotAvailable);
        self.carry_out(effects, ctx);
        // The server is stopping: the history held back for `offset_history_flush_ms` is
        // queued now, before the store closes (which writes everything queued).
        if !self.relinquished {
            let effects = self.group.write_held_history();
            self.carry_out(effects, ctx);
        }
    }
}
