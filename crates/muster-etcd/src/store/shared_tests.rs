//! The writes other nodes race, against a real etcd (testkit) with two stores on one cluster
//! playing two nodes: topic changes by compare-and-swap (no change lost, exactly one create
//! wins) and cluster-wide `max_groups` (exactly the limit charged under concurrent charges
//! from both, units given back with the group's deletion and reconciled by a shard's next
//! owner).

use std::collections::BTreeMap;
use std::sync::Arc;

use muster_coordinator::storage::suite::{block_on, commit, group};
use muster_coordinator::storage::{Mutation, Store, StoreError, TopicChange};
use muster_protocol::TopicInfo;

use super::topics::cas_request;
use super::{EtcdStore, EtcdStoreConfig};
use crate::generated::etcdserverpb::compare::{CompareTarget, TargetUnion};
use crate::keys::KeyLayout;
use crate::testkit::EtcdCluster;

const SHARDS: u32 = 4;

fn node(cluster: &EtcdCluster) -> EtcdStore {
    EtcdStore::connect(EtcdStoreConfig::new(cluster.endpoints(), "shared", SHARDS))
        .expect("connects")
}

/// Claims `shard` for `store` as the ownership module would: a new owner key revision.
fn claim(store: &EtcdStore, shard: u32, node: &str) {
    let key = store.keys().owner(shard);
    let client = store.client().clone();
    let value = node.as_bytes().to_vec();
    let revision = store
        .block_on(async move { client.put(&key, &value).await })
        .expect("the runtime runs")
        .expect("the owner key is written");
    store.own_shard(shard, revision);
}

fn topic(name: &str, partitions: i32) -> TopicInfo {
    TopicInfo {
        topic: name.into(),
        partitions,
    }
}

#[test]
fn a_create_compares_absence_and_a_grow_the_count_it_read() {
    let keys = KeyLayout::new("c").expect("a valid name");
    let request = cas_request(
        &keys,
        &[
            TopicChange {
                topic: topic("new", 3),
                based_on: None,
            },
            TopicChange {
                topic: topic("old", 8),
                based_on: Some(4),
            },
        ],
    );
    assert_eq!(request.compare.len(), 2);
    assert_eq!(request.compare[0].target, CompareTarget::Create as i32);
    assert_eq!(
        request.compare[0].target_union,
        Some(TargetUnion::CreateRevision(0))
    );
    assert_eq!(request.compare[1].target, CompareTarget::Value as i32);
    assert_eq!(
        request.compare[1].target_union,
        Some(TargetUnion::Value(b"4".to_vec()))
    );
    assert_eq!(request.success.len(), 2, "one put each");
    assert_eq!(request.failure.len(), 2, "each read back on a conflict");
}

/// What one node does with a CreateTopics of `wanted` partitions: plan against what it knows,
/// write conditionally, and on a conflict plan again against what was found (the
/// supervisor's loop). Returns whether its write created the topic, grew it, or was not
/// needed (the count was reached or passed already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Done {
    Created,
    Grown,
    NotNeeded,
}

fn create_or_grow(store: &EtcdStore, known: &mut Option<i32>, wanted: i32) -> Done {
    loop {
        if known.is_some_and(|n| n >= wanted) {
            return Done::NotNeeded;
        }
        let change = TopicChange {
            topic: topic("race", wanted),
            based_on: *known,
        };
        let outcome = block_on(store.put_topics(vec![change])).expect("etcd answers");
        if !outcome.conflicted {
            assert_eq!(outcome.written, vec![topic("race", wanted)]);
            let done = if known.is_none() {
                Done::Created
            } else {
                Done::Grown
            };
            *known = Some(wanted);
            return done;
        }
        assert!(outcome.written.is_empty(), "{outcome:?}");
        let found = outcome.found.first().map(|t| t.partitions);
        assert!(
            found.is_some(),
            "a conflict on a topic that exists: {outcome:?}"
        );
        *known = found;
    }
}

/// Two nodes creating, then growing, one topic at once, each from what it last knew: exactly
/// one create wins, and the topic ends at the largest count either asked for (with
/// unconditional puts a node growing from a stale count lands last and lowers it).
#[test]
fn concurrent_creates_and_grows_of_one_topic_lose_nothing() {
    let cluster = EtcdCluster::single().expect("etcd starts");
    let (a, b) = (Arc::new(node(&cluster)), Arc::new(node(&cluster)));
    let run = |store: Arc<EtcdStore>, counts: Vec<i32>| {
        std::thread::spawn(move || {
            let mut known = None;
            counts
                .into_iter()
                .map(|wanted| create_or_grow(&store, &mut known, wanted))
                .collect::<Vec<_>>()
        })
    };
    let odd = run(Arc::clone(&a), (1..=40).filter(|n| n % 2 == 1).collect());
    let even = run(Arc::clone(&b), (1..=40).filter(|n| n % 2 == 0).collect());
    let mut done = odd.join().expect("node a");
    done.extend(even.join().expect("node b"));
    let created = done.iter().filter(|d| **d == Done::Created).count();
    assert_eq!(created, 1, "exactly one create wins: {done:?}");
    assert!(done.contains(&Done::Grown), "{done:?}");
    for store in [&a, &b] {
        let (topics, _) = block_on(store.read_topics()).expect("reads");
        assert_eq!(topics, vec![topic("race", 40)]);
    }
    // A grow from a count that is no longer the stored one is refused and says what is.
    let stale = block_on(a.put_topics(vec![TopicChange {
        topic: topic("race", 50),
        based_on: Some(39),
    }]))
    .expect("etcd answers");
    assert!(stale.conflicted && stale.written.is_empty(), "{stale:?}");
    assert_eq!(stale.found, vec![topic("race", 40)]);
}

/// Charges `groups` to `principal` (limit `max`), all at once, on `store`'s threads.
fn charge_all(
    store: &Arc<EtcdStore>,
    groups: Vec<String>,
    principal: &'static str,
    max: u32,
) -> Vec<std::thread::JoinHandle<(String, Result<(), StoreError>)>> {
    groups
        .into_iter()
        .map(|g| {
            let store = Arc::clone(store);
            std::thread::spawn(move || {
                let charged = store
                    .charge_group(&g, principal, Some(max))
                    .expect("the etcd store keeps quotas");
                (g, block_on(charged))
            })
        })
        .collect()
}

/// Group ids of `shard`, `count` of them.
fn groups_in(store: &EtcdStore, shard: u32, count: usize, tag: &str) -> Vec<String> {
    (0..)
        .map(|i| format!("{tag}-{i}"))
        .filter(|g| store.shard_of(g) == shard)
        .take(count)
        .collect()
}

fn units(store: &EtcdStore, principal: &str) -> usize {
    let client = store.client().clone();
    let prefix = store.keys().principal_groups_prefix(principal);
    store
        .block_on(async move { client.range_prefix(&prefix, 0).await })
        .expect("the runtime runs")
        .expect("etcd answers")
        .0
        .len()
}

/// Two nodes each charging 12 groups of one principal with `max_groups` 5 at once: exactly 5
/// are charged across both, the others refused with the error naming the quota; deleting a
/// group on one node frees a unit the other can take; a recorded group keeps its unit and a
/// never-recorded one gives it back when another node takes its shard over.
#[test]
fn max_groups_holds_across_nodes_under_concurrent_charges() {
    let cluster = EtcdCluster::single().expect("etcd starts");
    let (a, b) = (Arc::new(node(&cluster)), Arc::new(node(&cluster)));
    claim(&a, 0, "a");
    claim(&a, 1, "a");
    claim(&b, 2, "b");
    claim(&b, 3, "b");
    let mut mine = groups_in(&a, 0, 6, "g");
    mine.extend(groups_in(&a, 1, 6, "g"));
    let mut theirs = groups_in(&b, 2, 6, "g");
    theirs.extend(groups_in(&b, 3, 6, "g"));
    let mut handles = charge_all(&a, mine, "alice", 5);
    handles.extend(charge_all(&b, theirs, "alice", 5));
    let results: Vec<(String, Result<(), StoreError>)> = handles
        .into_iter()
        .map(|h| h.join().expect("a charge thread"))
        .collect();
    let charged: Vec<&String> = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(g, _)| g)
        .collect();
    assert_eq!(charged.len(), 5, "{results:?}");
    for (_, result) in results.iter().filter(|(_, r)| r.is_err()) {
        let Err(error) = result else { continue };
        assert!(
            matches!(
                error,
                StoreError::QuotaExceeded {
                    held: 5,
                    max: 5,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "principal alice holds 5 groups across the cluster, its max_groups is 5"
        );
    }
    assert_eq!(units(&a, "alice"), 5);
    // Charging a charged group again is the unit it holds.
    let again = charged[0].clone();
    let owner = if a.shard_of(&again) < 2 { &a } else { &b };
    block_on(
        owner
            .charge_group(&again, "alice", Some(5))
            .expect("keeps quotas"),
    )
    .expect("already charged");
    assert_eq!(units(&a, "alice"), 5);

    // A deletion on the node holding a charged group gives its unit back in the same write;
    // the other node can then charge one more, and no more.
    let deleted = charged[0].clone();
    let holder = if a.shard_of(&deleted) < 2 { &a } else { &b };
    let other = if a.shard_of(&deleted) < 2 { &b } else { &a };
    commit(
        holder.as_ref(),
        vec![Mutation::DeleteGroup {
            group_id: deleted.clone(),
        }],
    );
    assert_eq!(units(&a, "alice"), 4);
    let other_shard = if a.shard_of(&deleted) < 2 { 2 } else { 0 };
    let fresh = groups_in(other, other_shard, 2, "late");
    let fresh_charged = block_on(
        other
            .charge_group(&fresh[0], "alice", Some(5))
            .expect("keeps quotas"),
    );
    assert_eq!(fresh_charged, Ok(()));
    let refused = block_on(
        other
            .charge_group(&fresh[1], "alice", Some(5))
            .expect("keeps"),
    );
    assert!(
        matches!(refused, Err(StoreError::QuotaExceeded { .. })),
        "{refused:?}"
    );

    // Failover of shard 0 to b: of a's charged groups there, the one with a record stays
    // charged, the others (never recorded: they lived in a's memory only) give their units
    // back; a record with a creator and no unit is charged.
    let in_zero: Vec<String> = charged
        .iter()
        .copied()
        .chain([&fresh[0]])
        .filter(|g| a.shard_of(g) == 0 && **g != deleted)
        .cloned()
        .collect();
    let mut recorded = group("recorded-0", 1);
    recorded.group_id = groups_in(&a, 0, 1, "recorded")[0].clone();
    recorded.created_by = Some("bob".into());
    commit(a.as_ref(), vec![Mutation::PutGroup(recorded.clone())]);
    let kept = in_zero.first().cloned();
    if let Some(kept) = &kept {
        let mut record = group("kept", 1);
        record.group_id = kept.clone();
        record.created_by = Some("alice".into());
        commit(a.as_ref(), vec![Mutation::PutGroup(record)]);
    }
    // A group whose record names another creator than its unit's (the unit's group was
    // deleted and made again by someone else, in memory only) changes hands.
    let switched = groups_in(&a, 0, 1, "switched")[0].clone();
    block_on(
        a.charge_group(&switched, "erin", None)
            .expect("keeps quotas"),
    )
    .expect("charged");
    let mut record = group("switched", 1);
    record.group_id = switched.clone();
    record.created_by = Some("frank".into());
    commit(a.as_ref(), vec![Mutation::PutGroup(record)]);
    let before = units(&a, "alice");
    claim(&b, 0, "b");
    let state = b.load_shard(0).expect("loads").state;
    let loaded: BTreeMap<_, _> = state
        .groups
        .iter()
        .map(|g| (g.group_id.clone(), g.created_by.clone()))
        .collect();
    assert_eq!(loaded.len(), 2 + usize::from(kept.is_some()), "{loaded:?}");
    assert_eq!((units(&b, "erin"), units(&b, "frank")), (0, 1));
    let orphans = in_zero.len() - usize::from(kept.is_some());
    assert_eq!(units(&b, "alice"), before - orphans);
    assert_eq!(
        units(&b, "bob"),
        1,
        "the recorded group without a unit is charged"
    );
    // Loading again changes nothing: no unit counted twice.
    b.load_shard(0).expect("loads");
    assert_eq!(units(&b, "alice"), before - orphans);
    assert_eq!(units(&b, "bob"), 1);
    assert_eq!((units(&b, "erin"), units(&b, "frank")), (0, 1));
    // A group held back for an undecodable record (unreadable.rs) is not loaded but still
    // exists: its unit is kept, not given back as an orphan's.
    let held = groups_in(&b, 0, 1, "held")[0].clone();
    block_on(b.charge_group(&held, "gina", None).expect("keeps quotas")).expect("charged");
    let mut record = group("held", 1);
    record.group_id = held.clone();
    record.created_by = Some("gina".into());
    commit(b.as_ref(), vec![Mutation::PutGroup(record)]);
    let key = b.keys().group(0, &held);
    let client = b.client().clone();
    b.block_on(async move { client.put(&key, b"\xffgarbage").await })
        .expect("the runtime runs")
        .expect("the value is written");
    let load = b.load_shard(0).expect("a damaged value is no read failure");
    assert!(load.state.groups.iter().all(|g| g.group_id != held));
    assert_eq!(units(&b, "gina"), 1, "the held-back group keeps its unit");
    // b now gives the recorded group's unit back when it deletes it.
    commit(
        b.as_ref(),
        vec![Mutation::DeleteGroup {
            group_id: recorded.group_id.clone(),
        }],
    );
    assert_eq!(units(&b, "bob"), 0);
    // a, fenced out of shard 0, cannot charge there any more.
    let fenced = block_on(
        a.charge_group(&groups_in(&a, 0, 1, "z")[0], "carol", None)
            .expect("keeps"),
    );
    assert!(
        matches!(fenced, Err(StoreError::Fenced { shard: 0 })),
        "{fenced:?}"
    );
}
