//! The operators' HTTP listener (`--admin-listen`): Prometheus text at `/metrics`, `/healthz`
//! (the process is up) and `/readyz` (state is loaded and client connections are accepted).
//! Deliberately tiny: HTTP/1.1, GET only, no TLS.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info};

use crate::telemetry::{metrics_handle, render_metrics};

/// Whether the server is ready for clients (`/readyz`).
#[derive(Debug, Default, Clone)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
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
        "/readyz" if readiness.get() => text(StatusCode::OK, "ready\n"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response
}
