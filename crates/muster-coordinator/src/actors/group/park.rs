//! Parking: a group with nothing but data left ([`Group::is_parkable`]) and no request for
//! `park_after_ms` hands its engine to the supervisor. The supervisor keeps it as a
//! [`Parked`] — plain data in its registry: no task, no mailbox, no address — and starts an
//! actor for it again ([`GroupActor::unparked`]) when a request, a DeleteGroups, a catalog
//! change or its next deadline (retention, the quarantine) needs one. Queries (OffsetFetch,
//! OffsetHistory, DescribeGroups, history, diagnosis, simulation, the dashboard's summary)
//! are answered from the parked group without waking it.
//!
//! Why: the actor is ~1.25 KB of the ~1.6 KB a group costs live (docs/benchmarks.md, "Idle
//! memory"), and a server keeps a group for every consumer group that still has offsets:
//! through the offsets' retention (7 days by default) after its last member left, and for
//! simple consumers that commit without ever joining.
//!
//! The handover loses and reorders no request:
//! 1. the idle group *offers* to park ([`ParkOffer`]) and goes on as before;
//! 2. the supervisor asks for the engine ([`TakeEngine`]) and handles nothing else until the
//!    answer comes, so that TakeEngine is the last thing it ever sends this actor;
//! 3. the actor gives its engine up only if it is still parkable and quiet (a request may
//!    have come between offer and TakeEngine), and from then on *forwards*: whatever a
//!    session that cached its inbox still sends it is re-routed through the supervisor
//!    ([`Route`]), in the order it came, where the parked group answers it or wakes for it.
//!
//! The forwarder stops by itself once no session holds its inbox any more (actix stops an
//! actor whose address is gone and whose mailbox is empty), so nothing can be queued at it
//! and lost. A connection that keeps the inbox cached reaches the group through it (one more
//! hop, via the supervisor) until it drops it: when it closes, or when its cache of group
//! inboxes starts over.
//!
//! What the supervisor keeps of a parked group depends on the store. One that reads a group
//! back cheaply, from a local file or memory ([`Store::reads_one_group_cheaply`]: redb, the
//! memory store), keeps only an index entry ([`StoredIndex`]: one word in the registry's
//! slot) and drops the engine: a parked group's data is all durable (it parks with no write
//! in flight), so waking it, or answering a query about it, reads it back
//! ([`Reader::read_back`]) — what a restart would do, with the two things the store may not
//! hold as the group had them ([`Group::unpark`]). With a store that would cost a network
//! round trip per read (etcd), the engine is kept ([`Parked`]).

use std::sync::Arc;

use actix::prelude::*;
use tracing::debug;

use muster_protocol::{Request, Response};

use super::{GroupActor, GroupBatch, GroupCall, GroupEnv, InsightShown};
use crate::access::ResourceType;
use crate::actors::messages::Route;
use crate::actors::reply::ReplyTo;
use crate::config::GroupConfig;
use crate::engine::{unreadable_topics, ClientInfo, Group, LedgerRequest, Millis, StoredParts};
use crate::logsafe::logsafe;
use crate::storage::{Store, StoreError};

/// A group without an actor, as the supervisor's registry holds it.
pub(crate) struct Parked {
    key: u64,
    group: Group<ReplyTo>,
    /// When it last had a request: an unparked group parks again `park_after_ms` after it.
    quiet_since: Millis,
    /// Its share of the insight gauges (a quarantine size, at most), still shown.
    insight: InsightShown,
}

impl Parked {
    /// The parked engine, for answering queries (it changes nothing).
    pub(crate) fn group(&self) -> &Group<ReplyTo> {
        &self.group
    }

    /// The group is gone for good (removed from the registry): what it showed in the gauges
    /// goes with it, as when an actor stops.
    pub(crate) fn forget(self) {
        if self.insight.quarantined > 0 {
            crate::metrics::quarantine_size(self.key, 0);
        }
    }

    /// Its index entry, the engine dropped (its data is all in the store: it parked with no
    /// write in flight). What it shows in the gauges stays shown.
    pub(crate) fn into_index(self) -> StoredIndex {
        StoredIndex::new(self.group.state_since(), self.insight.quarantined > 0)
    }
}

/// Whether `request` is a query a parked group answers without waking ([`answer_parked`]).
pub(crate) fn is_parked_query(request: &Request) -> bool {
    matches!(request, Request::OffsetFetch(_) | Request::OffsetHistory(_))
}

/// The answer to `request` if it is a query a parked group answers as its actor would,
/// without waking: OffsetFetch and OffsetHistory (so that a lag monitor polling every
/// group's offsets keeps none of them awake). `None`: the request needs the actor.
pub(crate) fn answer_parked(
    group: &Group<ReplyTo>,
    request: &Request,
    client: &ClientInfo,
) -> Option<Response> {
    let answer = match request {
        Request::OffsetFetch(r) => Response::OffsetFetch(group.fetch_offsets(r, &client.access)),
        Request::OffsetHistory(r) => {
            Response::OffsetHistory(group.offset_history(r, &client.access))
        }
        _ => return None,
    };
    crate::metrics::authorization_denials(
        ResourceType::Topic.name(),
        unreadable_topics(request, &client.access),
    );
    Some(answer)
}

/// What the registry keeps of a group parked with its data in the store only, besides what
/// its entry keeps of every group (its id, state and member count — Empty, 0 — and its
/// creator's `max_groups` unit) and its next deadline in the timer queue: one word. The low
/// 63 bits are when it went Empty (its offsets expire `offsets_retention_ms` after the later
/// of that and their commit, and a group of simple commits has no record to keep it in); the
/// top bit says whether it shows a quarantine in the gauges (taken back when it is forgotten).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoredIndex(u64);

/// The top bit of a [`StoredIndex`]: a clock reading in milliseconds never reaches it.
const QUARANTINE_SHOWN: u64 = 1 << 63;

impl StoredIndex {
    pub(crate) fn new(state_since: Millis, quarantine_shown: bool) -> Self {
        let shown = if quarantine_shown {
            QUARANTINE_SHOWN
        } else {
            0
        };
        Self(state_since.min(QUARANTINE_SHOWN - 1) | shown)
    }

    pub(crate) fn state_since(self) -> Millis {
        self.0 & !QUARANTINE_SHOWN
    }

    pub(crate) fn quarantine_shown(self) -> bool {
        self.0 & QUARANTINE_SHOWN != 0
    }

    /// The group `key` is gone for good: what it showed in the gauges goes with it.
    pub(crate) fn forget(self, key: u64) {
        if self.quarantine_shown() {
            crate::metrics::quarantine_size(key, 0);
        }
    }
}

/// Reads parked groups back from the store: to wake one, or to answer a query about one.
pub(crate) struct Reader<'a> {
    pub store: &'a dyn Store,
    pub config: &'a Arc<GroupConfig>,
    pub now: Millis,
}

impl Reader<'_> {
    /// Group `group_id`, parked as `index` by `created_by`, as it was when parked: read from
    /// the store (one group's keys: a few B-tree lookups in redb) and rebuilt as at startup,
    /// with the units its stored members would count (none: it parked with no member).
    pub(crate) fn read_back(
        &self,
        group_id: &str,
        index: StoredIndex,
        created_by: Option<&Arc<str>>,
    ) -> Result<(Group<ReplyTo>, Vec<LedgerRequest>), StoreError> {
        let stored = self.store.load_group(group_id)?;
        let parts = StoredParts {
            record: stored.record,
            offsets: stored.offsets,
            journal: stored.journal,
            history: stored.history,
            quarantine: stored.quarantine,
        };
        Ok(Group::unpark(
            group_id.to_owned(),
            parts,
            index.state_since(),
            created_by.cloned(),
            Arc::clone(self.config),
            self.now,
        ))
    }
}

/// Group → supervisor: I could be parked (idle, nothing but data). The supervisor answers
/// with [`TakeEngine`].
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct ParkOffer {
    pub key: u64,
}

/// Supervisor → group: your engine, if you are still parkable and quiet. The last message
/// the supervisor sends this actor when the answer is `Some`.
#[derive(Message)]
#[rtype(result = "Option<Handover>")]
pub(crate) struct TakeEngine;

/// A group's engine on its way to the supervisor's registry.
pub(crate) struct Handover {
    pub parked: Box<Parked>,
    /// The parked group's next deadline, which the supervisor's timer queue holds for it
    /// (and which wakes it).
    pub next: Option<Millis>,
}

impl GroupActor {
    /// A parked group, loaded from the store (or made) with nothing but data: parked at once,
    /// never given an actor until it is needed.
    /// Shows its quarantine in the gauges, as its actor would when started (a parkable group
    /// is not stuck, has no barrier and, being Empty, no unowned partitions).
    pub(crate) fn parked(key: u64, group: Group<ReplyTo>, now: Millis) -> Box<Parked> {
        let quarantined = group.quarantined_partitions();
        if quarantined > 0 {
            crate::metrics::quarantine_size(key, quarantined);
        }
        Box::new(Parked {
            key,
            group,
            quiet_since: now,
            insight: InsightShown {
                quarantined,
                ..InsightShown::default()
            },
        })
    }

    /// A group loaded from the store with nothing but data, for a store that reads groups
    /// back cheaply: its index entry and next deadline; the engine is dropped. Shows its
    /// quarantine in the gauges, as [`GroupActor::parked`] does.
    pub(crate) fn indexed(key: u64, group: Group<ReplyTo>) -> (StoredIndex, Option<Millis>) {
        let quarantined = group.quarantined_partitions();
        if quarantined > 0 {
            crate::metrics::quarantine_size(key, quarantined);
        }
        let next = group.next_deadline();
        (StoredIndex::new(group.state_since(), quarantined > 0), next)
    }

    /// The actor for a group read back from its index entry ([`Reader::read_back`]). Quiet
    /// since long ago: woken by a deadline (retention, the quarantine), it parks again as soon
    /// as that work is done; woken by a request, the request makes it busy.
    pub(crate) fn woken(key: u64, group: Group<ReplyTo>, env: Arc<GroupEnv>) -> Self {
        let mut actor = Self::new(key, group, env);
        actor.quiet_since = 0;
        actor
    }

    /// The actor for a parked group whose data could not be read back (the store is
    /// failing): it answers COORDINATOR_NOT_AVAILABLE, as any group reloading its durable
    /// record does, and reads it back once the store has recovered (`writes.rs`).
    pub(crate) fn unreadable(
        key: u64,
        group_id: String,
        created_by: Option<Arc<str>>,
        env: Arc<GroupEnv>,
    ) -> Self {
        let mut stand_in = Group::new(group_id, Arc::clone(&env.config), env.clock.now());
        stand_in.set_created_by(created_by);
        let mut actor = Self::new(key, stand_in, env);
        actor.reloading = true;
        actor
    }

    /// The actor for a parked group, as it was when parked.
    pub(crate) fn unparked(parked: Box<Parked>, env: Arc<GroupEnv>) -> Self {
        let Parked {
            key,
            group,
            quiet_since,
            insight,
        } = *parked;
        let mut actor = Self::new(key, group, env);
        actor.quiet_since = quiet_since;
        actor.insight = insight;
        actor
    }

    /// Whether the group could be parked now: parking is on, the engine holds nothing but
    /// data, and the shell waits for nothing (no write or job in flight, no DeleteGroups, no
    /// reload, still coordinated here).
    fn may_park(&self) -> bool {
        self.env.config.park_after_ms > 0
            && !self.forwarding
            && self.jobs == 0
            && self.deletion_waiters.is_empty()
            && !self.reloading
            && !self.relinquished
            && self.drained.is_empty()
            && self.missed_topics.is_empty()
            && self.group.is_parkable()
    }

    /// The end of a turn (a message handled, a write or job done): offers to park if the
    /// group could be and has had no request for `park_after_ms`, or asks to be woken when it
    /// will have had none for that long.
    pub(super) fn settle(&mut self, _: &mut Context<Self>) {
        if !self.may_park() || self.offered {
            return;
        }
        let at = self
            .quiet_since
            .saturating_add(self.env.config.park_after_ms);
        if at > self.env.clock.now() {
            self.arm(at);
            return;
        }
        self.offered = true;
        self.env
            .supervisor
            .park
            .do_send(ParkOffer { key: self.key });
    }

    /// A request that reached the actor after it gave up its engine (a forwarder): re-routed
    /// through the supervisor, behind every earlier one (this actor forwards in arrival order).
    pub(super) fn forward(&self, call: GroupCall) {
        self.env.supervisor.reroute.do_send(Route {
            group_id: self.group.group_id().to_owned(),
            call,
        });
    }

    /// A batch that reached a forwarder: every request of it re-routed, in order.
    pub(super) fn forward_batch(&self, mut batch: GroupBatch) {
        for (request, ticket) in batch.take_calls() {
            self.forward(GroupCall {
                request,
                reply: ReplyTo::new(Arc::clone(&batch.replies), ticket),
                client: batch.client.clone(),
            });
        }
    }
}

impl Handler<TakeEngine> for GroupActor {
    type Result = MessageResult<TakeEngine>;

    fn handle(&mut self, _: TakeEngine, ctx: &mut Self::Context) -> Self::Result {
        self.offered = false;
        let now = self.env.clock.now();
        let quiet = self
            .quiet_since
            .saturating_add(self.env.config.park_after_ms)
            <= now;
        if !self.may_park() || !quiet {
            // Something came between the offer and now: stay, and offer again when idle.
            self.settle(ctx);
            return MessageResult(None);
        }
        // The engine goes to the supervisor; the forwarder keeps an empty stand-in with the
        // group's id (its drop gives back nothing: a parkable group holds no unit).
        let stand_in = Group::new(
            self.group.group_id().to_owned(),
            Arc::clone(&self.env.config),
            now,
        );
        let group = std::mem::replace(&mut self.group, stand_in);
        let next = group.next_deadline();
        debug!(group_id = %logsafe(group.group_id()), "group parked");
        self.forwarding = true;
        self.armed = None;
        let parked = Box::new(Parked {
            key: self.key,
            group,
            quiet_since: self.quiet_since,
            // Still shown while parked: the forwarder must not take it back when it stops.
            insight: std::mem::take(&mut self.insight),
        });
        MessageResult(Some(Handover { parked, next }))
    }
}

/// The handover itself, with the actor alone and a stand-in supervisor that records what it
/// is sent: an offer is withdrawn by a request that comes before TakeEngine; an engine given
/// up leaves a forwarder that re-routes what still reaches it, in order.
#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use muster_protocol::{OffsetFetchRequest, Request};

    use super::*;
    use crate::access::Access;
    use crate::actors::group::SupervisorLink;
    use crate::actors::ledger::Ledger;
    use crate::actors::messages::{ArmTimer, Forget, StatusChanged, Tick};
    use crate::actors::reply::{ticket, Recorded};
    use crate::actors::SingleNode;
    use crate::catalog::TopicCatalog;
    use crate::clock::Clock;
    use crate::config::GroupConfig;
    use crate::quota::Quotas;
    use crate::storage::MemoryStore;

    const PARK_AFTER: u64 = 30;

    /// What the stand-in supervisor was sent: offers, and re-routed requests.
    #[derive(Default)]
    struct Seen {
        offers: usize,
        rerouted: usize,
    }

    struct Shell(Arc<Mutex<Seen>>);

    impl Actor for Shell {
        type Context = Context<Self>;
    }

    impl Handler<ParkOffer> for Shell {
        type Result = ();
        fn handle(&mut self, _: ParkOffer, _: &mut Self::Context) {
            self.0.lock().expect("not poisoned").offers += 1;
        }
    }

    impl Handler<Route> for Shell {
        type Result = Option<(Arc<str>, crate::actors::messages::GroupLink)>;
        fn handle(&mut self, route: Route, _: &mut Self::Context) -> Self::Result {
            self.0.lock().expect("not poisoned").rerouted += 1;
            // Answered here, so that the test sees in what order they came.
            route
                .call
                .reply
                .send(Response::OffsetFetch(Default::default()));
            None
        }
    }

    impl Handler<ArmTimer> for Shell {
        type Result = ();
        fn handle(&mut self, _: ArmTimer, _: &mut Self::Context) {}
    }

    impl Handler<StatusChanged> for Shell {
        type Result = ();
        fn handle(&mut self, _: StatusChanged, _: &mut Self::Context) {}
    }

    impl Handler<Forget> for Shell {
        type Result = ();
        fn handle(&mut self, _: Forget, _: &mut Self::Context) {}
    }

    fn group_actor(seen: &Arc<Mutex<Seen>>) -> Addr<GroupActor> {
        let shell = Shell(Arc::clone(seen)).start();
        let config = Arc::new(GroupConfig {
            park_after_ms: PARK_AFTER,
            ..GroupConfig::default()
        });
        let clock = Clock::new();
        let env = Arc::new(GroupEnv {
            store: Arc::new(MemoryStore::new()),
            config: Arc::clone(&config),
            catalog: Arc::new(TopicCatalog::new(Vec::new())),
            clock,
            ledger: Ledger::new(Quotas::default(), config.limits.max_pending_member_ids),
            placement: Arc::new(SingleNode),
            supervisor: SupervisorLink {
                arm_timer: shell.clone().recipient(),
                status_changed: shell.clone().recipient(),
                forget: shell.clone().recipient(),
                park: shell.clone().recipient(),
                reroute: shell.recipient(),
            },
        });
        let group = Group::new("g".to_owned(), config, clock.now());
        GroupActor::new(0, group, env).start()
    }

    fn fetch(id: u32, sink: &Arc<Recorded>) -> GroupCall {
        GroupCall {
            request: Request::OffsetFetch(OffsetFetchRequest {
                group_id: "g".into(),
                topics: None,
            }),
            reply: ReplyTo::new(sink.clone(), ticket(id)),
            client: ClientInfo {
                client_id: "c".into(),
                client_host: "h".into(),
                access: Access::open(),
            },
        }
    }

    /// Waits (a few milliseconds at a time, at most 5 s) until `done`.
    async fn until(mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < deadline, "not within 5 s");
            actix::clock::sleep(Duration::from_millis(2)).await;
        }
    }

    #[test]
    fn a_request_before_take_engine_withdraws_the_offer_and_a_forwarder_reroutes_in_order() {
        System::new().block_on(async {
            let seen = Arc::new(Mutex::new(Seen::default()));
            let actor = group_actor(&seen);
            let sink = Arc::new(Recorded::default());
            let offers = || seen.lock().expect("not poisoned").offers;
            // It offers once quiet for `park_after_ms`, at the wake-up it armed (the stand-in
            // supervisor keeps no timers: the test ticks it).
            let quiet = Duration::from_millis(PARK_AFTER + 5);
            actor.do_send(fetch(1, &sink));
            actix::clock::sleep(quiet).await;
            actor.do_send(Tick);
            until(|| offers() == 1).await;
            // A request between the offer and TakeEngine: answered by the group, which
            // keeps its engine and offers again once quiet.
            actor.do_send(fetch(2, &sink));
            let taken = actor.send(TakeEngine).await.expect("the actor runs");
            assert!(taken.is_none(), "not quiet: the engine stays");
            assert_eq!(sink.sends.lock().expect("not poisoned").len(), 2);
            actix::clock::sleep(quiet).await;
            actor.do_send(Tick);
            until(|| offers() == 2).await;
            let taken = actor.send(TakeEngine).await.expect("the actor runs");
            let handover = taken.expect("quiet and parkable: the engine is handed over");
            assert_eq!(handover.parked.group().group_id(), "g");
            // From now on, everything is re-routed, in the order it came.
            for id in 3..9 {
                actor.do_send(fetch(id, &sink));
            }
            until(|| seen.lock().expect("not poisoned").rerouted == 6).await;
            let answered: Vec<u32> = sink
                .sends
                .lock()
                .expect("not poisoned")
                .iter()
                .flatten()
                .map(|a| a.ticket.correlation_id)
                .collect();
            assert_eq!(answered, (1..9).collect::<Vec<_>>());
            assert_eq!(offers(), 2, "a forwarder never offers");
        });
    }
}
