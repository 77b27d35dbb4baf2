//! muster-client over TLS and mTLS against the real server: trusting the CA (by file and by
//! PEM bytes) works, with the server name defaulting to the host of the address; an untrusted
//! server certificate and a refused client certificate fail at once (not retried); a client
//! certificate's common name is the principal; bad files are errors naming the file.

mod common;
mod pki;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use common::*;
use muster_client::{Admin, ClientError, Connection, ConnectionConfig, TlsConfig, TlsError};
use muster_coordinator::quota::Quotas;
use muster_protocol::ErrorCode;
use muster_server::auth::Auth;
use muster_server::tls::TlsSettings;
use muster_server::ServerThread;
use pki::Pki;

fn tls_server(pki: &Pki, mtls: bool, auth: Option<Arc<Auth>>) -> ServerThread {
    let server = pki.server();
    let ca = pki.ca_path();
    let tls = TlsSettings::load(&server.cert, &server.key, mtls.then_some(ca.as_path()))
        .expect("TLS settings load");
    start_server_with(fast_config(), |options| {
        options.tls = Some(tls);
        if let Some(auth) = auth {
            options.auth = auth;
        }
    })
}

fn config(server: &ServerThread, tls: TlsConfig) -> ConnectionConfig {
    ConnectionConfig::new(server.local_addr().to_string())
        .client_id("tls-client")
        .request_timeout(Duration::from_secs(10))
        .tls(tls)
}

#[tokio::test]
async fn the_client_speaks_tls_trusting_a_ca_file_or_pem_bytes() -> Result<()> {
    let pki = Pki::new("client-basic");
    let server = tls_server(&pki, false, None);
    // The address is 127.0.0.1:port: the certificate's IP name is checked.
    let connection =
        Connection::connect(config(&server, TlsConfig::from_ca_file(pki.ca_path())?)).await?;
    let admin = Admin::new(connection);
    assert_eq!(admin.ensure_topic("orders", 3).await?, 3);
    let pem = pki::pem(&pki.ca_path());
    let by_bytes = TlsConfig::from_ca_pem(pem.as_bytes())?.server_name("localhost")?;
    let admin = Admin::new(Connection::connect(config(&server, by_bytes)).await?);
    assert!(admin.describe_topic("orders").await?.is_some());
    Ok(())
}

#[tokio::test]
async fn an_untrusted_server_certificate_fails_at_once() -> Result<()> {
    let pki = Pki::new("client-trusted");
    let other = Pki::new("client-untrusted");
    let server = tls_server(&pki, false, None);
    let started = Instant::now();
    let Err(err) =
        Connection::connect(config(&server, TlsConfig::from_ca_file(other.ca_path())?)).await
    else {
        panic!("an untrusted server is refused")
    };
    assert!(matches!(err, ClientError::Tls(_)), "{err:?}");
    assert!(err.to_string().contains("handshake"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "retried: {:?}",
        started.elapsed()
    );
    // A name the certificate does not carry.
    let wrong = TlsConfig::from_ca_file(pki.ca_path())?.server_name("muster.example")?;
    let Err(err) = Connection::connect(config(&server, wrong)).await else {
        panic!("wrong name refused")
    };
    assert!(matches!(err, ClientError::Tls(_)), "{err:?}");
    Ok(())
}

#[tokio::test]
async fn mtls_with_the_principal_named_by_the_certificate() -> Result<()> {
    let pki = Pki::new("client-mtls");
    let auth_file = pki.write(
        "auth.toml",
        r#"
[[principals]]
name = "orders-service"

[[acls]]
principal = "orders-service"
resource = "group"
pattern = "orders-*"
operations = ["read", "describe"]
"#,
    );
    let auth = Arc::new(Auth::from_file(&auth_file, Quotas::default())?);
    let server = tls_server(&pki, true, Some(auth));
    // Without a client certificate: refused at once.
    let started = Instant::now();
    let Err(err) =
        Connection::connect(config(&server, TlsConfig::from_ca_file(pki.ca_path())?)).await
    else {
        panic!("no client certificate is refused")
    };
    assert!(matches!(err, ClientError::Tls(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "retried: {:?}",
        started.elapsed()
    );
    // With one: authenticated as orders-service, whose ACLs apply.
    let me = pki.client("orders-service");
    let tls = TlsConfig::from_ca_file(pki.ca_path())?.client_cert_files(&me.cert, &me.key)?;
    let connection = Connection::connect(config(&server, tls)).await?;
    let join = |group: &str| connection.send(join_request(group, "", LONG_MS, LONG_MS));
    let allowed = as_join(join("orders-eu").await?);
    assert_eq!(
        allowed.error_code,
        code(ErrorCode::MemberIdRequired),
        "{allowed:?}"
    );
    let denied = as_join(join("billing-eu").await?);
    assert_eq!(
        denied.error_code,
        code(ErrorCode::GroupAuthorizationFailed),
        "billing-* is not orders-service's: {denied:?}"
    );
    Ok(())
}

#[test]
fn bad_files_are_errors_naming_the_file() {
    let pki = Pki::new("client-files");
    let client = pki.client("a");
    let other = pki.client("b");
    let missing = pki.path("missing-ca.pem");
    let err = TlsConfig::from_ca_file(&missing).expect_err("missing CA");
    assert!(
        matches!(err, TlsError::Read { .. }) && err.to_string().contains("missing-ca.pem"),
        "{err}"
    );
    let empty = pki.write("empty.pem", "");
    let err = TlsConfig::from_ca_file(&empty).expect_err("empty CA");
    assert!(err.to_string().contains("empty.pem"), "{err}");
    let ca = || TlsConfig::from_ca_file(pki.ca_path()).expect("CA loads");
    let err = ca()
        .client_cert_files(&client.cert, &other.key)
        .expect_err("mismatch");
    assert!(
        matches!(err, TlsError::KeyMismatch { .. }) && err.to_string().contains("client-b-key.pem"),
        "{err}"
    );
    let err = ca()
        .client_cert_files(&client.cert, &client.cert)
        .expect_err("no key");
    assert!(err.to_string().contains("no PRIVATE KEY"), "{err}");
    let err = TlsConfig::from_options(None, Some(&client.cert), Some(&client.key), None)
        .expect_err("no CA");
    assert!(err.to_string().contains("--tls-ca"), "{err}");
    let err = TlsConfig::from_options(Some(&pki.ca_path()), Some(&client.cert), None, None)
        .expect_err("no key");
    assert!(err.to_string().contains("--tls-client-key"), "{err}");
    assert!(TlsConfig::from_options(None, None, None, None)
        .expect("plaintext")
        .is_none());
}
