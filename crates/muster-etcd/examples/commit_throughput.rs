//! Durable offset commits through `EtcdStore` against the same etcd's own batched puts, side by
//! side on one freshly started etcd (testkit):
//!
//! `cargo run --release -p muster-etcd --features testkit --example commit_throughput [SECS]`
//!
//! With `MUSTER_ETCD_ENDPOINTS` set (comma-separated URLs), it measures that etcd instead of
//! starting one (crates/muster-bench/cluster-bench.sh measures musterd nodes on the same etcd).
//!
//! - baseline: transactions of 128 plain puts (etcd's max-txn-ops), offset-sized values, sent
//!   back to back by 1 and by 4 concurrent senders: puts/s;
//! - store: 256 committers, each committing one offset of its own group and waiting until it
//!   is durable, over and over (group commit packs them, fenced on 64 shards): commits/s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use muster_coordinator::storage::{CommittedOffset, Mutation, OffsetWrite, Store};
use muster_etcd::generated::etcdserverpb::request_op::Request;
use muster_etcd::generated::etcdserverpb::{PutRequest, RequestOp, TxnRequest};
use muster_etcd::testkit::EtcdCluster;
use muster_etcd::{EtcdClient, EtcdStore, EtcdStoreConfig};

const SHARDS: u32 = 64;
const COMMITTERS: usize = 256;

fn offset_value() -> Vec<u8> {
    muster_coordinator::storage::codec::encode_offset(CommittedOffset {
        offset: 123_456,
        metadata: None,
        commit_timestamp_ms: 1_700_000_000_000,
    })
    .unwrap_or_default()
}

async fn baseline(client: EtcdClient, senders: usize, duration: Duration) -> f64 {
    let puts = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + duration;
    let mut tasks = Vec::new();
    for sender in 0..senders {
        let client = client.clone();
        let puts = Arc::clone(&puts);
        tasks.push(tokio::spawn(async move {
            let value = offset_value();
            let mut round = 0u64;
            while Instant::now() < deadline {
                let success = (0..128)
                    .map(|i| RequestOp {
                        request: Some(Request::RequestPut(PutRequest {
                            key: format!("/baseline/offset/{sender}/{}/t/{i}", round % 64)
                                .into_bytes(),
                            value: value.clone(),
                            ..PutRequest::default()
                        })),
                    })
                    .collect();
                let request = TxnRequest {
                    compare: Vec::new(),
                    success,
                    failure: Vec::new(),
                };
                if client.txn(request).await.is_ok() {
                    puts.fetch_add(128, Ordering::Relaxed);
                }
                round += 1;
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    puts.load(Ordering::Relaxed) as f64 / duration.as_secs_f64()
}

fn main() -> anyhow::Result<()> {
    let secs: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()
        .context("SECS is a number")?
        .unwrap_or(5);
    let duration = Duration::from_secs(secs);
    let (_cluster, endpoints) = match std::env::var("MUSTER_ETCD_ENDPOINTS") {
        Ok(given) => (
            None,
            given.split(',').map(str::to_owned).collect::<Vec<_>>(),
        ),
        Err(_) => {
            let cluster = EtcdCluster::single()?;
            let endpoints = cluster.endpoints();
            (Some(cluster), endpoints)
        }
    };
    let store = Arc::new(EtcdStore::connect(EtcdStoreConfig::new(
        endpoints.clone(),
        "bench",
        SHARDS,
    ))?);
    let runtime = tokio::runtime::Runtime::new()?;
    let client =
        runtime.block_on(async { EtcdClient::connect(&endpoints, Duration::from_secs(5)) })?;
    for shard in 0..SHARDS {
        let key = store.keys().owner(shard);
        let revision = runtime.block_on(client.put(&key, b"bench-node"))?;
        store.own_shard(shard, revision);
    }

    let one = runtime.block_on(baseline(client.clone(), 1, duration));
    let four = runtime.block_on(baseline(client.clone(), 4, duration));

    let commits = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + duration;
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for committer in 0..COMMITTERS {
            let store = Arc::clone(&store);
            let commits = Arc::clone(&commits);
            let failures = Arc::clone(&failures);
            tasks.push(tokio::spawn(async move {
                let group_id = format!("group-{committer}");
                let topic: Arc<str> = "orders".into();
                let mut offset = 0;
                while Instant::now() < deadline {
                    offset += 1;
                    let durable = store.apply(vec![Mutation::PutOffsets {
                        group_id: group_id.clone(),
                        offsets: vec![OffsetWrite {
                            topic: Arc::clone(&topic),
                            partition: 0,
                            committed: CommittedOffset {
                                offset,
                                metadata: None,
                                commit_timestamp_ms: 1_700_000_000_000,
                            },
                        }],
                    }]);
                    match durable.await {
                        Ok(()) => commits.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failures.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }));
        }
        for task in tasks {
            let _ = task.await;
        }
    });
    let through_store = commits.load(Ordering::Relaxed) as f64 / duration.as_secs_f64();
    println!("etcd batched puts (128/txn), 1 sender:  {one:>9.0} puts/s");
    println!("etcd batched puts (128/txn), 4 senders: {four:>9.0} puts/s");
    println!(
        "EtcdStore durable offset commits, {COMMITTERS} committers: {through_store:>9.0} commits/s \
         ({:.0} % of 1 sender, {:.0} % of 4; {} failed)",
        100.0 * through_store / one,
        100.0 * through_store / four,
        failures.load(Ordering::Relaxed)
    );
    drop(store);
    Ok(())
}
