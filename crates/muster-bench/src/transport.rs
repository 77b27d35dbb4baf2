//! How the bench reaches the server: plain TCP or TLS (rustls), with or without an auth token
//! in Hello. One [`Transport`] is in force for the whole process (every scenario's setup and load
//! connections use it); `main` sets it from `--token` and `--tls-*`, and the `security` scenario
//! switches it between its phases, which run one after the other.

use std::net::SocketAddr;
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::{Context as _, Result};
use muster_client::TlsConfig;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;
use tokio_util::either::Either;

/// A connection to the server: TCP, or TLS over TCP.
pub type Stream = Either<TcpStream, TlsStream<TcpStream>>;

/// TLS settings of the client side (built by `muster-client`'s [`TlsConfig`], which parses
/// and checks the PEM files; the bench only wraps its own sockets with them).
#[derive(Clone)]
pub struct Tls {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: ServerName<'static>,
}

/// How connections are opened and greeted.
#[derive(Clone, Default)]
pub struct Transport {
    /// Sent as Hello's `auth_token`.
    pub token: Option<String>,
    pub tls: Option<Tls>,
}

static CURRENT: RwLock<Option<Arc<Transport>>> = RwLock::new(None);

/// Makes `transport` the one every later connection uses.
pub fn set(transport: Transport) {
    *CURRENT.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(transport));
}

/// The transport in force (plain TCP, no token, until [`set`]).
pub fn current() -> Arc<Transport> {
    CURRENT
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .unwrap_or_default()
}

impl Tls {
    /// The rustls side of `tls` for a server at `server` (`HOST:PORT`; its host is the name
    /// to verify unless `tls` names one): the settings `muster-client` connects with.
    pub fn new(tls: &TlsConfig, server: &str) -> Result<Tls> {
        let (config, server_name) = tls.for_addr(server)?;
        Ok(Tls {
            config,
            server_name,
        })
    }
}

/// Opens a plain TCP connection with Nagle off (requests are small and latency is measured),
/// whatever the transport (the attacks speak plaintext on purpose).
pub async fn connect_tcp(addr: SocketAddr) -> Result<TcpStream> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// [`connect_tcp`], then TLS over it if the transport says so.
pub async fn connect(addr: SocketAddr) -> Result<Stream> {
    let stream = connect_tcp(addr).await?;
    let transport = current();
    match &transport.tls {
        None => Ok(Either::Left(stream)),
        Some(tls) => {
            let tls_stream = TlsConnector::from(Arc::clone(&tls.config))
                .connect(tls.server_name.clone(), stream)
                .await
                .with_context(|| format!("TLS handshake with {addr} failed"))?;
            Ok(Either::Right(tls_stream))
        }
    }
}

/// The token Hello carries.
pub fn token() -> Option<String> {
    current().token.clone()
}
