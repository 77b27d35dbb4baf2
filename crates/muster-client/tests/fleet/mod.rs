//! A fleet of real processes for chaos tests: one `musterd` and many `worker` example
//! processes, each on `127.0.0.1:0` and in a scratch directory of its own; the workers' own
//! `--ownership-log` lines (wall-clock stamped, so comparable across processes) replayed to
//! check that no partition ever had two owners and that no acknowledged commit was lost.
//!
//! The binaries are `$MUSTER_BIN_DIR/{musterd,worker}` when that is set (CI builds them
//! first); otherwise this test's cargo builds them into this test's own target directory and
//! profile (a no-op when they are up to date), so a test never runs an old server or worker.
//! (`CARGO_BIN_EXE_*` names only the test's own package's binaries.)
//!
//! A worker's ownership of a partition is the interval from its `assigned` line (stamped on
//! receipt) to its `revoked`, `lost` or `stopped` line (stamped after its last commit, before
//! it lets go), or to the moment the test SIGKILLed it. Two intervals of one partition must
//! not touch: the later must start strictly after the earlier ends.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use muster_client::{Admin, Connection, ConnectionConfig, TopicPartition};
use muster_protocol::{
    ConsumerGroupDescribeRequest, DescribedConsumerGroup, DescribedGroup, Response, TopicPartitions,
};

mod pause;

/// Where the binaries are.
pub struct Bins {
    pub musterd: PathBuf,
    pub worker: PathBuf,
}

/// The binaries, built once per test process.
pub fn bins() -> &'static Bins {
    static BINS: OnceLock<Bins> = OnceLock::new();
    BINS.get_or_init(|| {
        if let Some(dir) = std::env::var_os("MUSTER_BIN_DIR") {
            let dir = PathBuf::from(dir);
            let worker = [dir.join("examples/worker"), dir.join("worker")]
                .into_iter()
                .find(|p| p.is_file())
                .expect("MUSTER_BIN_DIR holds the worker example (examples/worker or worker)");
            return Bins {
                musterd: dir.join("musterd"),
                worker,
            };
        }
        // This test runs as <target dir>/<profile dir>/deps/<name>-<hash>.
        let exe = std::env::current_exe().expect("the test knows its own path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test runs from <target>/<profile>/deps");
        let target_dir = profile_dir.parent().expect("a target directory");
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev",
            Some(other) => other,
        };
        let build = |args: &[&str]| {
            let output = Command::new(env!("CARGO"))
                .args(["build", "--locked"])
                .args(args)
                .args(["--profile", profile, "--target-dir"])
                .arg(target_dir)
                .env_clear()
                .envs(std::env::vars_os().filter(|(k, _)| !set_by_cargo_test(k)))
                .output()
                .expect("cargo runs");
            assert!(
                output.status.success(),
                "cargo build {args:?} failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        build(&["-p", "muster-server", "--bin", "musterd"]);
        build(&["-p", "muster-client", "--example", "worker"]);
        Bins {
            musterd: profile_dir.join("musterd"),
            worker: profile_dir.join("examples/worker"),
        }
    })
}

/// Whether cargo set this variable for the test process (not for a build): passed on to the
/// cargo below it would make build scripts that watch it (ring's watches
/// `CARGO_MANIFEST_DIR`) rerun, and rebuild half the workspace on every test run.
fn set_by_cargo_test(key: &std::ffi::OsStr) -> bool {
    let key = key.to_string_lossy();
    key == "OUT_DIR"
        || [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
        ]
        .iter()
        .any(|prefix| key.starts_with(prefix))
}

/// The test's environment without `MUSTER_*` (settings of `musterd` and of the worker, which
/// the flags given here must not compete with) and `RUST_LOG`.
fn outside_muster() -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os().filter(|(k, _)| {
        let k = k.to_string_lossy();
        !k.starts_with("MUSTER_") && k != "RUST_LOG"
    })
}

/// Microseconds since the Unix epoch: the clock every process on the machine shares.
pub fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("the clock is after 1970");
    u64::try_from(since.as_micros()).expect("fits until the year 586524")
}

/// A scratch directory, removed when the test passes and kept (and named) when it fails.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("muster-{test}-{}-{}", std::process::id(), now_us()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("logs kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `musterd` on `127.0.0.1:0`, its log in a file; killed when dropped.
pub struct Musterd {
    child: Child,
    pub addr: String,
    pub log: PathBuf,
}

impl Musterd {
    /// Starts `musterd` with `flags` (besides the listeners, data directory and log level).
    pub fn start(scratch: &Path, flags: &[&str]) -> Musterd {
        let log = scratch.join("musterd.log");
        let child = Command::new(&bins().musterd)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "off"])
            .arg("--data-dir")
            .arg(scratch.join("data"))
            .args(["--log-level", "info"])
            .args(flags)
            .env_clear()
            .envs(outside_muster())
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("server log file"))
            .spawn()
            .expect("musterd starts");
        let mut server = Musterd {
            child,
            addr: String::new(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        server.addr = loop {
            let text = std::fs::read_to_string(&server.log).unwrap_or_default();
            // The client listener's line (the admin listener, off here, has one of its own).
            let addr = text
                .lines()
                .filter(|l| l.contains("musterd listening"))
                .flat_map(str::split_whitespace)
                .find_map(|w| w.strip_prefix("local_addr="));
            if let Some(addr) = addr {
                break addr.to_owned();
            }
            if let Some(status) = server.child.try_wait().expect("try_wait") {
                panic!("musterd exited ({status}) before listening:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "musterd did not report its address:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        server
    }

    pub async fn connect(&self, client_id: &str) -> Connection {
        let config = ConnectionConfig::new(self.addr.clone())
            .client_id(client_id)
            .request_timeout(Duration::from_secs(10));
        Connection::connect(config).await.expect("connects")
    }

    /// When the server removed each member it expired (session timeout, or revocation past
    /// its rebalance timeout), by member id, from its log.
    pub fn removals(&self) -> BTreeMap<String, u64> {
        let text = std::fs::read_to_string(&self.log).expect("server log");
        let mut removed = BTreeMap::new();
        for line in text.lines() {
            if !(line.contains("session expired")
                || line.contains("past its rebalance timeout; removed"))
            {
                continue;
            }
            let at = line.split_whitespace().next().and_then(parse_rfc3339_us);
            let member = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("member_id="));
            if let (Some(at), Some(member)) = (at, member) {
                removed.entry(member.to_owned()).or_insert(at);
            }
        }
        removed
    }
}

impl Drop for Musterd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `2026-12-04T18:44:53.815213Z` (tracing's UTC timestamps) as µs since the Unix epoch.
pub fn parse_rfc3339_us(stamp: &str) -> Option<u64> {
    let stamp = stamp.strip_suffix('Z')?;
    let (date, time) = stamp.split_once('T')?;
    let mut d = date.split('-').map(str::parse::<i64>);
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(str::parse::<i64>);
    let (h, min, s) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    let micros: i64 = format!("{frac:0<6}").get(..6)?.parse().ok()?;
    // Days from 1970-01-01 to y-m-d (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + min * 60 + s;
    u64::try_from(secs * 1_000_000 + micros).ok()
}

/// What a worker did, by one `own` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Assigned,
    Revoked,
    Lost,
    Committed,
    Stopped,
}

#[derive(Debug, Clone)]
pub struct OwnLine {
    pub at_us: u64,
    pub kind: Kind,
    pub epoch: i32,
    /// With the start position (`assigned`) or the offset (`committed`).
    pub partitions: Vec<(TopicPartition, Option<i64>)>,
}

/// Parses `own <µs> <event> <epoch> <topic/partition[=n],...|->`.
pub fn parse_own_line(line: &str) -> Option<OwnLine> {
    let mut words = line.strip_prefix("own ")?.split(' ');
    let at_us = words.next()?.parse().ok()?;
    let kind = match words.next()? {
        "assigned" => Kind::Assigned,
        "revoked" => Kind::Revoked,
        "lost" => Kind::Lost,
        "committed" => Kind::Committed,
        "stopped" => Kind::Stopped,
        _ => return None,
    };
    let epoch = words.next()?.parse().ok()?;
    let list = words.next()?;
    let mut partitions = Vec::new();
    if list != "-" {
        for item in list.split(',') {
            let (tp, n) = match item.split_once('=') {
                Some((tp, n)) => (tp, Some(n.parse().ok()?)),
                None => (item, None),
            };
            let (topic, partition) = tp.rsplit_once('/')?;
            partitions.push((TopicPartition::new(topic, partition.parse().ok()?), n));
        }
    }
    Some(OwnLine {
        at_us,
        kind,
        epoch,
        partitions,
    })
}

/// How a worker process ended.
#[derive(Debug, Clone, Copy)]
pub enum End {
    /// SIGKILLed by the test: its ownership ends at this instant (µs).
    Killed(u64),
    /// Exited after SIGTERM.
    Stopped(ExitStatus),
}

pub struct Worker {
    pub name: String,
    pub protocol: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
    pub end: Option<End>,
}

impl Worker {
    /// Its complete `own` lines so far, in the order it printed them.
    pub fn own_lines(&self) -> Vec<OwnLine> {
        let text = std::fs::read_to_string(&self.stdout).unwrap_or_default();
        // A line still being written has no newline yet.
        let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
        complete.lines().filter_map(parse_own_line).collect()
    }

    /// Its stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// The group's expectations: one topic shared by every worker.
pub struct Fleet {
    pub scratch: Scratch,
    pub server: Musterd,
    pub group: String,
    pub topic: String,
    pub partitions: i32,
    /// Every worker ever started, in start order.
    pub workers: Vec<Worker>,
    /// Flags every worker gets (timeouts, commit interval).
    pub worker_flags: Vec<String>,
}

impl Fleet {
    pub fn new(test: &str, server_flags: &[&str], topic: &str, partitions: i32) -> Fleet {
        let scratch = Scratch::new(test);
        let server = Musterd::start(&scratch.0, server_flags);
        Fleet {
            scratch,
            server,
            group: test.to_owned(),
            topic: topic.to_owned(),
            partitions,
            workers: Vec::new(),
            worker_flags: Vec::new(),
        }
    }

    pub fn all_partitions(&self) -> BTreeSet<TopicPartition> {
        (0..self.partitions)
            .map(|p| TopicPartition::new(&self.topic, p))
            .collect()
    }

    pub async fn admin(&self) -> Admin {
        Admin::new(self.server.connect("test-admin").await)
    }

    /// Starts a worker process: `protocol` is `classic` or `consumer`; `extra` its own flags.
    pub fn start_worker(&mut self, name: &str, protocol: &str, extra: &[&str]) {
        assert!(
            self.workers.iter().all(|w| w.name != name),
            "worker names are unique: {name}"
        );
        let stdout = self.scratch.0.join(format!("{name}.out"));
        let stderr = self.scratch.0.join(format!("{name}.err"));
        let child = Command::new(&bins().worker)
            .args(["--server", &self.server.addr, "--group", &self.group])
            .args(["--topics", &self.topic, "--name", name])
            .args(["--partitions", &self.partitions.to_string()])
            .args(["--group-protocol", protocol, "--ownership-log"])
            .args(&self.worker_flags)
            .args(extra)
            .env_clear()
            .envs(outside_muster())
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdout(File::create(&stdout).expect("worker stdout file"))
            .stderr(File::create(&stderr).expect("worker stderr file"))
            .spawn()
            .expect("worker starts");
        self.workers.push(Worker {
            name: name.to_owned(),
            protocol: protocol.to_owned(),
            child,
            stdout,
            stderr,
            end: None,
        });
    }

    fn worker_mut(&mut self, name: &str) -> &mut Worker {
        self.workers
            .iter_mut()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    pub fn worker(&self, name: &str) -> &Worker {
        self.workers
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    /// The workers running now.
    pub fn live(&self) -> Vec<&Worker> {
        self.workers.iter().filter(|w| w.end.is_none()).collect()
    }

    /// SIGKILL: the worker stops at once, saying nothing (no commit, no leave). Returns the
    /// instant after it is dead, where its ownership ends.
    pub fn kill(&mut self, name: &str) -> u64 {
        let worker = self.worker_mut(name);
        assert!(worker.end.is_none(), "{name} is running");
        worker.child.kill().expect("SIGKILL");
        worker.child.wait().expect("reaped");
        let at = now_us();
        worker.end = Some(End::Killed(at));
        at
    }

    /// SIGTERM: the worker commits, gives its partitions up and leaves; it must exit 0.
    pub async fn stop(&mut self, name: &str) {
        self.stop_many(&[name.to_owned()]).await;
    }

    /// SIGTERM to every running worker at once; they must all exit 0.
    pub async fn stop_all(&mut self) {
        let names: Vec<String> = self.live().iter().map(|w| w.name.clone()).collect();
        self.stop_many(&names).await;
    }

    async fn stop_many(&mut self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let pids: Vec<String> = names
            .iter()
            .map(|name| {
                let worker = self.worker(name);
                assert!(worker.end.is_none(), "{name} is running");
                worker.child.id().to_string()
            })
            .collect();
        let status = Command::new("kill")
            .arg("-TERM")
            .args(&pids)
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "kill -TERM {pids:?}");
        let deadline = Instant::now() + Duration::from_secs(20);
        for name in names {
            let worker = self.worker_mut(name);
            let status = loop {
                if let Some(status) = worker.child.try_wait().expect("try_wait") {
                    break status;
                }
                assert!(Instant::now() < deadline, "{name} did not exit on SIGTERM");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            worker.end = Some(End::Stopped(status));
            assert!(
                status.success(),
                "{name} exited {status}:\n{}",
                worker.stderr_text()
            );
        }
    }

    /// Fails if a running worker exited on its own.
    pub fn assert_alive(&mut self) {
        for worker in self.workers.iter_mut().filter(|w| w.end.is_none()) {
            if let Some(status) = worker.child.try_wait().expect("try_wait") {
                panic!(
                    "worker {} exited on its own ({status}):\n{}",
                    worker.name,
                    worker.stderr_text()
                );
            }
        }
    }

    /// What each running worker owns now, by its own log.
    pub fn owned_by_logs(&self) -> BTreeMap<String, BTreeSet<TopicPartition>> {
        self.live()
            .into_iter()
            .map(|w| {
                let mut owned = BTreeSet::new();
                for line in w.own_lines() {
                    let tps = line.partitions.into_iter().map(|(tp, _)| tp);
                    match line.kind {
                        Kind::Assigned => owned.extend(tps),
                        Kind::Revoked | Kind::Lost | Kind::Stopped => {
                            for tp in tps {
                                owned.remove(&tp);
                            }
                        }
                        Kind::Committed => {}
                    }
                }
                (w.name.clone(), owned)
            })
            .collect()
    }

    /// DescribeGroups of the group.
    pub async fn describe(&self, admin: &Admin) -> DescribedGroup {
        admin
            .describe_group(&self.group)
            .await
            .expect("DescribeGroups")
    }

    /// ConsumerGroupDescribe of the group (GROUP_ID_NOT_FOUND for a classic group).
    pub async fn describe_consumer(&self, admin: &Admin) -> DescribedConsumerGroup {
        let request = ConsumerGroupDescribeRequest {
            group_ids: vec![self.group.clone()],
        };
        match admin.connection().send(request).await {
            Ok(Response::ConsumerGroupDescribe(mut answer)) if answer.groups.len() == 1 => {
                answer.groups.remove(0)
            }
            other => panic!("ConsumerGroupDescribe: {other:?}"),
        }
    }

    /// Waits until the group is Stable with exactly the running workers as members (by client
    /// id), their assignments cover the topic once, and every worker's own log says it owns
    /// what the server says. Returns the description.
    pub async fn wait_settled(&mut self, admin: &Admin, patience: Duration) -> DescribedGroup {
        let deadline = Instant::now() + patience;
        let all = self.all_partitions();
        loop {
            self.assert_alive();
            let group = self.describe(admin).await;
            let why = self.unsettled(&group, &all);
            match why {
                None => return group,
                Some(why) => {
                    assert!(
                        Instant::now() < deadline,
                        "group {} not settled within {patience:?}: {why}\nstate {} generation {} members {}",
                        self.group,
                        group.state,
                        group.generation_id,
                        group.members.len()
                    );
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Why the group is not settled, or `None`.
    fn unsettled(&self, group: &DescribedGroup, all: &BTreeSet<TopicPartition>) -> Option<String> {
        let live: BTreeSet<String> = self.live().iter().map(|w| w.name.clone()).collect();
        let members: BTreeSet<String> = group.members.iter().map(|m| m.client_id.clone()).collect();
        let gone: Vec<String> = members
            .difference(&live)
            .map(|name| {
                match self
                    .workers
                    .iter()
                    .find(|w| &w.name == name)
                    .and_then(|w| w.end)
                {
                    Some(End::Killed(at)) => format!("{name} (killed at {at})"),
                    Some(End::Stopped(_)) => format!("{name} (stopped)"),
                    None => name.clone(),
                }
            })
            .collect();
        let missing: Vec<&String> = live.difference(&members).collect();
        if group.state != "Stable" || !gone.is_empty() || !missing.is_empty() {
            return Some(format!(
                "state {}; members no longer running: {gone:?}; running workers not members: {missing:?}",
                group.state
            ));
        }
        if group.members.len() != live.len() {
            return Some(format!(
                "{} members for {} workers",
                group.members.len(),
                live.len()
            ));
        }
        let mut seen = BTreeSet::new();
        for member in &group.members {
            for tp in flatten(&member.assignment) {
                if !seen.insert(tp.clone()) {
                    return Some(format!("{tp} assigned twice by the server"));
                }
            }
        }
        if &seen != all {
            return Some(format!(
                "the server assigns {} of {} partitions",
                seen.len(),
                all.len()
            ));
        }
        let logs = self.owned_by_logs();
        for member in &group.members {
            let assigned: BTreeSet<TopicPartition> = flatten(&member.assignment).collect();
            if logs.get(&member.client_id) != Some(&assigned) {
                return Some(format!(
                    "{} owns {} partitions by its log, {} by the server",
                    member.client_id,
                    logs.get(&member.client_id).map_or(0, BTreeSet::len),
                    assigned.len()
                ));
            }
        }
        None
    }

    /// Waits until every running worker logged an acknowledged commit after `since_us`.
    pub async fn wait_commits_after(&mut self, since_us: u64, patience: Duration) {
        let deadline = Instant::now() + patience;
        loop {
            self.assert_alive();
            let behind: Vec<String> = self
                .live()
                .iter()
                .filter(|w| {
                    !w.own_lines()
                        .iter()
                        .any(|l| l.kind == Kind::Committed && l.at_us > since_us)
                })
                .map(|w| w.name.clone())
                .collect();
            if behind.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no commit since {since_us} from {behind:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every worker's ownership intervals and acknowledged commits, from its log (all workers
    /// must have ended). Fails on a log that does not add up (a partition assigned twice to one
    /// worker, given up without being owned, or still owned after a clean stop).
    pub fn history(&self) -> History {
        let mut history = History::default();
        for worker in &self.workers {
            let end = worker
                .end
                .unwrap_or_else(|| panic!("{} still running", worker.name));
            let mut owned: BTreeMap<TopicPartition, (u64, i32)> = BTreeMap::new();
            for line in worker.own_lines() {
                match line.kind {
                    Kind::Assigned => {
                        for (tp, start) in line.partitions {
                            assert!(
                                !owned.contains_key(&tp),
                                "{}: {tp} assigned while already owned",
                                worker.name
                            );
                            history.starts.push(Start {
                                worker: worker.name.clone(),
                                tp: tp.clone(),
                                at_us: line.at_us,
                                position: start.expect("assigned lines carry positions"),
                            });
                            owned.insert(tp, (line.at_us, line.epoch));
                        }
                    }
                    Kind::Revoked | Kind::Lost | Kind::Stopped => {
                        if line.kind == Kind::Lost {
                            history.lost.push((worker.name.clone(), line.clone()));
                        }
                        for (tp, _) in line.partitions {
                            let (from, epoch) = owned.remove(&tp).unwrap_or_else(|| {
                                panic!("{}: {tp} given up but not owned", worker.name)
                            });
                            history.intervals.push(Interval {
                                worker: worker.name.clone(),
                                tp,
                                from_us: from,
                                to_us: line.at_us,
                                epoch,
                                killed: false,
                            });
                        }
                    }
                    Kind::Committed => {
                        for (tp, offset) in line.partitions {
                            history.commits.push(Commit {
                                worker: worker.name.clone(),
                                tp,
                                at_us: line.at_us,
                                offset: offset.expect("committed lines carry offsets"),
                            });
                        }
                    }
                }
            }
            match end {
                End::Killed(at) => {
                    for (tp, (from, epoch)) in owned {
                        history.intervals.push(Interval {
                            worker: worker.name.clone(),
                            tp,
                            from_us: from,
                            to_us: at,
                            epoch,
                            killed: true,
                        });
                    }
                }
                End::Stopped(_) => assert!(
                    owned.is_empty(),
                    "{} stopped still owning {:?}",
                    worker.name,
                    owned.keys().collect::<Vec<_>>()
                ),
            }
        }
        history
    }
}

impl Fleet {
    /// Fails if a worker was told its partitions were lost (fenced: it could not commit its
    /// work on them before they moved), with what its stderr says.
    pub fn assert_nothing_lost(&self, history: &History) {
        if history.lost.is_empty() {
            return;
        }
        let mut report = String::new();
        for (worker, line) in &history.lost {
            let partitions: Vec<String> = line
                .partitions
                .iter()
                .map(|(tp, _)| tp.to_string())
                .collect();
            let _ = writeln!(
                report,
                "  {worker} at {} (generation/epoch {}): lost {}; its stderr: {:?}",
                line.at_us,
                line.epoch,
                partitions.join(","),
                self.worker(worker)
                    .stderr_text()
                    .lines()
                    .take(3)
                    .collect::<Vec<_>>()
            );
        }
        panic!(
            "{} times partitions were lost:\n{report}",
            history.lost.len()
        );
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for worker in self.workers.iter_mut().filter(|w| w.end.is_none()) {
            let _ = worker.child.kill();
            let _ = worker.child.wait();
        }
    }
}

pub fn flatten(parts: &[TopicPartitions]) -> impl Iterator<Item = TopicPartition> + '_ {
    parts.iter().flat_map(|t| {
        t.partitions
            .iter()
            .map(|p| TopicPartition::new(&t.topic, *p))
    })
}

/// A worker owned `tp` from `from_us` to `to_us`.
#[derive(Debug, Clone)]
pub struct Interval {
    pub worker: String,
    pub tp: TopicPartition,
    pub from_us: u64,
    pub to_us: u64,
    pub epoch: i32,
    /// Ended by SIGKILL.
    pub killed: bool,
}

/// A worker started on `tp` at `position` (what it fetched as committed).
#[derive(Debug, Clone)]
pub struct Start {
    pub worker: String,
    pub tp: TopicPartition,
    pub at_us: u64,
    pub position: i64,
}

/// The server acknowledged `offset` for `tp` to `worker` by `at_us`.
#[derive(Debug, Clone)]
pub struct Commit {
    pub worker: String,
    pub tp: TopicPartition,
    pub at_us: u64,
    pub offset: i64,
}

#[derive(Debug, Default)]
pub struct History {
    pub intervals: Vec<Interval>,
    pub starts: Vec<Start>,
    pub commits: Vec<Commit>,
    pub lost: Vec<(String, OwnLine)>,
}

impl History {
    /// Every pair of ownership intervals of one partition that overlap or touch.
    pub fn overlaps(&self) -> Vec<(Interval, Interval)> {
        let mut by_tp: BTreeMap<&TopicPartition, Vec<&Interval>> = BTreeMap::new();
        for interval in &self.intervals {
            by_tp.entry(&interval.tp).or_default().push(interval);
        }
        let mut overlaps = Vec::new();
        for intervals in by_tp.values_mut() {
            intervals.sort_by_key(|i| (i.from_us, i.to_us));
            for (i, a) in intervals.iter().enumerate() {
                for b in &intervals[i + 1..] {
                    if b.from_us <= a.to_us {
                        overlaps.push(((*a).clone(), (*b).clone()));
                    }
                }
            }
        }
        overlaps
    }

    /// Fails, listing them, if a partition ever had two owners at once.
    pub fn assert_single_ownership(&self) {
        let overlaps = self.overlaps();
        if overlaps.is_empty() {
            return;
        }
        let mut report = format!("{} overlapping ownerships:\n", overlaps.len());
        for (a, b) in overlaps.iter().take(20) {
            let _ = writeln!(
                report,
                "  {}: {} owned it (epoch {}) {}..{}{}, {} from {} (epoch {}), {} µs before {} let go",
                a.tp,
                a.worker,
                a.epoch,
                a.from_us,
                a.to_us,
                if a.killed { " (killed)" } else { "" },
                b.worker,
                b.from_us,
                b.epoch,
                a.to_us - b.from_us,
                a.worker,
            );
        }
        panic!("{report}");
    }

    /// Fails if an acknowledged commit was lost: a worker that took a partition over started
    /// below an offset acknowledged before, or the group's final offset is below the last one
    /// acknowledged. Every partition must have had an acknowledged commit.
    pub fn assert_no_commit_lost(
        &self,
        all: &BTreeSet<TopicPartition>,
        fetched: &BTreeMap<TopicPartition, i64>,
    ) {
        let mut problems = Vec::new();
        let mut best: BTreeMap<&TopicPartition, &Commit> = BTreeMap::new();
        for commit in &self.commits {
            let entry = best.entry(&commit.tp).or_insert(commit);
            if commit.offset > entry.offset {
                *entry = commit;
            }
        }
        for tp in all {
            match (best.get(tp), fetched.get(tp)) {
                (None, _) => problems.push(format!("{tp}: no acknowledged commit at all")),
                (Some(c), None) => problems.push(format!(
                    "{tp}: nothing committed at the end, {} acknowledged {} at {}",
                    c.worker, c.offset, c.at_us
                )),
                (Some(c), Some(&end)) if end < c.offset => problems.push(format!(
                    "{tp}: {end} committed at the end, {} acknowledged {} at {}",
                    c.worker, c.offset, c.at_us
                )),
                _ => {}
            }
        }
        for start in &self.starts {
            let before = self
                .commits
                .iter()
                .filter(|c| c.tp == start.tp && c.at_us < start.at_us)
                .max_by_key(|c| c.offset);
            if let Some(c) = before {
                if start.position < c.offset {
                    problems.push(format!(
                        "{}: {} started at {} (at {}) below {} acknowledged to {} at {}",
                        start.tp,
                        start.worker,
                        start.position,
                        start.at_us,
                        c.offset,
                        c.worker,
                        c.at_us
                    ));
                }
            }
        }
        assert!(
            problems.is_empty(),
            "{} lost commits:\n  {}",
            problems.len(),
            problems
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n  ")
        );
    }

    /// How many times a worker took a partition over at a committed position above 0 (the
    /// handovers in which a lost commit would show).
    pub fn handovers_with_commits(&self) -> usize {
        self.starts.iter().filter(|s| s.position > 0).count()
    }
}

/// The group's committed offsets, from the server.
pub async fn fetch_offsets(admin: &Admin, group: &str) -> BTreeMap<TopicPartition, i64> {
    admin
        .fetch_offsets(group, None)
        .await
        .expect("OffsetFetch")
        .into_iter()
        .map(|(tp, o)| (tp, o.offset))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(worker: &str, from_us: u64, to_us: u64) -> Interval {
        Interval {
            worker: worker.to_owned(),
            tp: TopicPartition::new("t", 0),
            from_us,
            to_us,
            epoch: 1,
            killed: false,
        }
    }

    fn commit(worker: &str, at_us: u64, offset: i64) -> Commit {
        Commit {
            worker: worker.to_owned(),
            tp: TopicPartition::new("t", 0),
            at_us,
            offset,
        }
    }

    /// The checks can fail: overlapping and touching ownerships are caught, a clean handover
    /// is not.
    #[test]
    fn overlapping_or_touching_ownerships_are_caught() {
        let clean = History {
            intervals: vec![interval("b", 21, 30), interval("a", 10, 20)],
            ..History::default()
        };
        assert!(clean.overlaps().is_empty());
        let touching = History {
            intervals: vec![interval("a", 10, 20), interval("b", 20, 30)],
            ..History::default()
        };
        assert_eq!(touching.overlaps().len(), 1);
        let nested = History {
            intervals: vec![interval("a", 10, 40), interval("b", 21, 30)],
            ..History::default()
        };
        assert_eq!(nested.overlaps().len(), 1);
        assert!(std::panic::catch_unwind(|| nested.assert_single_ownership()).is_err());
    }

    #[test]
    fn a_lost_commit_is_caught_at_the_end_and_at_a_handover() {
        let all: BTreeSet<TopicPartition> = [TopicPartition::new("t", 0)].into();
        let history = History {
            starts: vec![Start {
                worker: "b".into(),
                tp: TopicPartition::new("t", 0),
                at_us: 30,
                position: 7,
            }],
            commits: vec![commit("a", 10, 5), commit("a", 20, 7), commit("b", 40, 9)],
            ..History::default()
        };
        let fetched = |offset| BTreeMap::from([(TopicPartition::new("t", 0), offset)]);
        history.assert_no_commit_lost(&all, &fetched(9));
        assert!(
            std::panic::catch_unwind(|| history.assert_no_commit_lost(&all, &fetched(8))).is_err()
        );
        let restarted_low = History {
            starts: vec![Start {
                position: 6,
                ..history.starts[0].clone()
            }],
            commits: history.commits.clone(),
            ..History::default()
        };
        assert!(
            std::panic::catch_unwind(|| restarted_low.assert_no_commit_lost(&all, &fetched(9)))
                .is_err()
        );
        let never_committed = History::default();
        assert!(std::panic::catch_unwind(
            || never_committed.assert_no_commit_lost(&all, &fetched(9))
        )
        .is_err());
    }

    #[test]
    fn own_lines_parse() {
        let line = parse_own_line("own 17 assigned 3 jobs/0=5,jobs/12=0").unwrap();
        assert_eq!((line.at_us, line.kind, line.epoch), (17, Kind::Assigned, 3));
        assert_eq!(
            line.partitions,
            vec![
                (TopicPartition::new("jobs", 0), Some(5)),
                (TopicPartition::new("jobs", 12), Some(0))
            ]
        );
        let line = parse_own_line("own 18 revoked 4 -").unwrap();
        assert!(line.partitions.is_empty());
        assert!(parse_own_line("[w1] committed 3 partitions").is_none());
    }

    #[test]
    fn rfc3339_stamps_parse() {
        assert_eq!(
            super::parse_rfc3339_us("1970-01-01T00:00:00.000001Z"),
            Some(1)
        );
        assert_eq!(
            super::parse_rfc3339_us("2026-12-04T18:44:53.815213Z"),
            Some(1_796_409_893_815_213)
        );
        assert_eq!(
            super::parse_rfc3339_us("2024-02-29T23:59:59.5Z"),
            Some(1_709_251_199_500_000)
        );
    }
}
