//! Failover time of cluster mode, measured end to end over repeated kills (docs/benchmarks.md
//! "Cluster mode"): a real etcd, three real `musterd` nodes, one consumer group per shard (a
//! member that leads itself). Each round SIGKILLs the node coordinating the most groups, then
//! times, for every group it had, SIGKILL → a survivor answers the member's heartbeat (same
//! member id and generation) with NONE; then restarts the node and waits for the shards to
//! spread again.
//!
//! Each kill comes at a random instant of the victim's lease renewal cycle (a pause of 0 to
//! TTL before it), as a crash does: without it the kill came at a fixed time after the
//! restarted victim registered, always just after one of its renewals, so every failover
//! waited out nearly a whole TTL.
//!
//! A watch on the cluster's node and owner keys splits each failover into its steps, as etcd
//! saw them: SIGKILL → the dead node's key deleted (its lease expired) → the survivors' claims
//! of its shards → the groups answering.
//!
//! ```sh
//! cargo build --release -p muster-server --bin musterd
//! cargo run --release -p muster-server --example cluster_failover -- [ROUNDS] [TTL_S]
//! ```
//! `MUSTERD` names the binary (default `target/release/musterd`).

#[path = "../tests/cluster_support/mod.rs"]
mod cluster_support;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Result;
use cluster_support::*;
use muster_etcd::testkit::EtcdCluster;
use muster_etcd::{EtcdClient, KeyLayout, WatchEvent};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(10), |a| a.parse())?;
    let ttl: u64 = args.next().map_or(Ok(5), |a| a.parse())?;
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let timeline = Timeline::start(etcd.endpoints())?;
    let mut nodes: Vec<Node> = (1..=3)
        .map(|i| Node::start(&endpoints, &format!("n{i}"), ttl))
        .collect::<Result<_>>()?;
    let addrs = |nodes: &[Node]| nodes.iter().map(|n| n.addr).collect::<Vec<_>>();
    wait_settled(nodes[0].addr, 3, Duration::from_secs(20))?;
    create_topic(nodes[0].addr, &addrs(&nodes))?;
    let mut members: Vec<Member> = (0..SHARDS)
        .map(|s| Member::start(nodes[0].addr, &group_in_shard(s), 1))
        .collect::<Result<_>>()?;
    let mut all_groups = Vec::new();
    let mut last_group = Vec::new();
    // The steps of each kill: SIGKILL → node key deleted; → last claim; → last group answered.
    let (mut expiries, mut claiming, mut answering) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let victim = (0..nodes.len())
            .max_by_key(|&i| members.iter().filter(|m| m.node == nodes[i].id).count())
            .unwrap_or(0);
        let victim_id = nodes[victim].id.clone();
        let survivors: Vec<_> = addrs(&nodes)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i != victim)
            .map(|(_, a)| a)
            .collect();
        std::thread::sleep(random_below(Duration::from_secs(ttl)));
        let killed = Instant::now();
        nodes[victim].kill();
        let mut times = Vec::new();
        for m in members.iter_mut().filter(|m| m.node == victim_id) {
            m.follow(&survivors, Duration::from_secs(ttl * 4 + 10))?;
            times.push(killed.elapsed());
        }
        let last = times.iter().max().copied().unwrap_or_default();
        let steps = timeline.steps(killed, &victim_id);
        println!(
            "round {round}: {} groups moved off {victim_id}; first {:?}, last {:?}; \
             node key deleted {:?}, claims {:?}..{:?}",
            times.len(),
            times.iter().min().copied().unwrap_or_default(),
            last,
            steps.expired,
            steps.first_claim,
            steps.last_claim,
        );
        if let Some(expired) = steps.expired {
            expiries.push(expired);
            if let Some(claimed) = steps.last_claim {
                claiming.push(claimed.saturating_sub(expired));
                answering.push(last.saturating_sub(claimed));
            }
        }
        all_groups.extend(times);
        last_group.push(last);
        nodes[victim] = Node::start(&endpoints, &victim_id, ttl)?;
        wait_settled(nodes[0].addr, 3, Duration::from_secs(30))?;
        for m in &mut members {
            m.follow(&addrs(&nodes), Duration::from_secs(10))?;
        }
    }
    for v in [
        &mut all_groups,
        &mut last_group,
        &mut expiries,
        &mut claiming,
        &mut answering,
    ] {
        v.sort();
    }
    let pct = |v: &[Duration], p: f64| {
        v.get(((v.len().max(1) - 1) as f64 * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    println!(
        "lease TTL {ttl} s, {rounds} kills: per group p50 {:?} max {:?}; last group of a kill p50 {:?} max {:?}",
        pct(&all_groups, 0.5),
        pct(&all_groups, 1.0),
        pct(&last_group, 0.5),
        pct(&last_group, 1.0)
    );
    println!(
        "steps (p50 / max): SIGKILL → node key deleted {:?} / {:?}; → last claim {:?} / {:?}; \
         → last group answered {:?} / {:?}",
        pct(&expiries, 0.5),
        pct(&expiries, 1.0),
        pct(&claiming, 0.5),
        pct(&claiming, 1.0),
        pct(&answering, 0.5),
        pct(&answering, 1.0)
    );
    Ok(())
}

/// A duration in `[0, limit)`, from the clock's nanoseconds hashed (no generator needed for
/// one draw per kill).
fn random_below(limit: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    let nanos = limit.as_nanos().max(1) as u64;
    Duration::from_nanos(hasher.finish() % nanos)
}

/// The node and owner key changes of the cluster, each with the instant this process saw it,
/// from a watch of its own (a thread with its own runtime: the rest of the example blocks).
struct Timeline {
    events: Arc<Mutex<Vec<(Instant, WatchEvent)>>>,
}

/// One failover as etcd saw it, from the SIGKILL.
struct Steps {
    expired: Option<Duration>,
    first_claim: Option<Duration>,
    last_claim: Option<Duration>,
}

impl Timeline {
    fn start(endpoints: Vec<String>) -> Result<Timeline> {
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::spawn(move || {
            runtime.block_on(async move {
                let keys = KeyLayout::new("muster").expect("a valid cluster name");
                loop {
                    let watched = async {
                        let client = EtcdClient::connect(&endpoints, Duration::from_secs(5))?;
                        let mut watch = client.watch_prefix(&keys.cluster_prefix(), 0).await?;
                        loop {
                            let batch = watch.next().await?;
                            let now = Instant::now();
                            let mut events = sink.lock().unwrap_or_else(PoisonError::into_inner);
                            events.extend(batch.into_iter().map(|e| (now, e)));
                        }
                    };
                    let ended: Result<(), muster_etcd::EtcdError> = watched.await;
                    if let Err(e) = ended {
                        eprintln!("timeline watch: {e}; reopening");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        });
        Ok(Timeline { events })
    }

    /// The steps of the failover of `victim`, killed at `killed` (call once its groups answer
    /// elsewhere: every claim has been made by then).
    fn steps(&self, killed: Instant, victim: &str) -> Steps {
        let keys = KeyLayout::new("muster").expect("a valid cluster name");
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        let after: Vec<_> = events.iter().filter(|(at, _)| *at >= killed).collect();
        let expired = after.iter().find_map(|(at, e)| match e {
            WatchEvent::Delete { key } if keys.parse_node(key).as_deref() == Some(victim) => {
                Some(at.duration_since(killed))
            }
            _ => None,
        });
        let claims: Vec<Duration> = after
            .iter()
            .filter_map(|(at, e)| match e {
                WatchEvent::Put { key, .. } if keys.parse_owner(key).is_some() => {
                    Some(at.duration_since(killed))
                }
                _ => None,
            })
            .collect();
        Steps {
            expired,
            first_claim: claims.first().copied(),
            last_claim: claims.last().copied(),
        }
    }
}
