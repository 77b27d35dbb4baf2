//! Small types shared by the engine, the storage and the actors, so that neither of the first
//! two has to import the other for them (and metrics can label by them without importing the
//! engine): the coordinator's time unit, the group life-cycle states, why a rebalance started,
//! and how the engine looks up partition counts (the catalog implements it).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// A principal's name as a group holds it: whom a member's (or pending id's) `max_members`
/// unit is charged to. One pointer, shared with the principal's quota, so that the charge
/// costs a member 8 bytes (a group keeps one member per consumer).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PrincipalName(Arc<String>);

impl PrincipalName {
    pub fn new(name: &str) -> Self {
        PrincipalName(Arc::new(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PrincipalName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for PrincipalName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Milliseconds on the coordinator's clock (monotonic while the process runs).
pub type Millis = u64;

/// The life-cycle states of protocol §6.1 (shared with clients through the protocol crate).
pub use muster_protocol::GroupState;

/// Why a rebalance started (for operators' logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceTrigger {
    /// A new member joined.
    Join,
    /// A member rejoined with other topics or assignors, the leader rejoined, or a static
    /// member's takeover changed the assignor vote.
    MetadataChange,
    /// A member left with LeaveGroup.
    Leave,
    /// A member's session expired.
    SessionExpiry,
    /// Members did not send SyncGroup within the rebalance timeout.
    SyncTimeout,
    /// The partition count of a subscribed topic changed.
    TopicChange,
}

impl RebalanceTrigger {
    pub const fn as_str(self) -> &'static str {
        match self {
            RebalanceTrigger::Join => "join",
            RebalanceTrigger::MetadataChange => "metadata change",
            RebalanceTrigger::Leave => "leave",
            RebalanceTrigger::SessionExpiry => "session expiry",
            RebalanceTrigger::SyncTimeout => "sync timeout",
            RebalanceTrigger::TopicChange => "topic change",
        }
    }
}

/// Looks up partition counts in the server's topic catalog.
pub trait TopicLookup {
    fn partitions(&self, topic: &str) -> Option<i32>;

    /// Calls `f` with every topic and its partition count (a consumer group's regex
    /// subscription is matched against the whole catalog).
    fn each(&self, f: &mut dyn FnMut(&str, i32));
}

impl TopicLookup for HashMap<String, i32> {
    fn partitions(&self, topic: &str) -> Option<i32> {
        self.get(topic).copied()
    }

    fn each(&self, f: &mut dyn FnMut(&str, i32)) {
        for (topic, &partitions) in self {
            f(topic, partitions);
        }
    }
}
