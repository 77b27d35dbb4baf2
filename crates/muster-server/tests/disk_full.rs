//! A full disk, for real: the real `musterd` on a size-limited tmpfs. Once the filesystem is
//! full, OffsetCommits fail with COORDINATOR_NOT_AVAILABLE (never NONE), `/readyz` is 503,
//! `muster_storage_errors_total` counts the failures, and a live group keeps heartbeating; a
//! rebalance that cannot be written is refused and rolled back. Once space is freed the store
//! recovers by itself (`/readyz` 200, commits succeed). After a SIGKILL and a restart every
//! offset acknowledged NONE is there, and the group's generation is no lower than any served.
//!
//! Needs root (mount); CI runs as root. Without it the test fails, saying why: never skipped.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use muster_protocol::*;
use support::Conn;

const OFFSETS_GROUP: &str = "disk-full-offsets";
const LIVE_GROUP: &str = "disk-full-live";
const TOPIC: &str = "events";
/// Partitions per commit: commit `n` writes partitions `n * PARTITIONS ..`, so that with
/// `METADATA` each commit adds ~64 KiB of new keys (rewriting the same keys would reuse the
/// pages the last commit freed and never need more room).
const PARTITIONS: i32 = 32;
const METADATA: usize = 2000;
const DEADLINE: Duration = Duration::from_secs(30);

/// A tmpfs mounted for the test, unmounted when dropped (also when the test fails).
struct Mount(PathBuf);

impl Mount {
    fn new(dir: &Path, size: &str) -> Result<Mount> {
        std::fs::create_dir_all(dir)?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .context("cannot run mount (this test needs root and mount(8))")?;
        if !out.status.success() {
            bail!(
                "mounting a tmpfs on {} failed ({}): this test needs root (CI runs as root): {}",
                dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(Mount(dir.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // Lazy: a server still dying may hold the file open.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The server process, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn start(data_dir: &Path) -> Result<Server> {
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let admin_flag = admin.to_string();
    let (child, addr) = support::start_with(
        data_dir,
        &[
            "--admin-listen",
            &admin_flag,
            "--initial-rebalance-delay-ms",
            "0",
        ],
    )?;
    Ok(Server { child, addr, admin })
}

/// (status, body) of a GET on the admin listener.
fn http_get(admin: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(admin)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status")?;
    let body = raw.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Ok((status, body))
}

fn metric(admin: SocketAddr, name: &str) -> Result<f64> {
    let (_, body) = http_get(admin, "/metrics")?;
    Ok(body
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0))
}

fn wait_until(what: &str, mut check: impl FnMut() -> Result<bool>) -> Result<()> {
    let start = Instant::now();
    while !check()? {
        ensure!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
    Ok(())
}

/// Commit `n`: offset `n` for partitions `n * PARTITIONS ..`; the commit's code (0 only if
/// every partition is 0).
fn commit(conn: &mut Conn, n: i64) -> Result<i16> {
    let first = i32::try_from(n)? * PARTITIONS;
    let response = conn.call(Request::OffsetCommit(OffsetCommitRequest {
        group_id: OFFSETS_GROUP.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            topic: TOPIC.into(),
            partitions: (first..first + PARTITIONS)
                .map(|partition| OffsetCommitPartition {
                    partition,
                    offset: n,
                    metadata: Some("m".repeat(METADATA)),
                })
                .collect(),
        }],
    }))?;
    let Response::OffsetCommit(r) = response else {
        bail!("unexpected answer {response:?}");
    };
    let codes: Vec<i16> = r
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.error_code)
        .collect();
    ensure!(
        codes.iter().all(|c| *c == codes[0]),
        "partitions of one commit answered differently: {codes:?}"
    );
    Ok(if r.error_code != 0 {
        r.error_code
    } else {
        codes[0]
    })
}

/// Every committed `(partition, offset)`.
fn fetch(addr: SocketAddr) -> Result<std::collections::HashMap<i32, i64>> {
    let mut conn = Conn::connect(addr)?;
    let Response::OffsetFetch(r) = conn.call(Request::OffsetFetch(OffsetFetchRequest {
        group_id: OFFSETS_GROUP.into(),
        topics: None,
    }))?
    else {
        bail!("unexpected OffsetFetch answer");
    };
    Ok(r.topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.partition, p.offset))
        .collect())
}

fn join(conn: &mut Conn, member_id: &str) -> Result<JoinGroupResponse> {
    match conn.call(Request::JoinGroup(JoinGroupRequest {
        group_id: LIVE_GROUP.into(),
        member_id: member_id.into(),
        group_instance_id: None,
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
        topics: vec![TOPIC.into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: vec![],
        }],
        owned_partitions: vec![],
        reason: None,
    }))? {
        Response::JoinGroup(r) => Ok(r),
        other => bail!("unexpected JoinGroup answer {other:?}"),
    }
}

fn heartbeat(conn: &mut Conn, generation: i32, member_id: &str) -> Result<i16> {
    match conn.call(Request::Heartbeat(HeartbeatRequest {
        group_id: LIVE_GROUP.into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
    }))? {
        Response::Heartbeat(r) => Ok(r.error_code),
        other => bail!("unexpected Heartbeat answer {other:?}"),
    }
}

fn generation(addr: SocketAddr) -> Result<i32> {
    let mut conn = Conn::connect(addr)?;
    match conn.call(Request::DescribeGroups(DescribeGroupsRequest {
        group_ids: vec![LIVE_GROUP.into()],
    }))? {
        Response::DescribeGroups(r) => Ok(r.groups.first().context("no group")?.generation_id),
        other => bail!("unexpected DescribeGroups answer {other:?}"),
    }
}

/// Writes zeros into `path` until the filesystem is full.
fn fill(path: &Path) -> Result<()> {
    let mut file = std::fs::File::create(path)?;
    let chunk = vec![0u8; 64 * 1024];
    loop {
        if let Err(e) = file.write_all(&chunk) {
            ensure!(
                e.raw_os_error() == Some(28),
                "filling the disk failed otherwise than ENOSPC: {e}"
            );
            // A partial chunk may be left: fill what is left a byte at a time.
            for _ in 0..chunk.len() {
                if file.write_all(&[0]).is_err() {
                    break;
                }
            }
            return Ok(());
        }
    }
}

#[test]
fn a_full_disk_fails_writes_clearly_and_recovers() -> Result<()> {
    let mount_dir = std::env::temp_dir().join(format!("muster-disk-full-{}", std::process::id()));
    let mount = Mount::new(&mount_dir, "8m")?;
    let data_dir = mount_dir.join("data");
    let filler = mount_dir.join("filler");

    let server = start(&data_dir)?;
    let addr = server.addr;
    wait_until("readyz 200", || {
        Ok(http_get(server.admin, "/readyz")?.0 == 200)
    })?;

    // A live group: one member, Stable at generation 1.
    let mut member = Conn::connect(addr)?;
    let first = join(&mut member, "")?;
    ensure!(
        first.error_code == ErrorCode::MemberIdRequired.code(),
        "{first:?}"
    );
    let member_id = first.member_id;
    let joined = join(&mut member, &member_id)?;
    ensure!(joined.error_code == 0, "join: {joined:?}");
    let served_generation = joined.generation_id;
    match member.call(Request::SyncGroup(SyncGroupRequest {
        group_id: LIVE_GROUP.into(),
        generation_id: served_generation,
        member_id: member_id.clone(),
        group_instance_id: None,
        assignor: None,
        assignments: vec![],
    }))? {
        Response::SyncGroup(r) if r.error_code == 0 => {}
        other => bail!("sync: {other:?}"),
    }

    // Commits acknowledged NONE while the disk has room.
    let mut committer = Conn::connect(addr)?;
    let mut acked = Vec::new();
    for n in 0..5 {
        ensure!(commit(&mut committer, n)? == 0, "commit {n} with room");
        acked.push(n);
    }

    // Fill the disk; commits now need pages there is no room for.
    fill(&filler)?;
    let mut n = 5;
    let started = Instant::now();
    let failed = loop {
        let code = commit(&mut committer, n)?;
        if code != 0 {
            break code;
        }
        acked.push(n);
        n += 1;
        ensure!(
            started.elapsed() < DEADLINE,
            "commits still succeed on a full disk (commit {n})"
        );
    };
    ensure!(
        failed == ErrorCode::CoordinatorNotAvailable.code(),
        "a commit on a full disk answered {failed}, not COORDINATOR_NOT_AVAILABLE"
    );
    // Still failing: refused at once, clearly.
    n += 1;
    ensure!(
        commit(&mut committer, n)? == ErrorCode::CoordinatorNotAvailable.code(),
        "a commit while storage recovers must fail"
    );
    let (status, body) = http_get(server.admin, "/readyz")?;
    ensure!(
        status == 503,
        "readyz {status} {body:?} while storage fails"
    );
    ensure!(
        metric(server.admin, "muster_storage_errors_total")? > 0.0,
        "muster_storage_errors_total counts the failure"
    );
    ensure!(
        metric(server.admin, "muster_storage_healthy")? == 0.0,
        "muster_storage_healthy is 0 while failing"
    );
    // The store keeps trying, and stays not ready while the disk is full (a probe that fits in
    // pages redb freed inside its file must not make it flap to ready).
    let errors_at_failure = metric(server.admin, "muster_storage_errors_total")?;
    wait_until("two failed reopen attempts", || {
        let (status, body) = http_get(server.admin, "/readyz")?;
        ensure!(
            status == 503,
            "readyz {status} {body:?} while the disk is still full"
        );
        Ok(metric(server.admin, "muster_storage_errors_total")? >= errors_at_failure + 2.0)
    })?;
    n += 1;
    ensure!(
        commit(&mut committer, n)? == ErrorCode::CoordinatorNotAvailable.code(),
        "a commit on a disk still full must fail"
    );
    // Heartbeats need no disk.
    for _ in 0..3 {
        let code = heartbeat(&mut member, served_generation, &member_id)?;
        ensure!(
            code == 0,
            "a live member's heartbeat answered {code} on a full disk"
        );
    }
    // A rebalance that cannot be written is refused, not served.
    let mut newcomer = Conn::connect(addr)?;
    let pending = join(&mut newcomer, "")?;
    ensure!(
        pending.error_code == ErrorCode::MemberIdRequired.code()
            || pending.error_code == ErrorCode::CoordinatorNotAvailable.code(),
        "newcomer: {pending:?}"
    );
    if pending.error_code == ErrorCode::MemberIdRequired.code() {
        let refused = join(&mut newcomer, &pending.member_id)?;
        ensure!(
            refused.error_code == ErrorCode::CoordinatorNotAvailable.code(),
            "a join whose rebalance cannot be written answered {refused:?}"
        );
    }

    // Free the space: the store recovers by itself.
    std::fs::remove_file(&filler)?;
    wait_until("readyz 200 after space is freed", || {
        Ok(http_get(server.admin, "/readyz")?.0 == 200)
    })?;
    ensure!(metric(server.admin, "muster_storage_healthy")? == 1.0);
    n += 1;
    wait_until("a commit to succeed after recovery", || {
        Ok(commit(&mut committer, n)? == 0)
    })?;
    acked.push(n);
    // The group rolled back to what is durable: the member goes on at the served generation.
    wait_until("the live member's heartbeat to succeed", || {
        Ok(heartbeat(&mut member, served_generation, &member_id)? == 0)
    })?;
    ensure!(
        generation(addr)? == served_generation,
        "the unwritten rebalance must have been rolled back"
    );

    // Crash and restart: everything acknowledged is there.
    drop(server);
    let server = start(&data_dir)?;
    let offsets = fetch(server.addr)?;
    for n in &acked {
        let first = i32::try_from(*n)? * PARTITIONS;
        for partition in first..first + PARTITIONS {
            ensure!(
                offsets.get(&partition) == Some(n),
                "partition {partition}: {:?} after restart, but {n} was acknowledged",
                offsets.get(&partition)
            );
        }
    }
    ensure!(
        generation(server.addr)? >= served_generation,
        "the group's durable generation is lower than one served"
    );
    drop(server);
    drop(mount);
    Ok(())
}
