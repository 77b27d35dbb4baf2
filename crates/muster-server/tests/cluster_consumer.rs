//! Consumer-protocol groups (protocol-v1 §7) in cluster mode: when the node coordinating a
//! consumer group is killed, a survivor takes the group over with the same group epoch,
//! target and member epochs — members heartbeat on with the epochs they hold, nothing moves —
//! and the next epoch is never a reused one. Real etcd, real `musterd` processes.

mod cluster_support;
mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use cluster_support::*;
use muster_etcd::testkit::EtcdCluster;
use muster_protocol::*;
use support::Conn;

const GROUP: &str = "consumer-failover";

fn heartbeat(
    conn: &mut Conn,
    member_id: &str,
    epoch: i32,
    join: bool,
    owned: &[TopicPartitions],
) -> Result<ConsumerGroupHeartbeatResponse> {
    let request = ConsumerGroupHeartbeatRequest {
        group_id: GROUP.into(),
        member_id: member_id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: if join { 30_000 } else { -1 },
        subscribed_topics: join.then(|| vec![TOPIC.into()]),
        owned_partitions: Some(owned.to_vec()),
        ..ConsumerGroupHeartbeatRequest::default()
    };
    match conn.call(Request::ConsumerGroupHeartbeat(request))? {
        Response::ConsumerGroupHeartbeat(r) => Ok(r),
        other => bail!("unexpected answer {other:?}"),
    }
}

struct Member {
    id: String,
    epoch: i32,
    owned: Vec<TopicPartitions>,
    conn: Conn,
}

impl Member {
    fn beat(&mut self) -> Result<i16> {
        let r = heartbeat(&mut self.conn, &self.id, self.epoch, false, &self.owned)?;
        if r.error_code == 0 {
            self.epoch = r.member_epoch;
            if let Some(a) = r.assignment {
                self.owned = a;
            }
        }
        Ok(r.error_code)
    }
}

fn describe(addr: SocketAddr) -> Result<DescribedConsumerGroup> {
    match call(
        addr,
        Request::ConsumerGroupDescribe(ConsumerGroupDescribeRequest {
            group_ids: vec![GROUP.into()],
        }),
    )? {
        Response::ConsumerGroupDescribe(mut r) if r.groups.len() == 1 => Ok(r.groups.remove(0)),
        other => bail!("ConsumerGroupDescribe: {other:?}"),
    }
}

#[test]
fn a_consumer_group_fails_over_with_the_same_epochs() -> Result<()> {
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let mut nodes: Vec<Node> = (1..=3)
        .map(|i| Node::start(&endpoints, &format!("n{i}"), TTL_S))
        .collect::<Result<_>>()?;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    wait_settled(addrs[0], 3, Duration::from_secs(10))?;
    create_topic(addrs[1], &addrs)?;
    let (coordinator_id, coordinator) = wait_for(Duration::from_secs(5), "a coordinator", || {
        find(addrs[0], GROUP)
    })?;

    // Two members reconcile to a Stable group at epoch 2.
    let mut members = Vec::new();
    for id in ["cm-a", "cm-b"] {
        let mut conn = Conn::connect(coordinator)?;
        let r = heartbeat(&mut conn, id, 0, true, &[])?;
        ensure!(r.error_code == 0, "join of {id}: {r:?}");
        members.push(Member {
            id: id.into(),
            epoch: r.member_epoch,
            owned: r.assignment.unwrap_or_default(),
            conn,
        });
    }
    for _ in 0..4 {
        for m in &mut members {
            ensure!(m.beat()? == 0, "{} heartbeat", m.id);
        }
    }
    let before = describe(coordinator)?;
    ensure!(
        (before.state.as_str(), before.group_epoch) == ("Stable", 2),
        "{before:?}"
    );

    // Kill the coordinator: a survivor has the group, with the same epochs and assignments.
    let victim = nodes
        .iter()
        .position(|n| n.id == coordinator_id)
        .unwrap_or(0);
    let survivors: Vec<SocketAddr> = (0..3).filter(|&i| i != victim).map(|i| addrs[i]).collect();
    let killed_at = Instant::now();
    nodes[victim].kill();
    let new_coordinator = wait_for(Duration::from_secs(TTL_S + 5), "a new coordinator", || {
        find(survivors[0], GROUP)
            .filter(|(id, _)| *id != coordinator_id)
            .map(|(_, addr)| addr)
    })?;
    let after = wait_for(Duration::from_secs(TTL_S + 5), "the group loaded", || {
        describe(new_coordinator).ok().filter(|d| d.error_code == 0)
    })?;
    eprintln!(
        "the consumer group failed over in {:?}",
        killed_at.elapsed()
    );
    ensure!(
        (after.group_epoch, after.assignment_epoch)
            == (before.group_epoch, before.assignment_epoch),
        "same epochs: {before:?} → {after:?}"
    );
    ensure!(
        after.members == before.members,
        "same members and assignments"
    );
    for m in &mut members {
        m.conn = Conn::connect(new_coordinator)?;
        let owned = m.owned.clone();
        ensure!(m.beat()? == 0, "{} heartbeats on", m.id);
        ensure!(
            m.epoch == 2 && m.owned == owned,
            "{} kept its epoch and partitions",
            m.id
        );
    }
    // The next epoch goes past what it had.
    let mut conn = Conn::connect(new_coordinator)?;
    let r = heartbeat(&mut conn, "cm-c", 0, true, &[])?;
    ensure!(r.error_code == 0 && r.member_epoch == 3, "{r:?}");
    Ok(())
}
