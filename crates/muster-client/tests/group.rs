//! Group members against the real server: convergence, failure handover, static membership,
//! fencing, membership reset, offsets, and the cooperative no-double-ownership guarantee.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use muster_client::{Admin, ClientError, ErrorCode, Event, MemberConfig, Phase, TopicPartition};
use muster_protocol::{LeaveGroupRequest, LeavingMember, Response};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_converge_with_every_partition_owned_once() {
    let server = start_server();
    create_topic(&server, "orders", 7).await;
    create_topic(&server, "audit", 3).await;
    let mut expected = partitions("orders", 7);
    expected.extend(partitions("audit", 3));
    for assignor in ["range", "roundrobin", "sticky", "cooperative-sticky"] {
        let log = Log::default();
        let group = format!("converge-{assignor}");
        let mut members = Vec::new();
        for i in 0..3 {
            let config = fast_member(&group, &["orders", "audit"], assignor);
            members.push(Harness::start(&server, &format!("{assignor}-{i}"), config, &log).await);
        }
        let refs: Vec<&Harness> = members.iter().collect();
        let generation = wait_converged(&refs, &expected).await;
        // The server agrees with the members.
        let admin = Admin::new(connect(&server, "admin").await);
        let described = admin.describe_group(&group).await.unwrap();
        assert_eq!(described.state, "Stable");
        assert_eq!(described.generation_id, generation);
        assert_eq!(described.assignor.as_deref(), Some(assignor));
        assert_eq!(described.members.len(), 3);
        // Exactly one leader among them.
        assert_eq!(refs.iter().filter(|m| m.snapshot().is_leader()).count(), 1);
        log.check_single_ownership();
        for m in members {
            m.leave().await;
        }
        let after = admin.describe_group(&group).await.unwrap();
        assert_eq!(after.state, "Empty", "{assignor}: everyone left");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_member_partitions_go_to_survivors_within_the_session_timeout() {
    let server = start_server();
    create_topic(&server, "jobs", 6).await;
    let expected = partitions("jobs", 6);
    let log = Log::default();
    let a = Harness::start(&server, "a", fast_member("kill", &["jobs"], "range"), &log).await;
    let b = Harness::start(&server, "b", fast_member("kill", &["jobs"], "range"), &log).await;
    let c = Harness::start(&server, "c", fast_member("kill", &["jobs"], "range"), &log).await;
    let before = wait_converged(&[&a, &b, &c], &expected).await;
    let killed_at = Instant::now();
    c.kill().await;
    let after = wait_converged(&[&a, &b], &expected).await;
    let took = killed_at.elapsed();
    assert!(after > before);
    // The server notices at session expiry (600 ms after the last heartbeat, so 400..600 ms
    // after the kill), the survivors at their next heartbeat (every 200 ms), and the rebalance
    // takes milliseconds: typically 0.6..0.8 s. Allow for a loaded machine.
    assert!(
        took >= SESSION / 2,
        "too early for a session expiry: {took:?}"
    );
    assert!(took < SESSION * 5, "handover took {took:?}");
    a.leave().await;
    b.leave().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_static_member_gets_its_partitions_back_without_a_rebalance() {
    let server = start_server();
    create_topic(&server, "events", 6).await;
    let expected = partitions("events", 6);
    let log = Log::default();
    let session = Duration::from_millis(1500);
    let static_config = |instance: &str| {
        fast_member("static", &["events"], "range")
            .session_timeout(session)
            .group_instance_id(instance)
    };
    let a = Harness::start(&server, "a", static_config("instance-a"), &log).await;
    // `a` forms the group alone first, so it leads whatever the machine's load (two members
    // started together race for the first join).
    wait_converged(&[&a], &expected).await;
    let b = Harness::start(&server, "b", static_config("instance-b"), &log).await;
    let generation = wait_converged(&[&a, &b], &expected).await;
    assert!(a.snapshot().is_leader(), "the first member leads");
    let a_partitions = a.snapshot().assignment;
    let a_member_id = a.snapshot().member_id;
    let entries_before = log.len();

    a.kill().await; // No LeaveGroup: a static member's restart.
    let a2 = Harness::start(&server, "a2", static_config("instance-a"), &log).await;
    let again = wait_converged(&[&a2, &b], &expected).await;
    assert_eq!(
        again, generation,
        "no rebalance: the generation is unchanged"
    );
    assert_eq!(a2.snapshot().assignment, a_partitions);
    assert_ne!(
        a2.snapshot().member_id,
        a_member_id,
        "a new member id took over"
    );
    assert!(
        a2.snapshot().is_leader(),
        "a rejoining static leader stays leader (with skip_assignment)"
    );
    // b saw nothing at all: no revocation, no new assignment.
    let later: Vec<Entry> = log.entries().split_off(entries_before);
    assert!(later.iter().all(|e| e.member == "a2"), "{later:#?}");
    // Stay past a few heartbeats: still no rebalance.
    tokio::time::sleep(session).await;
    assert_eq!(b.snapshot().generation_id, generation);
    assert_eq!(a2.snapshot().generation_id, generation);
    // The same for a follower.
    let b_partitions = b.snapshot().assignment;
    b.kill().await;
    let b2 = Harness::start(&server, "b2", static_config("instance-b"), &log).await;
    assert_eq!(wait_converged(&[&a2, &b2], &expected).await, generation);
    assert_eq!(b2.snapshot().assignment, b_partitions);
    assert!(!b2.snapshot().is_leader());
    // A static member's close does not leave by default.
    a2.leave().await;
    let admin = Admin::new(connect(&server, "admin").await);
    assert_eq!(
        admin.describe_group("static").await.unwrap().members.len(),
        2
    );
    b2.leave().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_taken_over_is_fenced() {
    let server = start_server();
    create_topic(&server, "fence", 4).await;
    let expected = partitions("fence", 4);
    let log = Log::default();
    let config = || {
        fast_member("fenced", &["fence"], "cooperative-sticky")
            .group_instance_id("the-one")
            .leave_group_on_close(true)
    };
    let first = Harness::start(&server, "first", config(), &log).await;
    wait_converged(&[&first], &expected).await;
    let second = Harness::start(&server, "second", config(), &log).await;
    wait_converged(&[&second], &expected).await;
    // The first one's next heartbeat is answered FENCED_INSTANCE_ID: a fatal error event.
    let member = first.wait_stopped().await.expect("stream ended by itself");
    assert_eq!(member.state().phase, Phase::Failed);
    let entries = log.entries();
    let errors: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.member == "first" && e.kind == Kind::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{entries:#?}");
    assert!(entries
        .iter()
        .any(|e| e.member == "first" && e.kind == Kind::Lost));
    assert!(matches!(
        member
            .commit_offsets([(TopicPartition::new("fence", 0), 1_i64)])
            .await,
        Err(ClientError::NotMember { .. })
    ));
    second.leave().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_member_id_resets_and_rejoins() {
    let server = start_server();
    create_topic(&server, "reset", 3).await;
    let expected = partitions("reset", 3);
    let log = Log::default();
    let a = Harness::start(
        &server,
        "a",
        fast_member("reset", &["reset"], "range"),
        &log,
    )
    .await;
    wait_converged(&[&a], &expected).await;
    let old_id = a.snapshot().member_id;
    // Someone else removes the member behind its back.
    let conn = connect(&server, "operator").await;
    let answer = conn
        .send(LeaveGroupRequest {
            group_id: "reset".into(),
            members: vec![LeavingMember {
                member_id: old_id.clone(),
                group_instance_id: None,
                reason: Some("test".into()),
            }],
        })
        .await
        .unwrap();
    assert!(
        matches!(answer, Response::LeaveGroup(ref l) if l.error_code == 0),
        "{answer:?}"
    );
    // Its heartbeat gets UNKNOWN_MEMBER_ID: the partitions are lost, it rejoins with a new id.
    let deadline = Instant::now() + PATIENCE;
    while a.snapshot().member_id == old_id || !common::converged(&[a.snapshot()], &expected) {
        assert!(Instant::now() < deadline, "{:?}", a.snapshot());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let entries = log.entries();
    assert!(
        entries
            .iter()
            .any(|e| e.kind == Kind::Lost && e.partitions.len() == 3),
        "{entries:#?}"
    );
    a.leave().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooperative_sticky_never_has_two_owners_of_a_partition() {
    let server = start_server();
    create_topic(&server, "stream", 8).await;
    let expected = partitions("stream", 8);
    let log = Log::default();
    let config = || fast_member("coop", &["stream"], "cooperative-sticky");
    let start = |name: &'static str| {
        let log = log.clone();
        let server = &server;
        async move { Harness::start(server, name, config(), &log).await }
    };

    let a = start("a").await;
    wait_converged(&[&a], &expected).await;
    // Two join at once.
    let (b, c) = tokio::join!(start("b"), start("c"));
    wait_converged(&[&a, &b, &c], &expected).await;
    let d = start("d").await;
    wait_converged(&[&a, &b, &c, &d], &expected).await;
    // One leaves while another joins.
    let (_, e) = tokio::join!(b.leave(), start("e"));
    wait_converged(&[&a, &c, &d, &e], &expected).await;
    a.leave().await;
    wait_converged(&[&c, &d, &e], &expected).await;

    let owners = log.check_single_ownership();
    assert_eq!(
        owners
            .keys()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>(),
        expected
    );
    // Partitions really changed hands (revoked by one member, then assigned to another).
    assert!(log.handovers() >= 4, "{:#?}", log.entries());
    let entries = log.entries();
    assert!(
        !entries
            .iter()
            .any(|e| e.kind == Kind::Lost || e.kind == Kind::Error),
        "{entries:#?}"
    );
    for m in [c, d, e] {
        m.leave().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eager_members_revoke_everything_before_rejoining() {
    let server = start_server();
    create_topic(&server, "eager", 4).await;
    let expected = partitions("eager", 4);
    let log = Log::default();
    let a = Harness::start(
        &server,
        "a",
        fast_member("eager", &["eager"], "range"),
        &log,
    )
    .await;
    wait_converged(&[&a], &expected).await;
    let b = Harness::start(
        &server,
        "b",
        fast_member("eager", &["eager"], "range"),
        &log,
    )
    .await;
    wait_converged(&[&a, &b], &expected).await;
    let entries = log.entries();
    let a_events: Vec<(Kind, usize)> = entries
        .iter()
        .filter(|e| e.member == "a")
        .map(|e| (e.kind, e.partitions.len()))
        .collect();
    // Assigned all four, revoked all four, assigned its half.
    assert_eq!(
        &a_events[..3],
        &[(Kind::Assigned, 4), (Kind::Revoked, 4), (Kind::Assigned, 2)]
    );
    log.check_single_ownership();
    a.leave().await;
    b.leave().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_are_committed_by_the_member_and_fenced() {
    let server = start_server();
    create_topic(&server, "ledger", 2).await;
    let conn = connect(&server, "m").await;
    let config = fast_member("offsets", &["ledger"], "roundrobin");
    let (member, mut events) = config.start(conn).unwrap();
    // (Committing before the join completes is refused locally: member_scripted.rs, where the
    // server can hold the join; here the join may already be done.)
    let assigned = loop {
        match tokio::time::timeout(PATIENCE, events.recv()).await.unwrap() {
            Some(Event::Assigned(p)) if !p.is_empty() => break p.to_vec(),
            Some(_) => {}
            None => panic!("stream ended"),
        }
    };
    assert_eq!(assigned.len(), 2);
    member
        .commit_offsets([
            (
                TopicPartition::new("ledger", 0),
                muster_client::OffsetAndMetadata::with_metadata(42, "host-a"),
            ),
            (TopicPartition::new("ledger", 1), 7.into()),
        ])
        .await
        .unwrap();
    let fetched = member.fetch_offsets(None).await.unwrap();
    assert_eq!(fetched[&TopicPartition::new("ledger", 0)].offset, 42);
    assert_eq!(
        fetched[&TopicPartition::new("ledger", 0)]
            .metadata
            .as_deref(),
        Some("host-a")
    );
    assert_eq!(fetched[&TopicPartition::new("ledger", 1)].offset, 7);
    // The admin API sees the same, and may not overwrite offsets of an active group.
    let admin = Admin::new(connect(&server, "admin").await);
    let only0 = [
        TopicPartition::new("ledger", 0),
        TopicPartition::new("ledger", 5),
    ];
    let some = admin.fetch_offsets("offsets", Some(&only0)).await.unwrap();
    assert_eq!(some.len(), 1, "ledger-5 has no commit: {some:?}");
    let refused = admin
        .set_offsets("offsets", [(TopicPartition::new("ledger", 0), 0_i64)])
        .await;
    assert_eq!(
        refused.unwrap_err().error_code(),
        Some(ErrorCode::UnknownMemberId)
    );
    // Too-large metadata is refused for its partition only.
    let too_big = muster_client::OffsetAndMetadata::with_metadata(50, "x".repeat(5000));
    let err = member
        .commit_offsets([
            (TopicPartition::new("ledger", 0), too_big),
            (TopicPartition::new("ledger", 1), 8.into()),
        ])
        .await
        .unwrap_err();
    assert_eq!(err.error_code(), Some(ErrorCode::OffsetMetadataTooLarge));
    assert_eq!(
        member.fetch_offsets(None).await.unwrap()[&TopicPartition::new("ledger", 1)].offset,
        8
    );
    member.close().await.unwrap();
    // Closed: the stream ends after the final revocation.
    let mut last = Vec::new();
    while let Some(event) = events.recv().await {
        last.push(format!("{event:?}"));
    }
    assert!(last.iter().any(|e| e.starts_with("Revoked")), "{last:?}");
    // Now Empty: the admin may set offsets.
    admin
        .set_offsets("offsets", [(TopicPartition::new("ledger", 0), 0_i64)])
        .await
        .unwrap();
    assert_eq!(
        admin.fetch_offsets("offsets", None).await.unwrap()[&TopicPartition::new("ledger", 0)]
            .offset,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_count_change_rebalances_the_group() {
    let server = start_server();
    create_topic(&server, "grow", 2).await;
    let log = Log::default();
    let a = Harness::start(
        &server,
        "a",
        fast_member("grow", &["grow"], "cooperative-sticky"),
        &log,
    )
    .await;
    let b = Harness::start(
        &server,
        "b",
        fast_member("grow", &["grow"], "cooperative-sticky"),
        &log,
    )
    .await;
    let before = wait_converged(&[&a, &b], &partitions("grow", 2)).await;
    create_topic(&server, "grow", 6).await;
    let after = wait_converged(&[&a, &b], &partitions("grow", 6)).await;
    assert!(after > before);
    log.check_single_ownership();
    a.leave().await;
    b.leave().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inconsistent_assignors_are_a_fatal_error() {
    let server = start_server();
    create_topic(&server, "mixed", 2).await;
    let log = Log::default();
    let a = Harness::start(
        &server,
        "a",
        fast_member("mixed", &["mixed"], "range"),
        &log,
    )
    .await;
    wait_converged(&[&a], &partitions("mixed", 2)).await;
    let conn = connect(&server, "b").await;
    let (member, mut events) = fast_member("mixed", &["mixed"], "roundrobin")
        .start(conn)
        .unwrap();
    let event = tokio::time::timeout(PATIENCE, events.recv()).await.unwrap();
    match event {
        Some(Event::Error(e)) => {
            assert_eq!(e.error_code(), Some(ErrorCode::InconsistentGroupProtocol))
        }
        other => panic!("expected a fatal error, got {other:?}"),
    }
    assert!(events.recv().await.is_none());
    assert_eq!(member.state().phase, Phase::Failed);
    member.close().await.unwrap();
    a.leave().await;
}

#[test]
fn config_is_validated() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = start_server();
    rt.block_on(async {
        let conn = connect(&server, "x").await;
        let bad = [
            MemberConfig::new("", ["t"]),
            MemberConfig::new("g", ["t"]).assignors(Vec::new()),
            MemberConfig::new("g", ["t"]).heartbeat_interval(Duration::from_secs(20)),
            MemberConfig::new("g", ["t"])
                .assignor_names(["range", "range"])
                .unwrap(),
        ];
        for config in bad {
            assert!(matches!(
                config.start(conn.clone()),
                Err(ClientError::Config(_))
            ));
        }
        assert!(MemberConfig::new("g", ["t"])
            .assignor_names(["nope"])
            .is_err());
        let defaults = MemberConfig::new("g", ["t"]);
        assert_eq!(
            defaults.effective_heartbeat_interval(),
            Duration::from_secs(10) / 3
        );
        assert!(defaults.leaves_on_close());
        assert!(!defaults.clone().group_instance_id("i").leaves_on_close());
        assert!(defaults
            .group_instance_id("i")
            .leave_group_on_close(true)
            .leaves_on_close());
    });
}
