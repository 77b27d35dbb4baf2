//! The attacks that are about connections rather than one request: the clients that never
//! read their answers, join/leave churn and the connection flood. (The admin port's are in
//! `admin.rs`.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use muster_protocol::{
    ConsumerGroupDescribeRequest, ErrorCode, GroupHistoryRequest, LeaveGroupRequest, LeavingMember,
    OffsetFetchRequest, Response,
};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use super::{frame, join, open, requests::seed_offsets, Env, Frame, Tally, STALL};
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
    never_read(env, tally, vec![fetch], "atk-nonreader").await
}

/// (12) [`non_reader`] with the other requests whose answer grows with what a group holds:
/// OffsetHistory (every entry of 1 000 partitions, three each, 1 000 bytes of metadata), an
/// OffsetReset dry run of them, OffsetRestore's listing, and ConsumerGroupDescribe and
/// GroupHistory naming the victims' groups.
pub(super) async fn non_reader_more(env: &Env, tally: &Tally) -> Result<()> {
    let group = format!("{}-atk-nonreader2", env.run_id);
    for _ in 0..3 {
        seed_offsets(env, tally, &group, 1_000, 1_000).await?;
    }
    let prefix = env
        .victim_group
        .trim_end_matches(|c: char| c.is_ascii_digit());
    let mut frames = super::amplify::offset_data_frames(&group)?;
    frames.push(frame(ConsumerGroupDescribeRequest {
        group_ids: (0..1_000).map(|k| format!("{prefix}{k}")).collect(),
    })?);
    frames.push(frame(GroupHistoryRequest {
        group_id: env.victim_group.clone(),
        limit: 0,
    })?);
    never_read(env, tally, frames, "atk-nonreader2").await
}

/// Pipelines `frames` (64 of one kind per write, the kinds in turn) on `env.connections`
/// connections and never reads an answer; each connection is held open until the attack
/// ends, and a new one opened when a write blocks or fails.
async fn never_read(env: &Env, tally: &Tally, frames: Vec<Frame>, client: &str) -> Result<()> {
    let frames = Arc::new(frames);
    let sent = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..env.connections.max(1) {
        let (env, tally, frames, sent, client) = (
            env.clone(),
            tally.clone(),
            Arc::clone(&frames),
            Arc::clone(&sent),
            client.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            // Held (unread) until the attack ends, so the server keeps what it buffered.
            let mut held = Vec::new();
            let mut batches = 0usize;
            while Instant::now() < env.deadline && sent.load(Ordering::Relaxed) < env.max_requests {
                let Some(mut stream) = open(env.addr, &client, &tally).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                loop {
                    let now = Instant::now();
                    if now >= env.deadline || sent.load(Ordering::Relaxed) >= env.max_requests {
                        break;
                    }
                    let Some(one) = frames.get(batches % frames.len().max(1)) else {
                        break;
                    };
                    batches += 1;
                    // Many requests per write: the point is to have many in flight.
                    let mut batch = Vec::with_capacity(one.len() * 64);
                    for _ in 0..64 {
                        batch.extend_from_slice(one);
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
