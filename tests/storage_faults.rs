//! Storage faults seen from clients, without a disk: [`MemoryStore::fail_writes`] fails every
//! write as a full disk would, and a gated store holds writes back to put an OffsetCommit "in
//! flight" for as long as a test needs.
//!
//! - a group whose record cannot be written rolls back to what is durable: the refused
//!   rebalance's generation is never served, the member goes on at the durable generation once
//!   storage is back, and the next rebalance takes the next generation;
//! - OffsetCommit fails COORDINATOR_NOT_AVAILABLE while storage fails, and nothing of it is
//!   visible; `/readyz` is not ready meanwhile;
//! - retention never deletes a partition whose newer commit is still being written;
//! - DeleteGroups is written in line with the group's record writes: a record queued before it
//!   never lands after it and brings the group back;
//! - CreateTopics waits for the disk without stalling the supervisor, and admin requests held
//!   that way count against the server's `max_admin_requests_in_flight`: past it, admin
//!   requests are refused at once.

mod common;

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use muster_coordinator::storage::{
    Durable, DurableSender, MemoryStore, Mutation, Store, StoreError, StoredGroup, StoredState,
};
use muster_protocol::*;

const GROUP: &str = "faulty";

/// Heartbeats every 20 ms until the answer is `want` (any other answer is fine meanwhile).
async fn heartbeat_until(member: &mut Member, want: ErrorCode) -> anyhow::Result<()> {
    let start = Instant::now();
    while member.heartbeat().await? != code(want) {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(10),
            "{}: no {want:?} within 10 s",
            member.id
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

#[tokio::test]
async fn a_rebalance_that_cannot_be_written_is_rolled_back() -> anyhow::Result<()> {
    let store = Arc::new(MemoryStore::new());
    let shared: Arc<dyn Store> = store.clone();
    let server = start_server_with(fast_config(), |o| o.store = shared);
    let addr = server.local_addr();
    let mut members = form_group(addr, GROUP, 1, LONG_MS, LONG_MS).await?;
    let mut leader = members.remove(0);
    let durable_generation = leader.generation;

    store.fail_writes(true);
    // A newcomer starts a rebalance; its state cannot be written, so the join is refused
    // instead of being held on a state that is not durable.
    let newcomer_conn = Conn::connect(addr, "newcomer").await?;
    let mut newcomer = Member::pending(newcomer_conn, GROUP, LONG_MS, LONG_MS).await?;
    let refused = as_join(
        newcomer
            .conn
            .call(join_request(GROUP, &newcomer.id, LONG_MS, LONG_MS))
            .await?,
    );
    assert_eq!(refused.error_code, code(ErrorCode::CoordinatorNotAvailable));
    // Until the durable record is back, the group answers nothing from the unwritten state.
    assert_eq!(
        leader.heartbeat().await?,
        code(ErrorCode::CoordinatorNotAvailable)
    );

    store.fail_writes(false);
    // The group reloads its durable record.
    heartbeat_until(&mut leader, ErrorCode::None).await?;
    let mut admin = Conn::connect(addr, "admin").await?;
    let described = describe_one(&mut admin, GROUP).await?;
    assert_eq!(described.state, "Stable");
    assert_eq!(described.generation_id, durable_generation);
    assert_eq!(described.members.len(), 1);

    // The next rebalance takes the next generation: the refused one was never served.
    let pending = as_join(
        newcomer
            .conn
            .call(join_request(GROUP, "", LONG_MS, LONG_MS))
            .await?,
    );
    newcomer.id = pending.member_id;
    let newcomer_join = newcomer.send_join().await?;
    heartbeat_until(&mut leader, ErrorCode::RebalanceInProgress).await?;
    let rejoined = leader.join().await?;
    assert_eq!(rejoined.generation_id, durable_generation + 1);
    let joined = newcomer.joined(newcomer_join).await?;
    assert_eq!(joined.generation_id, durable_generation + 1);
    // The new generation is written once, with the leader's assignment, before any SyncGroup
    // answer (protocol §6.6).
    let synced = leader.sync(Vec::new()).await?;
    assert_eq!(synced.error_code, code(ErrorCode::None));
    let stored = store.load_group(GROUP)?;
    assert_eq!(
        stored.record.map(|r| r.generation),
        Some(durable_generation + 1)
    );
    Ok(())
}

#[tokio::test]
async fn commits_fail_clearly_while_storage_fails() -> anyhow::Result<()> {
    let store = Arc::new(MemoryStore::new());
    let shared: Arc<dyn Store> = store.clone();
    let server = start_server_with(fast_config(), |o| o.store = shared);
    let mut conn = Conn::connect(server.local_addr(), "c").await?;
    let ok = as_commit(
        conn.call(commit(GROUP, -1, "", &[(TOPIC, 0, 1, None)]))
            .await?,
    );
    assert!(commit_codes(&ok).iter().all(|(_, _, c)| *c == 0));

    store.fail_writes(true);
    let failed = as_commit(
        conn.call(commit(GROUP, -1, "", &[(TOPIC, 0, 2, None)]))
            .await?,
    );
    assert!(commit_codes(&failed)
        .iter()
        .all(|(_, _, c)| *c == code(ErrorCode::CoordinatorNotAvailable)));
    let offsets = fetched(&as_fetch(conn.call(fetch(GROUP, None)).await?));
    assert_eq!(
        offsets[&(TOPIC.to_owned(), 0)].0,
        1,
        "a failed commit is not visible"
    );

    store.fail_writes(false);
    let ok = as_commit(
        conn.call(commit(GROUP, -1, "", &[(TOPIC, 0, 3, None)]))
            .await?,
    );
    assert!(commit_codes(&ok).iter().all(|(_, _, c)| *c == 0));
    Ok(())
}

/// Batches held back by a closed gate, with how to complete each.
type Held = VecDeque<(Vec<Mutation>, DurableSender)>;

/// A store that, while closed, queues every batch (keeping their order) instead of applying it.
struct GatedStore {
    inner: MemoryStore,
    gate: Mutex<Option<Held>>,
}

impl GatedStore {
    fn close_gate(&self) {
        *self.gate.lock().expect("gate") = Some(VecDeque::new());
    }

    /// Applies what was queued, in order, and returns it; the gate stays closed for what
    /// comes next.
    fn flush(&self) -> Vec<Mutation> {
        let queued = std::mem::take(self.gate.lock().expect("gate").get_or_insert_default());
        let mut applied = Vec::new();
        for (batch, done) in queued {
            applied.extend(batch.iter().cloned());
            done.complete(resolved(self.inner.apply(batch)));
        }
        applied
    }
}

/// The outcome of an already-resolved `Durable` (MemoryStore resolves at once).
fn resolved(durable: Durable) -> Result<(), StoreError> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut durable = std::pin::pin!(durable);
    match durable.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(result) => result,
        std::task::Poll::Pending => Err(StoreError::Io("memory store did not resolve".into())),
    }
}

impl Store for GatedStore {
    fn load(&self) -> Result<StoredState, StoreError> {
        self.inner.load()
    }

    fn load_group(&self, group_id: &str) -> Result<StoredGroup, StoreError> {
        self.inner.load_group(group_id)
    }

    fn apply(&self, batch: Vec<Mutation>) -> Durable {
        let mut gate = self.gate.lock().expect("gate");
        match gate.as_mut() {
            Some(queue) => {
                let (done, durable) = Durable::pending();
                queue.push_back((batch, done));
                durable
            }
            None => self.inner.apply(batch),
        }
    }
}

#[tokio::test]
async fn retention_waits_for_a_commit_in_flight() -> anyhow::Result<()> {
    let store = Arc::new(GatedStore {
        inner: MemoryStore::new(),
        gate: Mutex::new(None),
    });
    let shared: Arc<dyn Store> = store.clone();
    let config = muster_coordinator::GroupConfig {
        offsets_retention_ms: 400,
        empty_group_removal_ms: 400,
        ..fast_config()
    };
    let server = start_server_with(config, |o| o.store = shared);
    let mut conn = Conn::connect(server.local_addr(), "c").await?;
    let ok = as_commit(
        conn.call(commit(GROUP, -1, "", &[(TOPIC, 0, 1, None)]))
            .await?,
    );
    assert!(commit_codes(&ok).iter().all(|(_, _, c)| *c == 0));

    // A newer commit of the same partition stays in flight past the old offset's expiry.
    tokio::time::sleep(Duration::from_millis(150)).await;
    store.close_gate();
    let in_flight = conn
        .send(commit(GROUP, -1, "", &[(TOPIC, 0, 2, None)]))
        .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let applied = store.flush();
    let answer = as_commit(wait(in_flight).await?);
    assert!(commit_codes(&answer).iter().all(|(_, _, c)| *c == 0));
    assert!(
        !applied.iter().any(|m| matches!(
            m,
            Mutation::DeleteOffsets { .. } | Mutation::DeleteGroup { .. }
        )),
        "retention deleted behind a commit in flight: {applied:?}"
    );
    let stored = store.inner.load_group(GROUP)?;
    assert!(
        stored
            .offsets
            .iter()
            .any(|w| w.partition == 0 && w.committed.offset == 2),
        "the acknowledged offset is durable: {stored:?}"
    );
    Ok(())
}

/// A store whose `close` hangs, as on a disk that stopped answering, until the test lets go.
struct HungStore {
    inner: MemoryStore,
    hang: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Store for HungStore {
    fn load(&self) -> Result<StoredState, StoreError> {
        self.inner.load()
    }

    fn apply(&self, batch: Vec<Mutation>) -> Durable {
        self.inner.apply(batch)
    }

    fn close(&self) -> Result<(), StoreError> {
        let _ = self.hang.lock().expect("hang").recv();
        Ok(())
    }
}

#[test]
fn shutdown_is_bounded_when_the_store_hangs() -> anyhow::Result<()> {
    let (release, hang) = std::sync::mpsc::channel::<()>();
    let store: Arc<dyn Store> = Arc::new(HungStore {
        inner: MemoryStore::new(),
        hang: Mutex::new(hang),
    });
    let server = start_server_with(fast_config(), |o| {
        o.store = store;
        o.shutdown_timeout = Duration::from_millis(200);
    });
    let (stopped, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        server.stop();
        let _ = stopped.send(());
    });
    // Not a latency figure: only that shutdown ends at all (its deadline is 200 ms).
    let ended = done.recv_timeout(Duration::from_secs(20)).is_ok();
    drop(release);
    assert!(ended, "shutdown waited for a hung store past its deadline");
    Ok(())
}

#[tokio::test]
async fn create_topics_waits_for_storage_without_stalling_the_supervisor() -> anyhow::Result<()> {
    let store = Arc::new(GatedStore {
        inner: MemoryStore::new(),
        gate: Mutex::new(None),
    });
    let shared: Arc<dyn Store> = store.clone();
    let server = start_server_with(fast_config(), |o| o.store = shared);
    let mut conn = Conn::connect(server.local_addr(), "admin").await?;

    store.close_gate();
    let mut first = conn.send(create_topics(&[("t", 4)])).await?;
    // A second change of the same topic, planned against the first once that is durable: a
    // lower count is refused, not applied over it.
    let mut second = conn.send(create_topics(&[("t", 2)])).await?;
    // The supervisor keeps answering while the change waits for the disk.
    let listed = as_list(wait_for(conn.send(list_groups(&[])).await?, ANSWER_TIMEOUT).await?);
    assert_eq!(listed.error_code, 0);
    assert_pending(&mut first, "CreateTopics answered before it was durable");
    assert_pending(&mut second, "the second CreateTopics overtook the first");
    let described = as_describe_topics(conn.call(describe_topics(Some(&["t"]))).await?);
    assert!(
        described.topics.iter().all(|t| t.partitions != 4),
        "the catalog changed before the change was durable: {described:?}"
    );

    let applied = store.flush();
    assert_eq!(applied.len(), 1, "{applied:?}");
    let created = as_create_topics(wait(first).await?);
    assert_eq!(created.results[0].error_code, 0);
    let refused = as_create_topics(wait(second).await?);
    assert_eq!(
        refused.results[0].error_code,
        code(ErrorCode::InvalidPartitions)
    );
    assert!(store.flush().is_empty(), "the refused change wrote nothing");
    let described = as_describe_topics(conn.call(describe_topics(Some(&["t"]))).await?);
    assert_eq!(described.topics[0].partitions, 4);
    Ok(())
}

/// The server's bound on admin requests in flight (`max_admin_requests_in_flight`, protocol
/// §6.18): two CreateTopics held by a slow disk fill a bound of 2, so further admin requests,
/// on any connection, are answered RESOURCE_LIMIT_REACHED at once and change nothing, while
/// group requests are served as usual; once the two are answered their places are free again.
#[tokio::test]
async fn admin_requests_in_flight_are_bounded_server_wide() -> anyhow::Result<()> {
    let store = Arc::new(GatedStore {
        inner: MemoryStore::new(),
        gate: Mutex::new(None),
    });
    let shared: Arc<dyn Store> = store.clone();
    let mut config = fast_config();
    config.limits.max_admin_requests_in_flight = 2;
    let server = start_server_with(config, |o| o.store = shared);
    let mut first = Conn::connect(server.local_addr(), "admin-1").await?;
    let mut second = Conn::connect(server.local_addr(), "admin-2").await?;

    store.close_gate();
    // One waits for the disk, the other (the same change) behind it in the supervisor: a
    // session takes its requests' places in the order it reads them, so both hold theirs
    // before the ListGroups after them is read.
    let mut writing = first.send(create_topics(&[("t", 4)])).await?;
    let mut waiting = first.send(create_topics(&[("t", 4)])).await?;
    let full = code(ErrorCode::ResourceLimitReached);
    let refused = |r: Response| match r {
        Response::Error(e) => (e.error_code, e.message),
        other => panic!("expected Error, got {other:?}"),
    };
    let (error, message) = refused(first.call(list_groups(&[])).await?);
    assert_eq!(error, full, "{message}");
    assert!(
        message.contains("too many admin requests in flight") && message.contains("(2)"),
        "{message}"
    );
    // Server-wide: another connection's admin requests are refused too, and a refused
    // CreateTopics creates nothing.
    let (error, _) = refused(second.call(describe_topics(None)).await?);
    assert_eq!(error, full);
    let (error, _) = refused(second.call(create_topics(&[("refused", 1)])).await?);
    assert_eq!(error, full);
    // Group requests do not count: the supervisor still routes them.
    let fetched = as_fetch(second.call(fetch(GROUP, None)).await?);
    assert_eq!(fetched.error_code, 0);
    assert_pending(&mut writing, "CreateTopics answered before it was durable");
    assert_pending(&mut waiting, "the second CreateTopics overtook the first");

    // Answered, the two give their places back (before their answers leave the server).
    assert_eq!(store.flush().len(), 1);
    let created = as_create_topics(wait(writing).await?);
    assert_eq!(created.results[0].error_code, 0);
    let unchanged = as_create_topics(wait(waiting).await?);
    assert_eq!(unchanged.results[0].error_code, 0);
    let listed = as_list(first.call(list_groups(&[])).await?);
    assert_eq!(listed.error_code, 0);
    let described = as_describe_topics(second.call(describe_topics(None)).await?);
    let names: Vec<&str> = described.topics.iter().map(|t| t.topic.as_str()).collect();
    assert_eq!(
        names,
        ["t"],
        "only the admitted CreateTopics changed the catalog"
    );
    Ok(())
}

/// DeleteGroups is one of the group's record writes, in their order: a record queued behind a
/// write in flight (the last members leaving) never lands after the deletion and brings the
/// deleted group back (found in review: the deletion used to go to the store at once).
#[tokio::test]
async fn a_deletion_is_never_overtaken_by_a_record_queued_before_it() -> anyhow::Result<()> {
    let store = Arc::new(GatedStore {
        inner: MemoryStore::new(),
        gate: Mutex::new(None),
    });
    let shared: Arc<dyn Store> = store.clone();
    let server = start_server_with(fast_config(), |o| o.store = shared);
    let addr = server.local_addr();
    let members = form_group(addr, GROUP, 2, LONG_MS, LONG_MS).await?;
    let ids: Vec<String> = members.iter().map(|m| m.id.clone()).collect();
    let mut conn = Conn::connect(addr, "admin").await?;

    store.close_gate();
    // The first leave's write is in flight (held by the gate); the second's record queues
    // behind it in the group.
    let first = conn.send(leave(GROUP, &[&ids[0]])).await?;
    let second = conn.send(leave(GROUP, &[&ids[1]])).await?;
    // The leaves reach the group straight from the connection, DeleteGroups through the
    // supervisor: on a busy machine it could overtake them. Wait until the group is Empty in
    // memory (both leaves handled, their writes still held by the gate).
    let mut admin = Conn::connect(addr, "describer").await?;
    let until = Instant::now() + Duration::from_secs(10);
    while describe_one(&mut admin, GROUP).await?.state != "Empty" {
        anyhow::ensure!(Instant::now() < until, "the leaves were never handled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The group is Empty in memory: DeleteGroups is accepted and waits for its write.
    let mut deleted = conn.send(delete_groups(&[GROUP])).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_pending(&mut deleted, "DeleteGroups before its write is durable");
    let mut applied = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !applied.iter().any(is_delete) {
        applied.extend(store.flush());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    applied.extend(store.flush());
    for answer in [wait(first).await?, wait(second).await?] {
        let Response::LeaveGroup(l) = answer else {
            anyhow::bail!("not a LeaveGroup answer: {answer:?}")
        };
        assert_eq!(l.error_code, 0);
    }
    let Response::DeleteGroups(d) = wait(deleted).await? else {
        anyhow::bail!("not a DeleteGroups answer")
    };
    assert_eq!(d.results[0].error_code, 0, "{d:?}");
    let at = applied
        .iter()
        .position(is_delete)
        .expect("the deletion is written");
    assert!(
        !applied[at..]
            .iter()
            .any(|m| matches!(m, Mutation::PutGroup(_))),
        "a record was written after the deletion: {applied:?}"
    );
    let stored = store.inner.load_group(GROUP)?;
    assert!(
        stored.record.is_none(),
        "the deleted group is back: {stored:?}"
    );
    Ok(())
}

fn is_delete(m: &Mutation) -> bool {
    matches!(m, Mutation::DeleteGroup { .. })
}
