//! `idle`: the server's resident memory per idle (Stable) member and per group.
//!
//! Method — three steps, each followed by a pause and a reading of `VmRSS` from
//! `/proc/PID/status`, so that the cost of connections, of groups and of members come apart:
//!
//! 1. open the connections (with Hello): `conn = ΔRSS / connections`;
//! 2. form `groups` groups of **one** member each: `group + member = ΔRSS / groups`;
//! 3. grow every group to `members` members (each group rebalances once):
//!    `member = ΔRSS / (groups × (members − 1))`; and so `group = step 2 − member`.
//!
//! Groups are formed and grown `--batch` groups at a time (each batch settled before the next),
//! so that what is measured is the idle state, not the high-water mark of a join storm.
//! Members share connections (`--connections`, default one per 200 members), so member cost
//! does not include a socket. Idle members heartbeat every 2 s (session timeout 45 s; a short
//! interval, so that existing members soon learn of the rebalance that growing a group causes).
//! RSS counts what the allocator has taken from the kernel: transient buffers of the joins
//! (whose memory the allocator keeps for reuse) count too, so the figures are upper bounds;
//! larger counts make them more stable.

use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde::Serialize;

use super::{Common, Report, CLIENT_ID};
use crate::client::connect_many;
use crate::cohort::Cohort;
use crate::member::MemberConfig;
use crate::target::rss_bytes;

#[derive(Debug, Clone)]
pub struct Options {
    pub groups: usize,
    pub members: usize,
    pub connections: Option<usize>,
    /// Pause before each reading, for the server to finish what the step started.
    pub pause: Duration,
    /// Groups formed (or grown) at a time; each batch settles before the next starts, so the
    /// transient memory of a join storm stays small next to what is measured.
    pub batch: usize,
    /// Keep the members (idle, heartbeating) this long after the last reading, so the server
    /// can be inspected (heap profiler, `/proc/PID/smaps`) in that state.
    pub hold: Duration,
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    groups: usize,
    members_per_group: usize,
    connections: usize,
    rss_start: u64,
    rss_connected: u64,
    rss_one_member_groups: u64,
    rss_full_groups: u64,
    bytes_per_connection: f64,
    bytes_per_group_with_one_member: f64,
    bytes_per_member: Option<f64>,
    bytes_per_group: Option<f64>,
    /// (full - connected) / (groups × members): everything, averaged over members.
    bytes_per_member_all_in: f64,
}

fn kib(bytes: f64) -> String {
    format!("{:.0} B ({:.2} KiB)", bytes, bytes / 1024.0)
}

pub async fn run(common: &Common, opts: &Options) -> Result<Report> {
    let Some(pid) = common.pid else {
        bail!("idle needs the server's process id: --pid PID (or --spawn)");
    };
    let groups = opts.groups.max(1);
    let members = opts.members.max(1);
    let total = groups * members;
    let connections = opts
        .connections
        .unwrap_or_else(|| total.div_ceil(200))
        .clamp(1, total);
    let settle_limit = Duration::from_secs(300);
    let read = |label: &str| -> Result<u64> {
        rss_bytes(pid).with_context(|| format!("reading RSS {label}"))
    };

    let rss_start = read("at start")?;
    let conns = connect_many(common.addr, connections, CLIENT_ID).await?;
    tokio::time::sleep(opts.pause).await;
    let rss_connected = read("after connecting")?;

    let mut cohort = Cohort::new(
        conns,
        MemberConfig {
            topic: "bench-idle".to_owned(),
            partitions: 1,
            session_timeout_ms: 45_000,
            rebalance_timeout_ms: 120_000,
            heartbeat: Duration::from_secs(2),
            report_heartbeats: false,
        },
    )?;
    cohort.create_topic(1).await?;
    let batch = opts.batch.max(1);
    for start in (0..groups).step_by(batch) {
        for g in start..groups.min(start + batch) {
            cohort.add_group(&format!("{}-idle-{g}", common.run_id), 1)?;
        }
        cohort.settle(settle_limit).await?;
    }
    tokio::time::sleep(opts.pause).await;
    let rss_one = read("after one-member groups")?;

    if members > 1 {
        for start in (0..groups).step_by(batch) {
            for g in start..groups.min(start + batch) {
                cohort.add_members(g, members - 1)?;
            }
            cohort.settle(settle_limit).await?;
        }
        tokio::time::sleep(opts.pause).await;
    }
    let rss_full = read("after full groups")?;
    if !opts.hold.is_zero() {
        eprintln!(
            "holding {} members for {:?}",
            cohort.member_count(),
            opts.hold
        );
        tokio::time::sleep(opts.hold).await;
    }
    cohort.shutdown().await?;

    let delta = |after: u64, before: u64| after as f64 - before as f64;
    let per_conn = delta(rss_connected, rss_start) / connections as f64;
    let group_and_member = delta(rss_one, rss_connected) / groups as f64;
    let per_member =
        (members > 1).then(|| delta(rss_full, rss_one) / (groups * (members - 1)) as f64);
    let per_group = per_member.map(|m| group_and_member - m);
    let all_in = delta(rss_full, rss_connected) / total as f64;
    let figures = Figures {
        scenario: "idle",
        groups,
        members_per_group: members,
        connections,
        rss_start,
        rss_connected,
        rss_one_member_groups: rss_one,
        rss_full_groups: rss_full,
        bytes_per_connection: per_conn,
        bytes_per_group_with_one_member: group_and_member,
        bytes_per_member: per_member,
        bytes_per_group: per_group,
        bytes_per_member_all_in: all_in,
    };
    let mut text = format!(
        "idle {groups} groups × {members} members over {connections} connections (pid {pid})\n  RSS: start {} MiB, connected {} MiB, 1-member groups {} MiB, full {} MiB\n  per connection {}\n  per group with its first member {}\n",
        rss_start >> 20,
        rss_connected >> 20,
        rss_one >> 20,
        rss_full >> 20,
        kib(per_conn),
        kib(group_and_member),
    );
    if let (Some(m), Some(g)) = (per_member, per_group) {
        text.push_str(&format!(
            "  per member {}\n  per group (without members) {}\n",
            kib(m),
            kib(g)
        ));
    }
    text.push_str(&format!("  all-in per member {}\n", kib(all_in)));
    Ok(Report::new(text, &figures))
}
