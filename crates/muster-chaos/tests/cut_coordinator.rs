//! Issue #24, "a worker behind a cut-off coordinator moves on without a rebalance in 10 of 10
//! cuts with 6 s sessions", with a real network cut: three `musterd` nodes and an etcd, each
//! behind the harness's proxy ([`muster_chaos::proxy`]), and a `muster-client` member of a
//! classic group. Each round cuts the member's coordinator off the network — from the member
//! and from etcd, in both directions, its sockets left open and its bytes held, as a
//! partition does — while the process runs on: it stops serving at its own lease deadline,
//! the other nodes take its shards, and the member must notice (half its session without an
//! answer to a heartbeat), find the new coordinator and go on committing with the same member
//! id and generation, before its 6 s session runs out there. The cut is then healed (the held
//! bytes arrive late, the node finds its shards taken) and the cluster settles on three nodes
//! again before the next round. `tests/cluster_client.rs` of muster-server does the same with
//! SIGSTOP.
//!
//! Fails when etcd is missing, like every cluster-mode test (the harness says how to install
//! it).

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use muster_chaos::procs::{Binaries, EtcdMember, Node};
use muster_chaos::proxy::Network;
use muster_client::{
    Admin, Backoff, Client, ClientConfig, Event, MemberConfig, Phase, TopicPartition,
};

/// Lease TTL of the nodes: how long after the cut its shards move.
const TTL_S: u64 = 3;
const SHARDS: u32 = 8;
const TOPIC: &str = "orders";

/// Waits until the cluster, as some node describes it, is `nodes` live nodes holding every
/// shard between them, none with fewer than its share.
async fn settled(admin: &Admin, nodes: usize, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(cluster) = admin.describe_cluster().await {
            let owned: usize = cluster.nodes.iter().map(|n| n.shards.len()).sum();
            let share = SHARDS as usize / nodes;
            if cluster.nodes.len() == nodes
                && owned == SHARDS as usize
                && cluster.nodes.iter().all(|n| n.shards.len() >= share)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the cluster did not settle on {nodes} nodes within {within:?}: {cluster:?}");
            }
        } else if Instant::now() > deadline {
            bail!("no node described the cluster within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts an etcd member and three nodes behind the network's proxies, in `dir`.
async fn cluster(net: &Network, dir: &Path) -> Result<(EtcdMember, Vec<Node>)> {
    let bins = Binaries::find(Some(common::musterd()))?;
    let mut etcd = EtcdMember::new(net, "m0", dir).await?;
    let entry = etcd.cluster_entry();
    etcd.start(&bins.etcd, &entry, net)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !etcd.healthy() {
        if Instant::now() > deadline {
            bail!("etcd did not become healthy: see {}", dir.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let args: Vec<String> = [
        "--cluster-etcd",
        &format!("http://{}", etcd.client.addr()),
        "--lease-ttl-s",
        &TTL_S.to_string(),
        "--shards",
        &SHARDS.to_string(),
        "--initial-rebalance-delay-ms",
        "0",
        "--min-session-timeout-ms",
        "1000",
        "--log-level",
        "info",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut nodes = Vec::new();
    for i in 1..=3 {
        let mut node = Node::new(net, &format!("n{i}"), dir, args.clone()).await?;
        let reported = node.start(&bins.musterd, net)?;
        let addr: SocketAddr =
            tokio::task::spawn_blocking(move || reported.recv_timeout(Duration::from_secs(60)))
                .await?
                .with_context(|| format!("node n{i} did not start: see {}", dir.display()))?;
        node.proxy.set_target(addr);
        nodes.push(node);
    }
    Ok((etcd, nodes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_behind_a_cut_off_coordinator_moves_on_without_a_rebalance() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-chaos-cut-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let net = Network::new();
    let (_etcd, nodes) = cluster(&net, &dir).await?;
    let bootstrap: Vec<String> = nodes.iter().map(|n| n.proxy.addr().to_string()).collect();
    let client = Client::connect(ClientConfig::new(bootstrap).configure(|c| {
        c.client_id("cut")
            .request_timeout(Duration::from_secs(5))
            .backoff(Backoff::fixed_exponential(
                Duration::from_millis(50),
                Duration::from_millis(250),
            ))
    }))
    .await?;
    let admin = Admin::new(client.clone());
    settled(&admin, 3, Duration::from_secs(30)).await?;
    admin.create_topic(TOPIC, 2).await?;

    let (member, mut events) = MemberConfig::new("cut-group", [TOPIC])
        .session_timeout(Duration::from_secs(6))
        .assignor_names(["range"])?
        .start(client.clone())?;
    let stable = member
        .wait_for_state(Duration::from_secs(20), |s| s.phase == Phase::Stable)
        .await?;
    let identity = (stable.member_id.clone(), stable.generation_id);
    let first_assignment = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = events.recv().await {
            if matches!(event, Event::Assigned(_)) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(matches!(first_assignment, Ok(true)), "the first assignment");

    for cut in 0..10 {
        let coordinator = member.coordinator().context("a coordinator")?;
        let entity = format!("node:{}", coordinator.node_id);
        net.cut(&entity);
        let cut_at = Instant::now();
        let moved = tokio::time::timeout(Duration::from_secs(TTL_S + 12), async {
            loop {
                if let Some(now) = member.coordinator() {
                    if now.node_id != coordinator.node_id
                        && member
                            .commit_offsets([(TopicPartition::new(TOPIC, 0), cut)])
                            .await
                            .is_ok()
                    {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        net.heal(&entity);
        moved.with_context(|| {
            format!(
                "cut {cut} of {entity}: the member did not reach a new coordinator; logs in {}",
                dir.display()
            )
        })?;
        eprintln!(
            "cut {cut}: {entity} cut; the member committed at its new coordinator after {:?}",
            cut_at.elapsed()
        );
        let now = member.state();
        assert_eq!(
            (now.member_id.clone(), now.generation_id, now.phase),
            (identity.0.clone(), identity.1, Phase::Stable),
            "cut {cut}: same member, same generation"
        );
        let mut seen = Vec::new();
        while let Some(event) = events.try_recv() {
            seen.push(event);
        }
        assert!(
            !seen
                .iter()
                .any(|e| matches!(e, Event::Assigned(_) | Event::Revoked(_) | Event::Lost(_))),
            "cut {cut}: no rebalance: {seen:?}"
        );
        // The healed node is back in the cluster before the next cut.
        settled(&admin, 3, Duration::from_secs(30)).await?;
    }
    member.close().await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
