//! `muster-bench`: load generator for `musterd`. See the crate docs and `docs/benchmarks.md`.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use muster_bench::attack::Attack;
use muster_bench::scenario::{self, Common, Report};
use muster_bench::target::{locate_musterd, Target, MUSTERD_ENV};
use muster_bench::transport::{self, Tls, Transport};
use muster_client::args::ConnectArgs;

/// Benchmarks for musterd.
#[derive(Debug, Parser)]
#[command(name = "muster-bench", version, about)]
struct Cli {
    /// Address of a running musterd.
    #[arg(long, global = true, default_value = "127.0.0.1:7450")]
    server: String,

    /// Start a musterd child process instead, on 127.0.0.1:0 with a temporary data dir,
    /// --admin-listen off, --initial-rebalance-delay-ms 0 and --min-session-timeout-ms 100;
    /// it is killed at the end.
    #[arg(long, global = true)]
    spawn: bool,

    /// The musterd binary for --spawn (default: the musterd next to this executable).
    #[arg(long, global = true, env = MUSTERD_ENV, value_name = "PATH")]
    musterd: Option<PathBuf>,

    /// With --spawn: write the server's log to this file.
    // Not `requires = "spawn"`: clap checks that inside the subcommand, where a global flag
    // given before it does not count, so the pairing is checked in `main`.
    #[arg(long, global = true, value_name = "FILE")]
    musterd_log: Option<PathBuf>,

    /// Process id of the server (for `idle`; --spawn knows its child's).
    #[arg(long, global = true)]
    pid: Option<u32>,

    /// Print the figures as JSON (one document) instead of text.
    #[arg(long, global = true)]
    json: bool,

    /// `--token` and `--tls-*`, as the CLI and the worker example take them.
    #[command(flatten)]
    connect: ConnectArgs,

    /// Worker threads of the client's runtime (default: one per core).
    #[arg(long, global = true)]
    client_threads: Option<usize>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Group formation (last join → last sync) and settling after a member leaves.
    Rebalance {
        /// Members per group.
        #[arg(long)]
        members: usize,
        #[arg(long, default_value_t = 1)]
        groups: usize,
        #[arg(long, default_value_t = 5)]
        repeats: usize,
        /// Connections the members share (default: one per 50 members).
        #[arg(long)]
        connections: Option<usize>,
        /// Partitions of the topic (default: one per member of a group).
        #[arg(long)]
        partitions: Option<i32>,
        /// Heartbeat interval of Stable members (default: total members / 10 ms, within
        /// 100..=3000 ms).
        #[arg(long)]
        heartbeat_ms: Option<u64>,
        #[arg(long, default_value_t = 30_000)]
        session_timeout_ms: u32,
        #[arg(long, default_value_t = 300_000)]
        rebalance_timeout_ms: u32,
        /// Skip the leave measurement.
        #[arg(long)]
        no_leave: bool,
        /// Give up on a phase after this many seconds.
        #[arg(long, default_value_t = 180)]
        settle_limit_s: u64,
        /// Also make this many Empty groups (one committed offset each) first; with --spawn
        /// the server gets a --max-groups that holds them.
        #[arg(long, default_value_t = 0)]
        idle_groups: usize,
    },
    /// Pipelined heartbeats of Stable members: heartbeats/s and latency.
    Heartbeat {
        #[command(flatten)]
        load: LoadArgs,
        /// Members per group (one member per connection).
        #[arg(long, default_value_t = 1)]
        group_size: usize,
        /// Also run the same load against the built-in echo server and print the ratio.
        #[arg(long)]
        compare_echo: bool,
    },
    /// The heartbeat load against a built-in echo server: the machine's limit.
    Echo {
        #[command(flatten)]
        load: LoadArgs,
    },
    /// The heartbeat load against an open server, with a token, over TLS and over mTLS, each
    /// on a fresh server, in one run (needs --spawn): what authentication and TLS cost.
    Security {
        #[command(flatten)]
        load: LoadArgs,
        /// Members per group (one member per connection).
        #[arg(long, default_value_t = 1)]
        group_size: usize,
        /// Times the four phases run, interleaved; each phase's figure is its median.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
    },
    /// Durable offset commits (generation -1, Empty groups): commits/s and latency.
    Commit {
        #[arg(long, default_value_t = 16)]
        connections: usize,
        /// Partitions per commit request.
        #[arg(long, default_value_t = 10)]
        partitions: i32,
        /// Requests in flight per connection.
        #[arg(long, default_value_t = 1)]
        pipeline: usize,
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
        #[arg(long, default_value_t = 1.0)]
        warmup: f64,
        /// Issue #22: run the load against a fresh server with offset history off
        /// (--offset-history-entries 0) and one with it on (100 entries, the default), in
        /// turn, --rounds times, and give the ratio on / off (needs --spawn).
        #[arg(long)]
        compare_history: bool,
        /// Times off and on run, alternating; each one's figures are medians.
        #[arg(long, default_value_t = 3, requires = "compare_history")]
        rounds: usize,
        /// Then fill a fresh server of each configuration with this many partitions, each
        /// committed --fill-commits times, and read its RSS and data directory: history's
        /// memory and disk per partition (0: no fill).
        #[arg(long, default_value_t = 0, requires = "compare_history")]
        fill_partitions: usize,
        /// Commits per partition in the fill (past 100 the oldest entries are dropped, as in
        /// a steady state).
        #[arg(long, default_value_t = 110, requires = "compare_history")]
        fill_commits: usize,
        /// Pause before each RSS reading of the fill, in milliseconds.
        #[arg(long, default_value_t = 2_000, requires = "compare_history")]
        pause_ms: u64,
    },
    /// Server memory per idle member and per group (needs --pid or --spawn).
    Idle {
        #[arg(long)]
        groups: usize,
        /// Members per group.
        #[arg(long)]
        members: usize,
        /// Connections the members share (default: one per 200 members).
        #[arg(long)]
        connections: Option<usize>,
        /// Pause before each RSS reading, in milliseconds.
        #[arg(long, default_value_t = 2_000)]
        pause_ms: u64,
        /// Groups formed or grown at a time (each batch settles before the next).
        #[arg(long, default_value_t = 100)]
        batch: usize,
        /// Seconds to keep the members after the last reading (to inspect the server).
        #[arg(long, default_value_t = 0)]
        hold_s: u64,
    },
    /// Issue #23: server memory per idle (Empty) group loaded with its actor and loaded parked,
    /// on the same data, alternating (needs --spawn).
    Parked {
        #[arg(long, default_value_t = 10_000)]
        groups: usize,
        /// Restarts in each configuration, alternating.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Pause before each RSS reading, in milliseconds.
        #[arg(long, default_value_t = 2_000)]
        pause_ms: u64,
    },
    /// Lateness of session expiry (needs a server with a low --min-session-timeout-ms).
    Expiry {
        #[arg(long, default_value_t = 3)]
        members: usize,
        #[arg(long, default_value_t = 1_000)]
        session_timeout_ms: u32,
        /// Heartbeat interval (default: a tenth of the session timeout).
        #[arg(long)]
        heartbeat_ms: Option<u64>,
        #[arg(long, default_value_t = 5)]
        repeats: usize,
    },
    /// One member joins a formed group, then one that was there leaves: the classic and the
    /// consumer protocol (KIP-848) side by side in one run (issue #21). With --spawn the server
    /// gets --consumer-heartbeat-interval-ms HEARTBEAT_MS.
    JoinOne {
        /// Members of the formed group.
        #[arg(long, default_value_t = 1_000)]
        members: usize,
        /// Partitions of the one topic (made with CreateTopics).
        #[arg(long, default_value_t = 10_000)]
        partitions: i32,
        /// classic, consumer or both (classic first in each repeat).
        #[arg(long, default_value = "both")]
        protocol: String,
        #[arg(long, default_value_t = 3)]
        repeats: usize,
        /// Connections the members share (default: one per 50 members).
        #[arg(long)]
        connections: Option<usize>,
        /// Heartbeat interval of both protocols' members: the classic members' own, and with
        /// --spawn the server's --consumer-heartbeat-interval-ms (against --server, consumer
        /// members use whatever interval that server returns).
        #[arg(long, default_value_t = 500)]
        heartbeat_ms: u64,
        #[arg(long, default_value_t = 30_000)]
        session_timeout_ms: u32,
        #[arg(long, default_value_t = 300_000)]
        rebalance_timeout_ms: u32,
        /// The consumer members' server assignor (uniform or range).
        #[arg(long, default_value = "uniform")]
        assignor: String,
        /// Milliseconds of steady heartbeats measured before the join.
        #[arg(long, default_value_t = 2_000)]
        baseline_ms: u64,
        /// Skip the leave.
        #[arg(long)]
        no_leave: bool,
        /// Give up on a phase after this many seconds.
        #[arg(long, default_value_t = 180)]
        settle_limit_s: u64,
    },
    /// One member joins a formed classic group: last JoinGroup sent → last SyncGroup answered
    /// (issue #23). --compare (needs --spawn): a redb server, a memory-store server and the
    /// etcd-watch baseline, alternating --rounds times, with the ratios.
    OneJoin {
        /// Members of the formed group (and, with --compare, etcd's watchers).
        #[arg(long, default_value_t = 1_000)]
        members: usize,
        /// Measured joins per server (after one that warms up).
        #[arg(long, default_value_t = 5)]
        repeats: usize,
        /// Connections the members (and watchers) share (default: one per 50).
        #[arg(long)]
        connections: Option<usize>,
        /// Heartbeat interval of Stable members (default: members / 10 ms, within
        /// 100..=3000 ms).
        #[arg(long)]
        heartbeat_ms: Option<u64>,
        #[arg(long, default_value_t = 30_000)]
        session_timeout_ms: u32,
        #[arg(long, default_value_t = 300_000)]
        rebalance_timeout_ms: u32,
        /// Give up on a phase after this many seconds.
        #[arg(long, default_value_t = 180)]
        settle_limit_s: u64,
        /// Redb store, memory store and etcd-watch in turn, on fresh servers (needs --spawn).
        #[arg(long)]
        compare: bool,
        /// Rounds of --compare.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// With --compare: the etcd to use (default: start one, $MUSTER_ETCD_BIN or etcd on
        /// PATH).
        #[arg(long, value_name = "URL")]
        etcd: Option<String>,
    },
    /// The rebalance baseline: a bare etcd telling N watchers about one put (put sent → the
    /// last watcher notified), repeated.
    EtcdWatch {
        /// Watches open on the key.
        #[arg(long, default_value_t = 1_000)]
        watchers: usize,
        /// Connections they share (default: one per 50).
        #[arg(long)]
        connections: Option<usize>,
        #[arg(long, default_value_t = 10)]
        repeats: usize,
        /// The etcd to use (default: start one, $MUSTER_ETCD_BIN or etcd on PATH).
        #[arg(long, value_name = "URL")]
        etcd: Option<String>,
    },
    /// One hostile client's attacks, one phase each, against victims heartbeating in other
    /// groups: their latency, the server's memory and whether it survives. With --spawn the
    /// server also gets its admin listener (on 127.0.0.1:0), which slowloris attacks.
    Hostile {
        /// Victim groups.
        #[arg(long, default_value_t = 50)]
        groups: usize,
        /// Members per victim group.
        #[arg(long, default_value_t = 4)]
        members: usize,
        /// Each victim member's heartbeat interval.
        #[arg(long, default_value_t = 100)]
        victim_heartbeat_ms: u64,
        /// Connections the victims' measured heartbeats share.
        #[arg(long, default_value_t = 8)]
        victim_connections: usize,
        /// Seconds of the baseline phase (no attack).
        #[arg(long, default_value_t = 5.0)]
        baseline: f64,
        /// Seconds of each attack's phase.
        #[arg(long, default_value_t = 5.0)]
        phase: f64,
        /// Seconds of the recovery phase (no attack).
        #[arg(long, default_value_t = 5.0)]
        recovery: f64,
        /// Attacks to run, by name or number, comma-separated (default: all but tls-flood, in
        /// this order): garbage, big-commit, repeats, non-reader, join-flood, huge-ids, churn,
        /// big-topics, conn-flood, slowloris, amplify, simulate, non-reader-more, slow-read,
        /// tls-flood. With --tls the default is tls-flood alone.
        #[arg(long, value_delimiter = ',')]
        attacks: Vec<String>,
        /// With --spawn: the server speaks TLS on both listeners (a certificate made for the
        /// run); victims and the polite member connect over TLS. For tls-flood: the other
        /// attacks send plaintext on purpose, which a TLS listener refuses at its handshake.
        #[arg(long)]
        tls: bool,
        /// Connections one attack may use (the connection floods excepted).
        #[arg(long, default_value_t = 4)]
        attack_connections: usize,
        /// Connections the connection flood opens at most.
        #[arg(long, default_value_t = 10_000)]
        flood_connections: usize,
        /// Connections slowloris holds on the admin port.
        #[arg(long, default_value_t = 1_000)]
        admin_connections: usize,
        /// Requests (or connections) one attack sends at most.
        #[arg(long, default_value_t = 1_000_000)]
        max_requests: u64,
        /// The server's frame limit (its max_frame_bytes).
        #[arg(long, default_value_t = muster_protocol::DEFAULT_MAX_FRAME_BYTES as usize)]
        max_frame: usize,
        /// With --spawn: kill the server when its RSS passes this many MiB (the attack's
        /// outcome is then "killed by watchdog"), and restart it for the next phase.
        #[arg(long, default_value_t = 4_096)]
        rss_limit_mib: u64,
        /// With --spawn: a fresh server (and fresh victims) for every attack, so that no
        /// attack meets what an earlier one left behind.
        #[arg(long)]
        fresh_server: bool,
    },
}

#[derive(Debug, clap::Args)]
struct LoadArgs {
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 16)]
    pipeline: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Worker threads of the echo server (default: one per core).
    #[arg(long)]
    echo_threads: Option<usize>,
}

impl LoadArgs {
    fn options(&self, group_size: usize, compare_echo: bool) -> scenario::heartbeat::Options {
        scenario::heartbeat::Options {
            connections: self.connections,
            pipeline: self.pipeline,
            duration: Duration::from_secs_f64(self.duration),
            warmup: Duration::from_secs_f64(self.warmup),
            group_size,
            compare_echo,
            echo_threads: self.echo_threads.unwrap_or_else(cores),
        }
    }
}

/// The transport the flags ask for (the name to verify defaults to the host of --server).
fn transport_from(cli: &Cli) -> Result<Transport> {
    let tls = match cli.connect.tls()? {
        Some(tls) => Some(Tls::new(&tls, &cli.server)?),
        None => None,
    };
    Ok(Transport {
        token: cli.connect.token.clone(),
        tls,
    })
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if cli.spawn && cli.pid.is_some() {
        anyhow::bail!("--pid names a running server; --spawn starts one: give one of them");
    }
    if !cli.spawn && cli.musterd_log.is_some() {
        anyhow::bail!("--musterd-log needs --spawn (it is the spawned server's log)");
    }
    transport::set(transport_from(&cli)?);
    let mut target = if cli.spawn {
        let musterd = locate_musterd(cli.musterd.as_deref())?;
        let log = cli.musterd_log.as_deref();
        match &cli.command {
            Command::Hostile { .. } => Target::spawn_with_admin(&musterd, log)?,
            // Room for the idle groups besides every repeat's fresh groups (the default cap is
            // 50 000 groups), and for every member's pending id at once (20 000).
            Command::Rebalance {
                members,
                groups,
                repeats,
                idle_groups,
                ..
            } if *idle_groups > 0 => Target::spawn_with(
                &musterd,
                log,
                vec![
                    "--max-groups".into(),
                    (groups * repeats + idle_groups + 1_000).to_string().into(),
                    "--max-pending-member-ids".into(),
                    (members * groups + 1_000).max(20_000).to_string().into(),
                ],
            )?,
            Command::JoinOne { heartbeat_ms, .. } => Target::spawn_with(
                &musterd,
                log,
                vec![
                    "--consumer-heartbeat-interval-ms".into(),
                    heartbeat_ms.to_string().into(),
                ],
            )?,
            _ => Target::spawn(&musterd, log)?,
        }
    } else {
        Target::remote(&cli.server, cli.pid)?
    };
    let run_id = format!(
        "bench-{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() % 100_000_000)
            .unwrap_or(0)
    );
    let common = Common {
        addr: target.addr,
        run_id,
        pid: target.pid,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cli.client_threads.unwrap_or_else(cores).max(1))
        .thread_name("bench-client")
        .enable_all()
        .build()
        .context("cannot start the client runtime")?;
    let report = runtime.block_on(run(&cli.command, &common, &mut target));
    runtime.shutdown_timeout(Duration::from_secs(1));
    target.stop();
    let report = report?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report.json)?);
    } else {
        print!("{}", report.text);
    }
    Ok(())
}

async fn run(command: &Command, common: &Common, target: &mut Target) -> Result<Report> {
    match command {
        Command::Rebalance {
            members,
            groups,
            repeats,
            connections,
            partitions,
            heartbeat_ms,
            session_timeout_ms,
            rebalance_timeout_ms,
            no_leave,
            settle_limit_s,
            idle_groups,
        } => {
            let opts = scenario::rebalance::Options {
                members: *members,
                groups: *groups,
                repeats: *repeats,
                connections: *connections,
                partitions: *partitions,
                heartbeat_ms: *heartbeat_ms,
                session_timeout_ms: *session_timeout_ms,
                rebalance_timeout_ms: *rebalance_timeout_ms,
                no_leave: *no_leave,
                settle_limit: Duration::from_secs(*settle_limit_s),
                idle_groups: *idle_groups,
            };
            scenario::rebalance::run(common, &opts).await
        }
        Command::Heartbeat {
            load,
            group_size,
            compare_echo,
        } => scenario::heartbeat::run(common, &load.options(*group_size, *compare_echo)).await,
        Command::Security {
            load,
            group_size,
            rounds,
        } => {
            let opts = scenario::security::Options {
                load: load.options(*group_size, false),
                rounds: *rounds,
            };
            scenario::security::run(common, target, &opts).await
        }
        Command::Echo { load } => {
            scenario::heartbeat::run_echo(common, &load.options(1, true)).await
        }
        Command::Commit {
            connections,
            partitions,
            pipeline,
            duration,
            warmup,
            compare_history,
            rounds,
            fill_partitions,
            fill_commits,
            pause_ms,
        } => {
            let load = scenario::commit::Options {
                connections: *connections,
                partitions: *partitions,
                pipeline: *pipeline,
                duration: Duration::from_secs_f64(*duration),
                warmup: Duration::from_secs_f64(*warmup),
            };
            if *compare_history {
                let opts = scenario::history::Options {
                    load,
                    rounds: *rounds,
                    fill_partitions: *fill_partitions,
                    fill_commits: *fill_commits,
                    pause: Duration::from_millis(*pause_ms),
                };
                scenario::history::run(common, target, &opts).await
            } else {
                scenario::commit::run(common, &load).await
            }
        }
        Command::Idle {
            groups,
            members,
            connections,
            pause_ms,
            batch,
            hold_s,
        } => {
            let opts = scenario::idle::Options {
                groups: *groups,
                members: *members,
                connections: *connections,
                pause: Duration::from_millis(*pause_ms),
                batch: *batch,
                hold: Duration::from_secs(*hold_s),
            };
            scenario::idle::run(common, &opts).await
        }
        Command::Parked {
            groups,
            rounds,
            pause_ms,
        } => {
            let opts = scenario::parked::Options {
                groups: *groups,
                rounds: *rounds,
                pause: Duration::from_millis(*pause_ms),
            };
            scenario::parked::run(common, target, &opts).await
        }
        Command::Expiry {
            members,
            session_timeout_ms,
            heartbeat_ms,
            repeats,
        } => {
            let opts = scenario::expiry::Options {
                members: *members,
                session_timeout_ms: *session_timeout_ms,
                heartbeat_ms: *heartbeat_ms,
                repeats: *repeats,
            };
            scenario::expiry::run(common, &opts).await
        }
        Command::JoinOne {
            members,
            partitions,
            protocol,
            repeats,
            connections,
            heartbeat_ms,
            session_timeout_ms,
            rebalance_timeout_ms,
            assignor,
            baseline_ms,
            no_leave,
            settle_limit_s,
        } => {
            let opts = scenario::join_one::Options {
                members: *members,
                partitions: *partitions,
                protocols: scenario::join_one::Protocol::parse_list(protocol)?,
                repeats: *repeats,
                connections: *connections,
                heartbeat: Duration::from_millis(*heartbeat_ms),
                session_timeout_ms: *session_timeout_ms,
                rebalance_timeout_ms: *rebalance_timeout_ms,
                assignor: assignor.clone(),
                baseline: Duration::from_millis(*baseline_ms),
                no_leave: *no_leave,
                settle_limit: Duration::from_secs(*settle_limit_s),
            };
            scenario::join_one::run(common, &opts).await
        }
        Command::OneJoin {
            members,
            repeats,
            connections,
            heartbeat_ms,
            session_timeout_ms,
            rebalance_timeout_ms,
            settle_limit_s,
            compare,
            rounds,
            etcd,
        } => {
            let opts = scenario::one_join::Options {
                members: *members,
                repeats: *repeats,
                connections: *connections,
                heartbeat_ms: *heartbeat_ms,
                session_timeout_ms: *session_timeout_ms,
                rebalance_timeout_ms: *rebalance_timeout_ms,
                settle_limit: Duration::from_secs(*settle_limit_s),
                compare: *compare,
                rounds: *rounds,
                etcd: etcd.clone(),
            };
            scenario::one_join::run(common, target, &opts).await
        }
        Command::EtcdWatch {
            watchers,
            connections,
            repeats,
            etcd,
        } => scenario::etcd_watch::run(etcd.as_deref(), *watchers, *connections, *repeats).await,
        Command::Hostile {
            groups,
            members,
            victim_heartbeat_ms,
            victim_connections,
            baseline,
            phase,
            recovery,
            attacks,
            attack_connections,
            flood_connections,
            admin_connections,
            max_requests,
            max_frame,
            rss_limit_mib,
            fresh_server,
            tls,
        } => {
            // Held until the run ends: the server reads its certificate from these files.
            let material = if *tls {
                if !target.is_spawned() {
                    anyhow::bail!("--tls needs --spawn (the run makes the server's certificate)");
                }
                let material = scenario::security::Material::make()?;
                target.restart_with(material.tls_flags())?;
                transport::set(transport::Transport {
                    token: transport::token(),
                    tls: Some(material.tls(false)?),
                });
                Some(material)
            } else {
                None
            };
            let attacks = if attacks.is_empty() {
                if *tls {
                    vec![Attack::TlsFlood]
                } else {
                    Attack::defaults()
                }
            } else {
                attacks
                    .iter()
                    .map(|a| Attack::parse(a))
                    .collect::<Result<Vec<_>>>()?
            };
            let opts = scenario::hostile::Options {
                groups: *groups,
                members: *members,
                victim_heartbeat: Duration::from_millis(*victim_heartbeat_ms),
                victim_connections: *victim_connections,
                baseline: Duration::from_secs_f64(*baseline),
                phase: Duration::from_secs_f64(*phase),
                recovery: Duration::from_secs_f64(*recovery),
                attacks,
                attack_connections: *attack_connections,
                flood_connections: *flood_connections,
                admin_connections: *admin_connections,
                max_requests: *max_requests,
                max_frame: *max_frame,
                rss_limit: rss_limit_mib.saturating_mul(1 << 20),
                fresh_server: *fresh_server,
            };
            let report = scenario::hostile::run(common, &opts, target).await;
            drop(material);
            report
        }
    }
}
