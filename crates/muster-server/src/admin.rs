//! The operators' HTTP listener (`--admin-listen`): Prometheus text at `/metrics`, `/healthz`
//! (the process is up) and `/readyz` (state is loaded, client connections are accepted, and
//! storage takes writes: a full or failing disk makes the server not ready until it recovers;
//! in a cluster, its body counts, per shard, the keys in etcd this node could not decode, while
//! it stays ready for every other group);
//! every other path is the read-only dashboard's (`dashboard/`: its pages and JSON).
//! Deliberately tiny: HTTP/1.1, GET only, one request per connection. With `--tls-cert` it
//! speaks HTTPS with the server's certificate, but never asks for a client certificate (even
//! with `--tls-client-ca`): health probes and scrapers authenticate the server only, and
//! these three endpoints expose no group data (the dashboard's JSON asks for a principal's
//! token when an auth file is in force). The handshake runs in the connection's task within
//! `admin_timeout_ms`, so a stalled handshake holds only its own connection slot.
//!
//! It is exposed to whoever reaches the port, so it is bounded like the client listener: it
//! runs on its own thread (never the supervisor's), holds at most `admin_max_connections`
//! connections (further ones wait, unaccepted, in the kernel's accept queue: the listen
//! backlog, 128, after which the kernel drops new connections' SYNs), gives each
//! `admin_timeout_ms` for its whole exchange (hyper's header-read timeout included, so half a
//! header does not hold a connection), caps a request head at [`ADMIN_MAX_HEAD_BYTES`] and
//! refuses bodies; its accept loop backs off when the process is out of file descriptors.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Body as _, Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics::counter;
use muster_coordinator::storage::Store;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tracing::{debug, info, warn};

use crate::cluster::placement::ShardTable;
use crate::connection_limits::ConnectionLimits;
use crate::dashboard::Dashboard;
use crate::listener::AcceptBackoff;
use crate::telemetry::{metrics_handle, render_metrics};
use crate::tls::{self, ClientStream, TlsSettings};

/// Whether the server is ready for clients (`/readyz`): it is up (set by startup and
/// shutdown) and the store it watches, if any, takes writes. In a cluster it also counts the
/// shard table's quarantined keys (detail only: readiness does not depend on them).
#[derive(Default, Clone)]
pub struct Readiness {
    up: Arc<AtomicBool>,
    storage: Arc<RwLock<Option<Arc<dyn Store>>>>,
    shards: Arc<RwLock<Option<Arc<ShardTable>>>>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness")
            .field("up", &self.up.load(Ordering::Relaxed))
            .field("storage_healthy", &self.storage_healthy())
            .finish()
    }
}

impl Readiness {
    pub fn set(&self, ready: bool) {
        self.up.store(ready, Ordering::Release);
    }

    /// Makes readiness follow `store`'s health too.
    pub fn watch_storage(&self, store: Arc<dyn Store>) {
        *self.storage.write().unwrap_or_else(PoisonError::into_inner) = Some(store);
    }

    /// Makes `/readyz` count the keys `table` holds quarantined.
    pub fn watch_shards(&self, table: Arc<ShardTable>) {
        *self.shards.write().unwrap_or_else(PoisonError::into_inner) = Some(table);
    }

    /// One line per shard with quarantined keys (none on a single node). Counts only: these
    /// endpoints expose no group data (module docs); the dashboard's `/api/quarantine` names
    /// the keys to a principal that may see them.
    pub fn quarantined(&self) -> Vec<String> {
        let table = self.shards.read().unwrap_or_else(PoisonError::into_inner);
        let Some(table) = table.as_ref() else {
            return Vec::new();
        };
        table
            .quarantine()
            .counts()
            .into_iter()
            .map(|(shard, keys)| {
                format!(
                    "shard {shard}: {keys} key(s) in etcd cannot be decoded; their groups are \
                     held back (the ERROR log and /api/quarantine name them)"
                )
            })
            .collect()
    }

    /// Whether the watched store (if any) takes writes.
    pub fn storage_healthy(&self) -> bool {
        self.storage
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_none_or(|store| store.healthy())
    }

    pub fn get(&self) -> bool {
        self.up.load(Ordering::Acquire) && self.storage_healthy()
    }
}

/// Most bytes of an admin request's head (request line and headers). Admin requests are bare
/// GETs of a few hundred bytes; hyper's own floor for this buffer is 8 KiB. A longer head is
/// answered 431 and closed.
const ADMIN_MAX_HEAD_BYTES: usize = 16 * 1024;

/// The admin listener's limits.
#[derive(Debug, Clone, Copy)]
pub struct AdminLimits {
    /// Connections open at once; more wait in the kernel's accept queue until one closes.
    pub max_connections: usize,
    /// A connection's whole life: its request head must arrive, and its answer leave, within
    /// this (one request per connection, no keep-alive).
    pub timeout: Duration,
}

impl From<&ConnectionLimits> for AdminLimits {
    fn from(limits: &ConnectionLimits) -> Self {
        Self {
            max_connections: limits.admin_max_connections,
            timeout: limits.admin_timeout,
        }
    }
}

/// A running admin listener; stops when dropped or on [`AdminServer::stop`].
pub struct AdminServer {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
}

impl AdminServer {
    /// Binds `addr` and serves until stopped, on a thread of its own with its own
    /// single-threaded runtime: whatever its clients do, they never hold up the thread that
    /// routes requests and fires timers.
    pub fn start(
        addr: &str,
        readiness: Readiness,
        limits: AdminLimits,
        tls: Option<TlsSettings>,
        dashboard: Arc<Dashboard>,
    ) -> std::io::Result<AdminServer> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        metrics_handle();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("musterd-admin".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => {
                            serve(listener, readiness, limits, tls, dashboard, stopped).await
                        }
                        Err(e) => warn!(error = %e, "admin listener could not start"),
                    }
                });
            })?;
        info!(%local_addr, "admin listener (metrics, health, dashboard) up");
        Ok(AdminServer { local_addr, stop })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The accept loop: one task per connection, at most `limits.max_connections` of them; with
/// that many open it accepts nothing until one closes.
async fn serve(
    listener: TcpListener,
    readiness: Readiness,
    limits: AdminLimits,
    tls: Option<TlsSettings>,
    dashboard: Arc<Dashboard>,
    mut stopped: watch::Receiver<bool>,
) {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let mut backoff = AcceptBackoff::new("admin");
    let mut full = FullEpisode::default();
    loop {
        // A slot first, then the accept. With every slot held (slowloris), a new connection
        // waits in the kernel's accept queue, bounded by the listen backlog, until a slot
        // frees: accepting it only to close it at once cost as much CPU as the attacker
        // spent reconnecting (118 000 accepts and closes in 5 s on 2 cores, taking the
        // client port's heartbeats to 122 ms at p99), and refused a health probe that
        // waiting serves.
        let permit = match Arc::clone(&open).try_acquire_owned() {
            Ok(permit) => {
                full.free(Instant::now());
                permit
            }
            Err(_) => {
                counter!("muster_admin_accept_waits_total").increment(1);
                full.waiting(Instant::now(), limits.max_connections);
                tokio::select! {
                    permit = Arc::clone(&open).acquire_owned() => match permit {
                        Ok(permit) => permit,
                        // Never closed; should it be, stop serving rather than spin.
                        Err(_) => break,
                    },
                    _ = stopped.changed() => break,
                }
            }
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.changed() => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff.succeeded();
                accepted
            }
            Err(e) => {
                drop(permit);
                if let Some(pause) = backoff.failed(&e) {
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stopped.changed() => break,
                    }
                }
                continue;
            }
        };
        let readiness = readiness.clone();
        let dashboard = Arc::clone(&dashboard);
        let tls = tls.as_ref().map(|tls| tls.admin.get());
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let stream = match tls {
                None => ClientStream::from(stream),
                Some(config) => {
                    match tls::accept(&config, limits.timeout, stream, peer, "admin").await {
                        Ok(accepted) => accepted.stream,
                        Err(_) => return,
                    }
                }
            };
            let service = service_fn(move |req| {
                let readiness = readiness.clone();
                let dashboard = Arc::clone(&dashboard);
                async move { Ok::<_, Infallible>(route(&req, &readiness, &dashboard, peer.ip()).await) }
            });
            let mut http = http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(limits.timeout)
                .max_buf_size(ADMIN_MAX_HEAD_BYTES)
                .keep_alive(false);
            let connection = http.serve_connection(TokioIo::new(stream), service);
            // The handshake's time counts: `admin_timeout_ms` bounds the whole exchange.
            match tokio::time::timeout_at(started + limits.timeout, connection).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => debug!(error = %e, "admin connection ended"),
                Err(_) => debug!("admin connection timed out"),
            }
            drop(permit);
        });
    }
}

/// An episode of every admin slot held, for the operator's log: one WARN when the listener
/// first has to wait for a slot, one INFO with the count once a slot is free at once again
/// [`EPISODE_QUIET`] after the last wait. A slowloris keeps the listener waiting for as long as
/// it lasts, and when it stops the queued connections drain through the slots, full and free
/// by turns for a second or so: one line each way, not one per wait or per turn.
#[derive(Debug, Default)]
struct FullEpisode {
    /// When the episode began, and the last wait of it.
    since: Option<(Instant, Instant)>,
    waits: u64,
}

/// How long after its last wait a free slot ends an episode.
const EPISODE_QUIET: Duration = Duration::from_secs(1);

impl FullEpisode {
    /// The listener waits for a slot at `now`.
    fn waiting(&mut self, now: Instant, max: usize) {
        self.waits += 1;
        match &mut self.since {
            Some((_, last)) => *last = now,
            None => {
                self.since = Some((now, now));
                warn!(
                    max,
                    "every admin connection slot is held: new admin connections wait in the \
                     kernel's accept queue until one closes (slow or stalled clients? keep the \
                     admin port internal, or raise admin_max_connections)"
                );
            }
        }
    }

    /// A slot was free at once at `now`: ends an episode quiet for [`EPISODE_QUIET`]. Whether
    /// one ended.
    fn free(&mut self, now: Instant) -> bool {
        match self.since {
            Some((began, last)) if now.saturating_duration_since(last) >= EPISODE_QUIET => {
                info!(
                    waits = self.waits,
                    for_ms = last.saturating_duration_since(began).as_millis() as u64,
                    "admin connection slots free again"
                );
                self.since = None;
                self.waits = 0;
                true
            }
            _ => false,
        }
    }
}

async fn route(
    req: &Request<Incoming>,
    readiness: &Readiness,
    dashboard: &Dashboard,
    peer: std::net::IpAddr,
) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
    }
    // A GET has no body: one announced is refused unread (the connection then closes).
    if req.body().size_hint().upper() != Some(0) {
        return text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "admin requests have no body\n",
        );
    }
    match req.uri().path() {
        "/metrics" => {
            let body = render_metrics();
            let mut response = text(StatusCode::OK, &body);
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            response
        }
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" if !readiness.up.load(Ordering::Acquire) => {
            text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
        }
        "/readyz" if !readiness.storage_healthy() => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: storage failing\n",
        ),
        // Still ready: every other group is served. The detail is for the operator.
        "/readyz" => {
            let mut body = String::from("ready\n");
            for line in readiness.quarantined() {
                body.push_str(&line);
                body.push('\n');
            }
            text(StatusCode::OK, &body)
        }
        _ => dashboard.serve(req, peer).await,
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_ends_only_after_a_quiet_second_so_a_draining_queue_logs_once() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut full = FullEpisode::default();
        assert!(!full.free(at(0)), "no episode, nothing to end");
        full.waiting(at(0), 32);
        // The queue drains: free and full by turns, each within the quiet second.
        for ms in [10, 20, 300, 900, 1_500] {
            assert!(
                !full.free(at(ms)),
                "{ms} ms: the last wait was under a second ago"
            );
            full.waiting(at(ms + 1), 32);
        }
        assert_eq!(full.waits, 6);
        assert!(!full.free(at(2_400)), "0.9 s after the last wait");
        assert!(full.free(at(2_501)), "a quiet second ends it");
        assert_eq!((full.since, full.waits), (None, 0));
        // The next wait begins a new episode.
        full.waiting(at(3_000), 32);
        assert!(full.since.is_some());
    }
}
