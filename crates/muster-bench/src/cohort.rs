//! Many members in many groups, spread over a few connections, and the bookkeeping that tells
//! when every group has settled (every active member Stable in its group's newest generation).
//!
//! Members are spread round-robin over the connections (member `k` of the whole cohort uses
//! connection `k % connections`), so a group's members talk over different connections, as
//! real consumers do, while 10 000 members need only a few hundred sockets.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use muster_protocol::{ErrorCode, LeaveGroupRequest, LeavingMember, Response, TopicInfo};
use tokio::sync::mpsc;

use crate::client::Conn;
use crate::member::{self, Command, Event, Exit, Handle, MemberConfig};

struct Slot {
    group: usize,
    handle: Option<Handle>,
    /// Generation it is Stable in, if it is.
    stable: Option<i32>,
    member_id: Option<Arc<str>>,
}

struct GroupBook {
    id: Arc<str>,
    active: usize,
    newest: i32,
    stable_in_newest: usize,
    leader: Option<Arc<str>>,
    /// Settled only in a generation newer than this.
    must_exceed: i32,
}

impl GroupBook {
    fn settled(&self) -> bool {
        self.active > 0 && self.stable_in_newest == self.active && self.newest > self.must_exceed
    }
}

/// What one settle saw, from the events it processed.
#[derive(Debug, Clone, Default)]
pub struct Phase {
    pub first_join_sent: Option<Instant>,
    pub last_join_sent: Option<Instant>,
    pub last_synced: Option<Instant>,
    /// The last JoinGroup answered NONE.
    pub last_join_answered: Option<Instant>,
    /// The first JoinGroup answered NONE after the last JoinGroup was sent.
    pub first_join_answered_after_last_sent: Option<Instant>,
    /// The last SyncGroup a leader sent (with the assignment).
    pub leader_sync_sent: Option<Instant>,
    /// The first SyncGroup answered NONE after that.
    pub first_synced_after_leader: Option<Instant>,
    pub first_rebalancing: Option<Instant>,
    pub last_rebalancing: Option<Instant>,
    pub joins_sent: usize,
}

impl Phase {
    /// The window cut at its steps: last join sent → first join answer (the barrier
    /// completes and its record is made durable) → last join answer (the answers fan out) →
    /// the leader's SyncGroup sent (the client computes the assignment) → first sync answer
    /// (the assignment is applied and made durable) → last sync answer (fan-out).
    pub fn steps(&self) -> Option<Steps> {
        let ms =
            |from: Instant, to: Instant| to.saturating_duration_since(from).as_secs_f64() * 1e3;
        let sent = self.last_join_sent?;
        let first_join = self.first_join_answered_after_last_sent?;
        let last_join = self.last_join_answered?;
        let leader_sync = self.leader_sync_sent?;
        let first_sync = self.first_synced_after_leader?;
        let last_sync = self.last_synced?;
        Some(Steps {
            barrier_ms: ms(sent, first_join),
            join_fanout_ms: ms(first_join, last_join),
            leader_assign_ms: ms(last_join, leader_sync),
            sync_ms: ms(leader_sync, first_sync),
            sync_fanout_ms: ms(first_sync, last_sync),
        })
    }

    /// Last JoinGroup sent → last SyncGroup answered.
    pub fn join_to_sync(&self) -> Option<Duration> {
        Some(
            self.last_synced?
                .saturating_duration_since(self.last_join_sent?),
        )
    }
}

/// [`Phase::steps`], in milliseconds (over all groups of the phase: with many groups the steps
/// overlap, and only their sum, the window, is exact).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Steps {
    pub barrier_ms: f64,
    pub join_fanout_ms: f64,
    pub leader_assign_ms: f64,
    pub sync_ms: f64,
    pub sync_fanout_ms: f64,
}

/// Members of one or more groups, driven together.
pub struct Cohort {
    conns: Vec<Conn>,
    config: Arc<MemberConfig>,
    slots: Vec<Slot>,
    groups: Vec<GroupBook>,
    settled_groups: usize,
    events_tx: mpsc::UnboundedSender<(usize, Event)>,
    events_rx: mpsc::UnboundedReceiver<(usize, Event)>,
}

impl Cohort {
    pub fn new(conns: Vec<Conn>, config: MemberConfig) -> Result<Self> {
        if conns.is_empty() {
            bail!("a cohort needs at least one connection");
        }
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        Ok(Cohort {
            conns,
            config: Arc::new(config),
            slots: Vec::new(),
            groups: Vec::new(),
            settled_groups: 0,
            events_tx,
            events_rx,
        })
    }

    pub fn conns(&self) -> &[Conn] {
        &self.conns
    }

    pub fn config(&self) -> &MemberConfig {
        &self.config
    }

    /// Makes sure the members' topic exists with at least `partitions` partitions.
    pub async fn create_topic(&self, partitions: i32) -> Result<()> {
        let conn = self.conn(0)?;
        let response = conn
            .call(muster_protocol::CreateTopicsRequest {
                topics: vec![TopicInfo {
                    topic: self.config.topic.clone(),
                    partitions,
                }],
            })
            .await?;
        match response {
            Response::CreateTopics(r)
                if r.results.iter().all(|t| {
                    t.error_code == ErrorCode::None.code()
                        // An existing topic with more partitions: fine, we use what is there.
                        || t.error_code == ErrorCode::InvalidPartitions.code()
                }) =>
            {
                Ok(())
            }
            other => bail!("CreateTopics answered {other:?}"),
        }
    }

    fn conn(&self, k: usize) -> Result<Conn> {
        self.conns
            .get(k % self.conns.len())
            .cloned()
            .context("no connection")
    }

    /// Adds a group and starts `members` members in it. Returns the group's index.
    pub fn add_group(&mut self, group_id: &str, members: usize) -> Result<usize> {
        self.groups.push(GroupBook {
            id: Arc::from(group_id),
            active: 0,
            newest: -1,
            stable_in_newest: 0,
            leader: None,
            must_exceed: -1,
        });
        let group = self.groups.len() - 1;
        self.add_members(group, members)?;
        Ok(group)
    }

    /// Starts `n` more members in group `group`; returns their indices.
    pub fn add_members(&mut self, group: usize, n: usize) -> Result<std::ops::Range<usize>> {
        let book = self.groups.get_mut(group).context("no such group")?;
        if book.settled() {
            self.settled_groups -= 1;
        }
        book.active += n;
        let id = Arc::clone(&book.id);
        let first = self.slots.len();
        for _ in 0..n {
            let index = self.slots.len();
            let handle = member::spawn(
                index,
                Arc::clone(&id),
                self.conn(index)?,
                Arc::clone(&self.config),
                self.events_tx.clone(),
            );
            self.slots.push(Slot {
                group,
                handle: Some(handle),
                stable: None,
                member_id: None,
            });
        }
        Ok(first..self.slots.len())
    }

    /// Members ever started (the index the next one gets).
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    pub fn member_count(&self) -> usize {
        self.groups.iter().map(|g| g.active).sum()
    }

    /// Indices of the active members of `group`.
    pub fn members_of(&self, group: usize) -> Vec<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.group == group && s.handle.is_some())
            .map(|(i, _)| i)
            .collect()
    }

    /// The member ids of `group`'s current leader, if known.
    pub fn leader_of(&self, group: usize) -> Option<Arc<str>> {
        self.groups.get(group).and_then(|g| g.leader.clone())
    }

    /// `(group id, member id, generation)` of every active Stable member.
    pub fn stable_members(&self) -> Vec<(Arc<str>, Arc<str>, i32)> {
        self.slots
            .iter()
            .filter(|s| s.handle.is_some())
            .filter_map(|s| {
                let group = self.groups.get(s.group)?;
                Some((Arc::clone(&group.id), s.member_id.clone()?, s.stable?))
            })
            .collect()
    }

    pub fn member_id(&self, member: usize) -> Option<Arc<str>> {
        self.slots.get(member).and_then(|s| s.member_id.clone())
    }

    /// Processes events until every group is settled, or fails after `limit`.
    pub async fn settle(&mut self, limit: Duration) -> Result<Phase> {
        self.settle_observed(limit, |_, _| {}).await
    }

    /// [`Cohort::settle`], showing every event (member index, event) to `observe` first: for
    /// scenarios that follow the members' own views (what each owns, when it heartbeats).
    pub async fn settle_observed(
        &mut self,
        limit: Duration,
        mut observe: impl FnMut(usize, &Event),
    ) -> Result<Phase> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut phase = Phase::default();
        while self.settled_groups < self.groups.len() {
            let next = tokio::time::timeout_at(deadline, self.events_rx.recv())
                .await
                .map_err(|_| {
                    anyhow!(
                        "groups not settled within {limit:?} ({} of {} settled)",
                        self.settled_groups,
                        self.groups.len()
                    )
                })?;
            let (index, event) = next.context("event channel closed")?;
            observe(index, &event);
            self.on_event(index, event, &mut phase)?;
        }
        Ok(phase)
    }

    /// Processes events until `until`, settled or not, showing each to `observe` (a window in
    /// which the members just work: a baseline before a change).
    pub async fn watch(
        &mut self,
        until: tokio::time::Instant,
        mut observe: impl FnMut(usize, &Event),
    ) -> Result<()> {
        let mut phase = Phase::default();
        while let Ok(next) = tokio::time::timeout_at(until, self.events_rx.recv()).await {
            let (index, event) = next.context("event channel closed")?;
            observe(index, &event);
            self.on_event(index, event, &mut phase)?;
        }
        Ok(())
    }

    fn on_event(&mut self, index: usize, event: Event, phase: &mut Phase) -> Result<()> {
        let slot = self
            .slots
            .get(index)
            .context("event from an unknown member")?;
        if slot.handle.is_none() {
            // A retired member finishing what it was doing: no longer part of its group's count.
            return match event {
                Event::Failed { error } => bail!("member {index} failed: {error}"),
                _ => Ok(()),
            };
        }
        let group = slot.group;
        let was_settled = self
            .groups
            .get(group)
            .context("member of no group")?
            .settled();
        let mut recount = None;
        {
            let slot = self
                .slots
                .get_mut(index)
                .context("event from an unknown member")?;
            let book = self.groups.get_mut(group).context("member of no group")?;
            match event {
                Event::JoinSent { at } => {
                    phase.first_join_sent.get_or_insert(at);
                    phase.last_join_sent = Some(at);
                    phase.first_join_answered_after_last_sent = None;
                    phase.joins_sent += 1;
                    if slot.stable.take() == Some(book.newest) {
                        book.stable_in_newest -= 1;
                    }
                }
                Event::Rebalancing { at } => {
                    phase.first_rebalancing.get_or_insert(at);
                    phase.last_rebalancing = Some(at);
                    if slot.stable.take() == Some(book.newest) {
                        book.stable_in_newest -= 1;
                    }
                }
                Event::Synced {
                    at,
                    generation,
                    member_id,
                    leader,
                    ..
                } => {
                    phase.last_synced = Some(at);
                    phase.first_synced_after_leader.get_or_insert(at);
                    if leader {
                        book.leader = Some(Arc::clone(&member_id));
                    }
                    slot.member_id = Some(member_id);
                    slot.stable = Some(generation);
                    if generation > book.newest {
                        book.newest = generation;
                        recount = Some(generation);
                    } else if generation == book.newest {
                        book.stable_in_newest += 1;
                    }
                }
                Event::JoinAnswered { at } => {
                    phase.last_join_answered = Some(at);
                    phase.first_join_answered_after_last_sent.get_or_insert(at);
                }
                Event::SyncSent { at, leader } => {
                    if leader {
                        phase.leader_sync_sent = Some(at);
                        phase.first_synced_after_leader = None;
                    }
                }
                Event::Left { .. } | Event::Heartbeat { .. } => {}
                Event::Failed { error } => bail!("member {index} failed: {error}"),
            }
        }
        if let Some(generation) = recount {
            // A new generation: count who is already in it (rare, so a scan is fine).
            let count = self
                .slots
                .iter()
                .filter(|s| s.group == group && s.handle.is_some())
                .filter(|s| s.stable == Some(generation))
                .count();
            if let Some(book) = self.groups.get_mut(group) {
                book.stable_in_newest = count;
            }
        }
        self.note_settled(group, was_settled);
        Ok(())
    }

    fn note_settled(&mut self, group: usize, was_settled: bool) {
        let now_settled = self.groups.get(group).is_some_and(GroupBook::settled);
        match (was_settled, now_settled) {
            (false, true) => self.settled_groups += 1,
            (true, false) => self.settled_groups -= 1,
            _ => {}
        }
    }

    /// From now on a group counts as settled only in a generation newer than its current one
    /// (call before causing a rebalance, e.g. a member leaving or dying).
    pub fn expect_new_generation(&mut self) {
        for group in 0..self.groups.len() {
            let was_settled = self.groups.get(group).is_some_and(GroupBook::settled);
            if let Some(book) = self.groups.get_mut(group) {
                book.must_exceed = book.newest;
            }
            self.note_settled(group, was_settled);
        }
    }

    /// Takes member `index` out of the books and sends it `command`.
    fn detach(&mut self, index: usize, command: Command) -> Result<Handle> {
        let slot = self.slots.get_mut(index).context("no such member")?;
        let handle = slot.handle.take().context("member already retired")?;
        let group = slot.group;
        let stable = slot.stable.take();
        let book = self.groups.get_mut(group).context("member of no group")?;
        let was_settled = book.settled();
        book.active -= 1;
        if stable == Some(book.newest) {
            book.stable_in_newest -= 1;
        }
        self.note_settled(group, was_settled);
        let _ = handle.commands.send(command);
        Ok(handle)
    }

    /// Tells every active member to rejoin at once ([`Command::Rejoin`]); call
    /// [`Cohort::expect_new_generation`] first.
    pub fn rejoin_all(&mut self) {
        for slot in &self.slots {
            if let Some(handle) = &slot.handle {
                let _ = handle.commands.send(Command::Rejoin);
            }
        }
    }

    /// Tells member `index` to leave or stop; waits for it and returns what it knew.
    pub async fn retire(&mut self, index: usize, command: Command) -> Result<Exit> {
        let handle = self.detach(index, command)?;
        handle.task.await.context("member task panicked")?
    }

    /// Tells member `index` to leave or stop without waiting for it; the task's result comes
    /// back through the returned handle.
    pub fn retire_nowait(
        &mut self,
        index: usize,
        command: Command,
    ) -> Result<tokio::task::JoinHandle<Result<Exit>>> {
        Ok(self.detach(index, command)?.task)
    }

    /// Stops every member, then removes them all from their groups with one LeaveGroup per
    /// group (so teardown does not cost a rebalance per member).
    pub async fn shutdown(mut self) -> Result<()> {
        let mut by_group: HashMap<usize, Vec<String>> = HashMap::new();
        let mut tasks = Vec::new();
        for slot in &mut self.slots {
            if let Some(handle) = slot.handle.take() {
                let _ = handle.commands.send(Command::Stop);
                tasks.push((slot.group, handle.task));
            }
        }
        for (group, task) in tasks {
            if let Ok(Ok(exit)) = task.await {
                if !exit.member_id.is_empty() {
                    by_group.entry(group).or_default().push(exit.member_id);
                }
            }
        }
        let conn = self.conn(0)?;
        let leaves = by_group.into_iter().filter_map(|(group, ids)| {
            let book = self.groups.get(group)?;
            Some(
                conn.call(LeaveGroupRequest {
                    group_id: book.id.to_string(),
                    members: ids
                        .into_iter()
                        .map(|member_id| LeavingMember {
                            member_id,
                            group_instance_id: None,
                            reason: Some("benchmark done".to_owned()),
                        })
                        .collect(),
                }),
            )
        });
        for result in futures_util::future::join_all(leaves).await {
            result?;
        }
        Ok(())
    }
}
