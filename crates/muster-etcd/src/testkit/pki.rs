//! Certificates for a TLS test etcd, made with rcgen and written as PEM files in the cluster's
//! temporary directory: a CA; a server certificate for `localhost` and 127.0.0.1 that it
//! signed; a client certificate it signed (for etcd's `--client-cert-auth`); and a second,
//! unrelated CA with a client certificate of its own: etcd must refuse that certificate, and a
//! client trusting only that CA must refuse etcd's.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use super::TestkitError;

/// The subject common name of [`Pki::client`]: with no token, etcd takes it as the user.
pub const CLIENT_COMMON_NAME: &str = "muster-test-client";

/// A certificate and its key, as files.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The PEM files of one TLS test etcd (module docs).
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA etcd's server certificate and the good client certificate are signed by.
    pub ca: PathBuf,
    pub server: Issued,
    pub client: Issued,
    /// An unrelated CA: clients trusting only it must refuse etcd's server certificate.
    pub rogue_ca: PathBuf,
    /// A client certificate signed by the rogue CA: etcd must refuse it.
    pub rogue_client: Issued,
}

fn failed(what: &str, e: impl std::fmt::Display) -> TestkitError {
    TestkitError::Start(format!("test certificates: {what}: {e}"))
}

/// One CA, its certificate written to `dir/{name}-ca.pem`.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    path: PathBuf,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Result<Ca, TestkitError> {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(|e| failed("CA", e))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(|e| failed("CA key", e))?;
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(|e| failed("CA", e))?;
        let path = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&path, issuer.pem()).map_err(|e| failed("writing the CA", e))?;
        Ok(Ca { issuer, path })
    }

    fn issue(
        &self,
        dir: &Path,
        file: &str,
        cn: &str,
        names: Vec<String>,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<Issued, TestkitError> {
        let mut params = CertificateParams::new(names).map_err(|e| failed(file, e))?;
        // rcgen puts a default CN in new params: replace it.
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().map_err(|e| failed(file, e))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| failed(file, e))?;
        let issued = Issued {
            cert: dir.join(format!("{file}.pem")),
            key: dir.join(format!("{file}-key.pem")),
        };
        std::fs::write(&issued.cert, cert.pem()).map_err(|e| failed(file, e))?;
        std::fs::write(&issued.key, key.serialize_pem()).map_err(|e| failed(file, e))?;
        Ok(issued)
    }

    fn server(&self, dir: &Path, file: &str) -> Result<Issued, TestkitError> {
        self.issue(
            dir,
            file,
            "localhost",
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }
}

/// Writes an ES256 key pair for etcd's JWT tokens to `dir`: `(private, public)` PEM paths.
pub(crate) fn jwt_keys(dir: &Path) -> Result<(PathBuf, PathBuf), TestkitError> {
    let key = KeyPair::generate().map_err(|e| failed("JWT key", e))?;
    let private = dir.join("jwt-key.pem");
    let public = dir.join("jwt-pub.pem");
    std::fs::write(&private, key.serialize_pem()).map_err(|e| failed("JWT key", e))?;
    std::fs::write(&public, key.public_key_pem()).map_err(|e| failed("JWT key", e))?;
    Ok((private, public))
}

impl Pki {
    /// Makes every file in `dir`.
    pub(crate) fn new(dir: &Path) -> Result<Pki, TestkitError> {
        let ca = Ca::new(dir, "etcd")?;
        let rogue = Ca::new(dir, "rogue")?;
        Ok(Pki {
            server: ca.server(dir, "server")?,
            client: ca.issue(
                dir,
                "client",
                CLIENT_COMMON_NAME,
                vec![],
                ExtendedKeyUsagePurpose::ClientAuth,
            )?,
            rogue_client: rogue.issue(
                dir,
                "rogue-client",
                CLIENT_COMMON_NAME,
                vec![],
                ExtendedKeyUsagePurpose::ClientAuth,
            )?,
            ca: ca.path,
            rogue_ca: rogue.path,
        })
    }
}
