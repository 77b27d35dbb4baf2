//! `commit`: durable offset commits per second. Each connection commits to its own group as a
//! simple (generation -1, no member) commit — the group is Empty, created by the first commit —
//! `partitions` partitions per request, offsets counting up, `pipeline` requests in flight
//! (default 1: one commit at a time, each waiting for its fsync). An answer NONE means the
//! offsets are on disk, so this measures the store's group commit under the server.
//! The groups are deleted at the end.

use std::time::Duration;

use anyhow::Result;
use muster_protocol::{
    DeleteGroupsRequest, ErrorCode, OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic,
    Request, Response,
};
use serde::Serialize;

use super::{Common, Report, CLIENT_ID};
use crate::client::{self, Conn};
use crate::load::{self, Source};
use crate::stats::{failed_note, LatencySummary};

#[derive(Debug, Clone)]
pub struct Options {
    pub connections: usize,
    pub partitions: i32,
    pub pipeline: usize,
    pub duration: Duration,
    pub warmup: Duration,
}

struct Commits {
    group_id: String,
    partitions: i32,
    offset: i64,
}

impl Source for Commits {
    fn next_request(&mut self) -> Request {
        self.offset += 1;
        Request::OffsetCommit(OffsetCommitRequest {
            group_id: self.group_id.clone(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            topics: vec![OffsetCommitTopic {
                topic: "bench-commits".to_owned(),
                partitions: (0..self.partitions)
                    .map(|partition| OffsetCommitPartition {
                        partition,
                        offset: self.offset,
                        metadata: None,
                    })
                    .collect(),
            }],
        })
    }

    fn is_ok(&self, response: &Response) -> bool {
        let ok = ErrorCode::None.code();
        matches!(response, Response::OffsetCommit(r)
            if r.error_code == ok
                && r.topics.iter().all(|t| t.partitions.iter().all(|p| p.error_code == ok)))
    }
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    connections: usize,
    partitions_per_commit: i32,
    pipeline: usize,
    measured_s: f64,
    commits_per_second: f64,
    partition_offsets_per_second: f64,
    ok: u64,
    failed: u64,
    latency: LatencySummary,
}

pub async fn run(common: &Common, opts: &Options) -> Result<Report> {
    let n = opts.connections.max(1);
    let partitions = opts.partitions.max(1);
    let group_ids: Vec<String> = (0..n)
        .map(|i| format!("{}-commit-{i}", common.run_id))
        .collect();
    let mut conns = Vec::with_capacity(n);
    // In a cluster each group's connection goes to its coordinator.
    let mut coordinators = std::collections::BTreeMap::<std::net::SocketAddr, Vec<String>>::new();
    for group_id in &group_ids {
        let at = super::coordinator(common, group_id).await?;
        coordinators.entry(at).or_default().push(group_id.clone());
        conns.push((
            client::open(at, CLIENT_ID).await?,
            Commits {
                group_id: group_id.clone(),
                partitions,
                offset: 0,
            },
        ));
    }
    let stats = load::run_all(conns, opts.pipeline, opts.warmup, opts.duration).await?;
    if let Some(failure) = &stats.first_failure {
        eprintln!("{} commits failed, e.g. {failure}", stats.failed);
    }
    // Leave the server as we found it.
    for (at, group_ids) in coordinators {
        let admin = Conn::connect(at, CLIENT_ID).await?;
        admin.call(DeleteGroupsRequest { group_ids }).await?;
    }

    let per_second = stats.per_second();
    let figures = Figures {
        scenario: "commit",
        connections: n,
        partitions_per_commit: partitions,
        pipeline: opts.pipeline,
        measured_s: stats.measured.as_secs_f64(),
        commits_per_second: per_second,
        partition_offsets_per_second: per_second * f64::from(partitions),
        ok: stats.ok,
        failed: stats.failed,
        latency: stats.latencies.summary(),
    };
    let text = format!(
        "commit {n} connections × {} in flight, {partitions} partitions/commit\n  {:.0} commits/s = {:.0} partition offsets/s  latency {}{}\n",
        opts.pipeline,
        figures.commits_per_second,
        figures.partition_offsets_per_second,
        figures.latency,
        failed_note(stats.failed)
    );
    Ok(Report::new(text, &figures))
}
