//! Parked groups (issue #23) against the real `musterd` binary, over TCP: an idle Empty group
//! is parked (the `muster_groups_parked` gauge says so) and every kind of request — from the
//! connection that cached its old inbox or from a new one — is answered as a live group's
//! would be: offsets and their history intact, through a commit, a fetch, a join and leave,
//! DescribeGroups, ListGroups and DeleteGroups; requests pipelined across the instant it parks
//! are all answered; and a restart loads parked groups parked, with their data — 12 000 of
//! them, each answered with its own offset, history and state after the restart.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use muster_protocol::*;
use support::Conn;

const TOPIC: &str = "events";
/// Short, so that the tests wait little for a group to park (the history flush, 200 ms by
/// default, comes first: a group parks only with its history written).
const PARK_AFTER_MS: &str = "100";

/// The server process, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(data_dir: &Path) -> Result<Server> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let admin: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let admin_flag = admin.to_string();
    let (child, addr) = support::start_with(
        data_dir,
        &[
            "--admin-listen",
            &admin_flag,
            "--initial-rebalance-delay-ms",
            "0",
            "--park-after-ms",
            PARK_AFTER_MS,
        ],
    )?;
    Ok(Server { child, addr, admin })
}

/// The value of the gauge `name` on the admin listener's /metrics (0 when not shown).
fn metric(admin: SocketAddr, name: &str) -> Result<f64> {
    let mut stream = TcpStream::connect(admin)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    Ok(raw
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0))
}

/// Waits (10 ms at a time, at most 10 s) until `parked` groups are parked.
fn parked(server: &Server, parked: f64) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = metric(server.admin, "muster_groups_parked")?;
        if now == parked {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{now} groups parked, not {parked}, within 10 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn create_topic(conn: &mut Conn) -> Result<()> {
    match conn.call(Request::CreateTopics(CreateTopicsRequest {
        topics: vec![TopicInfo {
            topic: TOPIC.into(),
            partitions: 2,
        }],
    }))? {
        Response::CreateTopics(r) if r.results.iter().all(|t| t.error_code == 0) => Ok(()),
        other => bail!("CreateTopics: {other:?}"),
    }
}

fn commit_request(group: &str, offset: i64) -> Request {
    Request::OffsetCommit(OffsetCommitRequest {
        group_id: group.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            topic: TOPIC.into(),
            partitions: vec![OffsetCommitPartition {
                partition: 0,
                offset,
                metadata: Some(format!("at {offset}")),
            }],
        }],
    })
}

fn commit(conn: &mut Conn, group: &str, offset: i64) -> Result<()> {
    match conn.call(commit_request(group, offset))? {
        Response::OffsetCommit(r) if r.topics[0].partitions[0].error_code == 0 => Ok(()),
        other => bail!("OffsetCommit: {other:?}"),
    }
}

fn fetch_request(group: &str) -> Request {
    Request::OffsetFetch(OffsetFetchRequest {
        group_id: group.into(),
        topics: None,
    })
}

/// The group's committed offset of partition 0 (-1: none).
fn fetched(conn: &mut Conn, group: &str) -> Result<i64> {
    match conn.call(fetch_request(group))? {
        Response::OffsetFetch(r) if r.error_code == 0 => Ok(r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition == 0)
            .map_or(-1, |p| p.offset)),
        other => bail!("OffsetFetch: {other:?}"),
    }
}

/// Partition 0's history, newest first, as offsets.
fn history(conn: &mut Conn, group: &str) -> Result<Vec<i64>> {
    match conn.call(Request::OffsetHistory(OffsetHistoryRequest {
        group_id: group.into(),
        topic: Some(TOPIC.into()),
        partition: Some(0),
        limit: 100,
    }))? {
        Response::OffsetHistory(r) if r.error_code == 0 => Ok(r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .flat_map(|p| &p.entries)
            .map(|e| e.offset)
            .collect()),
        other => bail!("OffsetHistory: {other:?}"),
    }
}

fn described_state(conn: &mut Conn, group: &str) -> Result<String> {
    match conn.call(Request::DescribeGroups(DescribeGroupsRequest {
        group_ids: vec![group.into()],
    }))? {
        Response::DescribeGroups(r) if r.groups[0].error_code == 0 => Ok(r.groups[0].state.clone()),
        other => bail!("DescribeGroups: {other:?}"),
    }
}

fn listed(conn: &mut Conn) -> Result<Vec<(String, String)>> {
    match conn.call(Request::ListGroups(ListGroupsRequest {
        states: Vec::new(),
    }))? {
        Response::ListGroups(r) if r.error_code == 0 => {
            let mut groups: Vec<_> = r
                .groups
                .into_iter()
                .map(|g| (g.group_id, g.state))
                .collect();
            groups.sort();
            Ok(groups)
        }
        other => bail!("ListGroups: {other:?}"),
    }
}

/// One member joins `group` (a single member: the rebalance completes at once) and leaves;
/// the generation it joined.
fn join_and_leave(conn: &mut Conn, group: &str) -> Result<i32> {
    let join = |member_id: String| {
        Request::JoinGroup(JoinGroupRequest {
            group_id: group.into(),
            member_id,
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            topics: vec![TOPIC.into()],
            assignors: vec![AssignorMetadata {
                name: "range".into(),
                user_data: Vec::new(),
            }],
            ..JoinGroupRequest::default()
        })
    };
    let member_id = match conn.call(join(String::new()))? {
        Response::JoinGroup(r) if r.error_code == ErrorCode::MemberIdRequired.code() => r.member_id,
        other => bail!("first JoinGroup: {other:?}"),
    };
    let generation = match conn.call(join(member_id.clone()))? {
        Response::JoinGroup(r) if r.error_code == 0 => r.generation_id,
        other => bail!("JoinGroup: {other:?}"),
    };
    match conn.call(Request::LeaveGroup(LeaveGroupRequest {
        group_id: group.into(),
        members: vec![LeavingMember {
            member_id,
            group_instance_id: None,
            reason: None,
        }],
    }))? {
        Response::LeaveGroup(r) if r.error_code == 0 => Ok(generation),
        other => bail!("LeaveGroup: {other:?}"),
    }
}

#[test]
fn a_parked_group_answers_every_request_as_a_live_one() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path())?;
    let mut conn = Conn::connect(server.addr)?;
    create_topic(&mut conn)?;
    commit(&mut conn, "g", 5)?;
    parked(&server, 1.0)?;

    // The connection that cached the group's inbox: a fetch, then a commit that wakes it.
    assert_eq!(fetched(&mut conn, "g")?, 5);
    commit(&mut conn, "g", 6)?;
    assert_eq!(fetched(&mut conn, "g")?, 6);
    parked(&server, 1.0)?;

    // A new connection: queries are answered parked, with the history intact.
    let mut other = Conn::connect(server.addr)?;
    assert_eq!(fetched(&mut other, "g")?, 6);
    assert_eq!(history(&mut other, "g")?, vec![6, 5]);
    assert_eq!(described_state(&mut other, "g")?, "Empty");
    assert_eq!(listed(&mut other)?, vec![("g".into(), "Empty".into())]);
    parked(&server, 1.0)?;

    // A join wakes it (a member: not parked), the leave leaves it Empty and it parks again,
    // its offsets untouched.
    join_and_leave(&mut other, "g")?;
    parked(&server, 1.0)?;
    assert_eq!(fetched(&mut conn, "g")?, 6);
    assert_eq!(history(&mut conn, "g")?, vec![6, 5]);

    // DeleteGroups wakes it and deletes it.
    match other.call(Request::DeleteGroups(DeleteGroupsRequest {
        group_ids: vec!["g".into()],
    }))? {
        Response::DeleteGroups(r) if r.results[0].error_code == 0 => {}
        other => bail!("DeleteGroups: {other:?}"),
    }
    parked(&server, 0.0)?;
    assert_eq!(fetched(&mut conn, "g")?, -1);
    assert_eq!(listed(&mut other)?, Vec::new());
    Ok(())
}

#[test]
fn requests_pipelined_across_the_park_are_all_answered() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path())?;
    let mut conn = Conn::connect(server.addr)?;
    create_topic(&mut conn)?;
    commit(&mut conn, "g", 0)?;
    let park_after: u64 = PARK_AFTER_MS.parse()?;
    let mut offset = 0;
    // Bursts of pipelined commits and fetches spaced around the park, some of them reaching
    // the group's actor as it parks: none may be answered COORDINATOR_NOT_AVAILABLE.
    for round in 0..12u64 {
        std::thread::sleep(Duration::from_millis(250 + park_after + round % 3 * 5));
        let mut sent = Vec::new();
        for _ in 0..4 {
            offset += 1;
            sent.push(conn.send(commit_request("g", offset))?);
            sent.push(conn.send(fetch_request("g"))?);
        }
        for _ in &sent {
            let frame = conn.recv()?;
            anyhow::ensure!(
                sent.contains(&frame.correlation_id),
                "an answer to {} not sent",
                frame.correlation_id
            );
            anyhow::ensure!(
                frame.response.error_code() == 0,
                "round {round}: {:?}",
                frame.response
            );
        }
    }
    Ok(())
}

#[test]
fn a_restart_loads_idle_groups_parked_with_their_data() -> Result<()> {
    let dir = tempfile::tempdir()?;
    {
        let server = start(dir.path())?;
        let mut conn = Conn::connect(server.addr)?;
        create_topic(&mut conn)?;
        for (i, group) in ["a", "b", "c"].into_iter().enumerate() {
            let offset = 10 * (i as i64 + 1);
            commit(&mut conn, group, offset)?;
            commit(&mut conn, group, offset + 1)?;
        }
        // Every group parked: its history written (a parked group has none held back).
        parked(&server, 3.0)?;
    }
    let server = start(dir.path())?;
    let mut conn = Conn::connect(server.addr)?;
    // Answered once the supervisor has loaded every group (it loads before it handles any
    // message); the gauge is read at once, long before a group loaded live could park.
    assert_eq!(fetched(&mut conn, "a")?, 11);
    let loaded = metric(server.admin, "muster_groups_parked")?;
    assert_eq!(loaded, 3.0, "loaded parked");
    for (i, group) in ["a", "b", "c"].into_iter().enumerate() {
        let offset = 10 * (i as i64 + 1);
        assert_eq!(fetched(&mut conn, group)?, offset + 1);
        assert_eq!(history(&mut conn, group)?, vec![offset + 1, offset]);
    }
    // A commit wakes one; the others stay parked.
    commit(&mut conn, "b", 99).context("commit to a group loaded parked")?;
    assert_eq!(fetched(&mut conn, "b")?, 99);
    parked(&server, 3.0)?;
    Ok(())
}

/// Sends `requests` pipelined, `window` at a time, and returns their answers in order.
fn pipelined(conn: &mut Conn, requests: Vec<Request>, window: usize) -> Result<Vec<Response>> {
    let mut answers = Vec::with_capacity(requests.len());
    let mut requests = requests.into_iter().peekable();
    while requests.peek().is_some() {
        let sent: Vec<u32> = requests
            .by_ref()
            .take(window)
            .map(|r| conn.send(r))
            .collect::<Result<_>>()?;
        let mut frames: Vec<_> = (0..sent.len())
            .map(|_| conn.recv())
            .collect::<Result<_>>()?;
        frames.sort_by_key(|f| f.correlation_id);
        anyhow::ensure!(
            frames
                .iter()
                .map(|f| f.correlation_id)
                .eq(sent.iter().copied()),
            "answers to requests not sent"
        );
        answers.extend(frames.into_iter().map(|f| f.response));
    }
    Ok(answers)
}

#[test]
fn a_restart_loads_twelve_thousand_idle_groups_parked_and_answers_each() -> Result<()> {
    const GROUPS: usize = 12_000;
    let id = |i: usize| format!("idle-{i:05}");
    let dir = tempfile::tempdir()?;
    // The generation a group's first member joins, its second (one join and leave later).
    let mut first = 0;
    let second;
    {
        let server = start(dir.path())?;
        let mut conn = Conn::connect(server.addr)?;
        create_topic(&mut conn)?;
        // Each group one simple commit of its own offset; a few also had a member, who left
        // (a recorded Empty group, at a later generation).
        let commits = (0..GROUPS)
            .map(|i| commit_request(&id(i), i as i64))
            .collect();
        for answer in pipelined(&mut conn, commits, 500)? {
            anyhow::ensure!(answer.error_code() == 0, "{answer:?}");
        }
        for i in (0..GROUPS).step_by(1_000) {
            first = join_and_leave(&mut conn, &id(i))?;
        }
        second = join_and_leave(&mut conn, &id(2_000))?;
        // Every group parked: its history written.
        parked(&server, GROUPS as f64)?;
    }
    let server = start(dir.path())?;
    let mut conn = Conn::connect(server.addr)?;
    assert_eq!(fetched(&mut conn, &id(0))?, 0);
    assert_eq!(
        metric(server.admin, "muster_groups_parked")?,
        GROUPS as f64,
        "every group loaded parked"
    );
    // Each answers its own offset, read back from the store, and stays parked.
    let fetches = (0..GROUPS).map(|i| fetch_request(&id(i))).collect();
    for (i, answer) in pipelined(&mut conn, fetches, 500)?.into_iter().enumerate() {
        match answer {
            Response::OffsetFetch(r) if r.error_code == 0 => {
                let offsets: Vec<i64> = r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.offset)
                    .collect();
                anyhow::ensure!(offsets == [i as i64], "{}: {offsets:?}", id(i));
            }
            other => bail!("{}: {other:?}", id(i)),
        }
    }
    assert_eq!(metric(server.admin, "muster_groups_parked")?, GROUPS as f64);
    for i in [0, 1, 999, 1_000, GROUPS - 1] {
        assert_eq!(history(&mut conn, &id(i))?, vec![i as i64]);
        assert_eq!(described_state(&mut conn, &id(i))?, "Empty");
    }
    // A group that had members kept its record: a new member joins at the generation it
    // would have without the restart, not at a new group's first.
    let step = second - first;
    assert!(step > 0);
    assert_eq!(join_and_leave(&mut conn, &id(1_000))?, first + step);
    assert_eq!(join_and_leave(&mut conn, &id(2_000))?, second + step);
    assert_eq!(
        join_and_leave(&mut conn, &id(1))?,
        first,
        "never had a member"
    );
    // A commit wakes one, which answers as before and parks again.
    commit(&mut conn, &id(7), 700)?;
    assert_eq!(fetched(&mut conn, &id(7))?, 700);
    assert_eq!(history(&mut conn, &id(7))?, vec![700, 7]);
    parked(&server, GROUPS as f64)?;
    Ok(())
}
