//! Test certificates made with rcgen: a CA, a server certificate for `localhost` and
//! 127.0.0.1, and client certificates with a chosen subject common name, written as PEM files
//! in a fresh directory (removed on drop).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::atomic::{AtomicU32, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A directory of PEM files for one test.
pub struct Pki {
    pub dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as files.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

impl Pki {
    /// A new CA named `name`, its certificate written to `{dir}/{name}-ca.pem`.
    pub fn new(name: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!(
            "muster-tls-{}-{}-{name}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let ca = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        let pki = Pki { dir, ca };
        std::fs::write(pki.ca_path(), pki.ca.pem()).expect("write CA");
        pki
    }

    /// The CA certificate file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self) -> Issued {
        self.issue(
            "server",
            "localhost",
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate whose subject common name is `cn`.
    pub fn client(&self, cn: &str) -> Issued {
        self.issue(
            &format!("client-{cn}"),
            cn,
            vec![],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    /// A client certificate whose subject has no common name (SAN-only certificates are
    /// common): it names no principal.
    pub fn client_without_name(&self) -> Issued {
        self.issue(
            "client-unnamed",
            "",
            vec![],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    fn issue(
        &self,
        file: &str,
        cn: &str,
        names: Vec<String>,
        usage: ExtendedKeyUsagePurpose,
    ) -> Issued {
        let mut params = CertificateParams::new(names).expect("params");
        // rcgen puts a default CN ("rcgen self signed cert") in every new params: replace it
        // (or, for an unnamed certificate, drop it).
        params.distinguished_name = rcgen::DistinguishedName::new();
        if !cn.is_empty() {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.ca).expect("sign");
        let issued = Issued {
            cert: self.dir.join(format!("{file}.pem")),
            key: self.dir.join(format!("{file}-key.pem")),
        };
        std::fs::write(&issued.cert, cert.pem()).expect("write cert");
        std::fs::write(&issued.key, key.serialize_pem()).expect("write key");
        issued
    }

    /// Writes `contents` to `{dir}/{name}` (for malformed-file tests).
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).expect("write file");
        path
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads a PEM file as text.
pub fn pem(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read PEM")
}

/// A client configuration trusting `ca`, presenting `client` if given.
pub fn client_config(ca: &Path, client: Option<&Issued>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("read CA") {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(issued) => {
            let chain = CertificateDer::pem_file_iter(&issued.cert)
                .expect("read client cert")
                .collect::<Result<Vec<_>, _>>()
                .expect("client cert PEM");
            let key = PrivateKeyDer::from_pem_file(&issued.key).expect("client key");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client cert and key")
        }
    };
    Arc::new(config)
}
