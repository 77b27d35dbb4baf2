//! Out of file descriptors: the real binary, started with a hard open-files limit of 64 (so
//! raising the soft limit to the hard one cannot help), flooded with connections until its
//! accepts fail. It backs off instead of spinning, logs a few WARN lines rather than one per
//! failed accept, and serves again once the clients go. It also logs the limits it runs with.

mod support;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use muster_protocol::*;
use support::Conn;

/// Every line musterd writes to stderr, as it writes them.
type Log = Arc<Mutex<Vec<String>>>;

/// Starts musterd under `ulimit -n 64` (soft and hard) with one worker thread.
fn start_limited(data_dir: &std::path::Path) -> Result<(Child, SocketAddr, Log)> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_musterd"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
            "--workers",
            "1",
            "--data-dir",
        ])
        .arg(data_dir)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawn musterd")?;
    let stderr = child.stderr.take().context("stderr")?;
    let log: Log = Arc::default();
    let lines = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            lines.lock().expect("log lock").push(line);
        }
    });
    let started = Instant::now();
    loop {
        let addr = log.lock().expect("log lock").iter().find_map(|line| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix("local_addr="))
                .map(str::to_owned)
        });
        if let Some(addr) = addr {
            return Ok((child, addr.parse()?, log));
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "musterd did not report its address: {:?}",
                log.lock().expect("log lock")
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn lines_with(log: &Log, words: &[&str]) -> Vec<String> {
    log.lock()
        .expect("log lock")
        .iter()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .cloned()
        .collect()
}

#[test]
fn out_of_file_descriptors_backs_off_logs_little_and_recovers() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-emfile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut child, addr, log) = start_limited(&dir)?;
    let result = (|| -> Result<()> {
        let limits = lines_with(&log, &["open-files limit"]);
        ensure!(
            limits
                .iter()
                .any(|l| l.contains("soft=64") && l.contains("hard=64")),
            "the limits are logged: {limits:?}"
        );
        // Far more connections than descriptors: the kernel completes the handshakes (the
        // backlog is 1024), musterd's accepts start failing with EMFILE.
        let flood: Vec<TcpStream> = (0..150)
            .map(|_| TcpStream::connect(addr))
            .collect::<Result<_, _>>()?;
        let started = Instant::now();
        while lines_with(&log, &["WARN", "accept"]).is_empty() {
            ensure!(
                started.elapsed() < Duration::from_secs(10),
                "accepts never failed: {:?}",
                log.lock().expect("log lock")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Let it fail for a while: a loop without back-off would log thousands of lines now.
        std::thread::sleep(Duration::from_millis(500));
        drop(flood);
        // Once the clients are gone, the server is reachable again.
        let started = Instant::now();
        let mut conn = loop {
            match Conn::connect(addr) {
                Ok(conn) => break conn,
                Err(e) if started.elapsed() < Duration::from_secs(15) => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(e.context("musterd did not serve again")),
            }
        };
        match conn.call(Request::ListGroups(ListGroupsRequest { states: vec![] }))? {
            Response::ListGroups(l) => ensure!(l.error_code == 0, "{l:?}"),
            other => bail!("unexpected {other:?}"),
        }
        // A back-off episode logs a pair (failing, accepting again). While the flood holds the
        // descriptors, a loaded machine frees one now and then (a connection of the flood
        // closing), so a few episodes happen; a loop without back-off would log thousands of
        // lines in the half second. (Seen: 8 lines on a loaded CI run; 4 usually.)
        let warns = lines_with(&log, &["WARN"]);
        ensure!(
            warns.len() <= 12,
            "a few WARN lines, not one per failed accept: {} of them, e.g. {:?}",
            warns.len(),
            &warns[..warns.len().min(5)]
        );
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    result
}
