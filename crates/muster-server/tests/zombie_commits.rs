//! Zombie commits against the real `musterd` binary, over TCP (issue #22): a member that missed
//! a rebalance, came back and committed offsets of a partition it no longer owns is refused on
//! that partition (PARTITION_NOT_OWNED) while its own partitions are committed, and the new
//! owner's offset is intact — for the classic protocol and the consumer protocol. Its
//! ownership epochs tell a sink the same: the new owner's epoch is higher.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use muster_protocol::*;
use support::{start_with, Conn};

const TOPIC: &str = "orders";

fn commit(
    conn: &mut Conn,
    group: &str,
    member: &str,
    generation: i32,
    offsets: &[(i32, i64)],
) -> Result<Vec<(i32, i16)>> {
    match conn.call(Request::OffsetCommit(OffsetCommitRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            topic: TOPIC.into(),
            partitions: offsets
                .iter()
                .map(|&(partition, offset)| OffsetCommitPartition {
                    partition,
                    offset,
                    metadata: Some(format!("by {member}")),
                })
                .collect(),
        }],
    }))? {
        Response::OffsetCommit(r) => Ok(r.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition, p.error_code))
            .collect()),
        other => bail!("OffsetCommit: {other:?}"),
    }
}

fn fetched(conn: &mut Conn, group: &str, partition: i32) -> Result<(i64, Option<String>)> {
    match conn.call(Request::OffsetFetch(OffsetFetchRequest {
        group_id: group.into(),
        topics: Some(vec![TopicPartitions {
            topic: TOPIC.into(),
            partitions: vec![partition],
        }]),
    }))? {
        Response::OffsetFetch(r) => {
            let p = &r.topics[0].partitions[0];
            Ok((p.offset, p.metadata.clone()))
        }
        other => bail!("OffsetFetch: {other:?}"),
    }
}

fn epochs(conn: &mut Conn, group: &str, member: &str, generation: i32) -> Result<Vec<(i32, i32)>> {
    match conn.call(Request::OwnershipEpochs(OwnershipEpochsRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
    }))? {
        Response::OwnershipEpochs(r) if r.error_code == 0 => Ok(r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.epoch)))
            .collect()),
        other => bail!("OwnershipEpochs: {other:?}"),
    }
}

const NOT_OWNED: i16 = ErrorCode::PartitionNotOwned.code();

/// A classic member: joins, and its leader assigns partitions by a plan the test gives.
struct Classic {
    conn: Conn,
    id: String,
    generation: i32,
}

impl Classic {
    fn connect(addr: SocketAddr) -> Result<Classic> {
        Ok(Classic {
            conn: Conn::connect(addr)?,
            id: String::new(),
            generation: -1,
        })
    }

    fn join_request(&self, group: &str) -> Request {
        Request::JoinGroup(JoinGroupRequest {
            group_id: group.into(),
            member_id: self.id.clone(),
            session_timeout_ms: 1_000,
            rebalance_timeout_ms: 2_000,
            topics: vec![TOPIC.into()],
            assignors: vec![AssignorMetadata {
                name: "range".into(),
                user_data: Vec::new(),
            }],
            ..JoinGroupRequest::default()
        })
    }

    /// Sends JoinGroup (after MEMBER_ID_REQUIRED if it has no id); returns its correlation id.
    fn send_join(&mut self, group: &str) -> Result<u32> {
        if self.id.is_empty() {
            match self.conn.call(self.join_request(group))? {
                Response::JoinGroup(r) if r.error_code == ErrorCode::MemberIdRequired.code() => {
                    self.id = r.member_id;
                }
                other => bail!("first join: {other:?}"),
            }
        }
        let request = self.join_request(group);
        self.conn.send(request)
    }

    fn joined(&mut self) -> Result<JoinGroupResponse> {
        match self.conn.recv()?.response {
            Response::JoinGroup(r) if r.error_code == 0 => {
                self.generation = r.generation_id;
                Ok(r)
            }
            other => bail!("join of {}: {other:?}", self.id),
        }
    }

    fn sync(&mut self, group: &str, plan: Vec<MemberAssignment>) -> Result<()> {
        match self.conn.call(Request::SyncGroup(SyncGroupRequest {
            group_id: group.into(),
            generation_id: self.generation,
            member_id: self.id.clone(),
            group_instance_id: None,
            assignor: Some("range".into()),
            assignments: plan,
        }))? {
            Response::SyncGroup(r) if r.error_code == 0 => Ok(()),
            other => bail!("sync of {}: {other:?}", self.id),
        }
    }

    fn heartbeat(&mut self, group: &str) -> Result<i16> {
        match self.conn.call(Request::Heartbeat(HeartbeatRequest {
            group_id: group.into(),
            generation_id: self.generation,
            member_id: self.id.clone(),
            group_instance_id: None,
        }))? {
            Response::Heartbeat(r) => Ok(r.error_code),
            other => bail!("heartbeat: {other:?}"),
        }
    }
}

fn plan(members: &[(&str, &[i32])]) -> Vec<MemberAssignment> {
    members
        .iter()
        .map(|(id, partitions)| MemberAssignment {
            member_id: (*id).to_owned(),
            partitions: vec![TopicPartitions {
                topic: TOPIC.into(),
                partitions: partitions.to_vec(),
            }],
            user_data: Vec::new(),
        })
        .collect()
}

/// Heartbeats `member` until `deadline`, as a live consumer does.
fn keep_alive(member: &mut Classic, group: &str, for_: Duration) -> Result<()> {
    let until = Instant::now() + for_;
    while Instant::now() < until {
        member.heartbeat(group)?;
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

#[test]
fn a_classic_member_back_from_a_missed_rebalance_cannot_overwrite_the_new_owners_offset(
) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (mut server, addr) = start_with(
        dir.path(),
        &[
            "--initial-rebalance-delay-ms",
            "0",
            "--min-session-timeout-ms",
            "500",
        ],
    )?;
    let group = "zombie-classic";
    // A and B form the group: A owns 0, B owns 1.
    let mut a = Classic::connect(addr)?;
    let mut b = Classic::connect(addr)?;
    a.send_join(group)?;
    let a_join = a.joined()?;
    assert_eq!(a_join.leader_id, a.id);
    let a_id = a.id.clone();
    a.sync(group, plan(&[(&a_id, &[0, 1])]))?;
    b.send_join(group)?;
    // B's join starts a rebalance: A hears of it and rejoins.
    let until = Instant::now() + Duration::from_secs(10);
    while a.heartbeat(group)? != ErrorCode::RebalanceInProgress.code() {
        if Instant::now() > until {
            bail!("A never heard of B's join");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    a.send_join(group)?;
    let a_join = a.joined()?;
    b.joined()?;
    assert_eq!(a_join.members.len(), 2);
    a.sync(group, plan(&[(&a.id, &[0]), (&b.id, &[1])]))?;
    b.sync(group, Vec::new())?;
    let first = a.generation;
    assert_eq!(
        commit(&mut a.conn, group, &a.id, first, &[(0, 10)])?,
        [(0, 0)]
    );
    let a_epoch = epochs(&mut a.conn, group, &a.id, first)?;
    // A stops (as a SIGSTOPped worker would) past its session: B, alone, gets both partitions.
    keep_alive(&mut b, group, Duration::from_millis(1_600))?;
    let code = b.heartbeat(group)?;
    assert_eq!(
        code,
        ErrorCode::RebalanceInProgress.code(),
        "A expired: B must rejoin"
    );
    b.send_join(group)?;
    b.joined()?;
    let b_id = b.id.clone();
    b.sync(group, plan(&[(&b_id, &[0, 1])]))?;
    let b_epochs = epochs(&mut b.conn, group, &b.id, b.generation)?;
    assert!(
        b_epochs.iter().any(|&(p, e)| p == 0 && e > a_epoch[0].1),
        "the new owner's epoch of partition 0 is higher: {b_epochs:?} vs {a_epoch:?}"
    );
    assert_eq!(
        commit(&mut b.conn, group, &b.id, b.generation, &[(0, 500)])?,
        [(0, 0)]
    );

    // A wakes up: its stale commit is refused on each partition.
    let stale = commit(&mut a.conn, group, &a.id, first, &[(0, 11)])?;
    assert_eq!(stale, [(0, ErrorCode::UnknownMemberId.code())]);
    // It rejoins and is given partition 1 only, but commits its old partition 0 too, with its
    // new generation (a zombie's buffered progress): 0 is refused, 1 committed.
    a.id.clear();
    a.send_join(group)?;
    b.send_join(group)?;
    let a_join = a.joined()?;
    b.joined()?;
    let a_id = a.id.clone();
    let b_id = b.id.clone();
    let plan = plan(&[(&a_id, &[1]), (&b_id, &[0])]);
    if a_join.leader_id == a_id {
        a.sync(group, plan)?;
        b.sync(group, Vec::new())?;
    } else {
        b.sync(group, plan)?;
        a.sync(group, Vec::new())?;
    }
    let zombie = commit(&mut a.conn, group, &a.id, a.generation, &[(0, 12), (1, 7)])?;
    assert_eq!(zombie, [(0, NOT_OWNED), (1, 0)]);
    assert_eq!(
        fetched(&mut b.conn, group, 0)?,
        (500, Some(format!("by {}", b.id))),
        "the new owner's offset is intact"
    );
    assert_eq!(fetched(&mut b.conn, group, 1)?.0, 7);
    server.kill().context("stop musterd")?;
    Ok(())
}

/// One consumer-protocol member speaking raw frames.
struct Consumer {
    conn: Conn,
    id: String,
    epoch: i32,
    owned: Vec<TopicPartitions>,
}

impl Consumer {
    fn heartbeat(&mut self, group: &str) -> Result<ConsumerGroupHeartbeatResponse> {
        let join = self.epoch == 0;
        match self.conn.call(Request::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatRequest {
                group_id: group.into(),
                member_id: self.id.clone(),
                member_epoch: self.epoch,
                rebalance_timeout_ms: if join { 1_000 } else { -1 },
                subscribed_topics: join.then(|| vec![TOPIC.into()]),
                owned_partitions: Some(self.owned.clone()),
                ..ConsumerGroupHeartbeatRequest::default()
            },
        ))? {
            Response::ConsumerGroupHeartbeat(r) => {
                if r.error_code == 0 {
                    self.epoch = r.member_epoch;
                    if let Some(assignment) = &r.assignment {
                        self.owned = assignment.clone();
                    }
                }
                Ok(r)
            }
            other => bail!("heartbeat: {other:?}"),
        }
    }

    fn owns(&self) -> Vec<i32> {
        let mut all: Vec<i32> = self
            .owned
            .iter()
            .flat_map(|t| t.partitions.clone())
            .collect();
        all.sort_unstable();
        all
    }
}

#[test]
fn a_consumer_protocol_member_cannot_commit_a_partition_that_moved_on() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (mut server, addr) = start_with(
        dir.path(),
        &[
            "--consumer-heartbeat-interval-ms",
            "100",
            "--consumer-session-timeout-ms",
            "800",
        ],
    )?;
    let group = "zombie-consumer";
    let mut admin = Conn::connect(addr)?;
    match admin.call(Request::CreateTopics(CreateTopicsRequest {
        topics: vec![TopicInfo {
            topic: TOPIC.into(),
            partitions: 2,
        }],
    }))? {
        Response::CreateTopics(r) if r.results.iter().all(|t| t.error_code == 0) => {}
        other => bail!("CreateTopics: {other:?}"),
    }
    let mut a = Consumer {
        conn: Conn::connect(addr)?,
        id: "member-a".into(),
        epoch: 0,
        owned: Vec::new(),
    };
    a.heartbeat(group)?;
    a.heartbeat(group)?;
    assert_eq!(a.owns(), [0, 1]);
    let a_epochs = epochs(&mut a.conn, group, &a.id, a.epoch)?;
    assert_eq!(
        commit(&mut a.conn, group, &a.id, a.epoch, &[(0, 3), (1, 4)])?,
        [(0, 0), (1, 0)]
    );
    // A goes silent past its session: B joins and gets everything.
    std::thread::sleep(Duration::from_millis(1_000));
    let mut b = Consumer {
        conn: Conn::connect(addr)?,
        id: "member-b".into(),
        epoch: 0,
        owned: Vec::new(),
    };
    let until = Instant::now() + Duration::from_secs(10);
    while b.owns() != [0, 1] {
        if Instant::now() > until {
            bail!("B never got both partitions: {:?}", b.owned);
        }
        b.heartbeat(group)?;
        std::thread::sleep(Duration::from_millis(50));
    }
    let b_epochs = epochs(&mut b.conn, group, &b.id, b.epoch)?;
    for (p, e) in &b_epochs {
        let old = a_epochs.iter().find(|(q, _)| q == p).map(|(_, e)| *e);
        assert!(
            old.is_none_or(|old| *e > old),
            "epoch of {p} rose: {e} vs {old:?}"
        );
    }
    assert_eq!(
        commit(&mut b.conn, group, &b.id, b.epoch, &[(0, 900)])?,
        [(0, 0)]
    );
    // A wakes up and commits with its old epoch: fenced, on each partition.
    let stale = commit(&mut a.conn, group, &a.id, a.epoch, &[(0, 5)])?;
    assert_eq!(stale, [(0, ErrorCode::UnknownMemberId.code())]);
    // A rejoins (epoch 0, same id), and while B still holds both, commits partition 0 with
    // its new epoch: not its partition.
    a.epoch = 0;
    a.owned.clear();
    a.heartbeat(group)?;
    let zombie = commit(&mut a.conn, group, &a.id, a.epoch, &[(0, 6)])?;
    assert_eq!(zombie, [(0, NOT_OWNED)]);
    assert_eq!(
        fetched(&mut b.conn, group, 0)?,
        (900, Some("by member-b".into()))
    );
    server.kill().context("stop musterd")?;
    Ok(())
}
