//! `expiry`: how promptly a dead member is removed once its session timeout has passed.
//!
//! Each repeat forms a fresh group of `members` members (session timeout `session_timeout_ms`,
//! heartbeats every `heartbeat_ms`), then one follower stops dead: no LeaveGroup, no more
//! requests. Its deadline is **the moment its last request was sent + the session timeout**
//! (the server cannot have heard from it later than that send, so this deadline is the
//! earliest the server may remove it, and lateness measured from it is an upper bound).
//! From shortly before that deadline a separate connection sends DescribeGroups back to back
//! (one in flight) until the member is no longer listed: **lateness = first answer without it
//! − deadline**. The survivors' first REBALANCE_IN_PROGRESS is also given; it lags by up to one
//! heartbeat interval, by construction.
//!
//! The server must accept the session timeout: run `musterd --min-session-timeout-ms 500` (or
//! lower) for the default of 1 000 ms.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use muster_protocol::{DescribeGroupsRequest, Response};
use serde::Serialize;

use super::{ms, Common, Report, CLIENT_ID};
use crate::client::{connect_many, Conn};
use crate::cohort::Cohort;
use crate::member::{Command, MemberConfig};
use crate::stats::Series;

#[derive(Debug, Clone)]
pub struct Options {
    pub members: usize,
    pub session_timeout_ms: u32,
    pub heartbeat_ms: Option<u64>,
    pub repeats: usize,
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    members: usize,
    session_timeout_ms: u32,
    heartbeat_ms: u64,
    /// Deadline → first DescribeGroups answer without the member.
    describe_lateness: Series,
    /// Deadline → first survivor told REBALANCE_IN_PROGRESS (lags by up to a heartbeat).
    survivor_lateness: Series,
    /// DescribeGroups requests answered while polling, per repeat.
    polls: Vec<u64>,
}

/// Whether `member_id` is listed in `group_id`'s DescribeGroups answer.
async fn listed(admin: &Conn, group_id: &str, member_id: &str) -> Result<bool> {
    let response = admin
        .call(DescribeGroupsRequest {
            group_ids: vec![group_id.to_owned()],
        })
        .await?;
    let Response::DescribeGroups(described) = response else {
        bail!("DescribeGroups answered {response:?}");
    };
    Ok(described
        .groups
        .iter()
        .any(|g| g.members.iter().any(|m| m.member_id == member_id)))
}

pub async fn run(common: &Common, opts: &Options) -> Result<Report> {
    let members = opts.members.max(2);
    let session = Duration::from_millis(u64::from(opts.session_timeout_ms));
    let heartbeat_ms = opts
        .heartbeat_ms
        .unwrap_or(u64::from(opts.session_timeout_ms) / 10)
        .max(1);
    let conns = connect_many(common.addr, members.min(8), CLIENT_ID).await?;
    let admin = Conn::connect(common.addr, CLIENT_ID).await?;
    let config = MemberConfig {
        topic: "bench-expiry".to_owned(),
        partitions: i32::try_from(members).unwrap_or(i32::MAX),
        session_timeout_ms: opts.session_timeout_ms,
        rebalance_timeout_ms: opts.session_timeout_ms.saturating_mul(4),
        heartbeat: Duration::from_millis(heartbeat_ms),
        report_heartbeats: false,
    };
    let mut describe = Vec::new();
    let mut survivor = Vec::new();
    let mut polls = Vec::new();
    let mut text = String::new();
    for repeat in 0..opts.repeats.max(1) {
        let group_id = format!("{}-expiry-{repeat}", common.run_id);
        let mut cohort = Cohort::new(conns.clone(), config.clone())?;
        cohort.add_group(&group_id, members)?;
        cohort
            .settle(Duration::from_secs(60))
            .await
            .context("the group did not form (does the server accept this session timeout? see --min-session-timeout-ms)")?;
        // Let the group run Stable for a couple of heartbeats first.
        tokio::time::sleep(Duration::from_millis(2 * heartbeat_ms)).await;
        let leader = cohort.leader_of(0);
        let victim = cohort
            .members_of(0)
            .into_iter()
            .rev()
            .find(|&m| cohort.member_id(m) != leader)
            .context("no follower")?;
        cohort.expect_new_generation();
        let exit = cohort.retire(victim, Command::Stop).await?;
        let last = exit
            .last_request
            .context("the member never sent a request")?;
        let deadline = last + session;
        tokio::time::sleep_until((deadline - Duration::from_millis(20).min(session)).into()).await;
        let give_up = deadline + Duration::from_secs(10);
        let mut n = 0u64;
        let gone_at = loop {
            let still = listed(&admin, &group_id, &exit.member_id).await?;
            n += 1;
            let now = Instant::now();
            if !still {
                break now;
            }
            if now > give_up {
                bail!("member still listed 10 s after its session timeout");
            }
        };
        let phase = cohort.settle(Duration::from_secs(60)).await?;
        let signed_ms = |t: Instant| {
            if t >= deadline {
                ms(t - deadline)
            } else {
                -ms(deadline - t)
            }
        };
        let d = signed_ms(gone_at);
        let s = phase.first_rebalancing.map_or(f64::NAN, signed_ms);
        describe.push(d);
        survivor.push(s);
        polls.push(n);
        text.push_str(&format!(
            "repeat {repeat}: removed {d:.1} ms after its deadline (DescribeGroups, {n} polls); first survivor told {s:.1} ms after\n"
        ));
        cohort.shutdown().await?;
    }
    let figures = Figures {
        scenario: "expiry",
        members,
        session_timeout_ms: opts.session_timeout_ms,
        heartbeat_ms,
        describe_lateness: Series::from_ms(describe),
        survivor_lateness: Series::from_ms(survivor),
        polls,
    };
    text.push_str(&format!(
        "expiry: {members} members, session {} ms, heartbeat {heartbeat_ms} ms\n  deadline → gone from DescribeGroups: {}\n  deadline → first survivor told: {}\n",
        opts.session_timeout_ms, figures.describe_lateness, figures.survivor_lateness
    ));
    Ok(Report::new(text, &figures))
}
