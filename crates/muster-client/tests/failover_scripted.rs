//! Routing and failover against scripted cluster nodes (`common::fake_node`), which decide
//! every answer: a member finds its coordinator with FindCoordinator from its bootstrap list,
//! and when the coordinator moves (NOT_COORDINATOR), dies (a closed connection, refused
//! reconnects) or is still loading (COORDINATOR_LOAD_IN_PROGRESS), it finds it again and
//! resends the request it had in flight, with the same member id and generation, never
//! rejoining. Also: a bootstrap list whose first node is down, a single node that advertises a
//! name the client cannot reach, and the admin API's per-coordinator requests and cluster-wide
//! group listing.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::fake_node::*;
use muster_client::{
    Admin, Backoff, Client, ClientConfig, ErrorCode, Event, Events, GroupMember, MemberConfig,
    Phase, TopicPartition,
};
use muster_protocol::*;

fn member_config() -> MemberConfig {
    MemberConfig::new("g", ["t"])
        .session_timeout(Duration::from_millis(3000))
        .rebalance_timeout(Duration::from_millis(2000))
        .heartbeat_interval(Duration::from_millis(30))
        .retry_backoff(Backoff::fixed_exponential(
            Duration::from_millis(10),
            Duration::from_millis(50),
        ))
        .assignor_names(["range"])
        .unwrap()
}

async fn client(bootstrap: &[String]) -> Client {
    let config = ClientConfig::new(bootstrap.iter().cloned()).configure(|c| {
        c.client_id("c")
            .request_timeout(Duration::from_secs(5))
            .backoff(Backoff::fixed_exponential(
                Duration::from_millis(10),
                Duration::from_millis(50),
            ))
    });
    Client::connect(config).await.unwrap()
}

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new("t", partition)
}

async fn stable(member: &GroupMember) -> muster_client::MemberState {
    member
        .wait_for_state(Duration::from_secs(10), |s| s.phase == Phase::Stable)
        .await
        .unwrap()
}

/// The events so far: exactly one `Assigned` (the first join), nothing revoked or lost
/// (call it before `close()`, which revokes everything).
fn assert_assigned_once(events: &mut Events, partitions: &[i32]) {
    let mut seen = Vec::new();
    while let Some(event) = events.try_recv() {
        seen.push(event);
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    let Event::Assigned(assigned) = &seen[0] else {
        panic!("{seen:?}")
    };
    let expected: Vec<TopicPartition> = partitions.iter().map(|p| tp(*p)).collect();
    assert_eq!(assigned.partitions(), expected.as_slice());
}

fn left() -> Response {
    LeaveGroupResponse::default().into()
}

/// Node A names B as the coordinator; B answers a heartbeat NOT_COORDINATOR, and A names
/// itself from then on. The member heartbeats and commits at A in the same generation with
/// the same member id, and sends A no JoinGroup or SyncGroup.
#[tokio::test]
async fn a_moved_coordinator_is_found_again_without_a_rebalance() {
    let moved = Arc::new(AtomicBool::new(false));
    let move_now = Arc::new(AtomicBool::new(false));
    let addrs: Arc<OnceLock<(SocketAddr, SocketAddr)>> = Arc::new(OnceLock::new());
    let a = FakeNode::start("a", {
        let (moved, addrs) = (Arc::clone(&moved), Arc::clone(&addrs));
        Arc::new(move |request| {
            let (a, b) = *addrs.get().unwrap();
            Act::Answer(match request {
                Request::FindCoordinator(_) if moved.load(Ordering::SeqCst) => names("a", a),
                Request::FindCoordinator(_) => names("b", b),
                Request::DescribeCluster(_) => cluster_of(&[("a", a), ("b", b)]),
                Request::Heartbeat(_) => heartbeat(ErrorCode::None),
                Request::OffsetCommit(_) => committed(),
                Request::LeaveGroup(_) => left(),
                _ => return Act::Hold,
            })
        })
    })
    .await;
    let b = FakeNode::start("b", {
        let (moved, move_now) = (Arc::clone(&moved), Arc::clone(&move_now));
        Arc::new(move |request| {
            Act::Answer(match request {
                Request::JoinGroup(j) if j.member_id.is_empty() => member_id_required("m-1"),
                Request::JoinGroup(_) => joined("m-1", 5, 2),
                Request::SyncGroup(_) => synced(&[0, 1]),
                Request::OwnershipEpochs(e) => epochs(e, &[0, 1]),
                Request::Heartbeat(_) if move_now.load(Ordering::SeqCst) => {
                    moved.store(true, Ordering::SeqCst);
                    heartbeat(ErrorCode::NotCoordinator)
                }
                Request::Heartbeat(_) => heartbeat(ErrorCode::None),
                Request::OffsetCommit(_) => committed(),
                _ => return Act::Hold,
            })
        })
    })
    .await;
    addrs.set((a.addr, b.addr)).unwrap();

    let (member, mut events) = member_config()
        .start(client(&[a.addr.to_string()]).await)
        .unwrap();
    let state = stable(&member).await;
    assert_eq!((state.member_id.as_str(), state.generation_id), ("m-1", 5));
    assert_eq!(member.coordinator().unwrap().node_id, "b");
    member.commit_offsets([(tp(0), 10_i64)]).await.unwrap();

    move_now.store(true, Ordering::SeqCst);
    a.wait_for("two heartbeats", |r| {
        r.iter()
            .filter(|r| matches!(r, Request::Heartbeat(_)))
            .count()
            >= 2
    })
    .await;
    member.commit_offsets([(tp(0), 11_i64)]).await.unwrap();
    assert_eq!(member.coordinator().unwrap().node_id, "a");
    let state = member.state();
    assert_eq!(
        (state.phase, state.member_id.as_str(), state.generation_id),
        (Phase::Stable, "m-1", 5)
    );
    assert_eq!(state.assignment, [tp(0), tp(1)]);
    assert_assigned_once(&mut events, &[0, 1]);
    member.close().await.unwrap();

    for request in a.requests() {
        match request {
            Request::FindCoordinator(f) => assert_eq!(f.key, "g"),
            Request::DescribeCluster(_) => {}
            Request::Heartbeat(h) => {
                assert_eq!((h.member_id.as_str(), h.generation_id), ("m-1", 5))
            }
            Request::OffsetCommit(c) => {
                assert_eq!((c.member_id.as_str(), c.generation_id), ("m-1", 5));
                assert_eq!(c.topics[0].partitions[0].offset, 11);
            }
            Request::LeaveGroup(l) => assert_eq!(l.members[0].member_id, "m-1"),
            other => panic!("node a got {other:?}"),
        }
    }
    assert_eq!(a.count("LeaveGroup"), 1);
    assert_eq!((b.count("JoinGroup"), b.count("SyncGroup")), (2, 1));
    assert_eq!(b.count("OffsetCommit"), 1);
    assert!(matches!(b.requests().last(), Some(Request::Heartbeat(_))));
}

/// B, the coordinator, closes the connection and is gone (connects refused); A still names B
/// twice (its lease has not expired yet), then itself. The member keeps looking (with backoff)
/// and heartbeats on at A in its generation.
#[tokio::test]
async fn a_coordinator_that_closes_the_connection_is_found_again() {
    let kill = Arc::new(AtomicBool::new(false));
    let lookups_after_death = Arc::new(AtomicUsize::new(0));
    let addrs: Arc<OnceLock<(SocketAddr, SocketAddr)>> = Arc::new(OnceLock::new());
    let b_dead = Arc::new(AtomicBool::new(false));
    let a = FakeNode::start("a", {
        let (addrs, b_dead, lookups) = (
            Arc::clone(&addrs),
            Arc::clone(&b_dead),
            Arc::clone(&lookups_after_death),
        );
        Arc::new(move |request| {
            let (a, b) = *addrs.get().unwrap();
            Act::Answer(match request {
                Request::FindCoordinator(_) if b_dead.load(Ordering::SeqCst) => {
                    if lookups.fetch_add(1, Ordering::SeqCst) < 2 {
                        names("b", b) // stale: the dead node's lease is still held
                    } else {
                        names("a", a)
                    }
                }
                Request::FindCoordinator(_) => names("b", b),
                Request::DescribeCluster(_) => cluster_of(&[("a", a), ("b", b)]),
                Request::Heartbeat(_) => heartbeat(ErrorCode::None),
                Request::LeaveGroup(_) => left(),
                _ => return Act::Hold,
            })
        })
    })
    .await;
    let b = FakeNode::start("b", {
        let (kill, b_dead) = (Arc::clone(&kill), Arc::clone(&b_dead));
        Arc::new(move |request| match request {
            Request::Heartbeat(_) if kill.load(Ordering::SeqCst) => {
                b_dead.store(true, Ordering::SeqCst);
                Act::Die
            }
            Request::JoinGroup(j) if j.member_id.is_empty() => {
                Act::Answer(member_id_required("m-1"))
            }
            Request::JoinGroup(_) => Act::Answer(joined("m-1", 3, 2)),
            Request::SyncGroup(_) => Act::Answer(synced(&[0, 1])),
            Request::OwnershipEpochs(e) => Act::Answer(epochs(e, &[0, 1])),
            Request::Heartbeat(_) => Act::Answer(heartbeat(ErrorCode::None)),
            _ => Act::Hold,
        })
    })
    .await;
    addrs.set((a.addr, b.addr)).unwrap();

    let (member, mut events) = member_config()
        .start(client(&[a.addr.to_string()]).await)
        .unwrap();
    stable(&member).await;
    kill.store(true, Ordering::SeqCst);
    a.wait_for("a heartbeat", |r| {
        r.iter().any(|r| matches!(r, Request::Heartbeat(_)))
    })
    .await;
    b.stop_listening();
    assert!(b.is_dead());
    assert!(lookups_after_death.load(Ordering::SeqCst) >= 3);
    assert_eq!(member.coordinator().unwrap().node_id, "a");
    let state = member.state();
    assert_eq!(
        (state.phase, state.member_id.as_str(), state.generation_id),
        (Phase::Stable, "m-1", 3)
    );
    assert_assigned_once(&mut events, &[0, 1]);
    member.close().await.unwrap();
    for request in a.requests() {
        match request {
            Request::FindCoordinator(_) | Request::DescribeCluster(_) | Request::LeaveGroup(_) => {}
            Request::Heartbeat(h) => {
                assert_eq!((h.member_id.as_str(), h.generation_id), ("m-1", 3))
            }
            other => panic!("node a got {other:?}"),
        }
    }
}

/// The JoinGroup held at B's barrier is lost with B: the member sends it again, with its
/// member id, to A, the new coordinator. A answers the SyncGroup LOAD_IN_PROGRESS first: the
/// same SyncGroup (generation, assignments) is sent again.
#[tokio::test]
async fn a_held_join_and_a_refused_sync_are_resent_to_the_new_coordinator() {
    let addrs: Arc<OnceLock<(SocketAddr, SocketAddr)>> = Arc::new(OnceLock::new());
    let b_dead = Arc::new(AtomicBool::new(false));
    let syncs = Arc::new(AtomicUsize::new(0));
    let a = FakeNode::start("a", {
        let (addrs, b_dead, syncs) = (Arc::clone(&addrs), Arc::clone(&b_dead), Arc::clone(&syncs));
        Arc::new(move |request| {
            let (a, b) = *addrs.get().unwrap();
            Act::Answer(match request {
                Request::FindCoordinator(_) if b_dead.load(Ordering::SeqCst) => names("a", a),
                Request::FindCoordinator(_) => names("b", b),
                Request::DescribeCluster(_) => cluster_of(&[("a", a), ("b", b)]),
                Request::JoinGroup(_) => joined("m-1", 1, 2),
                Request::SyncGroup(_) if syncs.fetch_add(1, Ordering::SeqCst) == 0 => {
                    sync_error(ErrorCode::CoordinatorLoadInProgress)
                }
                Request::SyncGroup(_) => synced(&[0, 1]),
                Request::OwnershipEpochs(e) => epochs(e, &[0, 1]),
                Request::Heartbeat(_) => heartbeat(ErrorCode::None),
                Request::LeaveGroup(_) => left(),
                _ => return Act::Hold,
            })
        })
    })
    .await;
    let b = FakeNode::start("b", {
        let b_dead = Arc::clone(&b_dead);
        Arc::new(move |request| match request {
            Request::JoinGroup(j) if j.member_id.is_empty() => {
                Act::Answer(member_id_required("m-1"))
            }
            Request::JoinGroup(_) => {
                b_dead.store(true, Ordering::SeqCst);
                Act::Die
            }
            _ => Act::Hold,
        })
    })
    .await;
    addrs.set((a.addr, b.addr)).unwrap();

    let (member, mut events) = member_config()
        .start(client(&[a.addr.to_string()]).await)
        .unwrap();
    let state = stable(&member).await;
    assert_eq!((state.member_id.as_str(), state.generation_id), ("m-1", 1));
    assert_assigned_once(&mut events, &[0, 1]);
    member.close().await.unwrap();
    b.stop_listening();

    let joins: Vec<JoinGroupRequest> = a
        .requests()
        .into_iter()
        .filter_map(|r| match r {
            Request::JoinGroup(j) => Some(j),
            _ => None,
        })
        .collect();
    assert_eq!(joins.len(), 1, "{joins:?}");
    assert_eq!(joins[0].member_id, "m-1");
    let syncs: Vec<SyncGroupRequest> = a
        .requests()
        .into_iter()
        .filter_map(|r| match r {
            Request::SyncGroup(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(syncs.len(), 2, "{syncs:?}");
    assert_eq!(syncs[0], syncs[1], "the same SyncGroup, resent");
    assert_eq!(
        (syncs[0].member_id.as_str(), syncs[0].generation_id),
        ("m-1", 1)
    );
    assert_eq!(syncs[0].assignments.len(), 1, "the leader's assignment");
    assert_eq!(b.count("JoinGroup"), 2);
}

/// A single node that answers FindCoordinator with itself.
async fn single_node(node_id: &'static str) -> FakeNode {
    let me: Arc<OnceLock<SocketAddr>> = Arc::new(OnceLock::new());
    let node = FakeNode::start(node_id, {
        let me = Arc::clone(&me);
        Arc::new(move |request| {
            Act::Answer(match request {
                Request::FindCoordinator(_) => names(node_id, *me.get().unwrap()),
                Request::JoinGroup(j) if j.member_id.is_empty() => member_id_required("m-1"),
                Request::JoinGroup(_) => joined("m-1", 1, 1),
                Request::SyncGroup(_) => synced(&[0]),
                Request::OwnershipEpochs(e) => epochs(e, &[0]),
                Request::Heartbeat(_) => heartbeat(ErrorCode::None),
                Request::LeaveGroup(_) => left(),
                Request::DescribeCluster(_) => DescribeClusterResponse {
                    error_code: 0,
                    cluster: "c".into(),
                    shards: 1,
                    nodes: vec![ClusterNode {
                        node_id: node_id.into(),
                        host: me.get().unwrap().ip().to_string(),
                        port: me.get().unwrap().port(),
                        shards: vec![0],
                    }],
                }
                .into(),
                Request::ListGroups(_) => ListGroupsResponse {
                    error_code: 0,
                    groups: vec![ListedGroup {
                        group_id: "g".into(),
                        state: "Stable".into(),
                        members: 1,
                    }],
                }
                .into(),
                _ => return Act::Hold,
            })
        })
    })
    .await;
    me.set(node.addr).unwrap();
    node
}

/// A free loopback address nothing listens on.
fn dead_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[tokio::test]
async fn a_bootstrap_list_whose_first_node_is_down() {
    let node = single_node("a").await;
    let client = client(&[dead_address(), node.addr.to_string()]).await;
    let (member, _events) = member_config().start(client.clone()).unwrap();
    let state = stable(&member).await;
    assert_eq!((state.member_id.as_str(), state.generation_id), ("m-1", 1));
    // The admin API goes through the same list.
    let groups = Admin::new(client).list_groups(&[]).await.unwrap();
    assert_eq!(groups.len(), 1);
    member.close().await.unwrap();
    assert_eq!(node.count("FindCoordinator"), 1);
    // The node names itself at the address the client used: no DescribeCluster was needed
    // to trust it (only the group listing asked).
    assert_eq!(node.count("DescribeCluster"), 1);
}

/// A bootstrap node that accepts and then answers nothing, asked first by a caller whose
/// deadline ends while it waits: the next lookup starts with the next node instead of the
/// silent one again (the chaos harness's 1-hour run: a member's every lookup, cut short by its
/// commit's deadline, went to the same silent node for 80 s).
#[tokio::test(start_paused = true)]
async fn a_silent_first_bootstrap_node_is_asked_after_the_others_next_time() {
    let silent = FakeNode::start("silent", Arc::new(|_| Act::Hold)).await;
    let node = single_node("a").await;
    let client = client(&[silent.addr.to_string(), node.addr.to_string()]).await;
    // The lookup timeout is the request timeout (5 s); the caller's deadline is the same
    // instant (the clock is paused): the silent node's timeout is handled, then the caller
    // gives up before the next node answers.
    let cut_short =
        tokio::time::timeout(Duration::from_secs(5), client.find_coordinator("g")).await;
    assert!(
        !matches!(cut_short, Ok(Ok(_))),
        "the first round never got past the silent node: {cut_short:?}"
    );
    assert_eq!(silent.count("FindCoordinator"), 1);
    let (found, _) = client.find_coordinator("g").await.unwrap();
    assert_eq!(found.node_id, "a");
    assert_eq!(
        silent.count("FindCoordinator"),
        1,
        "the next round asked the other node first"
    );
}

/// A single node advertising a name the client cannot reach (as `0.0.0.0` becomes the host
/// name, or a container's name): it describes itself as a cluster of one, so the member keeps
/// the connection it has, and asks that only once.
#[tokio::test]
async fn a_single_node_advertising_an_unreachable_name_keeps_the_connection() {
    let node = FakeNode::start(
        "solo",
        Arc::new(|request| {
            Act::Answer(match request {
                Request::FindCoordinator(_) => FindCoordinatorResponse {
                    error_code: 0,
                    node_id: "solo".into(),
                    host: "solo.invalid".into(),
                    port: 7450,
                }
                .into(),
                Request::DescribeCluster(_) => DescribeClusterResponse {
                    error_code: 0,
                    cluster: "c".into(),
                    shards: 1,
                    nodes: vec![ClusterNode {
                        node_id: "solo".into(),
                        host: "solo.invalid".into(),
                        port: 7450,
                        shards: vec![0],
                    }],
                }
                .into(),
                Request::JoinGroup(j) if j.member_id.is_empty() => member_id_required("m-1"),
                Request::JoinGroup(_) => joined("m-1", 1, 1),
                Request::SyncGroup(_) => synced(&[0]),
                Request::OwnershipEpochs(e) => epochs(e, &[0]),
                Request::Heartbeat(_) => heartbeat(ErrorCode::None),
                Request::OffsetFetch(_) => OffsetFetchResponse::default().into(),
                Request::LeaveGroup(_) => left(),
                _ => return Act::Hold,
            })
        }),
    )
    .await;
    let client = client(&[node.addr.to_string()]).await;
    let (member, _events) = member_config().start(client.clone()).unwrap();
    stable(&member).await;
    assert_eq!(member.coordinator().unwrap().address(), "solo.invalid:7450");
    // The admin API (its own lookup) reuses what the member learned.
    let offsets = Admin::new(client).fetch_offsets("g", None).await.unwrap();
    assert!(offsets.is_empty());
    member.close().await.unwrap();
    assert_eq!(node.count("FindCoordinator"), 2);
    assert_eq!(node.count("DescribeCluster"), 1);
}

/// DescribeGroups for groups on two coordinators goes as one request to each; ListGroups
/// asks every node DescribeCluster names and reports the one it cannot reach.
#[tokio::test]
async fn admin_requests_go_to_each_groups_coordinator() {
    let addrs: Arc<OnceLock<(SocketAddr, SocketAddr, String)>> = Arc::new(OnceLock::new());
    let script = |addrs: Arc<OnceLock<(SocketAddr, SocketAddr, String)>>, me: &'static str| {
        Arc::new(move |request: &Request| {
            let (a, b, dead) = addrs.get().unwrap().clone();
            let node = |id: &str, addr: SocketAddr| ClusterNode {
                node_id: id.into(),
                host: addr.ip().to_string(),
                port: addr.port(),
                shards: vec![],
            };
            Act::Answer(match request {
                Request::FindCoordinator(f) if f.key == "g1" => names("a", a),
                Request::FindCoordinator(_) => names("b", b),
                Request::DescribeGroups(d) => DescribeGroupsResponse {
                    groups: d
                        .group_ids
                        .iter()
                        .map(|id| DescribedGroup {
                            group_id: id.clone(),
                            state: "Empty".into(),
                            assignor: Some(me.into()),
                            ..DescribedGroup::default()
                        })
                        .collect(),
                }
                .into(),
                Request::DescribeCluster(_) => DescribeClusterResponse {
                    error_code: 0,
                    cluster: "c".into(),
                    shards: 3,
                    nodes: vec![node("a", a), node("b", b), node("c", dead.parse().unwrap())],
                }
                .into(),
                Request::ListGroups(_) => ListGroupsResponse {
                    error_code: 0,
                    groups: vec![ListedGroup {
                        group_id: format!("on-{me}"),
                        state: "Empty".into(),
                        members: 0,
                    }],
                }
                .into(),
                _ => return Act::Hold,
            })
        }) as Script
    };
    let a = FakeNode::start("a", script(Arc::clone(&addrs), "a")).await;
    let b = FakeNode::start("b", script(Arc::clone(&addrs), "b")).await;
    addrs.set((a.addr, b.addr, dead_address())).unwrap();
    let admin = Admin::new(client(&[a.addr.to_string()]).await);

    let described = admin.describe_groups(&["g2", "g1", "g3"]).await.unwrap();
    let by: Vec<(&str, &str)> = described
        .iter()
        .map(|g| (g.group_id.as_str(), g.assignor.as_deref().unwrap()))
        .collect();
    assert_eq!(by, [("g2", "b"), ("g1", "a"), ("g3", "b")]);
    let asked = |node: &FakeNode| -> Vec<Vec<String>> {
        node.requests()
            .into_iter()
            .filter_map(|r| match r {
                Request::DescribeGroups(d) => Some(d.group_ids),
                _ => None,
            })
            .collect()
    };
    assert_eq!(asked(&a), [vec!["g1".to_owned()]]);
    assert_eq!(asked(&b), [vec!["g2".to_owned(), "g3".to_owned()]]);

    let listing = admin.list_groups_by_node(&[]).await.unwrap();
    let groups: Vec<(&str, &str)> = listing
        .groups
        .iter()
        .map(|g| (g.group.group_id.as_str(), g.node.node_id.as_str()))
        .collect();
    assert_eq!(groups, [("on-a", "a"), ("on-b", "b")]);
    assert_eq!(listing.failed.len(), 1);
    assert_eq!(listing.failed[0].node.node_id, "c");
    assert!(
        listing.failed[0].error.is_transport(),
        "{:?}",
        listing.failed[0].error
    );
    // The plain call does not hide the node it could not ask.
    assert!(admin.list_groups(&[]).await.is_err());
}

/// The offset admin requests (OffsetHistory, OffsetReset, OffsetRestore) go to the group's
/// coordinator, B, and follow it when it answers NOT_COORDINATOR; a refused reset gives back
/// the server's message.
#[tokio::test]
async fn offset_admin_requests_go_to_the_groups_coordinator() {
    let addrs: Arc<OnceLock<(SocketAddr, SocketAddr)>> = Arc::new(OnceLock::new());
    let a = FakeNode::start("a", {
        let addrs = Arc::clone(&addrs);
        Arc::new(move |request| {
            let (a, b) = *addrs.get().unwrap();
            match request {
                Request::FindCoordinator(_) => Act::Answer(names("b", b)),
                Request::DescribeCluster(_) => Act::Answer(cluster_of(&[("a", a), ("b", b)])),
                _ => Act::Hold,
            }
        })
    })
    .await;
    let restores = Arc::new(AtomicUsize::new(0));
    let b = FakeNode::start("b", {
        let restores = Arc::clone(&restores);
        Arc::new(move |request| {
            Act::Answer(match request {
                Request::OffsetHistory(h) => OffsetHistoryResponse {
                    error_code: 0,
                    topics: vec![TopicHistory {
                        topic: h.topic.clone().unwrap_or_default(),
                        partitions: vec![PartitionHistory {
                            partition: h.partition.unwrap_or(0),
                            error_code: 0,
                            entries: vec![OffsetHistoryEntry {
                                seq: 1,
                                kind: "commit".into(),
                                offset: h.limit.into(),
                                ..OffsetHistoryEntry::default()
                            }],
                        }],
                    }],
                    omitted: 0,
                }
                .into(),
                Request::OffsetReset(r) if r.execute => OffsetResetResponse {
                    error_code: ErrorCode::NonEmptyGroup.code(),
                    error_message: Some("group g is Stable with 1 member(s): m-1".into()),
                    executed: false,
                    recorded_at_ms: 0,
                    topics: vec![],
                }
                .into(),
                Request::OffsetReset(r) => OffsetResetResponse {
                    error_code: 0,
                    error_message: None,
                    executed: false,
                    recorded_at_ms: 0,
                    topics: vec![ResetTopic {
                        topic: r.topics[0].topic.clone(),
                        partitions: vec![ResetPartition {
                            partition: 0,
                            current: 10,
                            new: match r.to {
                                ResetTo::ShiftBy { delta } => 10 + delta,
                                _ => -1,
                            },
                            error_code: 0,
                        }],
                    }],
                }
                .into(),
                Request::OffsetRestore(_) if restores.fetch_add(1, Ordering::SeqCst) == 0 => {
                    OffsetRestoreResponse {
                        error_code: ErrorCode::NotCoordinator.code(),
                        ..OffsetRestoreResponse::default()
                    }
                    .into()
                }
                Request::OffsetRestore(r) => OffsetRestoreResponse {
                    executed: r.execute,
                    ..OffsetRestoreResponse::default()
                }
                .into(),
                _ => return Act::Hold,
            })
        })
    })
    .await;
    addrs.set((a.addr, b.addr)).unwrap();
    let admin = Admin::new(client(&[a.addr.to_string()]).await);

    let history = admin
        .offset_history("g", Some("t"), Some(2), 7)
        .await
        .unwrap();
    let partition = &history.topics[0].partitions[0];
    assert_eq!((partition.partition, partition.entries[0].offset), (2, 7));
    let dry = admin
        .reset_offsets(
            "g",
            ResetTo::ShiftBy { delta: -4 },
            vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![],
            }],
            false,
        )
        .await
        .unwrap();
    assert_eq!(dry.topics[0].partitions[0].new, 6);
    let refused = admin
        .reset_offsets("g", ResetTo::EarliestRecorded, vec![], true)
        .await
        .unwrap_err();
    assert_eq!(refused.error_code(), Some(ErrorCode::NonEmptyGroup));
    assert_eq!(
        muster_client::admin::server_message(&refused, "OffsetReset", "g"),
        Some("group g is Stable with 1 member(s): m-1")
    );
    let restored = admin.restore_offsets("g", true).await.unwrap();
    assert!(restored.executed);
    assert_eq!(
        restores.load(Ordering::SeqCst),
        2,
        "asked again after NOT_COORDINATOR"
    );

    let kinds = |node: &FakeNode| -> Vec<&'static str> {
        node.requests()
            .iter()
            .map(Request::name)
            .filter(|n| !matches!(*n, "FindCoordinator" | "DescribeCluster"))
            .collect()
    };
    assert_eq!(kinds(&a), Vec::<&str>::new());
    assert_eq!(
        kinds(&b),
        [
            "OffsetHistory",
            "OffsetReset",
            "OffsetReset",
            "OffsetRestore",
            "OffsetRestore"
        ]
    );
}
