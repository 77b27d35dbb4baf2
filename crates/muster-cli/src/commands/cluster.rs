//! `muster cluster describe` and `muster groups coordinator GROUP`: where groups live. The
//! first shows the cluster the server belongs to (DescribeCluster: its name, shard count, and
//! each live node with its advertised address and shards); the second which node coordinates
//! one group (FindCoordinator). A single `musterd` is a cluster of one node owning shard 0,
//! and coordinates every group itself.

use muster_client::{Cluster, Node};
use serde::Serialize;

use super::Context;
use crate::exit::Failure;
use crate::render::{self, Report};

/// A node as both reports show it: `{"node_id", "host", "port", "address"}`, where
/// `address` is `HOST:PORT` (an IPv6 host in brackets), ready for `--server`.
#[derive(Debug, Serialize)]
pub struct NodeRow {
    pub node_id: String,
    pub host: String,
    pub port: u16,
    pub address: String,
}

impl From<Node> for NodeRow {
    fn from(node: Node) -> Self {
        NodeRow {
            address: node.address(),
            node_id: node.node_id,
            host: node.host,
            port: node.port,
        }
    }
}

/// `cluster describe`: `{"cluster", "shards", "nodes": [{"node_id", "host", "port",
/// "address", "shards": [..]}]}`, nodes sorted by id, shards ascending.
#[derive(Debug, Serialize)]
pub struct ClusterDescription {
    pub cluster: String,
    /// How many shards the groups are spread over.
    pub shards: u32,
    pub nodes: Vec<ClusterNodeRow>,
}

#[derive(Debug, Serialize)]
pub struct ClusterNodeRow {
    #[serde(flatten)]
    pub node: NodeRow,
    pub shards: Vec<u32>,
}

impl From<Cluster> for ClusterDescription {
    fn from(cluster: Cluster) -> Self {
        let mut nodes: Vec<ClusterNodeRow> = cluster
            .nodes
            .into_iter()
            .map(|n| {
                let mut shards = n.shards;
                shards.sort_unstable();
                ClusterNodeRow {
                    node: NodeRow::from(n.node),
                    shards,
                }
            })
            .collect();
        nodes.sort_by(|a, b| a.node.node_id.cmp(&b.node.node_id));
        ClusterDescription {
            cluster: cluster.name,
            shards: cluster.shards,
            nodes,
        }
    }
}

impl Report for ClusterDescription {
    fn human(&self) -> String {
        let head = render::fields(&[
            ("CLUSTER", self.cluster.clone()),
            ("SHARDS", self.shards.to_string()),
            ("NODES", self.nodes.len().to_string()),
        ]);
        if self.nodes.is_empty() {
            return head;
        }
        let nodes = render::table(
            &["NODE", "ADDRESS", "SHARDS"],
            self.nodes.iter().map(|n| {
                [
                    n.node.node_id.clone(),
                    n.node.address.clone(),
                    shard_ranges(&n.shards),
                ]
            }),
        );
        format!("{head}\n\n{nodes}")
    }
}

/// Sorted shard numbers as runs: `0-3,7,9-10`, or `-` for none.
pub fn shard_ranges(shards: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &shard in shards {
        match runs.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(shard) => *end = shard,
            _ => runs.push((shard, shard)),
        }
    }
    if runs.is_empty() {
        return "-".to_owned();
    }
    let runs: Vec<String> = runs
        .into_iter()
        .map(|(start, end)| match end - start {
            0 => start.to_string(),
            _ => format!("{start}-{end}"),
        })
        .collect();
    runs.join(",")
}

pub async fn describe(ctx: &Context) -> Result<ClusterDescription, Failure> {
    let cluster = ctx
        .admin
        .describe_cluster()
        .await
        .map_err(|e| ctx.fail("cannot describe the cluster", &e))?;
    Ok(ClusterDescription::from(cluster))
}

/// `groups coordinator`: `{"group", "node_id", "host", "port", "address"}`.
#[derive(Debug, Serialize)]
pub struct GroupCoordinator {
    pub group: String,
    #[serde(flatten)]
    pub coordinator: NodeRow,
}

impl Report for GroupCoordinator {
    fn human(&self) -> String {
        render::fields(&[
            ("GROUP", self.group.clone()),
            ("COORDINATOR", self.coordinator.node_id.clone()),
            ("ADDRESS", self.coordinator.address.clone()),
        ])
    }
}

pub async fn coordinator(ctx: &Context, group: &str) -> Result<GroupCoordinator, Failure> {
    let node = ctx.admin.find_coordinator(group).await.map_err(|e| {
        ctx.fail(
            &format!("cannot find the coordinator of group {group:?}"),
            &e,
        )
    })?;
    Ok(GroupCoordinator {
        group: group.to_owned(),
        coordinator: NodeRow::from(node),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_client::NodeShards;

    fn node(id: &str, host: &str) -> Node {
        Node {
            node_id: id.into(),
            host: host.into(),
            port: 7450,
        }
    }

    #[test]
    fn shards_read_as_runs() {
        assert_eq!(shard_ranges(&[]), "-");
        assert_eq!(shard_ranges(&[0]), "0");
        assert_eq!(shard_ranges(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
        assert_eq!(
            shard_ranges(&[u32::MAX - 1, u32::MAX]),
            "4294967294-4294967295"
        );
    }

    #[test]
    fn clusters_list_nodes_by_id_with_their_shards() {
        let described = ClusterDescription::from(Cluster {
            name: "prod".into(),
            shards: 4,
            nodes: vec![
                NodeShards {
                    node: node("b", "fd00::2"),
                    shards: vec![3, 1],
                },
                NodeShards {
                    node: node("a", "10.0.0.1"),
                    shards: vec![0, 2],
                },
            ],
        });
        assert_eq!(
            described.human(),
            "CLUSTER  prod\n\
             SHARDS   4\n\
             NODES    2\n\
             \n\
             NODE  ADDRESS         SHARDS\n\
             a     10.0.0.1:7450   0,2\n\
             b     [fd00::2]:7450  1,3"
        );
        let json = serde_json::to_value(&described).expect("serializes");
        assert_eq!(json["nodes"][1]["address"], "[fd00::2]:7450");
        assert_eq!(json["nodes"][1]["host"], "fd00::2");
        assert_eq!(json["nodes"][1]["shards"], serde_json::json!([1, 3]));
    }
}
