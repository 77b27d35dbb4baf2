//! The consumer protocol (protocol-v1 §7) against the real `musterd` binary, over TCP: members
//! join with ConsumerGroupHeartbeat, reconcile (revocation before assignment), and the group's
//! epochs and assignments survive a SIGKILL and a restart on the same data directory.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use anyhow::{bail, Result};
use muster_protocol::*;
use support::{start, Conn};

const GROUP: &str = "consumer-tcp";

fn create_topic(addr: SocketAddr, topic: &str, partitions: i32) -> Result<()> {
    let mut conn = Conn::connect(addr)?;
    match conn.call(Request::CreateTopics(CreateTopicsRequest {
        topics: vec![TopicInfo {
            topic: topic.into(),
            partitions,
        }],
    }))? {
        Response::CreateTopics(r) if r.results.iter().all(|t| t.error_code == 0) => Ok(()),
        other => bail!("CreateTopics: {other:?}"),
    }
}

/// One consumer-protocol member speaking raw frames.
struct Member {
    conn: Conn,
    id: String,
    epoch: i32,
    owned: Vec<TopicPartitions>,
}

impl Member {
    fn join(addr: SocketAddr, id: &str) -> Result<Member> {
        Self::join_topic(addr, id, "orders")
    }

    fn join_topic(addr: SocketAddr, id: &str, topic: &str) -> Result<Member> {
        let mut member = Member {
            conn: Conn::connect(addr)?,
            id: id.into(),
            epoch: 0,
            owned: Vec::new(),
        };
        let r = member.call(ConsumerGroupHeartbeatRequest {
            group_id: GROUP.into(),
            member_id: id.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topics: Some(vec![topic.into()]),
            owned_partitions: Some(Vec::new()),
            ..ConsumerGroupHeartbeatRequest::default()
        })?;
        if r.error_code != 0 {
            bail!("join of {id}: {r:?}");
        }
        member.apply(r);
        Ok(member)
    }

    fn call(
        &mut self,
        req: ConsumerGroupHeartbeatRequest,
    ) -> Result<ConsumerGroupHeartbeatResponse> {
        match self.conn.call(Request::ConsumerGroupHeartbeat(req))? {
            Response::ConsumerGroupHeartbeat(r) => Ok(r),
            other => bail!("unexpected answer {other:?}"),
        }
    }

    fn apply(&mut self, r: ConsumerGroupHeartbeatResponse) {
        self.epoch = r.member_epoch;
        if let Some(assignment) = r.assignment {
            self.owned = assignment;
        }
    }

    /// One heartbeat reporting what it owns; returns the answer's code.
    fn beat(&mut self) -> Result<i16> {
        let r = self.call(ConsumerGroupHeartbeatRequest {
            group_id: GROUP.into(),
            member_id: self.id.clone(),
            member_epoch: self.epoch,
            rebalance_timeout_ms: -1,
            owned_partitions: Some(self.owned.clone()),
            ..ConsumerGroupHeartbeatRequest::default()
        })?;
        let code = r.error_code;
        if code == 0 {
            self.apply(r);
        }
        Ok(code)
    }

    fn owned(&self) -> BTreeSet<(String, i32)> {
        self.owned
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), *p)))
            .collect()
    }
}

fn describe(addr: SocketAddr) -> Result<DescribedConsumerGroup> {
    let mut conn = Conn::connect(addr)?;
    match conn.call(Request::ConsumerGroupDescribe(
        ConsumerGroupDescribeRequest {
            group_ids: vec![GROUP.into()],
        },
    ))? {
        Response::ConsumerGroupDescribe(mut r) if r.groups.len() == 1 => Ok(r.groups.remove(0)),
        other => bail!("ConsumerGroupDescribe: {other:?}"),
    }
}

/// Heartbeats every member in turn until none changes; checks after every heartbeat that no
/// partition is owned by two members.
fn settle(members: &mut [Member]) -> Result<()> {
    for _ in 0..10 {
        let before: Vec<(i32, BTreeSet<(String, i32)>)> =
            members.iter().map(|m| (m.epoch, m.owned())).collect();
        for i in 0..members.len() {
            let code = members[i].beat()?;
            if code != 0 {
                bail!("{} heartbeat: code {code}", members[i].id);
            }
            let mut owners: BTreeMap<(String, i32), &str> = BTreeMap::new();
            for m in members.iter() {
                for p in m.owned() {
                    if let Some(other) = owners.insert(p.clone(), &m.id) {
                        bail!("{p:?} owned by {other} and {} at once", m.id);
                    }
                }
            }
        }
        let after: Vec<(i32, BTreeSet<(String, i32)>)> =
            members.iter().map(|m| (m.epoch, m.owned())).collect();
        if before == after {
            return Ok(());
        }
    }
    bail!("the group did not settle")
}

#[test]
fn members_reconcile_over_tcp_and_epochs_survive_a_kill() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (mut server, addr) = start(dir.path())?;
    create_topic(addr, "orders", 12)?;
    let mut members = vec![Member::join(addr, "m-a")?];
    assert_eq!(members[0].owned().len(), 12);
    members.push(Member::join(addr, "m-b")?);
    members.push(Member::join(addr, "m-c")?);
    // The newcomers own nothing yet: m-a has not given anything up.
    assert!(members[1].owned().is_empty() && members[2].owned().is_empty());
    settle(&mut members)?;
    for m in &members {
        assert_eq!(m.owned().len(), 4, "{}: {:?}", m.id, m.owned);
        assert_eq!(m.epoch, 3);
    }
    let described = describe(addr)?;
    assert_eq!(
        (
            described.state.as_str(),
            described.group_epoch,
            described.assignment_epoch
        ),
        ("Stable", 3, 3)
    );
    assert_eq!(described.assignor, "uniform");

    // SIGKILL, restart on the same data: the same epochs and assignments, and the members
    // go on heartbeating with the epochs they hold.
    server.kill()?;
    server.wait()?;
    let (mut server, addr) = start(dir.path())?;
    let again = describe(addr)?;
    assert_eq!((again.group_epoch, again.assignment_epoch), (3, 3));
    assert_eq!(again.members, described.members);
    for m in &mut members {
        m.conn = Conn::connect(addr)?;
        assert_eq!(m.beat()?, 0, "{} after the restart", m.id);
        assert_eq!(m.epoch, 3);
    }
    // A fourth member: the next epoch is 4, never a reused one.
    members.push(Member::join(addr, "m-d")?);
    assert_eq!(members[3].epoch, 4);
    settle(&mut members)?;
    let total: usize = members.iter().map(|m| m.owned().len()).sum();
    assert_eq!(total, 12);
    server.kill()?;
    Ok(())
}

/// A target of more members × partitions than musterd computes on the group's turn (100 000 by
/// default) is computed on a blocking thread: the joiners are answered at once (epoch 0, the
/// group Assigning), and their next heartbeats get the target.
#[test]
fn a_large_target_is_computed_off_the_group_s_turn() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (mut server, addr) = start(dir.path())?;
    create_topic(addr, "big", 40_000)?;
    let mut members = Vec::new();
    for id in ["big-a", "big-b", "big-c"] {
        members.push(Member::join_topic(addr, id, "big")?);
    }
    // 2 × 40 000 is computed on the turn; 3 × 40 000 is not: the third joiner is answered
    // before its target exists, at the target's epoch (2), not the group's (3).
    assert_eq!((members[1].epoch, members[2].epoch), (2, 2));
    // Heartbeat until everyone owns its share (the jobs run meanwhile).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        for m in &mut members {
            let code = m.beat()?;
            if code != 0 {
                bail!("{}: code {code}", m.id);
            }
        }
        let owned: Vec<usize> = members.iter().map(|m| m.owned().len()).collect();
        let mut owners = BTreeSet::new();
        for m in &members {
            for p in m.owned() {
                if !owners.insert(p.clone()) {
                    bail!("{p:?} owned twice");
                }
            }
        }
        if owned.iter().sum::<usize>() == 40_000 && owned.iter().all(|&n| n >= 13_333) {
            break;
        }
        if std::time::Instant::now() > deadline {
            bail!("not settled: {owned:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let described = describe(addr)?;
    assert_eq!(described.state, "Stable");
    assert_eq!(described.assignment_epoch, described.group_epoch);
    server.kill()?;
    Ok(())
}
