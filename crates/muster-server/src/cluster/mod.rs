//! Cluster mode (docs/cluster.md): several musterd nodes share the groups through etcd. This
//! module is the node's side of it: the shard count check at startup, registration on a lease,
//! and the thread that runs the ownership loop, the lease renewals and the watches. The
//! supervisor sees only [`placement::ShardTable`] (which shards are served) and the
//! `AdoptShard` / `ReleaseShard` / `CatalogChanged` messages; sessions answer FindCoordinator
//! and DescribeCluster from [`view::ClusterView`].

mod lease;
mod ownership;
pub mod placement;
pub mod quarantine;
pub mod view;
mod watches;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Addr;
use muster_coordinator::actors::Supervisor;
use muster_etcd::generated::mvccpb::KeyValue;
use muster_etcd::{EtcdClient, EtcdError, EtcdStore, KeyLayout};
use tokio::sync::{oneshot, watch, Notify};
use tracing::{info, warn};

use self::ownership::Ownership;
use self::placement::ShardTable;
use self::view::ClusterView;

/// Cluster mode as [`crate::ServerOptions`] takes it.
#[derive(Clone)]
pub struct ClusterSetup {
    /// The store, connected to the cluster's etcd (its key prefix is the cluster name).
    pub store: Arc<EtcdStore>,
    /// The node's lease TTL: how long after a node dies its shards move.
    pub lease_ttl: Duration,
    /// Until when startup retries while etcd cannot serve (`--etcd-startup-wait-s` after the
    /// process started): see [`at_startup`].
    pub startup_until: Instant,
}

/// Pause between startup attempts while etcd cannot serve.
pub const STARTUP_RETRY: Duration = Duration::from_millis(500);

/// The one rule of every startup step against etcd: a failure that passes by itself
/// (`transient`) is waited out, one [`STARTUP_RETRY`] at a time, until `until`.
pub fn waits_at_startup(transient: bool, until: Instant) -> bool {
    transient && Instant::now() + STARTUP_RETRY < until
}

/// Runs one startup step against etcd until it succeeds, fails for good, or `until` has
/// passed while etcd still cannot serve (`transient` says which failures are worth waiting
/// for: no member reachable, no leader, a leader change). A node started beside its etcd (a
/// container platform starting both, a cluster electing a leader, a quorum lost for a few
/// seconds) then comes up once etcd does, instead of exiting; a refusal stops it at once.
pub async fn at_startup<T, E, Fut>(
    what: &str,
    until: Instant,
    transient: impl Fn(&E) -> bool,
    mut step: impl FnMut() -> Fut,
) -> Result<T, E>
where
    E: std::fmt::Display,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    loop {
        match step().await {
            Err(e) if waits_at_startup(transient(&e), until) => {
                warn!(error = %e, "{what}: etcd cannot serve yet; retrying");
                tokio::time::sleep(STARTUP_RETRY).await;
            }
            outcome => return outcome,
        }
    }
}

impl ClusterError {
    /// Whether startup waits this failure out ([`at_startup`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Etcd(e) if e.is_transient())
    }
}

/// Why cluster mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "the cluster {cluster:?} was created with {stored} shards, and this node was started \
         with --shards {wanted}; the shard count is fixed when a cluster is created: start \
         this node with --shards {stored} (or use another --cluster-name)"
    )]
    ShardCount {
        cluster: String,
        stored: u32,
        wanted: u32,
    },
    #[error("the cluster's shard count in etcd ({0:?}) is not a number")]
    BadShardCount(String),
    #[error(
        "node id {0:?} is registered by a live node of this cluster: give this node another \
         --node-id"
    )]
    NodeIdInUse(String),
    #[error("etcd: {0}")]
    Etcd(#[from] EtcdError),
    #[error("the cluster thread failed to start")]
    Thread,
}

/// Creates the cluster's shard count in etcd, or checks this node's against it.
pub async fn check_shard_count(store: &EtcdStore, cluster: &str) -> Result<(), ClusterError> {
    let key = store.keys().shard_count();
    let wanted = store.shards();
    let client = store.client();
    if client
        .claim(&key, wanted.to_string().as_bytes(), 0)
        .await?
        .is_some()
    {
        info!(cluster, shards = wanted, "cluster created");
        return Ok(());
    }
    let stored = client
        .get(&key)
        .await?
        .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
        .unwrap_or_default();
    let stored: u32 = stored
        .trim()
        .parse()
        .map_err(|_| ClusterError::BadShardCount(stored.clone()))?;
    if stored != wanted {
        return Err(ClusterError::ShardCount {
            cluster: cluster.to_owned(),
            stored,
            wanted,
        });
    }
    Ok(())
}

/// What the cluster thread shares with the server.
pub struct Cluster {
    pub table: Arc<ShardTable>,
    pub view: Arc<ClusterView>,
}

impl Cluster {
    pub fn new(cluster_name: &str, shards: u32) -> Self {
        Self {
            table: Arc::new(ShardTable::new(shards)),
            view: Arc::new(ClusterView::new(cluster_name, shards)),
        }
    }
}

/// The running cluster thread.
pub struct ClusterHandle {
    stop: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Receiver<()>>,
}

impl ClusterHandle {
    /// Hands every shard over and leaves the cluster (revokes the lease), waiting at most
    /// until `deadline`.
    pub async fn shutdown(mut self, deadline: tokio::time::Instant) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(done) = self.done.take() {
            if tokio::time::timeout_at(deadline, done).await.is_err() {
                warn!("shards not handed over within the shutdown timeout");
            }
        }
    }
}

/// Registers this node and starts the cluster thread. Returns once registered (or refused).
pub async fn join(
    setup: ClusterSetup,
    node_id: String,
    advertised: String,
    supervisor: Addr<Supervisor>,
    cluster: &Cluster,
) -> Result<ClusterHandle, ClusterError> {
    // Shared, never cloned: the supervisor's mailbox is unbounded once it has started, and
    // actix then refuses (debug-asserts) new clones of its address.
    let supervisor = Arc::new(supervisor);
    let (ready_tx, ready_rx) = oneshot::channel();
    let (stop_tx, stop_rx) = oneshot::channel();
    let (done_tx, done_rx) = oneshot::channel();
    let table = Arc::clone(&cluster.table);
    let view = Arc::clone(&cluster.view);
    std::thread::Builder::new()
        .name("muster-cluster".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ =
                        ready_tx.send(Err(ClusterError::Etcd(EtcdError::Runtime(e.to_string()))));
                    return;
                }
            };
            runtime.block_on(async move {
                let store = setup.store;
                let client = store.client().clone();
                let keys = store.keys().clone();
                let ttl = setup.lease_ttl;
                let node = Registration {
                    client: client.clone(),
                    keys: keys.clone(),
                    me: node_id.clone(),
                    advertised,
                    ttl,
                    table: Arc::clone(&table),
                };
                let lease = match node.register(Some(setup.startup_until)).await {
                    Ok(lease) => lease,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let own = Ownership {
                    shards: store.shards(),
                    store,
                    client,
                    keys,
                    me: node_id,
                    supervisor,
                    table,
                    view,
                    lease,
                    mine: BTreeMap::new(),
                };
                run(own, node, stop_rx).await;
                let _ = done_tx.send(());
            });
        })
        .map_err(|_| ClusterError::Thread)?;
    ready_rx.await.map_err(|_| ClusterError::Thread)??;
    Ok(ClusterHandle {
        stop: Some(stop_tx),
        done: Some(done_rx),
    })
}

/// How this node registers itself: its key `/<c>/node/<id>` on its lease, holding its
/// advertised address.
struct Registration {
    client: EtcdClient,
    keys: KeyLayout,
    me: String,
    advertised: String,
    ttl: Duration,
    table: Arc<ShardTable>,
}

/// Pause between registration attempts.
const REGISTER_RETRY: Duration = Duration::from_millis(500);

impl Registration {
    /// Grants a lease and registers on it. At startup a key already there may be our own
    /// previous life's (killed less than a TTL ago). When it holds this node's own advertised
    /// address it is: its lease is revoked (which also frees the shards it held, so they move
    /// at once rather than a TTL later; any write of a process still holding them is fenced by
    /// its owner key) and the node registers. A key holding another address is waited out for
    /// one TTL and a bit, after which it belongs to a live node and the id is refused. At
    /// startup (`startup`: until when), it waits out an etcd that cannot serve. A claim that landed on a
    /// slow etcd but whose answer was lost (the client's retry then finds the key held) is
    /// recognised by its lease. After a lost lease, it keeps trying.
    async fn register(&self, startup: Option<Instant>) -> Result<i64, ClusterError> {
        let first = startup.is_some();
        let give_up = Instant::now() + self.ttl + Duration::from_secs(2);
        let key = self.keys.node(&self.me);
        loop {
            let attempt = async {
                let sent = Instant::now();
                let lease = self.client.lease_grant(self.ttl.as_secs() as i64).await?;
                let claimed = self
                    .client
                    .claim(&key, self.advertised.as_bytes(), lease.id)
                    .await?;
                // Held: possibly by this very claim, landed on a slow etcd whose answer was
                // lost and retried elsewhere (the retry then finds the key held). Ours if it
                // is on our lease.
                let held = match claimed {
                    Some(_) => None,
                    None => self.client.get(&key).await?,
                };
                if claimed.is_some() || held.as_ref().is_some_and(|kv| kv.lease == lease.id) {
                    self.table
                        .lease_valid_until(sent + Duration::from_secs(lease.ttl_s.max(0) as u64));
                    return Ok(Some(lease.id));
                }
                let _ = self.client.lease_revoke(lease.id).await;
                if let (true, Some(held)) = (first, held) {
                    self.end_previous_life(&held).await?;
                }
                Ok::<_, EtcdError>(None)
            };
            match attempt.await {
                Ok(Some(lease)) => {
                    info!(node_id = %self.me, advertised = %self.advertised, lease, "registered in the cluster");
                    return Ok(lease);
                }
                Ok(None) if first && Instant::now() >= give_up => {
                    return Err(ClusterError::NodeIdInUse(self.me.clone()));
                }
                Ok(None) => {}
                Err(e)
                    if startup.is_some_and(|until| !waits_at_startup(e.is_transient(), until)) =>
                {
                    return Err(e.into())
                }
                Err(e) => warn!(error = %e, "cannot register in the cluster; retrying"),
            }
            tokio::time::sleep(REGISTER_RETRY).await;
        }
    }

    /// Revokes the lease of this node id's registration `held` if it holds this node's own
    /// advertised address: a previous life of this node (no other process can listen there),
    /// killed before its lease expired. etcd extends every lease when it elects a leader, so
    /// waiting for it to expire can take many TTLs while etcd is unsettled.
    async fn end_previous_life(&self, held: &KeyValue) -> Result<(), EtcdError> {
        if held.value != self.advertised.as_bytes() || held.lease == 0 {
            return Ok(());
        }
        info!(
            node_id = %self.me,
            advertised = %self.advertised,
            lease = held.lease,
            "this node's previous life is still registered (same id, same address): revoking its lease"
        );
        self.client.lease_revoke(held.lease).await
    }
}

/// How often the node and owner keys are read even when no watch reported a change.
const RECONCILE_EVERY: Duration = Duration::from_secs(1);

async fn run(mut own: Ownership, node: Registration, mut stop: oneshot::Receiver<()>) {
    let changed = Arc::new(Notify::new());
    let background = [
        tokio::spawn(watches::trigger_on_change(
            own.client.clone(),
            own.keys.nodes_prefix(),
            Arc::clone(&changed),
        )),
        tokio::spawn(watches::trigger_on_change(
            own.client.clone(),
            own.keys.owners_prefix(),
            Arc::clone(&changed),
        )),
        tokio::spawn(watches::follow_topics(
            Arc::clone(&own.store),
            Arc::clone(&own.supervisor),
        )),
    ];
    let mut fenced = own.store.lost_shards();
    loop {
        let (lost_tx, mut lost) = watch::channel(false);
        let keeper = tokio::spawn(lease::keep_alive(
            own.client.clone(),
            own.lease,
            node.ttl,
            Arc::clone(&own.table),
            lost_tx,
        ));
        let mut tick = tokio::time::interval(RECONCILE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stopping = loop {
            tokio::select! {
                _ = &mut stop => break true,
                _ = lost.changed() => break false,
                _ = changed.notified() => reconcile(&mut own).await,
                _ = tick.tick() => reconcile(&mut own).await,
                Ok(()) = fenced.changed() => {
                    let shards = fenced.borrow_and_update().clone();
                    own.lose_fenced(&shards).await;
                }
            }
        };
        keeper.abort();
        if stopping {
            // Unregistered first: the other nodes' targets then count without this node, so
            // each shard given away below is claimed at once.
            if let Err(e) = own.client.delete(&own.keys.node(&own.me)).await {
                warn!(error = %e, "cannot unregister before handing the shards over");
            }
            own.give_everything().await;
            let _ = own.client.lease_revoke(own.lease).await;
            info!("left the cluster");
            break;
        }
        // Not ready until registered again (etcd did not confirm a renewal in a whole TTL).
        own.store.unreachable();
        own.lose_everything().await;
        // Revoked at once (when etcd answers): the others need not wait out the TTL.
        let _ = own.client.lease_revoke(own.lease).await;
        own.lease = 0;
        tokio::select! {
            _ = &mut stop => break,
            registered = node.register(None) => match registered {
                Ok(lease) => {
                    own.lease = lease;
                    own.store.reachable();
                }
                Err(_) => break,
            },
        }
    }
    for task in background {
        task.abort();
    }
}

async fn reconcile(own: &mut Ownership) {
    if let Err(e) = own.reconcile().await {
        own.store.unreachable();
        warn!(error = %e, "cannot read the cluster's nodes and shard owners; retrying");
    }
}
