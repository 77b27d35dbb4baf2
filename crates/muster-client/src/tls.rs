//! TLS to the server: [`TlsConfig`], the trusted CA (a file or PEM bytes), an optional client
//! certificate and key (for servers that require them, mTLS: the certificate's common name is
//! the principal), and the name the server's certificate must carry. Everything is parsed and
//! checked when the config is built, with errors ([`TlsError`]) naming the file at fault; the
//! connection then only wraps its TCP stream (`connection.rs`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// Why a TLS configuration could not be built. `origin` names a file, or "PEM bytes".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: not valid PEM: {reason}")]
    BadPem { origin: String, reason: String },
    #[error("{origin}: no CERTIFICATE block found")]
    NoCertificate { origin: String },
    #[error("{origin}: no PRIVATE KEY block found (PKCS#8, PKCS#1 or SEC1)")]
    NoKey { origin: String },
    #[error("{origin}: not a usable CA certificate: {reason}")]
    BadCa { origin: String, reason: String },
    #[error("{key}: the client key does not match the client certificate {cert}")]
    KeyMismatch { cert: String, key: String },
    #[error("client certificate {cert} / key {key}: {reason}")]
    ClientCert {
        cert: String,
        key: String,
        reason: String,
    },
    #[error("{0:?} is not a valid TLS server name (a DNS name or an IP address)")]
    ServerName(String),
    #[error("TLS handshake with {addr} failed: {reason}")]
    Handshake { addr: String, reason: String },
    /// The server ended the TLS session with an alert (e.g. it requires a client certificate,
    /// or refused ours), or sent what is not TLS.
    #[error("the TLS session failed: {reason}")]
    Session { reason: String },
    #[error("{0}")]
    Incomplete(&'static str),
    #[error("TLS setup failed: {0}")]
    Rustls(#[from] rustls::Error),
}

/// PEM text and where it came from (for error messages).
struct Pem {
    bytes: Vec<u8>,
    origin: String,
}

impl Pem {
    fn file(path: &Path) -> Result<Pem, TlsError> {
        let bytes = std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })?;
        Ok(Pem {
            bytes,
            origin: path.display().to_string(),
        })
    }

    fn bytes(bytes: &[u8], what: &str) -> Pem {
        Pem {
            bytes: bytes.to_vec(),
            origin: format!("{what} (PEM bytes)"),
        }
    }

    fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let certs = CertificateDer::pem_slice_iter(&self.bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::BadPem {
                origin: self.origin.clone(),
                reason: e.to_string(),
            })?;
        if certs.is_empty() {
            return Err(TlsError::NoCertificate {
                origin: self.origin.clone(),
            });
        }
        Ok(certs)
    }

    fn key(&self) -> Result<PrivateKeyDer<'static>, TlsError> {
        PrivateKeyDer::from_pem_slice(&self.bytes).map_err(|e| match e {
            rustls_pki_types::pem::Error::NoItemsFound => TlsError::NoKey {
                origin: self.origin.clone(),
            },
            e => TlsError::BadPem {
                origin: self.origin.clone(),
                reason: e.to_string(),
            },
        })
    }
}

/// How to speak TLS to the server. Cheap to clone.
#[derive(Clone)]
pub struct TlsConfig {
    roots: Arc<RootCertStore>,
    identity: Option<Identity>,
    server_name: Option<ServerName<'static>>,
    config: Arc<ClientConfig>,
}

#[derive(Clone)]
struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
    cert_origin: String,
    key_origin: String,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("trusted_cas", &self.roots.len())
            .field(
                "client_certificate",
                &self.identity.as_ref().map(|i| &i.cert_origin),
            )
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl TlsConfig {
    /// Trust the CA certificates in this PEM file (the server's certificate must chain to one).
    pub fn from_ca_file(path: impl AsRef<Path>) -> Result<TlsConfig, TlsError> {
        Self::from_ca(&Pem::file(path.as_ref())?)
    }

    /// Trust the CA certificates in these PEM bytes.
    pub fn from_ca_pem(pem: &[u8]) -> Result<TlsConfig, TlsError> {
        Self::from_ca(&Pem::bytes(pem, "CA"))
    }

    fn from_ca(pem: &Pem) -> Result<TlsConfig, TlsError> {
        let mut roots = RootCertStore::empty();
        for cert in pem.certificates()? {
            roots.add(cert).map_err(|e| TlsError::BadCa {
                origin: pem.origin.clone(),
                reason: e.to_string(),
            })?;
        }
        let roots = Arc::new(roots);
        let config = build(&roots, None)?;
        Ok(TlsConfig {
            roots,
            identity: None,
            server_name: None,
            config,
        })
    }

    /// Present this client certificate (PEM chain) and key, for servers that require client
    /// certificates.
    pub fn client_cert_files(
        self,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsConfig, TlsError> {
        self.client_cert(&Pem::file(cert.as_ref())?, &Pem::file(key.as_ref())?)
    }

    /// Present this client certificate and key, given as PEM bytes.
    pub fn client_cert_pem(self, cert: &[u8], key: &[u8]) -> Result<TlsConfig, TlsError> {
        self.client_cert(
            &Pem::bytes(cert, "client certificate"),
            &Pem::bytes(key, "client key"),
        )
    }

    fn client_cert(mut self, cert: &Pem, key: &Pem) -> Result<TlsConfig, TlsError> {
        let identity = Identity {
            chain: cert.certificates()?,
            key: Arc::new(key.key()?),
            cert_origin: cert.origin.clone(),
            key_origin: key.origin.clone(),
        };
        self.config = build(&self.roots, Some(&identity))?;
        self.identity = Some(identity);
        Ok(self)
    }

    /// The name the server's certificate must carry. Default: the host part of the server
    /// address.
    pub fn server_name(mut self, name: impl Into<String>) -> Result<TlsConfig, TlsError> {
        let name = name.into();
        let parsed = ServerName::try_from(name.clone()).map_err(|_| TlsError::ServerName(name))?;
        self.server_name = Some(parsed);
        Ok(self)
    }

    /// The settings of the `--tls-ca`, `--tls-client-cert`, `--tls-client-key` and
    /// `--tls-server-name` options of the CLI and the worker example: `None` (plaintext)
    /// without a CA file; a client certificate needs its key, and TLS (the CA file).
    pub fn from_options(
        ca: Option<&Path>,
        client_cert: Option<&Path>,
        client_key: Option<&Path>,
        server_name: Option<&str>,
    ) -> Result<Option<TlsConfig>, TlsError> {
        let Some(ca) = ca else {
            return match (client_cert, client_key, server_name) {
                (None, None, None) => Ok(None),
                _ => Err(TlsError::Incomplete(
                    "--tls-client-cert, --tls-client-key and --tls-server-name need --tls-ca (the CA that signed the server's certificate)",
                )),
            };
        };
        let mut tls = TlsConfig::from_ca_file(ca)?;
        match (client_cert, client_key) {
            (Some(cert), Some(key)) => tls = tls.client_cert_files(cert, key)?,
            (None, None) => {}
            (Some(_), None) => {
                return Err(TlsError::Incomplete(
                    "--tls-client-cert needs --tls-client-key",
                ))
            }
            (None, Some(_)) => {
                return Err(TlsError::Incomplete(
                    "--tls-client-key needs --tls-client-cert",
                ))
            }
        }
        if let Some(name) = server_name {
            tls = tls.server_name(name)?;
        }
        Ok(Some(tls))
    }

    /// Whether a client certificate is presented.
    pub fn has_client_cert(&self) -> bool {
        self.identity.is_some()
    }

    /// The rustls configuration and the name to verify for a server at `addr` (`host:port`),
    /// as a [`Connection`](crate::Connection) uses them: for a program that opens its own
    /// sockets (muster-bench) with the same TLS.
    pub fn for_addr(
        &self,
        addr: &str,
    ) -> Result<(Arc<ClientConfig>, ServerName<'static>), TlsError> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => {
                let host = host_of(addr);
                ServerName::try_from(host.to_owned())
                    .map_err(|_| TlsError::ServerName(host.to_owned()))?
            }
        };
        Ok((Arc::clone(&self.config), name))
    }
}

fn build(
    roots: &Arc<RootCertStore>,
    identity: Option<&Identity>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(Arc::clone(roots));
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some(identity) => builder
            .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())
            .map_err(|e| match e {
                rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                    TlsError::KeyMismatch {
                        cert: identity.cert_origin.clone(),
                        key: identity.key_origin.clone(),
                    }
                }
                e => TlsError::ClientCert {
                    cert: identity.cert_origin.clone(),
                    key: identity.key_origin.clone(),
                    reason: e.to_string(),
                },
            })?,
    };
    Ok(Arc::new(config))
}

/// The host part of `host:port`, `[v6]:port` or a bare host.
fn host_of(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        // One colon: host:port. More: a bare IPv6 address.
        Some((host, _)) if !host.contains(':') => host,
        _ => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_server_name_defaults_to_the_host_of_the_address() {
        assert_eq!(host_of("localhost:7450"), "localhost");
        assert_eq!(host_of("10.0.0.1:7450"), "10.0.0.1");
        assert_eq!(host_of("[::1]:7450"), "::1");
        assert_eq!(host_of("muster.internal"), "muster.internal");
        assert_eq!(host_of("::1"), "::1");
    }
}
