//! The classic side of `join-one`: the benchmark's classic members ([`crate::member`]: the
//! eager protocol, the leader assigning the topic round-robin over the members sorted by id)
//! in a [`Cohort`], followed through their events into the [`Views`].
//!
//! Eager means what Kafka's eager consumers do: a member that learns of a rebalance (a
//! Heartbeat or SyncGroup answered REBALANCE_IN_PROGRESS) gives up **everything** it owns
//! before it rejoins, and owns what its SyncGroup answer hands it. So every member's
//! partitions stop at its next heartbeat after the newcomer's JoinGroup and restart at its
//! SyncGroup answer, once the barrier (every member rejoined) and the leader's assignment are
//! through. Partition ownership is taken from those events alone.

use std::time::Instant;

use anyhow::{Context as _, Result};

use super::views::Views;
use super::{random_offset, Options, Run};
use crate::client::Conn;
use crate::cohort::Cohort;
use crate::member::{Command, Event, MemberConfig};

/// Feeds one member event into the views.
fn observe(views: &mut Views, index: usize, event: &Event) {
    match event {
        Event::JoinSent { at } => {
            if views.subject() == Some(index) {
                views.subject_request(*at);
            } else {
                // A rejoin: eager, it holds nothing while it joins.
                views.set(index, *at, &[]);
                views.acted(index);
            }
        }
        Event::Rebalancing { at } => {
            views.set(index, *at, &[]);
            views.acted(index);
        }
        Event::SyncSent { .. } | Event::JoinAnswered { .. } => views.acted(index),
        Event::Synced { at, partitions, .. } => {
            views.set(index, *at, partitions);
            views.acted(index);
        }
        Event::Heartbeat { sent, at, .. } => views.heartbeat(index, *sent, *at),
        Event::Left { .. } | Event::Failed { .. } => {}
    }
}

/// One repeat: form the group, a baseline, one member joins, (one leaves), tear down.
pub async fn run_once(conns: &[Conn], opts: &Options, group_id: &str, topic: &str) -> Result<Run> {
    let config = MemberConfig {
        topic: topic.to_owned(),
        partitions: opts.partitions,
        session_timeout_ms: opts.session_timeout_ms,
        rebalance_timeout_ms: opts.rebalance_timeout_ms,
        heartbeat: opts.heartbeat,
        report_heartbeats: true,
    };
    let mut cohort = Cohort::new(conns.to_vec(), config)?;
    let mut views = Views::new(usize::try_from(opts.partitions).unwrap_or(0))?;
    let formed_at = Instant::now();
    let group = cohort.add_group(group_id, opts.members)?;
    cohort
        .settle_observed(opts.settle_limit, |i, e| observe(&mut views, i, e))
        .await
        .context("classic: the group did not form")?;
    let formation_ms = formed_at.elapsed().as_secs_f64() * 1e3;

    // Baseline: the members only heartbeat.
    views.begin_baseline()?;
    let until = tokio::time::Instant::now() + opts.baseline;
    cohort
        .watch(until, |i, e| observe(&mut views, i, e))
        .await?;
    let baseline = views.baseline();

    // One member joins.
    let others = cohort.members_of(group);
    cohort.expect_new_generation();
    views.begin_change(cohort.slot_count())?;
    cohort.add_members(group, 1)?;
    cohort
        .settle_observed(opts.settle_limit, |i, e| observe(&mut views, i, e))
        .await
        .context("classic: the group did not settle after a member joined")?;
    let join = views.end_change(Instant::now(), &others);

    let mut leave = None;
    if !opts.no_leave {
        // One member that was there before leaves (a follower: the leader's leaving would
        // also move the leadership).
        let leader = cohort.leader_of(group);
        let pick = others
            .iter()
            .rev()
            .copied()
            .find(|&m| cohort.member_id(m) != leader)
            .context("no follower to leave")?;
        let remaining: Vec<usize> = cohort
            .members_of(group)
            .into_iter()
            .filter(|&m| m != pick)
            .collect();
        let until = tokio::time::Instant::now() + random_offset(opts.heartbeat)?;
        cohort
            .watch(until, |i, e| observe(&mut views, i, e))
            .await?;
        cohort.expect_new_generation();
        let start = views.begin_change(pick)?;
        views.subject_request(start);
        // It stops working before it leaves.
        views.set(pick, start, &[]);
        let leaver = cohort.retire_nowait(pick, Command::Leave)?;
        cohort
            .settle_observed(opts.settle_limit, |i, e| observe(&mut views, i, e))
            .await
            .context("classic: the group did not settle after a member left")?;
        leaver.await.context("leaving member panicked")??;
        leave = Some(views.end_change(Instant::now(), &remaining));
    }
    cohort.shutdown().await?;
    Ok(Run {
        formation_ms,
        interval_ms: u64::try_from(opts.heartbeat.as_millis()).unwrap_or(u64::MAX),
        baseline,
        join,
        leave,
        server_states: Vec::new(),
    })
}
