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
//! again before the next round.
//!
//! The same ten rounds with the coordinator stopped instead (SIGSTOP, then SIGCONT at the
//! heal): its sockets stay open and silent too, and it cannot renew its lease either.
//!
//! Fails when etcd is missing, like every cluster-mode test (the harness says how to install
//! it).

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use muster_chaos::procs::{Binaries, EtcdMember, Node};
use muster_chaos::proxy::Network;
use muster_client::{
    Admin, Backoff, Client, ClientConfig, Event, Events, MemberConfig, Phase, TopicPartition,
};
use rustix::process::Signal;

/// Lease TTL of the nodes: how long after the cut its shards move.
const TTL_S: u64 = 3;
const SHARDS: u32 = 8;
const TOPIC: &str = "orders";

/// One client per node, each bootstrapped on that node alone: a node's own view of the
/// cluster, not whichever node a shared client prefers.
async fn one_client_per_node(nodes: &[Node]) -> Result<Vec<Admin>> {
    let mut admins = Vec::new();
    for node in nodes {
        let config = ClientConfig::new([node.proxy.addr().to_string()]).configure(|c| {
            c.client_id("cut-observer")
                .request_timeout(Duration::from_secs(2))
        });
        admins.push(Admin::new(Client::connect(config).await?));
    }
    Ok(admins)
}

/// Each live node's shards, by node id, as one node describes the cluster.
type Owners = BTreeMap<String, Vec<u32>>;

/// Waits until every node describes the same cluster: `nodes` live nodes holding every shard
/// between them, balanced as the planner balances them (no node more than one shard off
/// another), the same answer twice in a row 200 ms apart. A node just healed still holds the
/// view it had before its cut, and shards move back to it one claim at a time: anything less
/// than this lets the next cut overlap a move.
async fn settled(observers: &[Admin], nodes: usize, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    let mut previous: Option<Owners> = None;
    loop {
        let mut views = Vec::new();
        for observer in observers {
            if let Ok(cluster) = observer.describe_cluster().await {
                let owners: Owners = cluster
                    .nodes
                    .iter()
                    .map(|n| (n.node.node_id.clone(), n.shards.clone()))
                    .collect();
                views.push(owners);
            }
        }
        let agreed = views.len() == observers.len() && views.windows(2).all(|w| w[0] == w[1]);
        let view = views.first().filter(|_| agreed).filter(|owners| {
            let counts: Vec<usize> = owners.values().map(Vec::len).collect();
            let (least, most) = (counts.iter().min(), counts.iter().max());
            owners.len() == nodes
                && counts.iter().sum::<usize>() == SHARDS as usize
                && matches!((least, most), (Some(l), Some(m)) if m - l <= 1)
        });
        match view {
            Some(view) if previous.as_ref() == Some(view) => return Ok(()),
            Some(view) => previous = Some(view.clone()),
            None => previous = None,
        }
        if Instant::now() > deadline {
            bail!("the cluster did not settle on {nodes} nodes within {within:?}: {views:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
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

/// What a round does to the member's coordinator.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Cut off the network (from the member and from etcd) while it runs on.
    Cut,
    /// SIGSTOP: the process stands still, its sockets open.
    Stop,
}

/// One test at a time: each runs an etcd and three nodes, and its timing is what it checks.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_behind_a_cut_off_coordinator_moves_on_without_a_rebalance() -> Result<()> {
    ten_rounds(Fault::Cut).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_behind_a_stopped_coordinator_moves_on_without_a_rebalance() -> Result<()> {
    ten_rounds(Fault::Stop).await
}

/// Ten rounds of `fault` on the member's coordinator (module docs).
async fn ten_rounds(fault: Fault) -> Result<()> {
    let _serial = SERIAL.lock().await;
    let dir = std::env::temp_dir().join(format!("muster-chaos-{fault:?}-{}", std::process::id()));
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
    let observers = one_client_per_node(&nodes).await?;
    settled(&observers, 3, Duration::from_secs(30)).await?;
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

    for round in 0..10 {
        // The member's coordinator is the group's now (a settle may have moved the group,
        // which the member learns at its next heartbeat): cutting a node that no longer
        // coordinates the group would test nothing.
        let deadline = Instant::now() + Duration::from_secs(10);
        let coordinator = loop {
            let found = admin.find_coordinator("cut-group").await?;
            match member.coordinator() {
                Some(now) if now.node_id == found.node_id => break now,
                _ if Instant::now() > deadline => {
                    bail!("round {round}: the member's coordinator is not the group's ({found:?})")
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let entity = format!("node:{}", coordinator.node_id);
        let victim = nodes
            .iter()
            .find(|n| n.id == coordinator.node_id)
            .context("the coordinator is one of ours")?;
        match fault {
            Fault::Cut => net.cut(&entity),
            Fault::Stop => victim.proc.signal(Signal::STOP),
        }
        let cut_at = Instant::now();
        let moved = tokio::time::timeout(Duration::from_secs(TTL_S + 12), async {
            loop {
                if let Some(now) = member.coordinator() {
                    if now.node_id != coordinator.node_id
                        && member
                            .commit_offsets([(TopicPartition::new(TOPIC, 0), round)])
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
        match fault {
            Fault::Cut => net.heal(&entity),
            Fault::Stop => victim.proc.signal(Signal::CONT),
        }
        moved.with_context(|| {
            format!(
                "{fault:?} {round} of {entity}: the member did not reach a new coordinator; \
                 logs in {}",
                dir.display()
            )
        })?;
        let took = cut_at.elapsed();
        eprintln!(
            "{fault:?} {round} of {entity}: the member committed at its new coordinator after \
             {took:?}"
        );
        // Not before the node's lease ran out (TTL_S): a faster move would mean the member
        // had another way round, and this round tested nothing.
        assert!(
            took >= Duration::from_secs(TTL_S) - Duration::from_millis(500),
            "{fault:?} {round}: moved after {took:?}, before the node's lease could expire"
        );
        let now = member.state();
        assert_eq!(
            (now.member_id.clone(), now.generation_id, now.phase),
            (identity.0.clone(), identity.1, Phase::Stable),
            "round {round}: same member, same generation"
        );
        no_rebalance(&mut events, &format!("round {round}"));
        // The healed node is back in the cluster before the next cut.
        settled(&observers, 3, Duration::from_secs(30)).await?;
    }
    // Nor after the last round, while the healed node took its shards back.
    no_rebalance(&mut events, "after the last round");
    let now = member.state();
    assert_eq!(
        (now.member_id.clone(), now.generation_id, now.phase),
        (identity.0.clone(), identity.1, Phase::Stable),
        "after the last round: same member, same generation"
    );
    member.close().await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Fails if the member saw a rebalance: an assignment, a revocation or lost partitions.
fn no_rebalance(events: &mut Events, when: &str) {
    let mut seen = Vec::new();
    while let Some(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, Event::Assigned(_) | Event::Revoked(_) | Event::Lost(_))),
        "{when}: no rebalance: {seen:?}"
    );
}
