//! The watches of cluster mode: node and owner keys (a change wakes the ownership loop at once
//! instead of at its next periodic read) and the topic catalog (a topic created or grown on any
//! node reaches this node's groups). A watch that fails is opened again after a pause; the
//! catalog is then read afresh, so nothing missed meanwhile is lost.

use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use muster_coordinator::actors::{CatalogChanged, Supervisor};
use muster_etcd::{EtcdClient, EtcdStore, WatchEvent};
use tokio::sync::Notify;
use tracing::{debug, warn};

/// Pause before a failed watch is opened again.
const REOPEN: Duration = Duration::from_millis(500);

/// Wakes `changed` on every change under `prefix`, forever.
pub(super) async fn trigger_on_change(client: EtcdClient, prefix: Vec<u8>, changed: Arc<Notify>) {
    loop {
        match client.watch_prefix(&prefix, 0).await {
            Ok(mut watch) => {
                // Changes between the last read and this watch are caught by the read the
                // wake-up causes.
                changed.notify_one();
                loop {
                    match watch.next().await {
                        Ok(_) => changed.notify_one(),
                        Err(e) => {
                            debug!(error = %e, "membership watch ended; reopening");
                            break;
                        }
                    }
                }
            }
            Err(e) => debug!(error = %e, "cannot open the membership watch; retrying"),
        }
        tokio::time::sleep(REOPEN).await;
    }
}

/// How often the catalog is read in full even while its watch reports nothing: a watch on an
/// etcd member that is cut off goes silent instead of failing.
const REREAD: Duration = Duration::from_secs(30);

/// Keeps the supervisor's topic catalog equal to the cluster's, forever.
pub(super) async fn follow_topics(store: Arc<EtcdStore>, supervisor: Arc<Addr<Supervisor>>) {
    loop {
        match tokio::time::timeout(REREAD, follow_topics_once(&store, &supervisor)).await {
            // Time for a full read: at once.
            Err(_) => continue,
            Ok(Err(e)) => {
                warn!(error = %e, "topic catalog watch failed; reading the catalog again shortly")
            }
            Ok(Ok(())) => {}
        }
        tokio::time::sleep(REOPEN).await;
    }
}

async fn follow_topics_once(
    store: &EtcdStore,
    supervisor: &Addr<Supervisor>,
) -> Result<(), String> {
    let (topics, revision) = store.read_topics().await.map_err(|e| e.to_string())?;
    supervisor.do_send(CatalogChanged(topics));
    let mut watch = store
        .client()
        .watch_prefix(&store.keys().topics_prefix(), revision + 1)
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let events = watch.next().await.map_err(|e| e.to_string())?;
        let topics: Vec<_> = events
            .into_iter()
            .filter_map(|event| match event {
                WatchEvent::Put { key, value } => match store.parse_topic(&key, &value) {
                    Ok(topic) => Some(topic),
                    Err(e) => {
                        warn!(error = %e, "unreadable topic in etcd; ignored");
                        None
                    }
                },
                // Topics are never deleted.
                WatchEvent::Delete { .. } => None,
            })
            .collect();
        if !topics.is_empty() {
            supervisor.do_send(CatalogChanged(topics));
        }
    }
}
