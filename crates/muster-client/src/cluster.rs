//! What the server says about the cluster it belongs to (protocol §6.19): the node that
//! coordinates a group ([`Node`], from FindCoordinator) and the cluster's nodes with the
//! shards each owns ([`Cluster`], from DescribeCluster). [`crate::Admin`] sends the requests;
//! this module turns their answers into these types (a `Response::Error` answer never gets
//! here: the connection makes it a [`ClientError::Protocol`]).

use std::fmt;

use muster_protocol::{DescribeClusterResponse, FindCoordinatorResponse, Response};

use crate::error::ClientError;

/// A node of a Muster cluster, and where clients reach it (its advertised address).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    pub node_id: String,
    /// A host name or IP address (an IPv6 address without brackets).
    pub host: String,
    pub port: u16,
}

impl Node {
    /// `HOST:PORT`, with an IPv6 address in brackets: what [`crate::ConnectionConfig::new`]
    /// takes.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.node_id, self.address())
    }
}

/// One live node and the shards it owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeShards {
    pub node: Node,
    pub shards: Vec<u32>,
}

/// A cluster as DescribeCluster describes it. A single `musterd` is a cluster of one node
/// owning the one shard, 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The cluster's name.
    pub name: String,
    /// How many shards the groups are spread over.
    pub shards: u32,
    pub nodes: Vec<NodeShards>,
}

/// The coordinator of `group_id` from a FindCoordinator answer; its error code becomes the
/// error (INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE).
pub(crate) fn parse_find_coordinator(
    group_id: &str,
    response: Response,
) -> Result<Node, ClientError> {
    match response {
        Response::FindCoordinator(FindCoordinatorResponse {
            error_code,
            node_id,
            host,
            port,
        }) => {
            ClientError::check(error_code, || format!("FindCoordinator {group_id}"))?;
            Ok(Node {
                node_id,
                host,
                port,
            })
        }
        other => Err(ClientError::Unexpected(other.name())),
    }
}

/// The cluster from a DescribeCluster answer.
pub(crate) fn parse_describe_cluster(response: Response) -> Result<Cluster, ClientError> {
    match response {
        Response::DescribeCluster(DescribeClusterResponse {
            error_code,
            cluster,
            shards,
            nodes,
        }) => {
            ClientError::check(error_code, || "DescribeCluster".to_owned())?;
            Ok(Cluster {
                name: cluster,
                shards,
                nodes: nodes
                    .into_iter()
                    .map(|n| NodeShards {
                        node: Node {
                            node_id: n.node_id,
                            host: n.host,
                            port: n.port,
                        },
                        shards: n.shards,
                    })
                    .collect(),
            })
        }
        other => Err(ClientError::Unexpected(other.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_protocol::{ClusterNode, ErrorCode, HeartbeatResponse};

    #[test]
    fn addresses_bracket_ipv6_only() {
        let node = |host: &str| Node {
            node_id: "n".into(),
            host: host.into(),
            port: 7450,
        };
        assert_eq!(node("10.0.0.7").address(), "10.0.0.7:7450");
        assert_eq!(node("muster-1").address(), "muster-1:7450");
        assert_eq!(node("fd00::7").address(), "[fd00::7]:7450");
        assert_eq!(node("fd00::7").to_string(), "n ([fd00::7]:7450)");
    }

    #[test]
    fn find_coordinator_errors_keep_their_code() {
        let answer = Response::FindCoordinator(FindCoordinatorResponse {
            error_code: ErrorCode::InvalidGroupId.code(),
            ..FindCoordinatorResponse::default()
        });
        let e = parse_find_coordinator("", answer).expect_err("invalid id");
        assert_eq!(e.error_code(), Some(ErrorCode::InvalidGroupId));
        let e = parse_find_coordinator("g", Response::Heartbeat(HeartbeatResponse::default()))
            .expect_err("wrong kind");
        assert!(matches!(e, ClientError::Unexpected("Heartbeat")), "{e:?}");
    }

    #[test]
    fn describe_cluster_keeps_every_node_and_shard() {
        let answer = Response::DescribeCluster(DescribeClusterResponse {
            error_code: 0,
            cluster: "prod".into(),
            shards: 4,
            nodes: vec![
                ClusterNode {
                    node_id: "a".into(),
                    host: "h-a".into(),
                    port: 1,
                    shards: vec![0, 2],
                },
                ClusterNode {
                    node_id: "b".into(),
                    host: "h-b".into(),
                    port: 2,
                    shards: vec![1, 3],
                },
            ],
        });
        let cluster = parse_describe_cluster(answer).expect("valid");
        assert_eq!((cluster.name.as_str(), cluster.shards), ("prod", 4));
        assert_eq!(cluster.nodes.len(), 2);
        assert_eq!(cluster.nodes[1].node.address(), "h-b:2");
        assert_eq!(cluster.nodes[1].shards, vec![1, 3]);
    }
}
