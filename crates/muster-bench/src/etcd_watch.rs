//! The `etcd-watch` baseline: how long a bare etcd takes to tell N watchers about one put —
//! the physical reference for a rebalance, in which a coordinator makes one change durable and
//! tells every member of the group about it (issue #23, target 1).
//!
//! A single-member etcd is started for the run ([`muster_etcd::testkit`]: `$MUSTER_ETCD_BIN`
//! or `etcd` on `PATH`, data in a temporary directory on the same disk as a spawned
//! `musterd`'s, so both pay the same fsync), or an existing one is used (`--etcd URL`). The
//! watchers are spread over connections as the benchmark's members are (one per 50 by
//! default), each its own watch stream, as N separate clients would have. One measurement:
//! the put is sent → every watcher has been notified of it; the put's own answer (etcd has
//! made it durable and applied it) is recorded on the way.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use muster_etcd::testkit::EtcdCluster;
use muster_etcd::{EtcdClient, WatchEvent};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The key every watcher watches and the writer puts (its value is the measurement's number).
const KEY: &[u8] = b"muster-bench/etcd-watch";

/// How long etcd may take to answer one request of the benchmark.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one measurement may wait for the last watcher.
const NOTIFY_LIMIT: Duration = Duration::from_secs(30);

/// One measurement: put sent → its answer, and → the last watcher notified.
#[derive(Debug, Clone, Copy)]
pub struct Propagation {
    pub put_answered: Duration,
    pub last_notified: Duration,
}

/// What a watcher reports: the number carried by a put it saw, and when; or why it stopped.
type Notice = Result<(u64, Instant), String>;

/// An etcd with `watchers` watches open on [`KEY`].
pub struct EtcdWatchers {
    /// The etcd this run started, if it did (killed when dropped).
    _etcd: Option<EtcdCluster>,
    writer: EtcdClient,
    notices: mpsc::UnboundedReceiver<Notice>,
    tasks: Vec<JoinHandle<()>>,
    watchers: usize,
    next: u64,
}

impl EtcdWatchers {
    /// Starts a single-member etcd (or uses the one at `endpoint`) and opens `watchers`
    /// watches over `connections` connections (default: one per 50 watchers), each in place
    /// when this returns.
    pub async fn start(
        endpoint: Option<&str>,
        watchers: usize,
        connections: Option<usize>,
    ) -> Result<Self> {
        let watchers = watchers.max(1);
        let (etcd, endpoints) = match endpoint {
            Some(url) => (None, vec![url.to_owned()]),
            None => {
                let etcd = tokio::task::spawn_blocking(EtcdCluster::single)
                    .await
                    .context("the etcd start panicked")?
                    .context("cannot start a local etcd")?;
                let endpoints = etcd.endpoints();
                (Some(etcd), endpoints)
            }
        };
        let connections = connections
            .unwrap_or_else(|| watchers.div_ceil(50))
            .clamp(1, watchers);
        let clients = (0..connections)
            .map(|_| EtcdClient::connect(&endpoints, REQUEST_TIMEOUT))
            .collect::<Result<Vec<_>, _>>()
            .context("cannot connect to etcd")?;
        let writer =
            EtcdClient::connect(&endpoints, REQUEST_TIMEOUT).context("cannot connect to etcd")?;
        let (tx, notices) = mpsc::unbounded_channel();
        let mut tasks = Vec::with_capacity(watchers);
        for i in 0..watchers {
            let client = clients.get(i % connections).context("no etcd connection")?;
            let mut watch = client
                .watch_prefix(KEY, 0)
                .await
                .with_context(|| format!("cannot open watch {i}"))?;
            let tx = tx.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let events = match watch.next().await {
                        Ok(events) => events,
                        Err(e) => {
                            let _ = tx.send(Err(format!("watch {i} ended: {e}")));
                            return;
                        }
                    };
                    let at = Instant::now();
                    for event in events {
                        if let WatchEvent::Put { value, .. } = event {
                            let seq = std::str::from_utf8(&value)
                                .ok()
                                .and_then(|v| v.parse().ok());
                            if let Some(seq) = seq {
                                if tx.send(Ok((seq, at))).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
            }));
        }
        Ok(EtcdWatchers {
            _etcd: etcd,
            writer,
            notices,
            tasks,
            watchers,
            next: 0,
        })
    }

    /// Watchers open.
    pub fn watchers(&self) -> usize {
        self.watchers
    }

    /// One put, timed to its answer and to the last watcher's notification.
    pub async fn measure(&mut self) -> Result<Propagation> {
        self.next += 1;
        let seq = self.next;
        let value = seq.to_string();
        let sent = Instant::now();
        self.writer
            .put(KEY, value.as_bytes())
            .await
            .context("the put failed")?;
        let put_answered = sent.elapsed();
        let deadline = tokio::time::Instant::now() + NOTIFY_LIMIT;
        let mut seen = 0;
        let mut last = sent;
        while seen < self.watchers {
            let notice = tokio::time::timeout_at(deadline, self.notices.recv())
                .await
                .map_err(|_| {
                    anyhow!(
                        "{seen} of {} watchers notified within {NOTIFY_LIMIT:?}",
                        self.watchers
                    )
                })?
                .context("every watcher has stopped")?;
            match notice {
                Ok((s, at)) if s == seq => {
                    seen += 1;
                    last = last.max(at);
                }
                // A notification of an earlier put that came late: not this measurement's.
                Ok(_) => {}
                Err(why) => bail!(why),
            }
        }
        Ok(Propagation {
            put_answered,
            last_notified: last.saturating_duration_since(sent),
        })
    }
}

impl Drop for EtcdWatchers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
