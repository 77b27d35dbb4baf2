//! The ownership loop: which shards this node holds. It reads the live nodes and the shard
//! owners from etcd (on every change a watch reports, and every second in any case), asks the
//! balancer (`muster_etcd::balance`) what to claim and what to give away, and carries that out
//! with the supervisor:
//!
//! - **take** a shard: claim its owner key on our lease (etcd decides races), fence the store's
//!   writes on the claim's revision, mark it loading (COORDINATOR_LOAD_IN_PROGRESS), read its
//!   groups and offsets, hand them to the supervisor, mark it owned (a round's claims are
//!   sent all at once, and the shards it won are read all at once: after a node dies each
//!   survivor takes several). A shard that cannot be *read* (etcd does not answer) is given
//!   back, to be claimed again; a shard read whole is kept whatever it holds: a value that
//!   cannot be *decoded* holds back only its group (the [`Quarantine`], one ERROR per key),
//!   which is read again every few seconds and served once its keys decode or are gone;
//! - **give** a shard away: mark it not owned (NOT_COORDINATOR for new requests), let its
//!   groups finish the writes they have in flight, forget it in the store, and delete the owner
//!   key (only if it is still ours) so that the node taking it over can claim it at once;
//! - **lose** a shard (a write was fenced, or the owner key changed behind our back): drop its
//!   groups without writing anything; whatever the new owner wrote stands.
//!
//! Losing the lease loses every shard; the loop then registers again with a new lease.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Addr;
use futures_util::future::join_all;
use metrics::{counter, gauge};
use muster_coordinator::actors::{AdoptGroups, AdoptShard, Drain, ReleaseShard, Supervisor};
use muster_coordinator::logsafe::logsafe;
use muster_etcd::{balance, EtcdClient, EtcdError, EtcdStore, KeyLayout, UnreadableKey};
use tracing::{debug, error, info, warn};

use super::placement::{ShardState, ShardTable};
#[cfg(doc)]
use super::quarantine::Quarantine;
use super::view::{ClusterView, Snapshot};
use crate::node::HostPort;

/// How long a shard's groups may take to finish their writes when it is given away (a write
/// takes at most etcd's request timeout).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one round's re-reads of quarantined groups may take in all.
const RECHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The owner keys as read: shard → (owner node id, mod revision, lease).
type Owners = BTreeMap<u32, (String, i64, i64)>;

pub(super) struct Ownership {
    pub(super) store: Arc<EtcdStore>,
    pub(super) client: EtcdClient,
    pub(super) keys: KeyLayout,
    pub(super) shards: u32,
    pub(super) me: String,
    pub(super) supervisor: Arc<Addr<Supervisor>>,
    pub(super) table: Arc<ShardTable>,
    pub(super) view: Arc<ClusterView>,
    /// Our lease (0: none now).
    pub(super) lease: i64,
    /// The shards we hold, with their owner key's mod revision (what writes are fenced on).
    pub(super) mine: BTreeMap<u32, i64>,
}

impl Ownership {
    /// One round: read, compare, move.
    pub(super) async fn reconcile(&mut self) -> Result<(), EtcdError> {
        let (node_kvs, revision) = self
            .client
            .range_prefix(&self.keys.nodes_prefix(), 0)
            .await?;
        let (owner_kvs, _) = self
            .client
            .range_prefix(&self.keys.owners_prefix(), revision)
            .await?;
        // etcd answers: storage is healthy again (readiness follows), write or no write.
        self.store.reachable();
        let mut snapshot = Snapshot::default();
        for kv in node_kvs {
            let Some(id) = self.keys.parse_node(&kv.key) else {
                continue;
            };
            match std::str::from_utf8(&kv.value)
                .ok()
                .and_then(|v| v.parse::<HostPort>().ok())
            {
                Some(addr) => {
                    snapshot.nodes.insert(id, addr);
                }
                None => warn!(node = %id, "a node registered an unusable address; ignored"),
            }
        }
        let mut owners: Owners = BTreeMap::new();
        for kv in owner_kvs {
            let (Some(shard), Ok(owner)) = (
                self.keys.parse_owner(&kv.key),
                String::from_utf8(kv.value.clone()),
            ) else {
                continue;
            };
            if shard < self.shards {
                snapshot.owners.insert(shard, owner.clone());
                owners.insert(shard, (owner, kv.mod_revision, kv.lease));
            }
        }
        self.view.update(snapshot.clone());

        // Ours, as we believe, but no longer so in etcd: taken over.
        let held: Vec<(u32, i64)> = self.mine.iter().map(|(&s, &r)| (s, r)).collect();
        for (shard, revision) in held {
            let still_ours = owners
                .get(&shard)
                .is_some_and(|(owner, rev, _)| *owner == self.me && *rev == revision);
            if !still_ours {
                warn!(
                    shard,
                    "shard taken over by another node; dropping its groups"
                );
                self.lose(shard).await;
            }
        }
        // Ours in etcd, on our lease, but not held: a claim whose answer was lost. Take it.
        let orphans: Vec<(u32, i64)> = owners
            .iter()
            .filter(|(s, (owner, _, lease))| {
                *owner == self.me && *lease == self.lease && !self.mine.contains_key(s)
            })
            .map(|(&s, (_, rev, _))| (s, *rev))
            .collect();
        for (shard, revision) in orphans {
            self.take(shard, revision).await;
        }

        let nodes: Vec<String> = snapshot.nodes.keys().cloned().collect();
        let moves = balance::plan(self.shards, &nodes, &snapshot.owners, &self.me, &[]);
        for shard in moves.release {
            self.give(shard).await;
        }
        // All claims at once, then all loads at once: after a node dies its survivors each
        // take several shards, and one round trip after another would add up (failover time,
        // docs/benchmarks.md).
        let claims = join_all(moves.claim.iter().map(|&shard| {
            let key = self.keys.owner(shard);
            let (client, me, lease) = (&self.client, self.me.as_bytes(), self.lease);
            async move { (shard, client.claim(&key, me, lease).await) }
        }))
        .await;
        let mut claimed = Vec::new();
        let mut failed = None;
        for (shard, claim) in claims {
            match claim {
                Ok(Some(revision)) => claimed.push((shard, revision)),
                Ok(None) => debug!(shard, "another node claimed the shard first"),
                // A claim that landed unanswered is found by the next round (orphans above).
                Err(e) => failed = Some(e),
            }
        }
        self.take_all(claimed).await;
        self.recheck_quarantined(Instant::now()).await;
        failed.map_or(Ok(()), Err)
    }

    /// Sends the supervisor `ReleaseShard` and returns the drain of its groups (`None`: the
    /// supervisor is gone, the server is stopping). The message itself is always awaited to
    /// the end: actix would skip it if the wait were cut short.
    async fn release_groups(&self, shard: u32) -> Option<Drain> {
        self.supervisor.send(ReleaseShard { shard }).await.ok()
    }

    /// Waits for a drain, at most [`DRAIN_TIMEOUT`].
    async fn drained(shard: u32, drain: Option<Drain>) {
        if let Some(Drain(drain)) = drain {
            if tokio::time::timeout(DRAIN_TIMEOUT, drain).await.is_err() {
                warn!(
                    shard,
                    "the shard's groups did not finish their writes in time"
                );
            }
        }
    }

    /// Loads a shard we have just claimed and starts serving it.
    async fn take(&mut self, shard: u32, revision: i64) {
        self.take_all(vec![(shard, revision)]).await;
    }

    /// Loads shards we have just claimed (`(shard, claim revision)`), reading them from etcd
    /// all at once, and starts serving each as soon as it is read.
    async fn take_all(&mut self, claimed: Vec<(u32, i64)>) {
        for &(shard, revision) in &claimed {
            counter!("muster_shard_claims_total").increment(1);
            self.table.set(shard, ShardState::Loading);
            // Groups of the shard still here from an earlier ownership stop first: nothing
            // they write may pass under the new claim (the store also fences each batch on
            // the claim it was made under).
            let stale = self.release_groups(shard).await;
            Self::drained(shard, stale).await;
            self.store.own_shard(shard, revision);
            self.mine.insert(shard, revision);
        }
        let store = &self.store;
        let reads = join_all(
            claimed
                .iter()
                .map(|&(shard, _)| async move { (shard, store.read_shard(shard).await) }),
        )
        .await;
        for (shard, read) in reads {
            match read {
                Ok(load) => {
                    for bad in &load.unreadable {
                        log_unreadable(shard, bad);
                    }
                    // Held back before the shard is served: no request may create one of these
                    // groups empty in between.
                    let keys = self
                        .table
                        .quarantine()
                        .set(shard, &load.unreadable, Instant::now());
                    if keys > 0 {
                        quarantined_keys(shard, keys);
                    }
                    let groups = load.state.groups.len();
                    let state = load.state;
                    if self
                        .supervisor
                        .send(AdoptShard { shard, state })
                        .await
                        .is_err()
                    {
                        // The supervisor is gone: the server is stopping.
                        return;
                    }
                    self.table.set(shard, ShardState::Owned);
                    info!(shard, groups, quarantined_keys = keys, "shard owned");
                }
                // Not read at all (etcd did not answer): given back and claimed again, here or
                // elsewhere. A value that does not decode is no error here (quarantined above).
                Err(e) => {
                    warn!(shard, error = %e, "cannot read the shard's groups; giving it back");
                    self.give(shard).await;
                }
            }
        }
    }

    /// Reads every quarantined group due again ([`Quarantine::due`]), all at once and for at
    /// most [`RECHECK_TIMEOUT`] in all (a slow etcd must not hold up the loop: they are due
    /// again later): one whose keys all decode now (fixed, or removed) is handed to the
    /// supervisor and served; one still bad stays, and only keys not seen before are logged.
    async fn recheck_quarantined(&mut self, now: Instant) {
        let due: Vec<(u32, String)> = self
            .table
            .quarantine()
            .due(now)
            .into_iter()
            .filter(|(shard, _)| self.mine.contains_key(shard))
            .collect();
        if due.is_empty() {
            return;
        }
        let store = &self.store;
        let reads = join_all(due.into_iter().map(|(shard, group_id)| async move {
            let read = store.read_group(shard, &group_id).await;
            (shard, group_id, read)
        }));
        let Ok(reads) = tokio::time::timeout(RECHECK_TIMEOUT, reads).await else {
            debug!("quarantined groups not read again in time; trying later");
            return;
        };
        for (shard, group_id, read) in reads {
            let load = match read {
                Ok(load) => load,
                Err(e) => {
                    debug!(
                        shard,
                        group_id = %logsafe(&group_id),
                        error = %e,
                        "cannot read a quarantined group again"
                    );
                    continue;
                }
            };
            if load.unreadable.is_empty() {
                // Started before the quarantine is lifted: no request finds it absent between.
                let adopt = AdoptGroups {
                    shard,
                    state: load.state,
                };
                if self.supervisor.send(adopt).await.is_err() {
                    return;
                }
                if let Some(keys) = self.table.quarantine().lift(shard, &group_id) {
                    quarantined_keys(shard, keys);
                    info!(
                        shard,
                        group_id = %logsafe(&group_id),
                        "the group's keys in etcd decode again (fixed or removed): quarantine \
                         lifted, group served"
                    );
                }
            } else if let Some((new, keys)) =
                self.table
                    .quarantine()
                    .still_bad(shard, &group_id, load.unreadable)
            {
                for bad in &new {
                    log_unreadable(shard, bad);
                }
                quarantined_keys(shard, keys);
            }
        }
    }

    /// Forgets what was quarantined of a shard that is going.
    fn unquarantine(&self, shard: u32) {
        if self.table.quarantine().clear(shard) {
            quarantined_keys(shard, 0);
        }
    }

    /// Hands a shard over cleanly (module docs).
    pub(super) async fn give(&mut self, shard: u32) {
        self.table.set(shard, ShardState::NotOwned);
        self.unquarantine(shard);
        let drain = self.release_groups(shard).await;
        Self::drained(shard, drain).await;
        self.store.release_shard(shard);
        if let Some(revision) = self.mine.remove(&shard) {
            match self
                .client
                .delete_if_unchanged(&self.keys.owner(shard), revision)
                .await
            {
                Ok(true) => info!(shard, "shard handed over"),
                Ok(false) => info!(shard, "shard given up (its owner key had changed already)"),
                // The key goes with our lease anyway; the taker waits until then.
                Err(e) => warn!(shard, error = %e, "cannot delete the shard's owner key"),
            }
        }
    }

    /// Drops a shard another node owns now (or may own: the lease is lost), writing nothing.
    pub(super) async fn lose(&mut self, shard: u32) {
        self.table.set(shard, ShardState::NotOwned);
        self.unquarantine(shard);
        self.mine.remove(&shard);
        // Nothing to wait for: whatever the groups still write is fenced (another node holds
        // the owner key) or refused (released here).
        self.store.release_shard(shard);
        let drain = self.release_groups(shard).await;
        tokio::spawn(Self::drained(shard, drain));
    }

    /// The lease is gone: every shard with it, at once.
    pub(super) async fn lose_everything(&mut self) {
        self.table.clear();
        let held: Vec<u32> = self.mine.keys().copied().collect();
        for shard in held {
            self.lose(shard).await;
        }
    }

    /// Shards the store found fenced that we still hold.
    pub(super) async fn lose_fenced(&mut self, fenced: &BTreeSet<u32>) {
        let held: Vec<u32> = fenced
            .iter()
            .copied()
            .filter(|s| self.mine.contains_key(s))
            .collect();
        for shard in held {
            warn!(shard, "a write was fenced: another node owns the shard now");
            self.lose(shard).await;
        }
    }

    /// Graceful shutdown: every shard handed over.
    pub(super) async fn give_everything(&mut self) {
        let held: Vec<u32> = self.mine.keys().copied().collect();
        for shard in held {
            self.give(shard).await;
        }
    }
}

/// The one ERROR of an undecodable key (logged when the key is first found on this node: at
/// the shard's load, or when a quarantined group read again has a new bad key).
fn log_unreadable(shard: u32, bad: &UnreadableKey) {
    match &bad.group_id {
        Some(group_id) => error!(
            shard,
            key = ?bad.key_text(),
            group_id = %logsafe(group_id),
            error = %bad.reason,
            "a value in etcd cannot be decoded: its group is quarantined (requests answer \
             COORDINATOR_NOT_AVAILABLE, nothing is written) until the key is fixed or deleted; \
             the shard's other groups are served"
        ),
        None => error!(
            shard,
            key = ?bad.key_text(),
            error = %bad.reason,
            "a key in etcd names no group: skipped; the shard's groups are served"
        ),
    }
}

/// The `muster_quarantined_keys` gauge of a shard (a series only for shards that have had
/// one: the shard count bounds the labels).
fn quarantined_keys(shard: u32, keys: usize) {
    gauge!("muster_quarantined_keys", "shard" => shard.to_string()).set(keys as f64);
}
