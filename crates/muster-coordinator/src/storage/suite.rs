//! Storage semantics, one test body per behaviour, run against every backend:
//! [`MemoryStore`](super::MemoryStore) and [`RedbStore`](super::RedbStore) here (the redb run
//! also reopens the file and checks that a reopen loads exactly what the store loaded before),
//! and muster-etcd's `EtcdStore` through [`store_suite!`](crate::store_suite) (feature
//! `store-suite`), so that every backend runs every case and a case added here reaches all.
//! The cases of offset protection (ownership epochs, offset history, the expiry quarantine)
//! are in `offset_protection`; those of writes other nodes may race (topic changes by
//! compare-and-swap) in `shared_writes`; startup with parking's in `parking`.

mod offset_protection;
mod parking;
mod shared_writes;

use std::future::Future;

use muster_protocol::{
    AssignorMetadata, MemberChange, MemberWait, RebalanceCause, TopicInfo, TopicPartitions,
};

pub use self::offset_protection::*;
pub use self::parking::*;
pub use self::shared_writes::*;
use super::{
    CommittedOffset, ConsumerGroupRecord, ConsumerMemberRecord, GroupRecord, MemberRecord,
    Mutation, OffsetWrite, OwnershipRecord, RebalanceRecord, Store, StoreError, StoredState,
};
use crate::types::GroupState;

/// Runs a future to completion on a throwaway current-thread runtime.
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime builds")
        .block_on(future)
}

/// Applies a batch and waits until it is durable.
pub fn commit(store: &dyn Store, batch: Vec<Mutation>) {
    block_on(store.apply(batch)).expect("the batch becomes durable");
}

pub fn member(id: &str) -> MemberRecord {
    MemberRecord {
        member_id: id.into(),
        group_instance_id: Some(format!("{id}-static")),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        topics: vec!["orders".into(), "payments".into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: vec![1, 2, 3],
        }],
        owned_partitions: vec![TopicPartitions {
            topic: "orders".into(),
            partitions: vec![0, 1],
        }],
        assignment: vec![TopicPartitions {
            topic: "orders".into(),
            partitions: vec![0, 1, 2],
        }],
        assignment_user_data: vec![0xff],
        principal: Some("orders-service".into()),
    }
}

pub fn group(id: &str, generation: i32) -> GroupRecord {
    GroupRecord {
        group_id: id.into(),
        state: GroupState::Stable,
        generation,
        assignor: Some("range".into()),
        leader: Some(format!("{id}-m1")),
        members: vec![member(&format!("{id}-m1")), member(&format!("{id}-m2"))],
        state_since_ms: 1_000 + generation as u64,
        created_by: Some("orders-service".into()),
        consumer: None,
        ownership: Vec::new(),
    }
}

fn partitions(topic: &str, partitions: &[i32]) -> TopicPartitions {
    TopicPartitions {
        topic: topic.into(),
        partitions: partitions.to_vec(),
    }
}

/// A consumer-protocol group (protocol-v1 §7) at group epoch `epoch`, Reconciling, with one
/// classic member left from an upgrade and a consumer member in each reconciliation state:
/// a static one that is Stable, one subscribed by regex that still owns partitions it must
/// revoke, one waiting for partitions that others still own (nothing assigned yet), and a
/// static one on a temporary leave (epoch -2, nothing assigned, no optional field set). Its
/// ownership epochs say who owns what it holds, and who last owned a partition nobody holds.
pub fn consumer_group(id: &str, epoch: i32) -> GroupRecord {
    let consumer_member = |suffix: &str, state: u8| ConsumerMemberRecord {
        member_id: format!("{id}-{suffix}"),
        group_instance_id: None,
        rack_id: Some("rack-a".into()),
        client_id: "consumer".into(),
        client_host: "/10.0.0.7".into(),
        principal: Some("orders-service".into()),
        rebalance_timeout_ms: 45_000,
        subscribed_topics: vec!["orders".into(), "payments".into()],
        subscribed_topic_regex: None,
        server_assignor: None,
        state,
        member_epoch: epoch,
        previous_member_epoch: epoch - 1,
        assigned: Vec::new(),
        pending_revocation: Vec::new(),
        target: Vec::new(),
        classic: None,
    };
    let stable = ConsumerMemberRecord {
        group_instance_id: Some(format!("{id}-static-1")),
        assigned: vec![partitions("orders", &[0, 1]), partitions("payments", &[2])],
        target: vec![partitions("orders", &[0, 1]), partitions("payments", &[2])],
        ..consumer_member("stable", 0)
    };
    let unrevoked = ConsumerMemberRecord {
        subscribed_topics: Vec::new(),
        subscribed_topic_regex: Some("^(orders|payments)$".into()),
        server_assignor: Some("uniform".into()),
        member_epoch: epoch - 1,
        previous_member_epoch: epoch - 3,
        assigned: vec![partitions("orders", &[2])],
        pending_revocation: vec![partitions("orders", &[3]), partitions("payments", &[0, 1])],
        target: vec![partitions("orders", &[2])],
        ..consumer_member("unrevoked", 1)
    };
    let unreleased = ConsumerMemberRecord {
        // A classic member inside the consumer group (an online upgrade).
        classic: Some(crate::storage::ClassicMemberRecord {
            session_timeout_ms: 10_000,
            assignors: vec![muster_protocol::AssignorMetadata {
                name: "cooperative-sticky".into(),
                user_data: vec![1, 2],
            }],
        }),
        rack_id: None,
        principal: None,
        server_assignor: Some("range".into()),
        target: vec![partitions("orders", &[3]), partitions("payments", &[0, 1])],
        ..consumer_member("unreleased", 2)
    };
    let leaving = ConsumerMemberRecord {
        group_instance_id: Some(format!("{id}-static-ü")),
        rack_id: None,
        client_id: String::new(),
        client_host: String::new(),
        principal: None,
        rebalance_timeout_ms: 0,
        subscribed_topics: Vec::new(),
        member_epoch: -2,
        previous_member_epoch: epoch - 2,
        ..consumer_member("leaving", 0)
    };
    let mut classic = member(&format!("{id}-classic"));
    classic.principal = None;
    GroupRecord {
        group_id: id.into(),
        state: GroupState::Reconciling,
        generation: epoch,
        assignor: None,
        leader: None,
        members: vec![classic],
        state_since_ms: 2_000 + epoch as u64,
        created_by: Some("orders-service".into()),
        consumer: Some(ConsumerGroupRecord {
            assignment_epoch: epoch,
            assignor: "uniform".into(),
            members: vec![stable, unrevoked, unreleased, leaving],
        }),
        ownership: vec![
            owner("orders", 0, epoch - 4, &format!("{id}-stable")),
            owner("orders", 1, epoch - 4, &format!("{id}-stable")),
            owner("orders", 2, epoch - 1, &format!("{id}-unrevoked")),
            owner("orders", 3, 1, &format!("{id}-unrevoked")),
            owner("payments", 0, epoch - 3, &format!("{id}-unrevoked")),
            owner("payments", 1, epoch - 3, &format!("{id}-unrevoked")),
            owner("payments", 2, epoch, &format!("{id}-stable")),
            // Last owned by a member that has left.
            owner("payments", 3, i32::MAX, "gone-ü"),
        ],
    }
}

/// `owner` owns (or last owned) `topic`/`partition` since ownership epoch `epoch`.
pub fn owner(topic: &str, partition: i32, epoch: i32, owner: &str) -> OwnershipRecord {
    OwnershipRecord {
        topic: topic.into(),
        partition,
        epoch,
        owner: owner.into(),
    }
}

pub fn offset(topic: &str, partition: i32, offset: i64) -> OffsetWrite {
    OffsetWrite {
        topic: topic.into(),
        partition,
        committed: CommittedOffset {
            offset,
            metadata: (offset % 2 == 0).then(|| format!("meta-{offset}")),
            commit_timestamp_ms: 5_000u64.wrapping_add(offset as u64),
        },
    }
}

pub fn put_offsets(group_id: &str, offsets: Vec<OffsetWrite>) -> Mutation {
    Mutation::PutOffsets {
        group_id: group_id.into(),
        offsets,
    }
}

fn topic(name: &str, partitions: i32) -> TopicInfo {
    TopicInfo {
        topic: name.into(),
        partitions,
    }
}

pub fn load(store: &dyn Store) -> StoredState {
    store.load().expect("the store loads")
}

fn offsets_of(state: &StoredState, group_id: &str) -> Option<Vec<OffsetWrite>> {
    state
        .offsets
        .iter()
        .find(|(g, _)| g == group_id)
        .map(|(_, writes)| writes.clone())
}

pub fn empty_store_loads_empty(store: &dyn Store) {
    assert_eq!(load(store), StoredState::default());
}

pub fn put_replaces_a_group(store: &dyn Store) {
    commit(store, vec![Mutation::PutGroup(group("g", 1))]);
    let mut second = group("g", 2);
    second.state = GroupState::Empty;
    second.members.clear();
    second.leader = None;
    commit(store, vec![Mutation::PutGroup(second.clone())]);
    assert_eq!(load(store).groups, vec![second]);
}

pub fn put_offsets_upserts(store: &dyn Store) {
    commit(
        store,
        vec![put_offsets("g", vec![offset("t", 0, 1), offset("t", 1, 2)])],
    );
    commit(
        store,
        vec![put_offsets("g", vec![offset("t", 1, 5), offset("u", 0, 3)])],
    );
    assert_eq!(
        offsets_of(&load(store), "g"),
        Some(vec![
            offset("t", 0, 1),
            offset("t", 1, 5),
            offset("u", 0, 3)
        ])
    );
}

pub fn delete_offsets_removes_the_listed_ones(store: &dyn Store) {
    commit(
        store,
        vec![put_offsets(
            "g",
            vec![offset("t", 0, 1), offset("t", 1, 2), offset("u", 0, 3)],
        )],
    );
    commit(
        store,
        vec![Mutation::DeleteOffsets {
            group_id: "g".into(),
            partitions: vec![("t".into(), 0), ("never-committed".into(), 9)],
        }],
    );
    assert_eq!(
        offsets_of(&load(store), "g"),
        Some(vec![offset("t", 1, 2), offset("u", 0, 3)])
    );
    commit(
        store,
        vec![Mutation::DeleteOffsets {
            group_id: "g".into(),
            partitions: vec![("t".into(), 1), ("u".into(), 0)],
        }],
    );
    assert_eq!(load(store), StoredState::default());
}

pub fn delete_group_removes_its_offsets_and_no_others(store: &dyn Store) {
    // Neighbours in key order on both sides, and ids that share "g" as a prefix.
    for id in ["f", "g", "g\0", "g ", "g2", "h"] {
        commit(
            store,
            vec![
                Mutation::PutGroup(group(id, 1)),
                put_offsets(id, vec![offset("t", 0, 1), offset("t", 1, 2)]),
            ],
        );
    }
    commit(
        store,
        vec![Mutation::DeleteGroup {
            group_id: "g".into(),
        }],
    );
    let state = load(store);
    let ids: Vec<&str> = state.groups.iter().map(|g| g.group_id.as_str()).collect();
    assert_eq!(ids, ["f", "g\0", "g ", "g2", "h"]);
    let with_offsets: Vec<&str> = state.offsets.iter().map(|(g, _)| g.as_str()).collect();
    assert_eq!(with_offsets, ["f", "g\0", "g ", "g2", "h"]);
    for (_, writes) in &state.offsets {
        assert_eq!(writes, &vec![offset("t", 0, 1), offset("t", 1, 2)]);
    }
}

pub fn delete_group_removes_offsets_of_a_group_without_metadata(store: &dyn Store) {
    // Simple commits: offsets, no group record.
    commit(store, vec![put_offsets("simple", vec![offset("t", 0, 1)])]);
    commit(
        store,
        vec![Mutation::DeleteGroup {
            group_id: "simple".into(),
        }],
    );
    assert_eq!(load(store), StoredState::default());
}

pub fn topics_are_created_and_raised(store: &dyn Store) {
    commit(
        store,
        vec![
            Mutation::PutTopic(topic("orders", 3)),
            Mutation::PutTopic(topic("audit", 1)),
        ],
    );
    commit(store, vec![Mutation::PutTopic(topic("orders", 6))]);
    assert_eq!(
        load(store).topics,
        vec![topic("audit", 1), topic("orders", 6)]
    );
}

pub fn batches_apply_in_submission_order(store: &dyn Store) {
    // Submitted back to back, awaited afterwards: the later batch wins on every key.
    let first = store.apply(vec![
        Mutation::PutGroup(group("g", 1)),
        put_offsets("g", vec![offset("t", 0, 1)]),
        Mutation::PutTopic(topic("t", 1)),
    ]);
    let second = store.apply(vec![
        Mutation::PutGroup(group("g", 2)),
        put_offsets("g", vec![offset("t", 0, 2)]),
        Mutation::PutTopic(topic("t", 4)),
    ]);
    // Inside one batch too: delete, then recreate.
    let third = store.apply(vec![
        Mutation::DeleteGroup {
            group_id: "g".into(),
        },
        put_offsets("g", vec![offset("t", 1, 7)]),
        Mutation::PutGroup(group("g", 3)),
    ]);
    block_on(async {
        first.await.expect("first is durable");
        second.await.expect("second is durable");
        third.await.expect("third is durable");
    });
    let state = load(store);
    assert_eq!(state.groups, vec![group("g", 3)]);
    assert_eq!(offsets_of(&state, "g"), Some(vec![offset("t", 1, 7)]));
    assert_eq!(state.topics, vec![topic("t", 4)]);
}

pub fn load_round_trips_everything(store: &dyn Store) {
    let mut quiet = group("quiet", 4);
    quiet.state = GroupState::Empty;
    quiet.assignor = None;
    quiet.leader = None;
    quiet.members.clear();
    let mut other = member("bare");
    other.group_instance_id = None;
    other.assignors.clear();
    other.owned_partitions.clear();
    other.assignment.clear();
    other.assignment_user_data.clear();
    let mut busy = group("busy", 9);
    busy.state = GroupState::CompletingRebalance;
    busy.members.push(other);
    commit(
        store,
        vec![
            Mutation::PutGroup(busy.clone()),
            Mutation::PutGroup(quiet.clone()),
            put_offsets("busy", vec![offset("b", 2, 20), offset("a", 1, -1)]),
            put_offsets("only-offsets", vec![offset("a", 0, i64::MAX)]),
            Mutation::PutTopic(topic("a", 2)),
            Mutation::PutTopic(topic("b", 3)),
            put_history("busy", vec![history("b", 2, 7), history("a", 1, 1)], vec![]),
            put_quarantine("only-offsets", vec![quarantined("a", 1, 3, 9)]),
        ],
    );
    let expected = StoredState {
        groups: vec![busy, quiet],
        offsets: vec![
            ("busy".into(), vec![offset("a", 1, -1), offset("b", 2, 20)]),
            ("only-offsets".into(), vec![offset("a", 0, i64::MAX)]),
        ],
        topics: vec![topic("a", 2), topic("b", 3)],
        journals: Vec::new(),
        history: vec![("busy".into(), vec![history("a", 1, 1), history("b", 2, 7)])],
        quarantine: vec![("only-offsets".into(), vec![quarantined("a", 1, 3, 9)])],
    };
    assert_eq!(load(store), expected);
}

/// A consumer group's part survives put, load and (for a durable backend, in `finish`) a
/// restart: every member state, static members, a regex, empty and non-empty assignments; an
/// empty consumer part is not no part; a classic record replacing it drops it.
pub fn consumer_groups_round_trip(store: &dyn Store) {
    let mut assigning = consumer_group("b", 4);
    assigning.state = GroupState::Assigning;
    // No member yet (every one left, the group epoch kept so that none is reused).
    let mut emptied = consumer_group("c", 9);
    emptied.state = GroupState::Empty;
    emptied.members.clear();
    if let Some(consumer) = emptied.consumer.as_mut() {
        consumer.members.clear();
        consumer.assignor.clear();
    }
    commit(
        store,
        vec![
            Mutation::PutGroup(consumer_group("a", 7)),
            Mutation::PutGroup(assigning.clone()),
            Mutation::PutGroup(emptied.clone()),
            Mutation::PutGroup(group("classic", 2)),
            put_offsets("a", vec![offset("orders", 0, 11)]),
        ],
    );
    assert_eq!(
        load(store).groups,
        vec![
            consumer_group("a", 7),
            assigning.clone(),
            emptied.clone(),
            group("classic", 2),
        ]
    );
    assert_eq!(
        store.load_group("a").expect("loads").record,
        Some(consumer_group("a", 7))
    );

    // The next epoch replaces the whole part; a classic record drops it.
    let mut classic_again = group("b", 5);
    classic_again.consumer = None;
    commit(
        store,
        vec![
            Mutation::PutGroup(consumer_group("a", 8)),
            Mutation::PutGroup(classic_again.clone()),
        ],
    );
    assert_eq!(
        load(store).groups,
        vec![
            consumer_group("a", 8),
            classic_again,
            emptied,
            group("classic", 2)
        ]
    );
}

/// A journal entry of `generation` with every kind of field filled.
pub fn rebalance(generation: i32) -> RebalanceRecord {
    RebalanceRecord {
        generation_id: generation,
        trigger: RebalanceCause {
            kind: "session_expired".into(),
            member_id: "m-ü".into(),
            client_id: "worker".into(),
            client_host: "10.0.0.1".into(),
            detail: Some("reason".into()),
        },
        started_at_ms: 1_700_000_000_000,
        barrier_ms: 3_000,
        sync_ms: Some(5),
        assignor: Some("range".into()),
        leader_id: "m-1".into(),
        members: 2,
        waited_for: vec![
            MemberWait {
                member_id: "m-2".into(),
                rejoin_ms: None,
            },
            MemberWait {
                member_id: "m-1".into(),
                rejoin_ms: Some(12),
            },
        ],
        evicted: vec!["m-2".into()],
        joined: vec![],
        left: vec!["m-2".into()],
        moved: Some(3),
        changes: vec![MemberChange {
            member_id: "m-1".into(),
            gained: vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![0, 1, 2],
            }],
            revoked: vec![],
        }],
        omitted: 0,
    }
}

fn put_rebalances(group_id: &str, generations: &[i32], dropped: &[i32]) -> Mutation {
    Mutation::PutRebalances {
        group_id: group_id.into(),
        entries: generations.iter().map(|&g| rebalance(g)).collect(),
        dropped: dropped.to_vec(),
    }
}

pub fn journal_entries_are_upserted_and_trimmed(store: &dyn Store) {
    commit(
        store,
        vec![
            Mutation::PutGroup(group("g", 3)),
            put_rebalances("g", &[1, 2], &[]),
            put_rebalances("h", &[7], &[]),
        ],
    );
    // The newest entry is completed later (its sync came), and the oldest dropped.
    let mut synced = rebalance(3);
    synced.sync_ms = None;
    commit(
        store,
        vec![
            put_rebalances("g", &[3], &[1]),
            Mutation::PutRebalances {
                group_id: "g".into(),
                entries: vec![synced.clone()],
                dropped: vec![],
            },
        ],
    );
    let state = load(store);
    assert_eq!(
        state.journals,
        vec![
            ("g".into(), vec![rebalance(2), synced.clone()]),
            ("h".into(), vec![rebalance(7)]),
        ]
    );
    assert_eq!(
        store.load_group("g").expect("loads").journal,
        vec![rebalance(2), synced]
    );
    // Dropping every entry leaves no journal.
    commit(store, vec![put_rebalances("h", &[], &[7])]);
    assert_eq!(store.load_group("h").expect("loads").journal, Vec::new());
}

pub fn delete_group_removes_its_journal_and_no_other(store: &dyn Store) {
    commit(
        store,
        vec![
            Mutation::PutGroup(group("g", 3)),
            put_rebalances("g", &[1, 2, 3], &[]),
            // A group id that "g"'s key range must not reach.
            put_rebalances("g\u{1}", &[4], &[]),
            put_rebalances("g2", &[5], &[]),
        ],
    );
    commit(
        store,
        vec![Mutation::DeleteGroup {
            group_id: "g".into(),
        }],
    );
    let state = load(store);
    assert_eq!(
        state.journals,
        vec![
            ("g\u{1}".into(), vec![rebalance(4)]),
            ("g2".into(), vec![rebalance(5)]),
        ]
    );
    assert_eq!(store.load_group("g").expect("loads").journal, Vec::new());
    assert_eq!(
        store.load_group("g\u{1}").expect("loads").journal,
        vec![rebalance(4)]
    );
}

pub fn load_group_reads_one_group(store: &dyn Store) {
    commit(
        store,
        vec![
            Mutation::PutGroup(group("g", 3)),
            put_offsets("g", vec![offset("a", 0, 1), offset("b", 2, 2)]),
            Mutation::PutGroup(group("g2", 9)),
            put_offsets("g2", vec![offset("a", 0, 7)]),
            // A group id that "g"'s key range must not reach.
            put_offsets("g\u{1}", vec![offset("a", 0, 8)]),
            put_offsets("only-offsets", vec![offset("c", 1, 4)]),
        ],
    );
    let g = store.load_group("g").expect("loads");
    assert_eq!(g.record, Some(group("g", 3)));
    assert_eq!(g.offsets, vec![offset("a", 0, 1), offset("b", 2, 2)]);
    let only = store.load_group("only-offsets").expect("loads");
    assert_eq!(only.record, None);
    assert_eq!(only.offsets, vec![offset("c", 1, 4)]);
    assert_eq!(
        store.load_group("absent").expect("loads"),
        super::StoredGroup::default()
    );
}

pub fn an_empty_batch_is_durable_at_once(store: &dyn Store) {
    assert_eq!(block_on(store.apply(Vec::new())), Ok::<(), StoreError>(()));
    assert_eq!(load(store), StoredState::default());
}

/// A backend under test: its store, and what to check once a case has run.
pub trait Backend {
    fn store(&self) -> &dyn Store;
    /// Runs after each case (the redb backend reopens its file and compares).
    fn finish(self)
    where
        Self: Sized,
    {
    }
}

/// Generates one `#[test]` per storage case; `$backend` is evaluated afresh for each test and
/// must implement [`Backend`].
#[macro_export]
macro_rules! store_suite {
    ($backend:expr) => {
        $crate::store_suite!(@cases $backend;
    empty_store_loads_empty,
    put_replaces_a_group,
    put_offsets_upserts,
    delete_offsets_removes_the_listed_ones,
    delete_group_removes_its_offsets_and_no_others,
    delete_group_removes_offsets_of_a_group_without_metadata,
    topics_are_created_and_raised,
    batches_apply_in_submission_order,
    load_round_trips_everything,
    an_empty_batch_is_durable_at_once,
    load_group_reads_one_group,
    journal_entries_are_upserted_and_trimmed,
    delete_group_removes_its_journal_and_no_other,
    consumer_groups_round_trip,
    ownership_epochs_round_trip,
    history_is_appended_trimmed_and_reloaded_in_order,
    quarantine_is_put_replaced_deleted_and_reloaded,
    delete_group_removes_its_history_and_quarantine_and_no_others,
    a_reset_batch_applies_whole,
    planned_topic_changes_are_written,
    load_parking_summarises_groups_with_nothing_but_data,
        );
    };
    (@cases $backend:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let backend = $backend;
                $crate::storage::suite::$case($crate::storage::suite::Backend::store(&backend));
                $crate::storage::suite::Backend::finish(backend);
            }
        )*
    };
}

#[cfg(test)]
impl Backend for super::MemoryStore {
    fn store(&self) -> &dyn Store {
        self
    }
}

/// A redb store in a temporary directory, reopened after the case.
#[cfg(test)]
struct RedbBackend {
    dir: tempfile::TempDir,
    store: super::RedbStore,
}

#[cfg(test)]
impl RedbBackend {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = super::RedbStore::open(dir.path()).expect("the store opens");
        RedbBackend { dir, store }
    }
}

#[cfg(test)]
impl Backend for RedbBackend {
    fn store(&self) -> &dyn Store {
        &self.store
    }

    fn finish(self) {
        let before = self.store.load().expect("the store loads");
        drop(self.store);
        let reopened = super::RedbStore::open(self.dir.path()).expect("the store reopens");
        assert_eq!(reopened.load().expect("the store loads"), before);
    }
}

#[cfg(test)]
mod memory_store {
    crate::store_suite!(crate::storage::MemoryStore::new());
}

#[cfg(test)]
mod redb_store {
    crate::store_suite!(super::RedbBackend::new());
}
