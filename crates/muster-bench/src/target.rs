//! The server under test: a separately started `musterd` (`--server ADDR`), or one started in
//! this process (`--spawn`) on a temporary data directory with `initial_rebalance_delay_ms: 0`.
//! Also reads a process's resident memory for `idle`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _, Result};
use muster_coordinator::storage::RedbStore;
use muster_server::{ServerOptions, ServerThread};

/// Where the load goes.
pub struct Target {
    pub addr: SocketAddr,
    /// The server's process id, when known (for `idle`).
    pub pid: Option<u32>,
    /// Whether the server runs inside this process (it then shares the CPU with the client
    /// threads, and its memory cannot be told apart from the client's).
    pub in_process: bool,
    // Kept for the server's lifetime; the directory goes after the server stops.
    server: Option<ServerThread>,
    _data: Option<tempfile::TempDir>,
}

impl Target {
    /// Resolves `--server` or starts an in-process server (`spawn`).
    pub fn resolve(server: &str, spawn: bool, pid: Option<u32>) -> Result<Target> {
        if !spawn {
            let addr = server
                .to_socket_addrs()
                .with_context(|| format!("cannot resolve {server}"))?
                .next()
                .ok_or_else(|| anyhow!("{server} resolves to no address"))?;
            return Ok(Target {
                addr,
                pid,
                in_process: false,
                server: None,
                _data: None,
            });
        }
        let data = tempfile::Builder::new()
            .prefix("muster-bench-")
            .tempdir()
            .context("cannot create a temporary data directory")?;
        let store = RedbStore::open(data.path()).context("cannot open the store")?;
        let mut options = ServerOptions::new("127.0.0.1:0", Arc::new(store));
        options.group.initial_rebalance_delay_ms = 0;
        options.group.min_session_timeout_ms = 100;
        let server = muster_server::spawn(options).context("cannot start the server")?;
        Ok(Target {
            addr: server.local_addr(),
            pid: Some(pid.unwrap_or_else(std::process::id)),
            in_process: true,
            server: Some(server),
            _data: Some(data),
        })
    }

    /// Stops an in-process server (a no-op for a remote one).
    pub fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }
}

/// Resident set size of process `pid`, in bytes (`VmRSS` of `/proc/PID/status`).
pub fn rss_bytes(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    for line in status.lines() {
        if let Some(rest) = line.strip_prefix("VmRSS:") {
            let kib: u64 = rest
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .with_context(|| format!("unreadable VmRSS line {line:?}"))?;
            return Ok(kib * 1024);
        }
    }
    bail!("no VmRSS in {path}")
}
