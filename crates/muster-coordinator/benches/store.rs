//! Load generator for [`RedbStore`]: startup load time and group-commit throughput.
//!
//! ```text
//! cargo bench -p muster-coordinator --bench store -- [load] [commit]
//!     [--groups N] [--offsets-per-group N] [--submitters 1,16,64] [--seconds S]
//!     [--batch N] [--task-threads N] [--dir PATH]
//! ```
//!
//! * `load`: fills a fresh store with `--groups` groups (two members each) and
//!   `--offsets-per-group` offsets each (defaults: 100 000 and 10, so 1 000 000 offsets),
//!   drops it, reopens it and times `open` and `load`. Target: load ≤ 2 s.
//! * `commit`: for each submitter count, that many threads each submit `PutOffsets` batches of
//!   `--batch` partitions (default 10) in a loop for `--seconds`, waiting for each to be
//!   durable before the next; reports partition offsets acknowledged durable per second and
//!   the p50/p99/max latency of a batch. Target: ≥ 50 000 offsets/s with p99 ≤ 10 ms. It runs
//!   twice: one OS thread per submitter, then the submitters as async tasks spread over
//!   `--task-threads` (default 2) current-thread runtimes, the way the server's group actors
//!   live on a few arbiters. A bare write + fdatasync in the same directory is timed first.
//!
//! With neither phase named, both run. Data goes to a temporary directory under the target
//! directory (a real disk, so fsync costs what it costs), or under `--dir`.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use muster_coordinator::engine::GroupState;
use muster_coordinator::storage::{
    CommittedOffset, GroupRecord, MemberRecord, Mutation, OffsetWrite, RedbStore, Store,
};
use muster_protocol::{AssignorMetadata, TopicPartitions};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

struct Options {
    load: bool,
    commit: bool,
    groups: usize,
    offsets_per_group: usize,
    submitters: Vec<usize>,
    seconds: f64,
    batch: usize,
    task_threads: usize,
    dir: Option<PathBuf>,
}

fn parse_options() -> Result<Options> {
    let mut options = Options {
        load: false,
        commit: false,
        groups: 100_000,
        offsets_per_group: 10,
        submitters: vec![1, 8, 32, 64, 128],
        seconds: 5.0,
        batch: 10,
        task_threads: 2,
        dir: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "load" => options.load = true,
            "commit" => options.commit = true,
            "--groups" => options.groups = value()?.parse()?,
            "--offsets-per-group" => options.offsets_per_group = value()?.parse()?,
            "--submitters" => {
                options.submitters = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<std::result::Result<_, _>>()?
            }
            "--seconds" => options.seconds = value()?.parse()?,
            "--batch" => options.batch = value()?.parse()?,
            "--task-threads" => options.task_threads = value()?.parse()?,
            "--dir" => options.dir = Some(value()?.into()),
            // cargo bench passes --bench; libtest-style filters are not ours.
            _ if arg.starts_with("--") => {}
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if !options.load && !options.commit {
        options.load = true;
        options.commit = true;
    }
    Ok(options)
}

fn main() -> Result<()> {
    let options = parse_options()?;
    let base = match &options.dir {
        Some(dir) => dir.clone(),
        None => PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
    };
    std::fs::create_dir_all(&base)?;
    if options.load {
        match &options.dir {
            // Kept, so that a later run (a fresh process, caches dropped) times a cold load.
            Some(dir) => load_phase(&options, &dir.join("load"))?,
            None => load_phase(&options, tempfile::tempdir_in(&base)?.path())?,
        }
    }
    if options.commit {
        let dir = tempfile::tempdir_in(&base)?;
        commit_phase(&options, dir.path())?;
    }
    Ok(())
}

fn block_on<F: std::future::Future>(runtime: &tokio::runtime::Runtime, future: F) -> F::Output {
    runtime.block_on(future)
}

fn member(group: usize, n: usize) -> MemberRecord {
    MemberRecord {
        member_id: format!("consumer-{group}-{n}-6f1c2a3e-9b7d-4e2f-8a51-0c3d2b1a9f8e"),
        group_instance_id: None,
        client_id: format!("consumer-{group}"),
        client_host: "/10.1.2.3".into(),
        session_timeout_ms: 45_000,
        rebalance_timeout_ms: 300_000,
        topics: vec!["orders".into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: Vec::new(),
        }],
        owned_partitions: vec![TopicPartitions {
            topic: "orders".into(),
            partitions: (0..5).map(|p| p + 5 * n as i32).collect(),
        }],
        assignment: vec![TopicPartitions {
            topic: "orders".into(),
            partitions: (0..5).map(|p| p + 5 * n as i32).collect(),
        }],
        assignment_user_data: Vec::new(),
        principal: Some(format!("service-{}", group % 16)),
    }
}

fn group_record(group: usize) -> GroupRecord {
    GroupRecord {
        group_id: format!("group-{group:06}"),
        state: GroupState::Stable,
        generation: 3,
        assignor: Some("range".into()),
        leader: Some(member(group, 0).member_id),
        members: vec![member(group, 0), member(group, 1)],
        state_since_ms: 1_700_000_000_000,
        created_by: Some(format!("service-{}", group % 16)),
        consumer: None,
        ownership: Vec::new(),
    }
}

fn offsets(count: usize, first_partition: usize, offset: i64) -> Vec<OffsetWrite> {
    (0..count)
        .map(|p| OffsetWrite {
            topic: "orders".into(),
            partition: (first_partition + p) as i32,
            committed: CommittedOffset {
                offset,
                metadata: None,
                commit_timestamp_ms: 1_700_000_000_000,
            },
        })
        .collect()
}

fn load_phase(options: &Options, dir: &Path) -> Result<()> {
    let total_offsets = options.groups * options.offsets_per_group;
    if dir.join(RedbStore::FILE_NAME).exists() {
        println!("load: reusing the store in {}", dir.display());
    } else {
        fill(options, dir)?;
    }
    for attempt in 1..=3 {
        let started = Instant::now();
        let store = RedbStore::open(dir)?;
        let opened = started.elapsed();
        let started = Instant::now();
        let state = store.load()?;
        let loaded = started.elapsed();
        let offsets: usize = state.offsets.iter().map(|(_, w)| w.len()).sum();
        if state.groups.len() != options.groups || offsets != total_offsets {
            return Err(format!(
                "loaded {} groups and {offsets} offsets, expected {} and {total_offsets}",
                state.groups.len(),
                options.groups
            )
            .into());
        }
        println!(
            "load: reopen #{attempt}: open {:.1} ms, load {:.3} s ({} groups, {} offsets){}",
            opened.as_secs_f64() * 1e3,
            loaded.as_secs_f64(),
            state.groups.len(),
            offsets,
            if loaded <= Duration::from_secs(2) {
                ""
            } else {
                "  ** over the 2 s target **"
            }
        );
    }
    Ok(())
}

fn fill(options: &Options, dir: &Path) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let total_offsets = options.groups * options.offsets_per_group;
    println!(
        "load: filling {} groups and {} offsets in {}",
        options.groups,
        total_offsets,
        dir.display()
    );
    let started = Instant::now();
    {
        let store = RedbStore::open(dir)?;
        const GROUPS_PER_BATCH: usize = 1_000;
        let mut pending = Vec::new();
        for first in (0..options.groups).step_by(GROUPS_PER_BATCH) {
            let mut batch = Vec::new();
            for g in first..(first + GROUPS_PER_BATCH).min(options.groups) {
                let record = group_record(g);
                batch.push(Mutation::PutOffsets {
                    group_id: record.group_id.clone(),
                    offsets: offsets(options.offsets_per_group, 0, g as i64),
                });
                batch.push(Mutation::PutGroup(record));
            }
            pending.push(store.apply(batch));
        }
        for durable in pending {
            block_on(&runtime, durable)?;
        }
        store.close()?;
    }
    let fill = started.elapsed();
    let size = std::fs::metadata(dir.join(RedbStore::FILE_NAME))?.len();
    println!(
        "load: filled in {:.2} s ({:.0} offsets/s), file {:.1} MiB",
        fill.as_secs_f64(),
        total_offsets as f64 / fill.as_secs_f64(),
        size as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

struct Figures {
    offsets_per_second: f64,
    batches: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

/// CPU time (user + system) used so far by this process, and by the store's writer thread,
/// from /proc (Linux); zeros elsewhere.
fn cpu_times() -> (Duration, Duration) {
    // Clock ticks are 100 Hz on every Linux this runs on.
    fn ticks(stat: &str) -> Option<u64> {
        // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    }
    let to_duration = |t: u64| Duration::from_millis(t * 10);
    let process = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| ticks(&s))
        .unwrap_or(0);
    let mut writer = 0;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim_end() == "muster-store-wr" {
                writer += std::fs::read_to_string(task.path().join("stat"))
                    .ok()
                    .and_then(|s| ticks(&s))
                    .unwrap_or(0);
            }
        }
    }
    (to_duration(process), to_duration(writer))
}

/// Percentile of sorted latencies (nearest rank).
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let index = (sorted.len().saturating_sub(1) as f64 * q).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

/// What one bare 4 KiB write + fdatasync costs in `dir`: the floor under any commit.
fn fsync_phase(dir: &Path) -> Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::File::create(dir.join("fsync-probe"))?;
    let page = [7u8; 4096];
    let mut latencies = Vec::new();
    for i in 0..300u64 {
        let started = Instant::now();
        file.seek(SeekFrom::Start((i % 64) * 4096))?;
        file.write_all(&page)?;
        file.sync_data()?;
        latencies.push(started.elapsed());
    }
    latencies.sort_unstable();
    println!(
        "fsync: 4 KiB write + fdatasync: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    Ok(())
}

fn commit_phase(options: &Options, dir: &Path) -> Result<()> {
    fsync_phase(dir)?;
    let store = Arc::new(RedbStore::open(dir)?);
    println!(
        "commit: batches of {} partition offsets, {:.0} s per run, in {}",
        options.batch,
        options.seconds,
        dir.display()
    );
    let passes = [
        ("one OS thread per submitter".to_string(), None),
        (
            format!(
                "submitters as async tasks on {} current-thread runtimes (as actix arbiters)",
                options.task_threads
            ),
            Some(options.task_threads),
        ),
    ];
    for (title, task_threads) in passes {
        println!("commit: {title}");
        println!(
            "{:>10} {:>12} {:>9} {:>8} {:>7} {:>7} {:>7} {:>8} {:>6} {:>6}",
            "submitters",
            "offsets/s",
            "batches",
            "b/round",
            "ms/rnd",
            "p50 ms",
            "p99 ms",
            "max ms",
            "cpu%",
            "wrtr%"
        );
        for &submitters in &options.submitters {
            let threads = task_threads.unwrap_or(submitters);
            let before = store.stats();
            let (cpu_before, writer_before) = cpu_times();
            let started = Instant::now();
            let f = run_submitters(&store, submitters, threads, options)?;
            let wall = started.elapsed().as_secs_f64();
            let (cpu_after, writer_after) = cpu_times();
            let cpu = cpu_after.saturating_sub(cpu_before).as_secs_f64() * 100.0 / wall;
            let writer_cpu =
                writer_after.saturating_sub(writer_before).as_secs_f64() * 100.0 / wall;
            let after = store.stats();
            let rounds = after.rounds.saturating_sub(before.rounds).max(1);
            let per_round = after.batches.saturating_sub(before.batches) as f64 / rounds as f64;
            let round_ms =
                after.busy.saturating_sub(before.busy).as_secs_f64() * 1e3 / rounds as f64;
            let verdict = if f.offsets_per_second >= 50_000.0 && f.p99 <= Duration::from_millis(10)
            {
                ""
            } else {
                "  (misses >= 50k/s with p99 <= 10 ms)"
            };
            println!(
                "{:>10} {:>12.0} {:>9} {:>8.1} {:>7.2} {:>7.2} {:>7.2} {:>8.2} {:>6.0} {:>6.0}{verdict}",
                submitters,
                f.offsets_per_second,
                f.batches,
                per_round,
                round_ms,
                f.p50.as_secs_f64() * 1e3,
                f.p99.as_secs_f64() * 1e3,
                f.max.as_secs_f64() * 1e3,
                cpu,
                writer_cpu,
            );
        }
    }
    store.close()?;
    Ok(())
}

/// One submitter: `batch` partition offsets of its own group per batch, each awaited before
/// the next, until the deadline. Returns each batch's latency.
async fn submit_loop(
    store: Arc<RedbStore>,
    group_id: String,
    batch: usize,
    deadline: Instant,
) -> std::result::Result<Vec<Duration>, String> {
    let mut latencies = Vec::new();
    let mut round = 0usize;
    while Instant::now() < deadline {
        // Walk 100 partitions of the group, `batch` at a time.
        let first = (round * batch) % 100;
        let started = Instant::now();
        let durable = store.apply(vec![Mutation::PutOffsets {
            group_id: group_id.clone(),
            offsets: offsets(batch, first, round as i64),
        }]);
        durable.await.map_err(|e| e.to_string())?;
        latencies.push(started.elapsed());
        round += 1;
    }
    Ok(latencies)
}

/// Runs `submitters` submitters spread over `threads` OS threads (each a current-thread
/// runtime, as an actix arbiter is), all starting together.
fn run_submitters(
    store: &Arc<RedbStore>,
    submitters: usize,
    threads: usize,
    options: &Options,
) -> Result<Figures> {
    let run_for = Duration::from_secs_f64(options.seconds);
    let batch = options.batch;
    let threads = threads.clamp(1, submitters.max(1));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let threads: Vec<_> = (0..threads)
        .map(|t| {
            let store = Arc::clone(store);
            let barrier = Arc::clone(&barrier);
            let mine: Vec<usize> = (t..submitters).step_by(threads).collect();
            std::thread::spawn(move || -> std::result::Result<Vec<Duration>, String> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .map_err(|e| e.to_string())?;
                barrier.wait();
                let deadline = Instant::now() + run_for;
                let loops = mine.into_iter().map(|s| {
                    let group_id = format!("bench-{submitters}-{s}");
                    submit_loop(Arc::clone(&store), group_id, batch, deadline)
                });
                let results = runtime.block_on(futures_util::future::join_all(loops));
                let mut latencies = Vec::new();
                for result in results {
                    latencies.extend(result?);
                }
                Ok(latencies)
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    let mut latencies = Vec::new();
    for thread in threads {
        let mine = thread
            .join()
            .map_err(|_| "a submitter panicked")?
            .map_err(|e| format!("a submitter failed: {e}"))?;
        latencies.extend(mine);
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    Ok(Figures {
        offsets_per_second: (latencies.len() * batch) as f64 / elapsed.as_secs_f64(),
        batches: latencies.len(),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        max: latencies.last().copied().unwrap_or_default(),
    })
}
