//! Cluster mode's part of the supervisor: taking a shard's groups over (all at once, or, for
//! groups held back by an unreadable key and read again later, a few at a time), giving them
//! up, and
//! installing topic catalog changes made on other nodes. The ownership loop (musterd's
//! `cluster` module) decides which shards this node holds and sends these messages; the
//! placement it shares answers requests for the shards in between (loading, given away).

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::join_all;
use tracing::{info, warn};

use super::Supervisor;
use crate::actors::messages::{
    AdoptGroups, AdoptShard, CatalogChanged, Drain, ReleaseShard, Relinquish,
};
use crate::logsafe::logsafe_list;

impl Supervisor {
    /// Takes every group of `shard` out of the registry and tells each to stop coordinating;
    /// the future resolves once they have all finished their writes.
    fn relinquish_shard(
        &mut self,
        shard: u32,
    ) -> impl std::future::Future<Output = usize> + Send + 'static {
        let ids: Vec<Arc<str>> = self
            .groups
            .values()
            .filter(|e| self.placement.shard_of(&e.group_id) == shard)
            .map(|e| Arc::clone(&e.group_id))
            .collect();
        let mut stops = Vec::with_capacity(ids.len());
        for id in &ids {
            if let Some((key, entry)) = self.groups.find(id) {
                // A parked group has nothing in flight: forgetting it is all there is to do.
                if let Some(addr) = entry.home.live() {
                    stops.push(addr.send(Relinquish));
                }
                self.forget(key);
            }
        }
        let count = ids.len();
        async move {
            // A group that already stopped has nothing in flight: its error is fine.
            join_all(stops).await;
            count
        }
    }
}

impl Handler<AdoptShard> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: AdoptShard, ctx: &mut Self::Context) {
        // Groups of the shard still here (a shard lost and granted again before the loss was
        // carried out) are stale: the loaded state replaces them.
        let stale = self.relinquish_shard(msg.shard);
        ctx.spawn(actix::fut::wrap_future(async move {
            stale.await;
        }));
        let groups = msg.state.groups.len();
        self.load(msg.state, ctx);
        info!(shard = msg.shard, groups, "shard taken over");
    }
}

impl Handler<AdoptGroups> for Supervisor {
    type Result = ();

    fn handle(&mut self, mut msg: AdoptGroups, ctx: &mut Self::Context) {
        // A group already here is live and may have written since the read: it stays as it
        // is (the placement refuses a held-back group, so this is never expected).
        let state = &msg.state;
        let mut skipped: Vec<String> = state
            .groups
            .iter()
            .map(|g| &g.group_id)
            .chain(state.offsets.iter().map(|(id, _)| id))
            .chain(state.journals.iter().map(|(id, _)| id))
            .chain(state.history.iter().map(|(id, _)| id))
            .chain(state.quarantine.iter().map(|(id, _)| id))
            .filter(|id| self.groups.key_of(id).is_some())
            .cloned()
            .collect();
        skipped.sort_unstable();
        skipped.dedup();
        if !skipped.is_empty() {
            warn!(
                shard = msg.shard,
                groups = %logsafe_list(&skipped),
                "groups to adopt are here already; kept as they are"
            );
            let keep = |id: &String| !skipped.contains(id);
            msg.state.groups.retain(|g| keep(&g.group_id));
            msg.state.offsets.retain(|(id, _)| keep(id));
            msg.state.journals.retain(|(id, _)| keep(id));
            msg.state.history.retain(|(id, _)| keep(id));
            msg.state.quarantine.retain(|(id, _)| keep(id));
        }
        self.load(msg.state, ctx);
    }
}

impl Handler<ReleaseShard> for Supervisor {
    type Result = MessageResult<ReleaseShard>;

    fn handle(&mut self, msg: ReleaseShard, _: &mut Self::Context) -> Self::Result {
        let shard = msg.shard;
        let stopping = self.relinquish_shard(shard);
        MessageResult(Drain(Box::pin(async move {
            let groups = stopping.await;
            info!(shard, groups, "shard given up");
            groups
        })))
    }
}

impl Handler<CatalogChanged> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: CatalogChanged, ctx: &mut Self::Context) {
        self.install_newer(msg.0, "topic catalog changed on another node", ctx);
    }
}
