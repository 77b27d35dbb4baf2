//! The TLS handshake flood: many short-lived connections, each a full TLS handshake (session
//! resumption off, so every one costs the server its key exchange and signature), a Hello,
//! and a close. Needs a server spawned with TLS (`hostile --tls`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rustls::client::Resumption;
use tokio::io::AsyncWriteExt as _;
use tokio_rustls::TlsConnector;

use super::{Env, Tally, STALL};
use crate::client::hello;
use crate::transport::{self, connect_tcp};

/// Handshakes each connection of the flood keeps going at once, per attack connection.
const PER_CONNECTION: usize = 8;

/// (14) The handshake flood (module docs): `8 × connections` tasks, each connecting,
/// handshaking, saying Hello and closing, in a loop until the deadline.
pub(super) async fn tls_flood(env: &Env, tally: &Tally) -> Result<()> {
    let transport = transport::current();
    let Some(tls) = transport.tls.clone() else {
        bail!("tls-flood needs a server with TLS: run `hostile --tls` (with --spawn)");
    };
    let mut config = (*tls.config).clone();
    config.resumption = Resumption::disabled();
    let connector = TlsConnector::from(Arc::new(config));
    let token = transport.token.clone();
    let sent = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..env.connections.max(1) * PER_CONNECTION {
        let (env, tally, connector, name, token, sent) = (
            env.clone(),
            tally.clone(),
            connector.clone(),
            tls.server_name.clone(),
            token.clone(),
            Arc::clone(&sent),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < env.deadline
                && sent.fetch_add(1, Ordering::Relaxed) < env.max_requests
            {
                tally.bump(|o| &mut o.sent);
                let started = Instant::now();
                let attempt = async {
                    let tcp = connect_tcp(env.addr).await?;
                    let mut stream = connector.connect(name.clone(), tcp).await?;
                    hello(&mut stream, "atk-tls", token.clone()).await?;
                    let _ = stream.shutdown().await;
                    anyhow::Ok(())
                };
                match tokio::time::timeout(STALL, attempt).await {
                    Ok(Ok(())) => {
                        let ms = started.elapsed().as_millis() as u64;
                        tally.extra("handshakes", |n| *n += 1);
                        tally.extra("handshake_max_ms", |n| *n = (*n).max(ms));
                    }
                    Ok(Err(_)) => {
                        tally.bump(|o| &mut o.connect_failures);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(_) => tally.bump(|o| &mut o.stalls),
                }
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    Ok(())
}
