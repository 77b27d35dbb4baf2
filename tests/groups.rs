//! Consumer groups over TCP with several members, each on its own connection: rebalances,
//! session expiry, a leader that never syncs, static membership, a large group, leaving,
//! size limits, the initial rebalance delay and group-id validation (protocol §6).

mod common;

use std::time::{Duration, Instant};

use common::*;
use muster_coordinator::GroupConfig;
use muster_protocol::*;

#[tokio::test]
async fn two_members_rebalance_and_share_the_assignment() -> anyhow::Result<()> {
    let server = start_server(GroupConfig {
        initial_rebalance_delay_ms: 100,
        ..fast_config()
    });
    let addr = server.local_addr();
    let mut a = Member::pending(
        Conn::connect(addr, "alpha").await?,
        "pair",
        LONG_MS,
        LONG_MS,
    )
    .await?;
    let mut b =
        Member::pending(Conn::connect(addr, "beta").await?, "pair", LONG_MS, LONG_MS).await?;
    assert!(a.id.starts_with("alpha-") && b.id.starts_with("beta-"));
    assert_ne!(a.id, b.id);

    let (rx_a, rx_b) = (a.send_join().await?, b.send_join().await?);
    let (ja, jb) = (a.joined(rx_a).await?, b.joined(rx_b).await?);
    assert_eq!(ja.generation_id, jb.generation_id);
    assert_eq!(ja.leader_id, jb.leader_id);
    assert_eq!(ja.assignor.as_deref(), Some("range"));
    let (leader, follower) = if ja.leader_id == a.id {
        (&ja, &jb)
    } else {
        (&jb, &ja)
    };
    let mut expected = vec![a.id.clone(), b.id.clone()];
    expected.sort();
    assert_eq!(member_ids(leader), expected);
    assert!(follower.members.is_empty());
    assert!(leader
        .members
        .iter()
        .all(|m| m.topics == vec![TOPIC.to_owned()]));

    let assignments = vec![assignment(&a.id, vec![0, 1]), assignment(&b.id, vec![2])];
    let (a_assign, b_assign) = if ja.leader_id == a.id {
        (assignments, vec![])
    } else {
        (vec![], assignments)
    };
    // Whoever syncs first, both are answered once the leader's assignment is in.
    let rx_b = b.send_sync(b_assign).await?;
    let rx_a = a.send_sync(a_assign).await?;
    let (sa, sb) = (as_sync(wait(rx_a).await?), as_sync(wait(rx_b).await?));
    assert_eq!((sa.error_code, sb.error_code), (0, 0));
    assert_eq!(sa.partitions[0].partitions, vec![0, 1]);
    assert_eq!(sb.partitions[0].partitions, vec![2]);
    assert_eq!(sa.assignor.as_deref(), Some("range"));
    assert_eq!(a.heartbeat().await?, 0);
    assert_eq!(b.heartbeat().await?, 0);
    Ok(())
}

#[tokio::test]
async fn a_silent_member_expires_and_the_others_rebalance_without_it() -> anyhow::Result<()> {
    const SESSION_MS: u32 = 300;
    let server = start_server(fast_config());
    let mut members = form_group(server.local_addr(), "expiry", 3, SESSION_MS, LONG_MS).await?;
    let dead = members.pop().expect("three members");
    let generation = members[0].generation;

    // Everyone but `dead` keeps heartbeating until the coordinator notices.
    let start = Instant::now();
    heartbeat_all_until(
        &mut members,
        ErrorCode::RebalanceInProgress,
        Duration::from_secs(2),
    )
    .await?;
    assert!(start.elapsed() >= Duration::from_millis(u64::from(SESSION_MS) / 2));

    let answers = rejoin_all(&mut members).await?;
    let leader = answers
        .iter()
        .find(|j| !j.members.is_empty())
        .expect("a leader");
    assert_eq!(leader.generation_id, generation + 1);
    let mut survivors = vec![members[0].id.clone(), members[1].id.clone()];
    survivors.sort();
    assert_eq!(member_ids(leader), survivors);
    assert!(!member_ids(leader).contains(&dead.id));
    Ok(())
}

#[tokio::test]
async fn a_leader_that_never_syncs_is_removed_after_the_rebalance_timeout() -> anyhow::Result<()> {
    const REBALANCE_MS: u32 = 300;
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let mut leader = Member::pending(
        Conn::connect(addr, "lazy").await?,
        "nosync",
        LONG_MS,
        REBALANCE_MS,
    )
    .await?;
    leader.join().await?;
    assert_eq!(leader.sync(vec![]).await?.error_code, 0);
    let mut follower = Member::pending(
        Conn::connect(addr, "eager").await?,
        "nosync",
        LONG_MS,
        REBALANCE_MS,
    )
    .await?;
    let (rx_l, rx_f) = (leader.send_join().await?, follower.send_join().await?);
    let joined = leader.joined(rx_l).await?;
    follower.joined(rx_f).await?;
    assert_eq!(joined.leader_id, leader.id);
    assert_eq!(joined.members.len(), 2);

    // The follower syncs; the leader never does.
    let start = Instant::now();
    let held = follower.send_sync(vec![]).await?;
    let answer = as_sync(wait(held).await?);
    let waited = start.elapsed();
    assert_eq!(answer.error_code, code(ErrorCode::RebalanceInProgress));
    assert!(
        waited >= Duration::from_millis(u64::from(REBALANCE_MS) - 50),
        "{waited:?}"
    );
    assert!(waited < Duration::from_secs(2), "{waited:?}");

    let rejoined = follower.join().await?;
    assert_eq!(rejoined.generation_id, joined.generation_id + 1);
    assert_eq!(rejoined.leader_id, follower.id);
    assert_eq!(member_ids(&rejoined), vec![follower.id.clone()]);
    let synced = follower
        .sync(vec![assignment(&follower.id, vec![0, 1])])
        .await?;
    assert_eq!(synced.error_code, 0);

    // The leader is gone.
    assert_eq!(leader.heartbeat().await?, code(ErrorCode::UnknownMemberId));
    Ok(())
}

fn static_join(group: &str, member_id: &str, instance: &str) -> Request {
    let mut j = join_group(group, member_id, LONG_MS, LONG_MS);
    j.group_instance_id = Some(instance.into());
    j.into()
}

fn static_heartbeat(group: &str, generation: i32, member_id: &str, instance: &str) -> Request {
    Request::Heartbeat(HeartbeatRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: Some(instance.into()),
    })
}

#[tokio::test]
async fn a_restarted_static_member_takes_over_without_a_rebalance() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let group = "static";

    // A static leader (it joins without MEMBER_ID_REQUIRED) and a dynamic follower.
    let mut first = Conn::connect(addr, "s1").await?;
    let joined = as_join(first.call(static_join(group, "", "instance-1")).await?);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let old_id = joined.member_id.clone();
    assert!(old_id.starts_with("instance-1-"));
    let synced = as_sync(
        first
            .call(sync_request(group, joined.generation_id, &old_id, vec![]))
            .await?,
    );
    assert_eq!(synced.error_code, 0);

    let mut follower =
        Member::pending(Conn::connect(addr, "dyn").await?, group, LONG_MS, LONG_MS).await?;
    let rx_f = follower.send_join().await?;
    let rx_s = first
        .send(static_join(group, &old_id, "instance-1"))
        .await?;
    let leader_joined = as_join(wait(rx_s).await?);
    follower.joined(rx_f).await?;
    assert_eq!(leader_joined.leader_id, old_id);
    let generation = leader_joined.generation_id;
    let assignments = vec![
        assignment(&old_id, vec![0, 1]),
        assignment(&follower.id, vec![2]),
    ];
    let rx_f = follower.send_sync(vec![]).await?;
    let mine = as_sync(
        first
            .call(sync_request(group, generation, &old_id, assignments))
            .await?,
    );
    assert_eq!(mine.partitions[0].partitions, vec![0, 1]);
    assert_eq!(as_sync(wait(rx_f).await?).error_code, 0);

    // The static member restarts on a new connection with an empty member id.
    drop(first);
    let mut restarted = Conn::connect(addr, "s1").await?;
    let taken = as_join(restarted.call(static_join(group, "", "instance-1")).await?);
    assert_eq!(taken.error_code, 0, "{taken:?}");
    let new_id = taken.member_id.clone();
    assert_ne!(new_id, old_id);
    assert_eq!(taken.generation_id, generation, "no generation change");
    assert_eq!(
        taken.leader_id, new_id,
        "the rejoining static leader keeps leading"
    );
    assert!(taken.skip_assignment);
    let mut expected = vec![new_id.clone(), follower.id.clone()];
    expected.sort();
    assert_eq!(member_ids(&taken), expected);

    let resynced = as_sync(
        restarted
            .call(sync_request(group, generation, &new_id, vec![]))
            .await?,
    );
    assert_eq!(resynced.error_code, 0);
    assert_eq!(
        resynced.partitions[0].partitions,
        vec![0, 1],
        "same assignment"
    );

    // No rebalance for the follower; the old id is fenced.
    assert_eq!(follower.heartbeat().await?, 0);
    let fenced = as_heartbeat(
        restarted
            .call(static_heartbeat(group, generation, &old_id, "instance-1"))
            .await?,
    );
    assert_eq!(fenced, code(ErrorCode::FencedInstanceId));
    let unknown = as_heartbeat(
        restarted
            .call(heartbeat(group, generation, &old_id))
            .await?,
    );
    assert_eq!(unknown, code(ErrorCode::UnknownMemberId));
    let described = describe_one(&mut restarted, group).await?;
    assert_eq!(described.state, "Stable");
    assert_eq!(described.generation_id, generation);
    Ok(())
}

#[tokio::test]
async fn a_static_takeover_fences_the_old_ids_held_join() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let group = "fence";
    let mut old = Conn::connect(addr, "s1").await?;
    let joined = as_join(old.call(static_join(group, "", "instance-1")).await?);
    let old_id = joined.member_id.clone();
    as_sync(
        old.call(sync_request(group, joined.generation_id, &old_id, vec![]))
            .await?,
    );
    let mut follower =
        Member::pending(Conn::connect(addr, "dyn").await?, group, LONG_MS, LONG_MS).await?;
    let rx_f = follower.send_join().await?;
    let rx_s = old.send(static_join(group, &old_id, "instance-1")).await?;
    let generation = as_join(wait(rx_s).await?).generation_id;
    follower.joined(rx_f).await?;
    let rx_f = follower.send_sync(vec![]).await?;
    as_sync(
        old.call(sync_request(group, generation, &old_id, vec![]))
            .await?,
    );
    as_sync(wait(rx_f).await?);

    // The static leader rejoins: held, waiting for the follower.
    let mut held = old.send(static_join(group, &old_id, "instance-1")).await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_pending(&mut held, "the old id's rejoin");

    // Its replacement takes over: the old held join is fenced at once.
    let mut new = Conn::connect(addr, "s1").await?;
    let rx_new = new.send(static_join(group, "", "instance-1")).await?;
    let fenced = as_join(wait_for(held, Duration::from_secs(1)).await?);
    assert_eq!(fenced.error_code, code(ErrorCode::FencedInstanceId));

    // The follower rejoins and the barrier completes with the new id.
    let rejoined = follower.join().await?;
    let taken = as_join(wait(rx_new).await?);
    assert_eq!(taken.error_code, 0, "{taken:?}");
    assert_eq!(taken.generation_id, generation + 1);
    assert_eq!(rejoined.leader_id, taken.member_id);
    let mut expected = vec![taken.member_id.clone(), follower.id.clone()];
    expected.sort();
    assert_eq!(member_ids(&taken), expected);
    Ok(())
}

#[tokio::test]
async fn two_hundred_members_join_one_group_at_once() -> anyhow::Result<()> {
    const N: usize = 200;
    let server = start_server(GroupConfig {
        initial_rebalance_delay_ms: 300,
        ..fast_config()
    });
    let addr = server.local_addr();
    let conns = Conn::connect_many(addr, "crowd", 0..N).await?;
    let mut set = tokio::task::JoinSet::new();
    for conn in conns {
        set.spawn(Member::pending(conn, "crowd", LONG_MS, LONG_MS));
    }
    let mut members = Vec::with_capacity(N);
    while let Some(m) = set.join_next().await {
        members.push(m??);
    }

    let answers = rejoin_all(&mut members).await?;
    let generation = answers[0].generation_id;
    assert!(answers.iter().all(|j| j.generation_id == generation));
    let leaders: Vec<&JoinGroupResponse> =
        answers.iter().filter(|j| !j.members.is_empty()).collect();
    assert_eq!(leaders.len(), 1, "exactly one leader");
    let leader = leaders[0];
    assert!(answers.iter().all(|j| j.leader_id == leader.member_id));
    let mut everyone: Vec<String> = members.iter().map(|m| m.id.clone()).collect();
    everyone.sort();
    assert_eq!(member_ids(leader), everyone);

    // The leader gives member i partition i; every member gets its part.
    let part_of = |id: &str| -> i32 {
        i32::try_from(
            everyone
                .binary_search_by(|e| e.as_str().cmp(id))
                .expect("known"),
        )
        .expect("small")
    };
    let assignments: Vec<MemberAssignment> = everyone
        .iter()
        .map(|id| assignment(id, vec![part_of(id)]))
        .collect();
    let leader_id = leader.member_id.clone();
    let mut syncs = Vec::with_capacity(N);
    for m in members.iter_mut() {
        let mine = if m.id == leader_id {
            assignments.clone()
        } else {
            vec![]
        };
        syncs.push(m.send_sync(mine).await?);
    }
    for (m, rx) in members.iter().zip(syncs) {
        let synced = as_sync(wait(rx).await?);
        assert_eq!(synced.error_code, 0);
        assert_eq!(synced.partitions[0].partitions, vec![part_of(&m.id)]);
    }
    let described = describe_one(&mut members[0].conn, "crowd").await?;
    assert_eq!(described.state, "Stable");
    assert_eq!(described.members.len(), N);
    Ok(())
}

#[tokio::test]
async fn leave_group_in_a_batch() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let mut members = form_group(addr, "leavers", 3, LONG_MS, LONG_MS).await?;
    let generation = members[0].generation;
    let (b, c) = (members[1].id.clone(), members[2].id.clone());

    let left = as_leave(
        members[1]
            .conn
            .call(leave("leavers", &[&b, &c, "nobody"]))
            .await?,
    );
    assert_eq!(left.error_code, 0);
    let codes: Vec<(&str, i16)> = left
        .members
        .iter()
        .map(|r| (r.member_id.as_str(), r.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![
            (b.as_str(), 0),
            (c.as_str(), 0),
            ("nobody", code(ErrorCode::UnknownMemberId))
        ]
    );

    let a = &mut members[0];
    a.heartbeat_until(ErrorCode::RebalanceInProgress, Duration::from_secs(2))
        .await?;
    let rejoined = a.join().await?;
    assert_eq!(rejoined.generation_id, generation + 1);
    assert_eq!(member_ids(&rejoined), vec![a.id.clone()]);
    let synced = a
        .sync(vec![assignment(&a.id.clone(), vec![0, 1, 2])])
        .await?;
    assert_eq!(synced.error_code, 0);

    // The last member leaving empties the group: generation + 1, no leader.
    let id = a.id.clone();
    let left = as_leave(a.conn.call(leave("leavers", &[&id])).await?);
    assert_eq!(left.members[0].error_code, 0);
    let described = describe_one(&mut a.conn, "leavers").await?;
    assert_eq!(described.state, "Empty");
    assert_eq!(described.generation_id, generation + 2);
    assert!(described.leader_id.is_empty());

    // An absent group answers per member.
    let absent = as_leave(a.conn.call(leave("no-such-group", &["x", "y"])).await?);
    assert!(absent
        .members
        .iter()
        .all(|r| r.error_code == code(ErrorCode::UnknownMemberId)));
    assert_eq!(absent.members.len(), 2);
    Ok(())
}

#[tokio::test]
async fn a_full_group_refuses_newcomers_before_giving_them_an_id() -> anyhow::Result<()> {
    let server = start_server(GroupConfig {
        max_group_size: 2,
        ..fast_config()
    });
    let addr = server.local_addr();
    let mut members = form_group(addr, "full", 2, LONG_MS, LONG_MS).await?;
    let mut third = Conn::connect(addr, "third").await?;
    let refused = as_join(
        third
            .call(join_request("full", "", LONG_MS, LONG_MS))
            .await?,
    );
    assert_eq!(refused.error_code, code(ErrorCode::GroupMaxSizeReached));
    assert!(refused.member_id.is_empty());
    // The members are undisturbed.
    for m in members.iter_mut() {
        assert_eq!(m.heartbeat().await?, 0);
    }
    Ok(())
}

#[tokio::test]
async fn members_joining_within_the_initial_delay_share_one_generation() -> anyhow::Result<()> {
    const DELAY_MS: u64 = 300;
    let server = start_server(GroupConfig {
        initial_rebalance_delay_ms: DELAY_MS as u32,
        ..fast_config()
    });
    let addr = server.local_addr();
    let mut a = Member::pending(
        Conn::connect(addr, "early").await?,
        "delayed",
        LONG_MS,
        LONG_MS,
    )
    .await?;
    let mut b = Member::pending(
        Conn::connect(addr, "late").await?,
        "delayed",
        LONG_MS,
        LONG_MS,
    )
    .await?;

    let start = Instant::now();
    let mut rx_a = a.send_join().await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_pending(&mut rx_a, "the first join inside the initial delay");
    let rx_b = b.send_join().await?;
    let (ja, jb) = (a.joined(rx_a).await?, b.joined(rx_b).await?);
    assert!(start.elapsed() >= Duration::from_millis(DELAY_MS));
    assert_eq!(ja.generation_id, 1);
    assert_eq!(jb.generation_id, 1);
    let leader = if ja.members.is_empty() { &jb } else { &ja };
    assert_eq!(leader.members.len(), 2);
    Ok(())
}

#[tokio::test]
async fn heartbeat_to_an_unknown_group_is_unknown_member() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut conn = Conn::connect(server.local_addr(), "c").await?;
    let hb = as_heartbeat(conn.call(heartbeat("never-seen", 1, "someone")).await?);
    assert_eq!(hb, code(ErrorCode::UnknownMemberId));
    let synced = as_sync(
        conn.call(sync_request("never-seen", 1, "someone", vec![]))
            .await?,
    );
    assert_eq!(synced.error_code, code(ErrorCode::UnknownMemberId));
    let joined = as_join(
        conn.call(join_request("never-seen", "someone", LONG_MS, LONG_MS))
            .await?,
    );
    assert_eq!(joined.error_code, code(ErrorCode::UnknownMemberId));
    // None of that created the group.
    assert_eq!(describe_one(&mut conn, "never-seen").await?.state, "Dead");
    Ok(())
}

#[tokio::test]
async fn invalid_group_ids_are_refused() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut conn = Conn::connect(server.local_addr(), "c").await?;
    let invalid = ErrorCode::InvalidGroupId.code();
    let too_long = "g".repeat(256);
    for group in [
        "",
        too_long.as_str(),
        "bad\u{1}id",
        "tab\there",
        "del\u{7f}",
    ] {
        let joined = as_join(conn.call(join_request(group, "", LONG_MS, LONG_MS)).await?);
        assert_eq!(joined.error_code, invalid, "join {group:?}");
        assert_eq!(
            as_heartbeat(conn.call(heartbeat(group, 1, "m")).await?),
            invalid
        );
        let committed = as_commit(
            conn.call(commit(group, -1, "", &[(TOPIC, 0, 1, None)]))
                .await?,
        );
        assert_eq!(committed.error_code, invalid);
        assert_eq!(commit_codes(&committed)[0].2, invalid);
        assert_eq!(describe_one(&mut conn, group).await?.error_code, invalid);
    }
    // 255 bytes is fine.
    let longest = "g".repeat(255);
    let first = as_join(
        conn.call(join_request(&longest, "", LONG_MS, LONG_MS))
            .await?,
    );
    assert_eq!(first.error_code, code(ErrorCode::MemberIdRequired));
    Ok(())
}
