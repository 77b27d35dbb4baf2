//! Many group members in one process, each committing its partitions' offsets: the Rust half
//! of the Python client's benchmark (python/benchmarks/compare.py runs both against the same
//! `musterd` and counts heartbeats and commits at the server; figures in docs/benchmarks.md).
//!
//! `--groups` groups of `--members` members each, on one topic with one partition per member
//! of a group, every member on a connection of its own (as a Python `Consumer` is). Each member
//! heartbeats at its default rate (a third of its session timeout) and commits the offsets of
//! what it owns every `--commit-interval-ms` (0: one commit after another, as fast as the
//! server answers). Prints `READY` once every member owns a partition, runs until SIGTERM or
//! Ctrl-C, then leaves and prints `COMMITS <acknowledged commits>`.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use muster_client::{Admin, Client, ClientConfig, Event, MemberConfig, TopicPartition};
use tokio::sync::watch;

#[derive(Debug, Parser)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:7450")]
    server: String,
    #[arg(long, default_value_t = 100)]
    groups: usize,
    /// Members per group (and partitions of the topic).
    #[arg(long, default_value_t = 10)]
    members: usize,
    #[arg(long, default_value = "bench")]
    topic: String,
    /// Prefix of the groups' names (`<prefix>-<n>`).
    #[arg(long, default_value = "load")]
    group_prefix: String,
    #[arg(long, default_value_t = 1000)]
    commit_interval_ms: u64,
    #[arg(long, default_value_t = 10_000)]
    session_timeout_ms: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // As many runtime threads as the Python module's runtime uses (python/src/runtime.rs).
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?
        .block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let partitions = i32::try_from(args.members)?;
    Admin::new(Client::connect(ClientConfig::new([args.server.clone()])).await?)
        .ensure_topic(&args.topic, partitions)
        .await?;
    let owning = Arc::new(AtomicUsize::new(0));
    let commits = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    for g in 0..args.groups {
        for m in 0..args.members {
            let client = Client::connect(
                ClientConfig::new([args.server.clone()])
                    .configure(|c| c.client_id(format!("load-{g}-{m}"))),
            )
            .await?;
            let (member, mut events) =
                MemberConfig::new(format!("{}-{g}", args.group_prefix), [args.topic.clone()])
                    .session_timeout(Duration::from_millis(args.session_timeout_ms))
                    .start(client)?;
            let (owning, commits, mut stop) =
                (Arc::clone(&owning), Arc::clone(&commits), stop_rx.clone());
            let interval = Duration::from_millis(args.commit_interval_ms);
            tasks.push(tokio::spawn(async move {
                let mut owned: BTreeSet<TopicPartition> = BTreeSet::new();
                let mut offset = 0_i64;
                let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
                loop {
                    let had = !owned.is_empty();
                    tokio::select! {
                        _ = stop.changed() => break,
                        event = events.recv() => match event {
                            Some(Event::Assigned(p)) => owned.extend(p.iter().cloned()),
                            Some(Event::Revoked(p) | Event::Lost(p)) => {
                                for tp in p.iter() {
                                    owned.remove(tp);
                                }
                            }
                            Some(_) => {}
                            None => break,
                        },
                        _ = tick.tick(), if !owned.is_empty() => {
                            offset += 1;
                            let batch = owned.iter().map(|tp| (tp.clone(), offset));
                            if member.commit_offsets(batch).await.is_ok() {
                                commits.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    match (had, owned.is_empty()) {
                        (false, false) => owning.fetch_add(1, Ordering::Relaxed),
                        (true, true) => owning.fetch_sub(1, Ordering::Relaxed),
                        _ => 0,
                    };
                }
                let _ = member.close().await;
            }));
        }
    }
    let total = args.groups * args.members;
    while owning.load(Ordering::Relaxed) < total {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("READY");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    let _ = stop_tx.send(true);
    for task in tasks {
        let _ = task.await;
    }
    println!("COMMITS {}", commits.load(Ordering::Relaxed));
    Ok(())
}
