//! `commit --compare-history` (issue #22): what per-partition offset history costs durable
//! commits, measured in one run (needs `--spawn`).
//!
//! **Throughput.** Each round starts a fresh `musterd` (fresh data directory) with
//! `--offset-history-entries 0` (history off) and runs the `commit` load
//! ([`super::commit::measure`]) against it, then does the same against a fresh one with
//! `--offset-history-entries 100` (on, the default): off and on alternate, `rounds` times, so
//! that the machine's drift weighs on both alike. A configuration's figures are medians over
//! its rounds (of commits/s, and of each round's p50 and p99); the ratios on / off are of those
//! medians. A partition's history is full after 100 commits, well inside the warm-up, so what
//! is measured is the steady state: every commit adds one entry per partition and drops one.
//!
//! **Memory and disk** (`fill_partitions` > 0). A fresh server of each configuration, off then
//! on, gets `fill_partitions` partitions spread over `connections` groups (one connection
//! each, one commit in flight), each partition committed `fill_commits` times (a commit names
//! all of its group's partitions). After a pause the server's RSS and its data directory's size
//! are read — before the groups are deleted (the DeleteGroups is timed). History's cost per
//! partition is (on − off) / partitions of what the server grew by from its start to the filled
//! state; per entry, that over the entries a partition keeps (min(`fill_commits`, 100)). RSS
//! counts what the allocator took from the kernel, so the memory figure bounds what the entries
//! hold live from above; the file's size includes redb's free pages, which is what an operator
//! sees on disk.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use muster_protocol::DeleteGroupsRequest;
use serde::Serialize;

use super::commit::{self, is_committed, simple_commit};
use super::{ms, Common, Report, CLIENT_ID};
use crate::client::{connect_many, Conn};
use crate::stats::{failed_note, fmt_us, median};
use crate::target::{disk_bytes, load_average, rss_bytes, Target};

/// Entries a partition keeps with history on: musterd's default `--offset-history-entries`.
pub const HISTORY_ENTRIES: u32 = 100;

/// The topic the fill commits to.
const FILL_TOPIC: &str = "bench-history";

#[derive(Debug, Clone)]
pub struct Options {
    /// The commit load each round runs against each configuration.
    pub load: commit::Options,
    pub rounds: usize,
    /// Partitions the fill commits to (0: no fill, no memory or disk figures).
    pub fill_partitions: usize,
    /// Commits per partition in the fill.
    pub fill_commits: usize,
    /// Pause before each RSS reading, for the server to finish what the fill started.
    pub pause: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum History {
    Off,
    On,
}

impl History {
    /// In the order each round runs them.
    const BOTH: [History; 2] = [History::Off, History::On];

    fn entries(self) -> u32 {
        match self {
            History::Off => 0,
            History::On => HISTORY_ENTRIES,
        }
    }

    fn name(self) -> &'static str {
        match self {
            History::Off => "off",
            History::On => "on",
        }
    }

    /// The server's flags for this configuration.
    fn flags(self) -> Vec<OsString> {
        vec![
            "--offset-history-entries".into(),
            self.entries().to_string().into(),
        ]
    }
}

/// One configuration's commit load: medians over the rounds, and every round.
#[derive(Debug, Serialize)]
struct LoadSummary {
    history: History,
    history_entries: u32,
    commits_per_second: f64,
    partition_offsets_per_second: f64,
    p50_us: f64,
    p99_us: f64,
    failed: u64,
    /// The 1-minute load average before each round.
    load_averages: Vec<f64>,
    rounds: Vec<commit::Figures>,
}

impl LoadSummary {
    fn new(history: History, rounds: Vec<commit::Figures>, load_averages: Vec<f64>) -> Self {
        let of = |f: fn(&commit::Figures) -> f64| median(rounds.iter().map(f).collect());
        LoadSummary {
            history,
            history_entries: history.entries(),
            commits_per_second: of(|r| r.commits_per_second),
            partition_offsets_per_second: of(|r| r.partition_offsets_per_second),
            p50_us: of(|r| r.latency.p50_us),
            p99_us: of(|r| r.latency.p99_us),
            failed: rounds.iter().map(|r| r.failed).sum(),
            load_averages,
            rounds,
        }
    }
}

/// One configuration's fill: what the server held before and after.
#[derive(Debug, Serialize)]
struct Fill {
    history: History,
    history_entries: u32,
    partitions: usize,
    groups: usize,
    commits_per_partition: usize,
    fill_s: f64,
    load_average: f64,
    rss_start: u64,
    rss_filled: u64,
    /// The data directory's files: sizes added up.
    disk_start: u64,
    disk_filled: u64,
    /// The data directory's files: blocks allocated.
    disk_allocated_start: u64,
    disk_allocated_filled: u64,
    /// The DeleteGroups of every fill group, after the readings.
    delete_ms: f64,
}

impl Fill {
    fn rss_growth(&self) -> f64 {
        self.rss_filled as f64 - self.rss_start as f64
    }

    fn disk_growth(&self) -> f64 {
        self.disk_filled as f64 - self.disk_start as f64
    }

    fn allocated_growth(&self) -> f64 {
        self.disk_allocated_filled as f64 - self.disk_allocated_start as f64
    }
}

/// What history costs per partition, from the two fills.
#[derive(Debug, Serialize)]
struct FillCost {
    entries_per_partition: u32,
    memory_bytes_per_partition: f64,
    memory_bytes_per_entry: f64,
    disk_bytes_per_partition: f64,
    disk_bytes_per_entry: f64,
    disk_allocated_bytes_per_partition: f64,
    off: Fill,
    on: Fill,
}

impl FillCost {
    fn new(off: Fill, on: Fill) -> Self {
        let partitions = on.partitions.max(1) as f64;
        let entries = on
            .commits_per_partition
            .min(HISTORY_ENTRIES as usize)
            .max(1);
        let per_partition = |on: f64, off: f64| (on - off) / partitions;
        let memory = per_partition(on.rss_growth(), off.rss_growth());
        let disk = per_partition(on.disk_growth(), off.disk_growth());
        FillCost {
            entries_per_partition: u32::try_from(entries).unwrap_or(HISTORY_ENTRIES),
            memory_bytes_per_partition: memory,
            memory_bytes_per_entry: memory / entries as f64,
            disk_bytes_per_partition: disk,
            disk_bytes_per_entry: disk / entries as f64,
            disk_allocated_bytes_per_partition: per_partition(
                on.allocated_growth(),
                off.allocated_growth(),
            ),
            off,
            on,
        }
    }
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    connections: usize,
    partitions_per_commit: i32,
    pipeline: usize,
    rounds: usize,
    off: LoadSummary,
    on: LoadSummary,
    /// on / off of the median commits/s (issue #22: at least 0.90).
    throughput_ratio: f64,
    /// on / off of the median p50.
    p50_ratio: f64,
    /// on / off of the median p99.
    p99_ratio: f64,
    fill: Option<FillCost>,
}

pub async fn run(common: &Common, target: &mut Target, opts: &Options) -> Result<Report> {
    if !target.is_spawned() {
        bail!("commit --compare-history starts its own servers: run it with --spawn");
    }
    let rounds_wanted = opts.rounds.max(1);
    let mut rounds: [Vec<commit::Figures>; 2] = [Vec::new(), Vec::new()];
    let mut loads: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds_wanted {
        for (i, history) in History::BOTH.into_iter().enumerate() {
            let phase = restart(common, target, history, &format!("{round}"))?;
            loads[i].push(load_average()?);
            let figures = commit::measure(&phase, &opts.load)
                .await
                .with_context(|| format!("history {} (round {round})", history.name()))?;
            eprintln!(
                "round {round} history {:<3} {:>8.0} commits/s  p50 {}  p99 {}",
                history.name(),
                figures.commits_per_second,
                fmt_us(figures.latency.p50_us),
                fmt_us(figures.latency.p99_us)
            );
            rounds[i].push(figures);
        }
    }
    let [off_rounds, on_rounds] = rounds;
    let [off_loads, on_loads] = loads;
    let off = LoadSummary::new(History::Off, off_rounds, off_loads);
    let on = LoadSummary::new(History::On, on_rounds, on_loads);

    let fill = if opts.fill_partitions > 0 {
        let mut fills = Vec::with_capacity(2);
        for history in History::BOTH {
            let phase = restart(common, target, history, "fill")?;
            let data_dir = target
                .data_dir()
                .context("a spawned server has a data directory")?
                .to_owned();
            let pid = target.pid.context("a spawned server has a process id")?;
            let filled = fill(&phase, pid, &data_dir, history, opts)
                .await
                .with_context(|| format!("fill with history {}", history.name()))?;
            eprintln!(
                "fill history {:<3} {:.1} s  RSS {} → {} MiB  disk {} → {} KiB",
                history.name(),
                filled.fill_s,
                filled.rss_start >> 20,
                filled.rss_filled >> 20,
                filled.disk_start >> 10,
                filled.disk_filled >> 10
            );
            fills.push(filled);
        }
        let on = fills.pop().context("two fills")?;
        let off = fills.pop().context("two fills")?;
        Some(FillCost::new(off, on))
    } else {
        None
    };

    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let figures = Figures {
        scenario: "commit-history",
        connections: opts.load.connections.max(1),
        partitions_per_commit: opts.load.partitions.max(1),
        pipeline: opts.load.pipeline,
        rounds: rounds_wanted,
        throughput_ratio: ratio(on.commits_per_second, off.commits_per_second),
        p50_ratio: ratio(on.p50_us, off.p50_us),
        p99_ratio: ratio(on.p99_us, off.p99_us),
        off,
        on,
        fill,
    };
    Ok(Report::new(text(&figures), &figures))
}

/// Kills the server and starts a fresh one with `history`; the `Common` for the phase `label`.
fn restart(common: &Common, target: &mut Target, history: History, label: &str) -> Result<Common> {
    target.restart_with(history.flags())?;
    Ok(Common {
        addr: target.addr,
        run_id: format!("{}-{}-{label}", common.run_id, history.name()),
        pid: target.pid,
    })
}

/// Fills a fresh server (process `pid`, data in `data_dir`) and reads what it holds.
async fn fill(
    common: &Common,
    pid: u32,
    data_dir: &Path,
    history: History,
    opts: &Options,
) -> Result<Fill> {
    let partitions = opts.fill_partitions.max(1);
    let groups = opts.load.connections.clamp(1, partitions);
    let commits = i64::try_from(opts.fill_commits.max(1))?;
    let conns = connect_many(common.addr, groups, CLIENT_ID).await?;
    tokio::time::sleep(opts.pause).await;
    let load_average = load_average()?;
    let rss_start = rss_bytes(pid)?;
    let (disk_start, disk_allocated_start) = disk_bytes(data_dir)?;

    let started = Instant::now();
    let mut tasks = Vec::with_capacity(groups);
    for (i, conn) in conns.into_iter().enumerate() {
        // Partitions spread as evenly as they go: the first `partitions % groups` get one more.
        let count = i32::try_from(partitions / groups + usize::from(i < partitions % groups))?;
        let group_id = format!("{}-fill-{i}", common.run_id);
        tasks.push(tokio::spawn(fill_group(conn, group_id, count, commits)));
    }
    let mut group_ids = Vec::with_capacity(groups);
    for task in tasks {
        group_ids.push(task.await.context("fill task panicked")??);
    }
    let fill_s = started.elapsed().as_secs_f64();

    tokio::time::sleep(opts.pause).await;
    let rss_filled = rss_bytes(pid)?;
    let (disk_filled, disk_allocated_filled) = disk_bytes(data_dir)?;

    let admin = Conn::connect(common.addr, CLIENT_ID).await?;
    let deleting = Instant::now();
    admin.call(DeleteGroupsRequest { group_ids }).await?;
    let delete_ms = ms(deleting.elapsed());

    Ok(Fill {
        history,
        history_entries: history.entries(),
        partitions,
        groups,
        commits_per_partition: opts.fill_commits.max(1),
        fill_s,
        load_average,
        rss_start,
        rss_filled,
        disk_start,
        disk_filled,
        disk_allocated_start,
        disk_allocated_filled,
        delete_ms,
    })
}

/// Commits offsets 1..=`commits` to partitions `0..partitions` of one group, one commit at a
/// time; returns the group's id.
async fn fill_group(conn: Conn, group_id: String, partitions: i32, commits: i64) -> Result<String> {
    for offset in 1..=commits {
        let answer = conn
            .call(simple_commit(&group_id, FILL_TOPIC, partitions, offset))
            .await?;
        if !is_committed(&answer) {
            bail!("fill commit {offset} of {group_id} failed: {answer:?}");
        }
    }
    Ok(group_id)
}

fn text(f: &Figures) -> String {
    let loads: Vec<f64> = f
        .off
        .load_averages
        .iter()
        .chain(&f.on.load_averages)
        .copied()
        .collect();
    let lowest = loads.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = loads.iter().copied().fold(0.0, f64::max);
    let mut text = format!(
        "commit with offset history off and on: {} connections × {} in flight, {} partitions/commit, medians of {} rounds (load average {lowest:.1}–{highest:.1})\n",
        f.connections, f.pipeline, f.partitions_per_commit, f.rounds
    );
    for s in [&f.off, &f.on] {
        let each: Vec<String> = s
            .rounds
            .iter()
            .map(|r| format!("{:.0}", r.commits_per_second))
            .collect();
        text.push_str(&format!(
            "  {:<3} ({:>3} entries) {:>8.0} commits/s = {:>9.0} partition offsets/s  p50 {}  p99 {}  (rounds: {}){}\n",
            s.history.name(),
            s.history_entries,
            s.commits_per_second,
            s.partition_offsets_per_second,
            fmt_us(s.p50_us),
            fmt_us(s.p99_us),
            each.join(", "),
            failed_note(s.failed)
        ));
    }
    text.push_str(&format!(
        "  on / off: throughput {:.1} %  p50 {:.1} %  p99 {:.1} %\n",
        f.throughput_ratio * 100.0,
        f.p50_ratio * 100.0,
        f.p99_ratio * 100.0
    ));
    if let Some(c) = &f.fill {
        text.push_str(&format!(
            "fill: {} partitions in {} groups, {} commits each\n",
            c.on.partitions, c.on.groups, c.on.commits_per_partition
        ));
        for fill in [&c.off, &c.on] {
            text.push_str(&format!(
                "  {:<3} {:>6.1} s  RSS {:.1} → {:.1} MiB  disk {:.1} → {:.1} MiB (allocated {:.1} MiB)  delete {:.0} ms  (load average {:.1})\n",
                fill.history.name(),
                fill.fill_s,
                mib(fill.rss_start),
                mib(fill.rss_filled),
                mib(fill.disk_start),
                mib(fill.disk_filled),
                mib(fill.disk_allocated_filled),
                fill.delete_ms,
                fill.load_average
            ));
        }
        text.push_str(&format!(
            "  history per partition ({} entries): memory {:.0} B ({:.1} B/entry)  disk {:.0} B ({:.1} B/entry; allocated {:.0} B)\n",
            c.entries_per_partition,
            c.memory_bytes_per_partition,
            c.memory_bytes_per_entry,
            c.disk_bytes_per_partition,
            c.disk_bytes_per_entry,
            c.disk_allocated_bytes_per_partition
        ));
    }
    text
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}
