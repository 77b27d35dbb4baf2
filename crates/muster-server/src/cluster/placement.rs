//! Which shards this node serves right now, as the supervisor asks for every group request it
//! routes: a table of per-shard states the ownership loop writes and the supervisor reads
//! (atomics: no lock on the routing path), plus the local lease deadline past which nothing is
//! served at all, and the groups of owned shards held back because a key of theirs cannot be
//! decoded ([`Quarantine`]: COORDINATOR_NOT_AVAILABLE).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Instant;

use muster_coordinator::actors::Placement;
use muster_protocol::ErrorCode;

use super::quarantine::Quarantine;

/// A shard as this node stands with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ShardState {
    /// Another node's (or nobody's): NOT_COORDINATOR.
    NotOwned = 0,
    /// Claimed, its groups being read from etcd: COORDINATOR_LOAD_IN_PROGRESS.
    Loading = 1,
    /// Ours: served.
    Owned = 2,
}

/// The shard table (module docs).
#[derive(Debug)]
pub struct ShardTable {
    states: Box<[AtomicU8]>,
    /// The instant everything was measured from (`lease_valid_ms` counts from it).
    epoch: Instant,
    /// Until when (ms after `epoch`) this node's lease is certainly alive: the time its last
    /// keep-alive was *sent* plus the TTL etcd granted. Past it another node may own our shards
    /// already, so none is served, whatever the table says.
    lease_valid_ms: AtomicU64,
    quarantine: Quarantine,
}

impl ShardTable {
    pub fn new(shards: u32) -> Self {
        Self {
            states: (0..shards.max(1)).map(|_| AtomicU8::new(0)).collect(),
            epoch: Instant::now(),
            lease_valid_ms: AtomicU64::new(0),
            quarantine: Quarantine::new(shards),
        }
    }

    pub fn shards(&self) -> u32 {
        self.states.len() as u32
    }

    /// The groups of owned shards held back (unreadable keys).
    pub fn quarantine(&self) -> &Quarantine {
        &self.quarantine
    }

    pub fn set(&self, shard: u32, state: ShardState) {
        if let Some(slot) = self.states.get(shard as usize) {
            slot.store(state as u8, Ordering::Release);
        }
    }

    pub fn state(&self, shard: u32) -> ShardState {
        match self
            .states
            .get(shard as usize)
            .map(|s| s.load(Ordering::Acquire))
        {
            Some(2) => ShardState::Owned,
            Some(1) => ShardState::Loading,
            _ => ShardState::NotOwned,
        }
    }

    /// Every shard not owned (the lease was lost).
    pub fn clear(&self) {
        for slot in self.states.iter() {
            slot.store(ShardState::NotOwned as u8, Ordering::Release);
        }
    }

    /// The lease is certainly alive until `until`.
    pub fn lease_valid_until(&self, until: Instant) {
        let ms = until.saturating_duration_since(self.epoch).as_millis() as u64;
        self.lease_valid_ms.store(ms, Ordering::Release);
    }

    /// How long from `now` the lease is certainly alive (zero once past).
    pub fn remaining(&self, now: Instant) -> std::time::Duration {
        let now_ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        let valid = self.lease_valid_ms.load(Ordering::Acquire);
        std::time::Duration::from_millis(valid.saturating_sub(now_ms))
    }

    pub fn lease_valid_at(&self, now: Instant) -> bool {
        let now_ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        now_ms < self.lease_valid_ms.load(Ordering::Acquire)
    }
}

impl Placement for ShardTable {
    fn refusal(&self, group_id: &str) -> Option<ErrorCode> {
        let shard = self.shard_of(group_id);
        match self.state(shard) {
            // Its state could not be read: retriable, and never recreated empty meanwhile
            // (docs/cluster.md "Unreadable keys").
            ShardState::Owned
                if self.lease_valid_at(Instant::now())
                    && self.quarantine.holds(shard, group_id) =>
            {
                Some(ErrorCode::CoordinatorNotAvailable)
            }
            ShardState::Owned if self.lease_valid_at(Instant::now()) => None,
            ShardState::Owned | ShardState::NotOwned => Some(ErrorCode::NotCoordinator),
            ShardState::Loading => Some(ErrorCode::CoordinatorLoadInProgress),
        }
    }

    fn shard_of(&self, group_id: &str) -> u32 {
        muster_etcd::shard_of(group_id, self.shards())
    }

    fn serving(&self, shard: u32) -> bool {
        self.state(shard) == ShardState::Owned && self.lease_valid_at(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_group_is_served_only_while_its_shard_is_owned_and_the_lease_alive() {
        let table = ShardTable::new(64);
        let shard = muster_etcd::shard_of("orders", 64);
        assert_eq!(table.refusal("orders"), Some(ErrorCode::NotCoordinator));
        table.set(shard, ShardState::Loading);
        assert_eq!(
            table.refusal("orders"),
            Some(ErrorCode::CoordinatorLoadInProgress)
        );
        table.set(shard, ShardState::Owned);
        // No keep-alive answered yet: not served.
        assert_eq!(table.refusal("orders"), Some(ErrorCode::NotCoordinator));
        assert!(!table.serving(shard));
        table.lease_valid_until(Instant::now() + Duration::from_secs(5));
        assert_eq!(table.refusal("orders"), None);
        table.lease_valid_until(Instant::now());
        assert_eq!(table.refusal("orders"), Some(ErrorCode::NotCoordinator));
        table.lease_valid_until(Instant::now() + Duration::from_secs(5));
        table.clear();
        assert_eq!(table.refusal("orders"), Some(ErrorCode::NotCoordinator));
        assert_eq!(table.shard_of("orders"), 12);
    }

    #[test]
    fn a_quarantined_group_of_an_owned_shard_is_refused_and_its_neighbours_served() {
        let table = ShardTable::new(64);
        let shard = table.shard_of("orders");
        let neighbour = (0..)
            .map(|i| format!("g{i}"))
            .find(|g| table.shard_of(g) == shard)
            .unwrap_or_default();
        table.set(shard, ShardState::Owned);
        table.lease_valid_until(Instant::now() + Duration::from_secs(5));
        let bad = muster_etcd::UnreadableKey {
            key: b"/c/group/12/orders".to_vec(),
            group_id: Some("orders".into()),
            reason: "garbage".into(),
        };
        table.quarantine().set(shard, &[bad], Instant::now());
        assert_eq!(
            table.refusal("orders"),
            Some(ErrorCode::CoordinatorNotAvailable)
        );
        assert_eq!(table.refusal(&neighbour), None);
        assert!(table.serving(shard));
        // Not ours: NOT_COORDINATOR as for any group (the new owner decides).
        table.set(shard, ShardState::NotOwned);
        assert_eq!(table.refusal("orders"), Some(ErrorCode::NotCoordinator));
        table.set(shard, ShardState::Owned);
        table.quarantine().lift(shard, "orders");
        assert_eq!(table.refusal("orders"), None);
    }
}
