//! Helpers for the cluster-mode tests: a real etcd (`muster_etcd::testkit`), real `musterd`
//! processes joined to it, and the requests a consumer sends, over blocking connections.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use muster_protocol::*;

use crate::support::{start_logged, Conn, Log};

/// The lease TTL the tests run with: failover within TTL + 2 s is what they check.
pub const TTL_S: u64 = 3;
pub const SHARDS: u32 = 16;
pub const TOPIC: &str = "orders";

/// One musterd of a cluster.
pub struct Node {
    pub id: String,
    pub addr: SocketAddr,
    /// Its log so far.
    pub log: Log,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl Node {
    pub fn start(etcd: &str, id: &str, ttl_s: u64) -> Result<Node> {
        Self::start_with(etcd, id, ttl_s, SHARDS, &[])
    }

    pub fn start_with(
        etcd: &str,
        id: &str,
        ttl_s: u64,
        shards: u32,
        extra: &[&str],
    ) -> Result<Node> {
        let dir = tempfile::tempdir()?;
        let ttl = ttl_s.to_string();
        let shards = shards.to_string();
        let mut args = vec![
            // Groups form at once (the tests make dozens, one member each).
            "--initial-rebalance-delay-ms",
            "0",
            "--cluster-etcd",
            etcd,
            "--node-id",
            id,
            "--lease-ttl-s",
            &ttl,
            "--shards",
            &shards,
        ];
        args.extend_from_slice(extra);
        let (child, addr, log) = start_logged(dir.path(), &args)?;
        Ok(Node {
            id: id.to_owned(),
            addr,
            log,
            child: Some(child),
            _dir: dir,
        })
    }

    /// The lines of its log so far that contain every one of `words`.
    pub fn log_lines(&self, words: &[&str]) -> Vec<String> {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|line| words.iter().all(|w| line.contains(w)))
            .cloned()
            .collect()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn signal(&self, signal: &str) {
        let _ = std::process::Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status();
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.signal("-CONT");
        }
        self.kill();
    }
}

/// One request on a new connection, answered within a second (a paused node never answers).
pub fn call(addr: SocketAddr, request: Request) -> Result<Response> {
    Conn::connect_within(addr, Duration::from_secs(1))?.call(request)
}

/// Polls `f` every 50 ms until it gives `Some`, or fails after `within`.
pub fn wait_for<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> Result<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = f() {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("{what}: not within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn describe_cluster(addr: SocketAddr) -> Result<DescribeClusterResponse> {
    match call(addr, Request::DescribeCluster(DescribeClusterRequest {}))? {
        Response::DescribeCluster(d) => Ok(d),
        other => bail!("not a DescribeCluster answer: {other:?}"),
    }
}

/// Waits until `addr` sees exactly `nodes` nodes holding every shard between them.
pub fn wait_settled(
    addr: SocketAddr,
    nodes: usize,
    within: Duration,
) -> Result<DescribeClusterResponse> {
    wait_for(within, "the cluster to settle", || {
        let d = describe_cluster(addr).ok()?;
        let owned: usize = d.nodes.iter().map(|n| n.shards.len()).sum();
        let balanced = d
            .nodes
            .iter()
            .all(|n| n.shards.len() as u32 >= SHARDS / nodes as u32);
        (d.nodes.len() == nodes && owned == SHARDS as usize && balanced).then_some(d)
    })
}

/// The coordinator of `group` as the node at `ask` names it, when it names one.
pub fn find(ask: SocketAddr, group: &str) -> Option<(String, SocketAddr)> {
    let answer = call(
        ask,
        Request::FindCoordinator(FindCoordinatorRequest { key: group.into() }),
    )
    .ok()?;
    match answer {
        Response::FindCoordinator(f) if f.error_code == 0 => {
            let addr = format!("{}:{}", f.host, f.port).parse().ok()?;
            Some((f.node_id, addr))
        }
        _ => None,
    }
}

/// A group name in `shard` (of [`SHARDS`]).
pub fn group_in_shard(shard: u32) -> String {
    (0..)
        .map(|i| format!("group-{i}"))
        .find(|g| muster_etcd::shard_of(g, SHARDS) == shard)
        .unwrap_or_default()
}

/// One consumer: a member alone in its group, which it leads.
pub struct Member {
    pub group: String,
    pub member_id: String,
    pub generation: i32,
    pub node: String,
    pub conn: Conn,
}

fn join_req(group: &str, member_id: &str) -> Request {
    Request::JoinGroup(JoinGroupRequest {
        group_id: group.into(),
        member_id: member_id.into(),
        group_instance_id: None,
        // Longer than any test: the members heartbeat only when a test says so.
        session_timeout_ms: 120_000,
        rebalance_timeout_ms: 10_000,
        topics: vec![TOPIC.into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: vec![],
        }],
        owned_partitions: vec![],
        reason: None,
    })
}

pub fn heartbeat(group: &str, generation: i32, member_id: &str) -> Request {
    Request::Heartbeat(HeartbeatRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
    })
}

pub fn commit(group: &str, generation: i32, member_id: &str, offset: i64) -> Request {
    Request::OffsetCommit(OffsetCommitRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            topic: TOPIC.into(),
            partitions: vec![OffsetCommitPartition {
                partition: 0,
                offset,
                metadata: None,
            }],
        }],
    })
}

/// The one code of a one-partition OffsetCommit answer (or its top-level error).
pub fn commit_code(response: &Response) -> i16 {
    match response {
        Response::OffsetCommit(r) => r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(-1, |p| p.error_code),
        Response::Error(e) => e.error_code,
        _ => -1,
    }
}

pub fn heartbeat_code(response: &Response) -> i16 {
    match response {
        Response::Heartbeat(h) => h.error_code,
        Response::Error(e) => e.error_code,
        _ => -1,
    }
}

/// The committed offset of partition 0.
pub fn fetch_offset(addr: SocketAddr, group: &str) -> Result<Option<i64>> {
    fetched_offset(call(addr, offset_fetch(group))?)
}

/// An OffsetFetch of partition 0 of [`TOPIC`].
pub fn offset_fetch(group: &str) -> Request {
    Request::OffsetFetch(OffsetFetchRequest {
        group_id: group.into(),
        topics: Some(vec![TopicPartitions {
            topic: TOPIC.into(),
            partitions: vec![0],
        }]),
    })
}

/// The offset an [`offset_fetch`] answered (`None`: nothing committed).
pub fn fetched_offset(answer: Response) -> Result<Option<i64>> {
    match answer {
        Response::OffsetFetch(f) if f.error_code == 0 => Ok(f
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .filter(|p| p.offset >= 0)
            .map(|p| p.offset)),
        other => bail!("OffsetFetch failed: {other:?}"),
    }
}

pub fn describe_group(addr: SocketAddr, group: &str) -> Result<DescribedGroup> {
    match call(
        addr,
        Request::DescribeGroups(DescribeGroupsRequest {
            group_ids: vec![group.into()],
        }),
    )? {
        Response::DescribeGroups(mut d) if !d.groups.is_empty() => Ok(d.groups.remove(0)),
        other => bail!("DescribeGroups failed: {other:?}"),
    }
}

impl Member {
    /// Joins `group` at its coordinator (asking `ask`), syncs, and commits `offset`.
    pub fn start(ask: SocketAddr, group: &str, offset: i64) -> Result<Member> {
        let (node, addr) = wait_for(Duration::from_secs(10), "a coordinator", || {
            find(ask, group)
        })?;
        let mut conn = Conn::connect(addr)?;
        let member_id = match conn.call(join_req(group, ""))? {
            Response::JoinGroup(j) => j.member_id,
            other => bail!("join: {other:?}"),
        };
        let joined = match conn.call(join_req(group, &member_id))? {
            Response::JoinGroup(j) if j.error_code == 0 => j,
            other => bail!("join: {other:?}"),
        };
        let generation = joined.generation_id;
        let synced = conn.call(Request::SyncGroup(SyncGroupRequest {
            group_id: group.into(),
            generation_id: generation,
            member_id: member_id.clone(),
            group_instance_id: None,
            assignor: None,
            assignments: vec![MemberAssignment {
                member_id: member_id.clone(),
                partitions: vec![TopicPartitions {
                    topic: TOPIC.into(),
                    partitions: vec![0, 1, 2, 3],
                }],
                user_data: vec![],
            }],
        }))?;
        match synced {
            Response::SyncGroup(s) if s.error_code == 0 => {}
            other => bail!("sync: {other:?}"),
        }
        let mut member = Member {
            group: group.into(),
            member_id,
            generation,
            node,
            conn,
        };
        let code = commit_code(&member.conn.call(commit(
            group,
            generation,
            &member.member_id,
            offset,
        ))?);
        if code != 0 {
            bail!("commit of {group} answered {code}");
        }
        Ok(member)
    }

    /// Finds the coordinator again (asking `ask`) and heartbeats there with the same member id
    /// and generation until it answers NONE; returns the node that did.
    pub fn follow(&mut self, ask: &[SocketAddr], within: Duration) -> Result<String> {
        let group = self.group.clone();
        let (member_id, generation) = (self.member_id.clone(), self.generation);
        let mut last = String::from("no coordinator named");
        let found = wait_for(within, &format!("{group} served again"), || {
            let (node, addr) = ask.iter().find_map(|a| find(*a, &group))?;
            let mut conn = Conn::connect_within(addr, Duration::from_secs(1)).ok()?;
            let code = heartbeat_code(&conn.call(heartbeat(&group, generation, &member_id)).ok()?);
            last = format!("{node} answered the heartbeat {code}");
            (code == 0).then_some((node, conn))
        });
        let (node, conn) = found.with_context(|| last.clone())?;
        self.node = node.clone();
        self.conn = conn;
        Ok(node)
    }

    pub fn heartbeat(&mut self) -> Result<i16> {
        let request = heartbeat(&self.group, self.generation, &self.member_id);
        Ok(heartbeat_code(&self.conn.call(request)?))
    }

    pub fn commit(&mut self, offset: i64) -> Result<i16> {
        let request = commit(&self.group, self.generation, &self.member_id, offset);
        Ok(commit_code(&self.conn.call(request)?))
    }
}

/// Creates [`TOPIC`] at `addr` and waits until every node in `nodes` knows it.
pub fn create_topic(addr: SocketAddr, nodes: &[SocketAddr]) -> Result<()> {
    let created = call(
        addr,
        Request::CreateTopics(CreateTopicsRequest {
            topics: vec![TopicInfo {
                topic: TOPIC.into(),
                partitions: 4,
            }],
        }),
    )?;
    match created {
        Response::CreateTopics(c) if c.results.iter().all(|r| r.error_code == 0) => {}
        other => bail!("CreateTopics: {other:?}"),
    }
    for node in nodes {
        wait_for(
            Duration::from_secs(5),
            "the topic on every node",
            || match call(
                *node,
                Request::DescribeTopics(DescribeTopicsRequest { topics: None }),
            )
            .ok()?
            {
                Response::DescribeTopics(d) => {
                    d.topics.iter().any(|t| t.topic == TOPIC).then_some(())
                }
                _ => None,
            },
        )
        .context("topic catalog watch")?;
    }
    Ok(())
}

impl Member {
    /// The same member (id and generation) on a new connection to `addr`.
    pub fn twin(&self, addr: SocketAddr) -> Result<Member> {
        Ok(Member {
            group: self.group.clone(),
            member_id: self.member_id.clone(),
            generation: self.generation,
            node: self.node.clone(),
            conn: Conn::connect(addr)?,
        })
    }

    /// A second member joining `group` at its coordinator: its JoinGroup is sent and left
    /// pending (the barrier waits for the others); [`Member::finish_join`] reads the answer.
    pub fn start_joining(ask: SocketAddr, group: &str) -> Result<Member> {
        let (node, addr) = wait_for(Duration::from_secs(10), "a coordinator", || {
            find(ask, group)
        })?;
        let mut conn = Conn::connect(addr)?;
        let member_id = match conn.call(join_req(group, ""))? {
            Response::JoinGroup(j) => j.member_id,
            other => bail!("join: {other:?}"),
        };
        conn.send(join_req(group, &member_id))?;
        Ok(Member {
            group: group.into(),
            member_id,
            generation: -1,
            node,
            conn,
        })
    }

    /// The generation the pending JoinGroup of [`Member::start_joining`] reached.
    pub fn finish_join(&mut self) -> Result<i32> {
        match self.conn.recv()?.response {
            Response::JoinGroup(j) if j.error_code == 0 => {
                self.generation = j.generation_id;
                Ok(j.generation_id)
            }
            other => bail!("join: {other:?}"),
        }
    }

    /// Joins again with its member id (after REBALANCE_IN_PROGRESS); the generation reached.
    pub fn rejoin(&mut self) -> Result<i32> {
        let request = join_req(&self.group, &self.member_id);
        match self.conn.call(request)? {
            Response::JoinGroup(j) if j.error_code == 0 => {
                self.generation = j.generation_id;
                Ok(j.generation_id)
            }
            other => bail!("rejoin: {other:?}"),
        }
    }

    /// SyncGroup in its generation with `assignments` (a follower sends none).
    pub fn sync(&mut self, assignments: Vec<MemberAssignment>) -> Result<()> {
        let request = Request::SyncGroup(SyncGroupRequest {
            group_id: self.group.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            assignor: None,
            assignments,
        });
        match self.conn.call(request)? {
            Response::SyncGroup(s) if s.error_code == 0 => Ok(()),
            other => bail!("sync: {other:?}"),
        }
    }

    /// The ownership epochs of the partitions it owns: `(partition, epoch)` (protocol §6.23).
    pub fn epochs(&mut self) -> Result<Vec<(i32, i32)>> {
        let request = Request::OwnershipEpochs(OwnershipEpochsRequest {
            group_id: self.group.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
        });
        match self.conn.call(request)? {
            Response::OwnershipEpochs(r) if r.error_code == 0 => Ok(r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.epoch)))
                .collect()),
            other => bail!("OwnershipEpochs: {other:?}"),
        }
    }
}

/// `partitions` of [`TOPIC`] for `member_id`.
pub fn assignment(member_id: &str, partitions: Vec<i32>) -> MemberAssignment {
    MemberAssignment {
        member_id: member_id.into(),
        partitions: vec![TopicPartitions {
            topic: TOPIC.into(),
            partitions,
        }],
        user_data: vec![],
    }
}
