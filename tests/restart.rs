//! Restart without rebalance (durability issue): a Stable group survives a coordinator restart
//! on the same data dir. Its members' heartbeats with the old generation answer NONE, SyncGroup
//! returns their assignment, DescribeGroups shows Stable with the same generation, and
//! committed offsets are still there.

mod common;

use std::sync::Arc;

use common::*;
use muster_coordinator::storage::RedbStore;
use muster_protocol::*;
use muster_server::{spawn, ServerOptions, ServerThread};

fn start_on(dir: &std::path::Path) -> ServerThread {
    let store = RedbStore::open(dir).expect("data dir opens");
    let mut options = ServerOptions::new("127.0.0.1:0", Arc::new(store));
    // Both members land in one generation: the first barrier waits briefly for the second.
    options.group = muster_coordinator::GroupConfig {
        initial_rebalance_delay_ms: 200,
        ..fast_config()
    };
    options.workers = 2;
    spawn(options).expect("server starts")
}

fn assignment(member: &str, partitions: Vec<i32>) -> MemberAssignment {
    MemberAssignment {
        member_id: member.into(),
        partitions: vec![TopicPartitions {
            topic: "orders".into(),
            partitions,
        }],
        user_data: vec![7],
    }
}

#[tokio::test]
async fn stable_group_survives_restart_without_rebalance() -> anyhow::Result<()> {
    let dir = tempdir();
    let server = start_on(&dir);
    let addr = server.local_addr();

    // Two members form a Stable group.
    let mut a = Conn::connect(addr, "a").await?;
    let mut b = Conn::connect(addr, "b").await?;
    let a_id = as_join(a.call(join_request("g", "", 30_000, 5_000)).await?).member_id;
    let b_id = as_join(b.call(join_request("g", "", 30_000, 5_000)).await?).member_id;
    let a_join = a.send(join_request("g", &a_id, 30_000, 5_000)).await?;
    let b_join = b.send(join_request("g", &b_id, 30_000, 5_000)).await?;
    let (a_join, b_join) = (as_join(wait(a_join).await?), as_join(wait(b_join).await?));
    let generation = a_join.generation_id;
    assert_eq!(generation, b_join.generation_id);
    let leader = if a_join.leader_id == a_id {
        &mut a
    } else {
        &mut b
    };
    let plan = vec![assignment(&a_id, vec![0, 1]), assignment(&b_id, vec![2])];
    let leader_id = a_join.leader_id.clone();
    let synced = as_sync(
        leader
            .call(sync_request("g", generation, &leader_id, plan))
            .await?,
    );
    assert_eq!(synced.error_code, 0);
    let follower_id = if leader_id == a_id { &b_id } else { &a_id };
    let follower = if leader_id == a_id { &mut b } else { &mut a };
    let synced = as_sync(
        follower
            .call(sync_request("g", generation, follower_id, vec![]))
            .await?,
    );
    assert_eq!(synced.error_code, 0);
    let commit = a
        .call(Request::OffsetCommit(OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: generation,
            member_id: a_id.clone(),
            group_instance_id: None,
            topics: vec![OffsetCommitTopic {
                topic: "orders".into(),
                partitions: vec![OffsetCommitPartition {
                    partition: 1,
                    offset: 42,
                    metadata: Some("m".into()),
                }],
            }],
        }))
        .await?;
    assert!(
        matches!(commit, Response::OffsetCommit(ref r) if r.error_code == 0),
        "{commit:?}"
    );

    drop((a, b));
    server.stop();

    // Same data dir, new process state.
    let server = start_on(&dir);
    let addr = server.local_addr();
    let mut a = Conn::connect(addr, "a").await?;
    let mut b = Conn::connect(addr, "b").await?;
    assert_eq!(
        as_heartbeat(a.call(heartbeat("g", generation, &a_id)).await?),
        0
    );
    assert_eq!(
        as_heartbeat(b.call(heartbeat("g", generation, &b_id)).await?),
        0
    );
    let a_sync = as_sync(a.call(sync_request("g", generation, &a_id, vec![])).await?);
    assert_eq!(a_sync.error_code, 0);
    assert_eq!(a_sync.partitions[0].partitions, vec![0, 1]);
    assert_eq!(a_sync.user_data, vec![7]);
    let b_sync = as_sync(b.call(sync_request("g", generation, &b_id, vec![])).await?);
    assert_eq!(b_sync.partitions[0].partitions, vec![2]);

    let described = a
        .call(Request::DescribeGroups(DescribeGroupsRequest {
            group_ids: vec!["g".into()],
        }))
        .await?;
    let Response::DescribeGroups(described) = described else {
        panic!("unexpected {described:?}");
    };
    let group = &described.groups[0];
    assert_eq!(group.state, "Stable");
    assert_eq!(group.generation_id, generation);
    assert_eq!(group.leader_id, leader_id);
    assert_eq!(group.members.len(), 2);

    let fetched = a
        .call(Request::OffsetFetch(OffsetFetchRequest {
            group_id: "g".into(),
            topics: None,
        }))
        .await?;
    let Response::OffsetFetch(fetched) = fetched else {
        panic!("unexpected {fetched:?}");
    };
    assert_eq!(fetched.topics[0].partitions[0].offset, 42);
    assert_eq!(
        fetched.topics[0].partitions[0].metadata.as_deref(),
        Some("m")
    );
    drop((a, b));
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn data_dir_in_use_is_refused() -> anyhow::Result<()> {
    let dir = tempdir();
    let first = RedbStore::open(&dir)?;
    let second = RedbStore::open(&dir);
    let message = match second {
        Ok(_) => panic!("a data dir in use must not open twice"),
        Err(e) => e.to_string(),
    };
    assert!(message.contains(&dir.display().to_string()), "{message}");
    drop(first);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "muster-restart-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
