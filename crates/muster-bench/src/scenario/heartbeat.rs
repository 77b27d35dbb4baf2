//! `heartbeat` and `echo`: sustained heartbeats per second with `pipeline` requests in flight on
//! each of `connections` connections, and their latency.
//!
//! Setup (`heartbeat` only): one Stable member per connection, in groups of `group_size`
//! members, formed over a few setup connections (the members keep their own slow heartbeats
//! going there). Then one load connection per member sends that member's Heartbeat, pipelined,
//! for the warm-up and the measured duration. `echo` runs the identical load (same requests,
//! same client code) against the built-in echo server ([`crate::echo`]); `--compare-echo` runs
//! both, one after the other, and gives the ratio.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Result};
use muster_protocol::{ErrorCode, HeartbeatRequest, Request, Response};
use serde::Serialize;

use super::{Common, Report, CLIENT_ID};
use crate::client::{self, connect_many};
use crate::cohort::Cohort;
use crate::echo::EchoServer;
use crate::load::{self, Repeat, Source};
use crate::member::MemberConfig;
use crate::stats::{failed_note, LatencySummary};

#[derive(Debug, Clone)]
pub struct Options {
    pub connections: usize,
    pub pipeline: usize,
    pub duration: Duration,
    pub warmup: Duration,
    /// Members per group (each member has its own load connection).
    pub group_size: usize,
    /// Also run the same load against the echo server and give the ratio.
    pub compare_echo: bool,
    /// Worker threads of the echo server's runtime.
    pub echo_threads: usize,
}

/// One member's heartbeat, sent over and over (encoded once).
struct Heartbeats(Repeat);

impl Source for Heartbeats {
    fn next_request(&mut self) -> Request {
        self.0.request().clone()
    }

    fn encode_next(&mut self, correlation_id: u32, buf: &mut Vec<u8>) -> Result<()> {
        self.0.encode(correlation_id, buf);
        Ok(())
    }

    fn is_ok(&self, response: &Response) -> bool {
        matches!(response, Response::Heartbeat(h) if h.error_code == ErrorCode::None.code())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadFigures {
    pub target: &'static str,
    pub connections: usize,
    pub pipeline: usize,
    pub measured_s: f64,
    pub per_second: f64,
    pub ok: u64,
    pub failed: u64,
    pub latency: LatencySummary,
}

impl LoadFigures {
    fn line(&self) -> String {
        format!(
            "{:<8} {:>10.0} heartbeats/s  latency {}{}",
            self.target,
            self.per_second,
            self.latency,
            failed_note(self.failed)
        )
    }
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    muster: Option<LoadFigures>,
    echo: Option<LoadFigures>,
    /// muster / echo heartbeats per second.
    ratio: Option<f64>,
}

/// Runs the heartbeat load from `requests` (one connection each) against `addr`.
async fn load(
    target: &'static str,
    addr: SocketAddr,
    requests: &[Request],
    opts: &Options,
) -> Result<LoadFigures> {
    let mut conns = Vec::with_capacity(requests.len());
    for request in requests {
        conns.push((
            client::open(addr, CLIENT_ID).await?,
            Heartbeats(Repeat::new(request.clone())?),
        ));
    }
    let stats = load::run_all(conns, opts.pipeline, opts.warmup, opts.duration).await?;
    if let Some(failure) = &stats.first_failure {
        eprintln!(
            "{target}: {} answers were not NONE, e.g. {failure}",
            stats.failed
        );
    }
    Ok(LoadFigures {
        target,
        connections: requests.len(),
        pipeline: opts.pipeline,
        measured_s: stats.measured.as_secs_f64(),
        per_second: stats.per_second(),
        ok: stats.ok,
        failed: stats.failed,
        latency: stats.latencies.summary(),
    })
}

fn heartbeat(group_id: &str, member_id: &str, generation: i32) -> Request {
    Request::Heartbeat(HeartbeatRequest {
        group_id: group_id.to_owned(),
        generation_id: generation,
        member_id: member_id.to_owned(),
        group_instance_id: None,
    })
}

/// Requests of the same shape as real members' heartbeats, for the echo server.
fn echo_requests(common: &Common, n: usize) -> Vec<Request> {
    (0..n)
        .map(|i| {
            heartbeat(
                &format!("{}-hb-{i}", common.run_id),
                &format!("{CLIENT_ID}-00000000-0000-0000-0000-{i:012}"),
                1,
            )
        })
        .collect()
}

/// `heartbeat`: the load against the server (and, with `compare_echo`, the echo server).
pub async fn run(common: &Common, opts: &Options) -> Result<Report> {
    let muster = measure(common, opts).await?;
    let echo = if opts.compare_echo {
        Some(run_echo_load(common, opts).await?)
    } else {
        None
    };
    Ok(report(Some(muster), echo))
}

/// Forms the members, runs the heartbeat load against the server, and lets the members go.
pub async fn measure(common: &Common, opts: &Options) -> Result<LoadFigures> {
    let n = opts.connections.max(1);
    let group_size = opts.group_size.clamp(1, n);
    let setup_conns = connect_many(common.addr, n.div_ceil(50).clamp(1, 20), CLIENT_ID).await?;
    let mut cohort = Cohort::new(
        setup_conns,
        MemberConfig {
            topic: "bench-hb".to_owned(),
            partitions: 1,
            session_timeout_ms: 30_000,
            rebalance_timeout_ms: 60_000,
            heartbeat: Duration::from_secs(3),
            report_heartbeats: false,
        },
    )?;
    let mut left = n;
    let mut g = 0;
    while left > 0 {
        let size = left.min(group_size);
        cohort.add_group(&format!("{}-hb-{g}", common.run_id), size)?;
        left -= size;
        g += 1;
    }
    cohort.settle(Duration::from_secs(120)).await?;
    let requests: Vec<Request> = cohort
        .stable_members()
        .iter()
        .map(|(group, member, generation)| heartbeat(group, member, *generation))
        .collect();
    if requests.len() != n {
        bail!("{} of {n} members are Stable", requests.len());
    }
    let muster = load("musterd", common.addr, &requests, opts).await?;
    cohort.shutdown().await?;
    Ok(muster)
}

/// `echo`: the same load against the built-in echo server only.
pub async fn run_echo(common: &Common, opts: &Options) -> Result<Report> {
    let echo = run_echo_load(common, opts).await?;
    Ok(report(None, Some(echo)))
}

async fn run_echo_load(common: &Common, opts: &Options) -> Result<LoadFigures> {
    let server = EchoServer::start(opts.echo_threads)?;
    let requests = echo_requests(common, opts.connections.max(1));
    let figures = load("echo", server.addr(), &requests, opts).await;
    // The echo runtime is shut down on a plain thread: dropping a runtime inside another
    // runtime's worker is refused by tokio.
    let _ = tokio::task::spawn_blocking(move || drop(server)).await;
    figures
}

fn report(muster: Option<LoadFigures>, echo: Option<LoadFigures>) -> Report {
    let ratio = match (&muster, &echo) {
        (Some(m), Some(e)) if e.per_second > 0.0 => Some(m.per_second / e.per_second),
        _ => None,
    };
    let mut text = String::new();
    for figures in muster.iter().chain(echo.iter()) {
        text.push_str(&figures.line());
        text.push('\n');
    }
    if let Some(ratio) = ratio {
        text.push_str(&format!(
            "musterd / echo = {:.1} % of the echo baseline\n",
            ratio * 100.0
        ));
    }
    let figures = Figures {
        scenario: "heartbeat",
        muster,
        echo,
        ratio,
    };
    Report::new(text, &figures)
}
