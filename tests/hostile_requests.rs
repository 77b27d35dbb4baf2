//! Hostile requests over real TCP (issue #11, protocol §6.18 "Limits"): every request that is
//! oversized or amplifying gets a clear error (REQUEST_LIMIT_EXCEEDED, RESOURCE_LIMIT_REACHED or
//! the Kafka code that fits), never a silent close or UNKNOWN_SERVER_ERROR, and another group's
//! member keeps heartbeating while it happens. One test watches the process's memory: the
//! server runs in this process, so its resident set is ours.

mod common;

use common::*;
use muster_coordinator::GroupConfig;
use muster_protocol::*;

const OVER: i16 = ErrorCode::RequestLimitExceeded.code();
const FULL: i16 = ErrorCode::ResourceLimitReached.code();

/// A Stable one-member group whose heartbeats must keep working whatever else is sent.
async fn bystander(server: &muster_server::ServerThread) -> anyhow::Result<Member> {
    let mut members = form_group(server.local_addr(), "calm", 1, LONG_MS, LONG_MS).await?;
    Ok(members.remove(0))
}

async fn still_heartbeats(calm: &mut Member) -> anyhow::Result<()> {
    assert_eq!(calm.heartbeat().await?, 0, "the other group's heartbeat");
    Ok(())
}

fn error_code_of(r: Response) -> i16 {
    match r {
        Response::Error(e) => e.error_code,
        other => panic!("expected Error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_long_client_id_is_refused_at_hello_and_the_connection_stays() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut conn = Conn::connect_raw(server.local_addr()).await?;
    let refused = as_hello(conn.call(hello(1, &"c".repeat(100_000))).await?);
    assert_eq!(refused.error_code, OVER);
    let again = as_hello(conn.call(hello(1, "short")).await?);
    assert_eq!(again.error_code, 0);
    Ok(())
}

#[tokio::test]
async fn oversized_group_requests_get_clear_errors() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut calm = bystander(&server).await?;
    let mut conn = Conn::connect(server.local_addr(), "hostile").await?;

    // JoinGroup: each field over its limit.
    let long_member = join_group("h", &"m".repeat(1_000), LONG_MS, LONG_MS);
    let mut long_instance = join_group("h", "", LONG_MS, LONG_MS);
    long_instance.group_instance_id = Some("i".repeat(1_000));
    let mut slow = join_group("h", "", LONG_MS, LONG_MS);
    slow.rebalance_timeout_ms = u32::MAX;
    let mut many_assignors = join_group("h", "", LONG_MS, LONG_MS);
    many_assignors.assignors = (0..1_000)
        .map(|i| AssignorMetadata {
            name: format!("a{i}"),
            user_data: vec![],
        })
        .collect();
    let mut fat_user_data = join_group("h", "", LONG_MS, LONG_MS);
    fat_user_data.assignors[0].user_data = vec![7; 900_000];
    let mut many_topics = join_group("h", "", LONG_MS, LONG_MS);
    many_topics.topics = (0..5_000).map(|i| format!("t{i}")).collect();
    let mut long_reason = join_group("h", "", LONG_MS, LONG_MS);
    long_reason.reason = Some("r".repeat(100_000));
    for (what, req) in [
        ("member id", long_member),
        ("instance id", long_instance),
        ("rebalance timeout", slow),
        ("assignor count", many_assignors),
        ("assignor user data", fat_user_data),
        ("subscribed topics", many_topics),
        ("reason", long_reason),
    ] {
        let r = as_join(conn.call(Request::JoinGroup(req)).await?);
        assert_eq!(r.error_code, OVER, "{what}: {r:?}");
        assert!(r.member_id.is_empty(), "{what}: ids not echoed");
        still_heartbeats(&mut calm).await?;
    }
    // Nothing was created for the refused joins.
    let listed = as_list(conn.call(list_groups(&[])).await?);
    assert!(
        listed.groups.iter().all(|g| g.group_id != "h"),
        "{listed:?}"
    );

    // Heartbeat and LeaveGroup with oversized ids or reasons.
    let hb = as_heartbeat(conn.call(heartbeat("calm", 1, &"m".repeat(10_000))).await?);
    assert_eq!(hb, OVER);
    let leave = Request::LeaveGroup(LeaveGroupRequest {
        group_id: "calm".into(),
        members: vec![LeavingMember {
            member_id: calm.id.clone(),
            group_instance_id: None,
            reason: Some("r".repeat(100_000)),
        }],
    });
    let left = as_leave(conn.call(leave).await?);
    assert_eq!(left.error_code, OVER);
    still_heartbeats(&mut calm).await?;

    // Offsets: more partitions than one request may name (60 000 > 50 000; ~780 KB).
    let partitions: Vec<(&str, i32, i64, Option<String>)> =
        (0..60_000).map(|p| (TOPIC, p, 1, None)).collect();
    let committed = as_commit(conn.call(commit("offsets", -1, "", &partitions)).await?);
    assert_eq!(committed.error_code, OVER);
    let wanted: Vec<i32> = (0..60_000).collect();
    let fetched = as_fetch(conn.call(fetch("calm", Some(&[(TOPIC, &wanted)]))).await?);
    assert_eq!(fetched.error_code, OVER);
    assert!(fetched.topics.is_empty());
    let long_topic = "t".repeat(10_000);
    let committed = as_commit(
        conn.call(commit(
            "offsets",
            -1,
            "",
            &[(long_topic.as_str(), 0, 1, None)],
        ))
        .await?,
    );
    assert_eq!(committed.error_code, code(ErrorCode::InvalidTopic));
    still_heartbeats(&mut calm).await?;

    // Admin requests naming too many groups or topics.
    let ids: Vec<String> = (0..1_001).map(|i| format!("g{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(error_code_of(conn.call(describe_groups(&ids)).await?), OVER);
    assert_eq!(error_code_of(conn.call(delete_groups(&ids)).await?), OVER);
    let topics: Vec<(&str, i32)> = ids.iter().map(|t| (*t, 1)).collect();
    assert_eq!(
        error_code_of(conn.call(create_topics(&topics)).await?),
        OVER
    );
    assert_eq!(
        error_code_of(conn.call(describe_topics(Some(&ids))).await?),
        OVER
    );
    // A partition count over the cap is INVALID_PARTITIONS, per topic.
    let created = as_create_topics(conn.call(create_topics(&[("huge", i32::MAX)])).await?);
    assert_eq!(
        created.results[0].error_code,
        code(ErrorCode::InvalidPartitions)
    );
    still_heartbeats(&mut calm).await?;
    Ok(())
}

#[tokio::test]
async fn repeated_ids_are_answered_once() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut calm = bystander(&server).await?;
    let mut conn = Conn::connect(server.local_addr(), "tool").await?;
    let described = as_describe(conn.call(describe_groups(&["calm"; 1_000])).await?);
    assert_eq!(described.groups.len(), 1);
    let deleted = as_delete(conn.call(delete_groups(&["nope"; 1_000])).await?);
    assert_eq!(deleted.results.len(), 1);
    // A partition with 4 KB of metadata, named 20 000 times: answered once.
    let metadata = Some("x".repeat(4_000));
    let committed = as_commit(
        conn.call(commit("offsets", -1, "", &[(TOPIC, 0, 5, metadata)]))
            .await?,
    );
    assert_eq!(committed.error_code, 0);
    let wanted = vec![0; 20_000];
    let fetched = as_fetch(
        conn.call(fetch("offsets", Some(&[(TOPIC, &wanted)])))
            .await?,
    );
    assert_eq!(fetched.error_code, 0);
    assert_eq!(fetched.topics[0].partitions.len(), 1);
    still_heartbeats(&mut calm).await?;
    Ok(())
}

#[tokio::test]
async fn pending_member_ids_are_capped_server_wide() -> anyhow::Result<()> {
    let mut config: GroupConfig = fast_config();
    config.limits.max_pending_member_ids = 3;
    let server = start_server(config);
    let mut conn = Conn::connect(server.local_addr(), "hostile").await?;
    for i in 0..3 {
        let r = as_join(
            conn.call(join_request(&format!("p{i}"), "", LONG_MS, LONG_MS))
                .await?,
        );
        assert_eq!(r.error_code, code(ErrorCode::MemberIdRequired));
    }
    let r = as_join(conn.call(join_request("p9", "", LONG_MS, LONG_MS)).await?);
    assert_eq!(r.error_code, FULL, "{r:?}");
    Ok(())
}

#[tokio::test]
async fn the_number_of_groups_is_capped() -> anyhow::Result<()> {
    let mut config: GroupConfig = fast_config();
    config.limits.max_groups = 2;
    let server = start_server(config);
    let mut conn = Conn::connect(server.local_addr(), "hostile").await?;
    for group in ["a", "b"] {
        let r = as_commit(
            conn.call(commit(group, -1, "", &[(TOPIC, 0, 1, None)]))
                .await?,
        );
        assert_eq!(r.error_code, 0);
    }
    let r = as_commit(
        conn.call(commit("c", -1, "", &[(TOPIC, 0, 1, None)]))
            .await?,
    );
    assert_eq!(r.error_code, FULL);
    let r = as_join(conn.call(join_request("c", "", LONG_MS, LONG_MS)).await?);
    assert_eq!(r.error_code, FULL);
    // An existing group is still served.
    let r = as_commit(
        conn.call(commit("a", -1, "", &[(TOPIC, 1, 1, None)]))
            .await?,
    );
    assert_eq!(r.error_code, 0);
    Ok(())
}

/// A commit whose topic name is nearly the whole frame, with as many partitions as fit: the
/// name must not be copied per partition (it was: ~900 KiB × thousands of partitions).
#[tokio::test]
async fn a_long_topic_name_times_many_partitions_does_not_amplify() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut calm = bystander(&server).await?;
    let mut conn = Conn::connect(server.local_addr(), "hostile").await?;
    let before = rss_bytes();
    for (name_bytes, partitions) in [(900 * 1024, 9_000), (249, 50_000)] {
        let topic = "t".repeat(name_bytes);
        let request = Request::OffsetCommit(OffsetCommitRequest {
            group_id: "amplify".into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: vec![OffsetCommitTopic {
                topic,
                partitions: (0..partitions)
                    .map(|p| OffsetCommitPartition {
                        partition: p,
                        offset: 1,
                        metadata: None,
                    })
                    .collect(),
            }],
        });
        let r = as_commit(conn.call(request).await?);
        assert!(
            r.error_code == 0 || r.error_code == code(ErrorCode::InvalidTopic),
            "{}",
            r.error_code
        );
        still_heartbeats(&mut calm).await?;
    }
    let grown = rss_bytes().saturating_sub(before);
    // 59 000 partitions committed are kept, each with an offset and a history entry, in the
    // server and in the memory store (which keys both by the topic's name, 249 bytes): tens
    // of MiB. Amplified by the name, it would be gigabytes.
    assert!(grown < 96 << 20, "resident set grew by {} MiB", grown >> 20);
    Ok(())
}
