//! The connection: Hello, many requests in flight, answers out of order, timeouts, undecodable
//! answers, reconnecting with backoff. Scripted peers (a `TcpListener` speaking the protocol
//! through `muster-protocol`) make the server's behaviour exact; the real server shows the
//! same against `musterd`.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::scripted::{accept, hello, read, write};
use futures_util::{SinkExt, StreamExt};
use muster_client::{Backoff, ClientError, Connection, ConnectionConfig, ErrorCode};
use muster_protocol::*;
use tokio::net::TcpListener;

fn config(addr: SocketAddr) -> ConnectionConfig {
    ConnectionConfig::new(addr.to_string())
        .client_id("test-client")
        .request_timeout(Duration::from_secs(5))
        .backoff(Backoff::fixed_exponential(
            Duration::from_millis(20),
            Duration::from_millis(100),
        ))
}

fn topics_answer(names: &[String]) -> DescribeTopicsResponse {
    DescribeTopicsResponse {
        error_code: 0,
        topics: names
            .iter()
            .map(|t| TopicInfo {
                topic: t.clone(),
                partitions: 1,
            })
            .collect(),
    }
}

fn describe(topic: &str) -> DescribeTopicsRequest {
    DescribeTopicsRequest {
        topics: Some(vec![topic.to_owned()]),
    }
}

fn described_topic(r: Response) -> String {
    match r {
        Response::DescribeTopics(d) => d.topics[0].topic.clone(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn hello_carries_the_client_id_and_token() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        (hello(&mut peer, ErrorCode::None).await, peer)
    });
    let conn = Connection::connect(config(addr).auth_token("secret"))
        .await
        .unwrap();
    let (h, _peer) = peer.await.unwrap();
    assert_eq!(h.protocol_version, 1);
    assert_eq!(h.client_id, "test-client");
    assert_eq!(h.auth_token.as_deref(), Some("secret"));
    assert_eq!(conn.server_id(), "scripted");
    assert!(conn.is_connected());
}

#[tokio::test]
async fn answers_out_of_order_reach_their_callers() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(read(&mut peer).await);
        }
        for frame in held.into_iter().rev() {
            let Request::DescribeTopics(d) = frame.request else {
                panic!()
            };
            write(
                &mut peer,
                frame.correlation_id,
                topics_answer(&d.topics.unwrap()),
            )
            .await;
        }
    });
    let conn = Connection::connect(config(addr)).await.unwrap();
    let (a, b, c) = tokio::join!(
        conn.send(describe("a")),
        conn.send(describe("b")),
        conn.send(describe("c"))
    );
    assert_eq!(described_topic(a.unwrap()), "a");
    assert_eq!(described_topic(b.unwrap()), "b");
    assert_eq!(described_topic(c.unwrap()), "c");
}

#[tokio::test]
async fn a_timed_out_request_does_not_disturb_the_others() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        let slow = read(&mut peer).await;
        let fast = read(&mut peer).await;
        // Answer the slow one late (its caller gave up), then the fast one.
        tokio::time::sleep(Duration::from_millis(300)).await;
        write(
            &mut peer,
            slow.correlation_id,
            topics_answer(&["slow".into()]),
        )
        .await;
        write(
            &mut peer,
            fast.correlation_id,
            topics_answer(&["fast".into()]),
        )
        .await;
        let _ = peer.next().await; // Open until the client goes.
    });
    let conn = Connection::connect(config(addr)).await.unwrap();
    let started = Instant::now();
    let slow = conn.send_timeout(describe("slow"), Duration::from_millis(100));
    let fast = conn.send(describe("fast"));
    let (slow, fast) = tokio::join!(slow, fast);
    match slow {
        Err(ClientError::Timeout { request, after }) => {
            assert_eq!(request, "DescribeTopics");
            assert_eq!(after, Duration::from_millis(100));
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(described_topic(fast.unwrap()), "fast");
    assert!(conn.is_connected());
}

#[tokio::test]
async fn an_undecodable_answer_fails_only_its_request() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        let first = read(&mut peer).await;
        let second = read(&mut peer).await;
        // The first answer: its correlation id, then a tag that does not exist.
        let mut garbage = first.correlation_id.to_le_bytes().to_vec();
        garbage.extend_from_slice(&[0xff, 0xff, 0, 0]);
        peer.send(Bytes::from(garbage)).await.unwrap();
        write(
            &mut peer,
            second.correlation_id,
            topics_answer(&["ok".into()]),
        )
        .await;
    });
    let conn = Connection::connect(config(addr)).await.unwrap();
    let (first, second) = tokio::join!(conn.send(describe("x")), conn.send(describe("ok")));
    assert!(matches!(first, Err(ClientError::Decode(_))), "{first:?}");
    assert_eq!(described_topic(second.unwrap()), "ok");
}

#[tokio::test]
async fn a_refused_hello_is_reported_with_its_code() {
    for code in [
        ErrorCode::AuthenticationFailed,
        ErrorCode::UnsupportedVersion,
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut peer = accept(&listener).await;
            hello(&mut peer, code).await;
        });
        let err = Connection::connect(config(addr)).await.unwrap_err();
        assert_eq!(err.error_code(), Some(code), "{err}");
        assert!(!err.is_retriable());
        assert!(err.to_string().contains("supports 1..=1"), "{err}");
    }
}

#[tokio::test]
async fn reconnects_with_backoff_after_the_server_goes_away() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        // A request arrives; the server goes away without answering, and stays away a while.
        let _ = read(&mut peer).await;
        drop(peer);
        drop(listener);
        let _ = ready_tx.send(());
        tokio::time::sleep(Duration::from_millis(300)).await;
        let listener = TcpListener::bind(addr).await.unwrap();
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        let frame = read(&mut peer).await;
        write(
            &mut peer,
            frame.correlation_id,
            topics_answer(&["back".into()]),
        )
        .await;
        // Keep the socket open until the client is done.
        let _ = peer.next().await;
    });
    let conn = Connection::connect(config(addr)).await.unwrap();
    let lost = conn.send(describe("lost")).await;
    assert!(matches!(lost, Err(ClientError::Disconnected)), "{lost:?}");
    ready_rx.await.unwrap();
    // Refused connects are retried with backoff (20, 40, 80, 100, 100 … ms) until the server
    // is back, within the request's deadline.
    let started = Instant::now();
    let back = conn
        .send_timeout(describe("back"), Duration::from_secs(5))
        .await;
    assert_eq!(described_topic(back.unwrap()), "back");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn gives_up_with_the_connect_error_when_the_deadline_is_near() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut peer = accept(&listener).await;
        hello(&mut peer, ErrorCode::None).await;
        drop(peer);
        drop(listener);
    });
    let conn = Connection::connect(config(addr)).await.unwrap();
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < Duration::from_secs(5) {
        match conn
            .send_timeout(describe("x"), Duration::from_millis(150))
            .await
        {
            Err(ClientError::Io(e)) => {
                last = Some(e);
                break;
            }
            Err(other) => assert!(other.is_retriable(), "{other:?}"),
            Ok(r) => panic!("{r:?}"),
        }
    }
    let io = last.expect("an I/O error (connection refused)");
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
}

#[tokio::test]
async fn a_request_over_the_frame_limit_fails_alone() {
    let server = common::start_server();
    let conn = Connection::connect(config(server.local_addr()).max_frame_bytes(200))
        .await
        .unwrap();
    let big = DescribeTopicsRequest {
        topics: Some((0..50).map(|i| format!("topic-{i}")).collect()),
    };
    assert!(matches!(conn.send(big).await, Err(ClientError::Config(_))));
    assert!(matches!(
        conn.send(describe("x")).await,
        Ok(Response::DescribeTopics(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_in_flight_on_one_connection() {
    let server = common::start_server();
    let conn = common::connect(&server, "many").await;
    let requests = (0..200).map(|i| {
        let conn = conn.clone();
        async move { (i, conn.send(describe(&format!("t{i}"))).await) }
    });
    for (i, answer) in futures_util::future::join_all(requests).await {
        match answer.unwrap() {
            Response::DescribeTopics(d) => {
                assert!(d.topics.is_empty(), "{i}: unknown topics are left out")
            }
            other => panic!("{i}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_join_does_not_delay_later_requests() {
    let server = common::start_server();
    let join = |member_id: &str| JoinGroupRequest {
        group_id: "held".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        session_timeout_ms: 5_000,
        rebalance_timeout_ms: 5_000,
        topics: vec!["t".into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: vec![],
        }],
        owned_partitions: vec![],
        reason: None,
    };
    let as_join = |r: Response| match r {
        Response::JoinGroup(j) => j,
        other => panic!("{other:?}"),
    };
    // A first member joins and syncs: the group is Stable.
    let one = common::connect(&server, "one").await;
    let id1 = as_join(one.send(join("")).await.unwrap()).member_id;
    let joined = as_join(one.send(join(&id1)).await.unwrap());
    assert_eq!(joined.error_code, 0);
    one.send(SyncGroupRequest {
        group_id: "held".into(),
        generation_id: joined.generation_id,
        member_id: id1.clone(),
        group_instance_id: None,
        assignor: joined.assignor.clone(),
        assignments: vec![],
    })
    .await
    .unwrap();
    // A second member's JoinGroup is held at the barrier (the first has not rejoined)…
    let two = common::connect(&server, "two").await;
    let id2 = as_join(two.send(join("")).await.unwrap()).member_id;
    let held = tokio::spawn({
        let two = two.clone();
        let id2 = id2.clone();
        async move { two.send(join(&id2)).await }
    });
    // …while a later request on the same connection is answered at once.
    let started = Instant::now();
    let admin = muster_client::Admin::new(two.clone());
    let described = loop {
        let d = admin.describe_group("held").await.unwrap();
        if d.state == "PreparingRebalance" {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(!held.is_finished(), "the join is still held");
    assert!(described
        .members
        .iter()
        .any(|m| m.member_id == id1 && m.holding_rebalance));
    // The first member rejoins: both joins complete.
    let rejoined = as_join(one.send(join(&id1)).await.unwrap());
    let second = as_join(held.await.unwrap().unwrap());
    assert_eq!(rejoined.error_code, 0);
    assert_eq!(second.generation_id, rejoined.generation_id);
}

/// A server whose first socket says Hello and then nothing to its first `silent` requests
/// (kept open, as a cut network leaves it); its second socket answers one DescribeTopics with
/// the topic "again".
async fn silent_then_answering(
    silent: usize,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut dead = accept(&listener).await;
        hello(&mut dead, ErrorCode::None).await;
        for _ in 0..silent {
            let _ignored = read(&mut dead).await;
        }
        let mut fresh = accept(&listener).await;
        hello(&mut fresh, ErrorCode::None).await;
        let request = read(&mut fresh).await;
        write(
            &mut fresh,
            request.correlation_id,
            topics_answer(&["again".into()]),
        )
        .await;
        let _ = fresh.next().await;
        drop(dead);
    });
    (addr, server)
}

/// A socket on which the server says nothing for a long wait is closed, and the next request
/// reconnects: what a cut network (a TCP connection the OS still thinks open) needs.
#[tokio::test(start_paused = true)]
async fn a_socket_silent_for_a_whole_long_timeout_is_replaced() {
    let (addr, server) = silent_then_answering(1).await;
    let conn = Connection::connect(config(addr)).await.unwrap();
    match conn
        .send_timeout(describe("lost"), muster_client::SILENT_SOCKET)
        .await
    {
        Err(ClientError::Timeout { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(!conn.is_connected(), "the silent socket is closed");
    let again = conn
        .send_timeout(describe("again"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(described_topic(again), "again");
    drop(conn);
    server.await.unwrap();
}

/// Requests with timeouts shorter than [`muster_client::SILENT_SOCKET`], one after another on
/// a socket that says nothing, add up: once the socket has been silent that long, it is
/// replaced. (The chaos harness's 1-hour run: a member's FindCoordinator, 5 s at a time on one
/// silent bootstrap socket, failed for 80 s and the member never found its coordinator.)
#[tokio::test(start_paused = true)]
async fn short_timeouts_in_a_row_on_a_silent_socket_add_up_and_replace_it() {
    let (addr, server) = silent_then_answering(2).await;
    let conn = Connection::connect(config(addr)).await.unwrap();
    let short = muster_client::SILENT_SOCKET * 6 / 10;
    for (name, connected_after) in [("first", true), ("second", false)] {
        match conn.send_timeout(describe(name), short).await {
            Err(ClientError::Timeout { .. }) => {}
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(
            conn.is_connected(),
            connected_after,
            "after the {name} silent timeout"
        );
    }
    let again = conn
        .send_timeout(describe("again"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(described_topic(again), "again");
    drop(conn);
    server.await.unwrap();
}

#[test]
fn a_config_never_shows_its_token() {
    let shown = format!(
        "{:?}",
        ConnectionConfig::new("127.0.0.1:7450").auth_token("s3cret-token")
    );
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
}
