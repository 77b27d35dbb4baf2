//! A scripted cluster node: a `TcpListener` on `127.0.0.1:0` that answers `Hello` on every
//! connection, records every other request it receives, and answers each as the test's
//! script decides (answer, hold, or close the connection). Several nodes make a fake cluster
//! for the client's routing and failover tests, before a real cluster exists.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use muster_protocol::*;
use tokio::net::TcpListener;

use super::scripted::{accept, hello, write};

/// What a node does with one request.
pub enum Act {
    Answer(Response),
    /// No answer (a held request, or a node that went silent).
    Hold,
    /// Closes this connection, and stops accepting new ones (the node is gone).
    Die,
}

pub type Script = Arc<dyn Fn(&Request) -> Act + Send + Sync>;

pub struct FakeNode {
    pub addr: SocketAddr,
    pub node_id: String,
    /// Every request but `Hello`, in the order received (over all connections).
    log: Arc<Mutex<Vec<Request>>>,
    dead: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeNode {
    pub async fn start(node_id: &str, script: Script) -> FakeNode {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let dead = Arc::new(AtomicBool::new(false));
        let (log_, dead_) = (Arc::clone(&log), Arc::clone(&dead));
        let task = tokio::spawn(async move {
            loop {
                let mut peer = accept(&listener).await;
                if dead_.load(Ordering::SeqCst) {
                    return; // The listener goes with this task: later connects are refused.
                }
                let (log, dead, script) = (Arc::clone(&log_), Arc::clone(&dead_), script.clone());
                tokio::spawn(async move {
                    hello(&mut peer, ErrorCode::None).await;
                    loop {
                        let Some(Ok(payload)) = futures_util::StreamExt::next(&mut peer).await
                        else {
                            return;
                        };
                        let frame = decode_request(&payload).unwrap();
                        log.lock().unwrap().push(frame.request.clone());
                        match script(&frame.request) {
                            Act::Answer(response) => {
                                write(&mut peer, frame.correlation_id, response).await
                            }
                            Act::Hold => {}
                            Act::Die => {
                                dead.store(true, Ordering::SeqCst);
                                return;
                            }
                        }
                    }
                });
                if dead_.load(Ordering::SeqCst) {
                    return;
                }
            }
        });
        FakeNode {
            addr,
            node_id: node_id.to_owned(),
            log,
            dead,
            task,
        }
    }

    /// Stops accepting connections (a node that is down: connecting is refused).
    pub fn stop_listening(&self) {
        self.task.abort();
    }

    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().clone()
    }

    pub fn count(&self, kind: &str) -> usize {
        self.requests().iter().filter(|r| r.name() == kind).count()
    }

    /// Waits until `predicate` holds for the requests received, at most 10 s.
    pub async fn wait_for(&self, what: &str, predicate: impl Fn(&[Request]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !predicate(&self.requests()) {
            assert!(
                Instant::now() < deadline,
                "{}: no {what} within 10 s; got {:#?}",
                self.node_id,
                self.requests()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// FindCoordinator's answer naming `node` at `addr`.
pub fn names(node_id: &str, addr: SocketAddr) -> Response {
    FindCoordinatorResponse {
        error_code: 0,
        node_id: node_id.into(),
        host: addr.ip().to_string(),
        port: addr.port(),
    }
    .into()
}

pub fn heartbeat(code: ErrorCode) -> Response {
    HeartbeatResponse {
        error_code: code.code(),
    }
    .into()
}

/// OwnershipEpochs' answer: every partition of `partitions` (topic `t`) with the epoch the
/// request names as its generation.
pub fn epochs(request: &OwnershipEpochsRequest, partitions: &[i32]) -> Response {
    OwnershipEpochsResponse {
        error_code: 0,
        generation_id: request.generation_id,
        topics: vec![TopicEpochs {
            topic: "t".into(),
            partitions: partitions
                .iter()
                .map(|&partition| PartitionEpoch {
                    partition,
                    epoch: request.generation_id,
                })
                .collect(),
        }],
    }
    .into()
}

pub fn committed() -> Response {
    OffsetCommitResponse::default().into()
}

/// JoinGroup's answer making `member_id` the leader of `generation`, alone, over topic `t`
/// with `partitions` partitions (assignor `range`).
pub fn joined(member_id: &str, generation: i32, partitions: i32) -> Response {
    JoinGroupResponse {
        error_code: 0,
        generation_id: generation,
        assignor: Some("range".into()),
        leader_id: member_id.into(),
        member_id: member_id.into(),
        skip_assignment: false,
        members: vec![JoinedMember {
            member_id: member_id.into(),
            topics: vec!["t".into()],
            ..JoinedMember::default()
        }],
        topics: vec![TopicInfo {
            topic: "t".into(),
            partitions,
        }],
    }
    .into()
}

pub fn member_id_required(member_id: &str) -> Response {
    JoinGroupResponse {
        error_code: ErrorCode::MemberIdRequired.code(),
        generation_id: -1,
        member_id: member_id.into(),
        ..JoinGroupResponse::default()
    }
    .into()
}

/// SyncGroup's answer: partitions `partitions` of topic `t`.
pub fn synced(partitions: &[i32]) -> Response {
    SyncGroupResponse {
        error_code: 0,
        assignor: Some("range".into()),
        partitions: vec![TopicPartitions {
            topic: "t".into(),
            partitions: partitions.to_vec(),
        }],
        user_data: vec![],
    }
    .into()
}

pub fn sync_error(code: ErrorCode) -> Response {
    SyncGroupResponse {
        error_code: code.code(),
        ..SyncGroupResponse::default()
    }
    .into()
}

/// DescribeCluster's answer: these nodes (no shards listed).
pub fn cluster_of(nodes: &[(&str, SocketAddr)]) -> Response {
    DescribeClusterResponse {
        error_code: 0,
        cluster: "fake".into(),
        shards: 1,
        nodes: nodes
            .iter()
            .map(|(id, addr)| ClusterNode {
                node_id: (*id).into(),
                host: addr.ip().to_string(),
                port: addr.port(),
                shards: vec![],
            })
            .collect(),
    }
    .into()
}
