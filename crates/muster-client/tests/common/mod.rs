//! Test helpers: a real server on `127.0.0.1:0` with short timeouts, group members run by a
//! harness that logs every event in one shared, ordered log, and convergence checks.
#![allow(dead_code, clippy::unwrap_used)]

pub mod fake_node;
pub mod scripted;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use muster_client::{
    Admin, Connection, ConnectionConfig, Event, GroupMember, MemberConfig, MemberState, Phase,
    TopicPartition,
};
use muster_coordinator::storage::MemoryStore;
use muster_coordinator::GroupConfig;
use muster_server::{spawn, ServerOptions, ServerThread};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// How long any wait in these tests may take before it fails.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// Session timeout of test members: a few hundred milliseconds.
pub const SESSION: Duration = Duration::from_millis(600);

pub fn start_server() -> ServerThread {
    let mut options = ServerOptions::new("127.0.0.1:0", Arc::new(MemoryStore::new()));
    options.group = GroupConfig {
        min_session_timeout_ms: 100,
        max_session_timeout_ms: 60_000,
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    };
    options.workers = 2;
    spawn(options).expect("server starts")
}

pub async fn connect(server: &ServerThread, client_id: &str) -> Connection {
    let config = ConnectionConfig::new(server.local_addr().to_string())
        .client_id(client_id)
        .request_timeout(Duration::from_secs(10));
    Connection::connect(config).await.expect("connects")
}

pub async fn create_topic(server: &ServerThread, topic: &str, partitions: i32) {
    let admin = Admin::new(connect(server, "admin").await);
    admin
        .create_topic(topic, partitions)
        .await
        .expect("topic created");
}

/// A member config with test timeouts.
pub fn fast_member(group: &str, topics: &[&str], assignor: &str) -> MemberConfig {
    MemberConfig::new(group, topics.iter().copied())
        .session_timeout(SESSION)
        .rebalance_timeout(Duration::from_secs(3))
        .assignor_names([assignor])
        .unwrap()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Assigned,
    Revoked,
    Lost,
    Error,
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub at: Instant,
    pub member: String,
    pub kind: Kind,
    pub generation: i32,
    pub partitions: Vec<TopicPartition>,
}

/// One log for the events of all members, in the order they were handled.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<Entry>>>);

impl Log {
    pub fn push(&self, member: &str, kind: Kind, generation: i32, partitions: Vec<TopicPartition>) {
        self.0.lock().unwrap().push(Entry {
            at: Instant::now(),
            member: member.to_owned(),
            kind,
            generation,
            partitions,
        });
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.0.lock().unwrap().clone()
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// How many times a partition was assigned to a member other than its previous owner.
    pub fn handovers(&self) -> usize {
        let mut last_owner: BTreeMap<TopicPartition, String> = BTreeMap::new();
        let mut count = 0;
        for e in self.entries() {
            if e.kind == Kind::Assigned {
                for tp in e.partitions {
                    if let Some(previous) = last_owner.insert(tp, e.member.clone()) {
                        count += usize::from(previous != e.member);
                    }
                }
            }
        }
        count
    }

    /// Replays the log: fails if a partition is ever assigned to a member while another
    /// member still owns it. Returns the final owners.
    pub fn check_single_ownership(&self) -> BTreeMap<TopicPartition, String> {
        let mut owners: BTreeMap<TopicPartition, String> = BTreeMap::new();
        let entries = self.entries();
        for (i, e) in entries.iter().enumerate() {
            match e.kind {
                Kind::Assigned => {
                    for tp in &e.partitions {
                        if let Some(other) = owners.get(tp) {
                            assert_eq!(
                                other, &e.member,
                                "entry {i}: {tp} assigned to {} while {other} owns it\n{entries:#?}",
                                e.member
                            );
                        }
                        owners.insert(tp.clone(), e.member.clone());
                    }
                }
                Kind::Revoked | Kind::Lost => {
                    for tp in &e.partitions {
                        if owners.get(tp) == Some(&e.member) {
                            owners.remove(tp);
                        }
                    }
                }
                Kind::Error => {}
            }
        }
        owners
    }
}

/// A member run the way an application runs it: a task handles its events (logging each one
/// before letting the member go on) and, on request, stops processing and closes it.
pub struct Harness {
    pub name: String,
    pub state: watch::Receiver<MemberState>,
    leave: Option<oneshot::Sender<()>>,
    task: JoinHandle<Option<GroupMember>>,
    pub log: Log,
}

impl Harness {
    pub async fn start(
        server: &ServerThread,
        name: &str,
        config: MemberConfig,
        log: &Log,
    ) -> Harness {
        let conn = connect(server, name).await;
        let (member, mut events) = config.start(conn).expect("member starts");
        let state = member.watch_state();
        let (leave_tx, mut leave_rx) = oneshot::channel::<()>();
        let (log_, name_) = (log.clone(), name.to_owned());
        let task = tokio::spawn(async move {
            // The partitions this application works on, by its own view of the events.
            let mut working: BTreeSet<TopicPartition> = BTreeSet::new();
            let mut may_leave = true;
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Some(Event::Assigned(p)) => {
                            log_.push(&name_, Kind::Assigned, p.generation(), p.to_vec());
                            working.extend(p.iter().cloned());
                        }
                        Some(Event::Revoked(p)) => {
                            log_.push(&name_, Kind::Revoked, p.generation(), p.to_vec());
                            for tp in p.iter() { working.remove(tp); }
                        }
                        Some(Event::Lost(p)) => {
                            log_.push(&name_, Kind::Lost, p.generation(), p.to_vec());
                            for tp in p.iter() { working.remove(tp); }
                        }
                        Some(Event::Error(e)) => {
                            log_.push(&name_, Kind::Error, -1, Vec::new());
                            eprintln!("{name_}: fatal error {e}");
                        }
                        Some(_) => {}
                        None => return Some(member),
                    },
                    asked = &mut leave_rx, if may_leave => {
                        if asked.is_err() {
                            may_leave = false; // The harness went away without asking.
                            continue;
                        }
                        // Stop working on everything, then close (which leaves the group).
                        let all: Vec<_> = std::mem::take(&mut working).into_iter().collect();
                        log_.push(&name_, Kind::Revoked, member.generation(), all);
                        member.close().await.expect("close");
                        while events.recv().await.is_some() {}
                        return None;
                    }
                }
            }
        });
        Harness {
            name: name.to_owned(),
            state,
            leave: Some(leave_tx),
            task,
            log: log.clone(),
        }
    }

    pub fn snapshot(&self) -> MemberState {
        self.state.borrow().clone()
    }

    /// Closes the member cleanly (LeaveGroup unless static).
    pub async fn leave(mut self) {
        if let Some(leave) = self.leave.take() {
            let _ = leave.send(());
        }
        let _ = tokio::time::timeout(PATIENCE, &mut self.task)
            .await
            .expect("leaves in time");
    }

    /// Kills the member: no LeaveGroup, no more heartbeats (as if its process died).
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    /// Waits for the member's event stream to end (it failed), returning the member.
    pub async fn wait_stopped(self) -> Option<GroupMember> {
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("stops in time")
            .ok()
            .flatten()
    }
}

/// Waits until all `members` are Stable in one generation and their assignments cover every
/// partition of `expected` exactly once. Returns that generation.
pub async fn wait_converged(members: &[&Harness], expected: &BTreeSet<TopicPartition>) -> i32 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let states: Vec<MemberState> = members.iter().map(|m| m.snapshot()).collect();
        if converged(&states, expected) {
            return states[0].generation_id;
        }
        assert!(
            Instant::now() < deadline,
            "no convergence within {PATIENCE:?}: {states:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn converged(states: &[MemberState], expected: &BTreeSet<TopicPartition>) -> bool {
    let Some(first) = states.first() else {
        return expected.is_empty();
    };
    let mut seen = BTreeSet::new();
    let all_stable = states.iter().all(|s| {
        s.phase == Phase::Stable && s.generation_id == first.generation_id && s.generation_id > 0
    });
    let disjoint = states
        .iter()
        .flat_map(|s| s.assignment.iter())
        .all(|tp| seen.insert(tp.clone()));
    all_stable && disjoint && &seen == expected
}

pub fn partitions(topic: &str, count: i32) -> BTreeSet<TopicPartition> {
    (0..count).map(|p| TopicPartition::new(topic, p)).collect()
}
