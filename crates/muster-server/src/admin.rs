//! The operators' HTTP listener (`--admin-listen`): Prometheus text at `/metrics`, `/healthz`
//! (the process is up) and `/readyz` (state is loaded, client connections are accepted, and
//! storage takes writes: a full or failing disk makes the server not ready until it recovers).
//! Deliberately tiny: HTTP/1.1, GET only, no TLS.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use muster_coordinator::storage::Store;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info};

use crate::telemetry::{metrics_handle, render_metrics};

/// Whether the server is ready for clients (`/readyz`): it is up (set by startup and
/// shutdown) and the store it watches, if any, takes writes.
#[derive(Default, Clone)]
pub struct Readiness {
    up: Arc<AtomicBool>,
    storage: Arc<RwLock<Option<Arc<dyn Store>>>>,
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

/// A running admin listener; stops when dropped or on [`AdminServer::stop`].
pub struct AdminServer {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
}

impl AdminServer {
    /// Binds `addr` and serves until stopped. Must run inside a tokio runtime.
    pub async fn start(addr: &str, readiness: Readiness) -> std::io::Result<AdminServer> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let (stop, mut stopped) = watch::channel(false);
        metrics_handle();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    _ = stopped.changed() => break,
                };
                let Ok((stream, _)) = accepted else { continue };
                let readiness = readiness.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let readiness = readiness.clone();
                        async move { Ok::<_, Infallible>(route(&req, &readiness)) }
                    });
                    if let Err(e) = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        debug!(error = %e, "admin connection ended");
                    }
                });
            }
        });
        info!(%local_addr, "admin listener (metrics, health) up");
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

fn route(req: &Request<Incoming>, readiness: &Readiness) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
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
        "/readyz" => text(StatusCode::OK, "ready\n"),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response
}
