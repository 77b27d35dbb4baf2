//! The membership state machine against a scripted server, which decides every answer: the
//! exact requests the member sends for MEMBER_ID_REQUIRED, a coordinator error, the leader's
//! assignment, REBALANCE_IN_PROGRESS on SyncGroup, ILLEGAL_GENERATION on Heartbeat,
//! UNKNOWN_MEMBER_ID on JoinGroup and a fatal FENCED_INSTANCE_ID, and the events it emits.
//! The server names itself when the member asks FindCoordinator (as a single musterd does).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::scripted::{accept, hello, read_routed, write, Peer};
use muster_client::{
    Backoff, Connection, ConnectionConfig, ErrorCode, Event, MemberConfig, Phase, TopicPartition,
};
use muster_protocol::*;
use tokio::net::TcpListener;

/// The next request that is not a Heartbeat; heartbeats are answered with `heartbeat_code`
/// (given the heartbeat's generation) and recorded.
async fn next(
    peer: &mut Peer,
    heartbeats: &mut Vec<HeartbeatRequest>,
    heartbeat_code: impl Fn(i32) -> ErrorCode,
) -> (u32, Request) {
    loop {
        let frame = read_routed(peer).await;
        match frame.request {
            Request::Heartbeat(h) => {
                let code = heartbeat_code(h.generation_id);
                heartbeats.push(h);
                write(
                    peer,
                    frame.correlation_id,
                    HeartbeatResponse {
                        error_code: code.code(),
                    },
                )
                .await;
            }
            other => return (frame.correlation_id, other),
        }
    }
}

fn join_answer(code: ErrorCode, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse {
        error_code: code.code(),
        generation_id: -1,
        member_id: member_id.into(),
        ..JoinGroupResponse::default()
    }
}

fn tps(topic: &str, partitions: &[i32]) -> Vec<TopicPartitions> {
    vec![TopicPartitions {
        topic: topic.into(),
        partitions: partitions.to_vec(),
    }]
}

#[tokio::test]
async fn the_member_follows_the_protocol() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        let mut heartbeats = Vec::new();
        let none = |_| ErrorCode::None;

        // 1. First join: no member id yet.
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        let Request::JoinGroup(j) = req else {
            panic!("{req:?}")
        };
        assert_eq!(j.member_id, "");
        assert_eq!(j.group_id, "g");
        assert_eq!(j.topics, ["t"]);
        assert_eq!(j.session_timeout_ms, 3000);
        assert_eq!(j.rebalance_timeout_ms, 2000);
        assert_eq!(
            j.assignors
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>(),
            ["range"]
        );
        assert_eq!(j.reason.as_deref(), Some("initial join"));
        write(
            &mut peer,
            id,
            join_answer(ErrorCode::MemberIdRequired, "m-1"),
        )
        .await;

        // 2. At once again with the id; a coordinator error makes it back off and retry.
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        let Request::JoinGroup(j) = req else {
            panic!("{req:?}")
        };
        assert_eq!(j.member_id, "m-1");
        write(
            &mut peer,
            id,
            join_answer(ErrorCode::CoordinatorNotAvailable, "m-1"),
        )
        .await;
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        let Request::JoinGroup(j) = req else {
            panic!("{req:?}")
        };
        assert_eq!(j.member_id, "m-1");

        // 3. Leader of generation 1, with another member: it must run range.
        let members = ["m-1", "other"]
            .map(|m| JoinedMember {
                member_id: m.into(),
                topics: vec!["t".into()],
                ..JoinedMember::default()
            })
            .to_vec();
        write(
            &mut peer,
            id,
            JoinGroupResponse {
                error_code: 0,
                generation_id: 1,
                assignor: Some("range".into()),
                leader_id: "m-1".into(),
                member_id: "m-1".into(),
                skip_assignment: false,
                members,
                topics: vec![TopicInfo {
                    topic: "t".into(),
                    partitions: 4,
                }],
            },
        )
        .await;
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        let Request::SyncGroup(s) = req else {
            panic!("{req:?}")
        };
        assert_eq!((s.generation_id, s.member_id.as_str()), (1, "m-1"));
        assert_eq!(s.assignor.as_deref(), Some("range"));
        let by_member: Vec<(&str, &Vec<TopicPartitions>)> = s
            .assignments
            .iter()
            .map(|a| (a.member_id.as_str(), &a.partitions))
            .collect();
        assert_eq!(
            by_member,
            [("m-1", &tps("t", &[0, 1])), ("other", &tps("t", &[2, 3]))]
        );
        // …but the group is rebalancing again.
        write(
            &mut peer,
            id,
            SyncGroupResponse {
                error_code: ErrorCode::RebalanceInProgress.code(),
                ..Default::default()
            },
        )
        .await;

        // 4. Rejoin with the same id; a follower this time.
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        let Request::JoinGroup(j) = req else {
            panic!("{req:?}")
        };
        assert_eq!(j.member_id, "m-1");
        assert!(j.reason.unwrap().contains("REBALANCE_IN_PROGRESS"));
        write(
            &mut peer,
            id,
            JoinGroupResponse {
                error_code: 0,
                generation_id: 2,
                assignor: Some("range".into()),
                leader_id: "other".into(),
                member_id: "m-1".into(),
                ..JoinGroupResponse::default()
            },
        )
        .await;
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        let Request::SyncGroup(s) = req else {
            panic!("{req:?}")
        };
        assert_eq!(s.generation_id, 2);
        assert!(s.assignments.is_empty(), "followers send no assignment");
        write(
            &mut peer,
            id,
            SyncGroupResponse {
                error_code: 0,
                assignor: Some("range".into()),
                partitions: tps("t", &[0, 1]),
                user_data: vec![],
            },
        )
        .await;

        // 5. A heartbeat of generation 2 is answered ILLEGAL_GENERATION: the member loses its
        //    partitions and rejoins with the same member id.
        let illegal = |generation| {
            if generation == 2 {
                ErrorCode::IllegalGeneration
            } else {
                ErrorCode::None
            }
        };
        let (id, req) = next(&mut peer, &mut heartbeats, illegal).await;
        let Request::JoinGroup(j) = req else {
            panic!("{req:?}")
        };
        assert_eq!(j.member_id, "m-1");
        assert!(heartbeats
            .iter()
            .any(|h| h.generation_id == 2 && h.member_id == "m-1"));
        // 6. UNKNOWN_MEMBER_ID: forget the id, join afresh.
        write(
            &mut peer,
            id,
            join_answer(ErrorCode::UnknownMemberId, "m-1"),
        )
        .await;
        let (id, req) = next(&mut peer, &mut heartbeats, illegal).await;
        let Request::JoinGroup(j) = req else {
            panic!("{req:?}")
        };
        assert_eq!(j.member_id, "");
        // 7. A fatal answer ends the membership.
        write(&mut peer, id, join_answer(ErrorCode::FencedInstanceId, "")).await;
        // No heartbeat of generation 1 was ever answered with an error, and heartbeats never
        // went out without a member id.
        assert!(heartbeats.iter().all(|h| h.member_id == "m-1"));
        // Wait until the client closes the connection.
        while futures_util::StreamExt::next(&mut peer).await.is_some() {}
    });

    let conn = Connection::connect(ConnectionConfig::new(addr.to_string()).client_id("c"))
        .await
        .unwrap();
    let config = MemberConfig::new("g", ["t"])
        .session_timeout(Duration::from_millis(3000))
        .rebalance_timeout(Duration::from_millis(2000))
        .heartbeat_interval(Duration::from_millis(30))
        .retry_backoff(Backoff::fixed_exponential(
            Duration::from_millis(10),
            Duration::from_millis(50),
        ))
        .assignor_names(["range"])
        .unwrap();
    let (member, mut events) = config.start(conn).unwrap();
    let mut seen = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .unwrap()
    {
        seen.push(match event {
            Event::Assigned(p) => format!("assigned g{} {:?}", p.generation(), p.to_vec()),
            Event::Revoked(p) => format!("revoked {:?}", p.to_vec()),
            Event::Lost(p) => format!("lost g{} {:?}", p.generation(), p.to_vec()),
            Event::Error(e) => format!("error {:?}", e.error_code()),
            other => format!("{other:?}"),
        });
    }
    let tp = |p| TopicPartition::new("t", p);
    assert_eq!(
        seen,
        [
            format!("assigned g2 {:?}", vec![tp(0), tp(1)]),
            format!("lost g2 {:?}", vec![tp(0), tp(1)]),
            format!("error {:?}", Some(ErrorCode::FencedInstanceId)),
        ]
    );
    let state = member.state();
    assert_eq!(state.phase, Phase::Failed);
    assert!(state.assignment.is_empty());
    drop(member);
    server.await.unwrap();
}

/// A commit before the member has joined is refused locally, without a request: the scripted
/// server holds the member's JoinGroup unanswered, so the member cannot have joined yet.
#[tokio::test]
async fn a_commit_before_the_join_completes_is_refused_locally() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (joined_tx, joined_rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        let frame = read_routed(&mut peer).await;
        assert!(matches!(frame.request, Request::JoinGroup(_)), "{frame:?}");
        let _ = joined_tx.send(());
        // Nothing else may arrive while the join is held (no OffsetCommit).
        let next = tokio::time::timeout(Duration::from_millis(200), read_routed(&mut peer)).await;
        assert!(next.is_err(), "unexpected request: {next:?}");
    });
    let conn = Connection::connect(ConnectionConfig::new(addr.to_string()).client_id("c"))
        .await
        .unwrap();
    let config = MemberConfig::new("g", ["t"])
        .assignor_names(["range"])
        .unwrap();
    let (member, _events) = config.start(conn).unwrap();
    joined_rx.await.unwrap();
    let refused = member
        .commit_offsets([(TopicPartition::new("t", 0), 1_i64)])
        .await;
    assert!(
        matches!(refused, Err(muster_client::ClientError::NotMember { .. })),
        "{refused:?}"
    );
    server.await.unwrap();
}
