//! Which groups this node coordinates: the seam between the supervisor (and its group actors)
//! and cluster mode. A single node serves every group; a clustered node (musterd's `cluster`
//! module) only the groups of the shards it owns, and only while its lease holds.

use muster_protocol::ErrorCode;

/// Which groups this node coordinates. A single node owns every group; a clustered node
/// answers NOT_COORDINATOR for the groups of shards another node owns,
/// COORDINATOR_LOAD_IN_PROGRESS for those of a shard it is loading, and
/// COORDINATOR_NOT_AVAILABLE for a group of its own shards whose stored state could not be
/// decoded (held back, never recreated empty).
pub trait Placement: Send + Sync + 'static {
    /// Why this node cannot serve `group_id` now (NOT_COORDINATOR,
    /// COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE), if it cannot.
    fn refusal(&self, group_id: &str) -> Option<ErrorCode>;
    /// The shard `group_id` belongs to (a single node has one: 0).
    fn shard_of(&self, group_id: &str) -> u32;
    /// Whether this node serves `shard` at this instant. Group actors ask it for every
    /// request they handle, cached links included: a node past its lease deadline stops
    /// answering for its groups at once, before anything else has noticed.
    fn serving(&self, shard: u32) -> bool;
}

/// The single-node placement: every group is ours.
#[derive(Debug, Default, Clone, Copy)]
pub struct SingleNode;

impl Placement for SingleNode {
    fn refusal(&self, _group_id: &str) -> Option<ErrorCode> {
        None
    }

    fn shard_of(&self, _group_id: &str) -> u32 {
        0
    }

    fn serving(&self, _shard: u32) -> bool {
        true
    }
}
