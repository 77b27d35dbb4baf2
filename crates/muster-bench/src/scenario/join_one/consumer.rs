//! The consumer-protocol side of `join-one`: a fleet of [`crate::consumer`] members (KIP-848:
//! heartbeats at the server's interval, owned partitions reported, revoke before taking),
//! followed through their events into the [`Views`].
//!
//! After forming, the members are told to spread their heartbeats over the interval (members
//! formed at once heartbeat in step; see [`crate::consumer`]), and the baseline starts once
//! they have.
//!
//! A change has settled, from the members' views, when every member in the group reports the
//! same epoch, newer than before the change, and every partition is owned by exactly one
//! member. (A member in the new epoch with partitions still to take would mean another member
//! still holds them at an older epoch, so the two together mean every member has reached its
//! target.) After forming, the server is asked too (ConsumerGroupDescribe: Stable at that
//! epoch), and after each change its state is recorded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use muster_protocol::{ConsumerGroupDescribeRequest, DescribedConsumerGroup, Response};
use tokio::sync::mpsc;

use super::views::Views;
use super::{random_offset, Options, Run};
use crate::client::Conn;
use crate::consumer::{self, ConsumerCommand, ConsumerConfig, ConsumerEvent, ConsumerHandle};

struct Fleet {
    conns: Vec<Conn>,
    config: Arc<ConsumerConfig>,
    group_id: Arc<str>,
    handles: Vec<Option<ConsumerHandle>>,
    /// Per member: the epoch of its last answer (0 before its first).
    epochs: Vec<i32>,
    max_epoch: i32,
    /// Active members at `max_epoch`.
    at_max: usize,
    active: usize,
    /// The heartbeat interval the server last returned.
    interval_ms: i32,
    fenced: usize,
    tx: mpsc::UnboundedSender<(usize, ConsumerEvent)>,
    rx: mpsc::UnboundedReceiver<(usize, ConsumerEvent)>,
}

impl Fleet {
    fn new(conns: &[Conn], config: ConsumerConfig, group_id: &str) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Fleet {
            conns: conns.to_vec(),
            config: Arc::new(config),
            group_id: Arc::from(group_id),
            handles: Vec::new(),
            epochs: Vec::new(),
            max_epoch: 0,
            at_max: 0,
            active: 0,
            interval_ms: 0,
            fenced: 0,
            tx,
            rx,
        }
    }

    /// Starts one more member; returns its index.
    fn spawn(&mut self, spread_first: bool) -> Result<usize> {
        let index = self.handles.len();
        let conn = self
            .conns
            .get(index % self.conns.len().max(1))
            .cloned()
            .context("no connection")?;
        let handle = consumer::spawn(
            index,
            Arc::clone(&self.group_id),
            conn,
            Arc::clone(&self.config),
            spread_first,
            self.tx.clone(),
        )?;
        self.handles.push(Some(handle));
        self.epochs.push(0);
        self.active += 1;
        if self.max_epoch == 0 {
            self.at_max += 1;
        }
        Ok(index)
    }

    fn is_active(&self, index: usize) -> bool {
        self.handles.get(index).is_some_and(Option::is_some)
    }

    fn set_epoch(&mut self, index: usize, epoch: i32) {
        let Some(slot) = self.epochs.get_mut(index) else {
            return;
        };
        let old = std::mem::replace(slot, epoch);
        if old == epoch || !self.is_active(index) {
            return;
        }
        if epoch > self.max_epoch {
            self.max_epoch = epoch;
            self.at_max = (0..self.epochs.len())
                .filter(|&i| self.is_active(i) && self.epochs[i] == epoch)
                .count();
            return;
        }
        if epoch == self.max_epoch {
            self.at_max += 1;
        }
        if old == self.max_epoch {
            self.at_max -= 1;
        }
    }

    /// Active members, in index order.
    fn members(&self) -> Vec<usize> {
        (0..self.handles.len())
            .filter(|&i| self.is_active(i))
            .collect()
    }

    /// Feeds one event into the views; returns its time.
    fn on_event(
        &mut self,
        views: &mut Views,
        index: usize,
        event: ConsumerEvent,
    ) -> Result<Option<Instant>> {
        let at = match event {
            ConsumerEvent::Heartbeat {
                sent,
                at,
                epoch,
                interval_ms,
                acknowledging,
                ..
            } => {
                if views.subject() == Some(index) {
                    views.subject_request(sent);
                }
                views.heartbeat(index, sent, at);
                if acknowledging {
                    views.acted(index);
                }
                self.interval_ms = interval_ms;
                self.set_epoch(index, epoch);
                at
            }
            ConsumerEvent::Revoked { at, partitions } => {
                views.remove(index, at, partitions);
                views.acted(index);
                at
            }
            ConsumerEvent::Assigned { at, partitions } => {
                views.add(index, at, partitions);
                views.acted(index);
                at
            }
            ConsumerEvent::Fenced { at, partitions, .. } => {
                views.remove(index, at, partitions);
                views.acted(index);
                self.fenced += 1;
                self.set_epoch(index, 0);
                at
            }
            ConsumerEvent::Left { at } => at,
            ConsumerEvent::Failed { error } => bail!("consumer member {index} failed: {error}"),
        };
        Ok(Some(at))
    }

    fn settled(&self, views: &Views, floor: i32) -> bool {
        self.max_epoch > floor && self.at_max == self.active && views.fully_owned()
    }

    /// Processes events until the group has settled past epoch `floor`; returns when it did
    /// (the time of the event that settled it).
    async fn settle(&mut self, views: &mut Views, floor: i32, limit: Duration) -> Result<Instant> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let next = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .map_err(|_| {
                    anyhow::anyhow!(
                        "consumer group not settled within {limit:?} (epoch {}, {} of {} \
                         members at it, every partition owned once: {})",
                        self.max_epoch,
                        self.at_max,
                        self.active,
                        views.fully_owned()
                    )
                })?;
            let (index, event) = next.context("event channel closed")?;
            let at = self.on_event(views, index, event)?;
            if self.settled(views, floor) {
                return Ok(at.unwrap_or_else(Instant::now));
            }
        }
    }

    /// Processes events until `until`.
    async fn watch(&mut self, views: &mut Views, until: tokio::time::Instant) -> Result<()> {
        while let Ok(next) = tokio::time::timeout_at(until, self.rx.recv()).await {
            let (index, event) = next.context("event channel closed")?;
            self.on_event(views, index, event)?;
        }
        Ok(())
    }

    /// Tells member `index` to leave; it no longer counts as a member.
    fn leave(&mut self, index: usize) -> Result<tokio::task::JoinHandle<Result<()>>> {
        let handle = self
            .handles
            .get_mut(index)
            .and_then(Option::take)
            .context("no such member")?;
        self.active -= 1;
        if self.epochs.get(index) == Some(&self.max_epoch) {
            self.at_max -= 1;
        }
        let _ = handle.commands.send(ConsumerCommand::Leave);
        Ok(handle.task)
    }

    /// Every member moves its heartbeats to its own phase ([`ConsumerCommand::Respread`]);
    /// returns how long that takes at most (two intervals).
    fn respread(&self) -> Duration {
        for handle in self.handles.iter().flatten() {
            let _ = handle.commands.send(ConsumerCommand::Respread);
        }
        Duration::from_millis(
            u64::try_from(self.interval_ms)
                .unwrap_or(0)
                .saturating_mul(2),
        ) + Duration::from_millis(50)
    }

    /// Every member leaves (epoch -1), all at once.
    async fn shutdown(mut self) -> Result<()> {
        let tasks: Vec<_> = self
            .members()
            .into_iter()
            .map(|i| self.leave(i))
            .collect::<Result<_>>()?;
        for task in tasks {
            task.await.context("consumer member panicked")??;
        }
        Ok(())
    }
}

/// The group as the server describes it.
async fn describe(conn: &Conn, group_id: &str) -> Result<DescribedConsumerGroup> {
    let answer = conn
        .call(ConsumerGroupDescribeRequest {
            group_ids: vec![group_id.to_owned()],
        })
        .await?;
    match answer {
        Response::ConsumerGroupDescribe(mut d) if !d.groups.is_empty() => Ok(d.groups.remove(0)),
        other => bail!("ConsumerGroupDescribe answered {other:?}"),
    }
}

/// Waits until the server describes the group as `state` (at `epoch`, when given).
async fn await_state(
    conn: &Conn,
    group_id: &str,
    states: &[&str],
    epoch: Option<i32>,
    limit: Duration,
) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let d = describe(conn, group_id).await?;
        if states.contains(&d.state.as_str()) && epoch.is_none_or(|e| d.group_epoch == e) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the server describes {group_id} as {} at epoch {} (assignment epoch {}), not {states:?}",
                d.state,
                d.group_epoch,
                d.assignment_epoch
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One repeat: form the group, a baseline, one member joins, (one leaves), tear down.
pub async fn run_once(conns: &[Conn], opts: &Options, group_id: &str, topic: &str) -> Result<Run> {
    let admin = conns.first().context("no connection")?.clone();
    let config = ConsumerConfig {
        topic: topic.to_owned(),
        server_assignor: Some(opts.assignor.clone()),
        rebalance_timeout_ms: i32::try_from(opts.rebalance_timeout_ms).unwrap_or(i32::MAX),
    };
    let mut fleet = Fleet::new(conns, config, group_id);
    let mut views = Views::new(usize::try_from(opts.partitions).unwrap_or(0))?;
    let formed_at = Instant::now();
    for _ in 0..opts.members {
        fleet.spawn(true)?;
    }
    fleet
        .settle(&mut views, 0, opts.settle_limit)
        .await
        .context("consumer: the group did not form")?;
    await_state(
        &admin,
        group_id,
        &["Stable"],
        Some(fleet.max_epoch),
        opts.settle_limit,
    )
    .await
    .context("consumer: formed in the members' views, but not on the server")?;
    let formation_ms = formed_at.elapsed().as_secs_f64() * 1e3;
    // Formed together, the members heartbeat in step; spread them as in a group whose
    // members started at different times (the classic members spread theirs after every
    // sync).
    let until = tokio::time::Instant::now() + fleet.respread();
    fleet.watch(&mut views, until).await?;

    // Baseline: the members only heartbeat.
    views.begin_baseline()?;
    let until = tokio::time::Instant::now() + opts.baseline;
    fleet.watch(&mut views, until).await?;
    let baseline = views.baseline();
    let interval = Duration::from_millis(u64::try_from(fleet.interval_ms).unwrap_or(0));
    let until = tokio::time::Instant::now() + random_offset(interval)?;
    fleet.watch(&mut views, until).await?;

    // One member joins.
    let others = fleet.members();
    let floor = fleet.max_epoch;
    views.begin_change(fleet.handles.len())?;
    fleet.spawn(false)?;
    let settled = fleet
        .settle(&mut views, floor, opts.settle_limit)
        .await
        .context("consumer: the group did not settle after a member joined")?;
    let join = views.end_change(settled, &others);
    let join_state = describe(&admin, group_id).await?.state;

    let mut leave = None;
    let mut leave_state = None;
    if !opts.no_leave {
        let pick = *others.last().context("no member to leave")?;
        let remaining: Vec<usize> = fleet.members().into_iter().filter(|&m| m != pick).collect();
        let until = tokio::time::Instant::now() + random_offset(interval)?;
        fleet.watch(&mut views, until).await?;
        let floor = fleet.max_epoch;
        let start = views.begin_change(pick)?;
        views.subject_request(start);
        let leaver = fleet.leave(pick)?;
        let settled = fleet
            .settle(&mut views, floor, opts.settle_limit)
            .await
            .context("consumer: the group did not settle after a member left")?;
        leaver.await.context("leaving member panicked")??;
        leave = Some(views.end_change(settled, &remaining));
        leave_state = Some(describe(&admin, group_id).await?.state);
    }
    let interval_ms = u64::try_from(fleet.interval_ms).unwrap_or(0);
    let fenced = fleet.fenced;
    fleet.shutdown().await?;
    // The next phase starts on a quiet server.
    await_state(
        &admin,
        group_id,
        &["Empty", "Dead"],
        None,
        opts.settle_limit,
    )
    .await
    .context("consumer: the group did not empty after every member left")?;
    if fenced > 0 {
        bail!("consumer: {fenced} members were fenced during the run");
    }
    let mut states = vec![join_state];
    states.extend(leave_state);
    Ok(Run {
        formation_ms,
        interval_ms,
        baseline,
        join,
        leave,
        server_states: states,
    })
}
