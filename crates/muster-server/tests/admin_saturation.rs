//! The admin listener with every slot held, against the real binary: a connection over
//! `admin_max_connections` waits unaccepted and is served once a slot frees, and the operator's
//! log says so once per episode (one WARN when the listener first has to wait, one INFO with
//! the count when a slot is free at once a quiet second later), not once per waiting
//! connection or per turn of the queue draining.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

const HELD: &str = "every admin connection slot is held";
const FREE: &str = "admin connection slots free again";

/// Lines of the log that contain `text`.
fn lines_with(log: &support::Log, text: &str) -> Vec<String> {
    log.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|l| l.contains(text))
        .cloned()
        .collect()
}

/// Waits until the log has a line with `text`.
fn wait_for_line(log: &support::Log, text: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(line) = lines_with(log, text).pop() {
            return Ok(line);
        }
        if Instant::now() > deadline {
            bail!("no log line with {text:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A connection holding a slot with half a request head.
fn holding(admin: SocketAddr) -> Result<TcpStream> {
    let mut stream = TcpStream::connect(admin)?;
    stream.write_all(b"GET /healthz HTTP/1.1\r\n")?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(stream)
}

/// Finishes the request on `stream` and reads the answer to the end.
fn finish(mut stream: TcpStream) -> Result<String> {
    stream.write_all(b"Host: x\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

#[test]
fn a_full_admin_listener_makes_connections_wait_and_logs_one_episode() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (mut child, _addr, log) = support::start_logged(
        dir.path(),
        &[
            "--admin-listen",
            "127.0.0.1:0",
            "--admin-max-connections",
            "2",
            "--admin-timeout-ms",
            "60000",
        ],
    )?;
    let result = (|| -> Result<()> {
        let up = wait_for_line(&log, "admin listener (metrics, health, dashboard) up")?;
        let admin: SocketAddr = up
            .split_whitespace()
            .find_map(|w| w.strip_prefix("local_addr="))
            .context("the admin listener's address")?
            .parse()?;
        let first = holding(admin)?;
        let second = holding(admin)?;
        // Over the cap: three more wait, unaccepted, with their requests sent.
        let waiting: Vec<TcpStream> = (0..3).map(|_| holding(admin)).collect::<Result<_>>()?;
        let held = wait_for_line(&log, HELD)?;
        assert!(held.contains("WARN") && held.contains("max=2"), "{held}");

        // Slots free one by one; each waiting connection is served in turn.
        for stream in [first, second].into_iter().chain(waiting) {
            let answer = finish(stream)?;
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        }
        // A connection finding a slot free at once, a quiet second after the last wait (the
        // drain above was full and free by turns), ends the episode.
        std::thread::sleep(Duration::from_millis(1_100));
        let answer = finish(holding(admin)?)?;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let free = wait_for_line(&log, FREE)?;
        assert!(free.contains("INFO"), "{free}");
        let waits: u64 = free
            .split_whitespace()
            .find_map(|w| w.strip_prefix("waits="))
            .context("the episode's count")?
            .parse()?;
        assert!(
            waits >= 3,
            "three connections waited at least once each: {free}"
        );
        // One line each way for the whole episode.
        assert_eq!(lines_with(&log, HELD).len(), 1);
        assert_eq!(lines_with(&log, FREE).len(), 1);
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}
