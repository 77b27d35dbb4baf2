//! `muster-chaos`: `run` a chaos run (docs/reliability.md, "Chaos harness"), `check` a
//! finished run's directory again, or be one `worker` (the runner starts these).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use muster_chaos::checker::{check, Report};
use muster_chaos::clock::{ms, now_ns};
use muster_chaos::history::{read_histories, RunRecord};
use muster_chaos::run::{run, RunConfig};
use muster_chaos::worker::{self, WorkerArgs};
use muster_client::GroupProtocol;

#[derive(Debug, Parser)]
#[command(about = "Chaos harness of Muster's cluster mode, with a history checker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run etcd, nodes and workers under the nemesis, then check the histories.
    Run {
        /// How long the nemesis runs: `90s`, `30m`, `1h`.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        duration: Duration,
        /// The schedule's seed [default: from the clock; printed].
        #[arg(long)]
        seed: Option<u64>,
        /// classic, consumer, or both (one group of each, side by side).
        #[arg(long, default_value = "both")]
        protocol: String,
        /// Workers in all, split between the groups.
        #[arg(long, default_value_t = 24)]
        workers: usize,
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        #[arg(long, default_value_t = 36)]
        partitions: i32,
        /// Session timeout of the members (both protocols), in ms.
        #[arg(long, default_value_t = 10_000)]
        session_ms: u64,
        #[arg(long, default_value_t = 5)]
        lease_ttl_s: u64,
        #[arg(long, default_value_t = 300)]
        commit_ms: u64,
        /// Directory for the histories, logs and record [default: a new one under /tmp].
        #[arg(long)]
        out: Option<PathBuf>,
        /// The musterd binary [default: next to this program].
        #[arg(long)]
        musterd: Option<PathBuf>,
    },
    /// Check a finished run's directory again.
    Check {
        dir: PathBuf,
        #[arg(long, default_value_t = 10_000)]
        session_ms: u64,
        #[arg(long, default_value_t = 5)]
        lease_ttl_s: u64,
    },
    /// One worker process (started by `run`).
    Worker {
        #[arg(long)]
        group: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        incarnation: u32,
        #[arg(long)]
        protocol: GroupProtocol,
        #[arg(long, value_delimiter = ',')]
        bootstrap: Vec<String>,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        history: PathBuf,
        #[arg(long)]
        session_ms: u64,
        #[arg(long)]
        commit_ms: u64,
        #[arg(long)]
        seed: u64,
    },
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (number, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = number.parse().map_err(|_| format!("not a duration: {s}"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("not a duration: {s} (use 90s, 30m or 1h)")),
    };
    Ok(Duration::from_secs(secs))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Worker {
            group,
            name,
            incarnation,
            protocol,
            bootstrap,
            topic,
            history,
            session_ms,
            commit_ms,
            seed,
        } => {
            let args = WorkerArgs {
                group,
                name,
                incarnation,
                protocol,
                bootstrap,
                topic,
                history,
                session: Duration::from_millis(session_ms),
                commit_interval: Duration::from_millis(commit_ms),
                seed,
            };
            // One thread: the worker relies on its state not changing between two reads
            // that have no await between them (worker::commit).
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("worker: no runtime: {e}");
                    return ExitCode::from(2);
                }
            };
            match runtime.block_on(worker::run(args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("worker: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
        command => match main_run(command) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("muster-chaos: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}

/// `run` or `check`; `Ok(false)` when the checker found violations.
fn main_run(command: Command) -> Result<bool> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match command {
        Command::Run {
            duration,
            seed,
            protocol,
            workers,
            nodes,
            partitions,
            session_ms,
            lease_ttl_s,
            commit_ms,
            out,
            musterd,
        } => {
            let protocols = match protocol.as_str() {
                "classic" => vec![GroupProtocol::Classic],
                "consumer" => vec![GroupProtocol::Consumer],
                "both" => vec![GroupProtocol::Classic, GroupProtocol::Consumer],
                other => bail!("--protocol {other}: classic, consumer or both"),
            };
            let seed = seed.unwrap_or_else(|| now_ns() % 1_000_000);
            let out = out.unwrap_or_else(|| {
                std::env::temp_dir().join(format!("muster-chaos-{seed}-{}", std::process::id()))
            });
            let cfg = RunConfig {
                duration,
                seed,
                protocols,
                workers,
                nodes,
                partitions,
                out: out.clone(),
                musterd,
                session: Duration::from_millis(session_ms),
                lease_ttl_s,
                commit_interval: Duration::from_millis(commit_ms),
            };
            let (record, report) = runtime.block_on(run(&cfg))?;
            Ok(summarize(&record, &report, &out)?)
        }
        Command::Check {
            dir,
            session_ms,
            lease_ttl_s,
        } => {
            let record = RunRecord::read(&dir.join("run.json"))?;
            let histories = read_histories(&dir.join("workers"))?;
            let cfg = RunConfig {
                duration: Duration::ZERO,
                seed: record.seed,
                protocols: Vec::new(),
                workers: 0,
                nodes: 0,
                partitions: record.partitions,
                out: dir.clone(),
                musterd: None,
                session: Duration::from_millis(session_ms),
                lease_ttl_s,
                commit_interval: Duration::ZERO,
            };
            let report = check(&record, &histories, &cfg.check_config());
            Ok(summarize(&record, &report, &dir)?)
        }
        Command::Worker { .. } => bail!("a worker runs on its own runtime"),
    }
}

/// Prints (and writes to `report.txt`) what was injected and checked; true if no violation.
fn summarize(record: &RunRecord, report: &Report, dir: &Path) -> Result<bool> {
    let mut faults: BTreeMap<String, usize> = BTreeMap::new();
    for f in &record.faults {
        let class = f.target.split(':').next().unwrap_or("?");
        *faults.entry(format!("{} {class}", f.kind)).or_insert(0) += 1;
    }
    let quorum = record.faults.iter().filter(|f| f.quorum_loss).count();
    let mut text = String::new();
    text.push_str(&format!(
        "seed {}; groups {:?}; {} partitions\nfaults: {} in all ({} etcd quorum losses)\n",
        record.seed,
        record.groups,
        record.partitions,
        record.faults.len(),
        quorum
    ));
    for (kind, n) in &faults {
        text.push_str(&format!("  {kind}: {n}\n"));
    }
    for s in &record.settled {
        text.push_str(&format!(
            "settle {}: {}\n",
            s.group,
            s.after_ns
                .map_or("not within the bound".to_owned(), |a| format!(
                    "{:.0} ms",
                    ms(a)
                ))
        ));
    }
    text.push_str(&format!(
        "checked: {} histories, {} events, {} acknowledged partition offsets, {} failed \
         commits, {} partitions refused PARTITION_NOT_OWNED, {} tenures, {} overlaps ({} excused \
         by faults)\n",
        report.histories,
        report.events,
        report.acked_offsets,
        report.commits_failed,
        report.not_owned,
        report.tenures,
        report.overlaps,
        report.overlaps_excused
    ));
    text.push_str(&format!("violations: {}\n", report.violations.len()));
    for (rule, n) in report.counts() {
        text.push_str(&format!("  {rule}: {n}\n"));
    }
    if let Some(first) = report.violations.iter().map(|v| v.t).min() {
        text.push_str(&format!(
            "first violation: {:.1} s after the nemesis started\n",
            ms(first.saturating_sub(record.nemesis_started)) / 1000.0
        ));
    }
    let mut shown: Vec<_> = report.violations.iter().collect();
    shown.sort_by_key(|v| v.t);
    for v in shown.into_iter().take(30) {
        text.push_str(&format!("  [{}] {}: {}\n", v.rule, v.group, v.detail));
    }
    print!("{text}");
    std::fs::write(dir.join("report.txt"), &text)
        .with_context(|| format!("write {}", dir.join("report.txt").display()))?;
    Ok(report.violations.is_empty())
}
