//! [`EtcdStore`]: the coordinator's `Store` on etcd, for one cluster (key prefix), with every
//! group write fenced on this node's ownership of the group's shard.
//!
//! Fencing: the store keeps, per shard, the mod revision of the shard's ownership key
//! ([`KeyLayout::owner`]) as this node created it ([`EtcdStore::own_shard`]; the ownership
//! module sets it, tests create the keys themselves). Every transaction compares the owner
//! key's mod revision of each shard it writes to the one recorded; if another node has taken
//! the shard (its lease expired and the key was recreated, or it was overwritten), the compare
//! fails, nothing of that transaction is applied, the shard is marked lost
//! ([`ShardStatus::Lost`], [`EtcdStore::lost_shards`]) and the batches that wrote to it resolve
//! with `StoreError::Fenced`. A write for a shard not owned at all resolves with
//! `StoreError::NotOwner` without being sent. Topic catalog writes are cluster-wide and not
//! fenced; CreateTopics writes them by compare-and-swap ([`topics`]).
//!
//! Writes go through one writer task ([`writer`]) that group-commits: everything queued while a
//! transaction was in flight goes into the next ones (plan.rs). A `Durable` resolves only after
//! etcd has accepted every transaction carrying its batch. The store runs its own small tokio
//! runtime, so it can be used from actix actors and from plain threads alike.

mod load;
mod plan;
mod quota;
#[cfg(test)]
mod secure_tests;
#[cfg(test)]
mod shared_tests;
#[cfg(test)]
mod tests;
mod topics;
mod unreadable;
mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use muster_coordinator::storage::{
    Durable, DurableSender, Mutation, Store, StoreError, StoredGroup, StoredState, TopicChange,
    TopicsWrite,
};
use muster_protocol::TopicInfo;
use tokio::sync::{mpsc, watch};

use crate::client::{EtcdClient, EtcdClientOptions};
use crate::error::EtcdError;
use crate::keys::KeyLayout;
use crate::security::EtcdSecurity;
use crate::shard::shard_of;

pub use plan::TxnLimits;
pub use unreadable::{ShardLoad, UnreadableKey};

/// How to reach etcd and which cluster to store.
#[derive(Debug, Clone)]
pub struct EtcdStoreConfig {
    /// etcd client URLs (`http://host:port`, `https://host:port` or `host:port`).
    pub endpoints: Vec<String>,
    /// TLS and the etcd user (none by default).
    pub security: EtcdSecurity,
    /// The cluster name: the key prefix (`/<cluster>/`).
    pub cluster: String,
    /// How many shards groups are spread over ([`shard_of`]).
    pub shards: u32,
    /// Deadline of every etcd request (and of connecting).
    pub request_timeout: Duration,
    pub limits: TxnLimits,
}

impl EtcdStoreConfig {
    pub fn new(endpoints: Vec<String>, cluster: impl Into<String>, shards: u32) -> Self {
        EtcdStoreConfig {
            endpoints,
            security: EtcdSecurity::default(),
            cluster: cluster.into(),
            shards,
            request_timeout: Duration::from_secs(5),
            limits: TxnLimits::default(),
        }
    }
}

/// Where this node stands with one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardStatus {
    /// Not granted to this store (or released): writes get `NotOwner`.
    NotOwned,
    /// Owned: writes are conditioned on the owner key still having this mod revision.
    Owned { owner_mod_revision: i64 },
    /// A write found the owner key changed: another node has the shard. Writes get `Fenced`
    /// until the ownership module grants it again.
    Lost,
}

/// State the store's handle and its writer share.
struct Shared {
    keys: KeyLayout,
    shards: u32,
    limits: TxnLimits,
    ownership: Mutex<BTreeMap<u32, ShardStatus>>,
    lost: watch::Sender<BTreeSet<u32>>,
    healthy: AtomicBool,
}

impl Shared {
    fn ownership(&self) -> MutexGuard<'_, BTreeMap<u32, ShardStatus>> {
        // The map is plain data, consistent after any panic: keep using it.
        self.ownership
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn status(&self, shard: u32) -> ShardStatus {
        self.ownership()
            .get(&shard)
            .copied()
            .unwrap_or(ShardStatus::NotOwned)
    }

    /// Marks shards lost (a failed compare showed another owner) unless the ownership module
    /// has granted them again since the compared revision; returns those marked.
    fn mark_lost(&self, compared: &[(u32, i64)]) -> BTreeSet<u32> {
        let mut marked = BTreeSet::new();
        {
            let mut ownership = self.ownership();
            for &(shard, revision) in compared {
                let status = ownership.entry(shard).or_insert(ShardStatus::NotOwned);
                if *status
                    == (ShardStatus::Owned {
                        owner_mod_revision: revision,
                    })
                {
                    *status = ShardStatus::Lost;
                    marked.insert(shard);
                }
            }
        }
        self.lost
            .send_modify(|lost| lost.extend(marked.iter().copied()));
        marked
    }
}

/// A queued batch and whom to tell.
/// A queued batch, whom to tell, and the ownership it was made under.
type Queued = (Vec<Mutation>, DurableSender, Fence);

/// Each shard a batch writes to, with its status when the batch was submitted. The batch is
/// written only while that is still the status: a batch made before this node lost a shard
/// and got it back (a new claim, a new revision) must not be written under the new claim.
pub(crate) type Fence = Vec<(u32, ShardStatus)>;

impl Shared {
    /// The fence of a batch: the shards its mutations touch and their current status.
    fn fence(&self, batch: &[Mutation]) -> Fence {
        let mut fence: Fence = Vec::with_capacity(1);
        for mutation in batch {
            let group_id = match mutation {
                Mutation::PutGroup(record) => &record.group_id,
                Mutation::DeleteGroup { group_id }
                | Mutation::PutOffsets { group_id, .. }
                | Mutation::DeleteOffsets { group_id, .. }
                | Mutation::PutRebalances { group_id, .. }
                | Mutation::PutHistory { group_id, .. }
                | Mutation::PutQuarantine { group_id, .. }
                | Mutation::DeleteQuarantine { group_id, .. } => group_id,
                Mutation::PutTopic(_) => continue,
            };
            let shard = shard_of(group_id, self.shards);
            if !fence.iter().any(|(s, _)| *s == shard) {
                fence.push((shard, self.status(shard)));
            }
        }
        fence
    }
}

/// The `Store` on etcd (module docs).
pub struct EtcdStore {
    shared: Arc<Shared>,
    /// The quota units this node's groups hold (quota.rs).
    charges: Arc<quota::Charges>,
    client: EtcdClient,
    queue: Mutex<Option<mpsc::UnboundedSender<Queued>>>,
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl EtcdStore {
    /// Connects to etcd and starts the writer. Fails if the cluster name is unusable, etcd
    /// does not answer, or its user may not read and write under the cluster's prefix.
    pub fn connect(config: EtcdStoreConfig) -> Result<Self, EtcdError> {
        let keys = KeyLayout::new(&config.cluster)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("muster-etcd")
            .enable_all()
            .build()
            .map_err(|e| EtcdError::Runtime(e.to_string()))?;
        let client = {
            let _entered = runtime.enter();
            let options = EtcdClientOptions {
                request_timeout: config.request_timeout,
                security: config.security.clone(),
                key_prefix: String::from_utf8_lossy(&keys.cluster_prefix()).into_owned(),
            };
            EtcdClient::connect_with(&config.endpoints, &options)?
        };
        let shared = Arc::new(Shared {
            keys,
            shards: config.shards.max(1),
            limits: config.limits,
            ownership: Mutex::new(BTreeMap::new()),
            lost: watch::channel(BTreeSet::new()).0,
            healthy: AtomicBool::new(true),
        });
        let charges = Arc::new(quota::Charges::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = runtime.spawn(writer::run(
            Arc::clone(&shared),
            Arc::clone(&charges),
            client.clone(),
            rx,
        ));
        let store = EtcdStore {
            shared,
            charges,
            client,
            queue: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            runtime: Some(runtime),
        };
        // A first request: a wrong endpoint, a down etcd, a refused certificate or password, or
        // a user without rights on the prefix shows at startup, not at the first write.
        let keys = store.shared.keys.clone();
        let client = store.client.clone();
        store
            .block_on(async move { client.check_access(&keys).await })
            .map_err(|e| EtcdError::Runtime(e.to_string()))??;
        Ok(store)
    }

    /// The client this store writes through (the ownership module shares it).
    pub fn client(&self) -> &EtcdClient {
        &self.client
    }

    /// The cluster's key layout.
    pub fn keys(&self) -> &KeyLayout {
        &self.shared.keys
    }

    pub fn shards(&self) -> u32 {
        self.shared.shards
    }

    /// The shard of a group.
    pub fn shard_of(&self, group_id: &str) -> u32 {
        shard_of(group_id, self.shared.shards)
    }

    /// Records that this node owns `shard` through the owner key ([`KeyLayout::owner`]) as
    /// written at `owner_mod_revision`: from now on its writes are conditioned on that.
    pub fn own_shard(&self, shard: u32, owner_mod_revision: i64) {
        self.shared
            .ownership()
            .insert(shard, ShardStatus::Owned { owner_mod_revision });
        self.shared.lost.send_modify(|lost| {
            lost.remove(&shard);
        });
    }

    /// Forgets `shard` (given away): later writes for it get `NotOwner`.
    pub fn release_shard(&self, shard: u32) {
        self.shared.ownership().remove(&shard);
        self.charges.forget_shard(shard);
        self.shared.lost.send_modify(|lost| {
            lost.remove(&shard);
        });
    }

    pub fn shard_status(&self, shard: u32) -> ShardStatus {
        self.shared.status(shard)
    }

    /// The shards found taken over by another node, updated as writes discover them (the
    /// ownership module watches this to drop their groups and answer NOT_COORDINATOR).
    pub fn lost_shards(&self) -> watch::Receiver<BTreeSet<u32>> {
        self.shared.lost.subscribe()
    }

    /// Everything stored for one shard (how a node taking a shard over loads it); topics are
    /// not included (see [`Store::load`]). Keys that cannot be decoded quarantine their groups
    /// ([`ShardLoad`]); only a failed read is an error. With the shard owned, its groups' quota
    /// units are reconciled with what was loaded first ([`EtcdStore::read_shard`]).
    pub fn load_shard(&self, shard: u32) -> Result<ShardLoad, StoreError> {
        let client = self.client.clone();
        let shared = Arc::clone(&self.shared);
        let charges = Arc::clone(&self.charges);
        self.block_on(async move { read(&client, &shared, &charges, shard).await })?
    }

    /// Says etcd answered a request of this node just now (the ownership loop's periodic read):
    /// a store marked unhealthy by a failed write recovers without waiting for a write to
    /// succeed, which a node whose groups are idle might not make for a long time.
    pub fn reachable(&self) {
        self.shared.healthy.store(true, Ordering::Relaxed);
    }

    /// Says etcd did not answer this node (its periodic read failed, or its lease could not be
    /// renewed): the store reports itself unhealthy (`/readyz` says not ready) until etcd
    /// answers again, even when no write has failed yet.
    pub fn unreachable(&self) {
        self.shared.healthy.store(false, Ordering::Relaxed);
    }

    /// As [`EtcdStore::load_shard`], awaited (from any tokio runtime: the ownership loop's).
    /// The quota units of the shard's groups are made to match what was loaded (units of
    /// groups that were never recorded given back, recorded groups without one charged:
    /// quota.rs; a quarantined group keeps its unit) before the load is returned, so before the
    /// shard's groups are served. A failure there is logged, not returned: the shard is
    /// served, and its next owner reconciles again.
    pub async fn read_shard(&self, shard: u32) -> Result<ShardLoad, StoreError> {
        read(&self.client, &self.shared, &self.charges, shard).await
    }

    /// One group's keys under `shard`'s prefixes, read as [`EtcdStore::read_shard`] reads
    /// them: how a quarantined group is checked again (its keys fixed or removed since). The
    /// shard is the one it was found in, not recomputed: the same keys are read again.
    pub async fn read_group(&self, shard: u32, group_id: &str) -> Result<ShardLoad, StoreError> {
        load::group_in_shard(&self.client, &self.shared.keys, shard, group_id).await
    }

    /// The topic catalog and the etcd revision it was read at (watch from the one after).
    pub async fn read_topics(&self) -> Result<(Vec<TopicInfo>, i64), StoreError> {
        load::catalog(&self.client, &self.shared.keys).await
    }

    /// A topic as a watch saw its key and value.
    pub fn parse_topic(&self, key: &[u8], value: &[u8]) -> Result<TopicInfo, StoreError> {
        load::topic(&self.shared.keys, key, value)
    }

    /// Runs `future` on the store's runtime and waits for it, from any thread (also from
    /// inside another runtime: the wait is a plain blocking receive, like a file read).
    fn block_on<F>(&self, future: F) -> Result<F::Output, StoreError>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let runtime = self.runtime.as_ref().ok_or(StoreError::Closed)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().map_err(|_| StoreError::Closed)
    }
}

/// A shard's state, its quota units reconciled with it (`read_shard`).
async fn read(
    client: &EtcdClient,
    shared: &Shared,
    charges: &quota::Charges,
    shard: u32,
) -> Result<ShardLoad, StoreError> {
    let load = load::shard(client, &shared.keys, shard).await?;
    // A group held back for an undecodable key still exists: its unit is kept.
    let held_back: BTreeSet<&str> = load
        .unreadable
        .iter()
        .filter_map(|u| u.group_id.as_deref())
        .collect();
    if let Err(e) = quota::reconcile(client, shared, charges, shard, &load.state, &held_back).await
    {
        tracing::warn!(shard, error = %e,
            "the shard's quota units could not be reconciled; its next owner tries again");
    }
    Ok(load)
}

/// A failed read, as the `Store` trait reports it.
fn read_failed(error: EtcdError) -> StoreError {
    StoreError::Unavailable(format!("reading from etcd: {error}"))
}

impl Store for EtcdStore {
    fn load(&self) -> Result<StoredState, StoreError> {
        let client = self.client.clone();
        let shared = Arc::clone(&self.shared);
        self.block_on(async move { load::everything(&client, &shared.keys).await })?
    }

    fn load_group(&self, group_id: &str) -> Result<StoredGroup, StoreError> {
        let client = self.client.clone();
        let shared = Arc::clone(&self.shared);
        let group_id = group_id.to_owned();
        self.block_on(async move {
            let shard = shard_of(&group_id, shared.shards);
            load::group(&client, &shared.keys, shard, &group_id).await
        })?
    }

    fn apply(&self, batch: Vec<Mutation>) -> Durable {
        if batch.is_empty() {
            return Durable::ready(Ok(()));
        }
        let (sender, durable) = Durable::pending();
        let fence = self.shared.fence(&batch);
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        match queue.as_ref() {
            Some(tx) => {
                if let Err(mpsc::error::SendError((_, sender, _))) = tx.send((batch, sender, fence))
                {
                    sender.complete(Err(StoreError::Closed));
                }
            }
            None => sender.complete(Err(StoreError::Closed)),
        }
        durable
    }

    fn put_topics(&self, changes: Vec<TopicChange>) -> TopicsWrite {
        let Some(runtime) = self.runtime.as_ref() else {
            return Box::pin(std::future::ready(Err(StoreError::Closed)));
        };
        let client = self.client.clone();
        let shared = Arc::clone(&self.shared);
        let write = runtime
            .spawn(async move { topics::put(&client, &shared.keys, shared.limits, changes).await });
        Box::pin(async move { write.await.unwrap_or(Err(StoreError::Closed)) })
    }

    fn charge_group(&self, group_id: &str, principal: &str, max: Option<u32>) -> Option<Durable> {
        let (sender, durable) = Durable::pending();
        match self.runtime.as_ref() {
            None => sender.complete(Err(StoreError::Closed)),
            Some(runtime) => {
                let client = self.client.clone();
                let shared = Arc::clone(&self.shared);
                let charges = Arc::clone(&self.charges);
                let group_id = group_id.to_owned();
                let principal: Arc<str> = Arc::from(principal);
                runtime.spawn(async move {
                    let charged =
                        quota::charge(&client, &shared, &charges, group_id, principal, max).await;
                    sender.complete(charged);
                });
            }
        }
        Some(durable)
    }

    fn healthy(&self) -> bool {
        self.shared.healthy.load(Ordering::Relaxed)
    }

    fn close(&self) -> Result<(), StoreError> {
        // The writer finishes what is queued, then ends with the channel: wait for that.
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(writer) = writer {
            self.block_on(writer)?
                .map_err(|e| StoreError::Io(format!("the etcd writer failed: {e}")))?;
        }
        Ok(())
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        // Without waiting for the writer: dropping may happen inside another runtime. What
        // is still queued resolves `Closed`.
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(runtime) = self.runtime.take() {
            // Never blocks: dropping may happen inside another runtime (an actor's).
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("keys", &self.shared.keys)
            .field("shards", &self.shared.shards)
            .finish_non_exhaustive()
    }
}
