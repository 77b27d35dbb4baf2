//! A consumer-protocol member (`GroupProtocol::Consumer`, protocol-v1 §7) against a scripted
//! server that decides every answer: the join (epoch 0, its own UUID, the full state), the
//! first assignment and its acknowledgement, steady heartbeats that repeat nothing unchanged,
//! a revocation awaited and reported before new partitions are taken, fencing and an unknown
//! member id (Lost, then a rejoin with epoch 0 and the same id), a retried
//! UNRELEASED_INSTANCE_ID, fatal answers, leaving with epoch -1 or -2, offset commits fenced
//! by the member epoch, and a failover to another coordinator (scripted cluster nodes,
//! `common::fake_node`) that keeps the member id and epoch.
//!
//! Most scripts answer with a heartbeat interval of a minute, so every heartbeat they see is
//! one the member sent because it had news (a join, a changed owned set, a refused commit):
//! the exchange is exact, and no test waits for an interval.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::fake_node::{cluster_of, committed, epochs, names, Act, FakeNode};
use common::scripted::{accept, hello, read_routed, write, Peer};
use muster_client::{
    Backoff, Client, ClientConfig, ClientError, Connection, ConnectionConfig, ErrorCode, Event,
    Events, GroupMember, GroupProtocol, MemberConfig, Phase, TopicPartition,
};
use muster_protocol::*;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A heartbeat interval no test waits for.
const SLOW: i32 = 60_000;
/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long the application holds a `Revoked` or `Lost` before dropping it: a member that did
/// not wait for it would have sent its next heartbeat by then.
const HOLD: Duration = Duration::from_millis(100);

fn config() -> MemberConfig {
    MemberConfig::new("g", ["t"])
        .group_protocol(GroupProtocol::Consumer)
        .server_assignor("range")
        .rebalance_timeout(Duration::from_millis(2000))
        .retry_backoff(Backoff::fixed_exponential(
            Duration::from_millis(10),
            Duration::from_millis(50),
        ))
}

fn tps(partitions: &[i32]) -> Vec<TopicPartitions> {
    vec![TopicPartitions {
        topic: "t".into(),
        partitions: partitions.to_vec(),
    }]
}

fn tp(partitions: &[i32]) -> Vec<TopicPartition> {
    partitions
        .iter()
        .map(|&p| TopicPartition::new("t", p))
        .collect()
}

fn answer(
    member_id: &str,
    epoch: i32,
    interval_ms: i32,
    assignment: Option<&[i32]>,
) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse {
        error_code: 0,
        error_message: None,
        member_id: member_id.into(),
        member_epoch: epoch,
        heartbeat_interval_ms: interval_ms,
        assignment: assignment.map(tps),
    }
}

fn refused(code: ErrorCode) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse {
        error_code: code.code(),
        error_message: Some(format!("scripted {code}")),
        member_epoch: -1,
        ..ConsumerGroupHeartbeatResponse::default()
    }
}

/// The next request, which must be a ConsumerGroupHeartbeat. OwnershipEpochs before it (the
/// member asks after taking partitions) are answered with no epochs (the member goes on
/// without them); `epochs_are_asked_before_assigned_*` checks them.
async fn heartbeat(peer: &mut Peer) -> (u32, ConsumerGroupHeartbeatRequest) {
    loop {
        let frame = read_routed(peer).await;
        match frame.request {
            Request::ConsumerGroupHeartbeat(h) => return (frame.correlation_id, h),
            Request::OwnershipEpochs(e) => {
                let none = OwnershipEpochsResponse {
                    error_code: 0,
                    generation_id: e.generation_id,
                    topics: vec![],
                };
                write(peer, frame.correlation_id, none).await;
            }
            other => panic!("expected ConsumerGroupHeartbeat, got {other:?}"),
        }
    }
}

/// Reads the join (checking it carries the full state) and answers it with epoch `epoch` and
/// `assignment`, then reads the heartbeat that reports the assignment taken. Returns the member
/// id and that heartbeat's correlation id, for the caller to answer.
async fn join(peer: &mut Peer, epoch: i32, assignment: &[i32]) -> (String, u32) {
    let (id, join) = heartbeat(peer).await;
    assert_full_join(&join);
    let member_id = join.member_id.clone();
    write(peer, id, answer(&member_id, epoch, SLOW, Some(assignment))).await;
    let (id, ack) = heartbeat(peer).await;
    assert_eq!(
        (ack.member_id.as_str(), ack.member_epoch),
        (&*member_id, epoch)
    );
    assert_eq!(ack.owned_partitions, Some(tps(assignment)));
    (member_id, id)
}

fn assert_full_join(join: &ConsumerGroupHeartbeatRequest) {
    assert_eq!(join.group_id, "g");
    assert_eq!(join.member_epoch, 0);
    assert_uuid(&join.member_id);
    assert_eq!(join.subscribed_topics, Some(vec!["t".to_owned()]));
    assert_eq!(join.server_assignor.as_deref(), Some("range"));
    assert_eq!(join.rebalance_timeout_ms, 2000);
    assert_eq!(join.owned_partitions, Some(vec![]), "owns nothing yet");
}

/// A random UUID in its usual text form, as Kafka 4's clients make their member ids.
fn assert_uuid(id: &str) {
    let groups: Vec<usize> = id.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
    assert!(
        id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
        "{id}"
    );
}

/// A scripted server on `127.0.0.1:0`, and a connection to it.
async fn serve<F, Fut>(script: F) -> (Connection, JoinHandle<()>)
where
    F: FnOnce(Peer) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        script(peer).await;
    });
    let conn = Connection::connect(ConnectionConfig::new(addr.to_string()).client_id("c"))
        .await
        .unwrap();
    (conn, server)
}

async fn event(events: &mut Events) -> Event {
    tokio::time::timeout(PATIENCE, events.recv())
        .await
        .expect("an event in time")
        .expect("the stream goes on")
}

/// The next event, which must be `Assigned` with these partitions in this epoch.
async fn assigned(events: &mut Events, epoch: i32, partitions: &[i32]) {
    match event(events).await {
        Event::Assigned(p) => {
            assert_eq!((p.generation(), p.to_vec()), (epoch, tp(partitions)));
        }
        other => panic!("expected Assigned {partitions:?}, got {other:?}"),
    }
}

async fn wait_stable(member: &GroupMember, epoch: i32) -> muster_client::MemberState {
    member
        .wait_for_state(PATIENCE, |s| {
            s.phase == Phase::Stable && s.generation_id == epoch
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn joins_takes_its_first_assignment_and_heartbeats_at_the_servers_interval() {
    let (id_tx, id_rx) = oneshot::channel();
    let (conn, server) = serve(|mut peer| async move {
        let (id, join) = heartbeat(&mut peer).await;
        assert_full_join(&join);
        assert_eq!(join.group_instance_id, None);
        let member_id = join.member_id;
        id_tx.send(member_id.clone()).unwrap();
        write(&mut peer, id, answer(&member_id, 1, 20, Some(&[0, 1]))).await;
        // Having taken its partitions, the member says so at once, with nothing else.
        let (id, ack) = heartbeat(&mut peer).await;
        assert_eq!((ack.member_id.as_str(), ack.member_epoch), (&*member_id, 1));
        assert_eq!(ack.owned_partitions, Some(tps(&[0, 1])));
        assert_eq!((ack.subscribed_topics, ack.server_assignor), (None, None));
        assert_eq!(ack.rebalance_timeout_ms, -1);
        write(&mut peer, id, answer(&member_id, 1, 20, None)).await;
        // Then every 20 ms (the server's interval), repeating nothing unchanged.
        for _ in 0..3 {
            let (id, steady) = heartbeat(&mut peer).await;
            assert_eq!(
                (steady.member_id.as_str(), steady.member_epoch),
                (&*member_id, 1)
            );
            assert_eq!(steady.owned_partitions, None);
            assert_eq!(steady.subscribed_topics, None);
            write(&mut peer, id, answer(&member_id, 1, 20, None)).await;
        }
    })
    .await;
    let (member, mut events) = config().start(conn).unwrap();
    let member_id = id_rx.await.unwrap();
    assert_eq!(
        member.member_id(),
        member_id,
        "known before the server answers"
    );
    assigned(&mut events, 1, &[0, 1]).await;
    let state = wait_stable(&member, 1).await;
    assert_eq!(state.assignment, tp(&[0, 1]));
    assert_eq!(state.assignor.as_deref(), Some("range"));
    server.await.unwrap();
}

/// The server moves partitions away: the member emits `Revoked`, waits until the application
/// drops it, reports the smaller set at once, and only takes new partitions after that; an
/// answer that both takes and gives is carried out in the same order.
#[tokio::test]
async fn revokes_and_reports_before_it_takes_new_partitions() {
    let released = Arc::new(AtomicBool::new(false));
    let released_again = Arc::new(AtomicBool::new(false));
    let (r1, r2) = (Arc::clone(&released), Arc::clone(&released_again));
    let (conn, server) = serve(|mut peer| async move {
        let (m, id) = join(&mut peer, 1, &[0, 1, 2]).await;
        // 1 and 2 go to another member.
        write(&mut peer, id, answer(&m, 2, SLOW, Some(&[0]))).await;
        let (id, report) = heartbeat(&mut peer).await;
        assert!(
            r1.load(Ordering::SeqCst),
            "reported before the application let go"
        );
        assert_eq!(report.member_epoch, 2);
        assert_eq!(report.owned_partitions, Some(tps(&[0])));
        write(&mut peer, id, answer(&m, 3, SLOW, Some(&[0, 3]))).await;
        let (id, report) = heartbeat(&mut peer).await;
        assert_eq!(report.member_epoch, 3);
        assert_eq!(report.owned_partitions, Some(tps(&[0, 3])));
        // One answer that takes 0 and gives 4.
        write(&mut peer, id, answer(&m, 4, SLOW, Some(&[3, 4]))).await;
        let (id, report) = heartbeat(&mut peer).await;
        assert!(
            r2.load(Ordering::SeqCst),
            "reported before the application let go"
        );
        assert_eq!(
            report.owned_partitions,
            Some(tps(&[3])),
            "the release first"
        );
        write(&mut peer, id, answer(&m, 4, SLOW, None)).await;
        let (id, report) = heartbeat(&mut peer).await;
        assert_eq!(report.owned_partitions, Some(tps(&[3, 4])));
        write(&mut peer, id, answer(&m, 4, SLOW, None)).await;
    })
    .await;
    let (member, mut events) = config().start(conn).unwrap();
    assigned(&mut events, 1, &[0, 1, 2]).await;
    for (flag, epoch, revoked, left) in [
        (&released, 2, &[1, 2][..], &[0][..]),
        (&released_again, 4, &[0], &[3]),
    ] {
        match event(&mut events).await {
            Event::Revoked(p) => {
                assert_eq!((p.generation(), p.to_vec()), (epoch, tp(revoked)));
                let state = member.state();
                assert_eq!((state.phase, state.assignment), (Phase::Syncing, tp(left)));
                tokio::time::sleep(HOLD).await;
                flag.store(true, Ordering::SeqCst);
                drop(p);
            }
            other => panic!("expected Revoked, got {other:?}"),
        }
        if epoch == 2 {
            assigned(&mut events, 3, &[3]).await;
        }
    }
    assigned(&mut events, 4, &[4]).await;
    let state = wait_stable(&member, 4).await;
    assert_eq!(state.assignment, tp(&[3, 4]));
    server.await.unwrap();
}

/// FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID: everything is lost (the member waits for the
/// application to drop the `Lost`), then it rejoins with epoch 0, the same member id and the
/// full state.
async fn fenced_by(code: ErrorCode) {
    let dropped = Arc::new(AtomicBool::new(false));
    let d = Arc::clone(&dropped);
    let (conn, server) = serve(move |mut peer| async move {
        let (m, id) = join(&mut peer, 1, &[0, 1]).await;
        write(&mut peer, id, refused(code)).await;
        let (id, rejoin) = heartbeat(&mut peer).await;
        assert!(
            d.load(Ordering::SeqCst),
            "rejoined before the application let go"
        );
        assert_full_join(&rejoin);
        assert_eq!(rejoin.member_id, m, "the same member id");
        write(&mut peer, id, answer(&m, 5, SLOW, Some(&[1]))).await;
        let (id, report) = heartbeat(&mut peer).await;
        assert_eq!(
            (report.member_epoch, report.owned_partitions),
            (5, Some(tps(&[1])))
        );
        write(&mut peer, id, answer(&m, 5, SLOW, None)).await;
    })
    .await;
    let (member, mut events) = config().start(conn).unwrap();
    let member_id = member.member_id();
    assigned(&mut events, 1, &[0, 1]).await;
    match event(&mut events).await {
        Event::Lost(p) => {
            assert_eq!((p.generation(), p.to_vec()), (1, tp(&[0, 1])));
            let state = member.state();
            assert_eq!((state.phase, state.generation_id), (Phase::Joining, -1));
            assert!(state.assignment.is_empty());
            tokio::time::sleep(HOLD).await;
            dropped.store(true, Ordering::SeqCst);
        }
        other => panic!("expected Lost, got {other:?}"),
    }
    assigned(&mut events, 5, &[1]).await;
    let state = wait_stable(&member, 5).await;
    assert_eq!(state.member_id, member_id);
    server.await.unwrap();
}

#[tokio::test]
async fn a_fenced_epoch_loses_everything_and_rejoins_with_the_same_id() {
    fenced_by(ErrorCode::FencedMemberEpoch).await;
}

#[tokio::test]
async fn an_unknown_member_id_loses_everything_and_rejoins_with_the_same_id() {
    fenced_by(ErrorCode::UnknownMemberId).await;
}

/// `close()`: a final `Revoked` (not awaited), then the leave heartbeat: epoch -1 for a
/// dynamic member, -2 for a static one (a temporary leave), -1 for a static member told to
/// leave.
async fn leaves_with(instance: Option<&'static str>, leave: Option<bool>, epoch: i32) {
    let (conn, server) = serve(move |mut peer| async move {
        let (id, join) = heartbeat(&mut peer).await;
        assert_eq!(join.group_instance_id.as_deref(), instance);
        let m = join.member_id;
        write(&mut peer, id, answer(&m, 1, SLOW, Some(&[0]))).await;
        let (id, _) = heartbeat(&mut peer).await;
        write(&mut peer, id, answer(&m, 1, SLOW, None)).await;
        let (id, leave) = heartbeat(&mut peer).await;
        assert_eq!((leave.member_id.as_str(), leave.member_epoch), (&*m, epoch));
        assert_eq!(leave.group_instance_id.as_deref(), instance);
        assert_eq!(
            (leave.owned_partitions, leave.subscribed_topics),
            (None, None)
        );
        write(&mut peer, id, answer(&m, epoch, SLOW, None)).await;
    })
    .await;
    let mut config = config();
    if let Some(instance) = instance {
        config = config.group_instance_id(instance);
    }
    if let Some(leave) = leave {
        config = config.leave_group_on_close(leave);
    }
    let (member, mut events) = config.start(conn).unwrap();
    assigned(&mut events, 1, &[0]).await;
    wait_stable(&member, 1).await;
    let state = member.watch_state();
    member.close().await.unwrap();
    assert_eq!(state.borrow().phase, Phase::Closed);
    match event(&mut events).await {
        Event::Revoked(p) => assert_eq!(p.to_vec(), tp(&[0])),
        other => panic!("expected the final Revoked, got {other:?}"),
    }
    assert!(events.recv().await.is_none(), "the stream ends");
    server.await.unwrap();
}

#[tokio::test]
async fn close_leaves_with_epoch_minus_one() {
    leaves_with(None, None, -1).await;
}

#[tokio::test]
async fn close_of_a_static_member_leaves_with_epoch_minus_two() {
    leaves_with(Some("i-1"), None, -2).await;
    leaves_with(Some("i-1"), Some(true), -1).await;
}

/// Commits carry the member epoch as the generation, and the member id. STALE_MEMBER_EPOCH is
/// the caller's error, and makes the member heartbeat at once: a retry after that carries the
/// epoch the heartbeat brought.
#[tokio::test]
async fn commits_carry_the_member_epoch() {
    let (conn, server) = serve(|mut peer| async move {
        let (m, id) = join(&mut peer, 7, &[0]).await;
        write(&mut peer, id, answer(&m, 7, SLOW, None)).await;
        let commit = |frame: RequestFrame| match frame.request {
            Request::OffsetCommit(c) => (frame.correlation_id, c),
            other => panic!("expected OffsetCommit, got {other:?}"),
        };
        let (id, c) = commit(read_routed(&mut peer).await);
        assert_eq!((c.generation_id, c.member_id.as_str()), (7, &*m));
        assert_eq!(c.topics[0].partitions[0].offset, 10);
        write(&mut peer, id, OffsetCommitResponse::default()).await;
        // The epoch moved on at the server before the member heard of it.
        let (id, c) = commit(read_routed(&mut peer).await);
        assert_eq!(c.generation_id, 7);
        let stale = ErrorCode::StaleMemberEpoch.code();
        write(
            &mut peer,
            id,
            OffsetCommitResponse {
                error_code: stale,
                topics: vec![PartitionResults {
                    topic: "t".into(),
                    partitions: vec![PartitionResult {
                        partition: 0,
                        error_code: stale,
                    }],
                }],
            },
        )
        .await;
        // Not an interval later: at once.
        let (id, hb) = heartbeat(&mut peer).await;
        assert_eq!((hb.member_epoch, hb.owned_partitions), (7, None));
        write(&mut peer, id, answer(&m, 8, SLOW, None)).await;
        let (id, c) = commit(read_routed(&mut peer).await);
        assert_eq!((c.generation_id, c.member_id.as_str()), (8, &*m));
        write(&mut peer, id, OffsetCommitResponse::default()).await;
    })
    .await;
    let (member, mut events) = config().start(conn).unwrap();
    assigned(&mut events, 7, &[0]).await;
    wait_stable(&member, 7).await;
    let offset = |o: i64| [(TopicPartition::new("t", 0), o)];
    member.commit_offsets(offset(10)).await.unwrap();
    let stale = member.commit_offsets(offset(11)).await.unwrap_err();
    assert_eq!(
        stale.error_code(),
        Some(ErrorCode::StaleMemberEpoch),
        "{stale}"
    );
    wait_stable(&member, 8).await;
    member.commit_offsets(offset(11)).await.unwrap();
    server.await.unwrap();
}

/// Before announcing new partitions the member asks their ownership epochs (with its member
/// epoch as the generation): `Assigned` carries them, the handle reads them, `Revoked` carries
/// those it gives up. A commit answered PARTITION_NOT_OWNED for one partition: the error names
/// it, the member drops it (`Lost`, not awaited) and heartbeats at once to report the smaller
/// set, keeping its epoch.
#[tokio::test]
async fn epochs_are_asked_before_assigned_and_a_partition_not_owned_is_dropped() {
    let (conn, server) = serve(|mut peer| async move {
        let (id, join) = heartbeat(&mut peer).await;
        let m = join.member_id;
        write(&mut peer, id, answer(&m, 3, SLOW, Some(&[0, 1, 2]))).await;
        let frame = read_routed(&mut peer).await;
        let Request::OwnershipEpochs(e) = frame.request else {
            panic!("expected OwnershipEpochs first, got {frame:?}")
        };
        assert_eq!((e.generation_id, e.member_id.as_str()), (3, &*m));
        let epochs = OwnershipEpochsResponse {
            error_code: 0,
            generation_id: 3,
            topics: vec![TopicEpochs {
                topic: "t".into(),
                partitions: [(0, 3), (1, 2), (2, 3)]
                    .map(|(partition, epoch)| PartitionEpoch { partition, epoch })
                    .to_vec(),
            }],
        };
        write(&mut peer, frame.correlation_id, epochs).await;
        let (id, ack) = heartbeat(&mut peer).await;
        assert_eq!(ack.owned_partitions, Some(tps(&[0, 1, 2])));
        write(&mut peer, id, answer(&m, 3, SLOW, None)).await;
        // Partition 1 is refused.
        let frame = read_routed(&mut peer).await;
        let Request::OffsetCommit(c) = frame.request else {
            panic!("expected OffsetCommit, got {frame:?}")
        };
        assert_eq!(c.generation_id, 3);
        let results = c.topics[0]
            .partitions
            .iter()
            .map(|p| PartitionResult {
                partition: p.partition,
                error_code: if p.partition == 1 {
                    ErrorCode::PartitionNotOwned.code()
                } else {
                    0
                },
            })
            .collect();
        let refused = OffsetCommitResponse {
            error_code: 0,
            topics: vec![PartitionResults {
                topic: "t".into(),
                partitions: results,
            }],
        };
        write(&mut peer, frame.correlation_id, refused).await;
        // At once: the smaller set.
        let (id, report) = heartbeat(&mut peer).await;
        assert_eq!(
            (report.member_epoch, report.owned_partitions),
            (3, Some(tps(&[0, 2])))
        );
        write(&mut peer, id, answer(&m, 4, SLOW, Some(&[0]))).await;
        let (id, report) = heartbeat(&mut peer).await;
        assert_eq!(report.owned_partitions, Some(tps(&[0])));
        write(&mut peer, id, answer(&m, 4, SLOW, None)).await;
    })
    .await;
    let (member, mut events) = config().start(conn).unwrap();
    let t = |p| TopicPartition::new("t", p);
    match event(&mut events).await {
        Event::Assigned(p) => {
            assert_eq!(p.to_vec(), tp(&[0, 1, 2]));
            assert_eq!(
                (p.ownership_epoch(&t(0)), p.ownership_epoch(&t(1))),
                (Some(3), Some(2))
            );
        }
        other => panic!("expected Assigned, got {other:?}"),
    }
    wait_stable(&member, 3).await;
    assert_eq!(member.ownership_epochs().len(), 3);
    let refused = member
        .commit_offsets([(t(0), 5_i64), (t(1), 6), (t(2), 7)])
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ClientError::PartitionsNotOwned { partitions, .. } if partitions == &tp(&[1])),
        "{refused:?}"
    );
    match event(&mut events).await {
        Event::Lost(p) => {
            assert_eq!((p.generation(), p.to_vec()), (3, tp(&[1])));
            assert_eq!(p.ownership_epoch(&t(1)), Some(2));
        }
        other => panic!("expected Lost, got {other:?}"),
    }
    // The server takes 2 away too: Revoked carries its epoch.
    match event(&mut events).await {
        Event::Revoked(p) => {
            assert_eq!((p.generation(), p.to_vec()), (4, tp(&[2])));
            assert_eq!(p.ownership_epoch(&t(2)), Some(3));
        }
        other => panic!("expected Revoked, got {other:?}"),
    }
    let state = wait_stable(&member, 4).await;
    assert_eq!(state.assignment, tp(&[0]));
    assert_eq!(
        member.ownership_epochs(),
        std::collections::BTreeMap::from([(t(0), 3)])
    );
    server.await.unwrap();
}

/// UNRELEASED_INSTANCE_ID (the instance id's previous member still holds partitions): the
/// join is retried, with backoff, with the same member id, until the server lets it in.
#[tokio::test]
async fn an_unreleased_instance_id_is_retried() {
    let (conn, server) = serve(|mut peer| async move {
        let mut ids = Vec::new();
        for _ in 0..2 {
            let (id, join) = heartbeat(&mut peer).await;
            assert_full_join(&join);
            ids.push(join.member_id);
            write(&mut peer, id, refused(ErrorCode::UnreleasedInstanceId)).await;
        }
        let (m, id) = join(&mut peer, 1, &[0]).await;
        assert!(ids.iter().all(|id| *id == m), "{ids:?} then {m}");
        write(&mut peer, id, answer(&m, 1, SLOW, None)).await;
    })
    .await;
    let (member, mut events) = config().group_instance_id("i-1").start(conn).unwrap();
    assigned(&mut events, 1, &[0]).await;
    wait_stable(&member, 1).await;
    server.await.unwrap();
}

/// Answers the member cannot get past stop it, as the classic member's fatal errors do: what
/// it owns is lost, then `Event::Error`, then the stream ends. UNSUPPORTED_ASSIGNOR at the
/// join; GROUP_AUTHORIZATION_FAILED later; a server that does not speak the consumer protocol
/// (`Response::Error` INVALID_REQUEST).
async fn stops_on(code: ErrorCode, after_join: bool, as_error_response: bool) {
    let (conn, server) = serve(move |mut peer| async move {
        let (id, join) = heartbeat(&mut peer).await;
        let id = if after_join {
            write(&mut peer, id, answer(&join.member_id, 1, SLOW, Some(&[0]))).await;
            heartbeat(&mut peer).await.0
        } else {
            id
        };
        if as_error_response {
            write(&mut peer, id, Response::error(code, "unknown request")).await;
        } else {
            write(&mut peer, id, refused(code)).await;
        }
        // Nothing more: the client goes away.
        while futures_util::StreamExt::next(&mut peer).await.is_some() {}
    })
    .await;
    let (member, mut events) = config().start(conn).unwrap();
    if after_join {
        assigned(&mut events, 1, &[0]).await;
        match event(&mut events).await {
            Event::Lost(p) => assert_eq!(p.to_vec(), tp(&[0])),
            other => panic!("expected Lost, got {other:?}"),
        }
    }
    match event(&mut events).await {
        Event::Error(err) => assert_eq!(err.error_code(), Some(code), "{err}"),
        other => panic!("expected Error, got {other:?}"),
    }
    assert!(events.recv().await.is_none());
    let state = member.state();
    assert_eq!((state.phase, state.generation_id), (Phase::Failed, -1));
    assert!(matches!(
        member
            .commit_offsets([(TopicPartition::new("t", 0), 1_i64)])
            .await,
        Err(ClientError::NotMember { .. })
    ));
    drop(member);
    server.await.unwrap();
}

#[tokio::test]
async fn fatal_answers_stop_the_member() {
    stops_on(ErrorCode::UnsupportedAssignor, false, false).await;
    stops_on(ErrorCode::GroupAuthorizationFailed, true, false).await;
    stops_on(ErrorCode::InvalidRequest, false, true).await;
}

/// How the first coordinator goes away.
#[derive(Clone, Copy, Debug)]
enum Gone {
    /// It answers a heartbeat NOT_COORDINATOR (the group moved).
    Moved,
    /// It closes the connection and refuses new ones (the node died).
    Died,
}

/// Node A names B as the coordinator until B goes away, then itself. The member heartbeats
/// on at A with the same member id and epoch, its first heartbeat there carrying the full
/// state; no Revoked, no Lost, no rejoin. Its commits and its leave go to A.
async fn fails_over(gone: Gone) {
    let go = Arc::new(AtomicBool::new(false));
    let moved = Arc::new(AtomicBool::new(false));
    let addrs: Arc<OnceLock<(SocketAddr, SocketAddr)>> = Arc::new(OnceLock::new());
    let a = FakeNode::start("a", {
        let (moved, addrs) = (Arc::clone(&moved), Arc::clone(&addrs));
        Arc::new(move |request| {
            let (a, b) = *addrs.get().unwrap();
            Act::Answer(match request {
                Request::FindCoordinator(_) if moved.load(Ordering::SeqCst) => names("a", a),
                Request::FindCoordinator(_) => names("b", b),
                Request::DescribeCluster(_) => cluster_of(&[("a", a), ("b", b)]),
                Request::ConsumerGroupHeartbeat(h) => {
                    answer(&h.member_id, h.member_epoch, 20, None).into()
                }
                Request::OffsetCommit(_) => committed(),
                _ => return Act::Hold,
            })
        })
    })
    .await;
    let b = FakeNode::start("b", {
        let (go, moved) = (Arc::clone(&go), Arc::clone(&moved));
        Arc::new(move |request| match request {
            Request::ConsumerGroupHeartbeat(h) if h.member_epoch == 0 => {
                Act::Answer(answer(&h.member_id, 4, 20, Some(&[0, 1])).into())
            }
            Request::ConsumerGroupHeartbeat(_) if go.load(Ordering::SeqCst) => {
                moved.store(true, Ordering::SeqCst);
                match gone {
                    Gone::Moved => Act::Answer(refused(ErrorCode::NotCoordinator).into()),
                    Gone::Died => Act::Die,
                }
            }
            Request::ConsumerGroupHeartbeat(h) => {
                Act::Answer(answer(&h.member_id, 4, 20, None).into())
            }
            Request::OffsetCommit(_) => Act::Answer(committed()),
            Request::OwnershipEpochs(e) => Act::Answer(epochs(e, &[0, 1])),
            _ => Act::Hold,
        })
    })
    .await;
    addrs.set((a.addr, b.addr)).unwrap();

    let client = Client::connect(ClientConfig::new([a.addr.to_string()]).configure(|c| {
        c.client_id("c")
            .request_timeout(Duration::from_secs(5))
            .backoff(Backoff::fixed_exponential(
                Duration::from_millis(10),
                Duration::from_millis(50),
            ))
    }))
    .await
    .unwrap();
    let (member, mut events) = config().start(client).unwrap();
    assigned(&mut events, 4, &[0, 1]).await;
    let state = wait_stable(&member, 4).await;
    assert_eq!(member.coordinator().unwrap().node_id, "b");
    assert_eq!(
        member.ownership_epoch(&TopicPartition::new("t", 1)),
        Some(4)
    );
    member
        .commit_offsets([(TopicPartition::new("t", 0), 10_i64)])
        .await
        .unwrap();

    go.store(true, Ordering::SeqCst);
    let is_heartbeat = |r: &Request| matches!(r, Request::ConsumerGroupHeartbeat(_));
    a.wait_for("two heartbeats", |r| {
        r.iter().filter(|r| is_heartbeat(r)).count() >= 2
    })
    .await;
    assert_eq!(member.coordinator().unwrap().node_id, "a", "{gone:?}");
    let at_a: Vec<ConsumerGroupHeartbeatRequest> = a
        .requests()
        .into_iter()
        .filter_map(|r| match r {
            Request::ConsumerGroupHeartbeat(h) => Some(h),
            _ => None,
        })
        .collect();
    let (first, second) = (&at_a[0], &at_a[1]);
    assert_eq!(
        (first.member_id.as_str(), first.member_epoch),
        (&*state.member_id, 4)
    );
    assert_eq!(
        first.subscribed_topics,
        Some(vec!["t".to_owned()]),
        "the full state"
    );
    assert_eq!(first.owned_partitions, Some(tps(&[0, 1])));
    assert_eq!(
        (second.member_epoch, second.owned_partitions.as_ref()),
        (4, None)
    );
    let after = member.state();
    assert_eq!((after.phase, after.generation_id), (Phase::Stable, 4));
    assert_eq!(after.assignment, tp(&[0, 1]));
    assert!(events.try_recv().is_none(), "no Revoked, Lost or Assigned");
    member
        .commit_offsets([(TopicPartition::new("t", 0), 11_i64)])
        .await
        .unwrap();
    member.close().await.unwrap();
    b.stop_listening();

    for request in a.requests() {
        match request {
            Request::FindCoordinator(_) | Request::DescribeCluster(_) => {}
            Request::ConsumerGroupHeartbeat(h) => {
                assert_eq!(h.member_id, state.member_id);
                assert!(h.member_epoch == 4 || h.member_epoch == -1, "{h:?}");
            }
            Request::OffsetCommit(c) => {
                assert_eq!(
                    (c.generation_id, c.member_id.as_str()),
                    (4, &*state.member_id)
                );
                assert_eq!(c.topics[0].partitions[0].offset, 11);
            }
            other => panic!("node a got {other:?}"),
        }
    }
    let leaves =
        |h: &Request| matches!(h, Request::ConsumerGroupHeartbeat(h) if h.member_epoch == -1);
    assert_eq!(a.requests().iter().filter(|r| leaves(r)).count(), 1);
    let joins =
        |h: &Request| matches!(h, Request::ConsumerGroupHeartbeat(h) if h.member_epoch == 0);
    assert_eq!(
        b.requests().iter().filter(|r| joins(r)).count(),
        1,
        "joined once"
    );
}

#[tokio::test]
async fn a_moved_coordinator_is_followed_with_the_same_member_id_and_epoch() {
    fails_over(Gone::Moved).await;
}

#[tokio::test]
async fn a_dead_coordinator_is_followed_with_the_same_member_id_and_epoch() {
    fails_over(Gone::Died).await;
}
