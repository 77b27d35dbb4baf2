//! False-failover soak of cluster mode (docs/benchmarks.md "Failover"): a real etcd, three
//! real `musterd` nodes at lease TTL `TTL_S`, one consumer group per shard whose member
//! heartbeats every second, for `SECS` seconds, on whatever else the machine is doing. Nobody
//! is killed, so every lease that ends and every shard that changes owner after the cluster
//! settled is a false failover; the soak counts them from a watch on the node and owner keys,
//! and counts the heartbeats not answered NONE.
//!
//! ```sh
//! cargo build --release -p muster-server --bin musterd
//! cargo run --release -p muster-server --example cluster_soak -- [SECS] [TTL_S]
//! ```
//! `MUSTERD` names the binary (default `target/release/musterd`).

#[path = "../tests/cluster_support/mod.rs"]
mod cluster_support;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use cluster_support::*;
use muster_etcd::testkit::EtcdCluster;
use muster_etcd::{EtcdClient, KeyLayout, WatchEvent};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().map_or(Ok(600), |a| a.parse())?;
    let ttl: u64 = args.next().map_or(Ok(5), |a| a.parse())?;
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let nodes: Vec<Node> = (1..=3)
        .map(|i| Node::start(&endpoints, &format!("n{i}"), ttl))
        .collect::<Result<_>>()?;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    wait_settled(nodes[0].addr, 3, Duration::from_secs(20))?;
    create_topic(nodes[0].addr, &addrs)?;
    let mut members: Vec<Member> = (0..SHARDS)
        .map(|s| Member::start(nodes[0].addr, &group_in_shard(s), 1))
        .collect::<Result<_>>()?;
    let (node_ends, owner_moves, watch_failed) = watch_moves(etcd.endpoints())?;
    let started = Instant::now();
    let mut refused = 0usize;
    let mut beats = 0usize;
    while started.elapsed() < Duration::from_secs(secs) {
        let round = Instant::now();
        for m in &mut members {
            beats += 1;
            match m.heartbeat() {
                Ok(0) => {}
                answer => {
                    refused += 1;
                    eprintln!(
                        "{:?}: {} heartbeat answered {answer:?}",
                        started.elapsed(),
                        m.group
                    );
                    // Find its coordinator again, wherever that is now.
                    let _ = m.follow(&addrs, Duration::from_secs(ttl * 4 + 10));
                }
            }
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(round.elapsed()));
    }
    // Read before etcd stops (when `etcd` is dropped, the watch fails, after the soak).
    let watched_throughout = !watch_failed.load(Ordering::Relaxed);
    println!(
        "lease TTL {ttl} s, {secs} s soak: {} node leases ended, {} owner key changes, \
         {refused} of {beats} heartbeats not answered NONE; watch intact throughout: \
         {watched_throughout}",
        node_ends.load(Ordering::Relaxed),
        owner_moves.load(Ordering::Relaxed),
    );
    Ok(())
}

/// Counts, from now on, node keys deleted (a lease ended) and owner keys written or deleted
/// (a shard moved), from a watch on a thread of its own; the flag says the watch failed (its
/// counts stopped there).
type Counts = (Arc<AtomicUsize>, Arc<AtomicUsize>, Arc<AtomicBool>);
fn watch_moves(endpoints: Vec<String>) -> Result<Counts> {
    let ends = Arc::new(AtomicUsize::new(0));
    let moves = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let (ends_seen, moves_seen) = (Arc::clone(&ends), Arc::clone(&moves));
    let failed_seen = Arc::clone(&failed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let watched: Result<()> = runtime.block_on(async move {
            let keys = KeyLayout::new("muster").map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let client = EtcdClient::connect(&endpoints, Duration::from_secs(5))?;
            let mut watch = client.watch_prefix(&keys.cluster_prefix(), 0).await?;
            let _ = ready_tx.send(());
            loop {
                for event in watch.next().await? {
                    let now = unix_now();
                    match event {
                        WatchEvent::Delete { key } if keys.parse_node(&key).is_some() => {
                            ends_seen.fetch_add(1, Ordering::Relaxed);
                            eprintln!("{now}: node lease ended: {}", String::from_utf8_lossy(&key));
                        }
                        WatchEvent::Put { key, .. } | WatchEvent::Delete { key }
                            if keys.parse_owner(&key).is_some() =>
                        {
                            moves_seen.fetch_add(1, Ordering::Relaxed);
                            eprintln!("{now}: owner changed: {}", String::from_utf8_lossy(&key));
                        }
                        _ => {}
                    }
                }
            }
        });
        if let Err(e) = watched {
            failed_seen.store(true, Ordering::Relaxed);
            eprintln!("{}: soak watch failed: {e}", unix_now());
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(10))?;
    Ok((ends, moves, failed))
}

/// Seconds since the Unix epoch, for log lines to match with the nodes' (UTC) logs.
fn unix_now() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:03}", since.as_secs(), since.subsec_millis())
}
