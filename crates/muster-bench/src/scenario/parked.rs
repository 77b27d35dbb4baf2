//! `parked` (issue #23): what an idle group costs the server parked — kept as data, with no
//! actor of its own — against live, with its actor; measured in one run (needs `--spawn`).
//!
//! Method. A fresh `musterd` is started with an empty data directory and its RSS read (the
//! baseline). It is then given `groups` groups, each made by one simple OffsetCommit of one
//! partition (an Empty group holding one offset: what a consumer group leaves behind for the
//! offsets' retention, 7 days by default, and what a simple consumer keeps). Then the server is
//! restarted on that data directory `rounds` times in each configuration, alternating:
//! `--park-after-ms 0` (every group loaded with its actor: the behaviour before parking) and
//! the default (every group loaded parked). After each start and a pause its RSS is read. A
//! configuration's figure is the median over its rounds; per group, (RSS − baseline) / groups.
//! Both configurations load the same file the same way, so their difference is the actors'
//! (task, mailbox, address) — a difference of two readings taken minutes apart on the same
//! machine, insensitive to its CPU load. RSS counts what the allocator took from the kernel, so
//! each figure bounds what is held live from above.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use muster_protocol::{OffsetFetchRequest, Response};
use serde::Serialize;

use super::commit::{is_committed, simple_commit};
use super::{Common, Report, CLIENT_ID};
use crate::client::{connect_many, Conn};
use crate::stats::median;
use crate::target::{load_average, rss_bytes, Target};

/// The topic the fill commits to.
const FILL_TOPIC: &str = "bench-parked";

/// Connections the fill spreads its commits over, and commits in flight on each.
const FILL_CONNECTIONS: usize = 8;
const FILL_IN_FLIGHT: usize = 32;

#[derive(Debug, Clone)]
pub struct Options {
    pub groups: usize,
    /// Restarts in each configuration, alternating.
    pub rounds: usize,
    /// Pause before each RSS reading.
    pub pause: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Live,
    Parked,
}

impl Mode {
    const BOTH: [Mode; 2] = [Mode::Live, Mode::Parked];

    fn name(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::Parked => "parked",
        }
    }

    /// The server's flags for this configuration (musterd's default `park_after_ms` parks),
    /// with room for `groups`.
    fn flags(self, groups: usize) -> Vec<OsString> {
        let mut flags = room_for(groups);
        if self == Mode::Live {
            flags.extend(["--park-after-ms".into(), "0".into()]);
        }
        flags
    }
}

/// Room for `groups` groups: musterd refuses to create more than `max_groups` (50 000 by
/// default), and the fill makes one group per commit.
fn room_for(groups: usize) -> Vec<OsString> {
    vec!["--max-groups".into(), groups.max(50_000).to_string().into()]
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    groups: usize,
    rounds: usize,
    fill_s: f64,
    rss_empty: u64,
    /// Each configuration's readings, in the order taken.
    rss_live: Vec<u64>,
    rss_parked: Vec<u64>,
    /// Each restart's time, in the order taken: from killing the server to the last group's
    /// offset fetched from the new one (its every group loaded).
    restart_s_live: Vec<f64>,
    restart_s_parked: Vec<f64>,
    bytes_per_group_live: f64,
    bytes_per_group_parked: f64,
    /// (live − parked) / groups: what parking saves per group.
    bytes_saved_per_group: f64,
    load_averages: Vec<f64>,
}

pub async fn run(common: &Common, target: &mut Target, opts: &Options) -> Result<Report> {
    if !target.is_spawned() {
        bail!("parked restarts its server on the same data: run it with --spawn");
    }
    let groups = opts.groups.max(1);
    let pid = |target: &Target| target.pid.context("a spawned server has a process id");
    target.restart_on_same_data(room_for(groups))?;
    tokio::time::sleep(opts.pause).await;
    let rss_empty = rss_bytes(pid(target)?)?;

    let started = Instant::now();
    fill(target.addr, &common.run_id, groups)
        .await
        .context("fill")?;
    let fill_s = started.elapsed().as_secs_f64();
    eprintln!("filled {groups} groups in {fill_s:.1} s");

    let mut readings: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let mut restarts: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut load_averages = Vec::new();
    let last = group_id(&common.run_id, groups - 1);
    for round in 0..opts.rounds.max(1) {
        for (i, mode) in Mode::BOTH.into_iter().enumerate() {
            let restarted = Instant::now();
            target.restart_on_same_data(mode.flags(groups))?;
            answering(target.addr, &last).await?;
            let restart_s = restarted.elapsed().as_secs_f64();
            eprintln!("round {round} {:<6} restart {restart_s:.2} s", mode.name());
            restarts[i].push(restart_s);
            tokio::time::sleep(opts.pause).await;
            let rss = rss_bytes(pid(target)?)?;
            load_averages.push(load_average()?);
            eprintln!("round {round} {:<6} RSS {} KiB", mode.name(), rss >> 10);
            readings[i].push(rss);
        }
    }
    let [rss_live, rss_parked] = readings;
    let [restart_s_live, restart_s_parked] = restarts;
    let per_group = |readings: &[u64]| {
        let values = readings.iter().map(|&r| r as f64).collect();
        (median(values) - rss_empty as f64) / groups as f64
    };
    let live = per_group(&rss_live);
    let parked = per_group(&rss_parked);
    let figures = Figures {
        scenario: "parked",
        groups,
        rounds: opts.rounds.max(1),
        fill_s,
        rss_empty,
        rss_live,
        rss_parked,
        restart_s_live,
        restart_s_parked,
        bytes_per_group_live: live,
        bytes_per_group_parked: parked,
        bytes_saved_per_group: live - parked,
        load_averages,
    };
    Ok(Report::new(text(&figures), &figures))
}

fn group_id(run_id: &str, i: usize) -> String {
    format!("{run_id}-parked-{i}")
}

/// Makes `groups` groups, one simple commit each, over a few connections with several commits
/// in flight on each.
async fn fill(addr: SocketAddr, run_id: &str, groups: usize) -> Result<()> {
    let conns = connect_many(addr, FILL_CONNECTIONS, CLIENT_ID).await?;
    stream::iter(0..groups)
        .map(|i| {
            let conn = conns[i % conns.len()].clone();
            let group_id = group_id(run_id, i);
            async move {
                let answer = conn
                    .call(simple_commit(&group_id, FILL_TOPIC, 1, 1))
                    .await?;
                if !is_committed(&answer) {
                    bail!("the commit making {group_id} failed: {answer:?}");
                }
                Ok(())
            }
        })
        .buffer_unordered(FILL_CONNECTIONS * FILL_IN_FLIGHT)
        .try_collect::<()>()
        .await
}

/// Returns once the server at `addr` answers `group_id`'s offset (the one the fill committed):
/// the supervisor handles requests only once it has registered every group loaded.
async fn answering(addr: SocketAddr, group_id: &str) -> Result<()> {
    let conn = Conn::connect(addr, CLIENT_ID).await?;
    let answer = conn
        .call(OffsetFetchRequest {
            group_id: group_id.to_owned(),
            topics: None,
        })
        .await?;
    match answer {
        Response::OffsetFetch(r)
            if r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.offset == 1) =>
        {
            Ok(())
        }
        other => bail!("{group_id}'s offset not loaded: {other:?}"),
    }
}

fn text(f: &Figures) -> String {
    let lowest = f
        .load_averages
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let highest = f.load_averages.iter().copied().fold(0.0, f64::max);
    format!(
        "parked: {groups} Empty groups with one offset each, loaded live (--park-after-ms 0) \
         and parked (the default), alternating, {rounds} round(s) each\n\
         \x20 empty server    RSS {empty} KiB\n\
         \x20 live            RSS {live_kib:?} KiB   per group {live:.0} B\n\
         \x20 parked          RSS {parked_kib:?} KiB   per group {parked:.0} B\n\
         \x20 saved per group {saved:.0} B\n\
         \x20 restart (kill → last group answered): live {restart_live:?} s, parked {restart_parked:?} s\n\
         \x20 load average {lowest:.2}..{highest:.2}\n",
        groups = f.groups,
        rounds = f.rounds,
        empty = f.rss_empty >> 10,
        live_kib = f.rss_live.iter().map(|r| r >> 10).collect::<Vec<_>>(),
        parked_kib = f.rss_parked.iter().map(|r| r >> 10).collect::<Vec<_>>(),
        live = f.bytes_per_group_live,
        parked = f.bytes_per_group_parked,
        saved = f.bytes_saved_per_group,
        restart_live = f.restart_s_live,
        restart_parked = f.restart_s_parked,
    )
}
