//! Which [`Store`] a single node keeps its state in (`--store`): redb in `--data-dir` (the
//! default, durable), or process memory (nothing survives a restart). The memory store is for
//! measuring what durability costs — `muster-bench one-join --compare` runs the same
//! rebalance against both — and for throwaway servers; a cluster node always uses etcd.

use std::path::Path;
use std::sync::Arc;

use muster_coordinator::storage::{MemoryStore, RedbStore, Store, StoreError};

/// The store a single node uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// `muster.redb` in `--data-dir`: every acknowledged change is fsync'd.
    Redb,
    /// Process memory: nothing survives a restart or a crash (for benchmarks and tests).
    Memory,
}

impl StoreKind {
    /// Opens the store (for redb, the file under `data_dir`; a locked, unreadable or corrupt
    /// one is an error, never reset to empty).
    pub fn open(self, data_dir: &Path) -> Result<Arc<dyn Store>, StoreError> {
        Ok(match self {
            StoreKind::Redb => Arc::new(RedbStore::open(data_dir)?),
            StoreKind::Memory => Arc::new(MemoryStore::new()),
        })
    }
}
