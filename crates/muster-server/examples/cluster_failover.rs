//! Failover time of cluster mode, measured end to end over repeated kills (docs/benchmarks.md
//! "Cluster mode"): a real etcd, three real `musterd` nodes, one consumer group per shard (a
//! member that leads itself). Each round SIGKILLs the node coordinating the most groups, then
//! times, for every group it had, SIGKILL → a survivor answers the member's heartbeat (same
//! member id and generation) with NONE; then restarts the node and waits for the shards to
//! spread again.
//!
//! ```sh
//! cargo build --release -p muster-server --bin musterd
//! cargo run --release -p muster-server --example cluster_failover -- [ROUNDS] [TTL_S]
//! ```
//! `MUSTERD` names the binary (default `target/release/musterd`).

#[path = "../tests/cluster_support/mod.rs"]
mod cluster_support;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use anyhow::Result;
use cluster_support::*;
use muster_etcd::testkit::EtcdCluster;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(10), |a| a.parse())?;
    let ttl: u64 = args.next().map_or(Ok(5), |a| a.parse())?;
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let mut nodes: Vec<Node> = (1..=3)
        .map(|i| Node::start(&endpoints, &format!("n{i}"), ttl))
        .collect::<Result<_>>()?;
    let addrs = |nodes: &[Node]| nodes.iter().map(|n| n.addr).collect::<Vec<_>>();
    wait_settled(nodes[0].addr, 3, Duration::from_secs(20))?;
    create_topic(nodes[0].addr, &addrs(&nodes))?;
    let mut members: Vec<Member> = (0..SHARDS)
        .map(|s| Member::start(nodes[0].addr, &group_in_shard(s), 1))
        .collect::<Result<_>>()?;
    let mut all_groups = Vec::new();
    let mut last_group = Vec::new();
    for round in 0..rounds {
        let victim = (0..nodes.len())
            .max_by_key(|&i| members.iter().filter(|m| m.node == nodes[i].id).count())
            .unwrap_or(0);
        let victim_id = nodes[victim].id.clone();
        let survivors: Vec<_> = addrs(&nodes)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i != victim)
            .map(|(_, a)| a)
            .collect();
        let killed = Instant::now();
        nodes[victim].kill();
        let mut times = Vec::new();
        for m in members.iter_mut().filter(|m| m.node == victim_id) {
            m.follow(&survivors, Duration::from_secs(ttl * 4 + 10))?;
            times.push(killed.elapsed());
        }
        let last = times.iter().max().copied().unwrap_or_default();
        println!(
            "round {round}: {} groups moved off {victim_id}; first {:?}, last {:?}",
            times.len(),
            times.iter().min().copied().unwrap_or_default(),
            last
        );
        all_groups.extend(times);
        last_group.push(last);
        nodes[victim] = Node::start(&endpoints, &victim_id, ttl)?;
        wait_settled(nodes[0].addr, 3, Duration::from_secs(30))?;
        for m in &mut members {
            m.follow(&addrs(&nodes), Duration::from_secs(10))?;
        }
    }
    all_groups.sort();
    last_group.sort();
    let pct = |v: &[Duration], p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    println!(
        "lease TTL {ttl} s, {rounds} kills: per group p50 {:?} max {:?}; last group of a kill p50 {:?} max {:?}",
        pct(&all_groups, 0.5),
        pct(&all_groups, 1.0),
        pct(&last_group, 0.5),
        pct(&last_group, 1.0)
    );
    Ok(())
}
