//! TLS on the server's listeners (`--tls-cert`, `--tls-key`, `--tls-client-ca`): the rustls
//! configurations, built at startup from PEM files ([`TlsSettings::load`]), with errors that
//! name the file at fault, and built again from the same files on SIGHUP
//! ([`TlsSettings::reload`], `reload.rs`). Startup refuses a bad file: a server asked for TLS
//! never runs without it; a reload refuses it and keeps what is in force.
//!
//! The client listener requires client certificates when a client CA is given (mTLS; the
//! certificate's subject common name is the principal, `handshake.rs`). The admin listener
//! never does: probes and Prometheus scrapers connect with server authentication only, and
//! the admin endpoints expose no group data.

mod handshake;
mod refusal;
mod reload;
mod stream;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use self::handshake::{accept, Accepted, HandshakeFailure};
pub use self::reload::Current;
pub use self::stream::ClientStream;

/// How long a client has to complete its TLS handshake before it is dropped, unless set.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why TLS could not be set up. Each names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not valid PEM: {reason}", path.display())]
    BadPem { path: PathBuf, reason: String },
    #[error("{}: no CERTIFICATE block found", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{}: no PRIVATE KEY block found (PKCS#8, PKCS#1 or SEC1)", path.display())]
    NoKey { path: PathBuf },
    #[error("{}: the private key does not match the certificate in {}", key.display(), cert.display())]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("{} / {}: cannot use this certificate and key: {source}", cert.display(), key.display())]
    CertKey {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("{}: not a usable CA certificate: {reason}", path.display())]
    BadCa { path: PathBuf, reason: String },
    #[error("TLS setup failed: {0}")]
    Config(#[from] rustls::Error),
}

/// The server's TLS configurations; cheap to clone, and every clone sees a reload.
#[derive(Clone)]
pub struct TlsSettings {
    /// The client listener's (requires client certificates when a client CA was given).
    pub clients: Current,
    /// The admin listener's: the same certificate, never client certificates.
    pub admin: Current,
    /// Whether clients must present a certificate signed by the client CA.
    pub client_certificates_required: bool,
    /// A client that has not completed its handshake by then is dropped.
    pub handshake_timeout: Duration,
    /// The files it was built from (read again by a reload).
    files: Files,
}

/// The certificate chain, key and client CA files.
#[derive(Clone, Debug)]
struct Files {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

/// Configurations built from the files.
struct Built {
    clients: ServerConfig,
    admin: ServerConfig,
    client_certificates_required: bool,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field(
                "client_certificates_required",
                &self.client_certificates_required,
            )
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl TlsSettings {
    /// Loads and checks the server certificate chain and key, and the client CA if any.
    pub fn load(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<Self, TlsError> {
        let built = build(cert, key, client_ca)?;
        Ok(Self {
            clients: Current::new(built.clients),
            admin: Current::new(built.admin),
            client_certificates_required: built.client_certificates_required,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            files: Files {
                cert: cert.to_owned(),
                key: key.to_owned(),
                client_ca: client_ca.map(Path::to_owned),
            },
        })
    }

    /// Reads the same files again and, if they are good, makes them what every later handshake
    /// uses, on both listeners at once; connections already open keep their session. A bad
    /// file is refused (the error names it) and what is in force stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let files = &self.files;
        let built = build(&files.cert, &files.key, files.client_ca.as_deref())?;
        self.clients.replace(built.clients);
        self.admin.replace(built.admin);
        Ok(())
    }

    /// The certificate file (for log lines).
    pub fn cert_path(&self) -> &Path {
        &self.files.cert
    }
}

/// Builds both listeners' configurations from the files, checking each.
fn build(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<Built, TlsError> {
    let chain = read_certificates(cert)?;
    let key_der = read_key(key)?;
    let roots = client_ca.map(read_roots).transpose()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let single = |verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>| {
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()?;
        let builder = match verifier {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        builder
            .with_single_cert(chain.clone(), key_der.clone_key())
            .map_err(|source| match source {
                rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                    TlsError::KeyMismatch {
                        cert: cert.to_owned(),
                        key: key.to_owned(),
                    }
                }
                source => TlsError::CertKey {
                    cert: cert.to_owned(),
                    key: key.to_owned(),
                    source,
                },
            })
    };
    let mut admin = single(None)?;
    admin.alpn_protocols = vec![b"http/1.1".to_vec()];
    let (clients, required) = match (roots, client_ca) {
        (Some(roots), Some(ca)) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .build()
                    .map_err(|e| TlsError::BadCa {
                        path: ca.to_owned(),
                        reason: e.to_string(),
                    })?;
            (single(Some(verifier))?, true)
        }
        _ => (single(None)?, false),
    };
    Ok(Built {
        clients,
        admin,
        client_certificates_required: required,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn bad_pem(path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::BadPem {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// Every CERTIFICATE block of a PEM file (a chain: the end-entity certificate first).
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_pem(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The first private key of a PEM file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => TlsError::NoKey {
            path: path.to_owned(),
        },
        e => bad_pem(path, e),
    })
}

/// The client CA file's certificates as trust anchors; an empty file is refused (it would
/// refuse every client).
fn read_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certificates(path)? {
        roots.add(cert).map_err(|e| TlsError::BadCa {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    }
    Ok(roots)
}
