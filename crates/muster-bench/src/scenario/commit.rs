//! `commit`: durable offset commits per second. Each connection commits to its own group as a
//! simple (generation -1, no member) commit — the group is Empty, created by the first commit —
//! `partitions` partitions per request, offsets counting up, `pipeline` requests in flight
//! (default 1: one commit at a time, each waiting for its fsync). An answer NONE means the
//! offsets are on disk, so this measures the store's group commit under the server.
//! The groups are deleted at the end. `--compare-history` runs this load against servers with
//! offset history off and on ([`super::history`]).

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
        Request::OffsetCommit(simple_commit(
            &self.group_id,
            "bench-commits",
            self.partitions,
            self.offset,
        ))
    }

    fn is_ok(&self, response: &Response) -> bool {
        is_committed(response)
    }
}

/// A simple commit (generation -1, no member) of `offset` for partitions `0..partitions` of
/// `topic`.
pub fn simple_commit(
    group_id: &str,
    topic: &str,
    partitions: i32,
    offset: i64,
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group_id.to_owned(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            topic: topic.to_owned(),
            partitions: (0..partitions)
                .map(|partition| OffsetCommitPartition {
                    partition,
                    offset,
                    metadata: None,
                })
                .collect(),
        }],
    }
}

/// Whether `response` is an OffsetCommit answer with NONE for every partition (durable).
pub fn is_committed(response: &Response) -> bool {
    let ok = ErrorCode::None.code();
    matches!(response, Response::OffsetCommit(r)
        if r.error_code == ok
            && r.topics.iter().all(|t| t.partitions.iter().all(|p| p.error_code == ok)))
}

/// What one run of the load did.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub scenario: &'static str,
    pub connections: usize,
    pub partitions_per_commit: i32,
    pub pipeline: usize,
    pub measured_s: f64,
    pub commits_per_second: f64,
    pub partition_offsets_per_second: f64,
    pub ok: u64,
    pub failed: u64,
    pub latency: LatencySummary,
}

pub async fn run(common: &Common, opts: &Options) -> Result<Report> {
    let figures = measure(common, opts).await?;
    let text = format!(
        "commit {} connections × {} in flight, {} partitions/commit\n  {:.0} commits/s = {:.0} partition offsets/s  latency {}{}\n",
        figures.connections,
        figures.pipeline,
        figures.partitions_per_commit,
        figures.commits_per_second,
        figures.partition_offsets_per_second,
        figures.latency,
        failed_note(figures.failed)
    );
    Ok(Report::new(text, &figures))
}

/// Runs the load once against `common.addr` and deletes its groups.
pub async fn measure(common: &Common, opts: &Options) -> Result<Figures> {
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
    Ok(Figures {
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
    })
}
