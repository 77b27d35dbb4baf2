//! A consumer-protocol member as the benchmark drives it (protocol-v1 §7, Kafka 4's KIP-848),
//! over the bench's own client ([`crate::client`]), reporting what it does and owns to the
//! scenario that runs it. It follows the protocol as Kafka 4's consumer does (and as
//! `muster-client`'s `GroupProtocol::Consumer` does), minus the application:
//!
//! - **Join**: ConsumerGroupHeartbeat with epoch 0, a member id of its own (32 random hex
//!   digits, as Kafka's clients choose a UUID), its subscription (one topic), the server
//!   assignor and its rebalance timeout, and an empty owned list.
//! - **Heartbeat** every `heartbeat_interval_ms` the server returned, counted from the last
//!   heartbeat sent. A heartbeat carries the full state only when joining or after an error;
//!   it carries the owned partitions only when they changed since the server last
//!   acknowledged them, so a steady heartbeat is a group id, a member id and an epoch.
//! - **Reconcile**, with any answer that carries an assignment: partitions it no longer holds
//!   are revoked first ([`ConsumerEvent::Revoked`]) and reported at once (a heartbeat sent
//!   now, not an interval later: Kafka's acknowledging heartbeat); partitions new to it are
//!   taken ([`ConsumerEvent::Assigned`]) only once the server has acknowledged what it owns
//!   after any revocation, and reported at once too. Revoking and taking cost nothing here:
//!   there is no application, so the figures are the coordinator's and the protocol's.
//! - **Errors**: FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID → everything is lost
//!   ([`ConsumerEvent::Fenced`]) and it rejoins with epoch 0 and the same id; a coordinator
//!   that is not available → retried after 50 ms with the full state; anything else ends the
//!   member ([`ConsumerEvent::Failed`]).
//! - **Leave** ([`ConsumerCommand::Leave`]): it revokes what it owns, then sends epoch -1.
//!   [`ConsumerCommand::Stop`] just stops (a crash, as far as the server can tell).
//!
//! `spread_first` puts a member's first interval after joining at a per-member fraction of the
//! interval (golden-ratio steps, as [`crate::member`] spreads classic heartbeats), as members
//! started at different times would be; a member without it (the newcomer a scenario times)
//! waits the whole interval, as a real consumer does. [`ConsumerCommand::Respread`] moves a
//! running member back to that phase, never leaving more than an interval between two
//! heartbeats.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use muster_protocol::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ErrorCode, Response,
    TopicPartitions,
};
use tokio::sync::mpsc;

use crate::client::Conn;

/// How every consumer-protocol member of a run behaves.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// The one topic it subscribes to.
    pub topic: String,
    /// The server assignor it asks for (`uniform`, `range`), or the server's default.
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: i32,
}

/// What a member reports. Times are taken just before a request is handed to the connection
/// and just after its answer arrives.
#[derive(Debug, Clone)]
pub enum ConsumerEvent {
    /// A ConsumerGroupHeartbeat answered NONE (the joining one included). `acknowledging`:
    /// sent at once to report changed partitions, not on the interval.
    Heartbeat {
        sent: Instant,
        at: Instant,
        epoch: i32,
        interval_ms: i32,
        acknowledging: bool,
        member_id: Arc<str>,
    },
    /// It stopped owning these partitions (revoked at the server's word, or before leaving).
    Revoked { at: Instant, partitions: Vec<i32> },
    /// It started owning these partitions.
    Assigned { at: Instant, partitions: Vec<i32> },
    /// FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: it lost `partitions` and rejoins.
    Fenced {
        at: Instant,
        code: i16,
        partitions: Vec<i32>,
    },
    /// Its leave (epoch -1) was answered.
    Left { at: Instant },
    /// The member gave up.
    Failed { error: String },
}

/// Orders for a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerCommand {
    Leave,
    Stop,
    /// Move its heartbeats to its own phase of the interval (the golden-ratio fraction
    /// `spread_first` uses), as members started at different times would have; see
    /// [`Consumer::respread`].
    Respread,
}

/// A running member: its command channel and task.
pub struct ConsumerHandle {
    pub commands: mpsc::UnboundedSender<ConsumerCommand>,
    pub task: tokio::task::JoinHandle<Result<()>>,
}

/// Starts member `index` of `group_id` on `conn`; its events go to `events` tagged `index`.
pub fn spawn(
    index: usize,
    group_id: Arc<str>,
    conn: Conn,
    config: Arc<ConsumerConfig>,
    spread_first: bool,
    events: mpsc::UnboundedSender<(usize, ConsumerEvent)>,
) -> Result<ConsumerHandle> {
    let (commands, rx) = mpsc::unbounded_channel();
    let mut member = Consumer {
        index,
        group_id,
        conn,
        config,
        events,
        member_id: new_member_id()?,
        epoch: 0,
        full: true,
        owned: BTreeSet::new(),
        target: None,
        unreported: true,
        interval: Duration::from_secs(5),
        spread_first,
        phase_target: None,
    };
    let task = tokio::spawn(async move {
        let result = member.run(rx).await;
        if let Err(e) = &result {
            member.emit(ConsumerEvent::Failed {
                error: format!("{e:#}"),
            });
        }
        result
    });
    Ok(ConsumerHandle { commands, task })
}

/// 32 random hex digits (Kafka's clients choose a random UUID).
fn new_member_id() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow!("no OS randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

struct Consumer {
    index: usize,
    group_id: Arc<str>,
    conn: Conn,
    config: Arc<ConsumerConfig>,
    events: mpsc::UnboundedSender<(usize, ConsumerEvent)>,
    member_id: String,
    epoch: i32,
    /// The next heartbeat carries the full state (joining, or after an error).
    full: bool,
    owned: BTreeSet<i32>,
    /// The server's last assignment, while the member has not reached it.
    target: Option<BTreeSet<i32>>,
    /// What it owns changed since the server last acknowledged it.
    unreported: bool,
    interval: Duration,
    spread_first: bool,
    /// A heartbeat time on the member's own phase, taken as soon as the regular schedule
    /// reaches it ([`ConsumerCommand::Respread`]).
    phase_target: Option<tokio::time::Instant>,
}

/// How long one request may take before the member gives up (anything near this is a stuck
/// server).
const REQUEST_LIMIT: Duration = Duration::from_secs(120);

/// Pause before retrying when the coordinator is not available.
const RETRY: Duration = Duration::from_millis(50);

impl Consumer {
    fn emit(&self, event: ConsumerEvent) {
        let _ = self.events.send((self.index, event));
    }

    async fn run(&mut self, mut commands: mpsc::UnboundedReceiver<ConsumerCommand>) -> Result<()> {
        let mut next = tokio::time::Instant::now();
        loop {
            tokio::select! {
                biased;
                command = commands.recv() => match command {
                    Some(ConsumerCommand::Respread) => {
                        self.respread();
                        continue;
                    }
                    Some(ConsumerCommand::Leave) => {
                        self.leave().await?;
                        return Ok(());
                    }
                    Some(ConsumerCommand::Stop) | None => return Ok(()),
                },
                () = tokio::time::sleep_until(next) => {}
            }
            next = self.heartbeat().await?;
        }
    }

    /// The member's own fraction of the interval (golden-ratio steps: any number of
    /// consecutive members lands evenly spread).
    fn phase(&self) -> Duration {
        let fraction = (self.index as f64 * 0.618_033_988_75).fract();
        self.interval
            .mul_f64(fraction)
            .max(Duration::from_millis(1))
    }

    /// Aims its heartbeats at its own phase: a time one to two intervals ahead, on its
    /// phase, which the regular schedule adopts as soon as it is not later than the regular
    /// next heartbeat. So no heartbeat comes later than an interval after the one before, and
    /// within about two intervals the members heartbeat spread over the interval. (Members
    /// formed together end up heartbeating in step: answers that wait for the same record
    /// write arrive together, and each member's next heartbeat is counted from its last.)
    fn respread(&mut self) {
        self.phase_target = Some(tokio::time::Instant::now() + self.interval + self.phase());
    }

    /// One heartbeat and what follows from its answer; returns when the next one is due.
    async fn heartbeat(&mut self) -> Result<tokio::time::Instant> {
        let joining = self.epoch == 0;
        let reports = self.full || self.unreported;
        let acknowledging = self.unreported && !self.full;
        let request = ConsumerGroupHeartbeatRequest {
            group_id: self.group_id.to_string(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            group_instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: if self.full {
                self.config.rebalance_timeout_ms
            } else {
                -1
            },
            subscribed_topics: self.full.then(|| vec![self.config.topic.clone()]),
            subscribed_topic_regex: None,
            server_assignor: if self.full {
                self.config.server_assignor.clone()
            } else {
                None
            },
            owned_partitions: reports.then(|| self.owned_wire()),
        };
        let sent = Instant::now();
        let sent_tokio = tokio::time::Instant::now();
        let response = self.conn.call_within(REQUEST_LIMIT, request).await?;
        let at = Instant::now();
        let Response::ConsumerGroupHeartbeat(answer) = response else {
            bail!("ConsumerGroupHeartbeat answered {response:?}");
        };
        match ErrorCode::from_code(answer.error_code) {
            Some(ErrorCode::None) => {}
            Some(ErrorCode::FencedMemberEpoch | ErrorCode::UnknownMemberId) => {
                let lost: Vec<i32> = std::mem::take(&mut self.owned).into_iter().collect();
                self.emit(ConsumerEvent::Fenced {
                    at,
                    code: answer.error_code,
                    partitions: lost,
                });
                self.epoch = 0;
                self.full = true;
                self.target = None;
                self.unreported = true;
                return Ok(tokio::time::Instant::now());
            }
            Some(
                ErrorCode::CoordinatorNotAvailable
                | ErrorCode::NotCoordinator
                | ErrorCode::CoordinatorLoadInProgress,
            ) => {
                self.full = true;
                return Ok(tokio::time::Instant::now() + RETRY);
            }
            _ => bail!(
                "ConsumerGroupHeartbeat failed with error {} ({:?})",
                answer.error_code,
                answer.error_message
            ),
        }
        self.accept(&answer, reports);
        self.emit(ConsumerEvent::Heartbeat {
            sent,
            at,
            epoch: self.epoch,
            interval_ms: answer.heartbeat_interval_ms,
            acknowledging,
            member_id: Arc::from(self.member_id.as_str()),
        });
        self.reconcile(at);
        if self.unreported {
            // Acknowledge at once what it now owns.
            return Ok(tokio::time::Instant::now());
        }
        let every = if joining && self.spread_first {
            self.phase()
        } else {
            self.interval
        };
        let regular = sent_tokio + every;
        match self.phase_target {
            Some(target) if target <= regular => {
                self.phase_target = None;
                Ok(target.max(tokio::time::Instant::now()))
            }
            _ => Ok(regular),
        }
    }

    /// A NONE answer: its epoch, interval and id, and the assignment to reconcile toward.
    fn accept(&mut self, answer: &ConsumerGroupHeartbeatResponse, reported: bool) {
        if !answer.member_id.is_empty() {
            self.member_id.clone_from(&answer.member_id);
        }
        self.epoch = answer.member_epoch;
        if let Ok(ms @ 1..) = u64::try_from(answer.heartbeat_interval_ms) {
            self.interval = Duration::from_millis(ms);
        }
        self.full = false;
        if reported {
            self.unreported = false;
        }
        if let Some(assignment) = &answer.assignment {
            let partitions = assignment
                .iter()
                .filter(|t| t.topic == self.config.topic)
                .flat_map(|t| t.partitions.iter().copied())
                .collect();
            self.target = Some(partitions);
        }
    }

    /// One step toward the server's assignment: revoke first; take only what is new once the
    /// server has acknowledged what the member owns.
    fn reconcile(&mut self, at: Instant) {
        let Some(target) = self.target.take() else {
            return;
        };
        let revoke: Vec<i32> = self.owned.difference(&target).copied().collect();
        if !revoke.is_empty() {
            for p in &revoke {
                self.owned.remove(p);
            }
            self.unreported = true;
            self.emit(ConsumerEvent::Revoked {
                at,
                partitions: revoke,
            });
            self.target = Some(target);
            return;
        }
        if self.unreported {
            // A revocation not yet acknowledged: nothing new before it is.
            self.target = Some(target);
            return;
        }
        let take: Vec<i32> = target.difference(&self.owned).copied().collect();
        if !take.is_empty() {
            self.owned.extend(take.iter().copied());
            self.unreported = true;
            self.emit(ConsumerEvent::Assigned {
                at,
                partitions: take,
            });
        }
    }

    fn owned_wire(&self) -> Vec<TopicPartitions> {
        if self.owned.is_empty() {
            return Vec::new();
        }
        vec![TopicPartitions {
            topic: self.config.topic.clone(),
            partitions: self.owned.iter().copied().collect(),
        }]
    }

    /// Revokes everything, then leaves (epoch -1).
    async fn leave(&mut self) -> Result<()> {
        if self.epoch <= 0 && self.owned.is_empty() {
            return Ok(());
        }
        let owned: Vec<i32> = std::mem::take(&mut self.owned).into_iter().collect();
        if !owned.is_empty() {
            self.emit(ConsumerEvent::Revoked {
                at: Instant::now(),
                partitions: owned,
            });
        }
        let request = ConsumerGroupHeartbeatRequest {
            group_id: self.group_id.to_string(),
            member_id: self.member_id.clone(),
            member_epoch: -1,
            rebalance_timeout_ms: -1,
            ..ConsumerGroupHeartbeatRequest::default()
        };
        let response = self.conn.call_within(REQUEST_LIMIT, request).await?;
        self.emit(ConsumerEvent::Left { at: Instant::now() });
        match response {
            Response::ConsumerGroupHeartbeat(r)
                if r.error_code == ErrorCode::None.code()
                    || r.error_code == ErrorCode::UnknownMemberId.code() =>
            {
                Ok(())
            }
            other => Err(anyhow!("leaving ConsumerGroupHeartbeat answered {other:?}")),
        }
    }
}
