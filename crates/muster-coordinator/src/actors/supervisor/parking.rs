//! Parked groups (`group/park.rs`): a group actor that offers to park is asked for its
//! engine, and the registry keeps it — as an index entry with the data in the store only, or,
//! with a store that cannot read one group back cheaply, as data; whatever needs an actor
//! again — a request routed here, a deadline in the timer queue, a DeleteGroups — gets one
//! started for it ([`Supervisor::reach`]), with the group read back from the store if need
//! be. Queries are answered from the parked group where they are made (`Entry::ask`).

use std::sync::Arc;

use actix::prelude::*;

use super::Supervisor;
use tracing::warn;

use crate::actors::group::{GroupActor, Handover, ParkOffer, TakeEngine};
use crate::actors::registry::Home;
use crate::logsafe::logsafe;

impl Supervisor {
    /// The actor of group `key`, started for it if the group is parked (on the next arbiter,
    /// as the group was, with everything it was parked with). `None`: no such group.
    pub(super) fn reach(
        &mut self,
        key: u64,
        ctx: &mut Context<Self>,
    ) -> Option<Arc<Addr<GroupActor>>> {
        if let Some(addr) = self.groups.get(key)?.home.live() {
            return Some(Arc::clone(addr));
        }
        let env = self.env(ctx);
        let arbiter = self.next_arbiter();
        let now = self.clock.now();
        let entry = self.groups.get_mut(key)?;
        let (addr, woke) = match std::mem::replace(&mut entry.home, Home::Live(dangling())) {
            Home::Parked(parked) => {
                let make = move |_: &mut Context<GroupActor>| GroupActor::unparked(parked, env);
                (Arc::new(start(arbiter, make)), true)
            }
            Home::Stored(index) => {
                let reader = crate::actors::group::Reader {
                    store: &*self.store,
                    config: &self.config,
                    now,
                };
                let created_by = entry.created_by().cloned();
                let addr = match reader.read_back(&entry.group_id, index, created_by.as_ref()) {
                    Ok((group, counted)) => {
                        env.ledger.apply(counted);
                        start(arbiter, move |_| GroupActor::woken(key, group, env))
                    }
                    Err(e) => {
                        warn!(group_id = %logsafe(&entry.group_id), error = %e, "a parked group could not be read back; it will be once the store recovers");
                        let group_id = entry.group_id.to_string();
                        start(arbiter, move |_| {
                            GroupActor::unreadable(key, group_id, created_by, env)
                        })
                    }
                };
                (Arc::new(addr), true)
            }
            Home::Live(addr) => (addr, false),
        };
        entry.home = Home::Live(Arc::clone(&addr));
        if woke {
            self.parked = self.parked.saturating_sub(1);
            crate::metrics::groups_parked(self.parked);
        }
        Some(addr)
    }

    /// The arbiter the next group actor starts on (round-robin; `None`: this one's).
    pub(super) fn next_arbiter(&mut self) -> Option<ArbiterHandle> {
        if self.arbiters.is_empty() {
            return None;
        }
        let arbiter = self.arbiters[self.next_arbiter % self.arbiters.len()].clone();
        self.next_arbiter = self.next_arbiter.wrapping_add(1);
        Some(arbiter)
    }

    /// Counts a group registered parked.
    pub(super) fn count_parked(&mut self) {
        self.parked += 1;
        crate::metrics::groups_parked(self.parked);
    }
}

/// Starts a group actor on `arbiter` (or the current one).
pub(super) fn start(
    arbiter: Option<ArbiterHandle>,
    make: impl FnOnce(&mut Context<GroupActor>) -> GroupActor + Send + 'static,
) -> Addr<GroupActor> {
    match arbiter {
        Some(arbiter) => GroupActor::start_in_arbiter(&arbiter, make),
        None => GroupActor::create(make),
    }
}

/// A placeholder address for the instant an entry's home is swapped (never sent to).
fn dangling() -> Arc<Addr<GroupActor>> {
    let (tx, _) = actix::dev::channel::channel(0);
    Arc::new(Addr::new(tx))
}

impl Handler<ParkOffer> for Supervisor {
    type Result = ();

    fn handle(&mut self, ParkOffer { key }: ParkOffer, ctx: &mut Self::Context) {
        let Some(addr) = self.groups.get(key).and_then(|e| e.home.live()).cloned() else {
            return;
        };
        // `wait`: nothing else is handled (and so nothing else sent to the group) until the
        // actor answers, so TakeEngine is the last message it gets from here if it gives its
        // engine up; after that only sessions that cached its inbox reach it, and it forwards
        // what they send back here, in order. A round trip to one actor per group parked.
        ctx.wait(
            addr.send(TakeEngine)
                .into_actor(self)
                .map(move |taken, act, ctx| {
                    if let Ok(Some(handover)) = taken {
                        act.keep_parked(key, handover, ctx);
                    }
                }),
        );
    }
}

impl Supervisor {
    /// Keeps the engine handed over by group `key`'s actor as its parked group.
    fn keep_parked(&mut self, key: u64, handover: Handover, ctx: &mut Context<Self>) {
        let Handover { parked, next } = handover;
        let Some(entry) = self.groups.get_mut(key) else {
            // Forgotten meanwhile (its shard given away): nothing to keep.
            parked.forget();
            return;
        };
        if !matches!(entry.home, Home::Live(_)) {
            return;
        }
        // With a store that reads it back cheaply, only its index entry stays (its data is
        // all durable: it parked with no write in flight).
        entry.home = if self.store.reads_one_group_cheaply() {
            Home::Stored(parked.into_index())
        } else {
            Home::Parked(parked)
        };
        self.count_parked();
        // The queue holds exactly the parked group's next deadline: whatever the actor had
        // armed (its park check among them) is replaced.
        self.timers.disarm(key);
        if let Some(at) = next {
            self.timers.arm(key, at);
        }
        self.reschedule(ctx);
    }
}

/// The real supervisor and group actors on one arbiter, with a memory store: a group parks
/// (its actor stops), is described while parked, and wakes for a request, a deadline or a
/// deletion. Time is real but short (`park_after_ms` of a few tens of milliseconds).
#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use muster_protocol::{
        DeleteGroupsRequest, DescribeGroupsRequest, OffsetCommitPartition, OffsetCommitRequest,
        OffsetCommitTopic, OffsetFetchRequest, Request, Response, TopicInfo,
    };

    use super::*;
    use crate::access::Access;
    use crate::actors::messages::{AdminCall, GroupBatch, GroupCall, GroupLink, Route};
    use crate::actors::reply::{ticket, Recorded, ReplyTo};
    use crate::actors::{SingleNode, SupervisorOptions};
    use crate::clock::Clock;
    use crate::config::GroupConfig;
    use crate::engine::{ClientInfo, Millis};
    use crate::quota::Quotas;
    use crate::storage::records::{CommittedOffset, OffsetWrite};
    use crate::storage::{
        Durable, MemoryStore, Mutation, ParkedSummary, Store, StoreError, StoredGroup, StoredState,
    };

    /// Test → supervisor: (groups parked, groups registered).
    #[derive(Message)]
    #[rtype(result = "(usize, usize)")]
    struct Peek;

    /// Test → supervisor: (groups parked as an index entry, groups parked with their engine).
    #[derive(Message)]
    #[rtype(result = "(usize, usize)")]
    struct Kinds;

    impl Handler<Kinds> for Supervisor {
        type Result = MessageResult<Kinds>;

        fn handle(&mut self, _: Kinds, _: &mut Self::Context) -> Self::Result {
            let count = |f: fn(&Home) -> bool| self.groups.values().filter(|e| f(&e.home)).count();
            MessageResult((
                count(|h| matches!(h, Home::Stored(_))),
                count(|h| matches!(h, Home::Parked(_))),
            ))
        }
    }

    /// A store that says reading one group back is not cheap (as etcd's, a network round
    /// trip): parked groups keep their engine.
    struct Remote(MemoryStore);

    impl Store for Remote {
        fn load(&self) -> Result<StoredState, StoreError> {
            self.0.load()
        }
        fn apply(&self, batch: Vec<Mutation>) -> Durable {
            self.0.apply(batch)
        }
        fn load_group(&self, group_id: &str) -> Result<StoredGroup, StoreError> {
            self.0.load_group(group_id)
        }
    }

    impl Handler<Peek> for Supervisor {
        type Result = MessageResult<Peek>;

        fn handle(&mut self, _: Peek, _: &mut Self::Context) -> Self::Result {
            let parked = self.groups.values().filter(|e| e.home.is_parked()).count();
            assert_eq!(
                parked, self.parked,
                "the gauge counts what the registry holds"
            );
            MessageResult((parked, self.groups.len()))
        }
    }

    const PARK_AFTER: u64 = 40;

    fn config() -> GroupConfig {
        GroupConfig {
            park_after_ms: PARK_AFTER,
            ..GroupConfig::default()
        }
    }

    fn start(config: GroupConfig, initial: StoredState) -> Addr<Supervisor> {
        start_on(Arc::new(MemoryStore::new()), config, initial)
    }

    fn start_on(
        store: Arc<dyn Store>,
        config: GroupConfig,
        initial: StoredState,
    ) -> Addr<Supervisor> {
        start_loaded(store, config, initial, Vec::new())
    }

    /// A supervisor started on `store` with `initial` and the summaries `parked`.
    fn start_loaded(
        store: Arc<dyn Store>,
        config: GroupConfig,
        initial: StoredState,
        parked: Vec<ParkedSummary>,
    ) -> Addr<Supervisor> {
        Supervisor::new(SupervisorOptions {
            config,
            store,
            arbiters: Vec::new(),
            placement: Arc::new(SingleNode),
            parked,
            initial: StoredState {
                topics: vec![TopicInfo {
                    topic: "t".into(),
                    partitions: 1,
                }],
                ..initial
            },
            clock: Clock::new(),
            quotas: Quotas::default(),
        })
        .start()
    }

    fn client() -> ClientInfo {
        ClientInfo {
            client_id: "c".into(),
            client_host: "h".into(),
            access: Access::open(),
        }
    }

    fn commit(offset: i64) -> Request {
        Request::OffsetCommit(OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: vec![OffsetCommitTopic {
                topic: "t".into(),
                partitions: vec![OffsetCommitPartition {
                    partition: 0,
                    offset,
                    metadata: None,
                }],
            }],
        })
    }

    fn fetch() -> Request {
        Request::OffsetFetch(OffsetFetchRequest {
            group_id: "g".into(),
            topics: None,
        })
    }

    /// Sends `request` for group "g" through the supervisor (as a session's first request)
    /// and waits for its answer.
    async fn route(sup: &Addr<Supervisor>, request: Request) -> (Response, Option<GroupLink>) {
        let sink = Arc::new(Recorded::default());
        let call = GroupCall {
            request,
            reply: ReplyTo::new(sink.clone(), ticket(1)),
            client: client(),
        };
        let route = Route {
            group_id: "g".into(),
            call,
        };
        let link = sup
            .send(route)
            .await
            .expect("supervisor runs")
            .map(|(_, l)| l);
        (answer(&sink).await, link)
    }

    async fn admin(sup: &Addr<Supervisor>, request: Request) -> Response {
        let sink = Arc::new(Recorded::default());
        sup.send(AdminCall {
            request,
            reply: ReplyTo::new(sink.clone(), ticket(1)),
            access: Access::open(),
        })
        .await
        .expect("supervisor runs");
        answer(&sink).await
    }

    async fn answer(sink: &Recorded) -> Response {
        until(|| !sink.sends.lock().expect("not poisoned").is_empty()).await;
        let sends = sink.sends.lock().expect("not poisoned");
        sends[0][0].response.clone()
    }

    /// Waits (a few milliseconds at a time, at most 5 s) until `done`.
    async fn until(mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < deadline, "not within 5 s");
            actix::clock::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn parked_within(sup: &Addr<Supervisor>, parked: usize) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while sup.send(Peek).await.expect("supervisor runs").0 != parked {
            assert!(Instant::now() < deadline, "{parked} parked not within 5 s");
            actix::clock::sleep(Duration::from_millis(5)).await;
        }
    }

    fn fetched_offset(response: &Response) -> i64 {
        match response {
            Response::OffsetFetch(r) => r.topics[0].partitions[0].offset,
            other => panic!("not an OffsetFetch answer: {other:?}"),
        }
    }

    fn stored_offsets(offset: i64, at: Millis) -> StoredState {
        StoredState {
            offsets: vec![(
                "g".into(),
                vec![OffsetWrite {
                    topic: "t".into(),
                    partition: 0,
                    committed: CommittedOffset {
                        offset,
                        metadata: None,
                        commit_timestamp_ms: at,
                    },
                }],
            )],
            ..StoredState::default()
        }
    }

    #[test]
    fn an_idle_group_parks_is_described_parked_and_wakes_for_a_request() {
        // With a local store, only its index entry is kept; with a remote one, its engine.
        park_describe_and_wake(Arc::new(MemoryStore::new()), (1, 0));
        park_describe_and_wake(Arc::new(Remote(MemoryStore::new())), (0, 1));
    }

    fn park_describe_and_wake(store: Arc<dyn Store>, kinds: (usize, usize)) {
        System::new().block_on(async {
            let sup = start_on(store, config(), StoredState::default());
            let (committed, link) = route(&sup, commit(42)).await;
            assert_eq!(committed.error_code(), 0, "{committed:?}");
            let link = link.expect("the group's inbox");
            assert!(link.connected());
            parked_within(&sup, 1).await;
            // Its engine is gone; the inbox a session holds now reaches a forwarder, which
            // stops once that inbox is dropped.
            assert!(link.connected());
            drop(link);
            // Described from the parked group, which stays parked.
            let described = admin(
                &sup,
                Request::DescribeGroups(DescribeGroupsRequest {
                    group_ids: vec!["g".into()],
                }),
            )
            .await;
            let Response::DescribeGroups(d) = described else {
                panic!("not a DescribeGroups answer: {described:?}");
            };
            assert_eq!(d.groups[0].state, "Empty");
            assert_eq!(d.groups[0].error_code, 0);
            assert_eq!(sup.send(Peek).await.expect("runs"), (1, 1));
            assert_eq!(sup.send(Kinds).await.expect("runs"), kinds);
            // Its offsets are fetched parked (no inbox handed out: the next request comes to
            // the supervisor again).
            let (fetched, link) = route(&sup, fetch()).await;
            assert_eq!(fetched_offset(&fetched), 42);
            assert!(link.is_none());
            assert_eq!(sup.send(Peek).await.expect("runs"), (1, 1));
            // A commit wakes it, with everything it had.
            let (committed, link) = route(&sup, commit(43)).await;
            assert_eq!(committed.error_code(), 0, "{committed:?}");
            assert!(link.expect("a new inbox").connected());
            assert_eq!(sup.send(Peek).await.expect("runs"), (0, 1));
            let (fetched, _) = route(&sup, fetch()).await;
            assert_eq!(fetched_offset(&fetched), 43);
            // And it parks again once idle.
            parked_within(&sup, 1).await;
        });
    }

    /// Sends requests `ids` through a session's cached `link`, without waiting: an
    /// OffsetCommit (of offset `id`) for an odd id, an OffsetFetch for an even one; alternately
    /// alone and in batches of three, as a session sends them. Returns their sink.
    fn send_through(link: &GroupLink, ids: std::ops::Range<u32>) -> Arc<Recorded> {
        let request = |id: u32| {
            if id % 2 == 1 {
                commit(i64::from(id))
            } else {
                fetch()
            }
        };
        let sink = Arc::new(Recorded::default());
        let mut ids = ids.peekable();
        let mut alone = true;
        while let Some(first) = ids.next() {
            if alone {
                link.call(GroupCall {
                    request: request(first),
                    reply: ReplyTo::new(sink.clone(), ticket(first)),
                    client: client(),
                });
            } else {
                let mut calls = vec![(request(first), ticket(first))];
                while calls.len() < 3 {
                    let Some(next) = ids.next() else { break };
                    calls.push((request(next), ticket(next)));
                }
                link.batch(GroupBatch {
                    replies: sink.clone(),
                    client: client(),
                    calls,
                });
            }
            alone = !alone;
        }
        sink
    }

    /// Waits for `count` answers in `sink`: every one a success (none lost), and the
    /// OffsetFetches — answered as they are handled, unlike commits, answered once durable —
    /// answered in the order they were sent.
    async fn all_answered_in_order(sink: &Recorded, count: usize) {
        let answered = || {
            sink.sends
                .lock()
                .expect("not poisoned")
                .iter()
                .flatten()
                .count()
        };
        until(|| answered() >= count).await;
        let sends = sink.sends.lock().expect("not poisoned");
        let answers: Vec<_> = sends.iter().flatten().collect();
        assert_eq!(answers.len(), count);
        for answer in &answers {
            assert_eq!(answer.response.error_code(), 0, "{:?}", answer.response);
        }
        let fetches: Vec<u32> = answers
            .iter()
            .filter(|a| matches!(a.response, Response::OffsetFetch(_)))
            .map(|a| a.ticket.correlation_id)
            .collect();
        assert!(
            fetches.is_sorted(),
            "fetches answered out of order: {fetches:?}"
        );
    }

    #[test]
    fn requests_reaching_a_parked_groups_old_inbox_are_forwarded_in_order() {
        System::new().block_on(async {
            let sup = start(config(), StoredState::default());
            let (committed, link) = route(&sup, commit(0)).await;
            assert_eq!(committed.error_code(), 0, "{committed:?}");
            let link = link.expect("the group's inbox");
            parked_within(&sup, 1).await;
            // A session that cached the inbox sends on: nothing is lost or reordered, and
            // the group wakes for the commits.
            let sink = send_through(&link, 1..41);
            all_answered_in_order(&sink, 40).await;
            let (fetched, _) = route(&sup, fetch()).await;
            assert!(fetched_offset(&fetched) > 0, "{fetched:?}");
        });
    }

    #[test]
    fn requests_racing_a_park_are_all_answered_in_order() {
        System::new().block_on(async {
            let sup = start(config(), StoredState::default());
            let (_, link) = route(&sup, commit(0)).await;
            let link = link.expect("the group's inbox");
            // Bursts spaced around `park_after_ms`, so that some reach the actor as it offers
            // to park, hands its engine over, or forwards: each answered as a live group's.
            let mut next = 1;
            let mut sinks = Vec::new();
            for gap in [PARK_AFTER - 4, PARK_AFTER, PARK_AFTER + 4].repeat(4) {
                actix::clock::sleep(Duration::from_millis(gap)).await;
                sinks.push(send_through(&link, next..next + 6));
                next += 6;
            }
            for sink in &sinks {
                all_answered_in_order(sink, 6).await;
            }
        });
    }

    #[test]
    fn a_group_loaded_with_only_offsets_starts_parked_and_can_be_deleted() {
        System::new().block_on(async {
            let sup = start(config(), stored_offsets(7, Clock::new().now()));
            assert_eq!(sup.send(Peek).await.expect("runs"), (1, 1));
            let deleted = admin(
                &sup,
                Request::DeleteGroups(DeleteGroupsRequest {
                    group_ids: vec!["g".into()],
                }),
            )
            .await;
            let Response::DeleteGroups(d) = deleted else {
                panic!("not a DeleteGroups answer: {deleted:?}");
            };
            assert_eq!(d.results[0].error_code, 0, "{d:?}");
            assert_eq!(sup.send(Peek).await.expect("runs"), (0, 0));
        });
    }

    #[test]
    fn a_parked_groups_deadline_wakes_it() {
        System::new().block_on(async {
            // Offsets expire 100 ms after their commit and are dropped (no quarantine); the
            // group, with nothing left, is removed 100 ms after it went Empty.
            let mut config = config();
            config.offsets_retention_ms = 100;
            config.empty_group_removal_ms = 100;
            config.offsets.quarantine_ms = 0;
            let sup = start(config, stored_offsets(7, Clock::new().now()));
            assert_eq!(sup.send(Peek).await.expect("runs"), (1, 1));
            let deadline = Instant::now() + Duration::from_secs(5);
            while sup.send(Peek).await.expect("runs").1 != 0 {
                assert!(Instant::now() < deadline, "not removed within 5 s");
                actix::clock::sleep(Duration::from_millis(5)).await;
            }
        });
    }

    #[test]
    fn a_parked_group_the_store_cannot_read_back_is_unavailable_until_it_can() {
        System::new().block_on(async {
            let store = Arc::new(MemoryStore::new());
            let sup = start_on(store.clone(), config(), StoredState::default());
            let (committed, link) = route(&sup, commit(5)).await;
            assert_eq!(committed.error_code(), 0, "{committed:?}");
            drop(link);
            parked_within(&sup, 1).await;
            assert_eq!(sup.send(Kinds).await.expect("runs"), (1, 0));
            // The disk fails: the group cannot be read back. A fetch wakes it, and its actor
            // answers what any group reloading its data does (a retriable error), not an
            // empty answer or an unknown group.
            store.fail_writes(true);
            let (fetched, _) = route(&sup, fetch()).await;
            assert_eq!(
                fetched.error_code(),
                muster_protocol::ErrorCode::CoordinatorNotAvailable.code(),
                "{fetched:?}"
            );
            assert_eq!(sup.send(Peek).await.expect("runs"), (0, 1));
            // Recovered: the group reads its data back (retried every 200 ms) and answers.
            store.fail_writes(false);
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let (fetched, _) = route(&sup, fetch()).await;
                if fetched.error_code() == 0 {
                    assert_eq!(fetched_offset(&fetched), 5);
                    break;
                }
                assert!(Instant::now() < deadline, "not readable within 5 s");
                actix::clock::sleep(Duration::from_millis(20)).await;
            }
            // And, idle, it parks again.
            parked_within(&sup, 1).await;
        });
    }

    #[test]
    fn groups_loaded_as_summaries_are_parked_read_back_and_expire_on_time() {
        System::new().block_on(async {
            // The store holds "g"'s offset, committed now; startup gave its summary only.
            let store = Arc::new(MemoryStore::new());
            let now = Clock::new().now();
            let offsets = stored_offsets(7, now).offsets.remove(0).1;
            let written = store.apply(vec![Mutation::PutOffsets {
                group_id: "g".into(),
                offsets,
            }]);
            written.await.expect("durable");
            let summary = ParkedSummary {
                group_id: "g".into(),
                record: None,
                oldest_commit: Some(now),
                quarantined: 0,
                oldest_quarantined: None,
            };
            let mut config = config();
            config.offsets_retention_ms = 300;
            config.empty_group_removal_ms = 300;
            config.offsets.quarantine_ms = 0;
            let sup = start_loaded(store.clone(), config, StoredState::default(), vec![summary]);
            assert_eq!(sup.send(Peek).await.expect("runs"), (1, 1));
            assert_eq!(sup.send(Kinds).await.expect("runs"), (1, 0));
            let (fetched, link) = route(&sup, fetch()).await;
            assert_eq!(fetched_offset(&fetched), 7);
            assert!(link.is_none(), "answered parked");
            // Its retention deadline, armed from the summary, wakes it: the offset expires
            // and the group, with nothing left, is removed, in the store too.
            let deadline = Instant::now() + Duration::from_secs(5);
            while sup.send(Peek).await.expect("runs").1 != 0 {
                assert!(Instant::now() < deadline, "not removed within 5 s");
                actix::clock::sleep(Duration::from_millis(5)).await;
            }
            let left = store.load_group("g").expect("readable");
            assert!(left.offsets.is_empty(), "{left:?}");
        });
    }

    #[test]
    fn parking_off_keeps_every_group_live() {
        System::new().block_on(async {
            let config = GroupConfig {
                park_after_ms: 0,
                ..GroupConfig::default()
            };
            let sup = start(config, stored_offsets(7, Clock::new().now()));
            assert_eq!(sup.send(Peek).await.expect("runs"), (0, 1));
            let (fetched, _) = route(&sup, fetch()).await;
            assert_eq!(fetched_offset(&fetched), 7);
            actix::clock::sleep(Duration::from_millis(3 * PARK_AFTER)).await;
            assert_eq!(sup.send(Peek).await.expect("runs"), (0, 1));
        });
    }
}
