//! Helpers for tests that run the real `musterd` binary: start it on an ephemeral port (the
//! address is read from its log), and a blocking one-request-at-a-time connection.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use muster_protocol::*;

/// The `musterd` binary: cargo's for tests; `$MUSTERD` or the release build for examples that
/// share these helpers (examples get no `CARGO_BIN_EXE_*`).
pub fn musterd_bin() -> std::path::PathBuf {
    match option_env!("CARGO_BIN_EXE_musterd") {
        Some(bin) => bin.into(),
        None => {
            std::env::var_os("MUSTERD").map_or_else(|| "target/release/musterd".into(), Into::into)
        }
    }
}

/// Starts `musterd` on an ephemeral port and returns it with the address it reports.
pub fn start(data_dir: &std::path::Path) -> Result<(Child, SocketAddr)> {
    start_with(data_dir, &[])
}

/// Every line a server wrote to stderr so far ([`start_logged`]).
pub type Log = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// [`start`] with extra flags. The admin listener is off unless `extra` names
/// `--admin-listen`; clients are accepted on `127.0.0.1:0` unless it names `--listen`.
pub fn start_with(data_dir: &std::path::Path, extra: &[&str]) -> Result<(Child, SocketAddr)> {
    start_logged(data_dir, extra).map(|(child, addr, _)| (child, addr))
}

/// [`start_with`], keeping every line of the server's log.
pub fn start_logged(
    data_dir: &std::path::Path,
    extra: &[&str],
) -> Result<(Child, SocketAddr, Log)> {
    let admin_off: &[&str] = if extra.contains(&"--admin-listen") {
        &[]
    } else {
        &["--admin-listen", "off"]
    };
    let listen: &[&str] = if extra.contains(&"--listen") {
        &[]
    } else {
        &["--listen", "127.0.0.1:0"]
    };
    let mut child = Command::new(musterd_bin())
        .args(listen)
        .args(admin_off)
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawn musterd")?;
    let stderr = child.stderr.take().context("stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    let log = Log::default();
    let kept = std::sync::Arc::clone(&log);
    std::thread::spawn(move || {
        let mut sent = false;
        let echo = std::env::var_os("MUSTER_TEST_SERVER_LOG").is_some();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if echo {
                eprintln!("[musterd] {line}");
            }
            kept.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(line.clone());
            // The client listener's line (the admin listener logs a `local_addr` of its own).
            if !sent && line.contains("musterd listening") {
                if let Some(addr) = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("local_addr="))
                {
                    let _ = tx.send(addr.to_owned());
                    sent = true;
                }
            }
        }
    });
    let addr = match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(addr) => addr,
        Err(e) => {
            // Never leave a server behind when a test gives up on it.
            let _ = child.kill();
            let _ = child.wait();
            return Err(e).context("musterd did not report its address");
        }
    };
    Ok((child, addr.parse()?, log))
}

/// A blocking, one-request-at-a-time connection.
pub struct Conn {
    stream: TcpStream,
    next: u32,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Result<Conn> {
        Self::connect_within(addr, Duration::from_secs(10))
    }

    /// [`Conn::connect`] whose every answer must come within `timeout` (a paused server
    /// accepts connections in its kernel backlog and then never answers).
    pub fn connect_within(addr: SocketAddr, timeout: Duration) -> Result<Conn> {
        Self::connect_as(addr, timeout, None)
    }

    /// [`Conn::connect_within`], saying Hello with `token` (a server with an auth file).
    pub fn connect_as(addr: SocketAddr, timeout: Duration, token: Option<&str>) -> Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        let mut conn = Conn { stream, next: 1 };
        match conn.call(Request::Hello(HelloRequest {
            protocol_version: 1,
            client_id: "crash".into(),
            auth_token: token.map(str::to_owned),
        }))? {
            Response::Hello(h) if h.error_code == 0 => Ok(conn),
            other => bail!("hello refused: {other:?}"),
        }
    }

    pub fn call(&mut self, request: Request) -> Result<Response> {
        let correlation_id = self.send(request)?;
        let frame = self.recv()?;
        if frame.correlation_id != correlation_id {
            bail!(
                "answer to {} while waiting for {correlation_id}",
                frame.correlation_id
            );
        }
        Ok(frame.response)
    }

    /// Sends a request without waiting for its answer.
    pub fn send(&mut self, request: Request) -> Result<u32> {
        let correlation_id = self.next;
        self.next += 1;
        let mut buf = Vec::new();
        encode_request(
            &RequestFrame {
                correlation_id,
                request,
            },
            &mut buf,
        )?;
        self.stream.write_all(&buf)?;
        Ok(correlation_id)
    }

    /// Reads the next answer, whichever request it belongs to.
    pub fn recv(&mut self) -> Result<ResponseFrame> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut payload)?;
        Ok(decode_response(&payload)?)
    }
}

/// Sends one Hello (with `token`, if any) over any stream (plain TCP or TLS) and returns its
/// answer's error code.
pub fn hello_over(stream: &mut (impl Read + Write), token: Option<&str>) -> Result<i16> {
    let mut buf = Vec::new();
    encode_request(
        &RequestFrame {
            correlation_id: 1,
            request: Request::Hello(HelloRequest {
                protocol_version: 1,
                client_id: "test".into(),
                auth_token: token.map(str::to_owned),
            }),
        },
        &mut buf,
    )?;
    stream.write_all(&buf)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut payload)?;
    match decode_response(&payload)?.response {
        Response::Hello(h) => Ok(h.error_code),
        other => bail!("not a Hello answer: {other:?}"),
    }
}
