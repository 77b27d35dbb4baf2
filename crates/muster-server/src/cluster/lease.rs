//! This node's lease: granted at registration, renewed every third of its TTL by a task of its
//! own (so that loading a shard never delays a renewal), and declared lost the moment it may
//! have expired — when etcd says it has, or when the last renewal etcd confirmed is a full TTL
//! old (a pause, a cut network: by then another node may own our shards, and the local clock
//! is the only one that still works). The shard table stops serving at that same instant.

use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_etcd::EtcdClient;
use tokio::sync::watch;
use tracing::warn;

use super::placement::ShardTable;

/// How often a renewal is retried while etcd does not answer.
const RETRY: Duration = Duration::from_millis(250);

/// Keeps lease `id` alive until it is lost; then sets `lost` and returns.
pub(super) async fn keep_alive(
    client: EtcdClient,
    id: i64,
    ttl: Duration,
    table: Arc<ShardTable>,
    lost: watch::Sender<bool>,
) {
    let period = ttl / 3;
    loop {
        let sent = Instant::now();
        // An answer is worth waiting for as long as the lease is certainly alive: a slow etcd
        // (a stalled fsync, a leader election) should not cost the lease while it still holds.
        let patience = table.remaining(sent).max(period / 2);
        // An attempt at one member gets a sixth of the TTL, then the next member is asked.
        let answer =
            tokio::time::timeout(patience, client.lease_keep_alive_once(id, ttl / 6)).await;
        // A process paused past the lease wakes up here (or in the sleep below): check the
        // clock before believing an answer that may have waited out the pause.
        match answer {
            Ok(Ok(Some(granted_s))) => {
                let granted = Duration::from_secs(granted_s.max(0) as u64);
                table.lease_valid_until(sent + granted);
            }
            Ok(Ok(None)) => {
                warn!(lease = id, "etcd says this node's lease has expired");
                let _ = lost.send(true);
                return;
            }
            Ok(Err(e)) => warn!(lease = id, error = %e, "lease renewal failed; retrying"),
            Err(_) => warn!(lease = id, "lease renewal unanswered; retrying"),
        }
        if lapsed(&table, id, &lost) {
            return;
        }
        let renewed = table.lease_valid_at(Instant::now() + ttl - period);
        tokio::time::sleep(if renewed { period } else { RETRY }).await;
        if lapsed(&table, id, &lost) {
            return;
        }
    }
}

/// Whether the last renewal etcd confirmed is a whole TTL old: then it says so and sets `lost`.
fn lapsed(table: &ShardTable, id: i64, lost: &watch::Sender<bool>) -> bool {
    if table.lease_valid_at(Instant::now()) {
        return false;
    }
    warn!(
        lease = id,
        "no lease renewal confirmed for a whole TTL; giving every shard up"
    );
    let _ = lost.send(true);
    true
}
