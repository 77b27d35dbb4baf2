//! The attacks on the admin (HTTP) port: slowloris (half-sent request heads) and slow
//! readers (whole requests whose answers are read a few bytes at a time). Both run beside a
//! probe that asks `/readyz` properly every 200 ms, as a load balancer's health check would.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

use super::{Env, Tally, STALL};

/// (10) Slowloris on the admin port: `admin_connections` connections each send half a request
/// head, then one more header byte a second (reconnecting when the server closes them); a
/// probe meanwhile asks `/readyz` properly every 200 ms.
pub(super) async fn slowloris(env: &Env, tally: &Tally) -> Result<()> {
    let Some(admin) = env.admin else {
        tally.extra("skipped_no_admin_listener", |n| *n = 1);
        return Ok(());
    };
    let open_now = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let count = env
        .admin_connections
        .min(usize::try_from(env.max_requests)?);
    for k in 0..count {
        let (env, tally, open_now) = (env.clone(), tally.clone(), Arc::clone(&open_now));
        tasks.push(tokio::spawn(async move {
            // Spread the connects over the first second.
            tokio::time::sleep(Duration::from_micros(1_000_000 * k as u64 / count as u64)).await;
            while Instant::now() < env.deadline {
                let Ok(Ok(mut stream)) =
                    tokio::time::timeout(STALL, TcpStream::connect(admin)).await
                else {
                    tally.bump(|o| &mut o.connect_failures);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                tally.bump(|o| &mut o.sent);
                let now_open = open_now.fetch_add(1, Ordering::Relaxed) + 1;
                tally.extra("admin_connections_open_peak", |n| *n = (*n).max(now_open));
                let mut closed = stream
                    .write_all(b"GET /metrics HTTP/1.1\r\nHost: muster\r\nX-Slow: ")
                    .await
                    .is_err();
                let mut buf = [0u8; 512];
                while !closed && Instant::now() < env.deadline {
                    tokio::select! {
                        read = stream.read(&mut buf) => closed = !matches!(read, Ok(n) if n > 0),
                        () = tokio::time::sleep(Duration::from_secs(1)) => {
                            closed = stream.write_all(b"a").await.is_err();
                        }
                    }
                }
                open_now.fetch_sub(1, Ordering::Relaxed);
                if closed {
                    tally.bump(|o| &mut o.disconnects);
                }
            }
        }));
    }
    probe_readyz(admin, env.deadline, tally).await;
    for task in tasks {
        task.await?;
    }
    Ok(())
}

/// What a slow reader asks for, in turn: the biggest answers the admin port gives.
const SLOW_READ_PATHS: [&str; 3] = ["/metrics", "/api/groups", "/assets/dashboard.js"];

/// Bytes a slow reader takes per read, and the pause between reads.
const SLOW_READ_BYTES: usize = 64;
const SLOW_READ_PAUSE: Duration = Duration::from_millis(500);

/// (13) Slow readers on the admin port: `admin_connections` connections each send a whole
/// request for one of [`SLOW_READ_PATHS`] with a 4 KiB receive buffer, then read 64 bytes
/// every 500 ms (reconnecting when the server closes them), so the server has its answers
/// built and waiting; the `/readyz` probe runs meanwhile.
pub(super) async fn slow_read(env: &Env, tally: &Tally) -> Result<()> {
    let Some(admin) = env.admin else {
        tally.extra("skipped_no_admin_listener", |n| *n = 1);
        return Ok(());
    };
    let open_now = Arc::new(AtomicU64::new(0));
    let count = env
        .admin_connections
        .min(usize::try_from(env.max_requests)?);
    let mut tasks = Vec::new();
    for k in 0..count {
        let (env, tally, open_now) = (env.clone(), tally.clone(), Arc::clone(&open_now));
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_micros(1_000_000 * k as u64 / count as u64)).await;
            let mut round = k;
            while Instant::now() < env.deadline {
                let path = SLOW_READ_PATHS[round % SLOW_READ_PATHS.len()];
                round += 1;
                let connect = async {
                    let socket = TcpSocket::new_v4()?;
                    // A small window: the server's answer waits in its own buffers.
                    socket.set_recv_buffer_size(4_096)?;
                    socket.connect(admin).await
                };
                let Ok(Ok(mut stream)) = tokio::time::timeout(STALL, connect).await else {
                    tally.bump(|o| &mut o.connect_failures);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                tally.bump(|o| &mut o.sent);
                let now_open = open_now.fetch_add(1, Ordering::Relaxed) + 1;
                tally.extra("admin_connections_open_peak", |n| *n = (*n).max(now_open));
                let request = format!("GET {path} HTTP/1.1\r\nHost: muster\r\n\r\n");
                let opened = Instant::now();
                let mut closed = stream.write_all(request.as_bytes()).await.is_err();
                let mut buf = [0u8; SLOW_READ_BYTES];
                while !closed && Instant::now() < env.deadline {
                    match stream.read(&mut buf).await {
                        Ok(n) if n > 0 => {
                            tally.extra("bytes_read", |b| *b += n as u64);
                            tokio::time::sleep(SLOW_READ_PAUSE).await;
                        }
                        _ => closed = true,
                    }
                }
                open_now.fetch_sub(1, Ordering::Relaxed);
                if closed {
                    tally.bump(|o| &mut o.disconnects);
                    let held = opened.elapsed().as_millis() as u64;
                    tally.extra("held_max_ms", |n| *n = (*n).max(held));
                }
            }
        }));
    }
    probe_readyz(admin, env.deadline, tally).await;
    for task in tasks {
        task.await?;
    }
    Ok(())
}

/// Asks `/readyz` every 200 ms until `deadline`, counting `probe_ok`, `probe_failed` and the
/// slowest probe (`probe_max_ms`): what a load balancer's health check sees meanwhile.
async fn probe_readyz(admin: SocketAddr, deadline: Instant, tally: &Tally) {
    while Instant::now() < deadline {
        let started = Instant::now();
        let probe = async {
            let mut stream = TcpStream::connect(admin).await?;
            stream
                .write_all(b"GET /readyz HTTP/1.1\r\nHost: muster\r\nConnection: close\r\n\r\n")
                .await?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await?;
            anyhow::Ok(answer.starts_with(b"HTTP/1.1 200"))
        };
        let ok = matches!(tokio::time::timeout(STALL, probe).await, Ok(Ok(true)));
        let ms = started.elapsed().as_millis() as u64;
        tally.extra(if ok { "probe_ok" } else { "probe_failed" }, |n| *n += 1);
        tally.extra("probe_max_ms", |n| *n = (*n).max(ms));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
