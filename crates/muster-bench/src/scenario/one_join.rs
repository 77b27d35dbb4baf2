//! `one-join` (issue #23, target 1): one member joins a formed classic group of `members`,
//! timed **last JoinGroup sent → last SyncGroup answered**, and, with `--compare`, the same
//! against the redb store, the memory store and the `etcd-watch` baseline in one run.
//!
//! A group of `members` eager classic members ([`crate::member`], the leader assigning
//! round-robin) is formed and left to heartbeat; then, `repeats` times, one more member joins.
//! The others learn of the rebalance at their next heartbeat and rejoin; the window opens when
//! the last of them has sent its JoinGroup (from then on only the coordinator works: the
//! barrier closes, the new generation is made durable and fans out, the leader's assignment is
//! made durable and fans out) and closes with the last SyncGroup answer. The group grows by
//! one per repeat (1 000 → 1 000 + repeats). One join before the measured ones warms up.
//!
//! `--compare` (needs `--spawn`): each round runs three phases in turn, each alone on the
//! machine: a fresh `musterd` with the redb store (the default), a fresh one with
//! `--store memory` (no durability at all: what is left is the coordinator's own work), and a
//! fresh etcd with `members` watchers ([`crate::etcd_watch`]: put sent → the last watcher
//! notified). Rounds alternate so that the machine's drift weighs on all three alike; each
//! configuration's figure is the median of every measurement of every round, and the ratios
//! are of those medians.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use serde::Serialize;

use super::{ms, Common, Report, CLIENT_ID};
use crate::client::connect_many;
use crate::cohort::{Cohort, Steps};
use crate::etcd_watch::EtcdWatchers;
use crate::member::MemberConfig;
use crate::stats::{median, Series};
use crate::target::{load_average, Target};

#[derive(Debug, Clone)]
pub struct Options {
    pub members: usize,
    /// Measured joins per phase.
    pub repeats: usize,
    /// Connections the members (and etcd's watchers) share (default: one per 50).
    pub connections: Option<usize>,
    /// Heartbeat interval of Stable members (default: members / 10 ms, within 100..=3000 ms).
    pub heartbeat_ms: Option<u64>,
    pub session_timeout_ms: u32,
    pub rebalance_timeout_ms: u32,
    /// Give up on a phase after this long.
    pub settle_limit: Duration,
    /// Redb, memory and etcd-watch alternating (needs `--spawn`).
    pub compare: bool,
    /// Rounds of `--compare`.
    pub rounds: usize,
    /// `--compare`: an etcd to use instead of starting one.
    pub etcd: Option<String>,
}

/// The joins measured against one server.
#[derive(Debug, Default, Serialize)]
struct Joins {
    /// Last JoinGroup sent → last SyncGroup answered.
    join_to_sync_ms: Vec<f64>,
    /// The newcomer's JoinGroup → last SyncGroup answered (includes the others' wait for
    /// their next heartbeat).
    newcomer_to_sync_ms: Vec<f64>,
    steps: Vec<Steps>,
    formation_ms: f64,
}

/// The store a compared `musterd` runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Store {
    Redb,
    Memory,
}

impl Store {
    const BOTH: [Store; 2] = [Store::Redb, Store::Memory];

    fn name(self) -> &'static str {
        match self {
            Store::Redb => "redb",
            Store::Memory => "memory",
        }
    }

    fn flags(self) -> Vec<OsString> {
        vec!["--store".into(), self.name().into()]
    }
}

/// One configuration over every round of `--compare`.
#[derive(Debug, Default, Serialize)]
struct Summary {
    /// Every measurement of every round.
    all: Series,
    /// Each round's median.
    round_medians_ms: Vec<f64>,
    /// The load average when each round's phase started.
    load: Vec<f64>,
}

impl Summary {
    fn add(&mut self, values: &[f64], load: f64) {
        let mut all = std::mem::take(&mut self.all.values_ms);
        all.extend_from_slice(values);
        self.all = Series::from_ms(all);
        self.round_medians_ms.push(median(values.to_vec()));
        self.load.push(load);
    }
}

#[derive(Debug, Serialize)]
struct Compared {
    scenario: &'static str,
    members: usize,
    rounds: usize,
    repeats: usize,
    redb: Summary,
    memory: Summary,
    /// Put sent → the last of `members` watchers notified.
    etcd_watch: Summary,
    /// Put sent → etcd's answer (durable and applied).
    etcd_put: Summary,
    redb_steps: Vec<Steps>,
    memory_steps: Vec<Steps>,
    /// p50 redb / p50 etcd-watch (issue #23: at most 1).
    redb_ratio: f64,
    /// p50 memory / p50 etcd-watch.
    memory_ratio: f64,
}

fn heartbeat_ms(opts: &Options) -> u64 {
    opts.heartbeat_ms
        .unwrap_or_else(|| (opts.members as u64 / 10).clamp(100, 3000))
}

/// Forms a group of `opts.members` on the server at `common.addr`, then times `opts.repeats`
/// joins (after one to warm up).
async fn measure(common: &Common, opts: &Options) -> Result<Joins> {
    let members = opts.members.max(1);
    let connections = opts
        .connections
        .unwrap_or_else(|| members.div_ceil(50))
        .clamp(1, members);
    let conns = connect_many(common.addr, connections, CLIENT_ID).await?;
    let partitions = i32::try_from(members).unwrap_or(i32::MAX);
    let config = MemberConfig {
        topic: format!("bench-t{partitions}"),
        partitions,
        session_timeout_ms: opts.session_timeout_ms,
        rebalance_timeout_ms: opts.rebalance_timeout_ms,
        heartbeat: Duration::from_millis(heartbeat_ms(opts)),
        report_heartbeats: false,
    };
    let mut cohort = Cohort::new(conns, config)?;
    cohort.create_topic(partitions).await?;
    let group_id = super::local_group_id(common, &format!("{}-one-join", common.run_id)).await?;
    let formed_at = Instant::now();
    let group = cohort.add_group(&group_id, members)?;
    cohort
        .settle(opts.settle_limit)
        .await
        .context("the group did not form")?;
    let mut joins = Joins {
        formation_ms: ms(formed_at.elapsed()),
        ..Joins::default()
    };
    for repeat in 0..=opts.repeats {
        cohort.expect_new_generation();
        cohort.add_members(group, 1)?;
        let phase = cohort
            .settle(opts.settle_limit)
            .await
            .with_context(|| format!("join {repeat}: the group did not settle"))?;
        if repeat == 0 {
            continue;
        }
        let window = phase.join_to_sync().context("no join or sync seen")?;
        let whole = phase
            .last_synced
            .zip(phase.first_join_sent)
            .map(|(end, start)| end.saturating_duration_since(start))
            .unwrap_or_default();
        joins.join_to_sync_ms.push(ms(window));
        joins.newcomer_to_sync_ms.push(ms(whole));
        joins.steps.push(phase.steps().unwrap_or_default());
    }
    cohort.shutdown().await?;
    Ok(joins)
}

fn joins_text(members: usize, joins: &Joins) -> String {
    let window = Series::from_ms(joins.join_to_sync_ms.clone());
    let whole = Series::from_ms(joins.newcomer_to_sync_ms.clone());
    let mut text = format!(
        "one joins a group of {members} (formed in {:.0} ms)\n  last join → last sync: {window}\n  newcomer's join → last sync: {whole}\n",
        joins.formation_ms
    );
    for (i, s) in joins.steps.iter().enumerate() {
        text.push_str(&format!(
            "  join {i}: barrier {:.1}, join answers {:.1}, assign {:.1}, sync {:.1}, sync answers {:.1} ms\n",
            s.barrier_ms, s.join_fanout_ms, s.leader_assign_ms, s.sync_ms, s.sync_fanout_ms
        ));
    }
    text
}

pub async fn run(common: &Common, target: &mut Target, opts: &Options) -> Result<Report> {
    if opts.compare {
        return compare(common, target, opts).await;
    }
    let joins = measure(common, opts).await?;
    Ok(Report::new(joins_text(opts.members, &joins), &joins))
}

/// `--compare`: redb, memory and etcd-watch phases, alternating, `opts.rounds` times.
async fn compare(common: &Common, target: &mut Target, opts: &Options) -> Result<Report> {
    if !target.is_spawned() {
        bail!("one-join --compare starts its own servers: run it with --spawn");
    }
    let mut redb = Summary::default();
    let mut memory = Summary::default();
    let mut etcd_watch = Summary::default();
    let mut etcd_put = Summary::default();
    let mut redb_steps = Vec::new();
    let mut memory_steps = Vec::new();
    for round in 0..opts.rounds.max(1) {
        for store in Store::BOTH {
            target.restart_with(store.flags())?;
            let phase = Common {
                addr: target.addr,
                run_id: format!("{}-{}-{round}", common.run_id, store.name()),
                pid: target.pid,
            };
            let load = load_average()?;
            let joins = measure(&phase, opts)
                .await
                .with_context(|| format!("{} (round {round})", store.name()))?;
            eprintln!(
                "round {round} {:<6} last join → last sync p50 {:.1} ms {:?} (load {load:.2})",
                store.name(),
                median(joins.join_to_sync_ms.clone()),
                joins.join_to_sync_ms
            );
            let (summary, steps) = match store {
                Store::Redb => (&mut redb, &mut redb_steps),
                Store::Memory => (&mut memory, &mut memory_steps),
            };
            summary.add(&joins.join_to_sync_ms, load);
            steps.extend(joins.steps);
        }
        // The last server's group is gone: it idles while etcd is measured.
        let load = load_average()?;
        let mut watchers =
            EtcdWatchers::start(opts.etcd.as_deref(), opts.members, opts.connections)
                .await
                .with_context(|| format!("etcd-watch (round {round})"))?;
        let mut notified = Vec::new();
        let mut answered = Vec::new();
        for repeat in 0..=opts.repeats {
            let p = watchers.measure().await?;
            if repeat > 0 {
                notified.push(ms(p.last_notified));
                answered.push(ms(p.put_answered));
            }
        }
        drop(watchers);
        eprintln!(
            "round {round} etcd   put → last of {} watchers p50 {:.1} ms {notified:?} (put answered p50 {:.1} ms, load {load:.2})",
            opts.members,
            median(notified.clone()),
            median(answered.clone())
        );
        etcd_watch.add(&notified, load);
        etcd_put.add(&answered, load);
    }
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let figures = Compared {
        scenario: "one-join-compare",
        members: opts.members,
        rounds: opts.rounds.max(1),
        repeats: opts.repeats,
        redb_ratio: ratio(
            median(redb.all.values_ms.clone()),
            median(etcd_watch.all.values_ms.clone()),
        ),
        memory_ratio: ratio(
            median(memory.all.values_ms.clone()),
            median(etcd_watch.all.values_ms.clone()),
        ),
        redb,
        memory,
        etcd_watch,
        etcd_put,
        redb_steps,
        memory_steps,
    };
    Ok(Report::new(compare_text(&figures), &figures))
}

fn compare_text(f: &Compared) -> String {
    let line = |name: &str, s: &Summary| {
        format!(
            "  {name:<28} median {:.1} ms  ({})  round medians {:?}\n",
            median(s.all.values_ms.clone()),
            s.all,
            s.round_medians_ms
                .iter()
                .map(|v| format!("{v:.1}"))
                .collect::<Vec<_>>()
        )
    };
    let mut text = format!(
        "one member joins a group of {} (last join → last sync) against etcd telling {} watchers of one put; {} rounds × {} repeats\n",
        f.members, f.members, f.rounds, f.repeats
    );
    text.push_str(&line("musterd, redb store", &f.redb));
    text.push_str(&line("musterd, memory store", &f.memory));
    text.push_str(&line("etcd: put → last watcher", &f.etcd_watch));
    text.push_str(&line("etcd: put → put answered", &f.etcd_put));
    text.push_str(&format!(
        "  redb / etcd-watch {:.2}   memory / etcd-watch {:.2}\n",
        f.redb_ratio, f.memory_ratio
    ));
    text
}
