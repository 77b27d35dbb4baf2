//! Graceful shutdown of the real binary: SIGTERM while a JoinGroup is held answers it
//! COORDINATOR_NOT_AVAILABLE (so the client retries) and exits 0; a second signal exits at
//! once.

mod support;

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use muster_protocol::*;
use support::{start_with, Conn};

fn join(member_id: &str) -> Request {
    Request::JoinGroup(JoinGroupRequest {
        group_id: "shutdown-g".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 60_000,
        topics: vec!["t".into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: vec![],
        }],
        owned_partitions: vec![],
        reason: None,
    })
}

/// Sends `name` (e.g. "TERM") to the child with kill(1): the workspace forbids `unsafe`, so
/// no direct libc call.
fn signal(child: &std::process::Child, name: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .expect("kill(1) runs");
    assert!(status.success(), "kill -{name} failed");
}

fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Result<std::process::ExitStatus> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            bail!("musterd did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigterm_answers_held_joins_and_exits_zero() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-sigterm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // A long initial delay keeps the JoinGroup held at the barrier.
    let (mut child, addr) = start_with(&dir, &["--initial-rebalance-delay-ms", "60000"])?;
    let mut conn = Conn::connect(addr)?;
    let member_id = match conn.call(join(""))? {
        Response::JoinGroup(j) if j.error_code == ErrorCode::MemberIdRequired.code() => j.member_id,
        other => bail!("unexpected {other:?}"),
    };
    let held = conn.send(join(&member_id))?;
    // Both requests reach the group through the supervisor in order: once DescribeGroups is
    // answered, the JoinGroup is held at the barrier (no sleeping and hoping).
    match conn.call(Request::DescribeGroups(DescribeGroupsRequest {
        group_ids: vec!["shutdown-g".into()],
    }))? {
        Response::DescribeGroups(d) => {
            assert_eq!(d.groups[0].state, "PreparingRebalance", "{d:?}");
        }
        other => bail!("unexpected {other:?}"),
    }
    signal(&child, "TERM");
    let answer = conn.recv()?;
    assert_eq!(answer.correlation_id, held);
    assert_eq!(
        answer.response.error_code(),
        ErrorCode::CoordinatorNotAvailable.code(),
        "{answer:?}"
    );
    let status = wait_exit(&mut child, Duration::from_secs(10))?;
    assert!(status.success(), "exit status {status:?}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_second_signal_exits_at_once() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-sigint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // A shutdown that would wait: a long shutdown timeout and a client that never reads.
    let (mut child, _addr) = start_with(&dir, &["--shutdown-timeout-ms", "60000"])?;
    signal(&child, "INT");
    signal(&child, "INT");
    let status = wait_exit(&mut child, Duration::from_secs(10))?;
    // Either the graceful path won the race (exit 0) or the second signal cut it short (130).
    assert!(
        matches!(status.code(), Some(0 | 130)),
        "exit status {status:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// SIGTERM writes the offset history held back for `offset_history_flush_ms` before the store
/// closes: after a restart every acknowledged commit is in the history, although none was due
/// to be written (a minute's interval) when the signal came.
#[test]
fn sigterm_writes_the_offset_history_held_back() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-sigterm-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let flush = ["--offset-history-flush-ms", "60000"];
    let (mut child, addr) = start_with(&dir, &flush)?;
    let mut conn = Conn::connect(addr)?;
    for (partition, offset) in [(0, 10), (1, 20), (0, 11)] {
        match conn.call(Request::OffsetCommit(OffsetCommitRequest {
            group_id: "history-g".into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: vec![OffsetCommitTopic {
                topic: "t".into(),
                partitions: vec![OffsetCommitPartition {
                    partition,
                    offset,
                    metadata: None,
                }],
            }],
        }))? {
            Response::OffsetCommit(r) if r.topics[0].partitions[0].error_code == 0 => {}
            other => bail!("OffsetCommit: {other:?}"),
        }
    }
    signal(&child, "TERM");
    let status = wait_exit(&mut child, Duration::from_secs(10))?;
    assert!(status.success(), "exit status {status:?}");

    let (mut child, addr) = start_with(&dir, &flush)?;
    let mut conn = Conn::connect(addr)?;
    let history = match conn.call(Request::OffsetHistory(OffsetHistoryRequest {
        group_id: "history-g".into(),
        topic: None,
        partition: None,
        limit: 0,
    }))? {
        Response::OffsetHistory(r) if r.error_code == 0 => r,
        other => bail!("OffsetHistory: {other:?}"),
    };
    let Some(topic) = history.topics.first() else {
        bail!("no offset history after the restart: the held-back entries were lost");
    };
    let seen: Vec<(i32, Vec<(u64, i64)>)> = topic
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition,
                p.entries.iter().map(|e| (e.seq, e.offset)).collect(),
            )
        })
        .collect();
    assert_eq!(seen, vec![(0, vec![(1, 11), (0, 10)]), (1, vec![(0, 20)])]);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
