//! What this node knows of the cluster: the live nodes with their advertised addresses and
//! each shard's owner, as last read from etcd by the ownership loop; and the answers to
//! FindCoordinator and DescribeCluster made from it (protocol §6.19). Any node answers them
//! for any group.

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock};

use muster_protocol::{
    validate_group_id, ClusterNode, DescribeClusterResponse, ErrorCode, FindCoordinatorRequest,
    FindCoordinatorResponse,
};

use crate::node::HostPort;

/// The cluster as last read (module docs).
#[derive(Debug)]
pub struct ClusterView {
    cluster: String,
    shards: u32,
    snapshot: RwLock<Snapshot>,
}

/// One reading of the node and owner keys.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Live nodes (registered on their leases) and their advertised addresses.
    pub nodes: BTreeMap<String, HostPort>,
    /// Each owned shard's owner (a node id; its node may have just gone).
    pub owners: BTreeMap<u32, String>,
}

impl ClusterView {
    pub fn new(cluster: impl Into<String>, shards: u32) -> Self {
        Self {
            cluster: cluster.into(),
            shards,
            snapshot: RwLock::new(Snapshot::default()),
        }
    }

    pub fn update(&self, snapshot: Snapshot) {
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) = snapshot;
    }

    pub fn snapshot(&self) -> Snapshot {
        self.snapshot
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The node coordinating the request's group: its shard's owner, if that node is live.
    /// A shard without a live owner (its owner just died, or nobody has claimed it yet) →
    /// COORDINATOR_NOT_AVAILABLE: the client asks again shortly.
    pub fn find_coordinator(&self, request: &FindCoordinatorRequest) -> FindCoordinatorResponse {
        if let Err(code) = validate_group_id(&request.key) {
            return FindCoordinatorResponse {
                error_code: code.code(),
                ..FindCoordinatorResponse::default()
            };
        }
        let shard = muster_etcd::shard_of(&request.key, self.shards);
        let snapshot = self.snapshot.read().unwrap_or_else(PoisonError::into_inner);
        let owner = snapshot
            .owners
            .get(&shard)
            .and_then(|id| snapshot.nodes.get(id).map(|addr| (id, addr)));
        match owner {
            Some((node_id, addr)) => FindCoordinatorResponse {
                error_code: ErrorCode::None.code(),
                node_id: node_id.clone(),
                host: addr.host.clone(),
                port: addr.port,
            },
            None => FindCoordinatorResponse {
                error_code: ErrorCode::CoordinatorNotAvailable.code(),
                ..FindCoordinatorResponse::default()
            },
        }
    }

    /// The live nodes, in id order, each with the shards it owns.
    pub fn describe_cluster(&self) -> DescribeClusterResponse {
        let snapshot = self.snapshot.read().unwrap_or_else(PoisonError::into_inner);
        let mut owned: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for (&shard, owner) in &snapshot.owners {
            owned.entry(owner.as_str()).or_default().push(shard);
        }
        DescribeClusterResponse {
            error_code: ErrorCode::None.code(),
            cluster: self.cluster.clone(),
            shards: self.shards,
            nodes: snapshot
                .nodes
                .iter()
                .map(|(id, addr)| ClusterNode {
                    node_id: id.clone(),
                    host: addr.host.clone(),
                    port: addr.port,
                    shards: owned.remove(id.as_str()).unwrap_or_default(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(host: &str, port: u16) -> HostPort {
        HostPort {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn the_coordinator_is_the_live_owner_of_the_groups_shard() {
        let view = ClusterView::new("prod", 64);
        let find = |key: &str| view.find_coordinator(&FindCoordinatorRequest { key: key.into() });
        assert_eq!(
            find("orders").error_code,
            ErrorCode::CoordinatorNotAvailable.code()
        );
        assert_eq!(find("").error_code, ErrorCode::InvalidGroupId.code());
        let mut snapshot = Snapshot::default();
        snapshot.nodes.insert("a".into(), addr("10.0.0.1", 7450));
        snapshot.nodes.insert("b".into(), addr("10.0.0.2", 7450));
        snapshot.owners.insert(12, "b".into()); // shard_of("orders", 64) == 12
        snapshot.owners.insert(3, "a".into());
        snapshot.owners.insert(4, "gone".into());
        view.update(snapshot.clone());
        let found = find("orders");
        assert_eq!(
            (
                found.error_code,
                found.node_id.as_str(),
                found.host.as_str(),
                found.port
            ),
            (0, "b", "10.0.0.2", 7450)
        );
        let described = view.describe_cluster();
        assert_eq!(described.cluster, "prod");
        assert_eq!(described.shards, 64);
        let nodes: Vec<_> = described
            .nodes
            .iter()
            .map(|n| (n.node_id.as_str(), n.shards.clone()))
            .collect();
        assert_eq!(nodes, vec![("a", vec![3]), ("b", vec![12])]);
        // The owner of shard 12 died: its key outlives it until its lease expires.
        snapshot.nodes.remove("b");
        view.update(snapshot);
        assert_eq!(
            find("orders").error_code,
            ErrorCode::CoordinatorNotAvailable.code()
        );
    }
}
