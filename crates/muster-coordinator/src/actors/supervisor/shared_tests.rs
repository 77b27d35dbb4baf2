//! The supervisor with a store other nodes write too (cluster mode's `EtcdStore`, played by a
//! memory store with a hand on its answers): a CreateTopics whose change met another node's is
//! planned again against what was found, and a group whose creator's unit is charged by the
//! store is created only once charged, with the requests that arrived meanwhile served after.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use muster_protocol::{
    AssignorMetadata, CreateTopicsRequest, DescribeTopicsRequest, ErrorCode, JoinGroupRequest,
    OffsetFetchRequest, Request, Response, TopicInfo,
};

use crate::access::{Access, Principal};
use crate::actors::messages::{AdminCall, GroupCall, Route};
use crate::actors::reply::{ticket, Recorded, ReplyTo};
use crate::actors::{SingleNode, Supervisor, SupervisorOptions};
use crate::clock::Clock;
use crate::config::GroupConfig;
use crate::engine::ClientInfo;
use crate::quota::{QuotaKind, Quotas};
use crate::storage::{
    Durable, DurableSender, MemoryStore, Mutation, Store, StoreError, StoredState, TopicChange,
    TopicsWrite, TopicsWritten,
};

/// A memory store where "another node" may change a topic just before this node's write of
/// it lands, and whose quota charges the test completes by hand.
#[derive(Default)]
struct SharedStore {
    inner: MemoryStore,
    /// Written by another node just before this node's next catalog write.
    race: Mutex<Option<TopicInfo>>,
    /// Charges asked for, in order, waiting for the test.
    charges: Mutex<VecDeque<(String, DurableSender)>>,
}

impl Store for SharedStore {
    fn load(&self) -> Result<StoredState, StoreError> {
        self.inner.load()
    }

    fn apply(&self, batch: Vec<Mutation>) -> Durable {
        self.inner.apply(batch)
    }

    fn put_topics(&self, changes: Vec<TopicChange>) -> TopicsWrite {
        let raced = self.race.lock().expect("not poisoned").take();
        if let Some(theirs) = raced {
            // Theirs landed first: ours is refused, and says what is there now.
            // The memory store applies a batch at once; its Durable is already resolved.
            drop(self.inner.apply(vec![Mutation::PutTopic(theirs.clone())]));
            return Box::pin(std::future::ready(Ok(TopicsWritten {
                written: Vec::new(),
                conflicted: true,
                found: vec![theirs],
            })));
        }
        self.inner.put_topics(changes)
    }

    fn charge_group(&self, group_id: &str, _principal: &str, _max: Option<u32>) -> Option<Durable> {
        let (sender, durable) = Durable::pending();
        self.charges
            .lock()
            .expect("not poisoned")
            .push_back((group_id.to_owned(), sender));
        Some(durable)
    }
}

fn start(store: Arc<SharedStore>, quotas: Quotas) -> Addr<Supervisor> {
    Supervisor::new(SupervisorOptions {
        config: GroupConfig::default(),
        store,
        arbiters: Vec::new(),
        placement: Arc::new(SingleNode),
        initial: StoredState {
            topics: vec![TopicInfo {
                topic: "t".into(),
                partitions: 1,
            }],
            ..StoredState::default()
        },
        parked: Vec::new(),
        clock: Clock::new(),
        quotas,
    })
    .start()
}

/// Waits (a few milliseconds at a time, at most 5 s) until `done`.
async fn until(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "not within 5 s");
        actix::clock::sleep(Duration::from_millis(5)).await;
    }
}

fn answered(sink: &Recorded) -> Option<Response> {
    let sends = sink.sends.lock().expect("not poisoned");
    sends.first().map(|s| s[0].response.clone())
}

async fn answer(sink: &Recorded) -> Response {
    until(|| answered(sink).is_some()).await;
    answered(sink).expect("answered")
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

fn topic(name: &str, partitions: i32) -> TopicInfo {
    TopicInfo {
        topic: name.into(),
        partitions,
    }
}

async fn create(sup: &Addr<Supervisor>, name: &str, partitions: i32) -> i16 {
    match admin(
        sup,
        Request::CreateTopics(CreateTopicsRequest {
            topics: vec![topic(name, partitions)],
        }),
    )
    .await
    {
        Response::CreateTopics(c) => c.results[0].error_code,
        other => panic!("not a CreateTopics answer: {other:?}"),
    }
}

async fn catalog(sup: &Addr<Supervisor>) -> Vec<TopicInfo> {
    match admin(
        sup,
        Request::DescribeTopics(DescribeTopicsRequest { topics: None }),
    )
    .await
    {
        Response::DescribeTopics(d) => {
            let mut topics = d.topics;
            topics.sort_by(|a, b| a.topic.cmp(&b.topic));
            topics
        }
        other => panic!("not a DescribeTopics answer: {other:?}"),
    }
}

/// Another node's change landing first: a larger count still grows the topic from it, the
/// same count is NONE, a smaller one INVALID_PARTITIONS; the catalog (and the store) hold the
/// larger either way.
#[test]
fn a_create_topics_meeting_another_nodes_change_is_planned_again() {
    System::new().block_on(async {
        let store = Arc::new(SharedStore::default());
        let sup = start(Arc::clone(&store), Quotas::default());
        let race = |t: TopicInfo| *store.race.lock().expect("not poisoned") = Some(t);

        race(topic("t", 3));
        assert_eq!(create(&sup, "t", 4).await, ErrorCode::None.code());
        race(topic("u", 2));
        assert_eq!(create(&sup, "u", 2).await, ErrorCode::None.code());
        race(topic("v", 5));
        assert_eq!(
            create(&sup, "v", 2).await,
            ErrorCode::InvalidPartitions.code()
        );
        let expected = vec![topic("t", 4), topic("u", 2), topic("v", 5)];
        assert_eq!(catalog(&sup).await, expected);
        assert_eq!(store.load().expect("loads").topics, expected);
    });
}

fn alpha(quotas: &Quotas) -> ClientInfo {
    ClientInfo {
        client_id: "c".into(),
        client_host: "h".into(),
        access: Access::principal(Arc::new(Principal::new(
            Arc::from("alpha"),
            Vec::new(),
            quotas.get("alpha"),
        ))),
    }
}

fn ask_member_id() -> Request {
    Request::JoinGroup(JoinGroupRequest {
        group_id: "g".into(),
        member_id: String::new(),
        group_instance_id: None,
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
        topics: vec!["t".into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: vec![],
        }],
        owned_partitions: vec![],
        reason: None,
    })
}

fn fetch() -> Request {
    Request::OffsetFetch(OffsetFetchRequest {
        group_id: "g".into(),
        topics: None,
    })
}

/// Sends `request` for group "g" as a session's first request; its answer's sink.
async fn route(sup: &Addr<Supervisor>, request: Request, client: ClientInfo) -> Arc<Recorded> {
    let sink = Arc::new(Recorded::default());
    let call = GroupCall {
        request,
        reply: ReplyTo::new(sink.clone(), ticket(1)),
        client,
    };
    sup.send(Route {
        group_id: "g".into(),
        call,
    })
    .await
    .expect("supervisor runs");
    sink
}

/// The next charge the supervisor asked for, once it has.
async fn next_charge(store: &SharedStore) -> (String, DurableSender) {
    until(|| !store.charges.lock().expect("not poisoned").is_empty()).await;
    store
        .charges
        .lock()
        .expect("not poisoned")
        .pop_front()
        .expect("a charge")
}

#[test]
fn a_group_is_created_only_once_its_unit_is_charged() {
    System::new().block_on(async {
        let store = Arc::new(SharedStore::default());
        let quotas = Quotas::default();
        quotas.get("alpha").set_limits(Some(1), None);
        let sup = start(Arc::clone(&store), quotas.clone());

        // Refused by the cluster: the creating request answers QUOTA_EXCEEDED, and the one
        // that waited behind it is served afresh (an OffsetFetch creates nothing).
        let joining = route(&sup, ask_member_id(), alpha(&quotas)).await;
        let (group, refused) = next_charge(&store).await;
        assert_eq!(group, "g");
        let fetching = route(&sup, fetch(), alpha(&quotas)).await;
        assert!(answered(&joining).is_none(), "not before the charge");
        assert!(answered(&fetching).is_none(), "waits behind the creation");
        refused.complete(Err(StoreError::QuotaExceeded {
            principal: "alpha".into(),
            held: 1,
            max: 1,
        }));
        let over = answer(&joining).await;
        assert_eq!(
            over.error_code(),
            ErrorCode::QuotaExceeded.code(),
            "{over:?}"
        );
        let fetched = answer(&fetching).await;
        assert_eq!(fetched.error_code(), ErrorCode::None.code(), "{fetched:?}");
        assert_eq!(quotas.get("alpha").used(QuotaKind::Groups), 0);

        // Charged: the group exists, holding the unit on this node too (even over this
        // node's own count: the cluster decided), and serves what waited.
        let joining = route(&sup, ask_member_id(), alpha(&quotas)).await;
        let (_, charged) = next_charge(&store).await;
        let second = route(&sup, ask_member_id(), alpha(&quotas)).await;
        charged.complete(Ok(()));
        for sink in [&joining, &second] {
            let joined = answer(sink).await;
            assert_eq!(
                joined.error_code(),
                ErrorCode::MemberIdRequired.code(),
                "{joined:?}"
            );
        }
        assert!(
            store.charges.lock().expect("not poisoned").is_empty(),
            "one charge for the group"
        );
        assert_eq!(quotas.get("alpha").used(QuotaKind::Groups), 1);
    });
}
