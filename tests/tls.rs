//! TLS and mTLS on the server's listeners (issue #12), over real TCP with a raw tokio-rustls
//! client: Hello and a heartbeat over TLS; a plaintext client, a stalled handshake and
//! refused client certificates harm no other client; a client certificate's common name is
//! the principal (its ACLs apply; an unknown name is AUTHENTICATION_FAILED); the admin
//! listener serves HTTPS without a client certificate; bad files stop startup naming the file.

mod common;
mod pki;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, ensure, Context as _, Result};
use common::*;
use muster_coordinator::quota::Quotas;
use muster_protocol::*;
use muster_server::auth::Auth;
use muster_server::tls::TlsSettings;
use muster_server::ServerThread;
use pki::{client_config, Pki};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A server with TLS from `pki` (client certificates required if `mtls`), after `tweak`.
fn tls_server(
    pki: &Pki,
    mtls: bool,
    tweak: impl FnOnce(&mut muster_server::ServerOptions),
) -> ServerThread {
    let server = pki.server();
    let ca = pki.ca_path();
    let tls = TlsSettings::load(&server.cert, &server.key, mtls.then_some(ca.as_path()))
        .expect("TLS settings load");
    start_server_with(fast_config(), |options| {
        options.tls = Some(tls);
        tweak(options);
    })
}

/// Connects and completes the client side of the handshake.
async fn tls_connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost")?;
    let stream = tokio::time::timeout(
        ANSWER_TIMEOUT,
        TlsConnector::from(config).connect(name, tcp),
    )
    .await
    .map_err(|_| anyhow!("TLS handshake timed out"))??;
    Ok(stream)
}

/// Sends one request and reads one answer (no pipelining).
async fn call(
    stream: &mut TlsStream<TcpStream>,
    correlation_id: u32,
    request: Request,
) -> Result<Response> {
    stream
        .write_all(&frame(&payload(correlation_id, request)))
        .await?;
    stream.flush().await?;
    tokio::time::timeout(ANSWER_TIMEOUT, async {
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).await?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        stream.read_exact(&mut body).await?;
        let frame = decode_response(&body).map_err(|e| anyhow!("bad frame: {e}"))?;
        ensure!(
            frame.correlation_id == correlation_id,
            "answer to another request"
        );
        Ok(frame.response)
    })
    .await
    .map_err(|_| anyhow!("no answer"))?
}

/// Hello, then a one-member group: join, sync and heartbeat. Returns the heartbeat's code.
async fn hello_and_heartbeat(stream: &mut TlsStream<TcpStream>, group: &str) -> Result<i16> {
    let hello = as_hello(call(stream, 1, hello(1, "tls-client")).await?);
    ensure!(hello.error_code == 0, "hello refused: {hello:?}");
    let first = as_join(call(stream, 2, join_request(group, "", LONG_MS, LONG_MS)).await?);
    if first.error_code != 0 && first.error_code != code(ErrorCode::MemberIdRequired) {
        return Ok(first.error_code);
    }
    let joined = as_join(
        call(
            stream,
            3,
            join_request(group, &first.member_id, LONG_MS, LONG_MS),
        )
        .await?,
    );
    ensure!(joined.error_code == 0, "join: {joined:?}");
    let me = joined.member_id.clone();
    let synced = as_sync(
        call(
            stream,
            4,
            sync_request(
                group,
                joined.generation_id,
                &me,
                vec![assignment(&me, vec![0])],
            ),
        )
        .await?,
    );
    ensure!(synced.error_code == 0, "sync: {synced:?}");
    Ok(as_heartbeat(
        call(stream, 5, heartbeat(group, joined.generation_id, &me)).await?,
    ))
}

#[tokio::test]
async fn hello_and_heartbeat_over_tls() -> Result<()> {
    let pki = Pki::new("basic");
    let server = tls_server(&pki, false, |_| {});
    let mut stream = tls_connect(server.local_addr(), client_config(&pki.ca_path(), None)).await?;
    assert_eq!(hello_and_heartbeat(&mut stream, "orders-tls").await?, 0);
    Ok(())
}

#[tokio::test]
async fn a_plaintext_client_on_the_tls_port_is_dropped_and_others_are_unaffected() -> Result<()> {
    let pki = Pki::new("plain");
    let server = tls_server(&pki, false, |_| {});
    let addr = server.local_addr();
    // A TLS client mid-conversation when the plaintext one arrives.
    let mut tls = tls_connect(addr, client_config(&pki.ca_path(), None)).await?;
    let hello_answer = as_hello(call(&mut tls, 1, hello(1, "tls")).await?);
    assert_eq!(hello_answer.error_code, 0);
    let mut plain = TcpStream::connect(addr).await?;
    plain
        .write_all(&frame(&payload(1, hello(1, "plain"))))
        .await?;
    // The server closes it without a Muster answer (at most a TLS alert, never a frame).
    let mut got = Vec::new();
    tokio::time::timeout(ANSWER_TIMEOUT, plain.read_to_end(&mut got))
        .await
        .context("plaintext connection not closed")?
        .ok();
    assert!(
        got.len() < 4 || decode_response(&got[4..]).is_err(),
        "a plaintext client got a Muster answer: {got:?}"
    );
    // The TLS client carries on, and a new one connects.
    let listed = call(&mut tls, 2, list_groups(&[])).await?;
    as_list(listed);
    let mut second = tls_connect(addr, client_config(&pki.ca_path(), None)).await?;
    assert_eq!(
        hello_and_heartbeat(&mut second, "orders-after-plain").await?,
        0
    );
    Ok(())
}

#[tokio::test]
async fn a_stalled_handshake_blocks_no_one_and_times_out() -> Result<()> {
    let pki = Pki::new("stall");
    let server = pki.server();
    let mut tls = TlsSettings::load(&server.cert, &server.key, None)?;
    tls.handshake_timeout = Duration::from_millis(300);
    // One worker: the stalled connections and the good one share a thread.
    let server = start_server_with(fast_config(), |options| {
        options.tls = Some(tls);
        options.workers = 1;
    });
    let addr = server.local_addr();
    // Connections that send nothing, and one that sends half a ClientHello.
    let mut stalled = Vec::new();
    for _ in 0..5 {
        stalled.push(TcpStream::connect(addr).await?);
    }
    let mut half = TcpStream::connect(addr).await?;
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await?;
    let started = std::time::Instant::now();
    let mut good = tls_connect(addr, client_config(&pki.ca_path(), None)).await?;
    assert_eq!(hello_and_heartbeat(&mut good, "orders-stall").await?, 0);
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "a good client waited for stalled handshakes: {:?}",
        started.elapsed()
    );
    // Past the handshake timeout the server closes the stalled connections.
    for mut stream in stalled.into_iter().chain([half]) {
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
        ensure!(read.is_ok(), "a stalled handshake was never closed");
    }
    Ok(())
}

#[tokio::test]
async fn handshakes_count_against_max_connections() -> Result<()> {
    let pki = Pki::new("max");
    let server = tls_server(&pki, false, |options| options.max_connections = 2);
    let addr = server.local_addr();
    let _a = TcpStream::connect(addr).await?;
    let _b = TcpStream::connect(addr).await?;
    // Both slots are held by handshakes that have not finished: a third is refused.
    let refused = tls_connect(addr, client_config(&pki.ca_path(), None)).await;
    let worked = match refused {
        Err(_) => false,
        Ok(mut stream) => call(&mut stream, 1, hello(1, "third")).await.is_ok(),
    };
    assert!(
        !worked,
        "a third connection was served at max_connections 2"
    );
    Ok(())
}

/// Writes an auth file: principal `orders-service` (certificate only) may read `orders-*`.
fn orders_auth(pki: &Pki) -> Arc<Auth> {
    let path = pki.write(
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
    Arc::new(Auth::from_file(&path, Quotas::default()).expect("auth file loads"))
}

/// Whether the server refuses this client: the handshake or the first answer fails.
async fn refused(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> bool {
    match tls_connect(addr, config).await {
        Err(_) => true,
        Ok(mut stream) => call(&mut stream, 1, hello(1, "who")).await.is_err(),
    }
}

#[tokio::test]
async fn mtls_refuses_clients_without_a_certificate_from_the_ca() -> Result<()> {
    let pki = Pki::new("mtls");
    let other = Pki::new("other");
    let server = tls_server(&pki, true, |_| {});
    let addr = server.local_addr();
    assert!(
        refused(addr, client_config(&pki.ca_path(), None)).await,
        "no certificate was let in"
    );
    let stranger = other.client("orders-service");
    assert!(
        refused(addr, client_config(&pki.ca_path(), Some(&stranger))).await,
        "a certificate from another CA was let in"
    );
    // Without an auth file a certificate from the CA is all it takes.
    let mut ok = tls_connect(
        addr,
        client_config(&pki.ca_path(), Some(&pki.client("anyone"))),
    )
    .await?;
    assert_eq!(hello_and_heartbeat(&mut ok, "any-group").await?, 0);
    Ok(())
}

#[tokio::test]
async fn a_certificate_common_name_is_the_principal_and_its_acls_apply() -> Result<()> {
    let pki = Pki::new("cn");
    let auth = orders_auth(&pki);
    let server = tls_server(&pki, true, |options| options.auth = auth);
    let addr = server.local_addr();
    let me = pki.client("orders-service");
    let mut stream = tls_connect(addr, client_config(&pki.ca_path(), Some(&me))).await?;
    // No token: the certificate authenticates.
    assert_eq!(hello_and_heartbeat(&mut stream, "orders-eu").await?, 0);
    let denied = as_join(
        call(
            &mut stream,
            9,
            join_request("billing-eu", "", LONG_MS, LONG_MS),
        )
        .await?,
    );
    assert_eq!(denied.error_code, code(ErrorCode::GroupAuthorizationFailed));
    Ok(())
}

#[tokio::test]
async fn a_certificate_name_not_in_the_auth_file_fails_authentication() -> Result<()> {
    let pki = Pki::new("unknown-cn");
    let auth = orders_auth(&pki);
    let server = tls_server(&pki, true, |options| options.auth = auth);
    let stranger = pki.client("billing-service");
    let mut stream = tls_connect(
        server.local_addr(),
        client_config(&pki.ca_path(), Some(&stranger)),
    )
    .await?;
    let answer = as_hello(call(&mut stream, 1, hello(1, "billing")).await?);
    assert_eq!(answer.error_code, code(ErrorCode::AuthenticationFailed));
    assert_eq!(answer.error_code, 58);
    Ok(())
}

#[tokio::test]
async fn a_certificate_without_a_name_is_refused_even_with_a_valid_token() -> Result<()> {
    // mTLS binds the principal to the certificate: a CA-signed certificate that names no one
    // must not fall back to a (possibly stolen) token.
    let pki = Pki::new("no-cn");
    let path = pki.write(
        "auth.toml",
        &format!(
            "[[principals]]\nname = \"orders-service\"\ntoken_sha256 = \"{}\"\n",
            muster_auth::TokenHash::of("orders-token").to_hex()
        ),
    );
    let auth = Arc::new(Auth::from_file(&path, Quotas::default())?);
    let server = tls_server(&pki, true, |options| options.auth = auth);
    let unnamed = pki.client_without_name();
    let mut stream = tls_connect(
        server.local_addr(),
        client_config(&pki.ca_path(), Some(&unnamed)),
    )
    .await?;
    let with_token = Request::Hello(HelloRequest {
        protocol_version: MAX_PROTOCOL_VERSION,
        client_id: "unnamed".into(),
        auth_token: Some("orders-token".into()),
    });
    let answer = as_hello(call(&mut stream, 1, with_token).await?);
    assert_eq!(answer.error_code, code(ErrorCode::AuthenticationFailed));
    Ok(())
}

#[tokio::test]
async fn the_admin_listener_serves_https_without_a_client_certificate() -> Result<()> {
    let pki = Pki::new("admin");
    // Client certificates are required on the client listener, not on the admin one.
    let server = tls_server(&pki, true, |options| {
        options.admin_listen = Some("127.0.0.1:0".into())
    });
    let admin = server.admin_addr().context("admin listener")?;
    let mut stream = tls_connect(admin, client_config(&pki.ca_path(), None)).await?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    tokio::time::timeout(ANSWER_TIMEOUT, stream.read_to_end(&mut answer))
        .await
        .context("no admin answer")?
        .ok();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "admin answer: {answer}");
    assert!(answer.ends_with("ok\n"), "admin answer: {answer}");
    // Plain HTTP on the HTTPS port gets no answer.
    let mut plain = TcpStream::connect(admin).await?;
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await?;
    let mut got = Vec::new();
    let _ = tokio::time::timeout(ANSWER_TIMEOUT, plain.read_to_end(&mut got)).await;
    assert!(
        !String::from_utf8_lossy(&got).contains("200 OK"),
        "plain HTTP answered: {got:?}"
    );
    Ok(())
}

#[test]
fn bad_files_are_refused_naming_the_file() {
    let pki = Pki::new("files");
    let server = pki.server();
    let other = pki.client("someone");
    let text = |r: Result<TlsSettings, muster_server::tls::TlsError>| match r {
        Ok(_) => panic!("a bad file was accepted"),
        Err(e) => e.to_string(),
    };
    let missing = pki.path("missing.pem");
    let e = text(TlsSettings::load(&missing, &server.key, None));
    assert!(
        e.contains("missing.pem") && e.contains("cannot read"),
        "{e}"
    );
    let garbage = pki.write(
        "garbage.pem",
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
    );
    let e = text(TlsSettings::load(&garbage, &server.key, None));
    assert!(e.contains("garbage.pem"), "{e}");
    let empty = pki.write("empty.pem", "");
    let e = text(TlsSettings::load(&empty, &server.key, None));
    assert!(
        e.contains("empty.pem") && e.contains("no CERTIFICATE"),
        "{e}"
    );
    // A certificate file given as the key.
    let e = text(TlsSettings::load(&server.cert, &server.cert, None));
    assert!(e.contains("no PRIVATE KEY"), "{e}");
    // Another certificate's key.
    let e = text(TlsSettings::load(&server.cert, &other.key, None));
    assert!(
        e.contains("does not match") && e.contains("client-someone-key.pem"),
        "{e}"
    );
    // An empty client CA file.
    let e = text(TlsSettings::load(&server.cert, &server.key, Some(&empty)));
    assert!(e.contains("empty.pem"), "{e}");
    // The good files load.
    TlsSettings::load(&server.cert, &server.key, Some(&pki.ca_path())).expect("good files load");
}

#[tokio::test]
async fn shutdown_does_not_wait_for_a_stalled_handshake() -> Result<()> {
    let pki = Pki::new("shutdown");
    let server = pki.server();
    let mut tls = TlsSettings::load(&server.cert, &server.key, None)?;
    tls.handshake_timeout = Duration::from_secs(30);
    let server = start_server_with(fast_config(), |options| {
        options.tls = Some(tls);
        options.shutdown_timeout = Duration::from_secs(10);
    });
    let addr = server.local_addr();
    let _stalled = TcpStream::connect(addr).await?;
    // A served client shows the stalled connection has been accepted (one accept loop).
    let mut good = tls_connect(addr, client_config(&pki.ca_path(), None)).await?;
    as_hello(call(&mut good, 1, hello(1, "good")).await?);
    drop(good);
    let started = std::time::Instant::now();
    tokio::task::spawn_blocking(move || server.stop()).await?;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown waited for a stalled handshake: {:?}",
        started.elapsed()
    );
    Ok(())
}
