//! A worker that shares a topic's partitions with the other workers of its group.
//!
//! It creates the topic if it is missing, joins the group, prints the partitions it gets and
//! loses, "processes" its partitions (advancing a position per partition), commits the
//! positions periodically and whenever it gives partitions up, and leaves the group cleanly on
//! Ctrl-C (or SIGTERM).
//!
//! ```text
//! musterd &                                   # a server on 127.0.0.1:7450
//! cargo run -p muster-client --example worker -- --name w1 &
//! cargo run -p muster-client --example worker -- --name w2 &
//! cargo run -p muster-client --example worker -- --name w3 &
//! kill -9 %2      # w2 dies without leaving: after its session timeout, w1 and w3 take over
//! kill %3         # w3 leaves cleanly: w1 takes over at once
//! ```
//!
//! `--group-protocol consumer` (env `MUSTER_GROUP_PROTOCOL`) makes the worker a consumer-protocol
//! member (Kafka 4's KIP-848): the server assigns (`--server-assignor uniform|range`, default
//! the server's), and each worker gives up and takes partitions on its own as its share changes,
//! with no group-wide rebalance; the lines it prints then name the member epoch. `classic` (the
//! default) is the JoinGroup / SyncGroup protocol with a client-side assignor (`--assignors`).
//!
//! `--ownership-log` adds a machine-readable line to stdout for every change of what the worker
//! owns and every acknowledged commit, stamped with the wall clock (shared by every process on
//! the machine), so that a test can replay a fleet of workers and check that no partition ever
//! had two owners and that no acknowledged commit was lost:
//!
//! ```text
//! own <unix µs> assigned  <epoch> <topic/partition=start,...>   on receipt, before any work
//! own <unix µs> revoked   <epoch> <topic/partition,...>         after its commit, before letting go
//! own <unix µs> lost      <epoch> <topic/partition,...>          a Lost, or a commit refused PARTITION_NOT_OWNED
//! own <unix µs> committed <epoch> <topic/partition=offset,...>  once the server acknowledged it
//! own <unix µs> stopped   <epoch> <topic/partition,...>         after the final commit, before leaving
//! ```
//!
//! (`<epoch>` is the generation or the member epoch; an empty list is `-`.)
//!
//! Settings come from arguments or the environment: `MUSTER_SERVER` (default
//! `127.0.0.1:7450`; a cluster's nodes comma-separated, e.g. `n1:7450,n2:7450,n3:7450`: the
//! worker finds its group's coordinator from them and follows it when it moves), `MUSTER_GROUP`, `MUSTER_TOPICS` (comma-separated), and for a secured
//! server `MUSTER_TOKEN` (`--token`), `MUSTER_TLS_CA` (`--tls-ca`, turns TLS on),
//! `MUSTER_TLS_CLIENT_CERT` / `MUSTER_TLS_CLIENT_KEY` (`--tls-client-cert` /
//! `--tls-client-key`, for mTLS) and `MUSTER_TLS_SERVER_NAME` (`--tls-server-name`, default:
//! the host of `--server`).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use clap::Parser;
use muster_client::args::ConnectArgs;
use muster_client::partition::display_partitions;
use muster_client::{
    Admin, Client, ClientConfig, ClientError, ConnectionConfig, Event, GroupProtocol, MemberConfig,
    TopicPartition,
};

#[derive(Debug, Parser)]
#[command(about = "A Muster group member that owns partitions and commits offsets")]
struct Args {
    /// Server address, or several nodes of a cluster (comma-separated or repeated).
    #[arg(
        long,
        env = "MUSTER_SERVER",
        value_delimiter = ',',
        default_value = "127.0.0.1:7450"
    )]
    server: Vec<String>,
    /// Group to join.
    #[arg(long, env = "MUSTER_GROUP", default_value = "workers")]
    group: String,
    /// Topics to subscribe to (created when missing).
    #[arg(
        long,
        env = "MUSTER_TOPICS",
        value_delimiter = ',',
        default_value = "jobs"
    )]
    topics: Vec<String>,
    /// Partition count of a topic this worker creates.
    #[arg(long, default_value_t = 6)]
    partitions: i32,
    /// Name printed on every line and used as the client id.
    #[arg(long, default_value = "worker")]
    name: String,
    /// Static membership: restarting with the same id within the session timeout gets the
    /// same partitions back without a rebalance.
    #[arg(long)]
    instance_id: Option<String>,
    /// Group protocol: classic (JoinGroup / SyncGroup, a client-side assignor) or consumer
    /// (ConsumerGroupHeartbeat, the server assigns).
    #[arg(long, env = "MUSTER_GROUP_PROTOCOL", default_value = "classic")]
    group_protocol: GroupProtocol,
    /// Classic protocol: assignors by preference: range, roundrobin, sticky, cooperative-sticky.
    #[arg(long, value_delimiter = ',', default_value = "cooperative-sticky")]
    assignors: Vec<String>,
    /// Consumer protocol: the server assignor to ask for, uniform or range [default: the
    /// server's].
    #[arg(long)]
    server_assignor: Option<String>,
    /// Session timeout (the server accepts 6000 ms and more by default).
    #[arg(long, default_value_t = 6000)]
    session_timeout_ms: u64,
    /// How often positions are committed.
    #[arg(long, default_value_t = 2000)]
    commit_interval_ms: u64,
    /// Also print machine-readable `own ...` lines (see the module docs): what the worker owns
    /// from when, and every acknowledged commit, stamped with the wall clock in µs.
    #[arg(long)]
    ownership_log: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let name = args.name.clone();
    let own = OwnershipLog(args.ownership_log);

    let first = args.server.first().cloned().unwrap_or_default();
    let config = args
        .connect
        .apply(ConnectionConfig::new(first).client_id(&args.name))?;
    let client = Client::connect(ClientConfig {
        bootstrap: args.server.clone(),
        connection: config,
    })
    .await?;
    let admin = Admin::new(client.clone());
    for topic in &args.topics {
        let partitions = admin.ensure_topic(topic, args.partitions).await?;
        println!("[{name}] topic {topic}: {partitions} partitions");
    }

    let mut config = MemberConfig::new(&args.group, args.topics.iter().cloned())
        .group_protocol(args.group_protocol)
        .session_timeout(Duration::from_millis(args.session_timeout_ms))
        .assignor_names(&args.assignors)?;
    if let Some(instance) = &args.instance_id {
        config = config.group_instance_id(instance);
    }
    if let Some(assignor) = &args.server_assignor {
        config = config.server_assignor(assignor);
    }
    // What the numbers on the lines below are: a classic generation, or a member epoch.
    let epoch = match args.group_protocol {
        GroupProtocol::Classic => "generation",
        GroupProtocol::Consumer => "epoch",
    };
    let (member, mut events) = config.start(client)?;
    println!(
        "[{name}] joining group {} ({} protocol, member id {}) ...",
        args.group,
        args.group_protocol,
        member.member_id(),
    );

    // Partition → next position to process (a stand-in for real consumption).
    let mut positions: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    let mut commit_every = tokio::time::interval(Duration::from_millis(args.commit_interval_ms));
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);

    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            event = events.recv() => match event {
                Some(Event::Assigned(added)) => {
                    // Owned from now on: stamped before anything is done with it.
                    let received = SystemTime::now();
                    // Where the previous owner stopped. If that cannot be read, do not guess 0
                    // (it would redo work, or skip a commit's worth): stop, and let the group
                    // hand the partitions to someone who can.
                    let committed = match member.fetch_offsets(Some(added.partitions())).await {
                        Ok(committed) => committed,
                        Err(e) => {
                            eprintln!("[{name}] cannot read committed offsets ({e}); leaving");
                            break;
                        }
                    };
                    for tp in added.iter() {
                        let start = committed.get(tp).map_or(0, |o| o.offset);
                        positions.insert(tp.clone(), start);
                    }
                    own.line(
                        received,
                        "assigned",
                        added.generation(),
                        added.iter().map(|tp| (tp, positions.get(tp).copied())),
                    );
                    let coordinator = member.coordinator().map_or("?".to_owned(), |n| n.to_string());
                    println!(
                        "[{name}] {epoch} {}: assigned {}; now own {} (coordinator {coordinator})",
                        added.generation(),
                        display_partitions(added.iter()),
                        display_partitions(positions.keys()),
                    );
                }
                Some(Event::Revoked(revoked)) => {
                    // Commit where we are before letting go; dropping `revoked` lets the
                    // rebalance go on.
                    let done: Vec<(TopicPartition, i64)> = revoked
                        .iter()
                        .filter_map(|tp| positions.remove(tp).map(|p| (tp.clone(), p)))
                        .collect();
                    match member.commit_offsets(done.clone()).await {
                        Ok(()) => own.committed(member.generation(), &done),
                        Err(e) => eprintln!("[{name}] commit on revocation failed: {e}"),
                    }
                    // Still owned until `revoked` is dropped, at the end of this arm.
                    own.line(
                        SystemTime::now(),
                        "revoked",
                        revoked.generation(),
                        revoked.iter().map(|tp| (tp, None)),
                    );
                    println!(
                        "[{name}] {epoch} {}: revoked {}; now own {}",
                        revoked.generation(),
                        display_partitions(revoked.iter()),
                        display_partitions(positions.keys()),
                    );
                }
                Some(Event::Lost(lost)) => {
                    // Those a refused commit already dropped (below) are not lost twice.
                    let gone: Vec<&TopicPartition> =
                        lost.iter().filter(|tp| positions.remove(tp).is_some()).collect();
                    if gone.is_empty() {
                        continue;
                    }
                    own.line(
                        SystemTime::now(),
                        "lost",
                        lost.generation(),
                        gone.iter().map(|tp| (*tp, None)),
                    );
                    println!(
                        "[{name}] {epoch} {}: lost {}; now own {}",
                        lost.generation(),
                        display_partitions(gone.iter().copied()),
                        display_partitions(positions.keys()),
                    );
                }
                Some(Event::Error(fatal)) => {
                    eprintln!("[{name}] fatal: {fatal}");
                    return Err(fatal.into());
                }
                Some(_) => {}
                None => break,
            },
            _ = commit_every.tick() => {
                if positions.is_empty() {
                    continue;
                }
                for position in positions.values_mut() {
                    *position += 1; // "processed" one more record
                }
                let snapshot: Vec<(TopicPartition, i64)> =
                    positions.iter().map(|(tp, p)| (tp.clone(), *p)).collect();
                match member.commit_offsets(snapshot.clone()).await {
                    Ok(()) => {
                        own.committed(member.generation(), &snapshot);
                        println!("[{name}] committed {} partitions", positions.len());
                    }
                    Err(ClientError::PartitionsNotOwned { partitions, .. }) => {
                        // Another member owns these now: stop at once (the member emits Lost
                        // for them too). The others were committed, but this error does not
                        // say whether one was refused for another reason: no `committed` line.
                        let gone: Vec<&TopicPartition> =
                            partitions.iter().filter(|tp| positions.remove(tp).is_some()).collect();
                        own.line(
                            SystemTime::now(),
                            "lost",
                            member.generation(),
                            gone.iter().map(|tp| (*tp, None)),
                        );
                        eprintln!(
                            "[{name}] not the owner of {} any more (PARTITION_NOT_OWNED): stopped \
                             them; now own {}",
                            display_partitions(partitions.iter()),
                            display_partitions(positions.keys()),
                        );
                    }
                    Err(e) => eprintln!("[{name}] commit failed: {e}"),
                }
            }
        }
    }

    println!("[{name}] shutting down: committing and leaving the group");
    let last: Vec<(TopicPartition, i64)> =
        positions.iter().map(|(tp, p)| (tp.clone(), *p)).collect();
    match member.commit_offsets(last.clone()).await {
        Ok(()) => own.committed(member.generation(), &last),
        Err(e) => eprintln!("[{name}] final commit failed: {e}"),
    }
    // Nothing is processed any more: the partitions are given up before the member leaves.
    own.line(
        SystemTime::now(),
        "stopped",
        member.generation(),
        positions.keys().map(|tp| (tp, None)),
    );
    member.close().await?;
    println!("[{name}] left");
    Ok(())
}

/// The `own ...` lines of `--ownership-log` (a no-op without it).
struct OwnershipLog(bool);

impl OwnershipLog {
    /// Prints `own <unix µs> <event> <epoch> <topic/partition[=position],...>`.
    fn line<'a>(
        &self,
        at: SystemTime,
        event: &str,
        epoch: i32,
        partitions: impl Iterator<Item = (&'a TopicPartition, Option<i64>)>,
    ) {
        if !self.0 {
            return;
        }
        let micros = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let list: Vec<String> = partitions
            .map(|(tp, position)| match position {
                Some(p) => format!("{}/{}={p}", tp.topic, tp.partition),
                None => format!("{}/{}", tp.topic, tp.partition),
            })
            .collect();
        let list = if list.is_empty() {
            "-".to_owned()
        } else {
            list.join(",")
        };
        println!("own {micros} {event} {epoch} {list}");
    }

    /// An acknowledged commit, stamped now (after the acknowledgement).
    fn committed(&self, epoch: i32, offsets: &[(TopicPartition, i64)]) {
        let at = SystemTime::now();
        self.line(
            at,
            "committed",
            epoch,
            offsets.iter().map(|(tp, offset)| (tp, Some(*offset))),
        );
    }
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
