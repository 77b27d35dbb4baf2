//! What secures the connection to etcd, loaded and checked before the first request: TLS
//! ([`EtcdTls`]: the CA that signed etcd's server certificates and, for etcd's
//! `--client-cert-auth`, a client certificate and key) and an etcd user ([`EtcdCredentials`],
//! whose password never appears in `Debug` output, logs or error messages). Each error names
//! the file at fault; none quotes a file's contents.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// TLS and credentials for etcd; the default is neither (plain `http://`, no user).
#[derive(Debug, Clone, Default)]
pub struct EtcdSecurity {
    /// Set: endpoints are `https://` (a bare `host:port` too) and verified against its CA.
    pub tls: Option<EtcdTls>,
    /// Set: every request carries a token etcd issued for this user (module `auth`).
    pub credentials: Option<EtcdCredentials>,
}

/// Why the TLS files or the credentials cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EtcdSecurityError {
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
    #[error("{}: not a usable CA certificate: {reason}", path.display())]
    BadCa { path: PathBuf, reason: String },
    #[error("{}: the private key does not match the certificate in {}", key.display(), cert.display())]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("{} / {}: cannot use this certificate and key: {reason}", cert.display(), key.display())]
    CertKey {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("{}: the password file is not UTF-8 text", path.display())]
    NotText { path: PathBuf },
    #[error("the etcd user name is empty")]
    EmptyUser,
    /// The password's source (a file name, or an environment variable's name), never its value.
    #[error("the etcd password from {0} is empty")]
    EmptyPassword(String),
}

/// The CA (and client certificate) to reach etcd over TLS with; cheap to clone.
#[derive(Clone)]
pub struct EtcdTls {
    ca_pem: Arc<[u8]>,
    /// For etcd's `--client-cert-auth`.
    identity: Option<ClientIdentity>,
}

/// A client certificate chain and its key, PEM.
#[derive(Clone)]
struct ClientIdentity {
    cert_pem: Arc<[u8]>,
    key_pem: Arc<[u8]>,
}

impl std::fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTls")
            .field("client_certificate", &self.identity.is_some())
            .finish_non_exhaustive()
    }
}

impl EtcdTls {
    /// Reads and checks the CA bundle and, if given, the client certificate chain and its key
    /// (`(cert, key)`): every file must be PEM with what it is for in it, and the key must be
    /// the certificate's.
    pub fn load(ca: &Path, client: Option<(&Path, &Path)>) -> Result<Self, EtcdSecurityError> {
        let ca_pem = read(ca)?;
        let mut roots = RootCertStore::empty();
        for cert in certificates(ca, &ca_pem)? {
            roots.add(cert).map_err(|e| EtcdSecurityError::BadCa {
                path: ca.to_owned(),
                reason: e.to_string(),
            })?;
        }
        let identity = match client {
            None => None,
            Some((cert, key)) => {
                let cert_pem = read(cert)?;
                let key_pem = read(key)?;
                check_pair(roots, cert, &cert_pem, key, &key_pem)?;
                Some(ClientIdentity {
                    cert_pem: Arc::from(cert_pem),
                    key_pem: Arc::from(key_pem),
                })
            }
        };
        Ok(EtcdTls {
            ca_pem: Arc::from(ca_pem),
            identity,
        })
    }

    /// Whether a client certificate is presented.
    pub fn has_client_certificate(&self) -> bool {
        self.identity.is_some()
    }

    /// tonic's TLS settings for one endpoint (the server name checked is the endpoint's host).
    pub(crate) fn client_config(&self) -> ClientTlsConfig {
        let config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&*self.ca_pem));
        match &self.identity {
            Some(identity) => {
                config.identity(Identity::from_pem(&*identity.cert_pem, &*identity.key_pem))
            }
            None => config,
        }
    }
}

/// The client certificate and key must make a rustls client configuration: this is where a
/// key that is not the certificate's shows, at startup rather than at the first handshake.
fn check_pair(
    roots: RootCertStore,
    cert: &Path,
    cert_pem: &[u8],
    key: &Path,
    key_pem: &[u8],
) -> Result<(), EtcdSecurityError> {
    let chain = certificates(cert, cert_pem)?;
    let key_der = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => EtcdSecurityError::NoKey {
            path: key.to_owned(),
        },
        e => bad_pem(key, e),
    })?;
    let pair_error = |reason: String| EtcdSecurityError::CertKey {
        cert: cert.to_owned(),
        key: key.to_owned(),
        reason,
    };
    ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| pair_error(e.to_string()))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key_der)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                EtcdSecurityError::KeyMismatch {
                    cert: cert.to_owned(),
                    key: key.to_owned(),
                }
            }
            e => pair_error(e.to_string()),
        })?;
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>, EtcdSecurityError> {
    std::fs::read(path).map_err(|source| EtcdSecurityError::Read {
        path: path.to_owned(),
        source,
    })
}

fn bad_pem(path: &Path, e: impl std::fmt::Display) -> EtcdSecurityError {
    EtcdSecurityError::BadPem {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// Every CERTIFICATE block of a PEM file; none is an error.
fn certificates(
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, EtcdSecurityError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_pem(path, e))?;
    if certs.is_empty() {
        return Err(EtcdSecurityError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// An etcd user and its password (the password shows in no `Debug` output).
#[derive(Clone)]
pub struct EtcdCredentials {
    user: String,
    password: String,
}

impl std::fmt::Debug for EtcdCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCredentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl EtcdCredentials {
    /// `source` names where the password came from, for the error when it is empty.
    pub fn new(
        user: impl Into<String>,
        password: String,
        source: &str,
    ) -> Result<Self, EtcdSecurityError> {
        let user = user.into();
        if user.is_empty() {
            return Err(EtcdSecurityError::EmptyUser);
        }
        if password.is_empty() {
            return Err(EtcdSecurityError::EmptyPassword(source.to_owned()));
        }
        Ok(EtcdCredentials { user, password })
    }

    /// The password is the file's contents without one trailing line end (files written by
    /// `echo` or an editor end in one; a password never does).
    pub fn from_password_file(
        user: impl Into<String>,
        path: &Path,
    ) -> Result<Self, EtcdSecurityError> {
        let bytes = read(path)?;
        let text = String::from_utf8(bytes).map_err(|_| EtcdSecurityError::NotText {
            path: path.to_owned(),
        })?;
        let password = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(&text)
            .to_owned();
        Self::new(user, password, &path.display().to_string())
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub(crate) fn password(&self) -> &str {
        &self.password
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_shows_nowhere_and_loses_one_line_end() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("password");
        std::fs::write(&path, "s3cret-value\n").expect("write");
        let credentials = EtcdCredentials::from_password_file("muster", &path).expect("valid");
        assert_eq!(credentials.password(), "s3cret-value");
        assert!(!format!("{credentials:?}").contains("s3cret"));
        std::fs::write(&path, "\n").expect("write");
        let error = EtcdCredentials::from_password_file("muster", &path).expect_err("empty");
        assert!(error.to_string().contains("is empty"), "{error}");
        assert!(matches!(
            EtcdCredentials::new("", "x".into(), "env"),
            Err(EtcdSecurityError::EmptyUser)
        ));
    }

    #[test]
    fn bad_tls_files_are_named() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let missing = dir.path().join("missing.pem");
        let error = EtcdTls::load(&missing, None).expect_err("no file");
        assert!(error.to_string().contains("missing.pem"), "{error}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not pem at all\n").expect("write");
        let error = EtcdTls::load(&empty, None).expect_err("no certificate");
        assert!(
            matches!(error, EtcdSecurityError::NoCertificate { .. }),
            "{error}"
        );
    }
}
