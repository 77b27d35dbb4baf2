//! How the bench reaches the server: plain TCP or TLS (rustls), with or without an auth token
//! in Hello. One [`Transport`] is in force for the whole process (every scenario's setup and load
//! connections use it); `main` sets it from `--token` and `--tls-*`, and the `security` scenario
//! switches it between its phases, which run one after the other.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::{anyhow, Context as _, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;
use tokio_util::either::Either;

/// A connection to the server: TCP, or TLS over TCP.
pub type Stream = Either<TcpStream, TlsStream<TcpStream>>;

/// TLS settings of the client side.
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

impl Transport {
    /// TLS trusting the CA in `ca_pem`, presenting `client` (certificate chain and key PEM) if
    /// given, expecting the server to be `server_name`.
    pub fn tls_from_pem(
        ca_pem: &[u8],
        client: Option<(&[u8], &[u8])>,
        server_name: &str,
    ) -> Result<Tls> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots
                .add(cert.context("unreadable CA certificate")?)
                .context("unusable CA certificate")?;
        }
        if roots.is_empty() {
            return Err(anyhow!("no CA certificate in the CA file"));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                let chain = CertificateDer::pem_slice_iter(chain)
                    .collect::<Result<Vec<_>, _>>()
                    .context("unreadable client certificate")?;
                let key = PrivateKeyDer::from_pem_slice(key).context("unreadable client key")?;
                builder
                    .with_client_auth_cert(chain, key)
                    .context("unusable client certificate or key")?
            }
        };
        Ok(Tls {
            config: Arc::new(config),
            server_name: ServerName::try_from(server_name.to_owned())
                .with_context(|| format!("{server_name:?} is not a server name"))?,
        })
    }

    /// [`Transport::tls_from_pem`] from files.
    pub fn tls_from_files(
        ca: &Path,
        client: Option<(&Path, &Path)>,
        server_name: &str,
    ) -> Result<Tls> {
        let read = |path: &Path| {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
        };
        let ca = read(ca)?;
        let client = match client {
            Some((cert, key)) => Some((read(cert)?, read(key)?)),
            None => None,
        };
        Self::tls_from_pem(
            &ca,
            client.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())),
            server_name,
        )
    }
}

/// Opens a TCP connection with Nagle off (requests are small and latency is measured), then
/// TLS over it if the transport says so.
pub async fn connect(addr: SocketAddr) -> Result<Stream> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_nodelay(true)?;
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
