//! `musterd`, the Muster coordinator server: the network front end ([`listener`]), one
//! session actor per connection ([`session`]), and the wiring that starts and stops it all
//! around the coordinator's supervisor.
//!
//! [`start`] runs inside an actix system and is what the binary calls; [`spawn`] runs a whole
//! server on its own thread, which is what tests use (bind `127.0.0.1:0`, read the address).

pub mod admin;
pub mod admin_gate;
pub mod auth;
pub mod cluster;
pub mod config;
pub mod connection_limits;
pub mod dashboard;
pub mod fatal;
pub mod listener;
pub mod node;
pub mod session;
pub mod store_kind;
pub mod telemetry;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use muster_coordinator::actors::{Placement, Shutdown, SingleNode, Supervisor, SupervisorOptions};
use muster_coordinator::clock::Clock;
use muster_coordinator::storage::{ParkingLoad, Store, StoreError, StoredState};
use muster_coordinator::GroupConfig;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::admin::{AdminLimits, AdminServer, Readiness};
use crate::admin_gate::AdminGate;
use crate::auth::Auth;
use crate::cluster::{Cluster, ClusterHandle, ClusterSetup};
use crate::connection_limits::ConnectionLimits;
use crate::dashboard::Dashboard;
use crate::listener::{Listener, StopAccepting};
use crate::node::{NodeIdentity, NodeOptions};
use crate::session::SessionSettings;
use crate::tls::TlsSettings;

/// How a server is set up.
pub struct ServerOptions {
    pub listen: String,
    /// Where to serve /metrics, /healthz and /readyz; `None` = nowhere.
    pub admin_listen: Option<String>,
    pub group: GroupConfig,
    pub max_frame_bytes: u32,
    pub max_in_flight: usize,
    pub max_connections: usize,
    /// Close connections idle (nothing in flight, nothing received) this long.
    pub idle_timeout: Option<Duration>,
    /// Slow-reader and admin listener limits.
    pub limits: ConnectionLimits,
    /// Worker arbiters for sessions and groups (0 = one per core).
    pub workers: usize,
    pub store: Arc<dyn Store>,
    /// Authentication and ACLs (`Auth::open` = none: everyone may do everything).
    pub auth: Arc<Auth>,
    /// How long shutdown may take: held requests answered, storage flushed, answers written.
    pub shutdown_timeout: Duration,
    /// TLS on the client and admin listeners (`TlsSettings::load`); `None` = plaintext.
    pub tls: Option<TlsSettings>,
    /// Node id, advertised address and cluster name (FindCoordinator, DescribeCluster).
    pub node: NodeOptions,
    /// Cluster mode (`--cluster-etcd`): the etcd store and the lease; `None` = a single node
    /// (`store` then holds everything).
    pub cluster: Option<ClusterSetup>,
    /// Set true once state is loaded and clients are accepted (shared with the caller so a
    /// readiness probe can be served before the server starts).
    pub readiness: Readiness,
}

impl ServerOptions {
    /// Defaults for everything but the store.
    pub fn new(listen: impl Into<String>, store: Arc<dyn Store>) -> Self {
        Self {
            listen: listen.into(),
            admin_listen: None,
            group: GroupConfig::default(),
            max_frame_bytes: muster_protocol::DEFAULT_MAX_FRAME_BYTES,
            max_in_flight: 1024,
            max_connections: 10_000,
            idle_timeout: None,
            limits: ConnectionLimits::default(),
            workers: 0,
            store,
            auth: Arc::new(Auth::default()),
            shutdown_timeout: Duration::from_secs(5),
            readiness: Readiness::default(),
            tls: None,
            node: NodeOptions::default(),
            cluster: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot load stored state")]
    Load(#[from] StoreError),
    #[error("the server thread failed to start")]
    Thread,
    #[error("cluster mode cannot start: {0}")]
    Cluster(#[from] crate::cluster::ClusterError),
}

/// A started server.
pub struct Running {
    local_addr: SocketAddr,
    admin: Option<AdminServer>,
    listener: Addr<Listener>,
    supervisor: Addr<Supervisor>,
    sessions: Arc<SessionSettings>,
    /// Closes once the listener stopped and every connection (session and writer task) ended:
    /// each holds a clone of its sender.
    connections_done: mpsc::Receiver<()>,
    workers: Vec<Arbiter>,
    shutdown_timeout: Duration,
    readiness: Readiness,
    store: Arc<dyn Store>,
    cluster: Option<ClusterHandle>,
}

/// Starts the admin listener (if any), loads state, binds, and starts the supervisor,
/// workers and listener. Call inside an actix system.
///
/// The order matters: the admin listener first, so that /healthz and /readyz answer while
/// state loads; the client port is bound only once state is loaded; a cluster node registers
/// (and so becomes reachable through FindCoordinator) only once sessions can be served; and
/// the server says it is ready last.
pub async fn start(options: ServerOptions) -> Result<Running, ServerError> {
    let readiness = options.readiness.clone();
    readiness.set(false);
    readiness.watch_storage(Arc::clone(&options.store));
    let dashboard = Dashboard::new(Arc::clone(&options.auth));
    let admin = start_admin(&options, &readiness, &dashboard)?;
    let loading = Instant::now();
    let initial = load_state(&options).await?;
    let load_ms = loading.elapsed().as_millis() as u64;
    let groups = initial.state.groups.len() + initial.parked.len();
    let (socket, local_addr) = bind_client_port(&options.listen).await?;
    let workers = start_workers(options.workers);
    let handles: Vec<ArbiterHandle> = workers.iter().map(Arbiter::handle).collect();
    let cluster = options
        .cluster
        .as_ref()
        .map(|setup| Cluster::new(&options.node.cluster_name, setup.store.shards()));
    if let Some(cluster) = &cluster {
        // `/readyz` counts the keys in etcd this node could not decode; the dashboard's
        // `/api/quarantine` names them.
        readiness.watch_shards(Arc::clone(&cluster.table));
        dashboard.watch_shards(Arc::clone(&cluster.table));
    }
    let supervisor = start_supervisor(&options, cluster.as_ref(), handles.clone(), initial);
    // One count for the sessions and the dashboard: admin requests in flight server-wide.
    let admin_gate = AdminGate::new(options.group.limits.max_admin_requests_in_flight);
    dashboard.connect(supervisor.clone(), admin_gate.clone());
    // With TLS the client listener speaks TLS on the port it bound: that is the port to
    // advertise.
    let node = NodeIdentity::new(
        &options.node,
        &options.listen,
        local_addr,
        crate::node::host_name,
    );
    let started = Started {
        local_addr,
        node_id: node.node_id.clone(),
        advertised: node.advertised.to_string(),
        admin: admin.as_ref().map(AdminServer::local_addr),
        workers: workers.len(),
        tls: options
            .tls
            .as_ref()
            .map(|tls| tls.client_certificates_required),
        auth_enabled: options.auth.enabled(),
        groups,
        load_ms,
    };
    let sessions = session_settings(
        &options,
        node,
        supervisor.clone(),
        cluster.as_ref(),
        admin_gate,
    );
    let cluster = join_cluster(options.cluster, cluster.as_ref(), &started, &supervisor).await?;
    let (running, connections_done) = mpsc::channel(1);
    let listener =
        Listener::new(socket, handles, Arc::clone(&sessions), running, options.tls).start();
    readiness.set(true);
    announce(&started);
    Ok(Running {
        local_addr,
        admin,
        listener,
        supervisor,
        sessions,
        connections_done,
        workers,
        shutdown_timeout: options.shutdown_timeout,
        readiness,
        store: options.store,
        cluster,
    })
}

/// Starts the admin listener, if the options name an address for it. It runs on a thread of
/// its own: a flood of admin connections must not delay the supervisor (routing, timers),
/// which runs on the caller's.
fn start_admin(
    options: &ServerOptions,
    readiness: &Readiness,
    dashboard: &Arc<Dashboard>,
) -> Result<Option<AdminServer>, ServerError> {
    let Some(addr) = &options.admin_listen else {
        return Ok(None);
    };
    AdminServer::start(
        addr,
        readiness.clone(),
        AdminLimits::from(&options.limits),
        options.tls.clone(),
        Arc::clone(dashboard),
    )
    .map(Some)
    .map_err(|source| ServerError::Bind {
        addr: addr.clone(),
        source,
    })
}

/// The state to start from. A single node loads everything; a clustered one only the topic
/// catalog (after checking the cluster's shard count): groups come with the shards it takes.
/// A single node that parks idle groups, on a store that reads one group back cheaply, loads
/// each group with nothing but data as a summary only (`Store::load_parking`): it is
/// registered parked, its data left in the store.
///
/// Loading can take a while (a million offsets): it runs off the runtime thread, so the admin
/// listener answers /healthz and /readyz (false) meanwhile.
async fn load_state(options: &ServerOptions) -> Result<ParkingLoad, ServerError> {
    match &options.cluster {
        None => {
            let store = Arc::clone(&options.store);
            let parking = options.group.park_after_ms > 0 && store.reads_one_group_cheaply();
            tokio::task::spawn_blocking(move || {
                if parking {
                    store.load_parking()
                } else {
                    store.load().map(|state| ParkingLoad {
                        state,
                        parked: Vec::new(),
                    })
                }
            })
            .await
            .map_err(|_| ServerError::Thread)?
            .map_err(ServerError::Load)
        }
        Some(setup) => {
            // Waited for while etcd cannot serve (`--etcd-startup-wait-s`).
            let until = setup.startup_until;
            let cluster_name = &options.node.cluster_name;
            crate::cluster::at_startup(
                "checking the cluster's shard count",
                until,
                crate::cluster::ClusterError::is_transient,
                || crate::cluster::check_shard_count(&setup.store, cluster_name),
            )
            .await?;
            let (topics, _) = crate::cluster::at_startup(
                "reading the topic catalog",
                until,
                |e| matches!(e, StoreError::Unavailable(_)),
                || setup.store.read_topics(),
            )
            .await?;
            Ok(ParkingLoad {
                state: StoredState {
                    topics,
                    ..StoredState::default()
                },
                parked: Vec::new(),
            })
        }
    }
}

/// Binds the client port, and says which address it got (`listen` may ask for port 0).
async fn bind_client_port(
    listen: &str,
) -> Result<(tokio::net::TcpListener, SocketAddr), ServerError> {
    let failed = |source| ServerError::Bind {
        addr: listen.to_owned(),
        source,
    };
    let socket = bind(listen).await.map_err(failed)?;
    let local_addr = socket.local_addr().map_err(failed)?;
    Ok((socket, local_addr))
}

/// The worker arbiters that run sessions and group actors: `wanted` of them, or one per core
/// for 0.
fn start_workers(wanted: usize) -> Vec<Arbiter> {
    let count = match wanted {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    };
    (0..count).map(|_| Arbiter::new()).collect()
}

/// Starts the supervisor over the loaded state, creating group actors on `arbiters`.
fn start_supervisor(
    options: &ServerOptions,
    cluster: Option<&Cluster>,
    arbiters: Vec<ArbiterHandle>,
    initial: ParkingLoad,
) -> Addr<Supervisor> {
    // Who owns which group: in a cluster, the shard table the ownership loop keeps; alone,
    // this node owns every group.
    let placement: Arc<dyn Placement> = match cluster {
        Some(cluster) => Arc::clone(&cluster.table) as Arc<dyn Placement>,
        None => Arc::new(SingleNode),
    };
    Supervisor::new(SupervisorOptions {
        config: options.group.clone(),
        store: Arc::clone(&options.store),
        arbiters,
        placement,
        initial: initial.state,
        parked: initial.parked,
        clock: Clock::new(),
        quotas: options.auth.quotas().clone(),
    })
    .start()
}

/// What every session of this server shares: its limits, the node's identity, the rules in
/// force, the supervisor, and in a cluster the view FindCoordinator answers from.
fn session_settings(
    options: &ServerOptions,
    node: NodeIdentity,
    supervisor: Addr<Supervisor>,
    cluster: Option<&Cluster>,
    admin_gate: AdminGate,
) -> Arc<SessionSettings> {
    let mut sessions = SessionSettings::new(
        options.max_frame_bytes,
        options.max_in_flight,
        options.max_connections,
        options.idle_timeout,
        uuid::Uuid::new_v4().to_string(),
        node,
        Arc::clone(&options.auth),
        supervisor,
    )
    .with_limits(&options.limits);
    sessions.max_client_id_bytes = options.group.limits.max_client_id_bytes;
    sessions.admin_gate = admin_gate;
    sessions.cluster = cluster.map(|c| Arc::clone(&c.view));
    Arc::new(sessions)
}

/// Registers a cluster node under its id and advertised address, and starts taking shards
/// (`cluster/`). Called once sessions can be served: from then on FindCoordinator may send
/// clients here. `None` for a single node.
async fn join_cluster(
    setup: Option<ClusterSetup>,
    cluster: Option<&Cluster>,
    started: &Started,
    supervisor: &Addr<Supervisor>,
) -> Result<Option<ClusterHandle>, ServerError> {
    let (Some(setup), Some(cluster)) = (setup, cluster) else {
        return Ok(None);
    };
    let handle = crate::cluster::join(
        setup,
        started.node_id.clone(),
        started.advertised.clone(),
        supervisor.clone(),
        cluster,
    )
    .await?;
    Ok(Some(handle))
}

/// What [`announce`] says about a server that started.
struct Started {
    local_addr: SocketAddr,
    node_id: String,
    advertised: String,
    admin: Option<SocketAddr>,
    workers: usize,
    /// `None`: plaintext; `Some(true)`: TLS with client certificates required.
    tls: Option<bool>,
    auth_enabled: bool,
    groups: usize,
    load_ms: u64,
}

/// The startup log line, and a warning when anyone who can reach a non-loopback address may
/// do everything.
fn announce(started: &Started) {
    let local_addr = started.local_addr;
    if !started.auth_enabled && !local_addr.ip().is_loopback() {
        warn!(
            %local_addr,
            "no auth file: anyone who can reach this address may read, change and delete every \
             group (see docs/security.md)"
        );
    }
    info!(
        %local_addr,
        node_id = %started.node_id,
        advertised = %started.advertised,
        admin_addr = %started
            .admin
            .map_or_else(|| "off".to_owned(), |a| a.to_string()),
        workers = started.workers,
        tls = match started.tls {
            None => "off",
            Some(true) => "on, client certificates required",
            Some(false) => "on",
        },
        groups = started.groups,
        load_ms = started.load_ms,
        "musterd listening"
    );
}

/// Connections the kernel queues for the listener before it accepts them. std and tokio use
/// 128, which a burst of reconnecting consumers overflows: the surplus then waits a second for
/// the SYN to be retransmitted.
const LISTEN_BACKLOG: u32 = 1024;

/// Binds the first address `listen` resolves to that can be bound, with [`LISTEN_BACKLOG`].
async fn bind(listen: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to listen on");
    for addr in tokio::net::lookup_host(listen).await? {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        // As std and tokio do on Unix, so that a restarted server can bind its port at once.
        if cfg!(unix) {
            socket.set_reuseaddr(true)?;
        }
        match socket.bind(addr) {
            Ok(()) => return socket.listen(LISTEN_BACKLOG),
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl Running {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The admin listener's address, if it runs.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(AdminServer::local_addr)
    }

    /// Graceful shutdown within the configured deadline: stop accepting, answer held
    /// JoinGroup/SyncGroup COORDINATOR_NOT_AVAILABLE so clients retry, flush and close
    /// storage, write every queued answer and close the connections, stop the workers.
    pub async fn shutdown(mut self) {
        let deadline = tokio::time::Instant::now() + self.shutdown_timeout;
        info!("shutting down");
        self.readiness.set(false);
        let _ = self.listener.send(StopAccepting).await;
        if let Some(cluster) = self.cluster.take() {
            // Shards handed over while the groups can still write: their next owner loads
            // them at once instead of waiting for this node's lease to expire.
            cluster.shutdown(deadline).await;
        }
        if tokio::time::timeout_at(deadline, self.supervisor.send(Shutdown))
            .await
            .is_err()
        {
            warn!("held requests not answered within the shutdown timeout");
        }
        close_store(&self.store, deadline).await;
        // Sessions write what is queued, close their sockets, and drop their `running`
        // senders; the listener dropped its own on StopAccepting. `recv` returns `None` once
        // the last one is gone (nothing is ever sent on the channel).
        self.sessions.begin_shutdown();
        if tokio::time::timeout_at(deadline, self.connections_done.recv())
            .await
            .is_err()
        {
            warn!("connections not closed within the shutdown timeout");
        }
        for worker in &self.workers {
            worker.stop();
        }
        for worker in self.workers {
            let _ = worker.join();
        }
        info!("stopped");
    }
}

/// Flushes and closes the store, waiting at most until `deadline`. `close` waits for the
/// writer's last round, on a hung disk forever: it runs on a thread of its own, abandoned at the
/// deadline (the process then exits without it; nothing unacknowledged was promised).
async fn close_store(store: &Arc<dyn Store>, deadline: tokio::time::Instant) {
    let (done, closed) = tokio::sync::oneshot::channel();
    let closing = Arc::clone(store);
    let spawned = std::thread::Builder::new()
        .name("muster-store-close".into())
        .spawn(move || {
            let result = closing.close();
            // Let go of the store before saying so: once shutdown returns, the last handle may
            // be gone and the file unlocked (a restart on the same directory opens it at once).
            drop(closing);
            let _ = done.send(result);
        });
    let result = match spawned {
        Ok(_) => match tokio::time::timeout_at(deadline, closed).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(StoreError::Io("the store's closing thread panicked".into())),
            Err(_) => {
                warn!("storage not closed within the shutdown timeout; exiting without it");
                return;
            }
        },
        Err(_) => store.close(),
    };
    if let Err(e) = result {
        error!(error = %e, "store did not close cleanly");
    }
}

/// A server running on its own thread (for tests and embedding).
pub struct ServerThread {
    local_addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts a server on a new thread with its own actix system.
pub fn spawn(options: ServerOptions) -> Result<ServerThread, ServerError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("musterd".into())
        .spawn(move || {
            let system = actix_rt::System::new();
            system.block_on(async move {
                match start(options).await {
                    Ok(running) => {
                        let _ = ready_tx.send(Ok((running.local_addr(), running.admin_addr())));
                        let _ = stop_rx.await;
                        running.shutdown().await;
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
        })
        .map_err(|_| ServerError::Thread)?;
    let (local_addr, admin_addr) = ready_rx.recv().map_err(|_| ServerError::Thread)??;
    Ok(ServerThread {
        local_addr,
        admin_addr,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

impl ServerThread {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The admin listener's address, if it runs.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Shuts the server down gracefully and waits for its thread.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop_now();
    }
}
