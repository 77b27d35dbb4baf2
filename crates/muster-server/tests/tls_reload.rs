//! The real binary reloading its TLS certificate on SIGHUP: new handshakes get the new
//! certificate, a connection opened before keeps working, and bad files are refused with the
//! old certificate kept.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rcgen::{CertificateParams, DnType, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, ServerName};

/// A server certificate for 127.0.0.1 named `cn`, signed by `ca`, written as cert.pem and
/// key.pem in `dir` (replacing what is there).
fn write_server_cert(dir: &Path, ca: &Issuer<'_, KeyPair>, cn: &str) -> Result<()> {
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()])?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca)?;
    // Written beside and renamed: the server never reads a half-written file.
    std::fs::write(dir.join("cert.tmp"), cert.pem())?;
    std::fs::write(dir.join("key.tmp"), key.serialize_pem())?;
    std::fs::rename(dir.join("cert.tmp"), dir.join("cert.pem"))?;
    std::fs::rename(dir.join("key.tmp"), dir.join("key.pem"))?;
    Ok(())
}

/// A TLS connection to the server, trusting `ca`; and the common name its certificate shows.
fn connect(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
) -> Result<(
    rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    String,
)> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone())?;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tls = rustls::ClientConnection::new(
        Arc::new(config),
        ServerName::try_from("127.0.0.1")?.to_owned(),
    )?;
    let socket = TcpStream::connect(addr)?;
    socket.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut stream = rustls::StreamOwned::new(tls, socket);
    hello(&mut stream)?;
    let Some(cert) = stream
        .conn
        .peer_certificates()
        .and_then(|chain| chain.first())
    else {
        bail!("no server certificate");
    };
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())?;
    let cn = parsed
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    Ok((stream, cn))
}

/// One Hello over `stream`, answered NONE.
fn hello(stream: &mut (impl Read + Write)) -> Result<()> {
    match support::hello_over(stream, None)? {
        0 => Ok(()),
        code => bail!("hello refused: {code}"),
    }
}

fn sighup(child: &std::process::Child) -> Result<()> {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()?;
    if !status.success() {
        bail!("kill -HUP failed");
    }
    Ok(())
}

/// New connections until one shows `cn` (a reload is applied when the signal is handled).
fn until_served_as(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    cn: &str,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (stream, seen) = connect(addr, ca)?;
        if seen == cn {
            return Ok(stream);
        }
        if Instant::now() > deadline {
            bail!("still served as {seen:?}, not {cn:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sighup_reloads_the_certificate_without_dropping_connections() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-tls-reload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "reload-ca");
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca_der = ca_cert.der().clone();
    let ca = Issuer::new(ca_params, ca_key);
    write_server_cert(&dir, &ca, "first")?;
    let (cert, key) = (
        dir.join("cert.pem").display().to_string(),
        dir.join("key.pem").display().to_string(),
    );
    let (mut child, addr) =
        support::start_with(&dir.join("data"), &["--tls-cert", &cert, "--tls-key", &key])?;

    let (mut before, seen) = connect(addr, &ca_der)?;
    assert_eq!(seen, "first");
    write_server_cert(&dir, &ca, "second")?;
    sighup(&child)?;
    let mut after = until_served_as(addr, &ca_der, "second")?;
    // The connection made before the reload still works.
    hello(&mut before)?;
    hello(&mut after)?;

    // Bad files are refused: the certificate in force stays.
    std::fs::write(dir.join("cert.pem"), "not a certificate")?;
    sighup(&child)?;
    std::thread::sleep(Duration::from_millis(300));
    let (_, seen) = connect(addr, &ca_der)?;
    assert_eq!(
        seen, "second",
        "a refused reload keeps the certificate in force"
    );
    hello(&mut before)?;

    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
