//! The benchmark scenarios. Each returns a [`Report`]: a human-readable text and the same
//! figures as JSON.

pub mod commit;
pub mod etcd_watch;
pub mod expiry;
pub mod heartbeat;
pub mod history;
pub mod hostile;
pub mod idle;
pub mod join_one;
pub mod one_join;
pub mod parked;
pub mod rebalance;
pub mod security;

use std::net::SocketAddr;

use serde::Serialize;

/// What every scenario needs to know about the run.
#[derive(Debug, Clone)]
pub struct Common {
    pub addr: SocketAddr,
    /// Prefix of every group id this run creates, unique per run so that runs against the
    /// same server never meet each other's groups.
    pub run_id: String,
    /// The server's process id, when known (for `idle`, which reads its resident memory).
    pub pid: Option<u32>,
}

/// A scenario's result.
pub struct Report {
    pub text: String,
    pub json: serde_json::Value,
}

impl Report {
    pub fn new(text: String, figures: &impl Serialize) -> Self {
        Report {
            text,
            json: serde_json::to_value(figures).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// The client id the benchmark's connections use (short: it is part of every member id, and a
/// leader's SyncGroup for 10 000 members carries every one).
pub const CLIENT_ID: &str = "b";

/// Milliseconds, for reports.
pub fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// Where a group's requests go: its coordinator as FindCoordinator names it, when the server
/// is one node of a cluster of several (cluster mode, docs/cluster.md); `common.addr` for a
/// single server (which names itself, possibly by an address this machine cannot use).
pub async fn coordinator(common: &Common, group_id: &str) -> anyhow::Result<SocketAddr> {
    use muster_protocol::{DescribeClusterRequest, FindCoordinatorRequest, Response};
    let conn = crate::client::Conn::connect(common.addr, CLIENT_ID).await?;
    let clustered = matches!(
        conn.call(DescribeClusterRequest {}).await?,
        Response::DescribeCluster(d) if d.nodes.len() > 1
    );
    if !clustered {
        return Ok(common.addr);
    }
    for _ in 0..100 {
        let answer = conn
            .call(FindCoordinatorRequest {
                key: group_id.to_owned(),
            })
            .await?;
        if let Response::FindCoordinator(f) = answer {
            if f.error_code == 0 {
                let found = tokio::net::lookup_host((f.host.as_str(), f.port))
                    .await?
                    .next();
                if let Some(addr) = found {
                    return Ok(addr);
                }
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::bail!("no coordinator found for {group_id}")
}

/// A group id starting with `base` that the server at `common.addr` coordinates itself (in a
/// cluster, FindCoordinator names it): scenarios whose connections are all to one server keep
/// their groups there.
pub async fn local_group_id(common: &Common, base: &str) -> anyhow::Result<String> {
    for i in 0..10_000 {
        let candidate = if i == 0 {
            base.to_owned()
        } else {
            format!("{base}.{i}")
        };
        if coordinator(common, &candidate).await? == common.addr {
            return Ok(candidate);
        }
    }
    anyhow::bail!("the server coordinates no group named {base}.*")
}
