//! The admin API against the real server: topics, groups, offsets.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use muster_client::{Admin, ErrorCode, GroupState, TopicInfo, TopicPartition};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_raised_and_described() {
    let server = start_server();
    let admin = Admin::new(connect(&server, "admin").await);
    admin.create_topic("orders", 3).await.unwrap();
    assert_eq!(
        admin.describe_topic("orders").await.unwrap(),
        Some(TopicInfo {
            topic: "orders".into(),
            partitions: 3
        })
    );
    // Raising works, lowering does not, the same count changes nothing.
    admin.create_topic("orders", 5).await.unwrap();
    admin.create_topic("orders", 5).await.unwrap();
    let lower = admin.create_topic("orders", 2).await.unwrap_err();
    assert_eq!(lower.error_code(), Some(ErrorCode::InvalidPartitions));
    let bad_name = admin.create_topic("no spaces", 1).await.unwrap_err();
    assert_eq!(bad_name.error_code(), Some(ErrorCode::InvalidTopic));
    // ensure_topic leaves an existing topic alone.
    assert_eq!(admin.ensure_topic("orders", 9).await.unwrap(), 5);
    assert_eq!(admin.ensure_topic("audit", 2).await.unwrap(), 2);
    // Batch: one result per topic.
    let results = admin
        .create_topics(vec![
            TopicInfo {
                topic: "a".into(),
                partitions: 1,
            },
            TopicInfo {
                topic: "b".into(),
                partitions: 0,
            },
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].error_code, 0);
    assert_eq!(results[1].error_code, ErrorCode::InvalidPartitions.code());
    let all = admin.describe_topics(None).await.unwrap();
    let names: Vec<&str> = all.iter().map(|t| t.topic.as_str()).collect();
    for expected in ["a", "audit", "orders"] {
        assert!(names.contains(&expected), "{names:?}");
    }
    assert_eq!(admin.describe_topic("missing").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_are_listed_described_and_deleted() {
    let server = start_server();
    create_topic(&server, "work", 2).await;
    let admin = Admin::new(connect(&server, "admin").await);
    // An Empty group, made by setting its offsets, and a Stable one with a member.
    admin
        .set_offsets(
            "idle",
            [
                (TopicPartition::new("work", 0), 10_i64),
                (TopicPartition::new("work", 1), 20_i64),
            ],
        )
        .await
        .unwrap();
    let log = Log::default();
    let member = Harness::start(&server, "m", fast_member("busy", &["work"], "range"), &log).await;
    wait_converged(&[&member], &partitions("work", 2)).await;

    let stable = admin.list_groups(&[GroupState::Stable]).await.unwrap();
    assert_eq!(
        stable
            .iter()
            .map(|g| g.group_id.as_str())
            .collect::<Vec<_>>(),
        ["busy"]
    );
    assert_eq!(stable[0].members, 1);
    let empty = admin.list_groups(&[GroupState::Empty]).await.unwrap();
    assert_eq!(
        empty
            .iter()
            .map(|g| g.group_id.as_str())
            .collect::<Vec<_>>(),
        ["idle"]
    );
    let mut all: Vec<String> = admin
        .list_groups(&[])
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.group_id)
        .collect();
    all.sort();
    assert_eq!(all, ["busy", "idle"]);

    let busy = admin.describe_group("busy").await.unwrap();
    assert_eq!(
        busy.state.parse::<GroupState>().unwrap(),
        GroupState::Stable
    );
    assert_eq!(busy.members.len(), 1);
    assert_eq!(busy.members[0].client_id, "m");
    assert_eq!(
        busy.members[0]
            .assignment
            .iter()
            .map(|t| t.partitions.len())
            .sum::<usize>(),
        2
    );
    let unknown = admin.describe_group("nobody").await.unwrap();
    assert_eq!(unknown.state, "Dead");

    let offsets = admin.fetch_offsets("idle", None).await.unwrap();
    assert_eq!(offsets[&TopicPartition::new("work", 1)].offset, 20);

    let refused = admin.delete_group("busy").await.unwrap_err();
    assert_eq!(refused.error_code(), Some(ErrorCode::NonEmptyGroup));
    let missing = admin.delete_group("nobody").await.unwrap_err();
    assert_eq!(missing.error_code(), Some(ErrorCode::GroupIdNotFound));
    admin.delete_group("idle").await.unwrap();
    assert!(
        admin.fetch_offsets("idle", None).await.unwrap().is_empty(),
        "offsets went with the group"
    );
    member.leave().await;
    // Empty now: deletable.
    let results = admin.delete_groups(&["busy"]).await.unwrap();
    assert_eq!(results[0].error_code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_and_the_cluster_are_this_server() {
    let server = start_server();
    let admin = Admin::new(connect(&server, "admin").await);
    let coordinator = admin.find_coordinator("orders").await.unwrap();
    assert_eq!(coordinator.address(), server.local_addr().to_string());
    assert!(!coordinator.node_id.is_empty());
    // The address it names is one a client can connect to: the same server.
    let again = Admin::new(
        muster_client::Connection::connect(
            muster_client::ConnectionConfig::new(coordinator.address()).client_id("again"),
        )
        .await
        .unwrap(),
    );
    assert_eq!(again.find_coordinator("orders").await.unwrap(), coordinator);

    let invalid = admin.find_coordinator("").await.unwrap_err();
    assert_eq!(invalid.error_code(), Some(ErrorCode::InvalidGroupId));
    assert!(!invalid.is_retriable());

    let cluster = admin.describe_cluster().await.unwrap();
    assert_eq!((cluster.name.as_str(), cluster.shards), ("muster", 1));
    assert_eq!(
        cluster.nodes,
        vec![muster_client::NodeShards {
            node: coordinator,
            shards: vec![0],
        }]
    );
}
