//! The attacks that are about connections rather than one request: the client that never
//! reads its answers, join/leave churn, the connection flood and slowloris on the admin port.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use muster_protocol::{ErrorCode, LeaveGroupRequest, LeavingMember, OffsetFetchRequest, Response};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::{frame, join, open, requests::seed_offsets, Env, Tally, STALL};
use crate::client::Conn;

/// (4) A client that pipelines OffsetFetch requests for a group with 1 000 committed
/// partitions of 1 000 bytes of metadata each (answers of about 1 MB) and never reads.
pub(super) async fn non_reader(env: &Env, tally: &Tally) -> Result<()> {
    let group = format!("{}-atk-nonreader", env.run_id);
    seed_offsets(env, tally, &group, 1_000, 1_000).await?;
    let fetch = frame(OffsetFetchRequest {
        group_id: group,
        topics: None,
    })?;
    let sent = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..env.connections.max(1) {
        let (env, tally, fetch, sent) = (
            env.clone(),
            tally.clone(),
            Arc::clone(&fetch),
            Arc::clone(&sent),
        );
        tasks.push(tokio::spawn(async move {
            // Held (unread) until the attack ends, so the server keeps what it buffered.
            let mut held = Vec::new();
            while Instant::now() < env.deadline && sent.load(Ordering::Relaxed) < env.max_requests {
                let Some(mut stream) = open(env.addr, "atk-nonreader", &tally).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                loop {
                    let now = Instant::now();
                    if now >= env.deadline || sent.load(Ordering::Relaxed) >= env.max_requests {
                        break;
                    }
                    // Many requests per write: the point is to have many in flight.
                    let mut batch = Vec::with_capacity(fetch.len() * 64);
                    for _ in 0..64 {
                        batch.extend_from_slice(&fetch);
                    }
                    match tokio::time::timeout(env.deadline - now, stream.write_all(&batch)).await {
                        Ok(Ok(())) => {
                            sent.fetch_add(64, Ordering::Relaxed);
                            tally.with(|o| o.sent += 64);
                        }
                        Ok(Err(_)) => {
                            tally.bump(|o| &mut o.disconnects);
                            break;
                        }
                        // The server stopped reading us: it is holding back, which is fine.
                        Err(_) => {
                            tally.extra("writes_blocked_until_deadline", |n| *n += 1);
                            break;
                        }
                    }
                }
                held.push(stream);
            }
            tally.extra("connections", |n| *n += held.len() as u64);
        }));
    }
    for task in tasks {
        task.await?;
    }
    Ok(())
}

/// (7) `connections` members join one group and leave it again, over and over: every join and
/// every leave starts a rebalance of that group.
pub(super) async fn churn(env: &Env, tally: &Tally) -> Result<()> {
    let group = format!("{}-atk-churn", env.run_id);
    let sent = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..env.connections.max(1) {
        let (env, tally, group, sent) =
            (env.clone(), tally.clone(), group.clone(), Arc::clone(&sent));
        tasks.push(tokio::spawn(async move {
            'connect: while Instant::now() < env.deadline {
                let Ok(conn) = Conn::connect(env.addr, "atk-churn").await else {
                    tally.bump(|o| &mut o.connect_failures);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let mut member_id = String::new();
                while Instant::now() < env.deadline
                    && sent.fetch_add(1, Ordering::Relaxed) < env.max_requests
                {
                    tally.bump(|o| &mut o.sent);
                    let answer = match conn
                        .call_within(STALL, join(group.clone(), member_id.clone(), None))
                        .await
                    {
                        Ok(answer) => answer,
                        Err(_) => {
                            tally.bump(|o| &mut o.stalls);
                            continue 'connect;
                        }
                    };
                    tally.answer(&answer);
                    let Response::JoinGroup(joined) = answer else {
                        continue;
                    };
                    if joined.error_code == ErrorCode::MemberIdRequired.code() {
                        member_id = joined.member_id;
                        continue;
                    }
                    if joined.error_code != ErrorCode::None.code() {
                        member_id.clear();
                        continue;
                    }
                    tally.extra("max_generation", |g| {
                        *g = (*g).max(u64::try_from(joined.generation_id).unwrap_or(0));
                    });
                    tally.bump(|o| &mut o.sent);
                    let leave = LeaveGroupRequest {
                        group_id: group.clone(),
                        members: vec![LeavingMember {
                            member_id: std::mem::take(&mut member_id),
                            group_instance_id: None,
                            reason: None,
                        }],
                    };
                    match conn.call_within(STALL, leave).await {
                        Ok(answer) => tally.answer(&answer),
                        Err(_) => {
                            tally.bump(|o| &mut o.stalls);
                            continue 'connect;
                        }
                    }
                }
                break;
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    Ok(())
}

/// (9) Opens connections (with Hello), 256 at a time, up to `flood_connections` or until the
/// server refuses, and holds them until the deadline.
pub(super) async fn conn_flood(env: &Env, tally: &Tally) -> Result<()> {
    let mut held: Vec<TcpStream> = Vec::new();
    let limit = env
        .flood_connections
        .min(usize::try_from(env.max_requests)?);
    let mut attempts = 0usize;
    while attempts < limit && Instant::now() < env.deadline {
        let batch = 256.min(limit - attempts);
        attempts += batch;
        let opens = (0..batch).map(|_| open(env.addr, "atk-conn", tally));
        for stream in futures_util::future::join_all(opens).await {
            tally.bump(|o| &mut o.sent);
            held.extend(stream);
        }
    }
    tally.extra("connections_open_peak", |n| *n = held.len() as u64);
    // Hold them; count the ones the server closes meanwhile.
    let now = Instant::now();
    if now < env.deadline {
        tokio::time::sleep(env.deadline - now).await;
    }
    // Closed by the server: end of stream or a reset (an open idle socket would block).
    let closed = held
        .iter()
        .filter(|s| match s.try_read(&mut [0u8; 1]) {
            Ok(n) => n == 0,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        })
        .count() as u64;
    tally.with(|o| o.disconnects += closed);
    Ok(())
}

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
    // The probe: what a load balancer's health check sees meanwhile.
    while Instant::now() < env.deadline {
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
    for task in tasks {
        task.await?;
    }
    Ok(())
}
