//! `rebalance`: how long a group takes to form, and to settle again after a member leaves.
//!
//! Each repeat creates `groups` fresh groups of `members` members at once. Every member joins
//! (MEMBER_ID_REQUIRED, then the real join), the leader assigns the topic's partitions
//! round-robin, everyone syncs. With `--initial-rebalance-delay-ms 0` the first member's join
//! completes alone at once (as in Kafka); the others' joins start the next rebalance, which the
//! first generation's members learn of from their SyncGroup or their next Heartbeat. The figure
//! is **last JoinGroup sent → last SyncGroup answered** over all groups of the repeat: once the
//! last member has asked to join, how long until everybody has an assignment.
//!
//! Then one member of every group leaves (LeaveGroup); the others learn of the rebalance from
//! their next heartbeat, rejoin and sync. The figure is **LeaveGroup sent → last SyncGroup
//! answered**, split into detection (→ last member told REBALANCE_IN_PROGRESS, bounded by the
//! heartbeat interval) and the barrier itself (last JoinGroup sent → last SyncGroup answered).
//!
//! `idle_groups` (the scale curve, issue #23 target 6): before the first repeat, that many more
//! groups are made Empty with one committed offset each (as most groups of a large deployment
//! are most of the time), so that the rebalances run in a server holding them. With the
//! server's process id known, its RSS is read at the start, once the idle groups are made, and
//! after each repeat's rejoin (every member Stable).

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde::Serialize;

use super::commit::{is_committed, simple_commit};
use super::{ms, Common, Report, CLIENT_ID};
use crate::client::{connect_many, Conn};
use crate::cohort::{Cohort, Steps};
use crate::member::{Command, MemberConfig};
use crate::stats::Series;
use crate::target::rss_bytes;

/// Connections, and commits in flight, that make the idle groups.
const IDLE_MAKERS: usize = 32;

#[derive(Debug, Clone)]
pub struct Options {
    pub members: usize,
    pub groups: usize,
    pub repeats: usize,
    /// Connections the members share (default: one per 50 members).
    pub connections: Option<usize>,
    /// Partitions of the topic (default: one per member of a group).
    pub partitions: Option<i32>,
    /// Heartbeat interval of Stable members (default: total members / 10 ms, within
    /// 100..=3000 ms, so heartbeats stay near 10 000/s whatever the size).
    pub heartbeat_ms: Option<u64>,
    pub session_timeout_ms: u32,
    pub rebalance_timeout_ms: u32,
    /// Skip the leave measurement.
    pub no_leave: bool,
    /// Give up on a phase after this long.
    pub settle_limit: Duration,
    /// Empty groups (one committed offset each) made before the first repeat.
    pub idle_groups: usize,
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    members_per_group: usize,
    groups: usize,
    total_members: usize,
    connections: usize,
    heartbeat_ms: u64,
    /// Last JoinGroup sent → last SyncGroup answered, one value per repeat.
    join_to_sync: Series,
    /// First JoinGroup sent → last SyncGroup answered.
    formation_total: Series,
    /// JoinGroup requests sent per repeat (first joins, rejoins and retries).
    joins_sent: Vec<usize>,
    /// The formation window cut at its steps, one per repeat (see `Phase::steps`).
    steps: Vec<Steps>,
    /// Every member of every group told to rejoin at once (with changed metadata): the
    /// moment they are told → last SyncGroup answered.
    rejoin_all: Series,
    /// The same, last JoinGroup sent → last SyncGroup answered.
    rejoin_join_to_sync: Series,
    /// The rejoin window cut at its steps, one per repeat.
    rejoin_steps: Vec<Steps>,
    /// LeaveGroup sent → every remaining member synced again.
    leave_settle: Option<Series>,
    /// LeaveGroup sent → the last remaining member told REBALANCE_IN_PROGRESS.
    leave_detection: Option<Series>,
    /// After a leave: last JoinGroup sent → last SyncGroup answered.
    leave_join_to_sync: Option<Series>,
    /// Empty groups the server held besides the measured ones.
    idle_groups: usize,
    /// The server's RSS at the start, once the idle groups were made, and after each repeat's
    /// rejoin (bytes; when its process id is known).
    rss_start: Option<u64>,
    rss_idle_made: Option<u64>,
    rss_formed: Vec<u64>,
}

/// Makes `count` Empty groups with one committed offset each, `IDLE_MAKERS` commits in flight.
async fn make_idle_groups(common: &Common, count: usize) -> Result<()> {
    let conns = connect_many(common.addr, IDLE_MAKERS.min(count.max(1)), CLIENT_ID).await?;
    let mut tasks = Vec::new();
    for (k, conn) in conns.into_iter().enumerate() {
        let run_id = common.run_id.clone();
        tasks.push(tokio::spawn(async move {
            let conn: Conn = conn;
            for i in (k..count).step_by(IDLE_MAKERS) {
                let request = simple_commit(&format!("{run_id}-idle-{i}"), "bench-idle", 1, 1);
                let answer = conn.call(request).await?;
                if !is_committed(&answer) {
                    anyhow::bail!("idle group {i}: commit answered {answer:?}");
                }
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await.context("an idle-group maker panicked")??;
    }
    Ok(())
}

pub async fn run(common: &Common, opts: &Options) -> Result<Report> {
    let members = opts.members.max(1);
    let groups = opts.groups.max(1);
    let total = members * groups;
    let connections = opts
        .connections
        .unwrap_or_else(|| total.div_ceil(50))
        .clamp(1, total);
    let heartbeat_ms = opts
        .heartbeat_ms
        .unwrap_or_else(|| (total as u64 / 10).clamp(100, 3000));
    let partitions = opts
        .partitions
        .unwrap_or_else(|| i32::try_from(members).unwrap_or(i32::MAX));
    let rss = || common.pid.and_then(|pid| rss_bytes(pid).ok());
    let rss_start = rss();
    if opts.idle_groups > 0 {
        let started = Instant::now();
        make_idle_groups(common, opts.idle_groups)
            .await
            .context("cannot make the idle groups")?;
        eprintln!(
            "{} idle groups made in {:.1} s",
            opts.idle_groups,
            started.elapsed().as_secs_f64()
        );
    }
    let rss_idle_made = rss();
    let mut rss_formed = Vec::new();
    let conns = connect_many(common.addr, connections, CLIENT_ID).await?;
    let config = MemberConfig {
        // One topic per partition count, so runs of other sizes do not change it.
        topic: format!("bench-t{partitions}"),
        partitions,
        session_timeout_ms: opts.session_timeout_ms,
        rebalance_timeout_ms: opts.rebalance_timeout_ms,
        heartbeat: Duration::from_millis(heartbeat_ms),
        report_heartbeats: false,
    };

    let mut join_to_sync = Vec::new();
    let mut formation = Vec::new();
    let mut joins_sent = Vec::new();
    let mut steps = Vec::new();
    let mut rejoin_all = Vec::new();
    let mut rejoin_window = Vec::new();
    let mut rejoin_steps = Vec::new();
    let mut leave_settle = Vec::new();
    let mut leave_detect = Vec::new();
    let mut leave_barrier = Vec::new();
    let mut text = String::new();
    for repeat in 0..opts.repeats.max(1) {
        let mut cohort = Cohort::new(conns.clone(), config.clone())?;
        if repeat == 0 {
            cohort.create_topic(partitions).await?;
        }
        for g in 0..groups {
            // In a cluster: a group the server connected to coordinates.
            let group_id =
                super::local_group_id(common, &format!("{}-r{repeat}-g{g}", common.run_id)).await?;
            cohort.add_group(&group_id, members)?;
        }
        let phase = cohort
            .settle(opts.settle_limit)
            .await
            .with_context(|| format!("repeat {repeat}: groups did not form"))?;
        let window = phase.join_to_sync().context("no join or sync seen")?;
        let all = phase
            .last_synced
            .zip(phase.first_join_sent)
            .map(|(end, start)| end.saturating_duration_since(start))
            .unwrap_or_default();
        join_to_sync.push(window);
        let step = phase.steps().unwrap_or_default();
        steps.push(step);
        formation.push(all);
        joins_sent.push(phase.joins_sent);
        let mut line = format!(
            "repeat {repeat}: last join → last sync {:.1} ms [barrier {:.1}, join answers {:.1}, assign {:.1}, sync {:.1}, sync answers {:.1}] (first join → last sync {:.1} ms, {} JoinGroups)",
            ms(window),
            step.barrier_ms,
            step.join_fanout_ms,
            step.leader_assign_ms,
            step.sync_ms,
            step.sync_fanout_ms,
            ms(all),
            phase.joins_sent
        );

        // Every member rejoins at once: all groups rebalance together, nobody waits for a
        // heartbeat to learn of it.
        cohort.expect_new_generation();
        let started = Instant::now();
        cohort.rejoin_all();
        let phase = cohort
            .settle(opts.settle_limit)
            .await
            .with_context(|| format!("repeat {repeat}: groups did not settle after a rejoin"))?;
        let all = phase
            .last_synced
            .map(|t| t.saturating_duration_since(started))
            .unwrap_or_default();
        let window = phase.join_to_sync().unwrap_or_default();
        let step = phase.steps().unwrap_or_default();
        rejoin_all.push(all);
        rejoin_window.push(window);
        rejoin_steps.push(step);
        rss_formed.extend(rss());
        line.push_str(&format!(
            "; all rejoin → settled {:.1} ms (last join → last sync {:.1} ms [barrier {:.1}, join answers {:.1}, sync {:.1}, sync answers {:.1}])",
            ms(all),
            ms(window),
            step.barrier_ms,
            step.join_fanout_ms,
            step.sync_ms,
            step.sync_fanout_ms
        ));

        if !opts.no_leave && members > 1 {
            // One follower per group leaves, all at once.
            let mut leavers = Vec::new();
            cohort.expect_new_generation();
            let started = Instant::now();
            for g in 0..groups {
                let leader = cohort.leader_of(g);
                let pick = cohort
                    .members_of(g)
                    .into_iter()
                    .rev()
                    .find(|&m| cohort.member_id(m) != leader)
                    .context("no follower to leave")?;
                leavers.push(cohort.retire_nowait(pick, Command::Leave)?);
            }
            let phase = cohort
                .settle(opts.settle_limit)
                .await
                .with_context(|| format!("repeat {repeat}: groups did not settle after a leave"))?;
            for leaver in leavers {
                leaver.await.context("leaving member panicked")??;
            }
            let settle = phase
                .last_synced
                .map(|t| t.saturating_duration_since(started))
                .unwrap_or_default();
            let detect = phase
                .last_rebalancing
                .map(|t| t.saturating_duration_since(started))
                .unwrap_or_default();
            let barrier = phase.join_to_sync().unwrap_or_default();
            leave_settle.push(settle);
            leave_detect.push(detect);
            leave_barrier.push(barrier);
            line.push_str(&format!(
                "; leave → settled {:.1} ms (detected by {:.1} ms, last join → last sync {:.1} ms)",
                ms(settle),
                ms(detect),
                ms(barrier)
            ));
        }
        text.push_str(&line);
        text.push('\n');
        cohort.shutdown().await?;
    }
    let figures = Figures {
        scenario: "rebalance",
        members_per_group: members,
        groups,
        total_members: total,
        connections,
        heartbeat_ms,
        join_to_sync: Series::from_durations(&join_to_sync),
        formation_total: Series::from_durations(&formation),
        joins_sent,
        steps,
        rejoin_all: Series::from_durations(&rejoin_all),
        rejoin_join_to_sync: Series::from_durations(&rejoin_window),
        rejoin_steps,
        leave_settle: (!leave_settle.is_empty()).then(|| Series::from_durations(&leave_settle)),
        leave_detection: (!leave_detect.is_empty()).then(|| Series::from_durations(&leave_detect)),
        leave_join_to_sync: (!leave_barrier.is_empty())
            .then(|| Series::from_durations(&leave_barrier)),
        idle_groups: opts.idle_groups,
        rss_start,
        rss_idle_made,
        rss_formed,
    };
    text.push_str(&format!(
        "rebalance {members} members × {groups} groups over {connections} connections (heartbeat {heartbeat_ms} ms)\n  last join → last sync: {}\n  first join → last sync: {}\n  all members rejoin → settled: {}\n  all members rejoin, last join → last sync: {}\n",
        figures.join_to_sync,
        figures.formation_total,
        figures.rejoin_all,
        figures.rejoin_join_to_sync
    ));
    if let (Some(start), Some(formed)) = (figures.rss_start, figures.rss_formed.last()) {
        text.push_str(&format!(
            "  server RSS: {} MiB at start, {} MiB with {} idle groups, {} MiB formed\n",
            start >> 20,
            figures.rss_idle_made.unwrap_or(0) >> 20,
            figures.idle_groups,
            formed >> 20
        ));
    }
    if let (Some(settle), Some(detect), Some(barrier)) = (
        &figures.leave_settle,
        &figures.leave_detection,
        &figures.leave_join_to_sync,
    ) {
        text.push_str(&format!(
            "  leave → settled: {settle}\n  leave → last member told: {detect}\n  after leave, last join → last sync: {barrier}\n"
        ));
    }
    Ok(Report::new(text, &figures))
}
