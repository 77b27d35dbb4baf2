//! Offsets and the admin requests over TCP (protocol §6.13–§6.16): OffsetCommit/OffsetFetch and
//! their generation rules, DescribeGroups, ListGroups, DeleteGroups, and the topic catalog with the
//! rebalances its changes cause.

mod common;

use std::time::{Duration, Instant};

use common::*;
use muster_protocol::*;

#[tokio::test]
async fn a_simple_commit_creates_an_empty_group() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut conn = Conn::connect(server.local_addr(), "tool").await?;
    let committed = as_commit(
        conn.call(commit(
            "simple",
            -1,
            "",
            &[
                (TOPIC, 0, 10, Some("m0".into())),
                (TOPIC, 1, 11, None),
                ("other", 0, 5, None),
            ],
        ))
        .await?,
    );
    assert_eq!(committed.error_code, 0);
    assert!(commit_codes(&committed).iter().all(|(_, _, c)| *c == 0));

    let described = describe_one(&mut conn, "simple").await?;
    assert_eq!(described.state, "Empty");
    assert!(described.members.is_empty());

    let all = as_fetch(conn.call(fetch("simple", None)).await?);
    let offsets = fetched(&all);
    assert_eq!(offsets.len(), 3);
    assert_eq!(offsets[&(TOPIC.to_owned(), 0)], (10, Some("m0".to_owned())));
    assert_eq!(offsets[&(TOPIC.to_owned(), 1)], (11, None));
    assert_eq!(offsets[&("other".to_owned(), 0)], (5, None));

    // A partition without a commit answers -1 / NONE; so does an absent group.
    let some = as_fetch(
        conn.call(fetch("simple", Some(&[(TOPIC, &[1, 7])])))
            .await?,
    );
    let offsets = fetched(&some);
    assert_eq!(offsets[&(TOPIC.to_owned(), 1)].0, 11);
    assert_eq!(offsets[&(TOPIC.to_owned(), 7)].0, -1);
    let absent = as_fetch(conn.call(fetch("absent", Some(&[(TOPIC, &[0])]))).await?);
    assert_eq!(absent.error_code, 0);
    assert_eq!(fetched(&absent)[&(TOPIC.to_owned(), 0)].0, -1);

    // A second simple commit to the Empty group overwrites.
    let again = as_commit(
        conn.call(commit("simple", -1, "", &[(TOPIC, 0, 20, None)]))
            .await?,
    );
    assert_eq!(again.error_code, 0);
    let after = as_fetch(conn.call(fetch("simple", Some(&[(TOPIC, &[0])]))).await?);
    assert_eq!(fetched(&after)[&(TOPIC.to_owned(), 0)], (20, None));
    Ok(())
}

#[tokio::test]
async fn a_generation_on_an_absent_group_is_illegal() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut conn = Conn::connect(server.local_addr(), "tool").await?;
    for generation in [0, 3] {
        let refused = as_commit(
            conn.call(commit(
                "nowhere",
                generation,
                "m",
                &[(TOPIC, 0, 1, None), (TOPIC, 1, 1, None)],
            ))
            .await?,
        );
        let illegal = code(ErrorCode::IllegalGeneration);
        assert_eq!(refused.error_code, illegal);
        assert!(commit_codes(&refused).iter().all(|(_, _, c)| *c == illegal));
    }
    assert_eq!(describe_one(&mut conn, "nowhere").await?.state, "Dead");
    Ok(())
}

#[tokio::test]
async fn members_commit_with_their_generation() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let mut members = form_group(addr, "committers", 2, LONG_MS, LONG_MS).await?;
    let m = &mut members[1];
    let (group, id, gen) = (m.group.clone(), m.id.clone(), m.generation);

    let ok = as_commit(
        m.conn
            .call(commit(&group, gen, &id, &[(TOPIC, 1, 100, None)]))
            .await?,
    );
    assert_eq!(ok.error_code, 0, "{ok:?}");
    let wrong_gen = as_commit(
        m.conn
            .call(commit(&group, gen + 1, &id, &[(TOPIC, 1, 101, None)]))
            .await?,
    );
    assert_eq!(wrong_gen.error_code, code(ErrorCode::IllegalGeneration));
    let stranger = as_commit(
        m.conn
            .call(commit(&group, gen, "stranger", &[(TOPIC, 1, 102, None)]))
            .await?,
    );
    assert_eq!(stranger.error_code, code(ErrorCode::UnknownMemberId));
    let simple = as_commit(
        m.conn
            .call(commit(&group, -1, "", &[(TOPIC, 1, 103, None)]))
            .await?,
    );
    assert_eq!(
        simple.error_code,
        code(ErrorCode::UnknownMemberId),
        "not Empty"
    );

    let got = as_fetch(m.conn.call(fetch(&group, Some(&[(TOPIC, &[1])]))).await?);
    assert_eq!(fetched(&got)[&(TOPIC.to_owned(), 1)].0, 100);
    Ok(())
}

#[tokio::test]
async fn oversize_metadata_fails_its_partition_only() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut conn = Conn::connect(server.local_addr(), "tool").await?;
    let at_limit = "x".repeat(4096);
    let over = "x".repeat(4097);
    let answer = as_commit(
        conn.call(commit(
            "meta",
            -1,
            "",
            &[
                (TOPIC, 0, 1, Some(at_limit.clone())),
                (TOPIC, 1, 2, Some(over)),
                (TOPIC, 2, 3, None),
            ],
        ))
        .await?,
    );
    assert_eq!(answer.error_code, 0);
    assert_eq!(
        commit_codes(&answer),
        vec![
            (TOPIC.to_owned(), 0, 0),
            (TOPIC.to_owned(), 1, code(ErrorCode::OffsetMetadataTooLarge)),
            (TOPIC.to_owned(), 2, 0),
        ]
    );
    let got = as_fetch(
        conn.call(fetch("meta", Some(&[(TOPIC, &[0, 1, 2])])))
            .await?,
    );
    let offsets = fetched(&got);
    assert_eq!(offsets[&(TOPIC.to_owned(), 0)], (1, Some(at_limit)));
    assert_eq!(offsets[&(TOPIC.to_owned(), 1)], (-1, None));
    assert_eq!(offsets[&(TOPIC.to_owned(), 2)], (3, None));
    Ok(())
}

#[tokio::test]
async fn describe_groups_shows_members_and_who_holds_a_rebalance() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let mut members = form_group(addr, "described", 2, LONG_MS, LONG_MS).await?;
    let mut admin = Conn::connect(addr, "admin").await?;

    let answer = as_describe(
        admin
            .call(describe_groups(&["described", "unknown"]))
            .await?,
    );
    assert_eq!(answer.groups.len(), 2);
    let unknown = &answer.groups[1];
    assert_eq!(
        (
            unknown.error_code,
            unknown.group_id.as_str(),
            unknown.state.as_str()
        ),
        (0, "unknown", "Dead")
    );
    let live = &answer.groups[0];
    assert_eq!(live.state, "Stable");
    assert_eq!(live.generation_id, members[0].generation);
    assert_eq!(live.assignor.as_deref(), Some("range"));
    assert_eq!(live.leader_id, members[0].id);
    assert_eq!(live.members.len(), 2);
    for (i, m) in members.iter().enumerate() {
        let d = live
            .members
            .iter()
            .find(|d| d.member_id == m.id)
            .expect("described");
        assert_eq!(d.client_id, format!("described-{i}"));
        assert_eq!(d.client_host, "127.0.0.1");
        assert_eq!(d.topics, vec![TOPIC.to_owned()]);
        assert_eq!(d.session_timeout_ms, LONG_MS);
        assert_eq!(d.group_instance_id, None);
        assert_eq!(
            d.assignment,
            assignment(&m.id, vec![i32::try_from(i)?]).partitions
        );
        assert!(!d.holding_rebalance);
        assert!(d.last_seen_ms_ago < 5_000);
    }

    // The leader rejoins; member 1 has not yet, so it is the one holding the rebalance.
    let held = members[0].send_join().await?;
    let mut preparing = describe_one(&mut admin, "described").await?;
    for _ in 0..50 {
        if preparing.state == "PreparingRebalance" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        preparing = describe_one(&mut admin, "described").await?;
    }
    assert_eq!(preparing.state, "PreparingRebalance");
    let holding: Vec<(&str, bool)> = preparing
        .members
        .iter()
        .map(|d| (d.member_id.as_str(), d.holding_rebalance))
        .collect();
    assert!(
        holding.contains(&(members[0].id.as_str(), false)),
        "{holding:?}"
    );
    assert!(
        holding.contains(&(members[1].id.as_str(), true)),
        "{holding:?}"
    );

    // Member 1 rejoins: now in CompletingRebalance, both hold it until they sync.
    members[1].join().await?;
    members[0].joined(held).await?;
    let completing = describe_one(&mut admin, "described").await?;
    assert_eq!(completing.state, "CompletingRebalance");
    assert!(completing.members.iter().all(|d| d.holding_rebalance));
    Ok(())
}

#[tokio::test]
async fn list_groups_with_and_without_a_state_filter() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let _stable = form_group(addr, "listed-stable", 1, LONG_MS, LONG_MS).await?;
    let mut admin = Conn::connect(addr, "admin").await?;
    let made = as_commit(
        admin
            .call(commit("listed-empty", -1, "", &[(TOPIC, 0, 1, None)]))
            .await?,
    );
    assert_eq!(made.error_code, 0);

    let summary = |r: ListGroupsResponse| -> Vec<(String, String, u32)> {
        r.groups
            .into_iter()
            .map(|g| (g.group_id, g.state, g.members))
            .collect()
    };
    let all = summary(as_list(admin.call(list_groups(&[])).await?));
    assert_eq!(
        all,
        vec![
            ("listed-empty".to_owned(), "Empty".to_owned(), 0),
            ("listed-stable".to_owned(), "Stable".to_owned(), 1),
        ]
    );
    let stable = summary(as_list(admin.call(list_groups(&["Stable"])).await?));
    assert_eq!(
        stable,
        vec![("listed-stable".to_owned(), "Stable".to_owned(), 1)]
    );
    let empty = summary(as_list(admin.call(list_groups(&["Empty"])).await?));
    assert_eq!(
        empty,
        vec![("listed-empty".to_owned(), "Empty".to_owned(), 0)]
    );
    let both = summary(as_list(
        admin.call(list_groups(&["Empty", "Stable"])).await?,
    ));
    assert_eq!(both.len(), 2);
    let none = summary(as_list(
        admin.call(list_groups(&["PreparingRebalance"])).await?,
    ));
    assert!(none.is_empty());
    Ok(())
}

#[tokio::test]
async fn deleting_groups() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let _busy = form_group(addr, "busy", 1, LONG_MS, LONG_MS).await?;
    let mut admin = Conn::connect(addr, "admin").await?;
    let made = as_commit(
        admin
            .call(commit("idle", -1, "", &[(TOPIC, 0, 9, None)]))
            .await?,
    );
    assert_eq!(made.error_code, 0);

    let deleted = as_delete(
        admin
            .call(delete_groups(&["busy", "ghost", "idle", ""]))
            .await?,
    );
    let results: Vec<(&str, i16)> = deleted
        .results
        .iter()
        .map(|r| (r.group_id.as_str(), r.error_code))
        .collect();
    assert_eq!(
        results,
        vec![
            ("busy", code(ErrorCode::NonEmptyGroup)),
            ("ghost", code(ErrorCode::GroupIdNotFound)),
            ("idle", 0),
            ("", code(ErrorCode::InvalidGroupId)),
        ]
    );

    // The deleted group and its offsets are gone.
    let got = as_fetch(admin.call(fetch("idle", Some(&[(TOPIC, &[0])]))).await?);
    assert_eq!(fetched(&got)[&(TOPIC.to_owned(), 0)].0, -1);
    let all = as_fetch(admin.call(fetch("idle", None)).await?);
    assert!(all.topics.is_empty(), "{all:?}");
    assert_eq!(describe_one(&mut admin, "idle").await?.state, "Dead");
    let listed = as_list(admin.call(list_groups(&[])).await?);
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_id, "busy");
    let again = as_delete(admin.call(delete_groups(&["idle"])).await?);
    assert_eq!(
        again.results[0].error_code,
        code(ErrorCode::GroupIdNotFound)
    );

    // The id can be used afresh.
    let fresh = as_commit(
        admin
            .call(commit("idle", -1, "", &[(TOPIC, 1, 1, None)]))
            .await?,
    );
    assert_eq!(fresh.error_code, 0);
    let got = as_fetch(admin.call(fetch("idle", None)).await?);
    assert_eq!(fetched(&got).len(), 1);
    Ok(())
}

#[tokio::test]
async fn create_and_describe_topics() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut admin = Conn::connect(server.local_addr(), "admin").await?;
    let codes = |r: CreateTopicsResponse| -> Vec<(String, i16)> {
        r.results
            .into_iter()
            .map(|t| (t.topic, t.error_code))
            .collect()
    };
    let created = codes(as_create_topics(
        admin
            .call(create_topics(&[
                ("orders", 3),
                ("pay.ments_v-2", 1),
                ("bad name", 1),
                ("", 1),
                ("zero", 0),
            ]))
            .await?,
    ));
    assert_eq!(
        created,
        vec![
            ("orders".to_owned(), 0),
            ("pay.ments_v-2".to_owned(), 0),
            ("bad name".to_owned(), code(ErrorCode::InvalidTopic)),
            (String::new(), code(ErrorCode::InvalidTopic)),
            ("zero".to_owned(), code(ErrorCode::InvalidPartitions)),
        ]
    );
    let too_long = "t".repeat(250);
    let longest = "t".repeat(249);
    let changed = codes(as_create_topics(
        admin
            .call(create_topics(&[
                ("orders", 5),
                ("pay.ments_v-2", 1),
                (&too_long, 1),
                (&longest, 2),
            ]))
            .await?,
    ));
    assert_eq!(
        changed,
        vec![
            ("orders".to_owned(), 0),
            ("pay.ments_v-2".to_owned(), 0),
            (too_long.clone(), code(ErrorCode::InvalidTopic)),
            (longest.clone(), 0),
        ]
    );
    let lowered = codes(as_create_topics(
        admin.call(create_topics(&[("orders", 4)])).await?,
    ));
    assert_eq!(
        lowered,
        vec![("orders".to_owned(), code(ErrorCode::InvalidPartitions))]
    );

    let some = as_describe_topics(
        admin
            .call(describe_topics(Some(&["orders", "missing", "bad name"])))
            .await?,
    );
    assert_eq!(some.error_code, 0);
    assert_eq!(
        some.topics,
        vec![TopicInfo {
            topic: "orders".into(),
            partitions: 5
        }]
    );
    let all = as_describe_topics(admin.call(describe_topics(None)).await?);
    let names: Vec<(&str, i32)> = all
        .topics
        .iter()
        .map(|t| (t.topic.as_str(), t.partitions))
        .collect();
    assert_eq!(
        names,
        vec![("orders", 5), ("pay.ments_v-2", 1), (longest.as_str(), 2)]
    );
    Ok(())
}

#[tokio::test]
async fn raising_a_subscribed_topic_rebalances_its_group_promptly() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let mut admin = Conn::connect(addr, "admin").await?;
    let created = as_create_topics(
        admin
            .call(create_topics(&[(TOPIC, 2), ("elsewhere", 1)]))
            .await?,
    );
    assert!(created.results.iter().all(|r| r.error_code == 0));
    let mut members = form_group(addr, "topical", 2, LONG_MS, LONG_MS).await?;

    // A change to a topic nobody subscribes to changes nothing.
    as_create_topics(admin.call(create_topics(&[("elsewhere", 3)])).await?);
    assert_eq!(members[1].heartbeat().await?, 0);

    let raised = as_create_topics(admin.call(create_topics(&[(TOPIC, 4)])).await?);
    assert_eq!(raised.results[0].error_code, 0);
    let answered = Instant::now();
    // Promptly: long before any session or rebalance timeout could have caused it (the bound
    // is generous so a loaded machine does not fail it).
    let took = members[1]
        .heartbeat_until(ErrorCode::RebalanceInProgress, Duration::from_secs(2))
        .await?;
    assert!(answered.elapsed() < Duration::from_secs(2), "{took:?}");

    // The leader's next JoinGroup carries the new count.
    let answers = rejoin_all(&mut members).await?;
    assert_eq!(answers[0].leader_id, members[0].id);
    assert_eq!(
        answers[0].topics,
        vec![TopicInfo {
            topic: TOPIC.into(),
            partitions: 4
        }]
    );
    Ok(())
}

#[tokio::test]
async fn the_leader_gets_catalog_entries_of_subscribed_topics() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    let mut admin = Conn::connect(addr, "admin").await?;
    as_create_topics(
        admin
            .call(create_topics(&[
                ("orders", 3),
                ("payments", 2),
                ("unrelated", 7),
            ]))
            .await?,
    );

    let mut a =
        Member::pending(Conn::connect(addr, "a").await?, "catalog", LONG_MS, LONG_MS).await?;
    let mut b =
        Member::pending(Conn::connect(addr, "b").await?, "catalog", LONG_MS, LONG_MS).await?;
    let mut ja = join_group("catalog", &a.id, LONG_MS, LONG_MS);
    ja.topics = vec!["orders".into(), "absent".into()];
    let joined_a = as_join(a.conn.call(ja.clone().into()).await?);
    assert_eq!(joined_a.error_code, 0);
    assert_eq!(
        joined_a.topics,
        vec![TopicInfo {
            topic: "orders".into(),
            partitions: 3
        }],
        "an absent topic is left out"
    );
    a.generation = joined_a.generation_id;
    a.sync(vec![]).await?;

    // b subscribes to payments too; a rejoins; the leader sees the union.
    let mut jb = join_group("catalog", &b.id, LONG_MS, LONG_MS);
    jb.topics = vec!["payments".into(), "orders".into()];
    let rx_b = b.conn.send(jb.into()).await?;
    let rx_a = a.conn.send(ja.into()).await?;
    let (joined_a, joined_b) = (as_join(wait(rx_a).await?), as_join(wait(rx_b).await?));
    assert_eq!(joined_a.leader_id, a.id);
    assert_eq!(
        joined_a.topics,
        vec![
            TopicInfo {
                topic: "orders".into(),
                partitions: 3
            },
            TopicInfo {
                topic: "payments".into(),
                partitions: 2
            },
        ]
    );
    assert!(joined_b.topics.is_empty(), "followers get no catalog");
    assert!(joined_b.members.is_empty());
    Ok(())
}
