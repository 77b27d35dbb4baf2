//! Consumer-protocol members (`GroupProtocol::Consumer`) against the real server on
//! `127.0.0.1:0`, with a short heartbeat interval and session timeout: members joining and
//! leaving share a topic without a partition ever having two owners (replaying every member's
//! events), commits fenced by the member epoch, and a member that dies without leaving losing
//! its partitions to the others when its session expires.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{create_topic, partitions, wait_converged, Harness, Kind, Log};
use muster_client::{GroupProtocol, MemberConfig, TopicPartition};
use muster_coordinator::storage::MemoryStore;
use muster_coordinator::{ConsumerConfig, GroupConfig};
use muster_server::{spawn, ServerOptions, ServerThread};

/// A server whose consumer-protocol members heartbeat every 50 ms and expire after 600 ms.
fn start_server() -> ServerThread {
    let mut options = ServerOptions::new("127.0.0.1:0", Arc::new(MemoryStore::new()));
    options.group = GroupConfig {
        min_session_timeout_ms: 100,
        initial_rebalance_delay_ms: 0,
        consumer: ConsumerConfig {
            heartbeat_interval_ms: 50,
            session_timeout_ms: 600,
            ..ConsumerConfig::default()
        },
        ..GroupConfig::default()
    };
    options.workers = 2;
    spawn(options).expect("server starts")
}

fn consumer(group: &str, assignor: &str) -> MemberConfig {
    MemberConfig::new(group, ["orders"])
        .group_protocol(GroupProtocol::Consumer)
        .server_assignor(assignor)
        .rebalance_timeout(Duration::from_secs(3))
}

/// Members join one by one, then one leaves: each change moves only what it must, every
/// partition stays owned once, and the survivors converge on the whole topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_share_a_topic_and_a_partition_never_has_two_owners() {
    let server = start_server();
    create_topic(&server, "orders", 6).await;
    let all = partitions("orders", 6);
    let log = Log::default();
    let a = Harness::start(&server, "a", consumer("shared", "uniform"), &log).await;
    wait_converged(&[&a], &all).await;
    let b = Harness::start(&server, "b", consumer("shared", "uniform"), &log).await;
    wait_converged(&[&a, &b], &all).await;
    let c = Harness::start(&server, "c", consumer("shared", "uniform"), &log).await;
    wait_converged(&[&a, &b, &c], &all).await;
    for member in [&a, &b, &c] {
        assert_eq!(
            member.snapshot().assignment.len(),
            2,
            "{:?}",
            member.snapshot()
        );
    }
    b.leave().await;
    wait_converged(&[&a, &c], &all).await;
    let owners = log.check_single_ownership();
    assert_eq!(owners.keys().cloned().collect::<BTreeSet<_>>(), all);
    assert!(
        log.entries()
            .iter()
            .all(|e| e.kind != Kind::Lost && e.kind != Kind::Error),
        "{:#?}",
        log.entries()
    );
    a.leave().await;
    c.leave().await;
}

/// A commit carries the member epoch; the group's offsets are then there to fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_are_fenced_by_the_member_epoch() {
    let server = start_server();
    create_topic(&server, "orders", 2).await;
    let conn = common::connect(&server, "m").await;
    let (member, _events) = consumer("offsets", "uniform").start(conn).unwrap();
    let state = member
        .wait_for_state(common::PATIENCE, |s| {
            s.phase == muster_client::Phase::Stable && s.assignment.len() == 2
        })
        .await
        .unwrap();
    assert!(state.generation_id > 0, "{state:?}");
    let tp = TopicPartition::new("orders", 1);
    member.commit_offsets([(tp.clone(), 42_i64)]).await.unwrap();
    let fetched = member
        .fetch_offsets(Some(std::slice::from_ref(&tp)))
        .await
        .unwrap();
    assert_eq!(fetched[&tp].offset, 42);
    member.close().await.unwrap();
}

/// A member that dies without leaving is removed when its session expires, and the other
/// takes its partitions. (The log cannot replay single ownership here: the dead member never
/// says it stopped.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_members_partitions_move_when_its_session_expires() {
    let server = start_server();
    create_topic(&server, "orders", 4).await;
    let all = partitions("orders", 4);
    let log = Log::default();
    let a = Harness::start(&server, "a", consumer("expiry", "uniform"), &log).await;
    let b = Harness::start(&server, "b", consumer("expiry", "uniform"), &log).await;
    wait_converged(&[&a, &b], &all).await;
    b.kill().await;
    wait_converged(&[&a], &all).await;
    a.leave().await;
}
