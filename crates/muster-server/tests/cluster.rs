//! Cluster mode against real processes (issue #13's "done when"): a real etcd
//! (`muster_etcd::testkit`, Debian's `etcd-server`; missing, these tests fail) and real
//! `musterd` nodes on `127.0.0.1:0`, killed with SIGKILL, paused with SIGSTOP, joined while
//! groups run. Every group is a member that leads itself, over the wire protocol.

mod cluster_support;
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use cluster_support::*;
use muster_etcd::testkit::EtcdCluster;

/// One group in every shard, so that whatever moves, a group moves with it.
fn one_group_per_shard(ask: std::net::SocketAddr) -> Result<Vec<Member>> {
    (0..SHARDS)
        .map(|shard| Member::start(ask, &group_in_shard(shard), 100 + i64::from(shard)))
        .collect()
}

#[test]
fn three_nodes_share_the_groups_and_survive_a_sigkill_without_rebalancing() -> Result<()> {
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let mut nodes: Vec<Node> = (1..=3)
        .map(|i| Node::start(&endpoints, &format!("n{i}"), TTL_S))
        .collect::<Result<_>>()?;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    let settled = wait_settled(addrs[0], 3, Duration::from_secs(10))?;
    let counts: Vec<usize> = settled.nodes.iter().map(|n| n.shards.len()).collect();
    assert_eq!(counts, vec![6, 5, 5], "16 shards over 3 nodes: {settled:?}");
    create_topic(addrs[1], &addrs)?;
    let mut members = one_group_per_shard(addrs[2])?;
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for m in &members {
        *per_node.entry(m.node.clone()).or_default() += 1;
    }
    assert_eq!(per_node.len(), 3, "groups on every node: {per_node:?}");
    let epochs_before: Vec<Vec<(i32, i32)>> = members
        .iter_mut()
        .map(Member::epochs)
        .collect::<Result<_>>()?;

    // Kill the node with most groups; every group it coordinated must answer on a survivor
    // within the lease TTL + 2 s, to the same member id and generation.
    let victim = (0..3)
        .max_by_key(|&i| per_node.get(&nodes[i].id).copied().unwrap_or(0))
        .unwrap_or(0);
    let victim_id = nodes[victim].id.clone();
    let survivors: Vec<_> = (0..3).filter(|&i| i != victim).map(|i| addrs[i]).collect();
    let killed_at = Instant::now();
    nodes[victim].kill();
    let deadline = killed_at + Duration::from_secs(TTL_S + 2);
    let mut moved = Vec::new();
    for m in members.iter_mut().filter(|m| m.node == victim_id) {
        let left = deadline.saturating_duration_since(Instant::now());
        let node = m.follow(&survivors, left)?;
        ensure!(node != victim_id, "{} still on the dead node", m.group);
        moved.push(m.group.clone());
    }
    eprintln!(
        "{} groups failed over in {:?}",
        moved.len(),
        killed_at.elapsed()
    );
    // The survivors claimed the dead node's shards all at once each, and between them
    // exactly all of them: 8 and 8.
    let settled = wait_settled(survivors[0], 2, Duration::from_secs(5))?;
    let counts: Vec<usize> = settled.nodes.iter().map(|n| n.shards.len()).collect();
    assert_eq!(counts, vec![8, 8], "16 shards over 2 nodes: {settled:?}");
    // Every acknowledged offset is there; no group rebalanced.
    for (shard, m) in members.iter_mut().enumerate() {
        let coordinator = find(survivors[0], &m.group)
            .map(|(_, a)| a)
            .expect("a coordinator");
        assert_eq!(
            fetch_offset(coordinator, &m.group)?,
            Some(100 + shard as i64),
            "{}",
            m.group
        );
        let described = describe_group(coordinator, &m.group)?;
        assert_eq!(
            (described.state.as_str(), described.generation_id),
            ("Stable", m.generation)
        );
        assert_eq!(m.heartbeat()?, 0, "{} heartbeats on", m.group);
        // The same owner keeps the same ownership epochs: they are in the group's record.
        assert_eq!(m.epochs()?, epochs_before[shard], "{}", m.group);
    }
    // No generation is reused: the next rebalance of a moved group goes past what it had.
    let (shard, m) = members
        .iter_mut()
        .enumerate()
        .find(|(_, m)| moved.contains(&m.group))
        .expect("a moved group");
    let before = m.generation;
    let mut other = Member::start_joining(survivors[0], &m.group)?;
    // The new member's JoinGroup travels on its own connection: heartbeat until the group has
    // it and the member hears of the rebalance.
    wait_for(Duration::from_secs(5), "REBALANCE_IN_PROGRESS", || {
        (m.heartbeat().ok()? == 27).then_some(())
    })?;
    let rejoined = m.rejoin()?;
    let joined = other.finish_join()?;
    assert_eq!(rejoined, before + 1);
    assert_eq!(joined, rejoined);
    // Partitions 0 and 1 change owner on the survivor: their ownership epochs rise past every
    // epoch they had before the failover (none is reused).
    let other_id = other.member_id.clone();
    let m_id = m.member_id.clone();
    m.sync(vec![
        assignment(&m_id, vec![2, 3]),
        assignment(&other_id, vec![0, 1]),
    ])?;
    other.sync(Vec::new())?;
    let newer = other.epochs()?;
    assert_eq!(newer.iter().map(|e| e.0).collect::<Vec<_>>(), [0, 1]);
    for (partition, epoch) in newer {
        let old = epochs_before[shard]
            .iter()
            .find(|e| e.0 == partition)
            .map(|e| e.1)
            .expect("owned before");
        assert!(
            epoch > old,
            "partition {partition}: epoch {epoch} after {old}"
        );
    }
    let kept = m.epochs()?;
    assert_eq!(
        kept,
        epochs_before[shard][2..],
        "the partitions that stayed keep theirs"
    );
    Ok(())
}

#[test]
fn a_node_paused_past_its_lease_never_overwrites_the_new_owner_and_answers_not_coordinator(
) -> Result<()> {
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let nodes: Vec<Node> = (1..=2)
        .map(|i| Node::start(&endpoints, &format!("n{i}"), TTL_S))
        .collect::<Result<_>>()?;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    wait_settled(addrs[0], 2, Duration::from_secs(10))?;
    create_topic(addrs[0], &addrs)?;
    // A group on n1; its connection to n1 stays open through the pause.
    let group = (0..SHARDS)
        .map(group_in_shard)
        .find(|g| find(addrs[1], g).is_some_and(|(n, _)| n == "n1"))
        .expect("n1 owns a shard");
    let mut old = Member::start(addrs[1], &group, 1)?;
    assert_eq!(old.node, "n1");

    nodes[0].signal("-STOP");
    // n2 takes the group over; the member carries on there and commits.
    let mut member = old.twin(addrs[1])?;
    let node = member.follow(&addrs[1..], Duration::from_secs(TTL_S + 2))?;
    assert_eq!(node, "n2");
    assert_eq!(member.commit(2)?, 0);
    // A commit sent to the paused node waits in its socket and is read when it resumes.
    let stale = old
        .conn
        .send(commit(&group, old.generation, &old.member_id, 999))?;
    nodes[0].signal("-CONT");
    let answer = old.conn.recv()?;
    assert_eq!(answer.correlation_id, stale);
    let code = commit_code(&answer.response);
    assert!(
        code == 16 || code == 15,
        "the stale commit was refused, not acknowledged: {code}"
    );
    // From then on n1 answers NOT_COORDINATOR for the group, on the connection that had
    // reached the group before the pause, and FindCoordinator there names n2. Until the
    // ownership loop has caught up with the resumed node, an answer may be
    // COORDINATOR_NOT_AVAILABLE instead: a request queued in the group actor's mailbox as it
    // stops (relinquished, its writes drained) is answered by its dropped reply guard, and a
    // group rolling back a write refused meanwhile answers 15 until it is let go. A client
    // treats both alike (find the coordinator again); never NONE, and NOT_COORDINATOR within
    // the bound, to heartbeats and commits alike.
    let mut seen = Vec::new();
    wait_for(
        Duration::from_secs(5),
        "n1 answering NOT_COORDINATOR to a heartbeat and a commit",
        || {
            let heartbeat = old.heartbeat().ok()?;
            let commit = old.commit(998).ok()?;
            seen.push((heartbeat, commit));
            (heartbeat == 16 && commit == 16).then_some(())
        },
    )?;
    assert!(
        seen.iter()
            .all(|(h, c)| [15, 16].contains(h) && [15, 16].contains(c)),
        "a stale heartbeat or commit must send the member to another coordinator: {seen:?}"
    );
    wait_for(Duration::from_secs(5), "n1 naming n2", || {
        (find(addrs[0], &group)?.0 == "n2").then_some(())
    })?;
    // What n2 wrote stands, in etcd itself (not only in n2's memory).
    let store = muster_etcd::EtcdStore::connect(muster_etcd::EtcdStoreConfig::new(
        etcd.endpoints(),
        "muster",
        SHARDS,
    ))?;
    let stored = muster_coordinator::storage::Store::load_group(&store, &group)?;
    let offsets: Vec<i64> = stored.offsets.iter().map(|o| o.committed.offset).collect();
    assert_eq!(offsets, vec![2], "{stored:?}");
    assert_eq!(stored.record.map(|r| r.generation), Some(member.generation));
    assert_eq!(fetch_offset(addrs[1], &group)?, Some(2));
    assert_eq!(member.heartbeat()?, 0);
    Ok(())
}

#[test]
fn a_joining_node_takes_a_fair_share_without_any_group_rebalancing() -> Result<()> {
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let mut nodes: Vec<Node> = (1..=2)
        .map(|i| Node::start(&endpoints, &format!("n{i}"), TTL_S))
        .collect::<Result<_>>()?;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    wait_settled(addrs[0], 2, Duration::from_secs(10))?;
    create_topic(addrs[0], &addrs)?;
    let mut members = one_group_per_shard(addrs[0])?;

    nodes.push(Node::start(&endpoints, "n3", TTL_S)?);
    let settled = wait_settled(addrs[0], 3, Duration::from_secs(15))?;
    let n3 = settled
        .nodes
        .iter()
        .find(|n| n.node_id == "n3")
        .expect("n3 listed");
    assert_eq!(n3.shards.len(), 5, "a fair share: {settled:?}");
    let all: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    let mut on_n3 = 0;
    for (shard, m) in members.iter_mut().enumerate() {
        let node = m.follow(&all, Duration::from_secs(10))?;
        on_n3 += usize::from(node == "n3");
        let coordinator = find(all[0], &m.group)
            .map(|(_, a)| a)
            .expect("a coordinator");
        let described = describe_group(coordinator, &m.group)?;
        assert_eq!(
            (described.state.as_str(), described.generation_id),
            ("Stable", m.generation),
            "{}",
            m.group
        );
        assert_eq!(
            fetch_offset(coordinator, &m.group)?,
            Some(100 + shard as i64)
        );
    }
    assert_eq!(
        on_n3, 5,
        "one group per shard: n3's five shards' groups moved to it"
    );
    Ok(())
}

#[test]
fn etcd_losing_one_of_three_members_does_not_stop_muster() -> Result<()> {
    let mut etcd = EtcdCluster::three()?;
    let endpoints = etcd.endpoints().join(",");
    let nodes: Vec<Node> = (1..=2)
        .map(|i| Node::start(&endpoints, &format!("n{i}"), 5))
        .collect::<Result<_>>()?;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    let before = wait_settled(addrs[0], 2, Duration::from_secs(10))?;
    create_topic(addrs[0], &addrs)?;
    let mut members: Vec<Member> = (0..4)
        .map(|s| Member::start(addrs[0], &group_in_shard(s), 1))
        .collect::<Result<_>>()?;

    etcd.kill_member(0);
    // Commits go on (each acknowledged, if after a retry while etcd elects a leader), for
    // longer than the lease TTL, and no node loses its shards.
    let until = Instant::now() + Duration::from_secs(7);
    let mut offset = 10;
    while Instant::now() < until {
        for m in &mut members {
            let acknowledged = wait_for(Duration::from_secs(5), "a commit acknowledged", || {
                (m.commit(offset).ok()? == 0).then_some(())
            });
            acknowledged?;
            assert_eq!(m.heartbeat()?, 0);
        }
        offset += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = describe_cluster(addrs[1])?;
    assert_eq!(after.nodes, before.nodes, "no shard moved");
    for m in &members {
        assert_eq!(
            fetch_offset(addrs[0], &m.group)
                .ok()
                .flatten()
                .or_else(|| fetch_offset(addrs[1], &m.group).ok().flatten()),
            Some(offset - 1)
        );
    }
    Ok(())
}

#[test]
fn a_node_started_with_another_shard_count_refuses_to_start() -> Result<()> {
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let _first = Node::start(&endpoints, "n1", TTL_S)?;
    let dir = tempfile::tempdir()?;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_musterd"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
            "--cluster-etcd",
            &endpoints,
        ])
        .args(["--node-id", "n2", "--shards", "8", "--data-dir"])
        .arg(dir.path())
        .output()?;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("was created with 16 shards") && stderr.contains("--shards 16"),
        "{stderr}"
    );
    // And a second node with a live node's id.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_musterd"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
            "--cluster-etcd",
            &endpoints,
        ])
        .args([
            "--node-id",
            "n1",
            "--shards",
            "16",
            "--lease-ttl-s",
            "2",
            "--data-dir",
        ])
        .arg(dir.path())
        .output()?;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("node id \"n1\" is registered by a live node"),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn a_node_stopped_with_sigterm_hands_its_groups_over_before_its_lease_could_expire() -> Result<()> {
    // A lease far longer than the test may take: the groups can only move by handover.
    const LONG_TTL: u64 = 60;
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let nodes: Vec<Node> = (1..=2)
        .map(|i| Node::start(&endpoints, &format!("n{i}"), LONG_TTL))
        .collect::<Result<_>>()?;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    wait_settled(addrs[0], 2, Duration::from_secs(10))?;
    create_topic(addrs[0], &addrs)?;
    let mut members: Vec<Member> = (0..SHARDS)
        .map(|s| Member::start(addrs[1], &group_in_shard(s), 7))
        .collect::<Result<_>>()?;
    let stopped_at = Instant::now();
    nodes[0].signal("-TERM");
    for m in members.iter_mut() {
        let node = m.follow(&addrs[1..], Duration::from_secs(15))?;
        assert_eq!(node, "n2");
        assert_eq!(fetch_offset(addrs[1], &m.group)?, Some(7));
    }
    assert!(stopped_at.elapsed() < Duration::from_secs(LONG_TTL));
    let described = describe_cluster(addrs[1])?;
    assert_eq!(
        described.nodes.len(),
        1,
        "n1 left the cluster: {described:?}"
    );
    assert_eq!(described.nodes[0].shards.len(), SHARDS as usize);
    Ok(())
}
