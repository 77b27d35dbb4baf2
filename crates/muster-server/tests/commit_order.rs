//! Pipelined OffsetCommits of one partition on one connection: answered in order, and the
//! last one is what OffsetFetch (memory) and a restart (disk) show. The offsets a group keeps
//! in memory must follow submission order, whatever order the store's completions are handled
//! in.

mod support;

use anyhow::{bail, Result};
use muster_protocol::*;
use support::{start_with, Conn};

fn commit(offset: i64) -> Request {
    Request::OffsetCommit(OffsetCommitRequest {
        group_id: "order-g".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            topic: "t".into(),
            partitions: vec![OffsetCommitPartition {
                partition: 0,
                offset,
                metadata: None,
            }],
        }],
    })
}

fn fetched(conn: &mut Conn) -> Result<i64> {
    match conn.call(Request::OffsetFetch(OffsetFetchRequest {
        group_id: "order-g".into(),
        topics: None,
    }))? {
        Response::OffsetFetch(r) => Ok(r.topics[0].partitions[0].offset),
        other => bail!("OffsetFetch: {other:?}"),
    }
}

fn run(store: &str) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-order-{store}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let args = ["--store", store];
    let (mut child, addr) = start_with(&dir, &args)?;
    let mut conn = Conn::connect(addr)?;
    for round in 0..20 {
        let base = round * 1_000;
        let sent: Vec<u32> = (1..=64)
            .map(|i| conn.send(commit(base + i)))
            .collect::<Result<_>>()?;
        // Answers may come in any order (protocol §3): matched by correlation id.
        let mut answered = Vec::new();
        for _ in &sent {
            let frame = conn.recv()?;
            assert_eq!(frame.response.error_code(), 0, "{frame:?}");
            answered.push(frame.correlation_id);
        }
        answered.sort_unstable();
        assert_eq!(answered, sent, "every commit answered once");
        assert_eq!(fetched(&mut conn)?, base + 64, "round {round} ({store})");
    }
    if store == "redb" {
        child.kill()?;
        let _ = child.wait();
        let (restarted, addr) = start_with(&dir, &args)?;
        child = restarted;
        let mut conn = Conn::connect(addr)?;
        assert_eq!(fetched(&mut conn)?, 19_064, "on disk");
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn pipelined_commits_of_one_partition_end_at_the_last_memory_store() -> Result<()> {
    run("memory")
}

#[test]
fn pipelined_commits_of_one_partition_end_at_the_last_redb_store() -> Result<()> {
    run("redb")
}
