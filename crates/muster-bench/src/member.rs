//! A group member as the benchmark drives it: the classic protocol's join → sync → heartbeat
//! loop, reporting each step (with its time) to the scenario that runs it.
//!
//! - JoinGroup with an empty id → MEMBER_ID_REQUIRED → JoinGroup again with the given id; the
//!   answer is held at the barrier.
//! - The leader assigns the topic's partitions round-robin over the members (members left
//!   without partitions are left out of the request: the server gives them an empty one);
//!   followers send an empty SyncGroup.
//! - SyncGroup NONE → [`Event::Synced`]; then a Heartbeat every `heartbeat` interval (the first
//!   one at a per-member phase, so heartbeats are spread evenly). REBALANCE_IN_PROGRESS from a
//!   SyncGroup or Heartbeat → [`Event::Rebalancing`] and rejoin at once; UNKNOWN_MEMBER_ID →
//!   join again from scratch.
//! - Commands are read while Stable: `Leave` sends LeaveGroup, `Stop` just stops (a crash, as
//!   far as the server can tell).
//! - With [`MemberConfig::report_heartbeats`], every answered Heartbeat is reported too
//!   ([`Event::Heartbeat`]: its send time and answer time), for scenarios that watch the
//!   members' heartbeat latency (`join-one`); off, a Stable member reports nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use muster_protocol::{
    AssignorMetadata, ErrorCode, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeavingMember, MemberAssignment, Response, SyncGroupRequest,
    TopicPartitions,
};
use tokio::sync::mpsc;

use crate::client::Conn;

/// The assignor every benchmark member offers.
pub const ASSIGNOR: &str = "roundrobin";

/// How every member of a run behaves.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    pub topic: String,
    /// Partitions to assign when the server's catalog does not list the topic.
    pub partitions: i32,
    pub session_timeout_ms: u32,
    pub rebalance_timeout_ms: u32,
    pub heartbeat: Duration,
    /// Report every answered Heartbeat ([`Event::Heartbeat`]); off for scenarios that do not
    /// read them (their events would pile up unread while the members idle).
    pub report_heartbeats: bool,
}

/// What a member reports. Times are taken just before a request is handed to the connection
/// and just after its answer arrives.
#[derive(Debug, Clone)]
pub enum Event {
    /// A JoinGroup was sent.
    JoinSent { at: Instant },
    /// A JoinGroup was answered NONE (the barrier completed for this member).
    JoinAnswered { at: Instant },
    /// A SyncGroup was sent (the leader's carries the assignment).
    SyncSent { at: Instant, leader: bool },
    /// SyncGroup answered NONE: Stable at `generation`.
    Synced {
        at: Instant,
        generation: i32,
        member_id: Arc<str>,
        leader: bool,
        /// The partitions of the member's topic in its assignment.
        partitions: Arc<[i32]>,
    },
    /// A Heartbeat answered (only with [`MemberConfig::report_heartbeats`]); `rebalancing`:
    /// the answer was REBALANCE_IN_PROGRESS (or the member is no longer known).
    Heartbeat {
        sent: Instant,
        at: Instant,
        rebalancing: bool,
    },
    /// A SyncGroup or Heartbeat answered REBALANCE_IN_PROGRESS.
    Rebalancing { at: Instant },
    /// LeaveGroup answered.
    Left { at: Instant },
    /// The member gave up.
    Failed { error: String },
}

/// Orders for a Stable member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Leave,
    Stop,
    /// Rejoin at once with changed metadata (the partitions it now owns, and new assignor
    /// user data), as a consumer does after its subscription or assignment changes: the
    /// group rebalances, and every member told to rejoin joins the same barrier.
    Rejoin,
}

/// What a member knew when it stopped.
#[derive(Debug, Clone)]
pub struct Exit {
    pub member_id: String,
    /// When its last request (of any kind) was handed to the connection: the server cannot
    /// have heard from it later than this.
    pub last_request: Option<Instant>,
}

/// A running member: its command channel and task.
pub struct Handle {
    pub commands: mpsc::UnboundedSender<Command>,
    pub task: tokio::task::JoinHandle<Result<Exit>>,
}

/// Starts member `index` of `group_id` on `conn`; its events go to `events` tagged `index`.
pub fn spawn(
    index: usize,
    group_id: Arc<str>,
    conn: Conn,
    config: Arc<MemberConfig>,
    events: mpsc::UnboundedSender<(usize, Event)>,
) -> Handle {
    let (commands, rx) = mpsc::unbounded_channel();
    let mut member = Member {
        index,
        group_id,
        conn,
        config,
        events,
        member_id: String::new(),
        last_request: None,
        owned: Vec::new(),
        epoch: 0,
        stashed: None,
    };
    let task = tokio::spawn(async move {
        let result = member.run(rx).await;
        if let Err(e) = &result {
            member.emit(Event::Failed {
                error: format!("{e:#}"),
            });
        }
        result
    });
    Handle { commands, task }
}

struct Member {
    index: usize,
    group_id: Arc<str>,
    conn: Conn,
    config: Arc<MemberConfig>,
    events: mpsc::UnboundedSender<(usize, Event)>,
    member_id: String,
    last_request: Option<Instant>,
    /// The partitions of its last assignment (sent as `owned_partitions` when it rejoins).
    owned: Vec<TopicPartitions>,
    /// How many times it was told to rejoin (its assignor user data, so that each rejoin is a
    /// metadata change).
    epoch: u32,
    /// A Leave or Stop received while joining, carried out once Stable.
    stashed: Option<Command>,
}

/// How long one request may take before the member gives up (a barrier of 10 000 members on a
/// loaded machine can take seconds; anything near this is a stuck server).
const REQUEST_LIMIT: Duration = Duration::from_secs(120);

impl Member {
    fn emit(&self, event: Event) {
        let _ = self.events.send((self.index, event));
    }

    async fn call(&mut self, request: impl Into<muster_protocol::Request>) -> Result<Response> {
        self.last_request = Some(Instant::now());
        self.conn.call_within(REQUEST_LIMIT, request).await
    }

    async fn run(&mut self, mut commands: mpsc::UnboundedReceiver<Command>) -> Result<Exit> {
        loop {
            let joined = self.join(&mut commands).await?;
            let Some(generation) = self.sync(&joined).await? else {
                continue;
            };
            match self.stable(generation, &mut commands).await? {
                Some(exit) => return Ok(exit),
                None => continue,
            }
        }
    }

    /// Joins until the barrier answers NONE.
    async fn join(
        &mut self,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Result<JoinGroupResponse> {
        loop {
            // A Rejoin that arrives while the member is rejoining anyway (it learned of the
            // rebalance first) is served by this join; Leave and Stop wait for Stable.
            while let Ok(command) = commands.try_recv() {
                match command {
                    Command::Rejoin => self.epoch += 1,
                    other => self.stashed = Some(other),
                }
            }
            let request = JoinGroupRequest {
                group_id: self.group_id.to_string(),
                member_id: self.member_id.clone(),
                group_instance_id: None,
                session_timeout_ms: self.config.session_timeout_ms,
                rebalance_timeout_ms: self.config.rebalance_timeout_ms,
                topics: vec![self.config.topic.clone()],
                assignors: vec![AssignorMetadata {
                    name: ASSIGNOR.to_owned(),
                    user_data: if self.epoch == 0 {
                        Vec::new()
                    } else {
                        self.epoch.to_le_bytes().to_vec()
                    },
                }],
                owned_partitions: self.owned.clone(),
                reason: None,
            };
            self.emit(Event::JoinSent { at: Instant::now() });
            let response = self.call(request).await?;
            let Response::JoinGroup(join) = response else {
                bail!("JoinGroup answered {response:?}");
            };
            match ErrorCode::from_code(join.error_code) {
                Some(ErrorCode::None) => {
                    self.emit(Event::JoinAnswered { at: Instant::now() });
                    return Ok(join);
                }
                Some(ErrorCode::MemberIdRequired) => self.member_id = join.member_id,
                Some(ErrorCode::UnknownMemberId) => self.member_id.clear(),
                // Superseded by our own later join, or the group is moving: try again.
                Some(ErrorCode::RebalanceInProgress | ErrorCode::CoordinatorNotAvailable) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                _ => bail!("JoinGroup failed with error {}", join.error_code),
            }
        }
    }

    /// Syncs; `Some(generation)` once Stable, `None` to rejoin.
    async fn sync(&mut self, joined: &JoinGroupResponse) -> Result<Option<i32>> {
        let leader = joined.leader_id == self.member_id;
        let assignments = if leader {
            self.assign(joined)
        } else {
            Vec::new()
        };
        let request = SyncGroupRequest {
            group_id: self.group_id.to_string(),
            generation_id: joined.generation_id,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            assignor: joined.assignor.clone(),
            assignments,
        };
        self.emit(Event::SyncSent {
            at: Instant::now(),
            leader,
        });
        let response = self.call(request).await?;
        let at = Instant::now();
        let Response::SyncGroup(sync) = &response else {
            bail!("SyncGroup answered {response:?}");
        };
        match ErrorCode::from_code(sync.error_code) {
            Some(ErrorCode::None) => {
                self.owned = sync.partitions.clone();
                let partitions: Arc<[i32]> = sync
                    .partitions
                    .iter()
                    .filter(|t| t.topic == self.config.topic)
                    .flat_map(|t| t.partitions.iter().copied())
                    .collect();
                self.emit(Event::Synced {
                    at,
                    generation: joined.generation_id,
                    member_id: Arc::from(self.member_id.as_str()),
                    leader,
                    partitions,
                });
                Ok(Some(joined.generation_id))
            }
            Some(ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration) => {
                self.emit(Event::Rebalancing { at });
                Ok(None)
            }
            Some(ErrorCode::UnknownMemberId) => {
                self.member_id.clear();
                Ok(None)
            }
            _ => bail!("SyncGroup failed with error {}", sync.error_code),
        }
    }

    /// Round-robin of the topic's partitions over the members, by member id.
    fn assign(&self, joined: &JoinGroupResponse) -> Vec<MemberAssignment> {
        let partitions = joined
            .topics
            .iter()
            .find(|t| t.topic == self.config.topic)
            .map_or(self.config.partitions, |t| t.partitions);
        let mut members: Vec<&str> = joined
            .members
            .iter()
            .map(|m| m.member_id.as_str())
            .collect();
        members.sort_unstable();
        if members.is_empty() {
            return Vec::new();
        }
        let mut owned: Vec<Vec<i32>> = vec![Vec::new(); members.len()];
        for p in 0..partitions.max(0) {
            let slot = usize::try_from(p).unwrap_or(0) % members.len();
            if let Some(list) = owned.get_mut(slot) {
                list.push(p);
            }
        }
        members
            .into_iter()
            .zip(owned)
            .filter(|(_, parts)| !parts.is_empty())
            .map(|(member_id, partitions)| MemberAssignment {
                member_id: member_id.to_owned(),
                partitions: vec![TopicPartitions {
                    topic: self.config.topic.clone(),
                    partitions,
                }],
                user_data: Vec::new(),
            })
            .collect()
    }

    /// Heartbeats until told to stop (`Some`) or a rebalance starts (`None`: rejoin).
    async fn stable(
        &mut self,
        generation: i32,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Result<Option<Exit>> {
        let every = self.config.heartbeat;
        // Spread the members' heartbeats over the interval.
        // (Golden-ratio steps: any number of consecutive members lands evenly spread.)
        let phase = every.mul_f64((self.index as f64 * 0.618_033_988_75).fract());
        let mut next = tokio::time::Instant::now() + phase.max(Duration::from_millis(1));
        if let Some(command) = self.stashed.take() {
            return self.obey(command).await;
        }
        loop {
            tokio::select! {
                command = commands.recv() => {
                    return self.obey(command.unwrap_or(Command::Stop)).await;
                }
                () = tokio::time::sleep_until(next) => {
                    next += every;
                    let request = HeartbeatRequest {
                        group_id: self.group_id.to_string(),
                        generation_id: generation,
                        member_id: self.member_id.clone(),
                        group_instance_id: None,
                    };
                    let sent = Instant::now();
                    let response = self.call(request).await?;
                    let code = ErrorCode::from_code(response.error_code());
                    if self.config.report_heartbeats {
                        self.emit(Event::Heartbeat {
                            sent,
                            at: Instant::now(),
                            rebalancing: code != Some(ErrorCode::None),
                        });
                    }
                    match code {
                        Some(ErrorCode::None) => {}
                        Some(ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration) => {
                            self.emit(Event::Rebalancing { at: Instant::now() });
                            return Ok(None);
                        }
                        Some(ErrorCode::UnknownMemberId) => {
                            self.member_id.clear();
                            self.emit(Event::Rebalancing { at: Instant::now() });
                            return Ok(None);
                        }
                        _ => bail!("Heartbeat answered {response:?}"),
                    }
                }
            }
        }
    }

    /// Carries out a command received while Stable: `None` to rejoin, `Some` to stop.
    async fn obey(&mut self, command: Command) -> Result<Option<Exit>> {
        match command {
            Command::Rejoin => {
                self.epoch += 1;
                return Ok(None);
            }
            Command::Leave => self.leave().await?,
            Command::Stop => {}
        }
        Ok(Some(Exit {
            member_id: self.member_id.clone(),
            last_request: self.last_request,
        }))
    }

    async fn leave(&mut self) -> Result<()> {
        let request = LeaveGroupRequest {
            group_id: self.group_id.to_string(),
            members: vec![LeavingMember {
                member_id: self.member_id.clone(),
                group_instance_id: None,
                reason: Some("benchmark".to_owned()),
            }],
        };
        let response = self.call(request).await?;
        self.emit(Event::Left { at: Instant::now() });
        match response {
            Response::LeaveGroup(r) if r.error_code == ErrorCode::None.code() => Ok(()),
            other => Err(anyhow!("LeaveGroup answered {other:?}")),
        }
    }
}
