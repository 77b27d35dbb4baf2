//! One connection's TLS handshake, bounded by a timeout, run by the connection's own task (never
//! the accept loop), so a client that connects and sends nothing, or sends plaintext, holds up
//! nobody else. A failed handshake is counted in `muster_tls_handshake_failures_total{reason}`
//! and logged at DEBUG (INFO for a client certificate that was refused): a plaintext client or
//! a port scanner on a TLS port is routine, not a warning.
//!
//! After an mTLS handshake the verified client certificate's subject common name is read here:
//! it is the connection's `certificate_name`, which the auth layer maps to a principal.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics::counter;
use rustls::ServerConfig;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info};

use super::ClientStream;

/// A completed handshake.
pub struct Accepted {
    pub stream: ClientStream,
    /// The verified client certificate's subject common name (mTLS), if there was one.
    pub certificate_name: Option<String>,
}

/// Why a handshake failed: `reason` is the metric label.
#[derive(Debug, thiserror::Error)]
#[error("TLS handshake failed ({reason}): {detail}")]
pub struct HandshakeFailure {
    pub reason: &'static str,
    pub detail: String,
}

/// Runs the server side of a TLS handshake on `stream` within `timeout`. `listener` labels the
/// log line (`client`, `admin`).
pub async fn accept(
    config: &Arc<ServerConfig>,
    timeout: Duration,
    stream: TcpStream,
    peer: SocketAddr,
    listener: &'static str,
) -> Result<Accepted, HandshakeFailure> {
    let acceptor = TlsAcceptor::from(Arc::clone(config));
    let failure = match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => {
            // A verified certificate without a readable subject CN names no principal: it gets
            // the empty name, which no principal can have, so that with an auth file it is
            // refused rather than left to a token (the certificate is what mTLS binds to).
            let certificate_name = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|cert| common_name(cert.as_ref()).unwrap_or_default());
            return Ok(Accepted {
                stream: ClientStream::Tls(Box::new(tls)),
                certificate_name,
            });
        }
        Ok(Err(e)) => classify(&e),
        Err(_) => HandshakeFailure {
            reason: "timeout",
            detail: format!("not completed within {} ms", timeout.as_millis()),
        },
    };
    counter!("muster_tls_handshake_failures_total", "reason" => failure.reason).increment(1);
    if matches!(failure.reason, "no_client_certificate" | "bad_certificate") {
        info!(%peer, listener, reason = failure.reason, error = %failure.detail, "TLS client refused");
    } else {
        debug!(%peer, listener, reason = failure.reason, error = %failure.detail, "TLS handshake failed");
    }
    Err(failure)
}

/// Sorts a handshake error into a metric label.
fn classify(e: &std::io::Error) -> HandshakeFailure {
    let tls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let reason = match tls {
        // A plaintext Muster frame (or HTTP request) is not a TLS record.
        Some(rustls::Error::InvalidMessage(_)) => "not_tls",
        Some(rustls::Error::NoCertificatesPresented) => "no_client_certificate",
        Some(rustls::Error::InvalidCertificate(cert)) => {
            return HandshakeFailure {
                reason: "bad_certificate",
                detail: super::refusal::explain(cert),
            };
        }
        Some(_) => "tls_error",
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => "closed",
        None => "io",
    };
    HandshakeFailure {
        reason,
        detail: e.to_string(),
    }
}

/// The subject common name of a DER certificate (the first CN if there are several).
fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_owned);
    name
}
