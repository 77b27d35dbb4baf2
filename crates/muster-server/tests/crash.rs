//! Crash safety of the real `musterd` binary: concurrent OffsetCommits from several
//! connections, SIGKILL at a random moment, restart on the same data dir, and every offset that
//! was acknowledged must be there (none went backwards). Repeated several times.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use muster_protocol::*;
use support::{start, Conn};

const GROUP: &str = "crash-test";
const CONNECTIONS: usize = 4;
const PARTITIONS_PER_CONNECTION: i32 = 8;
const ROUNDS: usize = 4;

fn commit(conn: &mut Conn, topic: &str, partitions: &[(i32, i64)]) -> Result<bool> {
    let response = conn.call(Request::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            topic: topic.into(),
            partitions: partitions
                .iter()
                .map(|&(partition, offset)| OffsetCommitPartition {
                    partition,
                    offset,
                    metadata: None,
                })
                .collect(),
        }],
    }))?;
    match response {
        Response::OffsetCommit(r) => Ok(r.error_code == 0
            && r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.error_code == 0)),
        other => bail!("unexpected answer {other:?}"),
    }
}

fn fetch_all(addr: SocketAddr) -> Result<Vec<FetchedTopic>> {
    let mut conn = Conn::connect(addr)?;
    match conn.call(Request::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: None,
    }))? {
        Response::OffsetFetch(r) => Ok(r.topics),
        other => bail!("unexpected answer {other:?}"),
    }
}

#[test]
fn acknowledged_offsets_survive_sigkill() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // acked[c][p]: highest offset acknowledged for topic t{c}, partition p.
    let acked: Arc<Mutex<Vec<Vec<i64>>>> =
        Arc::new(Mutex::new(vec![
            vec![-1; PARTITIONS_PER_CONNECTION as usize];
            CONNECTIONS
        ]));
    let mut next_offset = 0i64;
    // A cheap deterministic spread of kill moments (no rand dependency needed).
    let kill_after_ms = [60u64, 170, 35, 250, 110];
    for round in 0..ROUNDS {
        let (mut child, addr) = start(&dir)?;
        // Whatever was acknowledged before the last crash must be there now.
        check(&fetch_all(addr)?, &acked.lock().expect("lock"))?;

        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                let (stop, acked) = (Arc::clone(&stop), Arc::clone(&acked));
                let base = next_offset;
                std::thread::spawn(move || -> Result<u64> {
                    let mut conn = Conn::connect(addr)?;
                    let topic = format!("t{c}");
                    let mut offset = base;
                    let mut acks = 0;
                    while !stop.load(Ordering::Relaxed) {
                        offset += 1;
                        let parts: Vec<(i32, i64)> = (0..PARTITIONS_PER_CONNECTION)
                            .map(|p| (p, offset))
                            .collect();
                        match commit(&mut conn, &topic, &parts) {
                            Ok(true) => {
                                acks += 1;
                                let mut acked = acked.lock().expect("lock");
                                for p in 0..PARTITIONS_PER_CONNECTION as usize {
                                    acked[c][p] = offset;
                                }
                            }
                            Ok(false) => bail!("commit refused"),
                            // The server was killed under us.
                            Err(_) => break,
                        }
                    }
                    Ok(acks)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(
            kill_after_ms[round % kill_after_ms.len()],
        ));
        child.kill().context("SIGKILL musterd")?;
        let killed_at = Instant::now();
        let _ = child.wait();
        stop.store(true, Ordering::Relaxed);
        let mut acks = 0;
        for w in writers {
            acks += w.join().expect("writer thread")?;
        }
        assert!(
            acks > 0,
            "round {round}: no commit was acknowledged before the kill"
        );
        assert!(killed_at.elapsed() < Duration::from_secs(10));
        // Offsets in later rounds start above anything this round may have written.
        next_offset += 1_000_000;
    }
    let (mut child, addr) = start(&dir)?;
    check(&fetch_all(addr)?, &acked.lock().expect("lock"))?;
    child.kill()?;
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Every acknowledged offset is present, and no partition is behind what was acknowledged.
fn check(fetched: &[FetchedTopic], acked: &[Vec<i64>]) -> Result<()> {
    for (c, partitions) in acked.iter().enumerate() {
        let topic = format!("t{c}");
        for (p, &want) in partitions.iter().enumerate() {
            if want < 0 {
                continue;
            }
            let got = fetched
                .iter()
                .find(|t| t.topic == topic)
                .and_then(|t| t.partitions.iter().find(|fp| fp.partition == p as i32))
                .map(|fp| fp.offset);
            match got {
                Some(got) if got >= want => {}
                other => bail!("{topic}/{p}: acknowledged {want}, found {other:?} after restart"),
            }
        }
    }
    Ok(())
}
