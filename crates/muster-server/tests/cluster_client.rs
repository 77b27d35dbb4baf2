//! The client library across a real cluster (issue #13): a `muster-client` group member whose
//! coordinator is killed with SIGKILL finds the new one from its bootstrap list and carries on
//! with the same member id and generation — no rebalance, no partition revoked — and its
//! commits after the failover are acknowledged by the new coordinator.

mod cluster_support;
mod support;

use std::time::Duration;

use anyhow::{Context, Result};
use cluster_support::*;
use muster_client::{
    Admin, Backoff, Client, ClientConfig, Event, MemberConfig, Phase, TopicPartition,
};
use muster_etcd::testkit::EtcdCluster;

/// An etcd, three settled nodes named `{prefix}1..3` (lease TTL [`TTL_S`]) and a client
/// bootstrapped on all three, with a short request timeout and quick retries.
async fn three_nodes_and_a_client(
    prefix: &str,
    client_id: &str,
) -> Result<(EtcdCluster, Vec<Node>, Client)> {
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let nodes: Vec<Node> = (1..=3)
        .map(|i| Node::start(&endpoints, &format!("{prefix}{i}"), TTL_S))
        .collect::<Result<_>>()?;
    let first = nodes[0].addr;
    tokio::task::spawn_blocking(move || wait_settled(first, 3, Duration::from_secs(15))).await??;
    let bootstrap: Vec<String> = nodes.iter().map(|n| n.addr.to_string()).collect();
    let client_id = client_id.to_owned();
    let config = ClientConfig::new(bootstrap).configure(|c| {
        c.client_id(client_id)
            .request_timeout(Duration::from_secs(5))
            .backoff(Backoff::fixed_exponential(
                Duration::from_millis(50),
                Duration::from_millis(250),
            ))
    });
    Ok((etcd, nodes, Client::connect(config).await?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_member_follows_its_group_through_a_sigkill_without_rebalancing() -> Result<()> {
    let (_etcd, mut nodes, client) = three_nodes_and_a_client("n", "lib").await?;
    Admin::new(client.clone()).create_topic(TOPIC, 4).await?;
    let member_config = MemberConfig::new("lib-group", [TOPIC])
        .session_timeout(Duration::from_secs(20))
        .heartbeat_interval(Duration::from_millis(200))
        .assignor_names(["range"])?;
    let (member, mut events) = member_config.start(client.clone())?;
    let stable = member
        .wait_for_state(Duration::from_secs(20), |s| s.phase == Phase::Stable)
        .await?;
    let coordinator = member.coordinator().context("a coordinator")?;
    let before = (stable.member_id.clone(), stable.generation_id);
    member
        .commit_offsets([(TopicPartition::new(TOPIC, 0), 41)])
        .await?;
    // Drain what happened so far (the first assignment).
    while events.try_recv().is_some() {}

    let victim = nodes
        .iter_mut()
        .find(|n| n.id == coordinator.node_id)
        .context("the coordinator is one of ours")?;
    victim.kill();
    // The member finds the new coordinator by itself; its next commit is acknowledged there.
    let moved = tokio::time::timeout(Duration::from_secs(TTL_S + 10), async {
        loop {
            if let Some(now) = member.coordinator() {
                if now.node_id != coordinator.node_id
                    && member
                        .commit_offsets([(TopicPartition::new(TOPIC, 0), 42)])
                        .await
                        .is_ok()
                {
                    return now;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .context("the member did not reach a new coordinator")?;
    let after = member.state();
    assert_eq!(
        (after.member_id.clone(), after.generation_id),
        before,
        "same member, same generation"
    );
    assert_eq!(after.phase, Phase::Stable);
    let mut seen = Vec::new();
    while let Some(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, Event::Assigned(_) | Event::Revoked(_) | Event::Lost(_))),
        "no rebalance: {seen:?}"
    );
    // The new coordinator has the group at the same generation, and both commits.
    let addr = format!("{}:{}", moved.host, moved.port).parse()?;
    let described =
        tokio::task::spawn_blocking(move || describe_group(addr, "lib-group")).await??;
    assert_eq!(
        (described.state.as_str(), described.generation_id),
        ("Stable", before.1)
    );
    let offset = tokio::task::spawn_blocking(move || fetch_offset(addr, "lib-group")).await??;
    assert_eq!(offset, Some(42));
    member.close().await?;
    Ok(())
}
