//! The membership state machine against a scripted server, which decides every answer: the
//! exact requests the member sends for MEMBER_ID_REQUIRED, a coordinator error, the leader's
//! assignment, REBALANCE_IN_PROGRESS on SyncGroup, the ownership epochs asked after an
//! assignment, ILLEGAL_GENERATION on Heartbeat, UNKNOWN_MEMBER_ID on JoinGroup and a fatal
//! FENCED_INSTANCE_ID, and the events it emits; a commit refused PARTITION_NOT_OWNED for some
//! partitions, and epochs asked again on demand.
//! The server names itself when the member asks FindCoordinator (as a single musterd does).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::scripted::{accept, hello, read_routed, write, Peer};
use muster_client::{
    Backoff, ClientError, Connection, ConnectionConfig, ErrorCode, Event, Events, MemberConfig,
    Phase, TopicPartition,
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

async fn recv(events: &mut Events) -> Result<Option<Event>, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(10), events.recv()).await
}

/// OwnershipEpochs' answer for generation `generation`: topic `t`, `(partition, epoch)`.
fn epochs_answer(generation: i32, epochs: &[(i32, i32)]) -> OwnershipEpochsResponse {
    OwnershipEpochsResponse {
        error_code: 0,
        generation_id: generation,
        topics: vec![TopicEpochs {
            topic: "t".into(),
            partitions: epochs
                .iter()
                .map(|&(partition, epoch)| PartitionEpoch { partition, epoch })
                .collect(),
        }],
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
        // The member asks the ownership epochs of what it got, before it says Assigned.
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        let Request::OwnershipEpochs(e) = req else {
            panic!("{req:?}")
        };
        assert_eq!(
            (e.group_id.as_str(), e.generation_id, e.member_id.as_str()),
            ("g", 2, "m-1")
        );
        write(&mut peer, id, epochs_answer(2, &[(0, 2), (1, 1)])).await;

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
            Event::Assigned(p) => format!(
                "assigned g{} {:?} epochs {:?}",
                p.generation(),
                p.to_vec(),
                p.ownership_epochs()
            ),
            Event::Revoked(p) => format!("revoked {:?}", p.to_vec()),
            Event::Lost(p) => format!(
                "lost g{} {:?} epochs {:?}",
                p.generation(),
                p.to_vec(),
                p.ownership_epochs()
            ),
            Event::Error(e) => format!("error {:?}", e.error_code()),
            other => format!("{other:?}"),
        });
    }
    let tp = |p| TopicPartition::new("t", p);
    let epochs = BTreeMap::from([(tp(0), 2), (tp(1), 1)]);
    assert_eq!(
        seen,
        [
            format!("assigned g2 {:?} epochs {epochs:?}", vec![tp(0), tp(1)]),
            format!("lost g2 {:?} epochs {epochs:?}", vec![tp(0), tp(1)]),
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

/// A commit answered PARTITION_NOT_OWNED for one partition (the others committed): the error
/// names it, the member drops it (`Lost`, with its epoch, not awaited) and stays in its
/// generation without rejoining; a partition it never owned is refused the same way, with no
/// `Lost`. Epochs the member could not get after its assignment are asked again on demand.
#[tokio::test]
async fn a_partition_not_owned_is_lost_and_epochs_are_asked_again_on_demand() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        let mut heartbeats = Vec::new();
        let none = |_| ErrorCode::None;
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        assert!(matches!(req, Request::JoinGroup(_)), "{req:?}");
        write(
            &mut peer,
            id,
            JoinGroupResponse {
                error_code: 0,
                generation_id: 3,
                assignor: Some("range".into()),
                leader_id: "m-1".into(),
                member_id: "m-1".into(),
                skip_assignment: false,
                members: vec![JoinedMember {
                    member_id: "m-1".into(),
                    topics: vec!["t".into()],
                    ..JoinedMember::default()
                }],
                topics: vec![TopicInfo {
                    topic: "t".into(),
                    partitions: 3,
                }],
            },
        )
        .await;
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        assert!(matches!(req, Request::SyncGroup(_)), "{req:?}");
        write(
            &mut peer,
            id,
            SyncGroupResponse {
                error_code: 0,
                assignor: Some("range".into()),
                partitions: tps("t", &[0, 1, 2]),
                user_data: vec![],
            },
        )
        .await;
        // The first ask fails: the member goes on without epochs.
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        assert!(matches!(req, Request::OwnershipEpochs(_)), "{req:?}");
        write(
            &mut peer,
            id,
            OwnershipEpochsResponse {
                error_code: ErrorCode::RebalanceInProgress.code(),
                generation_id: 3,
                topics: vec![],
            },
        )
        .await;
        // On demand.
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        let Request::OwnershipEpochs(e) = req else {
            panic!("{req:?}")
        };
        assert_eq!((e.generation_id, e.member_id.as_str()), (3, "m-1"));
        write(&mut peer, id, epochs_answer(3, &[(0, 3), (1, 3), (2, 7)])).await;
        // Partition 2 moved to a member the leader's assignor did not know of.
        let not_owned = ErrorCode::PartitionNotOwned.code();
        for refused in [2, 5] {
            let (id, req) = next(&mut peer, &mut heartbeats, none).await;
            let Request::OffsetCommit(c) = req else {
                panic!("{req:?}")
            };
            assert_eq!((c.generation_id, c.member_id.as_str()), (3, "m-1"));
            let results = c.topics[0]
                .partitions
                .iter()
                .map(|p| PartitionResult {
                    partition: p.partition,
                    error_code: if p.partition == refused { not_owned } else { 0 },
                })
                .collect();
            write(
                &mut peer,
                id,
                OffsetCommitResponse {
                    error_code: 0,
                    topics: vec![PartitionResults {
                        topic: "t".into(),
                        partitions: results,
                    }],
                },
            )
            .await;
        }
        // No JoinGroup: heartbeats go on in generation 3 until the member leaves.
        let (id, req) = next(&mut peer, &mut heartbeats, none).await;
        let Request::LeaveGroup(_) = req else {
            panic!("{req:?}")
        };
        write(&mut peer, id, LeaveGroupResponse::default()).await;
        assert!(heartbeats.iter().all(|h| h.generation_id == 3));
    });
    let conn = Connection::connect(ConnectionConfig::new(addr.to_string()).client_id("c"))
        .await
        .unwrap();
    let config = MemberConfig::new("g", ["t"])
        .session_timeout(Duration::from_millis(3000))
        .heartbeat_interval(Duration::from_millis(30))
        .assignor_names(["range"])
        .unwrap();
    let (member, mut events) = config.start(conn).unwrap();
    let tp = |p| TopicPartition::new("t", p);
    let Ok(Some(Event::Assigned(added))) = recv(&mut events).await else {
        panic!("expected Assigned")
    };
    assert_eq!(added.to_vec(), [tp(0), tp(1), tp(2)]);
    assert!(added.ownership_epochs().is_empty(), "the ask failed");
    assert_eq!(member.ownership_epoch(&tp(0)), None);
    drop(added);
    let epochs = member.fetch_ownership_epochs().await.unwrap();
    assert_eq!(epochs, BTreeMap::from([(tp(0), 3), (tp(1), 3), (tp(2), 7)]));
    assert_eq!(member.ownership_epoch(&tp(2)), Some(7));

    let refused = member
        .commit_offsets([(tp(0), 10_i64), (tp(1), 11), (tp(2), 12)])
        .await;
    match refused {
        Err(ClientError::PartitionsNotOwned {
            ref group_id,
            ref partitions,
        }) => assert_eq!(
            (group_id.as_str(), partitions.as_slice()),
            ("g", &[tp(2)][..])
        ),
        other => panic!("expected PartitionsNotOwned, got {other:?}"),
    }
    let Ok(Some(Event::Lost(lost))) = recv(&mut events).await else {
        panic!("expected Lost")
    };
    assert_eq!((lost.generation(), lost.to_vec()), (3, vec![tp(2)]));
    assert_eq!(lost.ownership_epoch(&tp(2)), Some(7));
    let state = member
        .wait_for_state(Duration::from_secs(10), |s| s.assignment.len() == 2)
        .await
        .unwrap();
    assert_eq!((state.phase, state.generation_id), (Phase::Stable, 3));
    assert_eq!(state.assignment, [tp(0), tp(1)]);
    assert_eq!(member.ownership_epoch(&tp(2)), None);
    assert_eq!(member.ownership_epoch(&tp(1)), Some(3));

    // Never owned: refused alike, nothing to lose.
    let refused = member.commit_offsets([(tp(0), 13_i64), (tp(5), 1)]).await;
    assert_eq!(
        refused.unwrap_err().error_code(),
        Some(ErrorCode::PartitionNotOwned)
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        events.try_recv().is_none(),
        "no event for a partition never owned"
    );
    assert_eq!(member.assignment(), [tp(0), tp(1)]);
    member.close().await.unwrap();
    server.await.unwrap();
}
