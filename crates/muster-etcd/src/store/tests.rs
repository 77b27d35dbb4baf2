//! EtcdStore against a real etcd (testkit): the generic storage suite, batching within etcd's
//! limits, fencing, and a member of a three-member etcd going away.

use std::collections::BTreeSet;

use muster_coordinator::storage::suite::{
    block_on, commit, consumer_group, group, history, load, offset, put_history, put_offsets,
    put_quarantine, quarantined, trim, Backend,
};
use muster_coordinator::storage::{codec, Mutation, Store, StoreError};

use super::{EtcdStore, EtcdStoreConfig, ShardStatus, TxnLimits};
use crate::client::EtcdClient;
use crate::testkit::EtcdCluster;

const SHARDS: u32 = 4;

fn config(cluster: &EtcdCluster, name: &str) -> EtcdStoreConfig {
    EtcdStoreConfig::new(cluster.endpoints(), name, SHARDS)
}

/// Plays the future ownership module: creates every shard's owner key and grants the shards.
fn own_all_shards(store: &EtcdStore) {
    for shard in 0..SHARDS {
        let key = store.keys().owner(shard);
        let client = store.client().clone();
        let revision = store
            .block_on(async move { client.put(&key, b"this-node").await })
            .expect("the runtime runs")
            .expect("the owner key is written");
        store.own_shard(shard, revision);
    }
}

/// "Another node" takes `shard`: its owner key gets a new mod revision.
fn take_over(store: &EtcdStore, shard: u32) {
    let key = store.keys().owner(shard);
    let client = store.client().clone();
    store
        .block_on(async move { client.put(&key, b"another-node").await })
        .expect("the runtime runs")
        .expect("the owner key is overwritten");
}

/// etcd's current revision: every accepted transaction adds one.
fn revision(store: &EtcdStore) -> i64 {
    let client: EtcdClient = store.client().clone();
    store
        .block_on(async move { client.range_exact(b"/", 0).await })
        .expect("the runtime runs")
        .expect("etcd answers")
        .1
}

/// An etcd, a store owning every shard, and, under a neighbouring cluster name, data the
/// store must never see.
struct EtcdBackend {
    cluster: EtcdCluster,
    store: EtcdStore,
}

impl EtcdBackend {
    fn new() -> Self {
        let cluster = EtcdCluster::single().expect("etcd starts (see the message to install it)");
        let neighbour = EtcdStore::connect(config(&cluster, "t2")).expect("connects");
        own_all_shards(&neighbour);
        commit(
            &neighbour,
            vec![
                Mutation::PutGroup(group("g", 1)),
                put_offsets("g", vec![offset("t", 0, 1)]),
                Mutation::PutTopic(muster_protocol::TopicInfo {
                    topic: "t".into(),
                    partitions: 1,
                }),
            ],
        );
        let store = EtcdStore::connect(config(&cluster, "t")).expect("connects");
        own_all_shards(&store);
        EtcdBackend { cluster, store }
    }
}

impl Backend for EtcdBackend {
    fn store(&self) -> &dyn Store {
        &self.store
    }

    /// Another store on the same cluster loads exactly what this one does.
    fn finish(self) {
        let before = self.store.load().expect("loads");
        drop(self.store);
        let again = EtcdStore::connect(config(&self.cluster, "t")).expect("connects");
        assert_eq!(again.load().expect("loads"), before);
    }
}

mod suite {
    muster_coordinator::store_suite!(super::EtcdBackend::new());
}

/// The raw value of a key, as etcd holds it.
fn raw(store: &EtcdStore, key: &[u8]) -> Option<Vec<u8>> {
    let client = store.client().clone();
    let key = key.to_vec();
    store
        .block_on(async move { client.get(&key).await })
        .expect("the runtime runs")
        .expect("etcd answers")
        .map(|kv| kv.value)
}

fn put_raw(store: &EtcdStore, key: &[u8], value: &[u8]) {
    let client = store.client().clone();
    let (key, value) = (key.to_vec(), value.to_vec());
    store
        .block_on(async move { client.put(&key, &value).await })
        .expect("the runtime runs")
        .expect("the value is written");
}

/// etcd keeps no format version: a group value as an earlier release wrote it (GroupV2, redb
/// store formats 2 and 3; GroupV3, format 4) stays until its group is written again, and reads
/// with no consumer part (V2) and no ownership epochs (V2, V3) through every way in; the next
/// write stores the current encoding, consumer part, epochs and all. A value of no known format
/// is corrupt, named by its key.
#[test]
fn group_values_of_earlier_releases_read_as_they_were_written() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    let shard = store.shard_of("old");
    let key = store.keys().group(shard, "old");
    let (_, earlier) = codec::encode_group_v2(group("old", 3)).expect("encodes");
    put_raw(store, &key, &earlier);
    let (_, format_4) = codec::encode_group_v3(consumer_group("v4", 6)).expect("encodes");
    put_raw(
        store,
        &store.keys().group(store.shard_of("v4"), "v4"),
        &format_4,
    );
    let mut unowned = consumer_group("v4", 6);
    unowned.ownership.clear();
    commit(store, vec![Mutation::PutGroup(consumer_group("new", 5))]);

    let expected = vec![consumer_group("new", 5), group("old", 3), unowned.clone()];
    assert_eq!(load(store).groups, expected);
    assert_eq!(
        store.load_group("old").expect("loads").record,
        Some(group("old", 3))
    );
    assert_eq!(store.load_group("v4").expect("loads").record, Some(unowned));
    for shard in 0..SHARDS {
        let in_shard: Vec<_> = expected
            .iter()
            .filter(|g| store.shard_of(&g.group_id) == shard)
            .cloned()
            .collect();
        let loaded = store.load_shard(shard).expect("loads");
        assert!(loaded.unreadable.is_empty());
        assert_eq!(loaded.state.groups, in_shard);
    }

    commit(store, vec![Mutation::PutGroup(consumer_group("old", 4))]);
    let (_, current) = codec::encode_group(consumer_group("old", 4)).expect("encodes");
    assert_eq!(raw(store, &key), Some(current));
    assert_eq!(
        store.load_group("old").expect("loads").record,
        Some(consumer_group("old", 4))
    );

    let damaged = store.keys().group(store.shard_of("bad"), "bad");
    put_raw(store, &damaged, &[0xff; 5]);
    let error = store.load().expect_err("a damaged value");
    assert!(
        matches!(&error, StoreError::Corrupt(reason) if reason.contains("/group/")
            && reason.contains("bad")),
        "{error:?}"
    );
}

#[test]
fn a_batch_of_a_thousand_offsets_lands_in_several_transactions() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    let offsets: Vec<_> = (0..1000).map(|p| offset("t", p, i64::from(p))).collect();
    let before = revision(store);
    commit(store, vec![put_offsets("big", offsets.clone())]);
    let transactions = revision(store) - before;
    // 1000 puts, at most 128 per transaction: 8 transactions.
    assert_eq!(transactions, 8);
    let mut expected = offsets;
    expected.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    assert_eq!(store.load_group("big").expect("loads").offsets, expected);
}

#[test]
fn queued_batches_share_transactions() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    let before = revision(store);
    let pending: Vec<_> = (0..200)
        .map(|i| store.apply(vec![put_offsets(&format!("g{i}"), vec![offset("t", 0, i)])]))
        .collect();
    block_on(async {
        for durable in pending {
            durable.await.expect("durable");
        }
    });
    let transactions = revision(store) - before;
    // 200 commits of one offset each: group commit packs them, 128 at most per transaction.
    assert!(
        (2..100).contains(&transactions),
        "{transactions} transactions for 200 batches"
    );
    assert_eq!(load(store).offsets.len(), 200);
}

#[test]
fn a_small_byte_limit_splits_a_batch_too() {
    let cluster = EtcdCluster::single().expect("etcd starts (see the message to install it)");
    let mut cfg = config(&cluster, "t");
    cfg.limits = TxnLimits {
        max_ops: 128,
        max_bytes: 2_000,
    };
    let store = EtcdStore::connect(cfg).expect("connects");
    own_all_shards(&store);
    let before = revision(&store);
    let offsets: Vec<_> = (0..40).map(|p| offset("t", p, 7)).collect();
    commit(&store, vec![put_offsets("g", offsets.clone())]);
    assert!(revision(&store) - before > 1, "split by bytes");
    assert_eq!(store.load_group("g").expect("loads").offsets, offsets);
}

#[test]
fn a_write_for_a_shard_taken_over_is_fenced_and_leaves_nothing() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    let fenced_group = "orders";
    let shard = store.shard_of(fenced_group);
    let other_group = (0..)
        .map(|i| format!("other-{i}"))
        .find(|g| store.shard_of(g) != shard)
        .expect("some group lands elsewhere");
    commit(store, vec![Mutation::PutGroup(group(fenced_group, 1))]);
    let mut lost = store.lost_shards();

    take_over(store, shard);
    // Submitted together: they share a transaction, which the compare fails; the other
    // shard's batch is written again without the fenced one.
    let fenced = store.apply(vec![
        Mutation::PutGroup(group(fenced_group, 2)),
        put_offsets(fenced_group, vec![offset("t", 0, 9)]),
    ]);
    let fine = store.apply(vec![put_offsets(&other_group, vec![offset("t", 0, 5)])]);
    assert_eq!(block_on(fenced), Err(StoreError::Fenced { shard }));
    assert_eq!(block_on(fine), Ok(()));

    let written = store.load_group(fenced_group).expect("loads");
    assert_eq!(
        written.record,
        Some(group(fenced_group, 1)),
        "generation 2 never landed"
    );
    assert!(written.offsets.is_empty());
    assert_eq!(store.shard_status(shard), ShardStatus::Lost);
    assert!(lost.has_changed().expect("the store is alive"));
    assert_eq!(*lost.borrow_and_update(), BTreeSet::from([shard]));

    // Later writes for the lost shard fail at once; granting it again (a new owner key
    // revision) lets them through.
    let before = revision(store);
    let again = store.apply(vec![Mutation::PutGroup(group(fenced_group, 3))]);
    assert_eq!(block_on(again), Err(StoreError::Fenced { shard }));
    assert_eq!(revision(store), before, "nothing was sent");
    store.release_shard(shard);
    let unowned = store.apply(vec![Mutation::PutGroup(group(fenced_group, 3))]);
    assert_eq!(block_on(unowned), Err(StoreError::NotOwner { shard }));
    own_all_shards(store);
    commit(store, vec![Mutation::PutGroup(group(fenced_group, 3))]);
    assert_eq!(
        store.load_group(fenced_group).expect("loads").record,
        Some(group(fenced_group, 3))
    );
}

#[test]
fn load_shard_reads_only_that_shard() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    let ids: Vec<String> = (0..20).map(|i| format!("group-{i}")).collect();
    let batch = ids
        .iter()
        .flat_map(|g| {
            [
                Mutation::PutGroup(group(g, 1)),
                put_offsets(g, vec![offset("t", 0, 1)]),
                put_history(g, vec![history("t", 0, 1)], vec![]),
                put_quarantine(g, vec![quarantined("t", 1, 1, 1)]),
            ]
        })
        .collect();
    commit(store, batch);
    let mut seen = 0;
    for shard in 0..SHARDS {
        let state = store.load_shard(shard).expect("loads").state;
        for record in &state.groups {
            assert_eq!(store.shard_of(&record.group_id), shard);
        }
        assert_eq!(state.groups.len(), state.offsets.len());
        let in_shard = |id: &String| store.shard_of(id) == shard;
        assert!(state.history.iter().all(|(id, _)| in_shard(id)));
        assert_eq!(state.history.len(), state.groups.len());
        assert!(state.quarantine.iter().all(|(id, _)| in_shard(id)));
        assert_eq!(state.quarantine.len(), state.groups.len());
        seen += state.groups.len();
    }
    assert_eq!(seen, ids.len());
}

/// An offset reset of three partitions: offsets put and removed, history appended and trimmed
/// (one entry below its own mutation's trim, which stays).
fn reset(group_id: &str, new_offset: i64, seq: u64) -> Vec<Mutation> {
    vec![
        put_offsets(
            group_id,
            vec![offset("t", 0, new_offset), offset("t", 1, new_offset)],
        ),
        Mutation::DeleteOffsets {
            group_id: group_id.into(),
            partitions: vec![("t".into(), 2)],
        },
        put_history(
            group_id,
            vec![
                history("t", 0, seq),
                history("t", 1, seq),
                history("t", 2, seq),
                history("t", 2, 1),
            ],
            vec![trim("t", 0, seq), trim("t", 2, seq)],
        ),
    ]
}

/// A reset's batch is one transaction (etcd's revision moves by one): all of it lands
/// together, under the shard's fencing compare; once the shard is taken over the next reset is
/// fenced and nothing of it lands.
#[test]
fn a_reset_batch_is_one_fenced_transaction() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    commit(
        store,
        vec![
            put_offsets(
                "g",
                vec![offset("t", 0, 1), offset("t", 1, 1), offset("t", 2, 1)],
            ),
            put_history(
                "g",
                vec![history("t", 0, 1), history("t", 1, 1), history("t", 2, 1)],
                vec![],
            ),
        ],
    );
    let before = revision(store);
    commit(store, reset("g", 7, 2));
    assert_eq!(revision(store) - before, 1, "one transaction");
    let g = store.load_group("g").expect("loads");
    assert_eq!(g.offsets, vec![offset("t", 0, 7), offset("t", 1, 7)]);
    assert_eq!(
        g.history,
        vec![
            history("t", 0, 2),
            history("t", 1, 1),
            history("t", 1, 2),
            history("t", 2, 1),
            history("t", 2, 2),
        ]
    );

    let shard = store.shard_of("g");
    take_over(store, shard);
    let before = revision(store);
    assert_eq!(
        block_on(store.apply(reset("g", 9, 3))),
        Err(StoreError::Fenced { shard })
    );
    assert_eq!(revision(store), before, "nothing was applied");
    assert_eq!(store.load_group("g").expect("loads"), g);
}

/// A reset too large for one etcd transaction is refused whole, with the limits named, and
/// nothing of it lands (spreading it would let a crash leave a mix); a commit of the same size
/// is spread over transactions as before.
#[test]
fn a_reset_larger_than_one_transaction_is_refused_not_spread() {
    let cluster = EtcdCluster::single().expect("etcd starts (see the message to install it)");
    let mut cfg = config(&cluster, "t");
    cfg.limits = TxnLimits {
        max_ops: 8,
        max_bytes: 1 << 20,
    };
    let store = EtcdStore::connect(cfg).expect("connects");
    own_all_shards(&store);
    let offsets: Vec<_> = (0..6).map(|p| offset("t", p, 1)).collect();
    commit(&store, vec![put_offsets("g", offsets.clone())]);
    let before = revision(&store);
    let reset: Vec<Mutation> = vec![
        put_offsets("g", (0..6).map(|p| offset("t", p, 9)).collect()),
        put_history("g", (0..6).map(|p| history("t", p, 1)).collect(), vec![]),
    ];
    assert!(
        reset.iter().any(|m| matches!(m, Mutation::PutHistory { entries, .. }
            if entries.iter().any(|w| w.entry.kind == muster_coordinator::storage::HistoryKind::Reset))),
        "history(_, _, 1) is a reset entry"
    );
    match block_on(store.apply(reset)) {
        Err(StoreError::Rejected(reason)) => {
            assert!(reason.contains("at most 8 operations"), "{reason}");
            assert!(reason.contains("--topic"), "{reason}");
        }
        other => panic!("expected the reset to be refused, got {other:?}"),
    }
    assert_eq!(revision(&store), before, "nothing was applied");
    assert_eq!(store.load_group("g").expect("loads").offsets, offsets);
    // The same number of offsets as a commit is spread over transactions.
    commit(
        &store,
        vec![put_offsets(
            "g",
            (0..12).map(|p| offset("t", p, 3)).collect(),
        )],
    );
    assert!(revision(&store) - before > 1, "spread");
}

/// A reset's batch with a part that cannot be encoded is refused whole: nothing is sent.
#[test]
fn a_reset_batch_with_an_unencodable_part_sends_nothing() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    commit(store, vec![put_offsets("g", vec![offset("t", 2, 1)])]);
    let before = (revision(store), load(store));
    let mut unwritable = consumer_group("g", 2);
    if let Some(consumer) = unwritable.consumer.as_mut() {
        consumer.members[0].state = 7;
    }
    let mut batch = reset("g", 7, 2);
    batch.push(Mutation::PutGroup(unwritable));
    let refused = block_on(store.apply(batch));
    assert!(
        matches!(refused, Err(StoreError::Rejected(_))),
        "{refused:?}"
    );
    assert_eq!((revision(store), load(store)), before);
}

/// A group's history and quarantine keys are under the documented prefixes, values are the
/// codec's bytes.
#[test]
fn history_and_quarantine_are_stored_under_their_keys() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    commit(
        store,
        vec![
            put_history("g", vec![history("t/x", 3, 42)], vec![]),
            put_quarantine("g", vec![quarantined("t/x", 3, 8, 99)]),
        ],
    );
    let shard = store.shard_of("g");
    let key = format!("/t/history/{shard}/g/t%2Fx/3/00000000000000000042");
    let entry = history("t/x", 3, 42).entry;
    assert_eq!(
        raw(store, key.as_bytes()),
        Some(codec::encode_history(entry).expect("encodes"))
    );
    let q = quarantined("t/x", 3, 8, 99);
    let key = format!("/t/quarantine/{shard}/g/t%2Fx/3");
    assert_eq!(
        raw(store, key.as_bytes()),
        Some(codec::encode_quarantine(q.write.committed, q.quarantined_at).expect("encodes"))
    );
}

/// Which of `endpoints` is the etcd leader (asked of each member: Maintenance.Status).
fn leader_index(store: &EtcdStore, endpoints: Vec<String>) -> usize {
    use crate::generated::etcdserverpb::maintenance_client::MaintenanceClient;
    use crate::generated::etcdserverpb::StatusRequest;
    store
        .block_on(async move {
            for (index, endpoint) in endpoints.into_iter().enumerate() {
                let channel = tonic::transport::Endpoint::from_shared(endpoint)
                    .expect("a valid endpoint")
                    .connect_lazy();
                let status = MaintenanceClient::new(channel)
                    .status(StatusRequest {})
                    .await
                    .expect("the member answers")
                    .into_inner();
                let member = status.header.map(|h| h.member_id);
                if member == Some(status.leader) {
                    return index;
                }
            }
            panic!("no member says it is the leader");
        })
        .expect("the runtime runs")
}

#[test]
fn writes_go_on_when_the_leader_of_three_members_is_killed() {
    let mut cluster = EtcdCluster::three().expect("etcd starts (see the message to install it)");
    let store = EtcdStore::connect(config(&cluster, "t")).expect("connects");
    own_all_shards(&store);
    commit(&store, vec![put_offsets("g", vec![offset("t", 0, 1)])]);
    let leader = leader_index(&store, cluster.endpoints());
    cluster.kill_member(leader);
    // The survivors elect a new leader meanwhile; no write fails, and the one caught by
    // the election waits about one attempt (a quarter of the 5 s request timeout), not all.
    let started = std::time::Instant::now();
    for i in 2..20 {
        commit(&store, vec![put_offsets("g", vec![offset("t", 0, i)])]);
    }
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_millis(4_500), "{took:?}");
    assert_eq!(
        store.load_group("g").expect("loads").offsets,
        vec![offset("t", 0, 19)]
    );
}

#[test]
fn an_unreachable_etcd_fails_at_connect() {
    let cluster = EtcdCluster::single().expect("etcd starts (see the message to install it)");
    let mut cfg = config(&cluster, "t");
    drop(cluster);
    cfg.request_timeout = std::time::Duration::from_millis(500);
    let error = EtcdStore::connect(cfg).expect_err("nothing listens");
    assert!(error.to_string().contains("etcd"), "{error}");
}

#[test]
fn close_waits_for_what_is_queued_and_refuses_more() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    let pending: Vec<_> = (0..50)
        .map(|i| store.apply(vec![put_offsets("g", vec![offset("t", i, 1)])]))
        .collect();
    store.close().expect("closes");
    block_on(async {
        for durable in pending {
            assert_eq!(durable.await, Ok(()), "queued before close: written");
        }
    });
    let late = store.apply(vec![put_offsets("g", vec![offset("t", 99, 1)])]);
    assert_eq!(block_on(late), Err(StoreError::Closed));
    assert_eq!(store.load_group("g").expect("loads").offsets.len(), 50);
}

/// Runs a future on the store's runtime.
fn run<T: Send + 'static>(
    store: &EtcdStore,
    future: std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>,
) -> T {
    store.block_on(future).expect("the runtime runs")
}

#[test]
fn once_a_lease_expires_the_new_owner_fences_the_old_one() {
    let cluster = EtcdCluster::single().expect("etcd starts (see the message to install it)");
    let old = EtcdStore::connect(config(&cluster, "t")).expect("connects");
    let new = EtcdStore::connect(config(&cluster, "t")).expect("connects");
    let shard = old.shard_of("orders");
    let owner_key = old.keys().owner(shard);
    let client = old.client().clone();

    // The old owner claims the shard on a 1 s lease, which it will never renew (a pause).
    let (old_lease, old_revision) = {
        let (client, key) = (client.clone(), owner_key.clone());
        run(
            &old,
            Box::pin(async move {
                let lease = client.lease_grant(1).await.expect("a lease");
                let claimed = client.claim(&key, b"old", lease.id).await.expect("claims");
                (lease, claimed)
            }),
        )
    };
    let old_revision = old_revision.expect("the key was free");
    old.own_shard(shard, old_revision);
    commit(&old, vec![Mutation::PutGroup(group("orders", 1))]);

    // The new owner's claim fails while the lease lives, and succeeds once etcd expired it.
    let new_lease = {
        let client = client.clone();
        run(
            &old,
            Box::pin(async move { client.lease_grant(10).await.expect("a lease") }),
        )
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let new_revision = loop {
        let (client, key) = (client.clone(), owner_key.clone());
        let claimed = run(
            &old,
            Box::pin(async move { client.claim(&key, b"new", new_lease.id).await.expect("txn") }),
        );
        if let Some(revision) = claimed {
            break revision;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the 1 s lease never expired"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    new.own_shard(shard, new_revision);
    {
        let client = client.clone();
        let renewed = run(
            &old,
            Box::pin(async move {
                (
                    client
                        .lease_keep_alive_once(old_lease.id, std::time::Duration::from_secs(1))
                        .await
                        .expect("asks"),
                    client
                        .lease_keep_alive_once(new_lease.id, std::time::Duration::from_secs(1))
                        .await
                        .expect("asks"),
                )
            }),
        );
        assert_eq!(renewed.0, None, "the old lease is gone");
        assert!(renewed.1.is_some_and(|ttl| ttl > 0), "the new one renews");
    }

    // The old owner resumes and writes: refused; the new owner's state stands.
    let stale = old.apply(vec![Mutation::PutGroup(group("orders", 2))]);
    assert_eq!(block_on(stale), Err(StoreError::Fenced { shard }));
    commit(&new, vec![Mutation::PutGroup(group("orders", 3))]);
    assert_eq!(
        new.load_group("orders").expect("loads").record,
        Some(group("orders", 3))
    );

    // Revoking the new lease frees the shard at once.
    let freed = run(
        &old,
        Box::pin(async move {
            client.lease_revoke(new_lease.id).await.expect("revokes");
            client.get(&owner_key).await.expect("reads")
        }),
    );
    assert_eq!(freed, None);
}

/// A shard with a damaged group record, a damaged offset of another group and a key that names
/// no group loads its healthy group whole; the two damaged groups are quarantined whole (none
/// of their keys loaded) and every bad key is named. `load_group` of a damaged group, and the
/// store's `load`, still fail: only the shard load is lenient. etcd gone, it fails.
#[test]
fn a_shard_load_quarantines_only_the_groups_of_undecodable_keys_and_fails_only_to_read() {
    let backend = EtcdBackend::new();
    let store = &backend.store;
    let shard = store.shard_of("healthy");
    let in_shard: Vec<String> = (0..)
        .map(|i| format!("g{i}"))
        .filter(|g| store.shard_of(g) == shard)
        .take(2)
        .collect();
    let (bad_record, bad_offset) = (in_shard[0].as_str(), in_shard[1].as_str());
    let batch = ["healthy", bad_record, bad_offset]
        .iter()
        .flat_map(|g| {
            [
                Mutation::PutGroup(group(g, 1)),
                put_offsets(g, vec![offset("t", 0, 1), offset("t", 1, 2)]),
                put_history(g, vec![history("t", 0, 1)], vec![]),
            ]
        })
        .collect();
    commit(store, batch);
    let record_key = store.keys().group(shard, bad_record);
    put_raw(store, &record_key, b"\xffgarbage");
    let offset_key = store.keys().offset(shard, bad_offset, "t", 1);
    put_raw(store, &offset_key, b"");
    let mut stray = store.keys().shard_groups_prefix(shard);
    stray.extend_from_slice(b"%ZZ");
    put_raw(store, &stray, b"whatever");

    let loaded = store
        .load_shard(shard)
        .expect("a damaged value is no read failure");
    assert_eq!(loaded.state.groups, vec![group("healthy", 1)]);
    let with_offsets: Vec<_> = loaded
        .state
        .offsets
        .iter()
        .map(|(g, _)| g.as_str())
        .collect();
    assert_eq!(with_offsets, ["healthy"]);
    assert_eq!(loaded.state.offsets[0].1.len(), 2);
    let with_history: Vec<_> = loaded
        .state
        .history
        .iter()
        .map(|(g, _)| g.as_str())
        .collect();
    assert_eq!(with_history, ["healthy"]);
    assert_eq!(
        loaded.quarantined(),
        BTreeSet::from([bad_record, bad_offset])
    );
    let named: BTreeSet<(Vec<u8>, Option<&str>)> = loaded
        .unreadable
        .iter()
        .map(|u| (u.key.clone(), u.group_id.as_deref()))
        .collect();
    assert_eq!(
        named,
        BTreeSet::from([
            (record_key.clone(), Some(bad_record)),
            (offset_key.clone(), Some(bad_offset)),
            (stray.clone(), None),
        ])
    );

    // Read again one group at a time (how a quarantined group is checked): still bad until
    // fixed; once its key is removed, it loads without it.
    let again = block_on_read(store, bad_offset);
    assert_eq!(again.quarantined(), BTreeSet::from([bad_offset]));
    assert!(again.state.groups.is_empty());
    let client = store.client().clone();
    let key = offset_key.clone();
    store
        .block_on(async move { client.delete(&key).await })
        .expect("the runtime runs")
        .expect("deleted");
    let fixed = block_on_read(store, bad_offset);
    assert!(fixed.unreadable.is_empty());
    assert_eq!(fixed.state.groups, vec![group(bad_offset, 1)]);
    assert_eq!(fixed.state.offsets[0].1, vec![offset("t", 0, 1)]);

    let error = store.load_group(bad_record).expect_err("a damaged record");
    assert!(
        matches!(&error, StoreError::Corrupt(r) if r.contains("/group/")),
        "{error:?}"
    );
    assert!(matches!(store.load(), Err(StoreError::Corrupt(_))));

    // A read that fails is still an error, and a different one: the ownership loop gives
    // such a shard back to be claimed again, and keeps a shard it could read.
    let mut backend = backend;
    backend.cluster.kill_member(0);
    let error = backend.store.load_shard(shard).expect_err("etcd is gone");
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
}

fn block_on_read(store: &EtcdStore, group_id: &str) -> super::ShardLoad {
    let client = store.client().clone();
    let keys = store.keys().clone();
    let (shard, group_id) = (store.shard_of(group_id), group_id.to_owned());
    store
        .block_on(
            async move { super::load::group_in_shard(&client, &keys, shard, &group_id).await },
        )
        .expect("the runtime runs")
        .expect("etcd answers")
}
